/*
 * libFuzzer target for the canonical path (core/policy_path.c), with
 * invariants that abort: an OK form is its own canonical form, holds no
 * dot segment, empty segment, ';', encoded '/' or '\', raw '\' or
 * control, and is absolute when the input was; a path rule and a path glob
 * agree with it; a credential's scope (policy_cred_scope.c) holds a path
 * only when its canonical form is under the scope's glob.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"
#include "core/policy_int.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
has(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; i + k <= n; i++)
		if (memcmp(s + i, needle, k) == 0)
			return 1;
	return 0;
}

static void
check_escapes(const char *s, size_t n)
{
	size_t i;
	int hi, lo, b;

	for (i = 0; i < n; i++) {
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f ||
		    s[i] == '\\' || s[i] == '?' || s[i] == '#')
			abort();
		if (s[i] != '%')
			continue;
		/* Escapes are whole, upper-case, and of what must stay one. */
		if (i + 2 >= n || (hi = util_hexval(s[i + 1])) < 0 ||
		    (lo = util_hexval(s[i + 2])) < 0 ||
		    (s[i + 1] >= 'a' && s[i + 1] <= 'f') ||
		    (s[i + 2] >= 'a' && s[i + 2] <= 'f'))
			abort();
		b = hi << 4 | lo;
		if (b < 0x20 || b == 0x7f || b == '/' || b == '\\' ||
		    (b > 0x20 && b < 0x7f && b != '%' && b != '?' && b != '#'))
			abort();
		/* Not double encoded. */
		if (b == '%' && i + 4 < n && util_hexval(s[i + 3]) >= 0 &&
		    util_hexval(s[i + 4]) >= 0)
			abort();
		i += 2;
	}
}

static void
check_ok(const char *in, size_t len, const char *out, size_t olen)
{
	char again[POLICY_PATH_MAX];
	size_t alen;

	if (strlen(out) != olen || olen > POLICY_PATH_MAX - 2)
		abort();
	if (policy_path_canon(out, olen, again, sizeof(again), &alen) !=
	    POLICY_PATH_OK || alen != olen || memcmp(out, again, olen) != 0)
		abort();
	if (len > 0 && in[0] == '/' && out[0] != '/')
		abort();
	if (has(out, olen, "/./") || has(out, olen, "/../") ||
	    has(out, olen, "//") || has(out, olen, "%2F") ||
	    has(out, olen, "%5C") || has(out, olen, "%00") ||
	    memchr(out, ';', olen) != NULL)
		abort();
	if ((olen >= 2 && memcmp(out + olen - 2, "/.", 2) == 0) ||
	    (olen >= 3 && memcmp(out + olen - 3, "/..", 3) == 0) ||
	    (olen == 1 && out[0] == '.') || (olen == 2 &&
	    memcmp(out, "..", 2) == 0) || has(out, olen, "/.;") ||
	    has(out, olen, "/..;"))
		abort();
	check_escapes(out, olen);
	/* The form matches itself as a glob when it has no '*'. */
	if (memchr(out, '*', olen) == NULL &&
	    !policy_glob_match(out, out, olen))
		abort();
}

/* No request path escapes a credential's scope: inside means canonical under it. */
static void
check_scope(const char *in, size_t len, enum policy_path rc, const char *out,
    size_t olen)
{
	static char *methods[] = { "GET" };
	static char *paths[] = { "/repos/acme/*" };
	struct policy_credential c;

	memset(&c, 0, sizeof(c));
	c.scope_methods = methods;
	c.n_scope_methods = 1;
	c.scope_paths = paths;
	c.n_scope_paths = 1;
	if (policy_credential_in_scope(&c, "GET", 3, in, len) &&
	    (rc != POLICY_PATH_OK || olen < 12 ||
	    memcmp(out, "/repos/acme/", 12) != 0))
		abort();
	if (policy_credential_in_scope(&c, "POST", 4, in, len))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char out[POLICY_PATH_MAX], small[16];
	const char *in = (const char *)data;
	size_t olen, slen;
	enum policy_path rc, rs;

	rc = policy_path_canon(in, len, out, sizeof(out), &olen);
	switch (rc) {
	case POLICY_PATH_OK:
		check_ok(in, len, out, olen);
		break;
	case POLICY_PATH_AMBIGUOUS:
	case POLICY_PATH_BAD:
		if (out[0] != '\0' || olen != 0)
			abort();
		break;
	default:
		abort();
	}
	/* A smaller buffer changes only whether the form (so far) fits. */
	rs = policy_path_canon(in, len, small, sizeof(small), &slen);
	if (rs == POLICY_PATH_OK && (rc != POLICY_PATH_OK || slen != olen ||
	    memcmp(small, out, olen + 1) != 0))
		abort();
	if (rs == POLICY_PATH_AMBIGUOUS && rc != POLICY_PATH_AMBIGUOUS)
		abort();
	check_scope(in, len, rc, out, olen);
	return 0;
}
