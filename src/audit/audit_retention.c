/*
 * The text of the retention row: the path that records which rows were
 * deleted and the hash the surviving chain now starts from (written by
 * audit.c's retention, read back by verify).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"

int
audit_retention_format(char *buf, size_t len, int64_t through, int64_t rows,
    const char *before_ts, const char *anchor)
{
	int n;

	n = snprintf(buf, len, "/events?through=%" PRId64 "&rows=%" PRId64
	    "&before=%s&anchor=%s", through, rows, before_ts, anchor);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int
audit_retention_parse(const char *path, size_t len, int64_t *through,
    char anchor[AUDIT_HASH_HEX + 1])
{
	static const char prefix[] = "/events?";
	const char *p, *end = path + len, *amp;
	int have_through = 0, have_anchor = 0;
	int64_t v;

	if (len < sizeof(prefix) - 1 || memcmp(path, prefix,
	    sizeof(prefix) - 1) != 0)
		return -1;
	for (p = path + sizeof(prefix) - 1; p < end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if ((size_t)(amp - p) > 8 && memcmp(p, "through=", 8) == 0) {
			const char *q;

			v = 0;
			for (q = p + 8; q < amp; q++) {
				if (*q < '0' || *q > '9' ||
				    v > (INT64_MAX - 9) / 10)
					return -1;
				v = v * 10 + (*q - '0');
			}
			*through = v;
			have_through = 1;
		} else if (amp - p == 7 + AUDIT_HASH_HEX &&
		    memcmp(p, "anchor=", 7) == 0) {
			if (!audit_is_hash_hex((const unsigned char *)p + 7,
			    AUDIT_HASH_HEX))
				return -1;
			memcpy(anchor, p + 7, AUDIT_HASH_HEX);
			anchor[AUDIT_HASH_HEX] = '\0';
			have_anchor = 1;
		}
	}
	return have_through && have_anchor ? 0 : -1;
}
