/*
 * Unit test of the fair-share table: the token bucket's refill and burst,
 * the live-connection limit, one audit row per sandbox per second, entries
 * forgotten once they hold nothing, and the count staying exact when many
 * threads open and close at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/fairshare.h"

static void
test_bucket(void)
{
	struct fair_bucket b;
	int i, n;

	fair_bucket_init(&b, 10, 1000);
	CHECK(fair_bucket_full(&b, 10, 1000));
	/* A full bucket is one second's worth: a burst of rate, then empty. */
	for (n = 0, i = 0; i < 20; i++)
		n += fair_bucket_take(&b, 10, 1000);
	CHECK_INT(n, 10);
	CHECK(!fair_bucket_full(&b, 10, 1000));
	/* 100 ms refill one token at 10/s; 99 ms do not. */
	CHECK_INT(fair_bucket_take(&b, 10, 1099), 0);
	CHECK_INT(fair_bucket_take(&b, 10, 1100), 1);
	CHECK_INT(fair_bucket_take(&b, 10, 1100), 0);
	/* Refill stops at the capacity, however long it was idle. */
	CHECK(fair_bucket_full(&b, 10, 2100));
	for (n = 0, i = 0; i < 20; i++)
		n += fair_bucket_take(&b, 10, 90000);
	CHECK_INT(n, 10);
	/* A clock that reads earlier than the stamp refills nothing. */
	CHECK_INT(fair_bucket_take(&b, 10, 500), 0);
	/* Rate 0 is no limit. */
	fair_bucket_init(&b, 0, 0);
	for (n = 0, i = 0; i < 1000; i++)
		n += fair_bucket_take(&b, 0, 0);
	CHECK_INT(n, 1000);
	CHECK(fair_bucket_full(&b, 0, 0));
}

static void
test_max_conns(void)
{
	struct fair_limits lim = { 3, 0, 0 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	struct fair_stats st;
	int i;

	for (i = 0; i < 3; i++)
		CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OVER_CONNS);
	CHECK_INT(ref.audit, 1);
	/* Another sandbox is not touched by a's limit. */
	CHECK_INT(fairshare_conn_open(f, "b", 0, &ref), FAIR_OK);
	fairshare_conn_close(f, "a", 0);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 2);
	CHECK_INT(st.refused, 1);
	/* Closed down to zero with nothing else to remember: gone at once. */
	fairshare_conn_close(f, "b", 0);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 1);
	/* a's refusal row is remembered for its second, then a goes too. */
	for (i = 0; i < 3; i++)
		fairshare_conn_close(f, "a", 999);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 1);
	CHECK_INT(fairshare_sweep(f, 1000), 1);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	/* A close too many (or of an unknown id) does not underflow. */
	fairshare_conn_close(f, "a", 0);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	fairshare_free(f);
}

static void
test_rate_and_rows(void)
{
	struct fair_limits lim = { 0, 5, 0 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	struct fair_stats st;
	int i, ok = 0, rows = 0;
	uint64_t t;

	/* 5/s: the burst of 5, then one row for the rest of that second. */
	for (i = 0; i < 50; i++) {
		if (fairshare_conn_open(f, "a", 10000, &ref) == FAIR_OK)
			ok++;
		else
			rows += ref.audit;
	}
	CHECK_INT(ok, 5);
	CHECK_INT(rows, 1);
	CHECK_INT(ref.suppressed, 44);
	/* Still over a while later: no second row within the second. */
	CHECK_INT(fairshare_conn_open(f, "a", 10150, &ref), FAIR_OVER_RATE);
	CHECK_INT(ref.audit, 0);
	/* Over again a second after the row: a new row, saying how many were not. */
	for (i = 0; i < 5; i++)
		fairshare_conn_open(f, "a", 11000, &ref);
	CHECK_INT(fairshare_conn_open(f, "a", 11000, &ref), FAIR_OVER_RATE);
	CHECK_INT(ref.audit, 1);
	CHECK_INT(ref.suppressed, 45);
	/* A steady stream over the limit: about one row per second. */
	rows = 0;
	for (t = 11001; t < 21000; t += 10)
		if (fairshare_conn_open(f, "a", t, &ref) != FAIR_OK)
			rows += ref.audit;
	CHECK_MSG(rows >= 9 && rows <= 10, "%d rows in 10 s", rows);
	fairshare_stats(f, &st);
	CHECK(st.refused > st.suppressed);
	/* Live connections keep the entry; closed and refilled, it goes. */
	CHECK_INT(fairshare_sweep(f, 21000), 0);
	fairshare_free(f);

	f = fairshare_new(&lim);
	CHECK_INT(fairshare_conn_open(f, "b", 0, &ref), FAIR_OK);
	fairshare_conn_close(f, "b", 0);	/* bucket not full: kept */
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 1);
	CHECK_INT(fairshare_sweep(f, 100), 0);
	CHECK_INT(fairshare_sweep(f, 200), 1);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	fairshare_free(f);
}

static void
test_dns(void)
{
	struct fair_limits lim = { 1, 1, 3 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	int i, ok = 0, rows = 0;

	for (i = 0; i < 10; i++) {
		if (fairshare_dns_query(f, "a", 0, &ref) == FAIR_OK)
			ok++;
		else
			rows += ref.audit;
	}
	CHECK_INT(ok, 3);
	CHECK_INT(rows, 1);
	/* The DNS bucket is its own: connections still open. */
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	/* The row throttle is the sandbox's: no second row this second. */
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OVER_CONNS);
	CHECK_INT(ref.audit, 0);
	fairshare_conn_close(f, "a", 0);
	CHECK_INT(fairshare_sweep(f, 999), 0);
	CHECK_INT(fairshare_sweep(f, 1000), 1);
	/* dns_rate 0: never refused, never an entry. */
	lim.dns_rate = 0;
	fairshare_free(f);
	f = fairshare_new(&lim);
	for (i = 0; i < 100; i++)
		CHECK_INT(fairshare_dns_query(f, "a", 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_sweep(f, 0), 0);
	fairshare_free(f);
}

/* Many dynamic sandboxes, registered and forgotten: nothing stays. */
static void
test_no_leak(void)
{
	struct fair_limits lim = { 10, 100, 100 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	struct fair_stats st;
	char id[32];
	int i;

	for (i = 0; i < 5000; i++) {
		snprintf(id, sizeof(id), "dyn-%d", i);
		fairshare_conn_open(f, id, 0, &ref);
		fairshare_dns_query(f, id, 0, &ref);
		fairshare_conn_close(f, id, 0);
	}
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 5000);
	CHECK_INT(fairshare_sweep(f, 5), 0);
	CHECK_INT(fairshare_sweep(f, 10), 5000);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	/* An id longer than any sandbox id is neither counted nor refused. */
	lim.max_conns = 1;
	fairshare_free(f);
	f = fairshare_new(&lim);
	{
		char long_id[64];

		memset(long_id, 'x', sizeof(long_id) - 1);
		long_id[sizeof(long_id) - 1] = '\0';
		CHECK_INT(fairshare_conn_open(f, long_id, 0, &ref), FAIR_OK);
		CHECK_INT(fairshare_conn_open(f, long_id, 0, &ref), FAIR_OK);
		fairshare_conn_close(f, long_id, 0);
	}
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	fairshare_free(f);
}

#define THREADS		4
#define ROUNDS		20000

static void *
hammer(void *arg)
{
	struct fairshare *f = arg;
	struct fair_refusal ref;
	const char *ids[] = { "a", "b", "c" };
	int i;

	for (i = 0; i < ROUNDS; i++)
		if (fairshare_conn_open(f, ids[i % 3], 0, &ref) == FAIR_OK)
			fairshare_conn_close(f, ids[i % 3], 0);
	return NULL;
}

static void
test_threads(void)
{
	struct fair_limits lim = { 2, 0, 0 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	struct fair_stats st;
	pthread_t t[THREADS];
	int i;

	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hammer, f);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	/* Every admitted connection was released exactly once: all gone. */
	fairshare_sweep(f, 1000);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_conn_open(f, "a", 0, &ref), FAIR_OVER_CONNS);
	fairshare_free(f);
}

int
main(void)
{
	test_bucket();
	test_max_conns();
	test_rate_and_rows();
	test_dns();
	test_no_leak();
	test_threads();
	return check_summary();
}
