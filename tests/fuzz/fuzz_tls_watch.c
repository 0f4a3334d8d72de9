/*
 * libFuzzer target for the passthrough handshake watch: memory safety and
 * its bookkeeping (never more passed than held, a watch that is done
 * watches nothing) -- the input (a first-hello length, a cut size, a split,
 * then client bytes and server bytes) is fed as the relay feeds it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/tls_watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
check(const struct tls_client_hello *ch, void *arg)
{
	(void)arg;
	if (ch->sni_len > 255 || (ch->has_sni && ch->sni_len == 0))
		abort();
	/* refuse names that start with 'h' (hidden), accept the others */
	return ch->has_sni && ch->sni[0] == 'h' ? -1 : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[1 << 17];
	struct tls_watch w;
	size_t first, split, step, have = 0, at = 0, k, pass, n, gone = 0;
	int rc;

	if (size < 4)
		return 0;
	first = data[0];
	step = (size_t)data[1] + 1;
	split = (size_t)data[2] << 8 | data[3];
	data += 4;
	size -= 4;
	if (split > size)
		split = size;
	tls_watch_start(&w, first);
	/* the server's bytes first (data[split..]), then the client's */
	rc = tls_watch_server(&w, data + split, size - split);
	if (rc != 0 && rc != 1)
		abort();
	if (rc == 0 && !w.server_done)
		abort();
	n = split;
	while (at < n) {
		k = n - at < step ? n - at : step;
		if (have + k > sizeof(buf))
			return 0;
		memcpy(buf + have, data + at, k);
		have += k;
		at += k;
		if (tls_watch_client(&w, buf, have, &pass, check, NULL) == -1)
			return 0;
		if (pass > have)
			abort();
		memmove(buf, buf + pass, have - pass);
		have -= pass;
		gone += pass;
		if (gone + have != at)
			abort();
	}
	if (tls_watch_done(&w) && (w.on || !w.server_done))
		abort();
	return 0;
}
