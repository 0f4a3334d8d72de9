/*
 * Public Suffix List parsing and the eTLD+1 lookup (psl.h). Rules are kept
 * sorted by (name, kind) and found by binary search; the algorithm is the
 * list's own: an exception rule wins, else the longest matching rule,
 * else the implicit "*" (the last label).
 */
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"
#include "core/psl.h"

enum psl_kind { PSL_NORMAL, PSL_WILDCARD, PSL_EXCEPTION };

struct psl_rule {
	char		*name;		/* A-labels; for a wildcard, the part after "*." */
	enum psl_kind	 kind;
};

struct psl {
	struct psl_rule	*v;
	size_t		 n, cap;
};

#define PSL_LINE_MAX	(POLICY_HOST_MAX + 2)

static int
rule_cmp(const void *a, const void *b)
{
	const struct psl_rule *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c != 0 ? c : (int)x->kind - (int)y->kind;
}

/* One rule's text (s[0..len), no whitespace): 0 taken or passed over, -1 OOM. */
static int
psl_add(struct psl *p, const char *s, size_t len)
{
	struct policy_target t;
	enum psl_kind kind = PSL_NORMAL;
	struct psl_rule *nv;

	if (len > 0 && s[0] == '!') {
		kind = PSL_EXCEPTION;
		s++, len--;
	} else if (len > 1 && s[0] == '*' && s[1] == '.') {
		kind = PSL_WILDCARD;
		s += 2, len -= 2;
	}
	/* A name the policy could hold; anything else (an inner '*') is no rule. */
	if (len == 0 || len > POLICY_HOST_MAX || memchr(s, '*', len) != NULL ||
	    policy_target_init(&t, s, len, 0) == -1 || t.is_ip)
		return 0;
	if (kind == PSL_EXCEPTION && strchr(t.host, '.') == NULL)
		return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 1024;

		if ((nv = realloc(p->v, cap * sizeof(*nv))) == NULL)
			return -1;
		p->v = nv;
		p->cap = cap;
	}
	if ((p->v[p->n].name = strdup(t.host)) == NULL)
		return -1;
	p->v[p->n++].kind = kind;
	return 0;
}

struct psl *
psl_parse(const char *buf, size_t len)
{
	struct psl *p;
	size_t i = 0, start, end;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	while (i < len) {
		start = i;
		while (i < len && buf[i] != '\n')
			i++;
		end = i++;
		/* A rule is the line's first run of non-space bytes. */
		while (start < end && (buf[start] == ' ' || buf[start] == '\t' ||
		    buf[start] == '\r'))
			start++;
		if (end - start >= 2 && buf[start] == '/' && buf[start + 1] == '/')
			continue;
		for (size_t k = start; k < end; k++)
			if (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\r') {
				end = k;
				break;
			}
		if (end == start || end - start > PSL_LINE_MAX)
			continue;
		if (psl_add(p, buf + start, end - start) == -1) {
			psl_free(p);
			return NULL;
		}
	}
	if (p->n > 0)
		qsort(p->v, p->n, sizeof(*p->v), rule_cmp);
	return p;
}

void
psl_free(struct psl *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++)
		free(p->v[i].name);
	free(p->v);
	free(p);
}

size_t
psl_rules(const struct psl *p)
{
	return p != NULL ? p->n : 0;
}

static int
psl_has(const struct psl *p, const char *name, enum psl_kind kind)
{
	struct psl_rule key;

	if (p == NULL || p->n == 0)
		return 0;
	key.name = (char *)name;
	key.kind = kind;
	return bsearch(&key, p->v, p->n, sizeof(*p->v), rule_cmp) != NULL;
}

/* The start of the label before offset off of host (off > 0, host[off-1] == '.'). */
static size_t
label_before(const char *host, size_t off)
{
	size_t i = off - 1;

	while (i > 0 && host[i - 1] != '.')
		i--;
	return i;
}

int
psl_registrable(const struct psl *p, const char *host, char *out,
    size_t outlen)
{
	const char *dot;
	size_t len = strlen(host), ps = len, i;

	if (len == 0 || host[0] == '.' || host[len - 1] == '.')
		return -1;
	/* From the whole name to its last label: the first match is the longest. */
	for (i = 0; i < len; i = (size_t)(dot - host) + 1) {
		const char *s = host + i;

		dot = strchr(s, '.');
		if (psl_has(p, s, PSL_EXCEPTION)) {
			ps = (size_t)(dot - host) + 1;	/* s minus its first label */
			break;
		}
		if (psl_has(p, s, PSL_NORMAL) ||
		    (dot != NULL && psl_has(p, dot + 1, PSL_WILDCARD))) {
			ps = i;
			break;
		}
		if (dot == NULL) {
			ps = i;		/* the implicit rule "*" */
			break;
		}
	}
	if (p == NULL) {
		/* No list: the last label is the suffix. */
		dot = strrchr(host, '.');
		ps = dot != NULL ? (size_t)(dot - host) + 1 : 0;
	}
	if (ps == 0)
		return -1;	/* the host is a public suffix */
	i = label_before(host, ps);
	if (len - i + 1 > outlen)
		return -1;
	memcpy(out, host + i, len - i + 1);
	return 0;
}
