/*
 * Unit tests for core/geoip.c and core/policy_geo.c: databases written at
 * test time by data/geoip_make.pl (Debian's libmaxmind-db-writer-perl) into
 * a temporary directory, lookups, open errors, and the countries / asns
 * rules of data/geo_policy.yaml. Skips (77) when the Perl writer is missing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>

#include "check.h"
#include "core/geoip.h"
#include "core/policy_int.h"
#include "core/reason.h"
#include "helper_core.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-geoip-XXXXXX";

static const char *
tmp_path(const char *name)
{
	static char buf[8][1200];
	static int n;

	n = (n + 1) % 8;
	snprintf(buf[n], sizeof(buf[n]), "%s/%s", tmp_dir, name);
	return buf[n];
}

/* Runs geoip_make.pl; 0 ok, 77 writer missing, -1 failure. */
static int
make_databases(void)
{
	char script[1200];
	pid_t pid;
	int status;

	snprintf(script, sizeof(script), "%s/geoip_make.pl", data_dir);
	if ((pid = fork()) == -1) {
		perror("fork");
		return -1;
	}
	if (pid == 0) {
		execl("/usr/bin/perl", "perl", script, tmp_dir, (char *)NULL);
		perror("/usr/bin/perl");
		_exit(127);
	}
	if (waitpid(pid, &status, 0) == -1) {
		perror("waitpid");
		return -1;
	}
	if (WIFEXITED(status) && (WEXITSTATUS(status) == 2 ||
	    WEXITSTATUS(status) == 127)) {
		printf("skip: cannot write test databases: needs /usr/bin/perl "
		    "and MaxMind::DB::Writer (libmaxmind-db-writer-perl)\n");
		return 77;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "geoip_make.pl failed (status %d)\n", status);
		return -1;
	}
	return 0;
}

static int
write_file(const char *path, const void *buf, size_t len)
{
	FILE *f;
	int rc = 0;

	if ((f = fopen(path, "wb")) == NULL)
		return -1;
	if (len > 0 && fwrite(buf, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

static unsigned char *
read_file(const char *path, size_t *len)
{
	unsigned char *buf;
	struct stat st;
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL)
		return NULL;
	if (fstat(fileno(f), &st) == -1 || st.st_size <= 0 ||
	    (buf = malloc((size_t)st.st_size)) == NULL) {
		fclose(f);
		return NULL;
	}
	*len = fread(buf, 1, (size_t)st.st_size, f);
	fclose(f);
	return buf;
}

/* The broken files: random bytes, empty, cut short, a trashed search tree. */
static int
make_bad_files(void)
{
	unsigned char rnd[4096], *db;
	uint32_t x = 0x9e3779b9;
	size_t i, len;
	int rc = 0;

	for (i = 0; i < sizeof(rnd); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		rnd[i] = (unsigned char)x;
	}
	rc |= write_file(tmp_path("random.mmdb"), rnd, sizeof(rnd));
	rc |= write_file(tmp_path("empty.mmdb"), "", 0);
	if ((db = read_file(tmp_path("country.mmdb"), &len)) == NULL)
		return -1;
	rc |= write_file(tmp_path("truncated.mmdb"), db, len / 2);
	/* Every search tree record points past the data section. */
	memset(db, 0xff, len > 512 ? 512 : len / 2);
	rc |= write_file(tmp_path("badtree.mmdb"), db, len);
	free(db);
	return rc;
}

struct lookup_case {
	const char	*addr;
	const char	*country;
	uint32_t	 asn;
};

static const struct lookup_case lookup_cases[] = {
	{ "127.0.0.1", "KP", 64496 },
	{ "127.0.0.255", "KP", 64496 },
	{ "127.0.1.7", "DE", 64511 },		/* country wins over registered_country */
	{ "127.0.2.1", "", 0 },
	{ "198.18.3.4", "US", 0 },
	{ "198.18.255.255", "US", 0 },
	{ "198.19.0.1", "", 0 },
	{ "198.51.100.9", "FR", 0 },		/* registered_country only; ASN record without a number */
	{ "203.0.113.5", "SE", 0 },		/* "se" upper-cased */
	{ "203.0.113.200", "", 0 },		/* "XYZ" is no ISO code */
	{ "192.0.2.1", "", 0 },			/* a record without country */
	{ "192.0.2.200", "", 0 },		/* no record */
	{ "0.0.0.0", "", 0 },
	{ "255.255.255.255", "", 0 },
	{ "2001:db8:1::5", "JP", 0 },		/* IPv6; the ASN db is IPv4-only */
	{ "2001:db8:1:ffff:ffff:ffff:ffff:ffff", "JP", 0 },
	{ "2001:db8:2::1", "", 0 },
	{ "::ffff:127.0.1.1", "DE", 64511 },	/* v4-mapped */
	{ "::ffff:198.18.0.1", "US", 0 },
	{ "::1", "", 0 },
	{ "::", "", 0 },
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static void
check_case(const struct geoip *g, const struct lookup_case *c, int use_country,
    int use_asn)
{
	struct geoip_result r;
	struct netaddr a;

	memset(&r, 0x55, sizeof(r));
	if (netaddr_parse(c->addr, strlen(c->addr), &a) != 0) {
		CHECK_MSG(0, "bad test address %s", c->addr);
		return;
	}
	CHECK_MSG(geoip_lookup(g, &a, &r) == 0, "lookup %s", c->addr);
	CHECK_MSG(strcmp(r.country, use_country ? c->country : "") == 0,
	    "%s: country \"%.3s\", want \"%s\"", c->addr, r.country,
	    use_country ? c->country : "");
	CHECK_MSG(r.asn == (use_asn ? c->asn : 0), "%s: asn %u, want %u",
	    c->addr, r.asn, use_asn ? c->asn : 0);
}

static void
test_lookups(void)
{
	const char *errstr = NULL;
	struct geoip *g, *city, *only_asn, *only_country, *none;
	struct geoip_result r;
	struct netaddr a;
	size_t i;

	g = geoip_open(tmp_path("country.mmdb"), tmp_path("asn.mmdb"), &errstr);
	CHECK_MSG(g != NULL, "open: %s", errstr ? errstr : "");
	city = geoip_open(tmp_path("city.mmdb"), NULL, &errstr);
	CHECK_MSG(city != NULL, "open city: %s", errstr ? errstr : "");
	only_asn = geoip_open(NULL, tmp_path("asn.mmdb"), &errstr);
	CHECK(only_asn != NULL);
	only_country = geoip_open(tmp_path("country.mmdb"), NULL, &errstr);
	CHECK(only_country != NULL);
	none = geoip_open(NULL, NULL, &errstr);
	CHECK(none != NULL);
	if (g == NULL || city == NULL || only_asn == NULL ||
	    only_country == NULL || none == NULL)
		goto out;

	for (i = 0; i < NELEM(lookup_cases); i++) {
		check_case(g, &lookup_cases[i], 1, 1);
		check_case(city, &lookup_cases[i], 1, 0);
		check_case(only_asn, &lookup_cases[i], 0, 1);
		check_case(only_country, &lookup_cases[i], 1, 0);
		check_case(none, &lookup_cases[i], 0, 0);
	}

	/* A hand-built, un-normalised ::ffff:127.0.0.9 is still the IPv4 one. */
	memset(&a, 0, sizeof(a));
	a.family = AF_INET6;
	a.a[10] = a.a[11] = 0xff;
	a.a[12] = 127;
	a.a[15] = 9;
	CHECK_INT(geoip_lookup(g, &a, &r), 0);
	CHECK_STR(r.country, "KP");
	CHECK_INT(r.asn, 64496);

	/* No handle, or a bogus family: nothing known, no error. */
	CHECK_INT(geoip_lookup(NULL, &a, &r), 0);
	CHECK_STR(r.country, "");
	CHECK_INT(r.asn, 0);
	a.family = AF_UNIX;
	CHECK_INT(geoip_lookup(g, &a, &r), 0);
	CHECK_STR(r.country, "");
out:
	geoip_close(g);
	geoip_close(city);
	geoip_close(only_asn);
	geoip_close(only_country);
	geoip_close(none);
	geoip_close(NULL);
}

struct open_case {
	const char	*country;	/* file names in tmp_dir; NULL none */
	const char	*asn;
	const char	*want;		/* substring of errstr; NULL: opens */
};

static const struct open_case open_cases[] = {
	{ "country.mmdb", "asn.mmdb", NULL },
	{ "city.mmdb", "asn.mmdb", NULL },
	{ "missing.mmdb", NULL, "geoip.country_db " },
	{ "missing.mmdb", NULL, "No such file or directory" },
	{ NULL, "missing.mmdb", "geoip.asn_db " },
	{ "country.mmdb", "missing.mmdb", "missing.mmdb: No such file" },
	{ "random.mmdb", NULL, "not a MaxMind DB (.mmdb) file" },
	{ NULL, "random.mmdb", "not a MaxMind DB (.mmdb) file" },
	{ "empty.mmdb", NULL, "empty.mmdb: empty file, not a MaxMind DB" },
	{ "truncated.mmdb", NULL, "not a MaxMind DB (.mmdb) file" },
	{ "asn.mmdb", NULL, "database_type \"GeoLite2-ASN\" is not a Country "
	    "or City database" },
	{ NULL, "country.mmdb", "database_type \"GeoLite2-Country\" is not an "
	    "ASN database" },
	{ NULL, "city.mmdb", "is not an ASN database" },
	{ "bogus.mmdb", NULL, "\"Sandgate-Test-Anonymous-IP\" is not a "
	    "Country" },
	{ NULL, "bogus.mmdb", "\"Sandgate-Test-Anonymous-IP\" is not an ASN" },
	{ "asn.mmdb", "country.mmdb", "geoip.country_db " },
	{ ".", NULL, "/.: is a directory" },
};

static void
test_open_errors(void)
{
	const struct open_case *c;
	const char *errstr;
	struct geoip *g;
	size_t i;

	for (i = 0; i < NELEM(open_cases); i++) {
		c = &open_cases[i];
		errstr = NULL;
		g = geoip_open(c->country ? tmp_path(c->country) : NULL,
		    c->asn ? tmp_path(c->asn) : NULL, &errstr);
		if (c->want == NULL) {
			CHECK_MSG(g != NULL, "case %zu: %s", i,
			    errstr ? errstr : "");
		} else {
			CHECK_MSG(g == NULL, "case %zu opened", i);
			CHECK_MSG(errstr != NULL && strstr(errstr, c->want),
			    "case %zu: \"%s\" lacks \"%s\"", i,
			    errstr ? errstr : "(null)", c->want);
		}
		geoip_close(g);
	}
}

/* A database whose metadata is fine but whose search tree is garbage. */
static void
test_corrupt_tree(void)
{
	const char *errstr = NULL;
	struct geoip_result r;
	struct geoip *g;
	struct netaddr a;

	g = geoip_open(tmp_path("badtree.mmdb"), NULL, &errstr);
	CHECK_MSG(g != NULL, "badtree: %s", errstr ? errstr : "");
	if (g == NULL)
		return;
	netaddr_parse("127.0.0.1", 9, &a);
	CHECK_INT(geoip_lookup(g, &a, &r), -1);
	CHECK_STR(r.country, "");
	CHECK_INT(r.asn, 0);
	geoip_close(g);
}

struct thread_arg {
	const struct geoip	*g;
	int			 bad;
};

static void *
lookup_thread(void *p)
{
	struct thread_arg *t = p;
	const struct lookup_case *c;
	struct geoip_result r;
	struct netaddr a;
	size_t i, round;

	for (round = 0; round < 2000; round++) {
		c = &lookup_cases[round % NELEM(lookup_cases)];
		netaddr_parse(c->addr, strlen(c->addr), &a);
		if (geoip_lookup(t->g, &a, &r) != 0 ||
		    strcmp(r.country, c->country) != 0 || r.asn != c->asn)
			t->bad++;
		for (i = 0; i < 3; i++)
			sched_yield();
	}
	return NULL;
}

static void
test_threads(void)
{
	struct thread_arg args[4];
	pthread_t th[4];
	const char *errstr = NULL;
	struct geoip *g;
	int i, started = 0;

	g = geoip_open(tmp_path("country.mmdb"), tmp_path("asn.mmdb"), &errstr);
	CHECK(g != NULL);
	if (g == NULL)
		return;
	for (i = 0; i < 4; i++) {
		args[i].g = g;
		args[i].bad = 0;
		if (pthread_create(&th[i], NULL, lookup_thread, &args[i]) != 0)
			break;
		started++;
	}
	CHECK_INT(started, 4);
	for (i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT(args[i].bad, 0);
	}
	geoip_close(g);
}

struct geo_case {
	const char	*source;	/* identifies the sandbox */
	const char	*dest;		/* IP target */
	int		 allow;
	const char	*rule;
	enum sg_reason	 reason;
};

static const struct geo_case geo_cases[] = {
	{ "127.0.0.1", "127.0.0.1", 0, "geo:allow[0]", REASON_COUNTRY_DENY },
	{ "127.0.0.1", "::ffff:127.0.0.77", 0, "geo:allow[0]",
	    REASON_COUNTRY_DENY },
	{ "127.0.0.1", "127.0.1.1", 0, "geo:allow[0]", REASON_ASN_DENY },
	{ "127.0.0.1", "198.18.0.1", 1, "geo:allow[0]", REASON_NONE },
	{ "127.0.0.1", "192.0.2.200", 1, "geo:allow[0]", REASON_NONE },	/* unknown */
	{ "127.0.0.1", "2001:db8:1::1", 1, "geo:allow[1]", REASON_NONE },	/* JP */
	{ "127.0.0.1", "2001:db8:9::1", 1, "geo:allow[1]", REASON_NONE },
	{ "127.0.0.2", "127.0.0.1", 1, "open:allow[0]", REASON_NONE },	/* no rules */
	{ "127.0.0.2", "127.0.1.1", 1, "open:allow[0]", REASON_NONE },
};

static void
test_policy_geo(void)
{
	const struct geo_case *c;
	struct policy_identity id;
	struct policy_target t;
	struct policy_verdict v;
	struct geoip_result r;
	struct netaddr src;
	const char *errstr = NULL;
	struct policy *p;
	struct geoip *g;
	struct diag d;
	char path[1200];
	char *paths[1];
	size_t i;

	snprintf(path, sizeof(path), "%s/geo_policy.yaml", data_dir);
	paths[0] = path;
	diag_init(&d);
	p = policy_load_paths(paths, 1, &d);
	if (p == NULL)
		diag_print(&d, stderr);
	CHECK_MSG(p != NULL, "geo_policy.yaml does not load");
	g = geoip_open(tmp_path("country.mmdb"), tmp_path("asn.mmdb"), &errstr);
	CHECK(g != NULL);
	if (p == NULL || g == NULL)
		goto out;

	for (i = 0; i < NELEM(geo_cases); i++) {
		c = &geo_cases[i];
		netaddr_parse(c->source, strlen(c->source), &src);
		CHECK_INT(policy_identify_source(p, &src, &id), 0);
		CHECK_INT(policy_target_init(&t, c->dest, strlen(c->dest), 443),
		    0);
		CHECK_MSG(policy_decide(p, &id, &t, NULL, NULL, &v) == 1,
		    "case %zu: step 3 denied (%s)", i, v.rule);
		CHECK_MSG(policy_check_addrs(p, &id, &t, &t.ip, 1, &v) == 1,
		    "case %zu: step 4 denied (%s)", i,
		    v.reason ? reason_word(v.reason) : "");
		CHECK_INT(geoip_lookup(g, &t.ip, &r), 0);
		CHECK_MSG(policy_check_geo(p, &id, r.country, r.asn, &v) ==
		    c->allow, "case %zu: %s (%s AS%u)", i, c->dest, r.country,
		    r.asn);
		CHECK_INT(v.allow, c->allow);
		CHECK_STR(v.rule, c->rule);
		CHECK_INT(v.reason, c->reason);
	}

	/* Direct calls: either rule alone, case of the code, unknown values. */
	policy_identity_by_id(p, "geo-agent", &id);
	memset(&v, 0, sizeof(v));
	v.allow = 1;
	CHECK_INT(policy_check_geo(p, &id, "kp", 0, &v), 0);
	CHECK_INT(v.reason, REASON_COUNTRY_DENY);
	v.allow = 1;
	v.reason = REASON_NONE;
	CHECK_INT(policy_check_geo(p, &id, NULL, 64511, &v), 0);
	CHECK_INT(v.reason, REASON_ASN_DENY);
	v.allow = 1;
	v.reason = REASON_NONE;
	CHECK_INT(policy_check_geo(p, &id, "KP", 64511, &v), 0);
	CHECK_INT(v.reason, REASON_COUNTRY_DENY);	/* countries first */
	v.allow = 1;
	v.reason = REASON_NONE;
	CHECK_INT(policy_check_geo(p, &id, "", 0, &v), 1);
	CHECK_INT(policy_check_geo(p, &id, "K", 64496, &v), 1);
	CHECK_INT(policy_check_geo(p, &id, "KPX", 64510, &v), 1);
	CHECK(v.reason == REASON_NONE);
	/* An already denied verdict stays as it is. */
	v.allow = 0;
	v.reason = REASON_POLICY_DENY;
	CHECK_INT(policy_check_geo(p, &id, "US", 0, &v), 0);
	CHECK_INT(v.reason, REASON_POLICY_DENY);
	/* No identity, or a policy name that does not exist. */
	v.allow = 1;
	v.reason = REASON_NONE;
	CHECK_INT(policy_check_geo(p, NULL, "US", 0, &v), 0);
	CHECK_INT(v.reason, REASON_NO_IDENTITY);
	snprintf(id.policy, sizeof(id.policy), "nonexistent");
	v.allow = 1;
	v.reason = REASON_NONE;
	CHECK_INT(policy_check_geo(p, &id, "US", 0, &v), 0);
	CHECK_INT(v.reason, REASON_UNKNOWN_POLICY);
out:
	geoip_close(g);
	if (p != NULL)
		policy_unref(p);
	diag_free(&d);
}

int
main(void)
{
	int rc;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	if ((rc = make_databases()) != 0 || make_bad_files() != 0)
		return rc == 77 ? 77 : 1;
	test_lookups();
	test_open_errors();
	test_corrupt_tree();
	test_threads();
	test_policy_geo();
	return check_summary();
}
