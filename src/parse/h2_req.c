/*
 * HTTP/2 request header fields translated to a struct http_request
 * (h2_req.h). Everything nghttp2 already checks is checked again here, so
 * that what reaches the decision never depends on a library's leniency.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "parse/h2_req.h"

void
h2_req_init(struct h2_req *r, char *fields, char *cookie, size_t cap,
    size_t limit)
{
	memset(r, 0, sizeof(*r));
	r->fields = fields;
	r->cookie = cookie;
	r->fields_cap = r->cookie_cap = cap;
	r->limit = limit;
}

static int
is_tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A lower-case token (RFC 9113 §8.2.1: upper case is malformed). */
static int
name_ok(const uint8_t *n, size_t len)
{
	size_t i;

	if (len == 0)
		return 0;
	for (i = 0; i < len; i++)
		if (!is_tchar(n[i]))
			return 0;
	return 1;
}

/* No NUL, CR, LF (§8.2.1); for values that go into a request line, no space or control at all. */
static int
value_ok(const uint8_t *v, size_t len, int strict)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (v[i] == 0 || v[i] == '\r' || v[i] == '\n' || v[i] == 0x7f)
			return 0;
		if (v[i] < 0x20 && v[i] != '\t')
			return 0;
		if (strict && (v[i] <= 0x20 || v[i] >= 0x7f))
			return 0;
	}
	return 1;
}

static int
is(const uint8_t *n, size_t len, const char *name)
{
	return strlen(name) == len && memcmp(n, name, len) == 0;
}

static int
set_pseudo(char *dst, size_t cap, int *has, const uint8_t *v, size_t len)
{
	if (*has || len == 0 || len >= cap || !value_ok(v, len, 1))
		return -1;
	memcpy(dst, v, len);
	dst[len] = '\0';
	*has = 1;
	return 0;
}

static void
fail(struct h2_req *r, enum h2_req_err e)
{
	if (r->err == H2_REQ_OK)
		r->err = e;
}

static void
add_pseudo(struct h2_req *r, const uint8_t *n, size_t nl, const uint8_t *v,
    size_t vl)
{
	int bad;

	if (r->regular_seen) {
		fail(r, H2_REQ_ERR_MALFORMED);
		return;
	}
	if (is(n, nl, ":method"))
		bad = set_pseudo(r->method, sizeof(r->method), &r->has_method, v, vl);
	else if (is(n, nl, ":scheme"))
		bad = set_pseudo(r->scheme, sizeof(r->scheme), &r->has_scheme, v, vl);
	else if (is(n, nl, ":authority"))
		bad = set_pseudo(r->authority, sizeof(r->authority),
		    &r->has_authority, v, vl);
	else if (is(n, nl, ":path"))
		bad = set_pseudo(r->path, sizeof(r->path), &r->has_path, v, vl);
	else if (is(n, nl, ":protocol")) {
		fail(r, H2_REQ_ERR_CONNECT);	/* RFC 8441: not offered */
		return;
	} else
		bad = -1;
	if (bad)
		fail(r, H2_REQ_ERR_MALFORMED);
}

/* Connection-specific fields are malformed in HTTP/2 (§8.2.2). */
static int
connection_specific(const uint8_t *n, size_t nl, const uint8_t *v, size_t vl)
{
	if (is(n, nl, "connection") || is(n, nl, "keep-alive") ||
	    is(n, nl, "proxy-connection") || is(n, nl, "transfer-encoding") ||
	    is(n, nl, "upgrade") || is(n, nl, "http2-settings"))
		return 1;
	return is(n, nl, "te") && !(vl == 8 && strncasecmp((const char *)v,
	    "trailers", 8) == 0);
}

static int
append(char *buf, size_t cap, size_t *len, const void *p, size_t n)
{
	if (n > cap - *len)
		return -1;
	memcpy(buf + *len, p, n);
	*len += n;
	return 0;
}

void
h2_req_add(struct h2_req *r, const uint8_t *n, size_t nl, const uint8_t *v,
    size_t vl)
{
	size_t f;

	if (r->err != H2_REQ_OK)
		return;
	/* RFC 9113 §6.5.2: name + value + 32 per field. */
	r->used += nl + vl + 32;
	if (r->used > r->limit) {
		fail(r, H2_REQ_ERR_TOO_LARGE);
		return;
	}
	if (nl > 0 && n[0] == ':') {
		add_pseudo(r, n, nl, v, vl);
		return;
	}
	r->regular_seen = 1;
	if (!name_ok(n, nl) || !value_ok(v, vl, 0) ||
	    connection_specific(n, nl, v, vl)) {
		fail(r, H2_REQ_ERR_MALFORMED);
		return;
	}
	if (is(n, nl, "te"))
		return;			/* "trailers": hop-by-hop in HTTP/1.1 */
	if (is(n, nl, "host")) {
		if (set_pseudo(r->host, sizeof(r->host), &r->has_host, v, vl))
			fail(r, H2_REQ_ERR_MALFORMED);
		return;
	}
	if (is(n, nl, "cookie")) {
		/* §8.2.3: crumbs are joined with "; " for HTTP/1.1. */
		if ((r->cookie_len > 0 && append(r->cookie, r->cookie_cap,
		    &r->cookie_len, "; ", 2)) ||
		    append(r->cookie, r->cookie_cap, &r->cookie_len, v, vl))
			fail(r, H2_REQ_ERR_TOO_LARGE);
		return;
	}
	if (is(n, nl, "content-length"))
		r->has_length = 1;
	if (is(n, nl, "content-type") && vl >= 16 &&
	    strncasecmp((const char *)v, "application/grpc", 16) == 0)
		r->grpc = 1;
	f = r->fields_len;
	if (append(r->fields, r->fields_cap, &f, n, nl) ||
	    append(r->fields, r->fields_cap, &f, "", 1) ||
	    append(r->fields, r->fields_cap, &f, v, vl) ||
	    append(r->fields, r->fields_cap, &f, "", 1)) {
		fail(r, H2_REQ_ERR_TOO_LARGE);
		return;
	}
	r->fields_len = f;
	r->n_fields++;
}

static enum h2_req_err
check_pseudo(const struct h2_req *r)
{
	if (!r->has_method)
		return H2_REQ_ERR_MALFORMED;
	if (strcmp(r->method, "CONNECT") == 0)
		return H2_REQ_ERR_CONNECT;
	if (!r->has_scheme || !r->has_path)
		return H2_REQ_ERR_MALFORMED;
	if (r->path[0] != '/' && !(strcmp(r->path, "*") == 0 &&
	    strcmp(r->method, "OPTIONS") == 0))
		return H2_REQ_ERR_MALFORMED;
	if (!r->has_authority && !r->has_host)
		return H2_REQ_ERR_MALFORMED;
	/* Two names for one request: which one an origin reads is not ours to guess. */
	if (r->has_authority && r->has_host &&
	    strcasecmp(r->authority, r->host) != 0)
		return H2_REQ_ERR_HOST;
	return H2_REQ_OK;
}

static void
slice_set(struct http_slice *sl, const char *p, size_t len)
{
	sl->p = p;
	sl->len = len;
}

/* An HTTP/1.1 field value has no outer spaces (RFC 9110 §5.5). */
static void
value_set(struct http_slice *sl, const char *p, size_t len)
{
	while (len > 0 && (p[0] == ' ' || p[0] == '\t')) {
		p++;
		len--;
	}
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	slice_set(sl, p, len);
}

int
h2_req_request(struct h2_req *r, int end_stream, struct http_request *out)
{
	const char *p = r->fields, *end = r->fields + r->fields_len, *v;
	struct http_header *h;
	size_t k;

	memset(out, 0, sizeof(*out));
	if (r->err == H2_REQ_OK)
		r->err = check_pseudo(r);
	if (r->err != H2_REQ_OK)
		return -1;
	/* Host first, the fields, the cookie: at most HTTP_MAX_HEADERS. */
	if (r->n_fields + 1 + (r->cookie_len > 0) > HTTP_MAX_HEADERS) {
		r->err = H2_REQ_ERR_TOO_LARGE;
		return -1;
	}
	slice_set(&out->method, r->method, strlen(r->method));
	slice_set(&out->target, r->path, strlen(r->path));
	out->version_minor = 1;
	h = &out->headers[0];
	slice_set(&h->name, "Host", 4);
	v = r->has_authority ? r->authority : r->host;
	value_set(&h->value, v, strlen(v));
	for (k = 1; p < end; k++) {
		h = &out->headers[k];
		slice_set(&h->name, p, strlen(p));
		p += h->name.len + 1;
		value_set(&h->value, p, strlen(p));
		p += strlen(p) + 1;
	}
	if (r->cookie_len > 0) {
		h = &out->headers[k++];
		slice_set(&h->name, "Cookie", 6);
		value_set(&h->value, r->cookie, r->cookie_len);
	}
	out->n_headers = k;
	if (http_request_check(out) != 0) {
		r->err = H2_REQ_ERR_MALFORMED;
		return -1;
	}
	/* What an HTTP/2 stream's framing is for the HTTP/1.1 exchange. */
	r->chunked = !end_stream && !r->has_length;
	if (r->chunked)
		out->framing = HTTP_BODY_CHUNKED;
	out->keep_alive = 1;
	return 0;
}

int
h2_req_trailer(const uint8_t *n, size_t nl, const uint8_t *v, size_t vl,
    char *out, size_t cap, size_t *len)
{
	size_t l = *len;

	/* No pseudo-header, and nothing that frames or routes a message. */
	if (!name_ok(n, nl) || !value_ok(v, vl, 0) ||
	    connection_specific(n, nl, v, vl) || is(n, nl, "te") ||
	    is(n, nl, "host") || is(n, nl, "content-length"))
		return -1;
	if (append(out, cap, &l, n, nl) || append(out, cap, &l, ": ", 2) ||
	    append(out, cap, &l, v, vl) || append(out, cap, &l, "\r\n", 2))
		return -1;
	*len = l;
	return 0;
}
