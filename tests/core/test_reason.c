/*
 * Unit test of the reasons' table: every reason has one word, unique and
 * spelled as the vocabulary is (lower case and hyphens), a class, an HTTP
 * status and a SOCKS5 reply; out-of-range values fail closed.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/reason.h"

int
main(void)
{
	const struct reason_info *a, *b;
	const char *w;
	int r, q;

	CHECK(reason_word(REASON_NONE) == NULL);
	for (r = 1; r < REASON_MAX; r++) {
		a = reason_info((enum sg_reason)r);
		CHECK_MSG(a->word != NULL, "reason %d has no word", r);
		if (a->word == NULL)
			continue;
		for (w = a->word; *w != '\0'; w++)
			CHECK_MSG((*w >= 'a' && *w <= 'z') || *w == '-',
			    "%s: not the vocabulary's spelling", a->word);
		CHECK_MSG(a->cls == REASON_CLASS_DENY ||
		    a->cls == REASON_CLASS_ERROR, "%s: class", a->word);
		CHECK_MSG(a->status >= 300 && a->status <= 599, "%s: status %d",
		    a->word, a->status);
		CHECK_MSG(a->socks_rep >= 1 && a->socks_rep <= 8, "%s: SOCKS %u",
		    a->word, a->socks_rep);
		CHECK_STR(reason_decision((enum sg_reason)r),
		    a->cls == REASON_CLASS_ERROR ? "error" : "deny");
		for (q = r + 1; q < REASON_MAX; q++) {
			b = reason_info((enum sg_reason)q);
			CHECK_MSG(b->word == NULL || strcmp(a->word, b->word) != 0,
			    "%s twice", a->word);
		}
	}
	/* What decides: classes and statuses of the reasons SPEC names. */
	CHECK_INT(reason_status(REASON_AMBIGUOUS_PATH), 400);
	CHECK_INT(reason_status(REASON_POLICY_DENY), 403);
	CHECK_INT(reason_status(REASON_NO_IDENTITY), 407);
	CHECK_INT(reason_status(REASON_UPSTREAM_TIMEOUT), 504);
	CHECK_INT(reason_is_error(REASON_UPSTREAM_ENCODING), 1);
	CHECK_INT(reason_is_error(REASON_CRED_MISUSE), 0);
	CHECK_INT(reason_info(REASON_POLICY_DENY)->socks_rep, 2);
	CHECK_INT(reason_info(REASON_DNS_ERROR)->socks_rep, 4);
	CHECK_INT(reason_status(REASON_RATE_LIMITED), 429);
	CHECK_INT(reason_info(REASON_RATE_LIMITED)->socks_rep, 2);
	CHECK_INT(reason_is_error(REASON_RATE_LIMITED), 0);
	CHECK_INT(reason_status(REASON_HEAD_TIMEOUT), 408);
	/* Out of range: an internal error, never a word of another reason. */
	CHECK_STR(reason_word((enum sg_reason)REASON_MAX), "internal-error");
	CHECK_STR(reason_word((enum sg_reason)-1), "internal-error");
	return check_summary();
}
