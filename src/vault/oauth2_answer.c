/*
 * A token endpoint's answer (RFC 6749 5.1, 5.2), read as hostile input:
 * the HTTP/1.x status line, the body's framing (Content-Length, chunked,
 * or to the close) and the JSON object in it. Pure, no I/O; fuzzed
 * (tests/fuzz/fuzz_oauth2_answer.c). Tokens are copied into wiped memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "core/util.h"
#include "vault/oauth2_int.h"
#include "vault/vault_int.h"

/* "Name:" at line[0..len) (case-insensitive): the value, spaces trimmed. */
static int
hdr_is(const char *line, size_t len, const char *name, const char **v,
    size_t *vl)
{
	size_t n = strlen(name);

	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
		return 0;
	line += n + 1;
	len -= n + 1;
	while (len > 0 && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	*v = line;
	*vl = len;
	return 1;
}

/* Chunked body b[0..n) decoded in place: its length, or -1. */
static long
dechunk(char *b, size_t n)
{
	size_t in = 0, out = 0, sz;
	int d, digits;

	for (;;) {
		sz = 0;
		digits = 0;
		while (in < n && (d = util_hexval((unsigned char)b[in])) >= 0) {
			if (++digits > 8)
				return -1;
			sz = sz * 16 + (size_t)d;
			in++;
		}
		if (digits == 0)
			return -1;
		/* chunk extensions: skipped to the line's end */
		while (in < n && b[in] != '\n')
			in++;
		if (in >= n)
			return -1;
		in++;
		if (sz == 0)
			return (long)out;	/* trailers ignored */
		if (sz > n - in || n - in - sz < 2)
			return -1;
		memmove(b + out, b + in, sz);
		out += sz;
		in += sz;
		if (b[in] == '\r')
			in++;
		if (in >= n || b[in] != '\n')
			return -1;
		in++;
	}
}

/*
 * The error code of the body, when it is one RFC 6749 (section 5.2, and the
 * two of 4.1.2.1 token endpoints use too) defines; "unlisted error code"
 * for any other string, "" for none. The endpoint's own text never goes
 * into the message: an endpoint that echoes the request (the refresh token,
 * the client secret) in "error" would hand them to the log and to the
 * sandbox's 502.
 */
static void
error_word(const char *body, size_t len, char *out, size_t outlen)
{
	static const char *const codes[] = { "invalid_request",
	    "invalid_client", "invalid_grant", "unauthorized_client",
	    "unsupported_grant_type", "invalid_scope", "server_error",
	    "temporarily_unavailable" };
	json_t *j, *e;
	const char *s;
	size_t i;

	out[0] = '\0';
	if ((j = json_loadb(body, len, 0, NULL)) == NULL)
		return;
	if (json_is_object(j) && (e = json_object_get(j, "error")) != NULL) {
		s = json_is_string(e) ? json_string_value(e) : "";
		snprintf(out, outlen, "unlisted error code");
		for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			if (strcmp(s, codes[i]) == 0)
				snprintf(out, outlen, "%s", codes[i]);
	}
	json_decref(j);
}

static int
fail(struct oauth2_answer *a, const char *why)
{
	snprintf(a->why, sizeof(a->why), "%s", why);
	return -1;
}

int
oauth2_answer_parse(char *buf, size_t len, struct oauth2_answer *a)
{
	const char *p, *end, *eol, *v, *body;
	size_t vl, blen, clen = 0;
	int status, chunked = 0, has_len = 0;
	char word[48], *ep;
	json_t *j = NULL, *at, *tt, *ei, *rt;
	const char *s;
	long dl;

	memset(a, 0, sizeof(*a));
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 ||
	    (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ' ||
	    buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' ||
	    buf[11] < '0' || buf[11] > '9')
		return fail(a, "not an HTTP/1.x answer");
	status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + buf[11] - '0';
	a->status = status;
	/* The head: lines to an empty one. */
	p = buf;
	end = buf + len;
	for (;;) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			return fail(a, "the answer's head does not end");
		vl = (size_t)(eol - p);
		if (vl > 0 && p[vl - 1] == '\r')
			vl--;
		if (p != buf && vl == 0)
			break;
		if (p != buf && hdr_is(p, vl, "Content-Length", &v, &vl)) {
			if (vl == 0 || vl > 9 || has_len)
				return fail(a, "a bad Content-Length");
			clen = (size_t)strtoul(v, &ep, 10);
			if (ep != v + vl)
				return fail(a, "a bad Content-Length");
			has_len = 1;
		} else if (p != buf && hdr_is(p, vl, "Transfer-Encoding", &v,
		    &vl)) {
			if (vl != 7 || strncasecmp(v, "chunked", 7) != 0)
				return fail(a, "an unknown Transfer-Encoding");
			chunked = 1;
		}
		p = eol + 1;
	}
	body = eol + 1;
	blen = (size_t)(end - body);
	if (chunked) {
		if ((dl = dechunk((char *)body, blen)) < 0)
			return fail(a, "a malformed chunked body");
		blen = (size_t)dl;
	} else if (has_len) {
		if (clen > blen)
			return fail(a, "the body is shorter than its "
			    "Content-Length");
		blen = clen;
	}
	if (status >= 300 && status < 400) {
		snprintf(a->why, sizeof(a->why), "the token endpoint answered "
		    "a redirect (%d): not followed", status);
		return -1;
	}
	if (status < 200 || status >= 300) {
		error_word(body, blen, word, sizeof(word));
		snprintf(a->why, sizeof(a->why), "the token endpoint answered "
		    "%d%s%s", status, word[0] ? " " : "", word);
		return -1;
	}
	if ((j = json_loadb(body, blen, JSON_REJECT_DUPLICATES, NULL)) == NULL ||
	    !json_is_object(j)) {
		json_decref(j);
		return fail(a, "the answer is not a JSON object");
	}
	at = json_object_get(j, "access_token");
	tt = json_object_get(j, "token_type");
	ei = json_object_get(j, "expires_in");
	rt = json_object_get(j, "refresh_token");
	if (at == NULL || !json_is_string(at) ||
	    !oauth2_token_ok(json_string_value(at), json_string_length(at))) {
		json_decref(j);
		return fail(a, "no access_token string of 1-8192 printable "
		    "bytes");
	}
	if (tt == NULL || !json_is_string(tt) ||
	    strcasecmp(json_string_value(tt), "bearer") != 0) {
		json_decref(j);
		return fail(a, "token_type is not Bearer");
	}
	if (ei == NULL)
		a->expires_in = OAUTH2_DEFAULT_EXPIRES;
	else if (json_is_integer(ei) && json_integer_value(ei) > 0 &&
	    json_integer_value(ei) <= OAUTH2_MAX_EXPIRES)
		a->expires_in = (long)json_integer_value(ei);
	else {
		json_decref(j);
		return fail(a, "expires_in is not a whole number of seconds "
		    "(1 to 10 years)");
	}
	if (rt != NULL && (!json_is_string(rt) ||
	    !oauth2_token_ok(json_string_value(rt), json_string_length(rt)))) {
		json_decref(j);
		return fail(a, "refresh_token is not a string of 1-8192 "
		    "printable bytes");
	}
	if ((a->mem = vault_secmem_alloc(2 * OAUTH2_TOKEN_MAX)) == NULL) {
		json_decref(j);
		return fail(a, "out of memory");
	}
	s = json_string_value(at);
	a->access_len = json_string_length(at);
	memcpy(a->mem, s, a->access_len);
	a->access = (const char *)a->mem;
	if (rt != NULL) {
		a->refresh_len = json_string_length(rt);
		memcpy(a->mem + OAUTH2_TOKEN_MAX, json_string_value(rt),
		    a->refresh_len);
		a->refresh = (const char *)a->mem + OAUTH2_TOKEN_MAX;
	}
	json_decref(j);
	return 0;
}

void
oauth2_answer_free(struct oauth2_answer *a)
{
	if (a->mem != NULL)
		vault_secmem_free(a->mem);
	a->mem = NULL;
	a->access = a->refresh = NULL;
}
