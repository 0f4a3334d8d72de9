/*
 * Tests of the address memory: per-sandbox lookups, names compared
 * case-insensitively, TTL expiry, bounds and fair eviction, the cap on
 * names per address, hostile input, and several threads at once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dns/dns.h"
#include "helper_dns.h"

/* Table: after the adds of test_basic, what each question answers. */
struct ask {
	const char	*sandbox;
	const char	*name;		/* NULL: addrmem_lookup */
	const char	*addr;
	int		 want;		/* has: 0/1; lookup: 0 found, -1 not */
	const char	*want_name;	/* lookup */
};

static void
test_basic(void)
{
	static const struct ask asks[] = {
		{ "sb1", "api.example.com", "198.51.100.1", 1, NULL },
		{ "sb1", "API.Example.COM.", "198.51.100.1", 1, NULL },
		{ "sb1", "api.example.com", "2001:db8::1", 1, NULL },
		{ "sb1", "api.example.com", "198.51.100.9", 0, NULL },
		{ "sb1", "other.example.com", "198.51.100.1", 0, NULL },
		{ "sb2", "api.example.com", "198.51.100.1", 0, NULL },
		{ "sb1", "api.example.com.x", "198.51.100.1", 0, NULL },
		{ "sb1", "", "198.51.100.1", 0, NULL },
		{ "", "api.example.com", "198.51.100.1", 0, NULL },
		/* 198.51.100.2 was handed out for two names: the later wins */
		{ "sb1", NULL, "198.51.100.2", 0, "cdn-b.example.com" },
		{ "sb1", "cdn-a.example.com", "198.51.100.2", 1, NULL },
		{ "sb1", NULL, "198.51.100.1", 0, "api.example.com" },
		{ "sb1", NULL, "2001:db8::1", 0, "api.example.com" },
		{ "sb2", NULL, "198.51.100.2", 0, "other.example.org" },
		{ "sb2", NULL, "198.51.100.1", -1, NULL },
		{ "sb3", NULL, "198.51.100.1", -1, NULL },
	};
	struct addrmem *m = addrmem_new(100);
	struct netaddr v[3], a;
	char name[300];
	size_t i;
	int rc;

	CHECK(m != NULL);
	if (m == NULL)
		return;
	v[0] = dnstest_addr("198.51.100.1");
	v[1] = dnstest_addr("2001:db8::1");
	addrmem_add(m, "sb1", "Api.Example.com.", v, 2, 60);
	v[0] = dnstest_addr("198.51.100.2");
	addrmem_add(m, "sb1", "cdn-a.example.com", v, 1, 60);
	addrmem_add(m, "sb1", "cdn-b.example.com", v, 1, 60);
	addrmem_add(m, "sb2", "other.example.org", v, 1, 60);
	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		a = dnstest_addr(asks[i].addr);
		if (asks[i].name != NULL) {
			rc = addrmem_has(m, asks[i].sandbox, asks[i].name, &a);
			CHECK_MSG(rc == asks[i].want, "ask %zu: has %d", i, rc);
			continue;
		}
		memset(name, 0, sizeof(name));
		rc = addrmem_lookup(m, asks[i].sandbox, &a, name,
		    sizeof(name));
		CHECK_MSG(rc == asks[i].want && (rc != 0 ||
		    strcmp(name, asks[i].want_name) == 0),
		    "ask %zu: lookup %d \"%s\"", i, rc, name);
	}
	/* Re-adding the older name makes it the most recent. */
	addrmem_add(m, "sb1", "cdn-a.example.com", v, 1, 60);
	CHECK_INT(addrmem_lookup(m, "sb1", &v[0], name, sizeof(name)), 0);
	CHECK_STR(name, "cdn-a.example.com");
	/* A buffer too small for the name. */
	CHECK_INT(addrmem_lookup(m, "sb1", &v[0], name, 5), -1);
	addrmem_free(m);
}

/* Input that must be ignored, not crash or store anything. */
static void
test_hostile(void)
{
	struct addrmem *m = addrmem_new(10);
	struct netaddr v = dnstest_addr("198.51.100.7"), bad;
	char name[300], longid[64], longname[300];
	size_t i;

	memset(&bad, 0, sizeof(bad));
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	/* labels of 62 bytes and dots, 254 bytes in all: one byte too long */
	memset(longname, 'b', 254);
	for (i = 62; i < 254; i += 63)
		longname[i] = '.';
	longname[254] = '\0';
	CHECK(addrmem_new(0) == NULL);
	addrmem_add(m, NULL, "x.test", &v, 1, 60);
	addrmem_add(m, "sb", NULL, &v, 1, 60);
	addrmem_add(m, "sb", "x.test", NULL, 1, 60);
	addrmem_add(m, "sb", "x.test", &v, 0, 60);
	addrmem_add(m, "sb", "x.test", &bad, 1, 60);
	addrmem_add(m, longid, "x.test", &v, 1, 60);
	addrmem_add(m, "sb", longname, &v, 1, 60);
	addrmem_add(m, "sb", ".", &v, 1, 60);
	addrmem_add(NULL, "sb", "x.test", &v, 1, 60);
	CHECK_INT(addrmem_lookup(m, "sb", &v, name, sizeof(name)), -1);
	CHECK_INT(addrmem_lookup(m, longid, &v, name, sizeof(name)), -1);
	CHECK_INT(addrmem_has(m, "sb", "x.test", &v), 0);
	CHECK_INT(addrmem_has(m, "sb", "x.test", &bad), 0);
	CHECK_INT(addrmem_has(m, NULL, "x.test", &v), 0);
	CHECK_INT(addrmem_has(NULL, "sb", "x.test", &v), 0);
	CHECK_INT(addrmem_lookup(NULL, "sb", &v, name, sizeof(name)), -1);
	/* 253 bytes is still a name. */
	longname[253] = '\0';
	addrmem_add(m, "sb", longname, &v, 1, 60);
	CHECK_INT(addrmem_has(m, "sb", longname, &v), 1);
	CHECK_INT(addrmem_lookup(m, "sb", &v, name, sizeof(name)), 0);
	CHECK_INT(strlen(name), 253);
	addrmem_free(m);
	addrmem_free(NULL);
}

static void
test_expiry(void)
{
	struct addrmem *m = addrmem_new(10);
	struct netaddr s1 = dnstest_addr("198.51.100.1");
	struct netaddr s2 = dnstest_addr("198.51.100.2");
	struct netaddr s3 = dnstest_addr("198.51.100.3");
	char name[300];

	addrmem_add(m, "sb", "short.test", &s1, 1, 1);
	addrmem_add(m, "sb", "zero.test", &s3, 1, 0);
	addrmem_add(m, "sb", "long.test", &s2, 1, 60);
	/* A shorter TTL later does not cut what was handed out before. */
	addrmem_add(m, "sb", "long.test", &s2, 1, 1);
	CHECK_INT(addrmem_has(m, "sb", "short.test", &s1), 1);
	CHECK_INT(addrmem_has(m, "sb", "zero.test", &s3), 1);
	usleep(1200 * 1000);
	CHECK_INT(addrmem_has(m, "sb", "short.test", &s1), 0);
	CHECK_INT(addrmem_lookup(m, "sb", &s1, name, sizeof(name)), -1);
	CHECK_INT(addrmem_has(m, "sb", "zero.test", &s3), 0);
	CHECK_INT(addrmem_has(m, "sb", "long.test", &s2), 1);
	/* Refreshed: alive again. */
	addrmem_add(m, "sb", "short.test", &s1, 1, 60);
	CHECK_INT(addrmem_has(m, "sb", "short.test", &s1), 1);
	addrmem_free(m);
}

static int
count_present(struct addrmem *m, const char *sb, const char *name, int from,
    int to)
{
	struct netaddr a;
	char s[64];
	int i, n = 0;

	for (i = from; i < to; i++) {
		snprintf(s, sizeof(s), "198.51.%d.%d", i / 256, i % 256);
		a = dnstest_addr(s);
		n += addrmem_has(m, sb, name, &a);
	}
	return n;
}

static void
add_range(struct addrmem *m, const char *sb, const char *name, int from,
    int to)
{
	struct netaddr a;
	char s[64];
	int i;

	for (i = from; i < to; i++) {
		snprintf(s, sizeof(s), "198.51.%d.%d", i / 256, i % 256);
		a = dnstest_addr(s);
		addrmem_add(m, sb, name, &a, 1, 60);
	}
}

/* Bounded: the oldest go first, and from the sandbox holding the most. */
static void
test_bounds(void)
{
	struct addrmem *m = addrmem_new(8);
	struct netaddr a = dnstest_addr("203.0.113.5"), many[40];
	char name[64];
	int i;

	add_range(m, "sb", "n.test", 0, 20);
	CHECK_INT(count_present(m, "sb", "n.test", 0, 12), 0);
	CHECK_INT(count_present(m, "sb", "n.test", 12, 20), 8);
	addrmem_free(m);

	/* A flood from one sandbox does not push out another's entries. */
	m = addrmem_new(10);
	add_range(m, "quiet", "q.test", 0, 2);
	add_range(m, "loud", "l.test", 100, 1100);
	CHECK_INT(count_present(m, "quiet", "q.test", 0, 2), 2);
	CHECK_INT(count_present(m, "loud", "l.test", 1092, 1100), 8);
	CHECK_INT(count_present(m, "loud", "l.test", 100, 1092), 0);
	addrmem_free(m);

	/* One answer of 40 addresses into 8 slots keeps the last 8. */
	m = addrmem_new(8);
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "198.51.0.%d", i);
		many[i] = dnstest_addr(name);
	}
	addrmem_add(m, "sb", "big.test", many, 40, 60);
	CHECK_INT(count_present(m, "sb", "big.test", 0, 32), 0);
	CHECK_INT(count_present(m, "sb", "big.test", 32, 40), 8);
	addrmem_free(m);

	/* At most 16 names per (sandbox, address): the oldest go. */
	m = addrmem_new(1000);
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%d.wild.test", i);
		addrmem_add(m, "sb", name, &a, 1, 60);
	}
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%d.wild.test", i);
		CHECK_MSG(addrmem_has(m, "sb", name, &a) == (i >= 4),
		    "name %d", i);
	}
	addrmem_add(m, "other", "n0.wild.test", &a, 1, 60);
	CHECK_INT(addrmem_has(m, "other", "n0.wild.test", &a), 1);
	CHECK_INT(addrmem_has(m, "sb", "n19.wild.test", &a), 1);
	addrmem_free(m);
}

struct worker {
	struct addrmem	*m;
	int		 id;
	int		 found;
};

static void *
worker_run(void *arg)
{
	struct worker *w = arg;
	struct netaddr a;
	char sb[16], s[64], name[300];
	int i;

	snprintf(sb, sizeof(sb), "sb%d", w->id);
	for (i = 0; i < 20000; i++) {
		snprintf(s, sizeof(s), "198.51.%d.%d", (i / 256) % 256,
		    i % 256);
		a = dnstest_addr(s);
		addrmem_add(w->m, sb, "t.test", &a, 1, 60);
		if (addrmem_lookup(w->m, sb, &a, name, sizeof(name)) == 0 &&
		    strcmp(name, "t.test") == 0)
			w->found++;
	}
	return NULL;
}

/* Four threads adding and reading at once, the table full throughout. */
static void
test_threads(void)
{
	struct addrmem *m = addrmem_new(1000);
	struct worker w[4];
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++) {
		w[i].m = m;
		w[i].id = i;
		w[i].found = 0;
		CHECK(pthread_create(&t[i], NULL, worker_run, &w[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		/* Its own add is at most evicted by a fair share. */
		CHECK_MSG(w[i].found > 15000, "thread %d found %d", i,
		    w[i].found);
	}
	addrmem_free(m);
}

int
main(void)
{
	test_basic();
	test_hostile();
	test_bounds();
	test_threads();
	test_expiry();
	return check_summary();
}
