/*
 * `sandgate status` and `sandgate reload`: the admin API (GET /v1/status,
 * POST /v1/reload, docs/admin-api.md) for operators, without curl: one
 * screen of what the running gateway is doing, and a reload whose errors
 * read as FILE:LINE:COL: message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/admin_client.h"
#include "core/config.h"
#include "sandgate.h"

static const char status_usage[] =
    "usage: sandgate status [-c FILE] [--socket PATH] [--json]\n"
    "  One screen of the running gateway, from its admin API: version and\n"
    "  uptime, listeners, workers and connections, the key keeper, policies\n"
    "  and sandboxes loaded, requests/s and denials/s over the last minute,\n"
    "  the audit log's health and the last reload's result.\n"
    "  -c FILE        config file naming admin_socket (default: ./sandgate.yaml,\n"
    "                 /etc/sandgate/sandgate.yaml, else built-in defaults)\n"
    "  --socket PATH  the admin socket, instead of the config's admin_socket\n"
    "  --json         the admin API's answer as it is, one JSON object\n"
    "  Exit status: 0 the gateway answered, 1 it could not be reached.\n";

static const char reload_usage[] =
    "usage: sandgate reload [-c FILE] [--socket PATH] [--json]\n"
    "  Reload the policies of the running gateway through its admin API (as\n"
    "  SIGHUP does). Each error is printed as FILE:LINE:COL: message; the old\n"
    "  policy stays in force. Keys that only a restart applies are named.\n"
    "  -c FILE        config file naming admin_socket\n"
    "  --socket PATH  the admin socket, instead of the config's admin_socket\n"
    "  --json         the admin API's answer as it is\n"
    "  Exit status: 0 reloaded, 1 not (errors, or the gateway not reached).\n";

static long long
num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) :
	    json_is_real(v) ? (long long)json_real_value(v) : 0;
}

static double
real(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

static const char *
plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* "2d 03h", "3h 04m", "5m 06s", "7s". */
static void
print_uptime(long long s)
{
	if (s >= 86400)
		printf("%lldd %02lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		printf("%lldh %02lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		printf("%lldm %02llds", s / 60, s % 60);
	else
		printf("%llds", s);
}

static void
print_listeners(json_t *lis)
{
	static const char *const names[] = { "http", "socks5", "dns",
	    "transparent", "ingress", "metrics" };
	size_t i;
	int any = 0;

	printf("listeners    ");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		json_t *v = json_object_get(lis, names[i]);

		if (!json_is_string(v))
			continue;
		printf("%s%s ", any ? ", " : "", names[i]);
		cmd_put_clean(stdout, json_string_value(v));
		any = 1;
	}
	printf("%s\n", any ? "" : "none");
	if (json_is_string(json_object_get(lis, "admin"))) {
		printf("admin        ");
		cmd_put_clean(stdout, cmd_json_str(lis, "admin"));
		putchar('\n');
	}
}

static void
print_status(json_t *j)
{
	json_t *kp = json_object_get(j, "keeper"), *pc = json_object_get(j,
	    "policies"), *r = json_object_get(j, "rates"), *a =
	    json_object_get(j, "audit"), *lr = json_object_get(j, "last_reload");
	long long n;

	printf("sandgate %s, up ", cmd_json_clean(j, "version"));
	print_uptime(num(j, "uptime_s"));
	printf(" (since %s)\n", cmd_json_clean(j, "started"));
	printf("workers      %lld; connections %lld of %lld, %lld refused at "
	    "the limit\n", num(j, "workers"), num(j, "connections"),
	    num(j, "max_connections"), num(j, "refused"));
	print_listeners(json_object_get(j, "listeners"));
	if (json_is_true(json_object_get(kp, "up")))
		printf("keeper       up (pid %lld, %lld restart%s)\n",
		    num(kp, "pid"), num(kp, "restarts"),
		    plural(num(kp, "restarts"), "", "s"));
	else
		printf("keeper       DOWN (%lld restart%s): interception and "
		    "credentials wait for it\n", num(kp, "restarts"),
		    plural(num(kp, "restarts"), "", "s"));
	n = num(pc, "dynamic_sandboxes");
	printf("policies     %lld file%s, %lld sandbox%s", num(pc, "files"),
	    plural(num(pc, "files"), "", "s"), num(pc, "sandboxes"),
	    plural(num(pc, "sandboxes"), "", "es"));
	if (n > 0)
		printf(" (+%lld registered)", n);
	printf(", %lld polic%s, %lld rule%s, %lld credential%s",
	    num(pc, "policies"), plural(num(pc, "policies"), "y", "ies"),
	    num(pc, "rules"), plural(num(pc, "rules"), "", "s"),
	    num(pc, "credentials"), plural(num(pc, "credentials"), "", "s"));
	if (num(pc, "report") > 0)
		printf("; %lld in mode: report", num(pc, "report"));
	putchar('\n');
	if (real(r, "window_s") >= 1)
		printf("traffic      %.1f requests/s, %.1f denials/s over the "
		    "last %.0f s", real(r, "requests_per_s"),
		    real(r, "denials_per_s"), real(r, "window_s"));
	else
		printf("traffic      no rate yet (up under a second)");
	printf("; %lld requests, %lld denied since start\n",
	    num(r, "requests_total"), num(r, "denials_total"));
	printf("audit        %s: %lld rows written, %lld waiting, %lld dropped, "
	    "%lld write failure%s, %lld checkpoint failure%s\n",
	    json_is_true(json_object_get(a, "healthy")) ? "healthy" :
	    json_is_true(json_object_get(a, "unavailable")) ? "UNAVAILABLE" :
	    "FAILING", num(a, "rows_written"), num(a, "rows_waiting"),
	    num(a, "rows_dropped"), num(a, "write_failures"),
	    plural(num(a, "write_failures"), "", "s"),
	    num(a, "checkpoint_failures"),
	    plural(num(a, "checkpoint_failures"), "", "s"));
	if (!json_is_object(lr)) {
		printf("last reload  none since start\n");
		return;
	}
	if (json_is_true(json_object_get(lr, "ok"))) {
		printf("last reload  ok at %s (%s)", cmd_json_clean(lr, "at"),
		    cmd_json_clean(lr, "source"));
		if ((n = num(lr, "needs_restart")) > 0)
			printf("; %lld key%s need%s a restart", n,
			    plural(n, "", "s"), plural(n, "s", ""));
		putchar('\n');
		return;
	}
	n = num(lr, "errors");
	printf("last reload  FAILED at %s (%s), %lld error%s; the policy before "
	    "it stays in force\n", cmd_json_clean(lr, "at"),
	    cmd_json_clean(lr, "source"), n,
	    plural(n, "", "s"));
	if (json_is_string(json_object_get(lr, "first_error"))) {
		printf("             ");
		cmd_put_clean(stdout, cmd_json_str(lr, "first_error"));
		putchar('\n');
	}
}

/* One call; the reply parsed, or an error said (1). */
static int
call(const char *cmd, const char *sock, const char *method, const char *path,
    int *status, char **body, json_t **j)
{
	*j = NULL;
	*body = NULL;
	if ((*status = admin_call(sock, method, path, NULL, body)) == -1)
		return cmd_error("%s: cannot reach the gateway's admin socket "
		    "%s: %s (is sandgate serve running, and may you open it?)",
		    cmd, sock, strerror(errno));
	if ((*j = json_loads(*body, 0, NULL)) == NULL ||
	    !json_is_object(*j)) {
		json_decref(*j);
		*j = NULL;
		free(*body);
		*body = NULL;
		return cmd_error("%s: the admin API answered %d without a JSON "
		    "object", cmd, *status);
	}
	return 0;
}

static int
scan(int argc, char *argv[], const char *cmd, const char *usage,
    const char **cfg_path, const char **sock, int *json)
{
	struct cmd_args a;
	const char *opt, *val;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|socket", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			*cfg_path = val;
		else if (strcmp(opt, "socket") == 0)
			*sock = val;
		else if (strcmp(opt, "json") == 0)
			*json = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(usage, "%s: unexpected argument: %s",
		    cmd, a.ops[0]);
	return 0;
}

/*
 * What status and reload share: --help, the options, the socket, the one
 * call. -1 when the answer is in *st, *body and *j (the caller frees them);
 * else the exit status (0 after --help).
 */
static int
admin_cmd(int argc, char *argv[], const char *cmd, const char *usage,
    const char *method, const char *uri, int *json, int *st, char **body,
    json_t **j)
{
	const char *cfg_path = NULL, *sock = NULL;
	char *path = NULL;
	int rc;

	if (cmd_wants_help(argc, argv)) {
		fputs(usage, stdout);
		return 0;
	}
	if ((rc = scan(argc, argv, cmd, usage, &cfg_path, &sock, json)) != 0 ||
	    (rc = cmd_admin_socket(cfg_path, sock, cmd, &path)) != 0)
		return rc;
	rc = call(cmd, path, method, uri, st, body, j);
	free(path);
	return rc != 0 ? rc : -1;
}

int
cmd_status(int argc, char *argv[])
{
	char *body;
	json_t *j;
	int json = 0, rc, st;

	if ((rc = admin_cmd(argc, argv, "status", status_usage, "GET",
	    "/v1/status", &json, &st, &body, &j)) != -1)
		return rc;
	rc = 0;
	if (st != 200)
		rc = cmd_error("status: the admin API answered %d: %s", st,
		    cmd_json_clean(j, "error"));
	else if (json)
		fputs(body, stdout);
	else
		print_status(j);
	json_decref(j);
	free(body);
	return rc;
}

int
cmd_reload(int argc, char *argv[])
{
	char *body;
	json_t *j, *e;
	size_t i;
	int json = 0, rc, st;

	if ((rc = admin_cmd(argc, argv, "reload", reload_usage, "POST",
	    "/v1/reload", &json, &st, &body, &j)) != -1)
		return rc;
	if (json)
		fputs(body, stdout);
	if (st == 200 && json_is_true(json_object_get(j, "ok"))) {
		if (!json) {
			printf("reloaded: ");
			cmd_put_clean(stdout, cmd_json_str(j, "message"));
			putchar('\n');
		}
		rc = 0;
	} else {
		if (!json)
			json_array_foreach(json_object_get(j, "errors"), i, e) {
				cmd_put_clean(stderr, cmd_json_str(e, "text"));
				fputc('\n', stderr);
			}
		rc = cmd_error("reload failed: %s", st == 400 ?
		    cmd_json_clean(j, "error") : "the admin API did not reload");
	}
	json_decref(j);
	free(body);
	return rc;
}
