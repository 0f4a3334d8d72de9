/*
 * What an origin connection was opened for, and the one check that a
 * request, tunnel or upgrade may use it: same sandbox, host, port, checked
 * address, TLS or not, credentials or not (docs/policy.md). Every path that
 * writes to an origin passes through upstream_guard() first.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"

int
origin_bind_match(const struct origin_bind *have, const struct origin_bind *want,
    const struct netaddr *addrs, size_t n)
{
	size_t i;

	if (have->host[0] == '\0' || have->port != want->port ||
	    have->is_ip != want->is_ip || have->tls != want->tls ||
	    have->creds != want->creds || have->ingress != want->ingress ||
	    strcmp(have->sandbox, want->sandbox) != 0 ||
	    strcmp(have->host, want->host) != 0)
		return 0;
	/* The address it is connected to must be one this decision checked. */
	for (i = 0; i < n; i++)
		if (netaddr_cmp(&have->addr, &addrs[i]) == 0)
			return 1;
	return 0;
}

/* The binding the session's current decision asks for (address aside). */
void
origin_bind_want(const struct session *s, struct origin_bind *b)
{
	memset(b, 0, sizeof(*b));
	if (s->x->has_ident)
		memcpy(b->sandbox, s->x->ident.sandbox, sizeof(b->sandbox));
	memcpy(b->host, s->x->target.host, sizeof(b->host));
	b->port = s->x->target.port;
	b->is_ip = s->x->target.is_ip;
	b->ingress = s->c->kind == KIND_INGRESS;
	/* Ingress TLS ends at the gateway; the guest is spoken to in plain. */
	b->tls = s->c->intercepted && !b->ingress;
	b->creds = b->tls && cred_host_bound(s);
}

/*
 * Record what the connection that just opened was opened for, beside it
 * (allocated with it: a connection without an origin holds none). Out of
 * memory there is no record, and upstream_guard() refuses to write to it.
 */
void
origin_bind_set(struct session *s, const struct netaddr *addr)
{
	s->x->fwd.ip = *addr;	/* the exchange's row names where it went */
	if (s->ob == NULL && (s->ob = malloc(sizeof(*s->ob))) == NULL)
		return;
	origin_bind_want(s, s->ob);
	s->ob->addr = *addr;
}

/* 1 when obev is there and was opened for the current decision, at one of addrs. */
static int
bound_for(struct session *s, const struct netaddr *addrs, size_t n)
{
	struct origin_bind want;

	if (s->obev == NULL || s->ob == NULL)
		return 0;
	origin_bind_want(s, &want);
	return origin_bind_match(s->ob, &want, addrs, n);
}

int
upstream_reusable(struct session *s)
{
	return bound_for(s, s->x->addrs, s->x->n_addrs);
}

int
upstream_keep(struct session *s)
{
	if (s->ob == NULL || !bound_for(s, &s->ob->addr, 1))
		return 0;
	(void)exchange_set_addrs(s->x, &s->ob->addr, 1);	/* inline */
	s->x->addr_next = 1;
	return 1;
}

int
upstream_guard(struct session *s)
{
	if (upstream_reusable(s))
		return 0;
	/* A broken invariant, not a peer's doing: fail closed, never write. */
	log_warnx("session %llu: origin connection not opened for %s:%u; "
	    "closed before any byte was written", (unsigned long long)s->id,
	    s->x->target.host, s->x->target.port);
	s->x->verdict.allow = 0;
	if (SESSION_IS_HTTP(s) && !s->x->fwd.resp_head_done) {
		session_deny(s, 502, REASON_INTERNAL_ERROR,
		    "internal error: origin connection mismatch");
		return -1;
	}
	exchange_log(s, VERDICT_ERROR, 502, REASON_INTERNAL_ERROR);
	session_close(s, CLOSE_FAILED);
	return -1;
}

struct kept_origin {
	TAILQ_ENTRY(kept_origin) entry;
	struct origin_pool	*pool;
	struct worker		*w;
	struct bufferevent	*bev;
	struct origin_bind	*ob;	/* what bev was opened for */
	struct event		*timer;	/* upstream.keepalive_timeout */
};

static void
kept_free(struct kept_origin *k)
{
	TAILQ_REMOVE(k->pool, k, entry);
	proxy_tls_origin_close(k->bev);
	free(k->ob);
	event_free(k->timer);
	free(k);
}

/* Bytes nobody asked for, its close or its timeout: it cannot be reused. */
static void
kept_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	kept_free(arg);
}

static void
kept_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	kept_free(arg);
}

static void
kept_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kept_origin *k = arg;
	struct worker *w = k->w;

	(void)fd;
	(void)what;
	kept_free(k);
	proxy_worker_trim(w);
}

int
upstream_keep_in(struct session *s, struct origin_pool *pool)
{
	uint32_t ms = s->p->cfg->keepalive_timeout_ms;
	struct kept_origin *k;
	struct timeval tv;
	SSL *ssl;

	if (ms == 0 || s->obev == NULL || s->ob == NULL ||
	    evbuffer_get_length(bufferevent_get_input(s->obev)) > 0 ||
	    (k = calloc(1, sizeof(*k))) == NULL)
		return -1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if ((k->timer = evtimer_new(s->w->base, kept_timeout_cb, k)) == NULL ||
	    evtimer_add(k->timer, &tv) == -1) {
		if (k->timer != NULL)
			event_free(k->timer);
		free(k);
		return -1;
	}
	if (s->pool_ev != NULL)
		evtimer_del(s->pool_ev);	/* the pool times it now */
	k->pool = pool;
	k->w = s->w;
	k->bev = s->obev;
	k->ob = s->ob;
	s->obev = NULL;
	s->ob = NULL;
	/* No session answers for it now (origin_new_session_cb). */
	if ((ssl = bufferevent_openssl_get_ssl(k->bev)) != NULL)
		SSL_set_app_data(ssl, NULL);
	bufferevent_setcb(k->bev, kept_read_cb, NULL, kept_event_cb, k);
	bufferevent_enable(k->bev, EV_READ);
	TAILQ_INSERT_TAIL(pool, k, entry);
	return 0;
}

int
upstream_take(struct session *s, struct origin_pool *pool)
{
	struct origin_bind want;
	struct kept_origin *k;
	SSL *ssl;

	if (s->obev != NULL)
		return 0;
	origin_bind_want(s, &want);
	TAILQ_FOREACH(k, pool, entry)
		if (origin_bind_match(k->ob, &want, s->x->addrs, s->x->n_addrs))
			break;
	if (k == NULL)
		return 0;
	TAILQ_REMOVE(pool, k, entry);
	s->obev = k->bev;
	s->ob = k->ob;
	if ((ssl = bufferevent_openssl_get_ssl(s->obev)) != NULL)
		SSL_set_app_data(ssl, s);
	/* Quiet until the session's forwarding sets its own callbacks. */
	bufferevent_disable(s->obev, EV_READ | EV_WRITE);
	bufferevent_setcb(s->obev, NULL, NULL, NULL, NULL);
	event_free(k->timer);
	free(k);
	return 1;
}

void
origin_pool_clear(struct origin_pool *pool)
{
	while (!TAILQ_EMPTY(pool))
		kept_free(TAILQ_FIRST(pool));
}
