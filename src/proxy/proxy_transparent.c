/*
 * The transparent listener: connections redirected by nftables arrive
 * with their original destination (SO_ORIGINAL_DST). The first bytes name
 * the destination (SNI, or Host); the name must be allowed and must resolve
 * to that original address, so a sandbox cannot reach a forbidden IP by
 * claiming an allowed name. Anything else is opaque: allowed only to an
 * address a cidr rule covers or that the DNS listener handed out.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/netfilter_ipv4.h>

#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "dns/dns.h"
#include "proxy/front.h"
#include "vault/keeper.h"
#include "parse/tls_sni.h"

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST	80
#endif

/* Refuse in the protocol the client speaks: alert, 403, or a reset. */
void
transparent_refuse(struct exchange *s, enum sg_reason reason)
{
	struct linger lg = { 1, 0 };

	if (s->c->sniffed == SNIFF_TLS) {
		bufferevent_write(s->c->cbev, tls_alert_access_denied,
		    sizeof(tls_alert_access_denied));
		exchange_finish(s, reason_close(reason));
		return;
	}
	(void)setsockopt(bufferevent_getfd(s->c->cbev), SOL_SOCKET, SO_LINGER,
	    &lg, sizeof(lg));
	exchange_close(s, reason_close(reason));
}

static void
deny(struct exchange *s, int status, enum sg_reason reason, const char *detail)
{
	s->verdict.allow = 0;
	/*
	 * The row names where the connection was going, HTTP or not: the
	 * address refused and its port (a request with no Host, or one aimed
	 * at an address not its name's, said nothing of it).
	 */
	if (s->fwd.ip.family == 0)
		s->fwd.ip = s->c->orig_dst;
	if (s->target.port == 0)
		s->target.port = s->c->orig_port;
	if (s->c->sniffed == SNIFF_HTTP) {
		exchange_deny(s, status, reason, detail);
		return;
	}
	s->logged = 1;
	s->fwd.ip = s->c->orig_dst;	/* the row names the address refused */
	exchange_log(s, reason_verdict(reason), status, reason);
	log_debug("session %llu: %s", (unsigned long long)s->id,
	    detail ? detail : reason_word(reason));
	transparent_refuse(s, reason);
}

static int
orig_listed(const struct exchange *s)
{
	size_t i;

	for (i = 0; i < s->n_addrs; i++)
		if (netaddr_cmp(&s->addrs[i], &s->c->orig_dst) == 0)
			return 1;
	return s->p->addrmem != NULL && addrmem_has(s->p->addrmem,
	    s->ident.sandbox, s->target.host, &s->c->orig_dst);
}

/*
 * docs/protocols.md: an address the DNS listener handed this sandbox for a name
 * whose rule intercepts (or that a credential is bound to) is always
 * intercepted, whatever name the ClientHello gives or leaves out. 1 and *t
 * (that name) when so.
 */
static int
handed_out_intercepted(struct exchange *s, struct policy_target *t)
{
	char name[POLICY_HOST_MAX + 1];
	struct decide_env env;
	struct decide_q q;
	struct decision d;

	if (s->p->addrmem == NULL || addrmem_lookup(s->p->addrmem,
	    s->ident.sandbox, &s->c->orig_dst, name, sizeof(name)) == -1)
		return 0;
	memset(&env, 0, sizeof(env));
	env.pol = s->pol;
	env.keeper_up = 1;	/* asked only: would the name be intercepted */
	memset(&q, 0, sizeof(q));
	q.listener = DECIDE_TRANSPARENT;
	q.id = &s->ident;
	q.host = name;
	q.hostlen = strlen(name);
	q.port = s->c->orig_port;
	if (decide(&env, &q, &d) != REASON_NONE || !d.intercept)
		return 0;
	*t = d.target;
	return 1;
}

static void
intercept(struct exchange *s)
{
	s->c->tunnel_open = 1;
	if (proxy_tls_intercept_client(s, client_event_cb) == -1)
		deny(s, 502, keeper_client_up(s->p->kc) ? REASON_CLIENT_TLS :
		    REASON_KEEPER_UNAVAILABLE, "cannot set up interception");
}

/* The original destination as the target: an address, decided by cidr rules. */
static enum sg_reason
decide_addr(struct exchange *s)
{
	struct decide_in in = { 0 };
	char ip[NETADDR_STRLEN];

	in.host = netaddr_ntop(&s->c->orig_dst, ip, sizeof(ip));
	in.hostlen = strlen(ip);
	in.port = s->c->orig_port;
	in.no_ask = 1;	/* mode: ask asks about names */
	return proxy_decide(s, &in);
}

/* The name was allowed and all its addresses passed: is orig_dst one of them? */
static void
named_resolved(struct exchange *s)
{
	struct netaddr orig = s->c->orig_dst;
	struct policy_target t;
	char ip[NETADDR_STRLEN], detail[512];

	if (!orig_listed(s)) {
		netaddr_ntop(&orig, ip, sizeof(ip));
		snprintf(detail, sizeof(detail), "%s is not an address of %s",
		    ip, s->target.host);
		deny(s, 403, REASON_IP_PROHIBITED, detail);
		return;
	}
	(void)exchange_set_addrs(s, &orig, 1);	/* inline */
	if (!upstream_check_addrs(s, s->addrs, 1)) {
		deny(s, 403, s->verdict.reason, "original destination not allowed");
		return;
	}
	s->c->tunnel_open = 1;
	if (s->c->sniffed == SNIFF_HTTP) {
		if (conn_tunnel_http(s) == -1) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
		s->p->fe->next_request(s);
		return;
	}
	if (s->verdict.tls == POLICY_TLS_INTERCEPT || cred_host_bound(s) ||
	    handed_out_intercepted(s, &t)) {
		intercept(s);
		return;
	}
	upstream_connect(s, relay_start);
}

/*
 * Connected after 5 s of the client's silence (a server that speaks first):
 * the origin speaks, and the client's first bytes are still looked at when
 * they come (transparent_sniff).
 */
static void
silent_connected(struct exchange *s)
{
	if (upstream_guard(s) == -1)
		return;
	s->state = S_SNIFF;
	tunnel_origin_speaks(s);
	bufferevent_enable(s->c->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(s->c->cbev)) > 0)
		transparent_sniff(s);
}

/* Bytes the rule lets through unseen: to the original address, once checked. */
static void
pass_unseen(struct exchange *s)
{
	if (!upstream_check_addrs(s, s->addrs, 1)) {
		deny(s, 403, s->verdict.reason, "address not allowed");
		return;
	}
	s->c->tunnel_open = 1;
	upstream_connect(s, s->c->sniff_silent ? silent_connected : relay_start);
}

/*
 * A ClientHello without SNI: the address alone decides, and only a cidr
 * rule with opaque: true lets it pass unseen -- unless the address was
 * handed out for a name that is intercepted, which it then is.
 */
static void
decide_no_sni(struct exchange *s)
{
	struct decide_in in = { 0 };
	struct policy_target t;
	enum sg_reason r;
	int icpt;

	(void)exchange_set_addrs(s, &s->c->orig_dst, 1);	/* inline */
	/* The one path here that does not pass proxy_decide first. */
	if (proxy_decide_audit(s) != REASON_NONE) {
		deny(s, 503, REASON_AUDIT_UNAVAILABLE, NULL);
		return;
	}
	if (handed_out_intercepted(s, &t)) {
		in.host = t.host;
		in.hostlen = strlen(t.host);
		in.port = s->c->orig_port;
		in.no_ask = 1;
		if ((r = proxy_decide(s, &in)) != REASON_NONE) {
			deny(s, 403, r, "address not allowed");
			return;
		}
		if (!upstream_check_addrs(s, s->addrs, 1)) {
			deny(s, 403, s->verdict.reason, "address not allowed");
			return;
		}
		intercept(s);
		return;
	}
	if (decide_addr(s) != REASON_NONE || decide_first_bytes(&s->verdict,
	    &s->target, &(struct decide_bytes){ .kind = DECIDE_BYTES_TLS,
	    .hello_ok = 1, .sni_names = 1 }, &icpt) != REASON_NONE) {
		s->verdict.allow = 0;
		deny(s, 403, REASON_SNI_MISSING, "a ClientHello without SNI "
		    "passes only where a cidr rule with opaque: true allows it");
		return;
	}
	pass_unseen(s);
}

/* The name the first bytes gave (SNI, or Host), on the original port. */
static void
decide_name(struct exchange *s, const char *host, size_t len)
{
	struct decide_in in = { 0 };
	struct decide_bytes b = { 0 };
	enum sg_reason r;
	char detail[512];
	int icpt;

	in.host = host;
	in.hostlen = len;
	in.port = s->c->orig_port;
	if ((r = proxy_decide(s, &in)) != REASON_NONE) {
		if (s->approval_held) {
			/* Held: a reset of its client gives the share back. */
			client_watch(s);
			return;		/* asked: sniffed again once answered */
		}
		snprintf(detail, sizeof(detail), "%s:%u denied by %s",
		    s->target.host, s->target.port, s->verdict.rule);
		deny(s, 0, r, detail);
		return;
	}
	/* The decision's first-bytes stage (core/decide.c): the SNI named it. */
	b.kind = s->c->sniffed == SNIFF_TLS ? DECIDE_BYTES_TLS : DECIDE_BYTES_HTTP;
	b.hello_ok = b.has_sni = b.sni_names = 1;
	b.sni = host;
	b.sni_len = len;
	b.cred_bound = cred_host_bound(s);
	if ((r = decide_first_bytes(&s->verdict, &s->target, &b,
	    &icpt)) != REASON_NONE) {
		deny(s, r == REASON_INVALID_HOST ? 0 : 403, r,
		    r == REASON_INVALID_HOST ? "an address as SNI" :
		    "the rule limits methods or paths: it needs tls: intercept");
		return;
	}
	upstream_resolve(s, named_resolved);
}

/* Neither a named TLS nor HTTP: the address alone must be allowed, and opaque. */
static void
decide_opaque(struct exchange *s)
{
	struct decide_in in = { 0 };
	char name[POLICY_HOST_MAX + 1];
	enum sg_reason r;
	int icpt;

	r = decide_addr(s);
	if (r != REASON_NONE && s->p->addrmem != NULL &&
	    addrmem_lookup(s->p->addrmem, s->ident.sandbox, &s->c->orig_dst, name,
	    sizeof(name)) == 0) {
		/* An address the DNS listener handed out: its name's rule. */
		in.host = name;
		in.hostlen = strlen(name);
		in.port = s->c->orig_port;
		in.no_ask = 1;
		r = proxy_decide(s, &in);
	}
	if (r != REASON_NONE) {
		deny(s, 0, r, "address not allowed");
		return;
	}
	/* Neither TLS nor HTTP (or silence): the first-bytes stage. */
	if (decide_first_bytes(&s->verdict, &s->target,
	    &(struct decide_bytes){ .kind = DECIDE_BYTES_OTHER }, &icpt) !=
	    REASON_NONE) {
		deny(s, 403, REASON_PROTOCOL_DENY, "the rule is not opaque");
		return;
	}
	(void)exchange_set_addrs(s, &s->c->orig_dst, 1);	/* inline */
	pass_unseen(s);
}

static void
transparent_timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;		/* the connection, its current exchange */
	struct exchange *s = c->x;

	if (s == NULL || s->closing)
		return;

	/* The client says nothing: a server-speaks-first protocol. */
	s->c->sniffed = SNIFF_OTHER;
	s->c->sniff_silent = 1;
	bufferevent_disable(s->c->cbev, EV_READ);
	decide_opaque(s);
}

/* The Host of the first request names the destination (port: the original). */
static int
sniff_http_host(struct exchange *s, const char *p, size_t len,
    struct http_slice *host)
{
	struct http_request req;
	struct http_limits lim = { PROXY_MAX_LINE, s->p->cfg->max_header_bytes };
	uint16_t port;
	int n, has_port;

	n = http_parse_request(p, len, &lim, &req);
	if (n == HTTP_NEED_MORE)
		return 0;
	if (n < 0 || !req.has_host || http_split_authority(req.host_header.p,
	    req.host_header.len, host, &port, &has_port) != 0) {
		deny(s, 400, REASON_BAD_REQUEST, "no usable Host header");
		return -1;
	}
	return 1;
}

void
transparent_sniff(struct exchange *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
	struct tls_client_hello ch;
	struct http_slice host;
	size_t len = evbuffer_get_length(in), want;
	const uint8_t *p;
	int r;

	if (len == 0)
		return;
	want = len < TLS_CH_MAX_LEN ? len : TLS_CH_MAX_LEN;
	if ((p = evbuffer_pullup(in, (ev_ssize_t)want)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	if (s->c->sniff_silent) {
		/*
		 * After 5 s of silence the address alone was decided, opaque:
		 * waiting is no way around the SNI and Host checks, so TLS or
		 * HTTP now is refused; anything else is what opaque lets pass.
		 */
		r = p[0] == 0x16 ? 1 : tls_record_like(p, want);
		if (r == 0)
			r = http_sniff_request((const char *)p, want);
		if (r == -1)
			return;
		if (r == 1) {
			deny(s, 403, REASON_PROTOCOL_DENY, "TLS or HTTP after "
			    "5 s of silence: only opaque bytes may follow");
			return;
		}
		relay_start(s);
		return;
	}
	if (p[0] == 0x16) {
		s->c->sniffed = SNIFF_TLS;
		r = tls_parse_client_hello(p, want, &ch);
		if (r == TLS_CH_NEED_MORE && len < TLS_CH_MAX_LEN)
			return;
		evtimer_del(s->c->timer);
		bufferevent_disable(s->c->cbev, EV_READ);
		if (r != TLS_CH_OK) {
			deny(s, 403, REASON_PROTOCOL_DENY, "malformed ClientHello");
			return;
		}
		/* If passed through: a further ClientHello must name it too. */
		if (tlswatch_start(s, ch.consumed) == -1) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
		if (!ch.has_sni) {
			decide_no_sni(s);
			return;
		}
		decide_name(s, ch.sni, ch.sni_len);
		return;
	}
	/* Another TLS record first: what follows it would pass unread. */
	if ((r = tls_record_like(p, want)) == -1)
		return;
	if (r == 1) {
		s->c->sniffed = SNIFF_TLS;
		evtimer_del(s->c->timer);
		bufferevent_disable(s->c->cbev, EV_READ);
		deny(s, 403, REASON_PROTOCOL_DENY, "a TLS record other than a "
		    "ClientHello first");
		return;
	}
	r = http_sniff_request((const char *)p, want);
	if (r == -1)
		return;
	if (r == 1) {
		s->c->sniffed = SNIFF_HTTP;
		/* An HTTP head: limits.head_timeout times it, not the sniff timer. */
		if (s->p->cfg->head_timeout_ms != 0)
			evtimer_del(s->c->timer);
		conn_head_begin(s);
		if ((r = sniff_http_host(s, (const char *)p, want, &host)) != 1)
			return;
		evtimer_del(s->c->timer);
		conn_head_done(s);
		bufferevent_disable(s->c->cbev, EV_READ);
		decide_name(s, host.p, host.len);
		return;
	}
	evtimer_del(s->c->timer);
	s->c->sniffed = SNIFF_OTHER;
	bufferevent_disable(s->c->cbev, EV_READ);
	decide_opaque(s);
}

static int
original_dst(struct exchange *s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = bufferevent_getfd(s->c->cbev);
	int rc;

	memset(&ss, 0, sizeof(ss));
	if (s->c->client_addr.family == AF_INET)
		rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len);
	else
		rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len);
	if (rc == -1)
		return -1;
	netaddr_from_sockaddr((struct sockaddr *)&ss, &s->c->orig_dst,
	    &s->c->orig_port);
	return 0;
}

void
transparent_start(struct exchange *s)
{
	struct timeval tv = { PROXY_SNIFF_SECS, 0 };

	s->c->sniffed = SNIFF_OTHER;
	if (decide_identify(s->pol, &s->c->client_addr, NULL, &s->ident) !=
	    REASON_NONE) {
		deny(s, 403, REASON_NO_IDENTITY, "no sandbox has this source");
		return;
	}
	s->has_ident = 1;
	/* Counted from accept: the source alone names the sandbox here. */
	if (conn_fair_admit(s) == -1)
		return;
	if (original_dst(s) == -1) {
		log_warn("session %llu: SO_ORIGINAL_DST", (unsigned long long)s->id);
		deny(s, 502, REASON_UPSTREAM_ERROR, "no original destination");
		return;
	}
	s->state = S_SNIFF;
	s->c->sniffed = SNIFF_NONE;
	if ((s->c->timer = evtimer_new(s->w->base, transparent_timeout_cb, s->c)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	evtimer_add(s->c->timer, &tv);
}
