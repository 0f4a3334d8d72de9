/*
 * What every command's file uses (src/sandgate.h): errors and usage
 * errors, the option reader, loading the config and its policies, -c
 * before the subcommand. Below src/main.c, which only dispatches.
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

int
cmd_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay_err(fmt, ap);
	va_end(ap);
	return 1;
}

int
cmd_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	(void)usage;	/* one line: `sandgate help CMD` prints the usage */
	va_start(ap, fmt);
	vsay_err(fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

int
cmd_bad_option(const struct cmd_args *a, const char *opt)
{
	const char *hint = a->help ? a->help : a->argv[0];

	if (strcmp(opt, "?") == 0 && a->why != NULL && (strcmp(a->why,
	    "takes no value") != 0 || cmd_table_has(hint, a->opt)))
		say_err("%s: %s", a->opt[0] != '\0' ? a->opt : a->bad, a->why);
	else
		say_err("%s: unknown option (sandgate help %s)", a->opt, hint);
	return EXIT_USAGE;
}

int
cmd_bad_value(const struct cmd_args *a, const char *expected, const char *got)
{
	char esc[128];

	say_err("%s: expected %s, got %s", a->opt, expected,
	    log_escape(got, strlen(got), esc, sizeof(esc)));
	return EXIT_USAGE;
}

int
cmd_opt_error(const struct cmd_args *a, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sandgate: %s: ", a->opt);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
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

int
cmd_in_list(const char *list, const char *s)
{
	return in_list(list, s, strlen(s));
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
				a->why = "too many arguments";
				a->opt[0] = '\0';
				return "?";
			}
			a->ops[a->n_ops++] = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			a->dashdash = 1;
			continue;
		}
		eq = strchr(arg, '=');
		len = eq ? (size_t)(eq - arg) : strlen(arg);
		snprintf(a->opt, sizeof(a->opt), "%.*s",
		    (int)(len < sizeof(a->opt) ? len : sizeof(a->opt) - 1), arg);
		arg += arg[1] == '-' ? 2 : 1;
		len = eq ? (size_t)(eq - arg) : strlen(arg);
		if (len == 0 || len >= sizeof(name)) {
			a->bad = a->argv[a->i - 1];
			a->why = "unknown option";
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
				a->why = "missing value";
				return "?";
			}
		} else if (eq != NULL) {
			a->bad = a->argv[a->i - 1];
			a->why = "takes no value";
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

void
cmd_put_clean(FILE *fp, const char *s)
{
	for (; s != NULL && *s != '\0'; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, fp);
}

const char *
cmd_json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

const char *
cmd_json_clean(json_t *o, const char *key)
{
	static char ring[8][1024];
	static unsigned next;
	const char *s = cmd_json_str(o, key);
	char *out = ring[next++ % 8];
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < sizeof(ring[0]); i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	out[i] = '\0';
	return out;
}

void
cmd_json_string(const char *s)
{
	if (s == NULL) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The admin socket: --socket, else the config's admin_socket. */
int
cmd_admin_socket(const char *cfg_path, const char *sock, const char *cmd,
    char **out)
{
	struct config *cfg;

	if (sock != NULL) {
		*out = strdup(sock);
		return *out != NULL ? 0 : cmd_error("%s: out of memory", cmd);
	}
	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (cfg->admin_socket == NULL) {
		config_free(cfg);
		return cmd_error("%s: the config sets no admin_socket", cmd);
	}
	*out = strdup(cfg->admin_socket);
	config_free(cfg);
	return *out != NULL ? 0 : cmd_error("%s: out of memory", cmd);
}
