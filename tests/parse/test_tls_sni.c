/*
 * Unit tests of the ClientHello parser: real ClientHellos captured from
 * openssl s_client, curl and Python (the fuzz seeds), truncated, re-framed
 * over many records and corrupted; synthetic ones for the edge cases.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helper_parse.h"
#include "parse/tls_sni.h"

#define OK	TLS_CH_OK
#define NEED	TLS_CH_NEED_MORE
#define NOTTLS	TLS_CH_NOT_TLS
#define BAD	TLS_CH_BAD

#define BUFMAX	(140 * 1024)

static const char long_sni[] =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."
    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc."
    "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";

/* What each client was asked to send (see the command lines in the report). */
static const struct seed {
	const char	*file;
	const char	*sni;
	int		 alpn, h2, h11;
} seeds[] = {
	{ "openssl_sni.bin", "x.test", 0, 0, 0 },
	{ "openssl_sni_alpn_h2_http11.bin", "x.test", 1, 1, 1 },
	{ "openssl_tls12_sni_alpn_http11.bin", "x.test", 1, 0, 1 },
	{ "openssl_tls13_sni_alpn_h2.bin", "x.test", 1, 1, 0 },
	{ "openssl_nosni.bin", NULL, 0, 0, 0 },
	{ "openssl_nosni_alpn_http11.bin", NULL, 1, 0, 1 },
	{ "openssl_tls12_longsni.bin", long_sni, 0, 0, 0 },
	{ "curl_sni_alpn.bin", "x.test", 1, 1, 1 },
	{ "curl_http11.bin", "x.test", 1, 0, 1 },
	{ "curl_tls12.bin", "x.test", 1, 1, 1 },
	{ "curl_ip_nosni.bin", NULL, 1, 1, 1 },
	{ "python_sni.bin", "py.x.test", 1, 0, 1 },
};

static size_t
be16(const uint8_t *p)
{
	return (size_t)p[0] << 8 | p[1];
}

static void
put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static size_t
be24(const uint8_t *p)
{
	return (size_t)p[0] << 16 | be16(p + 1);
}

static void
put24(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 16);
	put16(p + 1, v & 0xffff);
}

/* Cuts a single-record hello to n bytes, fixing both length fields. */
static void
cut_hello(uint8_t *b, size_t n)
{
	put16(b + 3, n - 5);
	put24(b + 6, n - 9);
}

/* The parse of buf and of each of its prefixes: NEED_MORE or the same. */
static int
parse_all_prefixes(const uint8_t *buf, size_t len, int want,
    struct tls_client_hello *ch)
{
	size_t k;
	int rc;

	for (k = 0; k < len; k++) {
		rc = tls_parse_client_hello(buf, k, ch);
		if (rc != NEED && rc != want) {
			fprintf(stderr, "prefix %zu of %zu: %d, want %d\n", k,
			    len, rc, want);
			return -1;
		}
		if (want == OK && rc != NEED) {
			fprintf(stderr, "prefix %zu of %zu complete\n", k, len);
			return -1;
		}
	}
	return tls_parse_client_hello(buf, len, ch);
}

/* Re-frames the handshake message of a single-record hello in frag-byte records. */
static size_t
reframe(const uint8_t *in, size_t inlen, size_t frag, uint8_t *out)
{
	const uint8_t *msg = in + 5;
	size_t mlen = be16(in + 3), off, n, o = 0;

	(void)inlen;
	for (off = 0; off < mlen; off += n) {
		n = mlen - off < frag ? mlen - off : frag;
		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x01;
		put16(out + o, n);
		o += 2;
		memcpy(out + o, msg + off, n);
		o += n;
	}
	return o;
}

/* Offsets of a single-record ClientHello's fields, walked independently. */
struct ch_offs {
	size_t	sid;		/* session_id length byte */
	size_t	cs;		/* cipher_suites length */
	size_t	cm;		/* compression_methods length */
	size_t	exts;		/* extensions length */
	size_t	sni;		/* server_name extension type, or 0 */
	size_t	alpn;		/* ALPN extension type, or 0 */
};

static void
ch_walk(const uint8_t *b, size_t len, struct ch_offs *o)
{
	size_t p, end;

	memset(o, 0, sizeof(*o));
	o->sid = 5 + 4 + 2 + 32;
	o->cs = o->sid + 1 + b[o->sid];
	o->cm = o->cs + 2 + be16(b + o->cs);
	o->exts = o->cm + 1 + b[o->cm];
	end = o->exts + 2 + be16(b + o->exts);
	for (p = o->exts + 2; p + 4 <= end && end <= len;
	    p += 4 + be16(b + p + 2)) {
		if (be16(b + p) == 0)
			o->sni = p;
		if (be16(b + p) == 16)
			o->alpn = p;
	}
}

static void
check_hello(const struct tls_client_hello *ch, const struct seed *s,
    const char *how)
{
	if (s->sni != NULL) {
		CHECK_MSG(ch->has_sni == 1 && strcmp(ch->sni, s->sni) == 0 &&
		    ch->sni_len == strlen(s->sni), "%s %s: sni \"%s\"",
		    s->file, how, ch->sni);
	} else
		CHECK_MSG(ch->has_sni == 0 && ch->sni_len == 0 &&
		    ch->sni[0] == '\0', "%s %s: has sni", s->file, how);
	CHECK_MSG(ch->has_alpn == s->alpn && ch->alpn_h2 == s->h2 &&
	    ch->alpn_http11 == s->h11, "%s %s: alpn %d %d %d", s->file, how,
	    ch->has_alpn, ch->alpn_h2, ch->alpn_http11);
}

static void
test_seeds(void)
{
	static uint8_t buf[BUFMAX], fr[BUFMAX];
	static const size_t frags[] = { 1, 2, 3, 4, 5, 7, 64, 100, 255, 300,
	    16384 };
	struct tls_client_hello ch;
	size_t i, j, len, flen;
	int rc;

	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		const struct seed *s = &seeds[i];

		len = load_seed(s->file, buf, sizeof(buf));
		CHECK_MSG(len > 0, "%s: cannot load", s->file);
		if (len == 0)
			continue;
		/* whole, and NEED_MORE for every truncation */
		rc = parse_all_prefixes(buf, len, OK, &ch);
		CHECK_MSG(rc == OK, "%s: %d", s->file, rc);
		CHECK_INT(ch.consumed, len);
		check_hello(&ch, s, "whole");
		/* bytes after the hello are not consumed */
		memcpy(buf + len, "\x17\x03\x03\x00\x05hello", 10);
		rc = tls_parse_client_hello(buf, len + 10, &ch);
		CHECK_MSG(rc == OK && ch.consumed == len, "%s: followed", s->file);
		/* the same message over many records */
		for (j = 0; j < sizeof(frags) / sizeof(frags[0]); j++) {
			flen = reframe(buf, len, frags[j], fr);
			rc = frags[j] <= 7 ?
			    parse_all_prefixes(fr, flen, OK, &ch) :
			    tls_parse_client_hello(fr, flen, &ch);
			CHECK_MSG(rc == OK, "%s in %zu-byte records: %d",
			    s->file, frags[j], rc);
			CHECK_INT(ch.consumed, flen);
			check_hello(&ch, s, "fragmented");
			/* a non-handshake record inside the message */
			if (flen > len + 5) {
				fr[5 + frags[j]] = 0x17;
				CHECK_MSG(parse_all_prefixes(fr, flen, BAD,
				    &ch) == BAD, "%s: interleaved record",
				    s->file);
			}
		}
	}
}

/* Corrupt one captured hello at a time: each way must give its verdict. */
static void
test_corrupt(void)
{
	static uint8_t orig[BUFMAX], b[BUFMAX];
	struct tls_client_hello ch;
	struct ch_offs o;
	size_t i, len, n;
	int rc;

	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		const char *f = seeds[i].file;

		len = load_seed(f, orig, sizeof(orig));
		if (len == 0)
			continue;
		ch_walk(orig, len, &o);
		CHECK_MSG(o.exts > 0 && o.exts < len, "%s: walk", f);

#define CORRUPT(what, want, ...) do {					\
	memcpy(b, orig, len);						\
	n = len;							\
	__VA_ARGS__;							\
	rc = parse_all_prefixes(b, n, (want), &ch);			\
	CHECK_MSG(rc == (want), "%s: %s: %d, want %d", f, what, rc, (want)); \
	if (rc != OK)							\
		CHECK_MSG(ch.has_sni == 0 && ch.consumed == 0,		\
		    "%s: %s: output left set", f, what);		\
} while (0)
		CORRUPT("record length + 1", BAD, put16(b + 3, be16(b + 3) + 1));
		CORRUPT("record length - 1", BAD, put16(b + 3, be16(b + 3) - 1));
		CORRUPT("record length 0", BAD, put16(b + 3, 0));
		CORRUPT("record length 18433", BAD, put16(b + 3, 18433));
		CORRUPT("record version 3.5", BAD, b[2] = 5);
		CORRUPT("record version 3.0", BAD, b[2] = 0);
		CORRUPT("record version 2.x", NOTTLS, b[1] = 2);
		CORRUPT("content type 23", NOTTLS, b[0] = 23);
		CORRUPT("handshake type 2", BAD, b[5] = 2);
		CORRUPT("handshake length + 1", NEED,
		    put24(b + 6, be24(b + 6) + 1));
		CORRUPT("handshake length - 1", BAD,
		    put24(b + 6, be24(b + 6) - 1));
		CORRUPT("handshake length 64K", BAD, b[6] = 1);
		CORRUPT("legacy_version 2.0", BAD, b[9] = 2);
		CORRUPT("legacy_version 3.5", BAD, b[10] = 5);
		CORRUPT("session_id 33", BAD, b[o.sid] = 33);
		CORRUPT("session_id 255", BAD, b[o.sid] = 255);
		CORRUPT("cipher_suites odd", BAD,
		    put16(b + o.cs, be16(b + o.cs) - 1));
		CORRUPT("cipher_suites 0", BAD, put16(b + o.cs, 0));
		CORRUPT("cipher_suites huge", BAD, put16(b + o.cs, 0xfffe));
		CORRUPT("compression 0", BAD, b[o.cm] = 0);
		CORRUPT("compression 255", BAD, b[o.cm] = 255);
		CORRUPT("extensions + 1", BAD,
		    put16(b + o.exts, be16(b + o.exts) + 1));
		CORRUPT("extensions - 1", BAD,
		    put16(b + o.exts, be16(b + o.exts) - 1));
		CORRUPT("extensions 0", BAD, put16(b + o.exts, 0));
		CORRUPT("first extension too long", BAD,
		    put16(b + o.exts + 4, be16(b + o.exts) - 3));
		CORRUPT("extension bytes cut", BAD, n = o.exts + 2;
		    cut_hello(b, n));
		CORRUPT("half an extensions length", BAD, n = o.exts + 1;
		    cut_hello(b, n));
		CORRUPT("no compression methods", BAD, n = o.cm;
		    cut_hello(b, n));
		/* TLS 1.2 allows a hello with no extensions at all. */
		CORRUPT("no extensions", OK, n = o.exts; cut_hello(b, n));
		if (o.sni != 0) {
			size_t nl = o.sni + 7;	/* host_name length */

			CORRUPT("sni ext length + 1", BAD,
			    put16(b + o.sni + 2, be16(b + o.sni + 2) + 1));
			CORRUPT("sni ext length - 1", BAD,
			    put16(b + o.sni + 2, be16(b + o.sni + 2) - 1));
			CORRUPT("sni list length - 1", BAD,
			    put16(b + o.sni + 4, be16(b + o.sni + 4) - 1));
			CORRUPT("sni name length + 1", BAD,
			    put16(b + nl, be16(b + nl) + 1));
			CORRUPT("sni name length - 1", BAD,
			    put16(b + nl, be16(b + nl) - 1));
			CORRUPT("sni NUL", BAD, b[nl + 3] = 0);
			CORRUPT("sni space", BAD, b[nl + 3] = ' ');
			CORRUPT("sni 0xff", BAD, b[nl + 4] = 0xff);
			CORRUPT("sni other name type", OK, b[nl - 1] = 1);
			/* another extension renamed server_name */
			size_t other = o.exts + 2;

			if (other == o.sni)
				other += 4 + be16(b + other + 2);
			CORRUPT("duplicate sni ext", BAD,
			    memcpy(b + other, b + o.sni, 2));
		}
		if (o.alpn != 0) {
			CORRUPT("alpn list + 1", BAD,
			    put16(b + o.alpn + 4, be16(b + o.alpn + 4) + 1));
			CORRUPT("alpn proto 0", BAD, b[o.alpn + 6] = 0);
			CORRUPT("alpn proto too long", BAD, b[o.alpn + 6] += 1);
			CORRUPT("alpn empty list", BAD,
			    put16(b + o.alpn + 4, 0));
		}
#undef CORRUPT
	}
	/* The SNI is read from the right place: change one letter. */
	len = load_seed("openssl_sni.bin", b, sizeof(b));
	ch_walk(b, len, &o);
	if (o.sni != 0) {
		b[o.sni + 9] = 'y';
		CHECK_INT(tls_parse_client_hello(b, len, &ch), OK);
		CHECK_STR(ch.sni, "y.test");
	}
}

/* A small ClientHello builder for what no client sends. */
struct bld {
	uint8_t	b[BUFMAX];
	size_t	n;
};

static void
b8(struct bld *x, unsigned v)
{
	x->b[x->n++] = (uint8_t)v;
}

static void
b16(struct bld *x, size_t v)
{
	b8(x, (unsigned)(v >> 8) & 0xff);
	b8(x, (unsigned)v & 0xff);
}

static void
bmem(struct bld *x, const void *p, size_t n)
{
	memcpy(x->b + x->n, p, n);
	x->n += n;
}

/* Field sizes of the built hellos; tests change them one at a time. */
static size_t build_sid = 32, build_cs = 4, build_cm = 1;

/* Records of at most frag bytes around a hello whose extensions are given. */
static size_t
build(uint8_t *out, const struct bld *ext, int with_ext, size_t frag)
{
	static struct bld m;
	size_t off, n, o = 0, body;

	m.n = 0;
	b8(&m, 1);
	b8(&m, 0);
	b16(&m, 0);		/* length, patched below */
	b16(&m, 0x0303);
	memset(m.b + m.n, 0x42, 32);
	m.n += 32;
	b8(&m, (unsigned)build_sid);
	memset(m.b + m.n, 0x17, build_sid);
	m.n += build_sid;
	b16(&m, build_cs);
	memset(m.b + m.n, 0x13, build_cs);
	m.n += build_cs;
	b8(&m, (unsigned)build_cm);
	memset(m.b + m.n, 0, build_cm);
	m.n += build_cm;
	if (with_ext) {
		b16(&m, ext->n);
		bmem(&m, ext->b, ext->n);
	}
	body = m.n - 4;
	m.b[1] = (uint8_t)(body >> 16);
	put16(m.b + 2, body & 0xffff);
	for (off = 0; off < m.n; off += n) {
		n = m.n - off < frag ? m.n - off : frag;
		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x01;
		put16(out + o, n);
		o += 2;
		memcpy(out + o, m.b + off, n);
		o += n;
	}
	return o;
}

static void
ext_sni(struct bld *e, const char *name, size_t nlen)
{
	b16(e, 0);
	b16(e, 2 + 3 + nlen);
	b16(e, 3 + nlen);
	b8(e, 0);
	b16(e, nlen);
	bmem(e, name, nlen);
}

static void
ext_alpn(struct bld *e, const char *const *protos)
{
	size_t i, len = 0;

	for (i = 0; protos[i] != NULL; i++)
		len += 1 + strlen(protos[i]);
	b16(e, 16);
	b16(e, 2 + len);
	b16(e, len);
	for (i = 0; protos[i] != NULL; i++) {
		b8(e, (unsigned)strlen(protos[i]));
		bmem(e, protos[i], strlen(protos[i]));
	}
}

static void
ext_raw(struct bld *e, unsigned type, const void *data, size_t n)
{
	b16(e, type);
	b16(e, n);
	bmem(e, data, n);
}

static void
test_synthetic(void)
{
	static uint8_t out[BUFMAX];
	static struct bld e;
	static char name[300];
	static const char *const h2only[] = { "h2", NULL };
	static const char *const many[] = { "spdy/3", "http/1.0", "h2c",
	    "http/1.1", "h3", NULL };
	static const char *const odd[] = { "http/1.1x", "h", "H2", NULL };
	struct tls_client_hello ch;
	size_t n;

#define BUILD(...) do { e.n = 0; __VA_ARGS__; } while (0)

	/* minimal, no extensions */
	n = build(out, &e, 0, 16384);
	CHECK_INT(parse_all_prefixes(out, n, OK, &ch), OK);
	CHECK(!ch.has_sni && !ch.has_alpn && ch.consumed == n);
	/* field sizes at and past their bounds, framed consistently */
	{
		static const struct {
			size_t	*field, val;
			int	 want;
		} f[] = {
			{ &build_sid, 0, OK }, { &build_sid, 32, OK },
			{ &build_sid, 33, BAD }, { &build_sid, 255, BAD },
			{ &build_cs, 2, OK }, { &build_cs, 3, BAD },
			{ &build_cs, 0, BAD }, { &build_cs, 30000, OK }, { &build_cs, 65534, BAD },
			{ &build_cm, 0, BAD }, { &build_cm, 255, OK },
		};
		size_t i, keep;

		for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
			keep = *f[i].field;
			*f[i].field = f[i].val;
			BUILD(ext_sni(&e, "f.test", 6));
			n = build(out, &e, 1, 16384);
			CHECK_MSG(tls_parse_client_hello(out, n, &ch) ==
			    f[i].want, "field case %zu", i);
			*f[i].field = keep;
		}
	}
	/* empty extension block */
	BUILD();
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);

	/* host names of 1 and 255 bytes pass, 0 and 256 do not */
	memset(name, 'a', sizeof(name));
	BUILD(ext_sni(&e, name, 255));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK_INT(ch.sni_len, 255);
	CHECK_INT(strlen(ch.sni), 255);
	BUILD(ext_sni(&e, "a", 1));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK_STR(ch.sni, "a");
	BUILD(ext_sni(&e, name, 256));
	n = build(out, &e, 1, 16384);
	CHECK_INT(parse_all_prefixes(out, n, BAD, &ch), BAD);
	BUILD(ext_sni(&e, name, 0));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	/* NUL inside the name */
	BUILD(ext_sni(&e, "a\0b.test", 8));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	/* two host_names in one list */
	BUILD(b16(&e, 0); b16(&e, 2 + 2 * 6); b16(&e, 2 * 6);
	    b8(&e, 0); b16(&e, 3); bmem(&e, "a.b", 3);
	    b8(&e, 0); b16(&e, 3); bmem(&e, "c.d", 3));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	/* an unknown name type beside the host_name is skipped */
	BUILD(b16(&e, 0); b16(&e, 2 + 2 * 6); b16(&e, 2 * 6);
	    b8(&e, 7); b16(&e, 3); bmem(&e, "x.y", 3);
	    b8(&e, 0); b16(&e, 3); bmem(&e, "c.d", 3));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK_STR(ch.sni, "c.d");
	/* empty server_name extension (what servers send) */
	BUILD(ext_raw(&e, 0, "", 0));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	/* two server_name extensions */
	BUILD(ext_sni(&e, "a.test", 6); ext_sni(&e, "b.test", 6));
	n = build(out, &e, 1, 16384);
	CHECK_INT(parse_all_prefixes(out, n, BAD, &ch), BAD);
	/* any duplicated extension type */
	BUILD(ext_raw(&e, 0xff01, "\0", 1); ext_sni(&e, "a.test", 6);
	    ext_raw(&e, 0xff01, "\0", 1));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	BUILD(ext_raw(&e, 0xffff, "", 0); ext_raw(&e, 0xffff, "", 0));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	BUILD(ext_raw(&e, 0xffff, "", 0); ext_raw(&e, 0xfffe, "", 0));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);

	/* ALPN */
	BUILD(ext_alpn(&e, h2only));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK(ch.has_alpn && ch.alpn_h2 && !ch.alpn_http11);
	BUILD(ext_alpn(&e, many); ext_sni(&e, "m.test", 6));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK(ch.has_alpn && !ch.alpn_h2 && ch.alpn_http11);
	CHECK_STR(ch.sni, "m.test");
	BUILD(ext_alpn(&e, odd));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK(ch.has_alpn && !ch.alpn_h2 && !ch.alpn_http11);
	BUILD(ext_raw(&e, 16, "\0\0", 2));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	BUILD(ext_raw(&e, 16, "\0\3\2h2", 5));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	BUILD(ext_raw(&e, 16, "\0\4\2h2\0", 6));
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	BUILD(ext_raw(&e, 16, "\0\3\2h2\0", 6));	/* trailing byte */
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);

	/* a 40 KB hello (padding) over three records */
	BUILD(ext_sni(&e, "big.test", 8); b16(&e, 21); b16(&e, 40000);
	    memset(e.b + e.n, 0, 40000); e.n += 40000);
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
	CHECK_STR(ch.sni, "big.test");
	CHECK_INT(ch.consumed, n);
	CHECK_INT(tls_parse_client_hello(out, n - 1, &ch), NEED);
	/* over TLS_CH_MAX_LEN: refused as soon as its length is seen */
	BUILD(ext_sni(&e, "big.test", 8); b16(&e, 21); b16(&e, 65500);
	    memset(e.b + e.n, 0, 65500); e.n += 65500);
	n = build(out, &e, 1, 16384);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	CHECK_INT(tls_parse_client_hello(out, 9, &ch), BAD);
	CHECK_INT(tls_parse_client_hello(out, 8, &ch), NEED);

	/* records: trailing bytes after the hello inside its record */
	BUILD(ext_sni(&e, "a.test", 6));
	n = build(out, &e, 1, 16384);
	memcpy(out + n, "\x0e\0\0\0", 4);	/* ServerHelloDone-like */
	put16(out + 3, be16(out + 3) + 4);
	CHECK_INT(parse_all_prefixes(out, n + 4, BAD, &ch), BAD);
	/* a record over 16384 + 2048 bytes */
	BUILD(ext_sni(&e, "a.test", 6); b16(&e, 21); b16(&e, 19000);
	    memset(e.b + e.n, 0, 19000); e.n += 19000);
	n = build(out, &e, 1, 20000);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), BAD);
	n = build(out, &e, 1, 16384 + 2048);
	CHECK_INT(tls_parse_client_hello(out, n, &ch), OK);
#undef BUILD
}

static void
test_not_tls(void)
{
	static const struct {
		const char	*s;
		size_t		 len;
		int		 want;
	} c[] = {
		{ "", 0, NEED },
		{ "\x16", 1, NEED },
		{ "\x16\x03", 2, NEED },
		{ "\x16\x03\x01", 3, NEED },
		{ "\x16\x03\x01\x02", 4, NEED },
		{ "\x16\x03\x01\x02\x00", 5, NEED },
		{ "\x16\x03\x01\x00\x00", 5, BAD },
		{ "\x16\x03\x01\xff\xff", 5, BAD },
		{ "\x16\x03\x05", 3, BAD },
		{ "\x16\x03\x01\x00\x04\x02", 6, BAD },
		{ "\x16\x04", 2, NOTTLS },
		{ "\x16\x00", 2, NOTTLS },
		{ "G", 1, NOTTLS },
		{ "GET / HTTP/1.1\r\n", 16, NOTTLS },
		{ "CONNECT a:1 HTTP/1.1\r\n", 22, NOTTLS },
		{ "SSH-2.0-OpenSSH_9.2\r\n", 21, NOTTLS },
		{ "\x80\x2e\x01\x03\x01\x00\x15", 7, NOTTLS },	/* SSLv2 */
		{ "\x15\x03\x03\x00\x02\x02\x28", 7, NOTTLS },	/* alert */
		{ "\x17\x03\x03\x00\x01\x00", 6, NOTTLS },
		{ "\x14\x03\x03\x00\x01\x01", 6, NOTTLS },
		{ "\0\0\0\0", 4, NOTTLS },
	};
	struct tls_client_hello ch;
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		CHECK_MSG(tls_parse_client_hello((const uint8_t *)c[i].s,
		    c[i].len, &ch) == c[i].want, "not-tls case %zu", i);
}

/* What begins as TLS whatever its record: the first-bytes check's TLS. */
static void
test_record_like(void)
{
	static const struct {
		const char	*hex;
		int		 want;
	} tc[] = {
		{ "", -1 },
		{ "14", -1 },
		{ "1403030000", 1 },	/* empty change_cipher_spec */
		{ "1503030002015a", 1 },/* warning alert */
		{ "16030100", 1 },	/* handshake */
		{ "1703030000", 1 },	/* application_data */
		{ "1803030000", 1 },	/* heartbeat */
		{ "1403", 1 },
		{ "1300", 0 },
		{ "1900", 0 },
		{ "1401", 0 },		/* major version other than 3 */
		{ "802e", -1 },
		{ "802e0103", 1 },	/* SSLv2-compatible ClientHello */
		{ "802e0203", 0 },
		{ "802e0102", 0 },
		{ "5353482d", 0 },	/* "SSH-" */
		{ "474554", 0 },	/* "GET" */
		{ "00000008", 0 },	/* a length-prefixed binary protocol */
	};
	uint8_t b[16];
	size_t i, k, n;

	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		n = strlen(tc[i].hex) / 2;
		for (k = 0; k < n; k++)
			sscanf(tc[i].hex + 2 * k, "%2hhx", &b[k]);
		CHECK_MSG(tls_record_like(b, n) == tc[i].want,
		    "tls_record_like(%s) = %d", tc[i].hex, tls_record_like(b, n));
	}
}

int
main(void)
{
	test_seeds();
	test_corrupt();
	test_synthetic();
	test_not_tls();
	test_record_like();
	return check_summary();
}
