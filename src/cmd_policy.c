/*
 * `sandgate policy check` and `sandgate policy explain`: the policy engine
 * run offline, without a daemon, for ops engineers and CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/policy.h"
#include "core/reason.h"
#include "sandgate.h"

#define POLICY_CHECK_USAGE \
    "usage: sandgate policy check [-c FILE]\n" \
    "  Load the config and every policy file as serve would; print one\n" \
    "  FILE:LINE:COL: message line per error and a summary. Exit 0 when\n" \
    "  all is valid, 1 otherwise.\n"
#define POLICY_EXPLAIN_USAGE \
    "usage: sandgate policy explain [-c FILE] --sandbox ID|--policy NAME\n" \
    "           [--method M] [--path P] [--format text|json]\n" \
    "           HOST[:PORT]|IP[:PORT]\n" \
    "  Print the decision (allow|deny, or report where a policy in mode:\n" \
    "  report would deny), the rule that made it and the reason, without a\n" \
    "  running gateway. HOST may be a name, an IPv4 address or a bracketed\n" \
    "  IPv6 address; PORT defaults to 443. Exit 0 for any decision, 1 for\n" \
    "  an unknown sandbox or policy. --policy NAME decides as for a launcher\n" \
    "  sandbox registered under NAME (\"default\" always exists: it allows\n" \
    "  nothing unless a policy file defines it).\n"
/* policy suggest's own page is in cmd_policy_suggest.c. */
#define POLICY_SUGGEST_USAGE \
    "usage: sandgate policy suggest [-c FILE] [--db PATH] --sandbox ID\n" \
    "           [--since T] [--until T] [--name POLICY] [--psl FILE]\n" \
    "  Print a policy document allowing what the sandbox was denied or what\n" \
    "  report mode let pass (sandgate help policy suggest).\n"
#define POLICY_COMMON_USAGE \
    "  -c FILE   config file (default: ./sandgate.yaml,\n" \
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n"

static const char policy_usage[] =
    POLICY_CHECK_USAGE POLICY_EXPLAIN_USAGE POLICY_SUGGEST_USAGE
    POLICY_COMMON_USAGE;
static const char policy_check_usage[] = POLICY_CHECK_USAGE POLICY_COMMON_USAGE;
static const char policy_explain_usage[] =
    POLICY_EXPLAIN_USAGE POLICY_COMMON_USAGE;

static int
policy_check(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	const char *opt, *val, *cfg_path = NULL;
	char sum[256];

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(policy_check_usage, stdout);
			return 0;
		} else
			return cmd_usage_error(policy_check_usage, "policy check: bad "
			    "option: %s", a.bad ? a.bad : opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(policy_check_usage, "policy check: unexpected "
		    "argument: %s", a.ops[0]);
	if (cmd_load(cfg_path, &cfg, &pol) == -1)
		return 1;
	policy_summary(pol, sum, sizeof(sum));
	printf("%s: ok: %s\n", cfg->file ? cfg->file : "built-in defaults", sum);
	policy_unref(pol);
	config_free(cfg);
	return 0;
}

/* HOST[:PORT], [V6]:PORT or a bare IPv6 address. */
static int
split_hostport(const char *s, const char **host, size_t *hostlen,
    uint16_t *port)
{
	const char *colon = NULL, *rb;
	char *end;
	unsigned long v;

	*port = 443;
	if (s[0] == '[') {
		if ((rb = strchr(s, ']')) == NULL)
			return -1;
		*host = s + 1;
		*hostlen = (size_t)(rb - s - 1);
		/* Brackets hold IPv6 only, never a name or IPv4 (as on the wire). */
		if (memchr(*host, ':', *hostlen) == NULL)
			return -1;
		if (rb[1] == '\0')
			return 0;
		if (rb[1] != ':')
			return -1;
		colon = rb + 1;
	} else {
		colon = strchr(s, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL)
			colon = NULL;	/* bare IPv6 */
		*host = s;
		*hostlen = colon ? (size_t)(colon - s) : strlen(s);
		if (colon == NULL)
			return 0;
	}
	v = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || v == 0 ||
	    v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static void
json_string(const char *s)
{
	if (s == NULL) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int
policy_explain(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	const char *opt, *val, *cfg_path = NULL, *sandbox = NULL, *pname = NULL;
	const char *method = NULL, *path = NULL, *format = "text", *host;
	const char *reason, *decision;
	size_t hostlen;
	uint16_t port;
	int rc = 0;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|sandbox|policy|method|path|format",
	    &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "sandbox") == 0)
			sandbox = val;
		else if (strcmp(opt, "policy") == 0)
			pname = val;
		else if (strcmp(opt, "method") == 0)
			method = val;
		else if (strcmp(opt, "path") == 0)
			path = val;
		else if (strcmp(opt, "format") == 0)
			format = val;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(policy_explain_usage, stdout);
			return 0;
		} else
			return cmd_usage_error(policy_explain_usage, "policy explain: bad "
			    "option: %s", a.bad ? a.bad : opt);
	}
	if ((sandbox == NULL) == (pname == NULL))
		return cmd_usage_error(policy_explain_usage, "policy explain: give "
		    "--sandbox or --policy");
	if (a.n_ops != 1)
		return cmd_usage_error(policy_explain_usage, "policy explain: give one "
		    "HOST[:PORT]");
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
		return cmd_usage_error(policy_explain_usage, "policy explain: --format is "
		    "text or json");
	if ((method != NULL) != (path != NULL) && path == NULL)
		path = "/";
	if (path != NULL && method == NULL)
		method = "GET";
	if (split_hostport(a.ops[0], &host, &hostlen, &port) == -1)
		return cmd_usage_error(policy_explain_usage, "policy explain: bad "
		    "destination: %s", a.ops[0]);
	if (cmd_load(cfg_path, &cfg, &pol) == -1)
		return 1;
	if (pname != NULL) {
		if (!policy_has(pol, pname)) {
			rc = cmd_error("unknown policy: %s", pname);
			goto done;
		}
		memset(&id, 0, sizeof(id));
		snprintf(id.policy, sizeof(id.policy), "%s", pname);
	} else if (policy_identity_by_id(pol, sandbox, &id) == -1) {
		rc = cmd_error("unknown sandbox: %s", sandbox);
		goto done;
	}
	if (policy_target_init(&t, host, hostlen, port) == -1) {
		memset(&v, 0, sizeof(v));
		snprintf(v.rule, sizeof(v.rule), "default-deny");
		v.reason = REASON_INVALID_HOST;
		snprintf(t.host, sizeof(t.host), "%.*s", (int)hostlen, host);
		t.port = port;
	} else if (policy_decide(pol, &id, &t, method, path, &v) && t.is_ip) {
		/* An IP needs no resolver: step 4 applies here too. */
		policy_check_addrs(pol, &id, &t, &t.ip, 1, &v);
	}
	/* mode: report: it passes, and the audit row says report and why. */
	decision = !v.allow ? "deny" : v.report != REASON_NONE ? "report" :
	    "allow";
	reason = !v.allow ? reason_word(v.reason) : v.report != REASON_NONE ?
	    reason_word(v.report) : "allowed";
	if (strcmp(format, "json") == 0) {
		printf("{\"decision\":\"%s\",\"rule\":", decision);
		json_string(v.rule);
		printf(",\"reason\":");
		json_string(reason);
		printf(",\"sandbox\":");
		json_string(id.sandbox[0] != '\0' ? id.sandbox : NULL);
		printf(",\"policy\":");
		json_string(id.policy);
		printf(",\"host\":");
		json_string(t.host);
		printf(",\"port\":%u,\"tls\":\"%s\",\"opaque\":%s}\n", t.port,
		    v.tls == POLICY_TLS_INTERCEPT ? "intercept" : "passthrough",
		    v.opaque ? "true" : "false");
	} else {
		printf("decision: %s\nrule: %s\nreason: %s\n", decision,
		    v.rule, reason);
		printf("sandbox: %s (policy %s)\ndestination: %s:%u\n",
		    id.sandbox[0] != '\0' ? id.sandbox : "any", id.policy,
		    t.host, t.port);
		if (v.allow)
			printf("tls: %s\nopaque: %s\n",
			    v.tls == POLICY_TLS_INTERCEPT ? "intercept" : "passthrough",
			    v.opaque ? "yes" : "no");
		if (v.allow && !t.is_ip)
			printf("note: the gateway also checks every address the name "
			    "resolves to (internal ranges need allow_private)\n");
	}
done:
	policy_unref(pol);
	config_free(cfg);
	return rc;
}

int
cmd_policy(int argc, char *argv[])
{
	if (argc < 2)
		return cmd_usage_error(policy_usage, "policy: give check, explain or suggest");
	cmd_hoist_config(argc, argv);
	if (strcmp(argv[1], "check") == 0)
		return policy_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "explain") == 0)
		return policy_explain(argc - 1, argv + 1);
	if (strcmp(argv[1], "suggest") == 0)
		return cmd_policy_suggest(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(policy_usage, stdout);
		return 0;
	}
	return cmd_usage_error(policy_usage, "policy: unknown subcommand: %s",
	    argv[1]);
}
