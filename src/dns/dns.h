/*
 * What the DNS listener (proxy/proxy_dns.c, docs/protocols.md) remembers:
 * which addresses it handed which sandbox (the address memory the
 * transparent listener reads).
 */
#ifndef SG_DNS_H
#define SG_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "core/netaddr.h"

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

#endif
