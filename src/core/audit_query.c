/*
 * The read side of the audit log: filters turned into SQL with bound
 * parameters, the table/JSON/CSV writers, chain verification, and the row
 * encoding and timestamp format that the writer (audit.c) shares.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "core/audit_query.h"
#include "core/config.h"
#include "core/log.h"

const char *const audit_col_names[AUDIT_NCOLS] = {
	"id", "ts", "sandbox", "kind", "client", "host", "ip", "port",
	"country", "asn", "method", "path", "status", "decision", "rule",
	"reason", "credential", "bytes_up", "bytes_down", "duration_ms",
	"prev_hash", "hash",
};

const int audit_col_is_int[AUDIT_NCOLS] = {
	[AUDIT_COL_ID] = 1, [AUDIT_COL_PORT] = 1, [AUDIT_COL_ASN] = 1,
	[AUDIT_COL_STATUS] = 1, [AUDIT_COL_BYTES_UP] = 1,
	[AUDIT_COL_BYTES_DOWN] = 1, [AUDIT_COL_DURATION_MS] = 1,
};

const char audit_col_list[] =
    "id, ts, sandbox, kind, client, host, ip, port, country, asn, method, "
    "path, status, decision, rule, reason, credential, bytes_up, "
    "bytes_down, duration_ms, prev_hash, hash";

const char audit_zero_hash[AUDIT_HASH_HEX + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";

/* ------------------------------------------------------------ encoding */

enum {
	ENC_NULL = 0x00, ENC_INT = 0x01, ENC_TEXT = 0x02, ENC_REAL = 0x03,
	ENC_BLOB = 0x04,
};

static size_t
enc_put(unsigned char *buf, size_t cap, size_t off, const void *p, size_t n)
{
	if (off < cap)
		memcpy(buf + off, p, off + n <= cap ? n : cap - off);
	return off + n;
}

static size_t
enc_u64(unsigned char *buf, size_t cap, size_t off, uint64_t v)
{
	unsigned char b[8];
	int k;

	for (k = 7; k >= 0; k--) {
		b[k] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
	return enc_put(buf, cap, off, b, 8);
}

static size_t
enc_len32(unsigned char *buf, size_t cap, size_t off, size_t len)
{
	unsigned char b[4];

	b[0] = (unsigned char)(len >> 24);
	b[1] = (unsigned char)(len >> 16);
	b[2] = (unsigned char)(len >> 8);
	b[3] = (unsigned char)len;
	return enc_put(buf, cap, off, b, 4);
}

size_t
audit_encode_row(const struct audit_val *v, unsigned char *buf, size_t cap)
{
	size_t off = 0;
	unsigned char tag;
	uint64_t bits;
	int i;

	for (i = 0; i < AUDIT_NHASHED; i++) {
		switch (v[i].type) {
		case AUDIT_V_INT:
			tag = ENC_INT;
			off = enc_put(buf, cap, off, &tag, 1);
			off = enc_u64(buf, cap, off, (uint64_t)v[i].i);
			break;
		case AUDIT_V_REAL:
			tag = ENC_REAL;
			memcpy(&bits, &v[i].r, sizeof(bits));
			off = enc_put(buf, cap, off, &tag, 1);
			off = enc_u64(buf, cap, off, bits);
			break;
		case AUDIT_V_TEXT:
		case AUDIT_V_BLOB:
			tag = v[i].type == AUDIT_V_TEXT ? ENC_TEXT : ENC_BLOB;
			off = enc_put(buf, cap, off, &tag, 1);
			off = enc_len32(buf, cap, off, v[i].len);
			off = enc_put(buf, cap, off, v[i].p, v[i].len);
			break;
		default:
			tag = ENC_NULL;
			off = enc_put(buf, cap, off, &tag, 1);
			break;
		}
	}
	return off;
}

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
	static const char hex[] = "0123456789abcdef";
	unsigned char stack[4096], md[EVP_MAX_MD_SIZE], *buf = stack;
	unsigned int mdlen = 0;
	size_t need, i;
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
	for (i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 0xf];
	}
	out[AUDIT_HASH_HEX] = '\0';
	rc = 0;
done:
	if (buf != stack)
		free(buf);
	return rc;
}

void
audit_val_from_stmt(sqlite3_stmt *st, int col, struct audit_val *v)
{
	memset(v, 0, sizeof(*v));
	switch (sqlite3_column_type(st, col)) {
	case SQLITE_INTEGER:
		v->type = AUDIT_V_INT;
		v->i = sqlite3_column_int64(st, col);
		break;
	case SQLITE_FLOAT:
		v->type = AUDIT_V_REAL;
		v->r = sqlite3_column_double(st, col);
		break;
	case SQLITE_TEXT:
		v->type = AUDIT_V_TEXT;
		v->p = sqlite3_column_text(st, col);
		v->len = (size_t)sqlite3_column_bytes(st, col);
		break;
	case SQLITE_BLOB:
		v->type = AUDIT_V_BLOB;
		v->p = sqlite3_column_blob(st, col);
		v->len = (size_t)sqlite3_column_bytes(st, col);
		break;
	default:
		v->type = AUDIT_V_NULL;
		break;
	}
}

/* ---------------------------------------------------------- timestamps */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void
civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

/* 0001-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z */
#define TS_MIN_MS	(-62135596800000LL)
#define TS_MAX_MS	(253402300799999LL)

int
audit_format_ts(int64_t ms, char *buf, size_t len)
{
	int64_t days, rem, y;
	int mo, d, n;

	if (ms < TS_MIN_MS || ms > TS_MAX_MS || len < AUDIT_TS_LEN + 1)
		return -1;
	days = ms / 86400000;
	rem = ms % 86400000;
	if (rem < 0) {
		rem += 86400000;
		days--;
	}
	civil_from_days(days, &y, &mo, &d);
	n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y,
	    mo, d, (int)(rem / 3600000), (int)(rem / 60000 % 60),
	    (int)(rem / 1000 % 60), (int)(rem % 1000));
	return n == AUDIT_TS_LEN ? 0 : -1;
}

static int
parse_digits(const char **sp, int n, int *out)
{
	const char *s = *sp;
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*sp = s + n;
	*out = v;
	return 0;
}

static int
days_in_month(int y, int m)
{
	static const int dm[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return dm[m - 1];
}

int
audit_parse_rfc3339(const char *s, int64_t *ms)
{
	int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, oh = 0, om = 0, k;
	int64_t off = 0, v;

	if (s == NULL || parse_digits(&s, 4, &y) == -1 || *s++ != '-' ||
	    parse_digits(&s, 2, &mo) == -1 || *s++ != '-' ||
	    parse_digits(&s, 2, &d) == -1)
		return -1;
	if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	if (*s != '\0') {
		if (*s != 'T' && *s != 't' && *s != ' ')
			return -1;
		s++;
		if (parse_digits(&s, 2, &h) == -1 || *s++ != ':' ||
		    parse_digits(&s, 2, &mi) == -1 || *s++ != ':' ||
		    parse_digits(&s, 2, &sec) == -1)
			return -1;
		if (h > 23 || mi > 59 || sec > 60)
			return -1;
		if (*s == '.') {
			s++;
			if (*s < '0' || *s > '9')
				return -1;
			/* milliseconds; further digits are truncated */
			for (k = 0; *s >= '0' && *s <= '9'; s++, k++)
				if (k < 3)
					frac = frac * 10 + (*s - '0');
			for (; k < 3; k++)
				frac *= 10;
		}
		if (*s == 'Z' || *s == 'z')
			s++;
		else if (*s == '+' || *s == '-') {
			int sign = *s++ == '-' ? -1 : 1;
			if (parse_digits(&s, 2, &oh) == -1 || *s++ != ':' ||
			    parse_digits(&s, 2, &om) == -1 || oh > 23 || om > 59)
				return -1;
			off = sign * ((int64_t)oh * 3600 + om * 60);
		} else
			return -1;
		if (*s != '\0')
			return -1;
	}
	v = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + mi * 60 +
	    sec - off;
	*ms = v * 1000 + frac;
	return 0;
}

int
audit_parse_time(const char *s, int64_t now_ms, int64_t *ms)
{
	uint64_t d;

	if (s == NULL || *s == '\0')
		return -1;
	if (config_parse_duration_ms(s, &d) == 0) {
		if (d > (uint64_t)INT64_MAX / 2)
			return -1;
		*ms = now_ms - (int64_t)d;
		return 0;
	}
	return audit_parse_rfc3339(s, ms);
}

int64_t
audit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
in_words(const char *const *words, const char *s)
{
	for (; *words != NULL; words++)
		if (strcmp(*words, s) == 0)
			return 1;
	return 0;
}

int
audit_valid_kind(const char *s)
{
	static const char *const kinds[] = { "http", "connect", "socks5",
	    "dns", "transparent", "ingress", "admin", "vault", NULL };

	return s != NULL && in_words(kinds, s);
}

int
audit_valid_decision(const char *s)
{
	static const char *const decisions[] = { "allow", "deny", "error",
	    NULL };

	return s != NULL && in_words(decisions, s);
}

/* ------------------------------------------------------- filter -> SQL */

int
audit_glob_lower(const char *in, char *out, size_t outlen)
{
	size_t i, n = strlen(in);

	if (n >= outlen)
		return -1;
	for (i = 0; i < n; i++)
		out[i] = in[i] >= 'A' && in[i] <= 'Z' ? in[i] - 'A' + 'a' : in[i];
	out[n] = '\0';
	return 0;
}

struct sqlb {
	struct audit_sql	*q;
	size_t			 len;
	int			 overflow;
	int			 n_where;
};

static void
sqlb_add(struct sqlb *b, const char *s)
{
	size_t n = strlen(s);

	if (b->len + n >= sizeof(b->q->text)) {
		b->overflow = 1;
		return;
	}
	memcpy(b->q->text + b->len, s, n + 1);
	b->len += n;
}

static int
sqlb_where(struct sqlb *b, const char *cond, const char *sval, int is_int,
    int64_t ival)
{
	struct audit_bind *bd;

	if (b->q->n_binds >= AUDIT_MAX_BINDS)
		return -1;
	bd = &b->q->binds[b->q->n_binds++];
	bd->is_int = is_int;
	bd->i = ival;
	if (!is_int) {
		if (strlen(sval) >= sizeof(bd->s))
			return -1;
		strcpy(bd->s, sval);
	}
	sqlb_add(b, b->n_where++ == 0 ? " WHERE " : " AND ");
	sqlb_add(b, cond);
	return 0;
}

static int
sqlb_where_ts(struct sqlb *b, const char *cond, int64_t ms)
{
	char ts[AUDIT_TS_LEN + 1];

	/* Out-of-range times clamp to the ends of the format's range. */
	if (ms < TS_MIN_MS)
		ms = TS_MIN_MS;
	if (ms > TS_MAX_MS)
		ms = TS_MAX_MS;
	if (audit_format_ts(ms, ts, sizeof(ts)) == -1)
		return -1;
	return sqlb_where(b, cond, ts, 0, 0);
}

int
audit_build_select(const struct audit_filter *f, struct audit_sql *q,
    const char **errstr)
{
	struct sqlb b;
	char glob[AUDIT_GLOB_MAX];
	int rc = 0;

	memset(q, 0, sizeof(*q));
	memset(&b, 0, sizeof(b));
	b.q = q;
	sqlb_add(&b, "SELECT ");
	sqlb_add(&b, audit_col_list);
	sqlb_add(&b, " FROM events");
	if (f->sandbox != NULL)
		rc |= sqlb_where(&b, "sandbox = ?", f->sandbox, 0, 0);
	if (f->has_since)
		rc |= sqlb_where_ts(&b, "ts >= ?", f->since_ms);
	if (f->has_until)
		rc |= sqlb_where_ts(&b, "ts < ?", f->until_ms);
	if (f->decision != NULL)
		rc |= sqlb_where(&b, "decision = ?", f->decision, 0, 0);
	if (f->kind != NULL)
		rc |= sqlb_where(&b, "kind = ?", f->kind, 0, 0);
	if (f->host_glob != NULL) {
		if (audit_glob_lower(f->host_glob, glob, sizeof(glob)) == -1)
			rc = -1;
		else
			rc |= sqlb_where(&b, "host GLOB ?", glob, 0, 0);
	}
	if (f->credential != NULL)
		rc |= sqlb_where(&b, "credential = ?", f->credential, 0, 0);
	if (f->after_id > 0)
		rc |= sqlb_where(&b, "id > ?", NULL, 1, f->after_id);
	if (f->upto_id > 0)
		rc |= sqlb_where(&b, "id <= ?", NULL, 1, f->upto_id);
	if (f->by_id)
		sqlb_add(&b, f->asc ? " ORDER BY id ASC" :
		    " ORDER BY id DESC");
	else
		sqlb_add(&b, f->asc ? " ORDER BY ts ASC, id ASC" :
		    " ORDER BY ts DESC, id DESC");
	if (f->limit > 0) {
		struct audit_bind *bd;

		if (q->n_binds >= AUDIT_MAX_BINDS)
			rc = -1;
		else {
			bd = &q->binds[q->n_binds++];
			bd->is_int = 1;
			bd->i = f->limit > INT64_MAX ? INT64_MAX :
			    (int64_t)f->limit;
			sqlb_add(&b, " LIMIT ?");
		}
	}
	if (rc != 0 || b.overflow) {
		*errstr = "filter value too long";
		return -1;
	}
	return 0;
}

int
audit_bind_sql(sqlite3_stmt *st, const struct audit_sql *q)
{
	int i, rc;

	for (i = 0; i < q->n_binds; i++) {
		if (q->binds[i].is_int)
			rc = sqlite3_bind_int64(st, i + 1, q->binds[i].i);
		else
			rc = sqlite3_bind_text(st, i + 1, q->binds[i].s, -1,
			    SQLITE_STATIC);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

/* -------------------------------------------------------------- output */

int
audit_format_parse(const char *s, enum audit_format *f)
{
	if (strcmp(s, "table") == 0)
		*f = AUDIT_FMT_TABLE;
	else if (strcmp(s, "json") == 0)
		*f = AUDIT_FMT_JSON;
	else if (strcmp(s, "csv") == 0)
		*f = AUDIT_FMT_CSV;
	else
		return -1;
	return 0;
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static void
json_string(FILE *f, const unsigned char *p, size_t n)
{
	size_t i = 0, k;

	fputc('"', f);
	while (i < n) {
		unsigned char c = p[i];

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\r') {
			fputs("\\r", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else if ((k = utf8_seq(p + i, n - i)) == 0) {
			fputs("\\ufffd", f);	/* not UTF-8: never emit invalid JSON */
			i++;
		} else {
			fwrite(p + i, 1, k, f);
			i += k;
		}
	}
	fputc('"', f);
}

static void
json_value(FILE *f, const struct audit_val *v)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	switch (v->type) {
	case AUDIT_V_INT:
		fprintf(f, "%" PRId64, v->i);
		break;
	case AUDIT_V_REAL:
		if (isfinite(v->r))
			fprintf(f, "%.17g", v->r);
		else
			fputs("null", f);
		break;
	case AUDIT_V_TEXT:
		json_string(f, v->p, v->len);
		break;
	case AUDIT_V_BLOB:
		fputc('"', f);
		for (i = 0; i < v->len; i++) {
			fputc(hex[v->p[i] >> 4], f);
			fputc(hex[v->p[i] & 0xf], f);
		}
		fputc('"', f);
		break;
	default:
		fputs("null", f);
		break;
	}
}

void
audit_write_json(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	int i;

	fputc('{', f);
	for (i = 0; i < AUDIT_NCOLS; i++) {
		fprintf(f, "%s\"%s\":", i ? "," : "", audit_col_names[i]);
		json_value(f, &row[i]);
	}
	fputs("}\n", f);
}

void
audit_write_csv_header(FILE *f)
{
	int i;

	for (i = 0; i < AUDIT_NCOLS; i++)
		fprintf(f, "%s%s", i ? "," : "", audit_col_names[i]);
	fputs("\r\n", f);
}

static void
csv_field(FILE *f, const struct audit_val *v)
{
	size_t i;

	switch (v->type) {
	case AUDIT_V_INT:
		fprintf(f, "%" PRId64, v->i);
		return;
	case AUDIT_V_REAL:
		fprintf(f, "%.17g", v->r);
		return;
	case AUDIT_V_TEXT:
	case AUDIT_V_BLOB:
		break;
	default:
		return;		/* NULL: an empty field; "" is an empty string */
	}
	for (i = 0; i < v->len; i++)
		if (v->p[i] == ',' || v->p[i] == '"' || v->p[i] == '\r' ||
		    v->p[i] == '\n')
			break;
	if (v->len > 0 && i == v->len) {
		fwrite(v->p, 1, v->len, f);
		return;
	}
	fputc('"', f);
	for (i = 0; i < v->len; i++) {
		if (v->p[i] == '"')
			fputc('"', f);
		fputc(v->p[i], f);
	}
	fputc('"', f);
}

void
audit_write_csv(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	int i;

	for (i = 0; i < AUDIT_NCOLS; i++) {
		if (i)
			fputc(',', f);
		csv_field(f, &row[i]);
	}
	fputs("\r\n", f);
}

/*
 * The table: a subset of the columns, aligned. Widths come from blocks of
 * rows and only grow, so output starts before a long query ends.
 */
static const int table_cols[] = {
	AUDIT_COL_TS, AUDIT_COL_SANDBOX, AUDIT_COL_KIND, AUDIT_COL_DECISION,
	AUDIT_COL_HOST, AUDIT_COL_PORT, AUDIT_COL_METHOD, AUDIT_COL_PATH,
	AUDIT_COL_STATUS, AUDIT_COL_RULE, AUDIT_COL_REASON,
};
#define TABLE_NCOLS	(int)(sizeof(table_cols) / sizeof(table_cols[0]))
#define TABLE_CELL	68	/* display bytes of a cell, escaped, + NUL */
#define TABLE_BLOCK	256

struct table {
	char	(*cells)[TABLE_NCOLS][TABLE_CELL];
	int	 n;
	size_t	 width[TABLE_NCOLS];
	int	 header_done;
};

static void
table_cell(const struct audit_val *v, char *out)
{
	char esc[4 * TABLE_CELL];
	size_t n;

	switch (v->type) {
	case AUDIT_V_INT:
		snprintf(out, TABLE_CELL, "%" PRId64, v->i);
		return;
	case AUDIT_V_REAL:
		snprintf(out, TABLE_CELL, "%g", v->r);
		return;
	case AUDIT_V_TEXT:
	case AUDIT_V_BLOB:
		if (v->len == 0)
			break;
		/* Peer bytes reach a terminal: escape, then cut with "...". */
		log_escape(v->p, v->len, esc, sizeof(esc));
		n = strlen(esc);
		if (n >= TABLE_CELL) {
			memcpy(esc + TABLE_CELL - 4, "...", 4);
			n = TABLE_CELL - 1;
		}
		memcpy(out, esc, n + 1);
		return;
	default:
		break;
	}
	snprintf(out, TABLE_CELL, "-");
}

static void
table_flush(FILE *f, struct table *t)
{
	int r, c;
	size_t w;

	if (!t->header_done) {
		for (c = 0; c < TABLE_NCOLS; c++) {
			w = strlen(audit_col_names[table_cols[c]]);
			if (w > t->width[c])
				t->width[c] = w;
		}
	}
	for (r = 0; r < t->n; r++)
		for (c = 0; c < TABLE_NCOLS; c++)
			if ((w = strlen(t->cells[r][c])) > t->width[c])
				t->width[c] = w;
	if (!t->header_done) {
		for (c = 0; c < TABLE_NCOLS; c++) {
			char up[32];
			size_t i;
			const char *name = audit_col_names[table_cols[c]];

			for (i = 0; name[i] != '\0' && i < sizeof(up) - 1; i++)
				up[i] = name[i] >= 'a' && name[i] <= 'z' ?
				    name[i] - 'a' + 'A' : name[i];
			up[i] = '\0';
			if (c == TABLE_NCOLS - 1)
				fprintf(f, "%s\n", up);
			else
				fprintf(f, "%-*s  ", (int)t->width[c], up);
		}
		t->header_done = 1;
	}
	for (r = 0; r < t->n; r++)
		for (c = 0; c < TABLE_NCOLS; c++) {
			if (c == TABLE_NCOLS - 1)
				fprintf(f, "%s\n", t->cells[r][c]);
			else if (audit_col_is_int[table_cols[c]])
				fprintf(f, "%*s  ", (int)t->width[c],
				    t->cells[r][c]);
			else
				fprintf(f, "%-*s  ", (int)t->width[c],
				    t->cells[r][c]);
		}
	t->n = 0;
}

/* ---------------------------------------------------------- database */

/* PRAGMA user_version, and whether table events exists; -1 on error. */
static int
audit_schema_version(sqlite3 *db, int *has_events)
{
	sqlite3_stmt *st = NULL;
	int version = -1;

	*has_events = 0;
	if (sqlite3_prepare_v2(db, "SELECT (SELECT user_version FROM "
	    "pragma_user_version), EXISTS (SELECT 1 FROM sqlite_master WHERE "
	    "type = 'table' AND name = 'events')", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		version = sqlite3_column_int(st, 0);
		*has_events = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	return version;
}

struct sqlite3 *
audit_db_open_ro(const char *path, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	struct stat st;
	int rc, version, has_events;

	if (stat(path, &st) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path,
		    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	if ((rc = sqlite3_busy_timeout(db, 5000)) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	/* Readers never migrate: say what to do with a file of another age. */
	if ((version = audit_schema_version(db, &has_events)) == -1) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	if (!has_events || version != AUDIT_SCHEMA_VERSION) {
		if (!has_events)
			snprintf(err, errlen, "%s: not a sandgate audit database "
			    "(no table events)", path);
		else if (version < AUDIT_SCHEMA_VERSION)
			snprintf(err, errlen, "%s: schema version %d is older "
			    "than this sandgate's (%d); `sandgate serve` "
			    "upgrades it", path, version, AUDIT_SCHEMA_VERSION);
		else
			snprintf(err, errlen, "%s: schema version %d is newer "
			    "than this sandgate's (%d)", path, version,
			    AUDIT_SCHEMA_VERSION);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

static sqlite3_stmt *
prepare(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

int64_t
audit_query(sqlite3 *db, const struct audit_filter *flt,
    enum audit_format fmt, FILE *out, int64_t *last_id, char *err,
    size_t errlen)
{
	struct audit_sql q;
	struct audit_val row[AUDIT_NCOLS];
	struct table t;
	sqlite3_stmt *st = NULL;
	const char *errstr;
	int64_t n = 0;
	int rc, c;

	memset(&t, 0, sizeof(t));
	if (audit_build_select(flt, &q, &errstr) == -1) {
		snprintf(err, errlen, "%s", errstr);
		return -1;
	}
	if ((st = prepare(db, q.text, err, errlen)) == NULL)
		return -1;
	if (audit_bind_sql(st, &q) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		goto fail;
	}
	if (fmt == AUDIT_FMT_TABLE &&
	    (t.cells = calloc(TABLE_BLOCK, sizeof(*t.cells))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (fmt == AUDIT_FMT_CSV)
		audit_write_csv_header(out);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &row[c]);
		if (fmt == AUDIT_FMT_JSON)
			audit_write_json(out, row);
		else if (fmt == AUDIT_FMT_CSV)
			audit_write_csv(out, row);
		else {
			for (c = 0; c < TABLE_NCOLS; c++)
				table_cell(&row[table_cols[c]],
				    t.cells[t.n][c]);
			if (++t.n == TABLE_BLOCK)
				table_flush(out, &t);
		}
		if (last_id != NULL)
			*last_id = row[AUDIT_COL_ID].i;
		n++;
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		goto fail;
	}
	if (fmt == AUDIT_FMT_TABLE && (t.n > 0 || !t.header_done))
		table_flush(out, &t);
	free(t.cells);
	sqlite3_finalize(st);
	return n;
fail:
	free(t.cells);
	sqlite3_finalize(st);
	return -1;
}

int64_t
audit_max_id(sqlite3 *db, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int64_t id = -1;
	int rc;

	if ((st = prepare(db, "SELECT ifnull(max(id), 0) FROM events", err,
	    errlen)) == NULL)
		return -1;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	else
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return id;
}

/* -------------------------------------------------------------- verify */

int
audit_retention_format(char *buf, size_t len, int64_t through, int64_t rows,
    const char *before_ts, const char *anchor)
{
	int n;

	n = snprintf(buf, len, "/events?through=%" PRId64 "&rows=%" PRId64
	    "&before=%s&anchor=%s", through, rows, before_ts, anchor);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
is_hash_hex(const unsigned char *p, size_t len)
{
	size_t i;

	if (p == NULL || len != AUDIT_HASH_HEX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

int
audit_retention_parse(const char *path, size_t len, int64_t *through,
    char anchor[AUDIT_HASH_HEX + 1])
{
	static const char prefix[] = "/events?";
	const char *p, *end = path + len, *amp;
	int have_through = 0, have_anchor = 0;
	int64_t v;

	if (len < sizeof(prefix) - 1 || memcmp(path, prefix,
	    sizeof(prefix) - 1) != 0)
		return -1;
	for (p = path + sizeof(prefix) - 1; p < end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if ((size_t)(amp - p) > 8 && memcmp(p, "through=", 8) == 0) {
			const char *q;

			v = 0;
			for (q = p + 8; q < amp; q++) {
				if (*q < '0' || *q > '9' ||
				    v > (INT64_MAX - 9) / 10)
					return -1;
				v = v * 10 + (*q - '0');
			}
			*through = v;
			have_through = 1;
		} else if (amp - p == 7 + AUDIT_HASH_HEX &&
		    memcmp(p, "anchor=", 7) == 0) {
			if (!is_hash_hex((const unsigned char *)p + 7,
			    AUDIT_HASH_HEX))
				return -1;
			memcpy(anchor, p + 7, AUDIT_HASH_HEX);
			anchor[AUDIT_HASH_HEX] = '\0';
			have_anchor = 1;
		}
	}
	return have_through && have_anchor ? 0 : -1;
}

/* Check one stepped row's own hash; 0 ok, 1 bad (msg), -1 error. */
static int
verify_row_hash(sqlite3_stmt *st, struct audit_val *row,
    struct audit_verify *res)
{
	char h[AUDIT_HASH_HEX + 1];
	int c;

	for (c = 0; c < AUDIT_NCOLS; c++)
		audit_val_from_stmt(st, c, &row[c]);
	if (row[AUDIT_COL_PREV_HASH].type != AUDIT_V_TEXT ||
	    !is_hash_hex(row[AUDIT_COL_PREV_HASH].p,
	    row[AUDIT_COL_PREV_HASH].len)) {
		snprintf(res->msg, sizeof(res->msg),
		    "prev_hash is not 64 lower-case hex digits");
		return 1;
	}
	if (row[AUDIT_COL_HASH].type != AUDIT_V_TEXT ||
	    !is_hash_hex(row[AUDIT_COL_HASH].p, row[AUDIT_COL_HASH].len)) {
		snprintf(res->msg, sizeof(res->msg),
		    "hash is not 64 lower-case hex digits");
		return 1;
	}
	if (audit_chain_hash((const char *)row[AUDIT_COL_PREV_HASH].p, row,
	    h) == -1) {
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

/*
 * The chain's start when the first row is not id 1: the retention row that
 * deleted everything before it. Returns 0 with the anchor, 1 with bad_id
 * and msg, -1 on error.
 */
static int
verify_anchor(sqlite3 *db, int64_t first, char anchor[AUDIT_HASH_HEX + 1],
    struct audit_verify *res)
{
	static const char sql[] = "SELECT id, ts, sandbox, kind, client, host, "
	    "ip, port, country, asn, method, path, status, decision, rule, "
	    "reason, credential, bytes_up, bytes_down, duration_ms, prev_hash, "
	    "hash FROM events WHERE kind = 'admin' AND rule = 'retention' "
	    "ORDER BY id";
	struct audit_val row[AUDIT_NCOLS];
	sqlite3_stmt *st;
	int64_t through, best = 0;
	char a[AUDIT_HASH_HEX + 1];
	int rc, found = 0, r;

	if ((st = prepare(db, sql, res->msg, sizeof(res->msg))) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *path = sqlite3_column_text(st,
		    AUDIT_COL_PATH);
		int plen = sqlite3_column_bytes(st, AUDIT_COL_PATH);

		if (path == NULL || audit_retention_parse((const char *)path,
		    (size_t)plen, &through, a) == -1 || through >= first)
			continue;
		if (through < first - 1) {
			if (through > best)
				best = through;
			continue;
		}
		/* It vouches for the start of the chain: it must be intact. */
		if ((r = verify_row_hash(st, row, res)) != 0) {
			res->bad_id = sqlite3_column_int64(st, AUDIT_COL_ID);
			sqlite3_finalize(st);
			return r;
		}
		memcpy(anchor, a, sizeof(a));
		found = 1;
		break;
	}
	if (!found && rc != SQLITE_DONE) {
		snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	if (found)
		return 0;
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
	return 1;
}

int
audit_verify(sqlite3 *db, struct audit_verify *res)
{
	struct audit_val row[AUDIT_NCOLS];
	char select[512], expect[AUDIT_HASH_HEX + 1];
	sqlite3_stmt *st = NULL;
	int64_t id, prev_id = 0;
	int rc, r, have_prev = 0, in_txn = 0;

	memset(res, 0, sizeof(res[0]));
	/* One read transaction: a consistent snapshot while the writer runs. */
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		goto dberr;
	in_txn = 1;
	snprintf(select, sizeof(select), "SELECT %s FROM events ORDER BY id",
	    audit_col_list);
	if ((st = prepare(db, select, res->msg, sizeof(res->msg))) == NULL)
		goto fail;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		id = sqlite3_column_int64(st, AUDIT_COL_ID);
		res->bad_id = id;
		if (!have_prev && id == 1)
			memcpy(expect, audit_zero_hash, sizeof(expect));
		else if (!have_prev) {
			if ((r = verify_anchor(db, id, expect, res)) != 0)
				goto done_r;
			res->bad_id = id;
		} else if (id != prev_id + 1) {
			res->bad_id = prev_id + 1;
			snprintf(res->msg, sizeof(res->msg), "missing (row %"
			    PRId64 " is followed by row %" PRId64 ")", prev_id,
			    id);
			r = 1;
			goto done_r;
		}
		if ((r = verify_row_hash(st, row, res)) == -1)
			goto done_r;
		/* A broken link says more than a broken hash. */
		if (row[AUDIT_COL_PREV_HASH].type == AUDIT_V_TEXT &&
		    is_hash_hex(row[AUDIT_COL_PREV_HASH].p,
		    row[AUDIT_COL_PREV_HASH].len) &&
		    memcmp(row[AUDIT_COL_PREV_HASH].p, expect,
		    AUDIT_HASH_HEX) != 0) {
			if (have_prev)
				snprintf(res->msg, sizeof(res->msg),
				    "prev_hash does not match the hash of row %"
				    PRId64, prev_id);
			else if (id == 1)
				snprintf(res->msg, sizeof(res->msg),
				    "prev_hash of the first row is not 64 zeros");
			else
				snprintf(res->msg, sizeof(res->msg),
				    "prev_hash does not match the anchor of "
				    "the retention row");
			r = 1;
		}
		if (r != 0)
			goto done_r;
		memcpy(expect, row[AUDIT_COL_HASH].p, AUDIT_HASH_HEX);
		prev_id = id;
		have_prev = 1;
		res->rows++;
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	res->bad_id = 0;
	r = 0;
done_r:
	sqlite3_finalize(st);
	(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return r;
dberr:
	snprintf(res->msg, sizeof(res->msg), "%s", sqlite3_errmsg(db));
fail:
	sqlite3_finalize(st);
	if (in_txn)
		(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	res->bad_id = 0;
	return -1;
}
