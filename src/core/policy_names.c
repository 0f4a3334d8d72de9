/*
 * Host names as the policy compares them: one normal form (lower-case
 * ASCII, no trailing dot, U-labels as punycode A-labels, LDH syntax) shared
 * by the loader and the matcher, and the path glob.
 */
#include <stdint.h>
#include <string.h>

#include "core/policy_int.h"

#define NAME_IN_MAX	1024	/* input bytes looked at, U-labels included */
#define LABEL_MAX	63

/* RFC 3492 parameters for IDNA. */
#define PC_BASE		36
#define PC_TMIN		1
#define PC_TMAX		26
#define PC_SKEW		38
#define PC_DAMP		700
#define PC_INITIAL_BIAS	72
#define PC_INITIAL_N	128

/*
 * One code point of strict UTF-8 (no overlongs, no surrogates, nothing past
 * U+10FFFF). Returns its length in bytes, or -1.
 */
static int
utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	uint32_t c, min;
	int n, i;

	if (len == 0)
		return -1;
	c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		n = 2;
		c &= 0x1f;
		min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3;
		c &= 0x0f;
		min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4;
		c &= 0x07;
		min = 0x10000;
	} else
		return -1;
	if ((size_t)n > len)
		return -1;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	*cp = c;
	return n;
}

/* The full stops UTS #46 maps to '.'. */
static int
is_dot(uint32_t c)
{
	return c == '.' || c == 0x3002 || c == 0xff0e || c == 0xff61;
}

/*
 * Non-ASCII code points that are never part of a name we will look up:
 * C1 controls, invisible and bidi formatting characters, noncharacters.
 */
static int
is_bad_unicode(uint32_t c)
{
	return c < 0xa0 || c == 0xad || (c >= 0x200b && c <= 0x200f) ||
	    (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) ||
	    c == 0xfeff || (c >= 0xfdd0 && c <= 0xfdef) ||
	    (c & 0xfffe) == 0xfffe;
}

static int
is_ldh(uint32_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

static char
pc_digit(uint32_t d)
{
	return d < 26 ? (char)('a' + d) : (char)('0' + d - 26);
}

static uint32_t
pc_adapt(uint32_t delta, uint32_t numpoints, int first)
{
	uint32_t k = 0;

	delta = first ? delta / PC_DAMP : delta / 2;
	delta += delta / numpoints;
	while (delta > ((PC_BASE - PC_TMIN) * PC_TMAX) / 2) {
		delta /= PC_BASE - PC_TMIN;
		k += PC_BASE;
	}
	return k + (PC_BASE - PC_TMIN + 1) * delta / (delta + PC_SKEW);
}

/*
 * RFC 3492 encoder: cp[0..n) to out (size outlen), without the "xn--"
 * prefix. Returns the length written, or -1 when it does not fit.
 */
static int
punycode_encode(const uint32_t *cp, size_t n, char *out, size_t outlen)
{
	uint32_t cn = PC_INITIAL_N, delta = 0, bias = PC_INITIAL_BIAS;
	uint32_t m, q, t, k;
	size_t h, b = 0, o = 0, j;

	for (j = 0; j < n; j++) {
		if (cp[j] < 0x80) {
			if (o >= outlen)
				return -1;
			out[o++] = (char)cp[j];
			b++;
		}
	}
	if (b > 0) {
		if (o >= outlen)
			return -1;
		out[o++] = '-';
	}
	for (h = b; h < n; cn++, delta++) {
		m = UINT32_MAX;
		for (j = 0; j < n; j++)
			if (cp[j] >= cn && cp[j] < m)
				m = cp[j];
		if ((uint64_t)delta + (uint64_t)(m - cn) * (h + 1) > UINT32_MAX)
			return -1;
		delta += (m - cn) * (uint32_t)(h + 1);
		cn = m;
		for (j = 0; j < n; j++) {
			if (cp[j] < cn && ++delta == 0)
				return -1;
			if (cp[j] != cn)
				continue;
			for (q = delta, k = PC_BASE; ; k += PC_BASE) {
				t = k <= bias ? PC_TMIN :
				    k >= bias + PC_TMAX ? PC_TMAX : k - bias;
				if (q < t)
					break;
				if (o >= outlen)
					return -1;
				out[o++] =
				    pc_digit(t + (q - t) % (PC_BASE - t));
				q = (q - t) / (PC_BASE - t);
			}
			if (o >= outlen)
				return -1;
			out[o++] = pc_digit(q);
			bias = pc_adapt(delta, (uint32_t)h + 1, h == b);
			delta = 0;
			h++;
		}
	}
	return (int)o;
}

/*
 * One label cp[0..n) into out (room for LABEL_MAX bytes). Returns the
 * length written or -1.
 */
static int
label_normalize(uint32_t *cp, size_t n, char *out)
{
	size_t i;
	int ascii = 1, r;

	if (n == 0 || n > LABEL_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		if (cp[i] >= 'A' && cp[i] <= 'Z')
			cp[i] += 'a' - 'A';
		if (cp[i] >= 0x80) {
			ascii = 0;
			if (is_bad_unicode(cp[i]))
				return -1;
		} else if (!is_ldh(cp[i]))
			return -1;
	}
	if (cp[0] == '-' || cp[n - 1] == '-')
		return -1;
	if (ascii) {
		for (i = 0; i < n; i++)
			out[i] = (char)cp[i];
		return (int)n;
	}
	memcpy(out, "xn--", 4);
	if ((r = punycode_encode(cp, n, out + 4, LABEL_MAX - 4)) == -1)
		return -1;
	return r + 4;
}

/* WHATWG "ends in a number": such a name is an IPv4 form or nothing. */
static int
ends_in_number(const char *name, size_t len)
{
	const char *last = name;
	size_t i, n;

	for (i = 0; i < len; i++)
		if (name[i] == '.')
			last = name + i + 1;
	n = len - (size_t)(last - name);
	if (n == 0)
		return 0;
	if (n >= 2 && last[0] == '0' && last[1] == 'x') {
		for (i = 2; i < n; i++)
			if (!(last[i] >= '0' && last[i] <= '9') &&
			    !(last[i] >= 'a' && last[i] <= 'f'))
				return 0;
		return 1;
	}
	for (i = 0; i < n; i++)
		if (!(last[i] >= '0' && last[i] <= '9'))
			return 0;
	return 1;
}

int
policy_name_normalize(const char *in, size_t len, char *out, size_t outlen)
{
	return policy_name_canon(in, len, out, outlen, 0);
}

int
policy_name_canon(const char *in, size_t len, char *out, size_t outlen,
    int flags)
{
	uint32_t cp[NAME_IN_MAX];
	char res[POLICY_HOST_MAX + LABEL_MAX + 2];
	size_t n = 0, i, start, o = 0;
	int r;

	if (in == NULL || len == 0 || len > NAME_IN_MAX)
		return -1;
	for (i = 0; i < len; i += (size_t)r) {
		if ((flags & POLICY_NAME_ASCII) && (unsigned char)in[i] >= 0x80)
			return -1;
		if ((r = utf8_decode((const unsigned char *)in + i, len - i,
		    &cp[n])) == -1)
			return -1;
		if (is_dot(cp[n]))
			cp[n] = '.';
		n++;
	}
	if (cp[n - 1] == '.')
		n--;
	if (n == 0)
		return -1;
	for (start = 0, i = 0; i <= n; i++) {
		if (i < n && cp[i] != '.')
			continue;
		if (o > 0)
			res[o++] = '.';
		if ((r = label_normalize(cp + start, i - start, res + o)) == -1)
			return -1;
		o += (size_t)r;
		if (o > POLICY_HOST_MAX)
			return -1;
		start = i + 1;
	}
	if ((!(flags & POLICY_NAME_NUMERIC) && ends_in_number(res, o)) ||
	    o + 1 > outlen)
		return -1;
	memcpy(out, res, o);
	out[o] = '\0';
	return (int)o;
}

int
policy_glob_match(const char *glob, const char *s, size_t slen)
{
	const char *g = glob, *star = NULL;
	size_t i = 0, mark = 0;

	/* Greedy with backtracking to the last '*': linear for one star,
	 * O(len(glob) * slen) at worst, never exponential. */
	while (i < slen) {
		if (*g == '*') {
			star = ++g;
			mark = i;
		} else if (*g != '\0' && *g == s[i]) {
			g++;
			i++;
		} else if (star != NULL) {
			g = star;
			i = ++mark;
		} else
			return 0;
	}
	while (*g == '*')
		g++;
	return *g == '\0';
}

int
policy_valid_id(const char *id, size_t len)
{
	size_t i;

	if (len == 0 || len > POLICY_ID_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') ||
		    (id[i] >= '0' && id[i] <= '9') || (i > 0 && id[i] == '-')))
			return 0;
	return 1;
}
