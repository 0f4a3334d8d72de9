/*
 * The key keeper's side (keeper.h): what it opens, and how it answers.
 * Every request is checked by keeper_msg_parse(); anything malformed ends
 * the connection (the keeper exits and its monitor starts a fresh one).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#include "core/config.h"
#include "core/diag.h"
#include "core/log.h"
#include "core/policy.h"
#include "vault/ca.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/oauth2.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

struct keeper {
	const struct config	*cfg;
	struct ca		*ca;
	struct ca_audit_key	*akey;
	struct vault		*vault;
	char			(*bound)[VAULT_NAME_MAX + 1];	/* secrets policies name */
	size_t			 n_bound;
	/* ... of which these are oauth2 refresh_token entries: writable */
	char			(*writable)[VAULT_NAME_MAX + 1];
	size_t			 n_writable;
	int			 hello;		/* the leaf key is known */
	struct keeper_msg	*in, *out;	/* out: vault_secmem (may hold a value) */
};

static char keeper_errbuf[600];

static const char *
keeper_err(const char *what, const char *path, const char *why)
{
	snprintf(keeper_errbuf, sizeof(keeper_errbuf), "%s %s: %s", what, path,
	    why != NULL ? why : "cannot open");
	return keeper_errbuf;
}

/* The names of the secrets pol's credentials name: the only ones handed out. */
static int
keeper_bind(struct keeper *k, const struct policy *pol)
{
	const struct policy_credential *all;
	char (*v)[VAULT_NAME_MAX + 1];
	size_t i, j, n, m = 0;

	char (*w)[VAULT_NAME_MAX + 1];
	size_t mw = 0;

	all = policy_all_credentials(pol, &n);
	if ((v = calloc(n ? n : 1, sizeof(*v))) == NULL)
		return -1;
	if ((w = calloc(n ? n : 1, sizeof(*w))) == NULL) {
		free(v);
		return -1;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < m; j++)
			if (strcmp(v[j], all[i].secret) == 0)
				break;
		if (j == m)
			snprintf(v[m++], sizeof(v[0]), "%s", all[i].secret);
		/* Only a refresh_token grant's entry takes a rotated token. */
		if (all[i].kind != POLICY_CRED_OAUTH2 || all[i].oauth2 == NULL ||
		    all[i].oauth2->grant != POLICY_OAUTH2_REFRESH_TOKEN)
			continue;
		for (j = 0; j < mw; j++)
			if (strcmp(w[j], all[i].secret) == 0)
				break;
		if (j == mw)
			snprintf(w[mw++], sizeof(w[0]), "%s", all[i].secret);
	}
	free(k->bound);
	k->bound = v;
	k->n_bound = m;
	free(k->writable);
	k->writable = w;
	k->n_writable = mw;
	return 0;
}

static int
in_names(char (*v)[VAULT_NAME_MAX + 1], size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return 1;
	return 0;
}

static int
keeper_bound(const struct keeper *k, const char *name)
{
	return in_names(k->bound, k->n_bound, name);
}

static int
keeper_writable(const struct keeper *k, const char *name)
{
	return in_names(k->writable, k->n_writable, name);
}

static int
keeper_ca_open(struct keeper *k, const char **errstr)
{
	const struct config *cfg = k->cfg;
	const char *err = NULL;

	if (access(cfg->ca_cert, F_OK) == -1 && access(cfg->ca_key, F_OK) == -1) {
		if (ca_init(cfg->ca_cert, cfg->ca_key, 0, &err) == -1) {
			*errstr = keeper_err("cannot create the interception CA",
			    cfg->ca_cert, err);
			return -1;
		}
		log_info("created the interception CA: %s (sandboxes must trust "
		    "this certificate; the key is %s)", cfg->ca_cert, cfg->ca_key);
	}
	if ((k->ca = ca_load(cfg->ca_cert, cfg->ca_key, &err)) == NULL) {
		*errstr = keeper_err("interception CA", cfg->ca_cert, err);
		return -1;
	}
	return 0;
}

struct keeper *
keeper_open(const struct config *cfg, const struct policy *pol,
    const char **errstr)
{
	struct keeper *k;
	const char *err = NULL;

	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->in = malloc(sizeof(*k->in))) == NULL ||
	    (k->out = vault_secmem_alloc(sizeof(*k->out))) == NULL) {
		*errstr = "out of memory";
		keeper_free(k);
		return NULL;
	}
	k->cfg = cfg;
	if ((k->akey = ca_audit_key_open(cfg->audit_signing_key,
	    cfg->audit_public_key, 1, &err)) == NULL) {
		snprintf(keeper_errbuf, sizeof(keeper_errbuf),
		    "audit signing key: %s", err);
		*errstr = keeper_errbuf;
		goto fail;
	}
	if (keeper_ca_open(k, errstr) == -1)
		goto fail;
	if ((k->vault = vault_open(cfg->vault_db, cfg->vault_key_file, 1,
	    &err)) == NULL) {
		*errstr = keeper_err("vault", cfg->vault_db, err);
		goto fail;
	}
	if (keeper_bind(k, pol) == -1) {
		*errstr = "out of memory";
		goto fail;
	}
	return k;
fail:
	keeper_free(k);
	return NULL;
}

void
keeper_free(struct keeper *k)
{
	if (k == NULL)
		return;
	if (k->ca != NULL)
		ca_free(k->ca);
	ca_audit_key_free(k->akey);
	if (k->vault != NULL)
		vault_close(k->vault);
	free(k->bound);
	free(k->writable);
	free(k->in);
	if (k->out != NULL)
		vault_secmem_free(k->out);
	free(k);
}

static int
keeper_send(int fd, const struct keeper_msg *m)
{
	ssize_t n;

	do
		n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

void
keeper_send_error(int fd, const char *msg)
{
	struct keeper_msg *m;
	char text[KEEPER_ERROR_MAX + 1];
	size_t i, len;

	if ((m = malloc(sizeof(*m))) == NULL)
		return;
	snprintf(text, sizeof(text), "%s", msg != NULL && *msg ? msg :
	    "the key keeper cannot start");
	len = strlen(text);
	for (i = 0; i < len; i++)
		if (text[i] < 0x20 || text[i] > 0x7e)
			text[i] = '?';
	if (keeper_msg_make(m, KEEPER_ERROR, KEEPER_FAILED, 0, text, len,
	    NULL, 0) == 0)
		(void)keeper_send(fd, m);
	free(m);
}

static int
answer(struct keeper *k, int fd, const struct keeper_view *v,
    enum keeper_status st, const void *a, size_t alen, const void *b,
    size_t blen)
{
	int rc;

	if (st != KEEPER_OK)
		alen = blen = 0;
	if (keeper_msg_make(k->out, v->type, st, v->seq, a, alen, b,
	    blen) == -1)
		return -1;
	rc = keeper_send(fd, k->out);
	OPENSSL_cleanse(k->out, sizeof(*k->out));
	return rc;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static int
on_hello(struct keeper *k, int fd, const struct keeper_view *v)
{
	const unsigned char *p = v->data;
	uint8_t pub[KEEPER_AUDIT_PUB];
	unsigned char *der = NULL;
	EVP_PKEY *leaf;
	int len, rc;

	if ((leaf = d2i_PUBKEY(NULL, &p, (long)v->len)) == NULL ||
	    p != v->data + v->len || ca_set_leaf_public(k->ca, leaf) == -1) {
		EVP_PKEY_free(leaf);
		ERR_clear_error();
		log_warnx("keeper: the hello did not carry an EC leaf key");
		return -1;
	}
	EVP_PKEY_free(leaf);
	k->hello = 1;
	ca_audit_key_public(k->akey, pub);
	if ((len = i2d_X509(ca_cert(k->ca), &der)) <= 0 ||
	    len > KEEPER_CERT_MAX) {
		OPENSSL_free(der);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	rc = answer(k, fd, v, KEEPER_OK, pub, sizeof(pub), der, (size_t)len);
	OPENSSL_free(der);
	return rc;
}

static int
on_sign_leaf(struct keeper *k, int fd, const struct keeper_view *v)
{
	uint8_t na8[8];
	unsigned char *der = NULL;
	time_t na = 0;
	X509 *x;
	int len, rc;

	if ((x = ca_mint_leaf(k->ca, v->name, v->is_ip, &na)) == NULL)
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	len = i2d_X509(x, &der);
	X509_free(x);
	if (len <= 0 || len > KEEPER_CERT_MAX) {
		OPENSSL_free(der);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	put_be64(na8, (uint64_t)na);
	rc = answer(k, fd, v, KEEPER_OK, na8, sizeof(na8), der, (size_t)len);
	OPENSSL_free(der);
	return rc;
}

static int
on_sign_audit(struct keeper *k, int fd, const struct keeper_view *v)
{
	uint8_t sig[KEEPER_AUDIT_SIG];

	if (ca_audit_sign(k->akey, v->data, v->len, sig) == -1)
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	return answer(k, fd, v, KEEPER_OK, sig, sizeof(sig), NULL, 0);
}

struct has_ctx {
	const char	*name;
	int		 found;
};

static void
has_cb(const struct vault_entry_info *e, void *arg)
{
	struct has_ctx *h = arg;

	if (strcmp(e->name, h->name) == 0)
		h->found = 1;
}

static int
on_secret(struct keeper *k, int fd, const struct keeper_view *v)
{
	const char *names[1] = { v->name }, *err = NULL;
	const struct vault_secret *e;
	struct vault_snapshot *s;
	struct has_ctx h = { v->name, 0 };
	int rc;

	if (!keeper_bound(k, v->name)) {
		log_warnx("keeper: refused secret %s: no loaded policy binds it",
		    v->name);
		return answer(k, fd, v, KEEPER_DENIED, NULL, 0, NULL, 0);
	}
	if (vault_list(k->vault, has_cb, &h, &err) == -1) {
		log_warnx("keeper: vault: %s", err ? err : "cannot list");
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	if (!h.found)
		return answer(k, fd, v, KEEPER_MISSING, NULL, 0, NULL, 0);
	if ((s = vault_snapshot_load(k->vault, names, 1, &err)) == NULL ||
	    (e = vault_snapshot_find(s, v->name)) == NULL) {
		log_warnx("keeper: vault: %s", err ? err : "cannot load");
		if (s != NULL)
			vault_snapshot_unref(s);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	rc = answer(k, fd, v, KEEPER_OK, e->val, e->len, NULL, 0);
	vault_snapshot_unref(s);
	return rc;
}

/*
 * A rotated refresh token for an oauth2 credential's entry: written into
 * that entry's refresh_token line, the rest of it kept. Any other name is
 * refused: the network process can replace nothing else in the vault.
 */
static int
on_secret_put(struct keeper *k, int fd, const struct keeper_view *v)
{
	const char *names[1] = { v->name }, *err = NULL;
	const struct vault_secret *e;
	struct vault_snapshot *s;
	unsigned char *out;
	size_t cap = VAULT_VALUE_MAX;
	long n;
	int rc;

	if (!keeper_writable(k, v->name)) {
		log_warnx("keeper: refused to write %s: not the entry of a "
		    "loaded policy's oauth2 credential (grant refresh_token)",
		    v->name);
		return answer(k, fd, v, KEEPER_DENIED, NULL, 0, NULL, 0);
	}
	if ((s = vault_snapshot_load(k->vault, names, 1, &err)) == NULL ||
	    (e = vault_snapshot_find(s, v->name)) == NULL) {
		log_warnx("keeper: vault: %s", err ? err : "cannot load");
		if (s != NULL)
			vault_snapshot_unref(s);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	if ((out = vault_secmem_alloc(cap)) == NULL) {
		vault_snapshot_unref(s);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	n = oauth2_entry_set_refresh(e->val, e->len, (const char *)v->data,
	    v->len, out, cap);
	vault_snapshot_unref(s);
	if (n <= 0) {
		vault_secmem_free(out);
		log_warnx("keeper: %s is not an oauth2 entry (client_id=, "
		    "client_secret=, refresh_token= lines): not written",
		    v->name);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	rc = vault_set(k->vault, v->name, out, (size_t)n, VAULT_SET_ROTATE,
	    &err);
	vault_secmem_free(out);
	if (rc == -1) {
		log_warnx("keeper: vault: %s", err ? err : "cannot write");
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	log_info("keeper: stored the rotated refresh token of %s", v->name);
	return answer(k, fd, v, KEEPER_OK, NULL, 0, NULL, 0);
}

static uint64_t
stamp_of(const char *path)
{
	struct stat st;

	if (stat(path, &st) == -1)
		return 0;
	return ((uint64_t)st.st_mtim.tv_sec * 1000000000u +
	    (uint64_t)st.st_mtim.tv_nsec) ^ ((uint64_t)st.st_size *
	    0x9e3779b97f4a7c15ull) ^ (uint64_t)st.st_ino << 32;
}

static int
on_vault_stamp(struct keeper *k, int fd, const struct keeper_view *v)
{
	char wal[4096];
	uint8_t b[8];
	uint64_t s;

	/* WAL mode: a commit changes the -wal file first. */
	snprintf(wal, sizeof(wal), "%s-wal", k->cfg->vault_db);
	s = stamp_of(k->cfg->vault_db) * 31 + stamp_of(wal);
	put_be64(b, s);
	return answer(k, fd, v, KEEPER_OK, b, sizeof(b), NULL, 0);
}

/* Read the policies again, as the gateway's reload does. */
static int
on_policy(struct keeper *k, int fd, const struct keeper_view *v)
{
	struct config *ncfg;
	struct policy *npol;
	struct diag d;
	uint8_t b[4];

	diag_init(&d);
	ncfg = config_load(k->cfg->file, &d);
	npol = ncfg != NULL ? policy_load(ncfg, &d) : NULL;
	diag_free(&d);
	if (npol == NULL || keeper_bind(k, npol) == -1) {
		log_warnx("keeper: the policies do not load: the secrets bound "
		    "before stay the ones handed out");
		if (npol != NULL)
			policy_unref(npol);
		config_free(ncfg);
		return answer(k, fd, v, KEEPER_FAILED, NULL, 0, NULL, 0);
	}
	policy_unref(npol);
	config_free(ncfg);
	b[0] = (uint8_t)(k->n_bound >> 24);
	b[1] = (uint8_t)(k->n_bound >> 16);
	b[2] = (uint8_t)(k->n_bound >> 8);
	b[3] = (uint8_t)k->n_bound;
	return answer(k, fd, v, KEEPER_OK, b, sizeof(b), NULL, 0);
}

int
keeper_serve(struct keeper *k, int fd)
{
	struct keeper_view v;
	ssize_t n;
	int rc;

	for (;;) {
		n = recv(fd, k->in, sizeof(*k->in), MSG_TRUNC);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == 0)
			return 0;
		if (n == -1) {
			log_warn("keeper: recv");
			return -1;
		}
		if (keeper_msg_parse(k->in, (size_t)n, 0, &v) == -1 ||
		    (!k->hello && v.type != KEEPER_HELLO)) {
			log_warnx("keeper: a malformed request: closing");
			return -1;
		}
		switch (v.type) {
		case KEEPER_HELLO:
			rc = on_hello(k, fd, &v);
			break;
		case KEEPER_SIGN_LEAF:
			rc = on_sign_leaf(k, fd, &v);
			break;
		case KEEPER_SIGN_AUDIT:
			rc = on_sign_audit(k, fd, &v);
			break;
		case KEEPER_SECRET:
			rc = on_secret(k, fd, &v);
			break;
		case KEEPER_VAULT_STAMP:
			rc = on_vault_stamp(k, fd, &v);
			break;
		case KEEPER_POLICY:
			rc = on_policy(k, fd, &v);
			break;
		case KEEPER_SECRET_PUT:
			rc = on_secret_put(k, fd, &v);
			break;
		default:
			rc = -1;
			break;
		}
		if (rc == -1)
			return -1;
	}
}
