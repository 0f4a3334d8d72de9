/*
 * A policy reload (SIGHUP, the admin API, policies_watch): the files read
 * again, the new policy swapped in whole when it loads without an error,
 * keys that need a restart named. Below the main loop, the admin API and
 * the watcher, which all call it.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "proxy/front.h"

/* One warning line per key, then the summary naming them all. */
static void
reload_log_restart(const struct proxy_reload_info *ri, const char *sum)
{
	char keys[1024];
	size_t i, off = 0;
	int n;

	keys[0] = '\0';
	for (i = 0; i < ri->n_restart; i++) {
		log_warnx("reload: %s needs a restart: the running value stays",
		    ri->restart[i]);
		n = snprintf(keys + off, sizeof(keys) - off, "%s%s",
		    i > 0 ? ", " : "", ri->restart[i]);
		if (n < 0 || (size_t)n >= sizeof(keys) - off)
			break;
		off += (size_t)n;
	}
	log_info("reload: policies applied (%s); needs a restart: %s", sum,
	    keys);
}

/* Kept for the admin API's status: when, from where, and how it went. */
static void
reload_remember(struct proxy *p, const char *source, int ok,
    const struct diag *d, size_t n_restart)
{
	struct proxy_reload_last *l = &p->last_reload;

	memset(l, 0, sizeof(*l));
	l->at = time(NULL);
	l->ok = ok;
	l->source = source != NULL ? source : "signal";
	l->n_errors = ok ? 0 : (unsigned)d->n;
	l->n_restart = (unsigned)n_restart;
	if (!ok && d->n > 0)
		(void)diag_format(&d->v[0], l->first_error,
		    sizeof(l->first_error));
}

/* The first static sandbox whose id is registered at run time, into arg. */
static void
registered_cb(const char *id, const char *policy, void *arg)
{
	char *twin = arg;

	(void)policy;
	if (twin[0] == '\0' &&
	    policy_registry_by_id(id, &(struct policy_identity){ 0 }, NULL) == 0)
		snprintf(twin, POLICY_NAME_MAX + 1, "%s", id);
}

int
proxy_reload(struct proxy *p, const char *source, struct diag *errs,
    struct proxy_reload_info *info)
{
	struct proxy_reload_info own_info;
	struct config *ncfg;
	struct policy *npol, *old;
	struct diag own, *d = errs != NULL ? errs : &own;
	struct proxy_reload_info *ri = info != NULL ? info : &own_info;
	char sum[256], line[2048], twin[POLICY_NAME_MAX + 1] = "";
	size_t i;

	diag_init(&own);
	ncfg = config_load(p->cfg->file, d);
	npol = ncfg != NULL ? policy_load(ncfg, d) : NULL;
	if (npol == NULL) {
		for (i = 0; i < d->n; i++) {
			(void)diag_format(&d->v[i], line, sizeof(line));
			log_warnx("reload: %s", line);
		}
		log_warnx("reload failed with %zu error%s; the previous policy "
		    "stays in force", d->n, d->n == 1 ? "" : "s");
		reload_remember(p, source, 0, d, 0);
		diag_free(&own);
		config_free(ncfg);
		atomic_fetch_add(&p->n_reload_err, 1);
		return -1;
	}
	/*
	 * A static sandbox may not take the id of one registered at run
	 * time: placeholders, approvals and DELETE go by id, so the two
	 * would share them (registration answers 409 the other way round).
	 */
	policy_foreach_sandbox(npol, registered_cb, &twin);
	if (twin[0] != '\0') {
		diag_add(d, p->cfg->file, 0, 0, "sandbox %s is registered at run "
		    "time (POST /v1/sandboxes): a static sandbox cannot take its "
		    "id; DELETE it first", twin);
		log_warnx("reload: sandbox %s is registered at run time: a "
		    "static sandbox cannot take its id; the previous policy "
		    "stays in force", twin);
		reload_remember(p, source, 0, d, 0);
		diag_free(&own);
		policy_unref(npol);
		config_free(ncfg);
		atomic_fetch_add(&p->n_reload_err, 1);
		return -1;
	}
	diag_free(&own);
	/*
	 * Listeners, paths, timeouts and limits need a restart; only policies
	 * swap. p->cfg stays the running config, so a key stays named on every
	 * reload until a restart applies it.
	 */
	ri->n_restart = config_restart_keys(p->cfg, ncfg, ri->restart,
	    PROXY_RELOAD_MAX_KEYS);
	if (ri->n_restart > PROXY_RELOAD_MAX_KEYS)
		ri->n_restart = PROXY_RELOAD_MAX_KEYS;
	config_free(ncfg);
	pthread_mutex_lock(&p->pol_mtx);
	old = p->pol;
	p->pol = npol;
	pthread_mutex_unlock(&p->pol_mtx);
	policy_unref(old);
	cred_policy_changed(p, npol);
	policy_summary(npol, sum, sizeof(sum));
	if (ri->n_restart > 0)
		reload_log_restart(ri, sum);
	else
		log_info("reload: new policy in force: %s", sum);
	reload_remember(p, source, 1, d, ri->n_restart);
	atomic_fetch_add(&p->n_reload_ok, 1);
	return 0;
}

const struct config *
proxy_config(struct proxy *p)
{
	return p->cfg;
}
