/*
 * Asynchronous A/AAAA resolution: one c-ares channel driven by a libevent
 * loop (an event per c-ares socket plus one timer), a bounded TTL cache keyed
 * by name that also coalesces concurrent lookups, and deferred delivery.
 * c-ares carries the queries; answers (CNAME chains included) and the SOA
 * of negative answers are read by the module's own parser (dns_msg.c): no
 * wire bytes are walked here. c-ares 1.18's ares_parse_soa_reply() only
 * reads the answer section, hence dns_negative_ttl().
 */

#include <sys/queue.h>
#include <sys/socket.h>

#include <netinet/in.h>

#include <ares.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/policy.h"
#include "parse/dns_msg.h"
#include "dns/resolver.h"

#define RESOLVER_TIMEOUT_MS	2000	/* per try */
#define RESOLVER_TRIES		2
#define RESOLVER_TTL_MAX	3600	/* positive answers */
#define RESOLVER_NEG_TTL	30	/* negative answer without an SOA */
#define RESOLVER_NEG_TTL_MAX	300	/* a new name shows up within 5 min */
#define RESOLVER_PARTIAL_TTL	30	/* one of A/AAAA failed: retry soon */
#define RESOLVER_CACHE_MAX	10000
#define RESOLVER_BUCKETS	8192	/* power of two */
#define RESOLVER_NAME_MAX	253

enum part_status { PART_OK, PART_NEG, PART_TIMEOUT, PART_FAIL };
enum entry_state { ENTRY_PENDING, ENTRY_DONE };

struct resolver_fetch;

/* One of the two upstream queries (A or AAAA) of a fetch. */
struct resolver_part {
	struct resolver_fetch	*f;
	int			 qtype;
	enum part_status	 status;
	int			 has_soa;
	uint32_t		 ttl;	/* smallest address TTL, or SOA TTL */
	struct netaddr		 addrs[RESOLVER_MAX_ADDRS];
	size_t			 n;
	struct dns_chain	 chain;
};

/* The CNAME chains of an answer, shared by its cache entry and its queries. */
struct resolver_chains {
	int			 refs;
	struct dns_chain	 c[2];	/* A, AAAA */
};

/* The upstream work for a pending entry; lives until both parts answered. */
struct resolver_fetch {
	struct resolver		*r;
	struct resolver_entry	*e;
	int			 outstanding;
	struct resolver_part	 part[2];	/* A, AAAA */
};

TAILQ_HEAD(resolver_queries, resolver_query);

struct resolver_entry {
	LIST_ENTRY(resolver_entry) hlink;
	TAILQ_ENTRY(resolver_entry) lru;	/* ENTRY_DONE only */
	struct resolver_queries	 waiters;	/* ENTRY_PENDING only */
	struct resolver_fetch	*fetch;
	enum entry_state	 state;
	int			 result;
	struct netaddr		*addrs;
	size_t			 n;
	struct resolver_chains	*chains;	/* NULL: no CNAME */
	uint64_t		 expires_ms;
	uint64_t		 hash;
	size_t			 namelen;
	char			 name[];
};

struct resolver_query {
	TAILQ_ENTRY(resolver_query) link;
	struct resolver		*r;
	struct resolver_entry	*e;	/* waiting on it; NULL when ready */
	uint64_t		 gen;
	resolver_cb		 cb;
	resolver_answer_cb	 acb;		/* or this one */
	void			*arg;
	struct resolver_chains	*chains;	/* a reference, or NULL */
	int			 result;
	uint32_t		 ttl;
	size_t			 n;
	struct netaddr		 addrs[RESOLVER_MAX_ADDRS];
};

struct resolver_sock {
	LIST_ENTRY(resolver_sock) link;
	ares_socket_t		 fd;
	struct event		*ev;
};

LIST_HEAD(resolver_bucket, resolver_entry);

struct resolver {
	struct event_base	*base;
	ares_channel		 channel;
	struct event		*timer;
	struct event		*ev_deliver;
	LIST_HEAD(, resolver_sock) socks;
	struct resolver_queries	 ready;
	uint64_t		 deliver_gen;
	int			 delivering;
	int			 closing;
	int			 dead;	/* freed from inside a callback */
	int			 no_servers;
	struct resolver_bucket	*buckets;
	TAILQ_HEAD(, resolver_entry) lru;	/* least recently used first */
	size_t			 n_cached;
	uint64_t		 hits;
	uint64_t		 misses;
	/* SipHash: a sandbox that picks names cannot pile them up */
	uint64_t		 key[HASH_KEY_WORDS];
};

static pthread_once_t	 resolver_once = PTHREAD_ONCE_INIT;
static int		 resolver_ares_status = ARES_ENOTINITIALIZED;

static void	resolver_arm_timer(struct resolver *);
static void	resolver_sock_cb(evutil_socket_t, short, void *);

static void
resolver_library_init(void)
{
	resolver_ares_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static uint64_t
resolver_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Copy a host name into out (RESOLVER_NAME_MAX + 1 bytes) in the form the
 * cache keys on, policy_name_canon()'s: lower-case A-labels of letters,
 * digits, '-' and '_', one trailing dot removed. c-ares would read '\' as
 * an escape; the normaliser refuses it before it gets there.
 */
static int
resolver_normalise(const char *name, char *out, size_t *outlen)
{
	size_t len;
	int r;

	if (name == NULL)
		return -1;
	/* The one host-name normaliser; a name of 254 bytes ends in a dot. */
	len = strnlen(name, RESOLVER_NAME_MAX + 2);
	if (len > RESOLVER_NAME_MAX + 1 || (r = policy_name_canon(name, len,
	    out, RESOLVER_NAME_MAX + 1, POLICY_NAME_ASCII |
	    POLICY_NAME_NUMERIC)) <= 0)
		return -1;
	*outlen = (size_t)r;
	return 0;
}

static int
resolver_addr_present(const struct netaddr *list, size_t n,
    const struct netaddr *a)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[i].family == a->family &&
		    memcmp(list[i].a, a->a, sizeof(a->a)) == 0)
			return 1;
	return 0;
}

static void
resolver_part_addr(struct resolver_part *p, int family, const void *raw,
    uint32_t t)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };
	struct netaddr a;

	memset(&a, 0, sizeof(a));
	if (family == AF_INET) {
		a.family = AF_INET;
		memcpy(a.a, raw, 4);
	} else if (memcmp(raw, mapped, sizeof(mapped)) == 0) {
		a.family = AF_INET;
		memcpy(a.a, (const uint8_t *)raw + 12, 4);
	} else {
		a.family = AF_INET6;
		memcpy(a.a, raw, 16);
	}
	if (p->n >= RESOLVER_MAX_ADDRS ||
	    resolver_addr_present(p->addrs, p->n, &a))
		return;
	p->addrs[p->n++] = a;
	if (p->n == 1 || t < p->ttl)
		p->ttl = t;
}

/*
 * Parse a successful answer into the part with dns_answer_parse(): c-ares
 * 1.18 follows any CNAME in the order it comes, whoever owns it, and its
 * parsed forms drop the chain (hostent) or the TTLs; a loop or an overlong
 * chain is a failed answer. The chain's TTLs bound the addresses'.
 */
static void
resolver_part_parse(struct resolver_part *p, const unsigned char *abuf,
    int alen)
{
	struct dns_answer a;
	size_t i;

	if (alen <= 0 || dns_answer_parse(abuf, (size_t)alen,
	    (uint16_t)p->qtype, &a) != DNS_ANSWER_OK) {
		p->status = PART_FAIL;
		return;
	}
	for (i = 0; i < a.n; i++)
		resolver_part_addr(p, a.addrs[i].family, a.addrs[i].a,
		    a.ttls[i]);
	p->chain = a.chain;
	if (p->n == 0) {
		p->status = PART_NEG;
		return;
	}
	for (i = 0; i < a.chain.n; i++)
		if (a.chain.link[i].ttl < p->ttl)
			p->ttl = a.chain.link[i].ttl;
	p->status = PART_OK;
}

static void
resolver_part_done(struct resolver_part *p, int status,
    const unsigned char *abuf, int alen)
{
	switch (status) {
	case ARES_SUCCESS:
		resolver_part_parse(p, abuf, alen);
		break;
	case ARES_ENODATA:
	case ARES_ENOTFOUND:
		p->status = PART_NEG;
		break;
	case ARES_ETIMEOUT:
		p->status = PART_TIMEOUT;
		break;
	default:
		p->status = PART_FAIL;
		break;
	}
	if (p->status == PART_NEG && abuf != NULL && alen > 0 &&
	    dns_negative_ttl(abuf, (size_t)alen, &p->ttl) == 0)
		p->has_soa = 1;
}

static uint32_t
resolver_clamp(uint32_t v, uint32_t max)
{
	if (v < 1)
		return 1;
	return v > max ? max : v;
}

/* Combine the A and AAAA parts: IPv4 first, duplicates dropped. */
static int
resolver_fetch_result(const struct resolver_fetch *f, struct netaddr *out,
    size_t *np, uint32_t *ttlp)
{
	const struct resolver_part *p;
	uint32_t ttl = UINT32_MAX;
	size_t n = 0, i;
	int pass, k, neg = 0, fail = 0, timeout = 0;

	for (pass = 0; pass < 4; pass++) {
		/* A's IPv4, AAAA's mapped IPv4, then AAAA's IPv6. */
		p = &f->part[pass & 1];
		for (i = 0; i < p->n && n < RESOLVER_MAX_ADDRS; i++) {
			if ((p->addrs[i].family == AF_INET) != (pass < 2) ||
			    resolver_addr_present(out, n, &p->addrs[i]))
				continue;
			out[n++] = p->addrs[i];
		}
	}
	for (k = 0; k < 2; k++) {
		p = &f->part[k];
		if (p->status == PART_NEG) {
			neg++;
			if (p->has_soa && p->ttl < ttl)
				ttl = p->ttl;
		} else if (p->status == PART_OK && p->ttl < ttl)
			ttl = p->ttl;
		else if (p->status == PART_FAIL)
			fail++;
		else if (p->status == PART_TIMEOUT)
			timeout++;
	}
	*np = n;
	if (n > 0) {
		if ((fail || timeout) && ttl > RESOLVER_PARTIAL_TTL)
			ttl = RESOLVER_PARTIAL_TTL;
		*ttlp = resolver_clamp(ttl, RESOLVER_TTL_MAX);
		return RESOLVER_OK;
	}
	*ttlp = 0;
	if (neg == 2) {
		if (ttl > RESOLVER_NEG_TTL && (!f->part[0].has_soa ||
		    !f->part[1].has_soa))
			ttl = RESOLVER_NEG_TTL;
		*ttlp = resolver_clamp(ttl, RESOLVER_NEG_TTL_MAX);
		return RESOLVER_ENOTFOUND;
	}
	return fail ? RESOLVER_EFAIL : RESOLVER_ETIMEOUT;
}

static void
resolver_ready(struct resolver *r, struct resolver_query *q)
{
	q->e = NULL;
	q->gen = r->deliver_gen;
	TAILQ_INSERT_TAIL(&r->ready, q, link);
	event_active(r->ev_deliver, EV_TIMEOUT, 1);
}

static struct resolver_entry *
resolver_cache_find(struct resolver *r, const char *name, size_t len,
    uint64_t h)
{
	struct resolver_entry *e;

	LIST_FOREACH(e, &r->buckets[h & (RESOLVER_BUCKETS - 1)], hlink)
		if (e->hash == h && e->namelen == len &&
		    memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

static struct resolver_chains *
resolver_chains_ref(struct resolver_chains *c)
{
	if (c != NULL)
		c->refs++;
	return c;
}

static void
resolver_chains_unref(struct resolver_chains *c)
{
	if (c != NULL && --c->refs == 0)
		free(c);
}

/* The chains of a finished fetch (one reference), or NULL when it has none. */
static int
resolver_fetch_chains(const struct resolver_fetch *f,
    struct resolver_chains **out)
{
	struct resolver_chains *c;

	*out = NULL;
	if (f->part[0].chain.n == 0 && f->part[1].chain.n == 0)
		return 0;
	if ((c = malloc(sizeof(*c))) == NULL)
		return -1;
	c->refs = 1;
	c->c[0] = f->part[0].chain;
	c->c[1] = f->part[1].chain;
	*out = c;
	return 0;
}

static void
resolver_entry_free(struct resolver *r, struct resolver_entry *e)
{
	LIST_REMOVE(e, hlink);
	if (e->state == ENTRY_DONE) {
		TAILQ_REMOVE(&r->lru, e, lru);
		r->n_cached--;
	}
	resolver_chains_unref(e->chains);
	free(e->addrs);
	free(e);
}

/* Make room for one more cached entry; drop expired ones at the cold end. */
static void
resolver_cache_trim(struct resolver *r, uint64_t now)
{
	struct resolver_entry *e;
	int i;

	for (i = 0; i < 2; i++) {
		e = TAILQ_FIRST(&r->lru);
		if (e == NULL || e->expires_ms > now)
			break;
		resolver_entry_free(r, e);
	}
	while (r->n_cached >= RESOLVER_CACHE_MAX &&
	    (e = TAILQ_FIRST(&r->lru)) != NULL)
		resolver_entry_free(r, e);
}

/* Both parts are in: answer every waiter, then cache or forget the entry. */
static void
resolver_fetch_done(struct resolver_fetch *f)
{
	struct resolver *r = f->r;
	struct resolver_entry *e = f->e;
	struct resolver_query *q;
	struct resolver_chains *chains = NULL;
	struct netaddr out[RESOLVER_MAX_ADDRS];
	size_t n;
	uint32_t ttl;
	uint64_t now;
	int result, nomem = 0;

	e->fetch = NULL;
	if (r->closing) {
		free(f);
		return;
	}
	result = resolver_fetch_result(f, out, &n, &ttl);
	if (result == RESOLVER_OK || result == RESOLVER_ENOTFOUND)
		nomem = resolver_fetch_chains(f, &chains) == -1;
	free(f);
	/* An answer without the chain it came with is no answer. */
	if (nomem) {
		result = RESOLVER_EFAIL;
		n = 0;
		ttl = 0;
	}

	while ((q = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, q, link);
		q->result = result;
		q->ttl = ttl;
		q->n = n;
		memcpy(q->addrs, out, n * sizeof(out[0]));
		q->chains = resolver_chains_ref(chains);
		resolver_ready(r, q);
	}

	/* The entry takes over the fetch's reference. */
	e->chains = chains;
	if ((result != RESOLVER_OK && result != RESOLVER_ENOTFOUND) ||
	    (n > 0 && (e->addrs = calloc(n, sizeof(out[0]))) == NULL)) {
		resolver_entry_free(r, e);
		return;
	}
	if (n > 0)
		memcpy(e->addrs, out, n * sizeof(out[0]));
	now = resolver_now_ms();
	resolver_cache_trim(r, now);
	e->state = ENTRY_DONE;
	e->result = result;
	e->n = n;
	e->expires_ms = now + (uint64_t)ttl * 1000;
	TAILQ_INSERT_TAIL(&r->lru, e, lru);
	r->n_cached++;
}

static void
resolver_ares_cb(void *arg, int status, int timeouts, unsigned char *abuf,
    int alen)
{
	struct resolver_part *p = arg;
	struct resolver_fetch *f = p->f;

	if (!f->r->closing)
		resolver_part_done(p, status, abuf, alen);
	if (--f->outstanding == 0)
		resolver_fetch_done(f);
}

static void
resolver_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;
	struct resolver_query *q;
	struct resolver_answer a;
	struct resolver_chains *chains;
	struct netaddr addrs[RESOLVER_MAX_ADDRS];
	resolver_cb cb;
	resolver_answer_cb acb;
	void *cbarg;
	uint64_t gen = r->deliver_gen++;
	uint32_t ttl;
	size_t n;
	int result;

	/*
	 * Only what was ready on entry: a callback that keeps looking up
	 * cached names must not keep the loop here forever.
	 */
	r->delivering++;
	while ((q = TAILQ_FIRST(&r->ready)) != NULL && q->gen <= gen) {
		TAILQ_REMOVE(&r->ready, q, link);
		cb = q->cb;
		acb = q->acb;
		cbarg = q->arg;
		result = q->result;
		ttl = q->ttl;
		n = q->n;
		chains = q->chains;
		memcpy(addrs, q->addrs, n * sizeof(addrs[0]));
		free(q);
		if (acb != NULL) {
			a.result = result;
			a.addrs = addrs;
			a.n = n;
			a.ttl = ttl;
			a.chain[0] = chains && chains->c[0].n ? &chains->c[0] :
			    NULL;
			a.chain[1] = chains && chains->c[1].n ? &chains->c[1] :
			    NULL;
			acb(&a, cbarg);
		} else
			cb(result, addrs, n, ttl, cbarg);
		/* Not through r: the callback may have freed the resolver. */
		resolver_chains_unref(chains);
		if (r->dead)
			break;
	}
	r->delivering--;
	if (r->dead) {
		if (r->delivering == 0)
			free(r);
		return;
	}
	if (!TAILQ_EMPTY(&r->ready))
		event_active(r->ev_deliver, EV_TIMEOUT, 1);
}

static void
resolver_arm_timer(struct resolver *r)
{
	struct timeval tv, *tvp;

	tvp = ares_timeout(r->channel, NULL, &tv);
	if (tvp != NULL)
		evtimer_add(r->timer, tvp);
	else
		evtimer_del(r->timer);
}

static void
resolver_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;

	ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	resolver_arm_timer(r);
}

static void
resolver_sock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;

	/* May free this very event through resolver_sock_state_cb(). */
	ares_process_fd(r->channel, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	resolver_arm_timer(r);
}

static void
resolver_sock_state_cb(void *data, ares_socket_t fd, int readable,
    int writable)
{
	struct resolver *r = data;
	struct resolver_sock *s;
	short flags = EV_PERSIST;

	LIST_FOREACH(s, &r->socks, link)
		if (s->fd == fd)
			break;
	if (s != NULL && s->ev != NULL) {
		event_free(s->ev);
		s->ev = NULL;
	}
	if (!readable && !writable) {
		if (s != NULL) {
			LIST_REMOVE(s, link);
			free(s);
		}
		return;
	}
	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			goto fail;
		s->fd = fd;
		LIST_INSERT_HEAD(&r->socks, s, link);
	}
	if (readable)
		flags |= EV_READ;
	if (writable)
		flags |= EV_WRITE;
	if ((s->ev = event_new(r->base, fd, flags, resolver_sock_cb,
	    r)) == NULL || event_add(s->ev, NULL) == -1)
		goto fail;
	return;
fail:
	/* The timer still runs c-ares' retries; the query times out. */
	log_warnx("resolver: cannot watch c-ares socket %d", (int)fd);
}

static int
resolver_set_servers(struct resolver *r, const struct config *cfg)
{
	struct ares_addr_port_node nodes[CONFIG_MAX_RESOLVERS];
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;
	int i, n = 0, port, rc;

	for (i = 0; i < cfg->n_resolvers && i < CONFIG_MAX_RESOLVERS; i++) {
		memset(&nodes[n], 0, sizeof(nodes[n]));
		switch (cfg->resolvers[i].ss_family) {
		case AF_INET:
			sin = (const struct sockaddr_in *)&cfg->resolvers[i];
			nodes[n].family = AF_INET;
			nodes[n].addr.addr4 = sin->sin_addr;
			port = ntohs(sin->sin_port);
			break;
		case AF_INET6:
			sin6 = (const struct sockaddr_in6 *)&cfg->resolvers[i];
			nodes[n].family = AF_INET6;
			memcpy(nodes[n].addr.addr6._S6_un._S6_u8,
			    &sin6->sin6_addr, 16);
			port = ntohs(sin6->sin6_port);
			break;
		default:
			log_warnx("resolver: upstream resolver %d has no "
			    "IP address family", i);
			return -1;
		}
		nodes[n].udp_port = nodes[n].tcp_port = port ? port : 53;
		if (n > 0)
			nodes[n - 1].next = &nodes[n];
		n++;
	}
	if (n == 0) {
		log_warnx("resolver: no upstream resolvers configured");
		r->no_servers = 1;
	}
	if ((rc = ares_set_servers_ports(r->channel, n ? nodes : NULL)) !=
	    ARES_SUCCESS) {
		log_warnx("resolver: ares_set_servers_ports: %s",
		    ares_strerror(rc));
		return -1;
	}
	return 0;
}

struct resolver *
resolver_new(struct event_base *base, const struct config *cfg)
{
	struct resolver *r;
	struct ares_options o;
	int rc;

	pthread_once(&resolver_once, resolver_library_init);
	if (resolver_ares_status != ARES_SUCCESS) {
		log_warnx("resolver: ares_library_init: %s",
		    ares_strerror(resolver_ares_status));
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->base = base;
	LIST_INIT(&r->socks);
	TAILQ_INIT(&r->ready);
	TAILQ_INIT(&r->lru);
	hash_key_new(r->key);
	if ((r->buckets = calloc(RESOLVER_BUCKETS,
	    sizeof(r->buckets[0]))) == NULL ||
	    (r->timer = evtimer_new(base, resolver_timer_cb, r)) == NULL ||
	    (r->ev_deliver = event_new(base, -1, 0, resolver_deliver_cb,
	    r)) == NULL)
		goto fail;

	/* Servers come from resolv.conf unless the config names them. */
	memset(&o, 0, sizeof(o));
	o.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	o.timeout = RESOLVER_TIMEOUT_MS;
	o.tries = RESOLVER_TRIES;
	o.sock_state_cb = resolver_sock_state_cb;
	o.sock_state_cb_data = r;
	if ((rc = ares_init_options(&r->channel, &o, ARES_OPT_FLAGS |
	    ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
	    ARES_OPT_SOCK_STATE_CB)) != ARES_SUCCESS) {
		log_warnx("resolver: ares_init_options: %s",
		    ares_strerror(rc));
		r->channel = NULL;
		goto fail;
	}
	if (!cfg->resolvers_system && resolver_set_servers(r, cfg) == -1)
		goto fail;
	return r;
fail:
	resolver_free(r);
	return NULL;
}

void
resolver_free(struct resolver *r)
{
	struct resolver_entry *e;
	struct resolver_query *q;
	struct resolver_sock *s;
	size_t i;

	if (r == NULL)
		return;
	r->closing = 1;
	while ((q = TAILQ_FIRST(&r->ready)) != NULL) {
		TAILQ_REMOVE(&r->ready, q, link);
		resolver_chains_unref(q->chains);
		free(q);
	}
	for (i = 0; r->buckets != NULL && i < RESOLVER_BUCKETS; i++) {
		LIST_FOREACH(e, &r->buckets[i], hlink) {
			while ((q = TAILQ_FIRST(&e->waiters)) != NULL) {
				TAILQ_REMOVE(&e->waiters, q, link);
				free(q);
			}
		}
	}
	/* Runs the outstanding c-ares callbacks, which free their fetches. */
	if (r->channel != NULL)
		ares_destroy(r->channel);
	while ((s = LIST_FIRST(&r->socks)) != NULL) {
		LIST_REMOVE(s, link);
		if (s->ev != NULL)
			event_free(s->ev);
		free(s);
	}
	for (i = 0; r->buckets != NULL && i < RESOLVER_BUCKETS; i++) {
		while ((e = LIST_FIRST(&r->buckets[i])) != NULL) {
			free(e->fetch);
			resolver_entry_free(r, e);
		}
	}
	free(r->buckets);
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->ev_deliver != NULL)
		event_free(r->ev_deliver);
	if (r->delivering) {
		/* resolver_deliver_cb() is up the stack and frees r. */
		r->dead = 1;
		return;
	}
	free(r);
}

/* Start the A and AAAA queries; either may complete before this returns. */
static void
resolver_fetch_start(struct resolver *r, struct resolver_entry *e,
    struct resolver_fetch *f)
{
	int k;

	f->r = r;
	f->e = e;
	f->outstanding = 2;
	for (k = 0; k < 2; k++) {
		f->part[k].f = f;
		f->part[k].qtype = k == 0 ? DNS_TYPE_A : DNS_TYPE_AAAA;
		f->part[k].status = PART_FAIL;
	}
	e->fetch = f;
	if (r->no_servers) {
		/* c-ares 1.18 leaks the query it refuses for lack of servers. */
		f->outstanding = 0;
		resolver_fetch_done(f);
		return;
	}
	ares_query(r->channel, e->name, DNS_CLASS_IN, DNS_TYPE_A,
	    resolver_ares_cb, &f->part[0]);
	/* e and f may be gone after this call. */
	ares_query(r->channel, e->name, DNS_CLASS_IN, DNS_TYPE_AAAA,
	    resolver_ares_cb, &f->part[1]);
	resolver_arm_timer(r);
}

static struct resolver_query *
resolver_lookup_common(struct resolver *r, const char *name, resolver_cb cb,
    resolver_answer_cb acb, void *arg)
{
	struct resolver_query *q;
	struct resolver_entry *e;
	struct resolver_fetch *f;
	char key[RESOLVER_NAME_MAX + 1];
	size_t len;
	uint64_t h, now;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->r = r;
	q->cb = cb;
	q->acb = acb;
	q->arg = arg;
	if (resolver_normalise(name, key, &len) == -1) {
		/* No such name can exist; answered without asking. */
		q->result = RESOLVER_ENOTFOUND;
		q->ttl = RESOLVER_NEG_TTL;
		resolver_ready(r, q);
		return q;
	}
	h = hash_siphash(r->key, key, len);
	if ((e = resolver_cache_find(r, key, len, h)) != NULL &&
	    e->state == ENTRY_DONE) {
		now = resolver_now_ms();
		if (e->expires_ms > now) {
			r->hits++;
			TAILQ_REMOVE(&r->lru, e, lru);
			TAILQ_INSERT_TAIL(&r->lru, e, lru);
			q->result = e->result;
			q->ttl = (uint32_t)((e->expires_ms - now + 999) / 1000);
			q->n = e->n;
			if (e->n > 0)
				memcpy(q->addrs, e->addrs,
				    e->n * sizeof(e->addrs[0]));
			q->chains = resolver_chains_ref(e->chains);
			resolver_ready(r, q);
			return q;
		}
		resolver_entry_free(r, e);
		e = NULL;
	}
	if (e != NULL) {
		/* Coalesce with the upstream query already in flight. */
		r->hits++;
		q->e = e;
		TAILQ_INSERT_TAIL(&e->waiters, q, link);
		return q;
	}

	if ((e = calloc(1, sizeof(*e) + len + 1)) == NULL ||
	    (f = calloc(1, sizeof(*f))) == NULL) {
		free(e);
		free(q);
		return NULL;
	}
	memcpy(e->name, key, len + 1);
	e->namelen = len;
	e->hash = h;
	e->state = ENTRY_PENDING;
	TAILQ_INIT(&e->waiters);
	LIST_INSERT_HEAD(&r->buckets[h & (RESOLVER_BUCKETS - 1)], e, hlink);
	q->e = e;
	TAILQ_INSERT_TAIL(&e->waiters, q, link);
	r->misses++;
	resolver_fetch_start(r, e, f);
	return q;
}

struct resolver_query *
resolver_lookup(struct resolver *r, const char *name, resolver_cb cb,
    void *arg)
{
	return resolver_lookup_common(r, name, cb, NULL, arg);
}

struct resolver_query *
resolver_lookup_answer(struct resolver *r, const char *name,
    resolver_answer_cb cb, void *arg)
{
	return resolver_lookup_common(r, name, NULL, cb, arg);
}

void
resolver_cancel(struct resolver_query *q)
{
	if (q == NULL)
		return;
	if (q->e != NULL)
		TAILQ_REMOVE(&q->e->waiters, q, link);
	else
		TAILQ_REMOVE(&q->r->ready, q, link);
	resolver_chains_unref(q->chains);
	free(q);
}

/*
 * hits: lookups answered without new upstream work, from the cache or by
 * joining a fetch in flight; misses: fetches started (each asks A and AAAA).
 */
void
resolver_stats(const struct resolver *r, uint64_t *hits, uint64_t *misses,
    size_t *entries)
{
	if (hits != NULL)
		*hits = r->hits;
	if (misses != NULL)
		*misses = r->misses;
	if (entries != NULL)
		*entries = r->n_cached;
}

/* Raw queries: relayed, never cached, owned by c-ares until it answers. */
struct resolver_raw {
	struct resolver	*r;
	resolver_raw_cb	 cb;
	void		*arg;
	int		 cancelled;
	int		 ares_done;
	struct event	*ev;
	int		 result;
	unsigned char	*abuf;
	size_t		 alen;
};

static void
resolver_raw_free(struct resolver_raw *q)
{
	if (q->ev != NULL)
		event_free(q->ev);
	free(q->abuf);
	free(q);
}

static void
resolver_raw_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct resolver_raw *q = arg;

	if (!q->cancelled)
		q->cb(q->result, q->abuf, q->alen, q->arg);
	resolver_raw_free(q);
}

static void
resolver_raw_ares_cb(void *arg, int status, int timeouts, unsigned char *abuf,
    int alen)
{
	struct resolver_raw *q = arg;

	q->ares_done = 1;
	if (q->cancelled || status == ARES_EDESTRUCTION) {
		resolver_raw_free(q);
		return;
	}
	/* NXDOMAIN and NODATA come with a response: relay it as it is. */
	if (abuf != NULL && alen >= 12 && (status == ARES_SUCCESS ||
	    status == ARES_ENOTFOUND || status == ARES_ENODATA)) {
		if ((q->abuf = malloc((size_t)alen)) != NULL) {
			memcpy(q->abuf, abuf, (size_t)alen);
			q->alen = (size_t)alen;
			q->result = RESOLVER_OK;
		} else
			q->result = RESOLVER_EFAIL;
	} else
		q->result = status == ARES_ETIMEOUT ? RESOLVER_ETIMEOUT :
		    RESOLVER_EFAIL;
	event_active(q->ev, EV_TIMEOUT, 1);
}

struct resolver_raw *
resolver_query_raw(struct resolver *r, const char *name, uint16_t qtype,
    resolver_raw_cb cb, void *arg)
{
	struct resolver_raw *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	if ((q->ev = event_new(r->base, -1, 0, resolver_raw_deliver_cb,
	    q)) == NULL) {
		free(q);
		return NULL;
	}
	if (r->no_servers) {
		/* c-ares 1.18 leaks a query it refuses for lack of servers. */
		q->ares_done = 1;
		q->result = RESOLVER_EFAIL;
		event_active(q->ev, EV_TIMEOUT, 1);
		return q;
	}
	ares_query(r->channel, name, DNS_CLASS_IN, qtype, resolver_raw_ares_cb, q);
	resolver_arm_timer(r);
	return q;
}

void
resolver_raw_cancel(struct resolver_raw *q)
{
	if (q == NULL)
		return;
	q->cancelled = 1;
	/* Answered already: the delivery is pending, drop it now. */
	if (q->ares_done)
		resolver_raw_free(q);
}
