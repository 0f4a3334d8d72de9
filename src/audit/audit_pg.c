/*
 * PostgreSQL for the fleet store: connection parameters, the schema and
 * its migration (`sandgate audit ship --init`), and the form a row of
 * audit.db takes in sandgate.events (audit_pg.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "audit/audit_int.h"
#include "audit/audit_pg.h"
#include "audit/audit_store.h"

const char audit_pg_insert_cols[] =
    "gateway, id, ts, sandbox, kind, client, host, ip, port, country, asn, "
    "method, path, status, decision, rule, reason, credential, bytes_up, "
    "bytes_down, duration_ms, prev_hash, hash, raw";
const char audit_store_cols[] =
    "id, ts, sandbox, kind, client, host, ip, port, country, asn, "
    "method, path, status, decision, rule, reason, credential, bytes_up, "
    "bytes_down, duration_ms, prev_hash, hash, gateway, raw";

/*
 * GSSAPI stays off whatever the URL says: Kerberos may reach for the
 * kernel keyring, which the network process's seccomp filter kills for.
 */
void
audit_pg_params(const char *url, const char *kw[AUDIT_PG_NKW + 1],
    const char *val[AUDIT_PG_NKW + 1])
{
	kw[0] = "connect_timeout";
	val[0] = "10";
	kw[1] = "application_name";
	val[1] = "sandgate";
	kw[2] = "dbname";
	val[2] = url;
	kw[3] = "gssencmode";
	val[3] = "disable";
	kw[4] = NULL;
	val[4] = NULL;
}

const char *
audit_pg_error(PGconn *c, const PGresult *r, char *buf, size_t len)
{
	const char *m = r != NULL ? PQresultErrorMessage(r) : NULL;
	size_t i, o = 0;
	int space = 0;

	if (m == NULL || *m == '\0')
		m = c != NULL ? PQerrorMessage(c) : "out of memory";
	/* libpq's messages have several lines, tab-indented: make them one. */
	for (i = 0; m[i] != '\0' && o + 1 < len; i++) {
		if (m[i] == '\n' || m[i] == '\t' || m[i] == '\r' || m[i] == ' ') {
			space = o > 0;
			continue;
		}
		if (space && o + 2 < len)
			buf[o++] = ' ';
		space = 0;
		buf[o++] = m[i];
	}
	buf[o] = '\0';
	return buf;
}

/* NOTICEs ("already exists, skipping") are not for the user's terminal. */
static void
pg_notice_cb(void *arg, const char *msg)
{
}

void
audit_pg_quiet(PGconn *c)
{
	PQsetNoticeProcessor(c, pg_notice_cb, NULL);
}

PGconn *
audit_pg_connect(const char *url, char *err, size_t errlen)
{
	const char *kw[AUDIT_PG_NKW + 1], *val[AUDIT_PG_NKW + 1];
	PGconn *c;

	if (audit_store_url_ok(url, err, errlen) == -1)
		return NULL;
	audit_pg_params(url, kw, val);
	if ((c = PQconnectdbParams(kw, val, 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (PQstatus(c) != CONNECTION_OK) {
		audit_pg_error(c, NULL, err, errlen);
		PQfinish(c);
		return NULL;
	}
	audit_pg_quiet(c);
	return c;
}

int
audit_pg_version(PGconn *c, int *version, char *err, size_t errlen)
{
	PGresult *r;

	*version = 0;
	r = PQexec(c, "SELECT to_regclass('sandgate.meta') IS NOT NULL");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto fail;
	if (strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
		PQclear(r);
		return 0;
	}
	PQclear(r);
	r = PQexec(c, "SELECT value FROM sandgate.meta WHERE key = "
	    "'schema_version'");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	if (PQntuples(r) == 1)
		*version = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return 0;
fail:
	audit_pg_error(c, r, err, errlen);
	PQclear(r);
	return -1;
}

/* ----------------------------------------------------------- schema */

/*
 * Version 1. The columns are events' (docs/audit.md), typed as the writer
 * stores them, plus the gateway, raw (above) and when the row arrived.
 */
static const char schema_v1[] =
    "CREATE SCHEMA IF NOT EXISTS sandgate;"
    "CREATE TABLE IF NOT EXISTS sandgate.meta (key text PRIMARY KEY,"
    " value text NOT NULL);"
    "CREATE TABLE IF NOT EXISTS sandgate.events ("
    " gateway text NOT NULL, id bigint NOT NULL, ts text, sandbox text,"
    " kind text, client text, host text, ip text, port bigint,"
    " country text, asn bigint, method text, path text, status bigint,"
    " decision text, rule text, reason text, credential text,"
    " bytes_up bigint, bytes_down bigint, duration_ms bigint,"
    " prev_hash text, hash text, raw bytea,"
    " shipped_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (gateway, id));"
    "CREATE INDEX IF NOT EXISTS events_ts ON sandgate.events (ts);"
    "CREATE INDEX IF NOT EXISTS events_sandbox ON sandgate.events"
    " (sandbox, ts);"
    "CREATE INDEX IF NOT EXISTS events_decision ON sandgate.events"
    " (decision, ts);"
    "CREATE INDEX IF NOT EXISTS events_host ON sandgate.events (host, ts);"
    "INSERT INTO sandgate.meta VALUES ('schema_version', '1')"
    " ON CONFLICT (key) DO NOTHING;";

static int
exec_ok(PGconn *c, const char *sql, char *msg, size_t msglen)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		audit_pg_error(c, r, msg, msglen);
	PQclear(r);
	return ok ? 0 : -1;
}

int
audit_store_init(const char *url, char *msg, size_t msglen)
{
	PGconn *c;
	int v, rc = -1;

	if ((c = audit_pg_connect(url, msg, msglen)) == NULL)
		return -1;
	/* One host at a time; the lock ends with the transaction. */
	if (exec_ok(c, "BEGIN; SELECT pg_advisory_xact_lock(7236915);", msg,
	    msglen) == -1 || audit_pg_version(c, &v, msg, msglen) == -1)
		goto done;
	if (v > AUDIT_STORE_VERSION) {
		snprintf(msg, msglen, "the store's schema is version %d, newer "
		    "than this sandgate knows (%d): not changed", v,
		    AUDIT_STORE_VERSION);
		goto done;
	}
	if (v == AUDIT_STORE_VERSION) {
		snprintf(msg, msglen, "schema sandgate is up to date (version "
		    "%d)", v);
		rc = 0;
		goto done;
	}
	if (exec_ok(c, schema_v1, msg, msglen) == -1 ||
	    exec_ok(c, "COMMIT", msg, msglen) == -1)
		goto done;
	snprintf(msg, msglen, "schema sandgate created (version %d): tables "
	    "sandgate.events, sandgate.meta", AUDIT_STORE_VERSION);
	rc = 0;
done:
	PQfinish(c);	/* without COMMIT: rolled back */
	return rc;
}

/* ------------------------------------------------------ the row's form */

/* Text with every byte that is not UTF-8 (and NUL) as U+FFFD; 1 if changed. */
static char *
text_lossy(const unsigned char *p, size_t n, int *changed)
{
	char *out, *o;
	size_t i = 0, k;

	*changed = 0;
	if ((out = malloc(3 * n + 1)) == NULL)
		return NULL;
	o = out;
	while (i < n) {
		if (p[i] != 0 && (k = audit_utf8_seq(p + i, n - i)) != 0) {
			memcpy(o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		memcpy(o, "\xef\xbf\xbd", 3);
		o += 3;
		i++;
		*changed = 1;
	}
	*o = '\0';
	return out;
}

int
audit_pg_col_text(const struct audit_val *v, int is_int, char **out,
    int *exact)
{
	char buf[32];
	int changed;

	*out = NULL;
	*exact = 1;
	switch (v->type) {
	case AUDIT_V_NULL:
		return 0;
	case AUDIT_V_INT:
		snprintf(buf, sizeof(buf), "%" PRId64, v->i);
		*exact = is_int;
		break;
	case AUDIT_V_TEXT:
		if (is_int) {
			*exact = 0;
			return 0;
		}
		if ((*out = text_lossy(v->p, v->len, &changed)) == NULL)
			return -1;
		*exact = !changed;
		return 0;
	case AUDIT_V_REAL:
		*exact = 0;
		if (is_int)
			return 0;
		snprintf(buf, sizeof(buf), "%.17g", v->r);
		break;
	default:
		*exact = 0;
		return 0;
	}
	return (*out = strdup(buf)) == NULL ? -1 : 0;
}

int
audit_pg_row_build(const struct audit_val *row, struct audit_pg_row *pr)
{
	size_t need;
	int c, exact, all = 1;

	memset(pr, 0, sizeof(*pr));
	for (c = 0; c < AUDIT_NCOLS; c++) {
		if (audit_pg_col_text(&row[c], audit_col_is_int[c], &pr->col[c],
		    &exact) == -1)
			goto fail;
		if (c < AUDIT_NHASHED && !exact)
			all = 0;
	}
	if (all)
		return 0;
	need = audit_encode_row(row, NULL, 0);
	if ((pr->raw = malloc(need)) == NULL)
		goto fail;
	pr->raw_len = audit_encode_row(row, pr->raw, need);
	return 0;
fail:
	audit_pg_row_free(pr);
	return -1;
}

void
audit_pg_row_free(struct audit_pg_row *pr)
{
	int c;

	for (c = 0; c < AUDIT_NCOLS; c++)
		free(pr->col[c]);
	free(pr->raw);
	memset(pr, 0, sizeof(*pr));
}

/* postgresql://user:password@host...: a ':' in the userinfo. */
static int
url_has_password(const char *url)
{
	const char *p = strstr(url, "://"), *at, *end;

	if (p == NULL)
		return 0;
	p += 3;
	end = p + strcspn(p, "/?#");
	if ((at = memchr(p, '@', (size_t)(end - p))) == NULL)
		return 0;
	return memchr(p, ':', (size_t)(at - p)) != NULL;
}

int
audit_store_url_ok(const char *url, char *err, size_t errlen)
{
	PQconninfoOption *o;
	char *msg = NULL;

	if (strncmp(url, "postgresql://", 13) != 0 &&
	    strncmp(url, "postgres://", 11) != 0) {
		snprintf(err, errlen, "expected a postgresql:// URL");
		return -1;
	}
	if ((o = PQconninfoParse(url, &msg)) == NULL) {
		/* libpq quotes the part it choked on, which may be the password. */
		if (url_has_password(url))
			snprintf(err, errlen, "libpq cannot parse the URL (its "
			    "message is not shown: the URL holds a password)");
		else
			snprintf(err, errlen, "%s", msg != NULL ? msg :
			    "out of memory");
		if (msg != NULL) {
			size_t n = strlen(err);

			while (n > 0 && err[n - 1] == '\n')
				err[--n] = '\0';
		}
		PQfreemem(msg);
		return -1;
	}
	PQconninfoFree(o);
	return 0;
}
