/*
 * The fleet store's pure parts: the glob that becomes a PostgreSQL regular
 * expression, the row encoding's inverse (a store row kept as raw), the
 * form a row takes in the store's columns, gateway names, and the
 * PostgreSQL dialect of the filter SQL.
 */
#include <stdlib.h>
#include <string.h>

#include "audit/audit_pg.h"
#include "audit/audit_query.h"
#include "audit/audit_store.h"
#include "check.h"

static void
test_glob(void)
{
	static const struct { const char *glob, *re; } t[] = {
		{ "*.pkgs.example.com", "^.*\\.pkgs\\.example\\.com$" },
		{ "api?.test", "^api.\\.test$" },
		{ "denied-gw-[23].*", "^denied\\-gw\\-[23]\\..*$" },
		{ "[^a-c]x", "^[^a-c]x$" },
		{ "[]a]", "^[\\]a]$" },
		{ "a[b", "^a\\[b$" },
		{ "x[\\[]", "^x[\\\\\\[]$" },
		{ "(a|b)+", "^\\(a\\|b\\)\\+$" },
		{ "", "^$" },
	};
	char out[128];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_INT(audit_glob_to_regex(t[i].glob, out, sizeof(out)), 0);
		CHECK_STR(out, t[i].re);
	}
	CHECK_INT(audit_glob_to_regex("abcdef", out, 6), -1);
}

static void
text(struct audit_val *v, const char *s, size_t n)
{
	v->type = AUDIT_V_TEXT;
	v->p = (const unsigned char *)s;
	v->len = n;
}

static void
row_init(struct audit_val *row)
{
	int c;

	memset(row, 0, sizeof(struct audit_val) * AUDIT_NCOLS);
	for (c = 0; c < AUDIT_NCOLS; c++)
		row[c].type = AUDIT_V_NULL;
	row[AUDIT_COL_ID].type = AUDIT_V_INT;
	row[AUDIT_COL_ID].i = 42;
	text(&row[AUDIT_COL_TS], "2026-12-03T06:00:00.000Z", 24);
	text(&row[AUDIT_COL_HOST], "example.test", 12);
	row[AUDIT_COL_PORT].type = AUDIT_V_INT;
	row[AUDIT_COL_PORT].i = 443;
	row[AUDIT_COL_BYTES_UP].type = AUDIT_V_INT;
	row[AUDIT_COL_BYTES_UP].i = -1;
}

static void
test_decode(void)
{
	struct audit_val row[AUDIT_NCOLS], back[AUDIT_NCOLS];
	unsigned char buf[512];
	size_t n, k;
	int c;

	row_init(row);
	text(&row[AUDIT_COL_PATH], "/a\xff\0b", 5);
	row[AUDIT_COL_ASN].type = AUDIT_V_REAL;
	row[AUDIT_COL_ASN].r = 1.5;
	row[AUDIT_COL_METHOD].type = AUDIT_V_BLOB;
	row[AUDIT_COL_METHOD].p = (const unsigned char *)"\x01\x02";
	row[AUDIT_COL_METHOD].len = 2;
	n = audit_encode_row(row, buf, sizeof(buf));
	CHECK(n < sizeof(buf));
	CHECK_INT(audit_decode_row(buf, n, back), 0);
	for (c = 0; c < AUDIT_NHASHED; c++) {
		CHECK_INT(back[c].type, row[c].type);
		if (row[c].type == AUDIT_V_INT)
			CHECK_INT(back[c].i, row[c].i);
		if (row[c].type == AUDIT_V_TEXT || row[c].type == AUDIT_V_BLOB)
			CHECK(back[c].len == row[c].len &&
			    memcmp(back[c].p, row[c].p, row[c].len) == 0);
	}
	CHECK(back[AUDIT_COL_ASN].r == 1.5);
	/* Every truncation, and a byte too many, is refused. */
	for (k = 0; k < n; k++)
		CHECK_INT(audit_decode_row(buf, k, back), -1);
	buf[n] = 0;
	CHECK_INT(audit_decode_row(buf, n + 1, back), -1);
	/* A length past the end, an unknown tag. */
	buf[0] = 0x07;
	CHECK_INT(audit_decode_row(buf, n, back), -1);
}

static void
test_pg_row(void)
{
	struct audit_val row[AUDIT_NCOLS];
	struct audit_pg_row pr;

	/* A row as the writer stores it: exact columns, no raw. */
	row_init(row);
	CHECK_INT(audit_pg_row_build(row, &pr), 0);
	CHECK(pr.raw == NULL);
	CHECK_STR(pr.col[AUDIT_COL_ID], "42");
	CHECK_STR(pr.col[AUDIT_COL_PORT], "443");
	CHECK_STR(pr.col[AUDIT_COL_BYTES_UP], "-1");
	CHECK(pr.col[AUDIT_COL_SANDBOX] == NULL);
	audit_pg_row_free(&pr);
	/* Bytes that are not UTF-8 (and NUL): U+FFFD in the column, raw kept. */
	text(&row[AUDIT_COL_PATH], "/a\xff\0b", 5);
	CHECK_INT(audit_pg_row_build(row, &pr), 0);
	CHECK(pr.raw != NULL && pr.raw_len == audit_encode_row(row, NULL, 0));
	CHECK_STR(pr.col[AUDIT_COL_PATH], "/a\xef\xbf\xbd\xef\xbf\xbd" "b");
	audit_pg_row_free(&pr);
	/* Text in an integer column: NULL there, raw kept. */
	row_init(row);
	text(&row[AUDIT_COL_PORT], "443", 3);
	CHECK_INT(audit_pg_row_build(row, &pr), 0);
	CHECK(pr.raw != NULL && pr.col[AUDIT_COL_PORT] == NULL);
	audit_pg_row_free(&pr);
	/* Valid UTF-8 beyond ASCII stays as it is. */
	row_init(row);
	text(&row[AUDIT_COL_HOST], "b\xc3\xbc" "cher.test", 10);
	CHECK_INT(audit_pg_row_build(row, &pr), 0);
	CHECK(pr.raw == NULL);
	audit_pg_row_free(&pr);
}

static void
test_names(void)
{
	char err[256];

	CHECK(config_gateway_name_ok("gw-1"));
	CHECK(config_gateway_name_ok("eu-west.sg_2"));
	CHECK(!config_gateway_name_ok(""));
	CHECK(!config_gateway_name_ok("-gw"));
	CHECK(!config_gateway_name_ok("gw 1"));
	CHECK(!config_gateway_name_ok("gw/1"));
	CHECK(!config_gateway_name_ok("g\xc3\xbc"));
	CHECK(config_gateway_name_ok(
	    "a23456789012345678901234567890123456789012345678901234567890123"));
	CHECK(!config_gateway_name_ok(
	    "a234567890123456789012345678901234567890123456789012345678901234"));
	CHECK_INT(audit_store_url_ok("postgresql://sg@db.example.com/fleet",
	    err, sizeof(err)), 0);
	CHECK_INT(audit_store_url_ok("postgres:///fleet?host=/run/pg", err,
	    sizeof(err)), 0);
	CHECK_INT(audit_store_url_ok("mysql://db/fleet", err, sizeof(err)), -1);
	CHECK_INT(audit_store_url_ok("host=db dbname=fleet", err, sizeof(err)),
	    -1);
	CHECK_INT(audit_store_url_ok("postgresql://db/fleet?nosuch=1", err,
	    sizeof(err)), -1);
	/* A password is never quoted back in the error. */
	CHECK_INT(audit_store_url_ok("postgresql://sg:s3cr%zzet@db/fleet", err,
	    sizeof(err)), -1);
	CHECK(strstr(err, "s3cr") == NULL && strstr(err, "password") != NULL);
	CHECK_INT(audit_store_url_ok("postgresql://sg:pw@db/fleet", err,
	    sizeof(err)), 0);
}

static void
test_sql(void)
{
	struct audit_filter f;
	struct audit_sql q;
	const char *errstr;

	memset(&f, 0, sizeof(f));
	f.store = 1;
	f.gateway = "gw-2";
	f.sandbox = "agent-x";
	f.host_glob = "*.Example.COM";
	f.limit = 10;
	CHECK_INT(audit_build_select(&f, &q, &errstr), 0);
	CHECK(strstr(q.text, "FROM sandgate.events WHERE gateway = $1 AND "
	    "sandbox = $2 AND host ~ $3 ORDER BY ts DESC, gateway DESC, id "
	    "DESC LIMIT $4") != NULL);
	CHECK_INT(q.n_binds, 4);
	CHECK_STR(q.binds[2].s, "^.*\\.example\\.com$");
	/* The local dialect is unchanged. */
	f.store = 0;
	CHECK_INT(audit_build_select(&f, &q, &errstr), 0);
	CHECK(strstr(q.text, "FROM events WHERE sandbox = ? AND host GLOB ? "
	    "ORDER BY ts DESC, id DESC LIMIT ?") != NULL);
	CHECK_STR(q.binds[1].s, "*.example.com");
}

int
main(void)
{
	test_glob();
	test_decode();
	test_pg_row();
	test_names();
	test_sql();
	return check_summary();
}
