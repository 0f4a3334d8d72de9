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

/*
 * Takes ownership of cfg and of the reference to pol. Opens everything that
 * needs the privileges the process started with: the audit log, the CA, the
 * vault, every enabled listener (so that a port in use fails here, at
 * start-up), the admin socket, metrics and NFLOG. Starts no thread but the
 * audit writer. NULL on error, logged.
 */
struct proxy	*proxy_new(struct config *cfg, struct policy *pol);
/* Runs the workers until SIGTERM or SIGINT; SIGHUP reloads. 0 on a clean stop. */
int		 proxy_run(struct proxy *);
void		 proxy_free(struct proxy *);

/*
 * Re-read the config file and every policy file; on success the new policy
 * applies to new requests. On failure the errors are logged as
 * FILE:LINE:COL lines and the old policy stays. 0 or -1.
 */
int		 proxy_reload(struct proxy *);

#endif
