/*
 * What the two files of `sandgate top` share: cmd_top_data.c reads the
 * audit log and the gateway's published state into a struct top, and
 * cmd_top.c draws it (ncurses, or one text snapshot with --once).
 */
#ifndef SG_CMD_TOP_H
#define SG_CMD_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "audit/audit_query.h"

#define TOP_FEED_MAX	2000	/* rows kept for the feed */
#define TOP_BACKFILL	200	/* rows already in the log shown at start */
#define TOP_SANDBOXES	256	/* rows of the table; the rest under "other" */
#define TOP_TEXT_MAX	2048	/* bytes of one field kept (before escaping) */

/*
 * One audit row as top shows it: every column as printable ASCII (bytes
 * outside 0x20..0x7e and the backslash escaped as \xNN, as log_escape
 * does), NULL for an SQL NULL. The terminal never sees a raw byte of it.
 */
struct top_row {
	int64_t	 id;
	int64_t	 bytes_up, bytes_down;	/* 0 for NULL or -1 */
	char	*v[AUDIT_NCOLS];
};

struct top_sandbox {
	char	 name[128];		/* escaped; "-" for rows without one */
	uint64_t total, denied, errors;
	uint64_t up, down;
	uint64_t iv_total, iv_denied;	/* in the interval being counted */
	double	 rate, deny_rate;	/* per second over the last interval */
	long long open;			/* connections open now (/metrics); -1: unknown */
};

/* What the gateway publishes (admin API, /metrics); -1 for unknown. */
#define TOP_QUESTIONS	16	/* pending questions of mode: ask shown */

/* A question held requests wait on (GET /v1/approvals), escaped. */
struct top_question {
	long long	 id;
	char		 sandbox[64];
	char		 dest[280];
	long long	 waiting;
	long long	 expires_s;
};

struct top_gateway {
	int	 admin_ok;
	char	 admin_msg[160];	/* why not, when !admin_ok */
	char	 version[32];
	long long workers, connections, refused, keeper_up, rows_written;
	long long uptime;		/* seconds; -1: unknown */
	int	 metrics_ok;
	char	 metrics_msg[160];
	long long tunnels;
};

enum top_decision { TOP_DEC_ALL, TOP_DEC_ALLOW, TOP_DEC_DENY,
	TOP_DEC_REPORT, TOP_DEC_ERROR, TOP_DEC_N };
extern const char *const top_decision_names[TOP_DEC_N];

/* The feed's filters: substrings (case-insensitive), a decision. */
struct top_filter {
	char		 sandbox[64];
	char		 host[128];
	enum top_decision decision;
};

struct top {
	/* where to read */
	char			*db_path;
	char			*admin_path;	/* NULL: no admin socket */
	struct sockaddr_storage	 metrics_ss;
	socklen_t		 metrics_len;	/* 0: no metrics listener */
	/* the audit log */
	struct sqlite3		*db;
	char			 db_msg[256];	/* why it cannot be read */
	int64_t			 after;		/* last row id read */
	int			 started;	/* backfill done */
	/* the feed: oldest first, feed[n_feed - 1] the newest */
	struct top_row		*feed[TOP_FEED_MAX];
	size_t			 n_feed;
	uint64_t		 rows_read;	/* since top started */
	/* the table */
	struct top_sandbox	 sb[TOP_SANDBOXES];
	size_t			 n_sb;
	double			 iv_start;	/* monotonic s of the interval's start */
	struct top_gateway	 gw;
	/* mode: ask: the oldest pending questions, and how many in all */
	struct top_question	 q[TOP_QUESTIONS];
	size_t			 n_q, n_q_all;
};

/* Paths and addresses from the config; 0, or 1 after printing an error. */
int	top_init(struct top *, const char *cfg_path);
void	top_free(struct top *);
/*
 * Read the rows committed since the last call (the newest TOP_BACKFILL
 * rows on the first, into the feed only), count them by sandbox, and close
 * the interval: rates are its counts over its length. Never blocks on the
 * gateway: the database is read in a read transaction of WAL.
 */
void	top_poll_audit(struct top *);
/* Ask the admin API and /metrics, each with a short timeout. */
void	top_poll_gateway(struct top *);
/* Answer pending question id (approve 1, deny 0) over the admin API: 0 or -1. */
int	top_answer(struct top *, long long id, int approve);
void	top_question_line(const struct top_question *, char *buf, size_t len);

int	top_row_matches(const struct top_row *, const struct top_filter *);
/* "12.3k", "4.5M": n in at most 6 characters. */
void	top_human(uint64_t n, char *buf, size_t len);
/* One feed line: time, sandbox, decision, kind, host:port, method path, reason. */
void	top_feed_line(const struct top_row *, char *buf, size_t len);
/* The header line. */
void	top_header_line(const struct top *, char *buf, size_t len);
/* The table's column titles, and one sandbox's line. */
void	top_table_title(char *buf, size_t len);
void	top_table_line(const struct top_sandbox *, char *buf, size_t len);
/* --once: header, table and the newest rows of the feed, as text. */
void	top_print_snapshot(const struct top *, const struct top_filter *,
	    FILE *);

/*
 * Pure: the sum of every sample of metric family name in Prometheus text
 * (samples "name value" and "name{labels} value"); the number of samples
 * found, 0 when none.
 */
int	top_metric_sum(const char *text, size_t len, const char *name,
	    double *sum);
/*
 * Pure: each sample of family name with a label of that name, as
 * cb(its value, the sample's number): the value unescaped only if it needs
 * no unescaping (a value with a backslash is skipped), at most 127 bytes.
 * The number of samples passed on.
 */
int	top_metric_each(const char *text, size_t len, const char *name,
	    const char *label, void (*cb)(const char *value, double v, void *),
	    void *arg);
/*
 * Pure: an HTTP/1.x answer read to its end: its status and where its body
 * starts (after the blank line). 0, or -1 when it is not one.
 */
int	top_http_split(const char *buf, size_t len, int *status,
	    size_t *body_off);

#endif
