/*
 * The vault's part of kind oauth2 credentials (docs/credentials.md,
 * "OAuth 2.0 credentials"): the entry's lines read in place, a rotated
 * refresh token written into a copy of the entry (the keeper's side), and
 * snapshots that carry the tokens the gateway obtained beside the entries.
 */
#ifndef SG_VAULT_OAUTH2_H
#define SG_VAULT_OAUTH2_H

#include <stddef.h>
#include <stdint.h>

#include "vault/vault.h"

#define OAUTH2_TOKEN_MAX	8192	/* an access or refresh token, bytes */
/* The snapshot entry "ENTRY#client": the client secret (dlp only). */
#define OAUTH2_PART_CLIENT	"#client"
/* "ENTRY#basic": base64 of the client's id:secret, as a token request sends it. */
#define OAUTH2_PART_BASIC	"#basic"
/* "ENTRY#prev": the access token the current one replaced, unexpired. */
#define OAUTH2_PART_WAS		"#prev"

/* Slices of an entry's value; NULL/0: the line is absent. */
struct oauth2_entry {
	const char	*client_id;
	size_t		 client_id_len;
	const char	*client_secret;
	size_t		 client_secret_len;
	const char	*refresh_token;
	size_t		 refresh_token_len;
};

/*
 * The value "client_id=...\nclient_secret=...\nrefresh_token=...\n" (any
 * order, \r\n too, blank lines skipped; every value 1 or more bytes
 * 0x21-0x7e; each key at most once; no other keys) read without copying:
 * 0 and *e filled, or -1 with *why.
 */
int	oauth2_entry_parse(const unsigned char *val, size_t len,
	    struct oauth2_entry *e, const char **why);
/*
 * The entry val[0..len) with its refresh_token line set to rt[0..rtlen)
 * (added when absent), written to out (of cap bytes, the caller's wiped
 * memory): its length, or -1 (malformed entry, a token with bytes outside
 * 0x21-0x7e or longer than OAUTH2_TOKEN_MAX, or no room).
 */
long	oauth2_entry_set_refresh(const unsigned char *val, size_t len,
	    const char *rt, size_t rtlen, unsigned char *out, size_t cap);
/*
 * RFC 6749 2.3.1: the Basic credentials of e's client, base64 of its
 * form-encoded id, ':' and form-encoded secret, allocated in wiped memory
 * (vault_secmem_free it) with *len; NULL when e has no secret, or no memory.
 */
char	*oauth2_entry_basic(const struct oauth2_entry *e, size_t *len);
/* 1 when t[0..len) may be a token: 1..OAUTH2_TOKEN_MAX bytes 0x21-0x7e. */
int	oauth2_token_ok(const char *t, size_t len);

/*
 * A new snapshot: src's entries and, for each of names (the entries of
 * oauth2 credentials) that parses, its client secret and refresh token
 * as entries of their own, "NAME" OAUTH2_PART_CLIENT and "NAME#refresh",
 * and its Basic credentials (oauth2_entry_basic) as "NAME" OAUTH2_PART_BASIC
 * (dlp and the scrubber look for them: docs/dlp.md, docs/credentials.md;
 * the tokens' publisher replaces "#refresh" with the refresh token in use). src
 * itself when there is none to add (a reference taken); NULL: no memory.
 */
#define OAUTH2_PART_CLIENT	"#client"
struct vault_snapshot *oauth2_snap_parts(const struct vault_snapshot *src,
	    const char *const *names, size_t n);
/* The value of name in the snapshot (not a copy), or NULL. */
const unsigned char *oauth2_snap_value(const struct vault_snapshot *,
	    const char *name, size_t *len);
/*
 * A new snapshot: base's entries that are not named in names (tokens named
 * "ENTRY#what" replaced), and names[i] = vals[i] (lens[i] bytes) added.
 * NULL on no memory or a bad name.
 */
struct vault_snapshot *oauth2_snap_extend(const struct vault_snapshot *base,
	    const char *const *names, const unsigned char *const *vals,
	    const size_t *lens, size_t n);


/*
 * The gateway's tokens (oauth2_token.c): per vault entry of an oauth2
 * credential, the current access token and the refresh token in use, held
 * in wiped memory; one fetch at a time per entry, others wait for it; a
 * failure backs off (1 s doubling to 60 s). Every change is published as a
 * snapshot: the keeper's entries (the base) plus "ENTRY#access" and
 * "ENTRY#refresh", which the swap and the scrubber use by name.
 */
struct oauth2_tokens;
struct policy_credential;
struct keeper_client;
/* Takes the snapshot's reference; called with the tokens' lock held. */
typedef void	(*oauth2_publish_fn)(void *arg, struct vault_snapshot *);

/* ca_bundle NULL: the system's roots (as origins are verified). */
struct oauth2_tokens *oauth2_tokens_new(const char *ca_bundle,
	    struct keeper_client *kc, oauth2_publish_fn publish, void *arg,
	    const char **errstr);
void	oauth2_tokens_free(struct oauth2_tokens *);
/* A new base from the keeper (its reference taken over), published with the tokens. */
void	oauth2_tokens_rebase(struct oauth2_tokens *, struct vault_snapshot *base);
/*
 * Make sure c's access token is fresh (obtained, or refreshed when less
 * than refresh_before -- at most half its lifetime -- is left) and in the
 * published snapshot. Blocks the calling thread while it asks the token
 * endpoint (at most OAUTH2_FETCH_MS) or waits for another thread's fetch
 * (OAUTH2_WAIT_MS). 0, or -1 with why (for the client and the audit row).
 */
#define OAUTH2_FETCH_MS		10000
#define OAUTH2_WAIT_MS		15000
int	oauth2_tokens_ensure(struct oauth2_tokens *,
	    const struct policy_credential *c, char *why, size_t whylen);
/* Requests made to token endpoints so far (all entries). */
unsigned long	oauth2_tokens_fetches(struct oauth2_tokens *);

/*
 * Without blocking: where c's token stands. FRESH: use it; FETCHING: a
 * fetch is under way or queued (wait for the done callback); FAILED: the
 * last fetch failed and the back-off is running (ensure refuses at once);
 * STALE: a fetch is needed.
 */
enum oauth2_state {
	OAUTH2_FRESH,
	OAUTH2_FETCHING,
	OAUTH2_FAILED,
	OAUTH2_STALE
};
enum oauth2_state oauth2_tokens_state(struct oauth2_tokens *,
	    const struct policy_credential *c);
/*
 * Fetch c's token on the fetcher thread (one thread, started by the first
 * call; requests for an entry already queued or fetching are dropped).
 * pol is the policy c lives in: a reference is taken until the fetch is
 * done. 0, or -1 (no memory, no thread: the caller fetches itself).
 */
struct policy;
int	oauth2_tokens_fetch_async(struct oauth2_tokens *,
	    const struct policy_credential *c, struct policy *pol);
/*
 * done(arg) after every fetch (success or not), from the thread that
 * fetched, without the tokens' lock; NULL: none. Set before requests come.
 */
void	oauth2_tokens_on_done(struct oauth2_tokens *, void (*done)(void *),
	    void *arg);
/*
 * How a token endpoint's host name is resolved: the gateway's own resolver
 * (upstream.resolvers), not the C library's. Fills up to max addresses
 * (port set) before deadline_ms (CLOCK_MONOTONIC); their number, or -1
 * with why. Set before requests come; NULL: getaddrinfo(3).
 */
struct sockaddr_storage;
typedef int	(*oauth2_resolve_fn)(void *arg, const char *host, unsigned port,
		    struct sockaddr_storage *out, size_t max, uint64_t deadline_ms,
		    char *why, size_t whylen);
void	oauth2_tokens_on_resolve(struct oauth2_tokens *, oauth2_resolve_fn,
	    void *arg);
/* The fetcher thread stopped (joined) and no done callback from now on. */
void	oauth2_tokens_stop(struct oauth2_tokens *);

#endif
