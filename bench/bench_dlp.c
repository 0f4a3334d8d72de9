/*
 * The secret scanner alone (src/dlp, docs/dlp.md): MB/s over request
 * bodies of typical shapes (JSON, form data, base64, random bytes) fed in
 * 16 KiB pieces as the gateway feeds them, and the time to scan one
 * request head (target and ten headers). Prints numbers, asserts nothing.
 *
 *   build/bench/bench_dlp [MiB per body kind, default 64]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlp/dlp.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
fill(char *b, size_t n, int kind)
{
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char *json = "{\"id\": 12345, \"name\": \"a widget\", "
	    "\"tags\": [\"blue\", \"large\"], \"url\": \"https://cdn.example.com"
	    "/img/3f2b8c1e-9a4d-4e7b.png\", \"ok\": true}\n";
	static const char *form = "q=search+terms&page=2&sort=date%20desc&"
	    "filter=%7B%22a%22%3A1%7D&lang=en&";
	size_t i, l;
	unsigned int r = 12345;

	for (i = 0; i < n; i++) {
		r = r * 1103515245u + 12345u;
		switch (kind) {
		case 0:
			l = strlen(json);
			b[i] = json[i % l];
			break;
		case 1:
			l = strlen(form);
			b[i] = form[i % l];
			break;
		case 2:
			b[i] = (i % 77 == 76) ? '\n' : b64[(r >> 16) & 63];
			break;
		default:
			b[i] = (char)(r >> 16);
		}
	}
}

/* buf[0..n) fed in pieces: MB/s; *found: how many findings (each resets). */
static double
scan_all(struct dlp_scan *sc, const char *buf, size_t n, int *found)
{
	const size_t piece = 16384;
	struct dlp_finding f;
	size_t off;
	double t0;

	dlp_scan_reset(sc);
	*found = 0;
	t0 = now();
	for (off = 0; off < n; off += piece)
		if (dlp_scan_feed(sc, buf + off, n - off < piece ? n - off :
		    piece, &f) != 0) {
			(*found)++;
			dlp_scan_reset(sc);
		}
	(void)dlp_scan_end(sc, &f);
	return (double)n / 1e6 / (now() - t0);
}

int
main(int argc, char *argv[])
{
	static const char *kinds[] = { "json", "form", "base64", "random" };
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64, n, i;
	struct dlp_set *set;
	struct dlp_scan *sc;
	struct dlp_finding f;
	const char *why;
	char err[256], *buf;
	double t0, t;
	int k, bad, found;

	if (!dlp_available(&why)) {
		printf("dlp unavailable: %s\n", why);
		return 0;
	}
	if ((set = dlp_set_new(NULL, 0, 1, err, sizeof(err), &bad)) == NULL ||
	    (sc = dlp_scan_new(set, NULL, NULL)) == NULL) {
		fprintf(stderr, "bench_dlp: %s\n", err);
		return 1;
	}
	/* bench_dlp -f FILE: that file's bytes, scanned as one body. */
	if (argc > 2 && strcmp(argv[1], "-f") == 0) {
		FILE *fp = fopen(argv[2], "rb");
		long len;

		if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 ||
		    (len = ftell(fp)) <= 0 || fseek(fp, 0, SEEK_SET) != 0 ||
		    (buf = malloc((size_t)len)) == NULL ||
		    fread(buf, 1, (size_t)len, fp) != (size_t)len) {
			fprintf(stderr, "bench_dlp: %s: cannot read it\n", argv[2]);
			return 1;
		}
		fclose(fp);
		n = (size_t)len;
		t = scan_all(sc, buf, n, &found);
		printf("| %s | %.0f | %d |\n", argv[2], t, found);
		return 0;
	}
	n = mib << 20;
	if ((buf = malloc(n)) == NULL)
		return 1;
	printf("| body | MB/s | findings |\n| --- | --- | --- |\n");
	for (k = 0; k < 4; k++) {
		fill(buf, n, k);
		t = scan_all(sc, buf, n, &found);
		printf("| %s | %.0f | %d |\n", kinds[k], t, found);
	}
	{
		static const char *parts[] = {
		    "/v1/items/3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c",
		    "page=2&sort=date", "Host: api.example.com",
		    "User-Agent: python-requests/2.31.0", "Accept: */*",
		    "Accept-Encoding: gzip, deflate", "Connection: keep-alive",
		    "Content-Type: application/json", "X-Request-Id: 7c9e6679-"
		    "7425-40de-944b-e07fc1f90ae7", "Authorization: Bearer "
		    "sgph_0123456789abcdefghij", "Cookie: session_lang=en-US",
		    "Accept-Language: en-US,en;q=0.9" };
		const int rounds = 100000;

		t0 = now();
		for (i = 0; i < (size_t)rounds; i++)
			for (k = 0; k < 12; k++)
				(void)dlp_scan_buf(sc, parts[k], strlen(parts[k]), &f);
		t = now() - t0;
		printf("\nrequest head (target, query, 10 headers): %.2f us\n",
		    t / rounds * 1e6);
	}
	free(buf);
	dlp_scan_free(sc);
	dlp_set_free(set);
	return 0;
}
