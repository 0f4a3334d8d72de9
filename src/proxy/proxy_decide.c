/*
 * The one decision pipeline (docs/policy.md "How a decision is made", steps
 * 1-3, and the credential-name check of docs/credentials.md) for every way a
 * destination reaches the gateway: absolute form, CONNECT, SOCKS5, the
 * transparent listener's names and addresses, and HTTP requests inside
 * tunnels. It fills the session's target and verdict -- the fields the audit
 * row is built from -- and returns the reason (REASON_NONE: allowed so far;
 * the addresses are upstream.c's).
 */
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/reason.h"
#include "proxy/proxy_int.h"
#include "vault/keeper.h"

static enum sg_reason
decided(struct session *s, enum sg_reason r, const char *rule)
{
	if (r == REASON_NONE)
		return r;
	s->verdict.allow = 0;
	s->verdict.reason = r;
	if (rule != NULL || s->verdict.rule[0] == '\0')
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "%s",
		    rule != NULL ? rule : "default-deny");
	return r;
}

/* 1 when a Host header value names the tunnel's own host and port. */
static int
host_is_tunnel(const struct session *s, const char *v, size_t len)
{
	struct policy_target t;
	struct http_slice host;
	uint16_t port = s->target.port;
	int has_port;

	if (http_split_authority(v, len, &host, &port, &has_port) != 0 ||
	    policy_target_init(&t, host.p, host.len, port) == -1)
		return 0;
	if (!has_port)
		port = s->target.port;
	return port == s->target.port && t.is_ip == s->target.is_ip &&
	    strcmp(t.host, s->target.host) == 0;
}

/*
 * audit.on_failure: deny. While audit.db cannot take rows nothing new goes
 * anywhere: the same 503 whatever the policy would say, rule "audit".
 */
enum sg_reason
proxy_decide_audit(struct session *s)
{
	if (!audit_refuses(s->p->audit))
		return REASON_NONE;
	return decided(s, REASON_AUDIT_UNAVAILABLE, "audit");
}

enum sg_reason
proxy_decide(struct session *s, const struct decide_in *in)
{
	memset(&s->verdict, 0, sizeof(s->verdict));
	if (in->tunnel_host != NULL || in->tunnel_request) {
		/* Inside a tunnel: its name, and the Host must say the same. */
		memcpy(s->verdict.rule, s->tunnel_rule, sizeof(s->verdict.rule));
		if (in->tunnel_host == NULL ||
		    !host_is_tunnel(s, in->tunnel_host, in->tunnel_host_len) ||
		    (in->tunnel_abs != NULL &&
		    !host_is_tunnel(s, in->tunnel_abs, in->tunnel_abs_len)))
			return decided(s, REASON_HOST_MISMATCH, NULL);
	} else if (in->host != NULL && (in->port == 0 ||
	    policy_target_init(&s->target, in->host, in->hostlen,
	    in->port) == -1)) {
		/* Port 0 is the policy's "any port" (DNS): no connection's. */
		session_note_target(s, in->host, in->hostlen, in->port);
		return decided(s, REASON_INVALID_HOST, NULL);
	}
	if (proxy_decide_audit(s) != REASON_NONE)
		return REASON_AUDIT_UNAVAILABLE;
	if (!s->has_ident)
		return decided(s, REASON_NO_IDENTITY, "no-identity");
	/* A placeholder inside a destination name is an exfiltration attempt. */
	if (cred_in_name(s->p, s->target.host, s->fwd.plan.cred,
	    sizeof(s->fwd.plan.cred)))
		return decided(s, REASON_CRED_MISUSE, NULL);
	if (!policy_decide(s->pol, &s->ident, &s->target, in->method,
	    in->path, &s->verdict))
		return decided(s, s->verdict.reason, NULL);
	/* A tunnel that will be intercepted needs the keeper: not while it is away. */
	if (!keeper_client_up(s->p->kc) &&
	    (s->kind == KIND_CONNECT || s->kind == KIND_SOCKS5) &&
	    in->tunnel_host == NULL && !in->tunnel_request &&
	    (s->verdict.tls == POLICY_TLS_INTERCEPT || cred_host_bound(s)))
		return decided(s, REASON_KEEPER_UNAVAILABLE, NULL);
	return REASON_NONE;
}
