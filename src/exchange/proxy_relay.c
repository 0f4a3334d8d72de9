/*
 * The byte relay of a tunnel once it is decided and connected (CONNECT,
 * SOCKS5, transparent, an intercepted HTTP/1.1 tunnel after an upgrade):
 * both bufferevents copy to each other with half-closes passed on. Nothing
 * here decides: the front-ends call relay_start() after their decision.
 *
 * Bulk through a tunnel the gateway does not read (TLS passed through, an
 * opaque rule): once a relayed tunnel has moved PROXY_SPLICE_AFTER bytes and
 * both sides' buffers are empty, its two sockets leave their bufferevents
 * and bytes go socket -> pipe -> socket with splice(2), never through user
 * memory. Tunnels that stay small or idle keep the bufferevent relay (and
 * hold no pipe: an idle tunnel costs no descriptor more). If the pipes
 * cannot be had (EMFILE, the user's pipe pages), the tunnel stays as it is;
 * if splice itself fails (refused by a seccomp filter, not supported), what
 * the pipes hold goes to the bufferevents and the tunnel is copied to its
 * end. Only when that drain fails is a byte lost: then the exchange ends
 * with an error row, never as an allowed tunnel cut short.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/reason.h"
#include "core/stats.h"
#include "core/refusal.h"
#include "exchange/exchange.h"

static void	relay_read_cb(struct bufferevent *, void *);
static void	relay_write_cb(struct bufferevent *, void *);
static void	relay_event_cb(struct bufferevent *, short, void *);

void
relay_start(struct exchange *s)
{
	if (upstream_guard(s) == -1)
		return;
	conn_tunnel_opened(s, STATS_TUN_RELAYED);
	s->state = S_RELAY;
	if (s->c->timer != NULL)
		evtimer_del(s->c->timer);
	bufferevent_setcb(s->c->cbev, relay_read_cb, relay_write_cb,
	    relay_event_cb, s);
	bufferevent_setcb(EXCHANGE_OBEV(s), relay_read_cb, relay_write_cb,
	    relay_event_cb, s);
	bufferevent_setwatermark(s->c->cbev, EV_READ, 0, PROXY_READ_HWM);
	bufferevent_setwatermark(EXCHANGE_OBEV(s), EV_READ, 0, PROXY_READ_HWM);
	if (!s->c->intercepted) {
		/* Bulk moves in large reads and writes: a quarter of the calls. */
		bufferevent_set_max_single_read(s->c->cbev, PROXY_RELAY_IO);
		bufferevent_set_max_single_read(EXCHANGE_OBEV(s), PROXY_RELAY_IO);
		bufferevent_set_max_single_write(s->c->cbev, PROXY_RELAY_IO);
		bufferevent_set_max_single_write(EXCHANGE_OBEV(s), PROXY_RELAY_IO);
	}
	bufferevent_enable(s->c->cbev, EV_READ | EV_WRITE);
	bufferevent_enable(EXCHANGE_OBEV(s), EV_READ | EV_WRITE);
	/* Bytes that arrived before the tunnel opened (the ClientHello) go first. */
	if (evbuffer_get_length(bufferevent_get_input(s->c->cbev)) > 0)
		relay_read_cb(s->c->cbev, s);
	if (!s->closing && EXCHANGE_OBEV(s) != NULL &&
	    evbuffer_get_length(bufferevent_get_input(EXCHANGE_OBEV(s))) > 0)
		relay_read_cb(EXCHANGE_OBEV(s), s);
}

static struct bufferevent *
relay_peer(struct exchange *s, struct bufferevent *bev)
{
	return bev == s->c->cbev ? EXCHANGE_OBEV(s) : s->c->cbev;
}

/* Both directions ended and everything was written: the tunnel is done. */
static int
relay_maybe_done(struct exchange *s)
{
	if (s->eof_client && s->eof_origin &&
	    evbuffer_get_length(bufferevent_get_output(s->c->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(EXCHANGE_OBEV(s))) == 0) {
		exchange_close(s, CLOSE_DONE);
		return 1;
	}
	return 0;
}

static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer *out = bufferevent_get_output(peer);
	size_t n = evbuffer_get_length(in);

	exchange_touch(s);
	if (s->tw != NULL && !s->c->intercepted) {
		/* A handshake still in the clear: what may go on of it. */
		if ((n = tlswatch_take(s, bev, n)) == (size_t)-1)
			return;
		if (evbuffer_remove_buffer(in, out, n) != (int)n) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
	} else
		evbuffer_add_buffer(out, in);
	if (bev == s->c->cbev)
		s->up += n;
	else
		s->down += n;
	if (evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(bev, EV_READ);	/* relay_write_cb resumes */
}

static void
relay_write_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);
	int peer_eof = bev == s->c->cbev ? s->eof_origin : s->eof_client;

	/* Output drained: the reading side may go on, or the half-close follows. */
	if (!peer_eof && splice_ready(s) && splice_start(s) == 0)
		return;
	if (!peer_eof)
		bufferevent_enable(peer, EV_READ);
	else {
		if (!s->c->intercepted)
			shutdown(bufferevent_getfd(bev), SHUT_WR);
		relay_maybe_done(s);
	}
}

static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;
	struct bufferevent *peer = relay_peer(s, bev);

	if (!(what & BEV_EVENT_EOF)) {
		exchange_close(s,
		    (what & BEV_EVENT_TIMEOUT) ? CLOSE_TIMEOUT :
		    bev == s->c->cbev ? CLOSE_CLIENT_ERROR : CLOSE_ORIGIN_ERROR);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		relay_read_cb(bev, s);
	if (bev == s->c->cbev)
		s->eof_client = 1;
	else
		s->eof_origin = 1;
	bufferevent_disable(bev, EV_READ);
	if (s->c->intercepted) {
		/* TLS has no half-close: what is queued goes out, then both close. */
		s->eof_client = s->eof_origin = 1;
		if (bev == EXCHANGE_OBEV(s)) {
			/* What the origin sent goes out, then close_notify. */
			exchange_finish(s, CLOSE_DONE);
			return;
		}
		exchange_close(s, CLOSE_DONE);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(peer)) == 0)
		shutdown(bufferevent_getfd(peer), SHUT_WR);
	relay_maybe_done(s);
}

/* ------------------------------------------------------------ splice */

#define SPLICE_CHUNK	(1 << 20)	/* at most per call; the pipe bounds it */
#define SPLICE_DRAIN	16384		/* a pipe's bytes taken back per read(2) */

struct splice_relay;

struct splice_dir {
	struct splice_relay *sr;
	int		 from, to;	/* sockets: read from, write to */
	int		 rp, wp;	/* the pipe's read and write ends */
	size_t		 queued;	/* bytes in the pipe */
	size_t		 cap;		/* the pipe's capacity */
	int		 eof;		/* from ended; to was shut down once drained */
	struct event	*rev, *wev;
	int		 up;		/* client -> origin */
};

struct splice_relay {
	struct exchange	 *s;
	struct splice_dir d[2];		/* [0] up, [1] down */
};

static void	splice_pump(struct splice_relay *, struct splice_dir *);
static void	splice_fallback(struct splice_relay *, int);

/*
 * Errors of the connection itself: the tunnel ends as it would in the
 * bufferevent relay. Anything else is splice failing (EPERM from a seccomp
 * filter, EINVAL, ENOSYS, ENOMEM): the bytes go on by copying.
 */
static int
splice_peer_error(int e)
{
	switch (e) {
	case ECONNRESET: case EPIPE: case ETIMEDOUT: case ECONNABORTED:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case ENOTCONN:
	case ECONNREFUSED: case EHOSTDOWN:
		return 1;
	default:
		return 0;
	}
}

static void
splice_done_check(struct splice_relay *sr)
{
	struct exchange *s = sr->s;

	if (sr->d[0].eof && sr->d[1].eof && sr->d[0].queued == 0 &&
	    sr->d[1].queued == 0)
		exchange_close(s, CLOSE_DONE);
}

static void
splice_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct splice_dir *d = arg;

	(void)fd;
	(void)what;
	splice_pump(d->sr, d);
}

/*
 * Move what the pipe holds to the peer, then what the socket has into the
 * pipe, until either would block. A full peer stops reading this side
 * (the write event resumes it); an EOF is passed on as a half-close once
 * the pipe is empty.
 */
static void
splice_pump(struct splice_relay *sr, struct splice_dir *d)
{
	struct exchange *s = sr->s;
	int drained = 0;
	ssize_t n;

	exchange_touch(s);
	for (;;) {
		while (d->queued > 0) {
			n = splice(d->rp, NULL, d->to, NULL, d->queued,
			    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->queued -= (size_t)n;
				continue;
			}
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1 && errno == EAGAIN) {
				event_del(d->rev);
				event_add(d->wev, NULL);
				return;
			}
			if (n == -1 && !splice_peer_error(errno)) {
				splice_fallback(sr, errno);
				return;
			}
			exchange_close(s,
			    d->up ? CLOSE_ORIGIN_ERROR : CLOSE_CLIENT_ERROR);
			return;
		}
		event_del(d->wev);
		if (d->eof) {
			shutdown(d->to, SHUT_WR);
			splice_done_check(sr);
			return;
		}
		/*
		 * The last read took less than the pipe could hold: the socket
		 * had no more (a message of a request-response protocol). Not
		 * asked again (that would be one EAGAIN per message); the read
		 * event is level-triggered and says when there is more.
		 */
		if (drained) {
			event_add(d->rev, NULL);
			return;
		}
		n = splice(d->from, NULL, d->wp, NULL, SPLICE_CHUNK,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			d->queued += (size_t)n;
			drained = (size_t)n < d->cap;
			if (d->up)
				s->up += (uint64_t)n;
			else
				s->down += (uint64_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			event_add(d->rev, NULL);
			return;
		}
		if (n == 0) {
			d->eof = 1;
			event_del(d->rev);
			continue;	/* the pipe is empty: shut down, maybe done */
		}
		if (!splice_peer_error(errno)) {
			splice_fallback(sr, errno);
			return;
		}
		exchange_close(s,
		    d->up ? CLOSE_CLIENT_ERROR : CLOSE_ORIGIN_ERROR);
		return;
	}
}

static void
splice_dir_free(struct splice_dir *d)
{
	if (d->rev != NULL)
		event_free(d->rev);
	if (d->wev != NULL)
		event_free(d->wev);
	if (d->rp != -1)
		close(d->rp);
	if (d->wp != -1)
		close(d->wp);
}

/*
 * Give a direction's pipe contents to the bufferevent that writes them to
 * its destination. 0, or -1 when the pipe could not be read to its end.
 */
static int
splice_drain(struct splice_dir *d, struct bufferevent *to)
{
	char buf[SPLICE_DRAIN];
	ssize_t n;

	while (d->queued > 0) {
		n = read(d->rp, buf, sizeof(buf));
		if (n > 0) {
			if (bufferevent_write(to, buf, (size_t)n) == -1)
				return -1;
			d->queued -= (size_t)n < d->queued ? (size_t)n : d->queued;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		return -1;	/* EOF or EAGAIN with bytes queued: lost */
	}
	return 0;
}

/*
 * splice(2) failed with err: drain both pipes into the bufferevents, give
 * them their sockets back and relay by copying (relay_start) to the end.
 * A refused or missing splice is not tried again by any tunnel.
 */
static void
splice_fallback(struct splice_relay *sr, int err)
{
	struct exchange *s = sr->s;
	int cfd = sr->d[0].from, ofd = sr->d[0].to, refused, lost, nr, derr;
	size_t held;

	refused = err == EPERM || err == ENOSYS;
	if ((nr = refusal_take()) != -1)
		log_warnx("session %llu: the seccomp filter refused %s",
		    (unsigned long long)s->id, refusal_name(nr) != NULL ?
		    refusal_name(nr) : "a system call");
	if (refused && atomic_exchange(&s->p->splice_refused, 1) == 0)
		log_warnx("splice(2) failed: %s; tunnels are relayed by copying "
		    "from now on", strerror(err));
	held = sr->d[0].queued + sr->d[1].queued;
	atomic_fetch_add(&s->p->n_splice_fallback, 1);
	s->splice_off = 1;
	lost = splice_drain(&sr->d[0], EXCHANGE_OBEV(s)) == -1 ||
	    splice_drain(&sr->d[1], s->c->cbev) == -1;
	derr = errno;
	log_info("session %llu: splice failed (%s) after %llu bytes: relaying "
	    "by copying, %zu bytes taken back from its pipes",
	    (unsigned long long)s->id, strerror(err),
	    (unsigned long long)(s->up + s->down),
	    held - sr->d[0].queued - sr->d[1].queued);
	if (sr->d[0].eof)
		s->eof_client = 1;
	if (sr->d[1].eof)
		s->eof_origin = 1;
	/* The bufferevents own the sockets again; splice_free closes none. */
	splice_dir_free(&sr->d[0]);
	splice_dir_free(&sr->d[1]);
	free(sr);
	s->splice = NULL;
	bufferevent_setfd(s->c->cbev, cfd);
	bufferevent_setfd(EXCHANGE_OBEV(s), ofd);
	if (lost) {
		log_warnx("session %llu: bytes held in a splice pipe could not be "
		    "read back (%s): the tunnel is cut", (unsigned long long)s->id,
		    strerror(derr));
		exchange_log(s, VERDICT_ERROR, 0, REASON_RELAY_ERROR);
		exchange_close(s, CLOSE_FAILED);
		return;
	}
	relay_start(s);
	if (s->closing)
		return;
	if (s->eof_client)
		bufferevent_disable(s->c->cbev, EV_READ);
	if (s->eof_origin)
		bufferevent_disable(EXCHANGE_OBEV(s), EV_READ);
}

void
splice_free(struct exchange *s)
{
	struct splice_relay *sr = s->splice;

	if (sr == NULL)
		return;
	splice_dir_free(&sr->d[0]);
	splice_dir_free(&sr->d[1]);
	/* The sockets left their bufferevents: they are ours to close. */
	close(sr->d[0].from);
	close(sr->d[0].to);
	free(sr);
	s->splice = NULL;
}

/* 1 when the relay may move to splice now: nothing buffered on either side. */
int
splice_ready(const struct exchange *s)
{
	/* Cheapest first: this runs each time a relayed output drains. */
	return s->up + s->down >= PROXY_SPLICE_AFTER &&
	    s->splice == NULL && !s->splice_off && !s->c->intercepted &&
	    s->tw == NULL &&
	    !s->closing && !atomic_load(&s->p->splice_refused) &&
	    s->state == S_RELAY && !s->eof_client && !s->eof_origin &&
	    (s->c->kind == KIND_CONNECT || s->c->kind == KIND_SOCKS5 ||
	    s->c->kind == KIND_TRANSPARENT) && EXCHANGE_OBEV(s) != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->c->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(s->c->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_input(EXCHANGE_OBEV(s))) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(EXCHANGE_OBEV(s))) == 0;
}

static int
splice_dir_init(struct splice_relay *sr, struct splice_dir *d, int from,
    int to, int up)
{
	int p[2], n;

	d->sr = sr;
	d->rp = d->wp = -1;
	d->from = from;
	d->to = to;
	d->up = up;
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) == -1)
		return -1;
	d->rp = p[0];
	d->wp = p[1];
	n = fcntl(d->wp, F_GETPIPE_SZ);
	d->cap = n > 0 ? (size_t)n : 4096;
	d->rev = event_new(sr->s->w->base, from, EV_READ | EV_PERSIST,
	    splice_read_cb, d);
	d->wev = event_new(sr->s->w->base, to, EV_WRITE | EV_PERSIST,
	    splice_read_cb, d);
	return d->rev != NULL && d->wev != NULL ? 0 : -1;
}

/*
 * Take the two sockets out of their bufferevents and relay them with
 * splice. 0, or -1 when it cannot (then nothing changed).
 */
int
splice_start(struct exchange *s)
{
	struct splice_relay *sr;
	int cfd = bufferevent_getfd(s->c->cbev), ofd = bufferevent_getfd(EXCHANGE_OBEV(s));

	if (cfd < 0 || ofd < 0 || (sr = calloc(1, sizeof(*sr))) == NULL)
		return -1;
	sr->s = s;
	/* A half-built relay is freed whole: no descriptor 0 closed by mistake. */
	sr->d[0].rp = sr->d[0].wp = sr->d[1].rp = sr->d[1].wp = -1;
	if (splice_dir_init(sr, &sr->d[0], cfd, ofd, 1) == -1 ||
	    splice_dir_init(sr, &sr->d[1], ofd, cfd, 0) == -1) {
		log_info("session %llu: cannot relay with splice (%s): copying "
		    "to the end", (unsigned long long)s->id, strerror(errno));
		splice_dir_free(&sr->d[0]);
		splice_dir_free(&sr->d[1]);
		free(sr);
		/* Not again on each drained write: this tunnel copies. */
		s->splice_off = 1;
		atomic_fetch_add(&s->p->n_splice_fallback, 1);
		return -1;
	}
	bufferevent_disable(s->c->cbev, EV_READ | EV_WRITE);
	bufferevent_disable(EXCHANGE_OBEV(s), EV_READ | EV_WRITE);
	bufferevent_setcb(s->c->cbev, NULL, NULL, NULL, NULL);
	bufferevent_setcb(EXCHANGE_OBEV(s), NULL, NULL, NULL, NULL);
	/* The bufferevents keep no descriptor: freeing them closes nothing. */
	bufferevent_setfd(s->c->cbev, -1);
	bufferevent_setfd(EXCHANGE_OBEV(s), -1);
	s->splice = sr;
	atomic_fetch_add(&s->p->n_spliced, 1);
	event_add(sr->d[0].rev, NULL);
	event_add(sr->d[1].rev, NULL);
	log_debug("session %llu: relaying with splice", (unsigned long long)s->id);
	return 0;
}
