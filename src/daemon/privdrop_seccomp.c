/*
 * The seccomp allow-lists of the network process and the keeper: the system
 * calls they make once they serve (found by running the e2e suite under a
 * logging filter), loaded on every thread. Anything else traps into
 * pd_sigsys, which makes it fail with EPERM and reports it by name
 * (core/refusal.h); calls that only an exploit makes kill the process.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <seccomp.h>

#include "core/refusal.h"
#include "daemon/privdrop_int.h"

/*
 * Where the refused call's return value can be set from the signal's
 * context, a refusal traps and is reported; elsewhere it is a bare EPERM
 * that only the kernel's log records.
 */
#ifndef SYS_SECCOMP
#define SYS_SECCOMP	1	/* si_code of a filter's SIGSYS (asm-generic/siginfo.h) */
#endif
#if defined(__x86_64__) || defined(__aarch64__)
#define PD_TRAP		1
#else
#define PD_TRAP		0
#endif

/* ASan and LSan stop the world at exit with ptrace from a cloned task. */
#if defined(__SANITIZE_ADDRESS__)
#define PD_SANITIZER	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PD_SANITIZER	1
#endif
#endif
#ifndef PD_SANITIZER
#define PD_SANITIZER	0
#endif

/* Allowed with any arguments. */
static const char *const pd_allow[] = {
	/* descriptors and files (SQLite, reload, /proc/self) */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close",
	"lseek", "fstat", "newfstatat", "stat", "lstat", "statx", "fcntl",
	"dup", "dup2", "dup3", "pipe", "pipe2", "eventfd2", "fsync",
	"fdatasync", "ftruncate", "open", "openat", "access", "faccessat",
	"faccessat2", "readlink", "readlinkat", "getdents64", "getcwd",
	"unlink", "unlinkat", "fstatfs", "statfs",
	/* policies_watch: its inotify descriptor is made before the drop */
	"inotify_add_watch", "inotify_rm_watch",
	/* memory (mmap and mprotect below) */
	"munmap", "mremap", "madvise", "brk", "mlock", "mlock2", "munlock",
	/* the sockets it has */
	"getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown",
	/* event loops */
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6",
	/* time */
	"clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep",
	"clock_nanosleep",
	/* threads and signals (clone below) */
	"futex", "set_robust_list", "get_robust_list", "rseq",
	"set_tid_address", "sched_yield", "sched_getaffinity", "exit",
	"exit_group", "gettid", "getpid", "getppid", "tgkill", "tkill",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait",
	"sigaltstack", "restart_syscall", "membarrier",
	/* the key keeper's monitor, reaped at exit */
	"wait4",
	/* process facts */
	"getrandom", "uname", "getuid", "geteuid", "getgid", "getegid",
	"getresuid", "getresgid", "getgroups", "prlimit64", "getrlimit",
	"sysinfo", "getrusage",
};

/* New sockets and connections (socket below): the network process only. */
static const char *const pd_allow_net[] = {
	"connect", "accept", "accept4", "getsockname", "getpeername",
	"setsockopt", "sendmmsg", "recvmmsg", "socketpair",
	/* the relay of tunnels it does not read: socket -> pipe -> socket */
	"splice",
};

/*
 * The keeper only: it writes vault.db (an oauth2 credential's rotated
 * refresh token), and SQLite, running as root, gives a journal it creates
 * the owner of the database (which needs no capability: the same owner).
 */
static const char *const pd_allow_keeper[] = {
	"fchown",
};

/* Only an exploit calls these: die rather than answer. */
static const char *const pd_kill[] = {
	"execve", "execveat", "fork", "vfork", "process_vm_readv",
	"process_vm_writev", "kexec_load", "kexec_file_load", "init_module",
	"finit_module", "delete_module", "bpf", "mount", "umount2",
	"pivot_root", "chroot", "setns", "unshare", "keyctl", "add_key",
	"request_key", "userfaultfd", "perf_event_open", "io_uring_setup",
#if !PD_SANITIZER
	"ptrace",
#endif
};

#if PD_SANITIZER
static const char *const pd_allow_sanitizer[] = {
	"ptrace", "waitid", "prctl", "clone", "sched_getparam",
	"getpgid", "kill", "getdents",
};
#endif

static int
pd_rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
    unsigned int n_args, const struct scmp_arg_cmp *args, int *count)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0;	/* not a system call of this architecture */
	if (seccomp_rule_add_array(ctx, action, nr, n_args, args) < 0)
		return -1;
	(*count)++;
	return 0;
}

static int
pd_list(scmp_filter_ctx ctx, uint32_t action, const char *const *names,
    size_t n, int *count)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (pd_rule(ctx, action, names[i], 0, NULL, count) == -1)
			return -1;
	return 0;
}

/*
 * Calls allowed only with some arguments: threads but no processes, the
 * address families the gateway speaks, no page both writable and
 * executable, prctl for thread names only.
 */
static int
pd_conditional(scmp_filter_ctx ctx, int profile, int *count)
{
	const struct scmp_arg_cmp thread[] = { SCMP_A0(SCMP_CMP_MASKED_EQ,
	    CLONE_THREAD, CLONE_THREAD) };
	const struct scmp_arg_cmp no_w[] = { SCMP_A2(SCMP_CMP_MASKED_EQ,
	    PROT_WRITE, 0) };
	const struct scmp_arg_cmp no_x[] = { SCMP_A2(SCMP_CMP_MASKED_EQ,
	    PROT_EXEC, 0) };
	const int families[] = { AF_UNIX, AF_INET, AF_INET6 };
	const int prctls[] = { PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE };
	const unsigned long ioctls[] = { FIONREAD, FIONBIO, FIOCLEX };
	size_t i;

	if (pd_rule(ctx, SCMP_ACT_ALLOW, "clone", 1, thread, count) == -1 ||
	    /* glibc falls back to clone, whose flags a filter can read */
	    pd_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL,
	    count) == -1)
		return -1;
	if (pd_rule(ctx, SCMP_ACT_ALLOW, "mmap", 1, no_w, count) == -1 ||
	    pd_rule(ctx, SCMP_ACT_ALLOW, "mmap", 1, no_x, count) == -1 ||
	    pd_rule(ctx, SCMP_ACT_ALLOW, "mprotect", 1, no_w, count) == -1 ||
	    pd_rule(ctx, SCMP_ACT_ALLOW, "mprotect", 1, no_x, count) == -1)
		return -1;
	for (i = 0; i < sizeof(families) / sizeof(families[0]) &&
	    profile == PD_PROFILE_NETWORK; i++) {
		const struct scmp_arg_cmp a[] = { SCMP_A0(SCMP_CMP_EQ,
		    (scmp_datum_t)families[i], 0) };
		if (pd_rule(ctx, SCMP_ACT_ALLOW, "socket", 1, a, count) == -1)
			return -1;
	}
	for (i = 0; i < sizeof(prctls) / sizeof(prctls[0]) && !PD_SANITIZER;
	    i++) {
		const struct scmp_arg_cmp a[] = { SCMP_A0(SCMP_CMP_EQ,
		    (scmp_datum_t)prctls[i], 0) };
		if (pd_rule(ctx, SCMP_ACT_ALLOW, "prctl", 1, a, count) == -1)
			return -1;
	}
	for (i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		const struct scmp_arg_cmp a[] = { SCMP_A1(SCMP_CMP_EQ,
		    (scmp_datum_t)ioctls[i], 0) };
		if (pd_rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1, a, count) == -1)
			return -1;
	}
	return 0;
}

#if PD_TRAP
/*
 * SIGSYS from the filter: the call was not executed. Make it return
 * -EPERM, as SCMP_ACT_ERRNO would have, and record it. Async-signal-safe.
 */
static void
pd_sigsys(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	int saved = errno;

	(void)sig;
	if (si->si_code != SYS_SECCOMP)
		return;		/* sent by someone: not a refusal */
#if defined(__x86_64__)
	uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#else
	uc->uc_mcontext.regs[0] = (unsigned long long)-EPERM;
#endif
	refusal_note(si->si_syscall);
	errno = saved;
}
#endif

/*
 * Before the filter: the names the handler will print (resolving one in
 * the handler would allocate), and the handler itself. A thread that
 * blocks SIGSYS when a call traps is killed by the kernel, so this thread
 * unblocks it; the workers' mask leaves it out (proxy_run).
 */
static int
pd_trap_prepare(void)
{
#if PD_TRAP
	struct sigaction sa;
	sigset_t sys;
	char *name;
	int nr;

	for (nr = 0; nr < REFUSAL_MAX_NR; nr++) {
		name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		if (name != NULL) {
			refusal_set_name(nr, name);
			free(name);
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = pd_sigsys;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	if (sigaction(SIGSYS, &sa, NULL) == -1 ||
	    pthread_sigmask(SIG_UNBLOCK, &sys, NULL) != 0)
		return -1;
#endif
	return 0;
}

int
privdrop_seccomp_load(const char **errstr)
{
	return privdrop_seccomp_load_profile(PD_PROFILE_NETWORK, errstr);
}

int
privdrop_seccomp_load_profile(int profile, const char **errstr)
{
	scmp_filter_ctx ctx;
	int count = 0, rc;

	if (pd_trap_prepare() == -1) {
		*errstr = "seccomp: cannot install the SIGSYS handler";
		return -1;
	}
#ifdef PRIVDROP_SECCOMP_LOG_ONLY
	/* A build to find missing calls: allow everything, log the rest. */
	ctx = seccomp_init(SCMP_ACT_LOG);
#elif PD_TRAP
	ctx = seccomp_init(SCMP_ACT_TRAP);
#else
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
#endif
	if (ctx == NULL) {
		*errstr = "seccomp: cannot initialise a filter";
		return -1;
	}
	/* Every thread, the audit writer included; refusals reach the kernel log too. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1) < 0 ||
	    pd_list(ctx, SCMP_ACT_ALLOW, pd_allow, sizeof(pd_allow) /
	    sizeof(pd_allow[0]), &count) == -1 ||
#if PD_SANITIZER
	    pd_list(ctx, SCMP_ACT_ALLOW, pd_allow_sanitizer,
	    sizeof(pd_allow_sanitizer) / sizeof(pd_allow_sanitizer[0]),
	    &count) == -1 ||
#endif
	    (profile == PD_PROFILE_NETWORK && pd_list(ctx, SCMP_ACT_ALLOW,
	    pd_allow_net, sizeof(pd_allow_net) / sizeof(pd_allow_net[0]),
	    &count) == -1) ||
	    (profile == PD_PROFILE_KEEPER && pd_list(ctx, SCMP_ACT_ALLOW,
	    pd_allow_keeper, sizeof(pd_allow_keeper) /
	    sizeof(pd_allow_keeper[0]), &count) == -1) ||
	    pd_list(ctx, SCMP_ACT_KILL_PROCESS, pd_kill, sizeof(pd_kill) /
	    sizeof(pd_kill[0]), &count) == -1 ||
	    pd_conditional(ctx, profile, &count) == -1) {
		seccomp_release(ctx);
		*errstr = "seccomp: cannot build the filter";
		return -1;
	}
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		*errstr = rc == -ESRCH ? "seccomp: a thread has a filter of its "
		    "own (TSYNC failed)" : "seccomp: cannot load the filter";
		return -1;
	}
	return count;
}
