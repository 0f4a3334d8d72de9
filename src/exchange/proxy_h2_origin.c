/*
 * HTTP/2 streams to HTTP/2 origins: a stream's exchange whose request was
 * decided and whose credential plan is made (proxy_http.c) offers h2 (and
 * http/1.1, except for gRPC) on its own TLS connection to the origin; when
 * the origin picks h2 it speaks HTTP/2 and answers its client stream itself
 * (h2_stream_*), else the HTTP/1.1 forwarding takes the stream. The
 * swapped fields go out from wiped memory, request DATA is searched for
 * placeholders like any body, and on credential hosts every response
 * field, trailer and body is scrubbed -- gRPC messages whole, re-framed
 * with their new length. Owns the nghttp2 client session of that stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"
#include "vault/vault.h"

#define H2O_BUF		(64 * 1024)	/* request bytes held for the origin */
#define H2O_MSG_MAX	(4 * 1024 * 1024)	/* a gRPC message scrubbed whole */
/*
 * Streams of one client connection that may hold more than H2O_BUF of a
 * gRPC message at once (gathered to be scrubbed whole, or waiting for the
 * client): the others wait with their window, or 100 stalled streams held
 * a whole message each (4.5 MiB apiece).
 */
#define H2O_BIG_STREAMS	4
#define H2O_BIG_POLL_MS	50
#define H2O_FIELDS	(HTTP_MAX_HEADERS + 8)
#define H2O_RETRIES	3		/* a stream sent again at most this often */
#define H2UP_STREAMS	100		/* streams one origin connection carries at once */

/*
 * One HTTP/2 connection to an origin. The first stream of a client
 * connection that finds its origin speaking h2 hands its connection over
 * to the client connection (owner), and the later streams of that client
 * connection -- same sandbox, host, port, checked address, credentials:
 * origin_bind_match -- ride on it. Freed once it has no owner and no stream.
 */
struct h2up {
	struct worker		*w;
	struct exchange		*owner;		/* the client connection; NULL: none */
	struct origin		*og;		/* the connection, what it was opened for */
	nghttp2_session		*ng;
	struct event		*flush_ev;
	struct event		*free_ev;
	int			 refs;		/* streams on it */
	int			 dead;
	TAILQ_HEAD(, h2o)	 streams;
	TAILQ_HEAD(, h2o_hd)	 hds;
};

/*
 * What nghttp2 holds for a stream (its user data, its body's source): it
 * outlives the stream's exchange when that goes first, keeps the swapped
 * fields a HEADERS still queued points at, and is freed when nghttp2 is
 * done with the stream (closed, or never sent) or with the connection.
 */
struct h2o_hd {
	struct h2o		*o;		/* NULL: the stream's exchange went */
	struct h2up		*up;
	int32_t			 sid;
	struct evbuffer		*fields;	/* o's, once o went */
	TAILQ_ENTRY(h2o_hd)	 entry;
};

struct h2o {
	struct exchange		*s;
	struct h2up		*up;
	struct h2o_hd		*hd;		/* while nghttp2 has the stream */
	TAILQ_ENTRY(h2o)	 entry;		/* on up->streams */
	int32_t			 sid;		/* -1: not (or no longer) on up */
	struct evbuffer		*fields;	/* swapped request fields (wiped memory) */
	size_t			 n_fields;
	/* request body */
	struct evbuffer		*up_body;	/* decoded, not yet searched whole */
	struct evbuffer		*ready;		/* searched: for the origin */
	int			 up_done;
	int			 deferred;
	/* response */
	int			 head_done;
	struct evbuffer		*rh;		/* "name\0value\0" of a block */
	size_t			 rn;
	struct evbuffer		*msg;		/* gRPC bytes not yet a whole message */
	struct vault_scrubber	*scrub;		/* other bodies of credential hosts */
	int			 only_h2;
	size_t			 unconsumed;
	int			 done;
	int			 retry, retried;	/* going again (h2o_may_retry), how often */
	struct event		*big_ev;	/* ... waits for one */
	struct event		*end_ev;
	int			 end_status;
	enum sg_reason		 end_reason;
	char			 end_detail[128];
};

static void	h2up_flush(struct h2up *);
static void	h2up_unref(struct h2up *);

/* ---- ending ---------------------------------------------------------- */

/*
 * How the stream ends is decided inside nghttp2's callbacks, and acted on
 * from the loop: the session (and the nghttp2 session with it) may go.
 */
static void	h2o_retry(struct h2o *);
static void	big_cb(evutil_socket_t, short, void *);

static void
end_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2o *o = arg;
	struct exchange *s = o->s;
	enum sg_reason r = o->end_reason;

	if (s->closing)
		return;
	if (o->retry && !o->done) {
		h2o_retry(o);
		return;
	}
	if (r == REASON_NONE) {
		exchange_log(s, VERDICT_ALLOW, s->fwd.status, REASON_NONE);
		exchange_finish(s, CLOSE_DONE);
		return;
	}
	if (!s->fwd.resp_head_done) {
		/* Through the stream's HTTP/1.1 answer (proxy_h2.c translates). */
		exchange_deny(s, o->end_status, r, o->end_detail);
		return;
	}
	/* Its head is out: the stream ends with RST_STREAM (proxy_h2.c). */
	exchange_log(s, reason_verdict(r), s->fwd.status, r);
	exchange_close(s, reason_close(r));
}

static void
h2o_fail(struct h2o *o, int status, enum sg_reason r, const char *detail)
{
	if (o->done)
		return;
	log_debug("session %llu: HTTP/2 origin stream %d: %s",
	    (unsigned long long)o->s->id, (int)o->sid, detail);
	o->done = 1;
	o->end_status = status;
	o->end_reason = r;
	snprintf(o->end_detail, sizeof(o->end_detail), "%s", detail);
	event_active(o->end_ev, EV_TIMEOUT, 0);
}

static void
h2o_done(struct h2o *o)
{
	if (o->done)
		return;
	o->done = 1;
	o->end_reason = REASON_NONE;
	event_active(o->end_ev, EV_TIMEOUT, 0);
}


void
h2o_free(struct exchange *s)
{
	struct h2o *o = s->h2o;

	if (o == NULL)
		return;
	s->h2o = NULL;
	if (o->hd != NULL) {
		/* Still nghttp2's: only this stream goes, its fields stay with it. */
		o->hd->o = NULL;
		o->hd->fields = o->fields;
		o->fields = NULL;
		if (!o->up->dead)
			nghttp2_submit_rst_stream(o->up->ng, NGHTTP2_FLAG_NONE,
			    o->hd->sid, NGHTTP2_CANCEL);
		event_active(o->up->flush_ev, EV_TIMEOUT, 0);
		o->hd = NULL;
	}
	if (o->up != NULL) {
		TAILQ_REMOVE(&o->up->streams, o, entry);
		h2up_unref(o->up);
	}
	/* Its slot, unless the client's stream took it over (proxy_h2.c). */
	if (s->big_slot) {
		s->big_slot = 0;
		s->c->grpc_big--;
	}
	if (o->big_ev != NULL)
		event_free(o->big_ev);
	if (o->end_ev != NULL)
		event_free(o->end_ev);
	if (o->fields != NULL)
		evbuffer_free(o->fields);	/* the wbuf is wiped as it goes */
	if (o->up_body != NULL)
		evbuffer_free(o->up_body);
	if (o->ready != NULL)
		evbuffer_free(o->ready);
	if (o->rh != NULL)
		evbuffer_free(o->rh);
	if (o->msg != NULL)
		evbuffer_free(o->msg);
	if (o->scrub != NULL)
		vault_scrubber_free(o->scrub);
	free(o);
}

/* ---- response: origin -> client stream ------------------------------ */

static int
scrubbing(const struct exchange *s)
{
	return cred_plan_scrubs(&s->fwd.plan);
}

/* A value toward the client: scrubbed on credential hosts. */
static void
clean_value(struct exchange *s, const uint8_t *v, size_t len, struct evbuffer *out)
{
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	size_t n;

	if (!scrubbing(s)) {
		evbuffer_add(out, v, len);
		return;
	}
	n = cred_scrub_lists(s, secrets, phs);
	if (vault_scrub_string(s->fwd.plan.snap, secrets, phs, n,
	    (const char *)v, len, out) == -1)
		evbuffer_add(out, "-", 1);	/* never the unscrubbed value */
}

/*
 * The block collected in o->rh as nv for the client, values scrubbed;
 * the nv point into *mem, which the caller frees. -1 when a coding the
 * scrubber cannot read is announced on a credential host.
 */
static int
block_nv(struct h2o *o, nghttp2_nv *nv, size_t *n, struct evbuffer **mem)
{
	struct exchange *s = o->s;
	struct evbuffer *m;
	size_t i, off = 0, len = evbuffer_get_length(o->rh), k = 0;
	size_t noff[H2O_FIELDS], nlen[H2O_FIELDS], voff[H2O_FIELDS], vlen[H2O_FIELDS];
	const uint8_t *p, *base;

	if ((m = evbuffer_new()) == NULL)
		return -1;
	p = evbuffer_pullup(o->rh, -1);
	for (i = 0; i < o->rn && off < len && k < H2O_FIELDS; i++) {
		const uint8_t *name = p + off, *val;
		size_t nl = strlen((const char *)name), vl;

		val = name + nl + 1;
		vl = strlen((const char *)val);
		off += nl + vl + 2;
		/* A scrubbed body's length is not the origin's. */
		if (scrubbing(s) && nl == 14 && memcmp(name, "content-length",
		    14) == 0)
			continue;
		if (scrubbing(s) && ((nl == 13 && memcmp(name, "grpc-encoding",
		    13) == 0) || (nl == 16 && memcmp(name, "content-encoding",
		    16) == 0)) && !(vl == 8 && memcmp(val, "identity", 8) == 0)) {
			evbuffer_free(m);
			return -1;
		}
		/* A name holding a secret is no field the client gets. */
		if (cred_name_leaks(s, (const char *)name, nl))
			continue;
		noff[k] = evbuffer_get_length(m);
		nlen[k] = nl;
		evbuffer_add(m, name, nl);
		voff[k] = evbuffer_get_length(m);
		clean_value(s, val, vl, m);
		vlen[k] = evbuffer_get_length(m) - voff[k];
		k++;
	}
	base = evbuffer_pullup(m, -1);
	for (i = 0; i < k; i++)
		nv[i] = (nghttp2_nv){ (uint8_t *)base + noff[i],
		    (uint8_t *)base + voff[i], nlen[i], vlen[i],
		    NGHTTP2_NV_FLAG_NONE };
	*n = k;
	*mem = m;
	evbuffer_drain(o->rh, len);
	o->rn = 0;
	return 0;
}


static struct h2o *
stream_of(nghttp2_session *ng, int32_t id)
{
	struct h2o_hd *hd = nghttp2_session_get_stream_user_data(ng, id);

	return hd != NULL && hd->o != NULL && !hd->o->done ? hd->o : NULL;
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *arg)
{
	struct h2o *o = stream_of(ng, f->hd.stream_id);

	if (o == NULL)
		return 0;
	if (nl == 7 && memcmp(name, ":status", 7) == 0) {
		o->s->fwd.status = atoi((const char *)value);
	} else if (nl > 0 && name[0] == ':') {
		return 0;
	}
	/* A response head as large as a request head may be, no larger. */
	if (o->rn >= H2O_FIELDS - 1 || evbuffer_get_length(o->rh) + nl + vl >
	    o->s->p->cfg->max_header_bytes) {
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR,
		    "the origin's response head is too large");
		return 0;
	}
	evbuffer_add(o->rh, name, nl);
	evbuffer_add(o->rh, "", 1);
	evbuffer_add(o->rh, value, vl);
	evbuffer_add(o->rh, "", 1);
	o->rn++;
	return 0;
}

static void
response_head(struct h2o *o, int end)
{
	struct exchange *s = o->s;
	nghttp2_nv nv[H2O_FIELDS];
	struct evbuffer *mem = NULL;
	size_t n = 0;

	if (s->fwd.status < 200) {		/* 1xx: not relayed */
		evbuffer_drain(o->rh, evbuffer_get_length(o->rh));
		o->rn = 0;
		return;
	}
	if (block_nv(o, nv, &n, &mem) == -1) {
		h2o_fail(o, 502, REASON_UPSTREAM_ENCODING, "a credential's host "
		    "answered compressed, which cannot be scrubbed");
		return;
	}
	if (scrubbing(s) && !s->fwd.grpc && !end) {
		const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
		size_t k = cred_scrub_lists(s, secrets, phs);

		if ((o->scrub = vault_scrubber_new(s->fwd.plan.snap, secrets,
		    phs, k)) == NULL) {
			evbuffer_free(mem);
			h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "cannot scrub");
			return;
		}
	}
	o->head_done = 1;
	s->fwd.resp_head_done = 1;
	exchange_stamp(s, &s->t.head, NULL);
	/* Answered: the swapped values (kept for a retry) need not stay. */
	if (o->fields != NULL) {
		evbuffer_free(o->fields);
		o->fields = NULL;
	}
	if (fe_stream_head(s, nv, n, end) == -1) {
		evbuffer_free(mem);
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "stream gone");
		return;
	}
	evbuffer_free(mem);
}

static void
response_end(struct h2o *o)
{
	nghttp2_nv nv[H2O_FIELDS];
	struct evbuffer *mem = NULL;
	size_t n = 0;

	if (evbuffer_get_length(o->msg) > 0) {
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "a gRPC message cut short");
		return;
	}
	if (o->scrub != NULL) {
		struct evbuffer *clean = evbuffer_new();

		if (clean == NULL || vault_scrub_finish(o->scrub, clean) == -1 ||
		    fe_stream_data(o->s, clean) == -1) {
			if (clean != NULL)
				evbuffer_free(clean);
			h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "cannot scrub");
			return;
		}
		evbuffer_free(clean);
	}
	if (block_nv(o, nv, &n, &mem) == -1) {
		h2o_fail(o, 502, REASON_UPSTREAM_ENCODING, "compressed trailers");
		return;
	}
	if (fe_stream_end(o->s, nv, n) == -1) {
		evbuffer_free(mem);
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "stream gone");
		return;
	}
	evbuffer_free(mem);
	h2o_done(o);
}

/*
 * gRPC messages (1-byte flag, 4-byte length, payload) toward the client;
 * on credential hosts each is scrubbed whole and framed again with its
 * new length. A compressed message there cannot be read: refused.
 */
static int
response_data(struct h2o *o, const uint8_t *data, size_t len)
{
	struct exchange *s = o->s;
	struct evbuffer *out;
	uint8_t hdr[5];
	uint32_t mlen;

	if (!scrubbing(s) || o->scrub != NULL) {
		struct evbuffer *raw;

		if ((out = evbuffer_new()) == NULL)
			return -1;
		if (o->scrub != NULL) {
			/* A body streams through the scrubber (forwarding's own). */
			if ((raw = evbuffer_new()) == NULL) {
				evbuffer_free(out);
				return -1;
			}
			evbuffer_add(raw, data, len);
			if (vault_scrub(o->scrub, raw, out) == -1) {
				evbuffer_free(raw);
				evbuffer_free(out);
				return -1;
			}
			evbuffer_free(raw);
		} else
			evbuffer_add(out, data, len);
		s->down += len;
		if (fe_stream_data(s, out) == -1) {
			evbuffer_free(out);
			return -1;
		}
		evbuffer_free(out);
		return 0;
	}
	evbuffer_add(o->msg, data, len);
	while (evbuffer_get_length(o->msg) >= 5) {
		evbuffer_copyout(o->msg, hdr, 5);
		mlen = (uint32_t)hdr[1] << 24 | (uint32_t)hdr[2] << 16 |
		    (uint32_t)hdr[3] << 8 | hdr[4];
		if ((hdr[0] & 1) || mlen > H2O_MSG_MAX)
			return -1;
		if (evbuffer_get_length(o->msg) < 5 + (size_t)mlen)
			break;
		if ((out = evbuffer_new()) == NULL)
			return -1;
		{
			struct evbuffer *clean = evbuffer_new();
			const uint8_t *payload;
			size_t cl;

			evbuffer_drain(o->msg, 5);
			payload = evbuffer_pullup(o->msg, mlen);
			if (clean == NULL) {
				evbuffer_free(out);
				return -1;
			}
			clean_value(s, payload, mlen, clean);
			evbuffer_drain(o->msg, mlen);
			cl = evbuffer_get_length(clean);
			hdr[1] = (uint8_t)(cl >> 24);
			hdr[2] = (uint8_t)(cl >> 16);
			hdr[3] = (uint8_t)(cl >> 8);
			hdr[4] = (uint8_t)cl;
			evbuffer_add(out, hdr, 5);
			evbuffer_add_buffer(out, clean);
			evbuffer_free(clean);
		}
		s->down += 5 + mlen;
		if (fe_stream_data(s, out) == -1) {
			evbuffer_free(out);
			return -1;
		}
		evbuffer_free(out);
	}
	return 0;
}

/* What the stream holds of its answer: for the client, and of a message. */
static size_t
h2o_held(const struct h2o *o)
{
	return fe_stream_pending(o->s) + evbuffer_get_length(o->msg);
}

/* Its slot given back once it holds H2O_BUF or less. */
static void
h2o_big_release(struct h2o *o)
{
	if (o->s->big_slot && h2o_held(o) <= H2O_BUF) {
		o->s->big_slot = 0;
		o->s->c->grpc_big--;
	}
}

/*
 * 1 when the origin's window may come back for what the stream holds: at
 * most H2O_BUF waits for the client, and more of a message than H2O_BUF
 * only with one of the connection's H2O_BIG_STREAMS slots.
 */
static int
h2o_room(struct h2o *o)
{
	if (fe_stream_pending(o->s) > H2O_BUF)
		return 0;
	if (o->s->big_slot || h2o_held(o) <= H2O_BUF)
		return 1;
	if (o->s->c->grpc_big >= H2O_BIG_STREAMS)
		return 0;
	o->s->big_slot = 1;
	o->s->c->grpc_big++;
	return 1;
}

/* Without a slot: looked at again shortly (slots free as clients read). */
static void
h2o_big_wait(struct h2o *o)
{
	struct timeval tv = { 0, H2O_BIG_POLL_MS * 1000 };

	if (o->big_ev == NULL &&
	    (o->big_ev = evtimer_new(o->s->w->base, big_cb, o)) == NULL)
		return;
	evtimer_add(o->big_ev, &tv);
}

static int
on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2o *o = stream_of(ng, id);

	if (o == NULL) {
		nghttp2_session_consume(ng, id, len);	/* nobody reads it */
		return 0;
	}
	if (response_data(o, data, len) == -1) {
		/* Message by message only on a gRPC stream that is scrubbed. */
		if (scrubbing(o->s) && o->scrub == NULL)
			h2o_fail(o, 502, REASON_UPSTREAM_ENCODING, "a gRPC "
			    "message that cannot be scrubbed (compressed, or "
			    "over 4 MiB)");
		else
			h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "the answer "
			    "could not be relayed");
		return 0;
	}
	/* The window comes back as the client takes the bytes (h2o_resume). */
	h2o_big_release(o);
	if (h2o_room(o))
		nghttp2_session_consume(ng, id, len);
	else {
		o->unconsumed += len;
		if (fe_stream_pending(o->s) <= H2O_BUF)
			h2o_big_wait(o);	/* a slot, not the client */
	}
	return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2o *o = stream_of(ng, f->hd.stream_id);
	int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	if (o == NULL || f->hd.stream_id == 0)
		return 0;
	exchange_touch(o->s);	/* the origin speaks on it: not idle */
	if (f->hd.type == NGHTTP2_HEADERS) {
		if (!o->head_done) {
			response_head(o, end);
			if (end && !o->done && o->head_done)
				h2o_done(o);
			return 0;
		}
		if (end)
			response_end(o);
		return 0;
	}
	if (f->hd.type == NGHTTP2_DATA && end)
		response_end(o);
	return 0;
}

/*
 * A stream may go again on another connection when nothing of it was
 * answered and no body byte left, at most H2O_RETRIES times: when the
 * origin said it did not process it (REFUSED_STREAM, a GOAWAY's last
 * stream id), or -- idempotent methods only (RFC 9110 §9.2.2) -- when the
 * connection ended under it.
 */
static int
h2o_may_retry(const struct h2o *o, int idempotent_only)
{
	const char *m = o->s->fwd.method;

	if (o->done || o->head_done || o->s->up > 0 ||
	    o->retried >= H2O_RETRIES || o->fields == NULL)
		return 0;
	return !idempotent_only || strcmp(m, "GET") == 0 ||
	    strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

static void
hd_free(struct h2o_hd *hd)
{
	TAILQ_REMOVE(&hd->up->hds, hd, entry);
	if (hd->fields != NULL)
		evbuffer_free(hd->fields);	/* wiped as it goes */
	free(hd);
}

/* nghttp2 is done with the stream: hd goes; o, if still there, learns how. */
static int
stream_gone(struct h2o_hd *hd, uint32_t code)
{
	struct h2o *o = hd->o;
	int32_t id = hd->sid;

	hd_free(hd);
	if (o == NULL)
		return 0;
	o->hd = NULL;
	o->sid = -1;		/* nothing to reset any more */
	/*
	 * Refused before the origin processed it (a GOAWAY's last stream id, a
	 * connection at its request limit): nothing of it was answered, and no
	 * body byte went, so it goes again on another connection, once.
	 */
	if (!o->done && code == NGHTTP2_REFUSED_STREAM && h2o_may_retry(o, 0)) {
		o->retry = 1;
		event_active(o->end_ev, EV_TIMEOUT, 0);
		return 0;
	}
	if (!o->done) {
		log_debug("session %llu: origin closed stream %d: %s",
		    (unsigned long long)o->s->id, (int)id,
		    nghttp2_http2_strerror(code));
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR,
		    "the origin reset the stream");
	}
	return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2o_hd *hd = nghttp2_session_get_stream_user_data(ng, id);

	return hd != NULL ? stream_gone(hd, code) : 0;
}

/*
 * A request that never left (a GOAWAY came first, or it was reset while
 * queued): there is no stream to ask for its user data, so hd is looked up.
 */
static int
on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *f, int err,
    void *arg)
{
	struct h2up *up = arg;
	struct h2o_hd *hd;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    nghttp2_session_get_stream_user_data(ng, f->hd.stream_id) != NULL)
		return 0;
	TAILQ_FOREACH(hd, &up->hds, entry)
		if (hd->sid == f->hd.stream_id)
			return stream_gone(hd, NGHTTP2_REFUSED_STREAM);
	return 0;
}

static ssize_t
on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct h2up *up = arg;
	struct evbuffer *out;

	if (up->og == NULL)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	out = bufferevent_get_output(up->og->bev);
	if (evbuffer_get_length(out) > PROXY_HWM)
		return NGHTTP2_ERR_WOULDBLOCK;
	evbuffer_add(out, data, len);
	return (ssize_t)len;
}



/* ---- request body: client stream -> origin -------------------------- */

static ssize_t
body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2o_hd *hd = src->ptr;
	struct h2o *o = hd->o;
	int n;

	if (o == NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;	/* RST_STREAM */
	if ((n = evbuffer_remove(o->ready, buf, length)) < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	o->s->up += (uint64_t)n;
	if (evbuffer_get_length(o->ready) == 0 && o->up_done)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	else if (n == 0) {
		o->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	/* Room again: more of the stream's body, from the loop. */
	if (evbuffer_get_length(o->ready) < H2O_BUF / 2)
		fe_stream_poke(o->s);
	return n;
}

/*
 * The stream's body as its DATA frames carried it, into o->up_body; up_done
 * at its end (Content-Length reached, or END_STREAM). -1: the stream is
 * gone, or its body is unlike its Content-Length (nghttp2 holds DATA to it).
 */
static int
body_decode(struct h2o *o)
{
	struct forward *f = &o->s->fwd;
	struct evbuffer *in = fe_stream_body(o->s);
	size_t avail;
	int ended;

	if (in == NULL)
		return -1;
	ended = fe_stream_body_end(o->s, NULL, NULL);
	avail = evbuffer_get_length(in);
	if (f->req_framing == HTTP_BODY_LENGTH) {
		if (avail > f->req_left || (ended && avail < f->req_left))
			return -1;
		f->req_left -= avail;
	} else if (f->req_framing == HTTP_BODY_NONE && avail > 0)
		return -1;
	evbuffer_remove_buffer(in, o->up_body, avail);
	o->up_done = f->req_framing == HTTP_BODY_NONE || ended ||
	    (f->req_framing == HTTP_BODY_LENGTH && f->req_left == 0);
	return 0;
}

void
h2o_client_read(struct exchange *s)
{
	struct h2o *o = s->h2o;
	size_t len, hold;
	int found;

	if (o == NULL || o->done || o->up == NULL || o->sid <= 0)
		return;
	/* Held: the stream keeps the rest (and the client's window) until room. */
	if (evbuffer_get_length(o->ready) > H2O_BUF)
		return;
	if (body_decode(o) == -1) {
		h2o_fail(o, 400, REASON_BAD_REQUEST, "malformed request body");
		return;
	}
	len = evbuffer_get_length(o->up_body);
	hold = o->up_done ? 0 : cred_holdback(s->p, o->up_body, len);
	/* A placeholder in a body is never swapped: refused (docs/credentials.md). */
	found = s->p->n_phs > 0 && cred_in_body(s, o->up_body, len, len - hold,
	    s->fwd.plan.cred, sizeof(s->fwd.plan.cred));
	if (found) {
		h2o_fail(o, 403, REASON_CRED_MISUSE,
		    "a credential placeholder in a request body");
		return;
	}
	/* Secrets (docs/dlp.md): the payload about to move, then its end. */
	if (s->dlp != NULL && (dlp_payload(s, o->up_body, len - hold,
	    "h2-data") == -1 || (o->up_done && dlp_payload_end(s,
	    "h2-data") == -1))) {
		h2o_fail(o, 403, REASON_SECRET_DETECTED,
		    "a secret in the request body");
		return;
	}
	evbuffer_remove_buffer(o->up_body, o->ready, len - hold);
	if (o->deferred && (o->up_done || evbuffer_get_length(o->ready) > 0)) {
		o->deferred = 0;
		nghttp2_session_resume_data(o->up->ng, o->sid);
	}
	h2up_flush(o->up);
}

void
h2o_resume(struct exchange *s)
{
	struct h2o *o = s->h2o;

	if (o == NULL)
		return;
	h2o_big_release(o);
	if (o->up == NULL || o->sid <= 0 || o->unconsumed == 0 ||
	    fe_stream_pending(s) > H2O_BUF / 2)
		return;
	if (!h2o_room(o)) {
		h2o_big_wait(o);
		return;
	}
	nghttp2_session_consume(o->up->ng, o->sid, o->unconsumed);
	o->unconsumed = 0;
	/* Not inside the client's send: from the loop. */
	event_active(o->up->flush_ev, EV_TIMEOUT, 0);
}

static void
big_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2o *o = arg;

	h2o_resume(o->s);
}

/* ---- the origin connection ----------------------------------------- */

static void
h2up_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2up *up = arg;

	if (up->ng != NULL)
		nghttp2_session_del(up->ng);
	while (!TAILQ_EMPTY(&up->hds))
		hd_free(TAILQ_FIRST(&up->hds));
	origin_close(up->og);
	event_free(up->flush_ev);
	event_free(up->free_ev);
	free(up);
}

/* No owner and no stream: gone, from the loop (its callbacks may be up the stack). */
static void
h2up_unref(struct h2up *up)
{
	if (up->refs > 0)
		up->refs--;
	if (up->refs == 0 && up->owner == NULL) {
		if (up->og != NULL)
			bufferevent_disable(up->og->bev, EV_READ | EV_WRITE);
		event_active(up->free_ev, EV_TIMEOUT, 0);
	}
}

/* Who it belongs to; its TLS session tickets are filed under that name. */
static void
h2up_owner(struct h2up *up, struct exchange *owner)
{
	SSL *ssl;

	up->owner = owner;
	if (owner != NULL)
		owner->c->h2up = up;
	if (up->og != NULL &&
	    (ssl = bufferevent_openssl_get_ssl(up->og->bev)) != NULL)
		SSL_set_app_data(ssl, owner);
}

/* The client connection that owned it ends (exchange_close). */
void
h2up_release(struct exchange *owner)
{
	struct h2up *up = owner->c->h2up;

	if (up == NULL || owner->c->x != owner)
		return;		/* a stream's exchange: the connection's stays */
	owner->c->h2up = NULL;
	h2up_owner(up, NULL);
	up->refs++;
	h2up_unref(up);
}

/* The connection failed: every stream on it fails, and nothing new joins. */
static void
h2up_dead(struct h2up *up, int status, enum sg_reason r, const char *why)
{
	struct h2o *o;

	if (up->dead)
		return;
	up->dead = 1;
	if (up->owner != NULL && up->owner->c->h2up == up) {
		up->owner->c->h2up = NULL;
		h2up_owner(up, NULL);
		up->refs++;
		h2up_unref(up);
	}
	if (up->og != NULL)
		bufferevent_disable(up->og->bev, EV_READ | EV_WRITE);
	TAILQ_FOREACH(o, &up->streams, entry) {
		if (o->retry)		/* already on its way elsewhere */
			continue;
		if (h2o_may_retry(o, 1)) {
			if (o->hd != NULL)	/* its fields still go with it */
				o->hd->o = NULL;
			o->hd = NULL;
			o->sid = -1;
			o->retry = 1;
			event_active(o->end_ev, EV_TIMEOUT, 0);
		} else
			h2o_fail(o, status, r, why);
	}
}

static void
h2up_flush(struct h2up *up)
{
	if (up->dead || up->ng == NULL)
		return;
	if (nghttp2_session_send(up->ng) != 0)
		h2up_dead(up, 502, REASON_UPSTREAM_ERROR,
		    "HTTP/2 to the origin failed");
	/*
	 * A connection error nghttp2 handled itself (a PUSH_PROMISE, a frame
	 * on a stream never opened: GOAWAY sent, mem_recv still positive)
	 * leaves a session that neither reads nor writes: its streams end
	 * now, or they hung on an origin that kept TCP open.
	 */
	else if (!nghttp2_session_want_read(up->ng) &&
	    !nghttp2_session_want_write(up->ng))
		h2up_dead(up, 502, REASON_UPSTREAM_ERROR,
		    "the origin broke HTTP/2");
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	h2up_flush(arg);
}

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
	struct h2up *up = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	ssize_t r;

	if (up->dead)
		return;
	if (up->owner != NULL)
		exchange_touch(up->owner);
	r = nghttp2_session_mem_recv(up->ng, evbuffer_pullup(in, -1),
	    evbuffer_get_length(in));
	evbuffer_drain(in, evbuffer_get_length(in));
	if (r < 0) {
		h2up_dead(up, 502, REASON_UPSTREAM_ERROR,
		    "the origin broke HTTP/2");
		return;
	}
	h2up_flush(up);
}

static void
up_write_cb(struct bufferevent *bev, void *arg)
{
	struct h2up *up = arg;

	if (!up->dead && nghttp2_session_want_write(up->ng))
		h2up_flush(up);
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	h2up_dead(arg, (what & BEV_EVENT_TIMEOUT) ? 504 : 502,
	    (what & BEV_EVENT_TIMEOUT) ? REASON_UPSTREAM_TIMEOUT :
	    REASON_UPSTREAM_ERROR, "the origin closed the connection");
}

/* A connection that just picked h2: the stream's exchange hands it over. */
static struct h2up *
h2up_new(struct exchange *s)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
		    s->p->cfg->max_header_bytes },
	};
	struct h2up *up;
	SSL *ssl;
	int rv;

	if ((up = calloc(1, sizeof(*up))) == NULL)
		return NULL;
	up->w = s->w;
	TAILQ_INIT(&up->streams);
	TAILQ_INIT(&up->hds);
	up->flush_ev = event_new(s->w->base, -1, 0, flush_cb, up);
	up->free_ev = event_new(s->w->base, -1, 0, h2up_free_cb, up);
	if (up->flush_ev == NULL || up->free_ev == NULL ||
	    nghttp2_session_callbacks_new(&cb) != 0)
		goto fail;
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		goto fail;
	}
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cb,
	    on_frame_not_send);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	nghttp2_option_set_no_closed_streams(opt, 1);
	rv = nghttp2_session_client_new2(&up->ng, cb, up, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	/* Streams share it; each is bounded by its own window and H2O_BUF. */
	if (rv != 0 || nghttp2_submit_settings(up->ng, NGHTTP2_FLAG_NONE,
	    iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
	    nghttp2_session_set_local_window_size(up->ng,
	    NGHTTP2_FLAG_NONE, 0, H2UP_STREAMS * 65535) != 0)
		goto fail;
	/*
	 * The connection and what it was opened for move to the h2up. Its
	 * resumable sessions (origin_new_session_cb) are filed for the owner
	 * while there is one (h2up_owner): the stream's exchange goes first.
	 */
	if ((ssl = bufferevent_openssl_get_ssl(EXCHANGE_OBEV(s))) != NULL)
		SSL_set_app_data(ssl, NULL);
	up->og = s->o;	/* bound: h2up_new is called on a bound connection */
	s->o = NULL;
	bufferevent_setcb(up->og->bev, up_read_cb, up_write_cb, up_event_cb, up);
	bufferevent_enable(up->og->bev, EV_READ | EV_WRITE);
	return up;
fail:
	if (up->ng != NULL)
		nghttp2_session_del(up->ng);
	if (up->flush_ev != NULL)
		event_free(up->flush_ev);
	if (up->free_ev != NULL)
		event_free(up->free_ev);
	free(up);
	return NULL;
}

/* The request's fields as nv into o->fields; swapped ones never indexed. */
static void
request_nv(struct h2o *o, nghttp2_nv *nv, size_t *n)
{
	const uint8_t *p = evbuffer_pullup(o->fields, -1);
	size_t i, off = 0, len = evbuffer_get_length(o->fields);

	for (i = 0; i < o->n_fields && i < H2O_FIELDS && off < len; i++) {
		size_t nl = strlen((const char *)p + off);
		size_t vl = strlen((const char *)p + off + nl + 1);

		nv[i] = (nghttp2_nv){ (uint8_t *)p + off,
		    (uint8_t *)p + off + nl + 1, nl, vl,
		    NGHTTP2_NV_FLAG_NO_INDEX | NGHTTP2_NV_FLAG_NO_COPY_NAME |
		    NGHTTP2_NV_FLAG_NO_COPY_VALUE };
		off += nl + vl + 2;
	}
	*n = i;
}

/* The stream goes out on up. */
static void
h2o_start(struct h2o *o, struct h2up *up)
{
	struct exchange *s = o->s;
	nghttp2_nv nv[H2O_FIELDS];
	nghttp2_data_provider dp;
	size_t n;

	o->up = up;
	up->refs++;
	TAILQ_INSERT_TAIL(&up->streams, o, entry);
	s->state = S_FORWARD;
	s->fwd.ip = up->og->bind.addr;
	if ((o->hd = calloc(1, sizeof(*o->hd))) == NULL) {
		h2o_fail(o, 502, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	o->hd->o = o;
	o->hd->up = up;
	TAILQ_INSERT_TAIL(&up->hds, o->hd, entry);
	request_nv(o, nv, &n);
	dp.source.ptr = o->hd;
	dp.read_callback = body_cb;
	o->sid = nghttp2_submit_request(up->ng, NULL, nv, n,
	    s->fwd.req_framing == HTTP_BODY_NONE ? NULL : &dp, o->hd);
	if (o->sid < 0) {
		hd_free(o->hd);
		o->hd = NULL;
		o->sid = -1;
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "cannot open a stream");
		return;
	}
	exchange_stamp(s, &s->t.sent, NULL);
	o->hd->sid = o->sid;
	h2o_client_read(s);
	h2up_flush(up);
}

static void
h2o_connected(struct exchange *s)
{
	struct h2o *o = s->h2o;
	struct exchange *owner;
	const unsigned char *alpn = NULL;
	unsigned int alen = 0;
	struct h2up *up;
	SSL *ssl;

	if (upstream_guard(s) == -1 || o == NULL)
		return;
	if ((ssl = bufferevent_openssl_get_ssl(EXCHANGE_OBEV(s))) != NULL)
		SSL_get0_alpn_selected(ssl, &alpn, &alen);
	if (alen != 2 || memcmp(alpn, "h2", 2) != 0) {
		if (o->only_h2) {
			h2o_fail(o, 502, REASON_UPSTREAM_PROTOCOL, "gRPC needs "
			    "HTTP/2 and the origin does not speak it");
			return;
		}
		/* An HTTP/1.1 origin: the head proxy_http.c built for it. */
		h2o_free(s);
		forward_start(s);
		return;
	}
	if ((up = h2up_new(s)) == NULL) {
		h2o_fail(o, 502, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	/* The client connection keeps it for its next streams. */
	if ((owner = fe_stream_parent(s)) != NULL && owner->c->h2up == NULL)
		h2up_owner(up, owner);
	h2o_start(o, up);
}

/* The client connection's origin connection, when this stream may use it. */
static struct h2up *
h2up_for(struct exchange *s)
{
	struct exchange *owner = fe_stream_parent(s);
	struct origin_bind want;
	struct h2up *up;

	if (owner == NULL || (up = owner->c->h2up) == NULL)
		return NULL;
	if (up->dead || !nghttp2_session_check_request_allowed(up->ng)) {
		/* Going away: the next connection becomes the shared one. */
		owner->c->h2up = NULL;
		h2up_owner(up, NULL);
		up->refs++;
		h2up_unref(up);
		return NULL;
	}
	if (up->refs >= H2UP_STREAMS)
		return NULL;
	origin_bind_want(s, &want);
	if (!origin_bind_match(&up->og->bind, &want, s->addrs, s->n_addrs))
		return NULL;
	return up;
}

/* The stream leaves the connection that refused it, for another. */
static void
h2o_retry(struct h2o *o)
{
	struct exchange *s = o->s;
	struct h2up *up = o->up;

	log_debug("session %llu: a stream the origin refused goes again",
	    (unsigned long long)s->id);
	o->retry = 0;
	o->retried++;
	o->deferred = 0;
	exchange_touch(s);	/* the origin answered it, with a refusal */
	if (up != NULL) {
		TAILQ_REMOVE(&up->streams, o, entry);
		o->up = NULL;
		h2up_unref(up);
	}
	if ((up = h2up_for(s)) != NULL) {
		h2o_start(o, up);
		return;
	}
	s->fwd.origin_alpn = o->only_h2 ? 1 : 2;
	upstream_connect(s, h2o_connected);
}

/*
 * After the decision and the credential plan (proxy_http.c): the swapped
 * fields are made now, in wiped memory; the stream goes out on the client
 * connection's origin connection, or waits for one of its own.
 */
void
h2o_request(struct exchange *s, const struct http_request *req, int n,
    int only_h2)
{
	struct vault_wbuf *wb;
	struct h2up *up;
	struct h2o *o;

	if ((o = calloc(1, sizeof(*o))) == NULL ||
	    (o->fields = evbuffer_new()) == NULL ||
	    (o->up_body = evbuffer_new()) == NULL ||
	    (o->ready = evbuffer_new()) == NULL ||
	    (o->rh = evbuffer_new()) == NULL ||
	    (o->msg = evbuffer_new()) == NULL ||
	    (o->end_ev = event_new(s->w->base, -1, 0, end_cb, o)) == NULL) {
		s->h2o = o;
		h2o_free(s);
		exchange_deny(s, 502, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	o->s = s;
	o->sid = -1;
	o->only_h2 = only_h2;
	s->h2o = o;
	if ((wb = vault_wbuf_new()) == NULL ||
	    http_h2_fields(s, req, wb, &o->n_fields) == -1 ||
	    vault_wbuf_hand(wb, o->fields) == -1) {
		if (wb != NULL)
			vault_wbuf_free(wb);
		h2o_free(s);
		exchange_deny(s, 502, REASON_CRED_UNAVAILABLE,
		    "the credential could not be swapped in");
		return;
	}
	if (n > 0 && EXCHANGE_CBEV(s) != NULL)
		evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	if ((up = h2up_for(s)) != NULL) {
		h2o_start(o, up);
		return;
	}
	s->fwd.origin_alpn = only_h2 ? 1 : 2;
	upstream_connect(s, h2o_connected);
}

/*
 * A stream's request payload came (or its end): to its HTTP/2 origin
 * stream, or to the HTTP/1.1 forward.
 */
void
stream_client_body(struct exchange *s)
{
	if (s->h2o != NULL)
		h2o_client_read(s);
	else
		forward_client_read(s);
}

/* The client took a stream's response bytes: its origin may send more. */
void
stream_resume(struct exchange *s)
{
	if (s->h2o != NULL)
		h2o_resume(s);
	else
		forward_resume(s);
}
