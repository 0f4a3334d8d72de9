/*
 * What a packet the sandbox rules dropped was (pure parser over the bytes
 * NFLOG copies: IPv4 header and the start of the L4 header).
 */
#ifndef SG_PKT_FLOW_H
#define SG_PKT_FLOW_H

#include <stddef.h>
#include <stdint.h>

struct pkt_flow {
	uint8_t		 src[4];
	uint8_t		 dst[4];
	uint8_t		 proto;		/* IPPROTO_* */
	const char	*proto_name;	/* "UDP", "TCP", "ICMP", "IP" */
	int		 port;		/* destination port (UDP, TCP); -1 when none */
	int		 sport;		/* source port, the same way */
};

/* 0 and *out filled for an IPv4 packet; -1 for anything else. */
int	pkt_flow_parse(const unsigned char *b, size_t len, struct pkt_flow *out);

#endif
