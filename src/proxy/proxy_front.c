/*
 * A client connection's front door: which front-end reads its bytes in its
 * state (an HTTP/1.1 head, HTTP/2 once ALPN chose it, a tunnel's first
 * bytes, SOCKS5, a forwarded request's body), what a new connection does
 * first, and the table of these handed down to the exchange layer
 * (struct front_ops). The one module that knows every front-end: they do
 * not call each other back through it, only through p->fe.
 */
#include "proxy/front.h"

static void
front_client_read(struct bufferevent *bev, void *arg)
{
	struct exchange *s = arg;

	exchange_touch(s);
	if (s->c->intercepted)
		proxy_tls_read_size(bev);
	switch (s->state) {
	case S_HEAD:
		if (h2_chosen(s)) {
			h2_start(s);
			break;
		}
		http_head_read(s);
		break;
	case S_FORWARD:
		if (s->h2o != NULL)
			h2o_client_read(s);
		else
			forward_client_read(s);
		break;
	case S_SNIFF:
		if (s->c->kind == KIND_TRANSPARENT)
			transparent_sniff(s);
		else
			tunnel_sniff(s);
		break;
	case S_SOCKS_GREETING:
	case S_SOCKS_AUTH:
	case S_SOCKS_REQUEST:
		socks_read(s);
		break;
	default:
		break;
	}
}

static void
front_next_request(struct exchange *s)
{
	s->state = S_HEAD;
	/* A stream's next head comes as fields (http_stream_request). */
	if (EXCHANGE_CBEV(s) == NULL)
		return;
	bufferevent_setcb(s->c->cbev, front_client_read, NULL,
	    client_event_cb, s);
	bufferevent_enable(s->c->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(s->c->cbev)) > 0)
		http_head_read(s);
}

/* A new connection's first step beyond reading a head, by listener. */
static void
front_start(struct exchange *s)
{
	if (s->c->kind == KIND_TRANSPARENT)
		transparent_start(s);
	else if (s->c->kind == KIND_INGRESS)
		ingress_start(s);	/* TLS on the listener */
}

/* The front-ends, handed down to the exchange layer (struct front_ops). */
const struct front_ops proxy_front_ops = {
	.start = front_start,
	.client_read = front_client_read,
	.next_request = front_next_request,
	.refuse_socks5 = socks_deny,
	.refuse_transparent = transparent_refuse,
	.closed = h2_closed,
	.stream_head = h2_stream_head,
	.stream_response = h2_stream_response,
	.stream_data = h2_stream_data,
	.stream_end = h2_stream_end,
	.stream_pending = h2_stream_pending,
	.stream_full = h2_stream_full,
	.stream_body = h2_stream_body,
	.stream_body_end = h2_stream_body_end,
	.stream_poke = h2_stream_poke,
	.stream_parent = h2_parent,
	.streams_live = h2_streams_live,
	.dns_held_wake = dns_server_held_wake,
};
