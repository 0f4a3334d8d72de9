/*
 * `sandgate sandbox run|create|exec|ls|rm|logs` (docs/sandbox.md): the command
 * line of the launcher. The mechanisms (network, rules, bundle, runtime, state)
 * are in src/sandbox/; this file parses, prints and detaches.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/config.h"
#include "sandbox/sandbox.h"
#include "sandgate.h"

static const char sandbox_usage[] =
    "usage: sandgate sandbox run|create [-c FILE] [--policy P]\n"
    "           [--runtime runsc|crun] [--rootfs DIR|host] [--id ID]\n"
    "           [--workspace DIR] [--env K=V]... [--memory 512M] [--cpus 1]\n"
    "           [--pids 256] [--publish PORT]... [--public] [--ttl 1h]\n"
    "           [-- CMD [ARG...]]\n"
    "       sandgate sandbox exec [-c FILE] ID -- CMD [ARG...]\n"
    "       sandgate sandbox ls [-c FILE] [--format table|json]\n"
    "       sandgate sandbox rm [-c FILE] ID...\n"
    "       sandgate sandbox logs [-c FILE] [-f] ID\n"
    "  run: a new sandbox in the foreground; exits with CMD's status.\n"
    "  create: a detached sandbox (CMD, or an idle init); prints its id,\n"
    "  ingress token and URLs. exec: CMD inside a live sandbox. rm: stop it\n"
    "  and remove everything it made. logs: create's output.\n"
    "  The gateway (sandgate serve) must be running with its admin socket,\n"
    "  and transparent and DNS listeners on IPv4 (the defaults, 127.0.0.1,\n"
    "  will do). Needs root.\n";

#define SANDBOX_UP_OPTIONS \
    "  --policy P        the gateway policy it runs under (default: default)\n" \
    "  --runtime R       runsc or crun (default: the config's sandbox.runtime)\n" \
    "  --rootfs DIR|host its read-only root (default: sandbox.rootfs)\n" \
    "  --id ID           [a-z0-9][a-z0-9-]{0,39} (default: sb- and 10 hex)\n" \
    "  --workspace DIR   bound read-write at /workspace, the working directory\n" \
    "  --env K=V         set a variable (repeatable)\n" \
    "  --memory 512M --cpus 1 --pids 256   limits\n" \
    "  --publish PORT    reachable through the ingress listener (repeatable)\n" \
    "  --public          no ingress token needed for published ports\n" \
    "  --ttl 1h          stop and remove it after this long\n" \
    "  -c FILE           config file (default: ./sandgate.yaml,\n" \
    "                    /etc/sandgate/sandgate.yaml, else built-in defaults)\n" \
    "  Needs root and a running gateway (sandgate serve).\n"

/* sandbox SUBCOMMAND --help prints these; sandbox --help the whole list. */
static const struct {
	const char	*sub;
	const char	*page;
} sandbox_pages[] = {
	{ "run", "usage: sandgate sandbox run [OPTIONS] -- CMD [ARG...]\n"
	    "  Run CMD in a new sandbox in the foreground; exit with CMD's status\n"
	    "  (128 + N when signal N ended it). Everything it made is removed.\n"
	    SANDBOX_UP_OPTIONS },
	{ "create", "usage: sandgate sandbox create [OPTIONS] [-- CMD [ARG...]]\n"
	    "  Start a detached sandbox running CMD (default: an idle init until\n"
	    "  rm or --ttl); print its id, then its ingress token and URLs.\n"
	    SANDBOX_UP_OPTIONS },
	{ "exec", "usage: sandgate sandbox exec [-c FILE] ID -- CMD [ARG...]\n"
	    "  Run CMD in the live sandbox ID with its environment and limits,\n"
	    "  on this terminal; exit with CMD's status. Needs root.\n" },
	{ "ls", "usage: sandgate sandbox ls [-c FILE] [--format table|json]\n"
	    "  List the sandboxes: id, policy, runtime, state, created, ttl left,\n"
	    "  ingress URLs and token. Needs root.\n" },
	{ "rm", "usage: sandgate sandbox rm [-c FILE] ID...\n"
	    "  Stop each sandbox and remove everything it made. Needs root.\n" },
	{ "logs", "usage: sandgate sandbox logs [-c FILE] [-f] ID\n"
	    "  Print the output of a sandbox started by create; -f follows it\n"
	    "  while the sandbox lives. Needs root.\n" },
};

/* create without a command: an init that sleeps and stops on TERM at once */
static char *const idle_cmd[] = {
	"/bin/sh", "-c",
	"trap 'exit 0' TERM INT HUP; while :; do sleep 3600 & wait $!; done",
	NULL
};

static int
valid_env(const char *kv)
{
	const char *p = kv;

	if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
		return 0;
	for (p++; *p != '=' && *p != '\0'; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return *p == '=' && p - kv < 256;
}

/* Split argv at "--": options and operands before, the command after. */
static int
split_cmd(int argc, char *argv[], char *const **cmd, int *n_cmd)
{
	int i;

	*cmd = NULL;
	*n_cmd = 0;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			*cmd = argv + i + 1;
			*n_cmd = argc - i - 1;
			return i;
		}
	return argc;
}

static int
parse_option(struct sandbox_opts *o, const char *opt, const char *val,
    const char **id)
{
	long long v;
	char *end;
	uint64_t ms;

	if (strcmp(opt, "policy") == 0)
		o->policy = val;
	else if (strcmp(opt, "runtime") == 0)
		o->runtime = val;
	else if (strcmp(opt, "rootfs") == 0)
		o->rootfs = val;
	else if (strcmp(opt, "id") == 0)
		*id = val;
	else if (strcmp(opt, "workspace") == 0)
		o->workspace = val;
	else if (strcmp(opt, "public") == 0)
		o->is_public = 1;
	else if (strcmp(opt, "env") == 0) {
		if (!valid_env(val))
			return cmd_usage_error(sandbox_usage,
			    "--env: expected NAME=VALUE, got %s", val);
		if (o->n_env >= SANDBOX_MAX_ENV / 2)
			return cmd_usage_error(sandbox_usage, "--env: too many");
		o->env[o->n_env++] = val;
	} else if (strcmp(opt, "memory") == 0) {
		if (sandbox_parse_size(val, &o->memory) == -1)
			return cmd_usage_error(sandbox_usage, "--memory: bad size %s",
			    val);
	} else if (strcmp(opt, "cpus") == 0) {
		if (sandbox_parse_cpus(val, &o->cpu_millis) == -1)
			return cmd_usage_error(sandbox_usage, "--cpus: bad count %s",
			    val);
	} else if (strcmp(opt, "pids") == 0) {
		errno = 0;
		v = strtoll(val, &end, 10);
		if (errno != 0 || *end != '\0' || v < 1 || v > 1 << 22)
			return cmd_usage_error(sandbox_usage, "--pids: bad count %s",
			    val);
		o->pids = v;
	} else if (strcmp(opt, "publish") == 0) {
		errno = 0;
		v = strtoll(val, &end, 10);
		if (errno != 0 || *end != '\0' || v < 1 || v > 65535)
			return cmd_usage_error(sandbox_usage,
			    "--publish: expected a port 1-65535, got %s", val);
		if (o->n_publish >= SANDBOX_MAX_PUBLISH)
			return cmd_usage_error(sandbox_usage,
			    "--publish: at most %d",
			    SANDBOX_MAX_PUBLISH);
		o->publish[o->n_publish++] = (uint16_t)v;
	} else if (strcmp(opt, "ttl") == 0) {
		if (config_parse_duration_ms(val, &ms) == -1 || ms < 1000)
			return cmd_usage_error(sandbox_usage,
			    "--ttl: expected 30s, 10m, 1h or 2d, got %s", val);
		o->ttl_ms = ms;
	} else
		return -1;	/* not an option of run/create */
	return 0;
}

static int
up_parse(int argc, char *argv[], struct sandbox_opts *o, const char **cfg,
    const char **id, int detach)
{
	struct cmd_args a;
	const char *opt, *val;
	int nopt, rc;

	memset(o, 0, sizeof(*o));
	*cfg = NULL;
	*id = NULL;
	o->detach = detach;
	nopt = split_cmd(argc, argv, &o->cmd, &o->n_cmd);
	cmd_args_init(&a, nopt, argv);
	a.help = detach ? "sandbox create" : "sandbox run";
	while ((opt = cmd_args_next(&a, "c|config|policy|runtime|rootfs|id|"
	    "workspace|env|memory|cpus|pids|publish|ttl", &val)) != NULL) {
		if (strcmp(opt, "?") == 0)
			return cmd_bad_option(&a, opt);
		if (strcmp(opt, "help") == 0 || strcmp(opt, "h") == 0) {
			fputs(sandbox_usage, stdout);
			exit(0);
		}
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			*cfg = val;
		else if ((rc = parse_option(o, opt, val, id)) == -1)
			return cmd_bad_option(&a, opt);
		else if (rc != 0)
			return rc;
	}
	if (o->cmd == NULL) {
		o->cmd = (char *const *)a.ops;
		o->n_cmd = a.n_ops;
	} else if (a.n_ops > 0)
		return cmd_usage_error(sandbox_usage, "unexpected operand: %s",
		    a.ops[0]);
	if (o->n_cmd < 1 && detach) {
		o->cmd = idle_cmd;
		o->n_cmd = 3;
	}
	if (o->n_cmd < 1)
		return cmd_usage_error(sandbox_usage, "no command given");
	if (o->n_cmd >= SANDBOX_MAX_ARGV)
		return cmd_usage_error(sandbox_usage, "too many arguments");
	if (*id != NULL && !sandbox_valid_id(*id))
		return cmd_usage_error(sandbox_usage, "bad --id (want "
		    "[a-z0-9][a-z0-9-], at most 40): %s", *id);
	if (o->runtime != NULL && strcmp(o->runtime, "runsc") != 0 &&
	    strcmp(o->runtime, "crun") != 0)
		return cmd_usage_error(sandbox_usage, "--runtime: expected runsc|crun, got %s",
		    o->runtime);
	if (o->memory == 0)
		o->memory = 512ull << 20;
	if (o->cpu_millis == 0)
		o->cpu_millis = 1000;
	if (o->pids == 0)
		o->pids = 256;
	if (o->policy == NULL)
		o->policy = "default";
	return 0;
}

static int
need_root(const char *what)
{
	if (geteuid() == 0)
		return 0;
	cmd_error("sandbox %s needs root (network namespaces, nftables, "
	    "state.db)", what);
	return -1;
}

static int
new_id(char id[SANDBOX_ID_MAX + 1])
{
	char hex[SANDBOX_TOKEN_HEX + 1];

	if (sandbox_new_token(hex) == -1)
		return -1;
	snprintf(id, SANDBOX_ID_MAX + 1, "sb-%.10s", hex);
	return 0;
}

static void
print_created(const struct config *cfg, const struct sandbox_opts *o,
    const char *id, const char *token)
{
	char url[512];
	int i;

	printf("%s\n", id);
	if (o->n_publish > 0 && !o->is_public)
		printf("token %s\n", token);
	for (i = 0; i < o->n_publish; i++)
		if (sandbox_ingress_url(cfg, id, o->publish[i], url,
		    sizeof(url)) == 0)
			printf("url %s\n", url);
	fflush(stdout);
}

/*
 * create: the supervisor is a child in a session of its own; its stderr is
 * a pipe to us until the container runs ("sandgate-ready"), so that every
 * error before that reaches the user and sets our exit status.
 */
static int
sandbox_create(struct config *cfg, const struct sandbox_opts *o,
    const char *id, const char *token)
{
	static const char ready[] = "sandgate-ready\n";
	char buf[8192], *mark;
	size_t n = 0;
	ssize_t r;
	int p[2], fd, st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		return cmd_error("pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == -1)
		return cmd_error("fork: %s", strerror(errno));
	if (pid == 0) {
		(void)setsid();
		if ((fd = open("/dev/null", O_RDWR)) != -1) {
			dup2(fd, 0);
			dup2(fd, 1);
			if (fd > 2)
				close(fd);
		}
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		sandbox_signals_install();
		_exit(sandbox_life(cfg, o, id, token) & 0xff);
	}
	close(p[1]);
	while (n < sizeof(buf) - 1) {
		r = read(p[0], buf + n, sizeof(buf) - 1 - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(p[0]);
	buf[n] = '\0';
	if ((mark = strstr(buf, ready)) != NULL) {
		*mark = '\0';
		fputs(buf, stderr);
		print_created(cfg, o, id, token);
		return 0;
	}
	fputs(buf, stderr);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (n == 0)
		cmd_error("sandbox: %s did not start", id);
	return 1;
}

static int
sandbox_up(int argc, char *argv[], int detach)
{
	struct sandbox_opts o;
	struct config *cfg;
	const char *cfg_path, *want_id;
	char id[SANDBOX_ID_MAX + 1], token[SANDBOX_TOKEN_HEX + 1], err[PATH_MAX + 256];
	int rc;

	if ((rc = up_parse(argc, argv, &o, &cfg_path, &want_id, detach)) != 0)
		return rc;
	if (need_root(detach ? "create" : "run") == -1)
		return 1;
	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (o.runtime == NULL)
		o.runtime = cfg->sandbox_runtime;
	if (o.rootfs == NULL)
		o.rootfs = cfg->sandbox_rootfs;
	/* A root the launcher cannot bind over: said before anything is made. */
	if (strcmp(o.rootfs, "host") != 0 &&
	    sandbox_oci_check_rootfs(o.rootfs, err, sizeof(err)) == -1) {
		config_free(cfg);
		return cmd_error("sandbox: %s", err);
	}
	if (want_id != NULL)
		snprintf(id, sizeof(id), "%s", want_id);
	if ((want_id == NULL && new_id(id) == -1) ||
	    sandbox_new_token(token) == -1) {
		config_free(cfg);
		return cmd_error("getrandom: %s", strerror(errno));
	}
	if (detach)
		rc = sandbox_create(cfg, &o, id, token);
	else {
		sandbox_signals_install();
		rc = sandbox_life(cfg, &o, id, token);
	}
	config_free(cfg);
	return rc;
}

/* ---------------------------------------------------------------- ls */

static struct sandbox_state *
state_open_reconciled(struct config *cfg)
{
	struct sandbox_state *st;
	char db[PATH_MAX];
	const char *err;
	int fd;

	sandbox_state_path(cfg, db, sizeof(db));
	if ((st = sandbox_state_open(db, &err)) == NULL) {
		cmd_error("sandbox: %s: %s", db, err);
		return NULL;
	}
	if ((fd = sandbox_lock()) != -1) {
		sandbox_reconcile(st);
		close(fd);
	}
	return st;
}

static void
fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void
fmt_ttl(int64_t expires, char *buf, size_t len)
{
	int64_t left = expires - time(NULL);

	if (expires == 0)
		snprintf(buf, len, "-");
	else if (left <= 0)
		snprintf(buf, len, "expired");
	else if (left >= 3600)
		snprintf(buf, len, "%lldh%02lldm", (long long)(left / 3600),
		    (long long)(left % 3600 / 60));
	else
		snprintf(buf, len, "%lldm%02llds", (long long)(left / 60),
		    (long long)(left % 60));
}

static json_t *
row_json(const struct config *cfg, const struct sandbox_row *r)
{
	char created[32], url[512];
	json_t *o, *urls, *ports;
	int i;

	fmt_time(r->created, created, sizeof(created));
	urls = json_array();
	ports = json_array();
	for (i = 0; i < r->n_publish; i++) {
		json_array_append_new(ports, json_integer(r->publish[i]));
		if (sandbox_ingress_url(cfg, r->id, r->publish[i], url,
		    sizeof(url)) == 0)
			json_array_append_new(urls, json_string(url));
	}
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:b}", "id", r->id,
	    "policy", r->policy, "runtime", r->runtime, "mode", r->mode,
	    "state", r->state, "created", created, "guest", r->guest,
	    "publish", ports, "ingress", urls, "public", r->is_public);
	if (o == NULL)
		return NULL;
	if (r->expires != 0) {
		fmt_time(r->expires, created, sizeof(created));
		json_object_set_new(o, "expires", json_string(created));
	} else
		json_object_set_new(o, "expires", json_null());
	/* ls runs as root (state.db is root's): the token is shown */
	if (r->n_publish > 0 && !r->is_public)
		json_object_set_new(o, "token", json_string(r->token));
	else
		json_object_set_new(o, "token", json_null());
	return o;
}

static int
sandbox_ls(int argc, char *argv[])
{
	struct cmd_args a;
	struct sandbox_state *st;
	struct sandbox_row *rows;
	struct config *cfg;
	const char *opt, *val, *cfg_path = NULL, *format = "table";
	char created[32], ttl[32], url[512];
	json_t *arr;
	size_t i, n;
	int k;

	cmd_args_init(&a, argc, argv);
	a.help = "sandbox ls";
	while ((opt = cmd_args_next(&a, "c|config|format", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "format") == 0) {
			if (!cmd_in_list("table|json", val))
				return cmd_bad_value(&a, "table|json", val);
			format = val;
		} else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(sandbox_usage, "unexpected operand: %s",
		    a.ops[0]);
	if (need_root("ls") == -1 || cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if ((st = state_open_reconciled(cfg)) == NULL) {
		config_free(cfg);
		return 1;	/* said, naming the file */
	}
	if (sandbox_state_list(st, &rows, &n) == -1) {
		sandbox_state_close(st);
		config_free(cfg);
		return cmd_error("sandbox: cannot read state.db");
	}
	if (strcmp(format, "json") == 0) {
		arr = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(arr, row_json(cfg, &rows[i]));
		json_dumpf(arr, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(arr);
	} else {
		printf("%-24s %-16s %-7s %-9s %-20s %-9s %s\n", "ID", "POLICY",
		    "RUNTIME", "STATE", "CREATED", "TTL", "INGRESS");
		for (i = 0; i < n; i++) {
			fmt_time(rows[i].created, created, sizeof(created));
			fmt_ttl(rows[i].expires, ttl, sizeof(ttl));
			printf("%-24s %-16s %-7s %-9s %-20s %-9s", rows[i].id,
			    rows[i].policy, rows[i].runtime, rows[i].state,
			    created, ttl);
			for (k = 0; k < rows[i].n_publish; k++)
				if (sandbox_ingress_url(cfg, rows[i].id,
				    rows[i].publish[k], url, sizeof(url)) == 0)
					printf("%s%s", k > 0 ? "," : " ", url);
			if (rows[i].n_publish == 0)
				printf(" -");
			if (rows[i].n_publish > 0 && !rows[i].is_public)
				printf(" token=%s", rows[i].token);
			putchar('\n');
		}
	}
	free(rows);
	sandbox_state_close(st);
	config_free(cfg);
	return 0;
}

/* ---------------------------------------------------------------- exec */

/* seconds the command's output may trail its exit (a process it left) */
#define EXEC_EOF_GRACE	5

/* A live sandbox's row, or an error printed. */
static int
live_row(struct config *cfg, const char *id, struct sandbox_row *row,
    struct sandbox_state **stp)
{
	struct sandbox_state *st;

	if (!sandbox_valid_id(id)) {
		cmd_error("sandbox: bad id: %s", id);
		return -1;
	}
	if ((st = state_open_reconciled(cfg)) == NULL)
		return -1;
	if (sandbox_state_get(st, id, row) != 1) {
		sandbox_state_close(st);
		cmd_error("sandbox: no sandbox %s", id);
		return -1;
	}
	*stp = st;
	return 0;
}

/* The process of config.json with another argv: same env, user, limits. */
static int
exec_process_file(const char *id, char *const *cmd, int n, char *path,
    size_t len)
{
	char cfgp[PATH_MAX];
	json_t *cfg, *proc, *args;
	int i, rc = -1;

	snprintf(cfgp, sizeof(cfgp), "%s/bundles/%s/config.json",
	    SANDBOX_RUN_DIR, id);
	snprintf(path, len, "%s/bundles/%s/exec-%d.json", SANDBOX_RUN_DIR, id,
	    (int)getpid());
	if ((cfg = json_load_file(cfgp, 0, NULL)) == NULL ||
	    !json_is_object(proc = json_object_get(cfg, "process")))
		goto out;
	args = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(args, json_string(cmd[i]));
	json_object_set_new(proc, "args", args);
	json_object_set_new(proc, "terminal", json_false());
	rc = json_dump_file(proc, path, 0);
	if (rc == 0)
		(void)chmod(path, 0600);
out:
	json_decref(cfg);
	return rc;
}

static int	exec_wait(enum sandbox_runtime, const char *state, const char *id,
		    pid_t, const char *pidf);

static int
sandbox_exec(int argc, char *argv[])
{
	struct cmd_args a;
	struct sandbox_state *st;
	struct sandbox_row row;
	struct sandbox_relay *relay;
	struct config *cfg;
	enum sandbox_runtime rt;
	const char *opt, *val, *cfg_path = NULL, *err;
	char path[PATH_MAX], pidf[PATH_MAX], state[64];
	char *const *cmd;
	int nopt, n_cmd, status;
	pid_t pid;

	nopt = split_cmd(argc, argv, &cmd, &n_cmd);
	cmd_args_init(&a, nopt, argv);
	a.help = "sandbox exec";
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops != 1 || cmd == NULL || n_cmd < 1)
		return cmd_usage_error(sandbox_usage,
		    "usage: sandbox exec ID -- CMD [ARG...]");
	if (n_cmd >= SANDBOX_MAX_ARGV)
		return cmd_usage_error(sandbox_usage, "too many arguments");
	if (need_root("exec") == -1 || cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (live_row(cfg, a.ops[0], &row, &st) == -1) {
		config_free(cfg);
		return 1;
	}
	sandbox_state_close(st);
	config_free(cfg);
	if (strcmp(row.state, "running") != 0)
		return cmd_error("sandbox: %s is %s, not running", row.id,
		    row.state);
	rt = strcmp(row.runtime, "crun") == 0 ? SANDBOX_CRUN : SANDBOX_RUNSC;
	snprintf(state, sizeof(state), "%s/%s", SANDBOX_RUN_DIR, row.runtime);
	if (exec_process_file(row.id, cmd, n_cmd, path, sizeof(path)) == -1)
		return cmd_error("sandbox: cannot read the bundle of %s", row.id);
	snprintf(pidf, sizeof(pidf), "%s/bundles/%s/exec-%d.pid",
	    SANDBOX_RUN_DIR, row.id, (int)getpid());
	sandbox_signals_install();
	if (sandbox_relay_new(rt, &relay) == -1) {
		unlink(path);
		return cmd_error("sandbox: output relay: %s", strerror(errno));
	}
	if ((pid = sandbox_runtime_exec(rt, state, row.id, path, pidf, relay,
	    &err)) == -1) {
		sandbox_relay_end(relay, 0);
		unlink(path);
		return cmd_error("sandbox: %s exec: %s", row.runtime, err);
	}
	status = exec_wait(rt, state, row.id, pid, pidf);
	sandbox_relay_end(relay, EXEC_EOF_GRACE);
	unlink(path);
	unlink(pidf);
	return status;
}

static const char *
exec_sig_name(int sig)
{
	return sig == SIGINT ? "INT" : sig == SIGHUP ? "HUP" : "TERM";
}

/*
 * Pass sig on to the command. crun exec forwards what it gets; runsc exec
 * does not (it would die and leave the command running), so under runsc
 * the command itself is signalled by its pid inside the sandbox, once
 * runsc has written it. 0 done, -1 not yet possible.
 */
static int
exec_forward(enum sandbox_runtime rt, const char *state, const char *id,
    pid_t pid, const char *pidf, int sig)
{
	char buf[32];
	long inner;
	ssize_t n;
	int fd;

	if (rt == SANDBOX_CRUN) {
		(void)kill(pid, sig);
		return 0;
	}
	if ((fd = open(pidf, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if ((inner = strtol(buf, NULL, 10)) <= 0)
		return -1;
	(void)sandbox_runtime_kill_pid(rt, state, id, inner,
	    exec_sig_name(sig));
	return 0;
}

/* Wait for the runtime's exec to end, passing signals on; its status. */
static int
exec_wait(enum sandbox_runtime rt, const char *state, const char *id,
    pid_t pid, const char *pidf)
{
	const struct timespec tick = { 0, 50 * 1000 * 1000 };
	int sig = 0, w;
	pid_t r;

	for (;;) {
		if (sandbox_signal != 0 && sandbox_signal != SIGALRM &&
		    sandbox_signal != SIGCHLD) {
			sig = sandbox_signal;
			sandbox_signal = 0;
		}
		if (sig != 0 && exec_forward(rt, state, id, pid, pidf, sig) == 0)
			sig = 0;
		/* polled: a signal between the check and a blocking wait
		 * would wait as long as the command */
		r = waitpid(pid, &w, WNOHANG);
		if (r == pid)
			return sandbox_wait_status(w);
		if (r == 0)
			nanosleep(&tick, NULL);
		else if (errno != EINTR)
			return 1;
	}
}

/* ---------------------------------------------------------------- rm */

static int
sandbox_rm(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	const char *opt, *val, *cfg_path = NULL;
	int i, rc = 0;

	cmd_args_init(&a, argc, argv);
	a.help = "sandbox rm";
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops < 1)
		return cmd_usage_error(sandbox_usage, "sandbox rm wants an id");
	for (i = 0; i < a.n_ops; i++)
		if (!sandbox_valid_id(a.ops[i]))
			return cmd_usage_error(sandbox_usage, "bad id: %s",
			    a.ops[i]);
	if (need_root("rm") == -1 || cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	for (i = 0; i < a.n_ops; i++)
		if (sandbox_remove(cfg, a.ops[i]) != 0)
			rc = 1;
	config_free(cfg);
	return rc;
}

/* ---------------------------------------------------------------- logs */

static int
copy_out(int fd)
{
	char buf[16384];
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)r, stdout) != (size_t)r)
			return -1;
	fflush(stdout);
	return 0;
}

static int
sandbox_logs(int argc, char *argv[])
{
	struct timespec d = { 0, 200 * 1000 * 1000 };
	struct cmd_args a;
	struct sandbox_state *st;
	struct sandbox_row row;
	struct config *cfg;
	const char *opt, *val, *cfg_path = NULL;
	char path[PATH_MAX];
	int fd, follow = 0;

	cmd_args_init(&a, argc, argv);
	a.help = "sandbox logs";
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "f") == 0 || strcmp(opt, "follow") == 0)
			follow = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops != 1)
		return cmd_usage_error(sandbox_usage, "sandbox logs wants an id");
	if (need_root("logs") == -1 || cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (live_row(cfg, a.ops[0], &row, &st) == -1) {
		config_free(cfg);
		return 1;
	}
	sandbox_state_close(st);
	config_free(cfg);
	if (strcmp(row.mode, "create") != 0)
		return cmd_error("sandbox: %s runs in the foreground of its "
		    "launcher: its output goes there", row.id);
	snprintf(path, sizeof(path), "%s/bundles/%s/output.log",
	    SANDBOX_RUN_DIR, row.id);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return cmd_error("sandbox: %s: %s", path, strerror(errno));
	if (copy_out(fd) == -1)
		follow = 0;
	/* follow while the owner lives; the bundle goes with it */
	while (follow && sandbox_proc_start((pid_t)row.owner_pid) ==
	    row.owner_start) {
		nanosleep(&d, NULL);
		if (copy_out(fd) == -1)
			break;
	}
	(void)copy_out(fd);
	close(fd);
	return 0;
}

int
cmd_sandbox(int argc, char *argv[])
{
	size_t i;

	if (argc < 2)
		return cmd_usage_error(sandbox_usage, "no sandbox command given");
	for (i = 0; i < sizeof(sandbox_pages) / sizeof(sandbox_pages[0]); i++)
		if (strcmp(argv[1], sandbox_pages[i].sub) == 0 &&
		    cmd_wants_help(argc - 1, argv + 1)) {
			fputs(sandbox_pages[i].page, stdout);
			return 0;
		}
	if (strcmp(argv[1], "run") == 0)
		return sandbox_up(argc - 1, argv + 1, 0);
	if (strcmp(argv[1], "create") == 0)
		return sandbox_up(argc - 1, argv + 1, 1);
	if (strcmp(argv[1], "exec") == 0)
		return sandbox_exec(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0)
		return sandbox_ls(argc - 1, argv + 1);
	if (strcmp(argv[1], "rm") == 0)
		return sandbox_rm(argc - 1, argv + 1);
	if (strcmp(argv[1], "logs") == 0)
		return sandbox_logs(argc - 1, argv + 1);
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		fputs(sandbox_usage, stdout);
		return 0;
	}
	return cmd_usage_error(sandbox_usage, "sandbox: unknown subcommand: "
	    "%s (sandgate help sandbox)", argv[1]);
}
