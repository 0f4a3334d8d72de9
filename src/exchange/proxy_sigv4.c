/*
 * aws_sigv4 credentials (docs/credentials.md "aws_sigv4"): a request the
 * sandbox signed with its placeholder key id and secret is checked against
 * that signature, then re-signed with the real key over the request as it
 * leaves -- in the Authorization header, or the query of a presigned URL.
 * The real values come from the vault snapshot's parts (#id, #key,
 * #token) and live only in wiped memory here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "core/reason.h"
#include "exchange/exchange.h"
#include "vault/sigv4.h"
#include "vault/vault.h"

#define SIGV4_BODY_MAX	PROXY_READ_HWM	/* a head and body hashed: what one read buffer holds */

void
sigv4_plan_free(struct cred_plan_ext *x)
{
	if (x == NULL || x->sig_out == NULL)
		return;
	OPENSSL_cleanse(x->sig_out, x->sig_len);
	free(x->sig_out);
	x->sig_out = NULL;
	x->sig_len = 0;
}

static const struct http_header *
header_one(const struct http_request *req, const char *name, int *count)
{
	const struct http_header *h = NULL;
	size_t i;

	*count = 0;
	for (i = 0; i < req->n_headers; i++)
		if (http_header_is(&req->headers[i], name)) {
			if (h == NULL)
				h = &req->headers[i];
			(*count)++;
		}
	return h;
}

static int
auth_is_sigv4(const struct http_header *h)
{
	size_t i = 0;

	while (i < h->value.len && (h->value.p[i] == ' ' || h->value.p[i] == '\t'))
		i++;
	return h->value.len - i >= 5 && memcmp(h->value.p + i, "AWS4-", 5) == 0;
}

int
sigv4_wants_body(const struct http_request *req)
{
	const struct http_header *h;
	int n;

	if (req->framing != HTTP_BODY_LENGTH || req->content_length == 0 ||
	    req->expect_continue)
		return 0;
	if ((h = header_one(req, "Authorization", &n)) == NULL || n != 1 ||
	    !auth_is_sigv4(h))
		return 0;
	(void)header_one(req, "X-Amz-Content-SHA256", &n);
	return n == 0 && req->content_length <= SIGV4_BODY_MAX;
}

/* The query parameters a presigned URL carries, decoded. */
struct presigned {
	char		 algo[32];
	char		 cred[256];
	char		 date[32];
	char		 signed_headers[1024];
	char		 sig[80];
	int		 n_algo, n_cred, n_date, n_sh, n_sig, n_token, n_v2;
};

static void
pick(const char *v, size_t vlen, char *out, size_t outlen, int *n)
{
	char tmp[1024];
	size_t dl;

	(*n)++;
	if (vlen > sizeof(tmp)) {
		out[0] = '\0';
		(*n)++;		/* too long: as bad as twice */
		return;
	}
	dl = sigv4_unescape(v, vlen, tmp);
	if (dl >= outlen) {
		out[0] = '\0';
		(*n)++;
		return;
	}
	memcpy(out, tmp, dl);
	out[dl] = '\0';
}

static void
presigned_parse(const char *q, size_t len, struct presigned *ps)
{
	struct sigv4_param qp;
	size_t at = 0;
	char k[64];

	memset(ps, 0, sizeof(*ps));
	while (sigv4_query_next(q, len, &at, &qp)) {
		if (sigv4_param_name(&qp, k, sizeof(k)) == -1)
			continue;
		if (strcmp(k, "X-Amz-Security-Token") == 0)
			ps->n_token++;
		if (strcmp(k, "AWSAccessKeyId") == 0)
			ps->n_v2++;
		if (!qp.has_value)
			continue;
		if (strcmp(k, "X-Amz-Algorithm") == 0)
			pick(qp.value.p, qp.value.len, ps->algo, sizeof(ps->algo),
			    &ps->n_algo);
		else if (strcmp(k, "X-Amz-Credential") == 0)
			pick(qp.value.p, qp.value.len, ps->cred, sizeof(ps->cred),
			    &ps->n_cred);
		else if (strcmp(k, "X-Amz-Date") == 0)
			pick(qp.value.p, qp.value.len, ps->date, sizeof(ps->date),
			    &ps->n_date);
		else if (strcmp(k, "X-Amz-SignedHeaders") == 0)
			pick(qp.value.p, qp.value.len, ps->signed_headers,
			    sizeof(ps->signed_headers), &ps->n_sh);
		else if (strcmp(k, "X-Amz-Signature") == 0)
			pick(qp.value.p, qp.value.len, ps->sig, sizeof(ps->sig),
			    &ps->n_sig);
	}
}

/* What both signatures are computed over. */
struct sigctx {
	struct exchange		*s;
	const struct http_request *req;
	const struct policy_credential *c;
	size_t			 j;		/* c in plan->bound[] */
	struct sigv4_cred	 cred;
	struct sigv4_slice	 amz_date;
	struct sigv4_slice	 signed_headers;
	struct sigv4_slice	 their_sig;
	struct sigv4_slice	 payload;
	char			 payload_buf[SIGV4_HEX + 1];
	int			 presigned;
	const char		*qstart;	/* the query's first byte ('?' + 1); NULL none */
	size_t			 qlen;
	enum sg_reason		*reason;
	char			*detail;
	size_t			 dlen;
};

static int
refuse(struct sigctx *x, enum sg_reason r, const char *why)
{
	*x->reason = r;
	snprintf(x->detail, x->dlen, "credential %s: %s", x->c->name, why);
	return -1;
}

static int
amz_date_ok(const struct sigv4_slice *d, const struct sigv4_cred *c)
{
	size_t i;

	if (d->len != 16 || d->p[8] != 'T' || d->p[15] != 'Z' ||
	    memcmp(d->p, c->date.p, 8) != 0)
		return 0;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d->p[i] < '0' || d->p[i] > '9'))
			return 0;
	return 1;
}

/* SHA-256 of the body already read whole after the head (sigv4_wants_body). */
static int
body_hash(struct sigctx *x)
{
	static const char hex[] = "0123456789abcdef";
	struct exchange *s = x->s;
	const struct http_request *req = x->req;
	unsigned char md[SHA256_DIGEST_LENGTH];
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr at;
	struct evbuffer *in;
	size_t left, i;
	EVP_MD_CTX *ctx;
	int nv, k, ok = 1;

	if (req->framing == HTTP_BODY_NONE || (req->framing ==
	    HTTP_BODY_LENGTH && req->content_length == 0)) {
		memcpy(x->payload_buf, SIGV4_EMPTY_SHA256, SIGV4_HEX + 1);
		return 0;
	}
	if (s->is_stream || s->fwd.head_len == 0 || EXCHANGE_CBEV(s) == NULL ||
	    req->framing != HTTP_BODY_LENGTH ||
	    s->fwd.head_len + req->content_length > SIGV4_BODY_MAX)
		return -1;
	in = bufferevent_get_input(s->c->cbev);
	if (evbuffer_get_length(in) < s->fwd.head_len + req->content_length ||
	    evbuffer_ptr_set(in, &at, s->fwd.head_len, EVBUFFER_PTR_SET) == -1)
		return -1;
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	left = (size_t)req->content_length;
	while (left > 0 && ok) {
		if ((nv = evbuffer_peek(in, (ev_ssize_t)left, &at, v, 16)) <= 0) {
			ok = 0;
			break;
		}
		if (nv > 16)
			nv = 16;
		for (k = 0; k < nv && left > 0; k++) {
			size_t take = v[k].iov_len < left ? v[k].iov_len : left;

			if (EVP_DigestUpdate(ctx, v[k].iov_base, take) != 1)
				ok = 0;
			left -= take;
			if (left > 0 && evbuffer_ptr_set(in, &at, take,
			    EVBUFFER_PTR_ADD) == -1)
				ok = 0;
		}
	}
	if (!ok || EVP_DigestFinal_ex(ctx, md, NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	EVP_MD_CTX_free(ctx);
	for (i = 0; i < sizeof(md); i++) {
		x->payload_buf[2 * i] = hex[md[i] >> 4];
		x->payload_buf[2 * i + 1] = hex[md[i] & 15];
	}
	x->payload_buf[SIGV4_HEX] = '\0';
	return 0;
}

/* The payload hash both canonical requests end with. */
static int
payload_of(struct sigctx *x)
{
	const struct http_header *h;
	int n;

	h = header_one(x->req, "X-Amz-Content-SHA256", &n);
	if (n > 1)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "more than one "
		    "X-Amz-Content-SHA256");
	if (h != NULL) {
		x->payload.p = h->value.p;
		x->payload.len = h->value.len;
		if (sigv4_is_hex_hash(&x->payload) || (h->value.len == 16 &&
		    memcmp(h->value.p, "UNSIGNED-PAYLOAD", 16) == 0) ||
		    (h->value.len == 34 && memcmp(h->value.p,
		    "STREAMING-UNSIGNED-PAYLOAD-TRAILER", 34) == 0))
			return 0;
		if (h->value.len >= 10 && memcmp(h->value.p, "STREAMING-", 10) == 0)
			return refuse(x, REASON_AWS_CHUNKED, "aws-chunked "
			    "uploads sign each chunk with the key: they are not "
			    "re-signed (send the payload's SHA-256 or "
			    "UNSIGNED-PAYLOAD)");
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "X-Amz-Content-SHA256 "
		    "is not a SHA-256, UNSIGNED-PAYLOAD or a streaming mode");
	}
	if (x->presigned && sigv4_s3_style(&x->cred.service)) {
		x->payload.p = "UNSIGNED-PAYLOAD";
		x->payload.len = 16;
		return 0;
	}
	if (body_hash(x) == -1)
		return refuse(x, REASON_AWS_BODY, "the body must be hashed to "
		    "re-sign it: send X-Amz-Content-SHA256, or a body of at most "
		    "64 KiB with Content-Length and without Expect over "
		    "HTTP/1.1");
	x->payload.p = x->payload_buf;
	x->payload.len = SIGV4_HEX;
	return 0;
}

/* Signed headers the gateway does not send as they came cannot be re-signed. */
static int
signed_forwardable(struct sigctx *x)
{
	const struct http_request *req = x->req;
	size_t i, start = 0;
	char why[160];

	for (i = 0; i <= x->signed_headers.len; i++) {
		const char *nm = x->signed_headers.p + start;
		size_t nl = i - start, k;

		if (i < x->signed_headers.len && x->signed_headers.p[i] != ';')
			continue;
		start = i + 1;
		for (k = 0; k < req->n_headers; k++) {
			const struct http_header *h = &req->headers[k];

			if (h->name.len != nl || strncasecmp(h->name.p, nm, nl) != 0)
				continue;
			if (!http_header_forwardable(h, req->headers,
			    req->n_headers) || http_header_is(h,
			    "Sec-WebSocket-Extensions") || http_header_is(h,
			    "HTTP2-Settings")) {
				snprintf(why, sizeof(why), "signed header %.*s is "
				    "not forwarded, so it cannot be re-signed",
				    (int)(nl < 64 ? nl : 64), nm);
				return refuse(x, REASON_AWS_SIG_UNSUPPORTED, why);
			}
		}
	}
	return 0;
}

/*
 * The headers as they leave: the sandbox's X-Amz-Security-Token out, the
 * real one in (when the key has one), Accept-Encoding as identity (bound
 * hosts answer uncompressed). *n headers into out.
 */
static void
headers_out(struct sigctx *x, const char *token, size_t toklen,
    struct sigv4_header *out, size_t *n)
{
	const struct http_request *req = x->req;
	size_t i;

	*n = 0;
	for (i = 0; i < req->n_headers; i++) {
		const struct http_header *h = &req->headers[i];

		if (http_header_is(h, "X-Amz-Security-Token"))
			continue;
		out[*n].name = h->name.p;
		out[*n].nlen = h->name.len;
		if (http_header_is(h, "Accept-Encoding")) {
			out[*n].value = "identity";
			out[*n].vlen = 8;
		} else {
			out[*n].value = h->value.p;
			out[*n].vlen = h->value.len;
		}
		(*n)++;
	}
	if (token != NULL) {
		out[*n].name = "x-amz-security-token";
		out[*n].nlen = 20;
		out[*n].value = token;
		out[*n].vlen = toklen;
		(*n)++;
	}
}

/* SignedHeaders as they leave: x-amz-security-token only with a real token. */
static void
signed_out(const struct sigv4_slice *in, int token, struct sigv4_buf *w)
{
	static const char tk[] = "x-amz-security-token";
	size_t i, start = 0;
	int put = !token, first = 1;

	for (i = 0; i <= in->len; i++) {
		const char *nm = in->p + start;
		size_t nl = i - start;
		int c;

		if (i < in->len && in->p[i] != ';')
			continue;
		start = i + 1;
		if (nl == sizeof(tk) - 1 && memcmp(nm, tk, nl) == 0)
			continue;
		c = memcmp(nm, tk, nl < sizeof(tk) - 1 ? nl : sizeof(tk) - 1);
		if (!put && (c > 0 || (c == 0 && nl > sizeof(tk) - 1))) {
			sigv4_buf_add(w, first ? "" : ";", first ? 0 : 1);
			sigv4_buf_str(w, tk);
			put = 1;
			first = 0;
		}
		sigv4_buf_add(w, first ? "" : ";", first ? 0 : 1);
		sigv4_buf_add(w, nm, nl);
		first = 0;
	}
	if (!put) {
		sigv4_buf_add(w, first ? "" : ";", first ? 0 : 1);
		sigv4_buf_str(w, tk);
	}
}

static void
request_view(struct sigctx *x, struct sigv4_request *r, const struct sigv4_header *h,
    size_t nh, const char *query, size_t qlen)
{
	const struct http_request *req = x->req;
	const char *q = memchr(req->path.p, '?', req->path.len);

	memset(r, 0, sizeof(*r));
	r->method.p = req->method.p;
	r->method.len = req->method.len;
	r->path.p = req->path.p;
	r->path.len = q != NULL ? (size_t)(q - req->path.p) : req->path.len;
	r->query.p = query;
	r->query.len = qlen;
	r->headers = h;
	r->n_headers = nh;
	r->host.p = req->host_header.p;
	r->host.len = req->host_header.len;
	r->presigned = x->presigned;
}

/* Check the sandbox's signature with the secret placeholder. */
static int
verify(struct sigctx *x, const struct sigv4_header *h, size_t nh)
{
	struct sigv4_request r;
	char hash[SIGV4_HEX + 1], sig[SIGV4_HEX + 1], sph[SIGV4_SPH_LEN + 1];
	int rc;

	request_view(x, &r, h, nh, x->qstart, x->qlen);
	if ((rc = sigv4_canonical_hash(&r, &x->cred.service, &x->signed_headers,
	    &x->payload, hash)) != SIGV4_OK)
		return refuse(x, rc == SIGV4_E_MISSING ? REASON_AWS_SIG_INVALID :
		    REASON_AWS_SIG_UNSUPPORTED, rc == SIGV4_E_MISSING ? "a signed "
		    "header is missing" : "the request cannot be put in "
		    "canonical form");
	sigv4_secret_placeholder(x->cred.keyid.p, x->cred.keyid.len, sph);
	if (sigv4_sign(sph, SIGV4_SPH_LEN, &x->cred, &x->amz_date, hash,
	    sig) == -1)
		return refuse(x, REASON_INTERNAL_ERROR, "signing failed");
	if (!sigv4_equal(&x->their_sig, sig, SIGV4_HEX))
		return refuse(x, REASON_AWS_SIG_INVALID, "the request's signature "
		    "does not verify with the placeholder secret (altered "
		    "after signing, or signed with another key)");
	return 0;
}

/* "KEYID/date/region/service/aws4_request" with the real key id. */
static void
scope_with(struct sigv4_buf *w, const struct sigv4_cred *c, const unsigned char *id,
    size_t idlen, int encode)
{
	if (encode) {
		sigv4_buf_encode(w, (const char *)id, idlen, 0);
		sigv4_buf_str(w, "%2F");
		sigv4_buf_encode(w, c->date.p, c->date.len, 0);
		sigv4_buf_str(w, "%2F");
		sigv4_buf_encode(w, c->region.p, c->region.len, 0);
		sigv4_buf_str(w, "%2F");
		sigv4_buf_encode(w, c->service.p, c->service.len, 0);
		sigv4_buf_str(w, "%2Faws4_request");
		return;
	}
	sigv4_buf_add(w, id, idlen);
	sigv4_buf_add(w, "/", 1);
	sigv4_buf_add(w, c->date.p, c->date.len);
	sigv4_buf_add(w, "/", 1);
	sigv4_buf_add(w, c->region.p, c->region.len);
	sigv4_buf_add(w, "/", 1);
	sigv4_buf_add(w, c->service.p, c->service.len);
	sigv4_buf_str(w, "/aws4_request");
}

/* The presigned query as it leaves, without its signature yet. */
static void
query_out(struct sigctx *x, const unsigned char *id, size_t idlen,
    const unsigned char *tok, size_t toklen, struct sigv4_buf *w)
{
	struct sigv4_param qp;
	size_t at = 0;
	int first = 1;
	char k[64];

	while (sigv4_query_next(x->qstart, x->qlen, &at, &qp)) {
		(void)sigv4_param_name(&qp, k, sizeof(k));	/* "" when longer */
		if (strcmp(k, "X-Amz-Signature") == 0 ||
		    strcmp(k, "X-Amz-Security-Token") == 0)
			continue;
		if (!first)
			sigv4_buf_add(w, "&", 1);
		first = 0;
		if (strcmp(k, "X-Amz-Credential") == 0) {
			sigv4_buf_add(w, qp.name.p, qp.name.len);
			sigv4_buf_add(w, "=", 1);
			scope_with(w, &x->cred, id, idlen, 1);
		} else
			sigv4_buf_add(w, qp.raw.p, qp.raw.len);
	}
	if (tok != NULL) {
		sigv4_buf_str(w, first ? "X-Amz-Security-Token=" :
		    "&X-Amz-Security-Token=");
		sigv4_buf_encode(w, (const char *)tok, toklen, 0);
	}
}

/* The real key's signature over the request as it leaves, into plan->x. */
static int
resign(struct sigctx *x, const struct sigv4_header *hin, size_t nin)
{
	struct cred_plan *plan = &x->s->fwd.plan;
	struct cred_plan_ext *px = plan->x;
	const unsigned char *id, *key, *tok;
	size_t idlen, keylen, toklen, nout;
	struct sigv4_header *hout;
	struct sigv4_request r;
	struct sigv4_slice sh;
	struct sigv4_buf shw = { 0 }, out = { 0 }, qw = { 0 };
	char hash[SIGV4_HEX + 1], sig[SIGV4_HEX + 1];
	int rc = -1;

	(void)hin;
	id = vault_snapshot_value(plan->snap, px->part[x->j][0], &idlen);
	key = vault_snapshot_value(plan->snap, px->part[x->j][1], &keylen);
	tok = vault_snapshot_value(plan->snap, px->part[x->j][2], &toklen);
	if (id == NULL || key == NULL)
		return refuse(x, REASON_CRED_UNAVAILABLE, "its vault entry is not "
		    "KEYID:SECRET[:TOKEN]");
	if ((hout = calloc(nin + 1, sizeof(*hout))) == NULL)
		return refuse(x, REASON_INTERNAL_ERROR, "out of memory");
	headers_out(x, x->presigned ? NULL : (const char *)tok, toklen, hout,
	    &nout);
	if (x->presigned) {
		sh = x->signed_headers;
		query_out(x, id, idlen, tok, toklen, &qw);
		if (qw.err)
			goto nomem;
		request_view(x, &r, hout, nout, qw.p != NULL ? qw.p : "", qw.len);
	} else {
		signed_out(&x->signed_headers, tok != NULL, &shw);
		if (shw.err)
			goto nomem;
		sh.p = shw.p;
		sh.len = shw.len;
		request_view(x, &r, hout, nout, x->qstart, x->qlen);
	}
	if (sigv4_canonical_hash(&r, &x->cred.service, &sh, &x->payload,
	    hash) != SIGV4_OK || sigv4_sign((const char *)key, keylen, &x->cred,
	    &x->amz_date, hash, sig) == -1) {
		rc = refuse(x, REASON_AWS_SIG_UNSUPPORTED, "the request cannot be "
		    "re-signed");
		goto done;
	}
	if (x->presigned) {
		sigv4_buf_add(&out, "?", 1);
		sigv4_buf_add(&out, qw.p != NULL ? qw.p : "", qw.len);
		sigv4_buf_str(&out, qw.len > 0 ? "&X-Amz-Signature=" : "X-Amz-Signature=");
		sigv4_buf_str(&out, sig);
	} else {
		sigv4_buf_str(&out, SIGV4_ALGO " Credential=");
		scope_with(&out, &x->cred, id, idlen, 0);
		sigv4_buf_str(&out, ", SignedHeaders=");
		sigv4_buf_add(&out, sh.p, sh.len);
		sigv4_buf_str(&out, ", Signature=");
		sigv4_buf_str(&out, sig);
	}
	if (out.err)
		goto nomem;
	sigv4_plan_free(px);
	px->sig_cred = x->c;
	px->sig_out = out.p;
	px->sig_len = out.cap;
	px->sig_query = x->presigned;
	px->sig_token = !x->presigned && tok != NULL;
	out.p = NULL;
	rc = 0;
	goto done;
nomem:
	rc = refuse(x, REASON_INTERNAL_ERROR, "out of memory");
done:
	OPENSSL_cleanse(sig, sizeof(sig));
	sigv4_buf_free(&shw);
	sigv4_buf_free(&qw);
	sigv4_buf_free(&out);
	free(hout);
	return rc;
}

/* The header form: Authorization: AWS4-HMAC-SHA256 Credential=... */
static int
from_header(struct sigctx *x, const struct http_header *h)
{
	struct sigv4_auth a;
	const struct http_header *d;
	int rc, n;

	if ((rc = sigv4_parse_auth(h->value.p, h->value.len, &a)) != SIGV4_OK)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, rc == SIGV4_E_ALGO ?
		    "only AWS4-HMAC-SHA256 is re-signed (not SigV4a)" :
		    rc == SIGV4_E_HEADERS ? "SignedHeaders is not sorted, "
		    "unique and lower-case" : "a malformed SigV4 Authorization");
	x->cred = a.cred;
	x->signed_headers = a.signed_headers;
	x->their_sig = a.signature;
	if ((d = header_one(x->req, "X-Amz-Date", &n)) == NULL || n != 1)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "one X-Amz-Date header "
		    "is needed");
	x->amz_date.p = d->value.p;
	x->amz_date.len = d->value.len;
	return 0;
}

/* The query form: a presigned URL. */
static int
from_query(struct sigctx *x, struct presigned *ps)
{
	presigned_parse(x->qstart, x->qlen, ps);
	if (ps->n_algo != 1 || ps->n_cred != 1 || ps->n_date != 1 ||
	    ps->n_sh != 1 || ps->n_sig != 1 || ps->n_token > 1)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, ps->n_v2 > 0 ?
		    "a SigV2 presigned URL (AWSAccessKeyId=) is not re-signed: "
		    "sign it with SigV4 (s3v4)" : "a presigned URL needs each "
		    "X-Amz- parameter once");
	if (strcmp(ps->algo, SIGV4_ALGO) != 0)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "only AWS4-HMAC-SHA256 "
		    "is re-signed (not SigV4a)");
	if (sigv4_parse_cred(ps->cred, strlen(ps->cred), &x->cred) != SIGV4_OK)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "a malformed "
		    "X-Amz-Credential");
	x->signed_headers.p = ps->signed_headers;
	x->signed_headers.len = strlen(ps->signed_headers);
	x->their_sig.p = ps->sig;
	x->their_sig.len = strlen(ps->sig);
	x->amz_date.p = ps->date;
	x->amz_date.len = strlen(ps->date);
	if (memmem(ps->signed_headers, x->signed_headers.len,
	    "x-amz-security-token", 20) != NULL)
		return refuse(x, REASON_AWS_SIG_UNSUPPORTED, "a presigned URL signs "
		    "its token in the query, not a header");
	return 0;
}

int
sigv4_plan(struct exchange *s, const struct http_request *req,
    enum sg_reason *reason, char *detail, size_t dlen)
{
	struct cred_plan *plan = &s->fwd.plan;
	const struct http_header *auth = NULL;
	struct presigned *ps = NULL;
	struct sigv4_header *hin;
	struct sigctx x;
	const char *q;
	size_t i, nin;
	int rc;

	if (plan->x == NULL)
		return 0;
	memset(&x, 0, sizeof(x));
	x.s = s;
	x.req = req;
	x.reason = reason;
	x.detail = detail;
	x.dlen = dlen;
	for (i = 0; i < req->n_headers; i++) {
		const struct policy_credential *c = cred_plan_swap(plan, i);

		if (c == NULL || c->kind != POLICY_CRED_AWS_SIGV4)
			continue;
		if (x.c != NULL) {
			x.c = c;
			return refuse(&x, REASON_AWS_SIG_UNSUPPORTED, "one SigV4 "
			    "Authorization per request");
		}
		x.c = c;
		auth = &req->headers[i];
	}
	if (plan->query_cred != NULL && plan->query_cred->kind ==
	    POLICY_CRED_AWS_SIGV4) {
		if (x.c != NULL) {
			x.c = plan->query_cred;
			return refuse(&x, REASON_AWS_SIG_UNSUPPORTED, "signed both in "
			    "the header and the query");
		}
		x.c = plan->query_cred;
		x.presigned = 1;
	}
	if (x.c == NULL)
		return 0;
	for (x.j = 0; x.j < plan->n_bound && plan->bound[x.j] != x.c; x.j++)
		;
	if (x.j == plan->n_bound)
		return refuse(&x, REASON_INTERNAL_ERROR, "not bound here");
	if ((q = memchr(req->path.p, '?', req->path.len)) != NULL) {
		x.qstart = q + 1;
		x.qlen = req->path.len - (size_t)(q + 1 - req->path.p);
	} else
		x.qstart = "";
	if (x.presigned) {
		if ((ps = malloc(sizeof(*ps))) == NULL)
			return refuse(&x, REASON_INTERNAL_ERROR, "out of memory");
		rc = from_query(&x, ps);
	} else {
		if (auth_is_sigv4(auth) == 0) {
			/* A placeholder in Authorization that is not SigV4. */
			return refuse(&x, REASON_AWS_SIG_UNSUPPORTED, "its key id is "
			    "re-signed in a SigV4 Authorization only");
		}
		rc = from_header(&x, auth);
	}
	if (rc == 0 && (x.cred.keyid.len != strlen(plan->x->ph[x.j]) ||
	    memcmp(x.cred.keyid.p, plan->x->ph[x.j], x.cred.keyid.len) != 0))
		rc = refuse(&x, REASON_AWS_SIG_INVALID, "the placeholder is not the "
		    "signature's key id");
	if (rc == 0 && !amz_date_ok(&x.amz_date, &x.cred))
		rc = refuse(&x, REASON_AWS_SIG_UNSUPPORTED, "X-Amz-Date is not "
		    "YYYYMMDDTHHMMSSZ of the credential's day");
	if (rc == 0)
		rc = payload_of(&x);
	if (rc == 0)
		rc = signed_forwardable(&x);
	if (rc == 0) {
		if ((hin = calloc(req->n_headers + 1, sizeof(*hin))) == NULL) {
			free(ps);
			return refuse(&x, REASON_INTERNAL_ERROR, "out of memory");
		}
		for (nin = 0; nin < req->n_headers; nin++) {
			hin[nin].name = req->headers[nin].name.p;
			hin[nin].nlen = req->headers[nin].name.len;
			hin[nin].value = req->headers[nin].value.p;
			hin[nin].vlen = req->headers[nin].value.len;
		}
		rc = verify(&x, hin, nin);
		if (rc == 0)
			rc = resign(&x, hin, nin);
		free(hin);
	}
	if (rc == -1)
		snprintf(plan->cred, sizeof(plan->cred), "%s", x.c->name);
	free(ps);
	return rc;
}
