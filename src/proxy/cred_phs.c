/*
 * Placeholder snapshots (cred_phs.h): building one, publishing it by
 * pointer and reclaiming the old ones once no reader looks at them, and
 * finding placeholders in bytes by their fixed prefix plus a hash lookup.
 * Owns every struct cred_ph; knows nothing of sessions or policies.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/util.h"
#include "proxy/cred_phs.h"
#include "vault/vault.h"

#define PFX		VAULT_PLACEHOLDER_PREFIX
#define PFX_LEN		(sizeof(VAULT_PLACEHOLDER_PREFIX) - 1)
#define KEY_LEN		(VAULT_PLACEHOLDER_LEN - PFX_LEN)	/* 32 base32 */
#define RND_LEN		VAULT_PLACEHOLDER_LEN
/* Bytes given back to the heap before the gateway asks malloc to return them. */
#define TRIM_BYTES	(256 * 1024)

struct cred_phs {
	struct cred_ph	**live;		/* issue order */
	size_t		 n_live;
	struct cred_ph	**gone;		/* removed, oldest first */
	size_t		 n_gone;
	struct cred_ph	**by_ph;	/* random form, open addressing */
	size_t		 ph_mask;
	size_t		 n_random;
	struct cred_ph	**by_sc;	/* live ones by (sandbox, cred) */
	size_t		 sc_mask;
	struct cred_ph	**fixed;	/* the rest, by placeholder, then seq */
	size_t		 n_fixed;
	size_t		*groups;	/* where each distinct fixed one starts */
	size_t		 n_groups;
	uint64_t	 key[2];
	size_t		 bytes;		/* tables and arrays */
	/* the publisher's, under its mutex */
	unsigned int	 pins;		/* readers without a hazard slot */
	struct cred_phs	*next_retired;
};

struct phs_hazard {
	_Atomic(const struct cred_phs *) snap;
	char		 pad[64 - sizeof(void *)];	/* one cache line each */
};

struct cred_phs_pub {
	pthread_mutex_t		 mtx;		/* writers */
	_Atomic(struct cred_phs *) cur;
	struct cred_phs		*retired;	/* swapped out, maybe still read */
	uint64_t		 key[2];
	uint64_t		 seq;
	size_t			 freed;		/* bytes released since the last trim */
	struct phs_hazard	 hz[CRED_PHS_READERS];
};

/* A thread's hazard slot, the same index in every publisher. */
static atomic_int phs_next_slot;
static _Thread_local int phs_slot = -1;	/* -2: none left */

/* ------------------------------------------------------------ hashing */

/*
 * SipHash-2-4 under the publisher's random key, so that chosen names and
 * placeholders cannot pile into one chain. Kept local until core/ has one.
 */
#define PHS_ROTL(x, b)	(uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define PHS_SIPROUND do {						\
	v0 += v1; v1 = PHS_ROTL(v1, 13); v1 ^= v0; v0 = PHS_ROTL(v0, 32); \
	v2 += v3; v3 = PHS_ROTL(v3, 16); v3 ^= v2;			\
	v0 += v3; v3 = PHS_ROTL(v3, 21); v3 ^= v0;			\
	v2 += v1; v1 = PHS_ROTL(v1, 17); v1 ^= v2; v2 = PHS_ROTL(v2, 32); \
} while (0)

static uint64_t
phs_hash(const uint64_t k[2], const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k[0];
	uint64_t v1 = 0x646f72616e646f6dULL ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ k[0];
	uint64_t v3 = 0x7465646279746573ULL ^ k[1];
	uint64_t m, last = (uint64_t)len << 56;
	size_t i, j, end = len & ~(size_t)7;

	for (i = 0; i < end; i += 8) {
		for (m = 0, j = 0; j < 8; j++)
			m |= (uint64_t)p[i + j] << (8 * j);
		v3 ^= m;
		PHS_SIPROUND;
		PHS_SIPROUND;
		v0 ^= m;
	}
	for (j = 0; j < (len & 7); j++)
		last |= (uint64_t)p[end + j] << (8 * j);
	v3 ^= last;
	PHS_SIPROUND;
	PHS_SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	PHS_SIPROUND;
	PHS_SIPROUND;
	PHS_SIPROUND;
	PHS_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t
sc_hash(const uint64_t k[2], const char *sandbox, const char *cred)
{
	char buf[512];
	size_t a = strlen(sandbox), b = strlen(cred);

	/* Longer pairs hash by their start; equality is checked in full. */
	if (a > 255)
		a = 255;
	if (b > 255)
		b = 255;
	memcpy(buf, sandbox, a);
	buf[a] = '\0';
	memcpy(buf + a + 1, cred, b);
	return phs_hash(k, buf, a + 1 + b);
}

/* ------------------------------------------------------------ the random form */

static int
is_b32(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

static unsigned char
lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* 1 when ph[0..len) is sg-ph- and 32 base32 characters, as issued. */
static int
random_form(const char *ph, size_t len)
{
	size_t i;

	if (len != RND_LEN || memcmp(ph, PFX, PFX_LEN) != 0)
		return 0;
	for (i = PFX_LEN; i < len; i++)
		if (!is_b32((unsigned char)ph[i]))
			return 0;
	return 1;
}

/* The 32 characters after a prefix into key (folded to lower case): 1, or 0. */
static int
random_key(const char *p, int fold, char key[KEY_LEN])
{
	unsigned char c;
	size_t i;

	for (i = 0; i < KEY_LEN; i++) {
		c = (unsigned char)p[i];
		if (fold)
			c = lower(c);
		if (!is_b32(c))
			return 0;
		key[i] = (char)c;
	}
	return 1;
}

static int
random_lookup(const struct cred_phs *s, const char key[KEY_LEN],
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	const struct cred_ph *e;
	uint64_t h;
	size_t i;
	int rc;

	if (s->n_random == 0)
		return 0;
	h = phs_hash(s->key, key, KEY_LEN);
	for (i = h & s->ph_mask; (e = s->by_ph[i]) != NULL;
	    i = (i + 1) & s->ph_mask)
		if (e->h_ph == h && memcmp(e->ph + PFX_LEN, key, KEY_LEN) == 0 &&
		    (rc = cb(e, arg)) != 0)
			return rc;
	return 0;
}

/*
 * Every sg-ph- (any case with fold) in b[0..n) followed by 32 base32
 * characters that are an issued placeholder.
 */
static int
search_random(const struct cred_phs *s, const char *b, size_t n, int fold,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	const char *at;
	char key[KEY_LEN];
	size_t i = 0;
	int rc;

	if (s->n_random == 0)
		return 0;
	while (i + RND_LEN <= n) {
		if (!fold) {
			if ((at = memmem(b + i, n - i, PFX, PFX_LEN)) == NULL)
				return 0;
			i = (size_t)(at - b);
			if (i + RND_LEN > n)
				return 0;
		} else if (lower((unsigned char)b[i]) != PFX[0] ||
		    strncasecmp(b + i, PFX, PFX_LEN) != 0) {
			i++;
			continue;
		}
		if (random_key(b + i + PFX_LEN, fold, key) &&
		    (rc = random_lookup(s, key, cb, arg)) != 0)
			return rc;
		i++;
	}
	return 0;
}

/*
 * Every %XX decoded: a placeholder that starts with a byte other than a hex
 * digit and holds no '%' is in v with some bytes escaped exactly when it is
 * in the decoded bytes (vault_swap.c's ph_match reading).
 */
static size_t
pct_decode(const char *v, size_t n, char *out)
{
	size_t i, o = 0;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if (v[i] == '%' && i + 2 < n && (hi = util_hexval(v[i + 1])) >= 0 &&
		    (lo = util_hexval(v[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[o++] = v[i];
	}
	return o;
}

static int
search_pct(const struct cred_phs *s, const char *v, size_t n,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	char *d;
	int rc;

	if (memchr(v, '%', n) == NULL)
		return search_random(s, v, n, 0, cb, arg);
	if ((d = malloc(n)) == NULL)
		return -1;
	rc = search_random(s, d, pct_decode(v, n, d), 0, cb, arg);
	free(d);
	return rc;
}

/* A header value or request target: as is, %-escaped, inside Basic. */
static int
search_value(const struct cred_phs *s, const char *v, size_t n,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	unsigned char *dec;
	size_t declen;
	int rc;

	if (s->n_random == 0)
		return 0;
	if ((rc = search_pct(s, v, n, cb, arg)) != 0)
		return rc;
	if ((rc = vault_basic_loose(v, n, &dec, &declen)) <= 0)
		return rc;
	rc = search_pct(s, (const char *)dec, declen, cb, arg);
	free(dec);
	return rc;
}

/* ------------------------------------------------------------ the fixed ones */

static const struct cred_ph *
group_head(const struct cred_phs *s, size_t g)
{
	return s->fixed[s->groups[g]];
}

static size_t
group_end(const struct cred_phs *s, size_t g)
{
	return g + 1 < s->n_groups ? s->groups[g + 1] : s->n_fixed;
}

static int
group_each(const struct cred_phs *s, size_t g,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	size_t i;
	int rc;

	for (i = s->groups[g]; i < group_end(s, g); i++)
		if ((rc = cb(s->fixed[i], arg)) != 0)
			return rc;
	return 0;
}

static int
ph_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* The group of fixed placeholder ph[0..len), or -1. */
static long
group_find(const struct cred_phs *s, const char *ph, size_t len)
{
	const struct cred_ph *e;
	size_t lo = 0, hi = s->n_groups, mid;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		e = group_head(s, mid);
		if ((c = ph_cmp(ph, len, e->ph, e->phlen)) == 0)
			return (long)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

static int
memcase_has(const char *b, size_t n, const char *what, size_t len)
{
	size_t i;

	for (i = 0; i + len <= n; i++)
		if (strncasecmp(b + i, what, len) == 0)
			return 1;
	return 0;
}

static int
fixed_in(const struct cred_ph *e, const char *b, size_t n, int flags)
{
	if (flags & CRED_PHS_VALUE)
		return vault_contains_placeholder(e->ph, b, n);
	if (flags & CRED_PHS_FOLD)
		return memcase_has(b, n, e->ph, e->phlen);
	return memmem(b, n, e->ph, e->phlen) != NULL;
}

/* ------------------------------------------------------------ snapshot lookups */

size_t
cred_phs_count(const struct cred_phs *s)
{
	return s->n_live + s->n_gone;
}

const struct cred_ph *
cred_phs_get(const struct cred_phs *s, const char *sandbox, const char *cred)
{
	const struct cred_ph *e;
	uint64_t h;
	size_t i;

	if (s->n_live == 0)
		return NULL;
	h = sc_hash(s->key, sandbox, cred);
	for (i = h & s->sc_mask; (e = s->by_sc[i]) != NULL;
	    i = (i + 1) & s->sc_mask)
		if (e->h_sc == h && strcmp(e->sandbox, sandbox) == 0 &&
		    strcmp(e->cred, cred) == 0)
			return e;
	return NULL;
}

int
cred_phs_match(const struct cred_phs *s, const char *ph, size_t len,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	long g;

	if (random_form(ph, len))
		return random_lookup(s, ph + PFX_LEN, cb, arg);
	if ((g = group_find(s, ph, len)) == -1)
		return 0;
	return group_each(s, (size_t)g, cb, arg);
}

struct owned_ctx {
	const char	*sandbox;
};

static int
owned_cb(const struct cred_ph *e, void *arg)
{
	const struct owned_ctx *o = arg;

	return !e->removed && strcmp(e->sandbox, o->sandbox) == 0;
}

int
cred_phs_owned(const struct cred_phs *s, const char *sandbox, const char *ph,
    size_t len)
{
	struct owned_ctx o = { sandbox };

	return cred_phs_match(s, ph, len, owned_cb, &o) > 0;
}

int
cred_phs_search(const struct cred_phs *s, const char *buf, size_t len,
    int flags, int (*cb)(const struct cred_ph *, void *), void *arg)
{
	size_t g;
	int rc;

	if (len == 0)
		return 0;
	if (flags & CRED_PHS_VALUE)
		rc = search_value(s, buf, len, cb, arg);
	else
		rc = search_random(s, buf, len, flags & CRED_PHS_FOLD, cb, arg);
	for (g = 0; rc == 0 && g < s->n_groups; g++)
		if (fixed_in(group_head(s, g), buf, len, flags))
			rc = group_each(s, g, cb, arg);
	return rc;
}

size_t
cred_phs_n_fixed(const struct cred_phs *s)
{
	return s->n_groups;
}

const char *
cred_phs_fixed(const struct cred_phs *s, size_t i, size_t *len)
{
	if (i >= s->n_groups)
		return NULL;
	*len = group_head(s, i)->phlen;
	return group_head(s, i)->ph;
}

int
cred_phs_has_random(const struct cred_phs *s)
{
	return s->n_random > 0;
}

/* p[0..k) could begin a random placeholder. */
static int
random_prefix(const char *p, size_t k)
{
	size_t j;

	for (j = 0; j < k; j++)
		if (j < PFX_LEN ? p[j] != PFX[j] : !is_b32((unsigned char)p[j]))
			return 0;
	return 1;
}

size_t
cred_phs_holdback(const struct cred_phs *s, const char *end, size_t m)
{
	const struct cred_ph *e;
	size_t g, k, best = 0;

	if (s->n_random > 0)
		for (k = m < RND_LEN - 1 ? m : RND_LEN - 1; k > 0; k--)
			if (random_prefix(end + m - k, k)) {
				best = k;
				break;
			}
	for (g = 0; g < s->n_groups; g++) {
		e = group_head(s, g);
		for (k = m < e->phlen - 1 ? m : e->phlen - 1; k > best; k--)
			if (memcmp(end + m - k, e->ph, k) == 0) {
				best = k;
				break;
			}
	}
	return best;
}

/* ------------------------------------------------------------ building */

static size_t
ph_size(const struct cred_ph *e)
{
	return sizeof(*e) + strlen(e->sandbox) + strlen(e->cred) + e->phlen + 3;
}

static struct cred_ph *
ph_new(struct cred_phs_pub *pub, const char *sandbox, const char *cred,
    const char *ph, int removed)
{
	size_t ls = strlen(sandbox) + 1, lc = strlen(cred) + 1;
	size_t lp = strlen(ph) + 1;
	struct cred_ph *e;
	char *p;

	if ((e = calloc(1, sizeof(*e) + ls + lc + lp)) == NULL)
		return NULL;
	p = (char *)(e + 1);
	e->ph = memcpy(p, ph, lp);
	e->sandbox = memcpy(p + lp, sandbox, ls);
	e->cred = memcpy(p + lp + ls, cred, lc);
	e->phlen = lp - 1;
	e->removed = removed;
	if ((e->hashed = random_form(ph, e->phlen)))
		e->h_ph = phs_hash(pub->key, ph + PFX_LEN, KEY_LEN);
	e->h_sc = sc_hash(pub->key, sandbox, cred);
	e->seq = pub->seq++;
	return e;
}

static void
ph_unref(struct cred_phs_pub *pub, struct cred_ph *e)
{
	if (--e->refs > 0)
		return;
	pub->freed += ph_size(e);
	free(e);
}

static size_t
table_cap(size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	return cap;
}

static void
table_put(struct cred_ph **t, size_t mask, struct cred_ph *e, uint64_t h)
{
	size_t i;

	for (i = h & mask; t[i] != NULL; i = (i + 1) & mask)
		;
	t[i] = e;
}

static int
fixed_cmp(const void *a, const void *b)
{
	const struct cred_ph *x = *(struct cred_ph *const *)a;
	const struct cred_ph *y = *(struct cred_ph *const *)b;
	int c = ph_cmp(x->ph, x->phlen, y->ph, y->phlen);

	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
phs_free_tables(struct cred_phs *s)
{
	free(s->by_ph);
	free(s->by_sc);
	free(s->fixed);
	free(s->groups);
	free(s);
}

/* Either array's entry i (live first). */
static struct cred_ph *
entry_at(struct cred_ph *const *live, size_t n_live, struct cred_ph *const *gone,
    size_t i)
{
	return i < n_live ? live[i] : gone[i - n_live];
}

static int
phs_index_fixed(struct cred_phs *s, struct cred_ph *const *live,
    size_t n_live, struct cred_ph *const *gone, size_t n_gone)
{
	struct cred_ph *e;
	size_t i, k = 0;

	if (s->n_fixed == 0)
		return 0;
	if ((s->fixed = calloc(s->n_fixed, sizeof(*s->fixed))) == NULL ||
	    (s->groups = calloc(s->n_fixed, sizeof(*s->groups))) == NULL)
		return -1;
	for (i = 0; i < n_live + n_gone; i++)
		if (!(e = entry_at(live, n_live, gone, i))->hashed)
			s->fixed[k++] = e;
	qsort(s->fixed, s->n_fixed, sizeof(*s->fixed), fixed_cmp);
	for (i = 0; i < s->n_fixed; i++)
		if (i == 0 || ph_cmp(s->fixed[i]->ph, s->fixed[i]->phlen,
		    s->fixed[i - 1]->ph, s->fixed[i - 1]->phlen) != 0)
			s->groups[s->n_groups++] = i;
	s->bytes += 2 * s->n_fixed * sizeof(void *);
	return 0;
}

static struct cred_ph **
table_new(size_t n, size_t *mask, size_t *bytes)
{
	size_t cap = table_cap(n);
	struct cred_ph **t;

	if ((t = calloc(cap, sizeof(*t))) == NULL)
		return NULL;
	*mask = cap - 1;
	*bytes += cap * sizeof(*t);
	return t;
}

/*
 * A snapshot of live and gone (malloc'd arrays it takes over on success;
 * on failure they stay the caller's). NULL: out of memory.
 */
static struct cred_phs *
phs_build(struct cred_phs_pub *pub, struct cred_ph **live, size_t n_live,
    struct cred_ph **gone, size_t n_gone)
{
	struct cred_phs *s;
	struct cred_ph *e;
	size_t i;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	memcpy(s->key, pub->key, sizeof(s->key));
	for (i = 0; i < n_live + n_gone; i++) {
		if (entry_at(live, n_live, gone, i)->hashed)
			s->n_random++;
		else
			s->n_fixed++;
	}
	if ((s->n_random > 0 && (s->by_ph = table_new(s->n_random,
	    &s->ph_mask, &s->bytes)) == NULL) ||
	    (n_live > 0 && (s->by_sc = table_new(n_live, &s->sc_mask,
	    &s->bytes)) == NULL) ||
	    phs_index_fixed(s, live, n_live, gone, n_gone) == -1) {
		phs_free_tables(s);
		return NULL;
	}
	for (i = 0; i < n_live + n_gone; i++) {
		e = entry_at(live, n_live, gone, i);
		if (e->hashed)
			table_put(s->by_ph, s->ph_mask, e, e->h_ph);
		if (i < n_live)
			table_put(s->by_sc, s->sc_mask, e, e->h_sc);
		e->refs++;
	}
	s->live = live;
	s->n_live = n_live;
	s->gone = gone;
	s->n_gone = n_gone;
	s->bytes += (n_live + n_gone) * sizeof(void *) + sizeof(*s);
	return s;
}

static void
phs_free(struct cred_phs_pub *pub, struct cred_phs *s)
{
	size_t i;

	for (i = 0; i < s->n_live; i++)
		ph_unref(pub, s->live[i]);
	for (i = 0; i < s->n_gone; i++)
		ph_unref(pub, s->gone[i]);
	free(s->live);
	free(s->gone);
	phs_free_tables(s);
}

/* ------------------------------------------------------------ publishing */

static int
reader_slot(void)
{
	int i;

	if (phs_slot == -1) {
		i = atomic_fetch_add(&phs_next_slot, 1);
		phs_slot = i < CRED_PHS_READERS ? i : -2;
	}
	return phs_slot;
}

const struct cred_phs *
cred_phs_enter(struct cred_phs_pub *pub)
{
	struct cred_phs *s;
	int i = reader_slot();

	if (i < 0) {
		pthread_mutex_lock(&pub->mtx);
		s = atomic_load(&pub->cur);
		s->pins++;
		pthread_mutex_unlock(&pub->mtx);
		return s;
	}
	/*
	 * Announce, then check it is still current: a writer that swapped it
	 * out after our check sees our announcement before it frees it.
	 */
	do {
		s = atomic_load(&pub->cur);
		atomic_store(&pub->hz[i].snap, s);
	} while (atomic_load(&pub->cur) != s);
	return s;
}

static int
hazarded(struct cred_phs_pub *pub, const struct cred_phs *s)
{
	int i, n = atomic_load(&phs_next_slot);

	if (n > CRED_PHS_READERS)
		n = CRED_PHS_READERS;
	for (i = 0; i < n; i++)
		if (atomic_load(&pub->hz[i].snap) == s)
			return 1;
	return 0;
}

/* Free what no reader holds; give a large release back to the system. */
static void
reclaim(struct cred_phs_pub *pub)
{
	struct cred_phs **pp = &pub->retired, *s;
	size_t now = atomic_load(&pub->cur)->bytes;

	while ((s = *pp) != NULL) {
		if (s->pins > 0 || hazarded(pub, s)) {
			pp = &s->next_retired;
			continue;
		}
		*pp = s->next_retired;
		if (s->bytes > now)
			pub->freed += s->bytes - now;
		phs_free(pub, s);
	}
#ifdef __GLIBC__
	/* glibc keeps freed small chunks; without this RSS would not shrink. */
	if (pub->freed >= TRIM_BYTES) {
		malloc_trim(0);
		pub->freed = 0;
	}
#endif
}

void
cred_phs_leave(struct cred_phs_pub *pub, const struct cred_phs *snap)
{
	struct cred_phs *s;

	if (phs_slot >= 0) {
		atomic_store(&pub->hz[phs_slot].snap, NULL);
		return;
	}
	pthread_mutex_lock(&pub->mtx);
	for (s = pub->retired; s != NULL && s != snap; s = s->next_retired)
		;
	if (s == NULL)
		s = atomic_load(&pub->cur);
	s->pins--;
	reclaim(pub);
	pthread_mutex_unlock(&pub->mtx);
}

static void
publish(struct cred_phs_pub *pub, struct cred_phs *s)
{
	struct cred_phs *old = atomic_exchange(&pub->cur, s);

	old->next_retired = pub->retired;
	pub->retired = old;
	reclaim(pub);
}

struct cred_phs_pub *
cred_phs_pub_new(void)
{
	struct cred_phs_pub *pub;
	struct cred_phs *s;

	if ((pub = calloc(1, sizeof(*pub))) == NULL)
		return NULL;
	if (getrandom(pub->key, sizeof(pub->key), 0) != sizeof(pub->key) ||
	    (s = phs_build(pub, NULL, 0, NULL, 0)) == NULL) {
		free(pub);
		return NULL;
	}
	pthread_mutex_init(&pub->mtx, NULL);
	atomic_init(&pub->cur, s);
	return pub;
}

void
cred_phs_pub_free(struct cred_phs_pub *pub)
{
	struct cred_phs *s;

	if (pub == NULL)
		return;
	while ((s = pub->retired) != NULL) {
		pub->retired = s->next_retired;
		phs_free(pub, s);
	}
	phs_free(pub, atomic_load(&pub->cur));
	pthread_mutex_destroy(&pub->mtx);
	free(pub);
}

size_t
cred_phs_pub_count(struct cred_phs_pub *pub)
{
	size_t n;

	pthread_mutex_lock(&pub->mtx);
	n = cred_phs_count(atomic_load(&pub->cur));
	pthread_mutex_unlock(&pub->mtx);
	return n;
}

/* ------------------------------------------------------------ changes */

/* Already issued, or earlier in this batch. */
static int
have(const struct cred_phs *cur, struct cred_ph *const *add, size_t k,
    const struct cred_phs_want *w)
{
	size_t i;

	if (cred_phs_get(cur, w->sandbox, w->cred) != NULL)
		return 1;
	for (i = 0; i < k; i++)
		if (strcmp(add[i]->sandbox, w->sandbox) == 0 &&
		    strcmp(add[i]->cred, w->cred) == 0)
			return 1;
	return 0;
}

/* cur's live placeholders and add[0..k), in one new array; gone copied. */
static struct cred_phs *
with_added(struct cred_phs_pub *pub, const struct cred_phs *cur,
    struct cred_ph *const *add, size_t k)
{
	struct cred_ph **live, **gone = NULL;
	struct cred_phs *s;

	if ((live = calloc(cur->n_live + k, sizeof(*live))) == NULL)
		return NULL;
	if (cur->n_live > 0)
		memcpy(live, cur->live, cur->n_live * sizeof(*live));
	memcpy(live + cur->n_live, add, k * sizeof(*live));
	if (cur->n_gone > 0 &&
	    (gone = malloc(cur->n_gone * sizeof(*gone))) == NULL) {
		free(live);
		return NULL;
	}
	if (cur->n_gone > 0)
		memcpy(gone, cur->gone, cur->n_gone * sizeof(*gone));
	if ((s = phs_build(pub, live, cur->n_live + k, gone,
	    cur->n_gone)) == NULL) {
		free(live);
		free(gone);
	}
	return s;
}

int
cred_phs_issue(struct cred_phs_pub *pub, const struct cred_phs_want *w,
    size_t n)
{
	const struct cred_phs *cur;
	struct cred_phs *s;
	struct cred_ph **add;
	char rnd[VAULT_PLACEHOLDER_LEN + 1];
	size_t i, k = 0;
	int rc = -1;

	if ((add = calloc(n > 0 ? n : 1, sizeof(*add))) == NULL)
		return -1;
	pthread_mutex_lock(&pub->mtx);
	cur = atomic_load(&pub->cur);
	for (i = 0; i < n; i++) {
		if (have(cur, add, k, &w[i]))
			continue;
		if (w[i].fixed == NULL)
			vault_placeholder_new(rnd);
		if ((add[k] = ph_new(pub, w[i].sandbox, w[i].cred,
		    w[i].fixed != NULL ? w[i].fixed : rnd, 0)) == NULL)
			goto done;
		k++;
	}
	rc = 0;
	if (k > 0) {
		if ((s = with_added(pub, cur, add, k)) == NULL)
			rc = -1;
		else {
			publish(pub, s);
			k = 0;		/* the snapshot holds them */
		}
	}
done:
	pthread_mutex_unlock(&pub->mtx);
	for (i = 0; i < k; i++)
		free(add[i]);
	free(add);
	return rc;
}

/*
 * cur without sandbox's live placeholders, which join the removed ones as
 * copies marked removed; the oldest removed ones beyond the bound go.
 */
static struct cred_phs *
without(struct cred_phs_pub *pub, const struct cred_phs *cur,
    const char *sandbox, size_t m)
{
	struct cred_ph **live, **gone, *e;
	size_t i, nl = 0, ng = 0, total, drop;
	struct cred_phs *s = NULL;

	total = cur->n_gone + m;
	drop = total > CRED_PHS_REMOVED_MAX ? total - CRED_PHS_REMOVED_MAX : 0;
	live = calloc(cur->n_live - m + 1, sizeof(*live));
	gone = calloc(total - drop + 1, sizeof(*gone));
	if (live == NULL || gone == NULL)
		goto fail;
	for (i = drop; i < cur->n_gone; i++)
		gone[ng++] = cur->gone[i];
	drop = drop > cur->n_gone ? drop - cur->n_gone : 0;
	for (i = 0; i < cur->n_live; i++) {
		e = cur->live[i];
		if (strcmp(e->sandbox, sandbox) != 0)
			live[nl++] = e;
		else if (drop > 0)
			drop--;
		else if ((gone[ng++] = ph_new(pub, e->sandbox, e->cred, e->ph,
		    1)) == NULL)
			goto fail;
	}
	if ((s = phs_build(pub, live, nl, gone, ng)) != NULL)
		return s;
fail:
	/* The copies made so far have no other holder. */
	for (i = 0; gone != NULL && i < ng; i++)
		if (gone[i] != NULL && gone[i]->refs == 0)
			free(gone[i]);
	free(live);
	free(gone);
	return NULL;
}

int
cred_phs_forget(struct cred_phs_pub *pub, const char *sandbox)
{
	const struct cred_phs *cur;
	struct cred_phs *s;
	size_t i, m = 0;
	int rc = 0;

	pthread_mutex_lock(&pub->mtx);
	cur = atomic_load(&pub->cur);
	for (i = 0; i < cur->n_live; i++)
		if (strcmp(cur->live[i]->sandbox, sandbox) == 0)
			m++;
	if (m > 0) {
		if ((s = without(pub, cur, sandbox, m)) == NULL)
			rc = -1;
		else
			publish(pub, s);
	}
	pthread_mutex_unlock(&pub->mtx);
	return rc;
}
