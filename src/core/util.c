/*
 * Small shared helpers: hex digits, and directories created 0700 for the
 * state directory, keys and certificates.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/util.h"

int
util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void
util_hex_encode(const void *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = in;
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 0xf];
	}
	out[2 * n] = '\0';
}

int
util_hex_decode(const char *in, size_t len, void *out, int lower_only)
{
	unsigned char *o = out;
	int hi, lo;
	size_t i;

	if (len % 2 != 0)
		return -1;
	for (i = 0; i < len; i += 2) {
		if (lower_only && ((in[i] >= 'A' && in[i] <= 'F') ||
		    (in[i + 1] >= 'A' && in[i + 1] <= 'F')))
			return -1;
		if ((hi = util_hexval(in[i])) == -1 ||
		    (lo = util_hexval(in[i + 1])) == -1)
			return -1;
		o[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* Create path[0..i) for every '/' at i (and the whole path when whole). */
static int
mkdirs(const char *path, int whole)
{
	char buf[4096];
	size_t i, len = strlen(path);

	if (len == 0 || len >= sizeof(buf)) {
		errno = len == 0 ? EINVAL : ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (i < len && buf[i] != '/')
			continue;
		if (i == len && !whole)
			break;
		buf[i] = '\0';
		if (mkdir(buf, 0700) == -1 && errno != EEXIST)
			return -1;
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}

int
util_mkdir_p(const char *dir)
{
	return mkdirs(dir, 1);
}

int
util_mkdir_parents(const char *path)
{
	return mkdirs(path, 0);
}
