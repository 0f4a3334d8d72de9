/*
 * Dynamic sandboxes: identities the launcher registers at run time (admin
 * API), beside the static ones of the policy files. Process-wide, guarded
 * by one mutex; a source address here wins over a static source prefix.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"

struct reg_entry {
	struct policy_identity	 id;
	struct netaddr		 source;
	int64_t			 created;
};

static pthread_mutex_t reg_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg;
static size_t reg_n, reg_cap;

int
policy_registry_add(const char *id, const char *policy,
    const struct netaddr *source, int64_t created)
{
	struct reg_entry *e;
	size_t i;
	int rc = 0;

	if (strlen(id) > POLICY_ID_MAX || strlen(policy) > POLICY_NAME_MAX)
		return -1;
	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (strcmp(reg[i].id.sandbox, id) == 0 ||
		    netaddr_cmp(&reg[i].source, source) == 0) {
			rc = -1;	/* ids and addresses are unique */
			goto out;
		}
	if (reg_n == reg_cap) {
		size_t ncap = reg_cap ? reg_cap * 2 : 16;
		void *nv = realloc(reg, ncap * sizeof(*reg));
		if (nv == NULL) {
			rc = -1;
			goto out;
		}
		reg = nv;
		reg_cap = ncap;
	}
	e = &reg[reg_n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->id.sandbox, sizeof(e->id.sandbox), "%s", id);
	snprintf(e->id.policy, sizeof(e->id.policy), "%s", policy);
	e->source = *source;
	e->created = created;
out:
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

int
policy_registry_remove(const char *id)
{
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (strcmp(reg[i].id.sandbox, id) == 0) {
			reg[i] = reg[--reg_n];
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

int
policy_registry_lookup(const struct netaddr *src, struct policy_identity *out)
{
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (netaddr_cmp(&reg[i].source, src) == 0) {
			*out = reg[i].id;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

int
policy_registry_by_id(const char *id, struct policy_identity *out,
    struct netaddr *source)
{
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (strcmp(reg[i].id.sandbox, id) == 0) {
			*out = reg[i].id;
			if (source != NULL)
				*source = reg[i].source;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

void
policy_registry_foreach(void (*cb)(const struct policy_identity *,
    const struct netaddr *, int64_t, void *), void *arg)
{
	struct reg_entry *copy;
	size_t i, n;

	/* Call back without the lock held: the callback may take others. */
	pthread_mutex_lock(&reg_mtx);
	n = reg_n;
	copy = n ? malloc(n * sizeof(*copy)) : NULL;
	if (copy != NULL)
		memcpy(copy, reg, n * sizeof(*copy));
	pthread_mutex_unlock(&reg_mtx);
	for (i = 0; copy != NULL && i < n; i++)
		cb(&copy[i].id, &copy[i].source, copy[i].created, arg);
	free(copy);
}

void
policy_registry_clear(void)
{
	pthread_mutex_lock(&reg_mtx);
	free(reg);
	reg = NULL;
	reg_n = reg_cap = 0;
	pthread_mutex_unlock(&reg_mtx);
}
