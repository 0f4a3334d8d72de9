/*
 * The notifier of mode: ask's questions (approval_notify.h): each question
 * the network process sends on the socket is handed to approval.notify --
 * a command exec'd with its argv (no shell), the question as JSON on its
 * standard input, or an http:// or https:// webhook it is POSTed to. One at a time,
 * each bounded to 10 s; a failure is logged and the next one goes on.
 */
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <jansson.h>

#include "core/config.h"
#include "core/log.h"
#include "daemon/approval_notify.h"

#define NOTIFY_MAX	65536
#define NOTIFY_WAIT_S	10

static void
on_alarm(int sig)
{
	(void)sig;	/* only to interrupt a blocking call (EINTR) */
}

/*
 * One question's whole time, NOTIFY_WAIT_S: SIGALRM (no SA_RESTART) makes
 * the call blocked then fail, a TLS handshake or read that trickles
 * included (per-call socket timeouts let one go on for minutes).
 */
static void
deadline_arm(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGALRM, &sa, NULL);
	alarm(NOTIFY_WAIT_S);
}

/*
 * The command, its stdin the question; killed after NOTIFY_WAIT_S with
 * what it started (its own process group).
 */
static void
run_command(char *const argv[], const char *msg, size_t len)
{
	int in[2], status;
	pid_t pid;
	time_t end;
	ssize_t w;
	size_t off = 0;

	if (pipe(in) == -1) {
		log_warn("approval.notify: pipe");
		return;
	}
	if ((pid = fork()) == -1) {
		log_warn("approval.notify: fork");
		close(in[0]);
		close(in[1]);
		return;
	}
	if (pid == 0) {
		(void)setpgid(0, 0);
		signal(SIGALRM, SIG_DFL);
		alarm(0);
		dup2(in[0], 0);
		close(in[0]);
		close(in[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	(void)setpgid(pid, pid);	/* either side may set it first */
	close(in[0]);
	signal(SIGPIPE, SIG_IGN);
	while (off < len && (w = write(in[1], msg + off, len - off)) > 0)
		off += (size_t)w;
	close(in[1]);
	end = time(NULL) + NOTIFY_WAIT_S;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (time(NULL) >= end) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			log_warnx("approval.notify: %s took over %d s: killed",
			    argv[0], NOTIFY_WAIT_S);
			return;
		}
		usleep(20000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		log_warnx("approval.notify: %s failed (status %d)", argv[0],
		    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* fd's TLS client side toward host, verified as origins are; NULL on failure. */
static SSL *
tls_open(int fd, const char *host, const char *ca_bundle, SSL_CTX **ctxp)
{
	SSL_CTX *ctx;
	SSL *ssl = NULL;

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((ca_bundle != NULL ? SSL_CTX_load_verify_locations(ctx, ca_bundle,
	    NULL) : SSL_CTX_set_default_verify_paths(ctx)) != 1 ||
	    (ssl = SSL_new(ctx)) == NULL || SSL_set_fd(ssl, fd) != 1 ||
	    SSL_set_tlsext_host_name(ssl, host) != 1 ||
	    SSL_set1_host(ssl, host) != 1 || SSL_connect(ssl) != 1) {
		log_warnx("approval.notify: TLS with %s failed (certificate "
		    "verify: %s)", host, ssl != NULL ?
		    X509_verify_cert_error_string(SSL_get_verify_result(ssl)) :
		    "-");
		SSL_free(ssl);
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	*ctxp = ctx;
	return ssl;
}

static int
io_write(int fd, SSL *ssl, const void *p, size_t n)
{
	if (ssl != NULL)
		return n == 0 || SSL_write(ssl, p, (int)n) == (int)n ? 0 : -1;
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/*
 * POST to http[s]://host[:port]/path; 0 on a 2xx answer. https is verified
 * against upstream.ca_bundle (the system's roots without it) with the
 * host name, as origins are.
 */
static int
post(const char *url, const char *msg, size_t len, const char *ca_bundle)
{
	char host[256], port[8] = "80", head[1024], buf[512];
	int tls = strncmp(url, "https://", 8) == 0;
	const char *h = url + (tls ? 8 : 7), *slash, *colon, *path;
	struct addrinfo hints, *res = NULL, *ai;
	struct timeval tv = { NOTIFY_WAIT_S, 0 };
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	ssize_t n;
	int fd = -1, rc = -1;

	if (tls)
		snprintf(port, sizeof(port), "443");
	slash = strchr(h, '/');
	path = slash != NULL ? slash : "/";
	if (slash == NULL)
		slash = h + strlen(h);
	colon = memchr(h, ':', (size_t)(slash - h));
	if ((size_t)((colon != NULL ? colon : slash) - h) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%.*s", (int)((colon != NULL ? colon :
	    slash) - h), h);
	if (colon != NULL)
		snprintf(port, sizeof(port), "%.*s", (int)(slash - colon - 1),
		    colon + 1);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL && fd == -1; ai = ai->ai_next) {
		if ((fd = socket(ai->ai_family, ai->ai_socktype, 0)) == -1)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd == -1)
		return -1;
	if (tls && (ssl = tls_open(fd, host, ca_bundle, &ctx)) == NULL) {
		close(fd);
		return -1;
	}
	n = snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "User-Agent: sandgate\r\nConnection: close\r\n\r\n", path, host,
	    len);
	if (n > 0 && (size_t)n < sizeof(head) &&
	    io_write(fd, ssl, head, (size_t)n) == 0 &&
	    io_write(fd, ssl, msg, len) == 0 &&
	    (n = ssl != NULL ? SSL_read(ssl, buf, sizeof(buf) - 1) :
	    recv(fd, buf, sizeof(buf) - 1, 0)) > 12) {
		buf[n] = '\0';
		if (strncmp(buf, "HTTP/1.", 7) == 0 && buf[9] == '2')
			rc = 0;
	}
	if (ssl != NULL) {
		(void)SSL_shutdown(ssl);
		SSL_free(ssl);
		SSL_CTX_free(ctx);
	}
	close(fd);
	return rc;
}

/* The "id" of a question's JSON (0 when it has none). */
static long long
question_id(const char *msg, size_t len)
{
	json_t *j = json_loadb(msg, len, 0, NULL);
	long long id = (long long)json_integer_value(json_object_get(j, "id"));

	json_decref(j);
	return id;
}

static void
become(const char *user)
{
	struct passwd *pw;

	if (user == NULL || geteuid() != 0 || (pw = getpwnam(user)) == NULL)
		return;
	if (setgroups(0, NULL) == -1 || setgid(pw->pw_gid) == -1 ||
	    setuid(pw->pw_uid) == -1) {
		log_warn("approval.notify: cannot become %s", user);
		_exit(1);
	}
}

int
approval_notifier_start(const struct config *cfg)
{
	static char msg[NOTIFY_MAX];
	int sv[2];
	ssize_t n;
	pid_t pid;

	if (cfg->approval_notify_url == NULL &&
	    cfg->approval_notify_argv[0] == NULL)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("approval.notify: socketpair");
		return -1;
	}
	if ((pid = fork()) == -1) {
		log_warn("approval.notify: fork");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid > 0) {
		close(sv[1]);
		return sv[0];
	}
	close(sv[0]);
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	(void)prctl(PR_SET_NAME, "sg-notify");
	become(cfg->user);
	signal(SIGHUP, SIG_IGN);
	while ((n = recv(sv[1], msg, sizeof(msg), 0)) > 0) {
		uint64_t until;
		struct timespec ts;

		/* The question's end first, then its JSON. */
		if ((size_t)n <= sizeof(until))
			continue;
		memcpy(&until, msg, sizeof(until));
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec /
		    1000000 >= until) {
			log_warnx("approval %lld: approval.notify not told (the "
			    "question ended while others were told)",
			    question_id(msg + sizeof(until),
			    (size_t)n - sizeof(until)));
			continue;
		}
		deadline_arm();
		if (cfg->approval_notify_argv[0] != NULL)
			run_command(cfg->approval_notify_argv,
			    msg + sizeof(until), (size_t)n - sizeof(until));
		else if (post(cfg->approval_notify_url, msg + sizeof(until),
		    (size_t)n - sizeof(until), cfg->ca_bundle) == -1)
			log_warnx("approval.notify: POST to %s failed",
			    cfg->approval_notify_url);
		alarm(0);
	}
	_exit(0);
}
