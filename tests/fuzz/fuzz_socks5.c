/*
 * libFuzzer target for the SOCKS5 parsers: any bytes, as greeting, auth
 * and request; a consumed count never exceeds the input.
 */
#include <stdint.h>
#include <stdlib.h>

#include "parse/socks5.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct socks5_greeting g;
	struct socks5_auth a;
	struct socks5_request r;
	int n;

	if ((n = socks5_parse_greeting(data, size, &g)) > (int)size)
		abort();
	if ((n = socks5_parse_auth(data, size, &a)) > (int)size)
		abort();
	if (n > 0 && (a.ulen + a.plen + 3 != (size_t)n))
		abort();
	if ((n = socks5_parse_request(data, size, &r)) > (int)size)
		abort();
	if (n > 0 && r.atyp == SOCKS5_ATYP_DOMAIN && r.hostlen + 7 != (size_t)n)
		abort();
	return 0;
}
