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
