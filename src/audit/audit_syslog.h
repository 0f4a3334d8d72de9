/*
 * audit.syslog (audit_syslog.c): a thread that follows the audit log by
 * row id on its own read-only connection and sends every row to a syslog
 * collector -- RFC 5424 with the row as structured data, or the row as a
 * JSON message -- over TCP with octet counting (RFC 6587) or UDP. It
 * reads what the writer committed, so it never slows the writer or an
 * event loop; a collector that is down delays forwarding, loses nothing
 * (TCP), and the rows wait in audit.db. Used by audit.c only.
 */
#ifndef SG_AUDIT_SYSLOG_H
#define SG_AUDIT_SYSLOG_H

#include <stdint.h>
#include <sys/socket.h>

#include "audit/audit_query.h"

struct audit_syslog;

struct audit_syslog_params {
	struct sockaddr_storage	 addr;
	socklen_t		 addrlen;
	int			 json;		/* 0: RFC 5424 structured data */
	int			 udp;		/* 0: TCP, octet counting */
};

/* Start after row after_id. NULL with *errstr when the thread cannot start. */
struct audit_syslog *audit_syslog_start(const char *db_path, int64_t after_id,
	    const struct audit_syslog_params *, const char **errstr);
/*
 * Forward the rows committed so far (for at most a few seconds while the
 * collector does not take them), then stop and free.
 */
void	audit_syslog_stop(struct audit_syslog *);
/* Rows sent so far, and the last id sent (tests, stats). */
uint64_t audit_syslog_sent(struct audit_syslog *, int64_t *last_id);

/*
 * Pure: one row as a syslog message (without framing) into buf; the
 * length it needs (may exceed len: then buf holds a prefix).
 */
size_t	audit_syslog_format(const struct audit_val row[AUDIT_NCOLS], int json,
	    const char *hostname, int pid, char *buf, size_t len);

#endif
