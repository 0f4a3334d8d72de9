/*
 * Tests for the c-ares resolver: a real dnsmasq as upstream for ordinary
 * answers, plus a scripted UDP DNS server on the test's own event loop for
 * answers dnsmasq cannot be made to give (SOA TTLs, SERVFAIL, silence, ...).
 */

#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/config.h"
#include "parse/dns_msg.h"
#include "dns/resolver.h"
#include "helper_dns.h"

#define MAX_EXPECT	4
#define TCP_ADDRS	40

static struct event_base *base;
static int	 dm_port;
static int	 ndone;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A timer that keeps firing: proof the loop is never blocked. */
static struct {
	int		ticks;
	uint64_t	last;
	uint64_t	max_gap;
} tick;

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t t = now_ms();

	if (tick.last != 0 && t - tick.last > tick.max_gap)
		tick.max_gap = t - tick.last;
	tick.last = t;
	tick.ticks++;
}

static void
tick_reset(void)
{
	tick.ticks = 0;
	tick.last = 0;
	tick.max_gap = 0;
}

/* Run the loop until ndone reaches want or ms pass. */
static void
run_until(int want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (ndone < want && now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static void
run_for(int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

/* What one callback saw. */
struct res {
	int		 called;
	int		 result;
	size_t		 n;
	uint32_t	 ttl;
	int		 v4_first;
	char		 addr[RESOLVER_MAX_ADDRS][INET6_ADDRSTRLEN];
	int		 family[RESOLVER_MAX_ADDRS];
	/* Optional actions taken from inside the callback. */
	struct resolver	*free_r;
	struct resolver_query *cancel_q;
	struct resolver	*lookup_r;
	const char	*lookup_name;
	struct res	*lookup_res;
};

static void res_cb(int, const struct netaddr *, size_t, uint32_t, void *);

static void
res_cb(int result, const struct netaddr *addrs, size_t n, uint32_t ttl,
    void *arg)
{
	struct res *x = arg;
	size_t i;
	int seen6 = 0;

	x->called++;
	x->result = result;
	x->n = n;
	x->ttl = ttl;
	x->v4_first = 1;
	for (i = 0; i < n && i < RESOLVER_MAX_ADDRS; i++) {
		x->family[i] = addrs[i].family;
		inet_ntop(addrs[i].family, addrs[i].a, x->addr[i],
		    sizeof(x->addr[i]));
		if (addrs[i].family == AF_INET6)
			seen6 = 1;
		else if (seen6)
			x->v4_first = 0;
	}
	ndone++;
	if (x->cancel_q != NULL) {
		resolver_cancel(x->cancel_q);
		x->cancel_q = NULL;
	}
	if (x->lookup_r != NULL) {
		CHECK(resolver_lookup(x->lookup_r, x->lookup_name, res_cb,
		    x->lookup_res) != NULL);
		CHECK_INT(x->lookup_res->called, 0);
		x->lookup_r = NULL;
	}
	if (x->free_r != NULL) {
		resolver_free(x->free_r);
		x->free_r = NULL;
	}
}

static int
res_has(const struct res *x, const char *addr)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		if (strcmp(x->addr[i], addr) == 0)
			return 1;
	return 0;
}

/* A resolver asking "addr port, ..." in that order (NULL: none). */
static struct resolver *
resolver_for(const char *servers)
{
	struct config cfg;
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;
	char list[256], *p, *tok, *save = NULL, *sp;
	int i;

	memset(&cfg, 0, sizeof(cfg));
	cfg.resolvers_system = 0;
	snprintf(list, sizeof(list), "%s", servers ? servers : "");
	for (p = list; (tok = strtok_r(p, ",", &save)) != NULL; p = NULL) {
		i = cfg.n_resolvers++;
		if ((sp = strchr(tok, ' ')) == NULL)
			return NULL;
		*sp++ = '\0';
		sin = (struct sockaddr_in *)&cfg.resolvers[i];
		sin6 = (struct sockaddr_in6 *)&cfg.resolvers[i];
		if (inet_pton(AF_INET, tok, &sin->sin_addr) == 1) {
			sin->sin_family = AF_INET;
			sin->sin_port = htons((uint16_t)atoi(sp));
		} else if (inet_pton(AF_INET6, tok, &sin6->sin6_addr) == 1) {
			sin6->sin6_family = AF_INET6;
			sin6->sin6_port = htons((uint16_t)atoi(sp));
		} else
			return NULL;
	}
	return resolver_new(base, &cfg);
}

static struct resolver *
resolver_for_port(int port)
{
	char s[64];

	snprintf(s, sizeof(s), "127.0.0.1 %d", port);
	return resolver_for(s);
}

static void
stats(struct resolver *r, uint64_t *hits, uint64_t *misses, size_t *entries)
{
	resolver_stats(r, hits, misses, entries);
}

/* ---- a little DNS message writer, for the fake server ---- */

struct msg {
	uint8_t	b[512];
	size_t	len;
	int	overflow;
};

static void
put8(struct msg *m, unsigned v)
{
	if (m->len >= sizeof(m->b)) {
		m->overflow = 1;
		return;
	}
	m->b[m->len++] = (uint8_t)v;
}

static void
put16(struct msg *m, unsigned v)
{
	put8(m, (v >> 8) & 0xff);
	put8(m, v & 0xff);
}

static void
put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void
put_name(struct msg *m, const char *name)
{
	const char *p = name, *dot;
	size_t l;

	while (*p != '\0') {
		dot = strchr(p, '.');
		l = dot ? (size_t)(dot - p) : strlen(p);
		put8(m, (unsigned)l);
		while (l-- > 0)
			put8(m, (unsigned char)*p++);
		if (*p == '.')
			p++;
	}
	put8(m, 0);
}

/* ---- dnsmasq ---- */

static const char *const records[] = {
	"--local=/test/",
	"--local-ttl=5",
	"--address=/a.test/198.18.0.10",
	"--host-record=multi.test,198.18.0.11",
	"--host-record=multi.test,198.18.0.12",
	"--host-record=v6.test,2001:db8::1",
	"--host-record=both.test,198.18.0.15,2001:db8::2",
	"--host-record=mapped.test,::ffff:198.18.0.14",
	"--host-record=short.test,198.18.0.13,1",
	"--host-record=hit.test,198.18.0.16",
	"--host-record=co.test,198.18.0.17",
	"--host-record=cancel.test,198.18.0.18",
	"--host-record=cancel2.test,198.18.0.19",
	"--host-record=reenter.test,198.18.0.20",
	"--cname=alias.test,multi.test",
	"--cname=alias2.test,alias.test",
	"--address=/nx.test/",
	NULL
};

/* tcp.test: too many for 512 bytes of UDP, so c-ares asks again on TCP. */
static const struct dnstest_zone zone = {
	.records = records, .big_name = "tcp.test", .big_net = "198.18.3.",
	.big_n = TCP_ADDRS, .log_queries = 1,
};

/* ---- a scripted DNS server on the test's event loop ---- */

struct fake {
	const char	*name;
	uint16_t	 qtype;
	int		 rcode;		/* 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN */
	int		 drop;		/* never answer */
	uint32_t	 ttl;
	const char	*addrs;		/* comma-separated, for qtype */
	int		 gen;		/* or this many generated addresses */
	const char	*owner;		/* owner of the address records */
	const char	*cname;		/* qname CNAME cname, first */
	const char	*cnames;	/* "owner=target,...": CNAMEs, in order */
	uint32_t	 cname_ttl;
	int		 soa;		/* an SOA in the authority section */
	uint32_t	 soa_ttl;
	uint32_t	 soa_min;
	int		 soa_cut;	/* SOA rdata cut to this many bytes */
	int		 soa_lie;	/* SOA rdlength past the end */
	int		 queries;	/* how often asked */
};

#define A	.qtype = 1
#define AAAA	.qtype = 28
#define NX	.rcode = 3
#define SERVFAIL .rcode = 2
#define SOA(t, m) .soa = 1, .soa_ttl = (t), .soa_min = (m)

static struct fake fakes[] = {
	{ .name = "big.test", A, .ttl = 100000, .addrs = "198.18.2.1" },
	{ .name = "zero.test", A, .ttl = 0, .addrs = "198.18.2.2" },
	{ .name = "partial.test", A, .ttl = 300, .addrs = "198.18.2.3" },
	{ .name = "partial.test", AAAA, SERVFAIL },
	{ .name = "dup.test", A, .ttl = 60, .addrs = "198.18.2.4" },
	{ .name = "dup.test", AAAA, .ttl = 60,
	    .addrs = "::ffff:198.18.2.4,2001:db8::4" },
	{ .name = "order.test", AAAA, .ttl = 60, .addrs = "2001:db8::5" },
	{ .name = "order.test", A, .ttl = 60, .addrs = "198.18.2.5" },
	{ .name = "cap.test", A, .ttl = 120, .gen = 20 },
	{ .name = "cap.test", AAAA, .ttl = 90, .gen = 15 },
	{ .name = "chain.test", A, .ttl = 600, .addrs = "198.18.2.6",
	    .owner = "mid.test", .cname = "mid.test", .cname_ttl = 7 },
	{ .name = "soa1.test", A, NX, SOA(3600, 1) },
	{ .name = "soa1.test", AAAA, NX, SOA(3600, 1) },
	{ .name = "soattl.test", A, NX, SOA(2, 600) },
	{ .name = "soattl.test", AAAA, NX, SOA(600, 600) },
	{ .name = "soabig.test", A, NX, SOA(86400, 86400) },
	{ .name = "soabig.test", AAAA, NX, SOA(86400, 86400) },
	{ .name = "soahalf.test", A, NX, SOA(600, 600) },
	{ .name = "nodata.test", A, SOA(60, 60) },
	{ .name = "nodata.test", AAAA, SOA(60, 60) },
	{ .name = "soacut.test", A, NX, SOA(5, 5),
	    .soa_cut = 10 },
	{ .name = "soacut.test", AAAA, NX, SOA(5, 5),
	    .soa_cut = 10 },
	{ .name = "soalie.test", A, NX, SOA(5, 5),
	    .soa_lie = 1 },
	{ .name = "soalie.test", AAAA, NX, SOA(5, 5),
	    .soa_lie = 1 },
	{ .name = "servfail.test", A, SERVFAIL },
	{ .name = "servfail.test", AAAA, SERVFAIL },
	{ .name = "cnameonly.test", A, .cname = "elsewhere.test",
	    .cname_ttl = 60 },
	{ .name = "wrongowner.test", A, .ttl = 60, .addrs = "198.18.2.7",
	    .owner = "evil.test" },
	{ .name = "silent.test", A, .drop = 1 },
	{ .name = "silent.test", AAAA, .drop = 1 },
	{ .name = "halfsilent.test", A, .ttl = 300, .addrs = "198.18.2.8" },
	{ .name = "halfsilent.test", AAAA, .drop = 1 },
	/* CNAME chains, in any order; loops; a CNAME nobody asked about. */
	{ .name = "chain2.test", A, .ttl = 300, .addrs = "198.18.2.9",
	    .owner = "m2.test", .cname_ttl = 20,
	    .cnames = "m1.test=M2.test,chain2.test=m1.test" },
	{ .name = "chain2.test", AAAA, .ttl = 300, .addrs = "2001:db8::9",
	    .owner = "v6.m.test", .cname_ttl = 200,
	    .cnames = "chain2.test=v6.m.test" },
	{ .name = "loop.test", A, .ttl = 60, .addrs = "198.18.2.10",
	    .owner = "l2.test", .cname_ttl = 60,
	    .cnames = "loop.test=l2.test,l2.test=loop.test" },
	{ .name = "loop.test", AAAA, .ttl = 60, .cname_ttl = 60,
	    .cnames = "loop.test=loop.test" },
	{ .name = "loophalf.test", A, .ttl = 60, .addrs = "198.18.2.11",
	    .owner = "l2.test", .cname_ttl = 60,
	    .cnames = "loophalf.test=l2.test,l2.test=loophalf.test" },
	{ .name = "loophalf.test", AAAA, .ttl = 300, .addrs = "2001:db8::b" },
	{ .name = "stray.test", A, .ttl = 60, .addrs = "198.18.2.12",
	    .cname_ttl = 1, .cnames = "other.test=evil.test" },
};

#undef A
#undef AAAA
#undef NX
#undef SERVFAIL
#undef SOA

static int	fake_fd = -1, fake6_fd = -1;
static int	fake_port, fake6_port;
static struct event *fake_ev, *fake6_ev;

static int
fake_parse_qname(const uint8_t *b, size_t len, size_t *off, char *out,
    size_t outlen)
{
	size_t o = *off, w = 0, l, i;

	for (;;) {
		if (o >= len)
			return -1;
		l = b[o++];
		if (l == 0)
			break;
		if (l > 63 || o + l > len || w + l + 2 > outlen)
			return -1;
		if (w > 0)
			out[w++] = '.';
		for (i = 0; i < l; i++) {
			uint8_t c = b[o + i];
			out[w++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		o += l;
	}
	out[w] = '\0';
	*off = o;
	return 0;
}

static void
fake_put_addr(struct msg *m, const struct fake *f, uint16_t qtype,
    const char *text)
{
	uint8_t raw[16];
	int fam = qtype == 1 ? AF_INET : AF_INET6;
	size_t l = qtype == 1 ? 4 : 16, i;

	if (inet_pton(fam, text, raw) != 1) {
		fprintf(stderr, "bad fake address %s\n", text);
		return;
	}
	if (f->owner != NULL)
		put_name(m, f->owner);
	else
		put16(m, 0xc00c);	/* the question's name */
	put16(m, qtype);
	put16(m, 1);
	put32(m, f->ttl);
	put16(m, (unsigned)l);
	for (i = 0; i < l; i++)
		put8(m, raw[i]);
}

static int
fake_answers(struct msg *m, const struct fake *f, uint16_t qtype)
{
	char list[256], text[64], *p, *tok, *save = NULL;
	int n = 0, i;

	if (f->cname != NULL) {
		put16(m, 0xc00c);
		put16(m, 5);
		put16(m, 1);
		put32(m, f->cname_ttl);
		put16(m, (unsigned)strlen(f->cname) + 2);
		put_name(m, f->cname);
		n++;
	}
	if (f->cnames != NULL) {
		char *eq;

		snprintf(list, sizeof(list), "%s", f->cnames);
		for (p = list; (tok = strtok_r(p, ",", &save)) != NULL;
		    p = NULL) {
			if ((eq = strchr(tok, '=')) == NULL)
				continue;
			*eq++ = '\0';
			put_name(m, tok);
			put16(m, 5);
			put16(m, 1);
			put32(m, f->cname_ttl);
			put16(m, (unsigned)strlen(eq) + 2);
			put_name(m, eq);
			n++;
		}
		save = NULL;
	}
	if (f->addrs != NULL) {
		snprintf(list, sizeof(list), "%s", f->addrs);
		for (p = list; (tok = strtok_r(p, ",", &save)) != NULL;
		    p = NULL) {
			fake_put_addr(m, f, qtype, tok);
			n++;
		}
	}
	for (i = 0; i < f->gen; i++) {
		if (qtype == 1)
			snprintf(text, sizeof(text), "198.18.1.%d", i + 1);
		else
			snprintf(text, sizeof(text), "2001:db8::1:%x", i + 1);
		fake_put_addr(m, f, qtype, text);
		n++;
	}
	return n;
}

static void
fake_put_soa(struct msg *m, const struct fake *f)
{
	size_t rdlen_at, start;

	put_name(m, "test");
	put16(m, 6);
	put16(m, 1);
	put32(m, f->soa_ttl);
	rdlen_at = m->len;
	put16(m, 0);
	start = m->len;
	put_name(m, "ns.test");
	put16(m, 0xc00c);	/* RNAME as a pointer, which is legal */
	put32(m, 1);		/* serial */
	put32(m, 1200);
	put32(m, 180);
	put32(m, 1209600);
	put32(m, f->soa_min);
	if (f->soa_cut > 0)
		m->len = start + (size_t)f->soa_cut;
	m->b[rdlen_at] = (uint8_t)((m->len - start) >> 8);
	m->b[rdlen_at + 1] = (uint8_t)(m->len - start);
	if (f->soa_lie)
		m->b[rdlen_at + 1] += 40;
}

static void
fake_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	uint8_t req[512];
	char qname[256];
	struct msg m;
	struct fake *f = NULL;
	ssize_t len;
	size_t off = 12, qend, i;
	uint16_t qtype;
	int an = 0, rcode = 3;

	if ((len = recvfrom(fd, req, sizeof(req), 0, (struct sockaddr *)&ss,
	    &sl)) < 12)
		return;
	if (fake_parse_qname(req, (size_t)len, &off, qname,
	    sizeof(qname)) == -1 || (size_t)len - off < 4)
		return;
	qtype = (uint16_t)(req[off] << 8 | req[off + 1]);
	qend = off + 4;
	for (i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		if (strcmp(fakes[i].name, qname) == 0 &&
		    fakes[i].qtype == qtype)
			f = &fakes[i];
	if (f != NULL) {
		f->queries++;
		if (f->drop)
			return;
		rcode = f->rcode;
	}

	memset(&m, 0, sizeof(m));
	put8(&m, req[0]);
	put8(&m, req[1]);
	put16(&m, 0x8180 | (unsigned)rcode);
	put16(&m, 1);
	put16(&m, 0);	/* ancount, patched below */
	put16(&m, f != NULL && f->soa ? 1 : 0);
	put16(&m, 0);
	for (i = 12; i < qend; i++)
		put8(&m, req[i]);
	if (f != NULL && rcode == 0)
		an = fake_answers(&m, f, qtype);
	if (f != NULL && f->soa)
		fake_put_soa(&m, f);
	m.b[6] = (uint8_t)(an >> 8);
	m.b[7] = (uint8_t)an;
	if (m.overflow) {
		fprintf(stderr, "fake answer for %s too long\n", qname);
		return;
	}
	sendto(fd, m.b, m.len, 0, (struct sockaddr *)&ss, sl);
}

/* The scripted server on 127.0.0.1 or ::1, on a port of its own. */
static int
fake_listen(int family, int *fdp, int *portp, struct event **evp)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		sin6->sin6_addr = in6addr_loopback;
	if ((*fdp = socket(family, SOCK_DGRAM | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(*fdp, (struct sockaddr *)&ss, family == AF_INET ?
	    sizeof(*sin) : sizeof(*sin6)) == -1 ||
	    getsockname(*fdp, (struct sockaddr *)&ss, &sl) == -1)
		return -1;
	*portp = ntohs(family == AF_INET ? sin->sin_port : sin6->sin6_port);
	*evp = event_new(base, *fdp, EV_READ | EV_PERSIST, fake_read_cb, NULL);
	return *evp == NULL ? -1 : event_add(*evp, NULL);
}

static int
fake_queries(const char *name, uint16_t qtype)
{
	size_t i;

	for (i = 0; i < sizeof(fakes) / sizeof(fakes[0]); i++)
		if (strcmp(fakes[i].name, name) == 0 &&
		    fakes[i].qtype == qtype)
			return fakes[i].queries;
	return -1;
}

/* ---- the tests ---- */

static void
fake_stop(int *fdp, struct event **evp)
{
	if (*evp != NULL)
		event_free(*evp);
	if (*fdp != -1)
		close(*fdp);
	*evp = NULL;
	*fdp = -1;
}

struct answer_case {
	const char	*name;
	int		 result;
	size_t		 n;		/* addresses expected */
	const char	*expect[MAX_EXPECT];	/* must be present */
	int		 ordered;	/* and in this order */
	uint32_t	 ttl_min, ttl_max;
};

/* Look every name up at once, then check each answer against its row. */
static void
run_answer_table(struct resolver *r, const struct answer_case *cases,
    size_t ncases)
{
	struct res *res;
	size_t i, j;
	int want;

	res = calloc(ncases, sizeof(*res));
	CHECK(res != NULL);
	if (res == NULL)
		return;
	ndone = 0;
	for (i = 0; i < ncases; i++) {
		CHECK(resolver_lookup(r, cases[i].name, res_cb,
		    &res[i]) != NULL);
		CHECK_MSG(res[i].called == 0, "%s answered synchronously",
		    cases[i].name);
	}
	want = (int)ncases;
	run_until(want, 8000);
	for (i = 0; i < ncases; i++) {
		const struct answer_case *c = &cases[i];
		struct res *x = &res[i];

		CHECK_MSG(x->called == 1, "%s: called %d times", c->name,
		    x->called);
		CHECK_MSG(x->result == c->result, "%s: result %d, want %d",
		    c->name, x->result, c->result);
		CHECK_MSG(x->n == c->n, "%s: %zu addresses, want %zu",
		    c->name, x->n, c->n);
		CHECK_MSG(x->v4_first, "%s: IPv6 before IPv4", c->name);
		for (j = 0; j < MAX_EXPECT && c->expect[j] != NULL; j++) {
			CHECK_MSG(res_has(x, c->expect[j]), "%s: no %s",
			    c->name, c->expect[j]);
			if (c->ordered && j < x->n)
				CHECK_MSG(strcmp(x->addr[j],
				    c->expect[j]) == 0, "%s: [%zu] is %s",
				    c->name, j, x->addr[j]);
		}
		CHECK_MSG(x->ttl >= c->ttl_min && x->ttl <= c->ttl_max,
		    "%s: ttl %u not in [%u, %u]", c->name, x->ttl,
		    c->ttl_min, c->ttl_max);
	}
	free(res);
}

static void
test_dnsmasq_answers(struct resolver *r)
{
	static const struct answer_case cases[] = {
		{ "a.test", RESOLVER_OK, 1, { "198.18.0.10" }, 1, 1, 5 },
		{ "multi.test", RESOLVER_OK, 2,
		    { "198.18.0.11", "198.18.0.12" }, 0, 1, 5 },
		{ "v6.test", RESOLVER_OK, 1, { "2001:db8::1" }, 1, 1, 5 },
		{ "both.test", RESOLVER_OK, 2,
		    { "198.18.0.15", "2001:db8::2" }, 1, 1, 5 },
		{ "mapped.test", RESOLVER_OK, 1, { "198.18.0.14" }, 1, 1, 5 },
		{ "alias.test", RESOLVER_OK, 2,
		    { "198.18.0.11", "198.18.0.12" }, 0, 1, 5 },
		{ "alias2.test", RESOLVER_OK, 2,
		    { "198.18.0.11", "198.18.0.12" }, 0, 1, 5 },
		{ "nx.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 30 },
		{ "www.nx.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 30 },
		{ "nosuch.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 30 },
		{ "tcp.test", RESOLVER_OK, RESOLVER_MAX_ADDRS, { NULL }, 0, 1,
		    5 },
	};

	run_answer_table(r, cases, sizeof(cases) / sizeof(cases[0]));
	/* UDP, then TCP */
	CHECK_INT(dnstest_dnsmasq_count("query[A] tcp.test from"), 2);
}

static void
test_fake_answers(struct resolver *r)
{
	static const struct answer_case cases[] = {
		/* TTLs: capped at an hour, at least a second. */
		{ "big.test", RESOLVER_OK, 1, { "198.18.2.1" }, 1, 3600, 3600 },
		{ "zero.test", RESOLVER_OK, 1, { "198.18.2.2" }, 1, 1, 1 },
		/* AAAA SERVFAIL: the A answer, held only briefly. */
		{ "partial.test", RESOLVER_OK, 1, { "198.18.2.3" }, 1, 1, 30 },
		/* ::ffff:a.b.c.d is a.b.c.d, and listed once. */
		{ "dup.test", RESOLVER_OK, 2, { "198.18.2.4", "2001:db8::4" },
		    1, 60, 60 },
		{ "order.test", RESOLVER_OK, 2, { "198.18.2.5", "2001:db8::5" },
		    1, 60, 60 },
		/* 20 + 15 answers: all 20 IPv4 first, then 12 IPv6. */
		{ "cap.test", RESOLVER_OK, RESOLVER_MAX_ADDRS,
		    { "198.18.1.1", "198.18.1.2" }, 1, 90, 90 },
		/* A CNAME's TTL bounds the answer's. */
		{ "chain.test", RESOLVER_OK, 1, { "198.18.2.6" }, 1, 1, 7 },
		/* RFC 2308: min(SOA TTL, SOA MINIMUM), capped at 300 s. */
		{ "soa1.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 1 },
		{ "soattl.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 2, 2 },
		{ "soabig.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 300, 300 },
		{ "nodata.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 60, 60 },
		/* No SOA for AAAA: the 30 s default bounds it. */
		{ "soahalf.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 30, 30 },
		/* Broken SOAs are ignored, not trusted. */
		{ "soacut.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 30, 30 },
		{ "soalie.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 30, 30 },
		{ "servfail.test", RESOLVER_EFAIL, 0, { NULL }, 0, 0, 0 },
		/* A CNAME to nowhere, records for another owner: no data. */
		{ "cnameonly.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 60 },
		{ "wrongowner.test", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1,
		    60 },
		/* Only DNS is asked, never /etc/hosts. */
		{ "localhost", RESOLVER_ENOTFOUND, 0, { NULL }, 0, 1, 30 },
	};
	uint64_t hits, misses;
	size_t entries;

	run_answer_table(r, cases, sizeof(cases) / sizeof(cases[0]));
	stats(r, &hits, &misses, &entries);
	CHECK_INT(misses, sizeof(cases) / sizeof(cases[0]));
	CHECK_INT(hits, 0);
	/* All but servfail are cached. */
	CHECK_INT(entries, sizeof(cases) / sizeof(cases[0]) - 1);
}

/* What resolver_lookup_answer() handed over. */
struct chain_res {
	int		called;
	int		result;
	size_t		n;
	uint32_t	ttl;
	char		chain[2][512];	/* names, comma-separated */
	char		first[INET6_ADDRSTRLEN];
};

static void
chain_cb(const struct resolver_answer *a, void *arg)
{
	struct chain_res *x = arg;
	struct dns_name nm;
	size_t i, k, off, w;

	x->called++;
	x->result = a->result;
	x->n = a->n;
	x->ttl = a->ttl;
	if (a->n > 0)
		inet_ntop(a->addrs[0].family, a->addrs[0].a, x->first,
		    sizeof(x->first));
	for (k = 0; k < 2; k++) {
		x->chain[k][0] = '\0';
		for (i = 0, w = 0; a->chain[k] != NULL && i < a->chain[k]->n;
		    i++) {
			off = 0;
			if (dns_name_read(a->chain[k]->link[i].wire,
			    a->chain[k]->link[i].wire_len, &off, &nm) == -1)
				break;
			w += (size_t)snprintf(x->chain[k] + w,
			    sizeof(x->chain[k]) - w, "%s%s", i ? "," : "",
			    nm.text);
			if (w >= sizeof(x->chain[k]))
				break;
		}
		/* NULL, never an empty chain. */
		CHECK(a->chain[k] == NULL || a->chain[k]->n > 0);
	}
	ndone++;
}

struct chain_case {
	const char	*name;
	int		 result;
	size_t		 n;
	const char	*first;
	const char	*chain4, *chain6;
	uint32_t	 ttl_min, ttl_max;
};

/*
 * Chains through the cache: the A and AAAA answers keep their own chain,
 * the chain's TTL bounds the answer's, loops fail the query they came in,
 * a CNAME for a name nobody asked about is no chain. Asked twice: the
 * second answer, from the cache, has the same chains.
 */
static void
test_chains(struct resolver *r)
{
	static const struct chain_case cases[] = {
		{ "chain2.test", RESOLVER_OK, 2, "198.18.2.9",
		    "m1.test,M2.test", "v6.m.test", 1, 20 },
		{ "loop.test", RESOLVER_EFAIL, 0, NULL, "", "", 0, 0 },
		{ "loophalf.test", RESOLVER_OK, 1, "2001:db8::b", "", "",
		    1, 30 },
		{ "stray.test", RESOLVER_OK, 1, "198.18.2.12", "", "", 1, 60 },
		{ "chain.test", RESOLVER_OK, 1, "198.18.2.6", "mid.test", "",
		    1, 7 },
	};
	struct chain_res res[2][sizeof(cases) / sizeof(cases[0])];
	const struct chain_case *c;
	struct chain_res *x;
	size_t i, round;

	memset(res, 0, sizeof(res));
	for (round = 0; round < 2; round++) {
		ndone = 0;
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			CHECK(resolver_lookup_answer(r, cases[i].name,
			    chain_cb, &res[round][i]) != NULL);
		run_until((int)(sizeof(cases) / sizeof(cases[0])), 8000);
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			c = &cases[i];
			x = &res[round][i];
			CHECK_MSG(x->called == 1 && x->result == c->result &&
			    x->n == c->n, "%s (round %zu): called %d, "
			    "result %d, %zu addresses", c->name, round,
			    x->called, x->result, x->n);
			if (c->first != NULL)
				CHECK_MSG(strcmp(x->first, c->first) == 0,
				    "%s: first %s", c->name, x->first);
			CHECK_MSG(strcmp(x->chain[0], c->chain4) == 0 &&
			    strcmp(x->chain[1], c->chain6) == 0,
			    "%s (round %zu): chains \"%s\" \"%s\"", c->name,
			    round, x->chain[0], x->chain[1]);
			CHECK_MSG(x->ttl >= c->ttl_min && x->ttl <= c->ttl_max,
			    "%s: ttl %u", c->name, x->ttl);
		}
	}
}

/* A cache hit answers from the loop, not from inside resolver_lookup(). */
static void
test_cache_hit(struct resolver *r)
{
	struct res a, b, c;
	uint64_t h0, m0, h1, m1;
	size_t e0, e1;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	stats(r, &h0, &m0, &e0);
	ndone = 0;
	CHECK(resolver_lookup(r, "hit.test", res_cb, &a) != NULL);
	run_until(1, 5000);
	CHECK_INT(a.called, 1);
	CHECK_INT(a.result, RESOLVER_OK);
	CHECK(res_has(&a, "198.18.0.16"));
	stats(r, &h1, &m1, &e1);
	CHECK_INT(m1, m0 + 1);
	CHECK_INT(h1, h0);
	CHECK_INT(e1, e0 + 1);

	ndone = 0;
	CHECK(resolver_lookup(r, "hit.test", res_cb, &b) != NULL);
	CHECK_INT(b.called, 0);
	/* Case and one trailing dot do not make another name. */
	CHECK(resolver_lookup(r, "HIT.Test.", res_cb, &c) != NULL);
	CHECK_INT(c.called, 0);
	run_until(2, 5000);
	CHECK_INT(b.called, 1);
	CHECK_INT(b.result, RESOLVER_OK);
	CHECK(b.n == 1 && res_has(&b, "198.18.0.16"));
	CHECK(b.ttl >= 1 && b.ttl <= 5);
	CHECK_INT(c.called, 1);
	CHECK(c.n == 1 && res_has(&c, "198.18.0.16"));
	stats(r, &h1, &m1, &e1);
	CHECK_INT(h1, h0 + 2);
	CHECK_INT(m1, m0 + 1);
	CHECK_INT(e1, e0 + 1);
	CHECK_INT(dnstest_dnsmasq_count("query[A] hit.test from"), 1);
	CHECK_INT(dnstest_dnsmasq_count("query[AAAA] hit.test from"), 1);
}

/* Two lookups in flight for one name: one upstream query, two answers. */
static void
test_coalescing(struct resolver *r)
{
	struct res a, b;
	uint64_t h0, m0, h1, m1;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	stats(r, &h0, &m0, NULL);
	ndone = 0;
	CHECK(resolver_lookup(r, "co.test", res_cb, &a) != NULL);
	CHECK(resolver_lookup(r, "co.test", res_cb, &b) != NULL);
	run_until(2, 5000);
	CHECK_INT(a.called, 1);
	CHECK_INT(b.called, 1);
	CHECK(a.result == RESOLVER_OK && res_has(&a, "198.18.0.17"));
	CHECK(b.result == RESOLVER_OK && res_has(&b, "198.18.0.17"));
	stats(r, &h1, &m1, NULL);
	CHECK_INT(m1, m0 + 1);
	CHECK_INT(h1, h0 + 1);
	CHECK_INT(dnstest_dnsmasq_count("query[A] co.test from"), 1);
	CHECK_INT(dnstest_dnsmasq_count("query[AAAA] co.test from"), 1);
}

static void
test_cancel(struct resolver *r)
{
	struct res a, b, c, d, e;
	struct resolver_query *qa, *qb, *qd;
	uint64_t h0, h1;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	memset(&e, 0, sizeof(e));

	/* While the upstream query is outstanding. */
	ndone = 0;
	qa = resolver_lookup(r, "cancel.test", res_cb, &a);
	CHECK(qa != NULL);
	resolver_cancel(qa);
	/* One of two coalesced waiters: the other still gets its answer. */
	qb = resolver_lookup(r, "cancel2.test", res_cb, &b);
	CHECK(resolver_lookup(r, "cancel2.test", res_cb, &c) != NULL);
	resolver_cancel(qb);
	run_until(1, 5000);
	run_for(200);
	CHECK_INT(a.called, 0);
	CHECK_INT(b.called, 0);
	CHECK_INT(c.called, 1);
	CHECK(c.result == RESOLVER_OK && res_has(&c, "198.18.0.19"));
	CHECK_INT(dnstest_dnsmasq_count("query[A] cancel.test from"), 1);

	/* The cancelled lookup's answer was still cached. */
	stats(r, &h0, NULL, NULL);
	ndone = 0;
	CHECK(resolver_lookup(r, "cancel.test", res_cb, &e) != NULL);
	/* A cache hit cancelled before the loop delivered it. */
	qd = resolver_lookup(r, "cancel.test", res_cb, &d);
	CHECK(qd != NULL);
	resolver_cancel(qd);
	run_until(1, 5000);
	run_for(100);
	CHECK_INT(e.called, 1);
	CHECK(e.result == RESOLVER_OK && res_has(&e, "198.18.0.18"));
	CHECK_INT(d.called, 0);
	stats(r, &h1, NULL, NULL);
	CHECK_INT(h1, h0 + 2);
	CHECK_INT(dnstest_dnsmasq_count("query[A] cancel.test from"), 1);
}

/* Callbacks may look names up and cancel queries that are ready too. */
static void
test_reentry(struct resolver *r)
{
	struct res a, b, c, d;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	ndone = 0;
	CHECK(resolver_lookup(r, "reenter.test", res_cb, &a) != NULL);
	run_until(1, 5000);
	CHECK_INT(a.result, RESOLVER_OK);

	/* b and c are cache hits ready together; b cancels c, looks up d. */
	memset(&a, 0, sizeof(a));
	ndone = 0;
	b.lookup_r = r;
	b.lookup_name = "reenter.test";
	b.lookup_res = &d;
	CHECK(resolver_lookup(r, "reenter.test", res_cb, &b) != NULL);
	b.cancel_q = resolver_lookup(r, "reenter.test", res_cb, &c);
	CHECK(b.cancel_q != NULL);
	run_until(2, 5000);
	run_for(50);
	CHECK_INT(b.called, 1);
	CHECK_INT(c.called, 0);
	CHECK_INT(d.called, 1);
	CHECK(d.result == RESOLVER_OK && res_has(&d, "198.18.0.20"));
}

/* Answers expire: a 1 s TTL from dnsmasq, a 1 s SOA MINIMUM from the fake. */
static void
test_ttl_expiry(struct resolver *dm, struct resolver *fk)
{
	struct res a, b, c, d, e;
	uint64_t hd0, md0, hf0, mf0, h, m;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	memset(&e, 0, sizeof(e));
	ndone = 0;
	CHECK(resolver_lookup(dm, "short.test", res_cb, &a) != NULL);
	run_until(1, 5000);
	CHECK(a.result == RESOLVER_OK && res_has(&a, "198.18.0.13"));
	CHECK_INT(a.ttl, 1);
	stats(dm, &hd0, &md0, NULL);
	stats(fk, &hf0, &mf0, NULL);
	ndone = 0;
	CHECK(resolver_lookup(dm, "short.test", res_cb, &b) != NULL);
	CHECK(resolver_lookup(fk, "soa1.test", res_cb, &c) != NULL);
	run_until(2, 5000);
	CHECK_INT(b.result, RESOLVER_OK);
	CHECK_INT(c.result, RESOLVER_ENOTFOUND);
	stats(dm, &h, &m, NULL);
	CHECK(h == hd0 + 1 && m == md0);
	stats(fk, &h, &m, NULL);
	CHECK(h == hf0 + 1 && m == mf0);

	run_for(1300);
	ndone = 0;
	CHECK(resolver_lookup(dm, "short.test", res_cb, &d) != NULL);
	CHECK(resolver_lookup(fk, "soa1.test", res_cb, &e) != NULL);
	run_until(2, 5000);
	CHECK(d.result == RESOLVER_OK && res_has(&d, "198.18.0.13"));
	CHECK_INT(e.result, RESOLVER_ENOTFOUND);
	stats(dm, &h, &m, NULL);
	CHECK(h == hd0 + 1 && m == md0 + 1);
	stats(fk, &h, &m, NULL);
	CHECK(h == hf0 + 1 && m == mf0 + 1);
	CHECK_INT(dnstest_dnsmasq_count("query[A] short.test from"), 2);
	CHECK_INT(fake_queries("soa1.test", 1), 2);
}

/* Names that cannot exist never reach the upstream server. */
static void
test_bad_names(struct resolver *r)
{
	static const char *names[] = {
		"", ".", "a..test", ".a.test", "a.test..", "bad name.test",
		"a\\.test", "a/b.test", "caf\xc3\xa9.test", "a.test\n",
		/* a 64-byte label, and 254 bytes in all */
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test",
		"aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa."
		    "aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa."
		    "aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa."
		    "aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa."
		    "aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaaaaaaa.aaaa",
	};
	struct res res[sizeof(names) / sizeof(names[0])];
	uint64_t h0, m0, h1, m1;
	size_t i, n = sizeof(names) / sizeof(names[0]);

	CHECK_INT(strlen(names[n - 1]), 254);
	memset(res, 0, sizeof(res));
	stats(r, &h0, &m0, NULL);
	ndone = 0;
	for (i = 0; i < n; i++) {
		CHECK(resolver_lookup(r, names[i], res_cb, &res[i]) != NULL);
		CHECK_INT(res[i].called, 0);
	}
	run_until((int)n, 2000);
	for (i = 0; i < n; i++) {
		CHECK_MSG(res[i].called == 1 &&
		    res[i].result == RESOLVER_ENOTFOUND && res[i].n == 0,
		    "bad name %zu: called %d result %d", i, res[i].called,
		    res[i].result);
	}
	stats(r, &h1, &m1, NULL);
	CHECK(h1 == h0 && m1 == m0);
}

/* Nothing listens: ICMP port unreachable ends it quickly with an error. */
static void
test_refused(void)
{
	struct resolver *r;
	struct res a;
	uint64_t t0;
	int port = dnstest_free_port(0);

	CHECK(port > 0);
	r = resolver_for_port(port);
	CHECK(r != NULL);
	if (r == NULL)
		return;
	memset(&a, 0, sizeof(a));
	ndone = 0;
	t0 = now_ms();
	CHECK(resolver_lookup(r, "a.test", res_cb, &a) != NULL);
	run_until(1, 12000);
	CHECK_INT(a.called, 1);
	CHECK_MSG(a.result == RESOLVER_EFAIL || a.result == RESOLVER_ETIMEOUT,
	    "result %d", a.result);
	CHECK_MSG(now_ms() - t0 < 10000, "took %llu ms",
	    (unsigned long long)(now_ms() - t0));
	resolver_free(r);
}

/*
 * A server that never answers: ETIMEOUT after 2 tries of 2 s (c-ares
 * doubles the second), while a 20 ms timer keeps firing throughout.
 */
static void
test_timeout_nonblocking(struct resolver *r)
{
	struct resolver_query *q;
	struct res a, b;
	uint64_t t0, t1;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ndone = 0;
	tick_reset();
	t0 = now_ms();
	CHECK(resolver_lookup(r, "silent.test", res_cb, &a) != NULL);
	CHECK(resolver_lookup(r, "halfsilent.test", res_cb, &b) != NULL);
	t1 = now_ms();
	CHECK_MSG(t1 - t0 < 100, "resolver_lookup took %llu ms",
	    (unsigned long long)(t1 - t0));
	run_until(2, 12000);
	t1 = now_ms();
	CHECK_INT(a.called, 1);
	CHECK_INT(a.result, RESOLVER_ETIMEOUT);
	CHECK_INT(b.called, 1);
	CHECK(b.result == RESOLVER_OK && b.n == 1 &&
	    res_has(&b, "198.18.2.8"));
	CHECK(b.ttl >= 1 && b.ttl <= 30);
	CHECK_MSG(t1 - t0 >= 3000 && t1 - t0 < 10000, "took %llu ms",
	    (unsigned long long)(t1 - t0));
	CHECK_INT(fake_queries("silent.test", 1), 2);
	CHECK_MSG(tick.ticks >= (int)((t1 - t0) / 20 / 2), "%d ticks",
	    tick.ticks);
	CHECK_MSG(tick.max_gap < 300, "loop stalled %llu ms",
	    (unsigned long long)tick.max_gap);

	/* Timeouts are not cached: the next lookup asks again ... */
	memset(&a, 0, sizeof(a));
	ndone = 0;
	q = resolver_lookup(r, "silent.test", res_cb, &a);
	CHECK(q != NULL);
	run_for(300);
	CHECK_INT(a.called, 0);
	CHECK_INT(fake_queries("silent.test", 1), 3);
	/* ... and is cancelled while c-ares still waits for the answer. */
	resolver_cancel(q);
}

/* resolver_free() with queries outstanding, ready, and from a callback. */
static void
test_free(void)
{
	struct resolver *r;
	struct res a, b, c, d, e;
	int silent0 = fake_queries("silent.test", 1);

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	memset(&e, 0, sizeof(e));

	r = resolver_for_port(fake_port);
	CHECK(r != NULL);
	if (r == NULL)
		return;
	ndone = 0;
	CHECK(resolver_lookup(r, "silent.test", res_cb, &a) != NULL);
	CHECK(resolver_lookup(r, "big.test", res_cb, &b) != NULL);
	CHECK(resolver_lookup(r, "no..name", res_cb, &c) != NULL);
	resolver_free(r);
	run_for(300);
	CHECK(a.called == 0 && b.called == 0 && c.called == 0);
	CHECK_INT(fake_queries("silent.test", 1), silent0 + 1);

	/* Freed by the first of two ready callbacks: the second never runs. */
	r = resolver_for_port(fake_port);
	CHECK(r != NULL);
	if (r == NULL)
		return;
	ndone = 0;
	CHECK(resolver_lookup(r, "zero.test", res_cb, &d) != NULL);
	run_until(1, 5000);
	CHECK_INT(d.result, RESOLVER_OK);
	memset(&d, 0, sizeof(d));
	ndone = 0;
	d.free_r = r;
	CHECK(resolver_lookup(r, "zero.test", res_cb, &d) != NULL);
	CHECK(resolver_lookup(r, "zero.test", res_cb, &e) != NULL);
	CHECK(resolver_lookup(r, "silent.test", res_cb, &a) != NULL);
	run_for(300);
	CHECK_INT(d.called, 1);
	CHECK_INT(e.called, 0);
	CHECK_INT(a.called, 0);
}

/* No servers: c-ares fails inside ares_query(); still answered later. */
static void
test_no_servers(void)
{
	struct resolver *r = resolver_for(NULL);
	struct res a;

	CHECK(r != NULL);
	if (r == NULL)
		return;
	memset(&a, 0, sizeof(a));
	ndone = 0;
	CHECK(resolver_lookup(r, "a.test", res_cb, &a) != NULL);
	CHECK_INT(a.called, 0);
	run_until(1, 5000);
	CHECK_INT(a.called, 1);
	CHECK_INT(a.result, RESOLVER_EFAIL);
	resolver_free(r);
}

/* An IPv6 upstream; and a dead first server makes c-ares ask the next. */
static void
test_ipv6_failover(void)
{
	struct resolver *r6, *r2;
	struct res a, b;
	char servers[128];
	int dead = dnstest_free_port(0), q0;

	if (fake6_fd == -1)
		return;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	snprintf(servers, sizeof(servers), "::1 %d", fake6_port);
	r6 = resolver_for(servers);
	snprintf(servers, sizeof(servers), "127.0.0.1 %d,::1 %d", dead,
	    fake6_port);
	r2 = resolver_for(servers);
	CHECK(r6 != NULL && r2 != NULL);
	if (r6 == NULL || r2 == NULL)
		goto done;
	q0 = fake_queries("order.test", 1);
	ndone = 0;
	CHECK(resolver_lookup(r6, "order.test", res_cb, &a) != NULL);
	CHECK(resolver_lookup(r2, "order.test", res_cb, &b) != NULL);
	run_until(2, 10000);
	CHECK(a.result == RESOLVER_OK && a.n == 2 &&
	    strcmp(a.addr[0], "198.18.2.5") == 0);
	CHECK(b.result == RESOLVER_OK && b.n == 2 &&
	    strcmp(b.addr[1], "2001:db8::5") == 0);
	CHECK_INT(fake_queries("order.test", 1), q0 + 2);
done:
	resolver_free(r6);
	resolver_free(r2);
}

/* resolvers: system reads resolv.conf; only construction is tested. */
static void
test_system(void)
{
	struct config cfg;
	struct resolver *r;

	memset(&cfg, 0, sizeof(cfg));
	cfg.resolvers_system = 1;
	r = resolver_new(base, &cfg);
	CHECK(r != NULL);
	resolver_free(r);
}

int
main(void)
{
	struct resolver *dm, *fk;
	struct event *ticker;
	struct timeval tv = { 0, 20 * 1000 };

	if (access(DNSTEST_DNSMASQ, X_OK) == -1) {
		printf("SKIP: %s not found (apt-get install dnsmasq-base)\n",
		    DNSTEST_DNSMASQ);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((dm_port = dnstest_dnsmasq_start(&zone)) == -1) {
		fprintf(stderr, "cannot start %s\n", DNSTEST_DNSMASQ);
		return 1;
	}
	base = event_base_new();
	CHECK(base != NULL);
	if (base == NULL)
		return check_summary();
	ticker = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	CHECK(ticker != NULL && event_add(ticker, &tv) == 0);
	CHECK(fake_listen(AF_INET, &fake_fd, &fake_port, &fake_ev) == 0);
	if (fake_listen(AF_INET6, &fake6_fd, &fake6_port, &fake6_ev) == -1) {
		printf("no ::1 here: IPv6 upstream not tested\n");
		fake_stop(&fake6_fd, &fake6_ev);
	}

	dm = resolver_for_port(dm_port);
	fk = resolver_for_port(fake_port);
	CHECK(dm != NULL && fk != NULL);
	if (dm == NULL || fk == NULL)
		return check_summary();

	test_dnsmasq_answers(dm);
	test_fake_answers(fk);
	test_chains(fk);
	test_cache_hit(dm);
	test_coalescing(dm);
	test_cancel(dm);
	test_reentry(dm);
	test_ttl_expiry(dm, fk);
	test_bad_names(dm);
	test_refused();
	test_no_servers();
	test_system();
	test_ipv6_failover();
	test_timeout_nonblocking(fk);
	test_free();

	/* fk still has the cancelled silent.test query outstanding. */
	resolver_free(dm);
	resolver_free(fk);
	fake_stop(&fake_fd, &fake_ev);
	fake_stop(&fake6_fd, &fake6_ev);
	event_free(ticker);
	event_base_free(base);
	dnstest_dnsmasq_stop();
	return check_summary();
}
