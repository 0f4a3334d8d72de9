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

/* The last word of line [i, eol) as a finite number: 0, or -1. */
static int
last_number(const char *text, size_t i, size_t eol, double *d)
{
	char num[64], *end;
	size_t j;

	for (j = eol; j > i && text[j - 1] != ' '; j--)
		;
	if (j == i || eol <= j || eol - j >= sizeof(num))
		return -1;
	memcpy(num, text + j, eol - j);
	num[eol - j] = '\0';
	*d = strtod(num, &end);
	return *end == '\0' && end != num && isfinite(*d) ? 0 : -1;
}

int
top_metric_each(const char *text, size_t len, const char *name,
    const char *label, void (*cb)(const char *, double, void *), void *arg)
{
	size_t nlen = strlen(name), llen = strlen(label), i = 0, eol, k, v;
	char value[128];
	double d;
	int n = 0;

	while (i < len) {
		for (eol = i; eol < len && text[eol] != '\n'; eol++)
			;
		if (eol - i > nlen + 1 && memcmp(text + i, name, nlen) == 0 &&
		    text[i + nlen] == '{') {
			/* label="value" inside the braces, at a label's start */
			for (k = i + nlen + 1; k + llen + 2 < eol &&
			    text[k] != '}'; k++) {
				if ((text[k - 1] != '{' && text[k - 1] != ',') ||
				    memcmp(text + k, label, llen) != 0 ||
				    text[k + llen] != '=' ||
				    text[k + llen + 1] != '"')
					continue;
				k += llen + 2;
				for (v = k; v < eol && text[v] != '"' &&
				    text[v] != '\\'; v++)
					;
				if (v >= eol || text[v] != '"' ||
				    v - k >= sizeof(value) ||
				    last_number(text, v, eol, &d) == -1)
					break;
				memcpy(value, text + k, v - k);
				value[v - k] = '\0';
				cb(value, d, arg);
				n++;
				break;
			}
		}
		i = eol + 1;
	}
	return n;
}
