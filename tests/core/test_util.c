/*
 * The one hex codec (core/util.c): encoding, decoding in either case or
 * lower case only, and what it refuses.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/policy.h"
#include "core/util.h"

static void
test_encode(void)
{
	const uint8_t in[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
	char out[2 * sizeof(in) + 1];

	memset(out, 'x', sizeof(out));
	util_hex_encode(in, sizeof(in), out);
	CHECK_STR(out, "00017f80abff");
	util_hex_encode(in, 0, out);
	CHECK_STR(out, "");
}

static void
test_decode(void)
{
	uint8_t out[8];

	memset(out, 0, sizeof(out));
	CHECK_INT(util_hex_decode("00017f80ABff", 12, out, 0), 0);
	CHECK(memcmp(out, "\x00\x01\x7f\x80\xab\xff", 6) == 0);
	CHECK_INT(util_hex_decode("abff", 4, out, 1), 0);
	CHECK(out[0] == 0xab && out[1] == 0xff);
	/* one spelling where the text is a hash or a signature */
	CHECK_INT(util_hex_decode("ABff", 4, out, 1), -1);
	CHECK_INT(util_hex_decode("abFf", 4, out, 1), -1);
	/* odd length, non-digits, a digit cut off by len */
	CHECK_INT(util_hex_decode("abc", 3, out, 0), -1);
	CHECK_INT(util_hex_decode("0g", 2, out, 0), -1);
	CHECK_INT(util_hex_decode("g0", 2, out, 0), -1);
	CHECK_INT(util_hex_decode(" 0", 2, out, 0), -1);
	CHECK_INT(util_hex_decode("0\0", 2, out, 0), -1);
	CHECK_INT(util_hex_decode("", 0, out, 0), 0);
}

static void
test_round_trip(void)
{
	uint8_t in[256], back[256];
	char hex[2 * sizeof(in) + 1];
	size_t i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	util_hex_encode(in, sizeof(in), hex);
	CHECK_INT((int)strlen(hex), 512);
	CHECK_INT(util_hex_decode(hex, strlen(hex), back, 1), 0);
	CHECK(memcmp(in, back, sizeof(in)) == 0);
	for (i = 0; i < 256; i++)
		CHECK_INT(util_hexval((int)i), (i >= '0' && i <= '9') ? (int)i - '0' :
		    (i >= 'a' && i <= 'f') ? (int)i - 'a' + 10 :
		    (i >= 'A' && i <= 'F') ? (int)i - 'A' + 10 : -1);
}

/* token_sha256 as the admin API takes it: exactly 64 hex digits, either case. */
static void
test_sha256_hex(void)
{
	static const char good[] =
	    "65dcf16ea3dfa49069628089eb4a75483070f5584b2a21ee64912b5f621f12da";
	unsigned char out[32];
	char upper[65], bad[65];
	size_t i;

	CHECK_INT(policy_sha256_hex_parse(good, out), 0);
	CHECK(out[0] == 0x65 && out[31] == 0xda);
	for (i = 0; i < 64; i++)
		upper[i] = (char)(good[i] >= 'a' ? good[i] - 32 : good[i]);
	upper[64] = '\0';
	CHECK_INT(policy_sha256_hex_parse(upper, out), 0);
	CHECK(out[0] == 0x65 && out[31] == 0xda);
	CHECK_INT(policy_sha256_hex_parse("65dc", out), -1);
	memcpy(bad, good, sizeof(bad));
	bad[63] = 'g';
	CHECK_INT(policy_sha256_hex_parse(bad, out), -1);
	bad[63] = '\0';
	CHECK_INT(policy_sha256_hex_parse(bad, out), -1);
}

int
main(void)
{
	test_encode();
	test_decode();
	test_round_trip();
	test_sha256_hex();
	return check_summary();
}
