/*
 * libFuzzer target for the ingress parsers: memory safety, and the
 * invariants of what they return (a parsed host re-checks as OK, a stripped
 * query or cookie never still holds an sg_token and never grows).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/ingress_host.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_host(const char *s, size_t len)
{
	struct ingress_host ih, again;
	size_t i;
	int rc;

	rc = ingress_host_parse(s, len, "sandbox.localhost", &ih);
	if (rc != INGRESS_HOST_OK && rc != INGRESS_HOST_BAD &&
	    rc != INGRESS_HOST_FOREIGN)
		abort();
	if (rc != INGRESS_HOST_OK)
		return;
	if (ih.port == 0 || ih.id[0] == '\0' || strlen(ih.id) > INGRESS_ID_MAX)
		abort();
	for (i = 0; ih.id[i] != '\0'; i++)
		if (!((ih.id[i] >= 'a' && ih.id[i] <= 'z') ||
		    (ih.id[i] >= '0' && ih.id[i] <= '9') || ih.id[i] == '-'))
			abort();
	/* The normalised name parses to the same route. */
	if (ingress_host_parse(ih.name, strlen(ih.name), "sandbox.localhost",
	    &again) != INGRESS_HOST_OK || again.port != ih.port ||
	    strcmp(again.id, ih.id) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *tok, *tok2;
	char *out, *again;
	size_t toklen, toklen2;
	int n;

	if (size > 4096)
		return 0;
	check_host(s, size);
	ingress_token_syntax_ok(s, size);
	/*
	 * A Set-Cookie that sets the token: its name, blanks trimmed, is the
	 * token's name; whatever follows the first '=' does not change that.
	 */
	if (ingress_set_cookie_is_token(s, size) &&
	    (memchr(s, '=', size) == NULL ||
	    !ingress_set_cookie_is_token(s, (size_t)((const char *)memchr(s,
	    '=', size) - s) + 1)))
		abort();
	/* Request targets and header values never hold a NUL (http_parse). */
	if (memchr(s, '\0', size) != NULL)
		return 0;
	/* A cookie's "a;b" comes out as "a; b": room for twice the input. */
	if ((out = malloc(2 * size + 1)) == NULL)
		return 0;
	n = ingress_strip_query(s, size, out, size + 1, &tok, &toklen);
	if (n < 0 || (size_t)n > size || strlen(out) != (size_t)n)
		abort();
	if (tok != NULL && (tok < s || tok + toklen > s + size))
		abort();
	/* Stripping twice finds nothing more: no token survives. */
	again = malloc((size_t)n + 1);
	if (again != NULL) {
		if (ingress_strip_query(out, (size_t)n, again, (size_t)n + 1,
		    &tok2, &toklen2) != n || tok2 != NULL)
			abort();
		free(again);
	}
	n = ingress_strip_cookie(s, size, out, 2 * size + 1, &tok, &toklen);
	if (n < 0 || (size_t)n > 2 * size || strlen(out) != (size_t)n)
		abort();
	if (tok != NULL && (tok < s || tok + toklen > s + size))
		abort();
	again = malloc(2 * (size_t)n + 1);
	if (again != NULL) {
		if (ingress_strip_cookie(out, (size_t)n, again, 2 * (size_t)n + 1,
		    &tok2, &toklen2) != n || tok2 != NULL ||
		    strcmp(again, out) != 0)
			abort();
		free(again);
	}
	free(out);
	return 0;
}
