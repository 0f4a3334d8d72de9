/*
 * End-to-end test of the DNS listener inside one process: a real dnsmasq
 * upstream, the resolver, a policy from data/dns_policy.yaml, an audit db
 * in a temp dir, and queries from the test's own UDP/TCP client and from
 * real dig processes. Checks answers, EDEs, TC/TCP, address memory and
 * one audit row per query.
 */
#include <sched.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "audit/audit.h"
#include "core/config.h"
#include "core/policy.h"
#include "dns/dns.h"
#include "proxy/proxy.h"
#include "parse/dns_msg.h"
#include "dns/resolver.h"
#include "helper_dns.h"

#define DIG		"/usr/bin/dig"
#define BIG_ADDRS	40

static struct event_base *base;
static struct policy	*pol;
static int		 dm_port;
static int		 srv_port;
static int		 srv6_port;	/* the IPv4-mapped listener, or 0 */
static char		 tmpdir[64];
static char		 dbpath[128];
/*
 * Audit rows are matched to queries by client address and port: client
 * sockets stay open until the end so that no port is used twice.
 */
static int		 kept[256];
static size_t		 nkept;

static void
keep_fd(int fd)
{
	if (nkept < sizeof(kept) / sizeof(kept[0]))
		kept[nkept++] = fd;
	else
		close(fd);
}

static void
close_kept(void)
{
	while (nkept > 0)
		close(kept[--nkept]);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Let the server work for a moment: its loop, then a short sleep. */
static void
spin(int fd, int ms)
{
	struct pollfd pfd;

	event_base_loop(base, EVLOOP_NONBLOCK);
	pfd.fd = fd;
	pfd.events = POLLIN;
	poll(&pfd, fd >= 0 ? 1 : 0, ms);
}

static struct policy *
policy_get_cb(void *arg)
{
	policy_ref(pol);
	return pol;
}

/* ---- dnsmasq: what data/dns_policy.yaml's cases ask for ---- */

static const char *const records[] = {
	"--local=/test/",
	"--local-ttl=600",
	"--host-record=allowed.test,151.101.1.10,2606:4700::10",
	"--host-record=x.wild.test,151.101.1.11",
	"--host-record=bad.wild.test,151.101.1.12",
	"--host-record=other.test,151.101.1.15",
	"--host-record=priv.test,198.18.200.5",
	"--host-record=intra.test,198.19.2.3",
	"--host-record=mixed.test,151.101.1.13",
	"--host-record=mixed.test,198.18.201.1",
	"--host-record=v6.test,2606:4700::6",
	"--cname=cname.test,allowed.test",
	"--host-record=chainend.test,151.101.1.20,2606:4700::20",
	"--cname=chain3.test,mid3.test",
	"--cname=mid3.test,chainend.test",
	"--cname=badchain.test,priv.test",
	"--address=/missing.test/",
	NULL
};

/* big.test: too many for 512 bytes of UDP (TC, then TCP). */
static const struct dnstest_zone zone = {
	.records = records, .big_name = "big.test", .big_net = "151.101.2.",
	.big_n = BIG_ADDRS,
};

/* ---- the server's sockets ---- */

static int
bind_sock(int family, int type, const char *addr, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int fd, zero = 0;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, addr, &sin->sin_addr);
		sl = sizeof(*sin);
	} else {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, addr, &sin6->sin6_addr);
		sl = sizeof(*sin6);
	}
	if ((fd = socket(family, type, 0)) == -1)
		return -1;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (struct sockaddr *)&ss, sl) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 16) == -1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- a DNS client on the test's side ---- */

struct q {
	uint8_t	b[600];
	size_t	len;
};

static void
put8(struct q *m, unsigned v)
{
	m->b[m->len++] = (uint8_t)v;
}

static void
put16(struct q *m, unsigned v)
{
	put8(m, (v >> 8) & 0xff);
	put8(m, v & 0xff);
}

struct qopts {
	unsigned	udp;		/* EDNS payload size; 0: no EDNS */
	unsigned	version;	/* EDNS version */
	unsigned	qclass;		/* 0: IN */
	unsigned	opcode;
};

static void
build(struct q *m, uint16_t id, const char *name, uint16_t qtype,
    const struct qopts *o)
{
	const char *p = name, *dot;
	size_t l;

	m->len = 0;
	put16(m, id);
	put16(m, 0x0100 | (o->opcode << 11));
	put16(m, 1);
	put16(m, 0);
	put16(m, 0);
	put16(m, o->udp ? 1 : 0);
	while (*p != '\0') {
		dot = strchr(p, '.');
		l = dot ? (size_t)(dot - p) : strlen(p);
		put8(m, (unsigned)l);
		memcpy(m->b + m->len, p, l);
		m->len += l;
		p += l;
		if (*p == '.')
			p++;
	}
	put8(m, 0);
	put16(m, qtype);
	put16(m, o->qclass ? o->qclass : 1);
	if (o->udp) {
		put8(m, 0);
		put16(m, DNS_TYPE_OPT);
		put16(m, o->udp);
		put16(m, o->version & 0xff);
		put16(m, 0);
		put16(m, 0);
	}
}

/*
 * The audit row's client is address:port, without the transport: a UDP
 * and a TCP client that the kernel gives the same port number would share
 * their rows (it happened in a CI run). Every client socket of this test
 * is bound with bound_client(), which keeps only a port no client had.
 */
static uint16_t client_ports[1024];
static size_t n_client_ports;

/* A socket of type bound to src on a port no client of this test had; -1. */
static int
bound_client(int type, const char *src, struct sockaddr_in *sin)
{
	socklen_t sl;
	size_t i;
	int s, tries;

	for (tries = 0; tries < 32; tries++) {
		if ((s = socket(AF_INET, type, 0)) == -1)
			return -1;
		memset(sin, 0, sizeof(*sin));
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, src, &sin->sin_addr);
		sl = sizeof(*sin);
		if (bind(s, (struct sockaddr *)sin, sizeof(*sin)) == -1 ||
		    getsockname(s, (struct sockaddr *)sin, &sl) == -1) {
			close(s);
			return -1;
		}
		for (i = 0; i < n_client_ports; i++)
			if (client_ports[i] == ntohs(sin->sin_port))
				break;
		if (i == n_client_ports) {
			if (n_client_ports < sizeof(client_ports) /
			    sizeof(client_ports[0]))
				client_ports[n_client_ports++] =
				    ntohs(sin->sin_port);
			return s;
		}
		close(s);	/* another client had this port: another one */
	}
	return -1;
}

/* A UDP socket bound to src, connected to the server on port. */
static int
udp_client(const char *src, int port, char *client, size_t clientlen)
{
	struct sockaddr_in sin;
	int s;

	if ((s = bound_client(SOCK_DGRAM | SOCK_NONBLOCK, src, &sin)) == -1)
		return -1;
	snprintf(client, clientlen, "%s:%u", src, ntohs(sin.sin_port));
	sin.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (connect(s, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(s);
		return -1;
	}
	return s;
}

/*
 * Send one datagram and wait up to ms for the answer; then make sure no
 * second answer follows. Returns its length, 0 for silence, -1 on error.
 */
static ssize_t
udp_ask(int s, const uint8_t *msg, size_t len, uint8_t *resp, size_t cap,
    int ms, int *extra)
{
	uint8_t junk[4096];
	uint64_t end = now_ms() + (uint64_t)ms;
	ssize_t n = 0;

	*extra = 0;
	if (send(s, msg, len, 0) != (ssize_t)len)
		return -1;
	while (now_ms() < end) {
		spin(s, 5);
		if ((n = recv(s, resp, cap, 0)) > 0)
			break;
		n = 0;
	}
	if (n > 0) {
		end = now_ms() + 30;
		while (now_ms() < end) {
			spin(s, 5);
			if (recv(s, junk, sizeof(junk), 0) > 0)
				(*extra)++;
		}
	}
	return n;
}

/* What an answer says, parsed by the module's own parser. */
struct ans {
	int		rcode;		/* with the EDNS extended bits */
	int		tc;
	uint16_t	id;
	int		nans;
	char		first[64];	/* the first address */
	char		owner[300];	/* its owner */
	char		cnames[1024];	/* "owner>target,..." in order */
	int		addr_after_cname;	/* an address before a CNAME */
	uint32_t	ttl;		/* the first address's */
	int		ttls_differ;	/* not every record has ttl */
	int		has_edns;
	int		ede;
	char		ede_text[300];
};

static int
parse_answer(const uint8_t *buf, size_t len, struct ans *a)
{
	static struct dns_msg m;
	struct dns_rr rr;
	struct dns_name target;
	size_t off, t, w = 0;
	uint32_t ttl0 = 0;
	int i;

	memset(a, 0, sizeof(*a));
	if (dns_msg_parse(buf, len, &m) != DNS_MSG_OK)
		return -1;
	a->id = m.hdr.id;
	a->rcode = DNS_F_RCODE(m.hdr.flags) | m.edns_ext_rcode << 4;
	a->tc = (m.hdr.flags & DNS_F_TC) != 0;
	a->has_edns = m.has_edns;
	if (m.has_ede) {
		a->ede = m.ede_code;
		memcpy(a->ede_text, m.ede_text, m.ede_text_len);
		a->ede_text[m.ede_text_len] = '\0';
	}
	off = m.an_off;
	for (i = 0; i < m.hdr.ancount; i++) {
		if (dns_rr_read(buf, len, &off, &rr) == -1)
			return -1;
		if (i == 0)
			ttl0 = rr.ttl;
		else if (rr.ttl != ttl0)
			a->ttls_differ = 1;
		if (rr.type == DNS_TYPE_CNAME) {
			t = rr.rdata_off;
			if (dns_name_read(buf, len, &t, &target) == -1)
				return -1;
			if (a->first[0] != '\0')
				a->addr_after_cname = 1;
			w += (size_t)snprintf(a->cnames + w,
			    sizeof(a->cnames) - w, "%s%s>%s", w ? "," : "",
			    rr.name.text, target.text);
			if (w >= sizeof(a->cnames))
				return -1;
		} else if (a->first[0] == '\0') {
			inet_ntop(rr.rdlen == 4 ? AF_INET : AF_INET6,
			    buf + rr.rdata_off, a->first, sizeof(a->first));
			snprintf(a->owner, sizeof(a->owner), "%.255s",
			    rr.name.text);
			a->ttl = rr.ttl;
		}
		a->nans++;
	}
	return 0;
}

/* ---- the table of queries ---- */

struct scase {
	const char	*what;
	const char	*src;		/* client address; NULL 127.0.0.1 */
	const char	*name;
	uint16_t	 qtype;
	struct qopts	 o;
	int		 tcp;
	/* the answer */
	int		 rcode;
	int		 tc;
	int		 nans;
	const char	*first;
	const char	*owner;		/* of first; NULL: the name asked */
	const char	*cnames;	/* "owner>target,...", or none */
	int		 ede;
	const char	*ede_has;
	/* the audit row */
	const char	*sandbox;
	const char	*host;
	const char	*method;
	const char	*decision;
	const char	*rule;
	const char	*reason;
	char		 client[64];	/* filled in */
};

#define ALLOW(sb, r)	.sandbox = (sb), .decision = "allow", .rule = (r)
#define DENY(sb, r, why) .sandbox = (sb), .decision = "deny", .rule = (r), \
	.reason = (why)
#define EDNS		.o = { .udp = 1232 }

static struct scase cases[] = {
	{ "A, EDNS", .name = "allowed.test", .qtype = 1, EDNS,
	    .nans = 1, .first = "151.101.1.10",
	    ALLOW("dnsbox", "dnspol:allow[0]") },
	{ "AAAA, no EDNS", .name = "allowed.test", .qtype = 28,
	    .nans = 1, .first = "2606:4700::10",
	    ALLOW("dnsbox", "dnspol:allow[0]") },
	{ "case is kept, policy ignores it", .name = "ALLOWED.Test",
	    .qtype = 1, .nans = 1, .first = "151.101.1.10",
	    .host = "allowed.test", ALLOW("dnsbox", "dnspol:allow[0]") },
	{ "wildcard", .name = "x.wild.test", .qtype = 1, .nans = 1,
	    .first = "151.101.1.11", ALLOW("dnsbox", "dnspol:allow[1]") },
	{ "deny rule, EDNS: EDE", .name = "bad.wild.test", .qtype = 1, EDNS,
	    .rcode = 3, .ede = 15,
	    .ede_has = "policy dnspol: policy-deny (rule dnspol:deny[0])",
	    DENY("dnsbox", "dnspol:deny[0]", "policy-deny") },
	{ "deny rule, no EDNS: no OPT", .name = "bad.wild.test", .qtype = 1,
	    .rcode = 3, DENY("dnsbox", "dnspol:deny[0]", "policy-deny") },
	{ "no rule", .name = "other.test", .qtype = 1, EDNS, .rcode = 3,
	    .ede = 15, .ede_has = "policy dnspol: policy-deny",
	    DENY("dnsbox", "default-deny", "policy-deny") },
	{ "MX outside dns_types", .name = "allowed.test", .qtype = 15, EDNS,
	    .rcode = 5, .ede = 18, .ede_has = "query type MX",
	    DENY("dnsbox", "default-deny", "dns-type-refused") },
	{ "ANY outside dns_types", .name = "allowed.test", .qtype = 255,
	    .rcode = 5, DENY("dnsbox", "default-deny", "dns-type-refused") },
	{ "internal address", .name = "priv.test", .qtype = 1, EDNS,
	    .rcode = 3, .ede = 15, .ede_has = "destination-ip-prohibited",
	    DENY("dnsbox", "dnspol:allow[2]", "destination-ip-prohibited") },
	{ "internal address in allow_private", .name = "intra.test",
	    .qtype = 1, .nans = 1, .first = "198.19.2.3",
	    ALLOW("dnsbox", "dnspol:allow[3]") },
	{ "an internal A denies AAAA too", .name = "mixed.test", .qtype = 28,
	    EDNS, .rcode = 3, .ede = 15,
	    DENY("dnsbox", "dnspol:allow[4]", "destination-ip-prohibited") },
	{ "40 addresses, 512 bytes: TC", .name = "big.test", .qtype = 1,
	    .tc = 1, ALLOW("dnsbox", "dnspol:allow[5]") },
	{ "40 addresses, EDNS 4096", .name = "big.test", .qtype = 1,
	    .o = { .udp = 4096 }, .nans = RESOLVER_MAX_ADDRS,
	    ALLOW("dnsbox", "dnspol:allow[5]") },
	{ "40 addresses over TCP", .name = "big.test", .qtype = 1, .tcp = 1,
	    .nans = RESOLVER_MAX_ADDRS, ALLOW("dnsbox", "dnspol:allow[5]") },
	{ "A of an IPv6-only name: NODATA", .name = "v6.test", .qtype = 1,
	    ALLOW("dnsbox", "dnspol:allow[6]") },
	{ "NXDOMAIN upstream: no EDE", .name = "missing.test", .qtype = 1,
	    EDNS, .rcode = 3, ALLOW("dnsbox", "dnspol:allow[7]") },
	{ "CNAME, then the target's A", .name = "cname.test", .qtype = 1,
	    .nans = 2, .first = "151.101.1.10", .owner = "allowed.test",
	    .cnames = "cname.test>allowed.test",
	    ALLOW("dnsbox", "dnspol:allow[8]") },
	{ "two CNAMEs, then the AAAA", .name = "Chain3.test", .qtype = 28,
	    EDNS, .nans = 3, .first = "2606:4700::20",
	    .owner = "chainend.test",
	    .cnames = "Chain3.test>mid3.test,mid3.test>chainend.test",
	    .host = "chain3.test", ALLOW("dnsbox", "dnspol:allow[10]") },
	{ "two CNAMEs over TCP", .name = "chain3.test", .qtype = 1, .tcp = 1,
	    .nans = 3, .first = "151.101.1.20", .owner = "chainend.test",
	    .cnames = "chain3.test>mid3.test,mid3.test>chainend.test",
	    ALLOW("dnsbox", "dnspol:allow[10]") },
	{ "a chain to an internal address", .name = "badchain.test",
	    .qtype = 1, EDNS, .rcode = 3, .ede = 15,
	    .ede_has = "destination-ip-prohibited",
	    DENY("dnsbox", "dnspol:allow[11]", "destination-ip-prohibited") },
	{ "no sandbox", .src = "127.0.0.2", .name = "allowed.test",
	    .qtype = 1, EDNS, .rcode = 5, .ede = 18, .ede_has = "no-identity",
	    DENY(NULL, "no-identity", "no-identity") },
	{ "no sandbox over TCP", .src = "127.0.0.2", .name = "allowed.test",
	    .qtype = 1, .tcp = 1, .rcode = 5,
	    DENY(NULL, "no-identity", "no-identity") },
	{ "TXT allowed: NODATA", .src = "127.0.0.3", .name = "allowed.test",
	    .qtype = 16, ALLOW("txtbox", "txtpol:allow[0]") },
	{ "TXT of a name not allowed", .src = "127.0.0.3",
	    .name = "other.test", .qtype = 16, EDNS, .rcode = 3, .ede = 15,
	    .ede_has = "policy txtpol",
	    DENY("txtbox", "default-deny", "policy-deny") },
	{ "MX for txtpol", .src = "127.0.0.3", .name = "allowed.test",
	    .qtype = 15, .rcode = 5,
	    DENY("txtbox", "default-deny", "dns-type-refused") },
	{ "a name that is an IP", .name = "151.101.1.10", .qtype = 1, EDNS,
	    .rcode = 3, .ede = 15, .ede_has = "invalid-host",
	    DENY("dnsbox", "default-deny", "invalid-host") },
	{ "bad characters", .name = "a*b.test", .qtype = 1, .rcode = 3,
	    .host = "a\\042b.test",
	    DENY("dnsbox", "default-deny", "invalid-host") },
	{ "class CH", .name = "allowed.test", .qtype = 16,
	    .o = { .qclass = 3 }, .rcode = 5,
	    DENY("dnsbox", "default-deny", "dns-type-refused") },
	{ "EDNS version 1: BADVERS", .name = "allowed.test", .qtype = 1,
	    .o = { .udp = 1232, .version = 1 }, .rcode = 16,
	    .sandbox = "dnsbox", .decision = "error", .reason = "bad-request" },
	{ "opcode STATUS: NOTIMP", .name = "allowed.test", .qtype = 1,
	    .o = { .opcode = 2 }, .rcode = 4, .sandbox = "dnsbox",
	    .decision = "error", .reason = "method-not-supported" },
};

/* One query over a fresh TCP connection; the answer's length or -1. */
static ssize_t
tcp_ask(const char *src, const uint8_t *msg, size_t len, uint8_t *resp,
    size_t cap, char *client, size_t clientlen)
{
	struct sockaddr_in sin;
	uint8_t buf[2 + 65535];
	size_t have = 0, want;
	uint64_t end;
	ssize_t n;
	int s;

	if ((s = bound_client(SOCK_STREAM, src, &sin)) == -1)
		return -1;
	snprintf(client, clientlen, "%s:%u", src, ntohs(sin.sin_port));
	sin.sin_port = htons((uint16_t)srv_port);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (connect(s, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		goto fail;
	buf[0] = (uint8_t)(len >> 8);
	buf[1] = (uint8_t)len;
	memcpy(buf + 2, msg, len);
	if (write(s, buf, len + 2) != (ssize_t)(len + 2))
		goto fail;
	end = now_ms() + 5000;
	while (now_ms() < end) {
		spin(s, 5);
		n = recv(s, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n > 0)
			have += (size_t)n;
		if (have >= 2) {
			want = (size_t)buf[0] << 8 | buf[1];
			if (have >= 2 + want) {
				keep_fd(s);
				if (want > cap)
					return -1;
				memcpy(resp, buf + 2, want);
				return (ssize_t)want;
			}
		}
	}
fail:
	keep_fd(s);
	return -1;
}

static void
run_cases(void)
{
	struct scase *c;
	struct q m;
	struct ans a;
	uint8_t resp[65536];
	ssize_t n;
	size_t i;
	int s, extra;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = &cases[i];
		build(&m, (uint16_t)(0x4000 + i), c->name, c->qtype, &c->o);
		if (c->tcp) {
			n = tcp_ask(c->src ? c->src : "127.0.0.1", m.b, m.len,
			    resp, sizeof(resp), c->client, sizeof(c->client));
			extra = 0;
		} else {
			s = udp_client(c->src ? c->src : "127.0.0.1",
			    srv_port, c->client, sizeof(c->client));
			CHECK(s != -1);
			if (s == -1)
				continue;
			n = udp_ask(s, m.b, m.len, resp, sizeof(resp), 5000,
			    &extra);
			keep_fd(s);
		}
		CHECK_MSG(n > 0, "%s: no answer", c->what);
		if (n <= 0)
			continue;
		CHECK_MSG(extra == 0, "%s: %d extra answers", c->what, extra);
		CHECK_MSG(parse_answer(resp, (size_t)n, &a) == 0,
		    "%s: answer does not parse", c->what);
		CHECK_MSG(a.id == 0x4000 + i, "%s: id %04x", c->what, a.id);
		CHECK_MSG(a.rcode == c->rcode, "%s: rcode %d, want %d",
		    c->what, a.rcode, c->rcode);
		CHECK_MSG(a.tc == c->tc, "%s: TC %d", c->what, a.tc);
		CHECK_MSG(a.nans == c->nans, "%s: %d answers, want %d",
		    c->what, a.nans, c->nans);
		CHECK_MSG(a.has_edns == (c->o.udp != 0), "%s: OPT %d",
		    c->what, a.has_edns);
		if (c->first != NULL) {
			CHECK_MSG(strcmp(a.first, c->first) == 0 &&
			    strcmp(a.owner, c->owner ? c->owner :
			    c->name) == 0,
			    "%s: first %s owner %s", c->what, a.first,
			    a.owner);
			/* dnsmasq says 600: capped by max_ttl. */
			CHECK_MSG(a.ttl == 60 && !a.ttls_differ,
			    "%s: ttl %u", c->what, a.ttl);
		}
		CHECK_MSG(strcmp(a.cnames, c->cnames ? c->cnames : "") == 0 &&
		    !a.addr_after_cname, "%s: CNAMEs \"%s\"", c->what,
		    a.cnames);
		CHECK_MSG(a.ede == c->ede, "%s: EDE %d", c->what, a.ede);
		if (c->ede_has != NULL)
			CHECK_MSG(strstr(a.ede_text, c->ede_has) != NULL,
			    "%s: EDE text \"%s\"", c->what, a.ede_text);
	}
}

/* Several queries in one TCP write, and one frame split over two. */
static int
test_tcp_pipeline(char *client, size_t clientlen)
{
	static const struct {
		const char	*name;
		uint16_t	 qtype;
		int		 rcode;
	} qs[] = {
		{ "allowed.test", 1, 0 },
		{ "bad.wild.test", 1, 3 },
		{ "allowed.test", 15, 5 },
		{ "x.wild.test", 28, 0 },
	};
	struct qopts o = { .udp = 0 };
	struct sockaddr_in sin;
	struct q m;
	struct ans a;
	uint8_t out[4096], in[8192];
	size_t olen = 0, have = 0, want, i;
	int s, got = 0, seen[4] = { 0 };
	uint64_t end;
	ssize_t n;

	if ((s = bound_client(SOCK_STREAM, "127.0.0.1", &sin)) == -1)
		return 0;
	snprintf(client, clientlen, "127.0.0.1:%u", ntohs(sin.sin_port));
	sin.sin_port = htons((uint16_t)srv_port);
	CHECK(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	for (i = 0; i < 4; i++) {
		build(&m, (uint16_t)(0x7000 + i), qs[i].name, qs[i].qtype, &o);
		out[olen++] = (uint8_t)(m.len >> 8);
		out[olen++] = (uint8_t)m.len;
		memcpy(out + olen, m.b, m.len);
		olen += m.len;
	}
	/* The first three whole, the fourth cut after 5 bytes for a while. */
	want = olen - (m.len + 2) + 5;
	CHECK(write(s, out, want) == (ssize_t)want);
	end = now_ms() + 200;
	while (now_ms() < end)
		spin(s, 5);
	CHECK(write(s, out + want, olen - want) == (ssize_t)(olen - want));
	end = now_ms() + 5000;
	while (got < 4 && now_ms() < end) {
		spin(s, 5);
		n = recv(s, in + have, sizeof(in) - have, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n > 0)
			have += (size_t)n;
		while (have >= 2 && have >= 2 + ((size_t)in[0] << 8 | in[1])) {
			want = (size_t)in[0] << 8 | in[1];
			if (parse_answer(in + 2, want, &a) == 0 &&
			    a.id >= 0x7000 && a.id < 0x7004) {
				i = a.id - 0x7000;
				seen[i]++;
				CHECK_MSG(a.rcode == qs[i].rcode,
				    "pipelined %zu: rcode %d", i, a.rcode);
			}
			got++;
			memmove(in, in + 2 + want, have - 2 - want);
			have -= 2 + want;
		}
	}
	CHECK_INT(got, 4);
	for (i = 0; i < 4; i++)
		CHECK_MSG(seen[i] == 1, "pipelined %zu seen %d", i, seen[i]);

	/* The connection stays open for more ... */
	build(&m, 0x7100, "allowed.test", 1, &o);
	out[0] = (uint8_t)(m.len >> 8);
	out[1] = (uint8_t)m.len;
	memcpy(out + 2, m.b, m.len);
	CHECK(write(s, out, m.len + 2) == (ssize_t)(m.len + 2));
	have = 0;
	end = now_ms() + 5000;
	while (now_ms() < end) {
		spin(s, 5);
		if ((n = recv(s, in + have, sizeof(in) - have,
		    MSG_DONTWAIT)) > 0)
			have += (size_t)n;
		if (n == 0 || (have >= 2 && have >= 2 + ((size_t)in[0] << 8 |
		    in[1])))
			break;
	}
	CHECK(have > 2 && parse_answer(in + 2, have - 2, &a) == 0 &&
	    a.id == 0x7100 && a.nans == 1);
	/* ... until it is idle for idle_timeout_ms (500). */
	end = now_ms() + 3000;
	n = -1;
	while (now_ms() < end) {
		spin(s, 5);
		n = recv(s, in, sizeof(in), MSG_DONTWAIT);
		if (n == 0 || (n == -1 && errno != EAGAIN))
			break;
	}
	CHECK_MSG(n == 0, "idle connection not closed: %zd", n);
	keep_fd(s);
	return 5;
}

/* A frame shorter than a header loses the framing: closed, unanswered. */
static void
test_tcp_bad_frame(void)
{
	static const uint8_t bad[] = { 0, 3, 1, 2, 3 };
	struct sockaddr_in sin;
	uint8_t in[64];
	uint64_t end;
	ssize_t n = -1;
	int s;

	if ((s = bound_client(SOCK_STREAM, "127.0.0.1", &sin)) == -1)
		return;
	sin.sin_port = htons((uint16_t)srv_port);
	CHECK(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	CHECK(write(s, bad, sizeof(bad)) == (ssize_t)sizeof(bad));
	end = now_ms() + 2000;
	while (now_ms() < end) {
		spin(s, 5);
		n = recv(s, in, sizeof(in), MSG_DONTWAIT);
		if (n >= 0 || errno != EAGAIN)
			break;
	}
	CHECK_MSG(n <= 0, "bad frame answered (%zd bytes)", n);
	CHECK(n == 0 || errno == ECONNRESET);
	close(s);
}

/* Garbage: dropped when there is no header, FORMERR when there is. */
static int
test_malformed(char clients[2][64])
{
	static const uint8_t shortmsg[] = { 0x12, 0x34, 1, 0, 0 };
	static const uint8_t response[] = { 0x12, 0x35, 0x81, 0x80, 0, 0, 0, 0,
	    0, 0, 0, 0 };
	static const uint8_t two_q[] = { 0x12, 0x36, 1, 0, 0, 2, 0, 0, 0, 0, 0,
	    0, 1, 'a', 0, 0, 1, 0, 1, 1, 'b', 0, 0, 1, 0, 1 };
	static const uint8_t loop[] = { 0x12, 0x37, 1, 0, 0, 1, 0, 0, 0, 0, 0,
	    0, 0xc0, 0x0c, 0, 1, 0, 1 };
	uint8_t resp[512];
	char client[64];
	struct ans a;
	ssize_t n;
	int s, extra;

	s = udp_client("127.0.0.1", srv_port, client, sizeof(client));
	CHECK(udp_ask(s, shortmsg, sizeof(shortmsg), resp, sizeof(resp), 300,
	    &extra) == 0);
	CHECK(udp_ask(s, response, sizeof(response), resp, sizeof(resp), 300,
	    &extra) == 0);
	close(s);

	s = udp_client("127.0.0.1", srv_port, clients[0], 64);
	n = udp_ask(s, two_q, sizeof(two_q), resp, sizeof(resp), 2000, &extra);
	CHECK(n == DNS_HDR_LEN && parse_answer(resp, (size_t)n, &a) == 0 &&
	    a.id == 0x1236 && a.rcode == DNS_RCODE_FORMERR && extra == 0);
	keep_fd(s);
	s = udp_client("127.0.0.1", srv_port, clients[1], 64);
	n = udp_ask(s, loop, sizeof(loop), resp, sizeof(resp), 2000, &extra);
	CHECK(n == DNS_HDR_LEN && parse_answer(resp, (size_t)n, &a) == 0 &&
	    a.id == 0x1237 && a.rcode == DNS_RCODE_FORMERR);
	keep_fd(s);
	return 2;
}

/* IPv4 clients of an IPv6 socket come as ::ffff:a.b.c.d: still IPv4. */
static int
test_mapped(char *client, size_t clientlen)
{
	struct qopts o = { .udp = 0 };
	struct q m;
	struct ans a;
	uint8_t resp[512];
	ssize_t n;
	int s, extra;

	if (srv6_port == 0) {
		printf("no IPv4-mapped listener: not tested\n");
		return 0;
	}
	build(&m, 0x5151, "allowed.test", 1, &o);
	s = udp_client("127.0.0.1", srv6_port, client, clientlen);
	n = udp_ask(s, m.b, m.len, resp, sizeof(resp), 5000, &extra);
	keep_fd(s);
	CHECK(n > 0 && parse_answer(resp, (size_t)n, &a) == 0 &&
	    a.rcode == 0 && a.nans == 1);
	return 1;
}

/*
 * Random and mutated datagrams from a client no sandbox owns, then random
 * bytes on TCP: the server answers what has a header, drops the rest, and
 * still answers a good query afterwards. Returns the answers counted.
 */
static uint32_t rnd_state = 0x5eed1234;

static uint32_t
rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static int
test_garbage(char *client, size_t clientlen)
{
	struct qopts o = { .udp = 1232 };
	struct sockaddr_in sin;
	struct q good;
	struct ans a;
	uint8_t buf[2048], resp[4096];
	char gclient[64];
	size_t len, i, k;
	uint64_t end;
	int s, t, answers = 0, extra;
	ssize_t n;

	build(&good, 0x6000, "allowed.test", 1, &o);
	s = udp_client("127.0.0.9", srv_port, client, clientlen);
	CHECK(s != -1);
	for (i = 0; i < 400; i++) {
		if (i % 2 == 0) {
			len = rnd() % 80;
			for (k = 0; k < len; k++)
				buf[k] = (uint8_t)rnd();
		} else {
			len = good.len;
			memcpy(buf, good.b, len);
			for (k = 0; k < 1 + rnd() % 4; k++)
				buf[rnd() % len] = (uint8_t)rnd();
			if (rnd() % 4 == 0)
				len = rnd() % len;
		}
		CHECK(send(s, buf, len, 0) == (ssize_t)len);
		spin(s, 1);
		while (recv(s, resp, sizeof(resp), 0) > 0)
			answers++;
	}
	end = now_ms() + 500;
	while (now_ms() < end) {
		spin(s, 5);
		while (recv(s, resp, sizeof(resp), 0) > 0)
			answers++;
	}
	keep_fd(s);
	CHECK_MSG(answers > 50 && answers < 400, "%d answers to garbage",
	    answers);

	for (i = 0; i < 20; i++) {
		if ((t = bound_client(SOCK_STREAM, "127.0.0.10", &sin)) == -1)
			break;
		sin.sin_port = htons((uint16_t)srv_port);
		inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
		CHECK(connect(t, (struct sockaddr *)&sin, sizeof(sin)) == 0);
		len = 1 + rnd() % sizeof(buf);
		for (k = 0; k < len; k++)
			buf[k] = (uint8_t)rnd();
		if (i % 2)
			buf[0] = 0;	/* a short frame length */
		n = write(t, buf, len);
		CHECK(n > 0);
		spin(t, 20);
		while (recv(t, resp, sizeof(resp), MSG_DONTWAIT) > 0)
			;
		close(t);
		spin(-1, 1);
	}

	/* Still serving. */
	s = udp_client("127.0.0.1", srv_port, gclient, sizeof(gclient));
	n = udp_ask(s, good.b, good.len, resp, sizeof(resp), 5000, &extra);
	keep_fd(s);
	CHECK(n > 0 && parse_answer(resp, (size_t)n, &a) == 0 &&
	    a.rcode == 0 && a.nans == 1);
	return answers;
}

/* ---- dig ---- */

/* Run dig with args while the loop runs; its output in out. */
static int
run_dig(char *out, size_t outlen, const char *const *args)
{
	char *argv[32], portarg[16];
	int p[2], argc = 0, st = -1, eof = 0, fd;
	size_t have = 0;
	uint64_t end;
	ssize_t n;
	pid_t pid;

	snprintf(portarg, sizeof(portarg), "%d", srv_port);
	argv[argc++] = (char *)DIG;
	argv[argc++] = (char *)"@127.0.0.1";
	argv[argc++] = (char *)"-p";
	argv[argc++] = portarg;
	argv[argc++] = (char *)"+tries=1";
	argv[argc++] = (char *)"+timeout=3";
	while (*args != NULL && argc < 30)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	if (pipe(p) == -1)
		return -1;
	fflush(NULL);
	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		dup2(p[1], 2);
		if ((fd = open("/dev/null", O_RDONLY)) != -1)
			dup2(fd, 0);
		close(p[0]);
		close(p[1]);
		execv(DIG, argv);
		_exit(127);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	end = now_ms() + 15000;
	for (;;) {
		spin(eof ? -1 : p[0], 5);
		if (!eof) {
			n = read(p[0], out + have, outlen - 1 - have);
			if (n == 0 || (n == -1 && errno != EAGAIN) ||
			    have + (size_t)(n > 0 ? n : 0) >= outlen - 1)
				eof = 1;
			if (n > 0)
				have += (size_t)n;
		}
		if (eof && waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = -1;
			break;
		}
	}
	close(p[0]);
	out[have] = '\0';
	return st;
}

struct dig_case {
	const char	*what;
	const char	*args[8];
	const char	*want[4];	/* substrings of the output */
	int		 rows;		/* audit rows it makes */
};

static const struct dig_case dig_cases[] = {
	{ "allowed", { "allowed.test", "A", NULL },
	    { "status: NOERROR", "allowed.test.\t\t60\tIN\tA\t151.101.1.10" },
	    1 },
	{ "denied: EDE", { "bad.wild.test", "A", NULL },
	    { "status: NXDOMAIN", "EDE: 15 (Blocked)",
	    "blocked by policy dnspol: policy-deny" }, 1 },
	{ "MX refused", { "allowed.test", "MX", NULL },
	    { "status: REFUSED", "EDE: 18 (Prohibited)" }, 1 },
	{ "TCP", { "+tcp", "allowed.test", "AAAA", NULL },
	    { "status: NOERROR", "2606:4700::10" }, 1 },
	{ "truncated, then TCP", { "+noedns", "big.test", "A", NULL },
	    { "Truncated, retrying in TCP mode", "ANSWER: 32," }, 2 },
	{ "no sandbox", { "-b", "127.0.0.2", "allowed.test", NULL },
	    { "status: REFUSED", "no-identity" }, 1 },
};

static int
test_dig(void)
{
	char out[65536];
	size_t i, k;
	int st, rows = 0;

	for (i = 0; i < sizeof(dig_cases) / sizeof(dig_cases[0]); i++) {
		st = run_dig(out, sizeof(out), dig_cases[i].args);
		CHECK_MSG(st == 0, "dig %s: status %d", dig_cases[i].what, st);
		for (k = 0; k < 4 && dig_cases[i].want[k] != NULL; k++)
			CHECK_MSG(strstr(out, dig_cases[i].want[k]) != NULL,
			    "dig %s: no \"%s\" in:\n%s", dig_cases[i].what,
			    dig_cases[i].want[k], out);
		rows += dig_cases[i].rows;
	}
	return rows;
}

/* ---- address memory and audit ---- */

static void
test_addrmem(struct addrmem *mem)
{
	static const struct {
		const char	*sandbox;
		const char	*name;
		const char	*addr;
		int		 want;
	} has[] = {
		{ "dnsbox", "allowed.test", "151.101.1.10", 1 },
		/* Every address of the answer, not only the type asked. */
		{ "dnsbox", "allowed.test", "2606:4700::10", 1 },
		{ "dnsbox", "x.wild.test", "151.101.1.11", 1 },
		{ "dnsbox", "intra.test", "198.19.2.3", 1 },
		{ "dnsbox", "cname.test", "151.101.1.10", 1 },
		/* Under the name asked, not the chain's names. */
		{ "dnsbox", "chain3.test", "151.101.1.20", 1 },
		{ "dnsbox", "chain3.test", "2606:4700::20", 1 },
		{ "dnsbox", "mid3.test", "151.101.1.20", 0 },
		{ "dnsbox", "chainend.test", "151.101.1.20", 0 },
		{ "dnsbox", "badchain.test", "198.18.200.5", 0 },
		{ "dnsbox", "big.test", "151.101.2.32", 1 },
		/* denied names are not remembered */
		{ "dnsbox", "priv.test", "198.18.200.5", 0 },
		{ "dnsbox", "bad.wild.test", "151.101.1.12", 0 },
		{ "dnsbox", "mixed.test", "151.101.1.13", 0 },
		{ "dnsbox", "other.test", "151.101.1.15", 0 },
		/* nor for a sandbox that did not ask */
		{ "txtbox", "allowed.test", "151.101.1.10", 0 },
	};
	struct netaddr a;
	char name[300];
	size_t i;

	for (i = 0; i < sizeof(has) / sizeof(has[0]); i++) {
		a = dnstest_addr(has[i].addr);
		CHECK_MSG(addrmem_has(mem, has[i].sandbox, has[i].name, &a) ==
		    has[i].want, "addrmem %s %s %s", has[i].sandbox,
		    has[i].name, has[i].addr);
	}
	a = dnstest_addr("198.19.2.3");
	CHECK_INT(addrmem_lookup(mem, "dnsbox", &a, name, sizeof(name)), 0);
	CHECK_STR(name, "intra.test");
	a = dnstest_addr("198.18.200.5");
	CHECK_INT(addrmem_lookup(mem, "dnsbox", &a, name, sizeof(name)), -1);
}

static int
sql_text_eq(sqlite3_stmt *st, int col, const char *want)
{
	const unsigned char *v = sqlite3_column_text(st, col);

	if (want == NULL)
		return sqlite3_column_type(st, col) == SQLITE_NULL;
	return v != NULL && strcmp((const char *)v, want) == 0;
}

/* The row's ip: the first answer, any answer (first unknown), or none. */
static int
sql_ip_ok(sqlite3_stmt *st, int col, const struct scase *c)
{
	const unsigned char *v = sqlite3_column_text(st, col);

	if (c->nans == 0 || c->tc)
		return v == NULL;
	if (c->first != NULL)
		return v != NULL && strcmp((const char *)v, c->first) == 0;
	return v != NULL && strncmp((const char *)v, "151.101.2.", 10) == 0;
}

static void
check_audit(int extra_rows, char malformed[2][64], const char *pipe_client,
    const char *mapped_client, const char *garbage_client,
    int garbage_answers)
{
	static const char sql[] = "SELECT sandbox, host, method, ip, status,"
	    " decision, rule, reason, port, duration_ms FROM events"
	    " WHERE kind = 'dns' AND client = ?";
	/*
	 * A case's rows: its client's address and port, its name and type
	 * (the kernel may give two cases' sockets the same ephemeral port).
	 */
	static const char csql[] = "SELECT sandbox, host, method, ip, status,"
	    " decision, rule, reason, port, duration_ms FROM events"
	    " WHERE kind = 'dns' AND client = ? AND host IS ? AND method IS ?";
	const struct scase *c;
	sqlite3 *db;
	sqlite3_stmt *st, *cst;
	char tbuf[16];
	const char *method;
	size_t i;
	int rows, total = 0, rc;

	CHECK(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) ==
	    SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, csql, -1, &cst, NULL) == SQLITE_OK);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = &cases[i];
		rows = 0;
		method = c->method ? c->method : dns_type_name(c->qtype, tbuf,
		    sizeof(tbuf));
		sqlite3_reset(cst);
		sqlite3_bind_text(cst, 1, c->client, -1, SQLITE_STATIC);
		sqlite3_bind_text(cst, 2, c->host ? c->host : c->name, -1,
		    SQLITE_STATIC);
		sqlite3_bind_text(cst, 3, method, -1, SQLITE_TRANSIENT);
		while ((rc = sqlite3_step(cst)) == SQLITE_ROW) {
			rows++;
			CHECK_MSG(sql_text_eq(cst, 0, c->sandbox) &&
			    sql_text_eq(cst, 1, c->host ? c->host : c->name) &&
			    sql_text_eq(cst, 2, method) &&
			    sql_ip_ok(cst, 3, c) &&
			    sqlite3_column_int(cst, 4) == c->rcode &&
			    sql_text_eq(cst, 5, c->decision) &&
			    sql_text_eq(cst, 6, c->rule) &&
			    sql_text_eq(cst, 7, c->reason) &&
			    sqlite3_column_type(cst, 8) == SQLITE_NULL &&
			    sqlite3_column_int(cst, 9) >= 0,
			    "%s: audit row %s|%s|%s|%s|%d|%s|%s|%s", c->what,
			    sqlite3_column_text(cst, 0),
			    sqlite3_column_text(cst, 1),
			    sqlite3_column_text(cst, 2),
			    sqlite3_column_text(cst, 3),
			    sqlite3_column_int(cst, 4),
			    sqlite3_column_text(cst, 5),
			    sqlite3_column_text(cst, 6),
			    sqlite3_column_text(cst, 7));
		}
		CHECK_MSG(rows == 1, "%s: %d audit rows for %s", c->what, rows,
		    c->client);
		total++;
	}
	sqlite3_finalize(cst);
	for (i = 0; i < 2; i++) {
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, malformed[i], -1, SQLITE_STATIC);
		CHECK(sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_int(st, 4) == DNS_RCODE_FORMERR &&
		    sql_text_eq(st, 0, "dnsbox") &&
		    sql_text_eq(st, 5, "error") &&
		    sql_text_eq(st, 7, "bad-request"));
	}
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, pipe_client, -1, SQLITE_STATIC);
	rows = 0;
	while (sqlite3_step(st) == SQLITE_ROW)
		rows++;
	CHECK_INT(rows, 5);
	if (mapped_client[0] != '\0') {
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, mapped_client, -1, SQLITE_STATIC);
		CHECK_MSG(sqlite3_step(st) == SQLITE_ROW &&
		    sql_text_eq(st, 0, "dnsbox") &&
		    sql_text_eq(st, 5, "allow"), "mapped client %s",
		    mapped_client);
	}
	/* Every answer to garbage has its row; the dropped ones none. */
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, garbage_client, -1, SQLITE_STATIC);
	rows = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		rows++;
		if (!sql_text_eq(st, 0, NULL))
			CHECK_MSG(0, "garbage row with a sandbox");
	}
	CHECK_INT(rows, garbage_answers);
	sqlite3_finalize(st);
	CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM events WHERE "
	    "kind = 'dns' AND client NOT LIKE '127.0.0.9:%' AND "
	    "client NOT LIKE '127.0.0.10:%'", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK_INT(sqlite3_column_int(st, 0), total + extra_rows);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/*
 * The upstream's answers include public addresses (as data: nothing here
 * connects to them). As root, run in a network namespace of our own with
 * only lo up, so that not even a bug could send a packet anywhere.
 */
static void
isolate(void)
{
	pid_t pid;
	int st;

	if (geteuid() != 0 || getenv("SANDGATE_ISOLATED") != NULL)
		return;
	if (unshare(CLONE_NEWNET) == -1) {
		printf("note: unshare(CLONE_NEWNET) failed; running on the host's "
		    "network (nothing connects to the answers' addresses)\n");
		return;
	}
	setenv("SANDGATE_ISOLATED", "1", 1);
	if ((pid = fork()) == 0) {
		execl("/usr/sbin/ip", "ip", "link", "set", "lo", "up", (char *)NULL);
		_exit(127);
	}
	if (pid == -1 || waitpid(pid, &st, 0) == -1 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		fprintf(stderr, "cannot bring lo up in the test's namespace\n");
		exit(1);
	}
}

int
main(void)
{
	char path[512], *paths[1], malformed[2][64], pipe_client[64];
	char mapped_client[64] = "", garbage_client[64];
	const char *data = getenv("SANDGATE_TEST_DATA"), *errstr;
	struct dns_server_env env;
	struct dns_server *srv, *srv6 = NULL;
	struct addrmem *mem;
	struct resolver *res;
	struct audit *audit;
	struct config cfg;
	struct sockaddr_in *sin;
	struct diag d;
	int udp, tcp, udp6, extra = 0, attempt, garbage;

	if (access(DNSTEST_DNSMASQ, X_OK) == -1 || access(DIG, X_OK) == -1) {
		printf("SKIP: needs %s and %s\n", DNSTEST_DNSMASQ, DIG);
		return 77;
	}
	isolate();
	signal(SIGPIPE, SIG_IGN);
	if ((dm_port = dnstest_dnsmasq_start(&zone)) == -1) {
		fprintf(stderr, "cannot start %s\n", DNSTEST_DNSMASQ);
		return 1;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sg-test-dns-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	snprintf(dbpath, sizeof(dbpath), "%s/audit.db", tmpdir);

	snprintf(path, sizeof(path), "%s/dns/data/dns_policy.yaml",
	    data ? data : "..");
	paths[0] = path;
	diag_init(&d);
	pol = policy_load_paths(paths, 1, &d);
	if (pol == NULL)
		diag_print(&d, stderr);
	diag_free(&d);
	CHECK(pol != NULL);

	base = event_base_new();
	memset(&cfg, 0, sizeof(cfg));
	sin = (struct sockaddr_in *)&cfg.resolvers[0];
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)dm_port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cfg.n_resolvers = 1;
	res = resolver_new(base, &cfg);
	mem = addrmem_new(1000);
	audit = audit_open(dbpath, NULL, &errstr);
	CHECK(base != NULL && res != NULL && mem != NULL && audit != NULL);
	if (pol == NULL || base == NULL || res == NULL || mem == NULL ||
	    audit == NULL)
		return check_summary();

	memset(&env, 0, sizeof(env));
	env.base = base;
	env.resolver = res;
	env.mem = mem;
	env.audit = audit;
	env.policy_get = policy_get_cb;
	env.max_ttl = 60;
	env.idle_timeout_ms = 500;
	udp = tcp = -1;
	for (attempt = 0; attempt < 10 && (udp == -1 || tcp == -1);
	    attempt++) {
		if (udp != -1)
			close(udp);
		srv_port = dnstest_free_port(1);
		udp = bind_sock(AF_INET, SOCK_DGRAM, "127.0.0.1", srv_port);
		tcp = bind_sock(AF_INET, SOCK_STREAM, "127.0.0.1", srv_port);
	}
	srv = dns_server_new(&env, udp, tcp);
	CHECK(srv != NULL);
	if (srv == NULL)
		return check_summary();
	srv6_port = dnstest_free_port(1);
	udp6 = bind_sock(AF_INET6, SOCK_DGRAM, "::ffff:127.0.0.1", srv6_port);
	if (udp6 == -1 || (srv6 = dns_server_new(&env, udp6, -1)) == NULL)
		srv6_port = 0;
	/* Neither socket: nothing to serve. */
	CHECK(dns_server_new(&env, -1, -1) == NULL);

	run_cases();
	extra += test_tcp_pipeline(pipe_client, sizeof(pipe_client));
	test_tcp_bad_frame();
	extra += test_malformed(malformed);
	extra += test_mapped(mapped_client, sizeof(mapped_client));
	extra += test_dig();
	garbage = test_garbage(garbage_client, sizeof(garbage_client));
	extra++;	/* its good query afterwards */
	test_addrmem(mem);

	dns_server_free(srv);
	dns_server_free(srv6);
	resolver_free(res);
	audit_close(audit);
	check_audit(extra, malformed, pipe_client, mapped_client,
	    garbage_client, garbage);
	close_kept();

	addrmem_free(mem);
	policy_unref(pol);
	event_base_free(base);
	dnstest_dnsmasq_stop();
	nftw(tmpdir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
