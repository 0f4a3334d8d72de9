/*
 * What the DNS unit tests share (helper_dns.c, linked into each of them): a
 * real dnsmasq upstream on loopback serving only the test's records, free
 * loopback ports, and address literals as struct netaddr.
 */
#ifndef SG_TEST_HELPER_DNS_H
#define SG_TEST_HELPER_DNS_H

#include "core/netaddr.h"

#define DNSTEST_DNSMASQ		"/usr/sbin/dnsmasq"

/* What dnsmasq serves. */
struct dnstest_zone {
	const char *const *records;	/* dnsmasq options, NULL-terminated */
	/*
	 * A name with big_n A records big_net1 .. big_net<big_n> ("198.18.3."
	 * gives 198.18.3.1 ...): more than 512 bytes of UDP answer. 0: none.
	 */
	const char	*big_name;
	const char	*big_net;
	int		 big_n;
	int		 log_queries;	/* for dnstest_dnsmasq_count */
};

/* A port free on 127.0.0.1 for UDP, and for TCP too when want_tcp; or -1. */
int		dnstest_free_port(int want_tcp);

/*
 * Start dnsmasq on a free port of 127.0.0.1 (UDP and TCP) as the current
 * user, answering only from the zone. It dies with the test and is stopped
 * at exit at the latest. The port, or -1.
 */
int		dnstest_dnsmasq_start(const struct dnstest_zone *);
/* Stop it and remove its query log; harmless when it is not running. */
void		dnstest_dnsmasq_stop(void);
/* How many lines of the query log contain needle; -1 without a log. */
int		dnstest_dnsmasq_count(const char *needle);

/* An IPv4 or IPv6 literal as inet_pton reads it; aborts on anything else. */
struct netaddr	dnstest_addr(const char *);

#endif
