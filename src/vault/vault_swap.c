/*
 * The request side of the vault: random placeholders, finding a placeholder
 * in a header value or query string (also %-escaped and inside Basic
 * credentials), and writing the value with the real secret swapped in
 * straight into the head's vault_wbuf (vault_wbuf.c): every byte of the
 * secret, raw or encoded, is written only to memory that is wiped.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include "vault/vault.h"
#include "core/util.h"
#include "vault/vault_int.h"

/* The longest header value or query looked into (heads are smaller). */
#define SWAP_VALUE_MAX		(1u << 20)

static const char b64_alpha[2][65] = {
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
};

/* ------------------------------------------------------------ encoders */

size_t
vault_b64_encode(const unsigned char *in, size_t len, int url, int pad,
    char *out)
{
	const char *a = b64_alpha[url ? 1 : 0];
	size_t i, o = 0;
	unsigned long w;

	for (i = 0; i + 3 <= len; i += 3) {
		w = (unsigned long)in[i] << 16 | (unsigned long)in[i + 1] << 8 |
		    in[i + 2];
		out[o++] = a[w >> 18 & 63];
		out[o++] = a[w >> 12 & 63];
		out[o++] = a[w >> 6 & 63];
		out[o++] = a[w & 63];
	}
	if (len - i == 1) {
		w = (unsigned long)in[i] << 16;
		out[o++] = a[w >> 18 & 63];
		out[o++] = a[w >> 12 & 63];
		if (pad) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (len - i == 2) {
		w = (unsigned long)in[i] << 16 | (unsigned long)in[i + 1] << 8;
		out[o++] = a[w >> 18 & 63];
		out[o++] = a[w >> 12 & 63];
		out[o++] = a[w >> 6 & 63];
		if (pad)
			out[o++] = '=';
	}
	return o;
}

/* 0..63, or -1; sets *kind to 1 for "+/", 2 for "-_", 0 for the rest. */
static int
b64_val(unsigned char c, int *kind)
{
	*kind = 0;
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '/') {
		*kind = 1;
		return c == '+' ? 62 : 63;
	}
	if (c == '-' || c == '_') {
		*kind = 2;
		return c == '-' ? 62 : 63;
	}
	return -1;
}

long
vault_b64_decode(const char *in, size_t len, unsigned char *out, int *url,
    int *padded)
{
	size_t i, npad = 0, o = 0;
	unsigned long w = 0;
	int v, kind, seen = 0, bits = 0;

	*url = 0;
	*padded = 0;
	while (npad < 2 && len > 0 && in[len - 1] == '=') {
		len--;
		npad++;
	}
	if (npad > 0) {
		if ((len + npad) % 4 != 0)
			return -1;
		*padded = 1;
	}
	if (len % 4 == 1)
		return -1;
	for (i = 0; i < len; i++) {
		if ((v = b64_val((unsigned char)in[i], &kind)) < 0)
			return -1;
		if (kind != 0) {
			if (seen != 0 && seen != kind)
				return -1;	/* mixed alphabets */
			seen = kind;
		}
		w = (w << 6 | (unsigned long)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(w >> bits);
		}
	}
	*url = seen == 2;
	return (long)o;
}

static int
pct_unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

size_t
vault_pct_encode(const unsigned char *in, size_t len, int all, int upper,
    char *out)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (!all && pct_unreserved(in[i])) {
			out[o++] = (char)in[i];
			continue;
		}
		out[o++] = '%';
		out[o++] = hex[in[i] >> 4];
		out[o++] = hex[in[i] & 15];
	}
	return o;
}

/* ------------------------------------------------------------ placeholders */

void
vault_placeholder_new(char *out)
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char r[21];
	size_t i, bit, pfx = sizeof(VAULT_PLACEHOLDER_PREFIX) - 1;
	unsigned int w;

	r[20] = 0;
	if (RAND_bytes(r, 20) != 1) {
		ERR_clear_error();
		/* A guessable placeholder is a hole: no weak fallback. */
		if (getrandom(r, 20, 0) != 20)
			abort();
	}
	memcpy(out, VAULT_PLACEHOLDER_PREFIX, pfx);
	for (i = 0; i < 32; i++) {
		bit = 5 * i;
		w = (unsigned int)r[bit / 8] << 8 | r[bit / 8 + 1];
		out[pfx + i] = b32[(w >> (11 - bit % 8)) & 31];
	}
	out[pfx + 32] = '\0';
}

/* n random bytes from the CSPRNG; no weak fallback. */
static void
ph_random(unsigned char *r, size_t n)
{
	if (RAND_bytes(r, (int)n) != 1) {
		ERR_clear_error();
		if (getrandom(r, n, 0) != (ssize_t)n)
			abort();
	}
}

void
vault_placeholder_shaped(char *out, const char *prefix, size_t len,
    const char *alphabet)
{
	unsigned char r[64];
	size_t i = strlen(prefix), k = strlen(alphabet), j = sizeof(r);
	/* Bytes at or above lim would favour the first characters. */
	unsigned int lim = 256 - 256 % (unsigned int)k;

	memcpy(out, prefix, i);
	while (i < len) {
		if (j == sizeof(r)) {
			ph_random(r, sizeof(r));
			j = 0;
		}
		if (r[j] < lim)
			out[i++] = alphabet[r[j] % k];
		j++;
	}
	out[len] = '\0';
	OPENSSL_cleanse(r, sizeof(r));
}

/* ------------------------------------------------------------ matching */

/*
 * Bytes of v[0..n) that spell ph, each byte as itself or as %XX (either
 * case); 0 when they do not. *esc: some byte was escaped.
 */
static size_t
ph_match(const unsigned char *v, size_t n, const char *ph, size_t phlen,
    int *esc)
{
	size_t i = 0, j;
	int hi, lo;

	*esc = 0;
	for (j = 0; j < phlen; j++) {
		if (i >= n)
			return 0;
		if (v[i] == '%' && i + 2 < n &&
		    (hi = util_hexval(v[i + 1])) >= 0 &&
		    (lo = util_hexval(v[i + 2])) >= 0 &&
		    (hi << 4 | lo) == (unsigned char)ph[j]) {
			i += 3;
			*esc = 1;
		} else if (v[i] == (unsigned char)ph[j])
			i++;
		else
			return 0;
	}
	return i;
}

/* Count the occurrences of ph in v; *literal: some were not escaped. */
static int
ph_count(const unsigned char *v, size_t n, const char *ph, size_t phlen,
    int *literal)
{
	size_t i = 0, m;
	int esc, count = 0;

	*literal = 0;
	while (i < n) {
		if ((m = ph_match(v + i, n - i, ph, phlen, &esc)) == 0) {
			i++;
			continue;
		}
		if (!esc)
			*literal = 1;
		count++;
		i += m;
	}
	return count;
}

/* A secret that would break a header line (CR, LF, NUL, ...). */
static int
unsafe_in_header(const struct vault_secret *s)
{
	size_t i;

	for (i = 0; i < s->len; i++)
		if ((s->val[i] < 0x20 && s->val[i] != '\t') ||
		    s->val[i] == 0x7f)
			return 1;
	return 0;
}

/*
 * Write v with every occurrence of ph replaced to dst (room for
 * swap_bound()): by the secret itself when the placeholder was written
 * literally and raw is allowed, otherwise by the secret percent-encoded.
 * Returns the length written.
 */
static size_t
swap_mem(unsigned char *dst, const unsigned char *v, size_t n,
    const char *ph, size_t phlen, const struct vault_secret *s, int raw_ok)
{
	size_t i = 0, run = 0, m, o = 0;
	int esc;

	while (i < n) {
		if ((m = ph_match(v + i, n - i, ph, phlen, &esc)) == 0) {
			i++;
			continue;
		}
		memcpy(dst + o, v + run, i - run);
		o += i - run;
		if (raw_ok && !esc) {
			memcpy(dst + o, s->val, s->len);
			o += s->len;
		} else
			o += vault_pct_encode(s->val, s->len, 0, 1,
			    (char *)dst + o);
		i += m;
		run = i;
	}
	memcpy(dst + o, v + run, n - run);
	return o + n - run;
}

static size_t
swap_bound(size_t n, int count, const struct vault_secret *s)
{
	return n + (size_t)count * 3 * s->len;
}

/* ------------------------------------------------------------ Basic */

/*
 * RFC 7617: "Basic" (any case, RFC 9110 §11.1), whitespace, then the
 * token68 base64(user:pass). Two readings of the token, on purpose:
 *
 * - looking for the placeholder, it is decoded as loosely as any origin
 *   might: either alphabet, padding optional, every other byte skipped
 *   (several decoders skip what is not base64), so that no spelling of the
 *   placeholder gets past the misuse check;
 * - swapping, only the canonical form is accepted: RFC 4648 §4, padded,
 *   zero spare bits, nothing else in the token — exactly what an encoder
 *   writes and what curl, git, browsers and every HTTP library send. Any
 *   other spelling that holds the placeholder is refused, and what goes
 *   out is always canonical again.
 */
struct basic {
	size_t		 tok, toklen;	/* the token within the value */
	unsigned char	*cred;		/* user:pass, decoded loosely */
	size_t		 credlen;
	int		 canonical;	/* tok is exactly b64(cred), padded */
};

static int
is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* Every byte of either alphabet counts; the rest, '=' included, is skipped. */
static size_t
b64_decode_loose(const unsigned char *in, size_t len, unsigned char *out)
{
	size_t i, o = 0;
	unsigned long w = 0;
	int v, kind, bits = 0;

	for (i = 0; i < len; i++) {
		if ((v = b64_val(in[i], &kind)) < 0)
			continue;
		w = (w << 6 | (unsigned long)v) & 0xffffff;
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(w >> bits);
		}
	}
	return o;
}

/* 1 when tok is what vault_b64_encode(cred, std, padded) writes. */
static int
b64_canonical(const unsigned char *tok, size_t toklen,
    const unsigned char *cred, size_t credlen)
{
	char q[4];
	size_t i, k;

	if (toklen != (credlen + 2) / 3 * 4)
		return 0;
	for (i = 0, k = 0; i < credlen; i += 3, k += 4) {
		vault_b64_encode(cred + i, credlen - i < 3 ? credlen - i : 3,
		    VAULT_B64_STD, 1, q);
		if (memcmp(tok + k, q, 4) != 0)
			return 0;
	}
	return 1;
}

/* 1 and b filled when v is "Basic <token>"; 0 otherwise; -1 no memory. */
static int
basic_parse(const unsigned char *v, size_t n, struct basic *b)
{
	size_t i = 0, end = n;

	memset(b, 0, sizeof(*b));
	if (n > SWAP_VALUE_MAX)
		return 0;
	while (i < n && is_ows(v[i]))
		i++;
	while (end > i && is_ows(v[end - 1]))
		end--;
	if (end - i < 7 || strncasecmp((const char *)v + i, "basic", 5) != 0 ||
	    !is_ows(v[i + 5]))
		return 0;
	i += 5;
	while (i < end && is_ows(v[i]))
		i++;
	b->tok = i;
	b->toklen = end - i;
	/* The client's credential, no secret: wiped on free all the same. */
	if ((b->cred = malloc(b->toklen / 4 * 3 + 3)) == NULL)
		return -1;
	b->credlen = b64_decode_loose(v + b->tok, b->toklen, b->cred);
	b->canonical = b64_canonical(v + b->tok, b->toklen, b->cred,
	    b->credlen);
	return 1;
}

static void
basic_free(struct basic *b)
{
	if (b->cred == NULL)
		return;
	OPENSSL_cleanse(b->cred, b->toklen / 4 * 3 + 3);
	free(b->cred);
	b->cred = NULL;
}

/*
 * The Basic form: decode, swap inside user:pass, re-encode as canonical
 * base64. Returns the number of swaps (0: not there), or -1: no memory, or
 * the placeholder is there in a spelling that is not canonical.
 */
static int
swap_basic(struct vault_wbuf *out, const unsigned char *v, size_t n,
    const char *ph, size_t phlen, const struct vault_secret *s)
{
	struct basic b;
	unsigned char *plain = NULL, *o;
	size_t plen, tail, need, olen;
	int count, literal, rc;

	if ((rc = basic_parse(v, n, &b)) <= 0)
		return rc;
	rc = -1;
	if ((count = ph_count(b.cred, b.credlen, ph, phlen, &literal)) == 0) {
		rc = 0;
		goto done;
	}
	if (!b.canonical)
		goto done;
	/* The new user:pass holds the secret: build it in wiped memory. */
	if ((plain = vault_secmem_alloc(swap_bound(b.credlen, count, s))) ==
	    NULL)
		goto done;
	plen = swap_mem(plain, b.cred, b.credlen, ph, phlen, s, 1);
	tail = n - b.tok - b.toklen;
	need = b.tok + (plen + 2) / 3 * 4 + tail;
	/* Encoded straight into the head: no other copy of the token. */
	if ((o = vault_wbuf_secret_room(out, need)) == NULL)
		goto done;
	memcpy(o, v, b.tok);
	olen = b.tok;
	olen += vault_b64_encode(plain, plen, VAULT_B64_STD, 1,
	    (char *)o + olen);
	memcpy(o + olen, v + b.tok + b.toklen, tail);
	vault_wbuf_commit(out, olen + tail);
	rc = count;
done:
	vault_secmem_free(plain);
	basic_free(&b);
	return rc;
}

/* ------------------------------------------------------------ interface */

int
vault_swap(const struct vault_snapshot *snap, const char *secret,
    const char *placeholder, const char *value, size_t len, int query,
    struct vault_wbuf *out)
{
	const struct vault_secret *s;
	const unsigned char *v = (const unsigned char *)value;
	unsigned char *o;
	size_t phlen;
	int count, literal, rc;

	if ((s = vault_snapshot_find(snap, secret)) == NULL ||
	    placeholder == NULL || (phlen = strlen(placeholder)) == 0)
		return -1;
	if (len == 0 || len > SWAP_VALUE_MAX)
		return len == 0 ? 0 : -1;
	if (!query && (rc = swap_basic(out, v, len, placeholder, phlen,
	    s)) != 0)
		return rc;
	if ((count = ph_count(v, len, placeholder, phlen, &literal)) == 0)
		return 0;
	if (!query && literal && unsafe_in_header(s))
		return -1;
	/* Written in place, then committed: a failure leaves nothing in out. */
	if ((o = vault_wbuf_secret_room(out, swap_bound(len, count, s))) ==
	    NULL)
		return -1;
	vault_wbuf_commit(out, swap_mem(o, v, len, placeholder, phlen, s,
	    !query));
	return count;
}

int
vault_contains_placeholder(const char *placeholder, const char *value,
    size_t len)
{
	const unsigned char *v = (const unsigned char *)value;
	struct basic b;
	size_t phlen;
	int literal, found, rc;

	if (placeholder == NULL || (phlen = strlen(placeholder)) == 0 ||
	    len == 0)
		return 0;
	if (ph_count(v, len, placeholder, phlen, &literal) > 0)
		return 1;
	/* No memory to decode: say yes, so that the caller blocks. */
	if ((rc = basic_parse(v, len, &b)) <= 0)
		return rc < 0;
	found = ph_count(b.cred, b.credlen, placeholder, phlen, &literal) > 0;
	basic_free(&b);
	return found;
}

/*
 * The user:pass of a "Basic <token>" value decoded as loosely as
 * vault_contains_placeholder() reads it, for a caller that looks for many
 * placeholders at once (src/exchange/cred_phs.c).
 */
int
vault_basic_loose(const char *value, size_t len, unsigned char **out,
    size_t *outlen)
{
	struct basic b;
	int rc;

	*out = NULL;
	*outlen = 0;
	if ((rc = basic_parse((const unsigned char *)value, len, &b)) <= 0)
		return rc;
	*out = b.cred;
	*outlen = b.credlen;
	return 1;
}
