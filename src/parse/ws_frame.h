/*
 * A pure RFC 6455 frame-header parser and encoder: functions over bytes,
 * no I/O, no heap. No extension is ever negotiated through the gateway, so
 * RSV bits are errors; lengths must use their minimal encoding.
 */
#ifndef SG_WS_FRAME_H
#define SG_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define WS_HDR_MAX		14	/* 2 + 8 (64-bit length) + 4 (mask key) */
#define WS_CONTROL_MAX		125	/* a control frame's payload */

#define WS_OP_CONT		0x0
#define WS_OP_TEXT		0x1
#define WS_OP_BINARY		0x2
#define WS_OP_CLOSE		0x8
#define WS_OP_PING		0x9
#define WS_OP_PONG		0xa
#define WS_OP_IS_CONTROL(op)	(((op) & 0x8) != 0)

/* Close status codes the gateway sends (RFC 6455 §7.4.1). */
#define WS_CLOSE_PROTOCOL	1002
#define WS_CLOSE_POLICY		1008
#define WS_CLOSE_TOO_BIG	1009
#define WS_CLOSE_BAD_GATEWAY	1014	/* the origin's side failed (IANA registry) */

/* Return values of ws_frame_parse (a positive value is the header's length). */
#define WS_NEED_MORE		0
#define WS_ERR_RSV		(-1)	/* an RSV bit without an extension */
#define WS_ERR_OPCODE		(-2)	/* a reserved opcode */
#define WS_ERR_MASK		(-3)	/* client frame unmasked, or server frame masked */
#define WS_ERR_CONTROL		(-4)	/* control frame fragmented or over 125 bytes */
#define WS_ERR_LENGTH		(-5)	/* non-minimal length, or the 64-bit MSB set */

/* Which side sent the frame: clients mask, servers do not (RFC 6455 §5.1). */
#define WS_FROM_SERVER		0
#define WS_FROM_CLIENT		1

struct ws_frame {
	int		 fin;
	unsigned	 rsv;		/* RSV1..3 as bits 2..0 (always 0 once parsed) */
	unsigned	 opcode;
	int		 masked;
	uint8_t		 key[4];	/* when masked */
	uint64_t	 len;		/* payload length */
	size_t		 hlen;		/* header length, 2..14 */
};

/*
 * Parse the frame header at buf[0..len) sent by `from` (WS_FROM_CLIENT or
 * WS_FROM_SERVER). Returns the header's length (the payload follows),
 * WS_NEED_MORE, or a WS_ERR_*. Errors are reported as soon as the bytes
 * that show them are there; a prefix of a valid header is WS_NEED_MORE.
 */
int	ws_frame_parse(const uint8_t *buf, size_t len, int from,
	    struct ws_frame *out);
/*
 * Write the header of f to out (at least WS_HDR_MAX bytes), lengths in
 * their minimal encoding; returns its length. f->rsv is written as given.
 */
size_t	ws_frame_encode(const struct ws_frame *f, uint8_t *out);
/*
 * XOR p[0..n) with the mask key, p[0] being payload byte `offset` of its
 * frame (so a payload can be unmasked piece by piece). Its own inverse.
 */
void	ws_mask(uint8_t *p, size_t n, const uint8_t key[4], uint64_t offset);

#endif
