/*
 * The watch over a passed-through TLS handshake (tls_watch.h): record
 * framing only, no copy, no heap. The ClientHello itself is read by
 * tls_parse_client_hello, which also insists that it fills its records
 * alone (nothing of another message shares them).
 */
#include <string.h>

#include "parse/tls_watch.h"

#define REC_HDR		5
#define REC_MAX		(16384 + 2048)
#define CT_CCS		20
#define CT_ALERT	21
#define CT_HANDSHAKE	22
#define CT_APPDATA	23
#define HS_SERVER_HELLO	2

/* SHA-256("HelloRetryRequest"): a ServerHello with it is a retry request. */
static const uint8_t hrr_random[32] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
	0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c
};

void
tls_watch_start(struct tls_watch *w, size_t first_len)
{
	memset(w, 0, sizeof(*w));
	w->on = 1;
	w->skip = first_len;
}

int
tls_watch_done(const struct tls_watch *w)
{
	return !w->on && w->server_done;
}

int
tls_watch_client(struct tls_watch *w, const uint8_t *p, size_t len,
    size_t *pass, tls_watch_check_fn check, void *arg)
{
	struct tls_client_hello ch;
	size_t pos = 0, k, rl;
	int rc;

	for (;;) {
		if (w->skip > 0) {
			k = len - pos < w->skip ? len - pos : w->skip;
			pos += k;
			w->skip -= k;
		}
		if (!w->on) {
			*pass = len;
			return 0;
		}
		if (w->skip > 0 || len - pos < REC_HDR)
			break;
		if (p[pos + 1] != 3)
			return -1;
		rl = (size_t)p[pos + 3] << 8 | p[pos + 4];
		switch (p[pos]) {
		case CT_HANDSHAKE:
			rc = tls_parse_client_hello(p + pos, len - pos, &ch);
			if (rc == TLS_CH_NEED_MORE && len - pos < TLS_CH_MAX_LEN)
				goto out;
			if (rc != TLS_CH_OK || check(&ch, arg) == -1)
				return -1;
			w->skip = ch.consumed;
			w->again = 1;
			/* One retry request at most (RFC 8446 4.1.4). */
			if (w->hrr)
				w->on = 0;
			break;
		case CT_CCS:
		case CT_ALERT:
		case CT_APPDATA:
			/* middlebox compatibility, an alert, early data */
			if (rl > REC_MAX)
				return -1;
			w->skip = REC_HDR + rl;
			break;
		default:
			return -1;
		}
	}
out:
	*pass = pos;
	return 0;
}

int
tls_watch_server(struct tls_watch *w, const uint8_t *p, size_t len)
{
	size_t rl;

	if (w->server_done)
		return 0;
	if (len < TLS_W_SERVER_NEED) {
		/* Not a handshake record: nothing more to learn from it. */
		if (len == 0 || p[0] == CT_HANDSHAKE)
			return 1;
		w->server_done = 1;
		return 0;
	}
	w->server_done = 1;
	rl = (size_t)p[3] << 8 | p[4];
	/*
	 * A ServerHello whose first 38 bytes come in its first record (every
	 * server's); anything else cannot be told apart from a retry request
	 * here, so the client's records stay watched.
	 */
	if (p[0] != CT_HANDSHAKE || p[1] != 3 || rl < TLS_W_SERVER_NEED -
	    REC_HDR || p[REC_HDR] != HS_SERVER_HELLO)
		return 0;
	if (memcmp(p + REC_HDR + 6, hrr_random, sizeof(hrr_random)) == 0) {
		w->hrr = 1;
		if (w->again)
			w->on = 0;
	} else
		w->on = 0;
	return 0;
}
