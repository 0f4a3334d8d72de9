/*
 * The daemon's start-up and life (docs/architecture.md "Processes" and
 * "Start-up"): the key keeper's processes, the audit log, the CA, the
 * gateway's workers and listeners, the admin API, metrics and NFLOG, the
 * privilege drop, and the order they come in.
 */
#ifndef SG_DAEMON_H
#define SG_DAEMON_H

#include <stddef.h>

struct config;
struct keeper_client;
struct policy;
struct proxy_parts;

/*
 * Run `sandgate serve` on a loaded config and policy (both taken) until
 * SIGTERM or SIGINT. 0 after a clean stop; 1 with one line in err (what
 * failed, naming the file) when it could not start or had to stop.
 */
int	daemon_run(struct config *cfg, struct policy *pol, char *err,
	    size_t errlen);
/*
 * Open what the gateway needs beside its sockets, through the keeper
 * client kc (taken): the audit log signed by the keeper, the CA whose
 * leaves the keeper signs, the GeoIP databases. -1 (logged) with nothing
 * left open but kc, which is closed too.
 */
int	daemon_parts_open(const struct config *cfg, struct keeper_client *kc,
	    struct proxy_parts *parts);

#endif
