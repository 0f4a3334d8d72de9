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
#define NAME_HEX_BITS	3.0	/* ... (hex digits alone: 4 bits is their most) */

/* 1 when s[0..n) is hex digits, but for a tenth at most (lower-case). */
static int
mostly_hex(const unsigned char *s, size_t n)
{
	size_t i, other = 0;

	for (i = 0; i < n; i++)
		if (!isdigit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			other++;
	return other * 10 <= n;
}

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
	if (n >= NAME_MIN && dlp_entropy(all, n) >= (mostly_hex(all, n) ?
	    NAME_HEX_BITS : NAME_BITS)) {
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
 * BURST_BITS of entropy -- or labels that together are BURST_NAME long
 * with BURST_NAME_BITS (short labels, many of them) -- within a sliding
 * window: each name is kept with its time, and one older than the window
 * leaves the count. A fixed table: a pair that loses its slot starts over,
 * which only delays a finding.
 */
#define BURST_SLOTS	512
#define BURST_SEEN	64	/* distinct names kept per slot (>= the limit) */
#define BURST_LABEL	12
#define BURST_BITS	3.0
#define BURST_NAME	40	/* shorter, random and hostname-like text look alike */
#define BURST_NAME_BITS	4.0

struct burst_slot {
	uint64_t	key;
	uint32_t	count;			/* entries in seen[] and at[] */
	uint64_t	seen[BURST_SEEN];	/* name hashes, oldest first */
	int64_t		at[BURST_SEEN];		/* when each came */
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
	b->limit = limit < BURST_SEEN ? limit : BURST_SEEN;
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
	unsigned char all[256];
	size_t i, s0, nl = 0, start[128], end[128], k, parent, n = 0, keep;
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
		for (; i > 0 && n < sizeof(all); i--)
			all[n++] = (unsigned char)tolower(*l++);
	}
	if (!encoded)
		encoded = n >= BURST_NAME && dlp_entropy(all, n) >= BURST_NAME_BITS;
	if (!encoded)
		return 0;
	parent = start[nl - 2];
	key = fnv(fnv(0xcbf29ce484222325ULL, who, strlen(who)), name + parent,
	    len - parent);
	h = fnv(0xcbf29ce484222325ULL, name, parent);
	pthread_mutex_lock(&b->mtx);
	sl = &b->slot[key % BURST_SLOTS];
	if (sl->key != key) {
		memset(sl, 0, sizeof(*sl));
		sl->key = key;
	}
	/* The window slides: names older than it leave, oldest first. */
	for (k = 0; k < sl->count && now_ms - sl->at[k] > b->window_ms; k++)
		;
	if (k > 0) {
		keep = sl->count - k;
		memmove(sl->seen, sl->seen + k, keep * sizeof(sl->seen[0]));
		memmove(sl->at, sl->at + k, keep * sizeof(sl->at[0]));
		sl->count = (uint32_t)keep;
	}
	for (i = 0; i < sl->count; i++)
		if (sl->seen[i] == h)
			break;
	if (i == sl->count) {
		if (sl->count == BURST_SEEN) {	/* full: the oldest goes */
			memmove(sl->seen, sl->seen + 1,
			    (BURST_SEEN - 1) * sizeof(sl->seen[0]));
			memmove(sl->at, sl->at + 1,
			    (BURST_SEEN - 1) * sizeof(sl->at[0]));
			sl->count--;
		}
		sl->seen[sl->count] = h;
		sl->at[sl->count] = now_ms;
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
