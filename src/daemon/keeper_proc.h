/*
 * The key keeper's processes (docs/architecture.md "Processes"). Before
 * the network process drops its privileges it forks a monitor, which stays
 * root and does one thing: start the keeper (src/vault/keeper.c) in a
 * child of its own, hand the network process that keeper's socket over
 * the control socket, and when the keeper dies say so at once and start a
 * new one (after 1 s, doubling to 30 s while it keeps dying young).
 *
 *   sandgate serve (network process: listeners, workers, audit writer)
 *    `- sg-monitor (root: restarts the keeper)
 *        `- sg-keeper (root, no capabilities, no_new_privs, seccomp:
 *                      ca.key, vault.key, vault.db, audit.key)
 *
 * Both die with their parent (PR_SET_PDEATHSIG) and ignore the terminal's
 * signals: they end when the network process closes its sockets.
 */
#ifndef SG_KEEPER_PROC_H
#define SG_KEEPER_PROC_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

struct config;
struct policy;
struct proxy;

/* What the monitor says over the control socket. */
enum keeper_ctl_what {
	KEEPER_CTL_UP = 1,	/* a new keeper: its socket is attached */
	KEEPER_CTL_DOWN,	/* the keeper exited: status is its wait status */
};

struct keeper_ctl {
	uint32_t	magic;
	uint32_t	what;
	int32_t		status;
	int32_t		pid;
};
#define KEEPER_CTL_MAGIC	0x53474331u	/* "SGC1" */

/*
 * Check a control message: exactly sizeof(struct keeper_ctl) bytes, the
 * magic, a known what, and one descriptor for UP, none for DOWN. Pure;
 * fuzzed with the keeper's messages. 0 or -1.
 */
int	keeper_ctl_parse(const void *buf, size_t n, int n_fds,
	    struct keeper_ctl *out);

/*
 * Fork the monitor (which forks the first keeper). *ctl is the control
 * socket, *monitor the monitor's pid. -1 with *errstr.
 */
int	keeper_proc_start(const struct config *, const struct policy *,
	    int *ctl, pid_t *monitor, const char **errstr);
/*
 * Read one control message within timeout_ms (-1: no limit). Returns the
 * enum keeper_ctl_what with *fd (UP) or *status (DOWN), 0 when the monitor
 * is gone, -1 on a malformed message or a timeout.
 */
int	keeper_ctl_recv(int ctl, int timeout_ms, int *fd, int *status,
	    pid_t *pid);
/*
 * From proxy_new on: watch the control socket on the gateway's main event
 * loop, adopting each new keeper and noting each lost one. The caller
 * closes ctl after proxy_free (the last checkpoint is signed in it): that
 * close is what ends the monitor and the keeper.
 */
int	keeper_proc_watch(struct proxy *, int ctl);

#endif
