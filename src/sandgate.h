/*
 * What the command-line files (src/main.c, src/cmd_*.c) share: the
 * subcommands' entry points and the small argument helpers they all use.
 */
#ifndef SG_SANDGATE_H
#define SG_SANDGATE_H

#define EXIT_USAGE	2

/* Each returns the process exit status: 0, 1 (failure) or 2 (usage). */
int	cmd_serve(int argc, char *argv[]);
int	cmd_policy(int argc, char *argv[]);
int	cmd_policy_suggest(int argc, char *argv[]);	/* policy suggest ... */
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
/* "sandgate: " + message on stderr; returns 1 (or 2 for usage_error). */
int	cmd_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int	cmd_usage_error(const char *usage, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/*
 * Option scanner that lets options stand before or after operands:
 * returns the option name (without dashes) and sets *val for options in
 * with_value ("c|sandbox|method"), or returns NULL when argv is exhausted;
 * operands are collected into ops (up to max). Returns "?" on a missing value.
 */
struct cmd_args {
	int		 argc;
	char		**argv;
	int		 i;
	int		 dashdash;
	const char	*ops[16];
	int		 n_ops;
	const char	*bad;		/* the offending argument when "?" is returned */
};
void		 cmd_args_init(struct cmd_args *, int argc, char *argv[]);
const char	*cmd_args_next(struct cmd_args *, const char *with_value,
		    const char **val);
/*
 * Load config (with the search order of sandgate(8)) and policy, printing
 * diagnostics.
 */
struct config;
struct policy;
int		 cmd_load(const char *cfg_path, struct config **, struct policy **);

#endif
