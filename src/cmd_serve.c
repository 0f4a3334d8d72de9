/*
 * `sandgate serve`: the options, the config and policies, the state
 * directory; then src/daemon/daemon.c runs the gateway in the foreground
 * until SIGTERM.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/util.h"
#include "daemon/daemon.h"
#include "sandgate.h"

static const char serve_usage[] =
    "usage: sandgate serve [-c FILE] [-d] [--log-level LEVEL]\n"
    "                      [--log-format text|json]\n"
    "  Run the gateway in the foreground until SIGTERM or SIGINT; SIGHUP\n"
    "  (or POST /v1/reload) reloads the policies. Under systemd, Type=notify:\n"
    "  READY=1 once every listener is bound (sd_notify(3)).\n"
    "  -c FILE   config file (default: ./sandgate.yaml, /etc/sandgate/sandgate.yaml,\n"
    "            else built-in defaults)\n"
    "  -d        debug logging (--log-level debug)\n"
    "  --log-level debug|info|warn|error\n"
    "            the least severe lines written (default: the config's\n"
    "            log_level, else info)\n"
    "  --log-format text|json\n"
    "            json: one object per line (default: the config's\n"
    "            log_format, else text)\n";

int
cmd_serve(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	const char *opt, *val, *cfg_path = NULL;
	char sum[256], why[512];
	enum log_level level = LOG_LVL_INFO;
	enum log_format format = LOG_FMT_TEXT;
	int rc, have_format = 0, have_level = 0;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config|log-level|log-format",
	    &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "d") == 0 || strcmp(opt, "debug") == 0)
			level = LOG_LVL_DEBUG, have_level = 1;
		else if (strcmp(opt, "log-level") == 0) {
			if (log_level_parse(val, &level) == -1)
				return cmd_bad_value(&a, "debug|info|warn|error",
				    val);
			have_level = 1;
		} else if (strcmp(opt, "log-format") == 0) {
			if (log_format_parse(val, &format) == -1)
				return cmd_bad_value(&a, "text|json", val);
			have_format = 1;
		}
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(serve_usage, stdout);
			return 0;
		} else
			return cmd_bad_option(&a, opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(serve_usage, "serve: unexpected argument: %s",
		    a.ops[0]);

	/* Options first: the config's own diagnostics already in the format. */
	if (have_format)
		log_set_format(format);
	if (have_level)
		log_set_level(level);
	/* Secrets will live in this process: no core dumps, no ptrace by peers. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	if (util_mkdir_p(cfg->state_dir) == -1) {
		rc = cmd_error("cannot create state directory %s: %s",
		    cfg->state_dir, strerror(errno));
		config_free(cfg);
		return rc;
	}
	config_free(cfg);
	if (cmd_load(cfg_path, &cfg, &pol) == -1)
		return 1;
	/* the config's log_level and log_format, where no option said */
	if (!have_format && cfg->log_format != -1)
		log_set_format((enum log_format)cfg->log_format);
	if (!have_level && cfg->log_level != -1)
		log_set_level((enum log_level)cfg->log_level);
	log_info("config: %s", cfg->file ? cfg->file : "built-in defaults");
	policy_summary(pol, sum, sizeof(sum));
	log_info("policy: %s", sum);
	/* src/daemon/daemon.c from here: the keeper, the gateway, the drop. */
	if ((rc = daemon_run(cfg, pol, why, sizeof(why))) != 0)
		return cmd_error("%s", why);
	return 0;
}
