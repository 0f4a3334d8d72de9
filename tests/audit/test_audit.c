/*
 * Unit tests of the audit log: timestamps, the canonical encoding and its
 * known answers, filters -> SQL, the JSON/CSV writers, and, on temp
 * databases, the writer, chain verification and tampering, retention,
 * schema migration, four concurrent producers, queries and their plans.
 */
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "audit/audit.h"
#include "audit/audit_query.h"
#include "core/log.h"

static char tmpdir[256];

/* ------------------------------------------------------------ helpers */

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void
tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

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
copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *in, *out;
	size_t n;
	int rc = 0;

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

static sqlite3 *
rw_open(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open(path, &db) != SQLITE_OK) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
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
query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "sql %s: %s\n", sql, sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Run audit_verify on path: its return code and result. */
static int
verify_file(const char *path, struct audit_verify *res)
{
	char err[256];
	sqlite3 *db = audit_db_open_ro(path, err, sizeof(err));
	int rc;

	if (db == NULL) {
		fprintf(stderr, "open %s: %s\n", path, err);
		memset(res, 0, sizeof(*res));
		return -1;
	}
	rc = audit_verify(db, NULL, res);
	sqlite3_close(db);
	return rc;
}

static void
event_init(struct audit_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->port = ev->status = -1;
	ev->asn = ev->bytes_up = ev->bytes_down = ev->duration_ms = -1;
}

/* Write n simple rows (sandbox sb, path "/<i>") with audit_open/close. */
static int
write_rows(const char *path, int n, const char *sb, int64_t ts_ms,
    uint64_t retention_s)
{
	struct audit_params ap = { .retention_s = retention_s };
	struct audit_event ev;
	struct audit *a;
	const char *err = NULL;
	char p[32];
	int i;

	if ((a = audit_open(path, &ap, &err)) == NULL) {
		fprintf(stderr, "audit_open %s: %s\n", path, err);
		return -1;
	}
	for (i = 0; i < n; i++) {
		event_init(&ev);
		snprintf(p, sizeof(p), "/%d", i);
		ev.ts_ms = ts_ms ? ts_ms + i : 0;
		ev.sandbox = sb;
		ev.kind = "http";
		ev.host = "example.com";
		ev.port = 80;
		ev.method = "GET";
		ev.path = p;
		ev.status = 403;
		ev.decision = VERDICT_DENY;
		ev.rule = "default-deny";
		ev.reason = "policy-deny";
		if (audit_submit(a, &ev) != 0)
			return -1;
	}
	audit_close(a);
	return 0;
}

/* ----------------------------------------------------- pure functions */

static void
test_timestamps(void)
{
	static const struct {
		const char	*in;
		int		 ok;
		int64_t		 ms;
		const char	*canon;	/* audit_format_ts of ms */
	} cases[] = {
		{ "1970-01-01T00:00:00Z", 1, 0, "1970-01-01T00:00:00.000Z" },
		{ "2026-12-02T14:22:01.123Z", 1, 1796221321123LL,
		  "2026-12-02T14:22:01.123Z" },
		{ "2026-12-02T14:22:01.1239Z", 1, 1796221321123LL, NULL },
		{ "2026-12-02T14:22:01.1Z", 1, 1796221321100LL, NULL },
		{ "2026-12-02t14:22:01z", 1, 1796221321000LL, NULL },
		{ "2026-12-02 14:22:01Z", 1, 1796221321000LL, NULL },
		{ "2026-12-02T16:22:01+02:00", 1, 1796221321000LL, NULL },
		{ "2026-12-02T12:22:01-02:00", 1, 1796221321000LL, NULL },
		{ "2026-12-02", 1, 1796169600000LL, "2026-12-02T00:00:00.000Z" },
		{ "2024-02-29T23:59:59.999Z", 1, 1709251199999LL,
		  "2024-02-29T23:59:59.999Z" },
		{ "1969-12-31T23:59:59.999Z", 1, -1, "1969-12-31T23:59:59.999Z" },
		{ "2000-03-01T00:00:00Z", 1, 951868800000LL, NULL },
		{ "2023-02-29T00:00:00Z", 0, 0, NULL },
		{ "2026-13-01T00:00:00Z", 0, 0, NULL },
		{ "2026-12-32T00:00:00Z", 0, 0, NULL },
		{ "2026-12-02T24:00:00Z", 0, 0, NULL },
		{ "2026-12-02T14:22:01", 0, 0, NULL },	/* no offset */
		{ "2026-12-02T14:22Z", 0, 0, NULL },
		{ "2026-12-02T14:22:01.Z", 0, 0, NULL },
		{ "2026-12-02T14:22:01Zjunk", 0, 0, NULL },
		{ "2026-12-02T14:22:01+0200", 0, 0, NULL },
		{ "26-12-02", 0, 0, NULL },
		{ "", 0, 0, NULL },
	};
	char buf[64];
	int64_t ms;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = audit_parse_rfc3339(cases[i].in, &ms);

		CHECK_MSG((rc == 0) == cases[i].ok, "parse %s", cases[i].in);
		if (rc != 0 || !cases[i].ok)
			continue;
		CHECK_MSG(ms == cases[i].ms, "%s -> %" PRId64, cases[i].in, ms);
		if (cases[i].canon != NULL) {
			CHECK(audit_format_ts(ms, buf, sizeof(buf)) == 0);
			CHECK_STR(buf, cases[i].canon);
		}
	}
	/* Formatting round-trips through parsing over a wide range. */
	for (ms = -86400000LL * 800; ms < 86400000LL * 365 * 200;
	    ms += 86400000LL * 13 + 3600007) {
		int64_t back;

		CHECK(audit_format_ts(ms, buf, sizeof(buf)) == 0);
		CHECK(audit_parse_rfc3339(buf, &back) == 0 && back == ms);
	}
	CHECK(audit_format_ts(253402300800000LL, buf, sizeof(buf)) == -1);
	CHECK(audit_format_ts(0, buf, 10) == -1);
}

static void
test_parse_time(void)
{
	static const struct {
		const char	*in;
		int		 ok;
		int64_t		 before_now;	/* expected now - ms */
	} cases[] = {
		{ "15m", 1, 15 * 60000LL }, { "2h", 1, 2 * 3600000LL },
		{ "7d", 1, 7 * 86400000LL }, { "30s", 1, 30000 },
		{ "0m", 1, 0 }, { "h", 0, 0 }, { "5", 0, 0 }, { "5w", 0, 0 },
		{ "-5m", 0, 0 }, { "", 0, 0 },
	};
	const int64_t now = 1796221321123LL;
	int64_t ms;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = audit_parse_time(cases[i].in, now, &ms);

		CHECK_MSG((rc == 0) == cases[i].ok, "time %s", cases[i].in);
		if (rc == 0 && cases[i].ok)
			CHECK_INT(now - ms, cases[i].before_now);
	}
	CHECK(audit_parse_time("2026-12-02T14:22:01Z", now, &ms) == 0 &&
	    ms == 1796221321000LL);
}

static void
set_text(struct audit_val *v, const char *s)
{
	memset(v, 0, sizeof(*v));
	v->type = AUDIT_V_TEXT;
	v->p = (const unsigned char *)s;
	v->len = strlen(s);
}

static void
set_int(struct audit_val *v, int64_t i)
{
	memset(v, 0, sizeof(*v));
	v->type = AUDIT_V_INT;
	v->i = i;
}

static void
kat_row1(struct audit_val *v)
{
	memset(v, 0, sizeof(*v) * AUDIT_NCOLS);	/* all NULL */
	set_int(&v[AUDIT_COL_ID], 1);
	set_text(&v[AUDIT_COL_TS], "2026-12-02T14:22:01.123Z");
	set_text(&v[AUDIT_COL_SANDBOX], "agent-7");
	set_text(&v[AUDIT_COL_KIND], "http");
	set_text(&v[AUDIT_COL_CLIENT], "127.0.0.1:5555");
	set_text(&v[AUDIT_COL_HOST], "example.com");
	set_int(&v[AUDIT_COL_PORT], 443);
	set_text(&v[AUDIT_COL_METHOD], "GET");
	set_text(&v[AUDIT_COL_PATH], "/");
	set_int(&v[AUDIT_COL_STATUS], 403);
	set_text(&v[AUDIT_COL_DECISION], "deny");
	set_text(&v[AUDIT_COL_RULE], "default-deny");
	set_text(&v[AUDIT_COL_REASON], "policy-deny");
	set_int(&v[AUDIT_COL_BYTES_UP], 0);
	set_int(&v[AUDIT_COL_DURATION_MS], 12);
}

static void
kat_row2(struct audit_val *v)
{
	memset(v, 0, sizeof(*v) * AUDIT_NCOLS);
	set_int(&v[AUDIT_COL_ID], 2);
	set_text(&v[AUDIT_COL_TS], "2026-12-02T14:22:01.124Z");
	set_text(&v[AUDIT_COL_SANDBOX], "agent-7");
	set_text(&v[AUDIT_COL_KIND], "connect");
	set_text(&v[AUDIT_COL_HOST], "");		/* empty, not NULL */
	set_text(&v[AUDIT_COL_DECISION], "allow");
}

static void
hexdump(const unsigned char *p, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
	out[2 * n] = '\0';
}

/*
 * Known answers computed independently (Python hashlib + struct, as in
 * docs/audit.md and tests/e2e/test_audit_cli.py).
 */
static void
test_encoding(void)
{
	struct audit_val v[AUDIT_NCOLS], w[AUDIT_NCOLS];
	unsigned char buf[512];
	char hex[1100], h1[AUDIT_HASH_HEX + 1], h2[AUDIT_HASH_HEX + 1], h3[65];
	size_t n;

	kat_row2(v);
	n = audit_encode_row(v, buf, sizeof(buf));
	CHECK(n < sizeof(buf));
	hexdump(buf, n, hex);
	CHECK_STR(hex, "0100000000000000020200000018323032362d31322d30325431"
	    "343a32323a30312e3132345a02000000076167656e742d370200000007636f6e"
	    "6e656374000200000000000000000000000200000005616c6c6f770000000000"
	    "00");
	/* A short buffer gets a prefix and the full length. */
	CHECK(audit_encode_row(v, buf, 5) == n);

	kat_row1(v);
	CHECK(audit_chain_hash(audit_zero_hash, v, h1) == 0);
	CHECK_STR(h1, "9299928c8c311f15245e3036bbce0ee2b0af417ba399dd95418480"
	    "ea064b250f");
	kat_row2(w);
	CHECK(audit_chain_hash(h1, w, h2) == 0);
	CHECK_STR(h2, "d26ae8767d27504cd3e600257c4d725044c21090847d27de7e4c75"
	    "e67779df4b");

	/* NULL, empty text, 0 and "0" all hash differently. */
	memset(&w[AUDIT_COL_HOST], 0, sizeof(w[0]));
	CHECK(audit_chain_hash(h1, w, h3) == 0 && strcmp(h3, h2) != 0);
	set_int(&w[AUDIT_COL_HOST], 0);
	CHECK(audit_chain_hash(h1, w, hex) == 0 && strcmp(hex, h2) != 0 &&
	    strcmp(hex, h3) != 0);
	set_text(&w[AUDIT_COL_HOST], "0");
	CHECK(audit_chain_hash(h1, w, h1) == 0 && strcmp(h1, hex) != 0);
	/* Field boundaries are part of the encoding: "ab"+"c" != "a"+"bc". */
	kat_row2(v);
	kat_row2(w);
	set_text(&v[AUDIT_COL_CLIENT], "ab");
	set_text(&v[AUDIT_COL_HOST], "c");
	set_text(&w[AUDIT_COL_CLIENT], "a");
	set_text(&w[AUDIT_COL_HOST], "bc");
	CHECK(audit_chain_hash(audit_zero_hash, v, h1) == 0 &&
	    audit_chain_hash(audit_zero_hash, w, h2) == 0 &&
	    strcmp(h1, h2) != 0);
	CHECK(audit_chain_hash("abc", v, h1) == -1);
	/* Large rows take the heap path and still hash. */
	{
		char *big = malloc(100000);

		memset(big, 'x', 99999);
		big[99999] = '\0';
		set_text(&v[AUDIT_COL_PATH], big);
		CHECK(audit_chain_hash(audit_zero_hash, v, h1) == 0);
		big[5] = 'y';
		CHECK(audit_chain_hash(audit_zero_hash, v, h2) == 0 &&
		    strcmp(h1, h2) != 0);
		free(big);
	}
}

static void
test_build_select(void)
{
	static const char sel[] = "SELECT id, ts, sandbox, kind, client, host, "
	    "ip, port, country, asn, method, path, status, decision, rule, "
	    "reason, credential, bytes_up, bytes_down, duration_ms, prev_hash, "
	    "hash FROM events";
	static const struct {
		struct audit_filter	 f;
		const char		*tail;
		const char		*binds;	/* "s:..|i:.." */
	} cases[] = {
		{ { .limit = 100 }, " ORDER BY ts DESC, id DESC LIMIT ?",
		  "i:100" },
		{ { .limit = 0, .asc = 1 }, " ORDER BY ts ASC, id ASC", "" },
		{ { .sandbox = "agent-7", .decision = "deny", .limit = 5 },
		  " WHERE sandbox = ? AND decision = ? ORDER BY ts DESC, "
		  "id DESC LIMIT ?", "s:agent-7|s:deny|i:5" },
		{ { .has_since = 1, .since_ms = 1796221321123LL, .has_until = 1,
		    .until_ms = 1796221321124LL },
		  " WHERE ts >= ? AND ts < ? ORDER BY ts DESC, id DESC",
		  "s:2026-12-02T14:22:01.123Z|s:2026-12-02T14:22:01.124Z" },
		{ { .host_glob = "*.Pkgs.Example.Com", .kind = "connect",
		    .credential = "openai" },
		  " WHERE kind = ? AND host GLOB ? AND credential = ? ORDER BY "
		  "ts DESC, id DESC", "s:connect|s:*.pkgs.example.com|s:openai" },
		{ { .after_id = 41, .upto_id = 99, .by_id = 1, .asc = 1,
		    .limit = 1000 },
		  " WHERE id > ? AND id <= ? ORDER BY id ASC LIMIT ?",
		  "i:41|i:99|i:1000" },
		/* A hostile value stays a parameter. */
		{ { .sandbox = "x' OR 1=1 --" }, " WHERE sandbox = ? ORDER BY "
		  "ts DESC, id DESC", "s:x' OR 1=1 --" },
		/* Times beyond the format clamp to its range. */
		{ { .has_since = 1, .since_ms = INT64_MIN / 2 },
		  " WHERE ts >= ? ORDER BY ts DESC, id DESC",
		  "s:0001-01-01T00:00:00.000Z" },
	};
	struct audit_sql q;
	struct audit_filter f;
	const char *err = NULL;
	char want[2048], got[2048], *big;
	size_t i, len;
	int b;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(audit_build_select(&cases[i].f, &q, &err) == 0);
		snprintf(want, sizeof(want), "%s%s", sel, cases[i].tail);
		CHECK_STR(q.text, want);
		got[0] = '\0';
		for (b = 0, len = 0; b < q.n_binds; b++) {
			if (q.binds[b].is_int)
				len += snprintf(got + len, sizeof(got) - len,
				    "%si:%" PRId64, b ? "|" : "", q.binds[b].i);
			else
				len += snprintf(got + len, sizeof(got) - len,
				    "%ss:%s", b ? "|" : "", q.binds[b].s);
		}
		CHECK_STR(got, cases[i].binds);
	}
	big = malloc(5000);
	memset(big, 'a', 4999);
	big[4999] = '\0';
	memset(&f, 0, sizeof(f));
	f.host_glob = big;
	CHECK(audit_build_select(&f, &q, &err) == -1 && err != NULL);
	memset(&f, 0, sizeof(f));
	f.sandbox = big;
	CHECK(audit_build_select(&f, &q, &err) == -1);
	free(big);
	/* --kind lists: the vocabulary's words in place, never the caller's */
	{
		unsigned in, out;
		char bad[32];

		CHECK(audit_parse_kinds("http,connect", &in, &out, bad,
		    sizeof(bad)) == 0 && in == 3 && out == 0);
		CHECK(audit_parse_kinds("-admin,-vault", &in, &out, bad,
		    sizeof(bad)) == 0 && in == 0 && out == (1u << 6 | 1u << 7));
		CHECK(audit_parse_kinds("dns,-dnsx", &in, &out, bad,
		    sizeof(bad)) == -1);
		CHECK_STR(bad, "-dnsx");
		CHECK(audit_parse_kinds("http,", &in, &out, bad,
		    sizeof(bad)) == -1);
		CHECK(audit_parse_kinds("", &in, &out, bad, sizeof(bad)) == -1);
		CHECK(audit_parse_kinds("x') OR 1=1 --", &in, &out, bad,
		    sizeof(bad)) == -1);
		memset(&f, 0, sizeof(f));
		f.kinds_in = 1u << 3 | 1u << 0;
		f.kinds_out = 1u << 6;
		f.sandbox = "b";
		CHECK(audit_build_select(&f, &q, &err) == 0);
		snprintf(want, sizeof(want), "%s WHERE sandbox = ? AND kind IN "
		    "('http', 'dns') AND kind NOT IN ('admin') ORDER BY ts DESC, "
		    "id DESC", sel);
		CHECK_STR(q.text, want);
		CHECK(q.n_binds == 1);
		f.store = 1;
		CHECK(audit_build_select(&f, &q, &err) == 0);
		CHECK(strstr(q.text, "sandbox = $1 AND kind IN ('http', 'dns') "
		    "AND kind NOT IN ('admin')") != NULL);
	}
	CHECK(audit_glob_lower("API.Example.COM*", got, sizeof(got)) == 0);
	CHECK_STR(got, "api.example.com*");
	CHECK(audit_glob_lower("abcdef", got, 6) == -1);
}

static void
test_vocab_and_retention_text(void)
{
	static const struct {
		const char	*path;
		int		 ok;
		int64_t		 through;
	} cases[] = {
		{ "/events?through=42&rows=42&before=2026-12-02T14:22:01.123Z"
		  "&anchor=9299928c8c311f15245e3036bbce0ee2b0af417ba399dd95418480"
		  "ea064b250f", 1, 42 },
		{ "/events?anchor=9299928c8c311f15245e3036bbce0ee2b0af417ba399dd9"
		  "5418480ea064b250f&through=7", 1, 7 },
		{ "/events?through=42", 0, 0 },
		{ "/events?through=4x2&anchor=9299928c8c311f15245e3036bbce0ee2b0a"
		  "f417ba399dd95418480ea064b250f", 0, 0 },
		{ "/events?through=42&anchor=9299928C8C311F15245e3036bbce0ee2b0a"
		  "f417ba399dd95418480ea064b250f", 0, 0 },
		{ "/other?through=42&anchor=9299928c8c311f15245e3036bbce0ee2b0af"
		  "417ba399dd95418480ea064b250f", 0, 0 },
		{ "/events?through=99999999999999999999&anchor=9299928c8c311f152"
		  "45e3036bbce0ee2b0af417ba399dd95418480ea064b250f", 0, 0 },
	};
	char buf[256], anchor[AUDIT_HASH_HEX + 1];
	int64_t through;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = audit_retention_parse(cases[i].path,
		    strlen(cases[i].path), &through, anchor);

		CHECK_MSG((rc == 0) == cases[i].ok, "%s", cases[i].path);
		if (rc == 0 && cases[i].ok) {
			CHECK_INT(through, cases[i].through);
			CHECK_STR(anchor, "9299928c8c311f15245e3036bbce0ee2b0af4"
			    "17ba399dd95418480ea064b250f");
		}
	}
	CHECK(audit_retention_format(buf, sizeof(buf), 12, 12,
	    "2026-12-02T14:22:01.123Z", audit_zero_hash) == 0);
	CHECK(audit_retention_parse(buf, strlen(buf), &through, anchor) == 0 &&
	    through == 12 && strcmp(anchor, audit_zero_hash) == 0);
	CHECK(audit_retention_format(buf, 20, 12, 12, "x", audit_zero_hash) ==
	    -1);
	CHECK(audit_valid_kind("socks5") && audit_valid_kind("vault") &&
	    !audit_valid_kind("HTTP") && !audit_valid_kind("ftp"));
	CHECK(audit_valid_decision("deny") && !audit_valid_decision("denied"));
}

static char *
write_to_string(void (*fn)(FILE *, const struct audit_val *),
    const struct audit_val *row)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, row);
	fclose(f);
	return buf;
}

static void
test_writers(void)
{
	struct audit_val row[AUDIT_NCOLS];
	char *s;

	memset(row, 0, sizeof(row));
	set_int(&row[AUDIT_COL_ID], 7);
	set_text(&row[AUDIT_COL_TS], "2026-12-02T14:22:01.123Z");
	set_text(&row[AUDIT_COL_SANDBOX], "a\"b\\c");
	set_text(&row[AUDIT_COL_KIND], "http");
	set_int(&row[AUDIT_COL_PORT], 443);
	set_int(&row[AUDIT_COL_ASN], 0);
	set_text(&row[AUDIT_COL_PATH], "/x,\"y\"\r\n\t\x01\xff\xc3\xa9");
	set_text(&row[AUDIT_COL_CREDENTIAL], "");
	set_int(&row[AUDIT_COL_BYTES_UP], -5);
	set_text(&row[AUDIT_COL_HASH], "h");

	s = write_to_string(audit_write_json, row);
	CHECK_STR(s, "{\"id\":7,\"ts\":\"2026-12-02T14:22:01.123Z\","
	    "\"sandbox\":\"a\\\"b\\\\c\",\"kind\":\"http\",\"client\":null,"
	    "\"host\":null,\"ip\":null,\"port\":443,\"country\":null,"
	    "\"asn\":0,\"method\":null,"
	    "\"path\":\"/x,\\\"y\\\"\\r\\n\\t\\u0001\\ufffd\xc3\xa9\","
	    "\"status\":null,\"decision\":null,\"rule\":null,\"reason\":null,"
	    "\"credential\":\"\",\"bytes_up\":-5,\"bytes_down\":null,"
	    "\"duration_ms\":null,\"prev_hash\":null,\"hash\":\"h\"}\n");
	free(s);

	s = write_to_string(audit_write_csv, row);
	CHECK_STR(s, "7,2026-12-02T14:22:01.123Z,\"a\"\"b\\c\",http,,,,443,,0,,"
	    "\"/x,\"\"y\"\"\r\n\t\x01\xff\xc3\xa9\",,,,,\"\",-5,,,,h\r\n");
	free(s);
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		audit_write_csv_header(f);
		fclose(f);
		CHECK_STR(buf, "id,ts,sandbox,kind,client,host,ip,port,country,"
		    "asn,method,path,status,decision,rule,reason,credential,"
		    "bytes_up,bytes_down,duration_ms,prev_hash,hash\r\n");
		free(buf);
	}
}

/* ------------------------------------------------------ on a database */

static void
test_write_and_read_back(void)
{
	char path[512], err[256], *big;
	struct audit_event ev;
	struct audit_stats stats;
	struct audit_verify res;
	struct audit *a;
	const char *errstr = NULL;
	sqlite3 *db;
	sqlite3_stmt *st;

	tmp_path(path, sizeof(path), "rw.db");
	a = audit_open(path, NULL, &errstr);
	CHECK(a != NULL);
	if (a == NULL)
		return;
	event_init(&ev);
	ev.ts_ms = 1796221321123LL;
	ev.sandbox = "agent-7";
	ev.kind = "connect";
	ev.client = "127.0.0.1:40000";
	ev.host = "API.Example.COM";
	ev.ip = "203.0.113.9";
	ev.port = 443;
	ev.country = "NL";
	ev.asn = 64500;
	ev.method = "CONNECT";
	ev.status = 200;
	ev.decision = VERDICT_ALLOW;
	ev.rule = "p:allow[0]";
	ev.reason = NULL;
	ev.credential = "openai";
	ev.bytes_up = 1234;
	ev.bytes_down = 0;
	ev.duration_ms = 56;
	CHECK(audit_submit(a, &ev) == 0);
	/* Absent values, a long path, a time the format cannot hold. */
	event_init(&ev);
	ev.ts_ms = 253402300800000LL + 5;
	ev.kind = "dns";
	big = malloc(10000);
	memset(big, 'p', 9999);
	big[9999] = '\0';
	ev.path = big;
	ev.decision = VERDICT_DENY;
	CHECK(audit_submit(a, &ev) == 0);
	free(big);	/* the writer owns a copy */
	audit_close(a);

	db = audit_db_open_ro(path, err, sizeof(err));
	CHECK(db != NULL);
	if (db == NULL)
		return;
	CHECK(sqlite3_prepare_v2(db, "SELECT id, ts, sandbox, kind, client, "
	    "host, ip, port, country, asn, method, path, status, decision, "
	    "rule, reason, credential, bytes_up, bytes_down, duration_ms, "
	    "prev_hash, hash, typeof(port), typeof(reason), length(path) "
	    "FROM events ORDER BY id", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK_INT(sqlite3_column_int64(st, 0), 1);
	CHECK_STR((const char *)sqlite3_column_text(st, 1),
	    "2026-12-02T14:22:01.123Z");
	CHECK_STR((const char *)sqlite3_column_text(st, 2), "agent-7");
	CHECK_STR((const char *)sqlite3_column_text(st, 3), "connect");
	CHECK_STR((const char *)sqlite3_column_text(st, 4), "127.0.0.1:40000");
	CHECK_STR((const char *)sqlite3_column_text(st, 5), "api.example.com");
	CHECK_STR((const char *)sqlite3_column_text(st, 6), "203.0.113.9");
	CHECK_INT(sqlite3_column_int64(st, 7), 443);
	CHECK_STR((const char *)sqlite3_column_text(st, 8), "NL");
	CHECK_INT(sqlite3_column_int64(st, 9), 64500);
	CHECK_STR((const char *)sqlite3_column_text(st, 10), "CONNECT");
	CHECK(sqlite3_column_type(st, 11) == SQLITE_NULL);
	CHECK_INT(sqlite3_column_int64(st, 12), 200);
	CHECK_STR((const char *)sqlite3_column_text(st, 13), "allow");
	CHECK_STR((const char *)sqlite3_column_text(st, 14), "p:allow[0]");
	CHECK(sqlite3_column_type(st, 15) == SQLITE_NULL);
	CHECK_STR((const char *)sqlite3_column_text(st, 16), "openai");
	CHECK_INT(sqlite3_column_int64(st, 17), 1234);
	CHECK_INT(sqlite3_column_int64(st, 18), 0);
	CHECK_INT(sqlite3_column_int64(st, 19), 56);
	CHECK_STR((const char *)sqlite3_column_text(st, 20), audit_zero_hash);
	CHECK_INT(sqlite3_column_bytes(st, 21), 64);
	CHECK_STR((const char *)sqlite3_column_text(st, 22), "integer");
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK_INT(sqlite3_column_int64(st, 0), 2);
	CHECK_INT(sqlite3_column_bytes(st, 1), AUDIT_TS_LEN);	/* now */
	CHECK(sqlite3_column_type(st, 2) == SQLITE_NULL);
	CHECK(sqlite3_column_type(st, 7) == SQLITE_NULL);
	CHECK(sqlite3_column_type(st, 9) == SQLITE_NULL);
	CHECK(sqlite3_column_type(st, 17) == SQLITE_NULL);
	CHECK_INT(sqlite3_column_int64(st, 24), 4096);
	CHECK(sqlite3_step(st) == SQLITE_DONE);
	sqlite3_finalize(st);
	/* Schema: exactly the columns, the version, the four indexes. */
	CHECK_INT(query_int(db, "PRAGMA user_version"), AUDIT_SCHEMA_VERSION);
	CHECK_INT(query_int(db, "SELECT count(*) FROM pragma_table_info("
	    "'events')"), AUDIT_NCOLS);
	CHECK_INT(query_int(db, "SELECT count(*) FROM pragma_table_info("
	    "'events') WHERE pk = 1 AND name = 'id' AND type = 'INTEGER'"), 1);
	CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master WHERE "
	    "type = 'index' AND tbl_name = 'events' AND name IN ('events_ts', "
	    "'events_sandbox', 'events_decision', 'events_host')"), 4);
	CHECK_INT(query_int(db, "SELECT count(*) FROM pragma_index_info("
	    "'events_sandbox') WHERE seqno = 0 AND name = 'sandbox'"), 1);
	CHECK_STR((const char *)(sqlite3_prepare_v2(db, "PRAGMA journal_mode",
	    -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW ?
	    sqlite3_column_text(st, 0) : (const unsigned char *)"?"), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);
	{
		int i;

		for (i = 0; i < AUDIT_NCOLS; i++) {
			char sql[128];

			snprintf(sql, sizeof(sql), "SELECT cid FROM "
			    "pragma_table_info('events') WHERE name = '%s'",
			    audit_col_names[i]);
			db = rw_open(path);
			CHECK_INT(query_int(db, sql), i);
			sqlite3_close(db);
		}
	}
	CHECK(verify_file(path, &res) == 0 && res.rows == 2);

	/* A restart continues the chain. */
	CHECK(write_rows(path, 3, "agent-8", 0, 0) == 0);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, 5);
	a = audit_open(path, NULL, &errstr);
	audit_get_stats(a, &stats);
	CHECK_INT(stats.rows_written, 0);
	audit_close(a);
	rm_db(path);

	/* Errors are reported, not fatal. */
	CHECK(audit_open("/nonexistent-dir/x/audit.db", NULL, &errstr) == NULL &&
	    errstr != NULL);
	CHECK(audit_submit(NULL, &ev) == -1);
}

/* Copy src to a fresh file, damage it with sql, verify: the bad id. */
static void
tamper_case(const char *src, const char *sql, int64_t want_bad,
    const char *want_msg)
{
	char path[512];
	struct audit_verify res;
	sqlite3 *db;
	int rc;

	tmp_path(path, sizeof(path), "tamper.db");
	rm_db(path);
	CHECK(copy_file(src, path) == 0);
	db = rw_open(path);
	CHECK(db != NULL && exec(db, sql) == 0);
	sqlite3_close(db);
	rc = verify_file(path, &res);
	CHECK_MSG(rc == 1, "%s: rc %d", sql, rc);
	CHECK_MSG(res.bad_id == want_bad, "%s: bad id %" PRId64 " (%s)", sql,
	    res.bad_id, res.msg);
	CHECK_MSG(strstr(res.msg, want_msg) != NULL, "%s: msg %s", sql,
	    res.msg);
	rm_db(path);
}

static void
test_tamper(void)
{
	static const struct {
		const char	*sql;
		int64_t		 bad;
		const char	*msg;
	} cases[] = {
		{ "UPDATE events SET decision = 'allow' WHERE id = 5", 5,
		  "hash does not match" },
		/* The same bytes as a BLOB: the type is part of the hash. */
		{ "UPDATE events SET decision = CAST(decision AS BLOB) "
		  "WHERE id = 7", 7, "hash does not match" },
		{ "UPDATE events SET status = 403.0 + 0.5 WHERE id = 8", 8,
		  "hash does not match" },
		{ "UPDATE events SET host = NULL WHERE id = 1", 1,
		  "hash does not match" },
		{ "UPDATE events SET hash = prev_hash WHERE id = 20", 20,
		  "hash does not match" },
		{ "UPDATE events SET prev_hash = upper(prev_hash) WHERE id = 3",
		  3, "prev_hash is not 64" },
		{ "DELETE FROM events WHERE id = 6", 6, "missing" },
		{ "DELETE FROM events WHERE id = 1", 1, "missing" },
		{ "DELETE FROM events WHERE id <= 4", 1, "missing" },
		/* The last row is chained like every other. */
		{ "UPDATE events SET path = '/x' WHERE id = 20", 20,
		  "hash does not match" },
		/* Swap rows 9 and 10 whole (ids stay in order). */
		{ "CREATE TEMP TABLE t AS SELECT * FROM events WHERE id IN "
		  "(9, 10); DELETE FROM events WHERE id IN (9, 10); "
		  "INSERT INTO events SELECT 19 - id, ts, sandbox, kind, client, "
		  "host, ip, port, country, asn, method, path, status, "
		  "decision, rule, reason, credential, bytes_up, bytes_down, "
		  "duration_ms, prev_hash, hash FROM t", 9, "" },
		/* Swap the contents of rows 12 and 13, hashes included. */
		{ "UPDATE events SET path = CASE id WHEN 12 THEN (SELECT path "
		  "FROM events WHERE id = 13) ELSE (SELECT path FROM events "
		  "WHERE id = 12) END WHERE id IN (12, 13)", 12,
		  "hash does not match" },
		/* A row inserted at the end with a made-up hash. */
		{ "INSERT INTO events (id, ts, kind, prev_hash, hash) SELECT "
		  "21, ts, kind, hash, hash FROM events WHERE id = 20", 21,
		  "hash does not match" },
		/* A row inserted after a gap. */
		{ "INSERT INTO events (id, ts, kind, prev_hash, hash) SELECT "
		  "30, ts, kind, hash, hash FROM events WHERE id = 20", 21,
		  "missing" },
	};
	char path[512];
	struct audit_verify res;
	size_t i;

	tmp_path(path, sizeof(path), "chain.db");
	CHECK(write_rows(path, 20, "agent-7", 0, 0) == 0);
	CHECK(verify_file(path, &res) == 0 && res.rows == 20);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tamper_case(path, cases[i].sql, cases[i].bad, cases[i].msg);
	rm_db(path);
}

/* Wait until a read-only look at path finds a retention row after min_id. */
static int64_t
wait_retention_row(const char *path, int64_t min_id)
{
	char err[256], sql[160];
	sqlite3 *db;
	int64_t id = 0;
	int i;

	snprintf(sql, sizeof(sql), "SELECT ifnull(max(id), 0) FROM events "
	    "WHERE kind = 'admin' AND rule = 'retention' AND id > %" PRId64,
	    min_id);
	for (i = 0; i < 100 && id <= 0; i++) {
		if ((db = audit_db_open_ro(path, err, sizeof(err))) != NULL) {
			id = query_int(db, sql);
			sqlite3_close(db);
		}
		if (id <= 0)
			usleep(50000);
	}
	return id;
}

static void
test_retention(void)
{
	char path[512], err[256];
	struct audit_verify res;
	struct audit *a;
	const char *errstr = NULL;
	int64_t now = audit_now_ms(), rid, through;
	char anchor[AUDIT_HASH_HEX + 1];
	sqlite3 *db;
	sqlite3_stmt *st;

	tmp_path(path, sizeof(path), "ret.db");
	/* 50 rows ten days old, then 10 from now. */
	CHECK(write_rows(path, 50, "old", now - 10 * 86400000LL, 0) == 0);
	CHECK(write_rows(path, 10, "new", 0, 0) == 0);
	a = audit_open(path, &(struct audit_params){ .retention_s = 86400 },
	    &errstr);
	CHECK(a != NULL);
	rid = wait_retention_row(path, 0);
	audit_close(a);
	CHECK_INT(rid, 61);
	db = audit_db_open_ro(path, err, sizeof(err));
	CHECK_INT(query_int(db, "SELECT count(*) FROM events WHERE "
	    "sandbox = 'old'"), 0);
	CHECK_INT(query_int(db, "SELECT count(*) FROM events WHERE "
	    "sandbox = 'new'"), 10);
	CHECK_INT(query_int(db, "SELECT min(id) FROM events"), 51);
	CHECK(sqlite3_prepare_v2(db, "SELECT path, kind, decision, rule, "
	    "reason FROM events WHERE id = 61", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW);
	CHECK(audit_retention_parse((const char *)sqlite3_column_text(st, 0),
	    (size_t)sqlite3_column_bytes(st, 0), &through, anchor) == 0);
	CHECK_INT(through, 50);
	CHECK(strstr((const char *)sqlite3_column_text(st, 0), "rows=50&") !=
	    NULL);
	CHECK_STR((const char *)sqlite3_column_text(st, 1), "admin");
	CHECK_STR((const char *)sqlite3_column_text(st, 3), "retention");
	sqlite3_finalize(st);
	sqlite3_close(db);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, 11);

	/* Deleting the first survivor is still caught. */
	tamper_case(path, "DELETE FROM events WHERE id = 51", 51, "missing");
	/* Editing the retention row is caught at the retention row. */
	tamper_case(path, "UPDATE events SET reason = 'x' WHERE id = 61", 61,
	    "hash does not match");
	/* Moving its anchor point cannot hide a deletion either. */
	tamper_case(path, "DELETE FROM events WHERE id IN (51, 52)", 51,
	    "missing");

	/* Everything is older than a second: all of it goes, chain holds. */
	sleep(2);
	a = audit_open(path, &(struct audit_params){ .retention_s = 1 }, &errstr);
	CHECK(a != NULL);
	rid = wait_retention_row(path, 61);
	audit_close(a);
	CHECK_INT(rid, 62);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, 1);
	CHECK(write_rows(path, 5, "later", 0, 0) == 0);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, 6);
	rm_db(path);
}

/* The layout of schema version 1, before the hash chain. */
static const char v1_schema[] =
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts TEXT, sandbox TEXT, "
    "kind TEXT, client TEXT, host TEXT, port INTEGER, method TEXT, "
    "path TEXT, status INTEGER, decision TEXT, rule TEXT, reason TEXT, "
    "bytes_up INTEGER, bytes_down INTEGER, duration_ms INTEGER);"
    "CREATE INDEX events_ts ON events(ts);"
    "INSERT INTO events VALUES (1, '2026-01-01T00:00:00.000Z', 'a', 'http', "
    "'127.0.0.1:1', 'x.test', 80, 'GET', '/1', 403, 'deny', 'default-deny', "
    "'policy-deny', 10, 20, 3);"
    "INSERT INTO events VALUES (2, '2026-01-01T00:00:01.000Z', 'a', "
    "'connect', NULL, 'y.test', '443', 'CONNECT', NULL, 200, 'allow', "
    "'p:allow[0]', NULL, 1, 2, 30);"
    "INSERT INTO events VALUES (5, '2026-01-01T00:00:02.000Z', 'b', 'dns', "
    "NULL, 'z.test', NULL, NULL, NULL, NULL, 'deny', NULL, NULL, NULL, NULL, "
    "NULL);";

static void
test_migration(void)
{
	static const struct {
		const char	*setup;
		int		 ok;
	} cases[] = {
		{ "PRAGMA user_version = 1", 1 },
		{ "PRAGMA user_version = 0", 1 },	/* unversioned table */
		{ "PRAGMA user_version = 3", 0 },	/* from the future */
	};
	char path[512], err[256];
	struct audit_verify res;
	struct audit *a;
	const char *errstr;
	sqlite3 *db;
	size_t i;

	tmp_path(path, sizeof(path), "mig.db");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rm_db(path);
		db = rw_open(path);
		CHECK(exec(db, v1_schema) == 0 && exec(db, cases[i].setup) == 0);
		sqlite3_close(db);
		errstr = NULL;
		a = audit_open(path, NULL, &errstr);
		CHECK_MSG((a != NULL) == cases[i].ok, "case %zu: %s", i,
		    errstr ? errstr : "opened");
		if (a == NULL) {
			/* Refused, and the file was left as it was. */
			db = rw_open(path);
			CHECK_INT(query_int(db, "SELECT count(*) FROM events"),
			    3);
			CHECK_INT(query_int(db, "PRAGMA user_version"), 3);
			sqlite3_close(db);
			continue;
		}
		{
			struct audit_event ev;

			event_init(&ev);
			ev.kind = "http";
			ev.decision = VERDICT_ALLOW;
			CHECK(audit_submit(a, &ev) == 0);
		}
		audit_close(a);
		db = audit_db_open_ro(path, err, sizeof(err));
		CHECK(db != NULL);
		CHECK_INT(query_int(db, "PRAGMA user_version"), 2);
		CHECK_INT(query_int(db, "SELECT count(*) FROM pragma_table_info("
		    "'events')"), AUDIT_NCOLS);
		CHECK_INT(query_int(db, "SELECT cid FROM pragma_table_info("
		    "'events') WHERE name = 'hash'"), AUDIT_COL_HASH);
		CHECK_INT(query_int(db, "SELECT count(*) FROM events"), 4);
		CHECK_INT(query_int(db, "SELECT group_concat(id) = '1,2,5,6' "
		    "FROM (SELECT id FROM events ORDER BY id)"), 1);
		CHECK_INT(query_int(db, "SELECT bytes_down FROM events WHERE "
		    "id = 1"), 20);
		CHECK_INT(query_int(db, "SELECT port FROM events WHERE id = 2"),
		    443);
		CHECK_INT(query_int(db, "SELECT count(*) FROM events WHERE "
		    "length(hash) = 64 AND length(prev_hash) = 64"), 4);
		CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master "
		    "WHERE name LIKE 'events_%' AND type = 'index'"), 5);
		CHECK_INT(query_int(db, "SELECT count(*) FROM sqlite_master "
		    "WHERE name = 'events_old'"), 0);
		sqlite3_close(db);
		/* The v1 file had a gap (ids 1, 2, 5): verify says so, at 3. */
		CHECK(verify_file(path, &res) == 1);
		CHECK_INT(res.bad_id, 3);
	}
	/* A gapless old file verifies whole after the upgrade. */
	rm_db(path);
	db = rw_open(path);
	CHECK(exec(db, v1_schema) == 0 &&
	    exec(db, "UPDATE events SET id = 3 WHERE id = 5; "
	    "PRAGMA user_version = 1") == 0);
	sqlite3_close(db);
	CHECK(write_rows(path, 2, "c", 0, 0) == 0);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, 5);
	rm_db(path);
}

struct producer {
	struct audit	*a;
	int		 t;
	int		 n;
	int		 failed;
};

static void *
producer_main(void *arg)
{
	struct producer *p = arg;
	struct audit_event ev;
	char sb[16], path[32];
	int i;

	snprintf(sb, sizeof(sb), "t%d", p->t);
	for (i = 0; i < p->n; i++) {
		event_init(&ev);
		snprintf(path, sizeof(path), "/%d", i);
		ev.sandbox = sb;
		ev.kind = "http";
		ev.host = "load.test";
		ev.path = path;
		ev.decision = VERDICT_DENY;
		ev.port = 80;
		ev.status = 403;
		if (audit_submit(p->a, &ev) != 0)
			p->failed++;
	}
	return NULL;
}

static void
test_concurrency(void)
{
	enum { THREADS = 4, ROWS = 50000 };
	struct producer p[THREADS];
	pthread_t th[THREADS];
	struct audit_stats stats;
	struct audit_verify res;
	struct audit *a;
	const char *errstr;
	char path[512], err[256], sql[160];
	sqlite3 *db;
	int i;

	tmp_path(path, sizeof(path), "conc.db");
	a = audit_open(path, NULL, &errstr);
	CHECK(a != NULL);
	if (a == NULL)
		return;
	for (i = 0; i < THREADS; i++) {
		p[i] = (struct producer){ a, i, ROWS, 0 };
		pthread_create(&th[i], NULL, producer_main, &p[i]);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT(p[i].failed, 0);
	}
	audit_get_stats(a, &stats);
	CHECK(stats.queue_high_water > 0);
	CHECK(stats.queue_high_water <= 65536);
	audit_close(a);
	db = audit_db_open_ro(path, err, sizeof(err));
	CHECK_INT(query_int(db, "SELECT count(*) FROM events"), THREADS * ROWS);
	CHECK_INT(query_int(db, "SELECT max(id) FROM events"), THREADS * ROWS);
	for (i = 0; i < THREADS; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(DISTINCT path) FROM "
		    "events WHERE sandbox = 't%d'", i);
		CHECK_INT(query_int(db, sql), ROWS);
	}
	sqlite3_close(db);
	CHECK(verify_file(path, &res) == 0);
	CHECK_INT(res.rows, THREADS * ROWS);
	rm_db(path);
}

/* ------------------------------------------------------------ queries */

static const struct qrow {
	int		 min;		/* minutes after the base time */
	const char	*sandbox, *kind, *host, *decision, *credential;
} qrows[] = {
	/* id 1 */ { 0, "agent-7", "http", "pkgs.example.com", "allow", NULL },
	/* id 2 */ { 10, "agent-7", "connect", "files.pkgcdn.example.com",
		    "allow", NULL },
	/* id 3 */ { 20, "agent-8", "http", "evil.example", "deny", NULL },
	/* id 4 */ { 40, "agent-7", "connect", "api.openai.com", "allow",
		    "openai" },
	/* id 5 */ { 30, "agent-7", "dns", "evil.example", "deny", NULL },
	/* id 6 */ { 50, "agent-8", "connect", "API.OpenAI.com", "deny",
		    "openai" },
	/* id 7 */ { 60, "agent-7", "socks5", "10.0.0.1", "deny", NULL },
	/* id 8 */ { 70, NULL, "http", "pkgs.example.com", "deny", NULL },
	/* id 9 */ { 80, "agent-7", "http", "upload.pkgs.example.com", "error", NULL },
};
#define QBASE	1796169600000LL		/* 2026-12-02T00:00:00Z */

static void
ids_of_json(const char *out, char *ids, size_t len)
{
	const char *p = out;
	size_t n = 0;
	long long id;

	ids[0] = '\0';
	while (p != NULL && *p != '\0') {
		if (sscanf(p, "{\"id\":%lld,", &id) == 1)
			n += snprintf(ids + n, len - n, "%s%lld", n ? "," : "",
			    id);
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
}

static char *
run_query(sqlite3 *db, const struct audit_filter *f, enum audit_format fmt,
    int64_t *n)
{
	char *buf = NULL, err[256];
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	*n = audit_query(db, f, fmt, out, NULL, err, sizeof(err));
	if (*n == -1)
		fprintf(stderr, "query: %s\n", err);
	fclose(out);
	return buf;
}

static void
test_queries(void)
{
	static const struct {
		struct audit_filter	 f;
		const char		*ids;
	} cases[] = {
		{ { .limit = 100 }, "9,8,7,6,4,5,3,2,1" },	/* newest first */
		{ { .limit = 100, .asc = 1 }, "1,2,3,5,4,6,7,8,9" },
		{ { .limit = 3 }, "9,8,7" },
		{ { .limit = 0 }, "9,8,7,6,4,5,3,2,1" },
		{ { .sandbox = "agent-8" }, "6,3" },
		{ { .decision = "deny" }, "8,7,6,5,3" },
		{ { .kind = "connect" }, "6,4,2" },
		{ { .credential = "openai" }, "6,4" },
		{ { .host_glob = "*pkgs.example.com" }, "9,8,1" },
		{ { .host_glob = "API.openai.*" }, "6,4" },
		{ { .host_glob = "evil.example" }, "5,3" },
		{ { .host_glob = "10.0.0.[0-9]" }, "7" },
		{ { .has_since = 1, .since_ms = QBASE + 30 * 60000 },
		  "9,8,7,6,4,5" },
		{ { .has_since = 1, .since_ms = QBASE + 30 * 60000,
		    .has_until = 1, .until_ms = QBASE + 60 * 60000 }, "6,4,5" },
		{ { .has_until = 1, .until_ms = QBASE + 20 * 60000 }, "2,1" },
		{ { .sandbox = "agent-7", .decision = "deny", .has_since = 1,
		    .since_ms = QBASE }, "7,5" },
		{ { .sandbox = "nobody" }, "" },
		{ { .after_id = 4, .upto_id = 8, .by_id = 1, .asc = 1 },
		  "5,6,7,8" },
	};
	char path[512], err[256], ids[256], *out;
	const char *errstr;
	struct audit_event ev;
	struct audit *a;
	sqlite3 *db;
	int64_t n;
	size_t i;

	tmp_path(path, sizeof(path), "query.db");
	a = audit_open(path, NULL, &errstr);
	CHECK(a != NULL);
	if (a == NULL)
		return;
	for (i = 0; i < sizeof(qrows) / sizeof(qrows[0]); i++) {
		event_init(&ev);
		ev.ts_ms = QBASE + qrows[i].min * 60000LL;
		ev.sandbox = qrows[i].sandbox;
		ev.kind = qrows[i].kind;
		ev.host = qrows[i].host;
		ev.decision = verdict_parse(qrows[i].decision);
		ev.credential = qrows[i].credential;
		ev.port = 443;
		ev.method = "GET";
		ev.path = i == 2 ? "/a,\"b\"\nc" : "/";
		CHECK(audit_submit(a, &ev) == 0);
	}
	audit_close(a);
	db = audit_db_open_ro(path, err, sizeof(err));
	CHECK(db != NULL);
	if (db == NULL)
		return;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct audit_filter f = cases[i].f;

		out = run_query(db, &f, AUDIT_FMT_JSON, &n);
		ids_of_json(out, ids, sizeof(ids));
		CHECK_MSG(strcmp(ids, cases[i].ids) == 0, "case %zu: got %s, "
		    "want %s", i, ids, cases[i].ids);
		free(out);
	}

	/* CSV: header, one line per row (the quoted newline excepted). */
	{
		struct audit_filter f = { .limit = 100, .asc = 1 };
		int lines = 0;
		char *p;

		out = run_query(db, &f, AUDIT_FMT_CSV, &n);
		CHECK_INT(n, 9);
		for (p = out; (p = strstr(p, "\r\n")) != NULL; p += 2)
			lines++;
		CHECK_INT(lines, 10);
		CHECK(strncmp(out, "id,ts,sandbox,", 14) == 0);
		CHECK(strstr(out, ",\"/a,\"\"b\"\"\nc\",") != NULL);
		CHECK(strstr(out, "\r\n1,2026-12-02T00:00:00.000Z,agent-7,http,,"
		    "pkgs.example.com,,443,,,GET,/,,allow,,,,,,,0000") != NULL);
		free(out);
	}
	/* Table: header, then columns aligned under it. */
	{
		struct audit_filter f = { .limit = 100 };
		const char *hdr_cols[] = { "KIND", "DECISION", "HOST" };
		char *line, *save = NULL, *hdr;
		size_t off[3];
		int k, rows = 0;

		out = run_query(db, &f, AUDIT_FMT_TABLE, &n);
		CHECK_INT(n, 9);
		hdr = strtok_r(out, "\n", &save);
		CHECK(hdr != NULL && strncmp(hdr, "TS ", 3) == 0);
		for (k = 0; k < 3; k++)
			off[k] = (size_t)(strstr(hdr, hdr_cols[k]) - hdr);
		while ((line = strtok_r(NULL, "\n", &save)) != NULL &&
		    rows < 9) {
			static const int order[] = { 9, 8, 7, 6, 4, 5, 3, 2, 1 };
			const struct qrow *q = &qrows[order[rows] - 1];

			CHECK(strlen(line) > off[2]);
			CHECK_MSG(strncmp(line + off[0], q->kind,
			    strlen(q->kind)) == 0, "line %s", line);
			CHECK(strncmp(line + off[1], q->decision,
			    strlen(q->decision)) == 0);
			rows++;
		}
		CHECK_INT(rows, 9);
		free(out);
		/* Peer bytes reach a terminal escaped: the newline is \x0a. */
		f.sandbox = "agent-8";
		f.kind = "http";
		out = run_query(db, &f, AUDIT_FMT_TABLE, &n);
		CHECK(strstr(out, "/a,\"b\"\\x0ac") != NULL);
		free(out);
		/* No rows: just the header. */
		f.sandbox = "nobody";
		out = run_query(db, &f, AUDIT_FMT_TABLE, &n);
		CHECK_INT(n, 0);
		CHECK(strncmp(out, "TS ", 3) == 0 && strchr(out, '\n') ==
		    out + strlen(out) - 1);
		free(out);
	}
	CHECK_INT(audit_max_id(db, err, sizeof(err)), 9);
	sqlite3_close(db);
	rm_db(path);
}

/* The plan of a filtered query: an index range, no full scan, no sort. */
static void
test_query_plan(void)
{
	static const struct {
		struct audit_filter	 f;
		const char		*index;
	} cases[] = {
		{ { .sandbox = "agent-7", .has_since = 1, .since_ms = QBASE,
		    .limit = 100 }, "events_sandbox" },
		{ { .has_since = 1, .since_ms = QBASE, .limit = 100 },
		  "events_ts" },
		{ { .decision = "deny", .has_since = 1, .since_ms = QBASE,
		    .limit = 100 }, "events_decision" },
		{ { .limit = 100 }, "events_ts" },
	};
	char path[512], sql[AUDIT_SQL_MAX + 32], plan[1024];
	struct audit_sql q;
	const char *errstr;
	sqlite3 *db;
	sqlite3_stmt *st;
	size_t i, len;

	tmp_path(path, sizeof(path), "plan.db");
	CHECK(write_rows(path, 200, "agent-7", 0, 0) == 0);
	db = rw_open(path);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(audit_build_select(&cases[i].f, &q, &errstr) == 0);
		snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s", q.text);
		CHECK(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
		CHECK(audit_bind_sql(st, &q) == SQLITE_OK);
		plan[0] = '\0';
		len = 0;
		while (sqlite3_step(st) == SQLITE_ROW)
			len += snprintf(plan + len, sizeof(plan) - len, "%s; ",
			    (const char *)sqlite3_column_text(st, 3));
		sqlite3_finalize(st);
		CHECK_MSG(strstr(plan, cases[i].index) != NULL, "plan: %s",
		    plan);
		CHECK_MSG(strstr(plan, "INDEX") != NULL, "plan: %s", plan);
		CHECK_MSG(strstr(plan, "TEMP B-TREE") == NULL, "plan: %s",
		    plan);
	}
	sqlite3_close(db);
	rm_db(path);
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	log_init(LOG_LVL_WARN, "test_audit");
	snprintf(tmpdir, sizeof(tmpdir), "%s/sgaudit-XXXXXX",
	    base ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_timestamps();
	test_parse_time();
	test_encoding();
	test_build_select();
	test_vocab_and_retention_text();
	test_writers();
	test_write_and_read_back();
	test_tamper();
	test_retention();
	test_migration();
	test_queries();
	test_query_plan();
	test_concurrency();
	nftw(tmpdir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
