/*
 * What the command-line files (src/main.c, src/cmd_*.c) share: the
 * subcommands' entry points and the small argument helpers they all use.
 */
#ifndef SG_SANDGATE_H
#define SG_SANDGATE_H

#include <stdio.h>

#include <jansson.h>

#define EXIT_USAGE	2

/* Each returns the process exit status: 0, 1 (failure) or 2 (usage). */
int	cmd_serve(int argc, char *argv[]);
int	cmd_policy(int argc, char *argv[]);
int	cmd_policy_suggest(int argc, char *argv[]);	/* policy suggest ... */
int	cmd_policy_replay(int argc, char *argv[]);	/* policy replay ... */
int	cmd_audit(int argc, char *argv[]);
struct audit_filter;
/* audit stats: db and public key paths, the filter's sandbox/since/until. */
int	cmd_audit_stats(const char *db_path, const char *pub_path,
	    int pub_given, const struct audit_filter *, const char *since,
	    int json);
int	cmd_ca(int argc, char *argv[]);
int	cmd_vault(int argc, char *argv[]);
int	cmd_sandbox(int argc, char *argv[]);
int	cmd_status(int argc, char *argv[]);	/* cmd_status.c */
int	cmd_reload(int argc, char *argv[]);	/* cmd_status.c */
int	cmd_approvals(int argc, char *argv[]);	/* cmd_approvals.c */
int	cmd_approve(int argc, char *argv[]);	/* cmd_approvals.c */
int	cmd_deny(int argc, char *argv[]);	/* cmd_approvals.c */
int	cmd_top(int argc, char *argv[]);	/* top: the live console */

/*
 * Is -h or --help among argv[1..] before any "--"? Then the dispatcher
 * prints the usage of the (sub)command it names and exits 0.
 */
int	cmd_wants_help(int argc, char *argv[]);
/*
 * Options may stand before the (sub)command too: "-c FILE CMD ..." in
 * argv[1..3] becomes "CMD -c FILE ...", for the command's own scanner.
 */
void	cmd_hoist_config(int argc, char *argv[]);
/*
 * "sandgate: " + message on stderr, one line; returns 1 (or 2 for
 * usage_error). A usage error never dumps the usage: the line names what
 * was wrong, `sandgate help CMD` prints the rest. usage is kept for the
 * callers' sake and ignored.
 */
int	cmd_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int	cmd_usage_error(const char *usage, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/*
 * Option scanner that lets options stand before or after operands:
 * returns the option name (without dashes) and sets *val for options in
 * with_value ("c|sandbox|method"), or returns NULL when argv is exhausted;
 * operands are collected into ops (up to max). Returns "?" on a missing
 * value (or a value given to a flag, too many operands): why says which.
 * opt is the option as the user wrote it, dashes kept, without "=value".
 */
struct cmd_args {
	int		 argc;
	char		**argv;
	int		 i;
	int		 dashdash;
	const char	*ops[16];
	int		 n_ops;
	const char	*bad;		/* the offending argument when "?" is returned */
	const char	*why;		/* what is wrong with it */
	const char	*help;		/* "policy check": the usage error's hint;
					   NULL: argv[0] */
	char		 opt[72];	/* the current option as written */
};
void		 cmd_args_init(struct cmd_args *, int argc, char *argv[]);
const char	*cmd_args_next(struct cmd_args *, const char *with_value,
		    const char **val);
/*
 * The usage errors of an option, one line each, exit status 2:
 *   cmd_bad_option: after "?" "sandgate: -c: missing value", else
 *     "sandgate: --frobnicate: unknown option (sandgate help audit)";
 *   cmd_bad_value: "sandgate: --format: expected table|json, got xml";
 *   cmd_opt_error: "sandgate: --limit: " + the message.
 */
int		 cmd_bad_option(const struct cmd_args *, const char *opt);
/* A string from the gateway on a terminal: control bytes as '?'. */
void		 cmd_put_clean(FILE *fp, const char *s);
/* o's string member key, or "" (never NULL). */
const char	*cmd_json_str(json_t *o, const char *key);
/* The same with control bytes as '?', for a terminal (8 such at a time). */
const char	*cmd_json_clean(json_t *o, const char *key);
/* s as a JSON string on stdout (quotes, escapes), or null for NULL. */
void		 cmd_json_string(const char *s);
/* *out (to free): sock, else cfg_path's admin_socket; 0, or 1 with an error said. */
int		 cmd_admin_socket(const char *cfg_path, const char *sock,
		    const char *cmd, char **out);
int		 cmd_bad_value(const struct cmd_args *, const char *expected,
		    const char *got);
int		 cmd_opt_error(const struct cmd_args *, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
/* Is s one of the words of list ("table|json|csv")? */
int		 cmd_in_list(const char *list, const char *s);
/* The command table (src/cmd_table.c): completion and the option audit. */
int		 cmd_complete(int argc, char *argv[]);
/* Does the table give (sub)command help ("policy check") the option opt? */
int		 cmd_table_has(const char *help, const char *opt);
/*
 * Load config (with the search order of sandgate(8)) and policy, printing
 * diagnostics.
 */
struct config;
struct policy;
int		 cmd_load(const char *cfg_path, struct config **, struct policy **);

#endif
