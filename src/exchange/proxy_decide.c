/*
 * The exchange's side of the one decision (core/decide.c): what an exchange
 * knows goes in as a decide_q, the decision comes back into the fields the
 * audit row is built from (s->target, s->verdict, the credential a misuse
 * names). Every way a destination reaches the gateway comes through here:
 * absolute form, CONNECT, SOCKS5, the transparent listener's names and
 * addresses, and HTTP requests inside tunnels.
 */
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "dlp/dlp.h"
#include "exchange/exchange.h"
#include "vault/keeper.h"

static int
name_has_placeholder(void *arg, const char *host, char *cred, size_t len)
{
	return cred_in_name(arg, host, cred, len);
}

static void
env_of(const struct exchange *s, struct decide_env *env)
{
	memset(env, 0, sizeof(*env));
	env->pol = s->pol;
	env->geoip = s->p->geoip;
	env->audit_refuses = audit_refuses(s->p->audit);
	env->keeper_up = keeper_client_up(s->p->kc);
	env->cred_in_name = name_has_placeholder;
	env->arg = s->p;
}

static enum decide_listener
listener_of(const struct exchange *s)
{
	switch (s->c->kind) {
	case KIND_CONNECT:
		return DECIDE_CONNECT;
	case KIND_SOCKS5:
		return DECIDE_SOCKS5;
	case KIND_TRANSPARENT:
		return DECIDE_TRANSPARENT;
	default:
		return DECIDE_HTTP;
	}
}

/* An authority as the parser splits it; host NULL when it does not parse. */
static void
split(const char *v, size_t len, struct decide_authority *a)
{
	struct http_slice host;
	uint16_t port = 0;
	int has_port;

	memset(a, 0, sizeof(*a));
	if (http_split_authority(v, len, &host, &port, &has_port) != 0)
		return;
	a->host = host.p;
	a->len = host.len;
	a->port = has_port ? port : 0;
}

struct name_skip {
	const struct policy_dlp	*pd;
	const char		*host;
	const char		*path;
};

static int
name_skip_cb(const char *rule, void *arg)
{
	struct name_skip *k = arg;

	return policy_dlp_exempt(k->pd, k->host, k->path, rule);
}

/* 1 when p[0..n) holds a rule's secret or a vault value not bound here. */
static int
text_has_secret(struct exchange *s, const struct policy_dlp *pd,
    const char *p, size_t n)
{
	struct name_skip k = { pd, s->target.host, s->fwd.path };
	struct dlp_finding f;
	struct dlp_scan *sc;
	int rc;

	if (n == 0)
		return 0;
	if ((sc = dlp_scan_new(pd->set, name_skip_cb, &k)) == NULL)
		return 1;	/* cannot tell: keep it out of the row */
	rc = dlp_scan_buf(sc, p, n, &f);
	dlp_scan_free(sc);
	if (rc == 0 && !policy_dlp_exempt(pd, s->target.host, s->fwd.path,
	    "vault-secret"))
		rc = dlp_vault_seek(s->p, s->pol, s->target.host, p, n);
	return rc != 0;
}

/*
 * A request the policy refused never reaches dlp's scan, but its row and
 * log line print its target: a secret there keeps out of them as a dlp
 * finding's does (docs/dlp.md, "What happens"): the query becomes
 * "?[redacted]", or the whole target "/[redacted]".
 */
static void
refused_target_scrub(struct exchange *s)
{
	const struct policy_dlp *pd;
	char *old = s->fwd.path, *q, *nw;
	size_t plen, keep;

	if (old == NULL || !s->has_ident || (pd = policy_dlp_of(s->pol,
	    s->ident.policy)) == NULL || policy_dlp_exempt(pd, s->target.host,
	    old, NULL))
		return;
	q = strchr(old, '?');
	plen = q != NULL ? (size_t)(q - old) : strlen(old);
	if (text_has_secret(s, pd, old, plen))
		keep = 0;
	else if (q != NULL && text_has_secret(s, pd, q + 1, strlen(q + 1)))
		keep = plen;
	else
		return;
	if ((nw = exchange_alloc(s, keep + 16)) == NULL)
		return;
	memcpy(nw, old, keep);
	snprintf(nw + keep, 16, "%s", keep > 0 ? "?[redacted]" : "/[redacted]");
	explicit_bzero(old, strlen(old));
	s->fwd.path = nw;
}

/*
 * audit.on_failure: deny. While audit.db cannot take rows nothing new goes
 * anywhere: the same 503 whatever the policy would say, rule "audit".
 */
enum sg_reason
proxy_decide_audit(struct exchange *s)
{
	if (!audit_refuses(s->p->audit))
		return REASON_NONE;
	s->verdict.allow = 0;
	s->verdict.reason = REASON_AUDIT_UNAVAILABLE;
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "audit");
	return REASON_AUDIT_UNAVAILABLE;
}

enum sg_reason
proxy_decide(struct exchange *s, const struct decide_in *in)
{
	struct decide_authority host, abs;
	struct decide_env env;
	struct decide_q q;
	struct decision d;

	env_of(s, &env);
	memset(&q, 0, sizeof(q));
	q.listener = listener_of(s);
	q.id = s->has_ident ? &s->ident : NULL;
	q.method = in->method;
	q.path = in->path;
	q.alt = in->alt;
	q.n_alt = in->n_alt;
	if (in->tunnel_host != NULL || in->tunnel_request) {
		/* Inside a tunnel: its name, and the Host must say the same. */
		q.listener = DECIDE_TUNNEL;
		q.target = &s->target;
		q.tunnel_rule = s->c->tun != NULL ? s->c->tun->rule : "";
		if (in->tunnel_host != NULL) {
			split(in->tunnel_host, in->tunnel_host_len, &host);
			q.tunnel_host = &host;
		}
		if (in->tunnel_abs != NULL) {
			split(in->tunnel_abs, in->tunnel_abs_len, &abs);
			q.tunnel_abs = &abs;
		}
	} else if (in->host != NULL) {
		q.host = in->host;
		q.hostlen = in->hostlen;
		q.port = in->port;
	} else
		q.target = &s->target;
	(void)decide(&env, &q, &d);
	/* mode: ask: no rule allowed it -- held, or answered already. */
	if (d.v.ask && q.listener != DECIDE_TUNNEL && !in->no_ask)
		approval_gate(s, &d);
	/* Inside a tunnel an answer opened: what it carries goes as it does. */
	else if (d.v.ask && q.tunnel_rule != NULL &&
	    strncmp(q.tunnel_rule, "approval", 8) == 0) {
		d.v.allow = 1;
		d.v.ask = 0;
		d.v.reason = REASON_NONE;
		d.reason = REASON_NONE;
		d.verdict = VERDICT_ALLOW;
		snprintf(d.v.rule, sizeof(d.v.rule), "%s", q.tunnel_rule);
	}
	exchange_decided(s);
	s->target = d.target;
	s->verdict = d.v;
	snprintf(s->fwd.plan.cred, sizeof(s->fwd.plan.cred), "%s", d.cred);
	/* Refused by the policy: no secret of its target goes into the row. */
	if (d.reason != REASON_NONE && !s->approval_held)
		refused_target_scrub(s);
	/* A destination name carrying an encoded payload (docs/dlp.md). */
	if (d.reason == REASON_NONE && q.listener != DECIDE_TUNNEL &&
	    d.target_ok && !s->target.is_ip && dlp_name(s, "name", in->host,
	    in->host != NULL ? in->hostlen : 0) == 1) {
		s->verdict.allow = 0;
		return REASON_SECRET_DETECTED;
	}
	return d.reason;
}



/*
 * The decision's address stage for addrs (core/decide.c): every address
 * must be reachable (allow_private) and outside denied countries and
 * ASNs. 1 allow; 0 deny, s->fwd.ip naming the first address refused.
 */
int
upstream_check_addrs(struct exchange *s, const struct netaddr *addrs, size_t n)
{
	struct decide_env env;

	env_of(s, &env);
	return exchange_check_addrs(s, &env, addrs, n) == REASON_NONE;
}

/* docs/tls.md: a credential of this sandbox's policy bound to the host. */
int
cred_host_bound(const struct exchange *s)
{
	return s->has_ident && decide_cred_bound(s->pol, &s->ident,
	    &s->target);
}

/* A name's finding under pd: named on the row and the log; 1 refuse. */
static int
name_finding(struct exchange *s, const struct policy_dlp *pd,
    const struct dlp_finding *f, const char *where)
{
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "dlp:%s %s %s",
	    f->rule, where, f->excerpt);
	log_warnx("dlp: %s (%s) toward *.%s, sandbox %s: %s", f->rule, where,
	    strchr(s->target.host, '.') ? strchr(s->target.host, '.') + 1 : "",
	    s->ident.sandbox, pd->mode == POLICY_DLP_BLOCK ? "refused" :
	    "reported");
	if (pd->mode == POLICY_DLP_BLOCK) {
		s->verdict.reason = REASON_SECRET_DETECTED;
		return 1;
	}
	if (s->verdict.report == REASON_NONE)
		s->verdict.report = REASON_SECRET_DETECTED;
	return 0;
}

/*
 * The rules' secrets in a name (sk_live_... as a label): the name as the
 * client wrote it (raw, its case: an AWS key id is upper-case), else the
 * normal form. 1 found (*f), 0 not, -1 no scanner (fail closed).
 */
static int
name_content(struct exchange *s, const struct policy_dlp *pd,
    const char *raw, size_t rawlen, struct dlp_finding *f)
{
	struct name_skip k = { pd, s->target.host, NULL };
	struct dlp_scan *sc;
	int rc;

	if (raw == NULL || rawlen == 0) {
		raw = s->target.host;
		rawlen = strlen(raw);
	}
	if ((sc = dlp_scan_new(pd->set, name_skip_cb, &k)) == NULL)
		return -1;
	rc = dlp_scan_buf(sc, raw, rawlen, f);
	dlp_scan_free(sc);
	return rc;
}

int
dlp_name(struct exchange *s, const char *where, const char *raw,
    size_t rawlen)
{
	const struct policy_dlp *pd;
	struct dlp_finding f;
	char rbuf[POLICY_HOST_MAX + 16];
	const char *dot, *last;
	int rc, buf_len;

	if (!s->has_ident || (pd = policy_dlp_of(s->pol,
	    s->ident.policy)) == NULL || policy_dlp_exempt(pd,
	    s->target.host, NULL, NULL))
		return 0;
	if (dlp_dns_name(s->target.host, strlen(s->target.host), &f) &&
	    !policy_dlp_exempt(pd, s->target.host, NULL, f.rule))
		return name_finding(s, pd, &f, where);
	rc = name_content(s, pd, raw, rawlen, &f);
	if (rc == 0 && !policy_dlp_exempt(pd, s->target.host, NULL,
	    "vault-secret") && (rc = dlp_vault_seek(s->p, s->pol,
	    s->target.host, raw != NULL && rawlen > 0 ? raw : s->target.host,
	    raw != NULL && rawlen > 0 ? rawlen : strlen(s->target.host))) == 1) {
		memset(&f, 0, sizeof(f));
		snprintf(f.rule, sizeof(f.rule), "vault-secret");
		f.severity = DLP_SEV_CRITICAL;
		snprintf(f.excerpt, sizeof(f.excerpt), "-");
	}
	if (rc == 0)
		return 0;
	/*
	 * The name holds the secret's own text (not an encoding of it): the
	 * row keeps its parent only (docs/dlp.md, "What happens").
	 */
	if ((last = strrchr(s->target.host, '.')) != NULL) {
		for (dot = last; dot > s->target.host && dot[-1] != '.'; dot--)
			;
		if (dot == s->target.host)	/* two labels: the last alone */
			dot = last + 1;
	} else
		dot = "";
	buf_len = snprintf(rbuf, sizeof(rbuf), "[redacted].%s", dot);
	s->row_host = exchange_strndup(s, rbuf, buf_len > 0 &&
	    (size_t)buf_len < sizeof(rbuf) ? (size_t)buf_len : 0);
	if (rc == -1) {
		memset(&f, 0, sizeof(f));
		snprintf(f.rule, sizeof(f.rule), "scan-error");
		snprintf(f.excerpt, sizeof(f.excerpt), "-");
	}
	return name_finding(s, pd, &f, where);
}

int
dlp_name_burst(struct exchange *s, struct dlp_burst *b, int64_t now_ms)
{
	const struct policy_dlp *pd;
	struct dlp_finding f;

	if (b == NULL || !s->has_ident || (pd = policy_dlp_of(s->pol,
	    s->ident.policy)) == NULL || policy_dlp_exempt(pd,
	    s->target.host, NULL, NULL) || policy_dlp_exempt(pd,
	    s->target.host, NULL, "dns-encoded-burst") ||
	    !dlp_burst_add(b, s->ident.sandbox, s->target.host,
	    strlen(s->target.host), now_ms, &f))
		return 0;
	return name_finding(s, pd, &f, "dns");
}
