/*
 * Unit tests of the key keeper (src/vault/keeper.c, keeper_client.c,
 * keeper_msg.c) over a real socketpair with the keeper on a thread: the
 * hello, leaves signed over the client's own key, audit signatures, only
 * the secrets a loaded policy binds (and again after the policy changes),
 * the vault stamp, and a keeper that ends the connection on anything
 * malformed.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "check.h"
#include "core/config.h"
#include "core/diag.h"
#include "core/policy.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

static char tmpdir[256];

static int
rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void
write_file(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	if ((f = fopen(path, "w")) == NULL) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void
write_policy(const char *secret2)
{
	char text[1024];

	snprintf(text, sizeof(text),
	    "policies:\n"
	    "  - name: p\n"
	    "    allow: [ { host: api.example.com, tls: intercept } ]\n"
	    "    credentials: [c1, c2%s]\n"
	    "credentials:\n"
	    "  - name: c1\n    secret: bound-secret\n    hosts: [api.example.com]\n"
	    "  - name: c2\n    secret: absent-secret\n    hosts: [api.example.com]\n"
	    "%s%s%s",
	    secret2 ? ", c3" : "",
	    secret2 ? "  - name: c3\n    secret: " : "",
	    secret2 ? secret2 : "",
	    secret2 ? "\n    hosts: [api.example.com]\n" : "");
	write_file("policies/p.yaml", text);
}

struct kthread {
	pthread_t	 t;
	struct keeper	*k;
	int		 fd;
	int		 rc;
};

static void *
kthread_main(void *arg)
{
	struct kthread *kt = arg;

	kt->rc = keeper_serve(kt->k, kt->fd);
	return NULL;
}

static int
kthread_start(struct kthread *kt, const struct config *cfg,
    const struct policy *pol, int *client_fd)
{
	const char *err = NULL;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return -1;
	if ((kt->k = keeper_open(cfg, pol, &err)) == NULL) {
		fprintf(stderr, "keeper_open: %s\n", err);
		return -1;
	}
	kt->fd = sv[1];
	*client_fd = sv[0];
	return pthread_create(&kt->t, NULL, kthread_main, kt) == 0 ? 0 : -1;
}

static void
kthread_stop(struct kthread *kt)
{
	pthread_join(kt->t, NULL);
	close(kt->fd);
	keeper_free(kt->k);
}

static int
send_raw(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static void
test_leaves_and_signatures(struct keeper_client *kc)
{
	EVP_PKEY *ca_pub, *apub;
	EVP_MD_CTX *md;
	uint8_t sig[64];
	const uint8_t msg[] = "chain head 42";
	time_t na = 0;
	X509 *x, *cafile;
	FILE *f;
	char path[512];

	snprintf(path, sizeof(path), "%s/ca.crt", tmpdir);
	f = fopen(path, "r");
	cafile = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	CHECK(cafile != NULL && X509_cmp(cafile, keeper_client_ca_cert(kc)) == 0);
	X509_free(cafile);

	x = keeper_client_sign_leaf(kc, "api.example.com", 0, &na);
	CHECK(x != NULL);
	if (x != NULL) {
		ca_pub = X509_get0_pubkey(keeper_client_ca_cert(kc));
		CHECK(X509_verify(x, ca_pub) == 1);
		/* Over the client's own leaf key, which never left it. */
		CHECK(X509_check_private_key(x, keeper_client_leaf_key(kc)) == 1);
		CHECK(X509_check_host(x, "api.example.com", 0, 0, NULL) == 1);
		CHECK(X509_check_host(x, "other.example.com", 0, 0, NULL) != 1);
		CHECK(na > time(NULL));
		X509_free(x);
	}
	x = keeper_client_sign_leaf(kc, "198.19.0.7", 1, &na);
	CHECK(x != NULL && X509_check_ip_asc(x, "198.19.0.7", 0) == 1);
	X509_free(x);
	/* A name that is not one: the keeper refuses, and stays up. */
	x = keeper_client_sign_leaf(kc, "a..b", 0, &na);
	CHECK(x == NULL);
	CHECK(keeper_client_up(kc));

	CHECK(keeper_client_sign_audit(kc, msg, sizeof(msg), sig) == 0);
	apub = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL,
	    keeper_client_audit_pub(kc), 32);
	md = EVP_MD_CTX_new();
	CHECK(apub != NULL && md != NULL &&
	    EVP_DigestVerifyInit(md, NULL, NULL, NULL, apub) == 1 &&
	    EVP_DigestVerify(md, sig, sizeof(sig), msg, sizeof(msg)) == 1);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(apub);
}

static void
test_secrets(struct keeper_client *kc, const struct config *cfg)
{
	const char *names[] = { "bound-secret", "other-secret", "absent-secret",
	    "missing-unbound" };
	const struct vault_secret *e;
	struct vault_snapshot *s;
	struct vault *v;
	const char *err = NULL;
	uint64_t st1 = 0, st2 = 0;
	int st[4];

	s = keeper_client_secrets(kc, names, 4, st);
	CHECK(s != NULL);
	CHECK_INT(st[0], KEEPER_OK);
	CHECK_INT(st[1], KEEPER_DENIED);	/* in the vault, bound by no policy */
	CHECK_INT(st[2], KEEPER_MISSING);	/* bound, not in the vault */
	CHECK_INT(st[3], KEEPER_DENIED);
	if (s != NULL) {
		e = vault_snapshot_find(s, "bound-secret");
		CHECK(e != NULL && e->len == 9 && memcmp(e->val, "sk-bound!", 9) == 0);
		CHECK(!vault_snapshot_has(s, "other-secret"));
		vault_snapshot_unref(s);
	}

	/* A rotation changes the stamp. */
	CHECK(keeper_client_vault_stamp(kc, &st1) == 0);
	v = vault_open(cfg->vault_db, cfg->vault_key_file, 0, &err);
	CHECK(v != NULL && vault_set(v, "bound-secret", "sk-rotated", 10,
	    VAULT_SET_ROTATE, &err) == 0);
	if (v != NULL)
		vault_close(v);
	CHECK(keeper_client_vault_stamp(kc, &st2) == 0 && st1 != st2);
	s = keeper_client_secrets(kc, names, 1, st);
	e = s != NULL ? vault_snapshot_find(s, "bound-secret") : NULL;
	CHECK(e != NULL && e->len == 10 && memcmp(e->val, "sk-rotated", 10) == 0);
	if (s != NULL)
		vault_snapshot_unref(s);

	/* A policy that binds other-secret: handed out after the keeper reads it. */
	write_policy("other-secret");
	s = keeper_client_secrets(kc, names + 1, 1, st);
	CHECK(st[0] == KEEPER_DENIED);
	if (s != NULL)
		vault_snapshot_unref(s);
	CHECK(keeper_client_policy(kc) == 0);
	s = keeper_client_secrets(kc, names + 1, 1, st);
	CHECK_INT(st[0], KEEPER_OK);
	CHECK(s != NULL && vault_snapshot_has(s, "other-secret"));
	if (s != NULL)
		vault_snapshot_unref(s);
	/* A policy that does not load: the keeper keeps what it had. */
	write_file("policies/p.yaml", "policies: [ { name: p, allow: nope } ]\n");
	CHECK(keeper_client_policy(kc) == -1);
	CHECK(keeper_client_up(kc));
	s = keeper_client_secrets(kc, names + 1, 1, st);
	CHECK_INT(st[0], KEEPER_OK);
	if (s != NULL)
		vault_snapshot_unref(s);
	write_policy(NULL);
}

/* Each way a request can be wrong ends the keeper's connection. */
static void
test_malformed(const struct config *cfg, const struct policy *pol)
{
	struct keeper_msg *m = calloc(1, sizeof(*m));
	struct kthread kt;
	int fd, i;

	for (i = 0; i < 5 && m != NULL; i++) {
		if (kthread_start(&kt, cfg, pol, &fd) == -1) {
			CHECK(0);
			break;
		}
		memset(m, 0, sizeof(*m));
		switch (i) {
		case 0:		/* a request before the hello */
			keeper_msg_make(m, KEEPER_SECRET, KEEPER_OK, 1,
			    "bound-secret", 12, NULL, 0);
			send_raw(fd, m, sizeof(*m));
			break;
		case 1:		/* one byte short */
			keeper_msg_make(m, KEEPER_HELLO, KEEPER_OK, 1, "x", 1,
			    NULL, 0);
			send_raw(fd, m, sizeof(*m) - 1);
			break;
		case 2:		/* a length past the body */
			keeper_msg_make(m, KEEPER_HELLO, KEEPER_OK, 1, "x", 1,
			    NULL, 0);
			m->len = KEEPER_BODY_MAX + 1;
			send_raw(fd, m, sizeof(*m));
			break;
		case 3:		/* a hello whose key is not a key */
			keeper_msg_make(m, KEEPER_HELLO, KEEPER_OK, 1,
			    "0123456789abcdef0123", 20, NULL, 0);
			send_raw(fd, m, sizeof(*m));
			break;
		case 4:		/* an answer sent as a request */
			keeper_msg_make(m, KEEPER_ERROR, KEEPER_FAILED, 1,
			    "boo", 3, NULL, 0);
			send_raw(fd, m, sizeof(*m));
			break;
		}
		close(fd);
		kthread_stop(&kt);
		CHECK_MSG(kt.rc == -1, "case %d: keeper_serve returned %d", i,
		    kt.rc);
	}
	free(m);
}

static void
test_parse(void)
{
	struct keeper_msg *m = calloc(1, sizeof(*m));
	struct keeper_view v;

	if (m == NULL)
		return;
	keeper_msg_make(m, KEEPER_SIGN_LEAF, KEEPER_OK, 7, "\x00" "a.example",
	    10, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 0, &v) == 0 && v.seq == 7 &&
	    strcmp(v.name, "a.example") == 0 && v.is_ip == 0);
	CHECK(keeper_msg_parse(m, sizeof(*m) - 1, 0, &v) == -1);
	CHECK(keeper_msg_parse(m, sizeof(*m) + 1, 0, &v) == -1);
	m->body[3] = '/';
	CHECK(keeper_msg_parse(m, sizeof(*m), 0, &v) == -1);
	keeper_msg_make(m, KEEPER_SIGN_LEAF, KEEPER_OK, 7, "\x02" "a", 2, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 0, &v) == -1);	/* flag not 0/1 */
	keeper_msg_make(m, KEEPER_SECRET, KEEPER_OK, 1, "../etc", 6, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 0, &v) == -1);
	keeper_msg_make(m, KEEPER_SECRET, KEEPER_DENIED, 1, "x", 1, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 1, &v) == -1);	/* a refusal has no body */
	keeper_msg_make(m, KEEPER_SIGN_AUDIT, KEEPER_OK, 1, "sig", 3, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 1, &v) == -1);	/* not 64 bytes */
	keeper_msg_make(m, KEEPER_ERROR, KEEPER_FAILED, 0, "bad\nline", 8, NULL, 0);
	CHECK(keeper_msg_parse(m, sizeof(*m), 1, &v) == -1);
	CHECK(keeper_msg_make(m, KEEPER_SECRET, KEEPER_OK, 1, "x",
	    KEEPER_BODY_MAX + 1, NULL, 0) == -1);
	free(m);
}

int
main(void)
{
	struct config *cfg;
	struct policy *pol;
	struct keeper_client *kc;
	struct kthread kt;
	struct vault *v;
	struct diag d;
	const char *err = NULL;
	char path[512], cfgtext[2048];
	int fd;

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_keeper.XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/policies", tmpdir);
	mkdir(path, 0700);
	write_policy(NULL);
	snprintf(cfgtext, sizeof(cfgtext),
	    "state_dir: %1$s/var\n"
	    "policies: [%1$s/policies]\n"
	    "ca: { cert: %1$s/ca.crt, key: %1$s/ca.key }\n"
	    "vault: { db: %1$s/vault.db, key_file: %1$s/vault.key }\n"
	    "audit: { db: %1$s/audit.db }\n", tmpdir);
	write_file("sandgate.yaml", cfgtext);
	snprintf(path, sizeof(path), "%s/sandgate.yaml", tmpdir);
	diag_init(&d);
	cfg = config_load(path, &d);
	pol = cfg != NULL ? policy_load(cfg, &d) : NULL;
	if (pol == NULL) {
		diag_print(&d, stderr);
		return 1;
	}
	diag_free(&d);
	v = vault_open(cfg->vault_db, cfg->vault_key_file, 1, &err);
	CHECK(v != NULL &&
	    vault_set(v, "bound-secret", "sk-bound!", 9, VAULT_SET_NEW, &err) == 0 &&
	    vault_set(v, "other-secret", "sk-other!", 9, VAULT_SET_NEW, &err) == 0);
	if (v != NULL)
		vault_close(v);

	test_parse();
	if (kthread_start(&kt, cfg, pol, &fd) == 0) {
		kc = keeper_client_new(fd, &err);
		CHECK_MSG(kc != NULL, "%s", err);
		if (kc != NULL) {
			CHECK(keeper_client_up(kc));
			test_leaves_and_signatures(kc);
			test_secrets(kc, cfg);
			/* The keeper goes: every call fails, the client is down. */
			shutdown(kt.fd, SHUT_RDWR);
			CHECK(keeper_client_sign_leaf(kc, "b.example.com", 0,
			    &(time_t){ 0 }) == NULL);
			CHECK(!keeper_client_up(kc));
			keeper_client_free(kc);
		}
		kthread_stop(&kt);
	} else
		CHECK(0);
	test_malformed(cfg, pol);

	policy_unref(pol);
	config_free(cfg);
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
