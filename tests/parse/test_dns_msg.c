/*
 * Table-driven tests of the pure DNS message parser and writer: headers,
 * names and compression (loops, self and forward pointers, hop limits),
 * truncated and oversize input, EDNS and EDE round trips, TC behaviour;
 * CNAME chains read from upstream answers and written in ours.
 */
#include <arpa/inet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parse/dns_msg.h"

/* ---- building messages from a compact notation ---- */

struct buf {
	uint8_t	b[8192];
	size_t	len;
};

/*
 * Tokens separated by spaces: two hex digits are one byte, 'word is the
 * word's bytes. "00 01 03 'www 00" is 0x00 0x01 0x03 w w w 0x00.
 */
static void
hex(struct buf *m, const char *s)
{
	unsigned int v;

	m->len = 0;
	while (*s != '\0') {
		if (*s == ' ') {
			s++;
		} else if (*s == '\'') {
			for (s++; *s != '\0' && *s != ' '; s++)
				m->b[m->len++] = (uint8_t)*s;
		} else {
			if (sscanf(s, "%2x", &v) != 1)
				abort();
			m->b[m->len++] = (uint8_t)v;
			s += 2;
		}
	}
}

static void
add8(struct buf *m, unsigned int v)
{
	m->b[m->len++] = (uint8_t)v;
}

static void
add16(struct buf *m, unsigned int v)
{
	add8(m, v >> 8);
	add8(m, v & 0xff);
}

static void
addname(struct buf *m, const char *name)
{
	const char *p = name, *dot;
	size_t l;

	while (*p != '\0') {
		dot = strchr(p, '.');
		l = dot ? (size_t)(dot - p) : strlen(p);
		add8(m, (unsigned int)l);
		memcpy(m->b + m->len, p, l);
		m->len += l;
		p += l;
		if (*p == '.')
			p++;
	}
	add8(m, 0);
}

/*
 * Parse from a heap copy of exactly len bytes, so that under ASan a read
 * one byte past the message is caught.
 */
static int
parse_exact(const uint8_t *buf, size_t len, struct dns_msg *m)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	if (copy == NULL)
		abort();
	memcpy(copy, buf, len);
	rc = dns_msg_parse(copy, len, m);
	free(copy);
	return rc;
}

/* A query: header with flags RD, one question, and OPT when udp != 0. */
static void
query(struct buf *m, uint16_t id, const char *name, uint16_t qtype,
    unsigned int udp, int dnssec_ok)
{
	m->len = 0;
	add16(m, id);
	add16(m, 0x0100);
	add16(m, 1);
	add16(m, 0);
	add16(m, 0);
	add16(m, udp ? 1 : 0);
	addname(m, name);
	add16(m, qtype);
	add16(m, 1);
	if (udp) {
		add8(m, 0);
		add16(m, DNS_TYPE_OPT);
		add16(m, udp);
		add16(m, 0);
		add16(m, dnssec_ok ? 0x8000 : 0);
		add16(m, 0);
	}
}

#define HDR_Q1		"ab cd 01 00 00 01 00 00 00 00 00 00 "
#define HDR_Q1_AN1	"ab cd 81 80 00 01 00 01 00 00 00 00 "
#define HDR_Q1_AR1	"ab cd 01 00 00 01 00 00 00 00 00 01 "
#define HDR_Q1_AR2	"ab cd 01 00 00 01 00 00 00 00 00 02 "
#define Q_A		"00 01 00 01 "
#define QNAME_A		"01 'a 00 "	/* at 12 */
#define OPT(udp, ttl, rdlen) "00 00 29 " udp " " ttl " " rdlen " "
#define RR_A(name)	name " 00 01 00 01 00 00 00 3c 00 04 01 02 03 04"

struct parse_case {
	const char	*what;
	const char	*msg;
	int		 rc;
	const char	*qname;		/* for OK with a question */
	uint16_t	 qtype;
	int		 has_edns;
	uint16_t	 udp;
	int		 dnssec_ok;
	uint8_t		 version;
	const char	*an_name;	/* first answer's owner, when there is one */
};

#define SHORT(w, m)	{ .what = (w), .msg = (m), .rc = DNS_MSG_SHORT }
#define BAD(w, m)	{ .what = (w), .msg = (m), .rc = DNS_MSG_FORMERR }
#define OK(w, m, name, type, ...) { .what = (w), .msg = (m),		\
	.rc = DNS_MSG_OK, .qname = (name), .qtype = (type), __VA_ARGS__ }
#define EDNS(u, d)	.has_edns = 1, .udp = (u), .dnssec_ok = (d)

static const struct parse_case parse_cases[] = {
	SHORT("empty", ""),
	SHORT("11 bytes", "ab cd 01 00 00 01 00 00 00 00 00"),
	{ .what = "header only, no question",
	    .msg = "ab cd 01 00 00 00 00 00 00 00 00 00", .rc = DNS_MSG_OK },
	OK("A query", HDR_Q1 "03 'www 07 'Example 03 'com 00 " Q_A,
	    "www.Example.com", 1, .version = 0),
	BAD("two questions", "ab cd 01 00 00 02 00 00 00 00 00 00 "
	    QNAME_A Q_A QNAME_A Q_A),
	BAD("question count but no question", HDR_Q1),
	BAD("name without its end", HDR_Q1 "03 'www 07 'exam"),
	BAD("name without root label", HDR_Q1 "03 'www"),
	BAD("label one byte short", HDR_Q1 "03 'ww"),
	BAD("qtype cut", HDR_Q1 QNAME_A "00 01 00"),
	BAD("label type 0x40", HDR_Q1 "41 'a 00 " Q_A),
	BAD("label type 0x80", HDR_Q1 "80 'a 00 " Q_A),
	BAD("label longer than the data", HDR_Q1 "3f 'abc 00 " Q_A),
	OK("root name", HDR_Q1 "00 00 02 00 01", ".", 2, .version = 0),
	OK("escaped bytes", HDR_Q1 "06 'a.b 00 5c 07 00 " Q_A,
	    "a\\.b\\000\\\\\\007", 1, .version = 0),
	BAD("pointer to self in question", HDR_Q1 "c0 0c " Q_A),
	BAD("pointer forward in question", HDR_Q1 "c0 12 " Q_A "01 'a 00"),
	BAD("pointer into the header", HDR_Q1 "c0 02 " Q_A),
	BAD("pointer cut", HDR_Q1 "01 'a c0"),
	BAD("pointer past the end", HDR_Q1 "ff ff " Q_A),
	OK("answer compressed to the question",
	    HDR_Q1_AN1 "03 'www 07 'example 03 'com 00 " Q_A RR_A("c0 0c"),
	    "www.example.com", 1, .an_name = "www.example.com"),
	OK("answer: label then pointer back",
	    HDR_Q1_AN1 "07 'example 03 'com 00 " Q_A RR_A("03 'www c0 0c"),
	    "example.com", 1, .an_name = "www.example.com"),
	BAD("answer: pointer to itself", HDR_Q1_AN1 QNAME_A Q_A RR_A("c0 13")),
	BAD("answer: label then pointer to its own start",
	    HDR_Q1_AN1 QNAME_A Q_A RR_A("02 'bb c0 13")),
	BAD("answer: pointer forward", HDR_Q1_AN1 QNAME_A Q_A RR_A("c0 30")),
	/* 12: "a" then a pointer to 21, whose pointer goes back to 12. */
	BAD("mutual pointers", HDR_Q1_AN1 "01 'a c0 15 " Q_A RR_A("c0 0c")),
	OK("pointer to a name that points back",
	    "ab cd 81 80 00 01 00 02 00 00 00 00 " QNAME_A Q_A
	    RR_A("01 'x c0 0c") " " RR_A("c0 13"), "a", 1, .an_name = "x.a"),
	BAD("rdata longer than the message", HDR_Q1_AN1 QNAME_A Q_A
	    "c0 0c 00 01 00 01 00 00 00 3c 00 05 01 02 03 04"),
	BAD("record fixed part cut", HDR_Q1_AN1 QNAME_A Q_A "c0 0c 00 01 00"),
	BAD("answer count, no answer", HDR_Q1_AN1 QNAME_A Q_A),
	BAD("trailing byte", HDR_Q1 QNAME_A Q_A "00"),
	OK("EDNS 4096 DO", HDR_Q1_AR1 QNAME_A Q_A OPT("10 00", "00 00 80 00",
	    "00 00"), "a", 1, EDNS(4096, 1)),
	OK("EDNS 1232", HDR_Q1_AR1 QNAME_A Q_A OPT("04 d0", "00 00 00 00",
	    "00 00"), "a", 1, EDNS(1232, 0)),
	OK("EDNS version 1", HDR_Q1_AR1 QNAME_A Q_A OPT("10 00",
	    "00 01 00 00", "00 00"), "a", 1, EDNS(4096, 0), .version = 1),
	OK("EDNS with a cookie", HDR_Q1_AR1 QNAME_A Q_A OPT("10 00",
	    "00 00 00 00", "00 0c") "00 0a 00 08 01 02 03 04 05 06 07 08",
	    "a", 1, EDNS(4096, 0)),
	BAD("two OPT records", HDR_Q1_AR2 QNAME_A Q_A OPT("10 00",
	    "00 00 00 00", "00 00") OPT("10 00", "00 00 00 00", "00 00")),
	BAD("OPT in the answer section", HDR_Q1_AN1 QNAME_A Q_A OPT("10 00",
	    "00 00 00 00", "00 00")),
	BAD("OPT owner not root", HDR_Q1_AR1 QNAME_A Q_A
	    "c0 0c 00 29 10 00 00 00 00 00 00 00"),
	BAD("OPT option cut", HDR_Q1_AR1 QNAME_A Q_A OPT("10 00",
	    "00 00 00 00", "00 03") "00 0a 00"),
	BAD("OPT option longer than rdata", HDR_Q1_AR1 QNAME_A Q_A
	    OPT("10 00", "00 00 00 00", "00 06") "00 0a 00 08 01 02"),
	BAD("EDE option without info code", HDR_Q1_AR1 QNAME_A Q_A
	    OPT("10 00", "00 00 00 00", "00 05") "00 0f 00 01 00"),
	BAD("OPT rdata cut", HDR_Q1_AR1 QNAME_A Q_A OPT("10 00",
	    "00 00 00 00", "00 04") "00 0a"),
};

static void
test_parse_table(void)
{
	const struct parse_case *c;
	struct dns_msg *m = malloc(sizeof(*m));
	struct dns_rr rr;
	struct buf b;
	size_t i, off;
	int rc;

	for (i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		c = &parse_cases[i];
		hex(&b, c->msg);
		rc = parse_exact(b.b, b.len, m);
		CHECK_MSG(rc == c->rc, "%s: rc %d, want %d", c->what, rc,
		    c->rc);
		if (rc != DNS_MSG_OK)
			continue;
		CHECK_MSG(m->hdr.id == (b.b[0] << 8 | b.b[1]), "%s: id",
		    c->what);
		if (c->qname != NULL) {
			CHECK_MSG(m->has_question &&
			    strcmp(m->qname.text, c->qname) == 0 &&
			    m->qname.text_len == strlen(c->qname),
			    "%s: qname \"%s\"", c->what, m->qname.text);
			CHECK_MSG(m->qtype == c->qtype, "%s: qtype %u",
			    c->what, m->qtype);
		} else
			CHECK_MSG(!m->has_question, "%s: question", c->what);
		CHECK_MSG(m->has_edns == c->has_edns && (!c->has_edns ||
		    (m->edns_udp == c->udp && m->edns_do == c->dnssec_ok &&
		    m->edns_version == c->version)), "%s: edns %d %u %d %u",
		    c->what, m->has_edns, m->edns_udp, m->edns_do,
		    m->edns_version);
		if (c->an_name != NULL) {
			off = m->an_off;
			CHECK_MSG(dns_rr_read(b.b, b.len, &off, &rr) == 0 &&
			    strcmp(rr.name.text, c->an_name) == 0 &&
			    rr.type == DNS_TYPE_A && rr.ttl == 60 &&
			    rr.rdlen == 4, "%s: answer \"%s\"", c->what,
			    rr.name.text);
		}
	}
	free(m);
}

/* Names at and over the 255-byte and 63-byte limits, built in code. */
static void
test_name_limits(void)
{
	struct dns_msg *m = malloc(sizeof(*m));
	struct buf b;
	char name[400];
	size_t i, labels;
	int rc;

	/* 63-byte label: fine; 4 x 63 + 3 = 255 bytes of text, 257 wire. */
	memset(name, 'a', 63);
	name[63] = '\0';
	query(&b, 1, name, 1, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_OK);
	CHECK_INT(m->qname.text_len, 63);
	CHECK_INT(m->qname.wire_len, 65);

	/* Wire length exactly 255: labels of 63, 63, 63, 61. */
	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.61s",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
	    "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
	query(&b, 1, name, 1, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_OK);
	CHECK_INT(m->qname.wire_len, 255);
	CHECK_STR(m->qname.text, name);
	/* One more byte: 256. */
	snprintf(name + strlen(name), sizeof(name) - strlen(name), "d");
	query(&b, 1, name, 1, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_FORMERR);

	/* 127 one-byte labels = 255 wire bytes; 128 = 257. */
	for (labels = 127; labels <= 128; labels++) {
		for (i = 0; i < labels; i++) {
			name[2 * i] = 'x';
			name[2 * i + 1] = '.';
		}
		name[2 * labels - 1] = '\0';
		query(&b, 1, name, 1, 0, 0);
		rc = dns_msg_parse(b.b, b.len, m);
		CHECK_MSG(rc == (labels == 127 ? DNS_MSG_OK :
		    DNS_MSG_FORMERR), "%zu labels: %d", labels, rc);
	}

	/* A 64-byte label cannot even be written: 0x40 is a label type. */
	memset(name, 'a', 64);
	name[64] = '\0';
	query(&b, 1, name, 1, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_FORMERR);

	/* Escaping: a 63-byte label of 0xff bytes becomes 252 characters. */
	hex(&b, HDR_Q1);
	add8(&b, 63);
	memset(b.b + b.len, 0xff, 63);
	b.len += 63;
	add8(&b, 0);
	add16(&b, 1);
	add16(&b, 1);
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_OK);
	CHECK_INT(m->qname.text_len, 63 * 4);
	CHECK(strncmp(m->qname.text, "\\255\\255", 8) == 0);
	free(m);
}

/*
 * A chain of pointers, each to the one before it: allowed up to
 * DNS_PTR_HOPS_MAX hops, refused beyond; and a long chain costs at most
 * that many hops, never a loop.
 */
static void
test_pointer_hops(void)
{
	struct dns_name n;
	struct buf b;
	size_t start, off, hops;
	int rc;

	for (hops = DNS_PTR_HOPS_MAX - 1; hops <= DNS_PTR_HOPS_MAX + 1;
	    hops++) {
		hex(&b, HDR_Q1 QNAME_A Q_A);
		/* 12: "a"; then pointers at 19, 21, ... each to the last. */
		add8(&b, 0xc0);
		add8(&b, 12);
		while (b.len < 19 + 2 * hops) {
			add8(&b, 0xc0);
			add8(&b, (unsigned int)(b.len - 3));
		}
		start = b.len - 2;
		off = start;
		rc = dns_name_read(b.b, b.len, &off, &n);
		/* The last pointer leads through hops pointers to 12. */
		CHECK_MSG(rc == (hops <= DNS_PTR_HOPS_MAX ? 0 : -1),
		    "%zu hops: rc %d", hops, rc);
		if (rc == 0) {
			CHECK_STR(n.text, "a");
			CHECK_INT(off, start + 2);
		}
	}

	/* A pointer may not point to a byte past itself via earlier labels. */
	hex(&b, HDR_Q1 "01 'a 01 'b c0 0c " Q_A);
	off = 12;
	CHECK_INT(dns_name_read(b.b, b.len, &off, &n), -1);
	/* But reading the name at 14 ("b" then -> 12 "a" -> 14) loops too. */
	off = 14;
	CHECK_INT(dns_name_read(b.b, b.len, &off, &n), -1);
	/* From a later offset, pointing back to 14, is fine only if 14 ends. */
	hex(&b, HDR_Q1 "01 'a 00 01 'b c0 0c " Q_A);
	off = 15;
	CHECK_INT(dns_name_read(b.b, b.len, &off, &n), 0);
	CHECK_STR(n.text, "b.a");
	CHECK_INT(off, 19);
	CHECK_INT(n.wire_len, 5);
	CHECK(memcmp(n.wire, "\001b\001a\000", 5) == 0);
}

/* Every prefix of a valid message with records fails cleanly. */
static void
test_truncated_prefixes(void)
{
	struct dns_msg *m = malloc(sizeof(*m));
	struct buf b;
	size_t cut;
	int rc;

	hex(&b, "ab cd 81 80 00 01 00 02 00 00 00 01 03 'www 07 'example 03 "
	    "'com 00 " Q_A RR_A("c0 0c") " " RR_A("03 'cdn c0 10") " "
	    OPT("10 00", "00 00 80 00", "00 0b") "00 0f 00 07 00 0f 'hello");
	CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_OK);
	CHECK(m->has_ede && m->ede_code == 15 && m->ede_text_len == 5 &&
	    memcmp(m->ede_text, "hello", 5) == 0);
	for (cut = 0; cut < b.len; cut++) {
		rc = parse_exact(b.b, cut, m);
		CHECK_MSG(rc == (cut < DNS_HDR_LEN ? DNS_MSG_SHORT :
		    DNS_MSG_FORMERR), "cut at %zu: %d", cut, rc);
	}
	free(m);
}

static void
test_tcp_frame(void)
{
	static const struct {
		const char	*in;
		ssize_t		 rc;
		size_t		 len;
	} cases[] = {
		{ "", 0, 0 },
		{ "00", 0, 0 },
		{ "00 00", -1, 0 },
		{ "00 0b 00 00 00 00 00 00 00 00 00 00 00", -1, 0 },
		{ "00 0c 00 00 00 00 00 00 00 00 00 00 00", 0, 0 },
		{ "00 0c 00 00 00 00 00 00 00 00 00 00 00 00", 14, 12 },
		{ "00 0c 00 00 00 00 00 00 00 00 00 00 00 00 ff ff", 14, 12 },
		{ "ff ff 00 00", 0, 0 },
	};
	struct buf b;
	size_t i, len;
	ssize_t rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hex(&b, cases[i].in);
		len = 0;
		rc = dns_tcp_frame(b.b, b.len, &len);
		CHECK_MSG(rc == cases[i].rc && (rc <= 0 ||
		    len == cases[i].len), "frame %zu: %zd %zu", i, rc, len);
	}
}

static void
test_udp_limit(void)
{
	static const struct {
		unsigned int	udp;	/* 0: no EDNS */
		size_t		limit;
	} cases[] = {
		{ 0, 512 }, { 1, 512 }, { 511, 512 }, { 512, 512 },
		{ 1232, 1232 }, { 4096, 4096 }, { 4097, 4096 }, { 65535, 4096 },
	};
	struct dns_msg *m = malloc(sizeof(*m));
	struct buf b;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		query(&b, 7, "a.test", 1, cases[i].udp, 0);
		CHECK_INT(dns_msg_parse(b.b, b.len, m), DNS_MSG_OK);
		CHECK_MSG(dns_udp_limit(m) == cases[i].limit, "udp %u: %zu",
		    cases[i].udp, dns_udp_limit(m));
	}
	free(m);
}

static void
addr(struct netaddr *a, const char *s)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->a) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, s, a->a) == 1)
		a->family = AF_INET6;
	else
		abort();
}

/* What a reply looked like when parsed back. */
struct seen {
	struct dns_header h;
	int		  rc;
	size_t		  len;
	size_t		  nans;
	char		  ans[64][64];
	uint32_t	  ttl;
	char		  owner[64];
	int		  has_edns;
	int		  edns_do;
	uint8_t		  ext_rcode;
	int		  has_ede;
	uint16_t	  ede_code;
	char		  ede_text[300];
};

static void
parse_back(const uint8_t *out, ssize_t len, struct seen *s)
{
	struct dns_msg *m = malloc(sizeof(*m));
	struct dns_rr rr;
	size_t off, i;

	memset(s, 0, sizeof(*s));
	s->len = len > 0 ? (size_t)len : 0;
	s->rc = len > 0 ? dns_msg_parse(out, (size_t)len, m) : -99;
	if (s->rc != DNS_MSG_OK) {
		free(m);
		return;
	}
	s->h = m->hdr;
	off = m->an_off;
	for (i = 0; i < m->hdr.ancount && i < 64; i++) {
		if (dns_rr_read(out, (size_t)len, &off, &rr) == -1)
			break;
		inet_ntop(rr.rdlen == 4 ? AF_INET : AF_INET6,
		    out + rr.rdata_off, s->ans[i], sizeof(s->ans[i]));
		s->ttl = rr.ttl;
		snprintf(s->owner, sizeof(s->owner), "%.63s", rr.name.text);
		s->nans++;
	}
	s->has_edns = m->has_edns;
	s->edns_do = m->edns_do;
	s->ext_rcode = m->edns_ext_rcode;
	s->has_ede = m->has_ede;
	s->ede_code = m->ede_code;
	memcpy(s->ede_text, m->ede_text, m->ede_text_len);
	s->ede_text[m->ede_text_len] = '\0';
	free(m);
}

struct write_case {
	const char	*what;
	const char	*qname;
	uint16_t	 qtype;
	unsigned int	 udp;		/* 0: no EDNS */
	int		 dnssec_ok;
	int		 rcode;
	const char	*addrs;		/* comma-separated */
	int		 gen;		/* or this many 198.51.100.x */
	int		 ede;
	const char	*ede_text;
	size_t		 limit;		/* 0: dns_udp_limit() */
	/* expected */
	ssize_t		 want_rc;	/* 0: a length, -1: failure */
	int		 tc;
	size_t		 nans;
	const char	*first;
	int		 want_ede;
	size_t		 ede_len;	/* 0: strlen(ede_text) */
};

#define W(w, name, type, u, d, rc, list, ...) { .what = (w), .qname = (name), \
	.qtype = (type), .udp = (u), .dnssec_ok = (d), .rcode = (rc),	\
	.addrs = (list), __VA_ARGS__ }

static const struct write_case write_cases[] = {
	W("A from a mixed list", "WwW.Example.com", DNS_TYPE_A, 0, 0, 0,
	    "198.51.100.1,2001:db8::1,198.51.100.2", .nans = 2,
	    .first = "198.51.100.1"),
	W("AAAA from a mixed list", "v6.test", DNS_TYPE_AAAA, 1232, 0, 0,
	    "198.51.100.1,2001:db8::1,2001:db8::2", .nans = 2,
	    .first = "2001:db8::1"),
	W("AAAA, IPv4 only: NODATA", "v4.test", DNS_TYPE_AAAA, 0, 0, 0,
	    "198.51.100.1"),
	W("MX never gets addresses", "mx.test", DNS_TYPE_MX, 0, 0, 0,
	    "198.51.100.1"),
	W("NXDOMAIN with EDE, EDNS", "no.test", DNS_TYPE_A, 1232, 1, 3, NULL,
	    .ede = 1, .ede_text = "blocked by policy p: policy-deny",
	    .want_ede = 1),
	W("NXDOMAIN with EDE asked, no EDNS", "no.test", DNS_TYPE_A, 0, 0, 3,
	    NULL, .ede = 1, .ede_text = "blocked"),
	W("EDE with empty text", "no.test", DNS_TYPE_A, 4096, 0, 3, NULL,
	    .ede = 1, .ede_text = "", .want_ede = 1),
	W("32 A without EDNS: TC", "tcp.test", DNS_TYPE_A, 0, 0, 0, NULL,
	    .gen = 32, .tc = 1),
	/* 12 + 14 + 30 x 16 = 506 */
	W("30 A without EDNS: fits", "tcp.test", DNS_TYPE_A, 0, 0, 0, NULL,
	    .gen = 30, .nans = 30, .first = "198.51.100.0"),
	W("31 A without EDNS: TC", "tcp.test", DNS_TYPE_A, 0, 0, 0, NULL,
	    .gen = 31, .tc = 1),
	W("32 A, EDNS 511 counts as 512: TC", "tcp.test", DNS_TYPE_A, 511, 0,
	    0, NULL, .gen = 32, .tc = 1),
	W("32 A, EDNS 1232: fits", "tcp.test", DNS_TYPE_A, 1232, 0, 0, NULL,
	    .gen = 32, .nans = 32, .first = "198.51.100.0"),
	W("AAAA over TCP", "tcp.test", DNS_TYPE_AAAA, 0, 0, 0,
	    "2001:db8::1,2001:db8::2", .limit = DNS_MSG_MAX, .nans = 2),
	W("BADVERS needs EDNS", "a.test", DNS_TYPE_A, 0, 0, 16, NULL,
	    .want_rc = -1),
	W("BADVERS with EDNS", "a.test", DNS_TYPE_A, 1232, 0, 16, NULL),
	W("rcode out of range", "a.test", DNS_TYPE_A, 1232, 0, 4096, NULL,
	    .want_rc = -1),
	W("limit below a header", "a.test", DNS_TYPE_A, 0, 0, 0, NULL,
	    .limit = 11, .want_rc = -1),
	W("long EDE text is cut", "no.test", DNS_TYPE_A, 4096, 0, 3, NULL,
	    .ede = 1, .ede_text =
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "yyyy", .want_ede = 1, .ede_len = DNS_EDE_TEXT_MAX),
};

static void
test_write_table(void)
{
	const struct write_case *c;
	struct dns_msg *q = malloc(sizeof(*q));
	struct dns_reply r;
	struct netaddr addrs[64];
	struct seen *s = malloc(sizeof(*s));
	struct buf b;
	uint8_t out[DNS_MSG_MAX];
	char list[512], *tok, *save;
	size_t i, n, want_len;
	ssize_t len;

	for (i = 0; i < sizeof(write_cases) / sizeof(write_cases[0]); i++) {
		c = &write_cases[i];
		query(&b, (uint16_t)(0x1000 + i), c->qname, c->qtype, c->udp,
		    c->dnssec_ok);
		CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
		n = 0;
		if (c->addrs != NULL) {
			snprintf(list, sizeof(list), "%s", c->addrs);
			for (tok = strtok_r(list, ",", &save); tok != NULL;
			    tok = strtok_r(NULL, ",", &save))
				addr(&addrs[n++], tok);
		}
		for (; (int)n < c->gen; n++) {
			snprintf(list, sizeof(list), "198.51.100.%zu", n);
			addr(&addrs[n], list);
		}
		memset(&r, 0, sizeof(r));
		r.rcode = c->rcode;
		r.addrs = addrs;
		r.n = n;
		r.ttl = 42;
		r.ede = c->ede;
		r.ede_code = DNS_EDE_BLOCKED;
		r.ede_text = c->ede_text;
		r.limit = c->limit ? c->limit : dns_udp_limit(q);
		len = dns_reply_write(q, &r, out, sizeof(out));
		if (c->want_rc == -1) {
			CHECK_MSG(len == -1, "%s: %zd", c->what, len);
			continue;
		}
		CHECK_MSG(len > 0 && (size_t)len <= r.limit, "%s: len %zd",
		    c->what, len);
		parse_back(out, len, s);
		CHECK_MSG(s->rc == DNS_MSG_OK, "%s: parse back %d", c->what,
		    s->rc);
		if (s->rc != DNS_MSG_OK)
			continue;
		CHECK_MSG(s->h.id == 0x1000 + i, "%s: id", c->what);
		CHECK_MSG((s->h.flags & DNS_F_QR) && (s->h.flags & DNS_F_RA) &&
		    (s->h.flags & DNS_F_RD) && !(s->h.flags & DNS_F_AA),
		    "%s: flags %04x", c->what, s->h.flags);
		CHECK_MSG(DNS_F_RCODE(s->h.flags) == (c->rcode & 0xf) &&
		    s->ext_rcode == (c->rcode >> 4), "%s: rcode %u/%u",
		    c->what, DNS_F_RCODE(s->h.flags), s->ext_rcode);
		CHECK_MSG(!!(s->h.flags & DNS_F_TC) == c->tc, "%s: TC",
		    c->what);
		CHECK_MSG(s->h.qdcount == 1 && s->nans == c->nans &&
		    s->h.ancount == c->nans, "%s: %zu answers", c->what,
		    s->nans);
		if (c->nans > 0) {
			CHECK_MSG(s->ttl == 42 && strcmp(s->owner,
			    c->qname) == 0, "%s: owner %s", c->what,
			    s->owner);
		}
		if (c->first != NULL)
			CHECK_MSG(strcmp(s->ans[0], c->first) == 0,
			    "%s: first %s", c->what, s->ans[0]);
		CHECK_MSG(s->has_edns == (c->udp != 0) &&
		    s->edns_do == c->dnssec_ok, "%s: edns %d do %d",
		    c->what, s->has_edns, s->edns_do);
		CHECK_MSG(s->has_ede == c->want_ede, "%s: ede %d", c->what,
		    s->has_ede);
		if (c->want_ede) {
			want_len = c->ede_len ? c->ede_len :
			    strlen(c->ede_text);
			CHECK_MSG(s->ede_code == DNS_EDE_BLOCKED &&
			    strlen(s->ede_text) == want_len &&
			    strncmp(s->ede_text, c->ede_text, want_len) == 0,
			    "%s: ede %u \"%s\"", c->what, s->ede_code,
			    s->ede_text);
		}
		/* The question is echoed byte for byte, case included. */
		CHECK_MSG(memcmp(out + DNS_HDR_LEN, b.b + DNS_HDR_LEN,
		    q->qname.wire_len + 4) == 0, "%s: question", c->what);
	}
	free(q);
	free(s);
}

/* The largest name, EDNS 512 and a full EDE text: the text gives way. */
static void
test_ede_shrinks(void)
{
	struct dns_msg *q = malloc(sizeof(*q));
	struct seen *s = malloc(sizeof(*s));
	struct dns_reply r;
	struct buf b;
	uint8_t out[1024];
	char name[300], text[DNS_EDE_TEXT_MAX + 1];
	ssize_t len;

	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.61s",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
	    "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
	memset(text, 't', DNS_EDE_TEXT_MAX);
	text[DNS_EDE_TEXT_MAX] = '\0';
	/* A multi-byte character straddling the cut is not split. */
	memcpy(text + 223, "\xc3\xa9", 2);
	query(&b, 9, name, DNS_TYPE_A, 512, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
	memset(&r, 0, sizeof(r));
	r.rcode = DNS_RCODE_NXDOMAIN;
	r.ede = 1;
	r.ede_code = DNS_EDE_BLOCKED;
	r.ede_text = text;
	r.limit = dns_udp_limit(q);
	len = dns_reply_write(q, &r, out, sizeof(out));
	/* 12 + 259 + 11 + 6 = 288: 224 bytes of text would fit. */
	CHECK_INT(len, 511);
	parse_back(out, len, s);
	CHECK_INT(s->rc, DNS_MSG_OK);
	CHECK(s->has_ede && !(s->h.flags & DNS_F_TC));
	CHECK_INT(strlen(s->ede_text), 223);
	CHECK(strncmp(s->ede_text, text, 223) == 0);

	/* Too small a buffer is a failure, not a truncation. */
	r.limit = DNS_MSG_MAX;
	CHECK_INT(dns_reply_write(q, &r, out, 300), -1);
	free(q);
	free(s);
}

/* Replies to messages that are not proper questions. */
static void
test_error_replies(void)
{
	struct dns_msg *q = malloc(sizeof(*q));
	struct dns_reply r;
	struct dns_header h;
	struct buf b;
	uint8_t out[512];
	ssize_t len;

	/* Two questions: FORMERR, header copied, question not echoed. */
	hex(&b, "ab cd 09 10 00 02 00 00 00 00 00 00 " QNAME_A Q_A QNAME_A Q_A);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_FORMERR);
	memset(&r, 0, sizeof(r));
	r.rcode = DNS_RCODE_FORMERR;
	r.limit = 512;
	len = dns_reply_write(q, &r, out, sizeof(out));
	CHECK_INT(len, DNS_HDR_LEN);
	CHECK_INT(dns_header_parse(out, (size_t)len, &h), 0);
	CHECK_INT(h.id, 0xabcd);
	/* opcode 1, RD and CD copied; QR, RA set; rcode 1 */
	CHECK_INT(h.flags, 0x8000 | 0x0800 | 0x0100 | 0x0080 | 0x0010 | 1);
	CHECK(h.qdcount == 0 && h.ancount == 0 && h.arcount == 0);

	CHECK_STR(dns_type_name(1, (char *)out, 16), "A");
	CHECK_STR(dns_type_name(28, (char *)out, 16), "AAAA");
	CHECK_STR(dns_type_name(15, (char *)out, 16), "MX");
	CHECK_STR(dns_type_name(255, (char *)out, 16), "ANY");
	CHECK_STR(dns_type_name(999, (char *)out, 16), "TYPE999");
	free(q);
}

/* ---- CNAME chains: reading upstream answers, writing our own ---- */

/*
 * An upstream response to one question: records "owner TYPE data [ttl]"
 * separated by ';', TYPE A, AAAA or CNAME, names written out in full.
 */
static void
response(struct buf *m, const char *qname, uint16_t qtype, const char *recs)
{
	char list[2048], *rec, *save = NULL, f[4][300];
	uint8_t raw[16];
	size_t an_at, rdlen_at, start;
	unsigned int an = 0;
	int nf;

	m->len = 0;
	add16(m, 0x4242);
	add16(m, 0x8180);
	add16(m, 1);
	an_at = m->len;
	add16(m, 0);
	add16(m, 0);
	add16(m, 0);
	addname(m, qname);
	add16(m, qtype);
	add16(m, 1);
	snprintf(list, sizeof(list), "%s", recs);
	for (rec = strtok_r(list, ";", &save); rec != NULL;
	    rec = strtok_r(NULL, ";", &save)) {
		f[3][0] = '\0';
		nf = sscanf(rec, " %299s %299s %299s %299s", f[0], f[1], f[2],
		    f[3]);
		if (nf <= 0)
			continue;	/* after the last ';' */
		if (nf < 3)
			abort();
		addname(m, f[0]);
		add16(m, strcmp(f[1], "A") == 0 ? DNS_TYPE_A :
		    strcmp(f[1], "AAAA") == 0 ? DNS_TYPE_AAAA : DNS_TYPE_CNAME);
		add16(m, 1);
		add16(m, 0);	/* ttl, high half */
		add16(m, nf == 4 ? (unsigned int)strtoul(f[3], NULL, 0) : 60);
		if (nf == 4 && strtoul(f[3], NULL, 0) > 0xffff) {
			m->b[m->len - 4] = (uint8_t)(strtoul(f[3], NULL, 0) >> 24);
			m->b[m->len - 3] = (uint8_t)(strtoul(f[3], NULL, 0) >> 16);
		}
		rdlen_at = m->len;
		add16(m, 0);
		start = m->len;
		if (strcmp(f[1], "CNAME") == 0)
			addname(m, f[2]);
		else {
			if (inet_pton(strcmp(f[1], "A") == 0 ? AF_INET :
			    AF_INET6, f[2], raw) != 1)
				abort();
			memcpy(m->b + m->len, raw, strcmp(f[1], "A") == 0 ?
			    4 : 16);
			m->len += strcmp(f[1], "A") == 0 ? 4 : 16;
		}
		m->b[rdlen_at] = (uint8_t)((m->len - start) >> 8);
		m->b[rdlen_at + 1] = (uint8_t)(m->len - start);
		an++;
	}
	m->b[an_at] = (uint8_t)(an >> 8);
	m->b[an_at + 1] = (uint8_t)an;
}

/* The chain's names in presentation form, comma-separated. */
static void
chain_text(const struct dns_chain *c, char *out, size_t outlen)
{
	struct dns_name n;
	size_t i, off, w = 0;

	out[0] = '\0';
	for (i = 0; i < c->n; i++) {
		off = 0;
		if (dns_name_read(c->link[i].wire, c->link[i].wire_len, &off,
		    &n) == -1) {
			snprintf(out, outlen, "(bad name %zu)", i);
			return;
		}
		w += (size_t)snprintf(out + w, outlen - w, "%s%s",
		    i ? "," : "", n.text);
		if (w >= outlen)
			return;
	}
}

struct answer_case {
	const char	*what;
	const char	*qname;
	uint16_t	 qtype;
	const char	*recs;
	int		 rc;
	const char	*chain;		/* expected, comma-separated */
	size_t		 n;		/* addresses kept */
	const char	*first;
	size_t		 more;
	uint32_t	 ttl0;		/* the first link's TTL, when a chain */
};

#define L8	"a.test CNAME l1.test; l1.test CNAME l2.test; " \
	"l2.test CNAME l3.test; l3.test CNAME l4.test; " \
	"l4.test CNAME l5.test; l5.test CNAME l6.test; " \
	"l6.test CNAME l7.test; l7.test CNAME l8.test; "

#define AC(w, q, t, r, res, ...) { .what = (w), .qname = (q), .qtype = (t), \
	.recs = (r), .rc = (res), __VA_ARGS__ }
#define CH(c, n_, f, t)	.chain = (c), .n = (n_), .first = (f), .ttl0 = (t)

static const struct answer_case answer_cases[] = {
	AC("no CNAME", "a.test", DNS_TYPE_A, "a.test A 198.51.100.1",
	    DNS_ANSWER_OK, CH("", 1, "198.51.100.1", 0)),
	AC("chain in order", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test 30; b.test CNAME c.test; c.test A 198.51.100.2",
	    DNS_ANSWER_OK, CH("b.test,c.test", 1, "198.51.100.2", 30)),
	AC("chain in any order", "a.test", DNS_TYPE_A,
	    "c.test A 198.51.100.3; b.test CNAME c.test; a.test CNAME b.test",
	    DNS_ANSWER_OK, CH("b.test,c.test", 1, "198.51.100.3", 60)),
	AC("owners compared without case", "a.test", DNS_TYPE_A,
	    "A.TEST CNAME B.test; b.TEST A 198.51.100.4",
	    DNS_ANSWER_OK, CH("B.test", 1, "198.51.100.4", 60)),
	AC("addresses of the alias are not the canonical name's", "a.test",
	    DNS_TYPE_A, "a.test CNAME b.test; a.test A 203.0.113.9; "
	    "b.test A 198.51.100.5", DNS_ANSWER_OK,
	    CH("b.test", 1, "198.51.100.5", 60)),
	AC("a CNAME someone else owns is not followed", "a.test", DNS_TYPE_A,
	    "z.test CNAME evil.test; a.test A 198.51.100.6; "
	    "evil.test A 203.0.113.6", DNS_ANSWER_OK,
	    CH("", 1, "198.51.100.6", 0)),
	AC("two CNAMEs for one owner: the first", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test; a.test CNAME c.test; c.test A 203.0.113.7; "
	    "b.test A 198.51.100.7", DNS_ANSWER_OK,
	    CH("b.test", 1, "198.51.100.7", 60)),
	AC("a name its own alias", "a.test", DNS_TYPE_A,
	    "a.test CNAME A.test; a.test A 198.51.100.8", DNS_ANSWER_LOOP),
	AC("two names, a loop", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test; b.test CNAME a.test", DNS_ANSWER_LOOP),
	AC("a loop back into the chain", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test; b.test CNAME c.test; c.test CNAME b.test",
	    DNS_ANSWER_LOOP),
	AC("eight links", "a.test", DNS_TYPE_A, L8 "l8.test A 198.51.100.9",
	    DNS_ANSWER_OK, CH("l1.test,l2.test,l3.test,l4.test,l5.test,"
	    "l6.test,l7.test,l8.test", 1, "198.51.100.9", 60)),
	AC("nine links: too long", "a.test", DNS_TYPE_A,
	    L8 "l8.test CNAME l9.test; l9.test A 198.51.100.9",
	    DNS_ANSWER_LOOP),
	AC("a chain to no address: NODATA", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test", DNS_ANSWER_OK, CH("b.test", 0, NULL, 60)),
	AC("AAAA: A records are not kept", "a.test", DNS_TYPE_AAAA,
	    "a.test CNAME b.test; b.test A 198.51.100.10; "
	    "b.test AAAA 2001:db8::10", DNS_ANSWER_OK,
	    CH("b.test", 1, "2001:db8::10", 60)),
	AC("a TTL with the top bit set is 0", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test 0x80000010; b.test A 198.51.100.11",
	    DNS_ANSWER_OK, CH("b.test", 1, "198.51.100.11", 0)),
	AC("a big TTL is kept", "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test 0x12345; b.test A 198.51.100.11",
	    DNS_ANSWER_OK, CH("b.test", 1, "198.51.100.11", 0x12345)),
	AC("MX is no address question", "a.test", DNS_TYPE_MX,
	    "a.test A 198.51.100.12", DNS_ANSWER_BAD),
};

static void
test_answer_table(void)
{
	const struct answer_case *c;
	struct dns_answer *a = malloc(sizeof(*a));
	struct buf b;
	char text[2048], ip[64];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++) {
		c = &answer_cases[i];
		response(&b, c->qname, c->qtype, c->recs);
		rc = dns_answer_parse(b.b, b.len, c->qtype, a);
		CHECK_MSG(rc == c->rc, "%s: rc %d, want %d", c->what, rc,
		    c->rc);
		if (rc != DNS_ANSWER_OK || c->rc != DNS_ANSWER_OK)
			continue;
		chain_text(&a->chain, text, sizeof(text));
		CHECK_MSG(strcmp(text, c->chain) == 0, "%s: chain \"%s\"",
		    c->what, text);
		CHECK_MSG(a->n == c->n && a->more == c->more,
		    "%s: %zu addresses, %zu more", c->what, a->n, a->more);
		if (c->first != NULL && a->n > 0) {
			inet_ntop(a->addrs[0].family, a->addrs[0].a, ip,
			    sizeof(ip));
			CHECK_MSG(strcmp(ip, c->first) == 0, "%s: first %s",
			    c->what, ip);
		}
		if (a->chain.n > 0)
			CHECK_MSG(a->chain.link[0].ttl == c->ttl0,
			    "%s: ttl %u", c->what, a->chain.link[0].ttl);
	}
	free(a);
}

/* Hand-made answers: compression, cut records, odd rdata. */
static void
test_answer_wire(void)
{
	struct dns_answer *a = malloc(sizeof(*a));
	struct buf b;
	char text[512], recs[4096];
	size_t i, w;

	/* The target "b" + pointer to "test" in the question; the A record
	 * owned by a pointer to that rdata (offset 36). */
	hex(&b, "ab cd 81 80 00 01 00 02 00 00 00 00 "
	    "01 'a 04 'test 00 00 01 00 01 "
	    "c0 0c 00 05 00 01 00 00 00 3c 00 04 01 'b c0 0e "
	    "c0 24 00 01 00 01 00 00 00 3c 00 04 c6 33 64 01");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_OK);
	chain_text(&a->chain, text, sizeof(text));
	CHECK_STR(text, "b.test");
	CHECK_INT(a->n, 1);
	/* The same with a byte after the target inside the rdata. */
	hex(&b, "ab cd 81 80 00 01 00 01 00 00 00 00 "
	    "01 'a 04 'test 00 00 01 00 01 "
	    "c0 0c 00 05 00 01 00 00 00 3c 00 05 01 'b c0 0e 00");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_BAD);
	/* A target running out of its rdata. */
	hex(&b, "ab cd 81 80 00 01 00 01 00 00 00 00 "
	    "01 'a 04 'test 00 00 01 00 01 "
	    "c0 0c 00 05 00 01 00 00 00 3c 00 03 01 'b c0 0e");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_BAD);
	/* An A record of the wrong size, and one of class CH: ignored. */
	hex(&b, "ab cd 81 80 00 01 00 02 00 00 00 00 "
	    "01 'a 04 'test 00 00 01 00 01 "
	    "c0 0c 00 01 00 01 00 00 00 3c 00 05 01 02 03 04 05 "
	    "c0 0c 00 01 00 03 00 00 00 3c 00 04 01 02 03 04");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_OK);
	CHECK_INT(a->n, 0);
	/* ancount past the records there are. */
	hex(&b, "ab cd 81 80 00 01 00 03 00 00 00 00 "
	    "01 'a 04 'test 00 00 01 00 01 "
	    "c0 0c 00 01 00 01 00 00 00 3c 00 04 01 02 03 04");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_BAD);
	/* No question, or the question of another type. */
	hex(&b, "ab cd 81 80 00 00 00 00 00 00 00 00");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_BAD);
	hex(&b, "ab cd 81 80 00 01 00 00 00 00 00 00 01 'a 00 00 1c 00 01");
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_BAD);
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_AAAA, a),
	    DNS_ANSWER_OK);
	/* 40 addresses: 32 kept, 8 counted. */
	for (i = 0, w = 0; i < 40; i++)
		w += (size_t)snprintf(recs + w, sizeof(recs) - w,
		    "a.test A 198.51.100.%zu; ", i + 1);
	response(&b, "a.test", DNS_TYPE_A, recs);
	CHECK_INT(dns_answer_parse(b.b, b.len, DNS_TYPE_A, a), DNS_ANSWER_OK);
	CHECK_INT(a->n, DNS_ANSWER_MAX);
	CHECK_INT(a->more, 40 - DNS_ANSWER_MAX);
	/* Every prefix of a good answer: no crash, and never OK with more
	 * records than were there. */
	response(&b, "a.test", DNS_TYPE_A,
	    "a.test CNAME b.test; b.test A 198.51.100.1");
	for (i = 0; i < b.len; i++)
		CHECK_MSG(dns_answer_parse(b.b, i, DNS_TYPE_A, a) ==
		    DNS_ANSWER_BAD, "prefix %zu", i);
	free(a);
}

/* Our answers with a chain read back, by the same parser, as sent. */
static void
test_write_chain(void)
{
	struct dns_msg *q = malloc(sizeof(*q));
	struct dns_answer *a = malloc(sizeof(*a));
	struct dns_chain *chain = malloc(sizeof(*chain));
	struct seen *s = malloc(sizeof(*s));
	struct dns_reply r;
	struct netaddr addrs[3];
	struct buf b, cn;
	uint8_t out[DNS_MSG_MAX];
	char text[2048], ip[64], name[64];
	ssize_t len;
	size_t i;

	memset(chain, 0, sizeof(*chain));
	for (i = 0; i < DNS_CHAIN_MAX; i++) {
		snprintf(name, sizeof(name), "Link%zu.cdn.test", i);
		cn.len = 0;
		addname(&cn, name);
		memcpy(chain->link[i].wire, cn.b, cn.len);
		chain->link[i].wire_len = cn.len;
		chain->link[i].ttl = 9999;	/* the reply's ttl wins */
	}
	addr(&addrs[0], "198.51.100.1");
	addr(&addrs[1], "2001:db8::1");
	addr(&addrs[2], "198.51.100.2");
	query(&b, 7, "Www.Example.test", DNS_TYPE_A, 1232, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
	memset(&r, 0, sizeof(r));
	r.chain = chain;
	r.addrs = addrs;
	r.n = 3;
	r.ttl = 42;
	r.limit = dns_udp_limit(q);

	chain->n = 2;
	len = dns_reply_write(q, &r, out, sizeof(out));
	CHECK(len > 0);
	parse_back(out, len, s);
	CHECK_INT(s->rc, DNS_MSG_OK);
	CHECK_INT(s->h.ancount, 4);
	CHECK_INT(dns_answer_parse(out, (size_t)len, DNS_TYPE_A, a),
	    DNS_ANSWER_OK);
	chain_text(&a->chain, text, sizeof(text));
	CHECK_STR(text, "Link0.cdn.test,Link1.cdn.test");
	CHECK(a->chain.link[0].ttl == 42 && a->chain.link[1].ttl == 42);
	CHECK_INT(a->n, 2);
	inet_ntop(AF_INET, a->addrs[1].a, ip, sizeof(ip));
	CHECK_STR(ip, "198.51.100.2");
	CHECK_INT(a->ttls[0], 42);
	/* Compressed: each owner a 2-byte pointer. 12 + 22 question + 11
	 * OPT, 2 x (12 + 16) CNAMEs, 2 x 16 A records. */
	CHECK_INT(len, 12 + 22 + 11 + 2 * (12 + 16) + 2 * 16);

	/* The longest chain, over UDP 512 and TCP. */
	chain->n = DNS_CHAIN_MAX;
	r.limit = DNS_MSG_MAX;
	len = dns_reply_write(q, &r, out, sizeof(out));
	CHECK(len > 0);
	CHECK_INT(dns_answer_parse(out, (size_t)len, DNS_TYPE_A, a),
	    DNS_ANSWER_OK);
	CHECK_INT(a->chain.n, DNS_CHAIN_MAX);
	CHECK_INT(a->n, 2);
	/* AAAA: the chain and the one IPv6 address. */
	query(&b, 8, "www.example.test", DNS_TYPE_AAAA, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
	r.limit = dns_udp_limit(q);
	chain->n = 1;
	len = dns_reply_write(q, &r, out, sizeof(out));
	CHECK_INT(dns_answer_parse(out, (size_t)len, DNS_TYPE_AAAA, a),
	    DNS_ANSWER_OK);
	CHECK(a->chain.n == 1 && a->n == 1 && a->addrs[0].family == AF_INET6);
	/* NODATA after a CNAME: the chain alone. */
	r.n = 1;
	len = dns_reply_write(q, &r, out, sizeof(out));
	parse_back(out, len, s);
	CHECK(s->rc == DNS_MSG_OK && s->h.ancount == 1);
	r.n = 3;
	/* Over the limit: TC, and no CNAME either. */
	chain->n = DNS_CHAIN_MAX;
	r.limit = 200;
	len = dns_reply_write(q, &r, out, sizeof(out));
	parse_back(out, len, s);
	CHECK(s->rc == DNS_MSG_OK && (s->h.flags & DNS_F_TC) &&
	    s->h.ancount == 0);
	/* MX: no chain, whatever is passed. */
	query(&b, 9, "www.example.test", DNS_TYPE_MX, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
	len = dns_reply_write(q, &r, out, sizeof(out));
	parse_back(out, len, s);
	CHECK(s->rc == DNS_MSG_OK && s->h.ancount == 0);
	/* A chain no one could have built is refused, not written. */
	query(&b, 10, "www.example.test", DNS_TYPE_A, 0, 0);
	CHECK_INT(dns_msg_parse(b.b, b.len, q), DNS_MSG_OK);
	chain->n = DNS_CHAIN_MAX + 1;
	CHECK_INT(dns_reply_write(q, &r, out, sizeof(out)), -1);
	chain->n = 1;
	chain->link[0].wire_len = 0;
	CHECK_INT(dns_reply_write(q, &r, out, sizeof(out)), -1);
	chain->link[0].wire_len = DNS_WIRE_NAME_MAX + 1;
	CHECK_INT(dns_reply_write(q, &r, out, sizeof(out)), -1);
	free(q);
	free(a);
	free(chain);
	free(s);
}

/* ---- the SOA of a negative answer (RFC 2308 §5) ---- */

#define NEG_Q		"01 'a 04 'test 00 00 01 00 01 "	/* "test" at 14 */
#define NEG_HDR(an, ns)	"ab cd 81 83 00 01 00 " an " 00 " ns " 00 00 " NEG_Q
/* An SOA owned by "test": ns.test h.test 1 3600 600 604800 min. */
#define SOA_RR(cls, ttl, min) "c0 0e 00 06 " cls " " ttl " 00 1d "	\
	"02 'ns c0 0e 01 'h c0 0e 00 00 00 01 00 00 0e 10 00 00 02 58 "	\
	"00 09 3a 80 " min " "
#define NS_RR		"c0 0e 00 02 00 01 00 00 00 3c 00 05 02 'ns c0 0e "
#define A_RR		"c0 0c 00 01 00 01 00 00 00 3c 00 04 c6 33 64 01 "

static const struct {
	const char	*what;
	const char	*msg;
	int		 rc;
	uint32_t	 ttl;
} neg_cases[] = {
	{ "MINIMUM the smaller", NEG_HDR("00", "01")
	    SOA_RR("00 01", "00 00 0e 10", "00 00 00 01"), 0, 1 },
	{ "TTL the smaller", NEG_HDR("00", "01")
	    SOA_RR("00 01", "00 00 00 02", "00 00 02 58"), 0, 2 },
	{ "TTL with the top bit: 0", NEG_HDR("00", "01")
	    SOA_RR("00 01", "80 00 00 10", "00 00 02 58"), 0, 0 },
	{ "MINIMUM with the top bit: 0", NEG_HDR("00", "01")
	    SOA_RR("00 01", "00 00 02 58", "ff ff ff ff"), 0, 0 },
	{ "after an NS and past an answer", NEG_HDR("01", "02") A_RR NS_RR
	    SOA_RR("00 01", "00 00 00 3c", "00 00 00 1e"), 0, 30 },
	{ "the first SOA wins", NEG_HDR("00", "02")
	    SOA_RR("00 01", "00 00 00 07", "00 00 00 3c")
	    SOA_RR("00 01", "00 00 00 03", "00 00 00 03"), 0, 7 },
	{ "an SOA in the answer section does not count", NEG_HDR("01", "00")
	    SOA_RR("00 01", "00 00 00 07", "00 00 00 07"), -1, 0 },
	{ "class CH is skipped", NEG_HDR("00", "01")
	    SOA_RR("00 03", "00 00 00 07", "00 00 00 07"), -1, 0 },
	{ "no SOA", NEG_HDR("00", "01") NS_RR, -1, 0 },
	{ "nothing at all", NEG_HDR("00", "00"), -1, 0 },
	{ "SOA rdata cut short", NEG_HDR("00", "01")
	    "c0 0e 00 06 00 01 00 00 00 07 00 0a 02 'ns c0 0e 01 'h c0 0e "
	    "00 00", -1, 0 },
	{ "SOA rdata one byte long", NEG_HDR("00", "01")
	    "c0 0e 00 06 00 01 00 00 00 07 00 1e 02 'ns c0 0e 01 'h c0 0e "
	    "00 00 00 01 00 00 0e 10 00 00 02 58 00 09 3a 80 00 00 00 07 00",
	    -1, 0 },
	{ "SOA rdlength past the end", NEG_HDR("00", "01")
	    "c0 0e 00 06 00 01 00 00 00 07 00 ff 02 'ns c0 0e", -1, 0 },
	{ "MNAME running out of the rdata", NEG_HDR("00", "01")
	    "c0 0e 00 06 00 01 00 00 00 07 00 02 02 'ns c0 0e", -1, 0 },
	{ "a forward pointer in MNAME", NEG_HDR("00", "01")
	    "c0 0e 00 06 00 01 00 00 00 07 00 1a c0 3a 01 'h c0 0e "
	    "00 00 00 01 00 00 0e 10 00 00 02 58 00 09 3a 80 00 00 00 07",
	    -1, 0 },
	{ "a broken record before the SOA", NEG_HDR("00", "02")
	    "c0 0e 00 02 00 01 00 00 00 3c 00 09 02 'ns c0 0e "
	    SOA_RR("00 01", "00 00 00 07", "00 00 00 07"), -1, 0 },
	{ "a question cut short", "ab cd 81 83 00 01 00 00 00 01 00 00 "
	    "01 'a 04 'test 00 00 01", -1, 0 },
	{ "a header only", "ab cd 81 83 00 00 00 00 00 00 00 00", -1, 0 },
	{ "less than a header", "ab cd 81 83 00 00 00 00 00", -1, 0 },
};

static int
neg_exact(const uint8_t *buf, size_t len, uint32_t *ttl)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	if (copy == NULL)
		abort();
	memcpy(copy, buf, len);
	rc = dns_negative_ttl(copy, len, ttl);
	free(copy);
	return rc;
}

static void
test_negative_ttl(void)
{
	struct buf b;
	uint32_t ttl;
	size_t i, cut;
	int rc;

	for (i = 0; i < sizeof(neg_cases) / sizeof(neg_cases[0]); i++) {
		hex(&b, neg_cases[i].msg);
		ttl = 0xdeadbeef;
		rc = neg_exact(b.b, b.len, &ttl);
		CHECK_MSG(rc == neg_cases[i].rc, "%s: rc %d", neg_cases[i].what,
		    rc);
		CHECK_MSG(ttl == (rc == 0 ? neg_cases[i].ttl : 0xdeadbeef),
		    "%s: ttl %u", neg_cases[i].what, ttl);
	}
	/* Every prefix of a good one: refused, never read past. */
	hex(&b, neg_cases[0].msg);
	for (cut = 0; cut < b.len; cut++)
		CHECK_MSG(neg_exact(b.b, cut, &ttl) == -1, "prefix %zu", cut);
	CHECK(dns_negative_ttl(NULL, 0, &ttl) == -1);
}

/*
 * dns_answer_addrs: what a relayed answer hands the sandbox, any section,
 * any owner -- an MX answer's additional A, HTTPS hints -- and every
 * prefix of a good message refused.
 */
#define MX_MSG "00 00 81 80 00 01 00 01 00 00 00 01 02 'mx 04 'test 00 00 0f " \
	"00 01 c0 0c 00 0f 00 01 00 00 00 3c 00 11 00 0a 08 'internal " \
	"04 'test 00 08 'internal 04 'test 00 00 01 00 01 00 00 00 3c 00 04 " \
	"7f 00 00 03"
#define HTTPS_MSG(p6len) "00 00 81 80 00 01 00 01 00 00 00 00 07 'allowed " \
	"04 'test 00 00 41 00 01 c0 0c 00 41 00 01 00 00 00 3c 00 23 00 01 00 " \
	"00 04 00 08 7f 00 00 03 c6 12 00 01 00 06 00 " p6len " " \
	"00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01"

static void
hex_append(struct buf *m, const char *s)
{
	static struct buf t;

	hex(&t, s);
	memcpy(m->b + m->len, t.b, t.len);
	m->len += t.len;
}

static void
test_answer_addrs(void)
{
	struct netaddr a[DNS_ANSWER_ADDRS_MAX];
	struct buf b;
	size_t n = 99, cut, i;

	hex(&b, MX_MSG);
	CHECK(dns_answer_addrs(b.b, b.len, a, &n) == 0 && n == 1 &&
	    a[0].family == AF_INET && a[0].a[0] == 127 && a[0].a[3] == 3);
	for (cut = 0; cut < b.len; cut++)
		CHECK_MSG(dns_answer_addrs(b.b, cut, a, &n) == -1, "mx prefix %zu",
		    cut);
	hex(&b, HTTPS_MSG("10"));
	CHECK(dns_answer_addrs(b.b, b.len, a, &n) == 0 && n == 3 &&
	    a[0].a[0] == 127 && a[1].a[0] == 198 && a[1].a[1] == 18 &&
	    a[2].family == AF_INET6 && a[2].a[15] == 1);
	for (cut = 0; cut < b.len; cut++)
		CHECK_MSG(dns_answer_addrs(b.b, cut, a, &n) == -1,
		    "https prefix %zu", cut);
	/* A SvcParam longer than the record: refused. */
	hex(&b, HTTPS_MSG("11"));
	CHECK(dns_answer_addrs(b.b, b.len, a, &n) == -1);
	/* More addresses than there is room for: refused, never written past. */
	hex(&b, "00 00 81 80 00 01 00 41 00 00 00 00 01 'a 04 'test 00 00 10 00 01");
	for (i = 0; i <= DNS_ANSWER_ADDRS_MAX; i++)
		hex_append(&b, "c0 0c 00 01 00 01 00 00 00 3c 00 04 c6 12 00 01");
	CHECK(dns_answer_addrs(b.b, b.len, a, &n) == -1);
}

int
main(void)
{
	test_answer_addrs();
	test_parse_table();
	test_name_limits();
	test_pointer_hops();
	test_truncated_prefixes();
	test_tcp_frame();
	test_udp_limit();
	test_write_table();
	test_ede_shrinks();
	test_error_replies();
	test_answer_table();
	test_answer_wire();
	test_write_chain();
	test_negative_ttl();
	return check_summary();
}
