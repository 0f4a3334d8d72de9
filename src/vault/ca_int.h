/*
 * What the files of the interception CA (ca.c, ca_leaf.c, ca_cache.c) and
 * of the audit signing key beside it (ca_audit.c) share: the CA object, the
 * cache entry and the helpers more than one of them calls. Nothing outside src/vault/ and the vault's own tests includes this.
 */
#ifndef SG_CA_INT_H
#define SG_CA_INT_H

#include <sys/types.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "vault/ca.h"

#define CA_BACKDATE		3600		/* tolerate clients whose clock is behind */

struct ca_entry {
	struct ca_entry	*hnext;		/* hash chain */
	struct ca_entry	*prev, *next;	/* LRU list, most recent first */
	uint64_t	 hash;
	X509		*cert;		/* NULL until the first mint completes */
	time_t		 not_after;
	int		 busy;		/* a thread is minting for it: never evicted */
	int		 is_ip;
	size_t		 len;
	char		 name[];
};

struct ca {
	X509		*cert;
	EVP_PKEY	*key;
	EVP_PKEY	*leaf_key;
	const EVP_MD	*md;		/* NULL for keys that sign without a digest */
	X509_EXTENSION	*ext_bc, *ext_ku, *ext_eku, *ext_aki;
	time_t		 not_after;	/* the CA's own; no leaf outlives it */
	time_t		(*now)(void);
	/*
	 * A CA whose key is elsewhere (ca_remote): key is NULL and leaves are
	 * signed by this callback, over the public half of leaf_key.
	 */
	ca_remote_fn	 remote;
	void		*remote_arg;

	pthread_mutex_t	 mtx;		/* guards everything below */
	pthread_cond_t	 minted_cv;	/* a busy entry finished minting */
	uint64_t	 hkey[2];	/* SipHash key: hostile names cannot aim at one chain */
	struct ca_entry	**buckets;
	size_t		 nbuckets;	/* a power of two */
	struct ca_entry	*lru_head, *lru_tail;
	size_t		 entries, max_entries;
	unsigned long	 minted, hits;
};

/* ca.c: a random positive 128-bit serial into x; 0 or -1. */
int		 ca_set_serial(X509 *x);

/*
 * ca.c: the key files, shared with the audit signing key (ca_audit.c).
 * Messages are formatted into a per-thread buffer, valid until this
 * thread's next call into ca.c.
 */
const char	*ca_err(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
/* The reason of the newest queued OpenSSL error; empties the queue. */
const char	*ca_ossl_reason(void);
enum ca_pem { CA_PEM_KEY, CA_PEM_PUBKEY, CA_PEM_CERT };
/*
 * Write obj (an EVP_PKEY, or an X509 for CA_PEM_CERT) as PEM to a new file
 * at path that must not exist yet (O_EXCL: the mode is right from the
 * first moment); a half-written file is removed. 0, or -1 with errno.
 */
int		 ca_write_new(const char *path, mode_t mode, enum ca_pem,
		    void *obj);
/*
 * A private key from a PEM file that only its owner can read (a file
 * group or others can read is refused); what names it in messages
 * ("CA key"). NULL with *errstr.
 */
EVP_PKEY	*ca_read_key(const char *path, const char *what,
		    const char **errstr);

/*
 * ca_cache.c: the leaves by name, in a hash table keyed with hkey and an
 * LRU list. Every call but init and free needs ca->mtx held.
 */
/* The empty cache at its default bound; -1 when out of memory. */
int		 ca_cache_init(struct ca *);
/* Every entry (busy or not) and the table itself. */
void		 ca_cache_free(struct ca *);
uint64_t	 ca_cache_hash(const struct ca *, const char *name, size_t len,
		    int is_ip);
struct ca_entry	*ca_cache_find(struct ca *, uint64_t h, const char *name,
		    size_t len, int is_ip);
/*
 * A new busy entry for name at the head of the LRU list, after evicting
 * down to the bound; NULL when out of memory.
 */
struct ca_entry	*ca_cache_insert(struct ca *, uint64_t h, const char *name,
		    size_t len, int is_ip);
void		 ca_cache_remove(struct ca *, struct ca_entry *);
/* Mark e the most recently used. */
void		 ca_cache_touch(struct ca *, struct ca_entry *);

#endif
