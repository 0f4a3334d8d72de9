/*
 * The one decision for every listener: its stages in the order
 * docs/policy.md "How a decision is made" gives them (see decide.h).
 */
#include <stdio.h>
#include <string.h>

#include "core/decide.h"
#include "core/geoip.h"
#include "core/log.h"
#include "core/reason.h"

#define DNS_CLASS_IN	1

/* A denial at this stage: rule names the stage when no rule decided. */
static enum sg_reason
deny(struct decision *d, enum sg_reason r, const char *rule)
{
	d->v.allow = 0;
	d->v.reason = r;
	d->reason = r;
	d->verdict = reason_verdict(r);
	if (rule != NULL || d->v.rule[0] == '\0')
		snprintf(d->v.rule, sizeof(d->v.rule), "%s",
		    rule != NULL ? rule : "default-deny");
	return r;
}

static enum sg_reason
allowed(struct decision *d)
{
	d->v.allow = 1;
	d->v.reason = REASON_NONE;
	d->reason = REASON_NONE;
	d->verdict = d->v.report != REASON_NONE ? VERDICT_REPORT :
	    VERDICT_ALLOW;
	return REASON_NONE;
}

int
decide_note_target(struct policy_target *t, const char *host, size_t len,
    uint16_t port)
{
	char esc[POLICY_HOST_MAX + 1];

	if (policy_target_init(t, host, len, port) == 0)
		return 1;
	log_escape_word(host, len, esc, sizeof(esc));
	memset(t, 0, sizeof(*t));
	snprintf(t->host, sizeof(t->host), "%s", esc[0] != '\0' ? esc : "-");
	t->port = port;
	return 0;
}

/* 1 when an authority (a Host value, split) names the tunnel's own host and port. */
static int
names_tunnel(const struct policy_target *tun, const struct decide_authority *a)
{
	struct policy_target t;
	uint16_t port = a->port != 0 ? a->port : tun->port;

	if (a->host == NULL ||
	    policy_target_init(&t, a->host, a->len, port) == -1)
		return 0;
	return t.port == tun->port && t.is_ip == tun->is_ip &&
	    strcmp(t.host, tun->host) == 0;
}

enum sg_reason
decide_identify(const struct policy *pol, const struct netaddr *src,
    const struct decide_cred *presented, struct policy_identity *out)
{
	if (presented != NULL) {
		if (presented->id == NULL || policy_identify_token(pol,
		    presented->id, presented->idlen, presented->token,
		    presented->tokenlen, out) == -1)
			return REASON_AUTH_FAILED;
		return REASON_NONE;
	}
	if (src == NULL || policy_identify_source(pol, src, out) == -1)
		return REASON_NO_IDENTITY;
	return REASON_NONE;
}

enum sg_reason
decide_sni(const struct policy_target *tunnel, int has_sni, const char *sni,
    size_t len)
{
	struct policy_target t;

	if (tunnel->is_ip)
		return has_sni ? REASON_SNI_MISMATCH : REASON_NONE;
	if (!has_sni || policy_target_init(&t, sni, len, tunnel->port) == -1 ||
	    t.is_ip || strcmp(t.host, tunnel->host) != 0)
		return REASON_SNI_MISMATCH;
	return REASON_NONE;
}

enum sg_reason
decide_first_bytes(struct policy_verdict *v, const struct policy_target *t,
    const struct decide_bytes *b, int *intercept)
{
	enum sg_reason r;

	*intercept = 0;
	switch (b->kind) {
	case DECIDE_BYTES_HTTP:
		return REASON_NONE;
	case DECIDE_BYTES_OTHER:
		if (v->opaque || policy_verdict_report(v, REASON_PROTOCOL_DENY))
			return REASON_NONE;
		return REASON_PROTOCOL_DENY;
	case DECIDE_BYTES_TLS:
		break;
	}
	if (!b->hello_ok)
		return REASON_PROTOCOL_DENY;
	if (b->sni_names) {
		if (!b->has_sni)
			return v->opaque ||
			    policy_verdict_report(v, REASON_SNI_MISSING) ?
			    REASON_NONE : REASON_SNI_MISSING;
		if (t->is_ip)
			return REASON_INVALID_HOST;
	} else if ((r = decide_sni(t, b->has_sni, b->sni, b->sni_len)) !=
	    REASON_NONE)
		return r;
	if (v->tls == POLICY_TLS_INTERCEPT || b->cred_bound) {
		*intercept = 1;
		return REASON_NONE;
	}
	/* Methods and paths cannot be seen in a passed-through TLS stream. */
	if (v->inspect && !policy_verdict_report(v, REASON_NEEDS_INTERCEPT))
		return REASON_NEEDS_INTERCEPT;
	return REASON_NONE;
}

int
decide_cred_bound(const struct policy *pol, const struct policy_identity *id,
    const struct policy_target *t)
{
	const struct policy_credential *const *cv;
	size_t i, n;

	if (pol == NULL || id == NULL || t->is_ip)
		return 0;
	cv = policy_credentials(pol, id->policy, &n);
	for (i = 0; i < n; i++)
		if (policy_credential_bound(cv[i], t->host))
			return 1;
	return 0;
}

enum sg_reason
decide_addrs(const struct decide_env *env, const struct policy_identity *id,
    const struct netaddr *addrs, size_t n, struct decision *d)
{
	struct geoip_result g;
	struct policy_verdict one;
	size_t i;

	d->has_refused = 0;
	if (!policy_check_addrs(env->pol, id, &d->target, addrs, n, &d->v)) {
		/* The row names the first address refused (the IP itself). */
		if (d->target.is_ip) {
			d->refused = d->target.ip;
			d->has_refused = 1;
		}
		for (i = 0; i < n && !d->has_refused; i++) {
			one = d->v;
			one.allow = 1;
			one.reason = REASON_NONE;
			if (!policy_check_addrs(env->pol, id, &d->target,
			    &addrs[i], 1, &one)) {
				d->refused = addrs[i];
				d->has_refused = 1;
			}
		}
		return deny(d, d->v.reason, NULL);
	}
	if (env->geoip == NULL)
		return allowed(d);
	for (i = 0; i < n; i++) {
		/* A failed lookup leaves unknown what it did not find. */
		if (geoip_lookup(env->geoip, &addrs[i], &g) == -1)
			d->geo_failed = 1;
		if (!policy_check_geo(env->pol, id, g.country, g.asn, &d->v)) {
			d->refused = addrs[i];
			d->has_refused = 1;
			return deny(d, d->v.reason, NULL);
		}
	}
	return allowed(d);
}

/* Toward a sandbox: which one, which port, running, and its token. */
static enum sg_reason
decide_ingress(const struct decide_env *env, const struct decide_q *q,
    struct decision *d)
{
	if (q->ingress_id == NULL || policy_ingress_find(env->pol,
	    q->ingress_id, &d->ingress, &d->ident) == -1)
		return deny(d, REASON_INGRESS_UNKNOWN_SANDBOX, NULL);
	d->has_ident = 1;
	if (!policy_ingress_has_port(&d->ingress, d->target.port))
		return deny(d, REASON_INGRESS_PORT, NULL);
	if (!d->ingress.running)
		return deny(d, REASON_INGRESS_NOT_RUNNING, NULL);
	if (!d->ingress.is_public) {
		if (q->token == NULL)
			return deny(d, REASON_INGRESS_TOKEN_MISSING, NULL);
		if (q->token_malformed || !policy_ingress_token_ok(&d->ingress,
		    q->token, q->token_len))
			return deny(d, REASON_INGRESS_TOKEN_INVALID, NULL);
	}
	d->target_ok = 1;
	return allowed(d);
}

enum sg_reason
decide(const struct decide_env *env, const struct decide_q *q,
    struct decision *d)
{
	int valid, tunnel = q->listener == DECIDE_TUNNEL;
	int dns = q->listener == DECIDE_DNS;
	size_t i;

	memset(d, 0, sizeof(*d));
	/* target: recorded before anything can deny, for the row. */
	if (q->host != NULL)
		valid = decide_note_target(&d->target, q->host, q->hostlen,
		    q->port);
	else if (q->target != NULL) {
		d->target = *q->target;
		valid = 1;
	} else {
		snprintf(d->target.host, sizeof(d->target.host), "-");
		valid = 0;
	}
	if (tunnel && q->tunnel_rule != NULL)
		snprintf(d->v.rule, sizeof(d->v.rule), "%s", q->tunnel_rule);
	if (q->listener == DECIDE_INGRESS)
		snprintf(d->v.rule, sizeof(d->v.rule), "ingress");
	/* audit */
	if (env->audit_refuses)
		return deny(d, REASON_AUDIT_UNAVAILABLE, "audit");
	if (q->listener == DECIDE_INGRESS)
		return decide_ingress(env, q, d);
	/* identity */
	if (q->id == NULL)
		return deny(d, REASON_NO_IDENTITY, "no-identity");
	/* name */
	if (dns && q->qclass != DNS_CLASS_IN)
		return deny(d, REASON_DNS_TYPE, NULL);
	/* Port 0 is the policy's "any port" (DNS's): no connection's. */
	if (!valid || (!dns && d->target.port == 0))
		return deny(d, REASON_INVALID_HOST, NULL);
	/* A name written as an IP is no host name a rule can allow. */
	if (dns && d->target.is_ip)
		return deny(d, REASON_INVALID_HOST, NULL);
	if (tunnel && (q->tunnel_host == NULL ||
	    !names_tunnel(&d->target, q->tunnel_host) ||
	    (q->tunnel_abs != NULL && !names_tunnel(&d->target, q->tunnel_abs))))
		return deny(d, REASON_HOST_MISMATCH, NULL);
	d->target_ok = 1;
	/* credential: a placeholder in a name is an exfiltration attempt. */
	if (env->cred_in_name != NULL && !d->target.is_ip &&
	    env->cred_in_name(env->arg, d->target.host, d->cred,
	    sizeof(d->cred)))
		return deny(d, REASON_CRED_MISUSE, NULL);
	/* rules */
	if (dns) {
		if (policy_decide_dns(env->pol, q->id, &d->target, q->qtype,
		    &d->v) != 1)
			return deny(d, d->v.reason, NULL);
	} else if (!policy_decide(env->pol, q->id, &d->target, q->method,
	    q->path, &d->v))
		return deny(d, d->v.reason, NULL);
	/*
	 * What an origin may read the request as: each reading is decided
	 * too, and the first refused refuses the request (never asked about:
	 * an operator is asked about the request as written).
	 */
	for (i = 0; !dns && i < q->n_alt; i++) {
		struct policy_verdict alt;

		if (!policy_decide(env->pol, q->id, &d->target,
		    q->alt[i].method, q->alt[i].path, &alt)) {
			d->v = alt;
			d->v.ask = 0;
			return deny(d, alt.reason, NULL);
		}
		if (d->v.report == REASON_NONE && alt.report != REASON_NONE) {
			d->v.report = alt.report;
			snprintf(d->v.rule, sizeof(d->v.rule), "%s", alt.rule);
		}
	}
	d->cred_bound = decide_cred_bound(env->pol, q->id, &d->target);
	d->intercept = d->v.tls == POLICY_TLS_INTERCEPT || d->cred_bound;
	/* keeper: an intercepted tunnel needs its leaf signed. */
	if (!env->keeper_up && d->intercept &&
	    (q->listener == DECIDE_CONNECT || q->listener == DECIDE_SOCKS5))
		return deny(d, REASON_KEEPER_UNAVAILABLE, NULL);
	/* addresses */
	if (q->n_addrs > 0)
		return decide_addrs(env, q->id, q->addrs, q->n_addrs, d);
	return allowed(d);
}
