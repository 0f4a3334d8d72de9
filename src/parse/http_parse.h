/*
 * Pure HTTP/1.x head and chunked-body parsers: functions over bytes, no I/O,
 * no heap. Strict framing lives here and only here, so that what the gateway
 * forwards is exactly what it understood (no request smuggling in the gaps).
 */
#ifndef SG_HTTP_PARSE_H
#define SG_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_MAX_HEADERS	128

/* Return values of the head parsers (a positive value is the head's length). */
#define HTTP_NEED_MORE		0
#define HTTP_ERR_BAD		(-1)	/* 400 */
#define HTTP_ERR_URI_TOO_LONG	(-2)	/* 414: request line longer than max_line */
#define HTTP_ERR_HEAD_TOO_LARGE	(-3)	/* 431: head longer than max_head, or too many headers */
#define HTTP_ERR_VERSION	(-4)	/* 505 */

struct http_slice {
	const char	*p;	/* points into the parsed buffer; not terminated */
	size_t		 len;
};

struct http_header {
	struct http_slice name;
	struct http_slice value;	/* leading/trailing OWS removed */
};

enum http_framing {
	HTTP_BODY_NONE,
	HTTP_BODY_LENGTH,
	HTTP_BODY_CHUNKED,
	HTTP_BODY_UNTIL_CLOSE		/* responses only */
};

enum http_target_form {
	HTTP_TARGET_ORIGIN,		/* /path?q */
	HTTP_TARGET_ABSOLUTE,		/* http://host[:port]/path?q */
	HTTP_TARGET_AUTHORITY,		/* host:port (CONNECT only) */
	HTTP_TARGET_ASTERISK		/* * (OPTIONS only) */
};

struct http_limits {
	size_t	max_line;		/* request/status line, CRLF excluded (414 beyond) */
	size_t	max_head;		/* whole head, final CRLF CRLF included (431 beyond) */
};

struct http_request {
	struct http_slice method;
	struct http_slice target;	/* as sent */
	int		 version_minor;	/* HTTP/1.0 or HTTP/1.1 */
	enum http_target_form form;
	/* absolute and authority forms, split: */
	struct http_slice scheme;	/* "http", lower-cased by the caller if needed */
	struct http_slice host;		/* without brackets for IPv6 */
	uint16_t	 port;		/* explicit, or 80 for http:, 443 for https: */
	int		 has_port;
	struct http_slice path;		/* origin and absolute forms: from '/' (or "*"), query included; "/" when empty */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t		 n_headers;
	struct http_slice host_header;	/* the Host header's value */
	int		 has_host;
	enum http_framing framing;	/* NONE, LENGTH or CHUNKED */
	uint64_t	 content_length;
	int		 keep_alive;	/* from version and Connection */
	int		 upgrade;	/* Connection: upgrade and an Upgrade header */
	int		 expect_continue;
};

struct http_response {
	int		 status;
	int		 version_minor;
	struct http_slice reason;
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t		 n_headers;
	enum http_framing framing;
	uint64_t	 content_length;
	int		 keep_alive;
	int		 te_other;	/* a transfer coding other than chunked */
	int		 has_length;	/* a Content-Length header ... */
	uint64_t	 declared_length;	/* ... with this value (HEAD, 304: metadata) */
};

/*
 * Parse a request head at buf[0..len). Returns the head's length (through
 * the empty line) when complete, HTTP_NEED_MORE, or an HTTP_ERR_*. Rejected:
 * bare CR or LF, NUL and other control bytes, obs-fold, whitespace before a
 * colon, invalid tokens, Content-Length with Transfer-Encoding, duplicate or
 * invalid Content-Length, a Transfer-Encoding other than a final "chunked",
 * duplicate Host, HTTP/1.1 without Host, and any version but 1.0 and 1.1.
 */
int	http_parse_request(const char *buf, size_t len,
	    const struct http_limits *, struct http_request *out);
/*
 * A head http_parse_request refused for its target (a host no name has):
 * the request line only cut in method, target and version, and the header
 * fields parsed with the same rules but none of the checks between fields
 * (Host, framing) -- to learn who sent it (Proxy-Authorization), never to
 * forward it. The head's length, HTTP_NEED_MORE or an HTTP_ERR_*.
 */
int	http_parse_request_fields(const char *buf, size_t len,
	    const struct http_limits *, struct http_request *out);
/*
 * A request whose method, target, version and headers were set from
 * another protocol's fields (an HTTP/2 stream: parse/h2_req.h): the checks
 * http_parse_request applies once a head is split -- the method a token,
 * the target's form, Host, Content-Length, Transfer-Encoding and the
 * Connection flags -- and what they set (form, path, framing, keep-alive).
 * 0, or HTTP_ERR_BAD.
 */
int	http_request_check(struct http_request *r);
/*
 * Parse a response head. req_method is the request's method (HEAD and
 * CONNECT responses have no body), so is the status (1xx, 204, 304).
 */
int	http_parse_response(const char *buf, size_t len,
	    const struct http_limits *, const char *req_method, size_t req_method_len,
	    struct http_response *out);

/*
 * First bytes of a tunnel: 1 when buf starts like an HTTP request line
 * (a known method token and a space), 0 when it cannot be one, -1 when
 * more bytes are needed to tell.
 */
int	http_sniff_request(const char *buf, size_t len);

/*
 * The one host:port splitter: authority = host [":" port], host a
 * reg-name, IPv4 or [IPv6] (host without the brackets), no userinfo, no
 * percent-encoding, a port 1-65535 when present. 0, or -1; *port is set
 * only when *has_port.
 */
int	http_split_authority(const char *a, size_t n, struct http_slice *host,
	    uint16_t *port, int *has_port);

/* Case-insensitive header-name test. */
int	http_header_is(const struct http_header *, const char *name);
/* Find the first header of that name, NULL when absent. */
const struct http_header *http_header_find(const struct http_header *, size_t n,
	    const char *name);
/*
 * Hop-by-hop: the fixed RFC 9110 list (Connection, Keep-Alive,
 * Proxy-Connection, Proxy-Authorization, Proxy-Authenticate, TE, Trailer,
 * Transfer-Encoding, Upgrade) or a name listed in a Connection header of
 * headers[0..n) -- except Content-Length and Host, which no Connection
 * header can nominate.
 */
int	http_header_is_hop_by_hop(const struct http_header *h,
	    const struct http_header *headers, size_t n);
/*
 * 1 when a proxy copies h to the next hop as it is: not hop-by-hop and not
 * framing (Content-Length, Transfer-Encoding), which the gateway writes
 * from its own parse (http_write_framing).
 */
int	http_header_forwardable(const struct http_header *h,
	    const struct http_header *headers, size_t n);
/*
 * 1 when no Content-Encoding header of hv[0..n) names a coding other than
 * identity (every header, every list element); 0 otherwise.
 */
int	http_identity_encoded(const struct http_header *hv, size_t n);
/*
 * The framing header for a message the gateway relays with framing fr:
 * "Content-Length: len\r\n", "Transfer-Encoding: chunked\r\n", or ""
 * (none, until close). Its length, or -1 when buf is too small.
 */
int	http_framing_header(enum http_framing fr, uint64_t len, char *buf,
	    size_t n);

/* Chunked body decoder state: it validates and measures, the caller relays the bytes unchanged. */
struct http_chunked {
	int		 state;
	uint64_t	 remaining;	/* bytes left in the current chunk */
	size_t		 line_len;	/* bytes of the current size/trailer line */
	size_t		 trailer_len;	/* total trailer bytes */
	int		 digits;
};

void	http_chunked_init(struct http_chunked *);
/*
 * Feed body bytes. Returns how many of buf[0..len) belong to the body (all
 * of them unless the body ends inside buf), sets *done to 1 once the final
 * CRLF after the last chunk and trailers was consumed, and returns -1 on
 * bad framing (bad hex, bare LF, chunk-size overflow, lines or trailers
 * over 8 KiB).
 */
ssize_t	http_chunked_feed(struct http_chunked *, const char *buf, size_t len,
	    int *done);
/*
 * The same, and data(span, len, arg) is called for every run of chunk data
 * (framing, extensions and trailers are not data): a decoder for callers
 * that must see the payload (the credential scrubber).
 */
ssize_t	http_chunked_decode(struct http_chunked *, const char *buf, size_t len,
	    int *done, void (*data)(const char *, size_t, void *), void *arg);
/*
 * The same, and ext(span, len, arg) is called for the bytes of the chunk
 * extensions (what follows the ";" of a chunk-size line, up to its CR), in
 * spans, then ext(NULL, 0, arg) when that line's CR comes: what the
 * gateway relays but the payload does not hold (the secret scanner, the
 * placeholder check).
 */
ssize_t	http_chunked_decode_ext(struct http_chunked *, const char *buf,
	    size_t len, int *done, void (*data)(const char *, size_t, void *),
	    void (*ext)(const char *, size_t, void *), void *arg);

#endif
