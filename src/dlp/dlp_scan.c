/*
 * The rule set compiled into one Hyperscan streaming database, and the
 * scanner an exchange feeds: three streams (views) -- the raw bytes, the
 * bytes with percent (three layers) and JSON escapes undone, and the
 * decoded base64/base64url/hex runs -- each with a history ring so that
 * a match's bytes can be checked. Nothing is buffered whole.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlp/dlp_int.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define PCT_LAYERS	3	/* before the JSON escapes */
#define PCT_POST	PCT_LAYERS	/* one more after them: \u0025 is '%' */
#define PRIME		DLP_HISTORY	/* bytes of an inactive view scanned when it wakes */
#define B64_MIN		16	/* a shorter base64 run is not decoded */
#define HEX_MIN		32
#define CHECK_MAX	1024	/* bytes of a match handed to its checks */
#define KEYWORD_WINDOW	128
#define ARN_BEFORE	64	/* an ARN's service, region and account fit */

struct view {
	hs_stream_t		*st;
	unsigned char		 hist[DLP_HISTORY];
	uint64_t		 total;	/* bytes appended to hist */
	uint64_t		 base;	/* absolute offset of the stream's 0 */
	const unsigned char	*cur;	/* the block being scanned */
	size_t			 curlen;
	uint64_t		 curat;
	int			 active;
	int			 dirty;	/* its stream was fed since its last reset */
	int			 gcp;	/* 1: "type": "service_account", 2: "private_key" */
};

struct pct {
	int	st;	/* 0, 1 after '%', 2 after '%' and a hex digit */
	int	hi;
	int	c1;
};

struct jsesc {
	int		st;	/* 0, 1 after '\\', 2.. in \uXXXX */
	uint32_t	cp;
	unsigned char	raw[6];
};

/*
 * A base64 or hex run, decoded at every alignment: a run's first character
 * need not be where the encoded text starts ("/v1/" before base64 in a
 * path, one junk character put before it on purpose), so the run is decoded
 * from each of its first 4 characters (base64: 4 byte streams) or 2 digits
 * (hex), each into a view of its own.
 */
struct run {
	size_t		len;		/* characters in the run so far */
	uint32_t	acc;		/* the last characters' values */
	unsigned char	pend[HEX_MIN];	/* the run's start, until it is long enough */
};

#define B64_ALIGN	4
#define HEX_ALIGN	2
#define OBUF		2048
#define UBUF		4096
#define BLOCK		4096	/* dlp_scan_feed's steps (run_masks) */

/* long_starts finds runs of a power of two. */
_Static_assert((B64_MIN & (B64_MIN - 1)) == 0 && (HEX_MIN & (HEX_MIN - 1)) == 0,
    "B64_MIN and HEX_MIN are powers of two");

struct dlp_scan {
	const struct dlp_set	*set;
	dlp_skip_fn		 skip;
	void			*arg;
	struct view		 v[DLP_VIEW_MAX];
	struct pct		 pct[PCT_LAYERS + 1];	/* the last: after JSON */
	struct jsesc		 js;
	struct run		 b64, hex;
	int			 wake;	/* an escape was undone: the unescaped view wakes */
	unsigned char		 ubuf[UBUF];
	size_t			 un;
	/* Decoded bytes per alignment, on their way to their view. */
	unsigned char		 dbuf[B64_ALIGN][OBUF];
	size_t			 dn[B64_ALIGN];
	unsigned char		 hbuf[HEX_ALIGN][OBUF];
	size_t			 hn[HEX_ALIGN];
	int			 found;	/* 1 found, -1 failed */
	struct dlp_finding	 f;
	dlp_tap_fn		 tap;	/* NULL: none */
	void			*tap_arg;
	char			 tap_rule[DLP_ID_MAX + 1];
};

struct cbctx {
	struct dlp_scan	*s;
	enum dlp_view	 view;
};

static pthread_key_t	scratch_key;
static pthread_once_t	scratch_once = PTHREAD_ONCE_INIT;
/* The set this thread's scratch was last grown for (sets are numbered). */
static _Thread_local uint64_t scratch_gen;
static _Atomic uint64_t	set_gen;

static void
scratch_free(void *p)
{
	hs_free_scratch(p);
}

static void
scratch_init(void)
{
	(void)pthread_key_create(&scratch_key, scratch_free);
}

/* This thread's scratch, grown for set's database. */
static hs_scratch_t *
scratch_for(const struct dlp_set *set)
{
	hs_scratch_t *sc;

	(void)pthread_once(&scratch_once, scratch_init);
	sc = pthread_getspecific(scratch_key);
	if (sc != NULL && scratch_gen == set->gen)
		return sc;
	if (hs_alloc_scratch(set->db, &sc) != HS_SUCCESS)
		return NULL;
	(void)pthread_setspecific(scratch_key, sc);
	scratch_gen = set->gen;
	return sc;
}

int
dlp_available(const char **why)
{
	if (hs_valid_platform() == HS_SUCCESS)
		return 1;
	if (why != NULL)
		*why = "Hyperscan cannot run on this CPU (it needs SSSE3)";
	return 0;
}

int
dlp_valid_id(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > DLP_ID_MAX || !(islower((unsigned char)s[0]) ||
	    isdigit((unsigned char)s[0])))
		return 0;
	for (i = 1; i < n; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

const char *
dlp_severity_word(enum dlp_severity s)
{
	switch (s) {
	case DLP_SEV_LOW:
		return "low";
	case DLP_SEV_MEDIUM:
		return "medium";
	case DLP_SEV_HIGH:
		return "high";
	case DLP_SEV_CRITICAL:
		return "critical";
	}
	return "?";
}

const char *
dlp_view_word(enum dlp_view v)
{
	switch (v) {
	case DLP_VIEW_RAW:
		return "raw";
	case DLP_VIEW_UNESCAPED:
		return "unescaped";
	case DLP_VIEW_BASE64:
	case DLP_VIEW_BASE64_1:
	case DLP_VIEW_BASE64_2:
	case DLP_VIEW_BASE64_3:
		return "base64";
	case DLP_VIEW_HEX:
	case DLP_VIEW_HEX_1:
		return "hex";
	default:
		return "?";
	}
}

void
dlp_set_free(struct dlp_set *set)
{
	size_t i, nd = dlp_default_count();

	if (set == NULL)
		return;
	hs_free_database(set->db);
	for (i = nd; i < set->n; i++) {
		free(set->rules[i].regex);
		free(set->rules[i].keyword);
	}
	free(set->rules);
	free(set);
}

struct dlp_set *
dlp_set_new(const struct dlp_rule_spec *custom, size_t n, int defaults,
    char *err, size_t errlen, int *bad)
{
	struct dlp_set *set;
	hs_compile_error_t *ce = NULL;
	const char **exprs = NULL;
	unsigned int *flags = NULL, *ids = NULL;
	size_t i, nd = dlp_default_count(), k = 0;
	struct dlp_rule *r;

	*bad = -1;
	if ((set = calloc(1, sizeof(*set))) == NULL ||
	    (set->rules = calloc(nd + n + 1, sizeof(*set->rules))) == NULL) {
		free(set);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* Defaults take the first nd slots (unused when off), custom after. */
	for (i = 0; i < nd; i++)
		dlp_default_get(i, &set->rules[i]);
	set->n = nd;
	for (i = 0; i < n; i++) {
		r = &set->rules[nd + i];
		snprintf(r->id, sizeof(r->id), "%s", custom[i].id);
		r->regex = strdup(custom[i].regex);
		r->keyword = custom[i].keyword ? strdup(custom[i].keyword) : NULL;
		r->flags = HS_FLAG_SOM_LEFTMOST;
		r->severity = custom[i].severity;
		r->entropy = custom[i].entropy;
		set->n++;
		if (r->regex == NULL || (custom[i].keyword && !r->keyword)) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	}
	exprs = calloc(set->n + 1, sizeof(*exprs));
	flags = calloc(set->n + 1, sizeof(*flags));
	ids = calloc(set->n + 1, sizeof(*ids));
	if (exprs == NULL || flags == NULL || ids == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (i = defaults ? 0 : nd; i < set->n; i++) {
		exprs[k] = set->rules[i].regex;
		flags[k] = set->rules[i].flags;
		ids[k] = (unsigned int)i;
		k++;
	}
	if (k == 0) {
		/* Nothing to look for: a set that never matches. */
		set->db = NULL;
		goto out;
	}
	if (hs_compile_multi(exprs, flags, ids, (unsigned int)k,
	    HS_MODE_STREAM | HS_MODE_SOM_HORIZON_LARGE, NULL, &set->db,
	    &ce) != HS_SUCCESS) {
		if (ce != NULL && ce->expression >= 0 &&
		    ids[ce->expression] >= nd)
			*bad = (int)(ids[ce->expression] - nd);
		snprintf(err, errlen, "%s", ce != NULL ? ce->message :
		    "cannot compile");
		hs_free_compile_error(ce);
		goto fail;
	}
out:
	set->gen = ++set_gen;
	free(exprs);
	free(flags);
	free(ids);
	return set;
fail:
	free(exprs);
	free(flags);
	free(ids);
	dlp_set_free(set);
	return NULL;
}

int
dlp_set_has_rule(const struct dlp_set *set, const char *id)
{
	size_t i;

	if (strcmp(id, "dns-encoded-label") == 0 ||
	    strcmp(id, "dns-encoded-name") == 0 ||
	    strcmp(id, "dns-encoded-burst") == 0 ||
	    strcmp(id, "vault-secret") == 0)
		return 1;
	for (i = 0; set != NULL && i < set->n; i++)
		if (strcmp(set->rules[i].id, id) == 0)
			return 1;
	return 0;
}

/* Bytes [from, from+n) of view v: from its history or the current block. */
static int
view_bytes(const struct view *v, uint64_t from, size_t n, unsigned char *out)
{
	uint64_t at, oldest = v->total > DLP_HISTORY ? v->total - DLP_HISTORY : 0;
	size_t i;

	for (i = 0; i < n; i++) {
		at = from + i;
		if (at >= v->curat && at < v->curat + v->curlen)
			out[i] = v->cur[at - v->curat];
		else if (at >= oldest && at < v->total)
			out[i] = v->hist[at % DLP_HISTORY];
		else
			return -1;
	}
	return 0;
}

static int
keyword_near(const struct view *v, const char *kw, uint64_t to)
{
	unsigned char w[KEYWORD_WINDOW + DLP_KEYWORD_MAX];
	uint64_t from = to > sizeof(w) ? to - sizeof(w) : 0;
	size_t n = (size_t)(to - from), kl = strlen(kw), i;
	uint64_t oldest = v->total > DLP_HISTORY ? v->total - DLP_HISTORY : 0;

	if (from < oldest && oldest < to) {
		n = (size_t)(to - oldest);
		from = oldest;
	}
	if (view_bytes(v, from, n, w) == -1)
		return 0;
	/* It starts within KEYWORD_WINDOW bytes before the match's end. */
	for (i = n > KEYWORD_WINDOW ? n - KEYWORD_WINDOW : 0; i + kl <= n; i++)
		if (strncasecmp((const char *)w + i, kw, kl) == 0)
			return 1;
	return 0;
}

static void
found(struct dlp_scan *s, const struct dlp_rule *r, enum dlp_view view,
    uint64_t to, const unsigned char *tok, size_t toklen)
{
	s->found = 1;
	snprintf(s->f.rule, sizeof(s->f.rule), "%s", r->id);
	s->f.severity = r->severity;
	s->f.view = view;
	s->f.offset = to;
	dlp_redact(tok, toklen, s->f.excerpt, sizeof(s->f.excerpt));
}

/*
 * generic-secret's "secret:" inside an AWS ARN
 * (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME): a resource type
 * between colons, and the name after it, not an assignment.
 */
static int
arn_part(const struct dlp_rule *r, const struct view *v, uint64_t afrom,
    const unsigned char *m, size_t n)
{
	static const char svc[] = "secretsmanager:";
	unsigned char before[ARN_BEFORE];
	size_t i, k, sl = sizeof(svc) - 1;

	if (r->check != DLP_CHK_ASSIGN || strcmp(r->id, "generic-secret") != 0)
		return 0;
	k = afrom < sizeof(before) ? (size_t)afrom : sizeof(before);
	if (k < sl + 1 || view_bytes(v, afrom - k, k, before) == -1 ||
	    before[k - 1] != ':')
		return 0;
	for (i = 0; i < n && (isalnum(m[i]) || m[i] == '_'); i++)
		;
	if (i == n || m[i] != ':')
		return 0;
	/* ...:secretsmanager:REGION:ACCOUNT:secret:NAME */
	for (i = 0; i + sl <= k; i++)
		if (memcmp(before + i, svc, sl) == 0)
			return 1;
	return 0;
}

static int
match_cb(unsigned int id, unsigned long long from, unsigned long long to,
    unsigned int flags, void *arg)
{
	struct cbctx *c = arg;
	struct dlp_scan *s = c->s;
	struct view *v = &s->v[c->view];
	const struct dlp_rule *r = &s->set->rules[id];
	unsigned char m[CHECK_MAX];
	uint64_t afrom = v->base + from, ato = v->base + to;
	size_t n, tok, toklen;

	if (r->check == DLP_CHK_GCP_TYPE || r->check == DLP_CHK_GCP_KEY) {
		v->gcp |= r->check == DLP_CHK_GCP_TYPE ? 1 : 2;
		if (v->gcp != 3 || (s->skip && s->skip(r->id, s->arg)))
			return 0;
		found(s, r, c->view, ato, (const unsigned char *)r->id,
		    strlen(r->id));
		return 1;
	}
	if (s->skip != NULL && s->skip(r->id, s->arg))
		return 0;
	n = ato - afrom < CHECK_MAX ? (size_t)(ato - afrom) : CHECK_MAX;
	if (view_bytes(v, afrom, n, m) == -1) {
		/* Its start is gone from the history: count it, fail closed. */
		found(s, r, c->view, ato, (const unsigned char *)"", 0);
		return 1;
	}
	if (!dlp_rule_check(r, m, n, &tok, &toklen))
		return 0;
	if (r->keyword != NULL && !keyword_near(v, r->keyword, ato))
		return 0;
	if (arn_part(r, v, afrom, m, n))
		return 0;
	found(s, r, c->view, ato, m + tok, toklen);
	return 1;
}

/* The tap's matcher found what it looks for in view vi. */
static void
tap_found(struct dlp_scan *s, enum dlp_view vi)
{
	memset(&s->f, 0, sizeof(s->f));
	memcpy(s->f.rule, s->tap_rule, sizeof(s->f.rule));
	s->f.severity = DLP_SEV_CRITICAL;
	s->f.view = vi;
	snprintf(s->f.excerpt, sizeof(s->f.excerpt), "-");
	s->found = 1;
}

/* Scan p[0..n) in view vi (when active) and keep it in its history. */
static int
view_feed(struct dlp_scan *s, enum dlp_view vi, const unsigned char *p,
    size_t n)
{
	struct view *v = &s->v[vi];
	struct cbctx c = { s, vi };
	hs_scratch_t *sc;
	hs_error_t e;
	size_t keep, at, first;

	if (n == 0 || s->found)
		return s->found;
	if (v->active && v->st != NULL) {
		if ((sc = scratch_for(s->set)) == NULL) {
			s->found = -1;
			return -1;
		}
		v->cur = p;
		v->curlen = n;
		v->curat = v->total;
		v->dirty = 1;
		e = hs_scan_stream(v->st, (const char *)p, (unsigned int)n, 0, sc,
		    match_cb, &c);
		v->cur = NULL;
		v->curlen = 0;
		if (e != HS_SUCCESS && e != HS_SCAN_TERMINATED) {
			s->found = -1;
			return -1;
		}
	}
	if (v->active && !s->found && s->tap != NULL &&
	    s->tap(vi, p, n, s->tap_arg) != 0)
		tap_found(s, vi);
	keep = n < DLP_HISTORY ? n : DLP_HISTORY;
	at = (size_t)((v->total + n - keep) % DLP_HISTORY);
	first = keep < DLP_HISTORY - at ? keep : DLP_HISTORY - at;
	memcpy(v->hist + at, p + n - keep, first);
	memcpy(v->hist, p + n - keep + first, keep - first);
	v->total += n;
	return s->found;
}

/* The unescaped view wakes: what it kept unscanned (PRIME bytes) first. */
static void
unescaped_wake(struct dlp_scan *s)
{
	struct view *v = &s->v[DLP_VIEW_UNESCAPED];
	unsigned char tmp[PRIME];
	size_t n = v->total < PRIME ? (size_t)v->total : PRIME;

	v->active = 1;
	v->base = v->total - n;
	if (n > 0 && view_bytes(v, v->total - n, n, tmp) == 0) {
		v->total -= n;
		(void)view_feed(s, DLP_VIEW_UNESCAPED, tmp, n);
	} else
		v->base = v->total;
}

static void
flush_u(struct dlp_scan *s)
{
	if (s->wake && !s->v[DLP_VIEW_UNESCAPED].active)
		unescaped_wake(s);
	(void)view_feed(s, DLP_VIEW_UNESCAPED, s->ubuf, s->un);
	s->un = 0;
}

static const enum dlp_view b64_view[B64_ALIGN] = { DLP_VIEW_BASE64,
    DLP_VIEW_BASE64_1, DLP_VIEW_BASE64_2, DLP_VIEW_BASE64_3 };
static const enum dlp_view hex_view[HEX_ALIGN] = { DLP_VIEW_HEX,
    DLP_VIEW_HEX_1 };

static void
flush_d(struct dlp_scan *s)
{
	int k;

	for (k = 0; k < B64_ALIGN; k++) {
		(void)view_feed(s, b64_view[k], s->dbuf[k], s->dn[k]);
		s->dn[k] = 0;
	}
	for (k = 0; k < HEX_ALIGN; k++) {
		(void)view_feed(s, hex_view[k], s->hbuf[k], s->hn[k]);
		s->hn[k] = 0;
	}
}

/* A decoded byte of alignment k of the base64 run (b64) or the hex run. */
static void
dec_out(struct dlp_scan *s, int b64, int k, unsigned char c)
{
	if (b64) {
		s->dbuf[k][s->dn[k]++] = c;
		if (s->dn[k] == OBUF) {
			(void)view_feed(s, b64_view[k], s->dbuf[k], OBUF);
			s->dn[k] = 0;
		}
	} else {
		s->hbuf[k][s->hn[k]++] = c;
		if (s->hn[k] == OBUF) {
			(void)view_feed(s, hex_view[k], s->hbuf[k], OBUF);
			s->hn[k] = 0;
		}
	}
}

/* Base64 (both alphabets) and hex digit values; -1: not one (RUN_END). */
#define RUN_END		(-1)	/* the run ends here */
#define RUN_SKIP	(-2)	/* inside a run: skipped (a line break) */
static signed char	b64t[256], hext[256];
static pthread_once_t	tables_once = PTHREAD_ONCE_INIT;

static void
tables_init(void)
{
	int c;

	for (c = 0; c < 256; c++) {
		b64t[c] = (signed char)(c >= 'A' && c <= 'Z' ? c - 'A' :
		    c >= 'a' && c <= 'z' ? c - 'a' + 26 :
		    c >= '0' && c <= '9' ? c - '0' + 52 :
		    c == '+' || c == '-' ? 62 : c == '/' || c == '_' ? 63 : -1);
		hext[c] = (signed char)(c >= '0' && c <= '9' ? c - '0' :
		    c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1);
	}
	/*
	 * Line breaks inside a run do not end it: base64 wrapped at 64 or 76
	 * columns (MIME, PEM, GNU base64), hex at 60 (xxd -p) is one run.
	 */
	b64t['\r'] = b64t['\n'] = hext['\r'] = hext['\n'] = RUN_SKIP;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#if defined(__SSE2__)
/* 0xff in each byte of x within [lo, hi], unsigned. */
static inline __m128i
in_range(__m128i x, unsigned char lo, unsigned char hi)
{
	__m128i d = _mm_sub_epi8(x, _mm_set1_epi8((char)lo));

	return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((char)(hi - lo))),
	    d);
}

static inline __m128i
is_byte(__m128i x, char c)
{
	return _mm_cmpeq_epi8(x, _mm_set1_epi8(c));
}

/*
 * Bits i of *b64 and *hex: p[i] (of 16) continues a base64 or a hex run:
 * what the tables b64t and hext give other than RUN_END (line breaks
 * included).
 */
static inline void
run_class16(const unsigned char *p, unsigned int *b64, unsigned int *hex)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i folded = _mm_or_si128(x, _mm_set1_epi8(0x20)), both;

	both = _mm_or_si128(in_range(x, '0', '9'),
	    _mm_or_si128(is_byte(x, '\r'), is_byte(x, '\n')));
	*b64 = (unsigned int)_mm_movemask_epi8(_mm_or_si128(both,
	    _mm_or_si128(in_range(folded, 'a', 'z'),
	    _mm_or_si128(_mm_or_si128(is_byte(x, '+'), is_byte(x, '/')),
	    _mm_or_si128(is_byte(x, '-'), is_byte(x, '_'))))));
	*hex = (unsigned int)_mm_movemask_epi8(_mm_or_si128(both,
	    in_range(folded, 'a', 'f')));
}
#endif

/*
 * Which bytes of p[0..n) (n <= BLOCK) continue a base64 run and a hex
 * run, a bit each: one pass, sixteen bytes a step where SSE2 is (every
 * x86-64, which Hyperscan needs anyway).
 */
static void
run_masks(const unsigned char *p, size_t n, uint64_t *mb, uint64_t *mh)
{
	size_t i = 0;
#if defined(__SSE2__)
	unsigned int b, h;
#endif

	memset(mb, 0, ((n + 63) / 64) * sizeof(*mb));
	memset(mh, 0, ((n + 63) / 64) * sizeof(*mh));
#if defined(__SSE2__)
	for (; i + 16 <= n; i += 16) {
		run_class16(p + i, &b, &h);
		mb[i >> 6] |= (uint64_t)b << (i & 63);
		mh[i >> 6] |= (uint64_t)h << (i & 63);
	}
#endif
	for (; i < n; i++) {
		if (b64t[p[i]] != RUN_END)
			mb[i >> 6] |= (uint64_t)1 << (i & 63);
		if (hext[p[i]] != RUN_END)
			mh[i >> 6] |= (uint64_t)1 << (i & 63);
	}
}

/*
 * Bits of word w (of nw) of the mask m where min (16 or 32: a power of
 * two) set bits in a row start, across into the next word: each step
 * keeps the bits followed by twice as many set ones.
 */
static uint64_t
long_starts(const uint64_t *m, size_t nw, size_t w, size_t min)
{
	unsigned __int128 y = m[w];
	size_t k;

	if (w + 1 < nw)
		y |= (unsigned __int128)m[w + 1] << 64;
	for (k = 1; k < min; k <<= 1)
		y &= y >> k;
	return (uint64_t)y;
}

/* Where the run of set bits through bit a starts, not before lo. */
static size_t
run_start(const uint64_t *m, size_t lo, size_t a)
{
	size_t w = a >> 6, b;
	uint64_t x = ~m[w] & ((a & 63) == 63 ? ~(uint64_t)0 :
	    ((uint64_t)1 << ((a & 63) + 1)) - 1);

	for (;;) {
		if (x != 0) {
			b = (w << 6) + 64 - (size_t)__builtin_clzll(x);
			return b > lo ? b : lo;
		}
		if (w == 0 || (w << 6) <= lo)
			return lo;
		x = ~m[--w];
	}
}

/* The first index in [i, n) whose bit in m is clear (a run ends), or n. */
static size_t
mask_end(const uint64_t *m, size_t i, size_t n)
{
	uint64_t x;
	size_t w;

	while (i < n) {
		w = i >> 6;
		x = ~m[w] & (~(uint64_t)0 << (i & 63));
		if (x != 0) {
			i = (w << 6) + (size_t)__builtin_ctzll(x);
			return i < n ? i : n;
		}
		i = (w + 1) << 6;
	}
	return n;
}

/* The first '%' or '\\' in p[i..n), or n. */
static size_t
esc_find(const unsigned char *p, size_t i, size_t n)
{
#if defined(__SSE2__)
	__m128i x;
	unsigned int m;

	for (; i + 16 <= n; i += 16) {
		x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		m = (unsigned int)_mm_movemask_epi8(_mm_or_si128(
		    is_byte(x, '%'), is_byte(x, '\\')));
		if (m != 0)
			return i + (size_t)__builtin_ctz(m);
	}
#endif
	for (; i < n && p[i] != '%' && p[i] != '\\'; i++)
		;
	return i;
}

/*
 * Character i (from 0) of the base64 run, value v. Alignment k decodes from
 * character k: its c-th character (c = i - k + 1) completes a byte when
 * c % 4 is 2, 3 or 0, and that byte is read from the last characters'
 * bits alone, so one accumulator serves all four.
 */
static inline void
b64_out(struct dlp_scan *s, size_t k, unsigned char c)
{
	s->dbuf[k][s->dn[k]++] = c;
	if (s->dn[k] == OBUF) {
		(void)view_feed(s, b64_view[k], s->dbuf[k], OBUF);
		s->dn[k] = 0;
	}
}

static void
b64_push(struct dlp_scan *s, size_t i, int v)
{
	struct run *r = &s->b64;
	size_t k, c;

	r->acc = r->acc << 6 | (uint32_t)v;
	if (i >= B64_ALIGN - 1) {
		/* c % 4 == 2, 3, 0 for k == (i - 1), (i - 2), (i + 1) mod 4 */
		b64_out(s, (i - 1) & 3, (unsigned char)(r->acc >> 4));
		b64_out(s, (i - 2) & 3, (unsigned char)(r->acc >> 2));
		b64_out(s, (i + 1) & 3, (unsigned char)r->acc);
		return;
	}
	for (k = 0; k <= i; k++) {
		c = i - k + 1;
		if ((c & 3) == 2)
			b64_out(s, k, (unsigned char)(r->acc >> 4));
		else if ((c & 3) == 3)
			b64_out(s, k, (unsigned char)(r->acc >> 2));
	}
}

/*
 * b64_push over p[0..n) (p[0] a base64 character, the run min long or
 * more, so every character completes a byte of three alignments) up to
 * the first character that ends the run: how many were taken. The output
 * buffers are checked once per stretch that fits them, not per byte.
 */
static size_t
b64_stretch(struct dlp_scan *s, const unsigned char *p, size_t n)
{
	struct run *r = &s->b64;
	size_t k = 0, lim, top, i = r->len;
	uint32_t acc = r->acc;
	int j, v = 0;

	/* No buffer is full between calls: each is fed when it fills. */
	while (k < n && v != RUN_END && !s->found) {
		for (top = 0, j = 0; j < B64_ALIGN; j++)
			if (s->dn[j] > top)
				top = s->dn[j];
		/* Each character gives an alignment one byte at most. */
		lim = n - k < OBUF - top ? n : k + (OBUF - top);
		for (; k < lim; k++) {
			if ((v = b64t[p[k]]) < 0) {
				if (v == RUN_SKIP)
					continue;
				break;
			}
			acc = acc << 6 | (uint32_t)v;
			s->dbuf[(i - 1) & 3][s->dn[(i - 1) & 3]++] =
			    (unsigned char)(acc >> 4);
			s->dbuf[(i - 2) & 3][s->dn[(i - 2) & 3]++] =
			    (unsigned char)(acc >> 2);
			s->dbuf[(i + 1) & 3][s->dn[(i + 1) & 3]++] =
			    (unsigned char)acc;
			i++;
		}
		r->len = i;
		r->acc = acc;
		for (j = 0; j < B64_ALIGN; j++)
			if (s->dn[j] == OBUF) {
				(void)view_feed(s, b64_view[j], s->dbuf[j], OBUF);
				s->dn[j] = 0;
			}
	}
	return k;
}

/* Digit i of the hex run: alignment k completes a byte on every 2nd. */
static void
hex_push(struct dlp_scan *s, size_t i, int v)
{
	struct run *r = &s->hex;
	size_t k = (i + 1) & 1;

	r->acc = r->acc << 4 | (uint32_t)v;
	if (k <= i)
		dec_out(s, 0, (int)k, (unsigned char)r->acc);
}

/* hex_push over p[0..n) as b64_stretch: how many digits were taken. */
static size_t
hex_stretch(struct dlp_scan *s, const unsigned char *p, size_t n)
{
	struct run *r = &s->hex;
	size_t k = 0, lim, top, i = r->len;
	uint32_t acc = r->acc;
	int j, v = 0;

	while (k < n && v != RUN_END && !s->found) {
		top = s->hn[0] > s->hn[1] ? s->hn[0] : s->hn[1];
		lim = n - k < OBUF - top ? n : k + (OBUF - top);
		for (; k < lim; k++) {
			if ((v = hext[p[k]]) < 0) {
				if (v == RUN_SKIP)
					continue;
				break;
			}
			acc = acc << 4 | (uint32_t)v;
			s->hbuf[(i + 1) & 1][s->hn[(i + 1) & 1]++] =
			    (unsigned char)acc;
			i++;
		}
		r->len = i;
		r->acc = acc;
		for (j = 0; j < HEX_ALIGN; j++)
			if (s->hn[j] == OBUF) {
				(void)view_feed(s, hex_view[j], s->hbuf[j], OBUF);
				s->hn[j] = 0;
			}
	}
	return k;
}

/* A run ends: a separator so that no match joins two runs. */
static void
run_end(struct dlp_scan *s, struct run *r)
{
	int k, b64 = r == &s->b64;

	if (r->len == 0)
		return;
	if (r->len >= (b64 ? B64_MIN : HEX_MIN))
		for (k = 0; k < (b64 ? B64_ALIGN : HEX_ALIGN); k++)
			dec_out(s, b64, k, '\n');
	memset(r, 0, sizeof(*r));
}

static void	run_take(struct dlp_scan *, struct run *, const signed char *,
		    size_t, const unsigned char *, size_t);

/* One unescaped byte into the base64 and hex run decoders. */
static void
runs_in(struct dlp_scan *s, unsigned char c)
{
	run_take(s, &s->b64, b64t, B64_MIN, &c, 1);
	run_take(s, &s->hex, hext, HEX_MIN, &c, 1);
}

/*
 * p[0..n) into r's run: run characters continue it (decoded once it has
 * min of them), RUN_SKIP ones are passed over, a RUN_END one ends it.
 */
static void
run_take(struct dlp_scan *s, struct run *r, const signed char *t, size_t min,
    const unsigned char *p, size_t n)
{
	size_t k, i, used;
	int v;

	for (k = 0; k < n; k++) {
		if ((v = t[p[k]]) == RUN_SKIP)
			continue;
		if (v == RUN_END) {
			run_end(s, r);
			continue;
		}
		if (r->len < min - 1) {
			r->pend[r->len++] = p[k];
			continue;
		}
		if (r->len == min - 1) {
			for (i = 0; i < min - 1; i++) {
				if (r == &s->b64)
					b64_push(s, i, t[r->pend[i]]);
				else
					hex_push(s, i, t[r->pend[i]]);
			}
		}
		/* p[k] and what follows it in the run, in one loop. */
		used = r == &s->b64 ? b64_stretch(s, p + k, n - k) :
		    hex_stretch(s, p + k, n - k);
		if (used == 0 || s->found)
			return;
		k += used - 1;
	}
}

/*
 * runs_in over p[0..n) for one decoder (the common case: bytes no escape
 * decoder changed), the same bytes out in the same order. Only a run that
 * reaches min characters is decoded, so the search goes from run to run
 * (run_masks: a bit a byte, made sixteen bytes a step) and passes shorter ones by.
 */
static void
runs_seg(struct dlp_scan *s, struct run *r, const signed char *t,
    size_t min, const unsigned char *p, size_t n, const uint64_t *m, size_t o)
{
	size_t i = o, end = o + n, a, e, w, nw = (end + 63) / 64;
	uint64_t l;

	if (r->len > 0) {		/* the run the last bytes left open */
		e = mask_end(m, o, end);
		run_take(s, r, t, min, p, e - o);
		if (e == end)
			return;
		run_end(s, r);
		i = e + 1;
	}
	/*
	 * Here no run is open: p[i - 1] (if any) is not a run character. A
	 * run of min that ends before the end needs more than min bytes.
	 */
	while (i + min < end && !s->found) {
		/* The next min run characters in a row, at or after i. */
		w = i >> 6;
		l = long_starts(m, nw, w, min) & (~(uint64_t)0 << (i & 63));
		while (l == 0 && ++w < nw)
			l = long_starts(m, nw, w, min);
		if (l == 0 || (a = (w << 6) + (size_t)__builtin_ctzll(l)) >= end)
			break;
		a = run_start(m, i, a);
		e = mask_end(m, a, end);
		run_take(s, r, t, min, p + (a - o), e - a);
		if (e == end)
			return;
		run_end(s, r);
		i = e + 1;
	}
	/* The run at the end, however short: the next bytes may go on with it. */
	if (i < end && !s->found && (m[(end - 1) >> 6] >> ((end - 1) & 63) & 1)) {
		a = run_start(m, i, end - 1);
		run_take(s, r, t, min, p + (a - o), end - a);
	}
}

static void
u_out(struct dlp_scan *s, unsigned char c)
{
	s->ubuf[s->un++] = c;
	if (s->un == sizeof(s->ubuf))
		flush_u(s);
	runs_in(s, c);
}

/*
 * p[0..n) unchanged by the escape decoders (none pending, none in it);
 * mb and mh: run_masks of the block p is in, p[0] at bit o.
 */
static void
u_bulk(struct dlp_scan *s, const unsigned char *p, size_t n,
    const uint64_t *mb, const uint64_t *mh, size_t o)
{
	size_t take;

	while (n > 0 && !s->found) {
		take = sizeof(s->ubuf) - s->un;
		if (take > n)
			take = n;
		memcpy(s->ubuf + s->un, p, take);
		s->un += take;
		runs_seg(s, &s->b64, b64t, B64_MIN, p, take, mb, o);
		runs_seg(s, &s->hex, hext, HEX_MIN, p, take, mh, o);
		if (s->un == sizeof(s->ubuf))
			flush_u(s);
		p += take;
		n -= take;
		o += take;
	}
}

static void	pct_in(struct dlp_scan *, int, unsigned char);

/* What the JSON decoder gives: through the percent layer after it. */
static void
js_out(struct dlp_scan *s, unsigned char c)
{
	pct_in(s, PCT_POST, c);
}

static void
utf8_out(struct dlp_scan *s, uint32_t cp)
{
	if (cp < 0x80)
		js_out(s, (unsigned char)cp);
	else if (cp < 0x800) {
		js_out(s, (unsigned char)(0xc0 | cp >> 6));
		js_out(s, (unsigned char)(0x80 | (cp & 0x3f)));
	} else {
		js_out(s, (unsigned char)(0xe0 | cp >> 12));
		js_out(s, (unsigned char)(0x80 | (cp >> 6 & 0x3f)));
		js_out(s, (unsigned char)(0x80 | (cp & 0x3f)));
	}
}

/* JSON string escapes, after the percent layers. */
static void
json_in(struct dlp_scan *s, unsigned char c)
{
	struct jsesc *j = &s->js;
	const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
	const char *k;
	int h, i;

	if (j->st == 0) {
		if (c == '\\')
			j->st = 1;
		else
			js_out(s, c);
		return;
	}
	if (j->st == 1) {
		if (c == 'u') {
			j->st = 2;
			j->cp = 0;
			return;
		}
		j->st = 0;
		if (c != '\0' && (k = strchr(from, c)) != NULL) {
			s->wake = 1;
			js_out(s, (unsigned char)to[k - from]);
		} else {
			js_out(s, '\\');
			json_in(s, c);
		}
		return;
	}
	/* \u and st - 2 hex digits so far */
	if ((h = hexval(c)) >= 0) {
		j->raw[j->st - 2] = c;
		j->cp = j->cp << 4 | (uint32_t)h;
		if (++j->st == 6) {
			j->st = 0;
			s->wake = 1;
			utf8_out(s, j->cp);
		}
		return;
	}
	js_out(s, '\\');
	js_out(s, 'u');
	for (i = 0; i < j->st - 2; i++)
		js_out(s, j->raw[i]);
	j->st = 0;
	json_in(s, c);
}

/* What percent layer l gives: the next layer, the JSON escapes, or out. */
static void
pct_next(struct dlp_scan *s, int l, unsigned char c)
{
	if (l + 1 < PCT_LAYERS)
		pct_in(s, l + 1, c);
	else if (l + 1 == PCT_LAYERS)
		json_in(s, c);
	else
		u_out(s, c);
}

/*
 * Percent layer l: 0..2 before the JSON escapes (%5Cu0041), PCT_POST after
 * them (\u002541: a JSON escape that writes '%').
 */
static void
pct_in(struct dlp_scan *s, int l, unsigned char c)
{
	struct pct *p;
	int h;

	p = &s->pct[l];
	switch (p->st) {
	case 0:
		if (c == '%')
			p->st = 1;
		else
			pct_next(s, l, c);
		return;
	case 1:
		if ((h = hexval(c)) >= 0) {
			p->hi = h;
			p->c1 = c;
			p->st = 2;
			return;
		}
		p->st = 0;
		pct_next(s, l, '%');
		pct_in(s, l, c);
		return;
	default:
		p->st = 0;
		if ((h = hexval(c)) >= 0) {
			s->wake = 1;
			pct_next(s, l, (unsigned char)(p->hi << 4 | h));
			return;
		}
		pct_next(s, l, '%');
		pct_next(s, l, (unsigned char)p->c1);
		pct_in(s, l, c);
	}
}

static void
result(const struct dlp_scan *s, struct dlp_finding *f)
{
	if (f != NULL && s->found == 1)
		*f = s->f;
	else if (f != NULL && s->found == -1) {
		memset(f, 0, sizeof(*f));
		snprintf(f->rule, sizeof(f->rule), "scan-error");
	}
}

int
dlp_scan_feed(struct dlp_scan *s, const void *buf, size_t n,
    struct dlp_finding *f)
{
	const unsigned char *p = buf;
	uint64_t mb[BLOCK / 64], mh[BLOCK / 64];
	size_t i, j, b, bn;

	if ((s->set->db == NULL && s->tap == NULL) || s->found) {
		result(s, f);
		return s->found;
	}
	if (view_feed(s, DLP_VIEW_RAW, p, n) == 0) {
		for (b = 0; b < n && !s->found; b += bn) {
			bn = n - b < BLOCK ? n - b : BLOCK;
			run_masks(p + b, bn, mb, mh);
			for (i = 0; i < bn && !s->found; ) {
				if (s->pct[0].st == 0 && s->pct[1].st == 0 &&
				    s->pct[2].st == 0 &&
				    s->pct[PCT_POST].st == 0 && s->js.st == 0) {
					j = esc_find(p + b, i, bn);
					u_bulk(s, p + b + i, j - i, mb, mh, i);
					i = j;
					if (i == bn || s->found)
						break;
				}
				pct_in(s, 0, p[b + i++]);
			}
		}
		if (!s->found)
			flush_u(s);
		if (!s->found)
			flush_d(s);
	}
	result(s, f);
	return s->found;
}

static int
view_reset(struct dlp_scan *s, enum dlp_view vi, int deliver)
{
	struct view *v = &s->v[vi];
	struct cbctx c = { s, vi };
	hs_scratch_t *sc;

	/* An untouched stream is as reset already: no work for a head's parts. */
	if (v->st != NULL && v->dirty) {
		if ((sc = scratch_for(s->set)) == NULL)
			return -1;
		if (hs_reset_stream(v->st, 0, sc, deliver && !s->found &&
		    v->active ? match_cb : NULL, &c) != HS_SUCCESS)
			return -1;
	}
	if (s->tap != NULL)
		(void)s->tap(vi, NULL, 0, s->tap_arg);
	v->dirty = 0;
	v->total = v->base = 0;
	v->active = vi != DLP_VIEW_UNESCAPED;
	v->gcp = 0;
	return 0;
}

static void
decoders_reset(struct dlp_scan *s)
{
	memset(s->pct, 0, sizeof(s->pct));
	memset(&s->js, 0, sizeof(s->js));
	memset(&s->b64, 0, sizeof(s->b64));
	memset(&s->hex, 0, sizeof(s->hex));
	s->wake = 0;
	s->un = 0;
	memset(s->dn, 0, sizeof(s->dn));
	memset(s->hn, 0, sizeof(s->hn));
}

/* What percent layer l holds goes on as it came. */
static void
pct_flush(struct dlp_scan *s, int l)
{
	int st = s->pct[l].st;

	s->pct[l].st = 0;
	if (st >= 1)
		pct_next(s, l, '%');
	if (st == 2)
		pct_next(s, l, (unsigned char)s->pct[l].c1);
}

int
dlp_scan_end(struct dlp_scan *s, struct dlp_finding *f)
{
	int l, i;

	if (s->set->db == NULL && s->tap == NULL)
		return 0;
	if (!s->found) {
		/* What the decoders hold goes out as it came. */
		for (l = 0; l < PCT_LAYERS; l++)
			pct_flush(s, l);
		if (s->js.st >= 1)
			js_out(s, '\\');
		if (s->js.st >= 2) {
			js_out(s, 'u');
			for (i = 0; i < s->js.st - 2; i++)
				js_out(s, s->js.raw[i]);
		}
		s->js.st = 0;
		pct_flush(s, PCT_POST);
		run_end(s, &s->b64);
		run_end(s, &s->hex);
		if (!s->found)
			flush_u(s);
		if (!s->found)
			flush_d(s);
	}
	for (i = 0; i < DLP_VIEW_MAX; i++)
		if (view_reset(s, (enum dlp_view)i, 1) == -1 && !s->found)
			s->found = -1;
	decoders_reset(s);
	result(s, f);
	return s->found;
}

int
dlp_scan_reset(struct dlp_scan *s)
{
	int i, rc = 0;

	for (i = 0; i < DLP_VIEW_MAX; i++)
		if (view_reset(s, (enum dlp_view)i, 0) == -1)
			rc = -1;
	decoders_reset(s);
	s->found = 0;
	memset(&s->f, 0, sizeof(s->f));
	return rc;
}

int
dlp_scan_buf(struct dlp_scan *s, const void *p, size_t n,
    struct dlp_finding *f)
{
	if (dlp_scan_reset(s) == -1)
		return -1;
	if (dlp_scan_feed(s, p, n, f) != 0)
		return s->found;
	return dlp_scan_end(s, f);
}

struct dlp_scan *
dlp_scan_new(const struct dlp_set *set, dlp_skip_fn skip, void *arg)
{
	struct dlp_scan *s;
	int i;

	(void)pthread_once(&tables_once, tables_init);
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->set = set;
	s->skip = skip;
	s->arg = arg;
	for (i = 0; i < DLP_VIEW_MAX; i++) {
		s->v[i].active = i != DLP_VIEW_UNESCAPED;
		if (set->db != NULL && hs_open_stream(set->db, 0,
		    &s->v[i].st) != HS_SUCCESS) {
			dlp_scan_free(s);
			return NULL;
		}
	}
	return s;
}

void
dlp_scan_tap(struct dlp_scan *s, dlp_tap_fn fn, void *arg, const char *rule)
{
	s->tap = fn;
	s->tap_arg = arg;
	snprintf(s->tap_rule, sizeof(s->tap_rule), "%s", rule);
}

void
dlp_scan_free(struct dlp_scan *s)
{
	int i;

	if (s == NULL)
		return;
	for (i = 0; i < DLP_VIEW_MAX; i++)
		if (s->v[i].st != NULL)
			(void)hs_close_stream(s->v[i].st, NULL, NULL, NULL);
	free(s);
}
