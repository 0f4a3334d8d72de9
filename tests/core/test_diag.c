/*
 * core/diag's "did you mean": the edit distance, the nearest known key
 * (policy check's suggestion for an unknown key), and core/netaddr's
 * network for a prefix refused for its host bits.
 */
#include <string.h>

#include "check.h"
#include "core/diag.h"
#include "core/netaddr.h"

static const char *
near(const char *word, const char *known)
{
	static char out[64];

	return diag_nearest(word, known, out, sizeof(out));
}

static int
dist(const char *a, const char *b)
{
	return diag_distance(a, strlen(a), b, strlen(b));
}

static void
test_distance(void)
{
	CHECK_INT(dist("allow", "allow"), 0);
	CHECK_INT(dist("alow", "allow"), 1);		/* deletion */
	CHECK_INT(dist("allows", "allow"), 1);		/* insertion */
	CHECK_INT(dist("alloe", "allow"), 1);		/* substitution */
	CHECK_INT(dist("alolw", "allow"), 1);		/* transposition */
	CHECK_INT(dist("ALLOW", "allow"), 0);		/* case aside */
	CHECK_INT(dist("", "deny"), 4);
	CHECK_INT(dist("kitten", "sitting"), 3);
}

static void
test_nearest(void)
{
	static const char policy[] = "name|allow|deny|allow_private|dns_types|"
	    "mode|countries|asns|credentials";
	static const char rule[] = "host|cidr|ports|methods|paths|tls|opaque";

	CHECK_STR(near("alow", policy), "allow");
	CHECK_STR(near("dney", policy), "deny");
	CHECK_STR(near("allow_privat", policy), "allow_private");
	CHECK_STR(near("Allow", policy), "allow");
	CHECK_STR(near("prots", rule), "ports");
	CHECK_STR(near("method", rule), "methods");
	CHECK_STR(near("dns", policy), "dns_types");	/* a clear prefix */
	CHECK_STR(near("cred", policy), "credentials");
	/* nothing near: no guess */
	CHECK(near("frobnicate", policy) == NULL);
	CHECK(near("xyz", rule) == NULL);
	CHECK(near("", rule) == NULL);
	/* a short word: one edit at most ("tl" is tls, "ab" is nothing) */
	CHECK_STR(near("tl", rule), "tls");
	CHECK(near("ab", rule) == NULL);
	/* an ambiguous prefix is no suggestion */
	CHECK(near("allo", "allow_a|allow_b") == NULL);
}

static const char *
net(const char *s)
{
	static char out[64];

	return cidr_network_of(s, out, sizeof(out));
}

static void
test_network_of(void)
{
	struct cidr c;
	const char *err = NULL;

	/* refused as written, and the network it most likely meant */
	CHECK_INT(cidr_parse("198.18.1.7/16", &c, &err), -1);
	CHECK_STR(net("198.18.1.7/16"), "198.18.0.0/16");
	CHECK_STR(net("198.19.255.255/15"), "198.18.0.0/15");
	CHECK_STR(net("10.1.2.3/0"), "0.0.0.0/0");
	CHECK_STR(net("198.18.1.7/32"), "198.18.1.7/32");
	CHECK_STR(net("2001:db8::1/32"), "2001:db8::/32");
	CHECK_STR(net("2001:db8:1:2:3:4:5:6/64"), "2001:db8:1:2::/64");
	CHECK_STR(net("::ffff:198.18.1.7/112"), "198.18.0.0/16");
	/* what is no prefix gets no suggestion */
	CHECK(net("198.18.1.7") == NULL);
	CHECK(net("198.18.1.7/33") == NULL);
	CHECK(net("198.18.1/16") == NULL);
	CHECK(net("2001:db8::1/129") == NULL);
	CHECK(net("::ffff:198.18.1.7/80") == NULL);
	CHECK(net("example.com/16") == NULL);
	/* the suggestion parses, and is the same prefix */
	CHECK_INT(cidr_parse(net("198.18.200.1/17"), &c, &err), 0);
	CHECK_INT(c.bits, 17);
}

int
main(void)
{
	test_distance();
	test_nearest();
	test_network_of();
	return check_summary();
}
