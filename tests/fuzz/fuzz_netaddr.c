/*
 * libFuzzer target for the address and name parsers: netaddr_parse,
 * policy_name_normalize, cidr_parse and policy_target_init on one input,
 * with round-trip invariants that abort when the canonical forms disagree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/netaddr.h"
#include "core/policy_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_addr(const struct netaddr *a)
{
	struct netaddr b;
	char buf[NETADDR_STRLEN];

	/* IPv4-mapped IPv6 must never survive parsing. */
	if (a->family == AF_INET6 && memcmp(a->a,
	    "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
		abort();
	if (netaddr_ntop(a, buf, sizeof(buf)) == NULL)
		abort();
	if (netaddr_parse(buf, strlen(buf), &b) == -1 ||
	    netaddr_cmp(a, &b) != 0)
		abort();
	(void)netaddr_is_internal(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	const char *s = (const char *)data, *errstr;
	char out[POLICY_HOST_MAX + 1], again[POLICY_HOST_MAX + 1];
	char *z, cbuf[NETADDR_STRLEN + 8];
	struct policy_target t;
	struct netaddr a;
	struct cidr c, c2;
	int n;

	if (netaddr_parse(s, len, &a) == 0)
		check_addr(&a);

	/* A normal name is a fixed point, and never an IP literal. */
	n = policy_name_normalize(s, len, out, sizeof(out));
	if (n >= 0) {
		if ((size_t)n != strlen(out) || n > POLICY_HOST_MAX)
			abort();
		if (policy_name_normalize(out, (size_t)n, again,
		    sizeof(again)) != n || strcmp(out, again) != 0)
			abort();
		if (netaddr_parse(out, (size_t)n, &a) == 0)
			abort();
	}

	if (policy_target_init(&t, s, len, 443) == 0) {
		if (t.is_ip)
			check_addr(&t.ip);
		else if (strchr(t.host, ':') != NULL || t.host[0] == '\0')
			abort();
	}

	if ((z = malloc(len + 1)) == NULL)
		return 0;
	memcpy(z, data, len);
	z[len] = '\0';
	if (cidr_parse(z, &c, &errstr) == 0) {
		if (cidr_ntop(&c, cbuf, sizeof(cbuf)) == NULL ||
		    cidr_parse(cbuf, &c2, &errstr) == -1 ||
		    c.bits != c2.bits || netaddr_cmp(&c.addr, &c2.addr) != 0 ||
		    !cidr_contains(&c, &c.addr))
			abort();
	}
	free(z);
	return 0;
}
