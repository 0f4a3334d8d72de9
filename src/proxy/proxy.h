/*
 * The gateway runtime: worker threads with one event loop each, the
 * listeners they share through SO_REUSEPORT, and the current policy that a
 * reload swaps. Owns every connection and exchange; see docs/architecture.md.
 */
#ifndef SG_PROXY_H
#define SG_PROXY_H

#include "core/config.h"
#include "core/diag.h"
#include "core/policy.h"

struct proxy;
struct event_base;
struct keeper_client;

/*
 * What the daemon opened for the gateway (src/daemon/daemon.c): the audit
 * log, the interception CA as the network process has it, the client of
 * the key keeper through which every key is used, the GeoIP databases
 * (NULL without). proxy_new takes them, also when it fails.
 */
struct audit;
struct audit_ship;
struct ca;
struct geoip;
struct proxy_parts {
	struct audit		*audit;
	struct audit_ship	*ship;		/* NULL without audit.ship */
	struct ca		*ca;
	struct keeper_client	*kc;
	struct geoip		*geoip;
};

/*
 * Takes ownership of cfg, of the reference to pol and of the parts. Binds
 * every enabled listener once per worker (so that a port in use fails
 * here, at start-up) and the metrics port, asks the keeper for the secrets
 * the policy binds, and sets up the workers; starts no thread. NULL on
 * error, logged.
 */
struct proxy	*proxy_new(struct config *cfg, struct policy *pol,
		    struct proxy_parts *parts);
/* The config the gateway runs on (proxy_new took it). */
const struct config *proxy_config(struct proxy *);
/* What proxy_new did not take because it was not called: close them all. */
void		 proxy_parts_free(struct proxy_parts *);
/* The services on the main thread, started by the daemon after proxy_new. */
int		 proxy_admin_start(struct proxy *);
/* Once a second on the main thread: the totals behind status's rates. */
void		 proxy_admin_tick(struct proxy *);
int		 proxy_metrics_start(struct proxy *);
/*
 * policies_watch: inotify on the policy paths, a reload when they change.
 * 0 (also when the key is off), -1 logged.
 */
int		 proxy_watch_start(struct proxy *);
/* Optional (needs CAP_NET_ADMIN): -1 is logged and not fatal. */
int		 proxy_nflog_start(struct proxy *);
/*
 * What the gateway tells its service manager (sd_notify), handed down by
 * the daemon so that proxy/ calls nothing above it. Any member may be NULL.
 */
struct proxy_lifecycle {
	void	(*ready)(const char *status);	/* serving; after a reload too */
	void	(*reloading)(void);		/* a SIGHUP reload begins */
	void	(*stopping)(void);		/* SIGTERM or SIGINT */
};
/* Before proxy_run; lc must outlive the proxy (a static table). */
void		 proxy_set_lifecycle(struct proxy *, const struct proxy_lifecycle *lc);
/* Runs the workers until SIGTERM or SIGINT; SIGHUP reloads. 0 on a clean stop. */
int		 proxy_run(struct proxy *);
void		 proxy_free(struct proxy *);

#define PROXY_RELOAD_MAX_KEYS	64

/* What a successful reload did not apply: the config keys that changed and
 * only a restart applies (config_restart_keys), full dotted names. */
struct proxy_reload_info {
	const char	*restart[PROXY_RELOAD_MAX_KEYS];
	size_t		 n_restart;
};

/*
 * Re-read the config file and every policy file; on success the new policy
 * applies to new requests, and each changed key that only a restart applies
 * is logged ("needs a restart: listen.metrics") and, when info is not NULL,
 * put there. On failure the errors are logged as FILE:LINE:COL lines and the
 * old policy stays. 0 or -1. errs, when not NULL (an initialised diag the
 * caller frees), gets every error too. source ("signal", "admin", "watch")
 * is kept with the outcome for the admin API's status.
 */
int		 proxy_reload(struct proxy *, const char *source,
		    struct diag *errs, struct proxy_reload_info *info);

/* The main thread's event loop (signals, admin API, the keeper's monitor). */
struct event_base *proxy_main_base(struct proxy *);
/* fn(arg) runs in proxy_free, before the main event loop is freed. */
void		 proxy_on_free(struct proxy *, void (*fn)(void *), void *arg);
/*
 * The key keeper (main thread): lost (why: e.g. "killed by signal 9"), and
 * a new one's socket to adopt -- hello, the policy, the secrets again,
 * then interceptions and swaps resume.
 */
void		 proxy_keeper_lost(struct proxy *, const char *why);
void		 proxy_keeper_adopt(struct proxy *, int fd, int pid);
void		 proxy_keeper_pid(struct proxy *, int pid);

/*
 * The DNS listener (proxy_dns.c, docs/protocols.md): answers A/AAAA for
 * names a sandbox's policy allows, NXDOMAIN with an Extended DNS Error for
 * the rest; each query is an exchange with its one row.
 */
struct event_base;
struct resolver;
struct audit;
struct geoip;
struct fairshare;
struct addrmem;
struct stats;

struct dns_server_env {
	struct proxy		*proxy;		/* its queries' exchanges' (vault values) */
	struct event_base	*base;
	struct resolver		*resolver;	/* the worker's own */
	struct addrmem		*mem;
	struct audit		*audit;
	struct stats		*stats;		/* what /metrics counts; NULL: nothing */
	/* The current policy, with a reference the caller drops (policy_unref). */
	struct policy		*(*policy_get)(void *arg);
	void			*policy_arg;
	uint32_t		 max_ttl;	/* answers' TTLs are capped to this (s) */
	/*
	 * Optional: 1 when name carries a credential placeholder (cred set to
	 * the credential's name); such a query is misuse and gets NXDOMAIN.
	 */
	int			(*name_check)(void *arg, const char *name,
				    char *cred, size_t credlen);
	void			*name_check_arg;
	/* Optional: countries / asns rules apply to the answer's addresses too. */
	struct geoip		*geoip;
	/* Optional: limits.per_sandbox.dns_queries_per_second over it: REFUSED. */
	struct fairshare	*fair;
	uint32_t		 idle_timeout_ms;	/* TCP connections */
	/*
	 * Optional, mode: ask (proxy_approval.c): a query no rule allows is
	 * asked -- ask returns an enum approval_state (core/approval.h) and
	 * the question's id when held; collect looks at it again (its answer,
	 * once, gives the waiter back); leave gives it back unanswered.
	 */
	int			(*ask)(void *arg, const char *sandbox,
				    const char *host, uint64_t *id);
	int			(*ask_collect)(void *arg, uint64_t id);
	void			(*ask_leave)(void *arg, uint64_t id);
	void			*ask_arg;
};

/*
 * One DNS server per worker over already-bound sockets (SO_REUSEPORT):
 * udp_fd a UDP socket, tcp_fd a listening TCP socket (either may be -1).
 * Takes ownership of the descriptors. NULL on error.
 */
/* approval.notify's socket (daemon/approval_notify.c), before the workers start; -1: none. */
void		 approval_set_notify_fd(int fd);
struct dns_server;
/* Held queries (mode: ask) whose question ended go on: an answer came, or a tick. */
void		 dns_server_held_wake(struct dns_server *);
struct dns_server *dns_server_new(const struct dns_server_env *, int udp_fd,
		    int tcp_fd);
void		 dns_server_free(struct dns_server *);

#endif
