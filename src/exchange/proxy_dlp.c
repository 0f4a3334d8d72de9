/*
 * Outbound secret detection on intercepted requests (docs/dlp.md): the
 * request target and every header scanned before the head is built, body
 * bytes scanned as they move (HTTP/1.1 payload under its chunk framing,
 * HTTP/2 DATA). mode: block refuses (403 secret-detected); report lets it
 * pass with the finding on its row. The scanner is the exchange's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "core/log.h"
#include "core/reason.h"
#include "dlp/dlp.h"
#include "exchange/exchange.h"
#include "vault/oauth2.h"
#include "vault/vault.h"

#define INFLATE_MAX	((uint64_t)256 << 20)	/* decoded bytes of one body */
#define INFLATE_CHUNK	16384
#define GZ_FIELD_MAX	4096	/* a gzip member's name, comment, extra field */

/* A scanner, and the gateway's own secrets per view (NULL: none watched). */
struct xscan {
	struct dlp_scan		*scan;
	struct vault_seeker	*seek[DLP_VIEW_MAX];
};

struct xdlp {
	const struct policy_dlp	*pd;
	struct exchange		*s;
	struct dlp_scan		*scan;	/* main.scan: the request's stream */
	struct xscan		 main;
	struct xscan		 ctl;	/* WebSocket control frames; made at need */
	/* The body's content coding (gzip, deflate) undone; NULL: none. */
	z_stream		*z;
	unsigned char		*zbuf;
	int			 zbits;	/* inflateInit2's windowBits */
	/* A gzip member's header fields, scanned before its data. */
	gz_header		*gzh;
	unsigned char		*gzbuf;	/* extra, name, comment: GZ_FIELD_MAX each */
	int			 gzh_fed;
	int			 zend;	/* a coded stream (gzip member) ended */
	uint64_t		 zin, zout;
	int			 done;	/* a finding was handled, or nothing to scan */
	int			 quiet;	/* a refusal is the caller's to make */
};

static void
xdlp_free(void *arg)
{
	struct xdlp *x = arg;
	int i;

	if (x == NULL)
		return;
	for (i = 0; i < DLP_VIEW_MAX; i++) {
		vault_seeker_free(x->main.seek[i]);
		vault_seeker_free(x->ctl.seek[i]);
	}
	dlp_scan_free(x->main.scan);
	dlp_scan_free(x->ctl.scan);
	if (x->z != NULL) {
		inflateEnd(x->z);
		free(x->z);
	}
	free(x->zbuf);
	free(x->gzh);
	free(x->gzbuf);
	free(x);
}

/* An allow entry with rule: skips that rule toward this host and path. */
static int
skip_cb(const char *rule, void *arg)
{
	struct xdlp *x = arg;

	return policy_dlp_exempt(x->pd, x->s->target.host, x->s->fwd.path, rule);
}

/* The scanner's tap: each view's bytes through that view's seeker. */
static int
seek_tap(enum dlp_view v, const unsigned char *p, size_t n, void *arg)
{
	struct xscan *xs = arg;

	if (p == NULL) {
		vault_seeker_reset(xs->seek[v]);
		return 0;
	}
	return vault_seek(xs->seek[v], p, n);
}

/*
 * The gateway's own secrets (docs/dlp.md, "vault-secret"): every value of
 * every credential of the policy -- a static one's, an aws_sigv4 one's key
 * id, secret key and session token, an oauth2 one's client secret and
 * tokens -- watched toward a host it is not bound to. The list is the
 * policy's whole (so one automaton serves every host); the values stay in
 * the vault. 0 (xs->seek NULL when nothing is watched), -1 no memory.
 */
/*
 * The gateway's own secrets (docs/dlp.md, "vault-secret"), watched toward a
 * host they are not bound to. The list is the policy's whole (so one
 * automaton serves every host); the values stay in the vault. 0 (xs->seek
 * NULL when nothing is watched), -1 no memory.
 */
static int
seek_new(struct exchange *s, struct xdlp *x, struct xscan *xs)
{
	int rc;

	if (policy_dlp_exempt(x->pd, s->target.host, s->fwd.path,
	    "vault-secret"))
		return 0;
	rc = dlp_vault_seekers(s->p, s->pol, s->target.host, xs->seek,
	    DLP_VIEW_MAX);
	if (rc == 0 && xs->seek[0] != NULL)
		dlp_scan_tap(xs->scan, seek_tap, xs, "vault-secret");
	return rc;
}

/* The exchange's scanner, made at its first use; NULL: nothing to scan. */
static struct xdlp *
xdlp_get(struct exchange *s, int *failed)
{
	const struct policy_dlp *pd;
	struct xdlp *x = s->dlp;

	*failed = 0;
	if (x != NULL)
		return x->done ? NULL : x;
	if (!s->has_ident || s->c->kind == KIND_INGRESS ||
	    (pd = policy_dlp_of(s->pol, s->ident.policy)) == NULL ||
	    policy_dlp_exempt(pd, s->target.host, s->fwd.path, NULL))
		return NULL;
	if ((x = calloc(1, sizeof(*x))) == NULL) {
		*failed = 1;
		return NULL;
	}
	x->pd = pd;
	x->s = s;
	if ((x->main.scan = dlp_scan_new(pd->set, skip_cb, x)) == NULL ||
	    seek_new(s, x, &x->main) == -1) {
		xdlp_free(x);
		*failed = 1;
		return NULL;
	}
	x->scan = x->main.scan;
	s->dlp = x;
	s->dlp_free = xdlp_free;
	return x;
}

/*
 * A finding in the request target: the row and the log line must not carry
 * it, so the exchange's copy of the target (what they print) keeps only
 * what comes before the part that held it (as ingress does with a token).
 */
static void
redact_target(struct exchange *s, int query_only)
{
	char *old = s->fwd.path, *q, *nw;
	size_t keep;

	if (old == NULL)
		return;
	q = strchr(old, '?');
	keep = query_only && q != NULL ? (size_t)(q - old) : 0;
	if ((nw = exchange_alloc(s, keep + 16)) == NULL)
		return;
	memcpy(nw, old, keep);
	snprintf(nw + keep, 16, "%s", query_only ? "?[redacted]" :
	    "/[redacted]");
	explicit_bzero(old, strlen(old));
	s->fwd.path = nw;
}

/*
 * A finding at where: named on the row (rule, location, redacted excerpt
 * in its rule field) and the log. 1: refuse (block), 0: pass (report).
 */
static int
finding(struct exchange *s, struct xdlp *x, const char *where,
    const struct dlp_finding *f, char *detail, size_t dlen)
{
	x->done = 1;
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "dlp:%s %s %s",
	    f->rule, where, f->excerpt);
	if (strcmp(where, "query") == 0)
		redact_target(s, 1);
	else if (strcmp(where, "path") == 0)
		redact_target(s, 0);
	else if (strcmp(where, "method") == 0) {
		/* The row's method column would carry it (AKIA... as a method). */
		explicit_bzero(s->fwd.method, sizeof(s->fwd.method));
		snprintf(s->fwd.method, sizeof(s->fwd.method), "[redacted]");
	}
	log_warnx("dlp: %s (%s) in %s%s%s toward %s, sandbox %s: %s",
	    f->rule, dlp_severity_word(f->severity), where,
	    f->view != DLP_VIEW_RAW ? ", " : "",
	    f->view != DLP_VIEW_RAW ? dlp_view_word(f->view) : "",
	    s->target.host, s->ident.sandbox,
	    x->pd->mode == POLICY_DLP_BLOCK ? "refused" : "reported");
	snprintf(detail, dlen, "a secret (dlp rule %s) in the request %s",
	    f->rule, where);
	if (x->pd->mode == POLICY_DLP_BLOCK)
		return 1;
	if (s->verdict.report == REASON_NONE)
		s->verdict.report = REASON_SECRET_DETECTED;
	return 0;
}

/*
 * A part of the head as a stream of its own: p alone (value NULL), or a
 * header field "p: value". 1 found, 0 none.
 */
static int
scan_part(struct xdlp *x, const char *p, size_t n, const char *value,
    size_t vlen, struct dlp_finding *f)
{
	int rc;

	if (dlp_scan_reset(x->scan) == -1)
		return 1;
	rc = dlp_scan_feed(x->scan, p, n, f);
	if (rc == 0 && value != NULL)
		rc = dlp_scan_feed(x->scan, ": ", 2, f);
	if (rc == 0 && vlen > 0)
		rc = dlp_scan_feed(x->scan, value, vlen, f);
	if (rc == 0)
		rc = dlp_scan_end(x->scan, f);
	return rc != 0;
}

/*
 * gzip: each member's header fields (file name, comment, extra field) are
 * bytes the origin gets in the clear, which inflate() does not output: zlib
 * keeps them here (inflateGetHeader), to be scanned before the member's
 * data. Asked for again after each inflateReset.
 */
static int
gz_watch(struct xdlp *x)
{
	if (x->gzh == NULL && ((x->gzh = calloc(1, sizeof(*x->gzh))) == NULL ||
	    (x->gzbuf = malloc(3 * GZ_FIELD_MAX)) == NULL))
		return -1;
	memset(x->gzh, 0, sizeof(*x->gzh));
	x->gzh->extra = x->gzbuf;
	x->gzh->extra_max = GZ_FIELD_MAX;
	x->gzh->name = x->gzbuf + GZ_FIELD_MAX;
	x->gzh->name_max = GZ_FIELD_MAX;
	x->gzh->comment = x->gzbuf + 2 * GZ_FIELD_MAX;
	x->gzh->comm_max = GZ_FIELD_MAX;
	x->gzh_fed = 0;
	return inflateGetHeader(x->z, x->gzh) == Z_OK ? 0 : -1;
}

/*
 * A body the gateway cannot decode to scan (docs/dlp.md, "Content
 * codings"): block refuses it (415 content-unscannable; answered unless
 * the caller answers, x->quiet), report scans on what comes as it comes.
 * -1 refused, 0 go on.
 */
static int
unscannable(struct exchange *s, struct xdlp *x, const char *where,
    const char *why)
{
	char detail[160];

	snprintf(s->verdict.rule, sizeof(s->verdict.rule),
	    "dlp:content-unscannable %s -", where);
	log_warnx("dlp: a request body toward %s, sandbox %s, cannot be "
	    "scanned (%s): %s", s->target.host, s->ident.sandbox, why,
	    x->pd->mode == POLICY_DLP_BLOCK ? "refused" : "reported");
	if (x->z != NULL) {
		inflateEnd(x->z);
		free(x->z);
		x->z = NULL;
	}
	if (x->pd->mode != POLICY_DLP_BLOCK) {
		if (s->verdict.report == REASON_NONE)
			s->verdict.report = REASON_CONTENT_UNSCANNABLE;
		return 0;
	}
	x->done = 1;
	if (x->quiet)
		return -1;
	snprintf(detail, sizeof(detail), "a request body the gateway cannot "
	    "scan for secrets (%s)", why);
	if (!s->fwd.resp_head_done)
		exchange_deny(s, 415, REASON_CONTENT_UNSCANNABLE, detail);
	else {
		exchange_log(s, VERDICT_DENY, s->fwd.status,
		    REASON_CONTENT_UNSCANNABLE);
		exchange_close(s, CLOSE_REFUSED);
	}
	return -1;
}

/*
 * gRPC's own message coding (grpc-encoding: gzip, ...): each message
 * compressed inside the stream, which the origin inflates as it would a
 * Content-Encoding. The gateway does not undo it: anything but identity
 * cannot be scanned.
 */
static int
grpc_coded(const struct http_request *req)
{
	const struct http_header *h;
	size_t i;

	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (http_header_is(h, "grpc-encoding") && !(h->value.len == 8 &&
		    strncasecmp(h->value.p, "identity", 8) == 0))
			return 1;
	}
	return 0;
}

/*
 * The request's Content-Encoding: none or identity, or one of gzip,
 * x-gzip, deflate (undone before the body is scanned); anything else, or
 * more than one, cannot be scanned; nor can a gRPC message coding.
 * -1 refused (answered), 0 go on.
 */
static int
body_coding(struct exchange *s, struct xdlp *x, const struct http_request *req)
{
	const struct http_header *h;
	const char *v, *e, *t;
	size_t i, tl;
	int bits = 0, n = 0, bad = 0;

	if (x->done)
		return 0;
	if (grpc_coded(req))
		return unscannable(s, x, "header", "a gRPC message coding");
	if (req->framing == HTTP_BODY_NONE)
		return 0;
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (!http_header_is(h, "Content-Encoding"))
			continue;
		for (v = h->value.p, e = v + h->value.len; v < e; v = t + 1) {
			if ((t = memchr(v, ',', (size_t)(e - v))) == NULL)
				t = e;
			while (v < t && (*v == ' ' || *v == '\t'))
				v++;
			for (tl = (size_t)(t - v); tl > 0 && (v[tl - 1] == ' ' ||
			    v[tl - 1] == '\t'); tl--)
				;
			if (tl == 0 || (tl == 8 && strncasecmp(v, "identity",
			    8) == 0))
				continue;
			n++;
			if ((tl == 4 && strncasecmp(v, "gzip", 4) == 0) ||
			    (tl == 6 && strncasecmp(v, "x-gzip", 6) == 0))
				bits = 16 + MAX_WBITS;
			else if (tl == 7 && strncasecmp(v, "deflate", 7) == 0)
				bits = MAX_WBITS;
			else
				bad = 1;
		}
	}
	if (n == 0)
		return 0;
	if (bad || n > 1)
		return unscannable(s, x, "header", bad ? "a content coding it "
		    "cannot decode" : "more than one content coding");
	if ((x->z = calloc(1, sizeof(*x->z))) == NULL ||
	    (x->zbuf = malloc(INFLATE_CHUNK)) == NULL ||
	    inflateInit2(x->z, bits) != Z_OK) {
		free(x->z);
		x->z = NULL;
		exchange_deny(s, 503, REASON_INTERNAL_ERROR,
		    "cannot scan the request for secrets");
		return -1;
	}
	x->zbits = bits;
	if (bits == 16 + MAX_WBITS && gz_watch(x) == -1) {
		exchange_deny(s, 503, REASON_INTERNAL_ERROR,
		    "cannot scan the request for secrets");
		return -1;
	}
	return 0;
}

int
dlp_request(struct exchange *s, const struct http_request *req)
{
	struct dlp_finding f;
	struct xdlp *x;
	const struct http_header *h;
	const char *q;
	char where[40], detail[160];
	size_t i, qoff, nl;
	int failed, hit = 0;

	if ((x = xdlp_get(s, &failed)) == NULL) {
		if (!failed)
			return 0;
		exchange_deny(s, 503, REASON_INTERNAL_ERROR,
		    "cannot scan the request for secrets");
		return -1;
	}
	memset(&f, 0, sizeof(f));
	q = memchr(req->path.p, '?', req->path.len);
	qoff = q != NULL ? (size_t)(q - req->path.p) : req->path.len;
	/* Any token is a method: 23 characters hold an AWS key id. */
	if (scan_part(x, req->method.p, req->method.len, NULL, 0, &f)) {
		snprintf(where, sizeof(where), "method");
		hit = 1;
	} else if (scan_part(x, req->path.p, qoff, NULL, 0, &f)) {
		snprintf(where, sizeof(where), "path");
		hit = 1;
	} else if (q != NULL && scan_part(x, q + 1, req->path.len - qoff - 1,
	    NULL, 0, &f)) {
		snprintf(where, sizeof(where), "query");
		hit = 1;
	}
	for (i = 0; !hit && i < req->n_headers; i++) {
		h = &req->headers[i];
		/*
		 * "name: value": the name is the keyword of an assignment. A
		 * name is any token, of any length: it is scanned whole.
		 */
		nl = h->name.len;
		hit = scan_part(x, h->name.p, nl, h->value.p, h->value.len, &f);
		if (hit)
			snprintf(where, sizeof(where), "header %.*s",
			    (int)(nl < 24 ? nl : 24), h->name.p);
	}
	(void)dlp_scan_reset(x->scan);
	if (!hit)
		return body_coding(s, x, req);
	if (finding(s, x, where, &f, detail, sizeof(detail)) == 0)
		return 0;
	exchange_deny(s, 403, REASON_SECRET_DETECTED, detail);
	return -1;
}

/* The refusal of a body found carrying a secret (block). */
static void
body_refuse(struct exchange *s, const char *detail)
{
	if (!s->fwd.resp_head_done)
		exchange_deny(s, 403, REASON_SECRET_DETECTED, detail);
	else {
		exchange_log(s, VERDICT_DENY, s->fwd.status,
		    REASON_SECRET_DETECTED);
		exchange_close(s, CLOSE_REFUSED);
	}
}

/* What cannot be scanned does not pass (block and report alike). */
static int
body_fail(struct exchange *s, struct xdlp *x)
{
	x->done = 1;
	if (!s->fwd.resp_head_done)
		exchange_deny(s, 503, REASON_INTERNAL_ERROR,
		    "cannot scan the request for secrets");
	else {
		exchange_log(s, VERDICT_ERROR, s->fwd.status,
		    REASON_INTERNAL_ERROR);
		exchange_close(s, CLOSE_REFUSED);
	}
	return -1;
}

static int	scan_feed(struct exchange *, struct xdlp *, const char *,
		    size_t, const char *);

/* The member's header fields, whole, into the body's scan (-1 refused). */
static int
gz_fields(struct exchange *s, struct xdlp *x, const char *where)
{
	const gz_header *h = x->gzh;
	size_t nl = h->name != NULL ? strnlen((const char *)h->name,
	    h->name_max) : 0;
	size_t cl = h->comment != NULL ? strnlen((const char *)h->comment,
	    h->comm_max) : 0;

	/* Longer than kept: zlib cut it, so it cannot be read whole. */
	if (nl == h->name_max || cl == h->comm_max ||
	    (h->extra != NULL && h->extra_len > h->extra_max))
		return unscannable(s, x, where, "a gzip header field longer "
		    "than 4 KiB");
	if (h->extra != NULL && h->extra_len > 0 && (scan_feed(s, x,
	    (const char *)h->extra, h->extra_len, where) == -1 ||
	    scan_feed(s, x, "\n", 1, where) == -1))
		return -1;
	if (nl > 0 && (scan_feed(s, x, (const char *)h->name, nl, where) == -1 ||
	    scan_feed(s, x, "\n", 1, where) == -1))
		return -1;
	if (cl > 0 && (scan_feed(s, x, (const char *)h->comment, cl,
	    where) == -1 || scan_feed(s, x, "\n", 1, where) == -1))
		return -1;
	return 0;
}

/*
 * Coded body bytes: inflated, the payload scanned (-1 refused, 0 go on).
 * gzip may hold several members one after another; "deflate" sent without
 * its zlib header (raw, as some clients do) is tried raw once.
 */
static int
inflate_feed(struct exchange *s, struct xdlp *x, const char *p, size_t n,
    const char *where)
{
	z_stream *z = x->z;
	size_t got;
	int rc, first = x->zin == 0;

	z->next_in = (Bytef *)(uintptr_t)p;
	z->avail_in = (uInt)n;
	x->zin += n;
	while (!x->done && x->z != NULL) {
		if (x->zend) {
			if (z->avail_in == 0)
				return 0;
			if (x->zbits != 16 + MAX_WBITS || inflateReset(z) != Z_OK)
				return unscannable(s, x, where,
				    "bytes after the end of its coding");
			if (gz_watch(x) == -1)
				return unscannable(s, x, where, "no memory");
			x->zend = 0;
		}
		z->next_out = x->zbuf;
		z->avail_out = INFLATE_CHUNK;
		rc = inflate(z, Z_NO_FLUSH);
		got = INFLATE_CHUNK - z->avail_out;
		if (rc == Z_DATA_ERROR && x->zbits == MAX_WBITS && first &&
		    z->total_out == 0) {
			x->zbits = -MAX_WBITS;
			if (inflateReset2(z, -MAX_WBITS) != Z_OK)
				return unscannable(s, x, where, "no memory");
			z->next_in = (Bytef *)(uintptr_t)p;
			z->avail_in = (uInt)n;
			continue;
		}
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
			return unscannable(s, x, where, "it does not decode");
		if (x->gzh != NULL && x->gzh->done == 1 && !x->gzh_fed) {
			x->gzh_fed = 1;
			if (gz_fields(s, x, where) == -1)
				return -1;
			if (x->done)
				return 0;
		}
		if (got > 0) {
			x->zout += got;
			if (x->zout > INFLATE_MAX)
				return unscannable(s, x, where,
				    "it decodes to more than 256 MiB");
			if (scan_feed(s, x, (const char *)x->zbuf, got,
			    where) == -1)
				return -1;
		}
		if (rc == Z_STREAM_END)
			x->zend = 1;
		else if (z->avail_out != 0 || (rc == Z_BUF_ERROR && got == 0))
			return 0;	/* all taken: more input needed */
	}
	/* Report mode may have given the coding up: the rest as it comes. */
	return 0;
}

/* -1: refused (answered unless x->quiet), 0: go on. */
static int
body_feed(struct exchange *s, struct xdlp *x, const char *p, size_t n,
    const char *where)
{
	if (n == 0 || x->done)
		return 0;
	if (x->z != NULL)
		return inflate_feed(s, x, p, n, where);
	return scan_feed(s, x, p, n, where);
}

/* -1: a finding refuses (answered unless x->quiet), 0: go on. */
static int
scan_feed(struct exchange *s, struct xdlp *x, const char *p, size_t n,
    const char *where)
{
	struct dlp_finding f;
	char detail[160];

	if (n == 0 || x->done)
		return 0;
	memset(&f, 0, sizeof(f));
	if (dlp_scan_feed(x->scan, p, n, &f) == 0)
		return 0;
	if (finding(s, x, where, &f, detail, sizeof(detail)) == 0)
		return 0;
	if (!x->quiet)
		body_refuse(s, detail);
	return -1;
}

/*
 * The body ended: its coding with it, whole (a gzip or deflate stream cut
 * short does not decode), so that nothing after the body -- a WebSocket's
 * messages -- is read through it. -1 refused, 0 go on.
 */
static int
coding_end(struct exchange *s, struct xdlp *x, const char *where)
{
	if (x->z == NULL)
		return 0;
	if (!x->zend && x->zin > 0)
		return unscannable(s, x, where, "its coding does not end");
	inflateEnd(x->z);
	free(x->z);
	x->z = NULL;
	return 0;
}

/* The body ended: what the decoders held is scanned too (-1: refused). */
static int
body_end(struct exchange *s, struct xdlp *x, const char *where)
{
	struct dlp_finding f;
	char detail[160];

	if (x->done)
		return 0;
	if (coding_end(s, x, where) == -1)
		return -1;
	memset(&f, 0, sizeof(f));
	if (dlp_scan_end(x->scan, &f) == 0)
		return 0;
	if (finding(s, x, where, &f, detail, sizeof(detail)) == 0)
		return 0;
	if (!x->quiet)
		body_refuse(s, detail);
	return -1;
}

/* The first n bytes of buf, payload, fed in order. */
static int
feed_evbuffer(struct exchange *s, struct xdlp *x, struct evbuffer *buf,
    size_t n, const char *where)
{
	struct evbuffer_iovec iov[16];
	struct evbuffer_ptr at;
	size_t off = 0, take;
	int i, nvec;

	while (off < n) {
		if (evbuffer_ptr_set(buf, &at, off, EVBUFFER_PTR_SET) == -1 ||
		    (nvec = evbuffer_peek(buf, (ev_ssize_t)(n - off), &at,
		    iov, 16)) <= 0)
			break;
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && off < n; i++) {
			take = iov[i].iov_len < n - off ? iov[i].iov_len : n - off;
			if (body_feed(s, x, iov[i].iov_base, take, where) == -1)
				return -1;
			off += take;
		}
	}
	return 0;
}

struct chunk_feed {
	struct exchange	*s;
	struct xdlp	*x;
	int		 refused;
};

static void
chunk_cb(const char *p, size_t n, void *arg)
{
	struct chunk_feed *cf = arg;

	if (!cf->refused && body_feed(cf->s, cf->x, p, n, "body") == -1)
		cf->refused = 1;
}

/* The second scanner, made at need (WebSocket control, chunk extensions). */
static int
ctl_scan(struct exchange *s, struct xdlp *x)
{
	if (x->ctl.scan == NULL && ((x->ctl.scan = dlp_scan_new(x->pd->set,
	    skip_cb, x)) == NULL || seek_new(s, x, &x->ctl) == -1))
		return -1;
	return 0;
}

/*
 * Chunk extensions: framing the gateway relays as it came, so they are
 * scanned too, the body's together as one stream of their own (a secret
 * cut across several chunk-size lines is found). ended: the body's end.
 */
static int
ext_feed(struct exchange *s, struct xdlp *x, const char *p, size_t n,
    int ended)
{
	struct dlp_finding f;
	char detail[160];
	int rc;

	if (x->done || (ended && x->ctl.scan == NULL))
		return 0;
	if (ctl_scan(s, x) == -1)
		return body_fail(s, x);
	memset(&f, 0, sizeof(f));
	rc = ended ? dlp_scan_end(x->ctl.scan, &f) :
	    dlp_scan_feed(x->ctl.scan, p, n, &f);
	if (rc == 0 || finding(s, x, "chunk-extension", &f, detail,
	    sizeof(detail)) == 0)
		return 0;
	body_refuse(s, detail);
	return -1;
}

static void
ext_cb(const char *p, size_t n, void *arg)
{
	struct chunk_feed *cf = arg;

	/* One stream for all of them: a line's end (p NULL) is no boundary. */
	if (p != NULL && !cf->refused && ext_feed(cf->s, cf->x, p, n, 0) == -1)
		cf->refused = 1;
}

/*
 * Trailer fields (chunked): held back until the body ends (at most 8 KiB,
 * the parser's bound), then scanned as a stream of their own; raw: the end
 * of the dry run, tl the trailer bytes in it. -1 refused, 0 go on.
 */
static int
trailer_scan(struct exchange *s, struct xdlp *x, struct evbuffer *in,
    size_t raw, size_t tl)
{
	struct dlp_finding f;
	struct evbuffer_ptr at;
	char detail[160], *t;
	int rc;

	if (x->done || tl <= 2)		/* the final CRLF alone: none */
		return 0;
	if ((t = malloc(tl)) == NULL)
		return body_fail(s, x);
	if (evbuffer_ptr_set(in, &at, raw - tl, EVBUFFER_PTR_SET) == -1 ||
	    evbuffer_copyout_from(in, &at, t, tl) != (ev_ssize_t)tl) {
		free(t);
		return body_fail(s, x);
	}
	memset(&f, 0, sizeof(f));
	rc = dlp_scan_buf(x->scan, t, tl, &f);
	free(t);
	if (rc == 0 || finding(s, x, "trailer", &f, detail,
	    sizeof(detail)) == 0)
		return 0;
	body_refuse(s, detail);
	return -1;
}

int
dlp_body_h1(struct exchange *s, size_t *limit)
{
	struct forward *fw = &s->fwd;
	struct evbuffer *in;
	struct evbuffer_iovec iov[16];
	struct evbuffer_ptr at;
	struct http_chunked dry;
	struct chunk_feed cf;
	struct xdlp *x = s->dlp;
	size_t len, raw = 0, tl;
	int i, nvec, done = 0;

	if (x == NULL || x->done || EXCHANGE_CBEV(s) == NULL)
		return 0;
	in = bufferevent_get_input(s->c->cbev);
	len = evbuffer_get_length(in);
	if (len > *limit)
		len = *limit;
	if (fw->req_framing == HTTP_BODY_LENGTH) {
		if (len > fw->req_left)
			len = (size_t)fw->req_left;
		if (feed_evbuffer(s, x, in, len, "body") == -1)
			return -1;
		if (len == fw->req_left)
			return body_end(s, x, "body");
		return 0;
	}
	if (fw->req_framing != HTTP_BODY_CHUNKED)
		return 0;
	/* The payload of exactly the raw bytes move_body will move. */
	cf.s = s;
	cf.x = x;
	cf.refused = 0;
	dry = fw->req_chunk;
	while (!done && raw < len && !cf.refused) {
		if (evbuffer_ptr_set(in, &at, raw, EVBUFFER_PTR_SET) == -1 ||
		    (nvec = evbuffer_peek(in, (ev_ssize_t)(len - raw), &at, iov,
		    16)) <= 0)
			break;
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && !done && raw < len && !cf.refused; i++) {
			size_t seg = iov[i].iov_len < len - raw ?
			    iov[i].iov_len : len - raw;
			ssize_t r = http_chunked_decode_ext(&dry,
			    iov[i].iov_base, seg, &done, chunk_cb, ext_cb, &cf);

			if (r < 0)
				return 0;	/* move_body refuses the framing */
			raw += (size_t)r;
		}
	}
	if (cf.refused)
		return -1;
	tl = dry.trailer_len - fw->req_chunk.trailer_len;
	if (!done) {
		if (tl > 0 && tl <= raw && *limit > raw - tl)
			*limit = raw - tl;	/* until the trailers are whole */
		return 0;
	}
	if (body_end(s, x, "body") == -1 || ext_feed(s, x, NULL, 0, 1) == -1)
		return -1;
	return trailer_scan(s, x, in, raw, tl <= raw ? tl : raw);
}

int
dlp_body_buf(struct exchange *s, struct evbuffer *buf, size_t n, int ended,
    const char *where)
{
	struct xdlp *x = s->dlp;
	int failed;

	if (x == NULL && (x = xdlp_get(s, &failed)) == NULL)
		return 0;
	if (x->done)
		return 0;
	if (feed_evbuffer(s, x, buf, n, where) == -1)
		return -1;
	return ended ? body_end(s, x, where) : 0;
}

int
dlp_payload(struct exchange *s, struct evbuffer *payload, size_t n,
    const char *where)
{
	struct xdlp *x = s->dlp;
	int rc;

	if (x == NULL || x->done || n == 0)
		return 0;
	x->quiet = 1;
	rc = feed_evbuffer(s, x, payload, n, where);
	x->quiet = 0;
	return rc;
}

int
dlp_payload_end(struct exchange *s, const char *where)
{
	struct xdlp *x = s->dlp;
	int rc;

	if (x == NULL || x->done)
		return 0;
	x->quiet = 1;
	rc = body_end(s, x, where);
	x->quiet = 0;
	return rc;
}

int
dlp_control(struct exchange *s, struct evbuffer *payload, size_t n)
{
	struct xdlp *x = s->dlp;
	struct dlp_finding f;
	char detail[160];
	unsigned char *p;

	if (x == NULL || x->done || n == 0)
		return 0;
	/* A stream of its own: a ping between two fragments of a message. */
	if (ctl_scan(s, x) == -1)
		return -1;
	if ((p = evbuffer_pullup(payload, (ev_ssize_t)n)) == NULL)
		return -1;
	memset(&f, 0, sizeof(f));
	if (dlp_scan_buf(x->ctl.scan, p, n, &f) == 0)
		return 0;
	return finding(s, x, "websocket-control", &f, detail,
	    sizeof(detail)) == 1 ? -1 : 0;
}

int
dlp_trailers(struct exchange *s, const char *t, size_t n)
{
	struct dlp_finding f;
	struct xdlp *x;
	char detail[160];
	int failed = 0;

	if (n == 0 || (x = xdlp_get(s, &failed)) == NULL)
		return failed ? -1 : 0;
	memset(&f, 0, sizeof(f));
	if (dlp_scan_buf(x->scan, t, n, &f) == 0)
		return 0;
	return finding(s, x, "trailer", &f, detail, sizeof(detail));
}
