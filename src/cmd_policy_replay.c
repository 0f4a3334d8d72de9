/*
 * `sandgate policy replay CANDIDATE...`: read audit rows (audit.db, or the
 * fleet store), decide each again under a candidate policy
 * (core/policy_replay.c), and print the decisions that would change,
 * grouped by sandbox and destination, and the rows that cannot be judged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_store.h"
#include "core/config.h"
#include "core/diag.h"
#include "core/hash.h"
#include "core/policy.h"
#include "core/policy_replay.h"
#include "sandgate.h"

static const char replay_usage[] =
    "usage: sandgate policy replay [-c FILE] [--since T] [--until T]\n"
    "           [--sandbox ID] [--store URL] [--fail-on WHEN]\n"
    "           [--format text|json] CANDIDATE...\n"
    "  Decide the audit log's rows again under the candidate policy files or\n"
    "  directories (in place of the config's policies, sandboxes included)\n"
    "  and print the decisions that would change, allow -> deny and\n"
    "  deny -> allow, grouped by sandbox and destination with counts and an\n"
    "  example each, and the rows whose decision the row alone cannot tell\n"
    "  (resolved addresses, GeoIP, a tunnel's bytes, credentials).\n"
    "  Rows: the config's audit.db, or --store postgresql://... (a fleet).\n"
    "  T is a duration before now (15m, 2h, 7d) or an RFC 3339 time.\n"
    "  --fail-on allow-to-deny (default), deny-to-allow, any or none: exit 1\n"
    "  when such a change is found, else 0; 2 for usage errors and a\n"
    "  candidate that does not load (FILE:LINE:COL: message).\n"
    "  -c FILE   config file (default: ./sandgate.yaml,\n"
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n";

#define REPLAY_MAX_CAND	8

struct group {
	enum replay_class cls;
	const char	*why;		/* undecidable: static */
	const char	*detail;	/* static */
	char		*sandbox, *host, *kind;
	int		 port;
	uint64_t	 count;
	char		 first[AUDIT_TS_LEN + 1], last[AUDIT_TS_LEN + 1];
	/* the example: the group's first row */
	char		*method, *path;
	char		*then_decision, *then_rule, *then_reason;
	const char	*now, *now_reason, *unchecked;	/* static */
	char		*now_rule;
	uint64_t	 hash;
};

struct replay {
	const struct policy *cand, *cur;
	struct group	*g;
	size_t		 n, cap;
	size_t		*tab;		/* open addressing: index + 1, 0 empty */
	size_t		 tabcap;
	uint64_t	 key[HASH_KEY_WORDS];
	uint64_t	 rows, same, a2d, d2a, undecidable;
	uint64_t	 skip_error, skip_sandbox, skip_dest;
	int		 oom;
};

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static int
str_eq(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL &&
	    strcmp(a, b) == 0);
}

static uint64_t
group_hash(const struct replay *r, enum replay_class cls, const char *why,
    const struct replay_row *row)
{
	char buf[1024];
	int n;

	n = snprintf(buf, sizeof(buf), "%d\n%s\n%s\n%s\n%d", (int)cls,
	    why ? why : "", row->sandbox, row->host, row->port);
	if (n < 0)
		n = 0;
	return hash_siphash(r->key, buf, (size_t)n < sizeof(buf) ?
	    (size_t)n : sizeof(buf) - 1);
}

static int
tab_grow(struct replay *r)
{
	size_t cap = r->tabcap ? r->tabcap * 2 : 256, i, j;
	size_t *t = calloc(cap, sizeof(*t));

	if (t == NULL)
		return -1;
	for (i = 0; i < r->n; i++) {
		for (j = r->g[i].hash & (cap - 1); t[j] != 0; j = (j + 1) &
		    (cap - 1))
			;
		t[j] = i + 1;
	}
	free(r->tab);
	r->tab = t;
	r->tabcap = cap;
	return 0;
}

static void
group_clear(struct group *g)
{
	free(g->sandbox);
	free(g->host);
	free(g->kind);
	free(g->method);
	free(g->path);
	free(g->then_decision);
	free(g->then_rule);
	free(g->then_reason);
	free(g->now_rule);
	memset(g, 0, sizeof(*g));
}

static void
copy_ts(char *dst, const char *ts)
{
	snprintf(dst, AUDIT_TS_LEN + 1, "%s", ts != NULL ? ts : "");
}

/* The row's group (made on first sight, the row its example); NULL: out of memory. */
static struct group *
group_for(struct replay *r, const struct replay_row *row, const char *ts,
    const struct replay_result *res)
{
	uint64_t h = group_hash(r, res->cls, res->why, row);
	struct group *g;
	size_t j;

	if (r->tabcap == 0 || (r->n + 1) * 2 > r->tabcap)
		if (tab_grow(r) == -1)
			return NULL;
	for (j = h & (r->tabcap - 1); r->tab[j] != 0; j = (j + 1) &
	    (r->tabcap - 1)) {
		g = &r->g[r->tab[j] - 1];
		if (g->hash == h && g->cls == res->cls && str_eq(g->why,
		    res->why) && strcmp(g->sandbox, row->sandbox) == 0 &&
		    strcmp(g->host, row->host) == 0 && g->port == row->port)
			return g;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct group *ng = realloc(r->g, cap * sizeof(*ng));

		if (ng == NULL)
			return NULL;
		r->g = ng;
		r->cap = cap;
	}
	g = &r->g[r->n];
	memset(g, 0, sizeof(*g));
	g->cls = res->cls;
	g->why = res->why;
	g->detail = res->detail;
	g->hash = h;
	g->port = row->port;
	g->sandbox = strdup(row->sandbox);
	g->host = strdup(row->host);
	g->kind = strdup(row->kind);
	g->method = dup_or_null(row->method);
	g->path = dup_or_null(row->path);
	g->then_decision = dup_or_null(row->decision);
	g->then_rule = dup_or_null(row->rule);
	g->then_reason = dup_or_null(row->reason);
	g->now = res->now;
	g->now_rule = res->now != NULL ? strdup(res->rule) : NULL;
	g->now_reason = res->reason;
	g->unchecked = res->unchecked;
	copy_ts(g->first, ts);
	copy_ts(g->last, ts);
	if (g->sandbox == NULL || g->host == NULL || g->kind == NULL ||
	    (res->now != NULL && g->now_rule == NULL)) {
		group_clear(g);
		return NULL;
	}
	r->n++;
	r->tab[j] = r->n;
	return g;
}

static void
replay_free(struct replay *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		group_clear(&r->g[i]);
	free(r->g);
	free(r->tab);
}

/* A column as a NUL-terminated string in buf (NULL for SQL NULL). */
static const char *
col_text(const struct audit_val *v, char *buf, size_t len)
{
	size_t n;

	if (v->type == AUDIT_V_NULL)
		return NULL;
	if (v->type == AUDIT_V_INT) {
		snprintf(buf, len, "%" PRId64, v->i);
		return buf;
	}
	if (v->type != AUDIT_V_TEXT)
		return NULL;
	n = v->len < len - 1 ? v->len : len - 1;
	memcpy(buf, v->p, n);
	buf[n] = '\0';
	return buf;
}

static int64_t
col_int(const struct audit_val *v, int64_t none)
{
	if (v->type == AUDIT_V_INT)
		return v->i;
	if (v->type == AUDIT_V_TEXT && v->len > 0 && v->len < 21) {
		char b[24], *end;
		long long x;

		memcpy(b, v->p, v->len);
		b[v->len] = '\0';
		errno = 0;
		x = strtoll(b, &end, 10);
		if (*end == '\0' && errno == 0)
			return x;
	}
	return none;
}

/* One row: decide again, count, group. 0, or 1 to stop (out of memory). */
static int
replay_one(const struct audit_val v[AUDIT_NCOLS], struct replay *r)
{
	char b[12][POLICY_HOST_MAX + 8], path[2048], ts[AUDIT_TS_LEN + 1];
	struct replay_row row;
	struct replay_result res;
	struct group *g;
	int64_t port;

	memset(&row, 0, sizeof(row));
	row.sandbox = col_text(&v[AUDIT_COL_SANDBOX], b[0], sizeof(b[0]));
	row.kind = col_text(&v[AUDIT_COL_KIND], b[1], sizeof(b[1]));
	row.host = col_text(&v[AUDIT_COL_HOST], b[2], sizeof(b[2]));
	port = col_int(&v[AUDIT_COL_PORT], -1);
	row.port = port < 0 || port > 65535 ? -1 : (int)port;
	row.method = col_text(&v[AUDIT_COL_METHOD], b[3], sizeof(b[3]));
	row.path = col_text(&v[AUDIT_COL_PATH], path, sizeof(path));
	row.decision = col_text(&v[AUDIT_COL_DECISION], b[4], sizeof(b[4]));
	row.rule = col_text(&v[AUDIT_COL_RULE], b[5], sizeof(b[5]));
	row.reason = col_text(&v[AUDIT_COL_REASON], b[6], sizeof(b[6]));
	row.country = col_text(&v[AUDIT_COL_COUNTRY], b[7], sizeof(b[7]));
	row.asn = col_int(&v[AUDIT_COL_ASN], -1);
	if (col_text(&v[AUDIT_COL_TS], ts, sizeof(ts)) == NULL)
		ts[0] = '\0';
	r->rows++;
	policy_replay_row(r->cand, r->cur, &row, &res);
	switch (res.cls) {
	case REPLAY_SKIP:
		if (strcmp(res.why, "no-sandbox") == 0)
			r->skip_sandbox++;
		else if (strcmp(res.why, "no-destination") == 0)
			r->skip_dest++;
		else
			r->skip_error++;
		return 0;
	case REPLAY_SAME:
		r->same++;
		return 0;
	case REPLAY_ALLOW_TO_DENY:
		r->a2d++;
		break;
	case REPLAY_DENY_TO_ALLOW:
		r->d2a++;
		break;
	case REPLAY_UNDECIDABLE:
		r->undecidable++;
		break;
	}
	if ((g = group_for(r, &row, ts, &res)) == NULL) {
		r->oom = 1;
		return 1;
	}
	g->count++;
	if (strcmp(ts, g->first) < 0)
		copy_ts(g->first, ts);
	if (strcmp(ts, g->last) > 0)
		copy_ts(g->last, ts);
	return 0;
}

static int
store_cb(const struct audit_val row[AUDIT_NCOLS], const struct audit_val *gw,
    void *arg)
{
	(void)gw;
	return replay_one(row, arg);
}

/* Every row of f from audit.db. 0, or -1 with err. */
static int
read_db(const char *path, const struct audit_filter *f, struct replay *r,
    char *err, size_t errlen)
{
	struct audit_val v[AUDIT_NCOLS];
	struct audit_sql q;
	const char *errstr;
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	int rc, c;

	if ((db = audit_db_open_ro(path, err, errlen)) == NULL)
		return -1;
	if (audit_build_select(f, &q, &errstr) == -1) {
		snprintf(err, errlen, "%s", errstr);
		sqlite3_close(db);
		return -1;
	}
	if (sqlite3_prepare_v2(db, q.text, -1, &st, NULL) != SQLITE_OK ||
	    audit_bind_sql(st, &q) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_finalize(st);
		sqlite3_close(db);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &v[c]);
		if (replay_one(v, r) != 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_finalize(st);
		sqlite3_close(db);
		return -1;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}

static int
cls_order(enum replay_class c)
{
	return c == REPLAY_ALLOW_TO_DENY ? 0 : c == REPLAY_DENY_TO_ALLOW ? 1 : 2;
}

static int
group_cmp(const void *pa, const void *pb)
{
	const struct group *a = pa, *b = pb;
	int c;

	if ((c = cls_order(a->cls) - cls_order(b->cls)) != 0)
		return c;
	if (a->why != NULL && b->why != NULL && (c = strcmp(a->why, b->why)) != 0)
		return c;
	if ((c = strcmp(a->sandbox, b->sandbox)) != 0)
		return c;
	if ((c = strcmp(a->host, b->host)) != 0)
		return c;
	return a->port - b->port;
}

static const char *
cls_word(enum replay_class c)
{
	return c == REPLAY_ALLOW_TO_DENY ? "allow-to-deny" :
	    c == REPLAY_DENY_TO_ALLOW ? "deny-to-allow" : "undecidable";
}

static void
dest_text(const struct group *g, char *buf, size_t len)
{
	if (g->port < 0)
		snprintf(buf, len, "%s (%s)", g->host, g->kind);
	else if (strchr(g->host, ':') != NULL)
		snprintf(buf, len, "[%s]:%d", g->host, g->port);
	else
		snprintf(buf, len, "%s:%d", g->host, g->port);
}

static const char *
nz(const char *s)
{
	return s != NULL ? s : "-";
}

static void
print_text(const struct replay *r)
{
	const struct group *g;
	char dest[POLICY_HOST_MAX + 16];
	size_t i;
	int head = -1;

	for (i = 0; i < r->n; i++) {
		g = &r->g[i];
		if (cls_order(g->cls) != head) {
			head = cls_order(g->cls);
			printf("%s%s\n", i > 0 ? "\n" : "",
			    g->cls == REPLAY_ALLOW_TO_DENY ? "allow -> deny:" :
			    g->cls == REPLAY_DENY_TO_ALLOW ? "deny -> allow:" :
			    "undecidable (the row does not hold what the "
			    "decision needs):");
		}
		dest_text(g, dest, sizeof(dest));
		printf("  %s  %s  %" PRIu64 " row%s  %s .. %s%s%s\n", g->sandbox,
		    dest, g->count, g->count == 1 ? "" : "s", g->first,
		    g->last, g->why ? "  " : "", g->why ? g->why : "");
		printf("    e.g. %s%s%s%s%s: then %s (%s%s%s)", g->kind,
		    g->method ? " " : "", g->method ? g->method : "",
		    g->path ? " " : "", g->path ? g->path : "",
		    nz(g->then_decision), nz(g->then_rule),
		    g->then_reason ? ": " : "", g->then_reason ?
		    g->then_reason : "");
		if (g->now != NULL)
			printf(", now %s (%s: %s)%s%s%s\n", g->now, g->now_rule,
			    nz(g->now_reason), g->unchecked ? " if its " : "",
			    g->unchecked ? g->unchecked : "", g->unchecked ?
			    " pass (not seen then)" : "");
		else
			printf("; %s\n", nz(g->detail));
	}
	printf("%s%" PRIu64 " row%s read: %" PRIu64 " decided again (%" PRIu64
	    " unchanged, %" PRIu64 " allow -> deny, %" PRIu64 " deny -> allow), %"
	    PRIu64 " undecidable, %" PRIu64 " skipped (%" PRIu64 " not "
	    "decisions, %" PRIu64 " without a sandbox, %" PRIu64 " without a "
	    "destination)\n", r->n > 0 ? "\n" : "", r->rows,
	    r->rows == 1 ? "" : "s", r->same + r->a2d + r->d2a, r->same,
	    r->a2d, r->d2a, r->undecidable, r->skip_error + r->skip_sandbox +
	    r->skip_dest, r->skip_error, r->skip_sandbox, r->skip_dest);
}

static void
json_group(const struct group *g)
{
	printf("{\"sandbox\":");
	cmd_json_string(g->sandbox);
	printf(",\"host\":");
	cmd_json_string(g->host);
	if (g->port < 0)
		printf(",\"port\":null");
	else
		printf(",\"port\":%d", g->port);
	printf(",\"kind\":");
	cmd_json_string(g->kind);
	printf(",\"count\":%" PRIu64 ",\"first\":", g->count);
	cmd_json_string(g->first);
	printf(",\"last\":");
	cmd_json_string(g->last);
	if (g->cls == REPLAY_UNDECIDABLE) {
		printf(",\"why\":");
		cmd_json_string(g->why);
		printf(",\"detail\":");
		cmd_json_string(g->detail);
	} else
		printf(",\"direction\":\"%s\"", cls_word(g->cls));
	printf(",\"example\":{\"method\":");
	cmd_json_string(g->method);
	printf(",\"path\":");
	cmd_json_string(g->path);
	printf(",\"then\":{\"decision\":");
	cmd_json_string(g->then_decision);
	printf(",\"rule\":");
	cmd_json_string(g->then_rule);
	printf(",\"reason\":");
	cmd_json_string(g->then_reason);
	printf("},\"now\":");
	if (g->now != NULL) {
		printf("{\"decision\":");
		cmd_json_string(g->now);
		printf(",\"rule\":");
		cmd_json_string(g->now_rule);
		printf(",\"reason\":");
		cmd_json_string(g->now_reason);
		printf(",\"unchecked\":");
		cmd_json_string(g->unchecked);
		putchar('}');
	} else
		fputs("null", stdout);
	printf("}}");
}

static void
print_json(const struct replay *r, const char *fail_on, int failed)
{
	size_t i;
	int first;

	printf("{\"rows\":%" PRIu64 ",\"decided\":%" PRIu64 ",\"unchanged\":%"
	    PRIu64 ",\"allow_to_deny\":%" PRIu64 ",\"deny_to_allow\":%" PRIu64
	    ",\"undecidable\":%" PRIu64 ",\"skipped\":{\"not_decision\":%"
	    PRIu64 ",\"no_sandbox\":%" PRIu64 ",\"no_destination\":%" PRIu64
	    "},\"fail_on\":\"%s\",\"failed\":%s,\"changes\":[", r->rows,
	    r->same + r->a2d + r->d2a, r->same, r->a2d, r->d2a,
	    r->undecidable, r->skip_error, r->skip_sandbox, r->skip_dest,
	    fail_on, failed ? "true" : "false");
	for (i = 0, first = 1; i < r->n; i++)
		if (r->g[i].cls != REPLAY_UNDECIDABLE) {
			if (!first)
				putchar(',');
			first = 0;
			json_group(&r->g[i]);
		}
	printf("],\"undecidable_groups\":[");
	for (i = 0, first = 1; i < r->n; i++)
		if (r->g[i].cls == REPLAY_UNDECIDABLE) {
			if (!first)
				putchar(',');
			first = 0;
			json_group(&r->g[i]);
		}
	printf("]}\n");
}

/* The candidate, read as the gateway reads its policies; NULL after printing why. */
static struct policy *
load_candidate(const char *const *paths, int n)
{
	struct diag d;
	struct policy *p;

	diag_init(&d);
	p = policy_load_paths((char *const *)paths, n, &d);
	if (p == NULL) {
		if (d.n == 1 && d.v[0].line == 0)
			fprintf(stderr, "sandgate: %s: %s\n", d.v[0].file,
			    d.v[0].msg);
		else {
			diag_print(&d, stderr);
			fprintf(stderr, "sandgate: %zu error%s in the "
			    "candidate\n", d.n, d.n == 1 ? "" : "s");
		}
	}
	diag_free(&d);
	return p;
}

int
cmd_policy_replay(int argc, char *argv[])
{
	struct cmd_args a;
	struct audit_filter f;
	struct config *cfg;
	struct policy *cur, *cand;
	struct replay r;
	const char *opt, *val, *cfg_path = NULL, *store = NULL;
	const char *fail_on = "allow-to-deny", *format = "text";
	int64_t now = audit_now_ms();
	char err[512];
	int rc, failed, i;

	memset(&f, 0, sizeof(f));
	cmd_args_init(&a, argc, argv);
	a.help = "policy replay";
	while ((opt = cmd_args_next(&a, "c|config|since|until|sandbox|store|"
	    "fail-on|format", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "sandbox") == 0) {
			if (!policy_valid_id(val, strlen(val)))
				return cmd_opt_error(&a, "bad sandbox id %s",
				    val);
			f.sandbox = val;
		} else if (strcmp(opt, "store") == 0)
			store = val;
		else if (strcmp(opt, "fail-on") == 0) {
			if (!cmd_in_list("allow-to-deny|deny-to-allow|any|none",
			    val))
				return cmd_bad_value(&a, "allow-to-deny|"
				    "deny-to-allow|any|none", val);
			fail_on = val;
		} else if (strcmp(opt, "format") == 0) {
			if (!cmd_in_list("text|json", val))
				return cmd_bad_value(&a, "text|json", val);
			format = val;
		} else if (strcmp(opt, "since") == 0 ||
		    strcmp(opt, "until") == 0) {
			int since = opt[0] == 's';

			if (audit_parse_time(val, now, since ? &f.since_ms :
			    &f.until_ms) == -1)
				return cmd_opt_error(&a, "bad time %s (want "
				    "15m, 2h, 7d or RFC 3339)", val);
			*(since ? &f.has_since : &f.has_until) = 1;
		} else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(replay_usage, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops < 1)
		return cmd_usage_error(replay_usage, "policy replay: give the "
		    "candidate policy directory (or files)");
	if (a.n_ops > REPLAY_MAX_CAND)
		return cmd_usage_error(replay_usage, "policy replay: at most %d "
		    "candidate paths", REPLAY_MAX_CAND);
	if (store != NULL && audit_store_url_ok(store, err, sizeof(err)) == -1)
		return cmd_usage_error(replay_usage, "policy replay: --store: %s",
		    err);
	if ((cand = load_candidate(a.ops, a.n_ops)) == NULL)
		return 2;
	if (cmd_load(cfg_path, &cfg, &cur) == -1) {
		policy_unref(cand);
		return 1;
	}
	/* The rows that are a destination's decision, oldest first. */
	for (i = 0; audit_kinds[i] != NULL; i++)
		if (strcmp(audit_kinds[i], "http") == 0 ||
		    strcmp(audit_kinds[i], "connect") == 0 ||
		    strcmp(audit_kinds[i], "socks5") == 0 ||
		    strcmp(audit_kinds[i], "dns") == 0 ||
		    strcmp(audit_kinds[i], "transparent") == 0)
			f.kinds_in |= AUDIT_KIND_BIT(i);
	f.asc = 1;
	f.by_id = store == NULL;

	memset(&r, 0, sizeof(r));
	r.cand = cand;
	r.cur = cur;
	hash_key_new(r.key);
	if (store != NULL)
		rc = audit_store_rows(store, NULL, &f, store_cb, &r, err,
		    sizeof(err)) == -1 ? -1 : 0;
	else
		rc = read_db(cfg->audit_db, &f, &r, err, sizeof(err));
	if (rc == -1 || r.oom) {
		rc = cmd_error("policy replay: %s", r.oom ? "out of memory" :
		    err);
		goto done;
	}
	if (r.n > 0)
		qsort(r.g, r.n, sizeof(*r.g), group_cmp);
	failed = (r.a2d > 0 && (strcmp(fail_on, "allow-to-deny") == 0 ||
	    strcmp(fail_on, "any") == 0)) || (r.d2a > 0 &&
	    (strcmp(fail_on, "deny-to-allow") == 0 ||
	    strcmp(fail_on, "any") == 0));
	if (strcmp(format, "json") == 0)
		print_json(&r, fail_on, failed);
	else
		print_text(&r);
	if (fflush(stdout) == EOF || ferror(stdout))
		rc = cmd_error("policy replay: write error: %s",
		    strerror(errno));
	else
		rc = failed;
done:
	replay_free(&r);
	policy_unref(cand);
	policy_unref(cur);
	config_free(cfg);
	return rc;
}
