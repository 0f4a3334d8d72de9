/*
 * IP addresses and prefixes as values: parsing every literal form a client
 * may write, classification of internal (not globally reachable) addresses,
 * and a prefix set with O(address bits) lookup.
 */
#ifndef SG_NETADDR_H
#define SG_NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * An address. IPv4-mapped IPv6 (::ffff:a.b.c.d) is always stored as the
 * IPv4 address: every constructor below normalises it.
 */
struct netaddr {
	int	family;		/* AF_INET or AF_INET6 */
	uint8_t	a[16];		/* network order; IPv4 in a[0..3] */
};

struct cidr {
	struct netaddr	addr;	/* host bits cleared */
	uint8_t		bits;	/* 0..32 or 0..128 */
};

#define NETADDR_STRLEN	46	/* INET6_ADDRSTRLEN */

/*
 * Parse a host written as an IP in any form a resolver or browser accepts:
 * dotted quad, one to four parts in decimal, octal (leading 0) or hex (0x),
 * e.g. 2130706433, 0177.0.0.1, 0x7f.1; IPv6 with or without brackets,
 * with an embedded IPv4 tail; IPv4-mapped IPv6 becomes IPv4. A trailing dot
 * is accepted for IPv4 forms. Returns 0 when s[0..len) is an IP literal,
 * -1 when it is not (then it is a name, or invalid).
 */
int	netaddr_parse(const char *s, size_t len, struct netaddr *out);
/* Canonical text: dotted quad, or RFC 5952 IPv6 (no brackets). */
const char *netaddr_ntop(const struct netaddr *, char *buf, size_t len);
int	netaddr_cmp(const struct netaddr *, const struct netaddr *);
void	netaddr_from_sockaddr(const struct sockaddr *, struct netaddr *,
	    uint16_t *port);
socklen_t netaddr_to_sockaddr(const struct netaddr *, uint16_t port,
	    struct sockaddr_storage *);
/*
 * 1 when the address is not globally reachable per IANA's IPv4 and IPv6
 * special-purpose registries (loopback, RFC 1918, link-local, CGNAT,
 * 198.18/15, documentation, 0/8, 240/4, broadcast, multicast, ULA, ...),
 * including the NAT64 (64:ff9b::/96), 6to4 (2002::/16) and IPv4-compatible
 * forms of internal IPv4 addresses. 0 otherwise.
 */
int	netaddr_is_internal(const struct netaddr *);

/* "a.b.c.d/n", "x::y/n" or a bare address (full-length prefix). */
int	cidr_parse(const char *s, struct cidr *out, const char **errstr);
int	cidr_contains(const struct cidr *, const struct netaddr *);
const char *cidr_ntop(const struct cidr *, char *buf, size_t len);
/*
 * For a prefix refused for its host bits ("198.18.1.7/16"): the network
 * it most likely meant ("198.18.0.0/16") into buf; NULL when s is no
 * prefix at all.
 */
const char *cidr_network_of(const char *s, char *buf, size_t len);

/*
 * A set of prefixes, each tagged with an int value (a rule index). Lookup
 * visits the values of every prefix containing the address, shortest
 * prefix first; cost is bounded by the address length, not the set size.
 */
struct cidr_set;
struct cidr_set *cidr_set_new(void);
void	cidr_set_free(struct cidr_set *);
int	cidr_set_add(struct cidr_set *, const struct cidr *, int value);
/* Calls cb for each match; stops early and returns 1 when cb returns 1. */
int	cidr_set_lookup(const struct cidr_set *, const struct netaddr *,
	    int (*cb)(int value, void *arg), void *arg);

#endif
