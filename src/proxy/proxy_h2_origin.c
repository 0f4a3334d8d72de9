/*
 * HTTP/2 streams to HTTP/2 origins: a stream session whose request was
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
#include "proxy/proxy_int.h"
#include "vault/vault.h"

#define H2O_BUF		(64 * 1024)	/* request bytes held for the origin */
#define H2O_MSG_MAX	(4 * 1024 * 1024)	/* a gRPC message scrubbed whole */
#define H2O_FIELDS	(HTTP_MAX_HEADERS + 8)

struct h2o {
	struct session		*s;
	nghttp2_session		*ng;
	int32_t			 sid;
	struct event		*flush_ev;
	struct evbuffer		*fields;	/* swapped request fields (wiped memory) */
	size_t			 n_fields;
	/* request body */
	struct evbuffer		*up;		/* decoded, not yet searched whole */
	struct evbuffer		*ready;		/* searched: for the origin */
	int			 up_done;
	int			 deferred;
	/* response */
	int			 head_done;
	int			 in_trailers;
	struct evbuffer		*rh;		/* "name\0value\0" of a block */
	size_t			 rn;
	struct evbuffer		*msg;		/* gRPC bytes not yet a whole message */
	struct vault_scrubber	*scrub;		/* other bodies of credential hosts */
	int			 only_h2;
	size_t			 unconsumed;
	int			 done;
	struct event		*end_ev;
	int			 end_status;
	enum sg_reason		 end_reason;
	char			 end_detail[128];
};

static void	h2o_flush(struct h2o *);

/* ---- ending ---------------------------------------------------------- */

/*
 * How the stream ends is decided inside nghttp2's callbacks, and acted on
 * from the loop: the session (and the nghttp2 session with it) may go.
 */
static void
end_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2o *o = arg;
	struct session *s = o->s;
	enum sg_reason r = o->end_reason;

	if (s->closing)
		return;
	if (r == REASON_NONE) {
		session_log(s, "allow", s->fwd.status, REASON_NONE,
		    s->fwd.bytes_up, s->fwd.bytes_down, &s->fwd.started);
		session_finish(s, "done");
		return;
	}
	if (!s->fwd.resp_head_done) {
		/* Through the stream's HTTP/1.1 answer (proxy_h2.c translates). */
		session_deny(s, o->end_status, r, o->end_detail);
		return;
	}
	/* Its head is out: the stream ends with RST_STREAM (proxy_h2.c). */
	session_log(s, reason_decision(r), s->fwd.status, r, s->fwd.bytes_up,
	    s->fwd.bytes_down, &s->fwd.started);
	session_close(s, reason_word(r));
}

static void
h2o_fail(struct h2o *o, int status, enum sg_reason r, const char *detail)
{
	if (o->done)
		return;
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
h2o_free(struct session *s)
{
	struct h2o *o = s->h2o;

	if (o == NULL)
		return;
	s->h2o = NULL;
	if (o->ng != NULL)
		nghttp2_session_del(o->ng);
	if (o->flush_ev != NULL)
		event_free(o->flush_ev);
	if (o->end_ev != NULL)
		event_free(o->end_ev);
	if (o->fields != NULL)
		evbuffer_free(o->fields);	/* the wbuf is wiped as it goes */
	if (o->up != NULL)
		evbuffer_free(o->up);
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
scrubbing(const struct session *s)
{
	return s->fwd.plan.n_bound > 0 && s->fwd.plan.snap != NULL;
}

/* A value toward the client: scrubbed on credential hosts. */
static void
clean_value(struct session *s, const uint8_t *v, size_t len, struct evbuffer *out)
{
	const char *secrets[CRED_MAX_BOUND], *phs[CRED_MAX_BOUND];
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
	struct session *s = o->s;
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

static int
on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *arg)
{
	struct h2o *o = arg;

	if (f->hd.stream_id != o->sid)
		return 0;
	if (nl == 7 && memcmp(name, ":status", 7) == 0) {
		o->s->fwd.status = atoi((const char *)value);
	} else if (nl > 0 && name[0] == ':') {
		return 0;
	}
	if (o->rn >= H2O_FIELDS - 1)
		return 0;
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
	struct session *s = o->s;
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
	if (scrubbing(s) && !s->h2_grpc && !end) {
		const char *secrets[CRED_MAX_BOUND], *phs[CRED_MAX_BOUND];
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
	if (h2_stream_head(s, nv, n, end) == -1) {
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
		    h2_stream_data(o->s, clean) == -1) {
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
	if (h2_stream_end(o->s, nv, n) == -1) {
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
	struct session *s = o->s;
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
		s->fwd.bytes_down += len;
		if (h2_stream_data(s, out) == -1) {
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
		s->fwd.bytes_down += 5 + mlen;
		if (h2_stream_data(s, out) == -1) {
			evbuffer_free(out);
			return -1;
		}
		evbuffer_free(out);
	}
	return 0;
}

static int
on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct h2o *o = arg;

	if (id != o->sid || o->done)
		return 0;
	if (response_data(o, data, len) == -1) {
		h2o_fail(o, 502, REASON_UPSTREAM_ENCODING, "a gRPC message that "
		    "cannot be scrubbed (compressed, or over 4 MiB)");
		return 0;
	}
	/* The window comes back as the client takes the bytes (h2o_resume). */
	if (h2_stream_pending(o->s) <= H2O_BUF)
		nghttp2_session_consume(ng, id, len);
	else
		o->unconsumed += len;
	return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2o *o = arg;
	int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	if (f->hd.stream_id != o->sid || o->done)
		return 0;
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

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct h2o *o = arg;

	if (id == o->sid && !o->done)
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR,
		    "the origin reset the stream");
	return 0;
}

static ssize_t
on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct h2o *o = arg;
	struct evbuffer *out;

	if (o->s->obev == NULL)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	out = bufferevent_get_output(o->s->obev);
	if (evbuffer_get_length(out) > PROXY_HWM)
		return NGHTTP2_ERR_WOULDBLOCK;
	evbuffer_add(out, data, len);
	return (ssize_t)len;
}

/* The HEADERS are out: the swapped values need not stay. */
static int
on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct h2o *o = arg;

	if (f->hd.type == NGHTTP2_HEADERS && f->hd.stream_id == o->sid &&
	    o->fields != NULL) {
		evbuffer_free(o->fields);
		o->fields = NULL;
	}
	return 0;
}

/* ---- request body: client stream -> origin -------------------------- */

static ssize_t
body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2o *o = arg;
	int n = evbuffer_remove(o->ready, buf, length);

	if (n < 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	o->s->fwd.bytes_up += (uint64_t)n;
	if (evbuffer_get_length(o->ready) == 0 && o->up_done)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	else if (n == 0) {
		o->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (evbuffer_get_length(o->ready) < H2O_BUF / 2 && o->s->cbev != NULL)
		bufferevent_enable(o->s->cbev, EV_READ);
	return n;
}

static void
payload_cb(const char *p, size_t n, void *arg)
{
	evbuffer_add(arg, p, n);
}

/* The body as the stream session got it (length or chunked), decoded. */
static int
body_decode(struct h2o *o)
{
	struct forward *f = &o->s->fwd;
	struct evbuffer *in = bufferevent_get_input(o->s->cbev);
	struct evbuffer_iovec iov[16];
	size_t avail = evbuffer_get_length(in), take = 0;
	int i, nvec, done = 0;

	switch (f->req_framing) {
	case HTTP_BODY_LENGTH:
		take = avail < f->req_left ? avail : (size_t)f->req_left;
		evbuffer_remove_buffer(in, o->up, take);
		f->req_left -= take;
		o->up_done = f->req_left == 0;
		return 0;
	case HTTP_BODY_CHUNKED:
		nvec = evbuffer_peek(in, -1, NULL, iov, 16);
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && !done; i++) {
			ssize_t r = http_chunked_decode(&f->req_chunk,
			    iov[i].iov_base, iov[i].iov_len, &done, payload_cb,
			    o->up);
			if (r < 0)
				return -1;
			take += (size_t)r;
		}
		evbuffer_drain(in, take);
		o->up_done = done;
		return 0;
	default:
		o->up_done = 1;
		return 0;
	}
}

void
h2o_client_read(struct session *s)
{
	struct h2o *o = s->h2o;
	size_t len, hold;
	int found;

	if (o == NULL || o->done || o->ng == NULL)
		return;
	if (body_decode(o) == -1) {
		h2o_fail(o, 400, REASON_BAD_REQUEST, "malformed request body");
		return;
	}
	len = evbuffer_get_length(o->up);
	hold = o->up_done ? 0 : cred_holdback(s->p, o->up, len);
	/* A placeholder in a body is never swapped: refused (docs/credentials.md). */
	found = s->p->n_phs > 0 && cred_in_body(s, o->up, len, len - hold,
	    s->fwd.plan.cred, sizeof(s->fwd.plan.cred));
	if (found) {
		h2o_fail(o, 403, REASON_CRED_MISUSE,
		    "a credential placeholder in a request body");
		return;
	}
	evbuffer_remove_buffer(o->up, o->ready, len - hold);
	if (evbuffer_get_length(o->ready) > H2O_BUF)
		bufferevent_disable(s->cbev, EV_READ);	/* body_cb resumes */
	if (o->deferred && (o->up_done || evbuffer_get_length(o->ready) > 0)) {
		o->deferred = 0;
		nghttp2_session_resume_data(o->ng, o->sid);
	}
	h2o_flush(o);
}

/* ---- the origin connection ----------------------------------------- */

static void
h2o_flush(struct h2o *o)
{
	if (o->ng == NULL || o->s->closing)
		return;
	if (nghttp2_session_send(o->ng) != 0)
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR, "HTTP/2 to the origin failed");
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	h2o_flush(arg);
}

void
h2o_resume(struct session *s)
{
	struct h2o *o = s->h2o;

	if (o == NULL || o->ng == NULL || o->unconsumed == 0 ||
	    h2_stream_pending(s) > H2O_BUF / 2)
		return;
	nghttp2_session_consume(o->ng, o->sid, o->unconsumed);
	o->unconsumed = 0;
	event_active(o->flush_ev, EV_TIMEOUT, 0);	/* not inside the client's send */
}

static void
origin_read_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct h2o *o = s->h2o;
	struct evbuffer *in = bufferevent_get_input(bev);
	ssize_t r;

	session_touch(s);
	if (o == NULL)
		return;
	r = nghttp2_session_mem_recv(o->ng, evbuffer_pullup(in, -1),
	    evbuffer_get_length(in));
	if (s->closing || s->h2o == NULL)
		return;
	evbuffer_drain(in, evbuffer_get_length(in));
	if (r < 0) {
		h2o_fail(o, 502, REASON_UPSTREAM_ERROR,
		    "the origin broke HTTP/2");
		return;
	}
	h2o_flush(o);
}

static void
origin_write_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	if (s->h2o != NULL && nghttp2_session_want_write(s->h2o->ng))
		h2o_flush(s->h2o);
}

static void
origin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	if (s->h2o != NULL)
		h2o_fail(s->h2o, (what & BEV_EVENT_TIMEOUT) ? 504 : 502,
		    (what & BEV_EVENT_TIMEOUT) ? REASON_UPSTREAM_TIMEOUT :
		    REASON_UPSTREAM_ERROR, "the origin closed the connection");
}

static int
h2o_session_new(struct h2o *o)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	int rv;

	if (nghttp2_session_callbacks_new(&cb) != 0)
		return -1;
	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cb);
		return -1;
	}
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	rv = nghttp2_session_client_new2(&o->ng, cb, o, opt);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	return rv == 0 ? 0 : -1;
}

/* The request's fields as nv into o->fields; swapped ones never indexed. */
static int
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
	return 0;
}

static void
h2o_connected(struct session *s)
{
	struct h2o *o = s->h2o;
	nghttp2_nv nv[H2O_FIELDS];
	nghttp2_data_provider dp;
	const unsigned char *alpn = NULL;
	unsigned int alen = 0;
	SSL *ssl;
	size_t n;

	if (upstream_guard(s) == -1 || o == NULL)
		return;
	s->state = S_FORWARD;
	s->fwd.ip = s->origin_addr;
	if ((ssl = bufferevent_openssl_get_ssl(s->obev)) != NULL)
		SSL_get0_alpn_selected(ssl, &alpn, &alen);
	if (alen != 2 || memcmp(alpn, "h2", 2) != 0) {
		if (o->only_h2) {
			h2o_fail(o, 502, REASON_UPSTREAM_PROTOCOL, "gRPC needs "
			    "HTTP/2 and the origin does not speak it");
			return;
		}
		/* An HTTP/1.1 origin: the head proxy_http.c built for it. */
		h2o_free(s);
		s->origin_h2 = 0;
		forward_start(s);
		return;
	}
	if (h2o_session_new(o) == -1 ||
	    nghttp2_submit_settings(o->ng, NGHTTP2_FLAG_NONE, NULL, 0) != 0) {
		h2o_fail(o, 502, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	request_nv(o, nv, &n);
	dp.source.ptr = o;
	dp.read_callback = body_cb;
	o->sid = nghttp2_submit_request(o->ng, NULL, nv, n,
	    s->fwd.req_framing == HTTP_BODY_NONE ? NULL : &dp, o);
	if (o->sid < 0) {
		h2o_fail(o, 502, REASON_INTERNAL_ERROR, "cannot submit");
		return;
	}
	bufferevent_setcb(s->obev, origin_read_cb, origin_write_cb,
	    origin_event_cb, s);
	bufferevent_enable(s->obev, EV_READ | EV_WRITE);
	bufferevent_setcb(s->cbev, http_client_read_cb, NULL,
	    session_client_event_cb, s);
	bufferevent_enable(s->cbev, EV_READ);
	h2o_client_read(s);
	if (!s->closing && s->h2o != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->obev)) > 0)
		origin_read_cb(s->obev, s);
}

/*
 * After the decision and the credential plan (proxy_http.c): the swapped
 * fields are made now, in wiped memory, and wait for the connection.
 */
void
h2o_request(struct session *s, const struct http_request *req, int n,
    int only_h2)
{
	struct vault_wbuf *wb;
	struct h2o *o;

	if ((o = calloc(1, sizeof(*o))) == NULL ||
	    (o->fields = evbuffer_new()) == NULL ||
	    (o->up = evbuffer_new()) == NULL ||
	    (o->ready = evbuffer_new()) == NULL ||
	    (o->rh = evbuffer_new()) == NULL ||
	    (o->msg = evbuffer_new()) == NULL ||
	    (o->flush_ev = event_new(s->w->base, -1, 0, flush_cb, o)) == NULL ||
	    (o->end_ev = event_new(s->w->base, -1, 0, end_cb, o)) == NULL) {
		s->h2o = o;
		h2o_free(s);
		session_deny(s, 502, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	o->s = s;
	o->only_h2 = only_h2;
	s->h2o = o;
	if ((wb = vault_wbuf_new()) == NULL ||
	    http_h2_fields(s, req, wb, &o->n_fields) == -1 ||
	    vault_wbuf_hand(wb, o->fields) == -1) {
		if (wb != NULL)
			vault_wbuf_free(wb);
		h2o_free(s);
		session_deny(s, 502, REASON_CRED_UNAVAILABLE,
		    "the credential could not be swapped in");
		return;
	}
	evbuffer_drain(bufferevent_get_input(s->cbev), (size_t)n);
	s->origin_h2 = only_h2 ? 1 : 2;
	upstream_connect(s, h2o_connected);
}
