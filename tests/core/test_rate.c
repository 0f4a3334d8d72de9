/*
 * Unit test of the minute of totals behind `sandgate status`'s rates
 * (core/rate.h): nothing to measure before a second has passed; the rate
 * over what the ring holds while it is younger than a minute; over the
 * last minute only once older samples fall out; a clock going back and a
 * total going down never make a rate up.
 */
#include <stdio.h>

#include "check.h"
#include "core/rate.h"

static int
near(double a, double b)
{
	return a > b - 1e-9 && a < b + 1e-9;
}

int
main(void)
{
	struct rate_ring r;
	uint64_t tot[RATE_SERIES], t;
	double rates[RATE_SERIES], span;
	unsigned s;

	rate_init(&r);
	tot[0] = 0;
	tot[1] = 0;
	CHECK(rate_read(&r, 1000, tot, rates, &span) == -1);
	CHECK(rates[0] == 0 && rates[1] == 0 && span == 0);

	rate_sample(&r, 1000, tot);
	tot[0] = 5;
	CHECK(rate_read(&r, 1500, tot, rates, &span) == -1);	/* 0.5 s */

	/* 10 requests a second, 2 of them denied, for 10 s. */
	for (s = 1; s <= 10; s++) {
		tot[0] = 10 * s;
		tot[1] = 2 * s;
		rate_sample(&r, 1000 + 1000 * s, tot);
	}
	CHECK(rate_read(&r, 11000, tot, rates, &span) == 0);
	CHECK(near(span, 10));
	CHECK(near(rates[0], 10) && near(rates[1], 2));

	/* Then 120 s of 1 request a second, no denial: the minute forgets. */
	for (s = 11; s <= 130; s++) {
		tot[0] += 1;
		rate_sample(&r, 1000 + 1000 * s, tot);
	}
	t = 1000 + 1000 * 130;
	CHECK(rate_read(&r, t, tot, rates, &span) == 0);
	CHECK(near(span, RATE_WINDOW));
	CHECK(near(rates[0], 1) && near(rates[1], 0));

	/* Read half a second after the last sample: the totals now count. */
	tot[0] += 1;
	CHECK(rate_read(&r, t + 500, tot, rates, &span) == 0);
	CHECK(span <= RATE_WINDOW + 0.5 && span >= RATE_WINDOW - 0.5);
	CHECK(near(span, 59.5) && near(rates[0], 60.0 / 59.5));

	/* A sample from before the last is ignored; a reset reads as 0. */
	rate_sample(&r, t - 5000, tot);
	tot[0] = 0;
	CHECK(rate_read(&r, t + 500, tot, rates, &span) == 0);
	CHECK(rates[0] == 0);

	/* Samples all older than a minute: nothing to measure from. */
	CHECK(rate_read(&r, t + 200000, tot, rates, &span) == -1);
	return check_summary();
}
