/*
 * Unit tests of the audit writer when audit.db cannot be written: a file
 * size limit (RLIMIT_FSIZE) makes every WAL append fail, as a full disk
 * would, without root or a tmpfs. The writer must publish "unavailable"
 * (audit_refuses under on_failure deny, never under allow), keep the rows
 * it could not write, drop only what overflows the queue, recover by itself
 * when the limit goes, leave a chain that verifies, and not hang at close.
 */
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "check.h"
#include "audit/audit.h"
#include "audit/audit_query.h"
#include "core/log.h"

#define QUEUE_ROWS	65536		/* AUDIT_QUEUE_ROWS in audit.c */

static char tmpdir[256];

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static off_t
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Writes at or past the current end of audit.db and its WAL fail now. */
static void
limit_files(const char *db)
{
	char wal[600];
	struct rlimit rl;
	off_t a, b;

	snprintf(wal, sizeof(wal), "%s-wal", db);
	a = file_size(db);
	b = file_size(wal);
	getrlimit(RLIMIT_FSIZE, &rl);
	rl.rlim_cur = (rlim_t)(a > b ? a : b);
	CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

static void
unlimit_files(void)
{
	struct rlimit rl;

	getrlimit(RLIMIT_FSIZE, &rl);
	rl.rlim_cur = rl.rlim_max;
	CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

static int
submit(struct audit *a, const char *sb, int i)
{
	struct audit_event ev;
	char p[32];

	memset(&ev, 0, sizeof(ev));
	ev.port = 80;
	ev.status = 403;
	ev.asn = ev.bytes_up = ev.bytes_down = ev.duration_ms = -1;
	snprintf(p, sizeof(p), "/%d", i);
	ev.sandbox = sb;
	ev.kind = "http";
	ev.host = "example.com";
	ev.method = "GET";
	ev.path = p;
	ev.decision = VERDICT_DENY;
	ev.rule = "default-deny";
	ev.reason = "policy-deny";
	return audit_submit(a, &ev);
}

/* Poll the stats until pred holds or ms pass; 1 when it held. */
static int
wait_stats(struct audit *a, int (*pred)(const struct audit_stats *,
    uint64_t), uint64_t arg, long ms)
{
	struct audit_stats s;
	double end = now_ms() + ms;

	do {
		audit_get_stats(a, &s);
		if (pred(&s, arg))
			return 1;
		pause_ms(10);
	} while (now_ms() < end);
	return 0;
}

static int
written_at_least(const struct audit_stats *s, uint64_t n)
{
	return s->rows_written >= n;
}

static int
is_unavailable(const struct audit_stats *s, uint64_t unused)
{
	return s->unavailable;
}

static int
drained(const struct audit_stats *s, uint64_t n)
{
	return !s->unavailable && s->rows_waiting == 0 && s->rows_written >= n;
}

static int64_t
count_rows(const char *path, const char *sb)
{
	char err[256];
	sqlite3 *db = audit_db_open_ro(path, err, sizeof(err));
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events WHERE "
	    "sandbox = ?", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_bind_text(st, 1, sb, -1, SQLITE_STATIC) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static int
verify_ok(const char *path, struct audit_verify *res)
{
	char err[256];
	sqlite3 *db = audit_db_open_ro(path, err, sizeof(err));
	int rc;

	memset(res, 0, sizeof(*res));
	if (db == NULL)
		return 0;
	rc = audit_verify(db, NULL, res);
	sqlite3_close(db);
	if (rc != 0)
		fprintf(stderr, "verify %s: %s\n", path, res->msg);
	return rc == 0;
}

/*
 * on_failure deny: refused while failing, every queued row kept, the
 * overflow of a full queue dropped (never waited for), all written and
 * chained after the limit goes.
 */
static void
test_deny_and_recover(void)
{
	struct audit_params ap = { .on_failure_allow = 0 };
	struct audit_verify v;
	struct audit_stats s;
	struct audit *a;
	const char *err = NULL;
	char path[512];
	int i, dropped = 0;
	double t0;

	snprintf(path, sizeof(path), "%s/deny.db", tmpdir);
	if ((a = audit_open(path, &ap, &err)) == NULL) {
		CHECK_MSG(0, "audit_open: %s", err);
		return;
	}
	for (i = 0; i < 5; i++)
		CHECK(submit(a, "before", i) == 0);
	CHECK(wait_stats(a, written_at_least, 5, 5000));
	CHECK(audit_refuses(a) == 0);

	limit_files(path);
	/* Rows go on coming until a transaction fails on them. */
	for (i = 0; i < 200 && !audit_refuses(a); i++) {
		CHECK(submit(a, "during", i) == 0);
		pause_ms(60);
	}
	CHECK_MSG(audit_refuses(a), "no failure after %d rows", i);
	audit_get_stats(a, &s);
	CHECK(s.unavailable == 1);
	CHECK_INT(s.unavailable_episodes, 1);
	CHECK(s.write_failures >= 1);
	CHECK_INT(s.rows_dropped, 0);

	/* Fill the queue: no producer waits, the overflow is dropped. */
	t0 = now_ms();
	for (i = 0; i < QUEUE_ROWS + 10; i++)
		if (submit(a, "flood", i) == -1)
			dropped++;
	CHECK_MSG(now_ms() - t0 < 30000, "submitting took %.0f ms",
	    now_ms() - t0);
	/* 10, and one more for each "during" row still in the ring. */
	CHECK_MSG(dropped >= 10 && dropped <= 12, "%d dropped", dropped);
	audit_get_stats(a, &s);
	CHECK_INT(s.rows_dropped, dropped);
	CHECK_INT(s.stalls, 0);
	CHECK(s.rows_waiting >= QUEUE_ROWS);
	CHECK(audit_refuses(a));

	/* Space returns: no restart, the writer finds it by itself. */
	unlimit_files();
	CHECK(wait_stats(a, drained, s.rows_written + s.rows_waiting, 60000));
	CHECK(audit_refuses(a) == 0);
	audit_get_stats(a, &s);
	CHECK_INT(s.unavailable_episodes, 1);
	CHECK(submit(a, "after", 0) == 0);
	audit_close(a);

	CHECK(verify_ok(path, &v));
	CHECK_INT(count_rows(path, "before"), 5);
	CHECK_INT(count_rows(path, "flood"), QUEUE_ROWS + 10 - dropped);
	CHECK_INT(count_rows(path, "after"), 1);
	CHECK(count_rows(path, "during") >= 1);
	CHECK_INT(v.rows, s.rows_written + 1);
}

/* on_failure allow: never refuses, still reports and recovers. */
static void
test_allow(void)
{
	struct audit_params ap = { .on_failure_allow = 1 };
	struct audit_verify v;
	struct audit_stats s;
	struct audit *a;
	const char *err = NULL;
	char path[512];
	int i;

	snprintf(path, sizeof(path), "%s/allow.db", tmpdir);
	if ((a = audit_open(path, &ap, &err)) == NULL) {
		CHECK_MSG(0, "audit_open: %s", err);
		return;
	}
	CHECK(submit(a, "before", 0) == 0);
	CHECK(wait_stats(a, written_at_least, 1, 5000));
	limit_files(path);
	for (i = 0; i < 200; i++) {
		CHECK(submit(a, "during", i) == 0);
		if (wait_stats(a, is_unavailable, 0, 60))
			break;
	}
	audit_get_stats(a, &s);
	CHECK(s.unavailable == 1);
	CHECK(audit_refuses(a) == 0);
	unlimit_files();
	CHECK(wait_stats(a, drained, (uint64_t)i + 2, 10000));
	audit_close(a);
	CHECK(verify_ok(path, &v));
	CHECK_INT(count_rows(path, "during"), i + 1);
}

/* Closing while the disk stays full gives up within seconds. */
static void
test_close_while_failing(void)
{
	struct audit_verify v;
	struct audit *a;
	const char *err = NULL;
	char path[512];
	double t0;
	int i;

	snprintf(path, sizeof(path), "%s/close.db", tmpdir);
	if ((a = audit_open(path, NULL, &err)) == NULL) {
		CHECK_MSG(0, "audit_open: %s", err);
		return;
	}
	for (i = 0; i < 3; i++)
		CHECK(submit(a, "before", i) == 0);
	CHECK(wait_stats(a, written_at_least, 3, 5000));
	limit_files(path);
	for (i = 0; i < 200 && !audit_refuses(a); i++) {
		CHECK(submit(a, "during", i) == 0);
		pause_ms(60);
	}
	CHECK(audit_refuses(a));
	for (i = 0; i < 3000; i++)
		CHECK(submit(a, "queued", i) == 0);
	t0 = now_ms();
	audit_close(a);
	CHECK_MSG(now_ms() - t0 < 5000, "close took %.0f ms", now_ms() - t0);
	unlimit_files();
	CHECK(verify_ok(path, &v));
	CHECK_INT(count_rows(path, "before"), 3);
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	/* Past the limit a write fails with EFBIG instead of killing us. */
	signal(SIGXFSZ, SIG_IGN);
	log_init(LOG_LVL_WARN, "test_audit_unavailable");
	snprintf(tmpdir, sizeof(tmpdir), "%s/sgaudit-full-XXXXXX",
	    base ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_deny_and_recover();
	test_allow();
	test_close_while_failing();
	nftw(tmpdir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
