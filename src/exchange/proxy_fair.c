/*
 * Fair share for connections: a connection counts against its source address's
 * share from accept until its sandbox is known, then against its
 * sandbox's limits.per_sandbox until exchange_close; each request head must
 * be complete within limits.head_timeout of its start. Owns the connection's
 * two counts and its head timer.
 */
#include <stdio.h>
#include <string.h>

#include "core/fairshare.h"
#include "core/stats.h"
#include "core/log.h"
#include "core/reason.h"
#include "exchange/exchange.h"

/*
 * Answer a refused connection in its listener's protocol (status and reason
 * for HTTP); the row is the caller's.
 */
static void
fair_answer(struct exchange *s, int status, enum sg_reason reason,
    const char *detail)
{
	switch (s->c->kind) {
	case KIND_SOCKS5:
		s->p->fe->refuse_socks5(s, reason);
		break;
	case KIND_TRANSPARENT:
		s->p->fe->refuse_transparent(s, reason);
		break;
	case KIND_INGRESS:
		/* Refused at accept, before its TLS: nothing it could read. */
		exchange_close(s, CLOSE_REFUSED);
		break;
	default:
		exchange_http_error(s, status, reason, detail);
		break;
	}
}

static void
fair_refuse(struct exchange *s, enum fair_verdict v,
    const struct fair_refusal *ref)
{
	const struct config *cfg = s->p->cfg;
	char detail[160], abuf[NETADDR_STRLEN];

	if (!s->has_ident)
		snprintf(detail, sizeof(detail), "source %s has %u connections "
		    "open whose sandbox is not known yet (limits.per_sandbox."
		    "max_connections, at most half of limits.max_connections)",
		    netaddr_ntop(&s->c->client_addr, abuf, sizeof(abuf)),
		    fairshare_src_limit(s->p->fair));
	else if (v == FAIR_OVER_CONNS)
		snprintf(detail, sizeof(detail), "sandbox %s has %u connections "
		    "open (limits.per_sandbox.max_connections)",
		    s->ident.sandbox, cfg->sandbox_max_connections);
	else
		snprintf(detail, sizeof(detail), "sandbox %s opens more than %u "
		    "connections per second (limits.per_sandbox."
		    "connections_per_second)", s->ident.sandbox,
		    cfg->sandbox_conn_rate);
	s->verdict.allow = 0;
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "limits");
	/* One row per sandbox per second while it lasts; the rest are counted. */
	if (ref->audit) {
		log_info("rate-limited: %s; %llu more refusal%s since the "
		    "previous row went unaudited", detail,
		    (unsigned long long)ref->suppressed,
		    ref->suppressed == 1 ? "" : "s");
		exchange_log(s, VERDICT_DENY, 429, REASON_RATE_LIMITED);
	} else
		s->logged = 1;
	fair_answer(s, 429, REASON_RATE_LIMITED, detail);
}


/*
 * Until its sandbox is known a connection is its source's: a sandbox
 * holding partial heads (or SOCKS5 greetings) open spends its own source's
 * share, not the global limits.max_connections everyone shares. The
 * transparent listener knows the sandbox at accept (transparent_start), so
 * its connections count against the sandbox from the start.
 */
static int
conn_fair_source(struct exchange *s)
{
	struct fair_refusal ref;
	enum fair_verdict v;

	if (s->p->fair == NULL || s->c->kind == KIND_TRANSPARENT)
		return 0;
	v = fairshare_src_open(s->p->fair, &s->c->client_addr, fairshare_now_ms(),
	    &ref);
	if (v == FAIR_OK) {
		s->c->fair_src_counted = 1;
		return 0;
	}
	fair_refuse(s, v, &ref);
	return -1;
}

struct exchange *
conn_accept(struct worker *w, enum listener_kind lk, evutil_socket_t fd,
    const struct sockaddr *sa, int socklen)
{
	struct exchange *s;

	if ((s = conn_make(w, lk, fd, sa, socklen)) == NULL)
		return NULL;
	/* The first head is timed from accept; transparent's first bytes from their start. */
	if (s->c->kind != KIND_TRANSPARENT)
		conn_head_begin(s);
	if (conn_fair_source(s) == -1)
		return s;	/* refused and answered: the caller only counts */
	s->p->fe->start(s);	/* may close s: the caller only counts */
	return s;
}

int
conn_fair_admit(struct exchange *s)
{
	struct fair_refusal ref;
	enum fair_verdict v;

	/* Ingress is traffic toward a sandbox: it never spends the guest's share. */
	if (s->c->fair_counted || !s->has_ident || s->c->kind == KIND_INGRESS)
		return 0;
	/* Open connections by sandbox (/metrics, top): the first identity. */
	if (!s->c->sb_counted) {
		memcpy(s->c->fair_sandbox, s->ident.sandbox,
		    sizeof(s->c->fair_sandbox));
		stats_sandbox_conns(s->p->stats, s->c->fair_sandbox, 1);
		s->c->sb_counted = 1;
	}
	if (s->p->fair == NULL)
		return 0;
	v = fairshare_conn_open(s->p->fair, s->ident.sandbox,
	    fairshare_now_ms(), &ref);
	/* Known now: the sandbox's share holds it (or it is refused). */
	conn_fair_release_source(s);
	if (v == FAIR_OK) {
		s->c->fair_counted = 1;
		return 0;
	}
	fair_refuse(s, v, &ref);
	return -1;
}


/*
 * An HTTP/2 stream opens an origin connection of its own: it counts toward
 * its sandbox's limits.per_sandbox.max_connections while it lives, so that
 * one connection's streams cannot fill the global limits.max_connections
 * and lock the other sandboxes out. No connections_per_second token: a
 * stream is a request on a connection that took one.
 */
int
stream_fair_admit(struct exchange *s)
{
	struct fair_refusal ref;
	enum fair_verdict v;

	if (s->p->fair == NULL || !s->has_ident || s->fair_stream)
		return 0;
	v = fairshare_stream_open(s->p->fair, s->ident.sandbox,
	    fairshare_now_ms(), &ref);
	if (v == FAIR_OK) {
		s->fair_stream = 1;
		return 0;
	}
	fair_refuse(s, v, &ref);
	return -1;
}

/* Is the exchange waiting for a request head (or a SOCKS5 exchange)? */
static int
head_pending(const struct exchange *s)
{
	switch (s->state) {
	case S_HEAD:
	case S_SOCKS_GREETING:
	case S_SOCKS_AUTH:
	case S_SOCKS_REQUEST:
		return 1;
	case S_SNIFF:
		return s->c->kind == KIND_TRANSPARENT && s->c->sniffed == SNIFF_HTTP;
	default:
		return 0;
	}
}

static void
head_timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;		/* its current exchange's head */
	struct exchange *s = c->x;

	c->head_armed = 0;
	if (s == NULL || s->closing || !head_pending(s))
		return;
	/* Not a byte since accept: nothing was asked, nothing to answer. */
	if ((s->state == S_HEAD || s->state == S_SOCKS_GREETING) &&
	    (EXCHANGE_CBEV(s) == NULL ||
	    evbuffer_get_length(bufferevent_get_input(s->c->cbev)) == 0)) {
		exchange_close(s, CLOSE_TIMEOUT);
		return;
	}
	s->verdict.allow = 0;
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "limits");
	exchange_deny(s, 408, REASON_HEAD_TIMEOUT, "the request head was not "
	    "complete within limits.head_timeout");
}

/*
 * The head's clock starts once (at accept for a connection's first head,
 * at its first byte for a later one) and is not reset by the bytes that
 * trickle in: a client sending a byte every second still runs out.
 */
void
conn_head_begin(struct exchange *s)
{
	uint32_t ms = s->p->cfg->head_timeout_ms;
	struct timeval tv;

	if (ms == 0 || s->c->head_armed || s->closing || s->c->x != s)
		return;		/* a stream's head comes whole, as fields */
	/* Without a timer the idle timeout still bounds the exchange. */
	if (s->c->head_ev == NULL &&
	    (s->c->head_ev = evtimer_new(s->w->base, head_timeout_cb, s->c)) == NULL)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (evtimer_add(s->c->head_ev, &tv) == 0)
		s->c->head_armed = 1;
}

void
conn_head_done(struct exchange *s)
{
	if (s->c->x != s)
		return;		/* a stream's: the connection's head is done */
	/* An ingress head names its sandbox, whose share it never spends. */
	if (s->c->kind == KIND_INGRESS)
		conn_fair_release_source(s);
	if (!s->c->head_armed)
		return;
	evtimer_del(s->c->head_ev);
	s->c->head_armed = 0;
}

/*
 * At most this many closes owed at once: a newcomer let in over
 * max_connections waits for one of them, so the gateway holds at most this
 * many connections more than max_connections, for at most a second.
 */
#define FAIR_EVICT_MAX	8

int
proxy_fair_make_room(struct proxy *p, const struct sockaddr *sa)
{
	struct netaddr mine, top;
	uint32_t top_live, my_live;
	unsigned pending;
	size_t i;

	if (p->fair == NULL || (sa->sa_family != AF_INET &&
	    sa->sa_family != AF_INET6))
		return -1;
	netaddr_from_sockaddr(sa, &mine, NULL);
	pending = atomic_load(&p->evict_pending);
	/*
	 * Only for a source that would hold fewer than the one closed: a
	 * source filling the gateway alone is refused at its limit as ever.
	 */
	if (pending >= FAIR_EVICT_MAX || !fairshare_src_top(p->fair, &mine,
	    &top, &top_live, &my_live) || top_live <= my_live + 1)
		return -1;
	pthread_mutex_lock(&p->evict_mtx);
	p->evict_addr = top;
	p->evict_live = top_live;
	pthread_mutex_unlock(&p->evict_mtx);
	atomic_fetch_add(&p->evict_pending, 1);
	for (i = 0; i < (size_t)p->n_workers; i++)
		event_active(p->workers[i].evict_ev, EV_READ, 0);
	return 0;
}

/* Take one owed close, if any is still owed. */
static int
evict_claim(struct proxy *p)
{
	unsigned n = atomic_load(&p->evict_pending);

	while (n > 0)
		if (atomic_compare_exchange_weak(&p->evict_pending, &n, n - 1))
			return 1;
	return 0;
}

/* Close the connection: refused in its listener's protocol, with its row. */
static void
fair_evict(struct exchange *s, const struct netaddr *a, unsigned held)
{
	char detail[200], abuf[NETADDR_STRLEN];

	snprintf(detail, sizeof(detail), "max_connections reached: closed to "
	    "make room, source %s holds %u connections whose sandbox is not "
	    "known yet, more than any other", netaddr_ntop(a, abuf,
	    sizeof(abuf)), held);
	log_info("too-many-connections: %s", detail);
	atomic_fetch_add(&s->p->n_evicted, 1);
	s->verdict.allow = 0;
	snprintf(s->verdict.rule, sizeof(s->verdict.rule), "limits");
	exchange_log(s, VERDICT_DENY, 503, REASON_TOO_MANY_CONN);
	fair_answer(s, 503, REASON_TOO_MANY_CONN, detail);
}

/*
 * A worker's part of making room: its oldest connection of the source
 * named, not identified yet, if a close is still owed.
 */
void
proxy_fair_evict_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct proxy *p = w->proxy;
	struct exchange *s;
	struct netaddr a;
	unsigned held;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&p->evict_mtx);
	a = p->evict_addr;
	held = p->evict_live;
	pthread_mutex_unlock(&p->evict_mtx);
	TAILQ_FOREACH(s, &w->exchanges, entry) {
		if (s->closing || s->c->x != s ||
		    !s->c->fair_src_counted || s->has_ident ||
		    netaddr_cmp(&s->c->client_addr, &a) != 0)
			continue;
		if (evict_claim(p))
			fair_evict(s, &a, held);
		return;	/* s may be gone: the list is not walked further */
	}
}
