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
    "  serve [-c FILE] [-d] [--log-level debug|info|warn|error]\n"
    "        [--log-format text|json]    run the gateway in the foreground\n"
    "  status [-c FILE] [--json]         one screen of the running gateway\n"
    "  reload [-c FILE]                  reload its policies; errors as FILE:LINE:COL\n"
    "  approvals [-c FILE] [--json]      questions of mode: ask that requests wait on\n"
    "  approve ID [--for D] [--scope S]  let the requests held on question ID go on\n"
    "  deny ID [--for D] [--scope S]     refuse them (approval-denied)\n"
    "Policies:\n"
    "  policy check [-c FILE]            validate the config and every policy file\n"
    "  policy explain [-c FILE] --sandbox ID [--method M] [--path P]\n"
    "         [--format text|json] HOST[:PORT]|IP[:PORT]\n"
    "                                    print the decision for a destination\n"
    "  policy suggest [-c FILE] --sandbox ID [--since T] [--until T]\n"
    "                                    a policy allowing what was denied or reported\n"
    "  policy replay [-c FILE] [--since T] [--sandbox ID] [--store URL]\n"
    "        [--fail-on WHEN] [--format text|json] CANDIDATE...\n"
    "                                    which logged decisions a candidate policy changes\n"
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
    "The console:\n"
    "  top [-c FILE] [--interval S] [--once]\n"
    "                                    live sandboxes and decisions (ncurses)\n"
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
	{ "sandbox", cmd_sandbox }, { "status", cmd_status },
	{ "reload", cmd_reload }, { "top", cmd_top },
	{ "approvals", cmd_approvals }, { "approve", cmd_approve },
	{ "deny", cmd_deny },
	{ "version", cmd_version },
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
	/* hidden: the build's completion script, the tests' option table */
	if (strcmp(argv[1], "__complete") == 0)
		return cmd_complete(argc - 1, argv + 1);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	return cmd_usage_error(NULL, "unknown command: %s (sandgate help lists "
	    "them)", argv[1]);
}
