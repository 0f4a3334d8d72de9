/*
 * Unit tests for core/policy_path.c (the canonical path) and for what
 * policy_decide() makes of an ambiguous path, over data/path_policy.yaml:
 * refused with ambiguous-path where a path rule could apply, decided on
 * host and method alone where none could.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/policy_int.h"
#include "core/reason.h"

#define OK	POLICY_PATH_OK
#define AMB	POLICY_PATH_AMBIGUOUS
#define BAD	POLICY_PATH_BAD

struct path_case {
	const char	*in;
	enum policy_path rc;
	const char	*canon;		/* when OK */
};

static const struct path_case path_cases[] = {
	/* plain, unreserved escapes decoded, other escapes upper-cased */
	{ "/public/a", OK, "/public/a" },
	{ "/public/a%20b", OK, "/public/a%20b" },
	{ "/public/%7Euser", OK, "/public/~user" },
	{ "/public/%7euser", OK, "/public/~user" },
	{ "/%70ublic/x", OK, "/public/x" },
	{ "/%70%75%62%6C%69%63/x", OK, "/public/x" },
	{ "/public/a%2Ejson", OK, "/public/a.json" },
	{ "/public/caf%c3%a9", OK, "/public/caf%C3%A9" },
	{ "/public/%E2%82%AC", OK, "/public/%E2%82%AC" },
	{ "/public/%F0%9F%98%80", OK, "/public/%F0%9F%98%80" },
	/* printable reserved characters decoded too: one form for rules */
	{ "/public/x%3Ay%40z", OK, "/public/x:y@z" },
	{ "/public/%22%3c%3E", OK, "/public/\"<>" },
	{ "/public/%2A", OK, "/public/*" },
	/* '%', '?', '#' stay escaped */
	{ "/public/%25", OK, "/public/%25" },
	{ "/public/100%25zz", OK, "/public/100%25zz" },
	{ "/public/%25%2F", AMB, NULL },
	{ "/public/%3f%23", OK, "/public/%3F%23" },
	/* query and fragment cut */
	{ "/public/a?x=/../admin", OK, "/public/a" },
	{ "/public/a?%2F", OK, "/public/a" },
	{ "/public/a#%00", OK, "/public/a" },
	{ "?x", OK, "" },
	/* raw dot segments resolved (RFC 3986 5.2.4) */
	{ "/public/../admin", OK, "/admin" },
	{ "/public/./a", OK, "/public/a" },
	{ "/public/a/..", OK, "/public/" },
	{ "/public/a/.", OK, "/public/a/" },
	{ "/public/a/b/../../c", OK, "/public/c" },
	{ "/..", OK, "/" },
	{ "/../../public/a", OK, "/public/a" },
	{ "/.", OK, "/" },
	{ "/public/.hidden", OK, "/public/.hidden" },
	{ "/public/..a", OK, "/public/..a" },
	{ "/public/a..", OK, "/public/a.." },
	/* repeated slashes merged */
	{ "//public//a", OK, "/public/a" },
	{ "/public/a//", OK, "/public/a/" },
	{ "//", OK, "/" },
	{ "/", OK, "/" },
	{ "", OK, "" },
	/* not absolute (OPTIONS *, globs) */
	{ "*", OK, "*" },
	{ "a/../b", OK, "b" },
	{ "*/x/./y", OK, "*/x/y" },

	/* %2F: encoded slash, any case, any place */
	{ "/public/..%2Fadmin", AMB, NULL },
	{ "/public/..%2fadmin", AMB, NULL },
	{ "/public/a%2Fb", AMB, NULL },
	{ "%2F", AMB, NULL },
	{ "/public%2F..%2F..%2Fadmin", AMB, NULL },
	/* %5C: encoded backslash */
	{ "/public/..%5Cadmin", AMB, NULL },
	{ "/public/..%5cadmin", AMB, NULL },
	{ "/public/a%5Cb", AMB, NULL },
	/* raw backslash */
	{ "/public/..\\admin", AMB, NULL },
	{ "/public\\..\\admin", AMB, NULL },
	{ "\\public", AMB, NULL },
	{ "/public/a\\", AMB, NULL },
	/* ';' in a dot segment */
	{ "/public/..;/admin", AMB, NULL },
	{ "/public/..;x/admin", AMB, NULL },
	{ "/public/..;x=1;y/admin", AMB, NULL },
	{ "/public/.;/admin", AMB, NULL },
	{ "/public/.;x", AMB, NULL },
	{ "/public/..%3B/admin", AMB, NULL },
	{ "/public/..%3b/admin", AMB, NULL },
	{ "/public/%2e%2e;/admin", AMB, NULL },
	/*
	 * ';' anywhere in the path: servlet containers cut a path parameter
	 * off every segment before routing ("/admin;x/" is "/admin/")
	 */
	{ "/;jsessionid=x/admin/", AMB, NULL },
	{ "/;/admin", AMB, NULL },
	{ "/admin;x/", AMB, NULL },
	{ "/admin;/", AMB, NULL },
	{ "/admin;", AMB, NULL },
	{ "/public/a;b", AMB, NULL },
	{ "/public/;x", AMB, NULL },
	{ "/public/x;", AMB, NULL },
	{ "/public/x;a=1?q=2", AMB, NULL },
	{ "/public/x;?q", AMB, NULL },
	{ "/a/..;/admin", AMB, NULL },
	{ "/a/.;/admin", AMB, NULL },
	{ "/public/a%3Bb", AMB, NULL },
	{ "/public/a%3bb", AMB, NULL },
	{ "/admin%3Bx/", AMB, NULL },
	{ "/%3bjsessionid=x/admin/", AMB, NULL },
	{ "/a/..%3b/admin", AMB, NULL },
	{ "/a/%2e%2e%3b/admin", AMB, NULL },
	{ "/a/%2E;/admin", AMB, NULL },
	{ "/a/%2e%2e;x", AMB, NULL },
	{ "/a%2F;x/admin", AMB, NULL },
	{ "/a/%2F..;/admin", AMB, NULL },
	{ "/a;x/../admin", AMB, NULL },
	{ "/a/b;c/d;e/f", AMB, NULL },
	{ "/a/b%253Bc", AMB, NULL },
	{ ";", AMB, NULL },
	{ "a;b", AMB, NULL },
	/* ... but the query is not the path */
	{ "/public/x?a;b", OK, "/public/x" },
	{ "/public/x?%3B", OK, "/public/x" },
	{ "/public/x?;/../admin", OK, "/public/x" },
	/* encoded dot segments */
	{ "/public/%2e%2e/admin", AMB, NULL },
	{ "/public/%2E%2E/admin", AMB, NULL },
	{ "/public/.%2e/admin", AMB, NULL },
	{ "/public/.%2E/admin", AMB, NULL },
	{ "/public/%2e./admin", AMB, NULL },
	{ "/public/%2E./admin", AMB, NULL },
	{ "/public/%2e/admin", AMB, NULL },
	{ "/public/%2e", AMB, NULL },
	{ "/public/x/%2e%2e", AMB, NULL },
	{ "/public/%2e%2e/%2e%2e/%2e%2e/admin", AMB, NULL },
	/* double encoding */
	{ "/public/%252e%252e/admin", AMB, NULL },
	{ "/public/%252E%252E/admin", AMB, NULL },
	{ "/public/..%252fadmin", AMB, NULL },
	{ "/public/..%252F..%252Fadmin", AMB, NULL },
	{ "/public/%2541", AMB, NULL },
	{ "/public/%2525", AMB, NULL },
	{ "/public/%25%32%65", AMB, NULL },
	{ "/public/%25%32e", AMB, NULL },
	{ "/public/%252e%252e/../admin", AMB, NULL },
	/* %00 and the other controls */
	{ "/public/%00", AMB, NULL },
	{ "/public/a%00.json", AMB, NULL },
	{ "/public/..%00/admin", AMB, NULL },
	{ "/public/%0d%0aX-Evil:%201", AMB, NULL },
	{ "/public/%0D%0A", AMB, NULL },
	{ "/public/%0A", AMB, NULL },
	{ "/public/admin%09", AMB, NULL },
	{ "/public/%1f", AMB, NULL },
	{ "/public/%7F", AMB, NULL },
	{ "/public/%7f", AMB, NULL },
	/* overlong UTF-8 */
	{ "/public/..%c0%afadmin", AMB, NULL },
	{ "/public/..%C0%AFadmin", AMB, NULL },
	{ "/public/%c0%ae%c0%ae/admin", AMB, NULL },
	{ "/public/..%e0%80%afadmin", AMB, NULL },
	{ "/public/..%f0%80%80%afadmin", AMB, NULL },
	{ "/public/..%c1%9cadmin", AMB, NULL },
	/* other invalid UTF-8 */
	{ "/public/%80", AMB, NULL },
	{ "/public/%bf", AMB, NULL },
	{ "/public/%C3", AMB, NULL },
	{ "/public/%C3x", AMB, NULL },
	{ "/public/%C3/%A9", AMB, NULL },
	{ "/public/%E2%82", AMB, NULL },
	{ "/public/%ED%A0%80", AMB, NULL },
	{ "/public/%F4%90%80%80", AMB, NULL },
	{ "/public/%FF", AMB, NULL },
	{ "/public/caf%E9", AMB, NULL },
	/* look-alikes of '/', '\', '.', '%' and trimmed white space */
	{ "/public/..%EF%BC%8Fadmin", AMB, NULL },
	{ "/public/..%ef%bc%bcadmin", AMB, NULL },
	{ "/public/%EF%BC%8E%EF%BC%8E/admin", AMB, NULL },
	{ "/public/%E2%80%A4%E2%80%A4/admin", AMB, NULL },
	{ "/public/..%E2%88%95admin", AMB, NULL },
	{ "/public/admin%C2%85", AMB, NULL },
	{ "/public/%c2%a0", AMB, NULL },
	{ "/public/%EF%BC%85%32%65", AMB, NULL },
	/* ".." that removes an empty segment ("//", "/;x") */
	{ "/public//../admin", AMB, NULL },
	{ "/public/x//../../admin", AMB, NULL },
	{ "/public//./../admin", AMB, NULL },
	{ "/public/;x/../admin", AMB, NULL },
	{ "/public/%3Bx/../admin", AMB, NULL },
	/* dots and spaces only: Windows trims them */
	{ "/public/.../admin", AMB, NULL },
	{ "/public/..%20/admin", AMB, NULL },
	{ "/public/.%20/admin", AMB, NULL },
	{ "/public/....", AMB, NULL },

	/* malformed */
	{ "/public/%zz", BAD, NULL },
	{ "/public/%", BAD, NULL },
	{ "/public/%4", BAD, NULL },
	{ "/public/%4/", BAD, NULL },
	{ "/public/%%32%65", BAD, NULL },
	{ "/public/%u002e", BAD, NULL },
	{ "/public/%2e%2e/%zz", BAD, NULL },
	{ "/public/a b", BAD, NULL },
	{ "/public/\x01", BAD, NULL },
	{ "/public/\x7f", BAD, NULL },
	{ "/public/caf\xc3\xa9", BAD, NULL },
	{ "/public/\t", BAD, NULL },
};

static void
test_canon(void)
{
	char out[POLICY_PATH_MAX], again[POLICY_PATH_MAX];
	size_t i, olen, alen;
	enum policy_path rc;

	for (i = 0; i < sizeof(path_cases) / sizeof(path_cases[0]); i++) {
		const struct path_case *c = &path_cases[i];

		memset(out, 'x', sizeof(out));
		rc = policy_path_canon(c->in, strlen(c->in), out, sizeof(out),
		    &olen);
		CHECK_MSG(rc == c->rc, "\"%s\": rc %d, want %d", c->in, rc,
		    c->rc);
		if (rc != OK) {
			CHECK_MSG(out[0] == '\0' && olen == 0, "\"%s\"", c->in);
			continue;
		}
		CHECK_MSG(strlen(out) == olen, "\"%s\"", c->in);
		if (c->canon != NULL)
			CHECK_MSG(strcmp(out, c->canon) == 0, "\"%s\": \"%s\", "
			    "want \"%s\"", c->in, out, c->canon);
		/* A canonical form is its own canonical form. */
		rc = policy_path_canon(out, olen, again, sizeof(again), &alen);
		CHECK_MSG(rc == OK && strcmp(out, again) == 0,
		    "\"%s\": again \"%s\"", out, again);
	}
}

static void
test_limits(void)
{
	static char big[3 * POLICY_PATH_MAX];
	char out[POLICY_PATH_MAX], small[8];
	size_t i, olen;

	/* Too long a canonical form fails closed. */
	big[0] = '/';
	memset(big + 1, 'a', POLICY_PATH_MAX);
	CHECK_INT(policy_path_canon(big, POLICY_PATH_MAX + 1, out, sizeof(out),
	    &olen), BAD);
	CHECK_INT(policy_path_canon(big, POLICY_PATH_MAX - 2, out, sizeof(out),
	    &olen), OK);
	CHECK_INT(olen, POLICY_PATH_MAX - 2);
	CHECK_INT(policy_path_canon(big, POLICY_PATH_MAX - 1, out, sizeof(out),
	    &olen), BAD);
	/* A long input whose canonical form is short is fine. */
	for (i = 0; i + 5 <= sizeof(big); i += 5)
		memcpy(big + i, "/a/..", 5);
	CHECK_INT(policy_path_canon(big, i, out, sizeof(out), &olen), OK);
	CHECK_STR(out, "/");
	/* Length, not NUL, ends the input. */
	CHECK_INT(policy_path_canon("/a\0b", 4, out, sizeof(out), &olen), BAD);
	CHECK_INT(policy_path_canon("/abc", 2, out, sizeof(out), &olen), OK);
	CHECK_STR(out, "/a");
	CHECK_INT(policy_path_canon("/abcdef", 7, small, sizeof(small),
	    &olen), BAD);
	CHECK_INT(policy_path_canon("/abcde", 6, small, sizeof(small),
	    &olen), OK);
	CHECK_INT(policy_path_canon("/a", 2, small, 0, &olen), BAD);
}

static char data_dir[1024];

static struct policy *
load_fixture(const char *name, struct diag *d)
{
	char path[1200];
	char *paths[1];

	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	paths[0] = path;
	diag_init(d);
	return policy_load_paths(paths, 1, d);
}

static int
decide(const struct policy *p, const char *host, const char *method,
    const char *path, struct policy_verdict *v)
{
	struct policy_identity id;
	struct policy_target t;

	CHECK(policy_identity_by_id(p, "box", &id) == 0);
	CHECK(policy_target_init(&t, host, strlen(host), 80) == 0);
	return policy_decide(p, &id, &t, method, path, v);
}

#define ALLOWED(r)	1, r, REASON_NONE
#define DENIED(r, why)	0, r, why

struct decide_case {
	const char	*host;
	const char	*method;
	const char	*path;
	int		 allow;
	const char	*rule;
	enum sg_reason	 reason;
};

static const struct decide_case decide_cases[] = {
	/* a path allow rule: ambiguous is refused, naming that rule */
	{ "pub.example", "GET", "/public/a", ALLOWED("web:allow[0]") },
	{ "pub.example", "GET", "/public/..%2Fadmin", DENIED("web:allow[0]", REASON_AMBIGUOUS_PATH) },
	{ "pub.example", "GET", "/admin", DENIED("default-deny", REASON_POLICY_DENY) },
	{ "pub.example", "GET", "/public/%zz", DENIED("default-deny", REASON_POLICY_DENY) },
	{ "pub.example", "GET", "/public/../admin", DENIED("default-deny", REASON_POLICY_DENY) },
	/* no path rule on the host: host and method decide */
	{ "open.example", "GET", "/public/..%2Fadmin", ALLOWED("web:allow[1]") },
	{ "open.example", "GET", "/public/%zz", ALLOWED("web:allow[1]") },
	/* a path-scoped deny: ambiguous is refused, naming the deny rule */
	{ "guarded.example", "GET", "/x/..%2Fadmin", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/admin/x", DENIED("web:deny[0]", REASON_POLICY_DENY) },
	{ "guarded.example", "GET", "/%61dmin", DENIED("web:deny[0]", REASON_POLICY_DENY) },
	{ "guarded.example", "GET", "/admin%3Bx/y", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "//admin", DENIED("web:deny[0]", REASON_POLICY_DENY) },
	{ "guarded.example", "GET", "/%zz", DENIED("web:deny[0]", REASON_POLICY_DENY) },
	{ "guarded.example", "GET", "/public/x", ALLOWED("web:allow[2]") },
	/* path parameters: refused where a path rule could apply */
	{ "guarded.example", "GET", "/admin;x/", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/;jsessionid=1/admin/", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/x/..;/admin", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/admin;/", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/public/x;y", DENIED("web:deny[0]", REASON_AMBIGUOUS_PATH) },
	{ "guarded.example", "GET", "/public/x?a;b", ALLOWED("web:allow[2]") },
	{ "pub.example", "GET", "/public/x;jsessionid=1", DENIED("web:allow[0]", REASON_AMBIGUOUS_PATH) },
	{ "pub.example", "GET", "/public/%3b/x?y", DENIED("web:allow[0]", REASON_AMBIGUOUS_PATH) },
	{ "open.example", "GET", "/admin;x/", ALLOWED("web:allow[1]") },
	{ "open.example", "GET", "/a;b=c/d;e", ALLOWED("web:allow[1]") },
	/* the first allow rule for the host has no paths: nothing to dodge */
	{ "either.example", "GET", "/admin;x/", ALLOWED("web:allow[5]") },
	{ "either.example", "POST", "/v1;x/", ALLOWED("web:allow[5]") },
	/* a path rule for other methods only */
	{ "mixed.example", "GET", "/upload;x/a", ALLOWED("web:allow[4]") },
	{ "mixed.example", "POST", "/upload;x/a", DENIED("web:allow[3]", REASON_AMBIGUOUS_PATH) },
	{ "mixed.example", "DELETE", "/upload/a;x", DENIED("web:deny[1]", REASON_AMBIGUOUS_PATH) },
	/* rules whose method does not match cannot apply */
	{ "mixed.example", "GET", "/upload/..%2Fx", ALLOWED("web:allow[4]") },
	{ "mixed.example", "POST", "/upload/..%2Fx", DENIED("web:allow[3]", REASON_AMBIGUOUS_PATH) },
	{ "mixed.example", "DELETE", "/upload/..%2Fx", DENIED("web:deny[1]", REASON_AMBIGUOUS_PATH) },
	{ "mixed.example", "PUT", "/upload/..%2Fx", DENIED("default-deny", REASON_POLICY_DENY) },
	{ "mixed.example", "POST", "/upload/a", ALLOWED("web:allow[3]") },
	/* no path given (a tunnel before its requests): unchanged */
	{ "pub.example", NULL, NULL, ALLOWED("web:allow[0]") },
	{ "guarded.example", NULL, NULL, ALLOWED("web:allow[2]") },
};

static void
check_verdict(const char *what, const struct policy_verdict *v, int allow,
    const char *rule, enum sg_reason reason)
{
	CHECK_MSG(v->allow == allow, "%s: allow %d", what, v->allow);
	CHECK_MSG(strcmp(v->rule, rule) == 0, "%s: rule %s, want %s", what,
	    v->rule, rule);
	CHECK_MSG(v->reason == reason, "%s: reason %s, want %s", what,
	    v->reason ? reason_word(v->reason) : "(none)",
	    reason ? reason_word(reason) : "(none)");
}

static void
test_decide(const struct policy *p)
{
	struct policy_verdict v;
	char what[256];
	size_t i;

	for (i = 0; i < sizeof(decide_cases) / sizeof(decide_cases[0]); i++) {
		const struct decide_case *c = &decide_cases[i];

		snprintf(what, sizeof(what), "%s %s %s", c->host,
		    c->method ? c->method : "-", c->path ? c->path : "-");
		CHECK_MSG(decide(p, c->host, c->method, c->path, &v) ==
		    c->allow, "%s", what);
		check_verdict(what, &v, c->allow, c->rule, c->reason);
	}
}

/*
 * Every path of the canonicaliser table against the three kinds of host:
 * a path allow rule, a path-scoped deny, no path rule at all.
 */
static void
test_decide_table(const struct policy *p)
{
	struct policy_verdict v;
	char what[256];
	size_t i;
	int pub, adm;

	for (i = 0; i < sizeof(path_cases) / sizeof(path_cases[0]); i++) {
		const struct path_case *c = &path_cases[i];

		snprintf(what, sizeof(what), "open %s", c->in);
		decide(p, "open.example", "GET", c->in, &v);
		check_verdict(what, &v, 1, "web:allow[1]", REASON_NONE);
		snprintf(what, sizeof(what), "pub %s", c->in);
		decide(p, "pub.example", "GET", c->in, &v);
		if (c->rc == AMB)
			check_verdict(what, &v, 0, "web:allow[0]",
			    REASON_AMBIGUOUS_PATH);
		else if (c->rc == BAD)
			check_verdict(what, &v, 0, "default-deny",
			    REASON_POLICY_DENY);
		else {
			pub = policy_glob_match("/public/*", c->canon,
			    strlen(c->canon));
			check_verdict(what, &v, pub, pub ? "web:allow[0]" :
			    "default-deny", pub ? REASON_NONE : REASON_POLICY_DENY);
		}
		snprintf(what, sizeof(what), "guarded %s", c->in);
		decide(p, "guarded.example", "GET", c->in, &v);
		if (c->rc == AMB)
			check_verdict(what, &v, 0, "web:deny[0]",
			    REASON_AMBIGUOUS_PATH);
		else if (c->rc == BAD)
			check_verdict(what, &v, 0, "web:deny[0]",
			    REASON_POLICY_DENY);
		else {
			adm = policy_glob_match("/admin*", c->canon,
			    strlen(c->canon));
			check_verdict(what, &v, !adm, adm ? "web:deny[0]" :
			    "web:allow[2]", adm ? REASON_POLICY_DENY : REASON_NONE);
		}
	}
}

int
main(void)
{
	const char *env = getenv("SANDGATE_TEST_DATA");
	struct policy *p;
	struct diag d;

	if (env != NULL)
		snprintf(data_dir, sizeof(data_dir), "%s/core/data", env);
	else
		snprintf(data_dir, sizeof(data_dir), "data");

	test_canon();
	test_limits();
	p = load_fixture("path_policy.yaml", &d);
	if (p == NULL)
		diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		test_decide(p);
		test_decide_table(p);
		policy_unref(p);
	}
	diag_free(&d);
	return check_summary();
}
