/*
 * Unit tests of AWS SigV4 (src/vault/sigv4.c): the parsers of Authorization
 * and X-Amz-Credential refuse what is malformed, and the canonical hash and
 * signature equal those botocore's own signer computed for the same
 * requests (vectors made with python3-botocore 1.29, SigV4Auth and
 * S3SigV4Auth, at 20261205T101500Z with AWS's documented example key).
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "vault/sigv4.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define SECRET	"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define DATE	"20261205T101500Z"

static struct sigv4_slice
sl(const char *s)
{
	struct sigv4_slice x = { s, strlen(s) };

	return x;
}

#define H(n, v)	{ n, sizeof(n) - 1, v, sizeof(v) - 1 }

static void
vector(const char *method, const char *path, const char *query,
    const struct sigv4_header *h, size_t nh, const char *auth,
    const char *payload, const char *want_hash, const char *want_sig)
{
	struct sigv4_request r = { 0 };
	struct sigv4_auth a;
	struct sigv4_slice amz = sl(DATE), ph = sl(payload);
	char hash[SIGV4_HEX + 1], sig[SIGV4_HEX + 1];

	r.method = sl(method);
	r.path = sl(path);
	r.query = sl(query);
	r.headers = h;
	r.n_headers = nh;
	CHECK_INT(sigv4_parse_auth(auth, strlen(auth), &a), SIGV4_OK);
	CHECK_INT(sigv4_canonical_hash(&r, &a.cred.service, &a.signed_headers,
	    &ph, hash), SIGV4_OK);
	CHECK_STR(hash, want_hash);
	CHECK_INT(sigv4_sign(SECRET, strlen(SECRET), &a.cred, &amz, hash, sig), 0);
	CHECK_STR(sig, want_sig);
	CHECK(sigv4_equal(&a.signature, sig, strlen(sig)));
	/* One byte of the secret, another signature. */
	CHECK_INT(sigv4_sign("x" SECRET, strlen(SECRET) + 1, &a.cred, &amz, hash,
	    sig), 0);
	CHECK(!sigv4_equal(&a.signature, sig, strlen(sig)));
}

static void
test_botocore_vectors(void)
{
	/* S3: the path as sent, the query decoded, encoded again and sorted. */
	static const struct sigv4_header s3[] = {
		H("Host", "bucket.s3.example.com"),
		H("X-Amz-Date", DATE),
		H("X-Amz-Content-SHA256", SIGV4_EMPTY_SHA256),
		H("User-Agent", "not signed"),
	};
	/* Others: dot segments and empty ones gone, '%' encoded again. */
	static const struct sigv4_header ddb[] = {
		H("Content-Type", "application/x-amz-json-1.0"),
		H("X-Amz-Target", "DynamoDB_20120810.ListTables"),
		H("Host", "dynamodb.example.com"),
		H("X-Foo", "  a   b  "),
		H("X-Amz-Date", DATE),
	};

	vector("GET", "/a%20b/c.txt", "list-type=2&prefix=x%2Fy&a=", s3, 4,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/s3/"
	    "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
	    "Signature=75f9b30709e1553c3334baa6af6c2670f71ad58c303aee0bc33db0fe1f550977",
	    SIGV4_EMPTY_SHA256,
	    "982c2547817a541640b0f855b47988a7b4020073e0da13f18a7cc526ce02033f",
	    "75f9b30709e1553c3334baa6af6c2670f71ad58c303aee0bc33db0fe1f550977");
	/* The same pairs in another order and spelling: the same query. */
	vector("GET", "/a%20b/c.txt", "a&prefix=x/y&list-type=2", s3, 4,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/s3/"
	    "aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	    "Signature=75f9b30709e1553c3334baa6af6c2670f71ad58c303aee0bc33db0fe1f550977",
	    SIGV4_EMPTY_SHA256,
	    "982c2547817a541640b0f855b47988a7b4020073e0da13f18a7cc526ce02033f",
	    "75f9b30709e1553c3334baa6af6c2670f71ad58c303aee0bc33db0fe1f550977");
	vector("POST", "/./x/../a%2Fb//c/", "", ddb, 5,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/dynamodb/"
	    "aws4_request, SignedHeaders=content-type;host;x-amz-date;"
	    "x-amz-target;x-foo, Signature="
	    "dbd75f5d5b1c2c7a60914dd30e8aa6ae359eb0e39b401169164bc394db79a989",
	    /* sha256 of {"Limit":1} */
	    "55522f708dcfebccb7bd3e8d0001a53ecaf2beca9ca801f1e9161e24215faa99",
	    "d85ab836139822ed679fe77614d364a5998274e203828e656fd2d49dcb849dd0",
	    "dbd75f5d5b1c2c7a60914dd30e8aa6ae359eb0e39b401169164bc394db79a989");
}

static void
test_parse_refusals(void)
{
	struct sigv4_auth a;
	struct sigv4_cred c;
	const char *ok_tail = "/20261205/us-east-1/s3/aws4_request";
	char buf[512];

#define A(s)	sigv4_parse_auth(s, strlen(s), &a)
	CHECK_INT(A("Bearer x"), SIGV4_E_NOT);
	CHECK_INT(A("AWS4-ECDSA-P256-SHA256 Credential=K/20261205/s3/"
	    "aws4_request, SignedHeaders=host, Signature=00"), SIGV4_E_ALGO);
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=x-amz-date;host, Signature=%064d", ok_tail, 0);
	CHECK_INT(A(buf), SIGV4_E_HEADERS);	/* not sorted */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=host;host, Signature=%064d", ok_tail, 0);
	CHECK_INT(A(buf), SIGV4_E_HEADERS);	/* twice */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=Host, Signature=%064d", ok_tail, 0);
	CHECK_INT(A(buf), SIGV4_E_HEADERS);	/* upper case */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=host, Signature=%063d", ok_tail, 0);
	CHECK_INT(A(buf), SIGV4_E_SYNTAX);	/* short signature */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=host, Signature=%064d, Signature=%064d", ok_tail, 0, 0);
	CHECK_INT(A(buf), SIGV4_E_SYNTAX);	/* twice */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=host", ok_tail);
	CHECK_INT(A(buf), SIGV4_E_SYNTAX);	/* no signature */
	snprintf(buf, sizeof(buf), "AWS4-HMAC-SHA256 Credential=K%s, "
	    "SignedHeaders=host, Signature=%064d", ok_tail, 0);
	CHECK_INT(A(buf), SIGV4_OK);
	CHECK_INT((int)a.cred.keyid.len, 1);
	CHECK(memcmp(a.cred.service.p, "s3", 2) == 0);
#undef A
#define C(s)	sigv4_parse_cred(s, strlen(s), &c)
	CHECK_INT(C("K/20261205/r/s/aws4_request"), SIGV4_OK);
	CHECK_INT(C("K/2026120/r/s/aws4_request"), SIGV4_E_SYNTAX);
	CHECK_INT(C("K/2026120x/r/s/aws4_request"), SIGV4_E_SYNTAX);
	CHECK_INT(C("K/20261205/r/s/aws4_requesT"), SIGV4_E_SYNTAX);
	CHECK_INT(C("K/20261205/r/s/aws4_request/x"), SIGV4_E_SYNTAX);
	CHECK_INT(C("K/20261205//s/aws4_request"), SIGV4_E_SYNTAX);
	CHECK_INT(C("/20261205/r/s/aws4_request"), SIGV4_E_SYNTAX);
	CHECK_INT(C("K K/20261205/r/s/aws4_request"), SIGV4_E_SYNTAX);
#undef C
}

static void
test_missing_header(void)
{
	static const struct sigv4_header h[] = { H("Host", "h.example.com") };
	struct sigv4_request r = { 0 };
	struct sigv4_slice svc = sl("s3"), sh = sl("host;x-amz-date"),
	    ph = sl(SIGV4_EMPTY_SHA256);
	char hash[SIGV4_HEX + 1];

	r.method = sl("GET");
	r.path = sl("/");
	r.headers = h;
	r.n_headers = 1;
	CHECK_INT(sigv4_canonical_hash(&r, &svc, &sh, &ph, hash), SIGV4_E_MISSING);
	/* HTTP/2: host from :authority when no header is named so. */
	sh = sl("host");
	r.n_headers = 0;
	r.host = sl("h.example.com");
	CHECK_INT(sigv4_canonical_hash(&r, &svc, &sh, &ph, hash), SIGV4_OK);
}

static void
test_secret_placeholder(void)
{
	char a[SIGV4_SPH_LEN + 1], b[SIGV4_SPH_LEN + 1];

	sigv4_secret_placeholder("sg-ph-aaaa", 10, a);
	sigv4_secret_placeholder("sg-ph-aaaa", 10, b);
	CHECK_STR(a, b);
	CHECK_INT((int)strlen(a), SIGV4_SPH_LEN);
	sigv4_secret_placeholder("sg-ph-aaab", 10, b);
	CHECK(strcmp(a, b) != 0);
}

static void
test_snapshot_parts(void)
{
	const char *names[] = { "aws", "two", "bad", "empty", "four", "sp" };
	const unsigned char *vals[] = { (const unsigned char *)"ID:SEC/+:TOK=",
	    (const unsigned char *)"ID2:SEC2", (const unsigned char *)"nocolon",
	    (const unsigned char *)"A::B", (const unsigned char *)"a:b:c:d",
	    (const unsigned char *)"a b:c" };
	size_t lens[6], n;
	const char *want[] = { "aws", "two", "bad", "empty", "four", "sp", "gone" };
	int bad[7], i;
	struct vault_snapshot *s, *p;
	const unsigned char *v;

	for (i = 0; i < 6; i++)
		lens[i] = strlen((const char *)vals[i]);
	s = vault_snapshot_build(names, vals, lens, 6);
	CHECK(s != NULL);
	if (s == NULL)
		return;
	p = vault_snapshot_with_parts(s, want, 7, bad);
	CHECK(p != NULL);
	if (p == NULL) {
		vault_snapshot_unref(s);
		return;
	}
	CHECK_INT(bad[0], 0);
	CHECK_INT(bad[1], 0);
	CHECK_INT(bad[2], 1);	/* one field */
	CHECK_INT(bad[3], 1);	/* an empty field */
	CHECK_INT(bad[4], 1);	/* four */
	CHECK_INT(bad[5], 1);	/* white space */
	CHECK_INT(bad[6], 0);	/* not held: not bad, just absent */
	v = vault_snapshot_value(p, "aws#id", &n);
	CHECK(v != NULL && n == 2 && memcmp(v, "ID", 2) == 0);
	v = vault_snapshot_value(p, "aws#key", &n);
	CHECK(v != NULL && n == 5 && memcmp(v, "SEC/+", 5) == 0);
	v = vault_snapshot_value(p, "aws#token", &n);
	CHECK(v != NULL && n == 4 && memcmp(v, "TOK=", 4) == 0);
	CHECK(vault_snapshot_value(p, "two#token", &n) == NULL);
	CHECK(vault_snapshot_value(p, "two#key", &n) != NULL && n == 4);
	CHECK(vault_snapshot_value(p, "bad#id", &n) == NULL);
	/* The whole values stay. */
	v = vault_snapshot_value(p, "aws", &n);
	CHECK(v != NULL && n == lens[0]);
	vault_snapshot_unref(s);
	vault_snapshot_unref(p);
}

/* A name is decoded whatever its encoded length; a longer one is -1. */
static void
test_param_name(void)
{
	static const char q[] =
	    "%58%2D%41%6D%7A%2D%43%72%65%64%65%6E%74%69%61%6C=AKIA&"
	    "X-Amz-Date=1&%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41=x&"
	    "AAAAAAAAAAAAAAAA=y";
	struct sigv4_param qp;
	size_t at = 0;
	char k[17];

	CHECK(sigv4_query_next(q, sizeof(q) - 1, &at, &qp) == 1);
	CHECK(qp.name.len == 48);
	CHECK(sigv4_param_name(&qp, k, sizeof(k)) == 0);
	CHECK(strcmp(k, "X-Amz-Credential") == 0);
	CHECK(sigv4_query_next(q, sizeof(q) - 1, &at, &qp) == 1);
	CHECK(sigv4_param_name(&qp, k, sizeof(k)) == 0);
	CHECK(strcmp(k, "X-Amz-Date") == 0);
	/* Sixteen bytes fit k[17] with its NUL, not k[16]. */
	CHECK(sigv4_query_next(q, sizeof(q) - 1, &at, &qp) == 1);
	CHECK(sigv4_param_name(&qp, k, sizeof(k)) == 0);
	CHECK(strcmp(k, "AAAAAAAAAAAAAAAA") == 0);
	CHECK(sigv4_param_name(&qp, k, 16) == -1 && k[0] == '\0');
	CHECK(sigv4_query_next(q, sizeof(q) - 1, &at, &qp) == 1);
	CHECK(sigv4_param_name(&qp, k, 16) == -1 && k[0] == '\0');
	CHECK(sigv4_query_next(q, sizeof(q) - 1, &at, &qp) == 0);
}

int
main(void)
{
	test_param_name();
	test_snapshot_parts();
	test_botocore_vectors();
	test_parse_refusals();
	test_missing_header();
	test_secret_placeholder();
	return check_summary();
}
