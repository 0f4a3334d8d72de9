/*
 * Unit tests of the interception CA (src/vault/ca.c): files and modes made
 * by ca_init, what ca_load refuses, the leaves (chain, SAN, EKU, validity,
 * serials), the LRU cache, renewal near expiry and four threads at once.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "check.h"
#include "vault/ca.h"

static char tmpdir[256];

static const char *
tpath(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", tmpdir, rel);
	return buf;
}

static int
rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static int
file_mode(const char *path)
{
	struct stat st;

	if (stat(path, &st) == -1)
		return -1;
	return (int)(st.st_mode & 07777);
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	buf = calloc(1, 65536);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int
same_file(const char *a, const char *b)
{
	char *x = slurp(a), *y = slurp(b);
	int same = x != NULL && y != NULL && strcmp(x, y) == 0;

	free(x);
	free(y);
	return same;
}

static int
copy_file(const char *from, const char *to, mode_t mode)
{
	char *s = slurp(from);
	FILE *f;
	int ok;

	if (s == NULL || (f = fopen(to, "w")) == NULL) {
		free(s);
		return -1;
	}
	ok = fputs(s, f) >= 0;
	ok = fclose(f) == 0 && ok;
	free(s);
	return ok && chmod(to, mode) == 0 ? 0 : -1;
}

static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int
contains(const char *s, const char *sub)
{
	return s != NULL && strstr(s, sub) != NULL;
}

/* ---------------------------------------------------------------- ca_init */

static void
test_init(void)
{
	char cert[512], key[512], cert2[512], key2[512], dir[512];
	char save_c[512], save_k[512];
	const char *err = NULL;
	char *pem;
	mode_t old;

	tpath(cert, sizeof(cert), "a/b/certs/ca.crt");
	tpath(key, sizeof(key), "a/b/keys/ca.key");
	CHECK_INT(ca_init(cert, key, 0, &err), 0);
	CHECK_INT(file_mode(key), 0600);
	CHECK_INT(file_mode(cert), 0644);
	CHECK_INT(file_mode(tpath(dir, sizeof(dir), "a")), 0700);
	CHECK_INT(file_mode(tpath(dir, sizeof(dir), "a/b/keys")), 0700);
	CHECK_INT(file_mode(tpath(dir, sizeof(dir), "a/b/certs")), 0700);
	pem = slurp(key);
	CHECK(contains(pem, "-----BEGIN PRIVATE KEY-----\n"));	/* PKCS#8 */
	free(pem);

	/* Keep copies to prove a refusal changes nothing. */
	tpath(save_c, sizeof(save_c), "save.crt");
	tpath(save_k, sizeof(save_k), "save.key");
	CHECK_INT(copy_file(cert, save_c, 0644), 0);
	CHECK_INT(copy_file(key, save_k, 0600), 0);
	err = NULL;
	CHECK_INT(ca_init(cert, key, 0, &err), -1);
	CHECK_MSG(contains(err, "already exists") && contains(err, "--force"),
	    "%s", err ? err : "(null)");
	CHECK(same_file(cert, save_c));
	CHECK(same_file(key, save_k));

	/* Only the certificate exists: still refused, no key left behind. */
	tpath(cert2, sizeof(cert2), "half/ca.crt");
	tpath(key2, sizeof(key2), "half/ca.key");
	CHECK_INT(ca_init(cert2, key2, 0, &err), 0);
	CHECK_INT(unlink(key2), 0);
	CHECK_INT(ca_init(cert2, key2, 0, &err), -1);
	CHECK_INT(access(key2, F_OK), -1);

	/* --force replaces both, atomically, leaving no temporary files. */
	CHECK_INT(ca_init(cert, key, 1, &err), 0);
	CHECK(!same_file(cert, save_c));
	CHECK(!same_file(key, save_k));
	CHECK_INT(file_mode(key), 0600);
	CHECK_INT(file_mode(cert), 0644);
	CHECK_INT(count_entries(tpath(dir, sizeof(dir), "a/b/keys")), 1);
	CHECK_INT(count_entries(tpath(dir, sizeof(dir), "a/b/certs")), 1);

	/* A wide-open umask does not widen the key. */
	old = umask(0);
	tpath(cert2, sizeof(cert2), "umask/ca.crt");
	tpath(key2, sizeof(key2), "umask/ca.key");
	CHECK_INT(ca_init(cert2, key2, 0, &err), 0);
	CHECK_INT(file_mode(key2), 0600);
	CHECK_INT(file_mode(cert2), 0644);
	CHECK_INT(file_mode(tpath(dir, sizeof(dir), "umask")), 0700);
	CHECK_INT(ca_init(cert2, key2, 1, &err), 0);
	CHECK_INT(file_mode(key2), 0600);
	umask(old);

	CHECK_INT(ca_init(cert, cert, 1, &err), -1);
	CHECK_INT(ca_init(tpath(cert2, sizeof(cert2), "nodir/x.crt"),
	    "/proc/nonexistent/x.key", 0, &err), -1);
	CHECK(contains(err, "/proc/nonexistent"));
}

/* What the CA certificate ca_init wrote looks like. */
static void
test_ca_cert(struct ca *ca)
{
	X509 *x = ca_cert(ca);
	EVP_PKEY *pk = X509_get0_pubkey(x);
	const ASN1_INTEGER *serial = X509_get0_serialNumber(x);
	X509_NAME *subj = X509_get_subject_name(x);
	X509_EXTENSION *ext;
	char buf[128], group[64];
	int days = 0, secs = 0, i;

	CHECK_INT(X509_get_version(x), X509_VERSION_3);
	CHECK_INT(X509_check_ca(x), 1);
	CHECK_INT(X509_get_pathlen(x), 0);
	CHECK_INT(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	i = X509_get_ext_by_NID(x, NID_basic_constraints, -1);
	CHECK((ext = X509_get_ext(x, i)) != NULL &&
	    X509_EXTENSION_get_critical(ext));
	i = X509_get_ext_by_NID(x, NID_key_usage, -1);
	CHECK((ext = X509_get_ext(x, i)) != NULL &&
	    X509_EXTENSION_get_critical(ext));
	CHECK(X509_get0_subject_key_id(x) != NULL);
	CHECK(EVP_PKEY_is_a(pk, "EC"));
	CHECK(EVP_PKEY_get_group_name(pk, group, sizeof(group), NULL) == 1 &&
	    strcmp(group, "prime256v1") == 0);
	CHECK_INT(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
	X509_NAME_get_text_by_NID(subj, NID_commonName, buf, sizeof(buf));
	CHECK_STR(buf, "sandgate interception CA");
	X509_NAME_get_text_by_NID(subj, NID_organizationName, buf, sizeof(buf));
	CHECK_STR(buf, "sandgate");
	CHECK(X509_NAME_cmp(subj, X509_get_issuer_name(x)) == 0);
	CHECK(X509_verify(x, pk) == 1);
	CHECK(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x),
	    X509_get0_notAfter(x)) == 1);
	CHECK_MSG(days >= 3650 && days <= 3653, "%d days", days);
	/* 128-bit positive serial: 16 content octets, top bit clear. */
	CHECK_INT(ASN1_STRING_length(serial), 16);
	CHECK_INT(ASN1_STRING_type(serial), V_ASN1_INTEGER);
}

/* ---------------------------------------------------------------- ca_load */

struct bad_cert {
	const char	*what;
	const char	*bc;		/* basicConstraints, NULL: none */
	const char	*ku;		/* keyUsage, NULL: none */
	long		 not_after;	/* seconds from now */
	const char	*expect;	/* in the error */
};

/* A self-signed certificate for key with the given extensions. */
static X509 *
make_cert(EVP_PKEY *key, const char *bc, const char *ku, long not_after)
{
	X509 *x = X509_new();
	X509_NAME *n = X509_get_subject_name(x);
	X509_EXTENSION *ext;
	X509V3_CTX ctx;

	X509_set_version(x, X509_VERSION_3);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 42);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)"test", -1, -1, 0);
	X509_set_issuer_name(x, n);
	X509_gmtime_adj(X509_getm_notBefore(x), -86400L * 10);
	X509_gmtime_adj(X509_getm_notAfter(x), not_after);
	X509_set_pubkey(x, key);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (bc != NULL) {
		ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints, bc);
		X509_add_ext(x, ext, -1);
		X509_EXTENSION_free(ext);
	}
	if (ku != NULL) {
		ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_key_usage, ku);
		X509_add_ext(x, ext, -1);
		X509_EXTENSION_free(ext);
	}
	X509_sign(x, key, EVP_PKEY_is_a(key, "ED25519") ? NULL : EVP_sha256());
	return x;
}

static int
write_pem(const char *path, X509 *x, EVP_PKEY *key, mode_t mode)
{
	FILE *f;
	int ok;

	unlink(path);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fchmod(fileno(f), mode);
	ok = x != NULL ? PEM_write_X509(f, x) :
	    PEM_write_PKCS8PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	return fclose(f) == 0 && ok == 1 ? 0 : -1;
}

static void
test_load_refusals(void)
{
	static const mode_t open_modes[] = { 0644, 0640, 0604, 0660, 0610,
	    0601, 0620, 0602, 0607, 0670 };
	static const struct bad_cert bad[] = {
		{ "no basicConstraints", NULL, "critical,keyCertSign", 86400,
		  "not a CA" },
		{ "CA:FALSE", "critical,CA:FALSE", NULL, 86400, "not a CA" },
		{ "no keyCertSign", "critical,CA:TRUE", "critical,digitalSignature",
		  86400, "keyCertSign" },
		{ "expired", "critical,CA:TRUE", "critical,keyCertSign", -3600,
		  "expired" },
	};
	char cert[512], key[512], cert_b[512], key_b[512], p[512];
	const char *err;
	struct ca *ca;
	EVP_PKEY *k;
	X509 *x;
	size_t i;

	tpath(cert, sizeof(cert), "load/ca.crt");
	tpath(key, sizeof(key), "load/ca.key");
	tpath(cert_b, sizeof(cert_b), "load_b/ca.crt");
	tpath(key_b, sizeof(key_b), "load_b/ca.key");
	CHECK_INT(ca_init(cert, key, 0, &err), 0);
	CHECK_INT(ca_init(cert_b, key_b, 0, &err), 0);

	ca = ca_load(cert, key, &err);
	CHECK_MSG(ca != NULL, "%s", ca ? "" : err);
	if (ca != NULL)
		test_ca_cert(ca);
	ca_free(ca);

	for (i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
		CHECK_INT(chmod(key, open_modes[i]), 0);
		err = NULL;
		ca = ca_load(cert, key, &err);
		CHECK_MSG(ca == NULL, "mode %o accepted", open_modes[i]);
		CHECK_MSG(contains(err, "readable by group or others") &&
		    contains(err, "chmod 600") && contains(err, key),
		    "mode %o: %s", open_modes[i], err ? err : "(null)");
		ca_free(ca);
	}
	CHECK_INT(chmod(key, 0400), 0);
	CHECK((ca = ca_load(cert, key, &err)) != NULL);
	ca_free(ca);
	CHECK_INT(chmod(key, 0600), 0);

	/* A key from another CA. */
	err = NULL;
	CHECK((ca = ca_load(cert, key_b, &err)) == NULL);
	CHECK_MSG(contains(err, "does not belong"), "%s", err ? err : "(null)");
	ca_free(ca);

	/* Missing and unreadable files. */
	CHECK(ca_load(tpath(p, sizeof(p), "load/none.crt"), key, &err) == NULL);
	CHECK(contains(err, "none.crt"));
	CHECK(ca_load(cert, tpath(p, sizeof(p), "load/none.key"), &err) == NULL);
	CHECK(contains(err, "none.key"));
	/* The key where the certificate should be, and the reverse. */
	CHECK(ca_load(key, key, &err) == NULL);
	CHECK(ca_load(cert, cert, &err) == NULL);	/* 0644: refused */
	/* A directory is not a key. */
	CHECK(ca_load(cert, tmpdir, &err) == NULL);

	/* Certificates that match their key but may not issue leaves. */
	k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	tpath(p, sizeof(p), "load/bad.key");
	CHECK_INT(write_pem(p, NULL, k, 0600), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		x = make_cert(k, bad[i].bc, bad[i].ku, bad[i].not_after);
		CHECK_INT(write_pem(cert_b, x, NULL, 0644), 0);
		err = NULL;
		ca = ca_load(cert_b, p, &err);
		CHECK_MSG(ca == NULL, "%s accepted", bad[i].what);
		CHECK_MSG(contains(err, bad[i].expect), "%s: %s", bad[i].what,
		    err ? err : "(null)");
		ca_free(ca);
		X509_free(x);
	}
	/* The same key with a proper CA certificate of its own loads. */
	x = make_cert(k, "critical,CA:TRUE", "critical,keyCertSign", 86400);
	CHECK_INT(write_pem(cert_b, x, NULL, 0644), 0);
	ca = ca_load(cert_b, p, &err);
	CHECK_MSG(ca != NULL, "%s", ca ? "" : err);
	ca_free(ca);
	X509_free(x);
	EVP_PKEY_free(k);
}

/* ---------------------------------------------------------------- leaves */

static struct ca *
load_fresh(const char *sub)
{
	char cert[512], key[512], rel[128];
	const char *err;
	struct ca *ca;

	snprintf(rel, sizeof(rel), "%s/ca.crt", sub);
	tpath(cert, sizeof(cert), rel);
	snprintf(rel, sizeof(rel), "%s/ca.key", sub);
	tpath(key, sizeof(key), rel);
	if (ca_init(cert, key, 1, &err) == -1) {
		fprintf(stderr, "ca_init: %s\n", err);
		return NULL;
	}
	if ((ca = ca_load(cert, key, &err)) == NULL)
		fprintf(stderr, "ca_load: %s\n", err);
	return ca;
}

/* X509_verify_cert against the CA alone, with the host or IP check. */
static int
verify_leaf(struct ca *ca, X509 *leaf, const char *name, int is_ip)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int ok = 0;

	X509_STORE_add_cert(st, ca_cert(ca));
	if (X509_STORE_CTX_init(ctx, st, leaf, NULL) != 1)
		goto done;
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	vp = X509_STORE_CTX_get0_param(ctx);
	if (is_ip)
		X509_VERIFY_PARAM_set1_ip_asc(vp, name);
	else
		X509_VERIFY_PARAM_set1_host(vp, name, 0);
	ok = X509_verify_cert(ctx) == 1;
	if (!ok)
		fprintf(stderr, "verify %s: %s\n", name,
		    X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
done:
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

static char *
serial_hex(X509 *x)
{
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	char *h = BN_bn2hex(bn);

	BN_free(bn);
	return h;
}

static char name_long[300], name_253[260], cn_64[65], label_64[80];

struct leaf_case {
	const char	*name;
	int		 is_ip;
	const char	*san;		/* expected SAN text (DNS) or NULL for IP */
	const char	*cn;		/* expected subject CN */
	const char	*other;		/* a name the leaf must not match */
};

static void
test_leaves(void)
{
	const struct leaf_case cases[] = {
		{ "api.example.test", 0, "api.example.test", "api.example.test",
		  "www.example.test" },
		{ "API.Example.TEST.", 0, "api.example.test", "api.example.test",
		  "example.test" },
		{ "x_y-1.a.test", 0, "x_y-1.a.test", "x_y-1.a.test", "a.test" },
		{ "localhost", 0, "localhost", "localhost", "localhost2" },
		{ name_253, 0, name_253, cn_64, "a.test" },
		{ "192.0.2.7", 1, NULL, "192.0.2.7", "192.0.2.8" },
		{ "2001:db8::1", 1, NULL, "2001:db8::1", "2001:db8::2" },
		{ "2001:0db8:0:0::0:1", 1, NULL, "2001:db8::1", "::1" },
		{ "::ffff:198.51.100.1", 1, NULL, "::ffff:198.51.100.1",
		  "198.51.100.2" },
	};
	static const char *bad_dns[] = { "", ".", "a..b", ".a", "*.example.test",
	    "exa mple.test", "a/b", "a:443", "a\n", "\xc3\xa9.test", name_long,
	    label_64, "a.test..", NULL };
	static const char *bad_ip[] = { "", "300.1.1.1", "1.2.3", "example.test",
	    "fe80::1%eth0", "1.2.3.4 ", "::g", NULL };
	struct ca *ca = load_fresh("leaves");
	const ASN1_OCTET_STRING *aki, *ski;
	GENERAL_NAMES *gens;
	const GENERAL_NAME *g;
	X509 *leaf, *again;
	EVP_PKEY *key, *key2;
	X509_EXTENSION *ext;
	char cn[128], label[64];
	int days, secs, i, n;
	size_t c;

	if (ca == NULL) {
		CHECK(!"no CA");
		return;
	}
	/* 253 bytes: four labels of 62 and one of 1, dots between. */
	memset(label, 'a', 62);
	label[62] = '\0';
	snprintf(name_253, sizeof(name_253), "%s.%s.%s.%s.b", label, label,
	    label, label);
	memcpy(cn_64, name_253, 64);
	cn_64[64] = '\0';
	/* 254 bytes: one too many; and a label of 64. */
	snprintf(name_long, sizeof(name_long), "%s.bb", name_253);
	memset(label_64, 'd', 64);
	snprintf(label_64 + 64, sizeof(label_64) - 64, ".test");
	CHECK_INT(strlen(name_253), 253);
	CHECK_INT(strlen(name_long), 256);

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct leaf_case *lc = &cases[c];

		leaf = NULL;
		key = NULL;
		if (ca_leaf(ca, lc->name, lc->is_ip, &leaf, &key) != 0) {
			CHECK_MSG(0, "ca_leaf(%s) failed", lc->name);
			continue;
		}
		CHECK_MSG(verify_leaf(ca, leaf, lc->is_ip ? lc->cn : lc->san,
		    lc->is_ip), "%s", lc->name);
		if (lc->is_ip) {
			CHECK_INT(X509_check_ip_asc(leaf, lc->name, 0), 1);
			CHECK_INT(X509_check_ip_asc(leaf, lc->other, 0), 0);
		} else {
			CHECK_INT(X509_check_host(leaf, lc->san, 0, 0, NULL), 1);
			CHECK_INT(X509_check_host(leaf, lc->other, 0, 0, NULL), 0);
		}
		/* Exactly one SAN, of the right type and value. */
		gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
		CHECK(gens != NULL && sk_GENERAL_NAME_num(gens) == 1);
		if (gens != NULL && sk_GENERAL_NAME_num(gens) == 1) {
			g = sk_GENERAL_NAME_value(gens, 0);
			if (lc->is_ip) {
				CHECK_INT(g->type, GEN_IPADD);
				CHECK_INT(ASN1_STRING_length(g->d.ip),
				    strchr(lc->name, ':') ? 16 : 4);
			} else {
				CHECK_INT(g->type, GEN_DNS);
				CHECK_INT(ASN1_STRING_length(g->d.dNSName),
				    strlen(lc->san));
				CHECK(memcmp(ASN1_STRING_get0_data(g->d.dNSName),
				    lc->san, strlen(lc->san)) == 0);
			}
		}
		GENERAL_NAMES_free(gens);
		n = X509_NAME_get_text_by_NID(X509_get_subject_name(leaf),
		    NID_commonName, cn, sizeof(cn));
		CHECK_MSG(n > 0 && strcmp(cn, lc->cn) == 0, "CN %s", cn);
		CHECK(X509_NAME_cmp(X509_get_issuer_name(leaf),
		    X509_get_subject_name(ca_cert(ca))) == 0);
		/* Not a CA, server auth only, digitalSignature only. */
		CHECK_INT(X509_check_ca(leaf), 0);
		CHECK(X509_get_extended_key_usage(leaf) == XKU_SSL_SERVER);
		CHECK_INT(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
		i = X509_get_ext_by_NID(leaf, NID_basic_constraints, -1);
		CHECK((ext = X509_get_ext(leaf, i)) != NULL &&
		    X509_EXTENSION_get_critical(ext));
		aki = X509_get0_authority_key_id(leaf);
		ski = X509_get0_subject_key_id(ca_cert(ca));
		CHECK(aki != NULL && ski != NULL &&
		    ASN1_OCTET_STRING_cmp(aki, ski) == 0);
		CHECK_INT(X509_get_version(leaf), X509_VERSION_3);
		CHECK_INT(X509_get_signature_nid(leaf), NID_ecdsa_with_SHA256);
		CHECK_INT(ASN1_STRING_length(X509_get0_serialNumber(leaf)), 16);
		/* The key is the leaf's, P-256, and the same for every leaf. */
		CHECK_INT(X509_check_private_key(leaf, key), 1);
		CHECK(EVP_PKEY_is_a(key, "EC") && EVP_PKEY_get_bits(key) == 256);
		/* notBefore an hour back, notAfter a week ahead. */
		CHECK(ASN1_TIME_diff(&days, &secs, NULL,
		    X509_get0_notBefore(leaf)) == 1);
		CHECK_MSG(days == 0 && secs <= -3590 && secs >= -3610, "%d %d",
		    days, secs);
		CHECK(ASN1_TIME_diff(&days, &secs, NULL,
		    X509_get0_notAfter(leaf)) == 1);
		CHECK_MSG(days * 86400L + secs >= 7 * 86400L - 10 &&
		    days * 86400L + secs <= 7 * 86400L, "%d %d", days, secs);
		/* A second ask is a cache hit: the same object. */
		if (ca_leaf(ca, lc->name, lc->is_ip, &again, &key2) == 0) {
			CHECK(again == leaf);
			CHECK(key2 == key);
			X509_free(again);
			EVP_PKEY_free(key2);
		} else
			CHECK(!"second ca_leaf failed");
		X509_free(leaf);
		EVP_PKEY_free(key);
	}

	for (i = 0; bad_dns[i] != NULL; i++) {
		leaf = (X509 *)1;
		CHECK_MSG(ca_leaf(ca, bad_dns[i], 0, &leaf, &key) == -1,
		    "accepted DNS name [%s]", bad_dns[i]);
		CHECK(leaf == NULL && key == NULL);
	}
	for (i = 0; bad_ip[i] != NULL; i++)
		CHECK_MSG(ca_leaf(ca, bad_ip[i], 1, &leaf, &key) == -1,
		    "accepted IP [%s]", bad_ip[i]);
	CHECK_INT(ca_leaf(ca, NULL, 0, &leaf, &key), -1);
	ca_free(ca);
}

/* Serials of many leaves are all different; DNS and IP keys are separate. */
static void
test_serials(void)
{
	struct ca *ca = load_fresh("serials");
	char *serials[300], name[64];
	struct ca_stats st;
	X509 *leaf, *ipleaf;
	EVP_PKEY *key;
	int i, j, dup = 0;

	if (ca == NULL) {
		CHECK(!"no CA");
		return;
	}
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "host%d.serial.test", i);
		serials[i] = NULL;
		if (ca_leaf(ca, name, 0, &leaf, &key) != 0) {
			CHECK(!"ca_leaf failed");
			continue;
		}
		serials[i] = serial_hex(leaf);
		X509_free(leaf);
		EVP_PKEY_free(key);
	}
	for (i = 0; i < 300; i++)
		for (j = i + 1; j < 300; j++)
			if (serials[i] && serials[j] &&
			    strcmp(serials[i], serials[j]) == 0)
				dup++;
	CHECK_INT(dup, 0);
	/* The CA's own serial is not among them either. */
	for (i = 0; i < 300; i++) {
		char *cs = serial_hex(ca_cert(ca));
		CHECK(serials[i] == NULL || strcmp(serials[i], cs) != 0);
		OPENSSL_free(cs);
		OPENSSL_free(serials[i]);
	}
	ca_get_stats(ca, &st);
	CHECK_INT(st.minted, 300);
	CHECK_INT(st.hits, 0);
	CHECK_INT(st.entries, 300);

	/* "192.0.2.1" as a DNS name and as an address: two leaves. */
	CHECK_INT(ca_leaf(ca, "192.0.2.1", 0, &leaf, &key), 0);
	EVP_PKEY_free(key);
	CHECK_INT(ca_leaf(ca, "192.0.2.1", 1, &ipleaf, &key), 0);
	EVP_PKEY_free(key);
	CHECK(leaf != ipleaf);
	CHECK_INT(X509_check_ip_asc(ipleaf, "192.0.2.1", 0), 1);
	CHECK_INT(X509_check_ip_asc(leaf, "192.0.2.1", 0), 0);
	X509_free(leaf);
	X509_free(ipleaf);
	ca_free(ca);
}

static int
serial_of(struct ca *ca, const char *name, char **out)
{
	X509 *leaf;
	EVP_PKEY *key;

	*out = NULL;
	if (ca_leaf(ca, name, 0, &leaf, &key) != 0)
		return -1;
	*out = serial_hex(leaf);
	X509_free(leaf);
	EVP_PKEY_free(key);
	return 0;
}

static void
test_lru(void)
{
	struct ca *ca = load_fresh("lru");
	static const char *names[] = { "a.test", "b.test", "c.test", "d.test" };
	char *s_a = NULL, *s_b = NULL, *s_x, *s_a2, *s_b2;
	struct ca_stats st;
	size_t i;

	if (ca == NULL) {
		CHECK(!"no CA");
		return;
	}
	ca_set_cache_max(ca, 4);
	for (i = 0; i < 4; i++) {
		CHECK_INT(serial_of(ca, names[i], &s_x), 0);
		if (i == 0)
			s_a = s_x;
		else if (i == 1)
			s_b = s_x;
		else
			OPENSSL_free(s_x);
	}
	CHECK_INT(serial_of(ca, "a.test", &s_a2), 0);	/* a is now newest */
	CHECK_STR(s_a2, s_a);
	OPENSSL_free(s_a2);
	CHECK_INT(serial_of(ca, "e.test", &s_x), 0);	/* evicts b, the oldest */
	OPENSSL_free(s_x);
	ca_get_stats(ca, &st);
	CHECK_INT(st.entries, 4);
	CHECK_INT(st.minted, 5);
	CHECK_INT(st.hits, 1);
	CHECK_INT(serial_of(ca, "a.test", &s_a2), 0);	/* still cached */
	CHECK_STR(s_a2, s_a);
	CHECK_INT(serial_of(ca, "b.test", &s_b2), 0);	/* minted afresh */
	CHECK(strcmp(s_b, s_b2) != 0);
	ca_get_stats(ca, &st);
	CHECK_INT(st.entries, 4);
	CHECK_INT(st.minted, 6);
	CHECK_INT(st.hits, 2);
	OPENSSL_free(s_a);
	OPENSSL_free(s_a2);
	OPENSSL_free(s_b);
	OPENSSL_free(s_b2);

	/* Shrinking the bound evicts at once; a bound of 1 still works. */
	ca_set_cache_max(ca, 1);
	ca_get_stats(ca, &st);
	CHECK_INT(st.entries, 1);
	CHECK_INT(serial_of(ca, "b.test", &s_b), 0);	/* the newest survived */
	ca_get_stats(ca, &st);
	CHECK_INT(st.minted, 6);
	OPENSSL_free(s_b);
	/* Growing it rehashes: everything inserted stays findable. */
	ca_set_cache_max(ca, 5000);
	for (i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "g%zu.test", i);
		CHECK_INT(serial_of(ca, name, &s_x), 0);
		OPENSSL_free(s_x);
	}
	ca_set_cache_max(ca, 100000);
	for (i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "g%zu.test", i);
		CHECK_INT(serial_of(ca, name, &s_x), 0);
		OPENSSL_free(s_x);
	}
	ca_get_stats(ca, &st);
	CHECK_INT(st.minted, 206);
	CHECK_INT(st.entries, 201);
	ca_free(ca);
}

/* An operator's own CA with another key type still issues P-256 leaves. */
static void
test_foreign_ca(void)
{
	static const struct {
		const char	*type;
		const char	*param;
		int		 sig_nid;
	} keys[] = {
		{ "RSA", NULL, NID_sha256WithRSAEncryption },
		{ "EC", "P-384", NID_ecdsa_with_SHA256 },
		{ "ED25519", NULL, NID_ED25519 },
	};
	char cert[512], key[512];
	const char *err;
	struct ca *ca;
	EVP_PKEY *k, *lk;
	X509 *x, *leaf;
	size_t i;

	CHECK_INT(mkdir(tpath(cert, sizeof(cert), "foreign"), 0700), 0);
	tpath(cert, sizeof(cert), "foreign/ca.crt");
	tpath(key, sizeof(key), "foreign/ca.key");
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (keys[i].param != NULL)
			k = EVP_PKEY_Q_keygen(NULL, NULL, keys[i].type,
			    keys[i].param);
		else if (strcmp(keys[i].type, "RSA") == 0)
			k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
		else
			k = EVP_PKEY_Q_keygen(NULL, NULL, keys[i].type);
		CHECK_MSG(k != NULL, "%s keygen", keys[i].type);
		if (k == NULL)
			continue;
		x = make_cert(k, "critical,CA:TRUE", "critical,keyCertSign",
		    86400 * 30);
		CHECK_INT(write_pem(cert, x, NULL, 0644), 0);
		CHECK_INT(write_pem(key, NULL, k, 0600), 0);
		ca = ca_load(cert, key, &err);
		CHECK_MSG(ca != NULL, "%s: %s", keys[i].type, ca ? "" : err);
		if (ca != NULL && ca_leaf(ca, "own.ca.test", 0, &leaf, &lk) == 0) {
			CHECK_MSG(verify_leaf(ca, leaf, "own.ca.test", 0), "%s",
			    keys[i].type);
			CHECK_INT(X509_get_signature_nid(leaf), keys[i].sig_nid);
			CHECK(EVP_PKEY_is_a(lk, "EC") &&
			    EVP_PKEY_get_bits(lk) == 256);
			X509_free(leaf);
			EVP_PKEY_free(lk);
		} else
			CHECK_MSG(0, "%s: no leaf", keys[i].type);
		ca_free(ca);
		X509_free(x);
		EVP_PKEY_free(k);
	}
}

/* ---------------------------------------------------------------- renewal */

static time_t fake_now;

static time_t
fake_clock(void)
{
	return fake_now;
}

static long
not_after_from(X509 *x, time_t base)
{
	struct tm tm;

	ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm);
	return (long)(timegm(&tm) - base);
}

static void
test_renewal(void)
{
	struct ca *ca = load_fresh("renew");
	time_t t0 = time(NULL);
	X509 *l1, *l2, *l3, *l4;
	EVP_PKEY *k;
	struct ca_stats st;
	char cert[512], key[512];
	const char *err;
	EVP_PKEY *cakey;
	X509 *short_ca;

	if (ca == NULL) {
		CHECK(!"no CA");
		return;
	}
	fake_now = t0;
	ca_set_clock(ca, fake_clock);
	CHECK_INT(ca_leaf(ca, "r.test", 0, &l1, &k), 0);
	EVP_PKEY_free(k);
	CHECK_INT(not_after_from(l1, t0), 7 * 86400);
	fake_now = t0 + 5 * 86400;		/* two days left: a hit */
	CHECK_INT(ca_leaf(ca, "r.test", 0, &l2, &k), 0);
	EVP_PKEY_free(k);
	CHECK(l2 == l1);
	fake_now = t0 + 6 * 86400 + 3600;	/* 23 hours left: renewed */
	CHECK_INT(ca_leaf(ca, "r.test", 0, &l3, &k), 0);
	EVP_PKEY_free(k);
	CHECK(l3 != l1);
	CHECK_INT(not_after_from(l3, fake_now), 7 * 86400);
	fake_now = t0 + 30 * 86400;		/* long expired: minted again */
	CHECK_INT(ca_leaf(ca, "r.test", 0, &l4, &k), 0);
	EVP_PKEY_free(k);
	CHECK(l4 != l3);
	CHECK_INT(not_after_from(l4, fake_now), 7 * 86400);
	ca_get_stats(ca, &st);
	CHECK_INT(st.minted, 3);
	CHECK_INT(st.hits, 1);
	CHECK_INT(st.entries, 1);
	X509_free(l1);
	X509_free(l2);
	X509_free(l3);
	X509_free(l4);
	ca_free(ca);

	/*
	 * A CA with two days left: leaves end with it, and a leaf that cannot
	 * get any longer is not re-minted on every call in its last day.
	 */
	tpath(cert, sizeof(cert), "renew/short.crt");
	tpath(key, sizeof(key), "renew/short.key");
	cakey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	short_ca = make_cert(cakey, "critical,CA:TRUE", "critical,keyCertSign",
	    2 * 86400);
	CHECK_INT(write_pem(cert, short_ca, NULL, 0644), 0);
	CHECK_INT(write_pem(key, NULL, cakey, 0600), 0);
	ca = ca_load(cert, key, &err);
	CHECK_MSG(ca != NULL, "%s", ca ? "" : err);
	if (ca != NULL) {
		fake_now = time(NULL);
		ca_set_clock(ca, fake_clock);
		CHECK_INT(ca_leaf(ca, "s.test", 0, &l1, &k), 0);
		EVP_PKEY_free(k);
		CHECK(ASN1_TIME_compare(X509_get0_notAfter(l1),
		    X509_get0_notAfter(short_ca)) == 0);
		CHECK(verify_leaf(ca, l1, "s.test", 0));
		fake_now += 86400 + 7200;	/* inside the last day */
		CHECK_INT(ca_leaf(ca, "s.test", 0, &l2, &k), 0);
		EVP_PKEY_free(k);
		CHECK(l2 == l1);
		fake_now += 86400;		/* past the CA: nothing to mint */
		CHECK_INT(ca_leaf(ca, "s.test", 0, &l3, &k), -1);
		CHECK_INT(ca_leaf(ca, "t.test", 0, &l3, &k), -1);
		ca_get_stats(ca, &st);
		CHECK_INT(st.minted, 1);
		CHECK_INT(st.entries, 0);
		X509_free(l1);
		X509_free(l2);
		ca_free(ca);
	}
	ERR_clear_error();
	X509_free(short_ca);
	EVP_PKEY_free(cakey);
}

/* ---------------------------------------------------------------- threads */

#define THREADS		4
#define NAMES		300
#define ROUNDS		3000

struct worker_arg {
	struct ca	*ca;
	int		 seed;
	int		 failures;
};

static void *
worker(void *p)
{
	struct worker_arg *w = p;
	char name[64];
	X509 *leaf;
	EVP_PKEY *key;
	unsigned int r = (unsigned int)w->seed;
	int i, k;

	for (i = 0; i < ROUNDS; i++) {
		r = r * 1103515245u + 12345u;
		k = (int)((r >> 8) % NAMES);
		snprintf(name, sizeof(name), "n%d.threads.test", k);
		if (ca_leaf(w->ca, name, 0, &leaf, &key) != 0) {
			w->failures++;
			continue;
		}
		if (X509_check_host(leaf, name, 0, 0, NULL) != 1 ||
		    X509_check_private_key(leaf, key) != 1)
			w->failures++;
		X509_free(leaf);
		EVP_PKEY_free(key);
	}
	return NULL;
}

static void
run_threads(struct ca *ca, int *failures)
{
	pthread_t t[THREADS];
	struct worker_arg w[THREADS];
	int i;

	*failures = 0;
	for (i = 0; i < THREADS; i++) {
		w[i].ca = ca;
		w[i].seed = i * 7919 + 1;
		w[i].failures = 0;
		if (pthread_create(&t[i], NULL, worker, &w[i]) != 0)
			w[i].failures = ROUNDS;
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		*failures += w[i].failures;
	}
}

static void
test_threads(void)
{
	struct ca *ca = load_fresh("threads");
	struct ca_stats st;
	int failures;

	if (ca == NULL) {
		CHECK(!"no CA");
		return;
	}
	/* Everything fits: each name minted exactly once, however many ask. */
	run_threads(ca, &failures);
	CHECK_INT(failures, 0);
	ca_get_stats(ca, &st);
	CHECK_INT(st.minted, NAMES);
	CHECK_INT(st.minted + st.hits, THREADS * ROUNDS);
	CHECK_INT(st.entries, NAMES);

	/* A small bound: eviction and minting race all the time. */
	ca_set_cache_max(ca, 16);
	run_threads(ca, &failures);
	CHECK_INT(failures, 0);
	ca_get_stats(ca, &st);
	CHECK(st.entries <= 16);
	CHECK(st.minted > NAMES);
	CHECK_INT(st.minted + st.hits, 2 * THREADS * ROUNDS);
	ca_free(ca);
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/sgca-XXXXXX",
	    base != NULL && *base != '\0' ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_init();
	test_load_refusals();
	test_leaves();
	test_serials();
	test_foreign_ca();
	test_lru();
	test_renewal();
	test_threads();
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
