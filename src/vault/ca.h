/*
 * sandgate's interception CA: creating and loading the CA (ECDSA P-256,
 * key file 0600), and minting leaf certificates per SNI name with one shared
 * leaf key, kept in a bounded LRU cache shared by every worker thread.
 */
#ifndef SG_CA_H
#define SG_CA_H

#include <time.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

struct ca;

/*
 * Create a new CA at cert_path / key_path (parent directories created 0700,
 * key written 0600). Refuses to overwrite existing files unless force.
 * 0, or -1 with a static message in *errstr.
 */
int		 ca_init(const char *cert_path, const char *key_path, int force,
		    const char **errstr);
/*
 * Load the CA. Refuses a key file that group or others can read, a key
 * that does not match the certificate, and a certificate that is not a CA.
 * NULL with *errstr on error.
 */
struct ca	*ca_load(const char *cert_path, const char *key_path,
		    const char **errstr);
void		 ca_free(struct ca *);
/* The CA certificate (not up-ref'd; valid while the struct ca lives). */
X509		*ca_cert(struct ca *);

/*
 * A leaf for name: DNS SAN for a host name, IP SAN when is_ip (name is
 * then the canonical address text). Short validity (e.g. 7 days, not before
 * 1 hour ago), unique random serial, signed by the CA, public key = the
 * shared leaf key. Cached (LRU, bounded); thread-safe. On success *leaf
 * and *key are new references the caller releases with X509_free and
 * EVP_PKEY_free. 0 or -1.
 */
int		 ca_leaf(struct ca *, const char *name, int is_ip, X509 **leaf,
		    EVP_PKEY **key);

struct ca_stats {
	unsigned long	minted;
	unsigned long	hits;
	unsigned long	entries;
};
void		 ca_get_stats(struct ca *, struct ca_stats *);

/*
 * Added by the CA implementation (after the interface above): the cache
 * bound (default 10,000 leaves) and the clock leaves are dated by (default
 * time(3); NULL restores it) -- for tests, benchmarks and a future config key.
 */
void		 ca_set_cache_max(struct ca *, size_t);
void		 ca_set_clock(struct ca *, time_t (*)(void));

#endif
