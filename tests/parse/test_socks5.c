/*
 * Table-driven tests of the pure SOCKS5 parsers: every prefix of a valid
 * message needs more bytes, malformed messages are errors.
 */
#include <arpa/inet.h>
#include <string.h>

#include "check.h"
#include "parse/socks5.h"

struct req_case {
	const char	*name;
	const uint8_t	*bytes;
	size_t		 len;
	int		 want;		/* consumed, or an error */
	uint8_t		 cmd;
	const char	*host;		/* domain, or canonical address text */
	uint16_t	 port;
};

static const uint8_t r_domain[] = { 5, 1, 0, 3, 12, 'a','l','l','o','w','e',
    'd','.','t','e','s','t', 0x01, 0xbb };
static const uint8_t r_v4[] = { 5, 1, 0, 1, 127, 0, 0, 2, 0x00, 0x50 };
static const uint8_t r_v6[] = { 5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 1, 0x1f, 0x90 };
static const uint8_t r_mapped[] = { 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xff, 0xff, 169, 254, 169, 254, 0, 80 };
static const uint8_t r_bind[] = { 5, 2, 0, 1, 127, 0, 0, 1, 0, 80 };
static const uint8_t r_udp[] = { 5, 3, 0, 1, 127, 0, 0, 1, 0, 80 };
static const uint8_t r_badver[] = { 4, 1, 0, 1, 127, 0, 0, 1, 0, 80 };
static const uint8_t r_badrsv[] = { 5, 1, 1, 1, 127, 0, 0, 1, 0, 80 };
static const uint8_t r_atyp[] = { 5, 1, 0, 9, 127, 0, 0, 1, 0, 80 };
static const uint8_t r_empty_domain[] = { 5, 1, 0, 3, 0, 0, 80 };

static const struct req_case req_cases[] = {
	{ "domain", r_domain, sizeof(r_domain), sizeof(r_domain), 1,
	    "allowed.test", 443 },
	{ "ipv4", r_v4, sizeof(r_v4), sizeof(r_v4), 1, "127.0.0.2", 80 },
	{ "ipv6", r_v6, sizeof(r_v6), sizeof(r_v6), 1, "2001:db8::1", 8080 },
	{ "v4-mapped", r_mapped, sizeof(r_mapped), sizeof(r_mapped), 1,
	    "169.254.169.254", 80 },
	{ "bind parses", r_bind, sizeof(r_bind), sizeof(r_bind), 2,
	    "127.0.0.1", 80 },
	{ "udp parses", r_udp, sizeof(r_udp), sizeof(r_udp), 3, "127.0.0.1", 80 },
	{ "bad version", r_badver, sizeof(r_badver), SOCKS5_ERR, 0, NULL, 0 },
	{ "bad reserved", r_badrsv, sizeof(r_badrsv), SOCKS5_ERR, 0, NULL, 0 },
	{ "bad atyp", r_atyp, sizeof(r_atyp), SOCKS5_ERR_ATYP, 0, NULL, 0 },
	{ "empty domain", r_empty_domain, sizeof(r_empty_domain), SOCKS5_ERR,
	    0, NULL, 0 },
};

static void
test_requests(void)
{
	struct socks5_request r;
	char buf[64];
	size_t i, k;

	for (i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];
		int n = socks5_parse_request(c->bytes, c->len, &r);

		CHECK_MSG(n == c->want, "%s: got %d want %d", c->name, n, c->want);
		if (c->want > 0) {
			const char *h = r.atyp == SOCKS5_ATYP_DOMAIN ? r.host :
			    netaddr_ntop(&r.addr, buf, sizeof(buf));
			CHECK_INT(r.cmd, c->cmd);
			CHECK_STR(h, c->host);
			CHECK_INT(r.port, c->port);
			/* Every strict prefix needs more bytes. */
			for (k = 0; k < c->len; k++)
				CHECK_MSG(socks5_parse_request(c->bytes, k, &r) ==
				    SOCKS5_NEED_MORE, "%s: prefix %zu", c->name, k);
		}
	}
}

static void
test_greeting(void)
{
	static const uint8_t both[] = { 5, 2, 0, 2 };
	static const uint8_t none[] = { 5, 1, 0 };
	static const uint8_t gss[] = { 5, 1, 1 };
	static const uint8_t zero[] = { 5, 0 };
	static const uint8_t v4[] = { 4, 1, 0 };
	struct socks5_greeting g;
	size_t k;

	CHECK_INT(socks5_parse_greeting(both, sizeof(both), &g), 4);
	CHECK(g.no_auth && g.userpass);
	CHECK_INT(socks5_parse_greeting(none, sizeof(none), &g), 3);
	CHECK(g.no_auth && !g.userpass);
	CHECK_INT(socks5_parse_greeting(gss, sizeof(gss), &g), 3);
	CHECK(!g.no_auth && !g.userpass);
	CHECK_INT(socks5_parse_greeting(zero, sizeof(zero), &g), SOCKS5_ERR);
	CHECK_INT(socks5_parse_greeting(v4, sizeof(v4), &g), SOCKS5_ERR);
	for (k = 0; k < sizeof(both); k++)
		CHECK_INT(socks5_parse_greeting(both, k, &g), SOCKS5_NEED_MORE);
}

static void
test_auth(void)
{
	static const uint8_t ok[] = { 1, 3, 'd', 'e', 'v', 6, 's', 'e', 'c',
	    'r', 'e', 't' };
	static const uint8_t nopass[] = { 1, 3, 'd', 'e', 'v', 0 };
	static const uint8_t nouser[] = { 1, 0, 0 };
	static const uint8_t badver[] = { 5, 3, 'd', 'e', 'v', 0 };
	struct socks5_auth a;
	size_t k;

	CHECK_INT(socks5_parse_auth(ok, sizeof(ok), &a), sizeof(ok));
	CHECK_STR(a.user, "dev");
	CHECK_STR(a.pass, "secret");
	CHECK_INT(a.plen, 6);
	CHECK_INT(socks5_parse_auth(nopass, sizeof(nopass), &a), sizeof(nopass));
	CHECK_INT(a.plen, 0);
	CHECK_INT(socks5_parse_auth(nouser, sizeof(nouser), &a), SOCKS5_ERR);
	CHECK_INT(socks5_parse_auth(badver, sizeof(badver), &a), SOCKS5_ERR);
	for (k = 0; k < sizeof(ok); k++)
		CHECK_INT(socks5_parse_auth(ok, k, &a), SOCKS5_NEED_MORE);
}

static void
test_reply(void)
{
	uint8_t r[10];
	static const uint8_t want[10] = { 5, 2, 0, 1, 0, 0, 0, 0, 0, 0 };

	socks5_reply(SOCKS5_REP_NOT_ALLOWED, r);
	CHECK(memcmp(r, want, 10) == 0);
}

int
main(void)
{
	test_requests();
	test_greeting();
	test_auth();
	test_reply();
	return check_summary();
}
