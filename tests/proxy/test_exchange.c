/*
 * Unit test of the exchange (proxy_exchange.c, issue 23 point 1): a new
 * request's exchange holds nothing of the last one's -- verdict, status,
 * path, counters, credential, addresses, the scanned body tail, whether
 * its row was written -- and
 * starts from what the connection decided: inside a tunnel the tunnel's
 * target, rule and checked addresses, on ingress the rule "ingress", on the
 * explicit proxy nothing. The old one goes whole (ASan's leak check runs
 * this under the sanitizer build).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "audit/audit.h"
#include "check.h"
#include "core/stats.h"
#include "core/diag.h"
#include "exchange/exchange.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

/* The gateway the sessions belong to: only its current policy is asked. */
static struct proxy	 px;
static struct policy	*pol_a, *pol_b;

static struct policy *
load_policy(const char *name)
{
	char path[] = "/tmp/sg-test-exchange-XXXXXX";
	char *paths[1] = { path };
	struct policy *p;
	struct diag d;
	FILE *f;
	int fd;

	CHECK((fd = mkstemp(path)) != -1);
	CHECK((f = fdopen(fd, "w")) != NULL);
	fprintf(f, "policies:\n  - name: %s\n    allow:\n"
	    "      - host: example.com\n", name);
	fclose(f);
	diag_init(&d);
	p = policy_load_paths(paths, 1, &d);
	if (p == NULL)
		diag_print(&d, stderr);
	unlink(path);
	CHECK(p != NULL);
	return p;
}

/* An exchange that has seen a whole request: every field written. */
static void
dirty(struct exchange *x)
{
	CHECK_INT(policy_target_init(&x->target, "used.example.com", 16, 443), 0);
	x->verdict.allow = 1;
	strcpy(x->verdict.rule, "p:allow[3]");
	x->verdict.tls = POLICY_TLS_INTERCEPT;
	x->has_ident = 1;
	strcpy(x->ident.sandbox, "last-request");
	strcpy(x->ident.policy, "last");
	x->fwd.request = 1;
	x->fwd.status = 200;
	x->up = 10;
	x->down = 20;
	x->started.tv_sec = 1;	/* long before any exchange made now */
	x->started.tv_nsec = 0;
	x->fwd.switched = 1;
	strcpy(x->fwd.method, "POST");
	x->fwd.path = exchange_strndup(x, "/secret/path", 12);
	CHECK(x->fwd.path != NULL);
	strcpy(x->fwd.plan.cred, "gh");
	CHECK_INT(netaddr_parse("198.18.0.9", 10, &x->fwd.ip), 0);
	CHECK_INT(netaddr_parse("198.18.0.10", 11, &x->addrs[0]), 0);
	x->n_addrs = 1;
	x->addr_next = 1;
	x->body_tail = exchange_alloc(x, sizeof(*x->body_tail));
	CHECK(x->body_tail != NULL);
	memcpy(x->body_tail->buf, "sg-ph", 5);
	x->body_tail->len = 5;
	/* A head built for the origin, with a secret swapped in, never sent. */
	x->fwd.head = evbuffer_new();
	CHECK(x->fwd.head != NULL);
	CHECK_INT(evbuffer_add_printf(x->fwd.head, "GET / HTTP/1.1\r\n"
	    "Authorization: Bearer real-secret\r\n\r\n") > 0, 1);
	x->logged = 1;
}

/* Nothing of a request in x: what a new exchange may hold besides its seed. */
static void
check_fresh(const struct exchange *x, const char *name)
{
	CHECK_MSG(x->verdict.allow == 0 && x->verdict.tls == 0, "%s: verdict",
	    name);
	CHECK_MSG(x->fwd.request == 0 && x->fwd.status == 0 &&
	    x->fwd.switched == 0, "%s: request state", name);
	/* No head of another request to send (the old one went with it). */
	CHECK_MSG(x->fwd.head == NULL, "%s: head", name);
	/* Its row's measures are its own: no byte, and timed from its start. */
	CHECK_MSG(x->up == 0 && x->down == 0, "%s: bytes", name);
	CHECK_MSG(x->started.tv_sec > 1, "%s: started", name);
	CHECK_MSG(x->fwd.method[0] == '\0' && x->fwd.path == NULL, "%s: path",
	    name);
	CHECK_MSG(x->fwd.plan.cred[0] == '\0' && x->fwd.plan.x == NULL &&
	    x->fwd.plan.snap == NULL, "%s: credential", name);
	CHECK_MSG(x->fwd.ip.family == 0, "%s: ip", name);
	CHECK_MSG(x->addr_next == 0 && x->body_tail == NULL, "%s: progress",
	    name);
	/* A new exchange's row is its own, still to be written. */
	CHECK_MSG(x->logged == 0, "%s: row", name);
}

/* Client socket callbacks: only their argument is looked at. */
static void
on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)arg;
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	(void)arg;
}

/* The worker the exchanges run on: its loop frees the ones that ended. */
static struct worker	 wk;
static struct config	 cfg;

static struct exchange *
session_of(enum conn_kind kind)
{
	struct conn *c = conn_new();
	struct exchange *s;

	CHECK(c != NULL);
	c->kind = kind;
	s = exchange_open(&wk, c, 0);
	CHECK(s != NULL);
	c->x = s;
	s->pol = proxy_policy_get(&px);
	return s;
}

/*
 * The connection's next exchange: a new one, current, on the worker's
 * list; the old one ended (inert, off the list), freed by the loop.
 */
static struct exchange *
next_of(struct exchange *s)
{
	struct exchange *n = exchange_next(s);

	CHECK(n != NULL && n != s);
	CHECK(s->closing && n->c == s->c && s->c->x == n && !n->closing);
	CHECK(TAILQ_LAST(&wk.exchanges, exchange_tq) == n);
	return n;
}

static void
done(struct exchange *s)
{
	exchange_retire(s);
	/* The ended ones freed, with the connection and its tunnel's decision. */
	CHECK(event_base_loop(wk.base, EVLOOP_NONBLOCK) != -1);
	CHECK(TAILQ_EMPTY(&wk.exchanges));
}

struct counted {
	int			 n;
	enum stats_listener	 lk;
	enum sg_verdict		 v;
	enum sg_reason		 r;
};

static void
count_cb(enum stats_listener lk, enum sg_verdict v, enum sg_reason r,
    unsigned long long n, void *arg)
{
	struct counted *c = arg;

	c->n += (int)n;
	c->lk = lk;
	c->v = v;
	c->r = r;
}

int
main(void)
{
	struct exchange *old;
	struct exchange *s;
	char ip[32];
	size_t i;

	pol_a = load_policy("first");
	pol_b = load_policy("second");
	pthread_mutex_init(&px.pol_mtx, NULL);
	px.pol = pol_a;
	px.n_workers = 1;
	cfg.idle_timeout_ms = 60000;
	px.cfg = &cfg;
	px.parts = &proxy_exchange_parts;
	wk.proxy = &px;
	CHECK((wk.base = event_base_new()) != NULL);
	TAILQ_INIT(&wk.exchanges);

	/*
	 * The explicit proxy: nothing carried at all -- no identity, and the
	 * policy current when the request came, not the last request's.
	 */
	s = session_of(KIND_HTTP);
	dirty(s);
	old = s;
	CHECK(s->pol == pol_a);
	px.pol = pol_b;			/* a reload between two requests */
	s = next_of(s);
	CHECK(s != old);
	check_fresh(s, "http");
	CHECK_STR(s->target.host, "");
	CHECK_STR(s->verdict.rule, "");
	CHECK_INT((int)s->n_addrs, 0);
	CHECK_MSG(s->has_ident == 0 && s->ident.sandbox[0] == '\0',
	    "http: identity carried");
	CHECK_MSG(s->pol == pol_b, "http: not the current policy");
	done(s);
	px.pol = pol_a;

	/*
	 * The client socket follows the connection's current exchange: its
	 * callbacks, set with the old one, act on the new one (never on an
	 * exchange that ended); a socket set up for something else is left
	 * alone. Nothing of the old one's origin side is the new one's.
	 */
	{
		struct bufferevent *pair[2];
		bufferevent_data_cb rcb;
		bufferevent_event_cb ecb;
		void *arg;

		s = session_of(KIND_HTTP);
		CHECK_INT(bufferevent_pair_new(wk.base, 0, pair), 0);
		s->c->cbev = pair[0];
		bufferevent_setcb(pair[0], on_read, NULL, on_event, s);
		s = next_of(s);
		bufferevent_getcb(pair[0], &rcb, NULL, &ecb, &arg);
		CHECK(arg == s && rcb == on_read && ecb == on_event);
		CHECK(s->o == NULL && s->h2o == NULL && s->rq == NULL);
		bufferevent_setcb(pair[0], on_read, NULL, on_event, &wk);
		s = next_of(s);
		bufferevent_getcb(pair[0], NULL, NULL, NULL, &arg);
		CHECK(arg == (void *)&wk);
		s->c->cbev = NULL;
		done(s);
		bufferevent_free(pair[0]);
		bufferevent_free(pair[1]);
	}

	/* Ingress: its rule, nothing else. */
	s = session_of(KIND_INGRESS);
	dirty(s);
	s = next_of(s);
	check_fresh(s, "ingress");
	CHECK_STR(s->verdict.rule, "ingress");
	CHECK_STR(s->target.host, "");
	done(s);

	/*
	 * Inside a tunnel: the tunnel's decision, not the last request's
	 * (whose target and addresses differ from it here).
	 */
	s = session_of(KIND_CONNECT);
	s->c->tunnel_http = 1;
	CHECK_INT(conn_tun_reserve(s, 2), 0);
	CHECK(s->c->tun != NULL && s->c->tun->cap == 2 && s->c->tun->n_addrs == 0);
	strcpy(s->c->tun->rule, "p:allow[0]");
	s->c->tun->pol = pol_a;		/* what conn_tunnel_http hands it */
	policy_ref(pol_a);
	s->c->tun->has_ident = 1;
	strcpy(s->c->tun->ident.sandbox, "tunnel-sb");
	CHECK_INT(policy_target_init(&s->c->tun->target, "tunnel.example.com", 18,
	    8443), 0);
	CHECK_INT(netaddr_parse("198.18.0.1", 10, &s->c->tun->addrs[0]), 0);
	CHECK_INT(netaddr_parse("198.18.0.2", 10, &s->c->tun->addrs[1]), 0);
	s->c->tun->n_addrs = 2;
	dirty(s);
	s = next_of(s);
	check_fresh(s, "tunnel");
	CHECK_STR(s->verdict.rule, "p:allow[0]");
	CHECK_STR(s->target.host, "tunnel.example.com");
	CHECK_INT(s->target.port, 8443);
	CHECK_INT((int)s->n_addrs, 2);
	CHECK(netaddr_cmp(&s->addrs[1], &s->c->tun->addrs[1]) == 0);
	CHECK_STR(s->ident.sandbox, "tunnel-sb");
	CHECK(s->has_ident == 1);
	/* ... and again: each request starts from the tunnel, not the last one. */
	dirty(s);
	px.pol = pol_b;			/* a reload: the tunnel keeps its policy */
	s = next_of(s);
	CHECK_MSG(s->pol == pol_a, "tunnel: not the tunnel's policy");
	CHECK_STR(s->ident.sandbox, "tunnel-sb");
	px.pol = pol_a;
	check_fresh(s, "tunnel, second");
	CHECK_STR(s->target.host, "tunnel.example.com");
	CHECK_INT((int)s->n_addrs, 2);
	done(s);

	/* More addresses than fit inline: their own memory, freed with it. */
	s = session_of(KIND_CONNECT);
	s->c->tunnel_http = 1;
	CHECK_INT(conn_tun_reserve(s, 6), 0);
	for (i = 0; i < 6; i++) {
		snprintf(ip, sizeof(ip), "198.18.1.%zu", i + 1);
		CHECK_INT(netaddr_parse(ip, strlen(ip), &s->c->tun->addrs[i]), 0);
	}
	s->c->tun->n_addrs = 6;
	s = next_of(s);
	CHECK_INT((int)s->n_addrs, 6);
	CHECK(s->addrs != s->addr_inline);
	CHECK(netaddr_cmp(&s->addrs[5], &s->c->tun->addrs[5]) == 0);
	CHECK_INT(exchange_set_addrs(s, &s->c->tun->addrs[2], 1), 0);
	CHECK(s->addrs == s->addr_inline && s->n_addrs == 1);
	CHECK(netaddr_cmp(&s->addrs[0], &s->c->tun->addrs[2]) == 0);
	CHECK_INT(exchange_set_addrs(s, s->c->tun->addrs, 6), 0);
	s = next_of(s);	/* the old one's array goes with it */
	done(s);

	/*
	 * Its own memory: zeroed, aligned, in chunks as large as asked, and
	 * all of it freed with the exchange (ASan's leak check says so).
	 */
	{
		struct exchange *x = exchange_new();
		unsigned char *a, *b, *big;
		char *p;

		CHECK(x != NULL);
		a = exchange_alloc(x, 3);
		b = exchange_alloc(x, 5);
		CHECK(a != NULL && b != NULL && a != b);
		CHECK((uintptr_t)a % _Alignof(max_align_t) == 0);
		CHECK((uintptr_t)b % _Alignof(max_align_t) == 0);
		CHECK(a[0] == 0 && a[2] == 0 && b[4] == 0);
		memset(a, 0xaa, 3);
		CHECK(b[0] == 0);	/* no overlap */
		big = exchange_alloc(x, 9000);	/* past a chunk: its own */
		CHECK(big != NULL && big[8999] == 0);
		p = exchange_strndup(x, "/path?q=1", 5);
		CHECK(p != NULL);
		CHECK_STR(p, "/path");
		p = exchange_strndup(x, "", 0);
		CHECK(p != NULL && p[0] == '\0');
		CHECK(exchange_alloc(x, SIZE_MAX - 4) == NULL);
		CHECK(exchange_strndup(x, "x", SIZE_MAX) == NULL);
		/* The addresses beyond the inline ones come from it, once. */
		{
			struct netaddr many[PROXY_MAX_ADDRS];

			memset(many, 0, sizeof(many));
			for (i = 0; i < PROXY_MAX_ADDRS; i++)
				many[i].family = AF_INET;
			CHECK_INT(exchange_set_addrs(x, many, 6), 0);
			CHECK(x->addrs == x->addr_more && x->n_addrs == 6);
			CHECK_INT(exchange_set_addrs(x, many, 2), 0);
			CHECK(x->addrs == x->addr_inline);
			a = (unsigned char *)x->addr_more;
			CHECK_INT(exchange_set_addrs(x, many, 7), 0);
			CHECK((unsigned char *)x->addrs == a);
		}
		exchange_free(x);
	}

	/*
	 * The exchange writes its own row (exchange_audit, for connections
	 * and DNS queries alike): what its listener put in the event stays,
	 * the rest is the exchange's -- target, rule, credential, decision
	 * with mode: report's relaxation, duration from its start -- and it
	 * is marked written. (audit NULL: filled, not submitted.)
	 */
	{
		struct exchange *x = exchange_new();
		struct stats *st = stats_new();
		struct audit_event ev;
		struct counted seen;
		unsigned long long cum[STATS_BUCKETS], cnt, up, down;
		double sum;
		enum sg_verdict d;
		enum sg_reason r;

		CHECK(x != NULL);
		CHECK_INT(policy_target_init(&x->target, "row.example.com", 15,
		    443), 0);
		strcpy(x->verdict.rule, "p:allow[1]");
		strcpy(x->fwd.plan.cred, "gh");
		x->started.tv_sec -= 2;		/* began two seconds ago */
		memset(&ev, 0, sizeof(ev));
		ev.kind = "dns";
		ev.status = 3;
		CHECK_INT(exchange_audit(x, NULL, NULL, &ev, VERDICT_ALLOW,
		    REASON_NONE), 0);
		CHECK(x->logged);
		CHECK_STR(ev.kind, "dns");
		CHECK_INT(ev.status, 3);
		CHECK_STR(ev.host, "row.example.com");
		CHECK_STR(ev.rule, "p:allow[1]");
		CHECK_STR(ev.credential, "gh");
		CHECK(ev.decision == VERDICT_ALLOW && ev.reason == NULL);
		CHECK_MSG(ev.duration_ms >= 2000 && ev.duration_ms < 60000,
		    "duration %lld", (long long)ev.duration_ms);

		/* A name the listener names itself is kept (an invalid one). */
		memset(&ev, 0, sizeof(ev));
		ev.host = "as asked";
		/*
		 * mode: report: allowed, recorded with the reason it would have
		 * had, and counted for /metrics as the row says (core/stats.h).
		 */
		x->verdict.report = REASON_POLICY_DENY;
		ev.kind = "connect";
		ev.sandbox = "sb";
		ev.bytes_up = 7;
		exchange_decided(x);
		CHECK(x->t.decided > 0);
		CHECK_INT(exchange_audit(x, NULL, st, &ev, VERDICT_ALLOW,
		    REASON_NONE), 0);
		memset(&seen, 0, sizeof(seen));
		stats_foreach_decision(st, count_cb, &seen);
		CHECK_INT(seen.n, 1);
		CHECK(seen.lk == STATS_LK_CONNECT && seen.v == VERDICT_REPORT &&
		    seen.r == REASON_POLICY_DENY);
		CHECK_INT(stats_hist(st, STATS_H_DECISION, STATS_LK_CONNECT, cum,
		    &cnt, &sum), 1);
		CHECK_INT(cnt, 1);
		stats_bytes(st, STATS_LK_CONNECT, &up, &down);
		CHECK_INT(up, 7);
		CHECK_STR(ev.host, "as asked");
		CHECK(ev.decision == VERDICT_REPORT);
		CHECK_STR(ev.reason, "policy-deny");
		/* ... never a refusal, and never a reason of its own replaced. */
		d = VERDICT_DENY;
		r = REASON_RATE_LIMITED;
		exchange_verdict(x, &d, &r);
		CHECK(d == VERDICT_DENY && r == REASON_RATE_LIMITED);
		d = VERDICT_ALLOW;
		r = REASON_INGRESS_TOKEN_REDIRECT;
		exchange_verdict(x, &d, &r);
		CHECK(d == VERDICT_REPORT && r == REASON_INGRESS_TOKEN_REDIRECT);
		/* No rule, no credential: none in the row. */
		x->verdict.rule[0] = '\0';
		x->fwd.plan.cred[0] = '\0';
		memset(&ev, 0, sizeof(ev));
		CHECK_INT(exchange_audit(x, NULL, NULL, &ev, VERDICT_DENY,
		    REASON_POLICY_DENY), 0);
		CHECK(ev.rule == NULL && ev.credential == NULL);
		CHECK_STR(ev.reason, "policy-deny");
		exchange_free(x);
		stats_free(st);
	}

	exchange_free(NULL);
	tunnel_decision_free(NULL);
	policy_unref(pol_a);
	policy_unref(pol_b);
	return check_summary();
}
