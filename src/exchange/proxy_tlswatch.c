/*
 * A passed-through TLS tunnel after its first ClientHello was decided:
 * until the server's ServerHello, every further ClientHello the client
 * sends in the clear (the one that answers a HelloRetryRequest) must name
 * the tunnel as the first did, or the tunnel is refused before a byte of
 * it reaches the origin (parse/tls_watch.c walks the records). Without
 * this, a first ClientHello naming an allowed host on a shared address
 * and a second naming a denied one fronted the denied one.
 */
#include <stdlib.h>

#include "core/decide.h"
#include "core/log.h"
#include "exchange/exchange.h"
#include "parse/tls_watch.h"

/* A fatal TLS alert, access_denied(49), in a TLS 1.2-framed record. */
const unsigned char tls_alert_access_denied[TLS_ALERT_LEN] = {
	0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31
};

void
relay_refuse(struct exchange *s, int tls, enum sg_reason reason,
    const char *detail)
{
	s->verdict.allow = 0;
	exchange_log(s, VERDICT_DENY, 403, reason);
	log_debug("session %llu: %s", (unsigned long long)s->id, detail);
	if (tls)
		bufferevent_write(s->c->cbev, tls_alert_access_denied,
		    sizeof(tls_alert_access_denied));
	exchange_finish(s, reason_close(reason));
}

int
tlswatch_start(struct exchange *s, size_t first_len)
{
	if (s->tw == NULL && (s->tw = malloc(sizeof(*s->tw))) == NULL)
		return -1;
	tls_watch_start(s->tw, first_len);
	return 0;
}

void
tlswatch_free(struct exchange *s)
{
	free(s->tw);
	s->tw = NULL;
}

static int
hello_check(const struct tls_client_hello *ch, void *arg)
{
	struct exchange *s = arg;

	return decide_sni(&s->target, ch->has_sni, ch->sni, ch->sni_len) ==
	    REASON_NONE ? 0 : -1;
}

size_t
tlswatch_take(struct exchange *s, struct bufferevent *bev, size_t n)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct tls_watch *w = s->tw;
	const uint8_t *p;
	size_t pass = n, want;

	if (bev == s->c->cbev && w->on) {
		if ((p = evbuffer_pullup(in, (ev_ssize_t)n)) == NULL) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return (size_t)-1;
		}
		if (tls_watch_client(w, p, n, &pass, hello_check, s) == -1) {
			relay_refuse(s, 1, REASON_SNI_MISMATCH, "a further "
			    "ClientHello does not name the tunnel's host, or "
			    "is not one");
			return (size_t)-1;
		}
	} else if (bev != s->c->cbev && !w->server_done) {
		want = n < TLS_W_SERVER_NEED ? n : TLS_W_SERVER_NEED;
		if ((p = evbuffer_pullup(in, (ev_ssize_t)want)) == NULL) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return (size_t)-1;
		}
		if (tls_watch_server(w, p, want) == 1)
			pass = 0;
	}
	if (tls_watch_done(w))
		tlswatch_free(s);
	return pass;
}
