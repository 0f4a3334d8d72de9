/*
 * RFC 6455 frame headers: valid frames of every length encoding, and the
 * malformed ones the relay must refuse, each also cut short at every byte.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "parse/ws_frame.h"

struct frame_case {
	const char	*name;
	int		 from;
	size_t		 n;
	uint8_t		 b[16];
	int		 rc;		/* header length, or WS_ERR_* */
	int		 fin;
	unsigned	 opcode;
	uint64_t	 len;
};

#define C WS_FROM_CLIENT
#define S WS_FROM_SERVER
#define K 0x11, 0x22, 0x33, 0x44

static const struct frame_case cases[] = {
	/* valid */
	{ "server text", S, 2, { 0x81, 0x05 }, 2, 1, WS_OP_TEXT, 5 },
	{ "server empty binary", S, 2, { 0x82, 0x00 }, 2, 1, WS_OP_BINARY, 0 },
	{ "server fragment", S, 2, { 0x01, 0x03 }, 2, 0, WS_OP_TEXT, 3 },
	{ "server continuation", S, 2, { 0x80, 0x03 }, 2, 1, WS_OP_CONT, 3 },
	{ "server ping 125", S, 2, { 0x89, 0x7d }, 2, 1, WS_OP_PING, 125 },
	{ "server pong", S, 2, { 0x8a, 0x00 }, 2, 1, WS_OP_PONG, 0 },
	{ "server close", S, 2, { 0x88, 0x02 }, 2, 1, WS_OP_CLOSE, 2 },
	{ "server 16-bit 126", S, 4, { 0x82, 0x7e, 0x00, 0x7e }, 4, 1,
	    WS_OP_BINARY, 126 },
	{ "server 16-bit max", S, 4, { 0x82, 0x7e, 0xff, 0xff }, 4, 1,
	    WS_OP_BINARY, 65535 },
	{ "server 64-bit min", S, 10, { 0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0 },
	    10, 1, WS_OP_BINARY, 65536 },
	{ "server 64-bit max", S, 10, { 0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff }, 10, 1, WS_OP_BINARY, 0x7fffffffffffffffULL },
	{ "client text", C, 6, { 0x81, 0x85, K }, 6, 1, WS_OP_TEXT, 5 },
	{ "client 16-bit", C, 8, { 0x82, 0xfe, 0x01, 0x00, K }, 8, 1,
	    WS_OP_BINARY, 256 },
	{ "client 64-bit", C, 14, { 0x02, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 0, K },
	    14, 0, WS_OP_BINARY, 0x100000 },
	{ "client close", C, 6, { 0x88, 0x80, K }, 6, 1, WS_OP_CLOSE, 0 },
	{ "trailing payload ignored", S, 5, { 0x81, 0x03, 'a', 'b', 'c' }, 2, 1,
	    WS_OP_TEXT, 3 },

	/* RSV bits: no extension is negotiated */
	{ "rsv1", S, 2, { 0xc1, 0x05 }, WS_ERR_RSV, 0, 0, 0 },
	{ "rsv2", S, 2, { 0xa1, 0x05 }, WS_ERR_RSV, 0, 0, 0 },
	{ "rsv3", S, 2, { 0x91, 0x05 }, WS_ERR_RSV, 0, 0, 0 },
	{ "rsv1 on a client frame", C, 6, { 0xc1, 0x85, K }, WS_ERR_RSV, 0, 0, 0 },
	{ "rsv all, first byte only", S, 1, { 0xf1 }, WS_ERR_RSV, 0, 0, 0 },

	/* reserved opcodes */
	{ "opcode 3", S, 2, { 0x83, 0x00 }, WS_ERR_OPCODE, 0, 0, 0 },
	{ "opcode 7", S, 2, { 0x87, 0x00 }, WS_ERR_OPCODE, 0, 0, 0 },
	{ "opcode b", S, 2, { 0x8b, 0x00 }, WS_ERR_OPCODE, 0, 0, 0 },
	{ "opcode f", C, 6, { 0x8f, 0x80, K }, WS_ERR_OPCODE, 0, 0, 0 },
	{ "opcode 4, first byte only", S, 1, { 0x84 }, WS_ERR_OPCODE, 0, 0, 0 },

	/* control frames */
	{ "fragmented ping", S, 2, { 0x09, 0x00 }, WS_ERR_CONTROL, 0, 0, 0 },
	{ "fragmented close", C, 6, { 0x08, 0x80, K }, WS_ERR_CONTROL, 0, 0, 0 },
	{ "ping 126", S, 4, { 0x89, 0x7e, 0x00, 0x7e }, WS_ERR_CONTROL, 0, 0, 0 },
	{ "pong 127", S, 10, { 0x8a, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0 },
	    WS_ERR_CONTROL, 0, 0, 0 },
	{ "close 126 from client", C, 8, { 0x88, 0xfe, 0x00, 0x80, K },
	    WS_ERR_CONTROL, 0, 0, 0 },

	/* masking */
	{ "client unmasked", C, 2, { 0x81, 0x05 }, WS_ERR_MASK, 0, 0, 0 },
	{ "server masked", S, 6, { 0x81, 0x85, K }, WS_ERR_MASK, 0, 0, 0 },
	{ "server masked ping", S, 6, { 0x89, 0x80, K }, WS_ERR_MASK, 0, 0, 0 },

	/* lengths */
	{ "16-bit for 0", S, 4, { 0x82, 0x7e, 0x00, 0x00 }, WS_ERR_LENGTH, 0, 0, 0 },
	{ "16-bit for 125", S, 4, { 0x82, 0x7e, 0x00, 0x7d }, WS_ERR_LENGTH, 0, 0, 0 },
	{ "64-bit for 65535", S, 10, { 0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff,
	    0xff }, WS_ERR_LENGTH, 0, 0, 0 },
	{ "64-bit for 5", C, 14, { 0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 5, K },
	    WS_ERR_LENGTH, 0, 0, 0 },
	{ "64-bit MSB", S, 10, { 0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0 },
	    WS_ERR_LENGTH, 0, 0, 0 },
	{ "64-bit MSB, third byte only", S, 3, { 0x82, 0x7f, 0xff },
	    WS_ERR_LENGTH, 0, 0, 0 },

	/* short */
	{ "nothing", S, 0, { 0 }, WS_NEED_MORE, 0, 0, 0 },
	{ "one byte", S, 1, { 0x81 }, WS_NEED_MORE, 0, 0, 0 },
	{ "16-bit cut", S, 3, { 0x82, 0x7e, 0x01 }, WS_NEED_MORE, 0, 0, 0 },
	{ "64-bit cut", S, 9, { 0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0 },
	    WS_NEED_MORE, 0, 0, 0 },
	{ "mask key cut", C, 5, { 0x81, 0x85, 0x11, 0x22, 0x33 },
	    WS_NEED_MORE, 0, 0, 0 },
};

static void
check_case(const struct frame_case *c)
{
	struct ws_frame f;
	uint8_t enc[WS_HDR_MAX];
	size_t k;
	int rc, rk;

	rc = ws_frame_parse(c->b, c->n, c->from, &f);
	CHECK_MSG(rc == c->rc, "%s: %d, want %d", c->name, rc, c->rc);
	if (rc > 0) {
		CHECK_MSG(f.fin == c->fin && f.opcode == c->opcode &&
		    f.len == c->len && f.hlen == (size_t)rc && f.rsv == 0,
		    "%s: fields", c->name);
		CHECK_MSG(f.masked == (c->from == WS_FROM_CLIENT), "%s: mask",
		    c->name);
		if (f.masked)
			CHECK_MSG(memcmp(f.key, "\x11\x22\x33\x44", 4) == 0,
			    "%s: key", c->name);
		/* Written back, the header is the same bytes. */
		CHECK_MSG(ws_frame_encode(&f, enc) == f.hlen &&
		    memcmp(enc, c->b, f.hlen) == 0, "%s: encode", c->name);
	}
	/* A prefix is NEED_MORE until the header is whole, or the same error. */
	for (k = 0; k < c->n; k++) {
		rk = ws_frame_parse(c->b, k, c->from, &f);
		if (rc > 0)
			CHECK_MSG(rk == (k < (size_t)rc ? WS_NEED_MORE : rc),
			    "%s: prefix %zu gave %d", c->name, k, rk);
		else
			CHECK_MSG(rk == WS_NEED_MORE || rk == rc,
			    "%s: prefix %zu gave %d", c->name, k, rk);
	}
}

static void
test_mask(void)
{
	static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	/* RFC 6455 §5.7: a masked "Hello" */
	static const uint8_t masked[5] = { 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	uint8_t p[5];
	size_t cut;

	memcpy(p, masked, 5);
	ws_mask(p, 5, key, 0);
	CHECK(memcmp(p, "Hello", 5) == 0);
	/* Unmasked piece by piece from any offset, the same bytes. */
	for (cut = 0; cut <= 5; cut++) {
		memcpy(p, masked, 5);
		ws_mask(p, cut, key, 0);
		ws_mask(p + cut, 5 - cut, key, cut);
		CHECK_MSG(memcmp(p, "Hello", 5) == 0, "cut %zu", cut);
	}
	ws_mask(p, 5, key, 0);
	CHECK(memcmp(p, masked, 5) == 0);
}

static void
test_encode_lengths(void)
{
	static const uint64_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536,
	    1ULL << 32, 0x7fffffffffffffffULL };
	struct ws_frame f, g;
	uint8_t enc[WS_HDR_MAX];
	size_t i, n;
	int m;

	for (m = 0; m < 2; m++)
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			memset(&f, 0, sizeof(f));
			f.fin = 1;
			f.opcode = WS_OP_BINARY;
			f.masked = m;
			memcpy(f.key, "abcd", 4);
			f.len = lens[i];
			n = ws_frame_encode(&f, enc);
			CHECK_INT(ws_frame_parse(enc, n, m ? WS_FROM_CLIENT :
			    WS_FROM_SERVER, &g), (int)n);
			CHECK(g.len == lens[i] && g.fin && g.masked == m &&
			    g.opcode == WS_OP_BINARY);
		}
}

int
main(void)
{
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
	test_mask();
	test_encode_lengths();
	return check_summary();
}
