/*
 * libFuzzer target for the response scrubber (src/vault/vault_scrub.c):
 * the body is fed whole, split at a fuzzer-chosen point and in uneven
 * pieces; all three must equal the naive model of tests/vault/scrub_ref.h,
 * and no secret encoding may come through untouched.
 *
 * Input: two bytes of split point, one byte of mode, then the body, where
 *   F5 k      inserts encoding k%27 of secret (k/27)%2 whole,
 *   F6 k m    its first m%len bytes, F7 k m its last m%len bytes,
 * so that the fuzzer can build secrets, fragments and overlaps.
 * Mode bit 0 picks the secrets: short raw-only ones whose placeholders
 * share no character with them (the output then holds no secret at all),
 * or long ones with every encoding (a secret can then appear only where a
 * replacement meets a fragment the origin sent, never from the input whole).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "vault/vault.h"
#include "vault/vault_int.h"
#include "../vault/scrub_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define BODY_MAX	8192

struct fz_config {
	const char	*vals[2];
	const char	*phs[2];
	struct vault_snapshot *snap;
	struct ref_pat	 pats[2 * REF_MAX_PATS];
	size_t		 np;
};

static struct fz_config configs[2] = {
	/* Raw only (under 8 bytes); placeholders in [a-z2-7-], secrets not. */
	{ { "AB01CD8", "XY9Z1" },
	  { "sg-ph-aaaabbbbccccddddeeeeffffgggghhhh",
	    "sg-ph-zzzzyyyyxxxxwwwwvvvvuuuuttttssss" }, NULL, { { 0 } }, 0 },
	/* Every byte class each encoding treats differently. */
	{ { "sk-proj-Abc123/+xyz\"q\\u\x01\t\x1btail=01<2&3>456789 !",
	    "ghp_16C7e42F292c6912E7710c838347Ae178B4a" },
	  { "sg-ph-aaaabbbbccccddddeeeeffffgggghhhh",
	    "sg-ph-2222333344445555666677772222zzzz" }, NULL, { { 0 } }, 0 },
};
static const char *const fz_names[] = { "one", "two" };

static void
fz_init(void)
{
	const unsigned char *v[2];
	size_t lens[2], c, i;

	for (c = 0; c < 2; c++) {
		for (i = 0; i < 2; i++) {
			v[i] = (const unsigned char *)configs[c].vals[i];
			lens[i] = strlen(configs[c].vals[i]);
			configs[c].np += ref_patterns(v[i], lens[i],
			    configs[c].phs[i], configs[c].pats + configs[c].np);
		}
		configs[c].snap = vault_snapshot_build(fz_names, v, lens, 2);
		if (configs[c].snap == NULL)
			abort();
	}
	/* The literal "no secret in the output" claim needs this. */
	if (ref_overlapping(configs[0].pats, configs[0].np))
		abort();
}

/* Expand the body program into b. */
static void
fz_body(const struct fz_config *c, const uint8_t *d, size_t n,
    struct ref_buf *b)
{
	struct ref_buf enc;
	size_t i = 0, k, m;

	ref_put(b, "", 0);
	while (i < n && b->len < BODY_MAX) {
		if (d[i] < 0xf5 || d[i] > 0xf7 || i + 1 >= n) {
			ref_putc(b, d[i++]);
			continue;
		}
		k = d[i + 1] % (2 * REF_MAX_PATS);
		memset(&enc, 0, sizeof(enc));
		ref_put(&enc, "", 0);
		ref_encode((int)(k % REF_MAX_PATS), (const unsigned char *)
		    c->vals[k / REF_MAX_PATS], strlen(c->vals[k / REF_MAX_PATS]),
		    &enc);
		if (d[i] == 0xf5 || i + 2 >= n || enc.len == 0) {
			ref_put(b, enc.b, enc.len);
			i += 2;
		} else {
			m = d[i + 2] % enc.len;
			ref_put(b, d[i] == 0xf6 ? enc.b : enc.b + enc.len - m,
			    m);
			i += 3;
		}
		free(enc.b);
	}
}

/* Scrub body cut at cuts[0..nc), finish; the output into o. */
static void
fz_scrub(const struct fz_config *c, const unsigned char *body, size_t len,
    const size_t *cuts, size_t nc, struct ref_buf *o)
{
	struct vault_scrubber *sc;
	struct evbuffer *ib, *ob;
	size_t i, from = 0, to;

	sc = vault_scrubber_new(c->snap, fz_names, c->phs, 2);
	ib = evbuffer_new();
	ob = evbuffer_new();
	if (sc == NULL || ib == NULL || ob == NULL)
		abort();
	for (i = 0; i <= nc; i++) {
		to = i < nc ? cuts[i] : len;
		if (to < from || to > len)
			abort();
		evbuffer_add(ib, body + from, to - from);
		if (vault_scrub(sc, ib, ob) != 0 || evbuffer_get_length(ib) != 0)
			abort();
		from = to;
	}
	if (vault_scrub_finish(sc, ob) != 0)
		abort();
	o->len = 0;
	ref_put(o, "", 0);
	ref_put(o, evbuffer_pullup(ob, -1), evbuffer_get_length(ob));
	vault_scrubber_free(sc);
	evbuffer_free(ib);
	evbuffer_free(ob);
}

static int
fz_same(const struct ref_buf *a, const struct ref_buf *b)
{
	return a->len == b->len && memcmp(a->b, b->b, a->len) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	const struct fz_config *c;
	struct ref_buf body = { 0 }, want = { 0 }, mark_out = { 0 }, got = { 0 };
	unsigned char *mark_in;
	size_t split, cuts[BODY_MAX / 7 + 2], nc = 0, at, step;
	uint8_t mode;

	if (!inited) {
		fz_init();
		inited = 1;
	}
	if (size < 3)
		return 0;
	mode = data[2];
	c = &configs[mode & 1];
	fz_body(c, data + 3, size - 3, &body);
	split = ((size_t)data[0] << 8 | data[1]) % (body.len + 1);

	if ((mark_in = calloc(1, body.len + 1)) == NULL)
		abort();
	ref_scrub_marked(c->pats, c->np, body.b, body.len, &want, mark_in,
	    &mark_out);
	/* The model itself: no whole secret encoding in the input untouched. */
	if (!ref_all_touched(c->pats, c->np, body.b, body.len, mark_in))
		abort();

	fz_scrub(c, body.b, body.len, NULL, 0, &got);
	if (!fz_same(&got, &want))
		abort();
	fz_scrub(c, body.b, body.len, &split, 1, &got);
	if (!fz_same(&got, &want))
		abort();
	/* Uneven pieces: 1..(mode>>1)+1 bytes, varying with the body. */
	for (at = 0; at < body.len && nc < sizeof(cuts) / sizeof(cuts[0]);
	    at += step) {
		step = 1 + (body.b[at] + nc) % ((size_t)(mode >> 1) + 1);
		cuts[nc++] = at;
	}
	fz_scrub(c, body.b, body.len, cuts, nc, &got);
	if (!fz_same(&got, &want))
		abort();

	if ((mode & 1) == 0) {
		if (ref_contains_any(c->pats, c->np, got.b, got.len))
			abort();
	} else if (!ref_all_touched(c->pats, c->np, got.b, got.len,
	    mark_out.b))
		abort();

	free(mark_in);
	free(body.b);
	free(want.b);
	free(mark_out.b);
	free(got.b);
	return 0;
}
