/*
 * The DNS listener (docs/protocols.md): answers A/AAAA for names a sandbox's
 * policy allows, NXDOMAIN with an Extended DNS Error for the rest, and
 * remembers which addresses it handed which sandbox (the address memory the
 * transparent listener reads).
 */
#ifndef SG_DNS_H
#define SG_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "core/netaddr.h"

struct event_base;
struct resolver;
struct audit;
struct policy;
struct geoip;
struct fairshare;

/*
 * Address memory: (sandbox, address) -> name, expiring with the answer's
 * TTL, bounded (oldest evicted). Shared by every worker: thread-safe.
 */
struct addrmem;
struct addrmem	*addrmem_new(size_t max_entries);
void		 addrmem_free(struct addrmem *);
void		 addrmem_add(struct addrmem *, const char *sandbox, const char *name,
		    const struct netaddr *addrs, size_t n, uint32_t ttl);
/* 1 when this sandbox was told name has address a, and that has not expired. */
int		 addrmem_has(struct addrmem *, const char *sandbox, const char *name,
		    const struct netaddr *a);
/* The most recent unexpired name handed to sandbox for a: 0 and name filled, or -1. */
int		 addrmem_lookup(struct addrmem *, const char *sandbox,
		    const struct netaddr *a, char *name, size_t namelen);

struct dns_server_env {
	struct event_base	*base;
	struct resolver		*resolver;	/* the worker's own */
	struct addrmem		*mem;
	struct audit		*audit;
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
};

/*
 * One DNS server per worker over already-bound sockets (SO_REUSEPORT):
 * udp_fd a UDP socket, tcp_fd a listening TCP socket (either may be -1).
 * Takes ownership of the descriptors. NULL on error.
 */
struct dns_server;
struct dns_server *dns_server_new(const struct dns_server_env *, int udp_fd,
		    int tcp_fd);
void		 dns_server_free(struct dns_server *);

#endif
