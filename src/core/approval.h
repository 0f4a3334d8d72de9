/*
 * The pending questions of mode: ask (docs/approvals.md): a request no rule
 * allows waits on one question per (sandbox, destination) until an
 * operator answers it, or it times out. Answers given --for a while are
 * kept here too and decide later requests in their scope by themselves.
 * Pure: no clock (now is passed in), no lock (the caller holds one), no I/O.
 */
#ifndef SG_APPROVAL_H
#define SG_APPROVAL_H

#include <stddef.h>
#include <stdint.h>

#define APPROVAL_HOST_MAX	253
#define APPROVAL_ID_MAX		40

enum approval_state {
	APPROVAL_PENDING = 0,	/* asked, not answered */
	APPROVAL_APPROVED,	/* go on */
	APPROVAL_DENIED,	/* refused: approval-denied */
	APPROVAL_TIMEDOUT,	/* nobody answered in time: approval-timeout */
	APPROVAL_LIMIT,		/* max_pending questions already: approval-limit */
	APPROVAL_GONE		/* no such question (any more) */
};

enum approval_scope_kind {
	APPROVAL_SCOPE_HOST = 0,	/* "example.com": any port */
	APPROVAL_SCOPE_HOSTPORT,	/* "example.com:443" */
	APPROVAL_SCOPE_DOMAIN		/* "*.example.com": the name and below it */
};

struct approval_scope {
	enum approval_scope_kind kind;
	char		host[APPROVAL_HOST_MAX + 1];
	uint16_t	port;
};

/* One question as listed (GET /v1/approvals). */
struct approval_info {
	uint64_t	id;
	char		sandbox[APPROVAL_ID_MAX + 1];
	char		host[APPROVAL_HOST_MAX + 1];
	uint16_t	port;		/* 0: a DNS question */
	uint64_t	first_ms;	/* when its first request came */
	uint64_t	deadline_ms;
	unsigned	waiting;	/* requests held on it now */
	unsigned	requests;	/* requests held on it in all */
	enum approval_state state;
};

struct approval_table;

struct approval_table *approval_new(void);
void		 approval_free(struct approval_table *);

/*
 * A request of sandbox to host:port that no rule allows. An answer given
 * --for that covers it and has not expired decides (APPROVED or DENIED,
 * *id 0). Otherwise it waits on the pending question for the same
 * destination, or on a new one timing out at now + timeout_ms
 * (APPROVAL_PENDING, *id the question's, the caller now holds a waiter it
 * gives back with approval_collect or approval_leave) -- unless the
 * sandbox has max_pending questions already (APPROVAL_LIMIT; 0: no limit).
 * *created 1 when the question is new (to notify, to audit).
 */
enum approval_state approval_ask(struct approval_table *, const char *sandbox,
		    const char *host, uint16_t port, uint64_t now,
		    uint64_t timeout_ms, unsigned max_pending, uint64_t *id,
		    int *created);
/*
 * A held request looks at its question: PENDING (still held; timed out
 * questions become TIMEDOUT here), or its answer, which also gives its
 * waiter back (the question goes once no waiter is left).
 */
enum approval_state approval_collect(struct approval_table *, uint64_t id,
		    uint64_t now);
/* A held request went away before its answer: its waiter given back. */
void		 approval_leave(struct approval_table *, uint64_t id);
/*
 * An operator's answer to pending question id. for_ms > 0: it also decides
 * later requests of the sandbox in scope (NULL: the question's host, any
 * port) until now + for_ms. 0, or -1 when id is no pending question or the
 * scope does not cover the question's destination, or its deadline has
 * passed (it is TIMEDOUT then, as a tick would have made it).
 */
int		 approval_answer(struct approval_table *, uint64_t id,
		    int approve, uint64_t for_ms, const struct approval_scope *,
		    uint64_t now, struct approval_info *out);
/*
 * The sandbox is gone (removed; an id registered again is another
 * sandbox): its answers go, and its pending questions end (GONE) -- no
 * later request joins them or is decided by them.
 */
void		 approval_forget(struct approval_table *, const char *sandbox);
/* Questions past their deadline become TIMEDOUT; answers past theirs go. How many changed. */
size_t		 approval_expire(struct approval_table *, uint64_t now);
/* The pending questions, oldest first, into out[0..max): how many there are. */
size_t		 approval_list(const struct approval_table *,
		    struct approval_info *out, size_t max);
/* 0 and *out filled when question id exists. */
int		 approval_get(const struct approval_table *, uint64_t id,
		    struct approval_info *out);
/* How many questions the sandbox has pending. */
unsigned	 approval_pending(const struct approval_table *, const char *sandbox);

/*
 * "host", "host:port" or "*.domain" (lower-case A-label names, IPs as
 * text, [v6]:port): 0 and *out filled, -1 when it does not parse.
 */
int		 approval_scope_parse(const char *s, struct approval_scope *out);
/* 1 when the scope covers host:port. */
int		 approval_scope_covers(const struct approval_scope *,
		    const char *host, uint16_t port);
/* "approve"/"deny" etc. for the API and the audit row. */
const char	*approval_state_word(enum approval_state);

#endif
