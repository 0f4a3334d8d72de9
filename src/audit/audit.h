/*
 * The audit log (SPEC §8): event loops hand rows to one writer thread
 * through a bounded queue; the writer batches them into SQLite (WAL) with a
 * SHA-256 hash chain, and signs the chain's head in checkpoint rows through
 * a signer that holds the key. No event-loop thread ever touches SQLite.
 */
#ifndef SG_AUDIT_H
#define SG_AUDIT_H

#include <stddef.h>
#include <stdint.h>

struct audit;

/*
 * One decision. Strings may be NULL (stored as NULL); numbers use -1 for
 * "absent" (port, status, bytes_up, bytes_down, duration_ms, asn are NULL
 * in the row then). ts_ms is Unix time in milliseconds; 0 means "now".
 * audit_submit() copies everything: the caller's memory is not kept.
 */
struct audit_event {
	int64_t		 ts_ms;
	const char	*sandbox;
	const char	*kind;		/* http|connect|socks5|dns|transparent|ingress|admin|vault */
	const char	*client;	/* addr:port */
	const char	*host;
	const char	*ip;
	int		 port;
	const char	*country;
	int64_t		 asn;
	const char	*method;
	const char	*path;
	int		 status;
	const char	*decision;	/* allow|deny|error */
	const char	*rule;
	const char	*reason;
	const char	*credential;
	int64_t		 bytes_up;
	int64_t		 bytes_down;
	int64_t		 duration_ms;
};

#define AUDIT_SIG_LEN		64	/* an Ed25519 signature */
#define AUDIT_PUBKEY_LEN	32	/* an Ed25519 public key */

/*
 * Whoever holds the checkpoint key: today the daemon's own (vault/ca.h,
 * ca_audit_sign), later a separate key-holding process. sign() writes the
 * Ed25519 signature of msg with the key whose public half is public_key;
 * 0, or -1 (the checkpoint is retried at the next interval). It is called
 * only from the writer thread, and ctx must live until audit_close returns.
 */
struct audit_signer {
	int		(*sign)(void *ctx, const uint8_t *msg, size_t len,
			    uint8_t sig[AUDIT_SIG_LEN]);
	void		*ctx;
	uint8_t		 public_key[AUDIT_PUBKEY_LEN];
};

struct audit_params {
	uint64_t		 retention_s;	/* 0: keep everything */
	/*
	 * A checkpoint row signs the chain head this often when rows were
	 * added since the last one, and once at audit_close; 0: only at
	 * audit_close. No checkpoints at all when signer.sign is NULL.
	 */
	uint64_t		 checkpoint_ms;
	struct audit_signer	 signer;
};

/*
 * Open (creating or migrating) the database and start the writer thread.
 * params NULL: keep everything, no checkpoints. NULL on error with a static
 * message in *errstr.
 */
struct audit	*audit_open(const char *db_path, const struct audit_params *,
		    const char **errstr);
/*
 * Queue one row. Never drops: when the queue is full the caller waits until
 * the writer makes room (counted as a stall). 0, or -1 after audit_close began.
 */
int		 audit_submit(struct audit *, const struct audit_event *);
/*
 * Flush every queued row, write the shutdown checkpoint, stop the writer,
 * close the database.
 */
void		 audit_close(struct audit *);

struct audit_stats {
	uint64_t	rows_written;
	uint64_t	checkpoints;	/* checkpoint rows written */
	uint64_t	checkpoint_failures;	/* the signer or the database failed */
	uint64_t	stalls;		/* producers that had to wait for room */
	size_t		queue_high_water;
	double		batch_ms_max;	/* slowest transaction */
	double		batch_ms_avg;
};
void		 audit_get_stats(struct audit *, struct audit_stats *);

#endif
