/*
 * libFuzzer target for the gateway's HTTP/2 glue on the request side: the
 * input is what a client sends after TLS (connection preface, frames),
 * fed to an nghttp2 server session set up like proxy_h2.c's (same options,
 * same callbacks into h2_req), and every request that comes out -- the
 * struct http_request a stream's exchange is given -- is checked:
 *
 *   - its method and target are the stream's :method and :path, its Host
 *     the :authority (or host), its form origin or asterisk;
 *   - no header name is empty or more than a token, no value holds CR, LF
 *     or NUL, none is connection-specific;
 *   - written as the HTTP/1.1 head an origin gets, it parses back whole
 *     into the same method, target, Host, headers and framing -- no field
 *     smuggled a second line or a second request in;
 *   - its framing is what the gateway chose: chunked exactly when the
 *     stream had DATA coming and no content-length;
 *   - a trailer block never carries CR, LF or a pseudo-field.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "parse/h2_req.h"
#include "parse/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FZ_CAP		4096
#define FZ_STREAMS	16

struct fz_stream {
	int32_t		 id;
	int		 in_trailers;
	struct h2_req	 req;
	char		 mem[2 * FZ_CAP];
	char		 trailers[FZ_CAP];
	size_t		 trailers_len;
};

static struct fz_stream fz_st[FZ_STREAMS];

static struct fz_stream *
fz_find(int32_t id, int make)
{
	int i;

	for (i = 0; i < FZ_STREAMS; i++)
		if (fz_st[i].id == id)
			return &fz_st[i];
	if (!make)
		return NULL;
	for (i = 0; i < FZ_STREAMS; i++)
		if (fz_st[i].id == 0) {
			memset(&fz_st[i], 0, sizeof(fz_st[i]));
			fz_st[i].id = id;
			h2_req_init(&fz_st[i].req, fz_st[i].mem,
			    fz_st[i].mem + FZ_CAP, FZ_CAP, FZ_CAP);
			return &fz_st[i];
		}
	return NULL;
}

static int
fz_eq(const struct http_slice *a, const struct http_slice *b)
{
	return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

static void
fz_check_request(struct fz_stream *st, const struct http_request *q)
{
	static char head[FZ_CAP * 3 + 2 * H2_REQ_PATH_MAX];
	static struct http_request r;
	struct http_limits lim = { sizeof(head), sizeof(head) };
	const char *host;
	size_t i, j, len = 0;
	int rc;

	if (q->method.len != strlen(st->req.method) ||
	    memcmp(q->method.p, st->req.method, q->method.len) != 0 ||
	    q->target.len != strlen(st->req.path) ||
	    memcmp(q->target.p, st->req.path, q->target.len) != 0 ||
	    !fz_eq(&q->path, &q->target))
		abort();
	if (q->form != HTTP_TARGET_ORIGIN && q->form != HTTP_TARGET_ASTERISK)
		abort();
	host = st->req.has_authority ? st->req.authority : st->req.host;
	if (!q->has_host || q->host_header.len != strlen(host) ||
	    memcmp(q->host_header.p, host, q->host_header.len) != 0)
		abort();
	if ((q->framing == HTTP_BODY_CHUNKED) != st->req.chunked ||
	    !q->keep_alive || q->upgrade || q->version_minor != 1)
		abort();
	for (i = 0; i < q->n_headers; i++) {
		const struct http_header *h = &q->headers[i];

		if (h->name.len == 0 || memchr(h->name.p, ':', h->name.len) ||
		    http_header_is(h, "Transfer-Encoding") ||
		    http_header_is(h, "Connection") ||
		    http_header_is(h, "Upgrade"))
			abort();
		for (j = 0; j < h->name.len; j++)
			if ((unsigned char)h->name.p[j] <= 0x20 ||
			    (unsigned char)h->name.p[j] >= 0x7f)
				abort();
		for (j = 0; j < h->value.len; j++)
			if (h->value.p[j] == '\r' || h->value.p[j] == '\n' ||
			    h->value.p[j] == '\0')
				abort();
	}
	/* The head an origin gets, parsed back: the same request. */
#define FZ_PUT(p, n) do {						\
		if (len + (n) > sizeof(head))				\
			return;						\
		memcpy(head + len, (p), (n));				\
		len += (n);						\
	} while (0)
	FZ_PUT(q->method.p, q->method.len);
	FZ_PUT(" ", 1);
	FZ_PUT(q->target.p, q->target.len);
	FZ_PUT(" HTTP/1.1\r\n", 11);
	for (i = 0; i < q->n_headers; i++) {
		FZ_PUT(q->headers[i].name.p, q->headers[i].name.len);
		FZ_PUT(": ", 2);
		FZ_PUT(q->headers[i].value.p, q->headers[i].value.len);
		FZ_PUT("\r\n", 2);
	}
	if (q->framing == HTTP_BODY_CHUNKED)
		FZ_PUT("Transfer-Encoding: chunked\r\n", 28);
	FZ_PUT("\r\n", 2);
#undef FZ_PUT
	rc = http_parse_request(head, len, &lim, &r);
	if (rc != (int)len || !fz_eq(&r.method, &q->method) ||
	    !fz_eq(&r.target, &q->target) || !fz_eq(&r.host_header,
	    &q->host_header) || r.framing != q->framing ||
	    r.content_length != q->content_length ||
	    r.n_headers != q->n_headers + (q->framing == HTTP_BODY_CHUNKED))
		abort();
	for (i = 0; i < q->n_headers; i++)
		if (!fz_eq(&r.headers[i].name, &q->headers[i].name) ||
		    !fz_eq(&r.headers[i].value, &q->headers[i].value))
			abort();
}

static int
fz_begin(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	struct fz_stream *st;

	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat ==
	    NGHTTP2_HCAT_REQUEST && (st = fz_find(f->hd.stream_id, 1)) == NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

static int
fz_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *arg)
{
	struct fz_stream *st = fz_find(f->hd.stream_id, 0);
	size_t i, before;

	if (st == NULL || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (!st->in_trailers) {
		h2_req_add(&st->req, name, nl, value, vl);
		return 0;
	}
	before = st->trailers_len;
	if (h2_req_trailer(name, nl, value, vl, st->trailers,
	    sizeof(st->trailers), &st->trailers_len) == 0) {
		if (st->trailers[before] == ':')
			abort();
		for (i = before; i < st->trailers_len - 2; i++)
			if (st->trailers[i] == '\r' || st->trailers[i] == '\n')
				abort();
	}
	return 0;
}

static int
fz_frame(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	static struct http_request q;
	struct fz_stream *st;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    (st = fz_find(f->hd.stream_id, 0)) == NULL)
		return 0;
	if (st->in_trailers)
		return 0;
	st->in_trailers = 1;
	if (h2_req_request(&st->req, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) !=
	    0, &q) == -1) {
		if (st->req.err == H2_REQ_OK)
			abort();
		return 0;
	}
	fz_check_request(st, &q);
	return 0;
}

static int
fz_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct fz_stream *st = fz_find(id, 0);

	if (st != NULL)
		st->id = 0;
	return 0;
}

static ssize_t
fz_send(nghttp2_session *ng, const uint8_t *d, size_t len, int flags, void *arg)
{
	return (ssize_t)len;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_session *ng;

	memset(fz_st, 0, sizeof(fz_st));
	if (nghttp2_session_callbacks_new(&cb) != 0)
		return 0;
	nghttp2_option_new(&opt);
	nghttp2_session_callbacks_set_send_callback(cb, fz_send);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, fz_begin);
	nghttp2_session_callbacks_set_on_header_callback(cb, fz_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, fz_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, fz_close);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	nghttp2_option_set_no_closed_streams(opt, 1);
	if (nghttp2_session_server_new2(&ng, cb, NULL, opt) == 0) {
		/* The preface is given: the fuzzer spends its bytes on frames. */
		if (nghttp2_session_mem_recv(ng, preface, sizeof(preface) - 1) >= 0)
			(void)nghttp2_session_mem_recv(ng, data, size);
		(void)nghttp2_session_send(ng);
		nghttp2_session_del(ng);
	}
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	return 0;
}
