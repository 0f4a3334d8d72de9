/*
 * The DNS listener of one worker (docs/protocols.md): UDP and TCP on the
 * worker's event loop. Each query is an exchange (exchange/exchange.h): one
 * policy decision, one response and the one audit row the exchange writes
 * when it ends. Owns its sockets, its TCP connections and the queries
 * waiting on the resolver; dns_server_free() cancels them all.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <pthread.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "core/approval.h"
#include "core/decide.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "core/policy.h"
#include "core/reason.h"
#include "dns/dns.h"
#include "dlp/dlp.h"
#include "dns/resolver.h"
#include "exchange/exchange.h"
#include "parse/dns_msg.h"
#include "proxy/proxy.h"

#define DNS_SRV_UDP_BURST	64		/* datagrams per wakeup */
#define DNS_SRV_UDP_BUF		65536
#define DNS_SRV_PENDING_MAX	4096		/* waiting on the resolver */
#define DNS_SRV_HELD_MAX	4096		/* held on questions (mode: ask) */
#define DNS_SRV_HELD_PER_Q	16		/* held on one question */
#define DNS_WAKE_PENDING	32		/* questions a wake remembers as pending */
#define DNS_SRV_TCP_MAX		512		/* connections */
#define DNS_SRV_TCP_PER_SOURCE	64		/* connections of one source address */
#define DNS_SRV_TCP_INFLIGHT	32		/* queries per connection */
#define DNS_SRV_TCP_OUT_MAX	(256 * 1024)	/* unread responses */
#define DNS_SRV_IDLE_MS		10000
/* docs/dlp.md: distinct encoded-looking names under one parent, per minute */
#define DNS_DLP_BURST		32
#define DNS_DLP_BURST_MS	60000
#define DNS_SRV_MAX_TTL		300
#define DNS_SRV_EDE_LEN		(DNS_EDE_TEXT_MAX + 1)

struct dns_server;

struct dns_tcp {
	TAILQ_ENTRY(dns_tcp)	 link;
	struct dns_server	*srv;
	struct bufferevent	*bev;
	struct sockaddr_storage	 peer;
	socklen_t		 peerlen;
	size_t			 inflight;
	int			 paused;	/* reading stopped for backpressure */
	int			 eof;
	/*
	 * A frame begun must be whole within the idle time, however its
	 * bytes trickle (the read timeout restarts with each byte).
	 */
	struct event		*frame_ev;
};

/* One query from parse to response. */
struct dns_pending {
	TAILQ_ENTRY(dns_pending) link;
	struct dns_server	*srv;
	struct dns_tcp		*tcp;		/* NULL: UDP */
	struct sockaddr_storage	 peer;
	socklen_t		 peerlen;
	struct resolver_query	*rq;
	struct resolver_raw	*raw;		/* other allowed types: relayed */
	/*
	 * The query's exchange: its policy and the identity of the source,
	 * its target (the name, once valid), verdict, credential (a
	 * placeholder's, for the row), start and row.
	 */
	struct exchange		*x;
	char			 client[NETADDR_STRLEN + 8];
	struct dns_msg		 msg;
	uint64_t		 ask_id;	/* mode: ask: the question it is held on */
	int			 ask_st;	/* its answer, once collected (ready) */
};

/* How a query ends. */
struct dns_outcome {
	int			 rcode;
	enum sg_verdict		 decision;
	const char		*rule;
	enum sg_reason		 reason;
	int			 ede_code;	/* 0: none */
	const char		*ede_text;
	const struct dns_chain	*chain;		/* CNAMEs before the addresses */
	const struct netaddr	*addrs;
	size_t			 n;
	uint32_t		 ttl;
	const uint8_t		*raw;		/* a relayed upstream response, or NULL */
	size_t			 raw_len;
	int			 unaudited;	/* a rate-limited refusal past its second's row */
};

struct dns_server {
	struct dns_server_env	 env;
	int			 udp_fd;
	struct event		*udp_ev;
	struct evconnlistener	*lev;
	TAILQ_HEAD(, dns_tcp)	 conns;
	size_t			 nconns;
	TAILQ_HEAD(, dns_pending) pending;
	size_t			 npending;
	TAILQ_HEAD(, dns_pending) held;	/* mode: ask: waiting for an answer */
	size_t			 nheld;
	TAILQ_HEAD(, dns_pending) ready;	/* answered, on their way (held_wake) */
	uint64_t		 refused_conns;
	uint8_t			 inbuf[DNS_SRV_UDP_BUF];
	uint8_t			 outbuf[2 + DNS_MSG_MAX];
};

/*
 * docs/dlp.md: distinct encoded-looking names under one parent, counted
 * across every worker's listener (a sandbox's queries spread over them).
 */
static struct dlp_burst	*dns_burst;
static pthread_once_t	 dns_burst_once = PTHREAD_ONCE_INIT;

static void
dns_burst_init(void)
{
	dns_burst = dlp_burst_new(DNS_DLP_BURST, DNS_DLP_BURST_MS);
}

static void	dns_tcp_free(struct dns_tcp *);
static void	dns_tcp_idle_tv(const struct dns_server *, struct timeval *);
static void	dns_tcp_read_cb(struct bufferevent *, void *);

static uint64_t
dns_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The query's row, written by its exchange: what the listener knows (the
 * client, the asked type, the answer's address, the rcode, the rule of the
 * outcome) and the exchange's own (target, credential, duration; mode:
 * report: answered, but the policy would have said NXDOMAIN).
 */
static void
dns_audit(struct dns_pending *p, const struct dns_outcome *o,
    const char *ip)
{
	struct audit_event ev;
	char tbuf[16];

	if (o->rule == NULL)
		p->x->verdict.rule[0] = '\0';
	else if (o->rule != p->x->verdict.rule)
		snprintf(p->x->verdict.rule, sizeof(p->x->verdict.rule), "%s",
		    o->rule);
	memset(&ev, 0, sizeof(ev));
	ev.sandbox = p->x->has_ident ? p->x->ident.sandbox : NULL;
	ev.kind = "dns";
	ev.client = p->client;
	/* A name that is not valid is the row's as it was asked. */
	if (p->x->target.host[0] == '\0' && p->msg.has_question)
		ev.host = p->msg.qname.text;
	ev.ip = ip;
	ev.port = -1;
	ev.asn = -1;
	if (p->msg.has_question)
		ev.method = dns_type_name(p->msg.qtype, tbuf, sizeof(tbuf));
	ev.status = o->rcode;
	ev.bytes_up = -1;
	ev.bytes_down = -1;
	if (exchange_audit(p->x, p->srv->env.audit, p->srv->env.stats, &ev,
	    o->decision, o->reason) == -1)
		log_debug("dns: row for %s not queued (audit closing, or "
		    "audit.db unwritable with the queue full)", p->client);
}

/* The query ends: its exchange (with its policy reference) goes whole. */
static void
dns_pending_free(struct dns_pending *p)
{
	exchange_free(p->x);
	free(p);
}

/* Queue a TCP response; stop reading while the client does not. */
static void
dns_tcp_send(struct dns_tcp *c, const uint8_t *msg, size_t len)
{
	uint8_t hdr[2];
	struct evbuffer *out = bufferevent_get_output(c->bev);

	hdr[0] = (uint8_t)(len >> 8);
	hdr[1] = (uint8_t)len;
	if (evbuffer_add(out, hdr, 2) == -1 ||
	    evbuffer_add(out, msg, len) == -1)
		log_warnx("dns: cannot queue a TCP response");
}

/* After a query ends: read on when below every bound again. */
static void
dns_tcp_resume(struct dns_tcp *c)
{
	if (!c->paused || c->inflight >= DNS_SRV_TCP_INFLIGHT ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) >=
	    DNS_SRV_TCP_OUT_MAX)
		return;
	c->paused = 0;
	if (!c->eof)
		bufferevent_enable(c->bev, EV_READ);
	/* Frames already buffered raise no read event: run the callback. */
	bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS |
	    BEV_TRIG_DEFER_CALLBACKS);
}

/* Answer, audit and free p (already off the pending list). */
static void
dns_finish(struct dns_pending *p, const struct dns_outcome *o)
{
	struct dns_server *srv = p->srv;
	struct dns_reply r;
	char ipbuf[NETADDR_STRLEN];
	const char *ip = NULL;
	ssize_t len;
	size_t i;
	int family = 0;

	memset(&r, 0, sizeof(r));
	r.rcode = o->rcode;
	r.chain = o->chain;
	r.addrs = o->addrs;
	r.n = o->n;
	r.ttl = o->ttl;
	r.ede = o->ede_code != 0;
	r.ede_code = (uint16_t)o->ede_code;
	r.ede_text = o->ede_text;
	r.limit = p->tcp != NULL ? DNS_MSG_MAX : dns_udp_limit(&p->msg);
	if (o->raw != NULL && o->raw_len <= r.limit &&
	    o->raw_len <= sizeof(srv->outbuf)) {
		memcpy(srv->outbuf, o->raw, o->raw_len);
		len = (ssize_t)o->raw_len;
	} else if (o->raw != NULL) {
		/* Too large for UDP: no records, TC set, the client retries on TCP. */
		memset(&r, 0, sizeof(r));
		r.rcode = o->rcode;
		r.limit = DNS_UDP_MIN;
		len = dns_reply_write(&p->msg, &r, srv->outbuf,
		    sizeof(srv->outbuf));
		if (len > 3)
			srv->outbuf[2] |= DNS_F_TC >> 8;
	} else
		len = dns_reply_write(&p->msg, &r, srv->outbuf,
		    sizeof(srv->outbuf));
	if (len == -1) {
		/* Cannot happen for a parsed query; never leave it unanswered. */
		memset(&r, 0, sizeof(r));
		r.rcode = DNS_RCODE_SERVFAIL;
		r.limit = DNS_UDP_MIN;
		len = dns_reply_write(&p->msg, &r, srv->outbuf,
		    sizeof(srv->outbuf));
	}
	if (p->msg.has_question && p->msg.qtype == DNS_TYPE_A)
		family = AF_INET;
	else if (p->msg.has_question && p->msg.qtype == DNS_TYPE_AAAA)
		family = AF_INET6;
	if (len > 3 && !(srv->outbuf[2] & (DNS_F_TC >> 8)))
		for (i = 0; i < o->n && ip == NULL; i++)
			if (o->addrs[i].family == family)
				ip = netaddr_ntop(&o->addrs[i], ipbuf,
				    sizeof(ipbuf));
	if (len > 0 && p->tcp != NULL)
		dns_tcp_send(p->tcp, srv->outbuf, (size_t)len);
	else if (len > 0 && sendto(srv->udp_fd, srv->outbuf, (size_t)len, 0,
	    (struct sockaddr *)&p->peer, p->peerlen) == -1)
		log_debug("dns: sendto %s: %s", p->client, strerror(errno));
	if (!o->unaudited)
		dns_audit(p, o, ip);
	if (p->tcp != NULL) {
		p->tcp->inflight--;
		dns_tcp_resume(p->tcp);
	}
	dns_pending_free(p);
}

static void
dns_end(struct dns_pending *p, int rcode, enum sg_verdict decision,
    const char *rule, enum sg_reason reason)
{
	struct dns_outcome o;

	memset(&o, 0, sizeof(o));
	o.rcode = rcode;
	o.decision = decision;
	o.rule = rule;
	o.reason = reason;
	dns_finish(p, &o);
}

/* The lookup could not be made (resolver or queue full): SERVFAIL. */
static void
dns_servfail(struct dns_pending *p)
{
	dns_end(p, DNS_RCODE_SERVFAIL, VERDICT_ERROR, p->x->verdict.rule,
	    REASON_DNS_ERROR);
}

/* NXDOMAIN or REFUSED with an Extended DNS Error saying why. */
static void
dns_end_blocked(struct dns_pending *p, int rcode, int ede_code)
{
	struct dns_outcome o;
	char text[DNS_SRV_EDE_LEN], tbuf[16];
	enum sg_reason reason = p->x->verdict.reason ? p->x->verdict.reason : REASON_POLICY_DENY;

	if (!p->x->has_ident)
		snprintf(text, sizeof(text), "sandgate: client %s is no "
		    "sandbox (%s)", p->client, reason_word(reason));
	else if (reason == REASON_DNS_TYPE)
		snprintf(text, sizeof(text), "sandgate: query type %s not "
		    "allowed by policy %s (%s)", dns_type_name(p->msg.qtype,
		    tbuf, sizeof(tbuf)), p->x->ident.policy,
		    reason_word(reason));
	else
		snprintf(text, sizeof(text), "sandgate: blocked by policy %s: "
		    "%s (rule %s)", p->x->ident.policy, reason_word(reason),
		    p->x->verdict.rule);
	memset(&o, 0, sizeof(o));
	o.rcode = rcode;
	o.decision = VERDICT_DENY;
	o.rule = p->x->verdict.rule[0] != '\0' ? p->x->verdict.rule : "default-deny";
	o.reason = reason;
	o.ede_code = ede_code;
	o.ede_text = text;
	dns_finish(p, &o);
}

/* Over dns_queries_per_second: REFUSED, one row per sandbox per second. */
static void
dns_rate_limited(struct dns_pending *p, const struct fair_refusal *ref)
{
	struct dns_outcome o;
	char text[DNS_SRV_EDE_LEN];

	snprintf(text, sizeof(text), "sandgate: sandbox %s is over limits."
	    "per_sandbox.dns_queries_per_second (%s)", p->x->ident.sandbox,
	    reason_word(REASON_RATE_LIMITED));
	if (ref->audit)
		log_info("dns: rate-limited: sandbox %s is over limits."
		    "per_sandbox.dns_queries_per_second; %llu more refusal%s "
		    "since the previous row went unaudited", p->x->ident.sandbox,
		    (unsigned long long)ref->suppressed,
		    ref->suppressed == 1 ? "" : "s");
	memset(&o, 0, sizeof(o));
	o.rcode = DNS_RCODE_REFUSED;
	o.decision = VERDICT_DENY;
	o.rule = "limits";
	o.reason = REASON_RATE_LIMITED;
	o.ede_code = DNS_EDE_PROHIBITED;
	o.ede_text = text;
	o.unaudited = !ref->audit;
	dns_finish(p, &o);
}

static void
dns_pending_unlink(struct dns_pending *p)
{
	TAILQ_REMOVE(&p->srv->pending, p, link);
	p->srv->npending--;
}

/* The decision's environment for this query (core/decide.c). */
static void
dns_env(const struct dns_pending *p, struct decide_env *env)
{
	memset(env, 0, sizeof(*env));
	env->pol = p->x->pol;
	env->geoip = p->srv->env.geoip;
	env->audit_refuses = audit_refuses(p->srv->env.audit);
	env->keeper_up = 1;	/* no DNS answer needs a leaf */
	env->cred_in_name = p->srv->env.name_check;
	env->arg = p->srv->env.name_check_arg;
}

/* The decision's address stage for the answer (core/decide.c). */
static int
dns_addrs_ok(struct dns_pending *p, const struct netaddr *addrs, size_t n)
{
	struct decide_env env;

	dns_env(p, &env);
	return exchange_check_addrs(p->x, &env, addrs, n) == REASON_NONE;
}

/*
 * The answer: the chain of the asked type's own query, then the addresses,
 * all with one TTL (the smallest of the chain's and the addresses', as the
 * resolver keeps it, capped), so the whole answer expires at once, as its
 * address memory does. Only the addresses are checked: the chain's names
 * are the upstream's business, the policy decided on the asked name. The
 * memory records the addresses under the asked name only: the transparent
 * listener decides on the name a bare address maps back to, and a
 * canonical name (a CDN's, typically) is one no rule allows.
 */
static void
dns_resolved_cb(const struct resolver_answer *a, void *arg)
{
	struct dns_pending *p = arg;
	struct dns_server *srv = p->srv;
	struct dns_outcome o;
	const struct netaddr *addrs = a->addrs;
	size_t n = a->n;
	uint32_t max_ttl, ttl = a->ttl;

	p->rq = NULL;
	dns_pending_unlink(p);
	memset(&o, 0, sizeof(o));
	o.rule = p->x->verdict.rule;
	switch (a->result) {
	case RESOLVER_OK:
		/* Every address, not only the asked family (rebinding). */
		if (!dns_addrs_ok(p, addrs, n)) {
			dns_end_blocked(p, DNS_RCODE_NXDOMAIN,
			    DNS_EDE_BLOCKED);
			return;
		}
		max_ttl = srv->env.max_ttl ? srv->env.max_ttl :
		    DNS_SRV_MAX_TTL;
		o.ttl = ttl < max_ttl ? ttl : max_ttl;
		addrmem_add(srv->env.mem, p->x->ident.sandbox, p->x->target.host, addrs, n,
		    o.ttl);
		o.rcode = DNS_RCODE_NOERROR;
		o.decision = VERDICT_ALLOW;
		o.chain = a->chain[p->msg.qtype == DNS_TYPE_AAAA];
		o.addrs = addrs;
		o.n = n;
		break;
	case RESOLVER_ENOTFOUND:
		o.rcode = DNS_RCODE_NXDOMAIN;
		o.decision = VERDICT_ALLOW;
		break;
	default:
		o.rcode = DNS_RCODE_SERVFAIL;
		o.decision = VERDICT_ERROR;
		o.reason = a->result == RESOLVER_ETIMEOUT ?
		    REASON_UPSTREAM_TIMEOUT : REASON_DNS_ERROR;
		break;
	}
	dns_finish(p, &o);
}

static void	dns_raw_cb(int, const unsigned char *, size_t, void *);

/* A relayed type's name, its addresses checked: denied, or asked upstream. */
static void
dns_pre_cb(const struct resolver_answer *a, void *arg)
{
	struct dns_pending *p = arg;
	struct dns_server *srv = p->srv;

	p->rq = NULL;
	if (a->result == RESOLVER_OK && !dns_addrs_ok(p, a->addrs, a->n)) {
		dns_pending_unlink(p);
		dns_end_blocked(p, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED);
		return;
	}
	/* No address (a TXT-only name), or none to be had: the type decides. */
	if ((p->raw = resolver_query_raw(srv->env.resolver, p->x->target.host,
	    p->msg.qtype, dns_raw_cb, p)) == NULL) {
		dns_pending_unlink(p);
		dns_servfail(p);
	}
}

/*
 * A relayed response (an allowed type the gateway does not answer itself)
 * made the gateway's own, as its answers are (docs/protocols.md "DNS"):
 * every TTL capped (not OPT's, whose TTL field is flags), the client's id,
 * its question as it wrote it (case included), RD and CD copied, RA set,
 * AA cleared, the upstream's RCODE and TC kept; the upstream's OPT (and
 * whatever follows it) dropped, and the gateway's own added when the query
 * had one (payload 1232, DO copied). msg has room for cap bytes; *len is
 * updated. -1 when it does not parse.
 */
static int
dns_relay_fix(uint8_t *msg, size_t *len, size_t cap, const struct dns_msg *q,
    uint32_t max_ttl)
{
	struct dns_header h;
	struct dns_name qn;
	struct dns_rr rr;
	size_t off = DNS_HDR_LEN, qoff, start, i;
	unsigned total, kept;
	uint16_t f;

	if (dns_header_parse(msg, *len, &h) == -1 || h.qdcount != 1)
		return -1;
	qoff = off;
	if (dns_name_read(msg, *len, &off, &qn) == -1 || off + 4 > *len)
		return -1;
	/* The same name (the upstream lower-cases it): the client's bytes. */
	if (q->has_question && off - qoff == q->qname.wire_len &&
	    qn.wire_len == q->qname.wire_len &&
	    strncasecmp((const char *)qn.wire, (const char *)q->qname.wire,
	    qn.wire_len) == 0)
		memcpy(msg + qoff, q->qname.wire, q->qname.wire_len);
	off += 4;
	total = (unsigned)h.ancount + h.nscount + h.arcount;
	for (i = 0, kept = total; i < total; i++) {
		start = off;
		if (dns_rr_read(msg, *len, &off, &rr) == -1)
			return -1;
		if (rr.type == 41) {
			/* Only additional records follow: they go with it. */
			if (i < (unsigned)h.ancount + h.nscount)
				return -1;
			*len = start;
			kept = (unsigned)i;
			break;
		}
		if (rr.ttl > max_ttl) {
			/* The TTL sits just before RDLENGTH and RDATA. */
			uint8_t *t = msg + rr.rdata_off - 6;
			t[0] = (uint8_t)(max_ttl >> 24);
			t[1] = (uint8_t)(max_ttl >> 16);
			t[2] = (uint8_t)(max_ttl >> 8);
			t[3] = (uint8_t)max_ttl;
		}
	}
	if (kept < total) {
		h.arcount = (uint16_t)(kept - h.ancount - h.nscount);
		msg[10] = (uint8_t)(h.arcount >> 8);
		msg[11] = (uint8_t)h.arcount;
	}
	/*
	 * Our OPT, unless it would take the response past the largest
	 * message: over TCP there is nothing to retry on, and an answer
	 * without OPT beats TC (the UDP limit is checked later).
	 */
	if (q->has_edns && *len + 11 <= DNS_MSG_MAX) {
		static const uint8_t opt[11] = { 0, 0, 41, 0x04, 0xd0, 0, 0,
		    0, 0, 0, 0 };

		if (*len + sizeof(opt) > cap || h.arcount == 0xffff)
			return -1;
		memcpy(msg + *len, opt, sizeof(opt));
		if (q->edns_do)
			msg[*len + 7] = 0x80;
		*len += sizeof(opt);
		h.arcount++;
		msg[10] = (uint8_t)(h.arcount >> 8);
		msg[11] = (uint8_t)h.arcount;
	}
	/* QR, the upstream's TC and RCODE; the client's opcode, RD and CD; RA. */
	f = (uint16_t)(0x8000 | (q->hdr.flags & 0x7800) | (h.flags & 0x0200) |
	    (q->hdr.flags & 0x0100) | 0x0080 | (q->hdr.flags & 0x0010) |
	    (h.flags & 0x000f));
	msg[2] = (uint8_t)(f >> 8);
	msg[3] = (uint8_t)f;
	msg[0] = (uint8_t)(q->hdr.id >> 8);
	msg[1] = (uint8_t)q->hdr.id;
	return 0;
}

static void
dns_raw_cb(int result, const unsigned char *abuf, size_t alen, void *arg)
{
	struct dns_pending *p = arg;
	struct dns_server *srv = p->srv;
	struct dns_outcome o;
	struct netaddr addrs[DNS_ANSWER_ADDRS_MAX];
	size_t n = 0;
	uint8_t *copy = NULL;
	uint32_t max_ttl = srv->env.max_ttl ? srv->env.max_ttl :
	    DNS_SRV_MAX_TTL;

	p->raw = NULL;
	dns_pending_unlink(p);
	memset(&o, 0, sizeof(o));
	o.rule = p->x->verdict.rule;
	if (result != RESOLVER_OK || alen > DNS_MSG_MAX ||
	    (copy = malloc(alen + 11)) == NULL) {
		o.rcode = DNS_RCODE_SERVFAIL;
		o.decision = VERDICT_ERROR;
		o.reason = result == RESOLVER_ETIMEOUT ?
		    REASON_UPSTREAM_TIMEOUT : REASON_DNS_ERROR;
		dns_finish(p, &o);
		return;
	}
	memcpy(copy, abuf, alen);
	if (dns_relay_fix(copy, &alen, alen + 11, &p->msg, max_ttl) == -1 ||
	    dns_answer_addrs(copy, alen, addrs, &n) == -1) {
		o.rcode = DNS_RCODE_SERVFAIL;
		o.decision = VERDICT_ERROR;
		o.reason = REASON_DNS_ERROR;
	} else if (n > 0 && !dns_addrs_ok(p, addrs, n)) {
		free(copy);
		dns_end_blocked(p, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED);
		return;
	} else {
		o.rcode = copy[3] & 0x0f;
		o.decision = VERDICT_ALLOW;
		o.raw = copy;
		o.raw_len = alen;
	}
	dns_finish(p, &o);
	free(copy);
}

/* audit.on_failure deny while audit.db cannot take rows: SERVFAIL. */
static void
dns_audit_refused(struct dns_pending *p)
{
	struct dns_outcome o;

	memset(&o, 0, sizeof(o));
	o.rcode = DNS_RCODE_SERVFAIL;
	o.decision = reason_verdict(REASON_AUDIT_UNAVAILABLE);
	o.rule = "audit";
	o.reason = REASON_AUDIT_UNAVAILABLE;
	o.ede_code = DNS_EDE_NOT_READY;
	o.ede_text = "sandgate: the audit log cannot be written "
	    "(audit-unavailable)";
	dns_finish(p, &o);
}

static void	dns_resolve(struct dns_pending *);

/* A held query's answer, or one in force: it goes on, or is refused. */
static void
dns_asked(struct dns_pending *p, int st, uint64_t id)
{
	enum sg_reason r;

	snprintf(p->x->verdict.rule, sizeof(p->x->verdict.rule),
	    id != 0 ? "approval:%llu" : "approval", (unsigned long long)id);
	p->x->verdict.ask = 0;
	switch (st) {
	case APPROVAL_APPROVED:
		p->x->verdict.allow = 1;
		p->x->verdict.reason = REASON_NONE;
		dns_resolve(p);
		return;
	case APPROVAL_DENIED:
		r = REASON_APPROVAL_DENIED;
		break;
	case APPROVAL_LIMIT:
		r = REASON_APPROVAL_LIMIT;
		break;
	default:
		r = REASON_APPROVAL_TIMEOUT;
		break;
	}
	p->x->verdict.allow = 0;
	p->x->verdict.reason = r;
	dns_end_blocked(p, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED);
}

/* The query's question through decide() on the exchange's policy. */
static void
dns_decide_query(struct dns_pending *p, struct decision *d)
{
	const struct dns_msg *m = &p->msg;
	struct decide_env env;
	struct decide_q q;

	dns_env(p, &env);
	memset(&q, 0, sizeof(q));
	q.listener = DECIDE_DNS;
	q.id = p->x->has_ident ? &p->x->ident : NULL;
	q.host = m->qname.text;
	q.hostlen = m->qname.text_len;
	q.qtype = m->qtype;
	q.qclass = m->qclass;
	(void)decide(&env, &q, d);
}

/*
 * An answered question decides a held query on the policy in force now,
 * not the one it was asked under: a reload that denied the name meanwhile
 * refuses it (policy-deny), as it refuses a new query; the answer stands
 * for what is still the operator's to decide (no rule allows the name).
 * 1 when refused here.
 */
static int
dns_redecide(struct dns_pending *p)
{
	struct dns_server *srv = p->srv;
	struct decision d;

	policy_unref(p->x->pol);
	p->x->pol = srv->env.policy_get(srv->env.policy_arg);
	dns_decide_query(p, &d);
	if (d.v.ask || d.reason == REASON_NONE)
		return 0;
	p->x->verdict = d.v;
	dns_end_blocked(p, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED);
	return 1;
}

/*
 * Questions answered: their held queries go on or are refused. Each held
 * query collects its answer once (the question counts its waiters); a
 * question still pending is asked once per wake, not once per query held
 * on it. Those answered move to the ready list first, then go one by one
 * (a refusal may free a TCP connection and, with it, other queries: they
 * leave either list then). Linear in the queries held.
 */
void
dns_server_held_wake(struct dns_server *srv)
{
	struct dns_pending *p, *next;
	uint64_t pend[DNS_WAKE_PENDING], id;
	size_t np = 0, i;
	int st;

	for (p = TAILQ_FIRST(&srv->held); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		for (i = 0; i < np && pend[i] != p->ask_id; i++)
			;
		if (i < np)
			continue;
		st = srv->env.ask_collect(srv->env.ask_arg, p->ask_id);
		if (st == APPROVAL_PENDING) {
			if (np < DNS_WAKE_PENDING)
				pend[np++] = p->ask_id;
			continue;
		}
		TAILQ_REMOVE(&srv->held, p, link);
		srv->nheld--;
		p->ask_st = st;
		TAILQ_INSERT_TAIL(&srv->ready, p, link);
	}
	while ((p = TAILQ_FIRST(&srv->ready)) != NULL) {
		TAILQ_REMOVE(&srv->ready, p, link);
		id = p->ask_id;
		p->ask_id = 0;
		if (p->ask_st == APPROVAL_APPROVED && dns_redecide(p))
			;	/* a reload's policy refused it meanwhile */
		else
			dns_asked(p, p->ask_st, id);
	}
}

/* A query that will get no answer: its error row written, then freed. */
static void
dns_unanswered(struct dns_pending *p)
{
	struct dns_outcome o;

	memset(&o, 0, sizeof(o));
	o.rcode = -1;
	o.decision = VERDICT_ERROR;
	o.rule = p->x->verdict.rule;
	o.reason = REASON_DNS_ERROR;
	dns_audit(p, &o, NULL);
	dns_pending_free(p);
}

/* A held query whose client went: its waiter given back, its row written. */
static void
dns_held_cancel(struct dns_pending *p)
{
	TAILQ_REMOVE(&p->srv->held, p, link);
	p->srv->nheld--;
	p->srv->env.ask_leave(p->srv->env.ask_arg, p->ask_id);
	p->ask_id = 0;
	dns_unanswered(p);
}

/* The same for an answered one (it collected its answer already). */
static void
dns_ready_cancel(struct dns_pending *p)
{
	TAILQ_REMOVE(&p->srv->ready, p, link);
	p->ask_id = 0;
	dns_unanswered(p);
}

/* How many held queries wait on question id (at most DNS_SRV_HELD_PER_Q). */
static size_t
dns_held_on(struct dns_server *srv, uint64_t id)
{
	struct dns_pending *p;
	size_t n = 0;

	TAILQ_FOREACH(p, &srv->held, link)
		if (p->ask_id == id && ++n >= DNS_SRV_HELD_PER_Q)
			break;
	return n;
}

/* The policy's part: everything after the message is known good. */
static void
dns_decide(struct dns_pending *p)
{
	struct dns_server *srv = p->srv;
	struct decision d;

	dns_decide_query(p, &d);
	exchange_decided(p->x);
	p->x->verdict = d.v;
	if (d.target_ok)
		p->x->target = d.target;
	snprintf(p->x->fwd.plan.cred, sizeof(p->x->fwd.plan.cred), "%s",
	    d.cred);
	/* mode: ask: no rule allowed the name -- held, or answered already. */
	if (d.v.ask && srv->env.ask != NULL && p->x->has_ident) {
		uint64_t id = 0;
		int st = srv->env.ask(srv->env.ask_arg, p->x->ident.sandbox,
		    p->x->target.host, &id);

		/*
		 * A question holds a few queries (a resolver's retries), a
		 * worker's listener a bounded number: more is approval-limit,
		 * not memory (each held query keeps its exchange).
		 */
		if (st == APPROVAL_PENDING && (srv->nheld >= DNS_SRV_HELD_MAX ||
		    dns_held_on(srv, id) >= DNS_SRV_HELD_PER_Q)) {
			srv->env.ask_leave(srv->env.ask_arg, id);
			st = APPROVAL_LIMIT;
		}
		if (st == APPROVAL_PENDING) {
			p->ask_id = id;
			snprintf(p->x->verdict.rule, sizeof(p->x->verdict.rule),
			    "approval:%llu", (unsigned long long)id);
			TAILQ_INSERT_TAIL(&srv->held, p, link);
			srv->nheld++;
			return;
		}
		dns_asked(p, st, id);
		return;
	}
	switch (d.reason) {
	case REASON_NONE:
		break;
	case REASON_AUDIT_UNAVAILABLE:
		dns_audit_refused(p);
		return;
	case REASON_NO_IDENTITY:
	case REASON_DNS_TYPE:
		/* Not a question this client may ask at all. */
		dns_end_blocked(p, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED);
		return;
	default:
		dns_end_blocked(p, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED);
		return;
	}
	dns_resolve(p);
}

/* An allowed query to the resolver. */
static void
dns_resolve(struct dns_pending *p)
{
	struct dns_server *srv = p->srv;
	const struct dns_msg *m = &p->msg;

	/* A name that carries an encoded payload (docs/dlp.md, "DNS"). */
	if (dlp_name(p->x, "dns", m->qname.text, m->qname.text_len) == 1 ||
	    dlp_name_burst(p->x, dns_burst, (int64_t)dns_now_ms()) == 1) {
		dns_end_blocked(p, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED);
		return;
	}
	/* Past the bound of queries waiting on the resolver: SERVFAIL. */
	if (srv->npending >= DNS_SRV_PENDING_MAX) {
		dns_servfail(p);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->pending, p, link);
	srv->npending++;
	if (m->qtype != DNS_TYPE_A && m->qtype != DNS_TYPE_AAAA)
		/*
		 * Another type the policy allows: the name's own addresses
		 * are checked first (whatever type was asked, an internal one
		 * denies the name), then the upstream's answer is relayed.
		 */
		p->rq = resolver_lookup_answer(srv->env.resolver,
		    p->x->target.host, dns_pre_cb, p);
	else
		p->rq = resolver_lookup_answer(srv->env.resolver,
		    p->x->target.host, dns_resolved_cb, p);
	if (p->raw == NULL && p->rq == NULL) {
		dns_pending_unlink(p);
		dns_servfail(p);
	}
}

/* One message from a client: parse, identify, decide. */
static void
dns_handle(struct dns_server *srv, struct dns_tcp *tcp,
    const struct sockaddr_storage *peer, socklen_t peerlen,
    const uint8_t *buf, size_t len)
{
	struct dns_pending *p;
	struct fair_refusal ref;
	struct netaddr src;
	char abuf[NETADDR_STRLEN];
	uint16_t port;
	int rc;

	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->x = exchange_new()) == NULL) {
		free(p);
		log_warnx("dns: out of memory, query dropped");
		return;
	}
	p->x->p = srv->env.proxy;	/* dlp: the vault's values (NULL in tests) */
	rc = dns_msg_parse(buf, len, &p->msg);
	/* Nothing to answer to, or a response: never answer those. */
	if (rc == DNS_MSG_SHORT || (p->msg.hdr.flags & DNS_F_QR)) {
		dns_pending_free(p);
		return;
	}
	p->srv = srv;
	p->tcp = tcp;
	memcpy(&p->peer, peer, peerlen);
	p->peerlen = peerlen;
	netaddr_from_sockaddr((const struct sockaddr *)peer, &src, &port);
	snprintf(p->client, sizeof(p->client),
	    src.family == AF_INET6 ? "[%s]:%u" : "%s:%u",
	    netaddr_ntop(&src, abuf, sizeof(abuf)), port);
	p->x->pol = srv->env.policy_get(srv->env.policy_arg);
	/* The DNS listener identifies by source address only. */
	p->x->has_ident = p->x->pol != NULL &&
	    decide_identify(p->x->pol, &src, NULL, &p->x->ident) == REASON_NONE;
	if (tcp != NULL)
		tcp->inflight++;

	/* Before anything else: a flood costs one bucket check per query. */
	if (p->x->has_ident && srv->env.fair != NULL && fairshare_dns_query(
	    srv->env.fair, p->x->ident.sandbox, dns_now_ms(), &ref) != FAIR_OK)
		dns_rate_limited(p, &ref);
	else if (rc == DNS_MSG_FORMERR || !p->msg.has_question)
		dns_end(p, DNS_RCODE_FORMERR, VERDICT_ERROR, NULL,
		    REASON_BAD_REQUEST);
	else if (DNS_F_OPCODE(p->msg.hdr.flags) != DNS_OPCODE_QUERY)
		dns_end(p, DNS_RCODE_NOTIMP, VERDICT_ERROR, NULL,
		    REASON_METHOD_NOT_SUPPORTED);
	else if (p->msg.has_edns && p->msg.edns_version != 0)
		dns_end(p, DNS_RCODE_BADVERS, VERDICT_ERROR, NULL,
		    REASON_BAD_REQUEST);
	else if (p->x->pol == NULL)
		dns_end(p, DNS_RCODE_SERVFAIL, VERDICT_ERROR, NULL,
		    REASON_DNS_ERROR);
	else
		dns_decide(p);
}

static void
dns_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_server *srv = arg;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	ssize_t n;
	int i;

	for (i = 0; i < DNS_SRV_UDP_BURST; i++) {
		peerlen = sizeof(peer);
		n = recvfrom(fd, srv->inbuf, sizeof(srv->inbuf), MSG_TRUNC,
		    (struct sockaddr *)&peer, &peerlen);
		if (n == -1) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				log_debug("dns: recvfrom: %s", strerror(errno));
			return;
		}
		/* Larger than any buffer: not a query we could have read. */
		if ((size_t)n > sizeof(srv->inbuf))
			continue;
		dns_handle(srv, NULL, &peer, peerlen, srv->inbuf, (size_t)n);
	}
}

/* ---- TCP ---- */

/* 1 when the input holds a complete frame. */
static int
dns_tcp_has_frame(struct dns_tcp *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t avail = evbuffer_get_length(in), msglen;
	uint8_t *p;

	if (avail < 2 || (p = evbuffer_pullup(in, 2)) == NULL)
		return 0;
	msglen = (size_t)p[0] << 8 | p[1];
	return avail >= 2 + msglen;
}

/* The client is gone and every answer is out: close. */
static void
dns_tcp_maybe_done(struct dns_tcp *c)
{
	if (c->eof && c->inflight == 0 && !dns_tcp_has_frame(c) &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		dns_tcp_free(c);
}

static void
dns_tcp_read_cb(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t avail, want, msglen;
	ssize_t used;
	uint8_t *data;

	for (;;) {
		if (c->inflight >= DNS_SRV_TCP_INFLIGHT ||
		    evbuffer_get_length(bufferevent_get_output(bev)) >=
		    DNS_SRV_TCP_OUT_MAX) {
			c->paused = 1;
			bufferevent_disable(bev, EV_READ);
			return;
		}
		if ((avail = evbuffer_get_length(in)) < 2)
			break;
		want = avail < 2 + DNS_MSG_MAX ? avail : 2 + DNS_MSG_MAX;
		if ((data = evbuffer_pullup(in, (ssize_t)want)) == NULL)
			break;
		used = dns_tcp_frame(data, want, &msglen);
		if (used == -1) {
			/* Framing lost: no later byte can be trusted. */
			dns_tcp_free(c);
			return;
		}
		if (used == 0)
			break;
		dns_handle(c->srv, c, &c->peer, c->peerlen, data + 2, msglen);
		evbuffer_drain(in, (size_t)used);
		evtimer_del(c->frame_ev);	/* the next frame's time is its own */
	}
	if (evbuffer_get_length(in) == 0)
		evtimer_del(c->frame_ev);
	else if (!evtimer_pending(c->frame_ev, NULL)) {
		struct timeval tv;

		dns_tcp_idle_tv(c->srv, &tv);
		evtimer_add(c->frame_ev, &tv);
	}
	dns_tcp_maybe_done(c);
}

/* A frame begun and not whole within the idle time: a trickle, closed. */
static void
dns_tcp_frame_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_tcp *c = arg;
	struct timeval tv;

	(void)fd;
	(void)what;
	if (c->paused || dns_tcp_has_frame(c)) {
		/* Whole frames wait on the gateway, not on the client. */
		dns_tcp_idle_tv(c->srv, &tv);
		evtimer_add(c->frame_ev, &tv);
		return;
	}
	log_debug("dns: TCP query from a client not whole in time: closed");
	dns_tcp_free(c);
}

static void
dns_tcp_write_cb(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *c = arg;

	dns_tcp_resume(c);
	dns_tcp_maybe_done(c);
}

static void
dns_tcp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dns_tcp *c = arg;

	if (what & BEV_EVENT_EOF) {
		c->eof = 1;
		dns_tcp_maybe_done(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
	    (c->inflight > 0 || evbuffer_get_length(
	    bufferevent_get_output(bev)) > 0)) {
		/* Not idle: answers are still on their way. */
		if (!c->paused)
			bufferevent_enable(bev, EV_READ);
		return;
	}
	dns_tcp_free(c);
}

/* Closing with queries outstanding: each still gets its audit row. */
static void
dns_pending_cancel(struct dns_pending *p)
{
	dns_pending_unlink(p);
	resolver_cancel(p->rq);
	p->rq = NULL;
	resolver_raw_cancel(p->raw);
	p->raw = NULL;
	dns_unanswered(p);
}

static void
dns_tcp_free(struct dns_tcp *c)
{
	struct dns_server *srv = c->srv;
	struct dns_pending *p, *next;

	for (p = TAILQ_FIRST(&srv->pending); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->tcp == c)
			dns_pending_cancel(p);
	}
	for (p = TAILQ_FIRST(&srv->held); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->tcp == c)
			dns_held_cancel(p);
	}
	for (p = TAILQ_FIRST(&srv->ready); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->tcp == c)
			dns_ready_cancel(p);
	}
	TAILQ_REMOVE(&srv->conns, c, link);
	srv->nconns--;
	if (c->frame_ev != NULL)
		event_free(c->frame_ev);
	bufferevent_free(c->bev);
	free(c);
}

/* The listener's idle time (dns.idle_timeout, or the built-in 10 s). */
static void
dns_tcp_idle_tv(const struct dns_server *srv, struct timeval *tv)
{
	uint32_t ms = srv->env.idle_timeout_ms ? srv->env.idle_timeout_ms :
	    DNS_SRV_IDLE_MS;

	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

/* The connections open from sa's address (any port). */
static size_t
dns_tcp_from(const struct dns_server *srv, const struct sockaddr *sa)
{
	const struct dns_tcp *c;
	struct netaddr a, b;
	size_t n = 0;

	netaddr_from_sockaddr(sa, &a, NULL);
	TAILQ_FOREACH(c, &srv->conns, link) {
		netaddr_from_sockaddr((const struct sockaddr *)&c->peer, &b,
		    NULL);
		if (netaddr_cmp(&a, &b) == 0)
			n++;
	}
	return n;
}

static void
dns_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct dns_server *srv = arg;
	struct dns_tcp *c;
	struct timeval tv;

	if (srv->nconns >= DNS_SRV_TCP_MAX || salen <= 0 ||
	    (size_t)salen > sizeof(c->peer)) {
		if (srv->refused_conns++ % 1000 == 0)
			log_warnx("dns: %d TCP connections: refusing more",
			    DNS_SRV_TCP_MAX);
		close(fd);
		return;
	}
	/* One source cannot take every connection from the others. */
	if (dns_tcp_from(srv, sa) >= DNS_SRV_TCP_PER_SOURCE) {
		if (srv->refused_conns++ % 1000 == 0)
			log_warnx("dns: %d TCP connections from one address: "
			    "refusing more from it", DNS_SRV_TCP_PER_SOURCE);
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->srv = srv;
	memcpy(&c->peer, sa, (size_t)salen);
	c->peerlen = (socklen_t)salen;
	if ((c->bev = bufferevent_socket_new(srv->env.base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		free(c);
		return;
	}
	if ((c->frame_ev = evtimer_new(srv->env.base, dns_tcp_frame_cb,
	    c)) == NULL) {
		bufferevent_free(c->bev);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->conns, c, link);
	srv->nconns++;
	bufferevent_setcb(c->bev, dns_tcp_read_cb, dns_tcp_write_cb,
	    dns_tcp_event_cb, c);
	/* One whole frame always fits, so reading never stalls mid-frame. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, 2 + DNS_MSG_MAX);
	dns_tcp_idle_tv(srv, &tv);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* ---- life cycle ---- */

struct dns_server *
dns_server_new(const struct dns_server_env *env, int udp_fd, int tcp_fd)
{
	struct dns_server *srv = NULL;

	if (env == NULL || env->base == NULL || env->resolver == NULL ||
	    env->policy_get == NULL || (udp_fd == -1 && tcp_fd == -1))
		goto fail;
	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		goto fail;
	srv->env = *env;
	srv->udp_fd = -1;
	(void)pthread_once(&dns_burst_once, dns_burst_init);
	if (dns_burst == NULL)
		goto fail;
	TAILQ_INIT(&srv->conns);
	TAILQ_INIT(&srv->pending);
	TAILQ_INIT(&srv->held);
	TAILQ_INIT(&srv->ready);
	if (udp_fd != -1) {
		srv->udp_fd = udp_fd;
		udp_fd = -1;
		if (evutil_make_socket_nonblocking(srv->udp_fd) == -1 ||
		    (srv->udp_ev = event_new(env->base, srv->udp_fd,
		    EV_READ | EV_PERSIST, dns_udp_cb, srv)) == NULL ||
		    event_add(srv->udp_ev, NULL) == -1) {
			log_warnx("dns: cannot watch the UDP socket");
			goto fail;
		}
	}
	if (tcp_fd != -1) {
		if (evutil_make_socket_nonblocking(tcp_fd) == -1 ||
		    (srv->lev = evconnlistener_new(env->base, dns_accept_cb,
		    srv, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
		    tcp_fd)) == NULL) {
			log_warnx("dns: cannot listen on the TCP socket");
			goto fail;
		}
		tcp_fd = -1;
	}
	return srv;
fail:
	if (udp_fd != -1)
		close(udp_fd);
	if (tcp_fd != -1)
		close(tcp_fd);
	dns_server_free(srv);
	return NULL;
}

void
dns_server_free(struct dns_server *srv)
{
	struct dns_tcp *c;
	struct dns_pending *p;

	if (srv == NULL)
		return;
	if (srv->lev != NULL)
		evconnlistener_free(srv->lev);
	while ((c = TAILQ_FIRST(&srv->conns)) != NULL)
		dns_tcp_free(c);
	while ((p = TAILQ_FIRST(&srv->pending)) != NULL)
		dns_pending_cancel(p);
	while ((p = TAILQ_FIRST(&srv->held)) != NULL)
		dns_held_cancel(p);
	while ((p = TAILQ_FIRST(&srv->ready)) != NULL)
		dns_ready_cancel(p);
	if (srv->udp_ev != NULL)
		event_free(srv->udp_ev);
	if (srv->udp_fd != -1)
		close(srv->udp_fd);
	free(srv);
}
