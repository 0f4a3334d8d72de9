/*
 * sandgate's interception CA: creating and loading the CA (ECDSA P-256,
 * key file 0600), and minting leaf certificates per SNI name with one shared
 * leaf key, kept in a bounded LRU cache shared by every worker thread.
 * Beside it, the Ed25519 key that signs the audit log's checkpoints.
 */
#ifndef SG_CA_H
#define SG_CA_H

#include <stddef.h>
#include <stdint.h>
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

/*
 * The audit signing key (docs/audit.md "Checkpoints"): an Ed25519 key pair
 * created with the CA, the private half 0600 (PKCS#8 PEM), the public half
 * 0644 (SubjectPublicKeyInfo PEM). The audit writer never sees the key: it
 * calls ca_audit_sign through its struct audit_signer (audit/audit.h).
 */
struct ca_audit_key;

/*
 * Create the pair at key_path / pub_path (parent directories 0700); both
 * must be absent. 0, or -1 with *errstr.
 */
int		 ca_audit_key_init(const char *key_path, const char *pub_path,
		    const char **errstr);
/*
 * Load the private key, refusing a file group or others can read, and
 * check it against pub_path. When create is set: a pair that does not
 * exist yet is created, and a missing public half is written from the
 * key; a public half without its key is refused either way (a new key
 * would not verify the checkpoints the old one signed). NULL with *errstr.
 */
struct ca_audit_key *ca_audit_key_open(const char *key_path,
		    const char *pub_path, int create, const char **errstr);
void		 ca_audit_key_free(struct ca_audit_key *);
/* The raw 32-byte public key. */
void		 ca_audit_key_public(const struct ca_audit_key *,
		    uint8_t pub[32]);
/*
 * The signer callback: an Ed25519 signature over msg with the key k (a
 * struct ca_audit_key *). Thread-safe. 0, or -1.
 */
int		 ca_audit_sign(void *k, const uint8_t *msg, size_t len,
		    uint8_t sig[64]);

#endif
