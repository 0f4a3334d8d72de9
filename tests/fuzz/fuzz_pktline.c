/*
 * libFuzzer target for the receive-pack command-list parser: memory
 * safety, bounds kept (list size, command count), refnames inside what was
 * consumed and free of spaces and controls, and prefixes that never
 * contradict the whole.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pktline.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_cmds(const uint8_t *data, int rc, const struct pktline_cmds *c)
{
	size_t i, j;

	if (rc < 4 || rc > PKTLINE_LIST_MAX || c->n > PKTLINE_MAX_CMDS)
		abort();
	if (c->n > 0 && c->oid_len != 40 && c->oid_len != 64)
		abort();
	for (i = 0; i < c->n; i++) {
		const struct pktline_cmd *k = &c->cmd[i];
		if (k->ref_len == 0 || k->ref_len > PKTLINE_REF_MAX ||
		    k->ref_off + k->ref_len > (size_t)rc ||
		    k->ref_off < 2 * c->oid_len + 2 + 4)
			abort();
		if (k->op != PKTLINE_CREATE && k->op != PKTLINE_UPDATE &&
		    k->op != PKTLINE_DELETE)
			abort();
		for (j = 0; j < k->ref_len; j++)
			if (data[k->ref_off + j] <= 0x20 ||
			    data[k->ref_off + j] == 0x7f)
				abort();
	}
	/* The list ends with the flush-pkt. */
	if (memcmp(data + rc - 4, "0000", 4) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pktline_cmds c, d;
	size_t i, k, step;
	int rc, rk;

	rc = pktline_parse_commands(data, size, &c);
	if (rc < PKTLINE_ERR_BOTH || (size_t)(rc > 0 ? rc : 0) > size)
		abort();
	if (pktline_strerror(rc) == NULL)
		abort();
	if (rc > 0)
		check_cmds(data, rc, &c);
	else if (c.n != 0)
		abort();
	/* Prefixes: NEED_MORE, or the same verdict (sampled on long inputs). */
	step = size > 512 ? size / 256 : 1;
	for (k = 0; k < size; k += step) {
		rk = pktline_parse_commands(data, k, &d);
		if (rk == PKTLINE_NEED_MORE)
			continue;
		if (rk != rc || d.n != c.n)
			abort();
		for (i = 0; i < c.n; i++)
			if (d.cmd[i].op != c.cmd[i].op ||
			    d.cmd[i].ref_off != c.cmd[i].ref_off ||
			    d.cmd[i].ref_len != c.cmd[i].ref_len)
				abort();
	}
	return 0;
}
