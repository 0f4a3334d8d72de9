/*
 * Unit test of the placeholder snapshot (issue 13, point 4): lookup by
 * (sandbox, credential), the prefix search across many placeholders as
 * written, %-escaped, in Basic credentials and in any case, fixed
 * placeholders shared by several sandboxes, the hold-back, forgetting
 * (removed ones stay found, the oldest beyond the bound go), readers
 * that hold a snapshot while writers replace it (run it under ASan), and
 * shaped placeholders (issue 25 point 3): their shape, uniqueness, search,
 * hold-back and removal.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "check.h"
#include "exchange/cred_phs.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define FIXED		"fixed-placeholder-0001"
#define FIXED_RND	"sg-ph-fixedfixedfixedfixedfixedfixedfi"	/* random form */

struct hits {
	const struct cred_ph	*v[64];
	size_t			 n;
};

static int
hit_cb(const struct cred_ph *e, void *arg)
{
	struct hits *h = arg;

	if (h->n < 64)
		h->v[h->n++] = e;
	return 0;
}

static int
stop_cb(const struct cred_ph *e, void *arg)
{
	return 7;
}

static size_t
search(const struct cred_phs *s, const char *buf, int flags, struct hits *h)
{
	memset(h, 0, sizeof(*h));
	CHECK_INT(cred_phs_search(s, buf, strlen(buf), flags, hit_cb, h), 0);
	return h->n;
}

/* e is sg-ph- and 32 base32. */
static int
regular_random(const struct cred_ph *e)
{
	return e != NULL && e->phlen == VAULT_PLACEHOLDER_LEN &&
	    e->alphabet == NULL && strncmp(e->ph, "sg-ph-", 6) == 0;
}

static int
issue1(struct cred_phs_pub *pub, const char *sandbox, const char *cred,
    const char *fixed)
{
	struct cred_phs_want w = { sandbox, cred, fixed, NULL, 0, NULL };

	return cred_phs_issue(pub, &w, 1);
}

static const char *
ph_of(struct cred_phs_pub *pub, const char *sandbox, const char *cred,
    char *out)
{
	const struct cred_phs *s = cred_phs_enter(pub);
	const struct cred_ph *e = cred_phs_get(s, sandbox, cred);

	snprintf(out, VAULT_PLACEHOLDER_LEN + 1, "%s", e != NULL ? e->ph : "");
	cred_phs_leave(pub, s);
	return out;
}

static void
test_lookup_and_forms(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	struct cred_phs_want w[] = {
		{ "box-a", "echo", NULL, NULL, 0, NULL },
		{ "box-a", "fixed", FIXED, NULL, 0, NULL },
		{ "box-a", "frnd", FIXED_RND, NULL, 0, NULL },
		{ "box-b", "echo", NULL, NULL, 0, NULL },
		{ "box-b", "fixed", FIXED, NULL, 0, NULL },
		{ "box-b", "frnd", FIXED_RND, NULL, 0, NULL },
		{ "box-a", "echo", NULL, NULL, 0, NULL },	/* twice in one batch: once */
	};
	const struct cred_phs *s;
	const struct cred_ph *a, *b;
	struct hits h;
	char buf[512], up[64], b64[128];
	size_t i;

	CHECK(pub != NULL);
	CHECK_INT(cred_phs_issue(pub, w, 7), 0);
	CHECK_INT(cred_phs_pub_count(pub), 6);
	/* Issued once: asking again changes nothing. */
	CHECK_INT(cred_phs_issue(pub, w, 6), 0);
	CHECK_INT(cred_phs_pub_count(pub), 6);
	s = cred_phs_enter(pub);
	a = cred_phs_get(s, "box-a", "echo");
	b = cred_phs_get(s, "box-b", "echo");
	CHECK(a != NULL && b != NULL && a != b);
	CHECK_INT(a->phlen, VAULT_PLACEHOLDER_LEN);
	CHECK(strncmp(a->ph, "sg-ph-", 6) == 0 && strcmp(a->ph, b->ph) != 0);
	CHECK_STR(cred_phs_get(s, "box-b", "fixed")->ph, FIXED);
	CHECK(cred_phs_get(s, "box-c", "echo") == NULL);
	CHECK(cred_phs_get(s, "box-a", "nope") == NULL);
	CHECK_INT(cred_phs_n_fixed(s), 1);
	CHECK_INT(cred_phs_has_random(s), 1);

	/* As written, in a header value or a body. */
	snprintf(buf, sizeof(buf), "Bearer %s", a->ph);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK(h.v[0] == a);
	CHECK_INT(search(s, buf, 0, &h), 1);
	/* The callback stops the search with its value. */
	CHECK_INT(cred_phs_search(s, buf, strlen(buf), 0, stop_cb, NULL), 7);
	/* Cut short by one character: nothing. */
	buf[strlen(buf) - 1] = '\0';
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 0);
	/* %-escaped bytes, either hex case, are found in values only. */
	snprintf(buf, sizeof(buf), "k=%%73g%%2dph-%s&x", a->ph + 6);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK(h.v[0] == a);
	CHECK_INT(search(s, buf, 0, &h), 0);
	snprintf(buf, sizeof(buf), "%.10s%%%02X%s", a->ph, a->ph[10], a->ph + 11);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	/* Inside Basic credentials, canonical or not. */
	snprintf(buf, sizeof(buf), "user:%s", a->ph);
	b64[vault_b64_encode((const unsigned char *)buf, strlen(buf),
	    VAULT_B64_STD, 1, b64)] = '\0';
	snprintf(buf, sizeof(buf), "Basic %s", b64);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK(h.v[0] == a);
	CHECK_INT(search(s, buf, 0, &h), 0);
	snprintf(buf, sizeof(buf), "basic   %.*s", (int)strlen(b64) - 1, b64);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	/* Host names: any case, found only with FOLD. */
	for (i = 0; a->ph[i] != '\0'; i++)
		up[i] = (char)(a->ph[i] >= 'a' && a->ph[i] <= 'z' ?
		    a->ph[i] - 32 : a->ph[i]);
	up[i] = '\0';
	snprintf(buf, sizeof(buf), "x.%s.bound.test", up);
	CHECK_INT(search(s, buf, CRED_PHS_FOLD, &h), 1);
	CHECK(h.v[0] == a);
	CHECK_INT(search(s, buf, 0, &h), 0);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 0);
	snprintf(buf, sizeof(buf), "x-%s-y.bound.test", "FIXED-placeholder-0001");
	CHECK_INT(search(s, buf, CRED_PHS_FOLD, &h), 2);
	CHECK_INT(search(s, buf, 0, &h), 0);

	/* A fixed placeholder: every sandbox that holds it, its own first. */
	snprintf(buf, sizeof(buf), "X-Api-Key: %s", FIXED);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 2);
	CHECK(h.n == 2 && strcmp(h.v[0]->sandbox, "box-a") == 0 &&
	    strcmp(h.v[1]->sandbox, "box-b") == 0);
	CHECK_INT(search(s, "%66ixed-placeholder-0001", CRED_PHS_VALUE, &h), 2);
	CHECK_INT(cred_phs_owned(s, "box-b", FIXED, strlen(FIXED)), 1);
	CHECK_INT(cred_phs_owned(s, "dyn", FIXED, strlen(FIXED)), 0);
	CHECK_INT(cred_phs_owned(s, "box-a", b->ph, b->phlen), 0);
	CHECK_INT(cred_phs_owned(s, "box-b", b->ph, b->phlen), 1);
	/* ... also when it has the random form (the table holds both). */
	CHECK_INT(search(s, "q=" FIXED_RND, 0, &h), 2);
	CHECK_INT(cred_phs_owned(s, "box-a", FIXED_RND, strlen(FIXED_RND)), 1);

	/* Hold-back: what could begin a placeholder, and nothing else. */
	CHECK_INT(cred_phs_holdback(s, "abc s", 5), 1);
	CHECK_INT(cred_phs_holdback(s, "abc sg-ph", 9), 5);
	CHECK_INT(cred_phs_holdback(s, "abc sg-ph-q7", 12), 8);
	CHECK_INT(cred_phs_holdback(s, "abc sg-ph-q8", 12), 0);
	CHECK_INT(cred_phs_holdback(s, "abc fixed-pla", 13), 9);
	CHECK_INT(cred_phs_holdback(s, "abc", 3), 0);
	memcpy(buf, a->ph, VAULT_PLACEHOLDER_LEN - 1);
	CHECK_INT(cred_phs_holdback(s, buf, VAULT_PLACEHOLDER_LEN - 1),
	    VAULT_PLACEHOLDER_LEN - 1);
	/* A whole one is not held back (it is found instead). */
	snprintf(buf, sizeof(buf), "%s.", a->ph);
	CHECK_INT(cred_phs_holdback(s, buf, VAULT_PLACEHOLDER_LEN + 1), 0);
	cred_phs_leave(pub, s);
	cred_phs_pub_free(pub);
}

/* Many sandboxes: the ones in the buffer are found, and only they. */
static void
test_many(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	const struct cred_phs *s;
	const struct cred_ph *e;
	char id[32], *buf;
	size_t i, o = 0, n = 3000, picked = 0;
	struct hits h;

	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "dyn-%zu", i);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
	}
	CHECK_INT(cred_phs_pub_count(pub), n);
	buf = malloc(64 * 1024);
	s = cred_phs_enter(pub);
	for (i = 0; i < n; i += 97) {
		snprintf(id, sizeof(id), "dyn-%zu", i);
		e = cred_phs_get(s, id, "echo");
		CHECK(e != NULL);
		/* Decoys around each: a bare prefix, one not issued. */
		o += (size_t)sprintf(buf + o, " sg-ph- sg-ph-%s %s,",
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", e->ph);
		picked++;
	}
	CHECK_INT(search(s, buf, 0, &h), picked);
	for (i = 0; i < h.n; i++) {
		snprintf(id, sizeof(id), "dyn-%zu", i * 97);
		CHECK_STR(h.v[i]->sandbox, id);
	}
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), picked);
	CHECK_INT(search(s, buf, CRED_PHS_FOLD, &h), picked);
	cred_phs_leave(pub, s);
	free(buf);
	cred_phs_pub_free(pub);
}

static void
test_forget(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	const struct cred_phs *s;
	const struct cred_ph *e;
	char ph0[64], ph1[64], phx[64], id[32], buf[128];
	struct hits h;
	size_t i;

	CHECK_INT(issue1(pub, "static", "fixed", FIXED), 0);
	CHECK_INT(issue1(pub, "dyn-0", "echo", NULL), 0);
	CHECK_INT(issue1(pub, "dyn-0", "other", NULL), 0);
	CHECK_INT(issue1(pub, "dyn-1", "echo", NULL), 0);
	ph_of(pub, "dyn-0", "echo", ph0);
	ph_of(pub, "dyn-1", "echo", ph1);
	CHECK_INT(cred_phs_forget(pub, "nobody"), 0);
	CHECK_INT(cred_phs_pub_count(pub), 4);
	CHECK_INT(cred_phs_forget(pub, "dyn-0"), 0);
	s = cred_phs_enter(pub);
	/* No longer its own, still known: removed. */
	CHECK(cred_phs_get(s, "dyn-0", "echo") == NULL);
	CHECK_INT(cred_phs_count(s), 4);
	CHECK_INT(search(s, ph0, 0, &h), 1);
	CHECK(h.n == 1 && !cred_phs_mine(s, h.v[0], "dyn-0") &&
	    strcmp(h.v[0]->sandbox, "dyn-0") == 0);
	CHECK_INT(cred_phs_owned(s, "dyn-0", ph0, strlen(ph0)), 0);
	CHECK_INT(search(s, ph1, 0, &h), 1);
	CHECK(h.n == 1 && cred_phs_mine(s, h.v[0], "dyn-1"));
	CHECK(!cred_phs_mine(s, h.v[0], "dyn-0"));
	cred_phs_leave(pub, s);
	/* Registered again under the same id: new placeholders, old ones removed. */
	CHECK_INT(issue1(pub, "dyn-0", "echo", NULL), 0);
	ph_of(pub, "dyn-0", "echo", phx);
	CHECK(strcmp(phx, ph0) != 0);
	s = cred_phs_enter(pub);
	CHECK_INT(search(s, ph0, 0, &h), 1);
	CHECK(!cred_phs_mine(s, h.v[0], "dyn-0"));
	cred_phs_leave(pub, s);

	/* A reload that changes a fixed value: new one its own, old one removed. */
	CHECK_INT(issue1(pub, "static", "fixed", "fixed-placeholder-0002"), 0);
	CHECK_INT(issue1(pub, "static", "other", "fixed-placeholder-0003"), 0);
	s = cred_phs_enter(pub);
	CHECK_STR(cred_phs_get(s, "static", "fixed")->ph, "fixed-placeholder-0002");
	CHECK_INT(search(s, FIXED, 0, &h), 1);
	CHECK(h.n == 1 && !cred_phs_mine(s, h.v[0], "static"));
	CHECK_INT(cred_phs_owned(s, "static", FIXED, strlen(FIXED)), 0);
	CHECK_INT(search(s, "fixed-placeholder-0002", 0, &h), 1);
	CHECK(h.n == 1 && cred_phs_mine(s, h.v[0], "static"));
	cred_phs_leave(pub, s);
	/* ... and to random: a new random one; the same random stays. */
	CHECK_INT(issue1(pub, "static", "other", NULL), 0);
	CHECK_INT(issue1(pub, "dyn-1", "echo", NULL), 0);
	s = cred_phs_enter(pub);
	CHECK(strncmp(cred_phs_get(s, "static", "other")->ph, "sg-ph-", 6) == 0);
	CHECK_STR(cred_phs_get(s, "dyn-1", "echo")->ph, ph1);
	CHECK_INT(search(s, "fixed-placeholder-0003", 0, &h), 1);
	CHECK(!cred_phs_mine(s, h.v[0], "static"));
	cred_phs_leave(pub, s);

	/* Beyond the bound, the oldest removed ones are forgotten for good. */
	for (i = 0; i < CRED_PHS_REMOVED_MAX + 10; i++) {
		snprintf(id, sizeof(id), "gone-%zu", i);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
		CHECK_INT(cred_phs_forget(pub, id), 0);
	}
	/* static (2), dyn-0 (new), dyn-1 live; the last REMOVED_MAX removed. */
	CHECK_INT(cred_phs_pub_count(pub), 4 + CRED_PHS_REMOVED_MAX);
	s = cred_phs_enter(pub);
	CHECK_INT(search(s, ph0, 0, &h), 0);
	CHECK_INT(search(s, FIXED, 0, &h), 0);
	CHECK_INT(search(s, ph1, 0, &h), 1);
	snprintf(buf, sizeof(buf), "%s", "fixed-placeholder-0002");
	CHECK_INT(search(s, buf, 0, &h), 1);
	e = cred_phs_get(s, "dyn-0", "echo");
	CHECK(e != NULL && strcmp(e->ph, phx) == 0);
	cred_phs_leave(pub, s);
	cred_phs_pub_free(pub);
}

/* A reload: the static set is what the policy lists, no more. */
static void
test_static_set(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	struct cred_phs_want two[] = {
		{ "st-a", "echo", NULL, NULL, 0, NULL },
		{ "st-b", "echo", NULL, NULL, 0, NULL },
		{ "st-b", "fixed", FIXED, NULL, 0, NULL },
	}, one[] = { { "st-a", "echo", NULL, NULL, 0, NULL } };
	const struct cred_phs *s;
	char pa[64], pb[64], pd[64], px[64];
	struct hits h;

	CHECK_INT(cred_phs_set_static(pub, two, 3), 0);
	CHECK_INT(issue1(pub, "dyn", "echo", NULL), 0);
	ph_of(pub, "st-a", "echo", pa);
	ph_of(pub, "st-b", "echo", pb);
	ph_of(pub, "dyn", "echo", pd);
	/* The same set again: nothing changes. */
	CHECK_INT(cred_phs_set_static(pub, two, 3), 0);
	CHECK_STR(ph_of(pub, "st-b", "echo", px), pb);
	/* st-b left the policy: its placeholders are removed ones now. */
	CHECK_INT(cred_phs_set_static(pub, one, 1), 0);
	CHECK_INT(cred_phs_pub_count(pub), 4);
	s = cred_phs_enter(pub);
	CHECK(cred_phs_get(s, "st-b", "echo") == NULL);
	CHECK(cred_phs_get(s, "st-b", "fixed") == NULL);
	CHECK_INT(search(s, pb, 0, &h), 1);
	CHECK(!cred_phs_mine(s, h.v[0], "st-b"));
	CHECK_INT(search(s, FIXED, 0, &h), 1);
	CHECK(!cred_phs_mine(s, h.v[0], "st-b"));
	/* Registered sandboxes are not the policy's to drop. */
	CHECK_STR(cred_phs_get(s, "dyn", "echo")->ph, pd);
	CHECK_STR(cred_phs_get(s, "st-a", "echo")->ph, pa);
	cred_phs_leave(pub, s);
	/* Its id registered later: placeholders of its own, not the old ones. */
	CHECK_INT(issue1(pub, "st-b", "echo", NULL), 0);
	CHECK(strcmp(ph_of(pub, "st-b", "echo", px), pb) != 0);
	cred_phs_pub_free(pub);
}

/* ------------------------------------------------------------ shaped */

#define B62	"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define HEX	"0123456789abcdef"

static int
issue_shaped(struct cred_phs_pub *pub, const char *sandbox, const char *cred,
    const char *prefix, size_t len, const char *alphabet)
{
	struct cred_phs_want w = { sandbox, cred, NULL, prefix, len, alphabet };

	return cred_phs_issue(pub, &w, 1);
}

/* 1 when ph is prefix and len - strlen(prefix) characters of alphabet. */
static int
has_shape(const char *ph, const char *prefix, size_t len, const char *alphabet)
{
	size_t i, pl = strlen(prefix);

	if (strlen(ph) != len || strncmp(ph, prefix, pl) != 0)
		return 0;
	for (i = pl; i < len; i++)
		if (strchr(alphabet, ph[i]) == NULL)
			return 0;
	return 1;
}

static int
strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The generator: the shape, every character of the alphabet used. */
static void
test_shaped_gen(void)
{
	char ph[CRED_PHS_SHAPED_MAX + 1];
	int seen[256] = { 0 };
	size_t i, j, n = 0;

	for (i = 0; i < 2000; i++) {
		vault_placeholder_shaped(ph, "ghp_", 40, B62);
		CHECK(has_shape(ph, "ghp_", 40, B62));
		for (j = 4; j < 40; j++)
			seen[(unsigned char)ph[j]]++;
	}
	for (i = 0; i < 256; i++)
		if (seen[i] > 0)
			n++;
	CHECK_INT(n, 62);
	/* 72,000 draws of 62: each about 1161 times; far off means bias. */
	for (i = 0; B62[i] != '\0'; i++)
		CHECK_MSG(seen[(unsigned char)B62[i]] > 900 &&
		    seen[(unsigned char)B62[i]] < 1450, "%c: %d", B62[i],
		    seen[(unsigned char)B62[i]]);
	vault_placeholder_shaped(ph, "sk-", 128, HEX);
	CHECK(has_shape(ph, "sk-", 128, HEX));
}

static void
test_shaped(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	const struct cred_phs *s;
	const struct cred_ph *a, *b, *x;
	char id[32], buf[512], up[64], b64[128], old[64], **all;
	size_t i, n = 2000, k, held;
	struct hits h;

	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "dyn-%zu", i);
		CHECK_INT(issue_shaped(pub, id, "gh", "ghp_", 40, B62), 0);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
	}
	CHECK_INT(issue_shaped(pub, "dyn-0", "hexy", "sk-", 35, HEX), 0);
	CHECK_INT(issue1(pub, "static", "fixed", FIXED), 0);
	s = cred_phs_enter(pub);
	CHECK_INT(cred_phs_n_shapes(s), 2);
	/* Every one in its shape, and no two alike. */
	all = calloc(n, sizeof(*all));
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "dyn-%zu", i);
		a = cred_phs_get(s, id, "gh");
		CHECK(a != NULL && has_shape(a->ph, "ghp_", 40, B62));
		CHECK_INT(a->phlen, 40);
		all[i] = (char *)a->ph;
	}
	qsort(all, n, sizeof(*all), strp_cmp);
	for (i = 1; i < n; i++)
		CHECK(strcmp(all[i - 1], all[i]) != 0);
	free(all);
	a = cred_phs_get(s, "dyn-7", "gh");
	b = cred_phs_get(s, "dyn-0", "hexy");
	CHECK(b != NULL && has_shape(b->ph, "sk-", 35, HEX));
	CHECK(regular_random(cred_phs_get(s, "dyn-7", "echo")));

	/* Exact strings: one entry each. */
	CHECK_INT(cred_phs_owned(s, "dyn-7", a->ph, a->phlen), 1);
	CHECK_INT(cred_phs_owned(s, "dyn-8", a->ph, a->phlen), 0);
	CHECK_INT(cred_phs_owned(s, "dyn-0", b->ph, b->phlen), 1);
	/* As written: a header value, a body, a query. */
	snprintf(buf, sizeof(buf), "token %s", a->ph);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK(h.v[0] == a);
	snprintf(buf, sizeof(buf), "{\"k\":\"%s\",\"h\":\"%s\"}", a->ph, b->ph);
	CHECK_INT(search(s, buf, 0, &h), 2);
	CHECK(h.v[0] == a && h.v[1] == b);
	snprintf(buf, sizeof(buf), "/x?q=%s&r=1", a->ph);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	/* %-escaped, and inside Basic. */
	snprintf(buf, sizeof(buf), "/x?q=%%67hp_%s", a->ph + 4);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK_INT(search(s, buf, 0, &h), 0);
	snprintf(buf, sizeof(buf), "x-access-token:%s", a->ph);
	b64[vault_b64_encode((const unsigned char *)buf, strlen(buf),
	    VAULT_B64_STD, 1, b64)] = '\0';
	snprintf(buf, sizeof(buf), "Basic %s", b64);
	CHECK_INT(search(s, buf, CRED_PHS_VALUE, &h), 1);
	CHECK(h.v[0] == a);
	/* A host name, any case. */
	for (i = 0; a->ph[i] != '\0'; i++)
		up[i] = (char)(a->ph[i] >= 'a' && a->ph[i] <= 'z' ?
		    a->ph[i] - 32 : a->ph[i] >= 'A' && a->ph[i] <= 'Z' ?
		    a->ph[i] + 32 : a->ph[i]);
	up[i] = '\0';
	snprintf(buf, sizeof(buf), "x.%s.evil.test", up);
	CHECK_INT(search(s, buf, CRED_PHS_FOLD, &h), 1);
	CHECK(h.v[0] == a);
	CHECK_INT(search(s, buf, 0, &h), 0);
	/* Not it: cut short, one character changed, an unissued one. */
	snprintf(buf, sizeof(buf), "%.39s", a->ph);
	CHECK_INT(search(s, buf, 0, &h), 0);
	snprintf(buf, sizeof(buf), "%s", a->ph);
	buf[20] = buf[20] == 'A' ? 'B' : 'A';
	CHECK_INT(search(s, buf, 0, &h), 0);
	CHECK_INT(search(s, "ghp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA ghp_", 0,
	    &h), 0);
	/* After a decoy prefix and inside a longer run of the alphabet. */
	snprintf(buf, sizeof(buf), "ghp_ghp_%s", a->ph);
	CHECK_INT(search(s, buf, 0, &h), 1);

	/* Hold-back: what could begin one, and every split point joins. */
	CHECK_INT(cred_phs_holdback(s, "abc g", 5), 1);
	CHECK_INT(cred_phs_holdback(s, "abc ghp", 7), 3);
	CHECK_INT(cred_phs_holdback(s, "abc ghp_Zz9", 11), 7);
	CHECK_INT(cred_phs_holdback(s, "abc ghp_Zz-", 11), 0);
	CHECK_INT(cred_phs_holdback(s, "abc sk-0f", 9), 5);
	CHECK_INT(cred_phs_holdback(s, "abc sk-0F", 9), 0);
	snprintf(buf, sizeof(buf), "data=%s;", a->ph);
	CHECK_INT(cred_phs_holdback(s, buf, strlen(buf)), 0);
	for (k = 6; k < 5 + 40; k++) {
		/* The first k bytes arrive: the placeholder's part waits. */
		held = cred_phs_holdback(s, buf, k);
		CHECK_MSG(held >= k - 5, "split at %zu: held %zu", k, held);
		/* What went on holds no part of it; the rest completes it. */
		CHECK_INT(search(s, buf + k - held, 0, &h), 1);
	}
	snprintf(old, sizeof(old), "%s", a->ph);
	cred_phs_leave(pub, s);

	/* Removed: still found, no longer its own. */
	CHECK_INT(cred_phs_forget(pub, "dyn-7"), 0);
	s = cred_phs_enter(pub);
	CHECK_INT(search(s, old, 0, &h), 1);
	CHECK(!cred_phs_mine(s, h.v[0], "dyn-7"));
	CHECK_INT(cred_phs_owned(s, "dyn-7", old, strlen(old)), 0);
	cred_phs_leave(pub, s);
	/* A reload that changes the shape: a new one, the old one removed. */
	CHECK_INT(issue_shaped(pub, "dyn-0", "hexy", "sk-", 40, HEX), 0);
	CHECK_INT(issue_shaped(pub, "dyn-1", "gh", "ghp_", 40, B62), 0);
	s = cred_phs_enter(pub);
	x = cred_phs_get(s, "dyn-0", "hexy");
	CHECK(x != NULL && has_shape(x->ph, "sk-", 40, HEX));
	CHECK_INT(cred_phs_n_shapes(s), 3);
	cred_phs_leave(pub, s);
	/* ... to the sg-ph- form, then back. */
	CHECK_INT(issue1(pub, "dyn-2", "gh", NULL), 0);
	s = cred_phs_enter(pub);
	CHECK(regular_random(cred_phs_get(s, "dyn-2", "gh")));
	cred_phs_leave(pub, s);
	CHECK_INT(issue_shaped(pub, "dyn-2", "gh", "ghp_", 40, B62), 0);
	s = cred_phs_enter(pub);
	CHECK(has_shape(cred_phs_get(s, "dyn-2", "gh")->ph, "ghp_", 40, B62));
	cred_phs_leave(pub, s);
	/* Shapes nobody holds any more leave the list. */
	for (i = 0; i < CRED_PHS_REMOVED_MAX + 10; i++) {
		snprintf(id, sizeof(id), "gone-%zu", i);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
		CHECK_INT(cred_phs_forget(pub, id), 0);
	}
	s = cred_phs_enter(pub);
	CHECK_INT(cred_phs_n_shapes(s), 2);
	CHECK_INT(search(s, old, 0, &h), 0);
	cred_phs_leave(pub, s);
	cred_phs_pub_free(pub);
}

/*
 * What a search costs with 10,000 sandboxes: a 64 KiB body of text, without
 * and with one shape, and a body packed with tokens of the shape that are
 * not issued (each one hashed and looked up). Printed, not bounded.
 */
static double	now_s(void);

static double
search_rate(const struct cred_phs *s, const char *buf, size_t n)
{
	double t0 = now_s(), t;
	int i, rounds = 200;

	for (i = 0; i < rounds; i++)
		CHECK_INT(cred_phs_search(s, buf, n, 0, stop_cb, NULL), 0);
	t = now_s() - t0;
	return (double)n * rounds / t / 1e6;
}

static void
test_shaped_cost(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new(), *pub2 = cred_phs_pub_new();
	const struct cred_phs *s, *s2;
	char id[32], tok[41], *text, *packed;
	size_t i, n = 64 * 1024;
	double plain, shaped, worst;

	for (i = 0; i < 10000; i++) {
		snprintf(id, sizeof(id), "dyn-%zu", i);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
		CHECK_INT(issue1(pub2, id, "echo", NULL), 0);
		CHECK_INT(issue_shaped(pub2, id, "gh", "ghp_", 40, B62), 0);
	}
	text = malloc(n + 1);
	packed = malloc(n + 1);
	for (i = 0; i < n; i++)
		text[i] = "the quick brown fox jumps over the lazy dog, "
		    "{\"k\": 12} "[i % 56];
	for (i = 0; i + 41 <= n; i += 41) {
		vault_placeholder_shaped(tok, "ghp_", 40, B62);
		memcpy(packed + i, tok, 40);
		packed[i + 40] = ' ';
	}
	memset(packed + i, ' ', n - i);
	s = cred_phs_enter(pub);
	plain = search_rate(s, text, n);
	cred_phs_leave(pub, s);
	s2 = cred_phs_enter(pub2);
	shaped = search_rate(s2, text, n);
	worst = search_rate(s2, packed, n);
	cred_phs_leave(pub2, s2);
	printf("search, 10,000 sandboxes, 64 KiB: sg-ph- only %.0f MB/s; "
	    "with one shape %.0f MB/s; packed with ghp_ tokens not issued "
	    "%.0f MB/s\n", plain, shaped, worst);
	free(text);
	free(packed);
	cred_phs_pub_free(pub);
	cred_phs_pub_free(pub2);
}

/* ------------------------------------------------------------ memory */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Bytes malloc has handed out (0 where it cannot tell, as under ASan). */
static size_t
in_use(void)
{
#ifdef __GLIBC__
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#else
	return 0;
#endif
}

static void
cycle(struct cred_phs_pub *pub, size_t n, const char *tag, double *t_issue,
    double *t_forget)
{
	char id[32];
	double t0;
	size_t i;

	t0 = now_s();
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%s-%zu", tag, i);
		CHECK_INT(issue1(pub, id, "echo", NULL), 0);
	}
	*t_issue = now_s() - t0;
	t0 = now_s();
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%s-%zu", tag, i);
		CHECK_INT(cred_phs_forget(pub, id), 0);
	}
	*t_forget = now_s() - t0;
}

/* 10,000 issued one by one and forgotten: what is left is the bound. */
static void
test_memory(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	size_t base, after, again, n = 10000;
	double ti, tf, ti2, tf2;

	CHECK_INT(issue1(pub, "static", "fixed", FIXED), 0);
	base = in_use();
	cycle(pub, n, "a", &ti, &tf);
	after = in_use();
	cycle(pub, n, "b", &ti2, &tf2);
	again = in_use();
	/* Printed once all is measured: stdout's buffer is heap too. */
	printf("%zu issued in %.3f s, forgotten in %.3f s (one snapshot "
	    "each); in use %zu -> %zu bytes\n", n, ti, tf, base, after);
	printf("again: %.3f s, %.3f s; in use %zu bytes\n", ti2, tf2, again);
	if (base != 0) {
		/*
		 * The heap keeps the tables that find the removed ones; their
		 * copies are in a slab of their own (at most 1.25 MiB).
		 */
		CHECK_MSG(after - base < 384 * 1024, "%zu -> %zu", base, after);
		/* A second cycle adds nothing. */
		CHECK_MSG(again < after + 16 * 1024, "%zu -> %zu", after, again);
	}
	cred_phs_pub_free(pub);
}

/* ------------------------------------------------------------ readers */

struct stress {
	struct cred_phs_pub	*pub;
	atomic_int		 stop;
	atomic_ulong		 reads;
	atomic_int		 bad;
};

static void *
reader_main(void *arg)
{
	struct stress *st = arg;
	const struct cred_phs *s;
	const struct cred_ph *e;
	struct hits h;

	while (!atomic_load(&st->stop)) {
		s = cred_phs_enter(st->pub);
		/* "keep" is never forgotten: every snapshot must have it. */
		if ((e = cred_phs_get(s, "keep", "echo")) == NULL ||
		    cred_phs_search(s, e->ph, e->phlen, 0, hit_cb,
		    (memset(&h, 0, sizeof(h)), &h)) != 0 || h.n != 1)
			atomic_fetch_add(&st->bad, 1);
		cred_phs_leave(st->pub, s);
		atomic_fetch_add(&st->reads, 1);
	}
	return NULL;
}

static void
test_readers(void)
{
	struct stress st;
	pthread_t t[2];
	char id[32];
	size_t i;

	st.pub = cred_phs_pub_new();
	atomic_init(&st.stop, 0);
	atomic_init(&st.reads, 0);
	atomic_init(&st.bad, 0);
	CHECK_INT(issue1(st.pub, "keep", "echo", NULL), 0);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, reader_main, &st);
	while (atomic_load(&st.reads) == 0)
		sched_yield();
	/* Each sandbox issued, then forgotten: a new snapshot every time. */
	for (i = 0; i < 4000 || atomic_load(&st.reads) < 20000; i++) {
		snprintf(id, sizeof(id), "churn-%zu", i / 2 % 50);
		if (i % 2 == 0)
			CHECK_INT(issue1(st.pub, id, "echo", NULL), 0);
		else
			CHECK_INT(cred_phs_forget(st.pub, id), 0);
	}
	atomic_store(&st.stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(atomic_load(&st.bad), 0);
	CHECK(atomic_load(&st.reads) > 0);
	cred_phs_pub_free(st.pub);
}

/* One thread holds a snapshot while this one replaces it twice. */
struct holder {
	struct cred_phs_pub	*pub;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 step;
	int			 ok;
};

static void
holder_wait(struct holder *hd, int step)
{
	pthread_mutex_lock(&hd->mtx);
	while (hd->step < step)
		pthread_cond_wait(&hd->cv, &hd->mtx);
	pthread_mutex_unlock(&hd->mtx);
}

static void
holder_step(struct holder *hd, int step)
{
	pthread_mutex_lock(&hd->mtx);
	hd->step = step;
	pthread_cond_broadcast(&hd->cv);
	pthread_mutex_unlock(&hd->mtx);
}

static void *
holder_main(void *arg)
{
	struct holder *hd = arg;
	const struct cred_phs *s = cred_phs_enter(hd->pub);
	const struct cred_ph *e = cred_phs_get(s, "old", "echo");

	holder_step(hd, 1);
	holder_wait(hd, 2);
	/* Forgotten and replaced meanwhile: still readable here (ASan). */
	hd->ok = e != NULL && cred_phs_mine(s, e, "old") &&
	    cred_phs_search(s, e->ph,
	    e->phlen, 0, stop_cb, NULL) == 7 && cred_phs_count(s) == 1;
	cred_phs_leave(hd->pub, s);
	return NULL;
}

static void
hold_across_rebuild(struct cred_phs_pub *pub)
{
	struct holder hd = { pub, PTHREAD_MUTEX_INITIALIZER,
	    PTHREAD_COND_INITIALIZER, 0, 0 };
	pthread_t t;

	CHECK_INT(issue1(pub, "old", "echo", NULL), 0);
	pthread_create(&t, NULL, holder_main, &hd);
	holder_wait(&hd, 1);
	CHECK_INT(cred_phs_forget(pub, "old"), 0);
	CHECK_INT(issue1(pub, "new", "echo", NULL), 0);
	holder_step(&hd, 2);
	pthread_join(t, NULL);
	CHECK_INT(hd.ok, 1);
	/* The next change frees what the reader held. */
	CHECK_INT(cred_phs_forget(pub, "new"), 0);
}

static void *
noop_main(void *arg)
{
	struct cred_phs_pub *pub = arg;

	cred_phs_leave(pub, cred_phs_enter(pub));
	return NULL;
}

static void
test_hold(void)
{
	struct cred_phs_pub *pub = cred_phs_pub_new();
	pthread_t t;
	int i;

	hold_across_rebuild(pub);
	cred_phs_pub_free(pub);
	/* Use up the hazard slots: later threads pin under the mutex. */
	for (i = 0; i < CRED_PHS_READERS + 4; i++) {
		pub = cred_phs_pub_new();
		pthread_create(&t, NULL, noop_main, pub);
		pthread_join(t, NULL);
		cred_phs_pub_free(pub);
	}
	pub = cred_phs_pub_new();
	hold_across_rebuild(pub);
	cred_phs_pub_free(pub);
}

int
main(void)
{
	test_lookup_and_forms();
	test_many();
	test_forget();
	test_static_set();
	test_shaped_gen();
	test_shaped();
	test_shaped_cost();
	test_memory();
	test_readers();
	test_hold();
	return check_summary();
}
