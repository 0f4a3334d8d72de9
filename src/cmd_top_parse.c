/*
 * The two pure readers of `sandgate top`: the status and body of an HTTP
 * answer, and a metric family's sum in Prometheus text. What they read
 * comes from a socket that another local program may hold; fuzzed by
 * tests/fuzz/fuzz_top_parse.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_top.h"

int
top_http_split(const char *buf, size_t len, int *status, size_t *body_off)
{
	const char *end;
	size_t i;

	/* "HTTP/1.x NNN" */
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[7] < '0' ||
	    buf[7] > '9' || buf[8] != ' ')
		return -1;
	*status = 0;
	for (i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		*status = *status * 10 + (buf[i] - '0');
	}
	if ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL)
		return -1;
	*body_off = (size_t)(end - buf) + 4;
	return 0;
}

int
top_metric_sum(const char *text, size_t len, const char *name, double *sum)
{
	size_t nlen = strlen(name), i = 0, eol, j;
	char num[64], *end;
	int found = 0;
	double d;

	*sum = 0;
	while (i < len) {
		for (eol = i; eol < len && text[eol] != '\n'; eol++)
			;
		if (eol - i > nlen && memcmp(text + i, name, nlen) == 0 &&
		    (text[i + nlen] == ' ' || text[i + nlen] == '{')) {
			/* the value is the last word (no timestamps here) */
			for (j = eol; j > i && text[j - 1] != ' '; j--)
				;
			if (j > i + nlen && eol > j && eol - j < sizeof(num)) {
				memcpy(num, text + j, eol - j);
				num[eol - j] = '\0';
				d = strtod(num, &end);
				if (*end == '\0' && end != num && isfinite(d) &&
				    isfinite(*sum + d)) {
					*sum += d;
					found++;
				}
			}
		}
		i = eol + 1;
	}
	return found;
}
