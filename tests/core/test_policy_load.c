/*
 * Unit tests for the policy loader (policy_load.c) and its YAML tree:
 * good documents load with the right values, each kind of error is
 * reported at its exact FILE:LINE:COL, all errors of a run are reported.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/policy.h"
#include "core/policy_int.h"
#include "core/yaml_tree.h"
#include "helper_core.h"

static char data_dir[PATH_MAX];
static char tmp_dir[] = "/tmp/sg-test-policy-load-XXXXXX";

static const char *
data_path(const char *name)
{
	static char buf[2 * PATH_MAX];

	snprintf(buf, sizeof(buf), "%s/%s", data_dir, name);
	return buf;
}

static struct policy *
load_one(const char *path, struct diag *d)
{
	char *paths[1];

	paths[0] = (char *)path;
	return policy_load_paths(paths, 1, d);
}

static const struct policy_def *
find_def(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->n_defs; i++)
		if (strcmp(p->defs[i].name, name) == 0)
			return &p->defs[i];
	return NULL;
}

/* The policies the files defined: not the implicit "default". */
static size_t
n_explicit(const struct policy *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->n_defs; i++)
		n += !p->defs[i].implicit;
	return n;
}

static const char *
cidr_str(const struct cidr *c)
{
	static char buf[64];

	return cidr_ntop(c, buf, sizeof(buf));
}

static void
test_good(void)
{
	static const unsigned char token[32] = {
		0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x7d, 0x65, 0x9a, 0x2f,
		0xea, 0xa0, 0xc5, 0x5a, 0xd0, 0x15, 0xa3, 0xbf, 0x4f, 0x1b,
		0x2b, 0x0b, 0x82, 0x2c, 0xd1, 0x5d, 0x6c, 0x15, 0xb0, 0xf0,
		0x0a, 0x08,
	};
	const struct policy_def *def;
	const struct policy_rule *r;
	const struct policy_sandbox *sb;
	const struct policy_credential *cr;
	struct policy *p;
	struct diag d;
	char sum[128];

	diag_init(&d);
	p = load_one(data_path("load_good.yaml"), &d);
	diag_print(&d, stderr);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	if (p == NULL)
		goto out;
	CHECK_INT(atomic_load(&p->refcnt), 1);
	CHECK_INT(p->n_files, 1);
	CHECK_STR(p->files[0], data_path("load_good.yaml"));

	/* sandboxes */
	CHECK_INT(p->n_sandboxes, 2);
	sb = &p->sandboxes[0];
	CHECK_STR(sb->id, "dev-laptop");
	CHECK_STR(sb->policy, "coding-agent");
	CHECK_INT(sb->has_token, 1);
	CHECK(memcmp(sb->token_sha256, token, 32) == 0);
	CHECK_INT(sb->n_sources, 2);
	CHECK_STR(cidr_str(&sb->sources[0]), "127.0.0.1/32");
	CHECK_STR(cidr_str(&sb->sources[1]), "::1/128");
	CHECK_INT(sb->line, 4);
	CHECK_INT(sb->col, 5);
	sb = &p->sandboxes[1];
	CHECK_STR(sb->id, "ci-runner-7");
	CHECK_INT(sb->has_token, 0);
	CHECK_INT(sb->n_sources, 1);
	CHECK_STR(cidr_str(&sb->sources[0]), "127.0.0.2/32");

	/* policies */
	CHECK_INT(n_explicit(p), 2);
	def = find_def(p, "coding-agent");
	CHECK(def != NULL);
	if (def == NULL)
		goto out;
	CHECK_INT(def->n_allow, 5);
	r = &def->allow[0];
	CHECK_INT(r->kind, RULE_HOST);
	CHECK_STR(r->host, "api.openai.com");
	CHECK_INT(r->wildcard, 0);
	CHECK_INT(r->n_ports, 1);
	CHECK_INT(r->ports[0], 443);
	CHECK_INT(r->tls, POLICY_TLS_INTERCEPT);
	CHECK_INT(r->n_methods, 2);
	CHECK_STR(r->methods[0], "GET");
	CHECK_STR(r->methods[1], "POST");
	CHECK_INT(r->n_paths, 2);
	CHECK_STR(r->paths[0], "/v1/*");
	CHECK_STR(r->paths[1], "*/models");
	CHECK_INT(r->opaque, 0);
	CHECK_STR(r->file, data_path("load_good.yaml"));
	CHECK(r->file == p->files[0]);
	CHECK_INT(r->line, 15);
	CHECK_INT(r->col, 9);
	r = &def->allow[1];
	CHECK_STR(r->host, "pkgcdn.example.com");
	CHECK_INT(r->wildcard, 1);
	CHECK_INT(r->n_ports, 2);		/* the default [80, 443] */
	CHECK_INT(r->ports[0], 80);
	CHECK_INT(r->ports[1], 443);
	CHECK_INT(r->tls, POLICY_TLS_PASSTHROUGH);
	CHECK_INT(r->n_methods, 0);
	CHECK_INT(r->n_paths, 0);
	CHECK_INT(r->line, 21);
	r = &def->allow[3];
	CHECK_INT(r->kind, RULE_CIDR);
	CHECK_STR(cidr_str(&r->cidr), "140.82.112.0/20");
	CHECK_INT(r->n_ports, 1);
	CHECK_INT(r->ports[0], 22);
	CHECK_INT(r->opaque, 1);
	CHECK_STR(def->allow[4].host, "xn--bcher-kva.example");

	CHECK_INT(def->n_deny, 2);
	CHECK_STR(def->deny[0].host, "uploads.example.com");
	CHECK_INT(def->deny[0].n_ports, 0);	/* deny: any port */
	CHECK_INT(def->deny[1].kind, RULE_CIDR);
	CHECK_STR(cidr_str(&def->deny[1].cidr), "2001:db8::/32");
	CHECK_INT(def->deny[1].n_ports, 2);
	CHECK_INT(def->deny[1].ports[1], 587);
	CHECK_INT(def->deny[1].n_methods, 1);
	CHECK_STR(def->deny[1].methods[0], "DELETE");
	CHECK_INT(def->deny[1].line, 29);

	CHECK_INT(def->n_priv, 4);
	CHECK_INT(def->priv[0].is_name, 0);
	CHECK_STR(cidr_str(&def->priv[0].cidr), "10.1.0.0/16");
	CHECK_INT(def->priv[1].is_name, 0);
	CHECK_STR(cidr_str(&def->priv[1].cidr), "192.168.7.7/32");
	CHECK_INT(def->priv[2].is_name, 1);
	CHECK_STR(def->priv[2].host, "git.internal");
	CHECK_INT(def->priv[2].wildcard, 0);
	CHECK_STR(def->priv[3].host, "corp.example");
	CHECK_INT(def->priv[3].wildcard, 1);

	CHECK_INT(def->n_dns_types, 4);
	CHECK_INT(def->dns_types[0], 1);
	CHECK_INT(def->dns_types[1], 28);
	CHECK_INT(def->dns_types[2], 65);
	CHECK_INT(def->dns_types[3], 16);
	CHECK_INT(def->n_country_deny, 2);
	CHECK_STR(def->country_deny[0], "KP");
	CHECK_STR(def->country_deny[1], "IR");
	CHECK_INT(def->n_asn_deny, 2);
	CHECK_INT(def->asn_deny[0], 64496);
	CHECK_INT(def->asn_deny[1], 64511);
	CHECK_INT(def->n_credentials, 2);
	CHECK_STR(def->credentials[0], "openai");
	CHECK_STR(def->credentials[1], "github");
	/* The matcher's indexes were built. */
	CHECK(def->allow_idx != NULL);

	def = find_def(p, "locked-down");
	CHECK(def != NULL);
	if (def != NULL) {
		CHECK_INT(def->n_allow, 0);
		CHECK_INT(def->n_deny, 0);
		CHECK_INT(def->n_dns_types, 2);	/* default [A, AAAA] */
		CHECK_INT(def->dns_types[0], 1);
		CHECK_INT(def->dns_types[1], 28);
		CHECK_INT(def->n_credentials, 0);
	}

	/* credentials */
	CHECK_INT(p->n_creds, 2);
	cr = &p->creds[0];
	CHECK_STR(cr->name, "openai");
	CHECK_STR(cr->secret, "openai-prod");
	CHECK_INT(cr->n_hosts, 1);
	CHECK_STR(cr->hosts[0], "api.openai.com");
	CHECK_INT(cr->n_headers, 1);		/* default */
	CHECK_STR(cr->headers[0], "Authorization");
	CHECK_INT(cr->query, 0);
	CHECK_INT(cr->exclusive, 1);
	CHECK_STR(cr->env, "OPENAI_API_KEY");
	CHECK(cr->placeholder == NULL);
	cr = &p->creds[1];
	CHECK_STR(cr->secret, "gh.token_1");
	CHECK_INT(cr->n_hosts, 2);
	CHECK_STR(cr->hosts[1], "uploads.github.com");
	CHECK_INT(cr->n_headers, 2);
	CHECK_STR(cr->headers[1], "X-Api-Key");
	CHECK_INT(cr->query, 1);
	CHECK_INT(cr->exclusive, 0);
	CHECK(cr->env == NULL);
	CHECK_STR(cr->placeholder, "sg-placeholder-github-0001");

	policy_summary(p, sum, sizeof(sum));
	CHECK_STR(sum, "1 file, 2 sandboxes, 2 policies (+ the implicit "
	    "deny-all \"default\"), 7 rules, "
	    "2 credentials");

	/* Reference counting: the last unref frees (ASan checks the rest). */
	policy_ref(p);
	CHECK_INT(atomic_load(&p->refcnt), 2);
	policy_unref(p);
	CHECK_INT(atomic_load(&p->refcnt), 1);
	policy_unref(p);
out:
	diag_free(&d);
}

/* Directories: *.yaml and *.yml in name order, not recursive, no dotfiles. */
static void
test_dir(void)
{
	struct policy *p;
	struct diag d;
	char *paths[2], sum[128], empty[PATH_MAX], dirpath[2 * PATH_MAX];

	diag_init(&d);
	snprintf(dirpath, sizeof(dirpath), "%s", data_path("load_dir"));
	paths[0] = dirpath;
	p = policy_load_paths(paths, 1, &d);
	diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK_INT(p->n_files, 2);
		CHECK(strstr(p->files[0], "/10-sandboxes.yaml") != NULL);
		CHECK(strstr(p->files[1], "/20-policies.yml") != NULL);
		CHECK_INT(p->n_sandboxes, 1);
		CHECK_STR(p->sandboxes[0].policy, "dir-policy");
		CHECK_STR(p->defs[0].name, "dir-policy");
		policy_summary(p, sum, sizeof(sum));
		CHECK_STR(sum, "2 files, 1 sandbox, 1 policy (+ the implicit "
		    "deny-all \"default\"), 1 rule, "
		    "0 credentials");
		policy_unref(p);
	}
	diag_free(&d);

	/* An existing empty directory is fine: an empty policy. */
	diag_init(&d);
	snprintf(empty, sizeof(empty), "%s/empty", tmp_dir);
	CHECK(mkdir(empty, 0700) == 0);
	paths[0] = empty;
	p = policy_load_paths(paths, 1, &d);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	if (p != NULL) {
		CHECK_INT(p->n_files, 0);
		CHECK_INT(n_explicit(p), 0);
		policy_unref(p);
	}
	diag_free(&d);

	/* A path that does not exist is an error, also next to a good one. */
	diag_init(&d);
	snprintf(empty, sizeof(empty), "%s/missing", tmp_dir);
	paths[0] = dirpath;
	paths[1] = empty;
	p = policy_load_paths(paths, 2, &d);
	CHECK(p == NULL);
	CHECK_INT(d.n, 1);
	if (d.n == 1) {
		CHECK_STR(d.v[0].file, empty);
		CHECK_INT(d.v[0].line, 0);
		CHECK(strstr(d.v[0].msg, "cannot open") != NULL);
	}
	diag_free(&d);
}

/* policy_load(): with built-in defaults a missing ./policies is no error. */
static void
test_load_cfg(void)
{
	struct config *cfg;
	struct policy *p;
	struct diag d;
	char cwd[PATH_MAX];

	diag_init(&d);
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(tmp_dir) == 0);
	cfg = config_load(NULL, &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		p = policy_load(cfg, &d);
		CHECK(p != NULL);
		CHECK_INT(d.n, 0);
		if (p != NULL) {
			CHECK_INT(n_explicit(p), 0);
			CHECK_INT(p->n_sandboxes, 0);
			policy_unref(p);
		}
		config_free(cfg);
	}
	CHECK(chdir(cwd) == 0);
	diag_free(&d);
}

struct err_case {
	const char	*name;
	const char	*yaml;
	int		 nerr;		/* errors expected in all */
	int		 line, col;	/* of the first */
	const char	*msg;		/* a part of its message */
};

#define R	"policies:\n  - name: p\n    allow:\n      - "
#define S	"sandboxes:\n  - id: a\n    policy: p\n"
#define P	"policies:\n  - name: p\n"
#define C	"credentials:\n  - name: c\n    secret: s\n"

static const struct err_case err_cases[] = {
	/* rules (R puts the rule's first key at 4:9) */
	{ "port 0", R "host: a.com\n        ports: [0]\n", 1, 5, 17,
	    "ports: 0 is out of range (1-65535)" },
	{ "port 65536", R "host: a.com\n        ports: [80, 65536]\n", 1,
	    5, 21, "65536 is out of range" },
	{ "port quoted", R "host: a.com\n        ports: [\"80\"]\n", 1, 5, 17,
	    "expected an integer" },
	{ "ports empty", R "host: a.com\n        ports: []\n", 1, 5, 16,
	    "ports: must not be empty" },
	{ "ports map", R "host: a.com\n        ports: {a: 1}\n", 1, 5, 16,
	    "expected a list" },
	{ "host ip", R "host: 198.18.0.1\n", 1, 4, 15,
	    "write IP destinations as cidr:" },
	{ "host bracket ip", R "host: \"[::1]\"\n", 1, 4, 15,
	    "is an IP address" },
	{ "host hex ip", R "host: 0x7f.1\n", 1, 4, 15, "is an IP address" },
	{ "host decimal ip", R "host: 2130706433\n", 1, 4, 15,
	    "is an IP address" },
	{ "host bad", R "host: a..b\n", 1, 4, 15, "not a valid host name" },
	{ "host port", R "host: a.com:443\n", 1, 4, 15, "ports:" },
	{ "host inner wildcard", R "host: foo.*.com\n", 1, 4, 15,
	    "leading \"*.\"" },
	{ "host bare star", R "host: \"*\"\n", 1, 4, 15, "wildcard" },
	{ "host null", R "host:\n", 1, 4, 14, "expected a string, got null" },
	{ "host list", R "host: [a.com]\n", 1, 4, 15,
	    "expected a string, got a list" },
	{ "cidr bad", R "cidr: 198.18.0.0/33\n", 1, 4, 15, "bad CIDR" },
	{ "cidr host bits", R "cidr: 198.18.0.1/15\n", 1, 4, 15, "host bits" },
	{ "cidr name", R "cidr: example.com\n", 1, 4, 15, "bad CIDR" },
	{ "host and cidr", R "host: a.com\n        cidr: 1.0.0.0/8\n", 1,
	    5, 9, "both host: and cidr:" },
	{ "neither", R "ports: [80]\n", 1, 4, 9, "needs host: or cidr:" },
	{ "rule scalar", R "a.com\n", 1, 4, 9, "expected a mapping" },
	{ "tls bad", R "host: a.com\n        tls: maybe\n", 1, 5, 14,
	    "intercept or passthrough" },
	{ "opaque yes", R "host: a.com\n        opaque: yes\n", 1, 5, 17,
	    "expected true or false" },
	{ "method space", R "host: a.com\n        methods: [\"GE T\"]\n", 1,
	    5, 19, "not an HTTP method" },
	{ "method empty", R "host: a.com\n        methods: [\"\"]\n", 1,
	    5, 19, "must not be empty" },
	{ "path relative", R "host: a.com\n        paths: [v1]\n", 1, 5, 17,
	    "starts with '/' or '*'" },
	{ "path control", R "host: a.com\n        paths: [\"/a\\x01\"]\n", 1,
	    5, 17, "control characters" },
	{ "path query", R "host: a.com\n        paths: [\"/a?b=1\"]\n", 1,
	    5, 17, "query" },
	{ "path not canonical", R "host: a.com\n        paths: [\"/a/%7Eb*\"]\n",
	    1, 5, 17, "write \"/a/~b*\"" },
	{ "path dot segment", R "host: a.com\n        paths: [\"/a/../b\"]\n",
	    1, 5, 17, "write \"/b\"" },
	{ "path lower hex", R "host: a.com\n        paths: [\"/caf%c3%a9\"]\n",
	    1, 5, 17, "write \"/caf%C3%A9\"" },
	{ "path ambiguous", R "host: a.com\n        paths: [\"/a%2Fb\"]\n", 1,
	    5, 17, "never matches" },
	{ "path parameter", R "host: a.com\n        paths: [\"/a;jsessionid=*\"]\n",
	    1, 5, 17, "never matches" },
	{ "path bad escape", R "host: a.com\n        paths: [\"/a%zz\"]\n", 1,
	    5, 17, "malformed escape" },
	{ "path raw utf-8", R "host: a.com\n        paths: [\"/caf\xc3\xa9\"]\n",
	    1, 5, 17, "percent-encode" },
	{ "unknown rule key", R "host: a.com\n        prot: [1]\n", 1, 5, 9,
	    "unknown key \"prot\" in allow rule" },
	{ "deny tls", "policies:\n  - name: p\n    deny:\n      - host: a.com\n"
	    "        tls: intercept\n", 1, 5, 9, "only allow rules" },
	{ "deny opaque", "policies:\n  - name: p\n    deny:\n      - cidr: "
	    "1.0.0.0/8\n        opaque: true\n", 1, 5, 9, "only allow rules" },
	{ "git no intercept", R "host: a.com\n        git: {push: "
	    "[refs/heads/bot/*]}\n", 1, 5, 9, "git: needs tls: intercept" },
	{ "git bad glob", R "host: a.com\n        tls: intercept\n        git:\n"
	    "          push: [heads/bot]\n", 1, 7, 18, "starts with \"refs/\"" },
	{ "git glob space", R "host: a.com\n        tls: intercept\n        git:\n"
	    "          push: [\"refs/a b\"]\n", 1, 7, 18, "no spaces" },
	{ "git no push", R "host: a.com\n        tls: intercept\n        git:\n"
	    "          delete: true\n", 1, 7, 11, "push is required" },
	{ "git delete yes", R "host: a.com\n        tls: intercept\n        git:\n"
	    "          push: [refs/x]\n          delete: yes\n", 1, 8, 19,
	    "expected true or false" },
	{ "git unknown", R "host: a.com\n        tls: intercept\n        git:\n"
	    "          push: [refs/x]\n          force: true\n", 1, 8, 11,
	    "unknown key \"force\" in git" },
	{ "git scalar", R "host: a.com\n        tls: intercept\n        git: "
	    "refs/x\n", 1, 6, 14, "git: expected a mapping" },
	{ "git opaque", R "host: a.com\n        tls: intercept\n        opaque: "
	    "true\n        git: {push: [refs/x]}\n", 1, 6, 9,
	    "cannot go with git:" },
	{ "deny git", "policies:\n  - name: p\n    deny:\n      - host: a.com\n"
	    "        git: {push: [refs/x]}\n", 1, 5, 9, "only allow rules" },
	{ "allow not list", "policies:\n  - name: p\n    allow: a.com\n", 1,
	    3, 12, "allow: expected a list" },

	/* policies (P ends after the name) */
	{ "policy no name", "policies:\n  - allow: []\n", 1, 2, 5,
	    "name is required" },
	{ "policy bad name", "policies:\n  - name: \"a b\"\n", 1, 2, 11,
	    "not a valid name" },
	{ "policy name colon", "policies:\n  - name: \"a:b\"\n", 1, 2, 11,
	    "not a valid name" },
	{ "policy name long", "policies:\n  - name: "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	    1, 2, 11, "longer than 63" },
	{ "dup policy", P "  - name: p\n", 1, 3, 11,
	    "duplicate policy name \"p\" (first defined at " },
	{ "unknown policy key", P "    alow: []\n", 1, 3, 5,
	    "unknown key \"alow\" in policy" },
	{ "dns type", P "    dns_types: [A, BOGUS]\n", 1, 3, 20,
	    "unknown query type \"BOGUS\"" },
	{ "country 3", P "    countries: {deny: [USA]}\n", 1, 3, 24,
	    "not an ISO 3166 two-letter code" },
	{ "country digit", P "    countries: {deny: [K1]}\n", 1, 3, 24,
	    "two-letter" },
	{ "country allow", P "    countries: {allow: [US]}\n", 1, 3, 17,
	    "unknown key \"allow\" in countries" },
	{ "asn 0", P "    asns: {deny: [AS0]}\n", 1, 3, 19,
	    "out of range" },
	{ "asn word", P "    asns: {deny: [cloudflare]}\n", 1, 3, 19,
	    "expected an integer" },
	{ "private bad cidr", P "    allow_private: [\"198.18.0.0/33\"]\n", 1,
	    3, 21, "bad CIDR" },
	{ "private bad name", P "    allow_private: [\"a..b\"]\n", 1, 3, 21,
	    "not a valid host name" },
	{ "unknown credential", P "    credentials: [nope]\n", 1, 3, 19,
	    "lists credential \"nope\", which is not defined" },

	/* sandboxes (S names policy p, which P defines) */
	{ "sandbox id upper", "sandboxes:\n  - id: Bad\n    policy: p\n" P, 1,
	    2, 9, "not a sandbox id" },
	{ "sandbox id dash", "sandboxes:\n  - id: -a\n    policy: p\n" P, 1,
	    2, 9, "not a sandbox id" },
	{ "sandbox id long", "sandboxes:\n  - id: "
	    "a1234567890123456789012345678901234567890\n    policy: p\n" P, 1,
	    2, 9, "not a sandbox id" },
	{ "sandbox token short", S "    token_sha256: abc\n" P, 1, 4, 19,
	    "64 hex digits" },
	{ "sandbox token nonhex", S "    token_sha256: "
	    "\"zz86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n"
	    P, 1, 4, 19, "64 hex digits" },
	{ "sandbox token long", S "    token_sha256: "
	    "\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0800\"\n"
	    P, 1, 4, 19, "64 hex digits" },
	{ "sandbox source", S "    source: [198.18.0.0/40]\n" P, 1, 4, 14,
	    "bad CIDR" },
	{ "sandbox no policy", "sandboxes:\n  - id: a\n" P, 1, 2, 5,
	    "policy is required" },
	{ "sandbox no id", "sandboxes:\n  - policy: p\n" P, 1, 2, 5,
	    "id is required" },
	{ "sandbox unknown policy", "sandboxes:\n  - id: a\n    policy: q\n" P,
	    1, 3, 13, "no policy is named \"q\"" },
	{ "dup sandbox", S "  - id: a\n    policy: p\n" P, 1, 4, 9,
	    "duplicate sandbox id \"a\"" },
	{ "sandbox unknown key", S "    token: x\n" P, 1, 4, 5,
	    "unknown key \"token\" in sandbox" },

	/* credentials (C has name and secret) */
	{ "cred hosts empty", C "    hosts: []\n", 1, 4, 12,
	    "hosts: must not be empty" },
	{ "cred no hosts", C, 1, 2, 5, "hosts is required" },
	{ "cred no secret", "credentials:\n  - name: c\n    hosts: [a.com]\n",
	    1, 2, 5, "secret is required" },
	{ "cred host wildcard", C "    hosts: [\"*.a.com\"]\n", 1, 4, 13,
	    "only exact names" },
	{ "cred host ip", C "    hosts: [1.2.3.4]\n", 1, 4, 13,
	    "is an IP address" },
	{ "cred placeholder short", C "    hosts: [a.com]\n"
	    "    placeholder: short\n", 1, 5, 18, "at least 16 characters" },
	{ "cred placeholder space", C "    hosts: [a.com]\n"
	    "    placeholder: \"a placeholder with spaces\"\n", 1, 5, 18,
	    "no spaces" },
	{ "cred dup placeholder", C "    hosts: [a.com]\n"
	    "    placeholder: sg-0123456789abcdef\n"
	    "  - name: d\n    secret: s\n    hosts: [a.com]\n"
	    "    placeholder: sg-0123456789abcdef\n", 1, 9, 18,
	    "also the placeholder of the credential at" },
	{ "cred dup name", C "    hosts: [a.com]\n  - name: c\n    secret: t\n"
	    "    hosts: [b.com]\n", 1, 5, 11, "duplicate credential name" },
	{ "cred header", C "    hosts: [a.com]\n    headers: [\"X Key\"]\n", 1,
	    5, 15, "is not a header name" },
	{ "cred env", C "    hosts: [a.com]\n    env: 1ABC\n", 1, 5, 10,
	    "not an environment variable name" },
	{ "cred query", C "    hosts: [a.com]\n    query: 1\n", 1, 5, 12,
	    "expected true or false" },
	{ "cred unknown", C "    hosts: [a.com]\n    value: x\n", 1, 5, 5,
	    "unknown key \"value\" in credential" },

	/* documents and YAML */
	{ "unknown top key", "polices: []\n", 1, 1, 1,
	    "unknown key \"polices\"" },
	{ "top list", "- a\n", 1, 1, 1, "is a mapping" },
	{ "section map", "policies: {}\n", 1, 1, 11,
	    "policies: expected a list, got a mapping" },
	{ "duplicate key", P "    name: q\n", 1, 3, 5,
	    "duplicate key \"name\"" },
	{ "anchor", "policies:\n  - &x\n    name: p\n", 1, 2, 5,
	    "anchors and aliases are not supported" },
	{ "alias", P "  - *x\n", 1, 3, 5,
	    "anchors and aliases are not supported" },
	{ "tag", "policies: !!seq []\n", 1, 1, 11, "tags are not supported" },
	{ "two documents", "policies: []\n---\npolicies: []\n", 1, 2, 1,
	    "only one YAML document" },
	{ "syntax", "policies: [a, b\n", 1, 2, 1, "YAML syntax error" },
	{ "tab indent", "policies:\n\t- name: p\n", 1, 2, 1,
	    "YAML syntax error" },
	{ "nul escape", P "    dns_types: [\"A\\0\"]\n", 1, 3, 17,
	    "NUL character" },
	{ "complex key", "? [a]\n: b\n", 1, 1, 3, "mapping keys must be" },
	{ "bad utf-8", "policies:\n  - name: p\xff\n", 1, 2, 12,
	    "invalid input" },
	{ "control char", "policies:\n  - name: \"p\\x07\"\n", 1, 2, 11,
	    "control characters" },
};

static void
test_errors(void)
{
	const struct err_case *tc;
	struct policy *p;
	struct diag d;
	const char *path;
	size_t i;

	for (i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		tc = &err_cases[i];
		diag_init(&d);
		path = coretest_tmpfile("case.yaml", tc->yaml);
		p = load_one(path, &d);
		CHECK_MSG(p == NULL, "%s: loaded", tc->name);
		if (p != NULL)
			policy_unref(p);
		coretest_check_first(&d, tc->name, path, tc->nerr, tc->line,
		    tc->col, tc->msg);
		diag_free(&d);
	}
}

/* One file with many errors: every one is reported, in file order. */
static void
test_many_errors(void)
{
	static const struct coretest_diag want[] = {
		{ 4, 9, "not a sandbox id" },
		{ 5, 13, "no policy is named \"nowhere\"" },
		{ 9, 15, "is an IP address" },
		{ 11, 17, "out of range" },
		{ 12, 15, "bad CIDR" },
		{ 13, 20, "unknown query type" },
		{ 14, 5, "unknown key \"colour\"" },
		{ 18, 12, "must not be empty" },
	};
	const char *file = data_path("load_errors.yaml");
	struct policy *p;
	struct diag d;

	diag_init(&d);
	p = load_one(file, &d);
	CHECK(p == NULL);
	coretest_check_diags(&d, file, want, sizeof(want) / sizeof(want[0]));
	diag_free(&d);
}

/* Names are global: a duplicate in a second file names the first. */
static void
test_cross_file(void)
{
	char a[PATH_MAX], b[PATH_MAX], want[PATH_MAX + 64], *paths[2];
	struct policy *p;
	struct diag d;

	snprintf(a, sizeof(a), "%s", coretest_tmpfile("a.yaml",
	    "policies:\n  - name: shared\n"));
	snprintf(b, sizeof(b), "%s", coretest_tmpfile("b.yaml",
	    "# second\npolicies:\n  - name: shared\n"
	    "sandboxes:\n  - id: s\n    policy: shared\n"));
	paths[0] = a;
	paths[1] = b;
	diag_init(&d);
	p = policy_load_paths(paths, 2, &d);
	CHECK(p == NULL);
	CHECK_INT(d.n, 1);
	snprintf(want, sizeof(want), "first defined at %s:2:5", a);
	if (d.n == 1) {
		CHECK_STR(d.v[0].file, b);
		CHECK_INT(d.v[0].line, 3);
		CHECK_INT(d.v[0].col, 11);
		CHECK_MSG(strstr(d.v[0].msg, want) != NULL, "%s", d.v[0].msg);
	}
	diag_free(&d);

	/* A sandbox may use a policy defined in a later file. */
	snprintf(a, sizeof(a), "%s", coretest_tmpfile("a.yaml",
	    "sandboxes:\n  - id: s\n    policy: later\n"));
	snprintf(b, sizeof(b), "%s", coretest_tmpfile("b.yaml",
	    "policies:\n  - name: later\n"));
	diag_init(&d);
	p = policy_load_paths(paths, 2, &d);
	CHECK(p != NULL);
	CHECK_INT(d.n, 0);
	policy_unref(p);
	diag_free(&d);
}

/* Odd but valid documents. */
static void
test_edge_docs(void)
{
	static const struct {
		const char	*yaml;
		size_t		 n_defs;
	} cases[] = {
		{ "", 0 },
		{ "# only a comment\n", 0 },
		{ "---\n...\n", 0 },
		{ "sandboxes:\npolicies:\ncredentials:\n", 0 },
		{ "policies: []\n", 0 },
		{ "policies: [{name: a}, {name: b, allow: [{host: x.org}]}]\n", 2 },
		{ "policies:\n  - name: a\n    dns_types: []\n", 1 },
		{ "policies:\n  - name: \"a\"\n    allow:\n      - host: a.org\n"
		    "        ports: 8080\n        methods: GET\n"
		    "        paths: \"/x\"\n", 1 },
	};
	struct policy *p;
	struct diag d;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		diag_init(&d);
		p = load_one(coretest_tmpfile("edge.yaml", cases[i].yaml), &d);
		CHECK_MSG(p != NULL, "case %zu", i);
		diag_print(&d, stderr);
		if (p != NULL) {
			CHECK_INT(n_explicit(p), cases[i].n_defs);
			policy_unref(p);
		}
		diag_free(&d);
	}
	/* An explicit empty dns_types answers no query type. */
	diag_init(&d);
	p = load_one(coretest_tmpfile("edge.yaml", cases[6].yaml), &d);
	if (p != NULL) {
		CHECK_INT(p->defs[0].n_dns_types, 0);
		policy_unref(p);
	}
	diag_free(&d);
	/* The scalar shorthand for one-item lists. */
	diag_init(&d);
	p = load_one(coretest_tmpfile("edge.yaml", cases[7].yaml), &d);
	if (p != NULL) {
		CHECK_INT(p->defs[0].allow[0].n_ports, 1);
		CHECK_INT(p->defs[0].allow[0].ports[0], 8080);
		CHECK_STR(p->defs[0].allow[0].methods[0], "GET");
		CHECK_STR(p->defs[0].allow[0].paths[0], "/x");
		policy_unref(p);
	}
	diag_free(&d);
}

/* Hostile structure: deep nesting and oversized strings are refused. */
static void
test_limits(void)
{
	struct policy *p;
	struct diag d;
	char *buf;
	size_t i, n = 0;

	buf = malloc(YTREE_MAX_SCALAR + 64);
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	n += (size_t)sprintf(buf, "policies: ");
	for (i = 0; i < YTREE_MAX_DEPTH + 10; i++)
		buf[n++] = '[';
	for (i = 0; i < YTREE_MAX_DEPTH + 10; i++)
		buf[n++] = ']';
	buf[n++] = '\n';
	buf[n] = '\0';
	diag_init(&d);
	p = load_one(coretest_tmpfile("deep.yaml", buf), &d);
	CHECK(p == NULL);
	CHECK(d.n == 1 && strstr(d.v[0].msg, "nesting too deep") != NULL);
	diag_free(&d);

	n = (size_t)sprintf(buf, "policies:\n  - name: ");
	memset(buf + n, 'a', YTREE_MAX_SCALAR + 1);
	n += YTREE_MAX_SCALAR + 1;
	buf[n++] = '\n';
	buf[n] = '\0';
	diag_init(&d);
	p = load_one(coretest_tmpfile("long.yaml", buf), &d);
	CHECK(p == NULL);
	CHECK(d.n == 1 && d.v[0].line == 2 && d.v[0].col == 11 &&
	    strstr(d.v[0].msg, "string too long") != NULL);
	diag_free(&d);
	free(buf);
}

/* 100,000 rules load in well under a second (a looser bound under ASan). */
static void
test_big(void)
{
	struct timespec t0, t1;
	struct policy *p;
	struct diag d;
	char path[PATH_MAX];
	double secs, bound = 3.0;
	FILE *f;
	int i;

#if defined(__SANITIZE_ADDRESS__)
	bound = 20.0;
#endif
	snprintf(path, sizeof(path), "%s/big.yaml", tmp_dir);
	if ((f = fopen(path, "w")) == NULL) {
		CHECK(0);
		return;
	}
	fputs("policies:\n  - name: big\n    allow:\n", f);
	for (i = 0; i < 100000; i++)
		fprintf(f, "      - host: h%d.example.com\n"
		    "        ports: [443]\n", i);
	fputs("    deny:\n      - cidr: 10.0.0.0/8\n", f);
	fclose(f);
	diag_init(&d);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	p = load_one(path, &d);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("100000 rules loaded in %.3f s\n", secs);
	CHECK(p != NULL);
	CHECK_MSG(secs < bound, "%.3f s", secs);
	if (p != NULL) {
		CHECK_INT(p->defs[0].n_allow, 100000);
		CHECK_STR(p->defs[0].allow[99999].host, "h99999.example.com");
		CHECK_INT(p->defs[0].allow[99999].line, 2 * 99999 + 4);
		CHECK_INT(p->defs[0].n_deny, 1);
		policy_unref(p);
	}
	diag_free(&d);
	unlink(path);
}

/* The shipped example must stay loadable. */
static void
test_example(void)
{
	char path[2 * PATH_MAX];
	struct policy *p;
	struct diag d;

	snprintf(path, sizeof(path), "%s/../../../policies/examples/"
	    "coding-agent.yaml", data_dir);
	diag_init(&d);
	p = load_one(path, &d);
	diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(find_def(p, "coding-agent") != NULL);
		policy_unref(p);
	}
	diag_free(&d);
}

/*
 * "default" always exists: deny-all when no file defines it (a sandbox may
 * name it), the file's own when one does (then it is no duplicate).
 */
static void
test_implicit_default(void)
{
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	const struct policy_def *def;
	struct policy *p;
	struct diag d;
	char sum[256];

	diag_init(&d);
	p = load_one(coretest_tmpfile("implicit.yaml",
	    "sandboxes:\n  - id: lone\n    policy: default\n"
	    "    source: [127.0.0.9/32]\n"), &d);
	diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(policy_has(p, "default"));
		CHECK(!policy_has(p, "other"));
		def = find_def(p, "default");
		CHECK(def != NULL && def->implicit && def->n_allow == 0);
		CHECK_INT(n_explicit(p), 0);
		CHECK_INT(policy_identity_by_id(p, "lone", &id), 0);
		CHECK_INT(policy_target_init(&t, "example.com", 11, 443), 0);
		CHECK_INT(policy_decide(p, &id, &t, NULL, NULL, &v), 0);
		CHECK_STR(v.rule, "default-deny");
		CHECK_INT(v.reason, REASON_POLICY_DENY);
		policy_summary(p, sum, sizeof(sum));
		CHECK_STR(sum, "1 file, 1 sandbox, 0 policies (+ the implicit "
		    "deny-all \"default\"), 0 rules, 0 credentials");
		policy_unref(p);
	}
	diag_free(&d);

	diag_init(&d);
	p = load_one(coretest_tmpfile("implicit.yaml",
	    "policies:\n  - name: default\n    allow:\n"
	    "      - host: example.com\n"), &d);
	diag_print(&d, stderr);
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK_INT(p->n_defs, 1);
		def = find_def(p, "default");
		CHECK(def != NULL && !def->implicit && def->n_allow == 1);
		memset(&id, 0, sizeof(id));
		snprintf(id.policy, sizeof(id.policy), "default");
		CHECK_INT(policy_target_init(&t, "example.com", 11, 443), 0);
		CHECK_INT(policy_decide(p, &id, &t, NULL, NULL, &v), 1);
		policy_summary(p, sum, sizeof(sum));
		CHECK_STR(sum, "1 file, 0 sandboxes, 1 policy, 1 rule, "
		    "0 credentials");
		policy_unref(p);
	}
	diag_free(&d);
}

/* git: loaded, seen through the rule's scope, refs matched. */
static void
test_git(void)
{
	struct policy_rule_scope sc;
	struct policy *p;
	struct diag d;
	const char *path;

	diag_init(&d);
	path = coretest_tmpfile("git.yaml", R "host: git.example.com\n"
	    "        tls: intercept\n        git:\n          push: "
	    "[\"refs/heads/bot/*\", refs/tags/v1]\n      - host: b.example.com\n"
	    "        tls: intercept\n        git: {push: [\"refs/*\"], "
	    "delete: true}\n      - host: c.example.com\n");
	p = load_one(path, &d);
	CHECK_MSG(p != NULL, "git policy did not load");
	if (p == NULL) {
		diag_free(&d);
		return;
	}
	CHECK_INT(policy_rule_scope(p, "p:allow[0]", &sc), 0);
	CHECK_INT(sc.git, 1);
	CHECK_INT(sc.n_git_push, 2);
	CHECK_STR(sc.git_push[0], "refs/heads/bot/*");
	CHECK_INT(sc.git_delete, 0);
	CHECK(policy_git_ref_allowed(&sc, POLICY_GIT_CREATE,
	    "refs/heads/bot/x", 16));
	CHECK(policy_git_ref_allowed(&sc, POLICY_GIT_UPDATE,
	    "refs/heads/bot/a/b", 18));
	CHECK(policy_git_ref_allowed(&sc, POLICY_GIT_UPDATE, "refs/tags/v1", 12));
	CHECK(!policy_git_ref_allowed(&sc, POLICY_GIT_UPDATE, "refs/tags/v12",
	    13));
	CHECK(!policy_git_ref_allowed(&sc, POLICY_GIT_UPDATE,
	    "refs/heads/main", 15));
	CHECK(!policy_git_ref_allowed(&sc, POLICY_GIT_UPDATE, "refs/heads/bot",
	    14));
	CHECK(!policy_git_ref_allowed(&sc, POLICY_GIT_DELETE,
	    "refs/heads/bot/x", 16));
	/* A length that cuts the name: only those bytes are matched. */
	CHECK(!policy_git_ref_allowed(&sc, POLICY_GIT_CREATE,
	    "refs/heads/bot/x", 14));
	CHECK_INT(policy_rule_scope(p, "p:allow[1]", &sc), 0);
	CHECK_INT(sc.git_delete, 1);
	CHECK(policy_git_ref_allowed(&sc, POLICY_GIT_DELETE,
	    "refs/heads/main", 15));
	CHECK_INT(policy_rule_scope(p, "p:allow[2]", &sc), 0);
	CHECK_INT(sc.git, 0);
	CHECK(policy_git_ref_allowed(&sc, POLICY_GIT_DELETE,
	    "refs/heads/main", 15));
	policy_unref(p);
	diag_free(&d);
}

int
main(void)
{
	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	test_good();
	test_dir();
	test_load_cfg();
	test_errors();
	test_many_errors();
	test_cross_file();
	test_edge_docs();
	test_limits();
	test_big();
	test_example();
	test_implicit_default();
	test_git();
	return check_summary();
}
