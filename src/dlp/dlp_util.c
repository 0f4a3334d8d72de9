/*
 * Small pure helpers of secret detection: Shannon entropy of a match, the
 * CRC32 that GitHub tokens carry, and the redacted excerpt a finding
 * shows instead of the secret.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "dlp/dlp.h"

double
dlp_entropy(const unsigned char *p, size_t n)
{
	size_t count[256] = { 0 }, i;
	double h = 0, q;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		count[p[i]]++;
	for (i = 0; i < 256; i++) {
		if (count[i] == 0)
			continue;
		q = (double)count[i] / (double)n;
		h -= q * log2(q);
	}
	return h;
}

uint32_t
dlp_crc32(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		c ^= p[i];
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return c ^ 0xffffffffu;
}

void
dlp_redact(const unsigned char *p, size_t n, char *out, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char head[5];
	size_t i;

	for (i = 0; i < 4; i++) {
		if (i >= n) {
			head[i] = '\0';
			break;
		}
		head[i] = (p[i] >= '0' && p[i] <= '9') ||
		    (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') ||
		    p[i] == '_' || p[i] == '-' ? (char)p[i] : '.';
	}
	head[4] = '\0';
	if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < 3)
		memset(md, 0, 3);
	snprintf(out, len, "%s/%zu/#%02x%02x%02x", head, n, md[0], md[1], md[2]);
}
