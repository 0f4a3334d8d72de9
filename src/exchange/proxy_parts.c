/*
 * The parts of src/exchange/ that hang state on an exchange, let go of when
 * it closes (struct exchange_parts): the top of this folder, so that the
 * exchange's life below calls none of them by name.
 */
#include "exchange/exchange.h"

static void
parts_release(struct exchange *s)
{
	h2o_free(s);		/* a stream's HTTP/2 origin session */
	h2up_release(s);	/* an h2 connection's origin connection */
	ws_relay_free(s);
	client_watch_free(s);	/* before the bufferevents: on their socket */
	splice_free(s);		/* before the bufferevents: it owns the sockets then */
}

const struct exchange_parts proxy_exchange_parts = {
	.release = parts_release,
};
