/*
 * One HTTP request relayed to the origin and its response relayed back:
 * bodies streamed by their framing (Content-Length, chunked, until close)
 * with backpressure both ways, response heads rewritten (hop-by-hop
 * removed, Via added), keep-alive on both sides.
 */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/reason.h"
#include "proxy/proxy_int.h"

static void	origin_read_cb(struct bufferevent *, void *);
static void	origin_write_cb(struct bufferevent *, void *);
static void	origin_event_cb(struct bufferevent *, short, void *);
static void	client_write_cb(struct bufferevent *, void *);
static void	forward_done(struct session *);

/*
 * Move the body bytes of one message from src to dst, at most what the
 * framing says is left. Returns bytes moved, or -1 on bad chunked framing.
 */
static ssize_t
move_body(struct evbuffer *src, struct evbuffer *dst, enum http_framing fr,
    uint64_t *left, struct http_chunked *ck, int *done)
{
	size_t avail = evbuffer_get_length(src), take = 0;
	struct evbuffer_iovec iov[16];
	int i, nvec;

	*done = 0;
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
		/* Validate the framing across segments; the bytes go on unchanged. */
		nvec = evbuffer_peek(src, -1, NULL, iov, 16);
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && !*done; i++) {
			ssize_t r = http_chunked_feed(ck, iov[i].iov_base,
			    iov[i].iov_len, done);
			if (r < 0)
				return -1;
			take += (size_t)r;
		}
		break;
	}
	if (take > 0 && evbuffer_remove_buffer(src, dst, take) != (int)take)
		return -1;
	return (ssize_t)take;
}

void
forward_start(struct session *s)
{
	struct forward *f = &s->fwd;

	s->state = S_FORWARD;
	bufferevent_setcb(s->obev, origin_read_cb, origin_write_cb,
	    origin_event_cb, s);
	bufferevent_setcb(s->cbev, http_client_read_cb, client_write_cb,
	    session_client_event_cb, s);
	evbuffer_add_buffer(bufferevent_get_output(s->obev), s->pending_head);
	f->req_done = f->req_framing == HTTP_BODY_NONE;
	bufferevent_enable(s->obev, EV_READ | EV_WRITE);
	if (!f->req_done) {
		bufferevent_enable(s->cbev, EV_READ);
		forward_client_read(s);
	} else {
		/* Pipelined requests wait in the input buffer for their turn. */
		bufferevent_disable(s->cbev, EV_READ);
	}
}

void
forward_client_read(struct session *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *out;
	ssize_t n;
	int done;

	if (f->req_done || s->obev == NULL)
		return;
	out = bufferevent_get_output(s->obev);
	n = move_body(bufferevent_get_input(s->cbev), out, f->req_framing,
	    &f->req_left, &f->req_chunk, &done);
	if (n < 0) {
		if (!f->resp_head_done)
			session_deny(s, 400, REASON_BAD_REQUEST,
			    "malformed chunked request body");
		else
			session_close(s, REASON_BAD_REQUEST);
		return;
	}
	f->bytes_up += (uint64_t)n;
	if (done) {
		f->req_done = 1;
		bufferevent_disable(s->cbev, EV_READ);
		if (f->resp_done)
			forward_done(s);
		return;
	}
	if (evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(s->cbev, EV_READ);	/* origin_write_cb resumes */
}

static void
origin_write_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	if (s->state == S_FORWARD && !s->fwd.req_done)
		bufferevent_enable(s->cbev, EV_READ);
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	if (s->state == S_FORWARD && !s->fwd.resp_done && s->obev != NULL)
		bufferevent_enable(s->obev, EV_READ);
}

/* Status line and headers for the client, from the origin's. */
static void
write_client_head(struct session *s, const struct http_response *r, int final)
{
	struct evbuffer *out = bufferevent_get_output(s->cbev);
	size_t i;

	evbuffer_add_printf(out, "HTTP/1.1 %d %.*s\r\n", r->status,
	    (int)r->reason.len, r->reason.p);
	for (i = 0; i < r->n_headers; i++) {
		const struct http_header *h = &r->headers[i];
		if (http_header_is_hop_by_hop(h, r->headers, r->n_headers))
			continue;
		evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)h->name.len,
		    h->name.p, (int)h->value.len, h->value.p);
	}
	if (r->status == 101) {
		const struct http_header *u = http_header_find(r->headers,
		    r->n_headers, "Upgrade");
		evbuffer_add_printf(out, "Connection: upgrade\r\n");
		if (u != NULL)
			evbuffer_add_printf(out, "Upgrade: %.*s\r\n",
			    (int)u->value.len, u->value.p);
	} else if (final) {
		if (r->framing == HTTP_BODY_CHUNKED)
			evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
		if (!s->fwd.client_keep_alive)
			evbuffer_add_printf(out, "Connection: close\r\n");
	}
	evbuffer_add_printf(out, "Via: 1.1 sandgate\r\n\r\n");
}

/* 1 when the head was handled and the body may follow, 0 to wait, -1 closed. */
static int
origin_head(struct session *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *in = bufferevent_get_input(s->obev);
	struct http_response r;
	struct http_limits lim;
	size_t len, want;
	const char *buf;
	int n;

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
			session_deny(s, 502, REASON_UPSTREAM_ERROR,
			    "the origin sent a malformed response");
			return -1;
		}
		if (r.status >= 100 && r.status < 200 && r.status != 101) {
			write_client_head(s, &r, 0);	/* 100 Continue, 103 ... */
			evbuffer_drain(in, (size_t)n);
			continue;
		}
		if (r.status == 101 && !f->upgrade) {
			session_deny(s, 502, REASON_UPSTREAM_ERROR,
			    "the origin switched protocols unasked");
			return -1;
		}
		f->status = r.status;
		if (r.framing == HTTP_BODY_UNTIL_CLOSE || !r.keep_alive)
			f->client_keep_alive = f->client_keep_alive &&
			    r.framing != HTTP_BODY_UNTIL_CLOSE;
		f->origin_keep_alive = r.keep_alive &&
		    r.framing != HTTP_BODY_UNTIL_CLOSE;
		write_client_head(s, &r, 1);
		evbuffer_drain(in, (size_t)n);
		f->resp_head_done = 1;
		f->resp_framing = r.framing;
		f->resp_left = r.content_length;
		http_chunked_init(&f->resp_chunk);
		if (r.status == 101) {
			session_log(s, "allow", 101, NULL, f->bytes_up,
			    f->bytes_down, &f->started);
			relay_start(s);
			return -1;
		}
		return 1;
	}
}

static void
origin_body(struct session *s)
{
	struct forward *f = &s->fwd;
	struct evbuffer *out = bufferevent_get_output(s->cbev);
	ssize_t n;
	int done;

	n = move_body(bufferevent_get_input(s->obev), out, f->resp_framing,
	    &f->resp_left, &f->resp_chunk, &done);
	if (n < 0) {
		session_log(s, "error", f->status, REASON_UPSTREAM_ERROR,
		    f->bytes_up, f->bytes_down, &f->started);
		session_finish(s, REASON_UPSTREAM_ERROR);
		return;
	}
	f->bytes_down += (uint64_t)n;
	if (done) {
		f->resp_done = 1;
		bufferevent_disable(s->obev, EV_READ);
		if (f->req_done)
			forward_done(s);
		else {
			/* The origin answered before the body ended: no resync. */
			f->client_keep_alive = 0;
			f->req_done = 1;
			forward_done(s);
		}
		return;
	}
	if (evbuffer_get_length(out) > PROXY_HWM)
		bufferevent_disable(s->obev, EV_READ);	/* client_write_cb resumes */
}

static void
origin_read_cb(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	session_touch(s);
	if (s->state != S_FORWARD) {
		/* Bytes from an idle kept-alive origin: it cannot be reused. */
		upstream_drop(s);
		return;
	}
	if (!s->fwd.resp_head_done && origin_head(s) != 1)
		return;
	origin_body(s);
}

static void
origin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	struct forward *f = &s->fwd;

	if (s->state != S_FORWARD) {
		upstream_drop(s);	/* an idle origin went away */
		return;
	}
	if ((what & BEV_EVENT_EOF) && f->resp_head_done &&
	    f->resp_framing == HTTP_BODY_UNTIL_CLOSE) {
		origin_body(s);
		if (s->closing || s->state != S_FORWARD)
			return;
		f->resp_done = 1;
		f->req_done = 1;
		f->client_keep_alive = 0;
		f->origin_keep_alive = 0;
		forward_done(s);
		return;
	}
	if (!f->resp_head_done) {
		int timeout = (what & BEV_EVENT_TIMEOUT) != 0;
		session_deny(s, timeout ? 504 : 502, timeout ?
		    REASON_UPSTREAM_TIMEOUT : REASON_UPSTREAM_ERROR,
		    "the origin closed the connection without a response");
		return;
	}
	/* Cut short mid-body: the client cannot be told otherwise. */
	session_log(s, "error", f->status, REASON_UPSTREAM_ERROR, f->bytes_up,
	    f->bytes_down, &f->started);
	session_finish(s, REASON_UPSTREAM_ERROR);
}

static void
forward_done(struct session *s)
{
	struct forward *f = &s->fwd;

	session_log(s, "allow", f->status, NULL, f->bytes_up, f->bytes_down,
	    &f->started);
	s->bytes_up += f->bytes_up;
	s->bytes_down += f->bytes_down;
	if (!f->origin_keep_alive)
		upstream_drop(s);
	else
		bufferevent_enable(s->obev, EV_READ);	/* notice an idle close */
	if (!f->client_keep_alive) {
		session_finish(s, "done");
		return;
	}
	http_next_request(s);
}
