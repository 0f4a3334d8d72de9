/*
 * What a connection records about itself, without deciding or closing
 * anything: its phase marks, its activity and idle deadline, the tunnel's
 * decision kept for the requests inside it, the target it named, and its
 * counts in the fair share given back. The bottom of src/exchange/: it
 * calls nothing of the proxy above it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/decide.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "core/stats.h"
#include "exchange/exchange.h"

void
exchange_mark(struct exchange *s, enum phase_mark m)
{
	struct timespec now;
	int64_t us;

	struct conn *c = s->c;

	if (c->marks[m] != 0 || !log_enabled(LOG_LVL_DEBUG))
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (int64_t)(now.tv_sec - c->started.tv_sec) * 1000000 +
	    (now.tv_nsec - c->started.tv_nsec) / 1000;
	c->marks[m] = us < 0 ? 1 : us >= UINT32_MAX - 1 ? UINT32_MAX :
	    (uint32_t)us + 1;
}

static enum stats_listener
conn_listener(const struct conn *c)
{
	switch (c->kind) {
	case KIND_CONNECT:
		return STATS_LK_CONNECT;
	case KIND_SOCKS5:
		return STATS_LK_SOCKS5;
	case KIND_TRANSPARENT:
		return STATS_LK_TRANSPARENT;
	case KIND_INGRESS:
		return STATS_LK_INGRESS;
	default:
		return STATS_LK_HTTP;
	}
}

void
conn_tunnel_opened(struct exchange *s, int k)
{
	struct conn *c = s->c;

	if (c->tun_kind != 0 || s->is_stream)
		return;
	c->tun_kind = (uint8_t)(k + 1);
	stats_tunnel(s->p->stats, conn_listener(c), (enum stats_tunnel)k, 1);
}

void
conn_tunnel_closed(struct exchange *s)
{
	struct conn *c = s->c;

	if (c->tun_kind == 0)
		return;
	stats_tunnel(s->p->stats, conn_listener(c),
	    (enum stats_tunnel)(c->tun_kind - 1), -1);
	c->tun_kind = 0;
}

int
conn_tun_reserve(struct exchange *s, size_t n)
{
	struct tunnel_decision *t;

	if (s->c->tun != NULL && s->c->tun->cap >= n)
		return 0;
	if ((t = realloc(s->c->tun, sizeof(*t) + n * sizeof(t->addrs[0]))) == NULL)
		return -1;
	if (s->c->tun == NULL)
		memset(t, 0, sizeof(*t));
	t->cap = n;
	s->c->tun = t;
	return 0;
}

void
tunnel_decision_free(struct tunnel_decision *t)
{
	if (t == NULL)
		return;
	policy_unref(t->pol);
	free(t);
}

/* From here the tunnel carries HTTP, decided request by request. */
int
conn_tunnel_http(struct exchange *s)
{
	if (conn_tun_reserve(s, s->n_addrs) == -1)
		return -1;
	s->c->tunnel_http = 1;
	/* Its requests are the tunnel's identity's, on the tunnel's policy. */
	if (s->c->tun->pol != s->pol) {
		policy_unref(s->c->tun->pol);
		s->c->tun->pol = s->pol;
		policy_ref(s->c->tun->pol);
	}
	s->c->tun->has_ident = s->has_ident;
	s->c->tun->ident = s->ident;
	s->c->tun->target = s->target;
	memcpy(s->c->tun->addrs, s->addrs, s->n_addrs *
	    sizeof(s->c->tun->addrs[0]));
	s->c->tun->n_addrs = s->n_addrs;
	memcpy(s->c->tun->rule, s->verdict.rule, sizeof(s->c->tun->rule));
	return 0;
}

void
exchange_touch(struct exchange *s)
{
	event_base_gettimeofday_cached(s->w->base, &s->last_active);
}

/*
 * The destination as the client wrote it: normalised when it is a valid
 * name or address, otherwise escaped, so a refused row never says null.
 */
void
exchange_note_target(struct exchange *s, const char *host, size_t len,
    uint16_t port)
{
	(void)decide_note_target(&s->target, host, len, port);
}

void
exchange_set_idle(struct exchange *s)
{
	struct timeval tv;
	uint32_t ms = s->idle_ms ? s->idle_ms : s->p->cfg->idle_timeout_ms;

	event_base_gettimeofday_cached(s->w->base, &s->last_active);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(s->idle_ev, &tv);
}

/* The source's count, taken by conn_fair_source, given back once. */
void
conn_fair_release_source(struct exchange *s)
{
	if (!s->c->fair_src_counted)
		return;
	s->c->fair_src_counted = 0;
	fairshare_src_close(s->p->fair, &s->c->client_addr, fairshare_now_ms());
}

void
conn_fair_release(struct exchange *s)
{
	if (s->c->x != s)
		return;		/* a stream's: the connection counts */
	conn_fair_release_source(s);
	if (s->c->sb_counted) {
		s->c->sb_counted = 0;
		stats_sandbox_conns(s->p->stats, s->c->fair_sandbox, -1);
	}
	if (!s->c->fair_counted)
		return;
	s->c->fair_counted = 0;
	fairshare_conn_close(s->p->fair, s->c->fair_sandbox, fairshare_now_ms());
}

struct conn *
conn_new(void)
{
	struct conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &c->started);
	return c;
}

void
conn_unref(struct conn *c)
{
	if (c == NULL || --c->refs > 0)
		return;
	tunnel_decision_free(c->tun);
	free(c);
}

void
conn_close_timers(struct conn *c)
{
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->head_ev != NULL)
		event_free(c->head_ev);
	if (c->finish_ev != NULL)
		event_free(c->finish_ev);
	c->timer = c->head_ev = c->finish_ev = NULL;
	c->head_armed = 0;
}
