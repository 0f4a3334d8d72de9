/*
 * Dynamic sandboxes: identities the launcher registers at run time (admin
 * API), beside the static ones of the policy files. Process-wide, guarded
 * by one mutex; a source address here wins over a static source prefix.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/util.h"
#include "core/policy_int.h"

struct reg_entry {
	struct policy_identity	 id;
	struct netaddr		 source;
	int64_t			 created;
	int			 has_ingress;
	struct policy_ingress	 ingress;	/* its running flag serves all */
};

static pthread_mutex_t reg_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg;
static size_t reg_n, reg_cap;

int
policy_registry_add(const char *id, const char *policy,
    const struct netaddr *source, int64_t created)
{
	return policy_registry_add_ingress(id, policy, source, created, NULL);
}

int
policy_registry_add_ingress(const char *id, const char *policy,
    const struct netaddr *source, int64_t created,
    const struct policy_ingress *ing)
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
	if (ing != NULL) {
		e->has_ingress = 1;
		e->ingress = *ing;
	}
	e->ingress.running = 1;	/* registered before its command starts */
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

int
policy_registry_set_running(const char *id, int running)
{
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (strcmp(reg[i].id.sandbox, id) == 0) {
			reg[i].ingress.running = running != 0;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

int
policy_registry_ingress(const char *id, struct policy_ingress *out)
{
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&reg_mtx);
	for (i = 0; i < reg_n; i++)
		if (strcmp(reg[i].id.sandbox, id) == 0) {
			if (reg[i].has_ingress) {
				*out = reg[i].ingress;
				rc = 0;
			}
			break;
		}
	pthread_mutex_unlock(&reg_mtx);
	return rc;
}

int
policy_ingress_find(const struct policy *p, const char *id,
    struct policy_ingress *out, struct policy_identity *ident)
{
	size_t i;

	if (policy_registry_ingress(id, out) == 0)
		return ident == NULL ? 0 : policy_registry_by_id(id, ident, NULL);
	/* A dynamic sandbox of that id hides a static one (none can exist). */
	if (policy_registry_by_id(id, &(struct policy_identity){ 0 }, NULL) == 0)
		return -1;
	for (i = 0; i < p->n_sandboxes; i++) {
		const struct policy_sandbox *sb = &p->sandboxes[i];
		if (strcmp(sb->id, id) != 0)
			continue;
		if (!sb->has_ingress)
			return -1;
		*out = sb->ingress;
		out->running = 1;	/* a static sandbox is always running */
		if (ident != NULL) {
			memset(ident, 0, sizeof(*ident));
			snprintf(ident->sandbox, sizeof(ident->sandbox), "%s", sb->id);
			snprintf(ident->policy, sizeof(ident->policy), "%s",
			    sb->policy);
		}
		return 0;
	}
	return -1;
}

int
policy_ingress_has_port(const struct policy_ingress *ing, uint16_t port)
{
	size_t i;

	for (i = 0; i < ing->n_ports; i++)
		if (ing->ports[i] == port)
			return 1;
	return 0;
}

int
policy_ingress_token_ok(const struct policy_ingress *ing, const char *token,
    size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!ing->has_token || token == NULL || len == 0)
		return 0;
	if (EVP_Digest(token, len, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != 32)
		return 0;
	return CRYPTO_memcmp(md, ing->token_sha256, 32) == 0;
}

int
policy_sha256_hex_parse(const char *s, unsigned char out[32])
{
	if (strlen(s) != 64)
		return -1;
	return util_hex_decode(s, 64, out, 0);
}
