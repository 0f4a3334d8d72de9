/*
 * libFuzzer target for http_split_authority, the one host:port splitter
 * (CONNECT targets, absolute-form authorities, Host headers in tunnels and
 * on the transparent listener). Checks that the host slice lies inside the
 * input, holds only host characters and no brackets or colon outside an
 * IPv6 literal, that a port is 1-65535 written in decimal at the end, and
 * that joining host and port again gives back the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *a = (const char *)data;
	struct http_slice host;
	char back[600];
	uint16_t port = 0;
	int has_port = 0, v6, n;
	size_t i;

	if (http_split_authority(a, size, &host, &port, &has_port) != 0)
		return 0;
	if (host.len == 0 || host.p < a || host.p + host.len > a + size)
		abort();
	v6 = host.p > a && host.p[-1] == '[';
	for (i = 0; i < host.len; i++) {
		unsigned char c = (unsigned char)host.p[i];
		if (c == '[' || c == ']' || c == '@' || c == '/' || c == '%' ||
		    c <= 0x20 || c >= 0x7f)
			abort();
		if (c == ':' && !v6)
			abort();
	}
	if (has_port && port == 0)
		abort();
	n = snprintf(back, sizeof(back), "%s%.*s%s", v6 ? "[" : "",
	    (int)host.len, host.p, v6 ? "]" : "");
	if (has_port)
		n += snprintf(back + n, sizeof(back) - (size_t)n, ":%u", port);
	/* Leading zeros in a port are the one spelling that does not round-trip. */
	if ((size_t)n != size || memcmp(back, a, size) != 0) {
		const char *colon = memrchr(a, ':', size);
		if (!has_port || colon == NULL || colon[1] != '0')
			abort();
	}
	return 0;
}
