/*
 * The audit log's output formats: JSON lines, CSV (RFC 4180) and the
 * aligned table for a terminal, which escapes peer bytes and is written in
 * blocks of rows so that output starts before a long query ends.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"
#include "core/log.h"
#include "core/util.h"

int
audit_format_parse(const char *s, enum audit_format *f)
{
	if (strcmp(s, "table") == 0 || strcmp(s, "text") == 0)
		*f = AUDIT_FMT_TABLE;
	else if (strcmp(s, "ocsf") == 0)
		*f = AUDIT_FMT_OCSF;
	else if (strcmp(s, "json") == 0)
		*f = AUDIT_FMT_JSON;
	else if (strcmp(s, "csv") == 0)
		*f = AUDIT_FMT_CSV;
	else
		return -1;
	return 0;
}

size_t
audit_utf8_seq(const unsigned char *p, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static void
json_string(FILE *f, const unsigned char *p, size_t n)
{
	size_t i = 0, k;

	fputc('"', f);
	while (i < n) {
		unsigned char c = p[i];

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\r') {
			fputs("\\r", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else if ((k = audit_utf8_seq(p + i, n - i)) == 0) {
			fputs("\\ufffd", f);	/* not UTF-8: never emit invalid JSON */
			i++;
		} else {
			fwrite(p + i, 1, k, f);
			i += k;
		}
	}
	fputc('"', f);
}

static void
json_value(FILE *f, const struct audit_val *v)
{
	char pair[3];
	size_t i;

	switch (v->type) {
	case AUDIT_V_INT:
		fprintf(f, "%" PRId64, v->i);
		break;
	case AUDIT_V_REAL:
		if (isfinite(v->r))
			fprintf(f, "%.17g", v->r);
		else
			fputs("null", f);
		break;
	case AUDIT_V_TEXT:
		json_string(f, v->p, v->len);
		break;
	case AUDIT_V_BLOB:
		fputc('"', f);
		for (i = 0; i < v->len; i++) {
			util_hex_encode(&v->p[i], 1, pair);
			fputs(pair, f);
		}
		fputc('"', f);
		break;
	default:
		fputs("null", f);
		break;
	}
}

void
audit_write_json_gw(FILE *f, const struct audit_val row[AUDIT_NCOLS],
    const struct audit_val *gw)
{
	int i;

	fputc('{', f);
	for (i = 0; i < AUDIT_NCOLS; i++) {
		fprintf(f, "%s\"%s\":", i ? "," : "", audit_col_names[i]);
		json_value(f, &row[i]);
	}
	if (gw != NULL) {
		fputs(",\"gateway\":", f);
		json_value(f, gw);
	}
	fputs("}\n", f);
}

void
audit_write_json(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	audit_write_json_gw(f, row, NULL);
}

void
audit_write_csv_header(FILE *f)
{
	int i;

	for (i = 0; i < AUDIT_NCOLS; i++)
		fprintf(f, "%s%s", i ? "," : "", audit_col_names[i]);
	fputs("\r\n", f);
}

void
audit_write_csv_header_gw(FILE *f)
{
	int i;

	for (i = 0; i < AUDIT_NCOLS; i++)
		fprintf(f, "%s,", audit_col_names[i]);
	fputs("gateway\r\n", f);
}

static void
csv_field(FILE *f, const struct audit_val *v)
{
	size_t i;

	switch (v->type) {
	case AUDIT_V_INT:
		fprintf(f, "%" PRId64, v->i);
		return;
	case AUDIT_V_REAL:
		fprintf(f, "%.17g", v->r);
		return;
	case AUDIT_V_TEXT:
	case AUDIT_V_BLOB:
		break;
	default:
		return;		/* NULL: an empty field; "" is an empty string */
	}
	for (i = 0; i < v->len; i++)
		if (v->p[i] == ',' || v->p[i] == '"' || v->p[i] == '\r' ||
		    v->p[i] == '\n')
			break;
	if (v->len > 0 && i == v->len) {
		fwrite(v->p, 1, v->len, f);
		return;
	}
	fputc('"', f);
	for (i = 0; i < v->len; i++) {
		if (v->p[i] == '"')
			fputc('"', f);
		fputc(v->p[i], f);
	}
	fputc('"', f);
}

void
audit_write_csv_gw(FILE *f, const struct audit_val row[AUDIT_NCOLS],
    const struct audit_val *gw)
{
	int i;

	for (i = 0; i < AUDIT_NCOLS; i++) {
		if (i)
			fputc(',', f);
		csv_field(f, &row[i]);
	}
	if (gw != NULL) {
		fputc(',', f);
		csv_field(f, gw);
	}
	fputs("\r\n", f);
}

void
audit_write_csv(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	audit_write_csv_gw(f, row, NULL);
}

/*
 * The table: a subset of the columns, aligned. Widths come from blocks of
 * rows and only grow, so output starts before a long query ends.
 */
static const int table_cols[] = {
	AUDIT_COL_TS, AUDIT_COL_SANDBOX, AUDIT_COL_KIND, AUDIT_COL_DECISION,
	AUDIT_COL_HOST, AUDIT_COL_PORT, AUDIT_COL_METHOD, AUDIT_COL_PATH,
	AUDIT_COL_STATUS, AUDIT_COL_RULE, AUDIT_COL_REASON,
};
#define TABLE_NCOLS	(int)(sizeof(table_cols) / sizeof(table_cols[0]) + 1)
#define TABLE_CELL	68	/* display bytes of a cell, escaped, + NUL */
#define TABLE_BLOCK	256

struct audit_table {
	char	 cells[TABLE_BLOCK][TABLE_NCOLS][TABLE_CELL];
	int	 n;
	int	 first;		/* 1: no gateway column */
	size_t	 width[TABLE_NCOLS];
	int	 header_done;
};

static void
table_cell(const struct audit_val *v, char *out)
{
	char esc[4 * TABLE_CELL];
	size_t n;

	switch (v->type) {
	case AUDIT_V_INT:
		snprintf(out, TABLE_CELL, "%" PRId64, v->i);
		return;
	case AUDIT_V_REAL:
		snprintf(out, TABLE_CELL, "%g", v->r);
		return;
	case AUDIT_V_TEXT:
	case AUDIT_V_BLOB:
		if (v->len == 0)
			break;
		/* Peer bytes reach a terminal: escape, then cut with "...". */
		log_escape(v->p, v->len, esc, sizeof(esc));
		n = strlen(esc);
		if (n >= TABLE_CELL) {
			memcpy(esc + TABLE_CELL - 4, "...", 4);
			n = TABLE_CELL - 1;
		}
		memcpy(out, esc, n + 1);
		return;
	default:
		break;
	}
	snprintf(out, TABLE_CELL, "-");
}

static void
table_flush(FILE *f, struct audit_table *t)
{
	int r, c;
	size_t w;

	if (!t->header_done) {
		for (c = t->first; c < TABLE_NCOLS; c++) {
			w = c == 0 ? strlen("gateway") :
			    strlen(audit_col_names[table_cols[c - 1]]);
			if (w > t->width[c])
				t->width[c] = w;
		}
	}
	for (r = 0; r < t->n; r++)
		for (c = t->first; c < TABLE_NCOLS; c++)
			if ((w = strlen(t->cells[r][c])) > t->width[c])
				t->width[c] = w;
	if (!t->header_done) {
		for (c = t->first; c < TABLE_NCOLS; c++) {
			char up[32];
			size_t i;
			const char *name = c == 0 ? "gateway" :
			    audit_col_names[table_cols[c - 1]];

			for (i = 0; name[i] != '\0' && i < sizeof(up) - 1; i++)
				up[i] = name[i] >= 'a' && name[i] <= 'z' ?
				    name[i] - 'a' + 'A' : name[i];
			up[i] = '\0';
			if (c == TABLE_NCOLS - 1)
				fprintf(f, "%s\n", up);
			else
				fprintf(f, "%-*s  ", (int)t->width[c], up);
		}
		t->header_done = 1;
	}
	for (r = 0; r < t->n; r++)
		for (c = t->first; c < TABLE_NCOLS; c++) {
			if (c == TABLE_NCOLS - 1)
				fprintf(f, "%s\n", t->cells[r][c]);
			else if (c > 0 && audit_col_is_int[table_cols[c - 1]])
				fprintf(f, "%*s  ", (int)t->width[c],
				    t->cells[r][c]);
			else
				fprintf(f, "%-*s  ", (int)t->width[c],
				    t->cells[r][c]);
		}
	t->n = 0;
}

struct audit_table *
audit_table_new(void)
{
	struct audit_table *t = calloc(1, sizeof(struct audit_table));

	if (t != NULL)
		t->first = 1;
	return t;
}

struct audit_table *
audit_table_new_gw(void)
{
	return calloc(1, sizeof(struct audit_table));
}

void
audit_table_row_gw(FILE *f, struct audit_table *t,
    const struct audit_val row[AUDIT_NCOLS], const struct audit_val *gw)
{
	int c;

	if (gw != NULL)
		table_cell(gw, t->cells[t->n][0]);
	for (c = 1; c < TABLE_NCOLS; c++)
		table_cell(&row[table_cols[c - 1]], t->cells[t->n][c]);
	if (++t->n == TABLE_BLOCK)
		table_flush(f, t);
}

void
audit_table_row(FILE *f, struct audit_table *t,
    const struct audit_val row[AUDIT_NCOLS])
{
	audit_table_row_gw(f, t, row, NULL);
}

void
audit_table_end(FILE *f, struct audit_table *t)
{
	if (t->n > 0 || !t->header_done)
		table_flush(f, t);
}

void
audit_table_free(struct audit_table *t)
{
	free(t);
}
