/*
 * Unit tests of the signed audit chain: the checkpoint row's text and
 * message, checkpoints written on the interval and at close by a test
 * signer, and verify against rewritten, forged, truncated and wrongly
 * keyed databases.
 */
#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "check.h"
#include "audit/audit.h"
#include "audit/audit_query.h"

static char tmpdir[256];

/* ------------------------------------------------------------ helpers */

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* name in the temp directory; the string lives until the test ends. */
static const char *
tpath(const char *name)
{
	static char buf[16][512];
	static int n;
	char *p = buf[n++ % 16];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

/* Remove a database and whatever WAL files it left. */
static void
rm_db(const char *path)
{
	char p[600];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

static int
exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK)
		fprintf(stderr, "sql %s: %s\n", sql, msg ? msg : "?");
	sqlite3_free(msg);
	return rc == SQLITE_OK ? 0 : -1;
}

static int64_t
query_int(const char *path, const char *sql)
{
	char err[256];
	sqlite3 *db = audit_db_open_ro(path, err, sizeof(err));
	sqlite3_stmt *st;
	int64_t v = -1;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return v;
}

static int64_t
count_checkpoints(const char *path)
{
	return query_int(path, "SELECT count(*) FROM events WHERE kind = "
	    "'admin' AND rule = 'checkpoint'");
}

static int
verify_file(const char *path, EVP_PKEY *pub, struct audit_verify *res)
{
	char err[256];
	sqlite3 *db = audit_db_open_ro(path, err, sizeof(err));
	int rc;

	if (db == NULL) {
		fprintf(stderr, "open %s: %s\n", path, err);
		memset(res, 0, sizeof(*res));
		return -1;
	}
	rc = audit_verify(db, pub, res);
	sqlite3_close(db);
	return rc;
}

static int
copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *in, *out;
	size_t n;
	int rc = 0;

	rm_db(to);
	if ((in = fopen(from, "rb")) == NULL)
		return -1;
	if ((out = fopen(to, "wb")) == NULL) {
		fclose(in);
		return -1;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			rc = -1;
	fclose(in);
	if (fclose(out) != 0)
		rc = -1;
	return rc;
}

/* ------------------------------------------------------------ signers */

static EVP_PKEY *key_a, *key_b, *pub_a, *pub_b;

static int
test_sign(void *ctx, const uint8_t *msg, size_t len, uint8_t sig[64])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	size_t siglen = 64;
	int ok;

	ok = c != NULL && EVP_DigestSignInit(c, NULL, NULL, NULL, ctx) == 1 &&
	    EVP_DigestSign(c, sig, &siglen, msg, len) == 1;
	EVP_MD_CTX_free(c);
	return ok ? 0 : -1;
}

static int
failing_sign(void *ctx, const uint8_t *msg, size_t len, uint8_t sig[64])
{
	return -1;
}

/* The public half of k, as a key of its own. */
static EVP_PKEY *
public_of(EVP_PKEY *k)
{
	uint8_t raw[32];
	size_t len = sizeof(raw);

	if (EVP_PKEY_get_raw_public_key(k, raw, &len) != 1)
		return NULL;
	return EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, len);
}

/* Params signing with key k while claiming the public key of claim. */
static struct audit_params
params_for(EVP_PKEY *k, EVP_PKEY *claim, uint64_t interval_ms)
{
	struct audit_params p;
	size_t len;

	memset(&p, 0, sizeof(p));
	p.checkpoint_ms = interval_ms;
	p.signer.sign = test_sign;
	p.signer.ctx = k;
	len = sizeof(p.signer.public_key);
	CHECK(EVP_PKEY_get_raw_public_key(claim, p.signer.public_key,
	    &len) == 1);
	return p;
}

static void
event_init(struct audit_event *ev, int i)
{
	static char path[4][32];

	memset(ev, 0, sizeof(*ev));
	ev->port = ev->status = -1;
	ev->asn = ev->bytes_up = ev->bytes_down = ev->duration_ms = -1;
	snprintf(path[i % 4], sizeof(path[0]), "/%d", i);
	ev->sandbox = "agent-1";
	ev->kind = "http";
	ev->host = "example.com";
	ev->method = "GET";
	ev->path = path[i % 4];
	ev->status = 403;
	ev->decision = VERDICT_DENY;
	ev->rule = "default-deny";
	ev->reason = "policy-deny";
}

static void
submit(struct audit *a, int n)
{
	struct audit_event ev;
	int i;

	for (i = 0; i < n; i++) {
		event_init(&ev, i);
		CHECK(audit_submit(a, &ev) == 0);
	}
}

/* Open, write n rows, close: one run of a gateway. */
static void
run(const char *path, const struct audit_params *p, int n)
{
	const char *err = NULL;
	struct audit *a = audit_open(path, p, &err);

	CHECK_MSG(a != NULL, "audit_open: %s", err ? err : "?");
	if (a == NULL)
		return;
	submit(a, n);
	audit_close(a);
}

/* Poll until path holds at least n checkpoint rows; their count. */
static int64_t
wait_checkpoints(const char *path, int64_t n)
{
	int64_t have = 0;
	int i;

	for (i = 0; i < 100; i++) {
		if ((have = count_checkpoints(path)) >= n)
			break;
		usleep(30000);
	}
	return have;
}

/*
 * What an attacker with write access but no key does after an edit: give
 * every row from `from` on a fresh prev_hash and hash, so that the hash
 * chain alone is consistent again.
 */
static int
rechain(const char *path, int64_t from)
{
	char sel[512], prev[AUDIT_HASH_HEX + 1], h[AUDIT_HASH_HEX + 1];
	struct audit_val v[AUDIT_NCOLS];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL, *up = NULL;
	int c, rc = -1;

	if (sqlite3_open(path, &db) != SQLITE_OK || exec(db, "BEGIN") == -1)
		goto done;
	snprintf(sel, sizeof(sel), "SELECT %s FROM events WHERE id >= %" PRId64
	    " - 1 ORDER BY id", audit_col_list, from);
	if (sqlite3_prepare_v2(db, sel, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "UPDATE events SET prev_hash = ?, hash = ? "
	    "WHERE id = ?", -1, &up, NULL) != SQLITE_OK)
		goto done;
	memcpy(prev, audit_zero_hash, sizeof(prev));
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &v[c]);
		if (v[AUDIT_COL_ID].i < from) {
			memcpy(prev, v[AUDIT_COL_HASH].p, AUDIT_HASH_HEX);
			continue;
		}
		if (audit_chain_hash(prev, v, h) == -1)
			goto done;
		sqlite3_bind_text(up, 1, prev, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(up, 2, h, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(up, 3, v[AUDIT_COL_ID].i);
		if (sqlite3_step(up) != SQLITE_DONE)
			goto done;
		sqlite3_reset(up);
		memcpy(prev, h, sizeof(prev));
	}
	rc = exec(db, "COMMIT");
done:
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	sqlite3_close(db);
	return rc;
}

/* Copy src, apply sql, rechain from `from` (0: not), verify with pub. */
static int
tampered(const char *src, const char *sql, int64_t from, EVP_PKEY *pub,
    struct audit_verify *res)
{
	const char *path = tpath("tampered.db");
	sqlite3 *db = NULL;

	CHECK(copy_file(src, path) == 0);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK && exec(db, sql) == 0);
	sqlite3_close(db);
	if (from > 0)
		CHECK(rechain(path, from) == 0);
	return verify_file(path, pub, res);
}

/* ----------------------------------------------------- pure functions */

/* tmpl with each '@' a hash of zeros and each '#' a 128-digit signature. */
static void
expand(const char *tmpl, char *out, size_t len)
{
	size_t o = 0, i;

	for (; *tmpl != '\0' && o + 130 < len; tmpl++) {
		if (*tmpl == '@') {
			memcpy(out + o, audit_zero_hash, AUDIT_HASH_HEX);
			o += AUDIT_HASH_HEX;
		} else if (*tmpl == '#') {
			for (i = 0; i < 128; i++)
				out[o++] = "0123456789abcdef"[i % 16];
		} else
			out[o++] = *tmpl;
	}
	out[o] = '\0';
}

static void
test_text(void)
{
	static const char *bad[] = {
		"/events?through=3&head=@&at=interval&key=0123456789abcdef",
		"/events?through=3&head=@&at=interval&key=0123456789abcdef"
		    "&sig=#&sig=#",
		"/events?through=03&head=@&at=interval&key=0123456789abcdef"
		    "&sig=#",
		"/events?through=3&head=@&at=sometimes&key=0123456789abcdef"
		    "&sig=#",
		"/events?through=3&head=@&at=interval&key=0123456789ABCDEF"
		    "&sig=#",
		"/events?through=3&head=@&at=interval&key=0123456789abcdef"
		    "&sig=#&extra=1",
		"/checkpoint?through=3&head=@&at=interval&key=0123456789abcdef"
		    "&sig=#",
	};
	static const char good[] = "/events?through=3&head=@&at=interval&"
	    "key=0123456789abcdef&sig=#";
	struct audit_checkpoint c, d;
	char buf[512], msg[AUDIT_CKPT_MSG_MAX];
	size_t i;
	int n;

	memset(&c, 0, sizeof(c));
	c.through = 41;
	memcpy(c.head, audit_zero_hash, sizeof(c.head));
	c.head[0] = 'a';
	c.shutdown = 1;
	memcpy(c.key_id, "0123456789abcdef", 17);
	for (i = 0; i < 64; i++)
		c.sig[i] = (uint8_t)(i * 7);
	CHECK(audit_checkpoint_format(buf, sizeof(buf), &c) == 0);
	CHECK(strncmp(buf, "/events?through=41&head=a000", 28) == 0);
	CHECK(strstr(buf, "&at=shutdown&key=0123456789abcdef&sig=00070e15") !=
	    NULL);
	CHECK(audit_checkpoint_parse(buf, strlen(buf), &d) == 0);
	CHECK(memcmp(&c, &d, sizeof(c)) == 0);
	CHECK(audit_checkpoint_format(buf, 100, &c) == -1);

	expand(good, buf, sizeof(buf));
	CHECK(audit_checkpoint_parse(buf, strlen(buf), &d) == 0 &&
	    d.through == 3 && !d.shutdown && d.sig[1] == 0x23);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expand(bad[i], buf, sizeof(buf));
		CHECK_MSG(audit_checkpoint_parse(buf, strlen(buf), &d) == -1,
		    "%s", buf);
	}

	n = audit_checkpoint_message(41, c.head, 0, "2026-12-02T14:22:01.123Z",
	    msg, sizeof(msg));
	snprintf(buf, sizeof(buf), "sandgate-audit-checkpoint-v1\nthrough=41\n"
	    "head=%s\nat=interval\nts=2026-12-02T14:22:01.123Z\n", c.head);
	CHECK_STR(msg, buf);
	CHECK_INT(n, strlen(buf));
	CHECK(audit_checkpoint_message(41, c.head, 0, "x", msg, 20) == -1);
}

/* ----------------------------------------------------------- writing */

static void
test_interval_and_close(void)
{
	const char *path = tpath("interval.db");
	struct audit_params p = params_for(key_a, key_a, 100);
	struct audit_verify res;
	struct audit_stats s;
	const char *err = NULL;
	struct audit *a;
	int64_t n;

	a = audit_open(path, &p, &err);
	CHECK(a != NULL);
	if (a == NULL)
		return;
	submit(a, 5);
	/* A checkpoint follows within the interval, while the writer runs. */
	CHECK(wait_checkpoints(path, 1) == 1);
	CHECK(verify_file(path, pub_a, &res) == 0);
	CHECK_INT(res.rows, 6);
	CHECK_INT(res.checkpoints, 1);
	CHECK_INT(res.last_ckpt_id, 6);
	CHECK_INT(res.last_ckpt_shutdown, 0);
	CHECK_INT(res.tail_rows, 0);
	/* Nothing new: no new checkpoint, however many intervals pass. */
	usleep(400000);
	CHECK_INT(count_checkpoints(path), 1);
	submit(a, 2);
	CHECK(wait_checkpoints(path, 2) == 2);
	audit_get_stats(a, &s);
	CHECK_INT(s.checkpoints, 2);
	CHECK_INT(s.checkpoint_failures, 0);
	audit_close(a);

	/* Close signs the end: a shutdown checkpoint after the interval one. */
	n = count_checkpoints(path);
	CHECK_INT(n, 3);
	CHECK(verify_file(path, pub_a, &res) == 0);
	CHECK_INT(res.rows, 10);
	CHECK_INT(res.checkpoints, 3);
	CHECK_INT(res.last_ckpt_id, 10);
	CHECK_INT(res.last_ckpt_shutdown, 1);
	CHECK_INT(res.tail_rows, 0);
	CHECK(strlen(res.last_ckpt_ts) == AUDIT_TS_LEN);

	/* A run with nothing to sign adds nothing; a run with rows does. */
	run(path, &p, 0);
	CHECK_INT(count_checkpoints(path), 3);
	run(path, &p, 1);
	CHECK_INT(count_checkpoints(path), 4);
	CHECK(verify_file(path, pub_a, &res) == 0);
	CHECK_INT(res.rows, 12);
	CHECK_INT(res.last_ckpt_id, 12);
}

static void
test_signers(void)
{
	const char *path = tpath("signers.db");
	struct audit_params p;
	struct audit_verify res;
	struct audit_stats s;
	const char *err = NULL;
	struct audit *a;
	int i;

	/* No signer: no checkpoints, and verify says every row is unsigned. */
	run(path, NULL, 3);
	CHECK_INT(count_checkpoints(path), 0);
	CHECK(verify_file(path, NULL, &res) == 0);
	CHECK_INT(res.checkpoints, 0);
	CHECK_INT(res.tail_rows, 3);
	CHECK_INT(res.tail_first, 1);
	CHECK_INT(res.tail_last, 3);

	/* That unsigned tail (a crash leaves one too) is signed next time. */
	p = params_for(key_a, key_a, 100);
	a = audit_open(path, &p, &err);
	CHECK(a != NULL);
	CHECK(wait_checkpoints(path, 1) == 1);
	audit_close(a);
	CHECK(verify_file(path, pub_a, &res) == 0);
	/* Row 4 the interval checkpoint, row 5 the one at close. */
	CHECK_INT(res.last_ckpt_id, 5);
	CHECK_INT(res.last_ckpt_shutdown, 1);
	CHECK_INT(res.checkpoints, 2);

	/* A signer that fails: rows go on, checkpoints are counted as failed. */
	rm_db(path);
	p.signer.sign = failing_sign;
	a = audit_open(path, &p, &err);
	CHECK(a != NULL);
	submit(a, 4);
	for (i = 0; i < 100; i++) {
		audit_get_stats(a, &s);
		if (s.checkpoint_failures >= 1)
			break;
		usleep(30000);
	}
	CHECK(s.checkpoint_failures >= 1);
	audit_close(a);
	CHECK_INT(count_checkpoints(path), 0);
	CHECK_INT(query_int(path, "SELECT count(*) FROM events"), 4);

	/* A signer whose key is not the public key it names writes nothing. */
	rm_db(path);
	p = params_for(key_b, key_a, 0);
	run(path, &p, 2);
	CHECK_INT(count_checkpoints(path), 0);
	CHECK_INT(query_int(path, "SELECT count(*) FROM events"), 2);
	rm_db(path);
}

/* ---------------------------------------------------------- verifying */

/*
 * Two clean runs: rows 1-3, shutdown checkpoint 4; rows 5-6, shutdown
 * checkpoint 7.
 */
static const char *
two_runs(void)
{
	static char path[512];
	struct audit_params p = params_for(key_a, key_a, 0);

	snprintf(path, sizeof(path), "%s/two.db", tmpdir);
	rm_db(path);
	run(path, &p, 3);
	run(path, &p, 2);
	return path;
}

static void
test_tamper(void)
{
	const char *src = two_runs();
	struct audit_verify res;
	int rc;

	CHECK(verify_file(src, pub_a, &res) == 0);
	CHECK_INT(res.rows, 7);
	CHECK_INT(res.checkpoints, 2);

	/* A rewritten row with every hash recomputed: the checkpoint knows. */
	rc = tampered(src, "UPDATE events SET host = 'good.example' WHERE "
	    "id = 2", 2, pub_a, &res);
	CHECK_INT(rc, 1);
	CHECK_INT(res.bad_id, 4);
	CHECK_MSG(strstr(res.msg, "changed after they were signed") != NULL,
	    "%s", res.msg);
	/* The same in the second run: the first checkpoint still holds. */
	rc = tampered(src, "UPDATE events SET decision = 'allow' WHERE id = 6",
	    6, pub_a, &res);
	CHECK_INT(rc, 1);
	CHECK_INT(res.bad_id, 7);
	/* Without recomputing, the chain itself finds it first. */
	rc = tampered(src, "UPDATE events SET host = 'x' WHERE id = 2", 0,
	    pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 2);
	/*
	 * The checkpoint's head rewritten to match: its signature fails. Its
	 * first two digits become "ab" -- or "cd" when they were "ab" (one
	 * head in 256), so that the head always changes.
	 */
	rc = tampered(src, "UPDATE events SET host = 'x' WHERE id = 2; "
	    "UPDATE events SET path = replace(path, substr(path, "
	    "instr(path, 'head=') + 5, 64), (CASE WHEN substr(path, "
	    "instr(path, 'head=') + 5, 2) = 'ab' THEN 'cd' ELSE 'ab' END) || "
	    "substr(path, instr(path, 'head=') + 7, 62)) WHERE id = 4", 2,
	    pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 4);
	CHECK_MSG(strstr(res.msg, "does not verify") != NULL, "%s", res.msg);
	/* A forged signature. */
	rc = tampered(src, "UPDATE events SET path = substr(path, 1, "
	    "length(path) - 4) || 'beef' WHERE id = 7", 7, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 7);
	CHECK_MSG(strstr(res.msg, "does not verify") != NULL, "%s", res.msg);
	/* A checkpoint turned from interval into shutdown, or moved. */
	rc = tampered(src, "UPDATE events SET path = replace(path, "
	    "'at=shutdown', 'at=interval') WHERE id = 4", 4, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 4);
	rc = tampered(src, "UPDATE events SET path = replace(path, "
	    "'through=3', 'through=2') WHERE id = 4", 4, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 4 && strstr(res.msg, "follows row 3"));
	rc = tampered(src, "UPDATE events SET path = '/events?broken' WHERE "
	    "id = 4", 4, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 4 && strstr(res.msg, "malformed"));

	/* The wrong public key, or none. */
	CHECK(verify_file(src, pub_b, &res) == 1 && res.bad_id == 4);
	CHECK_MSG(strstr(res.msg, "signed by key") != NULL, "%s", res.msg);
	CHECK(verify_file(src, NULL, &res) == 1 && res.bad_id == 4);
	CHECK_MSG(strstr(res.msg, "no public key") != NULL, "%s", res.msg);
}

static void
test_truncation(void)
{
	const char *src = two_runs();
	struct audit_verify res;
	int rc;

	/* The last checkpoint deleted: the rows it signed are a tail again. */
	rc = tampered(src, "DELETE FROM events WHERE id = 7", 0, pub_a, &res);
	CHECK_INT(rc, 0);
	CHECK_INT(res.last_ckpt_id, 4);
	CHECK_INT(res.tail_rows, 2);
	CHECK(res.tail_first == 5 && res.tail_last == 6);
	/* Cut back to a shutdown checkpoint: the file alone cannot tell. */
	rc = tampered(src, "DELETE FROM events WHERE id >= 5", 0, pub_a, &res);
	CHECK(rc == 0 && res.last_ckpt_id == 4 && res.last_ckpt_shutdown &&
	    res.tail_rows == 0);
	/* A checkpoint deleted in the middle: the chain has a gap. */
	rc = tampered(src, "DELETE FROM events WHERE id = 4", 0, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 4);
	/* ... renumbered and rechained: the next checkpoint no longer fits. */
	rc = tampered(src, "DELETE FROM events WHERE id = 4; UPDATE events "
	    "SET id = id - 1 WHERE id > 4", 4, pub_a, &res);
	CHECK(rc == 1 && res.bad_id == 6);
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/sgckpt-XXXXXX",
	    base != NULL && *base != '\0' ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	key_a = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	key_b = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	pub_a = public_of(key_a);
	pub_b = public_of(key_b);
	if (key_a == NULL || key_b == NULL || pub_a == NULL || pub_b == NULL) {
		fprintf(stderr, "no Ed25519 keys\n");
		return 1;
	}
	test_text();
	test_interval_and_close();
	test_signers();
	test_tamper();
	test_truncation();
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	EVP_PKEY_free(pub_a);
	EVP_PKEY_free(pub_b);
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
