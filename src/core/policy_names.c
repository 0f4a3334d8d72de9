/*
 * Host names as the policy compares them: one normal form (lower-case
 * ASCII, no trailing dot, U-labels as A-labels after UTS #46 mapping, LDH
 * syntax) shared by the loader and the matcher, and the path glob.
 */
#include <stdint.h>
#include <string.h>

#include <idn2.h>

#include "core/policy_int.h"

#define NAME_IN_MAX	1024	/* input bytes looked at, U-labels included */
#define LABEL_MAX	63

static int
is_ldh(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

/*
 * One ASCII label l[0..n) into out (room for LABEL_MAX bytes), lower-case.
 * Returns the length written or -1.
 */
static int
label_normalize(const char *l, size_t n, char *out)
{
	size_t i;
	int c;

	if (n == 0 || n > LABEL_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		c = (unsigned char)l[i];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (!is_ldh(c))
			return -1;
		out[i] = (char)c;
	}
	if (out[0] == '-' || out[n - 1] == '-')
		return -1;
	return (int)n;
}

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

/*
 * A name with non-ASCII bytes to the ASCII name a client resolves for it:
 * UTS #46 non-transitional processing (libidn2, as curl and browsers do):
 * case folding and width mapping, NFC, the full stops that are dots, and
 * the U-labels as A-labels; invalid UTF-8, disallowed code points, bad
 * context characters and bidi violations are refused. "bÖse", "böse"
 * (decomposed) and fullwidth letters are the name "böse" and its
 * xn--bse-sna, so that a rule written for the one holds for the others.
 * Invisible code points, which UTS #46 would drop, are refused instead: a
 * name that holds them is a trick, not a name. Returns a string for
 * idn2_free(), or NULL.
 */
static char *
idn_to_ascii(const char *in, size_t len)
{
	char buf[NAME_IN_MAX + 1];
	uint8_t *out = NULL;
	uint32_t cp;
	size_t i;
	int r;

	/* Strict UTF-8, and no invisible code point (which UTS #46 drops). */
	for (i = 0; i < len; i += (size_t)r)
		if ((r = utf8_decode((const unsigned char *)in + i, len - i,
		    &cp)) == -1 || cp == 0 || (cp >= 0x80 && is_bad_unicode(cp)))
			return NULL;
	memcpy(buf, in, len);
	buf[len] = '\0';
	if (idn2_lookup_u8((const uint8_t *)buf, &out, IDN2_NFC_INPUT |
	    IDN2_NONTRANSITIONAL) != IDN2_OK) {
		idn2_free(out);
		return NULL;
	}
	return (char *)out;
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

/* The ASCII name in[0..len) in normal form. */
static int
ascii_canon(const char *in, size_t len, char *out, size_t outlen, int flags)
{
	char res[POLICY_HOST_MAX + LABEL_MAX + 2];
	size_t i, start, o = 0;
	int r;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0)
		return -1;
	for (start = 0, i = 0; i <= len; i++) {
		if (i < len && in[i] != '.')
			continue;
		if (o > 0)
			res[o++] = '.';
		if ((r = label_normalize(in + start, i - start, res + o)) == -1)
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
policy_name_canon(const char *in, size_t len, char *out, size_t outlen,
    int flags)
{
	char *a;
	size_t i;
	int r;

	if (in == NULL || len == 0 || len > NAME_IN_MAX)
		return -1;
	for (i = 0; i < len && (unsigned char)in[i] < 0x80; i++)
		;
	if (i == len)
		return ascii_canon(in, len, out, outlen, flags);
	if ((flags & POLICY_NAME_ASCII) || (a = idn_to_ascii(in, len)) == NULL)
		return -1;
	/* No second mapping: what it gave must be the normal form's ASCII. */
	r = ascii_canon(a, strlen(a), out, outlen, flags);
	idn2_free(a);
	return r;
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
