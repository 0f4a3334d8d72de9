/*
 * What the files of src/dlp/ share: a compiled rule, the set, and the
 * validators the default rules run on a match's bytes.
 */
#ifndef SG_DLP_INT_H
#define SG_DLP_INT_H

#include <hs.h>

#include "dlp/dlp.h"

/* What a match must also pass before it is a finding. */
enum dlp_check {
	DLP_CHK_NONE = 0,
	DLP_CHK_GITHUB,		/* the last 6 base62 digits: CRC32 of the 30 before */
	DLP_CHK_JWT,		/* the header decodes to a JSON object with "alg" */
	DLP_CHK_ASSIGN,		/* key[:=]value: the entropy floor is the value's */
	DLP_CHK_GCP_TYPE,	/* half of a GCP service account: sets a flag */
	DLP_CHK_GCP_KEY		/* the other half */
};

struct dlp_rule {
	char		 id[DLP_ID_MAX + 1];
	char		*regex;
	unsigned int	 flags;		/* HS_FLAG_* */
	enum dlp_severity severity;
	double		 entropy;	/* 0: none */
	char		*keyword;	/* NULL: none */
	enum dlp_check	 check;
	size_t		 min_token;	/* the token's least length (CHK_ASSIGN: the value's) */
};

struct dlp_set {
	hs_database_t	*db;
	struct dlp_rule	*rules;
	size_t		 n;
	uint64_t	 gen;		/* a number of its own (scratch reuse) */
};

/* dlp_rules.c */
size_t		 dlp_default_count(void);
/* The i-th default rule into r (strings static: not to be freed). */
void		 dlp_default_get(size_t i, struct dlp_rule *r);
/*
 * 1 when the match m[0..n) (the whole match) passes r's checks; *tok and
 * *toklen: the part of it that is the secret, for the excerpt.
 */
int		 dlp_rule_check(const struct dlp_rule *r, const unsigned char *m,
		    size_t n, size_t *tok, size_t *toklen);
/* 1 when m[0..n) looks like a documentation example ("EXAMPLE", "xxxx"). */
int		 dlp_is_example(const unsigned char *m, size_t n);

#endif
