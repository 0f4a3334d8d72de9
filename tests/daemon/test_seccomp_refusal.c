/*
 * A call outside the seccomp allow-lists is refused with EPERM and reported:
 * its name once in the log (stderr), counted, and left in the refusing
 * thread's slot for the session that failed because of it. Each case loads
 * the real filter in a forked child and reports back over a pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "check.h"
#include "core/refusal.h"
#include "daemon/privdrop_int.h"

struct result {
	int	loaded;		/* the filter's rule count, or -1 */
	int	ret, err;	/* the refused call's return value and errno */
	int	ret2, err2;	/* the same call again */
	int	taken, taken_again;	/* refusal_take() after the call, twice */
	int	other_taken;	/* refusal_take() on the other thread */
	unsigned long long count, total;
	char	name[32];
};

struct child_out {
	int	status;
	struct result r;
	char	log[4096];
};

typedef void (*child_fn)(struct result *);

/* Run fn under profile in a child; its stderr and result come back. */
static void
run_child(int profile, child_fn fn, struct child_out *out)
{
	int res[2], err[2];
	const char *errstr = NULL;
	ssize_t n;
	size_t off = 0;
	pid_t pid;

	memset(out, 0, sizeof(*out));
	if (pipe(res) == -1 || pipe(err) == -1)
		abort();
	if ((pid = fork()) == 0) {
		struct result r;

		memset(&r, 0, sizeof(r));
		dup2(err[1], STDERR_FILENO);
		close(res[0]);
		close(err[0]);
		r.loaded = privdrop_seccomp_load_profile(profile, &errstr);
		if (r.loaded != -1)
			fn(&r);
		(void)!write(res[1], &r, sizeof(r));
		_exit(0);
	}
	close(res[1]);
	close(err[1]);
	if (read(res[0], &out->r, sizeof(out->r)) != sizeof(out->r))
		out->r.loaded = -2;	/* died before reporting */
	while (off + 1 < sizeof(out->log) &&
	    (n = read(err[0], out->log + off, sizeof(out->log) - 1 - off)) > 0)
		off += (size_t)n;
	out->log[off] = '\0';
	close(res[0]);
	close(err[0]);
	waitpid(pid, &out->status, 0);
}

static void
note(struct result *r, int nr)
{
	const char *name = refusal_name(nr);

	r->count = refusal_count(nr);
	r->total = refusal_total();
	snprintf(r->name, sizeof(r->name), "%s", name ? name : "(none)");
}

/* chdir is on neither list. */
static void
call_chdir(struct result *r)
{
	r->ret = chdir("/");
	r->err = errno;
	r->taken = refusal_take();
	r->taken_again = refusal_take();
	r->ret2 = chdir("/");
	r->err2 = errno;
	note(r, SYS_chdir);
}

static void *
thread_mkdir(void *arg)
{
	struct result *r = arg;

	r->ret = (int)syscall(SYS_mkdirat, AT_FDCWD, "/nonexistent-sg/x", 0700);
	r->err = errno;
	r->taken = refusal_take();
	return NULL;
}

/* Another thread, started under the filter with the workers' mask. */
static void
call_in_thread(struct result *r)
{
	sigset_t all, old;
	pthread_t t;

	sigfillset(&all);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&t, NULL, thread_mkdir, r) != 0) {
		r->ret = -99;
		return;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_join(t, NULL);
	r->other_taken = refusal_take();	/* the main thread refused nothing */
	note(r, SYS_mkdirat);
}

/* A socket of a family the network process does not speak. */
static void
call_packet_socket(struct result *r)
{
	r->ret = socket(AF_PACKET, SOCK_RAW, 0);
	r->err = errno;
	r->taken = refusal_take();
	note(r, SYS_socket);
}

/* The keeper has no socket of its own to make. */
static void
call_inet_socket(struct result *r)
{
	r->ret = socket(AF_INET, SOCK_STREAM, 0);
	r->err = errno;
	r->taken = refusal_take();
	note(r, SYS_socket);
}

/* A SIGSYS that someone sent is not a refusal. */
static void
call_forged(struct result *r)
{
	r->ret = raise(SIGSYS);
	r->err = errno;
	r->taken = refusal_take();
	r->total = refusal_total();
}

/* Only an exploit calls execve: still killed, not turned into EPERM. */
static void
call_execve(struct result *r)
{
	char *argv[] = { "/bin/true", NULL };

	r->ret = execve("/bin/true", argv, NULL);
	r->err = errno;
}

static int
occurrences(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay++;
	}
	return n;
}

static void
expect_refused(const char *what, struct child_out *o, int nr, const char *name)
{
	char line[128];

	snprintf(line, sizeof(line), "seccomp: refused system call %s (%d)\n",
	    name, nr);
	CHECK_MSG(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0,
	    "%s: child status %#x, log: %s", what, o->status, o->log);
	CHECK_MSG(o->r.loaded > 0, "%s: filter not loaded (%d)", what,
	    o->r.loaded);
	CHECK_MSG(o->r.ret == -1 && o->r.err == EPERM, "%s: %d errno %d", what,
	    o->r.ret, o->r.err);
	CHECK_MSG(o->r.taken == nr, "%s: taken %d", what, o->r.taken);
	CHECK_STR(o->r.name, name);
	CHECK_MSG(strstr(o->log, line) != NULL, "%s: no \"%s\" in: %s", what,
	    line, o->log);
	CHECK_MSG(strstr(o->log, " sandgate warn: ") != NULL, "%s: log: %s",
	    what, o->log);
}

int
main(void)
{
	struct child_out o;

	run_child(PD_PROFILE_NETWORK, call_chdir, &o);
	expect_refused("chdir", &o, SYS_chdir, "chdir");
	CHECK_INT(o.r.taken_again, -1);
	CHECK_INT(o.r.ret2, -1);
	CHECK_INT(o.r.err2, EPERM);
	CHECK_INT(o.r.count, 2);
	/* once per name in the log, however often it is refused */
	CHECK_MSG(occurrences(o.log, "refused system call chdir") == 1,
	    "log: %s", o.log);

	run_child(PD_PROFILE_NETWORK, call_in_thread, &o);
	expect_refused("thread", &o, SYS_mkdirat, "mkdirat");
	CHECK_INT(o.r.other_taken, -1);
	CHECK_INT(o.r.count, 1);

	run_child(PD_PROFILE_NETWORK, call_packet_socket, &o);
	expect_refused("AF_PACKET", &o, SYS_socket, "socket");

	run_child(PD_PROFILE_KEEPER, call_inet_socket, &o);
	expect_refused("keeper socket", &o, SYS_socket, "socket");

	run_child(PD_PROFILE_NETWORK, call_forged, &o);
	CHECK_MSG(WIFEXITED(o.status), "forged SIGSYS killed the child: %#x",
	    o.status);
	CHECK_INT(o.r.ret, 0);
	CHECK_INT(o.r.taken, -1);
	CHECK_INT(o.r.total, 0);
	CHECK_MSG(strstr(o.log, "refused") == NULL, "log: %s", o.log);

	run_child(PD_PROFILE_NETWORK, call_execve, &o);
	CHECK_MSG(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGSYS,
	    "execve: status %#x", o.status);
	CHECK_INT(o.r.loaded, -2);
	return check_summary();
}
