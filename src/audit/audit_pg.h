/*
 * What the shipper (audit_ship.c) and the fleet read side (audit_store.c)
 * share about PostgreSQL: how to connect, the schema, and the form a row
 * takes in sandgate.events. Nothing outside src/audit/ includes it.
 */
#ifndef SG_AUDIT_PG_H
#define SG_AUDIT_PG_H

#include <stddef.h>

#include <libpq-fe.h>

#include "audit/audit_query.h"

/* Keywords and values for PQconnect*Params (expand_dbname = 1). */
#define AUDIT_PG_NKW	4
void	 audit_pg_params(const char *url, const char *kw[AUDIT_PG_NKW + 1],
	    const char *val[AUDIT_PG_NKW + 1]);
/* A blocking connection for the command line; NULL with err. */
PGconn	*audit_pg_connect(const char *url, char *err, size_t errlen);
/* Drop the server's NOTICE messages (libpq prints them on stderr). */
void	 audit_pg_quiet(PGconn *);
/* The one line of libpq's message (no trailing newline) in buf. */
const char *audit_pg_error(PGconn *, const PGresult *, char *buf, size_t len);
/*
 * sandgate.meta's schema_version: 0 with *version (0 when there is no
 * schema yet), -1 with err.
 */
int	 audit_pg_version(PGconn *, int *version, char *err, size_t errlen);

/* The column list of an INSERT: gateway, the 22 columns of events, raw. */
#define AUDIT_PG_NPARAM	(AUDIT_NCOLS + 2)
extern const char audit_pg_insert_cols[];

/*
 * One row as the store keeps it: each column's text (NULL for SQL NULL;
 * integers in decimal) and, when the columns cannot hold the row exactly
 * (bytes that are not UTF-8, a NUL, a value of another type than its
 * column's -- only an edited audit.db has those), its canonical encoding
 * in raw: the hash is over that, and the columns show it lossily.
 */
struct audit_pg_row {
	char		*col[AUDIT_NCOLS];
	unsigned char	*raw;
	size_t		 raw_len;
};
int	 audit_pg_row_build(const struct audit_val *row, struct audit_pg_row *);
void	 audit_pg_row_free(struct audit_pg_row *);
/* The column text of one value (malloc'd, or NULL for SQL NULL); *exact 0 when lossy. -1 out of memory. */
int	 audit_pg_col_text(const struct audit_val *v, int is_int, char **out,
	    int *exact);

#endif
