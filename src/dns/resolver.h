/*
 * Asynchronous A/AAAA resolution on c-ares, driven by one libevent loop,
 * with a TTL cache. One resolver per event loop (per worker thread): nothing
 * in it is shared between threads.
 */
#ifndef SG_RESOLVER_H
#define SG_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/netaddr.h"

struct event_base;
struct resolver;
struct resolver_query;

#define RESOLVER_MAX_ADDRS	32

/* Result codes handed to the callback. */
#define RESOLVER_OK		0
#define RESOLVER_ENOTFOUND	1	/* NXDOMAIN or no A/AAAA data */
#define RESOLVER_ETIMEOUT	2
#define RESOLVER_EFAIL		3	/* SERVFAIL, refused, bad answer, no servers */

/*
 * Called exactly once per query unless it was cancelled first, always from
 * the event loop (never from inside resolver_lookup()). addrs holds up to
 * RESOLVER_MAX_ADDRS addresses, IPv4 first; ttl is the smallest TTL.
 */
typedef void (*resolver_cb)(int result, const struct netaddr *addrs, size_t n,
    uint32_t ttl, void *arg);

/*
 * What resolver_lookup_answer() hands back: the same as resolver_cb gets,
 * plus the CNAME chains the A (chain[0]) and AAAA (chain[1]) answers went
 * through, NULL where there was none. ttl is also bounded by the chain's
 * TTLs. Valid only during the callback.
 */
struct dns_chain;
struct resolver_answer {
	int			 result;
	const struct netaddr	*addrs;
	size_t			 n;
	uint32_t		 ttl;
	const struct dns_chain	*chain[2];
};
typedef void (*resolver_answer_cb)(const struct resolver_answer *, void *arg);

/* servers from cfg->resolvers, or /etc/resolv.conf when cfg->resolvers_system. */
struct resolver	*resolver_new(struct event_base *, const struct config *cfg);
void		 resolver_free(struct resolver *);	/* cancels everything pending */
/* name is already normalised (lower-case, no trailing dot). NULL on allocation failure. */
struct resolver_query *resolver_lookup(struct resolver *, const char *name,
	    resolver_cb cb, void *arg);
/* The same lookup, cache and coalescing, answered with the CNAME chains. */
struct resolver_query *resolver_lookup_answer(struct resolver *,
	    const char *name, resolver_answer_cb cb, void *arg);
/* After this the callback is never called; q is freed. */
void		 resolver_cancel(struct resolver_query *q);
/* For metrics and tests. */
void		 resolver_stats(const struct resolver *, uint64_t *hits,
	    uint64_t *misses, size_t *entries);

/*
 * Any query type, answered with the upstream's whole response (for the DNS
 * listener to relay types other than A/AAAA that a policy allows). Not
 * cached. The callback gets RESOLVER_OK with the response (any rcode) or a
 * failure with abuf NULL; it is called once, from the event loop, unless
 * cancelled first.
 */
typedef void (*resolver_raw_cb)(int result, const unsigned char *abuf,
    size_t alen, void *arg);
struct resolver_raw;
struct resolver_raw *resolver_query_raw(struct resolver *, const char *name,
		    uint16_t qtype, resolver_raw_cb cb, void *arg);
void		 resolver_raw_cancel(struct resolver_raw *);

#endif
