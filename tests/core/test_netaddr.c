/*
 * Unit tests for core/netaddr: every IP literal form, canonical text,
 * the internal-address classification, CIDR text and the prefix trie
 * (checked against a linear scan on random data).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/netaddr.h"

struct parse_case {
	const char	*in;
	const char	*want;		/* canonical text; NULL: not an IP */
};

static const struct parse_case parse_cases[] = {
	/* IPv4, every inet_aton form */
	{ "127.0.0.1", "127.0.0.1" },
	{ "2130706433", "127.0.0.1" },
	{ "0177.0.0.1", "127.0.0.1" },
	{ "0x7f.0.0.1", "127.0.0.1" },
	{ "0X7F.0.0.1", "127.0.0.1" },
	{ "0x7f000001", "127.0.0.1" },
	{ "017700000001", "127.0.0.1" },
	{ "127.1", "127.0.0.1" },
	{ "127.0.1", "127.0.0.1" },
	{ "0x7f.1", "127.0.0.1" },
	{ "10.1.256", "10.1.1.0" },
	{ "10.65535", "10.0.255.255" },
	{ "127.0.0.1.", "127.0.0.1" },
	{ "2130706433.", "127.0.0.1" },
	{ "0", "0.0.0.0" },
	{ "0x", "0.0.0.0" },
	{ "00000000000000000000177.0.0.1", "127.0.0.1" },
	{ "0xA9.0xFE.0xA9.0xFE", "169.254.169.254" },
	{ "0251.0376.0251.0376", "169.254.169.254" },
	{ "169.254.43518", "169.254.169.254" },
	{ "2852039166", "169.254.169.254" },
	{ "4294967295", "255.255.255.255" },
	{ "0xffffffff", "255.255.255.255" },
	{ "037777777777", "255.255.255.255" },
	{ "4294967296", NULL },
	{ "0x100000000", NULL },
	{ "1.2.3.256", NULL },
	{ "1.2.65536", NULL },
	{ "1.16777216", NULL },
	{ "256.1.1.1", NULL },
	{ "1.2.3.999", NULL },
	{ "08.1.1.1", NULL },
	{ "09", NULL },
	{ "0x1g", NULL },
	{ "1.2.3.4.5", NULL },
	{ "1..2.3", NULL },
	{ ".1.2.3", NULL },
	{ "1.2.3.4..", NULL },
	{ ".", NULL },
	{ "", NULL },
	{ "example.com", NULL },
	{ "1.2.3.a", NULL },
	{ " 1.2.3.4", NULL },
	{ "1.2.3.4 ", NULL },
	{ "+1.2.3.4", NULL },
	{ "1.2.3.-4", NULL },
	{ "1.2.3.4/8", NULL },
	{ "99999999999999999999999", NULL },
	/* IPv6 */
	{ "::1", "::1" },
	{ "[::1]", "::1" },
	{ "::", "::" },
	{ "[::]", "::" },
	{ "2001:DB8::1", "2001:db8::1" },
	{ "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1" },
	{ "2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1" },
	{ "2001:0:0:1:0:0:0:1", "2001:0:0:1::1" },
	{ "2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1" },
	{ "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0" },
	{ "::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8" },
	{ "fe80::", "fe80::" },
	{ "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304" },
	{ "::127.0.0.1", "::7f00:1" },
	{ "64:ff9b::10.0.0.1", "64:ff9b::a00:1" },
	/* IPv4-mapped IPv6 is IPv4 */
	{ "::ffff:127.0.0.1", "127.0.0.1" },
	{ "::FFFF:7f00:1", "127.0.0.1" },
	{ "[::ffff:169.254.169.254]", "169.254.169.254" },
	{ "0:0:0:0:0:ffff:a9fe:a9fe", "169.254.169.254" },
	{ "fe80::1%eth0", NULL },
	{ "[fe80::1%25eth0]", NULL },
	{ "1:2:3:4:5:6:7:8:9", NULL },
	{ "1:2:3:4:5:6:7", NULL },
	{ "1::2::3", NULL },
	{ ":::", NULL },
	{ "1:", NULL },
	{ ":1", NULL },
	{ "12345::", NULL },
	{ "g::1", NULL },
	{ "::ffff:1.2.3", NULL },
	{ "::ffff:01.2.3.4", NULL },
	{ "::ffff:0x7f.0.0.1", NULL },
	{ "::1.2.3.4:5", NULL },
	{ "1:2:3:4:5:6:7:1.2.3.4", NULL },
	{ "1:2:3:4:5:6:7:8::", NULL },
	{ "[::1", NULL },
	{ "::1]", NULL },
	{ "[1.2.3.4]", NULL },
	{ "[]", NULL },
	{ "[[::1]]", NULL },
};

static void
test_parse(void)
{
	struct netaddr a;
	char buf[NETADDR_STRLEN];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		const struct parse_case *c = &parse_cases[i];

		rc = netaddr_parse(c->in, strlen(c->in), &a);
		if (c->want == NULL) {
			CHECK_MSG(rc == -1, "\"%s\" parsed as an IP", c->in);
			continue;
		}
		CHECK_MSG(rc == 0, "\"%s\" not parsed", c->in);
		if (rc == 0)
			CHECK_STR(netaddr_ntop(&a, buf, sizeof(buf)), c->want);
	}
	/* Length, not NUL, ends the input. */
	CHECK_INT(netaddr_parse("10.0.0.1junk", 8, &a), 0);
	CHECK_STR(netaddr_ntop(&a, buf, sizeof(buf)), "10.0.0.1");
	CHECK_INT(netaddr_parse("1.2.3.4\0", 8, &a), -1);
	/* ntop refuses a buffer that is too small. */
	netaddr_parse("255.255.255.255", 15, &a);
	CHECK(netaddr_ntop(&a, buf, 15) == NULL);
	CHECK(netaddr_ntop(&a, buf, 16) != NULL);
}

/* Random numeric IPv4 forms against the C library's inet_aton. */
static void
test_parse_vs_inet_aton(void)
{
	struct netaddr a;
	struct in_addr ia;
	char s[128], part[40];
	int i, j, np, agree = 0, ours, libc;
	unsigned v;

	srandom(1);
	for (i = 0; i < 20000; i++) {
		s[0] = '\0';
		np = 1 + (int)(random() % 4);
		for (j = 0; j < np; j++) {
			v = (unsigned)random();
			switch (random() % 4) {
			case 0: v &= 0xff; break;
			case 1: v &= 0xffff; break;
			case 2: v &= 0x1ff; break;
			}
			switch (random() % 3) {
			case 0: snprintf(part, sizeof(part), "%u", v); break;
			case 1: snprintf(part, sizeof(part), "0%o", v); break;
			default: snprintf(part, sizeof(part), "0x%x", v); break;
			}
			if (j > 0)
				strcat(s, ".");
			strcat(s, part);
		}
		ours = netaddr_parse(s, strlen(s), &a) == 0;
		libc = inet_aton(s, &ia) != 0;
		CHECK_MSG(ours == libc, "\"%s\": ours %d libc %d", s, ours, libc);
		if (ours && libc) {
			CHECK_MSG(a.family == AF_INET &&
			    memcmp(a.a, &ia, 4) == 0, "\"%s\" differs", s);
			agree++;
		}
	}
	CHECK(agree > 1000);	/* the generator does make valid forms */
}

/* ntop's output parses back to the same address, by us and by libc. */
static void
test_ntop_roundtrip(void)
{
	struct netaddr a, b;
	struct in6_addr i6;
	char buf[NETADDR_STRLEN];
	int i, k;

	srandom(2);
	for (i = 0; i < 20000; i++) {
		memset(&a, 0, sizeof(a));
		a.family = AF_INET6;
		for (k = 0; k < 16; k += 2) {
			/* Plenty of zero groups, to exercise "::". */
			if (random() % 2 == 0) {
				a.a[k] = (uint8_t)random();
				a.a[k + 1] = (uint8_t)random();
			}
		}
		if (memcmp(a.a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
			continue;
		CHECK(netaddr_ntop(&a, buf, sizeof(buf)) != NULL);
		CHECK_MSG(netaddr_parse(buf, strlen(buf), &b) == 0 &&
		    netaddr_cmp(&a, &b) == 0, "%s", buf);
		CHECK_MSG(inet_pton(AF_INET6, buf, &i6) == 1 &&
		    memcmp(&i6, a.a, 16) == 0, "%s", buf);
		CHECK_MSG(strstr(buf, ":::") == NULL && strchr(buf, '.') == NULL,
		    "%s", buf);
	}
}

struct internal_case {
	const char	*addr;
	int		 internal;
};

static const struct internal_case internal_cases[] = {
	{ "0.0.0.0", 1 }, { "0.255.255.255", 1 },
	{ "1.0.0.0", 0 }, { "1.1.1.1", 0 }, { "8.8.8.8", 0 },
	{ "9.255.255.255", 0 }, { "10.0.0.0", 1 }, { "10.255.255.255", 1 },
	{ "11.0.0.0", 0 },
	{ "100.63.255.255", 0 }, { "100.64.0.0", 1 }, { "100.127.255.255", 1 },
	{ "100.128.0.0", 0 },
	{ "126.255.255.255", 0 }, { "127.0.0.1", 1 }, { "127.255.255.255", 1 },
	{ "128.0.0.0", 0 },
	{ "169.253.255.255", 0 }, { "169.254.0.0", 1 },
	{ "169.254.169.254", 1 }, { "169.255.0.0", 0 },
	{ "172.15.255.255", 0 }, { "172.16.0.0", 1 }, { "172.31.255.255", 1 },
	{ "172.32.0.0", 0 },
	{ "192.0.0.0", 1 }, { "192.0.0.9", 1 }, { "192.0.0.255", 1 },
	{ "192.0.1.0", 0 },
	{ "192.0.2.1", 1 }, { "192.0.3.0", 0 },
	{ "192.88.98.255", 0 }, { "192.88.99.1", 1 }, { "192.88.100.0", 0 },
	{ "192.167.255.255", 0 }, { "192.168.0.1", 1 },
	{ "192.168.255.255", 1 }, { "192.169.0.0", 0 },
	{ "198.17.255.255", 0 }, { "198.18.0.0", 1 }, { "198.19.255.255", 1 },
	{ "198.20.0.0", 0 },
	{ "198.51.100.7", 1 }, { "198.51.101.0", 0 },
	{ "203.0.112.255", 0 }, { "203.0.113.9", 1 }, { "203.0.114.0", 0 },
	{ "223.255.255.255", 0 }, { "224.0.0.1", 1 }, { "239.255.255.255", 1 },
	{ "240.0.0.0", 1 }, { "254.1.2.3", 1 }, { "255.255.255.255", 1 },
	/* IPv6 */
	{ "::", 1 }, { "::1", 1 }, { "::2", 1 },
	{ "::8.8.8.8", 1 },			/* IPv4-compatible, deprecated */
	{ "::ffff:8.8.8.8", 0 }, { "::ffff:10.1.2.3", 1 },
	{ "::ffff:169.254.169.254", 1 },
	{ "64:ff9b::8.8.8.8", 0 }, { "64:ff9b::127.0.0.1", 1 },
	{ "64:ff9b::169.254.169.254", 1 }, { "64:ff9b::192.168.1.1", 1 },
	{ "64:ff9b:1::8.8.8.8", 1 }, { "64:ff9b:1:ffff::1", 1 },
	{ "64:ff9b:2::1", 0 },
	{ "100::", 1 }, { "100::ffff:ffff:ffff:ffff", 1 }, { "100:0:0:1::", 0 },
	{ "2001::", 1 }, { "2001::1", 1 },	/* Teredo */
	{ "2001:2::1", 1 }, { "2001:10::1", 1 },
	{ "2001:1::1", 0 }, { "2001:1::2", 0 }, { "2001:1::4", 1 },
	{ "2001:3::1", 0 }, { "2001:4:112::1", 0 }, { "2001:4:113::1", 1 },
	{ "2001:20::1", 0 }, { "2001:2f:ffff::1", 0 }, { "2001:30::1", 0 },
	{ "2001:1ff:ffff::1", 1 }, { "2001:200::1", 0 },
	{ "2001:db7:ffff::1", 0 }, { "2001:db8::1", 1 },
	{ "2001:db8:ffff:ffff::1", 1 }, { "2001:db9::1", 0 },
	{ "2002:808:808::1", 0 },		/* 6to4 of 8.8.8.8 */
	{ "2002:a00:1::1", 1 },			/* 6to4 of 10.0.0.1 */
	{ "2002:7f00:1::", 1 }, { "2002:a9fe:a9fe::1", 1 },
	{ "2606:4700::1111", 0 }, { "2a00:1450::1", 0 },
	{ "3ffe::1", 0 }, { "3fff::1", 1 }, { "3fff:fff:ffff::1", 1 },
	{ "3fff:1000::1", 0 },
	{ "5f00::1", 1 }, { "5f01::1", 0 },
	{ "fbff::1", 0 }, { "fc00::1", 1 }, { "fd12:3456::1", 1 },
	{ "fe7f::1", 0 }, { "fe80::1", 1 }, { "febf::1", 1 },
	{ "fec0::1", 1 }, { "feff::1", 1 }, { "ff02::1", 1 }, { "ff0e::1", 1 },
};

static void
test_internal(void)
{
	struct netaddr a;
	size_t i;

	for (i = 0; i < sizeof(internal_cases) / sizeof(internal_cases[0]);
	    i++) {
		const struct internal_case *c = &internal_cases[i];

		CHECK_MSG(netaddr_parse(c->addr, strlen(c->addr), &a) == 0,
		    "%s", c->addr);
		CHECK_MSG(netaddr_is_internal(&a) == c->internal, "%s: want %d",
		    c->addr, c->internal);
	}
	/* A hand-built mapped address is classified by its IPv4 part. */
	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	a.a[10] = a.a[11] = 0xff;
	a.a[12] = 169; a.a[13] = 254; a.a[14] = 169; a.a[15] = 254;
	CHECK_INT(netaddr_is_internal(&a), 1);
	a.family = 0;
	CHECK_INT(netaddr_is_internal(&a), 1);
}

struct cidr_case {
	const char	*in;
	const char	*want;		/* NULL: error */
};

static const struct cidr_case cidr_cases[] = {
	{ "10.0.0.0/8", "10.0.0.0/8" },
	{ "0.0.0.0/0", "0.0.0.0/0" },
	{ "192.168.1.1", "192.168.1.1/32" },
	{ "192.168.1.1/32", "192.168.1.1/32" },
	{ "140.82.112.0/20", "140.82.112.0/20" },
	{ "::/0", "::/0" },
	{ "::1", "::1/128" },
	{ "2001:DB8::/32", "2001:db8::/32" },
	{ "fe80::/10", "fe80::/10" },
	{ "::ffff:10.0.0.0/104", "10.0.0.0/8" },
	{ "::ffff:0:0/96", "0.0.0.0/0" },
	{ "10.0.0.1/8", NULL },		/* host bits */
	{ "2001:db8::1/32", NULL },
	{ "10.0.0.0/33", NULL },
	{ "::/129", NULL },
	{ "10.0.0.0/", NULL },
	{ "10.0.0.0/08", NULL },
	{ "10.0.0.0/-1", NULL },
	{ "10.0.0.0/8/8", NULL },
	{ "10.0.0.0/ 8", NULL },
	{ "010.0.0.0/8", NULL },		/* octal is ambiguous here */
	{ "10.0/16", NULL },
	{ "0x0a000000/8", NULL },
	{ "[::1]/128", NULL },
	{ "fe80::%eth0/64", NULL },
	{ "example.com/8", NULL },
	{ "", NULL },
	{ "/8", NULL },
};

static void
test_cidr(void)
{
	struct cidr c;
	struct netaddr a;
	const char *errstr;
	char buf[NETADDR_STRLEN + 4];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cidr_cases) / sizeof(cidr_cases[0]); i++) {
		errstr = NULL;
		rc = cidr_parse(cidr_cases[i].in, &c, &errstr);
		if (cidr_cases[i].want == NULL) {
			CHECK_MSG(rc == -1 && errstr != NULL, "\"%s\" accepted",
			    cidr_cases[i].in);
			continue;
		}
		CHECK_MSG(rc == 0, "\"%s\": %s", cidr_cases[i].in, errstr);
		if (rc == 0)
			CHECK_STR(cidr_ntop(&c, buf, sizeof(buf)),
			    cidr_cases[i].want);
	}

	static const struct {
		const char *cidr, *addr;
		int in;
	} contains[] = {
		{ "10.0.0.0/8", "10.255.1.2", 1 },
		{ "10.0.0.0/8", "11.0.0.0", 0 },
		{ "10.0.0.0/8", "::ffff:10.1.1.1", 1 },
		{ "0.0.0.0/0", "169.254.169.254", 1 },
		{ "0.0.0.0/0", "::1", 0 },
		{ "::/0", "1.2.3.4", 0 },
		{ "140.82.112.0/20", "140.82.127.255", 1 },
		{ "140.82.112.0/20", "140.82.128.0", 0 },
		{ "2001:db8::/33", "2001:db8:7fff::1", 1 },
		{ "2001:db8::/33", "2001:db8:8000::1", 0 },
		{ "1.2.3.4", "1.2.3.4", 1 },
		{ "1.2.3.4", "1.2.3.5", 0 },
	};
	for (i = 0; i < sizeof(contains) / sizeof(contains[0]); i++) {
		CHECK(cidr_parse(contains[i].cidr, &c, &errstr) == 0);
		CHECK(netaddr_parse(contains[i].addr,
		    strlen(contains[i].addr), &a) == 0);
		CHECK_MSG(cidr_contains(&c, &a) == contains[i].in, "%s in %s",
		    contains[i].addr, contains[i].cidr);
	}
}

struct collect {
	int	v[64];
	int	n;
	int	stop_at;	/* return 1 when this value is seen; -1: never */
};

static int
collect_cb(int value, void *arg)
{
	struct collect *c = arg;

	if (c->n < 64)
		c->v[c->n++] = value;
	return value == c->stop_at;
}

static void
test_cidr_set_order(void)
{
	static const char *prefixes[] = {
		"10.1.2.0/24", "0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16",
		"10.1.2.3/32", "10.1.0.0/16", "::/0", "2001:db8::/32",
		"192.168.0.0/16",
	};
	struct cidr_set *s = cidr_set_new();
	struct collect col;
	struct netaddr a;
	struct cidr c;
	const char *errstr;
	size_t i;

	CHECK(s != NULL);
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		CHECK(cidr_parse(prefixes[i], &c, &errstr) == 0);
		CHECK(cidr_set_add(s, &c, (int)i) == 0);
	}
	/* Shortest prefix first; one prefix's values in insertion order. */
	memset(&col, 0, sizeof(col));
	col.stop_at = -1;
	netaddr_parse("10.1.2.3", 8, &a);
	CHECK_INT(cidr_set_lookup(s, &a, collect_cb, &col), 0);
	CHECK_INT(col.n, 6);
	CHECK(col.v[0] == 1 && col.v[1] == 2 && col.v[2] == 3 &&
	    col.v[3] == 5 && col.v[4] == 0 && col.v[5] == 4);
	/* Early stop. */
	memset(&col, 0, sizeof(col));
	col.stop_at = 3;
	CHECK_INT(cidr_set_lookup(s, &a, collect_cb, &col), 1);
	CHECK_INT(col.n, 3);
	/* Mapped IPv6 finds the IPv4 prefixes, not ::/0. */
	memset(&col, 0, sizeof(col));
	col.stop_at = -1;
	a.family = AF_INET6;
	memset(a.a, 0, 16);
	a.a[10] = a.a[11] = 0xff;
	a.a[12] = 192; a.a[13] = 168; a.a[14] = 9; a.a[15] = 9;
	cidr_set_lookup(s, &a, collect_cb, &col);
	CHECK(col.n == 2 && col.v[0] == 1 && col.v[1] == 8);
	memset(&col, 0, sizeof(col));
	col.stop_at = -1;
	netaddr_parse("2001:db8::5", 11, &a);
	cidr_set_lookup(s, &a, collect_cb, &col);
	CHECK(col.n == 2 && col.v[0] == 6 && col.v[1] == 7);
	memset(&col, 0, sizeof(col));
	col.stop_at = -1;
	netaddr_parse("2001:db9::5", 11, &a);
	cidr_set_lookup(s, &a, collect_cb, &col);
	CHECK(col.n == 1 && col.v[0] == 6);
	cidr_set_free(s);

	/* An empty set matches nothing. */
	s = cidr_set_new();
	memset(&col, 0, sizeof(col));
	col.stop_at = -1;
	CHECK_INT(cidr_set_lookup(s, &a, collect_cb, &col), 0);
	CHECK_INT(col.n, 0);
	cidr_set_free(s);
}

/* The trie against a linear scan of cidr_contains, on random prefixes. */
static void
test_cidr_set_random(void)
{
	enum { NPFX = 400, NADDR = 4000 };
	static struct cidr pfx[NPFX];
	struct cidr_set *s = cidr_set_new();
	struct collect col;
	struct netaddr a;
	int i, j, k, want, got, bits, seen;

	srandom(3);
	for (i = 0; i < NPFX; i++) {
		memset(&pfx[i], 0, sizeof(pfx[i]));
		pfx[i].addr.family = random() % 2 ? AF_INET : AF_INET6;
		bits = pfx[i].addr.family == AF_INET ? 32 : 128;
		/* Share the top bits so that prefixes nest. */
		pfx[i].addr.a[0] = pfx[i].addr.family == AF_INET ? 10 : 0x20;
		for (k = 1; k < bits / 8; k++)
			pfx[i].addr.a[k] = (uint8_t)(random() % 4);
		pfx[i].bits = (uint8_t)(random() % (bits + 1));
		for (k = pfx[i].bits; k < bits; k++)
			pfx[i].addr.a[k / 8] &= (uint8_t)~(0x80 >> (k % 8));
		CHECK(cidr_set_add(s, &pfx[i], i) == 0);
	}
	for (j = 0; j < NADDR; j++) {
		memset(&a, 0, sizeof(a));
		a.family = random() % 2 ? AF_INET : AF_INET6;
		bits = a.family == AF_INET ? 32 : 128;
		a.a[0] = a.family == AF_INET ? 10 : 0x20;
		if (random() % 8 == 0)
			a.a[0] ^= 1;
		for (k = 1; k < bits / 8; k++)
			a.a[k] = (uint8_t)(random() % 4);
		memset(&col, 0, sizeof(col));
		col.stop_at = -1;
		cidr_set_lookup(s, &a, collect_cb, &col);
		want = 0;
		for (i = 0; i < NPFX; i++)
			want += cidr_contains(&pfx[i], &a);
		got = col.n;
		CHECK_INT(got, want < 64 ? want : 64);
		for (i = 0, seen = 1; i < col.n; i++) {
			if (!cidr_contains(&pfx[col.v[i]], &a))
				seen = 0;
			if (i > 0 && pfx[col.v[i]].bits < pfx[col.v[i - 1]].bits)
				seen = 0;
		}
		CHECK(seen);
	}
	cidr_set_free(s);
}

static void
test_sockaddr(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 sin6;
	struct netaddr a, b;
	uint16_t port = 0;
	socklen_t sl;

	netaddr_parse("192.0.2.7", 9, &a);
	sl = netaddr_to_sockaddr(&a, 8443, &ss);
	CHECK_INT(sl, sizeof(struct sockaddr_in));
	netaddr_from_sockaddr((struct sockaddr *)&ss, &b, &port);
	CHECK(netaddr_cmp(&a, &b) == 0 && port == 8443);

	netaddr_parse("2001:db8::7", 11, &a);
	sl = netaddr_to_sockaddr(&a, 53, &ss);
	CHECK_INT(sl, sizeof(struct sockaddr_in6));
	netaddr_from_sockaddr((struct sockaddr *)&ss, &b, &port);
	CHECK(netaddr_cmp(&a, &b) == 0 && port == 53);

	/* An accept()ed v4-mapped peer comes out as IPv4. */
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(1080);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr);
	netaddr_from_sockaddr((struct sockaddr *)&sin6, &b, &port);
	CHECK(b.family == AF_INET && port == 1080);
	netaddr_parse("127.0.0.1", 9, &a);
	CHECK_INT(netaddr_cmp(&a, &b), 0);

	netaddr_parse("10.0.0.1", 8, &a);
	netaddr_parse("10.0.0.2", 8, &b);
	CHECK(netaddr_cmp(&a, &b) < 0 && netaddr_cmp(&b, &a) > 0);
	netaddr_parse("::1", 3, &b);
	CHECK(netaddr_cmp(&a, &b) != 0);
}

int
main(void)
{
	test_parse();
	test_parse_vs_inet_aton();
	test_ntop_roundtrip();
	test_internal();
	test_cidr();
	test_cidr_set_order();
	test_cidr_set_random();
	test_sockaddr();
	return check_summary();
}
