/*
 * Collects load-time errors with their positions and prints them in the
 * FILE:LINE:COL: message form that editors and CI parsers understand
 * (FILE: message for an error about a whole file, such as one that cannot
 * be opened).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
