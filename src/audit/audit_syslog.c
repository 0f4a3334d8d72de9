/*
 * The syslog forwarder (audit_syslog.h): one thread, one read-only
 * SQLite connection, one socket. It polls for rows after the last one
 * sent, formats each (RFC 5424 structured data, or the row's JSON as the
 * message), and sends it; a failed send closes the socket and the same
 * row is tried again on a new one, with a backoff, so no row is skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <sqlite3.h>

#include "audit/audit_int.h"
#include "audit/audit_syslog.h"
#include "core/log.h"

#define SYSLOG_BATCH		500
#define SYSLOG_POLL_MS		100
#define SYSLOG_BACKOFF_MAX_MS	5000
#define SYSLOG_DRAIN_MS		3000	/* at stop, while the collector is down */
#define SYSLOG_MSG_MAX		(64 * 1024)
#define SYSLOG_SD_ID		"sandgate@32473"	/* RFC 5612's example PEN */
#define SYSLOG_FACILITY		13			/* log audit */

struct audit_syslog {
	struct audit_syslog_params prm;
	char			*db_path;
	sqlite3			*db;
	int			 fd;
	int64_t			 after;
	char			 host[256];
	int			 pid;
	pthread_t		 thread;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 stopping;
	atomic_uint_fast64_t	 sent;
	atomic_int_fast64_t	 last_id;
	int			 logged_down;
	char			*buf;
};

/* ------------------------------------------------------------- format */

struct fbuf {
	char	*p;
	size_t	 len, cap;
};

static void
fb_putc(struct fbuf *b, char c)
{
	if (b->len + 1 < b->cap)
		b->p[b->len] = c;
	b->len++;
}

static void
fb_puts(struct fbuf *b, const char *s)
{
	while (*s)
		fb_putc(b, *s++);
}

/* SD-PARAM value: printable ASCII, '"', '\' and ']' escaped (RFC 5424 6.3.3). */
static void
fb_sdval(struct fbuf *b, const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (p[i] == '"' || p[i] == '\\' || p[i] == ']')
			fb_putc(b, '\\');
		fb_putc(b, p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?');
	}
}

static int
severity_of(const struct audit_val *decision)
{
	static const struct { const char *w; int sev; } m[] = {
		{ "allow", 6 }, { "report", 5 }, { "deny", 4 }, { "error", 3 },
	};
	size_t i;

	for (i = 0; decision->type == AUDIT_V_TEXT && i < 4; i++)
		if (decision->len == strlen(m[i].w) &&
		    memcmp(decision->p, m[i].w, decision->len) == 0)
			return m[i].sev;
	return 5;
}

size_t
audit_syslog_format(const struct audit_val row[AUDIT_NCOLS], int json,
    const char *hostname, int pid, char *buf, size_t len)
{
	static const int msg_cols[] = { AUDIT_COL_DECISION, AUDIT_COL_KIND,
	    AUDIT_COL_HOST, AUDIT_COL_REASON };
	struct fbuf b = { buf, 0, len };
	char num[128], *js = NULL;
	size_t jl = 0, i, k;
	FILE *mem;
	int c;

	snprintf(num, sizeof(num), "<%d>1 ", SYSLOG_FACILITY * 8 +
	    severity_of(&row[AUDIT_COL_DECISION]));
	fb_puts(&b, num);
	if (row[AUDIT_COL_TS].type == AUDIT_V_TEXT)
		fb_sdval(&b, row[AUDIT_COL_TS].p, row[AUDIT_COL_TS].len);
	else
		fb_putc(&b, '-');
	snprintf(num, sizeof(num), " %.64s sandgate %d audit ",
	    hostname[0] ? hostname : "-", pid);
	fb_puts(&b, num);
	if (json) {
		/* The row exactly as `audit export` prints it. */
		fb_putc(&b, '-');
		fb_putc(&b, ' ');
		if ((mem = open_memstream(&js, &jl)) != NULL) {
			audit_write_json(mem, row);
			fclose(mem);
			for (i = 0; i < jl && js[i] != '\n'; i++)
				fb_putc(&b, js[i]);
			free(js);
		}
	} else {
		fb_puts(&b, "[" SYSLOG_SD_ID);
		for (c = 0; c < AUDIT_NCOLS; c++) {
			const struct audit_val *v = &row[c];

			if (c == AUDIT_COL_TS || c == AUDIT_COL_PREV_HASH ||
			    v->type == AUDIT_V_NULL)
				continue;
			fb_putc(&b, ' ');
			fb_puts(&b, audit_col_names[c]);
			fb_puts(&b, "=\"");
			if (v->type == AUDIT_V_INT) {
				snprintf(num, sizeof(num), "%" PRId64, v->i);
				fb_puts(&b, num);
			} else if (v->type == AUDIT_V_TEXT)
				fb_sdval(&b, v->p, v->len);
			fb_putc(&b, '"');
		}
		fb_puts(&b, "] ");
		/*
		 * A short message for people reading the collector's files,
		 * in the documented order: DECISION KIND HOST REASON.
		 */
		for (k = 0; k < sizeof(msg_cols) / sizeof(msg_cols[0]); k++) {
			c = msg_cols[k];
			if (row[c].type == AUDIT_V_TEXT)
				fb_sdval(&b, row[c].p, row[c].len);
			else
				fb_putc(&b, '-');
			if (c != AUDIT_COL_REASON)
				fb_putc(&b, ' ');
		}
	}
	if (b.cap > 0)
		b.p[b.len < b.cap ? b.len : b.cap - 1] = '\0';
	return b.len;
}

/* ------------------------------------------------------------- thread */

static void
fs_close(struct audit_syslog *s)
{
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

static int
fs_connect(struct audit_syslog *s)
{
	int fd;

	if (s->fd != -1)
		return 0;
	fd = socket(s->prm.addr.ss_family, (s->prm.udp ? SOCK_DGRAM :
	    SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&s->prm.addr, s->prm.addrlen) ==
	    -1) {
		close(fd);
		return -1;
	}
	s->fd = fd;
	return 0;
}

static int
send_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = send(fd, p, n, MSG_NOSIGNAL);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One row: format, frame, send. 0, or -1 (the socket is closed). */
static int
send_row(struct audit_syslog *s, const struct audit_val *row)
{
	char hdr[24];
	size_t n;
	int hl;

	n = audit_syslog_format(row, s->prm.json, s->host, s->pid, s->buf,
	    SYSLOG_MSG_MAX);
	if (n >= SYSLOG_MSG_MAX)
		n = SYSLOG_MSG_MAX - 1;	/* cut: a path can be long */
	if (fs_connect(s) == -1)
		return -1;
	if (s->prm.udp) {
		if (send(s->fd, s->buf, n, MSG_NOSIGNAL) == -1) {
			fs_close(s);
			return -1;
		}
		return 0;
	}
	hl = snprintf(hdr, sizeof(hdr), "%zu ", n);
	if (send_all(s->fd, hdr, (size_t)hl) == -1 ||
	    send_all(s->fd, s->buf, n) == -1) {
		fs_close(s);
		return -1;
	}
	return 0;
}

/* Rows after s->after, sent in order. 1: some sent; 0: none new; -1: send failed. */
static int
forward_batch(struct audit_syslog *s)
{
	struct audit_filter f;
	struct audit_sql q;
	struct audit_val row[AUDIT_NCOLS];
	sqlite3_stmt *st = NULL;
	const char *errstr;
	char err[256];
	int rc, c, n = 0, ret = 0;

	if (s->db == NULL && (s->db = audit_db_open_ro(s->db_path, err,
	    sizeof(err))) == NULL)
		return 0;
	memset(&f, 0, sizeof(f));
	f.after_id = s->after;
	f.by_id = 1;
	f.asc = 1;
	f.limit = SYSLOG_BATCH;
	if (audit_build_select(&f, &q, &errstr) == -1 ||
	    (st = audit_prepare(s->db, q.text, err, sizeof(err))) == NULL ||
	    audit_bind_sql(st, &q) != SQLITE_OK) {
		sqlite3_finalize(st);
		return 0;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < AUDIT_NCOLS; c++)
			audit_val_from_stmt(st, c, &row[c]);
		if (send_row(s, row) == -1) {
			ret = -1;
			break;
		}
		s->after = row[AUDIT_COL_ID].i;
		atomic_store(&s->last_id, s->after);
		atomic_fetch_add(&s->sent, 1);
		n++;
	}
	sqlite3_finalize(st);
	if (ret == 0 && s->logged_down && n > 0) {
		log_info("audit.syslog: %s again", "forwarding");
		s->logged_down = 0;
	}
	return ret == -1 ? -1 : n > 0;
}

/* Sleep ms, or until stop; returns 1 when stopping. */
static int
nap(struct audit_syslog *s, long ms)
{
	struct timespec ts;
	int stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mtx);
	if (!s->stopping)
		(void)pthread_cond_timedwait(&s->cv, &s->mtx, &ts);
	stop = s->stopping;
	pthread_mutex_unlock(&s->mtx);
	return stop;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000 + ts.tv_nsec / 1e6;
}

static void *
syslog_thread(void *arg)
{
	struct audit_syslog *s = arg;
	long backoff = SYSLOG_POLL_MS;
	double drain_until = 0;
	int r, stop = 0;

	for (;;) {
		r = forward_batch(s);
		if (r == -1) {
			if (!s->logged_down) {
				log_warn("audit.syslog: cannot send to the "
				    "collector; rows wait in audit.db");
				s->logged_down = 1;
			}
			if (stop && now_ms() > drain_until)
				break;
			if (stop)
				usleep(100 * 1000);	/* nap() no longer waits */
			else
				stop = nap(s, backoff);
			backoff = backoff * 2 > SYSLOG_BACKOFF_MAX_MS ?
			    SYSLOG_BACKOFF_MAX_MS : backoff * 2;
			if (stop && drain_until == 0)
				drain_until = now_ms() + SYSLOG_DRAIN_MS;
			continue;
		}
		backoff = SYSLOG_POLL_MS;
		if (r == 1)
			continue;
		/* Nothing new: after a stop, one more look, then done. */
		if (stop)
			break;
		if (nap(s, SYSLOG_POLL_MS)) {
			stop = 1;
			drain_until = now_ms() + SYSLOG_DRAIN_MS;
		}
	}
	return NULL;
}

struct audit_syslog *
audit_syslog_start(const char *db_path, int64_t after_id,
    const struct audit_syslog_params *prm, const char **errstr)
{
	struct audit_syslog *s;
	pthread_condattr_t ca;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->db_path = strdup(db_path)) == NULL ||
	    (s->buf = malloc(SYSLOG_MSG_MAX)) == NULL) {
		if (s != NULL) {
			free(s->db_path);
			free(s);
		}
		*errstr = "out of memory";
		return NULL;
	}
	s->prm = *prm;
	s->fd = -1;
	s->after = after_id;
	s->pid = (int)getpid();
	if (gethostname(s->host, sizeof(s->host) - 1) == -1)
		s->host[0] = '\0';
	s->host[strcspn(s->host, " \t\r\n")] = '\0';
	atomic_init(&s->sent, 0);
	atomic_init(&s->last_id, after_id);
	pthread_mutex_init(&s->mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->thread, NULL, syslog_thread, s) != 0) {
		pthread_mutex_destroy(&s->mtx);
		pthread_cond_destroy(&s->cv);
		free(s->buf);
		free(s->db_path);
		free(s);
		*errstr = "cannot start the syslog thread";
		return NULL;
	}
	return s;
}

void
audit_syslog_stop(struct audit_syslog *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mtx);
	s->stopping = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mtx);
	pthread_join(s->thread, NULL);
	fs_close(s);
	if (s->db != NULL)
		sqlite3_close(s->db);
	pthread_mutex_destroy(&s->mtx);
	pthread_cond_destroy(&s->cv);
	free(s->buf);
	free(s->db_path);
	free(s);
}

uint64_t
audit_syslog_sent(struct audit_syslog *s, int64_t *last_id)
{
	if (last_id != NULL)
		*last_id = atomic_load(&s->last_id);
	return atomic_load(&s->sent);
}
