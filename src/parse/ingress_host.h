/*
 * Pure parsers of the ingress listener (docs/ingress.md): the PORT-ID.<domain>
 * host a request names, and the places an ingress token travels in (the query's
 * sg_token parameter, the sg_token cookie), which are cut out before the guest
 * sees the request. Functions over bytes: no I/O, no heap.
 */
#ifndef SG_INGRESS_HOST_H
#define SG_INGRESS_HOST_H

#include <stddef.h>
#include <stdint.h>

#define INGRESS_ID_MAX		40	/* POLICY_ID_MAX */
#define INGRESS_TOKEN_MAX	256

/* Results of ingress_host_parse(). */
#define INGRESS_HOST_OK		0
#define INGRESS_HOST_BAD	(-1)	/* not a host at all: 400 */
#define INGRESS_HOST_FOREIGN	(-2)	/* a host, but not PORT-ID.<domain>: 404 */

struct ingress_host {
	uint16_t	port;				/* 1-65535 */
	char		id[INGRESS_ID_MAX + 1];		/* lower-case */
	char		name[254];			/* the host, lower-case, no dot or :port */
};

/*
 * host[0..len) is a Host header value or the authority of an absolute-form
 * target: NAME[:PORT]. NAME must be PORT-ID.<domain> (domain lower-case, no
 * trailing dot), compared case-insensitively, one trailing dot allowed;
 * PORT is decimal 1-65535 without leading zeros; ID is [a-z0-9][a-z0-9-]{0,39}.
 * A :PORT suffix must be decimal 1-65535 and is otherwise ignored.
 */
int	ingress_host_parse(const char *host, size_t len, const char *domain,
	    struct ingress_host *out);

/*
 * 1 when tok[0..len) may be a token: 1 to INGRESS_TOKEN_MAX bytes of
 * [A-Za-z0-9._~-] (so that it is the same in a query, a header and a cookie).
 */
int	ingress_token_syntax_ok(const char *tok, size_t len);

/*
 * The request target target[0..len) without any sg_token=VALUE parameter of
 * its query (empty parameters are dropped too, and a query left empty loses
 * its '?'), written to out (at most
 * outlen - 1 bytes, NUL-terminated). *tok and *toklen get the first value found
 * (pointing into target), *tok NULL when none. Returns the length written,
 * or -1 when out is too small.
 */
int	ingress_strip_query(const char *target, size_t len, char *out,
	    size_t outlen, const char **tok, size_t *toklen);

/*
 * A Cookie header value without any sg_token=VALUE pair, as in
 * ingress_strip_query(); the other pairs keep their order, joined by "; ".
 * Returns the length written (0: nothing left), or -1 when out is too small.
 */
int	ingress_strip_cookie(const char *v, size_t len, char *out, size_t outlen,
	    const char **tok, size_t *toklen);

/*
 * 1 when a Set-Cookie value sets the gateway's token cookie (its name,
 * blanks trimmed and escapes decoded, is "sg_token"): a guest's app may
 * not set it -- with Domain= the parent's, it reached every sandbox's
 * requests ahead of their own (cookie tossing).
 */
int	ingress_set_cookie_is_token(const char *v, size_t len);

#endif
