/*
 * HTTP/2 request header fields -> a struct http_request (RFC 9113 §8.3,
 * RFC 9110 §7.2), with no HTTP/1.1 text in between. Pure: the caller owns
 * the memory, nothing is allocated or logged. The request is checked by
 * http_request_check, the same checks a parsed HTTP/1.1 head passes, so an
 * HTTP/2 stream is decided by exactly the code an HTTP/1.1 request is.
 */
#ifndef SG_H2_REQ_H
#define SG_H2_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "parse/http_parse.h"

#define H2_REQ_METHOD_MAX	23
#define H2_REQ_AUTH_MAX		300
#define H2_REQ_PATH_MAX		8192

/* Why a stream's request cannot be translated (0: it can). */
enum h2_req_err {
	H2_REQ_OK = 0,
	H2_REQ_ERR_MALFORMED,	/* 400: a field no HTTP/2 request may carry */
	H2_REQ_ERR_TOO_LARGE,	/* 431: the header list is over its limit */
	H2_REQ_ERR_CONNECT,	/* 400/405: CONNECT, extended CONNECT (RFC 8441) */
	H2_REQ_ERR_HOST		/* 403 host-mismatch: Host and :authority differ */
};

struct h2_req {
	size_t		 limit;		/* header list bytes (RFC 9113 §6.5.2 count) */
	size_t		 used;
	enum h2_req_err	 err;		/* the first error; fields after it are ignored */
	int		 regular_seen;	/* pseudo-header fields come first */
	char		 method[H2_REQ_METHOD_MAX + 1];
	char		 scheme[16];
	char		 authority[H2_REQ_AUTH_MAX + 1];
	char		 host[H2_REQ_AUTH_MAX + 1];	/* a host field, if sent */
	char		 path[H2_REQ_PATH_MAX + 1];
	int		 has_method, has_scheme, has_authority, has_host, has_path;
	int		 has_length;	/* content-length sent */
	int		 grpc;		/* content-type application/grpc... */
	int		 chunked;	/* set by h2_req_request: body chunk-encoded */
	char		*fields;	/* "name\0value\0"..., caller's memory */
	size_t		 fields_cap, fields_len, n_fields;
	char		*cookie;	/* cookie crumbs joined by "; " */
	size_t		 cookie_cap, cookie_len;
};

/* fields and cookie are two buffers of cap bytes each; limit as above. */
void	h2_req_init(struct h2_req *, char *fields, char *cookie, size_t cap,
	    size_t limit);
/* One decoded field of the request's header block. Records the first error. */
void	h2_req_add(struct h2_req *, const uint8_t *name, size_t namelen,
	    const uint8_t *value, size_t valuelen);
/*
 * The request, as HTTP/1.1 semantics have it: method, target and path from
 * the pseudo-fields, a Host header first (from :authority, else host), the
 * fields in order with their values' outer spaces cut, the cookie crumbs
 * as one Cookie header; framing none when end_stream, else Content-Length
 * as sent, else chunked (req->chunked: the body reaches the stream's
 * exchange chunk-encoded); version 1.1, kept alive. out's slices point
 * into req, which must outlive it. 0, or -1 (req->err set).
 */
int	h2_req_request(struct h2_req *, int end_stream, struct http_request *out);
/*
 * A trailer field "name: value\r\n" into out[0..cap): 0 written (*len
 * grows), -1 a field no trailer may carry or no room.
 */
int	h2_req_trailer(const uint8_t *name, size_t namelen, const uint8_t *value,
	    size_t valuelen, char *out, size_t cap, size_t *len);

#endif
