/*
 * libFuzzer target for core/log's JSON escaping of bytes a peer sent
 * (log_json_escape, what --log-format json writes). The first byte picks
 * the output size. Invariants: the output is terminated inside it and is
 * the inside of a valid JSON string: no raw quote or control byte, only
 * the escapes JSON has, and well-formed UTF-8.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Is s the inside of a JSON string, in well-formed UTF-8? */
static int
valid(const unsigned char *s)
{
	size_t n, i;

	while (*s != '\0') {
		if (*s == '"' || *s < 0x20 || *s == 0x7f)
			return 0;
		if (*s == '\\') {
			if (strchr("\"\\nrt", s[1]) != NULL && s[1] != '\0')
				s += 2;
			else if (s[1] == 'u' && hex(s[2]) && hex(s[3]) &&
			    hex(s[4]) && hex(s[5]))
				s += 6;
			else
				return 0;
			continue;
		}
		if (*s < 0x80) {
			s++;
			continue;
		}
		n = *s >= 0xf0 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc2 ? 2 : 0;
		if (n == 0 || *s > 0xf4)
			return 0;
		for (i = 1; i < n; i++)
			if (s[i] < 0x80 || s[i] > 0xbf)
				return 0;
		s += n;
	}
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out;
	size_t outlen;

	if (size == 0)
		return 0;
	/* 0: room for everything; else a small buffer, to cut */
	outlen = data[0] == 0 ? 6 * size + 1 : (size_t)(data[0] % 32) + 1;
	if ((out = malloc(outlen)) == NULL)
		return 0;
	memset(out, 'x', outlen);
	log_json_escape(data + 1, size - 1, out, outlen);
	if (memchr(out, '\0', outlen) == NULL || !valid((unsigned char *)out))
		abort();
	free(out);
	return 0;
}
