/*
 * Unit tests for core/psl.c: the Public Suffix List's own test cases
 * (normal, wildcard and exception rules, the implicit "*") on a small
 * list, and a few names against Debian's list when it is installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/psl.h"

static const char small[] =
    "// a comment line\n"
    "com\n"
    "uk\n"
    "co.uk\n"
    "  jp  trailing words are ignored\n"
    "*.kawasaki.jp\n"
    "!city.kawasaki.jp\n"
    "*.ck\n"
    "!www.ck\n"
    "github.io\n"
    "\xe5\x85\xac\xe5\x8f\xb8.cn\n"	/* UTF-8: becomes an A-label */
    "cn\n"
    "*.*.bad\n"			/* no rule: inner wildcard */
    "!\n"
    "\n";

struct psl_case {
	const char	*host;
	const char	*want;		/* NULL: a public suffix itself */
};

static const struct psl_case cases[] = {
	{ "com", NULL },
	{ "example.com", "example.com" },
	{ "a.b.example.com", "example.com" },
	{ "uk", NULL },
	{ "co.uk", NULL },
	{ "example.co.uk", "example.co.uk" },
	{ "www.example.co.uk", "example.co.uk" },
	{ "kawasaki.jp", "kawasaki.jp" },
	{ "c.kawasaki.jp", NULL },
	{ "b.c.kawasaki.jp", "b.c.kawasaki.jp" },
	{ "a.b.c.kawasaki.jp", "b.c.kawasaki.jp" },
	{ "city.kawasaki.jp", "city.kawasaki.jp" },
	{ "www.city.kawasaki.jp", "city.kawasaki.jp" },
	{ "ck", NULL },
	{ "foo.ck", NULL },
	{ "www.ck", "www.ck" },
	{ "a.www.ck", "www.ck" },
	{ "github.io", NULL },
	{ "user.github.io", "user.github.io" },
	{ "x.user.github.io", "user.github.io" },
	{ "xn--55qx5d.cn", NULL },
	{ "shop.xn--55qx5d.cn", "shop.xn--55qx5d.cn" },
	/* not listed: the last label is the suffix */
	{ "example", NULL },
	{ "a.b.example.test", "example.test" },
	{ "", NULL },
};

static void
test_small(void)
{
	struct psl *p;
	char out[256];
	size_t i;
	int rc;

	p = psl_parse(small, sizeof(small) - 1);
	CHECK(p != NULL);
	CHECK_INT(psl_rules(p), 11);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = psl_registrable(p, cases[i].host, out, sizeof(out));
		if (cases[i].want == NULL)
			CHECK_MSG(rc == -1, "%s: got %s", cases[i].host, out);
		else
			CHECK_MSG(rc == 0 && strcmp(out, cases[i].want) == 0,
			    "%s: rc %d, %s", cases[i].host, rc, rc ? "" : out);
	}
	/* Too small a buffer is a failure, not a cut name. */
	CHECK(psl_registrable(p, "example.co.uk", out, 5) == -1);
	psl_free(p);
	/* No list: the last two labels. */
	CHECK(psl_registrable(NULL, "a.example.co.uk", out, sizeof(out)) == 0);
	CHECK_STR(out, "co.uk");
	CHECK(psl_registrable(NULL, "com", out, sizeof(out)) == -1);
	p = psl_parse("", 0);
	CHECK(p != NULL && psl_rules(p) == 0);
	CHECK(psl_registrable(p, "a.example.org", out, sizeof(out)) == 0);
	CHECK_STR(out, "example.org");
	psl_free(p);
}

static void
test_debian(void)
{
	FILE *f = fopen(PSL_DEFAULT_PATH, "r");
	char *buf, out[256];
	long len;
	struct psl *p;

	if (f == NULL) {
		printf("skip: %s not installed (package publicsuffix)\n",
		    PSL_DEFAULT_PATH);
		return;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len);
	CHECK(buf != NULL && fread(buf, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	p = psl_parse(buf, (size_t)len);
	free(buf);
	CHECK(p != NULL && psl_rules(p) > 5000);
	CHECK(psl_registrable(p, "www.example.co.uk", out, sizeof(out)) == 0);
	CHECK_STR(out, "example.co.uk");
	CHECK(psl_registrable(p, "files.pkgs.example.com", out,
	    sizeof(out)) == 0);
	CHECK_STR(out, "example.com");
	CHECK(psl_registrable(p, "someone.github.io", out, sizeof(out)) == 0);
	CHECK_STR(out, "someone.github.io");
	CHECK(psl_registrable(p, "co.uk", out, sizeof(out)) == -1);
	psl_free(p);
}

int
main(void)
{
	test_small();
	test_debian();
	return check_summary();
}
