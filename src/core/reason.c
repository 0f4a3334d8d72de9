/*
 * The reasons' table: word, class, default status and SOCKS5 reply, one
 * row each, in the order of enum sg_reason.
 */
#include <stddef.h>
#include <string.h>

#include "core/reason.h"

#define D	REASON_CLASS_DENY
#define E	REASON_CLASS_ERROR
#define NOT_ALLOWED	0x02	/* connection not allowed by ruleset */
#define FAIL		0x01
#define HOST_UNREACH	0x04
#define REFUSED		0x05
#define CMD		0x07

static const struct reason_info reasons[REASON_MAX] = {
	[REASON_NONE] =			{ NULL, REASON_CLASS_NONE, 200, 0 },
	[REASON_NO_IDENTITY] =		{ "no-identity", D, 407, NOT_ALLOWED },
	[REASON_AUTH_FAILED] =		{ "proxy-auth-failed", D, 407, NOT_ALLOWED },
	[REASON_UNKNOWN_POLICY] =	{ "unknown-policy", D, 403, NOT_ALLOWED },
	[REASON_POLICY_DENY] =		{ "policy-deny", D, 403, NOT_ALLOWED },
	[REASON_IP_PROHIBITED] =	{ "destination-ip-prohibited", D, 403, NOT_ALLOWED },
	[REASON_COUNTRY_DENY] =		{ "country-deny", D, 403, NOT_ALLOWED },
	[REASON_ASN_DENY] =		{ "asn-deny", D, 403, NOT_ALLOWED },
	[REASON_INVALID_HOST] =		{ "invalid-host", D, 403, NOT_ALLOWED },
	[REASON_NEEDS_INTERCEPT] =	{ "needs-intercept", D, 403, NOT_ALLOWED },
	[REASON_SNI_MISMATCH] =		{ "sni-mismatch", D, 403, NOT_ALLOWED },
	[REASON_SNI_MISSING] =		{ "sni-missing", D, 403, NOT_ALLOWED },
	[REASON_HOST_MISMATCH] =	{ "host-mismatch", D, 403, NOT_ALLOWED },
	[REASON_PROTOCOL_DENY] =	{ "protocol-not-allowed", D, 403, NOT_ALLOWED },
	[REASON_AMBIGUOUS_PATH] =	{ "ambiguous-path", D, 400, NOT_ALLOWED },
	[REASON_BAD_REQUEST] =		{ "bad-request", D, 400, CMD },
	[REASON_URI_TOO_LONG] =		{ "uri-too-long", D, 414, CMD },
	[REASON_HEAD_TOO_LARGE] =	{ "header-too-large", D, 431, CMD },
	[REASON_METHOD_NOT_SUPPORTED] =	{ "method-not-supported", D, 405, CMD },
	[REASON_UPGRADE_REFUSED] =	{ "upgrade-refused", D, 403, NOT_ALLOWED },
	[REASON_DNS_ERROR] =		{ "dns-error", E, 502, HOST_UNREACH },
	[REASON_DNS_TYPE] =		{ "dns-type-refused", D, 403, NOT_ALLOWED },
	[REASON_UPSTREAM_CONNECT] =	{ "upstream-connect-error", E, 502, REFUSED },
	[REASON_UPSTREAM_TIMEOUT] =	{ "upstream-timeout", E, 504, HOST_UNREACH },
	[REASON_UPSTREAM_ERROR] =	{ "upstream-error", E, 502, FAIL },
	[REASON_UPSTREAM_ENCODING] =	{ "upstream-encoding", E, 502, FAIL },
	[REASON_UPSTREAM_PROTOCOL] =	{ "upstream-protocol", E, 502, FAIL },
	[REASON_UPSTREAM_TLS] =		{ "upstream-tls-error", E, 502, FAIL },
	[REASON_CLIENT_TLS] =		{ "client-tls-error", E, 502, FAIL },
	[REASON_CRED_MISUSE] =		{ "credential-misuse", D, 403, NOT_ALLOWED },
	[REASON_FOREIGN_CRED] =		{ "foreign-credential", D, 403, NOT_ALLOWED },
	[REASON_CRED_REQUIRED] =	{ "credential-required", D, 403, NOT_ALLOWED },
	[REASON_CRED_SCOPE] =		{ "credential-scope", D, 403, NOT_ALLOWED },
	[REASON_CRED_UNAVAILABLE] =	{ "credential-unavailable", E, 502, FAIL },
	[REASON_TOO_MANY_CONN] =	{ "too-many-connections", D, 503, NOT_ALLOWED },
	[REASON_RATE_LIMITED] =		{ "rate-limited", D, 429, NOT_ALLOWED },
	[REASON_HEAD_TIMEOUT] =		{ "head-timeout", D, 408, FAIL },
	[REASON_IDLE_TIMEOUT] =		{ "idle-timeout", E, 408, FAIL },
	[REASON_INTERNAL_ERROR] =	{ "internal-error", E, 502, FAIL },
	[REASON_PROTOCOL_BLOCKED] =	{ "protocol-blocked", D, 403, NOT_ALLOWED },
	[REASON_INGRESS_UNKNOWN_HOST] =	{ "ingress-unknown-host", D, 404, NOT_ALLOWED },
	[REASON_INGRESS_UNKNOWN_SANDBOX] = { "ingress-unknown-sandbox", D, 404, NOT_ALLOWED },
	[REASON_INGRESS_PORT] =		{ "ingress-port-not-published", D, 404, NOT_ALLOWED },
	[REASON_INGRESS_NOT_RUNNING] =	{ "sandbox-not-running", E, 503, NOT_ALLOWED },
	[REASON_INGRESS_TOKEN_MISSING] = { "ingress-token-missing", D, 401, NOT_ALLOWED },
	[REASON_INGRESS_TOKEN_INVALID] = { "ingress-token-invalid", D, 401, NOT_ALLOWED },
	[REASON_INGRESS_TOKEN_REDIRECT] = { "ingress-token-redirect", D, 302, NOT_ALLOWED },
	[REASON_WS_PROTOCOL] =		{ "websocket-protocol-error", D, 400, FAIL },
	[REASON_AUDIT_UNAVAILABLE] =	{ "audit-unavailable", E, 503, FAIL },
	[REASON_KEEPER_UNAVAILABLE] =	{ "keeper-unavailable", E, 503, FAIL },
	[REASON_RELAY_ERROR] =		{ "relay-error", E, 502, FAIL },
	[REASON_SYSCALL_REFUSED] =	{ "system-call-refused", E, 502, FAIL },
	[REASON_GIT_REF_DENIED] =	{ "git-ref-denied", D, 403, NOT_ALLOWED },
	[REASON_AWS_SIG_INVALID] =	{ "aws-signature-invalid", D, 403, NOT_ALLOWED },
	[REASON_AWS_CHUNKED] =	{ "aws-chunked-refused", D, 403, NOT_ALLOWED },
	[REASON_AWS_BODY] =		{ "aws-body-too-large", D, 413, NOT_ALLOWED },
	[REASON_AWS_SIG_UNSUPPORTED] =	{ "aws-signature-unsupported", D, 403, NOT_ALLOWED },
	[REASON_CRED_REFRESH_FAILED] =	{ "credential-refresh-failed", E, 502, FAIL },
	[REASON_SECRET_DETECTED] =	{ "secret-detected", D, 403, NOT_ALLOWED },
	[REASON_APPROVAL_DENIED] =	{ "approval-denied", D, 403, NOT_ALLOWED },
	[REASON_APPROVAL_TIMEOUT] =	{ "approval-timeout", D, 403, NOT_ALLOWED },
	[REASON_APPROVAL_LIMIT] =	{ "approval-limit", D, 429, NOT_ALLOWED },
	[REASON_CONTENT_UNSCANNABLE] =	{ "content-unscannable", D, 415, NOT_ALLOWED },
};

const struct reason_info *
reason_info(enum sg_reason r)
{
	if ((unsigned)r >= REASON_MAX)
		r = REASON_INTERNAL_ERROR;
	return &reasons[r];
}

const char *
reason_word(enum sg_reason r)
{
	return reason_info(r)->word;
}

int
reason_is_error(enum sg_reason r)
{
	return reason_info(r)->cls == REASON_CLASS_ERROR;
}

int
reason_status(enum sg_reason r)
{
	return reason_info(r)->status;
}

enum sg_verdict
reason_verdict(enum sg_reason r)
{
	return reason_is_error(r) ? VERDICT_ERROR : VERDICT_DENY;
}

static const char *const verdicts[VERDICT_MAX] = {
	[VERDICT_NONE] = NULL,
	[VERDICT_ALLOW] = "allow",
	[VERDICT_DENY] = "deny",
	[VERDICT_ERROR] = "error",
	[VERDICT_REPORT] = "report",
};

const char *
verdict_word(enum sg_verdict v)
{
	return (unsigned)v < VERDICT_MAX ? verdicts[v] : NULL;
}

enum sg_verdict
verdict_parse(const char *w)
{
	int v;

	for (v = VERDICT_NONE + 1; w != NULL && v < VERDICT_MAX; v++)
		if (strcmp(w, verdicts[v]) == 0)
			return (enum sg_verdict)v;
	return VERDICT_NONE;
}

static const char *const closes[CLOSE_MAX] = {
	[CLOSE_NONE] = "open",
	[CLOSE_DONE] = "done",
	[CLOSE_CLIENT_CLOSED] = "client-closed",
	[CLOSE_CLIENT_RESET] = "client-reset",
	[CLOSE_CLIENT_ERROR] = "client-error",
	[CLOSE_ORIGIN_ERROR] = "origin-error",
	[CLOSE_REFUSED] = "refused",
	[CLOSE_FAILED] = "failed",
	[CLOSE_TIMEOUT] = "timeout",
	[CLOSE_NO_MEMORY] = "out-of-memory",
	[CLOSE_SHUTDOWN] = "shutdown",
};

enum sg_close
reason_close(enum sg_reason r)
{
	if (r == REASON_HEAD_TIMEOUT || r == REASON_IDLE_TIMEOUT ||
	    r == REASON_UPSTREAM_TIMEOUT)
		return CLOSE_TIMEOUT;
	return reason_is_error(r) ? CLOSE_FAILED : CLOSE_REFUSED;
}

const char *
close_word(enum sg_close c)
{
	return (unsigned)c < CLOSE_MAX ? closes[c] : "unknown";
}
