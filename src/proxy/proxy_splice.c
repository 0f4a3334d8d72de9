/*
 * Bulk through a tunnel the gateway does not read (TLS passed through, an
 * opaque rule): once a relayed tunnel has moved PROXY_SPLICE_AFTER bytes and
 * both sides' buffers are empty, its two sockets leave their bufferevents
 * and bytes go socket -> pipe -> socket with splice(2), never through user
 * memory. Tunnels that stay small or idle keep the bufferevent relay (and
 * hold no pipe: an idle tunnel costs no descriptor more). If the pipes
 * cannot be had (EMFILE, the user's pipe pages), the tunnel stays as it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "core/log.h"
#include "proxy/proxy_int.h"

#define SPLICE_CHUNK	(1 << 20)	/* at most per call; the pipe bounds it */

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
	struct session	 *s;
	struct splice_dir d[2];		/* [0] up, [1] down */
};

static void	splice_pump(struct splice_relay *, struct splice_dir *);

static void
splice_done_check(struct splice_relay *sr)
{
	struct session *s = sr->s;

	if (sr->d[0].eof && sr->d[1].eof && sr->d[0].queued == 0 &&
	    sr->d[1].queued == 0)
		session_close(s, "done");
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
	struct session *s = sr->s;
	int drained = 0;
	ssize_t n;

	session_touch(s);
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
			session_close(s, d->up ? "origin-error" : "client-error");
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
				s->bytes_up += (uint64_t)n;
			else
				s->bytes_down += (uint64_t)n;
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
		session_close(s, d->up ? "client-error" : "origin-error");
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

void
splice_free(struct session *s)
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
splice_ready(const struct session *s)
{
	/* Cheapest first: this runs each time a relayed output drains. */
	return s->bytes_up + s->bytes_down >= PROXY_SPLICE_AFTER &&
	    s->splice == NULL && !s->intercepted && !s->closing &&
	    s->state == S_RELAY && !s->eof_client && !s->eof_origin &&
	    (s->kind == KIND_CONNECT || s->kind == KIND_SOCKS5 ||
	    s->kind == KIND_TRANSPARENT) && s->obev != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(s->cbev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_input(s->obev)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(s->obev)) == 0;
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
splice_start(struct session *s)
{
	struct splice_relay *sr;
	int cfd = bufferevent_getfd(s->cbev), ofd = bufferevent_getfd(s->obev);

	if (cfd < 0 || ofd < 0 || (sr = calloc(1, sizeof(*sr))) == NULL)
		return -1;
	sr->s = s;
	if (splice_dir_init(sr, &sr->d[0], cfd, ofd, 1) == -1 ||
	    splice_dir_init(sr, &sr->d[1], ofd, cfd, 0) == -1) {
		splice_dir_free(&sr->d[0]);
		splice_dir_free(&sr->d[1]);
		free(sr);
		return -1;
	}
	bufferevent_disable(s->cbev, EV_READ | EV_WRITE);
	bufferevent_disable(s->obev, EV_READ | EV_WRITE);
	bufferevent_setcb(s->cbev, NULL, NULL, NULL, NULL);
	bufferevent_setcb(s->obev, NULL, NULL, NULL, NULL);
	/* The bufferevents keep no descriptor: freeing them closes nothing. */
	bufferevent_setfd(s->cbev, -1);
	bufferevent_setfd(s->obev, -1);
	s->splice = sr;
	atomic_fetch_add(&s->p->n_spliced, 1);
	event_add(sr->d[0].rev, NULL);
	event_add(sr->d[1].rev, NULL);
	log_debug("session %llu: relaying with splice", (unsigned long long)s->id);
	return 0;
}
