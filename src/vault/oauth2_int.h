/*
 * What the oauth2 files of src/vault/ share (oauth2_answer.c, the parser
 * of a token endpoint's answer, and oauth2_token.c, which asks), and
 * what the fuzzer and the unit tests reach.
 */
#ifndef SG_VAULT_OAUTH2_INT_H
#define SG_VAULT_OAUTH2_INT_H

#include <stddef.h>

#include "vault/oauth2.h"

#define OAUTH2_ANSWER_MAX	(64 * 1024)	/* head and body of an answer */
#define OAUTH2_DEFAULT_EXPIRES	300		/* s, when expires_in is absent */
#define OAUTH2_MAX_EXPIRES	(10L * 366 * 86400)

struct oauth2_answer {
	int		 status;
	long		 expires_in;	/* seconds */
	const char	*access;	/* in mem; NULL on failure */
	size_t		 access_len;
	const char	*refresh;	/* NULL: none given */
	size_t		 refresh_len;
	unsigned char	*mem;		/* wiped memory holding both */
	char		 why[200];	/* on failure: what was wrong */
};

/*
 * An answer buf[0..len) (modified: a chunked body is decoded in place):
 * 0 and *a filled (oauth2_answer_free after), or -1 with a->why.
 */
int	oauth2_answer_parse(char *buf, size_t len, struct oauth2_answer *a);
void	oauth2_answer_free(struct oauth2_answer *a);

#endif
