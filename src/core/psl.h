/*
 * The Public Suffix List (publicsuffix.org; Debian's publicsuffix package
 * ships it as /usr/share/publicsuffix/public_suffix_list.dat): which part
 * of a name is a public suffix, and so which name is the registrable
 * domain (eTLD+1) an operator allows as a whole. A pure parser over the
 * file's bytes and a lookup; no I/O.
 */
#ifndef SG_PSL_H
#define SG_PSL_H

#include <stddef.h>

#define PSL_DEFAULT_PATH	"/usr/share/publicsuffix/public_suffix_list.dat"

struct psl;

/*
 * Parse the list's text (UTF-8 rules become A-labels; comments, blank
 * lines and lines that are no valid rule are passed over). NULL only when
 * out of memory; an empty list is a valid list (every TLD is a suffix).
 */
struct psl	*psl_parse(const char *buf, size_t len);
void		 psl_free(struct psl *);
/* How many rules were taken. */
size_t		 psl_rules(const struct psl *);
/*
 * The registrable domain of host (normalised: lower-case A-labels, no
 * trailing dot) into out: the public suffix plus one label. -1 when host
 * is itself a public suffix (or empty, or out is too small). psl NULL: the
 * last two labels.
 */
int		 psl_registrable(const struct psl *, const char *host,
		    char *out, size_t outlen);

#endif
