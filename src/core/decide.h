/*
 * The one decision (docs/policy.md "How a decision is made") for every
 * listener: HTTP/1.1 and HTTP/2 requests, CONNECT, SOCKS5, the transparent
 * listener, requests inside tunnels, the DNS listener and `policy explain`.
 *
 * decide() is pure: it reads its arguments and the policy and writes *d,
 * nothing else -- no session, no socket, no clock, no lock. What lives
 * above core/ comes in as facts (is the audit store refusing rows, is the
 * key keeper up) and as one function passed down (does a destination name
 * carry an issued placeholder). Its stages, in order, first denial wins:
 *
 *   target     the destination as written, normalised (always recorded,
 *              escaped when invalid, for the audit row)
 *   audit      audit.on_failure: deny while audit.db takes no rows
 *   identity   no identity: no-identity
 *   name       an invalid host (or port 0 outside DNS): invalid-host;
 *              a request inside a tunnel must name the tunnel's host
 *   credential an issued placeholder inside the name: credential-misuse
 *   rules      deny and allow rules on host, port, method and path (DNS:
 *              the query type too); every other reading of the request
 *              (a method override, a WebDAV Destination) must pass too
 *   keeper     a CONNECT or SOCKS5 tunnel that will be intercepted needs
 *              the key keeper
 *   addresses  every address resolved (or the IP itself): internal ones
 *              outside allow_private, then countries and ASNs
 *
 * Ingress runs the same way toward a sandbox: audit, then the sandbox the
 * Host named (its identity for the row), its port, whether it runs, and
 * its token unless it is public (docs/ingress.md).
 *
 * The address stage runs only when addresses are given. A listener that
 * learns them later (after a lookup) continues the same decision with
 * decide_addrs(), which runs that stage alone on a decision that passed
 * the others.
 */
#ifndef SG_DECIDE_H
#define SG_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "core/netaddr.h"
#include "core/policy.h"
#include "core/reason.h"

struct geoip;

enum decide_listener {
	DECIDE_HTTP,		/* an absolute-form or HTTP/2 request */
	DECIDE_CONNECT,		/* a CONNECT tunnel, before its requests */
	DECIDE_SOCKS5,		/* a SOCKS5 CONNECT */
	DECIDE_TRANSPARENT,	/* a redirected connection: SNI, Host or address */
	DECIDE_TUNNEL,		/* a request inside a tunnel already decided */
	DECIDE_DNS,		/* a question to the DNS listener (any port) */
	DECIDE_INGRESS,		/* a request from outside to a sandbox's published port */
	DECIDE_OFFLINE		/* `policy explain`: no gateway state */
};

/* What the decision may ask of the gateway above core/. */
struct decide_env {
	const struct policy	*pol;
	const struct geoip	*geoip;		/* NULL: no databases */
	int			 audit_refuses;	/* audit.db takes no rows, on_failure: deny */
	int			 keeper_up;	/* the key keeper answers */
	/*
	 * 1 when host carries a placeholder the gateway issued (its credential's
	 * name into cred), 0 when not. NULL: no placeholders are issued.
	 */
	int			(*cred_in_name)(void *arg, const char *host,
				    char *cred, size_t credlen);
	void			*arg;
};

/* An authority (host[:port]) split by the front-end's parser. */
struct decide_authority {
	const char		*host;		/* NULL: it did not parse */
	size_t			 len;
	uint16_t		 port;		/* 0: none written */
};

/*
 * What a request may also be read as by an origin, each to be allowed too:
 * a method override (X-HTTP-Method-Override: DELETE on a POST) with the
 * request's path, a WebDAV Destination's path with the request's method.
 */
struct decide_alt {
	const char		*method;
	const char		*path;
};
#define DECIDE_ALT_MAX	8

struct decide_q {
	enum decide_listener	 listener;
	const struct policy_identity *id;	/* NULL: no identity */
	/* The destination as the client wrote it ... */
	const char		*host;
	size_t			 hostlen;
	uint16_t		 port;
	/* ... or (host NULL) one normalised already: a tunnel's. */
	const struct policy_target *target;
	const char		*method;	/* NULL: on host and port alone */
	const char		*path;
	const struct decide_alt	*alt;		/* n_alt more readings to allow */
	size_t			 n_alt;
	/* DECIDE_TUNNEL: the request's Host and its absolute target's authority. */
	const struct decide_authority *tunnel_host;	/* NULL: none, a mismatch */
	const struct decide_authority *tunnel_abs;	/* NULL: origin form */
	const char		*tunnel_rule;	/* the rule that opened the tunnel */
	/* DECIDE_DNS */
	uint16_t		 qtype;
	uint16_t		 qclass;
	/*
	 * DECIDE_INGRESS: the sandbox the Host named (target: that name and
	 * the port), and the token presented (NULL: none; malformed: one the
	 * parser rejected).
	 */
	const char		*ingress_id;
	const char		*token;
	size_t			 token_len;
	int			 token_malformed;
	/* The addresses to check now (n_addrs 0: later, or never). */
	const struct netaddr	*addrs;
	size_t			 n_addrs;
};

struct decision {
	enum sg_verdict		 verdict;	/* ALLOW, DENY or ERROR; REPORT when mode: report let a denial pass */
	enum sg_reason		 reason;	/* REASON_NONE when allowed */
	struct policy_verdict	 v;		/* rule, tls, opaque, inspect, report */
	struct policy_target	 target;	/* as written, escaped when invalid */
	int			 target_ok;	/* target is a valid destination */
	int			 cred_bound;	/* a credential of the sandbox is bound to the host */
	int			 intercept;	/* tls: intercept, or cred_bound */
	char			 cred[64];	/* the credential a misuse names */
	int			 has_refused;	/* the address stage refused ... */
	struct netaddr		 refused;	/* ... this address first */
	int			 geo_failed;	/* a geo lookup failed (corrupt database?) */
	/* DECIDE_INGRESS: the sandbox reached, once found, and what it publishes. */
	int			 has_ident;
	struct policy_identity	 ident;
	struct policy_ingress	 ingress;
};

/* Credentials a client presented: Proxy-Authorization Basic, SOCKS5 user/pass. */
struct decide_cred {
	const char		*id;		/* NULL: presented, but malformed */
	size_t			 idlen;
	const char		*token;
	size_t			 tokenlen;
};

/*
 * The identity stage (docs/policy.md step 1), where every listener
 * identifies a client: credentials presented decide -- wrong or malformed
 * ones are REASON_AUTH_FAILED even from a source address a sandbox owns;
 * without any (presented NULL) the source address does (src NULL: none to
 * go by); neither is REASON_NO_IDENTITY. *out filled when REASON_NONE.
 */
enum sg_reason	 decide_identify(const struct policy *,
		    const struct netaddr *src, const struct decide_cred *presented,
		    struct policy_identity *out);
/* Run every stage q gives the inputs for; returns d->reason. */
enum sg_reason	 decide(const struct decide_env *, const struct decide_q *,
		    struct decision *d);
/*
 * The address stage alone, for a decision that passed the others, now
 * that the addresses are known: returns d->reason.
 */
enum sg_reason	 decide_addrs(const struct decide_env *,
		    const struct policy_identity *, const struct netaddr *addrs,
		    size_t n, struct decision *d);
/*
 * t from a destination as written: normalised (1), or -- not a valid
 * destination -- its bytes escaped as one word of a log line (0), so that
 * a refused row never says null and no peer writes fields of its own.
 */
int		 decide_note_target(struct policy_target *t, const char *host,
		    size_t len, uint16_t port);
/*
 * The first-bytes stage of a tunnel decided by name or address (CONNECT,
 * SOCKS5): a ClientHello's SNI (has_sni 0: none) must name the tunnel's
 * target -- and be absent for a tunnel to an IP address.
 * REASON_NONE or REASON_SNI_MISMATCH.
 */
enum sg_reason	 decide_sni(const struct policy_target *tunnel, int has_sni,
		    const char *sni, size_t len);
/*
 * What a tunnel's first bytes turned out to be (CONNECT, SOCKS5,
 * transparent), for the first-bytes stage below.
 */
enum decide_bytes_kind {
	DECIDE_BYTES_TLS,	/* a ClientHello (or what began as one) */
	DECIDE_BYTES_HTTP,	/* a request head: each request is decided on its own */
	DECIDE_BYTES_OTHER,	/* neither, or nothing within the sniff time */
};

struct decide_bytes {
	enum decide_bytes_kind	 kind;
	/* TLS */
	int			 hello_ok;	/* the ClientHello parsed whole */
	int			 has_sni;
	const char		*sni;
	size_t			 sni_len;
	/*
	 * 1: the SNI is what named the target (transparent: there is no
	 * name asked for to compare it with); 0: it must name the tunnel's
	 * target (decide_sni).
	 */
	int			 sni_names;
	/* The credential hint: a credential of the sandbox is bound to the target. */
	int			 cred_bound;
};

/*
 * The first-bytes stage, once the tunnel's decision passed the others:
 * the bytes against the decision's inspection. A ClientHello that does not
 * parse is refused (protocol-not-allowed), and so is an SNI that does not
 * name the tunnel (sni-mismatch) or is an address where it names the
 * target (invalid-host) -- never relaxed by report mode, there is nothing
 * to see behind them. TLS is intercepted when the rule says so or a
 * credential is bound (*intercept 1, passed); TLS passed through cannot
 * show methods or paths (needs-intercept); a transparent ClientHello
 * without SNI passes only opaque (sni-missing); bytes neither TLS nor HTTP
 * pass only opaque (protocol-not-allowed). The last three are relaxed in
 * report mode (v->report set, REASON_NONE). Pure: v changes only there.
 */
enum sg_reason	 decide_first_bytes(struct policy_verdict *v,
		    const struct policy_target *t, const struct decide_bytes *b,
		    int *intercept);
/* 1 when a credential of id's policy is bound to target (never an IP). */
int		 decide_cred_bound(const struct policy *,
		    const struct policy_identity *, const struct policy_target *);

#endif
