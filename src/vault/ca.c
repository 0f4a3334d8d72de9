/*
 * sandgate's interception CA: writes the CA key and certificate (the key is
 * never readable by anyone but the owner, not even for a moment), loads them
 * back with permission and consistency checks, and mints leaf certificates
 * per SNI name with one shared leaf key, kept in a bounded LRU cache.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
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
#include "core/util.h"

#define CA_CACHE_MAX		10000
#define CA_NAME_MAX		253		/* a DNS name in text form */
#define CA_LABEL_MAX		63
#define CA_CN_MAX		64		/* ub-common-name (RFC 5280) */
#define CA_VALID_DAYS		3652		/* ten years */
#define CA_BACKDATE		3600		/* tolerate clients whose clock is behind */
#define CA_LEAF_LIFETIME	(7 * 86400)
#define CA_LEAF_RENEW		86400		/* re-mint a leaf this close to notAfter */
#define CA_SUBJECT_CN		"sandgate interception CA"
#define CA_SUBJECT_O		"sandgate"

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

	pthread_mutex_t	 mtx;		/* guards everything below */
	pthread_cond_t	 minted_cv;	/* a busy entry finished minting */
	uint64_t	 hkey[2];	/* SipHash key: hostile names cannot aim at one chain */
	struct ca_entry	**buckets;
	size_t		 nbuckets;	/* a power of two */
	struct ca_entry	*lru_head, *lru_tail;
	size_t		 entries, max_entries;
	unsigned long	 minted, hits;
};

/*
 * Error messages carry the path they are about, so they live in a
 * per-thread buffer: valid until this thread's next call into this file.
 */
static __thread char ca_errbuf[512];

static const char *ca_err(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static const char *
ca_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ca_errbuf, sizeof(ca_errbuf), fmt, ap);
	va_end(ap);
	return ca_errbuf;
}

/* The reason of the newest queued OpenSSL error, and an empty queue. */
static const char *
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
static int
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

enum ca_pem { CA_PEM_KEY, CA_PEM_CERT };

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

/*
 * Write a new file at path that must not exist yet (O_EXCL: the mode is
 * right from the first moment); a half-written file is removed.
 */
static int
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

static EVP_PKEY *
ca_read_key(const char *path, const char **errstr)
{
	struct stat st;
	EVP_PKEY *key;
	BIO *b;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*errstr = ca_err("cannot open CA key %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	/* fstat the descriptor we read from: no window to swap the file. */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		*errstr = ca_err("CA key %s is not a regular file", path);
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
		*errstr = ca_err("cannot read CA key %s: %s", path,
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

static uint64_t
ca_pow2(size_t n)
{
	uint64_t p = 64;

	while (p < n && p < ((uint64_t)1 << 30))
		p <<= 1;
	return p;
}

struct ca *
ca_load(const char *cert_path, const char *key_path, const char **errstr)
{
	struct ca *ca;
	const char *why;

	if ((ca = calloc(1, sizeof(*ca))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	pthread_mutex_init(&ca->mtx, NULL);
	pthread_cond_init(&ca->minted_cv, NULL);
	ca->now = ca_time;
	ca->max_entries = CA_CACHE_MAX;
	ca->nbuckets = ca_pow2(CA_CACHE_MAX);
	if ((ca->buckets = calloc(ca->nbuckets, sizeof(*ca->buckets))) == NULL) {
		*errstr = "out of memory";
		goto fail;
	}
	if ((ca->key = ca_read_key(key_path, errstr)) == NULL ||
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
	if (RAND_bytes((unsigned char *)ca->hkey, sizeof(ca->hkey)) != 1) {
		*errstr = ca_err("no randomness: %s", ca_ossl_reason());
		goto fail;
	}
	return ca;
fail:
	ca_free(ca);
	return NULL;
}

static void
ca_entry_free(struct ca_entry *e)
{
	X509_free(e->cert);
	free(e);
}

void
ca_free(struct ca *ca)
{
	struct ca_entry *e, *next;

	if (ca == NULL)
		return;
	for (e = ca->lru_head; e != NULL; e = next) {
		next = e->next;
		ca_entry_free(e);
	}
	free(ca->buckets);
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

/* ---------------------------------------------------------------- leaves */

/*
 * The name as it goes into the certificate and the cache key: a DNS name
 * lower-cased without a trailing dot (letters, digits, '-', '_', labels of
 * 1..63), or an IP address in canonical text with its binary form in addr.
 */
static int
ca_normalize(const char *name, int is_ip, char *out, size_t *outlen,
    unsigned char *addr, size_t *addrlen)
{
	size_t i, len, label = 0;
	unsigned char c;

	if (name == NULL)
		return -1;
	len = strnlen(name, CA_NAME_MAX + 2);
	if (is_ip) {
		if (len > CA_NAME_MAX)
			return -1;
		if (inet_pton(AF_INET, name, addr) == 1) {
			*addrlen = 4;
			if (inet_ntop(AF_INET, addr, out, CA_NAME_MAX + 1) == NULL)
				return -1;
		} else if (inet_pton(AF_INET6, name, addr) == 1) {
			*addrlen = 16;
			if (inet_ntop(AF_INET6, addr, out, CA_NAME_MAX + 1) == NULL)
				return -1;
		} else
			return -1;
		*outlen = strlen(out);
		return 0;
	}
	if (len > 0 && len <= CA_NAME_MAX + 1 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > CA_NAME_MAX)
		return -1;
	for (i = 0; i < len; i++) {
		c = (unsigned char)name[i];
		if (c == '.') {
			if (label == 0)
				return -1;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_') {
			label++;
		} else if (c >= 'A' && c <= 'Z') {
			c = (unsigned char)(c - 'A' + 'a');
			label++;
		} else
			return -1;
		if (label > CA_LABEL_MAX)
			return -1;
		out[i] = (char)c;
	}
	if (label == 0)
		return -1;
	out[len] = '\0';
	*outlen = len;
	return 0;
}

static int
ca_add_san(X509 *x, const char *name, size_t len, int is_ip,
    const unsigned char *addr, size_t addrlen)
{
	GENERAL_NAMES *gens = NULL;
	GENERAL_NAME *g = NULL;
	ASN1_STRING *s = NULL;
	int rc = -1;

	if ((gens = GENERAL_NAMES_new()) == NULL ||
	    (g = GENERAL_NAME_new()) == NULL)
		goto done;
	s = is_ip ? ASN1_OCTET_STRING_new() : ASN1_IA5STRING_new();
	if (s == NULL)
		goto done;
	if (is_ip ? !ASN1_STRING_set(s, addr, (int)addrlen) :
	    !ASN1_STRING_set(s, name, (int)len))
		goto done;
	GENERAL_NAME_set0_value(g, is_ip ? GEN_IPADD : GEN_DNS, s);
	s = NULL;
	if (!sk_GENERAL_NAME_push(gens, g))
		goto done;
	g = NULL;
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0,
	    X509V3_ADD_DEFAULT) == 1)
		rc = 0;
done:
	ASN1_STRING_free(s);
	GENERAL_NAME_free(g);
	GENERAL_NAMES_free(gens);
	return rc;
}

/* A new leaf for a normalised name; runs without the cache lock. */
static X509 *
ca_mint(struct ca *ca, const char *name, size_t len, int is_ip,
    const unsigned char *addr, size_t addrlen, time_t now, time_t *not_after)
{
	X509 *x;
	X509_NAME *n;
	time_t na = now + CA_LEAF_LIFETIME;

	if (na > ca->not_after)
		na = ca->not_after;
	if (na <= now)
		return NULL;	/* the CA itself has expired */
	if ((x = X509_new()) == NULL)
		return NULL;
	n = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) || ca_set_serial(x) == -1 ||
	    !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)name,
	    (int)(len > CA_CN_MAX ? CA_CN_MAX : len), -1, 0) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
	    ASN1_TIME_adj(X509_getm_notBefore(x), now, 0, -CA_BACKDATE) == NULL ||
	    ASN1_TIME_set(X509_getm_notAfter(x), na) == NULL ||
	    !X509_set_pubkey(x, ca->leaf_key) ||
	    ca_add_san(x, name, len, is_ip, addr, addrlen) == -1 ||
	    !X509_add_ext(x, ca->ext_bc, -1) ||
	    !X509_add_ext(x, ca->ext_ku, -1) ||
	    !X509_add_ext(x, ca->ext_eku, -1) ||
	    !X509_add_ext(x, ca->ext_aki, -1) ||
	    X509_sign(x, ca->key, ca->md) <= 0) {
		X509_free(x);
		return NULL;
	}
	*not_after = na;
	return x;
}

/* SipHash-2-4 (Aumasson and Bernstein), written from the paper. */
#define CA_ROTL(x, b)	(uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define CA_SIPROUND do {						\
	v0 += v1; v1 = CA_ROTL(v1, 13); v1 ^= v0; v0 = CA_ROTL(v0, 32); \
	v2 += v3; v3 = CA_ROTL(v3, 16); v3 ^= v2;			\
	v0 += v3; v3 = CA_ROTL(v3, 21); v3 ^= v0;			\
	v2 += v1; v1 = CA_ROTL(v1, 17); v1 ^= v2; v2 = CA_ROTL(v2, 32); \
} while (0)

static uint64_t
ca_siphash(const uint64_t k[2], const void *data, size_t len)
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
		CA_SIPROUND;
		CA_SIPROUND;
		v0 ^= m;
	}
	for (j = 0; j < (len & 7); j++)
		last |= (uint64_t)p[end + j] << (8 * j);
	v3 ^= last;
	CA_SIPROUND;
	CA_SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	CA_SIPROUND;
	CA_SIPROUND;
	CA_SIPROUND;
	CA_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static struct ca_entry *
ca_find(struct ca *ca, uint64_t h, const char *name, size_t len, int is_ip)
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

static void
ca_remove(struct ca *ca, struct ca_entry *e)
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
			ca_remove(ca, e);
		e = prev;
	}
}

/* A new busy entry for name at the head of the LRU list; NULL if out of memory. */
static struct ca_entry *
ca_insert(struct ca *ca, uint64_t h, const char *name, size_t len, int is_ip)
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

/*
 * Caller holds the lock and the entry is busy: mint without the lock (so
 * other names go on being served), then publish the result and wake the
 * threads waiting for this name. Returns the leaf to hand out, up-ref'd.
 */
static X509 *
ca_mint_entry(struct ca *ca, struct ca_entry *e, time_t now,
    const unsigned char *addr, size_t addrlen)
{
	X509 *x;
	time_t na = 0;

	pthread_mutex_unlock(&ca->mtx);
	x = ca_mint(ca, e->name, e->len, e->is_ip, addr, addrlen, now, &na);
	if (x == NULL && ERR_peek_error() != 0)
		log_openssl("minting a leaf certificate");
	else if (x == NULL)
		log_warnx("cannot mint a leaf certificate: the CA certificate "
		    "has expired; make a new one with sandgate ca init --force");
	pthread_mutex_lock(&ca->mtx);
	e->busy = 0;
	pthread_cond_broadcast(&ca->minted_cv);
	if (x != NULL) {
		X509_free(e->cert);
		e->cert = x;
		e->not_after = na;
		ca->minted++;
	} else if (e->cert == NULL || now >= e->not_after) {
		ca_remove(ca, e);
		return NULL;
	}
	/* A failed renewal keeps the old leaf: it is valid for a day still. */
	ca_lru_unlink(ca, e);
	ca_lru_push(ca, e);
	X509_up_ref(e->cert);
	return e->cert;
}

int
ca_leaf(struct ca *ca, const char *name, int is_ip, X509 **leaf,
    EVP_PKEY **key)
{
	char norm[CA_NAME_MAX + 1];
	unsigned char addr[16];
	size_t len, addrlen = 0;
	struct ca_entry *e;
	X509 *x = NULL;
	uint64_t h;
	time_t now;

	*leaf = NULL;
	*key = NULL;
	is_ip = is_ip != 0;
	if (ca_normalize(name, is_ip, norm, &len, addr, &addrlen) == -1)
		return -1;
	h = ca_siphash(ca->hkey, norm, len) ^ (uint64_t)is_ip;
	pthread_mutex_lock(&ca->mtx);
	for (;;) {
		now = ca->now();
		if ((e = ca_find(ca, h, norm, len, is_ip)) == NULL) {
			if ((e = ca_insert(ca, h, norm, len, is_ip)) == NULL)
				break;
			x = ca_mint_entry(ca, e, now, addr, addrlen);
			break;
		}
		if (e->cert == NULL || now >= e->not_after) {
			/* Nothing usable yet: one thread mints, the rest wait. */
			if (e->busy) {
				pthread_cond_wait(&ca->minted_cv, &ca->mtx);
				continue;	/* the entry may be gone now */
			}
			e->busy = 1;
			x = ca_mint_entry(ca, e, now, addr, addrlen);
			break;
		}
		if (!e->busy && now + CA_LEAF_RENEW >= e->not_after &&
		    e->not_after < ca->not_after) {
			/* Renew: this thread mints, others still get the old one. */
			e->busy = 1;
			x = ca_mint_entry(ca, e, now, addr, addrlen);
			break;
		}
		ca->hits++;
		ca_lru_unlink(ca, e);
		ca_lru_push(ca, e);
		X509_up_ref(e->cert);
		x = e->cert;
		break;
	}
	pthread_mutex_unlock(&ca->mtx);
	if (x == NULL)
		return -1;
	if (!EVP_PKEY_up_ref(ca->leaf_key)) {
		X509_free(x);
		return -1;
	}
	*leaf = x;
	*key = ca->leaf_key;
	return 0;
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

void
ca_set_clock(struct ca *ca, time_t (*now)(void))
{
	pthread_mutex_lock(&ca->mtx);
	ca->now = now != NULL ? now : ca_time;
	pthread_mutex_unlock(&ca->mtx);
}
