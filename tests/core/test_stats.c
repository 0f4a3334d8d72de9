/*
 * Unit test of the traffic counters behind /metrics (core/stats.h): each
 * exchange counted once by listener, decision and reason; the sandbox
 * and credential labels capped at STATS_MAX_NAMES with the rest under
 * "other" (and a
 * name too long to be a label there too); bytes that were not measured
 * (-1) not added; histogram buckets cumulative with the +Inf bucket equal
 * to the count; exact totals when threads count at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/stats.h"

struct seen {
	unsigned long long	 allow_http, deny_connect_policy, error_dns;
	unsigned long long	 other_listener, total;
	int			 rows;
};

static void
decision_cb(enum stats_listener lk, enum sg_verdict v, enum sg_reason r,
    unsigned long long n, void *arg)
{
	struct seen *s = arg;

	s->rows++;
	s->total += n;
	if (lk == STATS_LK_HTTP && v == VERDICT_ALLOW && r == REASON_NONE)
		s->allow_http += n;
	if (lk == STATS_LK_CONNECT && v == VERDICT_DENY &&
	    r == REASON_POLICY_DENY)
		s->deny_connect_policy += n;
	if (lk == STATS_LK_DNS && v == VERDICT_ERROR && r == REASON_DNS_ERROR)
		s->error_dns += n;
	if (lk == STATS_LK_OTHER)
		s->other_listener += n;
}

struct sbseen {
	int			 names;
	unsigned long long	 other_allow, other_deny, sb0_allow, total;
	int			 other_rows;
};

static void
sandbox_cb(const char *sb, enum sg_verdict v, unsigned long long n, void *arg)
{
	struct sbseen *s = arg;

	s->total += n;
	if (strcmp(sb, STATS_OTHER) == 0) {
		s->other_rows++;
		if (v == VERDICT_ALLOW)
			s->other_allow += n;
		if (v == VERDICT_DENY)
			s->other_deny += n;
	} else if (strcmp(sb, "sb0") == 0 && v == VERDICT_ALLOW)
		s->sb0_allow += n;
}

static void
names_cb(const char *sb, unsigned long long up, unsigned long long down,
    void *arg)
{
	struct sbseen *s = arg;

	(void)up;
	(void)down;
	if (strcmp(sb, STATS_OTHER) != 0)
		s->names++;
}

static struct stats_exchange
row(const char *kind, enum sg_verdict v, enum sg_reason r, const char *sb)
{
	struct stats_exchange e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.decision = v;
	e.reason = r;
	e.sandbox = sb;
	e.bytes_up = e.bytes_down = -1;
	e.decision_us = e.exchange_us = -1;
	e.connect_us = e.tls_us = e.first_byte_us = -1;
	return e;
}

static void
test_decisions(void)
{
	struct stats *st = stats_new();
	struct stats_exchange e;
	struct seen s;
	unsigned long long up, down;

	CHECK(st != NULL);
	e = row("http", VERDICT_ALLOW, REASON_NONE, "a");
	e.bytes_up = 100;
	e.bytes_down = 5000;
	stats_count(st, &e);
	stats_count(st, &e);
	e = row("connect", VERDICT_DENY, REASON_POLICY_DENY, "a");
	stats_count(st, &e);
	e = row("dns", VERDICT_ERROR, REASON_DNS_ERROR, NULL);
	stats_count(st, &e);
	/* A kind no listener has, and an enum out of range: counted, bounded. */
	e = row("gopher", VERDICT_ALLOW, REASON_NONE, NULL);
	stats_count(st, &e);
	e = row(NULL, (enum sg_verdict)99, (enum sg_reason)999, NULL);
	stats_count(st, &e);
	memset(&s, 0, sizeof(s));
	stats_foreach_decision(st, decision_cb, &s);
	CHECK_INT(s.allow_http, 2);
	CHECK_INT(s.deny_connect_policy, 1);
	CHECK_INT(s.error_dns, 1);
	CHECK_INT(s.other_listener, 2);
	CHECK_INT(s.total, 6);
	CHECK_INT(stats_reason_total(st, REASON_POLICY_DENY), 1);
	CHECK_INT(stats_reason_total(st, REASON_NONE), 3);	/* http x2, gopher */
	CHECK_INT(stats_reason_total(st, REASON_INTERNAL_ERROR), 1);	/* 999 */
	CHECK_INT(stats_reason_total(st, (enum sg_reason)-1), 0);
	CHECK_INT(s.rows, 5);
	stats_bytes(st, STATS_LK_HTTP, &up, &down);
	CHECK_INT(up, 200);
	CHECK_INT(down, 10000);
	/* -1: not measured, nothing added. */
	stats_bytes(st, STATS_LK_DNS, &up, &down);
	CHECK_INT(up, 0);
	CHECK_INT(down, 0);
	CHECK_STR(stats_listener_word(stats_listener_of("socks5")), "socks5");
	CHECK_STR(stats_listener_word(stats_listener_of("ingress")), "ingress");
	CHECK_STR(stats_listener_word(stats_listener_of("admin")), "other");
	stats_free(st);
}

static void
test_sandbox_cap(void)
{
	struct stats *st = stats_new();
	struct stats_exchange e;
	struct sbseen s;
	char name[300];
	int i;

	for (i = 0; i < STATS_MAX_NAMES + 50; i++) {
		snprintf(name, sizeof(name), "sb%d", i);
		e = row("http", VERDICT_ALLOW, REASON_NONE, name);
		stats_count(st, &e);
		stats_count(st, &e);	/* the same name: the same label */
	}
	/* Known names keep their own label after the cap was reached. */
	e = row("http", VERDICT_ALLOW, REASON_NONE, "sb0");
	stats_count(st, &e);
	/* A name too long for a label: "other", not truncated into another's. */
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	e = row("http", VERDICT_DENY, REASON_POLICY_DENY, name);
	stats_count(st, &e);
	/* An empty name is no name either. */
	e = row("http", VERDICT_DENY, REASON_POLICY_DENY, "");
	stats_count(st, &e);
	memset(&s, 0, sizeof(s));
	stats_foreach_sandbox(st, sandbox_cb, &s);
	stats_foreach_sandbox_bytes(st, names_cb, &s);
	CHECK_INT(s.names, 0);		/* no bytes counted: no byte rows */
	CHECK_INT(s.sb0_allow, 3);
	CHECK_INT(s.other_allow, 100);	/* 50 names over the cap, twice each */
	CHECK_INT(s.other_deny, 2);
	CHECK_INT(s.other_rows, 2);
	CHECK_INT(s.total, 2 * (STATS_MAX_NAMES + 50) + 3);
	stats_free(st);
}

static void
test_histogram(void)
{
	struct stats *st = stats_new();
	const double *b = stats_bounds();
	unsigned long long cum[STATS_BUCKETS], count;
	struct stats_exchange e;
	double sum;
	int i;

	for (i = 1; i < STATS_BUCKETS; i++)
		CHECK(b[i] > b[i - 1]);
	CHECK_INT(stats_hist(st, STATS_H_DECISION, STATS_LK_HTTP, cum, &count,
	    &sum), 0);
	e = row("http", VERDICT_ALLOW, REASON_NONE, NULL);
	e.decision_us = 50;		/* under the first bound (100 us) */
	e.exchange_us = 2000000;	/* 2 s */
	stats_count(st, &e);
	e.decision_us = 100;		/* on a bound: in it (le) */
	e.exchange_us = 3600000000LL;	/* an hour: +Inf only */
	stats_count(st, &e);
	e.decision_us = -1;		/* never decided: not observed */
	stats_count(st, &e);
	CHECK_INT(stats_hist(st, STATS_H_DECISION, STATS_LK_HTTP, cum, &count,
	    &sum), 1);
	CHECK_INT(count, 2);
	CHECK_INT(cum[0], 2);
	CHECK_INT(cum[STATS_BUCKETS - 1], 2);
	CHECK_MSG(sum > 0.000149 && sum < 0.000151, "sum %g", sum);
	CHECK_INT(stats_hist(st, STATS_H_EXCHANGE, STATS_LK_HTTP, cum, &count,
	    &sum), 1);
	CHECK_INT(count, 3);
	for (i = 0; i < STATS_BUCKETS && b[i] < 2; i++)
		CHECK_INT(cum[i], 0);
	CHECK_INT(cum[STATS_BUCKETS - 1], 1);	/* 2 s; the two hours: +Inf */
	/* another listener saw nothing */
	CHECK_INT(stats_hist(st, STATS_H_EXCHANGE, STATS_LK_DNS, cum, &count,
	    &sum), 0);
	stats_free(st);
}

/* A histogram of any module's: zeroed memory is an empty one. */
static void
test_standalone_hist(void)
{
	static struct sg_hist h;
	unsigned long long cum[STATS_BUCKETS], count;
	double sum;

	CHECK_INT(sg_hist_read(&h, cum, &count, &sum), 0);
	CHECK_INT(count, 0);
	sg_hist_observe(&h, 0);			/* the first bucket */
	sg_hist_observe(&h, 31000000);		/* over 30 s: +Inf */
	sg_hist_observe(&h, -7);		/* nothing */
	CHECK_INT(sg_hist_read(&h, cum, &count, &sum), 1);
	CHECK_INT(count, 2);
	CHECK_INT(cum[0], 1);
	CHECK_INT(cum[STATS_BUCKETS - 1], 1);
	CHECK_MSG(sum > 30.99 && sum < 31.01, "sum %g", sum);
}

struct credseen {
	unsigned long long	 gh_swapped, gh_misuse, aws_foreign, aws_refused;
	unsigned long long	 other, total;
};

static void
cred_cb(const char *cred, enum stats_cred_outcome o, unsigned long long n,
    void *arg)
{
	struct credseen *c = arg;

	c->total += n;
	if (strcmp(cred, "gh") == 0 && o == STATS_CRED_SWAPPED)
		c->gh_swapped += n;
	else if (strcmp(cred, "gh") == 0 && o == STATS_CRED_MISUSE)
		c->gh_misuse += n;
	else if (strcmp(cred, "aws") == 0 && o == STATS_CRED_FOREIGN)
		c->aws_foreign += n;
	else if (strcmp(cred, "aws") == 0 && o == STATS_CRED_REFUSED)
		c->aws_refused += n;
	else if (strcmp(cred, STATS_OTHER) == 0)
		c->other += n;
}

/* A row naming a credential counts for it, by what became of it. */
static void
test_credentials(void)
{
	struct stats *st = stats_new();
	struct stats_exchange e;
	struct credseen c;
	char name[32];
	int i;

	e = row("connect", VERDICT_ALLOW, REASON_NONE, "sb");
	e.credential = "gh";
	stats_count(st, &e);
	stats_count(st, &e);
	e.decision = VERDICT_REPORT;	/* a report-mode pass swapped too */
	e.reason = REASON_POLICY_DENY;
	stats_count(st, &e);
	e = row("http", VERDICT_DENY, REASON_CRED_MISUSE, "sb");
	e.credential = "gh";
	stats_count(st, &e);
	e = row("http", VERDICT_DENY, REASON_FOREIGN_CRED, NULL);
	e.credential = "aws";
	stats_count(st, &e);
	e = row("http", VERDICT_ERROR, REASON_UPSTREAM_CONNECT, NULL);
	e.credential = "aws";
	stats_count(st, &e);
	/* require: and scope: refusals are refusals */
	e = row("http", VERDICT_DENY, REASON_CRED_REQUIRED, NULL);
	e.credential = "aws";
	stats_count(st, &e);
	e = row("http", VERDICT_DENY, REASON_CRED_SCOPE, NULL);
	e.credential = "aws";
	stats_count(st, &e);
	/* no credential, an empty one: not counted here */
	e = row("http", VERDICT_ALLOW, REASON_NONE, NULL);
	stats_count(st, &e);
	e.credential = "";
	stats_count(st, &e);
	for (i = 0; i < STATS_MAX_NAMES + 3; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		e.credential = name;
		stats_count(st, &e);
	}
	memset(&c, 0, sizeof(c));
	stats_foreach_credential(st, cred_cb, &c);
	CHECK_INT(c.gh_swapped, 3);
	CHECK_INT(c.gh_misuse, 1);
	CHECK_INT(c.aws_foreign, 1);
	CHECK_INT(c.aws_refused, 3);
	CHECK_INT(c.other, 5);		/* gh and aws took two of the 100 */
	CHECK_INT(c.total, 8 + STATS_MAX_NAMES + 3);
	CHECK_STR(stats_cred_outcome_word(STATS_CRED_MISUSE), "misuse");
	stats_free(st);
}

#define THREADS		4
#define PER_THREAD	20000

static void *
counter_thread(void *arg)
{
	struct stats *st = arg;
	struct stats_exchange e;
	char name[32];
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(name, sizeof(name), "t%d", i % (STATS_MAX_NAMES * 2));
		e = row(i % 2 ? "socks5" : "http", VERDICT_ALLOW, REASON_NONE,
		    name);
		e.bytes_up = 1;
		e.exchange_us = i;
		stats_count(st, &e);
	}
	return NULL;
}

static void
test_threads(void)
{
	struct stats *st = stats_new();
	pthread_t t[THREADS];
	struct sbseen sb;
	struct seen s;
	unsigned long long up, up2, down, cum[STATS_BUCKETS], count;
	double sum;
	int i;

	for (i = 0; i < THREADS; i++)
		CHECK_INT(pthread_create(&t[i], NULL, counter_thread, st), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	memset(&s, 0, sizeof(s));
	stats_foreach_decision(st, decision_cb, &s);
	CHECK_INT(s.total, THREADS * PER_THREAD);
	memset(&sb, 0, sizeof(sb));
	stats_foreach_sandbox(st, sandbox_cb, &sb);
	CHECK_INT(sb.total, THREADS * PER_THREAD);
	stats_foreach_sandbox_bytes(st, names_cb, &sb);
	CHECK_INT(sb.names, STATS_MAX_NAMES);
	stats_bytes(st, STATS_LK_HTTP, &up, &down);
	stats_bytes(st, STATS_LK_SOCKS5, &up2, &down);
	CHECK_INT(up + up2, THREADS * PER_THREAD);
	CHECK_INT(stats_hist(st, STATS_H_EXCHANGE, STATS_LK_SOCKS5, cum,
	    &count, &sum), 1);
	CHECK_INT(count, THREADS * PER_THREAD / 2);
	stats_free(st);
}

int
main(void)
{
	test_decisions();
	test_sandbox_cap();
	test_histogram();
	test_credentials();
	test_standalone_hist();
	test_threads();
	return check_summary();
}
