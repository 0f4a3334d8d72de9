/*
 * Placeholder snapshots (cred_phs.h): building one, publishing it by
 * pointer and reclaiming the old ones once no reader looks at them, and
 * finding placeholders in bytes by their prefix (sg-ph-, or a shape's)
 * plus a hash lookup.
 * Owns every struct cred_ph; knows nothing of connections, exchanges or policies.
 *
 * A snapshot is two arrays of SHARDS shard pointers (random placeholders by
 * their hash, live ones by their sandbox's) and the list of fixed ones. A
 * shard is a small immutable hash table that snapshots share: a change
 * copies the shards it touches and the two arrays, not the whole set.
 */
#include <sys/mman.h>
#include <sys/random.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"
#include "exchange/cred_phs.h"
#include "vault/vault.h"

/* Under ASan, a slot not handed out is poisoned, as freed heap memory is. */
#if defined(__SANITIZE_ADDRESS__)
#define PHS_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PHS_ASAN	1
#endif
#endif
#ifdef PHS_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(a, n)		((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n)	((void)(a), (void)(n))
#endif

#define PFX		VAULT_PLACEHOLDER_PREFIX
#define PFX_LEN		(sizeof(VAULT_PLACEHOLDER_PREFIX) - 1)
#define KEY_LEN		(VAULT_PLACEHOLDER_LEN - PFX_LEN)	/* 32 base32 */
#define RND_LEN		VAULT_PLACEHOLDER_LEN
#define SHARD_BITS	8
#define SHARDS		(1u << SHARD_BITS)
/*
 * Removed placeholders are copied into a slab of their own: kept for a
 * while, they would otherwise pin pages of the heap all over. Headroom for
 * copies evicted but still held by a snapshot a reader has not left.
 */
#define SLAB_SLOT	256
#define SLAB_SLOTS	(CRED_PHS_REMOVED_MAX + CRED_PHS_REMOVED_MAX / 4)

/* Open addressing; slot i starts at (hash >> SHARD_BITS) & mask. */
struct phs_shard {
	unsigned int	 refs;		/* snapshots holding it */
	size_t		 n;
	size_t		 mask;
	struct cred_ph	*slot[];
};

/* The fixed placeholders: sorted by placeholder, then issue order. */
struct phs_fixed {
	unsigned int	 refs;
	size_t		 n;
	size_t		 n_groups;
	size_t		*groups;	/* where each distinct one starts */
	struct cred_ph	*v[];
};

/* A shape of shaped placeholders, while some placeholder has it. */
struct phs_shape {
	char		 prefix[CRED_PHS_PREFIX_MAX];
	size_t		 plen;
	size_t		 len;
	const char	*alphabet;
	size_t		 n;		/* placeholders of this shape */
	unsigned char	 in[256];	/* SHAPE_EXACT, SHAPE_FOLD */
};
#define SHAPE_EXACT	0x1	/* in the alphabet */
#define SHAPE_FOLD	0x2	/* in it up to case */

struct cred_phs {
	struct phs_shard *by_ph[SHARDS];	/* random form and shaped, by h_ph */
	struct phs_shard *by_sb[SHARDS];	/* live ones, by h_sb */
	struct phs_fixed *fixed;		/* NULL: none */
	size_t		 n_live;
	size_t		 n_gone;
	size_t		 n_random;	/* sg-ph- form */
	struct phs_shape *shapes;		/* the draft's own copy */
	size_t		 n_shapes;
	uint64_t	 key[2];
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
	/* Removed placeholders in the order they went; the current snapshot holds them. */
	struct cred_ph		*ring[CRED_PHS_REMOVED_MAX];
	size_t			 ring_head, ring_n;
	char			*slab;		/* SLAB_SLOTS slots; MAP_FAILED: none */
	size_t			 slab_used;	/* slots ever handed out */
	uint32_t		 slab_free[SLAB_SLOTS];	/* slots to hand out again */
	size_t			 slab_nfree;
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
sb_hash(const uint64_t k[2], const char *sandbox)
{
	return phs_hash(k, sandbox, strlen(sandbox));
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
	const struct phs_shard *sh;
	const struct cred_ph *e;
	uint64_t h;
	size_t i;
	int rc;

	if (s->n_random == 0)
		return 0;
	h = phs_hash(s->key, key, KEY_LEN);
	if ((sh = s->by_ph[h & (SHARDS - 1)]) == NULL)
		return 0;
	for (i = (h >> SHARD_BITS) & sh->mask; (e = sh->slot[i]) != NULL;
	    i = (i + 1) & sh->mask)
		if (e->h_ph == h && e->alphabet == NULL &&
		    memcmp(e->ph + PFX_LEN, key, KEY_LEN) == 0 &&
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

/* ------------------------------------------------------------ shaped ones */

/* The keyed hash of ph[0..len) folded to lower case (DNS may fold it). */
static uint64_t
shaped_hash(const uint64_t k[2], const char *ph, size_t len)
{
	char low[CRED_PHS_SHAPED_MAX];
	size_t i;

	for (i = 0; i < len; i++)
		low[i] = (char)lower((unsigned char)ph[i]);
	return phs_hash(k, low, len);
}

/* 1 when p[0..sh->len) has the shape (its prefix in any case with fold). */
static int
shape_at(const struct phs_shape *sh, const char *p, int fold)
{
	unsigned char want = fold ? SHAPE_FOLD : SHAPE_EXACT;
	size_t i;

	if (fold ? strncasecmp(p, sh->prefix, sh->plen) != 0 :
	    memcmp(p, sh->prefix, sh->plen) != 0)
		return 0;
	for (i = sh->plen; i < sh->len; i++)
		if (!(sh->in[(unsigned char)p[i]] & want))
			return 0;
	return 1;
}

/* The shaped placeholders that are p[0..len) (up to case with fold). */
static int
shaped_lookup(const struct cred_phs *s, const char *p, size_t len, int fold,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	const struct phs_shard *sh;
	const struct cred_ph *e;
	uint64_t h = shaped_hash(s->key, p, len);
	size_t i;
	int rc;

	if ((sh = s->by_ph[h & (SHARDS - 1)]) == NULL)
		return 0;
	for (i = (h >> SHARD_BITS) & sh->mask; (e = sh->slot[i]) != NULL;
	    i = (i + 1) & sh->mask)
		if (e->h_ph == h && e->alphabet != NULL && e->phlen == len &&
		    (fold ? strncasecmp(e->ph, p, len) == 0 :
		    memcmp(e->ph, p, len) == 0) && (rc = cb(e, arg)) != 0)
			return rc;
	return 0;
}

/*
 * Every shape's prefix in b[0..n), followed by characters of its alphabet
 * up to its length, looked up. The cost is one scan per shape (a shape is
 * a credential's, shared by all its sandboxes), whatever their number.
 */
static int
search_shaped(const struct cred_phs *s, const char *b, size_t n, int fold,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	const struct phs_shape *sh;
	const char *at;
	size_t k, i;
	int rc;

	for (k = 0; k < s->n_shapes; k++) {
		sh = &s->shapes[k];
		for (i = 0; i + sh->len <= n; i++) {
			if (!fold) {
				if ((at = memmem(b + i, n - i, sh->prefix,
				    sh->plen)) == NULL)
					break;
				i = (size_t)(at - b);
				if (i + sh->len > n)
					break;
			}
			if (shape_at(sh, b + i, fold) &&
			    (rc = shaped_lookup(s, b + i, sh->len, fold, cb,
			    arg)) != 0)
				return rc;
		}
	}
	return 0;
}

/* Both prefix forms: sg-ph- and the shapes'. */
static int
search_forms(const struct cred_phs *s, const char *b, size_t n, int fold,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	int rc;

	if ((rc = search_random(s, b, n, fold, cb, arg)) != 0)
		return rc;
	return search_shaped(s, b, n, fold, cb, arg);
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
		return search_forms(s, v, n, 0, cb, arg);
	/*
	 * A shape's prefix may begin with two hex digits: a '%' put before
	 * the placeholder would eat them in the decoded bytes. As is, too.
	 */
	if ((rc = search_shaped(s, v, n, 0, cb, arg)) != 0)
		return rc;
	if ((d = malloc(n)) == NULL)
		return -1;
	rc = search_forms(s, d, pct_decode(v, n, d), 0, cb, arg);
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

	if (s->n_random == 0 && s->n_shapes == 0)
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

static size_t
n_groups(const struct cred_phs *s)
{
	return s->fixed != NULL ? s->fixed->n_groups : 0;
}

static const struct cred_ph *
group_head(const struct cred_phs *s, size_t g)
{
	return s->fixed->v[s->fixed->groups[g]];
}

static int
group_each(const struct cred_phs *s, size_t g,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	const struct phs_fixed *f = s->fixed;
	size_t i, end = g + 1 < f->n_groups ? f->groups[g + 1] : f->n;
	int rc;

	for (i = f->groups[g]; i < end; i++)
		if ((rc = cb(f->v[i], arg)) != 0)
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
	size_t lo = 0, hi = n_groups(s), mid;
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
	const struct phs_shard *sh;
	const struct cred_ph *e;
	uint64_t h;
	size_t i;

	if (s->n_live == 0)
		return NULL;
	h = sb_hash(s->key, sandbox);
	if ((sh = s->by_sb[h & (SHARDS - 1)]) == NULL)
		return NULL;
	/* A sandbox's placeholders share a chain: it has a few. */
	for (i = (h >> SHARD_BITS) & sh->mask; (e = sh->slot[i]) != NULL;
	    i = (i + 1) & sh->mask)
		if (e->h_sb == h && strcmp(e->sandbox, sandbox) == 0 &&
		    strcmp(e->cred, cred) == 0)
			return e;
	return NULL;
}

int
cred_phs_match(const struct cred_phs *s, const char *ph, size_t len,
    int (*cb)(const struct cred_ph *, void *), void *arg)
{
	size_t k;
	long g;
	int rc;

	if (random_form(ph, len) &&
	    (rc = random_lookup(s, ph + PFX_LEN, cb, arg)) != 0)
		return rc;
	/* One lookup finds a shaped one, whatever its shape. */
	for (k = 0; k < s->n_shapes; k++)
		if (len == s->shapes[k].len && shape_at(&s->shapes[k], ph, 0)) {
			if ((rc = shaped_lookup(s, ph, len, 0, cb, arg)) != 0)
				return rc;
			break;
		}
	if ((g = group_find(s, ph, len)) == -1)
		return 0;
	return group_each(s, (size_t)g, cb, arg);
}

int
cred_phs_mine(const struct cred_phs *s, const struct cred_ph *e,
    const char *sandbox)
{
	/* Live: its sandbox's index still points at it. */
	return strcmp(e->sandbox, sandbox) == 0 &&
	    cred_phs_get(s, e->sandbox, e->cred) == e;
}

struct owned_ctx {
	const struct cred_phs	*s;
	const char		*sandbox;
};

static int
owned_cb(const struct cred_ph *e, void *arg)
{
	const struct owned_ctx *o = arg;

	return cred_phs_mine(o->s, e, o->sandbox);
}

int
cred_phs_owned(const struct cred_phs *s, const char *sandbox, const char *ph,
    size_t len)
{
	struct owned_ctx o = { s, sandbox };

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
		rc = search_forms(s, buf, len, flags & CRED_PHS_FOLD, cb, arg);
	for (g = 0; rc == 0 && g < n_groups(s); g++)
		if (fixed_in(group_head(s, g), buf, len, flags))
			rc = group_each(s, g, cb, arg);
	return rc;
}

size_t
cred_phs_n_fixed(const struct cred_phs *s)
{
	return n_groups(s);
}

const char *
cred_phs_fixed(const struct cred_phs *s, size_t i, size_t *len)
{
	if (i >= n_groups(s))
		return NULL;
	*len = group_head(s, i)->phlen;
	return group_head(s, i)->ph;
}

size_t
cred_phs_n_shapes(const struct cred_phs *s)
{
	return s->n_shapes;
}

const char *
cred_phs_shape(const struct cred_phs *s, size_t i, size_t *plen, size_t *len)
{
	if (i >= s->n_shapes)
		return NULL;
	*plen = s->shapes[i].plen;
	*len = s->shapes[i].len;
	return s->shapes[i].prefix;
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

/*
 * The longest k (best < k < sh->len, k <= m) such that end[m-k..m) could
 * begin a placeholder of shape sh; best when none. r: how many of the last
 * bytes are in the alphabet, so only the starts that leave no more than r
 * bytes after the prefix need a look.
 */
static size_t
shape_holdback(const struct phs_shape *sh, const char *end, size_t m,
    size_t best)
{
	size_t k, r = 0, top = m < sh->len - 1 ? m : sh->len - 1;

	while (r < top && (sh->in[(unsigned char)end[m - 1 - r]] & SHAPE_EXACT))
		r++;
	for (k = top; k > best; k--) {
		if (k > sh->plen) {
			if (k - sh->plen > r)
				continue;
			if (memcmp(end + m - k, sh->prefix, sh->plen) == 0)
				return k;
		} else if (memcmp(end + m - k, sh->prefix, k) == 0)
			return k;
	}
	return best;
}

size_t
cred_phs_holdback(const struct cred_phs *s, const char *end, size_t m)
{
	const struct cred_ph *e;
	size_t g, k, best = 0;

	for (k = 0; k < s->n_shapes; k++)
		best = shape_holdback(&s->shapes[k], end, m, best);

	if (s->n_random > 0)
		for (k = m < RND_LEN - 1 ? m : RND_LEN - 1; k > best; k--)
			if (random_prefix(end + m - k, k)) {
				best = k;
				break;
			}
	for (g = 0; g < n_groups(s); g++) {
		e = group_head(s, g);
		for (k = m < e->phlen - 1 ? m : e->phlen - 1; k > best; k--)
			if (memcmp(end + m - k, e->ph, k) == 0) {
				best = k;
				break;
			}
	}
	return best;
}

/* ------------------------------------------------------------ entries */

static struct cred_ph *
ph_new(struct cred_phs_pub *pub, const char *sandbox, const char *cred,
    const char *ph, int fixed, int is_static, const struct cred_phs_want *shape)
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
	e->fixed = fixed;
	e->is_static = is_static;
	if (shape != NULL) {
		e->hashed = 1;
		e->alphabet = shape->alphabet;
		e->plen = strlen(shape->prefix);
		e->h_ph = shaped_hash(pub->key, ph, e->phlen);
	} else if ((e->hashed = random_form(ph, e->phlen)))
		e->h_ph = phs_hash(pub->key, ph + PFX_LEN, KEY_LEN);
	e->h_sb = sb_hash(pub->key, sandbox);
	e->seq = pub->seq++;
	return e;
}

static int
in_slab(const struct cred_phs_pub *pub, const struct cred_ph *e)
{
	const char *p = (const char *)e;

	return pub->slab != MAP_FAILED && p >= pub->slab &&
	    p < pub->slab + SLAB_SLOTS * SLAB_SLOT;
}

static void
ph_unref(struct cred_phs_pub *pub, struct cred_ph *e)
{
	if (--e->refs > 0)
		return;
	if (in_slab(pub, e)) {
		pub->slab_free[pub->slab_nfree++] = (uint32_t)(((char *)e -
		    pub->slab) / SLAB_SLOT);
		ASAN_POISON_MEMORY_REGION(e, SLAB_SLOT);
	} else
		free(e);
}

/* e, as its removed copy: in the slab when there is room, else the heap. */
static struct cred_ph *
ph_copy(struct cred_phs_pub *pub, const struct cred_ph *e)
{
	size_t ls = strlen(e->sandbox) + 1, lc = strlen(e->cred) + 1;
	size_t lp = e->phlen + 1, need = sizeof(*e) + ls + lc + lp;
	struct cred_ph *r = NULL;
	char *p;

	if (need <= SLAB_SLOT && pub->slab != MAP_FAILED) {
		if (pub->slab_nfree > 0)
			r = (struct cred_ph *)(pub->slab + (size_t)pub->slab_free[
			    --pub->slab_nfree] * SLAB_SLOT);
		else if (pub->slab_used < SLAB_SLOTS)
			r = (struct cred_ph *)(pub->slab + pub->slab_used++ *
			    SLAB_SLOT);
	}
	if (r != NULL)
		ASAN_UNPOISON_MEMORY_REGION(r, SLAB_SLOT);
	else if ((r = malloc(need)) == NULL)
		return NULL;
	*r = *e;
	r->refs = 0;
	p = (char *)(r + 1);
	r->ph = memcpy(p, e->ph, lp);
	r->sandbox = memcpy(p + lp, e->sandbox, ls);
	r->cred = memcpy(p + lp + ls, e->cred, lc);
	return r;
}

/* A copy that made it into no table. */
static void
ph_discard(struct cred_phs_pub *pub, struct cred_ph *r)
{
	r->refs = 1;
	ph_unref(pub, r);
}

/* ------------------------------------------------------------ shards */

static void
shard_unref(struct cred_phs_pub *pub, struct phs_shard *sh)
{
	size_t i;

	if (sh == NULL || --sh->refs > 0)
		return;
	for (i = 0; i <= sh->mask; i++)
		if (sh->slot[i] != NULL)
			ph_unref(pub, sh->slot[i]);
	free(sh);
}

static void
shard_put(struct phs_shard *sh, struct cred_ph *e, int by_ph)
{
	uint64_t h = by_ph ? e->h_ph : e->h_sb;
	size_t i;

	for (i = (h >> SHARD_BITS) & sh->mask; sh->slot[i] != NULL;
	    i = (i + 1) & sh->mask)
		;
	sh->slot[i] = e;
	sh->n++;
	e->refs++;
}

/*
 * *sp with add put in and del (which it holds) taken out, either NULL: a
 * new shard, NULL when empty. The old one loses the draft's reference.
 */
static int
shard_edit(struct cred_phs_pub *pub, struct phs_shard **sp,
    struct cred_ph *add, const struct cred_ph *del, int by_ph)
{
	struct phs_shard *old = *sp, *sh = NULL;
	size_t i, cap = 4, n;

	n = (old != NULL ? old->n : 0) - (del != NULL) + (add != NULL);
	if (n > 0) {
		while (cap < 2 * n)
			cap <<= 1;
		if ((sh = calloc(1, sizeof(*sh) + cap * sizeof(sh->slot[0]))) ==
		    NULL)
			return -1;
		sh->refs = 1;
		sh->mask = cap - 1;
		for (i = 0; old != NULL && i <= old->mask; i++)
			if (old->slot[i] != NULL && old->slot[i] != del)
				shard_put(sh, old->slot[i], by_ph);
		if (add != NULL)
			shard_put(sh, add, by_ph);
	}
	shard_unref(pub, old);
	*sp = sh;
	return 0;
}

/* ------------------------------------------------------------ the fixed list */

static void
fixed_unref(struct cred_phs_pub *pub, struct phs_fixed *f)
{
	size_t i;

	if (f == NULL || --f->refs > 0)
		return;
	for (i = 0; i < f->n; i++)
		ph_unref(pub, f->v[i]);
	free(f->groups);
	free(f);
}

static int
fixed_cmp(const struct cred_ph *x, const struct cred_ph *y)
{
	int c = ph_cmp(x->ph, x->phlen, y->ph, y->phlen);

	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* As shard_edit, for the sorted list (short: the policy's fixed ones). */
static int
fixed_edit(struct cred_phs_pub *pub, struct phs_fixed **fp,
    struct cred_ph *add, const struct cred_ph *del)
{
	struct phs_fixed *old = *fp, *f = NULL;
	size_t i, n;

	n = (old != NULL ? old->n : 0) - (del != NULL) + (add != NULL);
	if (n > 0) {
		if ((f = calloc(1, sizeof(*f) + n * sizeof(f->v[0]))) == NULL)
			return -1;
		if ((f->groups = calloc(n, sizeof(*f->groups))) == NULL) {
			free(f);
			return -1;
		}
		f->refs = 1;
		for (i = 0; old != NULL && i < old->n; i++) {
			if (old->v[i] == del)
				continue;
			if (add != NULL && fixed_cmp(add, old->v[i]) < 0) {
				f->v[f->n++] = add;
				add = NULL;
			}
			f->v[f->n++] = old->v[i];
		}
		if (add != NULL)
			f->v[f->n++] = add;
		for (i = 0; i < f->n; i++) {
			f->v[i]->refs++;
			if (i == 0 || ph_cmp(f->v[i]->ph, f->v[i]->phlen,
			    f->v[i - 1]->ph, f->v[i - 1]->phlen) != 0)
				f->groups[f->n_groups++] = i;
		}
	}
	fixed_unref(pub, old);
	*fp = f;
	return 0;
}

/* ------------------------------------------------------------ snapshots */

static void
phs_free(struct cred_phs_pub *pub, struct cred_phs *s)
{
	size_t i;

	for (i = 0; i < SHARDS; i++) {
		shard_unref(pub, s->by_ph[i]);
		shard_unref(pub, s->by_sb[i]);
	}
	fixed_unref(pub, s->fixed);
	free(s->shapes);
	free(s);
}

/* A copy of cur to change: it shares every shard until it edits one. */
static struct cred_phs *
draft_new(const struct cred_phs *cur)
{
	struct cred_phs *d;
	size_t i;

	if ((d = malloc(sizeof(*d))) == NULL)
		return NULL;
	*d = *cur;
	if (cur->n_shapes > 0) {
		if ((d->shapes = calloc(cur->n_shapes, sizeof(*d->shapes))) ==
		    NULL) {
			free(d);
			return NULL;
		}
		memcpy(d->shapes, cur->shapes, cur->n_shapes *
		    sizeof(*d->shapes));
	} else
		d->shapes = NULL;
	d->pins = 0;
	d->next_retired = NULL;
	for (i = 0; i < SHARDS; i++) {
		if (d->by_ph[i] != NULL)
			d->by_ph[i]->refs++;
		if (d->by_sb[i] != NULL)
			d->by_sb[i]->refs++;
	}
	if (d->fixed != NULL)
		d->fixed->refs++;
	return d;
}

/* The shape of e in d's list, or -1. */
static long
shape_find(const struct cred_phs *d, const struct cred_ph *e)
{
	const struct phs_shape *sh;
	size_t k;

	for (k = 0; k < d->n_shapes; k++) {
		sh = &d->shapes[k];
		if (sh->len == e->phlen && sh->plen == e->plen &&
		    memcmp(sh->prefix, e->ph, e->plen) == 0 &&
		    strcmp(sh->alphabet, e->alphabet) == 0)
			return (long)k;
	}
	return -1;
}

/* Shaped e counted in (add) or out of d's shapes: a new one, or one less. */
static int
shape_count(struct cred_phs *d, const struct cred_ph *e, int add)
{
	struct phs_shape *v, *sh;
	const unsigned char *a;
	long k = shape_find(d, e);

	if (k >= 0) {
		sh = &d->shapes[k];
		if (add)
			sh->n++;
		else if (--sh->n == 0) {
			memmove(sh, sh + 1, (d->n_shapes - (size_t)k - 1) *
			    sizeof(*sh));
			d->n_shapes--;
		}
		return 0;
	}
	if (!add)
		return 0;
	if ((v = reallocarray(d->shapes, d->n_shapes + 1, sizeof(*v))) == NULL)
		return -1;
	d->shapes = v;
	sh = &v[d->n_shapes++];
	memset(sh, 0, sizeof(*sh));
	memcpy(sh->prefix, e->ph, e->plen);
	sh->plen = e->plen;
	sh->len = e->phlen;
	sh->alphabet = e->alphabet;
	sh->n = 1;
	for (a = (const unsigned char *)e->alphabet; *a != '\0'; a++) {
		sh->in[*a] |= SHAPE_EXACT | SHAPE_FOLD;
		sh->in[lower(*a)] |= SHAPE_FOLD;
		if (*a >= 'a' && *a <= 'z')
			sh->in[*a - ('a' - 'A')] |= SHAPE_FOLD;
	}
	return 0;
}

/* e into the tables that find placeholders, or out of them. */
static int
draft_ph(struct cred_phs_pub *pub, struct cred_phs *d, struct cred_ph *add,
    const struct cred_ph *del)
{
	const struct cred_ph *e = add != NULL ? add : del;

	if (!e->hashed)
		return fixed_edit(pub, &d->fixed, add, del);
	if (e->alphabet != NULL && shape_count(d, e, add != NULL) == -1)
		return -1;
	if (shard_edit(pub, &d->by_ph[e->h_ph & (SHARDS - 1)], add, del,
	    1) == -1)
		return -1;
	if (e->alphabet != NULL)
		return 0;
	if (add != NULL)
		d->n_random++;
	else
		d->n_random--;
	return 0;
}

/* A new placeholder of a live sandbox. */
static int
draft_add(struct cred_phs_pub *pub, struct cred_phs *d, struct cred_ph *e)
{
	if (shard_edit(pub, &d->by_sb[e->h_sb & (SHARDS - 1)], e, NULL,
	    0) == -1 || draft_ph(pub, d, e, NULL) == -1)
		return -1;
	d->n_live++;
	return 0;
}

/*
 * Live e goes; r, its copy in the removed placeholders' slab (NULL: none,
 * it is gone for good), takes its place among placeholders.
 */
static int
draft_remove(struct cred_phs_pub *pub, struct cred_phs *d,
    const struct cred_ph *e, struct cred_ph *r)
{
	if (shard_edit(pub, &d->by_sb[e->h_sb & (SHARDS - 1)], NULL, e,
	    0) == -1 || draft_ph(pub, d, NULL, e) == -1 ||
	    (r != NULL && draft_ph(pub, d, r, NULL) == -1))
		return -1;
	d->n_live--;
	if (r != NULL)
		d->n_gone++;
	return 0;
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

/* Free what no reader holds. */
static void
reclaim(struct cred_phs_pub *pub)
{
	struct cred_phs **pp = &pub->retired, *s;

	while ((s = *pp) != NULL) {
		if (s->pins > 0 || hazarded(pub, s)) {
			pp = &s->next_retired;
			continue;
		}
		*pp = s->next_retired;
		phs_free(pub, s);
	}
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
	    (s = calloc(1, sizeof(*s))) == NULL) {
		free(pub);
		return NULL;
	}
	memcpy(s->key, pub->key, sizeof(s->key));
	/* Pages are touched as slots are first used. */
	pub->slab = mmap(NULL, SLAB_SLOTS * SLAB_SLOT, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (pub->slab != MAP_FAILED)
		ASAN_POISON_MEMORY_REGION(pub->slab, SLAB_SLOTS * SLAB_SLOT);
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
	if (pub->slab != MAP_FAILED) {
		ASAN_UNPOISON_MEMORY_REGION(pub->slab, SLAB_SLOTS * SLAB_SLOT);
		munmap(pub->slab, SLAB_SLOTS * SLAB_SLOT);
	}
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

/* The live placeholders of sandbox in cur: 0 and *vp (*m of them), or -1. */
static int
live_of(const struct cred_phs *cur, const char *sandbox,
    struct cred_ph ***vp, size_t *m)
{
	const struct phs_shard *sh;
	struct cred_ph *e;
	uint64_t h = sb_hash(cur->key, sandbox);
	size_t i;

	*vp = NULL;
	*m = 0;
	if ((sh = cur->by_sb[h & (SHARDS - 1)]) == NULL)
		return 0;
	if ((*vp = calloc(sh->n, sizeof(**vp))) == NULL)
		return -1;
	for (i = 0; i <= sh->mask; i++)
		if ((e = sh->slot[i]) != NULL && e->h_sb == h &&
		    strcmp(e->sandbox, sandbox) == 0)
			(*vp)[(*m)++] = e;
	return 0;
}

/* Live e leaves d; its removed copy joins made[*k] (room for it). */
static int
retire(struct cred_phs_pub *pub, struct cred_phs *d, const struct cred_ph *e,
    struct cred_ph **made, size_t *k)
{
	struct cred_ph *r;

	if ((r = ph_copy(pub, e)) == NULL)
		return -1;
	if (draft_remove(pub, d, e, r) == -1) {
		if (r->refs == 0)
			ph_discard(pub, r);
		return -1;
	}
	made[(*k)++] = r;
	return 0;
}

static size_t
ring_over(const struct cred_phs_pub *pub, size_t k)
{
	return pub->ring_n + k > CRED_PHS_REMOVED_MAX ?
	    pub->ring_n + k - CRED_PHS_REMOVED_MAX : 0;
}

/*
 * made[0..k) join the removed ones: the oldest beyond the bound leave d
 * now, and the ring follows once d is published (ring_commit).
 */
static int
ring_trim(struct cred_phs_pub *pub, struct cred_phs *d,
    struct cred_ph *const *made, size_t k)
{
	const struct cred_ph *e;
	size_t i, over = ring_over(pub, k);

	for (i = 0; i < over; i++) {
		e = i < pub->ring_n ? pub->ring[(pub->ring_head + i) %
		    CRED_PHS_REMOVED_MAX] : made[i - pub->ring_n];
		if (draft_ph(pub, d, NULL, e) == -1)
			return -1;
		d->n_gone--;
	}
	return 0;
}

static void
ring_commit(struct cred_phs_pub *pub, struct cred_ph *const *made, size_t k)
{
	size_t i, over = ring_over(pub, k), old;

	old = over < pub->ring_n ? over : pub->ring_n;
	pub->ring_head = (pub->ring_head + old) % CRED_PHS_REMOVED_MAX;
	pub->ring_n -= old;
	for (i = over - old; i < k; i++)
		pub->ring[(pub->ring_head + pub->ring_n++) %
		    CRED_PHS_REMOVED_MAX] = made[i];
}

/* Publish d with made[0..k) among the removed ones; d is freed on failure. */
static int
commit(struct cred_phs_pub *pub, struct cred_phs *d, struct cred_ph **made,
    size_t k)
{
	if (ring_trim(pub, d, made, k) == -1) {
		phs_free(pub, d);
		return -1;
	}
	publish(pub, d);
	ring_commit(pub, made, k);
	return 0;
}

/* e is what w asks for: random for random, the same fixed string. */
static int
as_wanted(const struct cred_ph *e, const struct cred_phs_want *w)
{
	if (w->fixed == NULL && w->prefix != NULL)
		return !e->fixed && e->alphabet != NULL &&
		    strcmp(e->alphabet, w->alphabet) == 0 && e->phlen == w->len &&
		    e->plen == strlen(w->prefix) &&
		    memcmp(e->ph, w->prefix, e->plen) == 0;
	if (w->fixed == NULL)
		return !e->fixed && e->alphabet == NULL;
	return e->fixed && strcmp(e->ph, w->fixed) == 0;
}

static int
any_cb(const struct cred_ph *e, void *arg)
{
	(void)e;
	(void)arg;
	return 1;
}

/* One want into d: a new placeholder, replacing one not as wanted. */
static int
issue_one(struct cred_phs_pub *pub, struct cred_phs *d,
    const struct cred_phs_want *w, int is_static, const struct cred_ph *old,
    struct cred_ph **made, size_t *k)
{
	char rnd[CRED_PHS_SHAPED_MAX + 1];
	const struct cred_phs_want *shape = NULL;
	struct cred_ph *e;

	/* A policy's fixed value changed: the old one is removed, not lost. */
	if (old != NULL && retire(pub, d, old, made, k) == -1)
		return -1;
	if (w->fixed == NULL && w->prefix != NULL) {
		if (w->len > CRED_PHS_SHAPED_MAX || strlen(w->prefix) >=
		    w->len || strlen(w->prefix) > CRED_PHS_PREFIX_MAX ||
		    strlen(w->alphabet) < 2 || strlen(w->alphabet) > 64)
			return -1;	/* policy_load.c lets none through */
		shape = w;
		/* Unique among all issued, removed ones too (d has them all). */
		do
			vault_placeholder_shaped(rnd, w->prefix, w->len,
			    w->alphabet);
		while (cred_phs_match(d, rnd, w->len, any_cb, NULL) > 0);
	} else if (w->fixed == NULL)
		vault_placeholder_new(rnd);
	if ((e = ph_new(pub, w->sandbox, w->cred, w->fixed != NULL ? w->fixed :
	    rnd, w->fixed != NULL, is_static, shape)) == NULL)
		return -1;
	if (draft_add(pub, d, e) == -1) {
		if (e->refs == 0)
			free(e);
		return -1;
	}
	return 0;
}

static int
want_cmp(const void *a, const void *b)
{
	const struct cred_phs_want *x = *(const struct cred_phs_want *const *)a;
	const struct cred_phs_want *y = *(const struct cred_phs_want *const *)b;
	int c = strcmp(x->sandbox, y->sandbox);

	return c != 0 ? c : strcmp(x->cred, y->cred);
}

/* 1 when sorted[0..n) has e's (sandbox, credential). */
static int
listed(const struct cred_phs_want *const *sorted, size_t n,
    const struct cred_ph *e)
{
	struct cred_phs_want key = { e->sandbox, e->cred, NULL, NULL, 0, NULL };
	const struct cred_phs_want *kp = &key;

	return bsearch(&kp, sorted, n, sizeof(*sorted), want_cmp) != NULL;
}

/*
 * The static placeholders of s that w[0..n) does not list (their sandbox
 * or credential left the policy), into a new array (*m of them); -1.
 */
static int
unlisted(const struct cred_phs *s, const struct cred_phs_want *w, size_t n,
    struct cred_ph ***vp, size_t *m)
{
	const struct cred_phs_want **sorted;
	const struct phs_shard *sh;
	size_t i, j;

	*m = 0;
	if ((*vp = calloc(s->n_live + 1, sizeof(**vp))) == NULL ||
	    (sorted = calloc(n + 1, sizeof(*sorted))) == NULL) {
		free(*vp);
		return -1;
	}
	for (i = 0; i < n; i++)
		sorted[i] = &w[i];
	qsort(sorted, n, sizeof(*sorted), want_cmp);
	for (i = 0; i < SHARDS; i++)
		for (j = 0; (sh = s->by_sb[i]) != NULL && j <= sh->mask; j++)
			if (sh->slot[j] != NULL && sh->slot[j]->is_static &&
			    !listed(sorted, n, sh->slot[j]))
				(*vp)[(*m)++] = sh->slot[j];
	free(sorted);
	return 0;
}

/* The static set is w: what it no longer lists becomes removed. */
static int
drop_unlisted(struct cred_phs_pub *pub, const struct cred_phs *cur,
    struct cred_phs **dp, const struct cred_phs_want *w, size_t n,
    struct cred_ph ***madep, size_t *k)
{
	struct cred_ph **v, **nm;
	size_t i, m;
	int rc = -1;

	if (unlisted(*dp != NULL ? *dp : cur, w, n, &v, &m) == -1)
		return -1;
	if (m == 0) {
		free(v);
		return 0;
	}
	if ((nm = reallocarray(*madep, *k + m, sizeof(*nm))) == NULL)
		goto done;
	*madep = nm;
	if (*dp == NULL && (*dp = draft_new(cur)) == NULL)
		goto done;
	for (i = 0; i < m; i++)
		if (retire(pub, *dp, v[i], *madep, k) == -1)
			goto done;
	rc = 0;
done:
	free(v);
	return rc;
}

static int
issue(struct cred_phs_pub *pub, const struct cred_phs_want *w, size_t n,
    int is_static)
{
	const struct cred_phs *cur;
	const struct cred_ph *old;
	struct cred_phs *d = NULL;
	struct cred_ph **made;
	size_t i, k = 0;
	int rc = -1;

	if ((made = calloc(n > 0 ? n : 1, sizeof(*made))) == NULL)
		return -1;
	pthread_mutex_lock(&pub->mtx);
	cur = atomic_load(&pub->cur);
	for (i = 0; i < n; i++) {
		/* The draft has this batch's too. */
		old = cred_phs_get(d != NULL ? d : cur, w[i].sandbox, w[i].cred);
		if (old != NULL && as_wanted(old, &w[i]))
			continue;
		if (d == NULL && (d = draft_new(cur)) == NULL)
			goto done;
		if (issue_one(pub, d, &w[i], is_static, old, made, &k) == -1)
			goto done;
	}
	if (is_static && drop_unlisted(pub, cur, &d, w, n, &made, &k) == -1)
		goto done;
	rc = d != NULL ? commit(pub, d, made, k) : 0;
	d = NULL;
done:
	if (d != NULL)
		phs_free(pub, d);
	pthread_mutex_unlock(&pub->mtx);
	free(made);
	return rc;
}

int
cred_phs_issue(struct cred_phs_pub *pub, const struct cred_phs_want *w,
    size_t n)
{
	return issue(pub, w, n, 0);
}

int
cred_phs_set_static(struct cred_phs_pub *pub, const struct cred_phs_want *w,
    size_t n)
{
	return issue(pub, w, n, 1);
}

int
cred_phs_forget(struct cred_phs_pub *pub, const char *sandbox)
{
	const struct cred_phs *cur;
	struct cred_phs *d = NULL;
	struct cred_ph **v, **made = NULL;
	size_t i, m, k = 0;
	int rc = -1;

	pthread_mutex_lock(&pub->mtx);
	cur = atomic_load(&pub->cur);
	if (live_of(cur, sandbox, &v, &m) == -1)
		goto done;
	rc = 0;
	if (m == 0)
		goto done;
	rc = -1;
	if ((made = calloc(m, sizeof(*made))) == NULL ||
	    (d = draft_new(cur)) == NULL)
		goto done;
	for (i = 0; i < m; i++)
		if (retire(pub, d, v[i], made, &k) == -1)
			goto done;
	rc = commit(pub, d, made, k);
	d = NULL;
done:
	if (d != NULL)
		phs_free(pub, d);
	pthread_mutex_unlock(&pub->mtx);
	free(made);
	free(v);
	return rc;
}
