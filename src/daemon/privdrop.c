/*
 * The privilege drop of `sandgate serve`: resolves config `user:`, gives the
 * state directory to that user's group (or to audit.read_group, which the
 * user then joins), switches uid and gid, clears every
 * capability set and proves the key files cannot be opened afterwards.
 * The system-call filter that follows is in privdrop_seccomp.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "core/config.h"
#include "core/log.h"
#include "daemon/privdrop.h"
#include "daemon/privdrop_int.h"

struct privdrop {
	char	user[64];
	uid_t	uid;
	gid_t	gid;
	int	audit_group;	/* audit.read_group is set: ... */
	gid_t	audit_gid;	/* its gid, the user's one supplementary group */
};

/* Start-up only, one thread: one message at a time is enough. */
static char pd_errbuf[768];

static const char *pd_err(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static const char *
pd_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pd_errbuf, sizeof(pd_errbuf), fmt, ap);
	va_end(ap);
	return pd_errbuf;
}

/* Every capability out of the bounding set: nothing can come back by exec. */
static int
bounding_set_drop(void)
{
	int c;

	for (c = 0; c < 64; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == -1)
			break;		/* EINVAL: past the kernel's last cap */
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1)
			return -1;
	}
	return 0;
}

/* audit.read_group: the group must exist and not be root's. */
static int
read_group_resolve(const struct config *cfg, struct privdrop *pd,
    const char **errstr)
{
	struct group *gr;

	if (cfg->audit_read_group == NULL)
		return 0;
	errno = 0;
	if ((gr = getgrnam(cfg->audit_read_group)) == NULL) {
		if (errno != 0 && errno != ENOENT && errno != ESRCH)
			*errstr = pd_err("cannot look up group \"%s\": %s",
			    cfg->audit_read_group, strerror(errno));
		else
			*errstr = pd_err("audit.read_group: group \"%s\" does "
			    "not exist (create it: groupadd --system %s; or set "
			    "audit.read_group: null)", cfg->audit_read_group,
			    cfg->audit_read_group);
		return -1;
	}
	if (gr->gr_gid == 0) {
		*errstr = pd_err("audit.read_group: \"%s\" is gid 0: name a "
		    "group of its own", cfg->audit_read_group);
		return -1;
	}
	pd->audit_group = 1;
	pd->audit_gid = gr->gr_gid;
	return 0;
}

int
privdrop_prepare(const struct config *cfg, struct privdrop **out,
    const char **errstr)
{
	struct privdrop *pd;
	struct passwd *pw;

	*out = NULL;
	if (cfg->user == NULL) {
		log_info("user: null: the gateway keeps the privileges it was "
		    "started with (uid %u)", (unsigned)geteuid());
		if (cfg->audit_read_group != NULL)
			log_warnx("audit.read_group applies only with the "
			    "privilege drop (user:): audit.db stays 0600");
		return 0;
	}
	if (geteuid() != 0) {
		if (cfg->audit_read_group != NULL)
			log_warnx("audit.read_group applies only when serve "
			    "starts as root: audit.db stays as it is");
		log_info("user: %s: not started as root (uid %u): no privileges "
		    "to drop", cfg->user, (unsigned)geteuid());
		return 0;
	}
	errno = 0;
	if ((pw = getpwnam(cfg->user)) == NULL) {
		if (errno != 0 && errno != ENOENT && errno != ESRCH)
			*errstr = pd_err("cannot look up user \"%s\": %s",
			    cfg->user, strerror(errno));
		else
			*errstr = pd_err("user \"%s\" does not exist (create it: "
			    "useradd --system --no-create-home --shell "
			    "/usr/sbin/nologin %s; or set user: null to run as "
			    "root)", cfg->user, cfg->user);
		return -1;
	}
	if (pw->pw_uid == 0 || pw->pw_gid == 0) {
		*errstr = pd_err("user \"%s\" has uid or gid 0: name an "
		    "unprivileged account (or set user: null)", cfg->user);
		return -1;
	}
	if ((pd = calloc(1, sizeof(*pd))) == NULL) {
		*errstr = "out of memory";
		return -1;
	}
	snprintf(pd->user, sizeof(pd->user), "%s", pw->pw_name);
	pd->uid = pw->pw_uid;
	pd->gid = pw->pw_gid;
	if (read_group_resolve(cfg, pd, errstr) == -1) {
		free(pd);
		return -1;
	}
	if (bounding_set_drop() == -1) {
		*errstr = pd_err("cannot drop the capability bounding set: %s",
		    strerror(errno));
		free(pd);
		return -1;
	}
	*out = pd;
	return 0;
}

/*
 * state_dir stays root's but joins the user's group with search permission:
 * the dropped process can stat vault.db (rotation) and reach the files it
 * already holds open, but cannot create, rename or remove anything there,
 * where root's commands (vault set, sandbox run) write. With
 * audit.read_group the directory is that group's instead, and the user joins
 * it: its members (analysts) may then reach audit.db, and nothing else.
 */
static int
state_dir_share(const char *dir, gid_t gid)
{
	struct stat st;
	mode_t mode;
	int fd, rc = -1;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 || fstat(fd, &st) == -1)
		goto done;
	if (st.st_uid != 0) {
		rc = 0;		/* the operator's own arrangement: left alone */
		goto done;
	}
	mode = st.st_mode & 07777;
	if (st.st_gid != gid) {
		/* The old group's rights are not the new group's to inherit. */
		mode &= ~(mode_t)070;
		if (fchown(fd, (uid_t)-1, gid) == -1)
			goto done;
	}
	mode |= 010;
	if (mode != (st.st_mode & 07777) && fchmod(fd, mode) == -1)
		goto done;
	rc = 0;
done:
	if (fd != -1) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return rc;
}

/*
 * audit.read_group: audit.db and its -wal and -shm become root:GROUP 0640.
 * This runs before SQLite opens the database: SQLite, as root, gives the
 * -wal and -shm it creates the database's owner, group and mode. Done after,
 * the close() of our own descriptor would drop every POSIX lock this process
 * holds on that file -- SQLite's shared lock on audit.db and its dead-man
 * lock on the -shm -- and the next reader running as root would take the
 * -shm for abandoned and truncate it under the writer's mapping (SIGBUS).
 * A missing audit.db is created here, empty (SQLite's new database); a file
 * that is not a regular one is not touched.
 */
int
privdrop_audit_share(const struct privdrop *pd, const struct config *cfg,
    const char **errstr)
{
	static const char *const suffix[] = { "", "-wal", "-shm" };
	char path[4096];
	struct stat st;
	size_t i;
	int fd, rc;

	if (pd == NULL || !pd->audit_group)
		return 0;
	for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		rc = snprintf(path, sizeof(path), "%s%s", cfg->audit_db,
		    suffix[i]);
		if (rc < 0 || (size_t)rc >= sizeof(path)) {
			errno = ENAMETOOLONG;
			goto fail;
		}
		if ((fd = open(path, (i == 0 ? O_CREAT : 0) | O_RDONLY |
		    O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600)) == -1) {
			if (errno == ENOENT && i > 0)
				continue;
			goto fail;
		}
		errno = 0;
		rc = fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
		    fchown(fd, (uid_t)-1, pd->audit_gid) == -1 ||
		    fchmod(fd, 0640) == -1 ? -1 : 0;
		if (rc == -1 && errno == 0)
			errno = EINVAL;
		close(fd);
		if (rc == -1)
			goto fail;
	}
	log_info("audit.read_group: %s is root:%s 0640 (readable by the "
	    "group's members)", cfg->audit_db, cfg->audit_read_group);
	return 0;
fail:
	*errstr = pd_err("cannot give %s to audit.read_group %s: %s",
	    cfg->audit_db, cfg->audit_read_group, strerror(errno));
	return -1;
}

static int
identity_switch(const struct privdrop *pd)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;

	gid_t groups[1] = { pd->audit_gid }, got[2];
	int n = pd->audit_group ? 1 : 0;

	/* glibc applies each of these to every thread (the audit writer too). */
	if (setgroups((size_t)n, groups) == -1 ||
	    setresgid(pd->gid, pd->gid, pd->gid) == -1 ||
	    setresuid(pd->uid, pd->uid, pd->uid) == -1)
		return -1;
	if (getresuid(&r, &e, &s) == -1 || getresgid(&rg, &eg, &sg) == -1)
		return -1;
	if (r != pd->uid || e != pd->uid || s != pd->uid || rg != pd->gid ||
	    eg != pd->gid || sg != pd->gid || getgroups(0, NULL) != n ||
	    getgroups(2, got) != n || (n == 1 && got[0] != pd->audit_gid)) {
		errno = EPERM;
		return -1;
	}
	/* Must be impossible now; if it is not, nothing above held. */
	if (setresuid(0, 0, 0) != -1 || setresgid(0, 0, 0) != -1) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* Leaving uid 0 emptied permitted and effective; inheritable too, here. */
static int
caps_clear(void)
{
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[2];
	int i;

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
	    errno != EINVAL)
		return -1;
	memset(&hdr, 0, sizeof(hdr));
	memset(data, 0, sizeof(data));
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capset, &hdr, data) == -1 ||
	    syscall(SYS_capget, &hdr, data) == -1)
		return -1;
	for (i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted ||
		    data[i].inheritable) {
			errno = EPERM;
			return -1;
		}
	return 0;
}

/* Proof, not hope: the keys must be out of reach of the new identity. */
static int
keys_unreachable(const struct privdrop *pd, const struct config *cfg,
    const char **errstr)
{
	const char *keys[] = { cfg->ca_key, cfg->vault_key_file };
	size_t i;
	int fd;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (keys[i] == NULL)
			continue;
		if ((fd = open(keys[i], O_RDONLY | O_CLOEXEC)) != -1) {
			close(fd);
			*errstr = pd_err("user \"%s\" can open the key file %s: "
			    "make it root's with mode 0600", pd->user, keys[i]);
			return -1;
		}
	}
	return 0;
}

/* What reload and rotation will need later: say now if it is missing. */
static void
reach_check(const struct privdrop *pd, const struct config *cfg)
{
	struct stat st;
	int i;

	if (cfg->file != NULL && access(cfg->file, R_OK) == -1)
		log_warn("user %s cannot read the config file %s: reloads "
		    "(SIGHUP, POST /v1/reload) will fail", pd->user, cfg->file);
	for (i = 0; i < cfg->n_policy_paths; i++)
		if (access(cfg->policy_paths[i], R_OK) == -1)
			log_warn("user %s cannot read the policy path %s: "
			    "reloads will fail", pd->user, cfg->policy_paths[i]);
	if (cfg->vault_db != NULL && stat(cfg->vault_db, &st) == -1)
		log_warn("user %s cannot reach %s: a vault rotation takes "
		    "effect only after a restart", pd->user, cfg->vault_db);
}

int
privdrop_apply(struct privdrop *pd, const struct config *cfg,
    const char **errstr)
{
	int n;

	if (pd == NULL)
		return 0;
	if (state_dir_share(cfg->state_dir, pd->audit_group ? pd->audit_gid :
	    pd->gid) == -1) {
		*errstr = pd_err("cannot give state_dir %s to group of user "
		    "\"%s\": %s", cfg->state_dir, pd->user, strerror(errno));
		return -1;
	}
	if (identity_switch(pd) == -1) {
		*errstr = pd_err("cannot switch to user \"%s\": %s", pd->user,
		    strerror(errno));
		return -1;
	}
	if (caps_clear() == -1) {
		*errstr = pd_err("cannot clear the capabilities: %s",
		    strerror(errno));
		return -1;
	}
	/* The uid change reset dumpable to suid_dumpable: keep it off. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1) {
		*errstr = pd_err("prctl: %s", strerror(errno));
		return -1;
	}
	if (keys_unreachable(pd, cfg, errstr) == -1)
		return -1;
	reach_check(pd, cfg);
	if ((n = privdrop_seccomp_load(errstr)) == -1)
		return -1;
	log_info("privileges: running as %s (uid %u, gid %u), no capabilities, "
	    "no_new_privs, seccomp filter of %d rules on every thread",
	    pd->user, (unsigned)pd->uid, (unsigned)pd->gid, n);
	return 0;
}

void
privdrop_free(struct privdrop *pd)
{
	free(pd);
}

int
privdrop_confine_keeper(const char **errstr)
{
	int n;

	/* Still uid 0 when started as root: the key files are root's own. */
	if (geteuid() == 0 && caps_clear() == -1) {
		*errstr = pd_err("keeper: cannot clear the capabilities: %s",
		    strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1) {
		*errstr = pd_err("keeper: prctl: %s", strerror(errno));
		return -1;
	}
	if ((n = privdrop_seccomp_load_profile(PD_PROFILE_KEEPER, errstr)) == -1)
		return -1;
	log_debug("keeper: no capabilities, no_new_privs, seccomp filter of "
	    "%d rules", n);
	return 0;
}
