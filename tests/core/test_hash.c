/*
 * Unit test of src/core/hash.c: SipHash-2-4 against the 64 test vectors of
 * the reference implementation (key 00..0f, messages 00, 00 01, ... of
 * lengths 0 to 63; the paper's appendix gives the one of length 15), FNV-1a
 * against the values its authors publish, and random keys that differ.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/hash.h"

/* Output bytes, little-endian, as the reference's vectors.h writes them. */
static const char *const sip_vectors[64] = {
	"310e0edd47db6f72", "fd67dc93c539f874", "5a4fa9d909806c0d",
	"2d7efbd796666785", "b7877127e09427cf", "8da699cd64557618",
	"cee3fe586e46c9cb", "37d1018bf50002ab", "6224939a79f5f593",
	"b0e4a90bdf82009e", "f3b9dd94c5bb5d7a", "a7ad6b22462fb3f4",
	"fbe50e86bc8f1e75", "903d84c02756ea14", "eef27a8e90ca23f7",
	"e545be4961ca29a1", "db9bc2577fcc2a3f", "9447be2cf5e99a69",
	"9cd38d96f0b3c14b", "bd6179a71dc96dbb", "98eea21af25cd6be",
	"c7673b2eb0cbf2d0", "883ea3e395675393", "c8ce5ccd8c030ca8",
	"94af49f6c650adb8", "eab8858ade92e1bc", "f315bb5bb835d817",
	"adcf6b0763612e2f", "a5c91da7acaa4dde", "716595876650a2a6",
	"28ef495c53a387ad", "42c341d8fa92d832", "ce7cf2722f512771",
	"e37859f94623f3a7", "381205bb1ab0e012", "ae97a10fd434e015",
	"b4a31508beff4d31", "81396229f0907902", "4d0cf49ee5d4dcca",
	"5c73336a76d8bf9a", "d0a704536ba93e0e", "925958fcd6420cad",
	"a915c29bc8067318", "952b79f3bc0aa6d4", "f21df2e41d4535f9",
	"87577519048f53a9", "10a56cf5dfcd9adb", "eb75095ccd986cd0",
	"51a9cb9ecba312e6", "96afadfc2ce666c7", "72fe52975a4364ee",
	"5a1645b276d592a1", "b274cb8ebf87870a", "6f9bb4203de7b381",
	"eaecb2a30b22a87f", "9924a43cc1315724", "bd838d3aafbf8db7",
	"0b1a2a3265d51aea", "135079a3231ce660", "932b2846e4d70666",
	"e1915f5cb1eca46c", "f325965ca16d629f", "575ff28e60381be5",
	"724506eb4c328a95",
};

static uint64_t
le64_hex(const char *s)
{
	char b[3] = { 0 };
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++) {
		memcpy(b, s + 2 * i, 2);
		v |= (uint64_t)strtoul(b, NULL, 16) << (8 * i);
	}
	return v;
}

static void
test_siphash(void)
{
	const uint64_t key[HASH_KEY_WORDS] = {
		0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL,
	};
	unsigned char msg[64];
	uint64_t got;
	size_t i;

	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (unsigned char)i;
	for (i = 0; i < 64; i++) {
		got = hash_siphash(key, msg, i);
		CHECK_MSG(got == le64_hex(sip_vectors[i]), "length %zu: "
		    "%016llx", i, (unsigned long long)got);
	}
	/* The paper's appendix: 15 bytes, a129ca6149be45e5. */
	CHECK(hash_siphash(key, msg, 15) == 0xa129ca6149be45e5ULL);
	/* Unaligned input hashes the same. */
	memmove(msg + 1, msg, 63);
	CHECK(hash_siphash(key, msg + 1, 63) == le64_hex(sip_vectors[63]));
}

static void
test_fnv1a(void)
{
	/* The FNV authors' test values. */
	CHECK(hash_fnv1a("", 0) == 0xcbf29ce484222325ULL);
	CHECK(hash_fnv1a("a", 1) == 0xaf63dc4c8601ec8cULL);
	CHECK(hash_fnv1a("foobar", 6) == 0x85944171f73967e8ULL);
	CHECK(hash_fnv1a32("", 0) == 0x811c9dc5u);
	CHECK(hash_fnv1a32("a", 1) == 0xe40c292cu);
	CHECK(hash_fnv1a32("foobar", 6) == 0xbf9cf968u);
}

static void
test_keys(void)
{
	uint64_t a[HASH_KEY_WORDS], b[HASH_KEY_WORDS];

	hash_key_new(a);
	hash_key_new(b);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
	CHECK(hash_siphash(a, "x", 1) != hash_siphash(b, "x", 1));
}

int
main(void)
{
	test_siphash();
	test_fnv1a();
	test_keys();
	return check_summary();
}
