/*
 * The command list of a git push (receive-pack request), parsed strictly so
 * the gateway can refuse a push to a ref its rule does not name before any
 * of the body reaches the origin (proxy_git.c). Push certificates are refused.
 */
#include <string.h>

#include "core/util.h"
#include "parse/pktline.h"

#define PKT_HDR		4
#define PKT_MAX		65520	/* LARGE_PACKET_MAX: git's longest pkt-line */

/*
 * The pkt-line length at p[0..avail): checked digit by digit so a prefix
 * never contradicts the whole. -1 error, 0 need more, else 1 and *plen.
 */
static int
pkt_length(const uint8_t *p, size_t avail, size_t *plen)
{
	size_t i, v = 0;
	int h;

	for (i = 0; i < PKT_HDR && i < avail; i++) {
		if ((h = util_hexval(p[i])) < 0)
			return -1;
		v = v << 4 | (size_t)h;
	}
	if (i < PKT_HDR)
		return 0;
	if ((v > 0 && v < PKT_HDR) || v > PKT_MAX)
		return -1;
	*plen = v;
	return 1;
}

/* 1 when p[0..n) is n lower-case hex digits. */
static int
is_oid(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

static int
is_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != '0')
			return 0;
	return 1;
}

/* The oid length a line starting at p[0..n) uses: 40 or 64, else 0. */
static size_t
oid_len_of(const uint8_t *p, size_t n)
{
	if (n > 40 && p[40] == ' ' && is_oid(p, 40))
		return 40;
	if (n > 64 && p[64] == ' ' && is_oid(p, 64))
		return 64;
	return 0;
}

static int
parse_ref(const uint8_t *p, size_t n)
{
	size_t i;

	if (n == 0 || n > PKTLINE_REF_MAX)
		return PKTLINE_ERR_REF;
	for (i = 0; i < n; i++)
		if (p[i] <= 0x20 || p[i] == 0x7f)
			return PKTLINE_ERR_REF;
	return 0;
}

/* One command line, payload p[0..n) at offset off of the buffer. */
static int
parse_command(const uint8_t *p, size_t n, size_t off, struct pktline_cmds *out)
{
	const uint8_t *nul;
	struct pktline_cmd *c;
	size_t ol, rl;
	int rc, zold, znew;

	/* Capabilities follow a NUL on the first command only. */
	if ((nul = memchr(p, '\0', n)) != NULL) {
		if (out->n > 0)
			return PKTLINE_ERR_SYNTAX;
		n = (size_t)(nul - p);
	}
	if ((ol = oid_len_of(p, n)) == 0)
		return PKTLINE_ERR_OID;
	if (out->oid_len != 0 && ol != out->oid_len)
		return PKTLINE_ERR_OID;
	if (n < 2 * ol + 2 || !is_oid(p + ol + 1, ol))
		return PKTLINE_ERR_OID;
	if (p[2 * ol + 1] != ' ')
		return PKTLINE_ERR_SYNTAX;
	rl = n - (2 * ol + 2);
	if ((rc = parse_ref(p + 2 * ol + 2, rl)) != 0)
		return rc;
	zold = is_zero(p, ol);
	znew = is_zero(p + ol + 1, ol);
	if (zold && znew)
		return PKTLINE_ERR_BOTH;
	if (out->n == PKTLINE_MAX_CMDS)
		return PKTLINE_ERR_TOO_MANY;
	c = &out->cmd[out->n++];
	c->op = zold ? PKTLINE_CREATE : znew ? PKTLINE_DELETE : PKTLINE_UPDATE;
	c->ref_off = off + 2 * ol + 2;
	c->ref_len = rl;
	out->oid_len = ol;
	return 0;
}

/* "shallow <oid>": only before the first command. */
static int
parse_shallow(const uint8_t *p, size_t n, struct pktline_cmds *out,
    size_t *n_shallow)
{
	size_t ol = n - 8;

	if (out->n > 0)
		return PKTLINE_ERR_SYNTAX;
	if ((ol != 40 && ol != 64) || !is_oid(p + 8, ol) ||
	    (out->oid_len != 0 && ol != out->oid_len))
		return PKTLINE_ERR_OID;
	if (++*n_shallow > PKTLINE_SHALLOW_MAX)
		return PKTLINE_ERR_TOO_MANY;
	out->oid_len = ol;
	return 0;
}

static int
parse_line(const uint8_t *p, size_t n, size_t off, struct pktline_cmds *out,
    size_t *n_shallow)
{
	if (n > 0 && p[n - 1] == '\n')
		n--;
	if (n == 0)
		return PKTLINE_ERR_SYNTAX;
	if (n >= 9 && memcmp(p, "push-cert", 9) == 0 &&
	    (n == 9 || p[9] == '\0'))
		return PKTLINE_ERR_CERT;
	if (n > 8 && memcmp(p, "shallow ", 8) == 0)
		return parse_shallow(p, n, out, n_shallow);
	return parse_command(p, n, off, out);
}

int
pktline_parse_commands(const uint8_t *buf, size_t len,
    struct pktline_cmds *out)
{
	size_t off = 0, plen, n_shallow = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	for (;;) {
		rc = pkt_length(buf + off, len - off, &plen);
		if (rc == 0)
			break;
		/* The flush-pkt counts toward the bound too. */
		if (rc < 0 ||
		    off + (plen == 0 ? PKT_HDR : plen) > PKTLINE_LIST_MAX) {
			memset(out, 0, sizeof(*out));
			return PKTLINE_ERR_LENGTH;
		}
		if (plen == 0)
			return (int)(off + PKT_HDR);
		if (len - off < plen)
			break;
		if ((rc = parse_line(buf + off + PKT_HDR, plen - PKT_HDR,
		    off + PKT_HDR, out, &n_shallow)) != 0) {
			memset(out, 0, sizeof(*out));
			return rc;
		}
		off += plen;
	}
	/* A prefix: nothing it holds is a verdict yet. */
	memset(out, 0, sizeof(*out));
	return PKTLINE_NEED_MORE;
}

const char *
pktline_strerror(int rc)
{
	switch (rc) {
	case PKTLINE_NEED_MORE:
		return "the command list is incomplete";
	case PKTLINE_ERR_LENGTH:
		return "a bad pkt-line length, or a command list over 32 KiB";
	case PKTLINE_ERR_SYNTAX:
		return "a malformed command line";
	case PKTLINE_ERR_OID:
		return "a malformed object id";
	case PKTLINE_ERR_REF:
		return "a malformed ref name";
	case PKTLINE_ERR_TOO_MANY:
		return "too many commands";
	case PKTLINE_ERR_CERT:
		return "a push certificate (signed push)";
	case PKTLINE_ERR_BOTH:
		return "a command with two zero ids";
	default:
		return "a malformed command list";
	}
}
