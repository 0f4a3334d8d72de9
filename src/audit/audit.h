/*
 * The audit log (SPEC §8): event loops hand rows to one writer thread
 * through a bounded queue; the writer batches them into SQLite (WAL) with a
 * SHA-256 hash chain. No event-loop thread ever touches SQLite.
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

/*
 * Open (creating or migrating) the database and start the writer thread.
 * retention_s 0: keep everything. NULL on error with a static message in *errstr.
 */
struct audit	*audit_open(const char *db_path, uint64_t retention_s,
		    const char **errstr);
/*
 * Queue one row. Never drops: when the queue is full the caller waits until
 * the writer makes room (counted as a stall). 0, or -1 after audit_close began.
 */
int		 audit_submit(struct audit *, const struct audit_event *);
/* Flush every queued row, stop the writer, close the database. */
void		 audit_close(struct audit *);

struct audit_stats {
	uint64_t	rows_written;
	uint64_t	stalls;		/* producers that had to wait for room */
	size_t		queue_high_water;
	double		batch_ms_max;	/* slowest transaction */
	double		batch_ms_avg;
};
void		 audit_get_stats(struct audit *, struct audit_stats *);

#endif
