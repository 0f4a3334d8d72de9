/*
 * TLS interception (SPEC §6): the sandbox side is terminated with a leaf
 * from sandgate's CA, the origin side is a fresh TLS connection verified
 * against upstream.ca_bundle with hostname checks. Owns the per-worker
 * SSL_CTXs and the origin session cache used for resumption.
 */
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/log.h"
#include "core/reason.h"
#include "proxy/proxy_int.h"
#include "vault/ca.h"

static const unsigned char alpn_http11[] = "\x08http/1.1";

static int
alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned char *sel;

	/* http/1.1 or nothing: the gateway reads HTTP/1.x only. */
	if (SSL_select_next_proto(&sel, outlen, alpn_http11,
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
	struct session *s = SSL_get_app_data(ssl);
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
	SSL_CTX_set_min_proto_version(w->tls_client_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(w->tls_client_ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(w->tls_client_ctx, alpn_select_cb, NULL);

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
 * Terminate the client's TLS with a leaf for the tunnel's name. The
 * ClientHello is still in the client's input buffer: the filter reads it
 * from there.
 */
int
proxy_tls_intercept_client(struct session *s)
{
	struct bufferevent *f;
	X509 *leaf = NULL;
	EVP_PKEY *key = NULL;
	SSL *ssl;

	if (ca_leaf(s->p->ca, s->target.host, s->target.is_ip, &leaf, &key) == -1) {
		log_warnx("session %llu: cannot mint a certificate for %s",
		    (unsigned long long)s->id, s->target.host);
		return -1;
	}
	if ((ssl = SSL_new(s->w->tls_client_ctx)) == NULL ||
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
	f = bufferevent_openssl_filter_new(s->w->base, s->cbev, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (f == NULL) {
		SSL_free(ssl);
		return -1;
	}
	/* From here the filter owns ssl and the socket bufferevent. */
	bufferevent_openssl_set_allow_dirty_shutdown(f, 1);
	s->cbev = f;
	s->intercepted = 1;
	s->tunnel_http = 1;
	s->state = S_HEAD;
	bufferevent_setwatermark(f, EV_READ, 0, PROXY_READ_HWM >
	    s->p->cfg->max_header_bytes + 1024 ? PROXY_READ_HWM :
	    s->p->cfg->max_header_bytes + 1024);
	bufferevent_setcb(f, http_client_read_cb, NULL, session_client_event_cb, s);
	bufferevent_enable(f, EV_READ | EV_WRITE);
	/* The ClientHello arrived before the filter: make it look at it now. */
	bufferevent_trigger(bufferevent_get_underlying(f), EV_READ,
	    BEV_TRIG_IGNORE_WATERMARKS);
	return 0;
}

/* A socket bufferevent that connects, then does the origin handshake. */
struct bufferevent *
proxy_tls_origin_bev(struct session *s)
{
	struct bufferevent *bev;
	struct tls_sess_slot *slot;
	SSL *ssl;

	if ((ssl = SSL_new(s->w->tls_origin_ctx)) == NULL)
		return NULL;
	SSL_set_app_data(ssl, s);
	if (!s->target.is_ip && SSL_set_tlsext_host_name(ssl, s->target.host) != 1)
		goto fail;
	if (s->target.is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    s->target.host) != 1)
			goto fail;
	} else if (SSL_set1_host(ssl, s->target.host) != 1)
		goto fail;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	slot = &s->w->tls_sessions[sess_slot(s->target.host, s->target.port)];
	if (slot->sess != NULL && slot->port == s->target.port &&
	    strcmp(slot->host, s->target.host) == 0 &&
	    SSL_SESSION_is_resumable(slot->sess))
		SSL_set_session(ssl, slot->sess);
	bev = bufferevent_openssl_socket_new(s->w->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		goto fail;
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
fail:
	log_openssl("preparing the origin-side TLS");
	SSL_free(ssl);
	return NULL;
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
proxy_tls_origin_connected(struct session *s, struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl != NULL && log_enabled(LOG_LVL_DEBUG))
		log_debug("session %llu: origin %s:%u: %s, %s",
		    (unsigned long long)s->id, s->target.host, s->target.port,
		    SSL_get_version(ssl), SSL_session_reused(ssl) ?
		    "session resumed" : "full handshake");
}

/*
 * Before an origin connection is freed: a TLS connection that ends without
 * a shutdown makes OpenSSL mark its session unresumable, so end it quietly
 * (no alert is waited for; the socket closes right after).
 */
void
proxy_tls_origin_release(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl == NULL || !SSL_is_init_finished(ssl))
		return;
	SSL_set_quiet_shutdown(ssl, 1);
	(void)SSL_shutdown(ssl);
	ERR_clear_error();
}
