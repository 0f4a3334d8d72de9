/*
 * libFuzzer target for http_parse_request and http_sniff_request: besides
 * memory safety, checks that slices stay inside the head and that a prefix
 * of the input never gets a verdict other than NEED_MORE or the input's own.
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
fuzz_slice_in(struct http_slice s, const char *buf, int head)
{
	if (s.len == 0)
		return;
	if (s.p < buf || s.p + s.len > buf + head)
		abort();
}

static void
fuzz_check_request(const char *buf, int rc, const struct http_request *r)
{
	size_t i;

	if (rc <= 0)
		return;
	if (r->method.len == 0 || r->target.len == 0 ||
	    r->n_headers > HTTP_MAX_HEADERS)
		abort();
	if (r->version_minor != 0 && r->version_minor != 1)
		abort();
	fuzz_slice_in(r->method, buf, rc);
	fuzz_slice_in(r->target, buf, rc);
	fuzz_slice_in(r->host, buf, rc);
	fuzz_slice_in(r->host_header, buf, rc);
	if (!(r->path.len == 1 && r->path.p[0] == '/'))
		fuzz_slice_in(r->path, buf, rc);
	for (i = 0; i < r->n_headers; i++) {
		fuzz_slice_in(r->headers[i].name, buf, rc);
		fuzz_slice_in(r->headers[i].value, buf, rc);
		if (r->headers[i].name.len == 0)
			abort();
	}
	switch (r->form) {
	case HTTP_TARGET_AUTHORITY:
		if (r->host.len == 0 || r->port == 0 || !r->has_port)
			abort();
		break;
	case HTTP_TARGET_ABSOLUTE:
		if (r->host.len == 0 || r->port == 0 || r->path.len == 0)
			abort();
		break;
	case HTTP_TARGET_ORIGIN:
		if (r->path.p[0] != '/')
			abort();
		break;
	case HTTP_TARGET_ASTERISK:
		break;
	default:
		abort();
	}
	if (r->framing == HTTP_BODY_UNTIL_CLOSE)
		abort();
	if (r->version_minor == 1 && !r->has_host)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request r;
	const char *buf = (const char *)data;
	size_t cuts[6], i, k;
	int rc, rk, s, sk;

	rc = http_parse_request(buf, size, &fuzz_lim, &r);
	fuzz_check_request(buf, rc, &r);
	if (rc > (int)size || rc < HTTP_ERR_VERSION)
		abort();
	cuts[0] = 0;
	cuts[1] = size / 3;
	cuts[2] = size / 2;
	cuts[3] = size > 0 ? size - 1 : 0;
	cuts[4] = rc > 0 ? (size_t)rc - 1 : 0;
	cuts[5] = rc > 0 ? (size_t)rc : 0;
	for (i = 0; i < 6; i++) {
		k = cuts[i];
		rk = http_parse_request(buf, k, &fuzz_lim, &r);
		if (rc > 0)
			rk = k < (size_t)rc ? rk != HTTP_NEED_MORE : rk != rc;
		else
			rk = rk != HTTP_NEED_MORE && rk != rc;
		if (rk)
			abort();
	}
	/* sniff: a prefix of an answer is "need more" or that answer */
	s = http_sniff_request(buf, size);
	for (k = 0; k < size && k < 16; k++) {
		sk = http_sniff_request(buf, k);
		if (sk != -1 && sk != s)
			abort();
	}
	return 0;
}
