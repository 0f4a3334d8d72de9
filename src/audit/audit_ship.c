/*
 * The shipper (audit.ship): one thread of the network process that copies
 * audit.db's rows, in id order, into the fleet store's sandgate.events with
 * idempotent inserts. It owns a read-only SQLite connection of its own and
 * one libpq connection, used asynchronously so that stopping never waits
 * for the network. Its cursor is the store itself: the highest id it holds
 * for this gateway, read at every (re)connection (docs/fleet.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "audit/audit_int.h"
#include "audit/audit_pg.h"
#include "audit/audit_store.h"
#include "core/log.h"

#define SHIP_BATCH		500	/* rows per INSERT: 12,000 parameters */
#define SHIP_IDLE_MS		250	/* poll audit.db this often when caught up */
#define SHIP_RETRY_MIN_MS	250
#define SHIP_RETRY_MAX_MS	5000
#define SHIP_CONNECT_MS		10000
#define SHIP_QUERY_MS		30000
#define SHIP_DRAIN_MS		2000	/* at stop: ship what is left, this long */

struct audit_ship {
	pthread_t		 thread;
	int			 started;
	int			 wake[2];	/* written once: drain, then stop */
	double			 drain_until;	/* 0: not stopping */
	sqlite3			*db;
	sqlite3_stmt		*rows;		/* id > ? ORDER BY id LIMIT */
	char			*url;
	char			*gateway;
	PGconn			*conn;
	int64_t			 cursor;	/* the store holds rows through */
	int			 retry_ms;
	double			 down_since;	/* 0 while connected */
	pthread_mutex_t		 mtx;
	struct audit_ship_stats	 st;		/* under mtx */
};

static double
ship_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * Wait until fd is ready for events, the deadline passes or it is time to
 * stop (the drain's time is up): 1 ready, 0 timed out, -1 stop.
 */
static int
ship_wait(struct audit_ship *s, int fd, short events, double deadline)
{
	struct pollfd p[2];
	double left, now;
	char b;
	int n;

	for (;;) {
		now = ship_now_ms();
		if (s->drain_until != 0 && now >= s->drain_until)
			return -1;
		if (s->drain_until != 0 && deadline > s->drain_until)
			deadline = s->drain_until;
		left = deadline - now;
		if (left < 0)
			left = 0;
		p[0].fd = s->wake[0];
		p[0].events = POLLIN;
		p[1].fd = fd;
		p[1].events = events;
		p[0].revents = p[1].revents = 0;
		n = poll(p, fd >= 0 ? 2 : 1, (int)left);
		if (n == -1 && errno == EINTR)
			continue;
		if (p[0].revents != 0) {
			/* The rows of the last moments go out before it stops. */
			if (read(s->wake[0], &b, 1) == 1 && s->drain_until == 0)
				s->drain_until = ship_now_ms() + SHIP_DRAIN_MS;
			continue;
		}
		if (n > 0 && p[1].revents != 0)
			return 1;
		if (n == 0 || left == 0)
			return 0;
	}
}

static void
ship_set(struct audit_ship *s, int connected, int failed)
{
	pthread_mutex_lock(&s->mtx);
	s->st.connected = connected;
	if (failed)
		s->st.failures++;
	pthread_mutex_unlock(&s->mtx);
}

static void
ship_disconnect(struct audit_ship *s, const char *why)
{
	if (s->down_since == 0) {
		s->down_since = ship_now_ms();
		log_warnx("audit ship: cannot ship to the fleet store (%s); rows "
		    "wait in audit.db and are shipped once it takes them", why);
	}
	PQfinish(s->conn);
	s->conn = NULL;
	ship_set(s, 0, 1);
}

/* Connect without blocking: 0 connected, -1 failed (logged), -2 stop. */
static int
ship_connect(struct audit_ship *s)
{
	const char *kw[AUDIT_PG_NKW + 1], *val[AUDIT_PG_NKW + 1];
	PostgresPollingStatusType ps = PGRES_POLLING_WRITING;
	double deadline = ship_now_ms() + SHIP_CONNECT_MS;
	char err[256];
	int w;

	audit_pg_params(s->url, kw, val);
	if ((s->conn = PQconnectStartParams(kw, val, 1)) == NULL ||
	    PQstatus(s->conn) == CONNECTION_BAD)
		goto fail;
	while (ps != PGRES_POLLING_OK) {
		if (ps == PGRES_POLLING_FAILED)
			goto fail;
		w = ship_wait(s, PQsocket(s->conn), ps ==
		    PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
		if (w == -1)
			return -2;
		if (w == 0) {
			snprintf(err, sizeof(err), "connection timed out");
			ship_disconnect(s, err);
			return -1;
		}
		ps = PQconnectPoll(s->conn);
	}
	if (PQsetnonblocking(s->conn, 1) == -1)
		goto fail;
	audit_pg_quiet(s->conn);
	return 0;
fail:
	ship_disconnect(s, audit_pg_error(s->conn, NULL, err, sizeof(err)));
	return -1;
}

/*
 * One statement, asynchronously: its last result, or NULL after the
 * connection was dropped (logged) or stop was asked (*stop).
 */
static PGresult *
ship_exec(struct audit_ship *s, const char *sql, int n,
    const char *const *vals, const int *lens, const int *fmts, int *stop)
{
	double deadline = ship_now_ms() + SHIP_QUERY_MS;
	PGresult *r, *last = NULL;
	char err[256];
	int f, w;

	*stop = 0;
	if (!PQsendQueryParams(s->conn, sql, n, NULL, vals, lens, fmts, 0))
		goto fail;
	while ((f = PQflush(s->conn)) == 1) {
		if ((w = ship_wait(s, PQsocket(s->conn), POLLOUT | POLLIN,
		    deadline)) != 1)
			goto waited;
		if (!PQconsumeInput(s->conn))
			goto fail;
	}
	if (f == -1)
		goto fail;
	for (;;) {
		while (PQisBusy(s->conn)) {
			if ((w = ship_wait(s, PQsocket(s->conn), POLLIN,
			    deadline)) != 1)
				goto waited;
			if (!PQconsumeInput(s->conn))
				goto fail;
		}
		if ((r = PQgetResult(s->conn)) == NULL)
			break;
		PQclear(last);
		last = r;
	}
	if (PQstatus(s->conn) == CONNECTION_BAD)
		goto fail;
	return last;
waited:
	PQclear(last);
	if (w == -1) {
		*stop = 1;
		return NULL;
	}
	ship_disconnect(s, "no answer within 30 s");
	return NULL;
fail:
	ship_disconnect(s, audit_pg_error(s->conn, last, err, sizeof(err)));
	PQclear(last);
	return NULL;
}

/* The hash of audit.db's row id into out; 1 found, 0 absent, -1 error. */
static int
ship_local_hash(struct audit_ship *s, int64_t id, char *out, size_t len)
{
	sqlite3_stmt *st;
	int rc, found = 0;

	if (sqlite3_prepare_v2(s->db, "SELECT hash FROM events WHERE id = ?",
	    -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(out, len, "%s", (const char *)sqlite3_column_text(st,
		    0) ? (const char *)sqlite3_column_text(st, 0) : "");
		found = 1;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : -1;
}

/*
 * audit_pg_version's two questions, asked as every other (ship_exec: a
 * deadline, and a stop that is heard): a store that took the connection
 * and then answered nothing -- a table lock held, a silent network --
 * kept the shipper in a blocking PQexec, unreported, and serve from
 * stopping. 0 and *v (0: no schema), -1 retry later, -2 stop.
 */
static int
ship_version(struct audit_ship *s, int *v)
{
	static const char *const q[2] = {
	    "SELECT to_regclass('sandgate.meta') IS NOT NULL",
	    "SELECT value FROM sandgate.meta WHERE key = 'schema_version'" };
	char err[256];
	PGresult *r;
	int i, stop;

	*v = 0;
	for (i = 0; i < 2; i++) {
		if ((r = ship_exec(s, q[i], 0, NULL, NULL, NULL, &stop)) ==
		    NULL)
			return stop ? -2 : -1;
		if (PQresultStatus(r) != PGRES_TUPLES_OK ||
		    (i == 0 && PQntuples(r) != 1)) {
			ship_disconnect(s, audit_pg_error(s->conn, r, err,
			    sizeof(err)));
			PQclear(r);
			return -1;
		}
		if (i == 0 && strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
			PQclear(r);
			return 0;
		}
		if (i == 1 && PQntuples(r) == 1)
			*v = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	return 0;
}

/*
 * After connecting: the schema's version, and where this gateway's rows
 * end in the store -- which must be a row of this audit.db, or the name is
 * shared with another gateway (or audit.db was replaced): then shipping
 * halts rather than mixing two chains. 0 ready, -1 retry later, -2 stop,
 * -3 halted.
 */
static int
ship_resume(struct audit_ship *s)
{
	const char *p[1] = { s->gateway };
	char err[256], local[AUDIT_HASH_HEX + 8];
	PGresult *r;
	int64_t id = 0, max;
	int v, stop, found, rc;

	if ((rc = ship_version(s, &v)) != 0)
		return rc;
	if (v != AUDIT_STORE_VERSION) {
		snprintf(err, sizeof(err), "schema version %d, want %d: run "
		    "`sandgate audit ship --init`", v, AUDIT_STORE_VERSION);
		ship_disconnect(s, err);
		return -1;
	}
	if ((r = ship_exec(s, "SELECT id, hash FROM sandgate.events WHERE "
	    "gateway = $1 ORDER BY id DESC LIMIT 1", 1, p, NULL, NULL,
	    &stop)) == NULL)
		return stop ? -2 : -1;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		ship_disconnect(s, audit_pg_error(s->conn, r, err, sizeof(err)));
		PQclear(r);
		return -1;
	}
	if (PQntuples(r) == 1) {
		id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		found = ship_local_hash(s, id, local, sizeof(local));
		max = audit_max_id(s->db, err, sizeof(err));
		if (found == -1 || max == -1) {
			PQclear(r);
			ship_disconnect(s, "cannot read audit.db");
			return -1;
		}
		if ((found == 1 && strcmp(local, PQgetvalue(r, 0, 1)) != 0) ||
		    (found == 0 && max < id)) {
			log_warnx("audit ship: the fleet store holds rows through "
			    "%" PRId64 " for gateway %s that are not this "
			    "audit.db's (another gateway of the same name, or a "
			    "replaced audit.db): shipping stops; give this "
			    "gateway another audit.ship.gateway", id,
			    s->gateway);
			PQclear(r);
			return -3;
		}
	}
	PQclear(r);
	s->cursor = id;
	pthread_mutex_lock(&s->mtx);
	s->st.cursor_known = 1;
	s->st.shipped_id = id;
	s->st.connected = 1;
	pthread_mutex_unlock(&s->mtx);
	if (s->down_since != 0)
		log_info("audit ship: the fleet store takes rows again after "
		    "%.1f s; it holds gateway %s's rows through %" PRId64,
		    (ship_now_ms() - s->down_since) / 1e3, s->gateway, id);
	else
		log_info("audit ship: connected to the fleet store as gateway "
		    "%s; it holds rows through %" PRId64, s->gateway, id);
	s->down_since = 0;
	s->retry_ms = SHIP_RETRY_MIN_MS;
	return 0;
}

/* Up to SHIP_BATCH rows after the cursor, copied, and the last one's id. */
static int
ship_read(struct audit_ship *s, struct audit_pg_row *out, int64_t *last)
{
	struct audit_val row[AUDIT_NCOLS];
	int n = 0, rc, c;

	sqlite3_reset(s->rows);
	sqlite3_bind_int64(s->rows, 1, s->cursor);
	sqlite3_bind_int(s->rows, 2, SHIP_BATCH);
	while (n < SHIP_BATCH && (rc = sqlite3_step(s->rows)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(s->rows, c, &row[c]);
		if (audit_pg_row_build(row, &out[n]) == -1)
			break;
		/* id is the rowid: always an integer. */
		*last = sqlite3_column_int64(s->rows, AUDIT_COL_ID);
		n++;
	}
	sqlite3_reset(s->rows);
	return n;
}

/* The INSERT of n rows: "($1, ..., $24), (...)". NULL out of memory. */
static char *
ship_sql(int n)
{
	size_t cap = 256 + (size_t)n * AUDIT_PG_NPARAM * 9, len;
	char *sql;
	int i, k;

	if ((sql = malloc(cap)) == NULL)
		return NULL;
	len = (size_t)snprintf(sql, cap, "INSERT INTO sandgate.events (%s) "
	    "VALUES ", audit_pg_insert_cols);
	for (i = 0; i < n; i++)
		for (k = 0; k < AUDIT_PG_NPARAM; k++)
			len += (size_t)snprintf(sql + len, cap - len, "%s$%d%s",
			    k == 0 ? (i ? ",(" : "(") : "",
			    i * AUDIT_PG_NPARAM + k + 1,
			    k == AUDIT_PG_NPARAM - 1 ? ")" : ",");
	snprintf(sql + len, cap - len, " ON CONFLICT (gateway, id) DO NOTHING");
	return sql;
}

/* Ship n rows in one statement: 0, -1 (dropped, retried), -2 stop. */
static int
ship_send(struct audit_ship *s, struct audit_pg_row *rows, int n)
{
	size_t np = (size_t)n * AUDIT_PG_NPARAM;
	const char **vals = calloc(np, sizeof(*vals));
	int *lens = calloc(np, sizeof(*lens)), *fmts = calloc(np,
	    sizeof(*fmts));
	char *sql = ship_sql(n), err[256];
	PGresult *r = NULL;
	int i, c, stop = 0, rc = -1;

	if (vals == NULL || lens == NULL || fmts == NULL || sql == NULL)
		goto done;
	for (i = 0; i < n; i++) {
		const char **v = vals + (size_t)i * AUDIT_PG_NPARAM;

		v[0] = s->gateway;
		for (c = 0; c < AUDIT_NCOLS; c++)
			v[1 + c] = rows[i].col[c];
		v[AUDIT_PG_NPARAM - 1] = (const char *)rows[i].raw;
		lens[(size_t)i * AUDIT_PG_NPARAM + AUDIT_PG_NPARAM - 1] =
		    (int)rows[i].raw_len;
		fmts[(size_t)i * AUDIT_PG_NPARAM + AUDIT_PG_NPARAM - 1] = 1;
	}
	if ((r = ship_exec(s, sql, (int)np, vals, lens, fmts, &stop)) == NULL) {
		rc = stop ? -2 : -1;
		goto done;
	}
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		ship_disconnect(s, audit_pg_error(s->conn, r, err, sizeof(err)));
		goto done;
	}
	rc = 0;
done:
	PQclear(r);
	free(sql);
	free(vals);
	free(lens);
	free(fmts);
	return rc;
}

/* The backlog for the metrics: rows after the cursor and the oldest's age. */
static void
ship_backlog(struct audit_ship *s)
{
	sqlite3_stmt *st;
	char err[128];
	int64_t max = audit_max_id(s->db, err, sizeof(err)), ms = 0;
	double age = 0;

	if (max == -1)
		return;
	if (sqlite3_prepare_v2(s->db, "SELECT ts FROM events WHERE id > ? "
	    "ORDER BY id LIMIT 1", -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, s->cursor);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
	    audit_parse_rfc3339((const char *)sqlite3_column_text(st, 0),
	    &ms) == 0)
		age = (double)(audit_now_ms() - ms) / 1e3;
	sqlite3_finalize(st);
	pthread_mutex_lock(&s->mtx);
	if (s->st.cursor_known) {
		s->st.backlog_rows = max > s->cursor ? (uint64_t)(max -
		    s->cursor) : 0;
		s->st.backlog_seconds = age > 0 ? age : 0;
	}
	pthread_mutex_unlock(&s->mtx);
}

/*
 * Connect when there is no connection: 0 connected, 1 not (waited before
 * the next try), -1 stop (asked, or halted: another chain has the name).
 */
static int
ship_link(struct audit_ship *s)
{
	int rc;

	if (s->conn != NULL)
		return 0;
	if ((rc = ship_connect(s)) == 0)
		rc = ship_resume(s);
	if (rc == 0)
		return 0;
	if (rc == -2)
		return -1;
	if (rc == -3) {
		PQfinish(s->conn);
		s->conn = NULL;
		pthread_mutex_lock(&s->mtx);
		s->st.halted = 1;
		s->st.connected = 0;
		pthread_mutex_unlock(&s->mtx);
		return -1;
	}
	ship_backlog(s);
	if (ship_wait(s, -1, 0, ship_now_ms() + s->retry_ms) == -1)
		return -1;
	s->retry_ms = s->retry_ms * 2 > SHIP_RETRY_MAX_MS ? SHIP_RETRY_MAX_MS :
	    s->retry_ms * 2;
	return 1;
}

/* One round: ship a batch, or wait a little. 0 go on, -1 stop. */
static int
ship_round(struct audit_ship *s)
{
	struct audit_pg_row *rows;
	int n, i, rc;
	int64_t last = 0;

	if ((rc = ship_link(s)) != 0)
		return rc == 1 ? 0 : -1;
	if ((rows = calloc(SHIP_BATCH, sizeof(*rows))) == NULL)
		return ship_wait(s, -1, 0, ship_now_ms() + SHIP_IDLE_MS) ==
		    -1 ? -1 : 0;
	n = ship_read(s, rows, &last);
	rc = n > 0 ? ship_send(s, rows, n) : 0;
	if (n > 0 && rc == 0) {
		s->cursor = last;
		pthread_mutex_lock(&s->mtx);
		s->st.shipped_id = s->cursor;
		s->st.rows_shipped += (uint64_t)n;
		s->st.batches++;
		pthread_mutex_unlock(&s->mtx);
	}
	for (i = 0; i < n; i++)
		audit_pg_row_free(&rows[i]);
	free(rows);
	ship_backlog(s);
	if (rc == -2)
		return -1;
	if (n == SHIP_BATCH && rc == 0)
		return 0;
	if (s->drain_until != 0 && rc == 0)
		return -1;	/* stopping, and caught up */
	return ship_wait(s, -1, 0, ship_now_ms() + (rc == 0 ? SHIP_IDLE_MS :
	    s->retry_ms)) == -1 ? -1 : 0;
}

static void *
ship_thread(void *arg)
{
	struct audit_ship *s = arg;

	while (ship_round(s) == 0)
		;
	PQfinish(s->conn);
	s->conn = NULL;
	return NULL;
}

static void
ship_free(struct audit_ship *s)
{
	sqlite3_finalize(s->rows);
	if (s->db != NULL)
		sqlite3_close(s->db);
	if (s->wake[0] != -1)
		close(s->wake[0]);
	if (s->wake[1] != -1)
		close(s->wake[1]);
	pthread_mutex_destroy(&s->mtx);
	free(s->url);
	free(s->gateway);
	free(s);
}

struct audit_ship *
audit_ship_start(const char *db_path, const char *url, const char *gateway,
    const char **errstr)
{
	struct audit_ship *s;
	char sql[512], err[256];

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->mtx, NULL);
	s->retry_ms = SHIP_RETRY_MIN_MS;
	if ((s->url = strdup(url)) == NULL ||
	    (s->gateway = strdup(gateway)) == NULL ||
	    pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		*errstr = "out of memory";
		goto fail;
	}
	if ((s->db = audit_db_open_ro(db_path, err, sizeof(err))) == NULL) {
		log_warnx("audit ship: %s", err);
		*errstr = "cannot open audit.db to ship it";
		goto fail;
	}
	snprintf(sql, sizeof(sql), "SELECT %s FROM events WHERE id > ? "
	    "ORDER BY id LIMIT ?", audit_col_list);
	if ((s->rows = audit_prepare(s->db, sql, err, sizeof(err))) == NULL) {
		*errstr = "cannot prepare the shipper's query";
		goto fail;
	}
	if (pthread_create(&s->thread, NULL, ship_thread, s) != 0) {
		*errstr = "cannot start the audit shipper thread";
		goto fail;
	}
	s->started = 1;
	log_info("audit ship: shipping audit.db to the fleet store as gateway %s",
	    gateway);
	return s;
fail:
	ship_free(s);
	return NULL;
}

/*
 * Called after audit_close, so that the shutdown checkpoint is in audit.db:
 * the thread ships what is left for up to SHIP_DRAIN_MS, then stops.
 */
void
audit_ship_stop(struct audit_ship *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		/* a full pipe wakes the thread all the same */
		if (write(s->wake[1], "x", 1) != 1)
			log_debug("audit ship: wake: %s", strerror(errno));
		pthread_join(s->thread, NULL);
	}
	ship_free(s);
}

void
audit_ship_get_stats(struct audit_ship *s, struct audit_ship_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mtx);
	*out = s->st;
	pthread_mutex_unlock(&s->mtx);
}
