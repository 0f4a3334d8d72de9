/*
 * The gateway's OAuth 2.0 tokens (oauth2.h, docs/credentials.md "OAuth 2.0
 * credentials"): asking a token endpoint over verified TLS, one fetch at a
 * time per vault entry, a rotated refresh token handed to the keeper, and
 * the tokens published in the snapshot the swap and the scrubber use.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/log.h"
#include "core/policy.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/oauth2_int.h"
#include "vault/vault_int.h"

#define OA_REQ_MAX		(128 * 1024)
#define OA_BACKOFF_MIN_MS	1000
#define OA_BACKOFF_MAX_MS	60000

/* One vault entry's tokens. */
struct oa_entry {
	char		 secret[VAULT_NAME_MAX + 1];
	char		 access_name[VAULT_SNAP_NAME_MAX + 1];
	char		 refresh_name[VAULT_SNAP_NAME_MAX + 1];
	pthread_cond_t	 cv;
	int		 fetching;
	unsigned char	*access;	/* wiped memory, OAUTH2_TOKEN_MAX */
	size_t		 access_len;	/* 0: none */
	/*
	 * The access token the last one replaced, until it expires: the
	 * origin still takes it, so the scrubber still looks for it (a
	 * token refreshes at half its life at the latest: one at most).
	 */
	char		 was_name[VAULT_SNAP_NAME_MAX + 1];
	unsigned char	*was;		/* wiped memory, OAUTH2_TOKEN_MAX */
	size_t		 was_len;	/* 0: none */
	uint64_t	 was_expires;	/* ms, monotonic */
	uint64_t	 fresh_until;	/* ms, monotonic: refresh from then */
	uint64_t	 expires;	/* ms, monotonic */
	/*
	 * A refresh token the endpoint rotated to, until the base shows it:
	 * used while the base still holds rt_was (the one it replaced).
	 */
	unsigned char	*rt;		/* wiped memory, OAUTH2_TOKEN_MAX */
	size_t		 rt_len;
	unsigned char	*rt_was;
	size_t		 rt_was_len;
	uint64_t	 fail_until;	/* ms: backing off until then */
	uint64_t	 backoff;
	char		 why[200];
};

/* A fetch the fetcher thread owes. */
struct oa_job {
	const struct policy_credential *c;
	struct policy	*pol;		/* a reference: c lives in it */
};

struct oauth2_tokens {
	pthread_mutex_t	 mtx;
	/* the fetcher thread and its queue (guarded by mtx) */
	pthread_t	 thread;
	int		 thread_up;
	int		 stopping;
	pthread_cond_t	 jobs_cv;
	struct oa_job	*jobs;
	size_t		 n_jobs, cap_jobs;
	void		(*done)(void *);
	void		*done_arg;
	struct oa_entry	**v;
	size_t		 n, cap;
	SSL_CTX		*ctx;
	struct keeper_client *kc;
	struct vault_snapshot *base;
	oauth2_publish_fn publish;
	void		*arg;
	unsigned long	 fetches;
	oauth2_resolve_fn resolve;
	void		*resolve_arg;
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct oauth2_tokens *
oauth2_tokens_new(const char *ca_bundle, struct keeper_client *kc,
    oauth2_publish_fn publish, void *arg, const char **errstr)
{
	struct oauth2_tokens *t;

	if ((t = calloc(1, sizeof(*t))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	pthread_mutex_init(&t->mtx, NULL);
	pthread_cond_init(&t->jobs_cv, NULL);
	t->kc = kc;
	t->publish = publish;
	t->arg = arg;
	if ((t->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		*errstr = "cannot make a TLS context";
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if ((ca_bundle == NULL ? SSL_CTX_set_default_verify_paths(t->ctx) :
	    SSL_CTX_load_verify_locations(t->ctx, ca_bundle, NULL)) != 1) {
		*errstr = "cannot load upstream.ca_bundle for token endpoints";
		goto fail;
	}
	return t;
fail:
	ERR_clear_error();
	oauth2_tokens_free(t);
	return NULL;
}

static void
entry_free(struct oa_entry *e)
{
	pthread_cond_destroy(&e->cv);
	vault_secmem_free(e->access);
	vault_secmem_free(e->rt);
	vault_secmem_free(e->rt_was);
	vault_secmem_free(e->was);
	free(e);
}

void
oauth2_tokens_free(struct oauth2_tokens *t)
{
	size_t i;

	if (t == NULL)
		return;
	oauth2_tokens_stop(t);
	for (i = 0; i < t->n_jobs; i++)
		policy_unref(t->jobs[i].pol);
	free(t->jobs);
	pthread_cond_destroy(&t->jobs_cv);
	for (i = 0; i < t->n; i++)
		entry_free(t->v[i]);
	free(t->v);
	SSL_CTX_free(t->ctx);
	vault_snapshot_unref(t->base);
	pthread_mutex_destroy(&t->mtx);
	free(t);
}

unsigned long
oauth2_tokens_fetches(struct oauth2_tokens *t)
{
	unsigned long n;

	pthread_mutex_lock(&t->mtx);
	n = t->fetches;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

/* Needs t->mtx. */
static struct oa_entry *
entry_get(struct oauth2_tokens *t, const char *secret)
{
	struct oa_entry *e;
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i]->secret, secret) == 0)
			return t->v[i];
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 4;
		void *nv = reallocarray(t->v, ncap, sizeof(*t->v));
		if (nv == NULL)
			return NULL;
		t->v = nv;
		t->cap = ncap;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	if ((e->access = vault_secmem_alloc(OAUTH2_TOKEN_MAX)) == NULL ||
	    (e->rt = vault_secmem_alloc(OAUTH2_TOKEN_MAX)) == NULL ||
	    (e->rt_was = vault_secmem_alloc(OAUTH2_TOKEN_MAX)) == NULL ||
	    (e->was = vault_secmem_alloc(OAUTH2_TOKEN_MAX)) == NULL) {
		vault_secmem_free(e->access);
		vault_secmem_free(e->rt);
		vault_secmem_free(e->rt_was);
		free(e);
		return NULL;
	}
	pthread_cond_init(&e->cv, NULL);
	snprintf(e->secret, sizeof(e->secret), "%s", secret);
	snprintf(e->access_name, sizeof(e->access_name), "%s#access", secret);
	snprintf(e->was_name, sizeof(e->was_name), "%s" OAUTH2_PART_WAS, secret);
	snprintf(e->refresh_name, sizeof(e->refresh_name), "%s#refresh",
	    secret);
	t->v[t->n++] = e;
	return e;
}

/* The refresh token to use for e: the base's, or a rotated one it lacks. */
static int
refresh_in_use(const struct oa_entry *e, const struct oauth2_entry *be,
    const char **rt, size_t *len)
{
	if (e->rt_len > 0 && be->refresh_token != NULL &&
	    be->refresh_token_len == e->rt_was_len &&
	    CRYPTO_memcmp(be->refresh_token, e->rt_was, e->rt_was_len) == 0) {
		*rt = (const char *)e->rt;
		*len = e->rt_len;
		return 0;
	}
	*rt = be->refresh_token;
	*len = be->refresh_token_len;
	return *rt != NULL ? 0 : -1;
}

/* Needs t->mtx: the base with every entry's tokens, to the publisher. */
static void
publish(struct oauth2_tokens *t)
{
	const char **names;
	const unsigned char **vals;
	size_t *lens, i, k = 0, blen;
	struct vault_snapshot *s;
	struct oauth2_entry be;
	const unsigned char *bv;
	const char *why, *rt;

	if (t->base == NULL)
		return;
	names = calloc(3 * t->n + 1, sizeof(*names));
	vals = calloc(3 * t->n + 1, sizeof(*vals));
	lens = calloc(3 * t->n + 1, sizeof(*lens));
	if (names == NULL || vals == NULL || lens == NULL)
		goto done;
	for (i = 0; i < t->n; i++) {
		struct oa_entry *e = t->v[i];

		if (e->access_len > 0) {
			names[k] = e->access_name;
			vals[k] = e->access;
			lens[k++] = e->access_len;
		}
		if (e->was_len > 0 && now_ms() >= e->was_expires) {
			e->was_len = 0;
			OPENSSL_cleanse(e->was, OAUTH2_TOKEN_MAX);
		}
		if (e->was_len > 0) {
			names[k] = e->was_name;
			vals[k] = e->was;
			lens[k++] = e->was_len;
		}
		/* The refresh token in use, for the scrubber. */
		if ((bv = oauth2_snap_value(t->base, e->secret, &blen)) != NULL &&
		    oauth2_entry_parse(bv, blen, &be, &why) == 0 &&
		    refresh_in_use(e, &be, &rt, &blen) == 0) {
			names[k] = e->refresh_name;
			vals[k] = (const unsigned char *)rt;
			lens[k++] = blen;
		}
	}
	if ((s = oauth2_snap_extend(t->base, names, vals, lens, k)) == NULL)
		log_warnx("oauth2: out of memory publishing tokens");
	else
		t->publish(t->arg, s);
done:
	free(names);
	free(vals);
	free(lens);
}

void
oauth2_tokens_on_resolve(struct oauth2_tokens *t, oauth2_resolve_fn fn,
    void *arg)
{
	t->resolve = fn;
	t->resolve_arg = arg;
}

void
oauth2_tokens_rebase(struct oauth2_tokens *t, struct vault_snapshot *base)
{
	pthread_mutex_lock(&t->mtx);
	vault_snapshot_unref(t->base);
	t->base = base;
	publish(t);
	pthread_mutex_unlock(&t->mtx);
}

/* ------------------------------------------------------------ the fetch */

struct oa_io {
	int		 fd;
	SSL		*ssl;
	uint64_t	 deadline;
	char		*why;
	size_t		 wl;
};

static int
oa_wait(struct oa_io *io, short ev)
{
	struct pollfd pfd = { io->fd, ev, 0 };
	uint64_t now;
	int r;

	for (;;) {
		if ((now = now_ms()) >= io->deadline) {
			snprintf(io->why, io->wl, "the token endpoint did not "
			    "answer within %d s", OAUTH2_FETCH_MS / 1000);
			return -1;
		}
		r = poll(&pfd, 1, (int)(io->deadline - now));
		if (r > 0)
			return 0;
		if (r == -1 && errno != EINTR) {
			snprintf(io->why, io->wl, "poll: %s", strerror(errno));
			return -1;
		}
	}
}

static int
oa_connect_one(struct oa_io *io, const struct sockaddr *sa, socklen_t len)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if ((io->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(io->fd, sa, len) == -1) {
		if (errno != EINPROGRESS)
			goto fail;
		if (oa_wait(io, POLLOUT) == -1)
			goto fail;
		if (getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &el) == -1 ||
		    err != 0) {
			errno = err;
			goto fail;
		}
	}
	return 0;
fail:
	err = errno;
	close(io->fd);
	io->fd = -1;
	errno = err;
	return -1;
}

static int
oa_connect(struct oa_io *io, const struct policy_oauth2 *o,
    const struct oauth2_tokens *t)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	struct addrinfo hints, *res = NULL, *ai;
	char port[8];
	int rc;

	io->fd = -1;
	if (o->host_is_ip) {
		memset(&s4, 0, sizeof(s4));
		memset(&s6, 0, sizeof(s6));
		if (inet_pton(AF_INET, o->host, &s4.sin_addr) == 1) {
			s4.sin_family = AF_INET;
			s4.sin_port = htons(o->port);
			rc = oa_connect_one(io, (struct sockaddr *)&s4,
			    sizeof(s4));
		} else if (inet_pton(AF_INET6, o->host, &s6.sin6_addr) == 1) {
			s6.sin6_family = AF_INET6;
			s6.sin6_port = htons(o->port);
			rc = oa_connect_one(io, (struct sockaddr *)&s6,
			    sizeof(s6));
		} else
			rc = -1;
	} else if (t->resolve != NULL) {
		struct sockaddr_storage ss[8];
		int i, k;

		if ((k = t->resolve(t->resolve_arg, o->host, o->port, ss, 8,
		    io->deadline, io->why, io->wl)) <= 0) {
			if (io->why[0] == '\0')
				snprintf(io->why, io->wl, "cannot resolve %s",
				    o->host);
			return -1;
		}
		rc = -1;
		for (i = 0; i < k && rc == -1; i++)
			rc = oa_connect_one(io, (struct sockaddr *)&ss[i],
			    ss[i].ss_family == AF_INET6 ?
			    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	} else {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		snprintf(port, sizeof(port), "%u", o->port);
		if ((rc = getaddrinfo(o->host, port, &hints, &res)) != 0) {
			snprintf(io->why, io->wl, "cannot resolve %s: %s",
			    o->host, gai_strerror(rc));
			return -1;
		}
		rc = -1;
		for (ai = res; ai != NULL && rc == -1; ai = ai->ai_next)
			rc = oa_connect_one(io, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(res);
	}
	if (rc == -1 && io->why[0] == '\0')
		snprintf(io->why, io->wl, "cannot connect to %s port %u: %s",
		    o->host, o->port, strerror(errno));
	return rc;
}

/* One TLS step until it is done: r is the SSL call's result. 1 again, 0 done, -1. */
static int
oa_ssl_step(struct oa_io *io, int r, const char *what)
{
	long vr;
	int e;

	if (r > 0)
		return 0;
	e = SSL_get_error(io->ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		return oa_wait(io, POLLIN) == 0 ? 1 : -1;
	if (e == SSL_ERROR_WANT_WRITE)
		return oa_wait(io, POLLOUT) == 0 ? 1 : -1;
	if ((vr = SSL_get_verify_result(io->ssl)) != X509_V_OK)
		snprintf(io->why, io->wl, "the token endpoint's certificate is "
		    "not trusted: %s", X509_verify_cert_error_string(vr));
	else
		snprintf(io->why, io->wl, "TLS %s with the token endpoint "
		    "failed", what);
	ERR_clear_error();
	return -1;
}

/* Append p[0..n) to the request; -1 when it does not fit. */
#define OA_HALF		(OA_REQ_MAX / 2)
static int
rq(unsigned char *b, size_t *at, const void *p, size_t n)
{
	if (*at > OA_HALF || n > OA_HALF - *at)
		return -1;
	memcpy(b + *at, p, n);
	*at += n;
	return 0;
}

/* The form's name=pct(value). */
static int
rq_field(unsigned char *b, size_t *at, const char *name, const char *v,
    size_t vl)
{
	size_t nl = strlen(name);

	if (*at > OA_HALF || nl + 1 + 3 * vl > OA_HALF - *at)
		return -1;
	memcpy(b + *at, name, nl);
	*at += nl;
	b[(*at)++] = '=';
	*at += vault_pct_encode((const unsigned char *)v, vl, 0, 1,
	    (char *)b + *at);
	return 0;
}

/*
 * The request in b (wiped memory, OA_REQ_MAX): head, then the form, each
 * at most OA_HALF. The form is written first into b's second half, then
 * moved after the head.
 */
static long
oa_request(unsigned char *b, const struct policy_oauth2 *o,
    const struct oauth2_entry *ce, const char *rt, size_t rtlen)
{
	unsigned char *body = b + OA_HALF;
	char *cred, line[600];
	size_t bl = 0, at = 0, cl;
	int v6 = strchr(o->host, ':') != NULL, ok = 0;

	if (o->grant == POLICY_OAUTH2_REFRESH_TOKEN) {
		if (rq(body, &bl, "grant_type=refresh_token&", 25) ||
		    rq_field(body, &bl, "refresh_token", rt, rtlen))
			return -1;
	} else if (rq(body, &bl, "grant_type=client_credentials", 29))
		return -1;
	if (o->scope != NULL && (rq(body, &bl, "&", 1) ||
	    rq_field(body, &bl, "scope", o->scope, strlen(o->scope))))
		return -1;
	/* A public client (no secret), or client_auth: body. */
	if (o->client_auth_body || ce->client_secret == NULL) {
		if (rq(body, &bl, "&", 1) || rq_field(body, &bl, "client_id",
		    ce->client_id, ce->client_id_len))
			return -1;
		if (ce->client_secret != NULL && (rq(body, &bl, "&", 1) ||
		    rq_field(body, &bl, "client_secret", ce->client_secret,
		    ce->client_secret_len)))
			return -1;
	}
	snprintf(line, sizeof(line), "POST %s HTTP/1.1\r\nHost: %s%s%s",
	    o->path, v6 ? "[" : "", o->host, v6 ? "]" : "");
	if (rq(b, &at, line, strlen(line)) ||
	    (o->port != 443 && (snprintf(line, sizeof(line), ":%u", o->port),
	    rq(b, &at, line, strlen(line)))))
		return -1;
	snprintf(line, sizeof(line), "\r\nUser-Agent: sandgate\r\nAccept: "
	    "application/json\r\nContent-Type: application/x-www-form-"
	    "urlencoded\r\nContent-Length: %zu\r\nConnection: close\r\n", bl);
	if (rq(b, &at, line, strlen(line)))
		return -1;
	/* RFC 6749 2.3.1: Basic of the form-encoded id and secret. */
	if (!o->client_auth_body && ce->client_secret != NULL) {
		if ((cred = oauth2_entry_basic(ce, &cl)) == NULL)
			return -1;
		ok = rq(b, &at, "Authorization: Basic ", 21) == 0 &&
		    rq(b, &at, cred, cl) == 0 && rq(b, &at, "\r\n", 2) == 0;
		vault_secmem_free(cred);
		if (!ok)
			return -1;
	}
	if (rq(b, &at, "\r\n", 2))
		return -1;
	memmove(b + at, body, bl);
	at += bl;
	OPENSSL_cleanse(b + at, OA_REQ_MAX - at);
	return (long)at;
}

/*
 * Ask o's endpoint with the entry's client and refresh token: 0 and *a
 * (oauth2_answer_free after), or -1 with why.
 */
static int
oa_fetch(const struct oauth2_tokens *t, SSL_CTX *ctx, const struct policy_oauth2 *o,
    const struct oauth2_entry *ce, const char *rt, size_t rtlen,
    struct oauth2_answer *a, char *why, size_t wl)
{
	struct oa_io io = { -1, NULL, now_ms() + OAUTH2_FETCH_MS, why, wl };
	unsigned char *req = NULL;
	char *ans = NULL;
	size_t got = 0, sent = 0;
	long rl;
	int r, rc = -1;

	why[0] = '\0';
	memset(a, 0, sizeof(*a));
	if ((req = vault_secmem_alloc(OA_REQ_MAX)) == NULL ||
	    (ans = vault_secmem_alloc(OAUTH2_ANSWER_MAX + 1)) == NULL) {
		snprintf(why, wl, "out of memory");
		goto done;
	}
	if ((rl = oa_request(req, o, ce, rt, rtlen)) < 0) {
		snprintf(why, wl, "the token request would be too long");
		goto done;
	}
	if (oa_connect(&io, o, t) == -1)
		goto done;
	if ((io.ssl = SSL_new(ctx)) == NULL || SSL_set_fd(io.ssl, io.fd) != 1 ||
	    (!o->host_is_ip && SSL_set_tlsext_host_name(io.ssl, o->host) != 1) ||
	    (o->host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(
	    io.ssl), o->host) != 1 : SSL_set1_host(io.ssl, o->host) != 1)) {
		snprintf(why, wl, "cannot set up TLS");
		goto done;
	}
	SSL_set_connect_state(io.ssl);
	while ((r = oa_ssl_step(&io, SSL_connect(io.ssl), "handshake")) == 1)
		;
	if (r == -1)
		goto done;
	while (sent < (size_t)rl) {
		r = SSL_write(io.ssl, req + sent, (int)((size_t)rl - sent));
		if (r > 0) {
			sent += (size_t)r;
			continue;
		}
		if (oa_ssl_step(&io, r, "write") == -1)
			goto done;
	}
	for (;;) {
		if (got == OAUTH2_ANSWER_MAX + 1) {
			snprintf(why, wl, "the token endpoint's answer is over "
			    "%d KiB", OAUTH2_ANSWER_MAX / 1024);
			goto done;
		}
		r = SSL_read(io.ssl, ans + got, (int)(OAUTH2_ANSWER_MAX + 1 -
		    got));
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (SSL_get_error(io.ssl, r) == SSL_ERROR_ZERO_RETURN)
			break;
		if ((r = oa_ssl_step(&io, r, "read")) == -1) {
			if (got == 0)
				goto done;
			why[0] = '\0';	/* a close without close_notify */
			break;
		}
	}
	if (oauth2_answer_parse(ans, got, a) == -1) {
		snprintf(why, wl, "%s", a->why);
		oauth2_answer_free(a);
		goto done;
	}
	rc = 0;
done:
	if (io.ssl != NULL)
		SSL_free(io.ssl);
	if (io.fd != -1)
		close(io.fd);
	ERR_clear_error();
	vault_secmem_free(req);
	vault_secmem_free(ans);
	return rc;
}

/* ------------------------------------------------------------ ensure */

static int
fresh(const struct oa_entry *e, uint64_t now)
{
	return e->access_len > 0 && now < e->fresh_until;
}

/* notify: call the done callback after a fetch (the fetcher calls it itself). */
static int
ensure(struct oauth2_tokens *t, const struct policy_credential *c,
    char *why, size_t wl, int notify)
{
	const struct policy_oauth2 *o = c->oauth2;
	struct oauth2_entry ce;
	struct oauth2_answer a;
	struct oa_entry *e;
	unsigned char *val = NULL, *rt_used = NULL;
	const unsigned char *bv;
	const char *rt = NULL, *perr;
	size_t blen, rtlen = 0;
	uint64_t now, deadline = now_ms() + OAUTH2_WAIT_MS, life, before;
	struct timespec ts;
	void (*done)(void *);
	void *done_arg;
	int rc = -1, rotated = 0;

	if (o == NULL) {
		snprintf(why, wl, "no oauth2 settings");
		return -1;
	}
	pthread_mutex_lock(&t->mtx);
	if ((e = entry_get(t, c->secret)) == NULL) {
		pthread_mutex_unlock(&t->mtx);
		snprintf(why, wl, "out of memory");
		return -1;
	}
	for (;;) {
		now = now_ms();
		if (fresh(e, now)) {
			pthread_mutex_unlock(&t->mtx);
			return 0;
		}
		if (!e->fetching)
			break;
		if (now >= deadline) {
			pthread_mutex_unlock(&t->mtx);
			snprintf(why, wl, "waited %d s for the token endpoint",
			    OAUTH2_WAIT_MS / 1000);
			return -1;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)((deadline - now) / 1000);
		ts.tv_nsec += (long)((deadline - now) % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		(void)pthread_cond_timedwait(&e->cv, &t->mtx, &ts);
	}
	if (now < e->fail_until) {
		snprintf(why, wl, "%s (tried again in %llu s)", e->why,
		    (unsigned long long)((e->fail_until - now + 999) / 1000));
		pthread_mutex_unlock(&t->mtx);
		return -1;
	}
	/* What to ask with, copied into wiped memory: the lock is let go. */
	if ((bv = oauth2_snap_value(t->base, c->secret, &blen)) == NULL) {
		snprintf(e->why, sizeof(e->why), "its vault entry %s is not "
		    "loaded", c->secret);
		goto failed_locked;
	}
	if ((val = vault_secmem_alloc(blen + OAUTH2_TOKEN_MAX)) == NULL) {
		snprintf(e->why, sizeof(e->why), "out of memory");
		goto failed_locked;
	}
	memcpy(val, bv, blen);
	if (oauth2_entry_parse(val, blen, &ce, &perr) == -1) {
		snprintf(e->why, sizeof(e->why), "vault entry %s: %s", c->secret,
		    perr);
		goto failed_locked;
	}
	if (ce.client_id == NULL) {
		snprintf(e->why, sizeof(e->why), "vault entry %s has no "
		    "client_id= line", c->secret);
		goto failed_locked;
	}
	if (o->grant == POLICY_OAUTH2_REFRESH_TOKEN) {
		if (refresh_in_use(e, &ce, &rt, &rtlen) == -1) {
			snprintf(e->why, sizeof(e->why), "vault entry %s has no "
			    "refresh_token= line (grant refresh_token)",
			    c->secret);
			goto failed_locked;
		}
		rt_used = val + blen;
		memcpy(rt_used, rt, rtlen);
		rt = (const char *)rt_used;
	}
	e->fetching = 1;
	t->fetches++;
	pthread_mutex_unlock(&t->mtx);

	rc = oa_fetch(t, t->ctx, o, &ce, rt, rtlen, &a, e->why, sizeof(e->why));

	pthread_mutex_lock(&t->mtx);
	e->fetching = 0;
	now = now_ms();
	/* The token this fetch replaces, while the origin still takes it. */
	if (e->access_len > 0 && now < e->expires) {
		memcpy(e->was, e->access, e->access_len);
		e->was_len = e->access_len;
		e->was_expires = e->expires;
	}
	if (rc == 0) {
		memcpy(e->access, a.access, a.access_len);
		e->access_len = a.access_len;
		life = (uint64_t)a.expires_in * 1000;
		before = o->refresh_before_ms < life / 2 ?
		    o->refresh_before_ms : life / 2;
		e->expires = now + life;
		e->fresh_until = e->expires - before;
		e->backoff = 0;
		e->fail_until = 0;
		if (o->grant == POLICY_OAUTH2_REFRESH_TOKEN && a.refresh != NULL &&
		    (a.refresh_len != rtlen || CRYPTO_memcmp(a.refresh, rt,
		    rtlen) != 0)) {
			/* Used while the base still shows this one. */
			memcpy(e->rt_was, ce.refresh_token,
			    ce.refresh_token_len);
			e->rt_was_len = ce.refresh_token_len;
			memcpy(e->rt, a.refresh, a.refresh_len);
			e->rt_len = a.refresh_len;
			rotated = 1;
		}
		publish(t);
	} else {
		e->backoff = e->backoff == 0 ? OA_BACKOFF_MIN_MS :
		    e->backoff * 2 > OA_BACKOFF_MAX_MS ? OA_BACKOFF_MAX_MS :
		    e->backoff * 2;
		e->fail_until = now + e->backoff;
		/* A refused refresh token: the access token goes too. */
		e->access_len = 0;
		OPENSSL_cleanse(e->access, OAUTH2_TOKEN_MAX);
		log_warnx("oauth2: credential %s: no access token: %s (tried "
		    "again after %llu ms)", c->name, e->why,
		    (unsigned long long)e->backoff);
		snprintf(why, wl, "%s", e->why);
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&t->mtx);
	if (rc == 0 && rotated) {
		int st = t->kc != NULL ? keeper_client_put_refresh(t->kc,
		    c->secret, a.refresh, a.refresh_len) : -1;

		if (st != KEEPER_OK)
			log_warnx("oauth2: credential %s: the rotated refresh "
			    "token could not be stored in the vault (%s): it "
			    "is kept in memory only, and lost with a restart",
			    c->name, st == -1 ? "the key keeper is not "
			    "available" : "the key keeper refused it");
		else
			log_info("oauth2: credential %s: rotated refresh token "
			    "stored in the vault", c->name);
	}
	if (rc == 0)
		oauth2_answer_free(&a);
	vault_secmem_free(val);
	pthread_mutex_lock(&t->mtx);
	done = t->done;
	done_arg = t->done_arg;
	pthread_mutex_unlock(&t->mtx);
	if (done != NULL && notify)
		done(done_arg);
	return rc;

failed_locked:
	e->backoff = e->backoff == 0 ? OA_BACKOFF_MIN_MS :
	    e->backoff * 2 > OA_BACKOFF_MAX_MS ? OA_BACKOFF_MAX_MS :
	    e->backoff * 2;
	e->fail_until = now_ms() + e->backoff;
	snprintf(why, wl, "%s", e->why);
	pthread_mutex_unlock(&t->mtx);
	vault_secmem_free(val);
	return -1;
}

int
oauth2_tokens_ensure(struct oauth2_tokens *t, const struct policy_credential *c,
    char *why, size_t wl)
{
	return ensure(t, c, why, wl, 1);
}

/* ------------------------------------------------------------ asynchronous */

static int
job_queued(const struct oauth2_tokens *t, const char *secret)
{
	size_t i;

	for (i = 0; i < t->n_jobs; i++)
		if (strcmp(t->jobs[i].c->secret, secret) == 0)
			return 1;
	return 0;
}

enum oauth2_state
oauth2_tokens_state(struct oauth2_tokens *t, const struct policy_credential *c)
{
	struct oa_entry *e;
	enum oauth2_state st;
	uint64_t now = now_ms();

	pthread_mutex_lock(&t->mtx);
	if ((e = entry_get(t, c->secret)) == NULL)
		st = OAUTH2_STALE;
	else if (fresh(e, now))
		st = OAUTH2_FRESH;
	else if (e->fetching || job_queued(t, c->secret))
		st = OAUTH2_FETCHING;
	else if (now < e->fail_until)
		st = OAUTH2_FAILED;
	else
		st = OAUTH2_STALE;
	pthread_mutex_unlock(&t->mtx);
	return st;
}

static void *
fetcher_main(void *arg)
{
	struct oauth2_tokens *t = arg;
	struct oa_job j;
	void (*done)(void *);
	void *done_arg;
	char why[256];

	pthread_mutex_lock(&t->mtx);
	for (;;) {
		while (t->n_jobs == 0 && !t->stopping)
			pthread_cond_wait(&t->jobs_cv, &t->mtx);
		if (t->stopping)
			break;
		j = t->jobs[0];
		/* Kept queued while it runs: its entry counts as fetching. */
		pthread_mutex_unlock(&t->mtx);
		(void)ensure(t, j.c, why, sizeof(why), 0);
		pthread_mutex_lock(&t->mtx);
		memmove(t->jobs, t->jobs + 1, (t->n_jobs - 1) * sizeof(*t->jobs));
		t->n_jobs--;
		done = t->done;
		done_arg = t->done_arg;
		pthread_mutex_unlock(&t->mtx);
		policy_unref(j.pol);
		/* Dequeued first: the woken see the entry's outcome. */
		if (done != NULL)
			done(done_arg);
		pthread_mutex_lock(&t->mtx);
	}
	pthread_mutex_unlock(&t->mtx);
	return NULL;
}

int
oauth2_tokens_fetch_async(struct oauth2_tokens *t,
    const struct policy_credential *c, struct policy *pol)
{
	int rc = -1;

	pthread_mutex_lock(&t->mtx);
	if (t->stopping)
		goto out;
	if (job_queued(t, c->secret)) {
		rc = 0;
		goto out;
	}
	if (!t->thread_up) {
		if (pthread_create(&t->thread, NULL, fetcher_main, t) != 0)
			goto out;
		t->thread_up = 1;
	}
	if (t->n_jobs == t->cap_jobs) {
		size_t ncap = t->cap_jobs ? t->cap_jobs * 2 : 4;
		void *nv = reallocarray(t->jobs, ncap, sizeof(*t->jobs));
		if (nv == NULL)
			goto out;
		t->jobs = nv;
		t->cap_jobs = ncap;
	}
	policy_ref(pol);
	t->jobs[t->n_jobs].c = c;
	t->jobs[t->n_jobs++].pol = pol;
	pthread_cond_signal(&t->jobs_cv);
	rc = 0;
out:
	pthread_mutex_unlock(&t->mtx);
	return rc;
}

void
oauth2_tokens_on_done(struct oauth2_tokens *t, void (*done)(void *), void *arg)
{
	pthread_mutex_lock(&t->mtx);
	t->done = done;
	t->done_arg = arg;
	pthread_mutex_unlock(&t->mtx);
}

void
oauth2_tokens_stop(struct oauth2_tokens *t)
{
	int up;

	pthread_mutex_lock(&t->mtx);
	t->stopping = 1;
	t->done = NULL;
	up = t->thread_up;
	t->thread_up = 0;
	pthread_cond_broadcast(&t->jobs_cv);
	pthread_mutex_unlock(&t->mtx);
	if (up)
		pthread_join(t->thread, NULL);
}
