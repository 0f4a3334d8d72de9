/*
 * mode: ask at the listeners (docs/approvals.md): a request no rule allows
 * is held on its sandbox's question for its destination -- client reads
 * off, its head left unread in the input, as proxy_oauth2.c parks one --
 * and read again from its start when an operator answers (the admin API
 * wakes every worker) or its deadline passes (each worker's tick).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include <event2/event.h>
#include <jansson.h>

#include "audit/audit.h"
#include "core/approval.h"
#include "core/decide.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "exchange/exchange.h"

#define APPROVAL_TICK_MS	500

/* approval.notify's socket, set once before the workers start. */
static int notify_fd = -1;

void
approval_set_notify_fd(int fd)
{
	notify_fd = fd;
}

/* A new question, as JSON, to the notifier: dropped (logged) when it lags. */
static void
notify(const char *sandbox, const char *host, uint16_t port, uint64_t id,
    uint32_t timeout_ms)
{
	struct timespec ts;
	uint64_t until;
	char *s, *m;
	size_t len;
	json_t *j;

	if (notify_fd == -1)
		return;
	j = json_pack("{s:I,s:s,s:s,s:i,s:I,s:s}", "id", (json_int_t)id,
	    "sandbox", sandbox, "host", host, "port", (int)port,
	    "expires_in_ms", (json_int_t)timeout_ms, "answer",
	    "POST /v1/approvals/ID {\"answer\": \"approve\"|\"deny\"}");
	if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		return;
	}
	/*
	 * The question's end (CLOCK_MONOTONIC ms) before it: the notifier
	 * tells no question that ended while it waited behind others.
	 */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	until = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 +
	    timeout_ms;
	len = strlen(s);
	if ((m = malloc(sizeof(until) + len)) != NULL) {
		memcpy(m, &until, sizeof(until));
		memcpy(m + sizeof(until), s, len);
	}
	if (m == NULL || send(notify_fd, m, sizeof(until) + len,
	    MSG_DONTWAIT | MSG_NOSIGNAL) == -1)
		log_warn("approval %" PRIu64 ": approval.notify not told", id);
	free(m);
	free(s);
	json_decref(j);
}

int
approval_proxy_init(struct proxy *p)
{
	pthread_mutex_init(&p->approval_mtx, NULL);
	if ((p->approvals = approval_new()) == NULL)
		return -1;
	return 0;
}

void
approval_proxy_free(struct proxy *p)
{
	if (p->approvals == NULL)
		return;
	approval_free(p->approvals);
	p->approvals = NULL;
	pthread_mutex_destroy(&p->approval_mtx);
}

void
approval_wake_all(struct proxy *p)
{
	int i;

	for (i = 0; p->workers != NULL && i < p->n_workers; i++)
		if (p->workers[i].approval_ev != NULL)
			event_active(p->workers[i].approval_ev, EV_READ, 0);
}

/* The question is still pending and within its deadline. */
static int
still_pending(struct proxy *p, uint64_t id, uint64_t now)
{
	struct approval_info q;
	int pending;

	pthread_mutex_lock(&p->approval_mtx);
	pending = approval_get(p->approvals, id, &q) == 0 &&
	    q.state == APPROVAL_PENDING && now < q.deadline_ms;
	pthread_mutex_unlock(&p->approval_mtx);
	return pending;
}

/* An answer came, or a tick: held requests whose question ended go on. */
static void
wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker *w = arg;
	struct exchange *s, **v;
	size_t n = 0, i;
	uint64_t now = fairshare_now_ms();

	(void)fd;
	(void)ev;
	/* One worker's tick drops the --for answers that ran out. */
	if (w->index == 0 && (ev & EV_TIMEOUT)) {
		pthread_mutex_lock(&w->proxy->approval_mtx);
		(void)approval_expire(w->proxy->approvals, now);
		pthread_mutex_unlock(&w->proxy->approval_mtx);
	}
	if (w->dns != NULL && w->proxy->fe->dns_held_wake != NULL)
		w->proxy->fe->dns_held_wake(w->dns);
	if (w->n_held == 0)
		return;
	TAILQ_FOREACH(s, &w->exchanges, entry)
		if (s->approval_held)
			n++;
	if (n == 0 || (v = calloc(n, sizeof(*v))) == NULL)
		return;
	n = 0;
	TAILQ_FOREACH(s, &w->exchanges, entry) {
		if (!s->approval_held)
			continue;
		if (still_pending(s->p, s->approval_id, now)) {
			/* Held is not idle: the idle timer waits too. */
			event_base_gettimeofday_cached(w->base, &s->last_active);
			continue;
		}
		v[n++] = s;
	}
	/* Each read again from its head: its answer decides it now. */
	for (i = 0; i < n; i++) {
		s = v[i];
		s->approval_held = 0;
		if (w->n_held > 0)
			w->n_held--;
		if (s->closing || s->c->cbev == NULL)
			continue;
		/*
		 * Decided on the policy in force now, not the one it was
		 * held under: a reload that denied it meanwhile refuses it
		 * (policy-deny). A request inside a tunnel keeps the
		 * tunnel's, as an established connection does.
		 */
		if (!(s->c->tunnel_http && s->c->tun != NULL)) {
			policy_unref(s->pol);
			s->pol = proxy_policy_get(s->p);
		}
		bufferevent_enable(s->c->cbev, EV_READ);
		s->p->fe->client_read(s->c->cbev, s);
	}
	free(v);
}

int
approval_worker_init(struct worker *w)
{
	struct timeval tv = { 0, APPROVAL_TICK_MS * 1000 };

	if ((w->approval_ev = event_new(w->base, -1, 0, wake_cb, w)) == NULL ||
	    (w->approval_tick = event_new(w->base, -1, EV_PERSIST, wake_cb,
	    w)) == NULL || event_add(w->approval_tick, &tv) == -1)
		return -1;
	return 0;
}

void
approval_worker_free(struct worker *w)
{
	if (w->approval_ev != NULL)
		event_free(w->approval_ev);
	if (w->approval_tick != NULL)
		event_free(w->approval_tick);
	w->approval_ev = w->approval_tick = NULL;
}

void
approval_exchange_gone(struct exchange *s)
{
	if (s->approval_id == 0 || s->p == NULL || s->p->approvals == NULL)
		return;
	pthread_mutex_lock(&s->p->approval_mtx);
	approval_leave(s->p->approvals, s->approval_id);
	pthread_mutex_unlock(&s->p->approval_mtx);
	s->approval_id = 0;
	if (s->approval_held && s->w != NULL && s->w->n_held > 0)
		s->w->n_held--;
	s->approval_held = 0;
}

static const char *
kind_word(const struct exchange *s)
{
	switch (s->c->kind) {
	case KIND_CONNECT:
		return "connect";
	case KIND_SOCKS5:
		return "socks5";
	case KIND_TRANSPARENT:
		return "transparent";
	default:
		return "http";
	}
}

/* The question's own row: asked, for whom, where. */
static void
audit_question(struct exchange *s, uint64_t id)
{
	struct audit_event ev;
	char rule[48];

	snprintf(rule, sizeof(rule), "approval:%" PRIu64, id);
	memset(&ev, 0, sizeof(ev));
	/* No client, no status: NULL (docs/audit.md), never "-" or 0. */
	ev.kind = kind_word(s);
	ev.sandbox = s->ident.sandbox;
	ev.host = s->target.host;
	ev.port = s->target.port;
	ev.asn = -1;
	ev.method = "ASK";
	ev.status = -1;
	ev.decision = VERDICT_NONE;
	ev.rule = rule;
	ev.bytes_up = ev.bytes_down = ev.duration_ms = -1;
	audit_submit(s->p->audit, &ev);
}

static void
hold(struct exchange *s, uint64_t id)
{
	s->approval_id = id;
	if (!s->approval_held) {
		s->approval_held = 1;
		s->w->n_held++;
	}
	/* Its head is read again from its start once answered. */
	if (s->c->kind != KIND_SOCKS5 && s->c->kind != KIND_TRANSPARENT)
		s->head_pending = 1;
	bufferevent_disable(s->c->cbev, EV_READ);
}

static void
set_rule(struct decision *d, uint64_t id)
{
	if (id != 0)
		snprintf(d->v.rule, sizeof(d->v.rule), "approval:%" PRIu64, id);
	else
		snprintf(d->v.rule, sizeof(d->v.rule), "approval");
}

static void
refuse(struct decision *d, enum sg_reason r, uint64_t id)
{
	d->v.allow = 0;
	d->v.ask = 0;
	d->v.reason = r;
	d->reason = r;
	d->verdict = reason_verdict(r);
	set_rule(d, id);
}

void
approval_gate(struct exchange *s, struct decision *d)
{
	struct proxy *p = s->p;
	enum approval_state st;
	uint64_t now = fairshare_now_ms(), id = s->approval_id;
	int created = 0;

	if (p->approvals == NULL || !s->has_ident || s->c->cbev == NULL ||
	    s->is_stream) {
		d->v.ask = 0;
		return;
	}
	pthread_mutex_lock(&p->approval_mtx);
	if (id != 0) {
		st = approval_collect(p->approvals, id, now);
		if (st != APPROVAL_PENDING)
			s->approval_id = 0;
	} else
		st = approval_ask(p->approvals, s->ident.sandbox,
		    d->target.host, d->target.port, now,
		    p->cfg->approval_timeout_ms, p->cfg->approval_max_pending,
		    &id, &created);
	pthread_mutex_unlock(&p->approval_mtx);
	switch (st) {
	case APPROVAL_PENDING:
		if (created) {
			log_info("approval %" PRIu64 ": sandbox %s asks for "
			    "%s:%u", id, s->ident.sandbox, d->target.host,
			    d->target.port);
			audit_question(s, id);
			notify(s->ident.sandbox, d->target.host,
			    d->target.port, id, p->cfg->approval_timeout_ms);
		}
		hold(s, id);
		set_rule(d, id);
		return;
	case APPROVAL_APPROVED:
		d->v.allow = 1;
		d->v.ask = 0;
		d->v.reason = REASON_NONE;
		d->reason = REASON_NONE;
		d->verdict = VERDICT_ALLOW;
		set_rule(d, id);
		return;
	case APPROVAL_DENIED:
		refuse(d, REASON_APPROVAL_DENIED, id);
		return;
	case APPROVAL_LIMIT:
		refuse(d, REASON_APPROVAL_LIMIT, 0);
		return;
	case APPROVAL_TIMEDOUT:
	case APPROVAL_GONE:
		refuse(d, REASON_APPROVAL_TIMEOUT, id);
		return;
	}
}

int
approval_dns_ask(void *arg, const char *sandbox, const char *host,
    uint64_t *id)
{
	struct proxy *p = arg;
	struct audit_event ev;
	enum approval_state st;
	char rule[48];
	int created = 0;

	pthread_mutex_lock(&p->approval_mtx);
	st = approval_ask(p->approvals, sandbox, host, 0, fairshare_now_ms(),
	    p->cfg->approval_timeout_ms, p->cfg->approval_max_pending, id,
	    &created);
	pthread_mutex_unlock(&p->approval_mtx);
	if (created) {
		log_info("approval %" PRIu64 ": sandbox %s asks for %s (DNS)",
		    *id, sandbox, host);
		snprintf(rule, sizeof(rule), "approval:%" PRIu64, *id);
		memset(&ev, 0, sizeof(ev));
		ev.kind = "dns";
		ev.sandbox = sandbox;
		ev.host = host;
		ev.port = -1;
		ev.asn = -1;
		ev.status = -1;
		ev.method = "ASK";
		ev.rule = rule;
		ev.bytes_up = ev.bytes_down = ev.duration_ms = -1;
		audit_submit(p->audit, &ev);
		notify(sandbox, host, 0, *id, p->cfg->approval_timeout_ms);
	}
	return (int)st;
}

int
approval_dns_collect(void *arg, uint64_t id)
{
	struct proxy *p = arg;
	enum approval_state st;

	pthread_mutex_lock(&p->approval_mtx);
	st = approval_collect(p->approvals, id, fairshare_now_ms());
	pthread_mutex_unlock(&p->approval_mtx);
	return (int)st;
}

void
approval_dns_leave(void *arg, uint64_t id)
{
	struct proxy *p = arg;

	pthread_mutex_lock(&p->approval_mtx);
	approval_leave(p->approvals, id);
	pthread_mutex_unlock(&p->approval_mtx);
}
