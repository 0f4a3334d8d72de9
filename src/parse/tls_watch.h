/*
 * Pure watch over a passed-through TLS handshake, after its first
 * ClientHello was checked: a client may send a second ClientHello in the
 * clear (after the server's HelloRetryRequest, RFC 8446 4.1.4), and a
 * server picks its certificate and virtual host again from that one. The
 * watch walks the client's records and hands every further ClientHello to
 * a check before a byte of it goes on, until the server's ServerHello
 * (not a retry request) says the clear-text part is over.
 */
#ifndef SG_TLS_WATCH_H
#define SG_TLS_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "parse/tls_sni.h"

#define TLS_W_SERVER_NEED	43	/* record, handshake header, version, random */

struct tls_watch {
	int	on;		/* client records are still walked */
	int	server_done;	/* the server's first handshake bytes were read */
	int	hrr;		/* they were a HelloRetryRequest */
	int	again;		/* a further ClientHello passed its check */
	size_t	skip;		/* client bytes of a judged record still to go */
};

/* The check of a further ClientHello: 0 lets it go on, -1 refuses it. */
typedef int	(*tls_watch_check_fn)(const struct tls_client_hello *, void *);

/* The first ClientHello (its records: first_len bytes) was checked. */
void	tls_watch_start(struct tls_watch *, size_t first_len);
/*
 * The client's bytes p[0..len) from where the last call left off: 0 and
 * *pass, how many of them may go on now (the rest waits for more bytes);
 * -1 to refuse the tunnel: a further ClientHello check refused, or a
 * handshake record that is not a lone ClientHello, or a record that is not
 * TLS, while the watch is on.
 */
int	tls_watch_client(struct tls_watch *, const uint8_t *p, size_t len,
	    size_t *pass, tls_watch_check_fn, void *arg);
/*
 * The server's bytes p[0..len) from its first: 0 decided (all may go on),
 * 1 needs more of them (hold them). A ServerHello ends the watch; a
 * HelloRetryRequest ends it once a further ClientHello has passed. A first
 * record that cannot be read so leaves the client's records watched.
 */
int	tls_watch_server(struct tls_watch *, const uint8_t *p, size_t len);
/* 1 when nothing is left to watch in either direction. */
int	tls_watch_done(const struct tls_watch *);

#endif
