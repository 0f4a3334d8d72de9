/*
 * What the gateway decided and moved, counted for the metrics listener
 * (docs/monitoring.md): every exchange's row is counted once, when it is
 * written (exchange_audit), by listener, decision and reason; by sandbox
 * and by credential up to STATS_MAX_NAMES names each (the rest under
 * "other"); bytes; and
 * histograms of how long the decision and the whole exchange took.
 * Counting is lock-free but for a new sandbox name; reading takes a
 * snapshot-free pass over relaxed counters (a scrape may see one exchange
 * counted in one family and not yet in the next).
 */
#ifndef SG_STATS_H
#define SG_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/reason.h"

#define STATS_MAX_NAMES		100	/* sandbox, credential label values; the rest: "other" */
#define STATS_OTHER		"other"
#define STATS_BUCKETS		14	/* histogram bounds, +Inf apart */

/* The listeners, as the row's kind names them; STATS_LK_OTHER: anything else. */
enum stats_listener {
	STATS_LK_HTTP,
	STATS_LK_CONNECT,
	STATS_LK_SOCKS5,
	STATS_LK_DNS,
	STATS_LK_TRANSPARENT,
	STATS_LK_INGRESS,
	STATS_LK_OTHER,
	STATS_LK_N
};

enum stats_hist {
	STATS_H_DECISION,	/* the exchange's start to its verdict */
	STATS_H_EXCHANGE,	/* the exchange's start to its row */
	STATS_H_CONNECT,	/* its origin connect: begun to TCP connected */
	STATS_H_TLS,		/* then to the origin's TLS handshake done */
	STATS_H_FIRST_BYTE,	/* its request sent to the response head read */
	STATS_H_N
};

/* What a connection open now carries, once it is a tunnel. */
enum stats_tunnel {
	STATS_TUN_INTERCEPTED,	/* TLS terminated: requests read inside */
	STATS_TUN_RELAYED,	/* bytes not read: TLS passed through, opaque, an upgrade */
	STATS_TUN_WEBSOCKET,	/* WebSocket frames read and relayed */
	STATS_TUN_N
};

/* What a row with a credential says became of it. */
enum stats_cred_outcome {
	STATS_CRED_SWAPPED,	/* allowed: the secret went in */
	STATS_CRED_MISUSE,	/* its placeholder toward a host it is not bound to */
	STATS_CRED_FOREIGN,	/* a key of the sandbox's own toward its host */
	STATS_CRED_UNAVAILABLE,	/* the secret could not be had (vault, keeper) */
	STATS_CRED_REFUSED,	/* refused for another reason */
	STATS_CRED_N
};

/* One exchange as counted; times in microseconds, -1: not known. */
struct stats_exchange {
	const char	*kind;		/* the row's kind: http, connect, ... */
	enum sg_verdict	 decision;
	enum sg_reason	 reason;
	const char	*sandbox;	/* NULL: none identified */
	const char	*credential;	/* the row's; NULL: none */
	int64_t		 bytes_up, bytes_down;	/* -1 or less: none */
	int64_t		 decision_us, exchange_us;
	int64_t		 connect_us, tls_us, first_byte_us;
};

/*
 * One histogram of durations on the bounds of stats_bounds(), for any
 * module (the audit writer's transactions, the keeper's round trips):
 * zeroed memory is an empty one; observing is lock-free.
 */
struct sg_hist {
	_Atomic unsigned long long bucket[STATS_BUCKETS + 1];	/* the last: +Inf */
	_Atomic unsigned long long sum_us;
};
void	sg_hist_observe(struct sg_hist *, int64_t us);	/* us < 0: nothing */
/* Cumulative counts, the count (+Inf) and the sum; 0 when it is empty. */
int	sg_hist_read(struct sg_hist *, unsigned long long cum[STATS_BUCKETS],
	    unsigned long long *count, double *sum_seconds);

struct stats;

struct stats	*stats_new(void);
void		 stats_free(struct stats *);
void		 stats_count(struct stats *, const struct stats_exchange *);

/* A tunnel opened (delta 1) or closed (-1): the gauge of open ones. */
void		 stats_tunnel(struct stats *, enum stats_listener,
		    enum stats_tunnel, int delta);
/*
 * A client connection identified as sandbox's opened (delta 1) or closed
 * (-1): the gauge of its open connections (capped names as the rest).
 */
void		 stats_sandbox_conns(struct stats *, const char *sandbox,
		    int delta);
/* Each sandbox that ever had one counted, with its open connections now. */
void		 stats_foreach_sandbox_conns(struct stats *,
		    void (*)(const char *sandbox, unsigned long long open,
		    void *), void *);
/* Exchanges ended with reason r, every listener and decision. */
unsigned long long stats_reason_total(struct stats *, enum sg_reason r);
/* Open tunnels now; never below 0. */
unsigned long long stats_tunnels_open(struct stats *, enum stats_listener,
		    enum stats_tunnel);
const char	*stats_tunnel_word(enum stats_tunnel);
const char	*stats_listener_word(enum stats_listener);
enum stats_listener stats_listener_of(const char *kind);
/* The histograms' upper bounds in seconds, STATS_BUCKETS of them. */
const double	*stats_bounds(void);

/* Reading, in a fixed order; n is never 0 in the callbacks. */
void	stats_foreach_decision(struct stats *, void (*)(enum stats_listener,
	    enum sg_verdict, enum sg_reason, unsigned long long n, void *), void *);
void	stats_foreach_sandbox(struct stats *, void (*)(const char *sandbox,
	    enum sg_verdict, unsigned long long n, void *), void *);
void	stats_foreach_sandbox_bytes(struct stats *, void (*)(const char *sandbox,
	    unsigned long long up, unsigned long long down, void *), void *);
void	stats_foreach_credential(struct stats *, void (*)(const char *cred,
	    enum stats_cred_outcome, unsigned long long n, void *), void *);
const char *stats_cred_outcome_word(enum stats_cred_outcome);
void	stats_bytes(struct stats *, enum stats_listener,
	    unsigned long long *up, unsigned long long *down);
/* One of its histograms, to read with sg_hist_read. */
struct sg_hist	*stats_hist_of(struct stats *, enum stats_hist,
		    enum stats_listener);
/* Cumulative bucket counts (STATS_BUCKETS of them), the count and sum. */
int	stats_hist(struct stats *, enum stats_hist, enum stats_listener,
	    unsigned long long cum[STATS_BUCKETS], unsigned long long *count,
	    double *sum_seconds);

#endif
