/*
 * What goes to the origin for a decided request: its head (HTTP/1.1) or
 * its fields (HTTP/2), built under the exchange's credential plan, the
 * placeholders swapped for secrets in wiped memory, and the body framing
 * the gateway relays by. The front-ends decide; this builds.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"
#include "vault/vault.h"

/* The placeholder of credential c for this sandbox, swapped for the secret. */
static int
swap_into(struct exchange *s, const struct policy_credential *c,
    const char *v, size_t len, int query, struct vault_wbuf *out)
{
	const struct cred_plan *plan = &s->fwd.plan;
	size_t j;
	int r;

	for (j = 0; j < plan->n_bound; j++)
		if (plan->bound[j] == c)
			break;
	if (j == plan->n_bound || plan->snap == NULL)
		return -1;
	/* aws_sigv4: the request re-signed (proxy_sigv4.c), never the value. */
	if (c->kind == POLICY_CRED_AWS_SIGV4) {
		if (plan->x->sig_cred != c || plan->x->sig_out == NULL ||
		    plan->x->sig_query != query)
			return -1;
		return vault_wbuf_add(out, plan->x->sig_out,
		    strlen(plan->x->sig_out));
	}
	/* kind oauth2: the access token the gateway obtained (proxy_oauth2.c). */
	r = vault_swap(plan->snap, c->kind == POLICY_CRED_OAUTH2 &&
	    c->oauth2 != NULL ? c->oauth2->access_name : c->secret,
	    plan->x->ph[j], v, len, query, out);
	if (r < 0)
		return -1;
	if (r == 0)
		vault_wbuf_add(out, v, len);
	return 0;
}

/* An aws_sigv4 header form re-signed: the sandbox's session token is not sent. */
static int
sig_drops(const struct cred_plan *plan, const struct http_header *hd)
{
	return plan->x != NULL && plan->x->sig_cred != NULL &&
	    !plan->x->sig_query && http_header_is(hd, "X-Amz-Security-Token");
}

/* ... the real one is, when the key has one: "name: value\r\n" or h2's pair. */
static int
sig_token(struct exchange *s, struct vault_wbuf *h, int h2)
{
	const struct cred_plan *plan = &s->fwd.plan;
	const unsigned char *tok;
	size_t j, len;

	if (plan->x == NULL || !plan->x->sig_token)
		return 0;
	for (j = 0; j < plan->n_bound && plan->bound[j] != plan->x->sig_cred; j++)
		;
	if (j == plan->n_bound || (tok = vault_snapshot_value(plan->snap,
	    plan->x->part[j][2], &len)) == NULL)
		return -1;
	vault_wbuf_add(h, h2 ? "x-amz-security-token\0" :
	    "X-Amz-Security-Token: ", h2 ? 21 : 22);
	vault_wbuf_add(h, tok, len);
	vault_wbuf_add(h, h2 ? "\0" : "\r\n", h2 ? 1 : 2);
	return 1;
}

/* The request target, with the query's placeholder swapped when allowed. */
static int
write_target(struct exchange *s, const struct http_request *req,
    struct vault_wbuf *h)
{
	const char *q = memchr(req->path.p, '?', req->path.len);
	size_t qoff;

	if (s->fwd.plan.query_cred == NULL || q == NULL) {
		vault_wbuf_add(h, req->path.p, req->path.len);
		return 0;
	}
	qoff = (size_t)(q - req->path.p);
	vault_wbuf_add(h, req->path.p, qoff);
	/* A presigned URL's query goes out re-signed, '?' and all. */
	return swap_into(s, s->fwd.plan.query_cred, q, req->path.len - qoff, 1, h);
}

/*
 * Range, If-Range and Request-Range (an old spelling some servers still
 * honour) are dropped from every request to a host a static credential or
 * an OAuth2 one is bound to, a secret swapped into it or not: the client
 * would pick the byte ranges of an answer that echoes the request -- or
 * one that shows a key the host keeps -- and the scrubber cannot
 * recognise a secret it only ever sees in pieces. The origin then answers
 * whole (RFC 9110 14.2: a server may ignore Range). aws_sigv4 sends no
 * secret key (its key id and session token sign nothing without it), and
 * object stores need ranges: it keeps them.
 */
static int
range_dropped(const struct cred_plan *plan, const struct http_header *hd)
{
	size_t j;

	if (!http_header_is(hd, "Range") && !http_header_is(hd, "If-Range") &&
	    !http_header_is(hd, "Request-Range"))
		return 0;
	if (plan->query_cred != NULL || plan->n_also > 0)
		return 1;
	for (j = 0; j < plan->n_bound; j++)
		if (plan->bound[j]->kind != POLICY_CRED_AWS_SIGV4)
			return 1;
	return 0;
}

/* The request head the origin gets: hop-by-hop removed, Via added. */
static int
write_origin_head(struct exchange *s, const struct http_request *req,
    int replace_host, struct vault_wbuf *h)
{
	const struct cred_plan *plan = &s->fwd.plan;
	char fr[48];
	size_t i;
	int v6, fl;

	vault_wbuf_add(h, req->method.p, req->method.len);
	vault_wbuf_add(h, " ", 1);
	if (write_target(s, req, h) == -1)
		return -1;
	vault_wbuf_add(h, req->version_minor ? " HTTP/1.1\r\n" :
	    " HTTP/1.0\r\n", 11);
	if (replace_host) {
		/* RFC 9112 §3.2.2: the target URI's authority replaces Host. */
		v6 = memchr(req->host.p, ':', req->host.len) != NULL;
		vault_wbuf_printf(h, "Host: %s%.*s%s", v6 ? "[" : "",
		    (int)req->host.len, req->host.p, v6 ? "]" : "");
		if (req->has_port)
			vault_wbuf_printf(h, ":%u", req->port);
		vault_wbuf_add(h, "\r\n", 2);
	}
	for (i = 0; i < req->n_headers; i++) {
		const struct http_header *hd = &req->headers[i];
		if (!http_header_forwardable(hd, req->headers, req->n_headers))
			continue;
		if (replace_host && http_header_is(hd, "Host"))
			continue;
		/* Bound hosts answer uncompressed, so the scrubber sees the secret. */
		if (plan->n_bound + plan->n_also > 0 &&
		    http_header_is(hd, "Accept-Encoding"))
			continue;
		if (s->fwd.drop_upgrade && http_header_is(hd, "HTTP2-Settings"))
			continue;
		/* No WebSocket extension: compression hides placeholders. */
		if (http_header_is(hd, "Sec-WebSocket-Extensions"))
			continue;
		if (sig_drops(plan, hd) || range_dropped(plan, hd))
			continue;
		vault_wbuf_add(h, hd->name.p, hd->name.len);
		vault_wbuf_add(h, ": ", 2);
		if (cred_plan_swap(plan, i) != NULL) {
			if (swap_into(s, cred_plan_swap(plan, i), hd->value.p, hd->value.len,
			    0, h) == -1)
				return -1;
		} else
			vault_wbuf_add(h, hd->value.p, hd->value.len);
		vault_wbuf_add(h, "\r\n", 2);
	}
	if (sig_token(s, h, 0) == -1)
		return -1;
	if (plan->n_bound + plan->n_also > 0)
		vault_wbuf_add(h, "Accept-Encoding: identity\r\n", 27);
	/* The framing the gateway relays by, whatever the client's headers said. */
	if ((fl = http_framing_header(req->framing, req->content_length, fr,
	    sizeof(fr))) < 0)
		return -1;
	vault_wbuf_add(h, fr, (size_t)fl);
	if (req->upgrade && !s->fwd.drop_upgrade) {
		const struct http_header *u = http_header_find(req->headers,
		    req->n_headers, "Upgrade");
		vault_wbuf_printf(h, "Connection: upgrade\r\nUpgrade: %.*s\r\n",
		    (int)u->value.len, u->value.p);
	} else if (req->version_minor == 0) {
		vault_wbuf_add(h, "Connection: close\r\n", 19);
	}
	vault_wbuf_add(h, req->version_minor ? "Via: 1.1 sandgate\r\n\r\n" :
	    "Via: 1.0 sandgate\r\n\r\n", 21);
	return 0;
}

/*
 * The request's fields for an HTTP/2 origin (proxy_h2_origin.c), swapped by
 * the same plan: "name\0value\0" pairs into h, pseudo-fields first, names
 * lower-case; *n pairs. The origin answers uncompressed on bound hosts.
 */
int
http_h2_fields(struct exchange *s, const struct http_request *req,
    struct vault_wbuf *h, size_t *n)
{
	const struct cred_plan *plan = &s->fwd.plan;
	size_t i, j;

	*n = 0;
	vault_wbuf_printf(h, ":method%c%.*s%c:scheme%chttps%c:authority%c%.*s%c"
	    ":path%c", 0, (int)req->method.len, req->method.p, 0, 0, 0, 0,
	    (int)req->host_header.len, req->host_header.p, 0, 0);
	if (write_target(s, req, h) == -1)
		return -1;
	vault_wbuf_printf(h, "%cte%ctrailers%c", 0, 0, 0);
	*n = 5;
	for (i = 0; i < req->n_headers; i++) {
		const struct http_header *hd = &req->headers[i];
		if (!http_header_forwardable(hd, req->headers, req->n_headers) ||
		    http_header_is(hd, "Host") || http_header_is(hd, "TE"))
			continue;
		if (plan->n_bound + plan->n_also > 0 &&
		    (http_header_is(hd, "Accept-Encoding") ||
		    http_header_is(hd, "grpc-accept-encoding")))
			continue;
		if (sig_drops(plan, hd) || range_dropped(plan, hd))
			continue;
		for (j = 0; j < hd->name.len; j++) {
			char c = (char)tolower((unsigned char)hd->name.p[j]);
			vault_wbuf_add(h, &c, 1);
		}
		vault_wbuf_add(h, "", 1);
		if (cred_plan_swap(plan, i) != NULL) {
			if (swap_into(s, cred_plan_swap(plan, i), hd->value.p,
			    hd->value.len, 0, h) == -1)
				return -1;
		} else
			vault_wbuf_add(h, hd->value.p, hd->value.len);
		vault_wbuf_add(h, "", 1);
		(*n)++;
	}
	switch (sig_token(s, h, 1)) {
	case -1:
		return -1;
	case 1:
		(*n)++;
		break;
	}
	if (plan->n_bound + plan->n_also > 0) {
		vault_wbuf_printf(h, "grpc-accept-encoding%cidentity%c"
		    "accept-encoding%cidentity%c", 0, 0, 0, 0);
		*n += 2;
	}
	return 0;
}

/*
 * The head is built whole in a vault_wbuf and goes to the origin by
 * reference: the swapped secret is never in memory that is not wiped
 * (docs/credentials.md, "Where a secret value is in memory").
 */
int
request_build_head(struct exchange *s, const struct http_request *req,
    int replace_host)
{
	struct vault_wbuf *h;

	/* One head per exchange: built once, never over another's. */
	if (s->fwd.head != NULL ||
	    (s->fwd.head = evbuffer_new()) == NULL)
		return -1;
	if ((h = vault_wbuf_new()) == NULL)
		return -1;
	if (write_origin_head(s, req, replace_host, h) == -1 ||
	    vault_wbuf_hand(h, s->fwd.head) == -1) {
		vault_wbuf_free(h);
		return -1;
	}
	return 0;
}

/* Placeholders: swapped where they belong, refused everywhere else. */
int
request_cred_check(struct exchange *s, const struct http_request *req)
{
	enum sg_reason reason;
	char detail[256];

	if (git_write_refused(s, req)) {
		exchange_deny(s, 403, REASON_GIT_REF_DENIED, "git: only smart "
		    "HTTP pushes are read; a WebDAV (dumb HTTP) write into a "
		    "repository is refused under a rule with git:");
		return -1;
	}
	if (dlp_request(s, req) == -1)
		return -1;
	if (cred_request(s, req, &s->fwd.plan, &reason) == 0) {
		if (oauth2_plan_ready(s, req, detail, sizeof(detail)) == -1) {
			exchange_deny(s, 0, REASON_CRED_REFRESH_FAILED, detail);
			return -1;
		}
		if (sigv4_plan(s, req, &reason, detail, sizeof(detail)) == -1) {
			exchange_deny(s, 0, reason, detail);
			return -1;
		}
		return ws_request_check(s, req);
	}
	if (reason == REASON_KEEPER_UNAVAILABLE)
		snprintf(detail, sizeof(detail), "credential %s cannot be swapped "
		    "in: the key keeper is not available", s->fwd.plan.cred);
	else if (reason == REASON_CRED_UNAVAILABLE)
		snprintf(detail, sizeof(detail), "credential %s cannot be swapped "
		    "in: its secret is not loaded", s->fwd.plan.cred);
	else if (reason == REASON_CRED_REQUIRED)
		snprintf(detail, sizeof(detail), "credential %s is required: "
		    "requests to this host carry its placeholder",
		    s->fwd.plan.cred);
	else if (reason == REASON_CRED_SCOPE)
		snprintf(detail, sizeof(detail), "credential %s is not swapped "
		    "for this method and path (its scope)", s->fwd.plan.cred);
	else
		snprintf(detail, sizeof(detail), "credential %s may not be used "
		    "here", s->fwd.plan.cred);
	/* The table's status: 403 for misuse, 502 / 503 for what failed. */
	exchange_deny(s, 0, reason, detail);
	return -1;
}

void
forward_prepare(struct exchange *s, const struct http_request *req)
{
	struct forward *f = &s->fwd;

	f->req_framing = req->framing;
	f->req_left = req->content_length;
	http_chunked_init(&f->req_chunk);
	f->upgrade = req->upgrade && !f->drop_upgrade;
	f->client_keep_alive = req->keep_alive && !f->upgrade;
	f->client_minor = req->version_minor;
	git_prepare(s, req);
}

