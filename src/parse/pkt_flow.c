/*
 * IPv4 header -> source, destination, protocol and ports, for
 * the audit row of a dropped sandbox packet. The bytes are the sandbox's:
 * every length is checked against what was copied.
 */
#include <string.h>
#include <netinet/in.h>

#include "parse/pkt_flow.h"

int
pkt_flow_parse(const unsigned char *b, size_t len, struct pkt_flow *out)
{
	size_t ihl, total;

	memset(out, 0, sizeof(*out));
	out->port = out->sport = -1;
	if (len < 20 || (b[0] >> 4) != 4)
		return -1;
	ihl = (size_t)(b[0] & 0x0f) * 4;
	total = ((size_t)b[2] << 8) | b[3];
	if (ihl < 20 || ihl > len || total < ihl)
		return -1;
	memcpy(out->src, b + 12, 4);
	memcpy(out->dst, b + 16, 4);
	out->proto = b[9];
	switch (b[9]) {
	case IPPROTO_UDP:
		out->proto_name = "UDP";
		break;
	case IPPROTO_TCP:
		out->proto_name = "TCP";
		break;
	case IPPROTO_ICMP:
		out->proto_name = "ICMP";
		return 0;
	default:
		out->proto_name = "IP";
		return 0;
	}
	/* a fragment past the first carries no port */
	if ((((b[6] & 0x1f) << 8) | b[7]) == 0 && len >= ihl + 4 &&
	    total >= ihl + 4) {
		out->sport = (b[ihl] << 8) | b[ihl + 1];
		out->port = (b[ihl + 2] << 8) | b[ihl + 3];
	}
	return 0;
}
