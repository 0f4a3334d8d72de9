/*
 * Kind oauth2 in the vault (oauth2.h): the entry's key=value lines read in
 * place (no copies outside wiped memory), a rotated refresh token written
 * into a copy of the entry, and snapshots with obtained tokens added.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vault/oauth2.h"
#include "vault/vault_int.h"

int
oauth2_token_ok(const char *t, size_t len)
{
	size_t i;

	if (len == 0 || len > OAUTH2_TOKEN_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e)
			return 0;
	return 1;
}

int
oauth2_entry_parse(const unsigned char *val, size_t len,
    struct oauth2_entry *e, const char **why)
{
	const char *p = (const char *)val, *end = p + len, *nl, *eq, *v;
	const char **slot;
	size_t *slen, ll, kl, vl;

	memset(e, 0, sizeof(*e));
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		ll = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (ll > 0 && p[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			goto next;
		if ((eq = memchr(p, '=', ll)) == NULL) {
			*why = "a line without key=value";
			return -1;
		}
		kl = (size_t)(eq - p);
		v = eq + 1;
		vl = ll - kl - 1;
		if (kl == 9 && memcmp(p, "client_id", 9) == 0) {
			slot = &e->client_id;
			slen = &e->client_id_len;
		} else if (kl == 13 && memcmp(p, "client_secret", 13) == 0) {
			slot = &e->client_secret;
			slen = &e->client_secret_len;
		} else if (kl == 13 && memcmp(p, "refresh_token", 13) == 0) {
			slot = &e->refresh_token;
			slen = &e->refresh_token_len;
		} else {
			*why = "a key other than client_id, client_secret, "
			    "refresh_token";
			return -1;
		}
		if (*slot != NULL) {
			*why = "a key given twice";
			return -1;
		}
		if (!oauth2_token_ok(v, vl)) {
			*why = "an empty value, or one with spaces or control "
			    "bytes";
			return -1;
		}
		*slot = v;
		*slen = vl;
next:
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	return 0;
}

static int
put(unsigned char *out, size_t cap, size_t *at, const void *p, size_t n)
{
	if (n > cap - *at)
		return -1;
	memcpy(out + *at, p, n);
	*at += n;
	return 0;
}

long
oauth2_entry_set_refresh(const unsigned char *val, size_t len,
    const char *rt, size_t rtlen, unsigned char *out, size_t cap)
{
	struct oauth2_entry e;
	const char *why;
	size_t at = 0;

	if (!oauth2_token_ok(rt, rtlen) ||
	    oauth2_entry_parse(val, len, &e, &why) == -1)
		return -1;
	if ((e.client_id != NULL && (put(out, cap, &at, "client_id=", 10) ||
	    put(out, cap, &at, e.client_id, e.client_id_len) ||
	    put(out, cap, &at, "\n", 1))) ||
	    (e.client_secret != NULL && (put(out, cap, &at, "client_secret=",
	    14) || put(out, cap, &at, e.client_secret, e.client_secret_len) ||
	    put(out, cap, &at, "\n", 1))) ||
	    put(out, cap, &at, "refresh_token=", 14) ||
	    put(out, cap, &at, rt, rtlen) || put(out, cap, &at, "\n", 1))
		return -1;
	return (long)at;
}

const unsigned char *
oauth2_snap_value(const struct vault_snapshot *s, const char *name,
    size_t *len)
{
	const struct vault_secret *e = vault_snapshot_find(s, name);

	if (e == NULL)
		return NULL;
	*len = e->len;
	return e->val;
}

struct vault_snapshot *
oauth2_snap_extend(const struct vault_snapshot *base,
    const char *const *names, const unsigned char *const *vals,
    const size_t *lens, size_t n)
{
	const char **an = NULL;
	const unsigned char **av = NULL;
	size_t *al = NULL, i, j, k = 0, nb = base != NULL ? base->n : 0;
	struct vault_snapshot *s = NULL;

	if ((an = calloc(nb + n + 1, sizeof(*an))) == NULL ||
	    (av = calloc(nb + n + 1, sizeof(*av))) == NULL ||
	    (al = calloc(nb + n + 1, sizeof(*al))) == NULL)
		goto done;
	for (i = 0; i < n; i++) {
		an[k] = names[i];
		av[k] = vals[i];
		al[k++] = lens[i];
	}
	/* build keeps the first of a name: the new values come first. */
	for (j = 0; j < nb; j++) {
		an[k] = base->e[j].name;
		av[k] = base->e[j].val;
		al[k++] = base->e[j].len;
	}
	s = vault_snapshot_build(an, av, al, k);
done:
	free(an);
	free(av);
	free(al);
	return s;
}

char *
oauth2_entry_basic(const struct oauth2_entry *e, size_t *len)
{
	size_t cl, n;
	char *pct, *out;

	if (e->client_secret == NULL)
		return NULL;
	cl = 3 * (e->client_id_len + e->client_secret_len) + 1;
	if ((pct = vault_secmem_alloc(cl)) == NULL)
		return NULL;
	if ((out = vault_secmem_alloc(4 * (cl / 3 + 1) + 1)) != NULL) {
		n = vault_pct_encode((const unsigned char *)e->client_id,
		    e->client_id_len, 0, 1, pct);
		pct[n++] = ':';
		n += vault_pct_encode((const unsigned char *)e->client_secret,
		    e->client_secret_len, 0, 1, pct + n);
		*len = vault_b64_encode((const unsigned char *)pct, n,
		    VAULT_B64_STD, 1, out);
	}
	vault_secmem_free(pct);
	return out;
}

struct vault_snapshot *
oauth2_snap_parts(const struct vault_snapshot *src, const char *const *names,
    size_t n)
{
	char (*nm)[VAULT_SNAP_NAME_MAX + 1] = NULL;
	const char **np = NULL;
	const unsigned char **vals = NULL, *v;
	size_t *lens = NULL, i, k = 0, len;
	struct vault_snapshot *s = NULL;
	struct oauth2_entry e;
	const char *why;
	char **basic = NULL;

	if ((nm = calloc(3 * n + 1, sizeof(*nm))) == NULL ||
	    (np = calloc(3 * n + 1, sizeof(*np))) == NULL ||
	    (vals = calloc(3 * n + 1, sizeof(*vals))) == NULL ||
	    (lens = calloc(3 * n + 1, sizeof(*lens))) == NULL ||
	    (basic = calloc(n + 1, sizeof(*basic))) == NULL)
		goto done;
	for (i = 0; i < n; i++) {
		if ((v = oauth2_snap_value(src, names[i], &len)) == NULL ||
		    oauth2_entry_parse(v, len, &e, &why) == -1 ||
		    strlen(names[i]) + sizeof("#refresh") > sizeof(nm[0]))
			continue;
		if (e.client_secret != NULL) {
			snprintf(nm[k], sizeof(nm[k]), "%s" OAUTH2_PART_CLIENT,
			    names[i]);
			np[k] = nm[k];
			vals[k] = (const unsigned char *)e.client_secret;
			lens[k++] = e.client_secret_len;
			/* As a token request's Authorization sends it. */
			if ((basic[i] = oauth2_entry_basic(&e, &len)) != NULL) {
				snprintf(nm[k], sizeof(nm[k]), "%s"
				    OAUTH2_PART_BASIC, names[i]);
				np[k] = nm[k];
				vals[k] = (const unsigned char *)basic[i];
				lens[k++] = len;
			}
		}
		/* The entry's own; the one in use (oauth2_token.c) replaces it. */
		if (e.refresh_token != NULL) {
			snprintf(nm[k], sizeof(nm[k]), "%s#refresh", names[i]);
			np[k] = nm[k];
			vals[k] = (const unsigned char *)e.refresh_token;
			lens[k++] = e.refresh_token_len;
		}
	}
	if (k == 0) {
		vault_snapshot_ref((struct vault_snapshot *)src);
		s = (struct vault_snapshot *)src;
	} else
		s = oauth2_snap_extend(src, np, vals, lens, k);
done:
	if (basic != NULL)
		for (i = 0; i < n; i++)
			vault_secmem_free(basic[i]);
	free(basic);
	free(nm);
	free(np);
	free(vals);
	free(lens);
	return s;
}
