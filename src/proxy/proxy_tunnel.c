/*
 * Tunnels (CONNECT now; SOCKS5 and transparent later): the first bytes
 * decide what the tunnel carries before the gateway connects onward, then
 * bytes are relayed both ways with bounded buffers and half-close.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "proxy/front.h"
#include "vault/keeper.h"
#include "parse/tls_sni.h"


static void
tunnel_refuse(struct exchange *s, int tls, enum sg_reason reason,
    const char *detail)
{
	relay_refuse(s, tls, reason, detail);
}

static void	opaque_connected(struct exchange *);

static void
sniff_timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;		/* the tunnel, its current exchange */
	struct exchange *s = c->x;
	int icpt;

	if (s == NULL || s->closing)
		return;

	/*
	 * Nothing from the client: a server-speaks-first protocol. An opaque
	 * rule's origin already speaks to the client (sniff_origin_read_cb);
	 * the client's first bytes, whenever they come, are classified as any
	 * others -- waiting is no way around the SNI or Host check.
	 */
	if (decide_first_bytes(&s->verdict, &s->target,
	    &(struct decide_bytes){ .kind = DECIDE_BYTES_OTHER }, &icpt) !=
	    REASON_NONE) {
		tunnel_refuse(s, 0, REASON_PROTOCOL_DENY,
		    "no client bytes within 5s and the rule is not opaque");
		return;
	}
	/*
	 * Report mode: what would be refused passes, as an opaque rule's
	 * tunnel does -- the origin may speak, and the client's first bytes,
	 * whenever they come, are still sniffed (TLS: the SNI check; HTTP:
	 * every request decided): report mode never relaxes those.
	 */
	if (EXCHANGE_OBEV(s) == NULL)
		upstream_connect(s, opaque_connected);
}

/* The client took what the origin said: the origin may say more. */
static void
sniff_client_write_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;

	if (EXCHANGE_OBEV(s) != NULL)
		bufferevent_enable(EXCHANGE_OBEV(s), EV_READ);
}

static void
sniff_begin(struct exchange *s)
{
	struct timeval tv = { PROXY_SNIFF_SECS, 0 };

	s->state = S_SNIFF;
	if (s->c->timer == NULL &&
	    (s->c->timer = evtimer_new(s->w->base, sniff_timeout_cb, s->c)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	evtimer_add(s->c->timer, &tv);
	bufferevent_setcb(s->c->cbev, s->p->fe->client_read, EXCHANGE_OBEV(s) != NULL ?
	    sniff_client_write_cb : NULL, client_event_cb, s);
	bufferevent_enable(s->c->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(s->c->cbev)) > 0)
		s->p->fe->client_read(s->c->cbev, s);	/* the bytes already there */
}

/* An opaque tunnel's origin, while the client's first bytes are awaited. */
static void
sniff_origin_read_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	exchange_touch(s);
	s->down += evbuffer_get_length(in);
	evbuffer_add_buffer(bufferevent_get_output(s->c->cbev), in);
	if (evbuffer_get_length(bufferevent_get_output(s->c->cbev)) > PROXY_HWM)
		bufferevent_disable(bev, EV_READ);
}

static void
sniff_origin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;

	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		sniff_origin_read_cb(bev, s);
	if (what & BEV_EVENT_EOF)
		exchange_finish(s, CLOSE_DONE);
	else
		exchange_close(s, CLOSE_ORIGIN_ERROR);
}

/*
 * Opaque rules connect at once, since the server may speak first; what it
 * says reaches the client, but the client's own first bytes are still
 * classified: opaque lets non-TLS, non-HTTP bytes pass, nothing more.
 */
void
tunnel_origin_speaks(struct exchange *s)
{
	bufferevent_setcb(EXCHANGE_OBEV(s), sniff_origin_read_cb, NULL,
	    sniff_origin_event_cb, s);
	bufferevent_enable(EXCHANGE_OBEV(s), EV_READ);
	bufferevent_setcb(s->c->cbev, s->p->fe->client_read, sniff_client_write_cb,
	    client_event_cb, s);
}

static void
opaque_connected(struct exchange *s)
{
	if (upstream_guard(s) == -1)
		return;
	tunnel_origin_speaks(s);
	sniff_begin(s);
}

void
tunnel_start(struct exchange *s)
{
	if (s->verdict.opaque) {
		upstream_connect(s, opaque_connected);
		return;
	}
	sniff_begin(s);
}

/* The log line's words for a first-bytes refusal. */
static const char *
first_bytes_detail(const struct exchange *s, enum sg_reason r)
{
	switch (r) {
	case REASON_SNI_MISMATCH:
		return s->target.is_ip ? "SNI present in a tunnel to an IP "
		    "address" : "SNI differs from the tunnel's name";
	case REASON_NEEDS_INTERCEPT:
		return "the rule limits methods or paths: it needs tls: intercept";
	case REASON_PROTOCOL_DENY:
		return "a ClientHello that does not parse, or bytes neither TLS "
		    "nor HTTP and the rule is not opaque";
	default:
		return "refused by its first bytes";
	}
}

static void
sniff_tls(struct exchange *s, const uint8_t *p, size_t len, size_t total)
{
	struct tls_client_hello ch;
	struct decide_bytes b = { .kind = DECIDE_BYTES_TLS };
	enum sg_reason reason;
	int r, icpt;

	r = tls_parse_client_hello(p, len, &ch);
	if (r == TLS_CH_NEED_MORE && total < TLS_CH_MAX_LEN)
		return;
	b.hello_ok = r == TLS_CH_OK;
	if (b.hello_ok) {
		b.has_sni = ch.has_sni;
		b.sni = ch.sni;
		b.sni_len = ch.sni_len;
		b.cred_bound = cred_host_bound(s);
	}
	/* The decision's first-bytes stage (core/decide.c). */
	reason = decide_first_bytes(&s->verdict, &s->target, &b, &icpt);
	if (reason != REASON_NONE) {
		tunnel_refuse(s, 1, reason, first_bytes_detail(s, reason));
		return;
	}
	if (icpt) {
		evtimer_del(s->c->timer);
		upstream_drop(s);	/* an opaque rule's plain connection */
		if (proxy_tls_intercept_client(s, client_event_cb) == -1)
			tunnel_refuse(s, 1, keeper_client_up(s->p->kc) ?
			    REASON_CLIENT_TLS : REASON_KEEPER_UNAVAILABLE,
			    "cannot set up interception");
		return;
	}
	evtimer_del(s->c->timer);
	/* Passed through: a further ClientHello must name it too. */
	if (tlswatch_start(s, ch.consumed) == -1) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	if (EXCHANGE_OBEV(s) != NULL)
		relay_start(s);
	else
		upstream_connect(s, relay_start);
}

void
tunnel_sniff(struct exchange *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
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
	if (p[0] == 0x16) {
		sniff_tls(s, p, want, len);
		return;
	}
	/*
	 * Another TLS record first (an empty change_cipher_spec, which
	 * OpenSSL skips): the ClientHello behind it would pass unread, even
	 * in an opaque tunnel -- TLS there is checked as anywhere.
	 */
	if ((r = tls_record_like(p, want)) == -1)
		return;
	if (r == 1) {
		evtimer_del(s->c->timer);
		tunnel_refuse(s, 1, REASON_PROTOCOL_DENY, "a TLS record other "
		    "than a ClientHello first");
		return;
	}
	r = http_sniff_request((const char *)p, want);
	if (r == -1)
		return;
	evtimer_del(s->c->timer);
	if (r == 1) {
		/*
		 * Plain HTTP in the tunnel: every request is decided on its own,
		 * each on an origin connection opened for it.
		 */
		upstream_drop(s);
		if (conn_tunnel_http(s) == -1) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
		s->p->fe->next_request(s);
		return;
	}
	/* Neither TLS nor HTTP: the first-bytes stage (core/decide.c). */
	if (decide_first_bytes(&s->verdict, &s->target,
	    &(struct decide_bytes){ .kind = DECIDE_BYTES_OTHER }, &r) !=
	    REASON_NONE) {
		tunnel_refuse(s, 0, REASON_PROTOCOL_DENY, "tunnel bytes are "
		    "neither TLS nor HTTP and the rule is not opaque");
		return;
	}
	/* Opaque: connected already (tunnel_start); report mode: now. */
	if (EXCHANGE_OBEV(s) != NULL)
		relay_start(s);
	else
		upstream_connect(s, relay_start);
}
