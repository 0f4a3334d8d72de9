/*
 * The origin side of an exchange: resolve the target once, check every
 * address against the policy, and connect only to an address that was
 * checked (tried in order, with the configured connect timeout).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"

static void	try_next_addr(struct exchange *);

static void
resolved(struct exchange *s, void (*next)(struct exchange *))
{
	char detail[512];

	if (!upstream_check_addrs(s, s->addrs, s->n_addrs)) {
		snprintf(detail, sizeof(detail), "%s resolves to an address "
		    "this policy may not reach", s->target.host);
		exchange_deny(s, 403, s->verdict.reason, detail);
		return;
	}
	next(s);
}

/* A silent upstream resolver: the lookup ends within connect_timeout. */
static void
resolve_deadline_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct exchange *s = arg;
	char detail[512];

	if (s->rq == NULL)
		return;
	resolver_cancel(s->rq);
	s->rq = NULL;
	snprintf(detail, sizeof(detail), "cannot resolve %s: timeout",
	    s->target.host);
	exchange_deny(s, 504, REASON_DNS_ERROR, detail);
}

static void
resolve_cb(int result, const struct netaddr *addrs, size_t n, uint32_t ttl,
    void *arg)
{
	struct exchange *s = arg;
	void (*next)(struct exchange *) = s->on_connected;
	char detail[512];

	s->rq = NULL;
	if (s->dns_timer != NULL)
		evtimer_del(s->dns_timer);
	if (result != RESOLVER_OK || n == 0) {
		snprintf(detail, sizeof(detail), "cannot resolve %s: %s",
		    s->target.host, result == RESOLVER_ENOTFOUND ? "no such name" :
		    result == RESOLVER_ETIMEOUT ? "timeout" : "lookup failed");
		exchange_deny(s, result == RESOLVER_ETIMEOUT ? 504 : 502,
		    REASON_DNS_ERROR, detail);
		return;
	}
	if (exchange_set_addrs(s, addrs, n) == -1) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	resolved(s, next);
}

/*
 * While the gateway waits on something other than the client -- a lookup,
 * an origin's connect, an operator's answer -- it reads nothing from it,
 * so a client that reset its connection was not seen until that wait timed
 * out, and its sandbox's share stayed taken (all of it, with a few such
 * connections: the sandbox locked out for connect_timeout or
 * approval.timeout). One readiness of the socket is watched, without
 * reading: a reset (SO_ERROR set) ends the exchange; a FIN or more bytes
 * end the watch (a half-closed client still wants its answer, and bytes
 * are the request's to read once the wait is over). Plain sockets only: a
 * TLS client's bytes are under its filter.
 */
static void
client_gone_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exchange *s = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	(void)what;
	if (s->closing || !(s->state == S_RESOLVING ||
	    s->state == S_CONNECTING || s->approval_held))
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
		exchange_close(s, CLOSE_CLIENT_ERROR);
}

void
client_watch(struct exchange *s)
{
	evutil_socket_t fd;

	if (s->is_stream || s->c->cbev == NULL ||
	    bufferevent_get_underlying(s->c->cbev) != NULL ||
	    (fd = bufferevent_getfd(s->c->cbev)) < 0)
		return;
	if (s->gone_ev == NULL && (s->gone_ev = event_new(s->w->base, fd,
	    EV_READ, client_gone_cb, s)) == NULL)
		return;
	(void)event_add(s->gone_ev, NULL);
}

void
client_watch_free(struct exchange *s)
{
	if (s->gone_ev != NULL)
		event_free(s->gone_ev);
	s->gone_ev = NULL;
}

void
upstream_resolve(struct exchange *s, void (*next)(struct exchange *))
{
	uint32_t ms = s->p->cfg->connect_timeout_ms;
	struct timeval tv;

	s->state = S_RESOLVING;
	if (EXCHANGE_CBEV(s) != NULL) {
		bufferevent_disable(s->c->cbev, EV_READ);
		client_watch(s);
	}
	s->addr_next = 0;
	if (s->target.is_ip) {
		(void)exchange_set_addrs(s, &s->target.ip, 1);	/* inline */
		resolved(s, next);
		return;
	}
	s->on_connected = next;
	s->rq = resolver_lookup(s->w->resolver, s->target.host, resolve_cb, s);
	if (s->rq == NULL) {
		exchange_deny(s, 502, REASON_DNS_ERROR, "resolver unavailable");
		return;
	}
	if (s->dns_timer == NULL &&
	    (s->dns_timer = evtimer_new(s->w->base, resolve_deadline_cb,
	    s)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(s->dns_timer, &tv);
}


static void
connect_failed(struct exchange *s, int timed_out)
{
	char detail[512];
	int status = timed_out ? 504 : 502;
	enum sg_reason reason = timed_out ? REASON_UPSTREAM_TIMEOUT :
	    REASON_UPSTREAM_CONNECT;

	snprintf(detail, sizeof(detail), "cannot connect to %s:%u",
	    s->target.host, s->target.port);
	if (s->c->tunnel_open && !s->c->tunnel_http) {
		/* The 200 is already out: all a tunnel can do is close. */
		s->verdict.allow = 0;
		exchange_log(s, VERDICT_ERROR, status, reason);
		exchange_close(s, reason_close(reason));
		return;
	}
	exchange_deny(s, status, reason, detail);
}

static void
connect_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;

	if (what & BEV_EVENT_CONNECTED) {
		struct timespec tcp;

		if (s->c->intercepted && s->c->kind != KIND_INGRESS) {
			/* TCP when its socket took the ClientHello; TLS now */
			if (proxy_tls_tcp_connected(bev, &tcp) == 0)
				exchange_stamp(s, &s->t.tcp, &tcp);
			exchange_stamp(s, &s->t.tls, NULL);
			proxy_tls_origin_connected(s, bev);
		} else
			exchange_stamp(s, &s->t.tcp, NULL);
		origin_bind_set(s, &s->addrs[s->addr_next - 1]);
		bufferevent_set_timeouts(bev, NULL, NULL);
		bufferevent_setwatermark(bev, EV_READ, 0, PROXY_READ_HWM);
		s->on_connected(s);
		return;
	}
	if (s->c->intercepted && s->c->kind != KIND_INGRESS &&
	    !(what & BEV_EVENT_TIMEOUT)) {
		char why[256];
		proxy_tls_origin_error(bev, why, sizeof(why));
		if (strstr(why, "rejected") != NULL ||
		    strcmp(why, "origin TLS handshake failed") != 0) {
			/* A bad origin certificate is never retried elsewhere. */
			s->fwd.ip = s->addrs[s->addr_next - 1];
			upstream_drop(s);
			log_warnx("session %llu: %s:%u: %s",
			    (unsigned long long)s->id, s->target.host,
			    s->target.port, why);
			exchange_deny(s, 502, REASON_UPSTREAM_TLS, why);
			return;
		}
	}
	upstream_drop(s);
	if (s->addr_next >= s->n_addrs) {
		connect_failed(s, (what & BEV_EVENT_TIMEOUT) != 0);
		return;
	}
	try_next_addr(s);
}

static void
try_next_addr(struct exchange *s)
{
	struct sockaddr_storage ss;
	struct timeval tv;
	socklen_t sslen;
	uint32_t ms = s->p->cfg->connect_timeout_ms;

	while (s->addr_next < s->n_addrs) {
		const struct netaddr *a = &s->addrs[s->addr_next++];
		struct bufferevent *bev;

		sslen = netaddr_to_sockaddr(a, s->target.port, &ss);
		/* Ingress TLS ends at the gateway: the guest speaks plain HTTP. */
		bev = s->c->intercepted && s->c->kind != KIND_INGRESS ?
		    proxy_tls_origin_bev(s) :
		    bufferevent_socket_new(s->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (bev == NULL)
			break;
		if ((s->o = origin_new(s->w, bev)) == NULL) {
			proxy_tls_bev_free(bev);
			break;
		}
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		bufferevent_setcb(EXCHANGE_OBEV(s), NULL, NULL, connect_event_cb, s);
		/* The read timeout bounds a TLS handshake that stalls. */
		bufferevent_set_timeouts(EXCHANGE_OBEV(s), s->c->intercepted ? &tv : NULL, &tv);
		if (s->c->intercepted)
			exchange_mark(s, MARK_ORIGIN_CONNECT);
		exchange_stamp(s, &s->t.connect, NULL);	/* the first try's */
		if (proxy_tls_connect(EXCHANGE_OBEV(s),
		    (struct sockaddr *)&ss, (int)sslen) == 0)
			return;
		upstream_drop(s);
	}
	connect_failed(s, 0);
}

void
upstream_connect(struct exchange *s, void (*next)(struct exchange *))
{
	s->state = S_CONNECTING;
	s->on_connected = next;
	if (EXCHANGE_CBEV(s) != NULL) {
		bufferevent_disable(s->c->cbev, EV_READ);
		client_watch(s);
	}
	upstream_drop(s);
	s->addr_next = 0;
	try_next_addr(s);
}

int
upstream_guard(struct exchange *s)
{
	if (upstream_reusable(s))
		return 0;
	/* A broken invariant, not a peer's doing: fail closed, never write. */
	log_warnx("session %llu: origin connection not opened for %s:%u; "
	    "closed before any byte was written", (unsigned long long)s->id,
	    s->target.host, s->target.port);
	s->verdict.allow = 0;
	if (EXCHANGE_IS_HTTP(s) && !s->fwd.resp_head_done) {
		exchange_deny(s, 502, REASON_INTERNAL_ERROR,
		    "internal error: origin connection mismatch");
		return -1;
	}
	exchange_log(s, VERDICT_ERROR, 502, REASON_INTERNAL_ERROR);
	exchange_close(s, CLOSE_FAILED);
	return -1;
}
