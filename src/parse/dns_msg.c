/*
 * Pure DNS message parser and writer (RFC 1035, EDNS RFC 6891, Extended
 * DNS Errors RFC 8914). Every length comes from the peer: each one is
 * checked against the bytes that are there before it is used.
 */
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>

#include "parse/dns_msg.h"

#define DNS_RR_FIXED	10	/* type, class, ttl, rdlength */
#define DNS_OPT_FIXED	11	/* root owner and the fixed part */

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static uint8_t *
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *
put32(uint8_t *p, uint32_t v)
{
	p = put16(p, (uint16_t)(v >> 16));
	return put16(p, (uint16_t)v);
}

int
dns_header_parse(const uint8_t *buf, size_t len, struct dns_header *h)
{
	if (buf == NULL || len < DNS_HDR_LEN)
		return -1;
	h->id = get16(buf);
	h->flags = get16(buf + 2);
	h->qdcount = get16(buf + 4);
	h->ancount = get16(buf + 6);
	h->nscount = get16(buf + 8);
	h->arcount = get16(buf + 10);
	return 0;
}

/* Append one label's bytes to the presentation form, escaped. */
static void
name_text_label(struct dns_name *n, const uint8_t *p, size_t l)
{
	size_t i;
	uint8_t c;

	if (n->text_len > 0)
		n->text[n->text_len++] = '.';
	for (i = 0; i < l; i++) {
		c = p[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_')
			n->text[n->text_len++] = (char)c;
		else if (c == '.' || c == '\\') {
			n->text[n->text_len++] = '\\';
			n->text[n->text_len++] = (char)c;
		} else {
			n->text[n->text_len++] = '\\';
			n->text[n->text_len++] = (char)('0' + c / 100);
			n->text[n->text_len++] = (char)('0' + c / 10 % 10);
			n->text[n->text_len++] = (char)('0' + c % 10);
		}
	}
	n->text[n->text_len] = '\0';
}

int
dns_name_read(const uint8_t *msg, size_t len, size_t *off,
    struct dns_name *out)
{
	size_t o = *off, run = *off, end = 0, target;
	int hops = 0, jumped = 0;
	uint8_t c;

	out->wire_len = 0;
	out->text_len = 0;
	out->text[0] = '\0';
	for (;;) {
		if (o >= len)
			return -1;
		c = msg[o];
		if ((c & 0xc0) == 0xc0) {
			if (len - o < 2)
				return -1;
			target = (size_t)(c & 0x3f) << 8 | msg[o + 1];
			if (!jumped)
				end = o + 2;
			jumped = 1;
			/*
			 * Strictly before every byte this name has used so
			 * far: each hop lowers run, so no loop is possible.
			 */
			if (++hops > DNS_PTR_HOPS_MAX || target >= run ||
			    target < DNS_HDR_LEN)
				return -1;
			o = run = target;
			continue;
		}
		if (c & 0xc0)		/* 0x40, 0x80: extended label types */
			return -1;
		if (c == 0)
			break;
		if (len - o - 1 < c ||
		    out->wire_len + 1 + c + 1 > DNS_WIRE_NAME_MAX)
			return -1;
		out->wire[out->wire_len++] = c;
		memcpy(out->wire + out->wire_len, msg + o + 1, c);
		out->wire_len += c;
		name_text_label(out, msg + o + 1, c);
		o += 1 + (size_t)c;
	}
	out->wire[out->wire_len++] = 0;
	if (!jumped)
		end = o + 1;
	if (out->text_len == 0) {
		out->text[0] = '.';
		out->text[1] = '\0';
		out->text_len = 1;
	}
	*off = end;
	return 0;
}

int
dns_rr_read(const uint8_t *msg, size_t len, size_t *off, struct dns_rr *rr)
{
	size_t o = *off;

	if (dns_name_read(msg, len, &o, &rr->name) == -1 ||
	    len - o < DNS_RR_FIXED)
		return -1;
	rr->type = get16(msg + o);
	rr->class = get16(msg + o + 2);
	rr->ttl = get32(msg + o + 4);
	rr->rdlen = get16(msg + o + 8);
	o += DNS_RR_FIXED;
	if (len - o < rr->rdlen)
		return -1;
	rr->rdata_off = o;
	*off = o + rr->rdlen;
	return 0;
}

/* The OPT record's fixed fields and its options (RFC 6891 §6.1). */
static int
msg_opt(const uint8_t *buf, const struct dns_rr *rr, struct dns_msg *m)
{
	size_t p = rr->rdata_off, end = rr->rdata_off + rr->rdlen, l;
	uint16_t code, olen;

	if (m->has_edns || rr->name.wire_len != 1)
		return -1;
	m->has_edns = 1;
	m->edns_udp = rr->class;
	m->edns_ext_rcode = (uint8_t)(rr->ttl >> 24);
	m->edns_version = (uint8_t)(rr->ttl >> 16);
	m->edns_do = (rr->ttl & 0x8000) != 0;
	while (p < end) {
		if (end - p < 4)
			return -1;
		code = get16(buf + p);
		olen = get16(buf + p + 2);
		p += 4;
		if (end - p < olen)
			return -1;
		if (code == DNS_OPT_EDE) {
			if (olen < 2)
				return -1;
			if (!m->has_ede) {
				m->has_ede = 1;
				m->ede_code = get16(buf + p);
				l = (size_t)olen - 2;
				if (l > sizeof(m->ede_text))
					l = sizeof(m->ede_text);
				memcpy(m->ede_text, buf + p + 2, l);
				m->ede_text_len = l;
			}
		}
		p += olen;
	}
	return 0;
}

int
dns_msg_parse(const uint8_t *buf, size_t len, struct dns_msg *m)
{
	struct dns_rr rr;
	size_t off = DNS_HDR_LEN;
	unsigned int i, total, before_ar;

	m->has_question = 0;
	m->qname.wire_len = 0;
	m->qname.text_len = 0;
	m->qname.text[0] = '\0';
	m->qtype = m->qclass = 0;
	m->an_off = 0;
	m->has_edns = m->edns_do = m->has_ede = 0;
	m->edns_udp = m->ede_code = 0;
	m->edns_ext_rcode = m->edns_version = 0;
	m->ede_text_len = 0;
	if (dns_header_parse(buf, len, &m->hdr) == -1) {
		memset(&m->hdr, 0, sizeof(m->hdr));
		return DNS_MSG_SHORT;
	}
	if (m->hdr.qdcount > 1)
		return DNS_MSG_FORMERR;
	if (m->hdr.qdcount == 1) {
		if (dns_name_read(buf, len, &off, &m->qname) == -1 ||
		    len - off < 4)
			return DNS_MSG_FORMERR;
		m->qtype = get16(buf + off);
		m->qclass = get16(buf + off + 2);
		off += 4;
		m->has_question = 1;
	}
	m->an_off = off;
	before_ar = (unsigned int)m->hdr.ancount + m->hdr.nscount;
	total = before_ar + m->hdr.arcount;
	/* Each record takes at least 11 bytes: the loop ends with the data. */
	for (i = 0; i < total; i++) {
		if (dns_rr_read(buf, len, &off, &rr) == -1)
			return DNS_MSG_FORMERR;
		if (rr.type != DNS_TYPE_OPT)
			continue;
		if (i < before_ar || msg_opt(buf, &rr, m) == -1)
			return DNS_MSG_FORMERR;
	}
	if (off != len)
		return DNS_MSG_FORMERR;
	return DNS_MSG_OK;
}

int
dns_name_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t i;
	uint8_t x, y;

	if (alen != blen)
		return 0;
	/* Length bytes are at most 63, so folding 'A'..'Z' never hits one. */
	for (i = 0; i < alen; i++) {
		x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i];
		y = b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i];
		if (x != y)
			return 0;
	}
	return 1;
}

static uint32_t
answer_ttl(uint32_t ttl)
{
	return (ttl & 0x80000000U) ? 0 : ttl;
}

/*
 * The CNAME whose owner is name, in the answer section at an_off: 1 and
 * link filled, 0 when there is none, -1 for a malformed record. The first
 * one wins; a hostile upstream gains nothing by sending more.
 */
static int
answer_cname(const uint8_t *msg, size_t len, size_t an_off, unsigned ancount,
    const uint8_t *name, size_t namelen, struct dns_chain_link *link)
{
	struct dns_name target;
	struct dns_rr rr;
	size_t off = an_off, o;
	unsigned i;

	for (i = 0; i < ancount; i++) {
		if (dns_rr_read(msg, len, &off, &rr) == -1)
			return -1;
		if (rr.type != DNS_TYPE_CNAME || rr.class != DNS_CLASS_IN ||
		    !dns_name_equal(rr.name.wire, rr.name.wire_len, name,
		    namelen))
			continue;
		o = rr.rdata_off;
		if (dns_name_read(msg, rr.rdata_off + rr.rdlen, &o,
		    &target) == -1 || o != rr.rdata_off + rr.rdlen)
			return -1;
		memcpy(link->wire, target.wire, target.wire_len);
		link->wire_len = target.wire_len;
		link->ttl = answer_ttl(rr.ttl);
		return 1;
	}
	return 0;
}

int
dns_answer_parse(const uint8_t *msg, size_t len, uint16_t qtype,
    struct dns_answer *a)
{
	struct dns_header h;
	struct dns_name qn;
	struct dns_rr rr;
	const uint8_t *name;
	size_t off = DNS_HDR_LEN, an_off, namelen, rdlen, i, k;
	int rc = 0;

	a->chain.n = 0;
	a->n = 0;
	a->more = 0;
	if ((qtype != DNS_TYPE_A && qtype != DNS_TYPE_AAAA) ||
	    dns_header_parse(msg, len, &h) == -1 || h.qdcount != 1 ||
	    dns_name_read(msg, len, &off, &qn) == -1 || len - off < 4 ||
	    get16(msg + off) != qtype || get16(msg + off + 2) != DNS_CLASS_IN)
		return DNS_ANSWER_BAD;
	an_off = off + 4;
	name = qn.wire;
	namelen = qn.wire_len;
	for (;;) {
		if (a->chain.n == DNS_CHAIN_MAX) {
			/* One more link would be too many: is there one? */
			struct dns_chain_link extra;

			rc = answer_cname(msg, len, an_off, h.ancount, name,
			    namelen, &extra);
			if (rc == 1)
				return DNS_ANSWER_LOOP;
			break;
		}
		rc = answer_cname(msg, len, an_off, h.ancount, name, namelen,
		    &a->chain.link[a->chain.n]);
		if (rc == -1)
			return DNS_ANSWER_BAD;
		if (rc == 0)
			break;
		name = a->chain.link[a->chain.n].wire;
		namelen = a->chain.link[a->chain.n].wire_len;
		/* A name seen before, the question's included, is a loop. */
		if (dns_name_equal(name, namelen, qn.wire, qn.wire_len))
			return DNS_ANSWER_LOOP;
		for (k = 0; k < a->chain.n; k++)
			if (dns_name_equal(name, namelen,
			    a->chain.link[k].wire, a->chain.link[k].wire_len))
				return DNS_ANSWER_LOOP;
		a->chain.n++;
	}
	if (rc == -1)
		return DNS_ANSWER_BAD;

	rdlen = qtype == DNS_TYPE_A ? 4 : 16;
	off = an_off;
	for (i = 0; i < h.ancount; i++) {
		if (dns_rr_read(msg, len, &off, &rr) == -1)
			return DNS_ANSWER_BAD;
		if (rr.type != qtype || rr.class != DNS_CLASS_IN ||
		    rr.rdlen != rdlen || !dns_name_equal(rr.name.wire,
		    rr.name.wire_len, name, namelen))
			continue;
		if (a->n == DNS_ANSWER_MAX) {
			a->more++;
			continue;
		}
		memset(&a->addrs[a->n], 0, sizeof(a->addrs[a->n]));
		a->addrs[a->n].family = qtype == DNS_TYPE_A ? AF_INET :
		    AF_INET6;
		memcpy(a->addrs[a->n].a, msg + rr.rdata_off, rdlen);
		a->ttls[a->n] = answer_ttl(rr.ttl);
		a->n++;
	}
	return DNS_ANSWER_OK;
}

/*
 * The SOA rdata at rr: two names that end inside it, then exactly the five
 * 32-bit fields; the last is MINIMUM.
 */
static int
soa_minimum(const uint8_t *msg, const struct dns_rr *rr, uint32_t *minimum)
{
	struct dns_name n;
	size_t o = rr->rdata_off, end = rr->rdata_off + rr->rdlen;

	if (dns_name_read(msg, end, &o, &n) == -1 ||
	    dns_name_read(msg, end, &o, &n) == -1 || end - o != 20)
		return -1;
	*minimum = get32(msg + o + 16);
	return 0;
}

int
dns_negative_ttl(const uint8_t *msg, size_t len, uint32_t *ttl)
{
	struct dns_header h;
	struct dns_name qn;
	struct dns_rr rr;
	size_t off = DNS_HDR_LEN;
	unsigned int i;
	uint32_t minimum;

	if (dns_header_parse(msg, len, &h) == -1)
		return -1;
	for (i = 0; i < h.qdcount; i++) {
		if (dns_name_read(msg, len, &off, &qn) == -1 || len - off < 4)
			return -1;
		off += 4;
	}
	for (i = 0; i < (unsigned int)h.ancount + h.nscount; i++) {
		if (dns_rr_read(msg, len, &off, &rr) == -1)
			return -1;
		if (i < h.ancount || rr.type != DNS_TYPE_SOA ||
		    rr.class != DNS_CLASS_IN)
			continue;
		if (soa_minimum(msg, &rr, &minimum) == -1)
			return -1;
		minimum = answer_ttl(minimum);
		*ttl = answer_ttl(rr.ttl) < minimum ? answer_ttl(rr.ttl) :
		    minimum;
		return 0;
	}
	return -1;
}

ssize_t
dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_len)
{
	uint16_t l;

	if (len < 2)
		return 0;
	l = get16(buf);
	if (l < DNS_HDR_LEN)
		return -1;
	if (len - 2 < l)
		return 0;
	*msg_len = l;
	return 2 + (ssize_t)l;
}

size_t
dns_udp_limit(const struct dns_msg *q)
{
	if (!q->has_edns || q->edns_udp <= DNS_UDP_MIN)
		return DNS_UDP_MIN;
	return q->edns_udp > DNS_UDP_MAX ? DNS_UDP_MAX : q->edns_udp;
}

/* The address family the question asks for; 0 for other types. */
static int
reply_family(const struct dns_msg *q)
{
	if (!q->has_question)
		return 0;
	if (q->qtype == DNS_TYPE_A)
		return AF_INET;
	if (q->qtype == DNS_TYPE_AAAA)
		return AF_INET6;
	return 0;
}

/* Cut a UTF-8 text to at most max bytes without splitting a character. */
static size_t
utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	len = max;
	while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
		len--;
	return len;
}

ssize_t
dns_reply_write(const struct dns_msg *q, const struct dns_reply *r,
    uint8_t *out, size_t outlen)
{
	size_t qlen = 0, alen = 0, ans = 0, optlen = 0, textlen = 0, total;
	size_t i, rdlen = 0, over, nchain = 0, owner = DNS_HDR_LEN;
	const struct dns_chain_link *l;
	uint16_t flags;
	uint8_t *p = out;
	int family, tc = 0, ede;

	if (r->rcode < 0 || r->rcode > 0xfff ||
	    (r->rcode > 0xf && !q->has_edns))
		return -1;
	if (q->has_question)
		qlen = q->qname.wire_len + 4;
	family = reply_family(q);
	if (family != 0 && r->chain != NULL) {
		if (r->chain->n > DNS_CHAIN_MAX)
			return -1;
		nchain = r->chain->n;
		for (i = 0; i < nchain; i++) {
			l = &r->chain->link[i];
			if (l->wire_len < 1 || l->wire_len > DNS_WIRE_NAME_MAX)
				return -1;
			alen += 2 + DNS_RR_FIXED + l->wire_len;
		}
	}
	if (family != 0 && r->addrs != NULL) {
		rdlen = family == AF_INET ? 4 : 16;
		for (i = 0; i < r->n; i++)
			if (r->addrs[i].family == family)
				ans++;
		alen += ans * (2 + DNS_RR_FIXED + rdlen);
	}
	ede = q->has_edns && r->ede;
	if (ede && r->ede_text != NULL)
		textlen = utf8_cut(r->ede_text, strlen(r->ede_text),
		    DNS_EDE_TEXT_MAX);
	if (q->has_edns)
		optlen = DNS_OPT_FIXED + (ede ? 6 + textlen : 0);

	total = DNS_HDR_LEN + qlen + alen + optlen;
	if (total > r->limit && ans + nchain > 0) {
		tc = 1;
		ans = 0;
		nchain = 0;
		total -= alen;
	}
	if (total > r->limit && ede) {
		/* The text is advice: shorten it rather than fail. */
		over = total - r->limit;
		if (over > textlen)
			return -1;
		textlen = utf8_cut(r->ede_text, textlen, textlen - over);
		total = DNS_HDR_LEN + qlen + DNS_OPT_FIXED + 6 + textlen;
		optlen = DNS_OPT_FIXED + 6 + textlen;
	}
	if (total > r->limit || total > outlen)
		return -1;

	flags = DNS_F_QR | DNS_F_RA | (q->hdr.flags & (0x7800 | DNS_F_RD |
	    DNS_F_CD)) | (uint16_t)(r->rcode & 0xf);
	if (tc)
		flags |= DNS_F_TC;
	p = put16(p, q->hdr.id);
	p = put16(p, flags);
	p = put16(p, q->has_question ? 1 : 0);
	p = put16(p, (uint16_t)(nchain + ans));
	p = put16(p, 0);
	p = put16(p, q->has_edns ? 1 : 0);
	if (q->has_question) {
		memcpy(p, q->qname.wire, q->qname.wire_len);
		p += q->qname.wire_len;
		p = put16(p, q->qtype);
		p = put16(p, q->qclass);
	}
	/*
	 * Each CNAME is owned by the name before it (the question's at 12),
	 * pointed to where it was written; the whole chain sits far below
	 * the 14-bit pointer limit (12 + 259 + 8 * 267).
	 */
	for (i = 0; i < nchain; i++) {
		l = &r->chain->link[i];
		p = put16(p, (uint16_t)(0xc000 | owner));
		p = put16(p, DNS_TYPE_CNAME);
		p = put16(p, q->qclass);
		p = put32(p, r->ttl);
		p = put16(p, (uint16_t)l->wire_len);
		owner = (size_t)(p - out);
		memcpy(p, l->wire, l->wire_len);
		p += l->wire_len;
	}
	for (i = 0; ans > 0 && i < r->n; i++) {
		if (r->addrs[i].family != family)
			continue;
		/* The owner is the canonical name, or the question's. */
		p = put16(p, (uint16_t)(0xc000 | owner));
		p = put16(p, q->qtype);
		p = put16(p, q->qclass);
		p = put32(p, r->ttl);
		p = put16(p, (uint16_t)rdlen);
		memcpy(p, r->addrs[i].a, rdlen);
		p += rdlen;
	}
	if (q->has_edns) {
		*p++ = 0;
		p = put16(p, DNS_TYPE_OPT);
		p = put16(p, DNS_UDP_ADVERTISE);
		p = put32(p, (uint32_t)(r->rcode >> 4) << 24 |
		    (q->edns_do ? 0x8000 : 0));
		p = put16(p, (uint16_t)(optlen - DNS_OPT_FIXED));
		if (ede) {
			p = put16(p, DNS_OPT_EDE);
			p = put16(p, (uint16_t)(2 + textlen));
			p = put16(p, r->ede_code);
			if (textlen > 0)
				memcpy(p, r->ede_text, textlen);
			p += textlen;
		}
	}
	return (ssize_t)(p - out);
}

static const struct {
	uint16_t	 type;
	const char	*name;
} dns_types[] = {
	{ 1, "A" }, { 2, "NS" }, { 5, "CNAME" }, { 6, "SOA" }, { 12, "PTR" },
	{ 13, "HINFO" }, { 15, "MX" }, { 16, "TXT" }, { 28, "AAAA" },
	{ 33, "SRV" }, { 35, "NAPTR" }, { 41, "OPT" }, { 43, "DS" },
	{ 44, "SSHFP" }, { 46, "RRSIG" }, { 47, "NSEC" }, { 48, "DNSKEY" },
	{ 52, "TLSA" }, { 64, "SVCB" }, { 65, "HTTPS" }, { 251, "IXFR" },
	{ 252, "AXFR" }, { 255, "ANY" }, { 257, "CAA" },
};

const char *
dns_type_name(uint16_t type, char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(dns_types) / sizeof(dns_types[0]); i++)
		if (dns_types[i].type == type)
			return dns_types[i].name;
	snprintf(buf, len, "TYPE%u", (unsigned int)type);
	return buf;
}

/* One address into a[*n]; -1 when there is no room. */
static int
relay_addr(struct netaddr *a, size_t *n, int family, const uint8_t *p)
{
	if (*n == DNS_ANSWER_ADDRS_MAX)
		return -1;
	memset(&a[*n], 0, sizeof(a[*n]));
	a[*n].family = family;
	memcpy(a[*n].a, p, family == AF_INET ? 4 : 16);
	(*n)++;
	return 0;
}

int
dns_answer_addrs(const uint8_t *msg, size_t len, struct netaddr *a, size_t *n)
{
	struct dns_header h;
	struct dns_name nm;
	struct dns_rr rr;
	size_t off = DNS_HDR_LEN, i, q, end, k;
	unsigned total;
	uint16_t key, vl;

	*n = 0;
	if (dns_header_parse(msg, len, &h) == -1 || h.qdcount != 1 ||
	    dns_name_read(msg, len, &off, &nm) == -1 || off + 4 > len)
		return -1;
	off += 4;
	total = (unsigned)h.ancount + h.nscount + h.arcount;
	for (i = 0; i < total; i++) {
		if (dns_rr_read(msg, len, &off, &rr) == -1)
			return -1;
		if (rr.type == DNS_TYPE_A && rr.rdlen == 4) {
			if (relay_addr(a, n, AF_INET, msg + rr.rdata_off) == -1)
				return -1;
		} else if (rr.type == DNS_TYPE_AAAA && rr.rdlen == 16) {
			if (relay_addr(a, n, AF_INET6, msg + rr.rdata_off) == -1)
				return -1;
		} else if (rr.type == 64 || rr.type == 65) {
			/* SvcPriority, TargetName, then SvcParams (RFC 9460). */
			end = rr.rdata_off + rr.rdlen;
			q = rr.rdata_off + 2;
			if (q > end || dns_name_read(msg, end, &q, &nm) == -1)
				return -1;
			while (q + 4 <= end) {
				key = (uint16_t)(msg[q] << 8 | msg[q + 1]);
				vl = (uint16_t)(msg[q + 2] << 8 | msg[q + 3]);
				q += 4;
				if (q + vl > end)
					return -1;
				for (k = 0; key == 4 && k + 4 <= vl; k += 4)
					if (relay_addr(a, n, AF_INET, msg + q + k) == -1)
						return -1;
				for (k = 0; key == 6 && k + 16 <= vl; k += 16)
					if (relay_addr(a, n, AF_INET6, msg + q + k) == -1)
						return -1;
				q += vl;
			}
			if (q != end)
				return -1;
		}
	}
	return 0;
}
