/*
 * `sandgate policy suggest`: from audit rows that were denied or reported,
 * a policy document whose allow rules would let them pass, grouped by
 * registrable domain, with counts and first/last seen as comments. What it
 * must not open -- internal addresses, IP literals, deny-rule hits,
 * country/ASN denials -- it names in comments only. Pure: rows in, YAML
 * out; the caller reads the audit log.
 */
#ifndef SG_POLICY_SUGGEST_H
#define SG_POLICY_SUGGEST_H

#include <stdint.h>
#include <stdio.h>

struct psl;
struct suggest;

/* One aggregated group of rows (strings need only live for the call). */
struct suggest_row {
	const char	*host;
	int		 port;		/* -1: none (DNS) */
	const char	*kind;		/* http, connect, socks5, transparent, dns */
	const char	*decision;	/* deny, report */
	const char	*rule;
	const char	*reason;
	const char	*ip;		/* one address of the group, or "" */
	int64_t		 n;
	const char	*first, *last;	/* RFC 3339 */
};

struct suggest	*suggest_new(const struct psl *);
/* 0, or -1 when out of memory. Rows that say nothing useful are ignored. */
int		 suggest_add(struct suggest *, const struct suggest_row *);
/* The document; header lines are written as comments first. */
void		 suggest_write(struct suggest *, FILE *, const char *policy_name,
		    const char *const *header, size_t n_header);
void		 suggest_free(struct suggest *);

#endif
