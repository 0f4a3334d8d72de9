/*
 * The audit log's queries: filters turned into SQL with every value a bound
 * parameter, the read-only database and its schema check, and the loop
 * that hands matching rows to an output format (audit_output.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"

/* ------------------------------------------------------- vocabularies */

static int
in_words(const char *const *words, const char *s)
{
	for (; *words != NULL; words++)
		if (strcmp(*words, s) == 0)
			return 1;
	return 0;
}

const char *const audit_kinds[] = { "http", "connect", "socks5", "dns",
    "transparent", "ingress", "admin", "vault", NULL };

int
audit_valid_kind(const char *s)
{
	return s != NULL && in_words(audit_kinds, s);
}

int
audit_parse_kinds(const char *list, unsigned *in, unsigned *out, char *bad,
    size_t badlen)
{
	const char *p = list, *end;
	size_t n, i;
	int neg;

	*in = *out = 0;
	for (;;) {
		end = p + strcspn(p, ",");
		neg = *p == '-';
		n = (size_t)(end - p) - (size_t)neg;
		for (i = 0; audit_kinds[i] != NULL; i++)
			if (strlen(audit_kinds[i]) == n &&
			    strncmp(audit_kinds[i], p + neg, n) == 0)
				break;
		if (audit_kinds[i] == NULL) {
			snprintf(bad, badlen, "%.*s", (int)(end - p), p);
			return -1;
		}
		if (neg)
			*out |= AUDIT_KIND_BIT(i);
		else
			*in |= AUDIT_KIND_BIT(i);
		if (*end == '\0')
			return 0;
		p = end + 1;
	}
}

int
audit_valid_decision(const char *s)
{
	static const char *const decisions[] = { "allow", "deny", "report", "error",
	    NULL };

	return s != NULL && in_words(decisions, s);
}

/* ------------------------------------------------------- filter -> SQL */

int
audit_glob_lower(const char *in, char *out, size_t outlen)
{
	size_t i, n = strlen(in);

	if (n >= outlen)
		return -1;
	for (i = 0; i < n; i++)
		out[i] = in[i] >= 'A' && in[i] <= 'Z' ? in[i] - 'A' + 'a' : in[i];
	out[n] = '\0';
	return 0;
}

/* The index of the "]" that ends the class at g[0] == '[', or 0. */
static size_t
glob_class_end(const char *g)
{
	size_t j = 1;

	if (g[j] == '^')
		j++;
	if (g[j] == ']')
		j++;
	while (g[j] != '\0' && g[j] != ']')
		j++;
	return g[j] == ']' ? j : 0;
}

int
audit_glob_to_regex(const char *glob, char *out, size_t outlen)
{
	size_t o = 0, i, j;
	const char *g = glob;

#define PUT(c) do { if (o + 1 >= outlen) return -1; out[o++] = (c); } while (0)
	PUT('^');
	while (*g != '\0') {
		if (*g == '*') {
			PUT('.');
			PUT('*');
		} else if (*g == '?')
			PUT('.');
		else if (*g == '[' && (j = glob_class_end(g)) > 0) {
			/* A class, as SQLite reads it: "^" negates, a "]" first is literal. */
			i = 1;
			PUT('[');
			if (g[i] == '^') {
				PUT('^');
				i++;
			}
			if (g[i] == ']') {
				PUT('\\');
				PUT(']');
				i++;
			}
			for (; i < j; i++) {
				if (g[i] == '\\' || g[i] == '[')
					PUT('\\');
				PUT(g[i]);
			}
			PUT(']');
			g += i;
		} else if ((*g >= 'a' && *g <= 'z') || (*g >= 'A' && *g <= 'Z') ||
		    (*g >= '0' && *g <= '9') || (unsigned char)*g >= 0x80)
			PUT(*g);
		else {
			PUT('\\');
			PUT(*g);
		}
		g++;
	}
	PUT('$');
#undef PUT
	out[o] = '\0';
	return 0;
}

struct sqlb {
	struct audit_sql	*q;
	size_t			 len;
	int			 overflow;
	int			 n_where;
	int			 pg;
};

static void
sqlb_add(struct sqlb *b, const char *s)
{
	size_t n = strlen(s);

	if (b->len + n >= sizeof(b->q->text)) {
		b->overflow = 1;
		return;
	}
	memcpy(b->q->text + b->len, s, n + 1);
	b->len += n;
}

/* The next parameter's placeholder: ? for SQLite, $N for PostgreSQL. */
static void
sqlb_param(struct sqlb *b)
{
	char ph[16];

	snprintf(ph, sizeof(ph), "$%d", b->q->n_binds);
	sqlb_add(b, b->pg ? ph : "?");
}

/* "AND <cond> <placeholder>", binding the value. */
static int
sqlb_where(struct sqlb *b, const char *cond, const char *sval, int is_int,
    int64_t ival)
{
	struct audit_bind *bd;

	if (b->q->n_binds >= AUDIT_MAX_BINDS)
		return -1;
	bd = &b->q->binds[b->q->n_binds++];
	bd->is_int = is_int;
	bd->i = ival;
	if (!is_int) {
		if (strlen(sval) >= sizeof(bd->s))
			return -1;
		strcpy(bd->s, sval);
	}
	sqlb_add(b, b->n_where++ == 0 ? " WHERE " : " AND ");
	sqlb_add(b, cond);
	sqlb_param(b);
	return 0;
}

static int
sqlb_where_ts(struct sqlb *b, const char *cond, int64_t ms)
{
	char ts[AUDIT_TS_LEN + 1];

	/* Out-of-range times clamp to the ends of the format's range. */
	if (ms < AUDIT_TS_MIN_MS)
		ms = AUDIT_TS_MIN_MS;
	if (ms > AUDIT_TS_MAX_MS)
		ms = AUDIT_TS_MAX_MS;
	if (audit_format_ts(ms, ts, sizeof(ts)) == -1)
		return -1;
	return sqlb_where(b, cond, ts, 0, 0);
}

static int
sqlb_host(struct sqlb *b, const char *host_glob)
{
	char glob[AUDIT_GLOB_MAX], re[AUDIT_GLOB_MAX];

	if (audit_glob_lower(host_glob, glob, sizeof(glob)) == -1)
		return -1;
	if (!b->pg)
		return sqlb_where(b, "host GLOB ", glob, 0, 0);
	if (audit_glob_to_regex(glob, re, sizeof(re)) == -1)
		return -1;
	return sqlb_where(b, "host ~ ", re, 0, 0);
}

/*
 * "AND kind [NOT] IN ('a', 'b')": the words are the fixed vocabulary's,
 * never the caller's text, so they are written in place.
 */
static void
sqlb_kinds(struct sqlb *b, const char *cond, unsigned set)
{
	size_t i;
	int n = 0;

	sqlb_add(b, b->n_where++ == 0 ? " WHERE " : " AND ");
	sqlb_add(b, cond);
	for (i = 0; audit_kinds[i] != NULL; i++) {
		if (!(set & AUDIT_KIND_BIT(i)))
			continue;
		sqlb_add(b, n++ ? ", '" : "'");
		sqlb_add(b, audit_kinds[i]);
		sqlb_add(b, "'");
	}
	sqlb_add(b, ")");
}

int
audit_build_select(const struct audit_filter *f, struct audit_sql *q,
    const char **errstr)
{
	struct sqlb b;
	int rc = 0;

	memset(q, 0, sizeof(*q));
	memset(&b, 0, sizeof(b));
	b.q = q;
	b.pg = f->store;
	sqlb_add(&b, "SELECT ");
	sqlb_add(&b, b.pg ? audit_store_cols : audit_col_list);
	sqlb_add(&b, b.pg ? " FROM sandgate.events" : " FROM events");
	if (b.pg && f->gateway != NULL)
		rc |= sqlb_where(&b, "gateway = ", f->gateway, 0, 0);
	if (f->sandbox != NULL)
		rc |= sqlb_where(&b, "sandbox = ", f->sandbox, 0, 0);
	if (f->has_since)
		rc |= sqlb_where_ts(&b, "ts >= ", f->since_ms);
	if (f->has_until)
		rc |= sqlb_where_ts(&b, "ts < ", f->until_ms);
	if (f->decision != NULL)
		rc |= sqlb_where(&b, "decision = ", f->decision, 0, 0);
	if (f->kind != NULL)
		rc |= sqlb_where(&b, "kind = ", f->kind, 0, 0);
	if (f->kinds_in != 0)
		sqlb_kinds(&b, "kind IN (", f->kinds_in);
	if (f->kinds_out != 0)
		sqlb_kinds(&b, "kind NOT IN (", f->kinds_out);
	if (f->host_glob != NULL)
		rc |= sqlb_host(&b, f->host_glob);
	if (f->credential != NULL)
		rc |= sqlb_where(&b, "credential = ", f->credential, 0, 0);
	if (f->after_id > 0)
		rc |= sqlb_where(&b, "id > ", NULL, 1, f->after_id);
	if (f->upto_id > 0)
		rc |= sqlb_where(&b, "id <= ", NULL, 1, f->upto_id);
	if (f->by_id)
		sqlb_add(&b, f->asc ? " ORDER BY id ASC" :
		    " ORDER BY id DESC");
	else if (b.pg)
		sqlb_add(&b, f->asc ? " ORDER BY ts ASC, gateway ASC, id ASC" :
		    " ORDER BY ts DESC, gateway DESC, id DESC");
	else
		sqlb_add(&b, f->asc ? " ORDER BY ts ASC, id ASC" :
		    " ORDER BY ts DESC, id DESC");
	if (f->limit > 0) {
		struct audit_bind *bd;

		if (q->n_binds >= AUDIT_MAX_BINDS)
			rc = -1;
		else {
			bd = &q->binds[q->n_binds++];
			bd->is_int = 1;
			bd->i = f->limit > INT64_MAX ? INT64_MAX :
			    (int64_t)f->limit;
			sqlb_add(&b, " LIMIT ");
			sqlb_param(&b);
		}
	}
	if (rc != 0 || b.overflow) {
		*errstr = "filter value too long";
		return -1;
	}
	return 0;
}

int
audit_bind_sql(sqlite3_stmt *st, const struct audit_sql *q)
{
	int i, rc;

	for (i = 0; i < q->n_binds; i++) {
		if (q->binds[i].is_int)
			rc = sqlite3_bind_int64(st, i + 1, q->binds[i].i);
		else
			rc = sqlite3_bind_text(st, i + 1, q->binds[i].s, -1,
			    SQLITE_STATIC);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

/* ---------------------------------------------------------- database */

/* PRAGMA user_version, and whether table events exists; -1 on error. */
static int
audit_schema_version(sqlite3 *db, int *has_events)
{
	sqlite3_stmt *st = NULL;
	int version = -1;

	*has_events = 0;
	if (sqlite3_prepare_v2(db, "SELECT (SELECT user_version FROM "
	    "pragma_user_version), EXISTS (SELECT 1 FROM sqlite_master WHERE "
	    "type = 'table' AND name = 'events')", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		version = sqlite3_column_int(st, 0);
		*has_events = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	return version;
}

struct sqlite3 *
audit_db_open_ro(const char *path, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	struct stat st;
	int rc, version, has_events;

	if (stat(path, &st) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path,
		    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	if ((rc = sqlite3_busy_timeout(db, 5000)) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	/* Readers never migrate: say what to do with a file of another age. */
	if ((version = audit_schema_version(db, &has_events)) == -1) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	if (!has_events || version != AUDIT_SCHEMA_VERSION) {
		if (!has_events)
			snprintf(err, errlen, "%s: not a sandgate audit database "
			    "(no table events)", path);
		else if (version < AUDIT_SCHEMA_VERSION)
			snprintf(err, errlen, "%s: schema version %d is older "
			    "than this sandgate's (%d); `sandgate serve` "
			    "upgrades it", path, version, AUDIT_SCHEMA_VERSION);
		else
			snprintf(err, errlen, "%s: schema version %d is newer "
			    "than this sandgate's (%d)", path, version,
			    AUDIT_SCHEMA_VERSION);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

sqlite3_stmt *
audit_prepare(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

int64_t
audit_query(sqlite3 *db, const struct audit_filter *flt,
    enum audit_format fmt, FILE *out, int64_t *last_id, char *err,
    size_t errlen)
{
	struct audit_sql q;
	struct audit_val row[AUDIT_NCOLS];
	struct audit_table *t = NULL;
	sqlite3_stmt *st = NULL;
	const char *errstr;
	int64_t n = 0;
	int rc, c;

	if (audit_build_select(flt, &q, &errstr) == -1) {
		snprintf(err, errlen, "%s", errstr);
		return -1;
	}
	if ((st = audit_prepare(db, q.text, err, errlen)) == NULL)
		return -1;
	if (audit_bind_sql(st, &q) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		goto fail;
	}
	if (fmt == AUDIT_FMT_TABLE && (t = audit_table_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (fmt == AUDIT_FMT_CSV)
		audit_write_csv_header(out);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &row[c]);
		if (fmt == AUDIT_FMT_JSON)
			audit_write_json(out, row);
		else if (fmt == AUDIT_FMT_OCSF)
			audit_write_ocsf(out, row);
		else if (fmt == AUDIT_FMT_CSV)
			audit_write_csv(out, row);
		else
			audit_table_row(out, t, row);
		if (last_id != NULL)
			*last_id = row[AUDIT_COL_ID].i;
		n++;
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		goto fail;
	}
	if (fmt == AUDIT_FMT_TABLE)
		audit_table_end(out, t);
	audit_table_free(t);
	sqlite3_finalize(st);
	return n;
fail:
	audit_table_free(t);
	sqlite3_finalize(st);
	return -1;
}

int64_t
audit_max_id(sqlite3 *db, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int64_t id = -1;
	int rc;

	if ((st = audit_prepare(db, "SELECT ifnull(max(id), 0) FROM events",
	    err, errlen)) == NULL)
		return -1;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	else
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return id;
}
