/*
 * The response side of the vault: a streaming scrubber that replaces every
 * listed secret — raw, base64 and base64url at each alignment, percent-encoded
 * (with the safe sets common encoders use) and JSON-escaped (HTML-safe too) —
 * with its placeholder in the same encoding, leftmost-longest,
 * across any split of the stream. One Aho-Corasick automaton over all the
 * encodings, in wiped memory because it spells the secrets, built once per
 * list of secrets and kept with the snapshot.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "vault/vault.h"
#include "vault/vault_int.h"

#define SCRUB_CHUNK		16384	/* bytes taken from the input at once */
#define SCRUB_SHORT		8	/* shorter secrets: raw form only */

/*
 * The encodings, in priority order (a tie between two identical patterns
 * goes to the earlier one). The fuzz target mirrors this list.
 */
enum scrub_kind {
	K_RAW,
	K_B64_0, K_B64_1, K_B64_2,		/* standard, alignment 0..2 */
	K_B64URL_0, K_B64URL_1, K_B64URL_2,
	K_PCT_MIN_UP, K_PCT_MIN_LO,		/* only non-unreserved bytes */
	K_PCT_ALL_UP, K_PCT_ALL_LO,		/* every byte */
	K_JSON_S_SHORT, K_JSON_S_LO, K_JSON_S_UP, /* "/" as "\/" */
	K_JSON_SHORT, K_JSON_LO, K_JSON_UP,	/* "/" as is */
	K_JSON_HTML,		/* and <, >, & as \u003c ... (Go, Rails) */
	K_PCT_SLASH_UP, K_PCT_SLASH_LO,	/* "/" kept (Python's quote) */
	K_PCT_FORM_UP, K_PCT_FORM_LO,	/* " " as "+" (forms, quote_plus) */
	K_PCT_JS,		/* !'()* kept (encodeURIComponent) */
	K_PCT_PHP,		/* "~" as %7E, " " as "+" (PHP urlencode) */
	K_PCT_JAVA,		/* the same, "*" kept (Java's URLEncoder) */
	K_PCT_GRPC_UP, K_PCT_GRPC_LO,	/* only "%" and bytes outside 0x20-0x7e
				   (gRPC's grpc-message) */
	K_NKINDS
};

struct ac_node {
	uint32_t	child;		/* first child; 0: none */
	uint32_t	sibling;
	uint32_t	fail;
	uint32_t	dict;		/* next match node on the fail chain */
	int32_t		pid;		/* pattern ending here, or -1 */
	uint32_t	depth;
	unsigned char	byte;
};

/*
 * The compiled matcher for one list of secrets: shared by every scrubber
 * of that list through the snapshot's cache, and reference-counted so that
 * a scrubber may outlive the snapshot it was made from.
 */
struct scrub_ac {
	atomic_int	 refcnt;
	void		*mem;		/* wiped: root_next[256], then nodes */
	uint32_t	*root_next;	/* 0: stay at the root */
	struct ac_node	*nodes;
	uint32_t	 n_nodes;
	struct scrub_pinfo {
		uint32_t secret;	/* index into the list */
		uint32_t kind;		/* enum scrub_kind */
	}		*pinfo;		/* per pattern id */
	size_t		 n_pats;
	size_t		 maxlen;	/* longest pattern kept */
	char		(*names)[VAULT_SNAP_NAME_MAX + 1];	/* the list: the key */
	size_t		 n_names;
};

struct scrub_rep {
	size_t		 off;		/* in reps */
	size_t		 len;
};

struct scrub_match {
	uint64_t	 start;		/* absolute stream offset */
	uint32_t	 len;
	int32_t		 pid;
};

struct vault_scrubber {
	struct scrub_ac	*ac;
	struct scrub_rep *rep;		/* per pattern id: the placeholder so */
	char		*reps;		/* placeholders: not secret */
	size_t		 hold;		/* longest pattern - 1 */

	/* The stream: buf holds [base, base + len), not yet emitted. */
	unsigned char	*buf;
	size_t		 cap, len;
	uint64_t	 base;
	uint32_t	 state;
	struct scrub_match *m;		/* sorted by start, one per start */
	size_t		 nm, mcap;
	int		 failed;
};

/* ------------------------------------------------------------ encodings */

static size_t
scrub_bound(enum scrub_kind k, size_t len)
{
	if (k == K_RAW)
		return len;
	if (k <= K_B64URL_2)
		return (len + 4) / 3 * 4 + 4;
	if (k <= K_PCT_ALL_LO)
		return 3 * len;
	return 6 * len;
}

static unsigned int
vbyte(const unsigned char *in, size_t len, size_t a, size_t i)
{
	return i < a || i - a >= len ? 0 : in[i - a];
}

/*
 * The base64 characters fully determined by in when it starts a bytes into
 * a 3-byte group: the "stable core" any base64 text holding in contains,
 * whatever comes before and after.
 */
static size_t
b64_core(const unsigned char *in, size_t len, size_t a, int url, char *out)
{
	static const char alpha[2][65] = {
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
	};
	size_t k, first = (8 * a + 5) / 6, end = (8 * a + 8 * len) / 6, bit;
	size_t o = 0;
	unsigned int w;

	for (k = first; k < end; k++) {
		bit = 6 * k;
		w = vbyte(in, len, a, bit / 8) << 8 |
		    vbyte(in, len, a, bit / 8 + 1);
		out[o++] = alpha[url][(w >> (10 - bit % 8)) & 63];
	}
	return o;
}

/*
 * ctl: 0 short escapes (\n ...) else \u00xx, 1 \u00xx, 2 \u00XX; html: <, >
 * and & as \u00xx too, as HTML-safe encoders write them.
 */
static size_t
json_escape(const unsigned char *in, size_t len, int slash, int ctl,
    int html, char *out)
{
	const char *hex = ctl == 2 ? "0123456789ABCDEF" : "0123456789abcdef";
	const char *sh;
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = in[i];
		sh = NULL;
		if (c == '"')
			sh = "\\\"";
		else if (c == '\\')
			sh = "\\\\";
		else if (c == '/' && slash)
			sh = "\\/";
		else if (c < 0x20 && ctl == 0)
			sh = c == '\b' ? "\\b" : c == '\f' ? "\\f" :
			    c == '\n' ? "\\n" : c == '\r' ? "\\r" :
			    c == '\t' ? "\\t" : NULL;
		if (sh != NULL) {
			out[o++] = sh[0];
			out[o++] = sh[1];
		} else if (c < 0x20 || (html && (c == '<' || c == '>' ||
		    c == '&'))) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[c >> 4];
			out[o + 5] = hex[c & 15];
			o += 6;
		} else
			out[o++] = (char)c;
	}
	return o;
}

/*
 * Percent-encoding as other encoders write it: letters, digits and the
 * bytes in keep as they are, a space as "+" when plus, the rest %XX.
 */
static size_t
pct_other(const unsigned char *in, size_t len, const char *keep, int plus,
    int upper, char *out)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = in[i];
		if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' &&
		    (c | 0x20) <= 'z') || (c != 0 && strchr(keep, c) != NULL))
			out[o++] = (char)c;
		else if (c == ' ' && plus)
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

/* gRPC's Percent-Encoded (grpc-message): "%" and bytes outside 0x20-0x7e. */
static size_t
pct_grpc(const unsigned char *in, size_t len, int upper, char *out)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (in[i] >= 0x20 && in[i] <= 0x7e && in[i] != '%')
			out[o++] = (char)in[i];
		else {
			out[o++] = '%';
			out[o++] = hex[in[i] >> 4];
			out[o++] = hex[in[i] & 15];
		}
	}
	return o;
}

static size_t
scrub_encode(enum scrub_kind k, const unsigned char *in, size_t len,
    char *out)
{
	switch (k) {
	case K_RAW:
		memcpy(out, in, len);
		return len;
	case K_B64_0:
	case K_B64_1:
	case K_B64_2:
		return b64_core(in, len, (size_t)(k - K_B64_0), 0, out);
	case K_B64URL_0:
	case K_B64URL_1:
	case K_B64URL_2:
		return b64_core(in, len, (size_t)(k - K_B64URL_0), 1, out);
	case K_PCT_MIN_UP:
	case K_PCT_MIN_LO:
	case K_PCT_ALL_UP:
	case K_PCT_ALL_LO:
		return vault_pct_encode(in, len, k >= K_PCT_ALL_UP,
		    k == K_PCT_MIN_UP || k == K_PCT_ALL_UP, out);
	case K_JSON_S_SHORT:
	case K_JSON_S_LO:
	case K_JSON_S_UP:
		return json_escape(in, len, 1, (int)(k - K_JSON_S_SHORT), 0,
		    out);
	case K_JSON_SHORT:
	case K_JSON_LO:
	case K_JSON_UP:
		return json_escape(in, len, 0, (int)(k - K_JSON_SHORT), 0, out);
	case K_JSON_HTML:
		return json_escape(in, len, 0, 0, 1, out);
	case K_PCT_SLASH_UP:
	case K_PCT_SLASH_LO:
		return pct_other(in, len, "-._~/", 0, k == K_PCT_SLASH_UP, out);
	case K_PCT_FORM_UP:
	case K_PCT_FORM_LO:
		return pct_other(in, len, "-._~", 1, k == K_PCT_FORM_UP, out);
	case K_PCT_JS:
		return pct_other(in, len, "-._~!'()*", 0, 1, out);
	case K_PCT_PHP:
		return pct_other(in, len, "-._", 1, 1, out);
	case K_PCT_JAVA:
		return pct_other(in, len, "-._*", 1, 1, out);
	case K_PCT_GRPC_UP:
	case K_PCT_GRPC_LO:
		return pct_grpc(in, len, k == K_PCT_GRPC_UP, out);
	default:
		return 0;
	}
}

/* ------------------------------------------------------------ automaton */

static int
scrub_nkinds(const struct vault_secret *sec)
{
	return sec->len < SCRUB_SHORT ? 1 : K_NKINDS;
}

static uint32_t
ac_child(const struct scrub_ac *ac, uint32_t s, unsigned char c)
{
	uint32_t x;

	if (s == 0)
		return ac->root_next[c];
	for (x = ac->nodes[s].child; x != 0; x = ac->nodes[x].sibling)
		if (ac->nodes[x].byte == c)
			return x;
	return 0;
}

static uint32_t
ac_step(const struct scrub_ac *ac, uint32_t s, unsigned char c)
{
	uint32_t x;

	for (;;) {
		if ((x = ac_child(ac, s, c)) != 0 || s == 0)
			return x;
		s = ac->nodes[s].fail;
	}
}

/* Insert pattern pid; 0, or 1 when the same bytes are already a pattern. */
static int
ac_insert(struct scrub_ac *ac, const unsigned char *p, size_t len,
    int32_t pid)
{
	struct ac_node *nd;
	uint32_t s = 0, x;
	size_t i;

	for (i = 0; i < len; i++) {
		if ((x = ac_child(ac, s, p[i])) == 0) {
			x = ac->n_nodes++;
			nd = &ac->nodes[x];
			nd->byte = p[i];
			nd->pid = -1;
			nd->depth = (uint32_t)i + 1;
			if (s == 0)
				ac->root_next[p[i]] = x;
			else {
				nd->sibling = ac->nodes[s].child;
				ac->nodes[s].child = x;
			}
		}
		s = x;
	}
	if (ac->nodes[s].pid >= 0)
		return 1;
	ac->nodes[s].pid = pid;
	return 0;
}

/* Failure and dictionary links, breadth first. */
static int
ac_links(struct scrub_ac *ac)
{
	uint32_t *q, head = 0, tail = 0, u, v, f, x;
	unsigned int c;

	if ((q = malloc(sizeof(*q) * ac->n_nodes)) == NULL)
		return -1;
	for (c = 0; c < 256; c++)
		if ((v = ac->root_next[c]) != 0)
			q[tail++] = v;	/* fail = dict = 0: fresh pages */
	while (head < tail) {
		u = q[head++];
		for (v = ac->nodes[u].child; v != 0; v = ac->nodes[v].sibling) {
			f = ac->nodes[u].fail;
			while ((x = ac_child(ac, f, ac->nodes[v].byte)) == 0 &&
			    f != 0)
				f = ac->nodes[f].fail;
			ac->nodes[v].fail = x;
			ac->nodes[v].dict = ac->nodes[x].pid >= 0 ? x :
			    ac->nodes[x].dict;
			q[tail++] = v;
		}
	}
	free(q);
	return 0;
}

static void
scrub_ac_unref(struct scrub_ac *ac)
{
	if (ac == NULL || atomic_fetch_sub_explicit(&ac->refcnt, 1,
	    memory_order_acq_rel) != 1)
		return;
	vault_secmem_free(ac->mem);
	free(ac->pinfo);
	free(ac->names);
	free(ac);
}

/*
 * Encode every pattern of every secret into wiped scratch memory, then
 * build the trie from it. The scratch copy is wiped as soon as the trie
 * exists; the trie itself lives in wiped memory too, as it spells them.
 */
static int
scrub_ac_fill(struct scrub_ac *ac, const struct vault_secret **sec, size_t n)
{
	char *scratch;
	size_t i, cap = 0, total = 0, len, np = 0;
	int k, rc = -1;

	for (i = 0; i < n; i++)
		for (k = 0; k < scrub_nkinds(sec[i]); k++) {
			cap += scrub_bound((enum scrub_kind)k, sec[i]->len);
			np++;
		}
	if (cap >= UINT32_MAX - 1 || (scratch = vault_secmem_alloc(cap ? cap :
	    1)) == NULL)
		return -1;
	if ((ac->pinfo = calloc(np ? np : 1, sizeof(*ac->pinfo))) == NULL ||
	    (ac->mem = vault_secmem_alloc(256 * sizeof(uint32_t) +
	    (cap + 1) * sizeof(struct ac_node))) == NULL)
		goto done;
	ac->root_next = ac->mem;
	ac->nodes = (struct ac_node *)(ac->root_next + 256);
	ac->nodes[0].pid = -1;
	ac->n_nodes = 1;
	for (i = 0; i < n; i++) {
		for (k = 0; k < scrub_nkinds(sec[i]); k++) {
			len = scrub_encode((enum scrub_kind)k, sec[i]->val,
			    sec[i]->len, scratch + total);
			ac->pinfo[ac->n_pats].secret = (uint32_t)i;
			ac->pinfo[ac->n_pats].kind = (uint32_t)k;
			/* Empty: a base64 core of too few bytes. */
			if (len > 0 && ac_insert(ac, (unsigned char *)scratch +
			    total, len, (int32_t)ac->n_pats) == 0 &&
			    len > ac->maxlen)
				ac->maxlen = len;
			ac->n_pats++;
			total += len;
		}
	}
	rc = ac_links(ac);
done:
	vault_secmem_free(scratch);
	return rc;
}

static struct scrub_ac *
scrub_ac_build(const struct vault_secret **sec, const char *const *names,
    size_t n)
{
	struct scrub_ac *ac;
	size_t i;

	if ((ac = calloc(1, sizeof(*ac))) == NULL)
		return NULL;
	atomic_init(&ac->refcnt, 1);
	if ((ac->names = calloc(n ? n : 1, sizeof(*ac->names))) == NULL ||
	    scrub_ac_fill(ac, sec, n) == -1) {
		scrub_ac_unref(ac);
		return NULL;
	}
	for (i = 0; i < n; i++)
		snprintf(ac->names[i], sizeof(ac->names[i]), "%s", names[i]);
	ac->n_names = n;
	return ac;
}

static int
scrub_ac_is(const struct scrub_ac *ac, const char *const *names, size_t n)
{
	size_t i;

	if (ac->n_names != n)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(ac->names[i], names[i]) != 0)
			return 0;
	return 1;
}

/* The matcher for names, from the snapshot's cache or built (and cached). */
static struct scrub_ac *
scrub_ac_get(const struct vault_snapshot *csnap, const char *const *names,
    const struct vault_secret **sec, size_t n)
{
	/* The cache is the one mutable part of a snapshot, under its lock. */
	struct vault_snapshot *snap = (struct vault_snapshot *)csnap;
	struct scrub_ac *ac = NULL;
	size_t i;

	pthread_mutex_lock(&snap->cache_mtx);
	for (i = 0; i < snap->n_cache; i++)
		if (scrub_ac_is(snap->cache[i], names, n)) {
			ac = snap->cache[i];
			atomic_fetch_add_explicit(&ac->refcnt, 1,
			    memory_order_relaxed);
			break;
		}
	if (ac == NULL && (ac = scrub_ac_build(sec, names, n)) != NULL &&
	    snap->n_cache < VAULT_SCRUB_CACHE) {
		atomic_fetch_add_explicit(&ac->refcnt, 1, memory_order_relaxed);
		snap->cache_unref = scrub_ac_unref;
		snap->cache[snap->n_cache++] = ac;
	}
	pthread_mutex_unlock(&snap->cache_mtx);
	return ac;
}

/* Each pattern's replacement: its encoding of the secret's placeholder. */
static int
scrub_reps(struct vault_scrubber *sc, const char *const *ph)
{
	const struct scrub_ac *ac = sc->ac;
	size_t i, cap = 0, used = 0;
	enum scrub_kind k;

	for (i = 0; i < ac->n_pats; i++)
		cap += scrub_bound((enum scrub_kind)ac->pinfo[i].kind,
		    strlen(ph[ac->pinfo[i].secret]));
	if ((sc->rep = calloc(ac->n_pats ? ac->n_pats : 1,
	    sizeof(*sc->rep))) == NULL ||
	    (sc->reps = malloc(cap ? cap : 1)) == NULL)
		return -1;
	for (i = 0; i < ac->n_pats; i++) {
		k = (enum scrub_kind)ac->pinfo[i].kind;
		sc->rep[i].off = used;
		sc->rep[i].len = scrub_encode(k,
		    (const unsigned char *)ph[ac->pinfo[i].secret],
		    strlen(ph[ac->pinfo[i].secret]), sc->reps + used);
		used += sc->rep[i].len;
	}
	return 0;
}

/* ------------------------------------------------------------ streaming */

/* A match [start, start + len): keep the longest one per start. */
static int
scrub_note(struct vault_scrubber *sc, uint64_t start, uint32_t len,
    int32_t pid)
{
	struct scrub_match *nm;
	size_t lo = 0, hi = sc->nm, mid, ncap;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (sc->m[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < sc->nm && sc->m[lo].start == start) {
		if (len > sc->m[lo].len) {
			sc->m[lo].len = len;
			sc->m[lo].pid = pid;
		}
		return 0;
	}
	if (sc->nm == sc->mcap) {
		ncap = sc->mcap ? sc->mcap * 2 : 8;
		if ((nm = realloc(sc->m, ncap * sizeof(*nm))) == NULL)
			return -1;
		sc->m = nm;
		sc->mcap = ncap;
	}
	memmove(sc->m + lo + 1, sc->m + lo, (sc->nm - lo) * sizeof(*sc->m));
	sc->m[lo].start = start;
	sc->m[lo].len = len;
	sc->m[lo].pid = pid;
	sc->nm++;
	return 0;
}

/* Run the automaton over buf[from, len), noting every match. */
static int
scrub_scan(struct vault_scrubber *sc, size_t from)
{
	const struct scrub_ac *ac = sc->ac;
	const struct ac_node *t;
	uint64_t end, start;
	uint32_t s = sc->state, x;
	size_t i;

	for (i = from; i < sc->len; i++) {
		s = ac_step(ac, s, sc->buf[i]);
		x = ac->nodes[s].pid >= 0 ? s : ac->nodes[s].dict;
		end = sc->base + i + 1;
		for (; x != 0; x = t->dict) {
			t = &ac->nodes[x];
			start = end - t->depth;
			/* Inside bytes already replaced: moot. */
			if (start >= sc->base &&
			    scrub_note(sc, start, t->depth, t->pid) == -1) {
				sc->state = s;
				return -1;
			}
		}
	}
	sc->state = s;
	return 0;
}

/*
 * Decide every position before limit (absolute): plain bytes go out as they
 * are, a match goes out as its replacement. Every match starting before
 * limit is complete, since limit is at least a longest pattern from the end.
 */
static int
scrub_emit(struct vault_scrubber *sc, uint64_t limit, struct evbuffer *out)
{
	const struct scrub_match *m;
	const struct scrub_rep *p;
	uint64_t cur = sc->base;
	size_t mi = 0, drop;

	while (cur < limit) {
		while (mi < sc->nm && sc->m[mi].start < cur)
			mi++;
		m = mi < sc->nm ? &sc->m[mi] : NULL;
		if (m == NULL || m->start >= limit) {
			if (evbuffer_add(out, sc->buf + (cur - sc->base),
			    limit - cur) == -1)
				return -1;
			cur = limit;
			break;
		}
		p = &sc->rep[m->pid];
		if ((m->start > cur && evbuffer_add(out, sc->buf +
		    (cur - sc->base), m->start - cur) == -1) ||
		    (p->len > 0 && evbuffer_add(out, sc->reps + p->off,
		    p->len) == -1))
			return -1;
		cur = m->start + m->len;
		mi++;
	}
	while (mi < sc->nm && sc->m[mi].start < cur)
		mi++;
	if (mi > 0) {
		memmove(sc->m, sc->m + mi, (sc->nm - mi) * sizeof(*sc->m));
		sc->nm -= mi;
	}
	drop = (size_t)(cur - sc->base);
	memmove(sc->buf, sc->buf + drop, sc->len - drop);
	sc->len -= drop;
	sc->base = cur;
	return 0;
}

/* ------------------------------------------------------------ interface */

struct vault_scrubber *
vault_scrubber_new(const struct vault_snapshot *snap,
    const char *const *secrets, const char *const *placeholders, size_t n)
{
	struct vault_scrubber *sc = NULL;
	const struct vault_secret **sec = NULL;
	size_t i;

	if (snap == NULL || (sc = calloc(1, sizeof(*sc))) == NULL ||
	    (sec = calloc(n ? n : 1, sizeof(*sec))) == NULL)
		goto fail;
	for (i = 0; i < n; i++)
		if (placeholders[i] == NULL ||
		    (sec[i] = vault_snapshot_find(snap, secrets[i])) == NULL)
			goto fail;
	if ((sc->ac = scrub_ac_get(snap, secrets, sec, n)) == NULL ||
	    scrub_reps(sc, placeholders) == -1)
		goto fail;
	sc->hold = sc->ac->maxlen > 0 ? sc->ac->maxlen - 1 : 0;
	sc->cap = sc->hold + SCRUB_CHUNK;
	if ((sc->buf = malloc(sc->cap)) == NULL)
		goto fail;
	free(sec);
	return sc;
fail:
	free(sec);
	vault_scrubber_free(sc);
	return NULL;
}

void
vault_scrubber_free(struct vault_scrubber *sc)
{
	if (sc == NULL)
		return;
	scrub_ac_unref(sc->ac);
	if (sc->buf != NULL) {
		/* What was held back may be the start of a secret. */
		OPENSSL_cleanse(sc->buf, sc->cap);
		free(sc->buf);
	}
	free(sc->rep);
	free(sc->reps);
	free(sc->m);
	free(sc);
}

int
vault_scrub(struct vault_scrubber *sc, struct evbuffer *in,
    struct evbuffer *out)
{
	uint64_t total;
	size_t old;
	int got;

	if (sc->failed)
		return -1;
	while (evbuffer_get_length(in) > 0) {
		old = sc->len;
		got = evbuffer_remove(in, sc->buf + old, sc->cap - old);
		if (got <= 0)
			goto fail;
		sc->len += (size_t)got;
		if (scrub_scan(sc, old) == -1)
			goto fail;
		/*
		 * Always hold back exactly a longest pattern less one byte:
		 * holding back only what could begin a secret would tell a
		 * streaming client which prefixes of the secret it sent.
		 */
		total = sc->base + sc->len;
		if (total > sc->base + sc->hold &&
		    scrub_emit(sc, total - sc->hold, out) == -1)
			goto fail;
	}
	return 0;
fail:
	sc->failed = 1;
	return -1;
}

int
vault_scrub_finish(struct vault_scrubber *sc, struct evbuffer *out)
{
	if (sc->failed || scrub_emit(sc, sc->base + sc->len, out) == -1) {
		sc->failed = 1;
		return -1;
	}
	/* Ready for another stream. */
	sc->state = 0;
	sc->nm = 0;
	return 0;
}

int
vault_scrub_string(const struct vault_snapshot *snap,
    const char *const *secrets, const char *const *placeholders, size_t n,
    const char *s, size_t len, struct evbuffer *out)
{
	struct vault_scrubber *sc;
	struct evbuffer *in;
	int rc = -1;

	if ((sc = vault_scrubber_new(snap, secrets, placeholders, n)) == NULL)
		return -1;
	if ((in = evbuffer_new()) != NULL &&
	    (len == 0 || evbuffer_add_reference(in, s, len, NULL, NULL) == 0) &&
	    vault_scrub(sc, in, out) == 0 &&
	    vault_scrub_finish(sc, out) == 0)
		rc = 0;
	if (in != NULL)
		evbuffer_free(in);
	vault_scrubber_free(sc);
	return rc;
}

/* ------------------------------------------------------------ seeker */

/*
 * Detection only (docs/dlp.md, "vault-secret"): the same automaton, run
 * over a request stream; no bytes are kept, only the automaton's state, so
 * a secret split across any number of feeds is still seen. Only the
 * secrets marked in watch count: the automaton is the one for the whole
 * list (one cache entry however the watched set varies by host).
 */
struct vault_seeker {
	struct scrub_ac	*ac;
	unsigned char	*watch;		/* per secret of the list */
	uint32_t	 state;
	int		 found;
};

struct vault_seeker *
vault_seeker_new(const struct vault_snapshot *snap,
    const char *const *secrets, const int *watch, size_t n)
{
	struct vault_seeker *sk = NULL;
	const struct vault_secret **sec = NULL;
	size_t i;

	if (snap == NULL || (sk = calloc(1, sizeof(*sk))) == NULL ||
	    (sec = calloc(n ? n : 1, sizeof(*sec))) == NULL ||
	    (sk->watch = calloc(n ? n : 1, 1)) == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		if ((sec[i] = vault_snapshot_find(snap, secrets[i])) == NULL)
			goto fail;
		sk->watch[i] = watch[i] != 0;
	}
	if ((sk->ac = scrub_ac_get(snap, secrets, sec, n)) == NULL)
		goto fail;
	free(sec);
	return sk;
fail:
	free(sec);
	vault_seeker_free(sk);
	return NULL;
}

void
vault_seeker_free(struct vault_seeker *sk)
{
	if (sk == NULL)
		return;
	scrub_ac_unref(sk->ac);
	free(sk->watch);
	free(sk);
}

void
vault_seeker_reset(struct vault_seeker *sk)
{
	sk->state = 0;
	sk->found = 0;
}

int
vault_seek(struct vault_seeker *sk, const void *p, size_t n)
{
	const struct scrub_ac *ac = sk->ac;
	const unsigned char *b = p;
	uint32_t s = sk->state, x;
	size_t i;

	if (sk->found)
		return 1;
	for (i = 0; i < n; i++) {
		s = ac_step(ac, s, b[i]);
		x = ac->nodes[s].pid >= 0 ? s : ac->nodes[s].dict;
		for (; x != 0; x = ac->nodes[x].dict)
			if (sk->watch[ac->pinfo[ac->nodes[x].pid].secret]) {
				sk->found = 1;
				sk->state = 0;
				return 1;
			}
	}
	sk->state = s;
	return 0;
}
