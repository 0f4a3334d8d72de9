/*
 * libFuzzer target for the ClientHello parser: memory safety, the SNI and
 * ALPN results' invariants, and verdicts that prefixes never contradict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/tls_sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_client_hello ch;
	size_t cuts[6], i, k, used = 0;
	int rc, rk;

	rc = tls_parse_client_hello(data, size, &ch);
	if (rc < TLS_CH_BAD || rc > TLS_CH_OK)
		abort();
	/* A ClientHello is TLS to the first-bytes check too. */
	rk = tls_record_like(data, size);
	if (rk < -1 || rk > 1 || (rc == TLS_CH_OK && rk != 1) ||
	    (size >= 4 && rk == -1))
		abort();
	if (size > 0 && data[0] != 0x16 && rc != TLS_CH_NOT_TLS)
		abort();
	if (rc == TLS_CH_OK) {
		if (ch.consumed < 5 + 4 || ch.consumed > size)
			abort();
		if (ch.sni_len > 255 || ch.sni_len != strlen(ch.sni) ||
		    ch.has_sni != (ch.sni_len > 0))
			abort();
		for (k = 0; k < ch.sni_len; k++)
			if ((unsigned char)ch.sni[k] <= 0x20 ||
			    (unsigned char)ch.sni[k] >= 0x7f)
				abort();
		if ((ch.alpn_h2 || ch.alpn_http11) && !ch.has_alpn)
			abort();
		used = ch.consumed;
		/* the records it used are a complete hello on their own */
		if (tls_parse_client_hello(data, used, &ch) != TLS_CH_OK ||
		    ch.consumed != used)
			abort();
	} else if (ch.has_sni || ch.has_alpn || ch.consumed != 0)
		abort();
	cuts[0] = 0;
	cuts[1] = size / 2;
	cuts[2] = size > 0 ? size - 1 : 0;
	cuts[3] = size > 5 ? 5 : size;
	cuts[4] = size > 9 ? 9 : size;
	cuts[5] = used > 0 ? used - 1 : 0;
	for (i = 0; i < 6; i++) {
		k = cuts[i];
		rk = tls_parse_client_hello(data, k, &ch);
		if (rk != TLS_CH_NEED_MORE && rk != rc)
			abort();
		/* OK exactly once the records carrying the hello are there */
		if (rc == TLS_CH_OK && (rk == TLS_CH_OK) != (k >= used))
			abort();
	}
	return 0;
}
