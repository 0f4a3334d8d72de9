/*
 * The checkpoint row's text and its signature: what the writer signs and
 * records (audit.c), and what verify reads back and checks with the public
 * key (audit_chain.c). No private key is ever here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"
#include "core/util.h"

#define CKPT_SIG_HEX	128

int
audit_checkpoint_format(char *buf, size_t len,
    const struct audit_checkpoint *c)
{
	char sig[CKPT_SIG_HEX + 1];
	int n;

	util_hex_encode(c->sig, sizeof(c->sig), sig);
	n = snprintf(buf, len, "/events?through=%" PRId64 "&head=%s&at=%s"
	    "&key=%s&sig=%s", c->through, c->head, c->shutdown ? "shutdown" :
	    "interval", c->key_id, sig);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* "name=" at p (field of flen bytes)? The value and its length. */
static int
field(const char *p, size_t flen, const char *name, const char **val,
    size_t *vlen)
{
	size_t nlen = strlen(name);

	if (flen <= nlen || memcmp(p, name, nlen) != 0 || p[nlen] != '=')
		return 0;
	*val = p + nlen + 1;
	*vlen = flen - nlen - 1;
	return 1;
}

static int
parse_id(const char *p, size_t n, int64_t *out)
{
	int64_t v = 0;
	size_t i;

	if (n == 0 || (n > 1 && p[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	*out = v;
	return 0;
}

/* One field of the path into c; which fields were seen go to *seen. */
static int
parse_field(const char *p, size_t flen, struct audit_checkpoint *c,
    unsigned *seen)
{
	uint8_t raw[AUDIT_KEYID_HEX / 2];
	const char *v;
	size_t n;

	if (field(p, flen, "through", &v, &n)) {
		*seen |= 1;
		return parse_id(v, n, &c->through);
	}
	if (field(p, flen, "head", &v, &n)) {
		*seen |= 2;
		if (!audit_is_hash_hex((const unsigned char *)v, n))
			return -1;
		memcpy(c->head, v, n);
		c->head[n] = '\0';
		return 0;
	}
	if (field(p, flen, "at", &v, &n)) {
		*seen |= 4;
		if (n == 8 && memcmp(v, "shutdown", 8) == 0)
			c->shutdown = 1;
		else if (!(n == 8 && memcmp(v, "interval", 8) == 0))
			return -1;
		return 0;
	}
	if (field(p, flen, "key", &v, &n)) {
		*seen |= 8;
		if (n != AUDIT_KEYID_HEX || util_hex_decode(v, n, raw, 1) == -1)
			return -1;
		memcpy(c->key_id, v, n);
		c->key_id[n] = '\0';
		return 0;
	}
	if (field(p, flen, "sig", &v, &n)) {
		*seen |= 16;
		return n == CKPT_SIG_HEX ? util_hex_decode(v, n, c->sig, 1) : -1;
	}
	return -1;
}

int
audit_checkpoint_parse(const char *path, size_t len,
    struct audit_checkpoint *c)
{
	static const char prefix[] = "/events?";
	const char *p, *end = path + len, *amp;
	unsigned seen = 0, before;

	memset(c, 0, sizeof(*c));
	if (path == NULL || len < sizeof(prefix) - 1 ||
	    memcmp(path, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	for (p = path + sizeof(prefix) - 1; p < end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		before = seen;
		if (parse_field(p, (size_t)(amp - p), c, &seen) == -1 ||
		    seen == before)		/* a field twice */
			return -1;
	}
	return seen == 31 ? 0 : -1;
}

int
audit_checkpoint_message(int64_t through, const char *head, int shutdown,
    const char *ts, char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "sandgate-audit-checkpoint-v1\nthrough=%"
	    PRId64 "\nhead=%s\nat=%s\nts=%s\n", through, head, shutdown ?
	    "shutdown" : "interval", ts);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int
audit_key_id(const uint8_t pub[32], char out[AUDIT_KEYID_HEX + 1])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (EVP_Digest(pub, 32, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen < AUDIT_KEYID_HEX / 2) {
		ERR_clear_error();
		return -1;
	}
	util_hex_encode(md, AUDIT_KEYID_HEX / 2, out);
	return 0;
}

int
audit_pubkey_id(EVP_PKEY *k, char out[AUDIT_KEYID_HEX + 1])
{
	uint8_t raw[32];
	size_t len = sizeof(raw);

	if (EVP_PKEY_get_raw_public_key(k, raw, &len) != 1 || len != 32) {
		ERR_clear_error();
		return -1;
	}
	return audit_key_id(raw, out);
}

EVP_PKEY *
audit_pubkey_read(const char *path, char *err, size_t errlen)
{
	EVP_PKEY *k;
	BIO *b;

	if ((b = BIO_new_file(path, "r")) == NULL) {
		ERR_clear_error();
		snprintf(err, errlen, "cannot open public key %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	k = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
	BIO_free(b);
	ERR_clear_error();
	if (k == NULL) {
		snprintf(err, errlen, "%s is not a PEM public key", path);
		return NULL;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519) {
		snprintf(err, errlen, "%s is not an Ed25519 public key", path);
		EVP_PKEY_free(k);
		return NULL;
	}
	return k;
}

int
audit_sig_verify(EVP_PKEY *pub, const uint8_t *msg, size_t len,
    const uint8_t sig[64])
{
	EVP_MD_CTX *ctx;
	int ok;

	if (pub == NULL || (ctx = EVP_MD_CTX_new()) == NULL)
		return 0;
	ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pub) == 1 &&
	    EVP_DigestVerify(ctx, sig, 64, msg, len) == 1;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}
