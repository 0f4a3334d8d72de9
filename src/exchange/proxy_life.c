/*
 * The life of exchanges on a connection: the connection and its first
 * exchange made on accept (conn_make), a stream's (exchange_open), the
 * next one at each request head (exchange_next, the old one ending), the
 * single exit exchange_close() (the connection's too for its own
 * exchange), deferred freeing, idle timing, error answers and the one row
 * per decision.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "audit/audit.h"
#include "core/geoip.h"
#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "core/refusal.h"
#include "exchange/exchange.h"

static void	exchange_free_cb(evutil_socket_t, short, void *);
static void	exchange_discard(struct exchange *);
static void	exchange_idle_cb(evutil_socket_t, short, void *);

struct exchange *
exchange_open(struct worker *w, struct conn *c, int stream)
{
	struct exchange *x;

	if ((x = exchange_new()) == NULL)
		return NULL;
	x->w = w;
	x->p = w->proxy;
	x->c = c;
	x->is_stream = stream;
	/* In the exchange's own memory (exchange_new): nothing to free. */
	x->free_ev = exchange_event_room(x, 0);
	x->idle_ev = exchange_event_room(x, 1);
	if (event_assign(x->free_ev, w->base, -1, 0, exchange_free_cb, x) == -1 ||
	    evtimer_assign(x->idle_ev, w->base, exchange_idle_cb, x) == -1) {
		exchange_free(x);
		return NULL;
	}
	c->refs++;
	if (stream)
		atomic_fetch_add(&x->p->n_conns, 1);
	TAILQ_INSERT_TAIL(&w->exchanges, x, entry);
	return x;
}

/* Made but never run (conn_make, exchange_next failing): gone at once. */
static void
exchange_discard(struct exchange *x)
{
	struct conn *c = x->c;

	TAILQ_REMOVE(&x->w->exchanges, x, entry);
	event_del(x->idle_ev);
	exchange_free(x);
	if (c->x == x)
		c->x = NULL;
	conn_unref(c);
}

struct exchange *
conn_make(struct worker *w, enum listener_kind lk, evutil_socket_t fd,
    const struct sockaddr *sa, int socklen)
{
	struct exchange *s;
	struct conn *c;
	uint16_t port = 0;
	char abuf[NETADDR_STRLEN];

	(void)socklen;
	if ((c = conn_new()) == NULL)
		return NULL;
	if ((s = exchange_open(w, c, 0)) == NULL) {
		free(c);	/* no reference taken */
		return NULL;
	}
	c->x = s;
	c->id = ++w->next_session * (uint64_t)w->proxy->n_workers +
	    (uint64_t)w->index;
	s->id = c->id;
	s->state = lk == LISTENER_SOCKS5 ? S_SOCKS_GREETING : S_HEAD;
	c->kind = lk == LISTENER_SOCKS5 ? KIND_SOCKS5 :
	    lk == LISTENER_TRANSPARENT ? KIND_TRANSPARENT :
	    lk == LISTENER_INGRESS ? KIND_INGRESS : KIND_HTTP;
	netaddr_from_sockaddr(sa, &c->client_addr, &port);
	netaddr_ntop(&c->client_addr, abuf, sizeof(abuf));
	snprintf(c->client_str, sizeof(c->client_str),
	    c->client_addr.family == AF_INET6 ? "[%s]:%u" : "%s:%u", abuf, port);
	c->cbev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->cbev == NULL) {
		exchange_discard(s);
		return NULL;
	}
	s->pol = proxy_policy_get(s->p);
	bufferevent_setcb(c->cbev, s->p->fe->client_read, NULL,
	    client_event_cb, s);
	/* A whole request head must fit before reads pause. */
	bufferevent_setwatermark(c->cbev, EV_READ, 0,
	    PROXY_READ_HWM > s->p->cfg->max_header_bytes + 1024 ?
	    PROXY_READ_HWM : s->p->cfg->max_header_bytes + 1024);
	bufferevent_enable(c->cbev, EV_READ | EV_WRITE);
	exchange_set_idle(s);
	return s;
}

/*
 * The start of every exchange's end (exchange_close, exchange_retire):
 * inert from now on, off its worker's list, its lookup and timers gone.
 */
static void
exchange_stop(struct exchange *s)
{
	s->closing = 1;
	TAILQ_REMOVE(&s->w->exchanges, s, entry);
	if (s->rq != NULL) {
		resolver_cancel(s->rq);
		s->rq = NULL;
	}
	if (s->dns_timer != NULL)
		event_free(s->dns_timer);
	s->dns_timer = NULL;
	if (s->idle_ev != NULL)
		event_del(s->idle_ev);	/* its room goes with the exchange */
	s->idle_ev = NULL;
}

/* Callers up the stack may still look at s: it is freed from the loop. */
void
exchange_retire(struct exchange *s)
{
	exchange_stop(s);
	/*
	 * Nothing outlives it by accident: what the parts above hung on it,
	 * an origin connection (exchange_next left its own in the pool
	 * already; none of these is there on the paths that get here).
	 */
	s->p->parts->release(s);
	upstream_drop(s);
	event_active(s->free_ev, EV_TIMEOUT, 0);
}

struct exchange *
exchange_next(struct exchange *s)
{
	struct conn *c = s->c;
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	struct exchange *x;
	void *arg;

	if ((x = exchange_open(s->w, c, 0)) == NULL)
		return NULL;
	x->id = s->id;
	x->state = S_HEAD;
	if (c->kind == KIND_INGRESS)
		snprintf(x->verdict.rule, sizeof(x->verdict.rule), "ingress");
	if (c->tunnel_http && c->tun != NULL && c->kind != KIND_INGRESS) {
		/*
		 * The tunnel's identity and policy; refused before its own
		 * decision: the tunnel's rule.
		 */
		x->pol = c->tun->pol;
		policy_ref(x->pol);
		x->has_ident = c->tun->has_ident;
		x->ident = c->tun->ident;
		memcpy(x->verdict.rule, c->tun->rule, sizeof(x->verdict.rule));
		x->target = c->tun->target;
		if (exchange_set_addrs(x, c->tun->addrs, c->tun->n_addrs) ==
		    -1) {
			exchange_discard(x);
			return NULL;
		}
	}
	/*
	 * Anywhere else a request is asked from its identity up, on the
	 * current policy (the explicit proxy, ingress: each request says who
	 * it is).
	 */
	if (x->pol == NULL)
		x->pol = proxy_policy_get(s->p);
	/*
	 * The exchange ending writes its row if it has none: a tunnel that
	 * connected to its origin before its first bytes (an opaque rule)
	 * and then carried requests is a decision that reached an origin,
	 * whether or not a request inside it ever completes. (A request's
	 * exchange that reached its origin has written its row by the time
	 * the next head starts.)
	 */
	if (!s->logged && s->verdict.allow && s->fwd.ip.family != 0)
		exchange_log(s, VERDICT_ALLOW, 200, REASON_NONE);
	/*
	 * Its origin connection waits in the worker's pool, bound to the
	 * decision it was opened for, for an exchange of that same decision
	 * (upstream_take); one not worth keeping is closed.
	 */
	if (s->o != NULL && upstream_keep_in(s) == -1)
		upstream_drop(s);
	/* The client socket's callbacks act on the connection's current exchange. */
	if (c->cbev != NULL) {
		bufferevent_getcb(c->cbev, &rcb, &wcb, &ecb, &arg);
		if (arg == s)
			bufferevent_setcb(c->cbev, rcb, wcb, ecb, x);
	}
	c->x = x;
	exchange_retire(s);
	exchange_set_idle(x);
	return x;
}

static void
exchange_free_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct exchange *s = arg;
	struct conn *c = s->c;

	(void)fd;
	(void)ev;
	exchange_free(s);	/* its row is written: it goes whole, events too */
	if (c->x == s)
		c->x = NULL;
	conn_unref(c);
}


/* One line per intercepted connection with its phases (serve -d). */
static void
conn_log_marks(const struct conn *s)
{
	static const char *const names[MARK_N] = { "hello", "leaf",
	    "client-tls", "request", "origin-connect", "origin-tls",
	    "response-head", "response-done" };
	char line[512];
	size_t off = 0;
	int i, n;

	if (s->marks[MARK_HELLO] == 0 || !log_enabled(LOG_LVL_DEBUG))
		return;
	for (i = 0; i < MARK_N && off < sizeof(line); i++) {
		if (s->marks[i] == 0)
			continue;
		n = snprintf(line + off, sizeof(line) - off, " %s=%u", names[i],
		    s->marks[i] - 1);
		if (n < 0)
			return;
		off += (size_t)n;
	}
	log_debug("session %llu: phases in us after accept:%s origin-session=%s",
	    (unsigned long long)s->id, line, s->marks[MARK_ORIGIN_TLS] == 0 ?
	    "none" : s->origin_resumed ? "resumed" : "full");
}

/* A close that is a failure of the relay rather than an end. */
static int
close_is_error(enum sg_close c)
{
	return c == CLOSE_CLIENT_ERROR || c == CLOSE_ORIGIN_ERROR;
}

/*
 * The connection ends, and with it its exchange: the row it has not
 * written yet, from what it did. An upgraded connection's is the 101 and
 * every byte it moved; a request that reached its origin has its row
 * however it ends; a tunnel is one decision, written when it ends, with
 * the 200 its client was sent (CONNECT and SOCKS5 answer before the
 * origin is connected). How an allowed tunnel ended is not a decision
 * reason, unless
 * the seccomp filter refused a call its relay made on this thread
 * (refusal_take: the call that just failed).
 */
static void
exchange_end(struct exchange *s, enum sg_close reason)
{
	struct exchange *x = s;

	if (x->fwd.switched) {
		x->fwd.switched = 0;
		exchange_log(s, VERDICT_ALLOW, 101, REASON_NONE);
	}
	/*
	 * A request allowed and ended before it wrote its row -- the client
	 * went (an HTTP/2 stream reset) while the origin was being connected
	 * or answered -- still has its row: the decision was made.
	 */
	if (EXCHANGE_IS_HTTP(s) && (s->state == S_FORWARD ||
	    s->state == S_CONNECTING) && x->verdict.allow && !x->logged)
		exchange_log(s, VERDICT_ALLOW, x->fwd.status, REASON_NONE);
	if (s->c->kind == KIND_HTTP || s->c->kind == KIND_INGRESS || x->logged ||
	    !x->verdict.allow || s->is_stream)
		return;
	if (close_is_error(reason) && refusal_pending())
		exchange_log(s, VERDICT_ERROR, 0, REASON_SYSCALL_REFUSED);
	else
		exchange_log(s, VERDICT_ALLOW, 200, REASON_NONE);
}

void
exchange_close(struct exchange *s, enum sg_close reason)
{
	if (s->closing)
		return;
	exchange_stop(s);
	if (s->c->x == s)
		conn_log_marks(s->c);
	if (s->close_reason == CLOSE_NONE)
		s->close_reason = reason;
	log_debug("session %llu: closed: %s", (unsigned long long)s->id,
	    close_word(s->close_reason));
	exchange_end(s, reason);
	if (s->c->x == s)
		conn_close_timers(s->c);
	s->p->fe->closed(s);	/* a stream's place, a connection's streams */
	/*
	 * What the parts above hang on it: an HTTP/2 origin session, an h2
	 * connection's origin connection, the origin connections its streams
	 * left, a WebSocket relay, splice's pipes (before the bufferevents: it
	 * owns the sockets then).
	 */
	s->p->parts->release(s);
	if (s->c->x == s && s->c->cbev != NULL) {
		proxy_tls_bev_free(s->c->cbev);
		s->c->cbev = NULL;
	}
	if (s->c->x == s)
		conn_tunnel_closed(s);
	upstream_drop(s);
	atomic_fetch_sub(&s->p->n_conns, 1);
	conn_fair_release(s);
	/* Callers up the stack may still look at *s: free it from the loop. */
	event_active(s->free_ev, EV_TIMEOUT, 0);
}

/*
 * A tunnel still waiting for its first bytes, whose client began a TLS
 * record (a ClientHello, cut short) and went: a handshake with the gateway
 * that failed when the gateway was to terminate it (tls: intercept, or a
 * credential bound), not a clean tunnel (docs/audit.md client-tls-error).
 */
static int
client_tls_cut(struct exchange *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
	unsigned char b;

	if (evbuffer_copyout(in, &b, 1) != 1 || b != 0x16)
		return 0;
	return s->verdict.tls == POLICY_TLS_INTERCEPT || (s->has_ident &&
	    decide_cred_bound(s->pol, &s->ident, &s->target));
}

void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;

	if (what & BEV_EVENT_CONNECTED) {
		s->c->tls_client_ok = 1;	/* intercepted: the client trusted our leaf */
		exchange_mark(s, MARK_CLIENT_TLS);
		return;
	}
	if (s->c->intercepted && !s->c->tls_client_ok) {
		/* Most often a sandbox that does not trust sandgate's CA. */
		if (s->c->kind == KIND_INGRESS)
			log_info("session %llu: ingress TLS handshake from %s "
			    "failed", (unsigned long long)s->id, s->c->client_str);
		else
			log_warnx("session %llu: client TLS handshake for %s "
			    "failed (does the client trust the sandgate CA?)",
			    (unsigned long long)s->id, s->target.host);
		s->verdict.allow = 0;
		exchange_log(s, VERDICT_ERROR, 0, REASON_CLIENT_TLS);
		exchange_close(s, CLOSE_FAILED);
		return;
	}
	if (s->state == S_SNIFF && client_tls_cut(s)) {
		log_info("session %llu: the client's TLS handshake for %s ended "
		    "in its ClientHello", (unsigned long long)s->id,
		    s->target.host);
		s->verdict.allow = 0;
		exchange_log(s, VERDICT_ERROR, 0, REASON_CLIENT_TLS);
		exchange_close(s, CLOSE_FAILED);
		return;
	}
	if (what & BEV_EVENT_EOF)
		exchange_close(s, CLOSE_CLIENT_CLOSED);
	else
		exchange_close(s, CLOSE_CLIENT_ERROR);
}

/* Bytes still on their way to the client, through a TLS filter too. */
static size_t
client_pending(struct exchange *s)
{
	struct bufferevent *u = bufferevent_get_underlying(s->c->cbev);
	size_t n = evbuffer_get_length(bufferevent_get_output(s->c->cbev));

	if (u != NULL)
		n += evbuffer_get_length(bufferevent_get_output(u));
	if (s->c->intercepted)
		n += proxy_tls_client_unsent(s);
	return n;
}

static void
finish_check_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct exchange *s = arg;
	struct timeval tv = { 0, 10000 };
	SSL *ssl;

	/*
	 * Intercepted: once the last answer is inside TLS, end the TLS session
	 * with close_notify so strict clients see a clean end, not a truncation.
	 */
	if (s->c->intercepted && !s->c->tls_shutdown_sent && s->c->tls_client_ok &&
	    evbuffer_get_length(bufferevent_get_output(s->c->cbev)) == 0 &&
	    (ssl = bufferevent_openssl_get_ssl(s->c->cbev)) != NULL) {
		s->c->tls_shutdown_sent = 1;
		(void)SSL_shutdown(ssl);
		ERR_clear_error();
	}
	if (client_pending(s) == 0) {
		exchange_close(s, s->close_reason);
		return;
	}
	/* A filter's socket drains without telling us: look again shortly. */
	if (s->c->finish_ev == NULL &&
	    (s->c->finish_ev = evtimer_new(s->w->base, finish_check_cb, s)) == NULL) {
		exchange_close(s, s->close_reason);
		return;
	}
	if (bufferevent_get_underlying(s->c->cbev) != NULL)
		evtimer_add(s->c->finish_ev, &tv);
}

static void
finish_write_cb(struct bufferevent *bev, void *arg)
{
	finish_check_cb(-1, 0, arg);
}

void
exchange_finish(struct exchange *s, enum sg_close reason)
{
	struct timeval tv = { 5, 0 };

	if (s->closing)
		return;
	s->state = S_FINISHING;
	if (s->close_reason == CLOSE_NONE)
		s->close_reason = reason;
	upstream_drop(s);
	if (s->rq != NULL) {
		resolver_cancel(s->rq);
		s->rq = NULL;
	}
	if (EXCHANGE_CBEV(s) == NULL) {
		/* An HTTP/2 stream's exchange: its answer is with the stream. */
		exchange_close(s, reason);
		return;
	}
	if (s->c->timer != NULL)
		evtimer_del(s->c->timer);
	bufferevent_disable(s->c->cbev, EV_READ);
	if (client_pending(s) == 0 && !(s->c->intercepted && s->c->tls_client_ok)) {
		exchange_close(s, reason);
		return;
	}
	bufferevent_setcb(s->c->cbev, NULL, finish_write_cb, client_event_cb, s);
	if (evbuffer_get_length(bufferevent_get_output(s->c->cbev)) == 0 ||
	    s->c->intercepted) {
		finish_check_cb(-1, 0, s);
		if (s->closing)
			return;		/* all of it was out already */
	}
	bufferevent_setwatermark(s->c->cbev, EV_WRITE, 0, 0);
	/* A client that never reads its answer does not hold the connection. */
	evtimer_add(s->idle_ev, &tv);
}

static const char *
status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 302: return "Found";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

static void
hdr_set(struct http_header *h, const char *name, const char *value)
{
	h->name.p = name;
	h->name.len = strlen(name);
	h->value.p = value;
	h->value.len = strlen(value);
}

/* The gateway's answer on an HTTP/2 stream: fields and payload (proxy_h2.c). */
static void
stream_error(struct exchange *s, int status, const char *reason,
    const char *body, size_t len)
{
	struct http_response r;
	struct evbuffer *b;
	size_t n = 0;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.version_minor = 1;
	hdr_set(&r.headers[n++], "Content-Type", "text/plain; charset=utf-8");
	hdr_set(&r.headers[n++], "X-Sandgate-Reason", reason);
	if (status == 407)
		hdr_set(&r.headers[n++], "Proxy-Authenticate",
		    "Basic realm=\"sandgate\"");
	if (status == 429)
		hdr_set(&r.headers[n++], "Retry-After", "1");
	r.n_headers = n;
	r.framing = HTTP_BODY_LENGTH;
	r.content_length = len;
	if (fe_stream_response(s, &r) == -1 || (b = evbuffer_new()) == NULL)
		return;
	evbuffer_add(b, body, len);
	(void)fe_stream_data(s, b);
	(void)fe_stream_end(s, NULL, 0);
	evbuffer_free(b);
}

void
exchange_http_error(struct exchange *s, int status, enum sg_reason r,
    const char *detail)
{
	const char *reason = reason_word(r);
	struct evbuffer *out;
	char body[768];
	int n;

	if (s->closing)
		return;
	n = snprintf(body, sizeof(body), "sandgate: %s (%s)\n",
	    detail ? detail : status_text(status), reason);
	if (n < 0 || (size_t)n >= sizeof(body))
		n = (int)strlen(body);
	if (s->h2st != NULL) {
		stream_error(s, status, reason, body, (size_t)n);
		exchange_finish(s, reason_close(r));
		return;
	}
	out = bufferevent_get_output(s->c->cbev);
	evbuffer_add_printf(out,
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: %d\r\n"
	    "X-Sandgate-Reason: %s\r\n"
	    "%s%s"
	    "Connection: close\r\n"
	    "\r\n%s",
	    status, status_text(status), n, reason,
	    status == 407 ? "Proxy-Authenticate: Basic realm=\"sandgate\"\r\n" : "",
	    status == 429 ? "Retry-After: 1\r\n" : "",
	    body);
	exchange_finish(s, reason_close(r));
}



static void
exchange_idle_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct exchange *s = arg;
	struct timeval now, idle, left;
	uint32_t ms = s->idle_ms ? s->idle_ms : s->p->cfg->idle_timeout_ms;

	if (s->state == S_FINISHING) {
		exchange_close(s, s->close_reason);
		return;
	}
	/* Activity only stamps a time; the timer re-arms for what is left. */
	event_base_gettimeofday_cached(s->w->base, &now);
	idle.tv_sec = ms / 1000;
	idle.tv_usec = (ms % 1000) * 1000;
	timersub(&now, &s->last_active, &left);
	if (timercmp(&left, &idle, <)) {
		timersub(&idle, &left, &left);
		evtimer_add(s->idle_ev, &left);
		return;
	}
	/*
	 * An HTTP/2 connection whose streams still go on is not idle: each
	 * stream ends by its own idle time, answered (504 when its origin is
	 * silent). The connection's timer, due at the same moment, ended them
	 * as the client's going: unanswered, allowed rows with no status.
	 */
	if (s->c->x == s && s->p->fe->streams_live(s) > 0) {
		exchange_set_idle(s);
		return;
	}
	/*
	 * A request forwarded and quiet for the whole idle time (an HTTP/2
	 * origin's stream has no socket timeout of its own): no answer yet is
	 * the origin's timeout, an answer cut short an idle-timeout error;
	 * never the allowed row of an exchange that ended well.
	 */
	if (EXCHANGE_IS_HTTP(s) && s->state == S_FORWARD && s->verdict.allow &&
	    !s->logged) {
		if (!s->fwd.resp_head_done) {
			exchange_deny(s, 504, REASON_UPSTREAM_TIMEOUT,
			    "the origin did not answer in time");
			return;
		}
		exchange_log(s, VERDICT_ERROR, s->fwd.status,
		    REASON_IDLE_TIMEOUT);
	}
	exchange_close(s, CLOSE_TIMEOUT);
}

static const char *
kind_name(const struct exchange *s)
{
	return s->c->kind == KIND_CONNECT ? "connect" :
	    s->c->kind == KIND_SOCKS5 ? "socks5" :
	    s->c->kind == KIND_TRANSPARENT ? "transparent" :
	    s->c->kind == KIND_INGRESS ? "ingress" : "http";
}

/*
 * The row's method: a request's own (none when its head did not parse);
 * "CONNECT" only for a tunnel's row, never for a request inside one.
 */
static const char *
exchange_method(const struct exchange *s)
{
	if (EXCHANGE_IS_HTTP(s) && s->fwd.method[0])
		return s->fwd.method;
	if (s->row_method != NULL)
		return s->row_method;
	if (s->c->kind == KIND_HTTP || s->c->kind == KIND_INGRESS ||
	    (s->c->tunnel_http && s->fwd.request))
		return NULL;
	return "CONNECT";
}

/*
 * What the connection knows of the row; the exchange adds its own and
 * writes it, with its log line (exchange_audit).
 */
static void
exchange_row(struct exchange *s, enum sg_verdict decision, int status,
    enum sg_reason reason, const char *ip)
{
	struct audit_event ev;
	struct geoip_result geo;
	int http = EXCHANGE_IS_HTTP(s);

	memset(&ev, 0, sizeof(ev));
	ev.sandbox = s->has_ident ? s->ident.sandbox : NULL;
	ev.kind = kind_name(s);
	ev.client = s->c->client_str;
	ev.ip = strcmp(ip, "-") != 0 ? ip : NULL;
	ev.port = s->target.port ? s->target.port : -1;
	ev.asn = -1;
	if (s->p->geoip != NULL && ev.ip != NULL &&
	    geoip_lookup(s->p->geoip, &s->fwd.ip, &geo) == 0) {
		ev.country = geo.country[0] ? geo.country : NULL;
		ev.asn = geo.asn ? (int64_t)geo.asn : -1;
	}
	ev.method = exchange_method(s);
	ev.path = http && s->fwd.path != NULL && s->fwd.path[0] ?
	    s->fwd.path : NULL;
	ev.status = status > 0 ? status : -1;
	ev.bytes_up = (int64_t)s->up;
	ev.bytes_down = (int64_t)s->down;
	(void)exchange_audit(s, s->p->audit, s->p->stats, &ev, decision,
	    reason);
}

void
exchange_log(struct exchange *s, enum sg_verdict decision, int status,
    enum sg_reason reason)
{
	char ip[NETADDR_STRLEN] = "-";
	int nr;

	/*
	 * An error right after the seccomp filter refused a call on this
	 * thread: that call is why (it was named in the log when refused).
	 */
	if (decision == VERDICT_ERROR && (nr = refusal_take()) != -1) {
		log_warnx("session %llu: failed after the seccomp filter refused "
		    "%s (%d)", (unsigned long long)s->id, refusal_name(nr) ?
		    refusal_name(nr) : "a system call", nr);
		reason = REASON_SYSCALL_REFUSED;
	}
	/*
	 * The exchange's own address: where it went or what was refused,
	 * never the connection's last origin (a CONNECT refused after a
	 * request on the connection names none).
	 */
	if (s->fwd.ip.family != 0)
		netaddr_ntop(&s->fwd.ip, ip, sizeof(ip));
	exchange_row(s, decision, status, reason, ip);
}

void
exchange_deny(struct exchange *s, int status, enum sg_reason reason,
    const char *detail)
{
	/* A decision no rule made is named default-deny (docs/policy.md). */
	if (s->verdict.rule[0] == '\0')
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "default-deny");
	if (status == 0)
		status = reason_status(reason);
	exchange_log(s, reason_verdict(reason), status,
	    reason);
	if (s->c->kind == KIND_SOCKS5 && !s->c->tunnel_open) {
		s->p->fe->refuse_socks5(s, reason);
		return;
	}
	if (s->c->kind == KIND_TRANSPARENT && s->c->sniffed != SNIFF_HTTP &&
	    !s->c->intercepted) {
		s->p->fe->refuse_transparent(s, reason);
		return;
	}
	exchange_http_error(s, status, reason, detail);
}

void
upstream_drop(struct exchange *s)
{
	origin_close(s->o);
	s->o = NULL;
}
