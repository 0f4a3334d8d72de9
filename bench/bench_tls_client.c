/*
 * Load generator for bench/bench_tls.sh: HTTPS GETs through an HTTP proxy's
 * CONNECT (or straight to the origin), either many requests over one
 * keep-alive TLS connection per thread, or one new TLS session per request.
 * Verifies every certificate; prints one line of numbers.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
#define BODY_MAX	(1 << 20)
#define MAX_ERRORS	200	/* give up on a target that keeps failing */

enum mode {
	MODE_KEEPALIVE,		/* requests over one TLS connection per thread */
	MODE_SESSIONS		/* one new TCP + CONNECT + TLS session per request */
};

struct opts {
	const char	*proxy_host;	/* NULL: connect to the target directly */
	const char	*proxy_port;
	char		 target_host[256];
	char		 target_port[8];
	const char	*cafile;
	const char	*path;
	enum mode	 mode;
	int		 threads;
	double		 seconds;
	unsigned long	 max_ops;
	int		 target_is_ip;
};

struct conn {
	int		 fd;
	SSL		*ssl;
	char		 buf[HEAD_MAX];
	size_t		 len;		/* bytes in buf not yet consumed */
};

static struct opts	 o;
static SSL_CTX		*ctx;
static double		 deadline;
static atomic_ulong	 n_ok;
static atomic_ulong	 n_err;
static atomic_ulong	 n_started;
static char		 first_error[256];
static pthread_mutex_t	 err_mtx = PTHREAD_MUTEX_INITIALIZER;

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

static int
tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints, *res;
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
	return fd;
}

/* CONNECT through the proxy; 0 when it answered 2xx. */
static int
proxy_connect(int fd)
{
	char req[600], resp[4096];
	size_t len = 0;
	ssize_t n;
	int rlen;

	rlen = snprintf(req, sizeof(req), "CONNECT %s:%s HTTP/1.1\r\n"
	    "Host: %s:%s\r\n\r\n", o.target_host, o.target_port,
	    o.target_host, o.target_port);
	if (rlen < 0 || (size_t)rlen >= sizeof(req) ||
	    write(fd, req, (size_t)rlen) != rlen)
		return -1;
	/* Byte by byte: nothing past the head may be consumed here. */
	while (len < sizeof(resp) - 1) {
		n = read(fd, resp + len, 1);
		if (n <= 0)
			return -1;
		len++;
		if (len >= 4 && memcmp(resp + len - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	resp[len] = '\0';
	if (strncmp(resp, "HTTP/1.", 7) != 0 || len < 12 || resp[9] != '2')
		return -1;
	return 0;
}

static int
conn_open(struct conn *c)
{
	const char *host = o.proxy_host ? o.proxy_host : o.target_host;
	const char *port = o.proxy_host ? o.proxy_port : o.target_port;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if ((c->fd = tcp_connect(host, port)) == -1) {
		note_error("connect");
		return -1;
	}
	if (o.proxy_host != NULL && proxy_connect(c->fd) == -1) {
		note_error("CONNECT refused");
		goto fail;
	}
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
	SSL_free(c->ssl);
	c->ssl = NULL;
	close(c->fd);
	c->fd = -1;
	return -1;
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
}

/* More bytes into c->buf; -1 on EOF or error. */
static int
conn_fill(struct conn *c)
{
	int n;

	if (c->len >= sizeof(c->buf))
		return -1;
	n = SSL_read(c->ssl, c->buf + c->len, (int)(sizeof(c->buf) - c->len));
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
conn_skip(struct conn *c, unsigned long n)
{
	while (n > 0) {
		size_t k;

		if (c->len == 0 && conn_fill(c) == -1)
			return -1;
		k = c->len < n ? c->len : n;
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
read_chunked(struct conn *c)
{
	char line[128];
	unsigned long size, total = 0;
	char *end;

	for (;;) {
		if (conn_line(c, line, sizeof(line)) < 0)
			return -1;
		size = strtoul(line, &end, 16);
		if (end == line || (total += size) > BODY_MAX)
			return -1;
		if (size == 0)
			break;
		if (conn_skip(c, size) == -1 ||
		    conn_line(c, line, sizeof(line)) != 0)
			return -1;
	}
	/* Trailers up to the empty line. */
	while (conn_line(c, line, sizeof(line)) > 0)
		;
	return 0;
}

/* GET o.path; the status, or -1. The body is read and discarded. */
static int
http_get(struct conn *c, int close_after)
{
	char req[1024], line[HEAD_MAX];
	unsigned long clen = 0;
	int rlen, status, have_len = 0, chunked = 0;
	long n;

	rlen = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%s\r\n"
	    "User-Agent: bench_tls_client\r\n%s\r\n", o.path, o.target_host,
	    o.target_port, close_after ? "Connection: close\r\n" : "");
	if (rlen < 0 || (size_t)rlen >= sizeof(req) ||
	    SSL_write(c->ssl, req, rlen) != rlen)
		return -1;
	if (conn_line(c, line, sizeof(line)) < 12 ||
	    strncmp(line, "HTTP/1.", 7) != 0)
		return -1;
	status = atoi(line + 9);
	while ((n = conn_line(c, line, sizeof(line))) > 0) {
		if (strncasecmp(line, "Content-Length:", 15) == 0) {
			clen = strtoul(line + 15, NULL, 10);
			have_len = 1;
		} else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
		    strstr(line, "chunked") != NULL)
			chunked = 1;
	}
	if (n < 0)
		return -1;
	if (chunked) {
		if (read_chunked(c) == -1)
			return -1;
	} else if (have_len) {
		if (clen > BODY_MAX || conn_skip(c, clen) == -1)
			return -1;
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

static void *
worker(void *arg)
{
	struct conn c;
	int open = 0, status;

	while (take_op()) {
		if (!open) {
			if (conn_open(&c) == -1)
				continue;
			open = 1;
		}
		status = http_get(&c, o.mode == MODE_SESSIONS);
		if (status == 200)
			atomic_fetch_add(&n_ok, 1);
		else {
			char what[64];
			snprintf(what, sizeof(what), status < 0 ?
			    "response read failed" : "status %d", status);
			note_error(what);
		}
		if (o.mode == MODE_SESSIONS || status != 200) {
			conn_close(&c);
			open = 0;
		}
	}
	if (open)
		conn_close(&c);
	return NULL;
}

static void
usage(FILE *f)
{
	fputs("usage: bench_tls_client [-x PROXYHOST:PORT] -t HOST:PORT -C CAFILE\n"
	    "           [-m keepalive|sessions] [-c THREADS] [-d SECONDS] [-n MAX]\n"
	    "           [-p PATH]\n"
	    "  HTTPS GETs to HOST:PORT (an IP literal or a name; no DNS lookup:\n"
	    "  without -x it must be an IP), through the proxy's CONNECT when -x\n"
	    "  is given, verifying certificates against CAFILE. keepalive: one\n"
	    "  connection per thread, requests/s; sessions: a new TLS session\n"
	    "  per request, sessions/s. Run by bench/bench_tls.sh.\n", f);
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

int
main(int argc, char *argv[])
{
	static char phost[256], pport[8];
	pthread_t tids[MAX_THREADS];
	struct in6_addr a6;
	double started, elapsed;
	int ch, i;

	if (argc == 1) {
		/* `make bench` runs every bench_* binary without arguments. */
		usage(stdout);
		return 0;
	}
	o.mode = MODE_KEEPALIVE;
	o.threads = 4;
	o.seconds = 5;
	o.path = "/";
	while ((ch = getopt(argc, argv, "x:t:C:m:c:d:n:p:h")) != -1) {
		switch (ch) {
		case 'x':
			if (split_hostport(optarg, phost, sizeof(phost), pport,
			    sizeof(pport)) == -1) {
				usage(stderr);
				return 2;
			}
			o.proxy_host = phost;
			o.proxy_port = pport;
			break;
		case 't':
			if (split_hostport(optarg, o.target_host,
			    sizeof(o.target_host), o.target_port,
			    sizeof(o.target_port)) == -1) {
				usage(stderr);
				return 2;
			}
			break;
		case 'C':
			o.cafile = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "keepalive") == 0)
				o.mode = MODE_KEEPALIVE;
			else if (strcmp(optarg, "sessions") == 0)
				o.mode = MODE_SESSIONS;
			else {
				usage(stderr);
				return 2;
			}
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
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (o.target_host[0] == '\0' || o.cafile == NULL || o.threads < 1 ||
	    o.threads > MAX_THREADS || o.seconds <= 0 || o.seconds > 600) {
		usage(stderr);
		return 2;
	}
	o.target_is_ip = inet_pton(AF_INET, o.target_host, &a6) == 1 ||
	    inet_pton(AF_INET6, o.target_host, &a6) == 1;
	signal(SIGPIPE, SIG_IGN);

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_load_verify_locations(ctx, o.cafile, NULL) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* Every session a full handshake: no resumption toward the proxy. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);

	started = now_s();
	deadline = started + o.seconds;
	for (i = 0; i < o.threads; i++)
		if (pthread_create(&tids[i], NULL, worker, NULL) != 0) {
			fprintf(stderr, "bench_tls_client: pthread_create: %s\n",
			    strerror(errno));
			return 1;
		}
	for (i = 0; i < o.threads; i++)
		pthread_join(tids[i], NULL);
	elapsed = now_s() - started;

	printf("mode=%s threads=%d seconds=%.2f ok=%lu errors=%lu rate=%.1f\n",
	    o.mode == MODE_KEEPALIVE ? "keepalive" : "sessions", o.threads,
	    elapsed, atomic_load(&n_ok), atomic_load(&n_err),
	    atomic_load(&n_ok) / elapsed);
	if (first_error[0])
		fprintf(stderr, "bench_tls_client: first error: %s\n", first_error);
	SSL_CTX_free(ctx);
	return atomic_load(&n_ok) > 0 ? 0 : 1;
}
