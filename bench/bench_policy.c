/*
 * Benchmark of the policy engine: load time of a 100,000-rule policy and
 * the cost of one decision on it against the same decisions on a 10-rule
 * policy, to show decisions cost O(labels), not O(rules). Prints numbers only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/policy.h"

#define BIG_RULES	100000
#define SMALL_RULES	10
#define DECISIONS	1000000
#define QUERIES		4096	/* distinct targets, cycled */

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Rule i: every third one a wildcard, the others exact names. */
static void
rule_name(char *buf, size_t len, int i)
{
	if (i % 3 == 0)
		snprintf(buf, len, "*.zone%d.corp%d.example", i, i % 97);
	else
		snprintf(buf, len, "host%d.svc%d.example", i, i % 89);
}

static int
write_policy(const char *path, int nrules)
{
	char name[96];
	FILE *f;
	int i;

	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fprintf(f, "policies:\n  - name: bench\n    allow:\n");
	for (i = 0; i < nrules; i++) {
		rule_name(name, sizeof(name), i);
		fprintf(f, "      - host: \"%s\"\n", name);
		if (i % 7 == 0)
			fprintf(f, "        ports: [443]\n");
	}
	fprintf(f, "    deny:\n      - host: \"*.blocked.example\"\n");
	return fclose(f);
}

static struct policy *
load(const char *path, double *ms)
{
	struct diag d;
	struct policy *p;
	char *paths[1];
	double t0;

	paths[0] = (char *)path;
	diag_init(&d);
	t0 = now_ns();
	p = policy_load_paths(paths, 1, &d);
	*ms = (now_ns() - t0) / 1e6;
	if (p == NULL)
		diag_print(&d, stderr);
	diag_free(&d);
	return p;
}

/* Hits (exact names, names below wildcards) and misses, about half each. */
static void
make_queries(struct policy_target *t, int n, int nrules)
{
	char name[128];
	int i, r;

	srandom(42);
	for (i = 0; i < n; i++) {
		r = (int)(random() % nrules);
		switch (i % 4) {
		case 0:		/* exact or wildcard hit */
			if (r % 3 == 0)
				snprintf(name, sizeof(name),
				    "api.v%d.zone%d.corp%d.example", i, r,
				    r % 97);
			else
				rule_name(name, sizeof(name), r);
			break;
		case 1:		/* the apex of a wildcard: a miss */
			r -= r % 3;
			snprintf(name, sizeof(name), "zone%d.corp%d.example", r,
			    r % 97);
			break;
		case 2:		/* unknown deep name: a miss */
			snprintf(name, sizeof(name),
			    "a%d.b%d.c.d.e.unknown%d.example", i, r, r % 13);
			break;
		default:	/* denied */
			snprintf(name, sizeof(name), "x%d.blocked.example", r);
			break;
		}
		policy_target_init(&t[i], name, strlen(name),
		    i % 2 ? 443 : 80);
	}
}

static double
run(const struct policy *p, const struct policy_target *t, int n,
    long *allowed)
{
	struct policy_identity id = { "bench", "bench", 0 };
	struct policy_verdict v;
	double t0;
	long i;

	*allowed = 0;
	t0 = now_ns();
	for (i = 0; i < DECISIONS; i++)
		*allowed += policy_decide(p, &id, &t[i % n], NULL, NULL, &v);
	return (now_ns() - t0) / DECISIONS;
}

int
main(void)
{
	char dir[] = "/tmp/sg-bench-XXXXXX", big[256], small[256];
	struct policy_target *q;
	struct policy *pb = NULL, *ps = NULL;
	double load_big, load_small, ns_big, ns_small;
	long allow_big, allow_small;
	int rc = 1;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(big, sizeof(big), "%s/big.yaml", dir);
	snprintf(small, sizeof(small), "%s/small.yaml", dir);
	if ((q = calloc(QUERIES, sizeof(*q))) == NULL ||
	    write_policy(big, BIG_RULES) == -1 ||
	    write_policy(small, SMALL_RULES) == -1) {
		perror("setup");
		goto out;
	}
	if ((pb = load(big, &load_big)) == NULL ||
	    (ps = load(small, &load_small)) == NULL)
		goto out;
	make_queries(q, QUERIES, BIG_RULES);
	/* Warm up the caches once, then measure. */
	run(pb, q, QUERIES, &allow_big);
	ns_big = run(pb, q, QUERIES, &allow_big);
	ns_small = run(ps, q, QUERIES, &allow_small);

	printf("load_%d_rules_ms %.1f\n", BIG_RULES + 1, load_big);
	printf("load_%d_rules_ms %.3f\n", SMALL_RULES + 1, load_small);
	printf("decide_%d_rules_ns %.1f (allowed %ld of %d)\n", BIG_RULES + 1,
	    ns_big, allow_big, DECISIONS);
	printf("decide_%d_rules_ns %.1f (allowed %ld of %d)\n", SMALL_RULES + 1,
	    ns_small, allow_small, DECISIONS);
	printf("ratio_big_over_small %.2f\n", ns_small > 0 ? ns_big / ns_small : 0);
	rc = 0;
out:
	policy_unref(pb);
	policy_unref(ps);
	free(q);
	unlink(big);
	unlink(small);
	rmdir(dir);
	return rc;
}
