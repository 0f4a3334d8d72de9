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
		CHECK_STR(verdict_word(reason_verdict((enum sg_reason)r)),
		    a->cls == REASON_CLASS_ERROR ? "error" : "deny");
		CHECK_INT(reason_close((enum sg_reason)r),
		    r == REASON_HEAD_TIMEOUT || r == REASON_IDLE_TIMEOUT ||
		    r == REASON_UPSTREAM_TIMEOUT ? CLOSE_TIMEOUT :
		    a->cls == REASON_CLASS_ERROR ? CLOSE_FAILED : CLOSE_REFUSED);
		for (q = r + 1; q < REASON_MAX; q++) {
			b = reason_info((enum sg_reason)q);
			CHECK_MSG(b->word == NULL || strcmp(a->word, b->word) != 0,
			    "%s twice", a->word);
		}
	}
	/* The verdicts' table: each word once, and back again. */
	CHECK(verdict_word(VERDICT_NONE) == NULL);
	CHECK(verdict_word(VERDICT_MAX) == NULL);
	CHECK(verdict_word((enum sg_verdict)-1) == NULL);
	for (r = VERDICT_NONE + 1; r < VERDICT_MAX; r++) {
		w = verdict_word((enum sg_verdict)r);
		CHECK_MSG(w != NULL, "verdict %d has no word", r);
		if (w != NULL)
			CHECK_INT(verdict_parse(w), r);
	}
	CHECK_STR(verdict_word(VERDICT_ALLOW), "allow");
	CHECK_STR(verdict_word(VERDICT_DENY), "deny");
	CHECK_STR(verdict_word(VERDICT_ERROR), "error");
	CHECK_STR(verdict_word(VERDICT_REPORT), "report");
	CHECK_INT(verdict_parse("Allow"), VERDICT_NONE);
	CHECK_INT(verdict_parse("allowed"), VERDICT_NONE);
	CHECK_INT(verdict_parse(""), VERDICT_NONE);
	CHECK_INT(verdict_parse(NULL), VERDICT_NONE);
	/* The close reasons' table: a word each, none twice. */
	for (r = 0; r < CLOSE_MAX; r++) {
		CHECK_MSG(close_word((enum sg_close)r) != NULL, "close %d", r);
		for (q = r + 1; q < CLOSE_MAX; q++)
			CHECK_MSG(strcmp(close_word((enum sg_close)r),
			    close_word((enum sg_close)q)) != 0,
			    "close %d twice", r);
	}
	CHECK_STR(close_word(CLOSE_MAX), "unknown");
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
