/*
 * Unit tests of the placeholder swap inside "Authorization: Basic"
 * (src/vault/vault_swap.c): the token that goes out is canonical RFC 4648
 * base64 with padding for every length of user:pass, a value without the
 * placeholder goes out byte for byte, and which spellings are refused.
 * Expected tokens come from a reference encoder of this file's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "check.h"
#include "vault/helper_vault.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define PH	"sg-ph-abcdefghijklmnopqrstuvwxyz234567"

/* Bit by bit, unlike the vault's encoder: RFC 4648 §4 with padding. */
static size_t
ref_b64(const unsigned char *in, size_t len, char *out)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t bit, nbits = len * 8, o = 0;
	unsigned int v;
	int k;

	for (bit = 0; bit < nbits; bit += 6) {
		v = 0;
		for (k = 0; k < 6; k++) {
			v <<= 1;
			if (bit + k < nbits &&
			    (in[(bit + k) / 8] >> (7 - (bit + k) % 8)) & 1)
				v |= 1;
		}
		out[o++] = a[v];
	}
	while (o % 4 != 0)
		out[o++] = '=';
	out[o] = '\0';
	return o;
}

static struct vault_snapshot *snap;
static struct evbuffer *out;

/* vault_swap with "api" into a fresh buffer; *got holds what it wrote. */
static int
swap(const char *in, size_t inlen, char *got, size_t gotlen)
{
	size_t n;
	int rc;

	evbuffer_drain(out, evbuffer_get_length(out));
	rc = vaulttest_swap(snap, "api", PH, in, inlen, 0, out);
	n = evbuffer_get_length(out);
	if (n >= gotlen)
		n = gotlen - 1;
	evbuffer_remove(out, got, n);
	got[n] = '\0';
	return rc;
}

/* "Basic " + base64(user ":" pass), by the reference encoder. */
static void
basic_of(const char *user, const unsigned char *pass, size_t passlen,
    char *dst, size_t len)
{
	unsigned char plain[512];
	size_t ul = strlen(user);

	if (ul + 1 + passlen > sizeof(plain) || len < 6 + 4 * 512 / 3 + 8)
		abort();
	memcpy(plain, user, ul);
	plain[ul] = ':';
	memcpy(plain + ul + 1, pass, passlen);
	memcpy(dst, "Basic ", 6);
	ref_b64(plain, ul + 1 + passlen, dst + 6);
}

static void
set_secret(const unsigned char *val, size_t len)
{
	const char *names[] = { "api" };
	const unsigned char *vals[] = { val };
	size_t lens[] = { len };

	if (snap != NULL)
		vault_snapshot_unref(snap);
	snap = vault_snapshot_build(names, vals, lens, 1);
	if (snap == NULL)
		abort();
}

/*
 * Every length of user:pass modulo 3, before and after, with secrets
 * shorter and longer than the placeholder (and binary ones): the swapped
 * token is exactly the reference encoding, padding included.
 */
static void
test_lengths(void)
{
	static const char *const users[] = { "", "u", "us", "use", "git",
	    "x-access-token" };
	unsigned char sec[128];
	char in[1024], want[1024], got[1024];
	size_t u, slen, i, pad[3] = { 0, 0, 0 };
	int rc;

	for (slen = 1; slen <= 80; slen++) {
		for (i = 0; i < slen; i++)
			sec[i] = (unsigned char)(slen % 2 ? 'A' + (i + slen) %
			    26 : (i * 37 + slen) & 0xff);
		set_secret(sec, slen);
		for (u = 0; u < sizeof(users) / sizeof(users[0]); u++) {
			basic_of(users[u], (const unsigned char *)PH,
			    strlen(PH), in, sizeof(in));
			basic_of(users[u], sec, slen, want, sizeof(want));
			rc = swap(in, strlen(in), got, sizeof(got));
			CHECK_MSG(rc == 1 && strcmp(got, want) == 0,
			    "user \"%s\" secret %zu: rc %d %s != %s",
			    users[u], slen, rc, got, want);
			CHECK((strlen(got) - 6) % 4 == 0);
			pad[(strlen(users[u]) + 1 + slen) % 3]++;
		}
	}
	/* All three tails were met, often. */
	CHECK(pad[0] > 50 && pad[1] > 50 && pad[2] > 50);
}

/* The placeholder as the user, as both, twice in the password. */
static void
test_positions(void)
{
	static const struct {
		const char *user, *pass, *want_user, *want_pass;
		int n;
	} t[] = {
		{ PH, "x-oauth-basic", "SECRET-1", "x-oauth-basic", 1 },
		{ PH, "", "SECRET-1", "", 1 },
		{ PH, PH, "SECRET-1", "SECRET-1", 2 },
		{ "me", PH "/" PH, "me", "SECRET-1/SECRET-1", 2 },
		{ "me", "pre" PH "post", "me", "preSECRET-1post", 1 },
		{ "me", "%73g-ph-abcdefghijklm%6Eopqrstuvwxyz234567", "me",
		    "SECRET-1", 1 },
	};
	char in[1024], want[1024], got[1024];
	size_t i;
	int rc;

	set_secret((const unsigned char *)"SECRET-1", 8);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		basic_of(t[i].user, (const unsigned char *)t[i].pass,
		    strlen(t[i].pass), in, sizeof(in));
		basic_of(t[i].want_user, (const unsigned char *)t[i].want_pass,
		    strlen(t[i].want_pass), want, sizeof(want));
		rc = swap(in, strlen(in), got, sizeof(got));
		CHECK_MSG(rc == t[i].n && strcmp(got, want) == 0,
		    "row %zu: rc %d %s", i, rc, got);
	}
	/* A secret that could never stand in a header raw is safe encoded. */
	set_secret((const unsigned char *)"a\r\nb\0c", 6);
	basic_of("me", (const unsigned char *)PH, strlen(PH), in, sizeof(in));
	basic_of("me", (const unsigned char *)"a\r\nb\0c", 6, want,
	    sizeof(want));
	rc = swap(in, strlen(in), got, sizeof(got));
	CHECK_MSG(rc == 1 && strcmp(got, want) == 0, "binary: %d %s", rc, got);
}

/*
 * Which spellings are swapped, which refused (-1, nothing written) and
 * which are not Basic at all (0). A value without the placeholder always
 * goes out as it came, however it is spelled.
 */
static void
test_spellings(void)
{
	/* c1: the canonical token of "me:" PH "??", 43 bytes: "...==" */
	char c0[128], c1[128], b[512], tok[128], want[512], got[512];
	/* The value: pre, c1 cut at `cut`, mid, what was cut (rest), post. */
	static const struct {
		const char *pre;
		size_t	 cut;
		const char *mid;
		int	 rest;
		const char *post;
		int	 spare;		/* set a spare bit of the last group */
		int	 rc;
	} t[] = {
		{ "Basic ", 60, "", 0, "", 0, 1 },
		{ "basic ", 60, "", 0, "", 0, 1 },
		{ "BASIC ", 60, "", 0, "", 0, 1 },
		{ "bAsIc ", 60, "", 0, "", 0, 1 },
		{ "Basic  ", 60, "", 0, "", 0, 1 },
		{ "Basic\t", 60, "", 0, "", 0, 1 },
		{ " Basic ", 60, "", 0, " ", 0, 1 },
		{ "Basic ", 60, "", 0, "\t", 0, 1 },
		{ "Basic ", 58, "", 0, "", 0, -1 },	/* padding dropped */
		{ "Basic ", 59, "", 0, "", 0, -1 },	/* half of it */
		{ "Basic ", 60, "=", 0, "", 0, -1 },	/* one too many */
		{ "Basic ", 60, "", 0, "", 1, -1 },	/* spare bits set */
		{ "Basic ", 20, " ", 1, "", 0, -1 },	/* whitespace inside */
		{ "Basic ", 20, ".", 1, "", 0, -1 },	/* outside the alphabet */
		{ "Basic ", 20, "\r", 1, "", 0, -1 },
		{ "Basic ", 0, "=", 1, "", 0, -1 },
		{ "Basicc ", 60, "", 0, "", 0, 0 },
		{ "Basic", 60, "", 0, "", 0, 0 },
		{ "Bearer ", 60, "", 0, "", 0, 0 },
		{ "", 60, "", 0, "", 0, 0 },
	};
	size_t i, len;
	int rc;

	set_secret((const unsigned char *)"SECRET-1", 8);
	snprintf(c0, sizeof(c0), "me:%s??", PH);
	ref_b64((const unsigned char *)c0, strlen(c0), c1);
	CHECK(strlen(c1) == 60 && strcmp(c1 + 58, "==") == 0);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memcpy(tok, c1, sizeof(tok));
		/* '?' ends in 11: "w" (110000) becomes "x" (110001). */
		if (t[i].spare)
			tok[57] = tok[57] == 'w' ? 'x' : '?';
		snprintf(b, sizeof(b), "%s%.*s%s%s%s", t[i].pre, (int)t[i].cut,
		    tok, t[i].mid, t[i].rest ? tok + t[i].cut : "", t[i].post);
		len = strlen(b);
		evbuffer_drain(out, evbuffer_get_length(out));
		evbuffer_add(out, "[", 1);
		rc = vaulttest_swap(snap, "api", PH, b, len, 0, out);
		CHECK_MSG(rc == t[i].rc, "row %zu (%s): rc %d", i, b, rc);
		if (rc != 1)
			CHECK_MSG(evbuffer_get_length(out) == 1,
			    "row %zu wrote something", i);
		CHECK_MSG(vault_contains_placeholder(PH, b, len) ==
		    (t[i].rc != 0), "row %zu: contains", i);
	}
	/* The scheme and the whitespace around the token are kept. */
	snprintf(b, sizeof(b), " bAsIc\t %s \t", c1);
	ref_b64((const unsigned char *)"me:SECRET-1??", 13, tok);
	snprintf(want, sizeof(want), " bAsIc\t %s \t", tok);
	rc = swap(b, strlen(b), got, sizeof(got));
	CHECK_MSG(rc == 1 && strcmp(got, want) == 0, "kept: %s", got);
}

/* The caller sends the value as it came when the swap says 0. */
static void
test_untouched(void)
{
	static const char *const t[] = {
		"Basic dXNlcjpwYXNz",		/* user:pass, 9 bytes */
		"Basic dXNlcjpwYXNzdw==",	/* user:passw */
		"Basic dXNlcjpwYXNzd28=",	/* user:passwo */
		"Basic dXNlcjpwYXNzdw",		/* unpadded */
		"Basic dXNlcjpwYXNzdx==",	/* spare bits */
		"basic  dXNl cjpw YXNz ",
		"Basic -_-_",
		"Basic ====",
		"Basic !!!!",
		"Basic ",
		"Basic",
		("Basic " PH),			/* raw: swapped below, not here */
	};
	char got[512];
	size_t i;
	int rc;

	set_secret((const unsigned char *)"SECRET-1", 8);
	for (i = 0; i + 1 < sizeof(t) / sizeof(t[0]); i++) {
		evbuffer_drain(out, evbuffer_get_length(out));
		rc = vaulttest_swap(snap, "api", PH, t[i], strlen(t[i]), 0,
		    out);
		CHECK_MSG(rc == 0 && evbuffer_get_length(out) == 0,
		    "%s: rc %d", t[i], rc);
		CHECK_MSG(vault_contains_placeholder(PH, t[i],
		    strlen(t[i])) == 0, "%s", t[i]);
	}
	rc = swap(t[i], strlen(t[i]), got, sizeof(got));
	CHECK_MSG(rc == 1 && strcmp(got, "Basic SECRET-1") == 0, "%s", got);
}

int
main(void)
{
	if ((out = evbuffer_new()) == NULL)
		return 1;
	test_lengths();
	test_positions();
	test_spellings();
	test_untouched();
	if (snap != NULL)
		vault_snapshot_unref(snap);
	evbuffer_free(out);
	return check_summary();
}
