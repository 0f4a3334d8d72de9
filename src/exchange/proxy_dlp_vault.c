/*
 * The gateway's own secrets as dlp looks for them (docs/dlp.md,
 * "vault-secret"): every value of every credential of the policy -- a
 * static one's, an aws_sigv4 one's key id, secret key and session token, an
 * oauth2 one's client secret and tokens -- watched toward a host it is not
 * bound to. The list is the policy's whole (so one automaton serves every
 * host); the values stay in the vault. Calls nothing of the exchange's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dlp/dlp.h"
#include "exchange/exchange.h"
#include "vault/oauth2.h"
#include "vault/vault.h"

#define SEEK_NAME_MAX	(VAULT_NAME_MAX + 16)	/* "ENTRY#refresh" */

/* Every value of the policy's credentials: three at most per credential. */
struct seek_list {
	char		(*name)[SEEK_NAME_MAX];
	const char	**np;
	int		*watch;
	size_t		 n, cap;
	int		 any;	/* a watched one */
};

static void
seek_list_free(struct seek_list *l)
{
	if (l == NULL)
		return;
	free(l->name);
	free(l->np);
	free(l->watch);
	free(l);
}

/* Entry secret (+ part) into l, watched unless bound here; once per name. */
static void
seek_add(struct seek_list *l, const struct vault_snapshot *snap,
    const char *secret, const char *part, int bound)
{
	char nm[SEEK_NAME_MAX];
	size_t i;

	if (snprintf(nm, sizeof(nm), "%s%s", secret, part) >= (int)sizeof(nm) ||
	    !vault_snapshot_has(snap, nm))
		return;
	for (i = 0; i < l->n; i++)
		if (strcmp(l->name[i], nm) == 0) {
			/* Bound here through any credential: it may go here. */
			if (bound)
				l->watch[i] = 0;
			return;
		}
	if (l->n == l->cap)
		return;		/* cannot be: cap is three per credential */
	memcpy(l->name[l->n], nm, sizeof(nm));
	l->np[l->n] = l->name[l->n];
	l->watch[l->n++] = !bound;
}

/*
 * The list of every value of pol's credentials (a static one's, an
 * aws_sigv4 one's key id, secret key and session token, an oauth2 one's
 * client secret and tokens) that snap holds, each watched unless bound to
 * host. NULL: none, or no memory (*nomem).
 */
static struct seek_list *
seek_list_build(const struct policy *pol, const struct vault_snapshot *snap,
    const char *host, int *nomem)
{
	static const char *const aws[] = { VAULT_PART_ID, VAULT_PART_KEY,
	    VAULT_PART_TOKEN };
	const struct policy_credential *c;
	struct seek_list *l;
	size_t i, k, nc;
	int bound;

	*nomem = 0;
	c = policy_all_credentials(pol, &nc);
	if (nc == 0)
		return NULL;
	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->name = calloc(nc * 4, sizeof(*l->name))) == NULL ||
	    (l->np = calloc(nc * 4, sizeof(*l->np))) == NULL ||
	    (l->watch = calloc(nc * 4, sizeof(*l->watch))) == NULL) {
		seek_list_free(l);
		*nomem = 1;
		return NULL;
	}
	l->cap = nc * 4;
	for (i = 0; i < nc; i++) {
		bound = policy_credential_bound(&c[i], host);
		switch (c[i].kind) {
		case POLICY_CRED_AWS_SIGV4:
			for (k = 0; k < 3; k++)
				seek_add(l, snap, c[i].secret, aws[k], bound);
			break;
		case POLICY_CRED_OAUTH2:
			seek_add(l, snap, c[i].secret, "#access", bound);
			seek_add(l, snap, c[i].secret, OAUTH2_PART_WAS, bound);
			seek_add(l, snap, c[i].secret, "#refresh", bound);
			seek_add(l, snap, c[i].secret, OAUTH2_PART_CLIENT, bound);
			break;
		default:
			seek_add(l, snap, c[i].secret, "", bound);
			break;
		}
	}
	for (i = 0; i < l->n; i++)
		l->any |= l->watch[i];
	return l;
}

/* The vault's current snapshot, referenced (NULL: none yet). */
static struct vault_snapshot *
snap_get(struct proxy *px)
{
	struct vault_snapshot *snap;

	pthread_mutex_lock(&px->cred_mtx);
	if ((snap = px->snap) != NULL)
		vault_snapshot_ref(snap);
	pthread_mutex_unlock(&px->cred_mtx);
	return snap;
}

int
dlp_vault_seek(struct proxy *px, const struct policy *pol, const char *host,
    const void *p, size_t n)
{
	struct vault_snapshot *snap;
	struct vault_seeker *sk = NULL;
	struct seek_list *l;
	int rc = 0, nomem;

	if (px == NULL || (snap = snap_get(px)) == NULL)
		return 0;
	l = seek_list_build(pol, snap, host, &nomem);
	if (l == NULL)
		rc = nomem ? -1 : 0;
	else if (l->any && (sk = vault_seeker_new(snap, l->np, l->watch,
	    l->n)) == NULL)
		rc = -1;
	else if (sk != NULL)
		rc = vault_seek(sk, p, n) != 0;
	vault_seeker_free(sk);
	seek_list_free(l);
	vault_snapshot_unref(snap);
	return rc;
}

int
dlp_vault_seekers(struct proxy *px, const struct policy *pol, const char *host,
    struct vault_seeker **seek, size_t nseek)
{
	struct vault_snapshot *snap;
	struct seek_list *l;
	size_t i;
	int rc = 0, nomem;

	if (px == NULL || (snap = snap_get(px)) == NULL)
		return 0;
	if ((l = seek_list_build(pol, snap, host, &nomem)) == NULL) {
		vault_snapshot_unref(snap);
		return nomem ? -1 : 0;
	}
	for (i = 0; l->any && i < nseek; i++)
		if ((seek[i] = vault_seeker_new(snap, l->np, l->watch,
		    l->n)) == NULL)
			rc = -1;
	seek_list_free(l);
	vault_snapshot_unref(snap);
	return rc;
}
