/*
 * The exchange as data: one decision and what it carries, in memory of its
 * own (struct exchange in exchange.h), made and freed whole; its
 * address stage and its row. A connection has one current own exchange; a
 * new request gets a new one and the old one goes whole
 * (proxy_life.c), so no field of a request is reset by hand for the
 * next, and none survives it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "core/decide.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "core/reason.h"
#include "core/stats.h"
#include "exchange/exchange.h"
#include "vault/vault.h"

/*
 * Room for the two events exchange_open() assigns (free_ev, idle_ev) after
 * the struct, in the same allocation: a request costs one malloc less per
 * event. libevent gives struct event's size at run time.
 */
struct exchange *
exchange_new(void)
{
	struct exchange *x;

	if ((x = calloc(1, sizeof(*x) + EXCHANGE_EVENTS *
	    event_get_struct_event_size())) == NULL)
		return NULL;
	x->addrs = x->addr_inline;
	clock_gettime(CLOCK_MONOTONIC, &x->started);
	return x;
}

/* The i-th event's room after the struct (exchange_new). */
struct event *
exchange_event_room(struct exchange *x, int i)
{
	return (struct event *)(void *)((char *)(x + 1) +
	    (size_t)i * event_get_struct_event_size());
}

int
exchange_set_addrs(struct exchange *x, const struct netaddr *a, size_t n)
{
	struct netaddr *to = x->addr_inline;

	if (n > PROXY_MAX_ADDRS)
		n = PROXY_MAX_ADDRS;
	if (n > EXCHANGE_INLINE_ADDRS) {
		if (x->addr_more == NULL && (x->addr_more = exchange_alloc(x,
		    PROXY_MAX_ADDRS * sizeof(*to))) == NULL)
			return -1;
		to = x->addr_more;
	}
	if (n > 0)
		memmove(to, a, n * sizeof(*to));
	x->addrs = to;
	x->n_addrs = n;
	x->addr_next = 0;
	return 0;
}

void
exchange_verdict(const struct exchange *x, enum sg_verdict *decision,
    enum sg_reason *reason)
{
	/* mode: report -- what passed but the policy would have denied. */
	if (*decision == VERDICT_ALLOW && x->verdict.report != REASON_NONE) {
		*decision = VERDICT_REPORT;
		if (*reason == REASON_NONE)
			*reason = x->verdict.report;
	}
}

/* A number of the row, or "-" when it has none (negative). */
static const char *
row_num(int64_t v, char *buf, size_t len)
{
	if (v < 0)
		return "-";
	snprintf(buf, len, "%lld", (long long)v);
	return buf;
}

/*
 * The row's log line: every denial and error at info, a credential's
 * misuse (its placeholder toward another host or outside its scope, a key
 * of the sandbox's own or none toward its host) at warning, allowed traffic only at debug (a write per
 * request is the largest cost on a kept-alive connection). The path is
 * escaped only when a line is written.
 */
static void
exchange_log_line(const struct audit_event *ev, enum sg_reason reason)
{
	void (*line)(const char *, ...) __attribute__((format(printf, 1, 2))) =
	    reason == REASON_CRED_MISUSE || reason == REASON_FOREIGN_CRED ||
	    reason == REASON_CRED_REQUIRED || reason == REASON_CRED_SCOPE ?
	    log_warnx : log_info;
	char path[256] = "-", port[24], status[24], up[24], down[24];

	if (ev->decision == VERDICT_ALLOW && !log_enabled(LOG_LVL_DEBUG))
		return;
	if (ev->path != NULL)
		log_escape(ev->path, strlen(ev->path), path, sizeof(path));
	line("%s %s sandbox=%s client=%s host=%s port=%s ip=%s method=%s "
	    "path=%s status=%s rule=%s reason=%s up=%s down=%s ms=%lld",
	    verdict_word(ev->decision), ev->kind,
	    ev->sandbox != NULL ? ev->sandbox : "-",
	    ev->client != NULL ? ev->client : "-",
	    ev->host != NULL ? ev->host : "-",
	    row_num(ev->port, port, sizeof(port)),
	    ev->ip != NULL ? ev->ip : "-",
	    ev->method != NULL ? ev->method : "-", path,
	    row_num(ev->status, status, sizeof(status)),
	    ev->rule != NULL ? ev->rule : "-",
	    ev->reason != NULL ? ev->reason : "-",
	    row_num(ev->bytes_up, up, sizeof(up)),
	    row_num(ev->bytes_down, down, sizeof(down)),
	    (long long)ev->duration_ms);
}

static int64_t
between_us(const struct timespec *t0, const struct timespec *t1)
{
	return (int64_t)(t1->tv_sec - t0->tv_sec) * 1000000 +
	    (t1->tv_nsec - t0->tv_nsec) / 1000;
}

static int64_t
since_us(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return between_us(t0, &now);
}

void
exchange_stamp(struct exchange *x, int64_t *at, const struct timespec *when)
{
	int64_t us;

	if (*at != 0)
		return;
	us = when != NULL ? between_us(&x->started, when) : since_us(&x->started);
	*at = us < 1 ? 1 : us;
}

/* b - a when both happened in that order, else -1 (not observed). */
static int64_t
span(int64_t a, int64_t b)
{
	return a != 0 && b != 0 && b >= a ? b - a : -1;
}

int
exchange_audit(struct exchange *x, struct audit *a, struct stats *st,
    struct audit_event *ev, enum sg_verdict decision, enum sg_reason reason)
{
	struct stats_exchange se;
	int64_t us;

	x->logged = 1;
	exchange_verdict(x, &decision, &reason);
	if (ev->host == NULL && x->row_host != NULL)
		ev->host = x->row_host;
	if (ev->host == NULL && x->target.host[0] != '\0')
		ev->host = x->target.host;
	ev->decision = decision;
	ev->reason = reason_word(reason);
	ev->rule = x->verdict.rule[0] != '\0' ? x->verdict.rule : NULL;
	ev->credential = x->fwd.plan.cred[0] != '\0' ? x->fwd.plan.cred : NULL;
	us = since_us(&x->started);
	ev->duration_ms = us / 1000;
	exchange_log_line(ev, reason);
	if (st != NULL) {
		se.kind = ev->kind;
		se.decision = decision;
		se.reason = reason;
		se.sandbox = ev->sandbox;
		se.credential = ev->credential;
		se.bytes_up = ev->bytes_up;
		se.bytes_down = ev->bytes_down;
		se.decision_us = x->t.decided != 0 ? x->t.decided : -1;
		se.exchange_us = us;
		se.connect_us = span(x->t.connect, x->t.tcp);
		se.tls_us = span(x->t.tcp, x->t.tls);
		se.first_byte_us = span(x->t.sent, x->t.head);
		stats_count(st, &se);
	}
	if (a == NULL)
		return 0;
	return audit_submit(a, ev);
}

enum sg_reason
exchange_check_addrs(struct exchange *x, const struct decide_env *env,
    const struct netaddr *addrs, size_t n)
{
	struct decision d;

	memset(&d, 0, sizeof(d));
	d.target = x->target;
	d.v = x->verdict;
	(void)decide_addrs(env, x->has_ident ? &x->ident : NULL, addrs, n, &d);
	x->verdict = d.v;
	if (d.geo_failed)
		log_warnx("geoip: lookup failed (corrupt database?)");
	if (d.has_refused)
		x->fwd.ip = d.refused;
	return d.reason;
}

void
exchange_free(struct exchange *x)
{
	if (x == NULL)
		return;
	if (x->dlp_free != NULL)
		x->dlp_free(x->dlp);
	free(x->tw);		/* plain memory (proxy_tlswatch.c) */
	if (x->fair_stream && x->p != NULL && x->p->fair != NULL)
		fairshare_conn_close(x->p->fair, x->ident.sandbox,
		    fairshare_now_ms());
	approval_exchange_gone(x);
	policy_unref(x->pol);
	cred_plan_free(&x->fwd.plan);
	if (x->fwd.head != NULL)
		evbuffer_free(x->fwd.head);
	if (x->fwd.scrub != NULL)
		vault_scrubber_free(x->fwd.scrub);
	exchange_mem_free(x);	/* path, body tail, addresses */
	free(x);
}

