/*
 * An audit row as the chain sees it: its columns, their canonical
 * encoding (and its inverse, for rows the fleet store keeps encoded), a
 * value read from a statement, the shape of a hash. Below the chain, the
 * queries, the output and the PostgreSQL store, which all use it.
 */
#include <stdint.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"

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

int
audit_is_hash_hex(const unsigned char *p, size_t len)
{
	size_t i;

	if (p == NULL || len != AUDIT_HASH_HEX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * The inverse of audit_encode_row, for rows the fleet store keeps as their
 * encoding (audit_ship.c): exactly AUDIT_NHASHED values and nothing after
 * them. TEXT and BLOB values point into buf. 0, or -1 when buf is not one.
 */
int
audit_decode_row(const unsigned char *buf, size_t len, struct audit_val *v)
{
	size_t off = 0, n;
	uint64_t u;
	int i, k;

	for (i = 0; i < AUDIT_NHASHED; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		if (off >= len)
			return -1;
		switch (buf[off++]) {
		case ENC_NULL:
			v[i].type = AUDIT_V_NULL;
			break;
		case ENC_INT:
		case ENC_REAL:
			if (len - off < 8)
				return -1;
			for (u = 0, k = 0; k < 8; k++)
				u = u << 8 | buf[off + (size_t)k];
			if (buf[off - 1] == ENC_INT) {
				v[i].type = AUDIT_V_INT;
				v[i].i = (int64_t)u;
			} else {
				v[i].type = AUDIT_V_REAL;
				memcpy(&v[i].r, &u, sizeof(u));
			}
			off += 8;
			break;
		case ENC_TEXT:
		case ENC_BLOB:
			v[i].type = buf[off - 1] == ENC_TEXT ? AUDIT_V_TEXT :
			    AUDIT_V_BLOB;
			if (len - off < 4)
				return -1;
			n = (size_t)buf[off] << 24 | (size_t)buf[off + 1] << 16 |
			    (size_t)buf[off + 2] << 8 | buf[off + 3];
			off += 4;
			if (len - off < n)
				return -1;
			v[i].p = buf + off;
			v[i].len = n;
			off += n;
			break;
		default:
			return -1;
		}
	}
	return off == len ? 0 : -1;
}

