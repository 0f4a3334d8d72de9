/*
 * libFuzzer target for http_parse_response (as the answer to GET, HEAD,
 * CONNECT and an unknown method) and the header helpers; checks slices,
 * framing rules and that prefixes never change the verdict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const struct http_limits fuzz_lim = {
	.max_line = 512,
	.max_head = 4096
};

static void
fuzz_check_response(const char *buf, int rc, const struct http_response *r,
    const char *m)
{
	size_t i;

	if (rc <= 0)
		return;
	if (r->status < 100 || r->status > 599 ||
	    r->n_headers > HTTP_MAX_HEADERS)
		abort();
	if (r->reason.len > 0 && (r->reason.p < buf ||
	    r->reason.p + r->reason.len > buf + rc))
		abort();
	for (i = 0; i < r->n_headers; i++) {
		const struct http_header *h = &r->headers[i];

		if (h->name.len == 0 || h->name.p < buf ||
		    h->name.p + h->name.len > buf + rc ||
		    h->value.p < buf || h->value.p + h->value.len > buf + rc)
			abort();
		(void)http_header_is_hop_by_hop(h, r->headers, r->n_headers);
	}
	if ((r->status / 100 == 1 || r->status == 204 || r->status == 304 ||
	    (m != NULL && strcmp(m, "HEAD") == 0)) &&
	    r->framing != HTTP_BODY_NONE)
		abort();
	if (r->framing == HTTP_BODY_UNTIL_CLOSE && r->keep_alive)
		abort();
	(void)http_header_find(r->headers, r->n_headers, "content-length");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = { "GET", "HEAD", "CONNECT", NULL };
	static struct http_response r;
	const char *buf = (const char *)data, *m;
	size_t i, j, k, cuts[4];
	int rc, rk;

	for (i = 0; i < 4; i++) {
		m = methods[i];
		rc = http_parse_response(buf, size, &fuzz_lim, m,
		    m ? strlen(m) : 0, &r);
		if (rc > (int)size || rc < HTTP_ERR_VERSION)
			abort();
		fuzz_check_response(buf, rc, &r, m);
		cuts[0] = size / 2;
		cuts[1] = size > 0 ? size - 1 : 0;
		cuts[2] = rc > 0 ? (size_t)rc - 1 : 0;
		cuts[3] = rc > 0 ? (size_t)rc : 0;
		for (j = 0; j < 4; j++) {
			k = cuts[j];
			rk = http_parse_response(buf, k, &fuzz_lim, m,
			    m ? strlen(m) : 0, &r);
			if (rc > 0)
				rk = k < (size_t)rc ? rk != HTTP_NEED_MORE :
				    rk != rc;
			else
				rk = rk != HTTP_NEED_MORE && rk != rc;
			if (rk)
				abort();
		}
	}
	return 0;
}
