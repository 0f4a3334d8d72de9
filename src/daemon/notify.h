/*
 * Telling the service manager what the gateway is doing (sd_notify(3),
 * systemd's Type=notify): ready once every listener is bound and the key
 * keeper answered, reloading around a policy reload, stopping on SIGTERM.
 * Without $NOTIFY_SOCKET (not started by systemd) every call does nothing.
 * Callable from the main thread after the privilege drop: the seccomp
 * allow-list of the network process has the AF_UNIX datagram it takes.
 */
#ifndef SG_DAEMON_NOTIFY_H
#define SG_DAEMON_NOTIFY_H

/* READY=1, with status (one line, may be NULL) as STATUS=. */
void	daemon_notify_ready(const char *status);
/* RELOADING=1 and MONOTONIC_USEC=; follow it with daemon_notify_ready. */
void	daemon_notify_reloading(void);
/* STOPPING=1. */
void	daemon_notify_stopping(void);

#endif
