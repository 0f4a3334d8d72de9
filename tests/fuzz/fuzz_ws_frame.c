/*
 * libFuzzer target for the WebSocket frame-header parser: memory safety,
 * header lengths consistent with the fields, prefixes that never
 * contradict the whole, and headers that re-encode to the same bytes.
 * The first input byte picks the sender (client or server).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/ws_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_frame(const uint8_t *buf, size_t len, int from, int rc,
    const struct ws_frame *f)
{
	uint8_t enc[WS_HDR_MAX];
	size_t ext;

	if ((size_t)rc > len || rc < 2 || rc > WS_HDR_MAX || f->hlen != (size_t)rc)
		abort();
	ext = f->len < 126 ? 0 : f->len <= 0xffff ? 2 : 8;
	if (f->hlen != 2 + ext + (f->masked ? 4 : 0))
		abort();
	if (f->rsv != 0 || f->masked != (from == WS_FROM_CLIENT) ||
	    f->len >> 63 != 0 || f->opcode > 0xf)
		abort();
	if (WS_OP_IS_CONTROL(f->opcode) && (!f->fin || f->len > WS_CONTROL_MAX))
		abort();
	if (ws_frame_encode(f, enc) != f->hlen || memcmp(enc, buf, f->hlen) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_frame f, g;
	uint8_t tmp[WS_HDR_MAX];
	size_t k;
	int from, rc, rk;

	if (size < 1)
		return 0;
	from = data[0] & 1 ? WS_FROM_CLIENT : WS_FROM_SERVER;
	data++;
	size--;
	rc = ws_frame_parse(data, size, from, &f);
	if (rc < WS_ERR_LENGTH || rc > WS_HDR_MAX)
		abort();
	if (rc > 0)
		check_frame(data, size, from, rc, &f);
	/* Every prefix: NEED_MORE, or the same verdict. */
	for (k = 0; k < size && k <= WS_HDR_MAX; k++) {
		rk = ws_frame_parse(data, k, from, &g);
		if (rk == WS_NEED_MORE)
			continue;
		if (rk != rc || (rc > 0 && (g.len != f.len || g.hlen != f.hlen)))
			abort();
	}
	/* Masking twice from any offset is the identity. */
	if (rc > 0 && size >= (size_t)rc) {
		k = size - (size_t)rc < sizeof(tmp) ? size - (size_t)rc : sizeof(tmp);
		memcpy(tmp, data + rc, k);
		ws_mask(tmp, k, f.key, f.len);
		ws_mask(tmp, k, f.key, f.len);
		if (memcmp(tmp, data + rc, k) != 0)
			abort();
	}
	return 0;
}
