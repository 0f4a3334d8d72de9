/*
 * The placeholders the gateway issued (docs/credentials.md), as an immutable
 * snapshot: random ones (sg-ph- + 32 base32) in a table keyed by a keyed hash
 * of their 32 characters, shaped ones (a credential's prefix, length and
 * alphabet) in the same table by a hash of the whole folded string, with
 * the short list of distinct shapes to search for, fixed ones in a short sorted list, an index by
 * (sandbox, credential), and the last CRED_PHS_REMOVED_MAX placeholders of
 * sandboxes that went. Every change makes a new snapshot (sharing the parts it
 * does not touch) and publishes it by pointer; readers take no lock (a hazard
 * pointer per thread).
 */
#ifndef SG_CRED_PHS_H
#define SG_CRED_PHS_H

#include <stddef.h>
#include <stdint.h>

/* Placeholders of removed sandboxes still refused as misuse: the most recent. */
#define CRED_PHS_REMOVED_MAX	4096

/*
 * One issued placeholder. Never changes once a snapshot holds it; whether
 * its sandbox still has it is the snapshot's to say (cred_phs_mine).
 */
struct cred_ph {
	const char	*sandbox;
	const char	*cred;
	const char	*ph;
	size_t		 phlen;
	/* cred_phs.c's own */
	int		 fixed;		/* a policy's placeholder: value, not random */
	int		 is_static;	/* a static sandbox's (cred_phs_set_static) */
	int		 hashed;	/* sg-ph- + 32 base32, or shaped: in the table */
	const char	*alphabet;	/* shaped: its alphabet (static); else NULL */
	size_t		 plen;		/* shaped: its prefix's length */
	uint64_t	 h_ph;		/* keyed hash of the 32 characters */
	uint64_t	 h_sb;		/* keyed hash of the sandbox */
	uint64_t	 seq;		/* issue order */
	unsigned int	 refs;		/* tables holding it (writers only) */
};

struct cred_phs;	/* a snapshot */
struct cred_phs_pub;	/* where the current snapshot is published */

struct cred_phs_pub *cred_phs_pub_new(void);
/* Only once no reader is left. */
void		 cred_phs_pub_free(struct cred_phs_pub *);

/*
 * Readers: the current snapshot, valid until cred_phs_leave. Takes no lock
 * (a thread beyond the first CRED_PHS_READERS takes the writers' mutex for
 * an instant). Not nested on one thread.
 */
#define CRED_PHS_READERS	256
const struct cred_phs *cred_phs_enter(struct cred_phs_pub *);
void		 cred_phs_leave(struct cred_phs_pub *, const struct cred_phs *);

/*
 * Writers (serialised by the publisher's mutex). A (sandbox, credential)
 * that has no placeholder gets one: fixed when fixed is not NULL, random
 * otherwise (shaped when prefix is not NULL: prefix, then characters of
 * alphabet up to len in all, unique among all issued); one that has a
 * placeholder of another kind or shape than asked for, or another fixed
 * one, gets a new one and the old one becomes removed. One new snapshot for the whole
 * batch. 0, or -1: out of memory, nothing changed.
 */
struct cred_phs_want {
	const char	*sandbox;
	const char	*cred;
	const char	*fixed;		/* NULL: random */
	/* Random in a shape: prefix NULL for sg-ph- + 32 base32. */
	const char	*prefix;	/* 1..CRED_PHS_PREFIX_MAX bytes */
	size_t		 len;		/* in all, at most CRED_PHS_SHAPED_MAX */
	const char	*alphabet;	/* static storage, 2..64 distinct bytes */
};
#define CRED_PHS_PREFIX_MAX	32
#define CRED_PHS_SHAPED_MAX	128
int		 cred_phs_issue(struct cred_phs_pub *,
		    const struct cred_phs_want *, size_t n);
/*
 * The static sandboxes' placeholders are w[0..n) (a policy, loaded or
 * reloaded): issued as above, and those of static sandboxes or credentials
 * that w no longer lists become removed. 0, or -1 as above.
 */
int		 cred_phs_set_static(struct cred_phs_pub *,
		    const struct cred_phs_want *, size_t n);
/* The sandbox's placeholders become removed ones. 0, or -1 as above. */
int		 cred_phs_forget(struct cred_phs_pub *, const char *sandbox);
/* Every placeholder the current snapshot knows, removed ones included. */
size_t		 cred_phs_pub_count(struct cred_phs_pub *);

/* Snapshot lookups. */
size_t		 cred_phs_count(const struct cred_phs *);
/* The placeholder of (sandbox, cred); NULL when it has none. */
const struct cred_ph *cred_phs_get(const struct cred_phs *,
		    const char *sandbox, const char *cred);
/* 1 when e is a placeholder of sandbox and sandbox is not removed. */
int		 cred_phs_mine(const struct cred_phs *, const struct cred_ph *e,
		    const char *sandbox);
/* 1 when a placeholder of sandbox (not removed) is exactly ph[0..len). */
int		 cred_phs_owned(const struct cred_phs *, const char *sandbox,
		    const char *ph, size_t len);

/*
 * Search buf[0..len) for every issued placeholder; cb is called for each
 * placeholder found (for each entry, when several sandboxes share a fixed
 * one) until it returns a positive value, which is returned. 0 when done;
 * -1 out of memory (the caller refuses). Flags:
 *   CRED_PHS_FOLD   any case (host names, which DNS may lower-case)
 *   CRED_PHS_VALUE  a header value or request target: also with its bytes
 *                   %-escaped, and inside Basic credentials decoded loosely
 *                   (vault_contains_placeholder's reading)
 * Without flags: the bytes as they are (bodies).
 */
#define CRED_PHS_FOLD		0x1
#define CRED_PHS_VALUE		0x2
int		 cred_phs_search(const struct cred_phs *, const char *buf,
		    size_t len, int flags,
		    int (*cb)(const struct cred_ph *, void *), void *arg);
/* The entries whose placeholder is exactly ph[0..len), as cred_phs_search. */
int		 cred_phs_match(const struct cred_phs *, const char *ph,
		    size_t len, int (*cb)(const struct cred_ph *, void *),
		    void *arg);
/* The distinct fixed placeholders (not of the random form): i < n. */
size_t		 cred_phs_n_fixed(const struct cred_phs *);
const char	*cred_phs_fixed(const struct cred_phs *, size_t i, size_t *len);
/* The distinct shapes of shaped placeholders: i < n; prefix and length. */
size_t		 cred_phs_n_shapes(const struct cred_phs *);
const char	*cred_phs_shape(const struct cred_phs *, size_t i, size_t *plen,
		    size_t *len);
/* 1 when some placeholder has the random form (search for the prefix). */
int		 cred_phs_has_random(const struct cred_phs *);
/*
 * How many of the last bytes end[0..m) could begin a placeholder: a proper
 * prefix of a fixed one, of sg-ph- and base32 characters, or of a shape's
 * prefix and characters of its alphabet.
 */
size_t		 cred_phs_holdback(const struct cred_phs *, const char *end,
		    size_t m);

#endif
