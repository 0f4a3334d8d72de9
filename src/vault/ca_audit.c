/*
 * The Ed25519 key that signs the audit log's checkpoints: created beside the
 * CA through the same key-file helpers (0600 from the first moment, refused
 * when group or others can read it), and the signer the audit writer calls.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "core/util.h"
#include "vault/ca.h"
#include "vault/ca_int.h"

#define CA_AUDIT_RAW	32	/* bytes of an Ed25519 public key */

struct ca_audit_key {
	EVP_PKEY	*key;
	uint8_t		 pub[CA_AUDIT_RAW];
};

/* Never prompt for a pass phrase. */
static int
ca_audit_nopass_cb(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

static int
ca_audit_raw_public(EVP_PKEY *k, uint8_t pub[CA_AUDIT_RAW])
{
	size_t len = CA_AUDIT_RAW;

	if (EVP_PKEY_get_raw_public_key(k, pub, &len) != 1 ||
	    len != CA_AUDIT_RAW) {
		ERR_clear_error();
		return -1;
	}
	return 0;
}

int
ca_audit_key_init(const char *key_path, const char *pub_path,
    const char **errstr)
{
	EVP_PKEY *key = NULL;
	int rc = -1;

	if (key_path == NULL || pub_path == NULL || *key_path == '\0' ||
	    *pub_path == '\0' || strcmp(key_path, pub_path) == 0) {
		*errstr = "the audit signing key and its public half need two "
		    "paths";
		return -1;
	}
	if (util_mkdir_parents(key_path) == -1 ||
	    util_mkdir_parents(pub_path) == -1) {
		*errstr = ca_err("cannot create the directories for %s: %s",
		    key_path, strerror(errno));
		return -1;
	}
	if ((key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")) == NULL) {
		*errstr = ca_err("cannot generate the audit signing key: %s",
		    ca_ossl_reason());
		return -1;
	}
	if (ca_write_new(key_path, 0600, CA_PEM_KEY, key) == -1) {
		*errstr = ca_err("cannot write %s: %s", key_path,
		    strerror(errno));
		goto done;
	}
	if (ca_write_new(pub_path, 0644, CA_PEM_PUBKEY, key) == -1) {
		*errstr = ca_err("cannot write %s: %s", pub_path,
		    strerror(errno));
		unlink(key_path);
		goto done;
	}
	rc = 0;
done:
	EVP_PKEY_free(key);
	return rc;
}

/* Does the public key file at path hold the public half of k? */
static int
ca_audit_check_pub(EVP_PKEY *k, const char *path, const char **errstr)
{
	EVP_PKEY *pub;
	BIO *b;
	int ok;

	if ((b = BIO_new_file(path, "r")) == NULL) {
		ERR_clear_error();
		*errstr = ca_err("cannot open audit public key %s: %s", path,
		    strerror(errno));
		return -1;
	}
	pub = PEM_read_bio_PUBKEY(b, NULL, ca_audit_nopass_cb, NULL);
	BIO_free(b);
	if (pub == NULL) {
		*errstr = ca_err("cannot read audit public key %s: %s", path,
		    ca_ossl_reason());
		return -1;
	}
	ok = EVP_PKEY_eq(k, pub) == 1;
	EVP_PKEY_free(pub);
	ERR_clear_error();
	if (!ok) {
		*errstr = ca_err("audit public key %s is not the public half "
		    "of the signing key", path);
		return -1;
	}
	return 0;
}

/* With create: make what is missing (see ca.h); 0, or -1. */
static int
ca_audit_key_prepare(const char *key_path, const char *pub_path,
    const char **errstr)
{
	struct stat st;
	int have_key = lstat(key_path, &st) == 0;
	int have_pub = lstat(pub_path, &st) == 0;
	EVP_PKEY *k;
	int rc;

	if (!have_key && !have_pub)
		return ca_audit_key_init(key_path, pub_path, errstr);
	if (!have_key) {
		*errstr = ca_err("audit public key %s exists but its signing "
		    "key %s does not; restore the key, or move the public key "
		    "away to start a new one", pub_path, key_path);
		return -1;
	}
	if (have_pub)
		return 0;
	if ((k = ca_read_key(key_path, "audit signing key", errstr)) == NULL)
		return -1;
	rc = ca_write_new(pub_path, 0644, CA_PEM_PUBKEY, k);
	if (rc == -1)
		*errstr = ca_err("cannot write %s: %s", pub_path,
		    strerror(errno));
	EVP_PKEY_free(k);
	return rc;
}

struct ca_audit_key *
ca_audit_key_open(const char *key_path, const char *pub_path, int create,
    const char **errstr)
{
	struct ca_audit_key *k;

	if (key_path == NULL || pub_path == NULL) {
		*errstr = "no path for the audit signing key";
		return NULL;
	}
	if (create && ca_audit_key_prepare(key_path, pub_path, errstr) == -1)
		return NULL;
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	if ((k->key = ca_read_key(key_path, "audit signing key",
	    errstr)) == NULL)
		goto fail;
	if (EVP_PKEY_get_base_id(k->key) != EVP_PKEY_ED25519 ||
	    ca_audit_raw_public(k->key, k->pub) == -1) {
		*errstr = ca_err("audit signing key %s is not an Ed25519 key",
		    key_path);
		goto fail;
	}
	if (ca_audit_check_pub(k->key, pub_path, errstr) == -1)
		goto fail;
	return k;
fail:
	ca_audit_key_free(k);
	return NULL;
}

void
ca_audit_key_free(struct ca_audit_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->key);
	free(k);
}

void
ca_audit_key_public(const struct ca_audit_key *k, uint8_t pub[32])
{
	memcpy(pub, k->pub, CA_AUDIT_RAW);
}

int
ca_audit_sign(void *arg, const uint8_t *msg, size_t len, uint8_t sig[64])
{
	struct ca_audit_key *k = arg;
	EVP_MD_CTX *ctx;
	size_t siglen = 64;
	int ok;

	if (k == NULL || (ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	/* Ed25519 signs the message itself: no digest is named. */
	ok = EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->key) == 1 &&
	    EVP_DigestSign(ctx, sig, &siglen, msg, len) == 1 && siglen == 64;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok ? 0 : -1;
}
