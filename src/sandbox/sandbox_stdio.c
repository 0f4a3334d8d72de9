/*
 * The sandboxed command's stdout and stderr under runsc. gVisor writes a
 * regular file it is handed at an offset of its own that starts at 0
 * (pwrite), so `{ echo A; sandgate sandbox run -- echo B; } > f` lost A.
 * Such a stream reaches runsc as a pipe instead, and a thread of the launcher
 * copies it on with write(2), at the file's own shared offset. Owns those
 * pipes and that thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "sandbox/sandbox.h"

#define RELAY_BUF	65536
#define RELAY_TICK_MS	100

struct sandbox_relay {
	pthread_t	 thread;
	int		 started;
	int		 src[2];	/* read ends: runsc's fd 1, 2 (-1: none) */
	int		 dst[2];	/* where they go: our fd 1, 2 */
	int		 child[2];	/* the runtime's fd 1, 2 (-1: ours) */
	atomic_llong	 stop_ms;	/* CLOCK_MONOTONIC; 0: run until EOF */
	int		 write_failed[2];
	char		 buf[RELAY_BUF];
};

static long long
relay_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
is_regular(int fd, struct stat *sb)
{
	return fstat(fd, sb) == 0 && S_ISREG(sb->st_mode);
}

/* A full write, or the stream is given up on (the pipe is still drained). */
static void
relay_write(struct sandbox_relay *r, int i, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0 && !r->write_failed[i]) {
		if ((w = write(r->dst[i], p, n)) == -1) {
			if (errno == EINTR)
				continue;
			r->write_failed[i] = 1;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Copy until every pipe reached EOF, or stop_ms passed. */
static void *
relay_main(void *arg)
{
	struct sandbox_relay *r = arg;
	struct pollfd pfd[2];
	int idx[2], n, i, k;
	long long stop;
	ssize_t got;

	for (;;) {
		for (n = 0, i = 0; i < 2; i++)
			if (r->src[i] != -1) {
				pfd[n].fd = r->src[i];
				pfd[n].events = POLLIN;
				pfd[n].revents = 0;
				idx[n++] = i;
			}
		stop = atomic_load(&r->stop_ms);
		if (n == 0 || (stop != 0 && relay_now_ms() >= stop))
			break;
		if (poll(pfd, (nfds_t)n, RELAY_TICK_MS) <= 0)
			continue;
		for (k = 0; k < n; k++) {
			if (pfd[k].revents == 0)
				continue;
			i = idx[k];
			got = read(r->src[i], r->buf, sizeof(r->buf));
			if (got > 0)
				relay_write(r, i, r->buf, (size_t)got);
			else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
				close(r->src[i]);
				r->src[i] = -1;
			}
		}
	}
	return NULL;
}

/* The write ends, in the parent once the runtime has its copies. */
static void
relay_close_children(struct sandbox_relay *r)
{
	int i;

	if (r->child[1] == r->child[0])
		r->child[1] = -1;
	for (i = 0; i < 2; i++) {
		if (r->child[i] != -1)
			close(r->child[i]);
		r->child[i] = -1;
	}
}

static void
relay_close(struct sandbox_relay *r)
{
	int i;

	relay_close_children(r);
	for (i = 0; i < 2; i++) {
		if (r->src[i] != -1)
			close(r->src[i]);
		r->src[i] = -1;
	}
}

static int
relay_pipes(struct sandbox_relay *r, const int reg[2], const struct stat *out,
    const struct stat *err)
{
	int p[2], i;

	for (i = 0; i < 2; i++) {
		if (!reg[i])
			continue;
		/* `> f 2>&1`: one pipe, so that the two streams keep their order */
		if (i == 1 && reg[0] && out->st_dev == err->st_dev &&
		    out->st_ino == err->st_ino) {
			r->child[1] = r->child[0];
			break;
		}
		if (pipe2(p, O_CLOEXEC) == -1)
			return -1;
		r->src[i] = p[0];
		r->child[i] = p[1];
	}
	return 0;
}

int
sandbox_relay_new(enum sandbox_runtime rt, struct sandbox_relay **rp)
{
	struct sandbox_relay *r;
	struct stat out, err;
	sigset_t all, old;
	int reg[2], i, e;

	*rp = NULL;
	if (rt != SANDBOX_RUNSC)
		return 0;
	reg[0] = is_regular(1, &out);
	reg[1] = is_regular(2, &err);
	if (!reg[0] && !reg[1])
		return 0;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return -1;
	for (i = 0; i < 2; i++) {
		r->src[i] = r->child[i] = -1;
		r->dst[i] = i + 1;
	}
	atomic_init(&r->stop_ms, 0);
	if (relay_pipes(r, reg, &out, &err) == -1)
		goto fail;
	/* the launcher's signals stay with its main thread, which waits on them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&r->thread, NULL, relay_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		errno = e;
		goto fail;
	}
	r->started = 1;
	*rp = r;
	return 0;
fail:
	e = errno;
	relay_close(r);
	free(r);
	errno = e;
	return -1;
}

void
sandbox_relay_child(const struct sandbox_relay *r)
{
	if (r == NULL)
		return;
	if (r->child[0] != -1)
		(void)dup2(r->child[0], 1);
	if (r->child[1] != -1)
		(void)dup2(r->child[1], 2);
}

void
sandbox_relay_parent(struct sandbox_relay *r)
{
	/* the runtime has its own: EOF comes when it and its command close them */
	if (r != NULL)
		relay_close_children(r);
}

void
sandbox_relay_end(struct sandbox_relay *r, int grace_s)
{
	if (r == NULL)
		return;
	/* a runtime that never got its ends (fork failed) must not hold us */
	relay_close_children(r);
	if (r->started) {
		atomic_store(&r->stop_ms, relay_now_ms() + (long long)grace_s *
		    1000);
		pthread_join(r->thread, NULL);
	}
	relay_close(r);
	free(r);
}
