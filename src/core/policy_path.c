/*
 * The one canonical form of a request path that path rules match
 * (docs/policy.md), and the sequences that origin servers read in different
 * ways, which make a path ambiguous. A pure function over bytes: no heap, no
 * logging. Every case has its row in the table of docs/policy.md ("Path
 * matching").
 */
#include <stdint.h>
#include <string.h>

#include "core/policy_int.h"
#include "core/util.h"

/*
 * Decoded code points that some server or framework reads as '/', '\',
 * '.', '%' or trims as white space: best-fit code-page mapping, NFKC
 * normalisation, str.strip(). Ranges, ascending.
 */
static const struct {
	uint32_t	lo, hi;
} lookalikes[] = {
	{ 0x0085, 0x0085 },	/* NEL */
	{ 0x00a0, 0x00a0 },	/* no-break space */
	{ 0x1680, 0x1680 },
	{ 0x180e, 0x180e },
	{ 0x2000, 0x200b },	/* en quad .. zero width space */
	{ 0x2024, 0x2025 },	/* one and two dot leaders: NFKC "." and ".." */
	{ 0x2028, 0x2029 },
	{ 0x202f, 0x202f },
	{ 0x2044, 0x2044 },	/* fraction slash */
	{ 0x205f, 0x205f },
	{ 0x2215, 0x2216 },	/* division slash, set minus */
	{ 0x29f5, 0x29f5 },	/* reverse solidus operator */
	{ 0x29f8, 0x29f9 },	/* big solidus, big reverse solidus */
	{ 0x3000, 0x3000 },
	{ 0xfe52, 0xfe52 },	/* small full stop */
	{ 0xfe68, 0xfe68 },	/* small reverse solidus */
	{ 0xfeff, 0xfeff },
	{ 0xff05, 0xff05 },	/* fullwidth percent sign */
	{ 0xff0e, 0xff0f },	/* fullwidth full stop, solidus */
	{ 0xff3c, 0xff3c },	/* fullwidth reverse solidus */
};

struct pcanon {
	char		*out;
	size_t		 cap;		/* out's size, NUL included */
	size_t		 o;
	int		 ambiguous;
	int		 need;		/* UTF-8 continuation bytes still due */
	uint32_t	 cp, min;	/* code point so far, least for its length */
	int		 enc_dot;	/* this segment has a '.' from "%2E" */
};

static int
lookalike(uint32_t cp)
{
	size_t i;

	for (i = 0; i < sizeof(lookalikes) / sizeof(lookalikes[0]); i++)
		if (cp >= lookalikes[i].lo && cp <= lookalikes[i].hi)
			return 1;
	return 0;
}

static int
emit(struct pcanon *pc, char c)
{
	/* Room for this byte, a final '/' and the NUL. */
	if (pc->o + 2 >= pc->cap)
		return -1;
	pc->out[pc->o++] = c;
	return 0;
}

static int
emit_escape(struct pcanon *pc, int b)
{
	if (emit(pc, '%') == -1 ||
	    emit(pc, "0123456789ABCDEF"[b >> 4]) == -1 ||
	    emit(pc, "0123456789ABCDEF"[b & 15]) == -1)
		return -1;
	return 0;
}

/* A byte that is not a continuation ends any UTF-8 sequence: truncated. */
static void
utf8_break(struct pcanon *pc)
{
	if (pc->need > 0)
		pc->ambiguous = 1;
	pc->need = 0;
}

/* One decoded byte >= 0x80: invalid or overlong UTF-8 is ambiguous. */
static void
utf8_step(struct pcanon *pc, int b)
{
	if (pc->need > 0) {
		if ((b & 0xc0) != 0x80) {
			pc->ambiguous = 1;
			pc->need = 0;
			return;
		}
		pc->cp = pc->cp << 6 | (uint32_t)(b & 0x3f);
		if (--pc->need == 0 && (pc->cp < pc->min || pc->cp > 0x10ffff ||
		    (pc->cp >= 0xd800 && pc->cp <= 0xdfff) || lookalike(pc->cp)))
			pc->ambiguous = 1;
		return;
	}
	if (b >= 0xc2 && b <= 0xdf) {
		pc->need = 1;
		pc->cp = (uint32_t)(b & 0x1f);
		pc->min = 0x80;
	} else if (b >= 0xe0 && b <= 0xef) {
		pc->need = 2;
		pc->cp = (uint32_t)(b & 0x0f);
		pc->min = 0x800;
	} else if (b >= 0xf0 && b <= 0xf4) {
		pc->need = 3;
		pc->cp = (uint32_t)(b & 0x07);
		pc->min = 0x10000;
	} else		/* stray continuation, C0, C1, F5..FF */
		pc->ambiguous = 1;
}

/*
 * One byte from an escape. Printable ASCII is decoded except '%', '?' and
 * '#' (which would change how the canonical form itself reads); '/', '\',
 * NUL and the other controls are ambiguous; the rest stays an escape with
 * upper-case hex.
 */
static int
escaped_byte(struct pcanon *pc, int b)
{
	if (b >= 0x80) {
		utf8_step(pc, b);
		return emit_escape(pc, b);
	}
	utf8_break(pc);
	if (b < 0x20 || b == 0x7f || b == '/' || b == '\\')
		pc->ambiguous = 1;
	if (b <= 0x20 || b == 0x7f || b == '%' || b == '?' || b == '#' ||
	    b == '/' || b == '\\')
		return emit_escape(pc, b);
	if (b == '.')
		pc->enc_dot = 1;
	return emit(pc, (char)b);
}

/* A raw byte of the target: controls, space and non-ASCII are malformed. */
static int
raw_byte(struct pcanon *pc, unsigned char c)
{
	if (c <= 0x20 || c >= 0x7f)
		return -1;
	utf8_break(pc);
	if (c == '\\')
		pc->ambiguous = 1;
	return emit(pc, (char)c);
}

/* Decode s[0..n) (no '/' in it) onto the output; -1 when malformed. */
static int
segment_decode(struct pcanon *pc, const char *s, size_t n)
{
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if (s[i] != '%') {
			if (raw_byte(pc, (unsigned char)s[i]) == -1)
				return -1;
			continue;
		}
		if (n - i < 3 || (hi = util_hexval(s[i + 1])) < 0 ||
		    (lo = util_hexval(s[i + 2])) < 0)
			return -1;
		if (escaped_byte(pc, hi << 4 | lo) == -1)
			return -1;
		i += 2;
	}
	utf8_break(pc);
	return 0;
}

/*
 * Double encoding: "%25" followed by two hex digits in the decoded
 * segment, which a server that decodes twice reads as another escape.
 */
static int
double_encoded(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i + 4 < n; i++)
		if (memcmp(s + i, "%25", 3) == 0 && util_hexval(s[i + 3]) >= 0 &&
		    util_hexval(s[i + 4]) >= 0)
			return 1;
	return 0;
}

/* Only dots and encoded spaces, but not "." or "..": Windows trims them. */
static int
dots_and_spaces(const char *s, size_t n)
{
	size_t i, dots = 0;

	for (i = 0; i < n; i++) {
		if (s[i] == '.')
			dots++;
		else if (n - i >= 3 && memcmp(s + i, "%20", 3) == 0)
			i += 2;
		else
			return 0;
	}
	return dots > 0 && !(n == dots && n <= 2);
}

/* ".." removes the segment before it. */
static void
segment_pop(struct pcanon *pc)
{
	size_t o = pc->o;

	while (o > 0 && pc->out[o - 1] != '/')
		o--;
	if (o == 0)
		return;
	pc->o = o - 1;
}

enum seg_kind {
	SEG_EMPTY,
	SEG_DOT,
	SEG_DOTDOT,
	SEG_NAME
};

/*
 * Decode one segment after a '/' onto the output and say what it was; a
 * dot or empty segment is taken off again.
 */
static int
segment(struct pcanon *pc, const char *s, size_t n, enum seg_kind *kind)
{
	size_t start, len;
	const char *seg;

	start = pc->o;
	if (emit(pc, '/') == -1)
		return -1;
	pc->enc_dot = 0;
	if (segment_decode(pc, s, n) == -1)
		return -1;
	seg = pc->out + start + 1;
	len = pc->o - start - 1;
	/*
	 * A path parameter, raw or "%3B", in any segment: Tomcat, Jetty and
	 * Spring cut ";..." off each segment before they route, so
	 * "/admin;x/", "/;x/admin" and "/a/..;/admin" reach "/admin/" there
	 * and are other resources everywhere else.
	 */
	if (memchr(seg, ';', len) != NULL)
		pc->ambiguous = 1;
	if (double_encoded(seg, len) || dots_and_spaces(seg, len))
		pc->ambiguous = 1;
	*kind = SEG_NAME;
	if (len == 0)
		*kind = SEG_EMPTY;
	else if (len == 1 && seg[0] == '.')
		*kind = SEG_DOT;
	else if (len == 2 && seg[0] == '.' && seg[1] == '.')
		*kind = SEG_DOTDOT;
	/* "%2e%2e", ".%2e": servers disagree whether these are dots. */
	if (*kind != SEG_NAME && *kind != SEG_EMPTY && pc->enc_dot)
		pc->ambiguous = 1;
	if (*kind != SEG_NAME)
		pc->o = start;
	return 0;
}

enum policy_path
policy_path_canon(const char *in, size_t len, char *out, size_t outlen,
    size_t *olen)
{
	struct pcanon pc;
	enum seg_kind kind = SEG_NAME;
	size_t i, j, cut;
	int absolute, empty_before = 0;

	*olen = 0;
	if (outlen == 0)
		return POLICY_PATH_BAD;
	out[0] = '\0';
	memset(&pc, 0, sizeof(pc));
	pc.out = out;
	pc.cap = outlen;
	for (cut = 0; cut < len && in[cut] != '?' && in[cut] != '#'; cut++)
		;
	absolute = cut > 0 && in[0] == '/';
	for (i = absolute ? 1 : 0; ; i = j + 1) {
		for (j = i; j < cut && in[j] != '/'; j++)
			;
		if (segment(&pc, in + i, j - i, &kind) == -1)
			goto bad;
		/*
		 * Merged slashes: "//" is one '/' to most servers, an empty
		 * segment to others, which disagree on what ".." removes.
		 */
		if (kind == SEG_DOTDOT) {
			if (empty_before)
				pc.ambiguous = 1;
			segment_pop(&pc);
			empty_before = 0;
		} else if (kind == SEG_EMPTY && j < cut)
			empty_before = 1;
		else if (kind == SEG_NAME)
			empty_before = 0;
		if (j >= cut)
			break;
	}
	/* A last segment that was empty or dots leaves a trailing '/'. */
	if (kind != SEG_NAME || pc.o == 0)
		out[pc.o++] = '/';
	if (!absolute) {
		memmove(out, out + 1, pc.o - 1);
		pc.o--;
	}
	out[pc.o] = '\0';
	if (pc.ambiguous) {
		out[0] = '\0';
		return POLICY_PATH_AMBIGUOUS;
	}
	*olen = pc.o;
	return POLICY_PATH_OK;
bad:
	out[0] = '\0';
	return POLICY_PATH_BAD;
}
