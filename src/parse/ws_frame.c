/*
 * RFC 6455 frame headers (§5.2), parsed strictly and written back the same
 * way: the WebSocket relay (proxy_ws.c) frames both directions with these,
 * so what it relays is exactly what it understood.
 */
#include <string.h>

#include "parse/ws_frame.h"

static int
ws_opcode_known(unsigned op)
{
	return op <= WS_OP_BINARY || (op >= WS_OP_CLOSE && op <= WS_OP_PONG);
}

/* Checks in byte order, so that a prefix never contradicts the whole. */
static int
ws_first_byte(uint8_t b, struct ws_frame *f)
{
	f->fin = (b & 0x80) != 0;
	f->rsv = (b >> 4) & 0x7;
	f->opcode = b & 0x0f;
	if (f->rsv != 0)
		return WS_ERR_RSV;
	if (!ws_opcode_known(f->opcode))
		return WS_ERR_OPCODE;
	if (WS_OP_IS_CONTROL(f->opcode) && !f->fin)
		return WS_ERR_CONTROL;
	return 0;
}

static int
ws_second_byte(uint8_t b, int from, struct ws_frame *f)
{
	f->masked = (b & 0x80) != 0;
	if (f->masked != (from == WS_FROM_CLIENT))
		return WS_ERR_MASK;
	if (WS_OP_IS_CONTROL(f->opcode) && (b & 0x7f) > WS_CONTROL_MAX)
		return WS_ERR_CONTROL;
	return 0;
}

/* The extended length at p (2 or 8 bytes), minimal encoding required. */
static int
ws_ext_length(const uint8_t *p, size_t ext, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < ext; i++)
		v = v << 8 | p[i];
	if ((ext == 2 && v < 126) || (ext == 8 && v <= 0xffff))
		return WS_ERR_LENGTH;
	*out = v;
	return 0;
}

int
ws_frame_parse(const uint8_t *buf, size_t len, int from, struct ws_frame *out)
{
	struct ws_frame f;
	size_t ext;
	int rc;

	memset(&f, 0, sizeof(f));
	memset(out, 0, sizeof(*out));
	if (len < 1)
		return WS_NEED_MORE;
	if ((rc = ws_first_byte(buf[0], &f)) != 0)
		return rc;
	if (len < 2)
		return WS_NEED_MORE;
	if ((rc = ws_second_byte(buf[1], from, &f)) != 0)
		return rc;
	f.len = buf[1] & 0x7f;
	ext = f.len == 126 ? 2 : f.len == 127 ? 8 : 0;
	/* The most significant bit of a 64-bit length must be 0. */
	if (ext == 8 && len >= 3 && (buf[2] & 0x80))
		return WS_ERR_LENGTH;
	if (len < 2 + ext)
		return WS_NEED_MORE;
	if (ext > 0 && (rc = ws_ext_length(buf + 2, ext, &f.len)) != 0)
		return rc;
	f.hlen = 2 + ext + (f.masked ? 4 : 0);
	if (len < f.hlen)
		return WS_NEED_MORE;
	if (f.masked)
		memcpy(f.key, buf + 2 + ext, 4);
	*out = f;
	return (int)f.hlen;
}

size_t
ws_frame_encode(const struct ws_frame *f, uint8_t *out)
{
	size_t n = 2, i, ext;

	out[0] = (uint8_t)((f->fin ? 0x80 : 0) | (f->rsv & 0x7) << 4 |
	    (f->opcode & 0x0f));
	ext = f->len < 126 ? 0 : f->len <= 0xffff ? 2 : 8;
	out[1] = (uint8_t)((f->masked ? 0x80 : 0) |
	    (ext == 0 ? f->len : ext == 2 ? 126 : 127));
	for (i = 0; i < ext; i++)
		out[n++] = (uint8_t)(f->len >> (8 * (ext - 1 - i)));
	if (f->masked) {
		memcpy(out + n, f->key, 4);
		n += 4;
	}
	return n;
}

void
ws_mask(uint8_t *p, size_t n, const uint8_t key[4], uint64_t offset)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] ^= key[(offset + i) & 3];
}
