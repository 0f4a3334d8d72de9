/*
 * Reading a secret value for `sandgate vault set|rotate`: from a file
 * descriptor (stdin) straight into memory this module owns -- locked out
 * of swap, wiped after use -- and on into the vault. The command line
 * only says which entry; it never holds the value.
 */
#include <sys/mman.h>

#include <errno.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "vault/vault.h"

/* Room for VAULT_VALUE_MAX plus "\r\n" and one more, to see "too long". */
#define VALUE_BUF	(VAULT_VALUE_MAX + 3)

static ssize_t
read_some(int fd, unsigned char *buf, size_t len)
{
	ssize_t r;

	do
		r = read(fd, buf, len);
	while (r == -1 && errno == EINTR);
	return r;
}

/*
 * To end of file from a pipe, one line from a terminal (echo off while
 * reading). One trailing newline (and a CR before it) is dropped.
 */
static int
read_value(int fd, unsigned char *buf, size_t *len, const char **errstr)
{
	struct termios old, quiet;
	int tty = isatty(fd), restore = 0;
	size_t n = 0;
	ssize_t r;

	if (tty && tcgetattr(fd, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		restore = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
	}
	while (n < VALUE_BUF) {
		if ((r = read_some(fd, buf + n, VALUE_BUF - n)) == -1) {
			if (restore)
				tcsetattr(fd, TCSAFLUSH, &old);
			*errstr = strerror(errno);
			return VAULT_INPUT_ERROR;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (tty && memchr(buf, '\n', n) != NULL)
			break;
	}
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &old);
	if (tty && memchr(buf, '\n', n) != NULL)
		n = (size_t)((unsigned char *)memchr(buf, '\n', n) - buf) + 1;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n == 0)
		return VAULT_INPUT_EMPTY;
	if (n > VAULT_VALUE_MAX)
		return VAULT_INPUT_TOO_LONG;
	*len = n;
	return 0;
}

int
vault_set_from_fd(struct vault *v, const char *name, int fd, int mode,
    const char **errstr)
{
	static unsigned char buf[VALUE_BUF];
	size_t len = 0;
	int rc;

	*errstr = NULL;
	/* Keep the value out of swap; best effort. */
	(void)mlock(buf, sizeof(buf));
	rc = read_value(fd, buf, &len, errstr);
	if (rc == 0 && vault_set(v, name, buf, len, mode, errstr) == -1)
		rc = VAULT_INPUT_STORE;
	OPENSSL_cleanse(buf, sizeof(buf));
	return rc;
}
