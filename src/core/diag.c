/*
 * Collects load-time errors with their positions and prints them in the
 * FILE:LINE:COL: message form that editors and CI parsers understand
 * (FILE: message for an error about a whole file, such as one that cannot
 * be opened).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/diag.h"

void
diag_init(struct diag *d)
{
	memset(d, 0, sizeof(*d));
}

void
diag_free(struct diag *d)
{
	size_t i;

	for (i = 0; i < d->n; i++) {
		free(d->v[i].file);
		free(d->v[i].msg);
	}
	free(d->v);
	memset(d, 0, sizeof(*d));
}

void
diag_add(struct diag *d, const char *file, int line, int col,
    const char *fmt, ...)
{
	struct diag_entry *e;
	va_list ap;
	char msg[1024];

	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 8;
		void *nv = realloc(d->v, ncap * sizeof(*d->v));
		if (nv == NULL)
			return;	/* out of memory: the count still reflects earlier errors */
		d->v = nv;
		d->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = &d->v[d->n];
	e->file = strdup(file ? file : "<defaults>");
	e->msg = strdup(msg);
	if (e->file == NULL || e->msg == NULL) {
		free(e->file);
		free(e->msg);
		return;
	}
	e->line = line;
	e->col = col;
	d->n++;
}

int
diag_format(const struct diag_entry *e, char *buf, size_t len)
{
	if (e->line > 0)
		return snprintf(buf, len, "%s:%d:%d: %s", e->file, e->line,
		    e->col, e->msg);
	return snprintf(buf, len, "%s: %s", e->file, e->msg);
}

void
diag_print(const struct diag *d, FILE *fp)
{
	char line[2048];
	size_t i;

	for (i = 0; i < d->n; i++) {
		(void)diag_format(&d->v[i], line, sizeof(line));
		fprintf(fp, "%s\n", line);
	}
}

int
diag_distance(const char *a, size_t alen, const char *b, size_t blen)
{
	int d[33][33];
	size_t i, j;

	if (alen > 32 || blen > 32)
		return 99;
	for (i = 0; i <= alen; i++)
		d[i][0] = (int)i;
	for (j = 0; j <= blen; j++)
		d[0][j] = (int)j;
	for (i = 1; i <= alen; i++)
		for (j = 1; j <= blen; j++) {
			int cost = tolower((unsigned char)a[i - 1]) !=
			    tolower((unsigned char)b[j - 1]);
			int v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) ==
			    tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) ==
			    tolower((unsigned char)b[j - 1]) &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;	/* transposition */
			d[i][j] = v;
		}
	return d[alen][blen];
}

const char *
diag_nearest(const char *word, const char *known, char *out, size_t outlen)
{
	const char *p = known, *best = NULL, *prefix = NULL;
	size_t wlen = strlen(word), best_len = 0, prefix_len = 0, n;
	int best_d = 99, n_prefix = 0, max = wlen <= 3 ? 1 : 2, dist;

	if (wlen == 0 || outlen == 0)
		return NULL;
	while (p != NULL && *p != '\0') {
		const char *bar = strchr(p, '|');

		n = bar ? (size_t)(bar - p) : strlen(p);
		dist = diag_distance(word, wlen, p, n);
		if (dist < best_d) {
			best_d = dist;
			best = p;
			best_len = n;
		}
		if (wlen >= 3 && wlen < n && strncasecmp(word, p, wlen) == 0) {
			prefix = p;
			prefix_len = n;
			n_prefix++;
		}
		p = bar ? bar + 1 : NULL;
	}
	if (best != NULL && best_d <= max)
		;	/* the nearest; 0: the same word in other case */
	else if (n_prefix == 1) {
		best = prefix;
		best_len = prefix_len;
	} else
		return NULL;
	snprintf(out, outlen, "%.*s", (int)best_len, best);
	return out;
}
