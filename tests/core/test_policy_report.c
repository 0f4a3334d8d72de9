/*
 * Unit tests for mode: report (docs/policy.md): which denials a report-mode
 * policy lets pass (recorded in the verdict's report), and which stay
 * enforced whatever the mode: identity, internal addresses, ambiguous
 * paths, dns_types, and the reasons policy_report_relaxes() refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helper_core.h"
#include "core/policy.h"
#include "core/reason.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-report-XXXXXX";

struct report_case {
	const char	*sandbox;
	const char	*host;
	uint16_t	 port;
	const char	*method, *path;
	int		 allow;
	const char	*rule;
	enum sg_reason	 reason;	/* the denial's */
	enum sg_reason	 report;	/* what passed in report mode */
	int		 tls;
};

static const struct report_case cases[] = {
	/* allowed as in enforce mode: no report */
	{ "learner", "x.pkgs.example.com", 443, NULL, NULL, 1, "learn:allow[1]", REASON_NONE, REASON_NONE, 0 },
	/* no rule: passes, reported as default-deny */
	{ "learner", "other.example.org", 443, NULL, NULL, 1, "default-deny", REASON_NONE, REASON_POLICY_DENY, 0 },
	{ "learner", "x.pkgs.example.com", 8443, NULL, NULL, 1, "default-deny", REASON_NONE, REASON_POLICY_DENY, 0 },
	/* a deny rule: passes, reported naming the deny rule */
	{ "learner", "uploads.example.com", 443, NULL, NULL, 1, "learn:deny[0]", REASON_NONE, REASON_POLICY_DENY, 0 },
	/* a request-level deny rule: the allow rule's tls still applies */
	{ "learner", "api.example.com", 443, "DELETE", "/v1/x", 1, "learn:deny[1]", REASON_NONE, REASON_POLICY_DENY, 1 },
	{ "learner", "api.example.com", 443, "GET", "/v2/x", 1, "default-deny", REASON_NONE, REASON_POLICY_DENY, 0 },
	{ "learner", "api.example.com", 443, "GET", "/v1/x", 1, "learn:allow[0]", REASON_NONE, REASON_NONE, 1 },
	/* ambiguous paths are refused in any mode */
	{ "learner", "api.example.com", 443, "GET", "/v1/a%2Fb", 0, "learn:allow[0]", REASON_AMBIGUOUS_PATH, REASON_NONE, 0 },
	/* no identity, unknown policy: denied in any mode */
	{ NULL, "other.example.org", 443, NULL, NULL, 0, "no-identity", REASON_NO_IDENTITY, REASON_NONE, 0 },
	/* the same destinations under mode: enforce */
	{ "strict", "other.example.org", 443, NULL, NULL, 0, "default-deny", REASON_POLICY_DENY, REASON_NONE, 0 },
	{ "strict", "uploads.example.com", 443, NULL, NULL, 0, "enforced:deny[0]", REASON_POLICY_DENY, REASON_NONE, 0 },
};

static void
test_decide(const struct policy *p)
{
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct report_case *c = &cases[i];

		if (c->sandbox != NULL)
			CHECK(policy_identity_by_id(p, c->sandbox, &id) == 0);
		CHECK(policy_target_init(&t, c->host, strlen(c->host),
		    c->port) == 0);
		rc = policy_decide(p, c->sandbox ? &id : NULL, &t, c->method,
		    c->path, &v);
		CHECK_MSG(rc == c->allow && v.allow == c->allow,
		    "case %zu %s: allow %d", i, c->host, v.allow);
		CHECK_MSG(strcmp(v.rule, c->rule) == 0, "case %zu %s: rule %s",
		    i, c->host, v.rule);
		CHECK_MSG(v.reason == c->reason, "case %zu %s: reason %d", i,
		    c->host, v.reason);
		CHECK_MSG(v.report == c->report, "case %zu %s: report %d", i,
		    c->host, v.report);
		if (c->allow)
			CHECK_MSG((int)v.tls == c->tls, "case %zu: tls %d", i,
			    v.tls);
	}
}

/* Internal addresses and country rules after a reported verdict. */
static void
test_after(const struct policy *p)
{
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	struct netaddr a;

	CHECK(policy_identity_by_id(p, "learner", &id) == 0);
	CHECK(policy_target_init(&t, "other.example.org", 17, 443) == 0);
	CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 1);
	CHECK(netaddr_parse("127.0.0.1", 9, &a) == 0);
	CHECK(policy_check_addrs(p, &id, &t, &a, 1, &v) == 0);
	CHECK(v.allow == 0 && v.reason == REASON_IP_PROHIBITED);

	CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 1);
	CHECK(netaddr_parse("151.101.0.223", 13, &a) == 0);
	CHECK(policy_check_addrs(p, &id, &t, &a, 1, &v) == 1);
	CHECK(policy_check_geo(p, &id, "KP", 0, &v) == 1);
	CHECK(v.allow == 1 && v.report == REASON_POLICY_DENY);

	/* An allowed destination in a denied country: reported as such. */
	CHECK(policy_target_init(&t, "a.pkgs.example.com", 18, 443) == 0);
	CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 1);
	CHECK(v.report == REASON_NONE);
	CHECK(policy_check_geo(p, &id, "KP", 0, &v) == 1);
	CHECK(v.report == REASON_COUNTRY_DENY);
	CHECK_STR(v.rule, "learn:allow[1]");

	/* IP literals: no cidr rule, reported; internal ones denied. */
	CHECK(policy_target_init(&t, "169.254.169.254", 15, 80) == 0);
	CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 1);
	CHECK(policy_check_addrs(p, &id, &t, NULL, 0, &v) == 0);
	CHECK(v.reason == REASON_IP_PROHIBITED);
}

static void
test_dns(const struct policy *p)
{
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;

	CHECK(policy_identity_by_id(p, "learner", &id) == 0);
	CHECK(policy_target_init(&t, "other.example.org", 17, 0) == 0);
	CHECK(policy_decide_dns(p, &id, &t, 1, &v) == 1);
	CHECK(v.report == REASON_POLICY_DENY);
	/* dns_types stay enforced: TXT is refused. */
	CHECK(policy_decide_dns(p, &id, &t, 16, &v) == -1);
	CHECK(v.reason == REASON_DNS_TYPE);
	CHECK(policy_decide_dns(p, NULL, &t, 1, &v) == -1);
}

static void
test_relaxes(void)
{
	static const enum sg_reason yes[] = { REASON_POLICY_DENY,
	    REASON_NEEDS_INTERCEPT, REASON_PROTOCOL_DENY, REASON_SNI_MISSING,
	    REASON_COUNTRY_DENY, REASON_ASN_DENY };
	size_t i, j, hit;
	struct policy_verdict v;

	for (i = 0; i < REASON_MAX; i++) {
		for (hit = 0, j = 0; j < sizeof(yes) / sizeof(yes[0]); j++)
			hit |= yes[j] == (enum sg_reason)i;
		CHECK_MSG(policy_report_relaxes((enum sg_reason)i) == (int)hit,
		    "reason %s", reason_word((enum sg_reason)i) ?
		    reason_word((enum sg_reason)i) : "none");
	}
	memset(&v, 0, sizeof(v));
	CHECK(policy_verdict_report(&v, REASON_POLICY_DENY) == 0);
	v.report_mode = 1;
	CHECK(policy_verdict_report(&v, REASON_CRED_MISUSE) == 0);
	CHECK(policy_verdict_report(&v, REASON_FOREIGN_CRED) == 0);
	CHECK(policy_verdict_report(&v, REASON_IP_PROHIBITED) == 0);
	CHECK(policy_verdict_report(&v, REASON_SNI_MISMATCH) == 0);
	CHECK(policy_verdict_report(&v, REASON_GIT_REF_DENIED) == 0);
	CHECK(v.report == REASON_NONE);
	CHECK(policy_verdict_report(&v, REASON_PROTOCOL_DENY) == 1);
	CHECK(policy_verdict_report(&v, REASON_POLICY_DENY) == 1);
	CHECK(v.report == REASON_PROTOCOL_DENY);	/* the first stays */
}

static void
test_load_errors(void)
{
	static const struct coretest_diag want[] = {
		{ 3, 11, "mode: expected enforce, report or ask" },
		{ 5, 11, "mode: expected enforce, report or ask" },
	};
	const char *path = coretest_tmpfile("mode.yaml",
	    "policies:\n"
	    "  - name: a\n"
	    "    mode: Report\n"
	    "  - name: b\n"
	    "    mode: [report]\n");

	coretest_load_fails(path, NULL, want, sizeof(want) / sizeof(want[0]));
}

int
main(void)
{
	char path[1200];
	struct policy *p;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	snprintf(path, sizeof(path), "%s/report_policy.yaml", data_dir);
	p = coretest_load(path);
	CHECK(p != NULL);
	if (p != NULL) {
		test_decide(p);
		test_after(p);
		test_dns(p);
		policy_unref(p);
	}
	test_relaxes();
	test_load_errors();
	return check_summary();
}
