/*
 * libFuzzer target for the secret scanner (src/dlp) and its decoders
 * (percent layers, JSON escapes, base64 and hex runs), and the DNS name
 * checks (the input as a name, any bytes): the input is
 * scanned whole and again fed in uneven pieces; both ways must agree on
 * whether there is a finding (not on which one is first: the views are
 * scanned a block at a time, so the first to report may differ).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlp/dlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct dlp_set *set;
static struct dlp_scan *scan;
static struct dlp_burst *burst;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct dlp_finding a, b;
	char err[256];
	size_t off = 0, n, k = 0;
	int bad, ra, rb = 0;

	if (set == NULL) {
		if (!dlp_available(NULL))
			return 0;
		if ((set = dlp_set_new(NULL, 0, 1, err, sizeof(err), &bad)) ==
		    NULL || (scan = dlp_scan_new(set, NULL, NULL)) == NULL ||
		    (burst = dlp_burst_new(4, 1000)) == NULL)
			abort();
	}
	/* The same bytes as a DNS name (any bytes: the checks must not care). */
	if (dlp_dns_name((const char *)data, len, &a) == 1 &&
	    (a.rule[0] == '\0' || strlen(a.excerpt) > DLP_EXCERPT_MAX))
		abort();
	(void)dlp_burst_add(burst, "fuzz", (const char *)data, len, (int64_t)len,
	    &a);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ra = dlp_scan_buf(scan, data, len, &a);
	if (dlp_scan_reset(scan) == -1)
		abort();
	while (off < len && rb == 0) {
		n = 1 + (k++ * 7 + data[off]) % 23;
		if (n > len - off)
			n = len - off;
		rb = dlp_scan_feed(scan, data + off, n, &b);
		off += n;
	}
	if (rb == 0)
		rb = dlp_scan_end(scan, &b);
	if (ra < 0 || rb < 0 || ra != rb)
		abort();
	if (ra == 1 && (strlen(a.excerpt) > DLP_EXCERPT_MAX || a.rule[0] == '\0' ||
	    b.rule[0] == '\0'))
		abort();
	return 0;
}
