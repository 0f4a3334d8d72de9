/*
 * The explicit HTTP proxy's request heads: identity (Proxy-Authorization or
 * source address), absolute-form requests, CONNECT, and plain HTTP carried
 * inside a CONNECT tunnel. Decides each request; the forwarding itself is
 * proxy_forward.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "core/util.h"
#include "proxy/front.h"
#include "vault/vault.h"

static void	connect_resolved(struct exchange *);
static void	forward_resolved(struct exchange *);
static void	request_run(struct exchange *, const struct http_request *, int);

static void
slice_copy(char *dst, size_t dstlen, const struct http_slice *sl)
{
	size_t n = sl->len < dstlen - 1 ? sl->len : dstlen - 1;

	memcpy(dst, sl->p, n);
	dst[n] = '\0';
}

/*
 * Proxy-Authorization: Basic base64(id:token), decoded into dec (len
 * bytes): 0 no header; 1 present, *c its id and token (id NULL when it is
 * malformed: two headers, another scheme, bad base64, no colon).
 */
static int
basic_credentials(const struct http_request *req, unsigned char *dec,
    size_t len, struct decide_cred *c)
{
	const struct http_header *h;
	const char *v, *colon;
	size_t vlen;
	int n, pad = 0;

	memset(c, 0, sizeof(*c));
	h = http_header_find(req->headers, req->n_headers, "Proxy-Authorization");
	if (h == NULL)
		return 0;
	/* Two credentials are no answer: never let the first one win. */
	if (http_header_find(h + 1,
	    req->n_headers - (size_t)(h - req->headers) - 1,
	    "Proxy-Authorization") != NULL)
		return 1;
	v = h->value.p;
	vlen = h->value.len;
	if (vlen < 6 || strncasecmp(v, "Basic ", 6) != 0)
		return 1;
	v += 6;
	vlen -= 6;
	while (vlen > 0 && *v == ' ') {
		v++;
		vlen--;
	}
	if (vlen == 0 || vlen % 4 != 0 || vlen / 4 * 3 >= len)
		return 1;
	if (v[vlen - 1] == '=')
		pad++;
	if (vlen > 1 && v[vlen - 2] == '=')
		pad++;
	n = EVP_DecodeBlock(dec, (const unsigned char *)v, (int)vlen);
	if (n < 0 || n - pad <= 0)
		return 1;
	n -= pad;
	if ((colon = memchr(dec, ':', (size_t)n)) == NULL)
		return 1;
	c->id = (const char *)dec;
	c->idlen = (size_t)(colon - (const char *)dec);
	c->token = colon + 1;
	c->tokenlen = (size_t)n - c->idlen - 1;
	return 1;
}

/* The destination as written, for rows about requests refused before a decision. */
static void
target_note(struct exchange *s, const struct http_request *req)
{
	exchange_note_target(s, req->host.p, req->host.len, req->port);
}

/*
 * Identity per docs/policy.md (core/decide.c's identity stage): a
 * Proxy-Authorization that is present decides, else the source address.
 */
static int
identify(struct exchange *s, const struct http_request *req)
{
	unsigned char dec[768];
	struct decide_cred c;
	enum sg_reason r;
	int presented;

	presented = basic_credentials(req, dec, sizeof(dec), &c);
	r = decide_identify(s->pol, &s->c->client_addr, presented ? &c : NULL,
	    &s->ident);
	OPENSSL_cleanse(dec, sizeof(dec));
	if (r != REASON_NONE) {
		s->has_ident = 0;
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "no-identity");
		exchange_deny(s, 407, r, r == REASON_AUTH_FAILED ?
		    "proxy credentials not accepted" :
		    "no sandbox identity: send Proxy-Authorization");
		return -1;
	}
	s->has_ident = 1;
	return 0;
}

/*
 * "host[:port]" of an absolute-form target (scheme "://" authority path):
 * inside a tunnel it must name the tunnel as the Host header must, or an
 * origin that reads the target instead of Host is asked for another host.
 */
static void
absolute_authority(const struct http_request *req, const char **a, size_t *len)
{
	const char *p = req->target.p + req->scheme.len + 3;
	const char *end = req->target.p + req->target.len;
	const char *q = p;

	while (q < end && *q != '/' && *q != '?')
		q++;
	*a = p;
	*len = (size_t)(q - p);
}

/* One more reading, its strings in the exchange's memory. */
static void
alt_add(struct exchange *s, struct decide_alt *alt, size_t *n,
    const char *m, size_t mlen, const char *path, size_t plen)
{
	if (*n == DECIDE_ALT_MAX)
		return;
	alt[*n].method = m != NULL ? exchange_strndup(s, m, mlen) :
	    s->fwd.method;
	alt[*n].path = path != NULL ? exchange_strndup(s, path, plen) :
	    s->fwd.path;
	if (alt[*n].method != NULL && alt[*n].path != NULL)
		(*n)++;
}

/*
 * What an origin may read the request as besides its method and path
 * (core/decide.h, struct decide_alt; docs/policy.md "Method overrides and
 * WebDAV"): the method an override names -- X-HTTP-Method-Override,
 * X-HTTP-Method, X-Method-Override, a `_method` query parameter (Rails,
 * Laravel, Symfony, Express's method-override) -- with the request's
 * path, and a Destination's path (WebDAV MOVE, COPY) with its method.
 * -1 when a Destination names another host than host[0..hostlen).
 */
static int
request_alts(struct exchange *s, const struct http_request *req,
    const char *host, size_t hostlen, struct decide_alt *alt, size_t *n)
{
	const struct http_header *h;
	const char *q, *e, *v, *a, *p;
	char val[64];
	size_t i, vl;
	int hi, lo;

	*n = 0;
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (http_header_is(h, "X-HTTP-Method-Override") ||
		    http_header_is(h, "X-HTTP-Method") ||
		    http_header_is(h, "X-Method-Override"))
			alt_add(s, alt, n, h->value.p, h->value.len, NULL, 0);
		else if (http_header_is(h, "Destination")) {
			v = h->value.p;
			e = v + h->value.len;
			p = v;
			if ((q = memchr(v, ':', h->value.len)) != NULL &&
			    e - q > 2 && q[1] == '/' && q[2] == '/') {
				for (a = q + 3, p = a; p < e && *p != '/'; p++)
					;
				/* host[:port], no userinfo: the request's host. */
				for (q = a; q < p && *q != ':' && *q != '@'; q++)
					;
				if ((q < p && *q == '@') ||
				    (size_t)(q - a) != hostlen ||
				    strncasecmp(a, host, hostlen) != 0)
					return -1;
			}
			alt_add(s, alt, n, NULL, 0, p, (size_t)(e - p));
		}
	}
	/* _method=X in the query, escapes decoded. */
	if (s->fwd.path != NULL && (q = strchr(s->fwd.path, '?')) != NULL) {
		for (q++; *q != '\0'; q = *e != '\0' ? e + 1 : e) {
			e = q + strcspn(q, "&;#");
			if ((size_t)(e - q) < 8 || strncasecmp(q, "_method=", 8) != 0)
				continue;
			for (v = q + 8, vl = 0; v < e && vl < sizeof(val); v++) {
				if (*v == '%' && e - v > 2 &&
				    (hi = util_hexval((unsigned char)v[1])) >= 0 &&
				    (lo = util_hexval((unsigned char)v[2])) >= 0) {
					val[vl++] = (char)(hi << 4 | lo);
					v += 2;
				} else
					val[vl++] = *v == '+' ? ' ' : *v;
			}
			alt_add(s, alt, n, val, vl, NULL, 0);
			if (*e == '#')
				break;
		}
	}
	return 0;
}

/* A request inside a CONNECT tunnel: same name, decided afresh. */
static void
tunnel_request(struct exchange *s, const struct http_request *req, int n)
{
	struct decide_alt alt[DECIDE_ALT_MAX];
	struct decide_in in = { 0 };
	enum sg_reason r;
	char detail[512];

	if (req->form == HTTP_TARGET_AUTHORITY) {
		exchange_deny(s, 400, REASON_BAD_REQUEST, "CONNECT inside a tunnel");
		return;
	}
	s->fwd.head_len = (size_t)n;
	in.method = s->fwd.method;
	in.path = s->fwd.path;
	if (request_alts(s, req, s->target.host, strlen(s->target.host), alt,
	    &in.n_alt) == -1) {
		exchange_deny(s, 403, REASON_HOST_MISMATCH, "Destination names "
		    "another host than the tunnel's");
		return;
	}
	in.alt = alt;
	in.tunnel_request = 1;
	if (req->has_host) {
		in.tunnel_host = req->host_header.p;
		in.tunnel_host_len = req->host_header.len;
	}
	if (req->form == HTTP_TARGET_ABSOLUTE)
		absolute_authority(req, &in.tunnel_abs, &in.tunnel_abs_len);
	if ((r = proxy_decide(s, &in)) != REASON_NONE) {
		if (r == REASON_HOST_MISMATCH)
			snprintf(detail, sizeof(detail), "Host does not match "
			    "the tunnel to %s:%u", s->target.host, s->target.port);
		else
			snprintf(detail, sizeof(detail), "%s %s:%u denied by %s",
			    s->fwd.method, s->target.host, s->target.port,
			    s->verdict.rule);
		exchange_deny(s, 0, r, detail);
		return;
	}
	if (request_cred_check(s, req) == -1)
		return;
	if (s->fwd.grpc) {
		/* gRPC needs HTTP/2 to the origin (trailers). */
		forward_prepare(s, req);
		/* Its body would go to the origin unread. */
		if (s->fwd.git_hold) {
			exchange_deny(s, 403, REASON_GIT_REF_DENIED, "git push: "
			    "a gRPC request is not read as a push");
			return;
		}
		h2o_request(s, req, n, 1);
		return;
	}
	if (request_build_head(s, req, 0) == -1) {
		exchange_deny(s, 502, REASON_CRED_UNAVAILABLE,
		    "the credential could not be swapped in");
		return;
	}
	forward_prepare(s, req);
	/*
	 * An origin connection an earlier exchange left in the worker's pool,
	 * opened for this same decision (a finished stream's, the previous
	 * request's in this tunnel, or another tunnel's of the sandbox).
	 */
	(void)upstream_take(s);
	/* A held git push goes by HTTP/1.1: proxy_git.c reads its body. */
	if (s->is_stream && !upstream_reusable(s) && !s->fwd.git_hold) {
		/*
		 * An HTTP/2 stream: HTTP/2 to the origin when it speaks it (an
		 * HTTP/1.1 origin connection kept from an earlier stream's
		 * last stream, opened for the same decision, is used as it is).
		 */
		h2o_request(s, req, n, 0);
		return;
	}
	if (n > 0)
		evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	if (upstream_reusable(s))
		forward_start(s);
	else
		upstream_connect(s, forward_start);
}

static void
connect_request(struct exchange *s, const struct http_request *req, int n)
{
	struct decide_in in = { 0 };
	enum sg_reason r;
	char detail[512];

	s->c->kind = KIND_CONNECT;
	/* A tunnel is a new decision: what absolute form opened is not for it. */
	upstream_drop(s);
	in.host = req->host.p;
	in.hostlen = req->host.len;
	in.port = req->port;
	if ((r = proxy_decide(s, &in)) != REASON_NONE) {
		if (s->approval_held) {
			/* Held: a reset of its client gives the share back. */
			client_watch(s);
			return;		/* asked: read again once answered */
		}
		snprintf(detail, sizeof(detail), "CONNECT %s:%u denied by %s",
		    s->target.host, s->target.port, s->verdict.rule);
		exchange_deny(s, 0, r, detail);
		return;
	}
	evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	upstream_resolve(s, connect_resolved);
}

static void
connect_resolved(struct exchange *s)
{
	evbuffer_add_printf(bufferevent_get_output(s->c->cbev),
	    "HTTP/1.1 200 Connection established\r\n\r\n");
	s->c->tunnel_open = 1;
	tunnel_start(s);
}

static void
absolute_request(struct exchange *s, const struct http_request *req, int n)
{
	struct decide_alt alt[DECIDE_ALT_MAX];
	struct decide_in in = { 0 };
	enum sg_reason r;
	char detail[512];

	if (req->scheme.len != 4 || strncasecmp(req->scheme.p, "http", 4) != 0) {
		exchange_deny(s, 400, REASON_BAD_REQUEST,
		    "only http:// URLs are forwarded; use CONNECT for https");
		return;
	}
	in.host = req->host.p;
	in.hostlen = req->host.len;
	in.port = req->port;
	in.method = s->fwd.method;
	in.path = s->fwd.path;
	if (request_alts(s, req, req->host.p, req->host.len, alt,
	    &in.n_alt) == -1) {
		exchange_note_target(s, req->host.p, req->host.len, req->port);
		exchange_deny(s, 403, REASON_HOST_MISMATCH, "Destination names "
		    "another host than the request's");
		return;
	}
	in.alt = alt;
	if ((r = proxy_decide(s, &in)) != REASON_NONE) {
		if (s->approval_held) {
			/* Held: a reset of its client gives the share back. */
			client_watch(s);
			return;		/* asked: read again once answered */
		}
		snprintf(detail, sizeof(detail), "%s http://%s:%u denied by %s",
		    s->fwd.method, s->target.host, s->target.port, s->verdict.rule);
		exchange_deny(s, 0, r, detail);
		return;
	}
	if (request_cred_check(s, req) == -1)
		return;
	if (request_build_head(s, req, 1) == -1) {
		exchange_deny(s, 502, REASON_CRED_UNAVAILABLE,
		    "the credential could not be swapped in");
		return;
	}
	forward_prepare(s, req);
	evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	/* Keep-alive to the same origin: its address is checked again. */
	if (upstream_keep(s)) {
		if (!upstream_check_addrs(s, s->addrs, s->n_addrs)) {
			exchange_deny(s, 403, s->verdict.reason,
			    "destination address not allowed");
			return;
		}
		forward_start(s);
		return;
	}
	upstream_drop(s);
	upstream_resolve(s, forward_resolved);
}

/*
 * A request line whose target did not parse, though it has the shape of
 * a destination -- host[:port] in a CONNECT or an http(s) URL -- because
 * the host holds bytes no host name has (bad!host, ev=il.test) or the
 * port is 0: an invalid destination. Its row names it as the client
 * wrote it, escaped, never as null (docs/audit.md). 1 when so.
 */
static int
invalid_destination(struct exchange *s, const struct http_request *r)
{
	const char *a, *e, *c, *h;
	unsigned long port = 0;
	int connect, has_port, bad = 0;

	if (r->method.len == 0 || r->target.len == 0)
		return 0;
	a = r->target.p;
	e = a + r->target.len;
	connect = r->method.len == 7 && memcmp(r->method.p, "CONNECT", 7) == 0;
	if (connect)
		;
	else if (r->target.len > 7 && strncasecmp(a, "http://", 7) == 0)
		a += 7;
	else if (r->target.len > 8 && strncasecmp(a, "https://", 8) == 0)
		a += 8;
	else
		return 0;
	if (!connect)
		for (h = a; h < e; h++)
			if (*h == '/') {
				e = h;
				break;
			}
	if (e == a || *a == '[' || memchr(a, '@', (size_t)(e - a)) != NULL ||
	    memchr(a, '/', (size_t)(e - a)) != NULL ||
	    memchr(a, '?', (size_t)(e - a)) != NULL)
		return 0;
	for (c = e; c > a && isdigit((unsigned char)c[-1]); c--)
		;
	has_port = c > a && c < e && c[-1] == ':';
	if (has_port) {
		if (e - c > 5)
			return 0;
		for (h = c; h < e; h++)
			port = port * 10 + (unsigned long)(*h - '0');
		if (port > 65535)
			return 0;
		bad = port == 0;
		e = c - 1;
	} else if (connect)
		return 0;
	if (e == a || e - a > 255)
		return 0;
	for (h = a; h < e && !bad; h++)
		if (!isalnum((unsigned char)*h) && strchr("-._~", *h) == NULL)
			bad = 1;
	if (!bad)
		return 0;
	log_escape_word(a, (size_t)(e - a), s->target.host,
	    sizeof(s->target.host));
	s->target.port = (uint16_t)port;
	snprintf(s->fwd.method, sizeof(s->fwd.method), "%.*s",
	    (int)r->method.len, r->method.p);
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "default-deny");
	return 1;
}

/*
 * A request to an invalid destination (invalid_destination) is refused as
 * any other is: who sent it first (a wrong Proxy-Authorization is a 407,
 * the sandbox's share is taken), then 403 invalid-host in that sandbox's
 * name; a CONNECT's row says connect. Outside the explicit proxy (a
 * tunnel's requests, ingress) the connection said who it is already.
 */
static void
invalid_request(struct exchange *s, const char *buf, size_t len,
    const struct http_limits *lim, struct http_request *req)
{
	struct http_request fields;

	if (s->c->kind == KIND_HTTP && !s->c->tunnel_http) {
		if (req->method.len == 7 &&
		    memcmp(req->method.p, "CONNECT", 7) == 0)
			s->c->kind = KIND_CONNECT;
		/* The fields as they came: an unparsable head has none. */
		if (http_parse_request_fields(buf, len, lim, &fields) > 0)
			req = &fields;
		if (identify(s, req) == -1 || conn_fair_admit(s) == -1)
			return;
	}
	exchange_deny(s, 403, REASON_INVALID_HOST,
	    "not a valid host name or port");
}

static void
forward_resolved(struct exchange *s)
{
	upstream_connect(s, forward_start);
}

void
http_head_read(struct exchange *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
	struct http_request req;
	struct http_limits lim;
	size_t len = evbuffer_get_length(in), want;
	const char *buf;
	int n;

	if (len == 0)
		return;
	conn_head_begin(s);
	lim.max_line = PROXY_MAX_LINE;
	lim.max_head = s->p->cfg->max_header_bytes;
	want = len < lim.max_head + 1 ? len : lim.max_head + 1;
	if ((buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)want)) == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}
	/*
	 * A head's first bytes start its exchange; its later reads go on in
	 * it. Nothing of one request's decision carries into the next: a new
	 * request on a kept-alive connection starts from its identity up, on
	 * the current policy; one inside a tunnel from the tunnel's name,
	 * addresses, identity and policy (exchange_next).
	 */
	if (!s->head_pending) {
		struct exchange *x;

		if ((x = exchange_next(s)) == NULL) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
		s = x;
		s->fwd.request = 1;
		s->head_pending = 1;	/* its row times it from here (exchange_new) */
	}
	n = http_parse_request(buf, want, &lim, &req);
	if (n > 0 && s->c->intercepted)
		exchange_mark(s, MARK_REQUEST);
	if (n == HTTP_NEED_MORE)
		return;
	/* Its oauth2 token being fetched: read again when that ends. */
	if (n > 0 && oauth2_park(s, &req))
		return;
	/*
	 * A SigV4 request whose payload hash the gateway must compute to
	 * re-sign it (docs/credentials.md "aws_sigv4"): decided once its body
	 * (at most one read buffer) is here too.
	 */
	if (n > 0 && s->c->intercepted && sigv4_wants_body(&req) &&
	    (size_t)n + req.content_length <= PROXY_READ_HWM &&
	    len < (size_t)n + req.content_length)
		return;
	s->head_pending = 0;
	switch (n) {
	case HTTP_ERR_URI_TOO_LONG:
		exchange_deny(s, 414, REASON_URI_TOO_LONG, "request line too long");
		return;
	case HTTP_ERR_HEAD_TOO_LARGE:
		exchange_deny(s, 431, REASON_HEAD_TOO_LARGE, "request head too large");
		return;
	case HTTP_ERR_VERSION:
		exchange_deny(s, 505, REASON_BAD_REQUEST, "only HTTP/1.0 and 1.1");
		return;
	default:
		if (n < 0 && invalid_destination(s, &req)) {
			invalid_request(s, buf, want, &lim, &req);
			return;
		}
		if (n < 0) {
			exchange_deny(s, 400, REASON_BAD_REQUEST, "malformed request");
			return;
		}
	}
	request_run(s, &req, n);
}

/*
 * A request head in hand, from the client's bytes (n: its length, drained
 * once the request goes on) or from an HTTP/2 stream's fields (n 0):
 * decided and sent on.
 */
static void
request_run(struct exchange *s, const struct http_request *req, int n)
{
	if (req->method.len >= sizeof(s->fwd.method)) {
		/* Decided and logged as written, or not at all. */
		exchange_deny(s, 501, REASON_METHOD_NOT_SUPPORTED,
		    "method name too long");
		return;
	}
	conn_head_done(s);
	slice_copy(s->fwd.method, sizeof(s->fwd.method), &req->method);
	/* The whole path: rules match on it, and the row keeps it. */
	s->fwd.path = exchange_strndup(s, req->form ==
	    HTTP_TARGET_AUTHORITY ? "" : req->path.p, req->form ==
	    HTTP_TARGET_AUTHORITY ? 0 : req->path.len);
	if (s->fwd.path == NULL) {
		exchange_close(s, CLOSE_NO_MEMORY);
		return;
	}

	if (s->c->kind == KIND_INGRESS) {
		ingress_request(s, req, n);
		return;
	}
	if (s->c->tunnel_http) {
		tunnel_request(s, req, n);
		return;
	}
	/* What the request names, so that even a 407 row says where it went. */
	if (req->form == HTTP_TARGET_AUTHORITY)
		s->c->kind = KIND_CONNECT;
	if (req->form == HTTP_TARGET_AUTHORITY || req->form == HTTP_TARGET_ABSOLUTE)
		target_note(s, req);
	if (identify(s, req) == -1 || conn_fair_admit(s) == -1)
		return;
	switch (req->form) {
	case HTTP_TARGET_AUTHORITY:
		connect_request(s, req, n);
		break;
	case HTTP_TARGET_ABSOLUTE:
		absolute_request(s, req, n);
		break;
	default:
		exchange_deny(s, 400, REASON_BAD_REQUEST,
		    "not a proxy request: use an absolute URL or CONNECT");
		break;
	}
}

/*
 * An HTTP/2 stream's request (proxy_h2.c), as its fields made it: a new
 * the stream's exchange, decided by the code above. Its body, if
 * any, waits in the stream (h2_stream_body) for stream_client_body.
 */
void
http_stream_request(struct exchange *s, const struct http_request *req,
    int grpc)
{
	s->fwd.grpc = grpc;	/* gRPC needs HTTP/2 toward the origin */
	if (s->c->intercepted)
		exchange_mark(s, MARK_REQUEST);
	request_run(s, req, 0);
}
