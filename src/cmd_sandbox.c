/*
 * `sandgate sandbox run`: a foreground sandbox whose only way out is the
 * gateway. Builds its network, rules, registration and OCI bundle, runs the
 * command in runsc or crun, and takes every one of them down again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/config.h"
#include "sandbox/sandbox.h"
#include "sandgate.h"

#define SB_UID_BASE	100000	/* sandbox root is this host uid */
#define SB_ID_COUNT	65536
/*
 * Bundles live under /run, not state_dir: the sandbox's own root (an
 * unprivileged host uid) must be able to reach its /etc, and state_dir is
 * usually private to the gateway's user.
 */
#define SB_RUN_DIR	"/run/sandgate"

static const char sandbox_usage[] =
    "usage: sandgate sandbox run [-c FILE] [--policy P] [--runtime runsc|crun]\n"
    "           [--rootfs DIR|host] [--id ID] [--workspace DIR] [--env K=V]...\n"
    "           [--memory 512M] [--cpus 1] [--pids 256] -- CMD [ARG...]\n"
    "  Run CMD in a new sandbox in the foreground and exit with its status.\n"
    "  The gateway (sandgate serve) must be running with its admin socket,\n"
    "  and transparent and DNS listeners on a wildcard address. Needs root.\n";

struct run_opts {
	const char	*cfg_path;
	const char	*policy;
	const char	*runtime;
	const char	*rootfs;
	const char	*id;
	const char	*workspace;
	const char	*env[SANDBOX_MAX_ENV];
	int		 n_env;
	uint64_t	 memory;
	uint64_t	 cpu_millis;
	int64_t		 pids;
	char *const	*cmd;
	int		 n_cmd;
};

/* What run made, so that one function can take it down from any point. */
struct run_state {
	struct config	*cfg;
	struct sandbox_net net;
	int		 net_made;
	int		 nft_made;
	int		 registered;
	char		 dir[256];		/* /run/sandgate/bundles/ID */
	int		 dir_made;
	struct sandbox_placeholder *ph;
	size_t		 n_ph;
	char		*env_buf[SANDBOX_MAX_ENV];
	int		 n_env_buf;
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

static int
run_parse(int argc, char *argv[], struct run_opts *o)
{
	struct cmd_args a;
	const char *opt, *val;
	int i, nopt = argc;
	long long v;
	char *end;

	memset(o, 0, sizeof(*o));
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nopt = i;
			o->cmd = argv + i + 1;
			o->n_cmd = argc - i - 1;
			break;
		}
	cmd_args_init(&a, nopt, argv);
	while ((opt = cmd_args_next(&a, "c|config|policy|runtime|rootfs|id|"
	    "workspace|env|memory|cpus|pids", &val)) != NULL) {
		if (strcmp(opt, "?") == 0)
			return cmd_usage_error(sandbox_usage, "bad argument: %s",
			    a.bad);
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			o->cfg_path = val;
		else if (strcmp(opt, "policy") == 0)
			o->policy = val;
		else if (strcmp(opt, "runtime") == 0)
			o->runtime = val;
		else if (strcmp(opt, "rootfs") == 0)
			o->rootfs = val;
		else if (strcmp(opt, "id") == 0)
			o->id = val;
		else if (strcmp(opt, "workspace") == 0)
			o->workspace = val;
		else if (strcmp(opt, "env") == 0) {
			if (!valid_env(val))
				return cmd_usage_error(sandbox_usage,
				    "--env wants NAME=VALUE: %s", val);
			if (o->n_env >= SANDBOX_MAX_ENV / 2)
				return cmd_usage_error(sandbox_usage,
				    "too many --env");
			o->env[o->n_env++] = val;
		} else if (strcmp(opt, "memory") == 0) {
			if (sandbox_parse_size(val, &o->memory) == -1)
				return cmd_usage_error(sandbox_usage,
				    "bad --memory: %s", val);
		} else if (strcmp(opt, "cpus") == 0) {
			if (sandbox_parse_cpus(val, &o->cpu_millis) == -1)
				return cmd_usage_error(sandbox_usage,
				    "bad --cpus: %s", val);
		} else if (strcmp(opt, "pids") == 0) {
			errno = 0;
			v = strtoll(val, &end, 10);
			if (errno != 0 || *end != '\0' || v < 1 || v > 1 << 22)
				return cmd_usage_error(sandbox_usage,
				    "bad --pids: %s", val);
			o->pids = v;
		} else if (strcmp(opt, "help") == 0 || strcmp(opt, "h") == 0) {
			fputs(sandbox_usage, stdout);
			exit(0);
		} else
			return cmd_usage_error(sandbox_usage,
			    "unknown option: --%s", opt);
	}
	if (o->cmd == NULL) {
		o->cmd = (char *const *)a.ops;
		o->n_cmd = a.n_ops;
	} else if (a.n_ops > 0)
		return cmd_usage_error(sandbox_usage, "unexpected operand: %s",
		    a.ops[0]);
	if (o->n_cmd < 1)
		return cmd_usage_error(sandbox_usage, "no command given");
	if (o->n_cmd >= SANDBOX_MAX_ARGV)
		return cmd_usage_error(sandbox_usage, "too many arguments");
	if (o->id != NULL && !sandbox_valid_id(o->id))
		return cmd_usage_error(sandbox_usage, "bad --id (want [a-z0-9-], "
		    "at most %d): %s", SANDBOX_ID_MAX, o->id);
	if (o->runtime != NULL && strcmp(o->runtime, "runsc") != 0 &&
	    strcmp(o->runtime, "crun") != 0)
		return cmd_usage_error(sandbox_usage, "bad --runtime: %s",
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

static uint16_t
listen_port(const struct config_listen *l)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&l->ss;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&l->ss;

	if (!l->enabled)
		return 0;
	/* the redirect lands on the veth's address: only a wildcard bind sees it */
	if (l->ss.ss_family == AF_INET && sin->sin_addr.s_addr == INADDR_ANY)
		return ntohs(sin->sin_port);
	if (l->ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr))
		return ntohs(sin6->sin6_port);
	return 0;
}

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)(flag == FTW_DP ? rmdir(path) : unlink(path));
	return 0;
}

static void
run_teardown(struct run_state *s)
{
	int i;

	if (s->registered)
		(void)sandbox_admin_unregister(s->cfg->admin_socket, s->net.id);
	if (s->nft_made)
		sandbox_nft_del(&s->net);
	if (s->net_made)
		sandbox_net_destroy(&s->net);
	if (s->dir_made)
		(void)nftw(s->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	sandbox_placeholders_free(s->ph, s->n_ph);
	for (i = 0; i < s->n_env_buf; i++)
		free(s->env_buf[i]);
}

/* Field 22 of /proc/PID/stat: with the pid, names one process for good. */
static unsigned long long
proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	/* after "pid (comm)": " S ppid ...", field 3 after the next space */
	for (field = 2, p++; *p != '\0' && field < 22; p++)
		if (*p == ' ' && p[1] != ' ')
			field++;
	if (field == 22)
		v = strtoull(p, NULL, 10);
	return v;
}

/* Who made a bundle, for the reconciliation of a later launcher. */
static int
owner_write(const struct run_state *s, const char *runtime)
{
	char path[300];
	json_t *j;
	int rc;

	snprintf(path, sizeof(path), "%s/owner.json", s->dir);
	j = json_pack("{s:i,s:I,s:s,s:s?}", "pid", (int)getpid(), "start",
	    (json_int_t)proc_start(getpid()), "runtime", runtime, "admin",
	    s->cfg->admin_socket);
	if (j == NULL)
		return -1;
	rc = json_dump_file(j, path, 0);
	json_decref(j);
	return rc;
}

/* Take down what a dead launcher left: runtime, registration, rules, net, bundle. */
static void
reap(const char *id, const char *dir, json_t *owner)
{
	struct sandbox_net net;
	const char *rt = NULL, *admin = NULL;

	sandbox_net_names(id, &net);
	if (owner != NULL)
		(void)json_unpack(owner, "{s?s,s?s}", "runtime", &rt, "admin",
		    &admin);
	if (rt == NULL || strcmp(rt, "runsc") == 0)
		(void)sandbox_runtime_delete(SANDBOX_RUNSC, SB_RUN_DIR "/runsc", id);
	if (rt == NULL || strcmp(rt, "crun") == 0)
		(void)sandbox_runtime_delete(SANDBOX_CRUN, SB_RUN_DIR "/crun", id);
	sandbox_cgroup_remove(id);
	if (admin != NULL)
		(void)sandbox_admin_unregister(admin, id);
	sandbox_nft_del(&net);
	sandbox_net_destroy(&net);
	if (dir != NULL)
		(void)nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Every launcher start reconciles: a bundle whose launcher is dead, and a
 * sandgate namespace without a bundle, are leftovers of a killed launcher.
 */
static void
reconcile(void)
{
	char dir[300], path[340];
	const char *pfx = "sandgate-";
	struct dirent *de;
	struct stat st;
	json_t *owner;
	json_int_t pid, start;
	DIR *d;

	if ((d = opendir(SB_RUN_DIR "/bundles")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (!sandbox_valid_id(de->d_name))
				continue;
			snprintf(dir, sizeof(dir), "%s/bundles/%s", SB_RUN_DIR,
			    de->d_name);
			snprintf(path, sizeof(path), "%s/owner.json", dir);
			owner = json_load_file(path, 0, NULL);
			if (owner == NULL) {
				/* a launcher between mkdir and owner.json */
				if (stat(dir, &st) == -1 ||
				    st.st_mtime > time(NULL) - 30)
					continue;
			} else if (json_unpack(owner, "{s:I,s:I}", "pid", &pid,
			    "start", &start) == 0 && pid > 0 && start > 0 &&
			    proc_start((pid_t)pid) == (unsigned long long)start) {
				json_decref(owner);
				continue;	/* alive */
			}
			reap(de->d_name, dir, owner);
			json_decref(owner);
		}
		closedir(d);
	}
	if ((d = opendir(SANDBOX_NETNS_DIR)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, pfx, strlen(pfx)) != 0 ||
		    !sandbox_valid_id(de->d_name + strlen(pfx)))
			continue;
		snprintf(dir, sizeof(dir), "%s/bundles/%s", SB_RUN_DIR,
		    de->d_name + strlen(pfx));
		if (stat(dir, &st) == -1 && errno == ENOENT)
			reap(de->d_name + strlen(pfx), NULL, NULL);
	}
	closedir(d);
}

/* The whole launch-time critical section runs under one lock file. */
static int
run_network(struct run_state *s, uint16_t tport, uint16_t dport)
{
	char path[PATH_MAX];
	const char *err;
	int fd, rc = -1;

	snprintf(path, sizeof(path), "%s/sandbox.lock", SB_RUN_DIR);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1 ||
	    flock(fd, LOCK_EX) == -1) {
		cmd_error("sandbox: lock %s: %s", path, strerror(errno));
		goto out;
	}
	reconcile();
	if (sandbox_netns_exists(s->net.netns)) {
		cmd_error("sandbox: %s already exists", s->net.netns);
		goto out;
	}
	if (sandbox_net_alloc(&s->cfg->sandbox_subnet, &s->net, &err) == -1 ||
	    sandbox_net_create(&s->net, &err) == -1) {
		cmd_error("sandbox: network: %s", err);
		goto out;
	}
	s->net_made = 1;
	s->nft_made = 1;	/* a failed add may leave a part */
	if (sandbox_nft_add(&s->net, tport, dport, &err) == -1) {
		cmd_error("sandbox: nftables: %s", err);
		goto out;
	}
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	return rc;
}

static int
run_bundle(struct run_state *s, const struct run_opts *o,
    enum sandbox_runtime rt)
{
	char etc[PATH_MAX], root[PATH_MAX], cfgp[PATH_MAX], ws[PATH_MAX];
	char rootdir[PATH_MAX];
	struct sandbox_spec sp;
	const char *err, *sgca;
	json_t *j;
	size_t i;
	int k, rc;

	memset(&sp, 0, sizeof(sp));
	snprintf(etc, sizeof(etc), "%s/etc", s->dir);
	snprintf(root, sizeof(root), "%s/rootfs", s->dir);
	snprintf(cfgp, sizeof(cfgp), "%s/config.json", s->dir);
	sgca = access(s->cfg->ca_cert, R_OK) == 0 ? s->cfg->ca_cert : NULL;
	if (sandbox_oci_write_etc(etc, &s->net,
	    "/etc/ssl/certs/ca-certificates.crt", sgca, &err) == -1)
		return cmd_error("sandbox: %s", err);
	sp.runtime = rt;
	sp.id = s->net.id;
	sp.rootfs = o->rootfs;
	if (strcmp(o->rootfs, "host") == 0) {
		if (sandbox_oci_write_rootfs(root) == -1)
			return cmd_error("sandbox: rootfs skeleton: %s",
			    strerror(errno));
		sp.root_path = root;
	} else {
		if (realpath(o->rootfs, rootdir) == NULL)
			return cmd_error("sandbox: --rootfs %s: %s", o->rootfs,
			    strerror(errno));
		sp.root_path = rootdir;
	}
	sp.etc_dir = etc;
	sp.ca_file = "/etc/ssl/certs/ca-certificates.crt";
	if (o->workspace != NULL) {
		if (realpath(o->workspace, ws) == NULL)
			return cmd_error("sandbox: --workspace %s: %s",
			    o->workspace, strerror(errno));
		sp.workspace = ws;
	}
	sp.netns_path = s->net.netns_path;
	for (k = 0; k < o->n_env; k++)
		sp.env[sp.n_env++] = o->env[k];
	for (i = 0; i < s->n_ph && sp.n_env < SANDBOX_MAX_ENV; i++) {
		char *kv;
		if (s->ph[i].env == NULL ||
		    asprintf(&kv, "%s=%s", s->ph[i].env, s->ph[i].placeholder) == -1)
			continue;
		s->env_buf[s->n_env_buf++] = kv;
		sp.env[sp.n_env++] = kv;
	}
	sp.argv = o->cmd;
	sp.argc = o->n_cmd;
	sp.memory = o->memory;
	sp.cpu_millis = o->cpu_millis;
	sp.pids = o->pids;
	sp.uid_base = SB_UID_BASE;
	sp.id_count = SB_ID_COUNT;
	if ((j = sandbox_oci_config(&sp, &err)) == NULL)
		return cmd_error("sandbox: %s", err);
	rc = json_dump_file(j, cfgp, JSON_INDENT(2));
	json_decref(j);
	if (rc == -1)
		return cmd_error("sandbox: cannot write %s", cfgp);
	return 0;
}

static int
sandbox_run(int argc, char *argv[])
{
	struct run_opts o;
	struct run_state s;
	enum sandbox_runtime rt;
	char guest[INET_ADDRSTRLEN], id[SANDBOX_ID_MAX + 1], err[512];
	char state[PATH_MAX];
	uint16_t tport, dport;
	unsigned char rnd[5];
	const char *e;
	int rc, status = 1;

	if ((rc = run_parse(argc, argv, &o)) != 0)
		return rc;
	memset(&s, 0, sizeof(s));
	if (geteuid() != 0)
		return cmd_error("sandbox run needs root (network namespaces, "
		    "nftables)");
	if (cmd_load(o.cfg_path, &s.cfg, NULL) == -1)
		return 1;
	if (o.runtime == NULL)
		o.runtime = s.cfg->sandbox_runtime;
	rt = strcmp(o.runtime, "crun") == 0 ? SANDBOX_CRUN : SANDBOX_RUNSC;
	if (o.rootfs == NULL)
		o.rootfs = s.cfg->sandbox_rootfs;
	if (s.cfg->admin_socket == NULL ||
	    sandbox_admin_ping(s.cfg->admin_socket) == -1) {
		cmd_error("the gateway is not running (no answer on admin "
		    "socket %s)", s.cfg->admin_socket ? s.cfg->admin_socket :
		    "(disabled)");
		goto out;
	}
	if ((tport = listen_port(&s.cfg->listen_transparent)) == 0 ||
	    (dport = listen_port(&s.cfg->listen_dns)) == 0) {
		cmd_error("sandbox: listen.transparent and listen.dns must be "
		    "enabled on a wildcard address (0.0.0.0:PORT)");
		goto out;
	}
	if (o.id == NULL) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
			cmd_error("getrandom: %s", strerror(errno));
			goto out;
		}
		snprintf(id, sizeof(id), "sb-%02x%02x%02x%02x%02x", rnd[0],
		    rnd[1], rnd[2], rnd[3], rnd[4]);
	} else
		snprintf(id, sizeof(id), "%s", o.id);
	sandbox_net_names(id, &s.net);
	sandbox_signals_install();

	(void)mkdir(SB_RUN_DIR, 0711);
	(void)mkdir(SB_RUN_DIR "/bundles", 0711);
	snprintf(s.dir, sizeof(s.dir), "%s/bundles/%s", SB_RUN_DIR, id);
	if (mkdir(s.dir, 0711) == -1) {
		cmd_error("sandbox: %s: %s", s.dir, errno == EEXIST ?
		    "a sandbox with this id exists" : strerror(errno));
		goto out;
	}
	s.dir_made = 1;
	if (owner_write(&s, o.runtime) == -1) {
		cmd_error("sandbox: cannot write %s/owner.json", s.dir);
		goto out;
	}
	if (run_network(&s, tport, dport) == -1 || sandbox_signal != 0)
		goto out;
	inet_ntop(AF_INET, &s.net.guest_addr, guest, sizeof(guest));
	if (sandbox_admin_register(s.cfg->admin_socket, id, o.policy, guest,
	    &s.ph, &s.n_ph, err, sizeof(err)) == -1) {
		cmd_error("sandbox: %s", err);
		goto out;
	}
	s.registered = 1;
	if (run_bundle(&s, &o, rt) != 0 || sandbox_signal != 0)
		goto out;
	snprintf(state, sizeof(state), "%s/%s", SB_RUN_DIR, o.runtime);
	if ((status = sandbox_runtime_run(rt, state, s.dir, id,
	    s.net.netns_path, &e)) == -1) {
		cmd_error("sandbox: %s: %s", o.runtime, e);
		status = 1;
	}
out:
	run_teardown(&s);
	config_free(s.cfg);
	/* a signal before the command started still says what ended us */
	if (status == 1 && sandbox_signal != 0 && sandbox_signal != SIGALRM)
		status = 128 + sandbox_signal;
	return status;
}

int
cmd_sandbox(int argc, char *argv[])
{
	if (argc < 2)
		return cmd_usage_error(sandbox_usage, "no sandbox command given");
	if (strcmp(argv[1], "run") == 0)
		return sandbox_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		fputs(sandbox_usage, stdout);
		return 0;
	}
	return cmd_usage_error(sandbox_usage, "unknown sandbox command: %s "
	    "(only run is available yet)", argv[1]);
}
