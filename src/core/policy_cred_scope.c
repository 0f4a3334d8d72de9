/*
 * A credential's scope (docs/credentials.md "require and scope"): whether a
 * request's method and path are where the credential may be swapped in.
 * Paths are judged in the canonical form allow rules' paths are.
 */
#include <string.h>

#include "core/policy.h"
#include "core/policy_int.h"

int
policy_credential_in_scope(const struct policy_credential *c,
    const char *method, size_t mlen, const char *path, size_t plen)
{
	char norm[POLICY_PATH_MAX];
	size_t i, len;

	if (c->n_scope_methods > 0) {
		if (method == NULL)
			return 0;
		for (i = 0; i < c->n_scope_methods; i++)
			if (strlen(c->scope_methods[i]) == mlen &&
			    memcmp(c->scope_methods[i], method, mlen) == 0)
				break;
		if (i == c->n_scope_methods)
			return 0;
	}
	if (c->n_scope_paths == 0)
		return 1;
	/* Ambiguous (encoded '/', dot segments servers read apart) or bad: out. */
	if (path == NULL || policy_path_canon(path, plen, norm,
	    sizeof(norm), &len) != POLICY_PATH_OK)
		return 0;
	for (i = 0; i < c->n_scope_paths; i++)
		if (policy_glob_match(c->scope_paths[i], norm, len))
			return 1;
	return 0;
}

const char *
policy_cred_kind_name(enum policy_cred_kind k)
{
	switch (k) {
	case POLICY_CRED_AWS_SIGV4:
		return "aws_sigv4";
	case POLICY_CRED_OAUTH2:
		return "oauth2";
	default:
		return "static";
	}
}
