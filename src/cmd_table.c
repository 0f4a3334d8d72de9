/*
 * The command table: every command, subcommand and option with its value's
 * kind. The build prints the bash completion from it; tests hold it to the commands.
 */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "sandgate.h"

/*
 * HOW TO ADD A COMMAND OR AN OPTION
 *
 * An option: one line in its (sub)command's list below,
 *     { "-x", "--long", KIND, "a|b|c" },
 * short name or NULL, long name or NULL, the kind of its value (V_NONE for
 * a flag), and for V_ENUM the values, '|'-separated. --help is implied.
 *
 * A command: a list of its options, then one line in cmds[],
 *     { "status", NULL, status_opts },
 * and for a command with subcommands one line per subcommand,
 *     { "top", "sandboxes", top_sandboxes_opts },
 * (plus { "top", NULL, top_opts } if the command takes options without
 * one). Its dispatch in src/main.c's commands[] is separate. The
 * completion script and the option test (tests/e2e/test_cli_table.py)
 * follow from here; that test fails when a command accepts an option the
 * table lacks, or the table names one the command refuses.
 */
enum cmd_val { V_NONE, V_FILE, V_DIR, V_ENUM, V_TEXT };

struct cmd_opt {
	const char	*s;		/* "-c" or NULL */
	const char	*l;		/* "--config" or NULL */
	enum cmd_val	 kind;
	const char	*values;	/* V_ENUM: "table|json" */
};

#define END		{ NULL, NULL, V_NONE, NULL }
#define CONFIG		{ "-c", "--config", V_FILE, NULL }

static const struct cmd_opt no_opts[] = { END };
static const struct cmd_opt config_only[] = { CONFIG, END };

static const struct cmd_opt serve_opts[] = {
	CONFIG,
	{ "-d", "--debug", V_NONE, NULL },
	{ NULL, "--log-level", V_ENUM, "debug|info|warn|error" },
	{ NULL, "--log-format", V_ENUM, "text|json" },
	END
};

static const struct cmd_opt policy_explain_opts[] = {
	CONFIG,
	{ NULL, "--sandbox", V_TEXT, NULL },
	{ NULL, "--policy", V_TEXT, NULL },
	{ NULL, "--method", V_TEXT, NULL },
	{ NULL, "--path", V_TEXT, NULL },
	{ NULL, "--format", V_ENUM, "text|json" },
	END
};

static const struct cmd_opt policy_suggest_opts[] = {
	CONFIG,
	{ NULL, "--db", V_FILE, NULL },
	{ NULL, "--sandbox", V_TEXT, NULL },
	{ NULL, "--since", V_TEXT, NULL },
	{ NULL, "--until", V_TEXT, NULL },
	{ NULL, "--name", V_TEXT, NULL },
	{ NULL, "--psl", V_FILE, NULL },
	END
};

static const struct cmd_opt policy_replay_opts[] = {
	CONFIG,
	{ NULL, "--since", V_TEXT, NULL },
	{ NULL, "--until", V_TEXT, NULL },
	{ NULL, "--sandbox", V_TEXT, NULL },
	{ NULL, "--store", V_TEXT, NULL },
	{ NULL, "--fail-on", V_ENUM, "allow-to-deny|deny-to-allow|any|none" },
	{ NULL, "--format", V_ENUM, "text|json" },
	END
};

/* status and reload: clients of the admin socket */
static const struct cmd_opt admin_client_opts[] = {
	CONFIG,
	{ NULL, "--socket", V_FILE, NULL },
	{ NULL, "--json", V_NONE, NULL },
	END
};
/* approve and deny: answers to mode: ask's questions */
static const struct cmd_opt approve_opts[] = {
	CONFIG,
	{ NULL, "--socket", V_FILE, NULL },
	{ NULL, "--json", V_NONE, NULL },
	{ NULL, "--for", V_TEXT, NULL },
	{ NULL, "--always", V_NONE, NULL },
	{ NULL, "--scope", V_TEXT, NULL },
	END
};
static const struct cmd_opt deny_opts[] = {
	CONFIG,
	{ NULL, "--socket", V_FILE, NULL },
	{ NULL, "--json", V_NONE, NULL },
	{ NULL, "--for", V_TEXT, NULL },
	{ NULL, "--scope", V_TEXT, NULL },
	END
};
static const struct cmd_opt top_opts[] = {
	CONFIG,
	{ NULL, "--interval", V_TEXT, NULL },
	{ NULL, "--once", V_NONE, NULL },
	{ NULL, "--sandbox", V_TEXT, NULL },
	{ NULL, "--decision", V_ENUM, "all|allow|deny|report|error" },
	{ NULL, "--host", V_TEXT, NULL },
	END
};
static const struct cmd_opt ca_init_opts[] = {
	CONFIG,
	{ "-f", "--force", V_NONE, NULL },
	END
};

#define AUDIT_DB	{ NULL, "--db", V_FILE, NULL }
#define AUDIT_SANDBOX	{ NULL, "--sandbox", V_TEXT, NULL }
#define AUDIT_SINCE	{ NULL, "--since", V_TEXT, NULL }
#define AUDIT_UNTIL	{ NULL, "--until", V_TEXT, NULL }
#define AUDIT_FILTERS \
	{ NULL, "--decision", V_ENUM, "allow|deny|report|error" }, \
	{ NULL, "--kind", V_ENUM, \
	    "http|connect|socks5|dns|transparent|ingress|admin|vault" }, \
	{ NULL, "--host", V_TEXT, NULL }, \
	{ NULL, "--credential", V_TEXT, NULL }
#define AUDIT_STORE	{ NULL, "--store", V_TEXT, NULL }, \
	{ NULL, "--gateway", V_TEXT, NULL }
#define AUDIT_PUBKEY	{ NULL, "--pubkey", V_FILE, NULL }

static const struct cmd_opt audit_opts[] = {
	CONFIG, AUDIT_DB, AUDIT_SANDBOX, AUDIT_SINCE, AUDIT_UNTIL,
	AUDIT_FILTERS,
	{ NULL, "--limit", V_TEXT, NULL },
	{ NULL, "--asc", V_NONE, NULL },
	{ NULL, "--format", V_ENUM, "table|json|csv|ocsf" },
	AUDIT_STORE,
	END
};

static const struct cmd_opt audit_verify_opts[] = {
	CONFIG, AUDIT_DB, AUDIT_STORE, AUDIT_PUBKEY, END
};

static const struct cmd_opt audit_export_opts[] = {
	CONFIG, AUDIT_DB,
	{ "-f", "--follow", V_NONE, NULL },
	AUDIT_SINCE,
	{ NULL, "--cursor", V_FILE, NULL },
	{ NULL, "--format", V_ENUM, "json|ocsf" },
	AUDIT_SANDBOX, AUDIT_UNTIL, AUDIT_FILTERS,
	END
};

static const struct cmd_opt audit_stats_opts[] = {
	CONFIG, AUDIT_DB, AUDIT_SANDBOX, AUDIT_SINCE, AUDIT_UNTIL,
	AUDIT_PUBKEY,
	{ NULL, "--format", V_ENUM, "text|json" },
	END
};

static const struct cmd_opt audit_ship_opts[] = {
	{ NULL, "--init", V_NONE, NULL },
	CONFIG,
	{ NULL, "--store", V_TEXT, NULL },
	END
};

static const struct cmd_opt sandbox_up_opts[] = {
	CONFIG,
	{ NULL, "--policy", V_TEXT, NULL },
	{ NULL, "--runtime", V_ENUM, "runsc|crun" },
	{ NULL, "--rootfs", V_DIR, NULL },
	{ NULL, "--id", V_TEXT, NULL },
	{ NULL, "--workspace", V_DIR, NULL },
	{ NULL, "--env", V_TEXT, NULL },
	{ NULL, "--memory", V_TEXT, NULL },
	{ NULL, "--cpus", V_TEXT, NULL },
	{ NULL, "--pids", V_TEXT, NULL },
	{ NULL, "--publish", V_TEXT, NULL },
	{ NULL, "--public", V_NONE, NULL },
	{ NULL, "--ttl", V_TEXT, NULL },
	END
};

static const struct cmd_opt sandbox_ls_opts[] = {
	CONFIG,
	{ NULL, "--format", V_ENUM, "table|json" },
	END
};

static const struct cmd_opt sandbox_logs_opts[] = {
	CONFIG,
	{ "-f", "--follow", V_NONE, NULL },
	END
};

/* The order is the completion's order; sub NULL: the command alone. */
static const struct cmd_entry {
	const char		*cmd;
	const char		*sub;
	const struct cmd_opt	*opts;
} cmds[] = {
	{ "serve", NULL, serve_opts },
	{ "status", NULL, admin_client_opts },
	{ "reload", NULL, admin_client_opts },
	{ "approvals", NULL, admin_client_opts },
	{ "approve", NULL, approve_opts },
	{ "deny", NULL, deny_opts },
	{ "top", NULL, top_opts },
	{ "policy", "check", config_only },
	{ "policy", "explain", policy_explain_opts },
	{ "policy", "suggest", policy_suggest_opts },
	{ "policy", "replay", policy_replay_opts },
	{ "ca", "init", ca_init_opts },
	{ "vault", "set", config_only },
	{ "vault", "list", config_only },
	{ "vault", "rm", config_only },
	{ "vault", "rotate", config_only },
	{ "audit", NULL, audit_opts },
	{ "audit", "verify", audit_verify_opts },
	{ "audit", "export", audit_export_opts },
	{ "audit", "stats", audit_stats_opts },
	{ "audit", "ship", audit_ship_opts },
	{ "sandbox", "run", sandbox_up_opts },
	{ "sandbox", "create", sandbox_up_opts },
	{ "sandbox", "exec", config_only },
	{ "sandbox", "ls", sandbox_ls_opts },
	{ "sandbox", "rm", config_only },
	{ "sandbox", "logs", sandbox_logs_opts },
	{ "version", NULL, no_opts },
	{ "help", NULL, no_opts },
};

#define N_CMDS	(sizeof(cmds) / sizeof(cmds[0]))

static const char *const kind_names[] = {
	"none", "file", "dir", "enum", "text"
};

/* Is cmds[i] the first entry of its command? */
static int
first_of(size_t i)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (strcmp(cmds[j].cmd, cmds[i].cmd) == 0)
			return 0;
	return 1;
}

static int
same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Did an entry before cmds[i], or an option before o, name o with a value? */
static int
valued_before(size_t i, const struct cmd_opt *o)
{
	const struct cmd_opt *p;
	size_t j;

	for (j = 0; j <= i; j++)
		for (p = cmds[j].opts; (j < i || p != o) &&
		    (p->s != NULL || p->l != NULL);
		    p++)
			if (p->kind != V_NONE && (same(p->s, o->s) ||
			    same(p->l, o->l)))
				return 1;
	return 0;
}

/* The words of list ("a|b") separated by spaces. */
static void
put_words(FILE *f, const char *list)
{
	for (; *list != '\0'; list++)
		fputc(*list == '|' ? ' ' : *list, f);
}

/* One tab-separated line per option: CMD SUB OPTION KIND VALUES. */
static void
print_table(FILE *f)
{
	const struct cmd_opt *o;
	size_t i;

	for (i = 0; i < N_CMDS; i++) {
		fprintf(f, "%s\t%s\t--help\tnone\t-\n", cmds[i].cmd,
		    cmds[i].sub ? cmds[i].sub : "-");
		for (o = cmds[i].opts; o->s != NULL || o->l != NULL; o++) {
			const char *names[2] = { o->s, o->l };
			int k;

			for (k = 0; k < 2; k++)
				if (names[k] != NULL)
					fprintf(f, "%s\t%s\t%s\t%s\t%s\n",
					    cmds[i].cmd, cmds[i].sub ?
					    cmds[i].sub : "-", names[k],
					    kind_names[o->kind], o->values ?
					    o->values : "-");
		}
	}
}

/* The case arms for one (sub)command's options that take a value. */
static void
print_values(FILE *f, const struct cmd_entry *e)
{
	const struct cmd_opt *o;
	const char *sub = e->sub ? e->sub : "";

	for (o = e->opts; o->s != NULL || o->l != NULL; o++) {
		if (o->kind == V_NONE)
			continue;
		fputc('\t', f);
		if (o->s != NULL)
			fprintf(f, "\"%s %s|%s\"%s", e->cmd, sub, o->s,
			    o->l ? " | " : "");
		if (o->l != NULL)
			fprintf(f, "\"%s %s|%s\"", e->cmd, sub, o->l);
		fputs(")\n\t\t", f);
		switch (o->kind) {
		case V_FILE:
			fputs("_filedir", f);
			break;
		case V_DIR:
			fputs("_filedir -d", f);
			break;
		case V_ENUM:
			fputs("COMPREPLY=($(compgen -W '", f);
			put_words(f, o->values);
			fputs("' -- \"$cur\"))", f);
			break;
		default:
			break;	/* free text: nothing to offer */
		}
		fputs("\n\t\treturn\n\t\t;;\n", f);
	}
}

static void
print_bash(FILE *f)
{
	const struct cmd_opt *o;
	size_t i, j;

	fputs("# bash completion for sandgate(8), generated at build time from\n"
	    "# src/cmd_table.c by `sandgate __complete bash`: do not edit.\n"
	    "# Installed as /usr/share/bash-completion/completions/sandgate.\n"
	    "\n_sandgate()\n{\n"
	    "\tlocal cur prev words cword\n"
	    "\t_init_completion || return\n\n", f);
	/* the options that take a value: their value is no operand */
	fputs("\tlocal valued=\" ", f);
	for (i = 0; i < N_CMDS; i++)
		for (o = cmds[i].opts; o->s != NULL || o->l != NULL; o++)
			if (o->kind != V_NONE && !valued_before(i, o))
				fprintf(f, "%s%s%s ", o->s ? o->s : "",
				    o->s && o->l ? " " : "", o->l ? o->l : "");
	fputs("\"\n", f);
	/* each command's subcommands */
	fputs("\tlocal cmds=\"", f);
	for (i = 0; i < N_CMDS; i++)
		if (first_of(i))
			fprintf(f, "%s%s", i ? " " : "", cmds[i].cmd);
	fputs("\"\n\tlocal -A subs=(", f);
	for (i = 0; i < N_CMDS; i++) {
		if (!first_of(i))
			continue;
		fprintf(f, "\n\t    [%s]=\"", cmds[i].cmd);
		for (j = i; j < N_CMDS; j++)
			if (strcmp(cmds[j].cmd, cmds[i].cmd) == 0 &&
			    cmds[j].sub != NULL)
				fprintf(f, "%s ", cmds[j].sub);
		fputs("\"", f);
	}
	fputs(")\n\n", f);
	fputs("\tlocal cmd=\"\" sub=\"\" i skip=0 n=0\n"
	    "\tfor ((i = 1; i < cword; i++)); do\n"
	    "\t\tif ((skip)); then skip=0; continue; fi\n"
	    "\t\tcase ${words[i]} in\n"
	    "\t\t--) return ;;\t# what follows is the sandboxed command's\n"
	    "\t\t-*=*) ;;\n"
	    "\t\t-*) [[ $valued == *\" ${words[i]} \"* ]] && skip=1 ;;\n"
	    "\t\t*)\n"
	    "\t\t\tif [[ -z $cmd ]]; then\n"
	    "\t\t\t\tcmd=${words[i]}\n"
	    "\t\t\telif [[ -z $sub && \" ${subs[$cmd]} \" == *\" ${words[i]} \"* ]]; then\n"
	    "\t\t\t\tsub=${words[i]}\n"
	    "\t\t\tfi\n"
	    "\t\t\tn=$((n + 1))\n"
	    "\t\t\t;;\n"
	    "\t\tesac\n"
	    "\tdone\n\n", f);
	/* an option's value */
	fputs("\tcase \"$cmd $sub|$prev\" in\n"
	    "\t\" |-c\" | \" |--config\")\n\t\t_filedir\n\t\treturn\n\t\t;;\n", f);
	for (i = 0; i < N_CMDS; i++)
		print_values(f, &cmds[i]);
	fputs("\tesac\n\n", f);
	/* operands: commands, subcommands; help's are commands */
	fputs("\tif [[ -z $cmd ]]; then\n"
	    "\t\t[[ $cur == -* ]] && COMPREPLY=($(compgen -W '--help "
	    "--version' -- \"$cur\")) ||\n"
	    "\t\t    COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\"))\n"
	    "\t\treturn\n"
	    "\tfi\n"
	    "\tif [[ $cmd == help && $cur != -* ]]; then\n"
	    "\t\tif ((n == 1)); then\n"
	    "\t\t\tCOMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\"))\n"
	    "\t\telif ((n == 2)); then\n"
	    "\t\t\tCOMPREPLY=($(compgen -W \"${subs[${words[cword - 1]}]}\" "
	    "-- \"$cur\"))\n"
	    "\t\tfi\n"
	    "\t\treturn\n"
	    "\tfi\n\n", f);
	/* options */
	fputs("\tlocal opts=\"\"\n\tcase \"$cmd $sub\" in\n", f);
	for (i = 0; i < N_CMDS; i++) {
		fprintf(f, "\t\"%s %s\") opts=\"", cmds[i].cmd,
		    cmds[i].sub ? cmds[i].sub : "");
		for (o = cmds[i].opts; o->s != NULL || o->l != NULL; o++)
			fprintf(f, "%s%s%s ", o->s ? o->s : "",
			    o->s && o->l ? " " : "", o->l ? o->l : "");
		fputs("-h --help\" ;;\n", f);
	}
	fputs("\tesac\n"
	    "\tif [[ $cur == -* ]]; then\n"
	    "\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
	    "\telif [[ -z $sub && -n ${subs[$cmd]} ]]; then\n"
	    "\t\tCOMPREPLY=($(compgen -W \"${subs[$cmd]}\" -- \"$cur\"))\n"
	    "\tfi\n"
	    "} &&\n"
	    "\tcomplete -F _sandgate sandgate\n", f);
}

int
cmd_table_has(const char *help, const char *opt)
{
	const struct cmd_opt *o;
	const char *sp = strchr(help, ' ');
	size_t i, clen = sp ? (size_t)(sp - help) : strlen(help);

	for (i = 0; i < N_CMDS; i++) {
		if (strlen(cmds[i].cmd) != clen ||
		    strncmp(cmds[i].cmd, help, clen) != 0 ||
		    (sp != NULL && !same(cmds[i].sub, sp + 1)))
			continue;
		for (o = cmds[i].opts; o->s != NULL || o->l != NULL; o++)
			if (same(o->s, opt) || same(o->l, opt))
				return 1;
	}
	return 0;
}

/* sandgate __complete bash|table: hidden, for the build and the tests. */
int
cmd_complete(int argc, char *argv[])
{
	if (argc == 2 && strcmp(argv[1], "bash") == 0)
		print_bash(stdout);
	else if (argc == 2 && strcmp(argv[1], "table") == 0)
		print_table(stdout);
	else {
		/* not cmd_usage_error: cmd_common.c calls this file */
		say_err("__complete: bash or table");
		return EXIT_USAGE;
	}
	return fflush(stdout) == EOF ? 1 : 0;
}
