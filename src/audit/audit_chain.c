/*
 * The audit log's hash chain: the SHA-256 link from one row to the next
 * over its canonical encoding (audit_row.c; shared with the writer,
 * audit.c), and the walk that verifies a stored chain and the signatures
 * of its checkpoints.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"
#include "core/util.h"

static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;

/* Fetch the digest once: an implicit fetch per row costs a third more. */
static void
sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

int
audit_chain_hash(const char *prev_hex, const struct audit_val *v,
    char out[AUDIT_HASH_HEX + 1])
{
	unsigned char stack[4096], md[EVP_MAX_MD_SIZE], *buf = stack;
	unsigned int mdlen = 0;
	size_t need;
	int rc = -1;

	if (strlen(prev_hex) != AUDIT_HASH_HEX)
		return -1;
	memcpy(buf, prev_hex, AUDIT_HASH_HEX);
	need = audit_encode_row(v, buf + AUDIT_HASH_HEX,
	    sizeof(stack) - AUDIT_HASH_HEX);
	if (need > sizeof(stack) - AUDIT_HASH_HEX) {
		if ((buf = malloc(AUDIT_HASH_HEX + need)) == NULL)
			return -1;
		memcpy(buf, prev_hex, AUDIT_HASH_HEX);
		(void)audit_encode_row(v, buf + AUDIT_HASH_HEX, need);
	}
	(void)pthread_once(&sha256_once, sha256_fetch);
	if (EVP_Digest(buf, AUDIT_HASH_HEX + need, md, &mdlen, sha256_md ?
	    sha256_md : EVP_sha256(), NULL) != 1 ||
	    mdlen != AUDIT_HASH_HEX / 2)
		goto done;
	util_hex_encode(md, mdlen, out);
	rc = 0;
done:
	if (buf != stack)
		free(buf);
	return rc;
}

/* -------------------------------------------------------------- verify */

/* Check one row's own hash; 0 ok, 1 bad (msg), -1 error. */
static int
verify_row_hash(const struct audit_val *row, struct audit_verify *res)
{
	char h[AUDIT_HASH_HEX + 1];

	if (row[AUDIT_COL_PREV_HASH].type != AUDIT_V_TEXT ||
	    !audit_is_hash_hex(row[AUDIT_COL_PREV_HASH].p,
	    row[AUDIT_COL_PREV_HASH].len)) {
		snprintf(res->msg, sizeof(res->msg),
		    "prev_hash is not 64 lower-case hex digits");
		return 1;
	}
	if (row[AUDIT_COL_HASH].type != AUDIT_V_TEXT ||
	    !audit_is_hash_hex(row[AUDIT_COL_HASH].p,
	    row[AUDIT_COL_HASH].len)) {
		snprintf(res->msg, sizeof(res->msg),
		    "hash is not 64 lower-case hex digits");
		return 1;
	}
	memcpy(h, row[AUDIT_COL_PREV_HASH].p, AUDIT_HASH_HEX);
	h[AUDIT_HASH_HEX] = '\0';
	if (audit_chain_hash(h, row, h) == -1) {
		snprintf(res->msg, sizeof(res->msg), "cannot compute SHA-256");
		return -1;
	}
	if (memcmp(h, row[AUDIT_COL_HASH].p, AUDIT_HASH_HEX) != 0) {
		snprintf(res->msg, sizeof(res->msg),
		    "hash does not match the row's contents");
		return 1;
	}
	return 0;
}

int
audit_anchor_candidate(const struct audit_val *row, int64_t first,
    int64_t *best, char anchor[AUDIT_HASH_HEX + 1], struct audit_verify *res)
{
	const struct audit_val *path = &row[AUDIT_COL_PATH];
	char a[AUDIT_HASH_HEX + 1];
	int64_t through;
	int r;

	if (path->type != AUDIT_V_TEXT || audit_retention_parse(
	    (const char *)path->p, path->len, &through, a) == -1 ||
	    through >= first)
		return 2;
	if (through < first - 1) {
		if (through > *best)
			*best = through;
		return 2;
	}
	/* It vouches for the start of the chain: it must be intact. */
	if ((r = verify_row_hash(row, res)) != 0) {
		res->bad_id = row[AUDIT_COL_ID].i;
		return r;
	}
	memcpy(anchor, a, sizeof(a));
	return 0;
}

void
audit_anchor_missing(int64_t best, int64_t first, struct audit_verify *res)
{
	res->bad_id = best + 1;
	if (best + 1 == first - 1)
		snprintf(res->msg, sizeof(res->msg), "missing (the table "
		    "continues at row %" PRId64 " and no retention row records "
		    "the deletion)", first);
	else
		snprintf(res->msg, sizeof(res->msg), "missing (rows %" PRId64
		    "-%" PRId64 " are gone, the table continues at row %" PRId64
		    ", and no retention row records the deletion)", best + 1,
		    first - 1, first);
}

/*
 * The chain's start when the first row of audit.db is not id 1: the
 * retention row that deleted everything before it.
 */
static int
verify_anchor(void *ctx, int64_t first, char anchor[AUDIT_HASH_HEX + 1],
    struct audit_verify *res)
{
	char sql[512];
	struct audit_val row[AUDIT_NCOLS];
	sqlite3 *db = ctx;
	sqlite3_stmt *st;
	int64_t best = 0;
	int rc, r = 2, c;

	snprintf(sql, sizeof(sql), "SELECT %s FROM events WHERE kind = 'admin' "
	    "AND rule = 'retention' ORDER BY id", audit_col_list);
	if ((st = audit_prepare(db, sql, res->msg, sizeof(res->msg))) == NULL)
		return -1;
	while (r == 2 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &row[c]);
		r = audit_anchor_candidate(row, first, &best, anchor, res);
	}
	if (r == 2 && rc != SQLITE_DONE) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		r = -1;
	}
	sqlite3_finalize(st);
	if (r == 2) {
		audit_anchor_missing(best, first, res);
		r = 1;
	}
	return r;
}

static int
val_is(const struct audit_val *v, const char *s)
{
	size_t n = strlen(s);

	return v->type == AUDIT_V_TEXT && v->len == n && memcmp(v->p, s, n) == 0;
}

/* Why a checkpoint's signature failed, in res->msg. */
static void
checkpoint_why(EVP_PKEY *pub, const char *pub_id,
    const struct audit_checkpoint *c, const char *ts,
    struct audit_verify *res)
{
	char msg[AUDIT_CKPT_MSG_MAX];
	int len;

	if (strcmp(c->key_id, pub_id) != 0) {
		snprintf(res->msg, sizeof(res->msg), "checkpoint signed by key "
		    "%s, not by the public key given (key %s)", c->key_id,
		    pub_id);
		return;
	}
	len = audit_checkpoint_message(c->through, c->head, c->shutdown, ts,
	    msg, sizeof(msg));
	if (len > 0 && audit_sig_verify(pub, (const uint8_t *)msg,
	    (size_t)len, c->sig))
		snprintf(res->msg, sizeof(res->msg), "checkpoint signature is "
		    "for another chain: rows up to %" PRId64 " were changed "
		    "after they were signed (the signed head is %.16s..., the "
		    "chain has another)", c->through, c->head);
	else
		snprintf(res->msg, sizeof(res->msg), "checkpoint signature does "
		    "not verify: the checkpoint row was forged or altered");
}

/* The key of a checkpoint: the one whose id it names, else the only one. */
static EVP_PKEY *
walk_key(const struct audit_walk *w, const char *key_id, const char **pub_id)
{
	int i;

	for (i = 0; i < w->npubs; i++)
		if (strcmp(w->pub_ids[i], key_id) == 0) {
			*pub_id = w->pub_ids[i];
			return w->pubs[i];
		}
	*pub_id = w->npubs > 0 ? w->pub_ids[0] : "unknown";
	return w->npubs == 1 ? w->pubs[0] : NULL;
}

/*
 * A checkpoint row (its own hash and link already checked): it must follow
 * the row it signs, and its signature must verify over the chain as stored.
 * 0 ok, 1 bad (msg).
 */
static int
verify_checkpoint(const struct audit_val *row, const struct audit_walk *w,
    struct audit_verify *res)
{
	const struct audit_val *path = &row[AUDIT_COL_PATH];
	const struct audit_val *ts = &row[AUDIT_COL_TS];
	struct audit_checkpoint c;
	char msg[AUDIT_CKPT_MSG_MAX], tsbuf[AUDIT_TS_LEN + 1];
	char head[AUDIT_HASH_HEX + 1];
	const char *pub_id;
	EVP_PKEY *pub;
	int len;

	if (path->type != AUDIT_V_TEXT || audit_checkpoint_parse(
	    (const char *)path->p, path->len, &c) == -1 ||
	    ts->type != AUDIT_V_TEXT || ts->len != AUDIT_TS_LEN) {
		snprintf(res->msg, sizeof(res->msg), "malformed checkpoint "
		    "row (path or ts)");
		return 1;
	}
	memcpy(tsbuf, ts->p, AUDIT_TS_LEN);
	tsbuf[AUDIT_TS_LEN] = '\0';
	if (c.through != row[AUDIT_COL_ID].i - 1) {
		snprintf(res->msg, sizeof(res->msg), "checkpoint signs rows "
		    "through %" PRId64 " but follows row %" PRId64, c.through,
		    row[AUDIT_COL_ID].i - 1);
		return 1;
	}
	if (w->npubs == 0) {
		snprintf(res->msg, sizeof(res->msg), "checkpoint signature "
		    "cannot be checked: no public key (--pubkey FILE)");
		return 1;
	}
	if ((pub = walk_key(w, c.key_id, &pub_id)) == NULL) {
		snprintf(res->msg, sizeof(res->msg), "checkpoint signed by key "
		    "%s, not by any of the public keys given", c.key_id);
		return 1;
	}
	/* The chain as stored is what must have been signed. */
	memcpy(head, row[AUDIT_COL_PREV_HASH].p, AUDIT_HASH_HEX);
	head[AUDIT_HASH_HEX] = '\0';
	len = audit_checkpoint_message(c.through, head, c.shutdown, tsbuf, msg,
	    sizeof(msg));
	if (len > 0 && strcmp(head, c.head) == 0 &&
	    audit_sig_verify(pub, (const uint8_t *)msg, (size_t)len, c.sig)) {
		res->checkpoints++;
		res->last_ckpt_id = row[AUDIT_COL_ID].i;
		res->last_ckpt_shutdown = c.shutdown;
		memcpy(res->last_ckpt_ts, tsbuf, sizeof(tsbuf));
		snprintf(res->key_id, sizeof(res->key_id), "%s", c.key_id);
		return 0;
	}
	checkpoint_why(pub, pub_id, &c, tsbuf, res);
	return 1;
}

void
audit_walk_init(struct audit_walk *w, EVP_PKEY *const *pubs, int npubs,
    int (*anchor)(void *, int64_t, char *, struct audit_verify *),
    void *anchor_ctx, struct audit_verify *res)
{
	int i;

	memset(w, 0, sizeof(*w));
	memset(res, 0, sizeof(*res));
	w->npubs = npubs > AUDIT_MAX_PUBKEYS ? AUDIT_MAX_PUBKEYS : npubs;
	for (i = 0; i < w->npubs; i++) {
		w->pubs[i] = pubs[i];
		snprintf(w->pub_ids[i], sizeof(w->pub_ids[i]), "unknown");
		(void)audit_pubkey_id(pubs[i], w->pub_ids[i]);
	}
	w->anchor = anchor;
	w->anchor_ctx = anchor_ctx;
	w->res = res;
}

/* A broken link says more than a broken hash. */
static int
walk_link(struct audit_walk *w, const struct audit_val *row, int64_t id)
{
	const struct audit_val *ph = &row[AUDIT_COL_PREV_HASH];
	struct audit_verify *res = w->res;

	if (ph->type != AUDIT_V_TEXT || !audit_is_hash_hex(ph->p, ph->len) ||
	    memcmp(ph->p, w->expect, AUDIT_HASH_HEX) == 0)
		return 0;
	if (w->have_prev)
		snprintf(res->msg, sizeof(res->msg), "prev_hash does not "
		    "match the hash of row %" PRId64, w->prev_id);
	else if (id == 1)
		snprintf(res->msg, sizeof(res->msg),
		    "prev_hash of the first row is not 64 zeros");
	else
		snprintf(res->msg, sizeof(res->msg), "prev_hash does not "
		    "match the anchor of the retention row");
	return 1;
}

int
audit_walk_row(struct audit_walk *w, const struct audit_val *row)
{
	struct audit_verify *res = w->res;
	int64_t id = row[AUDIT_COL_ID].type == AUDIT_V_INT ?
	    row[AUDIT_COL_ID].i : 0;
	int r;

	res->bad_id = id;
	if (!w->have_prev && id == 1)
		memcpy(w->expect, audit_zero_hash, sizeof(w->expect));
	else if (!w->have_prev) {
		if ((r = w->anchor(w->anchor_ctx, id, w->expect, res)) != 0)
			return r;
		res->bad_id = id;
	} else if (id != w->prev_id + 1) {
		res->bad_id = w->prev_id + 1;
		snprintf(res->msg, sizeof(res->msg), "missing (row %" PRId64
		    " is followed by row %" PRId64 ")", w->prev_id, id);
		return 1;
	}
	if ((r = verify_row_hash(row, res)) == -1)
		return -1;
	if (walk_link(w, row, id) != 0)
		r = 1;
	if (r == 0 && val_is(&row[AUDIT_COL_KIND], "admin") &&
	    val_is(&row[AUDIT_COL_RULE], "checkpoint"))
		r = verify_checkpoint(row, w, res);
	if (r != 0)
		return r;
	memcpy(w->expect, row[AUDIT_COL_HASH].p, AUDIT_HASH_HEX);
	if (!w->have_prev)
		w->first_id = id;
	w->prev_id = id;
	w->have_prev = 1;
	res->rows++;
	return 0;
}

/* The summary once every row passed: the range and the unsigned tail. */
void
audit_walk_end(struct audit_walk *w)
{
	struct audit_verify *res = w->res;
	int64_t first = w->first_id, last = w->prev_id;

	res->bad_id = 0;
	res->first_id = first;
	res->last_id = last;
	if (res->rows == 0)
		return;
	res->tail_first = res->last_ckpt_id ? res->last_ckpt_id + 1 : first;
	res->tail_last = last;
	res->tail_rows = res->tail_first <= last ?
	    (uint64_t)(last - res->tail_first + 1) : 0;
	if (res->tail_rows == 0)
		res->tail_first = res->tail_last = 0;
}

/*
 * The indexes against the rows: the queries of `sandgate audit` (--host,
 * --sandbox, ...) read through them, so an index edited to leave a signed
 * row out hid it while every row's hash still verified. PRAGMA
 * integrity_check compares each index with its table (quick_check does
 * not). 0 ok; 1 with bad_id (the row it names, else 0) and msg; -1.
 */
static int
verify_indexes(sqlite3 *db, struct audit_verify *res)
{
	sqlite3_stmt *st;
	const unsigned char *t;
	long long id = 0;
	int r = 0;

	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check(1)", -1, &st,
	    NULL) != SQLITE_OK) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(st) != SQLITE_ROW ||
	    (t = sqlite3_column_text(st, 0)) == NULL) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		r = -1;
	} else if (strcmp((const char *)t, "ok") != 0) {
		(void)sscanf((const char *)t, "row %lld", &id);
		res->bad_id = id;
		snprintf(res->msg, sizeof(res->msg), "the database does not "
		    "hold together (an index edited?): %s", (const char *)t);
		r = 1;
	}
	sqlite3_finalize(st);
	return r;
}

int
audit_verify(sqlite3 *db, EVP_PKEY *pub, struct audit_verify *res)
{
	struct audit_val row[AUDIT_NCOLS];
	struct audit_walk w;
	char select[512];
	sqlite3_stmt *st = NULL;
	int rc, r = 0, c;

	audit_walk_init(&w, &pub, pub != NULL, verify_anchor, db, res);
	/* One read transaction: a consistent snapshot while the writer runs. */
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		return -1;
	}
	snprintf(select, sizeof(select), "SELECT %s FROM events ORDER BY id",
	    audit_col_list);
	if ((st = audit_prepare(db, select, res->msg,
	    sizeof(res->msg))) == NULL) {
		r = -1;
		goto done;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &row[c]);
		if ((r = audit_walk_row(&w, row)) != 0)
			goto done;
	}
	if (rc != SQLITE_DONE) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		r = -1;
		goto done;
	}
	audit_walk_end(&w);
	r = verify_indexes(db, res);
done:
	if (r == -1)
		res->bad_id = 0;
	sqlite3_finalize(st);
	(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return r;
}

void
audit_verify_report(FILE *f, const char *prefix, const struct audit_verify *res)
{
	fprintf(f, "%sok: %" PRIu64 " rows verified\n", prefix, res->rows);
	if (res->rows == 0)
		return;
	if (res->last_ckpt_id == 0) {
		fprintf(f, "%scheckpoints: none, no row is signed\n", prefix);
		fprintf(f, "%sunsigned tail: %" PRIu64 " rows, no checkpoint "
		    "(id %" PRId64 "..%" PRId64 ")\n", prefix, res->tail_rows,
		    res->tail_first, res->tail_last);
		return;
	}
	fprintf(f, "%scheckpoints: %" PRIu64 " signed by key %s; the last, row "
	    "%" PRId64 " (%s, %s), signs rows through %" PRId64 "\n", prefix,
	    res->checkpoints, res->key_id, res->last_ckpt_id,
	    res->last_ckpt_shutdown ? "shutdown" : "interval",
	    res->last_ckpt_ts, res->last_ckpt_id - 1);
	if (res->tail_rows > 0)
		fprintf(f, "%sunsigned tail: %" PRIu64 " rows after the last "
		    "checkpoint (id %" PRId64 "..%" PRId64 ")\n", prefix,
		    res->tail_rows, res->tail_first, res->tail_last);
	else
		fprintf(f, "%sunsigned tail: 0 rows after the last checkpoint\n",
		    prefix);
	if (!res->last_ckpt_shutdown)
		fprintf(f, "%snote: the last checkpoint was not written at "
		    "shutdown: the gateway is running, stopped without a clean "
		    "shutdown, or rows after the checkpoint were deleted\n",
		    prefix);
}
