/*
 * AWS Signature Version 4 (sigv4.h): parsing what the sandbox signed,
 * building the canonical request AWS builds, and signing it. The gateway
 * computes every signature twice -- with the placeholder secret to check the
 * sandbox's, with the real one to re-sign -- so both go through this code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "core/util.h"
#include "vault/sigv4.h"

/* ------------------------------------------------------------ a buffer */

void
sigv4_buf_add(struct sigv4_buf *b, const void *p, size_t n)
{
	char *np;
	size_t cap;

	if (b->err || n == 0)
		return;
	if (b->len + n + 1 > b->cap) {
		cap = b->cap ? b->cap : 512;
		while (cap < b->len + n + 1)
			cap *= 2;
		/* Grow by hand: the old copy is wiped, not left behind. */
		if ((np = malloc(cap)) == NULL) {
			b->err = 1;
			return;
		}
		if (b->len > 0)
			memcpy(np, b->p, b->len);
		if (b->p != NULL) {
			OPENSSL_cleanse(b->p, b->cap);
			free(b->p);
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
sigv4_buf_str(struct sigv4_buf *b, const char *s)
{
	sigv4_buf_add(b, s, strlen(s));
}

static void
sb_addc(struct sigv4_buf *b, char c)
{
	sigv4_buf_add(b, &c, 1);
}

void
sigv4_buf_free(struct sigv4_buf *b)
{
	if (b->p != NULL) {
		OPENSSL_cleanse(b->p, b->cap);
		free(b->p);
	}
	memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------ parsing */

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A scope field: printable, no '/', ',', ';', '=' or white space, 1..64. */
static int
field_ok(const char *p, size_t len)
{
	size_t i;

	if (len == 0 || len > 64)
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f ||
		    p[i] == '/' || p[i] == ',' || p[i] == ';' || p[i] == '=')
			return 0;
	return 1;
}

int
sigv4_parse_cred(const char *p, size_t len, struct sigv4_cred *c)
{
	struct sigv4_slice f[5];
	size_t i, start = 0, k = 0;

	memset(c, 0, sizeof(*c));
	for (i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		if (k == 5)
			return SIGV4_E_SYNTAX;
		f[k].p = p + start;
		f[k].len = i - start;
		k++;
		start = i + 1;
	}
	if (k != 5)
		return SIGV4_E_SYNTAX;
	for (i = 0; i < 5; i++)
		if (!field_ok(f[i].p, f[i].len))
			return SIGV4_E_SYNTAX;
	if (f[1].len != 8)
		return SIGV4_E_SYNTAX;
	for (i = 0; i < 8; i++)
		if (!is_digit(f[1].p[i]))
			return SIGV4_E_SYNTAX;
	if (f[4].len != 12 || memcmp(f[4].p, "aws4_request", 12) != 0)
		return SIGV4_E_SYNTAX;
	c->keyid = f[0];
	c->date = f[1];
	c->region = f[2];
	c->service = f[3];
	return SIGV4_OK;
}

/* SignedHeaders: lower-case tokens, ';'-separated, strictly increasing. */
static int
signed_headers_ok(const char *p, size_t len)
{
	const char *prev = NULL;
	size_t i, start = 0, plen = 0, n = 0;

	if (len == 0)
		return 0;
	for (i = 0; i <= len; i++) {
		if (i < len && p[i] != ';') {
			char c = p[i];

			if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' ||
			    c == '_' || c == '.' || c == '!' || c == '#' ||
			    c == '$' || c == '%' || c == '&' || c == '\'' ||
			    c == '*' || c == '+' || c == '^' || c == '`' ||
			    c == '|' || c == '~'))
				return 0;
			continue;
		}
		if (i == start || ++n > SIGV4_MAX_SIGNED)
			return 0;
		if (prev != NULL) {
			size_t m = plen < i - start ? plen : i - start;
			int d = memcmp(prev, p + start, m);

			if (d > 0 || (d == 0 && plen >= i - start))
				return 0;
		}
		prev = p + start;
		plen = i - start;
		start = i + 1;
	}
	return 1;
}

static int
is_hex_lc(const char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!is_digit(p[i]) && !(p[i] >= 'a' && p[i] <= 'f'))
			return 0;
	return 1;
}

int
sigv4_is_hex_hash(const struct sigv4_slice *h)
{
	size_t i;

	if (h->len != SIGV4_HEX)
		return 0;
	for (i = 0; i < h->len; i++) {
		char c = h->p[i];

		if (!is_digit(c) && !(c >= 'a' && c <= 'f') &&
		    !(c >= 'A' && c <= 'F'))
			return 0;
	}
	return 1;
}

int
sigv4_parse_auth(const char *v, size_t len, struct sigv4_auth *a)
{
	size_t i = 0, alen = strlen(SIGV4_ALGO), start, end;
	int have_c = 0, have_h = 0, have_s = 0, rc;

	memset(a, 0, sizeof(*a));
	while (i < len && (v[i] == ' ' || v[i] == '\t'))
		i++;
	start = i;
	while (i < len && v[i] != ' ' && v[i] != '\t')
		i++;
	if (i - start != alen || memcmp(v + start, SIGV4_ALGO, alen) != 0)
		return i - start > 4 && memcmp(v + start, "AWS4-", 5) == 0 ?
		    SIGV4_E_ALGO : SIGV4_E_NOT;
	/* Credential=..., SignedHeaders=..., Signature=... in any order. */
	while (i < len) {
		const char *k;
		size_t klen;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		if (i == len)
			break;
		k = v + i;
		while (i < len && v[i] != '=')
			i++;
		if (i == len)
			return SIGV4_E_SYNTAX;
		klen = (size_t)(v + i - k);
		start = ++i;
		while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
			i++;
		end = i;
		if (klen == 10 && memcmp(k, "Credential", 10) == 0 && !have_c) {
			if ((rc = sigv4_parse_cred(v + start, end - start,
			    &a->cred)) != SIGV4_OK)
				return rc;
			have_c = 1;
		} else if (klen == 13 && memcmp(k, "SignedHeaders", 13) == 0 &&
		    !have_h) {
			if (!signed_headers_ok(v + start, end - start))
				return SIGV4_E_HEADERS;
			a->signed_headers.p = v + start;
			a->signed_headers.len = end - start;
			have_h = 1;
		} else if (klen == 9 && memcmp(k, "Signature", 9) == 0 &&
		    !have_s) {
			if (end - start != SIGV4_HEX || !is_hex_lc(v + start,
			    SIGV4_HEX))
				return SIGV4_E_SYNTAX;
			a->signature.p = v + start;
			a->signature.len = SIGV4_HEX;
			have_s = 1;
		} else
			return SIGV4_E_SYNTAX;
	}
	return have_c && have_h && have_s ? SIGV4_OK : SIGV4_E_SYNTAX;
}

int
sigv4_s3_style(const struct sigv4_slice *service)
{
	return service->len >= 2 && memcmp(service->p, "s3", 2) == 0;
}

/* %XX decoded into out, at most cap bytes: the length, or SIZE_MAX past cap. */
static size_t
unescape_n(const char *p, size_t len, char *out, size_t cap)
{
	size_t i, n = 0;
	int hi, lo;

	for (i = 0; i < len; i++) {
		if (n == cap)
			return SIZE_MAX;
		if (p[i] == '%' && i + 2 < len &&
		    (hi = util_hexval((unsigned char)p[i + 1])) >= 0 &&
		    (lo = util_hexval((unsigned char)p[i + 2])) >= 0) {
			out[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[n++] = p[i];
	}
	return n;
}

size_t
sigv4_unescape(const char *p, size_t len, char *out)
{
	return unescape_n(p, len, out, len);	/* never longer than len */
}

int
sigv4_param_name(const struct sigv4_param *qp, char *out, size_t n)
{
	size_t dl;

	if (n == 0)
		return -1;
	dl = unescape_n(qp->name.p, qp->name.len, out, n - 1);
	if (dl == SIZE_MAX) {
		out[0] = '\0';
		return -1;
	}
	out[dl] = '\0';
	return 0;
}

int
sigv4_query_next(const char *q, size_t len, size_t *at, struct sigv4_param *p)
{
	size_t i, start, eq;

	while (*at < len && q[*at] == '&')
		(*at)++;
	if (*at >= len)
		return 0;
	start = *at;
	for (i = start; i < len && q[i] != '&'; i++)
		;
	for (eq = start; eq < i && q[eq] != '='; eq++)
		;
	p->raw.p = q + start;
	p->raw.len = i - start;
	p->name.p = q + start;
	p->name.len = eq - start;
	p->has_value = eq < i;
	p->value.p = eq < i ? q + eq + 1 : q + i;
	p->value.len = eq < i ? i - eq - 1 : 0;
	*at = i;
	return 1;
}

/* ------------------------------------------------------------ canonical form */

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    is_digit((char)c) || c == '-' || c == '_' || c == '.' || c == '~';
}

void
sigv4_buf_encode(struct sigv4_buf *b, const char *p, size_t len, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (unreserved(c) || (keep_slash && c == '/'))
			sb_addc(b, (char)c);
		else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			sigv4_buf_add(b, e, 3);
		}
	}
}

/*
 * The path of a service other than S3, as botocore and AWS read it: dot
 * segments resolved, empty segments dropped, then every byte but the
 * unreserved ones and '/' encoded (a '%' of the path becomes %25).
 */
static void
canonical_path(struct sigv4_buf *b, const char *p, size_t len)
{
	struct sigv4_slice seg[256];
	size_t i, start = 0, n = 0, k;

	if (len == 0) {
		sb_addc(b, '/');
		return;
	}
	for (i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		if (i > start && !(i - start == 1 && p[start] == '.')) {
			if (i - start == 2 && p[start] == '.' && p[start + 1] == '.') {
				if (n > 0)
					n--;
			} else if (n < sizeof(seg) / sizeof(seg[0])) {
				seg[n].p = p + start;
				seg[n].len = i - start;
				n++;
			} else {
				b->err = 1;
				return;
			}
		}
		start = i + 1;
	}
	if (p[0] == '/')
		sb_addc(b, '/');
	for (k = 0; k < n; k++) {
		if (k > 0)
			sb_addc(b, '/');
		sigv4_buf_encode(b, seg[k].p, seg[k].len, 1);
	}
	if (p[len - 1] == '/' && n > 0)
		sb_addc(b, '/');
}

/*
 * Each parameter carries the encoded buffer it is in: workers sort at the
 * same time (a file-wide pointer to it was shared by every thread).
 */
struct qparam {
	const char	*base;
	size_t		 k_off, k_len;	/* in the encoded buffer */
	size_t		 v_off, v_len;
};

static int
qp_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	size_t m = x->k_len < y->k_len ? x->k_len : y->k_len;
	int d;

	if (m > 0 && (d = memcmp(x->base + x->k_off, y->base + y->k_off,
	    m)) != 0)
		return d;
	if (x->k_len != y->k_len)
		return x->k_len < y->k_len ? -1 : 1;
	m = x->v_len < y->v_len ? x->v_len : y->v_len;
	if (m > 0 && (d = memcmp(x->base + x->v_off, y->base + y->v_off,
	    m)) != 0)
		return d;
	return x->v_len < y->v_len ? -1 : x->v_len > y->v_len;
}

/*
 * The canonical query: each name and value decoded, encoded again the AWS
 * way, sorted by name then value, joined with '&' ("name=" for a bare name).
 * With presigned, X-Amz-Signature is left out.
 */
static int
canonical_query(struct sigv4_buf *b, const char *q, size_t len, int presigned)
{
	struct qparam *ps;
	struct sigv4_buf enc = { 0 };
	struct sigv4_param qp;
	char *tmp;
	size_t at = 0, n = 0, k;
	int rc = SIGV4_OK;

	if (len == 0)
		return SIGV4_OK;
	if ((ps = calloc(SIGV4_MAX_PARAMS, sizeof(*ps))) == NULL ||
	    (tmp = malloc(len)) == NULL) {
		free(ps);
		return SIGV4_E_NOMEM;
	}
	while (sigv4_query_next(q, len, &at, &qp)) {
		size_t dl;

		dl = sigv4_unescape(qp.name.p, qp.name.len, tmp);
		if (presigned && dl == 15 && memcmp(tmp, "X-Amz-Signature", 15) == 0)
			continue;
		if (n == SIGV4_MAX_PARAMS) {
			rc = SIGV4_E_QUERY;
			break;
		}
		ps[n].k_off = enc.len;
		sigv4_buf_encode(&enc, tmp, dl, 0);
		ps[n].k_len = enc.len - ps[n].k_off;
		dl = sigv4_unescape(qp.value.p, qp.value.len, tmp);
		ps[n].v_off = enc.len;
		sigv4_buf_encode(&enc, tmp, dl, 0);
		ps[n].v_len = enc.len - ps[n].v_off;
		n++;
	}
	OPENSSL_cleanse(tmp, len);
	free(tmp);
	if (rc == SIGV4_OK && enc.err)
		rc = SIGV4_E_NOMEM;
	if (rc == SIGV4_OK && n > 0) {
		for (k = 0; k < n; k++)
			ps[k].base = enc.p;
		qsort(ps, n, sizeof(*ps), qp_cmp);
		for (k = 0; k < n; k++) {
			if (k > 0)
				sb_addc(b, '&');
			/* "?=": nothing was encoded, enc.p is NULL (no offset on it) */
			if (ps[k].k_len > 0)
				sigv4_buf_add(b, enc.p + ps[k].k_off, ps[k].k_len);
			sb_addc(b, '=');
			if (ps[k].v_len > 0)
				sigv4_buf_add(b, enc.p + ps[k].v_off, ps[k].v_len);
		}
	}
	sigv4_buf_free(&enc);
	free(ps);
	return rc;
}

/* A value trimmed, its runs of white space made one space. */
static void
sb_value(struct sigv4_buf *b, const char *v, size_t len)
{
	size_t i;
	int space = 0, any = 0;

	for (i = 0; i < len; i++) {
		char c = v[i];

		if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			space = any;
			continue;
		}
		if (space)
			sb_addc(b, ' ');
		space = 0;
		any = 1;
		sb_addc(b, c);
	}
}

/* "name:v1,v2\n" for one signed header; SIGV4_E_MISSING when it is not sent. */
static int
canonical_header(struct sigv4_buf *b, const struct sigv4_request *r,
    const char *name, size_t nlen)
{
	size_t i, found = 0;

	sigv4_buf_add(b, name, nlen);
	sb_addc(b, ':');
	for (i = 0; i < r->n_headers; i++) {
		const struct sigv4_header *h = &r->headers[i];
		size_t j;

		if (h->nlen != nlen)
			continue;
		for (j = 0; j < nlen; j++) {
			char c = h->name[j];

			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (c != name[j])
				break;
		}
		if (j < nlen)
			continue;
		if (found++ > 0)
			sb_addc(b, ',');
		sb_value(b, h->value, h->vlen);
	}
	if (found == 0 && nlen == 4 && memcmp(name, "host", 4) == 0 &&
	    r->host.len > 0) {
		sb_value(b, r->host.p, r->host.len);
		found = 1;
	}
	sb_addc(b, '\n');
	return found > 0 ? SIGV4_OK : SIGV4_E_MISSING;
}

int
sigv4_canonical_hash(const struct sigv4_request *r,
    const struct sigv4_slice *service, const struct sigv4_slice *signed_headers,
    const struct sigv4_slice *payload_hash, char out[SIGV4_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[SHA256_DIGEST_LENGTH];
	struct sigv4_buf b = { 0 };
	size_t i, start = 0;
	int rc;

	if (!signed_headers_ok(signed_headers->p, signed_headers->len))
		return SIGV4_E_HEADERS;
	sigv4_buf_add(&b, r->method.p, r->method.len);
	sb_addc(&b, '\n');
	if (sigv4_s3_style(service))
		sigv4_buf_add(&b, r->path.len > 0 ? r->path.p : "/", r->path.len > 0 ?
		    r->path.len : 1);
	else
		canonical_path(&b, r->path.p, r->path.len);
	sb_addc(&b, '\n');
	if ((rc = canonical_query(&b, r->query.p, r->query.len,
	    r->presigned)) != SIGV4_OK) {
		sigv4_buf_free(&b);
		return rc;
	}
	sb_addc(&b, '\n');
	for (i = 0; i <= signed_headers->len; i++) {
		if (i < signed_headers->len && signed_headers->p[i] != ';')
			continue;
		if ((rc = canonical_header(&b, r, signed_headers->p + start,
		    i - start)) != SIGV4_OK) {
			sigv4_buf_free(&b);
			return rc;
		}
		start = i + 1;
	}
	sb_addc(&b, '\n');
	sigv4_buf_add(&b, signed_headers->p, signed_headers->len);
	sb_addc(&b, '\n');
	sigv4_buf_add(&b, payload_hash->p, payload_hash->len);
	if (b.err) {
		sigv4_buf_free(&b);
		return SIGV4_E_NOMEM;
	}
	SHA256((const unsigned char *)b.p, b.len, md);
	sigv4_buf_free(&b);
	for (i = 0; i < sizeof(md); i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[SIGV4_HEX] = '\0';
	return SIGV4_OK;
}

/* ------------------------------------------------------------ signing */

static int
hmac(const void *key, size_t klen, const void *msg, size_t mlen,
    unsigned char out[32])
{
	unsigned int n = 32;

	return HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n) != NULL &&
	    n == 32 ? 0 : -1;
}

int
sigv4_sign(const char *secret, size_t slen, const struct sigv4_cred *c,
    const struct sigv4_slice *amz_date, const char creq_hex[SIGV4_HEX + 1],
    char out[SIGV4_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char k[32], k2[32], sig[32];
	struct sigv4_buf b = { 0 };
	size_t i;
	int rc = -1;

	sigv4_buf_add(&b, "AWS4", 4);
	sigv4_buf_add(&b, secret, slen);
	if (b.err || hmac(b.p, b.len, c->date.p, c->date.len, k) == -1 ||
	    hmac(k, 32, c->region.p, c->region.len, k2) == -1 ||
	    hmac(k2, 32, c->service.p, c->service.len, k) == -1 ||
	    hmac(k, 32, "aws4_request", 12, k2) == -1)
		goto done;
	sigv4_buf_free(&b);
	/* The string to sign. */
	sigv4_buf_add(&b, SIGV4_ALGO "\n", strlen(SIGV4_ALGO) + 1);
	sigv4_buf_add(&b, amz_date->p, amz_date->len);
	sb_addc(&b, '\n');
	sigv4_buf_add(&b, c->date.p, c->date.len);
	sb_addc(&b, '/');
	sigv4_buf_add(&b, c->region.p, c->region.len);
	sb_addc(&b, '/');
	sigv4_buf_add(&b, c->service.p, c->service.len);
	sigv4_buf_add(&b, "/aws4_request\n", 14);
	sigv4_buf_add(&b, creq_hex, SIGV4_HEX);
	if (b.err || hmac(k2, 32, b.p, b.len, sig) == -1)
		goto done;
	for (i = 0; i < sizeof(sig); i++) {
		out[2 * i] = hex[sig[i] >> 4];
		out[2 * i + 1] = hex[sig[i] & 15];
	}
	out[SIGV4_HEX] = '\0';
	rc = 0;
done:
	sigv4_buf_free(&b);
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(sig, sizeof(sig));
	return rc;
}

int
sigv4_equal(const struct sigv4_slice *a, const char *b, size_t blen)
{
	return a->len == blen && CRYPTO_memcmp(a->p, b, blen) == 0;
}

void
sigv4_secret_placeholder(const char *keyid, size_t len,
    char out[SIGV4_SPH_LEN + 1])
{
	static const char b62[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	static const char label[] = "sandgate aws_sigv4 placeholder secret";
	unsigned char md[32], md2[32];
	size_t i;

	(void)hmac(label, sizeof(label) - 1, keyid, len, md);
	(void)hmac(label, sizeof(label) - 1, md, sizeof(md), md2);
	for (i = 0; i < SIGV4_SPH_LEN; i++)
		out[i] = b62[(i < 32 ? md[i] : md2[i - 32]) % 62];
	out[SIGV4_SPH_LEN] = '\0';
}
