/*
 * libFuzzer target for the DNS message parser and writer: memory safety,
 * the parsed names' invariants, and replies to whatever was parsed that
 * always parse back, echo the question and respect the size limit; the
 * input read as an upstream answer (CNAME chain: bounded, loop-free, each
 * link the first CNAME its owner has, addresses only of the asked family,
 * all checked against a walk of the records of this file's own), that
 * chain written into a reply and read back unchanged; and the input read
 * as a negative answer (the SOA's TTL, checked the same way).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "parse/dns_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct dns_msg	q, back;
static struct dns_answer ans, ans_back;
static int		ans_ok;		/* ans holds a chain for q's qtype */
static uint8_t		out[DNS_MSG_MAX];

static void
check_name(const struct dns_name *n)
{
	size_t i;
	char c;

	if (n->wire_len < 1 || n->wire_len > DNS_WIRE_NAME_MAX ||
	    n->wire[n->wire_len - 1] != 0 || n->text_len == 0 ||
	    n->text_len >= DNS_NAME_TEXT_MAX ||
	    strlen(n->text) != n->text_len)
		abort();
	for (i = 0; i < n->text_len; i++) {
		c = n->text[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '\\'))
			abort();
	}
}

static uint32_t
ttl_of(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];

	return (v & 0x80000000U) ? 0 : v;
}

/* The question's name and where the answer section starts; -1 if none. */
static int
question(const uint8_t *d, size_t size, struct dns_name *qn, size_t *an_off,
    unsigned *an, unsigned *ns)
{
	struct dns_header h;
	size_t off = DNS_HDR_LEN;

	if (dns_header_parse(d, size, &h) == -1 || h.qdcount != 1 ||
	    dns_name_read(d, size, &off, qn) == -1 || size - off < 4)
		return -1;
	*an_off = off + 4;
	*an = h.ancount;
	*ns = h.nscount;
	return 0;
}

/*
 * The target of the first CNAME (class IN) owner has in the answer
 * section: 1 and *t, 0 for none, -1 for a record that does not read.
 */
static int
first_cname(const uint8_t *d, size_t size, size_t off, unsigned an,
    const uint8_t *owner, size_t olen, struct dns_name *t)
{
	struct dns_rr rr;
	size_t o;
	unsigned i;

	for (i = 0; i < an; i++) {
		if (dns_rr_read(d, size, &off, &rr) == -1)
			return -1;
		if (rr.type != DNS_TYPE_CNAME || rr.class != DNS_CLASS_IN ||
		    !dns_name_equal(rr.name.wire, rr.name.wire_len, owner,
		    olen))
			continue;
		o = rr.rdata_off;
		if (dns_name_read(d, rr.rdata_off + rr.rdlen, &o, t) == -1 ||
		    o != rr.rdata_off + rr.rdlen)
			return -1;
		return 1;
	}
	return 0;
}

/*
 * An OK answer against the records: each link is the first CNAME of the
 * name before it, none is the question's name, the last has no CNAME, and
 * every record of qtype the last name owns was kept or counted in more.
 */
static void
check_answer_records(const uint8_t *d, size_t size, uint16_t qtype,
    const struct dns_answer *a)
{
	struct dns_name qn, t;
	struct dns_rr rr;
	const uint8_t *owner;
	size_t an_off, olen, off, i, nrec = 0;
	unsigned an, ns;

	if (question(d, size, &qn, &an_off, &an, &ns) == -1)
		abort();
	owner = qn.wire;
	olen = qn.wire_len;
	for (i = 0; i < a->chain.n; i++) {
		if (first_cname(d, size, an_off, an, owner, olen, &t) != 1 ||
		    !dns_name_equal(t.wire, t.wire_len, a->chain.link[i].wire,
		    a->chain.link[i].wire_len) ||
		    dns_name_equal(t.wire, t.wire_len, qn.wire, qn.wire_len))
			abort();
		owner = a->chain.link[i].wire;
		olen = a->chain.link[i].wire_len;
	}
	if (first_cname(d, size, an_off, an, owner, olen, &t) != 0)
		abort();
	off = an_off;
	for (i = 0; i < an; i++) {
		if (dns_rr_read(d, size, &off, &rr) == -1)
			abort();
		if (rr.type == qtype && rr.class == DNS_CLASS_IN &&
		    rr.rdlen == (qtype == DNS_TYPE_A ? 4 : 16) &&
		    dns_name_equal(rr.name.wire, rr.name.wire_len, owner, olen))
			nrec++;
	}
	if (nrec != a->n + a->more || (a->more > 0 && a->n != DNS_ANSWER_MAX))
		abort();
}

/* A refused chain: following first CNAMEs does loop or run too long. */
static void
check_loop_records(const uint8_t *d, size_t size)
{
	struct dns_name qn, seen[DNS_CHAIN_MAX + 2];
	size_t an_off, i, k;
	unsigned an, ns;
	int rc;

	if (question(d, size, &qn, &an_off, &an, &ns) == -1)
		abort();
	seen[0] = qn;
	for (i = 1; i < DNS_CHAIN_MAX + 2; i++) {
		rc = first_cname(d, size, an_off, an, seen[i - 1].wire,
		    seen[i - 1].wire_len, &seen[i]);
		if (rc != 1)
			abort();	/* the chain ended: no loop */
		for (k = 0; k < i; k++)
			if (dns_name_equal(seen[k].wire, seen[k].wire_len,
			    seen[i].wire, seen[i].wire_len))
				return;
	}
	/* DNS_CHAIN_MAX + 1 links, all different: too long, rightly. */
}

/*
 * The input as a negative answer: the TTL is that of the first SOA (class
 * IN) in the authority section and its MINIMUM, the smaller, as read by
 * walking the records here; nothing is written on a refusal.
 */
static void
check_negative(const uint8_t *d, size_t size)
{
	struct dns_header h;
	struct dns_name qn;
	struct dns_rr rr;
	uint32_t ttl = 0xdeadbeef, want;
	size_t off = DNS_HDR_LEN, i;
	int rc;

	rc = dns_negative_ttl(d, size, &ttl);
	if (rc == -1) {
		if (ttl != 0xdeadbeef)
			abort();
		return;
	}
	if (rc != 0 || (ttl & 0x80000000U) || dns_header_parse(d, size,
	    &h) == -1)
		abort();
	for (i = 0; i < h.qdcount; i++) {
		if (dns_name_read(d, size, &off, &qn) == -1 || size - off < 4)
			abort();
		off += 4;
	}
	for (i = 0; i < (size_t)h.ancount + h.nscount; i++) {
		if (dns_rr_read(d, size, &off, &rr) == -1)
			abort();
		if (i < h.ancount || rr.type != DNS_TYPE_SOA ||
		    rr.class != DNS_CLASS_IN)
			continue;
		/* Two names (one byte each at least) and 20 bytes. */
		if (rr.rdlen < 22)
			abort();
		want = ttl_of(d + rr.rdata_off + rr.rdlen - 4);
		if (ttl_of(d + rr.rdata_off - 6) < want)
			want = ttl_of(d + rr.rdata_off - 6);
		if (ttl != want)
			abort();
		return;
	}
	abort();	/* no SOA, yet a TTL */
}

/* The input as an upstream answer to qtype. */
static int
check_answer(const uint8_t *data, size_t size, uint16_t qtype,
    struct dns_answer *a)
{
	const struct dns_chain_link *l;
	size_t i, j;
	int rc;

	rc = dns_answer_parse(data, size, qtype, a);
	if (rc != DNS_ANSWER_OK && rc != DNS_ANSWER_BAD &&
	    rc != DNS_ANSWER_LOOP)
		abort();
	if (rc == DNS_ANSWER_LOOP)
		check_loop_records(data, size);
	if (rc != DNS_ANSWER_OK)
		return 0;
	check_answer_records(data, size, qtype, a);
	if (a->chain.n > DNS_CHAIN_MAX || a->n > DNS_ANSWER_MAX)
		abort();
	for (i = 0; i < a->chain.n; i++) {
		l = &a->chain.link[i];
		if (l->wire_len < 1 || l->wire_len > DNS_WIRE_NAME_MAX ||
		    l->wire[l->wire_len - 1] != 0 || (l->ttl & 0x80000000U))
			abort();
		for (j = 0; j < i; j++)
			if (dns_name_equal(l->wire, l->wire_len,
			    a->chain.link[j].wire, a->chain.link[j].wire_len))
				abort();
	}
	for (i = 0; i < a->n; i++)
		if (a->addrs[i].family != (qtype == DNS_TYPE_A ? AF_INET :
		    AF_INET6) || (a->ttls[i] & 0x80000000U))
			abort();
	return 1;
}

/* Our reply with the chain read back as an answer: the same chain. */
static void
check_chain_back(size_t len, const struct dns_chain *chain, size_t naddr)
{
	size_t i;

	if (dns_answer_parse(out, len, q.qtype, &ans_back) != DNS_ANSWER_OK ||
	    ans_back.chain.n != chain->n || ans_back.n != naddr)
		abort();
	for (i = 0; i < chain->n; i++)
		if (ans_back.chain.link[i].wire_len !=
		    chain->link[i].wire_len ||
		    memcmp(ans_back.chain.link[i].wire, chain->link[i].wire,
		    chain->link[i].wire_len) != 0 ||
		    ans_back.chain.link[i].ttl != 300)
			abort();
}

/* A reply to q under one set of choices; it must be well-formed. */
static void
check_reply(int rcode, int with_addrs, int ede, size_t limit)
{
	static const char text[] = "sandgate: blocked by policy p: policy-deny";
	struct netaddr addrs[40];
	struct dns_reply r;
	ssize_t len;
	size_t i, naddr = 0;

	memset(addrs, 0, sizeof(addrs));
	for (i = 0; i < 40; i++) {
		addrs[i].family = i % 3 == 2 ? AF_INET6 : AF_INET;
		addrs[i].a[0] = (uint8_t)(i + 1);
		if (with_addrs && q.has_question && addrs[i].family ==
		    (q.qtype == DNS_TYPE_A ? AF_INET : AF_INET6))
			naddr++;
	}
	memset(&r, 0, sizeof(r));
	r.rcode = rcode;
	r.chain = ans_ok && with_addrs ? &ans.chain : NULL;
	r.addrs = with_addrs ? addrs : NULL;
	r.n = with_addrs ? 40 : 0;
	r.ttl = 300;
	r.ede = ede;
	r.ede_code = DNS_EDE_BLOCKED;
	r.ede_text = text;
	r.limit = limit;
	len = dns_reply_write(&q, &r, out, sizeof(out));
	if (len == -1) {
		if (rcode > 15 && !q.has_edns)
			return;
		abort();
	}
	if ((size_t)len > limit || dns_msg_parse(out, (size_t)len,
	    &back) != DNS_MSG_OK)
		abort();
	if (back.hdr.id != q.hdr.id || !(back.hdr.flags & DNS_F_QR) ||
	    back.has_question != q.has_question ||
	    back.has_edns != q.has_edns ||
	    DNS_F_RCODE(back.hdr.flags) != (rcode & 0xf))
		abort();
	if (q.has_question && (back.qname.wire_len != q.qname.wire_len ||
	    memcmp(back.qname.wire, q.qname.wire, q.qname.wire_len) != 0 ||
	    strcmp(back.qname.text, q.qname.text) != 0 ||
	    back.qtype != q.qtype))
		abort();
	if ((back.hdr.flags & DNS_F_TC) && back.hdr.ancount != 0)
		abort();
	if (r.chain != NULL && !(back.hdr.flags & DNS_F_TC))
		check_chain_back((size_t)len, r.chain, naddr);
	if (back.has_edns && (back.edns_ext_rcode != rcode >> 4 ||
	    back.has_ede != ede || back.edns_do != q.edns_do))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct netaddr addrs[DNS_ANSWER_ADDRS_MAX + 1];
	struct dns_name n;
	struct dns_rr rr;
	size_t off, i, msglen, na = 0;
	ssize_t fr;
	int rc;

	/* The addresses a relayed answer holds: within room, well-formed. */
	addrs[DNS_ANSWER_ADDRS_MAX].family = -1;	/* a guard never written */
	if (dns_answer_addrs(data, size, addrs, &na) == 0) {
		if (na > DNS_ANSWER_ADDRS_MAX)
			abort();
		for (i = 0; i < na; i++)
			if (addrs[i].family != AF_INET &&
			    addrs[i].family != AF_INET6)
				abort();
	}
	if (addrs[DNS_ANSWER_ADDRS_MAX].family != -1)
		abort();

	rc = dns_msg_parse(data, size, &q);
	if ((rc == DNS_MSG_SHORT) != (size < DNS_HDR_LEN))
		abort();
	if (rc != DNS_MSG_OK && rc != DNS_MSG_SHORT && rc != DNS_MSG_FORMERR)
		abort();
	if (rc == DNS_MSG_OK) {
		if (q.has_question != (q.hdr.qdcount == 1))
			abort();
		if (q.has_question)
			check_name(&q.qname);
		/* Every record the parser accepted reads again, to the end. */
		off = q.an_off;
		for (i = 0; i < (size_t)q.hdr.ancount + q.hdr.nscount +
		    q.hdr.arcount; i++) {
			if (dns_rr_read(data, size, &off, &rr) == -1)
				abort();
			check_name(&rr.name);
		}
		if (off != size || q.ede_text_len > DNS_EDE_TEXT_MAX)
			abort();
	}
	/* Both types on scratch, then q's own into ans for the replies. */
	check_negative(data, size);
	(void)check_answer(data, size, DNS_TYPE_A, &ans_back);
	(void)check_answer(data, size, DNS_TYPE_AAAA, &ans_back);
	ans_ok = rc == DNS_MSG_OK && q.has_question &&
	    (q.qtype == DNS_TYPE_A || q.qtype == DNS_TYPE_AAAA) &&
	    check_answer(data, size, q.qtype, &ans);
	if (rc != DNS_MSG_SHORT) {
		check_reply(DNS_RCODE_NOERROR, 1, 0, dns_udp_limit(&q));
		check_reply(DNS_RCODE_NOERROR, 1, 0, DNS_MSG_MAX);
		check_reply(DNS_RCODE_NXDOMAIN, 0, 1, dns_udp_limit(&q));
		check_reply(DNS_RCODE_FORMERR, 0, 0, DNS_UDP_MIN);
		check_reply(DNS_RCODE_BADVERS, 0, 1, DNS_UDP_MIN);
	}
	/* A name at every early offset: no crash, and within bounds. */
	for (i = 0; i < size && i < 64; i++) {
		off = i;
		if (dns_name_read(data, size, &off, &n) == 0) {
			check_name(&n);
			if (off <= i || off > size)
				abort();
		}
	}
	fr = dns_tcp_frame(data, size, &msglen);
	if (fr < -1 || (fr > 0 && ((size_t)fr > size ||
	    (size_t)fr != msglen + 2 || msglen < DNS_HDR_LEN)))
		abort();
	return 0;
}
