/*
 * The policy engine's public face: load the policy documents (docs/policy.md),
 * identify a client as a sandbox, and decide. A struct policy is immutable
 * once loaded and reference-counted, so a reload swaps one pointer while
 * live sessions finish on the policy they started with.
 */
#ifndef SG_POLICY_H
#define SG_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/diag.h"
#include "core/netaddr.h"
#include "core/reason.h"

struct policy;

#define POLICY_ID_MAX		40	/* [a-z0-9][a-z0-9-]{0,39} */
#define POLICY_NAME_MAX		63
#define POLICY_HOST_MAX		253
/*
 * The policy the launcher registers a sandbox under without --policy. When
 * no loaded policy has this name the gateway has an implicit one that
 * allows nothing, so policy_has() is always true for it.
 */
#define POLICY_DEFAULT_NAME	"default"

/* Every policy file named by the config (files, or directories of *.yaml in name order). */
struct policy	*policy_load(const struct config *, struct diag *);
/* The same for an explicit list of files or directories (tests, benchmarks). */
struct policy	*policy_load_paths(char *const *paths, int n, struct diag *);
/* A reference taken or dropped; NULL: nothing. */
void		 policy_ref(struct policy *);
void		 policy_unref(struct policy *);
/* "3 files, 2 sandboxes, 1 policy, 12 rules, 1 credential" */
void		 policy_summary(const struct policy *, char *buf, size_t len);
/* The same as numbers (policies: defined ones, not the implicit "default"). */
struct policy_counts {
	size_t		 files, sandboxes, policies, rules, credentials;
	size_t		 report;	/* policies in mode: report */
};
void		 policy_counts(const struct policy *, struct policy_counts *);

/* Who a client is: a plain value a session copies. */
struct policy_identity {
	char	sandbox[POLICY_ID_MAX + 1];
	char	policy[POLICY_NAME_MAX + 1];
	int	ask;	/* the static sandbox says ask: true (docs/approvals.md) */
};

/* 1 when id[0..len) is a sandbox id: [a-z0-9][a-z0-9-]{0,39}. */
int	policy_valid_id(const char *id, size_t len);
/*
 * 0 and *out filled when a sandbox has src: a registered one (below) first,
 * then the static sandbox whose source prefix covering it is the longest;
 * -1 otherwise. policy_static_source: the static sandboxes alone.
 */
int	policy_identify_source(const struct policy *, const struct netaddr *src,
	    struct policy_identity *out);
int	policy_static_source(const struct policy *, const struct netaddr *src,
	    struct policy_identity *out);
/*
 * Proxy auth (Basic id:token, SOCKS5 user/pass): 0 when the sandbox exists,
 * has a token_sha256 and SHA-256(token) matches (constant-time); -1 otherwise.
 */
int	policy_identify_token(const struct policy *, const char *id, size_t idlen,
	    const char *token, size_t tokenlen, struct policy_identity *out);
/* For `policy explain --sandbox ID`: 0 when a static sandbox has that id. */
int	policy_identity_by_id(const struct policy *, const char *id,
	    struct policy_identity *out);

/*
 * The one host-name normaliser, for policies, targets, the resolver's
 * cache and leaf certificates: lower-case, drop one trailing dot, convert
 * U-labels to A-labels (punycode), check LDH syntax (underscores allowed,
 * as real DNS has them; no label starting or ending in '-'). A name ending
 * in a number is an IPv4 form, not a name. Returns the length written to
 * out (NUL-terminated), or -1 when the name is invalid.
 */
int	policy_name_normalize(const char *in, size_t len, char *out, size_t outlen);
/* The same with flags: */
#define POLICY_NAME_ASCII	0x01	/* A-labels only: a U-label is refused */
#define POLICY_NAME_NUMERIC	0x02	/* a name may end in a number */
int	policy_name_canon(const char *in, size_t len, char *out, size_t outlen,
	    int flags);

/* A destination, normalised once. */
struct policy_target {
	char		host[POLICY_HOST_MAX + 1];	/* lower-case name without trailing dot, A-labels; or canonical IP text */
	int		is_ip;
	struct netaddr	ip;				/* when is_ip */
	uint16_t	port;
};

/*
 * Normalise host[0..len) (brackets around IPv6 allowed) into t. Names are
 * lower-cased, lose one trailing dot and have U-labels converted to A-labels;
 * any IP literal form becomes is_ip. -1 for a name that is not a valid
 * host name (empty labels, bad characters, over 253 bytes).
 */
int	policy_target_init(struct policy_target *t, const char *host, size_t len,
	    uint16_t port);

enum policy_tls {
	POLICY_TLS_PASSTHROUGH = 0,
	POLICY_TLS_INTERCEPT
};

struct policy_verdict {
	int		 allow;		/* 1 allow (so far), 0 deny */
	char		 rule[POLICY_NAME_MAX + 24]; /* "P:allow[N]", "P:deny[N]", "default-deny", "no-identity" */
	enum sg_reason	 reason;	/* REASON_NONE while allowed */
	/* Set from the allow rule that matched: */
	char		 allow_rule[POLICY_NAME_MAX + 24]; /* "P:allow[N]" whatever rule names the verdict (a report's deny, a dlp finding); "" none */
	enum policy_tls	 tls;
	int		 opaque;
	int		 inspect;	/* the rule limits methods or paths: each request must be seen */
	/*
	 * mode: report. report_mode: the sandbox's policy is in report mode.
	 * report: REASON_NONE, or the denial the policy would have made
	 * (rule then names the rule that would have made it) while allow
	 * stays 1: the traffic passes and is audited with decision report.
	 */
	int		 report_mode;
	enum sg_reason	 report;
	/*
	 * mode: ask: 1 when no rule allowed it (default-deny, not a deny
	 * rule) in a policy in mode: ask -- the listener holds the request
	 * and asks an operator (docs/approvals.md) instead of refusing.
	 */
	int		 ask;
};

/*
 * 1 when mode: report may let a denial for r pass: what the policy
 * document decides (deny and allow rules, opaque, tls for methods/paths,
 * SNI-less TLS, countries, asns). Never the gateway's own guarantees:
 * identity, internal addresses, credentials, SNI/Host agreement, ambiguous
 * paths, malformed traffic, limits, dns_types (docs/policy.md, "mode").
 */
int	policy_report_relaxes(enum sg_reason r);
/*
 * A denial for r about to be made on v: in report mode, and for a reason
 * report mode relaxes, record it as v's report (the first one stays) and
 * return 1 (let it pass); 0 otherwise (deny).
 */
int	policy_verdict_report(struct policy_verdict *v, enum sg_reason r);

/*
 * Steps 1-3 of the decision order. id NULL: no identity. method and path
 * NULL: decide on host and port alone (a tunnel before its requests are
 * seen); otherwise the path's query ("?...") is ignored. Always fills v;
 * returns v->allow.
 */
int	policy_decide(const struct policy *, const struct policy_identity *id,
	    const struct policy_target *, const char *method, const char *path,
	    struct policy_verdict *v);
/*
 * Step 4 for an allowed verdict: every address the target resolved to (or
 * the IP target itself) must be globally reachable or covered by the
 * policy's allow_private. Any one that is not denies the whole answer
 * (reason destination-ip-prohibited). Returns v->allow.
 */
int	policy_check_addrs(const struct policy *, const struct policy_identity *id,
	    const struct policy_target *, const struct netaddr *addrs, size_t n,
	    struct policy_verdict *v);

/*
 * A credential (docs/policy.md, docs/credentials.md): which vault entry is
 * swapped in where. Read only; lives as long as the policy it came from.
 */
/* What a credential holds and how it is put into a request (kind:). */
enum policy_cred_kind {
	POLICY_CRED_STATIC,	/* a string swapped for its placeholder */
	POLICY_CRED_AWS_SIGV4,	/* KEYID:SECRET[:TOKEN], requests re-signed */
	POLICY_CRED_OAUTH2	/* tokens the gateway obtains and refreshes */
};

/* kind: oauth2 (docs/credentials.md "OAuth 2.0"): how tokens are obtained. */
enum policy_oauth2_grant {
	POLICY_OAUTH2_REFRESH_TOKEN,
	POLICY_OAUTH2_CLIENT_CREDENTIALS
};
struct policy_oauth2 {
	char		*token_url;	/* https://host[:port]/path as written */
	char		*host;		/* its host, normalised (an IP as text) */
	int		 host_is_ip;
	uint16_t	 port;
	char		*path;		/* "/..." with any query */
	enum policy_oauth2_grant grant;
	char		*scope;		/* NULL: none sent */
	int		 client_auth_body;	/* 0: HTTP Basic */
	uint64_t	 refresh_before_ms;
	/* Snapshot names of the tokens ("SECRET#access", "SECRET#refresh"). */
	char		*access_name;
	char		*was_name;	/* "SECRET#prev": the one before, unexpired */
	char		*refresh_name;
	/* ... of the client's secret ("SECRET#client") and Basic ("#basic"). */
	char		*client_name;
	char		*basic_name;
};

struct policy_credential {
	char		*name;
	enum policy_cred_kind kind;
	struct policy_oauth2 *oauth2;	/* kind oauth2 only */
	char		*secret;	/* vault entry name, not the value */
	/* "SECRET#prev": its value before the last rotation (kind static) */
	char		*prev_name;
	char		**hosts;	/* normalised names */
	size_t		 n_hosts;
	char		**headers;	/* default: Authorization */
	size_t		 n_headers;
	int		 query;
	int		 exclusive;	/* default 1 */
	char		*env;		/* NULL: none */
	char		*secret_env;	/* aws_sigv4: the secret placeholder's; NULL: none */
	char		*placeholder;	/* NULL: random per sandbox */
	int		 require;	/* a request without the placeholder is refused */
	char		**scope_methods;	/* where it is swapped; 0: any */
	size_t		 n_scope_methods;
	char		**scope_paths;	/* canonical globs, as allow paths; 0: any */
	size_t		 n_scope_paths;
	/* placeholder_shape (docs/credentials.md); shape_prefix NULL: none */
	char		*shape_prefix;
	size_t		 shape_length;	/* in all, the prefix included */
	const char	*shape_alphabet;	/* its characters (static) */
	const char	*shape_alphabet_name;
};

/*
 * The oauth2: map of a credential (policy_oauth2.c), errors at their
 * line through c; NULL on any error. And its freeing.
 */
struct ycheck;
struct ynode;
struct policy_oauth2 *policy_oauth2_parse(struct ycheck *c,
	    const struct ynode *n);
/* The snapshot names, once the credential's secret is known: 0 or -1. */
int	policy_oauth2_names(struct policy_oauth2 *, const char *secret);
void	policy_oauth2_free(struct policy_oauth2 *);

/* A query type named as dns_types names it ("AAAA"): 0 and *out, or -1. */
int	policy_qtype_by_name(const char *, uint16_t *out);

/* "static", "aws_sigv4", "oauth2" */
const char *policy_cred_kind_name(enum policy_cred_kind);

/* The credentials the named policy lists (NULL and *n = 0 when none). */
const struct policy_credential *const *policy_credentials(const struct policy *,
	    const char *policy_name, size_t *n);
/* 1 when a policy of that name exists. */
int	policy_has(const struct policy *, const char *policy_name);
/* Every credential of every policy. */
const struct policy_credential *policy_all_credentials(const struct policy *,
	    size_t *n);
/* 1 when host (normalised) is one of c's hosts. */
int	policy_credential_bound(const struct policy_credential *c, const char *host);
/*
 * 1 when a request (method, path as sent, query or not; not NUL-ended) is in
 * c's scope: its method among scope_methods (exactly) and its path, in the
 * canonical form allow rules match (policy_path.c), matched by one of
 * scope_paths. A path that is ambiguous or malformed is outside any path
 * scope. No scope: 1. policy_cred_scope.c
 */
int	policy_credential_in_scope(const struct policy_credential *c,
	    const char *method, size_t mlen, const char *path, size_t plen);
/* 1 when name is one of c's headers (case-insensitive). */
int	policy_credential_header(const struct policy_credential *c,
	    const char *name, size_t len);
/* What an allow rule limits; arrays point into the policy. n == 0: any. */
struct policy_rule_scope {
	const char *const *methods;
	size_t		 n_methods;
	const char *const *paths;	/* globs, as policy_path matches them */
	size_t		 n_paths;
	enum policy_tls	 tls;
	int		 git;		/* the rule has a git: key */
	const char *const *git_push;	/* ref globs ('*' matches '/' too) */
	size_t		 n_git_push;
	int		 git_delete;
};
/* The scope of the allow rule named rule ("POLICY:allow[N]"); -1 for any
 * other name (a deny rule, default-deny, ...). policy_scope.c */
int	policy_rule_scope(const struct policy *, const char *rule,
	    struct policy_rule_scope *out);
/*
 * 1 when a git push under scope may do op to ref[0..len): the ref matches
 * one of its push globs, and a delete needs delete: true. policy_scope.c
 */
#define POLICY_GIT_CREATE	0
#define POLICY_GIT_UPDATE	1
#define POLICY_GIT_DELETE	2
int	policy_git_ref_allowed(const struct policy_rule_scope *scope, int op,
	    const char *ref, size_t len);
/* Static sandboxes: calls cb(sandbox id, policy name) for each. */
void	policy_foreach_sandbox(const struct policy *,
	    void (*cb)(const char *id, const char *policy, void *arg), void *arg);

/*
 * Dynamic sandboxes (policy_registry.c), registered by the launcher through
 * the admin API: one exact source address each. policy_identify_source()
 * and policy_identity_by_id() consult them before the static sandboxes.
 * Thread-safe. 0, or -1 (duplicate id or address, unknown id).
 */
int	policy_registry_add(const char *id, const char *policy,
	    const struct netaddr *source, int64_t created);
int	policy_registry_remove(const char *id);
int	policy_registry_lookup(const struct netaddr *src,
	    struct policy_identity *out);
int	policy_registry_by_id(const char *id, struct policy_identity *out,
	    struct netaddr *source);
void	policy_registry_foreach(void (*cb)(const struct policy_identity *,
	    const struct netaddr *source, int64_t created, void *arg), void *arg);
void	policy_registry_clear(void);

/*
 * Ingress (docs/ingress.md): what a sandbox publishes. A plain value, copied
 * out of the policy (static sandboxes, `ingress:` key) or the registry (dynamic
 * ones, POST /v1/sandboxes). The token is kept only as its SHA-256.
 */
#define POLICY_INGRESS_MAX_PORTS	32

struct policy_ingress {
	struct netaddr	 address;	/* the guest address proxied to */
	uint16_t	 ports[POLICY_INGRESS_MAX_PORTS];	/* published */
	size_t		 n_ports;
	int		 is_public;	/* no token needed */
	int		 has_token;
	unsigned char	 token_sha256[32];
	int		 running;	/* 0: the launcher said its command ended */
};

/*
 * The ingress of sandbox id: a dynamic sandbox first, then the static ones
 * of pol. 0 and *out (and *ident when not NULL) filled when the sandbox
 * exists and publishes ports; -1 otherwise.
 */
int	policy_ingress_find(const struct policy *, const char *id,
	    struct policy_ingress *out, struct policy_identity *ident);
/* 1 when port is one of ing's published ports. */
int	policy_ingress_has_port(const struct policy_ingress *, uint16_t port);
/* 1 when SHA-256(token) is ing's token hash (constant time); 0 otherwise. */
int	policy_ingress_token_ok(const struct policy_ingress *,
	    const char *token, size_t len);
/* "64 hex digits" into 32 bytes: 0, or -1 when s is not exactly that. */
int	policy_sha256_hex_parse(const char *s, unsigned char out[32]);
/*
 * Dynamic sandboxes' ingress: registered together with the sandbox (ing
 * NULL: none), and the running flag the launcher clears when its command
 * ended. 0, or -1 for an unknown id (or one without ingress for _get).
 */
int	policy_registry_add_ingress(const char *id, const char *policy,
	    const struct netaddr *source, int64_t created,
	    const struct policy_ingress *ing);
int	policy_registry_set_running(const char *id, int running);
int	policy_registry_ingress(const char *id, struct policy_ingress *out);

/*
 * The DNS listener's question: may this sandbox learn the addresses of
 * t->host (any port) with query type qtype? 1 allow, 0 deny (answer
 * NXDOMAIN), -1 refuse (the type is not in dns_types, or no identity).
 */
int	policy_decide_dns(const struct policy *, const struct policy_identity *id,
	    const struct policy_target *t, uint16_t qtype, struct policy_verdict *v);

/*
 * Step 5: countries / asns deny rules of the sandbox's policy for one
 * address's geo data (country "" or NULL and asn 0 mean unknown, which no
 * rule denies). 1 allow, 0 deny (v->reason REASON_COUNTRY_DENY or
 * REASON_ASN_DENY, v->rule unchanged).
 */
int	policy_check_geo(const struct policy *, const struct policy_identity *,
	    const char *country, uint32_t asn, struct policy_verdict *v);

/*
 * A policy's dlp: key (docs/dlp.md, policy_dlp.c): outbound secret
 * detection. Read only; lives as long as the policy.
 */
enum policy_dlp_mode {
	POLICY_DLP_OFF = 0,
	POLICY_DLP_REPORT,	/* findings audited, traffic passes */
	POLICY_DLP_BLOCK	/* a finding refuses the request (secret-detected) */
};

struct dlp_set;
struct policy_dlp_allow {
	char		*host;		/* normalised; NULL: any */
	int		 wildcard;	/* "*.host": names below host */
	char		*path;		/* glob over the path as sent; NULL: any */
	char		*rule;		/* a rule id; NULL: every rule */
};

struct policy_dlp {
	enum policy_dlp_mode	 mode;
	struct dlp_set		*set;	/* compiled at load; NULL when off */
	struct policy_dlp_allow	*allow;
	size_t			 n_allow;
};

/* The named policy's dlp when it scans (mode report or block); else NULL. */
const struct policy_dlp *policy_dlp_of(const struct policy *,
	    const char *policy_name);
/*
 * 1 when an allow entry exempts a request to host (normalised) and path
 * (as sent, the query ignored) from rule (NULL: from every rule, i.e. an
 * entry without rule:); d NULL: 1.
 */
int	policy_dlp_exempt(const struct policy_dlp *d, const char *host,
	    const char *path, const char *rule);
const char *policy_dlp_mode_word(enum policy_dlp_mode);

#endif
