/*
 * `sandgate serve`: load the config and policies, create the state
 * directory, open everything as root, drop to config `user:`, and run the
 * gateway in the foreground until SIGTERM.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/util.h"
#include "daemon/keeper_proc.h"
#include "daemon/privdrop.h"
#include "proxy/proxy.h"
#include "sandgate.h"
#include "vault/keeper.h"

static const char serve_usage[] =
    "usage: sandgate serve [-c FILE] [-d]\n"
    "  -c FILE   config file (default: ./sandgate.yaml, /etc/sandgate/sandgate.yaml,\n"
    "            else built-in defaults)\n"
    "  -d        debug logging\n";

/*
 * Start the monitor and its keeper, and say hello to the keeper. NULL with
 * *errstr: the keeper's own one line when it could not open its files.
 */
static struct keeper_client *
keeper_connect(const struct config *cfg, const struct policy *pol, int *kpid,
    int *ctl, pid_t *monitor, const char **errstr)
{
	struct keeper_client *kc;
	pid_t pid = 0;
	int fd, status;

	if (keeper_proc_start(cfg, pol, ctl, monitor, errstr) == -1)
		return NULL;
	if (keeper_ctl_recv(*ctl, 10000, &fd, &status, &pid) != KEEPER_CTL_UP) {
		close(*ctl);
		*errstr = "the key keeper did not start";
		return NULL;
	}
	if ((kc = keeper_client_new(fd, errstr)) == NULL) {
		close(*ctl);
		return NULL;
	}
	*kpid = (int)pid;
	return kc;
}

int
cmd_serve(int argc, char *argv[])
{
	struct cmd_args a;
	struct config *cfg;
	struct policy *pol;
	struct proxy *p;
	struct privdrop *pd;
	struct keeper_client *kc;
	int ctl = -1, kpid = 0;
	pid_t monitor = -1;
	const char *opt, *val, *cfg_path = NULL, *err = NULL;
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
	/* Before any thread exists: a missing user stops here, nothing bound. */
	if (privdrop_prepare(cfg, &pd, &err) == -1) {
		rc = cmd_error("%s", err);
		policy_unref(pol);
		config_free(cfg);
		return rc;
	}
	log_hold(1);
	/* The keys go to the keeper's processes before anything is bound. */
	if ((kc = keeper_connect(cfg, pol, &kpid, &ctl, &monitor, &err)) == NULL) {
		privdrop_free(pd);
		policy_unref(pol);
		config_free(cfg);
		return cmd_error("cannot start the gateway: %s", err);
	}
	if ((p = proxy_new(cfg, pol, kc)) == NULL) {
		privdrop_free(pd);
		close(ctl);
		/* One line that names what failed: the last warning. */
		log_take_held(why, sizeof(why));
		return cmd_error("cannot start the gateway: %s", why);
	}
	proxy_keeper_pid(p, kpid);
	if (keeper_proc_watch(p, ctl) == -1)
		log_warnx("cannot watch the key keeper's monitor: a lost keeper "
		    "will not come back");
	log_release();
	/* Everything that needs root is open; the workers start unprivileged. */
	if (privdrop_apply(pd, cfg, &err) == -1)
		rc = cmd_error("%s", err);
	else
		rc = proxy_run(p) == 0 ? 0 : 1;
	privdrop_free(pd);
	proxy_free(p);
	/* Its sockets are closed: the monitor ends the keeper and exits. */
	close(ctl);
	while (waitpid(monitor, NULL, 0) == -1 && errno == EINTR)
		;
	return rc;
}
