/*
 * The public header of src/exchange/: the gateway's workers and their
 * client connections (struct conn), each decision on them (struct
 * exchange: a request, a tunnel, an HTTP/2 stream), and what carries a
 * decided exchange to its origin -- the decision pipeline, credential
 * plans, request building, forwarding, origin connections (struct
 * origin), TLS, relays. Everything of a connection has one owner (its
 * worker's event loop); an exchange has one exit (exchange_close, or
 * exchange_next for the one a new request follows). The front-ends above
 * (src/proxy/front.h) call down into this; it reaches them only through
 * the table p->fe (struct front_ops).
 */
#ifndef SG_EXCHANGE_H
#define SG_EXCHANGE_H

#include <stdatomic.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/buffer.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "core/config.h"
#include "core/policy.h"
#include "core/rate.h"
#include "core/reason.h"
#include "dns/resolver.h"
#include "parse/http_parse.h"

struct proxy_lifecycle;

struct nflog;
struct proxy_watch;
struct h2_conn;
struct h2_stream;
struct h2o;

#define PROXY_MAX_ADDRS		RESOLVER_MAX_ADDRS
#define PROXY_HWM		(256 * 1024)	/* bytes queued toward a peer before we stop reading the other side */
#define PROXY_READ_HWM		(64 * 1024)	/* bytes buffered from a socket before reads pause */
#define PROXY_RELAY_IO		(64 * 1024)	/* largest read or write of a relayed tunnel (libevent: 16 KiB) */
#define PROXY_SPLICE_AFTER	(1024 * 1024)	/* a relayed tunnel this busy moves to splice(2) */
#define PROXY_SNIFF_SECS	5		/* server-speaks-first: no client bytes -> opaque */
#define PROXY_MAX_LINE		8192		/* request line (414 beyond) */
#define PROXY_TLS_SESSIONS	256		/* origin sessions kept per worker for resumption */

enum listener_kind {
	LISTENER_HTTP,
	LISTENER_SOCKS5,
	LISTENER_TRANSPARENT,
	LISTENER_INGRESS,
	LISTENER_MAX
};

struct worker;
struct listener_ctx {
	struct worker		*w;
	enum listener_kind	 kind;
};

struct dns_server;

/*
 * Idle origin connections a worker keeps for the next exchange of the same
 * decision (proxy_origin.c), shared by its client connections.
 */
struct origin;
TAILQ_HEAD(origin_pool, origin);
#define ORIGIN_POOL_MAX		512	/* idle origin connections a worker keeps */

struct tls_sess_slot {
	char			 host[POLICY_HOST_MAX + 1];
	uint16_t		 port;
	struct ssl_session_st	*sess;
};

struct worker {
	struct proxy		*proxy;
	int			 index;
	pthread_t		 thread;
	struct event_base	*base;
	struct resolver		*resolver;
	struct evconnlistener	*listeners[LISTENER_MAX];
	struct listener_ctx	 lctx[LISTENER_MAX];
	struct event		*resume_ev;	/* re-enables accept after EMFILE */
	struct event		*evict_ev;	/* proxy_fair_make_room asks for room */
	struct event		*trim_ev;	/* give freed memory back (proxy_worker_trim) */
	struct event		*oauth2_ev;	/* a token fetch ended: parked heads go on */
	struct event		*approval_ev;	/* an answer came: held requests look (proxy_approval.c) */
	struct event		*approval_tick;	/* ... and twice a second, for their deadlines */
	unsigned		 n_held;	/* exchanges held on a question now */
	uint64_t		 next_session;
	TAILQ_HEAD(exchange_tq, exchange) exchanges;	/* every live exchange of this loop */
	struct ssl_ctx_st	*tls_client_ctx;	/* faces the sandbox (server role) */
	struct ssl_ctx_st	*tls_origin_ctx;	/* faces origins (verifying client) */
	struct tls_sess_slot	 tls_sessions[PROXY_TLS_SESSIONS];
	struct dns_server	*dns;		/* DNS listener of this worker */
	struct ssl_ctx_st	*tls_ingress_ctx;	/* ingress_tls; NULL: plain */
	struct origin_pool	 pool;		/* idle origin connections */
	size_t			 n_pool;
};

struct audit;
struct audit_ship;
struct ca;
struct ca_audit_key;
struct evhttp;
struct vault;
struct cred_phs_pub;
struct addrmem;
struct geoip;
struct fairshare;
struct keeper_client;
struct oauth2_tokens;
struct approval_table;

/* The last policy reload's outcome, for the admin API's status (main thread). */
struct proxy_reload_last {
	time_t			 at;		/* 0: none since start-up */
	int			 ok;
	const char		*source;	/* "signal", "admin" or "watch" */
	unsigned		 n_errors;	/* a failed one's */
	unsigned		 n_restart;	/* an applied one's keys left for a restart */
	char			 first_error[512];	/* FILE:LINE:COL: message */
};

struct proxy {
	struct config		*cfg;
	struct audit		*audit;
	struct stats		*stats;		/* what /metrics counts of exchanges */
	struct audit_ship	*ship;
	struct keeper_client	*kc;		/* the keys: signs leaves and checkpoints, hands out secrets */
	atomic_int		 keeper_pid;	/* for the admin API and metrics; 0: none */
	atomic_ullong		 n_keeper_restarts;	/* keepers adopted after a loss */
	atomic_ullong		 n_spliced;	/* tunnels moved to splice(2) */
	atomic_ullong		 n_splice_fallback;	/* ... that went back to copying */
	atomic_int		 splice_refused;	/* splice(2) refused here: never again */
	struct ca		*ca;
	struct addrmem		*addrmem;	/* shared with the DNS listener */
	struct geoip		*geoip;		/* NULL without databases */
	struct fairshare	*fair;		/* limits.per_sandbox, shared with the DNS listener */
	const struct proxy_lifecycle *life;	/* the service manager's hooks, or NULL */
	char			*cfg_path;	/* NULL: built-in defaults */
	pthread_mutex_t		 pol_mtx;
	struct policy		*pol;		/* current; guarded by pol_mtx */
	struct worker		*workers;
	int			 n_workers;
	int			 listen_fds[LISTENER_MAX][64];	/* per worker, bound at start-up */
	int			 dns_fds[2][64];	/* UDP, TCP per worker */
	atomic_uint		 n_conns;
	/* credentials (proxy_cred.c); cred_mtx guards snap */
	int			 cred_ready;
	pthread_mutex_t		 cred_mtx;
	struct vault_snapshot	*snap;
	struct oauth2_tokens	*oauth2;	/* kind oauth2's tokens (vault/oauth2.h) */
	/* mode: ask (proxy_approval.c); approval_mtx guards approvals */
	pthread_mutex_t		 approval_mtx;
	struct approval_table	*approvals;
	struct cred_phs_pub	*phs;		/* placeholders (cred_phs.c): no lock to read */
	atomic_size_t		 n_phs;		/* how many, removed ones too; 0: none to look for */
	int			 phs_trim_pending;	/* main thread: malloc_trim once removals are quiet */
	uint64_t		 phs_released_ms;	/* the last removal, CLOCK_MONOTONIC */
	uint64_t		 vault_stamp;	/* the keeper's; a change means rotation */
	atomic_ullong		 n_refused;
	/*
	 * A full gateway makes room for a newcomer by closing an unidentified
	 * connection of the source holding most (proxy_fair.c): which source,
	 * and how many closes the workers still owe.
	 */
	pthread_mutex_t		 evict_mtx;
	struct netaddr		 evict_addr;
	unsigned		 evict_live;	/* what it held when asked */
	atomic_uint		 evict_pending;
	atomic_ullong		 n_evicted;
	struct event_base	*main_base;
	struct evhttp		*admin;		/* admin API, main thread */
	struct evhttp		*metrics;	/* listen.metrics, main thread */
	int			 metrics_fd;	/* bound at start-up until evhttp owns it */
	atomic_ullong		 n_reload_ok;	/* policy reloads, for metrics */
	atomic_ullong		 n_reload_err;
	struct proxy_reload_last last_reload;
	time_t			 started;	/* wall clock, for status */
	struct rate_ring	 rate;		/* requests, denials: sampled each second (main thread) */
	struct nflog		*nflog;		/* sandbox drops -> audit, main thread */
	struct proxy_watch	*watch;		/* policies_watch, main thread */
	const struct front_ops	*fe;		/* the front-ends, handed down (proxy_new) */
	const struct exchange_parts *parts;	/* ... and this folder's parts above exchanges */
	void			(*on_free)(void *);	/* the daemon's, before the event loop goes */
	void			*on_free_arg;
};

/* The current policy, with a reference the caller must drop. */
struct policy	*proxy_policy_get(struct proxy *);

enum exchange_state {
	S_HEAD,			/* waiting for a request head */
	S_RESOLVING,
	S_CONNECTING,
	S_FORWARD,		/* one request and its response in flight */
	S_SNIFF,		/* tunnel open, waiting for the client's first bytes */
	S_RELAY,		/* tunnel: bytes both ways */
	S_FINISHING,		/* writing a last answer, then close */
	S_SOCKS_GREETING,	/* SOCKS5: method negotiation */
	S_SOCKS_AUTH,		/* SOCKS5: username/password */
	S_SOCKS_REQUEST		/* SOCKS5: the CONNECT request */
};

enum conn_kind {
	KIND_HTTP,		/* absolute-form request on the explicit proxy */
	KIND_CONNECT,		/* CONNECT tunnel on the explicit proxy */
	KIND_SOCKS5,		/* SOCKS5 tunnel */
	KIND_TRANSPARENT,	/* redirected by nftables */
	KIND_INGRESS		/* PORT-ID.<ingress_domain> -> a sandbox (proxy_ingress.c) */
};

enum sniffed {
	SNIFF_NONE,
	SNIFF_TLS,
	SNIFF_HTTP,
	SNIFF_OTHER
};

#define CRED_NAME_MAX		63
#define CRED_TRIM_QUIET_MS	1000	/* removals quiet this long: give memory back */
#define CRED_PH_MAX		256
#define CRED_MAX_BOUND		8


struct vault_snapshot;
struct vault_scrubber;
struct policy_credential;

/*
 * The part of a plan only a request to a credential's host needs (3 KiB):
 * allocated by cred_request then, freed by cred_plan_free, so that other
 * exchanges (and idle ones) do not carry it.
 */
struct cred_plan_ext {
	char			 ph[CRED_MAX_BOUND][CRED_PH_MAX + 1];	/* placeholders of bound[] */
	const struct policy_credential *swap[HTTP_MAX_HEADERS];	/* header i: swap this */
	/*
	 * An aws_sigv4 credential re-signed (proxy_sigv4.c): the Authorization
	 * value or the query (from '?') that goes out instead of the sandbox's,
	 * wiped when freed; sig_token: add the real X-Amz-Security-Token header.
	 */
	const struct policy_credential *sig_cred;
	char			 sph[CRED_MAX_BOUND][48];	/* aws_sigv4: the secret placeholders */
	char			 part[CRED_MAX_BOUND][3][80];	/* ... and its vault parts' names */
	char			*sig_out;
	size_t			 sig_len;
	int			 sig_query;
	int			 sig_token;
};

/*
 * Secrets a response to a bound host is scrubbed of: an aws_sigv4 has three,
 * an oauth2 five (its token, the one before, the refresh token, the
 * client's secret and Basic credentials); the sandbox's credentials and as
 * many of other policies'.
 */
#define CRED_SCRUB_MAX		(CRED_MAX_BOUND * 10)

/* What another policy's secret is replaced by in an answer. */
#define CRED_ALSO_WORD		"sandgate-redacted"

/* What cred_request decided for one request (proxy_cred.c). */
struct cred_plan {
	struct vault_snapshot	*snap;		/* reference held while the request lives */
	const struct policy_credential *bound[CRED_MAX_BOUND];	/* creds bound to this host */
	size_t			 n_bound;
	/*
	 * Other policies' credentials bound to this host (static and oauth2):
	 * never swapped, but the answer is scrubbed of them too, so that a
	 * sandbox that does not hold one cannot read it from the host.
	 */
	const struct policy_credential *also[CRED_MAX_BOUND];
	size_t			 n_also;
	struct cred_plan_ext	*x;		/* NULL: nothing bound, nothing to swap */
	const struct policy_credential *query_cred;	/* swap in the query */
	char			 cred[CRED_NAME_MAX + 1];	/* for the audit row */
};

/* The credential to swap into header i, or NULL. */
static inline const struct policy_credential *
cred_plan_swap(const struct cred_plan *plan, size_t i)
{
	return plan->x != NULL ? plan->x->swap[i] : NULL;
}

struct cred_body_tail {
	char			 buf[CRED_PH_MAX];
	size_t			 len;
};

/* One request forwarded to the origin (absolute form, or HTTP inside a tunnel). */
struct forward {
	int			 request;	/* a head came: the row is a request's */
	int			 req_done;
	int			 resp_done;
	int			 resp_head_done;
	enum http_framing	 req_framing;
	uint64_t		 req_left;
	struct http_chunked	 req_chunk;
	enum http_framing	 resp_framing;
	uint64_t		 resp_left;
	struct http_chunked	 resp_chunk;
	int			 client_keep_alive;
	int			 origin_keep_alive;
	int			 early_answer;	/* answered before the body ended: the origin connection is retired */
	int			 upgrade;	/* the request asked to switch protocols */
	/*
	 * The origin's 101 went out: the upgraded connection is this request's
	 * exchange, and its one row is written when it ends, with every byte it
	 * moved (the exchange's own counters go on counting in the relay).
	 */
	int			 switched;
	int			 drop_upgrade;	/* ... to h2c: forwarded without the offer */
	int			 grpc;		/* an HTTP/2 stream's gRPC call: HTTP/2 to the origin only */
	int			 origin_alpn;	/* ALPN offered to its origin: 1 h2 only, 2 h2 and http/1.1 */
	int			 status;
	char			 method[24];
	char			*path;		/* the whole request target; "" when none */
	struct netaddr		 ip;		/* the address this exchange went to or was refused for */
	/*
	 * The request head built for the origin (credentials swapped in), until
	 * forward_start moves it onto the origin socket; freed with the exchange.
	 */
	struct evbuffer		*head;
	struct cred_plan	 plan;
	struct vault_scrubber	*scrub;		/* response scrubber for bound hosts */
	int			 scrub_chunked;	/* scrubbed body re-framed as chunks */
	int			 client_minor;	/* the client's HTTP/1.x */
	/*
	 * A git push under a rule with git: (proxy_git.c): GIT_HOLD while its
	 * command list is read (head and body kept from the origin),
	 * GIT_HOLD_ENCODED for a body that cannot be read; 0 otherwise.
	 */
	int			 git_hold;
	size_t			 head_len;	/* the request head's bytes (HTTP/1.1); 0: a stream */
};

/*
 * Where the time of an intercepted connection goes: each phase's first moment,
 * in microseconds after accept (plus one; 0: not reached). Kept only with
 * `serve -d`, logged when the connection closes; bench/run.py reads the lines.
 */
enum phase_mark {
	MARK_HELLO,		/* the ClientHello decided: interception starts */
	MARK_LEAF,		/* the leaf certificate and key in hand */
	MARK_CLIENT_TLS,	/* the client's handshake done */
	MARK_REQUEST,		/* the first request head parsed */
	MARK_ORIGIN_CONNECT,	/* the origin socket connecting */
	MARK_ORIGIN_TLS,	/* the origin's handshake done */
	MARK_RESPONSE_HEAD,	/* the first response head forwarded */
	MARK_RESPONSE_DONE,	/* the first response complete */
	MARK_N
};

/* What an origin connection was opened for (proxy_origin.c). */
struct origin_bind {
	char			 sandbox[POLICY_ID_MAX + 1];
	char			 host[POLICY_HOST_MAX + 1];	/* "" : nothing */
	uint16_t		 port;
	int			 is_ip;
	struct netaddr		 addr;		/* the checked address connected to */
	int			 tls;		/* TLS to the origin */
	int			 creds;		/* may carry swapped secrets */
	int			 ingress;	/* a sandbox's published port */
};

/*
 * An origin connection, one object from its connect to its close: its
 * socket (TLS: its filter) and what it was opened for. An exchange writes
 * to it (x->o) only when it was opened for that exchange's decision
 * (upstream_guard); between exchanges it waits in its worker's pool
 * (struct origin_pool, on `entry`), still bound, with
 * upstream.keepalive_timeout, until an exchange of the same decision --
 * the same sandbox, host, port, address, TLS and credentials, on any of
 * the sandbox's client connections -- takes it (upstream_take), its
 * origin closes it or sends bytes nobody asked for, or the timeout passes
 * (proxy_origin.c).
 */
struct conn;
struct origin {
	TAILQ_ENTRY(origin)	 entry;		/* on w->pool while kept */
	int			 kept;		/* 0: an exchange's */
	int			 retired;	/* kept only to finish writing: never taken */
	struct worker		*w;
	struct bufferevent	*bev;
	struct origin_bind	 bind;		/* bind.host "": not connected yet */
	struct event		*timer;		/* keepalive, while kept */
};

/*
 * One exchange: one decision -- a request, a tunnel, a SOCKS5 connect, an
 * HTTP/2 stream, a DNS query -- and everything it carries: its target and
 * verdict, the request and response it forwards (credential plan,
 * scrubber, path, counters), the checked addresses it may connect to, the
 * origin connection it writes to, its lookup, its relay, its timers. It
 * is made when its decision starts (a connection accepted, a request head
 * begun, a stream opened), allocated whole, writes its own row when it
 * ends, and is freed as one unit: nothing of one request is there for the
 * next, and nothing in it is reset by hand. A client connection (struct
 * conn) has one current own exchange (c->x) at a time; an HTTP/2
 * connection's streams have one each, beside it (is_stream). What a tunnel
 * decided for the requests inside it is the connection's (c->tun).
 */
#define EXCHANGE_INLINE_ADDRS	4	/* more than this many: allocated */
#define EXCHANGE_EVENTS		2	/* free_ev, idle_ev: after the struct */

struct exchange {
	uint64_t		 id;		/* its connection's; a stream's own */
	TAILQ_ENTRY(exchange)	 entry;		/* on its worker's list while live */
	struct worker		*w;		/* NULL: a DNS query's (proxy_dns.c) */
	struct proxy		*p;
	struct conn		*c;		/* the client connection */
	enum exchange_state	 state;
	int			 closing;	/* ended: nothing acts on it any more */
	struct event		*free_ev;	/* deferred free once it ended */
	/*
	 * Who asks, under which policy: the policy it decides on (a reference
	 * held, dropped with it) and the identity that made it. A request on
	 * the explicit proxy starts with the current policy and no identity;
	 * one inside a tunnel, or an HTTP/2 stream, with the tunnel's.
	 */
	struct policy		*pol;
	int			 has_ident;
	struct policy_identity	 ident;
	struct policy_target	 target;
	/* The row's host when not target.host (a name that held a secret). */
	const char		*row_host;
	const char		*row_method;	/* SOCKS5 BIND, UDP-ASSOCIATE */
	struct event		*gone_ev;	/* client_watch: its reset while waiting */
	struct policy_verdict	 verdict;
	/*
	 * Its row's own measures: when it began and the bytes it moved -- a
	 * request's head and body each way, a tunnel's or an upgraded
	 * connection's relayed bytes -- never the connection's.
	 */
	struct timespec		 started;
	/* Since started, in µs, 0: not (yet) -- for /metrics (exchange_stamp). */
	struct exchange_times {
		int64_t		 decided;	/* its verdict */
		int64_t		 connect;	/* its first origin connect began */
		int64_t		 tcp;		/* ... the TCP connect was done */
		int64_t		 tls;		/* ... the origin's handshake was */
		int64_t		 sent;		/* its request went to the origin */
		int64_t		 head;		/* the response head came back */
	}			 t;
	uint64_t		 up;
	uint64_t		 down;
	struct forward		 fwd;
	struct netaddr		*addrs;		/* addr_inline, or its own for more */
	size_t			 n_addrs;
	size_t			 addr_next;	/* next address to try */
	struct netaddr		 addr_inline[EXCHANGE_INLINE_ADDRS];
	struct netaddr		*addr_more;	/* room for PROXY_MAX_ADDRS, once needed */
	struct cred_body_tail	*body_tail;	/* NULL until a body is scanned */
	void			*dlp;		/* proxy_dlp.c's scanner; NULL: none */
	void			(*dlp_free)(void *);
	/* The lookup of its target: the query in flight and its deadline. */
	struct resolver_query	*rq;
	struct event		*dns_timer;
	void			(*on_connected)(struct exchange *);
	/*
	 * The origin connection it writes to (NULL: none yet), bound to its
	 * decision: opened for it, or taken from the worker's pool where
	 * an earlier exchange left it; let go of (upstream_drop,
	 * upstream_keep_in) before it is freed. Toward an HTTP/2 origin, its
	 * stream there (proxy_h2_origin.c).
	 */
	struct origin		*o;
	struct h2o		*h2o;
	/* upstream.idle_timeout (or idle_ms): no traffic either way. */
	struct event		*idle_ev;
	struct timeval		 last_active;
	uint32_t		 idle_ms;	/* 0: upstream.idle_timeout */
	/* A tunnel's relay (proxy_relay.c), a WebSocket's (proxy_ws.c). */
	struct splice_relay	*splice;	/* the relay moved to splice */
	int			 splice_off;	/* splicing failed once: copy to the end */
	int			 eof_client;	/* relay half-close bookkeeping */
	int			 eof_origin;
	struct ws_relay		*ws;
	struct tls_watch	*tw;		/* passthrough TLS: further ClientHellos */
	enum sg_close		 close_reason;	/* NONE until it ends */
	/* An HTTP/2 stream's (proxy_h2.c): its stream. */
	struct h2_stream	*h2st;
	int			 is_stream;
	/*
	 * It holds one of its connection's c->grpc_big slots (more than 64 KiB
	 * of a gRPC answer: proxy_h2_origin.c); an HTTP/2 stream that still
	 * holds that much when the exchange ends takes it over (proxy_h2.c).
	 */
	int			 big_slot;
	int			 fair_stream;	/* holds a slot of its sandbox's share */
	/*
	 * Its own memory (exchange_alloc): the path, the body tail, the
	 * addresses beyond the inline ones. Freed with it as one unit; nothing
	 * in it is freed alone.
	 */
	struct xchunk		*mem;
	int			 logged;	/* its row is written */
	int			 head_pending;	/* its request head is still arriving */
	int			 oauth2_parked;	/* its head waits for a token (proxy_oauth2.c) */
	int			 approval_held;	/* its head waits for an operator's answer */
	uint64_t		 approval_id;	/* the question it waits on (0: none) */
};

/*
 * What a tunnel decided for the requests inside it: each of their
 * exchanges starts from its target, rule and checked addresses. Allocated once
 * a tunnel carries HTTP (conn_tunnel_http), with room for its own
 * addresses only, so that other connections do not carry it.
 */
struct tunnel_decision {
	struct policy		*pol;		/* the tunnel's (reference held) */
	int			 has_ident;
	struct policy_identity	 ident;
	struct policy_target	 target;
	char			 rule[POLICY_NAME_MAX + 24];	/* the rule that opened it */
	size_t			 n_addrs;
	size_t			 cap;		/* addrs[] has room for this many */
	struct netaddr		 addrs[];
};

/*
 * A client connection: its socket's peer, what its front-end learnt of it
 * (the first bytes, the original destination, the tunnel and what the
 * tunnel decided), its TLS state toward the client, its timers before a
 * request (sniff, head), its fair-share counts, its HTTP/2 state and the
 * origin connections its exchanges left. Its current own exchange (x)
 * runs it; every exchange on it -- its own, one after another, and an
 * HTTP/2 connection's streams -- holds a reference (refs: the last one
 * freed frees it).
 */
struct conn {
	int			 refs;
	struct exchange		*x;		/* its current own exchange; NULL once it closed */
	uint64_t		 id;		/* for the log */
	struct timespec		 started;	/* accepted */
	uint32_t		 marks[MARK_N];	/* serve -d: see enum phase_mark */
	int			 origin_resumed;	/* an origin TLS session was resumed */
	int			 grpc_big;	/* streams holding a gRPC message over 64 KiB (proxy_h2_origin.c) */
	enum conn_kind	 kind;
	char			 client_str[NETADDR_STRLEN + 8];
	struct netaddr		 client_addr;
	struct bufferevent	*cbev;		/* the client socket (TLS: its filter) */

	struct event		*timer;		/* sniff timer */
	struct event		*head_ev;	/* limits.head_timeout (proxy_fair.c) */
	int			 head_armed;
	int			 fair_counted;	/* counted against fair_sandbox's share */
	char			 fair_sandbox[POLICY_ID_MAX + 1];
	int			 fair_src_counted;	/* ... against client_addr's, until then */

	int			 tunnel_open;	/* 200 / SOCKS success sent: errors can only close */
	int			 tunnel_http;	/* tunnel carrying plain HTTP */
	struct tunnel_decision	*tun;		/* ... its target and addresses (tunnel_http) */
	int			 socks_auth_ok;	/* SOCKS5 user/pass identified the sandbox */
	enum sniffed		 sniffed;	/* what the first bytes were */
	struct netaddr		 orig_dst;	/* transparent: SO_ORIGINAL_DST */
	uint16_t		 orig_port;
	int			 intercepted;	/* TLS terminated on both sides */
	uint8_t			 tun_kind;	/* counted open as this stats_tunnel + 1; 0: not */
	uint8_t			 sb_counted;	/* counted open for fair_sandbox in stats */
	int			 sniff_silent;	/* transparent: no client bytes in 5 s */
	int			 tls_client_ok;	/* the client's handshake completed */
	int			 tls_shutdown_sent;	/* close_notify queued */
	struct event		*finish_ev;	/* polls a TLS filter's socket drain */

	/* HTTP/2 (proxy_h2.c) */
	struct h2_conn		*h2;		/* the client chose h2: its streams */
	int			 h2_checked;	/* ALPN looked at */
	struct h2up		*h2up;		/* an h2 connection's origin connection */
};

/*
 * proxy_forward.c: decode the chunked body in `in` (all of it, or up to its
 * end) into its payload in `out`, draining what was decoded; *done at the
 * last chunk. -1: bad framing.
 */
int		 forward_dechunk(struct http_chunked *, struct evbuffer *in,
		    struct evbuffer *out, int *done, size_t *used);
/*
 * The one decoder of an HTTP/1.1-framed body toward or from HTTP/2: what in
 * holds of it moves to out as payload (a length: up to *left, counted down;
 * chunked: decoded; until close: all of it); *done when it is complete (no
 * body: at once); *used the bytes of in it took. -1: bad chunked framing.
 */
int		 forward_body_decode(enum http_framing, uint64_t *left,
		    struct http_chunked *, struct evbuffer *in,
		    struct evbuffer *out, int *done, size_t *used);

/*
 * proxy_main.c: much was freed on this worker (idle origin connections
 * released): a second later, freed pages go back to the system.
 */
void		 proxy_worker_trim(struct worker *);
/* proxy_worker.c: the worker's trim_ev (malloc_trim). */
void		 proxy_worker_trim_cb(evutil_socket_t, short, void *);

/*
 * proxy_conn.c: what a connection records about itself (the bottom of
 * this folder: it calls nothing above it).
 */
void		 exchange_touch(struct exchange *);
/* Note the first time the connection reaches m (only with `serve -d`). */
void		 exchange_mark(struct exchange *, enum phase_mark m);
/* Its connection is now a tunnel of kind k (an enum stats_tunnel), once;
 * ..._closed when the connection closes (sandgate_tunnels_open). */
void		 conn_tunnel_opened(struct exchange *, int k);
void		 conn_tunnel_closed(struct exchange *);
void		 exchange_set_idle(struct exchange *);
/* From here the tunnel carries HTTP: 0, or -1 out of memory (nothing changed). */
int		 conn_tunnel_http(struct exchange *);
/* s->tun with room for n addresses: 0, or -1 out of memory (s->tun as it was). */
int		 conn_tun_reserve(struct exchange *, size_t n);
/* A tunnel's decision and its policy reference (NULL: nothing). */
void		 tunnel_decision_free(struct tunnel_decision *);
/* s->target from the destination as written (escaped when invalid). */
void		 exchange_note_target(struct exchange *, const char *host,
		    size_t len, uint16_t port);
/*
 * A connection (refs 0: each exchange on it takes one, exchange_open); a
 * reference dropped, the connection freed with its tunnel decision at the
 * last; its timers freed (from its own exchange's exchange_close).
 */
struct conn	*conn_new(void);
void		 conn_unref(struct conn *);
void		 conn_close_timers(struct conn *);
/* The source's count taken by conn_fair_source, given back once. */
void		 conn_fair_release_source(struct exchange *);
/*
 * From exchange_close only: the counts taken (proxy_fair.c), if any; none
 * for a stream's exchange (its connection's own exchange gives them back).
 */
void		 conn_fair_release(struct exchange *);

/*
 * proxy_life.c: the life of exchanges on a connection -- the connection
 * and its first exchange made, the next one at each request, answered,
 * finished, closed -- and their rows. conn_make: the connection accepted
 * on fd and its first exchange (its current own), or NULL.
 */
struct exchange	*conn_make(struct worker *, enum listener_kind,
		    evutil_socket_t, const struct sockaddr *, int socklen);
void		 exchange_close(struct exchange *, enum sg_close);
/*
 * A new exchange on c, of worker w: its events, on the worker's list, a
 * reference to c taken; its idle timer not yet armed (exchange_set_idle).
 * An HTTP/2 stream's (stream) is counted as a connection is
 * (limits.max_connections). NULL out of memory.
 */
struct exchange	*exchange_open(struct worker *, struct conn *, int stream);
/* Send a complete HTTP error answer, then close once it is written. */
void		 exchange_http_error(struct exchange *, int status,
		    enum sg_reason, const char *detail);
/* Write what is queued to the client, then close. */
void		 exchange_finish(struct exchange *, enum sg_close);
/* The client side's EOF/error handler outside the relay. */
void		 client_event_cb(struct bufferevent *, short, void *);
/*
 * The exchange's row, written once: its decision, status and reason with
 * the exchange's own measures (s: started, up, down), and the log line.
 */
void		 exchange_log(struct exchange *, enum sg_verdict, int status,
		    enum sg_reason);
/* The origin connection closed and forgotten (nothing when there is none). */
void		 upstream_drop(struct exchange *);

/* proxy_fair.c: limits.per_sandbox and limits.head_timeout */
/*
 * A connection accepted on a listener: it and its first exchange made (conn_make),
 * its head timed, counted against its source address until its sandbox is
 * known (refused and answered when over its share), then its front-end's
 * first step (front_ops.start). NULL only when none could be made;
 * the exchange may be closing already (the caller only counts).
 */
struct exchange	*conn_accept(struct worker *, enum listener_kind,
		    evutil_socket_t, const struct sockaddr *, int socklen);
/*
 * max_connections is reached: 0 when a worker was asked to close one
 * connection, not yet identified, of the source other than sa's holding
 * the most (the newcomer may then be let in), -1 when there is none.
 */
int		 proxy_fair_make_room(struct proxy *, const struct sockaddr *sa);
void		 proxy_fair_evict_cb(evutil_socket_t, short, void *);
/*
 * Count s against its sandbox once identified, and no longer against its
 * source: 0, or -1 refused (answered).
 */
int		 conn_fair_admit(struct exchange *);
/* An HTTP/2 stream's slot in its sandbox's share: 0, or -1 refused (answered). */
int		 stream_fair_admit(struct exchange *);
/* A request head starts (no-op while one is timed); complete. */
void		 conn_head_begin(struct exchange *);
void		 conn_head_done(struct exchange *);

/* Log the denial and answer it in the connection's protocol, then close. */
void		 exchange_deny(struct exchange *, int status, enum sg_reason,
		    const char *detail);

/* proxy_forward.c: one request to the origin and its response back. */
void		 forward_start(struct exchange *);
/* The request's framing and keep-alive into s->fwd (proxy_request.c). */
void		 forward_prepare(struct exchange *, const struct http_request *);
void		 forward_client_read(struct exchange *);
/*
 * proxy_git.c: a git push under a rule with git: (docs/policy.md, "git").
 * git_prepare sets s->fwd.git_hold from the decided request; git_gate,
 * while it is set, reads the command list from the buffered body: 0 the
 * push may go (the head is queued to the origin), 1 wait for more bytes,
 * -1 refused (answered 403 git-ref-denied). Nothing reaches the origin
 * before 0.
 */
#define GIT_HOLD		1
#define GIT_HOLD_ENCODED	2
void		 git_prepare(struct exchange *, const struct http_request *);
/*
 * 1 when, under a rule with git:, the request would write into a
 * repository by other means than smart HTTP's receive-pack: WebDAV's
 * methods (git's dumb-HTTP push), or another writing method on a path (or
 * Destination) inside a repository (docs/policy.md, "git").
 */
int		 git_write_refused(struct exchange *, const struct http_request *);
int		 git_gate(struct exchange *);
/*
 * proxy_sigv4.c: an aws_sigv4 credential the plan swaps (docs/credentials.md
 * "aws_sigv4"): the sandbox's signature checked with the placeholder secret,
 * the request re-signed with the real key into plan->x->sig_out. 0, or -1
 * with *reason and detail. sigv4_wants_body: 1 when an HTTP/1.1 request head
 * signed with SigV4 needs its body hashed (read it whole before deciding).
 */
int		 sigv4_plan(struct exchange *, const struct http_request *,
		    enum sg_reason *reason, char *detail, size_t dlen);
int		 sigv4_wants_body(const struct http_request *);
void		 sigv4_plan_free(struct cred_plan_ext *);
/* proxy_exchange.c */
struct exchange	*exchange_new(void);
struct event	*exchange_event_room(struct exchange *, int);
/* What it holds (credential plan and snapshot, scrubber, path), and it. */
void		 exchange_free(struct exchange *);
/*
 * proxy_life.c: the connection's next exchange, after s (its current
 * own one): s ends -- its row written if it reached an origin and has
 * none, its origin connection left in the worker's pool or closed --
 * and is freed from the loop; the new one starts from what the
 * connection decided (inside a tunnel: its target, rule and addresses),
 * and the client socket's callbacks are its from now on. The new
 * exchange, or NULL out of memory (s goes on).
 */
struct exchange	*exchange_next(struct exchange *);
/*
 * s has ended without its connection (exchange_next; its row written or
 * not to be): off its worker's list, its timers gone, inert from now on
 * (closing), freed from the loop with its reference to the connection.
 */
void		 exchange_retire(struct exchange *);
/*
 * The decision a row records: an allowed exchange under mode: report is
 * "report", with the reason the policy would have given when it has none.
 */
void		 exchange_verdict(const struct exchange *, enum sg_verdict *,
		    enum sg_reason *);
/*
 * The exchange writes its row, once: ev holds what its connection or
 * listener knows (sandbox, kind, client, address, method, path, status,
 * bytes; host when the row names another than the target); the exchange
 * adds its target, rule, credential, decision (exchange_verdict), reason
 * and duration (from x->started, left in ev->duration_ms) and marks itself
 * logged. audit NULL: nothing is written. audit_submit's result.
 */
struct decide_env;
struct decide_alt;
/*
 * The decision's address stage (core/decide.c) for x's target under env:
 * every address reachable (allow_private) and outside denied countries
 * and ASNs. x's verdict is updated and x->fwd.ip names the first address
 * refused; its reason (REASON_NONE: allowed). Every listener's one way to
 * it, a DNS answer's included.
 */
enum sg_reason	 exchange_check_addrs(struct exchange *,
		    const struct decide_env *, const struct netaddr *, size_t);
struct audit_event;
struct stats;
/* Its row to a (NULL: the log line only), counted in st (NULL: not). */
int		 exchange_audit(struct exchange *, struct audit *,
		    struct stats *, struct audit_event *, enum sg_verdict,
		    enum sg_reason);
/*
 * *at = now (or when, if not NULL), as µs since the exchange started,
 * unless set already: the first of each moment counts (core/stats.h).
 */
void		 exchange_stamp(struct exchange *, int64_t *at,
		    const struct timespec *when);
#define exchange_decided(x)	exchange_stamp((x), &(x)->t.decided, NULL)
/*
 * The addresses this exchange may connect to, a[0..n) copied (at most
 * PROXY_MAX_ADDRS): 0, or -1 out of memory (never for n <=
 * EXCHANGE_INLINE_ADDRS).
 */
int		 exchange_set_addrs(struct exchange *, const struct netaddr *a,
		    size_t n);
/*
 * proxy_xmem.c: n bytes of the exchange's own memory, zeroed, aligned for any type,
 * freed only with the exchange; NULL out of memory. _strndup: s[0..n) and
 * a NUL in it.
 */
void		*exchange_alloc(struct exchange *, size_t n);
char		*exchange_strndup(struct exchange *, const char *s, size_t n);
/* All of it, from exchange_free only. */
void		 exchange_mem_free(struct exchange *);

/* proxy_upstream.c: resolution and connection of the origin side. */
void		 upstream_resolve(struct exchange *, void (*next)(struct exchange *));
void		 upstream_connect(struct exchange *, void (*next)(struct exchange *));
/* Steps 4 and 5 (internal ranges, countries, ASNs) over addrs; 1 allow. */
int		 upstream_check_addrs(struct exchange *, const struct netaddr *,
		    size_t n);

/*
 * proxy_decide.c: the one decision pipeline, docs/policy.md "How a decision is
 * made", steps 1-3.
 */
struct decide_in {
	const char	*host;		/* as the client wrote it; NULL: s->target as it is */
	size_t		 hostlen;
	uint16_t	 port;
	const char	*method;	/* NULL: a tunnel, before its requests */
	const char	*path;
	const struct decide_alt *alt;	/* other readings (decide.h) */
	size_t		 n_alt;
	int		 tunnel_request;	/* HTTP inside a tunnel: ... */
	const char	*tunnel_host;	/* ... its Host header (NULL: none) */
	size_t		 tunnel_host_len;
	const char	*tunnel_abs;	/* ... an absolute target's authority */
	size_t		 tunnel_abs_len;
	int		 no_ask;	/* mode: ask never holds it (an address alone) */
};
/*
 * Fills s->target (as written when invalid) and s->verdict (rule named
 * default-deny when no rule decided), and returns the reason: REASON_NONE
 * when allowed so far.
 */
enum sg_reason	 proxy_decide(struct exchange *, const struct decide_in *);
/*
 * The part of it that comes before any destination is known: audit.db
 * cannot take rows and audit.on_failure is deny. REASON_AUDIT_UNAVAILABLE
 * (s->verdict set), or REASON_NONE.
 */
enum sg_reason	 proxy_decide_audit(struct exchange *);

/* proxy_origin.c: an origin connection serves only its own decision. */
int		 origin_bind_match(const struct origin_bind *have,
		    const struct origin_bind *want, const struct netaddr *addrs,
		    size_t n);
void		 origin_bind_want(const struct exchange *, struct origin_bind *);
void		 origin_bind_set(struct exchange *, const struct netaddr *);
/* 1 when s->o was opened for the current decision (address in s->addrs). */
int		 upstream_reusable(struct exchange *);
/*
 * A kept-alive origin connection for a new exchange of the same decision
 * (sandbox, host, port, TLS, credentials; its own or one from the pool,
 * at whichever address it is connected to): 1, and the address it is
 * connected to becomes the exchange's only one, for its address stage to
 * check; 0 when it was opened for another decision (or there is none).
 */
int		 upstream_keep(struct exchange *);
/* Before any byte goes to the origin: 0, or -1 (audited, exchange closed). */
int		 upstream_guard(struct exchange *);
/*
 * The exchange's origin connection, idle after its response, moved into
 * its worker's pool (the exchange has none after), the oldest kept there
 * closed when the pool is full: 0; -1 when it is not worth keeping (the
 * exchange keeps it).
 */
int		 upstream_keep_in(struct exchange *);
/*
 * proxy_upstream.c: while a lookup, an origin connect or an approval holds
 * the exchange (the client is not read), a reset of the client's socket
 * ends it (EV_CLOSED); client_watch_free lets the watch go.
 */
void		 client_watch(struct exchange *);
void		 client_watch_free(struct exchange *);
int		 upstream_retire(struct exchange *);
/*
 * A kept connection bound for s's current decision (upstream_reusable
 * holds after) moved into its exchange, which has none: 1; 0 when none is.
 */
int		 upstream_take(struct exchange *);
/* Every connection the worker's pool keeps, closed (its shutdown). */
void		 origin_pool_clear(struct worker *);
/*
 * A new origin connection on bev (not bound until origin_bind_set), or
 * NULL (bev left to the caller); closed (its TLS session kept resumable)
 * and freed.
 */
struct origin	*origin_new(struct worker *, struct bufferevent *);
void		 origin_close(struct origin *);


/* proxy_cred.c */
int		 cred_init(struct proxy *);
void		 cred_free(struct proxy *);
void		 cred_policy_changed(struct proxy *, struct policy *);
void		 cred_check_rotation(struct proxy *);
int		 cred_placeholder(struct proxy *, const char *sandbox,
		    const char *cred, char *out, size_t len);
int		 cred_in_name(struct proxy *, const char *host, char *cred,
		    size_t credlen);
/* Any issued placeholder in buf[0..n) as sent (a request's trailer fields). */
int		 cred_in_bytes(struct proxy *, const char *buf, size_t n,
		    char *cred, size_t credlen);
/* 0: go on (plan filled); -1: refuse with *reason, plan->cred naming the credential. */
int		 cred_request(struct exchange *, const struct http_request *,
		    struct cred_plan *, enum sg_reason *reason);
void		 cred_plan_clear(struct cred_plan *);
/* cred_plan_clear, and the plan's extension freed. */
void		 cred_plan_free(struct cred_plan *);
void		 cred_issue(struct proxy *, const struct policy *,
		    const char *sandbox, const char *policy_name);
void		 cred_forget(struct proxy *, const char *sandbox);
int		 cred_host_bound(const struct exchange *);
/* 1 when an answer to the plan's request is scrubbed (a credential bound to its host). */
static inline int
cred_plan_scrubs(const struct cred_plan *p)
{
	return p->n_bound + p->n_also > 0 && p->snap != NULL;
}
/*
 * secrets[i], phs[i] (CRED_SCRUB_MAX room) of the credentials bound to the
 * request's host -- for kind oauth2 its tokens -- how many.
 */
size_t		 cred_scrub_lists(const struct exchange *, const char **secrets,
		    const char **phs);
/*
 * 1 when a response header's name from a credential's host holds one of
 * its secrets (in any encoding the scrubber knows), or cannot be checked:
 * such a field is dropped, since a name is no place for a placeholder.
 */
int		 cred_name_leaks(struct exchange *, const char *name, size_t len);



/* proxy_cred.c: search buf[0..n) (and the tail of what moved before); moved bytes go on. */
int		 cred_in_body(struct exchange *, struct evbuffer *, size_t n,
		    size_t moved, char *cred, size_t credlen);
size_t		 cred_holdback(struct proxy *, struct evbuffer *, size_t len);

/* proxy_tls.c */
/* ALPN for the server role: h2 (arg: the config, limits.http2.enabled), http/1.1, or nothing. */
struct ssl_st;
int		 proxy_tls_alpn_cb(struct ssl_st *, const unsigned char **out,
		    unsigned char *outlen, const unsigned char *in,
		    unsigned int inlen, void *arg);
int		 proxy_tls_worker_init(struct worker *, const struct config *);
void		 proxy_tls_worker_free(struct worker *);
/*
 * Terminate the client's TLS with a leaf for the tunnel's name; the
 * client's events go to on_event from then on. 0, or -1 (nothing handed
 * over: the caller refuses the tunnel).
 */
int		 proxy_tls_intercept_client(struct exchange *,
		    bufferevent_event_cb on_event);
struct bufferevent *proxy_tls_origin_bev(struct exchange *);
const char	*proxy_tls_origin_error(struct bufferevent *, char *, size_t);
void		 proxy_tls_origin_connected(struct exchange *, struct bufferevent *);
/* An origin connection (TLS or not) freed, its TLS session kept resumable. */
void		 proxy_tls_origin_close(struct bufferevent *);
/* In a read callback, before the input is drained: size the filter's next reads. */
void		 proxy_tls_read_size(struct bufferevent *);
/* Ciphertext not yet written to an intercepted client's socket. */
size_t		 proxy_tls_client_unsent(struct exchange *);
/* Free cbev or obev (and the socket under its TLS filter). */
void		 proxy_tls_bev_free(struct bufferevent *);
/* bufferevent_socket_connect, also for proxy_tls_origin_bev's filter. */
int		 proxy_tls_connect(struct bufferevent *, const struct sockaddr *,
		    int);
/* When a TLS origin's socket took its first bytes (its TCP connect done): 0, or -1. */
int		 proxy_tls_tcp_connected(struct bufferevent *, struct timespec *);

/*
 * The client socket an exchange answers on: its connection's, or NULL for
 * an HTTP/2 stream's exchange, whose answer goes to its stream (the
 * connection's socket is its owner's, carrying every stream).
 */
/* The origin socket its exchange writes to, or NULL. */
#define EXCHANGE_OBEV(x)	((x)->o != NULL ? (x)->o->bev : NULL)
#define EXCHANGE_CBEV(s)		((s)->is_stream ? NULL : (s)->c->cbev)

/* 1 when its connection answers HTTP requests one by one (rows per request). */
#define EXCHANGE_IS_HTTP(s)	((s)->c->kind == KIND_HTTP || \
				 (s)->c->kind == KIND_INGRESS || (s)->c->tunnel_http)

/* proxy_ws.c: WebSocket upgrades, their checks and their framed relay. */
struct ws_relay;
/* A request's Upgrade, once its credential plan is known: 0, or -1 refused. */
int		 ws_request_check(struct exchange *, const struct http_request *);
/* The origin's 101: 1 a WebSocket relay, 0 bytes (relay_start), -1 refused. */
int		 ws_upgrade_check(struct exchange *, const struct http_response *);
/* Refuse the origin's 101: 502 upgrade-refused, decision error; closes. */
void		 ws_upgrade_refuse(struct exchange *, const char *detail);
void		 ws_relay_start(struct exchange *);
void		 ws_relay_free(struct exchange *);

/* proxy_forward.c: the client took bytes; a paused origin is read again. */
void		 forward_resume(struct exchange *);
/*
 * proxy_h2_origin.c, for a stream: more of the client's body is there (or
 * its end); the client took response bytes. To the stream's HTTP/2 origin
 * stream when it has one, else to proxy_forward.c.
 */
void		 stream_client_body(struct exchange *);
void		 stream_resume(struct exchange *);

/*
 * proxy_h2_origin.c: an HTTP/2 stream forwarded to an HTTP/2 origin. After
 * the decision and the plan; only_h2 (gRPC): an origin without h2 is a
 * 502, else it gets the HTTP/1.1 head already in s->fwd.head.
 */
struct h2o;
void		 h2o_request(struct exchange *, const struct http_request *,
		    int n, int only_h2);
void		 h2o_client_read(struct exchange *);
/* The client took response bytes: the origin may send more. */
void		 h2o_resume(struct exchange *);
void		 h2o_free(struct exchange *);
/* An h2 client connection ends: its origin connection goes when idle. */
struct h2up;
void		 h2up_release(struct exchange *);
/* proxy_request.c: the request's fields for it, swapped ("name\0value\0" pairs). */
struct vault_wbuf;
int		 http_h2_fields(struct exchange *, const struct http_request *,
		    struct vault_wbuf *, size_t *n);

/*
 * proxy_request.c: the credential plan of a decided request (placeholders
 * swapped where they belong, refused elsewhere: answered, -1), and its
 * head for the origin in s->fwd.head (replace_host: Host names the
 * target): 0, or -1 out of memory.
 */
int		 request_cred_check(struct exchange *, const struct http_request *);
/*
 * proxy_oauth2.c: the access token of every oauth2 credential the plan
 * swaps, fresh, and the plan on the snapshot that holds it: 0, or -1 with
 * plan->cred and detail set (refuse with credential-refresh-failed).
 */
int		 oauth2_plan_ready(struct exchange *, const struct http_request *,
		    char *detail, size_t len);
/* proxy_oauth2.c: the token keeper of p (cred_init), publishing into p->snap. */
int		 oauth2_proxy_init(struct proxy *);
/* Before the workers go: no fetch ends after this (its thread joined). */
void		 oauth2_proxy_stop(struct proxy *);
/*
 * proxy_oauth2.c: a parsed head inside an intercepted tunnel that carries
 * the sandbox's placeholder of an oauth2 credential of this host whose
 * token is being fetched (or must be: the fetch starts on the fetcher
 * thread): 1, the exchange is parked (client reads off, the head left in
 * the input) until the fetch ends, then read again from its start; 0 go
 * on. oauth2_wake_cb is each worker's oauth2_ev.
 */
int		 oauth2_park(struct exchange *, const struct http_request *);
/*
 * proxy_approval.c (docs/approvals.md): a decision marked to be asked
 * (d->v.ask, mode: ask) looks at the sandbox's questions: an answer in
 * force or the held request's own answer decides d (allowed, or
 * approval-denied / -timeout / -limit); otherwise the exchange is held
 * (s->approval_held: client reads off, the head left in the input) and
 * read again from its start once its question is answered or times out.
 */
struct decision;
void		 approval_gate(struct exchange *, struct decision *d);
/* The exchange goes: the question it waited on loses a waiter. */
void		 approval_exchange_gone(struct exchange *);
int		 approval_proxy_init(struct proxy *);
void		 approval_proxy_free(struct proxy *);
int		 approval_worker_init(struct worker *);
void		 approval_worker_free(struct worker *);
/* Every worker looks at its held requests (any thread). */
void		 approval_wake_all(struct proxy *);
/* The DNS listener's side (struct dns_server_env's ask, ask_collect, ask_leave; arg: the proxy). */
int		 approval_dns_ask(void *p, const char *sandbox, const char *host,
		    uint64_t *id);
int		 approval_dns_collect(void *p, uint64_t id);
void		 approval_dns_leave(void *p, uint64_t id);
/* proxy_admin_approval.c: GET /v1/approvals, POST /v1/approvals/{id}: 1 when handled. */
struct evhttp_request;
int		 admin_approvals(struct proxy *, struct evhttp_request *,
		    const char *uri, int cmd);
void		 oauth2_wake_cb(evutil_socket_t, short, void *);
/*
 * proxy_dlp.c: outbound secret detection (docs/dlp.md). dlp_request scans
 * the target and headers before the head is built: 0 go on, -1 refused
 * (answered). dlp_body_h1: the HTTP/1.1 request body bytes move_body is
 * about to move (at most *limit raw bytes; lowered to hold trailer fields
 * back until they are whole and scanned), dlp_body_buf: the first n
 * payload bytes of buf (ended: the last); 0 go on, -1 refused (answered,
 * or the exchange closed when its response had begun).
 */
int		 dlp_request(struct exchange *, const struct http_request *);
int		 dlp_body_h1(struct exchange *, size_t *limit);
int		 dlp_body_buf(struct exchange *, struct evbuffer *, size_t n,
		    int ended, const char *where);
/*
 * Payload the caller refuses itself: a WebSocket's client messages
 * (unmasked, one stream per message), a body toward an HTTP/2 origin. The
 * first n bytes of buf: -1 a finding refuses it (nothing answered: the
 * caller ends the session or stream), 0 go on. _end: the stream ended.
 */
int		 dlp_payload(struct exchange *, struct evbuffer *, size_t n,
		    const char *where);
int		 dlp_payload_end(struct exchange *, const char *where);
/*
 * A client WebSocket control frame's payload (unmasked, the first n bytes
 * of payload), a stream of its own: -1 refuse (block, or it could not be
 * scanned; not answered), 0 go on.
 */
int		 dlp_control(struct exchange *, struct evbuffer *payload, size_t n);
/*
 * An HTTP/2 request's trailer fields t[0..n) ("name: value\r\n" each),
 * before they go on: 1 refuse (a finding under block; the row's rule
 * names it), -1 refuse (it could not be scanned), 0 go on. Nothing is
 * answered.
 */
int		 dlp_trailers(struct exchange *, const char *t, size_t n);
/*
 * proxy_decide.c: an allowed destination's name (s->target.host) -- a DNS
 * question, a CONNECT or SOCKS5 target, an SNI, a Host -- carrying an
 * encoded payload or a rule's secret (raw[0..rawlen): the name as the client
 * wrote it; NULL: the normal form) (docs/dlp.md): 1 refuse (verdict reason
 * and rule set), 0 go on (report: the verdict's report set). where: "dns",
 * "name".
 */
int		 dlp_name(struct exchange *, const char *where, const char *raw,
		    size_t rawlen);
/*
 * proxy_dlp_vault.c: the vault values of pol's credentials not bound to
 * host. dlp_vault_seek: in p[0..n) (a name): 1 one is there, 0 none, -1 no
 * memory. dlp_vault_seekers: a seeker of them into each of seek[0..nseek)
 * (left NULL when none is watched): 0, or -1 no memory.
 */
struct vault_seeker;
int		 dlp_vault_seek(struct proxy *, const struct policy *pol,
		    const char *host, const void *p, size_t n);
int		 dlp_vault_seekers(struct proxy *, const struct policy *pol,
		    const char *host, struct vault_seeker **seek, size_t nseek);
/* The same for many distinct such names under one parent (b's window). */
struct dlp_burst;
int		 dlp_name_burst(struct exchange *, struct dlp_burst *b,
		    int64_t now_ms);
int		 request_build_head(struct exchange *, const struct http_request *,
		    int replace_host);

/* proxy_relay.c: the decided, connected tunnel's bytes both ways. */
void		 relay_start(struct exchange *);
/*
 * proxy_tlswatch.c: a passed-through TLS tunnel's further ClientHellos
 * (parse/tls_watch.h). tlswatch_start: its first, first_len bytes of
 * records, was decided; -1 out of memory. tlswatch_take: how many of the
 * n bytes bev's input holds may go on now, (size_t)-1 when the exchange
 * was refused or closed.
 */
int		 tlswatch_start(struct exchange *, size_t first_len);
size_t		 tlswatch_take(struct exchange *, struct bufferevent *, size_t n);
void		 tlswatch_free(struct exchange *);
/* Refuse a tunnel: its deny row, a TLS access_denied alert (tls), closed. */
void		 relay_refuse(struct exchange *, int tls, enum sg_reason,
		    const char *detail);
#define TLS_ALERT_LEN	7
extern const unsigned char tls_alert_access_denied[TLS_ALERT_LEN];
/* proxy_relay.c: bulk through tunnels the gateway does not read (splice) */
int		 splice_ready(const struct exchange *);
int		 splice_start(struct exchange *);
void		 splice_free(struct exchange *);

/*
 * What the layer below the front-ends (the exchange: decide, forward,
 * credentials, origins, relays) needs of them, handed down once by
 * proxy_new() as p->fe: that layer never names a front-end's function, so
 * calls run one way (docs/architecture.md, "Layers";
 * scripts/check-layers.py).
 */
struct front_ops {
	/* A new connection's first step for its listener (may close it). */
	void		(*start)(struct exchange *);
	/* Reads request heads from the client (HTTP/1.1). */
	bufferevent_data_cb client_read;
	/* A response is done and the connection is kept: the next request. */
	void		(*next_request)(struct exchange *);
	/* Refusals in the listener's own protocol before any HTTP. */
	void		(*refuse_socks5)(struct exchange *, enum sg_reason);
	void		(*refuse_transparent)(struct exchange *, enum sg_reason);
	/* From exchange_close: a connection's streams, a stream's place. */
	void		(*closed)(struct exchange *);
	/* An HTTP/2 stream's answer and request body (proxy_h2.c, h2_stream_*). */
	int		(*stream_head)(struct exchange *, const nghttp2_nv *, size_t,
			    int);
	int		(*stream_response)(struct exchange *,
			    const struct http_response *);
	int		(*stream_data)(struct exchange *, struct evbuffer *);
	int		(*stream_end)(struct exchange *, const nghttp2_nv *, size_t);
	size_t		(*stream_pending)(struct exchange *);
	int		(*stream_full)(struct exchange *);
	struct evbuffer	*(*stream_body)(struct exchange *);
	int		(*stream_body_end)(struct exchange *, const char **,
			    size_t *);
	void		(*stream_poke)(struct exchange *);
	struct exchange	*(*stream_parent)(struct exchange *);
	/*
	 * A connection's HTTP/2 streams whose exchanges go on: the connection
	 * is not idle while one does (each stream keeps its own idle time).
	 */
	int		(*streams_live)(struct exchange *);
	/* A worker's DNS listener: its held queries looked at again (mode: ask). */
	void		(*dns_held_wake)(struct dns_server *);
};

/*
 * What an exchange's close (proxy_life.c) lets go of that the parts
 * above it hung on the exchange, handed down by proxy_new() as p->parts
 * (proxy_parts.c): the exchange's life calls nothing above it by name.
 */
struct exchange_parts {
	void		(*release)(struct exchange *);
};
extern const struct exchange_parts proxy_exchange_parts;

/* The exchange layer's way to a stream's front-end (see struct front_ops). */
static inline int
fe_stream_head(struct exchange *s, const nghttp2_nv *nv, size_t n, int end)
{
	return s->p->fe->stream_head(s, nv, n, end);
}
static inline int
fe_stream_response(struct exchange *s, const struct http_response *r)
{
	return s->p->fe->stream_response(s, r);
}
static inline int
fe_stream_data(struct exchange *s, struct evbuffer *b)
{
	return s->p->fe->stream_data(s, b);
}
static inline int
fe_stream_end(struct exchange *s, const nghttp2_nv *nv, size_t n)
{
	return s->p->fe->stream_end(s, nv, n);
}
static inline size_t
fe_stream_pending(struct exchange *s)
{
	return s->p->fe->stream_pending(s);
}
static inline int
fe_stream_full(struct exchange *s)
{
	return s->p->fe->stream_full(s);
}
static inline struct evbuffer *
fe_stream_body(struct exchange *s)
{
	return s->p->fe->stream_body(s);
}
static inline int
fe_stream_body_end(struct exchange *s, const char **tr, size_t *len)
{
	return s->p->fe->stream_body_end(s, tr, len);
}
static inline void
fe_stream_poke(struct exchange *s)
{
	s->p->fe->stream_poke(s);
}
static inline struct exchange *
fe_stream_parent(struct exchange *s)
{
	return s->p->fe->stream_parent(s);
}


#endif
