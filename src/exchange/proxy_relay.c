/*
 * The byte relay of a tunnel once it is decided and connected (CONNECT,
 * SOCKS5, transparent, an intercepted HTTP/1.1 tunnel after an upgrade):
 * both bufferevents copy to each other with half-closes passed on, until
 * the tunnel is busy enough for splice(2) (proxy_splice.c). Nothing here
 * decides: the front-ends call relay_start() after their decision.
 */
#include <sys/socket.h>

#include "exchange/exchange.h"

static void	relay_read_cb(struct bufferevent *, void *);
static void	relay_write_cb(struct bufferevent *, void *);
static void	relay_event_cb(struct bufferevent *, short, void *);

void
relay_start(struct session *s)
{
	if (upstream_guard(s) == -1)
		return;
	s->state = S_RELAY;
	if (s->timer != NULL)
		evtimer_del(s->timer);
	bufferevent_setcb(s->cbev, relay_read_cb, relay_write_cb,
	    relay_event_cb, s);
	bufferevent_setcb(s->obev, relay_read_cb, relay_write_cb,
	    relay_event_cb, s);
	bufferevent_setwatermark(s->cbev, EV_READ, 0, PROXY_READ_HWM);
	bufferevent_setwatermark(s->obev, EV_READ, 0, PROXY_READ_HWM);
	if (!s->intercepted) {
		/* Bulk moves in large reads and writes: a quarter of the calls. */
		bufferevent_set_max_single_read(s->cbev, PROXY_RELAY_IO);
		bufferevent_set_max_single_read(s->obev, PROXY_RELAY_IO);
		bufferevent_set_max_single_write(s->cbev, PROXY_RELAY_IO);
		bufferevent_set_max_single_write(s->obev, PROXY_RELAY_IO);
	}
	bufferevent_enable(s->cbev, EV_READ | EV_WRITE);
	bufferevent_enable(s->obev, EV_READ | EV_WRITE);
	/* Bytes that arrived before the tunnel opened (the ClientHello) go first. */
	if (evbuffer_get_length(bufferevent_get_input(s->cbev)) > 0)
		relay_read_cb(s->cbev, s);
	if (!s->closing && s->obev != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->obev)) > 0)
		relay_read_cb(s->obev, s);
}

static struct bufferevent *
relay_peer(struct session *s, struct bufferevent *bev)
{
	return bev == s->cbev ? s->obev : s->cbev;
}

/* Both directions ended and everything was written: the tunnel is done. */
static int
relay_maybe_done(struct session *s)
{
	if (s->eof_client && s->eof_origin &&
	    evbuffer_get_length(bufferevent_get_output(s->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(s->obev)) == 0) {
		session_close(s, CLOSE_DONE);
		return 1;
	}
	return 0;
}

static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(peer);
	size_t n = evbuffer_get_length(in);

	session_touch(s);
	evbuffer_add_buffer(out, in);
	if (bev == s->cbev)
		s->bytes_up += n;
	else
		s->bytes_down += n;
	if (evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(bev, EV_READ);	/* relay_write_cb resumes */
}

static void
relay_write_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);
	int peer_eof = bev == s->cbev ? s->eof_origin : s->eof_client;

	/* Output drained: the reading side may go on, or the half-close follows. */
	if (!peer_eof && splice_ready(s) && splice_start(s) == 0)
		return;
	if (!peer_eof)
		bufferevent_enable(peer, EV_READ);
	else {
		if (!s->intercepted)
			shutdown(bufferevent_getfd(bev), SHUT_WR);
		relay_maybe_done(s);
	}
}

static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);

	if (!(what & BEV_EVENT_EOF)) {
		session_close(s,
		    (what & BEV_EVENT_TIMEOUT) ? CLOSE_TIMEOUT :
		    bev == s->cbev ? CLOSE_CLIENT_ERROR : CLOSE_ORIGIN_ERROR);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		relay_read_cb(bev, s);
	if (bev == s->cbev)
		s->eof_client = 1;
	else
		s->eof_origin = 1;
	bufferevent_disable(bev, EV_READ);
	if (s->intercepted) {
		/* TLS has no half-close: what is queued goes out, then both close. */
		s->eof_client = s->eof_origin = 1;
		if (bev == s->obev) {
			/* What the origin sent goes out, then close_notify. */
			session_finish(s, CLOSE_DONE);
			return;
		}
		session_close(s, CLOSE_DONE);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(peer)) == 0)
		shutdown(bufferevent_getfd(peer), SHUT_WR);
	relay_maybe_done(s);
}
