/*
 * Unit tests of what the gateway writes from its own parse (issue 12, point
 * 2): which headers a Connection header may nominate, which are forwarded
 * as they are, the framing header written for each framing, transfer
 * codings other than chunked, and Content-Encoding lists.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "parse/http_parse.h"

#define RAW(s)	(s), (sizeof(s) - 1)

static const struct http_limits lim = { .max_line = 256, .max_head = 4096 };

/* Connection cannot nominate framing or routing; every casing, every position. */
static void
test_protected(void)
{
	static const char *conns[] = {
		"keep-alive, Content-Length", "content-length", "CONTENT-LENGTH,close",
		"Host, keep-alive", " host ", "x, Transfer-Encoding, y",
		"Upgrade", "proxy-authorization", "Content-Length, Host, Upgrade",
	};
	static const struct {
		const char	*name;
		int		 hop;	/* http_header_is_hop_by_hop */
		int		 fwd;	/* http_header_forwardable */
	} want[] = {
		{ "Content-Length", 0, 0 }, { "Host", 0, 1 }, { "X-Other", 0, 1 },
	};
	static struct http_request r;
	char raw[512];
	size_t i, k;
	int n;

	for (i = 0; i < sizeof(conns) / sizeof(conns[0]); i++) {
		n = snprintf(raw, sizeof(raw), "POST / HTTP/1.1\r\nHost: a\r\n"
		    "Connection: %s\r\nContent-Length: 3\r\nX-Other: 1\r\n\r\n",
		    conns[i]);
		CHECK_INT(http_parse_request(raw, (size_t)n, &lim, &r), n);
		CHECK_MSG(r.framing == HTTP_BODY_LENGTH && r.content_length == 3,
		    "%s: framing", conns[i]);
		for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			const struct http_header *h = http_header_find(r.headers,
			    r.n_headers, want[k].name);
			CHECK_MSG(h != NULL, "%s", want[k].name);
			if (h == NULL)
				continue;
			CHECK_MSG(http_header_is_hop_by_hop(h, r.headers,
			    r.n_headers) == want[k].hop, "%s / %s: hop", conns[i],
			    want[k].name);
			CHECK_MSG(http_header_forwardable(h, r.headers,
			    r.n_headers) == want[k].fwd, "%s / %s: fwd", conns[i],
			    want[k].name);
		}
	}
	/* Other names still can be nominated. */
	n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\n"
	    "Connection: X-Other\r\nX-Other: 1\r\n\r\n");
	CHECK_INT(http_parse_request(raw, (size_t)n, &lim, &r), n);
	CHECK_INT(http_header_forwardable(http_header_find(r.headers,
	    r.n_headers, "X-Other"), r.headers, r.n_headers), 0);
	/* Transfer-Encoding is never forwarded as it is. */
	n = snprintf(raw, sizeof(raw), "POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	CHECK_INT(http_parse_request(raw, (size_t)n, &lim, &r), n);
	CHECK_INT(http_header_forwardable(http_header_find(r.headers,
	    r.n_headers, "Transfer-Encoding"), r.headers, r.n_headers), 0);
}

static void
test_framing_header(void)
{
	char buf[64];

	CHECK_INT(http_framing_header(HTTP_BODY_LENGTH, 0, buf, sizeof(buf)), 19);
	CHECK(strcmp(buf, "Content-Length: 0\r\n") == 0);
	CHECK(http_framing_header(HTTP_BODY_LENGTH, 9223372036854775807ULL, buf,
	    sizeof(buf)) > 0);
	CHECK(strcmp(buf, "Content-Length: 9223372036854775807\r\n") == 0);
	CHECK_INT(http_framing_header(HTTP_BODY_CHUNKED, 5, buf, sizeof(buf)), 28);
	CHECK(strcmp(buf, "Transfer-Encoding: chunked\r\n") == 0);
	CHECK_INT(http_framing_header(HTTP_BODY_NONE, 5, buf, sizeof(buf)), 0);
	CHECK_INT(http_framing_header(HTTP_BODY_UNTIL_CLOSE, 5, buf,
	    sizeof(buf)), 0);
	CHECK_INT(http_framing_header(HTTP_BODY_LENGTH, 100, buf, 10), -1);
}

/* Responses: transfer codings other than chunked are flagged. */
static void
test_te_other(void)
{
	static const struct {
		const char	*te;
		int		 framing;
		int		 other;
	} c[] = {
		{ "chunked", HTTP_BODY_CHUNKED, 0 },
		{ "gzip, chunked", HTTP_BODY_CHUNKED, 1 },
		{ "GZIP,CHUNKED", HTTP_BODY_CHUNKED, 1 },
		{ "deflate", HTTP_BODY_UNTIL_CLOSE, 1 },
		{ "x-custom ; q=1, chunked", HTTP_BODY_CHUNKED, 1 },
		{ "identity, chunked", HTTP_BODY_CHUNKED, 1 },
	};
	static struct http_response r;
	char raw[256];
	size_t i;
	int n;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		n = snprintf(raw, sizeof(raw), "HTTP/1.1 200 OK\r\n"
		    "Transfer-Encoding: %s\r\n\r\n", c[i].te);
		CHECK_MSG(http_parse_response(raw, (size_t)n, &lim, "GET", 3,
		    &r) == n, "%s", c[i].te);
		CHECK_MSG((int)r.framing == c[i].framing, "%s: framing", c[i].te);
		CHECK_MSG(r.te_other == c[i].other, "%s: other", c[i].te);
	}
	/* Two headers: gzip in the first, chunked in the second. */
	CHECK(http_parse_response(RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: "
	    "gzip\r\nTransfer-Encoding: chunked\r\n\r\n"), &lim, "GET", 3, &r) > 0);
	CHECK_INT(r.te_other, 1);
}

/* HEAD and 304 carry the length of the body they do not send. */
static void
test_declared_length(void)
{
	static struct http_response r;

	CHECK(http_parse_response(RAW("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n"
	    "\r\n"), &lim, "HEAD", 4, &r) > 0);
	CHECK_INT(r.framing, HTTP_BODY_NONE);
	CHECK_INT(r.content_length, 0);
	CHECK_INT(r.has_length, 1);
	CHECK_INT(r.declared_length, 42);
	CHECK(http_parse_response(RAW("HTTP/1.1 304 Not Modified\r\n\r\n"), &lim,
	    "GET", 3, &r) > 0);
	CHECK_INT(r.has_length, 0);
}

static int
identity_of(const char *head)
{
	static struct http_response r;
	int n = http_parse_response(head, strlen(head), &lim, "GET", 3, &r);

	CHECK_MSG(n > 0, "%s", head);
	return http_identity_encoded(r.headers, r.n_headers);
}

static void
test_identity_encoded(void)
{
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), 1);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
	    "Content-Length: 0\r\n\r\n"), 1);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: IDENTITY, ,"
	    "identity\r\nContent-Length: 0\r\n\r\n"), 1);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
	    "Content-Encoding: gzip\r\nContent-Length: 0\r\n\r\n"), 0);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: identity, "
	    "br\r\nContent-Length: 0\r\n\r\n"), 0);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\ncontent-encoding: GZIP\r\n"
	    "Content-Length: 0\r\n\r\n"), 0);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: x-gzip\r\n"
	    "Content-Length: 0\r\n\r\n"), 0);
	CHECK_INT(identity_of("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
	    "X: 1\r\nContent-Encoding: deflate\r\nContent-Length: 0\r\n\r\n"), 0);
}

int
main(void)
{
	test_protected();
	test_framing_header();
	test_te_other();
	test_declared_length();
	test_identity_encoded();
	return check_summary();
}
