/*
 * The audit writer (docs/audit.md): producers copy rows into a bounded ring;
 * one thread owns the SQLite connection, creates or migrates the schema,
 * batches rows into WAL transactions, extends the hash chain, has the chain
 * head signed into checkpoint rows and applies retention. When a transaction
 * fails it keeps the rows, retries, and publishes "unavailable" until one
 * succeeds (audit.on_failure).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "audit/audit.h"
#include "audit/audit_query.h"
#include "audit/audit_syslog.h"
#include "core/log.h"
#include "core/stats.h"

#define AUDIT_QUEUE_ROWS	65536		/* ring entries */
#define AUDIT_QUEUE_BYTES	(64u << 20)	/* and at most this much copied text */
#define AUDIT_BATCH_ROWS	1000		/* rows per transaction */
#define AUDIT_BATCH_WAIT_MS	50		/* oldest queued row waits at most this */
#define AUDIT_STATS_MS		60000
#define AUDIT_RETENTION_CHUNK	10000		/* rows deleted per transaction */
#define AUDIT_STR_MAX		1024		/* bytes kept of a string field */
#define AUDIT_PATH_MAX		4096		/* ... and of the path */
#define AUDIT_CLOSE_RETRIES	20		/* failed commits before close gives up */
#define AUDIT_RETRY_MS_MIN	50		/* a failed transaction is retried after this, */
#define AUDIT_RETRY_MS_MAX	500		/* ... doubling up to this while it fails */
#define AUDIT_RETRY_LOG_EVERY	120		/* failures between "still failing" lines */

/* The string fields of a row, in column order. */
enum {
	S_SANDBOX, S_KIND, S_CLIENT, S_HOST, S_IP, S_COUNTRY, S_METHOD, S_PATH,
	S_DECISION, S_RULE, S_REASON, S_CREDENTIAL, S_NSTR
};

/* One queued row: an owned copy, strings packed after the struct. */
struct audit_row {
	int64_t		 ts_ms;
	int64_t		 port, asn, status, bytes_up, bytes_down, duration_ms;
	size_t		 size;
	const char	*s[S_NSTR];
	uint16_t	 slen[S_NSTR];
	char		 data[];
};

struct audit {
	sqlite3			*db;
	sqlite3_stmt		*ins;
	sqlite3_stmt		*head;
	char			*path;
	uint64_t		 retention_s;

	/* checkpoints: the writer thread's alone once it runs */
	uint64_t		 checkpoint_ms;
	struct audit_signer	 signer;
	EVP_PKEY		*pub;		/* checks each signature before it is stored */
	char			 key_id[AUDIT_KEYID_HEX + 1];
	int64_t			 ckpt_id;	/* the newest checkpoint row, 0: none */
	int			 ckpt_shutdown;	/* ... was written at shutdown */
	int			 dirty;		/* rows after it */

	/*
	 * The database cannot take rows: set by the writer at a failed row
	 * transaction, cleared at the next one that commits; read by anyone.
	 */
	atomic_int		 unavailable;
	int			 on_failure_allow;
	double			 unavail_since;	/* writer's: when it began */
	int			 close_gave_up;	/* writer's: rows are given up at shutdown */
	char			 err[192];	/* writer's: the last failure, SQLite's words */

	struct audit_syslog	*syslog;	/* audit.syslog, or NULL */

	pthread_t		 thread;
	int			 thread_started;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 nonempty;	/* writer waits */
	pthread_cond_t		 nonfull;	/* producers wait */
	struct audit_row	**ring;
	size_t			 rhead, count, bytes;
	int			 closing;
	int			 writer_idle;
	int			 waiting_producers;

	/* stats, under mtx */
	uint64_t		 rows_written, stalls, batches, lost;
	uint64_t		 checkpoints, ckpt_failures;
	uint64_t		 write_failures, episodes, dropped;
	int			 drop_logged;	/* this episode's first drop */
	size_t			 held;		/* rows in the transaction being tried */
	size_t			 high_water;
	double			 batch_ms_sum, batch_ms_max;
	struct sg_hist		 write_hist;	/* transactions of rows, retries included */
};

static const char schema_sql[] =
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " ts TEXT,"
    " sandbox TEXT, kind TEXT, client TEXT, host TEXT, ip TEXT,"
    " port INTEGER, country TEXT, asn INTEGER, method TEXT, path TEXT,"
    " status INTEGER, decision TEXT, rule TEXT, reason TEXT,"
    " credential TEXT, bytes_up INTEGER, bytes_down INTEGER,"
    " duration_ms INTEGER, prev_hash TEXT, hash TEXT)";

/*
 * Each index leads with its column and ends in ts, so that a filter plus a
 * time range is one index range already in "newest first" order.
 */
static const char index_sql[] =
    "CREATE INDEX IF NOT EXISTS events_ts ON events(ts);"
    "CREATE INDEX IF NOT EXISTS events_sandbox ON events(sandbox, ts);"
    /* "What did this sandbox get denied": the security team's first question. */
    "CREATE INDEX IF NOT EXISTS events_sandbox_decision ON "
    "events(sandbox, decision, ts);"
    "CREATE INDEX IF NOT EXISTS events_decision ON events(decision, ts);"
    "CREATE INDEX IF NOT EXISTS events_host ON events(host, ts);";

static double
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_warnx("audit: %.60s...: %s", sql, msg ? msg : "error");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- rows */

static struct audit_row *
row_new(const struct audit_event *ev)
{
	const char *in[S_NSTR] = {
		ev->sandbox, ev->kind, ev->client, ev->host, ev->ip,
		ev->country, ev->method, ev->path, verdict_word(ev->decision),
		ev->rule,
		ev->reason, ev->credential,
	};
	size_t len[S_NSTR], total = 0, i, j, cap;
	struct audit_row *r;
	char *p;

	for (i = 0; i < S_NSTR; i++) {
		cap = i == S_PATH ? AUDIT_PATH_MAX : AUDIT_STR_MAX;
		len[i] = in[i] ? strnlen(in[i], cap) : 0;
		total += in[i] ? len[i] + 1 : 0;
	}
	if ((r = malloc(sizeof(*r) + total)) == NULL)
		return NULL;
	r->size = sizeof(*r) + total;
	r->ts_ms = ev->ts_ms;
	if (r->ts_ms <= 0) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		r->ts_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	r->port = ev->port;
	r->asn = ev->asn;
	r->status = ev->status;
	r->bytes_up = ev->bytes_up;
	r->bytes_down = ev->bytes_down;
	r->duration_ms = ev->duration_ms;
	p = r->data;
	for (i = 0; i < S_NSTR; i++) {
		r->s[i] = NULL;
		r->slen[i] = (uint16_t)len[i];
		if (in[i] == NULL)
			continue;
		memcpy(p, in[i], len[i]);
		/* Host names compare case-insensitively: store them lower-case. */
		if (i == S_HOST)
			for (j = 0; j < len[i]; j++)
				if (p[j] >= 'A' && p[j] <= 'Z')
					p[j] = p[j] - 'A' + 'a';
		p[len[i]] = '\0';
		r->s[i] = p;
		p += len[i] + 1;
	}
	return r;
}

static void
val_int(struct audit_val *v, int64_t x)
{
	memset(v, 0, sizeof(*v));
	if (x >= 0) {		/* negative numbers mean "absent" */
		v->type = AUDIT_V_INT;
		v->i = x;
	}
}

static void
val_str(struct audit_val *v, const char *s, size_t len)
{
	memset(v, 0, sizeof(*v));
	if (s != NULL) {
		v->type = AUDIT_V_TEXT;
		v->p = (const unsigned char *)s;
		v->len = len;
	}
}

/* The stored values of a row: the same array is hashed and bound. */
static void
row_vals(const struct audit_row *r, int64_t id, const char *ts,
    struct audit_val *v)
{
	static const int scol[S_NSTR] = {
		AUDIT_COL_SANDBOX, AUDIT_COL_KIND, AUDIT_COL_CLIENT,
		AUDIT_COL_HOST, AUDIT_COL_IP, AUDIT_COL_COUNTRY,
		AUDIT_COL_METHOD, AUDIT_COL_PATH, AUDIT_COL_DECISION,
		AUDIT_COL_RULE, AUDIT_COL_REASON, AUDIT_COL_CREDENTIAL,
	};
	int i;

	val_int(&v[AUDIT_COL_ID], id);
	val_str(&v[AUDIT_COL_TS], ts, AUDIT_TS_LEN);
	for (i = 0; i < S_NSTR; i++)
		val_str(&v[scol[i]], r->s[i], r->slen[i]);
	val_int(&v[AUDIT_COL_PORT], r->port);
	val_int(&v[AUDIT_COL_ASN], r->asn);
	val_int(&v[AUDIT_COL_STATUS], r->status);
	val_int(&v[AUDIT_COL_BYTES_UP], r->bytes_up);
	val_int(&v[AUDIT_COL_BYTES_DOWN], r->bytes_down);
	val_int(&v[AUDIT_COL_DURATION_MS], r->duration_ms);
}

/* ---------------------------------------------------------- the chain */

/* The last row's id and hash (0 and the zero hash for an empty table). */
static int
chain_head(struct audit *a, int64_t *id, char hash[AUDIT_HASH_HEX + 1])
{
	const unsigned char *h;
	int rc;

	*id = 0;
	memcpy(hash, audit_zero_hash, AUDIT_HASH_HEX + 1);
	rc = sqlite3_step(a->head);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(a->head, 0);
		h = sqlite3_column_text(a->head, 1);
		if (h == NULL || sqlite3_column_bytes(a->head, 1) !=
		    AUDIT_HASH_HEX) {
			log_warnx("audit: row %" PRId64 " has no valid hash; "
			    "the chain continues from it as stored", *id);
			if (h != NULL)
				snprintf(hash, AUDIT_HASH_HEX + 1, "%s", h);
		} else
			memcpy(hash, h, AUDIT_HASH_HEX + 1);
		rc = SQLITE_DONE;
	}
	sqlite3_reset(a->head);
	if (rc != SQLITE_DONE) {
		log_warnx("audit: reading the chain head: %s",
		    sqlite3_errmsg(a->db));
		return -1;
	}
	return 0;
}

/* Insert one row after (*id, hash) and advance them. */
static int
insert_row(struct audit *a, const struct audit_row *r, int64_t *id,
    char hash[AUDIT_HASH_HEX + 1])
{
	struct audit_val v[AUDIT_NCOLS];
	char ts[AUDIT_TS_LEN + 1], h[AUDIT_HASH_HEX + 1];
	int i, rc = SQLITE_OK;

	if (audit_format_ts(r->ts_ms, ts, sizeof(ts)) == -1)
		(void)audit_format_ts(audit_now_ms(), ts, sizeof(ts));
	row_vals(r, *id + 1, ts, v);
	if (audit_chain_hash(hash, v, h) == -1) {
		log_warnx("audit: SHA-256 failed");
		snprintf(a->err, sizeof(a->err), "SHA-256 failed");
		return -1;
	}
	val_str(&v[AUDIT_COL_PREV_HASH], hash, AUDIT_HASH_HEX);
	val_str(&v[AUDIT_COL_HASH], h, AUDIT_HASH_HEX);
	for (i = 0; i < AUDIT_NCOLS && rc == SQLITE_OK; i++) {
		if (v[i].type == AUDIT_V_INT)
			rc = sqlite3_bind_int64(a->ins, i + 1, v[i].i);
		else if (v[i].type == AUDIT_V_TEXT)
			rc = sqlite3_bind_text(a->ins, i + 1,
			    (const char *)v[i].p, (int)v[i].len, SQLITE_STATIC);
		else
			rc = sqlite3_bind_null(a->ins, i + 1);
	}
	if (rc == SQLITE_OK && (rc = sqlite3_step(a->ins)) == SQLITE_DONE)
		rc = SQLITE_OK;
	if (rc != SQLITE_OK)
		snprintf(a->err, sizeof(a->err), "insert row %" PRId64 ": %s",
		    *id + 1, sqlite3_errmsg(a->db));
	sqlite3_reset(a->ins);
	sqlite3_clear_bindings(a->ins);
	if (rc != SQLITE_OK)
		return -1;
	*id += 1;
	memcpy(hash, h, sizeof(h));
	return 0;
}

/*
 * A statement of a row transaction: 0, or -1 with SQLite's words in a->err
 * (not logged: a failing disk would log it at every retry).
 */
static int
batch_sql(struct audit *a, const char *sql)
{
	if (sqlite3_exec(a->db, sql, NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	snprintf(a->err, sizeof(a->err), "%s: %s", sql, sqlite3_errmsg(a->db));
	return -1;
}

/*
 * One transaction holding rows[0..n-1]; 0, or -1 after a rollback (a->err
 * says why). Nothing of the chain is kept in memory across transactions:
 * each reads the head from the file, so a transaction that failed midway
 * leaves nothing to undo but SQLite's own rollback.
 */
static int
write_batch(struct audit *a, struct audit_row **rows, size_t n)
{
	char hash[AUDIT_HASH_HEX + 1], head[AUDIT_HASH_HEX + 1];
	int64_t id, head_id;
	size_t i;

	a->err[0] = '\0';
	if (batch_sql(a, "BEGIN IMMEDIATE") == -1)
		goto fail;
	/*
	 * Read the head inside the transaction: it is one B-tree step, and it
	 * keeps the chain right after a rollback or another writer.
	 */
	if (chain_head(a, &id, hash) == -1) {
		snprintf(a->err, sizeof(a->err), "cannot read the chain head");
		goto fail;
	}
	for (i = 0; i < n; i++)
		if (insert_row(a, rows[i], &id, hash) == -1)
			goto fail;
	if (batch_sql(a, "COMMIT") == 0)
		return 0;
	if (!sqlite3_get_autocommit(a->db))
		(void)sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
	/*
	 * A COMMIT that reported failure after its frames reached the WAL
	 * (the -shm index could not grow, say) may still be what the file
	 * holds: if the head is this batch's last row, it is written, and
	 * writing it again would put every row in twice.
	 */
	if (chain_head(a, &head_id, head) == 0 && head_id == id &&
	    strcmp(head, hash) == 0) {
		log_warnx("audit: a failed COMMIT (%s) landed all the same; "
		    "rows through %" PRId64 " are written", a->err, id);
		return 0;
	}
	return -1;
fail:
	if (!sqlite3_get_autocommit(a->db))
		(void)sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* A row of the gateway's own: kind admin, decision allow, rule = reason. */
static void
admin_event(struct audit_event *ev, int64_t ts_ms, const char *method,
    const char *path, const char *rule)
{
	memset(ev, 0, sizeof(*ev));
	ev->ts_ms = ts_ms;
	ev->kind = "admin";
	ev->method = method;
	ev->path = path;
	ev->decision = VERDICT_ALLOW;
	ev->rule = rule;
	ev->reason = rule;
	ev->port = ev->status = -1;
	ev->asn = ev->bytes_up = ev->bytes_down = ev->duration_ms = -1;
}

/* ----------------------------------------------------------- retention */

static int
step_int(sqlite3 *db, const char *sql, const char *text, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = 0;
	if ((rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) != SQLITE_OK)
		goto fail;
	if (text != NULL && (rc = sqlite3_bind_text(st, 1, text, -1,
	    SQLITE_STATIC)) != SQLITE_OK)
		goto fail;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(st);
	return 0;
fail:
	log_warnx("audit: %.60s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/*
 * Delete one chunk of the rows older than the retention period, and write
 * the row that records it. Only a prefix of ids is ever deleted (up to the
 * first row still inside the period), so the chain stays one piece that
 * starts at the recorded anchor. Returns rows deleted, or -1.
 */
static int64_t
retention_chunk(struct audit *a)
{
	char cutoff[AUDIT_TS_LEN + 1], now_ts[AUDIT_TS_LEN + 1];
	char path[256], anchor[AUDIT_HASH_HEX + 1], hash[AUDIT_HASH_HEX + 1];
	struct audit_event ev;
	struct audit_row *r = NULL;
	sqlite3_stmt *st = NULL;
	int64_t now = audit_now_ms(), keep_from, first, through, head, deleted;
	const unsigned char *h;

	if (audit_format_ts(now - (int64_t)a->retention_s * 1000, cutoff,
	    sizeof(cutoff)) == -1 || audit_format_ts(now, now_ts,
	    sizeof(now_ts)) == -1)
		return 0;
	if (exec_sql(a->db, "BEGIN IMMEDIATE") == -1)
		return -1;
	if (step_int(a->db, "SELECT ifnull(min(id), 0) FROM events", NULL,
	    &first) == -1 || step_int(a->db, "SELECT ifnull(min(id), 0) FROM "
	    "events WHERE ts >= ?", cutoff, &keep_from) == -1 ||
	    chain_head(a, &head, hash) == -1)
		goto fail;
	through = keep_from == 0 ? head : keep_from - 1;
	if (first == 0 || through < first) {
		(void)exec_sql(a->db, "ROLLBACK");
		return 0;
	}
	if (through - first >= AUDIT_RETENTION_CHUNK)
		through = first + AUDIT_RETENTION_CHUNK - 1;
	/* The hash the survivors continue from: the last deleted row's. */
	if (sqlite3_prepare_v2(a->db, "SELECT hash FROM events WHERE id = ?",
	    -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 1, through) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW ||
	    (h = sqlite3_column_text(st, 0)) == NULL ||
	    sqlite3_column_bytes(st, 0) != AUDIT_HASH_HEX) {
		log_warnx("audit: retention: no hash for row %" PRId64 ": %s",
		    through, sqlite3_errmsg(a->db));
		goto fail;
	}
	memcpy(anchor, h, sizeof(anchor));
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(a->db, "DELETE FROM events WHERE id <= ?", -1,
	    &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 1, through) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_DONE) {
		log_warnx("audit: retention: delete: %s",
		    sqlite3_errmsg(a->db));
		goto fail;
	}
	deleted = sqlite3_changes64(a->db);
	sqlite3_finalize(st);
	st = NULL;
	if (audit_retention_format(path, sizeof(path), through, deleted,
	    cutoff, anchor) == -1)
		goto fail;
	admin_event(&ev, now, "DELETE", path, "retention");
	if ((r = row_new(&ev)) == NULL || insert_row(a, r, &head, hash) == -1)
		goto fail;
	free(r);
	r = NULL;
	if (exec_sql(a->db, "COMMIT") == -1)
		goto fail;
	log_info("audit: retention deleted %" PRId64 " rows through id %"
	    PRId64 " (older than %s)", deleted, through, cutoff);
	return deleted;
fail:
	free(r);
	sqlite3_finalize(st);
	if (!sqlite3_get_autocommit(a->db))
		(void)exec_sql(a->db, "ROLLBACK");
	return -1;
}

/* --------------------------------------------------------- checkpoints */

/*
 * Sign (through, head) and fill the checkpoint's fields; the signature is
 * checked with the public key before it is stored, so a signer that signs
 * with another key fails here and not later in verify.
 */
static int
checkpoint_sign(struct audit *a, int64_t through, const char *head,
    int shutdown, const char *ts, struct audit_checkpoint *c)
{
	char msg[AUDIT_CKPT_MSG_MAX];
	int len;

	memset(c, 0, sizeof(*c));
	c->through = through;
	memcpy(c->head, head, AUDIT_HASH_HEX + 1);
	c->shutdown = shutdown;
	memcpy(c->key_id, a->key_id, sizeof(c->key_id));
	if ((len = audit_checkpoint_message(through, head, shutdown, ts, msg,
	    sizeof(msg))) == -1)
		return -1;
	if (a->signer.sign(a->signer.ctx, (const uint8_t *)msg, (size_t)len,
	    c->sig) == -1) {
		log_warnx("audit: the signer failed to sign the checkpoint "
		    "through row %" PRId64, through);
		return -1;
	}
	if (!audit_sig_verify(a->pub, (const uint8_t *)msg, (size_t)len,
	    c->sig)) {
		log_warnx("audit: the signer's signature does not verify with "
		    "key %s; no checkpoint written", a->key_id);
		return -1;
	}
	return 0;
}

/*
 * Append a checkpoint row that signs the chain head. Nothing to do when the
 * head is already a checkpoint (and, at shutdown, a shutdown checkpoint).
 * 0, or -1 after a rollback.
 */
static int
checkpoint_write(struct audit *a, int shutdown)
{
	char hash[AUDIT_HASH_HEX + 1], ts[AUDIT_TS_LEN + 1], path[512];
	struct audit_checkpoint c;
	struct audit_event ev;
	struct audit_row *r = NULL;
	int64_t id, now = audit_now_ms();

	if (exec_sql(a->db, "BEGIN IMMEDIATE") == -1)
		goto fail;
	if (chain_head(a, &id, hash) == -1)
		goto fail;
	if (id == 0 || (id == a->ckpt_id && (!shutdown || a->ckpt_shutdown))) {
		(void)exec_sql(a->db, "ROLLBACK");
		a->dirty = 0;
		return 0;
	}
	if (audit_format_ts(now, ts, sizeof(ts)) == -1 ||
	    checkpoint_sign(a, id, hash, shutdown, ts, &c) == -1 ||
	    audit_checkpoint_format(path, sizeof(path), &c) == -1)
		goto fail;
	admin_event(&ev, now, NULL, path, "checkpoint");
	if ((r = row_new(&ev)) == NULL)
		goto fail;
	if (insert_row(a, r, &id, hash) == -1) {
		log_warnx("audit: checkpoint: %s", a->err);
		goto fail;
	}
	if (exec_sql(a->db, "COMMIT") == -1)
		goto fail;
	free(r);
	a->ckpt_id = id;
	a->ckpt_shutdown = shutdown;
	a->dirty = 0;
	pthread_mutex_lock(&a->mtx);
	a->checkpoints++;
	pthread_mutex_unlock(&a->mtx);
	if (shutdown)
		log_info("audit: checkpoint row %" PRId64 " signs rows through "
		    "%" PRId64 " (key %s)", id, c.through, a->key_id);
	else
		log_debug("audit: checkpoint row %" PRId64 " signs rows "
		    "through %" PRId64, id, c.through);
	return 0;
fail:
	free(r);
	if (!sqlite3_get_autocommit(a->db))
		(void)exec_sql(a->db, "ROLLBACK");
	pthread_mutex_lock(&a->mtx);
	a->ckpt_failures++;
	pthread_mutex_unlock(&a->mtx);
	return -1;
}

/*
 * Where the last run left off: the newest checkpoint row and whether rows
 * follow it (a crash leaves such a tail; the first checkpoint signs it).
 */
static int
checkpoint_state_load(struct audit *a, int64_t head_id)
{
	struct audit_checkpoint c;
	sqlite3_stmt *st = NULL;
	const unsigned char *p;
	int rc;

	a->ckpt_id = 0;
	a->ckpt_shutdown = 0;
	if (sqlite3_prepare_v2(a->db, "SELECT id, path FROM events WHERE "
	    "kind = 'admin' AND rule = 'checkpoint' ORDER BY id DESC LIMIT 1",
	    -1, &st, NULL) != SQLITE_OK) {
		log_warnx("audit: %s", sqlite3_errmsg(a->db));
		return -1;
	}
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		a->ckpt_id = sqlite3_column_int64(st, 0);
		p = sqlite3_column_text(st, 1);
		if (p != NULL && audit_checkpoint_parse((const char *)p,
		    (size_t)sqlite3_column_bytes(st, 1), &c) == 0)
			a->ckpt_shutdown = c.shutdown;
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE)
		log_warnx("audit: reading the last checkpoint: %s",
		    sqlite3_errmsg(a->db));
	sqlite3_finalize(st);
	a->dirty = head_id > a->ckpt_id;
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The signer's public key and its id; -1 when it is not an Ed25519 key. */
static int
checkpoint_setup(struct audit *a, const struct audit_params *pp)
{
	a->checkpoint_ms = pp->checkpoint_ms;
	a->signer = pp->signer;
	if (a->signer.sign == NULL)
		return 0;
	if ((a->pub = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL,
	    a->signer.public_key, AUDIT_PUBKEY_LEN)) == NULL ||
	    audit_key_id(a->signer.public_key, a->key_id) == -1)
		return -1;
	return 0;
}

/* ------------------------------------------------------------- writer */

static void
stats_log(struct audit *a)
{
	struct audit_stats s;

	audit_get_stats(a, &s);
	log_info("audit: %" PRIu64 " rows written, queue high-water %zu/%d, "
	    "batch ms avg %.2f max %.2f, producer stalls %" PRIu64,
	    s.rows_written, s.queue_high_water, AUDIT_QUEUE_ROWS,
	    s.batch_ms_avg, s.batch_ms_max, s.stalls);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/*
 * A row transaction failed: count it, and at the first failure of an
 * episode publish "unavailable" and say what it means for traffic.
 */
static void
writer_failed(struct audit *a, int failures, size_t n)
{
	size_t waiting;
	uint64_t dropped;

	pthread_mutex_lock(&a->mtx);
	a->write_failures++;
	waiting = a->count + n;
	dropped = a->dropped;
	if (!atomic_load(&a->unavailable)) {
		a->episodes++;
		a->drop_logged = 0;
		atomic_store(&a->unavailable, 1);
		/* Producers waiting for room drop their rows instead: wake them. */
		if (a->waiting_producers > 0)
			pthread_cond_broadcast(&a->nonfull);
		pthread_mutex_unlock(&a->mtx);
		a->unavail_since = mono_ms();
		log_warnx("audit: cannot write %s (%s); %zu rows wait and are "
		    "retried at most %d ms apart; on_failure %s", a->path, a->err,
		    waiting, AUDIT_RETRY_MS_MAX, a->on_failure_allow ?
		    "allow: traffic goes on, its rows queue and are dropped "
		    "when the queue is full" : "deny: new requests are refused "
		    "(503 audit-unavailable) until a write succeeds");
		return;
	}
	pthread_mutex_unlock(&a->mtx);
	if (failures % AUDIT_RETRY_LOG_EVERY == 0)
		log_warnx("audit: %s still cannot be written after %.0f s (%s); "
		    "%zu rows wait, %" PRIu64 " dropped", a->path,
		    (mono_ms() - a->unavail_since) / 1000, a->err, waiting,
		    dropped);
}

/* A row transaction committed: end the episode, if one was going on. */
static void
writer_recovered(struct audit *a, int failures)
{
	uint64_t dropped;
	size_t waiting;

	if (!atomic_load(&a->unavailable))
		return;
	pthread_mutex_lock(&a->mtx);
	atomic_store(&a->unavailable, 0);
	waiting = a->count;
	dropped = a->dropped;
	pthread_mutex_unlock(&a->mtx);
	log_warnx("audit: %s takes rows again after %.1f s (%d failed "
	    "attempts); %zu more rows queued, %" PRIu64 " dropped so far",
	    a->path, (mono_ms() - a->unavail_since) / 1000, failures,
	    waiting, dropped);
}

/*
 * How long to wait before the next try: backing off while the gateway runs;
 * at shutdown a failing database gets a second, then rows are given up
 * (-1).
 */
static long
writer_retry_ms(struct audit *a, int failures, size_t n)
{
	long ms = AUDIT_RETRY_MS_MIN;
	int closing, i;

	pthread_mutex_lock(&a->mtx);
	closing = a->closing;
	pthread_mutex_unlock(&a->mtx);
	if (!closing) {
		for (i = 1; i < failures && ms < AUDIT_RETRY_MS_MAX; i++)
			ms *= 2;
		return ms < AUDIT_RETRY_MS_MAX ? ms : AUDIT_RETRY_MS_MAX;
	}
	if (!a->close_gave_up && failures < AUDIT_CLOSE_RETRIES)
		return ms;
	if (!a->close_gave_up)
		log_warnx("audit: giving up at shutdown (%s): the rows still "
		    "queued cannot be written", a->err);
	a->close_gave_up = 1;
	pthread_mutex_lock(&a->mtx);
	a->lost += n;
	pthread_mutex_unlock(&a->mtx);
	return -1;
}

/*
 * Commit rows, retrying a failing database: while the gateway runs, rows
 * that were queued are never dropped here, only delayed.
 */
static void
commit_rows(struct audit *a, struct audit_row **rows, size_t n)
{
	double t0, ms;
	int failures = 0;
	long wait;
	size_t i;

	for (;;) {
		t0 = mono_ms();
		if (write_batch(a, rows, n) == 0)
			break;
		failures++;
		writer_failed(a, failures, n);
		if ((wait = writer_retry_ms(a, failures, n)) < 0)
			goto out;
		sleep_ms(wait);
	}
	ms = mono_ms() - t0;
	a->dirty = 1;
	writer_recovered(a, failures);
	pthread_mutex_lock(&a->mtx);
	a->rows_written += n;
	a->batches++;
	a->batch_ms_sum += ms;
	if (ms > a->batch_ms_max)
		a->batch_ms_max = ms;
	pthread_mutex_unlock(&a->mtx);
	sg_hist_observe(&a->write_hist, (int64_t)(ms * 1000));
out:
	for (i = 0; i < n; i++)
		free(rows[i]);
}

/* Wait on nonempty until deadline (monotonic ms); 0, or ETIMEDOUT. */
static int
wait_until(struct audit *a, double deadline_ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(deadline_ms / 1000);
	ts.tv_nsec = (long)((deadline_ms - (double)ts.tv_sec * 1000) * 1e6);
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_nsec = 999999999L;
	return pthread_cond_timedwait(&a->nonempty, &a->mtx, &ts);
}

/* The writer's timers, on the monotonic clock in ms; < 0: off. */
struct writer_clock {
	double		 next_stats;
	double		 next_retention;
	double		 next_ckpt;
	uint64_t	 logged_rows, logged_stalls;
};

/* Is housekeeping due before the writer may go back to waiting? */
static int
writer_due(const struct audit *a, const struct writer_clock *wc, double now)
{
	return now >= wc->next_stats ||
	    (wc->next_retention >= 0 && now >= wc->next_retention) ||
	    (wc->next_ckpt >= 0 && a->dirty && now >= wc->next_ckpt);
}

/* How long an idle writer may sleep: a second, or until a checkpoint. */
static double
writer_wake(const struct audit *a, const struct writer_clock *wc, double now)
{
	double until = now + 1000;

	if (wc->next_ckpt >= 0 && a->dirty && wc->next_ckpt < until)
		until = wc->next_ckpt;
	return until;
}

/* Housekeeping between batches: the stats line, retention, checkpoints. */
static void
writer_periodic(struct audit *a, struct writer_clock *wc)
{
	struct audit_stats s;
	double now = mono_ms();
	int64_t del;

	if (now >= wc->next_stats) {
		wc->next_stats = now + AUDIT_STATS_MS;
		audit_get_stats(a, &s);
		if (s.rows_written != wc->logged_rows ||
		    s.stalls != wc->logged_stalls) {
			stats_log(a);
			wc->logged_rows = s.rows_written;
			wc->logged_stalls = s.stalls;
		}
	}
	if (wc->next_retention >= 0 && now >= wc->next_retention) {
		/* Chunks interleave with batches until retention caught up. */
		del = retention_chunk(a);
		if (del > 0)
			a->dirty = 1;
		if (del == AUDIT_RETENTION_CHUNK)
			wc->next_retention = now;
		else
			wc->next_retention = now + 1000.0 * (double)(a->retention_s <
			    3600 ? a->retention_s : 3600);
	}
	if (wc->next_ckpt >= 0 && now >= wc->next_ckpt) {
		/* A failed checkpoint is retried at the next interval. */
		if (a->dirty)
			(void)checkpoint_write(a, 0);
		wc->next_ckpt = now + (double)a->checkpoint_ms;
	}
}

static void *
audit_writer(void *arg)
{
	struct audit *a = arg;
	struct audit_row *batch[AUDIT_BATCH_ROWS];
	struct writer_clock wc;
	double now;
	size_t n;

	memset(&wc, 0, sizeof(wc));
	now = mono_ms();
	wc.next_stats = now + AUDIT_STATS_MS;
	wc.next_retention = a->retention_s ? now : -1;
	wc.next_ckpt = a->signer.sign != NULL && a->checkpoint_ms > 0 ?
	    now + (double)a->checkpoint_ms : -1;
	pthread_mutex_lock(&a->mtx);
	for (;;) {
		while (a->count == 0 && !a->closing) {
			now = mono_ms();
			if (writer_due(a, &wc, now))
				break;
			a->writer_idle = 1;
			(void)wait_until(a, writer_wake(a, &wc, now));
			a->writer_idle = 0;
		}
		if (a->count == 0 && a->closing)
			break;
		/*
		 * Group commit: a transaction takes up to a full batch or
		 * whatever arrived within 50 ms of its first row, so a trickle
		 * of rows does not cost one WAL commit each.
		 */
		if (a->count > 0 && a->count < AUDIT_BATCH_ROWS && !a->closing) {
			now = mono_ms() + AUDIT_BATCH_WAIT_MS;
			a->writer_idle = 2;
			while (a->count < AUDIT_BATCH_ROWS && !a->closing)
				if (wait_until(a, now) == ETIMEDOUT)
					break;
			a->writer_idle = 0;
		}
		for (n = 0; n < AUDIT_BATCH_ROWS && a->count > 0; n++) {
			batch[n] = a->ring[a->rhead];
			a->ring[a->rhead] = NULL;
			a->rhead = (a->rhead + 1) % AUDIT_QUEUE_ROWS;
			a->count--;
			a->bytes -= batch[n]->size;
		}
		a->held = n;
		if (n > 0 && a->waiting_producers > 0)
			pthread_cond_broadcast(&a->nonfull);
		pthread_mutex_unlock(&a->mtx);

		if (n > 0)
			commit_rows(a, batch, n);
		writer_periodic(a, &wc);
		pthread_mutex_lock(&a->mtx);
		a->held = 0;
	}
	pthread_mutex_unlock(&a->mtx);
	/* Every queued row is in: sign the end of this run. */
	if (a->signer.sign != NULL && checkpoint_write(a, 1) == -1)
		log_warnx("audit: no shutdown checkpoint; the rows after the "
		    "last checkpoint stay unsigned");
	return NULL;
}

/* ------------------------------------------------------- open, migrate */

static int
table_exists(sqlite3 *db, const char *name, int *exists)
{
	sqlite3_stmt *st;
	int rc;

	*exists = 0;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE "
	    "type = 'table' AND name = ?", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK)
		rc = SQLITE_ERROR;
	else
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		log_warnx("audit: reading the schema: %s", sqlite3_errmsg(db));
	*exists = rc == SQLITE_ROW;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/*
 * Rebuild an older events table with today's columns: rows keep their ids
 * and every column both layouts have; the chain is then computed over rows
 * that have none.
 */
static int
migrate_copy(sqlite3 *db, const char **errstr)
{
	char cols[512] = "", sql[1280];
	sqlite3_stmt *st = NULL;
	int have_id = 0, i, rc;
	size_t len = 0;

	if (sqlite3_prepare_v2(db, "PRAGMA table_info(events)", -1, &st,
	    NULL) != SQLITE_OK)
		goto dberr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);

		for (i = 0; name != NULL && i < AUDIT_NHASHED; i++) {
			if (strcasecmp(name, audit_col_names[i]) != 0)
				continue;
			if (i == AUDIT_COL_ID)
				have_id = 1;
			len += (size_t)snprintf(cols + len, sizeof(cols) - len,
			    "%s%s", len ? ", " : "", audit_col_names[i]);
			break;
		}
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_DONE)
		goto dberr;
	if (!have_id || len >= sizeof(cols)) {
		*errstr = "cannot migrate: table events has no id column";
		return -1;
	}
	if (exec_sql(db, "ALTER TABLE events RENAME TO events_old") == -1 ||
	    exec_sql(db, schema_sql) == -1)
		goto dberr;
	snprintf(sql, sizeof(sql), "INSERT INTO events (%s, prev_hash, hash) "
	    "SELECT %s, '', '' FROM events_old ORDER BY id", cols, cols);
	if (exec_sql(db, sql) == -1 ||
	    exec_sql(db, "DROP TABLE events_old") == -1)
		goto dberr;
	return 0;
dberr:
	sqlite3_finalize(st);
	*errstr = "cannot migrate the audit table (see the log)";
	return -1;
}

/* Give every row without a hash its place in the chain. */
static int
migrate_chain(sqlite3 *db, const char **errstr)
{
	char select[512], prev[AUDIT_HASH_HEX + 1], h[AUDIT_HASH_HEX + 1];
	struct audit_val v[AUDIT_NCOLS];
	sqlite3_stmt *st = NULL, *up = NULL;
	int64_t n = 0;
	int c, rc;

	memcpy(prev, audit_zero_hash, sizeof(prev));
	snprintf(select, sizeof(select), "SELECT %s FROM events ORDER BY id",
	    audit_col_list);
	if (sqlite3_prepare_v2(db, select, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "UPDATE events SET prev_hash = ?, hash = ? "
	    "WHERE id = ?", -1, &up, NULL) != SQLITE_OK)
		goto dberr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &v[c]);
		if (v[AUDIT_COL_HASH].type == AUDIT_V_TEXT &&
		    v[AUDIT_COL_HASH].len == AUDIT_HASH_HEX) {
			memcpy(prev, v[AUDIT_COL_HASH].p, AUDIT_HASH_HEX);
			continue;
		}
		if (audit_chain_hash(prev, v, h) == -1)
			goto dberr;
		if (sqlite3_bind_text(up, 1, prev, -1, SQLITE_TRANSIENT) !=
		    SQLITE_OK || sqlite3_bind_text(up, 2, h, -1,
		    SQLITE_TRANSIENT) != SQLITE_OK || sqlite3_bind_int64(up, 3,
		    v[AUDIT_COL_ID].i) != SQLITE_OK ||
		    sqlite3_step(up) != SQLITE_DONE)
			goto dberr;
		(void)sqlite3_reset(up);	/* its step was checked */
		memcpy(prev, h, sizeof(prev));
		n++;
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	if (n > 0)
		log_info("audit: chained %" PRId64 " migrated rows", n);
	return 0;
dberr:
	log_warnx("audit: migrating the chain: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	*errstr = "cannot migrate the audit chain (see the log)";
	return -1;
}

/*
 * Schema versions (PRAGMA user_version): 0 = a new file, or a table made
 * before versions were recorded; 1 = the pre-chain layout (no ip, country,
 * asn, credential, prev_hash, hash); 2 = today's.
 */
static int
schema_setup(sqlite3 *db, const char **errstr)
{
	char sql[64];
	int64_t version;
	int exists;

	if (exec_sql(db, "BEGIN IMMEDIATE") == -1) {
		*errstr = "cannot lock the audit database (see the log)";
		return -1;
	}
	if (step_int(db, "PRAGMA user_version", NULL, &version) == -1 ||
	    table_exists(db, "events", &exists) == -1) {
		*errstr = "cannot read the audit schema (see the log)";
		goto fail;
	}
	if (version > AUDIT_SCHEMA_VERSION) {
		*errstr = "the audit database has a newer schema than this "
		    "sandgate understands";
		goto fail;
	}
	if (!exists) {
		if (exec_sql(db, schema_sql) == -1) {
			*errstr = "cannot create the audit table (see the log)";
			goto fail;
		}
	} else if (version < AUDIT_SCHEMA_VERSION) {
		log_info("audit: upgrading schema version %" PRId64 " to %d",
		    version, AUDIT_SCHEMA_VERSION);
		if (migrate_copy(db, errstr) == -1 ||
		    migrate_chain(db, errstr) == -1)
			goto fail;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
	    AUDIT_SCHEMA_VERSION);
	if (exec_sql(db, index_sql) == -1 || exec_sql(db, sql) == -1 ||
	    exec_sql(db, "COMMIT") == -1) {
		*errstr = "cannot create the audit indexes (see the log)";
		goto fail;
	}
	return 0;
fail:
	if (!sqlite3_get_autocommit(db))
		(void)exec_sql(db, "ROLLBACK");
	return -1;
}

static int
db_setup(struct audit *a, const char **errstr)
{
	sqlite3_stmt *st = NULL;
	const char *mode;
	int fd, rc;

	/* Audit rows are sensitive: create the file owner-only. */
	if ((fd = open(a->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_warn("audit: %s", a->path);
		*errstr = "cannot create the audit database file";
		return -1;
	}
	close(fd);
	rc = sqlite3_open_v2(a->path, &a->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_warnx("audit: %s: %s", a->path, a->db ?
		    sqlite3_errmsg(a->db) : sqlite3_errstr(rc));
		*errstr = "cannot open the audit database";
		return -1;
	}
	if (sqlite3_busy_timeout(a->db, 5000) != SQLITE_OK ||
	    sqlite3_prepare_v2(a->db, "PRAGMA journal_mode = WAL", -1, &st,
	    NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		log_warnx("audit: %s: %s", a->path, sqlite3_errmsg(a->db));
		sqlite3_finalize(st);
		*errstr = "cannot set WAL mode on the audit database "
		    "(not an SQLite file?)";
		return -1;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	if (mode == NULL || strcmp(mode, "wal") != 0) {
		log_warnx("audit: %s: journal mode is %s, not wal", a->path,
		    mode ? mode : "unknown");
		sqlite3_finalize(st);
		*errstr = "the audit database cannot use WAL mode";
		return -1;
	}
	sqlite3_finalize(st);
	/* The three value-ordered indexes take inserts anywhere: cache them. */
	if (exec_sql(a->db, "PRAGMA synchronous = NORMAL") == -1 ||
	    exec_sql(a->db, "PRAGMA cache_size = -32768") == -1) {
		*errstr = "cannot configure the audit database";
		return -1;
	}
	if (schema_setup(a->db, errstr) == -1)
		return -1;
	if (sqlite3_prepare_v3(a->db, "INSERT INTO events (id, ts, sandbox, "
	    "kind, client, host, ip, port, country, asn, method, path, status, "
	    "decision, rule, reason, credential, bytes_up, bytes_down, "
	    "duration_ms, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
	    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1,
	    SQLITE_PREPARE_PERSISTENT, &a->ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(a->db, "SELECT id, hash FROM events ORDER BY id "
	    "DESC LIMIT 1", -1, SQLITE_PREPARE_PERSISTENT, &a->head,
	    NULL) != SQLITE_OK) {
		log_warnx("audit: prepare: %s", sqlite3_errmsg(a->db));
		*errstr = "cannot prepare the audit statements";
		return -1;
	}
	return 0;
}

static void
audit_free(struct audit *a)
{
	size_t i;

	if (a->ring != NULL) {
		for (i = 0; i < AUDIT_QUEUE_ROWS; i++)
			free(a->ring[i]);
		free(a->ring);
	}
	sqlite3_finalize(a->ins);
	sqlite3_finalize(a->head);
	if (a->db != NULL && sqlite3_close(a->db) != SQLITE_OK)
		log_warnx("audit: close: %s", sqlite3_errmsg(a->db));
	pthread_mutex_destroy(&a->mtx);
	pthread_cond_destroy(&a->nonempty);
	pthread_cond_destroy(&a->nonfull);
	EVP_PKEY_free(a->pub);
	free(a->path);
	free(a);
}

struct audit *
audit_open(const char *db_path, const struct audit_params *params,
    const char **errstr)
{
	static const struct audit_params none;
	const struct audit_params *pp = params ? params : &none;
	struct audit *a;
	pthread_condattr_t ca;
	char hash[AUDIT_HASH_HEX + 1];
	int64_t id;

	*errstr = NULL;
	if (db_path == NULL || *db_path == '\0') {
		*errstr = "no audit database path";
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	pthread_mutex_init(&a->mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->nonempty, &ca);
	pthread_cond_init(&a->nonfull, NULL);
	pthread_condattr_destroy(&ca);
	/* Years of retention still fit an int64 of milliseconds. */
	a->retention_s = pp->retention_s > (uint64_t)INT64_MAX / 2000 ?
	    (uint64_t)INT64_MAX / 2000 : pp->retention_s;
	a->on_failure_allow = pp->on_failure_allow;
	atomic_init(&a->unavailable, 0);
	if (checkpoint_setup(a, pp) == -1) {
		*errstr = "the audit signer's public key is not an Ed25519 key";
		goto fail;
	}
	if ((a->path = strdup(db_path)) == NULL ||
	    (a->ring = calloc(AUDIT_QUEUE_ROWS, sizeof(*a->ring))) == NULL) {
		*errstr = "out of memory";
		goto fail;
	}
	if (db_setup(a, errstr) == -1 || chain_head(a, &id, hash) == -1) {
		if (*errstr == NULL)
			*errstr = "cannot read the audit chain head";
		goto fail;
	}
	if (checkpoint_state_load(a, id) == -1) {
		*errstr = "cannot read the last audit checkpoint";
		goto fail;
	}
	log_debug("audit: chain continues after row %" PRId64 ", last "
	    "checkpoint row %" PRId64, id, a->ckpt_id);
	if (pthread_create(&a->thread, NULL, audit_writer, a) != 0) {
		*errstr = "cannot start the audit writer thread";
		goto fail;
	}
	a->thread_started = 1;
	/* Rows after the head as it stands now are this run's: all forwarded. */
	if (pp->syslog_addrlen > 0) {
		struct audit_syslog_params sp;

		memset(&sp, 0, sizeof(sp));
		memcpy(&sp.addr, &pp->syslog_addr, sizeof(sp.addr));
		sp.addrlen = pp->syslog_addrlen;
		sp.json = pp->syslog_json;
		sp.udp = pp->syslog_udp;
		if ((a->syslog = audit_syslog_start(db_path, id, &sp,
		    errstr)) == NULL) {
			audit_close(a);
			return NULL;
		}
	}
	return a;
fail:
	audit_free(a);
	return NULL;
}

/* No room for r: the ring's slots or its bytes are used up. Under mtx. */
static int
ring_full(const struct audit *a, const struct audit_row *r)
{
	return a->count == AUDIT_QUEUE_ROWS ||
	    (a->count > 0 && a->bytes + r->size > AUDIT_QUEUE_BYTES);
}

int
audit_submit(struct audit *a, const struct audit_event *ev)
{
	struct audit_row *r;
	size_t tail;
	int waited = 0, first_drop;

	if (a == NULL || ev == NULL)
		return -1;
	/* Copy outside the lock: producers contend only for the ring slot. */
	while ((r = row_new(ev)) == NULL) {
		log_warnx("audit: out of memory copying a row; retrying");
		sleep_ms(10);
	}
	pthread_mutex_lock(&a->mtx);
	while (!a->closing && ring_full(a, r) && !atomic_load(&a->unavailable)) {
		if (!waited) {
			a->stalls++;
			waited = 1;
		}
		a->waiting_producers++;
		pthread_cond_wait(&a->nonfull, &a->mtx);
		a->waiting_producers--;
	}
	if (a->closing) {
		pthread_mutex_unlock(&a->mtx);
		free(r);
		return -1;
	}
	if (ring_full(a, r)) {
		/*
		 * The disk is full (or failing) and so is the queue: waiting
		 * would hold this event loop for as long as the outage lasts.
		 */
		a->dropped++;
		first_drop = !a->drop_logged;
		a->drop_logged = 1;
		pthread_mutex_unlock(&a->mtx);
		free(r);
		if (first_drop)
			log_warnx("audit: the queue is full while %s cannot be "
			    "written: new rows are dropped until it can "
			    "(sandgate_audit_rows_dropped_total)", a->path);
		return -1;
	}
	tail = (a->rhead + a->count) % AUDIT_QUEUE_ROWS;
	a->ring[tail] = r;
	a->count++;
	a->bytes += r->size;
	if (a->count > a->high_water)
		a->high_water = a->count;
	/* Wake the writer when it idles, or when its batch is full. */
	if (a->writer_idle == 1 || (a->writer_idle == 2 &&
	    a->count >= AUDIT_BATCH_ROWS))
		pthread_cond_signal(&a->nonempty);
	pthread_mutex_unlock(&a->mtx);
	return 0;
}

int
audit_refuses(const struct audit *a)
{
	return a != NULL && !a->on_failure_allow &&
	    atomic_load_explicit(&a->unavailable, memory_order_relaxed);
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	a->closing = 1;
	pthread_cond_broadcast(&a->nonempty);
	pthread_cond_broadcast(&a->nonfull);
	pthread_mutex_unlock(&a->mtx);
	if (a->thread_started)
		pthread_join(a->thread, NULL);
	/* After the writer: the last rows and the shutdown checkpoint go too. */
	audit_syslog_stop(a->syslog);
	a->syslog = NULL;
	if (a->rows_written > 0)
		stats_log(a);
	if (a->lost > 0)
		log_warnx("audit: %" PRIu64 " rows were lost at shutdown",
		    a->lost);
	audit_free(a);
}

struct sg_hist *
audit_write_hist(struct audit *a)
{
	return a != NULL ? &a->write_hist : NULL;
}

void
audit_get_stats(struct audit *a, struct audit_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	s->rows_written = a->rows_written;
	s->checkpoints = a->checkpoints;
	s->checkpoint_failures = a->ckpt_failures;
	s->stalls = a->stalls;
	s->queue_high_water = a->high_water;
	s->batch_ms_max = a->batch_ms_max;
	s->batch_ms_avg = a->batches ? a->batch_ms_sum / (double)a->batches :
	    0.0;
	s->unavailable = atomic_load(&a->unavailable);
	s->unavailable_episodes = a->episodes;
	s->write_failures = a->write_failures;
	s->rows_dropped = a->dropped;
	s->rows_waiting = a->count + a->held;
	pthread_mutex_unlock(&a->mtx);
	if (a->syslog != NULL)
		s->syslog_sent = audit_syslog_sent(a->syslog, &s->syslog_last_id);
}
