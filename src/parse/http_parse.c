/*
 * Strict HTTP/1.x head and chunked-body parsers (RFC 9112): pure functions
 * over bytes. Every framing decision of the gateway is made here, once.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "parse/http_parse.h"

#define HTTP_DEFAULT_MAX_LINE	8192
#define HTTP_DEFAULT_MAX_HEAD	65536
/* Chunk-size line with its extensions (CRLF excluded), and all trailers. */
#define HTTP_CHUNK_LINE_MAX	8192
#define HTTP_TRAILER_MAX	8192
#define HTTP_HOST_MAX		255

static const char http_slash[] = "/";

static int
http_is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP or HTAB: everything but CTLs (obs-text allowed). */
static int
http_is_fchar(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
http_is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int
http_slice_eq(const char *p, size_t n, const char *s)
{
	return strlen(s) == n && (n == 0 || memcmp(p, s, n) == 0);
}

/* ASCII case-insensitive, whatever the locale. */
static int
http_mem_caseeq(const char *a, const char *b, size_t n)
{
	unsigned char x, y;
	size_t i;

	for (i = 0; i < n; i++) {
		x = (unsigned char)a[i];
		y = (unsigned char)b[i];
		if (x >= 'A' && x <= 'Z')
			x += 'a' - 'A';
		if (y >= 'A' && y <= 'Z')
			y += 'a' - 'A';
		if (x != y)
			return 0;
	}
	return 1;
}

static int
http_slice_caseeq(const char *p, size_t n, const char *s)
{
	return strlen(s) == n && http_mem_caseeq(p, s, n);
}

static void
http_limits_get(const struct http_limits *lim, size_t *max_line,
    size_t *max_head)
{
	*max_line = lim != NULL ? lim->max_line : HTTP_DEFAULT_MAX_LINE;
	*max_head = lim != NULL ? lim->max_head : HTTP_DEFAULT_MAX_HEAD;
	/* The head's length is returned as an int. */
	if (*max_head > INT32_MAX)
		*max_head = INT32_MAX;
}

/*
 * Find the CRLF ending the line that starts at off. Errors are decided by
 * position, left to right, so a prefix of a message never gets a different
 * error than the whole message. Returns 1 and *cr, or NEED_MORE, or an error.
 */
static int
http_scan_line(const char *buf, size_t len, size_t off, size_t max_head,
    size_t line_max, int line_err, size_t *cr)
{
	size_t i;

	for (i = off;; i++) {
		if (i >= max_head)
			return HTTP_ERR_HEAD_TOO_LARGE;
		if (i >= len)
			return HTTP_NEED_MORE;
		if (buf[i] == '\n')
			return HTTP_ERR_BAD;		/* bare LF */
		if (buf[i] == '\r') {
			if (i + 1 >= max_head)
				return HTTP_ERR_HEAD_TOO_LARGE;
			if (i + 1 >= len)
				return HTTP_NEED_MORE;
			if (buf[i + 1] != '\n')
				return HTTP_ERR_BAD;	/* bare CR */
			*cr = i;
			return 1;
		}
		if (i - off >= line_max)
			return line_err;
	}
}

/* "HTTP/1.0" and "HTTP/1.1" pass; other HTTP/D[.D] versions are 505. */
static int
http_version(const char *v, size_t n, int *minor)
{
	size_t i = 5, d;

	if (n < 5 || memcmp(v, "HTTP/", 5) != 0)
		return HTTP_ERR_BAD;
	if (n == 8 && v[5] == '1' && v[6] == '.' && (v[7] == '0' ||
	    v[7] == '1')) {
		*minor = v[7] - '0';
		return 0;
	}
	for (d = 0; i < n && http_is_digit(v[i]); i++)
		d++;
	if (d == 0)
		return HTTP_ERR_BAD;
	if (i == n)
		return HTTP_ERR_VERSION;
	if (v[i++] != '.')
		return HTTP_ERR_BAD;
	for (d = 0; i < n && http_is_digit(v[i]); i++)
		d++;
	if (d == 0 || i != n)
		return HTTP_ERR_BAD;
	return HTTP_ERR_VERSION;
}

static int
http_host_chars(const char *p, size_t n, int v6)
{
	size_t i;
	unsigned char c;

	if (n == 0 || n > HTTP_HOST_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		c = p[i];
		if (v6) {
			if (!(http_is_digit(c) || (c >= 'a' && c <= 'f') ||
			    (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
				return -1;
		} else if (!(http_is_digit(c) || (c >= 'a' && c <= 'z') ||
		    (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
		    c == '_' || c == '~'))
			return -1;
	}
	if (v6 && memchr(p, ':', n) == NULL)
		return -1;
	return 0;
}

/*
 * authority = host [":" port], host a reg-name, IPv4 or [IPv6]. No userinfo,
 * no percent-encoding, no zone id; a port is 1-65535 when present.
 */
static int
http_authority(const char *a, size_t n, int port_required,
    struct http_slice *host, uint16_t *port, int *has_port)
{
	const char *rest, *end = a + n, *rb;
	unsigned long v = 0;
	size_t digits = 0;

	*has_port = 0;
	if (n == 0 || memchr(a, '@', n) != NULL)
		return HTTP_ERR_BAD;
	if (a[0] == '[') {
		if ((rb = memchr(a, ']', n)) == NULL)
			return HTTP_ERR_BAD;
		host->p = a + 1;
		host->len = (size_t)(rb - a - 1);
		if (http_host_chars(host->p, host->len, 1) == -1)
			return HTTP_ERR_BAD;
		rest = rb + 1;
	} else {
		for (rest = a; rest < end && *rest != ':'; rest++)
			;
		host->p = a;
		host->len = (size_t)(rest - a);
		if (http_host_chars(host->p, host->len, 0) == -1)
			return HTTP_ERR_BAD;
	}
	if (rest == end)
		return port_required ? HTTP_ERR_BAD : 0;
	if (*rest++ != ':')
		return HTTP_ERR_BAD;
	for (; rest < end; rest++) {
		if (!http_is_digit(*rest) || ++digits > 5)
			return HTTP_ERR_BAD;
		v = v * 10 + (unsigned long)(*rest - '0');
	}
	if (digits == 0 || v == 0 || v > 65535)
		return HTTP_ERR_BAD;
	*port = (uint16_t)v;
	*has_port = 1;
	return 0;
}

int
http_split_authority(const char *a, size_t n, struct http_slice *host,
    uint16_t *port, int *has_port)
{
	return http_authority(a, n, 0, host, port, has_port) == 0 ? 0 : -1;
}

/* http://host[:port][/path[?query]] or https://...; no "?" without a path. */
static int
http_absolute(struct http_request *r)
{
	const char *t = r->target.p, *end = t + r->target.len, *a, *ae;
	int https, rc;

	for (a = t; a < end && *a != ':'; a++)
		;
	if (http_slice_caseeq(t, (size_t)(a - t), "http"))
		https = 0;
	else if (http_slice_caseeq(t, (size_t)(a - t), "https"))
		https = 1;
	else
		return HTTP_ERR_BAD;
	r->scheme.p = t;
	r->scheme.len = (size_t)(a - t);
	if (end - a < 3 || memcmp(a, "://", 3) != 0)
		return HTTP_ERR_BAD;
	a += 3;
	for (ae = a; ae < end && *ae != '/' && *ae != '?'; ae++)
		;
	if (ae < end && *ae == '?')
		return HTTP_ERR_BAD;
	rc = http_authority(a, (size_t)(ae - a), 0, &r->host, &r->port,
	    &r->has_port);
	if (rc != 0)
		return rc;
	if (!r->has_port)
		r->port = https ? 443 : 80;
	if (ae == end) {
		r->path.p = http_slash;
		r->path.len = 1;
	} else {
		r->path.p = ae;
		r->path.len = (size_t)(end - ae);
	}
	r->form = HTTP_TARGET_ABSOLUTE;
	return 0;
}

static int
http_request_target(struct http_request *r)
{
	const char *t = r->target.p;
	size_t n = r->target.len;

	if (memchr(t, '#', n) != NULL)
		return HTTP_ERR_BAD;
	if (http_slice_eq(r->method.p, r->method.len, "CONNECT")) {
		r->form = HTTP_TARGET_AUTHORITY;
		return http_authority(t, n, 1, &r->host, &r->port,
		    &r->has_port);
	}
	if (n == 1 && t[0] == '*') {
		if (!http_slice_eq(r->method.p, r->method.len, "OPTIONS"))
			return HTTP_ERR_BAD;
		r->form = HTTP_TARGET_ASTERISK;
		r->path = r->target;
		return 0;
	}
	if (t[0] == '/') {
		r->form = HTTP_TARGET_ORIGIN;
		r->path = r->target;
		return 0;
	}
	return http_absolute(r);
}

/* method SP request-target SP HTTP-version, the CRLF already cut off. */
static int
http_request_line(const char *p, size_t n, struct http_request *r, int split)
{
	const char *end = p + n, *q, *t;
	int rc;

	for (q = p; q < end && http_is_tchar(*q); q++)
		;
	if (q == p || q == end || *q != ' ')
		return HTTP_ERR_BAD;
	r->method.p = p;
	r->method.len = (size_t)(q - p);
	for (t = ++q; q < end && *q > 0x20 && *q < 0x7f; q++)
		;
	if (q == t || q == end || *q != ' ')
		return HTTP_ERR_BAD;
	r->target.p = t;
	r->target.len = (size_t)(q - t);
	q++;
	if ((rc = http_version(q, (size_t)(end - q), &r->version_minor)) != 0)
		return rc;
	return split ? 0 : http_request_target(r);
}

/* field-name ":" OWS field-value OWS; no obs-fold, no CTL but HTAB. */
static int
http_field(const char *p, size_t n, struct http_header *h)
{
	size_t i, vs, ve;

	for (i = 0; i < n && http_is_tchar(p[i]); i++)
		;
	if (i == 0 || i == n || p[i] != ':')
		return HTTP_ERR_BAD;
	h->name.p = p;
	h->name.len = i;
	for (vs = i + 1; vs < n; vs++)
		if (!http_is_fchar(p[vs]))
			return HTTP_ERR_BAD;
	for (vs = i + 1; vs < n && (p[vs] == ' ' || p[vs] == '\t'); vs++)
		;
	for (ve = n; ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'); ve--)
		;
	h->value.p = p + vs;
	h->value.len = ve - vs;
	return 0;
}

/* Header lines from off to the empty line; *end is the head's length. */
static int
http_fields(const char *buf, size_t len, size_t off, size_t max_head,
    struct http_header *hv, size_t *nh, size_t *end)
{
	size_t cr;
	int rc;

	for (;;) {
		rc = http_scan_line(buf, len, off, max_head, SIZE_MAX,
		    HTTP_ERR_HEAD_TOO_LARGE, &cr);
		if (rc != 1)
			return rc;
		if (cr == off) {
			*end = cr + 2;
			return 1;
		}
		if (*nh == HTTP_MAX_HEADERS)
			return HTTP_ERR_HEAD_TOO_LARGE;
		if ((rc = http_field(buf + off, cr - off, &hv[*nh])) != 0)
			return rc;
		(*nh)++;
		off = cr + 2;
	}
}

/* Content-Length = 1*DIGIT, at most 2^63 - 1. */
static int
http_content_length(const struct http_slice *v, uint64_t *out)
{
	uint64_t n = 0;
	size_t i;

	if (v->len == 0)
		return -1;
	for (i = 0; i < v->len; i++) {
		if (!http_is_digit(v->p[i]))
			return -1;
		if (n > (uint64_t)(INT64_MAX - (v->p[i] - '0')) / 10)
			return -1;
		n = n * 10 + (uint64_t)(v->p[i] - '0');
	}
	*out = n;
	return 0;
}

/*
 * Walks a comma-separated list: the next element with OWS trimmed (maybe
 * empty) and 1, or 0 at the end. *pos starts at 0.
 */
static int
http_list_next(const struct http_slice *v, size_t *pos, struct http_slice *el)
{
	size_t s = *pos, e, b;

	if (s > v->len)
		return 0;
	for (e = s; e < v->len && v->p[e] != ','; e++)
		;
	*pos = e + 1;
	while (s < e && (v->p[s] == ' ' || v->p[s] == '\t'))
		s++;
	for (b = e; b > s && (v->p[b - 1] == ' ' || v->p[b - 1] == '\t'); b--)
		;
	el->p = v->p + s;
	el->len = b - s;
	return 1;
}

#define HTTP_CONN_CLOSE		0x1
#define HTTP_CONN_KEEPALIVE	0x2
#define HTTP_CONN_UPGRADE	0x4

static int
http_connection_flags(const struct http_slice *v)
{
	struct http_slice el;
	size_t pos = 0;
	int f = 0;

	while (http_list_next(v, &pos, &el)) {
		if (http_slice_caseeq(el.p, el.len, "close"))
			f |= HTTP_CONN_CLOSE;
		else if (http_slice_caseeq(el.p, el.len, "keep-alive"))
			f |= HTTP_CONN_KEEPALIVE;
		else if (http_slice_caseeq(el.p, el.len, "upgrade"))
			f |= HTTP_CONN_UPGRADE;
	}
	return f;
}

static int
http_keep_alive(int version_minor, int conn)
{
	if (conn & HTTP_CONN_CLOSE)
		return 0;
	return version_minor == 1 || (conn & HTTP_CONN_KEEPALIVE) != 0;
}

/* Headers that decide framing and routing, shared by both directions. */
struct http_fields_info {
	int			 n_cl;
	uint64_t		 cl;
	int			 n_te;
	const struct http_header *te;
	int			 conn;
	int			 has_upgrade;
	int			 expect_continue;
	int			 n_host;
	const struct http_header *host;
};

static int
http_fields_info(const struct http_header *hv, size_t n,
    struct http_fields_info *fi)
{
	const struct http_header *h;
	size_t i;

	memset(fi, 0, sizeof(*fi));
	for (i = 0; i < n; i++) {
		h = &hv[i];
		if (http_header_is(h, "Content-Length")) {
			if (fi->n_cl++ > 0 ||
			    http_content_length(&h->value, &fi->cl) == -1)
				return HTTP_ERR_BAD;
		} else if (http_header_is(h, "Transfer-Encoding")) {
			if (fi->n_te++ == 0)
				fi->te = h;
		} else if (http_header_is(h, "Host")) {
			if (fi->n_host++ == 0)
				fi->host = h;
		} else if (http_header_is(h, "Connection"))
			fi->conn |= http_connection_flags(&h->value);
		else if (http_header_is(h, "Upgrade"))
			fi->has_upgrade = 1;
		else if (http_header_is(h, "Expect") &&
		    http_slice_caseeq(h->value.p, h->value.len, "100-continue"))
			fi->expect_continue = 1;
	}
	if (fi->n_te > 0 && fi->n_cl > 0)
		return HTTP_ERR_BAD;
	return 0;
}

static int
http_request_fields(struct http_request *r)
{
	struct http_fields_info fi;
	struct http_slice host;
	uint16_t port;
	int rc, has_port;

	if ((rc = http_fields_info(r->headers, r->n_headers, &fi)) != 0)
		return rc;
	if (fi.n_host > 1)
		return HTTP_ERR_BAD;
	if (fi.n_host == 1) {
		/* Empty: what a client sends for a target without authority. */
		if (fi.host->value.len > 0 && http_authority(fi.host->value.p,
		    fi.host->value.len, 0, &host, &port, &has_port) != 0)
			return HTTP_ERR_BAD;
		r->host_header = fi.host->value;
		r->has_host = 1;
	} else if (r->version_minor == 1)
		return HTTP_ERR_BAD;
	if (fi.n_te > 0) {
		/*
		 * Only a lone "chunked" is unambiguous; HTTP/1.0 has no
		 * Transfer-Encoding at all (RFC 9112 6.1: faulty framing).
		 */
		if (fi.n_te > 1 || r->version_minor == 0 ||
		    !http_slice_caseeq(fi.te->value.p, fi.te->value.len,
		    "chunked"))
			return HTTP_ERR_BAD;
		r->framing = HTTP_BODY_CHUNKED;
	} else if (fi.n_cl > 0) {
		r->framing = HTTP_BODY_LENGTH;
		r->content_length = fi.cl;
	} else
		r->framing = HTTP_BODY_NONE;
	r->keep_alive = http_keep_alive(r->version_minor, fi.conn);
	r->upgrade = (fi.conn & HTTP_CONN_UPGRADE) && fi.has_upgrade;
	r->expect_continue = fi.expect_continue;
	return 0;
}

int
http_request_check(struct http_request *r)
{
	size_t i;
	int rc;

	if (r->method.len == 0 || r->target.len == 0)
		return HTTP_ERR_BAD;
	for (i = 0; i < r->method.len; i++)
		if (!http_is_tchar((unsigned char)r->method.p[i]))
			return HTTP_ERR_BAD;
	for (i = 0; i < r->target.len; i++)
		if ((unsigned char)r->target.p[i] <= 0x20 ||
		    (unsigned char)r->target.p[i] >= 0x7f)
			return HTTP_ERR_BAD;
	if ((rc = http_request_target(r)) != 0)
		return rc;
	return http_request_fields(r);
}

/* split: the request line only cut in three, the fields not checked. */
static int
http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
    struct http_request *out, int split)
{
	size_t max_line, max_head, off = 0, cr, end;
	int rc;

	memset(out, 0, sizeof(*out));
	http_limits_get(lim, &max_line, &max_head);
	/* RFC 9112 2.2: empty lines before the request line are ignored. */
	for (;;) {
		rc = http_scan_line(buf, len, off, max_head, max_line,
		    HTTP_ERR_URI_TOO_LONG, &cr);
		if (rc != 1)
			return rc;
		if (cr > off)
			break;
		off = cr + 2;
	}
	if ((rc = http_request_line(buf + off, cr - off, out, split)) != 0)
		return rc;
	rc = http_fields(buf, len, cr + 2, max_head, out->headers,
	    &out->n_headers, &end);
	if (rc != 1)
		return rc;
	if (!split && (rc = http_request_fields(out)) != 0)
		return rc;
	return (int)end;
}

int
http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
    struct http_request *out)
{
	return http_parse_head(buf, len, lim, out, 0);
}

int
http_parse_request_fields(const char *buf, size_t len,
    const struct http_limits *lim, struct http_request *out)
{
	return http_parse_head(buf, len, lim, out, 1);
}

/* HTTP-version SP 3DIGIT [SP reason-phrase] */
static int
http_status_line(const char *p, size_t n, struct http_response *r)
{
	const char *end = p + n, *q;
	int rc;

	for (q = p; q < end && *q != ' '; q++)
		;
	if ((rc = http_version(p, (size_t)(q - p), &r->version_minor)) != 0)
		return rc;
	if (end - q < 4 || !http_is_digit(q[1]) || !http_is_digit(q[2]) ||
	    !http_is_digit(q[3]))
		return HTTP_ERR_BAD;
	r->status = (q[1] - '0') * 100 + (q[2] - '0') * 10 + (q[3] - '0');
	if (r->status < 100 || r->status > 599)
		return HTTP_ERR_BAD;
	q += 4;
	/* A missing SP before an empty reason is tolerated. */
	if (q < end && *q++ != ' ')
		return HTTP_ERR_BAD;
	r->reason.p = q;
	r->reason.len = (size_t)(end - q);
	for (; q < end; q++)
		if (!http_is_fchar(*q))
			return HTTP_ERR_BAD;
	return 0;
}

/*
 * transfer-coding = token *( OWS ";" OWS token "=" token ). Returns the
 * coding name in *name, or -1.
 */
static int
http_transfer_coding(const struct http_slice *el, struct http_slice *name)
{
	size_t i = 0, n = el->len, s;
	const char *p = el->p;

	while (i < n && http_is_tchar(p[i]))
		i++;
	if (i == 0)
		return -1;
	name->p = p;
	name->len = i;
	while (i < n) {
		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		if (i == n || p[i++] != ';')
			return -1;
		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		for (s = i; i < n && http_is_tchar(p[i]); i++)
			;
		if (i == s || i == n || p[i++] != '=')
			return -1;
		for (s = i; i < n && http_is_tchar(p[i]); i++)
			;
		if (i == s)
			return -1;
	}
	return 0;
}

/* Walks the codings of all Transfer-Encoding headers: is "chunked" last? */
static int
http_te_final_chunked(const struct http_header *hv, size_t n, int *final,
    int *other)
{
	struct http_slice el, name;
	size_t i, pos;
	int chunked = 0, codings = 0;

	*final = 0;
	*other = 0;
	for (i = 0; i < n; i++) {
		if (!http_header_is(&hv[i], "Transfer-Encoding"))
			continue;
		pos = 0;
		while (http_list_next(&hv[i].value, &pos, &el)) {
			if (el.len == 0)
				continue;
			if (http_transfer_coding(&el, &name) == -1)
				return HTTP_ERR_BAD;
			codings++;
			*final = http_slice_caseeq(name.p, name.len, "chunked");
			if (*final && (chunked++ > 0 || name.len != el.len))
				return HTTP_ERR_BAD;
			if (!*final)
				*other = 1;
		}
	}
	return codings > 0 ? 0 : HTTP_ERR_BAD;
}

static int
http_response_fields(struct http_response *r, const char *m, size_t mlen)
{
	struct http_fields_info fi;
	int rc, chunked = 0;

	if ((rc = http_fields_info(r->headers, r->n_headers, &fi)) != 0)
		return rc;
	r->keep_alive = http_keep_alive(r->version_minor, fi.conn);
	if (fi.n_te > 0 && (rc = http_te_final_chunked(r->headers,
	    r->n_headers, &chunked, &r->te_other)) != 0)
		return rc;
	if ((m != NULL && http_slice_eq(m, mlen, "HEAD")) ||
	    (m != NULL && http_slice_eq(m, mlen, "CONNECT") &&
	    r->status / 100 == 2) ||
	    r->status / 100 == 1 || r->status == 204 || r->status == 304) {
		r->framing = HTTP_BODY_NONE;
		/* HEAD and 304: the length of a body not sent, metadata only. */
		r->has_length = fi.n_cl > 0;
		r->declared_length = fi.cl;
	} else if (fi.n_te > 0) {
		/* RFC 9112 6.3: chunked not final, or HTTP/1.0: to close. */
		if (chunked && r->version_minor == 1)
			r->framing = HTTP_BODY_CHUNKED;
		else {
			r->framing = HTTP_BODY_UNTIL_CLOSE;
			r->keep_alive = 0;
		}
	} else if (fi.n_cl > 0) {
		r->framing = HTTP_BODY_LENGTH;
		r->content_length = fi.cl;
		r->has_length = 1;
		r->declared_length = fi.cl;
	} else {
		r->framing = HTTP_BODY_UNTIL_CLOSE;
		r->keep_alive = 0;
	}
	return 0;
}

int
http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
    const char *req_method, size_t req_method_len, struct http_response *out)
{
	size_t max_line, max_head, cr, end;
	int rc;

	memset(out, 0, sizeof(*out));
	http_limits_get(lim, &max_line, &max_head);
	rc = http_scan_line(buf, len, 0, max_head, max_line,
	    HTTP_ERR_URI_TOO_LONG, &cr);
	if (rc != 1)
		return rc;
	if ((rc = http_status_line(buf, cr, out)) != 0)
		return rc;
	rc = http_fields(buf, len, cr + 2, max_head, out->headers,
	    &out->n_headers, &end);
	if (rc != 1)
		return rc;
	if ((rc = http_response_fields(out, req_method, req_method_len)) != 0)
		return rc;
	return (int)end;
}

static const char *const http_methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE",
	"CONNECT", "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK",
	"UNLOCK", "REPORT", "SEARCH", NULL
};

/*
 * Whitespace some origin's request-line parser passes over (nginx: SP,
 * HTAB, CR; Python's str.split(): VT, FF, 0x1c-0x1f, 0x85, 0xa0 too).
 */
static int
sniff_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' ||
	    (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0;
}

#define SNIFF_LINE_MAX	8192	/* a longer line still open: HTTP's to refuse */

/*
 * What an origin could take as a request line, not only what a client
 * sends: empty lines and whitespace first (RFC 9112 2.2; servers skip
 * them), then a known method and a space, or any token, whitespace, a
 * target, whitespace and "HTTP/" in any case ("PURGE /x HTTP/1.1", "PRI *
 * HTTP/2.0"). What is HTTP here is read and decided request by request;
 * anything else is what an opaque rule relays unread, so when in doubt
 * this says HTTP. Decides as soon as a byte breaks that shape.
 */
int
http_sniff_request(const char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)buf;
	const char *const *m;
	size_t i = 0, ms, ml, k;

	while (i < len && (p[i] == '\n' || sniff_ws(p[i])))
		i++;
	if (i == len)
		return len >= SNIFF_LINE_MAX ? 1 : -1;
	ms = i;
	while (i < len && http_is_tchar(p[i]))
		i++;
	ml = i - ms;
	if (ml == 0)
		return 0;
	if (i < len && p[i] == ' ')
		for (m = http_methods; *m != NULL; m++)
			if (strlen(*m) == ml && memcmp(p + ms, *m, ml) == 0)
				return 1;
	for (k = 0; k < 2; k++) {
		/* whitespace, then the target (k 0) or the version (k 1) */
		if (i == len)
			break;
		if (!sniff_ws(p[i]))
			return 0;
		while (i < len && sniff_ws(p[i]))
			i++;
		if (i == len)
			break;
		if (k == 1)
			break;
		if (p[i] == '\n' || p[i] < 0x21 || p[i] == 0x7f)
			return 0;
		while (i < len && p[i] > 0x20 && p[i] != 0x7f && !sniff_ws(p[i]))
			i++;
	}
	if (k == 1 && i < len) {
		static const char v[] = "HTTP/";

		for (ms = 0; ms < 5 && i + ms < len; ms++)
			if ((p[i + ms] | 0x20) != (v[ms] | 0x20))
				return 0;
		if (ms == 5)
			return 1;
	}
	return len >= SNIFF_LINE_MAX ? 1 : -1;
}

int
http_header_is(const struct http_header *h, const char *name)
{
	return http_slice_caseeq(h->name.p, h->name.len, name);
}

const struct http_header *
http_header_find(const struct http_header *hv, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (http_header_is(&hv[i], name))
			return &hv[i];
	return NULL;
}

static const char *const http_hop_by_hop[] = {
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
	"Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
	NULL
};

/*
 * What a Connection header cannot nominate: the framing and routing the
 * gateway decides itself. "Connection: Content-Length" would otherwise
 * strip the length the body was framed by (request smuggling).
 */
static const char *const http_protected[] = {
	"Content-Length", "Transfer-Encoding", "Host", "Upgrade",
	"Proxy-Authorization", NULL
};

static int
http_name_in(const struct http_slice *name, const char *const *list)
{
	for (; *list != NULL; list++)
		if (http_slice_caseeq(name->p, name->len, *list))
			return 1;
	return 0;
}

int
http_header_is_hop_by_hop(const struct http_header *h,
    const struct http_header *hv, size_t n)
{
	const char *const *f;
	struct http_slice el;
	size_t i, pos;

	for (f = http_hop_by_hop; *f != NULL; f++)
		if (http_header_is(h, *f))
			return 1;
	if (http_name_in(&h->name, http_protected))
		return 0;
	for (i = 0; i < n; i++) {
		if (!http_header_is(&hv[i], "Connection"))
			continue;
		pos = 0;
		while (http_list_next(&hv[i].value, &pos, &el))
			if (el.len > 0 && el.len == h->name.len &&
			    http_mem_caseeq(el.p, h->name.p, el.len))
				return 1;
	}
	return 0;
}

int
http_identity_encoded(const struct http_header *hv, size_t n)
{
	struct http_slice el;
	size_t i, pos;

	for (i = 0; i < n; i++) {
		if (!http_header_is(&hv[i], "Content-Encoding"))
			continue;
		pos = 0;
		while (http_list_next(&hv[i].value, &pos, &el))
			if (el.len > 0 &&
			    !http_slice_caseeq(el.p, el.len, "identity"))
				return 0;
	}
	return 1;
}

int
http_framing_header(enum http_framing fr, uint64_t len, char *buf, size_t n)
{
	int r;

	switch (fr) {
	case HTTP_BODY_LENGTH:
		r = snprintf(buf, n, "Content-Length: %llu\r\n",
		    (unsigned long long)len);
		break;
	case HTTP_BODY_CHUNKED:
		r = snprintf(buf, n, "Transfer-Encoding: chunked\r\n");
		break;
	default:
		r = 0;
		if (n > 0)
			buf[0] = '\0';
		break;
	}
	return r < 0 || (size_t)r >= n ? -1 : r;
}

int
http_header_forwardable(const struct http_header *h,
    const struct http_header *hv, size_t n)
{
	return !http_header_is(h, "Content-Length") &&
	    !http_header_is_hop_by_hop(h, hv, n);
}

enum {
	HTTP_CH_SIZE = 0,	/* chunk-size hex digits */
	HTTP_CH_SIZE_WS,	/* BWS after the size: only ";" may follow */
	HTTP_CH_EXT,		/* chunk extensions, up to CR */
	HTTP_CH_SIZE_LF,
	HTTP_CH_DATA,
	HTTP_CH_DATA_CR,
	HTTP_CH_DATA_LF,
	HTTP_CH_TRAILER,	/* a trailer line or the final CRLF starts */
	HTTP_CH_TR_NAME,
	HTTP_CH_TR_VALUE,
	HTTP_CH_TR_LF,
	HTTP_CH_END_LF,
	HTTP_CH_DONE,
	HTTP_CH_ERROR
};

void
http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = HTTP_CH_SIZE;
}

/* One byte of a chunk-size line. Returns 0 or -1. */
static int
http_chunk_size_byte(struct http_chunked *c, unsigned char ch)
{
	int d;

	if (ch != '\r' && ++c->line_len > HTTP_CHUNK_LINE_MAX)
		return -1;
	switch (c->state) {
	case HTTP_CH_SIZE:
		if ((d = util_hexval(ch)) != -1) {
			/* Sizes stay below 2^62. */
			if ((c->remaining >> 58) != 0)
				return -1;
			c->remaining = (c->remaining << 4) | (uint64_t)d;
			c->digits++;
			return 0;
		}
		if (c->digits == 0)
			return -1;
		/* FALLTHROUGH */
	case HTTP_CH_SIZE_WS:
		if (ch == ' ' || ch == '\t')
			c->state = HTTP_CH_SIZE_WS;
		else if (ch == ';')
			c->state = HTTP_CH_EXT;
		else if (ch == '\r' && c->state == HTTP_CH_SIZE)
			c->state = HTTP_CH_SIZE_LF;
		else
			return -1;
		return 0;
	case HTTP_CH_EXT:
		if (ch == '\r')
			c->state = HTTP_CH_SIZE_LF;
		else if (!http_is_fchar(ch))
			return -1;
		return 0;
	}
	return -1;
}

/* One byte of the trailer section. Returns 0, 1 once complete, or -1. */
static int
http_chunk_trailer_byte(struct http_chunked *c, unsigned char ch)
{
	if (++c->trailer_len > HTTP_TRAILER_MAX)
		return -1;
	switch (c->state) {
	case HTTP_CH_TRAILER:
		if (ch == '\r')
			c->state = HTTP_CH_END_LF;
		else if (http_is_tchar(ch))
			c->state = HTTP_CH_TR_NAME;
		else
			return -1;	/* obs-fold, empty name, bare LF */
		return 0;
	case HTTP_CH_TR_NAME:
		if (ch == ':')
			c->state = HTTP_CH_TR_VALUE;
		else if (!http_is_tchar(ch))
			return -1;
		return 0;
	case HTTP_CH_TR_VALUE:
		if (ch == '\r')
			c->state = HTTP_CH_TR_LF;
		else if (!http_is_fchar(ch))
			return -1;
		return 0;
	case HTTP_CH_TR_LF:
		if (ch != '\n')
			return -1;
		c->state = HTTP_CH_TRAILER;
		return 0;
	case HTTP_CH_END_LF:
		if (ch != '\n')
			return -1;
		c->state = HTTP_CH_DONE;
		return 1;
	}
	return -1;
}

ssize_t
http_chunked_feed(struct http_chunked *c, const char *buf, size_t len,
    int *done)
{
	return http_chunked_decode(c, buf, len, done, NULL, NULL);
}

ssize_t
http_chunked_decode(struct http_chunked *c, const char *buf, size_t len,
    int *done, void (*data)(const char *, size_t, void *), void *arg)
{
	return http_chunked_decode_ext(c, buf, len, done, data, NULL, arg);
}

ssize_t
http_chunked_decode_ext(struct http_chunked *c, const char *buf, size_t len,
    int *done, void (*data)(const char *, size_t, void *),
    void (*ext)(const char *, size_t, void *), void *arg)
{
	size_t i = 0, n, es = 0;
	unsigned char ch;
	int rc, inext = 0;

	*done = c->state == HTTP_CH_DONE;
	if (c->state == HTTP_CH_DONE)
		return 0;
	while (i < len && c->state != HTTP_CH_ERROR) {
		ch = (unsigned char)buf[i];
		/* An extension's bytes (after ";", up to CR) in spans. */
		if (ext != NULL && c->state == HTTP_CH_EXT && ch != '\r') {
			if (!inext)
				es = i;
			inext = 1;
		} else if (inext) {
			ext(buf + es, i - es, arg);
			inext = 0;
		}
		if (ext != NULL && c->state == HTTP_CH_EXT && ch == '\r')
			ext(NULL, 0, arg);	/* that line's extensions ended */
		switch (c->state) {
		case HTTP_CH_DATA:
			n = len - i;
			if ((uint64_t)n > c->remaining)
				n = (size_t)c->remaining;
			if (data != NULL && n > 0)
				data(buf + i, n, arg);
			i += n;
			c->remaining -= n;
			if (c->remaining == 0)
				c->state = HTTP_CH_DATA_CR;
			continue;
		case HTTP_CH_SIZE:
		case HTTP_CH_SIZE_WS:
		case HTTP_CH_EXT:
			if (http_chunk_size_byte(c, ch) == -1)
				c->state = HTTP_CH_ERROR;
			break;
		case HTTP_CH_SIZE_LF:
			if (ch != '\n') {
				c->state = HTTP_CH_ERROR;
				break;
			}
			c->state = c->remaining == 0 ? HTTP_CH_TRAILER :
			    HTTP_CH_DATA;
			c->line_len = 0;
			c->digits = 0;
			break;
		case HTTP_CH_DATA_CR:
			c->state = ch == '\r' ? HTTP_CH_DATA_LF : HTTP_CH_ERROR;
			break;
		case HTTP_CH_DATA_LF:
			c->state = ch == '\n' ? HTTP_CH_SIZE : HTTP_CH_ERROR;
			break;
		default:
			rc = http_chunk_trailer_byte(c, ch);
			if (rc == -1)
				c->state = HTTP_CH_ERROR;
			else if (rc == 1) {
				*done = 1;
				return (ssize_t)(i + 1);
			}
			break;
		}
		i++;
	}
	if (c->state == HTTP_CH_ERROR)
		return -1;
	if (inext)
		ext(buf + es, i - es, arg);
	return (ssize_t)i;
}
