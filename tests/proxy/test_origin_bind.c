/*
 * Unit test of the one check that an origin connection may carry a
 * request (issue 12, point 1): it serves only the decision it was opened
 * for -- sandbox, host, port, checked address, TLS, credentials, ingress --
 * and nothing that differs in any one of them.
 */
#include <string.h>

#include "check.h"
#include "exchange/exchange.h"

static struct origin_bind
bind_of(const char *sandbox, const char *host, uint16_t port, const char *ip,
    int tls, int creds)
{
	struct origin_bind b;

	memset(&b, 0, sizeof(b));
	strcpy(b.sandbox, sandbox);
	strcpy(b.host, host);
	b.port = port;
	b.tls = tls;
	b.creds = creds;
	CHECK_INT(netaddr_parse(ip, strlen(ip), &b.addr), 0);
	return b;
}

int
main(void)
{
	struct origin_bind have, want;
	struct netaddr addrs[3];

	CHECK_INT(netaddr_parse("198.18.0.1", strlen("198.18.0.1"), &addrs[0]), 0);
	CHECK_INT(netaddr_parse("198.18.0.2", strlen("198.18.0.2"), &addrs[1]), 0);
	CHECK_INT(netaddr_parse("2001:db8::1", strlen("2001:db8::1"), &addrs[2]), 0);
	have = bind_of("box", "api.example", 443, "198.18.0.2", 1, 1);

	want = have;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 1);
	/* the address must be one this decision checked */
	CHECK_INT(origin_bind_match(&have, &want, addrs, 1), 0);
	CHECK_INT(origin_bind_match(&have, &want, &addrs[2], 1), 0);
	CHECK_INT(origin_bind_match(&have, &want, addrs, 0), 0);
	/* each field alone makes it another decision */
	want = have;
	strcpy(want.sandbox, "other");
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	strcpy(want.host, "evil.example");
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	strcpy(want.host, "api.example.evil");
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	want.port = 8443;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	want.tls = 0;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	want.creds = 0;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	want.is_ip = 1;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	want = have;
	want.ingress = 1;
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	/* a plain connection never carries what wants TLS, and back */
	have = bind_of("box", "a.example", 80, "198.18.0.1", 0, 0);
	want = bind_of("box", "a.example", 80, "198.18.0.1", 1, 1);
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	CHECK_INT(origin_bind_match(&want, &have, addrs, 3), 0);
	/* nothing recorded: never reusable */
	memset(&have, 0, sizeof(have));
	memset(&want, 0, sizeof(want));
	CHECK_INT(origin_bind_match(&have, &want, addrs, 3), 0);
	return check_summary();
}
