/*
 * `sandgate approvals`, `sandgate approve ID` and `sandgate deny ID`: the
 * operator's side of mode: ask (docs/approvals.md) over the admin API --
 * list the questions held requests wait on, and answer them.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/admin_client.h"
#include "core/approval.h"
#include "core/config.h"
#include "sandgate.h"

static const char approvals_usage[] =
    "usage: sandgate approvals [-c FILE] [--socket PATH] [--json]\n"
    "  The questions of mode: ask the running gateway holds requests on:\n"
    "  ID, sandbox, destination, when its first request came, how many\n"
    "  requests wait on it, and how long it still waits.\n"
    "  -c FILE        config file naming admin_socket\n"
    "  --socket PATH  the admin socket, instead of the config's admin_socket\n"
    "  --json         the admin API's answer as it is\n";

static const char approve_usage[] =
    "usage: sandgate approve ID [--for DURATION | --always] [--scope SCOPE]\n"
    "                       [-c FILE] [--socket PATH] [--json]\n"
    "  Let the requests held on question ID go on. Without --for, only\n"
    "  they do: a later request asks again. --for DURATION (30m, 1h)\n"
    "  lets the sandbox's requests in SCOPE go by themselves that long.\n"
    "  --scope host|host:port|*.domain  what --for covers (default: the\n"
    "                 question's host, any port)\n";

static const char deny_usage[] =
    "usage: sandgate deny ID [--for DURATION] [--scope SCOPE]\n"
    "                    [-c FILE] [--socket PATH] [--json]\n"
    "  Refuse the requests held on question ID (approval-denied). --for\n"
    "  DURATION refuses the sandbox's requests in SCOPE at once that long.\n";

/* One call: 0 and *j (an object), or the exit status. */
static int
call(const char *cmd, const char *sock, const char *method, const char *path,
    const char *body, int *st, char **out, json_t **j)
{
	*j = NULL;
	if ((*st = admin_call(sock, method, path, body, out)) == -1)
		return cmd_error("%s: cannot reach the gateway's admin socket "
		    "%s: %s (is sandgate serve running, and may you open it?)",
		    cmd, sock, strerror(errno));
	if ((*j = json_loads(*out, 0, NULL)) == NULL || !json_is_object(*j)) {
		json_decref(*j);
		free(*out);
		return cmd_error("%s: the admin API answered %d without a JSON "
		    "object", cmd, *st);
	}
	return 0;
}

static void
print_list(json_t *j)
{
	json_t *a = json_object_get(j, "approvals"), *e;
	char when[32];
	time_t t;
	struct tm tm;
	size_t i;

	if (json_array_size(a) == 0) {
		printf("no pending questions\n");
		return;
	}
	printf("%-6s %-20s %-32s %-20s %7s %8s\n", "ID", "SANDBOX",
	    "DESTINATION", "FIRST", "WAITING", "EXPIRES");
	json_array_foreach(a, i, e) {
		t = (time_t)(json_integer_value(json_object_get(e,
		    "first_ms")) / 1000);
		if (gmtime_r(&t, &tm) == NULL ||
		    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			snprintf(when, sizeof(when), "-");
		printf("%-6lld ", (long long)json_integer_value(
		    json_object_get(e, "id")));
		cmd_put_clean(stdout, cmd_json_str(e, "sandbox"));
		printf("%*s", (int)(21 - (strlen(cmd_json_str(e, "sandbox")) > 20 ? 20 :
		    strlen(cmd_json_str(e, "sandbox")))), "");
		cmd_put_clean(stdout, cmd_json_str(e, "destination"));
		printf("%*s", (int)(33 - (strlen(cmd_json_str(e, "destination")) > 32 ?
		    32 : strlen(cmd_json_str(e, "destination")))), "");
		printf("%-20s %7lld %7llds\n", when, (long long)
		    json_integer_value(json_object_get(e, "waiting")),
		    (long long)json_integer_value(json_object_get(e,
		    "expires_in_ms")) / 1000);
	}
}

int
cmd_approvals(int argc, char *argv[])
{
	const char *cfg_path = NULL, *sock = NULL, *opt, *val;
	struct cmd_args a;
	char *path = NULL, *body = NULL;
	json_t *j;
	int json = 0, rc, st;

	if (cmd_wants_help(argc, argv)) {
		fputs(approvals_usage, stdout);
		return 0;
	}
	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|socket", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "socket") == 0)
			sock = val;
		else if (strcmp(opt, "json") == 0)
			json = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(approvals_usage, "approvals: unexpected "
		    "argument: %s", a.ops[0]);
	if ((rc = cmd_admin_socket(cfg_path, sock, "approvals", &path)) != 0)
		return rc;
	rc = call("approvals", path, "GET", "/v1/approvals", NULL, &st, &body,
	    &j);
	free(path);
	if (rc != 0)
		return rc;
	if (st != 200)
		rc = cmd_error("approvals: the admin API answered %d: %s", st,
		    cmd_json_str(j, "error"));
	else if (json)
		fputs(body, stdout);
	else
		print_list(j);
	json_decref(j);
	free(body);
	return rc;
}

/* The first directory among the config's policies: where approved/ goes. */
static int
policies_dir(const char *cfg_path, char *out, size_t len)
{
	struct config *cfg;
	struct stat st;
	int i, found = -1;

	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return -1;
	for (i = 0; i < cfg->n_policy_paths && found == -1; i++)
		if (stat(cfg->policy_paths[i], &st) == 0 &&
		    S_ISDIR(st.st_mode) && (size_t)snprintf(out, len, "%s",
		    cfg->policy_paths[i]) < len)
			found = 0;
	config_free(cfg);
	if (found == -1)
		cmd_error("approve --always: the config's policies name no "
		    "directory to write approved/ in");
	return found;
}

/* [a-z0-9.-] of s, the rest as '_': a file name's part. */
static void
file_part(const char *s, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		out[i] = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '.' || s[i] == '-' ? s[i] : '_';
	out[i] = '\0';
}

/*
 * --always: the question's sandbox's policy gets an allow rule for its
 * destination (or scope) in an overlay file of its own under the policies
 * directory's approved/, and the gateway reloads: kept across restarts,
 * shown by policy check and explain. 0, or the exit status.
 */
/*
 * 32 or 128 when host is an IPv4 or IPv6 literal (brackets allowed), its
 * plain form in out; 0 when it is a name.
 */
static int
ip_literal(const char *host, char *out, size_t len)
{
	unsigned char a[16];
	size_t n = strlen(host);

	if (inet_pton(AF_INET, host, a) == 1) {
		snprintf(out, len, "%s", host);
		return 32;
	}
	if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (n < len) {
		snprintf(out, len, "%.*s", (int)n, host);
		if (inet_pton(AF_INET6, out, a) == 1)
			return 128;
	}
	return 0;
}

static int
write_always(const char *cfg_path, const char *sock, const char *id,
    const char *scope)
{
	char *body = NULL, dir[4096], path[4400], hp[256], uri[128];
	char text[1024], user[64];
	const char *host = NULL, *pol = NULL, *sb = NULL;
	json_t *j = NULL, *sj = NULL, *e, *q = NULL;
	long long port = 0;
	char ipbuf[INET6_ADDRSTRLEN];
	struct approval_scope sc;
	size_t i;
	int st, rc, fd, n, ip;

	if ((rc = call("approve", sock, "GET", "/v1/approvals", NULL, &st,
	    &body, &j)) != 0)
		return rc;
	free(body);
	json_array_foreach(json_object_get(j, "approvals"), i, e)
		if (json_integer_value(json_object_get(e, "id")) ==
		    strtoll(id, NULL, 10))
			q = e;
	if (q == NULL) {
		json_decref(j);
		return cmd_error("approve %s: no such pending question", id);
	}
	host = cmd_json_str(q, "host");
	sb = cmd_json_str(q, "sandbox");
	port = json_integer_value(json_object_get(q, "port"));
	snprintf(uri, sizeof(uri), "/v1/sandboxes/%s", sb);
	if ((rc = call("approve", sock, "GET", uri, NULL, &st, &body,
	    &sj)) != 0) {
		json_decref(j);
		return rc;
	}
	free(body);
	pol = cmd_json_str(sj, "policy");
	if (st != 200 || *pol == '\0') {
		json_decref(j);
		json_decref(sj);
		return cmd_error("approve %s: the gateway does not know sandbox "
		    "%s's policy", id, sb);
	}
	/*
	 * A scope is the API's (approval_scope_parse): refused unless it
	 * covers the question's destination, and written from what it parsed
	 * to, never from the text as typed.
	 */
	if (scope != NULL && (approval_scope_parse(scope, &sc) == -1 ||
	    !approval_scope_covers(&sc, host, (uint16_t)port))) {
		rc = cmd_error("approve %s: --scope %s is no scope that covers "
		    "the question's destination %s:%lld", id, scope, host, port);
		json_decref(j);
		json_decref(sj);
		return rc;
	}
	if (scope != NULL) {
		host = sc.host;
		port = sc.kind == APPROVAL_SCOPE_HOSTPORT ? sc.port : 0;
	}
	if ((scope == NULL || sc.kind != APPROVAL_SCOPE_DOMAIN) &&
	    (ip = ip_literal(host, ipbuf, sizeof(ipbuf))) != 0)
		/* An IP destination is a cidr: rule (a host: one is refused). */
		n = port != 0 ? snprintf(text, sizeof(text), "    - cidr: "
		    "\"%s/%d\"\n      ports: [%lld]\n", ipbuf, ip, port) :
		    snprintf(text, sizeof(text), "    - cidr: \"%s/%d\"\n",
		    ipbuf, ip);
	else if (scope != NULL && sc.kind == APPROVAL_SCOPE_DOMAIN)
		n = snprintf(text, sizeof(text), "    - host: \"%s\"\n"
		    "    - host: \"*.%s\"\n", sc.host, sc.host);
	else
		n = port != 0 ? snprintf(text, sizeof(text), "    - host: "
		    "\"%s\"\n      ports: [%lld]\n", host, port) :
		    snprintf(text, sizeof(text), "    - host: \"%s\"\n", host);
	if (n < 0 || (size_t)n >= sizeof(text) || strpbrk(scope != NULL ?
	    scope : host, "\"\\\n") != NULL) {
		json_decref(j);
		json_decref(sj);
		return cmd_error("approve %s: a scope that cannot be written",
		    id);
	}
	if (policies_dir(cfg_path, dir, sizeof(dir)) == -1) {
		json_decref(j);
		json_decref(sj);
		return 1;
	}
	file_part(scope != NULL ? scope : host, hp, sizeof(hp));
	snprintf(path, sizeof(path), "%s/approved", dir);
	if (mkdir(path, 0755) == -1 && errno != EEXIST) {
		json_decref(j);
		json_decref(sj);
		return cmd_error("approve: %s: %s", path, strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/approved/%s--%s--%lld.yaml", dir, pol,
	    hp, scope != NULL ? 0 : port);
	snprintf(user, sizeof(user), "%s", getenv("SUDO_USER") != NULL ?
	    getenv("SUDO_USER") : getenv("USER") != NULL ? getenv("USER") :
	    "?");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1 || dprintf(fd, "# sandgate approve %s --always: sandbox "
	    "%s, %s:%lld (docs/approvals.md)\napproved:\n  %s:\n%s", id, sb,
	    host, port, pol, text) < 0 || close(fd) == -1) {
		json_decref(j);
		json_decref(sj);
		return cmd_error("approve: %s: %s", path, strerror(errno));
	}
	json_decref(j);
	json_decref(sj);
	if ((rc = call("approve", sock, "POST", "/v1/reload", NULL, &st, &body,
	    &j)) != 0)
		return rc;
	free(body);
	if (st != 200 || !json_is_true(json_object_get(j, "ok"))) {
		(void)unlink(path);
		json_decref(j);
		return cmd_error("approve %s --always: the gateway did not "
		    "take %s; removed it", id, path);
	}
	json_decref(j);
	printf("approve %s --always: wrote %s\n", id, path);
	return 0;
}

static int
answer(int argc, char *argv[], int approve)
{
	const char *cmd = approve ? "approve" : "deny";
	const char *usage = approve ? approve_usage : deny_usage;
	const char *cfg_path = NULL, *sock = NULL, *opt, *val;
	const char *forv = NULL, *scope = NULL, *id;
	struct cmd_args a;
	char *path = NULL, *body = NULL, *req, uri[64], *end;
	uint64_t ms;
	json_t *j, *o;
	int json = 0, always = 0, rc, st;

	if (cmd_wants_help(argc, argv)) {
		fputs(usage, stdout);
		return 0;
	}
	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|socket|for|scope",
	    &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "socket") == 0)
			sock = val;
		else if (strcmp(opt, "json") == 0)
			json = 1;
		else if (strcmp(opt, "for") == 0) {
			if (config_parse_duration_ms(val, &ms) == -1 || ms == 0)
				return cmd_bad_value(&a, "a duration such as "
				    "30m or 1h", val);
			forv = val;
		} else if (strcmp(opt, "scope") == 0)
			scope = val;
		else if (approve && strcmp(opt, "always") == 0)
			always = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops != 1)
		return cmd_usage_error(usage, "%s: one question ID", cmd);
	id = a.ops[0];
	if (strtoull(id, &end, 10) == 0 || *end != '\0' || *id < '0' ||
	    *id > '9')
		return cmd_usage_error(usage, "%s: not a question ID: %s", cmd,
		    id);
	if (always && forv != NULL)
		return cmd_usage_error(usage, "%s: --for or --always, not both",
		    cmd);
	if ((rc = cmd_admin_socket(cfg_path, sock, cmd, &path)) != 0)
		return rc;
	/* The rule first: the requests waiting then go on under it. */
	if (always) {
		if ((rc = write_always(cfg_path, path, id, scope)) != 0) {
			free(path);
			return rc;
		}
		always = 0;
		scope = NULL;
	}
	o = json_pack("{s:s}", "answer", approve ? "approve" : "deny");
	if (o != NULL && forv != NULL)
		json_object_set_new(o, "for", json_string(forv));
	if (o != NULL && scope != NULL)
		json_object_set_new(o, "scope", json_string(scope));
	if (o != NULL && always)
		json_object_set_new(o, "always", json_true());
	req = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (req == NULL) {
		free(path);
		return cmd_error("%s: out of memory", cmd);
	}
	snprintf(uri, sizeof(uri), "/v1/approvals/%s", id);
	rc = call(cmd, path, "POST", uri, req, &st, &body, &j);
	free(req);
	free(path);
	if (rc != 0)
		return rc;
	if (json)
		fputs(body, stdout);
	if (st != 200)
		rc = cmd_error("%s %s: %s", cmd, id, cmd_json_str(j, "error"));
	else if (!json)
		printf("question %s: %s (%lld request%s waiting)\n", id,
		    approve ? "approved" : "denied", (long long)
		    json_integer_value(json_object_get(j, "waiting")),
		    json_integer_value(json_object_get(j, "waiting")) == 1 ?
		    "" : "s");
	json_decref(j);
	free(body);
	return rc;
}

int
cmd_approve(int argc, char *argv[])
{
	return answer(argc, argv, 1);
}

int
cmd_deny(int argc, char *argv[])
{
	return answer(argc, argv, 0);
}
