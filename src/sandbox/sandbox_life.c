/*
 * The life of a sandbox (docs/sandbox.md): bring one up (state row, network,
 * rules, registration, bundle), run its command in the foreground or under a
 * detached supervisor, and take every piece down again: when the command ends,
 * on `sandbox rm`, on --ttl, and — for a launcher that was killed — in the
 * reconciliation every launcher start makes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <openssl/evp.h>

#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "sandbox/sandbox.h"

#define SB_UID_BASE	100000	/* sandbox root is this host uid */
#define SB_ID_COUNT	65536
#define SB_LOG_MAX	(64ull << 20)	/* output.log stops growing here */
#define SB_STOP_GRACE	10	/* seconds between TERM and KILL */
#define SB_EOF_GRACE	10	/* seconds we wait for output EOF after exit */
#define SB_RUNSC_PIDS	512	/* pids headroom for gVisor's own threads */
#define SB_START_WAIT	60	/* seconds for the runtime to report running */

/* What up made, so that one function can take it down from any point. */
struct life {
	struct config	*cfg;
	const struct sandbox_opts *o;
	enum sandbox_runtime rt;
	struct sandbox_state *st;
	struct sandbox_net net;
	char		 dir[256];		/* /run/sandgate/bundles/ID */
	char		 state_root[64];	/* /run/sandgate/RUNTIME */
	char		 state_db[PATH_MAX];
	int		 dir_made;
	int		 row_made;
	int		 net_made;
	int		 nft_made;
	int		 registered;
	struct sandbox_placeholder *ph;
	size_t		 n_ph;
	char		*env_buf[SANDBOX_MAX_ENV];
	int		 n_env_buf;
	int64_t		 expires;	/* unix seconds, for state.db and ls */
	int64_t		 deadline_ms;	/* CLOCK_MONOTONIC: when --ttl runs out */
	int		 nflog_group;	/* the gateway's, for drop logging */
};

void
sandbox_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay_err(fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- owners */

uint64_t
sandbox_proc_start(pid_t pid)
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
	/* a zombie is dead: its parent just has not collected it yet */
	if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return 0;
	/* after "pid (comm)": field 22 is the start time, in clock ticks */
	for (field = 2, p++; *p != '\0' && field < 22; p++)
		if (*p == ' ' && p[1] != ' ')
			field++;
	if (field == 22)
		v = strtoull(p, NULL, 10);
	return v;
}

static int
owner_alive(int64_t pid, uint64_t start)
{
	return pid > 0 && start > 0 && sandbox_proc_start((pid_t)pid) == start;
}

static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)(flag == FTW_DP ? rmdir(path) : unlink(path));
	return 0;
}

static void
rm_tree(const char *dir)
{
	(void)nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Who made a bundle, for whoever has to clean it up later. */
static int
owner_write(const struct life *l)
{
	char path[300];
	json_t *j;
	int rc;

	snprintf(path, sizeof(path), "%s/owner.json", l->dir);
	j = json_pack("{s:i,s:I,s:s,s:s?,s:s?}", "pid", (int)getpid(), "start",
	    (json_int_t)sandbox_proc_start(getpid()), "runtime",
	    l->o->runtime, "admin", l->cfg->admin_socket, "state_db",
	    l->state_db);
	if (j == NULL)
		return -1;
	rc = json_dump_file(j, path, 0);
	json_decref(j);
	return rc;
}

/*
 * Take down what a sandbox left: container, cgroups, registration, rules,
 * network, bundle and state row. Each step tolerates a missing piece.
 */
static void
reap(const char *id, const char *dir, json_t *owner, struct sandbox_state *st)
{
	struct sandbox_net net;
	struct sandbox_state *other;
	const char *rt = NULL, *admin = NULL, *db = NULL, *err;

	sandbox_net_names(id, &net);
	if (owner != NULL)
		(void)json_unpack(owner, "{s?s,s?s,s?s}", "runtime", &rt,
		    "admin", &admin, "state_db", &db);
	if (rt == NULL || strcmp(rt, "runsc") == 0)
		(void)sandbox_runtime_delete(SANDBOX_RUNSC,
		    SANDBOX_RUN_DIR "/runsc", id);
	if (rt == NULL || strcmp(rt, "crun") == 0)
		(void)sandbox_runtime_delete(SANDBOX_CRUN,
		    SANDBOX_RUN_DIR "/crun", id);
	sandbox_cgroup_remove(id);
	if (admin != NULL)
		(void)sandbox_admin_unregister(admin, id);
	/* the link first: a veth without its rules must never be up */
	sandbox_net_destroy(&net);
	sandbox_nft_del(&net);
	if (dir != NULL)
		rm_tree(dir);
	if (st != NULL)
		(void)sandbox_state_delete(st, id);
	if (db != NULL && (other = sandbox_state_open(db, &err)) != NULL) {
		(void)sandbox_state_delete(other, id);
		sandbox_state_close(other);
	}
}

static json_t *
owner_load(const char *id)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/bundles/%s/owner.json",
	    SANDBOX_RUN_DIR, id);
	return json_load_file(path, 0, NULL);
}

/*
 * Leftovers of dead launchers: a bundle whose owner is gone, a sandgate
 * namespace without a bundle, a state row whose owner is gone. A launcher
 * that is still alive owns its sandbox, whatever state.db it uses.
 */
void
sandbox_reconcile(struct sandbox_state *st)
{
	char dir[300];
	const char *pfx = "sandgate-";
	struct sandbox_row *rows;
	struct dirent *de;
	struct stat sb;
	json_t *owner;
	json_int_t pid, start;
	size_t i, n;
	DIR *d;

	if ((d = opendir(SANDBOX_RUN_DIR "/bundles")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (!sandbox_valid_id(de->d_name))
				continue;
			snprintf(dir, sizeof(dir), "%s/bundles/%s",
			    SANDBOX_RUN_DIR, de->d_name);
			owner = owner_load(de->d_name);
			if (owner == NULL) {
				/* a launcher between mkdir and owner.json */
				if (stat(dir, &sb) == -1 ||
				    sb.st_mtime > time(NULL) - 30)
					continue;
			} else if (json_unpack(owner, "{s:I,s:I}", "pid", &pid,
			    "start", &start) == 0 &&
			    owner_alive(pid, (uint64_t)start)) {
				json_decref(owner);
				continue;
			}
			reap(de->d_name, dir, owner, st);
			json_decref(owner);
		}
		closedir(d);
	}
	if ((d = opendir(SANDBOX_NETNS_DIR)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, pfx, strlen(pfx)) != 0 ||
			    !sandbox_valid_id(de->d_name + strlen(pfx)))
				continue;
			snprintf(dir, sizeof(dir), "%s/bundles/%s",
			    SANDBOX_RUN_DIR, de->d_name + strlen(pfx));
			if (stat(dir, &sb) == -1 && errno == ENOENT)
				reap(de->d_name + strlen(pfx), NULL, NULL, st);
		}
		closedir(d);
	}
	if (st == NULL || sandbox_state_list(st, &rows, &n) == -1)
		return;
	for (i = 0; i < n; i++) {
		if (owner_alive(rows[i].owner_pid, rows[i].owner_start))
			continue;
		snprintf(dir, sizeof(dir), "%s/bundles/%s", SANDBOX_RUN_DIR,
		    rows[i].id);
		owner = owner_load(rows[i].id);
		/* a row whose bundle another live launcher owns is not ours */
		if (owner != NULL && json_unpack(owner, "{s:I,s:I}", "pid",
		    &pid, "start", &start) == 0 &&
		    owner_alive(pid, (uint64_t)start)) {
			json_decref(owner);
			continue;
		}
		reap(rows[i].id, dir, owner, st);
		json_decref(owner);
	}
	free(rows);
}

void
sandbox_state_path(const struct config *cfg, char *buf, size_t len)
{
	snprintf(buf, len, "%s/state.db", cfg->state_dir);
}

int
sandbox_lock(void)
{
	int fd;

	(void)mkdir(SANDBOX_RUN_DIR, 0711);
	(void)mkdir(SANDBOX_RUN_DIR "/bundles", 0711);
	if ((fd = open(SANDBOX_RUN_DIR "/sandbox.lock", O_RDWR | O_CREAT |
	    O_CLOEXEC, 0600)) == -1)
		return -1;
	while (flock(fd, LOCK_EX) == -1)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}

/* ---------------------------------------------------------------- up */

static uint16_t
listen_port(const struct config_listen *l)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&l->ss;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&l->ss;

	if (!l->enabled)
		return 0;
	if (l->ss.ss_family == AF_INET)
		return ntohs(sin->sin_port);
	if (l->ss.ss_family == AF_INET6)
		return ntohs(sin6->sin6_port);
	return 0;
}

/*
 * Where a sandbox's packets for listener l go: the listener's own IPv4
 * address (loopback by default: DNAT there through route_localnet), or
 * for 0.0.0.0 the sandbox's gateway address. -1 when it is off or IPv6
 * (sandboxes get no IPv6, and sandgate's IPv6 sockets are v6-only).
 */
static int
listen_dest(const struct config_listen *l, struct sandbox_dest *d)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&l->ss;

	if (!l->enabled || l->ss.ss_family != AF_INET)
		return -1;
	d->addr = sin->sin_addr;
	d->port = ntohs(sin->sin_port);
	return d->port == 0 ? -1 : 0;
}

static int
dest_loopback(const struct sandbox_dest *d)
{
	return (ntohl(d->addr.s_addr) >> 24) == 127;
}

int
sandbox_ingress_url(const struct config *cfg, const char *id, uint16_t port,
    char *buf, size_t len)
{
	uint16_t lp = listen_port(&cfg->listen_ingress);
	const char *scheme = cfg->ingress_tls_cert != NULL ? "https" : "http";
	char pbuf[8] = "";

	if (lp == 0 || cfg->ingress_domain == NULL)
		return -1;
	if (!((lp == 80 && scheme[4] == '\0') || (lp == 443 && scheme[4] == 's')))
		snprintf(pbuf, sizeof(pbuf), ":%u", lp);
	snprintf(buf, len, "%s://%u-%s.%s%s/", scheme, port, id,
	    cfg->ingress_domain, pbuf);
	return 0;
}

static void
teardown(struct life *l)
{
	int i;

	if (l->registered)
		(void)sandbox_admin_unregister(l->cfg->admin_socket, l->net.id);
	/* the link first: a veth without its rules must never be up */
	if (l->net_made)
		sandbox_net_destroy(&l->net);
	if (l->nft_made)
		sandbox_nft_del(&l->net);
	if (l->dir_made) {
		(void)sandbox_runtime_delete(l->rt, l->state_root, l->net.id);
		sandbox_cgroup_remove(l->net.id);
		rm_tree(l->dir);
	}
	if (l->row_made)
		(void)sandbox_state_delete(l->st, l->net.id);
	sandbox_placeholders_free(l->ph, l->n_ph);
	for (i = 0; i < l->n_env_buf; i++)
		free(l->env_buf[i]);
	sandbox_state_close(l->st);
}

/*
 * Another live sandbox whose host-side veth has our name (a 32-bit hash of
 * the id: ids that collide): its name into other. After a reconcile, every
 * bundle directory is a live sandbox's (or one a launcher is making), and
 * our network steps would take its rules and its veth for leftovers.
 */
static int
veth_name_taken(const struct sandbox_net *mine, char *other, size_t otherlen)
{
	struct sandbox_net n;
	struct dirent *de;
	DIR *d;
	int taken = 0;

	if ((d = opendir(SANDBOX_RUN_DIR "/bundles")) == NULL)
		return 0;
	while (!taken && (de = readdir(d)) != NULL) {
		if (!sandbox_valid_id(de->d_name) ||
		    strcmp(de->d_name, mine->id) == 0)
			continue;
		sandbox_net_names(de->d_name, &n);
		if (strcmp(n.veth_host, mine->veth_host) == 0) {
			snprintf(other, otherlen, "%.*s", SANDBOX_ID_MAX,
			    de->d_name);
			taken = 1;
		}
	}
	closedir(d);
	return taken;
}

/* Under the launcher lock: reconcile, claim the id, build the network. */
static int
up_claim(struct life *l, const char *token, const struct sandbox_dest *tp,
    const struct sandbox_dest *dns)
{
	struct sandbox_row row;
	const char *err;
	char other[SANDBOX_ID_MAX + 1];
	int fd, rc = -1, i;

	if ((fd = sandbox_lock()) == -1) {
		sandbox_err("sandbox: lock %s/sandbox.lock: %s",
		    SANDBOX_RUN_DIR, strerror(errno));
		return -1;
	}
	sandbox_reconcile(l->st);
	if (veth_name_taken(&l->net, other, sizeof(other))) {
		sandbox_err("sandbox: %s: its network interface %s would be "
		    "sandbox %s's too (the ids' hashes collide): choose another "
		    "id", l->net.id, l->net.veth_host, other);
		goto out;
	}
	if (mkdir(l->dir, 0711) == -1) {
		sandbox_err("sandbox: %s: %s", l->net.id, errno == EEXIST ?
		    "a sandbox with this id exists" : strerror(errno));
		goto out;
	}
	l->dir_made = 1;
	if (owner_write(l) == -1) {
		sandbox_err("sandbox: cannot write %s/owner.json", l->dir);
		goto out;
	}
	memset(&row, 0, sizeof(row));
	snprintf(row.id, sizeof(row.id), "%s", l->net.id);
	snprintf(row.policy, sizeof(row.policy), "%s", l->o->policy);
	snprintf(row.runtime, sizeof(row.runtime), "%s", l->o->runtime);
	snprintf(row.mode, sizeof(row.mode), "%s", l->o->detach ? "create" :
	    "run");
	snprintf(row.state, sizeof(row.state), "creating");
	row.created = time(NULL);
	row.expires = l->expires;
	row.owner_pid = getpid();
	row.owner_start = sandbox_proc_start(getpid());
	for (i = 0; i < l->o->n_publish; i++)
		row.publish[row.n_publish++] = l->o->publish[i];
	row.is_public = l->o->is_public;
	snprintf(row.token, sizeof(row.token), "%s", token);
	snprintf(row.admin, sizeof(row.admin), "%s", l->cfg->admin_socket);
	if (sandbox_state_insert(l->st, &row) == -1) {
		sandbox_err("sandbox: %s: %s", l->net.id, errno == EEXIST ?
		    "a sandbox with this id exists" : "cannot write state.db");
		goto out;
	}
	l->row_made = 1;
	if (sandbox_netns_exists(l->net.netns)) {
		sandbox_err("sandbox: %s already exists", l->net.netns);
		goto out;
	}
	if (sandbox_net_alloc(&l->cfg->sandbox_subnet, &l->net, &err) == -1) {
		sandbox_err("sandbox: network: %s", err);
		goto out;
	}
	/* rules first (they match the veth by name): the link is never bare */
	l->nft_made = 1;	/* a failed add may leave a part */
	if (sandbox_nft_add(&l->net, tp, dns, (uint16_t)l->nflog_group,
	    &err) == -1) {
		sandbox_err("sandbox: nftables: %s", err);
		goto out;
	}
	l->net_made = 1;
	l->net.route_localnet = dest_loopback(tp) || dest_loopback(dns);
	if (sandbox_net_create(&l->net, &err) == -1) {
		sandbox_err("sandbox: network: %s", err);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

static int
up_bundle(struct life *l)
{
	char etc[PATH_MAX], root[PATH_MAX], cfgp[PATH_MAX], ws[PATH_MAX];
	char rootdir[PATH_MAX];
	const struct sandbox_opts *o = l->o;
	struct sandbox_spec sp;
	const char *err, *sgca;
	json_t *j;
	size_t i;
	int k, rc;

	memset(&sp, 0, sizeof(sp));
	snprintf(etc, sizeof(etc), "%s/etc", l->dir);
	snprintf(root, sizeof(root), "%s/rootfs", l->dir);
	snprintf(cfgp, sizeof(cfgp), "%s/config.json", l->dir);
	sgca = access(l->cfg->ca_cert, R_OK) == 0 ? l->cfg->ca_cert : NULL;
	if (sandbox_oci_write_etc(etc, &l->net,
	    "/etc/ssl/certs/ca-certificates.crt", sgca, &err) == -1) {
		sandbox_err("sandbox: %s", err);
		return -1;
	}
	sp.runtime = l->rt;
	sp.id = l->net.id;
	sp.rootfs = o->rootfs;
	if (strcmp(o->rootfs, "host") == 0) {
		if (sandbox_oci_write_rootfs(root) == -1) {
			sandbox_err("sandbox: rootfs skeleton: %s",
			    strerror(errno));
			return -1;
		}
		sp.root_path = root;
	} else {
		if (realpath(o->rootfs, rootdir) == NULL) {
			sandbox_err("sandbox: --rootfs %s: %s", o->rootfs,
			    strerror(errno));
			return -1;
		}
		sp.root_path = rootdir;
	}
	sp.etc_dir = etc;
	sp.ca_file = "/etc/ssl/certs/ca-certificates.crt";
	if (o->workspace != NULL) {
		if (realpath(o->workspace, ws) == NULL) {
			sandbox_err("sandbox: --workspace %s: %s",
			    o->workspace, strerror(errno));
			return -1;
		}
		sp.workspace = ws;
	}
	sp.netns_path = l->net.netns_path;
	for (k = 0; k < o->n_env; k++)
		sp.env[sp.n_env++] = o->env[k];
	for (i = 0; i < l->n_ph && sp.n_env < SANDBOX_MAX_ENV; i++) {
		char *kv;
		if (l->ph[i].env == NULL || asprintf(&kv, "%s=%s",
		    l->ph[i].env, l->ph[i].placeholder) == -1)
			continue;
		l->env_buf[l->n_env_buf++] = kv;
		sp.env[sp.n_env++] = kv;
	}
	sp.argv = o->cmd;
	sp.argc = o->n_cmd;
	sp.memory = o->memory;
	sp.cpu_millis = o->cpu_millis;
	/*
	 * Under runsc the cgroup's pids limit also counts gVisor's own host
	 * threads (sentry, gofer: about 40 idle, more when busy), not only the
	 * sandbox's processes: give it headroom or a busy sandbox dies.
	 */
	sp.pids = o->pids + (l->rt == SANDBOX_RUNSC ? SB_RUNSC_PIDS : 0);
	sp.uid_base = SB_UID_BASE;
	sp.id_count = SB_ID_COUNT;
	if ((j = sandbox_oci_config(&sp, &err)) == NULL) {
		sandbox_err("sandbox: %s", err);
		return -1;
	}
	rc = json_dump_file(j, cfgp, JSON_INDENT(2));
	json_decref(j);
	if (rc == -1) {
		sandbox_err("sandbox: cannot write %s", cfgp);
		return -1;
	}
	return 0;
}

static void
sha256_hex(const char *s, char out[65])
{
	unsigned char md[32];
	unsigned int n = 0;

	(void)EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL);
	util_hex_encode(md, sizeof(md), out);
}

static int
up_register(struct life *l, const char *token)
{
	struct sandbox_ingress in;
	char guest[INET_ADDRSTRLEN], hash[65], err[512];

	inet_ntop(AF_INET, &l->net.guest_addr, guest, sizeof(guest));
	(void)sandbox_state_update(l->st, l->net.id, "creating", guest);
	memset(&in, 0, sizeof(in));
	in.address = guest;
	in.ports = l->o->publish;
	in.n_ports = l->o->n_publish;
	in.is_public = l->o->is_public;
	if (!in.is_public) {
		sha256_hex(token, hash);
		in.token_sha256 = hash;
	}
	if (sandbox_admin_register(l->cfg->admin_socket, l->net.id,
	    l->o->policy, guest, &in, &l->ph, &l->n_ph, err,
	    sizeof(err)) == -1) {
		sandbox_err("sandbox: %s", err);
		return -1;
	}
	l->registered = 1;
	return 0;
}

/* ---------------------------------------------------------------- wait */

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *
sig_name(int sig)
{
	switch (sig) {
	case SIGINT:
		return "INT";
	case SIGHUP:
		return "HUP";
	case SIGKILL:
		return "KILL";
	default:
		return "TERM";
	}
}

/* Append to output.log, bounded; a full log still drains the pipe. */
static void
log_append(int fd, const char *p, size_t n, uint64_t *written)
{
	static const char full[] = "\n[sandgate: output truncated]\n";
	ssize_t w;

	if (fd == -1 || *written >= SB_LOG_MAX)
		return;
	if (*written + n > SB_LOG_MAX) {
		n = (size_t)(SB_LOG_MAX - *written);
		*written = SB_LOG_MAX;
		(void)!write(fd, p, n);
		(void)!write(fd, full, sizeof(full) - 1);
		return;
	}
	while (n > 0 && (w = write(fd, p, n)) > 0) {
		p += w;
		n -= (size_t)w;
		*written += (uint64_t)w;
	}
}

/*
 * Wait for the runtime (the command) to exit and, when its output comes
 * through out_fd, for that output to reach EOF; forward signals, enforce
 * --ttl (TERM, then KILL after a grace period). Returns the command's status.
 */
static int
life_wait(struct life *l, pid_t pid, int out_fd, int log_fd)
{
	sigset_t block, old;
	struct pollfd pfd;
	struct timespec ts;
	char buf[16384];
	uint64_t written = 0;
	time_t now, exited_at = 0, kill_at = 0;
	int st, status = -1, exited = 0, sig, stopping = 0;
	int64_t left;
	ssize_t r;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, &old);
	for (;;) {
		now = time(NULL);
		sig = sandbox_signal;
		sandbox_signal = 0;
		if (sig == SIGALRM)
			sig = 0;
		if (sig == 0 && !stopping && l->deadline_ms != 0 &&
		    mono_ms() >= l->deadline_ms)
			sig = SIGTERM;	/* --ttl ran out */
		if (sig != 0 && !exited) {
			if (!stopping)
				kill_at = now + SB_STOP_GRACE;
			stopping = 1;
			sandbox_runtime_kill(l->rt, l->state_root, l->net.id,
			    sig_name(sig));
			(void)kill(pid, sig);
		}
		if (stopping && !exited && now >= kill_at) {
			/* it ignored the polite signal */
			sandbox_runtime_kill(l->rt, l->state_root, l->net.id,
			    "KILL");
			(void)kill(pid, SIGKILL);
			kill_at = now + 2;
		}
		if (!exited && waitpid(pid, &st, WNOHANG) == pid) {
			exited = 1;
			exited_at = now;
			status = sandbox_wait_status(st);
		}
		if (exited && (out_fd == -1 || now >= exited_at + SB_EOF_GRACE))
			break;
		ts.tv_sec = 1;
		ts.tv_nsec = 0;
		if (!stopping && l->deadline_ms != 0 &&
		    (left = l->deadline_ms - mono_ms()) < 1000) {
			ts.tv_sec = 0;
			ts.tv_nsec = (left > 0 ? left : 0) * 1000000;
		}
		pfd.fd = out_fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (ppoll(out_fd >= 0 ? &pfd : NULL, out_fd >= 0 ? 1 : 0, &ts,
		    &old) <= 0)
			continue;
		r = read(out_fd, buf, sizeof(buf));
		if (r > 0)
			log_append(log_fd, buf, (size_t)r, &written);
		else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(out_fd);
			out_fd = -1;
		}
	}
	if (out_fd != -1)
		close(out_fd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}

/* Poll the runtime until the container runs (or the runtime has exited). */
static int
life_started(struct life *l, pid_t pid)
{
	/* each `state` is a process (runsc: a Go program): poll gently */
	struct timespec d = { 0, 20 * 1000 * 1000 };
	char status[32];
	time_t until = time(NULL) + SB_START_WAIT;
	int st;

	while (time(NULL) < until && sandbox_signal == 0) {
		if (sandbox_runtime_status(l->rt, l->state_root, l->net.id,
		    status, sizeof(status)) == 0 &&
		    (strcmp(status, "running") == 0 ||
		    strcmp(status, "stopped") == 0))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			/* exited before it was seen running: hand back the status */
			sandbox_err("sandbox: %s exited at start (status %d)",
			    l->o->runtime, sandbox_wait_status(st));
			return -1;
		}
		nanosleep(&d, NULL);
		if (d.tv_nsec < 160 * 1000 * 1000)
			d.tv_nsec *= 2;
	}
	sandbox_err("sandbox: %s did not start the container within %d s",
	    l->o->runtime, SB_START_WAIT);
	return -1;
}

/* ---------------------------------------------------------------- entry */

int
sandbox_new_token(char out[SANDBOX_TOKEN_HEX + 1])
{
	unsigned char rnd[SANDBOX_TOKEN_HEX / 2];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -1;
	util_hex_encode(rnd, sizeof(rnd), out);
	return 0;
}

/*
 * Bring a sandbox up and run it to its end. With ready_fd >= 0 (create),
 * this is the detached supervisor: "sandgate-ready" goes to stderr (the
 * creator's pipe) once the container runs, then stderr is let go, and the
 * command's output goes to output.log in the bundle.
 */
int
sandbox_life(struct config *cfg, const struct sandbox_opts *o,
    const char *id, const char *token)
{
	struct life l;
	struct sandbox_relay *relay = NULL;
	char logp[PATH_MAX];
	struct sandbox_dest tp, dns;
	const char *err;
	int status = 1, pfd[2] = { -1, -1 }, log_fd = -1, fd;
	pid_t pid;

	memset(&l, 0, sizeof(l));
	l.cfg = cfg;
	l.o = o;
	l.rt = strcmp(o->runtime, "crun") == 0 ? SANDBOX_CRUN : SANDBOX_RUNSC;
	/* whole seconds would cut a --ttl short by up to one */
	l.deadline_ms = o->ttl_ms > 0 ? mono_ms() + (int64_t)o->ttl_ms : 0;
	l.expires = o->ttl_ms > 0 ? time(NULL) + (int64_t)((o->ttl_ms + 999) /
	    1000) : 0;
	snprintf(l.state_root, sizeof(l.state_root), "%s/%s", SANDBOX_RUN_DIR,
	    o->runtime);
	sandbox_net_names(id, &l.net);
	snprintf(l.dir, sizeof(l.dir), "%s/bundles/%s", SANDBOX_RUN_DIR, id);
	if (cfg->admin_socket == NULL ||
	    sandbox_admin_ping(cfg->admin_socket, &l.nflog_group) == -1) {
		sandbox_err("the gateway is not running (no answer on admin "
		    "socket %s)", cfg->admin_socket ? cfg->admin_socket :
		    "(disabled)");
		return 1;
	}
	if (listen_dest(&cfg->listen_transparent, &tp) == -1 ||
	    listen_dest(&cfg->listen_dns, &dns) == -1) {
		sandbox_err("sandbox: listen.transparent and listen.dns must be "
		    "enabled on an IPv4 address (default 127.0.0.1:PORT)");
		return 1;
	}
	sandbox_state_path(cfg, l.state_db, sizeof(l.state_db));
	if ((l.st = sandbox_state_open(l.state_db, &err)) == NULL) {
		sandbox_err("sandbox: %s: %s", l.state_db, err);
		return 1;
	}
	if (up_claim(&l, token, &tp, &dns) == -1 || sandbox_signal != 0 ||
	    up_register(&l, token) == -1 || sandbox_signal != 0 ||
	    up_bundle(&l) == -1 || sandbox_signal != 0)
		goto out;
	if (o->detach) {
		snprintf(logp, sizeof(logp), "%s/output.log", l.dir);
		if (pipe2(pfd, O_CLOEXEC) == -1 || (log_fd = open(logp,
		    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) == -1) {
			sandbox_err("sandbox: %s: %s", logp, strerror(errno));
			goto out;
		}
	}
	if (!o->detach && sandbox_relay_new(l.rt, &relay) == -1) {
		sandbox_err("sandbox: output relay: %s", strerror(errno));
		goto out;
	}
	if ((pid = sandbox_runtime_start(l.rt, l.state_root, l.dir, id,
	    l.net.netns_path, pfd[1], relay, &err)) == -1) {
		sandbox_err("sandbox: %s: %s", o->runtime, err);
		goto out;
	}
	if (pfd[1] != -1) {
		close(pfd[1]);
		pfd[1] = -1;
	}
	if (o->detach) {
		if (life_started(&l, pid) == -1) {
			(void)kill(pid, SIGKILL);
			(void)waitpid(pid, NULL, 0);
			goto out;
		}
		(void)sandbox_state_update(l.st, id, "running", NULL);
		fputs("sandgate-ready\n", stderr);
		fflush(stderr);
		if ((fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) != -1) {
			dup2(fd, 2);
			close(fd);
		}
	} else
		(void)sandbox_state_update(l.st, id, "running", NULL);
	status = life_wait(&l, pid, pfd[0], log_fd);
	pfd[0] = -1;
	sandbox_relay_end(relay, SB_EOF_GRACE);
	relay = NULL;
	if (status == -1)
		status = 1;
	(void)sandbox_state_update(l.st, id, "exited", NULL);
	(void)sandbox_admin_set_running(cfg->admin_socket, id, 0);
out:
	sandbox_relay_end(relay, 0);
	if (pfd[0] != -1)
		close(pfd[0]);
	if (pfd[1] != -1)
		close(pfd[1]);
	if (log_fd != -1)
		close(log_fd);
	teardown(&l);
	/* a signal before the command started still says what ended us */
	if (status == 1 && sandbox_signal != 0 && sandbox_signal != SIGALRM &&
	    sandbox_signal != SIGCHLD)
		status = 128 + sandbox_signal;
	return status;
}

/*
 * `sandbox rm`: ask the owner to stop (TERM: it stops the command and takes
 * everything down), give it time, then kill it and take down what is left.
 * 0 removed, 1 nothing by that id.
 */
int
sandbox_remove(struct config *cfg, const char *id)
{
	struct timespec d = { 0, 50 * 1000 * 1000 };
	struct sandbox_state *st;
	struct sandbox_row row;
	char dir[300], db[PATH_MAX];
	struct stat sb;
	const char *err;
	json_t *owner;
	time_t until;
	int found, fd, rc = 1;

	sandbox_state_path(cfg, db, sizeof(db));
	if ((st = sandbox_state_open(db, &err)) == NULL) {
		sandbox_err("sandbox: %s: %s", db, err);
		return 1;
	}
	found = sandbox_state_get(st, id, &row);
	if (found == 1 && owner_alive(row.owner_pid, row.owner_start)) {
		(void)kill((pid_t)row.owner_pid, SIGTERM);
		until = time(NULL) + SB_STOP_GRACE + 10;
		while (time(NULL) < until &&
		    owner_alive(row.owner_pid, row.owner_start))
			nanosleep(&d, NULL);
		if (owner_alive(row.owner_pid, row.owner_start)) {
			(void)kill((pid_t)row.owner_pid, SIGKILL);
			while (owner_alive(row.owner_pid, row.owner_start))
				nanosleep(&d, NULL);
		}
	}
	snprintf(dir, sizeof(dir), "%s/bundles/%s", SANDBOX_RUN_DIR, id);
	if ((fd = sandbox_lock()) == -1) {
		sandbox_err("sandbox: lock: %s", strerror(errno));
		sandbox_state_close(st);
		return 1;
	}
	owner = owner_load(id);
	if (found == 1 || owner != NULL || stat(dir, &sb) == 0) {
		json_int_t pid, start;
		/* a live owner here is a launcher of another state.db: leave it */
		if (found != 1 && owner != NULL && json_unpack(owner,
		    "{s:I,s:I}", "pid", &pid, "start", &start) == 0 &&
		    owner_alive(pid, (uint64_t)start))
			sandbox_err("sandbox: %s belongs to another launcher "
			    "(pid %lld)", id, (long long)pid);
		else {
			reap(id, dir, owner, st);
			rc = 0;
		}
	} else
		sandbox_err("sandbox: no sandbox %s", id);
	json_decref(owner);
	sandbox_reconcile(st);
	close(fd);
	sandbox_state_close(st);
	return rc;
}
