/*
 * What the files of the vault module (vault.c, vault_swap.c, vault_wbuf.c,
 * vault_scrub.c) share: the snapshot layout, wiped memory for secret bytes,
 * the swap's way into a vault_wbuf and the encoders both the swap and the
 * scrubber use. Nothing outside src/vault/ and the vault's own tests
 * includes this.
 */
#ifndef SG_VAULT_INT_H
#define SG_VAULT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "vault/vault.h"

/*
 * A snapshot may also hold values that are not vault entries: tokens the
 * gateway obtained (kind oauth2), named "ENTRY#what" ('#' is never in an
 * entry's name), what being [a-z]{1,8}.
 */
#define VAULT_SNAP_NAME_MAX	(VAULT_NAME_MAX + 9)
int		 vault_snap_name_valid(const char *name);

/* One secret of a snapshot; val points into the snapshot's wiped block. */
struct vault_secret {
	char		 name[VAULT_SNAP_NAME_MAX + 1];
	const unsigned char *val;
	size_t		 len;
};

#define VAULT_SCRUB_CACHE	32

struct scrub_ac;

struct vault_snapshot {
	atomic_int	 refcnt;
	size_t		 n;
	struct vault_secret *e;		/* names only; not secret */
	unsigned char	*mem;		/* every value, vault_secmem_alloc'd */
	/*
	 * The scrubber's compiled matchers, one per list of secrets, built on
	 * first use (vault_scrub.c) so that a response does not pay for it.
	 */
	pthread_mutex_t	 cache_mtx;
	struct scrub_ac	*cache[VAULT_SCRUB_CACHE];
	size_t		 n_cache;
	/*
	 * How a cached matcher is let go, set by vault_scrub.c when it caches
	 * one: the snapshot (vault.c, below the scrubber) frees its cache
	 * without calling up into it.
	 */
	void		(*cache_unref)(struct scrub_ac *);
};

/*
 * Memory for secret bytes: whole pages of its own, locked (best effort:
 * RLIMIT_MEMLOCK may refuse), left out of core dumps, zeroed in a forked
 * child, and OPENSSL_cleanse'd before it is returned. NULL on failure.
 */
void		*vault_secmem_alloc(size_t len);
void		 vault_secmem_free(void *);

/*
 * vault_wbuf.c, for the swap: room for need secret bytes at the end of the
 * buffer (moved into locked memory first), or NULL (then it is failed);
 * commit says how many were written there.
 */
unsigned char	*vault_wbuf_secret_room(struct vault_wbuf *, size_t need);
void		 vault_wbuf_commit(struct vault_wbuf *, size_t len);

/* [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
int		 vault_name_valid(const char *name);

/* The secret called name, or NULL. */
const struct vault_secret *vault_snapshot_find(const struct vault_snapshot *,
		    const char *name);
/*
 * A snapshot made from values in memory (vault_snapshot_load uses it after
 * unsealing; tests and fuzzers use it directly). Duplicate names keep the
 * first. NULL on a bad name, a bad length or no memory.
 */
struct vault_snapshot *vault_snapshot_build(const char *const *names,
		    const unsigned char *const *vals, const size_t *lens,
		    size_t n);

/* Shared encoders; each returns the length written to out. */
#define VAULT_B64_STD	0
#define VAULT_B64_URL	1
/* Base64 of in (std or url alphabet); out holds 4 * ceil(len / 3). */
size_t		 vault_b64_encode(const unsigned char *in, size_t len, int url,
		    int pad, char *out);
/*
 * Decode base64 (either alphabet, not mixed; padding optional but, when
 * present, correct). -1 on anything else. *url and *padded say what it was.
 * out holds 3 * (len / 4) + 2.
 */
long		 vault_b64_decode(const char *in, size_t len,
		    unsigned char *out, int *url, int *padded);
/* Percent-encode every byte outside RFC 3986 unreserved (all: every byte). */
size_t		 vault_pct_encode(const unsigned char *in, size_t len, int all,
		    int upper, char *out);	/* out holds 3 * len */

#endif
