/*
 * Credentials of kind oauth2 in a request (docs/credentials.md, "OAuth 2.0
 * credentials"): before the head is built, the access token of each one
 * the plan swaps is made fresh (src/vault/oauth2_token.c asks the token
 * endpoint, one fetch per entry at a time) and the plan moves onto the
 * snapshot holding it; the swap then works by name as for static secrets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "core/log.h"
#include "core/netaddr.h"
#include "dns/resolver.h"
#include "exchange/cred_phs.h"
#include "exchange/exchange.h"
#include "vault/oauth2.h"
#include "vault/vault.h"

/* oauth2_tokens' publisher: the new snapshot becomes p->snap. */
static void
publish_cb(void *arg, struct vault_snapshot *snap)
{
	struct proxy *p = arg;
	struct vault_snapshot *old;

	pthread_mutex_lock(&p->cred_mtx);
	old = p->snap;
	p->snap = snap;
	pthread_mutex_unlock(&p->cred_mtx);
	if (old != NULL)
		vault_snapshot_unref(old);
}

/* A fetch ended (any thread): every worker looks at its parked heads. */
static void
done_cb(void *arg)
{
	struct proxy *p = arg;
	int i;

	for (i = 0; p->workers != NULL && i < p->n_workers; i++)
		if (p->workers[i].oauth2_ev != NULL)
			event_active(p->workers[i].oauth2_ev, EV_READ, 0);
}

/* A token endpoint's name, by the gateway's resolver on a loop of its own. */
struct oa_lookup {
	struct event_base	*base;
	int			 done, result;
	struct sockaddr_storage	*out;
	size_t			 max, n;
	unsigned		 port;
};

static void
lookup_cb(int result, const struct netaddr *addrs, size_t n, uint32_t ttl,
    void *arg)
{
	struct oa_lookup *lk = arg;
	size_t i;

	(void)ttl;
	lk->done = 1;
	lk->result = result;
	for (i = 0; result == RESOLVER_OK && i < n && lk->n < lk->max; i++)
		if (netaddr_to_sockaddr(&addrs[i], (uint16_t)lk->port,
		    &lk->out[lk->n]) > 0)
			lk->n++;
	event_base_loopbreak(lk->base);
}

static int
resolve_cb(void *arg, const char *host, unsigned port,
    struct sockaddr_storage *out, size_t max, uint64_t deadline_ms,
    char *why, size_t whylen)
{
	struct proxy *p = arg;
	struct oa_lookup lk;
	struct resolver *r = NULL;
	struct resolver_query *q;
	struct timespec ts;
	struct timeval tv;
	uint64_t now;

	memset(&lk, 0, sizeof(lk));
	lk.out = out;
	lk.max = max;
	lk.port = port;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	if (deadline_ms <= now) {
		snprintf(why, whylen, "no time left to resolve %s", host);
		return -1;
	}
	if ((lk.base = event_base_new()) == NULL ||
	    (r = resolver_new(lk.base, p->cfg)) == NULL) {
		snprintf(why, whylen, "cannot start a resolver for %s", host);
		goto done;
	}
	if ((q = resolver_lookup(r, host, lookup_cb, &lk)) == NULL) {
		snprintf(why, whylen, "cannot resolve %s: out of memory", host);
		goto done;
	}
	tv.tv_sec = (time_t)((deadline_ms - now) / 1000);
	tv.tv_usec = (suseconds_t)((deadline_ms - now) % 1000) * 1000;
	event_base_loopexit(lk.base, &tv);
	event_base_dispatch(lk.base);
	if (!lk.done) {
		resolver_cancel(q);
		snprintf(why, whylen, "resolving %s timed out", host);
	} else if (lk.n == 0)
		snprintf(why, whylen, "cannot resolve %s (%s)", host,
		    lk.result == RESOLVER_OK ? "no address" : "no such name or "
		    "the resolvers failed");
done:
	if (r != NULL)
		resolver_free(r);
	if (lk.base != NULL)
		event_base_free(lk.base);
	return lk.n > 0 ? (int)lk.n : -1;
}

int
oauth2_proxy_init(struct proxy *p)
{
	const char *err = NULL;

	if ((p->oauth2 = oauth2_tokens_new(p->cfg->ca_bundle, p->kc,
	    publish_cb, p, &err)) == NULL) {
		log_warnx("oauth2: %s", err != NULL ? err : "cannot start");
		return -1;
	}
	oauth2_tokens_on_done(p->oauth2, done_cb, p);
	oauth2_tokens_on_resolve(p->oauth2, resolve_cb, p);
	return 0;
}

void
oauth2_proxy_stop(struct proxy *p)
{
	if (p->oauth2 != NULL)
		oauth2_tokens_stop(p->oauth2);
}

/* 1 when the sandbox's placeholder ph is in the request target or a header. */
static int
carries_ph(const struct http_request *req, const char *ph, size_t len)
{
	size_t i;

	if (memmem(req->path.p, req->path.len, ph, len) != NULL)
		return 1;
	for (i = 0; i < req->n_headers; i++)
		if (vault_contains_placeholder(ph, req->headers[i].value.p,
		    req->headers[i].value.len))
			return 1;
	return 0;
}

int
oauth2_park(struct exchange *s, const struct http_request *req)
{
	const struct policy_credential *const *cv;
	const struct policy_credential *c;
	const struct cred_phs *ps;
	const struct cred_ph *e;
	enum oauth2_state st;
	size_t i, n;
	int park = 0;

	if (s->is_stream || !s->c->tunnel_http || !s->c->intercepted ||
	    !s->has_ident || s->pol == NULL || s->target.is_ip ||
	    s->p->oauth2 == NULL || s->c->cbev == NULL || s->closing)
		return 0;
	cv = policy_credentials(s->pol, s->ident.policy, &n);
	ps = cred_phs_enter(s->p->phs);
	for (i = 0; i < n; i++) {
		c = cv[i];
		if (c->kind != POLICY_CRED_OAUTH2 || c->oauth2 == NULL ||
		    !policy_credential_bound(c, s->target.host) ||
		    (e = cred_phs_get(ps, s->ident.sandbox, c->name)) == NULL ||
		    !carries_ph(req, e->ph, e->phlen))
			continue;
		st = oauth2_tokens_state(s->p->oauth2, c);
		/* No thread for it: request_cred_check fetches, blocking. */
		if (st == OAUTH2_STALE && oauth2_tokens_fetch_async(s->p->oauth2,
		    c, s->pol) == -1)
			continue;
		if (st == OAUTH2_STALE || st == OAUTH2_FETCHING)
			park = 1;
	}
	cred_phs_leave(s->p->phs, ps);
	if (!park)
		return 0;
	s->oauth2_parked = 1;
	bufferevent_disable(s->c->cbev, EV_READ);
	return 1;
}

void
oauth2_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker *w = arg;
	struct exchange *s, **v;
	size_t n = 0, i;

	(void)fd;
	(void)ev;
	TAILQ_FOREACH(s, &w->exchanges, entry)
		if (s->oauth2_parked)
			n++;
	if (n == 0 || (v = calloc(n, sizeof(*v))) == NULL)
		return;
	n = 0;
	TAILQ_FOREACH(s, &w->exchanges, entry)
		if (s->oauth2_parked)
			v[n++] = s;
	/* Each read again from its head: parked again, refused, or on. */
	for (i = 0; i < n; i++) {
		s = v[i];
		s->oauth2_parked = 0;
		if (s->closing || s->c->cbev == NULL)
			continue;
		bufferevent_enable(s->c->cbev, EV_READ);
		s->p->fe->client_read(s->c->cbev, s);
	}
	free(v);
}

/* The oauth2 credentials the plan swaps (each once): how many. */
static size_t
swapped_oauth2(const struct cred_plan *plan, const struct http_request *req,
    const struct policy_credential **out)
{
	const struct policy_credential *c;
	size_t i, j, n = 0;

	for (i = 0; i <= req->n_headers; i++) {
		c = i < req->n_headers ? cred_plan_swap(plan, i) :
		    plan->query_cred;
		if (c == NULL || c->kind != POLICY_CRED_OAUTH2)
			continue;
		for (j = 0; j < n; j++)
			if (out[j] == c)
				break;
		if (j == n && n < CRED_MAX_BOUND)
			out[n++] = c;
	}
	return n;
}

int
oauth2_plan_ready(struct exchange *s, const struct http_request *req,
    char *detail, size_t len)
{
	const struct policy_credential *cv[CRED_MAX_BOUND];
	struct cred_plan *plan = &s->fwd.plan;
	struct vault_snapshot *snap;
	char why[256];
	size_t i, n;

	if (plan->x == NULL && plan->query_cred == NULL)
		return 0;
	if ((n = swapped_oauth2(plan, req, cv)) == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (cv[i]->oauth2 == NULL || s->p->oauth2 == NULL ||
		    oauth2_tokens_ensure(s->p->oauth2, cv[i], why,
		    sizeof(why)) == -1) {
			snprintf(plan->cred, sizeof(plan->cred), "%s",
			    cv[i]->name);
			snprintf(detail, len, "credential %s: no access token: "
			    "%s", cv[i]->name, cv[i]->oauth2 == NULL ||
			    s->p->oauth2 == NULL ? "not set up" : why);
			return -1;
		}
	}
	/* The snapshot now published holds every token just made fresh. */
	pthread_mutex_lock(&s->p->cred_mtx);
	snap = s->p->snap;
	if (snap != NULL)
		vault_snapshot_ref(snap);
	pthread_mutex_unlock(&s->p->cred_mtx);
	if (plan->snap != NULL)
		vault_snapshot_unref(plan->snap);
	plan->snap = snap;
	for (i = 0; i < n; i++)
		if (snap == NULL || !vault_snapshot_has(snap,
		    cv[i]->oauth2->access_name)) {
			snprintf(plan->cred, sizeof(plan->cred), "%s",
			    cv[i]->name);
			snprintf(detail, len, "credential %s: no access token "
			    "in the gateway's snapshot", cv[i]->name);
			return -1;
		}
	return 0;
}
