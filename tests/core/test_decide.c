/*
 * Unit tests for the one decision (core/decide.c): each stage denies on its
 * own, the stages run in the order docs/policy.md gives (a case with
 * several faults names the first), every listener's variant (HTTP,
 * CONNECT, SOCKS5, tunnel requests, DNS, offline), the credential binding
 * and interception it returns, and the address stage run at once or later.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helper_core.h"
#include "core/decide.h"
#include "core/netaddr.h"
#include "core/policy.h"
#include "core/reason.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-decide-XXXXXX";

static const char policy_text[] =
    "sandboxes:\n"
    "  - id: box\n"
    "    policy: p\n"
    "    source: [127.0.0.1/32]\n"
    "    token_sha256: \"65dcf16ea3dfa49069628089eb4a75483070f5584b2a21ee64912b5f621f12da\"\n"
    "  - id: learner\n"
    "    policy: r\n"
    "    source: [127.0.0.2/32]\n"
    "  - id: web\n"
    "    policy: p\n"
    "    ingress: { address: 127.0.0.1, ports: [8000], token_sha256: \"65dcf16ea3dfa49069628089eb4a75483070f5584b2a21ee64912b5f621f12da\" }\n"
    "  - id: pub\n"
    "    policy: p\n"
    "    ingress: { address: 127.0.0.1, ports: [8000], public: true }\n"
    "policies:\n"
    "  - name: p\n"
    "    credentials: [gh]\n"
    "    dns_types: [A, AAAA]\n"
    "    allow:\n"
    "      - host: open.example.com\n"		/* p:allow[0] */
    "      - host: seen.example.com\n"		/* p:allow[1] */
    "        tls: intercept\n"
    "      - host: api.example.com\n"		/* p:allow[2]: credential bound */
    "      - host: paths.example.com\n"		/* p:allow[3] */
    "        tls: intercept\n"
    "        methods: [GET]\n"
    "        paths: [\"/v1/*\"]\n"
    "      - cidr: 127.0.0.0/8\n"			/* p:allow[4] */
    "    deny:\n"
    "      - host: bad.example.com\n"		/* p:deny[0] */
    "  - name: r\n"
    "    mode: report\n"
    "    allow:\n"
    "      - host: open.example.com\n"
    "credentials:\n"
    "  - name: gh\n"
    "    secret: gh-token\n"
    "    hosts: [api.example.com]\n";

/* The placeholder finder the gateway passes down, standing in for cred_phs. */
static int
find_ph(void *arg, const char *host, char *cred, size_t len)
{
	(void)arg;
	if (strstr(host, "sgph0") == NULL)
		return 0;
	snprintf(cred, len, "gh");
	return 1;
}

struct dcase {
	const char		*name;
	enum decide_listener	 l;
	const char		*sandbox;	/* NULL: no identity */
	const char		*host;
	uint16_t		 port;
	const char		*method, *path;
	int			 audit_down, keeper_down;
	uint16_t		 qtype, qclass;
	/* what must come out */
	enum sg_reason		 reason;
	enum sg_verdict		 verdict;
	const char		*rule;
	const char		*target;	/* the row's host */
	int			 intercept, cred_bound;
};

static const struct dcase cases[] = {
	/* allowed, on each listener that connects */
	{ "http", DECIDE_HTTP, "box", "Open.Example.COM.", 80, "GET", "/", 0, 0, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[0]", "open.example.com", 0, 0 },
	{ "connect", DECIDE_CONNECT, "box", "open.example.com", 443, NULL, NULL, 0, 0, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[0]", "open.example.com", 0, 0 },
	{ "socks", DECIDE_SOCKS5, "box", "seen.example.com", 443, NULL, NULL, 0, 0, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[1]", "seen.example.com", 1, 0 },
	{ "bound", DECIDE_CONNECT, "box", "api.example.com", 443, NULL, NULL, 0, 0, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[2]", "api.example.com", 1, 1 },
	/* the stages' order: the first fault wins */
	{ "audit first", DECIDE_HTTP, NULL, "bad host", 80, "GET", "/", 1, 1, 0, 0,
	    REASON_AUDIT_UNAVAILABLE, VERDICT_ERROR, "audit", "bad\\x20host", 0, 0 },
	{ "identity before name", DECIDE_HTTP, NULL, "bad host", 80, "GET", "/", 0, 0, 0, 0,
	    REASON_NO_IDENTITY, VERDICT_DENY, "no-identity", "bad\\x20host", 0, 0 },
	{ "name before credential", DECIDE_HTTP, "box", "sgph0 x", 80, "GET", "/", 0, 0, 0, 0,
	    REASON_INVALID_HOST, VERDICT_DENY, "default-deny", "sgph0\\x20x", 0, 0 },
	{ "credential before rules", DECIDE_HTTP, "box", "sgph0.bad.example.com", 80, "GET", "/", 0, 0, 0, 0,
	    REASON_CRED_MISUSE, VERDICT_DENY, "default-deny", "sgph0.bad.example.com", 0, 0 },
	{ "rules before keeper", DECIDE_CONNECT, "box", "bad.example.com", 443, NULL, NULL, 0, 1, 0, 0,
	    REASON_POLICY_DENY, VERDICT_DENY, "p:deny[0]", "bad.example.com", 0, 0 },
	/* each stage alone */
	{ "port 0", DECIDE_CONNECT, "box", "open.example.com", 0, NULL, NULL, 0, 0, 0, 0,
	    REASON_INVALID_HOST, VERDICT_DENY, "default-deny", "open.example.com", 0, 0 },
	{ "no rule", DECIDE_HTTP, "box", "other.example.com", 80, "GET", "/", 0, 0, 0, 0,
	    REASON_POLICY_DENY, VERDICT_DENY, "default-deny", "other.example.com", 0, 0 },
	{ "method", DECIDE_HTTP, "box", "paths.example.com", 443, "POST", "/v1/x", 0, 0, 0, 0,
	    REASON_POLICY_DENY, VERDICT_DENY, "default-deny", "paths.example.com", 0, 0 },
	{ "path", DECIDE_HTTP, "box", "paths.example.com", 443, "GET", "/v1/x", 0, 0, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[3]", "paths.example.com", 1, 0 },
	{ "ambiguous path", DECIDE_HTTP, "box", "paths.example.com", 443, "GET", "/v1/a;b", 0, 0, 0, 0,
	    REASON_AMBIGUOUS_PATH, VERDICT_DENY, "p:allow[3]", "paths.example.com", 0, 0 },
	/* keeper: only a tunnel that will be intercepted needs it */
	{ "keeper connect", DECIDE_CONNECT, "box", "seen.example.com", 443, NULL, NULL, 0, 1, 0, 0,
	    REASON_KEEPER_UNAVAILABLE, VERDICT_ERROR, "p:allow[1]", "seen.example.com", 1, 0 },
	{ "keeper socks bound", DECIDE_SOCKS5, "box", "api.example.com", 443, NULL, NULL, 0, 1, 0, 0,
	    REASON_KEEPER_UNAVAILABLE, VERDICT_ERROR, "p:allow[2]", "api.example.com", 1, 1 },
	{ "keeper passthrough", DECIDE_CONNECT, "box", "open.example.com", 443, NULL, NULL, 0, 1, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[0]", "open.example.com", 0, 0 },
	{ "keeper request", DECIDE_HTTP, "box", "seen.example.com", 80, "GET", "/", 0, 1, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[1]", "seen.example.com", 1, 0 },
	/* report mode: the denial passes, named */
	{ "report", DECIDE_CONNECT, "learner", "other.example.com", 443, NULL, NULL, 0, 0, 0, 0,
	    REASON_NONE, VERDICT_REPORT, "default-deny", "other.example.com", 0, 0 },
	{ "report keeps identity", DECIDE_CONNECT, NULL, "other.example.com", 443, NULL, NULL, 0, 0, 0, 0,
	    REASON_NO_IDENTITY, VERDICT_DENY, "no-identity", "other.example.com", 0, 0 },
	/* DNS: any port, only IN, only dns_types, no IP written as a name */
	{ "dns", DECIDE_DNS, "box", "open.example.com", 0, NULL, NULL, 0, 0, 1, 1,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[0]", "open.example.com", 0, 0 },
	{ "dns type", DECIDE_DNS, "box", "open.example.com", 0, NULL, NULL, 0, 0, 16, 1,
	    REASON_DNS_TYPE, VERDICT_DENY, "default-deny", "open.example.com", 0, 0 },
	{ "dns class", DECIDE_DNS, "box", "open.example.com", 0, NULL, NULL, 0, 0, 1, 3,
	    REASON_DNS_TYPE, VERDICT_DENY, "default-deny", "open.example.com", 0, 0 },
	{ "dns ip", DECIDE_DNS, "box", "127.0.0.1", 0, NULL, NULL, 0, 0, 1, 1,
	    REASON_INVALID_HOST, VERDICT_DENY, "default-deny", "127.0.0.1", 0, 0 },
	{ "dns deny", DECIDE_DNS, "box", "bad.example.com", 0, NULL, NULL, 0, 0, 1, 1,
	    REASON_POLICY_DENY, VERDICT_DENY, "p:deny[0]", "bad.example.com", 0, 0 },
	{ "dns placeholder", DECIDE_DNS, "box", "sgph0.open.example.com", 0, NULL, NULL, 0, 0, 1, 1,
	    REASON_CRED_MISUSE, VERDICT_DENY, "default-deny", "sgph0.open.example.com", 0, 0 },
	{ "dns audit", DECIDE_DNS, "box", "open.example.com", 0, NULL, NULL, 1, 0, 1, 1,
	    REASON_AUDIT_UNAVAILABLE, VERDICT_ERROR, "audit", "open.example.com", 0, 0 },
	/* offline (policy explain) needs no keeper */
	{ "offline", DECIDE_OFFLINE, "box", "seen.example.com", 443, NULL, NULL, 0, 1, 0, 0,
	    REASON_NONE, VERDICT_ALLOW, "p:allow[1]", "seen.example.com", 1, 0 },
};

static void
env_for(struct decide_env *env, const struct policy *p, int audit_down,
    int keeper_down)
{
	memset(env, 0, sizeof(*env));
	env->pol = p;
	env->audit_refuses = audit_down;
	env->keeper_up = !keeper_down;
	env->cred_in_name = find_ph;
}

static void
test_cases(const struct policy *p)
{
	struct policy_identity id;
	struct decide_env env;
	struct decide_q q;
	struct decision d;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct dcase *c = &cases[i];

		env_for(&env, p, c->audit_down, c->keeper_down);
		memset(&q, 0, sizeof(q));
		q.listener = c->l;
		if (c->sandbox != NULL) {
			CHECK(policy_identity_by_id(p, c->sandbox, &id) == 0);
			q.id = &id;
		}
		q.host = c->host;
		q.hostlen = strlen(c->host);
		q.port = c->port;
		q.method = c->method;
		q.path = c->path;
		q.qtype = c->qtype;
		q.qclass = c->qclass;
		CHECK_MSG(decide(&env, &q, &d) == c->reason,
		    "%s: reason %s", c->name, reason_word(d.reason) ?
		    reason_word(d.reason) : "none");
		CHECK_MSG(d.reason == c->reason && d.verdict == c->verdict,
		    "%s: verdict %s", c->name, verdict_word(d.verdict) ?
		    verdict_word(d.verdict) : "none");
		CHECK_MSG(d.v.allow == (c->reason == REASON_NONE),
		    "%s: allow %d", c->name, d.v.allow);
		CHECK_MSG(strcmp(d.v.rule, c->rule) == 0, "%s: rule %s",
		    c->name, d.v.rule);
		CHECK_MSG(strcmp(d.target.host, c->target) == 0,
		    "%s: target %s", c->name, d.target.host);
		if (c->reason == REASON_NONE || c->reason ==
		    REASON_KEEPER_UNAVAILABLE) {
			CHECK_MSG(d.intercept == c->intercept,
			    "%s: intercept %d", c->name, d.intercept);
			CHECK_MSG(d.cred_bound == c->cred_bound,
			    "%s: cred_bound %d", c->name, d.cred_bound);
		}
		if (c->reason == REASON_CRED_MISUSE)
			CHECK_STR(d.cred, "gh");
	}
}

/* A request inside a tunnel: the tunnel's target, and its Host must name it. */
static void
test_tunnel(const struct policy *p)
{
	static const struct {
		const char	*host;		/* NULL: no Host; "!": unparseable */
		uint16_t	 port;
		const char	*abs;		/* NULL: origin form */
		enum sg_reason	 reason;
		const char	*rule;
	} tc[] = {
		{ "paths.example.com", 0, NULL, REASON_NONE, "p:allow[3]" },
		{ "PATHS.example.com.", 443, NULL, REASON_NONE, "p:allow[3]" },
		{ "paths.example.com", 8443, NULL, REASON_HOST_MISMATCH, "tun-rule" },
		{ "open.example.com", 0, NULL, REASON_HOST_MISMATCH, "tun-rule" },
		{ NULL, 0, NULL, REASON_HOST_MISMATCH, "tun-rule" },
		{ "!", 0, NULL, REASON_HOST_MISMATCH, "tun-rule" },
		{ "paths.example.com", 0, "open.example.com", REASON_HOST_MISMATCH, "tun-rule" },
		{ "paths.example.com", 0, "paths.example.com", REASON_NONE, "p:allow[3]" },
	};
	struct decide_authority ha, aa;
	struct policy_identity id;
	struct policy_target tun;
	struct decide_env env;
	struct decide_q q;
	struct decision d;
	size_t i;

	CHECK(policy_identity_by_id(p, "box", &id) == 0);
	CHECK(policy_target_init(&tun, "paths.example.com", 17, 443) == 0);
	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		env_for(&env, p, 0, 0);
		memset(&q, 0, sizeof(q));
		q.listener = DECIDE_TUNNEL;
		q.id = &id;
		q.target = &tun;
		q.tunnel_rule = "tun-rule";
		q.method = "GET";
		q.path = "/v1/x";
		memset(&ha, 0, sizeof(ha));
		if (tc[i].host != NULL) {
			if (strcmp(tc[i].host, "!") != 0) {
				ha.host = tc[i].host;
				ha.len = strlen(tc[i].host);
				ha.port = tc[i].port;
			}
			q.tunnel_host = &ha;
		}
		if (tc[i].abs != NULL) {
			aa.host = tc[i].abs;
			aa.len = strlen(tc[i].abs);
			aa.port = 0;
			q.tunnel_abs = &aa;
		}
		CHECK_MSG(decide(&env, &q, &d) == tc[i].reason,
		    "tunnel case %zu: %s", i, reason_word(d.reason) ?
		    reason_word(d.reason) : "none");
		CHECK_MSG(strcmp(d.v.rule, tc[i].rule) == 0,
		    "tunnel case %zu: rule %s", i, d.v.rule);
		CHECK_STR(d.target.host, "paths.example.com");
	}
}

/*
 * Other readings of a request (a method override, a WebDAV Destination):
 * each must pass the rules too; the first refused names the row; a
 * reported one (mode: report) reports.
 */
static void
test_alt(const struct policy *p)
{
	static const struct {
		const char	*method, *path;	/* the reading; NULL: as written */
		enum sg_reason	 reason;
		const char	*rule;
	} tc[] = {
		{ NULL, NULL, REASON_NONE, "p:allow[3]" },
		{ "GET", "/v1/other", REASON_NONE, "p:allow[3]" },
		{ "DELETE", NULL, REASON_POLICY_DENY, "default-deny" },
		{ "get", NULL, REASON_POLICY_DENY, "default-deny" },
		{ NULL, "/v2/x", REASON_POLICY_DENY, "default-deny" },
		{ NULL, "/v1/%2e%2e/v2/x", REASON_AMBIGUOUS_PATH, "p:allow[3]" },
		{ NULL, "/v1/../v2/x", REASON_POLICY_DENY, "default-deny" },
	};
	struct policy_identity id;
	struct policy_target tun;
	struct decide_alt alt[2];
	struct decide_env env;
	struct decide_q q;
	struct decision d;
	size_t i;

	CHECK(policy_identity_by_id(p, "box", &id) == 0);
	CHECK(policy_target_init(&tun, "paths.example.com", 17, 443) == 0);
	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		env_for(&env, p, 0, 0);
		memset(&q, 0, sizeof(q));
		q.listener = DECIDE_HTTP;
		q.id = &id;
		q.target = &tun;
		q.method = "GET";
		q.path = "/v1/x";
		/* The allowed reading first: the refused one still refuses. */
		alt[0].method = "GET";
		alt[0].path = "/v1/y";
		alt[1].method = tc[i].method != NULL ? tc[i].method : q.method;
		alt[1].path = tc[i].path != NULL ? tc[i].path : q.path;
		q.alt = alt;
		q.n_alt = 2;
		CHECK_MSG(decide(&env, &q, &d) == tc[i].reason,
		    "alt case %zu: %s", i, reason_word(d.reason) ?
		    reason_word(d.reason) : "none");
		CHECK_MSG(strcmp(d.v.rule, tc[i].rule) == 0,
		    "alt case %zu: rule %s", i, d.v.rule);
		CHECK(d.v.allow == (tc[i].reason == REASON_NONE));
	}
}

static void
addr(struct netaddr *a, const char *s)
{
	CHECK(netaddr_parse(s, strlen(s), a) == 0);
}

/* Every address, given at once or later; the row names the first refused. */
static void
test_addrs(const struct policy *p)
{
	struct policy_identity id;
	struct decide_env env;
	struct decide_q q;
	struct decision d, later;
	struct netaddr a[3], want;
	char buf[NETADDR_STRLEN];

	CHECK(policy_identity_by_id(p, "box", &id) == 0);
	env_for(&env, p, 0, 0);
	addr(&a[0], "151.101.0.223");
	addr(&a[1], "169.254.169.254");
	addr(&a[2], "::1");
	memset(&q, 0, sizeof(q));
	q.listener = DECIDE_CONNECT;
	q.id = &id;
	q.host = "open.example.com";
	q.hostlen = strlen(q.host);
	q.port = 443;

	/* one public address: allowed */
	q.addrs = a;
	q.n_addrs = 1;
	CHECK(decide(&env, &q, &d) == REASON_NONE);
	CHECK(d.verdict == VERDICT_ALLOW && !d.has_refused);

	/* a link-local among them denies the whole name, and is named */
	q.n_addrs = 3;
	CHECK(decide(&env, &q, &d) == REASON_IP_PROHIBITED);
	CHECK(d.verdict == VERDICT_DENY && d.v.allow == 0);
	CHECK_STR(d.v.rule, "p:allow[0]");
	CHECK(d.has_refused && netaddr_cmp(&d.refused, &a[1]) == 0);

	/* the same, later: the name stage first, then the addresses */
	q.n_addrs = 0;
	CHECK(decide(&env, &q, &later) == REASON_NONE);
	CHECK(decide_addrs(&env, &id, a, 3, &later) == REASON_IP_PROHIBITED);
	CHECK(later.has_refused && netaddr_cmp(&later.refused, &a[1]) == 0);
	CHECK(later.verdict == VERDICT_DENY);

	/* an internal IP written as the target: the target itself is named */
	q.host = "169.254.169.254";
	q.hostlen = strlen(q.host);
	q.addrs = &a[1];
	q.n_addrs = 1;
	CHECK(decide(&env, &q, &d) == REASON_POLICY_DENY);	/* no cidr rule */
	q.host = "127.0.0.1";
	q.hostlen = strlen(q.host);
	addr(&want, "127.0.0.1");
	q.addrs = &want;
	/* 127.0.0.0/8 is allowed by a cidr rule, but no allow_private covers it */
	CHECK(decide(&env, &q, &d) == REASON_IP_PROHIBITED);
	CHECK_MSG(d.has_refused && netaddr_cmp(&d.refused, &want) == 0,
	    "refused %s", netaddr_ntop(&d.refused, buf, sizeof(buf)));
}

/* Toward a sandbox: which one, its port, its token (docs/ingress.md). */
static void
test_ingress(const struct policy *p)
{
	static const struct {
		const char	*id;
		uint16_t	 port;
		const char	*token;		/* NULL: none */
		int		 malformed, audit_down;
		enum sg_reason	 reason;
		int		 has_ident;
	} tc[] = {
		{ "web", 8000, "tok-1", 0, 0, REASON_NONE, 1 },
		{ "web", 8000, NULL, 0, 0, REASON_INGRESS_TOKEN_MISSING, 1 },
		{ "web", 8000, "tok-2", 0, 0, REASON_INGRESS_TOKEN_INVALID, 1 },
		{ "web", 8000, "tok-1", 1, 0, REASON_INGRESS_TOKEN_INVALID, 1 },
		{ "web", 8001, "tok-1", 0, 0, REASON_INGRESS_PORT, 1 },
		{ "box", 8000, "tok-1", 0, 0, REASON_INGRESS_UNKNOWN_SANDBOX, 0 },
		{ "nosuch", 8000, "tok-1", 0, 0, REASON_INGRESS_UNKNOWN_SANDBOX, 0 },
		{ NULL, 8000, "tok-1", 0, 0, REASON_INGRESS_UNKNOWN_SANDBOX, 0 },
		{ "pub", 8000, NULL, 0, 0, REASON_NONE, 1 },
		{ "pub", 8000, "junk", 1, 0, REASON_NONE, 1 },
		{ "pub", 9, NULL, 0, 0, REASON_INGRESS_PORT, 1 },
		{ "web", 8000, "tok-1", 0, 1, REASON_AUDIT_UNAVAILABLE, 0 },
	};
	struct policy_target t;
	struct decide_env env;
	struct decide_q q;
	struct decision d;
	size_t i;

	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		env_for(&env, p, tc[i].audit_down, 0);
		memset(&t, 0, sizeof(t));
		snprintf(t.host, sizeof(t.host), "%u-%s.sandbox.test",
		    tc[i].port, tc[i].id ? tc[i].id : "-");
		t.port = tc[i].port;
		memset(&q, 0, sizeof(q));
		q.listener = DECIDE_INGRESS;
		q.target = &t;
		q.ingress_id = tc[i].id;
		q.token = tc[i].token;
		q.token_len = tc[i].token ? strlen(tc[i].token) : 0;
		q.token_malformed = tc[i].malformed;
		CHECK_MSG(decide(&env, &q, &d) == tc[i].reason,
		    "ingress case %zu: %s", i, reason_word(d.reason) ?
		    reason_word(d.reason) : "none");
		CHECK_MSG(d.v.allow == (tc[i].reason == REASON_NONE),
		    "ingress case %zu: allow %d", i, d.v.allow);
		CHECK_MSG(d.has_ident == tc[i].has_ident,
		    "ingress case %zu: has_ident %d", i, d.has_ident);
		if (d.has_ident)
			CHECK_STR(d.ident.sandbox, tc[i].id);
		CHECK_STR(d.v.rule, tc[i].reason == REASON_AUDIT_UNAVAILABLE ?
		    "audit" : "ingress");
	}
}

/* The identity stage: what a client presents decides, else its source. */
static void
test_identify(const struct policy *p)
{
	static const struct {
		const char	*src;		/* NULL: none */
		int		 presented;
		const char	*id, *token;	/* id NULL: malformed */
		enum sg_reason	 reason;
		const char	*sandbox;
	} tc[] = {
		{ "127.0.0.9", 1, "box", "tok-1", REASON_NONE, "box" },
		{ NULL, 1, "box", "tok-1", REASON_NONE, "box" },
		/* a wrong one decides, even from the sandbox's own source */
		{ "127.0.0.1", 1, "box", "tok-2", REASON_AUTH_FAILED, NULL },
		{ "127.0.0.1", 1, "box", "", REASON_AUTH_FAILED, NULL },
		{ "127.0.0.1", 1, NULL, NULL, REASON_AUTH_FAILED, NULL },
		{ "127.0.0.2", 1, "learner", "tok-1", REASON_AUTH_FAILED, NULL },
		{ "127.0.0.1", 1, "nosuch", "tok-1", REASON_AUTH_FAILED, NULL },
		/* without one, the source */
		{ "127.0.0.1", 0, NULL, NULL, REASON_NONE, "box" },
		{ "127.0.0.2", 0, NULL, NULL, REASON_NONE, "learner" },
		{ "127.0.0.9", 0, NULL, NULL, REASON_NO_IDENTITY, NULL },
		{ "::1", 0, NULL, NULL, REASON_NO_IDENTITY, NULL },
		{ NULL, 0, NULL, NULL, REASON_NO_IDENTITY, NULL },
	};
	struct policy_identity id;
	struct decide_cred c;
	struct netaddr src;
	enum sg_reason r;
	size_t i;

	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		memset(&c, 0, sizeof(c));
		if (tc[i].id != NULL) {
			c.id = tc[i].id;
			c.idlen = strlen(tc[i].id);
			c.token = tc[i].token;
			c.tokenlen = strlen(tc[i].token);
		}
		if (tc[i].src != NULL)
			addr(&src, tc[i].src);
		memset(&id, 0, sizeof(id));
		r = decide_identify(p, tc[i].src ? &src : NULL,
		    tc[i].presented ? &c : NULL, &id);
		CHECK_MSG(r == tc[i].reason, "identify case %zu: %s", i,
		    reason_word(r) ? reason_word(r) : "none");
		if (tc[i].sandbox != NULL)
			CHECK_STR(id.sandbox, tc[i].sandbox);
	}
}

/* A tunnel's ClientHello: its SNI names the tunnel, or there is none for an IP. */
static void
test_sni(void)
{
	struct policy_target name, ip;

	CHECK(policy_target_init(&name, "api.example.com", 15, 443) == 0);
	CHECK(policy_target_init(&ip, "198.18.0.7", 10, 443) == 0);
	CHECK(decide_sni(&name, 1, "api.example.com", 15) == REASON_NONE);
	CHECK(decide_sni(&name, 1, "API.Example.com.", 16) == REASON_NONE);
	CHECK(decide_sni(&name, 1, "evil.example.com", 16) == REASON_SNI_MISMATCH);
	CHECK(decide_sni(&name, 1, "api.example.com.evil", 20) ==
	    REASON_SNI_MISMATCH);
	CHECK(decide_sni(&name, 1, "198.18.0.7", 10) == REASON_SNI_MISMATCH);
	CHECK(decide_sni(&name, 1, "api example", 11) == REASON_SNI_MISMATCH);
	CHECK(decide_sni(&name, 0, NULL, 0) == REASON_SNI_MISMATCH);
	CHECK(decide_sni(&ip, 0, NULL, 0) == REASON_NONE);
	CHECK(decide_sni(&ip, 1, "198.18.0.7", 10) == REASON_SNI_MISMATCH);
	CHECK(decide_sni(&ip, 1, "api.example.com", 15) == REASON_SNI_MISMATCH);
}

static size_t
opt_len(const char *s)
{
	return s != NULL ? strlen(s) : 0;
}

/*
 * The first-bytes stage: every branch, what report mode relaxes and what
 * it never does (a malformed ClientHello, a wrong SNI, an address as SNI).
 */
static void
test_first_bytes(void)
{
	struct policy_target name, ip;
	struct policy_verdict v;
	struct decide_bytes b;
	int icpt;

#define FB(kind_, hello_, sni_, names_, cred_)				\
	do {								\
		memset(&b, 0, sizeof(b));				\
		b.kind = (kind_);					\
		b.hello_ok = (hello_);					\
		b.has_sni = (sni_) != NULL;				\
		b.sni = (sni_);						\
		b.sni_len = opt_len(sni_);				\
		b.sni_names = (names_);					\
		b.cred_bound = (cred_);					\
	} while (0)
	CHECK(policy_target_init(&name, "api.example.com", 15, 443) == 0);
	CHECK(policy_target_init(&ip, "198.18.0.7", 10, 443) == 0);

	/* HTTP: always on to its per-request decisions. */
	memset(&v, 0, sizeof(v));
	FB(DECIDE_BYTES_HTTP, 0, NULL, 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 0);

	/* Neither TLS nor HTTP: opaque only; report mode passes and says so. */
	FB(DECIDE_BYTES_OTHER, 0, NULL, 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_PROTOCOL_DENY);
	v.opaque = 1;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	memset(&v, 0, sizeof(v));
	v.report_mode = 1;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK(v.report == REASON_PROTOCOL_DENY);

	/* A ClientHello that does not parse: refused, report mode or not. */
	memset(&v, 0, sizeof(v));
	v.report_mode = 1;
	v.opaque = 1;
	FB(DECIDE_BYTES_TLS, 0, NULL, 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_PROTOCOL_DENY);
	CHECK(v.report == REASON_NONE);

	/* CONNECT: the SNI must name the tunnel, even in report mode. */
	FB(DECIDE_BYTES_TLS, 1, "evil.example.com", 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_SNI_MISMATCH);
	FB(DECIDE_BYTES_TLS, 1, NULL, 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_SNI_MISMATCH);
	FB(DECIDE_BYTES_TLS, 1, "198.18.0.7", 0, 0);
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_SNI_MISMATCH);
	FB(DECIDE_BYTES_TLS, 1, NULL, 0, 0);
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_NONE);
	CHECK(v.report == REASON_NONE);

	/* Passed through, or intercepted: by the rule or a bound credential. */
	memset(&v, 0, sizeof(v));
	FB(DECIDE_BYTES_TLS, 1, "API.example.com.", 0, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 0);
	v.inspect = 1;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) ==
	    REASON_NEEDS_INTERCEPT);
	v.tls = POLICY_TLS_INTERCEPT;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 1);
	v.tls = 0;
	FB(DECIDE_BYTES_TLS, 1, "api.example.com", 0, 1);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 1);
	FB(DECIDE_BYTES_TLS, 1, "api.example.com", 0, 0);
	v.report_mode = 1;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 0);
	CHECK(v.report == REASON_NEEDS_INTERCEPT);

	/* Transparent: the SNI is the name; an address there is not one. */
	memset(&v, 0, sizeof(v));
	FB(DECIDE_BYTES_TLS, 1, "198.18.0.7", 1, 0);
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_INVALID_HOST);
	v.report_mode = 1;
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_INVALID_HOST);
	memset(&v, 0, sizeof(v));
	FB(DECIDE_BYTES_TLS, 1, "api.example.com", 1, 0);
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) == REASON_NONE);
	v.inspect = 1;
	CHECK(decide_first_bytes(&v, &name, &b, &icpt) ==
	    REASON_NEEDS_INTERCEPT);
	/* ... and without SNI the address alone passes, opaque only. */
	memset(&v, 0, sizeof(v));
	FB(DECIDE_BYTES_TLS, 1, NULL, 1, 0);
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_SNI_MISSING);
	v.opaque = 1;
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_NONE);
	CHECK_INT(icpt, 0);
	memset(&v, 0, sizeof(v));
	v.report_mode = 1;
	CHECK(decide_first_bytes(&v, &ip, &b, &icpt) == REASON_NONE);
	CHECK(v.report == REASON_SNI_MISSING);
#undef FB
}

int
main(void)
{
	struct policy *p;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	p = coretest_load(coretest_tmpfile("decide.yaml", policy_text));
	CHECK(p != NULL);
	if (p != NULL) {
		test_cases(p);
		test_tunnel(p);
		test_alt(p);
		test_addrs(p);
		test_ingress(p);
		test_identify(p);
		policy_unref(p);
	}
	test_sni();
	test_first_bytes();
	return check_summary();
}
