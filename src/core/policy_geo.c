/*
 * Step 5 of the decision order (docs/policy.md): the countries and asns deny
 * rules of a sandbox's policy, applied to the geo data of one resolved address.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/policy_int.h"
#include "core/reason.h"

static const struct policy_def *
geo_find_def(const struct policy *p, const char *name)
{
	size_t i;

	if (p == NULL || name == NULL)
		return NULL;
	for (i = 0; i < p->n_defs; i++)
		if (strcmp(p->defs[i].name, name) == 0)
			return &p->defs[i];
	return NULL;
}

static int
geo_country_denied(const struct policy_def *def, const char *country)
{
	size_t i;

	if (country == NULL || strlen(country) != 2)
		return 0;
	for (i = 0; i < def->n_country_deny; i++)
		if (strcasecmp(def->country_deny[i], country) == 0)
			return 1;
	return 0;
}

static int
geo_asn_denied(const struct policy_def *def, uint32_t asn)
{
	size_t i;

	if (asn == 0)
		return 0;
	for (i = 0; i < def->n_asn_deny; i++)
		if (def->asn_deny[i] == asn)
			return 1;
	return 0;
}

/*
 * Like policy_check_addrs(), a denial keeps v->rule naming the allow rule
 * that matched, so the audit row shows what the geo rule overrode.
 * Unknown country or ASN is allowed: the rules only list what to deny.
 */
int
policy_check_geo(const struct policy *p, const struct policy_identity *id,
    const char *country, uint32_t asn, struct policy_verdict *v)
{
	const struct policy_def *def;

	if (!v->allow)
		return 0;
	if (id == NULL) {
		v->allow = 0;
		snprintf(v->rule, sizeof(v->rule), "no-identity");
		v->reason = REASON_NO_IDENTITY;
		return 0;
	}
	if ((def = geo_find_def(p, id->policy)) == NULL) {
		v->allow = 0;
		snprintf(v->rule, sizeof(v->rule), "default-deny");
		v->reason = REASON_UNKNOWN_POLICY;
		return 0;
	}
	if (geo_country_denied(def, country) &&
	    !policy_verdict_report(v, REASON_COUNTRY_DENY)) {
		v->allow = 0;
		v->reason = REASON_COUNTRY_DENY;
		return 0;
	}
	if (geo_asn_denied(def, asn) &&
	    !policy_verdict_report(v, REASON_ASN_DENY)) {
		v->allow = 0;
		v->reason = REASON_ASN_DENY;
		return 0;
	}
	return 1;
}
