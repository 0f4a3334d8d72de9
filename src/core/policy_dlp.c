/*
 * A policy's dlp: key (docs/dlp.md): its mode, custom rules and allow
 * entries read and checked at their line, the rule set compiled once per
 * load (src/dlp), and the questions the gateway asks of it per request.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/policy_int.h"
#include "core/yaml_tree.h"
#include "dlp/dlp.h"

#define PD_MAX_RULES	256
#define PD_MAX_ALLOW	256

static char *
pd_strdup(struct ycheck *c, const struct ynode *n, const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		ycheck_err(c, n, "out of memory");
	return p;
}

static int
pd_severity(struct ycheck *c, const struct ynode *n, enum dlp_severity *out)
{
	static const char *const w[] = { "low", "medium", "high", "critical" };
	size_t i;

	for (i = 0; n->type == YNODE_SCALAR && i < 4; i++)
		if (strcmp(n->str, w[i]) == 0) {
			*out = (enum dlp_severity)(i + 1);
			return 0;
		}
	ycheck_err(c, n, "severity: expected low, medium, high or critical");
	return -1;
}

static int
pd_entropy(struct ycheck *c, const struct ynode *n, double *out)
{
	char *end;
	double v;

	if (n->type != YNODE_SCALAR || n->len == 0)
		goto bad;
	v = strtod(n->str, &end);
	if (*end != '\0' || !(v >= 0 && v <= 8))
		goto bad;
	*out = v;
	return 0;
bad:
	ycheck_err(c, n, "entropy: expected a number of bits per byte, "
	    "0 to 8");
	return -1;
}

static void
pd_rule(struct ycheck *c, const struct ynode *n, struct policy_dlp *d,
    struct dlp_rule_spec *spec, const struct ynode **at)
{
	const struct ynode *k;
	const char *s;
	char esc[80];
	size_t i;

	if (ycheck_is(c, n, YNODE_MAP, "dlp: rules") == -1)
		return;
	memset(spec, 0, sizeof(*spec));
	spec->severity = DLP_SEV_HIGH;
	*at = n;
	for (k = n->first; k != NULL; k = k->next) {
		s = k->key->str;
		if (strcmp(s, "id") == 0) {
			if (ycheck_str(c, k, "id", DLP_ID_MAX, &s) == 0) {
				if (!dlp_valid_id(s, strlen(s)))
					ycheck_err(c, k, "id: \"%s\" is not a "
					    "rule id ([a-z0-9][a-z0-9-]*)",
					    ycheck_esc(s, esc, sizeof(esc)));
				spec->id = s;
			}
		} else if (strcmp(s, "regex") == 0) {
			if (ycheck_str(c, k, "regex", DLP_REGEX_MAX, &s) == 0)
				spec->regex = s;
		} else if (strcmp(s, "severity") == 0)
			(void)pd_severity(c, k, &spec->severity);
		else if (strcmp(s, "entropy") == 0)
			(void)pd_entropy(c, k, &spec->entropy);
		else if (strcmp(s, "keyword") == 0) {
			if (ycheck_str(c, k, "keyword", DLP_KEYWORD_MAX, &s) == 0)
				spec->keyword = s;
		} else
			ycheck_unknown_of(c, k, "dlp rule",
			    "id|regex|severity|entropy|keyword");
	}
	if (spec->id == NULL && ynode_map_get(n, "id") == NULL)
		ycheck_err(c, n, "dlp rule: id is required");
	if (spec->regex == NULL && ynode_map_get(n, "regex") == NULL)
		ycheck_err(c, n, "dlp rule: regex is required");
	for (i = 0; spec->id != NULL && dlp_default_rule(i, NULL) != NULL; i++)
		if (strcmp(dlp_default_rule(i, NULL), spec->id) == 0)
			ycheck_err(c, ynode_map_get(n, "id"), "id: \"%s\" is a "
			    "default rule's id",
			    spec->id);
	(void)d;
}

static void
pd_allow(struct ycheck *c, const struct ynode *n, struct policy_dlp_allow *a,
    const struct ynode **rule_at)
{
	char norm[POLICY_HOST_MAX + 2], esc[80], canon[2048 + 2];
	size_t clen;
	const struct ynode *k;
	const char *s, *name;

	*rule_at = NULL;
	if (ycheck_is(c, n, YNODE_MAP, "dlp: allow") == -1)
		return;
	for (k = n->first; k != NULL; k = k->next) {
		s = k->key->str;
		if (strcmp(s, "host") == 0) {
			if (ycheck_str(c, k, "host", POLICY_HOST_MAX + 2, &s) == -1)
				continue;
			name = s;
			if (s[0] == '*' && s[1] == '.') {
				a->wildcard = 1;
				name = s + 2;
			}
			if (strchr(name, '*') != NULL || policy_name_normalize(name,
			    strlen(name), norm, sizeof(norm)) <= 0) {
				ycheck_err(c, k, "host: \"%s\" is not a host "
				    "name (or \"*.\" and one)",
				    ycheck_esc(s, esc, sizeof(esc)));
				continue;
			}
			a->host = pd_strdup(c, k, norm);
		} else if (strcmp(s, "path") == 0) {
			if (ycheck_str(c, k, "path", 2048, &s) == -1)
				continue;
			if (s[0] != '/') {
				ycheck_err(c, k, "path: a glob starting with '/'");
				continue;
			}
			/* Matched in canonical form, as paths: globs are. */
			if (policy_path_canon(s, strlen(s), canon,
			    sizeof(canon), &clen) != POLICY_PATH_OK ||
			    strcmp(canon, s) != 0) {
				ycheck_err(c, k, "path: \"%s\": requests are "
				    "matched in canonical form (no dot segments, "
				    "'//', ';', escapes that need none); write "
				    "it so", ycheck_esc(s, esc, sizeof(esc)));
				continue;
			}
			a->path = pd_strdup(c, k, s);
		} else if (strcmp(s, "rule") == 0) {
			if (ycheck_str(c, k, "rule", DLP_ID_MAX, &s) == 0) {
				a->rule = pd_strdup(c, k, s);
				*rule_at = k;
			}
		} else
			ycheck_unknown_of(c, k, "dlp allow entry", "host|path|rule");
	}
	if (a->host == NULL && a->path == NULL && a->rule == NULL &&
	    n->n == 0)
		ycheck_err(c, n, "dlp allow entry: host, path or rule is "
		    "required");
}

void
policy_dlp_free(struct policy_dlp *d)
{
	size_t i;

	if (d == NULL)
		return;
	dlp_set_free(d->set);
	for (i = 0; i < d->n_allow; i++) {
		free(d->allow[i].host);
		free(d->allow[i].path);
		free(d->allow[i].rule);
	}
	free(d->allow);
	free(d);
}

void
policy_dlp_load(struct ycheck *c, const struct ynode *n, struct policy_dlp **out)
{
	struct dlp_rule_spec *specs = NULL;
	const struct ynode **spec_at = NULL, **rule_at = NULL;
	const struct ynode *k, *it, *rules = NULL, *allow = NULL, *mode_at = n;
	struct policy_dlp *d;
	const char *why;
	char err[256];
	size_t i, nr = 0;
	int nerr0 = c->nerr, bad, defaults = 1;

	if (ycheck_is(c, n, YNODE_MAP, "dlp") == -1)
		return;
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		ycheck_err(c, n, "out of memory");
		return;
	}
	*out = d;
	d->mode = POLICY_DLP_BLOCK;
	for (k = n->first; k != NULL; k = k->next) {
		const char *s = k->key->str;

		if (strcmp(s, "mode") == 0) {
			mode_at = k;
			if (k->type == YNODE_SCALAR && strcmp(k->str, "block") == 0)
				d->mode = POLICY_DLP_BLOCK;
			else if (k->type == YNODE_SCALAR &&
			    strcmp(k->str, "report") == 0)
				d->mode = POLICY_DLP_REPORT;
			else if (k->type == YNODE_SCALAR &&
			    strcmp(k->str, "off") == 0)
				d->mode = POLICY_DLP_OFF;
			else
				ycheck_err(c, k, "mode: expected block, report "
				    "or off");
		} else if (strcmp(s, "defaults") == 0)
			(void)ycheck_bool(c, k, "defaults", &defaults);
		else if (strcmp(s, "rules") == 0)
			rules = k;
		else if (strcmp(s, "allow") == 0)
			allow = k;
		else
			ycheck_unknown_of(c, k, "dlp", "mode|defaults|rules|allow");
	}
	if (rules != NULL && ycheck_is(c, rules, YNODE_SEQ, "rules") == 0) {
		if (rules->n > PD_MAX_RULES)
			ycheck_err(c, rules, "rules: at most %d", PD_MAX_RULES);
		else if ((specs = calloc(rules->n + 1, sizeof(*specs))) == NULL ||
		    (spec_at = calloc(rules->n + 1, sizeof(*spec_at))) == NULL)
			ycheck_err(c, rules, "out of memory");
		else
			for (it = rules->first; it != NULL; it = it->next) {
				pd_rule(c, it, d, &specs[nr], &spec_at[nr]);
				for (i = 0; i < nr && specs[nr].id != NULL; i++)
					if (specs[i].id != NULL && strcmp(
					    specs[i].id, specs[nr].id) == 0)
						ycheck_err(c, ynode_map_get(
						    spec_at[nr], "id"),
						    "id: \"%s\" is defined twice",
						    specs[nr].id);
				nr++;
			}
	}
	if (allow != NULL && ycheck_is(c, allow, YNODE_SEQ, "allow") == 0) {
		if (allow->n > PD_MAX_ALLOW)
			ycheck_err(c, allow, "allow: at most %d", PD_MAX_ALLOW);
		else if ((d->allow = calloc(allow->n + 1, sizeof(*d->allow))) ==
		    NULL || (rule_at = calloc(allow->n + 1,
		    sizeof(*rule_at))) == NULL)
			ycheck_err(c, allow, "out of memory");
		else
			for (it = allow->first; it != NULL; it = it->next) {
				pd_allow(c, it, &d->allow[d->n_allow],
				    &rule_at[d->n_allow]);
				d->n_allow++;
			}
	}
	if (c->nerr > nerr0 || d->mode == POLICY_DLP_OFF)
		goto out;
	if (!dlp_available(&why)) {
		ycheck_err(c, mode_at, "dlp: %s; set mode: off, or run the "
		    "gateway on a CPU that has it", why);
		goto out;
	}
	d->set = dlp_set_new(specs, nr, defaults, err, sizeof(err), &bad);
	if (d->set == NULL) {
		ycheck_err(c, bad >= 0 ? ynode_map_get(spec_at[bad], "regex") :
		    n, "dlp: %s%s", bad >= 0 ? "regex: " : "", err);
		goto out;
	}
	for (i = 0; i < d->n_allow; i++)
		if (d->allow[i].rule != NULL &&
		    !dlp_set_has_rule(d->set, d->allow[i].rule))
			ycheck_err(c, rule_at[i], "rule: no dlp rule is named "
			    "\"%s\"", d->allow[i].rule);
out:
	free(specs);
	free(spec_at);
	free(rule_at);
}

const struct policy_dlp *
policy_dlp_of(const struct policy *p, const char *policy_name)
{
	size_t i;

	for (i = 0; p != NULL && policy_name != NULL && i < p->n_defs; i++)
		if (p->defs[i].name != NULL &&
		    strcmp(p->defs[i].name, policy_name) == 0)
			return p->defs[i].dlp != NULL &&
			    p->defs[i].dlp->mode != POLICY_DLP_OFF &&
			    p->defs[i].dlp->set != NULL ? p->defs[i].dlp : NULL;
	return NULL;
}

static int
pd_host_match(const struct policy_dlp_allow *a, const char *host)
{
	size_t hl, al;

	if (a->host == NULL)
		return 1;
	if (host == NULL)
		return 0;
	if (!a->wildcard)
		return strcmp(a->host, host) == 0;
	hl = strlen(host);
	al = strlen(a->host);
	return hl > al + 1 && host[hl - al - 1] == '.' &&
	    strcmp(host + hl - al, a->host) == 0;
}

int
policy_dlp_exempt(const struct policy_dlp *d, const char *host,
    const char *path, const char *rule)
{
	const struct policy_dlp_allow *a;
	char canon[POLICY_PATH_MAX];
	size_t i, clen = 0;
	int canon_ok = -1;	/* -1: not yet computed */

	if (d == NULL)
		return 1;
	for (i = 0; i < d->n_allow; i++) {
		a = &d->allow[i];
		if (!pd_host_match(a, host))
			continue;
		/*
		 * The glob matches the canonical path, as path rules do: an
		 * exemption for "/public/..." is not "/public/../upload"'s. An
		 * ambiguous or bad path gets no path exemption at all.
		 */
		if (a->path != NULL && canon_ok == -1)
			canon_ok = path != NULL && policy_path_canon(path,
			    strlen(path), canon, sizeof(canon), &clen) ==
			    POLICY_PATH_OK;
		if (a->path != NULL && (!canon_ok ||
		    !policy_glob_match(a->path, canon, clen)))
			continue;
		if (a->rule == NULL || (rule != NULL &&
		    strcmp(a->rule, rule) == 0))
			return 1;
	}
	return 0;
}

const char *
policy_dlp_mode_word(enum policy_dlp_mode m)
{
	switch (m) {
	case POLICY_DLP_BLOCK:
		return "block";
	case POLICY_DLP_REPORT:
		return "report";
	default:
		return "off";
	}
}
