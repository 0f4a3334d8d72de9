/*
 * GeoIP lookups over libmaxminddb in MMDB_MODE_MMAP: owns the two mapped
 * databases (country, ASN). After geoip_open() nothing is written, so any
 * number of threads may call geoip_lookup() at once.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <netinet/in.h>

#include <maxminddb.h>

#include "core/geoip.h"

struct geoip {
	MMDB_s	country;
	MMDB_s	asn;
	int	has_country;
	int	has_asn;
};

/* geoip_open() runs at start-up; the message stays valid until the next call. */
static __thread char geoip_errbuf[512];

static const char *
geoip_err(const char *slot, const char *path, const char *msg)
{
	snprintf(geoip_errbuf, sizeof(geoip_errbuf), "geoip.%s %s: %s", slot,
	    path, msg);
	return geoip_errbuf;
}

/*
 * Map one database and check that it is the kind the slot expects (its
 * metadata database_type contains one of the accepted words).
 */
static int
geoip_open_one(MMDB_s *db, const char *slot, const char *path,
    const char *const *types, const char *want, const char **errstr)
{
	const char *type, *msg;
	struct stat st;
	char buf[256];
	int rc, saved, i;

	errno = 0;
	if ((rc = MMDB_open(path, MMDB_MODE_MMAP, db)) != MMDB_SUCCESS) {
		saved = errno;
		switch (rc) {
		case MMDB_FILE_OPEN_ERROR:
			msg = saved != 0 ? strerror(saved) :
			    "cannot open the file";
			break;
		case MMDB_IO_ERROR:
			/* mmap's EINVAL / ENODEV say little: name the cause. */
			if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
				msg = "is a directory";
			else if (stat(path, &st) == 0 && st.st_size == 0)
				msg = "empty file, not a MaxMind DB (.mmdb) file";
			else {
				snprintf(buf, sizeof(buf), "cannot read the "
				    "file: %s", saved != 0 ? strerror(saved) :
				    "I/O error");
				msg = buf;
			}
			break;
		case MMDB_INVALID_METADATA_ERROR:
		case MMDB_UNKNOWN_DATABASE_FORMAT_ERROR:
			msg = "not a MaxMind DB (.mmdb) file, or a corrupt one";
			break;
		case MMDB_OUT_OF_MEMORY_ERROR:
			msg = "out of memory";
			break;
		default:
			snprintf(buf, sizeof(buf), "malformed MaxMind DB: %s",
			    MMDB_strerror(rc));
			msg = buf;
			break;
		}
		*errstr = geoip_err(slot, path, msg);
		return -1;
	}
	type = db->metadata.database_type;
	for (i = 0; type != NULL && types[i] != NULL; i++)
		if (strstr(type, types[i]) != NULL)
			return 0;
	snprintf(buf, sizeof(buf), "database_type \"%.64s\" is not %s",
	    type != NULL ? type : "", want);
	*errstr = geoip_err(slot, path, buf);
	MMDB_close(db);
	return -1;
}

struct geoip *
geoip_open(const char *country_db, const char *asn_db, const char **errstr)
{
	static const char *const country_types[] = { "Country", "City", NULL };
	static const char *const asn_types[] = { "ASN", NULL };
	struct geoip *g;

	if ((g = calloc(1, sizeof(*g))) == NULL) {
		*errstr = "geoip: out of memory";
		return NULL;
	}
	if (country_db != NULL) {
		if (geoip_open_one(&g->country, "country_db", country_db,
		    country_types, "a Country or City database (e.g. "
		    "GeoLite2-Country)", errstr) == -1)
			goto fail;
		g->has_country = 1;
	}
	if (asn_db != NULL) {
		if (geoip_open_one(&g->asn, "asn_db", asn_db, asn_types,
		    "an ASN database (e.g. GeoLite2-ASN)", errstr) == -1)
			goto fail;
		g->has_asn = 1;
	}
	return g;
fail:
	geoip_close(g);
	return NULL;
}

void
geoip_close(struct geoip *g)
{
	if (g == NULL)
		return;
	if (g->has_country)
		MMDB_close(&g->country);
	if (g->has_asn)
		MMDB_close(&g->asn);
	free(g);
}

/*
 * Find a's record in db. 1 found, 0 nothing known (no record, or an IPv6
 * address in an IPv4-only database), -1 database error.
 */
static int
geoip_find(const MMDB_s *db, const struct sockaddr *sa,
    MMDB_lookup_result_s *res)
{
	int mmdb_err;

	*res = MMDB_lookup_sockaddr(db, sa, &mmdb_err);
	if (mmdb_err == MMDB_IPV6_LOOKUP_IN_IPV4_DATABASE_ERROR)
		return 0;
	if (mmdb_err != MMDB_SUCCESS)
		return -1;
	return res->found_entry ? 1 : 0;
}

/* 1 and data filled when path exists in the record, 0 absent, -1 error. */
static int
geoip_value(MMDB_entry_s *entry, MMDB_entry_data_s *data, const char *k1,
    const char *k2)
{
	int rc;

	rc = MMDB_get_value(entry, data, k1, k2, NULL);
	if (rc == MMDB_LOOKUP_PATH_DOES_NOT_MATCH_DATA_ERROR)
		return 0;	/* e.g. "country" is not a map: treat as absent */
	if (rc != MMDB_SUCCESS)
		return -1;
	return data->has_data ? 1 : 0;
}

/* An ISO 3166 alpha-2 code, upper-cased; anything else is "unknown". */
static int
geoip_copy_country(const MMDB_entry_data_s *d, char out[3])
{
	if (d->type != MMDB_DATA_TYPE_UTF8_STRING || d->data_size != 2 ||
	    !isalpha((unsigned char)d->utf8_string[0]) ||
	    !isalpha((unsigned char)d->utf8_string[1]))
		return 0;
	out[0] = (char)toupper((unsigned char)d->utf8_string[0]);
	out[1] = (char)toupper((unsigned char)d->utf8_string[1]);
	out[2] = '\0';
	return 1;
}

static int
geoip_country(const MMDB_s *db, const struct sockaddr *sa, char out[3])
{
	MMDB_lookup_result_s res;
	MMDB_entry_data_s d;
	int rc;

	if ((rc = geoip_find(db, sa, &res)) != 1)
		return rc;
	if ((rc = geoip_value(&res.entry, &d, "country", "iso_code")) == -1)
		return -1;
	if (rc == 1 && geoip_copy_country(&d, out))
		return 0;
	rc = geoip_value(&res.entry, &d, "registered_country", "iso_code");
	if (rc == -1)
		return -1;
	if (rc == 1)
		geoip_copy_country(&d, out);
	return 0;
}

static int
geoip_asn(const MMDB_s *db, const struct sockaddr *sa, uint32_t *out)
{
	MMDB_lookup_result_s res;
	MMDB_entry_data_s d;
	int rc;

	if ((rc = geoip_find(db, sa, &res)) != 1)
		return rc;
	if ((rc = geoip_value(&res.entry, &d, "autonomous_system_number",
	    NULL)) != 1)
		return rc;
	switch (d.type) {
	case MMDB_DATA_TYPE_UINT32:
		*out = d.uint32;
		break;
	case MMDB_DATA_TYPE_UINT16:
		*out = d.uint16;
		break;
	case MMDB_DATA_TYPE_UINT64:
		if (d.uint64 <= UINT32_MAX)
			*out = (uint32_t)d.uint64;
		break;
	case MMDB_DATA_TYPE_INT32:
		if (d.int32 > 0)
			*out = (uint32_t)d.int32;
		break;
	default:
		break;	/* not a number: unknown */
	}
	return 0;
}

/*
 * Both databases are consulted even when one fails, so r holds whatever
 * could be found; the return value says whether anything failed.
 */
int
geoip_lookup(const struct geoip *g, const struct netaddr *a,
    struct geoip_result *r)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };
	struct sockaddr_storage ss;
	struct netaddr v4;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	if (g == NULL || a == NULL ||
	    (a->family != AF_INET && a->family != AF_INET6))
		return 0;
	/* netaddr normalises ::ffff:a.b.c.d, but a hand-built one may not be. */
	if (a->family == AF_INET6 && memcmp(a->a, mapped, sizeof(mapped)) == 0) {
		memset(&v4, 0, sizeof(v4));
		v4.family = AF_INET;
		memcpy(v4.a, a->a + 12, 4);
		a = &v4;
	}
	if (netaddr_to_sockaddr(a, 0, &ss) == 0)
		return 0;
	if (g->has_country &&
	    geoip_country(&g->country, (struct sockaddr *)&ss, r->country) == -1)
		rc = -1;
	if (g->has_asn && geoip_asn(&g->asn, (struct sockaddr *)&ss, &r->asn) == -1)
		rc = -1;
	return rc;
}
