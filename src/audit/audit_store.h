/*
 * The fleet store (audit.ship, docs/fleet.md and sandgate(8)): one PostgreSQL
 * table, sandgate.events, into which every gateway of a fleet copies its audit
 * rows keyed by (gateway, id). The shipper thread copies them in id order from
 * audit.db, which stays the durable record; the read side queries every
 * gateway's rows and verifies each gateway's chain there.
 */
#ifndef SG_AUDIT_STORE_H
#define SG_AUDIT_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <openssl/types.h>

#include "audit/audit_query.h"
#include "core/config.h"

#define AUDIT_STORE_VERSION	1	/* sandgate.meta schema_version */
#define AUDIT_GATEWAY_MAX	CONFIG_GATEWAY_MAX

/*
 * A postgresql:// or postgres:// URL that libpq can parse; 0, or -1 with
 * the reason in err.
 */
int	 audit_store_url_ok(const char *url, char *err, size_t errlen);
/*
 * `sandgate audit ship --init`: create the schema, or migrate an older one,
 * in one transaction under an advisory lock (several hosts may run it at
 * once). 0 with what was done in msg, -1 with the error in msg.
 */
int	 audit_store_init(const char *url, char *msg, size_t msglen);
/*
 * The rows of every gateway (or of gateway when not NULL) that match f, in
 * a format, with a gateway column. The number printed, or -1 with err.
 */
int64_t	 audit_store_query(const char *url, const char *gateway,
	    const struct audit_filter *f, enum audit_format, FILE *out,
	    char *err, size_t errlen);
/*
 * The same rows handed to cb one by one (values valid during the call; gw
 * the row's gateway); cb returns non-zero to stop. The number handed, or
 * -1 with err. `policy replay --store`.
 */
int64_t	 audit_store_rows(const char *url, const char *gateway,
	    const struct audit_filter *f,
	    int (*cb)(const struct audit_val row[AUDIT_NCOLS],
	    const struct audit_val *gw, void *arg), void *arg,
	    char *err, size_t errlen);
/*
 * Verify each gateway's chain in the store (or gateway's when not NULL),
 * in one snapshot, each checkpoint with the key among pubs that it names:
 * a summary per intact gateway to out, one line per broken one to errf.
 * 0 all intact; 1 a chain is broken; -1 could not read (err).
 */
int	 audit_store_verify(const char *url, const char *gateway,
	    EVP_PKEY *const *pubs, int npubs, FILE *out, FILE *errf, char *err,
	    size_t errlen);

/* The shipper. */
struct audit_ship;
struct audit_ship_stats {
	int		connected;	/* to the store now */
	int		halted;		/* stopped: the store holds another chain */
	int		cursor_known;	/* connected at least once since start */
	int64_t		shipped_id;	/* highest id the store holds for us */
	uint64_t	backlog_rows;	/* rows of audit.db not in the store yet */
	double		backlog_seconds;	/* age of the oldest of them */
	uint64_t	rows_shipped;
	uint64_t	batches;
	uint64_t	failures;	/* connections or batches that failed */
};
/*
 * Open audit.db read-only (call after audit_open created it) and start the
 * thread. NULL with *errstr.
 */
struct audit_ship *audit_ship_start(const char *db_path, const char *url,
	    const char *gateway, const char **errstr);
/*
 * After audit_close: ship what is left for up to 2 s, then stop the thread
 * (what is still not shipped waits in audit.db for the next start).
 */
void	 audit_ship_stop(struct audit_ship *);
void	 audit_ship_get_stats(struct audit_ship *, struct audit_ship_stats *);

#endif
