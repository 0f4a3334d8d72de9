/*
 * A pure parser of the command list a git client sends first in the body of
 * POST .../git-receive-pack (gitprotocol-pack(5), "Reference Update
 * Request"): the refs a push would create, update or delete. No I/O, no heap.
 */
#ifndef SG_PKTLINE_H
#define SG_PKTLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Bounds. The whole command list (every pkt-line up to and including the
 * flush-pkt) must fit in PKTLINE_LIST_MAX bytes and hold at most
 * PKTLINE_MAX_CMDS commands; a refname has at most PKTLINE_REF_MAX bytes.
 * A longer list is an error, not NEED_MORE, so a caller holding the body
 * never holds more than PKTLINE_LIST_MAX bytes of it.
 */
#define PKTLINE_LIST_MAX	(32 * 1024)
#define PKTLINE_MAX_CMDS	256
#define PKTLINE_REF_MAX		1024
#define PKTLINE_SHALLOW_MAX	1024	/* "shallow <oid>" lines before the commands */

/* Return values of pktline_parse_commands (a positive value: bytes consumed). */
#define PKTLINE_NEED_MORE	0
#define PKTLINE_ERR_LENGTH	(-1)	/* not 4 hex digits, 0001-0003, or over the list bound */
#define PKTLINE_ERR_SYNTAX	(-2)	/* not "<old> SP <new> SP <ref>" */
#define PKTLINE_ERR_OID		(-3)	/* not 40 or 64 lower-case hex, or lengths mixed */
#define PKTLINE_ERR_REF		(-4)	/* empty, too long, or a control byte or space */
#define PKTLINE_ERR_TOO_MANY	(-5)	/* over PKTLINE_MAX_CMDS (or shallow lines) */
#define PKTLINE_ERR_CERT	(-6)	/* a push certificate: not read, refused */
#define PKTLINE_ERR_BOTH	(-7)	/* old and new both the zero id */

enum pktline_op {
	PKTLINE_CREATE,		/* old id all zeros */
	PKTLINE_UPDATE,
	PKTLINE_DELETE		/* new id all zeros */
};

struct pktline_cmd {
	enum pktline_op	 op;
	size_t		 ref_off;	/* the refname is buf[ref_off .. +ref_len) */
	size_t		 ref_len;
};

struct pktline_cmds {
	struct pktline_cmd cmd[PKTLINE_MAX_CMDS];
	size_t		 n;
	size_t		 oid_len;	/* 40 (SHA-1) or 64 (SHA-256); 0 when n == 0 */
};

/*
 * Parse the command list at buf[0..len): optional "shallow" lines, then
 * pkt-lines "<old-oid> SP <new-oid> SP <refname>" (the first may carry
 * NUL and capabilities; a trailing LF is allowed), up to the flush-pkt
 * "0000". Returns the bytes consumed through the flush-pkt (the pack
 * follows), PKTLINE_NEED_MORE, or a PKTLINE_ERR_*. Errors are reported
 * as soon as the bytes that show them are there, so a prefix of a valid
 * list is always NEED_MORE. Refnames point into buf; out holds no
 * command unless the list was consumed.
 */
int	pktline_parse_commands(const uint8_t *buf, size_t len,
	    struct pktline_cmds *out);
/* A short English phrase for a PKTLINE_ERR_* value. */
const char *pktline_strerror(int rc);

#endif
