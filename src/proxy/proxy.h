/*
 * The gateway runtime: worker threads with one event loop each, the
 * listeners they share through SO_REUSEPORT, and the current policy that a
 * reload swaps. Owns every session; see docs/architecture.md.
 */
#ifndef SG_PROXY_H
#define SG_PROXY_H

#include "core/config.h"
#include "core/policy.h"

struct proxy;
struct event_base;
struct keeper_client;

/*
 * Takes ownership of cfg, of the reference to pol and of kc, the client of
 * the key keeper (vault/keeper.h) through which every key is used. Opens
 * everything that needs the privileges the process started with: the audit
 * log, every enabled listener (so that a port in use fails here, at
 * start-up), the admin socket, metrics and NFLOG; asks the keeper for the
 * secrets the policy binds. Starts no thread but the audit writer. NULL on
 * error, logged.
 */
struct proxy	*proxy_new(struct config *cfg, struct policy *pol,
		    struct keeper_client *kc);
/* Runs the workers until SIGTERM or SIGINT; SIGHUP reloads. 0 on a clean stop. */
int		 proxy_run(struct proxy *);
void		 proxy_free(struct proxy *);

/*
 * Re-read the config file and every policy file; on success the new policy
 * applies to new requests. On failure the errors are logged as
 * FILE:LINE:COL lines and the old policy stays. 0 or -1.
 */
int		 proxy_reload(struct proxy *);

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

#endif
