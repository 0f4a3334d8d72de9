/*
 * Unit tests of the audit signing key (src/vault/ca_audit.c): the files and
 * their modes, what open refuses (a readable key, a public half that does
 * not match, a public half without its key, another key type), and that
 * a signature verifies with the public key file the way verify reads it.
 */
#include <sys/stat.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "check.h"
#include "audit/audit_query.h"
#include "vault/ca.h"

static char tmpdir[256];

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static const char *
tpath(const char *name)
{
	static char buf[8][512];
	static int n;
	char *p = buf[n++ % 8];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

static int
file_mode(const char *path)
{
	struct stat st;

	if (stat(path, &st) == -1)
		return -1;
	return (int)(st.st_mode & 07777);
}

static int
copy_file(const char *from, const char *to)
{
	char buf[4096];
	FILE *in, *out;
	size_t n;

	if ((in = fopen(from, "rb")) == NULL)
		return -1;
	if ((out = fopen(to, "wb")) == NULL) {
		fclose(in);
		return -1;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		(void)fwrite(buf, 1, n, out);
	fclose(in);
	return fclose(out) == 0 ? 0 : -1;
}

/* open must fail with a message that contains want. */
static void
refused(const char *key, const char *pub, int create, const char *want)
{
	struct ca_audit_key *k;
	const char *err = NULL;

	k = ca_audit_key_open(key, pub, create, &err);
	CHECK_MSG(k == NULL, "%s: opened", want);
	CHECK_MSG(err != NULL && strstr(err, want) != NULL, "want %s, got %s",
	    want, err ? err : "(null)");
	ca_audit_key_free(k);
}

static void
test_files(void)
{
	const char *key = tpath("a/certs/audit.key");
	const char *pub = tpath("a/certs/audit.pub");
	struct ca_audit_key *k;
	const char *err = NULL;

	CHECK(ca_audit_key_init(key, pub, &err) == 0);
	CHECK_INT(file_mode(key), 0600);
	CHECK_INT(file_mode(pub), 0644);
	CHECK_INT(file_mode(tpath("a/certs")), 0700);
	/* Never over an existing key. */
	CHECK(ca_audit_key_init(key, pub, &err) == -1 &&
	    strstr(err, "File exists") != NULL);
	CHECK(ca_audit_key_init(key, key, &err) == -1);
	k = ca_audit_key_open(key, pub, 0, &err);
	CHECK(k != NULL);
	ca_audit_key_free(k);

	/* First start: both made; the public half alone is rewritten. */
	key = tpath("b/audit.key");
	pub = tpath("b/audit.pub");
	refused(key, pub, 0, "cannot open audit signing key");
	k = ca_audit_key_open(key, pub, 1, &err);
	CHECK(k != NULL && file_mode(key) == 0600);
	ca_audit_key_free(k);
	CHECK(unlink(pub) == 0);
	refused(key, pub, 0, "cannot open audit public key");
	k = ca_audit_key_open(key, pub, 1, &err);
	CHECK(k != NULL && file_mode(pub) == 0644);
	ca_audit_key_free(k);

	/* A key others can read, a public key of another pair, no key. */
	CHECK(chmod(key, 0640) == 0);
	refused(key, pub, 1, "readable by group or others");
	CHECK(chmod(key, 0604) == 0);
	refused(key, pub, 0, "readable by group or others");
	CHECK(chmod(key, 0600) == 0);
	CHECK(copy_file(tpath("a/certs/audit.pub"), pub) == 0);
	refused(key, pub, 1, "is not the public half");
	CHECK(unlink(key) == 0);
	refused(key, pub, 1, "restore the key");
	CHECK(access(key, F_OK) == -1);
}

static void
test_other_key_type(void)
{
	const char *key = tpath("ec.key");
	const char *pub = tpath("ec.pub");
	EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	FILE *f;

	CHECK(ec != NULL);
	if ((f = fopen(key, "w")) != NULL) {
		fchmod(fileno(f), 0600);
		PEM_write_PrivateKey(f, ec, NULL, NULL, 0, NULL, NULL);
		fclose(f);
	}
	if ((f = fopen(pub, "w")) != NULL) {
		PEM_write_PUBKEY(f, ec);
		fclose(f);
	}
	refused(key, pub, 1, "not an Ed25519 key");
	EVP_PKEY_free(ec);
}

static void
test_sign(void)
{
	const char *key = tpath("s/audit.key");
	const char *pub = tpath("s/audit.pub");
	const uint8_t msg[] = "sandgate-audit-checkpoint-v1\nthrough=1\n";
	struct ca_audit_key *k;
	uint8_t sig[64], raw[32];
	char err[256], id1[AUDIT_KEYID_HEX + 1], id2[AUDIT_KEYID_HEX + 1];
	const char *e = NULL;
	EVP_PKEY *p;

	k = ca_audit_key_open(key, pub, 1, &e);
	CHECK(k != NULL);
	if (k == NULL)
		return;
	CHECK(ca_audit_sign(k, msg, sizeof(msg) - 1, sig) == 0);
	p = audit_pubkey_read(pub, err, sizeof(err));
	CHECK_MSG(p != NULL, "%s", err);
	CHECK(audit_sig_verify(p, msg, sizeof(msg) - 1, sig) == 1);
	CHECK(audit_sig_verify(p, msg, sizeof(msg) - 2, sig) == 0);
	sig[10] ^= 1;
	CHECK(audit_sig_verify(p, msg, sizeof(msg) - 1, sig) == 0);
	/* The key id from the raw key and from the file agree. */
	ca_audit_key_public(k, raw);
	CHECK(audit_key_id(raw, id1) == 0 && audit_pubkey_id(p, id2) == 0);
	CHECK_STR(id1, id2);
	CHECK_INT(strlen(id1), AUDIT_KEYID_HEX);
	/* A private key file is not a public key file. */
	CHECK(audit_pubkey_read(key, err, sizeof(err)) == NULL);
	CHECK(audit_pubkey_read(tpath("nope.pub"), err, sizeof(err)) == NULL &&
	    strstr(err, "cannot open") != NULL);
	CHECK(ca_audit_sign(NULL, msg, 1, sig) == -1);
	EVP_PKEY_free(p);
	ca_audit_key_free(k);
}

int
main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/sgauditkey-XXXXXX",
	    base != NULL && *base != '\0' ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_files();
	test_other_key_type();
	test_sign();
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
