/*
 * sandgate's command line: dispatches git-style subcommands and owns the
 * shared argument helpers and the usage text.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_store.h"
#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "sandgate.h"

static const char usage_text[] =
    "usage: sandgate COMMAND [ARGS]\n"
    "\n"
    "The gateway:\n"
    "  serve [-c FILE] [-d]              run the gateway in the foreground\n"
    "Policies:\n"
    "  policy check [-c FILE]            validate the config and every policy file\n"
    "  policy explain [-c FILE] --sandbox ID [--method M] [--path P]\n"
    "         [--format text|json] HOST[:PORT]|IP[:PORT]\n"
    "                                    print the decision for a destination\n"
    "  policy suggest [-c FILE] --sandbox ID [--since T] [--until T]\n"
    "                                    a policy allowing what was denied or reported\n"
    "The CA and the vault:\n"
    "  ca init [-c FILE] [--force]       create the interception CA\n"
    "  vault set NAME [-c FILE]          store a secret read from stdin\n"
    "  vault list [-c FILE]              names, credentials, times; never values\n"
    "  vault rm NAME [-c FILE]           remove a secret\n"
    "  vault rotate NAME [-c FILE]       replace a secret (new value from stdin)\n"
    "The audit log:\n"
    "  audit [-c FILE] [--sandbox ID] [--since T] [--until T] [--decision D]\n"
    "        [--kind K] [--host GLOB] [--credential C] [--limit N] [--asc]\n"
    "        [--format table|json|csv|ocsf]\n"
    "                                    query the audit log (newest first)\n"
    "  audit verify [-c FILE] [--pubkey FILE]...\n"
    "                                    check the hash chain and the signatures\n"
    "  audit export [-c FILE] [--follow] [--since T] [--cursor FILE]\n"
    "        [--format json|ocsf]        rows as JSON lines (or OCSF events), for shippers\n"
    "  audit stats [-c FILE] [--since T] [--until T] [--sandbox ID]\n"
    "        [--format text|json]        top destinations, denials, credentials, chain\n"
    "  audit --store URL [--gateway NAME] [filters]\n"
    "                                    query a fleet's shared store (PostgreSQL)\n"
    "  audit verify --store URL [--gateway NAME] [--pubkey FILE]...\n"
    "                                    check every gateway's chain in the store\n"
    "  audit ship --init [-c FILE] [--store URL]\n"
    "                                    create the fleet store's schema\n"
    "Sandboxes (as root, with the gateway running):\n"
    "  sandbox run [OPTIONS] -- CMD [ARG...]\n"
    "                                    run CMD in a new sandbox, in the foreground\n"
    "  sandbox create [OPTIONS] [-- CMD [ARG...]]\n"
    "                                    start a detached sandbox; prints its id\n"
    "  sandbox exec ID -- CMD [ARG...]   run CMD in a live sandbox\n"
    "  sandbox ls [--format table|json]  list the sandboxes\n"
    "  sandbox rm ID...                  stop sandboxes and remove what they made\n"
    "  sandbox logs [-f] ID              the output of a created sandbox\n"
    "Other:\n"
    "  version                           print the version\n"
    "  help [COMMAND [SUBCOMMAND]]       print the usage of a command\n"
    "\n"
    "sandgate help COMMAND and sandgate COMMAND --help print a command's options.\n"
    "Without -c: ./sandgate.yaml, then /etc/sandgate/sandgate.yaml, then the\n"
    "built-in defaults. Exit status: 0 success, 1 failure, 2 usage error.\n"
    "Manual: sandgate(8), sandgate.yaml(5), sandgate-policy(5).\n";

static const char version_usage[] =
    "usage: sandgate version\n"
    "  Print the version (sandgate X.Y.Z) and exit 0.\n";

static const char help_usage[] =
    "usage: sandgate help [COMMAND [SUBCOMMAND]]\n"
    "  Without a command: every command in one list. With one: its usage and\n"
    "  options, as sandgate COMMAND [SUBCOMMAND] --help prints them.\n";

int
cmd_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sandgate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int
cmd_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("sandgate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage != NULL)
		fputs(usage, stderr);
	return EXIT_USAGE;
}

void
cmd_args_init(struct cmd_args *a, int argc, char *argv[])
{
	memset(a, 0, sizeof(*a));
	a->argc = argc;
	a->argv = argv;
	a->i = 1;
}

/* Is name one of the '|'-separated words of list? */
static int
in_list(const char *list, const char *name, size_t len)
{
	const char *p = list;

	while (p != NULL && *p != '\0') {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);
		if (n == len && strncmp(p, name, len) == 0)
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

const char *
cmd_args_next(struct cmd_args *a, const char *with_value, const char **val)
{
	static char name[64];
	const char *arg, *eq;
	size_t len;

	*val = NULL;
	while (a->i < a->argc) {
		arg = a->argv[a->i++];
		if (a->dashdash || arg[0] != '-' || arg[1] == '\0') {
			if (a->n_ops >= 16) {
				a->bad = arg;
				return "?";
			}
			a->ops[a->n_ops++] = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			a->dashdash = 1;
			continue;
		}
		arg += arg[1] == '-' ? 2 : 1;
		eq = strchr(arg, '=');
		len = eq ? (size_t)(eq - arg) : strlen(arg);
		if (len == 0 || len >= sizeof(name)) {
			a->bad = a->argv[a->i - 1];
			return "?";
		}
		memcpy(name, arg, len);
		name[len] = '\0';
		if (in_list(with_value, name, len)) {
			if (eq != NULL)
				*val = eq + 1;
			else if (a->i < a->argc)
				*val = a->argv[a->i++];
			else {
				a->bad = a->argv[a->i - 1];
				return "?";
			}
		} else if (eq != NULL) {
			a->bad = a->argv[a->i - 1];
			return "?";
		}
		return name;
	}
	return NULL;
}

int
cmd_load(const char *cfg_path, struct config **cfgp, struct policy **polp)
{
	struct diag d;
	struct config *cfg;
	struct policy *pol = NULL;
	const char *path = config_find(cfg_path);

	diag_init(&d);
	cfg = config_load(path, &d);
	if (cfg != NULL && polp != NULL)
		pol = policy_load(cfg, &d);
	if (cfg == NULL || (polp != NULL && pol == NULL)) {
		/* a file that cannot be read at all: one line, as any error */
		if (d.n == 1 && d.v[0].line == 0)
			fprintf(stderr, "sandgate: %s: %s\n", d.v[0].file,
			    d.v[0].msg);
		else {
			diag_print(&d, stderr);
			fprintf(stderr, "sandgate: %zu error%s\n", d.n,
			    d.n == 1 ? "" : "s");
		}
		diag_free(&d);
		if (cfg != NULL)
			config_free(cfg);
		return -1;
	}
	diag_free(&d);
	*cfgp = cfg;
	if (polp != NULL)
		*polp = pol;
	return 0;
}

int
cmd_wants_help(int argc, char *argv[])
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

static int
cmd_version(int argc, char *argv[])
{
	if (cmd_wants_help(argc, argv)) {
		fputs(version_usage, stdout);
		return 0;
	}
	if (argc > 1)
		return cmd_usage_error(version_usage, "version: unexpected "
		    "argument: %s", argv[1]);
	printf("sandgate %s\n", SANDGATE_VERSION);
	return 0;
}

static int cmd_help(int argc, char *argv[]);

static const struct {
	const char	*name;
	int		(*fn)(int, char *[]);
} commands[] = {
	{ "serve", cmd_serve }, { "policy", cmd_policy },
	{ "audit", cmd_audit }, { "ca", cmd_ca }, { "vault", cmd_vault },
	{ "sandbox", cmd_sandbox }, { "version", cmd_version },
	{ "help", cmd_help },
};

/*
 * help COMMAND [SUBCOMMAND] is COMMAND [SUBCOMMAND] --help: one place
 * knows each command's usage, and both forms print the same page.
 */
static int
cmd_help(int argc, char *argv[])
{
	char *sub[4];
	size_t i;

	if (argc < 2) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc > 3)
		return cmd_usage_error(help_usage, "help: give a command and at "
		    "most one subcommand");
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		fputs(help_usage, stdout);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			break;
	if (i == sizeof(commands) / sizeof(commands[0]))
		return cmd_usage_error(NULL, "help: unknown command: %s "
		    "(sandgate help lists them)", argv[1]);
	sub[0] = argv[1];
	sub[1] = argc > 2 ? argv[2] : (char *)"--help";
	sub[2] = argc > 2 ? (char *)"--help" : NULL;
	sub[3] = NULL;
	return commands[i].fn(argc > 2 ? 3 : 2, sub);
}

void
cmd_hoist_config(int argc, char *argv[])
{
	char *opt, *file;

	if (argc < 4 || (strcmp(argv[1], "-c") != 0 &&
	    strcmp(argv[1], "--config") != 0) || argv[3][0] == '-')
		return;
	opt = argv[1];
	file = argv[2];
	argv[1] = argv[3];
	argv[2] = opt;
	argv[3] = file;
}

int
main(int argc, char *argv[])
{
	static const struct config_checks checks = { audit_store_url_ok };
	size_t i;

	log_init(LOG_LVL_INFO, "sandgate");
	config_set_checks(&checks);
	if (argc < 2)
		return cmd_usage_error(usage_text, "no command given");
	cmd_hoist_config(argc, argv);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cmd_help(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	return cmd_usage_error(NULL, "unknown command: %s (sandgate help lists "
	    "them)", argv[1]);
}
