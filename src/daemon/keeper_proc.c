/*
 * The monitor and the keeper process (keeper_proc.h). Nothing here parses
 * what a sandbox sends; the monitor reads nothing at all from the network
 * process but the end of its control socket.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "daemon/keeper_proc.h"
#include "daemon/privdrop.h"
#include "proxy/proxy.h"
#include "vault/keeper.h"

#define KP_BACKOFF_MS		1000	/* before a restart... */
#define KP_BACKOFF_MAX_MS	30000	/* ...doubling to this */
#define KP_YOUNG_MS		10000	/* a keeper that died sooner doubles it */

int
keeper_ctl_parse(const void *buf, size_t n, int n_fds, struct keeper_ctl *out)
{
	struct keeper_ctl c;

	if (buf == NULL || n != sizeof(c))
		return -1;
	memcpy(&c, buf, sizeof(c));
	if (c.magic != KEEPER_CTL_MAGIC)
		return -1;
	if (c.what == KEEPER_CTL_UP ? n_fds != 1 || c.status != 0 :
	    c.what == KEEPER_CTL_DOWN ? n_fds != 0 : 1)
		return -1;
	if (c.pid <= 0)
		return -1;
	*out = c;
	return 0;
}

static int
ctl_send(int ctl, enum keeper_ctl_what what, int fd, int status, pid_t pid)
{
	struct keeper_ctl c;
	struct msghdr mh;
	struct iovec iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	ssize_t n;

	memset(&c, 0, sizeof(c));
	c.magic = KEEPER_CTL_MAGIC;
	c.what = what;
	c.status = status;
	c.pid = (int32_t)pid;
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = &c;
	iov.iov_len = sizeof(c);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd != -1) {
		struct cmsghdr *h;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof(int));
	}
	do
		n = sendmsg(ctl, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	return n == (ssize_t)sizeof(c) ? 0 : -1;
}

int
keeper_ctl_recv(int ctl, int timeout_ms, int *fd, int *status, pid_t *pid)
{
	struct keeper_ctl c;
	struct pollfd pfd = { ctl, POLLIN, 0 };
	struct msghdr mh;
	struct iovec iov;
	struct cmsghdr *h;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	int fds[4], n_fds = 0, i, r;
	ssize_t n;
	char buf[sizeof(c) + 1];

	*fd = -1;
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r == -1 && errno == EINTR);
	if (r <= 0)
		return -1;
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	do
		n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n == -1)
		return errno == EAGAIN ? -1 : 0;
	for (h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h)) {
		size_t k, m;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		m = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < m; k++) {
			int f;

			memcpy(&f, CMSG_DATA(h) + k * sizeof(int), sizeof(int));
			if (n_fds < 4)
				fds[n_fds++] = f;
			else
				close(f);
		}
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    keeper_ctl_parse(buf, (size_t)n, n_fds, &c) == -1) {
		for (i = 0; i < n_fds; i++)
			close(fds[i]);
		return -1;
	}
	if (c.what == KEEPER_CTL_UP)
		*fd = fds[0];
	*status = c.status;
	*pid = c.pid;
	return (int)c.what;
}

/* Every descriptor but 0, 1, 2 and keep. */
static void
close_others(int keep)
{
	if (keep > 3)
		(void)syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u);
	(void)syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u);
}

/* A child that dies with its parent, ignoring what the terminal sends. */
static int
child_setup(pid_t parent, const char *name)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1 ||
	    getppid() != parent)
		return -1;
	(void)prctl(PR_SET_NAME, name, 0, 0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void
keeper_child(const struct config *cfg, const struct policy *pol, int fd,
    pid_t parent)
{
	struct keeper *k;
	const char *err = NULL;
	int rc;

	if (child_setup(parent, "sg-keeper") == -1)
		_exit(1);
	close_others(fd);
	if ((k = keeper_open(cfg, pol, &err)) == NULL) {
		keeper_send_error(fd, err);
		_exit(1);
	}
	if (privdrop_confine_keeper(&err) == -1) {
		keeper_send_error(fd, err);
		_exit(1);
	}
	rc = keeper_serve(k, fd);
	keeper_free(k);
	_exit(rc == 0 ? 0 : 1);
}

static long
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Wait up to ms for the control socket to close; 1 when it did. */
static int
ctl_closed(int ctl, int ms)
{
	struct pollfd pfd = { ctl, POLLIN, 0 };
	char b;

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	return recv(ctl, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0 ||
	    (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

static void
describe(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

static void
monitor_main(const struct config *cfg, const struct policy *pol, int ctl,
    pid_t parent)
{
	long backoff = KP_BACKOFF_MS, started;
	int sv[2], status, pidfd, alive;
	pid_t pid, self;
	char why[64];

	if (child_setup(parent, "sg-monitor") == -1)
		_exit(1);
	close_others(ctl);
	self = getpid();
	for (;;) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
		    sv) == -1) {
			log_warn("sg-monitor: socketpair");
			_exit(1);
		}
		if ((pid = fork()) == -1) {
			log_warn("sg-monitor: fork");
			_exit(1);
		}
		if (pid == 0) {
			close(sv[0]);
			close(ctl);
			keeper_child(cfg, pol, sv[1], self);
		}
		close(sv[1]);
		started = now_ms();
		if (ctl_send(ctl, KEEPER_CTL_UP, sv[0], 0, pid) == -1) {
			close(sv[0]);
			kill(pid, SIGKILL);
			_exit(0);	/* the network process is gone */
		}
		close(sv[0]);
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		for (alive = 1; alive;) {
			struct pollfd pfd[2] = { { ctl, POLLIN, 0 },
			    { pidfd, POLLIN, 0 } };

			if (poll(pfd, pidfd != -1 ? 2 : 1, pidfd != -1 ? -1 :
			    200) == -1 && errno != EINTR)
				_exit(1);
			if (ctl_closed(ctl, 0)) {
				/* The gateway is stopping: its keeper goes too. */
				if (waitpid(pid, &status, WNOHANG) == 0) {
					kill(pid, SIGKILL);
					waitpid(pid, &status, 0);
				}
				_exit(0);
			}
			if (waitpid(pid, &status, WNOHANG) == pid)
				alive = 0;
		}
		if (pidfd != -1)
			close(pidfd);
		describe(status, why, sizeof(why));
		(void)ctl_send(ctl, KEEPER_CTL_DOWN, -1, status, pid);
		if (now_ms() - started > KP_YOUNG_MS)
			backoff = KP_BACKOFF_MS;
		log_warnx("sg-monitor: the key keeper (pid %d) exited (%s); "
		    "starting a new one in %ld ms", (int)pid, why, backoff);
		if (ctl_closed(ctl, (int)backoff))
			_exit(0);
		backoff = backoff * 2 > KP_BACKOFF_MAX_MS ? KP_BACKOFF_MAX_MS :
		    backoff * 2;
	}
}

int
keeper_proc_start(const struct config *cfg, const struct policy *pol,
    int *ctl, pid_t *monitor, const char **errstr)
{
	int sv[2];
	pid_t pid, self = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		*errstr = "cannot create the key keeper's control socket";
		return -1;
	}
	fflush(NULL);
	if ((pid = fork()) == -1) {
		close(sv[0]);
		close(sv[1]);
		*errstr = "cannot start the key keeper: fork failed";
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		monitor_main(cfg, pol, sv[1], self);
		_exit(0);
	}
	close(sv[1]);
	*ctl = sv[0];
	*monitor = pid;
	return 0;
}

/* ------------------------------------------------- in the network process */

struct kp_watch {
	struct proxy	*p;
	struct event	*ev;
	int		 ctl;
};

static void
watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kp_watch *w = arg;
	char why[64];
	int kfd, status = 0, r;
	pid_t pid = 0;

	r = keeper_ctl_recv(w->ctl, 0, &kfd, &status, &pid);
	if (r == -1)
		return;		/* spurious, or nonsense: ignored */
	if (r == 0) {
		log_warnx("the key keeper's monitor exited: a keeper lost from "
		    "now on cannot be restarted (restart sandgate serve)");
		event_del(w->ev);
		return;
	}
	if (r == KEEPER_CTL_DOWN) {
		describe(status, why, sizeof(why));
		proxy_keeper_lost(w->p, why);
		return;
	}
	proxy_keeper_adopt(w->p, kfd, pid);
}

static void
watch_free(void *arg)
{
	struct kp_watch *w = arg;

	event_free(w->ev);
	free(w);
}

int
keeper_proc_watch(struct proxy *p, int ctl)
{
	struct kp_watch *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->p = p;
	w->ctl = ctl;
	if ((w->ev = event_new(proxy_main_base(p), ctl, EV_READ | EV_PERSIST,
	    watch_cb, w)) == NULL || event_add(w->ev, NULL) == -1) {
		if (w->ev != NULL)
			event_free(w->ev);
		free(w);
		return -1;
	}
	proxy_on_free(p, watch_free, w);
	return 0;
}
