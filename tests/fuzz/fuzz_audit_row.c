/*
 * libFuzzer target for the rows the fleet store hands back: a row's raw
 * canonical encoding (audit_decode_row) must re-encode to the same bytes,
 * and its store form (audit_pg_row_build) must hold whatever it decoded,
 * and its OCSF event (audit_write_ocsf) must be one line of valid JSON;
 * and a host glob turned into a PostgreSQL regular expression
 * (audit_glob_to_regex) must stay anchored and within bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "audit/audit_pg.h"
#include "audit/audit_query.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_glob(const uint8_t *data, size_t len)
{
	char glob[256], re[512];
	size_t n = len < sizeof(glob) - 1 ? len : sizeof(glob) - 1, rlen;

	memcpy(glob, data, n);
	glob[n] = '\0';
	if (audit_glob_to_regex(glob, re, sizeof(re)) == -1)
		return;
	rlen = strlen(re);
	if (rlen < 2 || re[0] != '^' || re[rlen - 1] != '$')
		abort();
}

static void
check_ocsf(const struct audit_val *row)
{
	char *buf = NULL;
	size_t len = 0;
	json_error_t e;
	json_t *o;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return;
	audit_write_ocsf(f, row);
	fclose(f);
	if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\n', len - 1))
		abort();
	if ((o = json_loadb(buf, len, 0, &e)) == NULL)
		abort();
	json_decref(o);
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct audit_val row[AUDIT_NCOLS];
	struct audit_pg_row pr;
	unsigned char *again;
	size_t n;
	int c;

	check_glob(data, len);
	if (audit_decode_row(data, len, row) == -1)
		return 0;
	n = audit_encode_row(row, NULL, 0);
	if (n != len || (again = malloc(n ? n : 1)) == NULL)
		abort();
	(void)audit_encode_row(row, again, n);
	if (memcmp(again, data, n) != 0)
		abort();
	free(again);
	for (c = AUDIT_NHASHED; c < AUDIT_NCOLS; c++) {
		memset(&row[c], 0, sizeof(row[c]));
		row[c].type = AUDIT_V_NULL;
	}
	if (audit_pg_row_build(row, &pr) == 0)
		audit_pg_row_free(&pr);
	check_ocsf(row);
	return 0;
}
