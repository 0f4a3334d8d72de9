/*
 * TLS interception (docs/tls.md): the sandbox side is terminated with a leaf
 * from sandgate's CA, the origin side is a fresh TLS connection verified
 * against upstream.ca_bundle with hostname checks. Owns the per-worker
 * SSL_CTXs, the origin session cache used for resumption, and the socket
 * I/O under both sides' TLS filters (struct csock).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/log.h"
#include "core/reason.h"
#include "core/stats.h"
#include "exchange/exchange.h"
#include "vault/keeper.h"
#include "vault/ca.h"

static const unsigned char alpn_http11[] = "\x08http/1.1";
static const unsigned char alpn_h2_http11[] = "\x02h2\x08http/1.1";

int
proxy_tls_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	const struct config *cfg = arg;
	unsigned char *sel;
	int h2 = cfg != NULL && cfg->h2_enabled;

	/* h2 (proxy_h2.c) when limits.http2.enabled, then http/1.1, or nothing. */
	if (SSL_select_next_proto(&sel, outlen, h2 ? alpn_h2_http11 :
	    alpn_http11, h2 ? sizeof(alpn_h2_http11) - 1 :
	    sizeof(alpn_http11) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static unsigned
sess_slot(const char *host, uint16_t port)
{
	unsigned h = 2166136261u;

	for (; *host; host++)
		h = (h ^ (unsigned char)*host) * 16777619u;
	h = (h ^ port) * 16777619u;
	return h % PROXY_TLS_SESSIONS;
}

/* OpenSSL hands over a resumable origin session (TLS 1.3: after the handshake). */
static int
origin_new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	struct exchange *s = SSL_get_app_data(ssl);
	struct tls_sess_slot *slot;

	if (s == NULL || s->closing)
		return 0;
	log_debug("session %llu: origin %s:%u: new resumable session",
	    (unsigned long long)s->id, s->target.host, s->target.port);
	slot = &s->w->tls_sessions[sess_slot(s->target.host, s->target.port)];
	if (slot->sess != NULL)
		SSL_SESSION_free(slot->sess);
	slot->sess = sess;
	snprintf(slot->host, sizeof(slot->host), "%s", s->target.host);
	slot->port = s->target.port;
	return 1;	/* we keep the reference */
}

int
proxy_tls_worker_init(struct worker *w, const struct config *cfg)
{
	w->tls_client_ctx = SSL_CTX_new(TLS_server_method());
	w->tls_origin_ctx = SSL_CTX_new(TLS_client_method());
	if (w->tls_client_ctx == NULL || w->tls_origin_ctx == NULL) {
		log_openssl("SSL_CTX_new");
		return -1;
	}
	/* An idle intercepted tunnel keeps no record buffers (about 34 KiB each side). */
	SSL_CTX_set_mode(w->tls_client_ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_mode(w->tls_origin_ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_min_proto_version(w->tls_client_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(w->tls_client_ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(w->tls_client_ctx, proxy_tls_alpn_cb,
	    (void *)cfg);

	SSL_CTX_set_min_proto_version(w->tls_origin_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(w->tls_origin_ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_verify(w->tls_origin_ctx, SSL_VERIFY_PEER, NULL);
	if (cfg->ca_bundle == NULL) {
		if (SSL_CTX_set_default_verify_paths(w->tls_origin_ctx) != 1) {
			log_openssl("loading the system trust store");
			return -1;
		}
	} else if (SSL_CTX_load_verify_locations(w->tls_origin_ctx,
	    cfg->ca_bundle, NULL) != 1) {
		log_openssl(cfg->ca_bundle);
		return -1;
	}
	if (SSL_CTX_set_alpn_protos(w->tls_origin_ctx, alpn_http11,
	    sizeof(alpn_http11) - 1) != 0) {
		log_openssl("SSL_CTX_set_alpn_protos");
		return -1;
	}
	SSL_CTX_set_session_cache_mode(w->tls_origin_ctx,
	    SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(w->tls_origin_ctx, origin_new_session_cb);
	return 0;
}

void
proxy_tls_worker_free(struct worker *w)
{
	int i;

	for (i = 0; i < PROXY_TLS_SESSIONS; i++)
		if (w->tls_sessions[i].sess != NULL)
			SSL_SESSION_free(w->tls_sessions[i].sess);
	SSL_CTX_free(w->tls_client_ctx);
	SSL_CTX_free(w->tls_origin_ctx);
}

/*
 * Sockets under intercepted TLS, on both sides. The TLS filter sits on one
 * end of a bufferevent pair; the other end is driven here: ciphertext the
 * filter produces is written to the socket at once (a socket bufferevent
 * would arm EV_WRITE, wait a loop turn and disarm it: two epoll_ctl calls
 * and a wakeup per message), and the socket stays registered for reading
 * for the whole connection, read with one read(2) per wakeup (no FIONREAD,
 * no separate read of each record header). Bounded both ways: reading
 * pauses while the filter has not taken what was read, and the filter
 * stops encrypting while the socket is blocked.
 */
#define CSOCK_READ		16384
/*
 * How much a TLS filter asks SSL_read for at a time. libevent reserves
 * that much in the filter's input before every read, also for the read
 * it tries each time the input is drained below its high watermark,
 * which finds nothing on an idle connection and keeps the empty chain.
 * 976 bytes fill libevent's smallest chain, 1 KiB: what an idle tunnel
 * keeps on each side (3,968 kept 4 KiB, 16 KiB keeps 32 KiB). Once a
 * socket read or a filter's input is larger, whole records are read
 * (csock_read_cb and proxy_tls_read_size switch; csock_tidy switches
 * back when the connection idles).
 */
#define TLS_READ_SMALL		976
#define TLS_READ_BULK		16384
#define CSOCK_HWM		(256 * 1024)
/*
 * Ciphertext read from the socket that the filter has not taken: reading
 * pauses there. The filter stops taking when its reader does (an HTTP/2
 * stream whose window is shut): what waits then is this, not the 256 KiB
 * of CSOCK_HWM (100 such streams held 25 MiB more). The kernel's socket
 * buffer keeps the rest, and TCP's window stops the origin.
 */
#define CSOCK_READ_HWM		(32 * 1024)
/*
 * Deferred callbacks: a filter that decrypts a last record and a
 * close_notify in one pass reports the end before it has stored that
 * record (libevent 2.1 do_read); deferred, the read callback runs first.
 */
#define CSOCK_FILTER_OPTS	(BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS)

struct csock {
	struct event_base	*base;
	evutil_socket_t		 fd;		/* -1 until connect */
	struct bufferevent	*near;		/* the pair end under the filter */
	struct bufferevent	*far;		/* the end driven here */
	struct bufferevent	*filter;	/* the TLS filter on near, once made */
	struct event		*rev;		/* persistent EV_READ */
	struct event		*wev;		/* armed while a write would block */
	struct event		*later_ev;	/* deferred free, or tidying */
	int			 read_paused;
	int			 dead;		/* connection gone; freed next loop turn */
	struct timespec		 wrote;		/* the first write: connected (0: not yet) */
};

static void
csock_error(struct csock *cs, short what)
{
	event_del(cs->rev);
	event_del(cs->wev);
	/* The filter hears it as from a socket, and tells the exchange. */
	bufferevent_trigger_event(cs->near, what | BEV_EVENT_ERROR, 0);
}

/* Write what the filter produced; arm EV_WRITE only when the socket is full. */
static void
csock_flush(struct csock *cs)
{
	struct evbuffer *in = bufferevent_get_input(cs->far);
	int n;

	if (cs->fd == -1)
		return;			/* not connected yet: it waits */
	while (evbuffer_get_length(in) > 0) {
		if ((n = evbuffer_write(in, cs->fd)) > 0) {
			if (cs->wrote.tv_sec == 0)
				clock_gettime(CLOCK_MONOTONIC, &cs->wrote);
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
			event_add(cs->wev, NULL);
			if (evbuffer_get_length(in) > CSOCK_HWM)
				bufferevent_disable(cs->far, EV_READ);
			return;
		}
		csock_error(cs, BEV_EVENT_WRITING);
		return;
	}
}

static void
csock_far_read_cb(struct bufferevent *bev, void *arg)
{
	struct csock *cs = arg;

	if (cs->dead)
		return;
	if (cs->fd != -1 && !event_pending(cs->wev, EV_WRITE, NULL))
		csock_flush(cs);
	else if (evbuffer_get_length(bufferevent_get_input(bev)) > CSOCK_HWM)
		bufferevent_disable(bev, EV_READ);	/* csock_write_cb resumes */
}

/* The filter took what was read: reading may go on. */
static void
csock_far_write_cb(struct bufferevent *bev, void *arg)
{
	struct csock *cs = arg;

	if (!cs->dead && cs->read_paused &&
	    evbuffer_get_length(bufferevent_get_output(cs->far)) <
	    CSOCK_READ_HWM) {
		cs->read_paused = 0;
		event_add(cs->rev, NULL);
	}
}

static void
csock_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct csock *cs = arg;

	csock_flush(cs);
	if (!cs->dead && !event_pending(cs->wev, EV_WRITE, NULL))
		bufferevent_enable(cs->far, EV_READ);	/* may flush more */
}

/*
 * What a connection keeps while it idles, looked at CSOCK_TIDY_MS after
 * its last read (the filter decrypts what was read in a deferred
 * callback: pairs always defer):
 *
 * - SSL_MODE_RELEASE_BUFFERS frees a record buffer once a read or a write
 *   of application data leaves it empty, but a handshake message after
 *   the handshake (TLS 1.3: each NewSessionTicket an origin sends) makes
 *   OpenSSL 3.0 set up a write buffer too, and no write comes to release
 *   it: 16 KiB. SSL_free_buffers() frees buffers that hold nothing (a
 *   partial record, an unsent one: it declines; it is not asked while a
 *   record is half read, which OpenSSL before 3.0.14 got wrong,
 *   CVE-2024-4741); the next read or write makes them again.
 * - After a bulk transfer the filter reads whole records, and the read it
 *   tries after the last drain left a 32 KiB empty chain in its input.
 *   Back to small reads, and an empty reference chain appended: libevent
 *   frees the empty chains before the one it inserts, and the next read
 *   replaces that one (no bytes move, so no callback runs).
 */
#define CSOCK_TIDY_MS		50

static void
csock_tidy_later(struct csock *cs)
{
	static const struct timeval tv = { 0, CSOCK_TIDY_MS * 1000 };

	if (cs->filter != NULL)
		evtimer_add(cs->later_ev, &tv);
}

static void
csock_tidy(struct csock *cs)
{
	SSL *ssl = bufferevent_openssl_get_ssl(cs->filter);
	struct evbuffer *in = bufferevent_get_input(cs->filter);

	if (ssl != NULL && SSL_is_init_finished(ssl) && !SSL_has_pending(ssl))
		(void)SSL_free_buffers(ssl);
	if (bufferevent_get_max_single_read(cs->filter) > TLS_READ_SMALL &&
	    evbuffer_get_length(in) == 0) {
		bufferevent_set_max_single_read(cs->filter, TLS_READ_SMALL);
		(void)evbuffer_add_reference(in, "", 0, NULL, NULL);
	}
}

static void
csock_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct csock *cs = arg;
	struct evbuffer *out = bufferevent_get_output(cs->far);
	struct evbuffer_iovec v;
	ssize_t n;

	if (evbuffer_reserve_space(out, CSOCK_READ, &v, 1) < 1) {
		csock_error(cs, BEV_EVENT_READING);
		return;
	}
	if ((n = read(cs->fd, v.iov_base, v.iov_len)) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			csock_error(cs, BEV_EVENT_READING);
		return;
	}
	if (n == 0) {
		/* What was read goes up first, then the end of the stream. */
		event_del(cs->rev);
		bufferevent_flush(cs->far, EV_WRITE, BEV_FINISHED);
		return;
	}
	v.iov_len = (size_t)n;
	/*
	 * More than a request or a small answer: the filter reads whole
	 * records, on every path (HTTP/1.1, HTTP/2, relays); csock_tidy
	 * goes back to small reads when the connection idles.
	 */
	if (cs->filter != NULL && (size_t)n >= TLS_READ_SMALL &&
	    bufferevent_get_max_single_read(cs->filter) < TLS_READ_BULK)
		bufferevent_set_max_single_read(cs->filter, TLS_READ_BULK);
	/* The pair hands it to the filter, which may end the connection. */
	evbuffer_commit_space(out, &v, 1);
	if (cs->dead)
		return;
	csock_tidy_later(cs);
	if (evbuffer_get_length(out) >= CSOCK_READ_HWM) {
		cs->read_paused = 1;
		event_del(cs->rev);
	}
}

static void
csock_destroy(struct csock *cs)
{
	if (cs->rev != NULL)
		event_free(cs->rev);
	if (cs->wev != NULL)
		event_free(cs->wev);
	if (cs->later_ev != NULL)
		event_free(cs->later_ev);
	if (cs->far != NULL)
		bufferevent_free(cs->far);
	if (cs->fd != -1)
		evutil_closesocket(cs->fd);
	free(cs);
}

/* Released: free it. Alive: it idles (csock_tidy). */
static void
csock_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct csock *cs = arg;

	if (cs->dead)
		csock_destroy(cs);
	else if (cs->filter != NULL && bufferevent_pair_get_partner(cs->far) != NULL)
		csock_tidy(cs);		/* (no partner: the filter is gone) */
}

/* Events for a socket that is now known. */
static int
csock_set_fd(struct csock *cs, evutil_socket_t fd)
{
	cs->rev = event_new(cs->base, fd, EV_READ | EV_PERSIST, csock_read_cb, cs);
	cs->wev = event_new(cs->base, fd, EV_WRITE, csock_write_cb, cs);
	if (cs->rev == NULL || cs->wev == NULL)
		return -1;
	cs->fd = fd;
	return 0;
}

/* A pair for a filter to sit on; fd -1: a socket that connect() brings. */
static struct csock *
csock_new(struct event_base *base, evutil_socket_t fd)
{
	struct bufferevent *pair[2];
	struct csock *cs;

	if ((cs = calloc(1, sizeof(*cs))) == NULL)
		return NULL;
	cs->base = base;
	cs->fd = -1;
	if (bufferevent_pair_new(base, 0, pair) == -1) {
		free(cs);
		return NULL;
	}
	cs->near = pair[0];
	cs->far = pair[1];
	cs->later_ev = event_new(base, -1, 0, csock_later_cb, cs);
	if (cs->later_ev == NULL || (fd != -1 && csock_set_fd(cs, fd) == -1)) {
		cs->fd = -1;		/* the caller keeps its socket */
		bufferevent_free(cs->near);
		csock_destroy(cs);
		return NULL;
	}
	/* The filter's output stops at the pair: backpressure reaches the exchange. */
	bufferevent_setwatermark(cs->near, EV_WRITE, 0, CSOCK_HWM);
	bufferevent_setcb(cs->far, csock_far_read_cb, csock_far_write_cb, NULL, cs);
	bufferevent_enable(cs->far, EV_READ | EV_WRITE);
	return cs;
}

/* Before its filter is gone: stop, and free from the loop (callbacks of
 * ours may be on the stack). */
static void
csock_release(struct csock *cs)
{
	if (cs->rev != NULL)
		event_del(cs->rev);
	if (cs->wev != NULL)
		event_del(cs->wev);
	bufferevent_setcb(cs->far, NULL, NULL, NULL, NULL);
	cs->dead = 1;
	event_active(cs->later_ev, EV_TIMEOUT, 0);
}

/* The csock under a TLS filter, or NULL. */
static struct csock *
csock_under(struct bufferevent *bev)
{
	struct bufferevent *u, *far;
	bufferevent_data_cb rcb;
	void *arg;

	if (bev == NULL || (u = bufferevent_get_underlying(bev)) == NULL ||
	    (far = bufferevent_pair_get_partner(u)) == NULL)
		return NULL;
	bufferevent_getcb(far, &rcb, NULL, NULL, &arg);
	return rcb == csock_far_read_cb ? arg : NULL;
}

size_t
proxy_tls_client_unsent(struct exchange *s)
{
	struct csock *cs = csock_under(s->c->cbev);

	return cs != NULL ? evbuffer_get_length(bufferevent_get_input(cs->far)) : 0;
}

void
proxy_tls_bev_free(struct bufferevent *bev)
{
	struct csock *cs = csock_under(bev);

	if (cs != NULL)
		csock_release(cs);
	bufferevent_free(bev);
}

/*
 * Terminate the client's TLS with a leaf for the tunnel's name. The
 * client's socket moves from its socket bufferevent to a csock, and the
 * ClientHello, already read, goes to the filter first.
 */
/*
 * A session the client resumes is one it had with this sandbox in a
 * tunnel to this name and port: the context is their digest, and OpenSSL
 * resumes no session (id or ticket) made under another (RFC 6066 3: not
 * with another server_name). Without it a session from a tunnel to a.test
 * was resumed in one to b.test -- a.test's certificate for b.test -- and
 * by another sandbox.
 */
static int
session_context(struct exchange *s, SSL *ssl)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char id[sizeof(s->ident.sandbox) + sizeof(s->target.host) + 16];
	int n;

	n = snprintf(id, sizeof(id), "%s%c%s%c%u", s->has_ident ?
	    s->ident.sandbox : "", '\0', s->target.host, '\0',
	    (unsigned)s->target.port);
	if (n < 0 || (size_t)n >= sizeof(id) ||
	    EVP_Digest(id, (size_t)n, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen > SSL_MAX_SID_CTX_LENGTH)
		return -1;
	return SSL_set_session_id_context(ssl, md, mdlen) == 1 ? 0 : -1;
}

int
proxy_tls_intercept_client(struct exchange *s, bufferevent_event_cb on_event)
{
	struct bufferevent *f, *under, *old = s->c->cbev;
	struct evbuffer *hello = NULL;
	struct csock *cs = NULL;
	X509 *leaf = NULL;
	EVP_PKEY *key = NULL;
	SSL *ssl;

	exchange_mark(s, MARK_HELLO);
	/* The tunnel's decision for its requests, before anything is handed over. */
	if (conn_tun_reserve(s, s->n_addrs) == -1)
		return -1;
	/* Not with a cached leaf either: the keeper's absence is absolute. */
	if (!keeper_client_up(s->p->kc))
		return -1;
	if (ca_leaf(s->p->ca, s->target.host, s->target.is_ip, &leaf, &key) == -1) {
		log_warnx("session %llu: cannot mint a certificate for %s",
		    (unsigned long long)s->id, s->target.host);
		return -1;
	}
	exchange_mark(s, MARK_LEAF);
	if ((ssl = SSL_new(s->w->tls_client_ctx)) == NULL ||
	    session_context(s, ssl) == -1 ||
	    SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, key) != 1 ||
	    SSL_add1_chain_cert(ssl, ca_cert(s->p->ca)) != 1) {
		log_openssl("preparing the client-side TLS");
		SSL_free(ssl);
		X509_free(leaf);
		EVP_PKEY_free(key);
		return -1;
	}
	X509_free(leaf);
	EVP_PKEY_free(key);
	/* Unwritten bytes (a pipelining client) keep the socket bufferevent. */
	if (evbuffer_get_length(bufferevent_get_output(old)) == 0 &&
	    (hello = evbuffer_new()) != NULL &&
	    (cs = csock_new(s->w->base, bufferevent_getfd(old))) == NULL) {
		evbuffer_free(hello);
		hello = NULL;
	}
	under = cs != NULL ? cs->near : old;
	f = bufferevent_openssl_filter_new(s->w->base, under, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, CSOCK_FILTER_OPTS);
	if (f == NULL) {
		SSL_free(ssl);
		if (cs != NULL) {
			bufferevent_free(cs->near);
			cs->fd = -1;		/* still the socket bufferevent's */
			csock_destroy(cs);
			evbuffer_free(hello);
		}
		return -1;
	}
	/* From here the filter owns ssl and what it sits on. */
	bufferevent_openssl_set_allow_dirty_shutdown(f, 1);
	bufferevent_set_max_single_read(f, TLS_READ_SMALL);
	if (cs != NULL) {
		cs->filter = f;
		evbuffer_add_buffer(hello, bufferevent_get_input(old));
		bufferevent_setfd(old, -1);	/* the fd is the csock's now */
		bufferevent_free(old);
		event_add(cs->rev, NULL);
	}
	s->c->cbev = f;
	s->c->intercepted = 1;
	conn_tunnel_opened(s, STATS_TUN_INTERCEPTED);
	(void)conn_tunnel_http(s);	/* s->tun is there: it cannot fail */
	s->state = S_HEAD;
	bufferevent_setwatermark(f, EV_READ, 0, PROXY_READ_HWM >
	    s->p->cfg->max_header_bytes + 1024 ? PROXY_READ_HWM :
	    s->p->cfg->max_header_bytes + 1024);
	bufferevent_setcb(f, s->p->fe->client_read, NULL, on_event, s);
	bufferevent_enable(f, EV_READ | EV_WRITE);
	if (cs != NULL) {
		/* The ClientHello arrived before the filter: hand it over now. */
		evbuffer_add_buffer(bufferevent_get_output(cs->far), hello);
		evbuffer_free(hello);
	} else
		bufferevent_trigger(bufferevent_get_underlying(f), EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS);
	return 0;
}

/*
 * The origin side: a TLS filter on a csock whose socket proxy_tls_connect()
 * opens; the ClientHello waits in the pair until then.
 */
struct bufferevent *
proxy_tls_origin_bev(struct exchange *s)
{
	struct bufferevent *bev;
	struct tls_sess_slot *slot;
	struct csock *cs;
	SSL *ssl;

	if ((ssl = SSL_new(s->w->tls_origin_ctx)) == NULL)
		return NULL;
	SSL_set_app_data(ssl, s);
	/*
	 * An origin that a credential is bound to may echo its secret: the
	 * plaintext is wiped once read (OpenSSL then wipes its whole read
	 * buffer each time it is released, about 5 % of an intercepted
	 * request's CPU: not for origins that never see a secret).
	 */
	if (cred_host_bound(s))
		SSL_set_options(ssl, SSL_OP_CLEANSE_PLAINTEXT);
	if (!s->target.is_ip && SSL_set_tlsext_host_name(ssl, s->target.host) != 1)
		goto fail;
	if (s->target.is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    s->target.host) != 1)
			goto fail;
	} else if (SSL_set1_host(ssl, s->target.host) != 1)
		goto fail;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	/* An HTTP/2 stream's origin (proxy_h2_origin.c): h2 (gRPC: only h2). */
	if (s->fwd.origin_alpn == 1 && SSL_set_alpn_protos(ssl, (const unsigned char *)
	    "\x02h2", 3) != 0)
		goto fail;
	if (s->fwd.origin_alpn == 2 && SSL_set_alpn_protos(ssl, (const unsigned char *)
	    "\x02h2\x08http/1.1", 12) != 0)
		goto fail;
	slot = &s->w->tls_sessions[sess_slot(s->target.host, s->target.port)];
	if (slot->sess != NULL && slot->port == s->target.port &&
	    strcmp(slot->host, s->target.host) == 0 &&
	    SSL_SESSION_is_resumable(slot->sess))
		SSL_set_session(ssl, slot->sess);
	if ((cs = csock_new(s->w->base, -1)) == NULL)
		goto fail;
	bev = bufferevent_openssl_filter_new(s->w->base, cs->near, ssl,
	    BUFFEREVENT_SSL_CONNECTING, CSOCK_FILTER_OPTS);
	if (bev == NULL) {
		bufferevent_free(cs->near);
		csock_destroy(cs);
		goto fail;
	}
	cs->filter = bev;
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	bufferevent_set_max_single_read(bev, TLS_READ_SMALL);
	return bev;
fail:
	log_openssl("preparing the origin-side TLS");
	SSL_free(ssl);
	return NULL;
}

/*
 * A read that filled what was asked for is likely a bulk transfer: read
 * whole records from now on; a small one goes back to small reads.
 */
void
proxy_tls_read_size(struct bufferevent *bev)
{
	size_t n = evbuffer_get_length(bufferevent_get_input(bev));

	if (bufferevent_openssl_get_ssl(bev) == NULL)
		return;
	bufferevent_set_max_single_read(bev, n >= TLS_READ_SMALL ?
	    TLS_READ_BULK : TLS_READ_SMALL);
}

/* Connect bev's socket: a csock's (see above), or a socket bufferevent's. */
int
proxy_tls_connect(struct bufferevent *bev, const struct sockaddr *sa,
    int salen)
{
	struct csock *cs = csock_under(bev);
	evutil_socket_t fd;
	int one = 1;

	if (cs == NULL)
		return bufferevent_socket_connect(bev, sa, salen);
	if (cs->fd != -1)
		return -1;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	/* Whole TLS records go out as they are made: no Nagle delay. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((connect(fd, sa, (socklen_t)salen) == -1 && errno != EINPROGRESS) ||
	    csock_set_fd(cs, fd) == -1) {
		close(fd);
		return -1;
	}
	/* Readable on the ServerHello, or on a refused connection's error. */
	event_add(cs->rev, NULL);
	/*
	 * A filter starts its handshake when what it sits on calls back:
	 * the ClientHello now (written when the connect completes).
	 */
	bufferevent_trigger(cs->near, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS);
	if (!cs->dead)
		csock_flush(cs);
	return 0;
}

int
proxy_tls_tcp_connected(struct bufferevent *bev, struct timespec *at)
{
	struct csock *cs = csock_under(bev);

	if (cs == NULL || cs->wrote.tv_sec == 0)
		return -1;
	*at = cs->wrote;
	return 0;
}

/* Why the origin handshake failed, for the 502 body and the log. */
const char *
proxy_tls_origin_error(struct bufferevent *bev, char *buf, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e;
	long vr;

	buf[0] = '\0';
	if (ssl != NULL && (vr = SSL_get_verify_result(ssl)) != X509_V_OK) {
		snprintf(buf, len, "origin certificate rejected: %s",
		    X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return buf;
	}
	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		char ebuf[160];
		ERR_error_string_n(e, ebuf, sizeof(ebuf));
		snprintf(buf, len, "origin TLS handshake failed: %s", ebuf);
	}
	if (buf[0] == '\0')
		snprintf(buf, len, "origin TLS handshake failed");
	ERR_clear_error();
	return buf;
}

/* After the origin handshake: note whether the cached session was resumed. */
void
proxy_tls_origin_connected(struct exchange *s, struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl != NULL && SSL_session_reused(ssl))
		s->c->origin_resumed = 1;
	exchange_mark(s, MARK_ORIGIN_TLS);
	if (ssl != NULL && log_enabled(LOG_LVL_DEBUG))
		log_debug("session %llu: origin %s:%u: %s, %s",
		    (unsigned long long)s->id, s->target.host, s->target.port,
		    SSL_get_version(ssl), SSL_session_reused(ssl) ?
		    "session resumed" : "full handshake");
}

/*
 * An origin connection freed: a TLS connection that ends without a
 * shutdown makes OpenSSL mark its session unresumable, so it is ended
 * quietly first (no alert is waited for; the socket closes right after).
 */
void
proxy_tls_origin_close(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl != NULL && SSL_is_init_finished(ssl)) {
		SSL_set_quiet_shutdown(ssl, 1);
		(void)SSL_shutdown(ssl);
		ERR_clear_error();
	}
	proxy_tls_bev_free(bev);
}
