/*
 * The address memory: which (sandbox, address) pairs the DNS listener
 * handed out, for which names, until when. A hash table under one mutex,
 * bounded: when full, the sandbox holding the most entries loses its
 * oldest one, so one sandbox cannot push another's answers out.
 */
#include <sys/queue.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "core/policy.h"
#include "dns/dns.h"

#define ADDRMEM_NAME_MAX	253
#define ADDRMEM_PER_ADDR	16	/* names kept per (sandbox, address) */
#define ADDRMEM_SB_BUCKETS	256
#define ADDRMEM_BUCKETS_MIN	16
#define ADDRMEM_BUCKETS_MAX	(1U << 20)

struct addrmem_sb;

struct addrmem_entry {
	LIST_ENTRY(addrmem_entry) hlink;
	TAILQ_ENTRY(addrmem_entry) sblink;	/* the sandbox's, oldest first */
	struct addrmem_sb	*sb;
	struct netaddr		 addr;
	uint64_t		 expires_ms;
	uint64_t		 seq;		/* larger: added more recently */
	uint64_t		 hash;
	size_t			 namelen;
	char			 name[];
};

/* One sandbox's entries; freed with its last entry. */
struct addrmem_sb {
	LIST_ENTRY(addrmem_sb)	 link;
	TAILQ_HEAD(, addrmem_entry) entries;
	size_t			 n;
	uint64_t		 hash;
	char			 id[POLICY_ID_MAX + 1];
};

LIST_HEAD(addrmem_bucket, addrmem_entry);

struct addrmem {
	pthread_mutex_t		 mtx;
	struct addrmem_bucket	*buckets;
	size_t			 nbuckets;	/* power of two */
	LIST_HEAD(, addrmem_sb)	 sbs[ADDRMEM_SB_BUCKETS];
	size_t			 n;
	size_t			 max;
	uint64_t		 seq;
	/* SipHash: sandboxes choose which names (addresses) land here */
	uint64_t		 key[HASH_KEY_WORDS];
};

static uint64_t
addrmem_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The key of an entry: sandbox id, NUL, family, address bytes. */
static uint64_t
addrmem_key_hash(const struct addrmem *m, const char *sandbox, size_t idlen,
    const struct netaddr *a)
{
	uint8_t buf[POLICY_ID_MAX + 1 + 1 + 16];
	size_t alen = a->family == AF_INET ? 4 : 16;

	memcpy(buf, sandbox, idlen);
	buf[idlen] = 0;
	buf[idlen + 1] = (uint8_t)a->family;
	memcpy(buf + idlen + 2, a->a, alen);
	return hash_siphash(m->key, buf, idlen + 2 + alen);
}

static int
addrmem_addr_eq(const struct netaddr *x, const struct netaddr *y)
{
	return x->family == y->family &&
	    memcmp(x->a, y->a, x->family == AF_INET ? 4 : 16) == 0;
}

/* A usable id: 1..POLICY_ID_MAX bytes. Length in *len, or -1. */
static int
addrmem_id_len(const char *sandbox, size_t *len)
{
	if (sandbox == NULL)
		return -1;
	*len = strnlen(sandbox, POLICY_ID_MAX + 1);
	return *len == 0 || *len > POLICY_ID_MAX ? -1 : 0;
}

static int
addrmem_addr_ok(const struct netaddr *a)
{
	return a != NULL && (a->family == AF_INET || a->family == AF_INET6);
}

struct addrmem *
addrmem_new(size_t max_entries)
{
	struct addrmem *m;
	size_t nb = ADDRMEM_BUCKETS_MIN, i;

	if (max_entries == 0)
		return NULL;
	while (nb < max_entries && nb < ADDRMEM_BUCKETS_MAX)
		nb <<= 1;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	if ((m->buckets = calloc(nb, sizeof(m->buckets[0]))) == NULL) {
		free(m);
		return NULL;
	}
	if (pthread_mutex_init(&m->mtx, NULL) != 0) {
		free(m->buckets);
		free(m);
		return NULL;
	}
	m->nbuckets = nb;
	m->max = max_entries;
	for (i = 0; i < ADDRMEM_SB_BUCKETS; i++)
		LIST_INIT(&m->sbs[i]);
	hash_key_new(m->key);
	return m;
}

/* Leaves an empty sandbox record for addrmem_sb_gc(). */
static void
addrmem_entry_free(struct addrmem *m, struct addrmem_entry *e)
{
	LIST_REMOVE(e, hlink);
	TAILQ_REMOVE(&e->sb->entries, e, sblink);
	e->sb->n--;
	m->n--;
	free(e);
}

static void
addrmem_sb_gc(struct addrmem_sb *sb)
{
	if (sb != NULL && sb->n == 0) {
		LIST_REMOVE(sb, link);
		free(sb);
	}
}

void
addrmem_free(struct addrmem *m)
{
	struct addrmem_entry *e;
	struct addrmem_sb *sb;
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->nbuckets; i++)
		while ((e = LIST_FIRST(&m->buckets[i])) != NULL)
			addrmem_entry_free(m, e);
	for (i = 0; i < ADDRMEM_SB_BUCKETS; i++)
		while ((sb = LIST_FIRST(&m->sbs[i])) != NULL)
			addrmem_sb_gc(sb);
	pthread_mutex_destroy(&m->mtx);
	free(m->buckets);
	free(m);
}

static struct addrmem_sb *
addrmem_sb_get(struct addrmem *m, const char *sandbox, size_t idlen,
    int create)
{
	struct addrmem_sb *sb;
	uint64_t h = hash_siphash(m->key, (const uint8_t *)sandbox, idlen);
	size_t b = h & (ADDRMEM_SB_BUCKETS - 1);

	LIST_FOREACH(sb, &m->sbs[b], link)
		if (sb->hash == h && strcmp(sb->id, sandbox) == 0)
			return sb;
	if (!create || (sb = calloc(1, sizeof(*sb))) == NULL)
		return NULL;
	TAILQ_INIT(&sb->entries);
	sb->hash = h;
	memcpy(sb->id, sandbox, idlen);
	sb->id[idlen] = '\0';
	LIST_INSERT_HEAD(&m->sbs[b], sb, link);
	return sb;
}

/* Full: the sandbox with the most entries gives up its oldest. */
static void
addrmem_evict(struct addrmem *m, struct addrmem_sb *keep)
{
	struct addrmem_sb *sb, *big = NULL;
	size_t i;

	for (i = 0; i < ADDRMEM_SB_BUCKETS; i++)
		LIST_FOREACH(sb, &m->sbs[i], link)
			if (big == NULL || sb->n > big->n)
				big = sb;
	if (big == NULL || big->n == 0)
		return;
	addrmem_entry_free(m, TAILQ_FIRST(&big->entries));
	if (big != keep)
		addrmem_sb_gc(big);
}

/* Drop the sandbox's expired entries at its cold end (a few at a time). */
static void
addrmem_trim(struct addrmem *m, struct addrmem_sb *sb, uint64_t now)
{
	struct addrmem_entry *e;
	int i;

	for (i = 0; i < 4; i++) {
		e = TAILQ_FIRST(&sb->entries);
		if (e == NULL || e->expires_ms > now)
			break;
		addrmem_entry_free(m, e);
	}
}

/* Caller holds the lock; name is normalised. */
static void
addrmem_add_one(struct addrmem *m, struct addrmem_sb *sb, const char *name,
    size_t namelen, const struct netaddr *a, uint64_t expires, uint64_t now)
{
	struct addrmem_entry *e, *oldest = NULL, *next;
	uint64_t h = addrmem_key_hash(m, sb->id, strlen(sb->id), a);
	struct addrmem_bucket *b = &m->buckets[h & (m->nbuckets - 1)];
	size_t same = 0;

	for (e = LIST_FIRST(b); e != NULL; e = next) {
		next = LIST_NEXT(e, hlink);
		if (e->hash != h || e->sb != sb || !addrmem_addr_eq(&e->addr, a))
			continue;
		if (e->namelen == namelen && memcmp(e->name, name,
		    namelen) == 0) {
			/* Known: refresh, and make it the most recent. */
			if (expires > e->expires_ms)
				e->expires_ms = expires;
			e->seq = ++m->seq;
			TAILQ_REMOVE(&sb->entries, e, sblink);
			TAILQ_INSERT_TAIL(&sb->entries, e, sblink);
			return;
		}
		if (e->expires_ms <= now) {
			addrmem_entry_free(m, e);
			continue;
		}
		same++;
		if (oldest == NULL || e->seq < oldest->seq)
			oldest = e;
	}
	if (same >= ADDRMEM_PER_ADDR && oldest != NULL)
		addrmem_entry_free(m, oldest);
	if (m->n >= m->max)
		addrmem_evict(m, sb);
	if ((e = calloc(1, sizeof(*e) + namelen + 1)) == NULL)
		return;
	e->sb = sb;
	e->addr = *a;
	e->expires_ms = expires;
	e->seq = ++m->seq;
	e->hash = h;
	e->namelen = namelen;
	memcpy(e->name, name, namelen);
	e->name[namelen] = '\0';
	LIST_INSERT_HEAD(b, e, hlink);
	TAILQ_INSERT_TAIL(&sb->entries, e, sblink);
	sb->n++;
	m->n++;
}

/*
 * Names compare as the one host-name normaliser writes them (core/policy.h,
 * A-labels only): copy that form into out (ADDRMEM_NAME_MAX + 1). Its
 * length, or 0 for what is not a name.
 */
static size_t
addrmem_name_norm(const char *name, char *out)
{
	size_t len;
	int r;

	if (name == NULL)
		return 0;
	len = strnlen(name, ADDRMEM_NAME_MAX + 2);
	if (len > ADDRMEM_NAME_MAX + 1 || (r = policy_name_canon(name, len,
	    out, ADDRMEM_NAME_MAX + 1, POLICY_NAME_ASCII |
	    POLICY_NAME_NUMERIC)) <= 0)
		return 0;
	return (size_t)r;
}

void
addrmem_add(struct addrmem *m, const char *sandbox, const char *name,
    const struct netaddr *addrs, size_t n, uint32_t ttl)
{
	struct addrmem_sb *sb;
	char norm[ADDRMEM_NAME_MAX + 1];
	size_t idlen, namelen, i;
	uint64_t now, expires;

	if (m == NULL || addrmem_id_len(sandbox, &idlen) == -1 ||
	    addrs == NULL || n == 0 ||
	    (namelen = addrmem_name_norm(name, norm)) == 0)
		return;
	/* A TTL of 0 still covers the connection that follows at once. */
	now = addrmem_now_ms();
	expires = now + (uint64_t)(ttl > 0 ? ttl : 1) * 1000;
	pthread_mutex_lock(&m->mtx);
	if ((sb = addrmem_sb_get(m, sandbox, idlen, 1)) != NULL) {
		addrmem_trim(m, sb, now);
		for (i = 0; i < n; i++)
			if (addrmem_addr_ok(&addrs[i]))
				addrmem_add_one(m, sb, norm, namelen,
				    &addrs[i], expires, now);
		addrmem_sb_gc(sb);
	}
	pthread_mutex_unlock(&m->mtx);
}

/*
 * The live entry for (sandbox, a) with that name, or with any name and
 * the largest seq when name is NULL. Expired entries met on the way go.
 */
static struct addrmem_entry *
addrmem_find(struct addrmem *m, const char *sandbox, const char *name,
    const struct netaddr *a)
{
	struct addrmem_sb *sb;
	struct addrmem_entry *e, *next, *best = NULL;
	struct addrmem_bucket *b;
	char norm[ADDRMEM_NAME_MAX + 1];
	size_t idlen, namelen = 0;
	uint64_t h, now;

	if (addrmem_id_len(sandbox, &idlen) == -1 || !addrmem_addr_ok(a))
		return NULL;
	if (name != NULL && (namelen = addrmem_name_norm(name, norm)) == 0)
		return NULL;
	if ((sb = addrmem_sb_get(m, sandbox, idlen, 0)) == NULL)
		return NULL;
	h = addrmem_key_hash(m, sandbox, idlen, a);
	b = &m->buckets[h & (m->nbuckets - 1)];
	now = addrmem_now_ms();
	for (e = LIST_FIRST(b); e != NULL; e = next) {
		next = LIST_NEXT(e, hlink);
		if (e->hash != h || e->sb != sb || !addrmem_addr_eq(&e->addr, a))
			continue;
		if (e->expires_ms <= now) {
			addrmem_entry_free(m, e);
			continue;
		}
		if (name != NULL) {
			if (e->namelen == namelen &&
			    memcmp(e->name, norm, namelen) == 0) {
				best = e;
				break;
			}
			continue;
		}
		if (best == NULL || e->seq > best->seq)
			best = e;
	}
	/* best, when set, keeps sb alive. */
	addrmem_sb_gc(sb);
	return best;
}

int
addrmem_has(struct addrmem *m, const char *sandbox, const char *name,
    const struct netaddr *a)
{
	int rc;

	if (m == NULL || name == NULL)
		return 0;
	pthread_mutex_lock(&m->mtx);
	rc = addrmem_find(m, sandbox, name, a) != NULL;
	pthread_mutex_unlock(&m->mtx);
	return rc;
}

int
addrmem_lookup(struct addrmem *m, const char *sandbox,
    const struct netaddr *a, char *name, size_t namelen)
{
	struct addrmem_entry *e;
	int rc = -1;

	if (m == NULL || name == NULL || namelen == 0)
		return -1;
	pthread_mutex_lock(&m->mtx);
	if ((e = addrmem_find(m, sandbox, NULL, a)) != NULL &&
	    e->namelen < namelen) {
		memcpy(name, e->name, e->namelen + 1);
		rc = 0;
	}
	pthread_mutex_unlock(&m->mtx);
	return rc;
}
