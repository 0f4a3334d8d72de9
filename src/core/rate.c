/*
 * A minute of cumulative totals, one sample a second (rate.h), for the
 * requests/s and denials/s that `sandgate status` shows.
 */
#include <string.h>

#include "core/rate.h"

#define RATE_SLOTS	(RATE_WINDOW + 1)

void
rate_init(struct rate_ring *r)
{
	memset(r, 0, sizeof(*r));
}

void
rate_sample(struct rate_ring *r, uint64_t now_ms,
    const uint64_t totals[RATE_SERIES])
{
	unsigned last = (r->head + RATE_SLOTS - 1) % RATE_SLOTS;

	if (r->n > 0 && now_ms < r->at_ms[last])
		return;
	r->at_ms[r->head] = now_ms;
	memcpy(r->v[r->head], totals, sizeof(r->v[0]));
	r->head = (r->head + 1) % RATE_SLOTS;
	if (r->n < RATE_SLOTS)
		r->n++;
}

int
rate_read(const struct rate_ring *r, uint64_t now_ms,
    const uint64_t totals[RATE_SERIES], double rates[RATE_SERIES],
    double *span_s)
{
	unsigned i, k, best = RATE_SLOTS;
	uint64_t age;

	memset(rates, 0, sizeof(double) * RATE_SERIES);
	*span_s = 0;
	/* The oldest sample within the window: walk from the oldest held. */
	for (i = 0; i < r->n; i++) {
		k = (r->head + RATE_SLOTS - r->n + i) % RATE_SLOTS;
		if (r->at_ms[k] > now_ms)
			continue;
		age = now_ms - r->at_ms[k];
		if (age <= (uint64_t)RATE_WINDOW * 1000) {
			best = k;
			break;
		}
	}
	if (best == RATE_SLOTS || now_ms - r->at_ms[best] < 1000)
		return -1;
	*span_s = (double)(now_ms - r->at_ms[best]) / 1000.0;
	for (i = 0; i < RATE_SERIES; i++)
		if (totals[i] >= r->v[best][i])
			rates[i] = (double)(totals[i] - r->v[best][i]) / *span_s;
	return 0;
}
