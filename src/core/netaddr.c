/*
 * IP addresses and prefixes as values: the literal parser (every IPv4 form
 * inet_aton and browsers accept, IPv6 with or without brackets), canonical
 * text, the "not globally reachable" classification and the prefix trie.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netaddr.h"
#include "core/util.h"

/* Longest text worth looking at: an IPv6 literal with brackets is 47 bytes;
 * IPv4 parts may carry any number of leading zeros, so allow more. */
#define NETADDR_PARSE_MAX	255

static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

static void
netaddr_set_v4(struct netaddr *out, uint32_t v)
{
	memset(out, 0, sizeof(*out));
	out->family = AF_INET;
	out->a[0] = v >> 24;
	out->a[1] = v >> 16;
	out->a[2] = v >> 8;
	out->a[3] = v;
}

/* IPv4-mapped IPv6 becomes the IPv4 address it maps. */
static void
netaddr_normalise(struct netaddr *n)
{
	uint8_t v4[4];

	if (n->family != AF_INET6 ||
	    memcmp(n->a, v4mapped_prefix, sizeof(v4mapped_prefix)) != 0)
		return;
	memcpy(v4, n->a + 12, 4);
	memset(n->a, 0, sizeof(n->a));
	memcpy(n->a, v4, 4);
	n->family = AF_INET;
}

/*
 * One inet_aton part: "0x..." hex (possibly no digits, which is 0 as in
 * WHATWG URL), "0..." octal, else decimal. Values past 2^32 fail.
 */
static int
v4_part(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int base = 10, d;

	if (len == 0)
		return -1;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
	} else if (len >= 2 && s[0] == '0') {
		base = 8;
		i = 1;
	}
	for (; i < len; i++) {
		d = util_hexval((unsigned char)s[i]);
		if (d < 0 || d >= base)
			return -1;
		v = v * base + d;
		if (v > 0xffffffffULL)
			return -1;
	}
	*out = v;
	return 0;
}

/* 1-4 parts; the last part fills the remaining bytes. */
static int
parse_v4_aton(const char *s, size_t len, struct netaddr *out)
{
	uint64_t parts[4], v;
	size_t i, start = 0, np = 0;

	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0)
		return -1;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (np == 4 || v4_part(s + start, i - start, &parts[np]) == -1)
			return -1;
		np++;
		start = i + 1;
	}
	v = 0;
	for (i = 0; i + 1 < np; i++) {
		if (parts[i] > 255)
			return -1;
		v |= parts[i] << (24 - 8 * i);
	}
	/* The last of np parts covers 5 - np bytes. */
	if (np < 4 && parts[np - 1] >> (8 * (5 - np)) != 0)
		return -1;
	if (np == 4 && parts[3] > 255)
		return -1;
	v |= parts[np - 1];
	netaddr_set_v4(out, (uint32_t)v);
	return 0;
}

/* Strict dotted quad (the IPv6 tail, CIDR text): decimal, no leading zeros. */
static int
parse_v4_strict(const char *s, size_t len, uint8_t out[4])
{
	size_t i, n = 0, digits = 0;
	unsigned v = 0;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (digits == 0 || n == 4)
				return -1;
			out[n++] = (uint8_t)v;
			v = 0;
			digits = 0;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (digits > 0 && v == 0)
			return -1;	/* leading zero */
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > 255)
			return -1;
		digits++;
	}
	return n == 4 ? 0 : -1;
}

/* RFC 4291 text: groups of 1-4 hex digits, one "::", optional IPv4 tail. */
static int
parse_v6(const char *s, size_t len, uint8_t out[16])
{
	uint8_t buf[16];
	size_t i = 0, start, n = 0;
	int gap = -1, d;
	unsigned v, digits;

	memset(buf, 0, sizeof(buf));
	if (len < 2)
		return -1;
	if (s[0] == ':') {
		if (s[1] != ':')
			return -1;
		gap = 0;
		i = 2;
		if (len == 2)
			goto done;
	}
	for (;;) {
		start = i;
		v = 0;
		digits = 0;
		while (i < len && (d = util_hexval((unsigned char)s[i])) >= 0) {
			if (++digits > 4)
				return -1;
			v = (v << 4) | (unsigned)d;
			i++;
		}
		if (i < len && s[i] == '.') {
			/* An IPv4 tail ends the address: two groups. */
			if (n > 12 || parse_v4_strict(s + start, len - start,
			    buf + n) == -1)
				return -1;
			n += 4;
			break;
		}
		if (digits == 0 || n == 16)
			return -1;
		buf[n++] = v >> 8;
		buf[n++] = v & 0xff;
		if (i == len)
			break;
		if (s[i] != ':' || ++i == len)
			return -1;
		if (s[i] == ':') {
			if (gap != -1)
				return -1;
			gap = (int)n;
			if (++i == len)
				break;
		}
	}
done:
	if (gap == -1) {
		if (n != 16)
			return -1;
	} else {
		/* "::" stands for at least one group of zeros. */
		if (n > 14)
			return -1;
		memmove(buf + 16 - (n - gap), buf + gap, n - gap);
		memset(buf + gap, 0, 16 - n);
	}
	memcpy(out, buf, 16);
	return 0;
}

int
netaddr_parse(const char *s, size_t len, struct netaddr *out)
{
	struct netaddr tmp;

	if (s == NULL || len == 0 || len > NETADDR_PARSE_MAX)
		return -1;
	if (s[0] == '[') {
		if (len < 3 || s[len - 1] != ']')
			return -1;
		s++;
		len -= 2;
		if (memchr(s, ':', len) == NULL)
			return -1;	/* brackets are for IPv6 only */
	}
	memset(&tmp, 0, sizeof(tmp));
	if (memchr(s, ':', len) != NULL) {
		/* Zone ids ("%eth0") are rejected by the character check. */
		if (parse_v6(s, len, tmp.a) == -1)
			return -1;
		tmp.family = AF_INET6;
		netaddr_normalise(&tmp);
	} else if (parse_v4_aton(s, len, &tmp) == -1)
		return -1;
	*out = tmp;
	return 0;
}

/* RFC 5952: lower case, no leading zeros, the longest run (>= 2) of zero
 * groups compressed, the first one on a tie. */
static const char *
ntop_v6(const uint8_t a[16], char *buf, size_t len)
{
	char tmp[NETADDR_STRLEN];
	unsigned g[8];
	int i, best = -1, bestlen = 0, cur = -1, curlen = 0;
	size_t o = 0;

	for (i = 0; i < 8; i++)
		g[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
	for (i = 0; i < 8; i++) {
		if (g[i] == 0) {
			if (cur == -1) {
				cur = i;
				curlen = 0;
			}
			if (++curlen > bestlen) {
				best = cur;
				bestlen = curlen;
			}
		} else
			cur = -1;
	}
	if (bestlen < 2)
		best = -1;
	for (i = 0; i < 8; i++) {
		if (i == best) {
			tmp[o++] = ':';
			tmp[o++] = ':';
			i += bestlen - 1;
			continue;
		}
		if (o > 0 && tmp[o - 1] != ':')
			tmp[o++] = ':';
		o += (size_t)snprintf(tmp + o, sizeof(tmp) - o, "%x", g[i]);
	}
	tmp[o] = '\0';
	if (o + 1 > len)
		return NULL;
	memcpy(buf, tmp, o + 1);
	return buf;
}

const char *
netaddr_ntop(const struct netaddr *n, char *buf, size_t len)
{
	int r;

	if (n->family == AF_INET) {
		r = snprintf(buf, len, "%u.%u.%u.%u", n->a[0], n->a[1],
		    n->a[2], n->a[3]);
		return (r < 0 || (size_t)r >= len) ? NULL : buf;
	}
	if (n->family == AF_INET6)
		return ntop_v6(n->a, buf, len);
	return NULL;
}

int
netaddr_cmp(const struct netaddr *x, const struct netaddr *y)
{
	size_t len;

	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	len = x->family == AF_INET ? 4 : 16;
	return memcmp(x->a, y->a, len);
}

void
netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *out,
    uint16_t *port)
{
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;
	uint16_t p = 0;

	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		sin = (const struct sockaddr_in *)sa;
		out->family = AF_INET;
		memcpy(out->a, &sin->sin_addr, 4);
		p = ntohs(sin->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		sin6 = (const struct sockaddr_in6 *)sa;
		out->family = AF_INET6;
		memcpy(out->a, &sin6->sin6_addr, 16);
		p = ntohs(sin6->sin6_port);
		netaddr_normalise(out);
	}
	if (port != NULL)
		*port = p;
}

socklen_t
netaddr_to_sockaddr(const struct netaddr *n, uint16_t port,
    struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;

	memset(ss, 0, sizeof(*ss));
	if (n->family == AF_INET) {
		sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, n->a, 4);
		return sizeof(*sin);
	}
	if (n->family == AF_INET6) {
		sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, n->a, 16);
		return sizeof(*sin6);
	}
	return 0;
}

/* Does a[] start with the first bits of p[]? */
static int
prefix_match(const uint8_t *a, const uint8_t *p, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	uint8_t mask;

	if (memcmp(a, p, whole) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (p[whole] & mask);
}

struct special {
	uint8_t		p[16];
	uint8_t		bits;
};

/* IANA IPv4 Special-Purpose Address Registry, "globally reachable: false". */
static const struct special internal_v4[] = {
	{ { 0 }, 8 },				/* "this network" */
	{ { 10 }, 8 },				/* RFC 1918 */
	{ { 100, 64 }, 10 },			/* CGNAT shared space */
	{ { 127 }, 8 },				/* loopback */
	{ { 169, 254 }, 16 },			/* link-local, cloud metadata */
	{ { 172, 16 }, 12 },			/* RFC 1918 */
	{ { 192, 0, 0 }, 24 },			/* IETF protocol assignments */
	{ { 192, 0, 2 }, 24 },			/* TEST-NET-1 */
	{ { 192, 88, 99 }, 24 },		/* old 6to4 relay anycast */
	{ { 192, 168 }, 16 },			/* RFC 1918 */
	{ { 198, 18 }, 15 },			/* benchmarking */
	{ { 198, 51, 100 }, 24 },		/* TEST-NET-2 */
	{ { 203, 0, 113 }, 24 },		/* TEST-NET-3 */
	{ { 224 }, 4 },				/* multicast */
	{ { 240 }, 4 },				/* reserved, broadcast */
};

/* IANA IPv6 Special-Purpose Address Registry, "globally reachable: false"
 * (the embedded-IPv4 forms are handled in code). */
static const struct special internal_v6[] = {
	{ { 0 }, 96 },				/* ::, ::1, IPv4-compatible */
	{ { 0, 0x64, 0xff, 0x9b, 0, 1 }, 48 },	/* local-use NAT64 */
	{ { 1, 0 }, 64 },			/* discard-only 100::/64 */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32 },	/* documentation */
	{ { 0x3f, 0xff }, 20 },			/* documentation 3fff::/20 */
	{ { 0x5f, 0x00 }, 16 },			/* SRv6 SIDs */
	{ { 0xfc }, 7 },			/* unique local */
	{ { 0xfe, 0x80 }, 10 },			/* link-local */
	{ { 0xfe, 0xc0 }, 10 },			/* deprecated site-local */
	{ { 0xff }, 8 },			/* multicast */
};

/* The globally reachable exceptions inside 2001::/23. */
static const struct special global_2001[] = {
	{ { 0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, 128 },
	{ { 0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2 }, 128 },
	{ { 0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3 }, 128 },
	{ { 0x20, 0x01, 0, 3 }, 32 },		/* AMT */
	{ { 0x20, 0x01, 0, 4, 0x01, 0x12 }, 48 }, /* AS112-v6 */
	{ { 0x20, 0x01, 0, 0x20 }, 28 },	/* ORCHIDv2 */
	{ { 0x20, 0x01, 0, 0x30 }, 28 },	/* drone remote ID */
};

static const uint8_t pfx_2001[] = { 0x20, 0x01, 0x00 };
static const uint8_t pfx_nat64[] = {
	0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0
};
static const uint8_t pfx_6to4[] = { 0x20, 0x02 };

static int
special_match(const struct special *t, size_t n, const uint8_t *a)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (prefix_match(a, t[i].p, t[i].bits))
			return 1;
	return 0;
}

static int
internal_v4_bytes(const uint8_t a[4])
{
	return special_match(internal_v4,
	    sizeof(internal_v4) / sizeof(internal_v4[0]), a);
}

int
netaddr_is_internal(const struct netaddr *n)
{
	const uint8_t *a = n->a;

	if (n->family == AF_INET)
		return internal_v4_bytes(a);
	if (n->family != AF_INET6)
		return 1;	/* unknown: never treat as reachable */
	/* Forms that carry an IPv4 address decide by that address. */
	if (prefix_match(a, v4mapped_prefix, 96) ||
	    prefix_match(a, pfx_nat64, 96))
		return internal_v4_bytes(a + 12);
	if (prefix_match(a, pfx_6to4, 16))
		return internal_v4_bytes(a + 2);
	if (prefix_match(a, pfx_2001, 23))
		return !special_match(global_2001,
		    sizeof(global_2001) / sizeof(global_2001[0]), a);
	return special_match(internal_v6,
	    sizeof(internal_v6) / sizeof(internal_v6[0]), a);
}

/* Prefix length: decimal, no leading zeros, at most max. */
static int
parse_bits(const char *s, unsigned max, uint8_t *out)
{
	unsigned v = 0;
	size_t i, len = strlen(s);

	if (len == 0 || len > 3 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = (uint8_t)v;
	return 0;
}

int
cidr_parse(const char *s, struct cidr *out, const char **errstr)
{
	struct cidr c;
	const char *slash;
	size_t alen, i;
	unsigned max;
	const char *dummy;

	if (errstr == NULL)
		errstr = &dummy;
	memset(&c, 0, sizeof(c));
	if (s == NULL || *s == '\0') {
		*errstr = "empty prefix";
		return -1;
	}
	slash = strchr(s, '/');
	alen = slash ? (size_t)(slash - s) : strlen(s);
	if (alen > NETADDR_STRLEN) {
		*errstr = "address too long";
		return -1;
	}
	/* Only the unambiguous forms: dotted quad (no octal) or IPv6. */
	if (memchr(s, ':', alen) != NULL) {
		if (parse_v6(s, alen, c.addr.a) == -1) {
			*errstr = "invalid IPv6 address";
			return -1;
		}
		c.addr.family = AF_INET6;
		max = 128;
	} else {
		if (parse_v4_strict(s, alen, c.addr.a) == -1) {
			*errstr = "invalid IPv4 address (want a.b.c.d)";
			return -1;
		}
		c.addr.family = AF_INET;
		max = 32;
	}
	c.bits = (uint8_t)max;
	if (slash != NULL && parse_bits(slash + 1, max, &c.bits) == -1) {
		*errstr = "invalid prefix length";
		return -1;
	}
	/* ::ffff:a.b.c.d/n is the IPv4 prefix /n-96, as addresses are. */
	if (c.addr.family == AF_INET6 && c.bits >= 96 &&
	    memcmp(c.addr.a, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0) {
		netaddr_normalise(&c.addr);
		c.bits -= 96;
		max = 32;
	}
	/* Host bits set is most likely a typo: refuse rather than guess. */
	for (i = 0; i < max; i++) {
		if (i >= c.bits && (c.addr.a[i / 8] & (0x80 >> (i % 8)))) {
			*errstr = "host bits set after the prefix length";
			return -1;
		}
	}
	*out = c;
	return 0;
}

int
cidr_contains(const struct cidr *c, const struct netaddr *n)
{
	struct netaddr a = *n;

	netaddr_normalise(&a);
	if (a.family != c->addr.family)
		return 0;
	return prefix_match(a.a, c->addr.a, c->bits);
}

const char *
cidr_ntop(const struct cidr *c, char *buf, size_t len)
{
	char tmp[NETADDR_STRLEN];
	int r;

	if (netaddr_ntop(&c->addr, tmp, sizeof(tmp)) == NULL)
		return NULL;
	r = snprintf(buf, len, "%s/%u", tmp, c->bits);
	return (r < 0 || (size_t)r >= len) ? NULL : buf;
}

const char *
cidr_network_of(const char *s, char *buf, size_t len)
{
	struct cidr c;
	char addr[NETADDR_STRLEN + 1];
	const char *slash = s != NULL ? strchr(s, '/') : NULL;
	uint8_t bits;
	unsigned i, max;

	if (slash == NULL || (size_t)(slash - s) > NETADDR_STRLEN)
		return NULL;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	/* the address alone is its full-length prefix: no host bits */
	if (cidr_parse(addr, &c, NULL) == -1)
		return NULL;
	max = strchr(addr, ':') != NULL ? 128 : 32;
	if (parse_bits(slash + 1, max, &bits) == -1)
		return NULL;
	if (max == 128 && c.addr.family == AF_INET) {	/* ::ffff:a.b.c.d */
		if (bits < 96)
			return NULL;
		bits -= 96;
	}
	c.bits = bits;
	for (i = bits; i < (c.addr.family == AF_INET ? 32u : 128u); i++)
		c.addr.a[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
	return cidr_ntop(&c, buf, len);
}

/*
 * The prefix set: one binary trie per family, nodes in one array and linked
 * by index (0 is "none": the roots are never anybody's child). Values hang
 * off the node at their prefix's depth, in insertion order.
 */
struct cidr_node {
	uint32_t	child[2];
	uint32_t	vhead;		/* index into vals + 1; 0: none */
	uint32_t	vtail;
};

struct cidr_val {
	int		value;
	uint32_t	next;		/* index + 1; 0: end */
};

struct cidr_set {
	struct cidr_node *nodes;	/* [0] IPv4 root, [1] IPv6 root */
	size_t		 n_nodes, cap_nodes;
	struct cidr_val	*vals;
	size_t		 n_vals, cap_vals;
};

#define CIDR_SET_MAX	(UINT32_MAX / 2)

struct cidr_set *
cidr_set_new(void)
{
	struct cidr_set *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->cap_nodes = 64;
	if ((s->nodes = calloc(s->cap_nodes, sizeof(*s->nodes))) == NULL) {
		free(s);
		return NULL;
	}
	s->n_nodes = 2;
	return s;
}

void
cidr_set_free(struct cidr_set *s)
{
	if (s == NULL)
		return;
	free(s->nodes);
	free(s->vals);
	free(s);
}

/* Room for need elements; returns the (maybe moved) array or NULL. */
static void *
grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return p;
	if (need > CIDR_SET_MAX)
		return NULL;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	if ((np = realloc(p, ncap * size)) == NULL)
		return NULL;
	memset((char *)np + *cap * size, 0, (ncap - *cap) * size);
	*cap = ncap;
	return np;
}

int
cidr_set_add(struct cidr_set *s, const struct cidr *c, int value)
{
	uint32_t cur;
	unsigned i, bit, max;
	struct cidr_node *node, *np;
	struct cidr_val *vp;

	if (c->addr.family == AF_INET) {
		cur = 0;
		max = 32;
	} else if (c->addr.family == AF_INET6) {
		cur = 1;
		max = 128;
	} else
		return -1;
	if (c->bits > max)
		return -1;
	for (i = 0; i < c->bits; i++) {
		bit = (c->addr.a[i / 8] >> (7 - i % 8)) & 1;
		if (s->nodes[cur].child[bit] == 0) {
			if ((np = grow(s->nodes, &s->cap_nodes,
			    s->n_nodes + 1, sizeof(*s->nodes))) == NULL)
				return -1;
			s->nodes = np;
			s->nodes[cur].child[bit] = (uint32_t)s->n_nodes++;
		}
		cur = s->nodes[cur].child[bit];
	}
	if ((vp = grow(s->vals, &s->cap_vals, s->n_vals + 1,
	    sizeof(*s->vals))) == NULL)
		return -1;
	s->vals = vp;
	s->vals[s->n_vals].value = value;
	s->vals[s->n_vals].next = 0;
	node = &s->nodes[cur];
	if (node->vtail == 0)
		node->vhead = (uint32_t)s->n_vals + 1;
	else
		s->vals[node->vtail - 1].next = (uint32_t)s->n_vals + 1;
	node->vtail = (uint32_t)++s->n_vals;
	return 0;
}

int
cidr_set_lookup(const struct cidr_set *s, const struct netaddr *n,
    int (*cb)(int value, void *arg), void *arg)
{
	struct netaddr a = *n;
	uint32_t cur, v;
	unsigned i, max, bit;

	if (s == NULL)
		return 0;
	netaddr_normalise(&a);
	if (a.family == AF_INET) {
		cur = 0;
		max = 32;
	} else if (a.family == AF_INET6) {
		cur = 1;
		max = 128;
	} else
		return 0;
	for (i = 0; ; i++) {
		for (v = s->nodes[cur].vhead; v != 0; v = s->vals[v - 1].next)
			if (cb(s->vals[v - 1].value, arg) == 1)
				return 1;
		if (i == max)
			break;
		bit = (a.a[i / 8] >> (7 - i % 8)) & 1;
		if ((cur = s->nodes[cur].child[bit]) == 0)
			break;
	}
	return 0;
}
