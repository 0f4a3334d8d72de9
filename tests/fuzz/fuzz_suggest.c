/*
 * libFuzzer target for policy suggest (core/policy_suggest.c), whose input
 * is audit rows -- what sandboxes sent. The input holds rows of fields
 * separated by NUL bytes (host, kind, decision, rule, reason, ip, first,
 * last, then one port byte pair). Invariant: every line written that is
 * not a comment is one of the few the writer means to write, so nothing a
 * row holds can become YAML.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/policy_suggest.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define NFIELDS	8

static const char *const allowed[] = {
	"policies:", "  - name: p", "    mode: enforce", "    allow:",
	"    allow: []", "      - host: ", "        ports: [",
	"        opaque: true", NULL
};

static void
check_line(const char *l, size_t n)
{
	size_t i, k;

	for (i = 0; i < n && l[i] == ' '; i++)
		;
	if (i < n && l[i] == '#')
		return;
	for (k = 0; allowed[k] != NULL; k++)
		if (n >= strlen(allowed[k]) &&
		    memcmp(l, allowed[k], strlen(allowed[k])) == 0)
			return;
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, *f[NFIELDS], *p, *end, *out = NULL, *l, *nl;
	struct suggest *s;
	struct suggest_row r;
	size_t outlen = 0, i;
	FILE *mem;

	if ((copy = malloc(size + NFIELDS + 3)) == NULL)
		return 0;
	memcpy(copy, data, size);
	memset(copy + size, 0, NFIELDS + 3);
	end = copy + size;
	s = suggest_new(NULL);
	for (p = copy; s != NULL && p < end;) {
		for (i = 0; i < NFIELDS; i++) {
			f[i] = p;
			p += strlen(p) + 1;
		}
		memset(&r, 0, sizeof(r));
		r.host = f[0], r.kind = f[1], r.decision = f[2], r.rule = f[3];
		r.reason = f[4], r.ip = f[5], r.first = f[6], r.last = f[7];
		r.port = p + 1 < end + NFIELDS ? ((uint8_t)p[0] << 8 |
		    (uint8_t)p[1]) : 0;
		r.n = 1 + (r.port & 3);
		p += 2;
		(void)suggest_add(s, &r);
	}
	if (s != NULL && (mem = open_memstream(&out, &outlen)) != NULL) {
		suggest_write(s, mem, "p", NULL, 0);
		fclose(mem);
		for (l = out; l < out + outlen; l = nl + 1) {
			nl = memchr(l, '\n', (size_t)(out + outlen - l));
			if (nl == NULL)
				abort();	/* every line ends */
			check_line(l, (size_t)(nl - l));
		}
		free(out);
	}
	suggest_free(s);
	free(copy);
	return 0;
}
