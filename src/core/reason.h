/*
 * The fixed vocabulary of reasons (HAProxy's SF_ERR_* in spirit): each has
 * its word -- the same in the X-Sandgate-Reason header, the log line and
 * the audit row --, its class (a denial, or an error of something that was
 * allowed), its default HTTP status and its SOCKS5 reply. Nothing decides
 * on the words: code compares the enum.
 */
#ifndef SG_REASON_H
#define SG_REASON_H

#include <stdint.h>

enum sg_reason {
	REASON_NONE = 0,		/* allowed: no reason */
	REASON_NO_IDENTITY,		/* nothing identifies the client */
	REASON_AUTH_FAILED,		/* Proxy-Authorization present but wrong */
	REASON_UNKNOWN_POLICY,		/* sandbox names a policy that does not exist */
	REASON_POLICY_DENY,		/* a deny rule, or no allow rule */
	REASON_IP_PROHIBITED,		/* internal address, not in allow_private */
	REASON_COUNTRY_DENY,
	REASON_ASN_DENY,
	REASON_INVALID_HOST,
	REASON_NEEDS_INTERCEPT,		/* methods/paths rule, but TLS passed through */
	REASON_SNI_MISMATCH,
	REASON_SNI_MISSING,		/* transparent TLS without a name */
	REASON_HOST_MISMATCH,
	REASON_PROTOCOL_DENY,		/* non-TLS, non-HTTP tunnel without opaque */
	REASON_AMBIGUOUS_PATH,		/* a path servers read differently */
	REASON_BAD_REQUEST,
	REASON_URI_TOO_LONG,
	REASON_HEAD_TOO_LARGE,
	REASON_METHOD_NOT_SUPPORTED,
	REASON_UPGRADE_REFUSED,		/* an upgrade the gateway cannot inspect */
	REASON_DNS_ERROR,
	REASON_DNS_TYPE,		/* query type outside dns_types */
	REASON_UPSTREAM_CONNECT,
	REASON_UPSTREAM_TIMEOUT,
	REASON_UPSTREAM_ERROR,
	REASON_UPSTREAM_ENCODING,	/* a coding the gateway cannot relay or scrub */
	REASON_UPSTREAM_PROTOCOL,	/* needs a protocol toward the origin the gateway lacks (gRPC) */
	REASON_UPSTREAM_TLS,
	REASON_CLIENT_TLS,
	REASON_CRED_MISUSE,
	REASON_FOREIGN_CRED,
	REASON_CRED_REQUIRED,		/* require: true, no placeholder swapped */
	REASON_CRED_SCOPE,		/* placeholder outside the credential's scope */
	REASON_CRED_UNAVAILABLE,	/* the vault lacks the secret */
	REASON_TOO_MANY_CONN,
	REASON_RATE_LIMITED,		/* over a limits.per_sandbox limit */
	REASON_HEAD_TIMEOUT,		/* a request head not complete within head_timeout */
	REASON_IDLE_TIMEOUT,
	REASON_INTERNAL_ERROR,		/* a broken invariant, failed closed */
	REASON_PROTOCOL_BLOCKED,	/* a sandbox's UDP/ICMP/other packet, dropped by its rules */
	REASON_INGRESS_UNKNOWN_HOST,
	REASON_INGRESS_UNKNOWN_SANDBOX,
	REASON_INGRESS_PORT,
	REASON_INGRESS_NOT_RUNNING,
	REASON_INGRESS_TOKEN_MISSING,
	REASON_INGRESS_TOKEN_INVALID,
	REASON_INGRESS_TOKEN_REDIRECT,	/* not a refusal: the token became a cookie */
	REASON_WS_PROTOCOL,		/* a malformed WebSocket frame */
	REASON_AUDIT_UNAVAILABLE,	/* audit.db cannot take rows; on_failure: deny */
	REASON_KEEPER_UNAVAILABLE,	/* the key keeper is down or not answering */
	REASON_RELAY_ERROR,		/* the gateway lost bytes it was relaying (its own fault) */
	REASON_SYSCALL_REFUSED,		/* the seccomp filter refused a call the session needed */
	REASON_GIT_REF_DENIED,		/* a git push to a ref its rule's git: does not allow */
	REASON_AWS_SIG_INVALID,		/* the placeholder's SigV4 signature does not verify */
	REASON_AWS_CHUNKED,		/* aws-chunked signed chunks: not re-signed */
	REASON_AWS_BODY,		/* a body to hash that is too large or not buffered */
	REASON_AWS_SIG_UNSUPPORTED,	/* SigV4a, malformed, a signed header not forwarded */
	REASON_CRED_REFRESH_FAILED,	/* kind oauth2: no access token could be had */
	REASON_SECRET_DETECTED,		/* dlp: block found a secret going out */
	REASON_APPROVAL_DENIED,		/* mode: ask: the operator said no */
	REASON_APPROVAL_TIMEOUT,	/* mode: ask: nobody answered within approval.timeout */
	REASON_APPROVAL_LIMIT,		/* mode: ask: approval.max_pending questions already */
	REASON_CONTENT_UNSCANNABLE,	/* dlp: block: a request body in a coding it cannot read */
	REASON_MAX
};

enum reason_class {
	REASON_CLASS_NONE,		/* REASON_NONE */
	REASON_CLASS_DENY,		/* the policy, or the request, said no */
	REASON_CLASS_ERROR		/* something allowed failed on its way */
};

struct reason_info {
	const char		*word;
	enum reason_class	 cls;
	int			 status;	/* HTTP status when nothing says otherwise */
	uint8_t			 socks_rep;	/* RFC 1928 reply code */
};

const struct reason_info *reason_info(enum sg_reason);
/* The word; NULL for REASON_NONE. */
const char	*reason_word(enum sg_reason);
int		 reason_is_error(enum sg_reason);
int		 reason_status(enum sg_reason);
/* "deny" or "error", the audit row's decision for a refusal. */
enum sg_verdict	 reason_verdict(enum sg_reason);

/*
 * The audit row's decision: its word, once, in verdict_word's table; the
 * code compares the enum. VERDICT_NONE is stored as NULL.
 */
enum sg_verdict {
	VERDICT_NONE = 0,
	VERDICT_ALLOW,
	VERDICT_DENY,		/* the policy, or the request, said no */
	VERDICT_ERROR,		/* something allowed failed on its way */
	VERDICT_REPORT,		/* a denial that mode: report let pass */
	VERDICT_MAX
};

/* The word; NULL for VERDICT_NONE (and anything out of range). */
const char	*verdict_word(enum sg_verdict);
/* The verdict a word names (a stored row's), VERDICT_NONE for none. */
enum sg_verdict	 verdict_parse(const char *);

/*
 * How a session ended, for its close line (the row has the reason of a
 * refusal or an error; this only says which way the connection went).
 */
enum sg_close {
	CLOSE_NONE = 0,		/* not closed yet */
	CLOSE_DONE,		/* both ways ended, everything written */
	CLOSE_CLIENT_CLOSED,	/* the client went before its answer */
	CLOSE_CLIENT_RESET,	/* an HTTP/2 client reset the stream */
	CLOSE_CLIENT_ERROR,	/* the client's side failed */
	CLOSE_ORIGIN_ERROR,	/* the origin's side failed */
	CLOSE_REFUSED,		/* answered with a refusal */
	CLOSE_FAILED,		/* ended on an error its row names */
	CLOSE_TIMEOUT,		/* head_timeout or idle_timeout */
	CLOSE_NO_MEMORY,
	CLOSE_SHUTDOWN,		/* the gateway stopped */
	CLOSE_MAX
};

const char	*close_word(enum sg_close);
/* How a session that ends for reason r closes: refused, failed, timed out. */
enum sg_close	 reason_close(enum sg_reason r);

#endif
