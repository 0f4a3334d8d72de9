/*
 * Unit tests for mode: ask (docs/approvals.md): a request no rule allows is
 * marked to be asked (verdict.ask) on every listener, DNS too; a deny rule,
 * an allowed request and a policy in enforce mode never are; a bad mode is
 * an error at its line. A policies directory's approved/ (sandgate approve
 * --always) adds allow rules to the policy it names, after its own.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helper_core.h"
#include "core/decide.h"
#include "core/policy.h"
#include "core/reason.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-ask-XXXXXX";

static const char doc[] =
    "sandboxes:\n"
    "  - id: asker\n"
    "    policy: asking\n"
    "    source: 198.18.0.2/32\n"
    "  - id: strict\n"
    "    policy: enforcing\n"
    "    source: 198.18.0.3/32\n"
    "  - id: strict-asks\n"
    "    policy: enforcing\n"
    "    source: 198.18.0.4/32\n"
    "    ask: true\n"
    "  - id: bare\n"
    "    policy: default\n"
    "    source: 198.18.0.5/32\n"
    "    ask: true\n"
    "policies:\n"
    "  - name: asking\n"
    "    mode: ask\n"
    "    allow:\n"
    "      - host: ok.example.com\n"
    "    deny:\n"
    "      - host: bad.example.com\n"
    "  - name: enforcing\n"
    "    allow:\n"
    "      - host: ok.example.com\n";

static int
one(const struct policy *p, enum decide_listener l, const char *sandbox,
    const char *host, uint16_t port, struct decision *d)
{
	struct policy_identity id;
	struct decide_env env;
	struct decide_q q;

	memset(&env, 0, sizeof(env));
	env.pol = p;
	env.keeper_up = 1;
	memset(&q, 0, sizeof(q));
	CHECK(policy_identity_by_id(p, sandbox, &id) == 0);
	q.listener = l;
	q.id = &id;
	q.host = host;
	q.hostlen = strlen(host);
	q.port = port;
	if (l == DECIDE_DNS) {
		q.qtype = 1;
		q.qclass = 1;
	}
	return (int)decide(&env, &q, d);
}

static void
test_ask(const struct policy *p)
{
	static const enum decide_listener ls[] = { DECIDE_HTTP,
	    DECIDE_CONNECT, DECIDE_SOCKS5, DECIDE_TRANSPARENT, DECIDE_DNS };
	struct policy_counts c;
	struct decision d;
	size_t i;
	uint16_t port;

	for (i = 0; i < sizeof(ls) / sizeof(ls[0]); i++) {
		port = ls[i] == DECIDE_DNS ? 0 : 443;
		CHECK_INT(one(p, ls[i], "asker", "new.example.com", port, &d),
		    REASON_POLICY_DENY);
		CHECK_MSG(d.v.ask == 1, "listener %d", (int)ls[i]);
		CHECK(strcmp(d.v.rule, "default-deny") == 0);
		CHECK_INT(one(p, ls[i], "asker", "bad.example.com", port, &d),
		    REASON_POLICY_DENY);
		CHECK(d.v.ask == 0);
		CHECK_INT(one(p, ls[i], "asker", "ok.example.com", port, &d),
		    REASON_NONE);
		CHECK(d.v.ask == 0);
		CHECK_INT(one(p, ls[i], "strict", "new.example.com", port, &d),
		    REASON_POLICY_DENY);
		CHECK(d.v.ask == 0);
		/* ask: true on a sandbox: its own deny-by-default is asked ... */
		CHECK_INT(one(p, ls[i], "strict-asks", "new.example.com", port,
		    &d), REASON_POLICY_DENY);
		CHECK(d.v.ask == 1);
		CHECK_INT(one(p, ls[i], "strict-asks", "ok.example.com", port,
		    &d), REASON_NONE);
		/* ... also under the implicit default policy, which allows nothing. */
		CHECK_INT(one(p, ls[i], "bare", "ok.example.com", port, &d),
		    REASON_POLICY_DENY);
		CHECK(d.v.ask == 1);
	}
	policy_counts(p, &c);
	CHECK_INT(c.report, 0);
}

static void
test_errors(void)
{
	static const struct coretest_diag want[] = {
		{ 3, 11, "mode: expected enforce, report or ask" },
		{ 7, 10, "ask" },
	};
	const char *path = coretest_tmpfile("askmode.yaml",
	    "policies:\n"
	    "  - name: a\n"
	    "    mode: Ask\n"
	    "sandboxes:\n"
	    "  - id: s\n"
	    "    policy: a\n"
	    "    ask: yes\n");

	coretest_load_fails(path, NULL, want, sizeof(want) / sizeof(want[0]));
}

/* A directory of policies with approved/: its rules join the policy's. */
static void
test_approved_dir(void)
{
	static const struct coretest_diag want[] = {
		{ 2, 3, "approved: no policy nosuch" },
	};
	char dir[1200], sub[1300];
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	struct policy *p;

	snprintf(dir, sizeof(dir), "%s/pdir", tmp_dir);
	snprintf(sub, sizeof(sub), "%s/approved", dir);
	CHECK(mkdir(dir, 0755) == 0 && mkdir(sub, 0755) == 0);
	(void)coretest_tmpfile("pdir/a.yaml", doc);
	(void)coretest_tmpfile("pdir/approved/asking--new.yaml",
	    "approved:\n"
	    "  asking:\n"
	    "    - host: new.example.com\n"
	    "      ports: [443]\n");
	p = coretest_load(dir);
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(policy_identity_by_id(p, "asker", &id) == 0);
		CHECK(policy_target_init(&t, "new.example.com", 15, 443) == 0);
		CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 1);
		CHECK_MSG(strcmp(v.rule, "asking:allow[1]") == 0, "%s", v.rule);
		CHECK(policy_target_init(&t, "new.example.com", 15, 80) == 0);
		CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 0);
		CHECK(v.ask == 1);
		/* Not the other policy's. */
		CHECK(policy_identity_by_id(p, "strict", &id) == 0);
		CHECK(policy_target_init(&t, "new.example.com", 15, 443) == 0);
		CHECK(policy_decide(p, &id, &t, NULL, NULL, &v) == 0);
		policy_unref(p);
	}
	/* Naming a policy nobody defined: an error at its line. */
	(void)coretest_tmpfile("pdir/approved/bad.yaml",
	    "approved:\n"
	    "  nosuch:\n"
	    "    - host: x.example.com\n");
	snprintf(sub, sizeof(sub), "%s/approved/bad.yaml", dir);
	coretest_load_fails(dir, sub, want, sizeof(want) / sizeof(want[0]));
	unlink(sub);
}

int
main(void)
{
	struct policy *p;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	p = coretest_load(coretest_tmpfile("ask.yaml", doc));
	CHECK(p != NULL);
	if (p != NULL) {
		test_ask(p);
		policy_unref(p);
	}
	test_errors();
	test_approved_dir();
	return check_summary();
}
