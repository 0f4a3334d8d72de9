/*
 * Leaf certificates of the interception CA: one per SNI name (or IP
 * address), signed by the CA over the shared leaf key, minted on first use
 * outside the cache lock and renewed a day before they expire.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "core/log.h"
#include "core/policy.h"
#include "vault/ca.h"
#include "vault/ca_int.h"

#define CA_NAME_MAX		253		/* a DNS name in text form */
#define CA_CN_MAX		64		/* ub-common-name (RFC 5280) */
#define CA_LEAF_LIFETIME	(7 * 86400)
#define CA_LEAF_RENEW		86400		/* re-mint a leaf this close to notAfter */

/*
 * The name as it goes into the certificate and the cache key: a DNS name as
 * policy_name_canon() writes it (lower-case A-labels without a trailing
 * dot), or an IP address in canonical text with its binary form in addr.
 */
static int
ca_normalize(const char *name, int is_ip, char *out, size_t *outlen,
    unsigned char *addr, size_t *addrlen)
{
	size_t len;
	int r;

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
	/*
	 * The one host-name normaliser, A-labels only (the network process
	 * asks for names it normalised); "192.0.2.1" may be a DNS name here.
	 */
	if (len > CA_NAME_MAX + 1 || (r = policy_name_canon(name, len, out,
	    CA_NAME_MAX + 1, POLICY_NAME_ASCII | POLICY_NAME_NUMERIC)) <= 0)
		return -1;
	*outlen = (size_t)r;
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

	if (ca->key == NULL) {
		/* The key is in the keeper: it checks the name again. */
		x = ca->remote(ca->remote_arg, name, is_ip, not_after);
		if (x != NULL && X509_check_private_key(x, ca->leaf_key) != 1) {
			ERR_clear_error();
			log_warnx("the key keeper signed a leaf for another key");
			X509_free(x);
			x = NULL;
		}
		return x;
	}
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
	if (x == NULL && ca->key == NULL)
		;	/* the keeper client said why */
	else if (x == NULL && ERR_peek_error() != 0)
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
		ca_cache_remove(ca, e);
		return NULL;
	}
	/* A failed renewal keeps the old leaf: it is valid for a day still. */
	ca_cache_touch(ca, e);
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
	h = ca_cache_hash(ca, norm, len, is_ip);
	pthread_mutex_lock(&ca->mtx);
	for (;;) {
		now = ca->now();
		if ((e = ca_cache_find(ca, h, norm, len, is_ip)) == NULL) {
			if ((e = ca_cache_insert(ca, h, norm, len,
			    is_ip)) == NULL)
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
		ca_cache_touch(ca, e);
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

X509 *
ca_mint_leaf(struct ca *ca, const char *name, int is_ip, time_t *not_after)
{
	char norm[CA_NAME_MAX + 1];
	unsigned char addr[16];
	size_t len, addrlen = 0;
	X509 *x;

	is_ip = is_ip != 0;
	if (ca->key == NULL || ca_normalize(name, is_ip, norm, &len, addr,
	    &addrlen) == -1)
		return NULL;
	x = ca_mint(ca, norm, len, is_ip, addr, addrlen, ca->now(), not_after);
	if (x == NULL)
		log_openssl("minting a leaf certificate");
	return x;
}
