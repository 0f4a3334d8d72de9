/*
 * The credential vault (docs/credentials.md): secrets sealed with AES-256-GCM
 * in vault.db under the key in vault.key, placeholders, and the two places a
 * secret value is ever handled — swapping it into a request header and
 * scrubbing it out of a response. No other module sees a secret value.
 */
#ifndef SG_VAULT_H
#define SG_VAULT_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct vault;

#define VAULT_NAME_MAX		64	/* [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
#define VAULT_VALUE_MAX		16384
#define VAULT_PLACEHOLDER_PREFIX "sg-ph-"

/*
 * Open vault.db (created with mode 0600 if missing) and the key file.
 * create_key: create a 256-bit key (0600) when the file is missing.
 * Refuses a key file that group or others can read. NULL with *errstr.
 */
struct vault	*vault_open(const char *db_path, const char *key_file,
		    int create_key, const char **errstr);
void		 vault_close(struct vault *);

/*
 * Store a value under name (fresh random 96-bit nonce, name as AAD).
 * rotate: the entry must exist and its rotated time is set; otherwise it
 * must not exist unless replace. 0 or -1 with *errstr.
 */
int		 vault_set(struct vault *, const char *name, const void *value,
		    size_t len, int rotate, const char **errstr);
/*
 * Read a value from fd (stdin: to end of file, or one line from a terminal,
 * not echoed) into memory this module locks and wipes, and store it as
 * vault_set() does. 0, or one of the VAULT_INPUT_* codes (*errstr says why
 * for ERROR and STORE).
 */
#define VAULT_INPUT_ERROR	(-1)	/* reading failed */
#define VAULT_INPUT_EMPTY	(-2)	/* nothing but a newline */
#define VAULT_INPUT_TOO_LONG	(-3)	/* over VAULT_VALUE_MAX */
#define VAULT_INPUT_STORE	(-4)	/* vault_set refused it */
int		 vault_set_from_fd(struct vault *, const char *name, int fd,
		    int mode, const char **errstr);
int		 vault_rm(struct vault *, const char *name, const char **errstr);

struct vault_entry_info {
	char		name[VAULT_NAME_MAX + 1];
	int64_t		created;	/* Unix seconds */
	int64_t		rotated;	/* 0: never */
	int64_t		version;	/* bumped by every set/rotate */
};
/* Calls cb for every entry in name order; never exposes values. */
int		 vault_list(struct vault *,
		    void (*cb)(const struct vault_entry_info *, void *), void *arg,
		    const char **errstr);
/*
 * Check that name opens (authentic under the key and its own name);
 * 0, or -1 with *errstr ("entry X does not open: tampered or wrong key").
 */
int		 vault_check(struct vault *, const char *name, const char **errstr);

/*
 * A random placeholder: VAULT_PLACEHOLDER_PREFIX + 32 characters of
 * base32 (160 bits). out must hold at least VAULT_PLACEHOLDER_LEN + 1.
 */
#define VAULT_PLACEHOLDER_LEN	(sizeof(VAULT_PLACEHOLDER_PREFIX) - 1 + 32)
void		 vault_placeholder_new(char *out);
/*
 * A shaped placeholder (a credential's placeholder_shape): prefix, then
 * len - strlen(prefix) characters drawn uniformly from alphabet (at most
 * 64 distinct characters) by a CSPRNG. out must hold len + 1.
 */
void		 vault_placeholder_shaped(char *out, const char *prefix,
		    size_t len, const char *alphabet);

/*
 * Secrets loaded for the gateway: a snapshot of the values it needs,
 * in wiped memory, swapped whole when the vault changes (rotation takes
 * effect for new requests). Thread-safe, reference-counted.
 */
struct vault_snapshot;
struct vault_snapshot *vault_snapshot_load(struct vault *, const char *const *names,
		    size_t n, const char **errstr);
void		 vault_snapshot_ref(struct vault_snapshot *);
void		 vault_snapshot_unref(struct vault_snapshot *);
/*
 * A new snapshot: src's entries, and for each of names (aws_sigv4 secrets,
 * KEYID:SECRET[:TOKEN]) its fields as entries of their own, named name
 * VAULT_PART_ID, ..._KEY, ..._TOKEN. bad[i] is 1 when names[i] is held but
 * not in that form. NULL: no memory.
 */
#define VAULT_PART_ID		"#id"
#define VAULT_PART_KEY		"#key"
#define VAULT_PART_TOKEN	"#token"
struct vault_snapshot *vault_snapshot_with_parts(const struct vault_snapshot *src,
		    const char *const *names, size_t n, int *bad);
/* The value of entry name (a part too); NULL when it has none. */
const unsigned char *vault_snapshot_value(const struct vault_snapshot *,
		    const char *name, size_t *len);
/* 1 when the snapshot holds name. */
int		 vault_snapshot_has(const struct vault_snapshot *, const char *name);

/*
 * A buffer for bytes that will carry a secret to an origin: the request
 * head is built in it, whole, and handed to the origin's output by
 * reference, so that no other copy of the swapped head exists in the
 * gateway's memory. It starts on the heap; the first secret written into it
 * moves it into memory locked out of swap and left out of core dumps. Its
 * memory is wiped (OPENSSL_cleanse) whenever it is let go: when it grows,
 * when libevent has drained the last byte of it (TLS: after SSL_write took
 * it), and when it is freed unsent. A write that fails marks the buffer
 * failed; then vault_wbuf_hand refuses it.
 */
struct vault_wbuf;
struct vault_wbuf *vault_wbuf_new(void);
void		 vault_wbuf_free(struct vault_wbuf *);
int		 vault_wbuf_add(struct vault_wbuf *, const void *, size_t);
int		 vault_wbuf_printf(struct vault_wbuf *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
/*
 * Append the buffer to out by reference (evbuffer_add_reference): 0 and out
 * owns it now (an empty buffer is just freed), or -1 (failed, or no memory)
 * and it is still the caller's to free.
 */
int		 vault_wbuf_hand(struct vault_wbuf *, struct evbuffer *out);

/*
 * Request side. In value[0..len) (a header value, or a query string when
 * query is 1), find placeholder; append the value with every occurrence
 * replaced by the secret of entry `secret` to out. Handles the placeholder
 * inside "Basic base64(user:pass)" (decode, swap, re-encode) and "Bearer X";
 * in a query string the secret is percent-encoded. A Basic token is swapped
 * only when it is canonical base64 (RFC 4648 §4, padded) and is written out
 * canonical again, whatever the lengths; a token that holds the placeholder
 * spelled any other way is refused. Returns the number of replacements (0:
 * nothing written, value goes out as it is), or -1 (entry missing, a secret
 * that would break the header, a refused Basic token; nothing written).
 */
int		 vault_swap(const struct vault_snapshot *, const char *secret,
		    const char *placeholder, const char *value, size_t len,
		    int query, struct vault_wbuf *out);
/*
 * 1 when value[0..len) contains placeholder, also inside Basic credentials
 * decoded as loosely as any origin might (either alphabet, padding optional,
 * other bytes skipped).
 */
int		 vault_contains_placeholder(const char *placeholder,
		    const char *value, size_t len);
/*
 * When value[0..len) is "Basic <token>": 1 and the token decoded that same
 * loose way into *out (*outlen bytes; the caller frees it). 0 when it is
 * not; -1 out of memory.
 */
int		 vault_basic_loose(const char *value, size_t len,
		    unsigned char **out, size_t *outlen);

/*
 * Response side: a streaming scrubber that replaces each listed secret —
 * raw, base64 (any alignment), base64url, percent-encoded, JSON-escaped —
 * with its placeholder (in the same encoding), across feed boundaries. It
 * holds back at most the longest pattern minus one byte.
 */
struct vault_scrubber;
struct vault_scrubber *vault_scrubber_new(const struct vault_snapshot *,
		    const char *const *secrets, const char *const *placeholders,
		    size_t n);
/* Move all of in through the scrubber to out (out gets what is safe so far). */
int		 vault_scrub(struct vault_scrubber *, struct evbuffer *in,
		    struct evbuffer *out);
/* End of the stream: flush what was held back. */
int		 vault_scrub_finish(struct vault_scrubber *, struct evbuffer *out);
void		 vault_scrubber_free(struct vault_scrubber *);
/* Scrub one complete string (a response header value) into out. */
int		 vault_scrub_string(const struct vault_snapshot *,
		    const char *const *secrets, const char *const *placeholders,
		    size_t n, const char *s, size_t len, struct evbuffer *out);

/*
 * Request side, detection only: a streaming search for the listed secrets
 * in every encoding the scrubber knows (raw, base64 and base64url at each
 * alignment, percent, JSON escapes), across feed boundaries, keeping no
 * bytes. Only secrets[i] with watch[i] != 0 count as found; the automaton
 * is shared by every seeker of the same list. NULL: a secret missing, or
 * no memory.
 */
struct vault_seeker;
struct vault_seeker *vault_seeker_new(const struct vault_snapshot *,
		    const char *const *secrets, const int *watch, size_t n);
/* 1 once a watched secret has ended in what was fed (sticky), else 0. */
int		 vault_seek(struct vault_seeker *, const void *p, size_t n);
/* A new, independent stream. */
void		 vault_seeker_reset(struct vault_seeker *);
void		 vault_seeker_free(struct vault_seeker *);

/*
 * Added by the vault implementation (after the interface above): the values
 * of vault_set()'s `rotate` argument, naming the "unless replace" its
 * comment speaks of. 0 and 1 keep their meaning.
 */
#define VAULT_SET_NEW		0	/* the entry must not exist yet */
#define VAULT_SET_ROTATE	1	/* it must exist; its rotated time is set */
#define VAULT_SET_REPLACE	2	/* either; created and rotated kept */

#endif
