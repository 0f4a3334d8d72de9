/*
 * sandgate's command line: dispatches git-style subcommands and owns the
 * shared argument helpers and the usage text.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "sandgate.h"

static const char usage_text[] =
    "usage: sandgate COMMAND [ARGS]\n"
    "\n"
    "  serve [-c FILE] [-d]            run the gateway in the foreground\n"
    "  policy check [-c FILE]          validate the config and every policy file\n"
    "  policy explain [-c FILE] --sandbox ID [--method M] [--path P]\n"
    "                 [--format text|json] HOST[:PORT]|IP[:PORT]\n"
    "                                  print the decision for a destination\n"
    "  policy suggest [-c FILE] --sandbox ID [--since T]\n"
    "                                  a policy allowing what was denied or reported\n"
    "  audit [--sandbox ID] [--since T] [--until T] [--decision D] [--kind K]\n"
    "        [--host GLOB] [--credential C] [--limit N] [--asc]\n"
    "        [--format table|json|csv]  query the audit log (newest first)\n"
    "  audit verify [--pubkey FILE]    check the audit hash chain and the\n"
    "                                  signatures of its checkpoints\n"
    "  audit export [--follow] [--since T] [--cursor FILE] [--format json|ocsf]\n"
    "                                  stream new rows as JSON lines (or OCSF events)\n"
    "  audit stats [--since T] [--sandbox ID] [--format text|json]\n"
    "                                  top destinations, denials, credentials, chain\n"
    "  ca init [-c FILE] [--force]     create the interception CA\n"
    "  vault set NAME [-c FILE]        store a secret read from stdin\n"
    "  vault list|rm NAME|rotate NAME  manage secrets (values are never shown)\n"
    "  sandbox run [--policy P] [--runtime runsc|crun] [--rootfs DIR|host]\n"
    "              [--id ID] [--workspace DIR] [--env K=V]... [--memory 512M]\n"
    "              [--cpus 1] [--pids 256] -- CMD [ARG...]\n"
    "                                  run CMD in a sandbox whose only way out is\n"
    "                                  the gateway (needs root and a running gateway)\n"
    "  version                         print the version\n"
    "  help [COMMAND]                  print usage\n"
    "\n"
    "Without -c, ./sandgate.yaml, then /etc/sandgate/sandgate.yaml, then the\n"
    "built-in defaults are used. See docs/ for the file formats.\n";

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
		diag_print(&d, stderr);
		fprintf(stderr, "sandgate: %zu error%s\n", d.n, d.n == 1 ? "" : "s");
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

static int
cmd_help(const char *topic)
{
	static const char *const topics[] = { "serve", "policy", "audit", "ca",
	    "vault", "sandbox", "version", "help" };
	size_t i;

	if (topic == NULL) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (i = 0; i < sizeof(topics) / sizeof(topics[0]); i++)
		if (strcmp(topic, topics[i]) == 0) {
			fputs(usage_text, stdout);
			return 0;
		}
	return cmd_usage_error(usage_text, "unknown command: %s", topic);
}

int
main(int argc, char *argv[])
{
	const char *cmd;

	log_init(LOG_LVL_INFO, "sandgate");
	if (argc < 2)
		return cmd_usage_error(usage_text, "no command given");
	cmd = argv[1];
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
	    strcmp(cmd, "-h") == 0)
		return cmd_help(argc > 2 ? argv[2] : NULL);
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("sandgate %s\n", SANDGATE_VERSION);
		return 0;
	}
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (strcmp(cmd, "policy") == 0)
		return cmd_policy(argc - 1, argv + 1);
	if (strcmp(cmd, "audit") == 0)
		return cmd_audit(argc - 1, argv + 1);
	if (strcmp(cmd, "ca") == 0)
		return cmd_ca(argc - 1, argv + 1);
	if (strcmp(cmd, "vault") == 0)
		return cmd_vault(argc - 1, argv + 1);
	if (strcmp(cmd, "sandbox") == 0)
		return cmd_sandbox(argc - 1, argv + 1);
	return cmd_usage_error(usage_text, "unknown command: %s", cmd);
}
