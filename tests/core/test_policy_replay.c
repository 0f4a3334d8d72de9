/*
 * Unit tests for policy replay's judgement of one audit row
 * (core/policy_replay.c): rows it skips, changes it decides from the row
 * (rules, an IP literal's address and GeoIP columns), and rows it flags
 * undecidable (a name's addresses, GeoIP, a tunnel's first bytes,
 * credentials, the request itself, an unknown launcher policy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helper_core.h"
#include "core/policy.h"
#include "core/policy_replay.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-replay-XXXXXX";

#define SANDBOXES \
    "sandboxes:\n" \
    "  - id: box\n" \
    "    policy: p\n" \
    "    source: [127.0.0.1/32]\n"
#define CREDS(require) \
    "credentials:\n" \
    "  - name: k\n" \
    "    secret: k\n" \
    "    hosts: [api.example.com]\n" \
    "    require: " require "\n"
#define RULES \
    "      - host: a.example.com\n" \
    "      - host: api.example.com\n" \
    "      - cidr: 10.0.0.0/8\n" \
    "        ports: [443]\n"
#define LAUNCH \
    "  - name: launch\n" \
    "    allow:\n" \
    "      - host: a.example.com\n"

/* The policy in force when the rows were written. */
static const char cur_text[] = SANDBOXES
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    allow_private: [10.0.0.0/8]\n"
    "    allow:\n" RULES
    "      - host: t.example.com\n"
    "        ports: [443]\n"
    "      - host: o.example.com\n"
    "        ports: [22]\n"
    "        opaque: true\n"
    LAUNCH CREDS("false");

/* 0: the same. 1: tunnels, credentials and a new host differ. */
static const char cand1_text[] = SANDBOXES
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    allow_private: [10.0.0.0/8]\n"
    "    allow:\n" RULES
    "      - host: t.example.com\n"
    "        ports: [443]\n"
    "        methods: [GET]\n"
    "        paths: [\"/v1/*\"]\n"
    "      - host: o.example.com\n"
    "        ports: [22]\n"
    "      - host: new.example.com\n"
    LAUNCH CREDS("true");
/* 2: a country rule. */
static const char cand2_text[] = SANDBOXES
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    allow_private: [10.0.0.0/8]\n"
    "    countries: { deny: [KP] }\n"
    "    allow:\n" RULES
    LAUNCH CREDS("false");
/* 3: a narrower allow_private. */
static const char cand3_text[] = SANDBOXES
    "policies:\n"
    "  - name: p\n"
    "    credentials: [k]\n"
    "    allow_private: [10.1.0.0/16]\n"
    "    allow:\n" RULES
    LAUNCH CREDS("false");

/* 4: the same rules in mode: report. */
static const char cand4_text[] = SANDBOXES
    "policies:\n"
    "  - name: p\n"
    "    mode: report\n"
    "    credentials: [k]\n"
    "    allow_private: [10.0.0.0/8]\n"
    "    allow:\n" RULES
    LAUNCH CREDS("false");

struct rcase {
	const char		*name;
	int			 cand;
	struct replay_row	 row;
	enum replay_class	 cls;
	const char		*why;		/* skip, undecidable */
	const char		*now;		/* decided */
	const char		*reason;
	const char		*unchecked;
};

#define ROW(sb, kind, host, port, method, decision, rule, reason) \
	{ sb, kind, host, port, method, method ? "/" : NULL, decision, rule, \
	  reason, NULL, -1 }
#define GEO(host, country) \
	{ "box", "http", host, 443, "GET", "/", "allow", "p:allow[2]", NULL, \
	  country, -1 }

static const struct rcase cases[] = {
	/* mode: ask: an operator's refusal, decided again by the rules. */
	{ "approval denied, same rules", 0, ROW("box", "http",
	    "new.example.com", 80, "GET", "deny", "approval:3",
	    "approval-denied"), REPLAY_SAME, NULL, "deny", "policy-deny",
	    NULL },
	{ "approval timeout, now allowed", 1, ROW("box", "http",
	    "new.example.com", 80, "GET", "deny", "approval:4",
	    "approval-timeout"), REPLAY_DENY_TO_ALLOW, NULL, "allow",
	    "allowed", "addresses" },
	{ "same allow", 0, ROW("box", "http", "a.example.com", 80, "GET",
	    "allow", "p:allow[0]", NULL), REPLAY_SAME, NULL, "allow",
	    "allowed", NULL },
	{ "admin row", 0, ROW("box", "admin", "a.example.com", 80, NULL,
	    "allow", NULL, NULL), REPLAY_SKIP, "not-a-decision", NULL, NULL,
	    NULL },
	{ "error row", 0, ROW("box", "http", "a.example.com", 80, "GET",
	    "error", "p:allow[0]", "upstream-connect-failed"), REPLAY_SKIP,
	    "not-a-decision", NULL, NULL, NULL },
	{ "no sandbox", 0, ROW(NULL, "http", "a.example.com", 80, "GET",
	    "deny", "no-identity", "no-identity"), REPLAY_SKIP, "no-sandbox",
	    NULL, NULL, NULL },
	{ "dns allow", 0, ROW("box", "dns", "a.example.com", -1, "A",
	    "allow", "p:allow[0]", NULL), REPLAY_SAME, NULL, "allow",
	    "allowed", NULL },
	{ "dns type", 0, ROW("box", "dns", "a.example.com", -1, "TXT",
	    "deny", "p:allow[0]", "dns-type-refused"), REPLAY_SAME, NULL,
	    "deny", "dns-type-refused", NULL },
	{ "launcher sandbox", 0, ROW("dyn-1", "http", "a.example.com", 80,
	    "GET", "allow", "launch:allow[0]", NULL), REPLAY_SAME, NULL,
	    "allow", "allowed", NULL },
	{ "launcher sandbox, no rule in its row", 1, ROW("dyn-1", "http",
	    "x.example.com", 80, "GET", "deny", "default-deny", "policy-deny"),
	    REPLAY_UNDECIDABLE, "sandbox-policy", NULL, NULL, NULL },
	{ "credential misuse then", 0, ROW("box", "http", "a.example.com", 80,
	    "GET", "deny", "default-deny", "credential-misuse"),
	    REPLAY_UNDECIDABLE, "credentials", NULL, NULL, NULL },
	{ "rate limited then", 0, ROW("box", "http", "a.example.com", 80,
	    "GET", "deny", "p:allow[0]", "rate-limited"), REPLAY_UNDECIDABLE,
	    "request", NULL, NULL, NULL },
	{ "refused by rules now too", 0, ROW("box", "http", "b.example.com",
	    80, "GET", "deny", "default-deny", "rate-limited"), REPLAY_SAME,
	    NULL, "deny", "policy-deny", NULL },
	{ "protocol then", 0, ROW("box", "connect", "t.example.com", 443,
	    "CONNECT", "deny", "p:allow[3]", "protocol-not-allowed"),
	    REPLAY_UNDECIDABLE, "first-bytes", NULL, NULL, NULL },
	{ "internal then, same allow_private", 0, ROW("box", "http",
	    "a.example.com", 80, "GET", "deny", "p:allow[0]",
	    "destination-ip-prohibited"), REPLAY_SAME, NULL, "deny",
	    "destination-ip-prohibited", NULL },
	{ "tunnel now needs intercept", 1, ROW("box", "connect",
	    "t.example.com", 443, "CONNECT", "allow", "p:allow[3]", NULL),
	    REPLAY_UNDECIDABLE, "first-bytes", NULL, NULL, NULL },
	{ "tunnel no longer opaque", 1, ROW("box", "socks5", "o.example.com",
	    22, NULL, "allow", "p:allow[4]", NULL), REPLAY_UNDECIDABLE,
	    "first-bytes", NULL, NULL, NULL },
	{ "opaque tunnel, same", 0, ROW("box", "socks5", "o.example.com", 22,
	    NULL, "allow", "p:allow[4]", NULL), REPLAY_SAME, NULL, "allow",
	    "allowed", NULL },
	{ "credential now required", 1, ROW("box", "http", "api.example.com",
	    443, "GET", "allow", "p:allow[1]", NULL), REPLAY_UNDECIDABLE,
	    "credentials", NULL, NULL, NULL },
	{ "new host", 1, ROW("box", "http", "new.example.com", 80, "GET",
	    "deny", "default-deny", "policy-deny"), REPLAY_DENY_TO_ALLOW, NULL,
	    "allow", "allowed", "addresses" },
	{ "new host, tunnel", 1, ROW("box", "connect", "new.example.com", 443,
	    "CONNECT", "deny", "default-deny", "policy-deny"),
	    REPLAY_DENY_TO_ALLOW, NULL, "allow", "allowed",
	    "addresses, first bytes" },
	{ "removed host", 1, ROW("box", "http", "b.example.com", 80, "GET",
	    "allow", "p:allow[9]", NULL), REPLAY_ALLOW_TO_DENY, NULL, "deny",
	    "policy-deny", NULL },
	{ "country rule, a name", 2, ROW("box", "http", "a.example.com", 80,
	    "GET", "allow", "p:allow[0]", NULL), REPLAY_UNDECIDABLE, "geoip",
	    NULL, NULL, NULL },
	{ "country rule, an IP in KP", 2, GEO("10.1.2.3", "KP"),
	    REPLAY_ALLOW_TO_DENY, NULL, "deny", "country-deny", NULL },
	{ "country rule, an IP in DE", 2, GEO("10.1.2.3", "DE"), REPLAY_SAME,
	    NULL, "allow", "allowed", NULL },
	{ "country rule, an IP, no GeoIP", 2, GEO("10.1.2.3", NULL),
	    REPLAY_UNDECIDABLE, "geoip", NULL, NULL, NULL },
	{ "allow_private narrower, an IP outside", 3, GEO("10.9.9.9", NULL),
	    REPLAY_ALLOW_TO_DENY, NULL, "deny", "destination-ip-prohibited",
	    NULL },
	{ "allow_private narrower, an IP inside", 3, GEO("10.1.2.3", NULL),
	    REPLAY_SAME, NULL, "allow", "allowed", NULL },
	{ "report mode now: passes, reported", 4, ROW("box", "http",
	    "b.example.com", 80, "GET", "deny", "default-deny", "policy-deny"),
	    REPLAY_DENY_TO_ALLOW, NULL, "report", "policy-deny", "addresses" },
	{ "report mode then, enforced now", 0, ROW("box", "http",
	    "b.example.com", 80, "GET", "report", "default-deny",
	    "policy-deny"), REPLAY_ALLOW_TO_DENY, NULL, "deny", "policy-deny",
	    NULL },
	{ "allow_private narrower, a name", 3, ROW("box", "http",
	    "a.example.com", 80, "GET", "allow", "p:allow[0]", NULL),
	    REPLAY_UNDECIDABLE, "addresses", NULL, NULL, NULL },
};

static struct policy *
load(const char *name, const char *text)
{
	return coretest_load(coretest_tmpfile(name, text));
}

int
main(void)
{
	struct policy *cur, *cand[5];
	struct replay_result res;
	size_t i;
	int k;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	cur = load("cur.yaml", cur_text);
	cand[0] = load("cand0.yaml", cur_text);
	cand[1] = load("cand1.yaml", cand1_text);
	cand[2] = load("cand2.yaml", cand2_text);
	cand[3] = load("cand3.yaml", cand3_text);
	cand[4] = load("cand4.yaml", cand4_text);
	CHECK(cur != NULL);
	for (k = 0; k < 5; k++)
		CHECK_MSG(cand[k] != NULL, "candidate %d", k);
	if (cur == NULL || !cand[0] || !cand[1] || !cand[2] || !cand[3] ||
	    !cand[4])
		return check_summary();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rcase *c = &cases[i];

		policy_replay_row(cand[c->cand], cur, &c->row, &res);
		CHECK_MSG(res.cls == c->cls, "%s: class %d, want %d (%s)",
		    c->name, res.cls, c->cls, res.detail ? res.detail : "-");
		if (c->why != NULL)
			CHECK_MSG(res.why != NULL && strcmp(res.why, c->why) == 0,
			    "%s: why %s, want %s", c->name, res.why ? res.why :
			    "(null)", c->why);
		if (c->now != NULL) {
			CHECK_MSG(res.now != NULL && strcmp(res.now, c->now) == 0,
			    "%s: now %s, want %s", c->name, res.now ? res.now :
			    "(null)", c->now);
			CHECK_MSG(res.reason != NULL &&
			    strcmp(res.reason, c->reason) == 0,
			    "%s: reason %s, want %s", c->name, res.reason ?
			    res.reason : "(null)", c->reason);
		}
		CHECK_MSG((res.unchecked == NULL && c->unchecked == NULL) ||
		    (res.unchecked != NULL && c->unchecked != NULL &&
		    strcmp(res.unchecked, c->unchecked) == 0),
		    "%s: unchecked %s", c->name, res.unchecked ? res.unchecked :
		    "(null)");
		if (res.cls == REPLAY_UNDECIDABLE)
			CHECK_MSG(res.now == NULL && res.detail != NULL,
			    "%s: an undecidable row has no decision", c->name);
	}
	policy_unref(cur);
	for (k = 0; k < 5; k++)
		policy_unref(cand[k]);
	return check_summary();
}
