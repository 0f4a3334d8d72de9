/*
 * Unit test of the memory a swapped request head lives in
 * (src/vault/vault_wbuf.c): the head with the secret swapped in reaches
 * libevent by reference, not as a copy, and the memory that held it is
 * wiped when libevent lets go of it -- drained, freed unsent, or written
 * through a TLS filter as the origin side of an intercepted connection is.
 *
 * munmap(2) is interposed: vault memory goes back to the kernel through it,
 * so each region is seen, and checked for a byte that is not zero, at the
 * moment it is released.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "check.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define PH	"sg-ph-abcdefghijklmnopqrstuvwxyz234567"
#define SECRET	"sk-live/REAL+secret=0123456789"

/* ------------------------------------------------------------ munmap */

#define MAX_RELEASED	256

static struct {
	const unsigned char	*lo;
	size_t			 len;
	int			 clean;	/* every byte zero when released */
} released[MAX_RELEASED];
static size_t n_released, watched;

int
munmap(void *addr, size_t len)
{
	const unsigned char *p = addr;
	size_t i = 0;

	while (i < len && p[i] == 0)
		i++;
	if (n_released < MAX_RELEASED) {
		released[n_released].lo = p;
		released[n_released].len = len;
		released[n_released].clean = i == len;
		n_released++;
	}
	return (int)syscall(SYS_munmap, addr, len);
}

/* From now on: an address may be mapped again after it was released. */
static void
watch(void)
{
	watched = n_released;
}

/*
 * Since watch(): 1, p was in memory released wiped; -1, released holding
 * bytes; 0, not released.
 */
static int
release_of(const void *p)
{
	const unsigned char *c = p;
	size_t i;

	for (i = n_released; i > watched; i--)
		if (c >= released[i - 1].lo &&
		    c < released[i - 1].lo + released[i - 1].len)
			return released[i - 1].clean ? 1 : -1;
	return 0;
}

/* ------------------------------------------------------------ heads */

static struct vault_snapshot *snap;

static void
snap_setup(void)
{
	const char *names[] = { "api" };
	const unsigned char *vals[] = { (const unsigned char *)SECRET };
	size_t lens[] = { strlen(SECRET) };

	if ((snap = vault_snapshot_build(names, vals, lens, 1)) == NULL)
		abort();
}

/*
 * A head as proxy_http.c builds one: plain bytes first (the buffer is on
 * the heap then), the secret in the query, raw in a header, and inside
 * Basic credentials. Releases are watched from here on.
 */
static struct vault_wbuf *
head_new(void)
{
	static const char basic[] =	/* base64("u:" PH) */
	    "Basic dTpzZy1waC1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejIzNDU2Nw==";
	struct vault_wbuf *wb;
	int ok;

	if ((wb = vault_wbuf_new()) == NULL)
		abort();
	vault_wbuf_add(wb, "GET /v1/x", 9);
	ok = vault_swap(snap, "api", PH, "?k=" PH, strlen("?k=" PH), 1,
	    wb) == 1;
	vault_wbuf_printf(wb, " HTTP/1.1\r\nHost: %s\r\n", "api.example.com");
	vault_wbuf_add(wb, "Authorization: ", 15);
	ok &= vault_swap(snap, "api", PH, "Bearer " PH,
	    strlen("Bearer " PH), 0, wb) == 1;
	vault_wbuf_add(wb, "\r\nX-Basic: ", 11);
	ok &= vault_swap(snap, "api", PH, basic, strlen(basic), 0, wb) == 1;
	vault_wbuf_add(wb, "\r\n\r\n", 4);
	CHECK(ok);
	watch();
	return wb;
}

static const char head_want[] =
    "GET /v1/x?k=sk-live%2FREAL%2Bsecret%3D0123456789 HTTP/1.1\r\n"
    "Host: api.example.com\r\n"
    "Authorization: Bearer " SECRET "\r\n"
    /* base64("u:" SECRET) */
    "X-Basic: Basic dTpzay1saXZlL1JFQUwrc2VjcmV0PTAxMjM0NTY3ODk=\r\n"
    "\r\n";

/* The one chain of out, which must be the whole head: its bytes. */
static const unsigned char *
only_chain(struct evbuffer *out)
{
	struct evbuffer_iovec v[2];

	CHECK_INT(evbuffer_peek(out, -1, NULL, v, 2), 1);
	CHECK_INT(v[0].iov_len, strlen(head_want));
	CHECK(v[0].iov_len == strlen(head_want) &&
	    memcmp(v[0].iov_base, head_want, v[0].iov_len) == 0);
	return v[0].iov_base;
}

/* Drained as a socket or TLS write drains it: wiped at the last byte. */
static void
test_drained(void)
{
	struct evbuffer *out = evbuffer_new();
	struct vault_wbuf *wb = head_new();
	const unsigned char *p;

	CHECK(vault_wbuf_hand(wb, out) == 0);
	p = only_chain(out);
	CHECK_INT(release_of(p), 0);
	evbuffer_drain(out, 10);
	CHECK_INT(release_of(p), 0);
	evbuffer_drain(out, evbuffer_get_length(out));
	CHECK_INT(release_of(p), 1);
	evbuffer_free(out);
}

/* Moved on as proxy_forward.c moves it, then freed unsent. */
static void
test_freed_unsent(void)
{
	struct evbuffer *pending = evbuffer_new(), *out = evbuffer_new();
	struct vault_wbuf *wb = head_new();
	const unsigned char *p;

	evbuffer_add(out, "x", 1);
	CHECK(vault_wbuf_hand(wb, pending) == 0);
	p = only_chain(pending);
	evbuffer_add_buffer(out, pending);
	evbuffer_free(pending);
	CHECK_INT(release_of(p), 0);
	evbuffer_drain(out, 1);
	CHECK(only_chain(out) == p);
	evbuffer_free(out);
	CHECK_INT(release_of(p), 1);
}

/* The last byte written to wb (its end: room for 0 more, minus one). */
static const unsigned char *
last_byte(struct vault_wbuf *wb)
{
	return vault_wbuf_secret_room(wb, 0) - 1;
}

/* Never handed over (a later header failed): freed and wiped. */
static void
test_never_handed(void)
{
	struct vault_wbuf *wb = head_new();
	const unsigned char *p = last_byte(wb);

	CHECK(p != NULL && release_of(p) == 0);
	vault_wbuf_free(wb);
	CHECK_INT(release_of(p), 1);
}

/* Growing after the secret: each smaller block is wiped as it goes. */
static void
test_growth(void)
{
	struct evbuffer *out = evbuffer_new();
	struct vault_wbuf *wb = head_new();
	const unsigned char *first = last_byte(wb);
	struct evbuffer_iovec v;
	char filler[4096];
	int i;

	memset(filler, 'f', sizeof(filler));
	for (i = 0; i < 64; i++)
		vault_wbuf_add(wb, filler, sizeof(filler));
	CHECK_INT(release_of(first), 1);
	CHECK(vault_wbuf_hand(wb, out) == 0);
	CHECK_INT(evbuffer_get_length(out), strlen(head_want) + 64 * 4096);
	CHECK_INT(evbuffer_peek(out, -1, NULL, &v, 1), 1);
	evbuffer_free(out);
	CHECK_INT(release_of(v.iov_base), 1);
}

/* ------------------------------------------------------------ TLS */

struct tls_pair {
	struct event_base	*base;
	SSL_CTX			*sctx, *cctx;
	struct bufferevent	*client, *server;
	struct evbuffer		*got;	/* what the server read */
};

static void
server_read_cb(struct bufferevent *bev, void *arg)
{
	struct tls_pair *t = arg;

	evbuffer_add_buffer(t->got, bufferevent_get_input(bev));
	if (evbuffer_get_length(t->got) >= strlen(head_want))
		event_base_loopbreak(t->base);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tls_pair *t = arg;

	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF))
		event_base_loopbreak(t->base);
}

/* A self-signed P-256 certificate for the server side. */
static int
server_ctx(struct tls_pair *t)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *nm;
	int ok = 0;

	if (pk == NULL || x == NULL)
		goto done;
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
	    (const unsigned char *)"origin.test", -1, -1, 0);
	if (X509_set_issuer_name(x, nm) != 1 || X509_set_pubkey(x, pk) != 1 ||
	    X509_sign(x, pk, EVP_sha256()) == 0)
		goto done;
	t->sctx = SSL_CTX_new(TLS_server_method());
	ok = t->sctx != NULL && SSL_CTX_use_certificate(t->sctx, x) == 1 &&
	    SSL_CTX_use_PrivateKey(t->sctx, pk) == 1;
done:
	X509_free(x);
	EVP_PKEY_free(pk);
	return ok ? 0 : -1;
}

/*
 * The origin side of an intercepted connection: a TLS filter on one end of
 * a bufferevent pair (proxy_tls.c), here with a TLS server on the other.
 */
static int
tls_pair_new(struct tls_pair *t)
{
	struct bufferevent *pair[2];
	int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;

	memset(t, 0, sizeof(*t));
	if ((t->base = event_base_new()) == NULL || server_ctx(t) == -1 ||
	    (t->cctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    (t->got = evbuffer_new()) == NULL ||
	    bufferevent_pair_new(t->base, 0, pair) == -1)
		return -1;
	t->client = bufferevent_openssl_filter_new(t->base, pair[0],
	    SSL_new(t->cctx), BUFFEREVENT_SSL_CONNECTING, opts);
	t->server = bufferevent_openssl_filter_new(t->base, pair[1],
	    SSL_new(t->sctx), BUFFEREVENT_SSL_ACCEPTING, opts);
	if (t->client == NULL || t->server == NULL)
		return -1;
	bufferevent_setcb(t->client, NULL, NULL, event_cb, t);
	bufferevent_setcb(t->server, server_read_cb, NULL, event_cb, t);
	bufferevent_enable(t->client, EV_READ | EV_WRITE);
	bufferevent_enable(t->server, EV_READ | EV_WRITE);
	return 0;
}

static void
tls_pair_free(struct tls_pair *t)
{
	if (t->client != NULL)
		bufferevent_free(t->client);
	if (t->server != NULL)
		bufferevent_free(t->server);
	if (t->base != NULL) {
		event_base_loop(t->base, EVLOOP_NONBLOCK);
		event_base_free(t->base);
	}
	if (t->got != NULL)
		evbuffer_free(t->got);
	SSL_CTX_free(t->sctx);
	SSL_CTX_free(t->cctx);
}

/* Written through the TLS filter: wiped once SSL_write has taken it. */
static void
test_tls_written(void)
{
	struct tls_pair t;
	struct vault_wbuf *wb;
	struct timeval tv = { 10, 0 };
	const unsigned char *p;
	char got[sizeof(head_want)];
	size_t n;

	if (tls_pair_new(&t) == -1) {
		CHECK(!"TLS pair");
		tls_pair_free(&t);
		return;
	}
	wb = head_new();
	CHECK(vault_wbuf_hand(wb, bufferevent_get_output(t.client)) == 0);
	p = only_chain(bufferevent_get_output(t.client));
	event_base_loopexit(t.base, &tv);
	event_base_dispatch(t.base);
	n = evbuffer_get_length(t.got);
	CHECK_INT(n, strlen(head_want));
	if (n == strlen(head_want)) {
		evbuffer_remove(t.got, got, n);
		CHECK(memcmp(got, head_want, n) == 0);
	}
	CHECK_INT(evbuffer_get_length(bufferevent_get_output(t.client)), 0);
	CHECK_INT(release_of(p), 1);
	tls_pair_free(&t);
}

int
main(void)
{
	snap_setup();
	test_drained();
	test_freed_unsent();
	test_never_handed();
	test_growth();
	test_tls_written();
	vault_snapshot_unref(snap);
	return check_summary();
}
