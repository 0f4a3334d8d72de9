/*
 * What an allow rule limits, found by the name a verdict carries
 * ("POLICY:allow[N]"): its methods and paths, for `policy explain` to say
 * for which requests a credential is swapped; and which refs a git push
 * may update under it (proxy_git.c). Read only; owns nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"
#include "core/policy_int.h"

int
policy_rule_scope(const struct policy *p, const char *rule,
    struct policy_rule_scope *out)
{
	const struct policy_rule *r;
	const char *colon;
	char *end;
	unsigned long n;
	size_t i, len;

	memset(out, 0, sizeof(*out));
	if (p == NULL || rule == NULL || (colon = strrchr(rule, ':')) == NULL ||
	    strncmp(colon + 1, "allow[", 6) != 0)
		return -1;
	n = strtoul(colon + 7, &end, 10);
	if (end == colon + 7 || strcmp(end, "]") != 0)
		return -1;
	len = (size_t)(colon - rule);
	for (i = 0; i < p->n_defs; i++) {
		if (strlen(p->defs[i].name) != len ||
		    strncmp(p->defs[i].name, rule, len) != 0)
			continue;
		if (n >= p->defs[i].n_allow)
			return -1;
		r = &p->defs[i].allow[n];
		out->methods = (const char *const *)r->methods;
		out->n_methods = r->n_methods;
		out->paths = (const char *const *)r->paths;
		out->n_paths = r->n_paths;
		out->tls = r->tls;
		out->git = r->git;
		out->git_push = (const char *const *)r->git_push;
		out->n_git_push = r->n_git_push;
		out->git_delete = r->git_delete;
		return 0;
	}
	return -1;
}

int
policy_git_ref_allowed(const struct policy_rule_scope *scope, int op,
    const char *ref, size_t len)
{
	size_t i;

	if (!scope->git)
		return 1;
	if (op == POLICY_GIT_DELETE && !scope->git_delete)
		return 0;
	for (i = 0; i < scope->n_git_push; i++)
		if (policy_glob_match(scope->git_push[i], ref, len))
			return 1;
	return 0;
}
