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
