/*
 * Unit tests for a policy's dlp: key (policy_dlp.c): what loads (mode,
 * custom rules, allow entries), errors at their line, policy_dlp_of for
 * each mode, and which host, path and rule an allow entry exempts.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/policy.h"
#include "dlp/dlp.h"
#include "helper_core.h"

static char data_dir[PATH_MAX];
static char tmp_dir[] = "/tmp/sg-test-policy-dlp-XXXXXX";

#define P	"policies:\n  - name: p\n    allow:\n      - host: a.example.com\n"

static struct policy *
load_text(const char *yaml, struct diag *d)
{
	char *paths[1];

	paths[0] = (char *)coretest_tmpfile("dlp.yaml", yaml);
	return policy_load_paths(paths, 1, d);
}

static void
test_modes(void)
{
	static const struct {
		const char	*key;
		int		 scans;
		enum policy_dlp_mode mode;
	} t[] = {
		{ "", 0, POLICY_DLP_OFF },
		{ "    dlp: {}\n", 1, POLICY_DLP_BLOCK },
		{ "    dlp: {mode: block}\n", 1, POLICY_DLP_BLOCK },
		{ "    dlp: {mode: report}\n", 1, POLICY_DLP_REPORT },
		{ "    dlp: {mode: off}\n", 0, POLICY_DLP_OFF },
	};
	const struct policy_dlp *pd;
	struct policy *p;
	struct diag d;
	char yaml[512];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		diag_init(&d);
		snprintf(yaml, sizeof(yaml), "%s%s", P, t[i].key);
		p = load_text(yaml, &d);
		CHECK_MSG(p != NULL && d.n == 0, "%s", t[i].key);
		pd = p != NULL ? policy_dlp_of(p, "p") : NULL;
		CHECK_INT(pd != NULL, t[i].scans);
		if (pd != NULL)
			CHECK_INT(pd->mode, t[i].mode);
		/* no such policy, and the implicit default: nothing */
		CHECK(p == NULL || policy_dlp_of(p, "nope") == NULL);
		CHECK(p == NULL || policy_dlp_of(p, "default") == NULL);
		if (p != NULL)
			policy_unref(p);
		diag_free(&d);
	}
}

static void
test_allow(void)
{
	const struct policy_dlp *pd;
	struct policy *p;
	struct diag d;

	diag_init(&d);
	p = load_text(P "    dlp:\n"
	    "      rules:\n"
	    "        - {id: acme, regex: 'acme_[a-z]{8}', severity: low}\n"
	    "      allow:\n"
	    "        - host: '*.internal.example'\n"
	    "        - host: docs.example.com\n          rule: jwt\n"
	    "        - path: '/v1/keys/*'\n          rule: acme\n"
	    "        - host: 'Exact.Example.NET.'\n", &d);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	if (p == NULL || (pd = policy_dlp_of(p, "p")) == NULL) {
		diag_free(&d);
		return;
	}
	CHECK_INT(pd->n_allow, 4);
	CHECK(dlp_set_has_rule(pd->set, "acme"));
	CHECK(dlp_set_has_rule(pd->set, "github-token"));
	/* a wildcard: names below, never the name itself */
	CHECK(policy_dlp_exempt(pd, "api.internal.example", "/", NULL));
	CHECK(policy_dlp_exempt(pd, "a.b.internal.example", NULL, "jwt"));
	CHECK(!policy_dlp_exempt(pd, "internal.example", "/", NULL));
	CHECK(!policy_dlp_exempt(pd, "xinternal.example", "/", NULL));
	CHECK(!policy_dlp_exempt(pd, "abinternal.example", "/", NULL));
	/* one rule toward one host */
	CHECK(policy_dlp_exempt(pd, "docs.example.com", "/", "jwt"));
	CHECK(!policy_dlp_exempt(pd, "docs.example.com", "/", NULL));
	CHECK(!policy_dlp_exempt(pd, "docs.example.com", "/", "github-token"));
	CHECK(!policy_dlp_exempt(pd, "api.example.com", "/", "jwt"));
	/* a path glob (the query ignored) and one rule, any host */
	CHECK(policy_dlp_exempt(pd, "any.example", "/v1/keys/7?x=1", "acme"));
	CHECK(!policy_dlp_exempt(pd, "any.example", "/v1/other", "acme"));
	CHECK(!policy_dlp_exempt(pd, "any.example", NULL, "acme"));
	/* names are normalised */
	CHECK(policy_dlp_exempt(pd, "exact.example.net", "/", NULL));
	CHECK(policy_dlp_exempt(NULL, "x", "/", NULL));
	policy_unref(p);
	diag_free(&d);
}

static void
test_errors(void)
{
	static const struct coretest_diag want[] = {
		{ 6, 13, "mode: expected block, report or off" },
		{ 7, 17, "defaults: expected true or false" },
		{ 9, 11, "regex is required" },
		{ 9, 15, "is not a rule id" },
		{ 10, 11, "regex is required" },
		{ 11, 11, "regex is required" },
		{ 12, 11, "unknown key \"regexp\"" },
		{ 14, 16, "\"twice\" is defined twice" },
		{ 18, 17, "is not a host name" },
		{ 19, 17, "a glob starting with '/'" },
	};
	struct policy *p;
	struct diag d;
	size_t i, n = sizeof(want) / sizeof(want[0]);

	diag_init(&d);
	p = load_text(P "    dlp:\n"			/* 5 */
	    "      mode: fast\n"				/* 6 */
	    "      defaults: maybe\n"			/* 7 */
	    "      rules:\n"				/* 8 */
	    "        - id: -bad\n"				/* 9 */
	    "        - id: noregex\n"			/* 10 */
	    "        - id: typo\n"				/* 11 */
	    "          regexp: 'x'\n"			/* 12 */
	    "        - {id: twice, regex: 'a'}\n"		/* 13 */
	    "        - {id: twice, regex: 'b'}\n"		/* 14 */
	    "      allow:\n"				/* 15 */
	    "        - host: '*.ok.example'\n"		/* 16 */
	    "          path: /x\n"				/* 17 */
	    "        - host: 'a*b.example'\n"		/* 18 */
	    "          path: 'nope'\n", &d);		/* 19 */
	CHECK(p == NULL);
	CHECK_INT(d.n, n);
	for (i = 0; i < d.n && i < n; i++) {
		CHECK_INT(d.v[i].line, want[i].line);
		CHECK_INT(d.v[i].col, want[i].col);
		CHECK_MSG(strstr(d.v[i].msg, want[i].msg) != NULL, "%s", d.v[i].msg);
	}
	diag_free(&d);
	/* a regex Hyperscan refuses: at its regex line */
	diag_init(&d);
	p = load_text(P "    dlp:\n      rules:\n        - id: x\n"
	    "          regex: 'a(b'\n", &d);
	CHECK(p == NULL);
	CHECK_INT(d.n, 1);
	if (d.n == 1) {
		CHECK_INT(d.v[0].line, 8);
		CHECK(strstr(d.v[0].msg, "dlp: regex: ") != NULL);
	}
	diag_free(&d);
}

int
main(void)
{
	const char *why;

	if (!dlp_available(&why)) {
		printf("skipped: %s\n", why);
		return 77;
	}
	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	test_modes();
	test_allow();
	test_errors();
	return check_summary();
}
