/*
 * Driving the outside world for a sandbox: the OCI runtime (runsc or crun,
 * fork/exec with a fixed argv and the same global flags every time, signals
 * forwarded) and the gateway's admin socket (core/admin_client.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include "core/admin_client.h"
#include "sandbox/sandbox.h"

#define RUNSC_PATH	"/usr/bin/runsc"
#define CRUN_PATH	"/usr/bin/crun"

volatile sig_atomic_t sandbox_signal;

static void
signal_cb(int sig)
{
	sandbox_signal = sig;
}

/* Only there to wake ppoll when a child exits. */
static void
chld_cb(int sig)
{
}

void
sandbox_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = signal_cb;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: waitpid must see EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = chld_cb;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
}

/* ---------------------------------------------------------------- admin */

int
sandbox_admin_ping(const char *sock, int *nflog_group)
{
	char *body;
	json_t *j;
	int st = admin_call(sock, "GET", "/v1/status", NULL, &body);

	if (nflog_group != NULL) {
		*nflog_group = 0;
		if (st == 200 && (j = json_loads(body, 0, NULL)) != NULL) {
			json_int_t g = json_integer_value(json_object_get(j,
			    "nflog_group"));
			if (g > 0 && g < 65536)
				*nflog_group = (int)g;
			json_decref(j);
		}
	}
	free(body);
	return st == 200 ? 0 : -1;
}

void
sandbox_placeholders_free(struct sandbox_placeholder *ph, size_t n)
{
	size_t i;

	for (i = 0; ph != NULL && i < n; i++) {
		free(ph[i].credential);
		free(ph[i].env);
		free(ph[i].placeholder);
	}
	free(ph);
}

static int
placeholders_parse(json_t *arr, struct sandbox_placeholder **phs, size_t *n)
{
	struct sandbox_placeholder *ph;
	const char *c, *e, *v;
	size_t i, k = 0;

	if (!json_is_array(arr))
		return -1;
	if ((ph = calloc(json_array_size(arr) + 1, sizeof(*ph))) == NULL)
		return -1;
	for (i = 0; i < json_array_size(arr); i++) {
		e = NULL;
		if (json_unpack(json_array_get(arr, i), "{s:s,s?s,s:s}",
		    "credential", &c, "env", &e, "placeholder", &v) == -1)
			goto fail;
		ph[k].credential = strdup(c);
		ph[k].placeholder = strdup(v);
		ph[k].env = e != NULL ? strdup(e) : NULL;
		k++;
		if (ph[k - 1].credential == NULL || ph[k - 1].placeholder == NULL ||
		    (e != NULL && ph[k - 1].env == NULL))
			goto fail;
	}
	*phs = ph;
	*n = k;
	return 0;
fail:
	sandbox_placeholders_free(ph, k);
	return -1;
}

static json_t *
ingress_json(const struct sandbox_ingress *in)
{
	json_t *o, *ports;
	int i;

	if ((ports = json_array()) == NULL)
		return NULL;
	for (i = 0; i < in->n_ports; i++)
		json_array_append_new(ports, json_integer(in->ports[i]));
	o = json_pack("{s:s,s:o,s:b}", "address", in->address, "ports", ports,
	    "public", in->is_public);
	if (o != NULL && in->token_sha256 != NULL)
		json_object_set_new(o, "token_sha256",
		    json_string(in->token_sha256));
	return o;
}

int
sandbox_admin_register(const char *sock, const char *id, const char *policy,
    const char *source, const struct sandbox_ingress *ingress,
    struct sandbox_placeholder **phs, size_t *n, char *err, size_t errlen)
{
	json_t *req, *rep = NULL;
	char *body = NULL, *reply = NULL;
	const char *msg;
	int st;

	*phs = NULL;
	*n = 0;
	req = json_pack("{s:s,s:s,s:s}", "id", id, "policy", policy,
	    "source", source);
	if (req != NULL && ingress != NULL && ingress->n_ports > 0 &&
	    json_object_set_new(req, "ingress", ingress_json(ingress)) == -1) {
		json_decref(req);
		req = NULL;
	}
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	st = admin_call(sock, "POST", "/v1/sandboxes", body, &reply);
	if (st == -1) {
		snprintf(err, errlen, "admin socket %s: %s", sock,
		    strerror(errno));
		goto fail;
	}
	rep = json_loads(reply, 0, NULL);
	if (st != 201) {
		msg = json_string_value(json_object_get(rep, "error"));
		snprintf(err, errlen, "the gateway refused the sandbox: %d %s",
		    st, msg != NULL ? msg : "");
		goto fail;
	}
	if (rep == NULL ||
	    placeholders_parse(json_object_get(rep, "placeholders"), phs, n) == -1) {
		snprintf(err, errlen, "bad reply from the gateway");
		/* registered all the same: undo it */
		(void)sandbox_admin_unregister(sock, id);
		goto fail;
	}
	json_decref(req);
	json_decref(rep);
	free(body);
	free(reply);
	return 0;
fail:
	json_decref(req);
	json_decref(rep);
	free(body);
	free(reply);
	return -1;
}

int
sandbox_admin_unregister(const char *sock, const char *id)
{
	char path[SANDBOX_ID_MAX + 32], *body;
	int st;

	if (!sandbox_valid_id(id))
		return -1;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	st = admin_call(sock, "DELETE", path, NULL, &body);
	free(body);
	return st == 200 || st == 404 ? 0 : -1;
}

int
sandbox_admin_set_running(const char *sock, const char *id, int running)
{
	char path[SANDBOX_ID_MAX + 40], *body;
	int st;

	if (!sandbox_valid_id(id))
		return -1;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/state", id);
	st = admin_call(sock, "POST", path, running ? "{\"running\":true}" :
	    "{\"running\":false}", &body);
	free(body);
	return st == 200 ? 0 : -1;
}

/* ---------------------------------------------------------------- runtime */

int
sandbox_cgroup_hybrid(void)
{
	struct statfs root, uni;

	if (statfs("/sys/fs/cgroup", &root) == -1 ||
	    statfs("/sys/fs/cgroup/unified", &uni) == -1)
		return 0;
	return root.f_type == TMPFS_MAGIC && uni.f_type == CGROUP2_SUPER_MAGIC;
}

/* SIGKILL every process listed in a cgroup directory; the number killed. */
static int
cgroup_kill(const char *dir)
{
	char path[600];
	long pid;
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fscanf(f, "%ld", &pid) == 1)
		if (pid > 1 && kill((pid_t)pid, SIGKILL) == 0)
			n++;
	fclose(f);
	return n;
}

/* Children first; a cgroup still holding processes has them killed. */
static void
cgroup_rm(const char *dir, int depth)
{
	char sub[600];
	struct timespec d = { 0, 20 * 1000 * 1000 };
	struct dirent *de;
	DIR *dd;
	int i;

	if (depth < 4 && (dd = opendir(dir)) != NULL) {
		while ((de = readdir(dd)) != NULL) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			cgroup_rm(sub, depth + 1);
		}
		closedir(dd);
	}
	for (i = 0; i < 100 && rmdir(dir) == -1 && errno == EBUSY; i++) {
		(void)cgroup_kill(dir);
		nanosleep(&d, NULL);
	}
}

/*
 * The sandbox's cgroups in every hierarchy: whatever still runs in them
 * (a runtime killed half-way leaves its processes behind) is killed.
 */
void
sandbox_cgroup_remove(const char *id)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	if (!sandbox_valid_id(id) || (d = opendir("/sys/fs/cgroup")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/sandgate/%s",
		    de->d_name, id);
		cgroup_rm(path, 0);
	}
	closedir(d);
}

/* Global flags first, the same for every subcommand. */
static int
runtime_argv(enum sandbox_runtime rt, const char *state, const char *const sub[],
    const char *argv[], int max)
{
	int n = 0, i;

	if (rt == SANDBOX_RUNSC) {
		argv[n++] = RUNSC_PATH;
		argv[n++] = "--root";
		argv[n++] = state;
		/*
		 * "host" is the network namespace runsc is started in: the
		 * sandbox's own (runtime_spawn joins it). --network=sandbox
		 * cannot work with Debian 12's runsc on kernels whose every
		 * netns has net.core.rmem_default: it takes them all for the
		 * root namespace and refuses to start.
		 */
		argv[n++] = "--network=host";
		argv[n++] = "--platform=ptrace";
	} else {
		argv[n++] = CRUN_PATH;
		argv[n++] = "--root";
		argv[n++] = state;
	}
	for (i = 0; sub[i] != NULL && n < max - 1; i++)
		argv[n++] = sub[i];
	argv[n] = NULL;
	return sub[i] == NULL ? 0 : -1;
}

/*
 * fork + exec, never a shell. crun runs in a private mount namespace where a
 * hybrid host's cgroup2 mount is gone, so it drives the v1 hierarchies only.
 */
/*
 * runsc's control socket is an abstract unix socket, which belongs to the
 * network namespace runsc started in: every later runsc call (state, exec,
 * kill, delete) must be made from the sandbox's namespace too, or runsc
 * thinks the container stopped and a delete would orphan its processes.
 */
static const char *
id_netns(enum sandbox_runtime rt, const char *id, char *buf, size_t len)
{
	if (rt != SANDBOX_RUNSC || !sandbox_valid_id(id))
		return NULL;
	snprintf(buf, len, "%s/sandgate-%s", SANDBOX_NETNS_DIR, id);
	return access(buf, F_OK) == 0 ? buf : NULL;
}

#define SPAWN_INHERIT	(-1)	/* our stdin, stdout, stderr */
#define SPAWN_QUIET	(-2)	/* stdout and stderr to /dev/null */

static pid_t
runtime_spawn(enum sandbox_runtime rt, const char *state, const char *const sub[],
    const char *netns, int out, const struct sandbox_relay *relay)
{
	const char *argv[32];
	sigset_t none;
	pid_t pid, parent = getpid();
	int fd, own_group;

	if (runtime_argv(rt, state, sub, argv, 32) == -1)
		return -1;
	/*
	 * `crun exec` passes on every signal it gets, and the launcher passes
	 * on what it gets to crun: a ^C to the whole process group reached
	 * the command twice. Without a terminal to share, crun exec gets a
	 * process group of its own, so that only the launcher hears the
	 * group's signals and passes each on once. (With a terminal on stdin
	 * it stays in the foreground group, to read from it.)
	 */
	own_group = rt == SANDBOX_CRUN && strcmp(sub[0], "exec") == 0 &&
	    !isatty(STDIN_FILENO);
	if ((pid = fork()) != 0) {
		if (pid > 0 && own_group)
			(void)setpgid(pid, pid);	/* before any signal can come */
		return pid;
	}
	if (own_group)
		(void)setpgid(0, 0);
	sandbox_relay_child(relay);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGALRM, SIG_DFL);
	/*
	 * `runsc exec` does not pass signals on to the command: it dies and
	 * leaves it running. The launcher forwards them itself (`runsc kill
	 * --pid`); a terminal's ^C or hang-up must not kill runsc exec
	 * meanwhile (Go keeps SIGINT and SIGHUP ignored when they start so).
	 */
	if (rt == SANDBOX_RUNSC && strcmp(sub[0], "exec") == 0) {
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (out != SPAWN_INHERIT && (fd = open("/dev/null", O_RDWR)) != -1) {
		if (out >= 0) {
			dup2(fd, 0);
			dup2(out, 1);
			dup2(out, 2);
		} else {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (fd > 2)
			close(fd);
	}
	if (rt == SANDBOX_CRUN) {
		if (unshare(CLONE_NEWNS) == -1 ||
		    mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1) {
			fprintf(stderr, "sandgate: private mount namespace: %s\n",
			    strerror(errno));
			_exit(127);
		}
		if (sandbox_cgroup_hybrid() &&
		    umount2("/sys/fs/cgroup/unified", MNT_DETACH) == -1) {
			fprintf(stderr, "sandgate: unmount cgroup2: %s\n",
			    strerror(errno));
			_exit(127);
		}
	}
	/*
	 * A runtime whose launcher died must not go on building a sandbox
	 * nobody will take down: the reconciliation would miss what it makes
	 * after the reap. (runsc takes its gofer and sandbox with it.)
	 */
	if (strcmp(sub[0], "run") == 0 &&
	    (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent))
		_exit(127);
	if (rt == SANDBOX_RUNSC && netns != NULL) {
		if ((fd = open(netns, O_RDONLY | O_CLOEXEC)) == -1 ||
		    setns(fd, CLONE_NEWNET) == -1) {
			fprintf(stderr, "sandgate: join %s: %s\n", netns,
			    strerror(errno));
			_exit(127);
		}
		close(fd);
	}
	execv(argv[0], (char *const *)argv);
	fprintf(stderr, "sandgate: exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

int
sandbox_wait_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

/* Run a runtime subcommand to completion (kill, delete). */
static int
runtime_call(enum sandbox_runtime rt, const char *state, const char *const sub[],
    const char *id)
{
	char ns[128];
	pid_t pid = runtime_spawn(rt, state, sub, id_netns(rt, id, ns,
	    sizeof(ns)), SPAWN_QUIET, NULL);
	int st;

	if (pid == -1)
		return -1;
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return -1;
	return sandbox_wait_status(st);
}

void
sandbox_runtime_kill(enum sandbox_runtime rt, const char *state, const char *id,
    const char *sig)
{
	const char *const sub[] = { "kill", id, sig, NULL };

	(void)runtime_call(rt, state, sub, id);
}

int
sandbox_runtime_delete(enum sandbox_runtime rt, const char *state,
    const char *id)
{
	const char *const del[] = { "delete", "--force", id, NULL };

	return runtime_call(rt, state, del, id) == 0 ? 0 : -1;
}

pid_t
sandbox_runtime_start(enum sandbox_runtime rt, const char *state,
    const char *bundle, const char *id, const char *netns, int out_fd,
    struct sandbox_relay *relay, const char **errstr)
{
	const char *const run[] = { "run", "--bundle", bundle, id, NULL };
	pid_t pid;

	if (mkdir(state, 0700) == -1 && errno != EEXIST) {
		*errstr = "cannot create the runtime state directory";
		return -1;
	}
	if ((pid = runtime_spawn(rt, state, run, netns,
	    out_fd >= 0 ? out_fd : SPAWN_INHERIT, out_fd >= 0 ? NULL :
	    relay)) == -1)
		*errstr = "fork";
	sandbox_relay_parent(relay);
	return pid;
}

pid_t
sandbox_runtime_exec(enum sandbox_runtime rt, const char *state,
    const char *id, const char *process_json, const char *pid_file,
    struct sandbox_relay *relay, const char **errstr)
{
	const char *const crun[] = { "exec", "--process", process_json, id,
	    NULL };
	const char *const runsc[] = { "exec", "--internal-pid-file", pid_file,
	    "--process", process_json, id, NULL };
	char ns[128];
	pid_t pid;

	if ((pid = runtime_spawn(rt, state, rt == SANDBOX_RUNSC ? runsc : crun,
	    id_netns(rt, id, ns, sizeof(ns)), SPAWN_INHERIT, relay)) == -1)
		*errstr = "fork";
	sandbox_relay_parent(relay);
	return pid;
}

int
sandbox_runtime_kill_pid(enum sandbox_runtime rt, const char *state,
    const char *id, long pid, const char *sig)
{
	char pbuf[24];
	const char *const sub[] = { "kill", "--pid", pbuf, id, sig, NULL };

	snprintf(pbuf, sizeof(pbuf), "%ld", pid);
	return runtime_call(rt, state, sub, id) == 0 ? 0 : -1;
}

/* `state ID` prints the container's state as JSON on stdout. */
int
sandbox_runtime_status(enum sandbox_runtime rt, const char *state,
    const char *id, char *buf, size_t len)
{
	const char *const sub[] = { "state", id, NULL };
	char out[8192], ns[128];
	const char *v;
	size_t n = 0;
	ssize_t r;
	json_t *j;
	pid_t pid;
	int pfd[2], st, rc = -1;

	if (pipe2(pfd, O_CLOEXEC) == -1)
		return -1;
	pid = runtime_spawn(rt, state, sub, id_netns(rt, id, ns, sizeof(ns)),
	    pfd[1], NULL);
	close(pfd[1]);
	if (pid == -1) {
		close(pfd[0]);
		return -1;
	}
	while (n < sizeof(out) - 1) {
		r = read(pfd[0], out + n, sizeof(out) - 1 - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	/* runsc may log to stderr, which shares the pipe: find the object */
	v = strchr(out, '{');
	if (v != NULL && (j = json_loads(v, JSON_DISABLE_EOF_CHECK, NULL)) != NULL) {
		if ((v = json_string_value(json_object_get(j, "status"))) != NULL) {
			snprintf(buf, len, "%s", v);
			rc = 0;
		}
		json_decref(j);
	}
	return rc;
}
