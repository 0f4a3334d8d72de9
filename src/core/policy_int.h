/*
 * What the policy loader (policy_load.c) builds and the matcher
 * (policy_match.c) reads. Nothing outside src/core/policy_*.c includes this.
 */
#ifndef SG_POLICY_INT_H
#define SG_POLICY_INT_H

#include <stdatomic.h>

#include "core/policy.h"

struct policy_index;		/* policy_match.c: name table + cidr sets */

enum policy_rule_kind {
	RULE_HOST,		/* exact name or "*." wildcard */
	RULE_CIDR
};

struct policy_rule {
	enum policy_rule_kind kind;
	char		*host;		/* normalised; for a wildcard, the part after "*." */
	int		 wildcard;	/* "*.x" matches any depth below x, never x itself */
	struct cidr	 cidr;
	uint16_t	*ports;		/* n_ports == 0: any port (deny rules' default) */
	size_t		 n_ports;
	char		**methods;	/* upper-case; n_methods == 0: any */
	size_t		 n_methods;
	char		**paths;	/* globs; n_paths == 0: any */
	size_t		 n_paths;
	enum policy_tls	 tls;
	int		 opaque;
	int		 git;		/* a git: key: pushes are read (proxy_git.c) */
	char		**git_push;	/* ref globs a push may update; n == 0: none */
	size_t		 n_git_push;
	int		 git_delete;	/* a push may delete those refs */
	const char	*file;		/* points into struct policy's files[] */
	int		 line, col;
};

/* allow_private entries: a prefix, or a (wildcard) name whose answers may be internal. */
struct policy_private {
	int		 is_name;
	struct cidr	 cidr;
	char		*host;		/* normalised; wildcard part after "*." */
	int		 wildcard;
};

struct policy_def {
	char		*name;
	int		 report;	/* mode: report (policy_report_relaxes()) */
	int		 ask;		/* mode: ask: what no rule allows is asked (approval.h) */
	struct policy_rule *allow;
	size_t		 n_allow;
	struct policy_rule *deny;
	size_t		 n_deny;
	struct policy_private *priv;
	size_t		 n_priv;
	uint16_t	*dns_types;	/* DNS qtype numbers; default A, AAAA */
	size_t		 n_dns_types;
	char		(*country_deny)[3];	/* ISO 3166 alpha-2, upper-case */
	size_t		 n_country_deny;
	uint32_t	*asn_deny;
	size_t		 n_asn_deny;
	char		**credentials;	/* names of struct policy_credential */
	size_t		 n_credentials;
	struct policy_index *allow_idx;	/* built by policy_index_build() */
	struct policy_index *deny_idx;
	struct policy_index *priv_idx;
	const struct policy_credential **cred_ptrs;	/* credentials[] resolved */
	int		 implicit;	/* the built-in deny-all "default" */
	struct policy_dlp *dlp;		/* the dlp: key; NULL: none (off) */
};

struct policy_sandbox {
	char		 id[POLICY_ID_MAX + 1];
	char		*policy;
	int		 has_token;
	unsigned char	 token_sha256[32];
	struct cidr	*sources;
	size_t		 n_sources;
	int		 has_ingress;	/* the ingress: key (policy_load.c) */
	int		 ask;		/* ask: true -- what no rule allows is asked (approval.h) */
	struct policy_ingress ingress;
	const char	*file;
	int		 line, col;
};


struct policy {
	atomic_int	 refcnt;
	char		**files;	/* every file loaded, for diagnostics */
	size_t		 n_files;
	struct policy_def *defs;
	size_t		 n_defs;
	struct policy_sandbox *sandboxes;
	size_t		 n_sandboxes;
	struct policy_credential *creds;
	size_t		 n_creds;
	struct cidr_set	*source_idx;	/* sandbox source prefixes -> sandbox index */
};

/*
 * policy_match.c: build the lookup structures of every policy_def and the
 * sandbox source index once loading succeeded; free them with the policy.
 * Errors (e.g. two sandboxes with the same source) go to d.
 */
int	policy_index_build(struct policy *, struct diag *);
void	policy_index_free(struct policy *);

/* policy_names.c: policy_name_normalize and _canon are public (policy.h). */
/* Path glob: '*' matches any run of characters, '/' included. */
int	policy_glob_match(const char *glob, const char *s, size_t slen);

/*
 * policy_path.c: the canonical form path rules match (docs/policy.md, "Path
 * matching"). The path is cut at the first '?' or '#'; escapes of printable
 * ASCII other than '%', '?' and '#' are decoded, other escapes get
 * upper-case hex; dot segments are resolved and repeated slashes merged.
 * OK: out holds the canonical form (NUL-terminated, *olen bytes).
 * AMBIGUOUS: the path holds a sequence origin servers read in different
 * ways (encoded '/' or '\', a raw '\', encoded dots or ';' in a dot
 * segment, double encoding, NUL and other controls, invalid UTF-8, ...).
 * BAD: a malformed escape, a raw byte that cannot be in a request target,
 * or a canonical form longer than outlen - 2. out is "" unless OK.
 */
#define POLICY_PATH_MAX	8192

enum policy_path {
	POLICY_PATH_OK = 0,
	POLICY_PATH_AMBIGUOUS,
	POLICY_PATH_BAD
};

/* policy_dlp.c: the dlp: key into *out (errors to c), and its memory. */
struct ycheck;
struct ynode;
void	policy_dlp_load(struct ycheck *c, const struct ynode *n,
	    struct policy_dlp **out);
void	policy_dlp_free(struct policy_dlp *);

enum policy_path policy_path_canon(const char *in, size_t len, char *out,
	    size_t outlen, size_t *olen);

#endif
