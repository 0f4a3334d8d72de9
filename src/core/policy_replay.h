/*
 * `sandgate policy replay`'s judgement of one audit row: decide it again
 * under a candidate policy with the gateway's own decision (core/decide.c)
 * and say whether the outcome changes, or that it cannot be told from the
 * row (docs/policy.md "Replaying the audit log").
 */
#ifndef SG_POLICY_REPLAY_H
#define SG_POLICY_REPLAY_H

#include <stdint.h>

#include "core/policy.h"

/* The columns of an audit row replay reads (NULL / -1: absent). */
struct replay_row {
	const char	*sandbox;
	const char	*kind;		/* http connect socks5 dns transparent ... */
	const char	*host;
	int		 port;		/* -1: none (dns rows) */
	const char	*method;	/* dns rows: the query type's name */
	const char	*path;
	const char	*decision;	/* allow deny report error */
	const char	*rule;
	const char	*reason;
	const char	*country;
	int64_t		 asn;		/* -1: none */
};

enum replay_class {
	REPLAY_SKIP,		/* not a decision replay reads (why) */
	REPLAY_SAME,		/* the candidate decides as the row says */
	REPLAY_ALLOW_TO_DENY,
	REPLAY_DENY_TO_ALLOW,
	REPLAY_UNDECIDABLE	/* depends on what the row does not hold (why) */
};

struct replay_result {
	enum replay_class cls;
	/*
	 * REPLAY_SKIP: "not-a-decision", "no-sandbox", "no-destination".
	 * REPLAY_UNDECIDABLE: "sandbox-policy", "addresses", "geoip",
	 * "first-bytes", "credentials", "request". detail: a sentence.
	 */
	const char	*why;
	const char	*detail;
	char		 policy[POLICY_NAME_MAX + 1];	/* the candidate's for the sandbox */
	/* The candidate's decision (when not skipped or undecidable). */
	const char	*now;		/* "allow", "report", "deny" */
	char		 rule[POLICY_NAME_MAX + 24];
	const char	*reason;	/* a reason word, "allowed" */
	/*
	 * A row the gateway refused before it resolved the name (or saw a
	 * tunnel's first bytes) that the candidate's rules allow: those
	 * stages are still to pass ("addresses", "addresses, first bytes").
	 */
	const char	*unchecked;
};

/*
 * Judge row under cand, which replaces the config's policies whole (its
 * static sandboxes too: one it lacks has no identity under it). cur is
 * the policy in force (the config's): which policy a sandbox had when the
 * row was written (or the row's rule says, for a launcher's sandbox), and
 * its address, GeoIP, credential and tunnel settings then. Pure: reads
 * its arguments, writes *res.
 */
void	policy_replay_row(const struct policy *cand, const struct policy *cur,
	    const struct replay_row *row, struct replay_result *res);

#endif
