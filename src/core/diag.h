/*
 * Diagnostics collected while loading files: every error carries
 * FILE:LINE:COL (1-based) so that `policy check` reports all of them in one run.
 */
#ifndef SG_DIAG_H
#define SG_DIAG_H

#include <stddef.h>
#include <stdio.h>

struct diag_entry {
	char	*file;
	int	 line;
	int	 col;
	char	*msg;
};

struct diag {
	struct diag_entry *v;
	size_t		 n;
	size_t		 cap;
};

void	diag_init(struct diag *);
void	diag_free(struct diag *);
/* line/col 0 when unknown (e.g. a file that cannot be opened). */
void	diag_add(struct diag *, const char *file, int line, int col,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/*
 * "FILE:LINE:COL: message", or "FILE: message" for an entry of line 0 (the
 * whole file); snprintf's return value.
 */
int	diag_format(const struct diag_entry *, char *buf, size_t len);
/* One diag_format() line per entry. */
void	diag_print(const struct diag *, FILE *);
/*
 * The word of known ('|'-separated) that word most likely meant, for "did
 * you mean": the nearest by Damerau-Levenshtein distance (case aside), at
 * most 1 for a word of up to 3 letters and 2 for a longer one, else the one
 * word it is a clear prefix of (3 letters or more); NULL when none.
 */
const char *diag_nearest(const char *word, const char *known, char *out,
	    size_t outlen);
/* The distance itself (optimal string alignment), capped at 99. */
int	diag_distance(const char *a, size_t alen, const char *b, size_t blen);

#endif
