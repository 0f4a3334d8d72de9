/*
 * libFuzzer target for the Public Suffix List parser (core/psl.c): the
 * input's first line is a host name, the rest a list. Invariants: the
 * registrable domain is a suffix of the host, starts at a label, and is
 * never the whole host's public suffix alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"
#include "core/psl.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nl;
	struct policy_target t;
	struct psl *p;
	char out[POLICY_HOST_MAX + 1];
	size_t hl, ol;

	nl = memchr(buf, '\n', size);
	hl = nl != NULL ? (size_t)(nl - buf) : size;
	if ((p = psl_parse(nl != NULL ? nl + 1 : buf + size,
	    nl != NULL ? size - hl - 1 : 0)) == NULL)
		return 0;
	if (policy_target_init(&t, buf, hl, 0) == 0 && !t.is_ip &&
	    psl_registrable(p, t.host, out, sizeof(out)) == 0) {
		hl = strlen(t.host);
		ol = strlen(out);
		if (ol == 0 || ol > hl || strcmp(t.host + hl - ol, out) != 0 ||
		    (ol < hl && t.host[hl - ol - 1] != '.') ||
		    strchr(out, '.') == NULL)
			abort();
	}
	psl_free(p);
	return 0;
}
