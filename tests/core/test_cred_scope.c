/*
 * Unit tests for a credential's require: and scope: (policy_load.c parses
 * them, policy_cred_scope.c decides whether a request is inside the scope):
 * values loaded, errors at their line, and the canonical path matching that
 * keeps traversal and encoded slashes from escaping a scope.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/policy.h"
#include "core/policy_int.h"
#include "helper_core.h"

static char data_dir[PATH_MAX];
static char tmp_dir[] = "/tmp/sg-test-cred-scope-XXXXXX";

#define C	"credentials:\n  - name: c\n    secret: s\n    hosts: [a.com]\n"

static struct policy *
load_text(const char *yaml, struct diag *d)
{
	char *paths[1];

	paths[0] = (char *)coretest_tmpfile("cred.yaml", yaml);
	return policy_load_paths(paths, 1, d);
}

static const struct policy_credential *
first_cred(const struct policy *p)
{
	size_t n;
	const struct policy_credential *c = policy_all_credentials(p, &n);

	return n > 0 ? c : NULL;
}

static void
test_defaults(void)
{
	const struct policy_credential *c;
	struct policy *p;
	struct diag d;

	diag_init(&d);
	p = load_text(C, &d);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	if (p != NULL && (c = first_cred(p)) != NULL) {
		CHECK_INT(c->require, 0);
		CHECK_INT(c->n_scope_methods, 0);
		CHECK_INT(c->n_scope_paths, 0);
		/* No scope: everything is inside. */
		CHECK_INT(policy_credential_in_scope(c, "DELETE", 6, "/x/../y",
		    7), 1);
	}
	if (p != NULL)
		policy_unref(p);
	diag_free(&d);
}

static int
in(const struct policy_credential *c, const char *m, const char *path)
{
	return policy_credential_in_scope(c, m, strlen(m), path, strlen(path));
}

static void
test_scope(void)
{
	const struct policy_credential *c;
	struct policy *p;
	struct diag d;

	diag_init(&d);
	p = load_text(C "    require: true\n    scope:\n"
	    "      methods: [get, HEAD]\n"
	    "      paths: [\"/repos/acme/*\", \"/user\"]\n", &d);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	if (p == NULL || (c = first_cred(p)) == NULL) {
		diag_free(&d);
		return;
	}
	CHECK_INT(c->require, 1);
	CHECK_INT(c->n_scope_methods, 2);
	CHECK_STR(c->scope_methods[0], "GET");	/* stored upper-case */
	CHECK_STR(c->scope_methods[1], "HEAD");
	CHECK_INT(c->n_scope_paths, 2);
	CHECK_STR(c->scope_paths[0], "/repos/acme/*");

	/* inside */
	CHECK_INT(in(c, "GET", "/repos/acme/app"), 1);
	CHECK_INT(in(c, "HEAD", "/repos/acme/app/pulls?state=open"), 1);
	CHECK_INT(in(c, "GET", "/user"), 1);
	CHECK_INT(in(c, "GET", "/repos/acme/./app"), 1);	/* canonical: inside */
	CHECK_INT(in(c, "GET", "/repos/%61cme/app"), 1);	/* %61 is 'a' */
	/* method outside; exact, as allow rules' methods */
	CHECK_INT(in(c, "POST", "/repos/acme/app"), 0);
	CHECK_INT(in(c, "get", "/repos/acme/app"), 0);
	CHECK_INT(in(c, "GETX", "/repos/acme/app"), 0);
	CHECK_INT(in(c, "GE", "/repos/acme/app"), 0);
	/* path outside, and the ways out of a scope */
	CHECK_INT(in(c, "GET", "/repos/other/app"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme"), 0);
	CHECK_INT(in(c, "GET", "/user/keys"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/../other/app"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/%2e%2e/other/app"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/%2E%2E/other"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme%2f..%2fother"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme%2Fx"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/x%5c..%5c..%5cother"), 0);
	CHECK_INT(in(c, "GET", "//repos/acme/../../other"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/..;/other"), 0);
	CHECK_INT(in(c, "GET", "/repos/acme/%252e%252e/other"), 0);
	CHECK_INT(in(c, "GET", "/user?x=/repos/acme/"), 1);	/* query cut */
	CHECK_INT(in(c, "GET", "/x?/repos/acme/a"), 0);
	CHECK_INT(in(c, "GET", "*"), 0);
	CHECK_INT(in(c, "GET", ""), 0);
	policy_unref(p);
	diag_free(&d);
}

/* Methods only, paths only. */
static void
test_halves(void)
{
	const struct policy_credential *c;
	struct policy *p;
	struct diag d;

	diag_init(&d);
	p = load_text(C "    scope: {methods: [POST]}\n", &d);
	CHECK(p != NULL && d.n == 0);
	if (p != NULL && (c = first_cred(p)) != NULL) {
		CHECK_INT(c->require, 0);
		CHECK_INT(in(c, "POST", "/anything/%2f"), 1);
		CHECK_INT(in(c, "GET", "/"), 0);
		policy_unref(p);
	}
	diag_free(&d);
	diag_init(&d);
	p = load_text(C "    require: false\n    scope: {paths: [\"/v1/*\"]}\n",
	    &d);
	CHECK(p != NULL && d.n == 0);
	if (p != NULL && (c = first_cred(p)) != NULL) {
		CHECK_INT(in(c, "DELETE", "/v1/x"), 1);
		CHECK_INT(in(c, "GET", "/v2/x"), 0);
		policy_unref(p);
	}
	diag_free(&d);
}

struct err_case {
	const char	*name;
	const char	*yaml;
	int		 nerr, line, col;
	const char	*msg;
};

static const struct err_case err_cases[] = {
	{ "require not bool", C "    require: yes please\n", 1, 5, 14,
	    "expected true or false" },
	{ "scope list", C "    scope: [GET]\n", 1, 5, 12,
	    "scope: expected a mapping" },
	{ "scope empty", C "    scope: {}\n", 1, 5, 12, "must not be empty" },
	{ "scope unknown key", C "    scope:\n      hosts: [a.com]\n", 1, 6, 7,
	    "unknown key \"hosts\" in scope" },
	{ "scope method word", C "    scope:\n      methods: [GET, FETCH]\n",
	    1, 6, 22, "\"FETCH\" is not an HTTP method" },
	{ "scope method empty", C "    scope:\n      methods: []\n", 1, 6, 16,
	    "must not be empty" },
	{ "scope path relative", C "    scope:\n      paths: [repos/*]\n", 1, 6,
	    15, "starts with '/' or '*'" },
	{ "scope path dotdot", C "    scope:\n      paths: [\"/a/../b\"]\n", 1,
	    6, 15, "write \"/b\"" },
	{ "scope path pct dotdot", C "    scope:\n"
	    "      paths: [\"/a/%2e%2e/b\"]\n", 1, 6, 15, "an ambiguous path" },
	{ "scope path encoded slash", C "    scope:\n"
	    "      paths: [\"/a%2fb\"]\n", 1, 6, 15, "an ambiguous path" },
	{ "scope path not canonical", C "    scope:\n"
	    "      paths: [\"/a//b\"]\n", 1, 6, 15, "write \"/a/b\"" },
	{ "scope path query", C "    scope:\n      paths: [\"/a?b\"]\n", 1, 6,
	    15, "no spaces, query" },
	{ "credential unknown near", C "    requires: true\n", 1, 5, 5,
	    "did you mean \"require\"" },
};

static void
test_errors(void)
{
	const struct err_case *tc;
	struct policy *p;
	struct diag d;
	size_t i;

	for (i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		tc = &err_cases[i];
		diag_init(&d);
		p = load_text(tc->yaml, &d);
		CHECK_MSG(p == NULL, "%s: loaded", tc->name);
		if (p != NULL)
			policy_unref(p);
		coretest_check_first(&d, tc->name,
		    coretest_tmpfile("cred.yaml", tc->yaml), tc->nerr,
		    tc->line, tc->col, tc->msg);
		diag_free(&d);
	}
}

int
main(void)
{
	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	test_defaults();
	test_scope();
	test_halves();
	test_errors();
	return check_summary();
}
