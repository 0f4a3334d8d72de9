/*
 * `sandgate policy check` and `sandgate policy explain`: the policy engine
 * run offline, without a daemon, for ops engineers and CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/decide.h"
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
    "  nothing unless a policy file defines it). It also says whether the\n" \
    "  gateway intercepts the connection (the rule, or a credential bound\n" \
    "  to the host) and which credentials it swaps there, never a value.\n"
/* policy suggest's own page is in cmd_policy_suggest.c. */
#define POLICY_SUGGEST_USAGE \
    "usage: sandgate policy suggest [-c FILE] [--db PATH] --sandbox ID\n" \
    "           [--since T] [--until T] [--name POLICY] [--psl FILE]\n" \
    "  Print a policy document allowing what the sandbox was denied or what\n" \
    "  report mode let pass (sandgate help policy suggest).\n"
#define POLICY_REPLAY_USAGE \
    "usage: sandgate policy replay [-c FILE] [--since T] [--until T]\n" \
    "           [--sandbox ID] [--store URL] [--fail-on WHEN]\n" \
    "           [--format text|json] CANDIDATE...\n" \
    "  Decide the audit log's rows again under a candidate policy and print\n" \
    "  what would change (sandgate help policy replay).\n"
#define POLICY_COMMON_USAGE \
    "  -c FILE   config file (default: ./sandgate.yaml,\n" \
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n"

static const char policy_usage[] =
    POLICY_CHECK_USAGE POLICY_EXPLAIN_USAGE POLICY_SUGGEST_USAGE
    POLICY_REPLAY_USAGE POLICY_COMMON_USAGE;
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
	a.help = "policy check";
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(policy_check_usage, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
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

/*
 * What explain says: the verdict, and what the gateway does with an allowed
 * connection: whether it terminates TLS (the rule says intercept, or a
 * credential of the sandbox's policy is bound to the host: docs/tls.md) and which
 * credentials it swaps there, for which requests. Never a secret value: the
 * vault is not opened.
 */
#define EXPLAIN_MAX_CREDS	32

struct explain {
	const struct policy_identity *id;
	const struct policy_target *t;
	const struct policy_verdict *v;	/* the request's (or the tunnel's) */
	const char	*decision;
	const char	*reason;
	int		 tunnel_allowed;	/* host and port alone, before any request */
	int		 opaque;
	const char	*intercept_by;	/* "rule", "credential", NULL: not intercepted */
	int		 has_scope;
	struct policy_rule_scope scope;	/* of the allow rule that decided */
	const struct policy_credential *bound[EXPLAIN_MAX_CREDS];
	size_t		 n_bound;
	const char	*method, *path;	/* --method/--path, NULL: none */
	const char	*dlp_mode;	/* "block", "report", "off" */
	int		 dlp_applies;	/* scanned here (docs/dlp.md) */
	const char	*dlp_why;
};

/*
 * The gateway's own decision (core/decide.c), offline: no audit store, no
 * keeper, no placeholders, no geo databases. An IP needs no resolver: the
 * address stage applies to it here too.
 */
static void
explain_decide(const struct policy *pol, const struct policy_identity *id,
    const char *host, size_t hostlen, uint16_t port, const char *method,
    const char *path, struct decision *d)
{
	struct decide_env env;
	struct decide_q q;

	memset(&env, 0, sizeof(env));
	env.pol = pol;
	env.keeper_up = 1;
	memset(&q, 0, sizeof(q));
	q.listener = DECIDE_OFFLINE;
	q.id = id;
	q.host = host;
	q.hostlen = hostlen;
	q.port = port;
	q.method = method;
	q.path = path;
	if (decide(&env, &q, d) == REASON_NONE && d->target.is_ip)
		(void)decide_addrs(&env, id, &d->target.ip, 1, d);
}

/* Whether outbound secret detection looks at this destination's requests. */
static void
explain_dlp(struct explain *e, const struct policy *pol)
{
	const struct policy_dlp *pd = policy_dlp_of(pol, e->id->policy);

	e->dlp_mode = pd != NULL ? policy_dlp_mode_word(pd->mode) : "off";
	e->dlp_applies = 0;
	if (pd == NULL)
		e->dlp_why = "the policy has no dlp: (or mode: off)";
	else if (!e->tunnel_allowed)
		e->dlp_why = "the destination is not allowed";
	else if (e->intercept_by == NULL && e->t->port != 80)
		e->dlp_why = "TLS is passed through: nothing is seen";
	else if (policy_dlp_exempt(pd, e->t->host, e->path, NULL))
		e->dlp_why = "an allow entry exempts it";
	else {
		e->dlp_applies = 1;
		e->dlp_why = "request target, headers and bodies are scanned";
	}
}

static void
explain_build(struct explain *e, const struct policy *pol,
    const struct policy_identity *id, const struct policy_target *t,
    const struct policy_verdict *v, int valid)
{
	const struct policy_credential *const *cv;
	struct policy_verdict tv;
	struct decision td;
	size_t i, n;

	memset(e, 0, sizeof(*e));
	e->id = id;
	e->t = t;
	e->v = v;
	/* mode: report: it passes, and the audit row says report and why. */
	e->decision = !v->allow ? "deny" : v->report != REASON_NONE ? "report" :
	    "allow";
	e->reason = !v->allow ? reason_word(v->reason) :
	    v->report != REASON_NONE ? reason_word(v->report) : "allowed";
	if (!valid)
		return;
	cv = policy_credentials(pol, id->policy, &n);
	for (i = 0; i < n && !t->is_ip && e->n_bound < EXPLAIN_MAX_CREDS; i++)
		if (policy_credential_bound(cv[i], t->host))
			e->bound[e->n_bound++] = cv[i];
	/* The connection is decided on host and port before any request. */
	explain_decide(pol, id, t->host, strlen(t->host), t->port, NULL, NULL,
	    &td);
	tv = td.v;
	e->tunnel_allowed = tv.allow;
	e->opaque = tv.opaque;
	if (tv.allow && tv.tls == POLICY_TLS_INTERCEPT)
		e->intercept_by = "rule";
	else if (tv.allow && e->n_bound > 0)
		e->intercept_by = "credential";
	e->has_scope = policy_rule_scope(pol, v->allow ? v->rule : tv.rule,
	    &e->scope) == 0;
	explain_dlp(e, pol);
}

static int
explain_swapped(const struct explain *e)
{
	return e->v->allow && e->intercept_by != NULL;
}

/* A request given with --method/--path outside c's scope: c is not swapped. */
static int
explain_out_of_scope(const struct explain *e, const struct policy_credential *c)
{
	return e->method != NULL && e->path != NULL &&
	    !policy_credential_in_scope(c, e->method, strlen(e->method), e->path,
	    strlen(e->path));
}

static void
text_list(const char *const *v, size_t n, const char *none)
{
	size_t i;

	if (n == 0)
		fputs(none, stdout);
	for (i = 0; i < n; i++)
		printf("%s%s", i > 0 ? ", " : "", v[i]);
}

/* kind oauth2: where the gateway gets the token it swaps in. */
static void
explain_text_oauth2(const struct policy_credential *c)
{
	const struct policy_oauth2 *o = c->oauth2;

	if (o == NULL)
		return;
	printf("  oauth2: the placeholder is swapped for an access token the "
	    "gateway obtains itself (the vault entry holds the client and "
	    "the refresh token, never sent to the sandbox)\n"
	    "    token_url: %s (TLS verified with upstream.ca_bundle; "
	    "redirects not followed)\n    grant: %s\n    scope: %s\n"
	    "    client_auth: %s\n    refresh_before: %llu ms (at most half "
	    "a token's lifetime)\n", o->token_url,
	    o->grant == POLICY_OAUTH2_REFRESH_TOKEN ? "refresh_token (a "
	    "rotated refresh token is stored back in the vault)" :
	    "client_credentials", o->scope != NULL ? o->scope : "-",
	    o->client_auth_body ? "body" : "basic",
	    (unsigned long long)o->refresh_before_ms);
}

static void
explain_json_oauth2(const struct policy_credential *c)
{
	const struct policy_oauth2 *o = c->oauth2;

	printf(",\"oauth2\":");
	if (o == NULL) {
		fputs("null", stdout);
		return;
	}
	printf("{\"token_url\":");
	cmd_json_string(o->token_url);
	printf(",\"grant\":\"%s\",\"scope\":", o->grant ==
	    POLICY_OAUTH2_REFRESH_TOKEN ? "refresh_token" :
	    "client_credentials");
	cmd_json_string(o->scope);
	printf(",\"client_auth\":\"%s\",\"refresh_before_ms\":%llu}",
	    o->client_auth_body ? "body" : "basic",
	    (unsigned long long)o->refresh_before_ms);
}

static void
explain_text_cred(const struct explain *e, const struct policy_credential *c)
{
	printf("credential: %s\n  kind: %s\n  secret: vault entry %s (the "
	    "value is never shown)\n  hosts: ", c->name,
	    policy_cred_kind_name(c->kind), c->secret);
	text_list((const char *const *)c->hosts, c->n_hosts, "-");
	if (explain_swapped(e) && explain_out_of_scope(e, c))
		printf("\n  swapped: no: this request is outside its scope (with "
		    "the placeholder it is refused, credential-scope)\n");
	else if (explain_swapped(e)) {
		printf("\n  swapped: yes, %sover the intercepted TLS connection, "
		    "in header%s ", e->has_scope && (e->scope.n_methods > 0 ||
		    e->scope.n_paths > 0) ? "in the requests above, " : "",
		    c->n_headers > 1 ? "s" : "");
		text_list((const char *const *)c->headers, c->n_headers, "-");
		printf("%s\n  plain HTTP: a placeholder sent without TLS is "
		    "refused (credential-misuse)\n", c->query ?
		    " and in the query string" : "");
	} else
		printf("\n  swapped: no: the request is denied (%s)\n",
		    e->reason);
	if (c->shape_prefix != NULL)
		printf("  placeholder: random, one per sandbox, shaped: \"%s\" "
		    "+ %zu %s characters (%zu in all)", c->shape_prefix,
		    c->shape_length - strlen(c->shape_prefix),
		    c->shape_alphabet_name, c->shape_length);
	else
		printf("  placeholder: %s", c->placeholder != NULL ?
		    "fixed (written in the policy)" : "random, one per sandbox");
	if (c->env != NULL)
		printf(", in $%s", c->env);
	if (c->kind == POLICY_CRED_AWS_SIGV4)
		printf("\n  signing: AWS SigV4, re-signed with the real key (the "
		    "sandbox's placeholder secret%s%s)", c->secret_env != NULL ?
		    " in $" : "", c->secret_env != NULL ? c->secret_env : "");
	printf("\n  exclusive: %s\n", c->exclusive ? "yes: a key of the "
	    "sandbox's own in those headers is refused (foreign-credential)" :
	    "no");
	printf("  require: %s\n", c->require ? "yes: a request to its hosts "
	    "without the placeholder is refused (credential-required)" : "no");
	if (c->n_scope_methods > 0 || c->n_scope_paths > 0) {
		fputs("  scope: methods ", stdout);
		text_list((const char *const *)c->scope_methods,
		    c->n_scope_methods, "any");
		fputs("; paths ", stdout);
		text_list((const char *const *)c->scope_paths,
		    c->n_scope_paths, "any");
		puts(" (elsewhere on its hosts a request with the placeholder "
		    "is refused: credential-scope)");
	} else
		puts("  scope: any method and path");
	explain_text_oauth2(c);
}

static void
explain_text(const struct explain *e)
{
	size_t i;

	printf("decision: %s\nrule: %s\nreason: %s\n", e->decision,
	    e->v->rule, e->reason);
	printf("sandbox: %s (policy %s)\ndestination: %s:%u\n",
	    e->id->sandbox[0] != '\0' ? e->id->sandbox : "any", e->id->policy,
	    e->t->host, e->t->port);
	if (e->tunnel_allowed) {
		printf("tls: %s\n", e->intercept_by == NULL ? "passthrough" :
		    strcmp(e->intercept_by, "rule") == 0 ?
		    "intercept (the rule says tls: intercept)" :
		    "intercept (a credential is bound to this host)");
		printf("opaque: %s\n", e->opaque ? "yes" : "no");
	}
	if (e->has_scope && (e->scope.n_methods > 0 || e->scope.n_paths > 0)) {
		fputs("requests: methods ", stdout);
		text_list(e->scope.methods, e->scope.n_methods, "any");
		fputs("; paths ", stdout);
		text_list(e->scope.paths, e->scope.n_paths, "any");
		putchar('\n');
	}
	if (e->has_scope && e->scope.git) {
		fputs("git push: refs ", stdout);
		text_list(e->scope.git_push, e->scope.n_git_push, "none");
		printf("; delete: %s (other refs: refused, git-ref-denied)\n",
		    e->scope.git_delete ? "yes" : "no");
	}
	for (i = 0; i < e->n_bound; i++)
		explain_text_cred(e, e->bound[i]);
	printf("dlp: %s%s (%s)\n", e->dlp_mode, e->dlp_applies ? "" :
	    ", does not apply", e->dlp_why);
	if (e->n_bound == 0 && !e->t->is_ip)
		puts("credentials: none bound to this host");
	if (e->v->allow && !e->t->is_ip)
		printf("note: the gateway also checks every address the name "
		    "resolves to (internal ranges need allow_private)\n");
}

static void
json_list(const char *const *v, size_t n, int null_when_empty)
{
	size_t i;

	if (n == 0 && null_when_empty) {
		fputs("null", stdout);
		return;
	}
	putchar('[');
	for (i = 0; i < n; i++) {
		if (i > 0)
			putchar(',');
		cmd_json_string(v[i]);
	}
	putchar(']');
}

static void
explain_json_cred(const struct explain *e, const struct policy_credential *c)
{
	printf("{\"name\":");
	cmd_json_string(c->name);
	printf(",\"kind\":\"%s\",\"secret\":", policy_cred_kind_name(c->kind));
	cmd_json_string(c->secret);
	printf(",\"hosts\":");
	json_list((const char *const *)c->hosts, c->n_hosts, 0);
	printf(",\"headers\":");
	json_list((const char *const *)c->headers, c->n_headers, 0);
	printf(",\"query\":%s,\"exclusive\":%s,\"env\":", c->query ? "true" :
	    "false", c->exclusive ? "true" : "false");
	cmd_json_string(c->env);
	printf(",\"secret_env\":");
	cmd_json_string(c->secret_env);
	printf(",\"require\":%s,\"scope\":", c->require ? "true" : "false");
	if (c->n_scope_methods > 0 || c->n_scope_paths > 0) {
		printf("{\"methods\":");
		json_list((const char *const *)c->scope_methods,
		    c->n_scope_methods, 1);
		printf(",\"paths\":");
		json_list((const char *const *)c->scope_paths,
		    c->n_scope_paths, 1);
		putchar('}');
	} else
		fputs("null", stdout);
	printf(",\"placeholder\":\"%s\",\"placeholder_shape\":",
	    c->placeholder != NULL ? "fixed" : c->shape_prefix != NULL ?
	    "shaped" : "per-sandbox");
	if (c->shape_prefix != NULL) {
		printf("{\"prefix\":");
		cmd_json_string(c->shape_prefix);
		printf(",\"length\":%zu,\"alphabet\":\"%s\"}", c->shape_length,
		    c->shape_alphabet_name);
	} else
		printf("null");
	printf(",\"swapped\":%s,\"not_swapped\":",
	    explain_swapped(e) && !explain_out_of_scope(e, c) ? "true" : "false");
	cmd_json_string(!explain_swapped(e) ? e->reason :
	    explain_out_of_scope(e, c) ? "credential-scope" : NULL);
	explain_json_oauth2(c);
	putchar('}');
}

static void
explain_json(const struct explain *e)
{
	size_t i;

	printf("{\"decision\":\"%s\",\"rule\":", e->decision);
	cmd_json_string(e->v->rule);
	printf(",\"reason\":");
	cmd_json_string(e->reason);
	printf(",\"sandbox\":");
	cmd_json_string(e->id->sandbox[0] != '\0' ? e->id->sandbox : NULL);
	printf(",\"policy\":");
	cmd_json_string(e->id->policy);
	printf(",\"host\":");
	cmd_json_string(e->t->host);
	printf(",\"port\":%u,\"tls\":\"%s\",\"opaque\":%s,\"intercept\":%s,"
	    "\"intercept_by\":", e->t->port, e->intercept_by != NULL ?
	    "intercept" : "passthrough", e->opaque ? "true" : "false",
	    e->intercept_by != NULL ? "true" : "false");
	cmd_json_string(e->intercept_by);
	printf(",\"methods\":");
	json_list(e->scope.methods, e->has_scope ? e->scope.n_methods : 0, 1);
	printf(",\"paths\":");
	json_list(e->scope.paths, e->has_scope ? e->scope.n_paths : 0, 1);
	printf(",\"git\":");
	if (e->has_scope && e->scope.git) {
		printf("{\"push\":");
		json_list(e->scope.git_push, e->scope.n_git_push, 0);
		printf(",\"delete\":%s}", e->scope.git_delete ? "true" :
		    "false");
	} else
		fputs("null", stdout);
	printf(",\"credentials\":[");
	for (i = 0; i < e->n_bound; i++) {
		if (i > 0)
			putchar(',');
		explain_json_cred(e, e->bound[i]);
	}
	printf("],\"dlp\":{\"mode\":\"%s\",\"applies\":%s,\"why\":",
	    e->dlp_mode, e->dlp_applies ? "true" : "false");
	cmd_json_string(e->dlp_why);
	printf("}}\n");
}

static int
policy_explain(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	struct policy_identity id;
	struct decision d;
	struct explain e;
	const char *opt, *val, *cfg_path = NULL, *sandbox = NULL, *pname = NULL;
	const char *method = NULL, *path = NULL, *format = "text", *host;
	size_t hostlen;
	uint16_t port;
	int rc = 0;

	cmd_args_init(&a, argc, argv);
	a.help = "policy explain";
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
		else if (strcmp(opt, "format") == 0) {
			if (!cmd_in_list("text|json", val))
				return cmd_bad_value(&a, "text|json", val);
			format = val;
		}
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(policy_explain_usage, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
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
	explain_decide(pol, &id, host, hostlen, port, method, path, &d);
	explain_build(&e, pol, &id, &d.target, &d.v, d.target_ok);
	e.method = method;
	e.path = path;
	if (d.target_ok)
		explain_dlp(&e, pol);	/* an allow entry may name the path */
	if (strcmp(format, "json") == 0)
		explain_json(&e);
	else
		explain_text(&e);
done:
	policy_unref(pol);
	config_free(cfg);
	return rc;
}

int
cmd_policy(int argc, char *argv[])
{
	if (argc < 2)
		return cmd_usage_error(policy_usage, "policy: give check, explain, "
		    "suggest or replay");
	cmd_hoist_config(argc, argv);
	if (strcmp(argv[1], "check") == 0)
		return policy_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "explain") == 0)
		return policy_explain(argc - 1, argv + 1);
	if (strcmp(argv[1], "suggest") == 0)
		return cmd_policy_suggest(argc - 1, argv + 1);
	if (strcmp(argv[1], "replay") == 0)
		return cmd_policy_replay(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(policy_usage, stdout);
		return 0;
	}
	return cmd_usage_error(policy_usage, "policy: unknown subcommand: %s "
	    "(sandgate help policy)", argv[1]);
}
