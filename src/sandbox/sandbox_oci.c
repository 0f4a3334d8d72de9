/*
 * The OCI bundle of a sandbox: config.json (runtime-spec 1.0) built with
 * jansson, the skeleton root directory of a host-rootfs sandbox and its
 * generated /etc (never the host's own).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#include "sandbox/sandbox.h"

/* The host directories a host-rootfs sandbox sees, read-only. */
static const char *const host_dirs[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
};

#define CA_PATH	"/etc/ssl/certs/ca-certificates.crt"

int
sandbox_parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mul = 1ull << 10; end++;
		break;
	case 'm': case 'M':
		mul = 1ull << 20; end++;
		break;
	case 'g': case 'G':
		mul = 1ull << 30; end++;
		break;
	default:
		return -1;
	}
	if (*end != '\0' || v == 0 || v > UINT64_MAX / mul)
		return -1;
	*bytes = v * mul;
	return 0;
}

/* "1", "0.5", "2.25": CPUs, kept as thousandths. */
int
sandbox_parse_cpus(const char *s, uint64_t *millis)
{
	uint64_t whole = 0, frac = 0, scale = 100;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > 1024)
			return -1;
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (scale == 0)
				return -1;
			frac += (uint64_t)(*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p != '\0' || whole * 1000 + frac == 0)
		return -1;
	*millis = whole * 1000 + frac;
	return 0;
}

static json_t *
mount_json(const char *dst, const char *type, const char *src,
    const char *const opts[])
{
	json_t *o = json_array();
	size_t i;

	for (i = 0; opts[i] != NULL; i++)
		json_array_append_new(o, json_string(opts[i]));
	return json_pack("{s:s,s:s,s:s,s:o}", "destination", dst, "type", type,
	    "source", src, "options", o);
}

/* What the launcher binds over a prepared root's /etc. */
static const char *const etc_files[] = { "resolv.conf", "hosts",
    "ssl/certs/ca-certificates.crt" };

int
sandbox_oci_check_rootfs(const char *dir, char *err, size_t len)
{
	char path[PATH_MAX], to[PATH_MAX];
	struct stat st;
	ssize_t n;
	size_t i;

	for (i = 0; i < sizeof(etc_files) / sizeof(etc_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/etc/%s", dir, etc_files[i]);
		if (lstat(path, &st) == -1 || !S_ISLNK(st.st_mode))
			continue;
		if ((n = readlink(path, to, sizeof(to) - 1)) < 0)
			n = 0;
		to[n] = '\0';
		snprintf(err, len, "--rootfs %s: etc/%s is a symlink (to %s): "
		    "the launcher binds its own over it, and the runtime would "
		    "follow the link inside the root; make it a file", dir,
		    etc_files[i], to);
		return -1;
	}
	return 0;
}

static int
add_mounts(json_t *m, const struct sandbox_spec *sp)
{
	static const char *const ro_bind[] = { "rbind", "ro", "nosuid",
	    "nodev", NULL };
	static const char *const rw_bind[] = { "rbind", "rw", "nosuid",
	    "nodev", NULL };
	static const char *const proc[] = { "nosuid", "noexec", "nodev", NULL };
	static const char *const dev[] = { "nosuid", "strictatime",
	    "mode=755", "size=65536k", NULL };
	static const char *const pts[] = { "nosuid", "noexec", "newinstance",
	    "ptmxmode=0666", "mode=0620", NULL };
	static const char *const shm[] = { "nosuid", "noexec", "nodev",
	    "mode=1777", "size=65536k", NULL };
	static const char *const tmp[] = { "nosuid", "nodev", "mode=1777",
	    "size=1g", NULL };
	static const char *const ro_file[] = { "bind", "ro", "nosuid",
	    "nodev", NULL };
	char src[PATH_MAX], dst[64];
	struct stat st;
	size_t i;

	if (sp->etc_dir == NULL)
		return -1;
	json_array_append_new(m, mount_json("/proc", "proc", "proc", proc));
	json_array_append_new(m, mount_json("/dev", "tmpfs", "tmpfs", dev));
	json_array_append_new(m, mount_json("/dev/pts", "devpts", "devpts", pts));
	json_array_append_new(m, mount_json("/dev/shm", "tmpfs", "shm", shm));
	json_array_append_new(m, mount_json("/tmp", "tmpfs", "tmpfs", tmp));
	if (strcmp(sp->rootfs, "host") == 0) {
		for (i = 0; i < sizeof(host_dirs) / sizeof(host_dirs[0]); i++) {
			/* symlinks (merged /usr) are recreated in the skeleton */
			if (lstat(host_dirs[i], &st) == -1 || !S_ISDIR(st.st_mode))
				continue;
			json_array_append_new(m, mount_json(host_dirs[i], "bind",
			    host_dirs[i], ro_bind));
		}
		json_array_append_new(m, mount_json("/etc", "bind", sp->etc_dir,
		    ro_bind));
	} else {
		/* a prepared root keeps its /etc, but DNS and trust are ours */
		for (i = 0; i < sizeof(etc_files) / sizeof(etc_files[0]); i++) {
			snprintf(src, sizeof(src), "%s/%s", sp->etc_dir,
			    etc_files[i]);
			snprintf(dst, sizeof(dst), "/etc/%s", etc_files[i]);
			json_array_append_new(m, mount_json(dst, "bind", src,
			    ro_file));
		}
	}
	if (sp->workspace != NULL)
		json_array_append_new(m, mount_json("/workspace", "bind",
		    sp->workspace, rw_bind));
	return 0;
}

static json_t *
process_json(const struct sandbox_spec *sp)
{
	json_t *args = json_array(), *env = json_array(), *caps;
	char buf[PATH_MAX + 32];
	int i;

	for (i = 0; i < sp->argc; i++)
		json_array_append_new(args, json_string(sp->argv[i]));
	json_array_append_new(env, json_string(
	    "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"));
	json_array_append_new(env, json_string("HOME=/tmp"));
	json_array_append_new(env, json_string("LANG=C.UTF-8"));
	if (sp->workspace != NULL)
		json_array_append_new(env, json_string("SANDGATE_WORKSPACE=/workspace"));
	if (sp->ca_file != NULL) {
		snprintf(buf, sizeof(buf), "SSL_CERT_FILE=%s", sp->ca_file);
		json_array_append_new(env, json_string(buf));
		snprintf(buf, sizeof(buf), "REQUESTS_CA_BUNDLE=%s", sp->ca_file);
		json_array_append_new(env, json_string(buf));
		snprintf(buf, sizeof(buf), "NODE_EXTRA_CA_CERTS=%s", sp->ca_file);
		json_array_append_new(env, json_string(buf));
		/* boto3 and the AWS CLI read neither of the above. */
		snprintf(buf, sizeof(buf), "AWS_CA_BUNDLE=%s", sp->ca_file);
		json_array_append_new(env, json_string(buf));
	}
	snprintf(buf, sizeof(buf), "SANDGATE_SANDBOX=%s", sp->id);
	json_array_append_new(env, json_string(buf));
	for (i = 0; i < sp->n_env; i++)
		json_array_append_new(env, json_string(sp->env[i]));
	/* no capability in any set */
	caps = json_pack("{s:[],s:[],s:[],s:[],s:[]}", "bounding", "effective",
	    "inheritable", "permitted", "ambient");
	return json_pack("{s:b,s:{s:i,s:i},s:o,s:o,s:s,s:o,s:b}",
	    "terminal", 0, "user", "uid", 0, "gid", 0, "args", args, "env", env,
	    "cwd", sp->workspace != NULL ? "/workspace" : "/tmp",
	    "capabilities", caps, "noNewPrivileges", 1);
}

static json_t *
linux_json(const struct sandbox_spec *sp)
{
	json_t *ns, *res, *lx;
	char cg[SANDBOX_ID_MAX + 32];

	ns = json_pack("[{s:s},{s:s},{s:s},{s:s}]", "type", "pid",
	    "type", "ipc", "type", "uts", "type", "mount");
	/*
	 * crun gets a fresh user namespace and joins the sandbox's network
	 * namespace by path. runsc is started inside that network namespace
	 * (see sandbox_run.c) and its sentry already runs as an unprivileged
	 * user in a user namespace of its own; the Debian build refuses a
	 * user namespace in the spec on top of that.
	 */
	if (sp->runtime == SANDBOX_CRUN) {
		json_array_append_new(ns, json_pack("{s:s}", "type", "user"));
		json_array_append_new(ns, json_pack("{s:s,s:s}", "type",
		    "network", "path", sp->netns_path));
	}
	res = json_object();
	if (sp->memory != 0)
		json_object_set_new(res, "memory", json_pack("{s:I}", "limit",
		    (json_int_t)sp->memory));
	if (sp->cpu_millis != 0)
		json_object_set_new(res, "cpu", json_pack("{s:I,s:I}", "quota",
		    (json_int_t)(sp->cpu_millis * 100), "period",
		    (json_int_t)100000));
	if (sp->pids != 0)
		json_object_set_new(res, "pids", json_pack("{s:I}", "limit",
		    (json_int_t)sp->pids));
	snprintf(cg, sizeof(cg), "/sandgate/%s", sp->id);
	lx = json_pack("{s:o,s:o,s:s,s:[s,s,s,s,s,s],s:[s,s,s,s,s,s]}",
	    "namespaces", ns, "resources", res, "cgroupsPath", cg,
	    "maskedPaths", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	    "/proc/timer_list", "/proc/sched_debug", "/proc/scsi",
	    "readonlyPaths", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
	    "/proc/sysrq-trigger", "/proc/asound");
	if (lx != NULL && sp->runtime == SANDBOX_CRUN) {
		json_object_set_new(lx, "uidMappings", json_pack("[{s:i,s:I,s:I}]",
		    "containerID", 0, "hostID", (json_int_t)sp->uid_base,
		    "size", (json_int_t)sp->id_count));
		json_object_set_new(lx, "gidMappings", json_pack("[{s:i,s:I,s:I}]",
		    "containerID", 0, "hostID", (json_int_t)sp->uid_base,
		    "size", (json_int_t)sp->id_count));
	}
	return lx;
}

json_t *
sandbox_oci_config(const struct sandbox_spec *sp, const char **errstr)
{
	json_t *cfg = NULL, *mounts, *proc, *lx;
	char host[SANDBOX_ID_MAX + 16];

	if (sp->argc < 1 || sp->netns_path == NULL || sp->id == NULL ||
	    sp->rootfs == NULL || sp->root_path == NULL || sp->id_count == 0) {
		*errstr = "incomplete sandbox spec";
		return NULL;
	}
	mounts = json_array();
	if (add_mounts(mounts, sp) == -1) {
		json_decref(mounts);
		*errstr = "the sandbox needs a generated /etc";
		return NULL;
	}
	proc = process_json(sp);
	lx = linux_json(sp);
	snprintf(host, sizeof(host), "sandbox-%s", sp->id);
	if (mounts != NULL && proc != NULL && lx != NULL)
		cfg = json_pack("{s:s,s:o,s:{s:s,s:b},s:s,s:o,s:o}",
		    "ociVersion", "1.0.2", "process", proc,
		    "root", "path", sp->root_path, "readonly", 1,
		    "hostname", host, "mounts", mounts, "linux", lx);
	else {
		json_decref(mounts);
		json_decref(proc);
		json_decref(lx);
	}
	if (cfg == NULL)
		*errstr = "out of memory building config.json";
	return cfg;
}

/* ---------------------------------------------------------------- files */

static int
write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;
	int ok;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -1;
	if ((f = fopen(path, "we")) == NULL)
		return -1;
	ok = fputs(text, f) >= 0;
	if (fclose(f) != 0 || !ok)
		return -1;
	return chmod(path, 0644);
}

/* Append a whole file to f, making sure it ends in a newline. */
static int
append_file(FILE *f, const char *path)
{
	char buf[8192];
	size_t n, last = 0;
	FILE *in;

	if ((in = fopen(path, "re")) == NULL)
		return -1;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		if (fwrite(buf, 1, n, f) != n) {
			fclose(in);
			return -1;
		}
		last = n;
	}
	if (last > 0 && buf[last - 1] != '\n')
		fputc('\n', f);
	fclose(in);
	return 0;
}

int
sandbox_oci_write_etc(const char *dir, const struct sandbox_net *n,
    const char *ca_bundle, const char *sg_ca, const char **errstr)
{
	char path[PATH_MAX], gw[INET_ADDRSTRLEN], text[512];
	FILE *f;

	*errstr = "cannot write the sandbox's /etc";
	if (inet_ntop(AF_INET, &n->host_addr, gw, sizeof(gw)) == NULL)
		return -1;
	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		return -1;
	snprintf(text, sizeof(text), "nameserver %s\noptions ndots:1\n", gw);
	if (write_file(dir, "passwd",
	    "root:x:0:0:root:/tmp:/bin/sh\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n") == -1 ||
	    write_file(dir, "group", "root:x:0:\nnogroup:x:65534:\n") == -1 ||
	    write_file(dir, "hosts", "127.0.0.1\tlocalhost\n") == -1 ||
	    write_file(dir, "nsswitch.conf",
	    "passwd: files\ngroup: files\nhosts: files dns\n") == -1 ||
	    write_file(dir, "resolv.conf", text) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/ssl", dir);
	if (mkdir(path, 0755) == -1 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof(path), "%s/ssl/certs", dir);
	if (mkdir(path, 0755) == -1 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof(path), "%s/ssl/certs/ca-certificates.crt", dir);
	if ((f = fopen(path, "we")) == NULL)
		return -1;
	if (ca_bundle != NULL && append_file(f, ca_bundle) == -1) {
		fclose(f);
		*errstr = "cannot read the host's CA bundle";
		return -1;
	}
	if (sg_ca != NULL && append_file(f, sg_ca) == -1) {
		fclose(f);
		*errstr = "cannot read sandgate's CA certificate";
		return -1;
	}
	if (fclose(f) != 0 || chmod(path, 0644) == -1)
		return -1;
	return 0;
}

/* The skeleton root: mount points, and the host's top-level symlinks. */
int
sandbox_oci_write_rootfs(const char *dir)
{
	static const char *const mps[] = { "etc", "tmp", "proc", "dev",
	    "workspace", "root" };
	char path[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t r;
	size_t i;

	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		return -1;
	for (i = 0; i < sizeof(mps) / sizeof(mps[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, mps[i]);
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			return -1;
	}
	for (i = 0; i < sizeof(host_dirs) / sizeof(host_dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", dir, host_dirs[i]);
		if (lstat(host_dirs[i], &st) == -1)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (mkdir(path, 0755) == -1 && errno != EEXIST)
				return -1;
		} else if (S_ISLNK(st.st_mode)) {
			r = readlink(host_dirs[i], target, sizeof(target) - 1);
			if (r <= 0)
				return -1;
			target[r] = '\0';
			if (symlink(target, path) == -1 && errno != EEXIST)
				return -1;
		}
	}
	return 0;
}
