/*
 * Rates over the last minute from cumulative totals: a ring of one sample
 * a second (rate_sample), read as per-second rates over the span the ring
 * holds, up to RATE_WINDOW seconds (rate_read). Pure: the caller owns the
 * clock and the lock.
 */
#ifndef SG_RATE_H
#define SG_RATE_H

#include <stdint.h>

#define RATE_WINDOW	60	/* seconds a rate is measured over, at most */
#define RATE_SERIES	2	/* totals sampled together: requests, denials */

struct rate_ring {
	uint64_t	 at_ms[RATE_WINDOW + 1];	/* the sample's clock */
	uint64_t	 v[RATE_WINDOW + 1][RATE_SERIES];
	unsigned	 head;			/* the next slot to write */
	unsigned	 n;			/* samples held */
};

/* Zeroed memory is an empty ring; this is memset. */
void	rate_init(struct rate_ring *);
/* Totals now (monotonic ms); a sample older than the last is ignored. */
void	rate_sample(struct rate_ring *, uint64_t now_ms,
	    const uint64_t totals[RATE_SERIES]);
/*
 * Per-second rates between the oldest sample at most RATE_WINDOW seconds
 * before now_ms and the totals now; *span_s is that span. Returns -1 with
 * the rates 0 when no sample is old enough to measure from (under 1 s).
 * A total that went down (a counter reset) reads as 0.
 */
int	rate_read(const struct rate_ring *, uint64_t now_ms,
	    const uint64_t totals[RATE_SERIES], double rates[RATE_SERIES],
	    double *span_s);

#endif
