/*
 * state.db: one row per sandbox a launcher made and has not yet taken down
 * (docs/sandbox.md). The row is written before anything else is made, so that
 * `sandbox ls`, `sandbox rm` and the reconciliation of a later launcher know
 * what exists, who owns it and how to reach it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "sandbox/sandbox.h"

struct sandbox_state {
	sqlite3		*db;
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    " id TEXT PRIMARY KEY,"
    " policy TEXT NOT NULL,"
    " runtime TEXT NOT NULL,"
    " mode TEXT NOT NULL,"		/* run | create */
    " state TEXT NOT NULL,"		/* creating | running | exited */
    " created INTEGER NOT NULL,"
    " expires INTEGER NOT NULL DEFAULT 0,"
    " owner_pid INTEGER NOT NULL,"
    " owner_start INTEGER NOT NULL,"
    " guest TEXT,"
    " publish TEXT NOT NULL DEFAULT '',"	/* "8000,3000" */
    " public INTEGER NOT NULL DEFAULT 0,"
    " token TEXT NOT NULL DEFAULT '',"
    " admin TEXT NOT NULL DEFAULT '')";

#define ROW_COLS "id, policy, runtime, mode, state, created, expires, " \
    "owner_pid, owner_start, guest, publish, public, token, admin"

/*
 * WAL mode and the schema. Launchers start side by side on a new file:
 * switching the journal mode, or a read snapshot upgrading to a write,
 * can answer SQLITE_BUSY without calling the busy handler, so a busy
 * answer is tried again (for up to about ten seconds, like the handler).
 */
static int
state_init(sqlite3 *db)
{
	char sql[sizeof(schema) + 32];
	int rc, tries;

	snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; %s; COMMIT", schema);
	for (tries = 0; tries < 200; tries++) {
		rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL,
		    NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
		if (rc == SQLITE_OK)
			return 0;
		if (!sqlite3_get_autocommit(db))
			(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
			return -1;
		usleep(20000 + (useconds_t)(tries % 7) * 5000);
	}
	return -1;
}

struct sandbox_state *
sandbox_state_open(const char *path, const char **errstr)
{
	struct sandbox_state *st;
	int fd;

	if ((st = calloc(1, sizeof(*st))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	/* the file holds ingress tokens: root's alone, made so before SQLite opens it */
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1) {
		*errstr = strerror(errno);
		free(st);
		return NULL;
	}
	(void)fchmod(fd, 0600);
	close(fd);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(st->db, 10000) != SQLITE_OK ||
	    state_init(st->db) == -1) {
		*errstr = "cannot open or initialise the database";
		sqlite3_close(st->db);
		free(st);
		return NULL;
	}
	return st;
}

void
sandbox_state_close(struct sandbox_state *st)
{
	if (st == NULL)
		return;
	sqlite3_close(st->db);
	free(st);
}

static void
publish_format(const struct sandbox_row *r, char *buf, size_t len)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < r->n_publish && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%u",
		    i > 0 ? "," : "", r->publish[i]);
}

/* "8000,3000" -> ports; stops at the first bad one (the row is ours). */
static void
publish_parse(const char *s, struct sandbox_row *r)
{
	unsigned long v;
	char *end;

	r->n_publish = 0;
	while (s != NULL && *s != '\0' && r->n_publish < SANDBOX_MAX_PUBLISH) {
		v = strtoul(s, &end, 10);
		if (end == s || v < 1 || v > 65535)
			return;
		r->publish[r->n_publish++] = (uint16_t)v;
		s = *end == ',' ? end + 1 : end;
	}
}

int
sandbox_state_insert(struct sandbox_state *st, const struct sandbox_row *r)
{
	sqlite3_stmt *q = NULL;
	char pub[SANDBOX_MAX_PUBLISH * 6 + 1];
	int rc;

	publish_format(r, pub, sizeof(pub));
	if (sqlite3_prepare_v2(st->db, "INSERT INTO sandboxes (" ROW_COLS ") "
	    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &q, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(q, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, r->policy, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, r->runtime, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 4, r->mode, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 5, r->state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 6, r->created);
	sqlite3_bind_int64(q, 7, r->expires);
	sqlite3_bind_int64(q, 8, r->owner_pid);
	sqlite3_bind_int64(q, 9, (sqlite3_int64)r->owner_start);
	if (r->guest[0] != '\0')
		sqlite3_bind_text(q, 10, r->guest, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, 10);
	sqlite3_bind_text(q, 11, pub, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 12, r->is_public);
	sqlite3_bind_text(q, 13, r->token, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 14, r->admin, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	if (rc == SQLITE_CONSTRAINT) {
		errno = EEXIST;
		return -1;
	}
	return rc == SQLITE_DONE ? 0 : -1;
}

int
sandbox_state_update(struct sandbox_state *st, const char *id,
    const char *state, const char *guest)
{
	sqlite3_stmt *q = NULL;
	int rc;

	if (sqlite3_prepare_v2(st->db, "UPDATE sandboxes SET state = ?, "
	    "guest = COALESCE(?, guest) WHERE id = ?", -1, &q,
	    NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(q, 1, state, -1, SQLITE_STATIC);
	if (guest != NULL)
		sqlite3_bind_text(q, 2, guest, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, 2);
	sqlite3_bind_text(q, 3, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : -1;
}

int
sandbox_state_delete(struct sandbox_state *st, const char *id)
{
	sqlite3_stmt *q = NULL;
	int rc;

	if (sqlite3_prepare_v2(st->db, "DELETE FROM sandboxes WHERE id = ?",
	    -1, &q, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void
copy_col(sqlite3_stmt *q, int col, char *dst, size_t len)
{
	const unsigned char *v = sqlite3_column_text(q, col);

	snprintf(dst, len, "%s", v != NULL ? (const char *)v : "");
}

static void
row_read(sqlite3_stmt *q, struct sandbox_row *r)
{
	memset(r, 0, sizeof(*r));
	copy_col(q, 0, r->id, sizeof(r->id));
	copy_col(q, 1, r->policy, sizeof(r->policy));
	copy_col(q, 2, r->runtime, sizeof(r->runtime));
	copy_col(q, 3, r->mode, sizeof(r->mode));
	copy_col(q, 4, r->state, sizeof(r->state));
	r->created = sqlite3_column_int64(q, 5);
	r->expires = sqlite3_column_int64(q, 6);
	r->owner_pid = sqlite3_column_int64(q, 7);
	r->owner_start = (uint64_t)sqlite3_column_int64(q, 8);
	copy_col(q, 9, r->guest, sizeof(r->guest));
	publish_parse((const char *)sqlite3_column_text(q, 10), r);
	r->is_public = sqlite3_column_int(q, 11);
	copy_col(q, 12, r->token, sizeof(r->token));
	copy_col(q, 13, r->admin, sizeof(r->admin));
}

int
sandbox_state_get(struct sandbox_state *st, const char *id,
    struct sandbox_row *r)
{
	sqlite3_stmt *q = NULL;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT " ROW_COLS " FROM sandboxes "
	    "WHERE id = ?", -1, &q, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		row_read(q, r);
	sqlite3_finalize(q);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int
sandbox_state_list(struct sandbox_state *st, struct sandbox_row **rows,
    size_t *n)
{
	struct sandbox_row *v = NULL, *nv;
	size_t cap = 0, k = 0;
	sqlite3_stmt *q = NULL;
	int rc;

	*rows = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT " ROW_COLS " FROM sandboxes "
	    "ORDER BY created, id", -1, &q, NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (k == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			if ((nv = reallocarray(v, cap, sizeof(*v))) == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		row_read(q, &v[k++]);
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE) {
		free(v);
		return -1;
	}
	*rows = v;
	*n = k;
	return 0;
}
