/*
 * The receive-pack command list parser: creates, updates and deletes with
 * SHA-1 and SHA-256 ids, shallow lines, and the malformed lists the git
 * gate must refuse; every valid list also cut short at every byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parse/pktline.h"

#define Z40 "0000000000000000000000000000000000000000"
#define A40 "1111111111111111111111111111111111111111"
#define B40 "abcdef0123456789abcdef0123456789abcdef01"
#define Z64 Z40 "000000000000000000000000"
#define A64 A40 "111111111111111111111111"
#define B64 B40 "abcdef0123456789abcdef01"

static void
hex4(uint8_t *out, size_t v)
{
	static const char hx[] = "0123456789abcdef";
	int i;

	for (i = 3; i >= 0; i--, v >>= 4)
		out[i] = (uint8_t)hx[v & 0xf];
}

/* Frame each line as a pkt-line; "" means the flush-pkt. */
static size_t
frame(uint8_t *out, size_t cap, const char *const *lines, size_t n)
{
	size_t i, len, o = 0;

	for (i = 0; i < n; i++) {
		len = strlen(lines[i]);
		if (len == 0) {
			memcpy(out + o, "0000", 4);
			o += 4;
			continue;
		}
		if (o + len + 4 > cap)
			abort();
		hex4(out + o, len + 4);
		memcpy(out + o + 4, lines[i], len);
		o += len + 4;
	}
	return o;
}

static void
check_prefixes(const uint8_t *buf, size_t len, int whole)
{
	struct pktline_cmds c;
	size_t k;
	int rc;

	for (k = 0; k < len; k++) {
		rc = pktline_parse_commands(buf, k, &c);
		CHECK_MSG(rc == PKTLINE_NEED_MORE || (whole < 0 && rc == whole),
		    "prefix %zu: %d (whole %d)", k, rc, whole);
	}
}

static void
test_valid(void)
{
	uint8_t buf[4096];
	struct pktline_cmds c;
	const char *l1[] = {
		Z40 " " A40 " refs/heads/bot/x\0report-status side-band-64k",
		A40 " " B40 " refs/heads/bot/y\n",
		B40 " " Z40 " refs/tags/v1\n",
		""
	};
	size_t n;
	int rc;

	/* The first line's NUL: frame by hand. */
	n = frame(buf, sizeof(buf), l1, 4);
	/* strlen stopped at the NUL: rebuild the first line with its caps. */
	{
		const char first[] = Z40 " " A40 " refs/heads/bot/x\0report-status";
		size_t fl = sizeof(first) - 1;
		uint8_t tmp[4096];

		hex4(tmp, fl + 4);
		memcpy(tmp + 4, first, fl);
		memcpy(tmp + 4 + fl, buf + 4 + strlen(l1[0]),
		    n - 4 - strlen(l1[0]));
		n = n - strlen(l1[0]) + fl;
		memcpy(buf, tmp, n);
	}
	memcpy(buf + n, "PACK", 4);	/* the pack follows: not consumed */
	rc = pktline_parse_commands(buf, n + 4, &c);
	CHECK_INT(rc, (int)n);
	CHECK_INT(c.n, 3);
	CHECK_INT(c.oid_len, 40);
	CHECK_INT(c.cmd[0].op, PKTLINE_CREATE);
	CHECK_INT(c.cmd[1].op, PKTLINE_UPDATE);
	CHECK_INT(c.cmd[2].op, PKTLINE_DELETE);
	CHECK(c.cmd[0].ref_len == 16 &&
	    memcmp(buf + c.cmd[0].ref_off, "refs/heads/bot/x", 16) == 0);
	CHECK(c.cmd[1].ref_len == 16 &&
	    memcmp(buf + c.cmd[1].ref_off, "refs/heads/bot/y", 16) == 0);
	CHECK(c.cmd[2].ref_len == 12 &&
	    memcmp(buf + c.cmd[2].ref_off, "refs/tags/v1", 12) == 0);
	check_prefixes(buf, n, rc);
}

static void
test_sha256_and_shallow(void)
{
	uint8_t buf[4096];
	struct pktline_cmds c;
	const char *l[] = { "shallow " B64 "\n",
		A64 " " B64 " refs/heads/main\n", "" };
	size_t n = frame(buf, sizeof(buf), l, 3);
	int rc = pktline_parse_commands(buf, n, &c);

	CHECK_INT(rc, (int)n);
	CHECK_INT(c.n, 1);
	CHECK_INT(c.oid_len, 64);
	CHECK_INT(c.cmd[0].op, PKTLINE_UPDATE);
	check_prefixes(buf, n, rc);
}

static void
test_empty_list(void)
{
	struct pktline_cmds c;

	CHECK_INT(pktline_parse_commands((const uint8_t *)"0000", 4, &c), 4);
	CHECK_INT(c.n, 0);
	CHECK_INT(pktline_parse_commands((const uint8_t *)"", 0, &c),
	    PKTLINE_NEED_MORE);
}

struct bad_case {
	const char	*name;
	const char	*lines[4];
	int		 rc;
};

static const struct bad_case bad[] = {
	{ "mixed oid lengths", { A40 " " B40 " refs/heads/a\n",
	    A64 " " B64 " refs/heads/b\n", "" }, PKTLINE_ERR_OID },
	{ "upper-case oid", { "ABCDEF0123456789abcdef0123456789abcdef01 " B40
	    " refs/heads/a", "" }, PKTLINE_ERR_OID },
	{ "short oid", { "1234 " B40 " refs/heads/a", "" }, PKTLINE_ERR_OID },
	{ "no ref", { A40 " " B40 " ", "" }, PKTLINE_ERR_REF },
	{ "space in ref", { A40 " " B40 " refs/heads/a b", "" },
	    PKTLINE_ERR_REF },
	{ "control in ref", { A40 " " B40 " refs/heads/a\tb", "" },
	    PKTLINE_ERR_REF },
	{ "two zero ids", { Z40 " " Z40 " refs/heads/a", "" },
	    PKTLINE_ERR_BOTH },
	{ "push certificate", { "push-cert\n", "" }, PKTLINE_ERR_CERT },
	{ "shallow after a command", { A40 " " B40 " refs/heads/a\n",
	    "shallow " A40 "\n", "" }, PKTLINE_ERR_SYNTAX },
	{ "second separator", { A40 " " B40 "xrefs/heads/a", "" },
	    PKTLINE_ERR_SYNTAX },
	{ "lone LF", { "\n", "" }, PKTLINE_ERR_SYNTAX },
};

static void
test_bad(void)
{
	uint8_t buf[4096];
	struct pktline_cmds c;
	size_t i, n, k;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (k = 0; k < 4 && bad[i].lines[k] != NULL; k++)
			;
		n = frame(buf, sizeof(buf), bad[i].lines, k);
		rc = pktline_parse_commands(buf, n, &c);
		CHECK_MSG(rc == bad[i].rc, "%s: %d != %d", bad[i].name, rc,
		    bad[i].rc);
		check_prefixes(buf, n, rc);
	}
}

static void
test_lengths(void)
{
	struct pktline_cmds c;
	static const char *const raw[] = { "0001", "0002", "0003", "000g",
	    "zz", "fff1" };
	uint8_t big[PKTLINE_LIST_MAX + 64];
	size_t i, o;

	for (i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
		CHECK_MSG(pktline_parse_commands((const uint8_t *)raw[i],
		    strlen(raw[i]), &c) == PKTLINE_ERR_LENGTH, "%s", raw[i]);
	/* "0004" is an empty pkt-line: not a command. */
	CHECK_INT(pktline_parse_commands((const uint8_t *)"00040000", 8, &c),
	    PKTLINE_ERR_SYNTAX);
	/* Lines that fill the bound: the flush-pkt over it is refused. */
	o = 0;
	while (o + 100 <= PKTLINE_LIST_MAX) {
		char line[128];
		snprintf(line, sizeof(line), "0064" A40 " " B40 " refs/h/%011zu",
		    o);
		memcpy(big + o, line, 100);
		o += 100;
	}
	/* 327 commands of 100 bytes: over PKTLINE_MAX_CMDS first. */
	memcpy(big + o, "0000", 4);
	CHECK_INT(pktline_parse_commands(big, o + 4, &c), PKTLINE_ERR_TOO_MANY);
	/* 256 commands then one long line past the bound. */
	o = 256 * 100;
	hex4(big + o, PKTLINE_LIST_MAX - o + 1);
	CHECK_INT(pktline_parse_commands(big, o + 4, &c), PKTLINE_ERR_LENGTH);
	/* Exactly PKTLINE_MAX_CMDS commands: accepted. */
	memcpy(big + o, "0000", 4);
	CHECK_INT(pktline_parse_commands(big, o + 4, &c), (int)(o + 4));
	CHECK_INT(c.n, PKTLINE_MAX_CMDS);
}

int
main(void)
{
	test_valid();
	test_sha256_and_shallow();
	test_empty_list();
	test_bad();
	test_lengths();
	CHECK(strcmp(pktline_strerror(PKTLINE_ERR_CERT),
	    pktline_strerror(PKTLINE_ERR_OID)) != 0);
	return check_summary();
}
