/*
 * `sandgate policy suggest --sandbox ID [--since T]`: read the audit log's
 * denied and reported rows of one sandbox and print a policy document
 * that would allow them (core/policy_suggest.c writes it), for rolling a
 * policy out in mode: report first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_stats.h"
#include "core/config.h"
#include "core/policy.h"
#include "core/policy_suggest.h"
#include "core/psl.h"
#include "sandgate.h"

static const char suggest_usage[] =
    "usage: sandgate policy suggest [-c FILE] [--db PATH] --sandbox ID\n"
    "                               [--since T] [--until T] [--name POLICY]\n"
    "                               [--psl FILE]\n"
    "  Prints a policy document allowing what the sandbox was denied or\n"
    "  reported (mode: report), grouped by registrable domain (--psl: the\n"
    "  Public Suffix List, default " PSL_DEFAULT_PATH ").\n"
    "  T is a duration before now (15m, 2h, 7d) or an RFC 3339 time.\n";

#define PSL_FILE_MAX	(16u << 20)

static struct psl *
psl_read(const char *path, int required)
{
	FILE *f = fopen(path, "rb");
	struct psl *p = NULL;
	char *buf = NULL;
	size_t len = 0, n;

	if (f == NULL) {
		if (required)
			cmd_error("policy suggest: %s: %s", path,
			    strerror(errno));
		return NULL;
	}
	if ((buf = malloc(PSL_FILE_MAX)) != NULL) {
		while ((n = fread(buf + len, 1, PSL_FILE_MAX - len, f)) > 0)
			len += n;
		if (!ferror(f))
			p = psl_parse(buf, len);
	}
	if (p == NULL && required)
		cmd_error("policy suggest: %s: cannot read", path);
	free(buf);
	fclose(f);
	return p;
}

struct sugg_ctx {
	struct suggest	*s;
	int64_t		 rows;
	int		 oom;
};

static int
sugg_row_cb(sqlite3_stmt *st, void *arg)
{
	struct sugg_ctx *c = arg;
	struct suggest_row r;

	r.host = audit_col_text(st, 0);
	r.port = (int)audit_col_int(st, 1, -1);
	r.kind = audit_col_text(st, 2);
	r.decision = audit_col_text(st, 3);
	r.rule = audit_col_text(st, 4);
	r.reason = audit_col_text(st, 5);
	r.ip = audit_col_text(st, 6);
	r.n = audit_col_int(st, 7, 0);
	r.first = audit_col_text(st, 8);
	r.last = audit_col_text(st, 9);
	c->rows += r.n;
	if (suggest_add(c->s, &r) == -1) {
		c->oom = 1;
		return 1;
	}
	return 0;
}

static int
name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= POLICY_NAME_MAX && strspn(s,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	    "._-") == n && s[0] != '.' && s[0] != '_' && s[0] != '-';
}

struct sugg_opts {
	const char	*cfg_path, *db, *sandbox, *since, *until, *name, *psl;
	struct audit_filter f;
};

static int
sugg_parse(int argc, char *argv[], struct sugg_opts *o)
{
	struct cmd_args a;
	const char *opt, *val;
	int64_t now = audit_now_ms();

	memset(o, 0, sizeof(*o));
	cmd_args_init(&a, argc, argv);
	a.help = "policy suggest";
	while ((opt = cmd_args_next(&a, "c|config|db|sandbox|since|until|name|"
	    "psl", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			o->cfg_path = val;
		else if (strcmp(opt, "db") == 0)
			o->db = val;
		else if (strcmp(opt, "sandbox") == 0)
			o->sandbox = val;
		else if (strcmp(opt, "name") == 0)
			o->name = val;
		else if (strcmp(opt, "psl") == 0)
			o->psl = val;
		else if (strcmp(opt, "since") == 0 || strcmp(opt, "until") == 0) {
			int since = opt[0] == 's';

			if (audit_parse_time(val, now, since ? &o->f.since_ms :
			    &o->f.until_ms) == -1)
				return cmd_opt_error(&a, "bad time %s (want "
				    "15m, 2h, 7d or RFC 3339)", val);
			*(since ? &o->f.has_since : &o->f.has_until) = 1;
			*(since ? &o->since : &o->until) = val;
		} else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(suggest_usage, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
	}
	if (o->sandbox == NULL)
		return cmd_usage_error(suggest_usage, "policy suggest: --sandbox "
		    "is required");
	if (!policy_valid_id(o->sandbox, strlen(o->sandbox)))
		return cmd_usage_error(suggest_usage, "policy suggest: bad "
		    "sandbox id");
	if (o->name != NULL && !name_ok(o->name))
		return cmd_usage_error(suggest_usage, "policy suggest: bad "
		    "--name (letters, digits, ., _, -)");
	if (a.n_ops > 0)
		return cmd_usage_error(suggest_usage, "policy suggest: unexpected "
		    "argument: %s", a.ops[0]);
	o->f.sandbox = o->sandbox;
	return -1;	/* go on */
}

static int
sugg_run(struct sugg_opts *o, struct config *cfg, struct policy *pol)
{
	struct policy_identity id;
	struct sugg_ctx c = { 0 };
	struct psl *psl;
	sqlite3 *db;
	char err[512], name[POLICY_NAME_MAX + 16], h[4][512];
	const char *hdr[5];
	int64_t n;

	psl = psl_read(o->psl ? o->psl : PSL_DEFAULT_PATH, o->psl != NULL);
	if (psl == NULL && o->psl != NULL)
		return 1;
	if ((db = audit_db_open_ro(o->db ? o->db : cfg->audit_db, err,
	    sizeof(err))) == NULL) {
		psl_free(psl);
		return cmd_error("policy suggest: %s", err);
	}
	if ((c.s = suggest_new(psl)) == NULL) {
		sqlite3_close(db);
		psl_free(psl);
		return cmd_error("policy suggest: out of memory");
	}
	n = audit_aggregate(db, &o->f, "host, port, kind, decision, rule, "
	    "reason, max(ip), count(*), min(ts), max(ts)",
	    "decision IN ('deny', 'report') AND kind IN ('http', 'connect', "
	    "'socks5', 'transparent', 'dns') AND host IS NOT NULL",
	    "host, port, kind, decision, rule, reason", "host, port", 0,
	    sugg_row_cb, &c, err, sizeof(err));
	sqlite3_close(db);
	if (n == -1 || c.oom) {
		suggest_free(c.s);
		psl_free(psl);
		return cmd_error("policy suggest: %s", c.oom ? "out of memory" :
		    err);
	}
	if (o->name != NULL)
		snprintf(name, sizeof(name), "%s", o->name);
	else if (policy_identity_by_id(pol, o->sandbox, &id) == 0)
		snprintf(name, sizeof(name), "%s", id.policy);
	else
		snprintf(name, sizeof(name), "suggested-%s", o->sandbox);
	snprintf(h[0], sizeof(h[0]), "sandgate policy suggest --sandbox %s: "
	    "%lld row%s denied or reported%s%s%s%s", o->sandbox,
	    (long long)c.rows, c.rows == 1 ? "" : "s",
	    o->since ? " since " : "", o->since ? o->since : "",
	    o->until ? " until " : "", o->until ? o->until : "");
	snprintf(h[1], sizeof(h[1]), "Names are grouped by registrable domain%s.",
	    psl ? " (Public Suffix List)" : " (no Public Suffix List: by the "
	    "last two labels)");
	snprintf(h[2], sizeof(h[2]), "Review it: it allows what the sandbox "
	    "did, not what it should do. Merge the allow");
	snprintf(h[3], sizeof(h[3]), "rules into policy %s (keeping its other "
	    "keys) and drop mode: report to enforce.", name);
	hdr[0] = h[0], hdr[1] = h[1], hdr[2] = h[2], hdr[3] = h[3];
	suggest_write(c.s, stdout, name, hdr, 4);
	suggest_free(c.s);
	psl_free(psl);
	if (fflush(stdout) == EOF || ferror(stdout))
		return cmd_error("policy suggest: write error: %s",
		    strerror(errno));
	return 0;
}

int
cmd_policy_suggest(int argc, char *argv[])
{
	struct sugg_opts o;
	struct config *cfg;
	struct policy *pol;
	int rc;

	if ((rc = sugg_parse(argc, argv, &o)) != -1)
		return rc;
	if (cmd_load(o.cfg_path, &cfg, &pol) == -1)
		return 1;
	rc = sugg_run(&o, cfg, pol);
	policy_unref(pol);
	config_free(cfg);
	return rc;
}
