/*
 * Load generator for bench/run.sh: HTTP/1.1 GETs over TCP or TLS, straight
 * to the origin, through an HTTP proxy (absolute form for http://, CONNECT
 * for https://) or through SOCKS5. Verifies every certificate; prints one
 * line of numbers: requests/s, latency percentiles, bytes/s.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define MAX_THREADS	64
#define HEAD_MAX	16384
#define MAX_ERRORS	200	/* give up on a target that keeps failing */
#define IO_TIMEOUT_S	30	/* a stuck proxy is an error, not a hang */

enum mode {
	MODE_KEEPALIVE,		/* requests over one connection per thread */
	MODE_SESSIONS,		/* a new connection (and TLS session) each */
	MODE_IDLE		/* open N connections, one request each, hold */
};

struct opts {
	const char	*proxy_host;	/* NULL: connect to the target directly */
	const char	*proxy_port;
	int		 socks;		/* the proxy speaks SOCKS5, not HTTP */
	char		 target_host[256];
	char		 target_port[8];
	char		 authority[270];	/* host:port as written in HTTP */
	const char	*cafile;	/* NULL: plain HTTP */
	const char	*path;
	enum mode	 mode;
	int		 threads;
	double		 seconds;
	unsigned long	 max_ops;
	int		 target_is_ip;
	const char	*upload;	/* -u FILE: POST its bytes; NULL: GET */
	char		*body;		/* its contents */
	size_t		 body_len;
};

struct conn {
	int		 fd;
	SSL		*ssl;
	char		 buf[HEAD_MAX];
	size_t		 len;		/* bytes in buf not yet consumed */
};

/* What one thread saw; merged after the run. */
struct tstats {
	uint32_t	*lat;		/* per request, in units of 100 ns */
	size_t		 nlat, cap;
	uint64_t	 bytes;		/* body bytes received (and sent, -u) */
	unsigned long	 conns;		/* connections opened */
	unsigned long	 retries;	/* requests sent again on a new one */
};

static struct opts	 o;
static SSL_CTX		*ctx;
static double		 deadline;
static atomic_ulong	 n_ok;
static atomic_ulong	 n_err;
static atomic_ulong	 n_started;
static char		 first_error[256];
static pthread_mutex_t	 err_mtx = PTHREAD_MUTEX_INITIALIZER;

/* MODE_IDLE: the connections held open until SIGTERM. */
static struct conn	**held;
static atomic_ulong	 n_held;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
note_error(const char *what)
{
	unsigned long e = ERR_peek_last_error();
	char ebuf[160] = "";

	if (e != 0)
		ERR_error_string_n(e, ebuf, sizeof(ebuf));
	ERR_clear_error();
	atomic_fetch_add(&n_err, 1);
	pthread_mutex_lock(&err_mtx);
	if (first_error[0] == '\0')
		snprintf(first_error, sizeof(first_error), "%s%s%s", what,
		    ebuf[0] ? ": " : "", ebuf);
	pthread_mutex_unlock(&err_mtx);
}

static void
stats_add_latency(struct tstats *st, double seconds)
{
	uint32_t *v;
	double units = seconds * 1e7;

	if (st->nlat == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 65536;

		if ((v = realloc(st->lat, cap * sizeof(*v))) == NULL)
			return;		/* percentiles from what fits */
		st->lat = v;
		st->cap = cap;
	}
	st->lat[st->nlat++] = units > UINT32_MAX ? UINT32_MAX : (uint32_t)units;
}

static int
tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints, *res;
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	int fd, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1 || connect(fd, res->ai_addr, res->ai_addrlen) == -1) {
		if (fd != -1)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

static int
write_full(int fd, const void *p, size_t n)
{
	const char *b = p;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, b, n)) <= 0) {
			if (w == -1 && errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
read_full(int fd, void *p, size_t n)
{
	char *b = p;
	ssize_t r;

	while (n > 0) {
		if ((r = read(fd, b, n)) <= 0) {
			if (r == -1 && errno == EINTR)
				continue;
			return -1;
		}
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/*
 * CONNECT through the proxy; 0 when it answered 2xx. The origin speaks TLS
 * and so says nothing before our ClientHello: any byte past the proxy's
 * head is a protocol error, and reading in chunks is safe.
 */
static int
proxy_connect(int fd)
{
	char req[600], resp[4096];
	size_t len = 0;
	ssize_t n;
	int rlen;
	char *end;

	rlen = snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\n"
	    "Host: %s\r\n\r\n", o.authority, o.authority);
	if (rlen < 0 || (size_t)rlen >= sizeof(req) ||
	    write_full(fd, req, (size_t)rlen) == -1)
		return -1;
	for (;;) {
		if (len >= sizeof(resp) - 1)
			return -1;
		if ((n = read(fd, resp + len, sizeof(resp) - 1 - len)) <= 0)
			return -1;
		len += (size_t)n;
		resp[len] = '\0';
		if ((end = strstr(resp, "\r\n\r\n")) != NULL)
			break;
	}
	if ((size_t)(end + 4 - resp) != len)
		return -1;
	if (strncmp(resp, "HTTP/1.", 7) != 0 || len < 12 || resp[9] != '2')
		return -1;
	return 0;
}

/* SOCKS5 (RFC 1928), no authentication: 0 when the proxy connected us. */
static int
socks_connect(int fd)
{
	unsigned char req[300], rep[4 + 255 + 2];
	struct in_addr a4;
	struct in6_addr a6;
	size_t n = 0, hl = strlen(o.target_host), skip;
	unsigned port = (unsigned)atoi(o.target_port);

	if (write_full(fd, "\x05\x01\x00", 3) == -1 || read_full(fd, rep, 2) == -1 ||
	    rep[0] != 5 || rep[1] != 0)
		return -1;
	req[n++] = 5;
	req[n++] = 1;		/* CONNECT */
	req[n++] = 0;
	if (inet_pton(AF_INET, o.target_host, &a4) == 1) {
		req[n++] = 1;
		memcpy(req + n, &a4, 4);
		n += 4;
	} else if (inet_pton(AF_INET6, o.target_host, &a6) == 1) {
		req[n++] = 4;
		memcpy(req + n, &a6, 16);
		n += 16;
	} else {
		if (hl > 255)
			return -1;
		req[n++] = 3;
		req[n++] = (unsigned char)hl;
		memcpy(req + n, o.target_host, hl);
		n += hl;
	}
	req[n++] = (unsigned char)(port >> 8);
	req[n++] = (unsigned char)port;
	if (write_full(fd, req, n) == -1 || read_full(fd, rep, 4) == -1 ||
	    rep[0] != 5 || rep[1] != 0)
		return -1;
	switch (rep[3]) {
	case 1:
		skip = 4;
		break;
	case 4:
		skip = 16;
		break;
	case 3:
		if (read_full(fd, rep + 4, 1) == -1)
			return -1;
		skip = rep[4];
		break;
	default:
		return -1;
	}
	return read_full(fd, rep, skip + 2);
}

static void
conn_close(struct conn *c)
{
	if (c->ssl != NULL) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->fd != -1)
		close(c->fd);
	c->ssl = NULL;
	c->fd = -1;
	c->len = 0;
}

static int
conn_open(struct conn *c, struct tstats *st)
{
	const char *host = o.proxy_host ? o.proxy_host : o.target_host;
	const char *port = o.proxy_host ? o.proxy_port : o.target_port;

	c->fd = -1;
	c->ssl = NULL;
	c->len = 0;
	if ((c->fd = tcp_connect(host, port)) == -1) {
		note_error("connect");
		return -1;
	}
	st->conns++;
	if (o.proxy_host != NULL && o.socks && socks_connect(c->fd) == -1) {
		note_error("SOCKS5 refused");
		goto fail;
	}
	/* Plain HTTP through an HTTP proxy is absolute form: no CONNECT. */
	if (o.proxy_host != NULL && !o.socks && o.cafile != NULL &&
	    proxy_connect(c->fd) == -1) {
		note_error("CONNECT refused");
		goto fail;
	}
	if (o.cafile == NULL)
		return 0;
	if ((c->ssl = SSL_new(ctx)) == NULL)
		goto fail;
	if (o.target_is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
		    o.target_host) != 1)
			goto fail;
	} else if (SSL_set_tlsext_host_name(c->ssl, o.target_host) != 1 ||
	    SSL_set1_host(c->ssl, o.target_host) != 1)
		goto fail;
	SSL_set_fd(c->ssl, c->fd);
	if (SSL_connect(c->ssl) != 1) {
		note_error("TLS handshake");
		goto fail;
	}
	return 0;
fail:
	conn_close(c);
	return -1;
}

static int
conn_write(struct conn *c, const char *p, size_t n)
{
	if (c->ssl == NULL)
		return write_full(c->fd, p, n);
	return SSL_write(c->ssl, p, (int)n) == (int)n ? 0 : -1;
}

/* More bytes into c->buf; -1 on EOF or error. */
static int
conn_fill(struct conn *c)
{
	ssize_t n;

	if (c->len >= sizeof(c->buf))
		return -1;
	if (c->ssl != NULL)
		n = SSL_read(c->ssl, c->buf + c->len, (int)(sizeof(c->buf) - c->len));
	else
		do
			n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		while (n == -1 && errno == EINTR);
	if (n <= 0)
		return -1;
	c->len += (size_t)n;
	return 0;
}

static void
conn_consume(struct conn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* Discard exactly n body bytes. */
static int
conn_skip(struct conn *c, uint64_t n)
{
	while (n > 0) {
		size_t k;

		if (c->len == 0 && conn_fill(c) == -1)
			return -1;
		k = c->len < n ? c->len : (size_t)n;
		conn_consume(c, k);
		n -= k;
	}
	return 0;
}

/* One line ending in CRLF, consumed; its length without CRLF, or -1. */
static long
conn_line(struct conn *c, char *out, size_t outlen)
{
	char *eol;
	size_t n;

	while ((eol = memmem(c->buf, c->len, "\r\n", 2)) == NULL)
		if (conn_fill(c) == -1)
			return -1;
	n = (size_t)(eol - c->buf);
	if (n >= outlen)
		return -1;
	memcpy(out, c->buf, n);
	out[n] = '\0';
	conn_consume(c, n + 2);
	return (long)n;
}

static int
read_chunked(struct conn *c, uint64_t *bytes)
{
	char line[128];
	unsigned long long size;
	char *end;

	for (;;) {
		if (conn_line(c, line, sizeof(line)) < 0)
			return -1;
		size = strtoull(line, &end, 16);
		if (end == line)
			return -1;
		if (size == 0)
			break;
		if (conn_skip(c, size) == -1 ||
		    conn_line(c, line, sizeof(line)) != 0)
			return -1;
		*bytes += size;
	}
	/* Trailers up to the empty line. */
	while (conn_line(c, line, sizeof(line)) > 0)
		;
	return 0;
}

/*
 * GET o.path; the status, -1 on error, or -2 when the connection was found
 * closed before any byte of an answer (a server may close a kept-alive
 * connection at any time; tinyproxy does after every answer, without saying
 * so). The body is read and discarded, its size added to *bytes.
 * *must_close says the server will not take another request on this
 * connection (Connection: close, or HTTP/1.0 without keep-alive).
 */
static int
http_get(struct conn *c, int close_after, uint64_t *bytes, int *must_close)
{
	char req[1024], line[HEAD_MAX];
	unsigned long long clen = 0;
	int rlen, status, have_len = 0, chunked = 0, http10, keep = 0;
	long n;

	char clenh[64] = "";

	if (o.body != NULL)
		snprintf(clenh, sizeof(clenh), "Content-Length: %zu\r\n",
		    o.body_len);
	/* Absolute form when a plain request goes to an HTTP proxy. */
	rlen = snprintf(req, sizeof(req), "%s %s%s%s HTTP/1.1\r\nHost: %s\r\n"
	    "User-Agent: bench_client\r\n%s%s\r\n",
	    o.body != NULL ? "POST" : "GET",
	    o.proxy_host && !o.socks && !o.cafile ? "http://" : "",
	    o.proxy_host && !o.socks && !o.cafile ? o.authority : "", o.path,
	    o.authority, clenh, close_after ? "Connection: close\r\n" : "");
	if (rlen < 0 || (size_t)rlen >= sizeof(req) ||
	    conn_write(c, req, (size_t)rlen) == -1)
		return -1;
	if (o.body != NULL) {
		size_t off, take;

		for (off = 0; off < o.body_len; off += take) {
			take = o.body_len - off < 65536 ? o.body_len - off : 65536;
			if (conn_write(c, o.body + off, take) == -1)
				return -1;
		}
		*bytes += o.body_len;
	}
	if (c->len == 0 && conn_fill(c) == -1)
		return -2;
	if (conn_line(c, line, sizeof(line)) < 12 ||
	    strncmp(line, "HTTP/1.", 7) != 0)
		return -1;
	http10 = line[7] == '0';
	status = atoi(line + 9);
	while ((n = conn_line(c, line, sizeof(line))) > 0) {
		if (strncasecmp(line, "Content-Length:", 15) == 0) {
			clen = strtoull(line + 15, NULL, 10);
			have_len = 1;
		} else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
		    strstr(line, "chunked") != NULL)
			chunked = 1;
		else if (strncasecmp(line, "Connection:", 11) == 0) {
			if (strcasestr(line + 11, "close") != NULL)
				*must_close = 1;
			if (strcasestr(line + 11, "keep-alive") != NULL)
				keep = 1;
		}
	}
	if (n < 0)
		return -1;
	if (http10 && !keep)
		*must_close = 1;
	if (chunked) {
		if (read_chunked(c, bytes) == -1)
			return -1;
	} else if (have_len) {
		if (conn_skip(c, clen) == -1)
			return -1;
		*bytes += clen;
	} else
		return -1;	/* the origin always frames its answers */
	return status;
}

static int
take_op(void)
{
	if (now_s() >= deadline || atomic_load(&n_err) >= MAX_ERRORS)
		return 0;
	if (o.max_ops && atomic_fetch_add(&n_started, 1) >= o.max_ops)
		return 0;
	return 1;
}

static void
count_status(int status)
{
	char what[64];

	if (status == 200) {
		atomic_fetch_add(&n_ok, 1);
		return;
	}
	snprintf(what, sizeof(what), status < 0 ? "response read failed" :
	    "status %d", status);
	note_error(what);
}

/* MODE_IDLE: open a connection, one request on it, keep it. */
static void
idle_one(struct tstats *st)
{
	struct conn *c;
	int status, must_close = 0;

	if ((c = malloc(sizeof(*c))) == NULL) {
		note_error("malloc");
		return;
	}
	if (conn_open(c, st) == -1) {
		free(c);
		return;
	}
	status = http_get(c, 0, &st->bytes, &must_close);
	count_status(status);
	if (status != 200 || must_close) {
		if (status == 200)
			note_error("connection not kept alive");
		conn_close(c);
		free(c);
		return;
	}
	held[atomic_fetch_add(&n_held, 1)] = c;
}

static void *
worker(void *arg)
{
	struct tstats *st = arg;
	struct conn c;
	double t0;
	int open = 0, reused = 0, status, must_close;

	while (take_op()) {
		if (o.mode == MODE_IDLE) {
			idle_one(st);
			continue;
		}
		t0 = now_s();
again:
		if (!open) {
			if (conn_open(&c, st) == -1)
				continue;
			open = 1;
			reused = 0;
			/*
			 * keepalive: the first connection's set-up is not a
			 * request's time (a proxy that closes after every
			 * answer pays its reconnections in latency too);
			 * sessions: the handshake is the point.
			 */
			if (o.mode == MODE_KEEPALIVE && st->conns == 1)
				t0 = now_s();
		}
		must_close = 0;
		status = http_get(&c, o.mode == MODE_SESSIONS, &st->bytes,
		    &must_close);
		if (status == -2 && reused) {
			/* As browsers do: the same request on a new connection. */
			st->retries++;
			conn_close(&c);
			open = 0;
			goto again;
		}
		reused = 1;
		if (status == 200)
			stats_add_latency(st, now_s() - t0);
		count_status(status);
		if (o.mode == MODE_SESSIONS || status != 200 || must_close) {
			conn_close(&c);
			open = 0;
		}
	}
	if (open)
		conn_close(&c);
	return NULL;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Merge the threads' numbers and print the one result line. */
static void
report(struct tstats *st, int n, double elapsed)
{
	uint32_t *all;
	size_t total = 0, k = 0;
	uint64_t bytes = 0;
	unsigned long conns = 0, retries = 0;
	double p50 = 0, p99 = 0;
	int i;

	for (i = 0; i < n; i++) {
		total += st[i].nlat;
		bytes += st[i].bytes;
		conns += st[i].conns;
		retries += st[i].retries;
	}
	if (total > 0 && (all = malloc(total * sizeof(*all))) != NULL) {
		for (i = 0; i < n; i++) {
			memcpy(all + k, st[i].lat, st[i].nlat * sizeof(*all));
			k += st[i].nlat;
		}
		qsort(all, total, sizeof(*all), cmp_u32);
		p50 = all[total / 2] / 10.0;
		p99 = all[total * 99 / 100 < total ? total * 99 / 100 :
		    total - 1] / 10.0;
		free(all);
	}
	printf("mode=%s threads=%d seconds=%.3f ok=%lu errors=%lu rate=%.1f "
	    "conns=%lu retries=%lu bytes=%llu mbps=%.2f p50_us=%.1f "
	    "p99_us=%.1f\n",
	    o.mode == MODE_KEEPALIVE ? "keepalive" :
	    o.mode == MODE_SESSIONS ? "sessions" : "idle", n, elapsed,
	    atomic_load(&n_ok), atomic_load(&n_err),
	    atomic_load(&n_ok) / elapsed, conns, retries,
	    (unsigned long long)bytes,
	    bytes / elapsed / 1e6, p50, p99);
	fflush(stdout);
}

/* MODE_IDLE: say how many are open, hold them until SIGTERM or SIGINT. */
static void
hold_until_signal(void)
{
	sigset_t set;
	unsigned long i;
	int sig;

	printf("ready held=%lu\n", atomic_load(&n_held));
	fflush(stdout);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigwait(&set, &sig);
	for (i = 0; i < atomic_load(&n_held); i++) {
		conn_close(held[i]);
		free(held[i]);
	}
	free(held);
}

static void
usage(FILE *f)
{
	fputs("usage: bench_client [-x PROXYHOST:PORT | -s SOCKSHOST:PORT]\n"
	    "           -t HOST:PORT [-C CAFILE] [-m keepalive|sessions|idle]\n"
	    "           [-c THREADS] [-d SECONDS] [-n MAX] [-p PATH] [-u FILE]\n"
	    "  GETs of PATH on HOST:PORT (IP literals; no DNS lookup by the\n"
	    "  client), or with -u POSTs of FILE's bytes (counted as sent\n"
	    "  bytes in bytes= and mbps=, beside what comes back) --\n"
	    "  client), https:// verified against CAFILE when -C is given,\n"
	    "  http:// otherwise. Through an HTTP proxy (-x), https:// goes in\n"
	    "  a CONNECT tunnel and http:// in absolute form; -s is SOCKS5.\n"
	    "  keepalive: one connection per thread, requests/s; sessions: a\n"
	    "  new connection (and TLS session) per request; idle: open MAX\n"
	    "  connections, one request each, print 'ready held=N', keep them\n"
	    "  until SIGTERM. One line of numbers on stdout (rate, bytes/s,\n"
	    "  p50/p99 latency). Run by bench/run.sh.\n", f);
}

static int
split_hostport(const char *s, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(s, ':');
	size_t n;

	if (colon == NULL || colon == s || colon[1] == '\0')
		return -1;
	n = (size_t)(colon - s);
	if (s[0] == '[' && colon[-1] == ']') {
		s++;
		n -= 2;
	}
	if (n >= hlen || strlen(colon + 1) >= plen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

static int
parse_args(int argc, char *argv[])
{
	static char phost[256], pport[8];
	int ch;

	o.mode = MODE_KEEPALIVE;
	o.threads = 4;
	o.seconds = 5;
	o.path = "/";
	while ((ch = getopt(argc, argv, "x:s:t:C:m:c:d:n:p:u:h")) != -1) {
		switch (ch) {
		case 'x':
		case 's':
			if (split_hostport(optarg, phost, sizeof(phost), pport,
			    sizeof(pport)) == -1)
				return -1;
			o.proxy_host = phost;
			o.proxy_port = pport;
			o.socks = ch == 's';
			break;
		case 't':
			if (split_hostport(optarg, o.target_host,
			    sizeof(o.target_host), o.target_port,
			    sizeof(o.target_port)) == -1)
				return -1;
			break;
		case 'C':
			o.cafile = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "keepalive") == 0)
				o.mode = MODE_KEEPALIVE;
			else if (strcmp(optarg, "sessions") == 0)
				o.mode = MODE_SESSIONS;
			else if (strcmp(optarg, "idle") == 0)
				o.mode = MODE_IDLE;
			else
				return -1;
			break;
		case 'c':
			o.threads = atoi(optarg);
			break;
		case 'd':
			o.seconds = atof(optarg);
			break;
		case 'n':
			o.max_ops = strtoul(optarg, NULL, 10);
			break;
		case 'p':
			o.path = optarg;
			break;
		case 'u':
			o.upload = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (o.target_host[0] == '\0' || o.threads < 1 ||
	    o.threads > MAX_THREADS || o.seconds <= 0 || o.seconds > 3600 ||
	    (o.mode == MODE_IDLE && (o.max_ops == 0 || o.max_ops > 1000000)))
		return -1;
	snprintf(o.authority, sizeof(o.authority),
	    strchr(o.target_host, ':') ? "[%s]:%s" : "%s:%s", o.target_host,
	    o.target_port);
	return 0;
}

static int
tls_init(void)
{
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_load_verify_locations(ctx, o.cafile, NULL) != 1) {
		ERR_print_errors_fp(stderr);
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* Every session a full handshake: no resumption toward the proxy. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
	/* Thousands of idle connections: no buffers while they idle. */
	if (o.mode == MODE_IDLE)
		SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	return 0;
}

/* -u FILE: its bytes, sent whole with every request. */
static int
load_body(void)
{
	FILE *f;
	long n;

	if ((f = fopen(o.upload, "rb")) == NULL || fseek(f, 0, SEEK_END) != 0 ||
	    (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    (o.body = malloc((size_t)n)) == NULL ||
	    fread(o.body, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "bench_client: %s: cannot read it\n", o.upload);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	fclose(f);
	o.body_len = (size_t)n;
	return 0;
}

int
main(int argc, char *argv[])
{
	pthread_t tids[MAX_THREADS];
	struct tstats st[MAX_THREADS];
	struct in6_addr a6;
	sigset_t set;
	double started, elapsed;
	int i;

	if (parse_args(argc, argv) == -1) {
		usage(stderr);
		return 2;
	}
	o.target_is_ip = inet_pton(AF_INET, o.target_host, &a6) == 1 ||
	    inet_pton(AF_INET6, o.target_host, &a6) == 1;
	signal(SIGPIPE, SIG_IGN);
	/* Threads inherit the mask; MODE_IDLE takes the signal by sigwait. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (o.mode == MODE_IDLE) {
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		if ((held = calloc(o.max_ops, sizeof(*held))) == NULL)
			return 1;
	}
	if (o.cafile != NULL && tls_init() == -1)
		return 1;
	if (o.upload != NULL && load_body() == -1)
		return 1;

	memset(st, 0, sizeof(st));
	started = now_s();
	deadline = started + o.seconds;
	for (i = 0; i < o.threads; i++)
		if (pthread_create(&tids[i], NULL, worker, &st[i]) != 0) {
			fprintf(stderr, "bench_client: pthread_create: %s\n",
			    strerror(errno));
			return 1;
		}
	for (i = 0; i < o.threads; i++)
		pthread_join(tids[i], NULL);
	elapsed = now_s() - started;

	report(st, o.threads, elapsed);
	if (first_error[0])
		fprintf(stderr, "bench_client: first error: %s\n", first_error);
	if (o.mode == MODE_IDLE)
		hold_until_signal();
	for (i = 0; i < o.threads; i++)
		free(st[i].lat);
	SSL_CTX_free(ctx);
	return atomic_load(&n_ok) > 0 ? 0 : 1;
}
