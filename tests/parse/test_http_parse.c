/*
 * Unit tests of the HTTP/1.x head and chunked-body parsers: valid requests of
 * every target form, the framing attacks (smuggling) they must refuse, limits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parse/http_parse.h"

#define RAW(s)	(s), (sizeof(s) - 1)
#define OK	1000	/* the whole input is the head */
#define NEED	HTTP_NEED_MORE
#define BAD	HTTP_ERR_BAD
#define E414	HTTP_ERR_URI_TOO_LONG
#define E431	HTTP_ERR_HEAD_TOO_LARGE
#define E505	HTTP_ERR_VERSION

static const struct http_limits lim = { .max_line = 256, .max_head = 2048 };

static int
slice_is(struct http_slice s, const char *str)
{
	if (str == NULL)
		return s.len == 0;
	return s.p != NULL && s.len == strlen(str) && memcmp(s.p, str, s.len) == 0;
}

struct req_case {
	const char	*raw;
	size_t		 len;
	int		 want;
	const char	*method;
	int		 form;
	const char	*host;
	int		 port;
	const char	*path;
	int		 framing;
	uint64_t	 cl;
	int		 ka;
	int		 upgrade;
	int		 expect;
	int		 minor;
	size_t		 nh;
};

#define ORIG	HTTP_TARGET_ORIGIN
#define ABS	HTTP_TARGET_ABSOLUTE
#define AUTH	HTTP_TARGET_AUTHORITY
#define STAR	HTTP_TARGET_ASTERISK
#define NONE	HTTP_BODY_NONE
#define LEN	HTTP_BODY_LENGTH
#define CHUNK	HTTP_BODY_CHUNKED
#define CLOSE	HTTP_BODY_UNTIL_CLOSE

#define REQ_ERR(s, e)	{ .raw = (s), .len = sizeof(s) - 1, .want = (e) }

static const struct req_case req_cases[] = {
	/* Valid requests of each form. */
	{ RAW("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"), OK, "GET", ORIG, NULL,
	    0, "/", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("GET /p?q=1&r=%20 HTTP/1.0\r\n\r\n"), OK, "GET", ORIG, NULL, 0,
	    "/p?q=1&r=%20", NONE, 0, 0, 0, 0, 0, 0 },
	{ RAW("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), OK, "GET",
	    ORIG, NULL, 0, "/x", NONE, 0, 1, 0, 0, 0, 1 },
	{ RAW("GET /x HTTP/1.0\r\nConnection: Keep-Alive, close\r\n\r\n"), OK,
	    "GET", ORIG, NULL, 0, "/x", NONE, 0, 0, 0, 0, 0, 1 },
	{ RAW("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), OK,
	    "GET", ORIG, NULL, 0, "/x", NONE, 0, 0, 0, 0, 1, 2 },
	{ RAW("GET /x HTTP/1.1\r\nHost: a\r\nConnection: foo,,  CLOSE \r\n\r\n"),
	    OK, "GET", ORIG, NULL, 0, "/x", NONE, 0, 0, 0, 0, 1, 2 },
	{ RAW("GET /x HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n"), OK,
	    "GET", ORIG, NULL, 0, "/x", NONE, 0, 1, 0, 0, 1, 2 },
	{ RAW("GET / HTTP/1.0\r\nConnection: foo\r\nConnection: bar, keep-alive\r\n\r\n"),
	    OK, "GET", ORIG, NULL, 0, "/", NONE, 0, 1, 0, 0, 0, 2 },
	{ RAW("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\n\r\n"),
	    OK, "GET", ABS, "example.com", 80, "/a/b?c=d", NONE, 0, 1, 0, 0, 1,
	    1 },
	{ RAW("GET HTTPS://Example.COM:8443 HTTP/1.1\r\nHost: example.com:8443\r\n\r\n"),
	    OK, "GET", ABS, "Example.COM", 8443, "/", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("HEAD https://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"),
	    OK, "HEAD", ABS, "example.com", 443, "/", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("GET http://[::1]:8080/x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
	    OK, "GET", ABS, "::1", 8080, "/x", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), OK,
	    "GET", ABS, "127.0.0.1", 80, "/", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("GET http://a-b_c.example~/ HTTP/1.0\r\n\r\n"), OK, "GET", ABS,
	    "a-b_c.example~", 80, "/", NONE, 0, 0, 0, 0, 0, 0 },
	{ RAW("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
	    OK, "CONNECT", AUTH, "example.com", 443, NULL, NONE, 0, 1, 0, 0, 1,
	    1 },
	{ RAW("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"),
	    OK, "CONNECT", AUTH, "2001:db8::1", 443, NULL, NONE, 0, 1, 0, 0, 1,
	    1 },
	{ RAW("CONNECT 198.18.0.1:65535 HTTP/1.1\r\nHost: 198.18.0.1:65535\r\n"
	    "Proxy-Authorization: Basic YTpi\r\n\r\n"), OK, "CONNECT", AUTH,
	    "198.18.0.1", 65535, NULL, NONE, 0, 1, 0, 0, 1, 2 },
	{ RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), OK, "OPTIONS", STAR,
	    NULL, 0, "*", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"), OK,
	    "POST", ORIG, NULL, 0, "/u", LEN, 5, 1, 0, 0, 1, 2 },
	{ RAW("POST /u HTTP/1.1\r\nHost: a\r\ncontent-length:0\r\n\r\n"), OK,
	    "POST", ORIG, NULL, 0, "/u", LEN, 0, 1, 0, 0, 1, 2 },
	{ RAW("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n"), OK,
	    "POST", ORIG, NULL, 0, "/u", LEN, 7, 1, 0, 0, 1, 2 },
	{ RAW("PUT /u HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n"),
	    OK, "PUT", ORIG, NULL, 0, "/u", LEN, 9223372036854775807ULL, 1, 0,
	    0, 1, 2 },
	{ RAW("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
	    OK, "POST", ORIG, NULL, 0, "/u", CHUNK, 0, 1, 0, 0, 1, 2 },
	{ RAW("POST /u HTTP/1.1\r\nTransfer-Encoding:\tChunKed \r\nHost: a\r\n\r\n"),
	    OK, "POST", ORIG, NULL, 0, "/u", CHUNK, 0, 1, 0, 0, 1, 2 },
	{ RAW("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
	    "Upgrade: websocket\r\n\r\n"), OK, "GET", ORIG, NULL, 0, "/ws",
	    NONE, 0, 1, 1, 0, 1, 3 },
	{ RAW("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n"), OK,
	    "GET", ORIG, NULL, 0, "/ws", NONE, 0, 1, 0, 0, 1, 2 },
	{ RAW("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n"), OK,
	    "GET", ORIG, NULL, 0, "/ws", NONE, 0, 1, 0, 0, 1, 2 },
	{ RAW("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
	    "Content-Length: 1\r\n\r\n"), OK, "POST", ORIG, NULL, 0, "/", LEN,
	    1, 1, 0, 1, 1, 3 },
	{ RAW("POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"), OK,
	    "POST", ORIG, NULL, 0, "/", NONE, 0, 1, 0, 0, 1, 2 },
	{ RAW("GET / HTTP/1.1\r\nHost: a\r\nX:   v \t\r\nY:\r\nZ: a\tb \x80\xff\r\n\r\n"),
	    OK, "GET", ORIG, NULL, 0, "/", NONE, 0, 1, 0, 0, 1, 4 },
	{ RAW("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), OK, "GET", ORIG,
	    NULL, 0, "/", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("GET / HTTP/1.1\r\nHost:\r\n\r\n"), OK, "GET", ORIG, NULL, 0, "/",
	    NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("PROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n"), OK, "PROPFIND", ORIG,
	    NULL, 0, "/d", NONE, 0, 1, 0, 0, 1, 1 },
	{ RAW("X-CUSTOM~! /d HTTP/1.1\r\nHost: a\r\n\r\n"), OK, "X-CUSTOM~!",
	    ORIG, NULL, 0, "/d", NONE, 0, 1, 0, 0, 1, 1 },

	/* Framing attacks. */
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 0\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "Content-Length: 5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "Content-Length: 6\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1a\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551621\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;x=1\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nContent-Length\t: 5\r\n\r\n", BAD),
	/* obs-fold */
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\n Host: a\r\n\r\n", BAD),
	REQ_ERR("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n", BAD),
	/* bare CR, bare LF */
	REQ_ERR("GET / HTTP/1.1\rHost: a\r\n\r\n", BAD),
	REQ_ERR("GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\n\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\nb\r\n\r\n", BAD),
	REQ_ERR("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	/* NUL and other controls */
	REQ_ERR("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("G\0T / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\0\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX\0: b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01" "b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", BAD),
	REQ_ERR("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET /\x80 HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	/* header names */
	REQ_ERR("GET / HTTP/1.1\r\nHost : a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX y: z\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX/y: z\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\n: z\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nX\x80: z\r\n\r\n", BAD),
	/* Host */
	REQ_ERR("GET / HTTP/1.1\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nX: a\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:443 HTTP/1.1\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test/ HTTP/1.1\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1\r\nHost: a:99999\r\n\r\n", BAD),
	/* request line */
	REQ_ERR("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET /\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / \r\nHost: a\r\n\r\n", BAD),
	REQ_ERR(" / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / http/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.1x\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/1.\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTX/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("GET / HTTP/2.0\r\nHost: a\r\n\r\n", E505),
	REQ_ERR("GET / HTTP/1.2\r\nHost: a\r\n\r\n", E505),
	REQ_ERR("GET / HTTP/0.9\r\nHost: a\r\n\r\n", E505),
	REQ_ERR("GET / HTTP/2\r\nHost: a\r\n\r\n", E505),
	REQ_ERR("GET / HTTP/10.10\r\n\r\n", E505),
	REQ_ERR("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", E505),
	/* targets */
	REQ_ERR("GET * HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test: HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:0 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:65536 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:000443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:443x HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:-1 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT u@a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT u:p@a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT :443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT [::1] HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT [::1:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT []:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT [1.2.3.4]:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT /x HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT http://a.test:443/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("CONNECT a.test:443/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://u:p@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test@evil.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http:///x HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://:80/x HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http:/a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http: HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET httpx://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test/#frag HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET /a#b HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test:/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test:0/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test?q HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a%2etest/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
	REQ_ERR("GET http://a.test\\@b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", BAD),
};

static void
check_req_fields(const struct req_case *c, const struct http_request *r)
{
	CHECK_MSG(slice_is(r->method, c->method), "%s", c->raw);
	CHECK_MSG((int)r->form == c->form, "%s: form %d", c->raw, r->form);
	CHECK_MSG(slice_is(r->host, c->host), "%s: host %.*s", c->raw,
	    (int)r->host.len, r->host.p ? r->host.p : "");
	CHECK_MSG(r->port == c->port, "%s: port %d", c->raw, r->port);
	CHECK_MSG(slice_is(r->path, c->path), "%s: path %.*s", c->raw,
	    (int)r->path.len, r->path.p ? r->path.p : "");
	CHECK_MSG((int)r->framing == c->framing, "%s: framing %d", c->raw,
	    r->framing);
	CHECK_MSG(r->content_length == c->cl, "%s", c->raw);
	CHECK_MSG(r->keep_alive == c->ka, "%s: keep_alive", c->raw);
	CHECK_MSG(r->upgrade == c->upgrade, "%s: upgrade", c->raw);
	CHECK_MSG(r->expect_continue == c->expect, "%s: expect", c->raw);
	CHECK_MSG(r->version_minor == c->minor, "%s: minor", c->raw);
	CHECK_MSG(r->n_headers == c->nh, "%s: %zu headers", c->raw,
	    r->n_headers);
	CHECK_MSG(r->target.p >= c->raw && r->target.p + r->target.len <=
	    c->raw + c->len, "%s: target outside the buffer", c->raw);
}

/*
 * Every case, fed whole and by every prefix: a prefix never gets another
 * verdict than NEED_MORE or the whole input's (so byte-at-a-time feeding
 * sees NEED_MORE until complete); bytes after the head change nothing.
 */
static void
test_request_table(void)
{
	static struct http_request r;
	char buf[4096];
	size_t i, k;
	int rc, want;

	for (i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];

		want = c->want == OK ? (int)c->len : c->want;
		rc = http_parse_request(c->raw, c->len, &lim, &r);
		CHECK_MSG(rc == want, "case %zu \"%s\": %d, want %d", i, c->raw,
		    rc, want);
		if (rc == want && c->want == OK)
			check_req_fields(c, &r);
		for (k = 0; k < c->len; k++) {
			rc = http_parse_request(c->raw, k, &lim, &r);
			if (c->want == OK ? rc != NEED : rc != NEED && rc != want)
				break;
		}
		CHECK_MSG(k == c->len, "case %zu \"%s\": prefix %zu gives %d",
		    i, c->raw, k, rc);
		if (c->len + 7 <= sizeof(buf)) {
			memcpy(buf, c->raw, c->len);
			memcpy(buf + c->len, "0\r\nX\n\0", 7);
			rc = http_parse_request(buf, c->len + 7, &lim, &r);
			CHECK_MSG(rc == want, "case %zu with a body: %d", i, rc);
		}
	}
}

/* 414 as soon as max_line bytes show no CRLF; 431 past max_head. */
static void
test_request_limits(void)
{
	static struct http_request r;
	static char buf[16384];
	struct http_limits l = { .max_line = 100, .max_head = 1000 };
	size_t n, i;
	int rc;

	/* A request line of exactly max_line bytes passes. */
	n = (size_t)snprintf(buf, sizeof(buf), "GET /%0*d HTTP/1.1\r\nHost: a\r\n\r\n",
	    (int)(l.max_line - 14), 0);
	CHECK_INT(http_parse_request(buf, n, &l, &r), n);
	CHECK_INT(r.path.len, l.max_line - 13);
	/* One more byte is 414, and known from the first max_line + 1 bytes. */
	n = (size_t)snprintf(buf, sizeof(buf), "GET /%0*d HTTP/1.1\r\nHost: a\r\n\r\n",
	    (int)(l.max_line - 13), 0);
	CHECK_INT(http_parse_request(buf, n, &l, &r), E414);
	CHECK_INT(http_parse_request(buf, l.max_line, &l, &r), NEED);
	CHECK_INT(http_parse_request(buf, l.max_line + 1, &l, &r), E414);
	/* A long target with no end at all. */
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "GET /", 5);
	CHECK_INT(http_parse_request(buf, 101, &l, &r), E414);
	CHECK_INT(http_parse_request(buf, sizeof(buf), &l, &r), E414);
	/* The default limits apply with no limits given. */
	CHECK_INT(http_parse_request(buf, sizeof(buf), NULL, &r), E414);
	/* A bare LF inside the line is seen before the line is too long. */
	buf[50] = '\n';
	CHECK_INT(http_parse_request(buf, sizeof(buf), &l, &r), BAD);

	/* A head of exactly max_head bytes passes; one more is 431. */
	for (i = 0; i < 2; i++) {
		n = (size_t)snprintf(buf, sizeof(buf),
		    "GET / HTTP/1.1\r\nHost: a\r\nX: %0*d\r\n\r\n",
		    (int)(l.max_head - 32 + i), 0);
		CHECK_INT(n, l.max_head + i);
		rc = http_parse_request(buf, n, &l, &r);
		CHECK_INT(rc, i == 0 ? (int)n : E431);
	}
	/* 431 without the end of the head in sight. */
	memset(buf, 'x', sizeof(buf));
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (; n + 8 < 4000; n += 8)
		memcpy(buf + n, "Y: yy\r\n", 7), buf[n + 7] = 'Z';
	CHECK_INT(http_parse_request(buf, l.max_head - 1, &l, &r), NEED);
	CHECK_INT(http_parse_request(buf, l.max_head, &l, &r), E431);
	CHECK_INT(http_parse_request(buf, 4000, &l, &r), E431);
	/* CR at the last byte allowed, LF beyond it: the head cannot fit. */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	l.max_head = n - 1;
	CHECK_INT(http_parse_request(buf, n - 1, &l, &r), E431);
	l.max_head = n;
	CHECK_INT(http_parse_request(buf, n, &l, &r), n);
}

static void
test_request_header_count(void)
{
	static struct http_request r;
	static char buf[8192];
	struct http_limits l = { .max_line = 100, .max_head = sizeof(buf) };
	size_t n, i, want;

	for (want = HTTP_MAX_HEADERS; want <= HTTP_MAX_HEADERS + 1; want++) {
		n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
		for (i = 0; i < want; i++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    i == 0 ? "Host: a\r\n" : "X-%zu: v\r\n", i);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
		if (want == HTTP_MAX_HEADERS) {
			CHECK_INT(http_parse_request(buf, n, &l, &r), n);
			CHECK_INT(r.n_headers, HTTP_MAX_HEADERS);
			CHECK(slice_is(r.headers[127].name, "X-127"));
			CHECK(slice_is(r.host_header, "a"));
		} else
			CHECK_INT(http_parse_request(buf, n, &l, &r), E431);
	}
}

static void
test_request_slices(void)
{
	static struct http_request r;
	const char raw[] = "GET http://a.test:81 HTTP/1.1\r\nHost:  a.test:81 \r\n"
	    "X-Empty:\r\nAccept: */*\r\n\r\n";
	const struct http_header *h;

	CHECK_INT(http_parse_request(raw, sizeof(raw) - 1, &lim, &r),
	    sizeof(raw) - 1);
	CHECK(slice_is(r.scheme, "http"));
	CHECK(slice_is(r.target, "http://a.test:81"));
	CHECK(r.has_port == 1 && r.port == 81);
	CHECK(slice_is(r.path, "/"));
	CHECK(r.has_host && slice_is(r.host_header, "a.test:81"));
	CHECK(r.method.p == raw);
	CHECK_INT(r.n_headers, 3);
	h = http_header_find(r.headers, r.n_headers, "x-empty");
	CHECK(h == &r.headers[1] && h->value.len == 0);
	CHECK(http_header_find(r.headers, r.n_headers, "X-Empt") == NULL);
	CHECK(http_header_find(r.headers, r.n_headers, "accept") ==
	    &r.headers[2]);
	CHECK(http_header_is(&r.headers[0], "HOST"));
	CHECK(!http_header_is(&r.headers[0], "Hos"));
	CHECK(!http_header_is(&r.headers[0], "Hostx"));

	const char raw2[] = "GET https://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n";
	CHECK_INT(http_parse_request(raw2, sizeof(raw2) - 1, &lim, &r),
	    sizeof(raw2) - 1);
	CHECK(r.has_port == 0 && r.port == 443 && slice_is(r.scheme, "https"));
	CHECK(r.path.p == raw2 + 18);
}

struct resp_case {
	const char	*raw;
	size_t		 len;
	const char	*method;
	int		 want;
	int		 status;
	int		 minor;
	const char	*reason;
	int		 framing;
	uint64_t	 cl;
	int		 ka;
};

#define RESP_ERR(s, m, e) \
	{ .raw = (s), .len = sizeof(s) - 1, .method = (m), .want = (e) }

static const struct resp_case resp_cases[] = {
	{ RAW("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"), "GET", OK, 200,
	    1, "OK", LEN, 10, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "GET", OK,
	    200, 1, "OK", CHUNK, 0, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
	    "POST", OK, 200, 1, "OK", CHUNK, 0, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), "GET", OK, 200, 1, "OK",
	    CHUNK, 0, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;q=1 , chunked\r\n\r\n"),
	    "GET", OK, 200, 1, "OK", CHUNK, 0, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
	    "GET", OK, 200, 1, "OK", CLOSE, 0, 0 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"), "GET", OK,
	    200, 1, "OK", CLOSE, 0, 0 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n"), "GET",
	    OK, 200, 1, "OK", CLOSE, 0, 0 },
	{ RAW("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "GET",
	    OK, 200, 0, "OK", CLOSE, 0, 0 },
	{ RAW("HTTP/1.1 200 OK\r\n\r\n"), "GET", OK, 200, 1, "OK", CLOSE, 0, 0 },
	{ RAW("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"), "HEAD", OK,
	    200, 1, "OK", NONE, 0, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "HEAD",
	    OK, 200, 1, "OK", NONE, 0, 1 },
	{ RAW("HTTP/1.1 200 Connection established\r\n\r\n"), "CONNECT", OK,
	    200, 1, "Connection established", NONE, 0, 1 },
	{ RAW("HTTP/1.1 407 Proxy Auth\r\nContent-Length: 3\r\n\r\n"), "CONNECT",
	    OK, 407, 1, "Proxy Auth", LEN, 3, 1 },
	{ RAW("HTTP/1.1 204 No Content\r\n\r\n"), "DELETE", OK, 204, 1,
	    "No Content", NONE, 0, 1 },
	{ RAW("HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"), "GET",
	    OK, 304, 1, "Not Modified", NONE, 0, 1 },
	{ RAW("HTTP/1.1 100 Continue\r\n\r\n"), "POST", OK, 100, 1, "Continue",
	    NONE, 0, 1 },
	{ RAW("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
	    "Upgrade: websocket\r\n\r\n"), "GET", OK, 101, 1,
	    "Switching Protocols", NONE, 0, 1 },
	{ RAW("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n"), "GET", OK, 200,
	    0, "OK", LEN, 3, 0 },
	{ RAW("HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n"),
	    "GET", OK, 200, 0, "OK", LEN, 3, 1 },
	{ RAW("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\n"),
	    "GET", OK, 200, 1, "OK", LEN, 3, 0 },
	{ RAW("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n"), "GET", OK, 200, 1,
	    NULL, LEN, 0, 1 },
	{ RAW("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"), "GET", OK, 200, 1,
	    NULL, LEN, 0, 1 },
	{ RAW("HTTP/1.1 404 Not \t Found \x80\r\nContent-Length: 0\r\n\r\n"),
	    "GET", OK, 404, 1, "Not \t Found \x80", LEN, 0, 1 },
	{ RAW("HTTP/1.1 599 x\r\nContent-Length: 0\r\n\r\n"), NULL, OK, 599, 1,
	    "x", LEN, 0, 1 },

	RESP_ERR("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 304 OK\r\nContent-Length: 3\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nContent-Length: 3,3\r\n\r\n", "HEAD", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;a=b\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nTransfer-Encoding: g z\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\nX: a\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nX : a\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 O\0K\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 200 OK\r\nX: \0\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/2.0 200 OK\r\n\r\n", "GET", E505),
	RESP_ERR("HTTP/1.2 200 OK\r\n\r\n", "GET", E505),
	RESP_ERR("http/1.1 200 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 20 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 2000 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 099 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 600 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1  200 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1 2x0 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("HTTP/1.1\r\n\r\n", "GET", BAD),
	RESP_ERR("ICY 200 OK\r\n\r\n", "GET", BAD),
	RESP_ERR("SSH-2.0-OpenSSH_9.2\r\n", "GET", BAD),
};

static void
test_response_table(void)
{
	static struct http_response r;
	size_t i, k, mlen;
	int rc, want;

	for (i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
		const struct resp_case *c = &resp_cases[i];

		want = c->want == OK ? (int)c->len : c->want;
		mlen = c->method ? strlen(c->method) : 0;
		rc = http_parse_response(c->raw, c->len, &lim, c->method, mlen,
		    &r);
		CHECK_MSG(rc == want, "resp %zu \"%s\": %d, want %d", i, c->raw,
		    rc, want);
		if (rc == want && c->want == OK) {
			CHECK_MSG(r.status == c->status, "resp %zu", i);
			CHECK_MSG(r.version_minor == c->minor, "resp %zu", i);
			CHECK_MSG(slice_is(r.reason, c->reason), "resp %zu", i);
			CHECK_MSG((int)r.framing == c->framing,
			    "resp %zu: framing %d", i, r.framing);
			CHECK_MSG(r.content_length == c->cl, "resp %zu", i);
			CHECK_MSG(r.keep_alive == c->ka, "resp %zu: ka", i);
		}
		for (k = 0; k < c->len; k++) {
			rc = http_parse_response(c->raw, k, &lim, c->method,
			    mlen, &r);
			if (c->want == OK ? rc != NEED : rc != NEED && rc != want)
				break;
		}
		CHECK_MSG(k == c->len, "resp %zu: prefix %zu gives %d", i, k,
		    rc);
	}
}

static void
test_response_limits(void)
{
	static struct http_response r;
	static char buf[4096];
	struct http_limits l = { .max_line = 64, .max_head = 256 };

	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "HTTP/1.1 200 ", 13);
	CHECK_INT(http_parse_response(buf, 64, &l, "GET", 3, &r), NEED);
	CHECK_INT(http_parse_response(buf, 65, &l, "GET", 3, &r), E414);
	memcpy(buf + 20, "\r\n", 2);
	CHECK_INT(http_parse_response(buf, 255, &l, "GET", 3, &r), NEED);
	CHECK_INT(http_parse_response(buf, 256, &l, "GET", 3, &r), E431);
}

static void
test_sniff(void)
{
	static const struct {
		const char	*s;
		size_t		 len;
		int		 want;
	} c[] = {
		{ RAW("GET / HTTP/1.1\r\n"), 1 },
		{ RAW("GET "), 1 },
		{ RAW("GET"), -1 },
		{ RAW("G"), -1 },
		{ RAW(""), -1 },
		{ RAW("P"), -1 },
		{ RAW("PO"), -1 },
		{ RAW("PROPFIN"), -1 },
		{ RAW("PROPFIND /"), 1 },
		{ RAW("POST /x"), 1 },
		{ RAW("PUT /x"), 1 },
		{ RAW("PATCH /x"), 1 },
		{ RAW("DELETE /x"), 1 },
		{ RAW("HEAD /x"), 1 },
		{ RAW("OPTIONS *"), 1 },
		{ RAW("TRACE /"), 1 },
		{ RAW("CONNECT a:1"), 1 },
		{ RAW("CONN"), -1 },
		{ RAW("GET/"), 0 },
		{ RAW("\x16\x03\x01"), 0 },
		{ RAW("\x16"), 0 },
		{ RAW("\0GET "), 0 },
		/* What an origin takes as a request line is HTTP (decided). */
		{ RAW(" GET /"), 1 },
		{ RAW("\r\nGET /admin HTTP/1.1\r\n"), 1 },
		{ RAW("\r\n\r\n\n\t POST /"), 1 },
		{ RAW("\r\n"), -1 },
		{ RAW("GETS "), -1 },
		{ RAW("GETS / HTTP/1.1\r\n"), 1 },
		{ RAW("PURGE /admin/x HTTP/1.1\r\n"), 1 },
		{ RAW("PURGE /admin/x"), -1 },
		{ RAW("PURGE /admin/x hTtP/1.0"), 1 },
		{ RAW("get /"), -1 },
		{ RAW("get / http/1.1\r\n"), 1 },
		{ RAW("GET\t/"), -1 },
		{ RAW("GET\t/admin\tHTTP/1.1"), 1 },
		{ RAW("GET\xa0/admin\xa0HTTP/1.1"), 1 },
		{ RAW("\x0c" "DELETE\x0b/a\x1f" "HTTP/1.1"), 1 },
		{ RAW("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 1 },
		{ RAW("PX"), -1 },
		/* Other protocols: not HTTP as soon as a byte says so. */
		{ RAW("PURGE /admin\r\n"), 0 },
		{ RAW("SSH-2.0-OpenSSH_9.2p1\r\n"), 0 },
		{ RAW("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"), 0 },
		{ RAW("set key 0 0 5\r\nhello\r\n"), 0 },
		{ RAW("a1 LOGIN user pass\r\n"), 0 },
		{ RAW("*3\r\n$3\r\nSET\r\n"), 0 },
		{ RAW("PING\r\n"), 0 },
		{ RAW("OPTIONS rtsp://a/b RTSP/1.0\r\n"), 1 },	/* known method */
		{ RAW("DESCRIBE rtsp://a/b RTSP/1.0\r\n"), 0 },
		{ RAW("\x00\x00\x00\x08\x04\xd2\x16\x2f"), 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		CHECK_MSG(http_sniff_request(c[i].s, c[i].len) == c[i].want,
		    "sniff \"%s\"", c[i].s);
}

static void
test_hop_by_hop(void)
{
	static struct http_request r;
	const char raw[] = "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Foo, ,close\r\n"
	    "Connection: x-bar\r\nX-Foo: 1\r\nX-Bar: 2\r\nX-Baz: 3\r\n"
	    "Keep-Alive: 5\r\nTE: trailers\r\nTrailer: x\r\nUpgrade: h2c\r\n"
	    "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic x\r\n"
	    "Proxy-Authenticate: Basic\r\nAccept: */*\r\n\r\n";
	static const struct {
		const char	*name;
		int		 hop;
	} c[] = {
		{ "Host", 0 }, { "Connection", 1 }, { "X-Foo", 1 },
		{ "X-Bar", 1 }, { "X-Baz", 0 }, { "Keep-Alive", 1 },
		{ "TE", 1 }, { "Trailer", 1 }, { "Upgrade", 1 },
		{ "Proxy-Connection", 1 }, { "Proxy-Authorization", 1 },
		{ "Proxy-Authenticate", 1 }, { "Accept", 0 },
	};
	const struct http_header *h;
	struct http_header none = { { "", 0 }, { "", 0 } };
	size_t i;

	CHECK_INT(http_parse_request(raw, sizeof(raw) - 1, &lim, &r),
	    sizeof(raw) - 1);
	CHECK_INT(r.keep_alive, 0);
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		h = http_header_find(r.headers, r.n_headers, c[i].name);
		CHECK_MSG(h != NULL, "%s", c[i].name);
		if (h != NULL)
			CHECK_MSG(http_header_is_hop_by_hop(h, r.headers,
			    r.n_headers) == c[i].hop, "%s", c[i].name);
	}
	/* An empty Connection element never matches. */
	CHECK_INT(http_header_is_hop_by_hop(&none, r.headers, r.n_headers), 0);
	/* Without the Connection headers, only the fixed list. */
	h = http_header_find(r.headers, r.n_headers, "X-Foo");
	CHECK_INT(http_header_is_hop_by_hop(h, NULL, 0), 0);
}

/* Chunked bodies. */
struct chunk_case {
	const char	*raw;
	size_t		 len;
	ssize_t		 body;	/* bytes of the body, or -1 */
	int		 done;	/* the body ends inside raw */
};

#define CHUNK_ERR(s)	{ .raw = (s), .len = sizeof(s) - 1, .body = -1 }

static const struct chunk_case chunk_cases[] = {
	{ RAW("0\r\n\r\n"), 5, 1 },
	{ RAW("5\r\nhello\r\n0\r\n\r\n"), 15, 1 },
	{ RAW("5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n"), 15, 1 },
	{ RAW("5;ext=1\r\nhello\r\n0;last\r\n\r\n"), 26, 1 },
	{ RAW("5 ;ext=\"q v\"\r\nhello\r\n0\r\n\r\n"), 26, 1 },
	{ RAW("5\t; a ; b=c\r\nhello\r\n0\r\n\r\n"), 25, 1 },
	{ RAW("A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"), 35, 1 },
	{ RAW("1\r\n\0\r\n1\r\n\r\r\n1\r\n\n\r\n0\r\n\r\n"), 23, 1 },
	{ RAW("000005\r\nhello\r\n00\r\n\r\n"), 21, 1 },
	{ RAW("0\r\nTrailer-A: 1\r\nB:\r\nC: x\ty \x80\r\n\r\nrest"), 33, 1 },
	{ RAW("2\r\nab\r\n3\r\ncde\r\n0\r\nX-Sum: 5\r\n\r\n"), 30, 1 },
	{ RAW("3FFFFFFFFFFFFFFF\r\n"), 18, 0 },	/* accepted, incomplete */
	{ RAW(""), 0, 0 },

	CHUNK_ERR("x\r\n\r\n"),
	CHUNK_ERR("\r\n"),
	CHUNK_ERR(";a\r\n"),
	CHUNK_ERR("-5\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("+5\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR(" 5\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("5 \r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("0x5\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("5\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("5\r\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("5\r\nhello\n0\r\n\r\n"),
	CHUNK_ERR("5\r\nhello\r0\r\n\r\n"),
	CHUNK_ERR("5\r\nhelloX\r\n0\r\n\r\n"),
	CHUNK_ERR("5\r\nhelloX\n0\r\n\r\n"),
	CHUNK_ERR("5\r\nhello\r\r0\r\n\r\n"),
	CHUNK_ERR("5\r\nhell\r\n0\r\n\r\n"),
	CHUNK_ERR("5;a\x01\r\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("5;a\nhello\r\n0\r\n\r\n"),
	CHUNK_ERR("4000000000000000\r\n"),
	CHUNK_ERR("FFFFFFFFFFFFFFFFF\r\n"),
	CHUNK_ERR("10000000000000000000000000000000005\r\nhello\r\n"),
	CHUNK_ERR("0\r\n\n"),
	CHUNK_ERR("0\r\n\r\r"),
	CHUNK_ERR("0\r\n\rx"),
	CHUNK_ERR("0\r\nA: 1\r\n b\r\n\r\n"),
	CHUNK_ERR("0\r\nA: 1\r\n\tb\r\n\r\n"),
	CHUNK_ERR("0\r\nAB\r\n\r\n"),
	CHUNK_ERR("0\r\nA B: c\r\n\r\n"),
	CHUNK_ERR("0\r\nA : c\r\n\r\n"),
	CHUNK_ERR("0\r\n: c\r\n\r\n"),
	CHUNK_ERR("0\r\nA: 1\nB: 2\r\n\r\n"),
	CHUNK_ERR("0\r\nA: 1\0\r\n\r\n"),
	CHUNK_ERR("0\r\nA: 1\rB\r\n\r\n"),
};

/*
 * Feeds raw cut at the given offsets; returns the body bytes counted, or -1.
 * Checks on the way that every piece is taken whole until the body ends.
 */
static ssize_t
chunk_feed(const char *raw, size_t len, const size_t *cut, size_t ncut,
    int *done)
{
	struct http_chunked c;
	size_t start = 0, end, i;
	ssize_t n, total = 0;

	http_chunked_init(&c);
	*done = 0;
	for (i = 0; i <= ncut; i++) {
		end = i < ncut ? cut[i] : len;
		if (end < start || end > len)
			continue;
		n = http_chunked_feed(&c, raw + start, end - start, done);
		if (n < 0) {
			/* The decoder stays failed. */
			CHECK(http_chunked_feed(&c, "0\r\n\r\n", 5, done) == -1);
			return -1;
		}
		total += n;
		if (*done) {
			CHECK(http_chunked_feed(&c, "0\r\n\r\n", 5, done) == 0);
			CHECK(*done == 1);
			return total;
		}
		CHECK_MSG((size_t)n == end - start, "piece not taken whole");
		start = end;
	}
	return total;
}

static void
test_chunked_table(void)
{
	size_t i, a, b, k, cuts[4096];
	ssize_t got;
	int done, want_done;
	unsigned seed = 1;

	for (i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const struct chunk_case *c = &chunk_cases[i];
		want_done = c->done;

		got = chunk_feed(c->raw, c->len, NULL, 0, &done);
		CHECK_MSG(got == c->body && (got < 0 || done == want_done),
		    "chunk %zu whole: %zd done %d", i, got, done);
		/* one byte at a time */
		for (k = 0; k < c->len && k < 4096; k++)
			cuts[k] = k + 1;
		got = chunk_feed(c->raw, c->len, cuts, k, &done);
		CHECK_MSG(got == c->body && (got < 0 || done == want_done),
		    "chunk %zu bytewise: %zd", i, got);
		/* every split in two and three pieces */
		for (a = 0; a <= c->len; a++) {
			cuts[0] = a;
			got = chunk_feed(c->raw, c->len, cuts, 1, &done);
			CHECK_MSG(got == c->body, "chunk %zu split %zu", i, a);
			for (b = a; b <= c->len; b += 3) {
				cuts[1] = b;
				got = chunk_feed(c->raw, c->len, cuts, 2, &done);
				CHECK_MSG(got == c->body,
				    "chunk %zu split %zu,%zu", i, a, b);
			}
		}
		/* random splits */
		for (a = 0; a < 50; a++) {
			size_t n = 0, pos = 0;

			while (pos < c->len && n < 4096) {
				seed = seed * 1103515245 + 12345;
				pos += 1 + (seed >> 16) % 7;
				cuts[n++] = pos;
			}
			got = chunk_feed(c->raw, c->len, cuts, n, &done);
			CHECK_MSG(got == c->body, "chunk %zu random", i);
		}
	}
}

static void
test_chunked_limits(void)
{
	static char buf[20000];
	struct http_chunked c;
	size_t n, i;
	int done;

	/* a size line of 8 KiB (CRLF excluded) passes, one byte more fails */
	for (i = 0; i < 2; i++) {
		n = (size_t)snprintf(buf, sizeof(buf), "1;");
		memset(buf + n, 'e', 8192 - 2 + i);
		n += 8192 - 2 + i;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
		    "\r\nx\r\n0\r\n\r\n");
		http_chunked_init(&c);
		CHECK_INT(http_chunked_feed(&c, buf, n, &done),
		    i == 0 ? (ssize_t)n : -1);
	}
	/* trailers up to 8 KiB in total pass, past it fail */
	for (i = 0; i < 2; i++) {
		size_t t;

		n = (size_t)snprintf(buf, sizeof(buf), "0\r\n");
		t = n;
		while (n - t + 12 <= 8192 - 2 - 12)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    "X-Tr: %04zu\r\n", n);
		/* pad the last trailer to land exactly on the limit (+i) */
		memcpy(buf + n, "Y: ", 3);
		memset(buf + n + 3, 'y', 8192 - (n - t) - 2 - 5 + i);
		n += 3 + 8192 - (n - t) - 2 - 5 + i;
		memcpy(buf + n, "\r\n\r\n", 4);
		n += 4;
		CHECK_INT(n - t, 8192 + i);
		http_chunked_init(&c);
		CHECK_INT(http_chunked_feed(&c, buf, n, &done),
		    i == 0 ? (ssize_t)n : -1);
		CHECK_INT(done, i == 0);
	}
	/* a chunk of 2^62 - 1 bytes is counted down across feeds */
	http_chunked_init(&c);
	CHECK_INT(http_chunked_feed(&c, "3fffffffffffffff\r\n", 18, &done), 18);
	memset(buf, 'd', sizeof(buf));
	for (i = 0; i < 100; i++)
		CHECK_INT(http_chunked_feed(&c, buf, sizeof(buf), &done),
		    sizeof(buf));
	CHECK_INT(c.remaining, 0x3fffffffffffffffULL - 100 * sizeof(buf));
	CHECK_INT(done, 0);
}

/* A head refused for its target: who sent it can still be read. */
static void
test_request_fields(void)
{
	static const char bad_host[] = "GET http://q\"y.test/ HTTP/1.1\r\n"
	    "Host: q\"y.test\r\nProxy-Authorization: Basic dGs6dA==\r\n\r\n";
	static const char bad_connect[] = "CONNECT q!z.test:443 HTTP/1.1\r\n"
	    "Proxy-Authorization: Basic dGs6dA==\r\n\r\n";
	static const char bad_field[] = "GET http://q\"y.test/ HTTP/1.1\r\n"
	    "Proxy-Authorization : Basic dGs6dA==\r\n\r\n";
	static const char bare_lf[] = "GET http://q\"y.test/ HTTP/1.1\n"
	    "Host: a\r\n\r\n";
	struct http_request r;

	CHECK(http_parse_request(bad_host, sizeof(bad_host) - 1, NULL, &r) < 0);
	CHECK_INT(http_parse_request_fields(bad_host, sizeof(bad_host) - 1,
	    NULL, &r), sizeof(bad_host) - 1);
	CHECK_INT(r.n_headers, 2);
	CHECK(r.n_headers == 2 && http_header_is(&r.headers[1],
	    "proxy-authorization"));
	CHECK(r.method.len == 3 && r.target.len == 16);
	CHECK(http_parse_request(bad_connect, sizeof(bad_connect) - 1, NULL,
	    &r) < 0);
	CHECK_INT(http_parse_request_fields(bad_connect,
	    sizeof(bad_connect) - 1, NULL, &r), sizeof(bad_connect) - 1);
	CHECK_INT(r.n_headers, 1);
	/* the field rules still hold */
	CHECK(http_parse_request_fields(bad_field, sizeof(bad_field) - 1,
	    NULL, &r) < 0);
	CHECK(http_parse_request_fields(bare_lf, sizeof(bare_lf) - 1, NULL,
	    &r) < 0);
	CHECK_INT(http_parse_request_fields(bad_host, 20, NULL, &r),
	    HTTP_NEED_MORE);
}

int
main(void)
{
	test_request_fields();
	test_request_table();
	test_request_limits();
	test_request_header_count();
	test_request_slices();
	test_response_table();
	test_response_limits();
	test_sniff();
	test_hop_by_hop();
	test_chunked_table();
	test_chunked_limits();
	return check_summary();
}
