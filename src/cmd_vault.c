/*
 * `sandgate vault set|list|rm|rotate`: manage the secrets in vault.db at the
 * paths the config names. A value comes from stdin only, never from argv,
 * and is never printed; list shows names, the credentials using them and
 * times, and checks that every entry still opens.
 */
#include <sys/prctl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/diag.h"
#include "core/policy.h"
#include "core/policy_int.h"
#include "sandgate.h"
#include "vault/vault.h"

#define VAULT_SET_USAGE \
    "usage: sandgate vault set NAME [-c FILE]     store a secret read from stdin\n"
#define VAULT_ROTATE_USAGE \
    "usage: sandgate vault rotate NAME [-c FILE]  replace it (new value from stdin)\n"
#define VAULT_RM_USAGE \
    "usage: sandgate vault rm NAME [-c FILE]      remove it\n"
#define VAULT_LIST_USAGE \
    "usage: sandgate vault list [-c FILE]         names, the credentials using\n" \
    "                                             them, created and rotated times\n"
#define VAULT_COMMON_USAGE \
    "  The value is read from standard input, never from the command line,\n" \
    "  and one trailing newline is dropped:\n" \
    "      printf %s \"$OPENAI_API_KEY\" | sandgate vault set openai-prod\n" \
    "  Names: letters, digits, '.', '_', '-'; at most 64 characters.\n" \
    "  -c FILE   config file (default: ./sandgate.yaml,\n" \
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n"

static const char vault_usage[] = VAULT_SET_USAGE VAULT_ROTATE_USAGE
    VAULT_RM_USAGE VAULT_LIST_USAGE VAULT_COMMON_USAGE;
static const struct {
	const char	*sub;
	const char	*page;
} vault_pages[] = {
	{ "set", VAULT_SET_USAGE VAULT_COMMON_USAGE },
	{ "rotate", VAULT_ROTATE_USAGE VAULT_COMMON_USAGE },
	{ "rm", VAULT_RM_USAGE VAULT_COMMON_USAGE },
	{ "list", VAULT_LIST_USAGE VAULT_COMMON_USAGE },
};

/* vault [SUBCOMMAND] --help: that subcommand's page; an unknown one is 2. */
static int
vault_help(const struct cmd_args *a)
{
	size_t i;

	if (a->n_ops == 0) {
		fputs(vault_usage, stdout);
		return 0;
	}
	for (i = 0; i < sizeof(vault_pages) / sizeof(vault_pages[0]); i++)
		if (strcmp(a->ops[0], vault_pages[i].sub) == 0) {
			fputs(vault_pages[i].page, stdout);
			return 0;
		}
	return cmd_usage_error(NULL, "vault: unknown subcommand: %s (sandgate "
	    "help vault)", a->ops[0]);
}

/* ------------------------------------------------------------ set, rotate */

struct version_acc {
	const char	*name;
	int64_t		 version;
};

static void
version_cb(const struct vault_entry_info *e, void *arg)
{
	struct version_acc *a = arg;

	if (strcmp(e->name, a->name) == 0)
		a->version = e->version;
}

static int
vault_cmd_store(struct vault *v, const char *name, int mode)
{
	struct version_acc acc = { name, 0 };
	const char *err = NULL;
	int rc;

	if (isatty(STDIN_FILENO)) {
		fprintf(stderr, "value for %s (not echoed): ", name);
		fflush(stderr);
	}
	rc = vault_set_from_fd(v, name, STDIN_FILENO, mode, &err);
	if (isatty(STDIN_FILENO))
		fputc('\n', stderr);
	switch (rc) {
	case 0:
		break;
	case VAULT_INPUT_ERROR:
		return cmd_error("vault: cannot read stdin: %s", err);
	case VAULT_INPUT_EMPTY:
		return cmd_error("vault: empty value; pipe it on stdin, e.g. "
		    "printf %%s \"$KEY\" | sandgate vault set %s", name);
	case VAULT_INPUT_TOO_LONG:
		return cmd_error("vault: value longer than %d bytes",
		    VAULT_VALUE_MAX);
	default:
		if (mode == VAULT_SET_NEW && strstr(err, "already exists"))
			return cmd_error("vault set: %s (use `sandgate vault "
			    "rotate %s` to replace it)", err, name);
		return cmd_error("vault %s: %s", mode == VAULT_SET_NEW ?
		    "set" : "rotate", err);
	}
	(void)vault_list(v, version_cb, &acc, &err);
	if (mode == VAULT_SET_NEW)
		printf("stored %s (version %lld)\n", name,
		    (long long)acc.version);
	else
		printf("rotated %s (version %lld); new requests use the new "
		    "value\n", name, (long long)acc.version);
	return 0;
}

/* ------------------------------------------------------------ list */

struct list_row {
	struct vault_entry_info info;
	char		*creds;		/* "a,b", "-" or "?" */
	int		 broken;
};

struct list_acc {
	struct list_row	*rows;
	size_t		 n, cap;
	int		 oom;
};

static void
list_cb(const struct vault_entry_info *e, void *arg)
{
	struct list_acc *a = arg;
	struct list_row *nr;

	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 16;

		if ((nr = realloc(a->rows, ncap * sizeof(*nr))) == NULL) {
			a->oom = 1;
			return;
		}
		a->rows = nr;
		a->cap = ncap;
	}
	memset(&a->rows[a->n], 0, sizeof(a->rows[0]));
	a->rows[a->n++].info = *e;
}

/* The credentials whose secret is name, comma-separated ("-": none). */
static char *
creds_using(const struct policy *pol, const char *name)
{
	size_t i, len = 0;
	char *s;

	if (pol == NULL)
		return strdup("?");
	for (i = 0; i < pol->n_creds; i++)
		if (strcmp(pol->creds[i].secret, name) == 0)
			len += strlen(pol->creds[i].name) + 1;
	if (len == 0)
		return strdup("-");
	if ((s = calloc(1, len)) == NULL)
		return NULL;
	for (i = 0; i < pol->n_creds; i++) {
		if (strcmp(pol->creds[i].secret, name) != 0)
			continue;
		if (s[0] != '\0')
			strcat(s, ",");
		strcat(s, pol->creds[i].name);
	}
	return s;
}

static void
fmt_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || gmtime_r(&tt, &tm) == NULL)
		snprintf(buf, len, "-");
	else
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The policy, if it loads; list and rm work without one. */
static struct policy *
load_policy_quietly(const struct config *cfg)
{
	struct policy *pol;
	struct diag d;

	diag_init(&d);
	pol = policy_load(cfg, &d);
	diag_free(&d);
	if (pol == NULL)
		fprintf(stderr, "sandgate: warning: the policy does not load "
		    "(see `sandgate policy check`); credentials not shown\n");
	return pol;
}

static void
list_print(const struct list_acc *a)
{
	char c[32], r[32];
	int wn = 4, wc = 11;
	size_t i;

	for (i = 0; i < a->n; i++) {
		if ((int)strlen(a->rows[i].info.name) > wn)
			wn = (int)strlen(a->rows[i].info.name);
		if ((int)strlen(a->rows[i].creds) > wc)
			wc = (int)strlen(a->rows[i].creds);
	}
	printf("%-*s  %-*s  %-20s  %-20s  %7s  %s\n", wn, "NAME", wc,
	    "CREDENTIALS", "CREATED", "ROTATED", "VERSION", "STATUS");
	for (i = 0; i < a->n; i++) {
		fmt_time(a->rows[i].info.created, c, sizeof(c));
		fmt_time(a->rows[i].info.rotated, r, sizeof(r));
		printf("%-*s  %-*s  %-20s  %-20s  %7lld  %s\n", wn,
		    a->rows[i].info.name, wc, a->rows[i].creds, c, r,
		    (long long)a->rows[i].info.version,
		    a->rows[i].broken ? "BROKEN" : "ok");
	}
}

/* Credentials that name a vault entry that does not exist. */
static void
list_dangling(const struct policy *pol, const struct list_acc *a)
{
	size_t i, j;

	for (i = 0; pol != NULL && i < pol->n_creds; i++) {
		for (j = 0; j < a->n; j++)
			if (strcmp(a->rows[j].info.name,
			    pol->creds[i].secret) == 0)
				break;
		if (j == a->n)
			fprintf(stderr, "sandgate: warning: credential %s uses "
			    "vault entry %s, which does not exist\n",
			    pol->creds[i].name, pol->creds[i].secret);
	}
}

static int
vault_cmd_list(struct vault *v, const struct config *cfg)
{
	struct list_acc a = { 0 };
	struct policy *pol;
	const char *err;
	size_t i;
	int rc = 1, broken = 0;

	if (v != NULL && vault_list(v, list_cb, &a, &err) == -1) {
		cmd_error("vault list: %s", err);
		goto done;
	}
	if (a.oom) {
		cmd_error("vault list: out of memory");
		goto done;
	}
	pol = load_policy_quietly(cfg);
	for (i = 0; i < a.n; i++) {
		if ((a.rows[i].creds = creds_using(pol,
		    a.rows[i].info.name)) == NULL) {
			cmd_error("vault list: out of memory");
			goto done_pol;
		}
		if (vault_check(v, a.rows[i].info.name, &err) == -1) {
			a.rows[i].broken = 1;
			broken++;
			cmd_error("vault: %s", err);
		}
	}
	list_print(&a);
	list_dangling(pol, &a);
	rc = broken ? 1 : 0;
done_pol:
	if (pol != NULL)
		policy_unref(pol);
done:
	for (i = 0; i < a.n; i++)
		free(a.rows[i].creds);
	free(a.rows);
	return rc;
}

/* ------------------------------------------------------------ rm */

static int
vault_cmd_rm(struct vault *v, const struct config *cfg, const char *name)
{
	struct policy *pol;
	const char *err;
	size_t i;

	if (vault_rm(v, name, &err) == -1)
		return cmd_error("vault rm: %s", err);
	printf("removed %s\n", name);
	if ((pol = load_policy_quietly(cfg)) == NULL)
		return 0;
	for (i = 0; i < pol->n_creds; i++)
		if (strcmp(pol->creds[i].secret, name) == 0)
			fprintf(stderr, "sandgate: warning: credential %s "
			    "still uses %s; its requests will fail until it "
			    "is set again\n", pol->creds[i].name, name);
	policy_unref(pol);
	return 0;
}

/* ------------------------------------------------------------ dispatch */

static int
vault_run(const char *cfg_path, const char *sub, const char *name)
{
	struct config *cfg;
	struct vault *v = NULL;
	const char *err;
	int rc = 1, is_list = strcmp(sub, "list") == 0;

	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	/* Listing a vault that was never made: an empty table, no key made. */
	if (is_list && access(cfg->vault_key_file, F_OK) == -1 &&
	    access(cfg->vault_db, F_OK) == -1) {
		rc = vault_cmd_list(NULL, cfg);
		goto done;
	}
	v = vault_open(cfg->vault_db, cfg->vault_key_file,
	    strcmp(sub, "set") == 0, &err);
	if (v == NULL) {
		cmd_error("vault %s: %s", sub, err);
		goto done;
	}
	if (strcmp(sub, "set") == 0)
		rc = vault_cmd_store(v, name, VAULT_SET_NEW);
	else if (strcmp(sub, "rotate") == 0)
		rc = vault_cmd_store(v, name, VAULT_SET_ROTATE);
	else if (strcmp(sub, "rm") == 0)
		rc = vault_cmd_rm(v, cfg, name);
	else
		rc = vault_cmd_list(v, cfg);
done:
	vault_close(v);
	config_free(cfg);
	return rc;
}

int
cmd_vault(int argc, char *argv[])
{
	struct cmd_args a;
	const char *opt, *val, *cfg_path = NULL, *sub;
	int want, help = 0;

	/* No core dump or ptrace peek at a value on its way in. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0)
			help = 1;
		else
			return cmd_bad_option(&a, opt);
	}
	if (help)
		return vault_help(&a);
	if (a.n_ops == 0)
		return cmd_usage_error(vault_usage, "vault: no subcommand "
		    "given");
	sub = a.ops[0];
	if (strcmp(sub, "list") == 0)
		want = 1;
	else if (strcmp(sub, "set") == 0 || strcmp(sub, "rm") == 0 ||
	    strcmp(sub, "rotate") == 0)
		want = 2;
	else
		return cmd_usage_error(vault_usage, "vault: unknown "
		    "subcommand: %s (sandgate help vault)", sub);
	if (a.n_ops < want)
		return cmd_usage_error(vault_usage, "vault %s: no NAME given",
		    sub);
	/* A second operand is most likely a value pasted onto the line. */
	if (a.n_ops > want)
		return cmd_usage_error(vault_usage, "vault %s: unexpected "
		    "argument%s (values are read from stdin, never from the "
		    "command line)", sub, a.n_ops - want > 1 ? "s" : "");
	return vault_run(cfg_path, sub, want == 2 ? a.ops[1] : NULL);
}
