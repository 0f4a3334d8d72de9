/*
 * SipHash-2-4, written from the paper (Aumasson and Bernstein, "SipHash: a
 * fast short-input PRF", 2012), its random keys, and FNV-1a. The one copy of
 * each: tests/core/test_hash.c checks them against the published vectors.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include <openssl/err.h>
#include <openssl/rand.h>

#include "core/hash.h"

void
hash_key_new(uint64_t key[HASH_KEY_WORDS])
{
	unsigned char *p = (unsigned char *)key;
	size_t need = HASH_KEY_WORDS * sizeof(key[0]), got = 0;
	ssize_t n;

	while (got < need) {
		if ((n = getrandom(p + got, need - got, 0)) > 0)
			got += (size_t)n;
		else if (n == -1 && errno != EINTR)
			break;
	}
	if (got == need)
		return;
	if (RAND_bytes(p, (int)need) == 1)
		return;
	ERR_clear_error();
	/* A key someone can guess is a table someone can flood. */
	abort();
}

#define SIP_ROTL(x, b)	(uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void
sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = SIP_ROTL(v[1], 13);
	v[1] ^= v[0];
	v[0] = SIP_ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = SIP_ROTL(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = SIP_ROTL(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = SIP_ROTL(v[1], 17);
	v[1] ^= v[2];
	v[2] = SIP_ROTL(v[2], 32);
}

/* One message word: two compression rounds. */
static void
sip_word(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

uint64_t
hash_siphash(const uint64_t key[HASH_KEY_WORDS], const void *data,
    size_t len)
{
	const unsigned char *p = data;
	uint64_t v[4], m;
	size_t i, j, end = len & ~(size_t)7;

	/* "somepseudorandomlygeneratedbytes" */
	v[0] = key[0] ^ 0x736f6d6570736575ULL;
	v[1] = key[1] ^ 0x646f72616e646f6dULL;
	v[2] = key[0] ^ 0x6c7967656e657261ULL;
	v[3] = key[1] ^ 0x7465646279746573ULL;
	for (i = 0; i < end; i += 8) {
		for (m = 0, j = 0; j < 8; j++)
			m |= (uint64_t)p[i + j] << (8 * j);
		sip_word(v, m);
	}
	/* The last word: the remaining bytes, and the length mod 256 on top. */
	m = (uint64_t)(len & 0xff) << 56;
	for (j = 0; j < (len & 7); j++)
		m |= (uint64_t)p[end + j] << (8 * j);
	sip_word(v, m);
	/* Finalisation: four rounds. */
	v[2] ^= 0xff;
	for (j = 0; j < 4; j++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t
hash_fnv1a(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = HASH_FNV1A_INIT;
	size_t i;

	for (i = 0; i < len; i++)
		h = hash_fnv1a_step(h, p[i]);
	return h;
}

uint32_t
hash_fnv1a32(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}
