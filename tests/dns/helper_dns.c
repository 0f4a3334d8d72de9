/*
 * What the DNS unit tests share: a real dnsmasq upstream on 127.0.0.1 that
 * answers only from the test's records (and may log every query), free
 * loopback ports, and address literals. The dnsmasq process is owned here.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_dns.h"

#define DM_ARGV_MAX	128
#define DM_BIG_MAX	64

static pid_t	 dm_pid = -1;
static char	 dm_dir[64];
static char	 dm_log[128];
static int	 dm_atexit;

int
dnstest_free_port(int want_tcp)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int u, t = -1, port = -1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((u = socket(AF_INET, SOCK_DGRAM, 0)) == -1)
		return -1;
	if (bind(u, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(u, (struct sockaddr *)&sin, &sl) == 0) {
		port = ntohs(sin.sin_port);
		if (want_tcp) {
			t = socket(AF_INET, SOCK_STREAM, 0);
			if (t == -1 || bind(t, (struct sockaddr *)&sin,
			    sizeof(sin)) == -1)
				port = -1;
		}
	}
	close(u);
	if (t != -1)
		close(t);
	return port;
}

void
dnstest_dnsmasq_stop(void)
{
	if (dm_pid > 0) {
		kill(dm_pid, SIGTERM);
		waitpid(dm_pid, NULL, 0);
		dm_pid = -1;
	}
	if (dm_log[0] != '\0')
		unlink(dm_log);
	if (dm_dir[0] != '\0')
		rmdir(dm_dir);
	dm_log[0] = dm_dir[0] = '\0';
}

/* 1 when something answers a DNS query for a.test on the port. */
static int
dm_probe(int port)
{
	static const uint8_t q[] = { 0x53, 0x47, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
	    1, 'a', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1 };
	struct sockaddr_in sin;
	struct pollfd pfd;
	uint8_t buf[512];
	int s, ok = 0;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s = socket(AF_INET, SOCK_DGRAM, 0)) == -1)
		return 0;
	if (sendto(s, q, sizeof(q), 0, (struct sockaddr *)&sin,
	    sizeof(sin)) == (ssize_t)sizeof(q)) {
		pfd.fd = s;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 100) == 1 && recv(s, buf, sizeof(buf), 0) >=
		    12 && buf[0] == 0x53 && buf[1] == 0x47)
			ok = 1;
	}
	close(s);
	return ok;
}

static int
dm_start_once(const struct dnstest_zone *z, int port)
{
	char *argv[DM_ARGV_MAX], portarg[32], logarg[160], userarg[80];
	char grouparg[80], big[DM_BIG_MAX][64];
	struct passwd *pw;
	struct group *gr;
	int argc = 0, tries, fd, i;

	snprintf(portarg, sizeof(portarg), "--port=%d", port);
	argv[argc++] = (char *)DNSTEST_DNSMASQ;
	argv[argc++] = (char *)"-k";
	argv[argc++] = portarg;
	argv[argc++] = (char *)"--listen-address=127.0.0.1";
	argv[argc++] = (char *)"--bind-interfaces";
	argv[argc++] = (char *)"--no-resolv";
	argv[argc++] = (char *)"--no-hosts";
	argv[argc++] = (char *)"--conf-file=/dev/null";
	argv[argc++] = (char *)"--pid-file=";
	if (z->log_queries) {
		snprintf(logarg, sizeof(logarg), "--log-facility=%s", dm_log);
		argv[argc++] = logarg;
		argv[argc++] = (char *)"--log-queries";
	} else
		argv[argc++] = (char *)"--log-facility=/dev/null";
	/* Stay who we are: as root dnsmasq would switch to nobody. */
	if ((pw = getpwuid(geteuid())) != NULL) {
		snprintf(userarg, sizeof(userarg), "--user=%s", pw->pw_name);
		argv[argc++] = userarg;
	}
	if ((gr = getgrgid(getegid())) != NULL) {
		snprintf(grouparg, sizeof(grouparg), "--group=%s",
		    gr->gr_name);
		argv[argc++] = grouparg;
	}
	for (i = 0; z->records[i] != NULL; i++) {
		if (argc >= DM_ARGV_MAX - 1)
			return -1;
		argv[argc++] = (char *)z->records[i];
	}
	for (i = 0; i < z->big_n; i++) {
		if (i >= DM_BIG_MAX || argc >= DM_ARGV_MAX - 1)
			return -1;
		snprintf(big[i], sizeof(big[i]), "--host-record=%s,%s%d",
		    z->big_name, z->big_net, i + 1);
		argv[argc++] = big[i];
	}
	argv[argc] = NULL;

	fflush(NULL);
	if ((dm_pid = fork()) == -1) {
		perror("fork");
		return -1;
	}
	if (dm_pid == 0) {
		/* Die with the test, even if it crashes. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if ((fd = open("/dev/null", O_RDWR)) != -1) {
			dup2(fd, 0);
			dup2(fd, 1);
			if (fd > 2)
				close(fd);
		}
		execv(DNSTEST_DNSMASQ, argv);
		_exit(127);
	}
	for (tries = 0; tries < 50; tries++) {
		if (waitpid(dm_pid, NULL, WNOHANG) == dm_pid) {
			dm_pid = -1;
			return -1;
		}
		if (dm_probe(port))
			return 0;
		usleep(50 * 1000);
	}
	kill(dm_pid, SIGTERM);
	waitpid(dm_pid, NULL, 0);
	dm_pid = -1;
	return -1;
}

int
dnstest_dnsmasq_start(const struct dnstest_zone *z)
{
	int attempt, port;

	if (z->log_queries) {
		snprintf(dm_dir, sizeof(dm_dir), "/tmp/sg-test-dnsmasq-XXXXXX");
		if (mkdtemp(dm_dir) == NULL) {
			dm_dir[0] = '\0';
			return -1;
		}
		snprintf(dm_log, sizeof(dm_log), "%s/dnsmasq.log", dm_dir);
	}
	if (!dm_atexit) {
		atexit(dnstest_dnsmasq_stop);
		dm_atexit = 1;
	}
	for (attempt = 0; attempt < 5; attempt++) {
		if ((port = dnstest_free_port(1)) == -1)
			continue;
		if (dm_start_once(z, port) == 0)
			return port;
	}
	return -1;
}

int
dnstest_dnsmasq_count(const char *needle)
{
	FILE *f;
	char line[512];
	int n = 0;

	if (dm_log[0] == '\0' || (f = fopen(dm_log, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

struct netaddr
dnstest_addr(const char *s)
{
	struct netaddr a;

	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, s, a.a) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, s, a.a) == 1)
		a.family = AF_INET6;
	else
		abort();
	return a;
}
