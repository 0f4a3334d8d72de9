/*
 * The decision engine over a loaded struct policy: per-policy indexes of
 * names and prefixes (cost O(labels), not O(rules)), identification of a
 * client by source address or token, and docs/policy.md "How a decision is
 * made", steps 1-4.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/hash.h"
#include "core/policy_int.h"
#include "core/reason.h"

/*
 * Rule (or allow_private entry) indexes for one name: those naming it
 * exactly and those naming it as a "*." wildcard, each ascending.
 */
struct name_entry {
	const char	*name;		/* borrowed from the rule */
	size_t		 len;
	int		*exact;
	size_t		 n_exact, cap_exact;
	int		*wild;
	size_t		 n_wild, cap_wild;
};

/*
 * Open addressing over small slots (a tag from the hash and an entry
 * number), so that a probe that misses touches one cache line and no
 * entry: with 100,000 names the table no longer fits in cache.
 */
struct name_slot {
	uint32_t	 tag;
	uint32_t	 ent;		/* index into ents + 1; 0: empty */
};

struct policy_index {
	struct name_slot *slots;	/* cap: a power of two, half full */
	size_t		 cap;
	struct name_entry *ents;
	size_t		 n_ents;
	struct cidr_set	*cidrs;
};

/*
 * FNV-1a over the bytes from last to first, so that walking a name from
 * its end yields the hash of every suffix on the way: one pass per lookup.
 * Unkeyed: the names are the operator's, from the policy.
 */
static uint64_t
name_hash(const char *s, size_t len)
{
	uint64_t h = HASH_FNV1A_INIT;

	while (len > 0)
		h = hash_fnv1a_step(h, (unsigned char)s[--len]);
	return h;
}

/* The slot holding name, or the empty slot where it would go. */
static struct name_slot *
index_slot(const struct policy_index *idx, const char *s, size_t len,
    uint64_t h)
{
	struct name_slot *sl;
	const struct name_entry *e;
	uint32_t tag = (uint32_t)(h >> 32);
	size_t i;

	for (i = h & (idx->cap - 1); ; i = (i + 1) & (idx->cap - 1)) {
		sl = &idx->slots[i];
		if (sl->ent == 0)
			return sl;
		if (sl->tag != tag)
			continue;
		e = &idx->ents[sl->ent - 1];
		if (e->len == len && memcmp(e->name, s, len) == 0)
			return sl;
	}
}

static const struct name_entry *
index_find(const struct policy_index *idx, const char *s, size_t len,
    uint64_t h)
{
	const struct name_slot *sl;

	if (idx == NULL || idx->cap == 0)
		return NULL;
	sl = index_slot(idx, s, len, h);
	return sl->ent == 0 ? NULL : &idx->ents[sl->ent - 1];
}

static int
list_push(int **v, size_t *n, size_t *cap, int value)
{
	size_t ncap;
	int *nv;

	if (*n == *cap) {
		ncap = *cap ? *cap * 2 : 2;
		if ((nv = realloc(*v, ncap * sizeof(**v))) == NULL)
			return -1;
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = value;
	return 0;
}

/* The table and entries were sized for every name up front. */
static int
index_add_name(struct policy_index *idx, const char *name, int wildcard,
    int value)
{
	struct name_slot *sl;
	struct name_entry *e;
	size_t len = strlen(name);
	uint64_t h = name_hash(name, len);

	sl = index_slot(idx, name, len, h);
	if (sl->ent == 0) {
		e = &idx->ents[idx->n_ents++];
		e->name = name;
		e->len = len;
		sl->tag = (uint32_t)(h >> 32);
		sl->ent = (uint32_t)idx->n_ents;
	}
	e = &idx->ents[sl->ent - 1];
	if (wildcard)
		return list_push(&e->wild, &e->n_wild, &e->cap_wild, value);
	return list_push(&e->exact, &e->n_exact, &e->cap_exact, value);
}

static void
index_free(struct policy_index *idx)
{
	size_t i;

	if (idx == NULL)
		return;
	for (i = 0; i < idx->n_ents; i++) {
		free(idx->ents[i].exact);
		free(idx->ents[i].wild);
	}
	free(idx->ents);
	free(idx->slots);
	cidr_set_free(idx->cidrs);
	free(idx);
}

static struct policy_index *
index_new(size_t n_names)
{
	struct policy_index *idx;
	size_t cap = 8;

	if (n_names >= UINT32_MAX / 4)
		return NULL;
	while (cap < 2 * n_names)
		cap *= 2;
	if ((idx = calloc(1, sizeof(*idx))) == NULL)
		return NULL;
	idx->slots = calloc(cap, sizeof(*idx->slots));
	idx->ents = calloc(n_names ? n_names : 1, sizeof(*idx->ents));
	idx->cidrs = cidr_set_new();
	if (idx->slots == NULL || idx->ents == NULL || idx->cidrs == NULL) {
		index_free(idx);
		return NULL;
	}
	idx->cap = cap;
	return idx;
}

static struct policy_index *
index_rules(const struct policy_rule *r, size_t n)
{
	struct policy_index *idx;
	size_t i;
	int rc;

	if ((idx = index_new(n)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (r[i].kind == RULE_CIDR)
			rc = cidr_set_add(idx->cidrs, &r[i].cidr, (int)i);
		else if (r[i].host != NULL)
			rc = index_add_name(idx, r[i].host, r[i].wildcard,
			    (int)i);
		else
			rc = 0;
		if (rc == -1) {
			index_free(idx);
			return NULL;
		}
	}
	return idx;
}

static struct policy_index *
index_private(const struct policy_private *pv, size_t n)
{
	struct policy_index *idx;
	size_t i;
	int rc;

	if ((idx = index_new(n)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (!pv[i].is_name)
			rc = cidr_set_add(idx->cidrs, &pv[i].cidr, (int)i);
		else if (pv[i].host != NULL)
			rc = index_add_name(idx, pv[i].host, pv[i].wildcard,
			    (int)i);
		else
			rc = 0;
		if (rc == -1) {
			index_free(idx);
			return NULL;
		}
	}
	return idx;
}

/* Does a "*.x" (x = host, "" for a bare "*") or exact entry cover name? */
static int
name_covered(const char *host, int wildcard, const char *name)
{
	size_t hl = strlen(host), nl = strlen(name);

	if (!wildcard)
		return strcmp(host, name) == 0;
	if (hl == 0)
		return nl > 0;
	return nl > hl + 1 && name[nl - hl - 1] == '.' &&
	    memcmp(name + nl - hl, host, hl) == 0;
}

/*
 * The lowest entry index in [0, n) accepted by ok() whose name or prefix
 * covers the target; -1 when none. With an index: the exact entry for the
 * name, then the wildcard entries of every proper suffix (and of the root,
 * a bare "*"), or the prefixes containing the IP. Without one, a scan.
 */
struct first_ctx {
	int		 (*ok)(int, void *);
	void		*arg;
	int		 best;
};

static int
first_cidr_cb(int value, void *arg)
{
	struct first_ctx *c = arg;

	if ((c->best == -1 || value < c->best) && c->ok(value, c->arg))
		c->best = value;
	return 0;
}

static void
first_in_list(const int *v, size_t n, struct first_ctx *c)
{
	size_t i;

	/* Lists are ascending: the first acceptable one is that list's best. */
	for (i = 0; i < n; i++) {
		if (c->best != -1 && v[i] >= c->best)
			return;
		if (c->ok(v[i], c->arg)) {
			c->best = v[i];
			return;
		}
	}
}

static int
index_first(const struct policy_index *idx, const struct policy_target *t,
    int (*ok)(int, void *), void *arg)
{
	struct first_ctx c = { ok, arg, -1 };
	const struct name_entry *e;
	const char *name = t->host;
	size_t len = strlen(name), i;
	uint64_t h = HASH_FNV1A_INIT;

	if (t->is_ip) {
		cidr_set_lookup(idx->cidrs, &t->ip, first_cidr_cb, &c);
		return c.best;
	}
	for (i = len; i > 0; i--) {
		if (name[i - 1] == '.' && (e = index_find(idx, name + i,
		    len - i, h)) != NULL)
			first_in_list(e->wild, e->n_wild, &c);
		h = hash_fnv1a_step(h, (unsigned char)name[i - 1]);
	}
	if ((e = index_find(idx, name, len, h)) != NULL)
		first_in_list(e->exact, e->n_exact, &c);
	if ((e = index_find(idx, "", 0, HASH_FNV1A_INIT)) != NULL)
		first_in_list(e->wild, e->n_wild, &c);
	return c.best;
}

static int
rule_covers(const struct policy_rule *r, const struct policy_target *t)
{
	if (t->is_ip)
		return r->kind == RULE_CIDR && cidr_contains(&r->cidr, &t->ip);
	return r->kind == RULE_HOST && r->host != NULL &&
	    name_covered(r->host, r->wildcard, t->host);
}

static int
scan_first(const struct policy_rule *r, size_t n, const struct policy_target *t,
    int (*ok)(int, void *), void *arg)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rule_covers(&r[i], t) && ok((int)i, arg))
			return (int)i;
	return -1;
}

static int
same_cidr(const struct cidr *a, const struct cidr *b)
{
	return a->bits == b->bits && netaddr_cmp(&a->addr, &b->addr) == 0;
}

struct dup_ctx {
	const struct policy	*p;
	const struct cidr	*c;
	size_t			 self;
	int			 other;
};

static int
dup_cb(int value, void *arg)
{
	struct dup_ctx *dc = arg;
	const struct policy_sandbox *sb = &dc->p->sandboxes[value];
	size_t j;

	if ((size_t)value == dc->self)
		return 0;
	for (j = 0; j < sb->n_sources; j++) {
		if (same_cidr(&sb->sources[j], dc->c)) {
			dc->other = value;
			return 1;
		}
	}
	return 0;
}

static int
build_source_idx(struct policy *p, struct diag *d)
{
	struct policy_sandbox *sb;
	struct dup_ctx dc;
	char buf[NETADDR_STRLEN + 4] = "?";
	size_t i, j;
	int rc = 0;

	cidr_set_free(p->source_idx);
	if ((p->source_idx = cidr_set_new()) == NULL)
		goto oom;
	for (i = 0; i < p->n_sandboxes; i++) {
		sb = &p->sandboxes[i];
		for (j = 0; j < sb->n_sources; j++) {
			dc.p = p;
			dc.c = &sb->sources[j];
			dc.self = i;
			dc.other = -1;
			cidr_set_lookup(p->source_idx, &dc.c->addr, dup_cb,
			    &dc);
			if (dc.other != -1) {
				cidr_ntop(dc.c, buf, sizeof(buf));
				diag_add(d, sb->file, sb->line, sb->col,
				    "sandbox %s: source %s is already claimed "
				    "by sandbox %s", sb->id, buf,
				    p->sandboxes[dc.other].id);
				rc = -1;
				continue;
			}
			if (cidr_set_add(p->source_idx, dc.c, (int)i) == -1)
				goto oom;
		}
	}
	return rc;
oom:
	diag_add(d, NULL, 0, 0, "out of memory building the source index");
	return -1;
}

static int	resolve_credentials(struct policy *);

int
policy_index_build(struct policy *p, struct diag *d)
{
	struct policy_def *def;
	size_t i;

	for (i = 0; i < p->n_defs; i++) {
		def = &p->defs[i];
		index_free(def->allow_idx);
		index_free(def->deny_idx);
		index_free(def->priv_idx);
		def->allow_idx = index_rules(def->allow, def->n_allow);
		def->deny_idx = index_rules(def->deny, def->n_deny);
		def->priv_idx = index_private(def->priv, def->n_priv);
		if (def->allow_idx == NULL || def->deny_idx == NULL ||
		    def->priv_idx == NULL)
			goto oom;
	}
	if (resolve_credentials(p) == -1)
		goto oom;
	return build_source_idx(p, d);
oom:
	diag_add(d, NULL, 0, 0, "out of memory building the policy indexes");
	return -1;
}

void
policy_index_free(struct policy *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n_defs; i++) {
		index_free(p->defs[i].allow_idx);
		index_free(p->defs[i].deny_idx);
		index_free(p->defs[i].priv_idx);
		p->defs[i].allow_idx = NULL;
		p->defs[i].deny_idx = NULL;
		p->defs[i].priv_idx = NULL;
		free(p->defs[i].cred_ptrs);
		p->defs[i].cred_ptrs = NULL;
	}
	cidr_set_free(p->source_idx);
	p->source_idx = NULL;
}

/* Identification. */

static int
fill_identity(const struct policy_sandbox *sb, struct policy_identity *out)
{
	/* A truncated policy name could name another policy: refuse. */
	if (sb->policy == NULL || strlen(sb->policy) > POLICY_NAME_MAX ||
	    strlen(sb->id) > POLICY_ID_MAX)
		return -1;
	memset(out, 0, sizeof(*out));
	memcpy(out->sandbox, sb->id, strlen(sb->id));
	memcpy(out->policy, sb->policy, strlen(sb->policy));
	out->ask = sb->ask;
	return 0;
}

static int
longest_cb(int value, void *arg)
{
	/* Visited shortest prefix first: the last one seen is the longest. */
	*(int *)arg = value;
	return 0;
}

int
policy_identify_source(const struct policy *p, const struct netaddr *src,
    struct policy_identity *out)
{
	if (p == NULL || src == NULL)
		return -1;
	if (policy_registry_lookup(src, out) == 0)
		return 0;
	return policy_static_source(p, src, out);
}

int
policy_static_source(const struct policy *p, const struct netaddr *src,
    struct policy_identity *out)
{
	const struct policy_sandbox *sb;
	size_t i, j;
	int best = -1, bestbits = -1;

	if (p == NULL || src == NULL)
		return -1;
	if (p->source_idx != NULL)
		cidr_set_lookup(p->source_idx, src, longest_cb, &best);
	else {
		for (i = 0; i < p->n_sandboxes; i++) {
			sb = &p->sandboxes[i];
			for (j = 0; j < sb->n_sources; j++) {
				if (cidr_contains(&sb->sources[j], src) &&
				    sb->sources[j].bits > bestbits) {
					best = (int)i;
					bestbits = sb->sources[j].bits;
				}
			}
		}
	}
	if (best == -1)
		return -1;
	return fill_identity(&p->sandboxes[best], out);
}

int
policy_identify_token(const struct policy *p, const char *id, size_t idlen,
    const char *token, size_t tokenlen, struct policy_identity *out)
{
	static const unsigned char nothing[32];
	const struct policy_sandbox *sb;
	unsigned char md[EVP_MAX_MD_SIZE];
	const unsigned char *want = nothing;
	unsigned int mdlen = 0;
	size_t i;
	int found = -1, hashed;

	/* Hash first and always, so the time taken does not tell whether
	 * the id exists or has a token. */
	hashed = EVP_Digest(token ? token : "", token ? tokenlen : 0, md,
	    &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32;
	if (p != NULL && id != NULL) {
		for (i = 0; i < p->n_sandboxes; i++) {
			sb = &p->sandboxes[i];
			if (found == -1 && strlen(sb->id) == idlen &&
			    memcmp(sb->id, id, idlen) == 0)
				found = (int)i;
		}
	}
	if (found != -1 && p->sandboxes[found].has_token)
		want = p->sandboxes[found].token_sha256;
	if (CRYPTO_memcmp(md, want, 32) != 0 || !hashed || want == nothing)
		return -1;
	return fill_identity(&p->sandboxes[found], out);
}

int
policy_identity_by_id(const struct policy *p, const char *id,
    struct policy_identity *out)
{
	size_t i;

	if (p == NULL || id == NULL)
		return -1;
	for (i = 0; i < p->n_sandboxes; i++)
		if (strcmp(p->sandboxes[i].id, id) == 0)
			return fill_identity(&p->sandboxes[i], out);
	return -1;
}

/* Targets. */

static int
host_char_ok(unsigned char c)
{
	return c > 0x20 && c != 0x7f && c != '%' && c != '/' && c != '@' &&
	    c != '\\';
}

int
policy_target_init(struct policy_target *t, const char *host, size_t len,
    uint16_t port)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	t->port = port;
	if (host == NULL || len == 0 || len > 1024)
		return -1;
	for (i = 0; i < len; i++)
		if (!host_char_ok((unsigned char)host[i]))
			return -1;
	if (netaddr_parse(host, len, &t->ip) == 0) {
		t->is_ip = 1;
		if (netaddr_ntop(&t->ip, t->host, sizeof(t->host)) == NULL)
			goto fail;
		return 0;
	}
	/* Brackets and colons belong to IPv6 literals only. */
	if (memchr(host, ':', len) != NULL || memchr(host, '[', len) != NULL ||
	    memchr(host, ']', len) != NULL)
		goto fail;
	/* Rejects names ending in an all-numeric label that was not a valid
	 * IPv4 form (1.2.3.999): a resolver might still read them as one. */
	if (policy_name_normalize(host, len, t->host, sizeof(t->host)) == -1)
		goto fail;
	return 0;
fail:
	memset(t, 0, sizeof(*t));
	t->port = port;
	return -1;
}

/* Decisions. */

static const struct policy_def *
find_def(const struct policy *p, const char *name)
{
	size_t i;

	if (p == NULL || name == NULL)
		return NULL;
	for (i = 0; i < p->n_defs; i++)
		if (strcmp(p->defs[i].name, name) == 0)
			return &p->defs[i];
	return NULL;
}

static void
verdict_deny(struct policy_verdict *v, const char *rule, enum sg_reason reason)
{
	v->allow = 0;
	snprintf(v->rule, sizeof(v->rule), "%s", rule);
	v->reason = reason;
}

struct req_ctx {
	const struct policy_rule *rules;
	uint16_t	 port;
	const char	*method;	/* NULL: not given */
	const char	*path;		/* canonical; NULL: not given or not OK */
	size_t		 pathlen;
	int		 path_bad;	/* given but malformed or too long */
	int		 path_ambiguous;	/* given, read differently by servers */
	int		 deferred;	/* a deny rule waited for method/path */
	int		 scoped;	/* a deny rule for this host limits methods or paths */
};

static int
port_ok(const struct policy_rule *r, uint16_t port)
{
	size_t i;

	/* Port 0: "any port" (DNS decides names, not connections). */
	if (r->n_ports == 0 || port == 0)
		return 1;
	for (i = 0; i < r->n_ports; i++)
		if (r->ports[i] == port)
			return 1;
	return 0;
}

/* Allow: exact method; deny: any case, so "post" cannot dodge a POST deny. */
static int
method_in(const struct policy_rule *r, const char *m, int deny)
{
	size_t i;

	for (i = 0; i < r->n_methods; i++)
		if (deny ? strcasecmp(r->methods[i], m) == 0 :
		    strcmp(r->methods[i], m) == 0)
			return 1;
	return 0;
}

static int
path_in(const struct policy_rule *r, const char *path, size_t len)
{
	size_t i;

	for (i = 0; i < r->n_paths; i++)
		if (policy_glob_match(r->paths[i], path, len))
			return 1;
	return 0;
}

static int
deny_ok(int i, void *arg)
{
	struct req_ctx *c = arg;
	const struct policy_rule *r = &c->rules[i];

	if (!port_ok(r, c->port))
		return 0;
	/*
	 * It could apply to another request on this connection (after an
	 * upgrade the gateway would not read): each must be seen.
	 */
	if (r->n_methods > 0 || r->n_paths > 0)
		c->scoped = 1;
	if ((r->n_methods > 0 && c->method == NULL) ||
	    (r->n_paths > 0 && c->path == NULL && !c->path_bad &&
	    !c->path_ambiguous)) {
		c->deferred = 1;
		return 0;
	}
	if (r->n_methods > 0 && !method_in(r, c->method, 1))
		return 0;
	/*
	 * A path we cannot read, or cannot read as the origin will, is
	 * denied by any path deny rule that could apply to it.
	 */
	if (r->n_paths > 0 && c->path != NULL &&
	    !path_in(r, c->path, c->pathlen))
		return 0;
	return 1;
}

static int
allow_ok(int i, void *arg)
{
	struct req_ctx *c = arg;
	const struct policy_rule *r = &c->rules[i];

	if (!port_ok(r, c->port))
		return 0;
	if (r->n_methods > 0 && c->method != NULL &&
	    !method_in(r, c->method, 0))
		return 0;
	if (r->n_paths > 0 && c->path_bad)
		return 0;
	/* An ambiguous path stops at the first path rule that could apply. */
	if (r->n_paths > 0 && c->path != NULL &&
	    !path_in(r, c->path, c->pathlen))
		return 0;
	return 1;
}

static int
first_match(const struct policy_index *idx, const struct policy_rule *r,
    size_t n, const struct policy_target *t, int (*ok)(int, void *),
    struct req_ctx *c)
{
	c->rules = r;
	if (idx != NULL)
		return index_first(idx, t, ok, c);
	return scan_first(r, n, t, ok, c);
}

int
policy_decide(const struct policy *p, const struct policy_identity *id,
    const struct policy_target *t, const char *method, const char *path,
    struct policy_verdict *v)
{
	const struct policy_def *def;
	const struct policy_rule *r;
	struct req_ctx c;
	char norm[POLICY_PATH_MAX];
	int n;

	memset(v, 0, sizeof(*v));
	if (id == NULL) {
		verdict_deny(v, "no-identity", REASON_NO_IDENTITY);
		return 0;
	}
	if ((def = find_def(p, id->policy)) == NULL) {
		verdict_deny(v, "default-deny", REASON_UNKNOWN_POLICY);
		return 0;
	}
	if (t == NULL || (!t->is_ip && t->host[0] == '\0')) {
		verdict_deny(v, "default-deny", REASON_INVALID_HOST);
		return 0;
	}
	memset(&c, 0, sizeof(c));
	c.port = t->port;
	c.method = method;
	if (path != NULL) {
		switch (policy_path_canon(path, strlen(path), norm,
		    sizeof(norm), &c.pathlen)) {
		case POLICY_PATH_OK:
			c.path = norm;
			break;
		case POLICY_PATH_AMBIGUOUS:
			c.path_ambiguous = 1;
			break;
		case POLICY_PATH_BAD:
			c.path_bad = 1;
			break;
		}
	}
	v->report_mode = def->report;
	n = first_match(def->deny_idx, def->deny, def->n_deny, t, deny_ok, &c);
	if (n != -1) {
		snprintf(v->rule, sizeof(v->rule), "%s:deny[%d]", def->name, n);
		v->reason = c.path_ambiguous && def->deny[n].n_paths > 0 ?
		    REASON_AMBIGUOUS_PATH : REASON_POLICY_DENY;
		if (!policy_verdict_report(v, v->reason))
			return 0;
		v->reason = REASON_NONE;
	}
	n = first_match(def->allow_idx, def->allow, def->n_allow, t, allow_ok,
	    &c);
	if (n == -1) {
		if (v->report == REASON_NONE &&
		    !policy_verdict_report(v, REASON_POLICY_DENY)) {
			verdict_deny(v, "default-deny", REASON_POLICY_DENY);
			v->ask = def->ask || id->ask;
			return 0;
		}
		/* Reported: passed through as no rule says otherwise. */
		if (v->rule[0] == '\0')
			snprintf(v->rule, sizeof(v->rule), "default-deny");
		v->allow = 1;
		v->inspect = c.deferred || c.scoped;
		return 1;
	}
	r = &def->allow[n];
	/* The rule that matched host, port and method looks at the path. */
	if (c.path_ambiguous && r->n_paths > 0) {
		snprintf(v->rule, sizeof(v->rule), "%s:allow[%d]", def->name, n);
		v->reason = REASON_AMBIGUOUS_PATH;
		v->report = REASON_NONE;
		return 0;
	}
	v->allow = 1;
	/* A reported verdict names the rule that would have denied. */
	if (v->report == REASON_NONE)
		snprintf(v->rule, sizeof(v->rule), "%s:allow[%d]", def->name,
		    n);
	snprintf(v->allow_rule, sizeof(v->allow_rule), "%s:allow[%d]",
	    def->name, n);
	v->tls = r->tls;
	v->opaque = r->opaque;
	/* Also when a request-level deny rule could still apply. */
	v->inspect = r->n_methods > 0 || r->n_paths > 0 || r->git ||
	    c.deferred || c.scoped;
	return 1;
}

int
policy_report_relaxes(enum sg_reason r)
{
	switch (r) {
	case REASON_POLICY_DENY:
	case REASON_NEEDS_INTERCEPT:
	case REASON_PROTOCOL_DENY:
	case REASON_SNI_MISSING:
	case REASON_COUNTRY_DENY:
	case REASON_ASN_DENY:
		return 1;
	default:
		return 0;
	}
}

int
policy_verdict_report(struct policy_verdict *v, enum sg_reason r)
{
	if (!v->report_mode || !policy_report_relaxes(r))
		return 0;
	if (v->report == REASON_NONE)
		v->report = r;
	return 1;
}

struct priv_ctx {
	int	hit;
};

static int
any_cb(int value, void *arg)
{
	((struct priv_ctx *)arg)->hit = 1;
	return 1;
}

static int
always_ok(int i, void *arg)
{
	return 1;
}

/* May this policy reach a (for target t)? */
static int
addr_reachable(const struct policy_def *def, const struct policy_target *t,
    const struct netaddr *a)
{
	struct priv_ctx pc = { 0 };
	size_t i;

	if (!netaddr_is_internal(a))
		return 1;
	if (def->priv_idx != NULL) {
		cidr_set_lookup(def->priv_idx->cidrs, a, any_cb, &pc);
		if (pc.hit)
			return 1;
		/* Names count for names only: an IP target has no name. */
		return !t->is_ip &&
		    index_first(def->priv_idx, t, always_ok, NULL) != -1;
	}
	for (i = 0; i < def->n_priv; i++) {
		if (!def->priv[i].is_name &&
		    cidr_contains(&def->priv[i].cidr, a))
			return 1;
		if (def->priv[i].is_name && !t->is_ip && def->priv[i].host &&
		    name_covered(def->priv[i].host, def->priv[i].wildcard,
		    t->host))
			return 1;
	}
	return 0;
}

/*
 * A denial here keeps v->rule naming the allow rule that matched in step 3,
 * so the audit row shows which rule the address check overrode.
 */
int
policy_check_addrs(const struct policy *p, const struct policy_identity *id,
    const struct policy_target *t, const struct netaddr *addrs, size_t n,
    struct policy_verdict *v)
{
	const struct policy_def *def;
	size_t i;

	if (!v->allow)
		return 0;
	if (id == NULL) {
		verdict_deny(v, "no-identity", REASON_NO_IDENTITY);
		return 0;
	}
	if ((def = find_def(p, id->policy)) == NULL) {
		verdict_deny(v, "default-deny", REASON_UNKNOWN_POLICY);
		return 0;
	}
	/* An IP target is checked itself, whatever the caller passed. */
	if (t->is_ip && !addr_reachable(def, t, &t->ip))
		goto prohibited;
	if (n == 0 && !t->is_ip) {
		v->allow = 0;
		v->reason = REASON_DNS_ERROR;
		return 0;
	}
	for (i = 0; i < n; i++)
		if (!addr_reachable(def, t, &addrs[i]))
			goto prohibited;
	return 1;
prohibited:
	v->allow = 0;
	v->reason = REASON_IP_PROHIBITED;
	return 0;
}

int
policy_decide_dns(const struct policy *p, const struct policy_identity *id,
    const struct policy_target *t, uint16_t qtype, struct policy_verdict *v)
{
	const struct policy_def *def;
	struct policy_target any = *t;
	size_t i;

	memset(v, 0, sizeof(*v));
	if (id == NULL) {
		verdict_deny(v, "no-identity", REASON_NO_IDENTITY);
		return -1;
	}
	if ((def = find_def(p, id->policy)) == NULL) {
		verdict_deny(v, "default-deny", REASON_UNKNOWN_POLICY);
		return 0;
	}
	for (i = 0; i < def->n_dns_types; i++)
		if (def->dns_types[i] == qtype)
			break;
	if (i == def->n_dns_types) {
		verdict_deny(v, "default-deny", REASON_DNS_TYPE);
		return -1;
	}
	any.port = 0;
	return policy_decide(p, id, &any, NULL, NULL, v);
}

const struct policy_credential *const *
policy_credentials(const struct policy *p, const char *policy_name, size_t *n)
{
	const struct policy_def *def = find_def(p, policy_name);

	*n = 0;
	if (def == NULL || def->cred_ptrs == NULL)
		return NULL;
	*n = def->n_credentials;
	return def->cred_ptrs;
}

const struct policy_credential *
policy_all_credentials(const struct policy *p, size_t *n)
{
	*n = p->n_creds;
	return p->creds;
}

int
policy_credential_bound(const struct policy_credential *c, const char *host)
{
	size_t i;

	for (i = 0; i < c->n_hosts; i++)
		if (strcmp(c->hosts[i], host) == 0)
			return 1;
	return 0;
}

int
policy_credential_header(const struct policy_credential *c, const char *name,
    size_t len)
{
	size_t i;

	for (i = 0; i < c->n_headers; i++)
		if (strlen(c->headers[i]) == len &&
		    strncasecmp(c->headers[i], name, len) == 0)
			return 1;
	return 0;
}

void
policy_foreach_sandbox(const struct policy *p,
    void (*cb)(const char *id, const char *policy, void *arg), void *arg)
{
	size_t i;

	for (i = 0; i < p->n_sandboxes; i++)
		cb(p->sandboxes[i].id, p->sandboxes[i].policy, arg);
}

/* Credential names resolved to pointers once, so requests never search by name. */
static int
resolve_credentials(struct policy *p)
{
	size_t i, j, k;

	for (i = 0; i < p->n_defs; i++) {
		struct policy_def *def = &p->defs[i];

		free(def->cred_ptrs);
		def->cred_ptrs = NULL;
		if (def->n_credentials == 0)
			continue;
		def->cred_ptrs = calloc(def->n_credentials, sizeof(*def->cred_ptrs));
		if (def->cred_ptrs == NULL)
			return -1;
		for (j = 0; j < def->n_credentials; j++)
			for (k = 0; k < p->n_creds; k++)
				if (strcmp(p->creds[k].name, def->credentials[j]) == 0)
					def->cred_ptrs[j] = &p->creds[k];
		for (j = 0; j < def->n_credentials; j++)
			if (def->cred_ptrs[j] == NULL)
				return -1;	/* the loader checks names: not reached */
	}
	return 0;
}

int
policy_has(const struct policy *p, const char *policy_name)
{
	return find_def(p, policy_name) != NULL;
}
