/*
 * The per-sandbox accounting table: a hash of sandbox ids, and of the
 * source addresses of connections whose sandbox is not known yet, under
 * striped mutexes (one lock per admission, never held across I/O). An
 * entry lives while it has something to remember -- live connections, a
 * bucket not yet full again, a recent audit row -- and is removed as soon
 * as it has not, so sandboxes registered and forgotten leave nothing behind.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fairshare.h"
#include "core/hash.h"
#include "core/netaddr.h"
#include "core/policy.h"

#define FAIR_STRIPES		256	/* a power of two */
#define FAIR_ROW_MS		1000	/* at most one audit row per sandbox per this */
#define FAIR_MAX_ELAPSED_MS	(3600 * 1000ULL)	/* enough to fill any bucket */

/*
 * An entry's key: FAIR_KEY_SANDBOX and the id, or FAIR_KEY_SOURCE, the
 * family and the address bytes; the first byte keeps the two apart.
 */
#define FAIR_KEY_SANDBOX	's'
#define FAIR_KEY_SOURCE		'a'
#define FAIR_KEY_MAX		(1 + POLICY_ID_MAX > 2 + 16 ? \
				    1 + POLICY_ID_MAX : 2 + 16)

struct fair_key {
	size_t			 len;
	uint8_t			 b[FAIR_KEY_MAX];
};

struct fair_entry {
	struct fair_entry	*next;
	uint64_t		 hash;
	struct fair_key		 key;
	uint32_t		 live;
	struct fair_bucket	 conn;
	struct fair_bucket	 dns;
	int			 has_row;
	uint64_t		 row_ms;	/* the last rate-limited row */
	uint64_t		 suppressed;	/* refusals since that row */
};

struct fair_stripe {
	pthread_mutex_t		 mtx;
	struct fair_entry	*head;
};

struct fairshare {
	struct fair_limits	 lim;
	struct fair_stripe	 stripes[FAIR_STRIPES];
	atomic_ullong		 refused;
	atomic_ullong		 suppressed;
	atomic_size_t		 entries;
	uint64_t		 key[HASH_KEY_WORDS];
};

uint64_t
fairshare_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
fair_bucket_init(struct fair_bucket *b, uint32_t rate, uint64_t now_ms)
{
	b->milli = (uint64_t)rate * 1000;
	b->stamp_ms = now_ms;
}

/* What the bucket holds at now_ms; the clock never runs backwards here. */
static uint64_t
fair_bucket_level(const struct fair_bucket *b, uint32_t rate, uint64_t now_ms)
{
	uint64_t cap = (uint64_t)rate * 1000, dt, v;

	dt = now_ms > b->stamp_ms ? now_ms - b->stamp_ms : 0;
	if (dt > FAIR_MAX_ELAPSED_MS)
		dt = FAIR_MAX_ELAPSED_MS;
	v = b->milli + dt * rate;
	return v > cap ? cap : v;
}

int
fair_bucket_take(struct fair_bucket *b, uint32_t rate, uint64_t now_ms)
{
	if (rate == 0)
		return 1;
	b->milli = fair_bucket_level(b, rate, now_ms);
	if (now_ms > b->stamp_ms)
		b->stamp_ms = now_ms;
	if (b->milli < 1000)
		return 0;
	b->milli -= 1000;
	return 1;
}

int
fair_bucket_full(const struct fair_bucket *b, uint32_t rate, uint64_t now_ms)
{
	return rate == 0 || fair_bucket_level(b, rate, now_ms) >=
	    (uint64_t)rate * 1000;
}

/*
 * Keyed: sandbox ids are chosen outside the gateway (by the operator, by
 * whoever asks the launcher for a sandbox), source addresses by whoever
 * connects, and no choice of them may pile up in one stripe of a table
 * every connection and DNS query goes through.
 */
static uint64_t
fair_hash(const struct fairshare *f, const struct fair_key *k)
{
	return hash_siphash(f->key, k->b, k->len);
}

/* -1: an id too long for any sandbox (not counted). */
static int
fair_key_sandbox(struct fair_key *k, const char *id)
{
	size_t n = strlen(id);

	if (n > POLICY_ID_MAX)
		return -1;
	k->b[0] = FAIR_KEY_SANDBOX;
	memcpy(k->b + 1, id, n);
	k->len = 1 + n;
	return 0;
}

/*
 * One source is one address, as sandboxes are told apart by theirs (a
 * netaddr holds IPv4-mapped IPv6 as the IPv4 address already).
 */
static void
fair_key_source(struct fair_key *k, const struct netaddr *a)
{
	size_t n = a->family == AF_INET ? 4 : 16;

	k->b[0] = FAIR_KEY_SOURCE;
	k->b[1] = a->family == AF_INET ? 4 : 6;
	memcpy(k->b + 2, a->a, n);
	k->len = 2 + n;
}

struct fairshare *
fairshare_new(const struct fair_limits *lim)
{
	struct fairshare *f;
	size_t i;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	f->lim = *lim;
	if (f->lim.src_max_conns == 0)
		f->lim.src_max_conns = f->lim.max_conns;
	hash_key_new(f->key);
	for (i = 0; i < FAIR_STRIPES; i++)
		pthread_mutex_init(&f->stripes[i].mtx, NULL);
	atomic_init(&f->refused, 0);
	atomic_init(&f->suppressed, 0);
	atomic_init(&f->entries, 0);
	return f;
}

void
fairshare_free(struct fairshare *f)
{
	struct fair_entry *e, *next;
	size_t i;

	if (f == NULL)
		return;
	for (i = 0; i < FAIR_STRIPES; i++) {
		for (e = f->stripes[i].head; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
		pthread_mutex_destroy(&f->stripes[i].mtx);
	}
	free(f);
}

static struct fair_stripe *
fair_stripe(struct fairshare *f, uint64_t h)
{
	return &f->stripes[h & (FAIR_STRIPES - 1)];
}

/* The entry of k in its (locked) stripe; created when create is set. */
static struct fair_entry *
fair_find(struct fairshare *f, struct fair_stripe *st,
    const struct fair_key *k, uint64_t h, uint64_t now_ms, int create)
{
	struct fair_entry *e;

	for (e = st->head; e != NULL; e = e->next)
		if (e->hash == h && e->key.len == k->len &&
		    memcmp(e->key.b, k->b, k->len) == 0)
			return e;
	if (!create || (e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	e->hash = h;
	e->key = *k;
	fair_bucket_init(&e->conn, f->lim.conn_rate, now_ms);
	fair_bucket_init(&e->dns, f->lim.dns_rate, now_ms);
	e->next = st->head;
	st->head = e;
	atomic_fetch_add(&f->entries, 1);
	return e;
}

/* Nothing to remember: a fresh entry would behave the same. */
static int
fair_idle(const struct fairshare *f, const struct fair_entry *e,
    uint64_t now_ms)
{
	return e->live == 0 &&
	    fair_bucket_full(&e->conn, f->lim.conn_rate, now_ms) &&
	    fair_bucket_full(&e->dns, f->lim.dns_rate, now_ms) &&
	    (!e->has_row || now_ms - e->row_ms >= FAIR_ROW_MS);
}

static void
fair_unlink(struct fairshare *f, struct fair_stripe *st, struct fair_entry *e)
{
	struct fair_entry **pp;

	for (pp = &st->head; *pp != NULL; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			free(e);
			atomic_fetch_sub(&f->entries, 1);
			return;
		}
}

static void
fair_refused(struct fairshare *f, struct fair_entry *e, uint64_t now_ms,
    struct fair_refusal *ref)
{
	atomic_fetch_add(&f->refused, 1);
	if (!e->has_row || now_ms - e->row_ms >= FAIR_ROW_MS) {
		ref->audit = 1;
		ref->suppressed = e->suppressed;
		e->has_row = 1;
		e->row_ms = now_ms;
		e->suppressed = 0;
		return;
	}
	ref->audit = 0;
	ref->suppressed = ++e->suppressed;
	atomic_fetch_add(&f->suppressed, 1);
}

/*
 * One more live connection of k, or a refusal. A sandbox's connection also
 * takes a token from its bucket; a source's does not (its connections take
 * one from their sandbox's once it is known, and two would count twice).
 */
static enum fair_verdict
fair_open(struct fairshare *f, const struct fair_key *k, uint32_t max,
    int take_token, uint64_t now_ms, struct fair_refusal *ref)
{
	uint64_t h = fair_hash(f, k);
	struct fair_stripe *st = fair_stripe(f, h);
	struct fair_entry *e;
	enum fair_verdict v = FAIR_OK;

	pthread_mutex_lock(&st->mtx);
	/* Out of memory: not counted, not refused. */
	if ((e = fair_find(f, st, k, h, now_ms, 1)) == NULL)
		goto out;
	if (max != 0 && e->live >= max)
		v = FAIR_OVER_CONNS;
	else if (take_token &&
	    !fair_bucket_take(&e->conn, f->lim.conn_rate, now_ms))
		v = FAIR_OVER_RATE;
	if (v == FAIR_OK)
		e->live++;
	else
		fair_refused(f, e, now_ms, ref);
out:
	pthread_mutex_unlock(&st->mtx);
	return v;
}

static void
fair_close(struct fairshare *f, const struct fair_key *k, uint64_t now_ms)
{
	uint64_t h = fair_hash(f, k);
	struct fair_stripe *st = fair_stripe(f, h);
	struct fair_entry *e;

	pthread_mutex_lock(&st->mtx);
	if ((e = fair_find(f, st, k, h, now_ms, 0)) != NULL) {
		if (e->live > 0)
			e->live--;
		if (fair_idle(f, e, now_ms))
			fair_unlink(f, st, e);
	}
	pthread_mutex_unlock(&st->mtx);
}

enum fair_verdict
fairshare_conn_open(struct fairshare *f, const char *id, uint64_t now_ms,
    struct fair_refusal *ref)
{
	struct fair_key k;

	memset(ref, 0, sizeof(*ref));
	/* An id no policy allows: not counted, not refused. */
	if (fair_key_sandbox(&k, id) == -1)
		return FAIR_OK;
	/* A sandbox's entry takes tokens; a source's has a share of its own. */
	return fair_open(f, &k, f->lim.max_conns, 1, now_ms, ref);
}

enum fair_verdict
fairshare_stream_open(struct fairshare *f, const char *id, uint64_t now_ms,
    struct fair_refusal *ref)
{
	struct fair_key k;

	memset(ref, 0, sizeof(*ref));
	if (fair_key_sandbox(&k, id) == -1)
		return FAIR_OK;
	return fair_open(f, &k, f->lim.max_conns, 0, now_ms, ref);
}

void
fairshare_conn_close(struct fairshare *f, const char *id, uint64_t now_ms)
{
	struct fair_key k;

	if (fair_key_sandbox(&k, id) == 0)
		fair_close(f, &k, now_ms);
}

uint32_t
fairshare_src_limit(const struct fairshare *f)
{
	return f->lim.src_max_conns;
}

int
fairshare_src_top(struct fairshare *f, const struct netaddr *mine,
    struct netaddr *top, uint32_t *top_live, uint32_t *my_live)
{
	struct fair_key me;
	struct fair_entry *e, *best_e;
	size_t i;
	int found = 0;

	*top_live = *my_live = 0;
	fair_key_source(&me, mine);
	for (i = 0; i < FAIR_STRIPES; i++) {
		pthread_mutex_lock(&f->stripes[i].mtx);
		best_e = NULL;
		for (e = f->stripes[i].head; e != NULL; e = e->next) {
			if (e->key.b[0] != FAIR_KEY_SOURCE || e->live == 0)
				continue;
			if (e->key.len == me.len &&
			    memcmp(e->key.b, me.b, me.len) == 0)
				*my_live = e->live;
			else if (e->live > *top_live &&
			    (best_e == NULL || e->live > best_e->live))
				best_e = e;
		}
		if (best_e != NULL) {
			memset(top, 0, sizeof(*top));
			top->family = best_e->key.b[1] == 4 ? AF_INET : AF_INET6;
			memcpy(top->a, best_e->key.b + 2, best_e->key.len - 2);
			*top_live = best_e->live;
			found = 1;
		}
		pthread_mutex_unlock(&f->stripes[i].mtx);
	}
	return found;
}

enum fair_verdict
fairshare_src_open(struct fairshare *f, const struct netaddr *addr,
    uint64_t now_ms, struct fair_refusal *ref)
{
	struct fair_key k;

	memset(ref, 0, sizeof(*ref));
	if (f->lim.src_max_conns == 0)
		return FAIR_OK;		/* nothing to count: no lock */
	fair_key_source(&k, addr);
	return fair_open(f, &k, f->lim.src_max_conns, 0, now_ms, ref);
}

void
fairshare_src_close(struct fairshare *f, const struct netaddr *addr,
    uint64_t now_ms)
{
	struct fair_key k;

	if (f->lim.src_max_conns == 0)
		return;
	fair_key_source(&k, addr);
	fair_close(f, &k, now_ms);
}

enum fair_verdict
fairshare_dns_query(struct fairshare *f, const char *id, uint64_t now_ms,
    struct fair_refusal *ref)
{
	struct fair_key k;
	struct fair_stripe *st;
	struct fair_entry *e;
	enum fair_verdict v = FAIR_OK;
	uint64_t h;

	memset(ref, 0, sizeof(*ref));
	if (f->lim.dns_rate == 0 || fair_key_sandbox(&k, id) == -1)
		return FAIR_OK;		/* nothing to count: no lock */
	h = fair_hash(f, &k);
	st = fair_stripe(f, h);
	pthread_mutex_lock(&st->mtx);
	if ((e = fair_find(f, st, &k, h, now_ms, 1)) != NULL &&
	    !fair_bucket_take(&e->dns, f->lim.dns_rate, now_ms)) {
		v = FAIR_OVER_RATE;
		fair_refused(f, e, now_ms, ref);
	}
	pthread_mutex_unlock(&st->mtx);
	return v;
}

size_t
fairshare_sweep(struct fairshare *f, uint64_t now_ms)
{
	struct fair_entry **pp, *e;
	size_t i, n = 0;

	for (i = 0; i < FAIR_STRIPES; i++) {
		pthread_mutex_lock(&f->stripes[i].mtx);
		for (pp = &f->stripes[i].head; (e = *pp) != NULL;) {
			if (!fair_idle(f, e, now_ms)) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			free(e);
			atomic_fetch_sub(&f->entries, 1);
			n++;
		}
		pthread_mutex_unlock(&f->stripes[i].mtx);
	}
	return n;
}

void
fairshare_stats(struct fairshare *f, struct fair_stats *st)
{
	st->refused = atomic_load(&f->refused);
	st->suppressed = atomic_load(&f->suppressed);
	st->entries = atomic_load(&f->entries);
}
