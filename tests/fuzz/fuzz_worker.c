/*
 * libFuzzer target for a whole worker (issue #12, point 10): one struct
 * proxy with one worker runs in-process; clients and origins are socketpair
 * ends the harness drives (TLS on both sides where the gateway intercepts).
 * After every input it checks the promises, not only for crashes:
 *
 *   - every complete request an origin received matches one audit row (each
 *     row used once) with decision allow (or error with an upstream-* reason
 *     or upgrade-refused: an allowed request whose answer failed or was
 *     refused), for that origin's host and
 *     port, with the same method and target (secret mapped back to its
 *     placeholder) and, for allow rows, as many body bytes as the row's
 *     bytes_up (the framing the gateway decided on is the one it wrote);
 *   - a request carrying the secret reached the credential's bound host over
 *     intercepted TLS, and its row names the credential;
 *   - no other origin connection, no byte toward any client and no audit row
 *     ever holds the secret (raw, percent-encoded, base64/base64url in any
 *     alignment, JSON-escaped);
 *   - the gateway never connects to an address no allowed name resolves to
 *     (nor to d.test's or x.test's, which no rule allows), and every session
 *     is gone once both sides closed;
 *   - SOCKS5: a success reply only where fz_policy, modelled here, allows
 *     the destination to the identity the client gave (fz2: nothing);
 *   - every ClientHello an origin receives, the gateway's or a client's
 *     passed through, names that origin: an SNI that differs from the
 *     CONNECT/SOCKS5 name never reaches one; a passed-through one without
 *     SNI only in a tunnel to an address; a passthrough origin connection
 *     needs one allow tunnel row for its name or address, port and IP;
 *   - an opaque payload (marked with its tunnel's host) reaches only that
 *     host's origins; the opaque origin is connected only under o.test's
 *     allow rules;
 *   - transparent: a row of a transparent client names its original port,
 *     and address where it names one and does not refuse; an allowed name
 *     resolves to that original address;
 *   - HTTP/2: the secret is looked for in what the client decodes as well.
 *
 * Production code is untouched: name resolution and audit rows are taken
 * over at link time (-Wl,--wrap=resolver_lookup,...,audit_submit, see
 * tests/CMakeLists.txt), and connect(2) is interposed: a connection to a
 * table address becomes a socketpair whose far end is "origin X";
 * getsockopt(SO_ORIGINAL_DST) is interposed too, for the transparent
 * listener's clients.
 *
 * The input is a small bytecode (see fz_run_ops): requests built from
 * templates (absolute form, origin form inside tunnels, Connection
 * variants, Upgrade, Content-Length / chunked bodies, placeholders in
 * headers, query and body), CONNECT, TLS start, raw bytes, loop runs,
 * further client connections, and the script of origin answers. Ops from
 * 240 on (fz_run_new_op; the older ones keep their meaning for the corpus)
 * open SOCKS5 and transparent clients, CONNECT to any name or address,
 * start TLS with a chosen SNI and ALPN h2, write opaque payloads, let the
 * sniff timers fire, and send HTTP/2 requests from an nghttp2 client.
 * t.test and six.test (IPv6) are passthrough, o.test is opaque and speaks
 * first; harness clients mark their ClientHellos with an extension of
 * their own, so that an origin knows a passed-through one.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "audit/audit.h"
#include "core/config.h"
#include "core/log.h"
#include "core/policy.h"
#include "daemon/daemon.h"
#include "dns/resolver.h"
#include "proxy/front.h"
#include "vault/ca.h"
#include "vault/keeper.h"
#include "vault/vault.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FZ_SECRET	"Zk9-SECRET/value+0123456789abcdefQ"
#define FZ_PH		"sg-ph-fuzzplaceholder00000001"
#define FZ_CRED		"api"
#define FZ_BOUND	2		/* index of api.test in fz_hosts */
#define FZ_MAX_CLIENTS	8
#define FZ_OLD_CLIENTS	4		/* what op 6 chooses among */
#define FZ_MAX_ORIGINS	24
#define FZ_MAX_REQS	64
#define FZ_MAX_ROWS	128
#define FZ_MAX_SENT	128
#define FZ_BUF_MAX	(512 * 1024)
#define FZ_MAX_ROUNDS	3000
#define FZ_MAX_SCRIPT	16
#define FZ_MAX_FORMS	12
#define FZ_EXT_CLIENT	0xfa5a		/* in the harness clients' ClientHellos */
#define FZ_TOKEN	"fz-token"	/* sandbox fz's proxy token */
#define FZ_TOKEN_SHA	"bc5c87140ef5db52ff2c401b1dbd326f84dfa511de9adebec3fa507d2741970e"
#define FZ_TOKEN2	"fz2-token"	/* sandbox fz2: policy default */
#define FZ_TOKEN2_SHA	"0d1b5259563f18cbdae65c88ca900d18df448600f805a676e51b21f3ea219afe"

/* The table resolver; index = origin identity. */
static const struct {
	const char	*name;
	const char	*addr[2];
} fz_hosts[] = {
	{ "a.test",	{ "198.18.0.1", NULL } },	/* GET only */
	{ "b.test",	{ "198.18.0.2", NULL } },	/* everything */
	{ "api.test",	{ "198.18.0.3", NULL } },	/* credential bound */
	{ "i.test",	{ "198.18.0.4", NULL } },	/* paths under /ok/ */
	{ "d.test",	{ "198.18.0.5", NULL } },	/* deny rule */
	{ "x.test",	{ "198.18.0.6", NULL } },	/* no rule */
	{ "p.test",	{ "10.0.0.1", NULL } },		/* internal: step 4 */
	{ "m.test",	{ "198.18.0.7", "10.0.0.2" } },	/* mixed: step 4 */
	/* Reached only by the ops from 240 on (the others keep % FZ_N_OLD). */
	{ "t.test",	{ "198.18.0.8", NULL } },	/* passthrough */
	{ "six.test",	{ "2001:db8::6", NULL } },	/* passthrough, IPv6 */
	{ "o.test",	{ "198.18.0.9", NULL } },	/* opaque, speaks first */
};
#define FZ_N_HOSTS	(sizeof(fz_hosts) / sizeof(fz_hosts[0]))
#define FZ_N_OLD	8
#define FZ_T		8		/* index of t.test */
#define FZ_SIX		9
#define FZ_O		10
#define FZ_BANNER	"SSH-2.0-fz-origin\r\n"	/* o.test's first words */
#define FZ_OPQ		"FZOPQ:"		/* an opaque payload's mark */

/*
 * Destinations written as addresses (SOCKS5 ATYP 1 and 4, the transparent
 * listener's original destination): whose address it is (-1: nobody's), and
 * whether a cidr rule of fz_policy allows it.
 */
static const struct {
	const char	*addr;
	int		 host;
	int		 cidr_allowed;
} fz_ips[] = {
	{ "198.18.0.8",		FZ_T,	1 },
	{ "198.18.0.2",		1,	0 },	/* b.test's: names only */
	{ "10.0.0.1",		6,	0 },
	{ "203.0.113.7",	-1,	0 },	/* nobody's: never connected to */
	{ "198.18.0.5",		4,	0 },	/* d.test's */
	{ "2001:db8::6",	FZ_SIX,	1 },
	{ "2001:db8::7",	-1,	0 },
	{ "::1",		-1,	0 },
	{ "198.18.0.9",		FZ_O,	1 },	/* opaque cidr rule */
};
#define FZ_N_IPS	(sizeof(fz_ips) / sizeof(fz_ips[0]))

struct fz_buf {
	unsigned char	*p;
	size_t		 len, cap;
};

/* One connection end the harness drives: a client, or an origin. */
struct fz_peer {
	int		 fd;
	SSL		*ssl;
	int		 tls_ok;	/* handshake done */
	int		 tls_dead;
	int		 eof;
	int		 is_origin;
	int		 sniffed;	/* origin: first byte seen */
	int		 tls;		/* origin: spoke TLS */
	int		 passthrough;	/* origin: the ClientHello was a client's */
	int		 no_sni;	/* origin: a ClientHello without SNI */
	struct fz_buf	 out;		/* plaintext to send */
	struct fz_buf	 in;		/* plaintext received */
	struct fz_buf	 sent;		/* everything sent (plaintext) */
	/* origin */
	int		 host;
	uint16_t	 port;
	char		 ip[INET6_ADDRSTRLEN];	/* what the gateway connected to */
	size_t		 parse_off;
	int		 raw;		/* after a 101: bytes only */
	int		 closing;	/* close once out is written */
	/* client */
	int		 tunnel_host;	/* the tunnel's host, -1 none */
	int		 connect_sent;	/* a CONNECT went out: later ones are payload */
	int		 raw_used;	/* wrote bytes no template made */
	int		 listener;	/* LISTENER_HTTP, _SOCKS5, ... */
	/* SOCKS5: what the model of fz_policy says of the request */
	int		 socks_sent;	/* a CONNECT request was written */
	int		 socks_may;	/* success allowed: identity and destination */
	char		 socks_dest[80];
	/* transparent: the original destination getsockopt reports */
	char		 orig_ip[INET_ADDRSTRLEN];
	uint16_t	 orig_port;
	/* HTTP/2 (ALPN h2 on an intercepted connection) */
	int		 h2_offer;	/* ALPN offered h2 */
	nghttp2_session	*h2;
	int		 h2_dead;
	size_t		 h2_off;	/* bytes of in given to nghttp2 */
	struct fz_buf	 h2_plain;	/* decoded headers and DATA received */
	struct fz_buf	 h2_body[8];	/* request bodies being sent */
	size_t		 h2_body_off[8];
	int		 n_h2_body;
};

struct fz_req {
	int		 origin;
	char		 method[32];
	char		 target[1024];
	size_t		 body_raw;
	int		 has_secret;
};

struct fz_row {
	char		 host[256];
	char		 method[32];
	char		 path[1024];
	char		 decision[16];
	char		 reason[64];
	char		 credential[64];
	char		 kind[16];
	char		 rule[64];
	char		 ip[64];
	int		 port;
	int		 status;
	int64_t		 bytes_up;
	int		 client;	/* index from the client's port; -1 unknown */
	int		 used;
};

/* A request a client wrote from a template: what its row must say. */
struct fz_sent {
	int		 client;
	char		 method[32];
	char		 path[64];
	char		 host[32];	/* the URL's or the CONNECT's host */
	int		 has_ph;	/* carries the placeholder somewhere */
};

/* A query of the table resolver: answered from the loop, never inline. */
#define FZ_RQ_MAGIC	0x66757a7aU
struct fz_rq {
	unsigned	 magic;
	struct event	*ev;
	resolver_cb	 cb;
	resolver_answer_cb acb;
	void		*arg;
	char		 name[256];
	struct fz_rq	*next;
};

static struct {
	int		 ready;
	char		 dir[256];
	struct proxy	*p;
	struct keeper	*keeper;		/* on a thread: the same protocol as serve's */
	int		 keeper_fd;
	pthread_t	 keeper_thread;
	struct worker	*w;
	SSL_CTX		*cctx;			/* harness clients */
	SSL_CTX		*octx[FZ_N_HOSTS];	/* harness origins, one leaf each */
	struct ca	*oca;
	char		 forms[FZ_MAX_FORMS][128];
	size_t		 n_forms;
	/* per input */
	int		 active;
	struct fz_peer	 clients[FZ_MAX_CLIENTS];
	int		 n_clients;
	int		 cur;
	struct fz_peer	 origins[FZ_MAX_ORIGINS];
	int		 n_origins;
	struct fz_req	 reqs[FZ_MAX_REQS];
	int		 n_reqs;
	int		 n_answered;
	struct fz_row	 rows[FZ_MAX_ROWS];
	int		 n_rows;
	struct fz_sent	 sent[FZ_MAX_SENT];
	int		 n_sent;
	uint8_t		 script[FZ_MAX_SCRIPT];
	int		 n_script;
	unsigned char	 rawresp[256];
	size_t		 rawresp_len;
	struct fz_rq	*rqs;
	/* the socket whose SO_ORIGINAL_DST is asked for, while conn_accept runs */
	int		 odst_fd;
	struct sockaddr_in odst;
} fz;

static void fz_fail(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---------------------------------------------------------------- utilities */

static void
buf_add(struct fz_buf *b, const void *p, size_t n)
{
	if (n == 0 || b->len + n > FZ_BUF_MAX)
		return;
	if (b->len + n > b->cap) {
		size_t ncap = b->cap ? b->cap : 1024;
		void *nv;

		while (ncap < b->len + n)
			ncap *= 2;
		if ((nv = realloc(b->p, ncap)) == NULL)
			abort();
		b->p = nv;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void
buf_str(struct fz_buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void
buf_free(struct fz_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static const char *
fz_secret_in(const void *p, size_t len)
{
	size_t i;

	if (p == NULL || len == 0)
		return NULL;
	for (i = 0; i < fz.n_forms; i++)
		if (memmem(p, len, fz.forms[i], strlen(fz.forms[i])) != NULL)
			return fz.forms[i];
	return NULL;
}

static void
fz_dump_rows(void)
{
	int i;

	fprintf(stderr, "audit rows of this input:\n");
	for (i = 0; i < fz.n_rows; i++) {
		const struct fz_row *r = &fz.rows[i];
		fprintf(stderr, "  [%d] %s %s host=%s port=%d ip=%s method=%s path=%s "
		    "status=%d rule=%s reason=%s credential=%s bytes_up=%lld "
		    "client=%d\n", i, r->kind, r->decision, r->host, r->port, r->ip,
		    r->method, r->path, r->status, r->rule, r->reason,
		    r->credential, (long long)r->bytes_up, r->client);
	}
}

static void
fz_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "\nfuzz_worker: PROMISE BROKEN: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	fz_dump_rows();
	abort();
}

/* ------------------------------------------------- link-time substitutes */

struct resolver_query *__real_resolver_lookup(struct resolver *, const char *,
    resolver_cb, void *);
struct resolver_query *__real_resolver_lookup_answer(struct resolver *,
    const char *, resolver_answer_cb, void *);
void	__real_resolver_cancel(struct resolver_query *);
int	__real_audit_submit(struct audit *, const struct audit_event *);

struct resolver_query *__wrap_resolver_lookup(struct resolver *, const char *,
    resolver_cb, void *);
struct resolver_query *__wrap_resolver_lookup_answer(struct resolver *,
    const char *, resolver_answer_cb, void *);
void	__wrap_resolver_cancel(struct resolver_query *);
int	__wrap_audit_submit(struct audit *, const struct audit_event *);
int	connect(int, const struct sockaddr *, socklen_t);
int	getsockopt(int, int, int, void *, socklen_t *);

static void
rq_unlink(struct fz_rq *q)
{
	struct fz_rq **pp;

	for (pp = &fz.rqs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	event_free(q->ev);
	free(q);
}

static void
rq_answer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fz_rq *q = arg;
	struct resolver_answer a;
	struct netaddr addrs[2];
	size_t i, n = 0;

	for (i = 0; i < FZ_N_HOSTS; i++) {
		if (strcmp(fz_hosts[i].name, q->name) != 0)
			continue;
		for (n = 0; n < 2 && fz_hosts[i].addr[n] != NULL; n++)
			if (netaddr_parse(fz_hosts[i].addr[n],
			    strlen(fz_hosts[i].addr[n]), &addrs[n]) == -1)
				abort();
	}
	memset(&a, 0, sizeof(a));
	a.result = n > 0 ? RESOLVER_OK : RESOLVER_ENOTFOUND;
	a.addrs = addrs;
	a.n = n;
	a.ttl = 300;
	if (q->cb != NULL)
		q->cb(a.result, addrs, n, a.ttl, q->arg);
	else
		q->acb(&a, q->arg);
	rq_unlink(q);
}

static struct resolver_query *
rq_new(const char *name, resolver_cb cb, resolver_answer_cb acb, void *arg)
{
	struct fz_rq *q;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->magic = FZ_RQ_MAGIC;
	q->cb = cb;
	q->acb = acb;
	q->arg = arg;
	snprintf(q->name, sizeof(q->name), "%s", name);
	if ((q->ev = event_new(fz.w->base, -1, 0, rq_answer_cb, q)) == NULL) {
		free(q);
		return NULL;
	}
	q->next = fz.rqs;
	fz.rqs = q;
	event_active(q->ev, EV_TIMEOUT, 0);
	return (struct resolver_query *)q;
}

struct resolver_query *
__wrap_resolver_lookup(struct resolver *r, const char *name, resolver_cb cb,
    void *arg)
{
	return rq_new(name, cb, NULL, arg);
}

struct resolver_query *
__wrap_resolver_lookup_answer(struct resolver *r, const char *name,
    resolver_answer_cb cb, void *arg)
{
	return rq_new(name, NULL, cb, arg);
}

void
__wrap_resolver_cancel(struct resolver_query *rq)
{
	struct fz_rq *q = (struct fz_rq *)rq;

	if (q != NULL && q->magic == FZ_RQ_MAGIC)
		rq_unlink(q);
	else
		__real_resolver_cancel(rq);
}

static void
row_str(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s != NULL ? s : "");
}

int
__wrap_audit_submit(struct audit *a, const struct audit_event *ev)
{
	const char *strs[] = { ev->sandbox, ev->kind, ev->client, ev->host,
	    ev->ip, ev->method, ev->path, ev->rule, ev->reason, ev->credential };
	struct fz_row *r;
	size_t i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strs[i] != NULL && fz_secret_in(strs[i], strlen(strs[i])))
			fz_fail("an audit row holds the secret: %s", strs[i]);
	if (!fz.active)
		return 0;
	if (fz.n_rows == FZ_MAX_ROWS)
		return 0;
	r = &fz.rows[fz.n_rows++];
	memset(r, 0, sizeof(*r));
	row_str(r->host, sizeof(r->host), ev->host);
	row_str(r->method, sizeof(r->method), ev->method);
	row_str(r->path, sizeof(r->path), ev->path);
	row_str(r->decision, sizeof(r->decision), verdict_word(ev->decision));
	row_str(r->reason, sizeof(r->reason), ev->reason);
	row_str(r->credential, sizeof(r->credential), ev->credential);
	row_str(r->kind, sizeof(r->kind), ev->kind);
	row_str(r->rule, sizeof(r->rule), ev->rule);
	row_str(r->ip, sizeof(r->ip), ev->ip);
	r->port = ev->port;
	r->status = ev->status;
	r->bytes_up = ev->bytes_up;
	r->client = -1;
	if (ev->client != NULL && strncmp(ev->client, "127.0.0.1:", 10) == 0) {
		int port = atoi(ev->client + 10);
		if (port >= 40000 && port < 40000 + FZ_MAX_CLIENTS)
			r->client = port - 40000;
	}
	return 0;
}

/*
 * Outgoing connections: an address of the table becomes a socketpair (the
 * gateway keeps its socket, now one end of the pair). While an input runs,
 * any other IP address, and an internal one of the table, is a broken
 * promise; outside inputs (start-up) connect(2) goes to the kernel.
 */
int
connect(int fd, const struct sockaddr *sa, socklen_t salen)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
	char abuf[INET6_ADDRSTRLEN];
	struct fz_peer *o;
	uint16_t port;
	size_t i, k;
	int sp[2];

	if (!fz.active || (sa->sa_family != AF_INET &&
	    sa->sa_family != AF_INET6))
		return (int)syscall(SYS_connect, fd, sa, salen);
	if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &sin6->sin6_addr, abuf, sizeof(abuf));
		port = ntohs(sin6->sin6_port);
	} else {
		inet_ntop(AF_INET, &sin->sin_addr, abuf, sizeof(abuf));
		port = ntohs(sin->sin_port);
	}
	for (i = 0; i < FZ_N_HOSTS; i++)
		for (k = 0; k < 2 && fz_hosts[i].addr[k] != NULL; k++)
			if (strcmp(fz_hosts[i].addr[k], abuf) == 0)
				goto found;
	/* Never the network: only names of the table may be reached. */
	fz_fail("the gateway connected to %s:%u, which no allowed name "
	    "resolves to", abuf, port);
found:
	if (strncmp(abuf, "10.", 3) == 0)
		fz_fail("the gateway connected to %s:%u, an internal address "
		    "no allow_private covers (%s)", abuf, port,
		    fz_hosts[i].name);
	/* d.test is denied, x.test has no rule, and no cidr rule covers either. */
	if (i == 4 || i == 5)
		fz_fail("the gateway connected to %s:%u, the address of %s, "
		    "which no rule allows", abuf, port, fz_hosts[i].name);
	if (fz.n_origins == FZ_MAX_ORIGINS) {
		errno = ECONNREFUSED;
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sp) == -1)
		return -1;
	if (dup2(sp[0], fd) == -1) {
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	close(sp[0]);
	o = &fz.origins[fz.n_origins++];
	memset(o, 0, sizeof(*o));
	o->fd = sp[1];
	o->is_origin = 1;
	o->host = (int)i;
	o->port = port;
	snprintf(o->ip, sizeof(o->ip), "%s", abuf);
	if (o->host == FZ_O) {
		/* A server that speaks first, then echoes: never HTTP. */
		if (send(o->fd, FZ_BANNER, sizeof(FZ_BANNER) - 1,
		    MSG_NOSIGNAL) != sizeof(FZ_BANNER) - 1)
			abort();
		o->raw = 1;
	}
	return 0;
}

/*
 * The transparent listener's original destination: for the socket of the
 * client being accepted, the address that client was given (as nftables'
 * redirect would record it); anything else goes to the kernel.
 */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST	80
#endif
int
getsockopt(int fd, int level, int optname, void *optval, socklen_t *optlen)
{
	if (fz.active && fd == fz.odst_fd && fd != -1 && level == SOL_IP &&
	    optname == SO_ORIGINAL_DST) {
		if (optlen == NULL || *optlen < sizeof(fz.odst)) {
			errno = EINVAL;
			return -1;
		}
		memcpy(optval, &fz.odst, sizeof(fz.odst));
		*optlen = sizeof(fz.odst);
		return 0;
	}
	return (int)syscall(SYS_getsockopt, fd, level, optname, optval, optlen);
}

/* ------------------------------------------------------------- peers, I/O */

/* Move bytes; 1 when anything moved (or a state changed). */
static int
peer_pump(struct fz_peer *c)
{
	unsigned char tmp[16384];
	uint64_t rd0 = 0, wr0 = 0;
	int progress = 0, n, e;

	if (c->fd == -1)
		return 0;
	if (c->is_origin && !c->sniffed) {
		unsigned char b;
		if (recv(c->fd, &b, 1, MSG_PEEK) != 1)
			return 0;
		c->sniffed = 1;
		progress = 1;
		if (b == 0x16) {
			c->tls = 1;
			if ((c->ssl = SSL_new(fz.octx[c->host])) == NULL)
				abort();
			SSL_set_app_data(c->ssl, c);
			SSL_set_fd(c->ssl, c->fd);
			SSL_set_accept_state(c->ssl);
		}
	}
	if (c->ssl != NULL) {
		if (c->tls_dead)
			return progress;
		rd0 = BIO_number_read(SSL_get_rbio(c->ssl));
		wr0 = BIO_number_written(SSL_get_wbio(c->ssl));
		if (!c->tls_ok) {
			n = SSL_do_handshake(c->ssl);
			if (n == 1)
				c->tls_ok = progress = 1;
			else {
				e = SSL_get_error(c->ssl, n);
				if (e != SSL_ERROR_WANT_READ &&
				    e != SSL_ERROR_WANT_WRITE) {
					c->tls_dead = 1;
					ERR_clear_error();
					return 1;
				}
			}
		}
		if (c->tls_ok) {
			while (c->out.len > 0) {
				n = SSL_write(c->ssl, c->out.p, (int)(c->out.len >
				    16384 ? 16384 : c->out.len));
				if (n <= 0)
					break;
				memmove(c->out.p, c->out.p + n, c->out.len - (size_t)n);
				c->out.len -= (size_t)n;
				progress = 1;
			}
			while (!c->eof) {
				n = SSL_read(c->ssl, tmp, sizeof(tmp));
				if (n > 0) {
					buf_add(&c->in, tmp, (size_t)n);
					progress = 1;
					continue;
				}
				e = SSL_get_error(c->ssl, n);
				if (e != SSL_ERROR_WANT_READ &&
				    e != SSL_ERROR_WANT_WRITE) {
					c->eof = 1;
					progress = 1;
				}
				break;
			}
		}
		if (c->tls_ok && c->out.len == 0 && c->closing) {
			(void)SSL_shutdown(c->ssl);
			shutdown(c->fd, SHUT_WR);
			c->closing = 0;
			progress = 1;
		}
		ERR_clear_error();
		if (BIO_number_read(SSL_get_rbio(c->ssl)) != rd0 ||
		    BIO_number_written(SSL_get_wbio(c->ssl)) != wr0)
			progress = 1;
		return progress;
	}
	while (c->out.len > 0) {
		n = (int)send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		memmove(c->out.p, c->out.p + n, c->out.len - (size_t)n);
		c->out.len -= (size_t)n;
		progress = 1;
	}
	if (c->out.len == 0 && c->closing && !c->eof) {
		shutdown(c->fd, SHUT_WR);
		c->closing = 0;
	}
	while (!c->eof) {
		n = (int)recv(c->fd, tmp, sizeof(tmp), 0);
		if (n > 0) {
			buf_add(&c->in, tmp, (size_t)n);
			progress = 1;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			c->eof = 1;
			progress = 1;
		}
		break;
	}
	return progress;
}

static void
peer_free(struct fz_peer *c)
{
	int i;

	if (c->h2 != NULL)
		nghttp2_session_del(c->h2);
	c->h2 = NULL;
	buf_free(&c->h2_plain);
	for (i = 0; i < 8; i++)
		buf_free(&c->h2_body[i]);
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	if (c->fd != -1)
		close(c->fd);
	buf_free(&c->out);
	buf_free(&c->in);
	buf_free(&c->sent);
	c->ssl = NULL;
	c->fd = -1;
}

static void
peer_send(struct fz_peer *c, const void *p, size_t n)
{
	buf_add(&c->out, p, n);
	buf_add(&c->sent, p, n);
}

static void
peer_sends(struct fz_peer *c, const char *s)
{
	peer_send(c, s, strlen(s));
}

/* ------------------------------------------ the origins' own HTTP parser */

static const char *
hdr_find(const char *head, size_t hlen, const char *name, size_t *vlen,
    const char **after)
{
	const char *p = *after ? *after : head, *end = head + hlen, *eol, *c;
	size_t nl = strlen(name);

	for (;;) {
		if ((eol = memmem(p, (size_t)(end - p), "\r\n", 2)) == NULL)
			return NULL;
		p = eol + 2;
		if (p >= end)
			return NULL;
		if ((eol = memmem(p, (size_t)(end - p), "\r\n", 2)) == NULL)
			return NULL;
		c = memchr(p, ':', (size_t)(eol - p));
		if (c != NULL && (size_t)(c - p) == nl &&
		    strncasecmp(p, name, nl) == 0) {
			c++;
			while (c < eol && (*c == ' ' || *c == '\t'))
				c++;
			*vlen = (size_t)(eol - c);
			while (*vlen > 0 && (c[*vlen - 1] == ' ' ||
			    c[*vlen - 1] == '\t'))
				(*vlen)--;
			*after = eol;
			return c;
		}
	}
}

/* Bytes of a chunked body at b[0..len): total raw length, 0 if incomplete. */
static size_t
chunked_len(const unsigned char *b, size_t len, int *bad)
{
	size_t off = 0;
	const unsigned char *eol;

	*bad = 0;
	for (;;) {
		unsigned long long sz = 0;
		size_t i = off;
		int digits = 0;

		if ((eol = memmem(b + off, len - off, "\r\n", 2)) == NULL)
			return 0;
		while (b + i < eol && isxdigit(b[i]) && digits < 16) {
			sz = sz * 16 + (unsigned)(isdigit(b[i]) ? b[i] - '0' :
			    (tolower(b[i]) - 'a' + 10));
			i++;
			digits++;
		}
		if (digits == 0) {
			*bad = 1;
			return 0;
		}
		off = (size_t)(eol - b) + 2;
		if (sz == 0)
			break;
		if (sz > len || off + sz + 2 > len)
			return 0;
		off += (size_t)sz;
		if (b[off] != '\r' || b[off + 1] != '\n') {
			*bad = 1;
			return 0;
		}
		off += 2;
	}
	for (;;) {		/* trailers up to the empty line */
		if ((eol = memmem(b + off, len - off, "\r\n", 2)) == NULL)
			return 0;
		if (eol == b + off)
			return off + 2;
		off = (size_t)(eol - b) + 2;
	}
}

static int
is_tchar(unsigned char c)
{
	return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static void respond(struct fz_peer *, const struct fz_req *,
    const unsigned char *, size_t, const char *, size_t);

/*
 * The origin's view: complete requests are recorded and answered. What the
 * gateway writes at a request boundary must be a request line.
 */
static int
origin_parse(struct fz_peer *o)
{
	int progress = 0;

	while (!o->raw && o->parse_off < o->in.len) {
		const unsigned char *b = o->in.p + o->parse_off;
		size_t len = o->in.len - o->parse_off, hlen, body = 0, vl, i;
		const char *head = (const char *)b, *v, *after = NULL, *sp1, *sp2;
		const unsigned char *eoh, *eol;
		struct fz_req *r;
		int has_cl = 0, has_te = 0, bad;
		unsigned long long cl = 0;

		if ((eol = memmem(b, len, "\r\n", 2)) != NULL) {
			sp1 = memchr(head, ' ', (size_t)(eol - b));
			sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)((const char *)eol -
			    sp1 - 1)) : NULL;
			for (i = 0; sp1 != NULL && head + i < sp1; i++)
				if (!is_tchar(b[i]))
					sp1 = NULL;
			if (sp1 == NULL || sp1 == head || sp2 == NULL ||
			    sp2 == sp1 + 1 || (const char *)eol - sp2 != 9 ||
			    strncmp(sp2, " HTTP/1.", 8) != 0) {
				if (o->passthrough)
					goto echo;
				fz_fail("origin %s:%u received bytes that are not "
				    "a request where a request must start: %.*s",
				    fz_hosts[o->host].name, o->port,
				    (int)(len < 200 ? len : 200), head);
			}
		}
		if ((eoh = memmem(b, len, "\r\n\r\n", 4)) == NULL)
			return progress;
		hlen = (size_t)(eoh - b) + 4;
		while ((v = hdr_find(head, hlen, "Content-Length", &vl,
		    &after)) != NULL) {
			unsigned long long c2 = strtoull(v, NULL, 10);
			if (has_cl && c2 != cl && o->passthrough)
				goto echo;
			if (has_cl && c2 != cl)
				fz_fail("origin %s received two Content-Lengths",
				    fz_hosts[o->host].name);
			cl = c2;
			has_cl = 1;
		}
		after = NULL;
		if ((v = hdr_find(head, hlen, "Transfer-Encoding", &vl,
		    &after)) != NULL)
			has_te = 1;
		if (has_te && has_cl && o->passthrough)
			goto echo;
		if (has_te && has_cl)
			fz_fail("origin %s received Content-Length and "
			    "Transfer-Encoding", fz_hosts[o->host].name);
		if (has_te) {
			if ((vl != 7 || strncasecmp(v, "chunked", 7) != 0) &&
			    o->passthrough)
				goto echo;
			if (vl != 7 || strncasecmp(v, "chunked", 7) != 0)
				fz_fail("origin %s received Transfer-Encoding "
				    "%.*s", fz_hosts[o->host].name, (int)vl, v);
			body = chunked_len(b + hlen, len - hlen, &bad);
			if (bad && o->passthrough)
				goto echo;
			if (bad)
				fz_fail("origin %s received a malformed chunked "
				    "body", fz_hosts[o->host].name);
			if (body == 0)
				return progress;
		} else if (has_cl) {
			if (cl > len - hlen)
				return progress;
			body = (size_t)cl;
		}
		if (fz.n_reqs == FZ_MAX_REQS)
			return progress;
		r = &fz.reqs[fz.n_reqs++];
		memset(r, 0, sizeof(*r));
		r->origin = (int)(o - fz.origins);
		sp1 = memchr(head, ' ', hlen);
		sp2 = memchr(sp1 + 1, ' ', hlen - (size_t)(sp1 + 1 - head));
		snprintf(r->method, sizeof(r->method), "%.*s",
		    (int)(sp1 - head), head);
		snprintf(r->target, sizeof(r->target), "%.*s",
		    (int)(sp2 - sp1 - 1), sp1 + 1);
		r->body_raw = body;
		r->has_secret = fz_secret_in(b, hlen + body) != NULL;
		o->parse_off += hlen + body;
		progress = 1;
		after = NULL;
		v = hdr_find(head, hlen, "Authorization", &vl, &after);
		respond(o, r, b, hlen + body, v, v ? vl : 0);
	}
	return progress;
echo:
	/* A client's own bytes, passed through, need not be HTTP: echoed. */
	o->raw = 1;
	return 1;
}

/* The answer to r, from the script the input set (default: 200 "ok"). */
static void
respond(struct fz_peer *o, const struct fz_req *r, const unsigned char *raw,
    size_t rawlen, const char *auth, size_t authlen)
{
	int t = fz.n_script ? fz.script[fz.n_answered % fz.n_script] % 9 : 0;
	int head = strcmp(r->method, "HEAD") == 0;
	int upgrade = memmem(raw, rawlen, "\r\nUpgrade:", 10) != NULL;
	char line[160];
	size_t n;

	fz.n_answered++;
	switch (t) {
	case 1:		/* echo the request as the body */
		n = rawlen > 4096 ? 4096 : rawlen;
		snprintf(line, sizeof(line), "HTTP/1.1 200 OK\r\n"
		    "Content-Length: %zu\r\n\r\n", n);
		peer_sends(o, line);
		if (!head)
			peer_send(o, raw, n);
		break;
	case 2:
		peer_sends(o, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
		if (!head)
			peer_sends(o, "3\r\nabc\r\n0\r\n\r\n");
		break;
	case 3:
		peer_sends(o, "HTTP/1.1 204 No Content\r\n\r\n");
		break;
	case 4:
		peer_sends(o, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
		if (!head)
			peer_sends(o, "bye");
		o->closing = 1;
		break;
	case 5:
		if (upgrade) {
			peer_sends(o, "HTTP/1.1 101 Switching Protocols\r\n"
			    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
			o->raw = 1;
			break;
		}
		peer_sends(o, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
		if (!head)
			peer_sends(o, "ok");
		break;
	case 6:
		if (fz.rawresp_len > 0)
			peer_send(o, fz.rawresp, fz.rawresp_len);
		else
			peer_sends(o, "HTTP/1.1 502 Bad\r\nContent-Length: 0\r\n\r\n");
		break;
	case 7:
		peer_sends(o, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
		    "Content-Length: 0\r\n\r\n");
		break;
	case 8:		/* the credential header echoed in a response header */
		peer_sends(o, "HTTP/1.1 200 OK\r\nX-Echo: ");
		peer_send(o, auth ? auth : "-", auth ? authlen : 1);
		peer_sends(o, "\r\nContent-Length: 0\r\n\r\n");
		break;
	default:
		peer_sends(o, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
		if (!head)
			peer_sends(o, "ok");
		break;
	}
}

/* ------------------------------------------- an HTTP/2 client (nghttp2) */

static ssize_t
h2_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	peer_send(arg, data, len);
	return (ssize_t)len;
}

/* What the client hears is checked decoded too: HPACK may hide bytes. */
static int
h2_header_cb(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *arg)
{
	struct fz_peer *c = arg;

	buf_add(&c->h2_plain, name, nlen);
	buf_add(&c->h2_plain, ": ", 2);
	buf_add(&c->h2_plain, value, vlen);
	buf_add(&c->h2_plain, "\n", 1);
	return 0;
}

static int
h2_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *d,
    size_t len, void *arg)
{
	buf_add(&((struct fz_peer *)arg)->h2_plain, d, len);
	return 0;
}

static ssize_t
h2_body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct fz_peer *c = arg;
	int k = src->fd;
	size_t n = c->h2_body[k].len - c->h2_body_off[k];

	if (n > len)
		n = len;
	memcpy(buf, c->h2_body[k].p + c->h2_body_off[k], n);
	c->h2_body_off[k] += n;
	if (c->h2_body_off[k] == c->h2_body[k].len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* The client's session, once TLS chose h2: the preface and SETTINGS go out. */
static int
fzh2_start(struct fz_peer *c)
{
	nghttp2_session_callbacks *cb;
	const unsigned char *alpn;
	unsigned alen;

	if (c->h2 != NULL)
		return 0;
	if (c->h2_dead || c->ssl == NULL || !c->tls_ok)
		return -1;
	SSL_get0_alpn_selected(c->ssl, &alpn, &alen);
	if (alen != 2 || memcmp(alpn, "h2", 2) != 0)
		return -1;
	if (nghttp2_session_callbacks_new(&cb) != 0)
		abort();
	nghttp2_session_callbacks_set_send_callback(cb, h2_send_cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2_header_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_data_cb);
	if (nghttp2_session_client_new(&c->h2, cb, c) != 0)
		abort();
	nghttp2_session_callbacks_del(cb);
	if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0) != 0)
		abort();
	return 0;
}

/* What the gateway wrote goes to nghttp2, and what nghttp2 has to say out. */
static int
fzh2_pump(struct fz_peer *c)
{
	ssize_t n;
	size_t before = c->out.len;

	if (c->h2 == NULL || c->h2_dead)
		return 0;
	if (c->in.len > c->h2_off) {
		n = nghttp2_session_mem_recv(c->h2, c->in.p + c->h2_off,
		    c->in.len - c->h2_off);
		if (n < 0) {
			c->h2_dead = 1;
			return 1;
		}
		c->h2_off = c->in.len;
	}
	if (nghttp2_session_send(c->h2) != 0)
		c->h2_dead = 1;
	return c->out.len != before;
}

/* ------------------------------------------------------------ the event loop */

static int
fz_pump_once(void)
{
	int i, progress = 0;

	for (i = 0; i < fz.n_clients; i++) {
		progress |= peer_pump(&fz.clients[i]);
		progress |= fzh2_pump(&fz.clients[i]);
	}
	for (i = 0; i < fz.n_origins; i++) {
		struct fz_peer *o = &fz.origins[i];
		progress |= peer_pump(o);
		progress |= origin_parse(o);
		if (o->raw && o->parse_off < o->in.len) {
			/* An upgraded origin echoes. */
			peer_send(o, o->in.p + o->parse_off, o->in.len - o->parse_off);
			o->parse_off = o->in.len;
			progress = 1;
		}
		progress |= peer_pump(o);
	}
	return progress;
}

static void
fz_run(void)
{
	int round, idle = 0;

	for (round = 0; round < FZ_MAX_ROUNDS && idle < 4; round++) {
		event_base_loop(fz.w->base, EVLOOP_NONBLOCK);
		if (fz_pump_once())
			idle = 0;
		else
			idle++;
	}
}

static struct fz_peer *
client_new(int listener)
{
	struct sockaddr_in sin;
	struct fz_peer *c;
	int sp[2];

	if (fz.n_clients == FZ_MAX_CLIENTS)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sp) == -1)
		abort();
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)(40000 + fz.n_clients));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	atomic_fetch_add(&fz.p->n_conns, 1);
	c = &fz.clients[fz.n_clients++];
	memset(c, 0, sizeof(*c));
	c->fd = sp[1];
	c->tunnel_host = -1;
	c->listener = listener;
	fz.odst_fd = sp[0];
	if (conn_accept(fz.w, (enum listener_kind)listener, sp[0],
	    (struct sockaddr *)&sin, sizeof(sin)) == NULL)
		abort();
	fz.odst_fd = -1;
	return c;
}

/* --------------------------------------------------------- the bytecode */

struct fz_in {
	const uint8_t	*p;
	size_t		 len, off;
};

static uint8_t
next8(struct fz_in *in)
{
	return in->off < in->len ? in->p[in->off++] : 0;
}

static const char *const methods[] = { "GET", "POST", "HEAD", "PUT", "DELETE" };
static const char *const paths[] = { "/", "/ok/x", "/v1/x?key=" FZ_PH,
    "/no", "/ok/../x", "/" FZ_PH };
static const char *const conns[] = { "", "Connection: close\r\n",
    "Connection: keep-alive, Content-Length\r\n",
    "Connection: Transfer-Encoding\r\n",
    "Connection: keep-alive\r\n",
    "Connection: Upgrade\r\nUpgrade: websocket\r\n",
    "Connection: Host\r\n",
    "Connection: Upgrade, Content-Length\r\nUpgrade: websocket\r\n" };
static const uint16_t ports[] = { 443, 80, 8443 };

/* Authorization: none, Bearer placeholder, Basic user:placeholder. */
static void
add_auth(struct fz_buf *b, int kind)
{
	unsigned char enc[128];

	if (kind == 1)
		buf_str(b, "Authorization: Bearer " FZ_PH "\r\n");
	else if (kind == 2) {
		EVP_EncodeBlock(enc, (const unsigned char *)"u:" FZ_PH,
		    (int)strlen("u:" FZ_PH));
		buf_str(b, "Authorization: Basic ");
		buf_str(b, (const char *)enc);
		buf_str(b, "\r\n");
	}
}

static void
add_body(struct fz_buf *b, int kind)
{
	static const char smuggle[] = "GET http://b.test/smuggled HTTP/1.1\r\n"
	    "Host: b.test\r\n\r\n";
	static const char smuggle_in[] = "GET /smuggled HTTP/1.1\r\n"
	    "Host: b.test\r\n\r\n";
	char line[64];

	switch (kind) {
	case 1:
		buf_str(b, "Content-Length: 5\r\n\r\nhello");
		break;
	case 2:
		buf_str(b, "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
		break;
	case 3:
		snprintf(line, sizeof(line), "Content-Length: %zu\r\n\r\n",
		    sizeof(smuggle) - 1);
		buf_str(b, line);
		buf_str(b, smuggle);
		break;
	case 4:
		snprintf(line, sizeof(line), "Content-Length: %zu\r\n\r\n",
		    sizeof(smuggle_in) - 1);
		buf_str(b, line);
		buf_str(b, smuggle_in);
		break;
	case 5:
		buf_str(b, "Content-Length: 34\r\n\r\nkey=" FZ_PH "x");
		break;
	default:
		buf_str(b, "\r\n");
		break;
	}
}

static void
sent_note(struct fz_peer *c, const char *method, const char *path,
    const char *host, int has_ph)
{
	struct fz_sent *t;

	if (fz.n_sent == FZ_MAX_SENT) {
		c->raw_used = 1;	/* not all noted: no row check */
		return;
	}
	t = &fz.sent[fz.n_sent++];
	t->client = (int)(c - fz.clients);
	snprintf(t->method, sizeof(t->method), "%s", method);
	snprintf(t->path, sizeof(t->path), "%s", path);
	snprintf(t->host, sizeof(t->host), "%s", host);
	t->has_ph = has_ph;
}

/* One request from a template, absolute form or (in a tunnel) origin form. */
static void
op_request(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p1 = next8(in), p2 = next8(in), p3 = next8(in);
	int host = p1 & 7;
	int method = ((p1 >> 3) & 7) % 5, path = (p2 & 7) % 6;
	struct fz_buf b = { NULL, 0, 0 };
	char line[1200];

	if (c->tunnel_host >= 0 && !(p1 & 0x80))
		host = c->tunnel_host;
	if (c->tunnel_host >= 0)
		snprintf(line, sizeof(line), "%s %s HTTP/1.%d\r\nHost: %s\r\n",
		    methods[method], paths[path], (p3 >> 5) & 1 ? 0 : 1,
		    fz_hosts[host].name);
	else
		snprintf(line, sizeof(line), "%s http://%s%s HTTP/1.%d\r\n"
		    "Host: %s\r\n", methods[method], fz_hosts[host].name,
		    paths[path], (p3 >> 5) & 1 ? 0 : 1, fz_hosts[host].name);
	buf_str(&b, line);
	buf_str(&b, conns[(p2 >> 3) & 7]);
	add_auth(&b, ((p3 >> 3) & 3) % 3);
	add_body(&b, (p3 & 7) > 5 ? 0 : p3 & 7);
	peer_send(c, b.p, b.len);
	buf_free(&b);
	sent_note(c, methods[method], paths[path], fz_hosts[host].name,
	    ((p3 >> 3) & 3) % 3 != 0 || (p3 & 7) == 5 ||
	    strstr(paths[path], FZ_PH) != NULL);
	if (c->listener == LISTENER_TRANSPARENT)	/* the Host names it */
		sent_note(c, "CONNECT", "", fz_hosts[host].name, 0);
}

static void
op_connect(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p = next8(in);
	int host = p % FZ_N_OLD;
	uint16_t port = ports[(p >> 4) % 3];
	char line[256];

	snprintf(line, sizeof(line), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n"
	    "\r\n", fz_hosts[host].name, port, fz_hosts[host].name, port);
	peer_sends(c, line);
	/*
	 * The first CONNECT opens the tunnel; a later one on the same
	 * connection is payload inside it, for the first one's host.
	 */
	if (!c->connect_sent)
		c->tunnel_host = host;
	c->connect_sent = 1;
	sent_note(c, "CONNECT", "", fz_hosts[host].name, 0);
}

static void
op_tls(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p = next8(in);
	int host = c->tunnel_host >= 0 && !(p & 0x80) ? c->tunnel_host :
	    p % (int)FZ_N_OLD;

	if (c->ssl != NULL)
		return;
	fz_run();		/* the 200 first, in plain */
	if ((c->ssl = SSL_new(fz.cctx)) == NULL)
		abort();
	SSL_set_fd(c->ssl, c->fd);
	SSL_set_tlsext_host_name(c->ssl, fz_hosts[host].name);
	SSL_set_connect_state(c->ssl);
	if (c->listener == LISTENER_TRANSPARENT)	/* the SNI names it */
		sent_note(c, "CONNECT", "", fz_hosts[host].name, 0);
	if (c->tunnel_host < 0)
		c->tunnel_host = host;
}

/*
 * fz_policy as a model, for a tunnel asked for by name (host) or address
 * (ip): sandbox fz reaches the names whose allow rule comes first and whose
 * addresses are all public or allow_private, and the addresses a cidr rule
 * names, on the default ports 80 and 443; fz2 (policy default) nothing.
 */
static int
fz_may_tunnel(int host, const char *ip, uint16_t port)
{
	size_t i;

	if (port != 80 && port != 443)
		return 0;
	if (ip != NULL) {
		for (i = 0; i < FZ_N_IPS; i++)
			if (strcmp(fz_ips[i].addr, ip) == 0)
				return fz_ips[i].cidr_allowed;
		return 0;
	}
	return host == 0 || host == 1 || host == FZ_BOUND || host == 3 ||
	    host == FZ_T || host == FZ_SIX || host == FZ_O;
}

/*
 * A new SOCKS5 client: greeting (no auth, user/pass, both, or nothing
 * acceptable), user/pass when the gateway is to choose it (fz's token, a
 * wrong one, fz2's, an unknown id), then CONNECT (or BIND) by name, IPv4,
 * IPv6 (an IPv4-mapped one too) or an unknown address type; all at once,
 * as a client that does not wait for the replies.
 */
static struct fz_peer *
op_socks(struct fz_in *in)
{
	static const uint8_t greets[4][4] = { { 5, 1, 0 }, { 5, 1, 2 },
	    { 5, 2, 2, 0 }, { 5, 1, 0x80 } };
	static const size_t greet_len[4] = { 3, 3, 4, 3 };
	static const char *const users[4][2] = { { "fz", FZ_TOKEN },
	    { "fz", "fz-wrong" }, { "fz2", FZ_TOKEN2 }, { "zz", FZ_TOKEN } };
	uint8_t p1 = next8(in), p2 = next8(in), p3 = next8(in);
	int g = p1 & 3, cred = (p1 >> 2) & 3, atyp = (p1 >> 4) & 3;
	int bind = (p1 >> 6) & 1, ident_ok, host = -1;
	uint16_t port = ports[p3 % 3];
	unsigned char a6[16];
	char dest[64];
	const char *ip = NULL;
	struct fz_peer *c;
	uint8_t msg[320];
	size_t n = 0, l;

	if ((c = client_new(LISTENER_SOCKS5)) == NULL)
		return NULL;
	peer_send(c, greets[g], greet_len[g]);
	if (g == 1 || g == 2) {
		msg[n++] = 1;
		msg[n++] = (uint8_t)(l = strlen(users[cred][0]));
		memcpy(msg + n, users[cred][0], l);
		n += l;
		msg[n++] = (uint8_t)(l = strlen(users[cred][1]));
		memcpy(msg + n, users[cred][1], l);
		n += l;
		ident_ok = cred == 0;
	} else
		ident_ok = g == 0;
	msg[n++] = 5;
	msg[n++] = bind ? 2 : 1;
	msg[n++] = 0;
	if (atyp == 0) {
		host = p2 % (int)FZ_N_HOSTS;
		snprintf(dest, sizeof(dest), "%s", fz_hosts[host].name);
		msg[n++] = 3;
		msg[n++] = (uint8_t)(l = strlen(dest));
		memcpy(msg + n, dest, l);
		n += l;
	} else if (atyp == 3) {
		snprintf(dest, sizeof(dest), "?");
		memcpy(msg + n, "\x05\xc6\x12\x00\x08", 5);	/* ATYP 5 */
		n += 5;
	} else {
		size_t i = p2 % FZ_N_IPS;

		ip = fz_ips[i].addr;
		host = fz_ips[i].host;
		snprintf(dest, sizeof(dest), "%s", ip);
		if (inet_pton(AF_INET, ip, a6 + 12) == 1) {
			if (atyp == 2) {
				/* The same address IPv4-mapped: ::ffff:a.b.c.d */
				memset(a6, 0, 10);
				a6[10] = a6[11] = 0xff;
				msg[n++] = 4;
				memcpy(msg + n, a6, 16);
				n += 16;
			} else {
				msg[n++] = 1;
				memcpy(msg + n, a6 + 12, 4);
				n += 4;
			}
		} else {
			if (inet_pton(AF_INET6, ip, a6) != 1)
				abort();
			msg[n++] = 4;
			memcpy(msg + n, a6, 16);
			n += 16;
		}
	}
	msg[n++] = (uint8_t)(port >> 8);
	msg[n++] = (uint8_t)port;
	peer_send(c, msg, n);
	c->socks_sent = !bind && atyp != 3;
	c->socks_may = ident_ok && fz_may_tunnel(host, ip, port);
	snprintf(c->socks_dest, sizeof(c->socks_dest), "%s:%u", dest, port);
	c->tunnel_host = host;
	c->connect_sent = 1;		/* a CONNECT inside it is payload */
	if (!bind && atyp != 3)
		sent_note(c, "CONNECT", "", dest, 0);
	return c;
}

static void	op_tls_sni(struct fz_peer *, struct fz_in *);

/*
 * CONNECT to any name of the table, or to an address of fz_ips (IPv6 in
 * brackets), on 443, 80 or 8443.
 */
static void
op_connect_any(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p1 = next8(in), p2 = next8(in);
	uint16_t port = ports[p2 % 3];
	char line[256], auth[120], dest[64];
	int host;

	if (p1 & 0x80) {
		size_t i = (p1 & 0x7f) % FZ_N_IPS;

		host = fz_ips[i].host;
		snprintf(dest, sizeof(dest), strchr(fz_ips[i].addr, ':') ?
		    "[%s]" : "%s", fz_ips[i].addr);
		sent_note(c, "CONNECT", "", fz_ips[i].addr, 0);
	} else {
		host = p1 % (int)FZ_N_HOSTS;
		snprintf(dest, sizeof(dest), "%s", fz_hosts[host].name);
		sent_note(c, "CONNECT", "", dest, 0);
	}
	snprintf(line, sizeof(line), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n",
	    dest, port, dest, port);
	peer_sends(c, line);
	/* Proxy-Authorization: none, fz's token, fz2's (policy default) */
	if ((p2 >> 2) & 3) {
		unsigned char enc[64];
		const char *up = ((p2 >> 2) & 3) == 1 ? "fz:" FZ_TOKEN :
		    ((p2 >> 2) & 3) == 2 ? "fz2:" FZ_TOKEN2 : "fz:wrong";

		EVP_EncodeBlock(enc, (const unsigned char *)up, (int)strlen(up));
		snprintf(auth, sizeof(auth), "Proxy-Authorization: Basic %s\r\n",
		    enc);
		peer_sends(c, auth);
	}
	peer_sends(c, "\r\n");
	if (!c->connect_sent)		/* as in op_connect: the first opens it */
		c->tunnel_host = host;
	c->connect_sent = 1;
}

/*
 * Bytes neither TLS nor HTTP, as ssh or a database client writes, marked
 * with the host the client's tunnel is for ("*": none known).
 */
static void
op_opaque(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p = next8(in);
	char line[96];

	snprintf(line, sizeof(line), "%s%s%s;%u\r\n", (p & 1) ? "\x01\x02" :
	    "SSH-2.0-fz-client ", FZ_OPQ, c->tunnel_host >= 0 ?
	    fz_hosts[c->tunnel_host].name : "*", p);
	peer_sends(c, line);
}

/* Time passes: every session's pending sniff timer fires (5 s, no bytes). */
static void
op_time_passes(void)
{
	struct exchange *s, *next;

	fz_run();
	for (s = TAILQ_FIRST(&fz.w->exchanges); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->c->timer != NULL && evtimer_pending(s->c->timer, NULL))
			event_active(s->c->timer, EV_TIMEOUT, 1);
	}
	fz_run();
}

/*
 * A new client of the transparent listener, redirected from an address of
 * the table (a name's, or one of fz_ips') on 443, 80 or 8443. What it says
 * first (TLS with some SNI, an HTTP request, opaque bytes, or nothing until
 * time passes) is up to the next ops.
 */
static struct fz_peer *
op_transparent(struct fz_in *in)
{
	uint8_t p1 = next8(in), p2 = next8(in);
	const char *ip;
	struct fz_peer *c;
	int host;

	if (p1 & 0x80) {
		size_t i = (p1 & 0x7f) % FZ_N_IPS;

		ip = fz_ips[i].addr;
		host = fz_ips[i].host;
	} else {
		host = p1 % (int)FZ_N_HOSTS;
		ip = fz_hosts[host].addr[0];
	}
	if (strchr(ip, ':') != NULL) {	/* an IPv4 client: an IPv4 destination */
		ip = "203.0.113.7";
		host = -1;
	}
	memset(&fz.odst, 0, sizeof(fz.odst));
	fz.odst.sin_family = AF_INET;
	fz.odst.sin_port = htons(ports[p2 % 3]);
	if (inet_pton(AF_INET, ip, &fz.odst.sin_addr) != 1)
		abort();
	if ((c = client_new(LISTENER_TRANSPARENT)) == NULL)
		return NULL;
	snprintf(c->orig_ip, sizeof(c->orig_ip), "%s", ip);
	c->orig_port = ports[p2 % 3];
	c->tunnel_host = host;
	c->connect_sent = 1;		/* its destination is fixed */
	/* What the first bytes do not name, the address does. */
	sent_note(c, "CONNECT", "", ip, 0);
	return c;
}

/*
 * A request as an HTTP/2 stream (the connection must have chosen h2): the
 * same templates' method, path, :authority (the tunnel's name, or another),
 * Authorization and body (with or without content-length), and a header
 * the gateway must refuse (connection-specific) now and then.
 */
static void
op_h2_request(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p1 = next8(in), p2 = next8(in), p3 = next8(in);
	int host = p1 & 7, method = ((p1 >> 3) & 7) % 5, path = (p2 & 7) % 6;
	int auth = ((p3 >> 3) & 3) % 3, body = p3 & 7, has_ph;
	nghttp2_nv nv[8];
	nghttp2_data_provider dp;
	unsigned char enc[128];
	char authv[160], clen[24];
	const char *bodytext = NULL;
	size_t n = 0;

	fz_run();		/* the handshake and the server's SETTINGS */
	if (fzh2_start(c) == -1)
		return;
	if (c->tunnel_host >= 0 && !(p1 & 0x80))
		host = c->tunnel_host;
#define NV(nm, v) do {							\
	nv[n].name = (uint8_t *)(nm); nv[n].namelen = strlen(nm);	\
	nv[n].value = (uint8_t *)(v); nv[n].valuelen = strlen(v);	\
	nv[n].flags = NGHTTP2_NV_FLAG_NONE; n++;			\
} while (0)
	NV(":method", methods[method]);
	NV(":scheme", "https");
	NV(":authority", fz_hosts[host].name);
	NV(":path", paths[path]);
	if (auth == 1)
		NV("authorization", "Bearer " FZ_PH);
	else if (auth == 2) {
		EVP_EncodeBlock(enc, (const unsigned char *)"u:" FZ_PH,
		    (int)strlen("u:" FZ_PH));
		snprintf(authv, sizeof(authv), "Basic %s", enc);
		NV("authorization", authv);
	}
	if (body == 1 || body == 2)
		bodytext = "hello";
	else if (body == 5)
		bodytext = "key=" FZ_PH "x";
	if (bodytext != NULL && body != 2) {
		snprintf(clen, sizeof(clen), "%zu", strlen(bodytext));
		NV("content-length", clen);
	}
	if (((p2 >> 3) & 7) == 7)
		NV("connection", "close");	/* malformed in HTTP/2 */
#undef NV
	has_ph = auth != 0 || body == 5 || strstr(paths[path], FZ_PH) != NULL;
	if (bodytext != NULL && c->n_h2_body < 8) {
		int k = c->n_h2_body++;

		buf_str(&c->h2_body[k], bodytext);
		buf_add(&c->sent, bodytext, strlen(bodytext));
		dp.source.fd = k;
		dp.read_callback = h2_body_cb;
		if (nghttp2_submit_request(c->h2, NULL, nv, n, &dp, c) < 0)
			return;
	} else if (nghttp2_submit_request(c->h2, NULL, nv, n, NULL, c) < 0)
		return;
	sent_note(c, methods[method], paths[path], fz_hosts[host].name, has_ph);
	(void)fzh2_pump(c);
}

/* Ops 240 and up: the listeners and tunnels beyond the HTTP proxy's. */
static void
fz_run_new_op(struct fz_peer **cp, uint8_t op, struct fz_in *in)
{
	struct fz_peer *c;

	switch (op) {
	case 0:
		if ((c = op_socks(in)) != NULL)
			*cp = c;
		break;
	case 1:
		op_tls_sni(*cp, in);
		break;
	case 2:
		op_connect_any(*cp, in);
		break;
	case 3:
		op_opaque(*cp, in);
		break;
	case 4:
		op_time_passes();
		break;
	case 5:
		if ((c = op_transparent(in)) != NULL)
			*cp = c;
		break;
	case 6:
		op_h2_request(*cp, in);
		break;
	}
}

/*
 * TLS from the client with a chosen SNI: the tunnel's name, none (as to an
 * address), another name of the table, or the tunnel's with a trailing dot.
 */
static void
op_tls_sni(struct fz_peer *c, struct fz_in *in)
{
	uint8_t p = next8(in);
	int kind = p & 3, host = c->tunnel_host;
	char name[64];

	if (c->ssl != NULL)
		return;
	if (kind == 2 || host < 0)
		host = (p >> 2) % (int)FZ_N_HOSTS;
	fz_run();		/* the tunnel's answer first, in plain */
	if ((c->ssl = SSL_new(fz.cctx)) == NULL)
		abort();
	SSL_set_fd(c->ssl, c->fd);
	snprintf(name, sizeof(name), kind == 3 ? "%s." : "%s",
	    fz_hosts[host].name);
	if (kind != 1)
		SSL_set_tlsext_host_name(c->ssl, name);
	c->h2_off = c->in.len;	/* HTTP/2 starts inside TLS */
	if (p & 0x80) {		/* ALPN: h2 first */
		if (SSL_set_alpn_protos(c->ssl, (const unsigned char *)
		    "\x02h2\x08http/1.1", 12) != 0)
			abort();
		c->h2_offer = 1;
	}
	SSL_set_connect_state(c->ssl);
	if (c->listener == LISTENER_TRANSPARENT && kind != 1)
		sent_note(c, "CONNECT", "", fz_hosts[host].name, 0);
	if (c->tunnel_host < 0)
		c->tunnel_host = host;
}

static void
fz_run_ops(struct fz_in *in)
{
	struct fz_peer *c = &fz.clients[0];
	size_t n;
	uint8_t op;

	while (in->off < in->len) {
		op = next8(in);
		if (op >= 240) {
			fz_run_new_op(&c, (uint8_t)(op - 240), in);
			continue;
		}
		switch (op % 10) {
		case 0:
		case 1:
			op_request(c, in);
			break;
		case 2:
			op_connect(c, in);
			break;
		case 3:
			op_tls(c, in);
			break;
		case 4:		/* raw bytes */
			n = next8(in) % 128;
			if (n > in->len - in->off)
				n = in->len - in->off;
			peer_send(c, in->p + in->off, n);
			in->off += n;
			c->raw_used = 1;
			break;
		case 5:
			fz_run();
			break;
		case 6:		/* another client connection */
			n = next8(in) % FZ_OLD_CLIENTS;
			if ((int)n < fz.n_clients)
				c = &fz.clients[n];
			else if (client_new(LISTENER_HTTP) != NULL)
				c = &fz.clients[fz.n_clients - 1];
			break;
		case 7:		/* the origins' next answers */
			if (fz.n_script < FZ_MAX_SCRIPT)
				fz.script[fz.n_script++] = next8(in);
			break;
		case 8:		/* a raw answer for template 6 */
			n = next8(in) % 128;
			if (n > in->len - in->off)
				n = in->len - in->off;
			memcpy(fz.rawresp, in->p + in->off, n);
			fz.rawresp_len = n;
			in->off += n;
			break;
		case 9:		/* pipelining: two requests at once */
			op_request(c, in);
			op_request(c, in);
			break;
		}
	}
}

/* ---------------------------------------------------------------- the oracle */

/* A target as the client wrote it: the swapped secret back to the placeholder. */
static void
unswap(char *t, size_t size)
{
	char out[1024];
	size_t i, o = 0, k;

	for (i = 0; t[i] != '\0' && o + 1 < sizeof(out);) {
		for (k = 0; k < fz.n_forms; k++) {
			size_t fl = strlen(fz.forms[k]);
			if (strncmp(t + i, fz.forms[k], fl) == 0 &&
			    o + sizeof(FZ_PH) < sizeof(out)) {
				memcpy(out + o, FZ_PH, sizeof(FZ_PH) - 1);
				o += sizeof(FZ_PH) - 1;
				i += fl;
				break;
			}
		}
		if (k == fz.n_forms)
			out[o++] = t[i++];
	}
	out[o] = '\0';
	snprintf(t, size, "%s", out);
}

static int
row_matches(const struct fz_row *r, const struct fz_req *q,
    const struct fz_peer *o)
{
	if (r->used || strcmp(r->host, fz_hosts[o->host].name) != 0 ||
	    r->port != o->port || strcmp(r->method, q->method) != 0 ||
	    strcmp(r->path, q->target) != 0)
		return 0;
	if (strcmp(r->decision, "error") == 0)
		return strncmp(r->reason, "upstream-", 9) == 0 ||
		    strcmp(r->reason, "upgrade-refused") == 0 ||
		    (r->status == 101 &&
		    strcmp(r->reason, "websocket-protocol-error") == 0);
	/*
	 * An upgraded connection is one row, written when it ends: one the
	 * gateway ended on a frame it refused carries that denial, and its
	 * request went out before.
	 */
	if (r->status == 101 && strcmp(r->decision, "deny") == 0)
		return strcmp(r->reason, "websocket-protocol-error") == 0 ||
		    strcmp(r->reason, "credential-misuse") == 0;
	if (strcmp(r->decision, "allow") != 0 || strcmp(r->ip, o->ip) != 0)
		return 0;
	if (r->status != 101 && r->bytes_up != (int64_t)q->body_raw)
		return 0;
	if (q->has_secret && strcmp(r->credential, FZ_CRED) != 0)
		return 0;
	return 1;
}

/* FUZZ_WORKER_TRACE=1: what each input did, to see that seeds go deep. */
static void
fz_trace(void)
{
	int i;

	fz_dump_rows();
	for (i = 0; i < fz.n_reqs; i++)
		fprintf(stderr, "  origin %s:%u%s got %s %s body=%zu%s\n",
		    fz_hosts[fz.origins[fz.reqs[i].origin].host].name,
		    fz.origins[fz.reqs[i].origin].port,
		    fz.origins[fz.reqs[i].origin].passthrough ? " (TLS passthrough)" :
		    fz.origins[fz.reqs[i].origin].tls ? " (TLS)" : "",
		    fz.reqs[i].method, fz.reqs[i].target, fz.reqs[i].body_raw,
		    fz.reqs[i].has_secret ? " SECRET" : "");
	for (i = 0; i < fz.n_origins; i++)
		if (fz.origins[i].raw || fz.origins[i].passthrough)
			fprintf(stderr, "  origin %s:%u (%s) got %zu bytes: %.*s\n",
			    fz_hosts[fz.origins[i].host].name, fz.origins[i].port,
			    fz.origins[i].passthrough ? "passthrough" : "raw",
			    fz.origins[i].in.len, (int)(fz.origins[i].in.len > 300 ?
			    300 : fz.origins[i].in.len), fz.origins[i].in.p ?
			    (const char *)fz.origins[i].in.p : "");
	for (i = 0; i < fz.n_clients; i++)
		fprintf(stderr, "  client %d%s got %zu bytes: %.*s\n", i,
		    fz.clients[i].tls_ok ? " (TLS)" : "", fz.clients[i].in.len,
		    (int)(fz.clients[i].in.len > 300 ? 300 : fz.clients[i].in.len),
		    fz.clients[i].in.p ? (const char *)fz.clients[i].in.p : "");
}

/*
 * Every row about a request of a client that wrote only templates names a
 * request that client wrote (method and path, CONNECT and host), and a row
 * naming the credential belongs to a request that carried its placeholder:
 * no row carries another request's fields.
 */
static void
fz_check_rows(void)
{
	/* fz_policy's allow rules, in order; d.test's is shadowed by deny[0]. */
	static const char *const allow_hosts[] = { "a.test", "b.test",
	    "api.test", "i.test", "d.test", "p.test", "m.test", "t.test",
	    "six.test", "198.18.0.8", "2001:db8::6", "o.test", "198.18.0.9" };
	const int n_allow = (int)(sizeof(allow_hosts) / sizeof(allow_hosts[0]));
	int i, k;

	for (i = 0; i < fz.n_rows; i++) {
		const struct fz_row *r = &fz.rows[i];
		/* A SOCKS5 command's row (BIND, UDP-ASSOCIATE: refused) too. */
		int connect = strcmp(r->method, "CONNECT") == 0 ||
		    strcmp(r->method, "BIND") == 0 ||
		    strcmp(r->method, "UDP-ASSOCIATE") == 0, n;

		if (sscanf(r->rule, "fz:allow[%d]", &n) == 1 && (n < 0 ||
		    n >= n_allow || strcmp(allow_hosts[n], r->host) != 0))
			fz_fail("audit row [%d] for %s names rule %s", i,
			    r->host, r->rule);
		if (strcmp(r->rule, "fz:deny[0]") == 0 &&
		    strcmp(r->host, "d.test") != 0)
			fz_fail("audit row [%d] for %s names rule %s", i,
			    r->host, r->rule);

		/* A SOCKS5 refusal before its destination was read names no host. */
		if (r->client < 0 || r->client >= fz.n_clients ||
		    fz.clients[r->client].raw_used || r->method[0] == '\0' ||
		    (connect && r->host[0] == '\0'))
			continue;
		for (k = 0; k < fz.n_sent; k++) {
			const struct fz_sent *t = &fz.sent[k];
			if (t->client != r->client ||
			    strcmp(t->method, r->method) != 0 ||
			    strcmp(t->path, r->path) != 0)
				continue;
			if (connect && strcmp(t->host, r->host) != 0)
				continue;
			if (r->credential[0] != '\0' && !t->has_ph)
				continue;
			break;
		}
		if (k == fz.n_sent)
			fz_fail("audit row [%d] (%s %s %s %s credential=%s) "
			    "describes no request client %d wrote", i, r->decision,
			    r->host, r->method, r->path, r->credential, r->client);
	}
}

/*
 * An origin connection that carries a client's own bytes (a passthrough
 * tunnel) was opened under one tunnel row that allowed it: for that origin's
 * name or address, port and the address connected to.
 */
static void
fz_check_tunnels(void)
{
	int i, k;

	for (i = 0; i < fz.n_origins; i++) {
		const struct fz_peer *o = &fz.origins[i];

		if (o->host == FZ_O) {
			/*
			 * Opaque: the rule connects at once (the server may
			 * speak first), under o.test's allow rule (by name or by
			 * its cidr): a row names it, whatever the client's first
			 * bytes made of the tunnel afterwards. That nothing meant
			 * for another destination reached it is fz_check_marks'.
			 */
			for (k = 0; k < fz.n_rows; k++) {
				const struct fz_row *r = &fz.rows[k];

				if (r->port == o->port &&
				    (strcmp(r->host, "o.test") == 0 ||
				    strcmp(r->host, o->ip) == 0) &&
				    (strcmp(r->rule, "fz:allow[11]") == 0 ||
				    strcmp(r->rule, "fz:allow[12]") == 0))
					break;
			}
			if (k == fz.n_rows)
				fz_fail("opaque origin %s:%u was connected to "
				    "(%zu bytes reached it) and no row names "
				    "o.test's allow rules", o->ip, o->port,
				    o->in.len);
		}
		if (!o->passthrough)
			continue;
		for (k = 0; k < fz.n_rows; k++) {
			struct fz_row *r = &fz.rows[k];

			if (r->used || strcmp(r->decision, "allow") != 0 ||
			    strcmp(r->method, "CONNECT") != 0 ||
			    r->port != o->port || strcmp(r->ip, o->ip) != 0 ||
			    (strcmp(r->host, fz_hosts[o->host].name) != 0 &&
			    strcmp(r->host, o->ip) != 0))
				continue;
			/* A client's ClientHello without SNI: a tunnel to an address. */
			if (o->no_sni && strcmp(r->host, o->ip) != 0)
				continue;
			r->used = 1;
			break;
		}
		if (k == fz.n_rows)
			fz_fail("origin %s:%u (%s) carried a client's TLS "
			    "(passthrough%s) and no allow row of a tunnel to it "
			    "matches", fz_hosts[o->host].name, o->port, o->ip,
			    o->no_sni ? ", no SNI" : "");
	}
}

/*
 * An opaque payload names the host its client's tunnel was decided for
 * (FZ_OPQ "name;"): it reaches only that host's origins. Raw client bytes
 * could write any mark, so then nothing is checked.
 */
static void
fz_check_marks(void)
{
	const unsigned char *m;
	size_t off, nl;
	int i;

	for (i = 0; i < fz.n_clients; i++)
		if (fz.clients[i].raw_used)
			return;
	for (i = 0; i < fz.n_origins; i++) {
		const struct fz_peer *o = &fz.origins[i];
		const char *want = fz_hosts[o->host].name;

		for (off = 0; off < o->in.len; off = (size_t)(m - o->in.p) + 1) {
			if ((m = memmem(o->in.p + off, o->in.len - off, FZ_OPQ,
			    sizeof(FZ_OPQ) - 1)) == NULL)
				break;
			nl = strlen(want);
			if (m[sizeof(FZ_OPQ) - 1] == '*')
				continue;
			if ((size_t)(o->in.p + o->in.len - m) < sizeof(FZ_OPQ) +
			    nl || memcmp(m + sizeof(FZ_OPQ) - 1, want, nl) != 0 ||
			    m[sizeof(FZ_OPQ) - 1 + nl] != ';')
				fz_fail("origin %s:%u (%s) received an opaque "
				    "payload meant for another destination: %.40s",
				    want, o->port, o->ip, (const char *)m);
		}
	}
}

/*
 * The transparent listener goes only where the client was going: every row
 * of a transparent client names its original destination as the port, and
 * as the address where one is named and not refused; an allowed name is one
 * that resolves
 * to that address -- claiming an allowed name reaches no other address.
 */
static void
fz_check_transparent(void)
{
	int i, k;
	size_t h, a;

	for (i = 0; i < fz.n_rows; i++) {
		const struct fz_row *r = &fz.rows[i];
		const struct fz_peer *c;

		if (r->client < 0 || r->client >= fz.n_clients)
			continue;
		c = &fz.clients[r->client];
		if (c->listener != LISTENER_TRANSPARENT)
			continue;
		/* A refusal may name the address of the name that it refused. */
		if ((r->ip[0] != '\0' && strcmp(r->ip, c->orig_ip) != 0 &&
		    strcmp(r->decision, "deny") != 0) ||
		    (r->port > 0 && r->port != c->orig_port))
			fz_fail("audit row [%d] of transparent client %d names "
			    "%s port %d; it was going to %s port %u", i,
			    r->client, r->ip, r->port, c->orig_ip, c->orig_port);
		if (strcmp(r->decision, "allow") != 0 ||
		    strcmp(r->host, c->orig_ip) == 0)
			continue;
		for (h = 0, k = 0; h < FZ_N_HOSTS && !k; h++)
			if (strcmp(fz_hosts[h].name, r->host) == 0)
				for (a = 0; a < 2 && fz_hosts[h].addr[a]; a++)
					if (strcmp(fz_hosts[h].addr[a],
					    c->orig_ip) == 0)
						k = 1;
		if (!k)
			fz_fail("audit row [%d] allows transparent client %d to "
			    "%s, which does not resolve to its original "
			    "destination %s", i, r->client, r->host, c->orig_ip);
	}
}

/*
 * A SOCKS5 success reply only where fz_policy allows the destination to the
 * identity the client gave: the method reply, the user/pass status (when
 * the gateway chose it), then the request's reply.
 */
static void
fz_check_socks(void)
{
	int i;

	for (i = 0; i < fz.n_clients; i++) {
		const struct fz_peer *c = &fz.clients[i];
		const unsigned char *b = c->in.p;
		size_t len = c->in.len, off;

		if (c->listener != LISTENER_SOCKS5 || !c->socks_sent || len < 2)
			continue;
		if (b[1] == 2) {
			if (len < 4 || b[2] != 1 || b[3] != 0)
				continue;
			off = 4;
		} else if (b[1] == 0)
			off = 2;
		else
			continue;
		if (len - off < 10 || b[off] != 5)
			continue;
		if (b[off + 1] == 0 && !c->socks_may)
			fz_fail("SOCKS5 client %d was told success for %s, which "
			    "fz_policy does not allow to the identity it gave", i,
			    c->socks_dest);
	}
}

/*
 * Request i gets a row of its own (Kuhn's augmenting paths): two requests
 * with the same host, method and path may each fit only one of the rows,
 * so taking the first row that fits can leave a later request without one
 * while a pairing for all exists.
 */
static int
fz_pair(int i, int *req_of_row, char *seen)
{
	const struct fz_req *q = &fz.reqs[i];
	int k;

	for (k = 0; k < fz.n_rows; k++) {
		if (seen[k] || !row_matches(&fz.rows[k], q,
		    &fz.origins[q->origin]))
			continue;
		seen[k] = 1;
		if (req_of_row[k] == -1 || fz_pair(req_of_row[k], req_of_row,
		    seen)) {
			req_of_row[k] = i;
			return 1;
		}
	}
	return 0;
}

static void
fz_check(int secret_ok)
{
	int i, k, req_of_row[FZ_MAX_ROWS];
	char seen[FZ_MAX_ROWS];

	if (getenv("FUZZ_WORKER_TRACE") != NULL)
		fz_trace();

	for (k = 0; k < FZ_MAX_ROWS; k++)
		req_of_row[k] = -1;
	for (i = 0; i < fz.n_reqs; i++) {
		struct fz_req *q = &fz.reqs[i];
		const struct fz_peer *o = &fz.origins[q->origin];

		/*
		 * Only a secret the client did not write itself (in any of
		 * its forms, e.g. base64 inside a passthrough tunnel) is the
		 * gateway's leak: the same rule as the origins' bytes below.
		 */
		if (secret_ok && q->has_secret && (o->host != FZ_BOUND ||
		    !o->tls || o->passthrough))
			fz_fail("origin %s:%u (%s) received the secret in %s %s",
			    fz_hosts[o->host].name, o->port, o->tls ? "TLS" :
			    "plain", q->method, q->target);
		if (o->passthrough)
			continue;	/* the gateway saw no request: fz_check_tunnels */
		unswap(q->target, sizeof(q->target));
		memset(seen, 0, sizeof(seen));
		if (!fz_pair(i, req_of_row, seen))
			fz_fail("origin %s:%u received %s %s (body %zu bytes%s) "
			    "and no unused allow row of that host, method, path "
			    "and body length matches it", fz_hosts[o->host].name,
			    o->port, q->method, q->target, q->body_raw,
			    q->has_secret ? ", with the secret" : "");
	}
	for (k = 0; k < fz.n_rows; k++)
		if (req_of_row[k] != -1)
			fz.rows[k].used = 1;
	fz_check_tunnels();
	fz_check_marks();
	fz_check_transparent();
	fz_check_rows();
	fz_check_socks();
	if (!secret_ok)
		return;
	for (i = 0; i < fz.n_origins; i++) {
		const struct fz_peer *o = &fz.origins[i];
		const char *f;

		if ((o->host != FZ_BOUND || !o->tls) &&
		    (f = fz_secret_in(o->in.p, o->in.len)) != NULL)
			fz_fail("origin %s:%u (%s) received the secret (%s)",
			    fz_hosts[o->host].name, o->port, o->tls ? "TLS" :
			    "plain", f);
	}
	for (i = 0; i < fz.n_clients; i++) {
		const char *f = fz_secret_in(fz.clients[i].in.p,
		    fz.clients[i].in.len);
		if (f == NULL)
			f = fz_secret_in(fz.clients[i].h2_plain.p,
			    fz.clients[i].h2_plain.len);
		if (f != NULL)
			fz_fail("client %d received the secret (%s)", i, f);
	}
}

/* ------------------------------------------------------- set-up, teardown */

/* The secret as the scrubber knows it: every encoding, base64 in each alignment. */
static void
forms_init(void)
{
	static const char *const hexd = "0123456789ABCDEF";
	const char *s = FZ_SECRET;
	size_t L = strlen(s), k, i, o;
	unsigned char in[80], b64[128];
	char *f;

	snprintf(fz.forms[fz.n_forms++], 128, "%s", s);
	f = fz.forms[fz.n_forms++];
	for (i = 0, o = 0; i < L; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (isalnum(ch) || strchr("-._~", ch) != NULL)
			f[o++] = (char)ch;
		else {
			f[o++] = '%';
			f[o++] = hexd[ch >> 4];
			f[o++] = hexd[ch & 15];
		}
	}
	f[o] = '\0';
	f = fz.forms[fz.n_forms++];
	for (i = 0, o = 0; i < L; i++) {
		if (s[i] == '/')
			f[o++] = '\\';
		f[o++] = s[i];
	}
	f[o] = '\0';
	for (k = 0; k < 3; k++) {
		size_t c0, c1;
		int n;

		memset(in, 'A', k);
		memcpy(in + k, s, L);
		n = EVP_EncodeBlock(b64, in, (int)(k + L));
		c0 = (8 * k + 5) / 6;
		c1 = (8 * (k + L)) / 6;	/* one past the last whole character */
		if (n <= 0 || c1 > (size_t)n)
			abort();
		snprintf(fz.forms[fz.n_forms++], 128, "%.*s", (int)(c1 - c0),
		    b64 + c0);
		/* base64url: the same with - and _ */
		f = fz.forms[fz.n_forms++];
		memcpy(f, fz.forms[fz.n_forms - 2], 128);
		for (i = 0; f[i]; i++)
			f[i] = f[i] == '+' ? '-' : f[i] == '/' ? '_' : f[i];
	}
}

static void
write_file(const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fz.dir, name);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF ||
	    fclose(f) != 0) {
		perror(path);
		abort();
	}
}

static const char fz_policy[] =
    "sandboxes:\n"
    "  - id: fz\n"
    "    policy: fz\n"
    "    source: [127.0.0.1/32]\n"
    "    token_sha256: \"" FZ_TOKEN_SHA "\"\n"
    "  - id: fz2\n"			/* SOCKS5 user/pass only: denies all */
    "    policy: default\n"
    "    token_sha256: \"" FZ_TOKEN2_SHA "\"\n"
    "policies:\n"
    "  - name: fz\n"
    "    allow:\n"
    "      - host: a.test\n"
    "        tls: intercept\n"
    "        methods: [GET]\n"
    "      - host: b.test\n"
    "        tls: intercept\n"
    "      - host: api.test\n"
    "        tls: intercept\n"
    "      - host: i.test\n"
    "        tls: intercept\n"
    "        paths: [\"/ok/*\"]\n"
    "      - host: d.test\n"
    "      - host: p.test\n"
    "      - host: m.test\n"
    "      - host: t.test\n"		/* allow[7]: passthrough */
    "      - host: six.test\n"
    "      - cidr: 198.18.0.8/32\n"	/* allow[9] */
    "      - cidr: 2001:db8::6/128\n"
    "      - host: o.test\n"		/* allow[11] */
    "        opaque: true\n"
    "      - cidr: 198.18.0.9/32\n"
    "        opaque: true\n"
    "    deny:\n"
    "      - host: d.test\n"
    "    allow_private: [198.18.0.0/15, 2001:db8::/32]\n"
    "    credentials: [" FZ_CRED "]\n"
    "credentials:\n"
    "  - name: " FZ_CRED "\n"
    "    secret: api-secret\n"
    "    hosts: [api.test]\n"
    "    query: true\n"
    "    placeholder: \"" FZ_PH "\"\n";

/*
 * The harness clients mark their ClientHellos with an extension of their
 * own, which the gateway's never carry: an origin that sees it is the far
 * end of a passthrough tunnel, not of a connection the gateway made.
 */
static int
client_ext_add(SSL *ssl, unsigned int type, unsigned int context,
    const unsigned char **out, size_t *outlen, X509 *x, size_t chainidx,
    int *al, void *arg)
{
	static const unsigned char mark[] = "fz";

	*out = mark;
	*outlen = 2;
	return 1;
}

/*
 * Whatever the ClientHello an origin receives (the gateway's own or a
 * client's passed through), a name in it is that origin's: an SNI that
 * differs from the CONNECT or SOCKS5 name never reaches an origin.
 */
static int
origin_hello_cb(SSL *ssl, int *al, void *arg)
{
	struct fz_peer *o = SSL_get_app_data(ssl);
	const unsigned char *p;
	const char *want;
	size_t len, nl;

	if (o == NULL)
		return SSL_CLIENT_HELLO_SUCCESS;
	want = fz_hosts[o->host].name;
	if (SSL_client_hello_get0_ext(ssl, FZ_EXT_CLIENT, &p, &len) == 1)
		o->passthrough = 1;
	if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p,
	    &len) != 1) {
		o->no_sni = 1;
		return SSL_CLIENT_HELLO_SUCCESS;
	}
	/* server_name_list: length, then type 0 and a length-prefixed name */
	if (len < 5 || p[2] != 0 || (nl = (size_t)(p[3] << 8 | p[4])) >
	    len - 5)
		fz_fail("origin %s:%u received a malformed server_name",
		    want, o->port);
	if (nl > 0 && p[5 + nl - 1] == '.')
		nl--;
	if (nl != strlen(want) || strncasecmp((const char *)p + 5, want,
	    nl) != 0)
		fz_fail("origin %s:%u (%s) received a ClientHello for %.*s%s",
		    want, o->port, o->ip, (int)nl, p + 5, o->passthrough ?
		    " from a client, passed through" : "");
	return SSL_CLIENT_HELLO_SUCCESS;
}

/* An origin's view of that extension (OpenSSL keeps only registered ones). */
static int
origin_ext_parse(SSL *ssl, unsigned int type, unsigned int context,
    const unsigned char *in, size_t inlen, X509 *x, size_t chainidx, int *al,
    void *arg)
{
	struct fz_peer *o = SSL_get_app_data(ssl);

	if (o != NULL)
		o->passthrough = 1;
	return 1;
}

static SSL_CTX *
origin_ctx(const char *name)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	X509 *leaf;
	EVP_PKEY *key;

	if (ctx == NULL || ca_leaf(fz.oca, name, 0, &leaf, &key) == -1 ||
	    SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, key) != 1)
		abort();
	if (SSL_CTX_add_custom_ext(ctx, FZ_EXT_CLIENT, SSL_EXT_CLIENT_HELLO,
	    NULL, NULL, NULL, origin_ext_parse, NULL) != 1)
		abort();
	SSL_CTX_set_client_hello_cb(ctx, origin_hello_cb, NULL);
	X509_free(leaf);
	EVP_PKEY_free(key);
	return ctx;
}

static void
fz_teardown(void)
{
	char cmd[300];
	size_t i;

	if (!fz.ready)
		return;
	proxy_free(fz.p);
	/* proxy_free closed the keeper's socket: its thread ends. */
	pthread_join(fz.keeper_thread, NULL);
	close(fz.keeper_fd);
	keeper_free(fz.keeper);
	for (i = 0; i < FZ_N_HOSTS; i++)
		SSL_CTX_free(fz.octx[i]);
	SSL_CTX_free(fz.cctx);
	ca_free(fz.oca);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fz.dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_worker: cannot remove %s\n", fz.dir);
	fz.ready = 0;
}

static void *
fz_keeper_main(void *arg)
{
	(void)arg;
	(void)keeper_serve(fz.keeper, fz.keeper_fd);
	return NULL;
}

static struct keeper_client *
fz_keeper(const struct config *cfg, const struct policy *pol)
{
	struct keeper_client *kc;
	const char *err = NULL;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1 ||
	    (fz.keeper = keeper_open(cfg, pol, &err)) == NULL) {
		fprintf(stderr, "keeper: %s\n", err ? err : strerror(errno));
		return NULL;
	}
	fz.keeper_fd = sv[1];
	if (pthread_create(&fz.keeper_thread, NULL, fz_keeper_main, NULL) != 0)
		return NULL;
	if ((kc = keeper_client_new(sv[0], &err)) == NULL)
		fprintf(stderr, "keeper client: %s\n", err);
	return kc;
}

static void
fz_init(void)
{
	struct keeper_client *kc;
	struct proxy_parts parts;
	struct config *cfg;
	struct policy *pol;
	struct vault *v;
	struct diag d;
	const char *err = NULL;
	char path[512], path2[512], cfgtext[4096];
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	log_init(LOG_LVL_WARN, "fuzz_worker");
	/* FUZZ_WORKER_DEBUG: the gateway's debug lines too, to follow an input. */
	log_set_level(getenv("FUZZ_WORKER_DEBUG") != NULL ? LOG_LVL_DEBUG :
	    LOG_LVL_WARN);
	forms_init();
	snprintf(fz.dir, sizeof(fz.dir), "%s/fuzz_worker.XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(fz.dir) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/policies", fz.dir);
	mkdir(path, 0700);
	write_file("policies/fz.yaml", fz_policy);
	snprintf(cfgtext, sizeof(cfgtext),
	    "state_dir: %1$s/var\n"
	    "listen:\n  http: null\n  socks5: null\n  dns: null\n"
	    "  transparent: null\n  ingress: null\n  metrics: null\n"
	    "  admin: null\n"
	    "policies: [%1$s/policies]\n"
	    "ca:\n  cert: %1$s/ca.crt\n  key: %1$s/ca.key\n"
	    "vault:\n  db: %1$s/vault.db\n  key_file: %1$s/vault.key\n"
	    "upstream:\n  resolvers: [127.0.0.1:9]\n"
	    "  ca_bundle: %1$s/origin-ca.crt\n"
	    "audit:\n  db: %1$s/audit.db\n"
	    "workers: 1\n", fz.dir);
	write_file("sandgate.yaml", cfgtext);

	/* The origins' CA: the gateway verifies them against it. */
	snprintf(path, sizeof(path), "%s/origin-ca.crt", fz.dir);
	snprintf(path2, sizeof(path2), "%s/origin-ca.key", fz.dir);
	if (ca_init(path, path2, 0, &err) == -1 ||
	    (fz.oca = ca_load(path, path2, &err)) == NULL) {
		fprintf(stderr, "origin CA: %s\n", err);
		abort();
	}
	for (i = 0; i < FZ_N_HOSTS; i++)
		fz.octx[i] = origin_ctx(fz_hosts[i].name);
	if ((fz.cctx = SSL_CTX_new(TLS_client_method())) == NULL)
		abort();
	SSL_CTX_set_verify(fz.cctx, SSL_VERIFY_NONE, NULL);
	if (SSL_CTX_add_custom_ext(fz.cctx, FZ_EXT_CLIENT,
	    SSL_EXT_CLIENT_HELLO, client_ext_add, NULL, NULL, NULL,
	    NULL) != 1)
		abort();

	snprintf(path, sizeof(path), "%s/vault.db", fz.dir);
	snprintf(path2, sizeof(path2), "%s/vault.key", fz.dir);
	if ((v = vault_open(path, path2, 1, &err)) == NULL ||
	    vault_set(v, "api-secret", FZ_SECRET, strlen(FZ_SECRET),
	    VAULT_SET_NEW, &err) == -1) {
		fprintf(stderr, "vault: %s\n", err);
		abort();
	}
	vault_close(v);

	snprintf(path, sizeof(path), "%s/sandgate.yaml", fz.dir);
	diag_init(&d);
	if ((cfg = config_load(path, &d)) == NULL ||
	    (pol = policy_load(cfg, &d)) == NULL) {
		diag_print(&d, stderr);
		abort();
	}
	diag_free(&d);
	if ((kc = fz_keeper(cfg, pol)) == NULL ||
	    daemon_parts_open(cfg, kc, &parts) == -1 ||
	    (fz.p = proxy_new(cfg, pol, &parts)) == NULL)
		abort();
	fz.w = &fz.p->workers[0];
	fz.odst_fd = -1;
	fz.ready = 1;
	atexit(fz_teardown);
}

static void
fz_reset(void)
{
	int i;

	for (i = 0; i < fz.n_clients; i++)
		peer_free(&fz.clients[i]);
	for (i = 0; i < fz.n_origins; i++)
		peer_free(&fz.origins[i]);
	fz.n_clients = fz.n_origins = fz.n_reqs = fz.n_rows = fz.n_sent = 0;
	fz.odst_fd = -1;
	fz.n_answered = fz.n_script = 0;
	fz.rawresp_len = 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size, 0 };
	struct fz_buf sent = { NULL, 0, 0 };
	int i, secret_ok;

	if (!fz.ready)
		fz_init();
	if (size > 4096)
		return 0;
	fz.active = 1;
	client_new(LISTENER_HTTP);
	fz_run_ops(&in);
	fz_run();
	/* Origins close first: a request still open gets its error row. */
	for (i = 0; i < fz.n_origins; i++)
		if (fz.origins[i].fd != -1) {
			if (fz.origins[i].ssl != NULL)
				SSL_free(fz.origins[i].ssl);
			fz.origins[i].ssl = NULL;
			close(fz.origins[i].fd);
			fz.origins[i].fd = -1;
		}
	fz_run();
	for (i = 0; i < fz.n_clients; i++) {
		if (fz.clients[i].ssl != NULL) {
			SSL_free(fz.clients[i].ssl);
			fz.clients[i].ssl = NULL;
		}
		close(fz.clients[i].fd);
		fz.clients[i].fd = -1;
	}
	fz_run();
	if (!TAILQ_EMPTY(&fz.w->exchanges))
		fz_fail("an exchange outlived both of its peers");
	event_base_loop(fz.w->base, EVLOOP_NONBLOCK);
	fz.active = 0;

	/* What the client wrote itself is not a leak of the gateway's. */
	for (i = 0; i < fz.n_clients; i++)
		buf_add(&sent, fz.clients[i].sent.p, fz.clients[i].sent.len);
	buf_add(&sent, fz.rawresp, fz.rawresp_len);
	secret_ok = sent.len == 0 || fz_secret_in(sent.p, sent.len) == NULL;
	buf_free(&sent);
	fz_check(secret_ok);
	fz_reset();
	return 0;
}
