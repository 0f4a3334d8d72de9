/*
 * Credentials in the gateway (docs/credentials.md): which placeholders each
 * sandbox is issued (kept in cred_phs.c's snapshot), the decision whether a
 * request may have a placeholder swapped for its secret (or is misusing one),
 * and the response scrubbing set-up. Secret values never pass through this
 * file: src/vault/ does the swap and the scrub.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <openssl/crypto.h>

#include "core/log.h"
#include "core/reason.h"
#include "exchange/cred_phs.h"
#include "exchange/exchange.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/sigv4.h"
#include "vault/oauth2.h"
#include "vault/vault.h"

/* The (sandbox, credential) pairs that get placeholders. */
struct wants {
	const struct policy	*pol;
	int			 dynamic;
	struct cred_phs_want	*v;
	size_t			 n, cap;
	int			 oom;
};

static void
want_sandbox_cb(const char *id, const char *policy_name, void *arg)
{
	struct wants *ws = arg;
	const struct policy_credential *const *cv;
	struct cred_phs_want *w;
	size_t i, n;

	cv = policy_credentials(ws->pol, policy_name, &n);
	for (i = 0; i < n; i++) {
		if (ws->n == ws->cap) {
			size_t ncap = ws->cap ? ws->cap * 2 : 16;
			void *nv = reallocarray(ws->v, ncap, sizeof(*ws->v));
			if (nv == NULL) {
				ws->oom = 1;
				return;
			}
			ws->v = nv;
			ws->cap = ncap;
		}
		w = &ws->v[ws->n++];
		w->sandbox = id;
		w->cred = cv[i]->name;
		/* A fixed placeholder is for static sandboxes; launched ones get their own. */
		w->fixed = ws->dynamic ? NULL : cv[i]->placeholder;
		/* placeholder_shape: every sandbox's in it (never with fixed). */
		w->prefix = cv[i]->shape_prefix;
		w->len = cv[i]->shape_length;
		w->alphabet = cv[i]->shape_alphabet;
	}
}

/* One new snapshot with what ws wants and lacks (and, static, no more). */
static void
issue(struct proxy *p, struct wants *ws)
{
	if (ws->oom || (ws->dynamic ? cred_phs_issue(p->phs, ws->v, ws->n) :
	    cred_phs_set_static(p->phs, ws->v, ws->n)) == -1)
		log_warnx("out of memory issuing placeholders");
	atomic_store(&p->n_phs, cred_phs_pub_count(p->phs));
	free(ws->v);
}

/* Every static sandbox of pol: its placeholders, once. */
static void
issue_static(struct proxy *p, const struct policy *pol)
{
	struct wants ws = { pol, 0, NULL, 0, 0, 0 };

	policy_foreach_sandbox(pol, want_sandbox_cb, &ws);
	issue(p, &ws);
}

/*
 * The aws_sigv4 secrets' fields (KEYID:SECRET[:TOKEN]) as entries of their
 * own beside the whole values; a value not in that form is logged and its
 * credential never signs (credential-unavailable). names and st are
 * scratch of n entries.
 */
static struct vault_snapshot *
with_sigv4_parts(struct vault_snapshot *snap,
    const struct policy_credential *all, size_t n, const char **names, int *st)
{
	struct vault_snapshot *ns;
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (all[i].kind == POLICY_CRED_AWS_SIGV4)
			names[k++] = all[i].secret;
	if (k == 0)
		return snap;
	if ((ns = vault_snapshot_with_parts(snap, names, k, st)) == NULL) {
		log_warnx("vault: out of memory splitting aws_sigv4 secrets");
		return snap;
	}
	for (i = 0; i < k; i++)
		if (st[i])
			log_warnx("vault: secret %s of an aws_sigv4 credential is "
			    "not KEYID:SECRET[:TOKEN]: it will not be signed with",
			    names[i]);
	vault_snapshot_unref(snap);
	return ns;
}

/* Each oauth2 entry's client secret as an entry of its own (for dlp). */
static struct vault_snapshot *
with_oauth2_parts(struct vault_snapshot *snap,
    const struct policy_credential *all, size_t n, const char **names)
{
	struct vault_snapshot *ns;
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (all[i].kind == POLICY_CRED_OAUTH2)
			names[k++] = all[i].secret;
	if (k == 0)
		return snap;
	if ((ns = oauth2_snap_parts(snap, names, k)) == NULL) {
		log_warnx("vault: out of memory reading oauth2 entries");
		return snap;
	}
	vault_snapshot_unref(snap);
	return ns;
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
	if (snap != NULL)
		snap = with_sigv4_parts(snap, all, n, names, st);
	if (snap != NULL)
		snap = with_oauth2_parts(snap, all, n, names);
	free(names);
	free(st);
	return snap;
}

int
cred_init(struct proxy *p)
{
	struct vault_snapshot *snap;

	pthread_mutex_init(&p->cred_mtx, NULL);
	if ((p->phs = cred_phs_pub_new()) == NULL)
		return -1;
	(void)keeper_client_vault_stamp(p->kc, &p->vault_stamp);
	issue_static(p, p->pol);
	if ((snap = snapshot_for(p, p->pol)) == NULL)
		return -1;
	/* kind oauth2: its tokens are published beside the keeper's values. */
	if (oauth2_proxy_init(p) == -1) {
		vault_snapshot_unref(snap);
		return -1;
	}
	oauth2_tokens_rebase(p->oauth2, snap);
	return p->snap != NULL ? 0 : -1;
}

/*
 * A static secret's value before a rotation, as "SECRET#prev" in the new
 * snapshot (carried on while the value stays), so that the scrubber still
 * finds it (docs/credentials.md, "Rotation"): the old key is valid at the
 * provider until it is revoked, and an answer quoting a request made with
 * it -- a request log, an echo -- gave it back raw.
 */
static struct vault_snapshot *
with_previous(struct vault_snapshot *snap, const struct vault_snapshot *old,
    const struct policy *pol)
{
	const struct policy_credential *all;
	const unsigned char **vals, *ov, *nv;
	const char **names;
	struct vault_snapshot *ns;
	size_t *lens, i, j, k = 0, n, ol, nl;

	all = policy_all_credentials(pol, &n);
	if (old == NULL || n == 0)
		return snap;
	names = calloc(n, sizeof(*names));
	vals = calloc(n, sizeof(*vals));
	lens = calloc(n, sizeof(*lens));
	for (i = 0; i < n && names != NULL && vals != NULL && lens != NULL;
	    i++) {
		if (all[i].kind != POLICY_CRED_STATIC || all[i].prev_name == NULL)
			continue;
		for (j = 0; j < k && strcmp(names[j], all[i].prev_name) != 0; j++)
			;
		if (j < k)
			continue;	/* one secret, several credentials */
		ov = vault_snapshot_value(old, all[i].secret, &ol);
		nv = vault_snapshot_value(snap, all[i].secret, &nl);
		if (ov != NULL && (nv == NULL || nl != ol ||
		    CRYPTO_memcmp(ov, nv, ol) != 0)) {
			vals[k] = ov;		/* rotated now */
			lens[k] = ol;
		} else if ((ov = vault_snapshot_value(old, all[i].prev_name,
		    &ol)) != NULL) {
			vals[k] = ov;		/* rotated before */
			lens[k] = ol;
		} else
			continue;
		names[k++] = all[i].prev_name;
	}
	ns = k > 0 ? oauth2_snap_extend(snap, names, vals, lens, k) : NULL;
	free(names);
	free(vals);
	free(lens);
	if (ns == NULL) {
		if (k > 0)
			log_warnx("vault: out of memory keeping rotated values");
		return snap;
	}
	vault_snapshot_unref(snap);
	return ns;
}

/* New values of the policy's secrets from the keeper, swapped in whole. */
static void
secrets_refresh(struct proxy *p, const struct policy *pol)
{
	struct vault_snapshot *snap, *old;

	snap = snapshot_for(p, pol);
	if (snap != NULL) {
		pthread_mutex_lock(&p->cred_mtx);
		if ((old = p->snap) != NULL)
			vault_snapshot_ref(old);
		pthread_mutex_unlock(&p->cred_mtx);
		snap = with_previous(snap, old, pol);
		if (old != NULL)
			vault_snapshot_unref(old);
	}
	if (snap != NULL && p->oauth2 != NULL) {
		oauth2_tokens_rebase(p->oauth2, snap);	/* publishes p->snap */
		return;
	}
	pthread_mutex_lock(&p->cred_mtx);
	old = p->snap;
	if (snap != NULL)
		p->snap = snap;
	pthread_mutex_unlock(&p->cred_mtx);
	if (snap != NULL && old != NULL)
		vault_snapshot_unref(old);
}

/* After a reload (the keeper reads the policies too) or a new keeper. */
void
cred_policy_changed(struct proxy *p, struct policy *pol)
{
	if (keeper_client_policy(p->kc) == -1)
		log_warnx("vault: the key keeper did not read the policies "
		    "again: new credentials may not be swapped in");
	issue_static(p, pol);
	secrets_refresh(p, pol);
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
	secrets_refresh(p, pol);	/* placeholders do not change */
	policy_unref(pol);
	log_info("vault changed: secrets reloaded for new requests");
}

void
cred_free(struct proxy *p)
{
	oauth2_tokens_free(p->oauth2);
	p->oauth2 = NULL;
	if (p->snap != NULL)
		vault_snapshot_unref(p->snap);
	cred_phs_pub_free(p->phs);
	pthread_mutex_destroy(&p->cred_mtx);
}

int
cred_placeholder(struct proxy *p, const char *sandbox, const char *cred,
    char *out, size_t len)
{
	const struct cred_phs *ps;
	const struct cred_ph *e;
	int rc = -1;

	ps = cred_phs_enter(p->phs);
	if ((e = cred_phs_get(ps, sandbox, cred)) != NULL) {
		snprintf(out, len, "%s", e->ph);
		rc = 0;
	}
	cred_phs_leave(p->phs, ps);
	return rc;
}

struct found {
	char	*cred;
	size_t	 len;
};

static int
found_cb(const struct cred_ph *e, void *arg)
{
	struct found *f = arg;

	snprintf(f->cred, f->len, "%s", e->cred);
	return 1;
}

/* Any issued placeholder inside a host name (CONNECT, SOCKS, SNI, DNS). */
int
cred_in_name(struct proxy *p, const char *host, char *cred, size_t credlen)
{
	struct found f = { cred, credlen };
	const struct cred_phs *ps;
	int rc;

	if (credlen > 0)
		cred[0] = '\0';
	ps = cred_phs_enter(p->phs);
	rc = cred_phs_search(ps, host, strlen(host), CRED_PHS_FOLD, found_cb,
	    &f);
	cred_phs_leave(p->phs, ps);
	return rc != 0;
}

int
cred_in_bytes(struct proxy *p, const char *buf, size_t n, char *cred,
    size_t credlen)
{
	struct found f = { cred, credlen };
	const struct cred_phs *ps;
	int rc;

	ps = cred_phs_enter(p->phs);
	rc = cred_phs_search(ps, buf, n, 0, found_cb, &f);
	cred_phs_leave(p->phs, ps);
	return rc != 0;
}

static const struct policy_credential *
own_cred(const struct exchange *s, const char *name)
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
swap_allowed(const struct exchange *s, const struct cred_phs *ps,
    const struct cred_ph *e, const struct policy_credential **cp)
{
	const struct policy_credential *c;

	if (!cred_phs_mine(ps, e, s->ident.sandbox) || !s->c->intercepted ||
	    s->target.is_ip)
		return 0;
	if ((c = own_cred(s, e->cred)) == NULL ||
	    !policy_credential_bound(c, s->target.host))
		return 0;
	*cp = c;
	return 1;
}

/* An aws_sigv4 credential's secret placeholder and its vault parts' names. */
static void
sigv4_names(struct cred_plan_ext *x, size_t j, const struct policy_credential *c)
{
	static const char *const suffix[3] = { VAULT_PART_ID, VAULT_PART_KEY,
	    VAULT_PART_TOKEN };
	size_t k;

	sigv4_secret_placeholder(x->ph[j], strlen(x->ph[j]), x->sph[j]);
	for (k = 0; k < 3; k++)
		snprintf(x->part[j][k], sizeof(x->part[j][k]), "%s%s", c->secret,
		    suffix[k]);
}

/* 0, or -1: no memory. */
/*
 * Other policies' static and oauth2 credentials bound to this host, not
 * the sandbox's own (the same vault entry is its own): scrubbed only.
 */
static int
plan_also(struct exchange *s, struct cred_plan *plan)
{
	const struct policy_credential *all;
	size_t i, j, n;

	if (s->target.is_ip)
		return 0;
	all = policy_all_credentials(s->pol, &n);
	for (i = 0; i < n && plan->n_also < CRED_MAX_BOUND; i++) {
		if (all[i].kind == POLICY_CRED_AWS_SIGV4 ||
		    !policy_credential_bound(&all[i], s->target.host))
			continue;
		for (j = 0; j < plan->n_bound; j++)
			if (strcmp(plan->bound[j]->secret, all[i].secret) == 0)
				break;
		if (j < plan->n_bound)
			continue;
		for (j = 0; j < plan->n_also; j++)
			if (strcmp(plan->also[j]->secret, all[i].secret) == 0)
				break;
		if (j == plan->n_also)
			plan->also[plan->n_also++] = &all[i];
	}
	return 0;
}

static int
plan_bound(struct exchange *s, const struct cred_phs *ps,
    struct cred_plan *plan)
{
	const struct policy_credential *const *cv;
	size_t i, n;

	cv = policy_credentials(s->pol, s->ident.policy, &n);
	for (i = 0; i < n && plan->n_bound < CRED_MAX_BOUND; i++) {
		const struct cred_ph *e;

		if (s->target.is_ip || !policy_credential_bound(cv[i],
		    s->target.host))
			continue;
		if (plan->x == NULL &&
		    (plan->x = calloc(1, sizeof(*plan->x))) == NULL)
			return -1;
		e = cred_phs_get(ps, s->ident.sandbox, cv[i]->name);
		plan->bound[plan->n_bound] = cv[i];
		snprintf(plan->x->ph[plan->n_bound], sizeof(plan->x->ph[0]),
		    "%s", e != NULL ? e->ph : "");
		if (cv[i]->kind == POLICY_CRED_AWS_SIGV4)
			sigv4_names(plan->x, plan->n_bound, cv[i]);
		plan->n_bound++;
	}
	return plan_also(s, plan);
}

/* Where in the request a placeholder was found. */
enum scan_at {
	SCAN_PATH,
	SCAN_ELSEWHERE,		/* the method, a header's name: never a swap */
	SCAN_QUERY,
	SCAN_HEADER
};

struct scan {
	struct exchange			*s;
	const struct cred_phs		*ps;
	const struct http_request	*req;
	struct cred_plan		*plan;
	enum scan_at			 at;
	size_t				 header;
};

/* Placeholder e found at sc->at: 0 go on (maybe swap it), 1 misuse, -1 no memory. */
static int
scan_cb(const struct cred_ph *e, void *arg)
{
	struct scan *sc = arg;
	const struct exchange *s = sc->s;
	const struct policy_credential *c = NULL;
	const struct http_header *h;

	/* A fixed placeholder is shared: judge it by our own entry. */
	if (!cred_phs_mine(sc->ps, e, s->ident.sandbox) &&
	    cred_phs_owned(sc->ps, s->ident.sandbox, e->ph, e->phlen))
		return 0;
	snprintf(sc->plan->cred, sizeof(sc->plan->cred), "%s", e->cred);
	switch (sc->at) {
	case SCAN_PATH:
	case SCAN_ELSEWHERE:
		break;
	case SCAN_QUERY:
		/* In the request target: only the query, only with query: true. */
		if (!swap_allowed(s, sc->ps, e, &c) || !c->query)
			break;
		sc->plan->query_cred = c;
		return 0;
	case SCAN_HEADER:
		h = &sc->req->headers[sc->header];
		if (!swap_allowed(s, sc->ps, e, &c) || !policy_credential_header(c,
		    h->name.p, h->name.len))
			break;
		if (sc->plan->x == NULL && (sc->plan->x =
		    calloc(1, sizeof(*sc->plan->x))) == NULL)
			return -1;
		sc->plan->x->swap[sc->header] = c;
		return 0;
	}
	return 1;
}

/*
 * Every placeholder in the request line and the headers (names too: any
 * token is a method or a name): 0, 1 misuse, -1 no memory.
 */
static int
scan_request(struct scan *sc)
{
	const struct http_request *req = sc->req;
	const struct http_header *h;
	const char *q;
	size_t i, qoff;
	int rc;

	sc->at = SCAN_ELSEWHERE;
	if ((rc = cred_phs_search(sc->ps, req->method.p, req->method.len,
	    CRED_PHS_VALUE, scan_cb, sc)) != 0)
		return rc;
	for (i = 0; i < req->n_headers; i++)
		if ((rc = cred_phs_search(sc->ps, req->headers[i].name.p,
		    req->headers[i].name.len, CRED_PHS_VALUE, scan_cb, sc)) != 0)
			return rc;
	q = memchr(req->path.p, '?', req->path.len);
	qoff = q != NULL ? (size_t)(q - req->path.p) : req->path.len;
	sc->at = SCAN_PATH;
	if ((rc = cred_phs_search(sc->ps, req->path.p, qoff, CRED_PHS_VALUE,
	    scan_cb, sc)) != 0)
		return rc;
	sc->at = SCAN_QUERY;
	if (q != NULL && (rc = cred_phs_search(sc->ps, q, req->path.len - qoff,
	    CRED_PHS_VALUE, scan_cb, sc)) != 0)
		return rc;
	sc->at = SCAN_HEADER;
	for (i = 0; i < req->n_headers; i++) {
		h = &req->headers[i];
		sc->header = i;
		if ((rc = cred_phs_search(sc->ps, h->value.p, h->value.len,
		    CRED_PHS_VALUE, scan_cb, sc)) != 0)
			return rc;
	}
	return 0;
}

/* 1 when the plan swaps c somewhere in req: a listed header, or the query. */
static int
carries(const struct cred_plan *plan, const struct http_request *req,
    const struct policy_credential *c)
{
	size_t i;

	if (plan->query_cred == c)
		return 1;
	for (i = 0; i < req->n_headers; i++)
		if (cred_plan_swap(plan, i) == c)
			return 1;
	return 0;
}

/*
 * require: true, a request to a bound host must carry the credential where it
 * is swapped (a placeholder anywhere else was refused as misuse already);
 * scope, a carried credential only for the methods and paths it names
 * (docs/credentials.md "require and scope"). 0, or -1 with *reason set.
 */
static int
require_scope(struct cred_plan *plan, const struct http_request *req,
    enum sg_reason *reason)
{
	const struct policy_credential *c;
	size_t j;

	for (j = 0; j < plan->n_bound; j++) {
		c = plan->bound[j];
		if (!carries(plan, req, c)) {
			if (!c->require)
				continue;
			*reason = REASON_CRED_REQUIRED;
		} else if (!policy_credential_in_scope(c, req->method.p,
		    req->method.len, req->path.p, req->path.len))
			*reason = REASON_CRED_SCOPE;
		else
			continue;
		snprintf(plan->cred, sizeof(plan->cred), "%s", c->name);
		return -1;
	}
	return 0;
}

/* 1 when the query carries an AWS signature's key (SigV4 or SigV2 presigned). */
static int
query_signed(const struct http_request *req)
{
	const char *q = memchr(req->path.p, '?', req->path.len);
	struct sigv4_param qp;
	size_t at = 0, qlen;
	char k[32];

	if (q == NULL)
		return 0;
	q++;
	qlen = req->path.len - (size_t)(q - req->path.p);
	while (sigv4_query_next(q, qlen, &at, &qp)) {
		/* Decoded whatever its length: %58%2D%41... is X-Amz-Credential. */
		if (sigv4_param_name(&qp, k, sizeof(k)) == -1)
			continue;
		if (strcasecmp(k, "X-Amz-Credential") == 0 ||
		    strcasecmp(k, "AWSAccessKeyId") == 0)
			return 1;
	}
	return 0;
}

/* The snapshot entry a credential's swap needs: an aws_sigv4's secret key part. */
static const char *
cred_value_name(const struct cred_plan *plan, const struct policy_credential *c)
{
	size_t j;

	if (c->kind != POLICY_CRED_AWS_SIGV4)
		return c->secret;
	for (j = 0; j < plan->n_bound; j++)
		if (plan->bound[j] == c)
			return plan->x->part[j][1];
	return c->secret;
}

int
cred_request(struct exchange *s, const struct http_request *req,
    struct cred_plan *plan, enum sg_reason *reason)
{
	const struct policy_credential *c = NULL;
	struct scan sc;
	size_t i, j;
	int rc;

	cred_plan_free(plan);
	memset(plan, 0, sizeof(*plan));
	plan->snap = NULL;
	sc.s = s;
	sc.req = req;
	sc.plan = plan;
	sc.ps = cred_phs_enter(s->p->phs);
	if (plan_bound(s, sc.ps, plan) == -1) {
		cred_phs_leave(s->p->phs, sc.ps);
		*reason = REASON_INTERNAL_ERROR;
		return -1;
	}
	if (plan->n_bound + plan->n_also > 0) {
		pthread_mutex_lock(&s->p->cred_mtx);
		plan->snap = s->p->snap;
		if (plan->snap != NULL)
			vault_snapshot_ref(plan->snap);
		pthread_mutex_unlock(&s->p->cred_mtx);
	}
	rc = scan_request(&sc);
	cred_phs_leave(s->p->phs, sc.ps);
	if (rc != 0) {
		*reason = rc > 0 ? REASON_CRED_MISUSE : REASON_INTERNAL_ERROR;
		rc = -1;
	}
	/* exclusive: a bound header carrying anything but our placeholder. */
	for (j = 0; j < plan->n_bound && rc == 0; j++) {
		c = plan->bound[j];
		if (!c->exclusive)
			continue;
		for (i = 0; i < req->n_headers; i++) {
			const struct http_header *h = &req->headers[i];

			if (policy_credential_header(c, h->name.p, h->name.len) &&
			    cred_plan_swap(plan, i) != c) {
				snprintf(plan->cred, sizeof(plan->cred), "%s", c->name);
				*reason = REASON_FOREIGN_CRED;
				rc = -1;
				break;
			}
		}
		/* aws_sigv4: a presigned URL signed with a key of its own. */
		if (rc == 0 && c->kind == POLICY_CRED_AWS_SIGV4 &&
		    plan->query_cred != c && query_signed(req)) {
			snprintf(plan->cred, sizeof(plan->cred), "%s", c->name);
			*reason = REASON_FOREIGN_CRED;
			rc = -1;
		}
	}
	if (rc == 0)
		rc = require_scope(plan, req, reason);
	/* A swap needs the keeper up: its secrets may be stale or revoked. */
	if (rc == 0 && plan->cred[0] != '\0' && !keeper_client_up(s->p->kc)) {
		*reason = REASON_KEEPER_UNAVAILABLE;
		rc = -1;
	}
	if (rc == 0 && plan->cred[0] != '\0' && (plan->snap == NULL ||
	    !vault_snapshot_has(plan->snap, cred_value_name(plan,
	    plan->query_cred ? plan->query_cred : own_cred(s, plan->cred))))) {
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

void
cred_plan_free(struct cred_plan *plan)
{
	cred_plan_clear(plan);
	sigv4_plan_free(plan->x);
	free(plan->x);
	plan->x = NULL;
}

/* A placeholder within buf[0..n): 1 and cred named, or 0. */
static int
body_has(const struct cred_phs *ps, struct evbuffer *buf, size_t n,
    struct found *f)
{
	char cand[VAULT_PLACEHOLDER_LEN];
	const size_t pl = sizeof(VAULT_PLACEHOLDER_PREFIX) - 1;
	struct evbuffer_ptr pos, end;
	char scand[CRED_PHS_SHAPED_MAX];
	const char *fx;
	size_t i, fl, pl2;

	if (evbuffer_ptr_set(buf, &end, n, EVBUFFER_PTR_SET) == -1)
		return 0;
	/* The prefix, then the rest looked up. */
	pos.pos = -1;
	if (cred_phs_has_random(ps))
		pos = evbuffer_search_range(buf, VAULT_PLACEHOLDER_PREFIX, pl,
		    NULL, &end);
	while (pos.pos != -1) {
		if ((size_t)pos.pos + sizeof(cand) <= n &&
		    evbuffer_copyout_from(buf, &pos, cand, sizeof(cand)) ==
		    (ev_ssize_t)sizeof(cand) &&
		    cred_phs_match(ps, cand, sizeof(cand), found_cb, f) > 0)
			return 1;
		if (evbuffer_ptr_set(buf, &pos, 1, EVBUFFER_PTR_ADD) == -1)
			break;
		pos = evbuffer_search_range(buf, VAULT_PLACEHOLDER_PREFIX, pl,
		    &pos, &end);
	}
	/* Each shape's prefix, then its length looked up. */
	for (i = 0; (fx = cred_phs_shape(ps, i, &pl2, &fl)) != NULL; i++) {
		pos = evbuffer_search_range(buf, fx, pl2, NULL, &end);
		while (pos.pos != -1) {
			if ((size_t)pos.pos + fl <= n &&
			    evbuffer_copyout_from(buf, &pos, scand, fl) ==
			    (ev_ssize_t)fl &&
			    cred_phs_match(ps, scand, fl, found_cb, f) > 0)
				return 1;
			if (evbuffer_ptr_set(buf, &pos, 1, EVBUFFER_PTR_ADD) ==
			    -1)
				break;
			pos = evbuffer_search_range(buf, fx, pl2, &pos, &end);
		}
	}
	/* The few fixed ones, each. */
	for (i = 0; (fx = cred_phs_fixed(ps, i, &fl)) != NULL; i++)
		if (evbuffer_search_range(buf, fx, fl, NULL, &end).pos != -1 &&
		    cred_phs_match(ps, fx, fl, found_cb, f) > 0)
			return 1;
	return 0;
}

/*
 * Request bodies: a placeholder here is never swapped, and is refused.
 * The first n bytes of buf are about to move on; tail carries the end of
 * what moved before, so a placeholder split across reads is found too.
 */
int
cred_in_body(struct exchange *s, struct evbuffer *buf, size_t n, size_t moved,
    char *cred, size_t credlen)
{
	struct cred_body_tail *t = s->body_tail;
	struct found f = { cred, credlen };
	const struct cred_phs *ps;
	char edge[2 * CRED_PH_MAX];
	size_t head, keep, elen;
	int found = 0;

	if (atomic_load(&s->p->n_phs) == 0 || n == 0)
		return 0;
	/* The tail is the exchange's, made when its first body bytes are seen. */
	if (t == NULL && (t = s->body_tail = exchange_alloc(s,
	    sizeof(*t))) == NULL) {
		if (credlen > 0)
			cred[0] = '\0';
		return 1;	/* cannot look across reads: refuse, not pass */
	}
	head = n < CRED_PH_MAX ? n : CRED_PH_MAX;
	memcpy(edge, t->buf, t->len);
	evbuffer_copyout(buf, edge + t->len, head);
	elen = t->len + head;
	ps = cred_phs_enter(s->p->phs);
	found = cred_phs_search(ps, edge, elen, 0, found_cb, &f) > 0 ||
	    body_has(ps, buf, n, &f);
	cred_phs_leave(s->p->phs, ps);
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
	struct wants ws = { pol, 1, NULL, 0, 0, 0 };

	want_sandbox_cb(sandbox, policy_name, &ws);
	issue(p, &ws);
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * glibc keeps freed memory for later: once removals have been quiet for
 * CRED_TRIM_QUIET_MS (a launcher tearing down many sandboxes, and the audit
 * rows they queued, done), whole free pages go back to the system, so that
 * memory shrinks when sandboxes go. Main thread only.
 */
static void
trim_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct proxy *p = arg;
	uint64_t quiet = mono_ms() - p->phs_released_ms, left;
	struct timeval tv;

	if (quiet < CRED_TRIM_QUIET_MS) {
		left = CRED_TRIM_QUIET_MS - quiet;
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
		if (event_base_once(p->main_base, -1, EV_TIMEOUT, trim_cb, p,
		    &tv) == 0)
			return;
	}
	p->phs_trim_pending = 0;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

static void
trim_later(struct proxy *p)
{
	struct timeval tv = { CRED_TRIM_QUIET_MS / 1000,
	    CRED_TRIM_QUIET_MS % 1000 * 1000 };

	p->phs_released_ms = mono_ms();
	if (p->phs_trim_pending || p->main_base == NULL)
		return;
	if (event_base_once(p->main_base, -1, EV_TIMEOUT, trim_cb, p, &tv) == 0)
		p->phs_trim_pending = 1;
}

/*
 * A removed sandbox's placeholders are no longer its own and their memory
 * goes; the last CRED_PHS_REMOVED_MAX removed stay known, so that a leaked
 * one is still caught as misuse.
 */
void
cred_forget(struct proxy *p, const char *sandbox)
{
	if (cred_phs_forget(p->phs, sandbox) == -1)
		log_warnx("out of memory forgetting placeholders: sandbox %s "
		    "keeps them", sandbox);
	atomic_store(&p->n_phs, cred_phs_pub_count(p->phs));
	trim_later(p);
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
	const struct cred_phs *ps;
	size_t m = len < CRED_PH_MAX - 1 ? len : CRED_PH_MAX - 1, best;

	if (m == 0)
		return 0;
	evbuffer_ptr_set(buf, &at, len - m, EVBUFFER_PTR_SET);
	if (evbuffer_copyout_from(buf, &at, end, m) != (ev_ssize_t)m)
		return 0;
	ps = cred_phs_enter(p->phs);
	best = cred_phs_holdback(ps, end, m);
	cred_phs_leave(p->phs, ps);
	return best;
}

int
cred_name_leaks(struct exchange *s, const char *name, size_t len)
{
	const char *secrets[CRED_SCRUB_MAX], *phs[CRED_SCRUB_MAX];
	struct evbuffer *out;
	size_t n;
	int leaks;

	if (!cred_plan_scrubs(&s->fwd.plan))
		return 0;
	if ((out = evbuffer_new()) == NULL)
		return 1;
	n = cred_scrub_lists(s, secrets, phs);
	leaks = vault_scrub_string(s->fwd.plan.snap, secrets, phs, n, name, len,
	    out) == -1 || evbuffer_get_length(out) != len ||
	    memcmp(evbuffer_pullup(out, -1), name, len) != 0;
	evbuffer_free(out);
	return leaks;
}

/*
 * An OAuth2 credential's values the request's snapshot holds, each to come
 * back as ph: its access token, the one before it (still taken by the
 * origin), the refresh token, and the client's secret and Basic
 * credentials (a token endpoint on the API's own host may quote them).
 */
static size_t
oauth2_scrub_list(const struct cred_plan *plan, const struct policy_oauth2 *o,
    const char *ph, const char **secrets, const char **phs)
{
	const char *names[] = { o->access_name, o->was_name, o->refresh_name,
	    o->client_name, o->basic_name };
	size_t i, n = 0;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (vault_snapshot_has(plan->snap, names[i])) {
			secrets[n] = names[i];
			phs[n++] = ph;
		}
	return n;
}

/* The secrets of the credentials bound to this request's host, and their placeholders. */
size_t
cred_scrub_lists(const struct exchange *s, const char **secrets,
    const char **phs)
{
	const struct cred_plan *plan = &s->fwd.plan;
	const struct policy_credential *c;
	size_t j, k, n = 0;

	for (j = 0; j < plan->n_bound; j++) {
		c = plan->bound[j];
		if (c->kind == POLICY_CRED_AWS_SIGV4) {
			/* The key id comes back as its placeholder, key and token as the secret's. */
			for (k = 0; k < 3; k++) {
				if (!vault_snapshot_has(plan->snap,
				    plan->x->part[j][k]))
					continue;
				secrets[n] = plan->x->part[j][k];
				phs[n++] = k == 0 ? plan->x->ph[j] : plan->x->sph[j];
			}
			continue;
		}
		if (c->kind != POLICY_CRED_OAUTH2 || c->oauth2 == NULL) {
			secrets[n] = c->secret;
			phs[n++] = plan->x->ph[j];
			/* The value before a rotation, still valid upstream. */
			if (c->prev_name != NULL &&
			    vault_snapshot_has(plan->snap, c->prev_name)) {
				secrets[n] = c->prev_name;
				phs[n++] = plan->x->ph[j];
			}
			continue;
		}
		n += oauth2_scrub_list(plan, c->oauth2, plan->x->ph[j],
		    secrets + n, phs + n);
	}
	/* Other policies' secrets on this host: a fixed word instead. */
	for (j = 0; j < plan->n_also; j++) {
		c = plan->also[j];
		if (c->kind != POLICY_CRED_OAUTH2 || c->oauth2 == NULL) {
			secrets[n] = c->secret;
			phs[n++] = CRED_ALSO_WORD;
			if (c->prev_name != NULL &&
			    vault_snapshot_has(plan->snap, c->prev_name)) {
				secrets[n] = c->prev_name;
				phs[n++] = CRED_ALSO_WORD;
			}
			continue;
		}
		n += oauth2_scrub_list(plan, c->oauth2, CRED_ALSO_WORD,
		    secrets + n, phs + n);
	}
	return n;
}
