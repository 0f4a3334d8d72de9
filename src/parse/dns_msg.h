/*
 * Pure DNS message parser and writer for the DNS listener: the header, one
 * question, resource records, the EDNS OPT record with its Extended DNS
 * Error option (RFC 8914), and responses with A/AAAA answers. No I/O.
 */
#ifndef SG_DNS_MSG_H
#define SG_DNS_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/netaddr.h"

#define DNS_HDR_LEN		12
#define DNS_WIRE_NAME_MAX	255	/* length bytes and the root label included */
#define DNS_LABEL_MAX		63
/* Presentation form: every byte may become \DDD, plus the dots. */
#define DNS_NAME_TEXT_MAX	(4 * DNS_WIRE_NAME_MAX + 1)
#define DNS_PTR_HOPS_MAX	32	/* compression pointers followed per name */
#define DNS_UDP_MIN		512	/* without EDNS, and EDNS' floor */
#define DNS_UDP_MAX		4096	/* cap on a client's EDNS payload size */
#define DNS_UDP_ADVERTISE	1232	/* our own EDNS payload size */
#define DNS_MSG_MAX		65535	/* TCP */
#define DNS_EDE_TEXT_MAX	255	/* EXTRA-TEXT we write; longer is cut */
#define DNS_CHAIN_MAX		8	/* CNAME links followed in one answer */
#define DNS_ANSWER_MAX		32	/* address records kept from one answer */

/* Header flags (the 16 bits after the id). */
#define DNS_F_QR		0x8000
#define DNS_F_OPCODE(f)		(((f) >> 11) & 0xf)
#define DNS_F_AA		0x0400
#define DNS_F_TC		0x0200
#define DNS_F_RD		0x0100
#define DNS_F_RA		0x0080
#define DNS_F_AD		0x0020
#define DNS_F_CD		0x0010
#define DNS_F_RCODE(f)		((f) & 0xf)

#define DNS_OPCODE_QUERY	0

#define DNS_CLASS_IN		1

#define DNS_TYPE_A		1
#define DNS_TYPE_NS		2
#define DNS_TYPE_CNAME		5
#define DNS_TYPE_SOA		6
#define DNS_TYPE_PTR		12
#define DNS_TYPE_MX		15
#define DNS_TYPE_TXT		16
#define DNS_TYPE_AAAA		28
#define DNS_TYPE_SRV		33
#define DNS_TYPE_OPT		41
#define DNS_TYPE_HTTPS		65
#define DNS_TYPE_IXFR		251
#define DNS_TYPE_AXFR		252
#define DNS_TYPE_ANY		255

#define DNS_RCODE_NOERROR	0
#define DNS_RCODE_FORMERR	1
#define DNS_RCODE_SERVFAIL	2
#define DNS_RCODE_NXDOMAIN	3
#define DNS_RCODE_NOTIMP	4
#define DNS_RCODE_REFUSED	5
#define DNS_RCODE_BADVERS	16	/* extended: needs an OPT record */

#define DNS_OPT_EDE		15	/* EDNS option code, RFC 8914 */
#define DNS_EDE_NOT_READY	14	/* INFO-CODE "Not Ready" */
#define DNS_EDE_BLOCKED		15	/* INFO-CODE "Blocked" */
#define DNS_EDE_PROHIBITED	18	/* INFO-CODE "Prohibited": client not authorised */

/* dns_msg_parse() results. */
#define DNS_MSG_OK		0
#define DNS_MSG_SHORT		(-1)	/* no complete header: nothing to answer */
#define DNS_MSG_FORMERR		(-2)	/* header read, the rest is malformed */

struct dns_header {
	uint16_t	id;
	uint16_t	flags;
	uint16_t	qdcount;
	uint16_t	ancount;
	uint16_t	nscount;
	uint16_t	arcount;
};

/*
 * A name read from a message. wire is the uncompressed form as sent (case
 * kept); text the presentation form without the final dot ("." for the
 * root), bytes other than letters, digits, '-' and '_' escaped as \DDD and
 * a '.' inside a label as "\.", so text never holds a byte a log or a
 * policy lookup could misread.
 */
struct dns_name {
	uint8_t		wire[DNS_WIRE_NAME_MAX];
	size_t		wire_len;
	char		text[DNS_NAME_TEXT_MAX];
	size_t		text_len;
};

struct dns_rr {
	struct dns_name	name;
	uint16_t	type;
	uint16_t	class;
	uint32_t	ttl;
	size_t		rdata_off;	/* into the message */
	uint16_t	rdlen;
};

/* A parsed message: a query, or (in tests and the fuzzer) a response. */
struct dns_msg {
	struct dns_header hdr;
	int		has_question;	/* qdcount 1; 0 allowed, more is FORMERR */
	struct dns_name	qname;
	uint16_t	qtype;
	uint16_t	qclass;
	size_t		an_off;		/* first answer record */
	int		has_edns;	/* one OPT record, owner root, in additional */
	uint16_t	edns_udp;	/* payload size as sent */
	uint8_t		edns_ext_rcode;
	uint8_t		edns_version;
	int		edns_do;
	int		has_ede;	/* the first EDE option */
	uint16_t	ede_code;
	uint8_t		ede_text[DNS_EDE_TEXT_MAX];	/* its first bytes */
	size_t		ede_text_len;	/* bytes copied into ede_text */
};

/*
 * Parse a whole message: the header, at most one question, every record
 * (names decompressed with loop protection, rdata bounds checked), the OPT
 * record and its options. Bytes after the last record are FORMERR.
 * Returns DNS_MSG_OK, DNS_MSG_SHORT or DNS_MSG_FORMERR; on FORMERR m->hdr
 * is valid.
 */
int	dns_msg_parse(const uint8_t *buf, size_t len, struct dns_msg *m);
/* 0 and *h, or -1 when len < DNS_HDR_LEN. */
int	dns_header_parse(const uint8_t *buf, size_t len, struct dns_header *h);
/*
 * Read the name at *off, following compression pointers: a pointer must
 * point before the start of the labels that led to it and at or after the
 * header, at most DNS_PTR_HOPS_MAX of them, labels of 1..63 bytes, at most
 * 255 bytes in all. 0 and *off past the name, or -1.
 */
int	dns_name_read(const uint8_t *msg, size_t len, size_t *off,
	    struct dns_name *out);
/* One resource record at *off: 0 and *off past it, or -1. */
int	dns_rr_read(const uint8_t *msg, size_t len, size_t *off,
	    struct dns_rr *rr);

/* One CNAME link: the name an alias points at, as the upstream wrote it. */
struct dns_chain_link {
	uint8_t		wire[DNS_WIRE_NAME_MAX];
	size_t		wire_len;
	uint32_t	ttl;
};

/*
 * The CNAME chain from a question's name: link[0] is what the question's
 * name is an alias for, link[n - 1] the canonical name.
 */
struct dns_chain {
	size_t			n;
	struct dns_chain_link	link[DNS_CHAIN_MAX];
};

/* What a response says about its A or AAAA question. */
struct dns_answer {
	struct dns_chain chain;
	size_t		 n;	/* address records owned by the canonical name */
	struct netaddr	 addrs[DNS_ANSWER_MAX];
	uint32_t	 ttls[DNS_ANSWER_MAX];
	size_t		 more;	/* such records past DNS_ANSWER_MAX, not kept */
};

/* dns_answer_parse() results. */
#define DNS_ANSWER_OK		0
#define DNS_ANSWER_BAD		(-1)	/* malformed, or not an answer to qtype */
#define DNS_ANSWER_LOOP		(-2)	/* a CNAME loop, or a chain too long */

/*
 * Read the answer section of an upstream response to one A or AAAA
 * question of class IN: follow CNAME records from the question's name
 * (owners compared without case, records in any order, at most
 * DNS_CHAIN_MAX links, no name twice), then keep the records of qtype
 * owned by the last name; records for any other owner are ignored. TTLs
 * with the top bit set read as 0 (RFC 2181 §8).
 */
int	dns_answer_parse(const uint8_t *msg, size_t len, uint16_t qtype,
	    struct dns_answer *a);
/*
 * The negative-caching TTL of a response (RFC 2308 §5): the smaller of the
 * TTL and the MINIMUM of the first SOA (class IN) in the authority section,
 * each read as 0 with the top bit set. Every record before it must be
 * well-formed, and the SOA's rdata exactly two names and five numbers.
 * 0 and *ttl, or -1 (*ttl untouched) when there is no usable SOA.
 */
int	dns_negative_ttl(const uint8_t *msg, size_t len, uint32_t *ttl);
/*
 * Every address a response hands its reader, whatever the section or
 * owner: A and AAAA records (an MX or SRV answer's additional ones) and
 * HTTPS/SVCB (types 65, 64) ipv4hint and ipv6hint (RFC 9460), into
 * a[0..*n) (room for DNS_ANSWER_ADDRS_MAX). 0, or -1 when the message
 * cannot be read whole (one question, every record, every SvcParam) or
 * holds more addresses than that.
 */
#define DNS_ANSWER_ADDRS_MAX	64
int	dns_answer_addrs(const uint8_t *msg, size_t len, struct netaddr *a,
	    size_t *n);
/* 1 when two wire names are equal, ASCII letters compared without case. */
int	dns_name_equal(const uint8_t *a, size_t alen, const uint8_t *b,
	    size_t blen);

/*
 * TCP framing (RFC 1035 §4.2.2): the 2-byte length and the message after
 * it. Returns the bytes the frame takes (2 + length) with *msg_len set, 0
 * when more bytes are needed, -1 for a length shorter than a header.
 */
ssize_t	dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_len);

/* The largest UDP response the client accepts: 512, or its EDNS size within 512..4096. */
size_t	dns_udp_limit(const struct dns_msg *q);

/* What to answer. */
struct dns_reply {
	int		 rcode;		/* 0..4095; above 15 needs the query's EDNS */
	/*
	 * For an A or AAAA question: the CNAME chain (NULL or n 0: none),
	 * written first, then the address answers, owned by the chain's last
	 * name (or the question's): those of the family of qtype (A: IPv4,
	 * AAAA: IPv6) are written, others skipped. Every record gets ttl.
	 */
	const struct dns_chain *chain;
	const struct netaddr *addrs;
	size_t		 n;
	uint32_t	 ttl;
	/* An Extended DNS Error option, written when the query had EDNS. */
	int		 ede;
	uint16_t	 ede_code;
	const char	*ede_text;	/* UTF-8; cut at DNS_EDE_TEXT_MAX */
	size_t		 limit;		/* dns_udp_limit(), or DNS_MSG_MAX on TCP */
};

/*
 * Write the response to q into out: id, opcode, RD and CD copied, QR and
 * RA set, the question echoed as sent, the answers, an OPT record when q
 * had EDNS (with the DO bit copied). A response over r->limit is written
 * with TC set and no answers (no CNAME either). Returns its length, or -1 when it does not
 * fit in outlen (or in the limit even truncated), or rcode > 15 without
 * EDNS.
 */
ssize_t	dns_reply_write(const struct dns_msg *q, const struct dns_reply *r,
	    uint8_t *out, size_t outlen);

/* "A", "AAAA", ..., or "TYPE%u" (RFC 3597) in buf. */
const char *dns_type_name(uint16_t type, char *buf, size_t len);

#endif
