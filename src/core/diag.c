/*
 * Collects load-time errors with their positions and prints them in the
 * FILE:LINE:COL: message form that editors and CI parsers understand.
 */
#include <stdarg.h>
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

void
diag_print(const struct diag *d, FILE *fp)
{
	size_t i;

	/* Printed 1-based: an error about a whole file (0:0) is at 1:1. */
	for (i = 0; i < d->n; i++)
		fprintf(fp, "%s:%d:%d: %s\n", d->v[i].file,
		    d->v[i].line > 0 ? d->v[i].line : 1,
		    d->v[i].col > 0 ? d->v[i].col : 1, d->v[i].msg);
}
