/*
 * One HTTP request relayed to the origin and its response relayed back:
 * bodies streamed by their framing (Content-Length, chunked, until close)
 * with backpressure both ways, response heads rewritten (hop-by-hop
 * removed, Via added), keep-alive on both sides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"
#include "parse/ingress_host.h"
#include "vault/vault.h"

static void	origin_read_cb(struct bufferevent *, void *);
static void	origin_write_cb(struct bufferevent *, void *);
static void	origin_event_cb(struct bufferevent *, short, void *);
static void	client_write_cb(struct bufferevent *, void *);
static void	forward_done(struct exchange *);

/*
 * Move the body bytes of one message from src to dst, at most what the
 * framing says is left. Returns bytes moved, or -1 on bad chunked framing.
 */
static ssize_t
move_body(struct evbuffer *src, struct evbuffer *dst, enum http_framing fr,
    uint64_t *left, struct http_chunked *ck, int *done, size_t limit,
    int drop_trailers)
{
	size_t avail = evbuffer_get_length(src), take = 0,
	    trailer0 = ck != NULL ? ck->trailer_len : 0, dropped = 0;
	struct evbuffer_iovec iov[16];
	struct evbuffer_ptr at;
	int i, nvec;

	*done = 0;
	if (avail > limit)
		avail = limit;
	switch (fr) {
	case HTTP_BODY_NONE:
		*done = 1;
		return 0;
	case HTTP_BODY_LENGTH:
		take = avail < *left ? avail : (size_t)*left;
		*left -= take;
		*done = *left == 0;
		break;
	case HTTP_BODY_UNTIL_CLOSE:
		take = avail;
		break;
	case HTTP_BODY_CHUNKED:
		/*
		 * Validate the framing across segments; the bytes go on
		 * unchanged. All of them, 16 segments at a time: what stayed
		 * would wait for a read event that need not come again.
		 */
		while (!*done && take < avail) {
			if (evbuffer_ptr_set(src, &at, take,
			    EVBUFFER_PTR_SET) == -1 ||
			    (nvec = evbuffer_peek(src, -1, &at, iov, 16)) <= 0)
				break;
			if (nvec > 16)
				nvec = 16;
			for (i = 0; i < nvec && !*done && take < avail; i++) {
				size_t seg = iov[i].iov_len < avail - take ?
				    iov[i].iov_len : avail - take;
				ssize_t r = http_chunked_feed(ck,
				    iov[i].iov_base, seg, done);
				if (r < 0)
					return -1;
				take += (size_t)r;
			}
		}
		/*
		 * A request's trailer fields are not forwarded (RFC 9110
		 * 6.5.1: intermediaries commonly discard them): they are the
		 * last bytes taken, and the body ends with an empty section.
		 */
		if (drop_trailers)
			dropped = ck->trailer_len - trailer0;
		break;
	}
	if (take - dropped > 0 && evbuffer_remove_buffer(src, dst,
	    take - dropped) != (int)(take - dropped))
		return -1;
	if (dropped > 0 && evbuffer_drain(src, dropped) == -1)
		return -1;
	if (dropped > 0 && *done)
		evbuffer_add(dst, "\r\n", 2);
	return (ssize_t)take;
}

static void
dechunk_payload_cb(const char *p, size_t n, void *arg)
{
	evbuffer_add(arg, p, n);
}

int
forward_dechunk(struct http_chunked *ck, struct evbuffer *in,
    struct evbuffer *out, int *done, size_t *used)
{
	struct evbuffer_iovec iov[16];
	size_t take;
	int i, nvec;

	*done = 0;
	*used = 0;
	/* All of it: no read event need come again for what would stay. */
	while (!*done && evbuffer_get_length(in) > 0) {
		nvec = evbuffer_peek(in, -1, NULL, iov, 16);
		if (nvec > 16)
			nvec = 16;
		take = 0;
		for (i = 0; i < nvec && !*done; i++) {
			ssize_t r = http_chunked_decode(ck, iov[i].iov_base,
			    iov[i].iov_len, done, dechunk_payload_cb, out);
			if (r < 0)
				return -1;
			take += (size_t)r;
		}
		evbuffer_drain(in, take);
		*used += take;
	}
	return 0;
}

int
forward_body_decode(enum http_framing framing, uint64_t *left,
    struct http_chunked *ck, struct evbuffer *in, struct evbuffer *out,
    int *done, size_t *used)
{
	size_t avail = evbuffer_get_length(in), take;

	/*
	 * What was taken is counted as it is taken: draining a bufferevent's
	 * input may read more into it at once (a TLS filter's watermark).
	 */
	*done = 0;
	*used = 0;
	switch (framing) {
	case HTTP_BODY_LENGTH:
		take = avail < *left ? avail : (size_t)*left;
		evbuffer_remove_buffer(in, out, take);
		*left -= take;
		*done = *left == 0;
		*used = take;
		return 0;
	case HTTP_BODY_UNTIL_CLOSE:
		*used = avail;
		evbuffer_remove_buffer(in, out, avail);
		return 0;
	case HTTP_BODY_CHUNKED:
		return forward_dechunk(ck, in, out, done, used);
	default:
		*done = 1;
		return 0;
	}
}

void
forward_start(struct exchange *s)
{
	struct forward *f = &s->fwd;

	if (upstream_guard(s) == -1)
		return;
	s->state = S_FORWARD;
	f->ip = s->o->bind.addr;	/* upstream_guard: bound, so there */
	bufferevent_setcb(EXCHANGE_OBEV(s), origin_read_cb, origin_write_cb,
	    origin_event_cb, s);
	/* A held git push: its head waits for git_gate (proxy_git.c). */
	if (!f->git_hold)
		evbuffer_add_buffer(bufferevent_get_output(EXCHANGE_OBEV(s)),
		    f->head);
	exchange_stamp(s, &s->t.sent, NULL);
	f->req_done = f->req_framing == HTTP_BODY_NONE;
	bufferevent_enable(EXCHANGE_OBEV(s), EV_READ | EV_WRITE);
	/*
	 * Reading stays on (no epoll churn per request): pipelined requests wait
	 * in the input buffer, bounded by its high-water mark. An HTTP/2
	 * stream's exchange has no client socket: its stream hands the body on.
	 */
	if (EXCHANGE_CBEV(s) != NULL) {
		bufferevent_setcb(s->c->cbev, s->p->fe->client_read, client_write_cb,
		    client_event_cb, s);
		bufferevent_enable(s->c->cbev, EV_READ);
	}
	if (!f->req_done)
		forward_client_read(s);
}

struct payload_map {
	struct evbuffer	*pl;
	size_t		 raw_base;	/* raw offset of the current iovec */
	const char	*iov_base;
	size_t		 span_raw[64];	/* raw end offset after each payload span */
	size_t		 span_pl[64];	/* payload length after each span */
	size_t		 n;
	/*
	 * Chunk extensions: relayed as sent, so looked at too, each line's
	 * whole (at most 8 KiB); one not ended yet is held back from ext_raw.
	 */
	struct exchange	*s;
	struct evbuffer	*ext;
	size_t		 ext_raw;
	int		 ext_open;
	int		 ext_found;
};

static void
ext_cb(const char *p, size_t n, void *arg)
{
	struct payload_map *m = arg;
	unsigned char *b;
	size_t len;

	if (p != NULL) {
		if (!m->ext_open)
			m->ext_raw = m->raw_base + (size_t)(p - m->iov_base);
		m->ext_open = 1;
		if (evbuffer_add(m->ext, p, n) == -1)
			m->ext_found = 1;	/* cannot look: refuse */
		return;
	}
	len = evbuffer_get_length(m->ext);
	if (len > 0 && !m->ext_found && ((b = evbuffer_pullup(m->ext, -1)) ==
	    NULL || cred_in_bytes(m->s->p, (const char *)b, len,
	    m->s->fwd.plan.cred, sizeof(m->s->fwd.plan.cred))))
		m->ext_found = 1;
	evbuffer_drain(m->ext, len);
	m->ext_open = 0;
}

static void
collect_cb(const char *p, size_t n, void *arg)
{
	struct payload_map *m = arg;
	size_t slot = m->n % 64;

	evbuffer_add(m->pl, p, n);
	m->span_raw[slot] = m->raw_base + (size_t)(p - m->iov_base) + n;
	m->span_pl[slot] = evbuffer_get_length(m->pl);
	m->n++;
}

/* Raw bytes to move so that the payload moved is exactly `payload` bytes. */
static size_t
raw_for_payload(const struct payload_map *m, size_t payload, size_t raw_all)
{
	size_t j, total = evbuffer_get_length(m->pl);

	if (payload >= total)
		return raw_all;
	/* Walk back over the recorded spans to the one holding the cut. */
	for (j = m->n; j > 0 && j + 64 > m->n; j--) {
		size_t slot = (j - 1) % 64, end_pl = m->span_pl[slot];
		size_t prev_pl = j >= 2 && j + 63 > m->n ?
		    m->span_pl[(j - 2) % 64] : 0;

		if (payload >= prev_pl && payload <= end_pl)
			return m->span_raw[slot] - (end_pl - payload);
	}
	return 0;	/* not recorded: move nothing this time, it is safe */
}

/*
 * Trailer fields go on as sent, and are no payload: they are held back
 * whole (at most 8 KiB) until the body ends, then searched too.
 */
static int
trailer_has_placeholder(struct exchange *s, const struct http_chunked *dry,
    size_t raw, int done, size_t *limit)
{
	size_t tl = dry->trailer_len - s->fwd.req_chunk.trailer_len;
	struct evbuffer_ptr at;
	char *t;
	int found;

	if (tl == 0 || tl > raw)
		return 0;
	if (!done) {
		if (*limit > raw - tl)
			*limit = raw - tl;
		return 0;
	}
	if ((t = malloc(tl)) == NULL)
		return 1;	/* cannot look: refuse, never pass unseen */
	if (evbuffer_ptr_set(bufferevent_get_input(s->c->cbev), &at, raw - tl,
	    EVBUFFER_PTR_SET) == -1 || evbuffer_copyout_from(
	    bufferevent_get_input(s->c->cbev), &at, t, tl) != (ev_ssize_t)tl) {
		free(t);
		return 1;
	}
	found = cred_in_bytes(s->p, t, tl, s->fwd.plan.cred,
	    sizeof(s->fwd.plan.cred));
	free(t);
	return found;
}

/*
 * Look for placeholders in the request body bytes buffered now: in the
 * payload, so chunk framing cannot split one unseen (a dry run of the
 * chunk decoder on a copy of its state). *limit gets the raw bytes that
 * may move: a tail that starts a placeholder is held back until the rest
 * arrives (or the body ends).
 */
static int
body_has_placeholder(struct exchange *s, size_t *limit)
{
	struct forward *f = &s->fwd;
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
	struct evbuffer_iovec iov[16];
	struct evbuffer_ptr at;
	struct http_chunked dry;
	struct payload_map m;
	size_t len = evbuffer_get_length(in), avail, hold, raw;
	int i, nvec, done = 0, bad = 0, found;

	*limit = SIZE_MAX;
	if (s->p->n_phs == 0 || len == 0)
		return 0;
	if (f->req_framing != HTTP_BODY_CHUNKED) {
		avail = len < f->req_left ? len : (size_t)f->req_left;
		hold = avail < f->req_left ? cred_holdback(s->p, in, avail) : 0;
		*limit = avail - hold;
		return cred_in_body(s, in, avail, avail - hold, f->plan.cred,
		    sizeof(f->plan.cred));
	}
	memset(&m, 0, sizeof(m));
	m.s = s;
	if ((m.pl = evbuffer_new()) == NULL ||
	    (m.ext = evbuffer_new()) == NULL) {
		if (m.pl != NULL)
			evbuffer_free(m.pl);
		return 1;	/* cannot look: refuse rather than pass unseen */
	}
	dry = f->req_chunk;
	raw = 0;
	/* All of the input, 16 segments at a time (move_body moves as far). */
	while (!done && !bad && raw < len) {
		if (evbuffer_ptr_set(in, &at, raw, EVBUFFER_PTR_SET) == -1 ||
		    (nvec = evbuffer_peek(in, -1, &at, iov, 16)) <= 0)
			break;
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && !done; i++) {
			ssize_t r;

			m.raw_base = raw;
			m.iov_base = iov[i].iov_base;
			r = http_chunked_decode_ext(&dry, iov[i].iov_base,
			    iov[i].iov_len, &done, collect_cb, ext_cb, &m);
			if (r < 0) {
				bad = 1;
				break;
			}
			raw += (size_t)r;
		}
	}
	avail = evbuffer_get_length(m.pl);
	hold = done ? 0 : cred_holdback(s->p, m.pl, avail);
	*limit = hold == 0 ? SIZE_MAX : raw_for_payload(&m, avail - hold, raw);
	found = cred_in_body(s, m.pl, avail, avail - hold, f->plan.cred,
	    sizeof(f->plan.cred)) || m.ext_found;
	if (m.ext_open && *limit > m.ext_raw)
		*limit = m.ext_raw;	/* a chunk-size line not ended yet */
	evbuffer_free(m.pl);
	evbuffer_free(m.ext);
	if (!found)
		found = trailer_has_placeholder(s, &dry, raw, done, limit);
	return found;
}

/* A placeholder in a request body: refused, answered if it still can be. */
static void
body_refused(struct exchange *s)
{
	struct forward *f = &s->fwd;

	if (!f->resp_head_done)
		exchange_deny(s, 403, REASON_CRED_MISUSE,
		    "a credential placeholder in a request body");
	else {
		exchange_log(s, VERDICT_DENY, f->status, REASON_CRED_MISUSE);
		exchange_close(s, CLOSE_REFUSED);
	}
}

/*
 * An HTTP/2 stream's body, payload as its DATA frames carried it, to an
 * HTTP/1.1 origin: searched like any body (a tail that may start a
 * placeholder waits for the rest), then sent as Content-Length said, or
 * as chunks (its trailers are not forwarded).
 */
static void
stream_client_read(struct exchange *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *in = fe_stream_body(s), *out;
	size_t avail, hold;
	int ended, n;

	if (f->req_done || EXCHANGE_OBEV(s) == NULL || in == NULL)
		return;
	out = bufferevent_get_output(EXCHANGE_OBEV(s));
	if (evbuffer_get_length(out) > PROXY_HWM)
		return;		/* origin_write_cb comes back */
	ended = fe_stream_body_end(s, NULL, NULL);
	avail = evbuffer_get_length(in);
	if ((f->req_framing == HTTP_BODY_LENGTH && (avail > f->req_left ||
	    (ended && avail < f->req_left))) ||
	    (f->req_framing == HTTP_BODY_NONE && avail > 0)) {
		/* nghttp2 holds DATA to content-length: not reached. */
		exchange_deny(s, 400, REASON_BAD_REQUEST,
		    "request body unlike its content-length");
		return;
	}
	hold = ended || s->p->n_phs == 0 ? 0 : cred_holdback(s->p, in, avail);
	if (s->c->kind != KIND_INGRESS && s->p->n_phs > 0 && avail > 0 &&
	    cred_in_body(s, in, avail, avail - hold, f->plan.cred,
	    sizeof(f->plan.cred))) {
		body_refused(s);
		return;
	}
	avail -= hold;
	if (dlp_body_buf(s, in, avail, ended && hold == 0, "h2-data") == -1)
		return;
	if (avail > 0) {
		if (f->req_framing == HTTP_BODY_CHUNKED) {
			if ((n = evbuffer_add_printf(out, "%zx\r\n", avail)) > 0)
				s->up += (uint64_t)n;
		}
		evbuffer_remove_buffer(in, out, avail);
		s->up += avail;
		if (f->req_framing == HTTP_BODY_LENGTH)
			f->req_left -= avail;
		if (f->req_framing == HTTP_BODY_CHUNKED) {
			evbuffer_add(out, "\r\n", 2);
			s->up += 2;
		}
	}
	if (!ended || evbuffer_get_length(in) > 0)
		return;
	/* The stream's trailers are not forwarded, as toward an HTTP/2 origin. */
	if (f->req_framing == HTTP_BODY_CHUNKED) {
		evbuffer_add(out, "0\r\n\r\n", 5);
		s->up += 5;
	}
	f->req_done = 1;
	if (f->resp_done)
		forward_done(s);
}

void
forward_client_read(struct exchange *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *out;
	size_t limit;
	ssize_t n;
	int done;

	/* A git push's command list is read before anything goes on. */
	if (f->git_hold && !f->req_done && EXCHANGE_OBEV(s) != NULL &&
	    git_gate(s) != 0)
		return;
	if (s->is_stream) {
		stream_client_read(s);
		return;
	}
	if (f->req_done || EXCHANGE_OBEV(s) == NULL)
		return;
	limit = SIZE_MAX;
	{
		/* A placeholder in a body is never swapped: refuse the request. */
		if (s->c->kind != KIND_INGRESS && body_has_placeholder(s, &limit)) {
			body_refused(s);
			return;
		}
	}
	if (s->dlp != NULL && dlp_body_h1(s, &limit) == -1)
		return;
	out = bufferevent_get_output(EXCHANGE_OBEV(s));
	n = move_body(bufferevent_get_input(s->c->cbev), out, f->req_framing,
	    &f->req_left, &f->req_chunk, &done, limit, 1);
	if (n < 0) {
		if (!f->resp_head_done)
			exchange_deny(s, 400, REASON_BAD_REQUEST,
			    "malformed chunked request body");
		else
			exchange_close(s, CLOSE_REFUSED);
		return;
	}
	s->up += (uint64_t)n;
	if (done) {
		f->req_done = 1;
		if (f->resp_done)
			forward_done(s);
		return;
	}
	if (evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(s->c->cbev, EV_READ);	/* origin_write_cb resumes */
}

static void
origin_write_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;

	if (s->state != S_FORWARD || s->fwd.req_done)
		return;
	if (s->is_stream)
		fe_stream_poke(s);	/* from the loop, as the stream's bytes come */
	else
		bufferevent_enable(s->c->cbev, EV_READ);
}

void
forward_resume(struct exchange *s)
{
	if (s->state == S_FORWARD && !s->fwd.resp_done && EXCHANGE_OBEV(s) != NULL)
		bufferevent_enable(EXCHANGE_OBEV(s), EV_READ);
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
	forward_resume(arg);
}

static void
scrub_string(struct exchange *s, const char *v, size_t len, struct evbuffer *out)
{
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	size_t n = cred_scrub_lists(s, secrets, phs);

	if (vault_scrub_string(s->fwd.plan.snap, secrets, phs, n, v, len,
	    out) == -1)
		evbuffer_add(out, "-", 1);	/* never the unscrubbed value */
}

/*
 * A response from a credential's host: its body goes through the scrubber.
 * Compressed bodies cannot be scrubbed and are refused.
 */
static int
scrub_setup(struct exchange *s, const struct http_response *r)
{
	struct forward *f = &s->fwd;
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	size_t n;

	if (!cred_plan_scrubs(&f->plan) || r->framing == HTTP_BODY_NONE)
		return 0;
	if (!http_identity_encoded(r->headers, r->n_headers)) {
		exchange_deny(s, 502, REASON_UPSTREAM_ENCODING, "a credential's "
		    "host sent an encoded body, which cannot be scrubbed");
		return -1;
	}
	n = cred_scrub_lists(s, secrets, phs);
	if ((f->scrub = vault_scrubber_new(f->plan.snap, secrets, phs, n)) == NULL) {
		exchange_deny(s, 502, REASON_UPSTREAM_ERROR, "cannot scrub");
		return -1;
	}
	if (s->is_stream)
		;	/* an HTTP/2 stream: DATA frames, no framing to redo */
	else if (r->framing == HTTP_BODY_UNTIL_CLOSE || f->client_minor == 0)
		f->client_keep_alive = 0;	/* ends with the connection */
	else
		f->scrub_chunked = 1;
	return 0;
}

static void
scrub_emit(struct exchange *s, struct evbuffer *clean)
{
	struct evbuffer *out;
	size_t n = evbuffer_get_length(clean);

	if (n == 0)
		return;
	if (s->is_stream) {
		(void)fe_stream_data(s, clean);	/* a gone stream: its end says so */
		return;
	}
	out = bufferevent_get_output(s->c->cbev);
	if (s->fwd.scrub_chunked)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add_buffer(out, clean);
	if (s->fwd.scrub_chunked)
		evbuffer_add(out, "\r\n", 2);
}

static void
scrub_end(struct exchange *s)
{
	struct evbuffer *clean = evbuffer_new();

	if (clean != NULL) {
		if (vault_scrub_finish(s->fwd.scrub, clean) == 0)
			scrub_emit(s, clean);
		evbuffer_free(clean);
	}
	if (s->fwd.scrub_chunked && EXCHANGE_CBEV(s) != NULL)
		evbuffer_add(bufferevent_get_output(s->c->cbev), "0\r\n\r\n", 5);
	vault_scrubber_free(s->fwd.scrub);
	s->fwd.scrub = NULL;
}

static void
payload_cb(const char *p, size_t n, void *arg)
{
	evbuffer_add(arg, p, n);
}

/* The origin's body, payload only, through the scrubber to the client. */
static ssize_t
scrub_body(struct exchange *s, struct evbuffer *src, int *done)
{
	struct forward *f = &s->fwd;
	struct evbuffer *raw, *clean;
	struct evbuffer_iovec iov[16];
	size_t avail = evbuffer_get_length(src), take = 0;
	int i, nvec;

	*done = 0;
	raw = evbuffer_new();
	clean = evbuffer_new();
	if (raw == NULL || clean == NULL)
		goto fail;
	switch (f->resp_framing) {
	case HTTP_BODY_LENGTH:
		take = avail < f->resp_left ? avail : (size_t)f->resp_left;
		f->resp_left -= take;
		*done = f->resp_left == 0;
		evbuffer_remove_buffer(src, raw, take);
		break;
	case HTTP_BODY_UNTIL_CLOSE:
		take = avail;
		evbuffer_add_buffer(raw, src);
		break;
	case HTTP_BODY_CHUNKED:
		/* All of it: no read event need come for what stayed. */
		while (!*done && evbuffer_get_length(src) > 0) {
			size_t part = 0;

			nvec = evbuffer_peek(src, -1, NULL, iov, 16);
			if (nvec > 16)
				nvec = 16;
			for (i = 0; i < nvec && !*done; i++) {
				ssize_t r = http_chunked_decode(&f->resp_chunk,
				    iov[i].iov_base, iov[i].iov_len, done,
				    payload_cb, raw);
				if (r < 0)
					goto fail;
				part += (size_t)r;
			}
			evbuffer_drain(src, part);
			take += part;
		}
		break;
	default:
		*done = 1;
		break;
	}
	if (vault_scrub(f->scrub, raw, clean) == -1)
		goto fail;
	scrub_emit(s, clean);
	evbuffer_free(raw);
	evbuffer_free(clean);
	return (ssize_t)take;
fail:
	if (raw != NULL)
		evbuffer_free(raw);
	if (clean != NULL)
		evbuffer_free(clean);
	return -1;
}

/*
 * A response head composed on the stack and added to the client's output
 * in one piece (each add to a TLS filter's output costs a record write).
 */
struct headbuf {
	struct evbuffer	*out;
	size_t		 len;
	char		 buf[4096];
};

static void
hb_flush(struct headbuf *hb)
{
	if (hb->len > 0)
		evbuffer_add(hb->out, hb->buf, hb->len);
	hb->len = 0;
}

static void
hb_add(struct headbuf *hb, const void *p, size_t n)
{
	if (hb->len + n > sizeof(hb->buf)) {
		hb_flush(hb);
		if (n > sizeof(hb->buf)) {
			evbuffer_add(hb->out, p, n);
			return;
		}
	}
	memcpy(hb->buf + hb->len, p, n);
	hb->len += n;
}

static void
hb_str(struct headbuf *hb, const char *str)
{
	hb_add(hb, str, strlen(str));
}

/* A header value (or the reason phrase) toward the client, scrubbed on bound hosts. */
static void
hb_value(struct exchange *s, struct headbuf *hb, const char *v, size_t len)
{
	const struct cred_plan *plan = &s->fwd.plan;

	if (cred_plan_scrubs(plan)) {
		hb_flush(hb);
		scrub_string(s, v, len, hb->out);
	} else
		hb_add(hb, v, len);
}

/*
 * The framing the client reads the body by, from the gateway's own parse:
 * never the origin's headers, which a Connection header could have made
 * hop-by-hop.
 */
static void
hb_framing(struct exchange *s, struct headbuf *hb, const struct http_response *r)
{
	char fr[48];
	int n;

	if (s->fwd.scrub != NULL) {
		if (s->fwd.scrub_chunked)
			hb_str(hb, "Transfer-Encoding: chunked\r\n");
		return;
	}
	if (r->framing == HTTP_BODY_NONE) {
		/* HEAD and 304 carry the length of the body they do not send. */
		if (r->has_length && r->status != 204)
			n = http_framing_header(HTTP_BODY_LENGTH,
			    r->declared_length, fr, sizeof(fr));
		else
			n = 0;
	} else
		n = http_framing_header(r->framing, r->content_length, fr,
		    sizeof(fr));
	if (n > 0)
		hb_add(hb, fr, (size_t)n);
}

/*
 * The final head for an HTTP/2 stream: the origin's fields, values
 * scrubbed on bound hosts (copied into mem), framing as the stream's
 * payload will come (a scrubbed body's length is not the origin's).
 */
static int
stream_head(struct exchange *s, const struct http_response *r)
{
	const struct cred_plan *plan = &s->fwd.plan;
	struct http_response c;
	struct evbuffer *mem;
	size_t i, k, off[HTTP_MAX_HEADERS], end[HTTP_MAX_HEADERS];
	const char *base;
	int rv;

	if (!cred_plan_scrubs(plan)) {
		c = *r;
		if (s->fwd.scrub != NULL)
			c.framing = HTTP_BODY_CHUNKED;
		return fe_stream_response(s, &c);
	}
	if ((mem = evbuffer_new()) == NULL)
		return -1;
	c = *r;
	for (i = k = 0; i < r->n_headers; i++) {
		if (cred_name_leaks(s, r->headers[i].name.p,
		    r->headers[i].name.len))
			continue;	/* dropped */
		c.headers[k] = r->headers[i];
		off[k] = evbuffer_get_length(mem);
		scrub_string(s, r->headers[i].value.p, r->headers[i].value.len,
		    mem);
		end[k++] = evbuffer_get_length(mem);
	}
	c.n_headers = k;
	base = (const char *)evbuffer_pullup(mem, -1);
	for (i = 0; i < k; i++) {
		c.headers[i].value.p = base != NULL ? base + off[i] : "";
		c.headers[i].value.len = end[i] - off[i];
	}
	if (s->fwd.scrub != NULL)
		c.framing = HTTP_BODY_CHUNKED;
	rv = fe_stream_response(s, &c);
	evbuffer_free(mem);
	return rv;
}

/* Status line and headers for the client, from the origin's. */
static void
write_client_head(struct exchange *s, const struct http_response *r, int final)
{
	struct headbuf hb;
	char status[16];
	size_t i;

	hb.out = bufferevent_get_output(s->c->cbev);
	hb.len = 0;
	snprintf(status, sizeof(status), "HTTP/1.1 %d ", r->status);
	hb_str(&hb, status);
	hb_value(s, &hb, r->reason.p, r->reason.len);
	hb_add(&hb, "\r\n", 2);
	for (i = 0; i < r->n_headers; i++) {
		const struct http_header *h = &r->headers[i];
		if (!http_header_forwardable(h, r->headers, r->n_headers) ||
		    cred_name_leaks(s, h->name.p, h->name.len))
			continue;
		/* A guest's app may not set the ingress token's cookie. */
		if (s->c->kind == KIND_INGRESS &&
		    http_header_is(h, "Set-Cookie") &&
		    ingress_set_cookie_is_token(h->value.p, h->value.len))
			continue;
		hb_add(&hb, h->name.p, h->name.len);
		hb_add(&hb, ": ", 2);
		hb_value(s, &hb, h->value.p, h->value.len);
		hb_add(&hb, "\r\n", 2);
	}
	if (r->status == 101) {
		const struct http_header *u = http_header_find(r->headers,
		    r->n_headers, "Upgrade");
		hb_str(&hb, "Connection: upgrade\r\n");
		if (u != NULL) {
			hb_str(&hb, "Upgrade: ");
			hb_add(&hb, u->value.p, u->value.len);
			hb_add(&hb, "\r\n", 2);
		}
	} else if (final) {
		hb_framing(s, &hb, r);
		if (!s->fwd.client_keep_alive)
			hb_str(&hb, "Connection: close\r\n");
	}
	hb_str(&hb, "Via: 1.1 sandgate\r\n\r\n");
	hb_flush(&hb);
}

/* 1 when the head was handled and the body may follow, 0 to wait, -1 closed. */
static int
origin_head(struct exchange *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *in = bufferevent_get_input(EXCHANGE_OBEV(s));
	struct http_response r;
	struct http_limits lim;
	size_t len, want;
	const char *buf;
	int n, ws = 0;

	lim.max_line = PROXY_MAX_LINE;
	lim.max_head = s->p->cfg->max_header_bytes;
	for (;;) {
		if ((len = evbuffer_get_length(in)) == 0)
			return 0;
		want = len < lim.max_head + 1 ? len : lim.max_head + 1;
		buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)want);
		n = http_parse_response(buf, want, &lim, f->method,
		    strlen(f->method), &r);
		if (n == HTTP_NEED_MORE)
			return 0;
		if (n < 0) {
			exchange_deny(s, 502, REASON_UPSTREAM_ERROR,
			    "the origin sent a malformed response");
			return -1;
		}
		if (r.te_other) {
			/* Relayed as chunked alone, the client would misread it. */
			exchange_deny(s, 502, REASON_UPSTREAM_ENCODING,
			    "the origin used a transfer coding other than chunked");
			return -1;
		}
		if (r.status >= 100 && r.status < 200 && r.status != 101) {
			/* 100 Continue, 103 ...: not for an HTTP/2 stream. */
			if (!s->is_stream)
				write_client_head(s, &r, 0);
			evbuffer_drain(in, (size_t)n);
			continue;
		}
		if (r.status == 101 && !f->upgrade) {
			ws_upgrade_refuse(s, "the origin switched protocols "
			    "unasked");
			return -1;
		}
		if (r.status == 101 && (ws = ws_upgrade_check(s, &r)) == -1)
			return -1;
		f->status = r.status;
		if (r.framing == HTTP_BODY_UNTIL_CLOSE || !r.keep_alive)
			f->client_keep_alive = f->client_keep_alive &&
			    r.framing != HTTP_BODY_UNTIL_CLOSE;
		f->origin_keep_alive = r.keep_alive &&
		    r.framing != HTTP_BODY_UNTIL_CLOSE;
		if (r.status != 101 && scrub_setup(s, &r) == -1)
			return -1;
		if (!s->is_stream)
			write_client_head(s, &r, 1);
		else if (stream_head(s, &r) == -1) {
			exchange_close(s, CLOSE_CLIENT_RESET);	/* the stream is gone */
			return -1;
		}
		evbuffer_drain(in, (size_t)n);
		f->resp_head_done = 1;
		exchange_stamp(s, &s->t.head, NULL);
		if (s->c->intercepted)
			exchange_mark(s, MARK_RESPONSE_HEAD);
		f->resp_framing = r.framing;
		f->resp_left = r.content_length;
		http_chunked_init(&f->resp_chunk);
		if (r.status == 101) {
			f->switched = 1;
			if (ws)
				ws_relay_start(s);
			else
				relay_start(s);
			return -1;
		}
		return 1;
	}
}

/* The origin's body, payload only, to an HTTP/2 stream: bytes read, or -1. */
static ssize_t
stream_body(struct exchange *s, struct evbuffer *src, int *done)
{
	struct forward *f = &s->fwd;
	struct evbuffer *payload;
	size_t used;

	if ((payload = evbuffer_new()) == NULL)
		return -1;
	if (forward_body_decode(f->resp_framing, &f->resp_left,
	    &f->resp_chunk, src, payload, done, &used) == -1) {
		evbuffer_free(payload);
		return -1;
	}
	if (evbuffer_get_length(payload) > 0)
		(void)fe_stream_data(s, payload);	/* a gone stream: its end says so */
	evbuffer_free(payload);
	return (ssize_t)used;
}

static void
origin_body(struct exchange *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *out = EXCHANGE_CBEV(s) != NULL ?
	    bufferevent_get_output(s->c->cbev) : NULL;
	ssize_t n;
	int done;

	if (f->scrub != NULL)
		n = scrub_body(s, bufferevent_get_input(EXCHANGE_OBEV(s)), &done);
	else if (s->is_stream)
		n = stream_body(s, bufferevent_get_input(EXCHANGE_OBEV(s)), &done);
	else
		n = move_body(bufferevent_get_input(EXCHANGE_OBEV(s)), out,
		    f->resp_framing, &f->resp_left, &f->resp_chunk, &done,
		    SIZE_MAX, 0);
	if (n < 0) {
		exchange_log(s, VERDICT_ERROR, f->status, REASON_UPSTREAM_ERROR);
		exchange_finish(s, CLOSE_FAILED);
		return;
	}
	s->down += (uint64_t)n;
	if (done) {
		if (f->scrub != NULL)
			scrub_end(s);
		f->resp_done = 1;
		if (s->c->intercepted)
			exchange_mark(s, MARK_RESPONSE_DONE);
		if (f->req_done)
			forward_done(s);
		else if (!s->is_stream && EXCHANGE_CBEV(s) != NULL &&
		    evbuffer_get_length(bufferevent_get_input(
		    EXCHANGE_OBEV(s))) == 0) {
			/*
			 * The origin answered before the body ended (nginx's
			 * `return`, an early refusal): the rest of the body
			 * still goes on to it, as it would without the
			 * gateway, so that both connections stay in step; the
			 * exchange ends once the body has (forward_client_read),
			 * or when the origin goes (origin_event_cb). The origin
			 * connection is never kept: an origin that answered
			 * unread may take the rest of the body for a request of
			 * its own, whose body the next request on it -- a
			 * swapped secret in its head -- would become.
			 */
			f->origin_keep_alive = 0;
			f->early_answer = 1;	/* forward_done: retired */
			bufferevent_enable(s->c->cbev, EV_READ);
			forward_client_read(s);
		} else {
			/*
			 * A stream's body: the stream ends with its answer.
			 * Or bytes past the answer already came: they would
			 * answer no request, so neither side is kept.
			 */
			f->client_keep_alive = 0;
			f->origin_keep_alive = 0;
			f->req_done = 1;
			forward_done(s);
		}
		return;
	}
	if (s->is_stream ? fe_stream_full(s) : evbuffer_get_length(out) >
	    PROXY_HWM)
		bufferevent_disable(EXCHANGE_OBEV(s), EV_READ);	/* forward_resume resumes */
}

/*
 * An intercepted client's TLS filter encrypts on every add to its output,
 * so a head written piece by piece would leave as a dozen TLS records.
 * Writing is held while a response is composed; what was composed then
 * goes out as one record when it fits in one.
 */
#define CLIENT_RECORD_MAX	16384

static int
client_cork(struct exchange *s)
{
	if (!s->c->intercepted || EXCHANGE_CBEV(s) == NULL)
		return 0;
	bufferevent_disable(s->c->cbev, EV_WRITE);
	return 1;
}

static void
client_uncork(struct exchange *s, int corked)
{
	struct evbuffer *out;
	size_t len;

	if (!corked || EXCHANGE_CBEV(s) == NULL)	/* ended: the connection goes on */
		return;
	out = bufferevent_get_output(s->c->cbev);
	len = evbuffer_get_length(out);
	/* One SSL_write per buffer segment: make the segments one. */
	if (len > 0 && len <= CLIENT_RECORD_MAX)
		(void)evbuffer_pullup(out, -1);
	bufferevent_enable(s->c->cbev, EV_WRITE);
}

static void
origin_read_cb(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;
	int corked;

	exchange_touch(s);
	if (s->c->intercepted)
		proxy_tls_read_size(bev);
	if (s->state != S_FORWARD) {
		/* Bytes from an idle kept-alive origin: it cannot be reused. */
		upstream_drop(s);
		return;
	}
	if (s->fwd.resp_done) {
		/*
		 * Past its whole answer while the rest of the body still goes
		 * to it: nothing more may come (it would answer no request).
		 * The answer stands; neither connection is kept.
		 */
		s->fwd.req_done = 1;
		s->fwd.client_keep_alive = 0;
		s->fwd.origin_keep_alive = 0;
		forward_done(s);
		return;
	}
	corked = client_cork(s);
	if (s->fwd.resp_head_done || origin_head(s) == 1)
		origin_body(s);
	client_uncork(s, corked);
}

static void
origin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct exchange *s = arg;
	struct forward *f = &s->fwd;
	int corked;

	if (s->state != S_FORWARD) {
		upstream_drop(s);	/* an idle origin went away */
		return;
	}
	if ((what & BEV_EVENT_EOF) && f->resp_head_done &&
	    f->resp_framing == HTTP_BODY_UNTIL_CLOSE) {
		corked = client_cork(s);
		origin_body(s);
		client_uncork(s, corked);
		/* Ended (another request's exchange by now): not ours to end. */
		if (s->closing || s->state != S_FORWARD)
			return;
		if (f->scrub != NULL)
			scrub_end(s);
		f->resp_done = 1;
		f->req_done = 1;
		f->client_keep_alive = 0;
		f->origin_keep_alive = 0;
		forward_done(s);
		return;
	}
	if (f->resp_done) {
		/*
		 * Gone (or silent past its timeout) after its whole answer,
		 * while the rest of the body was still going to it: the
		 * answer stands; the client's connection cannot be reused.
		 */
		f->req_done = 1;
		f->client_keep_alive = 0;
		f->origin_keep_alive = 0;
		forward_done(s);
		return;
	}
	if (!f->resp_head_done) {
		int timeout = (what & BEV_EVENT_TIMEOUT) != 0;
		exchange_deny(s, timeout ? 504 : 502, timeout ?
		    REASON_UPSTREAM_TIMEOUT : REASON_UPSTREAM_ERROR,
		    "the origin closed the connection without a response");
		return;
	}
	/* Cut short mid-body: the client cannot be told otherwise. */
	exchange_log(s, VERDICT_ERROR, f->status, REASON_UPSTREAM_ERROR);
	exchange_finish(s, CLOSE_FAILED);
}

static void
forward_done(struct exchange *s)
{
	struct forward *f = &s->fwd;

	if (s->is_stream)
		(void)fe_stream_end(s, NULL, 0);
	exchange_log(s, VERDICT_ALLOW, f->status, REASON_NONE);
	cred_plan_clear(&f->plan);
	/*
	 * A kept-alive origin connection waits in the worker's pool for
	 * the next exchange of the same decision, at most
	 * upstream.keepalive_timeout (docs/config.md): an idle intercepted
	 * tunnel then holds no origin connection, its TLS state and buffers.
	 * Bytes past the end of the response are no answer to anything: an
	 * origin connection holding them would hand them to the next request
	 * (upstream_keep_in keeps none).
	 */
	if (f->early_answer ? upstream_retire(s) == -1 :
	    !f->origin_keep_alive || upstream_keep_in(s) == -1)
		upstream_drop(s);
	if (!f->client_keep_alive) {
		exchange_finish(s, CLOSE_DONE);
		return;
	}
	s->p->fe->next_request(s);
}
