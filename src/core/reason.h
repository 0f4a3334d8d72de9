/*
 * The fixed vocabulary of reasons: the same word goes into the HTTP
 * X-Sandgate-Reason header, the log line and the audit row.
 */
#ifndef SG_REASON_H
#define SG_REASON_H

#define REASON_NO_IDENTITY	"no-identity"		/* nothing identifies the client */
#define REASON_AUTH_FAILED	"proxy-auth-failed"	/* Proxy-Authorization present but wrong */
#define REASON_UNKNOWN_POLICY	"unknown-policy"	/* sandbox names a policy that does not exist */
#define REASON_POLICY_DENY	"policy-deny"		/* a deny rule, or no allow rule */
#define REASON_IP_PROHIBITED	"destination-ip-prohibited" /* internal address, not in allow_private */
#define REASON_COUNTRY_DENY	"country-deny"
#define REASON_ASN_DENY		"asn-deny"
#define REASON_INVALID_HOST	"invalid-host"
#define REASON_NEEDS_INTERCEPT	"needs-intercept"	/* methods/paths rule, but TLS passed through */
#define REASON_SNI_MISMATCH	"sni-mismatch"
#define REASON_SNI_MISSING	"sni-missing"		/* transparent TLS without a name */
#define REASON_HOST_MISMATCH	"host-mismatch"
#define REASON_PROTOCOL_DENY	"protocol-not-allowed"	/* non-TLS, non-HTTP tunnel without opaque */
#define REASON_BAD_REQUEST	"bad-request"
#define REASON_URI_TOO_LONG	"uri-too-long"
#define REASON_HEAD_TOO_LARGE	"header-too-large"
#define REASON_DNS_ERROR	"dns-error"
#define REASON_DNS_TYPE		"dns-type-refused"	/* query type outside dns_types */
#define REASON_UPSTREAM_CONNECT	"upstream-connect-error"
#define REASON_UPSTREAM_TIMEOUT	"upstream-timeout"
#define REASON_UPSTREAM_ERROR	"upstream-error"
#define REASON_UPSTREAM_ENCODING "upstream-encoding"	/* a coding the gateway cannot relay or scrub */
#define REASON_UPSTREAM_TLS	"upstream-tls-error"
#define REASON_CLIENT_TLS	"client-tls-error"
#define REASON_CRED_MISUSE	"credential-misuse"
#define REASON_FOREIGN_CRED	"foreign-credential"
#define REASON_CRED_UNAVAILABLE	"credential-unavailable"	/* the vault lacks the secret */
#define REASON_TOO_MANY_CONN	"too-many-connections"
#define REASON_IDLE_TIMEOUT	"idle-timeout"
#define REASON_METHOD_NOT_SUPPORTED "method-not-supported"
#define REASON_INTERNAL_ERROR	"internal-error"	/* a broken invariant, failed closed */
#define REASON_UPGRADE_REFUSED	"upgrade-refused"	/* a protocol other than WebSocket to a credential's host */
#define REASON_WS_PROTOCOL	"websocket-protocol-error"	/* a malformed or out-of-order WebSocket frame */
#define REASON_PROTOCOL_BLOCKED	"protocol-blocked"	/* a sandbox's UDP/ICMP/other packet, dropped by its rules */

#endif
