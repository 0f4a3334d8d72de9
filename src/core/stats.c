/*
 * Traffic counters (stats.h): fixed arrays of relaxed atomics indexed by
 * the enums, and one small table of sandbox names, bounded, under a mutex.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/stats.h"

#define SB_NAME_MAX	128	/* longer names count under "other" */
#define SB_SLOTS	256	/* > 2 * STATS_MAX_NAMES: open addressing */

typedef _Atomic unsigned long long counter;

/* A sandbox's: [verdict], then bytes; a credential's: [outcome]. */
#define NC_UP		VERDICT_MAX
#define NC_DOWN		(VERDICT_MAX + 1)
#define NC_N		(VERDICT_MAX + 2)

struct named {
	char		 name[SB_NAME_MAX];
	counter		 c[NC_N];
	_Atomic long long open;		/* a sandbox's: connections open now */
	_Atomic int	 had_open;	/* ... ever: its gauge is shown, 0 too */
};

/* Label values met at run time, the first STATS_MAX_NAMES of them. */
struct names {
	pthread_mutex_t	 mu;		/* slot and e[].name */
	int16_t		 slot[SB_SLOTS];	/* -1 empty, else an index in e */
	_Atomic int	 n;		/* names in use */
	struct named	 e[STATS_MAX_NAMES + 1];	/* the last: "other" */
};

struct stats {
	counter		 decisions[STATS_LK_N][VERDICT_MAX][REASON_MAX];
	counter		 up[STATS_LK_N], down[STATS_LK_N];
	struct sg_hist	 hist[STATS_H_N][STATS_LK_N];
	_Atomic long long tunnels[STATS_LK_N][STATS_TUN_N];

	struct names	 sandboxes;
	struct names	 creds;
};

static const char *const listener_words[STATS_LK_N] = {
	"http", "connect", "socks5", "dns", "transparent", "ingress", "other"
};

/* Seconds: a decision takes microseconds, an exchange up to minutes. */
static const double bounds[STATS_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.5, 1, 5, 30
};

const char *
stats_listener_word(enum stats_listener lk)
{
	return lk >= 0 && lk < STATS_LK_N ? listener_words[lk] : "other";
}

enum stats_listener
stats_listener_of(const char *kind)
{
	int i;

	if (kind == NULL)
		return STATS_LK_OTHER;
	for (i = 0; i < STATS_LK_OTHER; i++)
		if (strcmp(kind, listener_words[i]) == 0)
			return (enum stats_listener)i;
	return STATS_LK_OTHER;
}

void
stats_tunnel(struct stats *st, enum stats_listener lk, enum stats_tunnel k,
    int delta)
{
	if (st == NULL || lk < 0 || lk >= STATS_LK_N || k < 0 ||
	    k >= STATS_TUN_N)
		return;
	atomic_fetch_add_explicit(&st->tunnels[lk][k], delta,
	    memory_order_relaxed);
}

unsigned long long
stats_tunnels_open(struct stats *st, enum stats_listener lk,
    enum stats_tunnel k)
{
	long long n = atomic_load_explicit(&st->tunnels[lk][k],
	    memory_order_relaxed);

	return n > 0 ? (unsigned long long)n : 0;
}

unsigned long long
stats_reason_total(struct stats *st, enum sg_reason r)
{
	unsigned long long n = 0;
	int lk, v;

	if (r < 0 || r >= REASON_MAX)
		return 0;
	for (lk = 0; lk < STATS_LK_N; lk++)
		for (v = 0; v < VERDICT_MAX; v++)
			n += atomic_load_explicit(&st->decisions[lk][v][r],
			    memory_order_relaxed);
	return n;
}

const char *
stats_tunnel_word(enum stats_tunnel k)
{
	static const char *const words[STATS_TUN_N] = { "intercepted",
	    "relayed", "websocket" };

	return k >= 0 && k < STATS_TUN_N ? words[k] : "relayed";
}

const double *
stats_bounds(void)
{
	return bounds;
}

static int
names_init(struct names *t)
{
	if (pthread_mutex_init(&t->mu, NULL) != 0)
		return -1;
	memset(t->slot, 0xff, sizeof(t->slot));
	strcpy(t->e[STATS_MAX_NAMES].name, STATS_OTHER);
	return 0;
}

struct stats *
stats_new(void)
{
	struct stats *st;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	if (names_init(&st->sandboxes) == -1) {
		free(st);
		return NULL;
	}
	if (names_init(&st->creds) == -1) {
		pthread_mutex_destroy(&st->sandboxes.mu);
		free(st);
		return NULL;
	}
	return st;
}

void
stats_free(struct stats *st)
{
	if (st == NULL)
		return;
	pthread_mutex_destroy(&st->sandboxes.mu);
	pthread_mutex_destroy(&st->creds.mu);
	free(st);
}

/* The name's counters: its own while there is room, else "other". */
static struct named *
named(struct names *t, const char *name)
{
	struct named *e = &t->e[STATS_MAX_NAMES];
	size_t len = strlen(name);
	unsigned i;
	int n;

	if (len == 0 || len >= SB_NAME_MAX)
		return e;
	pthread_mutex_lock(&t->mu);
	for (i = hash_fnv1a(name, len) % SB_SLOTS; t->slot[i] != -1;
	    i = (i + 1) % SB_SLOTS) {
		if (strcmp(t->e[t->slot[i]].name, name) == 0) {
			e = &t->e[t->slot[i]];
			goto out;
		}
	}
	n = atomic_load_explicit(&t->n, memory_order_relaxed);
	if (n < STATS_MAX_NAMES) {
		memcpy(t->e[n].name, name, len + 1);
		t->slot[i] = (int16_t)n;
		e = &t->e[n];
		/* readers see the name before they count it in */
		atomic_store_explicit(&t->n, n + 1, memory_order_release);
	}
out:
	pthread_mutex_unlock(&t->mu);
	return e;
}

static void
add(counter *c, unsigned long long n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

void
sg_hist_observe(struct sg_hist *h, int64_t us)
{
	int i;

	if (us < 0)
		return;
	for (i = 0; i < STATS_BUCKETS; i++)
		if ((double)us <= bounds[i] * 1e6)
			break;
	add(&h->bucket[i], 1);
	add(&h->sum_us, (unsigned long long)us);
}

/* What the row says became of its credential. */
static enum stats_cred_outcome
cred_outcome(enum sg_verdict v, enum sg_reason r)
{
	switch (r) {
	case REASON_CRED_MISUSE:
		return STATS_CRED_MISUSE;
	case REASON_FOREIGN_CRED:
		return STATS_CRED_FOREIGN;
	case REASON_CRED_UNAVAILABLE:
	case REASON_KEEPER_UNAVAILABLE:
	case REASON_CRED_REFRESH_FAILED:
		return STATS_CRED_UNAVAILABLE;
	case REASON_CRED_REQUIRED:
	case REASON_CRED_SCOPE:
		return STATS_CRED_REFUSED;
	default:
		return v == VERDICT_ALLOW || v == VERDICT_REPORT ?
		    STATS_CRED_SWAPPED : STATS_CRED_REFUSED;
	}
}

void
stats_count(struct stats *st, const struct stats_exchange *e)
{
	enum stats_listener lk = stats_listener_of(e->kind);
	enum sg_verdict v = e->decision;
	enum sg_reason r = e->reason;
	struct named *sb;

	if (st == NULL)
		return;
	if (v < 0 || v >= VERDICT_MAX)
		v = VERDICT_NONE;
	if (r < 0 || r >= REASON_MAX)
		r = REASON_INTERNAL_ERROR;
	add(&st->decisions[lk][v][r], 1);
	if (e->bytes_up > 0)
		add(&st->up[lk], (unsigned long long)e->bytes_up);
	if (e->bytes_down > 0)
		add(&st->down[lk], (unsigned long long)e->bytes_down);
	sg_hist_observe(&st->hist[STATS_H_DECISION][lk], e->decision_us);
	sg_hist_observe(&st->hist[STATS_H_EXCHANGE][lk], e->exchange_us);
	sg_hist_observe(&st->hist[STATS_H_CONNECT][lk], e->connect_us);
	sg_hist_observe(&st->hist[STATS_H_TLS][lk], e->tls_us);
	sg_hist_observe(&st->hist[STATS_H_FIRST_BYTE][lk], e->first_byte_us);
	if (e->credential != NULL && e->credential[0] != '\0')
		add(&named(&st->creds, e->credential)->c[cred_outcome(v, r)], 1);
	if (e->sandbox == NULL)
		return;
	sb = named(&st->sandboxes, e->sandbox);
	add(&sb->c[v], 1);
	if (e->bytes_up > 0)
		add(&sb->c[NC_UP], (unsigned long long)e->bytes_up);
	if (e->bytes_down > 0)
		add(&sb->c[NC_DOWN], (unsigned long long)e->bytes_down);
}

void
stats_foreach_decision(struct stats *st, void (*cb)(enum stats_listener,
    enum sg_verdict, enum sg_reason, unsigned long long, void *), void *arg)
{
	unsigned long long n;
	int lk, v, r;

	for (lk = 0; lk < STATS_LK_N; lk++)
		for (v = 0; v < VERDICT_MAX; v++)
			for (r = 0; r < REASON_MAX; r++) {
				n = atomic_load_explicit(&st->decisions[lk][v][r],
				    memory_order_relaxed);
				if (n != 0)
					cb((enum stats_listener)lk,
					    (enum sg_verdict)v, (enum sg_reason)r,
					    n, arg);
			}
}

/* Each name in use, then "other" (the caller skips what counted nothing). */
static void
names_each(struct names *t, void (*cb)(struct named *, void *), void *arg)
{
	int i, n = atomic_load_explicit(&t->n, memory_order_acquire);

	for (i = 0; i < n; i++)
		cb(&t->e[i], arg);
	cb(&t->e[STATS_MAX_NAMES], arg);
}

static unsigned long long
get(counter *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

struct each {
	struct stats	*st;
	void		(*open_cb)(const char *, unsigned long long, void *);
	void		(*verdict_cb)(const char *, enum sg_verdict,
			    unsigned long long, void *);
	void		(*bytes_cb)(const char *, unsigned long long,
			    unsigned long long, void *);
	void		(*cred_cb)(const char *, enum stats_cred_outcome,
			    unsigned long long, void *);
	void		*arg;
};

static void
sandbox_verdicts(struct named *e, void *arg)
{
	struct each *a = arg;
	unsigned long long k;
	int v;

	for (v = 0; v < VERDICT_MAX; v++)
		if ((k = get(&e->c[v])) != 0)
			a->verdict_cb(e->name, (enum sg_verdict)v, k, a->arg);
}

static void
sandbox_bytes(struct named *e, void *arg)
{
	struct each *a = arg;
	unsigned long long up = get(&e->c[NC_UP]), down = get(&e->c[NC_DOWN]);

	if (up != 0 || down != 0)
		a->bytes_cb(e->name, up, down, a->arg);
}

static void
cred_outcomes(struct named *e, void *arg)
{
	struct each *a = arg;
	unsigned long long k;
	int o;

	for (o = 0; o < STATS_CRED_N; o++)
		if ((k = get(&e->c[o])) != 0)
			a->cred_cb(e->name, (enum stats_cred_outcome)o, k,
			    a->arg);
}

void
stats_foreach_sandbox(struct stats *st, void (*cb)(const char *,
    enum sg_verdict, unsigned long long, void *), void *arg)
{
	struct each a = { .st = st, .verdict_cb = cb, .arg = arg };

	names_each(&st->sandboxes, sandbox_verdicts, &a);
}

void
stats_foreach_sandbox_bytes(struct stats *st, void (*cb)(const char *,
    unsigned long long, unsigned long long, void *), void *arg)
{
	struct each a = { .st = st, .bytes_cb = cb, .arg = arg };

	names_each(&st->sandboxes, sandbox_bytes, &a);
}

void
stats_sandbox_conns(struct stats *st, const char *sandbox, int delta)
{
	struct named *e = named(&st->sandboxes, sandbox);

	atomic_store_explicit(&e->had_open, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->open, delta, memory_order_relaxed);
}

static void
sandbox_open(struct named *e, void *arg)
{
	struct each *a = arg;
	long long n = atomic_load_explicit(&e->open, memory_order_relaxed);

	if (atomic_load_explicit(&e->had_open, memory_order_relaxed))
		a->open_cb(e->name, n > 0 ? (unsigned long long)n : 0, a->arg);
}

void
stats_foreach_sandbox_conns(struct stats *st, void (*cb)(const char *,
    unsigned long long, void *), void *arg)
{
	struct each a = { .st = st, .open_cb = cb, .arg = arg };

	names_each(&st->sandboxes, sandbox_open, &a);
}

void
stats_foreach_credential(struct stats *st, void (*cb)(const char *,
    enum stats_cred_outcome, unsigned long long, void *), void *arg)
{
	struct each a = { .st = st, .cred_cb = cb, .arg = arg };

	names_each(&st->creds, cred_outcomes, &a);
}

const char *
stats_cred_outcome_word(enum stats_cred_outcome o)
{
	static const char *const words[STATS_CRED_N] = { "swapped", "misuse",
	    "foreign", "unavailable", "refused" };

	return o >= 0 && o < STATS_CRED_N ? words[o] : "refused";
}

void
stats_bytes(struct stats *st, enum stats_listener lk, unsigned long long *up,
    unsigned long long *down)
{
	*up = atomic_load_explicit(&st->up[lk], memory_order_relaxed);
	*down = atomic_load_explicit(&st->down[lk], memory_order_relaxed);
}

int
sg_hist_read(struct sg_hist *h, unsigned long long cum[STATS_BUCKETS],
    unsigned long long *count, double *sum_seconds)
{
	unsigned long long run = 0;
	int i;

	for (i = 0; i < STATS_BUCKETS; i++) {
		run += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
		cum[i] = run;
	}
	/* the count covers every bucket, +Inf too: never below cum[last] */
	run += atomic_load_explicit(&h->bucket[STATS_BUCKETS],
	    memory_order_relaxed);
	*count = run;
	*sum_seconds = (double)atomic_load_explicit(&h->sum_us,
	    memory_order_relaxed) / 1e6;
	return run != 0;
}

struct sg_hist *
stats_hist_of(struct stats *st, enum stats_hist which, enum stats_listener lk)
{
	return &st->hist[which][lk];
}

int
stats_hist(struct stats *st, enum stats_hist which, enum stats_listener lk,
    unsigned long long cum[STATS_BUCKETS], unsigned long long *count,
    double *sum_seconds)
{
	return sg_hist_read(&st->hist[which][lk], cum, count, sum_seconds);
}
