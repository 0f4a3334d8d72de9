/*
 * A DNS name that carries an encoded payload (docs/dlp.md, "DNS"): a long
 * high-entropy label (base32, base64, hex), or labels that together are
 * one. The last two labels (the parent the policy allows) are not judged.
 */
#include <ctype.h>
#include <stdio.h>
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
