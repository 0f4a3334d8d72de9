/*
 * libFuzzer target for the chunked-body decoder: the input is fed whole,
 * one byte at a time and in uneven pieces; every way must agree on the
 * body's length, on completion and on failure.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Body bytes (or -1) when fed in pieces of step bytes (0: uneven ones). */
static ssize_t
fuzz_feed(const char *buf, size_t len, size_t step, int *done)
{
	struct http_chunked c;
	size_t off = 0, n, k = 0;
	ssize_t r, total = 0;

	http_chunked_init(&c);
	*done = 0;
	while (off < len) {
		n = step != 0 ? step :
		    1 + (k++ * 7 + (unsigned char)buf[off]) % 23;
		if (n > len - off)
			n = len - off;
		r = http_chunked_feed(&c, buf + off, n, done);
		if (r < 0)
			return -1;
		if ((size_t)r > n)
			abort();
		total += r;
		if (*done)
			break;
		if ((size_t)r != n)
			abort();
		off += n;
	}
	return total;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t steps[] = { 1, 2, 3, 0, 4096 };
	const char *buf = (const char *)data;
	ssize_t whole, part;
	int done_whole, done_part;
	size_t i;

	whole = fuzz_feed(buf, size, size > 0 ? size : 1, &done_whole);
	if (whole > (ssize_t)size)
		abort();
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (steps[i] == 1 && size > 8192)
			continue;
		part = fuzz_feed(buf, size, steps[i], &done_part);
		if (part != whole || (whole >= 0 && done_part != done_whole))
			abort();
	}
	return 0;
}
