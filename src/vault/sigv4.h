/*
 * AWS Signature Version 4 (docs/credentials.md "aws_sigv4"): the parsers of
 * what a client signed (the Authorization header, X-Amz-Credential), the
 * canonical request and the signature. Pure: no I/O, no libevent; every
 * input is the sandbox's and hostile.
 */
#ifndef SG_SIGV4_H
#define SG_SIGV4_H

#include <stddef.h>

#define SIGV4_ALGO		"AWS4-HMAC-SHA256"
#define SIGV4_HEX		64	/* a SHA-256 or signature in hex */
#define SIGV4_SPH_LEN		40	/* the secret-key placeholder */
#define SIGV4_MAX_PARAMS	128	/* query parameters in a canonical query */
#define SIGV4_MAX_SIGNED	64	/* names in SignedHeaders */
#define SIGV4_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

enum sigv4_err {
	SIGV4_OK = 0,
	SIGV4_E_NOT = -1,	/* not a SigV4 Authorization at all */
	SIGV4_E_ALGO = -2,	/* another algorithm (SigV4a: AWS4-ECDSA-P256-SHA256) */
	SIGV4_E_SYNTAX = -3,	/* malformed */
	SIGV4_E_HEADERS = -4,	/* SignedHeaders not sorted, unique, lower-case */
	SIGV4_E_MISSING = -5,	/* a signed header the request does not have */
	SIGV4_E_QUERY = -6,	/* too many query parameters */
	SIGV4_E_NOMEM = -7
};

struct sigv4_slice {
	const char	*p;
	size_t		 len;
};

/* KEYID/YYYYMMDD/REGION/SERVICE/aws4_request */
struct sigv4_cred {
	struct sigv4_slice keyid, date, region, service;
};

/* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...;..., Signature=hex" */
struct sigv4_auth {
	struct sigv4_cred cred;
	struct sigv4_slice signed_headers;
	struct sigv4_slice signature;	/* 64 lower-case hex */
};

struct sigv4_header {
	const char	*name;
	size_t		 nlen;
	const char	*value;
	size_t		 vlen;
};

/* A request as the canonical form reads it. */
struct sigv4_request {
	struct sigv4_slice method;
	struct sigv4_slice path;	/* as sent, the query cut off */
	struct sigv4_slice query;	/* without '?'; len 0: none */
	const struct sigv4_header *headers;
	size_t		 n_headers;
	struct sigv4_slice host;	/* when no header is named host (HTTP/2) */
	int		 presigned;	/* leave X-Amz-Signature out of the query */
};

/* One parameter of a query: the raw name and value ('=' absent: no value). */
struct sigv4_param {
	struct sigv4_slice raw;		/* "name=value" as sent */
	struct sigv4_slice name, value;
	int		 has_value;
};
/* The next non-empty parameter of q[0..len) from *at: 1, or 0 at the end. */
int	sigv4_query_next(const char *q, size_t len, size_t *at,
	    struct sigv4_param *p);
/*
 * A growing string whose memory is wiped whenever it is let go (a canonical
 * request, a query that may hold a session token); always NUL-ended. err:
 * a growth failed, the string is incomplete.
 */
struct sigv4_buf {
	char		*p;
	size_t		 len, cap;
	int		 err;
};
void	sigv4_buf_add(struct sigv4_buf *, const void *, size_t);
void	sigv4_buf_str(struct sigv4_buf *, const char *);
/* Every byte but A-Z a-z 0-9 - _ . ~ (and '/' with keep_slash) as %XX. */
void	sigv4_buf_encode(struct sigv4_buf *, const char *, size_t, int keep_slash);
/* Its memory wiped and freed, the buffer empty again. */
void	sigv4_buf_free(struct sigv4_buf *);

int	sigv4_parse_cred(const char *p, size_t len, struct sigv4_cred *c);
int	sigv4_parse_auth(const char *v, size_t len, struct sigv4_auth *a);
/* 1 when service signs its paths as S3 does (not normalised, encoded once). */
int	sigv4_s3_style(const struct sigv4_slice *service);
/* Percent-decode p[0..len) (%XX only) into out (at least len bytes); its length. */
size_t	sigv4_unescape(const char *p, size_t len, char *out);
/*
 * A parameter's name decoded into out (n bytes, NUL-ended): 0, or -1 (and
 * out "") when it decodes to n bytes or more. Its encoded length does not
 * bound it: every byte of a name may be written %XX.
 */
int	sigv4_param_name(const struct sigv4_param *, char *out, size_t n);

/*
 * The hex SHA-256 of the canonical request: method, canonical URI (S3 style
 * or normalised and encoded again), canonical query (decoded, encoded the
 * AWS way, sorted), the signed headers' values (trimmed, runs of white space
 * made one, repeats joined by ','), signed_headers, payload_hash. 0 or a
 * SIGV4_E_*. The buffer it builds is wiped.
 */
int	sigv4_canonical_hash(const struct sigv4_request *r,
	    const struct sigv4_slice *service, const struct sigv4_slice *signed_headers,
	    const struct sigv4_slice *payload_hash, char out[SIGV4_HEX + 1]);
/*
 * The signature (hex) of a canonical request's hash under secret for the
 * credential scope of c (its date, region, service) at amz_date. The
 * derived keys are wiped. 0, or -1.
 */
int	sigv4_sign(const char *secret, size_t slen, const struct sigv4_cred *c,
	    const struct sigv4_slice *amz_date, const char creq_hex[SIGV4_HEX + 1],
	    char out[SIGV4_HEX + 1]);
/* 1 when a and b are equal (constant time in their length). */
int	sigv4_equal(const struct sigv4_slice *a, const char *b, size_t blen);
/*
 * The secret-key placeholder that goes with a key-id placeholder: 40
 * characters of base62 from HMAC-SHA256 over the key id, so that the
 * gateway needs to keep nothing to know it again.
 */
void	sigv4_secret_placeholder(const char *keyid, size_t len,
	    char out[SIGV4_SPH_LEN + 1]);
/* 1 when payload_hash is 64 hex digits (either case). */
int	sigv4_is_hex_hash(const struct sigv4_slice *h);

#endif
