/*
 * A DNS name that carries an encoded payload (docs/dlp.md, "DNS"): a long
 * high-entropy label (base32, base64, hex), labels that together are one,
 * or many distinct such names under one parent within a window. The last
 * two labels (the parent the policy allows) are not judged.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlp/dlp.h"

#define LABEL_MIN	40	/* one label this long (a UUID, a 32-digit hash: not) ... */
#define LABEL_BITS	3.5	/* ... with this entropy */
#define NAME_MIN	48	/* the labels together, this long ... */
#define NAME_BITS	4.0	/* ... with this entropy */

int
dlp_dns_name(const char *name, size_t len, struct dlp_finding *f)
{
	unsigned char all[256];
	size_t start[128], end[128], nl = 0, i, n = 0, k, s0;
	const unsigned char *l;

	if (len > 253)
		len = 253;
	for (i = 0, s0 = 0; i <= len; i++) {
		if (i < len && name[i] != '.')
			continue;
		if (i > s0 && nl < 128) {
			start[nl] = s0;
			end[nl] = i;
			nl++;
		}
		s0 = i + 1;
	}
	if (nl <= 2)
		return 0;
	for (k = 0; k + 2 < nl; k++) {
		l = (const unsigned char *)name + start[k];
		i = end[k] - start[k];
		if (i >= LABEL_MIN && dlp_entropy(l, i) >= LABEL_BITS) {
			memset(f, 0, sizeof(*f));
			snprintf(f->rule, sizeof(f->rule), "dns-encoded-label");
			f->severity = DLP_SEV_HIGH;
			dlp_redact(l, i, f->excerpt, sizeof(f->excerpt));
			return 1;
		}
		if (n + i <= sizeof(all)) {
			memcpy(all + n, l, i);
			n += i;
		}
	}
	for (i = 0; i < n; i++)
		all[i] = (unsigned char)tolower(all[i]);
	if (n >= NAME_MIN && dlp_entropy(all, n) >= NAME_BITS) {
		memset(f, 0, sizeof(*f));
		snprintf(f->rule, sizeof(f->rule), "dns-encoded-name");
		f->severity = DLP_SEV_HIGH;
		dlp_redact(all, n, f->excerpt, sizeof(f->excerpt));
		return 1;
	}
	return 0;
}

/*
 * Many distinct names under one parent: a trickle of short encoded labels
 * stays under the per-name limits, so each (sandbox, parent) pair counts
 * the distinct names with a label of BURST_LABEL characters or more and
 * BURST_BITS of entropy within a window. A fixed table: a pair that loses
 * its slot starts over, which only delays a finding.
 */
#define BURST_SLOTS	512
#define BURST_SEEN	64	/* distinct name hashes kept per slot */
#define BURST_LABEL	12
#define BURST_BITS	3.0

struct burst_slot {
	uint64_t	key;
	int64_t		start_ms;
	uint32_t	count;
	uint64_t	seen[BURST_SEEN];
};

struct dlp_burst {
	pthread_mutex_t		mtx;
	unsigned		limit;
	int64_t			window_ms;
	struct burst_slot	slot[BURST_SLOTS];
};

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (uint64_t)tolower(c[i]);
		h *= 0x100000001b3ULL;
	}
	return h;
}

struct dlp_burst *
dlp_burst_new(unsigned limit, int64_t window_ms)
{
	struct dlp_burst *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	pthread_mutex_init(&b->mtx, NULL);
	b->limit = limit;
	b->window_ms = window_ms;
	return b;
}

void
dlp_burst_free(struct dlp_burst *b)
{
	if (b == NULL)
		return;
	pthread_mutex_destroy(&b->mtx);
	free(b);
}

int
dlp_burst_add(struct dlp_burst *b, const char *who, const char *name,
    size_t len, int64_t now_ms, struct dlp_finding *f)
{
	const unsigned char *l;
	size_t i, s0, nl = 0, start[128], end[128], k, parent;
	uint64_t key, h;
	struct burst_slot *sl;
	int encoded = 0, hit = 0;

	for (i = 0, s0 = 0; i <= len; i++) {
		if (i < len && name[i] != '.')
			continue;
		if (i > s0 && nl < 128) {
			start[nl] = s0;
			end[nl] = i;
			nl++;
		}
		s0 = i + 1;
	}
	if (nl <= 2)
		return 0;
	for (k = 0; k + 2 < nl && !encoded; k++) {
		l = (const unsigned char *)name + start[k];
		i = end[k] - start[k];
		encoded = i >= BURST_LABEL && dlp_entropy(l, i) >= BURST_BITS;
	}
	if (!encoded)
		return 0;
	parent = start[nl - 2];
	key = fnv(fnv(0xcbf29ce484222325ULL, who, strlen(who)), name + parent,
	    len - parent);
	h = fnv(0xcbf29ce484222325ULL, name, parent);
	pthread_mutex_lock(&b->mtx);
	sl = &b->slot[key % BURST_SLOTS];
	if (sl->key != key || now_ms - sl->start_ms > b->window_ms) {
		memset(sl, 0, sizeof(*sl));
		sl->key = key;
		sl->start_ms = now_ms;
	}
	for (i = 0; i < BURST_SEEN && i < sl->count; i++)
		if (sl->seen[i] == h)
			break;
	if (i == BURST_SEEN || i == sl->count) {
		sl->seen[sl->count % BURST_SEEN] = h;
		sl->count++;
		hit = sl->count >= b->limit;
	}
	pthread_mutex_unlock(&b->mtx);
	if (!hit)
		return 0;
	memset(f, 0, sizeof(*f));
	snprintf(f->rule, sizeof(f->rule), "dns-encoded-burst");
	f->severity = DLP_SEV_HIGH;
	dlp_redact((const unsigned char *)name, parent, f->excerpt,
	    sizeof(f->excerpt));
	return 1;
}
