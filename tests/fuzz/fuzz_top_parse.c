/*
 * libFuzzer target for sandgate top's readers of the gateway's answers
 * (src/cmd_top_parse.c, compiled in here: the command line is not in
 * sgcore). Invariants: the body starts after a blank line inside the
 * input; a metric's sum is finite and counts at most one sample a line;
 * a label's values are short C strings without quotes or backslashes.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_top_parse.c"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Each value: a C string shorter than the reader's buffer, no quote. */
static void
each_cb(const char *value, double v, void *arg)
{
	size_t *n = arg;

	if (strlen(value) >= 128 || strchr(value, '"') != NULL ||
	    strchr(value, '\\') != NULL || !isfinite(v))
		abort();
	(*n)++;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "sandgate_tunnels_open",
	    "sandgate_connections", "sandgate_keeper_up", "s" };
	const char *buf = (const char *)data;
	size_t off, i, lines = 1;
	double sum;
	int status, n;

	if (top_http_split(buf, size, &status, &off) == 0 &&
	    (off > size || off < 4 || memcmp(buf + off - 4, "\r\n\r\n", 4) != 0 ||
	    status < 0 || status > 999))
		abort();
	for (i = 0; i < size; i++)
		lines += buf[i] == '\n';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		n = top_metric_sum(buf, size, names[i], &sum);
		if (n < 0 || (size_t)n > lines || !isfinite(sum) ||
		    (n == 0 && sum != 0))
			abort();
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t seen = 0;

		n = top_metric_each(buf, size, names[i], "sandbox", each_cb, &seen);
		if (n < 0 || (size_t)n != seen || (size_t)n > lines)
			abort();
	}
	return 0;
}
