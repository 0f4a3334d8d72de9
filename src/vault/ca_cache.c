/*
 * The interception CA's leaf cache: leaves by name in a hash table keyed
 * with a secret SipHash key (hostile names cannot aim at one chain) and an
 * LRU list that keeps the cache within its bound. Callers hold ca->mtx.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "core/hash.h"
#include "vault/ca.h"
#include "vault/ca_int.h"

#define CA_CACHE_MAX		10000

static uint64_t
ca_pow2(size_t n)
{
	uint64_t p = 64;

	while (p < n && p < ((uint64_t)1 << 30))
		p <<= 1;
	return p;
}

uint64_t
ca_cache_hash(const struct ca *ca, const char *name, size_t len, int is_ip)
{
	return hash_siphash(ca->hkey, name, len) ^ (uint64_t)is_ip;
}

static void
ca_entry_free(struct ca_entry *e)
{
	X509_free(e->cert);
	free(e);
}

int
ca_cache_init(struct ca *ca)
{
	ca->max_entries = CA_CACHE_MAX;
	ca->nbuckets = ca_pow2(CA_CACHE_MAX);
	if ((ca->buckets = calloc(ca->nbuckets, sizeof(*ca->buckets))) == NULL)
		return -1;
	return 0;
}

void
ca_cache_free(struct ca *ca)
{
	struct ca_entry *e, *next;

	for (e = ca->lru_head; e != NULL; e = next) {
		next = e->next;
		ca_entry_free(e);
	}
	free(ca->buckets);
}

struct ca_entry *
ca_cache_find(struct ca *ca, uint64_t h, const char *name, size_t len,
    int is_ip)
{
	struct ca_entry *e;

	for (e = ca->buckets[h & (ca->nbuckets - 1)]; e != NULL; e = e->hnext)
		if (e->hash == h && e->len == len && e->is_ip == is_ip &&
		    memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

static void
ca_lru_unlink(struct ca *ca, struct ca_entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		ca->lru_head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		ca->lru_tail = e->prev;
	e->prev = e->next = NULL;
}

static void
ca_lru_push(struct ca *ca, struct ca_entry *e)
{
	e->prev = NULL;
	e->next = ca->lru_head;
	if (ca->lru_head != NULL)
		ca->lru_head->prev = e;
	ca->lru_head = e;
	if (ca->lru_tail == NULL)
		ca->lru_tail = e;
}

void
ca_cache_remove(struct ca *ca, struct ca_entry *e)
{
	struct ca_entry **pp = &ca->buckets[e->hash & (ca->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	ca_lru_unlink(ca, e);
	ca->entries--;
	ca_entry_free(e);
}

/* Evict least recently used entries down to the bound; busy ones stay. */
static void
ca_evict(struct ca *ca, size_t keep)
{
	struct ca_entry *e = ca->lru_tail, *prev;

	while (ca->entries > keep && e != NULL) {
		prev = e->prev;
		if (!e->busy)
			ca_cache_remove(ca, e);
		e = prev;
	}
}

struct ca_entry *
ca_cache_insert(struct ca *ca, uint64_t h, const char *name, size_t len,
    int is_ip)
{
	struct ca_entry *e;
	size_t b;

	ca_evict(ca, ca->max_entries > 0 ? ca->max_entries - 1 : 0);
	if ((e = calloc(1, sizeof(*e) + len + 1)) == NULL)
		return NULL;
	e->hash = h;
	e->len = len;
	e->is_ip = is_ip;
	e->busy = 1;
	memcpy(e->name, name, len);
	b = h & (ca->nbuckets - 1);
	e->hnext = ca->buckets[b];
	ca->buckets[b] = e;
	ca_lru_push(ca, e);
	ca->entries++;
	return e;
}


void
ca_cache_touch(struct ca *ca, struct ca_entry *e)
{
	ca_lru_unlink(ca, e);
	ca_lru_push(ca, e);
}

void
ca_get_stats(struct ca *ca, struct ca_stats *st)
{
	pthread_mutex_lock(&ca->mtx);
	st->minted = ca->minted;
	st->hits = ca->hits;
	st->entries = ca->entries;
	pthread_mutex_unlock(&ca->mtx);
}

void
ca_set_cache_max(struct ca *ca, size_t max)
{
	struct ca_entry **nb, *e, *next;
	size_t n, i, b;

	if (max == 0)
		max = 1;
	pthread_mutex_lock(&ca->mtx);
	ca->max_entries = max;
	ca_evict(ca, max);
	n = ca_pow2(max);
	if (n > ca->nbuckets && (nb = calloc(n, sizeof(*nb))) != NULL) {
		for (i = 0; i < ca->nbuckets; i++) {
			for (e = ca->buckets[i]; e != NULL; e = next) {
				next = e->hnext;
				b = e->hash & (n - 1);
				e->hnext = nb[b];
				nb[b] = e;
			}
		}
		free(ca->buckets);
		ca->buckets = nb;
		ca->nbuckets = n;
	}
	pthread_mutex_unlock(&ca->mtx);
}
