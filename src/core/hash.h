/*
 * The hashes every module uses for its tables: SipHash-2-4 under a random
 * key for anything a peer or a sandbox can choose (so that no one can aim
 * many keys at one bucket), and FNV-1a, unkeyed, where a value must be the
 * same in every process and across restarts, or the keys are the
 * operator's own.
 */
#ifndef SG_HASH_H
#define SG_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A SipHash key: 128 bits, as two little-endian 64-bit words. */
#define HASH_KEY_WORDS	2

/* Fill key with random bits (getrandom, else OpenSSL); aborts if neither. */
void		 hash_key_new(uint64_t key[HASH_KEY_WORDS]);
/* SipHash-2-4 (Aumasson and Bernstein, 2012) of data under key. */
uint64_t	 hash_siphash(const uint64_t key[HASH_KEY_WORDS],
		    const void *data, size_t len);

/*
 * FNV-1a, 64 bits. The step is public so that a caller can hash as it walks
 * (policy_match.c hashes every suffix of a name in one pass from its end).
 */
#define HASH_FNV1A_INIT	0xcbf29ce484222325ULL
static inline uint64_t
hash_fnv1a_step(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ULL;
}
uint64_t	 hash_fnv1a(const void *data, size_t len);
/* FNV-1a, 32 bits: for names that must stay what they were (sandbox_net.c). */
uint32_t	 hash_fnv1a32(const void *data, size_t len);

#endif
