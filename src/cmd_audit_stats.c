/*
 * `sandgate audit stats`: one screen for the security team -- rows by
 * decision, the top destinations, denials by reason and by sandbox, what
 * report mode let pass, credential uses and misuses, and the hash chain's
 * status (verify) -- as text or one JSON object (jansson).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_stats.h"
#include "sandgate.h"

#define STATS_TOP	10

/* A section: its query, its columns' names (count last), its title. */
struct stats_sec {
	const char	*key;		/* JSON key */
	const char	*title;
	const char	*sel;		/* columns; the last is the count */
	const char	*where;
	const char	*group;
	int		 ncols;		/* text columns before the counts */
	const char	*names[6];	/* of every column */
	int		 nints;
};

static const struct stats_sec sections[] = {
	{ "decisions", "rows by decision", "decision, count(*)", NULL,
	    "decision", 1, { "decision", "rows" }, 1 },
	{ "top_destinations", "top destinations (rows, denied, bytes up, "
	    "bytes down)", "host, count(*), sum(decision = 'deny'), "
	    "ifnull(sum(bytes_up), 0), ifnull(sum(bytes_down), 0)",
	    "host IS NOT NULL AND kind NOT IN ('admin', 'vault')", "host", 1,
	    { "host", "rows", "denied", "bytes_up", "bytes_down" }, 4 },
	{ "denials_by_reason", "denials by reason", "ifnull(reason, '-'), "
	    "count(*)", "decision = 'deny'", "reason", 1, { "reason", "rows" },
	    1 },
	{ "denials_by_sandbox", "denials by sandbox", "ifnull(sandbox, '-'), "
	    "count(*)", "decision = 'deny'", "sandbox", 1,
	    { "sandbox", "rows" }, 1 },
	{ "reported_by_reason", "reported (mode: report: passed, would have "
	    "been denied)", "ifnull(reason, '-'), count(*)",
	    "decision = 'report'", "reason", 1, { "reason", "rows" }, 1 },
	/* mode: ask: questions asked, answers given, held requests' ends. */
	{ "approvals", "approvals (mode: ask: questions, answers, held "
	    "requests)", "CASE WHEN method = 'ASK' AND decision IS NULL THEN 'question' "
	    "WHEN kind = 'admin' THEN 'answer-' || lower(method) "
	    "ELSE 'request-' || ifnull(reason, decision) END, count(*)",
	    "rule LIKE 'approval%'", "1", 1, { "row", "rows" }, 1 },
	{ "credential_uses", "credential uses (allowed rows)", "credential, "
	    "count(*)", "credential IS NOT NULL AND decision = 'allow'",
	    "credential", 1, { "credential", "rows" }, 1 },
	{ "credential_misuses", "credential misuses", "ifnull(credential, '-'), "
	    "reason, count(*)", "reason IN ('credential-misuse', "
	    "'foreign-credential')", "credential, reason", 2,
	    { "credential", "reason", "rows" }, 1 },
};

struct sec_ctx {
	const struct stats_sec	*sec;
	json_t			*arr;
};

/* Row text came from peers: printable ASCII survives, the rest is '?'. */
static json_t *
safe_string(const char *s)
{
	char buf[512];
	size_t i;

	for (i = 0; s[i] != '\0' && i < sizeof(buf) - 1; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return json_string(buf);
}

static int
sec_row_cb(sqlite3_stmt *st, void *arg)
{
	struct sec_ctx *c = arg;
	json_t *o = json_object();
	int i;

	if (o == NULL)
		return 1;
	for (i = 0; i < c->sec->ncols; i++)
		json_object_set_new(o, c->sec->names[i],
		    safe_string(audit_col_text(st, i)));
	for (i = 0; i < c->sec->nints; i++)
		json_object_set_new(o, c->sec->names[c->sec->ncols + i],
		    json_integer(audit_col_int(st, c->sec->ncols + i, 0)));
	json_array_append_new(c->arr, o);
	return 0;
}

static json_t *
stats_chain(sqlite3 *db, EVP_PKEY *pub)
{
	struct audit_verify res;
	json_t *o = json_object();
	int rc = audit_verify(db, pub, &res);

	json_object_set_new(o, "status", json_string(rc == 0 ? "ok" :
	    rc == 1 ? "broken" : "unreadable"));
	json_object_set_new(o, "rows", json_integer((json_int_t)res.rows));
	if (rc != 0) {
		json_object_set_new(o, "bad_id", rc == 1 ?
		    json_integer(res.bad_id) : json_null());
		json_object_set_new(o, "message", safe_string(res.msg));
		return o;
	}
	json_object_set_new(o, "checkpoints",
	    json_integer((json_int_t)res.checkpoints));
	json_object_set_new(o, "last_checkpoint_id", res.last_ckpt_id ?
	    json_integer(res.last_ckpt_id) : json_null());
	json_object_set_new(o, "last_checkpoint_ts", res.last_ckpt_id ?
	    json_string(res.last_ckpt_ts) : json_null());
	json_object_set_new(o, "unsigned_tail_rows",
	    json_integer((json_int_t)res.tail_rows));
	return o;
}

static void
print_text(json_t *root, const struct audit_filter *f, const char *since)
{
	json_t *chain = json_object_get(root, "chain"), *arr, *row;
	const char *st = json_string_value(json_object_get(chain, "status"));
	size_t i, k;

	printf("audit stats%s%s%s%s\n", f->sandbox ? ", sandbox " : "",
	    f->sandbox ? f->sandbox : "", since ? ", since " : "",
	    since ? since : "");
	if (strcmp(st, "ok") == 0)
		printf("chain: ok, %" JSON_INTEGER_FORMAT " rows verified, %"
		    JSON_INTEGER_FORMAT " signed checkpoints, %"
		    JSON_INTEGER_FORMAT " rows after the last\n",
		    json_integer_value(json_object_get(chain, "rows")),
		    json_integer_value(json_object_get(chain, "checkpoints")),
		    json_integer_value(json_object_get(chain,
		    "unsigned_tail_rows")));
	else if (json_is_integer(json_object_get(chain, "bad_id")))
		printf("chain: BROKEN at row %" JSON_INTEGER_FORMAT ": %s\n",
		    json_integer_value(json_object_get(chain, "bad_id")),
		    json_string_value(json_object_get(chain, "message")));
	else
		printf("chain: cannot be read: %s\n", json_string_value(
		    json_object_get(chain, "message")));
	for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		const struct stats_sec *s = &sections[i];

		arr = json_object_get(root, s->key);
		printf("\n%s:\n", s->title);
		if (json_array_size(arr) == 0)
			printf("  (none)\n");
		json_array_foreach(arr, k, row) {
			const char *key;
			json_t *v;
			int first = 1;

			printf("  ");
			json_object_foreach(row, key, v) {
				if (json_is_string(v))
					printf("%s%-40s", first ? "" : " ",
					    json_string_value(v));
				else
					printf(" %10" JSON_INTEGER_FORMAT,
					    json_integer_value(v));
				first = 0;
			}
			printf("\n");
		}
	}
}

int
cmd_audit_stats(const char *db_path, const char *pub_path, int pub_given,
    const struct audit_filter *f, const char *since, int json)
{
	struct sec_ctx c;
	EVP_PKEY *pub = NULL;
	json_t *root;
	sqlite3 *db;
	char err[512], *s;
	size_t i;
	int rc = 0;

	if ((pub_given || access(pub_path, F_OK) == 0) &&
	    (pub = audit_pubkey_read(pub_path, err, sizeof(err))) == NULL)
		return cmd_error("audit stats: %s", err);
	if ((db = audit_db_open_ro(db_path, err, sizeof(err))) == NULL) {
		EVP_PKEY_free(pub);
		return cmd_error("audit stats: %s", err);
	}
	root = json_object();
	json_object_set_new(root, "sandbox", f->sandbox ?
	    json_string(f->sandbox) : json_null());
	for (i = 0; i < sizeof(sections) / sizeof(sections[0]) && rc == 0;
	    i++) {
		c.sec = &sections[i];
		c.arr = json_array();
		if (audit_aggregate(db, f, c.sec->sel, c.sec->where,
		    c.sec->group, "count(*) DESC, 1", STATS_TOP, sec_row_cb, &c,
		    err, sizeof(err)) == -1)
			rc = cmd_error("audit stats: %s", err);
		json_object_set_new(root, c.sec->key, c.arr);
	}
	if (rc == 0)
		json_object_set_new(root, "chain", stats_chain(db, pub));
	sqlite3_close(db);
	EVP_PKEY_free(pub);
	if (rc == 0 && json) {
		if ((s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER))
		    == NULL)
			rc = cmd_error("audit stats: out of memory");
		else {
			printf("%s\n", s);
			free(s);
		}
	} else if (rc == 0)
		print_text(root, f, since);
	json_decref(root);
	if (rc == 0 && (fflush(stdout) == EOF || ferror(stdout)))
		rc = cmd_error("audit stats: write error");
	return rc;
}
