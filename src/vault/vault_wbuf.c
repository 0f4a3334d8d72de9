/*
 * Bytes on their way to an origin that carry (or may come to carry) a
 * secret: a request head, built here and handed to libevent by reference,
 * so that the only copy of the swapped head is memory this module owns and
 * wipes when libevent lets go of it (written, or the connection freed).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "vault/vault.h"
#include "vault/vault_int.h"

/* A head is at most max_header_bytes and its swaps; far less than this. */
#define WBUF_MAX		(16u << 20)
#define WBUF_FIRST		1024

struct vault_wbuf {
	unsigned char	*data;
	size_t		 len;
	size_t		 cap;
	int		 locked;	/* data is vault_secmem, or on the heap */
	int		 failed;	/* out of room: the buffer is refused */
};

static void
wbuf_data_free(unsigned char *data, size_t cap, int locked)
{
	if (data == NULL)
		return;
	if (locked) {
		vault_secmem_free(data);	/* wipes */
		return;
	}
	/* Before a secret: only the client's own bytes. Wiped all the same. */
	OPENSSL_cleanse(data, cap);
	free(data);
}

/*
 * Room for need more bytes; lock: the bytes are secret, so the buffer
 * moves into locked, wiped memory first (and stays there).
 */
static int
wbuf_room(struct vault_wbuf *wb, size_t need, int lock)
{
	unsigned char *nd;
	size_t ncap;

	if (wb->failed)
		return -1;
	if (need <= wb->cap - wb->len && (wb->locked || !lock))
		return 0;
	if (need > WBUF_MAX - wb->len) {
		wb->failed = 1;
		return -1;
	}
	ncap = wb->cap > 0 ? wb->cap : WBUF_FIRST;
	while (ncap < wb->len + need)
		ncap *= 2;
	lock |= wb->locked;
	nd = lock ? vault_secmem_alloc(ncap) : malloc(ncap);
	if (nd == NULL) {
		wb->failed = 1;
		return -1;
	}
	if (wb->len > 0)
		memcpy(nd, wb->data, wb->len);
	wbuf_data_free(wb->data, wb->cap, wb->locked);
	wb->data = nd;
	wb->cap = ncap;
	wb->locked = lock;
	return 0;
}

struct vault_wbuf *
vault_wbuf_new(void)
{
	return calloc(1, sizeof(struct vault_wbuf));
}

void
vault_wbuf_free(struct vault_wbuf *wb)
{
	if (wb == NULL)
		return;
	wbuf_data_free(wb->data, wb->cap, wb->locked);
	free(wb);
}

int
vault_wbuf_add(struct vault_wbuf *wb, const void *p, size_t len)
{
	if (len == 0)
		return 0;
	if (wbuf_room(wb, len, 0) == -1)
		return -1;
	memcpy(wb->data + wb->len, p, len);
	wb->len += len;
	return 0;
}

int
vault_wbuf_printf(struct vault_wbuf *wb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (wbuf_room(wb, 64, 0) == -1)
		return -1;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf((char *)wb->data + wb->len, wb->cap - wb->len,
		    fmt, ap);
		va_end(ap);
		if (n < 0) {
			wb->failed = 1;
			return -1;
		}
		if ((size_t)n < wb->cap - wb->len)
			break;
		if (wbuf_room(wb, (size_t)n + 1, 0) == -1)
			return -1;
	}
	wb->len += (size_t)n;
	return 0;
}

unsigned char *
vault_wbuf_secret_room(struct vault_wbuf *wb, size_t need)
{
	if (wbuf_room(wb, need, 1) == -1)
		return NULL;
	return wb->data + wb->len;
}

void
vault_wbuf_commit(struct vault_wbuf *wb, size_t len)
{
	wb->len += len;
}

/* libevent is done with the bytes: sent, drained or freed. */
static void
wbuf_release_cb(const void *data, size_t len, void *arg)
{
	vault_wbuf_free(arg);
}

int
vault_wbuf_hand(struct vault_wbuf *wb, struct evbuffer *out)
{
	if (wb->failed)
		return -1;
	if (wb->len == 0) {
		vault_wbuf_free(wb);
		return 0;
	}
	return evbuffer_add_reference(out, wb->data, wb->len,
	    wbuf_release_cb, wb);
}
