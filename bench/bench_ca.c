/*
 * Benchmark of the interception CA: the cost of minting a leaf (uncached)
 * against its two main parts measured alone in the same run (one ECDSA P-256
 * signature, one X509_set_pubkey), and the cost of a cache hit, on one
 * thread and on four. Prints numbers only.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "vault/ca.h"

#define MINTS		2000		/* distinct names, each minted once */
#define SIGNS		2000
#define HITS		2000000
#define THREADS		4

static struct ca *the_ca;

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void
bench_name(char *buf, size_t len, int i)
{
	snprintf(buf, len, "api%d.svc%d.bench.example", i, i % 97);
}

/* The baseline: what one leaf signature costs on its own. */
static double
sign_ns(void)
{
	unsigned char msg[400], sig[128];
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	EVP_MD_CTX *md;
	size_t siglen;
	double t0, t;
	int i;

	memset(msg, 0x5a, sizeof(msg));
	t0 = now_ns();
	for (i = 0; i < SIGNS; i++) {
		md = EVP_MD_CTX_new();
		siglen = sizeof(sig);
		if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k) != 1 ||
		    EVP_DigestSign(md, sig, &siglen, msg, sizeof(msg)) != 1)
			fprintf(stderr, "sign failed\n");
		EVP_MD_CTX_free(md);
	}
	t = (now_ns() - t0) / SIGNS;
	EVP_PKEY_free(k);
	return t;
}

/*
 * The other baseline: putting the shared leaf key into a certificate, which
 * OpenSSL 3.0 does through its encoder framework on every call.
 */
static double
set_pubkey_ns(void)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	double t0, t;
	X509 *x;
	int i;

	t0 = now_ns();
	for (i = 0; i < SIGNS; i++) {
		x = X509_new();
		if (x == NULL || !X509_set_pubkey(x, k))
			fprintf(stderr, "X509_set_pubkey failed\n");
		X509_free(x);
	}
	t = (now_ns() - t0) / SIGNS;
	EVP_PKEY_free(k);
	return t;
}

static int
leaf(const char *name)
{
	X509 *x;
	EVP_PKEY *k;

	if (ca_leaf(the_ca, name, 0, &x, &k) != 0)
		return -1;
	X509_free(x);
	EVP_PKEY_free(k);
	return 0;
}

static void *
hit_worker(void *arg)
{
	char name[96];
	long i, n = (long)(intptr_t)arg, fails = 0;

	for (i = 0; i < HITS / THREADS; i++) {
		bench_name(name, sizeof(name), (int)((i * 7 + n) % MINTS));
		if (leaf(name) != 0)
			fails++;
	}
	return (void *)(intptr_t)fails;
}

int
main(void)
{
	char dir[] = "/tmp/sgbench-ca-XXXXXX", cert[128], key[128], name[96];
	struct ca_stats st;
	pthread_t th[THREADS];
	const char *err;
	double t0, load_ms, mint_ns, hit_ns, mt_ns, base_ns, pub_ns;
	void *ret;
	long fails = 0;
	int i;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(cert, sizeof(cert), "%s/ca.crt", dir);
	snprintf(key, sizeof(key), "%s/ca.key", dir);
	if (ca_init(cert, key, 0, &err) == -1) {
		fprintf(stderr, "ca_init: %s\n", err);
		return 1;
	}
	t0 = now_ns();
	if ((the_ca = ca_load(cert, key, &err)) == NULL) {
		fprintf(stderr, "ca_load: %s\n", err);
		return 1;
	}
	load_ms = (now_ns() - t0) / 1e6;

	base_ns = sign_ns();
	pub_ns = set_pubkey_ns();

	t0 = now_ns();
	for (i = 0; i < MINTS; i++) {
		bench_name(name, sizeof(name), i);
		if (leaf(name) != 0)
			fails++;
	}
	mint_ns = (now_ns() - t0) / MINTS;

	t0 = now_ns();
	for (i = 0; i < HITS; i++) {
		bench_name(name, sizeof(name), (i * 7) % MINTS);
		if (leaf(name) != 0)
			fails++;
	}
	hit_ns = (now_ns() - t0) / HITS;

	t0 = now_ns();
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, hit_worker, (void *)(intptr_t)i);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], &ret);
		fails += (long)(intptr_t)ret;
	}
	mt_ns = (now_ns() - t0) / HITS;

	ca_get_stats(the_ca, &st);
	printf("ca load (incl. leaf key generation): %.3f ms\n", load_ms);
	printf("leaf mint, uncached:   %.3f ms per leaf, %.0f leaves/s "
	    "(%d names)\n", mint_ns / 1e6, 1e9 / mint_ns, MINTS);
	printf("baseline ECDSA P-256 sign: %.3f ms; mint / sign = %.2fx\n",
	    base_ns / 1e6, mint_ns / base_ns);
	printf("baseline X509_set_pubkey:  %.3f ms (the rest of a mint)\n",
	    pub_ns / 1e6);
	printf("cache hit, 1 thread:   %.0f ns per lookup, %.2f M lookups/s\n",
	    hit_ns, 1e3 / hit_ns);
	printf("cache hit, %d threads: %.0f ns per lookup (wall), %.2f M "
	    "lookups/s\n", THREADS, mt_ns, 1e3 / mt_ns);
	printf("mint / hit = %.0fx\n", mint_ns / hit_ns);
	printf("stats: minted %lu, hits %lu, entries %lu, failures %ld\n",
	    st.minted, st.hits, st.entries, fails);
	ca_free(the_ca);
	nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	return fails == 0 ? 0 : 1;
}
