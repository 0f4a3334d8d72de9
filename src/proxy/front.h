/*
 * The public header of src/proxy/: the listeners' protocol front-ends
 * (HTTP/1.1 heads, HTTP/2, CONNECT tunnels, SOCKS5, transparent, ingress),
 * the dispatcher that reads a client connection in its state
 * (proxy_front.c), and the main loop's admin API, metrics, watcher and
 * NFLOG reader. Everything below them -- connections, exchanges, decisions,
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
void		 http_head_read(struct exchange *);
/* proxy_front.c: the front-ends as the exchange layer calls them. */
extern const struct front_ops proxy_front_ops;
/* An HTTP/2 stream's request, from its fields: a new exchange, decided. */
void		 http_stream_request(struct exchange *, const struct http_request *,
		    int grpc);

/* proxy_socks.c */
void		 socks_read(struct exchange *);
void		 socks_deny(struct exchange *, enum sg_reason);

/* proxy_transparent.c */
void		 transparent_start(struct exchange *);
void		 transparent_sniff(struct exchange *);
void		 transparent_refuse(struct exchange *, enum sg_reason);

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
void		 ingress_start(struct exchange *);
void		 ingress_request(struct exchange *, const struct http_request *,
		    int n);

/* proxy_h2.c: HTTP/2 toward intercepted clients, an exchange per stream. */
struct h2_conn;
struct h2_stream;
/* 1 when the client chose h2 in ALPN (looked at once per connection). */
int		 h2_chosen(struct exchange *);
void		 h2_start(struct exchange *);
/* From exchange_close (front_ops.closed). */
void		 h2_closed(struct exchange *);
/* The connection's streams whose exchanges have not ended (front_ops). */
int		 h2_streams_live(struct exchange *);

/*
 * A stream's exchange answers its stream with these, never with HTTP/1.1
 * text: the response head -- as an HTTP/2 origin's fields (nv as nghttp2
 * takes it), or as a parsed response (an HTTP/1.1 origin's, values already
 * scrubbed, or the gateway's own) --, payload (already scrubbed; moved
 * out of the buffer), the end with trailers (copied). 0, or -1 (the
 * stream is gone).
 */
int		 h2_stream_head(struct exchange *, const nghttp2_nv *,
		    size_t n, int end_stream);
int		 h2_stream_response(struct exchange *, const struct http_response *);
int		 h2_stream_data(struct exchange *, struct evbuffer *);
int		 h2_stream_end(struct exchange *, const nghttp2_nv *, size_t n);
/* Bytes of the stream's response that still wait for the client's window. */
size_t		 h2_stream_pending(struct exchange *);
/* As many as a stream holds: its exchange stops reading its origin. */
int		 h2_stream_full(struct exchange *);
/*
 * The request's payload as the stream received it (the stream's exchange
 * drains what it takes; the client's window comes back as it does), NULL
 * once the stream is gone; 1 once END_STREAM came, with the trailer
 * fields ("name: value\r\n"..., checked) when asked for.
 */
struct evbuffer	*h2_stream_body(struct exchange *);
int		 h2_stream_body_end(struct exchange *, const char **trailers,
		    size_t *len);
/* Hand the stream's payload on again from the loop (room came back). */
void		 h2_stream_poke(struct exchange *);

/* The connection's own exchange of a stream's exchange (proxy_h2.c), or NULL. */
struct exchange	*h2_parent(struct exchange *);

/* proxy_tunnel.c */
void		 tunnel_start(struct exchange *);
void		 tunnel_sniff(struct exchange *);

/*
 * An opaque rule's origin speaks to the client while the client's first
 * bytes are still awaited (they are classified when they come).
 */
void		 tunnel_origin_speaks(struct exchange *);

/* proxy_nflog.c: packets the sandbox rules drop, as audit rows */
struct nflog;
void		 proxy_nflog_stop(struct proxy *);
/* The NFLOG group the launcher's rules log to; 0 when there is none. */
int		 proxy_nflog_group(const struct proxy *);

/*
 * proxy_admin.c: an admin API answer -- j as compact JSON with its status
 * (j's reference taken), or {"error": msg}.
 */
struct evhttp_request;
typedef struct json_t json_t;
void		 admin_reply_json(struct evhttp_request *, int code, json_t *j);
void		 admin_reply_error(struct evhttp_request *, int code, const char *msg);

#endif
