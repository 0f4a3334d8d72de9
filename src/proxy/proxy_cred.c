/*
 * Credentials in the gateway (SPEC §7): the placeholders issued to each
 * sandbox, the decision whether a request may have a placeholder swapped
 * for its secret (or is misusing one), and the response scrubbing set-up.
 * Secret values never pass through this file: src/vault/ does the swap and
 * the scrub.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "core/reason.h"
#include "proxy/proxy_int.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/vault.h"

struct cred_ph {
	char	sandbox[POLICY_ID_MAX + 1];
	char	cred[CRED_NAME_MAX + 1];
	char	ph[CRED_PH_MAX + 1];
};

static const struct cred_ph *
ph_find(const struct proxy *p, const char *sandbox, const char *cred)
{
	size_t i;

	for (i = 0; i < p->n_phs; i++)
		if (strcmp(p->phs[i].sandbox, sandbox) == 0 &&
		    strcmp(p->phs[i].cred, cred) == 0)
			return &p->phs[i];
	return NULL;
}

/* Give (sandbox, credential) its placeholder, once: fixed or random. */
static int
ph_issue(struct proxy *p, const char *sandbox, const struct policy_credential *c,
    int dynamic)
{
	struct cred_ph *e;

	if (ph_find(p, sandbox, c->name) != NULL)
		return 0;
	if (p->n_phs == p->cap_phs) {
		size_t ncap = p->cap_phs ? p->cap_phs * 2 : 16;
		void *nv = realloc(p->phs, ncap * sizeof(*p->phs));
		if (nv == NULL)
			return -1;
		p->phs = nv;
		p->cap_phs = ncap;
	}
	e = &p->phs[p->n_phs];
	memset(e, 0, sizeof(*e));
	snprintf(e->sandbox, sizeof(e->sandbox), "%s", sandbox);
	snprintf(e->cred, sizeof(e->cred), "%s", c->name);
	/* A fixed placeholder is for static sandboxes; launched ones get their own. */
	if (c->placeholder != NULL && !dynamic)
		snprintf(e->ph, sizeof(e->ph), "%s", c->placeholder);
	else
		vault_placeholder_new(e->ph);
	p->n_phs++;
	return 0;
}

struct issue_ctx {
	struct proxy		*p;
	const struct policy	*pol;
	int			 dynamic;
};

static void
issue_sandbox_cb(const char *id, const char *policy_name, void *arg)
{
	struct issue_ctx *ic = arg;
	const struct policy_credential *const *cv;
	size_t i, n;

	cv = policy_credentials(ic->pol, policy_name, &n);
	for (i = 0; i < n; i++)
		if (ph_issue(ic->p, id, cv[i], ic->dynamic) == -1)
			log_warnx("out of memory issuing placeholders");
}

/*
 * Ask the keeper for the values of every secret the policy's credentials
 * name. A secret the vault lacks is logged and its credential is never
 * swapped (credential-unavailable): the gateway still starts.
 */
static struct vault_snapshot *
snapshot_for(struct proxy *p, const struct policy *pol)
{
	const struct policy_credential *all;
	const char **names;
	struct vault_snapshot *snap;
	size_t i, n;
	int *st;

	all = policy_all_credentials(pol, &n);
	names = calloc(n + 1, sizeof(*names));
	st = calloc(n + 1, sizeof(*st));
	if (names == NULL || st == NULL) {
		free(names);
		free(st);
		return NULL;
	}
	for (i = 0; i < n; i++)
		names[i] = all[i].secret;
	if ((snap = keeper_client_secrets(p->kc, names, n, st)) == NULL)
		log_warnx("vault: the key keeper did not hand out the secrets");
	for (i = 0; i < n && snap != NULL; i++) {
		if (st[i] == KEEPER_MISSING)
			log_warnx("vault: credential %s names secret %s, which "
			    "the vault does not hold: it will not be swapped in",
			    all[i].name, all[i].secret);
		else if (st[i] != KEEPER_OK)
			log_warnx("vault: credential %s: the key keeper did not "
			    "hand out secret %s: it will not be swapped in",
			    all[i].name, all[i].secret);
	}
	free(names);
	free(st);
	return snap;
}

int
cred_init(struct proxy *p)
{
	struct issue_ctx ic = { p, p->pol, 0 };

	pthread_mutex_init(&p->cred_mtx, NULL);
	(void)keeper_client_vault_stamp(p->kc, &p->vault_stamp);
	policy_foreach_sandbox(p->pol, issue_sandbox_cb, &ic);
	p->snap = snapshot_for(p, p->pol);
	return p->snap != NULL ? 0 : -1;
}

/* After a reload (the keeper reads the policies too) or a new keeper. */
void
cred_policy_changed(struct proxy *p, struct policy *pol)
{
	struct issue_ctx ic = { p, pol, 0 };
	struct vault_snapshot *snap, *old;

	if (keeper_client_policy(p->kc) == -1)
		log_warnx("vault: the key keeper did not read the policies "
		    "again: new credentials may not be swapped in");
	snap = snapshot_for(p, pol);
	pthread_mutex_lock(&p->cred_mtx);
	policy_foreach_sandbox(pol, issue_sandbox_cb, &ic);
	old = p->snap;
	if (snap != NULL)
		p->snap = snap;
	pthread_mutex_unlock(&p->cred_mtx);
	if (snap != NULL && old != NULL)
		vault_snapshot_unref(old);
}

/* Rotation: a changed vault.db means new values for new requests. */
void
cred_check_rotation(struct proxy *p)
{
	struct policy *pol;
	uint64_t stamp;

	if (!keeper_client_up(p->kc) ||
	    keeper_client_vault_stamp(p->kc, &stamp) == -1 ||
	    stamp == p->vault_stamp)
		return;
	p->vault_stamp = stamp;
	pol = proxy_policy_get(p);
	cred_policy_changed(p, pol);
	policy_unref(pol);
	log_info("vault changed: secrets reloaded for new requests");
}

void
cred_free(struct proxy *p)
{
	if (p->snap != NULL)
		vault_snapshot_unref(p->snap);
	free(p->phs);
	pthread_mutex_destroy(&p->cred_mtx);
}

int
cred_placeholder(struct proxy *p, const char *sandbox, const char *cred,
    char *out, size_t len)
{
	const struct cred_ph *e;
	int rc = -1;

	pthread_mutex_lock(&p->cred_mtx);
	if ((e = ph_find(p, sandbox, cred)) != NULL) {
		snprintf(out, len, "%s", e->ph);
		rc = 0;
	}
	pthread_mutex_unlock(&p->cred_mtx);
	return rc;
}

/* Any issued placeholder inside a host name (CONNECT, SOCKS, SNI, DNS). */
int
cred_in_name(struct proxy *p, const char *host, char *cred, size_t credlen)
{
	size_t i;
	int found = 0;

	pthread_mutex_lock(&p->cred_mtx);
	for (i = 0; i < p->n_phs && !found; i++)
		if (strcasestr(host, p->phs[i].ph) != NULL) {
			snprintf(cred, credlen, "%s", p->phs[i].cred);
			found = 1;
		}
	pthread_mutex_unlock(&p->cred_mtx);
	return found;
}

static const struct policy_credential *
own_cred(const struct session *s, const char *name)
{
	const struct policy_credential *const *cv;
	size_t i, n;

	cv = policy_credentials(s->pol, s->ident.policy, &n);
	for (i = 0; i < n; i++)
		if (strcmp(cv[i]->name, name) == 0)
			return cv[i];
	return NULL;
}

/* May placeholder e be swapped here? */
static int
swap_allowed(const struct session *s, const struct cred_ph *e,
    const struct policy_credential **cp)
{
	const struct policy_credential *c;

	if (strcmp(e->sandbox, s->ident.sandbox) != 0 || !s->intercepted ||
	    s->target.is_ip)
		return 0;
	if ((c = own_cred(s, e->cred)) == NULL ||
	    !policy_credential_bound(c, s->target.host))
		return 0;
	*cp = c;
	return 1;
}

static int
own_entry(const struct session *s, const char *ph)
{
	size_t i;

	for (i = 0; i < s->p->n_phs; i++)
		if (strcmp(s->p->phs[i].sandbox, s->ident.sandbox) == 0 &&
		    strcmp(s->p->phs[i].ph, ph) == 0)
			return 1;
	return 0;
}

static void
plan_bound(struct session *s, struct cred_plan *plan)
{
	const struct policy_credential *const *cv;
	size_t i, n;

	cv = policy_credentials(s->pol, s->ident.policy, &n);
	for (i = 0; i < n && plan->n_bound < CRED_MAX_BOUND; i++) {
		const struct cred_ph *e;

		if (s->target.is_ip || !policy_credential_bound(cv[i],
		    s->target.host))
			continue;
		e = ph_find(s->p, s->ident.sandbox, cv[i]->name);
		plan->bound[plan->n_bound] = cv[i];
		snprintf(plan->ph[plan->n_bound], sizeof(plan->ph[0]), "%s",
		    e != NULL ? e->ph : "");
		plan->n_bound++;
	}
}

int
cred_request(struct session *s, const struct http_request *req,
    struct cred_plan *plan, enum sg_reason *reason)
{
	const struct policy_credential *c = NULL;
	const char *q;
	size_t i, j, k, qoff;
	int rc = 0, in_path, in_query;

	memset(plan, 0, sizeof(*plan));
	plan->snap = NULL;
	pthread_mutex_lock(&s->p->cred_mtx);
	plan_bound(s, plan);
	if (plan->n_bound > 0) {
		plan->snap = s->p->snap;
		if (plan->snap != NULL)
			vault_snapshot_ref(plan->snap);
	}
	q = memchr(req->path.p, '?', req->path.len);
	qoff = q != NULL ? (size_t)(q - req->path.p) : req->path.len;
	for (k = 0; k < s->p->n_phs && rc == 0; k++) {
		const struct cred_ph *e = &s->p->phs[k];

		/* A fixed placeholder is shared: judge it by our own entry. */
		if (strcmp(e->sandbox, s->ident.sandbox) != 0 &&
		    own_entry(s, e->ph))
			continue;

		/* In the request target: only the query, only with query: true. */
		in_path = vault_contains_placeholder(e->ph, req->path.p, qoff);
		in_query = q != NULL && vault_contains_placeholder(e->ph, q,
		    req->path.len - qoff);
		if (in_path || (in_query && !(swap_allowed(s, e, &c) &&
		    c->query))) {
			snprintf(plan->cred, sizeof(plan->cred), "%s", e->cred);
			*reason = REASON_CRED_MISUSE;
			rc = -1;
			break;
		}
		if (in_query) {
			plan->query_cred = c;
			snprintf(plan->cred, sizeof(plan->cred), "%s", e->cred);
		}
		for (i = 0; i < req->n_headers; i++) {
			const struct http_header *h = &req->headers[i];

			if (!vault_contains_placeholder(e->ph, h->value.p,
			    h->value.len))
				continue;
			if (!swap_allowed(s, e, &c) || !policy_credential_header(c,
			    h->name.p, h->name.len)) {
				snprintf(plan->cred, sizeof(plan->cred), "%s",
				    e->cred);
				*reason = REASON_CRED_MISUSE;
				rc = -1;
				break;
			}
			plan->swap[i] = c;
			snprintf(plan->cred, sizeof(plan->cred), "%s", e->cred);
		}
	}
	/* exclusive: a bound header carrying anything but our placeholder. */
	for (j = 0; j < plan->n_bound && rc == 0; j++) {
		c = plan->bound[j];
		if (!c->exclusive)
			continue;
		for (i = 0; i < req->n_headers; i++) {
			const struct http_header *h = &req->headers[i];

			if (policy_credential_header(c, h->name.p, h->name.len) &&
			    plan->swap[i] != c) {
				snprintf(plan->cred, sizeof(plan->cred), "%s", c->name);
				*reason = REASON_FOREIGN_CRED;
				rc = -1;
				break;
			}
		}
	}
	pthread_mutex_unlock(&s->p->cred_mtx);
	/* A swap needs the keeper up: its secrets may be stale or revoked. */
	if (rc == 0 && plan->cred[0] != '\0' && !keeper_client_up(s->p->kc)) {
		*reason = REASON_KEEPER_UNAVAILABLE;
		rc = -1;
	}
	if (rc == 0 && plan->cred[0] != '\0' && (plan->snap == NULL ||
	    !vault_snapshot_has(plan->snap, (plan->query_cred ? plan->query_cred :
	    own_cred(s, plan->cred))->secret))) {
		*reason = REASON_CRED_UNAVAILABLE;
		rc = -1;
	}
	if (rc == -1)
		cred_plan_clear(plan);
	return rc;
}

void
cred_plan_clear(struct cred_plan *plan)
{
	if (plan->snap != NULL)
		vault_snapshot_unref(plan->snap);
	plan->snap = NULL;
}

/*
 * Request bodies: a placeholder here is never swapped, and is refused.
 * The first n bytes of buf are about to move on; tail carries the end of
 * what moved before, so a placeholder split across reads is found too.
 */
int
cred_in_body(struct session *s, struct evbuffer *buf, size_t n, size_t moved,
    char *cred, size_t credlen)
{
	struct cred_body_tail *t = &s->body_tail;
	char edge[2 * CRED_PH_MAX];
	struct evbuffer_ptr pos;
	size_t k, head, keep, elen;
	int found = 0;

	if (s->p->n_phs == 0 || n == 0)
		return 0;
	head = n < CRED_PH_MAX ? n : CRED_PH_MAX;
	memcpy(edge, t->buf, t->len);
	evbuffer_copyout(buf, edge + t->len, head);
	elen = t->len + head;
	pthread_mutex_lock(&s->p->cred_mtx);
	for (k = 0; k < s->p->n_phs && !found; k++) {
		const char *ph = s->p->phs[k].ph;
		size_t pl = strlen(ph);

		pos = evbuffer_search(buf, ph, pl, NULL);
		if ((pos.pos != -1 && (size_t)pos.pos + pl <= n) ||
		    memmem(edge, elen, ph, pl) != NULL) {
			snprintf(cred, credlen, "%s", s->p->phs[k].cred);
			found = 1;
		}
	}
	pthread_mutex_unlock(&s->p->cred_mtx);
	/* Keep the last bytes that moved for the next look. */
	n = moved;
	keep = n < CRED_PH_MAX - 1 ? n : CRED_PH_MAX - 1;
	if (n >= CRED_PH_MAX - 1) {
		struct evbuffer_ptr at;
		evbuffer_ptr_set(buf, &at, n - keep, EVBUFFER_PTR_SET);
		evbuffer_copyout_from(buf, &at, t->buf, keep);
		t->len = keep;
	} else {
		size_t old = t->len + keep > CRED_PH_MAX - 1 ?
		    t->len + keep - (CRED_PH_MAX - 1) : 0;
		memmove(t->buf, t->buf + old, t->len - old);
		t->len -= old;
		evbuffer_copyout(buf, t->buf + t->len, keep);
		t->len += keep;
	}
	return found;
}

/* A sandbox registered at run time gets its placeholders now. */
void
cred_issue(struct proxy *p, const struct policy *pol, const char *sandbox,
    const char *policy_name)
{
	struct issue_ctx ic = { p, pol, 1 };

	pthread_mutex_lock(&p->cred_mtx);
	issue_sandbox_cb(sandbox, policy_name, &ic);
	pthread_mutex_unlock(&p->cred_mtx);
}

/* A removed sandbox's placeholders stop being its own (they stay known, so
 * a leaked one is still caught as misuse). */
void
cred_forget(struct proxy *p, const char *sandbox)
{
	size_t i;

	pthread_mutex_lock(&p->cred_mtx);
	for (i = 0; i < p->n_phs; i++)
		if (strcmp(p->phs[i].sandbox, sandbox) == 0)
			snprintf(p->phs[i].sandbox, sizeof(p->phs[i].sandbox),
			    "%s", "-removed-");
	pthread_mutex_unlock(&p->cred_mtx);
}

/*
 * How many of the last bytes of buf[0..len) to hold back because they are
 * the start of a placeholder: a placeholder split across reads never
 * reaches the origin even in part.
 */
size_t
cred_holdback(struct proxy *p, struct evbuffer *buf, size_t len)
{
	char end[CRED_PH_MAX];
	struct evbuffer_ptr at;
	size_t m = len < CRED_PH_MAX - 1 ? len : CRED_PH_MAX - 1, k, i, best = 0;

	if (m == 0)
		return 0;
	evbuffer_ptr_set(buf, &at, len - m, EVBUFFER_PTR_SET);
	if (evbuffer_copyout_from(buf, &at, end, m) != (ev_ssize_t)m)
		return 0;
	pthread_mutex_lock(&p->cred_mtx);
	for (i = 0; i < p->n_phs; i++) {
		size_t pl = strlen(p->phs[i].ph);

		for (k = m < pl - 1 ? m : pl - 1; k > best; k--)
			if (memcmp(end + m - k, p->phs[i].ph, k) == 0) {
				best = k;
				break;
			}
	}
	pthread_mutex_unlock(&p->cred_mtx);
	return best;
}

/*
 * SPEC §6: every destination a credential of this sandbox's policy is bound
 * to is intercepted, whatever its rule says, so that placeholders can be
 * swapped and misuse seen.
 */
int
cred_host_bound(const struct session *s)
{
	const struct policy_credential *const *cv;
	size_t i, n;

	if (s->target.is_ip || !s->has_ident)
		return 0;
	cv = policy_credentials(s->pol, s->ident.policy, &n);
	for (i = 0; i < n; i++)
		if (policy_credential_bound(cv[i], s->target.host))
			return 1;
	return 0;
}

/* The secrets of the credentials bound to this request's host, and their placeholders. */
size_t
cred_scrub_lists(const struct session *s, const char **secrets,
    const char **phs)
{
	const struct cred_plan *plan = &s->fwd.plan;
	size_t j;

	for (j = 0; j < plan->n_bound; j++) {
		secrets[j] = plan->bound[j]->secret;
		phs[j] = plan->ph[j];
	}
	return plan->n_bound;
}
