/*
 * Benchmark of the audit log: sustained rows/s through audit_submit from two
 * producer threads (target 50,000 rows/s on 2 cores), the producer-side cost
 * of one row, and filtered queries on a 10-million-row file. Prints numbers
 * only. Usage: bench_audit [rows per producer] [query rows]
 */
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit/audit.h"
#include "audit/audit_query.h"
#include "core/log.h"

#define PRODUCERS	2

static double
now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void
event_fill(struct audit_event *ev, int t, int i, char *path, size_t len)
{
	static const char *const hosts[] = { "pkgs.example.com", "api.openai.com",
	    "files.pkgcdn.example.com", "evil.example", "github.com" };

	memset(ev, 0, sizeof(*ev));
	snprintf(path, len, "/simple/package-%d/", i);
	ev->sandbox = t ? "agent-1" : "agent-0";
	ev->kind = i % 3 ? "connect" : "http";
	ev->client = "127.0.0.1:40000";
	ev->host = hosts[i % 5];
	ev->ip = "203.0.113.7";
	ev->port = 443;
	ev->asn = -1;
	ev->method = "GET";
	ev->path = path;
	ev->status = i % 4 ? 200 : 403;
	ev->decision = i % 4 ? VERDICT_ALLOW : VERDICT_DENY;
	ev->rule = i % 4 ? "coding-agent:allow[2]" : "default-deny";
	ev->reason = i % 4 ? NULL : "policy-deny";
	ev->bytes_up = 512;
	ev->bytes_down = 4096;
	ev->duration_ms = 35;
}

struct producer {
	struct audit	*a;
	int		 t, n;
	int		 refused;	/* audit_submit said dropped */
	double		 wall_ns, cpu_ns;
};

static void *
producer_main(void *arg)
{
	struct producer *p = arg;
	struct audit_event ev;
	char path[64];
	double w0, c0;
	int i;

	w0 = now_ns(CLOCK_MONOTONIC);
	c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < p->n; i++) {
		event_fill(&ev, p->t, i, path, sizeof(path));
		if (audit_submit(p->a, &ev) == -1)
			p->refused++;
	}
	p->wall_ns = now_ns(CLOCK_MONOTONIC) - w0;
	p->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	return NULL;
}

/* Rows in the events table, or -1. */
static int64_t
count_rows(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events", -1, &st,
	    NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void
bench_throughput(const char *path, int per_producer)
{
	struct producer p[PRODUCERS];
	pthread_t th[PRODUCERS];
	struct audit_stats s;
	struct audit *a;
	const char *err;
	double t0, t_submit, t_close, cpu = 0, wall = 0;
	int i, refused = 0, total = per_producer * PRODUCERS;

	if ((a = audit_open(path, NULL, &err)) == NULL) {
		fprintf(stderr, "audit_open: %s\n", err);
		exit(1);
	}
	t0 = now_ns(CLOCK_MONOTONIC);
	for (i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ .a = a, .t = i, .n = per_producer };
		pthread_create(&th[i], NULL, producer_main, &p[i]);
	}
	for (i = 0; i < PRODUCERS; i++) {
		pthread_join(th[i], NULL);
		cpu += p[i].cpu_ns;
		wall += p[i].wall_ns;
		refused += p[i].refused;
	}
	t_submit = now_ns(CLOCK_MONOTONIC) - t0;
	audit_get_stats(a, &s);
	audit_close(a);
	t_close = now_ns(CLOCK_MONOTONIC) - t0;
	printf("sustained: %d rows from %d producers committed in %.2f s: "
	    "%.0f rows/s (target 50000)\n", total, PRODUCERS, t_close / 1e9,
	    total / (t_close / 1e9));
	printf("  submit phase %.2f s; producer wall per row %.0f ns "
	    "(includes waiting for room), cpu per row %.0f ns\n",
	    t_submit / 1e9, wall / total, cpu / total);
	printf("  stalls %" PRIu64 ", queue high-water %zu, batch ms avg "
	    "%.2f max %.2f\n", s.stalls, s.queue_high_water, s.batch_ms_avg,
	    s.batch_ms_max);
	/* "None dropped" is read from the file, not from our own counters. */
	printf("  rows: submitted %d, refused %d, dropped %" PRIu64
	    ", in the file %" PRId64 "\n", total, refused, s.rows_dropped,
	    count_rows(path));
}

/*
 * The cost a proxied request pays: audit_submit when the writer keeps up,
 * at a steady 20,000 rows/s.
 */
static void
bench_paced(const char *path)
{
	enum { N = 40000, RATE = 20000 };
	struct audit_event ev;
	struct audit *a;
	const char *err;
	char p[64];
	double t0, start, sum = 0, max = 0, d;
	struct timespec gap = { 0, 1000000000L / RATE * 10 };
	int i;

	if ((a = audit_open(path, NULL, &err)) == NULL) {
		fprintf(stderr, "audit_open: %s\n", err);
		exit(1);
	}
	start = now_ns(CLOCK_MONOTONIC);
	for (i = 0; i < N; i++) {
		event_fill(&ev, 0, i, p, sizeof(p));
		t0 = now_ns(CLOCK_MONOTONIC);
		(void)audit_submit(a, &ev);
		d = now_ns(CLOCK_MONOTONIC) - t0;
		sum += d;
		if (d > max)
			max = d;
		if (i % 10 == 9)
			nanosleep(&gap, NULL);
	}
	audit_close(a);
	printf("per request at ~%d rows/s: audit_submit avg %.0f ns, max %.0f "
	    "ns (%.2f s)\n", RATE, sum / N, max,
	    (now_ns(CLOCK_MONOTONIC) - start) / 1e9);
}

static int
exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", sql, msg ? msg : "?");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/*
 * n rows, 100 ms apart, ending now: 50 sandboxes, 4 kinds, a quarter
 * denied, 1000 hosts. Hashes are filler: this measures queries, not verify.
 */
static int
generate(const char *path, int64_t n)
{
	struct audit *a;
	const char *err;
	char sql[2048];
	sqlite3 *db;
	double t0;
	int64_t start_ms = audit_now_ms() - n * 100;

	if ((a = audit_open(path, NULL, &err)) == NULL)
		return -1;
	audit_close(a);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		return -1;
	t0 = now_ns(CLOCK_MONOTONIC);
	/* Faster without the indexes; audit_open below builds them again. */
	snprintf(sql, sizeof(sql),
	    "DROP INDEX events_ts; DROP INDEX events_sandbox;"
	    "DROP INDEX events_decision; DROP INDEX events_host;"
	    "WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM x "
	    "WHERE i < %" PRId64 ") "
	    "INSERT INTO events (id, ts, sandbox, kind, client, host, ip, port, "
	    "method, path, status, decision, rule, reason, bytes_up, bytes_down, "
	    "duration_ms, prev_hash, hash) SELECT i, "
	    "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', (%" PRId64 " + i * 100) / "
	    "1000.0, 'unixepoch'), 'agent-' || (i %% 50), "
	    "CASE i %% 4 WHEN 0 THEN 'http' WHEN 1 THEN 'connect' WHEN 2 THEN "
	    "'dns' ELSE 'socks5' END, '127.0.0.1:' || (30000 + i %% 30000), "
	    "'host' || (i %% 1000) || '.example.com', '203.0.113.7', 443, 'GET', "
	    "'/p/' || i, CASE WHEN i %% 4 = 0 THEN 403 ELSE 200 END, "
	    "CASE WHEN i %% 4 = 0 THEN 'deny' ELSE 'allow' END, "
	    "'coding-agent:allow[' || (i %% 7) || ']', NULL, 100, 1000, 5, "
	    "'%s', '%s' FROM x", n, start_ms, audit_zero_hash, audit_zero_hash);
	if (exec_sql(db, "PRAGMA synchronous = OFF") == -1 ||
	    exec_sql(db, "BEGIN") == -1 || exec_sql(db, sql) == -1 ||
	    exec_sql(db, "COMMIT") == -1) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_close(db);
	printf("generated %" PRId64 " rows in %.1f s", n,
	    (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	t0 = now_ns(CLOCK_MONOTONIC);
	if ((a = audit_open(path, NULL, &err)) == NULL)
		return -1;
	audit_close(a);
	printf(", indexes built in %.1f s\n",
	    (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	return 0;
}

static void
bench_queries(const char *path, int64_t n)
{
	static const struct {
		const char		*what;
		struct audit_filter	 f;
		const char		*since;
	} cases[] = {
		{ "--sandbox agent-7 --since 2h", { .sandbox = "agent-7",
		  .limit = 100 }, "2h" },
		{ "--sandbox agent-7 --since 2h --limit 0", { .sandbox =
		  "agent-7" }, "2h" },
		{ "--sandbox agent-8 --decision deny", { .sandbox = "agent-8",
		  .decision = "deny", .limit = 100 }, NULL },
		{ "--sandbox agent-7 --decision deny (matches none)",
		  { .sandbox = "agent-7", .decision = "deny", .limit = 100 },
		  NULL },
		{ "--decision deny --since 15m", { .decision = "deny",
		  .limit = 100 }, "15m" },
		{ "--host 'host42.*' --since 7d", { .host_glob = "host42.*",
		  .limit = 100 }, "7d" },
		{ "(no filter)", { .limit = 100 }, NULL },
		{ "--sandbox agent-7 --asc", { .sandbox = "agent-7",
		  .limit = 100, .asc = 1 }, NULL },
	};
	char err[256];
	sqlite3 *db;
	FILE *devnull = fopen("/dev/null", "w");
	double t0;
	int64_t rows;
	size_t i;

	if ((db = audit_db_open_ro(path, err, sizeof(err))) == NULL) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct audit_filter f = cases[i].f;

		if (cases[i].since != NULL) {
			f.has_since = 1;
			(void)audit_parse_time(cases[i].since, audit_now_ms(),
			    &f.since_ms);
		}
		t0 = now_ns(CLOCK_MONOTONIC);
		rows = audit_query(db, &f, AUDIT_FMT_JSON, devnull, NULL, err,
		    sizeof(err));
		printf("query on %" PRId64 " rows, %-52s %6" PRId64 " rows "
		    "%8.1f ms\n", n, cases[i].what, rows,
		    (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	}
	sqlite3_close(db);
	fclose(devnull);
}

static int
rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

int
main(int argc, char *argv[])
{
	char dir[] = "/tmp/sgbench-audit-XXXXXX", path[128];
	int per_producer = argc > 1 ? atoi(argv[1]) : 500000;
	int64_t qrows = argc > 2 ? atoll(argv[2]) : 10000000;

	log_init(LOG_LVL_WARN, "bench_audit");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/throughput.db", dir);
	bench_throughput(path, per_producer > 0 ? per_producer : 500000);
	snprintf(path, sizeof(path), "%s/paced.db", dir);
	bench_paced(path);
	if (qrows > 0) {
		snprintf(path, sizeof(path), "%s/query.db", dir);
		if (generate(path, qrows) == 0)
			bench_queries(path, qrows);
		else
			fprintf(stderr, "generating %" PRId64 " rows failed\n",
			    qrows);
	}
	nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}
