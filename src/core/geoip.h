/*
 * GeoIP lookups (libmaxminddb, memory-mapped): the country (ISO 3166
 * alpha-2) and the autonomous system number of an address, for the audit
 * row and the countries / asns rules of a policy.
 */
#ifndef SG_GEOIP_H
#define SG_GEOIP_H

#include <stdint.h>

#include "core/netaddr.h"

struct geoip;

/*
 * Open either database (either path may be NULL). The country database has
 * the GeoLite2-Country layout (country.iso_code, else
 * registered_country.iso_code), the ASN database the GeoLite2-ASN layout
 * (autonomous_system_number). NULL with *errstr on error. Thread-safe
 * for lookups once opened.
 */
struct geoip	*geoip_open(const char *country_db, const char *asn_db,
		    const char **errstr);
void		 geoip_close(struct geoip *);

struct geoip_result {
	char		country[3];	/* "" when unknown */
	uint32_t	asn;		/* 0 when unknown */
};

/* Fills r (empty when nothing is known); 0, or -1 on a database error. */
int		 geoip_lookup(const struct geoip *, const struct netaddr *,
		    struct geoip_result *r);

#endif
