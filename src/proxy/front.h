/*
 * The public header of src/proxy/: the listeners' protocol front-ends
 * (HTTP/1.1 heads, HTTP/2, CONNECT tunnels, SOCKS5, transparent, ingress),
 * the dispatcher that reads a client connection in its state
 * (proxy_front.c), and the main loop's admin API, metrics, watcher and
 * NFLOG reader. Everything below them -- sessions, exchanges, decisions,
 * forwarding, origins -- is src/exchange/exchange.h, which calls up only
 * through struct front_ops (docs/architecture.md, "Layers").
 */
#ifndef SG_PROXY_FRONT_H
#define SG_PROXY_FRONT_H

#include "exchange/exchange.h"
#include "proxy/proxy.h"

/*
 * proxy_http.c: client request heads (explicit proxy and in-tunnel HTTP):
 * what the client's input holds of the next one, decided once whole.
 */
void		 http_head_read(struct session *);
/* proxy_front.c: the front-ends as the exchange layer calls them. */
extern const struct front_ops proxy_front_ops;
/* An HTTP/2 stream's request, from its fields: a new exchange, decided. */
void		 http_stream_request(struct session *, const struct http_request *,
		    int grpc);

/* proxy_socks.c */
void		 socks_read(struct session *);
void		 socks_deny(struct session *, enum sg_reason);

/* proxy_transparent.c */
void		 transparent_start(struct session *);
void		 transparent_sniff(struct session *);
void		 transparent_refuse(struct session *, enum sg_reason);

/* proxy_admin.c */
void		 proxy_admin_stop(struct proxy *);

/* proxy_watch.c: policies_watch */
struct proxy_watch;
void		 proxy_watch_stop(struct proxy *);

/* proxy_metrics.c: Prometheus text at GET /metrics on listen.metrics */
int		 proxy_metrics_bind(struct proxy *);
void		 proxy_metrics_stop(struct proxy *);

/* proxy_ingress.c */
int		 ingress_worker_init(struct worker *, const struct config *);
void		 ingress_worker_free(struct worker *);
void		 ingress_start(struct session *);
void		 ingress_request(struct session *, const struct http_request *,
		    int n);

/* proxy_h2.c: HTTP/2 toward intercepted clients, a session per stream. */
struct h2_conn;
struct h2_stream;
/* 1 when the client chose h2 in ALPN (looked at once per connection). */
int		 h2_chosen(struct session *);
void		 h2_start(struct session *);
/* From session_close (front_ops.closed). */
void		 h2_closed(struct session *);

/*
 * A stream session answers its stream with these, never with HTTP/1.1
 * text: the response head -- as an HTTP/2 origin's fields (nv as nghttp2
 * takes it), or as a parsed response (an HTTP/1.1 origin's, values already
 * scrubbed, or the gateway's own) --, payload (already scrubbed; moved
 * out of the buffer), the end with trailers (copied). 0, or -1 (the
 * stream is gone).
 */
int		 h2_stream_head(struct session *, const nghttp2_nv *,
		    size_t n, int end_stream);
int		 h2_stream_response(struct session *, const struct http_response *);
int		 h2_stream_data(struct session *, struct evbuffer *);
int		 h2_stream_end(struct session *, const nghttp2_nv *, size_t n);
/* Bytes of the stream's response that still wait for the client's window. */
size_t		 h2_stream_pending(struct session *);
/* As many as a stream holds: its stream session stops reading its origin. */
int		 h2_stream_full(struct session *);
/*
 * The request's payload as the stream received it (the stream session
 * drains what it takes; the client's window comes back as it does), NULL
 * once the stream is gone; 1 once END_STREAM came, with the trailer
 * fields ("name: value\r\n"..., checked) when asked for.
 */
struct evbuffer	*h2_stream_body(struct session *);
int		 h2_stream_body_end(struct session *, const char **trailers,
		    size_t *len);
/* Hand the stream's payload on again from the loop (room came back). */
void		 h2_stream_poke(struct session *);

/* The client connection of a stream session (proxy_h2.c), or NULL. */
struct session	*h2_parent(struct session *);

/* proxy_tunnel.c */
void		 tunnel_start(struct session *);
void		 tunnel_sniff(struct session *);

/*
 * An opaque rule's origin speaks to the client while the client's first
 * bytes are still awaited (they are classified when they come).
 */
void		 tunnel_origin_speaks(struct session *);

/* proxy_nflog.c: packets the sandbox rules drop, as audit rows */
struct nflog;
void		 proxy_nflog_stop(struct proxy *);
/* The NFLOG group the launcher's rules log to; 0 when there is none. */
int		 proxy_nflog_group(const struct proxy *);

#endif
