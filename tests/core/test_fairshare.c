/*
 * Unit test of the fair-share table: the token bucket's refill and burst,
 * the live-connection limit, one audit row per sandbox per second, entries
 * forgotten once they hold nothing, the share of source addresses whose
 * connections have no sandbox yet, and the count staying exact when many
 * threads open and close (and move from source to sandbox) at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/fairshare.h"
#include "core/netaddr.h"

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
	struct fair_limits lim = { 3, 0, 0, 0 };
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
	struct fair_limits lim = { 0, 5, 0, 0 };
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
	struct fair_limits lim = { 1, 1, 3, 0 };
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
	struct fair_limits lim = { 10, 100, 100, 0 };
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

/* One step of a source-share scenario; who is an address or a sandbox id. */
enum src_op {
	SRC_OPEN,	/* want: verdict; audit: the row flag, -1 any */
	SRC_CLOSE,
	SB_OPEN,
	SB_CLOSE,
	ENTRIES,	/* want: entries in the table */
	SWEEP		/* want: entries removed */
};

struct src_step {
	enum src_op	 op;
	const char	*who;
	uint64_t	 now;
	int		 want;
	int		 audit;
};

#define OPEN(a, t, v, r)	{ SRC_OPEN, a, t, v, r }
#define CLOSE(a, t)		{ SRC_CLOSE, a, t, 0, -1 }

/* max_conns 3, connections_per_second 2. */
static const struct src_step src_steps[] = {
	/* A source's connections with no sandbox yet: three, then refused. */
	OPEN("127.0.0.2", 0, FAIR_OK, -1),
	OPEN("127.0.0.2", 0, FAIR_OK, -1),
	OPEN("127.0.0.2", 0, FAIR_OK, -1),
	OPEN("127.0.0.2", 0, FAIR_OVER_CONNS, 1),
	/* One row per source per second, the rest counted. */
	OPEN("127.0.0.2", 10, FAIR_OVER_CONNS, 0),
	/* The same source written as IPv4-mapped IPv6. */
	OPEN("::ffff:127.0.0.2", 20, FAIR_OVER_CONNS, 0),
	/* Another source is untouched: a sandbox told apart by its address. */
	OPEN("127.0.0.3", 20, FAIR_OK, -1),
	/* Sources took no tokens: a sandbox still has its burst of 2. */
	{ SB_OPEN, "sb-a", 30, FAIR_OK, -1 },
	{ SB_OPEN, "sb-a", 30, FAIR_OK, -1 },
	{ SB_OPEN, "sb-a", 30, FAIR_OVER_RATE, 1 },
	/* A source at its limit leaves the sandboxes' shares alone. */
	{ SB_OPEN, "sb-b", 30, FAIR_OK, -1 },
	/* Identified: closed as a source, room for another partial head. */
	CLOSE("127.0.0.2", 40),
	OPEN("127.0.0.2", 40, FAIR_OK, -1),
	OPEN("127.0.0.2", 40, FAIR_OVER_CONNS, 0),
	/* A second later the refusal gets its row again. */
	OPEN("127.0.0.2", 1040, FAIR_OVER_CONNS, 1),
	/* IPv6: one address, not its /64. */
	OPEN("2001:db8::1", 50, FAIR_OK, -1),
	OPEN("2001:db8::1", 50, FAIR_OK, -1),
	OPEN("2001:db8::1", 50, FAIR_OK, -1),
	OPEN("2001:db8::1", 50, FAIR_OVER_CONNS, 1),
	OPEN("2001:db8::2", 50, FAIR_OK, -1),
	/* 127.0.0.2, .3, 2001:db8::1, ::2, sb-a, sb-b */
	{ ENTRIES, NULL, 50, 6, -1 },
	/* A close too many, or of a source never seen, does not underflow. */
	CLOSE("2001:db8::2", 60),
	CLOSE("2001:db8::2", 60),
	CLOSE("198.18.0.9", 60),
	OPEN("2001:db8::2", 60, FAIR_OK, -1),
	CLOSE("2001:db8::2", 60),
	{ ENTRIES, NULL, 60, 5, -1 },
	/* Everything closed: only what has a row or a bucket to refill stays. */
	CLOSE("127.0.0.2", 2000),
	CLOSE("127.0.0.2", 2000),
	CLOSE("127.0.0.2", 2000),
	CLOSE("127.0.0.3", 2000),
	CLOSE("2001:db8::1", 2000),
	CLOSE("2001:db8::1", 2000),
	CLOSE("2001:db8::1", 2000),
	{ SB_CLOSE, "sb-a", 2000, 0, -1 },
	{ SB_CLOSE, "sb-a", 2000, 0, -1 },
	{ SB_CLOSE, "sb-b", 2000, 0, -1 },
	/* 127.0.0.2's row at 1040 is remembered for its second. */
	{ ENTRIES, NULL, 2000, 1, -1 },
	{ SWEEP, NULL, 2039, 0, -1 },
	{ SWEEP, NULL, 2040, 1, -1 },
	{ ENTRIES, NULL, 2040, 0, -1 },
};

static void
addr_of(const char *s, struct netaddr *a)
{
	CHECK_MSG(netaddr_parse(s, strlen(s), a) == 0, "%s", s);
}

static void
test_source_steps(void)
{
	struct fair_limits lim = { 3, 2, 0, 0 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	struct fair_stats st;
	struct netaddr a;
	size_t i;
	int got;

	for (i = 0; i < sizeof(src_steps) / sizeof(src_steps[0]); i++) {
		const struct src_step *c = &src_steps[i];

		got = -1;
		memset(&ref, 0xa5, sizeof(ref));
		switch (c->op) {
		case SRC_OPEN:
			addr_of(c->who, &a);
			got = fairshare_src_open(f, &a, c->now, &ref);
			break;
		case SRC_CLOSE:
			addr_of(c->who, &a);
			fairshare_src_close(f, &a, c->now);
			continue;
		case SB_OPEN:
			got = fairshare_conn_open(f, c->who, c->now, &ref);
			break;
		case SB_CLOSE:
			fairshare_conn_close(f, c->who, c->now);
			continue;
		case ENTRIES:
			fairshare_stats(f, &st);
			got = (int)st.entries;
			break;
		case SWEEP:
			got = (int)fairshare_sweep(f, c->now);
			break;
		}
		CHECK_MSG(got == c->want, "step %zu (%s): %d, want %d", i,
		    c->who ? c->who : "-", got, c->want);
		if ((c->op == SRC_OPEN || c->op == SB_OPEN) && got == FAIR_OK)
			CHECK_MSG(ref.audit == 0 && ref.suppressed == 0,
			    "step %zu: admitted with a refusal filled in", i);
		if (c->audit != -1)
			CHECK_MSG(ref.audit == c->audit, "step %zu: audit %d, "
			    "want %d", i, ref.audit, c->audit);
	}
	fairshare_free(f);

	/* max_connections 0: no limit, nothing counted, nothing kept. */
	lim.max_conns = 0;
	f = fairshare_new(&lim);
	addr_of("127.0.0.2", &a);
	for (i = 0; i < 100; i++)
		CHECK_INT(fairshare_src_open(f, &a, 0, &ref), FAIR_OK);
	fairshare_src_close(f, &a, 0);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	fairshare_free(f);

	/*
	 * A source's own share (half of max_connections when the sandbox
	 * share is larger): 2 before identity, the sandbox's 3 after.
	 */
	lim.max_conns = 3;
	lim.conn_rate = 0;
	lim.src_max_conns = 2;
	f = fairshare_new(&lim);
	CHECK_INT(fairshare_src_limit(f), 2);
	addr_of("127.0.0.2", &a);
	CHECK_INT(fairshare_src_open(f, &a, 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_src_open(f, &a, 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_src_open(f, &a, 0, &ref), FAIR_OVER_CONNS);
	for (i = 0; i < 3; i++)
		CHECK_INT(fairshare_conn_open(f, "sb-a", 0, &ref), FAIR_OK);
	CHECK_INT(fairshare_conn_open(f, "sb-a", 0, &ref), FAIR_OVER_CONNS);
	fairshare_src_close(f, &a, 0);
	CHECK_INT(fairshare_src_open(f, &a, 0, &ref), FAIR_OK);
	fairshare_free(f);
	/* Unset, it is the sandbox's figure. */
	lim.src_max_conns = 0;
	f = fairshare_new(&lim);
	CHECK_INT(fairshare_src_limit(f), 3);
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

/* A connection's life: its source's until identified, then its sandbox's. */
static void *
hammer_move(void *arg)
{
	struct fairshare *f = arg;
	struct fair_refusal ref;
	const char *ids[] = { "a", "b", "c" };
	struct netaddr src[3];
	int i, k;

	addr_of("127.0.0.2", &src[0]);
	addr_of("127.0.0.3", &src[1]);
	addr_of("::1", &src[2]);
	for (i = 0; i < ROUNDS; i++) {
		k = i % 3;
		if (fairshare_src_open(f, &src[k], 0, &ref) != FAIR_OK)
			continue;
		if (i % 7 == 0) {	/* closed before its head was complete */
			fairshare_src_close(f, &src[k], 0);
			continue;
		}
		if (fairshare_conn_open(f, ids[k], 0, &ref) == FAIR_OK) {
			fairshare_src_close(f, &src[k], 0);
			fairshare_conn_close(f, ids[k], 0);
		} else
			fairshare_src_close(f, &src[k], 0);
	}
	return NULL;
}

static void
test_threads(void)
{
	struct fair_limits lim = { 2, 0, 0, 0 };
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

	f = fairshare_new(&lim);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hammer_move, f);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	fairshare_sweep(f, 1000);
	fairshare_stats(f, &st);
	CHECK_INT(st.entries, 0);
	fairshare_free(f);
}

/*
 * An HTTP/2 stream holds a slot of its sandbox's max_conns, as its
 * connection does, but takes no connections_per_second token.
 */
static void
test_streams(void)
{
	struct fair_limits lim = { 5, 1, 0, 0 };
	struct fairshare *f = fairshare_new(&lim);
	struct fair_refusal ref;
	int i;

	/* The connection takes the one token of its second. */
	CHECK_INT(fairshare_conn_open(f, "a", 1000, &ref), FAIR_OK);
	/* Its streams take none: four more fill the five slots. */
	for (i = 0; i < 4; i++)
		CHECK_INT(fairshare_stream_open(f, "a", 1000, &ref), FAIR_OK);
	CHECK_INT(fairshare_stream_open(f, "a", 1000, &ref), FAIR_OVER_CONNS);
	/* Another sandbox is not touched. */
	CHECK_INT(fairshare_stream_open(f, "b", 1000, &ref), FAIR_OK);
	/* A stream ending gives its slot back. */
	fairshare_conn_close(f, "a", 1000);
	CHECK_INT(fairshare_stream_open(f, "a", 1000, &ref), FAIR_OK);
	fairshare_free(f);
}

int
main(void)
{
	test_bucket();
	test_max_conns();
	test_streams();
	test_rate_and_rows();
	test_dns();
	test_no_leak();
	test_source_steps();
	test_threads();
	return check_summary();
}
