/*
 * libFuzzer target for the SigV4 parsers and canonical form (vault/sigv4.c):
 * memory safety on any Authorization value, credential scope and request;
 * what parses lies inside the input; a request that puts in canonical form
 * does so again (the same hash: nothing depends on memory left over); a
 * query parameter's name decoded into a bounded buffer is what the whole
 * decoding gives, or refused only when that is too long for it.
 * Input: "auth\nmethod path?query\nname: value\n...".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
inside(const struct sigv4_slice *s, const char *b, size_t n)
{
	return s->len == 0 || (s->p >= b && s->p + s->len <= b + n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b = (const char *)data, *e = b + size, *nl, *sp, *q;
	struct sigv4_header h[16];
	struct sigv4_request r;
	struct sigv4_auth a;
	struct sigv4_cred c;
	struct sigv4_slice pay = { SIGV4_EMPTY_SHA256, SIGV4_HEX };
	char h1[SIGV4_HEX + 1], h2[SIGV4_HEX + 1], sig[SIGV4_HEX + 1];
	size_t nh = 0;

	if (size > 8192)
		return 0;
	(void)sigv4_parse_cred(b, size, &c);
	if ((nl = memchr(b, '\n', size)) == NULL)
		nl = e;
	if (sigv4_parse_auth(b, (size_t)(nl - b), &a) == SIGV4_OK) {
		if (!inside(&a.cred.keyid, b, size) ||
		    !inside(&a.signed_headers, b, size) ||
		    a.signature.len != SIGV4_HEX || a.cred.date.len != 8)
			abort();
	} else
		return 0;
	memset(&r, 0, sizeof(r));
	b = nl < e ? nl + 1 : e;
	nl = memchr(b, '\n', (size_t)(e - b));
	if (nl == NULL)
		nl = e;
	sp = memchr(b, ' ', (size_t)(nl - b));
	if (sp == NULL)
		return 0;
	r.method.p = b;
	r.method.len = (size_t)(sp - b);
	r.path.p = sp + 1;
	r.path.len = (size_t)(nl - sp - 1);
	if ((q = memchr(r.path.p, '?', r.path.len)) != NULL) {
		r.query.p = q + 1;
		r.query.len = r.path.len - (size_t)(q + 1 - r.path.p);
		r.path.len = (size_t)(q - r.path.p);
	}
	b = nl < e ? nl + 1 : e;
	while (b < e && nh < 16) {
		const char *colon;

		nl = memchr(b, '\n', (size_t)(e - b));
		if (nl == NULL)
			nl = e;
		if ((colon = memchr(b, ':', (size_t)(nl - b))) != NULL) {
			h[nh].name = b;
			h[nh].nlen = (size_t)(colon - b);
			h[nh].value = colon + 1;
			h[nh].vlen = (size_t)(nl - colon - 1);
			nh++;
		}
		b = nl < e ? nl + 1 : e;
	}
	if (r.query.len > 0) {
		struct sigv4_param qp;
		size_t at = 0, dl;
		char whole[8192], k[24];

		while (sigv4_query_next(r.query.p, r.query.len, &at, &qp)) {
			dl = sigv4_unescape(qp.name.p, qp.name.len, whole);
			if (sigv4_param_name(&qp, k, sizeof(k)) == 0) {
				if (dl >= sizeof(k) || memcmp(k, whole, dl) != 0 ||
				    k[dl] != '\0')
					abort();
			} else if (dl < sizeof(k) || k[0] != '\0')
				abort();
		}
	}
	r.headers = h;
	r.n_headers = nh;
	r.presigned = size & 1;
	if (sigv4_canonical_hash(&r, &a.cred.service, &a.signed_headers, &pay,
	    h1) != SIGV4_OK)
		return 0;
	if (sigv4_canonical_hash(&r, &a.cred.service, &a.signed_headers, &pay,
	    h2) != SIGV4_OK || strcmp(h1, h2) != 0)
		abort();
	if (sigv4_sign("k", 1, &a.cred, &a.cred.date, h1, sig) != 0 ||
	    strlen(sig) != SIGV4_HEX)
		abort();
	return 0;
}
