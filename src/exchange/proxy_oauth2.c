/*
 * Credentials of kind oauth2 in a request (docs/credentials.md, "OAuth 2.0
 * credentials"): before the head is built, the access token of each one
 * the plan swaps is made fresh (src/vault/oauth2_token.c asks the token
 * endpoint, one fetch per entry at a time) and the plan moves onto the
 * snapshot holding it; the swap then works by name as for static secrets.
 */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "exchange/exchange.h"
#include "vault/oauth2.h"
#include "vault/vault.h"

/* oauth2_tokens' publisher: the new snapshot becomes p->snap. */
static void
publish_cb(void *arg, struct vault_snapshot *snap)
{
	struct proxy *p = arg;
	struct vault_snapshot *old;

	pthread_mutex_lock(&p->cred_mtx);
	old = p->snap;
	p->snap = snap;
	pthread_mutex_unlock(&p->cred_mtx);
	if (old != NULL)
		vault_snapshot_unref(old);
}

int
oauth2_proxy_init(struct proxy *p)
{
	const char *err = NULL;

	if ((p->oauth2 = oauth2_tokens_new(p->cfg->ca_bundle, p->kc,
	    publish_cb, p, &err)) == NULL) {
		log_warnx("oauth2: %s", err != NULL ? err : "cannot start");
		return -1;
	}
	return 0;
}

/* The oauth2 credentials the plan swaps (each once): how many. */
static size_t
swapped_oauth2(const struct cred_plan *plan, const struct http_request *req,
    const struct policy_credential **out)
{
	const struct policy_credential *c;
	size_t i, j, n = 0;

	for (i = 0; i <= req->n_headers; i++) {
		c = i < req->n_headers ? cred_plan_swap(plan, i) :
		    plan->query_cred;
		if (c == NULL || c->kind != POLICY_CRED_OAUTH2)
			continue;
		for (j = 0; j < n; j++)
			if (out[j] == c)
				break;
		if (j == n && n < CRED_MAX_BOUND)
			out[n++] = c;
	}
	return n;
}

int
oauth2_plan_ready(struct exchange *s, const struct http_request *req,
    char *detail, size_t len)
{
	const struct policy_credential *cv[CRED_MAX_BOUND];
	struct cred_plan *plan = &s->fwd.plan;
	struct vault_snapshot *snap;
	char why[256];
	size_t i, n;

	if (plan->x == NULL && plan->query_cred == NULL)
		return 0;
	if ((n = swapped_oauth2(plan, req, cv)) == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (cv[i]->oauth2 == NULL || s->p->oauth2 == NULL ||
		    oauth2_tokens_ensure(s->p->oauth2, cv[i], why,
		    sizeof(why)) == -1) {
			snprintf(plan->cred, sizeof(plan->cred), "%s",
			    cv[i]->name);
			snprintf(detail, len, "credential %s: no access token: "
			    "%s", cv[i]->name, cv[i]->oauth2 == NULL ||
			    s->p->oauth2 == NULL ? "not set up" : why);
			return -1;
		}
	}
	/* The snapshot now published holds every token just made fresh. */
	pthread_mutex_lock(&s->p->cred_mtx);
	snap = s->p->snap;
	if (snap != NULL)
		vault_snapshot_ref(snap);
	pthread_mutex_unlock(&s->p->cred_mtx);
	if (plan->snap != NULL)
		vault_snapshot_unref(plan->snap);
	plan->snap = snap;
	for (i = 0; i < n; i++)
		if (snap == NULL || !vault_snapshot_has(snap,
		    cv[i]->oauth2->access_name)) {
			snprintf(plan->cred, sizeof(plan->cred), "%s",
			    cv[i]->name);
			snprintf(detail, len, "credential %s: no access token "
			    "in the gateway's snapshot", cv[i]->name);
			return -1;
		}
	return 0;
}
