/*
 * The network process's side of the key keeper (keeper.h): one request at
 * a time under a mutex, each answer read within a deadline and checked by
 * keeper_msg_parse(). An answer carrying a secret lands in wiped memory
 * and is copied once, into the snapshot, before that memory is wiped.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "core/log.h"
#include "core/stats.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define KC_HELLO_MS	10000	/* the first start may create the CA and keys */
#define KC_CALL_MS	3000

/* keeper_client_new's error outlives the client (start-up: one thread). */
static char kc_errbuf[KEEPER_ERROR_MAX + 1];

struct keeper_client {
	pthread_mutex_t	 mtx;		/* one request at a time; guards all below */
	int		 fd;		/* -1: lost */
	atomic_int	 up;
	uint32_t	 seq;
	struct keeper_msg *out;
	struct keeper_msg *in;		/* vault_secmem: answers may hold a value */
	EVP_PKEY	*leaf;
	X509		*ca_cert;
	uint8_t		 audit_pub[KEEPER_AUDIT_PUB];
	char		 err[KEEPER_ERROR_MAX + 1];
	struct sg_hist	 rtt;		/* answered requests, send to answer */
};

static int64_t
us_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000 +
	    (t.tv_nsec - t0->tv_nsec) / 1000;
}

static long
ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) /
	    1000000;
}

/* Needs kc->mtx. */
static void
kc_drop(struct keeper_client *kc, const char *why)
{
	if (kc->fd != -1) {
		close(kc->fd);
		kc->fd = -1;
	}
	if (atomic_exchange(&kc->up, 0) == 1)
		log_warnx("key keeper lost (%s): interceptions and credential "
		    "swaps are refused (keeper-unavailable) until it is back",
		    why);
}

/*
 * A keeper that could not start said why and exited, perhaps before our
 * request went out: its KEEPER_ERROR is still queued on the socket.
 */
static void
kc_error_left(struct keeper_client *kc)
{
	struct keeper_view v;
	ssize_t n;

	n = recv(kc->fd, kc->in, sizeof(*kc->in), MSG_TRUNC | MSG_DONTWAIT);
	if (n == -1 && errno == ECONNRESET)	/* the error goes first, once */
		n = recv(kc->fd, kc->in, sizeof(*kc->in), MSG_TRUNC |
		    MSG_DONTWAIT);
	if (n > 0 && keeper_msg_parse(kc->in, (size_t)n, 1, &v) == 0 &&
	    v.type == KEEPER_ERROR)
		snprintf(kc->err, sizeof(kc->err), "%.*s", (int)v.len,
		    (const char *)v.data);
}

/*
 * One request and its answer, kc->mtx held; *v points into kc->in. An
 * answer to an earlier request that timed out is skipped. -1 when there
 * is no keeper, it broke the protocol or did not answer in time (then it
 * is dropped: a keeper that hangs is as good as gone).
 */
static int
kc_call(struct keeper_client *kc, enum keeper_type type, const void *a,
    size_t alen, const void *b, size_t blen, struct keeper_view *v,
    long timeout_ms)
{
	struct timespec t0;
	struct pollfd pfd;
	ssize_t n;
	long left;
	uint32_t seq;

	if (kc->fd == -1)
		return -1;
	seq = ++kc->seq;
	if (keeper_msg_make(kc->out, type, KEEPER_OK, seq, a, alen, b,
	    blen) == -1)
		return -1;
	do
		n = send(kc->fd, kc->out, sizeof(*kc->out), MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	if (n != (ssize_t)sizeof(*kc->out)) {
		kc_error_left(kc);
		kc_drop(kc, kc->err[0] != '\0' ? kc->err : n == -1 ?
		    strerror(errno) : "short send");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if ((left = timeout_ms - ms_since(&t0)) <= 0) {
			kc_drop(kc, "no answer in time");
			return -1;
		}
		pfd.fd = kc->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			kc_drop(kc, strerror(errno));
			return -1;
		}
		if (pfd.revents == 0)
			continue;
		n = recv(kc->fd, kc->in, sizeof(*kc->in), MSG_TRUNC |
		    MSG_DONTWAIT);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			/*
			 * A keeper that exits with our request unread leaves
			 * ECONNRESET, reported once, ahead of what it queued.
			 */
			if (n == -1 && errno == ECONNRESET)
				kc_error_left(kc);
			kc_drop(kc, kc->err[0] != '\0' ? kc->err : n == 0 ?
			    "it exited" : strerror(errno));
			return -1;
		}
		if (keeper_msg_parse(kc->in, (size_t)n, 1, v) == -1) {
			OPENSSL_cleanse(kc->in, sizeof(*kc->in));
			kc_drop(kc, "a malformed answer");
			return -1;
		}
		if (v->type == KEEPER_ERROR) {
			snprintf(kc->err, sizeof(kc->err), "%.*s",
			    (int)v->len, (const char *)v->data);
			kc_drop(kc, kc->err);
			return -1;
		}
		if (v->seq != seq)
			continue;	/* the answer to a request given up on */
		if (v->type != type) {
			kc_drop(kc, "an answer to another request");
			return -1;
		}
		sg_hist_observe(&kc->rtt, us_since(&t0));
		return 0;
	}
}

/* Needs kc->mtx. The hello over kc->fd; on the first one, keep the CA cert. */
static int
kc_hello(struct keeper_client *kc, long timeout_ms, const char **errstr)
{
	struct keeper_view v;
	const unsigned char *p;
	unsigned char *der = NULL;
	X509 *cert;
	int len;

	if ((len = i2d_PUBKEY(kc->leaf, &der)) <= 0) {
		*errstr = "cannot encode the leaf key";
		return -1;
	}
	if (kc_call(kc, KEEPER_HELLO, der, (size_t)len, NULL, 0, &v,
	    timeout_ms) == -1) {
		OPENSSL_free(der);
		*errstr = kc->err[0] != '\0' ? kc->err :
		    "the key keeper did not answer";
		return -1;
	}
	OPENSSL_free(der);
	if (v.status != KEEPER_OK) {
		*errstr = "the key keeper refused the leaf key";
		return -1;
	}
	p = v.data;
	if ((cert = d2i_X509(NULL, &p, (long)v.len)) == NULL ||
	    p != v.data + v.len) {
		X509_free(cert);
		ERR_clear_error();
		*errstr = "the key keeper sent a bad CA certificate";
		return -1;
	}
	if (kc->ca_cert != NULL && X509_cmp(kc->ca_cert, cert) != 0) {
		X509_free(cert);
		*errstr = "the CA certificate changed under a running gateway: "
		    "restart sandgate serve to use it";
		return -1;
	}
	if (kc->ca_cert == NULL)
		kc->ca_cert = cert;
	else
		X509_free(cert);
	memcpy(kc->audit_pub, v.audit_pub, sizeof(kc->audit_pub));
	return 0;
}

struct keeper_client *
keeper_client_new(int fd, const char **errstr)
{
	struct keeper_client *kc;

	if ((kc = calloc(1, sizeof(*kc))) == NULL) {
		close(fd);
		*errstr = "out of memory";
		return NULL;
	}
	pthread_mutex_init(&kc->mtx, NULL);
	kc->fd = fd;
	atomic_init(&kc->up, 0);
	if ((kc->out = malloc(sizeof(*kc->out))) == NULL ||
	    (kc->in = vault_secmem_alloc(sizeof(*kc->in))) == NULL) {
		*errstr = "out of memory";
		goto fail;
	}
	if ((kc->leaf = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL) {
		ERR_clear_error();
		*errstr = "cannot generate the leaf key";
		goto fail;
	}
	pthread_mutex_lock(&kc->mtx);
	if (kc_hello(kc, KC_HELLO_MS, errstr) == -1) {
		pthread_mutex_unlock(&kc->mtx);
		/* *errstr may point into kc, which is about to go. */
		snprintf(kc_errbuf, sizeof(kc_errbuf), "%s", *errstr);
		*errstr = kc_errbuf;
		goto fail;
	}
	pthread_mutex_unlock(&kc->mtx);
	atomic_store(&kc->up, 1);
	return kc;
fail:
	keeper_client_free(kc);
	return NULL;
}

void
keeper_client_free(struct keeper_client *kc)
{
	if (kc == NULL)
		return;
	if (kc->fd != -1)
		close(kc->fd);
	free(kc->out);
	if (kc->in != NULL)
		vault_secmem_free(kc->in);
	EVP_PKEY_free(kc->leaf);
	X509_free(kc->ca_cert);
	pthread_mutex_destroy(&kc->mtx);
	free(kc);
}

struct sg_hist *
keeper_client_rtt(struct keeper_client *kc)
{
	return kc != NULL ? &kc->rtt : NULL;
}

int
keeper_client_up(struct keeper_client *kc)
{
	return atomic_load_explicit(&kc->up, memory_order_acquire);
}

int
keeper_client_adopt(struct keeper_client *kc, int fd)
{
	const char *err = NULL;
	int rc;

	pthread_mutex_lock(&kc->mtx);
	if (kc->fd != -1)
		close(kc->fd);
	atomic_store(&kc->up, 0);
	kc->fd = fd;
	kc->err[0] = '\0';
	if ((rc = kc_hello(kc, KC_HELLO_MS, &err)) == -1) {
		log_warnx("key keeper: %s", err);
		if (kc->fd != -1) {
			close(kc->fd);
			kc->fd = -1;
		}
	}
	pthread_mutex_unlock(&kc->mtx);
	return rc;
}

void
keeper_client_ready(struct keeper_client *kc)
{
	pthread_mutex_lock(&kc->mtx);
	if (kc->fd != -1)
		atomic_store(&kc->up, 1);
	pthread_mutex_unlock(&kc->mtx);
}

void
keeper_client_lost(struct keeper_client *kc, const char *why)
{
	pthread_mutex_lock(&kc->mtx);
	kc_drop(kc, why);
	pthread_mutex_unlock(&kc->mtx);
}

X509 *
keeper_client_ca_cert(struct keeper_client *kc)
{
	return kc->ca_cert;
}

EVP_PKEY *
keeper_client_leaf_key(struct keeper_client *kc)
{
	return kc->leaf;
}

const uint8_t *
keeper_client_audit_pub(struct keeper_client *kc)
{
	return kc->audit_pub;
}

X509 *
keeper_client_sign_leaf(void *arg, const char *name, int is_ip,
    time_t *not_after)
{
	struct keeper_client *kc = arg;
	struct keeper_view v;
	const unsigned char *p;
	uint8_t flag = is_ip ? 1 : 0;
	size_t len = strlen(name);
	X509 *x = NULL;

	if (len == 0 || len > KEEPER_NAME_MAX || !keeper_client_up(kc))
		return NULL;
	pthread_mutex_lock(&kc->mtx);
	if (kc_call(kc, KEEPER_SIGN_LEAF, &flag, 1, name, len, &v,
	    KC_CALL_MS) == 0 && v.status == KEEPER_OK) {
		p = v.data;
		if ((x = d2i_X509(NULL, &p, (long)v.len)) == NULL ||
		    p != v.data + v.len) {
			X509_free(x);
			x = NULL;
			ERR_clear_error();
		} else
			*not_after = (time_t)v.u64;
	}
	pthread_mutex_unlock(&kc->mtx);
	return x;
}

int
keeper_client_sign_audit(void *arg, const uint8_t *msg, size_t len,
    uint8_t sig[64])
{
	struct keeper_client *kc = arg;
	struct keeper_view v;
	int rc = -1;

	if (len == 0 || len > KEEPER_SIGMSG_MAX)
		return -1;
	pthread_mutex_lock(&kc->mtx);
	if (kc_call(kc, KEEPER_SIGN_AUDIT, msg, len, NULL, 0, &v,
	    KC_CALL_MS) == 0 && v.status == KEEPER_OK) {
		memcpy(sig, v.data, KEEPER_AUDIT_SIG);
		rc = 0;
	}
	pthread_mutex_unlock(&kc->mtx);
	return rc;
}

int
keeper_client_policy(struct keeper_client *kc)
{
	struct keeper_view v;
	int rc = -1;

	pthread_mutex_lock(&kc->mtx);
	if (kc_call(kc, KEEPER_POLICY, NULL, 0, NULL, 0, &v, KC_CALL_MS) == 0 &&
	    v.status == KEEPER_OK)
		rc = 0;
	pthread_mutex_unlock(&kc->mtx);
	return rc;
}

int
keeper_client_vault_stamp(struct keeper_client *kc, uint64_t *stamp)
{
	struct keeper_view v;
	int rc = -1;

	pthread_mutex_lock(&kc->mtx);
	if (kc_call(kc, KEEPER_VAULT_STAMP, NULL, 0, NULL, 0, &v,
	    KC_CALL_MS) == 0 && v.status == KEEPER_OK) {
		*stamp = v.u64;
		rc = 0;
	}
	pthread_mutex_unlock(&kc->mtx);
	return rc;
}

struct vault_snapshot *
keeper_client_secrets(struct keeper_client *kc, const char *const *names,
    size_t n, int *status)
{
	struct vault_snapshot *snap = NULL;
	const char **ok = NULL;
	unsigned char **vals = NULL;
	size_t *lens = NULL, i, k = 0;
	struct keeper_view v;
	int failed = 0;

	if ((ok = calloc(n + 1, sizeof(*ok))) == NULL ||
	    (vals = calloc(n + 1, sizeof(*vals))) == NULL ||
	    (lens = calloc(n + 1, sizeof(*lens))) == NULL)
		goto done;
	pthread_mutex_lock(&kc->mtx);
	for (i = 0; i < n && !failed; i++) {
		status[i] = KEEPER_FAILED;
		if (strlen(names[i]) > VAULT_NAME_MAX ||
		    kc_call(kc, KEEPER_SECRET, names[i], strlen(names[i]),
		    NULL, 0, &v, KC_CALL_MS) == -1) {
			failed = 1;
			break;
		}
		status[i] = v.status;
		if (v.status != KEEPER_OK)
			continue;
		if ((vals[k] = vault_secmem_alloc(v.len)) == NULL) {
			failed = 1;
			break;
		}
		memcpy(vals[k], v.data, v.len);
		OPENSSL_cleanse(kc->in, sizeof(*kc->in));
		lens[k] = v.len;
		ok[k++] = names[i];
	}
	pthread_mutex_unlock(&kc->mtx);
	if (!failed)
		snap = vault_snapshot_build(ok, (const unsigned char *const *)vals,
		    lens, k);
done:
	for (i = 0; vals != NULL && i < k; i++)
		vault_secmem_free(vals[i]);
	free(ok);
	free(vals);
	free(lens);
	return snap;
}

int
keeper_client_put_refresh(struct keeper_client *kc, const char *name,
    const char *rt, size_t len)
{
	struct keeper_view v;
	uint8_t nb[1 + VAULT_NAME_MAX];
	size_t nl = strlen(name);
	int rc = -1;

	if (nl == 0 || nl > VAULT_NAME_MAX)
		return -1;
	nb[0] = (uint8_t)nl;
	memcpy(nb + 1, name, nl);
	pthread_mutex_lock(&kc->mtx);
	if (kc_call(kc, KEEPER_SECRET_PUT, nb, 1 + nl, rt, len, &v,
	    KC_CALL_MS) == 0)
		rc = (int)v.status;
	/* The request held the token. */
	OPENSSL_cleanse(kc->out, sizeof(*kc->out));
	pthread_mutex_unlock(&kc->mtx);
	return rc;
}
