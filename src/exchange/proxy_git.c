/*
 * Which refs a git push may update (docs/policy.md, "git"): a receive-pack
 * request under a rule with git: is held, head and body, until its command
 * list (parse/pktline.c) is read; a ref outside the rule refuses it whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "core/reason.h"
#include "core/util.h"
#include "exchange/exchange.h"
#include "parse/pktline.h"

#define GIT_SERVICE	"git-receive-pack"
#define GIT_CTYPE	"application/x-git-receive-pack"

/*
 * p[0..len) with its percent-escapes decoded into dec (at most cap bytes):
 * the length written. *full (when not NULL): 1 when p did not fit.
 */
static size_t
pct_decode(const char *p, size_t len, char *dec, size_t cap, int *full)
{
	size_t n = 0, i;
	int hi, lo;

	for (i = 0; i < len && n < cap; i++) {
		if (p[i] == '%' && i + 2 < len &&
		    (hi = util_hexval((unsigned char)p[i + 1])) >= 0 &&
		    (lo = util_hexval((unsigned char)p[i + 2])) >= 0) {
			dec[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			dec[n++] = p[i];
	}
	if (full != NULL)
		*full = i < len;
	return n;
}

/*
 * 1 when the request is a receive-pack POST: its path (query cut,
 * percent-escapes decoded, trailing slashes dropped) ends in
 * "git-receive-pack" in any case, or its Content-Type is git's request
 * type. Origins differ in how they route; either is enough to hold it.
 */
static int
is_receive_pack(const struct http_request *req)
{
	const struct http_header *h;
	const char *p = req->path.p, *q;
	char dec[512];
	size_t n, i, len = req->path.len, sl = strlen(GIT_SERVICE);

	/* Every Content-Type: origins differ in which of two they read. */
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (http_header_is(h, "Content-Type") &&
		    h->value.len >= strlen(GIT_CTYPE) &&
		    strncasecmp(h->value.p, GIT_CTYPE, strlen(GIT_CTYPE)) == 0)
			return 1;
	}
	if ((q = memchr(p, '?', len)) != NULL)
		len = (size_t)(q - p);
	/* Only the tail matters: decode the last bytes of the path. */
	i = len > sizeof(dec) ? len - sizeof(dec) : 0;
	n = pct_decode(p + i, len - i, dec, sizeof(dec), NULL);
	while (n > 0 && dec[n - 1] == '/')
		n--;
	return n >= sl && strncasecmp(dec + n - sl, GIT_SERVICE, sl) == 0;
}

/*
 * 1 when the path (query and fragment cut, escapes decoded, a backslash
 * read as '/') names a part of a git repository that git's dumb-HTTP push
 * (WebDAV, `git http-push`) writes: a segment "refs", "objects" or
 * "hooks", or a last segment "HEAD", "packed-refs", "config" or
 * "shallow", in any case. A path too long to decode counts as one.
 */
static int
repo_internal(const char *p, size_t len)
{
	static const char *const anywhere[] = { "refs", "objects", "hooks" };
	static const char *const last[] = { "HEAD", "packed-refs", "config",
	    "shallow" };
	char dec[2048];
	size_t n, i, a, b;
	int full;

	for (i = 0; i < len && p[i] != '?' && p[i] != '#'; i++)
		;
	n = pct_decode(p, i, dec, sizeof(dec), &full);
	if (full)
		return 1;
	for (i = 0; i < n; i++)
		if (dec[i] == '\\')
			dec[i] = '/';
	while (n > 0 && dec[n - 1] == '/')
		n--;
	for (a = 0; a < n; a = b + 1) {
		for (b = a; b < n && dec[b] != '/'; b++)
			;
		for (i = 0; i < sizeof(anywhere) / sizeof(anywhere[0]); i++)
			if (b - a == strlen(anywhere[i]) &&
			    strncasecmp(dec + a, anywhere[i], b - a) == 0)
				return 1;
		if (b == n)
			for (i = 0; i < sizeof(last) / sizeof(last[0]); i++)
				if (b - a == strlen(last[i]) &&
				    strncasecmp(dec + a, last[i], b - a) == 0)
					return 1;
	}
	return 0;
}

/* The path of a Destination header's value: an absolute URI's, or itself. */
static void
destination_path(const struct http_slice *v, const char **p, size_t *len)
{
	const char *s = v->p, *e = v->p + v->len, *q;

	*p = s;
	*len = v->len;
	if ((q = memchr(s, ':', v->len)) != NULL && q + 2 < e &&
	    q[1] == '/' && q[2] == '/') {
		for (q += 3; q < e && *q != '/'; q++)
			;
		*p = q;
		*len = (size_t)(e - q);
	}
}

int
git_write_refused(struct exchange *s, const struct http_request *req)
{
	static const char *const reads[] = { "GET", "HEAD", "POST", "OPTIONS",
	    "PROPFIND" };
	static const char *const dav[] = { "MKCOL", "COPY", "MOVE",
	    "PROPPATCH", "LOCK", "UNLOCK" };
	struct policy_rule_scope sc;
	const struct http_header *h;
	const char *m = s->fwd.method, *dp;
	size_t i, dlen;

	if (s->c->kind == KIND_INGRESS || s->pol == NULL ||
	    policy_rule_scope(s->pol, s->verdict.allow_rule, &sc) == -1 ||
	    !sc.git)
		return 0;
	for (i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		if (strcasecmp(m, reads[i]) == 0)
			return 0;
	for (i = 0; i < sizeof(dav) / sizeof(dav[0]); i++)
		if (strcasecmp(m, dav[i]) == 0)
			return 1;
	if (repo_internal(req->path.p, req->path.len))
		return 1;
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (!http_header_is(h, "Destination"))
			continue;
		destination_path(&h->value, &dp, &dlen);
		if (repo_internal(dp, dlen))
			return 1;
	}
	return 0;
}

void
git_prepare(struct exchange *s, const struct http_request *req)
{
	struct policy_rule_scope sc;
	const struct http_header *h;
	size_t i;

	s->fwd.git_hold = 0;
	if (s->c->kind == KIND_INGRESS || s->pol == NULL ||
	    policy_rule_scope(s->pol, s->verdict.allow_rule, &sc) == -1 ||
	    !sc.git ||
	    req->framing == HTTP_BODY_NONE || !is_receive_pack(req))
		return;
	s->fwd.git_hold = GIT_HOLD;
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		if (http_header_is(h, "Content-Encoding") && !(h->value.len == 8 &&
		    strncasecmp(h->value.p, "identity", 8) == 0))
			s->fwd.git_hold = GIT_HOLD_ENCODED;
	}
}

static void
dechunk_cb(const char *p, size_t n, void *arg)
{
	evbuffer_add(arg, p, n);
}

/*
 * The payload buffered so far into pl (at most what a command list may
 * take); *ended when the body ends within it, *full when no more bytes
 * can come while nothing is drained. -1: bad chunked framing.
 */
static int
git_payload(struct exchange *s, struct evbuffer *pl, int *ended, int *full)
{
	struct forward *f = &s->fwd;
	struct evbuffer *in;
	struct evbuffer_iovec iov[16];
	struct evbuffer_ptr at;
	struct http_chunked dry;
	size_t len, raw = 0, take;
	const char *tr;
	size_t trlen;
	int i, nvec, done = 0;

	*ended = *full = 0;
	if (s->is_stream) {
		in = fe_stream_body(s);
		*ended = fe_stream_body_end(s, &tr, &trlen);
		*full = fe_stream_full(s);
		len = in != NULL ? evbuffer_get_length(in) : 0;
		take = len < PKTLINE_LIST_MAX ? len : PKTLINE_LIST_MAX;
		if (take > 0 && evbuffer_add(pl, evbuffer_pullup(in,
		    (ev_ssize_t)take), take) == -1)
			return -1;
		return 0;
	}
	in = bufferevent_get_input(s->c->cbev);
	len = evbuffer_get_length(in);
	*full = len >= PROXY_READ_HWM;
	if (f->req_framing == HTTP_BODY_LENGTH) {
		take = len < f->req_left ? len : (size_t)f->req_left;
		*ended = take == f->req_left;
		if (take > PKTLINE_LIST_MAX)
			take = PKTLINE_LIST_MAX;
		if (take > 0 && evbuffer_add(pl, evbuffer_pullup(in,
		    (ev_ssize_t)take), take) == -1)
			return -1;
		return 0;
	}
	if (f->req_framing != HTTP_BODY_CHUNKED)
		return -1;
	/* A dry run of the decoder on a copy of its state: nothing drained. */
	dry = f->req_chunk;
	while (!done && raw < len && evbuffer_get_length(pl) < PKTLINE_LIST_MAX) {
		if (evbuffer_ptr_set(in, &at, raw, EVBUFFER_PTR_SET) == -1 ||
		    (nvec = evbuffer_peek(in, -1, &at, iov, 16)) <= 0)
			break;
		if (nvec > 16)
			nvec = 16;
		for (i = 0; i < nvec && !done; i++) {
			ssize_t r = http_chunked_decode(&dry, iov[i].iov_base,
			    iov[i].iov_len, &done, dechunk_cb, pl);
			if (r < 0)
				return -1;
			raw += (size_t)r;
		}
	}
	*ended = done;
	return 0;
}

static int
git_refuse(struct exchange *s, const char *detail)
{
	s->fwd.git_hold = 0;
	exchange_deny(s, 403, REASON_GIT_REF_DENIED, detail);
	return -1;
}

static int
git_op(enum pktline_op op)
{
	return op == PKTLINE_CREATE ? POLICY_GIT_CREATE :
	    op == PKTLINE_DELETE ? POLICY_GIT_DELETE : POLICY_GIT_UPDATE;
}

/* Every command inside the rule's git: push globs (and delete:). */
static int
git_check(struct exchange *s, const uint8_t *buf,
    const struct pktline_cmds *cmds)
{
	struct policy_rule_scope sc;
	const struct pktline_cmd *c;
	char detail[PKTLINE_REF_MAX + 160];
	size_t i;

	if (policy_rule_scope(s->pol, s->verdict.allow_rule, &sc) == -1 ||
	    !sc.git)
		return git_refuse(s, "the rule of this git push is gone");
	for (i = 0; i < cmds->n; i++) {
		c = &cmds->cmd[i];
		if (policy_git_ref_allowed(&sc, git_op(c->op),
		    (const char *)buf + c->ref_off, c->ref_len))
			continue;
		snprintf(detail, sizeof(detail), "git push: %s of %.*s not "
		    "allowed by %s (git: push%s)",
		    c->op == PKTLINE_DELETE ? "delete" :
		    c->op == PKTLINE_CREATE ? "create" : "update",
		    (int)c->ref_len, (const char *)buf + c->ref_off,
		    s->verdict.allow_rule, c->op == PKTLINE_DELETE &&
		    !sc.git_delete ?
		    ", delete: false" : "");
		return git_refuse(s, detail);
	}
	return 0;
}

int
git_gate(struct exchange *s)
{
	struct pktline_cmds *cmds;
	struct evbuffer *pl;
	const uint8_t *buf;
	size_t n;
	int rc, ended, full;

	if (s->fwd.git_hold == GIT_HOLD_ENCODED)
		return git_refuse(s, "git push: a body with a Content-Encoding "
		    "cannot be read, so its refs cannot be checked");
	if ((pl = evbuffer_new()) == NULL)
		return git_refuse(s, "git push: out of memory");
	if (git_payload(s, pl, &ended, &full) == -1) {
		evbuffer_free(pl);
		return git_refuse(s, "git push: a malformed request body");
	}
	n = evbuffer_get_length(pl);
	buf = n > 0 ? evbuffer_pullup(pl, -1) : (const uint8_t *)"";
	if ((cmds = malloc(sizeof(*cmds))) == NULL) {
		evbuffer_free(pl);
		return git_refuse(s, "git push: out of memory");
	}
	rc = pktline_parse_commands(buf, n, cmds);
	if (rc == PKTLINE_NEED_MORE && !ended && !full &&
	    n < PKTLINE_LIST_MAX) {
		free(cmds);
		evbuffer_free(pl);
		return 1;
	}
	if (rc <= 0) {
		char detail[160];

		snprintf(detail, sizeof(detail), "git push: %s",
		    pktline_strerror(rc));
		free(cmds);
		evbuffer_free(pl);
		return git_refuse(s, detail);
	}
	rc = git_check(s, buf, cmds);
	free(cmds);
	evbuffer_free(pl);
	if (rc == -1)
		return -1;
	/* Allowed: the head goes first, then the body as it is. */
	s->fwd.git_hold = 0;
	if (s->fwd.head != NULL)
		evbuffer_add_buffer(bufferevent_get_output(EXCHANGE_OBEV(s)),
		    s->fwd.head);
	return 0;
}
