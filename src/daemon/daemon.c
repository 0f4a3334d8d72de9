/*
 * `sandgate serve` from a loaded config to a clean stop (daemon.h). The
 * order is the point: the keys go to the keeper's processes before any
 * socket exists; everything that needs root is opened next; then the
 * privileges go, and only then do the worker threads start.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "audit/audit.h"
#include "audit/audit_store.h"
#include "core/config.h"
#include "core/geoip.h"
#include "core/log.h"
#include "core/policy.h"
#include "daemon/approval_notify.h"
#include "daemon/daemon.h"
#include "daemon/keeper_proc.h"
#include "daemon/notify.h"
#include "daemon/privdrop.h"
#include "proxy/proxy.h"
#include "vault/ca.h"
#include "vault/keeper.h"

/*
 * Start the monitor and its keeper, and say hello to the keeper. NULL with
 * *errstr: the keeper's own one line when it could not open its files.
 */
/* systemd's Type=notify, as the gateway runs: ready, reloading, stopping. */
static const struct proxy_lifecycle notify_hooks = {
	daemon_notify_ready, daemon_notify_reloading, daemon_notify_stopping
};

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
		*errstr = "the key keeper did not start";
		return NULL;
	}
	if ((kc = keeper_client_new(fd, errstr)) == NULL)
		return NULL;
	*kpid = (int)pid;
	return kc;
}

int
daemon_parts_open(const struct config *cfg, struct keeper_client *kc,
    struct proxy_parts *parts)
{
	struct audit_params ap;
	const char *err = NULL;

	memset(parts, 0, sizeof(*parts));
	parts->kc = kc;
	/* Checkpoints are signed by the keeper; the writer has its public key. */
	memset(&ap, 0, sizeof(ap));
	ap.retention_s = cfg->audit_retention_s;
	ap.checkpoint_ms = cfg->audit_checkpoint_ms;
	ap.on_failure_allow = cfg->audit_on_failure_allow;
	if (cfg->audit_syslog) {
		memcpy(&ap.syslog_addr, &cfg->audit_syslog_ss,
		    sizeof(ap.syslog_addr));
		ap.syslog_addrlen = cfg->audit_syslog_sslen;
		ap.syslog_json = cfg->audit_syslog_json;
		ap.syslog_udp = cfg->audit_syslog_udp;
	}
	ap.signer.sign = keeper_client_sign_audit;
	ap.signer.ctx = kc;
	memcpy(ap.signer.public_key, keeper_client_audit_pub(kc),
	    sizeof(ap.signer.public_key));
	if ((parts->audit = audit_open(cfg->audit_db, &ap, &err)) == NULL) {
		log_warnx("audit database %s: %s", cfg->audit_db,
		    err ? err : "cannot open");
		goto fail;
	}
	log_info("audit: %s (checkpoints signed with %s)", cfg->audit_db,
	    cfg->audit_signing_key);
	if (cfg->audit_syslog)
		log_info("audit: every row forwarded to syslog %s over %s (%s)",
		    cfg->audit_syslog_address, cfg->audit_syslog_udp ? "UDP" :
		    "TCP", cfg->audit_syslog_json ? "json" : "rfc5424");
	/*
	 * The shipper is a thread of this (the network) process: its seccomp
	 * profile allows the sockets libpq needs (docs/fleet.md).
	 */
	if (cfg->audit_ship_url != NULL && (parts->ship = audit_ship_start(
	    cfg->audit_db, cfg->audit_ship_url, cfg->audit_ship_gateway,
	    &err)) == NULL) {
		log_warnx("audit.ship: %s", err);
		goto fail;
	}
	/* The CA certificate without its key; leaves are signed by the keeper. */
	if ((parts->ca = ca_remote(keeper_client_ca_cert(kc),
	    keeper_client_leaf_key(kc), keeper_client_sign_leaf, kc,
	    &err)) == NULL) {
		log_warnx("interception CA %s: %s", cfg->ca_cert, err);
		goto fail;
	}
	if (cfg->geoip_country_db != NULL || cfg->geoip_asn_db != NULL) {
		if ((parts->geoip = geoip_open(cfg->geoip_country_db,
		    cfg->geoip_asn_db, &err)) == NULL) {
			log_warnx("%s", err ? err : "geoip: cannot open");
			goto fail;
		}
		log_info("geoip: country %s, asn %s", cfg->geoip_country_db ?
		    cfg->geoip_country_db : "-", cfg->geoip_asn_db ?
		    cfg->geoip_asn_db : "-");
	}
	return 0;
fail:
	proxy_parts_free(parts);
	return -1;
}

/* One line for cmd_error: "cannot start the gateway: " when start is set. */
static int
fail_line(char *err, size_t errlen, int start, const char *what)
{
	snprintf(err, errlen, "%s%s", start ? "cannot start the gateway: " : "",
	    what);
	return 1;
}

int
daemon_run(struct config *cfg, struct policy *pol, char *err, size_t errlen)
{
	struct proxy_parts parts;
	struct keeper_client *kc;
	struct privdrop *pd;
	struct proxy *p;
	const char *why = NULL;
	char held[512];
	pid_t monitor = -1;
	int ctl = -1, kpid = 0, rc;
	sigset_t hup;

	/*
	 * A SIGHUP before the main loop handles it (the listeners accept from
	 * bind on) waits, and is a reload once proxy_run is ready: its default
	 * action would end the gateway. Threads started until then keep it
	 * blocked; proxy_run unblocks it on the main thread.
	 */
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	/* Before any process or thread exists: a missing user stops here. */
	if (privdrop_prepare(cfg, &pd, &why) == -1) {
		policy_unref(pol);
		config_free(cfg);
		return fail_line(err, errlen, 0, why);
	}
	/* Before any thread: the notifier of mode: ask may exec, serve never. */
	approval_set_notify_fd(approval_notifier_start(cfg));
	log_hold(1);
	/* 1. The keys go to the keeper's processes before anything is bound. */
	if ((kc = keeper_connect(cfg, pol, &kpid, &ctl, &monitor,
	    &why)) == NULL) {
		rc = fail_line(err, errlen, 1, why);
		goto early;
	}
	/* 2. The audit log, the CA and GeoIP, through the keeper client. */
	if (privdrop_audit_share(pd, cfg, &why) == -1) {
		rc = fail_line(err, errlen, 1, why);
		goto early;
	}
	if (daemon_parts_open(cfg, kc, &parts) == -1) {
		log_take_held(held, sizeof(held));
		rc = fail_line(err, errlen, 1, held);
		goto early;
	}
	/* 3. Workers and listeners: every port is bound here, as root. */
	if ((p = proxy_new(cfg, pol, &parts)) == NULL) {
		log_take_held(held, sizeof(held));
		privdrop_free(pd);
		close(ctl);
		return fail_line(err, errlen, 1, held);
	}
	cfg = NULL;
	pol = NULL;
	proxy_keeper_pid(p, kpid);
	proxy_set_lifecycle(p, &notify_hooks);
	/* 4. The main thread's services. */
	if (proxy_admin_start(p) == -1 || proxy_metrics_start(p) == -1 ||
	    proxy_watch_start(p) == -1) {
		log_take_held(held, sizeof(held));
		rc = fail_line(err, errlen, 1,
		    held[0] ? held : "the admin API or metrics did not start");
		goto late;
	}
	(void)proxy_nflog_start(p);	/* optional: needs CAP_NET_ADMIN */
	if (keeper_proc_watch(p, ctl) == -1)
		log_warnx("cannot watch the key keeper's monitor: a lost keeper "
		    "will not come back");
	log_release();
	/* 5. Everything that needs root is open; the workers start unprivileged. */
	if (privdrop_apply(pd, proxy_config(p), &why) == -1)
		rc = fail_line(err, errlen, 0, why);
	else
		rc = proxy_run(p) == 0 ? 0 : fail_line(err, errlen, 0,
		    "the gateway stopped on an error");
late:
	privdrop_free(pd);
	proxy_free(p);
	/* Its sockets are closed: the monitor ends the keeper and exits. */
	close(ctl);
	while (waitpid(monitor, NULL, 0) == -1 && errno == EINTR)
		;
	return rc;
early:
	privdrop_free(pd);
	if (ctl != -1)
		close(ctl);
	policy_unref(pol);
	config_free(cfg);
	return rc;
}
