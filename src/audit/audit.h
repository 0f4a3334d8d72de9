/*
 * The audit log (docs/audit.md): event loops hand rows to one writer thread
 * through a bounded queue; the writer batches them into SQLite (WAL) with a
 * SHA-256 hash chain, and signs the chain's head in checkpoint rows through
 * a signer that holds the key. No event-loop thread ever touches SQLite.
 * When the database cannot take rows (a full disk, an I/O error) the writer
 * keeps them queued, retries, and says so (audit_refuses) until it can.
 */
#ifndef SG_AUDIT_H
#define SG_AUDIT_H

#include "core/reason.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
	enum sg_verdict	 decision;	/* its word in the row; NONE: NULL */
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
	/*
	 * audit.on_failure: 0 deny (audit_refuses says 1 while rows cannot
	 * be written), 1 allow (it never does; the writer only warns).
	 */
	int			 on_failure_allow;
	/*
	 * audit.syslog: forward every row written from now on (audit_syslog.h)
	 * to this collector; syslog_addrlen 0: off.
	 */
	struct sockaddr_storage	 syslog_addr;
	socklen_t		 syslog_addrlen;
	int			 syslog_json;	/* 0: RFC 5424 structured data */
	int			 syslog_udp;	/* 0: TCP with octet counting */
};

/*
 * Open (creating or migrating) the database and start the writer thread.
 * params NULL: keep everything, no checkpoints. NULL on error with a static
 * message in *errstr.
 */
struct audit	*audit_open(const char *db_path, const struct audit_params *,
		    const char **errstr);
/*
 * Queue one row. When the queue is full the caller waits until the writer
 * makes room (counted as a stall) -- except while the database cannot be
 * written: then the row is dropped and counted, so that no event loop waits
 * for as long as a disk stays full. 0 queued; -1 dropped, or after
 * audit_close began.
 */
int		 audit_submit(struct audit *, const struct audit_event *);
/*
 * 1 when new requests are to be refused now: a write of rows failed, none
 * has succeeded since, and on_failure is deny. One relaxed atomic load, for
 * every new request on every event loop. 0 for NULL.
 */
int		 audit_refuses(const struct audit *);
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
	int		unavailable;	/* rows cannot be written now */
	uint64_t	unavailable_episodes;	/* times it became so */
	uint64_t	write_failures;	/* transactions of rows that failed */
	uint64_t	rows_dropped;	/* queue full while unavailable */
	size_t		rows_waiting;	/* queued, or in the transaction being tried */
	uint64_t	syslog_sent;	/* rows audit.syslog forwarded */
	int64_t		syslog_last_id;	/* ... the last of them */
};
void		 audit_get_stats(struct audit *, struct audit_stats *);
/* How long its transactions of rows took, retries included (core/stats.h). */
struct sg_hist;
struct sg_hist	*audit_write_hist(struct audit *);

#endif
