/*
 * The aggregate queries of the read side (audit_stats.h): a WHERE clause
 * from a filter's sandbox and time range, bound, and one step loop.
 */
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit_int.h"
#include "audit/audit_stats.h"

#define AGG_SQL_MAX	2048

static int
ts_text(int64_t ms, char *buf, size_t len)
{
	if (ms < AUDIT_TS_MIN_MS)
		ms = AUDIT_TS_MIN_MS;
	if (ms > AUDIT_TS_MAX_MS)
		ms = AUDIT_TS_MAX_MS;
	return audit_format_ts(ms, buf, len);
}

int64_t
audit_aggregate(sqlite3 *db, const struct audit_filter *f, const char *sel,
    const char *where, const char *group, const char *order, int limit,
    int (*cb)(sqlite3_stmt *, void *), void *arg, char *err, size_t errlen)
{
	char sql[AGG_SQL_MAX], since[AUDIT_TS_LEN + 1], until[AUDIT_TS_LEN + 1];
	sqlite3_stmt *st;
	int64_t n = 0;
	int rc, len, bi = 1;

	if ((f->has_since && ts_text(f->since_ms, since, sizeof(since)) == -1) ||
	    (f->has_until && ts_text(f->until_ms, until, sizeof(until)) == -1)) {
		snprintf(err, errlen, "time out of range");
		return -1;
	}
	len = snprintf(sql, sizeof(sql), "SELECT %s FROM events WHERE 1%s%s%s"
	    "%s%s%s%s%s%s%s", sel, f->sandbox ? " AND sandbox = ?" : "",
	    f->has_since ? " AND ts >= ?" : "", f->has_until ? " AND ts < ?" :
	    "", where ? " AND (" : "", where ? where : "", where ? ")" : "",
	    group ? " GROUP BY " : "", group ? group : "",
	    order ? " ORDER BY " : "", order ? order : "");
	if (len < 0 || (size_t)len >= sizeof(sql) - 32) {
		snprintf(err, errlen, "query too long");
		return -1;
	}
	if (limit > 0)
		snprintf(sql + len, sizeof(sql) - (size_t)len, " LIMIT %d",
		    limit);
	if ((st = audit_prepare(db, sql, err, errlen)) == NULL)
		return -1;
	if (f->sandbox)
		sqlite3_bind_text(st, bi++, f->sandbox, -1, SQLITE_TRANSIENT);
	if (f->has_since)
		sqlite3_bind_text(st, bi++, since, -1, SQLITE_TRANSIENT);
	if (f->has_until)
		sqlite3_bind_text(st, bi++, until, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		n++;
		if (cb(st, arg) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		n = -1;
	}
	sqlite3_finalize(st);
	return n;
}

const char *
audit_col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s != NULL ? (const char *)s : "";
}

int64_t
audit_col_int(sqlite3_stmt *st, int i, int64_t null_value)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return null_value;
	return sqlite3_column_int64(st, i);
}
