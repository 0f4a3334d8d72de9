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
    "usage: sandgate serve [-c FILE] [-d]\n"
    "  Run the gateway in the foreground until SIGTERM or SIGINT; SIGHUP\n"
    "  (or POST /v1/reload) reloads the policies. Under systemd, Type=notify:\n"
    "  READY=1 once every listener is bound (sd_notify(3)).\n"
    "  -c FILE   config file (default: ./sandgate.yaml, /etc/sandgate/sandgate.yaml,\n"
    "            else built-in defaults)\n"
    "  -d        debug logging\n";

int
cmd_serve(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	const char *opt, *val, *cfg_path = NULL;
	char sum[256], why[512];
	int rc;

	cmd_args_init(&a, argc, argv);
	while ((opt = cmd_args_next(&a, "c|config", &val)) != NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			cfg_path = val;
		else if (strcmp(opt, "d") == 0 || strcmp(opt, "debug") == 0)
			log_set_level(LOG_LVL_DEBUG);
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0) {
			fputs(serve_usage, stdout);
			return 0;
		} else
			return cmd_usage_error(serve_usage, "serve: bad option: %s",
			    a.bad ? a.bad : opt);
	}
	if (a.n_ops > 0)
		return cmd_usage_error(serve_usage, "serve: unexpected argument: %s",
		    a.ops[0]);

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
	log_info("config: %s", cfg->file ? cfg->file : "built-in defaults");
	policy_summary(pol, sum, sizeof(sum));
	log_info("policy: %s", sum);
	/* src/daemon/daemon.c from here: the keeper, the gateway, the drop. */
	if ((rc = daemon_run(cfg, pol, why, sizeof(why))) != 0)
		return cmd_error("%s", why);
	return 0;
}
