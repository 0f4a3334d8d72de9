/*
 * The fleet store's read side: `sandgate audit --store URL [filters]` and
 * `sandgate audit verify --store URL`. Rows come back from sandgate.events
 * in binary form and become the same values audit.db holds (a row kept as
 * its encoding, raw, is decoded and checked against its columns), so that
 * output and verify are the local code's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "audit/audit_int.h"
#include "audit/audit_pg.h"
#include "audit/audit_store.h"

#define STORE_FETCH	5000	/* rows per FETCH while verifying */
#define STORE_COL_GW	AUDIT_NCOLS
#define STORE_COL_RAW	(AUDIT_NCOLS + 1)

/* A value of a binary-format result: bigint columns as INT, others TEXT. */
static void
store_val(const PGresult *r, int i, int c, int is_int, struct audit_val *v)
{
	const unsigned char *p = (const unsigned char *)PQgetvalue(r, i, c);
	uint64_t u = 0;
	int k;

	memset(v, 0, sizeof(*v));
	if (PQgetisnull(r, i, c)) {
		v->type = AUDIT_V_NULL;
		return;
	}
	if (is_int && PQgetlength(r, i, c) == 8) {
		for (k = 0; k < 8; k++)
			u = u << 8 | p[k];
		v->type = AUDIT_V_INT;
		v->i = (int64_t)u;
		return;
	}
	v->type = AUDIT_V_TEXT;
	v->p = p;
	v->len = (size_t)PQgetlength(r, i, c);
}

/* Two values show the same in the store's columns? */
static int
store_same(const struct audit_val *a, const struct audit_val *b, int is_int)
{
	char *ta = NULL, *tb = NULL;
	int ea, eb, same;

	if (audit_pg_col_text(a, is_int, &ta, &ea) == -1 ||
	    audit_pg_col_text(b, is_int, &tb, &eb) == -1)
		same = 0;
	else
		same = (ta == NULL && tb == NULL) || (ta != NULL &&
		    tb != NULL && strcmp(ta, tb) == 0);
	free(ta);
	free(tb);
	return same;
}

/*
 * Row i of a result of audit_store_cols as audit.db held it. 0, or 1 when
 * its raw encoding is malformed or does not match its columns (msg).
 */
static int
store_row(const PGresult *r, int i, struct audit_val *row,
    struct audit_val *gw, char *msg, size_t msglen)
{
	struct audit_val cols[AUDIT_NCOLS];
	int c;

	for (c = 0; c < AUDIT_NCOLS; c++)
		store_val(r, i, c, audit_col_is_int[c], &cols[c]);
	store_val(r, i, STORE_COL_GW, 0, gw);
	memcpy(row, cols, sizeof(cols));
	if (PQgetisnull(r, i, STORE_COL_RAW))
		return 0;
	if (audit_decode_row((const unsigned char *)PQgetvalue(r, i,
	    STORE_COL_RAW), (size_t)PQgetlength(r, i, STORE_COL_RAW),
	    row) == -1) {
		snprintf(msg, msglen, "its raw encoding is malformed");
		return 1;
	}
	for (c = 0; c < AUDIT_NHASHED; c++)
		if (!store_same(&row[c], &cols[c], audit_col_is_int[c])) {
			snprintf(msg, msglen, "column %s differs from the row's "
			    "raw encoding", audit_col_names[c]);
			return 1;
		}
	return 0;
}

/*
 * Send q (binary results, one row per result: a large answer is never
 * held whole). 0, or -1 with err.
 */
static int
store_send(PGconn *c, const struct audit_sql *q, char *err, size_t errlen)
{
	const char *vals[AUDIT_MAX_BINDS];
	char ints[AUDIT_MAX_BINDS][24];
	int i;

	for (i = 0; i < q->n_binds; i++) {
		if (q->binds[i].is_int) {
			snprintf(ints[i], sizeof(ints[i]), "%" PRId64,
			    q->binds[i].i);
			vals[i] = ints[i];
		} else
			vals[i] = q->binds[i].s;
	}
	if (!PQsendQueryParams(c, q->text, q->n_binds, NULL, vals, NULL, NULL,
	    1) || !PQsetSingleRowMode(c)) {
		audit_pg_error(c, NULL, err, errlen);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- query */

static void
store_print(FILE *out, enum audit_format fmt, struct audit_table *t,
    const struct audit_val *row, const struct audit_val *gw)
{
	if (fmt == AUDIT_FMT_JSON)
		audit_write_json_gw(out, row, gw);
	else if (fmt == AUDIT_FMT_CSV)
		audit_write_csv_gw(out, row, gw);
	else
		audit_table_row_gw(out, t, row, gw);
}

/* Print one row of a single-row result. */
static void
store_print_row(FILE *out, enum audit_format fmt, struct audit_table *t,
    const PGresult *r)
{
	struct audit_val row[AUDIT_NCOLS], gw;
	char msg[128];
	int k;

	/* A row whose raw does not fit its columns shows its columns. */
	if (store_row(r, 0, row, &gw, msg, sizeof(msg)) != 0)
		for (k = 0; k < AUDIT_NCOLS; k++)
			store_val(r, 0, k, audit_col_is_int[k], &row[k]);
	store_print(out, fmt, t, row, &gw);
}

int64_t
audit_store_query(const char *url, const char *gateway,
    const struct audit_filter *flt, enum audit_format fmt, FILE *out,
    char *err, size_t errlen)
{
	struct audit_filter f = *flt;
	struct audit_table *t = NULL;
	struct audit_sql q;
	const char *errstr;
	PGconn *c;
	PGresult *r;
	int64_t n = 0;

	f.store = 1;
	f.gateway = gateway;
	if (audit_build_select(&f, &q, &errstr) == -1) {
		snprintf(err, errlen, "%s", errstr);
		return -1;
	}
	if (fmt == AUDIT_FMT_TABLE && (t = audit_table_new_gw()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((c = audit_pg_connect(url, err, errlen)) == NULL ||
	    store_send(c, &q, err, errlen) == -1) {
		audit_table_free(t);
		PQfinish(c);
		return -1;
	}
	if (fmt == AUDIT_FMT_CSV)
		audit_write_csv_header_gw(out);
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) == PGRES_SINGLE_TUPLE) {
			store_print_row(out, fmt, t, r);
			n++;
		} else if (PQresultStatus(r) != PGRES_TUPLES_OK && n != -1) {
			audit_pg_error(c, r, err, errlen);
			n = -1;
		}
		PQclear(r);
	}
	if (fmt == AUDIT_FMT_TABLE && n != -1)
		audit_table_end(out, t);
	audit_table_free(t);
	PQfinish(c);
	return n;
}

int64_t
audit_store_rows(const char *url, const char *gateway,
    const struct audit_filter *flt,
    int (*cb)(const struct audit_val row[AUDIT_NCOLS],
    const struct audit_val *gw, void *arg), void *arg,
    char *err, size_t errlen)
{
	struct audit_filter f = *flt;
	struct audit_val row[AUDIT_NCOLS], gw;
	struct audit_sql q;
	const char *errstr;
	char msg[128];
	PGconn *c;
	PGresult *r;
	int64_t n = 0;
	int k, stop = 0;

	f.store = 1;
	f.gateway = gateway;
	if (audit_build_select(&f, &q, &errstr) == -1) {
		snprintf(err, errlen, "%s", errstr);
		return -1;
	}
	if ((c = audit_pg_connect(url, err, errlen)) == NULL ||
	    store_send(c, &q, err, errlen) == -1) {
		PQfinish(c);
		return -1;
	}
	/* Read every result to the end, also after cb stopped or an error. */
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) == PGRES_SINGLE_TUPLE && n != -1 &&
		    !stop) {
			if (store_row(r, 0, row, &gw, msg, sizeof(msg)) != 0)
				for (k = 0; k < AUDIT_NCOLS; k++)
					store_val(r, 0, k, audit_col_is_int[k],
					    &row[k]);
			n++;
			stop = cb(row, &gw, arg);
		} else if (PQresultStatus(r) != PGRES_SINGLE_TUPLE &&
		    PQresultStatus(r) != PGRES_TUPLES_OK && n != -1) {
			audit_pg_error(c, r, err, errlen);
			n = -1;
		}
		PQclear(r);
	}
	PQfinish(c);
	return n;
}

/* ------------------------------------------------------------ verify */

struct store_walk {
	PGconn		*c;
	const char	*gateway;
};

/* The chain's start in the store when a gateway's first row is not id 1. */
static int
store_anchor(void *ctx, int64_t first, char *anchor, struct audit_verify *res)
{
	struct store_walk *sw = ctx;
	const char *p[1] = { sw->gateway };
	struct audit_val row[AUDIT_NCOLS], gw;
	char sql[512];
	PGresult *r;
	int64_t best = 0;
	int i, n, rc = 2;

	snprintf(sql, sizeof(sql), "SELECT %s FROM sandgate.events WHERE "
	    "gateway = $1 AND kind = 'admin' AND rule = 'retention' ORDER BY "
	    "id", audit_store_cols);
	r = PQexecParams(sw->c, sql, 1, NULL, p, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		audit_pg_error(sw->c, r, res->msg, sizeof(res->msg));
		PQclear(r);
		return -1;
	}
	n = PQntuples(r);
	for (i = 0; i < n && rc == 2; i++) {
		if (store_row(r, i, row, &gw, res->msg, sizeof(res->msg)) != 0)
			continue;
		rc = audit_anchor_candidate(row, first, &best, anchor, res);
	}
	PQclear(r);
	if (rc == 2) {
		audit_anchor_missing(best, first, res);
		rc = 1;
	}
	return rc;
}

/* One gateway's chain, in a snapshot: 0 intact, 1 broken, -1 error. */
static int
store_verify_one(PGconn *c, const char *gateway, EVP_PKEY *const *pubs,
    int npubs, struct audit_verify *res)
{
	struct store_walk sw = { c, gateway };
	struct audit_val row[AUDIT_NCOLS], gw;
	struct audit_walk w;
	const char *p[1] = { gateway };
	char sql[512];
	PGresult *r;
	int i, n, rc = 0;

	audit_walk_init(&w, pubs, npubs, store_anchor, &sw, res);
	snprintf(sql, sizeof(sql), "DECLARE sg_walk NO SCROLL CURSOR FOR "
	    "SELECT %s FROM sandgate.events WHERE gateway = $1 ORDER BY id",
	    audit_store_cols);
	r = PQexecParams(c, sql, 1, NULL, p, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		goto pgerr;
	for (;;) {
		PQclear(r);
		r = PQexecParams(c, "FETCH 5000 FROM sg_walk", 0, NULL, NULL,
		    NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			goto pgerr;
		if ((n = PQntuples(r)) == 0)
			break;
		for (i = 0; i < n; i++) {
			if (store_row(r, i, row, &gw, res->msg,
			    sizeof(res->msg)) != 0) {
				res->bad_id = row[AUDIT_COL_ID].i;
				rc = 1;
				goto done;
			}
			if ((rc = audit_walk_row(&w, row)) != 0)
				goto done;
		}
	}
	audit_walk_end(&w);
done:
	PQclear(r);
	r = PQexec(c, "CLOSE sg_walk");
	PQclear(r);
	return rc;
pgerr:
	audit_pg_error(c, r, res->msg, sizeof(res->msg));
	PQclear(r);
	return -1;
}

int
audit_store_verify(const char *url, const char *gateway, EVP_PKEY *const *pubs,
    int npubs, FILE *out, FILE *errf, char *err, size_t errlen)
{
	struct audit_verify res;
	const char *p[1] = { gateway };
	char prefix[AUDIT_GATEWAY_MAX + 16];
	PGresult *gws = NULL, *r;
	PGconn *c;
	int i, n, rc = 0, one;

	if ((c = audit_pg_connect(url, err, errlen)) == NULL)
		return -1;
	/* One snapshot for every gateway: rows shipped meanwhile wait. */
	r = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		goto pgerr;
	PQclear(r);
	gws = gateway != NULL ? PQexecParams(c, "SELECT DISTINCT gateway FROM "
	    "sandgate.events WHERE gateway = $1", 1, NULL, p, NULL, NULL, 0) :
	    PQexec(c, "SELECT DISTINCT gateway FROM sandgate.events ORDER BY 1");
	r = NULL;
	if (PQresultStatus(gws) != PGRES_TUPLES_OK) {
		r = gws;
		gws = NULL;
		goto pgerr;
	}
	if ((n = PQntuples(gws)) == 0)
		fprintf(out, "ok: no rows%s%s in the store\n", gateway ?
		    " of gateway " : "", gateway ? gateway : "");
	for (i = 0; i < n; i++) {
		const char *name = PQgetvalue(gws, i, 0);

		snprintf(prefix, sizeof(prefix), "gateway %s: ", name);
		one = store_verify_one(c, name, pubs, npubs, &res);
		if (one == -1) {
			snprintf(err, errlen, "gateway %s: %s", name, res.msg);
			rc = -1;
			break;
		}
		if (one == 1) {
			fprintf(errf, "sandgate: audit verify: gateway %s: row %"
			    PRId64 ": %s\n", name, res.bad_id, res.msg);
			rc = 1;
			continue;
		}
		audit_verify_report(out, prefix, &res);
	}
	PQclear(gws);
	PQfinish(c);
	return rc;
pgerr:
	audit_pg_error(c, r, err, errlen);
	PQclear(r);
	PQfinish(c);
	return -1;
}
