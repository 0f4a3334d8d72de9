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

/* What http_chunked_decode_ext handed out: lengths and a running hash. */
struct seen {
	size_t		data, ext;
	uint64_t	hd, he;
};

static void
seen_data(const char *p, size_t n, void *arg)
{
	struct seen *s = arg;
	size_t i;

	if (n == 0)
		abort();
	s->data += n;
	for (i = 0; i < n; i++)
		s->hd = s->hd * 131 + (unsigned char)p[i];
}

static void
seen_ext(const char *p, size_t n, void *arg)
{
	struct seen *s = arg;
	size_t i;

	if (p == NULL) {		/* a line's end */
		if (n != 0)
			abort();
		s->he = s->he * 131 + 0x100;
		return;
	}
	if (n == 0)
		abort();
	s->ext += n;
	for (i = 0; i < n; i++) {
		if (p[i] == '\r' || p[i] == '\n')
			abort();	/* never the line's end */
		s->he = s->he * 131 + (unsigned char)p[i];
	}
}

/* decode_ext in pieces of step bytes (0: uneven): as fuzz_feed, and *s. */
static ssize_t
fuzz_decode(const char *buf, size_t len, size_t step, int *done,
    struct seen *s)
{
	struct http_chunked c;
	size_t off = 0, n, k = 0;
	ssize_t r, total = 0;

	http_chunked_init(&c);
	memset(s, 0, sizeof(*s));
	*done = 0;
	while (off < len) {
		n = step != 0 ? step :
		    1 + (k++ * 5 + (unsigned char)buf[off]) % 19;
		if (n > len - off)
			n = len - off;
		r = http_chunked_decode_ext(&c, buf + off, n, done, seen_data,
		    seen_ext, s);
		if (r < 0)
			return -1;
		total += r;
		if (*done)
			break;
		off += n;
	}
	if (s->data + s->ext > (size_t)total)
		abort();
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
	/* The payload and the extensions come out the same in any pieces. */
	{
		struct seen a, b;

		part = fuzz_decode(buf, size, size > 0 ? size : 1, &done_part,
		    &a);
		if (part != whole || (whole >= 0 && done_part != done_whole))
			abort();
		if (size <= 8192 && whole >= 0) {
			if (fuzz_decode(buf, size, 1, &done_part, &b) != whole ||
			    a.data != b.data || a.ext != b.ext ||
			    a.hd != b.hd || a.he != b.he)
				abort();
			if (fuzz_decode(buf, size, 0, &done_part, &b) != whole ||
			    a.ext != b.ext || a.he != b.he)
				abort();
		}
	}
	return 0;
}
