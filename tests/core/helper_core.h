/*
 * What the core unit tests share (helper_core.c, linked into each of them):
 * the test data directory, a temp dir removed at exit, files written into
 * it, and the check of a run's diagnostics against a table.
 */
#ifndef SG_TEST_HELPER_CORE_H
#define SG_TEST_HELPER_CORE_H

#include <stddef.h>
#include <string.h>

#include "check.h"
#include "core/diag.h"

/*
 * data_dir (len bytes) becomes $SANDGATE_TEST_DATA/core/data, or "data";
 * tmp_dir, a mkdtemp template, becomes a new directory that is removed
 * with everything in it at exit. Exits 1 when it cannot make it.
 */
void		 coretest_setup_dirs(char *data_dir, size_t len, char *tmp_dir);
/* Write text to name in tmp_dir; the path (static buffer). Exits 1 on error. */
const char	*coretest_tmpfile(const char *name, const char *text);

struct policy;
/*
 * The policy at path (a file or a directory), loaded; its diagnostics
 * printed when it does not load (NULL then; the caller CHECKs).
 */
struct policy	*coretest_load(const char *path);

/* One expected diagnostic: where, and a part of its message. */
struct coretest_diag {
	int		 line, col;
	const char	*msg;
};

/* Every diagnostic of d, in order, is want[i] in file: no more, no less. */
static inline void
coretest_check_diags(const struct diag *d, const char *file,
    const struct coretest_diag *want, size_t n)
{
	size_t i;

	CHECK_INT(d->n, n);
	for (i = 0; i < d->n && i < n; i++) {
		CHECK_STR(d->v[i].file, file);
		CHECK_INT(d->v[i].line, want[i].line);
		CHECK_INT(d->v[i].col, want[i].col);
		CHECK_MSG(strstr(d->v[i].msg, want[i].msg) != NULL, "%s",
		    d->v[i].msg);
	}
}

/*
 * The diagnostics of a run that failed as case name should: nerr of them,
 * the first at file:line:col with msg in its message.
 */
static inline void
coretest_check_first(const struct diag *d, const char *name,
    const char *file, int nerr, int line, int col, const char *msg)
{
	CHECK_MSG((int)d->n == nerr, "%s: %zu errors, want %d", name, d->n,
	    nerr);
	CHECK_MSG(d->n > 0 && d->v[0].line == line && d->v[0].col == col &&
	    strstr(d->v[0].msg, msg) && strcmp(d->v[0].file, file) == 0,
	    "%s: got %s:%d:%d: %s; want %d:%d: ...%s...", name,
	    d->n ? d->v[0].file : "-", d->n ? d->v[0].line : 0,
	    d->n ? d->v[0].col : 0, d->n ? d->v[0].msg : "-", line, col, msg);
}

/*
 * path must not load, with exactly the diagnostics want[0..n), all in
 * file (NULL: path itself).
 */
void		 coretest_load_fails(const char *path, const char *file,
		    const struct coretest_diag *want, size_t n);

#endif
