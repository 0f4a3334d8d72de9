/*
 * The ingress listener's pure parsers: PORT-ID.<ingress_domain> hosts, and
 * the sg_token query parameter and cookie cut out of a request. See
 * ingress_host.h; nothing here allocates or does I/O.
 */
#include <string.h>

#include "core/util.h"
#include "parse/ingress_host.h"

#define TOKEN_NAME	"sg_token"

static int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Decimal 1-65535 without sign or leading zero; -1 otherwise. */
static long
dec_port(const char *s, size_t len)
{
	long v = 0;
	size_t i;

	if (len == 0 || len > 5 || s[0] == '0')
		return -1;
	for (i = 0; i < len; i++) {
		if (!is_digit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? v : -1;
}

/* PORT-ID, the first label (lower-case already). */
static int
first_label(const char *l, size_t len, struct ingress_host *out)
{
	const char *dash = memchr(l, '-', len);
	size_t plen, idlen, i;
	long port;

	if (dash == NULL)
		return INGRESS_HOST_FOREIGN;
	plen = (size_t)(dash - l);
	if ((port = dec_port(l, plen)) == -1)
		return INGRESS_HOST_FOREIGN;
	idlen = len - plen - 1;
	if (idlen == 0 || idlen > INGRESS_ID_MAX)
		return INGRESS_HOST_FOREIGN;
	for (i = 0; i < idlen; i++) {
		int c = (unsigned char)dash[1 + i];
		if (!((c >= 'a' && c <= 'z') || is_digit(c) ||
		    (c == '-' && i > 0)))
			return INGRESS_HOST_FOREIGN;
	}
	memcpy(out->id, dash + 1, idlen);
	out->id[idlen] = '\0';
	out->port = (uint16_t)port;
	return INGRESS_HOST_OK;
}

int
ingress_host_parse(const char *host, size_t len, const char *domain,
    struct ingress_host *out)
{
	const char *colon, *dot;
	size_t nlen, i;
	int c, prev = '.';

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return INGRESS_HOST_BAD;
	if (host[0] == '[')	/* an IPv6 literal: a host, never ours */
		return memchr(host, ']', len) != NULL ? INGRESS_HOST_FOREIGN :
		    INGRESS_HOST_BAD;
	colon = memchr(host, ':', len);
	nlen = colon != NULL ? (size_t)(colon - host) : len;
	if (colon != NULL && dec_port(colon + 1, len - nlen - 1) == -1)
		return INGRESS_HOST_BAD;
	if (nlen > 1 && host[nlen - 1] == '.')
		nlen--;
	if (nlen == 0 || nlen >= sizeof(out->name) || host[nlen - 1] == '.')
		return INGRESS_HOST_BAD;
	for (i = 0; i < nlen; i++) {
		c = (unsigned char)host[i];
		if (c == '.' && prev == '.')
			return INGRESS_HOST_BAD;	/* empty label */
		if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') ||
		    c == '-' || c == '.' || c == '_'))
			return INGRESS_HOST_BAD;
		out->name[i] = (char)lower(c);
		prev = c;
	}
	out->name[nlen] = '\0';
	if ((dot = memchr(out->name, '.', nlen)) == NULL ||
	    strcmp(dot + 1, domain) != 0)
		return INGRESS_HOST_FOREIGN;
	return first_label(out->name, (size_t)(dot - out->name), out);
}

int
ingress_token_syntax_ok(const char *tok, size_t len)
{
	size_t i;

	if (len == 0 || len > INGRESS_TOKEN_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		int c = (unsigned char)tok[i];
		if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') ||
		    c == '-' || c == '.' || c == '_' || c == '~'))
			return 0;
	}
	return 1;
}

/* 1 when the percent-decoded name[0..len) is "sg_token". */
static int
is_token_name(const char *name, size_t len)
{
	const char *want = TOKEN_NAME;
	size_t i, j = 0;

	for (i = 0; i < len; i++, j++) {
		int c = (unsigned char)name[i];
		if (c == '%' && i + 2 < len &&
		    util_hexval((unsigned char)name[i + 1]) >= 0 &&
		    util_hexval((unsigned char)name[i + 2]) >= 0) {
			c = util_hexval((unsigned char)name[i + 1]) << 4 |
			    util_hexval((unsigned char)name[i + 2]);
			i += 2;
		}
		if (want[j] == '\0' || c != want[j])
			return 0;
	}
	return want[j] == '\0';
}

struct out {
	char	*p;
	size_t	 len;
	size_t	 cap;
	int	 over;
};

static void
put(struct out *o, const char *s, size_t n)
{
	if (o->over || o->len + n >= o->cap) {
		o->over = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

int
ingress_strip_query(const char *target, size_t len, char *out, size_t outlen,
    const char **tok, size_t *toklen)
{
	const char *q = memchr(target, '?', len), *p, *end, *amp, *eq;
	struct out o = { out, 0, outlen, 0 };
	int kept = 0;

	*tok = NULL;
	*toklen = 0;
	if (outlen == 0)
		return -1;
	out[0] = '\0';
	put(&o, target, q != NULL ? (size_t)(q - target) : len);
	end = target + len;
	for (p = q != NULL ? q + 1 : end; p < end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if (amp == p)
			continue;	/* "&&": nothing to keep */
		eq = memchr(p, '=', (size_t)(amp - p));
		if (is_token_name(p, (size_t)((eq ? eq : amp) - p))) {
			if (*tok == NULL) {
				*tok = eq ? eq + 1 : amp;
				*toklen = eq ? (size_t)(amp - eq - 1) : 0;
			}
			continue;
		}
		put(&o, kept ? "&" : "?", 1);
		put(&o, p, (size_t)(amp - p));
		kept = 1;
	}
	return o.over ? -1 : (int)o.len;
}

int
ingress_strip_cookie(const char *v, size_t len, char *out, size_t outlen,
    const char **tok, size_t *toklen)
{
	const char *p = v, *end = v + len, *semi, *a, *b, *eq;
	struct out o = { out, 0, outlen, 0 };

	*tok = NULL;
	*toklen = 0;
	if (outlen == 0)
		return -1;
	out[0] = '\0';
	for (; p < end; p = semi + 1) {
		if ((semi = memchr(p, ';', (size_t)(end - p))) == NULL)
			semi = end;
		a = p;
		b = semi;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a == b)
			continue;
		eq = memchr(a, '=', (size_t)(b - a));
		if (eq != NULL && (size_t)(eq - a) == strlen(TOKEN_NAME) &&
		    memcmp(a, TOKEN_NAME, strlen(TOKEN_NAME)) == 0) {
			if (*tok == NULL) {
				*tok = eq + 1;
				*toklen = (size_t)(b - eq - 1);
			}
			continue;
		}
		if (o.len > 0)
			put(&o, "; ", 2);
		put(&o, a, (size_t)(b - a));
	}
	return o.over ? -1 : (int)o.len;
}

int
ingress_set_cookie_is_token(const char *v, size_t len)
{
	size_t a = 0, b;

	while (a < len && (v[a] == ' ' || v[a] == '\t'))
		a++;
	for (b = a; b < len && v[b] != '=' && v[b] != ';'; b++)
		;
	if (b == len || v[b] != '=')
		return 0;
	while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
		b--;
	return is_token_name(v + a, b - a);
}
