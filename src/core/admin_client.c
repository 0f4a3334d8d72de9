/*
 * A client of the gateway's admin API (HTTP/1.1 + JSON on its unix socket,
 * docs/admin-api.md), for the command line: the launcher, status, reload.
 * Blocking, one request per connection, 10 s timeouts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/admin_client.h"

#define ADMIN_MAX_REPLY	(1 << 20)

static int
admin_connect(const char *path)
{
	struct sockaddr_un sun;
	struct timeval tv = { 10, 0 };
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (path == NULL || strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
admin_call(const char *sock, const char *method, const char *path,
    const char *body, char **out)
{
	char head[512], *buf = NULL, *p, *eoh, *cl;
	size_t len = 0, cap = 0, blen = body != NULL ? strlen(body) : 0;
	int fd, status;
	ssize_t r;

	*out = NULL;
	if ((fd = admin_connect(sock)) == -1)
		return -1;
	r = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: sandgate\r\n"
	    "Connection: close\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\n\r\n", method, path, blen);
	if (r < 0 || (size_t)r >= sizeof(head) ||
	    write_all(fd, head, (size_t)r) == -1 ||
	    (blen > 0 && write_all(fd, body, blen) == -1))
		goto fail;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			if (cap >= ADMIN_MAX_REPLY)
				goto fail;
			cap = cap == 0 ? 8192 : cap * 2;
			if ((p = realloc(buf, cap)) == NULL)
				goto fail;
			buf = p;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			goto fail;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	fd = -1;
	if (buf == NULL)
		goto fail;
	buf[len] = '\0';
	if (sscanf(buf, "HTTP/1.%*1[01] %3d", &status) != 1 ||
	    (eoh = strstr(buf, "\r\n\r\n")) == NULL)
		goto fail;
	*eoh = '\0';
	eoh += 4;
	if ((cl = strcasestr(buf, "\r\nContent-Length:")) != NULL) {
		size_t want = strtoul(cl + 17, NULL, 10);
		if (want < (size_t)(buf + len - eoh))
			eoh[want] = '\0';
	}
	if ((*out = strdup(eoh)) == NULL)
		goto fail;
	free(buf);
	return status;
fail:
	if (fd != -1)
		close(fd);
	free(buf);
	return -1;
}
