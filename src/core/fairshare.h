/*
 * Fair share between sandboxes (limits.per_sandbox): live connections and
 * token buckets for new connections and DNS queries, per sandbox id, and
 * live connections per source address while their sandbox is not known
 * yet, in one table every worker thread (and every DNS listener) shares.
 */
#ifndef SG_FAIRSHARE_H
#define SG_FAIRSHARE_H

#include <stddef.h>
#include <stdint.h>

struct netaddr;

/*
 * A token bucket of capacity rate (one second's worth), in thousandths of
 * a token so that a millisecond refills rate of them. Starts full.
 */
struct fair_bucket {
	uint64_t	 milli;		/* tokens * 1000 */
	uint64_t	 stamp_ms;	/* when milli was last brought up to date */
};

void	fair_bucket_init(struct fair_bucket *, uint32_t rate, uint64_t now_ms);
/* Take one token: 1 taken, 0 empty. A rate of 0 is no limit: always 1. */
int	fair_bucket_take(struct fair_bucket *, uint32_t rate, uint64_t now_ms);
/* 1 when the bucket would be full at now_ms (nothing to remember). */
int	fair_bucket_full(const struct fair_bucket *, uint32_t rate,
	    uint64_t now_ms);

/* 0 in any of them: no limit. */
struct fair_limits {
	uint32_t	 max_conns;	/* live connections */
	uint32_t	 conn_rate;	/* new connections per second */
	uint32_t	 dns_rate;	/* DNS queries per second */
	/*
	 * Live connections of one source address whose sandbox is not known
	 * yet; 0: the same as max_conns.
	 */
	uint32_t	 src_max_conns;
};

enum fair_verdict {
	FAIR_OK,
	FAIR_OVER_CONNS,	/* max_conns live already */
	FAIR_OVER_RATE		/* the bucket is empty */
};

/*
 * What a refusal should leave behind: audit is 1 for the first refusal of
 * a sandbox in a second (the one that gets an audit row); suppressed is
 * how many refusals went unaudited before it.
 */
struct fair_refusal {
	int		 audit;
	uint64_t	 suppressed;
};

struct fair_stats {
	uint64_t	 refused;	/* every refusal */
	uint64_t	 suppressed;	/* refusals without an audit row */
	size_t		 entries;	/* sandboxes and sources in the table now */
};

struct fairshare;
struct fairshare *fairshare_new(const struct fair_limits *);
/* The share of one source whose sandbox is not known yet (0: none). */
uint32_t	 fairshare_src_limit(const struct fairshare *);
/*
 * The source other than mine holding the most live connections whose
 * sandbox is not known yet: 1 with it in *top, its count in *top_live and
 * mine's in *my_live; 0 when no other source holds one. Walks the whole
 * table: for a full gateway, not for every connection.
 */
int		 fairshare_src_top(struct fairshare *, const struct netaddr *mine,
		    struct netaddr *top, uint32_t *top_live, uint32_t *my_live);
void		 fairshare_free(struct fairshare *);
/*
 * A connection of sandbox starts: counted (FAIR_OK, and then exactly one
 * fairshare_conn_close later), or refused with *ref filled.
 */
enum fair_verdict fairshare_conn_open(struct fairshare *, const char *sandbox,
		    uint64_t now_ms, struct fair_refusal *ref);
/*
 * An HTTP/2 stream of an identified connection: it holds an origin
 * connection of its own, so it counts toward the sandbox's max_conns as a
 * connection does (one fairshare_conn_close later), without a rate token.
 */
enum fair_verdict fairshare_stream_open(struct fairshare *, const char *sandbox,
		    uint64_t now_ms, struct fair_refusal *);
void		 fairshare_conn_close(struct fairshare *, const char *sandbox,
		    uint64_t now_ms);
/*
 * A connection whose sandbox is not known yet (its request head or SOCKS5
 * exchange still arriving) starts: counted against its source address's
 * share of max_conns -- the same figure as a sandbox's, no token taken --
 * (FAIR_OK, and then exactly one fairshare_src_close later), or refused
 * with *ref filled. Sources and sandboxes are counted apart: once its
 * sandbox is known, a connection is closed here and opened there.
 */
enum fair_verdict fairshare_src_open(struct fairshare *,
		    const struct netaddr *source, uint64_t now_ms,
		    struct fair_refusal *ref);
void		 fairshare_src_close(struct fairshare *,
		    const struct netaddr *source, uint64_t now_ms);
/* One DNS query of sandbox: FAIR_OK, or FAIR_OVER_RATE with *ref filled. */
enum fair_verdict fairshare_dns_query(struct fairshare *, const char *sandbox,
		    uint64_t now_ms, struct fair_refusal *ref);
/* Forget sandboxes with nothing to remember; how many were removed. */
size_t		 fairshare_sweep(struct fairshare *, uint64_t now_ms);
void		 fairshare_stats(struct fairshare *, struct fair_stats *);
/* CLOCK_MONOTONIC in milliseconds, the clock the table is used with. */
uint64_t	 fairshare_now_ms(void);

#endif
