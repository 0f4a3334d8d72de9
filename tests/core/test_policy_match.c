/*
 * Unit tests for core/policy_match.c over YAML fixtures (data/match_*.yaml)
 * loaded with policy_load_paths(): targets, decisions (SPEC §4 steps 1-4),
 * identification by source and token, and the name index checked against
 * a plain scan of the rules on a generated policy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/policy_int.h"
#include "core/reason.h"

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

struct target_case {
	const char	*in;
	int		 rc;
	int		 is_ip;
	const char	*host;
};

static const struct target_case target_cases[] = {
	{ "Example.COM.", 0, 0, "example.com" },
	{ "b\xc3\xbc" "cher.example", 0, 0, "xn--bcher-kva.example" },
	{ "[::1]", 0, 1, "::1" },
	{ "::1", 0, 1, "::1" },
	{ "[2001:DB8:0::1]", 0, 1, "2001:db8::1" },
	{ "[::ffff:169.254.169.254]", 0, 1, "169.254.169.254" },
	{ "0x7f.1", 0, 1, "127.0.0.1" },
	{ "2130706433", 0, 1, "127.0.0.1" },
	{ "0177.0.0.1", 0, 1, "127.0.0.1" },
	{ "127.0.0.1.", 0, 1, "127.0.0.1" },
	{ "", -1, 0, NULL },
	{ "[::1]x", -1, 0, NULL },
	{ "[1.2.3.4]", -1, 0, NULL },
	{ "[example.com]", -1, 0, NULL },
	{ "fe80::1%eth0", -1, 0, NULL },
	{ "example.com:443", -1, 0, NULL },
	{ "1.2.3.999", -1, 0, NULL },
	{ "foo.123", -1, 0, NULL },
	{ "a b.com", -1, 0, NULL },
	{ "a%2eb.com", -1, 0, NULL },
	{ "a/b.com", -1, 0, NULL },
	{ "user@example.com", -1, 0, NULL },
	{ "\x01" "example.com", -1, 0, NULL },
	{ "example.com\r\n", -1, 0, NULL },
	{ "a..b", -1, 0, NULL },
};

static void
test_targets(void)
{
	struct policy_target t;
	char big[1100];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(target_cases) / sizeof(target_cases[0]); i++) {
		const struct target_case *c = &target_cases[i];

		rc = policy_target_init(&t, c->in, strlen(c->in), 8080);
		CHECK_MSG(rc == c->rc, "\"%s\": rc %d", c->in, rc);
		CHECK_INT(t.port, 8080);
		if (rc != 0 || c->rc != 0) {
			CHECK_STR(t.host, "");
			continue;
		}
		CHECK_MSG(t.is_ip == c->is_ip, "\"%s\"", c->in);
		CHECK_STR(t.host, c->host);
	}
	memset(big, 'a', sizeof(big));
	for (i = 1; i < sizeof(big); i += 2)
		big[i] = '.';
	CHECK_INT(policy_target_init(&t, big, 301, 80), -1);
	CHECK_INT(policy_target_init(&t, big, sizeof(big), 80), -1);
	CHECK_INT(policy_target_init(&t, NULL, 0, 80), -1);
}

/* How a case names its client: a sandbox id, or one of these. */
#define NO_ID		NULL
#define BAD_POLICY	"!bad-policy"

struct decide_case {
	const char	*sandbox;
	const char	*host;
	uint16_t	 port;
	const char	*method;
	const char	*path;
	int		 allow;
	const char	*rule;
	enum sg_reason	 reason;	/* REASON_NONE when allowed */
	int		 tls;		/* checked when allowed */
	int		 opaque;
	int		 inspect;
};

#define I POLICY_TLS_INTERCEPT
#define P POLICY_TLS_PASSTHROUGH
#define DENY(r, why)	0, r, why, P, 0, 0
#define ALLOW(r, tls, op, insp)	1, r, REASON_NONE, tls, op, insp

static const struct decide_case decide_cases[] = {
	/* (1) identity */
	{ NO_ID, "pkgs.test", 443, NULL, NULL, DENY("no-identity", REASON_NO_IDENTITY) },
	{ BAD_POLICY, "pkgs.test", 443, NULL, NULL, DENY("default-deny", REASON_UNKNOWN_POLICY) },
	/* exact, apex, wildcards of any depth */
	{ "agent", "pkgs.test", 443, NULL, NULL, ALLOW("coding-agent:allow[2]", P, 0, 1) },
	{ "agent", "pkgs.test", 80, NULL, NULL, ALLOW("coding-agent:allow[2]", P, 0, 1) },
	{ "agent", "pkgs.test", 8080, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "www.pkgs.test", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "pkgs.test.evil", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "notpkgs.test", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "Pkgs.Test.", 443, NULL, NULL, ALLOW("coding-agent:allow[2]", P, 0, 1) },
	{ "agent", "pkgcdn.test", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "files.pkgcdn.test", 443, NULL, NULL, ALLOW("coding-agent:allow[1]", P, 0, 0) },
	{ "agent", "a.b.c.files.pkgcdn.test", 80, NULL, NULL, ALLOW("coding-agent:allow[1]", P, 0, 0) },
	{ "agent", "FILES.Pkgcdn.Test.", 443, NULL, NULL, ALLOW("coding-agent:allow[1]", P, 0, 0) },
	{ "agent", "xpkgcdn.test", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "deep.example.net", 8443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "a.deep.example.net", 8443, NULL, NULL, ALLOW("coding-agent:allow[6]", P, 0, 0) },
	{ "agent", "a.deep.example.net", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	/* lowest allow index wins */
	{ "agent", "www.example.com", 443, NULL, NULL, ALLOW("coding-agent:allow[4]", P, 0, 0) },
	{ "agent", "example.com", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	/* deny before allow; deny ports; lowest deny index */
	{ "agent", "uploads.example.com", 443, NULL, NULL, DENY("coding-agent:deny[0]", REASON_POLICY_DENY) },
	{ "agent", "uploads.example.com", 12345, NULL, NULL, DENY("coding-agent:deny[0]", REASON_POLICY_DENY) },
	{ "agent", "Uploads.Example.Com.", 80, "GET", "/", DENY("coding-agent:deny[0]", REASON_POLICY_DENY) },
	{ "agent", "x.uploads.example.com", 443, NULL, NULL, ALLOW("coding-agent:allow[4]", P, 0, 0) },
	{ "agent", "a.evil.example.com", 443, NULL, NULL, DENY("coding-agent:deny[1]", REASON_POLICY_DENY) },
	{ "agent", "a.b.evil.example.com", 443, NULL, NULL, DENY("coding-agent:deny[1]", REASON_POLICY_DENY) },
	{ "agent", "a.evil.example.com", 80, NULL, NULL, ALLOW("coding-agent:allow[4]", P, 0, 0) },
	{ "agent", "evil.example.com", 443, NULL, NULL, ALLOW("coding-agent:allow[4]", P, 0, 0) },
	/* IDN */
	{ "agent", "b\xc3\xbc" "cher.example", 443, NULL, NULL, ALLOW("coding-agent:allow[7]", P, 0, 0) },
	{ "agent", "xn--bcher-kva.example", 443, NULL, NULL, ALLOW("coding-agent:allow[7]", P, 0, 0) },
	{ "agent", "XN--BCHER-KVA.EXAMPLE.", 443, NULL, NULL, ALLOW("coding-agent:allow[7]", P, 0, 0) },
	{ "agent", "bucher.example", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "m\xc3\xbcnchen.de", 443, NULL, NULL, ALLOW("coding-agent:allow[11]", P, 0, 0) },
	/* methods and paths, query ignored, path normalised */
	{ "agent", "api.openai.com", 443, NULL, NULL, ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/models", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 443, "POST", "/v1/chat/completions?stream=1", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/models?next=/admin", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 443, "GET", "/v2/models?x=/v1/", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v2/models#/v1/", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "PUT", "/v1/models", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "get", "/v1/models", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/../admin", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/%2e%2e/admin", DENY("coding-agent:deny[3]", REASON_AMBIGUOUS_PATH) },
	{ "agent", "api.openai.com", 443, "DELETE", "/v1/..%2Fadmin", DENY("coding-agent:deny[2]", REASON_POLICY_DENY) },
	{ "agent", "pkgs.test", 443, "GET", "/simple/..%2Fadmin", DENY("coding-agent:deny[6]", REASON_AMBIGUOUS_PATH) },
	{ "agent", "files.pkgcdn.test", 443, "GET", "/simple/..%2Fadmin", ALLOW("coding-agent:allow[1]", P, 0, 0) },
	{ "agent", "api.openai.com", 443, "GET", "/%76%31/models", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 443, "GET", "/admin/../v1/models", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/models%zz", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "DELETE", "/v1/models", DENY("coding-agent:deny[2]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "delete", "/v1/models", DENY("coding-agent:deny[2]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/files/abc", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/files?purpose=x", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/./files/x", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/%66iles/x", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/x/../files", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/files%", DENY("coding-agent:deny[3]", REASON_POLICY_DENY) },
	{ "agent", "api.openai.com", 443, "GET", "/v1/filez", ALLOW("coding-agent:allow[0]", I, 0, 1) },
	/* a path deny rule defers to per-request checks: inspect */
	{ "agent", "pkgs.test", 443, "GET", "/simple/", ALLOW("coding-agent:allow[2]", P, 0, 1) },
	{ "agent", "pkgs.test", 443, "GET", "/admin/x", DENY("coding-agent:deny[6]", REASON_POLICY_DENY) },
	{ "agent", "files.example.org", 443, NULL, NULL, ALLOW("coding-agent:allow[9]", I, 0, 1) },
	{ "agent", "files.example.org", 443, "GET", "/x", ALLOW("coding-agent:allow[9]", I, 0, 1) },
	{ "agent", "files.example.org", 443, "POST", "/x", DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "files.example.org", 8080, "POST", "/x", ALLOW("coding-agent:allow[10]", P, 0, 0) },
	/* IP literals only match cidr rules */
	{ "agent", "140.82.112.10", 22, NULL, NULL, ALLOW("coding-agent:allow[3]", P, 1, 0) },
	{ "agent", "0x8c.0x52.0x70.0xa", 22, NULL, NULL, ALLOW("coding-agent:allow[3]", P, 1, 0) },
	{ "agent", "[::ffff:140.82.112.10]", 22, NULL, NULL, ALLOW("coding-agent:allow[3]", P, 1, 0) },
	{ "agent", "140.82.114.1", 22, NULL, NULL, DENY("coding-agent:deny[4]", REASON_POLICY_DENY) },
	{ "agent", "140.82.114.1", 443, NULL, NULL, DENY("coding-agent:deny[4]", REASON_POLICY_DENY) },
	{ "agent", "140.82.112.10", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "agent", "151.101.0.223", 443, NULL, NULL, ALLOW("coding-agent:allow[8]", P, 0, 0) },
	{ "agent", "2a04:4e42::223", 443, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "ci", "93.184.216.34", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "1572395042", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "0x5d.0xb8.0xd8.0x22", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "0135.0270.0330.042", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "93.12113954", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "93.184.216.34.", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "::ffff:93.184.216.34", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "[::ffff:5db8:d822]", 80, NULL, NULL, ALLOW("ci:allow[1]", P, 0, 0) },
	{ "ci", "93.184.217.34", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "ci", "[2606:2800:220:1::]", 443, NULL, NULL, ALLOW("ci:allow[4]", P, 0, 0) },
	{ "ci", "[2606:2800:220:1::]", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	/* a host rule never matches an IP, in any form */
	{ "docnet", "localhost", 80, NULL, NULL, ALLOW("names-only:allow[0]", P, 0, 0) },
	{ "docnet", "127.0.0.1", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "2130706433", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "0x7f000001", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "0177.0.0.1", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "127.1", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "[::1]", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "[::ffff:127.0.0.1]", 80, NULL, NULL, DENY("default-deny", REASON_POLICY_DENY) },
	{ "docnet", "198.18.0.1.nip.io", 80, NULL, NULL, ALLOW("names-only:allow[1]", P, 0, 0) },
	{ "docnet", "x.0.0.1.example", 80, NULL, NULL, ALLOW("names-only:allow[2]", P, 0, 0) },
};

static int
identity_for(const struct policy *p, const char *sandbox,
    struct policy_identity *id)
{
	memset(id, 0, sizeof(*id));
	if (sandbox != NULL && strcmp(sandbox, BAD_POLICY) == 0) {
		strcpy(id->sandbox, "ghost");
		strcpy(id->policy, "no-such-policy");
		return 0;
	}
	return policy_identity_by_id(p, sandbox, id);
}

static void
test_decide(const struct policy *p)
{
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(decide_cases) / sizeof(decide_cases[0]); i++) {
		const struct decide_case *c = &decide_cases[i];

		if (c->sandbox != NULL)
			CHECK_MSG(identity_for(p, c->sandbox, &id) == 0, "%s",
			    c->sandbox);
		CHECK_MSG(policy_target_init(&t, c->host, strlen(c->host),
		    c->port) == 0, "%s", c->host);
		memset(&v, 0xa5, sizeof(v));
		rc = policy_decide(p, c->sandbox ? &id : NULL, &t, c->method,
		    c->path, &v);
		CHECK_MSG(rc == c->allow && v.allow == c->allow,
		    "case %zu %s:%u %s %s: allow %d rule %s", i, c->host,
		    c->port, c->method ? c->method : "-",
		    c->path ? c->path : "-", v.allow, v.rule);
		CHECK_MSG(strcmp(v.rule, c->rule) == 0, "case %zu %s: rule %s, "
		    "want %s", i, c->host, v.rule, c->rule);
		if (c->reason == REASON_NONE)
			CHECK_MSG(v.reason == REASON_NONE, "case %zu", i);
		else
			CHECK_MSG(v.reason == c->reason,
			    "case %zu %s: reason %s", i, c->host,
			    v.reason ? reason_word(v.reason) : "(null)");
		if (c->allow)
			CHECK_MSG((int)v.tls == c->tls && v.opaque == c->opaque &&
			    v.inspect == c->inspect, "case %zu %s: tls %d "
			    "opaque %d inspect %d", i, c->host, v.tls, v.opaque,
			    v.inspect);
	}
}

#define MAXADDR 4

struct addr_case {
	const char	*sandbox;
	const char	*host;
	uint16_t	 port;
	const char	*addrs[MAXADDR];	/* NULL-terminated */
	int		 allow;
	const char	*rule;
	enum sg_reason	 reason;
};

static const struct addr_case addr_cases[] = {
	{ "agent", "pkgs.test", 443, { "151.101.0.223" }, 1, "coding-agent:allow[2]", REASON_NONE },
	{ "agent", "pkgs.test", 443, { "151.101.0.223", "2a04:4e42::223" }, 1, "coding-agent:allow[2]", REASON_NONE },
	{ "agent", "pkgs.test", 443, { NULL }, 0, "coding-agent:allow[2]", REASON_DNS_ERROR },
	{ "agent", "pkgs.test", 443, { "198.19.255.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "127.0.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "151.101.0.223", "127.0.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "151.101.0.223", "2a04:4e42::223", "fd00::1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "169.254.169.254" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "::ffff:198.18.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "64:ff9b::198.18.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "64:ff9b::8.8.8.8" }, 1, "coding-agent:allow[2]", REASON_NONE },
	{ "agent", "pkgs.test", 443, { "2002:a00:1::1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "100.64.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "198.18.0.1" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	{ "agent", "pkgs.test", 443, { "0.0.0.0" }, 0, "coding-agent:allow[2]", REASON_IP_PROHIBITED },
	/* cidr: 0.0.0.0/0 alone never reaches the metadata service */
	{ "agent", "169.254.169.254", 443, { "169.254.169.254" }, 0, "coding-agent:allow[8]", REASON_IP_PROHIBITED },
	{ "agent", "0xa9fea9fe", 443, { "169.254.169.254" }, 0, "coding-agent:allow[8]", REASON_IP_PROHIBITED },
	{ "agent", "[::ffff:169.254.169.254]", 443, { "169.254.169.254" }, 0, "coding-agent:allow[8]", REASON_IP_PROHIBITED },
	/* the IP target is checked even when the caller passes nothing */
	{ "agent", "169.254.169.254", 443, { NULL }, 0, "coding-agent:allow[8]", REASON_IP_PROHIBITED },
	{ "agent", "151.101.0.223", 443, { NULL }, 1, "coding-agent:allow[8]", REASON_NONE },
	{ "agent", "151.101.0.223", 443, { "198.19.1.1" }, 0, "coding-agent:allow[8]", REASON_IP_PROHIBITED },
	/* allow_private: prefixes for names and IPs, names for names only */
	{ "ci", "github.com", 443, { "10.20.1.1" }, 1, "ci:allow[0]", REASON_NONE },
	{ "ci", "github.com", 443, { "::ffff:10.20.1.1" }, 1, "ci:allow[0]", REASON_NONE },
	{ "ci", "github.com", 443, { "10.20.1.1", "10.21.0.1" }, 0, "ci:allow[0]", REASON_IP_PROHIBITED },
	{ "ci", "github.com", 443, { "fd00:1:2::3" }, 1, "ci:allow[0]", REASON_NONE },
	{ "ci", "github.com", 443, { "fd00:2::3" }, 0, "ci:allow[0]", REASON_IP_PROHIBITED },
	{ "ci", "db.internal.example", 443, { "10.99.0.5", "192.168.1.1" }, 1, "ci:allow[2]", REASON_NONE },
	{ "ci", "a.b.internal.example", 443, { "fd12::1" }, 1, "ci:allow[2]", REASON_NONE },
	{ "ci", "10.20.1.1", 443, { "10.20.1.1" }, 1, "ci:allow[3]", REASON_NONE },
	{ "ci", "10.21.0.1", 443, { "10.21.0.1" }, 0, "ci:allow[3]", REASON_IP_PROHIBITED },
	{ "ci", "10.99.0.5", 443, { "10.99.0.5" }, 0, "ci:allow[3]", REASON_IP_PROHIBITED },
	{ "ci", "127.0.0.1", 8080, { "127.0.0.1" }, 0, "ci:allow[5]", REASON_IP_PROHIBITED },
	/* a denied verdict stays denied */
	{ "ci", "example.net", 443, { "8.8.8.8" }, 0, "default-deny", REASON_POLICY_DENY },
};

static void
test_check_addrs(const struct policy *p)
{
	struct policy_identity id, bad;
	struct policy_target t;
	struct policy_verdict v;
	struct netaddr addrs[MAXADDR];
	size_t i, n;
	int rc;

	for (i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		const struct addr_case *c = &addr_cases[i];

		CHECK(identity_for(p, c->sandbox, &id) == 0);
		CHECK(policy_target_init(&t, c->host, strlen(c->host),
		    c->port) == 0);
		for (n = 0; n < MAXADDR && c->addrs[n] != NULL; n++)
			CHECK(netaddr_parse(c->addrs[n], strlen(c->addrs[n]),
			    &addrs[n]) == 0);
		policy_decide(p, &id, &t, NULL, NULL, &v);
		rc = policy_check_addrs(p, &id, &t, addrs, n, &v);
		CHECK_MSG(rc == c->allow && v.allow == c->allow,
		    "case %zu %s: allow %d reason %s", i, c->host, v.allow,
		    v.reason ? reason_word(v.reason) : "(null)");
		CHECK_MSG(strcmp(v.rule, c->rule) == 0, "case %zu: rule %s", i,
		    v.rule);
		CHECK_MSG(c->reason == v.reason, "case %zu %s: reason %s",
		    i, c->host, v.reason ? reason_word(v.reason) : "(null)");
	}
	/* An identity whose policy vanished is refused here too. */
	CHECK(identity_for(p, BAD_POLICY, &bad) == 0);
	CHECK(identity_for(p, "agent", &id) == 0);
	policy_target_init(&t, "pkgs.test", 9, 443);
	CHECK_INT(policy_decide(p, &id, &t, NULL, NULL, &v), 1);
	netaddr_parse("151.101.0.223", 13, &addrs[0]);
	CHECK_INT(policy_check_addrs(p, &bad, &t, addrs, 1, &v), 0);
	CHECK_INT(v.reason, REASON_UNKNOWN_POLICY);
	CHECK_INT(policy_decide(p, &id, &t, NULL, NULL, &v), 1);
	CHECK_INT(policy_check_addrs(p, NULL, &t, addrs, 1, &v), 0);
	CHECK_INT(v.reason, REASON_NO_IDENTITY);
}

struct source_case {
	const char	*addr;
	const char	*sandbox;	/* NULL: nobody */
	const char	*policy;
};

static const struct source_case source_cases[] = {
	{ "127.0.0.1", "agent", "coding-agent" },
	{ "::ffff:127.0.0.1", "agent", "coding-agent" },
	{ "127.0.0.2", "ci", "ci" },
	{ "127.255.255.255", "ci", "ci" },
	{ "::1", "ci", "ci" },
	{ "192.0.2.5", "docnet", "names-only" },
	{ "192.0.2.77", "docnet-host", "names-only" },
	{ "192.0.2.200", "docnet-host", "names-only" },
	{ "2001:db8::5", "docnet", "names-only" },
	{ "198.51.100.1", NULL, NULL },
	{ "128.0.0.1", NULL, NULL },
	{ "::2", NULL, NULL },
};

static void
test_identify(const struct policy *p)
{
	struct policy_identity id;
	struct netaddr a;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(source_cases) / sizeof(source_cases[0]); i++) {
		const struct source_case *c = &source_cases[i];

		CHECK(netaddr_parse(c->addr, strlen(c->addr), &a) == 0);
		memset(&id, 0, sizeof(id));
		rc = policy_identify_source(p, &a, &id);
		if (c->sandbox == NULL) {
			CHECK_MSG(rc == -1, "%s -> %s", c->addr, id.sandbox);
			continue;
		}
		CHECK_MSG(rc == 0, "%s", c->addr);
		CHECK_STR(id.sandbox, c->sandbox);
		CHECK_STR(id.policy, c->policy);
	}

	static const struct {
		const char *id, *token;
		int rc;
	} tokens[] = {
		{ "agent", "correct horse battery staple", 0 },
		{ "agent", "correct horse battery stapl", -1 },
		{ "agent", "correct horse battery staple ", -1 },
		{ "agent", "", -1 },
		{ "agen", "correct horse battery staple", -1 },
		{ "agent2", "correct horse battery staple", -1 },
		{ "nobody", "correct horse battery staple", -1 },
		{ "ci", "", -1 },			/* no token_sha256 */
		{ "ci", "correct horse battery staple", -1 },
		{ "", "", -1 },
	};
	for (i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		memset(&id, 0, sizeof(id));
		rc = policy_identify_token(p, tokens[i].id, strlen(tokens[i].id),
		    tokens[i].token, strlen(tokens[i].token), &id);
		CHECK_MSG(rc == tokens[i].rc, "token case %zu", i);
		if (rc == 0) {
			CHECK_STR(id.sandbox, tokens[i].id);
			CHECK_STR(id.policy, "coding-agent");
		}
	}
	/* Lengths bound the id and the token, not NULs. */
	CHECK_INT(policy_identify_token(p, "agentXX", 5,
	    "correct horse battery stapleXX", 28, &id), 0);
	CHECK_INT(policy_identify_token(p, NULL, 0, NULL, 0, &id), -1);

	CHECK_INT(policy_identity_by_id(p, "docnet-host", &id), 0);
	CHECK_STR(id.policy, "names-only");
	CHECK_INT(policy_identity_by_id(p, "docnet-hos", &id), -1);
	CHECK_INT(policy_identity_by_id(p, "nobody", &id), -1);
}

static void
test_dup_source(void)
{
	struct diag d;
	struct policy *p;
	size_t i;
	int found = 0;

	p = load_fixture("match_dup_source.yaml", &d);
	CHECK(p == NULL);
	for (i = 0; i < d.n; i++) {
		if (strstr(d.v[i].msg, "127.0.1.0/24") != NULL &&
		    strstr(d.v[i].msg, "one") != NULL && d.v[i].line == 6)
			found = 1;
	}
	CHECK_MSG(found, "no diag for the duplicated source");
	if (!found)
		diag_print(&d, stderr);
	policy_unref(p);
	diag_free(&d);
}

/*
 * A generated policy with many overlapping exact and wildcard rules: the
 * index must decide exactly as a plain scan of the rules does (the matcher
 * scans when a policy_def has no index).
 */
static const char *const vocab[] = { "a", "b", "c", "x-y", "_s", "zz" };
#define NVOCAB (sizeof(vocab) / sizeof(vocab[0]))

static void
random_name(char *buf, size_t len, int labels)
{
	int i;

	buf[0] = '\0';
	for (i = 0; i < labels; i++) {
		if (i > 0)
			strncat(buf, ".", len - strlen(buf) - 1);
		strncat(buf, vocab[random() % NVOCAB], len - strlen(buf) - 1);
	}
	strncat(buf, ".test", len - strlen(buf) - 1);
}

static void
test_index_vs_scan(void)
{
	char dir[] = "/tmp/sg-match-XXXXXX", path[256], name[128];
	const char *methods[] = { NULL, "GET", "POST" };
	const char *paths[] = { NULL, "/a/b", "/q/x?y", "/a/../q/1" };
	struct policy_identity id = { "gen", "gen", 0 };
	struct policy_verdict v1, v2;
	struct policy_target t;
	struct policy_def *def;
	struct policy_index *ai, *di;
	struct policy *p;
	struct diag d;
	char *paths_arg[1];
	const char *m, *pa;
	FILE *f;
	int i, j, diff = 0, allowed = 0, denied = 0;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/gen.yaml", dir);
	CHECK((f = fopen(path, "w")) != NULL);
	if (f == NULL)
		return;
	srandom(7);
	fprintf(f, "policies:\n  - name: gen\n");
	for (j = 0; j < 2; j++) {
		fprintf(f, "    %s:\n", j == 0 ? "allow" : "deny");
		for (i = 0; i < (j == 0 ? 300 : 60); i++) {
			random_name(name, sizeof(name), 1 + (int)(random() % 3));
			fprintf(f, "      - host: \"%s%s\"\n",
			    random() % 2 ? "*." : "", name);
			if (random() % 3 == 0)
				fprintf(f, "        ports: [%ld]\n",
				    80 + random() % 3);
			if (random() % 5 == 0)
				fprintf(f, "        methods: [GET]\n");
			if (random() % 5 == 0)
				fprintf(f, "        paths: [\"/q/*\"]\n");
		}
	}
	fclose(f);
	paths_arg[0] = path;
	diag_init(&d);
	p = policy_load_paths(paths_arg, 1, &d);
	if (p == NULL)
		diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p == NULL)
		goto out;
	def = &p->defs[0];
	for (i = 0; i < 20000; i++) {
		random_name(name, sizeof(name), 1 + (int)(random() % 5));
		policy_target_init(&t, name, strlen(name),
		    (uint16_t)(80 + random() % 3));
		m = methods[random() % 3];
		pa = paths[random() % 4];

		policy_decide(p, &id, &t, m, pa, &v1);
		ai = def->allow_idx;
		di = def->deny_idx;
		def->allow_idx = def->deny_idx = NULL;
		policy_decide(p, &id, &t, m, pa, &v2);
		def->allow_idx = ai;
		def->deny_idx = di;
		if (v1.allow != v2.allow || strcmp(v1.rule, v2.rule) != 0 ||
		    v1.inspect != v2.inspect) {
			if (diff++ < 5)
				fprintf(stderr, "%s %s %s: index %s, scan %s\n",
				    name, m ? m : "-", pa ? pa : "-", v1.rule,
				    v2.rule);
		}
		if (v1.allow)
			allowed++;
		else if (strstr(v1.rule, ":deny[") != NULL)
			denied++;
	}
	CHECK_INT(diff, 0);
	/* The generator must exercise both outcomes. */
	CHECK(allowed > 1000 && denied > 1000);
	policy_unref(p);
out:
	diag_free(&d);
	unlink(path);
	rmdir(dir);
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

	test_targets();
	p = load_fixture("match_decide.yaml", &d);
	if (p == NULL)
		diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		test_decide(p);
		test_check_addrs(p);
		test_identify(p);
		policy_unref(p);
	}
	diag_free(&d);
	test_dup_source();
	test_index_vs_scan();
	return check_summary();
}
