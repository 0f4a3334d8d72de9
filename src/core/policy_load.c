/*
 * Loads the policy documents of docs/policy.md (sandboxes, policies,
 * credentials) into the immutable, reference-counted struct policy of
 * policy_int.h: every key checked, every error reported at its FILE:LINE:COL,
 * names global across files. Owns the policy's memory; the matcher owns its
 * indexes.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/util.h"
#include "core/hash.h"
#include "core/policy_int.h"
#include "core/yaml_tree.h"
#include "parse/pktline.h"

#define PL_MAX_FILES		4096
#define PL_MAX_PATH		4096
#define PL_MAX_GLOB		2048
#define PL_MAX_METHOD		32
#define PL_MAX_HEADER		128
#define PL_MAX_ENV		128
#define PL_MIN_PLACEHOLDER	16
#define PL_MAX_PLACEHOLDER	256
#define PL_MIN_SHAPE_PREFIX	3
#define PL_MAX_SHAPE_PREFIX	32	/* CRED_PHS_PREFIX_MAX */
#define PL_MAX_SHAPE_LENGTH	128	/* CRED_PHS_SHAPED_MAX */

/* A single value may stand for a one-item list. */
#define PL_FOREACH(it, n)						\
	for ((it) = (n)->type == YNODE_SEQ ? (n)->first : (n);		\
	    (it) != NULL;						\
	    (it) = (n)->type == YNODE_SEQ ? (it)->next : NULL)

struct pl_pos {
	const char	*file;
	int		 line, col;
};

/* A name to resolve once every file has been read. */
struct pl_ref {
	const char	*name;		/* owned by the policy */
	const char	*owner;		/* owned by the policy */
	struct pl_pos	 pos;
};

struct pl_hash_ent {
	char		*key;
	size_t		 val;
};

/* String -> index, owning copies of its keys: O(1) duplicate checks. */
struct pl_hash {
	struct pl_hash_ent *v;
	size_t		 cap;
	size_t		 n;
};

struct pload {
	struct policy	*p;
	struct diag	*d;
	struct ycheck	 c;		/* c.file: the file being read */
	size_t		 cap_files, cap_defs, cap_sb, cap_creds;
	size_t		 cap_def_pos, cap_cred_pos;
	struct pl_pos	*def_pos;	/* parallel to p->defs */
	struct pl_pos	*cred_pos;	/* parallel to p->creds */
	struct pl_hash	 h_defs, h_sb, h_creds, h_ph;
	struct pl_ref	*sb_refs, *cred_refs;
	size_t		 n_sb_refs, cap_sb_refs, n_cred_refs, cap_cred_refs;
};

static const struct {
	const char	*name;
	uint16_t	 qtype;
} pl_qtypes[] = {
	{ "A", 1 }, { "NS", 2 }, { "CNAME", 5 }, { "SOA", 6 },
	{ "PTR", 12 }, { "HINFO", 13 }, { "MX", 15 }, { "TXT", 16 },
	{ "AAAA", 28 }, { "SRV", 33 }, { "NAPTR", 35 }, { "DS", 43 },
	{ "SSHFP", 44 }, { "DNSKEY", 48 }, { "TLSA", 52 }, { "SVCB", 64 },
	{ "HTTPS", 65 }, { "CAA", 257 },
};

int
policy_qtype_by_name(const char *s, uint16_t *out)
{
	size_t i;

	for (i = 0; s != NULL && i < sizeof(pl_qtypes) / sizeof(pl_qtypes[0]); i++)
		if (strcmp(s, pl_qtypes[i].name) == 0) {
			*out = pl_qtypes[i].qtype;
			return 0;
		}
	return -1;
}

/* Unkeyed: the keys are names the operator wrote in the policy. */
static uint64_t
pl_fnv(const char *s)
{
	return hash_fnv1a(s, strlen(s));
}

static int
pl_hash_get(const struct pl_hash *h, const char *key, size_t *val)
{
	size_t i;

	if (h->cap == 0)
		return 0;
	for (i = pl_fnv(key) & (h->cap - 1); h->v[i].key != NULL;
	    i = (i + 1) & (h->cap - 1))
		if (strcmp(h->v[i].key, key) == 0) {
			*val = h->v[i].val;
			return 1;
		}
	return 0;
}

/* 0 inserted, 1 present already (*old set), -1 out of memory. */
static int
pl_hash_put(struct pl_hash *h, const char *key, size_t val, size_t *old)
{
	struct pl_hash_ent *nv;
	size_t i, j, ncap;

	if (pl_hash_get(h, key, old))
		return 1;
	if ((h->n + 1) * 2 > h->cap) {
		ncap = h->cap ? h->cap * 2 : 64;
		if ((nv = calloc(ncap, sizeof(*nv))) == NULL)
			return -1;
		for (i = 0; i < h->cap; i++) {
			if (h->v[i].key == NULL)
				continue;
			for (j = pl_fnv(h->v[i].key) & (ncap - 1);
			    nv[j].key != NULL; j = (j + 1) & (ncap - 1))
				;
			nv[j] = h->v[i];
		}
		free(h->v);
		h->v = nv;
		h->cap = ncap;
	}
	for (i = pl_fnv(key) & (h->cap - 1); h->v[i].key != NULL;
	    i = (i + 1) & (h->cap - 1))
		;
	if ((h->v[i].key = strdup(key)) == NULL)
		return -1;
	h->v[i].val = val;
	h->n++;
	return 0;
}

static void
pl_hash_free(struct pl_hash *h)
{
	size_t i;

	for (i = 0; i < h->cap; i++)
		free(h->v[i].key);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* Make room for one more element of an array that grows by doubling. */
static int
pl_grow(void **v, size_t *cap, size_t n, size_t elsz)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	if ((nv = realloc(*v, ncap * elsz)) == NULL)
		return -1;
	memset((char *)nv + *cap * elsz, 0, (ncap - *cap) * elsz);
	*v = nv;
	*cap = ncap;
	return 0;
}

static void
pl_oom(struct pload *l, const struct ynode *n)
{
	ycheck_err(&l->c, n, "out of memory");
}

static char *
pl_strdup(struct pload *l, const struct ynode *n, const char *s)
{
	char *r;

	if ((r = strdup(s)) == NULL)
		pl_oom(l, n);
	return r;
}

/* Allocate an array of count elements for the items of list n. */
static void *
pl_array(struct pload *l, const struct ynode *n, size_t count, size_t elsz)
{
	void *v;

	if ((v = calloc(count ? count : 1, elsz)) == NULL)
		pl_oom(l, n);
	return v;
}

/* A list, or a single scalar standing for one; 0 when empty or wrong. */
static size_t
pl_list(struct pload *l, const struct ynode *n, const char *what,
    int empty_ok)
{
	if (n->type == YNODE_SCALAR && !ynode_is_null(n))
		return 1;
	if (ycheck_is(&l->c, n, YNODE_SEQ, what) == -1)
		return 0;
	if (n->n == 0 && !empty_ok)
		ycheck_err(&l->c, n, "%s: must not be empty", what);
	return n->n;
}

/* Policy, credential and vault entry names: [A-Za-z0-9][A-Za-z0-9._-]*. */
static int
pl_name(struct pload *l, const struct ynode *n, const char *what,
    const char **out)
{
	const char *s;
	char esc[80];
	size_t i;

	if (ycheck_str(&l->c, n, what, POLICY_NAME_MAX, &s) == -1)
		return -1;
	for (i = 0; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) &&
		    (i == 0 || (s[i] != '-' && s[i] != '_' && s[i] != '.')))
			break;
	if (s[i] != '\0') {
		ycheck_err(&l->c, n, "%s: \"%s\" is not a valid name "
		    "(letters, digits, '.', '_' and '-', starting with a "
		    "letter or digit)", what, ycheck_esc(s, esc, sizeof(esc)));
		return -1;
	}
	*out = s;
	return 0;
}

static int
pl_cidr(struct pload *l, const struct ynode *n, const char *what,
    struct cidr *out)
{
	const char *s, *errstr = NULL;
	char esc[80], net[64];

	if (ycheck_str(&l->c, n, what, 64, &s) == -1)
		return -1;
	if (cidr_parse(s, out, &errstr) == -1) {
		/* refused, not normalised: an allowlist says what it means */
		if (cidr_network_of(s, net, sizeof(net)) != NULL)
			ycheck_err(&l->c, n, "%s: \"%s\" has host bits set; "
			    "did you mean %s?", what,
			    ycheck_esc(s, esc, sizeof(esc)), net);
		else
			ycheck_err(&l->c, n, "%s: bad CIDR \"%s\"%s%s", what,
			    ycheck_esc(s, esc, sizeof(esc)), errstr ? ": " : "",
			    errstr ? errstr : "");
		return -1;
	}
	return 0;
}

/* An IP literal in any form netaddr_parse() accepts, brackets included. */
static int
pl_is_ip(const char *s, size_t len, struct netaddr *a)
{
	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
	}
	return netaddr_parse(s, len, a) == 0;
}

/*
 * A destination name: exact, or "*." + name when wildcards are allowed.
 * *out is the normalised name without the "*.".
 */
static int
pl_host(struct pload *l, const struct ynode *n, const char *what,
    int wild_ok, char **out, int *wild)
{
	char norm[POLICY_HOST_MAX + 2], esc[80];
	struct netaddr a;
	const char *s, *name;
	size_t len;

	if (ycheck_str(&l->c, n, what, POLICY_HOST_MAX + 2, &s) == -1)
		return -1;
	ycheck_esc(s, esc, sizeof(esc));
	len = strlen(s);
	if (pl_is_ip(s, len, &a)) {
		ycheck_err(&l->c, n, "%s: \"%s\" is an IP address: write "
		    "IP destinations as cidr:", what, esc);
		return -1;
	}
	*wild = 0;
	name = s;
	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		if (!wild_ok) {
			ycheck_err(&l->c, n, "%s: \"%s\": wildcards are not "
			    "allowed here, only exact names", what, esc);
			return -1;
		}
		*wild = 1;
		name = s + 2;
	}
	if (strchr(name, '*') != NULL) {
		ycheck_err(&l->c, n, "%s: \"%s\": a wildcard may only be a "
		    "leading \"*.\"", what, esc);
		return -1;
	}
	if (strchr(name, ':') != NULL || strchr(name, '/') != NULL) {
		ycheck_err(&l->c, n, "%s: \"%s\" is not a host name (write "
		    "ports under ports:, no scheme or path)", what, esc);
		return -1;
	}
	if (policy_name_normalize(name, strlen(name), norm, sizeof(norm)) < 0 ||
	    norm[0] == '\0') {
		ycheck_err(&l->c, n, "%s: \"%s\" is not a valid host name",
		    what, esc);
		return -1;
	}
	if (*wild && pl_is_ip(norm, strlen(norm), &a)) {
		ycheck_err(&l->c, n, "%s: \"%s\": a wildcard needs a name, "
		    "not an IP address", what, esc);
		return -1;
	}
	return (*out = pl_strdup(l, n, norm)) == NULL ? -1 : 0;
}

static int
pl_ports(struct pload *l, const struct ynode *n, struct policy_rule *r)
{
	const struct ynode *it;
	uint64_t v;
	size_t cnt;

	if ((cnt = pl_list(l, n, "ports", 0)) == 0)
		return -1;
	if ((r->ports = pl_array(l, n, cnt, sizeof(*r->ports))) == NULL)
		return -1;
	PL_FOREACH(it, n) {
		if (ycheck_uint(&l->c, it, "ports", 1, 65535, &v) == 0)
			r->ports[r->n_ports++] = (uint16_t)v;
	}
	return 0;
}

static int
pl_is_tchar(int ch)
{
	return isalnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch));
}

static int
pl_methods(struct pload *l, const struct ynode *n, struct policy_rule *r)
{
	const struct ynode *it;
	const char *s;
	char esc[80];
	size_t cnt, i;

	if ((cnt = pl_list(l, n, "methods", 0)) == 0)
		return -1;
	if ((r->methods = pl_array(l, n, cnt, sizeof(char *))) == NULL)
		return -1;
	PL_FOREACH(it, n) {
		if (ycheck_str(&l->c, it, "methods", PL_MAX_METHOD, &s) == -1)
			continue;
		for (i = 0; s[i] != '\0' && pl_is_tchar((unsigned char)s[i]);
		    i++)
			;
		if (s[i] != '\0') {
			ycheck_err(&l->c, it, "methods: \"%s\" is not an HTTP "
			    "method", ycheck_esc(s, esc, sizeof(esc)));
			continue;
		}
		if ((r->methods[r->n_methods] = pl_strdup(l, it, s)) == NULL)
			continue;
		for (i = 0; s[i] != '\0'; i++)
			r->methods[r->n_methods][i] =
			    (char)toupper((unsigned char)s[i]);
		r->n_methods++;
	}
	return 0;
}

/*
 * Requests are matched in canonical form (policy_path.c), so a glob in any
 * other form would never match: "/a/%7Eb" or "/a//b" is an error that names
 * the form to write, and an ambiguous glob can match nothing at all.
 */
static int
pl_glob_canonical(struct pload *l, const struct ynode *it, const char *s,
    const char *esc)
{
	char canon[PL_MAX_GLOB + 2], cesc[80];
	size_t clen;

	switch (policy_path_canon(s, strlen(s), canon, sizeof(canon), &clen)) {
	case POLICY_PATH_OK:
		if (strcmp(canon, s) == 0)
			return 0;
		ycheck_esc(canon, cesc, sizeof(cesc));
		ycheck_err(&l->c, it, "paths: \"%s\": requests are matched in "
		    "canonical form; write \"%s\"", esc, cesc);
		return -1;
	case POLICY_PATH_AMBIGUOUS:
		ycheck_err(&l->c, it, "paths: \"%s\": an ambiguous path "
		    "(';', encoded '/' or '\\', dot segment, ...) never matches",
		    esc);
		return -1;
	default:
		ycheck_err(&l->c, it, "paths: \"%s\": a malformed escape, or "
		    "a byte to percent-encode", esc);
		return -1;
	}
}

static int
pl_paths(struct pload *l, const struct ynode *n, struct policy_rule *r)
{
	const struct ynode *it;
	const char *s;
	char esc[80];
	size_t cnt;

	if ((cnt = pl_list(l, n, "paths", 0)) == 0)
		return -1;
	if ((r->paths = pl_array(l, n, cnt, sizeof(char *))) == NULL)
		return -1;
	PL_FOREACH(it, n) {
		if (ycheck_str(&l->c, it, "paths", PL_MAX_GLOB, &s) == -1)
			continue;
		ycheck_esc(s, esc, sizeof(esc));
		if (s[0] != '/' && s[0] != '*') {
			ycheck_err(&l->c, it, "paths: \"%s\": a path glob "
			    "starts with '/' or '*'", esc);
			continue;
		}
		if (strpbrk(s, " ?#") != NULL) {
			ycheck_err(&l->c, it, "paths: \"%s\": a path glob has "
			    "no spaces, query ('?') or fragment ('#')", esc);
			continue;
		}
		if (pl_glob_canonical(l, it, s, esc) == -1)
			continue;
		if ((r->paths[r->n_paths] = pl_strdup(l, it, s)) != NULL)
			r->n_paths++;
	}
	return 0;
}

/* A git: ref glob: "refs/..." (or "*..."), no spaces, controls or '?'. */
static int
pl_ref_glob(struct pload *l, const struct ynode *it, const char *s)
{
	char esc[80];
	size_t i;

	ycheck_esc(s, esc, sizeof(esc));
	if (strncmp(s, "refs/", 5) != 0 && s[0] != '*') {
		ycheck_err(&l->c, it, "git: push: \"%s\": a ref glob starts "
		    "with \"refs/\" (e.g. refs/heads/bot/*)", esc);
		return -1;
	}
	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f) {
			ycheck_err(&l->c, it, "git: push: \"%s\": a ref glob "
			    "has no spaces or control characters", esc);
			return -1;
		}
	return 0;
}

/* git: { push: [ref globs], delete: bool } (docs/policy.md, "git"). */
static void
pl_git(struct pload *l, const struct ynode *n, struct policy_rule *r)
{
	const struct ynode *c, *it;
	const char *s;
	size_t cnt;

	r->git = 1;
	if (ycheck_is(&l->c, n, YNODE_MAP, "git") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "push") == 0) {
			if ((cnt = pl_list(l, c, "git: push", 0)) == 0)
				continue;
			if ((r->git_push = pl_array(l, c, cnt,
			    sizeof(char *))) == NULL)
				continue;
			PL_FOREACH(it, c) {
				if (ycheck_str(&l->c, it, "git: push",
				    PKTLINE_REF_MAX, &s) == -1 ||
				    pl_ref_glob(l, it, s) == -1)
					continue;
				if ((r->git_push[r->n_git_push] =
				    pl_strdup(l, it, s)) != NULL)
					r->n_git_push++;
			}
		} else if (strcmp(c->key->str, "delete") == 0)
			ycheck_bool(&l->c, c, "git: delete", &r->git_delete);
		else
			ycheck_unknown_of(&l->c, c, "git", "push|delete");
	}
	if (ynode_map_get(n, "push") == NULL)
		ycheck_err(&l->c, n, "git: push is required (the ref globs a "
		    "push may update, e.g. [refs/heads/bot/*])");
}

static void
pl_rule(struct pload *l, const struct ynode *n, struct policy_rule *r,
    int allow)
{
	const char *what = allow ? "allow rule" : "deny rule";
	const struct ynode *c, *host = NULL, *cidr = NULL, *ports = NULL;
	const struct ynode *opaque = NULL, *inspect = NULL, *git = NULL;
	const char *s;

	r->file = l->c.file;
	r->line = n->line;
	r->col = n->col;
	r->tls = POLICY_TLS_PASSTHROUGH;
	if (n->type != YNODE_MAP) {
		ycheck_err(&l->c, n, "%s: expected a mapping with host: or "
		    "cidr:, got %s", what, ynode_type_name(n));
		return;
	}
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "host") == 0)
			host = c;
		else if (strcmp(s, "cidr") == 0)
			cidr = c;
		else if (strcmp(s, "ports") == 0)
			ports = c;
		else if (strcmp(s, "methods") == 0) {
			pl_methods(l, c, r);
			inspect = c;
		} else if (strcmp(s, "paths") == 0) {
			pl_paths(l, c, r);
			inspect = c;
		}
		else if (allow && strcmp(s, "tls") == 0) {
			/* A string enum: quoted or not, it is the same YAML value. */
			if (c->type == YNODE_SCALAR &&
			    strcmp(c->str, "intercept") == 0)
				r->tls = POLICY_TLS_INTERCEPT;
			else if (c->type != YNODE_SCALAR ||
			    strcmp(c->str, "passthrough") != 0)
				ycheck_err(&l->c, c, "tls: expected intercept "
				    "or passthrough");
		} else if (allow && strcmp(s, "opaque") == 0) {
			ycheck_bool(&l->c, c, "opaque", &r->opaque);
			opaque = c;
		} else if (allow && strcmp(s, "git") == 0) {
			pl_git(l, c, r);
			git = c;
		}
		else if (!allow && (strcmp(s, "tls") == 0 ||
		    strcmp(s, "opaque") == 0 || strcmp(s, "git") == 0))
			ycheck_err(&l->c, c->key, "%s: only allow rules have "
			    "this key", s);
		else
			ycheck_unknown_of(&l->c, c, what, allow ?
			    "host|cidr|ports|methods|paths|tls|opaque|git" :
			    "host|cidr|ports|methods|paths");
	}
	/*
	 * opaque only lets non-HTTP, non-TLS bytes through; methods and paths
	 * beside it would read as a promise the opaque bytes do not keep.
	 */
	if (opaque != NULL && r->opaque && inspect != NULL)
		ycheck_err(&l->c, opaque->key, "opaque: true cannot go with "
		    "methods: or paths: (opaque bytes have neither); write "
		    "two rules");
	/* A push in a passed-through TLS tunnel cannot be read. */
	if (git != NULL && r->tls != POLICY_TLS_INTERCEPT)
		ycheck_err(&l->c, git->key, "git: needs tls: intercept on this "
		    "rule (a push inside a passed-through TLS connection cannot "
		    "be read; plain HTTP is read either way)");
	if (git != NULL && opaque != NULL && r->opaque)
		ycheck_err(&l->c, opaque->key, "opaque: true cannot go with "
		    "git: (opaque bytes are not read); write two rules");
	if (host != NULL && cidr != NULL) {
		ycheck_err(&l->c, cidr->key, "%s: has both host: and cidr:; "
		    "write one rule for each", what);
		return;
	}
	if (host == NULL && cidr == NULL) {
		ycheck_err(&l->c, n, "%s: needs host: or cidr:", what);
		return;
	}
	if (host != NULL) {
		r->kind = RULE_HOST;
		pl_host(l, host, "host", 1, &r->host, &r->wildcard);
	} else {
		r->kind = RULE_CIDR;
		pl_cidr(l, cidr, "cidr", &r->cidr);
	}
	if (ports != NULL)
		pl_ports(l, ports, r);
	else if (allow) {
		if ((r->ports = pl_array(l, n, 2, sizeof(*r->ports))) != NULL) {
			r->ports[0] = 80;
			r->ports[1] = 443;
			r->n_ports = 2;
		}
	}
}

static void
pl_rules(struct pload *l, const struct ynode *n, struct policy_def *def,
    int allow)
{
	const char *what = allow ? "allow" : "deny";
	struct policy_rule **rv = allow ? &def->allow : &def->deny;
	size_t *nv = allow ? &def->n_allow : &def->n_deny;
	const struct ynode *it;

	if (*rv != NULL)
		return;		/* the tree already refused a duplicate key */
	if (ynode_is_null(n))
		return;
	if (ycheck_is(&l->c, n, YNODE_SEQ, what) == -1)
		return;
	/* Every item gets its slot, so that rule N is the N-th item. */
	if ((*rv = pl_array(l, n, n->n, sizeof(**rv))) == NULL)
		return;
	for (it = n->first; it != NULL; it = it->next)
		pl_rule(l, it, &(*rv)[(*nv)++], allow);
}

static void
pl_private(struct pload *l, const struct ynode *n, struct policy_def *def)
{
	const struct ynode *it;
	struct policy_private *pv;
	struct netaddr a;
	const char *s;
	size_t cnt;

	if (ynode_is_null(n) || (cnt = pl_list(l, n, "allow_private", 1)) == 0)
		return;
	if ((def->priv = pl_array(l, n, cnt, sizeof(*def->priv))) == NULL)
		return;
	PL_FOREACH(it, n) {
		pv = &def->priv[def->n_priv];
		if (ycheck_str(&l->c, it, "allow_private", POLICY_HOST_MAX + 2,
		    &s) == -1)
			continue;
		if (strchr(s, '/') != NULL) {
			if (pl_cidr(l, it, "allow_private", &pv->cidr) == -1)
				continue;
		} else if (pl_is_ip(s, strlen(s), &a)) {
			/* A bare address stands for itself alone. */
			pv->cidr.addr = a;
			pv->cidr.bits = a.family == AF_INET ? 32 : 128;
		} else {
			if (pl_host(l, it, "allow_private", 1, &pv->host,
			    &pv->wildcard) == -1)
				continue;
			pv->is_name = 1;
		}
		def->n_priv++;
	}
}

static void
pl_dns_types(struct pload *l, const struct ynode *n, struct policy_def *def)
{
	const struct ynode *it;
	const char *s;
	char esc[80];
	size_t cnt, i;

	if ((cnt = pl_list(l, n, "dns_types", 1)) == 0 && n->type != YNODE_SEQ)
		return;
	if ((def->dns_types = pl_array(l, n, cnt, sizeof(uint16_t))) == NULL)
		return;
	if (cnt == 0)
		return;
	PL_FOREACH(it, n) {
		if (ycheck_str(&l->c, it, "dns_types", 16, &s) == -1)
			continue;
		for (i = 0; i < sizeof(pl_qtypes) / sizeof(pl_qtypes[0]); i++)
			if (strcasecmp(s, pl_qtypes[i].name) == 0)
				break;
		if (i == sizeof(pl_qtypes) / sizeof(pl_qtypes[0])) {
			ycheck_err(&l->c, it, "dns_types: unknown query type "
			    "\"%s\"", ycheck_esc(s, esc, sizeof(esc)));
			continue;
		}
		def->dns_types[def->n_dns_types++] = pl_qtypes[i].qtype;
	}
}

static void
pl_countries(struct pload *l, const struct ynode *n, struct policy_def *def)
{
	const struct ynode *c, *it;
	const char *s;
	char esc[80];
	size_t cnt;

	if (ycheck_is(&l->c, n, YNODE_MAP, "countries") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "deny") != 0) {
			ycheck_unknown_of(&l->c, c, "countries (only deny: is "
			    "supported)", "deny");
			continue;
		}
		if (ynode_is_null(c) || (cnt = pl_list(l, c, "deny", 1)) == 0)
			continue;
		if ((def->country_deny = pl_array(l, c, cnt, 3)) == NULL)
			continue;
		PL_FOREACH(it, c) {
			if (ycheck_str(&l->c, it, "countries", 8, &s) == -1)
				continue;
			if (strlen(s) != 2 || !isalpha((unsigned char)s[0]) ||
			    !isalpha((unsigned char)s[1])) {
				ycheck_err(&l->c, it, "countries: \"%s\" is "
				    "not an ISO 3166 two-letter code",
				    ycheck_esc(s, esc, sizeof(esc)));
				continue;
			}
			def->country_deny[def->n_country_deny][0] =
			    (char)toupper((unsigned char)s[0]);
			def->country_deny[def->n_country_deny][1] =
			    (char)toupper((unsigned char)s[1]);
			def->country_deny[def->n_country_deny++][2] = '\0';
		}
	}
}

static int
pl_asn(struct pload *l, const struct ynode *n, uint32_t *out)
{
	struct ynode tmp;
	uint64_t v;

	/* "AS13335" reads as 13335. */
	if (n->type == YNODE_SCALAR && n->len > 2 &&
	    strncasecmp(n->str, "AS", 2) == 0) {
		tmp = *n;
		tmp.str += 2;
		tmp.len -= 2;
		tmp.plain = 1;
		n = &tmp;
	}
	if (ycheck_uint(&l->c, n, "asns", 1, UINT32_MAX, &v) == -1)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void
pl_asns(struct pload *l, const struct ynode *n, struct policy_def *def)
{
	const struct ynode *c, *it;
	size_t cnt;

	if (ycheck_is(&l->c, n, YNODE_MAP, "asns") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "deny") != 0) {
			ycheck_unknown_of(&l->c, c, "asns (only deny: is "
			    "supported)", "deny");
			continue;
		}
		if (ynode_is_null(c) || (cnt = pl_list(l, c, "deny", 1)) == 0)
			continue;
		if ((def->asn_deny = pl_array(l, c, cnt, sizeof(uint32_t))) ==
		    NULL)
			continue;
		PL_FOREACH(it, c) {
			if (pl_asn(l, it, &def->asn_deny[def->n_asn_deny]) == 0)
				def->n_asn_deny++;
		}
	}
}

static int
pl_add_ref(struct pload *l, struct pl_ref **v, size_t *n, size_t *cap,
    const char *name, const char *owner, const struct ynode *at)
{
	if (pl_grow((void **)v, cap, *n, sizeof(**v)) == -1) {
		pl_oom(l, at);
		return -1;
	}
	(*v)[*n].name = name;
	(*v)[*n].owner = owner;
	(*v)[*n].pos.file = l->c.file;
	(*v)[*n].pos.line = at->line;
	(*v)[*n].pos.col = at->col;
	(*n)++;
	return 0;
}

static void
pl_def_creds(struct pload *l, const struct ynode *n, struct policy_def *def,
    const struct ynode **refs)
{
	const struct ynode *it;
	const char *s;
	size_t cnt;

	if (ynode_is_null(n) || (cnt = pl_list(l, n, "credentials", 1)) == 0)
		return;
	if ((def->credentials = pl_array(l, n, cnt, sizeof(char *))) == NULL)
		return;
	PL_FOREACH(it, n) {
		if (pl_name(l, it, "credentials", &s) == -1)
			continue;
		if ((def->credentials[def->n_credentials] =
		    pl_strdup(l, it, s)) == NULL)
			continue;
		refs[def->n_credentials++] = it;
	}
}

static void
pl_dup(struct pload *l, const struct ynode *at, const char *kind,
    const char *name, const struct pl_pos *first)
{
	char esc[80];

	ycheck_err(&l->c, at, "duplicate %s \"%s\" (first defined at "
	    "%s:%d:%d)", kind, ycheck_esc(name, esc, sizeof(esc)),
	    first->file, first->line, first->col);
}

static void
pl_policy(struct pload *l, const struct ynode *n)
{
	struct policy *p = l->p;
	struct policy_def *def;
	const struct ynode *c, *name = NULL, *creds = NULL, **refs = NULL;
	const char *s;
	size_t i, old;
	int rc;

	if (ycheck_is(&l->c, n, YNODE_MAP, "policies") == -1)
		return;
	if (pl_grow((void **)&p->defs, &l->cap_defs, p->n_defs,
	    sizeof(*p->defs)) == -1 || pl_grow((void **)&l->def_pos,
	    &l->cap_def_pos, p->n_defs, sizeof(*l->def_pos)) == -1) {
		pl_oom(l, n);
		return;
	}
	def = &p->defs[p->n_defs];
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "name") == 0) {
			if (pl_name(l, c, "name", &s) == 0 &&
			    (def->name = pl_strdup(l, c, s)) != NULL)
				name = c;
		} else if (strcmp(s, "allow") == 0)
			pl_rules(l, c, def, 1);
		else if (strcmp(s, "deny") == 0)
			pl_rules(l, c, def, 0);
		else if (strcmp(s, "allow_private") == 0)
			pl_private(l, c, def);
		else if (strcmp(s, "dns_types") == 0)
			pl_dns_types(l, c, def);
		else if (strcmp(s, "mode") == 0) {
			if (c->type == YNODE_SCALAR && strcmp(c->str, "report") == 0)
				def->report = 1;
			else if (c->type == YNODE_SCALAR &&
			    strcmp(c->str, "ask") == 0)
				def->ask = 1;
			else if (c->type != YNODE_SCALAR ||
			    strcmp(c->str, "enforce") != 0)
				ycheck_err(&l->c, c, "mode: expected enforce, "
				    "report or ask");
		} else if (strcmp(s, "countries") == 0)
			pl_countries(l, c, def);
		else if (strcmp(s, "asns") == 0)
			pl_asns(l, c, def);
		else if (strcmp(s, "credentials") == 0)
			creds = c;
		else if (strcmp(s, "dlp") == 0)
			policy_dlp_load(&l->c, c, &def->dlp);
		else
			ycheck_unknown_of(&l->c, c, "policy", "name|allow|deny|"
			    "allow_private|dns_types|mode|countries|asns|"
			    "credentials|dlp");
	}
	if (def->dns_types == NULL) {
		if ((def->dns_types = pl_array(l, n, 2, sizeof(uint16_t))) !=
		    NULL) {
			def->dns_types[0] = 1;		/* A */
			def->dns_types[1] = 28;		/* AAAA */
			def->n_dns_types = 2;
		}
	}
	if (creds != NULL) {
		refs = calloc(creds->type == YNODE_SEQ ? creds->n + 1 : 1,
		    sizeof(*refs));
		if (refs == NULL)
			pl_oom(l, creds);
		else
			pl_def_creds(l, creds, def, refs);
	}
	p->n_defs++;	/* from here on the policy frees def */
	if (name == NULL) {
		if (ynode_map_get(n, "name") == NULL)
			ycheck_err(&l->c, n, "policy: name is required");
		goto out;
	}
	l->def_pos[p->n_defs - 1].file = l->c.file;
	l->def_pos[p->n_defs - 1].line = n->line;
	l->def_pos[p->n_defs - 1].col = n->col;
	rc = pl_hash_put(&l->h_defs, def->name, p->n_defs - 1, &old);
	if (rc == 1)
		pl_dup(l, name, "policy name", def->name, &l->def_pos[old]);
	else if (rc == -1)
		pl_oom(l, name);
	for (i = 0; refs != NULL && i < def->n_credentials; i++)
		pl_add_ref(l, &l->cred_refs, &l->n_cred_refs,
		    &l->cap_cred_refs, def->credentials[i], def->name, refs[i]);
out:
	free(refs);
}

static void
pl_token(struct pload *l, const struct ynode *n, struct policy_sandbox *sb)
{
	const char *s;

	if (ycheck_str(&l->c, n, "token_sha256", 128, &s) == -1)
		return;
	if (strlen(s) != 64 ||
	    util_hex_decode(s, 64, sb->token_sha256, 0) == -1) {
		ycheck_err(&l->c, n, "token_sha256: expected 64 hex digits "
		    "(the SHA-256 of the token)");
		return;
	}
	sb->has_token = 1;
}

static int
pl_sandbox_id(struct pload *l, const struct ynode *n,
    struct policy_sandbox *sb)
{
	const char *s;
	char esc[80];
	size_t i;

	if (ycheck_str(&l->c, n, "id", 64, &s) == -1)
		return -1;
	i = strlen(s);
	if (!policy_valid_id(s, i)) {
		ycheck_err(&l->c, n, "id: \"%s\" is not a sandbox id "
		    "([a-z0-9][a-z0-9-]{0,39})", ycheck_esc(s, esc,
		    sizeof(esc)));
		return -1;
	}
	memcpy(sb->id, s, i + 1);
	return 0;
}

static void
pl_sources(struct pload *l, const struct ynode *n, struct policy_sandbox *sb)
{
	const struct ynode *it;
	size_t cnt;

	if ((cnt = pl_list(l, n, "source", 0)) == 0)
		return;
	if ((sb->sources = pl_array(l, n, cnt, sizeof(*sb->sources))) == NULL)
		return;
	PL_FOREACH(it, n) {
		if (pl_cidr(l, it, "source", &sb->sources[sb->n_sources]) == 0)
			sb->n_sources++;
	}
}

/* ingress: { address, ports, token_sha256, public } (docs/ingress.md). */
static void
pl_ingress(struct pload *l, const struct ynode *n, struct policy_sandbox *sb)
{
	struct policy_ingress *ing = &sb->ingress;
	const struct ynode *c, *it;
	const char *s, *key;
	char esc[80];
	uint64_t v;
	size_t cnt, i;
	int have_addr = 0, have_ports = 0, dup;

	if (ycheck_is(&l->c, n, YNODE_MAP, "ingress") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		key = c->key->str;
		if (strcmp(key, "address") == 0) {
			if (ycheck_str(&l->c, c, "address", 64, &s) == -1)
				continue;
			if (!pl_is_ip(s, strlen(s), &ing->address)) {
				ycheck_err(&l->c, c, "address: \"%s\" is not an IP "
				    "address (the guest address to proxy to)",
				    ycheck_esc(s, esc, sizeof(esc)));
				continue;
			}
			have_addr = 1;
		} else if (strcmp(key, "ports") == 0) {
			if ((cnt = pl_list(l, c, "ports", 0)) == 0)
				continue;
			if (cnt > POLICY_INGRESS_MAX_PORTS) {
				ycheck_err(&l->c, c, "ports: at most %d published "
				    "ports", POLICY_INGRESS_MAX_PORTS);
				continue;
			}
			have_ports = 1;
			PL_FOREACH(it, c) {
				if (ycheck_uint(&l->c, it, "ports", 1, 65535, &v) == -1)
					continue;
				for (dup = 0, i = 0; i < ing->n_ports; i++)
					dup |= ing->ports[i] == v;
				if (!dup)
					ing->ports[ing->n_ports++] = (uint16_t)v;
			}
		} else if (strcmp(key, "token_sha256") == 0) {
			if (ycheck_str(&l->c, c, "token_sha256", 128, &s) == -1)
				continue;
			if (policy_sha256_hex_parse(s, ing->token_sha256) == -1) {
				ycheck_err(&l->c, c, "token_sha256: expected 64 hex "
				    "digits (the SHA-256 of the ingress token)");
				continue;
			}
			ing->has_token = 1;
		} else if (strcmp(key, "public") == 0)
			ycheck_bool(&l->c, c, "public", &ing->is_public);
		else
			ycheck_unknown_of(&l->c, c, "ingress",
			    "address|ports|token_sha256|public");
	}
	if (!have_addr && ynode_map_get(n, "address") == NULL)
		ycheck_err(&l->c, n, "ingress: address is required");
	if (!have_ports && ynode_map_get(n, "ports") == NULL)
		ycheck_err(&l->c, n, "ingress: ports is required");
	if (!ing->is_public && ynode_map_get(n, "token_sha256") == NULL)
		ycheck_err(&l->c, n, "ingress: token_sha256 is required "
		    "unless public: true");
	sb->has_ingress = 1;
	ing->running = 1;
}

static void
pl_sandbox(struct pload *l, const struct ynode *n)
{
	struct policy *p = l->p;
	struct policy_sandbox *sb;
	const struct ynode *c, *id = NULL, *pol = NULL;
	struct pl_pos first;
	const char *s;
	size_t old;
	int rc;

	if (ycheck_is(&l->c, n, YNODE_MAP, "sandboxes") == -1)
		return;
	if (pl_grow((void **)&p->sandboxes, &l->cap_sb, p->n_sandboxes,
	    sizeof(*p->sandboxes)) == -1) {
		pl_oom(l, n);
		return;
	}
	sb = &p->sandboxes[p->n_sandboxes++];
	sb->file = l->c.file;
	sb->line = n->line;
	sb->col = n->col;
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "id") == 0) {
			if (pl_sandbox_id(l, c, sb) == 0)
				id = c;
		} else if (strcmp(s, "policy") == 0) {
			if (pl_name(l, c, "policy", &s) == 0 &&
			    (sb->policy = pl_strdup(l, c, s)) != NULL)
				pol = c;
		} else if (strcmp(s, "token_sha256") == 0)
			pl_token(l, c, sb);
		else if (strcmp(s, "source") == 0)
			pl_sources(l, c, sb);
		else if (strcmp(s, "ingress") == 0)
			pl_ingress(l, c, sb);
		else if (strcmp(s, "ask") == 0)
			(void)ycheck_bool(&l->c, c, "ask", &sb->ask);
		else
			ycheck_unknown_of(&l->c, c, "sandbox",
			    "id|policy|token_sha256|source|ingress|ask");
	}
	if (ynode_map_get(n, "id") == NULL)
		ycheck_err(&l->c, n, "sandbox: id is required");
	if (ynode_map_get(n, "policy") == NULL)
		ycheck_err(&l->c, n, "sandbox: policy is required");
	if (id != NULL) {
		rc = pl_hash_put(&l->h_sb, sb->id, p->n_sandboxes - 1, &old);
		if (rc == 1) {
			first.file = p->sandboxes[old].file;
			first.line = p->sandboxes[old].line;
			first.col = p->sandboxes[old].col;
			pl_dup(l, id, "sandbox id", sb->id, &first);
		} else if (rc == -1)
			pl_oom(l, id);
	}
	if (pol != NULL)
		pl_add_ref(l, &l->sb_refs, &l->n_sb_refs, &l->cap_sb_refs,
		    sb->policy, NULL, pol);
}

/* A list of strings of a kind, each checked by check(). */
static char **
pl_strings(struct pload *l, const struct ynode *n, const char *what,
    size_t maxlen, int (*check)(const char *), const char *hint,
    size_t *count)
{
	const struct ynode *it;
	const char *s;
	char **v, esc[80];
	size_t cnt;

	*count = 0;
	if ((cnt = pl_list(l, n, what, 0)) == 0)
		return NULL;
	if ((v = pl_array(l, n, cnt, sizeof(char *))) == NULL)
		return NULL;
	PL_FOREACH(it, n) {
		if (ycheck_str(&l->c, it, what, maxlen, &s) == -1)
			continue;
		if (check != NULL && !check(s)) {
			ycheck_err(&l->c, it, "%s: \"%s\" %s", what,
			    ycheck_esc(s, esc, sizeof(esc)), hint);
			continue;
		}
		if ((v[*count] = pl_strdup(l, it, s)) != NULL)
			(*count)++;
	}
	return v;
}

static int
pl_is_token(const char *s)
{
	for (; *s != '\0'; s++)
		if (!pl_is_tchar((unsigned char)*s))
			return 0;
	return 1;
}

static int
pl_is_env(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!(isalpha((unsigned char)s[i]) || s[i] == '_' ||
		    (i > 0 && isdigit((unsigned char)s[i]))))
			return 0;
	return 1;
}

static void
pl_cred_hosts(struct pload *l, const struct ynode *n,
    struct policy_credential *cr)
{
	const struct ynode *it;
	size_t cnt;
	int wild;

	if ((cnt = pl_list(l, n, "hosts", 0)) == 0)
		return;
	if ((cr->hosts = pl_array(l, n, cnt, sizeof(char *))) == NULL)
		return;
	PL_FOREACH(it, n) {
		if (pl_host(l, it, "hosts", 0, &cr->hosts[cr->n_hosts],
		    &wild) == 0)
			cr->n_hosts++;
	}
}

static void
pl_placeholder(struct pload *l, const struct ynode *n,
    struct policy_credential *cr)
{
	const char *s;
	size_t i;

	if (ynode_is_null(n))
		return;
	if (ycheck_str(&l->c, n, "placeholder", PL_MAX_PLACEHOLDER, &s) == -1)
		return;
	for (i = 0; s[i] != '\0'; i++)
		if (s[i] <= ' ' || s[i] > '~')
			break;
	if (s[i] != '\0') {
		ycheck_err(&l->c, n, "placeholder: only printable ASCII "
		    "characters, no spaces");
		return;
	}
	if (i < PL_MIN_PLACEHOLDER) {
		ycheck_err(&l->c, n, "placeholder: at least %d characters "
		    "(or null for a random one per sandbox)",
		    PL_MIN_PLACEHOLDER);
		return;
	}
	cr->placeholder = pl_strdup(l, n, s);
}

/*
 * scope: {methods: [...], paths: [...]} of a credential (docs/credentials.md
 * "require and scope"). Methods are the known HTTP words, stored upper-case;
 * paths are globs in the canonical form allow rules' paths are (pl_paths).
 */
static void
pl_cred_scope(struct pload *l, const struct ynode *n,
    struct policy_credential *cr)
{
	static const char *const known[] = { "GET", "HEAD", "POST", "PUT",
	    "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT" };
	struct policy_rule tmp;
	const struct ynode *c, *it;
	const char *s;
	char esc[80];
	size_t cnt, i;

	if (ycheck_is(&l->c, n, YNODE_MAP, "scope") == -1)
		return;
	if (n->first == NULL)
		ycheck_err(&l->c, n, "scope: must not be empty (methods:, "
		    "paths: or both)");
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "paths") == 0) {
			memset(&tmp, 0, sizeof(tmp));
			pl_paths(l, c, &tmp);
			cr->scope_paths = tmp.paths;
			cr->n_scope_paths = tmp.n_paths;
			continue;
		}
		if (strcmp(c->key->str, "methods") != 0) {
			ycheck_unknown_of(&l->c, c, "scope", "methods|paths");
			continue;
		}
		if ((cnt = pl_list(l, c, "methods", 0)) == 0 ||
		    (cr->scope_methods = pl_array(l, c, cnt,
		    sizeof(char *))) == NULL)
			continue;
		PL_FOREACH(it, c) {
			if (ycheck_str(&l->c, it, "methods", PL_MAX_METHOD,
			    &s) == -1)
				continue;
			for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
				if (strcasecmp(known[i], s) == 0)
					break;
			if (i == sizeof(known) / sizeof(known[0])) {
				ycheck_err(&l->c, it, "methods: \"%s\" is not "
				    "an HTTP method (GET, HEAD, POST, PUT, "
				    "PATCH, DELETE, OPTIONS, TRACE, CONNECT)",
				    ycheck_esc(s, esc, sizeof(esc)));
				continue;
			}
			if ((cr->scope_methods[cr->n_scope_methods] =
			    pl_strdup(l, it, known[i])) != NULL)
				cr->n_scope_methods++;
		}
	}
}

/*
 * The alphabets of placeholder_shape, and how many random characters of
 * each give at least 128 bits (n * log2(size) >= 128).
 */
static const struct {
	const char	*name;
	const char	*chars;
	size_t		 min;
} pl_alphabets[] = {
	{ "base62", "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz", 22 },
	{ "base36", "0123456789abcdefghijklmnopqrstuvwxyz", 25 },
	{ "base32", "abcdefghijklmnopqrstuvwxyz234567", 26 },
	{ "base32upper", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 26 },
	{ "hex", "0123456789abcdef", 32 },
};
#define PL_N_ALPHABETS	(sizeof(pl_alphabets) / sizeof(pl_alphabets[0]))

/* Bytes a prefix may hold: unreserved in a URL, plain in a header value. */
static int
pl_is_prefix(const char *s)
{
	for (; *s != '\0'; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		    (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' ||
		    *s == '_' || *s == '~'))
			return 0;
	return 1;
}

/* placeholder_shape: {prefix: "ghp_", length: 40, alphabet: base62} */
static void
pl_shape(struct pload *l, const struct ynode *n, struct policy_credential *cr)
{
	const struct ynode *c, *len_node = NULL;
	const char *s, *prefix = NULL;
	uint64_t len = 0;
	size_t i, a = PL_N_ALPHABETS, plen;
	int bad = 0;

	if (ycheck_is(&l->c, n, YNODE_MAP, "placeholder_shape") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "prefix") == 0) {
			if (ycheck_str(&l->c, c, "placeholder_shape: prefix",
			    PL_MAX_SHAPE_PREFIX, &prefix) == -1)
				bad = 1;
			else if (!pl_is_prefix(prefix)) {
				ycheck_err(&l->c, c, "placeholder_shape: prefix: "
				    "only A-Z a-z 0-9 - . _ ~ (bytes a header "
				    "value and a URL carry as they are)");
				bad = 1;
			} else if (strlen(prefix) < PL_MIN_SHAPE_PREFIX) {
				ycheck_err(&l->c, c, "placeholder_shape: prefix: "
				    "at least %d characters (placeholders are "
				    "searched for by it)", PL_MIN_SHAPE_PREFIX);
				bad = 1;
			}
		} else if (strcmp(s, "length") == 0) {
			if (ycheck_uint(&l->c, c, "placeholder_shape: length",
			    PL_MIN_PLACEHOLDER, PL_MAX_SHAPE_LENGTH, &len) == -1)
				bad = 1;
			len_node = c;
		} else if (strcmp(s, "alphabet") == 0) {
			if (ycheck_str(&l->c, c, "placeholder_shape: alphabet",
			    32, &s) == -1) {
				bad = 1;
				continue;
			}
			for (a = 0; a < PL_N_ALPHABETS; a++)
				if (strcmp(s, pl_alphabets[a].name) == 0)
					break;
			if (a == PL_N_ALPHABETS) {
				ycheck_err(&l->c, c, "placeholder_shape: alphabet: "
				    "unknown '%s' (base62|base36|base32|"
				    "base32upper|hex)", s);
				bad = 1;
			}
		} else {
			ycheck_unknown_of(&l->c, c, "placeholder_shape",
			    "prefix|length|alphabet");
			bad = 1;
		}
	}
	for (i = 0; i < 3; i++) {
		static const char *const req[] = { "prefix", "length",
		    "alphabet" };
		if (ynode_map_get(n, req[i]) == NULL) {
			ycheck_err(&l->c, n, "placeholder_shape: %s is "
			    "required", req[i]);
			bad = 1;
		}
	}
	if (bad)
		return;
	plen = strlen(prefix);
	if (len < plen + pl_alphabets[a].min) {
		ycheck_err(&l->c, len_node, "placeholder_shape: length: %u "
		    "leaves %zu random %s characters, fewer than 128 bits: "
		    "with this prefix, at least %zu", (unsigned int)len,
		    len > plen ? (size_t)len - plen : 0, pl_alphabets[a].name,
		    plen + pl_alphabets[a].min);
		return;
	}
	if ((cr->shape_prefix = pl_strdup(l, n, prefix)) == NULL)
		return;
	cr->shape_length = (size_t)len;
	cr->shape_alphabet = pl_alphabets[a].chars;
	cr->shape_alphabet_name = pl_alphabets[a].name;
}

/* kind: oauth2 and its oauth2: map go together (policy_oauth2.c). */
static void
pl_cred_oauth2(struct pload *l, const struct ynode *n,
    struct policy_credential *cr)
{
	const struct ynode *o = ynode_map_get(n, "oauth2");

	if (o != NULL && cr->kind != POLICY_CRED_OAUTH2)
		ycheck_err(&l->c, o->key != NULL ? o->key : o, "oauth2: only "
		    "with kind: oauth2");
	else if (o == NULL && cr->kind == POLICY_CRED_OAUTH2)
		ycheck_err(&l->c, n, "credential: kind: oauth2 needs an "
		    "oauth2: map (token_url, grant, ...)");
	if (cr->oauth2 != NULL && cr->secret != NULL &&
	    policy_oauth2_names(cr->oauth2, cr->secret) == -1)
		pl_oom(l, n);
}

static void
pl_credential(struct pload *l, const struct ynode *n)
{
	struct policy *p = l->p;
	struct policy_credential *cr;
	const struct ynode *c, *name = NULL, *ph = NULL;
	const char *s;
	size_t old;
	int rc;

	if (ycheck_is(&l->c, n, YNODE_MAP, "credentials") == -1)
		return;
	if (pl_grow((void **)&p->creds, &l->cap_creds, p->n_creds,
	    sizeof(*p->creds)) == -1 || pl_grow((void **)&l->cred_pos,
	    &l->cap_cred_pos, p->n_creds, sizeof(*l->cred_pos)) == -1) {
		pl_oom(l, n);
		return;
	}
	cr = &p->creds[p->n_creds++];
	cr->exclusive = 1;
	for (c = n->first; c != NULL; c = c->next) {
		s = c->key->str;
		if (strcmp(s, "name") == 0) {
			if (pl_name(l, c, "name", &s) == 0 &&
			    (cr->name = pl_strdup(l, c, s)) != NULL)
				name = c;
		} else if (strcmp(s, "secret") == 0) {
			if (pl_name(l, c, "secret", &s) == 0 &&
			    (cr->secret = pl_strdup(l, c, s)) != NULL &&
			    asprintf(&cr->prev_name, "%s#prev", s) == -1) {
				cr->prev_name = NULL;
				pl_oom(l, c);
			}
		} else if (strcmp(s, "kind") == 0) {
			if (ycheck_str(&l->c, c, "kind", 32, &s) == -1)
				continue;
			if (strcmp(s, "static") == 0)
				cr->kind = POLICY_CRED_STATIC;
			else if (strcmp(s, "aws_sigv4") == 0)
				cr->kind = POLICY_CRED_AWS_SIGV4;
			else if (strcmp(s, "oauth2") == 0)
				cr->kind = POLICY_CRED_OAUTH2;
			else
				ycheck_err(&l->c, c, "kind: %s is not one of "
				    "static|aws_sigv4|oauth2", s);
		} else if (strcmp(s, "hosts") == 0)
			pl_cred_hosts(l, c, cr);
		else if (strcmp(s, "headers") == 0)
			cr->headers = pl_strings(l, c, "headers", PL_MAX_HEADER,
			    pl_is_token, "is not a header name",
			    &cr->n_headers);
		else if (strcmp(s, "query") == 0)
			ycheck_bool(&l->c, c, "query", &cr->query);
		else if (strcmp(s, "exclusive") == 0)
			ycheck_bool(&l->c, c, "exclusive", &cr->exclusive);
		else if (strcmp(s, "require") == 0)
			ycheck_bool(&l->c, c, "require", &cr->require);
		else if (strcmp(s, "scope") == 0)
			pl_cred_scope(l, c, cr);
		else if (strcmp(s, "env") == 0) {
			if (ynode_is_null(c))
				continue;
			if (ycheck_str(&l->c, c, "env", PL_MAX_ENV, &s) == 0) {
				if (!pl_is_env(s))
					ycheck_err(&l->c, c, "env: not an "
					    "environment variable name");
				else
					cr->env = pl_strdup(l, c, s);
			}
		} else if (strcmp(s, "secret_env") == 0) {
			if (ynode_is_null(c))
				continue;
			if (ycheck_str(&l->c, c, "secret_env", PL_MAX_ENV, &s) == 0) {
				if (!pl_is_env(s))
					ycheck_err(&l->c, c, "secret_env: not an "
					    "environment variable name");
				else
					cr->secret_env = pl_strdup(l, c, s);
			}
		} else if (strcmp(s, "placeholder") == 0) {
			pl_placeholder(l, c, cr);
			if (cr->placeholder != NULL)
				ph = c;
		} else if (strcmp(s, "placeholder_shape") == 0)
			pl_shape(l, c, cr);
		else if (strcmp(s, "oauth2") == 0) {
			policy_oauth2_free(cr->oauth2);
			cr->oauth2 = policy_oauth2_parse(&l->c, c);
		} else
			ycheck_unknown_of(&l->c, c, "credential",
			    "name|kind|secret|hosts|headers|query|exclusive|env|"
			    "secret_env|placeholder|placeholder_shape|require|"
			    "scope|oauth2");
	}
	pl_cred_oauth2(l, n, cr);
	if (ph != NULL && (c = ynode_map_get(n, "placeholder_shape")) != NULL)
		ycheck_err(&l->c, c->key != NULL ? c->key : c,
		    "placeholder_shape: not with a fixed placeholder (one "
		    "or the other)");
	if (ynode_map_get(n, "name") == NULL)
		ycheck_err(&l->c, n, "credential: name is required");
	if (ynode_map_get(n, "secret") == NULL)
		ycheck_err(&l->c, n, "credential: secret is required (the "
		    "vault entry)");
	if (ynode_map_get(n, "hosts") == NULL)
		ycheck_err(&l->c, n, "credential: hosts is required (where "
		    "the secret may go)");
	if (cr->kind == POLICY_CRED_AWS_SIGV4) {
		/* The key id goes in SigV4's Authorization and X-Amz-Credential only. */
		if ((c = ynode_map_get(n, "headers")) != NULL)
			ycheck_err(&l->c, c->key != NULL ? c->key : c, "headers: "
			    "not with kind aws_sigv4 (its key id is re-signed in "
			    "Authorization, or in the query of a presigned URL)");
		if (ynode_map_get(n, "query") == NULL)
			cr->query = 1;
	} else if ((c = ynode_map_get(n, "secret_env")) != NULL)
		ycheck_err(&l->c, c->key != NULL ? c->key : c, "secret_env: only "
		    "with kind aws_sigv4 (the secret-key placeholder)");
	if (ynode_map_get(n, "headers") == NULL) {
		if ((cr->headers = pl_array(l, n, 1, sizeof(char *))) != NULL &&
		    (cr->headers[0] = pl_strdup(l, n, "Authorization")) != NULL)
			cr->n_headers = 1;
	}
	l->cred_pos[p->n_creds - 1].file = l->c.file;
	l->cred_pos[p->n_creds - 1].line = n->line;
	l->cred_pos[p->n_creds - 1].col = n->col;
	if (name != NULL) {
		rc = pl_hash_put(&l->h_creds, cr->name, p->n_creds - 1, &old);
		if (rc == 1)
			pl_dup(l, name, "credential name", cr->name,
			    &l->cred_pos[old]);
		else if (rc == -1)
			pl_oom(l, name);
	}
	if (ph != NULL) {
		rc = pl_hash_put(&l->h_ph, cr->placeholder, p->n_creds - 1,
		    &old);
		if (rc == 1)
			ycheck_err(&l->c, ph, "placeholder: also the "
			    "placeholder of the credential at %s:%d:%d",
			    l->cred_pos[old].file, l->cred_pos[old].line,
			    l->cred_pos[old].col);
		else if (rc == -1)
			pl_oom(l, ph);
	}
}

static void
pl_section(struct pload *l, const struct ynode *n,
    void (*item)(struct pload *, const struct ynode *))
{
	const struct ynode *it;

	if (ynode_is_null(n))
		return;
	if (ycheck_is(&l->c, n, YNODE_SEQ, n->key->str) == -1)
		return;
	for (it = n->first; it != NULL; it = it->next)
		item(l, it);
}

/*
 * approved: {POLICY: [allow rules]} -- what an operator answered with
 * `sandgate approve --always` (docs/approvals.md), written under the
 * policies directory's approved/ and read after its own files: each rule
 * is appended to that policy's allow rules, named and explained as theirs.
 */
static void
pl_approved(struct pload *l, const struct ynode *n)
{
	const struct ynode *c, *it;
	struct policy_def *def;
	struct policy_rule *nv;
	size_t v;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP,
	    "approved") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (!pl_hash_get(&l->h_defs, c->key->str, &v)) {
			ycheck_err(&l->c, c->key, "approved: no policy %s "
			    "(defined in a file read before this one)",
			    c->key->str);
			continue;
		}
		if (ynode_is_null(c) || ycheck_is(&l->c, c, YNODE_SEQ,
		    "approved") == -1)
			continue;
		def = &l->p->defs[v];
		if ((nv = realloc(def->allow, (def->n_allow + c->n) *
		    sizeof(*nv))) == NULL) {
			pl_oom(l, c);
			return;
		}
		memset(nv + def->n_allow, 0, c->n * sizeof(*nv));
		def->allow = nv;
		for (it = c->first; it != NULL; it = it->next)
			pl_rule(l, it, &def->allow[def->n_allow++], 1);
	}
}

static void
pl_file(struct pload *l, const char *path)
{
	struct policy *p = l->p;
	struct ytree *t;
	const struct ynode *c;
	char *f;

	if (p->n_files >= PL_MAX_FILES) {
		diag_add(l->d, path, 0, 0, "too many policy files (more than "
		    "%d)", PL_MAX_FILES);
		l->c.nerr++;
		return;
	}
	if (pl_grow((void **)&p->files, &l->cap_files, p->n_files,
	    sizeof(char *)) == -1 || (f = strdup(path)) == NULL) {
		diag_add(l->d, path, 0, 0, "out of memory");
		l->c.nerr++;
		return;
	}
	p->files[p->n_files++] = f;
	l->c.file = f;
	if ((t = ytree_load_file(path, l->d)) == NULL) {
		l->c.nerr++;
		return;
	}
	l->c.nerr += t->nerr;
	if (t->root == NULL || ynode_is_null(t->root))
		goto out;
	if (t->root->type != YNODE_MAP) {
		ycheck_err(&l->c, t->root, "a policy document is a mapping of "
		    "sandboxes:, policies: and credentials:");
		goto out;
	}
	for (c = t->root->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "sandboxes") == 0)
			pl_section(l, c, pl_sandbox);
		else if (strcmp(c->key->str, "policies") == 0)
			pl_section(l, c, pl_policy);
		else if (strcmp(c->key->str, "credentials") == 0)
			pl_section(l, c, pl_credential);
		else if (strcmp(c->key->str, "approved") == 0)
			pl_approved(l, c);
		else
			ycheck_unknown_of(&l->c, c, "policy document (expected "
			    "sandboxes, policies or credentials)",
			    "sandboxes|policies|credentials|approved");
	}
out:
	ytree_free(t);
}

static int
pl_namecmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
pl_is_yaml_name(const char *s)
{
	size_t len = strlen(s);

	if (s[0] == '.')
		return 0;
	return (len > 5 && strcmp(s + len - 5, ".yaml") == 0) ||
	    (len > 4 && strcmp(s + len - 4, ".yml") == 0);
}

/* The *.yaml and *.yml files directly in dir, in byte order of their names. */
static void
pl_dir(struct pload *l, const char *dir, int top)
{
	struct dirent *de;
	struct stat st;
	char **names = NULL, path[PL_MAX_PATH];
	size_t n = 0, cap = 0, i, dl = strlen(dir);
	DIR *dp;
	int r;

	if ((dp = opendir(dir)) == NULL) {
		diag_add(l->d, dir, 0, 0, "cannot open: %s", strerror(errno));
		l->c.nerr++;
		return;
	}
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	while ((de = readdir(dp)) != NULL) {
		if (!pl_is_yaml_name(de->d_name))
			continue;
		r = snprintf(path, sizeof(path), "%.*s/%s", (int)dl, dir,
		    de->d_name);
		if (r < 0 || (size_t)r >= sizeof(path))
			continue;
		if (stat(path, &st) == -1 || !S_ISREG(st.st_mode))
			continue;
		if (n >= PL_MAX_FILES) {
			diag_add(l->d, dir, 0, 0, "too many policy files "
			    "(more than %d)", PL_MAX_FILES);
			l->c.nerr++;
			break;
		}
		if (pl_grow((void **)&names, &cap, n, sizeof(char *)) == -1 ||
		    (names[n] = strdup(path)) == NULL) {
			diag_add(l->d, dir, 0, 0, "out of memory");
			l->c.nerr++;
			break;
		}
		n++;
	}
	closedir(dp);
	if (n > 0)
		qsort(names, n, sizeof(char *), pl_namecmp);
	for (i = 0; i < n; i++) {
		pl_file(l, names[i]);
		free(names[i]);
	}
	free(names);
	/* A policies directory's approved/ (answers --always), after its files. */
	if (!top)
		return;
	r = snprintf(path, sizeof(path), "%.*s/approved", (int)dl, dir);
	if (r > 0 && (size_t)r < sizeof(path) && stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode))
		pl_dir(l, path, 0);
}

static void
pl_path(struct pload *l, const char *path, int missing_ok)
{
	struct stat st;

	if (stat(path, &st) == -1) {
		if (missing_ok && errno == ENOENT)
			return;
		diag_add(l->d, path, 0, 0, "cannot open: %s", strerror(errno));
		l->c.nerr++;
		return;
	}
	if (S_ISDIR(st.st_mode))
		pl_dir(l, path, 1);
	else
		pl_file(l, path);
}

/*
 * The launcher's --policy defaults to "default": a gateway that loaded no
 * policy of that name still has one, which allows nothing (docs/policy.md).
 * A loaded policy named "default" replaces it.
 */
static void
pl_implicit_default(struct pload *l)
{
	struct policy *p = l->p;
	struct policy_def *def;
	size_t v;

	if (pl_hash_get(&l->h_defs, POLICY_DEFAULT_NAME, &v))
		return;
	if (pl_grow((void **)&p->defs, &l->cap_defs, p->n_defs,
	    sizeof(*p->defs)) == -1)
		goto oom;
	def = &p->defs[p->n_defs];
	memset(def, 0, sizeof(*def));
	def->implicit = 1;
	if ((def->name = strdup(POLICY_DEFAULT_NAME)) == NULL ||
	    (def->dns_types = calloc(2, sizeof(uint16_t))) == NULL) {
		free(def->name);
		goto oom;
	}
	def->dns_types[0] = 1;		/* A */
	def->dns_types[1] = 28;		/* AAAA */
	def->n_dns_types = 2;
	p->n_defs++;
	if (pl_hash_put(&l->h_defs, def->name, p->n_defs - 1, &v) != -1)
		return;
oom:
	diag_add(l->d, NULL, 0, 0, "out of memory");
	l->c.nerr++;
}

/* Names used before (or without) their definition, once all files are read. */
static void
pl_resolve(struct pload *l)
{
	char e1[80], e2[80];
	size_t i, v;

	for (i = 0; i < l->n_sb_refs; i++) {
		if (pl_hash_get(&l->h_defs, l->sb_refs[i].name, &v))
			continue;
		diag_add(l->d, l->sb_refs[i].pos.file, l->sb_refs[i].pos.line,
		    l->sb_refs[i].pos.col, "policy: no policy is named \"%s\"",
		    ycheck_esc(l->sb_refs[i].name, e1, sizeof(e1)));
		l->c.nerr++;
	}
	for (i = 0; i < l->n_cred_refs; i++) {
		if (pl_hash_get(&l->h_creds, l->cred_refs[i].name, &v))
			continue;
		diag_add(l->d, l->cred_refs[i].pos.file,
		    l->cred_refs[i].pos.line, l->cred_refs[i].pos.col,
		    "credentials: policy \"%s\" lists credential \"%s\", "
		    "which is not defined",
		    ycheck_esc(l->cred_refs[i].owner, e1, sizeof(e1)),
		    ycheck_esc(l->cred_refs[i].name, e2, sizeof(e2)));
		l->c.nerr++;
	}
}

static void
pl_free_rules(struct policy_rule *r, size_t n)
{
	size_t i, j;

	for (i = 0; r != NULL && i < n; i++) {
		free(r[i].host);
		free(r[i].ports);
		for (j = 0; j < r[i].n_methods; j++)
			free(r[i].methods[j]);
		free(r[i].methods);
		for (j = 0; j < r[i].n_paths; j++)
			free(r[i].paths[j]);
		free(r[i].paths);
		for (j = 0; j < r[i].n_git_push; j++)
			free(r[i].git_push[j]);
		free(r[i].git_push);
	}
	free(r);
}

static void
pl_free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

/* Everything the loader allocated; the matcher's indexes are freed before. */
static void
pl_free_policy(struct policy *p)
{
	struct policy_def *def;
	size_t i, j;

	if (p == NULL)
		return;
	for (i = 0; i < p->n_defs; i++) {
		def = &p->defs[i];
		free(def->name);
		pl_free_rules(def->allow, def->n_allow);
		pl_free_rules(def->deny, def->n_deny);
		for (j = 0; j < def->n_priv; j++)
			free(def->priv[j].host);
		free(def->priv);
		free(def->dns_types);
		free(def->country_deny);
		free(def->asn_deny);
		pl_free_strv(def->credentials, def->n_credentials);
		policy_dlp_free(def->dlp);
	}
	free(p->defs);
	for (i = 0; i < p->n_sandboxes; i++) {
		free(p->sandboxes[i].policy);
		free(p->sandboxes[i].sources);
	}
	free(p->sandboxes);
	for (i = 0; i < p->n_creds; i++) {
		free(p->creds[i].name);
		free(p->creds[i].secret);
		free(p->creds[i].prev_name);
		pl_free_strv(p->creds[i].hosts, p->creds[i].n_hosts);
		pl_free_strv(p->creds[i].headers, p->creds[i].n_headers);
		free(p->creds[i].env);
		free(p->creds[i].secret_env);
		free(p->creds[i].placeholder);
		pl_free_strv(p->creds[i].scope_methods,
		    p->creds[i].n_scope_methods);
		pl_free_strv(p->creds[i].scope_paths, p->creds[i].n_scope_paths);
		free(p->creds[i].shape_prefix);
		policy_oauth2_free(p->creds[i].oauth2);
	}
	free(p->creds);
	pl_free_strv(p->files, p->n_files);
	free(p);
}

static struct policy *
pl_load(char *const *paths, int n, int missing_ok, struct diag *d)
{
	struct pload l;
	struct policy *p;
	size_t d0 = d->n;
	int i;

	memset(&l, 0, sizeof(l));
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		diag_add(d, NULL, 0, 0, "out of memory");
		return NULL;
	}
	atomic_init(&p->refcnt, 1);
	l.p = p;
	l.d = d;
	l.c.d = d;
	for (i = 0; i < n; i++)
		if (paths[i] != NULL)
			pl_path(&l, paths[i], missing_ok);
	pl_implicit_default(&l);
	pl_resolve(&l);
	pl_hash_free(&l.h_defs);
	pl_hash_free(&l.h_sb);
	pl_hash_free(&l.h_creds);
	pl_hash_free(&l.h_ph);
	free(l.def_pos);
	free(l.cred_pos);
	free(l.sb_refs);
	free(l.cred_refs);
	if (l.c.nerr > 0 || d->n > d0) {
		ycheck_sort(d, d0);
		pl_free_policy(p);
		return NULL;
	}
	if (policy_index_build(p, d) == -1 || d->n > d0) {
		policy_index_free(p);
		pl_free_policy(p);
		return NULL;
	}
	return p;
}

struct policy *
policy_load_paths(char *const *paths, int n, struct diag *d)
{
	return pl_load(paths, n, 0, d);
}

struct policy *
policy_load(const struct config *cfg, struct diag *d)
{
	if (cfg == NULL) {
		diag_add(d, NULL, 0, 0, "no configuration");
		return NULL;
	}
	/*
	 * Built-in defaults name ./policies; without that directory they
	 * still mean "deny everything", not an error (sandgate(8)).
	 */
	return pl_load(cfg->policy_paths, cfg->n_policy_paths,
	    cfg->file == NULL, d);
}

void
policy_ref(struct policy *p)
{
	if (p != NULL)
		atomic_fetch_add_explicit(&p->refcnt, 1, memory_order_relaxed);
}

void
policy_unref(struct policy *p)
{
	if (p == NULL)
		return;
	if (atomic_fetch_sub_explicit(&p->refcnt, 1,
	    memory_order_acq_rel) != 1)
		return;
	policy_index_free(p);
	pl_free_policy(p);
}

void
policy_counts(const struct policy *p, struct policy_counts *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < p->n_defs; i++) {
		c->rules += p->defs[i].n_allow + p->defs[i].n_deny;
		c->policies += !p->defs[i].implicit;
		c->report += p->defs[i].report != 0;
	}
	c->files = p->n_files;
	c->sandboxes = p->n_sandboxes;
	c->credentials = p->n_creds;
}

void
policy_summary(const struct policy *p, char *buf, size_t len)
{
	size_t i, rules = 0, defs = 0, report = 0;
	int implicit = 0, n;

	for (i = 0; i < p->n_defs; i++) {
		rules += p->defs[i].n_allow + p->defs[i].n_deny;
		defs += !p->defs[i].implicit;
		implicit |= p->defs[i].implicit;
		report += p->defs[i].report != 0;
	}
	n = snprintf(buf, len, "%zu file%s, %zu sandbox%s, %zu polic%s%s, "
	    "%zu rule%s, %zu credential%s",
	    p->n_files, p->n_files == 1 ? "" : "s",
	    p->n_sandboxes, p->n_sandboxes == 1 ? "" : "es",
	    defs, defs == 1 ? "y" : "ies",
	    implicit ? " (+ the implicit deny-all \"default\")" : "",
	    rules, rules == 1 ? "" : "s",
	    p->n_creds, p->n_creds == 1 ? "" : "s");
	/* Said wherever the summary is: its denials are not enforced. */
	if (report > 0 && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; %zu polic%s in mode: report "
		    "(denials logged, not enforced)", report,
		    report == 1 ? "y" : "ies");
}
