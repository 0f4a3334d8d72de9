/*
 * One audit row decided again under a candidate policy (policy_replay.h):
 * the stages decide() can run from the row's columns, and for the others
 * (addresses, GeoIP, a tunnel's first bytes, credentials) whether the
 * setting they read differs from the policy in force, or the row says no more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decide.h"
#include "core/policy_int.h"
#include "core/policy_replay.h"
#include "core/reason.h"

/* What stage made a recorded refusal, from its reason. */
enum stage {
	STAGE_RULES,		/* deny/allow rules, names, dns_types */
	STAGE_ADDRESSES,	/* internal addresses, countries, ASNs */
	STAGE_BYTES,		/* a tunnel's first bytes */
	STAGE_CREDENTIALS,	/* placeholders and keys in the request */
	STAGE_OTHER		/* the request itself, limits, the gateway's state */
};

static enum sg_reason
reason_parse(const char *w)
{
	int r;

	if (w == NULL)
		return REASON_NONE;
	for (r = 1; r < REASON_MAX; r++)
		if (reason_word((enum sg_reason)r) != NULL &&
		    strcmp(reason_word((enum sg_reason)r), w) == 0)
			return (enum sg_reason)r;
	return REASON_MAX;
}

static enum stage
reason_stage(enum sg_reason r)
{
	switch (r) {
	case REASON_NONE:
	case REASON_POLICY_DENY:
	case REASON_UNKNOWN_POLICY:
	case REASON_INVALID_HOST:
	case REASON_DNS_TYPE:
	/*
	 * mode: ask: the rules allowed nothing and an operator (or the clock)
	 * said no; under the candidate its rules decide again.
	 */
	case REASON_APPROVAL_DENIED:
	case REASON_APPROVAL_TIMEOUT:
	case REASON_APPROVAL_LIMIT:
		return STAGE_RULES;
	case REASON_IP_PROHIBITED:
	case REASON_COUNTRY_DENY:
	case REASON_ASN_DENY:
		return STAGE_ADDRESSES;
	case REASON_NEEDS_INTERCEPT:
	case REASON_SNI_MISSING:
	case REASON_PROTOCOL_DENY:
	case REASON_SNI_MISMATCH:
		return STAGE_BYTES;
	case REASON_CRED_MISUSE:
	case REASON_FOREIGN_CRED:
	case REASON_CRED_REQUIRED:
	case REASON_CRED_SCOPE:
	case REASON_CRED_UNAVAILABLE:
	case REASON_CRED_REFRESH_FAILED:
	case REASON_AWS_SIG_INVALID:
	case REASON_AWS_CHUNKED:
	case REASON_AWS_BODY:
	case REASON_AWS_SIG_UNSUPPORTED:
		return STAGE_CREDENTIALS;
	default:
		return STAGE_OTHER;
	}
}

static const struct policy_def *
def_by_name(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; p != NULL && i < p->n_defs; i++)
		if (strcmp(p->defs[i].name, name) == 0)
			return &p->defs[i];
	return NULL;
}

static int
cidr_same(const struct cidr *a, const struct cidr *b)
{
	return a->bits == b->bits && netaddr_cmp(&a->addr, &b->addr) == 0;
}

/* allow_private of two policies (NULL: none, as the implicit default). */
static int
private_same(const struct policy_def *a, const struct policy_def *b)
{
	size_t na = a ? a->n_priv : 0, nb = b ? b->n_priv : 0, i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++) {
		const struct policy_private *x = &a->priv[i], *y = &b->priv[i];

		if (x->is_name != y->is_name || x->wildcard != y->wildcard)
			return 0;
		if (x->is_name ? strcmp(x->host, y->host) != 0 :
		    !cidr_same(&x->cidr, &y->cidr))
			return 0;
	}
	return 1;
}

static int
geo_any(const struct policy_def *d)
{
	return d != NULL && (d->n_country_deny > 0 || d->n_asn_deny > 0);
}

static int
geo_same(const struct policy_def *a, const struct policy_def *b)
{
	size_t nca = a ? a->n_country_deny : 0, ncb = b ? b->n_country_deny : 0;
	size_t naa = a ? a->n_asn_deny : 0, nab = b ? b->n_asn_deny : 0;

	if (nca != ncb || naa != nab)
		return 0;
	return (nca == 0 || memcmp(a->country_deny, b->country_deny,
	    nca * sizeof(a->country_deny[0])) == 0) && (naa == 0 ||
	    memcmp(a->asn_deny, b->asn_deny, naa * sizeof(a->asn_deny[0])) == 0);
}

static int
strv_same(char *const *a, size_t na, char *const *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return 0;
	return 1;
}

static int
cred_same(const struct policy_credential *a, const struct policy_credential *b)
{
	return strcmp(a->name, b->name) == 0 && a->kind == b->kind &&
	    a->query == b->query && a->exclusive == b->exclusive &&
	    a->require == b->require &&
	    strv_same(a->headers, a->n_headers, b->headers, b->n_headers) &&
	    strv_same(a->scope_methods, a->n_scope_methods, b->scope_methods,
	    b->n_scope_methods) &&
	    strv_same(a->scope_paths, a->n_scope_paths, b->scope_paths,
	    b->n_scope_paths);
}

/* The credentials of two policies bound to host: the same, in order? */
static int
creds_same(const struct policy *pa, const char *na, const struct policy *pb,
    const char *nb, const char *host)
{
	const struct policy_credential *const *va, *const *vb;
	size_t n_a, n_b, i = 0, j = 0;

	va = policy_credentials(pa, na, &n_a);
	vb = policy_credentials(pb, nb, &n_b);
	for (;;) {
		while (i < n_a && !policy_credential_bound(va[i], host))
			i++;
		while (j < n_b && !policy_credential_bound(vb[j], host))
			j++;
		if (i == n_a || j == n_b)
			return i == n_a && j == n_b;
		if (!cred_same(va[i], vb[j]))
			return 0;
		i++, j++;
	}
}

/* "P:allow[N]" / "P:deny[N]" -> P; 0, or -1 when rule names no policy. */
static int
rule_policy(const char *rule, char *out, size_t len)
{
	const char *c;

	if (rule == NULL || (c = strrchr(rule, ':')) == NULL || c == rule ||
	    (strncmp(c + 1, "allow[", 6) != 0 && strncmp(c + 1, "deny[", 5) != 0) ||
	    (size_t)(c - rule) >= len)
		return -1;
	memcpy(out, rule, (size_t)(c - rule));
	out[c - rule] = '\0';
	return 0;
}

static int
qtype_parse(const char *s, uint16_t *out)
{
	char *end;
	unsigned long v;

	if (s == NULL)
		return -1;
	if (strncmp(s, "TYPE", 4) == 0 && s[4] >= '0' && s[4] <= '9') {
		v = strtoul(s + 4, &end, 10);
		if (*end != '\0' || v > 65535)
			return -1;
		*out = (uint16_t)v;
		return 0;
	}
	/* The names dns_types knows, and those the DNS listener writes beside. */
	static const struct {
		const char	*name;
		uint16_t	 t;
	} more[] = { { "OPT", 41 }, { "RRSIG", 46 }, { "NSEC", 47 },
	    { "IXFR", 251 }, { "AXFR", 252 }, { "ANY", 255 } };
	size_t i;

	if (policy_qtype_by_name(s, out) == 0)
		return 0;
	for (i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		if (strcmp(s, more[i].name) == 0) {
			*out = more[i].t;
			return 0;
		}
	return -1;
}

static enum decide_listener
row_listener(const char *kind, int request)
{
	if (strcmp(kind, "dns") == 0)
		return DECIDE_DNS;
	if (request || strcmp(kind, "http") == 0)
		return DECIDE_HTTP;
	if (strcmp(kind, "connect") == 0)
		return DECIDE_CONNECT;
	if (strcmp(kind, "socks5") == 0)
		return DECIDE_SOCKS5;
	return DECIDE_TRANSPARENT;
}

static int
skip(struct replay_result *res, const char *why, const char *detail)
{
	res->cls = REPLAY_SKIP;
	res->why = why;
	res->detail = detail;
	return 0;
}

static int
undecidable(struct replay_result *res, const char *why, const char *detail)
{
	res->cls = REPLAY_UNDECIDABLE;
	res->why = why;
	res->detail = detail;
	res->now = NULL;
	res->rule[0] = '\0';
	res->reason = NULL;
	return 0;
}

/* The candidate's outcome: passed (allow or report) or refused, vs the row's. */
static int
outcome(struct replay_result *res, int old_pass, int new_pass)
{
	res->cls = old_pass == new_pass ? REPLAY_SAME : old_pass ?
	    REPLAY_ALLOW_TO_DENY : REPLAY_DENY_TO_ALLOW;
	return 0;
}

static void
set_now(struct replay_result *res, const struct decision *d)
{
	snprintf(res->rule, sizeof(res->rule), "%s", d->v.rule);
	if (!d->v.allow) {
		res->now = "deny";
		res->reason = reason_word(d->v.reason) ? reason_word(d->v.reason) :
		    "default-deny";
	} else if (d->v.report != REASON_NONE) {
		res->now = "report";
		res->reason = reason_word(d->v.report);
	} else {
		res->now = "allow";
		res->reason = "allowed";
	}
}

static int
replay(const struct policy *cand, const struct policy *cur,
    const struct replay_row *row, struct replay_result *res)
{
	struct policy_identity id, cid;
	struct decide_env env, cenv;
	struct decide_q q, cq;
	struct decision d, cd;
	const struct policy_def *nd, *od;
	enum sg_reason old_r;
	enum stage old_stage;
	char oldpol[POLICY_NAME_MAX + 1];
	int old_pass, dns, request, tunnel, old_known, no_other, no_tls;
	uint16_t qtype = 0;

	memset(res, 0, sizeof(*res));
	if (row->kind == NULL || (strcmp(row->kind, "http") != 0 &&
	    strcmp(row->kind, "connect") != 0 && strcmp(row->kind, "socks5") != 0 &&
	    strcmp(row->kind, "dns") != 0 && strcmp(row->kind, "transparent") != 0))
		return skip(res, "not-a-decision", "not a destination's row");
	if (row->decision == NULL || (strcmp(row->decision, "allow") != 0 &&
	    strcmp(row->decision, "report") != 0 &&
	    strcmp(row->decision, "deny") != 0))
		return skip(res, "not-a-decision", "an error after the decision");
	old_pass = strcmp(row->decision, "deny") != 0;
	old_r = old_pass ? REASON_NONE : reason_parse(row->reason);
	old_stage = reason_stage(old_r);
	if (row->sandbox == NULL || row->sandbox[0] == '\0')
		return skip(res, "no-sandbox", "no identity: nothing to decide "
		    "for (the proxy token and source are not in the row)");
	dns = strcmp(row->kind, "dns") == 0;
	/* A request's row (in a tunnel too) has its method; a tunnel's: CONNECT or none. */
	request = !dns && row->method != NULL &&
	    strcmp(row->method, "CONNECT") != 0;
	tunnel = !dns && !request && strcmp(row->kind, "http") != 0;
	if (row->host == NULL || row->host[0] == '\0' || row->host[0] == '-' ||
	    (!dns && (row->port < 1 || row->port > 65535)) ||
	    (dns && qtype_parse(row->method, &qtype) == -1))
		return skip(res, "no-destination", "the row names no destination");

	/* Which policy the sandbox had then, and has under the candidate. */
	old_known = policy_identity_by_id(cur, row->sandbox, &cid) == 0;
	if (!old_known && rule_policy(row->rule, oldpol, sizeof(oldpol)) == 0) {
		memset(&cid, 0, sizeof(cid));
		snprintf(cid.sandbox, sizeof(cid.sandbox), "%s", row->sandbox);
		snprintf(cid.policy, sizeof(cid.policy), "%s", oldpol);
		old_known = 2;	/* a launcher's sandbox: the row's rule says */
	}
	if (policy_identity_by_id(cand, row->sandbox, &id) == 0)
		;
	else if (old_known == 2)
		id = cid;	/* registered by the launcher under that name */
	else if (old_known == 1) {
		/* A static sandbox the candidate does not define: no identity. */
		memset(&id, 0, sizeof(id));
	} else
		return undecidable(res, "sandbox-policy", "the sandbox's policy "
		    "is not known: a launcher's sandbox whose row names no rule");
	snprintf(res->policy, sizeof(res->policy), "%s", id.policy);

	memset(&env, 0, sizeof(env));
	env.pol = cand;
	env.keeper_up = 1;
	memset(&q, 0, sizeof(q));
	q.listener = row_listener(row->kind, request);
	q.id = id.policy[0] != '\0' ? &id : NULL;
	q.host = row->host;
	q.hostlen = strlen(row->host);
	q.port = dns ? 0 : (uint16_t)row->port;
	q.method = request ? row->method : NULL;
	q.path = request ? (row->path != NULL ? row->path : "/") : NULL;
	q.qtype = qtype;
	q.qclass = 1;
	decide(&env, &q, &d);
	set_now(res, &d);
	/* Refused by the stages the row holds everything for. */
	if (!d.v.allow)
		return outcome(res, old_pass, 0);

	/* The candidate's rules let it pass; what came after them then? */
	if (!old_pass) {
		if (old_stage == STAGE_BYTES)
			return undecidable(res, "first-bytes", "refused then by "
			    "the tunnel's first bytes, which the row does not "
			    "hold");
		if (old_stage == STAGE_CREDENTIALS)
			return undecidable(res, "credentials", "refused then "
			    "for a credential in the request, which the row "
			    "does not hold");
		if (old_stage == STAGE_OTHER)
			return undecidable(res, "request", "refused then for "
			    "the request itself, a limit or the gateway's "
			    "state, not by the policy");
	}
	nd = def_by_name(cand, id.policy);
	od = old_known ? def_by_name(cur, cid.policy) : NULL;
	/*
	 * A tunnel that passed then: the candidate's rule refuses bytes
	 * neither TLS nor HTTP (not opaque) or TLS passed through (it limits
	 * methods or paths without intercepting). Which bytes it carried is
	 * not in the row; that the rule in force then refused the same ones
	 * is.
	 */
	no_other = !d.v.opaque;
	no_tls = d.v.inspect && !d.intercept;
	if (tunnel && old_pass && (no_other || no_tls)) {
		memset(&cenv, 0, sizeof(cenv));
		cenv.pol = cur;
		cenv.keeper_up = 1;
		cq = q;
		cq.id = old_known ? &cid : NULL;
		if (!old_known || decide(&cenv, &cq, &cd) != REASON_NONE ||
		    (no_other && cd.v.opaque) ||
		    (no_tls && !(cd.v.inspect && !cd.intercept)))
			return undecidable(res, "first-bytes", no_tls ?
			    "the candidate's rule limits methods or paths "
			    "without tls: intercept: a TLS tunnel is refused, "
			    "plain HTTP is not; the row does not say which it "
			    "carried" : "the tunnel may have carried bytes "
			    "neither TLS nor HTTP (opaque then, not now)");
	}
	if (old_pass && !d.target.is_ip && (!old_known ||
	    !creds_same(cand, id.policy, cur, cid.policy, d.target.host)))
		return undecidable(res, "credentials", "the credentials bound "
		    "to this host differ: their checks read the request's "
		    "headers, which the row does not hold");
	if (d.target.is_ip) {
		/* The address is in the row: the address stage runs. */
		if (decide_addrs(&env, &id, &d.target.ip, 1, &d) != REASON_NONE) {
			set_now(res, &d);
			return outcome(res, old_pass, 0);
		}
		if (geo_any(nd)) {
			if ((row->country == NULL || row->country[0] == '\0') &&
			    row->asn < 0)
				return undecidable(res, "geoip", "the candidate "
				    "has country or ASN rules and the row holds "
				    "no GeoIP data");
			if (!policy_check_geo(cand, &id, row->country,
			    row->asn < 0 ? 0 : (uint32_t)row->asn, &d.v)) {
				set_now(res, &d);
				return outcome(res, old_pass, 0);
			}
			set_now(res, &d);
		}
		return outcome(res, old_pass, 1);
	}
	/* A name: its addresses are not in the row. */
	if (old_pass || old_stage == STAGE_ADDRESSES) {
		if (!old_known || !private_same(nd, od))
			return undecidable(res, "addresses", "allow_private "
			    "differs and the name's addresses are not in the "
			    "row");
		if (!geo_same(nd, od))
			return undecidable(res, "geoip", "countries or asns "
			    "differ and the name's addresses are not in the "
			    "row");
		if (old_pass)
			return outcome(res, 1, 1);
		/* Refused then by the address stage, with the same settings. */
		if ((old_r == REASON_COUNTRY_DENY || old_r == REASON_ASN_DENY) &&
		    d.v.report_mode) {
			res->now = "report";
			res->reason = reason_word(old_r);
			return outcome(res, 0, 1);
		}
		res->now = "deny";
		res->reason = reason_word(old_r);
		return outcome(res, 0, 0);
	}
	/* Refused by the rules then: never resolved, never connected. */
	res->unchecked = tunnel && (no_other || no_tls) ?
	    "addresses, first bytes" : "addresses";
	return outcome(res, 0, 1);
}

void
policy_replay_row(const struct policy *cand, const struct policy *cur,
    const struct replay_row *row, struct replay_result *res)
{
	(void)replay(cand, cur, row, res);
}
