/*
 * An origin connection (struct origin): what it was opened for, and the
 * one check that a request, tunnel or upgrade may use it -- same sandbox,
 * host, port, checked address, TLS or not, credentials or not
 * (docs/policy.md); every path that writes to an origin passes through
 * upstream_guard() (proxy_upstream.c) first. Between exchanges it waits in
 * its worker's pool, bound to its decision, for the next exchange of that
 * same decision, on whichever of the sandbox's client connections
 * (upstream_take, upstream_keep): an idle tunnel holds no origin
 * connection, and a burst of short connections reuses a few.
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

/* The binding the exchange's decision asks for (address aside). */
void
origin_bind_want(const struct exchange *s, struct origin_bind *b)
{
	memset(b, 0, sizeof(*b));
	if (s->has_ident)
		memcpy(b->sandbox, s->ident.sandbox, sizeof(b->sandbox));
	memcpy(b->host, s->target.host, sizeof(b->host));
	b->port = s->target.port;
	b->is_ip = s->target.is_ip;
	b->ingress = s->c->kind == KIND_INGRESS;
	/* Ingress TLS ends at the gateway; the guest is spoken to in plain. */
	b->tls = s->c->intercepted && !b->ingress;
	b->creds = b->tls && cred_host_bound(s);
}

/* Record what the connection that just opened was opened for, in it. */
void
origin_bind_set(struct exchange *s, const struct netaddr *addr)
{
	s->fwd.ip = *addr;	/* the exchange's row names where it went */
	if (s->o == NULL)
		return;
	origin_bind_want(s, &s->o->bind);
	s->o->bind.addr = *addr;
}

/* 1 when the exchange's origin was opened for its decision, at one of addrs. */
static int
bound_for(struct exchange *s, const struct netaddr *addrs, size_t n)
{
	struct origin_bind want;

	if (s->o == NULL)
		return 0;
	origin_bind_want(s, &want);
	return origin_bind_match(&s->o->bind, &want, addrs, n);
}

int
upstream_reusable(struct exchange *s)
{
	return bound_for(s, s->addrs, s->n_addrs);
}

struct origin *
origin_new(struct worker *w, struct bufferevent *bev)
{
	struct origin *o;

	if (bev == NULL || (o = calloc(1, sizeof(*o))) == NULL)
		return NULL;
	o->w = w;
	o->bev = bev;
	return o;
}

void
origin_close(struct origin *o)
{
	if (o == NULL)
		return;
	if (o->kept) {
		TAILQ_REMOVE(&o->w->pool, o, entry);
		o->w->n_pool--;
	}
	proxy_tls_origin_close(o->bev);
	if (o->timer != NULL)
		event_free(o->timer);
	free(o);
}

/* A kept one leaves its worker's pool. */
static void
kept_remove(struct origin *o)
{
	TAILQ_REMOVE(&o->w->pool, o, entry);
	o->w->n_pool--;
	o->kept = 0;
}

/* Bytes nobody asked for, its close or its timeout: it cannot be reused. */
static void
kept_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	origin_close(arg);
}

static void
kept_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	origin_close(arg);
}

static void
kept_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct origin *o = arg;
	struct worker *w = o->w;

	(void)fd;
	(void)what;
	origin_close(o);
	proxy_worker_trim(w);
}

/*
 * s's origin connection into the worker's pool, for upstream.keepalive_
 * timeout: to be taken by a later exchange of the same decision, or,
 * retired, never -- only left to write what it still holds (the rest of a
 * body an early answer came before: csock flushes it on its own) and
 * closed by its timer, or when it reads, closes or errs.
 */
static int
pool_in(struct exchange *s, int retired)
{
	uint32_t ms = s->p->cfg->keepalive_timeout_ms;
	struct origin *o = s->o;
	struct conn *c = s->c;
	struct worker *w;
	struct timeval tv;
	SSL *ssl;

	/* A connection closing keeps nothing of what it was doing. */
	if (ms == 0 || o == NULL || o->bind.host[0] == '\0' ||
	    c->x == NULL || c->x->closing ||
	    evbuffer_get_length(bufferevent_get_input(o->bev)) > 0)
		return -1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (o->timer == NULL &&
	    (o->timer = evtimer_new(o->w->base, kept_timeout_cb, o)) == NULL)
		return -1;
	if (evtimer_add(o->timer, &tv) == -1)
		return -1;
	w = o->w;
	while (w->n_pool >= ORIGIN_POOL_MAX && !TAILQ_EMPTY(&w->pool))
		origin_close(TAILQ_FIRST(&w->pool));
	s->o = NULL;
	/* No exchange answers for it now (origin_new_session_cb). */
	if ((ssl = bufferevent_openssl_get_ssl(o->bev)) != NULL)
		SSL_set_app_data(ssl, NULL);
	bufferevent_setcb(o->bev, kept_read_cb, NULL, kept_event_cb, o);
	bufferevent_enable(o->bev, EV_READ);
	o->kept = 1;
	o->retired = retired;
	TAILQ_INSERT_TAIL(&w->pool, o, entry);
	w->n_pool++;
	return 0;
}

int
upstream_keep_in(struct exchange *s)
{
	return pool_in(s, 0);
}

int
upstream_retire(struct exchange *s)
{
	return pool_in(s, 1);
}

/* o, kept, becomes s's exchange's. */
static void
take(struct exchange *s, struct origin *o)
{
	SSL *ssl;

	kept_remove(o);
	evtimer_del(o->timer);
	s->o = o;
	if ((ssl = bufferevent_openssl_get_ssl(o->bev)) != NULL)
		SSL_set_app_data(ssl, s);
	/*
	 * No callbacks of the pool's (they would close it under the
	 * exchange): the exchange's forwarding sets its own, in this same
	 * pass; reading stays on, so that taking it costs no system call.
	 */
	bufferevent_setcb(o->bev, NULL, NULL, NULL, NULL);
}

int
upstream_take(struct exchange *s)
{
	struct origin_bind want;
	struct origin *o;

	if (s->o != NULL)
		return 0;
	origin_bind_want(s, &want);
	/* The most recently kept first: the warmest, the furthest from its timeout. */
	TAILQ_FOREACH_REVERSE(o, &s->w->pool, origin_pool, entry)
		if (!o->retired && origin_bind_match(&o->bind, &want, s->addrs,
		    s->n_addrs))
			break;
	if (o == NULL)
		return 0;
	take(s, o);
	return 1;
}

int
upstream_keep(struct exchange *s)
{
	struct origin_bind want;
	struct origin *o;

	if (s->o == NULL) {
		origin_bind_want(s, &want);
		TAILQ_FOREACH_REVERSE(o, &s->w->pool, origin_pool, entry)
			if (!o->retired && origin_bind_match(&o->bind, &want,
			    &o->bind.addr, 1))
				break;
		if (o == NULL)
			return 0;
		take(s, o);
	}
	if (!bound_for(s, &s->o->bind.addr, 1))
		return 0;
	(void)exchange_set_addrs(s, &s->o->bind.addr, 1);	/* inline */
	s->addr_next = 1;
	return 1;
}

void
origin_pool_clear(struct worker *w)
{
	while (!TAILQ_EMPTY(&w->pool))
		origin_close(TAILQ_FIRST(&w->pool));
}
