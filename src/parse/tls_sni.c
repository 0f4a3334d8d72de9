/*
 * Pure TLS ClientHello parser: checks the record framing, then walks the
 * handshake message in place across its records (no copy, no heap) to pull
 * out the SNI host name and the ALPN offer.
 */
#include <string.h>

#include "parse/tls_sni.h"

#define TLS_REC_HDR		5
#define TLS_REC_MAX		(16384 + 2048)
#define TLS_CT_HANDSHAKE	22
#define TLS_HS_HDR		4
#define TLS_HS_CLIENT_HELLO	1
#define TLS_EXT_SERVER_NAME	0
#define TLS_EXT_ALPN		16
#define TLS_SNI_HOST_NAME	0

/*
 * A forward-only reader over handshake bytes carried by consecutive
 * records whose headers were already validated. left bounds the reads.
 */
struct tls_rd {
	const uint8_t	*buf;
	size_t		 pos;		/* offset in buf of the next byte */
	size_t		 rec_left;	/* fragment bytes left in this record */
	size_t		 left;		/* bytes this reader may still read */
};

static size_t
tls_be16(const uint8_t *p)
{
	return (size_t)p[0] << 8 | p[1];
}

static int
tls_rd_skip(struct tls_rd *r, size_t n)
{
	size_t k;

	if (n > r->left)
		return -1;
	r->left -= n;
	while (n > 0) {
		if (r->rec_left == 0) {
			r->rec_left = tls_be16(r->buf + r->pos + 3);
			r->pos += TLS_REC_HDR;
		}
		k = n < r->rec_left ? n : r->rec_left;
		r->pos += k;
		r->rec_left -= k;
		n -= k;
	}
	return 0;
}

static int
tls_rd_bytes(struct tls_rd *r, uint8_t *dst, size_t n)
{
	size_t i;

	if (n > r->left)
		return -1;
	r->left -= n;
	for (i = 0; i < n; i++) {
		if (r->rec_left == 0) {
			r->rec_left = tls_be16(r->buf + r->pos + 3);
			r->pos += TLS_REC_HDR;
		}
		dst[i] = r->buf[r->pos++];
		r->rec_left--;
	}
	return 0;
}

/* Reads a big-endian integer of n (1..3) bytes. */
static int
tls_rd_uint(struct tls_rd *r, size_t n, size_t *v)
{
	uint8_t b[3];
	size_t i;

	if (tls_rd_bytes(r, b, n) == -1)
		return -1;
	for (*v = 0, i = 0; i < n; i++)
		*v = *v << 8 | b[i];
	return 0;
}

/* A reader over the next n bytes; the parent skips past them. */
static int
tls_rd_sub(struct tls_rd *r, size_t n, struct tls_rd *sub)
{
	if (n > r->left)
		return -1;
	*sub = *r;
	sub->left = n;
	return tls_rd_skip(r, n);
}

/* A length-prefixed vector: a reader over its body, which must be non-empty. */
static int
tls_rd_vec(struct tls_rd *r, size_t lenbytes, struct tls_rd *sub)
{
	size_t n;

	if (tls_rd_uint(r, lenbytes, &n) == -1 || n == 0)
		return -1;
	return tls_rd_sub(r, n, sub);
}

/*
 * Record framing, decided byte by byte so that a prefix of the input never
 * gets another verdict than the whole. On TLS_CH_OK, *msg_len is the
 * handshake message's length (header included) and *consumed the records'.
 */
static int
tls_frame(const uint8_t *buf, size_t len, size_t *msg_len, size_t *consumed)
{
	uint8_t hs[TLS_HS_HDR];
	size_t pos = 0, hb = 0, need = 0, rl, avail, j;

	for (;;) {
		if (len <= pos)
			return TLS_CH_NEED_MORE;
		if (buf[pos] != TLS_CT_HANDSHAKE)
			return pos == 0 ? TLS_CH_NOT_TLS : TLS_CH_BAD;
		if (len <= pos + 1)
			return TLS_CH_NEED_MORE;
		if (buf[pos + 1] != 3)
			return pos == 0 ? TLS_CH_NOT_TLS : TLS_CH_BAD;
		if (len <= pos + 2)
			return TLS_CH_NEED_MORE;
		if (buf[pos + 2] < 1 || buf[pos + 2] > 4)
			return TLS_CH_BAD;
		if (len < pos + TLS_REC_HDR)
			return TLS_CH_NEED_MORE;
		rl = tls_be16(buf + pos + 3);
		/* Empty handshake fragments are forbidden (RFC 8446 5.1). */
		if (rl == 0 || rl > TLS_REC_MAX)
			return TLS_CH_BAD;
		avail = len - pos - TLS_REC_HDR;
		if (avail > rl)
			avail = rl;
		for (j = hb; j < TLS_HS_HDR && j < hb + avail; j++)
			hs[j] = buf[pos + TLS_REC_HDR + (j - hb)];
		if (j > 0 && hs[0] != TLS_HS_CLIENT_HELLO)
			return TLS_CH_BAD;
		if (need == 0 && j == TLS_HS_HDR) {
			need = TLS_HS_HDR + ((size_t)hs[1] << 16 |
			    (size_t)hs[2] << 8 | hs[3]);
			if (need > TLS_CH_MAX_LEN)
				return TLS_CH_BAD;
		}
		if (need != 0 && hb + rl >= need) {
			/* A client's first flight is the ClientHello alone. */
			if (hb + rl != need)
				return TLS_CH_BAD;
			if (avail < rl)
				return TLS_CH_NEED_MORE;
			*msg_len = need;
			*consumed = pos + TLS_REC_HDR + rl;
			return TLS_CH_OK;
		}
		if (avail < rl)
			return TLS_CH_NEED_MORE;
		hb += rl;
		pos += TLS_REC_HDR + rl;
	}
}

/* server_name (RFC 6066 3): a list with at most one host_name. */
static int
tls_ext_sni(struct tls_rd *e, struct tls_client_hello *out)
{
	struct tls_rd list;
	size_t type, n, i;
	uint8_t c;

	if (tls_rd_vec(e, 2, &list) == -1 || e->left != 0)
		return -1;
	while (list.left > 0) {
		if (tls_rd_uint(&list, 1, &type) == -1 ||
		    tls_rd_uint(&list, 2, &n) == -1)
			return -1;
		if (type != TLS_SNI_HOST_NAME) {
			if (tls_rd_skip(&list, n) == -1)
				return -1;
			continue;
		}
		if (out->has_sni || n == 0 || n > sizeof(out->sni) - 1 ||
		    tls_rd_bytes(&list, (uint8_t *)out->sni, n) == -1)
			return -1;
		/* Printable ASCII only: A-labels, never NUL or CTL. */
		for (i = 0; i < n; i++) {
			c = (uint8_t)out->sni[i];
			if (c <= 0x20 || c >= 0x7f)
				return -1;
		}
		out->sni[n] = '\0';
		out->sni_len = n;
		out->has_sni = 1;
	}
	return 0;
}

/* application_layer_protocol_negotiation (RFC 7301 3.1). */
static int
tls_ext_alpn(struct tls_rd *e, struct tls_client_hello *out)
{
	struct tls_rd list;
	uint8_t proto[255];
	size_t n;

	if (tls_rd_vec(e, 2, &list) == -1 || e->left != 0)
		return -1;
	while (list.left > 0) {
		if (tls_rd_uint(&list, 1, &n) == -1 || n == 0 ||
		    tls_rd_bytes(&list, proto, n) == -1)
			return -1;
		if (n == 8 && memcmp(proto, "http/1.1", 8) == 0)
			out->alpn_http11 = 1;
		else if (n == 2 && memcmp(proto, "h2", 2) == 0)
			out->alpn_h2 = 1;
	}
	out->has_alpn = 1;
	return 0;
}

static int
tls_extensions(struct tls_rd *r, struct tls_client_hello *out)
{
	uint8_t seen[65536 / 8];
	struct tls_rd exts, e;
	size_t type, n;

	if (r->left == 0)
		return 0;	/* extensions are optional before TLS 1.3 */
	if (tls_rd_uint(r, 2, &n) == -1 || n != r->left ||
	    tls_rd_sub(r, n, &exts) == -1)
		return -1;
	memset(seen, 0, sizeof(seen));
	while (exts.left > 0) {
		if (tls_rd_uint(&exts, 2, &type) == -1 ||
		    tls_rd_uint(&exts, 2, &n) == -1 ||
		    tls_rd_sub(&exts, n, &e) == -1)
			return -1;
		if (seen[type / 8] & (1 << (type % 8)))
			return -1;
		seen[type / 8] |= (uint8_t)(1 << (type % 8));
		if (type == TLS_EXT_SERVER_NAME && tls_ext_sni(&e, out) == -1)
			return -1;
		if (type == TLS_EXT_ALPN && tls_ext_alpn(&e, out) == -1)
			return -1;
	}
	return 0;
}

/* The ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2). */
static int
tls_client_hello_body(struct tls_rd *r, struct tls_client_hello *out)
{
	struct tls_rd v;
	size_t version, n;

	if (tls_rd_uint(r, 2, &version) == -1 ||
	    version < 0x0301 || version > 0x0304)
		return -1;
	if (tls_rd_skip(r, 32) == -1)		/* random */
		return -1;
	if (tls_rd_uint(r, 1, &n) == -1 || n > 32 || tls_rd_skip(r, n) == -1)
		return -1;			/* legacy_session_id */
	if (tls_rd_vec(r, 2, &v) == -1 || v.left % 2 != 0)
		return -1;			/* cipher_suites */
	if (tls_rd_vec(r, 1, &v) == -1)		/* compression_methods */
		return -1;
	return tls_extensions(r, out);
}

int
tls_parse_client_hello(const uint8_t *buf, size_t len,
    struct tls_client_hello *out)
{
	struct tls_rd r;
	size_t msg_len, consumed;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = tls_frame(buf, len, &msg_len, &consumed)) != TLS_CH_OK)
		return rc;
	r.buf = buf;
	r.pos = TLS_REC_HDR;
	r.rec_left = tls_be16(buf + 3);
	r.left = msg_len;
	if (tls_rd_skip(&r, TLS_HS_HDR) == -1 ||
	    tls_client_hello_body(&r, out) == -1 || r.left != 0) {
		memset(out, 0, sizeof(*out));
		return TLS_CH_BAD;
	}
	out->consumed = consumed;
	return TLS_CH_OK;
}

int
tls_record_like(const uint8_t *buf, size_t len)
{
	if (len == 0)
		return -1;
	if (buf[0] >= 0x14 && buf[0] <= 0x18) {
		if (len < 2)
			return -1;
		return buf[1] == 0x03;
	}
	/* SSLv2 framing: 2-byte length with the high bit, CLIENT-HELLO, v3+. */
	if (buf[0] & 0x80) {
		if (len < 4)
			return -1;
		return buf[2] == 0x01 && buf[3] == 0x03;
	}
	return 0;
}
