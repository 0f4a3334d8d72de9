/*
 * What the files of the audit read side (audit_chain.c, audit_time.c,
 * audit_query.c, audit_output.c, audit_retention.c) share with each other
 * and with no one else: callers use audit/audit_query.h.
 */
#ifndef SG_AUDIT_INT_H
#define SG_AUDIT_INT_H

#include <stddef.h>
#include <stdio.h>

#include "audit/audit_query.h"

/* audit_time.c: 0001-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z */
#define AUDIT_TS_MIN_MS		(-62135596800000LL)
#define AUDIT_TS_MAX_MS		(253402300799999LL)

/* audit_chain.c: 64 lower-case hex digits? */
int	 audit_is_hash_hex(const unsigned char *p, size_t len);

/* audit_output.c: length of the valid UTF-8 sequence at p (n > 0 bytes left), 0 if invalid. */
size_t	 audit_utf8_seq(const unsigned char *p, size_t n);

/* audit_query.c: a prepared statement, or NULL with SQLite's message in err. */
struct sqlite3_stmt *audit_prepare(struct sqlite3 *, const char *sql,
	    char *err, size_t errlen);

/*
 * audit_output.c: the aligned table. Rows are buffered in blocks; widths
 * come from each block and only grow. NULL when out of memory.
 */
struct audit_table;
struct audit_table *audit_table_new(void);
void	 audit_table_row(FILE *, struct audit_table *,
	    const struct audit_val row[AUDIT_NCOLS]);
/* The fleet store's forms: a gateway column (first in the table, last elsewhere). */
struct audit_table *audit_table_new_gw(void);
void	 audit_table_row_gw(FILE *, struct audit_table *,
	    const struct audit_val row[AUDIT_NCOLS], const struct audit_val *gw);
void	 audit_write_json_gw(FILE *, const struct audit_val row[AUDIT_NCOLS],
	    const struct audit_val *gw);
void	 audit_write_csv_gw(FILE *, const struct audit_val row[AUDIT_NCOLS],
	    const struct audit_val *gw);
void	 audit_write_csv_header_gw(FILE *);
/* Write what is buffered, and the header if no row came at all. */
void	 audit_table_end(FILE *, struct audit_table *);
void	 audit_table_free(struct audit_table *);

#endif
