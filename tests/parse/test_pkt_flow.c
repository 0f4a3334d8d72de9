/*
 * Unit tests of the dropped-packet parser (src/parse/pkt_flow.c): UDP, TCP,
 * ICMP and other protocols, IP options, fragments, truncation, non-IPv4.
 */
#include <string.h>

#include "check.h"
#include "parse/pkt_flow.h"

/* An IPv4 header 198.18.0.2 -> 198.19.7.2 with ihl words, then l4. */
static size_t
mk(unsigned char *b, int ihl, int proto, int frag, const unsigned char *l4,
    size_t l4len)
{
	size_t total = (size_t)ihl * 4 + l4len;

	memset(b, 0, 128);
	b[0] = (unsigned char)(0x40 | ihl);
	b[2] = (unsigned char)(total >> 8);
	b[3] = (unsigned char)total;
	b[6] = (unsigned char)(frag >> 8);
	b[7] = (unsigned char)frag;
	b[8] = 64;
	b[9] = (unsigned char)proto;
	b[12] = 198; b[13] = 18; b[14] = 0; b[15] = 2;
	b[16] = 198; b[17] = 19; b[18] = 7; b[19] = 2;
	memcpy(b + ihl * 4, l4, l4len);
	return total;
}

int
main(void)
{
	static const unsigned char udp[] = { 0x9c, 0x40, 0x14, 0xe9, 0, 8, 0, 0 };
	static const unsigned char tcp[] = { 0, 1, 0, 80, 0, 0, 0, 0 };
	static const unsigned char icmp[] = { 8, 0, 0, 0, 0, 1, 0, 1 };
	static const unsigned char dst[] = { 198, 19, 7, 2 };
	unsigned char b[128];
	struct pkt_flow f;
	size_t n;

	n = mk(b, 5, 17, 0, udp, sizeof(udp));
	CHECK(pkt_flow_parse(b, n, &f) == 0);
	CHECK_STR(f.proto_name, "UDP");
	CHECK_INT(f.port, 5353);
	CHECK_INT(f.sport, 40000);	/* a flow is its source port too */
	CHECK(memcmp(f.dst, dst, 4) == 0 && f.src[0] == 198 && f.src[3] == 2);

	n = mk(b, 5, 6, 0, tcp, sizeof(tcp));
	CHECK(pkt_flow_parse(b, n, &f) == 0);
	CHECK_STR(f.proto_name, "TCP");
	CHECK_INT(f.port, 80);

	n = mk(b, 5, 1, 0, icmp, sizeof(icmp));
	CHECK(pkt_flow_parse(b, n, &f) == 0);
	CHECK_STR(f.proto_name, "ICMP");
	CHECK_INT(f.port, -1);
	CHECK_INT(f.sport, -1);

	n = mk(b, 5, 47, 0, icmp, 4);
	CHECK(pkt_flow_parse(b, n, &f) == 0);
	CHECK_STR(f.proto_name, "IP");

	/* options: the port is after them */
	n = mk(b, 6, 17, 0, udp, sizeof(udp));
	CHECK(pkt_flow_parse(b, n, &f) == 0 && f.port == 5353);
	/* a later fragment has no port; the first one has */
	n = mk(b, 5, 17, 0x2000, udp, sizeof(udp));	/* MF set */
	CHECK(pkt_flow_parse(b, n, &f) == 0 && f.port == 5353);
	n = mk(b, 5, 17, 0x0010, udp, sizeof(udp));
	CHECK(pkt_flow_parse(b, n, &f) == 0 && f.port == -1);
	/* copied bytes end inside the UDP header: no port, still a row */
	n = mk(b, 5, 17, 0, udp, sizeof(udp));
	CHECK(pkt_flow_parse(b, 22, &f) == 0 && f.port == -1);

	CHECK(pkt_flow_parse(b, 19, &f) == -1);
	b[0] = 0x4f;		/* ihl 60 > what was copied */
	CHECK(pkt_flow_parse(b, n, &f) == -1);
	b[0] = 0x44;		/* ihl 16 < 20 */
	CHECK(pkt_flow_parse(b, n, &f) == -1);
	b[0] = 0x65;		/* IPv6 */
	CHECK(pkt_flow_parse(b, n, &f) == -1);
	n = mk(b, 5, 17, 0, udp, sizeof(udp));
	b[2] = 0; b[3] = 10;	/* total length shorter than the header */
	CHECK(pkt_flow_parse(b, n, &f) == -1);
	return check_summary();
}
