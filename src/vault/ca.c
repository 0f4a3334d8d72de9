/*
 * sandgate's interception CA itself: writes the CA key and certificate (the
 * key is never readable by anyone but the owner, not even for a moment),
 * loads them back with permission and consistency checks, and owns the
 * struct ca (leaves: ca_leaf.c; their cache: ca_cache.c).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "core/log.h"
#include "vault/ca.h"
#include "vault/ca_int.h"
#include "core/util.h"

#define CA_VALID_DAYS		3652		/* ten years */
#define CA_SUBJECT_CN		"sandgate interception CA"
#define CA_SUBJECT_O		"sandgate"

/*
 * Error messages carry the path they are about, so they live in a
 * per-thread buffer: valid until this thread's next call into this file.
 */
static __thread char ca_errbuf[512];

const char *
ca_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ca_errbuf, sizeof(ca_errbuf), fmt, ap);
	va_end(ap);
	return ca_errbuf;
}

const char *
ca_ossl_reason(void)
{
	static __thread char buf[160];
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, sizeof(buf), "%s", r ? r : "unknown OpenSSL error");
	ERR_clear_error();
	return buf;
}

static time_t
ca_time(void)
{
	return time(NULL);
}

/* ---------------------------------------------------------------- building */

/* A random positive 128-bit serial (RFC 5280 allows up to 20 octets). */
int
ca_set_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn = NULL;
	int ok = 0;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f;		/* positive without a leading zero octet */
	b[0] |= 0x01 << 6;	/* and never short: 16 octets every time */
	if ((bn = BN_bin2bn(b, sizeof(b), NULL)) != NULL &&
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
		ok = 1;
	BN_free(bn);
	return ok ? 0 : -1;
}

static int
ca_add_conf_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext;
	int ok;

	if ((ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value)) == NULL)
		return -1;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

/* Ed25519 and Ed448 sign the message itself; everything else uses SHA-256. */
static const EVP_MD *
ca_digest_for(EVP_PKEY *key)
{
	if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448"))
		return NULL;
	return EVP_sha256();
}

static X509 *
ca_make_root(EVP_PKEY *key)
{
	X509 *x;
	X509_NAME *n;
	X509V3_CTX ctx;

	if ((x = X509_new()) == NULL)
		return NULL;
	n = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || ca_set_serial(x) == -1 ||
	    !X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
	    (const unsigned char *)CA_SUBJECT_O, -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)CA_SUBJECT_CN, -1, -1, 0) ||
	    !X509_set_issuer_name(x, n) ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -CA_BACKDATE) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), CA_VALID_DAYS, 0,
	    NULL) == NULL ||
	    !X509_set_pubkey(x, key))
		goto fail;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (ca_add_conf_ext(x, &ctx, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") == -1 ||
	    ca_add_conf_ext(x, &ctx, NID_key_usage,
	    "critical,keyCertSign,cRLSign") == -1 ||
	    ca_add_conf_ext(x, &ctx, NID_subject_key_identifier, "hash") == -1 ||
	    ca_add_conf_ext(x, &ctx, NID_authority_key_identifier,
	    "keyid:always") == -1)
		goto fail;
	if (X509_sign(x, key, ca_digest_for(key)) <= 0)
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* ---------------------------------------------------------------- files */

/* Write obj as PEM to fd, set its mode and flush it to disk. */
static int
ca_write_fd(int fd, mode_t mode, enum ca_pem what, void *obj)
{
	BIO *b;
	int ok;

	if (fchmod(fd, mode) == -1)
		return -1;
	if ((b = BIO_new_fd(fd, BIO_NOCLOSE)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (what == CA_PEM_KEY)
		ok = PEM_write_bio_PKCS8PrivateKey(b, obj, NULL, NULL, 0, NULL,
		    NULL);
	else if (what == CA_PEM_PUBKEY)
		ok = PEM_write_bio_PUBKEY(b, obj);
	else
		ok = PEM_write_bio_X509(b, obj);
	ok = ok == 1 && BIO_flush(b) == 1;
	BIO_free(b);
	ERR_clear_error();
	if (!ok) {
		if (errno == 0)
			errno = EIO;
		return -1;
	}
	return fsync(fd);
}

int
ca_write_new(const char *path, mode_t mode, enum ca_pem what, void *obj)
{
	int fd, saved;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    mode);
	if (fd == -1)
		return -1;
	errno = 0;
	if (ca_write_fd(fd, mode, what, obj) == -1) {
		saved = errno;
		close(fd);
		unlink(path);
		errno = saved;
		return -1;
	}
	if (close(fd) == -1) {
		saved = errno;
		unlink(path);
		errno = saved;
		return -1;
	}
	return 0;
}

/*
 * Write a temporary file next to path (mkstemp: 0600 from the start) for
 * a later rename over path; its name goes to tmp.
 */
static int
ca_write_tmp(const char *path, char *tmp, size_t tmplen, mode_t mode,
    enum ca_pem what, void *obj)
{
	int fd, saved;

	if ((size_t)snprintf(tmp, tmplen, "%s.tmpXXXXXX", path) >= tmplen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1)
		return -1;
	errno = 0;
	if (ca_write_fd(fd, mode, what, obj) == -1) {
		saved = errno;
		close(fd);
		unlink(tmp);
		errno = saved;
		return -1;
	}
	if (close(fd) == -1) {
		saved = errno;
		unlink(tmp);
		errno = saved;
		return -1;
	}
	return 0;
}

static int
ca_write_files(const char *cert_path, const char *key_path, int force,
    X509 *cert, EVP_PKEY *key, const char **errstr)
{
	char tkey[4200], tcert[4200];

	if (!force) {
		if (ca_write_new(key_path, 0600, CA_PEM_KEY, key) == -1) {
			*errstr = ca_err("cannot write %s: %s", key_path,
			    strerror(errno));
			return -1;
		}
		if (ca_write_new(cert_path, 0644, CA_PEM_CERT, cert) == -1) {
			*errstr = ca_err("cannot write %s: %s", cert_path,
			    strerror(errno));
			unlink(key_path);
			return -1;
		}
		return 0;
	}
	if (ca_write_tmp(key_path, tkey, sizeof(tkey), 0600, CA_PEM_KEY,
	    key) == -1) {
		*errstr = ca_err("cannot write %s: %s", key_path,
		    strerror(errno));
		return -1;
	}
	if (ca_write_tmp(cert_path, tcert, sizeof(tcert), 0644, CA_PEM_CERT,
	    cert) == -1) {
		*errstr = ca_err("cannot write %s: %s", cert_path,
		    strerror(errno));
		unlink(tkey);
		return -1;
	}
	if (rename(tkey, key_path) == -1) {
		*errstr = ca_err("cannot replace %s: %s", key_path,
		    strerror(errno));
		unlink(tkey);
		unlink(tcert);
		return -1;
	}
	if (rename(tcert, cert_path) == -1) {
		/* The new key is in place: the old certificate no longer fits. */
		*errstr = ca_err("cannot replace %s: %s (run ca init --force "
		    "again)", cert_path, strerror(errno));
		unlink(tcert);
		return -1;
	}
	return 0;
}

int
ca_init(const char *cert_path, const char *key_path, int force,
    const char **errstr)
{
	struct stat st;
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	int rc = -1;

	if (cert_path == NULL || key_path == NULL || *cert_path == '\0' ||
	    *key_path == '\0') {
		*errstr = "no path for the CA certificate or key";
		return -1;
	}
	if (strcmp(cert_path, key_path) == 0) {
		*errstr = ca_err("the CA certificate and key must be two files, "
		    "not %s", cert_path);
		return -1;
	}
	if (!force) {
		if (lstat(key_path, &st) == 0) {
			*errstr = ca_err("%s already exists; use --force to "
			    "replace the CA", key_path);
			return -1;
		}
		if (lstat(cert_path, &st) == 0) {
			*errstr = ca_err("%s already exists; use --force to "
			    "replace the CA", cert_path);
			return -1;
		}
	}
	if (util_mkdir_parents(key_path) == -1 ||
	    util_mkdir_parents(cert_path) == -1) {
		*errstr = ca_err("cannot create the directories for %s: %s",
		    key_path, strerror(errno));
		return -1;
	}
	if ((key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL) {
		*errstr = ca_err("cannot generate the CA key: %s",
		    ca_ossl_reason());
		goto done;
	}
	if ((cert = ca_make_root(key)) == NULL) {
		*errstr = ca_err("cannot make the CA certificate: %s",
		    ca_ossl_reason());
		goto done;
	}
	rc = ca_write_files(cert_path, key_path, force, cert, key, errstr);
done:
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

/* ---------------------------------------------------------------- loading */

/* Never prompt for a pass phrase: an encrypted key is an error. */
static int
ca_nopass_cb(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

EVP_PKEY *
ca_read_key(const char *path, const char *what, const char **errstr)
{
	struct stat st;
	EVP_PKEY *key;
	BIO *b;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*errstr = ca_err("cannot open %s %s: %s", what, path,
		    strerror(errno));
		return NULL;
	}
	/* fstat the descriptor we read from: no window to swap the file. */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		*errstr = ca_err("%s %s is not a regular file", what, path);
		close(fd);
		return NULL;
	}
	if (st.st_mode & 077) {
		*errstr = ca_err("key file %s is readable by group or others; "
		    "chmod 600 %s", path, path);
		close(fd);
		return NULL;
	}
	if ((b = BIO_new_fd(fd, BIO_CLOSE)) == NULL) {
		close(fd);
		*errstr = "out of memory";
		return NULL;
	}
	key = PEM_read_bio_PrivateKey(b, NULL, ca_nopass_cb, NULL);
	BIO_free(b);
	if (key == NULL)
		*errstr = ca_err("cannot read %s %s: %s", what, path,
		    ca_ossl_reason());
	return key;
}

static X509 *
ca_read_cert(const char *path, const char **errstr)
{
	X509 *x;
	BIO *b;

	if ((b = BIO_new_file(path, "r")) == NULL) {
		*errstr = ca_err("cannot open CA certificate %s: %s", path,
		    strerror(errno));
		ERR_clear_error();
		return NULL;
	}
	x = PEM_read_bio_X509(b, NULL, ca_nopass_cb, NULL);
	BIO_free(b);
	if (x == NULL)
		*errstr = ca_err("cannot read CA certificate %s: %s", path,
		    ca_ossl_reason());
	return x;
}

/* Is cert fit to issue server certificates? NULL or why not. */
static const char *
ca_check_cert(X509 *cert, const char *path, time_t *not_after)
{
	const ASN1_TIME *na = X509_get0_notAfter(cert);
	uint32_t flags = X509_get_extension_flags(cert);
	struct tm tm;

	if (flags & EXFLAG_INVALID)
		return ca_err("CA certificate %s has invalid extensions", path);
	if (!(flags & EXFLAG_CA))
		return ca_err("%s is not a CA certificate (no basicConstraints "
		    "CA:TRUE)", path);
	if ((flags & EXFLAG_KUSAGE) &&
	    !(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN))
		return ca_err("CA certificate %s may not sign certificates "
		    "(keyUsage lacks keyCertSign)", path);
	if (X509_cmp_current_time(na) <= 0)
		return ca_err("CA certificate %s has expired; make a new one "
		    "with sandgate ca init --force", path);
	if (!ASN1_TIME_to_tm(na, &tm))
		return ca_err("CA certificate %s: bad notAfter", path);
	*not_after = timegm(&tm);
	return NULL;
}

/* The leaf extensions are the same for every leaf: build them once. */
static int
ca_build_leaf_exts(struct ca *ca)
{
	const ASN1_OCTET_STRING *ski;
	AUTHORITY_KEYID *akid = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;
	int rc = -1;

	ca->ext_bc = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints,
	    "critical,CA:FALSE");
	ca->ext_ku = X509V3_EXT_conf_nid(NULL, NULL, NID_key_usage,
	    "critical,digitalSignature");
	ca->ext_eku = X509V3_EXT_conf_nid(NULL, NULL, NID_ext_key_usage,
	    "serverAuth");
	if (ca->ext_bc == NULL || ca->ext_ku == NULL || ca->ext_eku == NULL)
		return -1;
	if ((akid = AUTHORITY_KEYID_new()) == NULL)
		return -1;
	/* The CA's own key identifier, or RFC 5280's method 1 without one. */
	if ((ski = X509_get0_subject_key_id(ca->cert)) != NULL)
		akid->keyid = ASN1_OCTET_STRING_dup(ski);
	else if (X509_pubkey_digest(ca->cert, EVP_sha1(), md, &mdlen) &&
	    (akid->keyid = ASN1_OCTET_STRING_new()) != NULL &&
	    !ASN1_OCTET_STRING_set(akid->keyid, md, (int)mdlen)) {
		ASN1_OCTET_STRING_free(akid->keyid);
		akid->keyid = NULL;
	}
	if (akid->keyid != NULL &&
	    (ca->ext_aki = X509V3_EXT_i2d(NID_authority_key_identifier, 0,
	    akid)) != NULL)
		rc = 0;
	AUTHORITY_KEYID_free(akid);
	return rc;
}

/* An empty CA: its locks, clock and leaf cache. NULL with *errstr. */
static struct ca *
ca_alloc(const char **errstr)
{
	struct ca *ca;

	if ((ca = calloc(1, sizeof(*ca))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	pthread_mutex_init(&ca->mtx, NULL);
	pthread_cond_init(&ca->minted_cv, NULL);
	ca->now = ca_time;
	if (ca_cache_init(ca) == -1) {
		*errstr = "out of memory";
		ca_free(ca);
		return NULL;
	}
	/* The cache's hash key: hostile names cannot aim at one chain. */
	if (RAND_bytes((unsigned char *)ca->hkey, sizeof(ca->hkey)) != 1) {
		*errstr = ca_err("no randomness: %s", ca_ossl_reason());
		ca_free(ca);
		return NULL;
	}
	return ca;
}

struct ca *
ca_load(const char *cert_path, const char *key_path, const char **errstr)
{
	struct ca *ca;
	const char *why;

	if ((ca = ca_alloc(errstr)) == NULL)
		return NULL;
	if ((ca->key = ca_read_key(key_path, "CA key", errstr)) == NULL ||
	    (ca->cert = ca_read_cert(cert_path, errstr)) == NULL)
		goto fail;
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		ERR_clear_error();
		*errstr = ca_err("CA key %s does not belong to certificate %s",
		    key_path, cert_path);
		goto fail;
	}
	if ((why = ca_check_cert(ca->cert, cert_path, &ca->not_after)) != NULL) {
		*errstr = why;
		goto fail;
	}
	ca->md = ca_digest_for(ca->key);
	if ((ca->leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC",
	    "P-256")) == NULL) {
		*errstr = ca_err("cannot generate the leaf key: %s",
		    ca_ossl_reason());
		goto fail;
	}
	if (ca_build_leaf_exts(ca) == -1) {
		*errstr = ca_err("cannot build leaf extensions: %s",
		    ca_ossl_reason());
		goto fail;
	}
	return ca;
fail:
	ca_free(ca);
	return NULL;
}

struct ca *
ca_remote(X509 *cert, EVP_PKEY *leaf_key, ca_remote_fn fn, void *arg,
    const char **errstr)
{
	struct ca *ca;

	if ((ca = ca_alloc(errstr)) == NULL)
		return NULL;
	ca->remote = fn;
	ca->remote_arg = arg;
	if (!X509_up_ref(cert)) {
		*errstr = "out of memory";
		goto fail;
	}
	ca->cert = cert;
	if ((*errstr = ca_check_cert(ca->cert, "from the key keeper",
	    &ca->not_after)) != NULL)
		goto fail;
	if (!EVP_PKEY_up_ref(leaf_key)) {
		*errstr = "out of memory";
		goto fail;
	}
	ca->leaf_key = leaf_key;
	return ca;
fail:
	ca_free(ca);
	return NULL;
}

int
ca_set_leaf_public(struct ca *ca, EVP_PKEY *pub)
{
	if (EVP_PKEY_get_base_id(pub) != EVP_PKEY_EC || !EVP_PKEY_up_ref(pub))
		return -1;
	pthread_mutex_lock(&ca->mtx);
	EVP_PKEY_free(ca->leaf_key);
	ca->leaf_key = pub;
	pthread_mutex_unlock(&ca->mtx);
	return 0;
}

void
ca_free(struct ca *ca)
{
	if (ca == NULL)
		return;
	ca_cache_free(ca);
	X509_EXTENSION_free(ca->ext_bc);
	X509_EXTENSION_free(ca->ext_ku);
	X509_EXTENSION_free(ca->ext_eku);
	X509_EXTENSION_free(ca->ext_aki);
	EVP_PKEY_free(ca->leaf_key);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	pthread_cond_destroy(&ca->minted_cv);
	pthread_mutex_destroy(&ca->mtx);
	free(ca);
}

X509 *
ca_cert(struct ca *ca)
{
	return ca->cert;
}

void
ca_set_clock(struct ca *ca, time_t (*now)(void))
{
	pthread_mutex_lock(&ca->mtx);
	ca->now = now != NULL ? now : ca_time;
	pthread_mutex_unlock(&ca->mtx);
}
