/*
 * libFuzzer target for the gateway's HTTP/2 glue on the request side: the
 * input is what a client sends after TLS (connection preface, frames),
 * fed to an nghttp2 server session set up like proxy_h2.c's (same options,
 * same callbacks into h2_req), and every request that comes out -- the
 * HTTP/1.1 head a stream session would be given -- is checked:
 *
 *   - http_parse_request refuses it (a 400 for the stream), or reads it
 *     whole (nothing after the head, no request hidden in it);
 *   - its method and target are the stream's :method and :path, its Host
 *     the :authority (or host) -- no field smuggled a second line in;
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

static void
fz_check_head(struct fz_stream *st, const char *head, long n)
{
	static struct http_request r;
	struct http_limits lim = { 16384, 16384 };
	const char *host;
	int rc;

	rc = http_parse_request(head, (size_t)n, &lim, &r);
	/* Refused (the stream session answers 400) or read as one whole head. */
	if (rc < 0)
		return;
	if (rc != n)
		abort();
	if (r.method.len != strlen(st->req.method) ||
	    memcmp(r.method.p, st->req.method, r.method.len) != 0)
		abort();
	if (r.path.len != strlen(st->req.path) ||
	    memcmp(r.path.p, st->req.path, r.path.len) != 0)
		abort();
	host = st->req.has_authority ? st->req.authority : st->req.host;
	if (!r.has_host || r.host_header.len != strlen(host) ||
	    memcmp(r.host_header.p, host, r.host_header.len) != 0)
		abort();
	if ((r.framing == HTTP_BODY_CHUNKED) != st->req.chunked)
		abort();
	if (!r.keep_alive || r.upgrade)
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
	static char head[FZ_CAP * 3 + 2 * H2_REQ_PATH_MAX];
	struct fz_stream *st;
	long n;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    (st = fz_find(f->hd.stream_id, 0)) == NULL)
		return 0;
	if (st->in_trailers)
		return 0;
	st->in_trailers = 1;
	n = h2_req_head(&st->req, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0,
	    head, sizeof(head));
	if (n < 0) {
		if (st->req.err == H2_REQ_OK)
			abort();
		return 0;
	}
	fz_check_head(st, head, n);
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
