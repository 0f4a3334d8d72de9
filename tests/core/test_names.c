/*
 * Unit tests for core/policy_names.c: host-name normal form (case, trailing
 * dot, LDH syntax, limits, IDN to A-labels after UTS #46 mapping) and the
 * path glob. Punycode expectations come from RFC 3492 section 7.1, Python's
 * codec and UTS #46 (what curl and browsers send for a name).
 */
#include <string.h>

#include "check.h"
#include "core/policy.h"
#include "core/policy_int.h"

struct name_case {
	const char	*in;
	const char	*want;		/* NULL: invalid */
};

static const struct name_case name_cases[] = {
	{ "example.com", "example.com" },
	{ "Example.COM", "example.com" },
	{ "example.com.", "example.com" },
	{ "EXAMPLE.COM.", "example.com" },
	{ "localhost", "localhost" },
	{ "a", "a" },
	{ "a-b.c-d.e", "a-b.c-d.e" },
	{ "_dmarc.example.com", "_dmarc.example.com" },
	{ "_443._tcp.example.com", "_443._tcp.example.com" },
	{ "123.example", "123.example" },
	{ "x.1a", "x.1a" },
	{ "x.0xg", "x.0xg" },
	{ "x.a0x1", "x.a0x1" },
	/* IDN: U-labels become A-labels */
	{ "b\xc3\xbc" "cher.example", "xn--bcher-kva.example" },
	{ "B\xc3\xbc" "CHER.Example.", "xn--bcher-kva.example" },
	{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
	{ "XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.example" },
	{ "m\xc3\xbcnchen.de", "xn--mnchen-3ya.de" },
	{ "\xe4\xbe\x8b\xe3\x81\x88.\xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88",
	    "xn--r8jz45g.xn--zckzah" },
	/* ideographic and fullwidth full stops separate labels */
	{ "\xe4\xbe\x8b\xe3\x81\x88\xe3\x80\x82\xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88",
	    "xn--r8jz45g.xn--zckzah" },
	{ "example\xef\xbc\x8e" "com", "example.com" },
	{ "example\xef\xbd\xa1" "com\xe3\x80\x82", "example.com" },
	/*
	 * UTS #46 mapping first: case folding beyond ASCII, fullwidth forms,
	 * NFC. Each spelling is the one name a client resolves for it, so a
	 * rule for "böse" holds for all of them (they were other A-labels).
	 */
	{ "b\xc3\x96se.idn.test", "xn--bse-sna.idn.test" },	/* bÖse */
	{ "bo\xcc\x88se.idn.test", "xn--bse-sna.idn.test" },	/* o + U+0308 */
	{ "B\xc3\x9c" "CHER.EXAMPLE", "xn--bcher-kva.example" },
	{ "\xef\xbd\x85\xef\xbd\x96\xef\xbd\x89\xef\xbd\x8c.wild.test",
	    "evil.wild.test" },					/* ｅｖｉｌ */
	{ "\xef\xbc\xa5VIL.wild.test", "evil.wild.test" },	/* Ｅ */
	{ "stra\xc3\x9f" "e.de", "xn--strae-oqa.de" },	/* non-transitional */
	/* fullwidth digits are digits: an IPv4 form, never a name */
	{ "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97.0.0.1", NULL },
	{ "evil.\xef\xbc\x91", NULL },
	{ "\xf0\x9f\x98\x80.test", NULL },			/* emoji: disallowed */
	{ "a\xe2\x80\x8d" "b.test", NULL },			/* ZWJ out of context */
	{ "a\xc3\xbc.x", "xn--a-eha.x" },
	{ "\xc3\xbc" "a.x", "xn--a-dha.x" },
	/* RFC 3492 7.1 (A) Arabic, (B) Chinese, (E) Hebrew, (G) Japanese,
	 * (I) Russian; (A) ends in U+061F ARABIC QUESTION MARK, which IDNA
	 * disallows in a name: refused */
	{ "\xd9\x84\xd9\x8a\xd9\x87\xd9\x85\xd8\xa7\xd8\xa8\xd8\xaa\xd9\x83"
	  "\xd9\x84\xd9\x85\xd9\x88\xd8\xb4\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a"
	  "\xd8\x9f.x", NULL },
	{ "\xe4\xbb\x96\xe4\xbb\xac\xe4\xb8\xba\xe4\xbb\x80\xe4\xb9\x88\xe4"
	  "\xb8\x8d\xe8\xaf\xb4\xe4\xb8\xad\xe6\x96\x87.x",
	  "xn--ihqwcrb4cv8a8dqg056pqjye.x" },
	{ "\xd7\x9c\xd7\x9e\xd7\x94\xd7\x94\xd7\x9d\xd7\xa4\xd7\xa9\xd7\x95"
	  "\xd7\x98\xd7\x9c\xd7\x90\xd7\x9e\xd7\x93\xd7\x91\xd7\xa8\xd7\x99"
	  "\xd7\x9d\xd7\xa2\xd7\x91\xd7\xa8\xd7\x99\xd7\xaa.x",
	  "xn--4dbcagdahymbxekheh6e0a7fei0b.x" },
	{ "\xe3\x81\xaa\xe3\x81\x9c\xe3\x81\xbf\xe3\x82\x93\xe3\x81\xaa\xe6"
	  "\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x82\x92\xe8\xa9\xb1\xe3\x81"
	  "\x97\xe3\x81\xa6\xe3\x81\x8f\xe3\x82\x8c\xe3\x81\xaa\xe3\x81\x84"
	  "\xe3\x81\xae\xe3\x81\x8b.x",
	  "xn--n8jok5ay5dzabd5bym9f0cm5685rrjetr6pdxa.x" },
	{ "\xd0\xbf\xd0\xbe\xd1\x87\xd0\xb5\xd0\xbc\xd1\x83\xd0\xb6\xd0\xb5"
	  "\xd0\xbe\xd0\xbd\xd0\xb8\xd0\xbd\xd0\xb5\xd0\xb3\xd0\xbe\xd0\xb2"
	  "\xd0\xbe\xd1\x80\xd1\x8f\xd1\x82\xd0\xbf\xd0\xbe\xd1\x80\xd1\x83"
	  "\xd1\x81\xd1\x81\xd0\xba\xd0\xb8.x",
	  "xn--b1abfaaepdrnnbgefbadotcwatmq2g4l.x" },
	/* invalid */
	{ "", NULL },
	{ ".", NULL },
	{ "..", NULL },
	{ "example.com..", NULL },
	{ ".example.com", NULL },
	{ "a..b", NULL },
	{ "-a.com", NULL },
	{ "a-.com", NULL },
	{ "a b.com", NULL },
	{ "a*b.com", NULL },
	{ "*.example.com", NULL },
	{ "a/b", NULL },
	{ "a@b", NULL },
	{ "a%2eb", NULL },
	{ "a:80", NULL },
	{ "[::1]", NULL },
	{ "a\tb", NULL },
	{ "a\x7f" "b", NULL },
	/* all-numeric last label: an IPv4 form or nothing, never a name */
	{ "1.2.3.999", NULL },
	{ "1.2.3.4", NULL },
	{ "2130706433", NULL },
	{ "foo.123", NULL },
	{ "foo.0x1f", NULL },
	{ "foo.0X1F", NULL },
	{ "foo.0x", NULL },
	{ "foo.123.", NULL },
	/* bad UTF-8 and invisible code points */
	{ "\xc3", NULL },
	{ "a\xc3(.com", NULL },
	{ "\xc0\xae.com", NULL },		/* overlong '.' */
	{ "\xe0\x80\xae.com", NULL },
	{ "\xed\xa0\x80.com", NULL },		/* surrogate */
	{ "\xf4\x90\x80\x80.com", NULL },	/* past U+10FFFF */
	{ "\xff.com", NULL },
	{ "goo\xc2\xad" "gle.com", NULL },	/* soft hyphen */
	{ "goo\xe2\x80\x8bgle.com", NULL },	/* zero width space */
	{ "a\xe2\x80\xae" "b.com", NULL },	/* RTL override */
	{ "a\xc2\x85" "b.com", NULL },		/* C1 control */
	{ "\xef\xbb\xbf" "a.com", NULL },	/* BOM */
	{ "-\xc3\xbc.com", NULL },
	/* a U-label whose A-label is over 63 bytes */
	{ "\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc"
	  "\xe4\xbb\x96\xe4\xbb\xac\xe4\xb8\xba\xe4\xbb\x80\xe4\xb9\x88\xe4"
	  "\xb8\x8d\xe8\xaf\xb4\xe4\xb8\xad\xe6\x96\x87\xe4\xbb\x96\xe4\xbb"
	  "\xac\xe4\xb8\xba\xe4\xbb\x80\xe4\xb9\x88\xe4\xb8\x8d\xe8\xaf\xb4"
	  "\xe4\xb8\xad\xe6\x96\x87\xe4\xbb\x96\xe4\xbb\xac\xe4\xb8\xba\xe4\xbb"
	  "\x80\xe4\xb9\x88\xe4\xb8\x8d\xe8\xaf\xb4\xe4\xb8\xad\xe6\x96\x87.x",
	  NULL },
};

static void
test_names(void)
{
	char out[POLICY_HOST_MAX + 1];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(name_cases) / sizeof(name_cases[0]); i++) {
		const struct name_case *c = &name_cases[i];

		memset(out, 'Z', sizeof(out));
		rc = policy_name_normalize(c->in, strlen(c->in), out,
		    sizeof(out));
		if (c->want == NULL) {
			CHECK_MSG(rc == -1, "\"%s\" accepted as \"%.*s\"",
			    c->in, rc > 0 ? rc : 0, out);
			continue;
		}
		CHECK_MSG(rc == (int)strlen(c->want), "\"%s\": rc %d", c->in, rc);
		if (rc >= 0)
			CHECK_STR(out, c->want);
	}
	/* An embedded NUL is a bad character, not the end. */
	CHECK_INT(policy_name_normalize("a\0b.com", 7, out, sizeof(out)), -1);
	/* Only len bytes are read. */
	CHECK_INT(policy_name_normalize("example.comXX", 11, out, sizeof(out)),
	    11);
	CHECK_STR(out, "example.com");
	/* Output room is honoured. */
	CHECK_INT(policy_name_normalize("example.com", 11, out, 11), -1);
	CHECK_INT(policy_name_normalize("example.com", 11, out, 12), 11);
}

static void
test_limits(void)
{
	char in[600], out[POLICY_HOST_MAX + 1], label[70];
	size_t n;

	/* Labels: 63 bytes fine, 64 not. */
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(in, sizeof(in), "%s.com", label);
	CHECK_INT(policy_name_normalize(in, strlen(in), out, sizeof(out)), 67);
	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(in, sizeof(in), "%s.com", label);
	CHECK_INT(policy_name_normalize(in, strlen(in), out, sizeof(out)), -1);

	/* Names: 253 bytes fine (with or without the trailing dot), 254 not. */
	memset(label, 'b', 63);
	label[63] = '\0';
	snprintf(in, sizeof(in), "%s.%s.%s.%.61s", label, label, label, label);
	n = strlen(in);
	CHECK_INT(n, 253);
	CHECK_INT(policy_name_normalize(in, n, out, sizeof(out)), 253);
	in[n] = '.';
	CHECK_INT(policy_name_normalize(in, n + 1, out, sizeof(out)), 253);
	snprintf(in, sizeof(in), "%s.%s.%s.%.62s", label, label, label, label);
	CHECK_INT(policy_name_normalize(in, strlen(in), out, sizeof(out)), -1);

	/* A-labels: "xn--" + 55 a's + "-8yf" is 63 bytes, one more a is 64. */
	memset(in, 'a', 56);
	memcpy(in + 55, "\xc3\xbc.x", 5);
	CHECK_INT(policy_name_normalize(in, 59, out, sizeof(out)), 65);
	CHECK(memcmp(out, "xn--", 4) == 0 && memcmp(out + 59, "-8yf.x", 6) == 0);
	memset(in, 'a', 57);
	memcpy(in + 56, "\xc3\xbc.x", 5);
	CHECK_INT(policy_name_normalize(in, 60, out, sizeof(out)), -1);

	/* Many short labels, way over the limit. */
	for (n = 0; n + 2 < sizeof(in); n += 2) {
		in[n] = 'a';
		in[n + 1] = '.';
	}
	CHECK_INT(policy_name_normalize(in, n - 1, out, sizeof(out)), -1);
	/* A huge input is refused without reading past it. */
	CHECK_INT(policy_name_normalize(in, 5000, out, sizeof(out)), -1);
}

struct glob_case {
	const char	*glob;
	const char	*s;
	int		 match;
};

static const struct glob_case glob_cases[] = {
	{ "/v1/*", "/v1/chat/completions", 1 },
	{ "/v1/*", "/v1/", 1 },
	{ "/v1/*", "/v1", 0 },
	{ "/v1/*", "/v2/chat", 0 },
	{ "/v1/*/x", "/v1/a/b/x", 1 },		/* '*' crosses '/' */
	{ "/v1/*/x", "/v1/a/b/y", 0 },
	{ "*", "", 1 },
	{ "*", "/anything/at/all", 1 },
	{ "", "", 1 },
	{ "", "/", 0 },
	{ "/exact", "/exact", 1 },
	{ "/exact", "/exact/", 0 },
	{ "/exact", "/exac", 0 },
	{ "/Exact", "/exact", 0 },		/* paths are case-sensitive */
	{ "/a*b*c", "/axxbyyc", 1 },
	{ "/a*b*c", "/axxbyy", 0 },
	{ "/a*b*c", "/abcbc", 1 },
	{ "*.json", "/x/y.json", 1 },
	{ "*.json", "/x/y.jsonp", 0 },
	{ "/**", "/", 1 },
	{ "/?", "/?", 1 },			/* only '*' is special */
	{ "/?", "/a", 0 },
	{ "/a*a*a*a*a*a*a*b", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0 },
};

/*
 * The flags of the one normaliser, as the resolver and the leaf minter
 * use it: A-labels only, and a DNS name may end in a number.
 */
static void
test_canon_flags(void)
{
	const int both = POLICY_NAME_ASCII | POLICY_NAME_NUMERIC;
	char out[POLICY_HOST_MAX + 1];

	CHECK_INT(policy_name_canon("API.Example.TEST.", 17, out, sizeof(out),
	    both), 16);
	CHECK_STR(out, "api.example.test");
	/* a U-label is encoded by default, refused A-label-only */
	CHECK(policy_name_canon("caf\xc3\xa9.test", 10, out, sizeof(out), 0) > 0);
	CHECK_STR(out, "xn--caf-dma.test");
	CHECK_INT(policy_name_canon("caf\xc3\xa9.test", 10, out, sizeof(out),
	    both), -1);
	/* an ideographic full stop is a dot only where U-labels are */
	CHECK_INT(policy_name_canon("a\xe3\x80\x82test", 8, out, sizeof(out),
	    POLICY_NAME_ASCII), -1);
	/* a name ending in a number: an IPv4 form by default */
	CHECK_INT(policy_name_canon("192.0.2.1", 9, out, sizeof(out), 0), -1);
	CHECK_INT(policy_name_canon("192.0.2.1", 9, out, sizeof(out), both), 9);
	CHECK_STR(out, "192.0.2.1");
	CHECK_INT(policy_name_canon("a.0x10", 6, out, sizeof(out),
	    POLICY_NAME_ASCII), -1);
	/* what no flag lets through */
	CHECK_INT(policy_name_canon("a\\.test", 7, out, sizeof(out), both), -1);
	CHECK_INT(policy_name_canon("-a.test", 7, out, sizeof(out), both), -1);
	CHECK_INT(policy_name_canon("a..test", 7, out, sizeof(out), both), -1);
	CHECK_INT(policy_name_canon("a.test..", 8, out, sizeof(out), both), -1);
	CHECK_INT(policy_name_canon("a test", 6, out, sizeof(out), both), -1);
}

static void
test_glob(void)
{
	size_t i;

	for (i = 0; i < sizeof(glob_cases) / sizeof(glob_cases[0]); i++)
		CHECK_MSG(policy_glob_match(glob_cases[i].glob, glob_cases[i].s,
		    strlen(glob_cases[i].s)) == glob_cases[i].match,
		    "\"%s\" vs \"%s\"", glob_cases[i].glob, glob_cases[i].s);
	/* The subject is length-bounded, and may hold a NUL. */
	CHECK_INT(policy_glob_match("/abc", "/abcdef", 4), 1);
	CHECK_INT(policy_glob_match("/abc*", "/ab", 3), 0);
	CHECK_INT(policy_glob_match("/a*", "/a\0b", 4), 1);
	CHECK_INT(policy_glob_match("/a", "/a\0", 3), 0);
}

int
main(void)
{
	test_names();
	test_limits();
	test_canon_flags();
	test_glob();
	return check_summary();
}
