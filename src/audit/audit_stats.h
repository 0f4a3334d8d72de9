/*
 * Aggregates over the audit log for `audit stats` and `policy suggest`:
 * one SELECT ... GROUP BY over the rows a filter's sandbox / since / until
 * select, each row handed to a callback. The SQL text is the caller's
 * constant; every filter value is a bound parameter.
 */
#ifndef SG_AUDIT_STATS_H
#define SG_AUDIT_STATS_H

#include <stdint.h>

#include "audit/audit_query.h"

struct sqlite3_stmt;

/*
 * "SELECT sel FROM events WHERE <f: sandbox, since, until> [AND where]
 * [GROUP BY group] [ORDER BY order] [LIMIT limit]"; cb is called for
 * every row (return non-zero to stop). The number of rows, or -1 with a
 * message in err.
 */
int64_t	audit_aggregate(struct sqlite3 *, const struct audit_filter *f,
	    const char *sel, const char *where, const char *group,
	    const char *order, int limit,
	    int (*cb)(struct sqlite3_stmt *, void *), void *arg, char *err,
	    size_t errlen);
/* Column i of a stepped statement as text ("" for NULL), or its integer. */
const char *audit_col_text(struct sqlite3_stmt *, int i);
int64_t	audit_col_int(struct sqlite3_stmt *, int i, int64_t null_value);

#endif
