/*
 * Unit tests of the response scrubber (src/vault/vault_scrub.c): every
 * encoding, every split point of a long body, several secrets, overlapping
 * candidates, the exact hold-back, finish, and agreement with the naive
 * model in scrub_ref.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "check.h"
#include "vault/vault.h"
#include "vault/vault_int.h"
#include "vault/scrub_ref.h"

/* Secret 1 has every byte class the encodings treat differently. */
static const char S1[] = "sk-proj-Abc123/+xyz\"q\\u\x01\t\x1btail=01<2&3>456789 !~*";
static const char S2[] = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
static const char P1[] = "sg-ph-aaaabbbbccccddddeeeeffffgggghhhh";
static const char P2[] = "sg-ph-2222333344445555666677772222zzzz";

struct fixture {
	struct vault_snapshot *snap;
	const char	*names[4];
	const char	*phs[4];
	size_t		 n;
	struct ref_pat	 pats[4 * REF_MAX_PATS];
	size_t		 np;
};

static void
fx_init(struct fixture *f, const char *const *vals, const char *const *phs,
    size_t n)
{
	static const char *const names[] = { "s1", "s2", "s3", "s4" };
	const unsigned char *v[4];
	size_t lens[4], i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < n; i++) {
		v[i] = (const unsigned char *)vals[i];
		lens[i] = strlen(vals[i]);
		f->names[i] = names[i];
		f->phs[i] = phs[i];
		f->np += ref_patterns(v[i], lens[i], phs[i], f->pats + f->np);
	}
	f->n = n;
	f->snap = vault_snapshot_build(names, v, lens, n);
	if (f->snap == NULL)
		abort();
}

static void
fx_free(struct fixture *f)
{
	vault_snapshot_unref(f->snap);
	ref_free(f->pats, f->np);
}

/* Feed in[0..len) in pieces cut at cuts[0..ncuts) (ascending), then finish. */
static char *
scrub_cuts(struct fixture *f, const void *in, size_t len, const size_t *cuts,
    size_t ncuts, size_t *outlen)
{
	struct vault_scrubber *sc;
	struct evbuffer *ib = evbuffer_new(), *ob = evbuffer_new();
	size_t i, from = 0, to;
	char *res;

	sc = vault_scrubber_new(f->snap, f->names, f->phs, f->n);
	if (sc == NULL)
		abort();
	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		evbuffer_add(ib, (const char *)in + from, to - from);
		if (vault_scrub(sc, ib, ob) != 0 ||
		    evbuffer_get_length(ib) != 0)
			abort();
		from = to;
	}
	if (vault_scrub_finish(sc, ob) != 0)
		abort();
	vault_scrubber_free(sc);
	*outlen = evbuffer_get_length(ob);
	res = malloc(*outlen + 1);
	evbuffer_remove(ob, res, *outlen);
	res[*outlen] = '\0';
	evbuffer_free(ib);
	evbuffer_free(ob);
	return res;
}

static char *
scrub_whole(struct fixture *f, const void *in, size_t len, size_t *outlen)
{
	return scrub_cuts(f, in, len, NULL, 0, outlen);
}

static int
same_as_ref(struct fixture *f, const void *in, size_t len, const char *got,
    size_t gotlen)
{
	struct ref_buf want = { 0 };
	int ok;

	ref_scrub(f->pats, f->np, in, len, &want);
	ok = want.len == gotlen && memcmp(want.b, got, gotlen) == 0;
	free(want.b);
	return ok;
}

/* ------------------------------------------------------------ encodings */

static void
test_each_encoding(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	struct fixture f;
	struct ref_buf body, enc, want;
	size_t k, outlen, i;
	char *out;

	fx_init(&f, vals, phs, 2);
	for (i = 0; i < 2; i++) {
		for (k = 0; k < REF_MAX_PATS; k++) {
			memset(&body, 0, sizeof(body));
			memset(&enc, 0, sizeof(enc));
			memset(&want, 0, sizeof(want));
			ref_put(&enc, "", 0);
			ref_encode((int)k, (const unsigned char *)vals[i],
			    strlen(vals[i]), &enc);
			ref_put(&body, "<<", 2);
			ref_put(&body, enc.b, enc.len);
			ref_put(&body, ">>", 2);
			out = scrub_whole(&f, body.b, body.len, &outlen);
			CHECK_MSG(!ref_contains_any(f.pats, f.np,
			    (unsigned char *)out, outlen), "secret %zu kind %zu "
			    "survived", i, k);
			CHECK_MSG(outlen != body.len ||
			    memcmp(out, body.b, outlen) != 0,
			    "secret %zu kind %zu unchanged", i, k);
			CHECK_MSG(same_as_ref(&f, body.b, body.len, out, outlen),
			    "secret %zu kind %zu differs from the model", i, k);
			/* Raw, percent and JSON forms: exactly the placeholder. */
			if (k == 0 || k >= 7) {
				ref_put(&want, "<<", 2);
				ref_encode((int)k, (const unsigned char *)phs[i],
				    strlen(phs[i]), &want);
				ref_put(&want, ">>", 2);
				CHECK_MSG(outlen == want.len &&
				    memcmp(out, want.b, outlen) == 0,
				    "secret %zu kind %zu: %s", i, k, out);
			}
			free(out);
			free(body.b);
			free(enc.b);
			free(want.b);
		}
	}
	fx_free(&f);
}

/* Whole base64 blobs (padded) with the secret at each offset mod 3. */
static void
test_base64_blobs(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	static const char *const pre[] = { "", "u", "us", "use", "user:" };
	struct fixture f;
	struct ref_buf plain, blob;
	unsigned char *tmp;
	size_t i, p, url, outlen, n;
	char *out;

	fx_init(&f, vals, phs, 2);
	for (i = 0; i < 2; i++) {
		for (p = 0; p < sizeof(pre) / sizeof(pre[0]); p++) {
			for (url = 0; url < 2; url++) {
				memset(&plain, 0, sizeof(plain));
				memset(&blob, 0, sizeof(blob));
				ref_put(&plain, pre[p], strlen(pre[p]));
				ref_put(&plain, vals[i], strlen(vals[i]));
				ref_put(&plain, "!x", 1 + p % 2);
				tmp = malloc(plain.len * 2 + 8);
				n = vault_b64_encode(plain.b, plain.len,
				    (int)url, 1, (char *)tmp);
				ref_put(&blob, "data:", 5);
				ref_put(&blob, tmp, n);
				out = scrub_whole(&f, blob.b, blob.len, &outlen);
				CHECK_MSG(!ref_contains_any(f.pats, f.np,
				    (unsigned char *)out, outlen),
				    "b64 secret %zu prefix %zu url %zu", i, p,
				    url);
				CHECK(outlen != blob.len ||
				    memcmp(out, blob.b, outlen) != 0);
				CHECK(same_as_ref(&f, blob.b, blob.len, out,
				    outlen));
				/* Same length mod 3: still decodes. */
				if (strlen(vals[i]) % 3 == strlen(phs[i]) % 3) {
					int u, pad;
					long d = vault_b64_decode(out + 5,
					    outlen - 5, tmp, &u, &pad);

					CHECK_MSG(d > 0, "blob does not decode");
				}
				free(tmp);
				free(out);
				free(plain.b);
				free(blob.b);
			}
		}
	}
	fx_free(&f);
}

/* ------------------------------------------------------------ streaming */

static void
long_body(struct ref_buf *b)
{
	const char *vals[] = { S1, S2 };
	struct ref_buf enc;
	size_t i, k;

	ref_put(b, "HTTP body start {\"k\":\"", 22);
	for (i = 0; i < 2; i++) {
		for (k = 0; k < REF_MAX_PATS; k += (i ? 3 : 1)) {
			memset(&enc, 0, sizeof(enc));
			ref_put(&enc, "", 0);
			ref_encode((int)k, (const unsigned char *)vals[i],
			    strlen(vals[i]), &enc);
			ref_put(b, " sk-proj- gh", 12);	/* near misses */
			ref_put(b, enc.b, enc.len);
			free(enc.b);
		}
	}
	ref_put(b, "\"} end", 6);
}

static void
test_every_split(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	struct fixture f;
	struct ref_buf body = { 0 };
	size_t outlen, len, cut, cuts[2], *ones;
	char *whole, *out;
	int bad = 0;

	fx_init(&f, vals, phs, 2);
	long_body(&body);
	whole = scrub_whole(&f, body.b, body.len, &len);
	CHECK(same_as_ref(&f, body.b, body.len, whole, len));
	CHECK(!ref_contains_any(f.pats, f.np, (unsigned char *)whole, len));
	for (cut = 0; cut <= body.len; cut++) {
		out = scrub_cuts(&f, body.b, body.len, &cut, 1, &outlen);
		if (outlen != len || memcmp(out, whole, len) != 0)
			bad++;
		free(out);
		/* And a three-way cut around each point. */
		cuts[0] = cut / 2;
		cuts[1] = cut;
		out = scrub_cuts(&f, body.b, body.len, cuts, 2, &outlen);
		if (outlen != len || memcmp(out, whole, len) != 0)
			bad++;
		free(out);
	}
	CHECK_MSG(bad == 0, "%d split points differ (of %zu)", bad, body.len);
	/* One byte at a time. */
	ones = malloc(body.len * sizeof(*ones));
	for (cut = 0; cut < body.len; cut++)
		ones[cut] = cut;
	out = scrub_cuts(&f, body.b, body.len, ones, body.len, &outlen);
	CHECK(outlen == len && memcmp(out, whole, len) == 0);
	free(out);
	free(ones);
	free(whole);
	free(body.b);
	fx_free(&f);
}

/* A large body with secrets every so often, cut at pseudo-random places. */
static void
test_large_random(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	struct fixture f;
	struct ref_buf body = { 0 }, enc;
	size_t outlen, cuts[64], nc = 0, i;
	uint32_t x = 12345;
	char *out, c;

	fx_init(&f, vals, phs, 2);
	while (body.len < (1u << 20)) {
		x = x * 1103515245u + 12345u;
		if (x % 97 == 0) {
			memset(&enc, 0, sizeof(enc));
			ref_put(&enc, "", 0);
			ref_encode((int)(x >> 8) % REF_MAX_PATS,
			    (const unsigned char *)vals[(x >> 16) & 1],
			    strlen(vals[(x >> 16) & 1]), &enc);
			ref_put(&body, enc.b, enc.len);
			free(enc.b);
		} else {
			c = (char)(' ' + (x >> 16) % 95);
			ref_put(&body, &c, 1);
		}
	}
	for (i = 0; i < 64; i++) {
		x = x * 1103515245u + 12345u;
		cuts[nc] = (nc ? cuts[nc - 1] : 0) + (x >> 8) % 30000;
		if (cuts[nc] > body.len)
			break;
		nc++;
	}
	out = scrub_cuts(&f, body.b, body.len, cuts, nc, &outlen);
	CHECK(same_as_ref(&f, body.b, body.len, out, outlen));
	CHECK(!ref_contains_any(f.pats, f.np, (unsigned char *)out, outlen));
	free(out);
	free(body.b);
	fx_free(&f);
}

/* ------------------------------------------------------------ overlaps */

static void
test_overlaps(void)
{
	static const struct {
		const char *a, *b, *in, *want;
	} t[] = {
		/* Leftmost wins even when a later match is longer. */
		{ "abcdefgh12345678", "12345678XYZWVUTSRQ",
		  "..abcdefgh12345678XYZWVUTSRQ..",
		  "..<AAAAAAAAAAAAAAAA>XYZWVUTSRQ.." },
		/* At one start, the longest wins. */
		{ "prefix-secret-01", "prefix-secret-01-longer",
		  "x prefix-secret-01-longer y",
		  "x <BBBBBBBBBBBBBBBB> y" },
		{ "prefix-secret-01", "prefix-secret-01-longer",
		  "x prefix-secret-01-long y",
		  "x <AAAAAAAAAAAAAAAA>-long y" },
		/* A secret that overlaps itself: non-overlapping matches. */
		{ "abababababab", "zzzzzzzzzzzzzzzzzz",
		  "abababababababab",
		  "<AAAAAAAAAAAAAAAA>abab" },
		{ "abababababab", "zzzzzzzzzzzzzzzzzz",
		  "abababababababababababab",
		  "<AAAAAAAAAAAAAAAA><AAAAAAAAAAAAAAAA>" },
		/* One inside the other. */
		{ "0123456789abcdef", "xx0123456789abcdefyy",
		  "-xx0123456789abcdefyy-0123456789abcdef-",
		  "-<BBBBBBBBBBBBBBBB>-<AAAAAAAAAAAAAAAA>-" },
	};
	const char *phs[] = { "<AAAAAAAAAAAAAAAA>", "<BBBBBBBBBBBBBBBB>" };
	struct fixture f;
	size_t i, outlen, cut;
	char *out;
	int bad;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *vals[] = { t[i].a, t[i].b };

		fx_init(&f, vals, phs, 2);
		out = scrub_whole(&f, t[i].in, strlen(t[i].in), &outlen);
		CHECK_STR(out, t[i].want);
		CHECK(same_as_ref(&f, t[i].in, strlen(t[i].in), out, outlen));
		free(out);
		bad = 0;
		for (cut = 0; cut <= strlen(t[i].in); cut++) {
			out = scrub_cuts(&f, t[i].in, strlen(t[i].in), &cut, 1,
			    &outlen);
			bad += strcmp(out, t[i].want) != 0;
			free(out);
		}
		CHECK_MSG(bad == 0, "overlap case %zu: %d cuts differ", i, bad);
		fx_free(&f);
	}
}

/* ------------------------------------------------------------ hold-back */

static void
test_holdback(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	struct fixture f;
	struct vault_scrubber *sc;
	struct evbuffer *ib, *ob;
	size_t maxlen, fed = 0, step, i;
	char buf[700];
	int bad = 0;

	fx_init(&f, vals, phs, 2);
	maxlen = ref_maxlen(f.pats, f.np);
	CHECK(maxlen > 1);
	sc = vault_scrubber_new(f.snap, f.names, f.phs, f.n);
	ib = evbuffer_new();
	ob = evbuffer_new();
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('a' + i % 26);
	/* Uneven feeds, some of them beginnings of the secret. */
	for (step = 1; fed < 5 * maxlen; step = step * 7 % 691 + 1) {
		if (step % 3 == 0) {
			evbuffer_add(ib, S1, 12);
			fed += 12;
		} else {
			evbuffer_add(ib, buf, step);
			fed += step;
		}
		CHECK(vault_scrub(sc, ib, ob) == 0);
		/* Exactly maxlen - 1 held back: no more, and no less. */
		if (evbuffer_get_length(ob) !=
		    (fed >= maxlen - 1 ? fed - (maxlen - 1) : 0))
			bad++;
	}
	CHECK_MSG(bad == 0, "%d feeds held back other than maxlen-1", bad);
	CHECK(vault_scrub_finish(sc, ob) == 0);
	CHECK_INT(evbuffer_get_length(ob), fed);
	/* The scrubber starts over after finish. */
	evbuffer_drain(ob, evbuffer_get_length(ob));
	evbuffer_add(ib, "x", 1);
	evbuffer_add(ib, S2, strlen(S2));
	CHECK(vault_scrub(sc, ib, ob) == 0);
	CHECK(vault_scrub_finish(sc, ob) == 0);
	CHECK_INT(evbuffer_get_length(ob), 1 + strlen(P2));
	CHECK(evbuffer_search(ob, P2, strlen(P2), NULL).pos == 1);
	vault_scrubber_free(sc);
	evbuffer_free(ib);
	evbuffer_free(ob);
	fx_free(&f);
}

/* ------------------------------------------------------------ the rest */

static void
test_short_secret(void)
{
	const char *vals[] = { "pw1234" }, *phs[] = { P1 };
	struct fixture f;
	size_t outlen;
	char *out;

	fx_init(&f, vals, phs, 1);
	CHECK_INT(f.np, 1);
	out = scrub_whole(&f, "a=pw1234&b=cHcxMjM0", 19, &outlen);
	/* Raw is scrubbed; its base64 (cHcxMjM0) is not looked for. */
	CHECK_STR(out, "a=sg-ph-aaaabbbbccccddddeeeeffffgggghhhh&b=cHcxMjM0");
	free(out);
	fx_free(&f);
}

static void
test_string_and_errors(void)
{
	const char *vals[] = { S2 }, *phs[] = { P2 };
	const char *missing[] = { "nope" }, *nullph[] = { NULL };
	struct fixture f;
	struct evbuffer *ob = evbuffer_new();
	struct vault_scrubber *sc;
	char hdr[256], *s;

	fx_init(&f, vals, phs, 1);
	snprintf(hdr, sizeof(hdr), "token=%s; Path=/", S2);
	CHECK(vault_scrub_string(f.snap, f.names, f.phs, 1, hdr, strlen(hdr),
	    ob) == 0);
	s = (char *)evbuffer_pullup(ob, -1);
	CHECK(evbuffer_get_length(ob) == strlen(hdr) - strlen(S2) + strlen(P2));
	CHECK(s != NULL && memcmp(s, "token=sg-ph-2222", 16) == 0);
	evbuffer_drain(ob, evbuffer_get_length(ob));
	CHECK(vault_scrub_string(f.snap, f.names, f.phs, 1, "", 0, ob) == 0);
	CHECK_INT(evbuffer_get_length(ob), 0);
	/* No such secret, no placeholder: no scrubber (the caller fails closed). */
	CHECK(vault_scrubber_new(f.snap, missing, f.phs, 1) == NULL);
	CHECK(vault_scrubber_new(f.snap, f.names, nullph, 1) == NULL);
	CHECK(vault_scrubber_new(NULL, NULL, NULL, 0) == NULL);
	CHECK(vault_scrub_string(f.snap, missing, f.phs, 1, "x", 1, ob) == -1);
	/* No secrets at all: a pass-through that holds nothing back. */
	sc = vault_scrubber_new(f.snap, NULL, NULL, 0);
	CHECK(sc != NULL);
	if (sc != NULL) {
		struct evbuffer *ib = evbuffer_new();

		evbuffer_add(ib, "abc", 3);
		CHECK(vault_scrub(sc, ib, ob) == 0);
		CHECK_INT(evbuffer_get_length(ob), 3);
		evbuffer_free(ib);
		vault_scrubber_free(sc);
	}
	evbuffer_free(ob);
	fx_free(&f);
}

/* The secret at the very start and the very end of the stream. */
static void
test_edges(void)
{
	const char *vals[] = { S1, S2 }, *phs[] = { P1, P2 };
	struct fixture f;
	char in[512], want[512], *out;
	size_t outlen;

	fx_init(&f, vals, phs, 2);
	snprintf(in, sizeof(in), "%s%s", S2, S2);
	snprintf(want, sizeof(want), "%s%s", P2, P2);
	out = scrub_whole(&f, in, strlen(in), &outlen);
	CHECK_STR(out, want);
	free(out);
	out = scrub_whole(&f, S1, strlen(S1), &outlen);
	CHECK_STR(out, P1);
	free(out);
	fx_free(&f);
}

/* Scrub s through sc into a NUL-terminated string (static, short). */
static const char *
through(struct vault_scrubber *sc, const char *s)
{
	static char buf[1024];
	struct evbuffer *ib = evbuffer_new(), *ob = evbuffer_new();
	size_t n;

	evbuffer_add(ib, s, strlen(s));
	if (vault_scrub(sc, ib, ob) != 0 || vault_scrub_finish(sc, ob) != 0)
		abort();
	n = evbuffer_get_length(ob);
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	evbuffer_remove(ob, buf, n);
	buf[n] = '\0';
	evbuffer_free(ib);
	evbuffer_free(ob);
	return buf;
}

/*
 * The compiled matcher is shared per list of secrets; placeholders stay
 * per scrubber, and a scrubber outlives its snapshot.
 */
static void
test_shared_matcher(void)
{
	const char *names[] = { "a", "b" }, *rev[] = { "b", "a" };
	const char *pa[] = { "<PLACEHOLDER-A-1>", "<PLACEHOLDER-B-1>" };
	const char *pb[] = { "<PLACEHOLDER-A-2>", "<PLACEHOLDER-B-2>" };
	const unsigned char *vals[] = { (const unsigned char *)"secret-AAAA-1234",
	    (const unsigned char *)"secret-BBBB-5678" };
	size_t lens[] = { 16, 16 }, i;
	struct vault_snapshot *snap;
	struct vault_scrubber *s1, *s2, *s3, *many[40];
	const char *list[6], *p6[] = { "<P-0>", "<P-1>", "<P-2>", "<P-3>",
	    "<P-4>", "<P-5>" };
	size_t j;

	snap = vault_snapshot_build(names, vals, lens, 2);
	s1 = vault_scrubber_new(snap, names, pa, 2);
	s2 = vault_scrubber_new(snap, names, pb, 2);
	s3 = vault_scrubber_new(snap, rev, pb, 2);	/* b gets pb[0] */
	CHECK(s1 != NULL && s2 != NULL && s3 != NULL);
	if (s1 == NULL || s2 == NULL || s3 == NULL)
		return;
	CHECK_STR(through(s1, "x secret-AAAA-1234 secret-BBBB-5678"),
	    "x <PLACEHOLDER-A-1> <PLACEHOLDER-B-1>");
	CHECK_STR(through(s2, "x secret-AAAA-1234 secret-BBBB-5678"),
	    "x <PLACEHOLDER-A-2> <PLACEHOLDER-B-2>");
	CHECK_STR(through(s3, "x secret-AAAA-1234 secret-BBBB-5678"),
	    "x <PLACEHOLDER-B-2> <PLACEHOLDER-A-2>");
	/* More lists than the cache holds: built for the scrubber alone. */
	for (i = 0; i < 40; i++) {
		for (j = 0; j < 6; j++)
			list[j] = (i >> j) & 1 ? "a" : "b";
		many[i] = vault_scrubber_new(snap, list, p6, 6);
		CHECK(many[i] != NULL);
	}
	/* 39 = a a a b b a: the first of equal patterns wins. */
	CHECK_STR(through(many[39], "secret-BBBB-5678 secret-AAAA-1234"),
	    "<P-3> <P-0>");
	CHECK_STR(through(many[0], "secret-AAAA-1234"), "secret-AAAA-1234");
	for (i = 0; i < 40; i++)
		vault_scrubber_free(many[i]);
	vault_snapshot_unref(snap);
	/* The snapshot is gone; its scrubbers still work. */
	CHECK_STR(through(s1, "secret-BBBB-5678."), "<PLACEHOLDER-B-1>.");
	vault_scrubber_free(s1);
	vault_scrubber_free(s2);
	vault_scrubber_free(s3);
}

/*
 * Detection (vault_seeker): each encoding the scrubber knows is seen at
 * every split of the stream; only watched secrets count; reset starts over.
 */
static void
test_seeker(void)
{
	const char *names[] = { "a", "b" };
	const unsigned char *vals[] = { (const unsigned char *)"secret-AAAA-1234",
	    (const unsigned char *)"secret-BBBB-5678" };
	static const char *const carriers[] = {
		"x=secret-BBBB-5678&y",			/* raw */
		"{\"k\":\"c2VjcmV0LUJCQkItNTY3OA==\"}",	/* base64 */
		"QUFzZWNyZXQtQkJCQi01Njc4",		/* base64, offset 2 */
		"QXNlY3JldC1CQkJCLTU2Nzg=",		/* base64, offset 1 */
		"x=%73%65%63%72%65%74%2D%42%42%42%42%2D%35%36%37%38",
	};
	size_t lens[] = { 16, 16 }, i, cut, len;
	static const char sa[] = "secret-AAAA-1234";
	int watch_b[] = { 0, 1 }, watch_a[] = { 1, 0 };
	struct vault_snapshot *snap;
	struct vault_seeker *sk, *ska;

	snap = vault_snapshot_build(names, vals, lens, 2);
	sk = vault_seeker_new(snap, names, watch_b, 2);
	ska = vault_seeker_new(snap, names, watch_a, 2);
	CHECK(sk != NULL && ska != NULL);
	if (sk == NULL || ska == NULL)
		return;
	for (i = 0; i < sizeof(carriers) / sizeof(carriers[0]); i++) {
		len = strlen(carriers[i]);
		for (cut = 0; cut <= len; cut++) {
			vault_seeker_reset(sk);
			CHECK_MSG(vault_seek(sk, carriers[i], cut) +
			    vault_seek(sk, carriers[i] + cut, len - cut) >= 1,
			    "%s cut at %zu", carriers[i], cut);
		}
		/* b is not watched by ska: nothing. */
		vault_seeker_reset(ska);
		CHECK_MSG(vault_seek(ska, carriers[i], len) == 0, "%s",
		    carriers[i]);
	}
	/* a by ska, byte by byte; then reset: a clean stream is clean. */
	vault_seeker_reset(ska);
	for (i = 0, len = 0; i < 16; i++)
		len += (size_t)vault_seek(ska, &sa[i], 1);
	CHECK(len == 1 && vault_seek(ska, "", 0) == 1);
	vault_seeker_reset(ska);
	CHECK(vault_seek(ska, "secret-AAAA-123", 15) == 0);
	CHECK(vault_seek(ska, "5 secret-AAAA-12", 16) == 0);
	/* A missing entry: no seeker. */
	CHECK(vault_seeker_new(snap, (const char *[]){ "a", "zz" }, watch_b,
	    2) == NULL);
	vault_snapshot_unref(snap);
	/* The seeker outlives its snapshot (the matcher is reference-counted). */
	vault_seeker_reset(sk);
	CHECK(vault_seek(sk, "..secret-BBBB-5678", 18) == 1);
	vault_seeker_free(sk);
	vault_seeker_free(ska);
}

int
main(void)
{
	test_each_encoding();
	test_seeker();
	test_base64_blobs();
	test_every_split();
	test_large_random();
	test_overlaps();
	test_holdback();
	test_short_secret();
	test_string_and_errors();
	test_edges();
	test_shared_matcher();
	return check_summary();
}
