/*
 * Unit tests of the HTTP/2 request translation (h2_req.c): which fields a
 * stream's header block may carry, and the request made of them -- shown
 * here as the HTTP/1.1 head an origin would get for it (the gateway itself
 * writes no such text between the stream and its exchange).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "parse/h2_req.h"

#define CAP	1024

struct fld {
	const char	*name, *value;
};

static char mem[2 * CAP];
static char out[CAP * 3 + 2 * H2_REQ_PATH_MAX];
static struct http_request req;

static void
put(size_t *len, const char *p, size_t n)
{
	CHECK(*len + n < sizeof(out));
	if (*len + n >= sizeof(out))
		return;
	memcpy(out + *len, p, n);
	*len += n;
}

/*
 * The request for fields, written as a head (request line, the headers in
 * order, Transfer-Encoding when chunked), or NULL; *err the error.
 */
static const char *
head_of(const struct fld *f, int end_stream, enum h2_req_err *err, size_t limit)
{
	static struct h2_req r;
	size_t i, len = 0;

	h2_req_init(&r, mem, mem + CAP, CAP, limit ? limit : CAP);
	for (; f->name != NULL; f++)
		h2_req_add(&r, (const uint8_t *)f->name, strlen(f->name),
		    (const uint8_t *)f->value, strlen(f->value));
	*err = H2_REQ_OK;
	if (h2_req_request(&r, end_stream, &req) == -1) {
		*err = r.err;
		CHECK(r.err != H2_REQ_OK);
		return NULL;
	}
	CHECK_INT(r.err, H2_REQ_OK);
	CHECK(req.version_minor == 1 && req.keep_alive && !req.upgrade);
	CHECK_INT(req.framing == HTTP_BODY_CHUNKED, r.chunked);
	put(&len, req.method.p, req.method.len);
	put(&len, " ", 1);
	put(&len, req.target.p, req.target.len);
	put(&len, " HTTP/1.1\r\n", 11);
	for (i = 0; i < req.n_headers; i++) {
		put(&len, req.headers[i].name.p, req.headers[i].name.len);
		put(&len, ": ", 2);
		put(&len, req.headers[i].value.p, req.headers[i].value.len);
		put(&len, "\r\n", 2);
	}
	if (req.framing == HTTP_BODY_CHUNKED)
		put(&len, "Transfer-Encoding: chunked\r\n", 28);
	put(&len, "\r\n", 2);
	out[len] = '\0';
	return out;
}

#define BASE	{ ":method", "GET" }, { ":scheme", "https" }, \
		{ ":authority", "a.test:8443" }, { ":path", "/p?q=1" }

static void
test_heads(void)
{
	static const struct {
		struct fld	 f[8];
		int		 end;
		const char	*want;
	} t[] = {
		{ { BASE, { NULL, NULL } }, 1,
		  "GET /p?q=1 HTTP/1.1\r\nHost: a.test:8443\r\n"
		  "\r\n" },
		{ { BASE, { "cookie", "a=1" }, { "x-y", "z" }, { "cookie", "b=2" },
		    { NULL, NULL } }, 1,
		  "GET /p?q=1 HTTP/1.1\r\nHost: a.test:8443\r\nx-y: z\r\n"
		  "Cookie: a=1; b=2\r\n\r\n" },
		{ { BASE, { "content-length", "3" }, { NULL, NULL } }, 0,
		  "GET /p?q=1 HTTP/1.1\r\nHost: a.test:8443\r\ncontent-length: 3\r\n"
		  "\r\n" },
		{ { BASE, { "te", "trailers" }, { NULL, NULL } }, 0,
		  "GET /p?q=1 HTTP/1.1\r\nHost: a.test:8443\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n" },
		{ { BASE, { "host", "A.test:8443" }, { NULL, NULL } }, 1,
		  "GET /p?q=1 HTTP/1.1\r\nHost: a.test:8443\r\n"
		  "\r\n" },
		{ { { ":method", "OPTIONS" }, { ":scheme", "https" },
		    { ":path", "*" }, { "host", "h.test" }, { NULL, NULL } }, 1,
		  "OPTIONS * HTTP/1.1\r\nHost: h.test\r\n\r\n" },
	};
	enum h2_req_err err;
	const char *h;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		h = head_of(t[i].f, t[i].end, &err, 0);
		CHECK_MSG(h != NULL && strcmp(h, t[i].want) == 0, "case %zu: %s",
		    i, h ? h : "(refused)");
	}
}

static void
test_refused(void)
{
	static const struct {
		struct fld	 f[7];
		enum h2_req_err	 err;
	} t[] = {
		{ { BASE, { "connection", "close" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "transfer-encoding", "chunked" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "upgrade", "h2c" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "te", "gzip" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "X-Upper", "v" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "x-crlf", "a\r\nHost: evil" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "x-nul", "a" }, { ":path", "/late" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":scheme", "https" },
		    { ":authority", "a.test" }, { ":path", "/a b" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":scheme", "https" },
		    { ":authority", "a.test" }, { ":path", "noslash" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":method", "POST" }, { ":scheme", "https" },
		    { ":authority", "a.test" }, { ":path", "/" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":scheme", "https" }, { ":path", "/" },
		    { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "host", "b.test" }, { NULL, NULL } }, H2_REQ_ERR_HOST },
		/* What the HTTP/1.1 checks refuse (http_request_check). */
		{ { BASE, { "content-length", "3x" }, { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { BASE, { "content-length", "3" }, { "content-length", "3" },
		    { NULL, NULL } }, H2_REQ_ERR_MALFORMED },
		{ { { ":method", "G(T" }, { ":scheme", "https" },
		    { ":authority", "a.test" }, { ":path", "/" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":scheme", "https" },
		    { ":authority", "a.test/x" }, { ":path", "/" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "GET" }, { ":scheme", "https" },
		    { ":authority", "a.test" }, { ":path", "/a#frag" }, { NULL, NULL } },
		  H2_REQ_ERR_MALFORMED },
		{ { { ":method", "CONNECT" }, { ":authority", "a.test:443" },
		    { NULL, NULL } }, H2_REQ_ERR_CONNECT },
		{ { { ":method", "CONNECT" }, { ":protocol", "websocket" },
		    { ":scheme", "https" }, { ":authority", "a.test" },
		    { ":path", "/" }, { NULL, NULL } }, H2_REQ_ERR_CONNECT },
	};
	enum h2_req_err err;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_MSG(head_of(t[i].f, 1, &err, 0) == NULL, "case %zu: %s", i,
		    out);
		CHECK_MSG(err == t[i].err, "case %zu: err %d", i, err);
	}
}

static void
test_limits(void)
{
	struct fld f[] = { BASE, { "x-pad", "" }, { NULL, NULL } };
	char pad[400];
	enum h2_req_err err;

	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	f[4].value = pad;
	/* 4 pseudo-fields and the pad, 32 bytes each on top: over 256. */
	CHECK(head_of(f, 1, &err, 256) == NULL);
	CHECK_INT(err, H2_REQ_ERR_TOO_LARGE);
	CHECK(head_of(f, 1, &err, 1024) != NULL);
}

/* More fields than a parsed head may have: 431, as for HTTP/1.1. */
static void
test_many(void)
{
	static char big[2 * 8192];
	static const char *names[] = { ":method", ":scheme", ":authority", ":path" };
	static const char *values[] = { "GET", "https", "a.test", "/" };
	static struct h2_req r;
	char name[16];
	size_t i;

	h2_req_init(&r, big, big + 8192, 8192, 1 << 20);
	for (i = 0; i < 4; i++)
		h2_req_add(&r, (const uint8_t *)names[i], strlen(names[i]),
		    (const uint8_t *)values[i], strlen(values[i]));
	for (i = 0; i < HTTP_MAX_HEADERS - 1; i++) {
		snprintf(name, sizeof(name), "x-%zu", i);
		h2_req_add(&r, (const uint8_t *)name, strlen(name),
		    (const uint8_t *)" v ", 3);
	}
	/* Host and 127 fields: 128, the most there may be. */
	CHECK_INT(h2_req_request(&r, 1, &req), 0);
	CHECK_INT(req.n_headers, HTTP_MAX_HEADERS);
	CHECK(req.headers[5].value.len == 1 && req.headers[5].value.p[0] == 'v');
	h2_req_add(&r, (const uint8_t *)"x-last", 6, (const uint8_t *)"v", 1);
	r.err = H2_REQ_OK;
	CHECK_INT(h2_req_request(&r, 1, &req), -1);
	CHECK_INT(r.err, H2_REQ_ERR_TOO_LARGE);
}

static void
test_trailers(void)
{
	char buf[64];
	size_t len = 0;

	CHECK_INT(h2_req_trailer((const uint8_t *)"x-a", 3,
	    (const uint8_t *)"1", 1, buf, sizeof(buf), &len), 0);
	CHECK(len == 8 && memcmp(buf, "x-a: 1\r\n", 8) == 0);
	CHECK_INT(h2_req_trailer((const uint8_t *)":status", 7,
	    (const uint8_t *)"1", 1, buf, sizeof(buf), &len), -1);
	CHECK_INT(h2_req_trailer((const uint8_t *)"content-length", 14,
	    (const uint8_t *)"1", 1, buf, sizeof(buf), &len), -1);
	CHECK_INT(h2_req_trailer((const uint8_t *)"x-b", 3,
	    (const uint8_t *)"a\nb", 3, buf, sizeof(buf), &len), -1);
	CHECK(len == 8);
}

int
main(void)
{
	test_heads();
	test_refused();
	test_limits();
	test_many();
	test_trailers();
	return check_summary();
}
