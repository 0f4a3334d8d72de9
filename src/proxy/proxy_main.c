/*
 * The gateway's workers and their life: proxy_new() binds the listeners
 * once per worker with SO_REUSEPORT (as root, before the daemon drops its
 * privileges: src/daemon/daemon.c) and proxy_run() starts one event loop
 * per worker thread; handles SIGHUP (reload), SIGTERM
 * and SIGINT on the main thread, and owns the pointer to the current policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/thread.h>

#include "audit/audit.h"
#include "audit/audit_store.h"
#include "core/fairshare.h"
#include "core/geoip.h"
#include "core/stats.h"
#include "dns/dns.h"
#include "vault/ca.h"
#include "vault/keeper.h"
#include "core/log.h"
#include "proxy/front.h"

static const char *listener_names[LISTENER_MAX] = { "http", "socks5",
    "transparent", "ingress" };

static int
listen_socket_type(const struct config_listen *l, int type)
{
	int fd, one = 1;

	fd = socket(l->ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1)
		goto fail;
	if (l->ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&l->ss, l->sslen) == -1)
		goto fail;
	if (type == SOCK_STREAM && listen(fd, 1024) == -1)
		goto fail;
	return fd;
fail:
	{
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return -1;
}

static int
listen_socket(const struct config_listen *l)
{
	return listen_socket_type(l, SOCK_STREAM);
}

static struct policy *
dns_policy_get(void *arg)
{
	return proxy_policy_get(arg);
}

static int
dns_name_check(void *arg, const char *name, char *cred, size_t credlen)
{
	return cred_in_name(arg, name, cred, credlen);
}

static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct listener_ctx *lc = arg;
	struct worker *w = lc->w;
	struct proxy *p = w->proxy;
	int one = 1;

	if (atomic_fetch_add(&p->n_conns, 1) >= p->cfg->max_connections &&
	    proxy_fair_make_room(p, sa) == -1) {
		atomic_fetch_sub(&p->n_conns, 1);
		if (atomic_fetch_add(&p->n_refused, 1) % 1000 == 0)
			log_warnx("max_connections (%u) reached: refusing connections",
			    p->cfg->max_connections);
		close(fd);
		return;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (conn_accept(w, lc->kind, fd, sa, socklen) == NULL) {
		atomic_fetch_sub(&p->n_conns, 1);
		close(fd);
	}
}

static void
resume_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < LISTENER_MAX; i++)
		if (w->listeners[i] != NULL)
			evconnlistener_enable(w->listeners[i]);
}

static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct worker *w = ((struct listener_ctx *)arg)->w;
	struct timeval tv = { 1, 0 };
	int e = EVUTIL_SOCKET_ERROR(), i;

	if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
		/* Out of descriptors: stop accepting for a moment instead of spinning. */
		log_warnx("accept: %s: pausing accept for 1s", strerror(e));
		for (i = 0; i < LISTENER_MAX; i++)
			if (w->listeners[i] != NULL)
				evconnlistener_disable(w->listeners[i]);
		evtimer_add(w->resume_ev, &tv);
		return;
	}
	log_warnx("accept: %s", strerror(e));
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	event_base_dispatch(w->base);
	return NULL;
}

static int
worker_init(struct proxy *p, struct worker *w, int index)
{
	int i;

	w->proxy = p;
	w->index = index;
	TAILQ_INIT(&w->exchanges);
	TAILQ_INIT(&w->pool);
	if ((w->base = event_base_new()) == NULL) {
		log_warnx("worker %d: event_base_new failed", index);
		return -1;
	}
	if ((w->resolver = resolver_new(w->base, p->cfg)) == NULL) {
		log_warnx("worker %d: resolver initialisation failed", index);
		return -1;
	}
	if ((w->resume_ev = evtimer_new(w->base, resume_cb, w)) == NULL ||
	    (w->evict_ev = event_new(w->base, -1, 0, proxy_fair_evict_cb,
	    w)) == NULL || (w->trim_ev = evtimer_new(w->base, proxy_worker_trim_cb,
	    w)) == NULL || (w->oauth2_ev = event_new(w->base, -1, 0,
	    oauth2_wake_cb, w)) == NULL || approval_worker_init(w) == -1)
		return -1;
	if (proxy_tls_worker_init(w, p->cfg) == -1)
		return -1;
	if (p->cfg->listen_ingress.enabled &&
	    ingress_worker_init(w, p->cfg) == -1)
		return -1;
	if (p->dns_fds[0][index] != -1) {
		struct dns_server_env env;

		memset(&env, 0, sizeof(env));
		env.proxy = p;
		env.base = w->base;
		env.resolver = w->resolver;
		env.mem = p->addrmem;
		env.audit = p->audit;
		env.stats = p->stats;
		env.policy_get = dns_policy_get;
		env.policy_arg = p;
		env.name_check = dns_name_check;
		env.name_check_arg = p;
		env.geoip = p->geoip;
		env.fair = p->fair;
		env.max_ttl = 300;
		env.idle_timeout_ms = 10000;
		env.ask = approval_dns_ask;
		env.ask_collect = approval_dns_collect;
		env.ask_leave = approval_dns_leave;
		env.ask_arg = p;
		/* The server owns both descriptors from here, also on failure. */
		w->dns = dns_server_new(&env, p->dns_fds[0][index],
		    p->dns_fds[1][index]);
		p->dns_fds[0][index] = p->dns_fds[1][index] = -1;
		if (w->dns == NULL) {
			log_warnx("worker %d: DNS listener failed", index);
			return -1;
		}
	}
	for (i = 0; i < LISTENER_MAX; i++) {
		int fd = p->listen_fds[i][index];
		if (fd == -1)
			continue;
		w->lctx[i].w = w;
		w->lctx[i].kind = i;
		w->listeners[i] = evconnlistener_new(w->base, accept_cb,
		    &w->lctx[i], LEV_OPT_CLOSE_ON_FREE, -1, fd);
		if (w->listeners[i] == NULL) {
			log_warnx("worker %d: evconnlistener_new failed", index);
			return -1;
		}
		p->listen_fds[i][index] = -1;	/* now owned by the listener */
		evconnlistener_set_error_cb(w->listeners[i], accept_error_cb);
	}
	return 0;
}

static const struct config_listen *
listener_config(const struct config *cfg, enum listener_kind k)
{
	switch (k) {
	case LISTENER_HTTP:
		return &cfg->listen_http;
	case LISTENER_SOCKS5:
		return &cfg->listen_socks5;
	case LISTENER_TRANSPARENT:
		return &cfg->listen_transparent;
	case LISTENER_INGRESS:
		return &cfg->listen_ingress;
	default:
		return NULL;
	}
}

/*
 * Bound last, after the audit log, the CA and the vault are ready: once a
 * port accepts, everything a connection needs exists.
 */
static int
bind_listeners(struct proxy *p)
{
	const struct config *cfg = p->cfg;
	int i, k;

	if (cfg->listen_dns.enabled) {
		for (i = 0; i < p->n_workers; i++) {
			p->dns_fds[0][i] = listen_socket_type(&cfg->listen_dns,
			    SOCK_DGRAM);
			p->dns_fds[1][i] = listen_socket(&cfg->listen_dns);
			if (p->dns_fds[0][i] == -1 || p->dns_fds[1][i] == -1) {
				log_warn("listen dns on %s", cfg->listen_dns.text);
				return -1;
			}
		}
		log_info("listening: dns on %s (udp and tcp)",
		    cfg->listen_dns.text);
	}

	for (k = 0; k < LISTENER_MAX; k++) {
		const struct config_listen *l = listener_config(cfg, k);
		if (l == NULL || !l->enabled)
			continue;
		for (i = 0; i < p->n_workers; i++) {
			if ((p->listen_fds[k][i] = listen_socket(l)) == -1) {
				log_warn("listen %s on %s", listener_names[k], l->text);
				return -1;
			}
		}
		log_info("listening: %s on %s (%d workers)%s", listener_names[k],
		    l->text, p->n_workers, k == LISTENER_INGRESS &&
		    cfg->ingress_tls_cert != NULL ? " with TLS" : "");
	}
	if (proxy_metrics_bind(p) == -1)
		return -1;
	return 0;
}

void
proxy_parts_free(struct proxy_parts *parts)
{
	if (parts->audit != NULL)
		audit_close(parts->audit);
	audit_ship_stop(parts->ship);
	if (parts->ca != NULL)
		ca_free(parts->ca);
	if (parts->geoip != NULL)
		geoip_close(parts->geoip);
	keeper_client_free(parts->kc);
	memset(parts, 0, sizeof(*parts));
}

struct proxy *
proxy_new(struct config *cfg, struct policy *pol, struct proxy_parts *parts)
{
	struct proxy *p;
	int i, k;

	if (evthread_use_pthreads() == -1) {
		log_warnx("libevent was built without pthreads support");
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		proxy_parts_free(parts);
		return NULL;
	}
	p->cfg = cfg;
	p->pol = pol;
	p->fe = &proxy_front_ops;
	p->parts = &proxy_exchange_parts;
	p->audit = parts->audit;
	p->ship = parts->ship;
	p->ca = parts->ca;
	p->kc = parts->kc;
	p->geoip = parts->geoip;
	memset(parts, 0, sizeof(*parts));
	atomic_init(&p->keeper_pid, 0);
	pthread_mutex_init(&p->pol_mtx, NULL);
	pthread_mutex_init(&p->evict_mtx, NULL);
	if (approval_proxy_init(p) == -1)
		goto fail;
	atomic_init(&p->n_conns, 0);
	atomic_init(&p->n_refused, 0);
	atomic_init(&p->n_evicted, 0);
	atomic_init(&p->evict_pending, 0);
	atomic_init(&p->n_reload_ok, 0);
	atomic_init(&p->n_reload_err, 0);
	p->started = time(NULL);
	p->metrics_fd = -1;
	p->n_workers = cfg->workers < 1 ? 1 : cfg->workers > 64 ? 64 : cfg->workers;
	for (k = 0; k < LISTENER_MAX; k++)
		for (i = 0; i < 64; i++)
			p->listen_fds[k][i] = -1;
	for (i = 0; i < 64; i++)
		p->dns_fds[0][i] = p->dns_fds[1][i] = -1;
	if ((p->addrmem = addrmem_new(100000)) == NULL ||
	    (p->stats = stats_new()) == NULL)
		goto fail;
	{
		/*
		 * Sources are always counted (no per-sandbox limit: no limit
		 * of theirs), so that a full gateway knows whose connections
		 * to close first (proxy_fair_make_room).
		 */
		struct fair_limits fl = { cfg->sandbox_max_connections,
		    cfg->sandbox_conn_rate, cfg->sandbox_dns_rate,
		    cfg->sandbox_max_connections != 0 ?
		    cfg->sandbox_max_connections : UINT32_MAX };

		if ((p->fair = fairshare_new(&fl)) == NULL)
			goto fail;
	}
	/* cred_free() copes with a half-done cred_init(). */
	p->cred_ready = 1;
	if (cred_init(p) == -1)
		goto fail;
	if (cfg->listen_ingress.enabled && cfg->ingress_tls_cert != NULL) {
		struct worker probe;

		/* A bad certificate or key fails before any port is bound. */
		memset(&probe, 0, sizeof(probe));
		i = ingress_worker_init(&probe, cfg);
		ingress_worker_free(&probe);
		if (i == -1)
			goto fail;
	}
	if (bind_listeners(p) == -1)
		goto fail;
	if ((p->main_base = event_base_new()) == NULL)
		goto fail;
	if ((p->workers = calloc(p->n_workers, sizeof(*p->workers))) == NULL)
		goto fail;
	for (i = 0; i < p->n_workers; i++)
		if (worker_init(p, &p->workers[i], i) == -1)
			goto fail;
	return p;
fail:
	proxy_free(p);
	return NULL;
}

static void
vault_watch_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct proxy *p = arg;

	cred_check_rotation(p);
	/* Sandboxes gone quiet (or forgotten by the admin API) leave the table. */
	fairshare_sweep(p->fair, fairshare_now_ms());
	/* Closes no worker found a connection for within a second: given up. */
	atomic_store(&p->evict_pending, 0);
	proxy_admin_tick(p);
}

/* READY=1 with the policy in force as the service's status line. */
static void
notify_ready(struct proxy *p)
{
	char sum[256], status[300];

	pthread_mutex_lock(&p->pol_mtx);
	policy_summary(p->pol, sum, sizeof(sum));
	pthread_mutex_unlock(&p->pol_mtx);
	snprintf(status, sizeof(status), "serving: %s", sum);
	if (p->life != NULL && p->life->ready != NULL)
		p->life->ready(status);
}

void
proxy_set_lifecycle(struct proxy *p, const struct proxy_lifecycle *lc)
{
	p->life = lc;
}

static void
signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct proxy *p = arg;
	int i;

	if (sig == SIGHUP) {
		log_info("SIGHUP: reloading");
		/* systemd's ExecReload waits for READY=1 after RELOADING=1. */
		if (p->life != NULL && p->life->reloading != NULL)
			p->life->reloading();
		proxy_reload(p, "signal", NULL, NULL);
		notify_ready(p);
		return;
	}
	log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	if (p->life != NULL && p->life->stopping != NULL)
		p->life->stopping();
	for (i = 0; i < p->n_workers; i++)
		event_base_loopexit(p->workers[i].base, NULL);
	event_base_loopexit(p->main_base, NULL);
}

int
proxy_run(struct proxy *p)
{
	struct event *sighup, *sigterm, *sigint, *watch;
	struct timeval sec = { 1, 0 };
	sigset_t all, old;
	int i, started = 0, rc = 0;

	signal(SIGPIPE, SIG_IGN);
	sighup = evsignal_new(p->main_base, SIGHUP, signal_cb, p);
	sigterm = evsignal_new(p->main_base, SIGTERM, signal_cb, p);
	sigint = evsignal_new(p->main_base, SIGINT, signal_cb, p);
	/* vault rotate takes effect within a second; the fair-share table is swept as often. */
	watch = event_new(p->main_base, -1, EV_PERSIST, vault_watch_cb, p);
	if (watch != NULL)
		event_add(watch, &sec);
	proxy_admin_tick(p);	/* status's rates count from start-up */
	if (sighup == NULL || sigterm == NULL || sigint == NULL ||
	    evsignal_add(sighup, NULL) == -1 || evsignal_add(sigterm, NULL) == -1 ||
	    evsignal_add(sigint, NULL) == -1) {
		log_warnx("cannot install signal handlers");
		rc = -1;
		goto done;
	}

	/*
	 * Workers never see signals: the main loop handles them all. SIGSYS
	 * stays open: a thread that blocks it when the seccomp filter traps
	 * a call is killed (privdrop_seccomp.c). So do the signals a fault
	 * raises in the thread itself: blocked, the kernel kills the process
	 * before any handler (a sanitizer's report) runs.
	 */
	/*
	 * glibc initialises its allocator, without a lock, the first time
	 * malloc_trim runs when nothing else has (a sanitizer's malloc stands
	 * in for glibc's): two workers trimming for the first time at once
	 * both did -- a SIGSEGV in one, or an arena count gone wrong when the
	 * workers ended (ASan runs of test_fair_source). Once here, before any
	 * worker runs.
	 */
	(void)malloc_trim(0);
	sigfillset(&all);
	sigdelset(&all, SIGSYS);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < p->n_workers; i++) {
		if (pthread_create(&p->workers[i].thread, NULL, worker_main,
		    &p->workers[i]) != 0) {
			log_warnx("pthread_create failed");
			break;
		}
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* A SIGHUP held since start-up (daemon_run) is a reload from here on. */
	sigemptyset(&all);
	sigaddset(&all, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &all, NULL);
	if (started == p->n_workers) {
		log_info("ready");
		/* Every listener is bound and the keeper answered (daemon.c). */
		notify_ready(p);
		event_base_dispatch(p->main_base);
	} else {
		rc = -1;
		for (i = 0; i < started; i++)
			event_base_loopexit(p->workers[i].base, NULL);
	}
	for (i = 0; i < started; i++)
		pthread_join(p->workers[i].thread, NULL);
done:
	if (sighup)
		event_free(sighup);
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	if (watch)
		event_free(watch);
	return rc;
}

void
proxy_free(struct proxy *p)
{
	int i, k;

	if (p == NULL)
		return;
	/* No token fetch wakes a worker that is going. */
	oauth2_proxy_stop(p);
	for (i = 0; p->workers != NULL && i < p->n_workers; i++) {
		struct worker *w = &p->workers[i];
		for (k = 0; k < LISTENER_MAX; k++)
			if (w->listeners[k] != NULL)
				evconnlistener_free(w->listeners[k]);
		/* Sessions still open at shutdown are closed, not leaked. */
		while (w->base != NULL && !TAILQ_EMPTY(&w->exchanges))
			exchange_close(TAILQ_FIRST(&w->exchanges),
			    CLOSE_SHUTDOWN);
		origin_pool_clear(w);
		/* Gone before the loop runs once more: a wake must not reach it. */
		if (w->dns != NULL)
			dns_server_free(w->dns);
		w->dns = NULL;
		if (w->base != NULL)
			event_base_loop(w->base, EVLOOP_NONBLOCK);
		if (w->resolver != NULL)
			resolver_free(w->resolver);
		if (w->resume_ev != NULL)
			event_free(w->resume_ev);
		if (w->evict_ev != NULL)
			event_free(w->evict_ev);
		if (w->trim_ev != NULL)
			event_free(w->trim_ev);
		if (w->oauth2_ev != NULL)
			event_free(w->oauth2_ev);
		approval_worker_free(w);
		if (w->base != NULL)
			event_base_free(w->base);
		proxy_tls_worker_free(w);
		ingress_worker_free(w);
	}
	free(p->workers);
	for (i = 0; i < 64; i++) {
		if (p->dns_fds[0][i] != -1)
			close(p->dns_fds[0][i]);
		if (p->dns_fds[1][i] != -1)
			close(p->dns_fds[1][i]);
	}
	if (p->addrmem != NULL)
		addrmem_free(p->addrmem);
	stats_free(p->stats);	/* after the workers: their last rows count */
	fairshare_free(p->fair);
	for (k = 0; k < LISTENER_MAX; k++)
		for (i = 0; i < 64; i++)
			if (p->listen_fds[k][i] != -1)
				close(p->listen_fds[k][i]);
	proxy_admin_stop(p);
	proxy_metrics_stop(p);
	proxy_watch_stop(p);
	proxy_nflog_stop(p);
	if (p->on_free != NULL)
		p->on_free(p->on_free_arg);
	if (p->main_base != NULL)
		event_base_free(p->main_base);
	/* After the workers: every exchange's row is queued before the flush. */
	if (p->audit != NULL)
		audit_close(p->audit);
	/* Then the shipper, briefly; what it leaves waits for the next start. */
	audit_ship_stop(p->ship);
	if (p->ca != NULL)
		ca_free(p->ca);
	if (p->cred_ready)
		cred_free(p);
	/* Last: the final checkpoint above was signed through it. */
	keeper_client_free(p->kc);
	if (p->geoip != NULL)
		geoip_close(p->geoip);
	policy_registry_clear();
	if (p->pol != NULL)
		policy_unref(p->pol);
	config_free(p->cfg);
	pthread_mutex_destroy(&p->pol_mtx);
	pthread_mutex_destroy(&p->evict_mtx);
	approval_proxy_free(p);
	free(p);
}


struct event_base *
proxy_main_base(struct proxy *p)
{
	return p->main_base;
}

void
proxy_on_free(struct proxy *p, void (*fn)(void *), void *arg)
{
	p->on_free = fn;
	p->on_free_arg = arg;
}

void
proxy_keeper_pid(struct proxy *p, int pid)
{
	atomic_store(&p->keeper_pid, pid);
}

void
proxy_keeper_lost(struct proxy *p, const char *why)
{
	atomic_store(&p->keeper_pid, 0);
	keeper_client_lost(p->kc, why);
}

/* A restarted keeper: the secrets again before anything is swapped. */
void
proxy_keeper_adopt(struct proxy *p, int fd, int pid)
{
	struct policy *pol;

	if (keeper_client_adopt(p->kc, fd) == -1)
		return;
	pol = proxy_policy_get(p);
	cred_policy_changed(p, pol);
	policy_unref(pol);
	keeper_client_ready(p->kc);
	atomic_store(&p->keeper_pid, pid);
	atomic_fetch_add(&p->n_keeper_restarts, 1);
	log_info("key keeper (pid %d) is back: interceptions and credential "
	    "swaps resume", pid);
}
