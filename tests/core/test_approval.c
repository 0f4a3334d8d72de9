/*
 * Unit test of mode: ask's pending-question table (core/approval.h): one
 * question per (sandbox, destination) however many wait on it, ids,
 * deadlines, max_pending per sandbox, answers handed to every waiter, and
 * answers given --for a while deciding later requests in their scope
 * (host, host:port, *.domain) until they expire.
 */
#include <stdio.h>

#include "check.h"
#include "core/approval.h"

int
main(void)
{
	struct approval_table *t = approval_new();
	struct approval_info list[300], info;
	struct approval_scope sc;
	uint64_t id, id2, id3, ids[200];
	int created;
	size_t i;
	char host[64];

	CHECK(t != NULL);
	/* A burst to one destination: one question, five waiters. */
	CHECK_INT(approval_ask(t, "sb1", "example.com", 443, 1000, 60000, 10,
	    &id, &created), APPROVAL_PENDING);
	CHECK(id != 0 && created == 1);
	for (i = 0; i < 4; i++) {
		CHECK_INT(approval_ask(t, "sb1", "example.com", 443, 1100,
		    60000, 10, &id2, &created), APPROVAL_PENDING);
		CHECK(id2 == id && created == 0);
	}
	CHECK_INT(approval_list(t, list, 300), 1);
	CHECK_INT(list[0].waiting, 5);
	CHECK_INT(list[0].requests, 5);
	CHECK_INT(list[0].first_ms, 1000);
	CHECK_INT(list[0].deadline_ms, 61000);
	/* Another port, another sandbox: other questions. */
	CHECK_INT(approval_ask(t, "sb1", "example.com", 80, 1200, 60000, 10,
	    &id2, &created), APPROVAL_PENDING);
	CHECK(id2 != id && created);
	CHECK_INT(approval_ask(t, "sb2", "example.com", 443, 1200, 60000, 10,
	    &id3, &created), APPROVAL_PENDING);
	CHECK(id3 != id && id3 != id2);
	CHECK_INT(approval_pending(t, "sb1"), 2);
	/* Still pending: each waiter stays held. */
	CHECK_INT(approval_collect(t, id, 2000), APPROVAL_PENDING);
	/* Approve once: every waiter gets it, then the question goes. */
	CHECK_INT(approval_answer(t, id, 1, 0, NULL, 3000, &info), 0);
	CHECK_INT(info.state, APPROVAL_APPROVED);
	CHECK_INT(approval_answer(t, id, 0, 0, NULL, 3000, NULL), -1);
	for (i = 0; i < 5; i++)
		CHECK_INT(approval_collect(t, id, 3100), APPROVAL_APPROVED);
	CHECK_INT(approval_collect(t, id, 3100), APPROVAL_GONE);
	/* Once: a later request asks again. */
	CHECK_INT(approval_ask(t, "sb1", "example.com", 443, 4000, 60000, 10,
	    &id, &created), APPROVAL_PENDING);
	CHECK(created);
	/* Deny it, a waiter leaving before its answer is not counted. */
	CHECK_INT(approval_ask(t, "sb1", "example.com", 443, 4000, 60000, 10,
	    &id, &created), APPROVAL_PENDING);
	approval_leave(t, id);
	CHECK_INT(approval_answer(t, id, 0, 0, NULL, 4500, NULL), 0);
	CHECK_INT(approval_collect(t, id, 4600), APPROVAL_DENIED);
	CHECK_INT(approval_collect(t, id, 4600), APPROVAL_GONE);
	/* Timed out: sb2's question, past its deadline. */
	CHECK_INT(approval_collect(t, id3, 61199), APPROVAL_PENDING);
	CHECK_INT(approval_collect(t, id3, 61200), APPROVAL_TIMEDOUT);
	CHECK_INT(approval_collect(t, id3, 61200), APPROVAL_GONE);
	/* approval_expire marks the others, keeps them for their waiters. */
	CHECK_INT(approval_expire(t, 70000), 1);
	CHECK_INT(approval_list(t, list, 300), 0);
	CHECK_INT(approval_collect(t, id2, 70000), APPROVAL_TIMEDOUT);
	/* A question nobody waits for any more times out and goes. */
	CHECK_INT(approval_ask(t, "sb1", "gone.example", 443, 70000, 1000, 10,
	    &id, &created), APPROVAL_PENDING);
	approval_leave(t, id);
	CHECK_INT(approval_list(t, list, 300), 1);
	CHECK_INT(approval_expire(t, 71000), 1);
	CHECK_INT(approval_get(t, id, &info), -1);

	/* max_pending per sandbox; another sandbox is not held back. */
	for (i = 0; i < 3; i++) {
		snprintf(host, sizeof(host), "h%zu.example", i);
		CHECK_INT(approval_ask(t, "sb3", host, 443, 80000, 60000, 3,
		    &id, &created), APPROVAL_PENDING);
	}
	CHECK_INT(approval_ask(t, "sb3", "h9.example", 443, 80000, 60000, 3,
	    &id, &created), APPROVAL_LIMIT);
	CHECK(id == 0);
	/* Joining an existing question is within the limit. */
	CHECK_INT(approval_ask(t, "sb3", "h0.example", 443, 80000, 60000, 3,
	    &id, &created), APPROVAL_PENDING);
	CHECK_INT(approval_ask(t, "sb4", "h9.example", 443, 80000, 60000, 3,
	    &id, &created), APPROVAL_PENDING);
	CHECK_INT(approval_expire(t, 200000), 4);
	for (i = 0; i < 300; i++)
		(void)approval_collect(t, i, 200000);

	/* 200 pending questions, all listed, ids distinct. */
	for (i = 0; i < 200; i++) {
		snprintf(host, sizeof(host), "n%zu.example", i);
		CHECK_INT(approval_ask(t, "many", host, 443, 300000, 60000, 0,
		    &ids[i], &created), APPROVAL_PENDING);
		if (i > 0)
			CHECK(ids[i] > ids[i - 1]);
	}
	CHECK_INT(approval_list(t, list, 300), 200);
	CHECK_INT(approval_list(t, list, 10), 200);
	CHECK_INT(approval_expire(t, 360000), 200);
	for (i = 0; i < 200; i++)
		CHECK_INT(approval_collect(t, ids[i], 360000),
		    APPROVAL_TIMEDOUT);

	/* Scopes. */
	CHECK_INT(approval_scope_parse("example.com", &sc), 0);
	CHECK_INT(sc.kind, APPROVAL_SCOPE_HOST);
	CHECK(approval_scope_covers(&sc, "example.com", 1));
	CHECK(!approval_scope_covers(&sc, "a.example.com", 443));
	CHECK_INT(approval_scope_parse("example.com:443", &sc), 0);
	CHECK_INT(sc.kind, APPROVAL_SCOPE_HOSTPORT);
	CHECK(approval_scope_covers(&sc, "example.com", 443));
	CHECK(!approval_scope_covers(&sc, "example.com", 80));
	CHECK_INT(approval_scope_parse("*.example.com", &sc), 0);
	CHECK_INT(sc.kind, APPROVAL_SCOPE_DOMAIN);
	CHECK(approval_scope_covers(&sc, "a.b.example.com", 443));
	CHECK(approval_scope_covers(&sc, "example.com", 443));
	CHECK(!approval_scope_covers(&sc, "badexample.com", 443));
	CHECK(!approval_scope_covers(&sc, "example.org", 443));
	CHECK_INT(approval_scope_parse("[::1]:8080", &sc), 0);
	CHECK(approval_scope_covers(&sc, "::1", 8080));
	CHECK_INT(approval_scope_parse("::1", &sc), 0);
	CHECK_INT(sc.kind, APPROVAL_SCOPE_HOST);
	CHECK_INT(approval_scope_parse("", &sc), -1);
	CHECK_INT(approval_scope_parse("Example.com", &sc), -1);
	CHECK_INT(approval_scope_parse("a b", &sc), -1);
	CHECK_INT(approval_scope_parse("example.com:0", &sc), -1);
	CHECK_INT(approval_scope_parse("example.com:70000", &sc), -1);
	CHECK_INT(approval_scope_parse("example.com:x", &sc), -1);
	CHECK_INT(approval_scope_parse("*.", &sc), -1);

	/* Approve --for 1h on *.example.com: later requests go by themselves. */
	CHECK_INT(approval_ask(t, "sb5", "api.example.com", 443, 400000,
	    60000, 10, &id, &created), APPROVAL_PENDING);
	CHECK_INT(approval_scope_parse("*.example.org", &sc), 0);
	CHECK_INT(approval_answer(t, id, 1, 3600000, &sc, 400500, NULL), -1);
	CHECK_INT(approval_scope_parse("*.example.com", &sc), 0);
	CHECK_INT(approval_answer(t, id, 1, 3600000, &sc, 400500, NULL), 0);
	CHECK_INT(approval_collect(t, id, 400600), APPROVAL_APPROVED);
	CHECK_INT(approval_ask(t, "sb5", "cdn.example.com", 80, 401000,
	    60000, 10, &id, &created), APPROVAL_APPROVED);
	CHECK(id == 0 && !created);
	/* Not for another sandbox. */
	CHECK_INT(approval_ask(t, "sb6", "cdn.example.com", 80, 401000,
	    60000, 10, &id, &created), APPROVAL_PENDING);
	/* Expired: asked again. */
	CHECK_INT(approval_ask(t, "sb5", "cdn.example.com", 80, 4000500,
	    60000, 10, &id, &created), APPROVAL_PENDING);
	CHECK(created);
	/* Deny --for 10s on host:port: refused at once meanwhile. */
	CHECK_INT(approval_answer(t, id, 0, 10000, NULL, 4000600, NULL), 0);
	CHECK_INT(approval_collect(t, id, 4000600), APPROVAL_DENIED);
	CHECK_INT(approval_ask(t, "sb5", "cdn.example.com", 443, 4000700,
	    60000, 10, &id, &created), APPROVAL_DENIED);
	CHECK_INT(approval_expire(t, 4010600), 3);
	CHECK_INT(approval_ask(t, "sb5", "cdn.example.com", 443, 4010700,
	    60000, 10, &id, &created), APPROVAL_PENDING);

	/* An answer past the question's deadline is no answer: timed out. */
	CHECK_INT(approval_ask(t, "sb7", "late.example.com", 443, 5000000,
	    1000, 10, &id, &created), APPROVAL_PENDING);
	CHECK_INT(approval_answer(t, id, 1, 0, NULL, 5001000, NULL), -1);
	CHECK_INT(approval_collect(t, id, 5000900), APPROVAL_TIMEDOUT);
	/*
	 * A sandbox forgotten (removed): its answers go and its pending
	 * question ends; the same id asking again is asked anew.
	 */
	CHECK_INT(approval_ask(t, "sb8", "keep.example.com", 443, 6000000,
	    60000, 1, &id, &created), APPROVAL_PENDING);
	CHECK_INT(approval_answer(t, id, 1, 3600000, NULL, 6000100, NULL), 0);
	CHECK_INT(approval_collect(t, id, 6000100), APPROVAL_APPROVED);
	CHECK_INT(approval_ask(t, "sb8", "keep.example.com", 443, 6000200,
	    60000, 1, &id, &created), APPROVAL_APPROVED);
	CHECK_INT(approval_ask(t, "sb8", "held.example.com", 443, 6000300,
	    60000, 1, &id2, &created), APPROVAL_PENDING);
	approval_forget(t, "sb8");
	CHECK_INT(approval_pending(t, "sb8"), 0);
	CHECK_INT(approval_ask(t, "sb8", "keep.example.com", 443, 6000400,
	    60000, 1, &id, &created), APPROVAL_PENDING);
	CHECK(created && id != id2);
	/* The old question is no one's to join, and its waiter sees it end. */
	CHECK_INT(approval_ask(t, "sb8", "held.example.com", 443, 6000500,
	    60000, 2, &id3, &created), APPROVAL_PENDING);
	CHECK(created && id3 != id2);
	CHECK_INT(approval_collect(t, id2, 6000600), APPROVAL_GONE);

	CHECK_INT(approval_state_word(APPROVAL_TIMEDOUT)[0], 't');
	approval_free(t);
	return check_summary();
}
