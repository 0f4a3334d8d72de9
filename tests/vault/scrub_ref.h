/*
 * A deliberately simple, non-streaming model of the response scrubber for
 * the unit test and the fuzz target: the encodings written out the obvious
 * way (the base64 "stable core" found by varying the neighbouring bytes)
 * and a naive leftmost-longest replacement. Independent of src/vault/.
 */
#ifndef SG_TEST_SCRUB_REF_H
#define SG_TEST_SCRUB_REF_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX_PATS	27	/* per secret */

struct ref_pat {
	unsigned char	*p;
	size_t		 len;
	unsigned char	*r;	/* the placeholder in the same encoding */
	size_t		 rlen;
};

/* Grow-only byte buffer. */
struct ref_buf {
	unsigned char	*b;
	size_t		 len, cap;
};

static __attribute__((unused)) void
ref_put(struct ref_buf *o, const void *p, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		o->cap = (o->len + n + 1) * 2;
		if ((o->b = realloc(o->b, o->cap)) == NULL)
			abort();
	}
	if (n > 0)
		memcpy(o->b + o->len, p, n);
	o->len += n;
	o->b[o->len] = 0;
}

static __attribute__((unused)) void
ref_putc(struct ref_buf *o, int c)
{
	unsigned char ch = (unsigned char)c;

	ref_put(o, &ch, 1);
}

static __attribute__((unused)) void
ref_b64_full(const unsigned char *in, size_t len, int url, struct ref_buf *o)
{
	const char *a = url ?
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" :
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	/* Whole groups only: callers pad the input to a multiple of 3. */
	for (i = 0; i + 3 <= len; i += 3) {
		ref_putc(o, a[in[i] >> 2]);
		ref_putc(o, a[(in[i] & 3) << 4 | in[i + 1] >> 4]);
		ref_putc(o, a[(in[i + 1] & 15) << 2 | in[i + 2] >> 6]);
		ref_putc(o, a[in[i + 2] & 63]);
	}
}

/*
 * The base64 characters of s placed `align` bytes into a group that are the
 * same whatever the surrounding bytes are (all-zero vs all-one fill).
 */
static __attribute__((unused)) void
ref_b64_core(const unsigned char *s, size_t len, size_t align, int url,
    struct ref_buf *o)
{
	struct ref_buf e[2];
	unsigned char *tmp;
	size_t total = align + len, padded, i, f;

	padded = (total + 2) / 3 * 3 + 3;
	tmp = malloc(padded);
	for (f = 0; f < 2; f++) {
		memset(&e[f], 0, sizeof(e[f]));
		memset(tmp, f ? 0xff : 0x00, padded);
		memcpy(tmp + align, s, len);
		ref_b64_full(tmp, padded, url, &e[f]);
	}
	for (i = 0; i < e[0].len; i++)
		if (e[0].b[i] == e[1].b[i])
			ref_putc(o, e[0].b[i]);
	free(tmp);
	free(e[0].b);
	free(e[1].b);
}

static __attribute__((unused)) void
ref_pct(const unsigned char *s, size_t len, int all, int upper,
    struct ref_buf *o)
{
	char tmp[4];
	size_t i;

	for (i = 0; i < len; i++) {
		if (!all && (isalnum(s[i]) || strchr("-._~", s[i]) != NULL) &&
		    s[i] != 0 && s[i] < 0x80) {
			ref_putc(o, s[i]);
			continue;
		}
		snprintf(tmp, sizeof(tmp), upper ? "%%%02X" : "%%%02x", s[i]);
		ref_put(o, tmp, 3);
	}
}

/* ctl 0: \n-style where JSON has one, 1: \u00xx, 2: \u00XX; html: <>& too. */
static __attribute__((unused)) void
ref_json(const unsigned char *s, size_t len, int slash, int ctl, int html,
    struct ref_buf *o)
{
	char tmp[8];
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (c == '"')
			ref_put(o, "\\\"", 2);
		else if (c == '\\')
			ref_put(o, "\\\\", 2);
		else if (c == '/' && slash)
			ref_put(o, "\\/", 2);
		else if (c == '\n' && ctl == 0)
			ref_put(o, "\\n", 2);
		else if (c == '\r' && ctl == 0)
			ref_put(o, "\\r", 2);
		else if (c == '\t' && ctl == 0)
			ref_put(o, "\\t", 2);
		else if (c == '\b' && ctl == 0)
			ref_put(o, "\\b", 2);
		else if (c == '\f' && ctl == 0)
			ref_put(o, "\\f", 2);
		else if (c < 0x20 || (html && strchr("<>&", c) != NULL && c)) {
			snprintf(tmp, sizeof(tmp), ctl == 2 ? "\\u%04X" :
			    "\\u%04x", c);
			ref_put(o, tmp, 6);
		} else
			ref_putc(o, c);
	}
}

/* Other encoders' percent-encoding: letters, digits and keep left as is, space as "+" if plus. */
static __attribute__((unused)) void
ref_pct_other(const unsigned char *s, size_t len, const char *keep, int plus,
    int upper, struct ref_buf *o)
{
	char tmp[4];
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] != 0 && s[i] < 0x80 && (isalnum(s[i]) ||
		    strchr(keep, s[i]) != NULL))
			ref_putc(o, s[i]);
		else if (s[i] == ' ' && plus)
			ref_putc(o, '+');
		else {
			snprintf(tmp, sizeof(tmp), upper ? "%%%02X" : "%%%02x", s[i]);
			ref_put(o, tmp, 3);
		}
	}
}

/* gRPC's percent-encoding: "%" and every byte outside 0x20-0x7e. */
static __attribute__((unused)) void
ref_pct_grpc(const unsigned char *s, size_t len, int upper, struct ref_buf *o)
{
	char tmp[4];
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '%')
			ref_putc(o, s[i]);
		else {
			snprintf(tmp, sizeof(tmp), upper ? "%%%02X" : "%%%02x", s[i]);
			ref_put(o, tmp, 3);
		}
	}
}

/* Encoding k (0..26, the scrubber's priority order) of s. */
static __attribute__((unused)) void
ref_encode(int k, const unsigned char *s, size_t len, struct ref_buf *o)
{
	if (k == 0)
		ref_put(o, s, len);
	else if (k <= 6)
		ref_b64_core(s, len, (size_t)(k - 1) % 3, k >= 4, o);
	else if (k <= 10)
		ref_pct(s, len, k >= 9, k == 7 || k == 9, o);
	else if (k <= 16)
		ref_json(s, len, k <= 13, (k - 11) % 3, 0, o);
	else if (k == 17)
		ref_json(s, len, 0, 0, 1, o);
	else if (k <= 19)
		ref_pct_other(s, len, "-._~/", 0, k == 18, o);
	else if (k <= 21)
		ref_pct_other(s, len, "-._~", 1, k == 20, o);
	else if (k == 22)
		ref_pct_other(s, len, "-._~!'()*", 0, 1, o);
	else if (k == 23)
		ref_pct_other(s, len, "-._", 1, 1, o);	/* PHP urlencode */
	else if (k == 24)
		ref_pct_other(s, len, "-._*", 1, 1, o);	/* Java URLEncoder */
	else
		ref_pct_grpc(s, len, k == 25, o);	/* gRPC grpc-message */
}

/*
 * Append the patterns of one secret to pats (room for REF_MAX_PATS); the
 * short ones (under 8 bytes) only raw. Returns how many were added.
 */
static __attribute__((unused)) size_t
ref_patterns(const unsigned char *s, size_t len, const char *ph,
    struct ref_pat *pats)
{
	struct ref_buf p, r;
	size_t n = 0;
	int k, nk = len < 8 ? 1 : REF_MAX_PATS;

	for (k = 0; k < nk; k++) {
		memset(&p, 0, sizeof(p));
		memset(&r, 0, sizeof(r));
		ref_put(&p, "", 0);
		ref_put(&r, "", 0);
		ref_encode(k, s, len, &p);
		ref_encode(k, (const unsigned char *)ph, strlen(ph), &r);
		if (p.len == 0) {
			free(p.b);
			free(r.b);
			continue;
		}
		pats[n].p = p.b;
		pats[n].len = p.len;
		pats[n].r = r.b;
		pats[n].rlen = r.len;
		n++;
	}
	return n;
}

static __attribute__((unused)) void
ref_free(struct ref_pat *pats, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(pats[i].p);
		free(pats[i].r);
	}
}

static __attribute__((unused)) size_t
ref_maxlen(const struct ref_pat *pats, size_t n)
{
	size_t i, m = 0;

	for (i = 0; i < n; i++)
		if (pats[i].len > m)
			m = pats[i].len;
	return m;
}

/*
 * Naive leftmost-longest, non-overlapping; equal lengths: the first. When
 * mark_in (len bytes) and mark_out are given, they get a 1 for every input
 * byte a match consumed and every output byte a replacement produced.
 */
static __attribute__((unused)) void
ref_scrub_marked(const struct ref_pat *pats, size_t n, const unsigned char *in,
    size_t len, struct ref_buf *o, unsigned char *mark_in,
    struct ref_buf *mark_out)
{
	size_t i = 0, j, best;

	ref_put(o, "", 0);
	if (mark_out != NULL)
		ref_put(mark_out, "", 0);
	while (i < len) {
		best = n;
		for (j = 0; j < n; j++)
			if (pats[j].len <= len - i &&
			    memcmp(in + i, pats[j].p, pats[j].len) == 0 &&
			    (best == n || pats[j].len > pats[best].len))
				best = j;
		if (best == n) {
			if (mark_in != NULL)
				mark_in[i] = 0;
			if (mark_out != NULL)
				ref_putc(mark_out, 0);
			ref_putc(o, in[i++]);
			continue;
		}
		ref_put(o, pats[best].r, pats[best].rlen);
		if (mark_in != NULL)
			memset(mark_in + i, 1, pats[best].len);
		for (j = 0; mark_out != NULL && j < pats[best].rlen; j++)
			ref_putc(mark_out, 1);
		i += pats[best].len;
	}
}

static __attribute__((unused)) void
ref_scrub(const struct ref_pat *pats, size_t n, const unsigned char *in,
    size_t len, struct ref_buf *o)
{
	ref_scrub_marked(pats, n, in, len, o, NULL, NULL);
}

/*
 * 1 when every occurrence of every pattern in hay[0..n) touches a marked
 * byte: no secret encoding went through untouched.
 */
static __attribute__((unused)) int
ref_all_touched(const struct ref_pat *pats, size_t np,
    const unsigned char *hay, size_t n, const unsigned char *mark)
{
	size_t i, j, k;

	for (j = 0; j < np; j++)
		for (i = 0; i + pats[j].len <= n; i++) {
			if (memcmp(hay + i, pats[j].p, pats[j].len) != 0)
				continue;
			for (k = i; k < i + pats[j].len && !mark[k]; k++)
				;
			if (k == i + pats[j].len)
				return 0;
		}
	return 1;
}

/*
 * 1 when some pattern and some replacement overlap (one inside the other,
 * or an end of one is the start of the other): then a pattern can appear
 * where a replacement meets the text next to it.
 */
static __attribute__((unused)) int
ref_overlapping(const struct ref_pat *pats, size_t np)
{
	size_t i, j, k, pl, rl;
	const unsigned char *p, *r;

	for (i = 0; i < np; i++)
		for (j = 0; j < np; j++) {
			p = pats[i].p;
			pl = pats[i].len;
			r = pats[j].r;
			rl = pats[j].rlen;
			for (k = 0; k + pl <= rl; k++)
				if (memcmp(r + k, p, pl) == 0)
					return 1;
			for (k = 0; rl > 0 && k + rl <= pl; k++)
				if (memcmp(p + k, r, rl) == 0)
					return 1;
			for (k = 1; k < pl && k <= rl; k++)
				if (memcmp(r + rl - k, p, k) == 0 ||
				    memcmp(r, p + pl - k, k) == 0)
					return 1;
		}
	return 0;
}

/* 1 when hay[0..n) contains any pattern. */
static __attribute__((unused)) int
ref_contains_any(const struct ref_pat *pats, size_t np,
    const unsigned char *hay, size_t n)
{
	size_t i, j;

	for (j = 0; j < np; j++)
		for (i = 0; i + pats[j].len <= n; i++)
			if (memcmp(hay + i, pats[j].p, pats[j].len) == 0)
				return 1;
	return 0;
}

#endif
