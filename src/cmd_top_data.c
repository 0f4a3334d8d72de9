/*
 * The data side of `sandgate top`: new audit rows read by id from audit.db
 * (read-only, as audit export --follow does), counted by sandbox, and what
 * the gateway publishes on its admin socket and /metrics, each asked with a
 * short timeout. Every text field is escaped here, once, before any drawing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "cmd_top.h"
#include "core/admin_client.h"
#include "core/config.h"
#include "core/log.h"
#include "sandgate.h"

#define TOP_NET_TIMEOUT_MS	300	/* per request to the gateway */
#define TOP_HTTP_MAX		(1 << 20)
#define TOP_POLL_BATCH		1000
#define TOP_POLL_MAX		50000	/* rows per poll; the rest next time */

const char *const top_decision_names[TOP_DEC_N] = {
	"all", "allow", "deny", "report", "error"
};

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
top_init(struct top *t, const char *cfg_path)
{
	struct config *cfg = NULL;
	int want_admin;

	memset(t, 0, sizeof(*t));
	t->gw.workers = t->gw.connections = t->gw.refused = -1;
	t->gw.keeper_up = t->gw.rows_written = t->gw.tunnels = -1;
	if (cmd_load(cfg_path, &cfg, NULL) == -1)
		return 1;
	t->db_path = strdup(cfg->audit_db ? cfg->audit_db : "");
	if ((want_admin = cfg->admin_socket != NULL))
		t->admin_path = strdup(cfg->admin_socket);
	if (cfg->listen_metrics.enabled) {
		memcpy(&t->metrics_ss, &cfg->listen_metrics.ss,
		    sizeof(t->metrics_ss));
		t->metrics_len = cfg->listen_metrics.sslen;
	}
	config_free(cfg);
	if (t->db_path == NULL ||
	    (want_admin && t->admin_path == NULL))
		return cmd_error("top: out of memory");
	t->iv_start = mono_s();
	return 0;
}

static void
row_free(struct top_row *r)
{
	int i;

	if (r == NULL)
		return;
	for (i = 0; i < AUDIT_NCOLS; i++)
		free(r->v[i]);
	free(r);
}

void
top_free(struct top *t)
{
	size_t i;

	for (i = 0; i < t->n_feed; i++)
		row_free(t->feed[i]);
	if (t->db != NULL)
		sqlite3_close(t->db);
	free(t->db_path);
	free(t->admin_path);
}

/* ------------------------------------------------------------ audit rows */

/* A column's value as escaped text (NULL for SQL NULL). */
static char *
val_text(const struct audit_val *v)
{
	char num[32], *out;
	size_t len;

	switch (v->type) {
	case AUDIT_V_NULL:
		return NULL;
	case AUDIT_V_INT:
		snprintf(num, sizeof(num), "%" PRId64, v->i);
		return strdup(num);
	case AUDIT_V_REAL:
		snprintf(num, sizeof(num), "%g", v->r);
		return strdup(num);
	default:
		break;
	}
	len = v->len < TOP_TEXT_MAX ? v->len : TOP_TEXT_MAX;
	if ((out = malloc(len * 4 + 4)) == NULL)
		return NULL;
	log_escape(v->p, len, out, len * 4 + 1);
	if (v->len > len)
		strcat(out, "...");
	return out;
}

static struct top_row *
row_from_stmt(sqlite3_stmt *st)
{
	struct top_row *r;
	struct audit_val v;
	int i;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	for (i = 0; i < AUDIT_NCOLS; i++) {
		audit_val_from_stmt(st, i, &v);
		r->v[i] = val_text(&v);
		if (i == AUDIT_COL_ID)
			r->id = v.i;
		else if (i == AUDIT_COL_BYTES_UP && v.type == AUDIT_V_INT)
			r->bytes_up = v.i > 0 ? v.i : 0;
		else if (i == AUDIT_COL_BYTES_DOWN && v.type == AUDIT_V_INT)
			r->bytes_down = v.i > 0 ? v.i : 0;
	}
	return r;
}

static struct top_sandbox *
sandbox_slot(struct top *t, const char *name)
{
	size_t i;

	if (name == NULL)
		name = "-";
	for (i = 0; i < t->n_sb; i++)
		if (strcmp(t->sb[i].name, name) == 0)
			return &t->sb[i];
	if (t->n_sb == TOP_SANDBOXES) {
		/* full: the last slot becomes "other" and takes the rest */
		i = TOP_SANDBOXES - 1;
		snprintf(t->sb[i].name, sizeof(t->sb[i].name), "other");
		return &t->sb[i];
	}
	i = t->n_sb++;
	memset(&t->sb[i], 0, sizeof(t->sb[i]));
	snprintf(t->sb[i].name, sizeof(t->sb[i].name), "%s", name);
	return &t->sb[i];
}

/* The gateway's own rows (admin API, vault, checkpoints) are no traffic. */
static int
row_is_traffic(const struct top_row *r)
{
	const char *k = r->v[AUDIT_COL_KIND];

	return k == NULL || (strcmp(k, "admin") != 0 && strcmp(k, "vault") != 0);
}

/* Checkpoint and retention rows are the log's own bookkeeping. */
static int
row_is_bookkeeping(const struct top_row *r)
{
	const char *k = r->v[AUDIT_COL_KIND], *rule = r->v[AUDIT_COL_RULE];

	return k != NULL && rule != NULL && strcmp(k, "admin") == 0 &&
	    (strcmp(rule, "checkpoint") == 0 || strcmp(rule, "retention") == 0);
}

static void
row_count(struct top *t, const struct top_row *r)
{
	struct top_sandbox *s;
	const char *d = r->v[AUDIT_COL_DECISION];

	if (!row_is_traffic(r))
		return;
	s = sandbox_slot(t, r->v[AUDIT_COL_SANDBOX]);
	s->total++;
	s->iv_total++;
	if (d != NULL && strcmp(d, "deny") == 0) {
		s->denied++;
		s->iv_denied++;
	} else if (d != NULL && strcmp(d, "error") == 0)
		s->errors++;
	s->up += (uint64_t)r->bytes_up;
	s->down += (uint64_t)r->bytes_down;
}

static void
feed_push(struct top *t, struct top_row *r)
{
	if (t->n_feed == TOP_FEED_MAX) {
		row_free(t->feed[0]);
		memmove(&t->feed[0], &t->feed[1],
		    (TOP_FEED_MAX - 1) * sizeof(t->feed[0]));
		t->n_feed--;
	}
	t->feed[t->n_feed++] = r;
}

/* Rows after t->after up to upto, at most TOP_POLL_BATCH; how many, or -1. */
static int
read_batch(struct top *t, int64_t upto, int count)
{
	struct audit_filter f;
	struct audit_sql q;
	struct top_row *r;
	sqlite3_stmt *st = NULL;
	const char *errstr = NULL;
	int rc, n = 0;

	memset(&f, 0, sizeof(f));
	f.after_id = t->after;
	f.upto_id = upto;
	f.by_id = 1;
	f.asc = 1;
	f.limit = TOP_POLL_BATCH;
	if (audit_build_select(&f, &q, &errstr) == -1) {
		snprintf(t->db_msg, sizeof(t->db_msg), "%s", errstr);
		return -1;
	}
	if (sqlite3_prepare_v2(t->db, q.text, -1, &st, NULL) != SQLITE_OK ||
	    audit_bind_sql(st, &q) != SQLITE_OK)
		goto dberr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((r = row_from_stmt(st)) == NULL)
			break;
		t->after = r->id;
		n++;
		if (row_is_bookkeeping(r)) {
			row_free(r);
			continue;
		}
		if (count) {
			row_count(t, r);
			t->rows_read++;
		}
		feed_push(t, r);
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);
	return n;
dberr:
	snprintf(t->db_msg, sizeof(t->db_msg), "%s", sqlite3_errmsg(t->db));
	sqlite3_finalize(st);
	return -1;
}

static int
open_db(struct top *t)
{
	char err[256];

	if (t->db != NULL)
		return 0;
	if ((t->db = audit_db_open_ro(t->db_path, err, sizeof(err))) == NULL) {
		snprintf(t->db_msg, sizeof(t->db_msg), "%s", err);
		return -1;
	}
	/* a reader of WAL waits for nothing; keep the screen live regardless */
	sqlite3_busy_timeout(t->db, 200);
	t->db_msg[0] = '\0';
	return 0;
}

static void
close_interval(struct top *t)
{
	double now = mono_s(), len = now - t->iv_start;
	size_t i;

	if (len < 0.05)
		len = 0.05;
	for (i = 0; i < t->n_sb; i++) {
		t->sb[i].rate = (double)t->sb[i].iv_total / len;
		t->sb[i].deny_rate = (double)t->sb[i].iv_denied / len;
		t->sb[i].iv_total = t->sb[i].iv_denied = 0;
	}
	t->iv_start = now;
}

void
top_poll_audit(struct top *t)
{
	char err[256];
	int64_t max;
	int n, total = 0;

	if (open_db(t) == -1) {
		close_interval(t);
		return;
	}
	if (sqlite3_exec(t->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(t->db_msg, sizeof(t->db_msg), "%s",
		    sqlite3_errmsg(t->db));
		close_interval(t);
		return;
	}
	if ((max = audit_max_id(t->db, err, sizeof(err))) == -1)
		snprintf(t->db_msg, sizeof(t->db_msg), "%s", err);
	else if (!t->started) {
		t->after = max > TOP_BACKFILL ? max - TOP_BACKFILL : 0;
		while ((n = read_batch(t, max, 0)) > 0)
			;
		t->after = max;
		t->started = 1;
	} else {
		while (total < TOP_POLL_MAX && (n = read_batch(t, max, 1)) > 0)
			total += n;
	}
	(void)sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
	close_interval(t);
}

/* ------------------------------------------------------- the gateway */

/*
 * GET path on a stream socket with one deadline for everything; the body
 * of a 200 answer in a malloc'd buffer (NUL-terminated), or NULL with msg.
 */
static char *
http_get(const struct sockaddr *sa, socklen_t salen, const char *path,
    size_t *blen, char *msg, size_t msglen)
{
	char req[256], *buf = NULL;
	struct pollfd pfd;
	size_t len = 0, sent = 0, off;
	ssize_t n;
	int fd, reqlen, status;
	double deadline = mono_s() + TOP_NET_TIMEOUT_MS / 1000.0;

	reqlen = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: sandgate"
	    "\r\nConnection: close\r\n\r\n", path);
	if ((fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1)
		goto syserr;
	if (connect(fd, sa, salen) == -1 && errno != EINPROGRESS)
		goto syserr;
	if ((buf = malloc(TOP_HTTP_MAX + 1)) == NULL)
		goto syserr;
	pfd.fd = fd;
	for (;;) {
		int left = (int)((deadline - mono_s()) * 1000);

		if (left <= 0) {
			snprintf(msg, msglen, "no answer in %d ms",
			    TOP_NET_TIMEOUT_MS);
			goto fail;
		}
		pfd.events = sent < (size_t)reqlen ? POLLOUT : POLLIN;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		if (sent < (size_t)reqlen) {
			if ((n = send(fd, req + sent, (size_t)reqlen - sent,
			    MSG_NOSIGNAL)) == -1) {
				if (errno == EAGAIN || errno == EINTR)
					continue;
				goto syserr;
			}
			sent += (size_t)n;
			continue;
		}
		n = read(fd, buf + len, TOP_HTTP_MAX - len);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n == -1)
			goto syserr;
		if (n == 0 || (len += (size_t)n) == TOP_HTTP_MAX)
			break;
	}
	close(fd);
	buf[len] = '\0';
	if (top_http_split(buf, len, &status, &off) == -1) {
		snprintf(msg, msglen, "not an HTTP answer");
		free(buf);
		return NULL;
	}
	if (status != 200) {
		snprintf(msg, msglen, "HTTP status %d", status);
		free(buf);
		return NULL;
	}
	*blen = len - off;
	memmove(buf, buf + off, *blen + 1);
	return buf;
syserr:
	snprintf(msg, msglen, "%s", strerror(errno));
fail:
	if (fd != -1)
		close(fd);
	free(buf);
	return NULL;
}

static long long
json_num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_boolean(v))
		return json_is_true(v);
	return -1;
}

static void	poll_questions(struct top *, struct sockaddr *, socklen_t);

static void
poll_admin(struct top *t)
{
	struct sockaddr_un sun;
	json_error_t jerr;
	json_t *j;
	const char *ver;
	char *body;
	size_t blen;

	t->gw.admin_ok = 0;
	t->gw.uptime = -1;
	if (t->admin_path == NULL) {
		snprintf(t->gw.admin_msg, sizeof(t->gw.admin_msg), "no "
		    "admin_socket in the config");
		return;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(t->admin_path) >= sizeof(sun.sun_path)) {
		snprintf(t->gw.admin_msg, sizeof(t->gw.admin_msg), "socket "
		    "path too long");
		return;
	}
	memcpy(sun.sun_path, t->admin_path, strlen(t->admin_path));
	if ((body = http_get((struct sockaddr *)&sun, sizeof(sun),
	    "/v1/status", &blen, t->gw.admin_msg,
	    sizeof(t->gw.admin_msg))) == NULL)
		return;
	j = json_loadb(body, blen, 0, &jerr);
	free(body);
	if (!json_is_object(j)) {
		snprintf(t->gw.admin_msg, sizeof(t->gw.admin_msg), "bad JSON");
		json_decref(j);
		return;
	}
	ver = json_string_value(json_object_get(j, "version"));
	log_escape(ver ? ver : "?", ver ? strlen(ver) : 1, t->gw.version,
	    sizeof(t->gw.version));
	t->gw.workers = json_num(j, "workers");
	t->gw.uptime = json_num(j, "uptime_s");
	t->gw.connections = json_num(j, "connections");
	t->gw.refused = json_num(j, "refused");
	t->gw.keeper_up = json_num(json_object_get(j, "keeper"), "up");
	t->gw.rows_written = json_num(json_object_get(j, "audit"),
	    "rows_written");
	t->gw.admin_ok = 1;
	json_decref(j);
	poll_questions(t, (struct sockaddr *)&sun, sizeof(sun));
}

/*
 * A sandbox's open connections: a sandbox with some open gets its row even
 * before any of its rows is written (a tunnel's is written when it ends).
 */
/* GET /v1/approvals: the first TOP_QUESTIONS, oldest first. */
static void
poll_questions(struct top *t, struct sockaddr *sa, socklen_t salen)
{
	json_error_t jerr;
	json_t *j, *a, *e;
	char *body, msg[160];
	const char *s;
	size_t blen, i;

	t->n_q = t->n_q_all = 0;
	if ((body = http_get(sa, salen, "/v1/approvals", &blen, msg,
	    sizeof(msg))) == NULL)
		return;
	j = json_loadb(body, blen, 0, &jerr);
	free(body);
	a = json_object_get(j, "approvals");
	t->n_q_all = json_array_size(a);
	json_array_foreach(a, i, e) {
		struct top_question *q;

		if (t->n_q == TOP_QUESTIONS)
			break;
		q = &t->q[t->n_q++];
		q->id = json_num(e, "id");
		s = json_string_value(json_object_get(e, "sandbox"));
		log_escape(s ? s : "-", s ? strlen(s) : 1, q->sandbox,
		    sizeof(q->sandbox));
		s = json_string_value(json_object_get(e, "destination"));
		log_escape(s ? s : "-", s ? strlen(s) : 1, q->dest,
		    sizeof(q->dest));
		q->waiting = json_num(e, "waiting");
		q->expires_s = json_num(e, "expires_in_ms") / 1000;
	}
	json_decref(j);
}

int
top_answer(struct top *t, long long id, int approve)
{
	char uri[64], *out = NULL;
	int st;

	if (t->admin_path == NULL)
		return -1;
	snprintf(uri, sizeof(uri), "/v1/approvals/%lld", id);
	st = admin_call(t->admin_path, "POST", uri, approve ?
	    "{\"answer\":\"approve\"}" : "{\"answer\":\"deny\"}", &out);
	free(out);
	return st == 200 ? 0 : -1;
}

void
top_question_line(const struct top_question *q, char *buf, size_t len)
{
	char dest[sizeof(((struct top_question *)0)->dest) + 3];
	size_t n = strlen(q->dest);

	/*
	 * A destination too long for its column keeps its end -- the
	 * registrable domain and the port, what an operator approves --
	 * behind "..": its start is what a name can make look like another.
	 */
	if (n > 40)
		snprintf(dest, sizeof(dest), "..%s", q->dest + n - 38);
	else
		snprintf(dest, sizeof(dest), "%s", q->dest);
	snprintf(buf, len, "?%-5lld %-20.20s %-40.40s %4lld waiting %5llds",
	    q->id, q->sandbox, dest, q->waiting, q->expires_s);
}

static void
sandbox_open_cb(const char *sandbox, double v, void *arg)
{
	struct top *t = arg;
	char name[128];
	struct top_sandbox *s;
	size_t i;

	log_escape(sandbox, strlen(sandbox), name, sizeof(name));
	for (i = 0; i < t->n_sb; i++)
		if (strcmp(t->sb[i].name, name) == 0)
			break;
	if (i == t->n_sb && v < 1)
		return;
	s = sandbox_slot(t, name);	/* or "other", which sums the rest */
	if (v >= 1)
		s->open += (long long)v;
}

static void
poll_metrics(struct top *t)
{
	char *body;
	size_t blen, i;
	double v;

	t->gw.metrics_ok = 0;
	t->gw.tunnels = -1;
	for (i = 0; i < t->n_sb; i++)
		t->sb[i].open = -1;
	if (t->metrics_len == 0) {
		snprintf(t->gw.metrics_msg, sizeof(t->gw.metrics_msg), "no "
		    "metrics listener in the config");
		return;
	}
	if ((body = http_get((struct sockaddr *)&t->metrics_ss,
	    t->metrics_len, "/metrics", &blen, t->gw.metrics_msg,
	    sizeof(t->gw.metrics_msg))) == NULL)
		return;
	t->gw.metrics_ok = 1;
	for (i = 0; i < t->n_sb; i++)
		t->sb[i].open = 0;
	(void)top_metric_each(body, blen, "sandgate_sandbox_connections_open",
	    "sandbox", sandbox_open_cb, t);
	if (top_metric_sum(body, blen, "sandgate_tunnels_open", &v) > 0)
		t->gw.tunnels = (long long)v;
	/* without the admin socket, what /metrics says of the same things */
	if (!t->gw.admin_ok) {
		if (top_metric_sum(body, blen, "sandgate_connections", &v) > 0)
			t->gw.connections = (long long)v;
		if (top_metric_sum(body, blen, "sandgate_keeper_up", &v) > 0)
			t->gw.keeper_up = (long long)v;
		if (top_metric_sum(body, blen, "sandgate_workers", &v) > 0)
			t->gw.workers = (long long)v;
	}
	free(body);
}

void
top_poll_gateway(struct top *t)
{
	poll_admin(t);
	poll_metrics(t);
}

/* ------------------------------------------------------------ text */

int
top_row_matches(const struct top_row *r, const struct top_filter *f)
{
	const char *d = r->v[AUDIT_COL_DECISION];

	if (f->sandbox[0] != '\0' && (r->v[AUDIT_COL_SANDBOX] == NULL ||
	    strcasestr(r->v[AUDIT_COL_SANDBOX], f->sandbox) == NULL))
		return 0;
	if (f->host[0] != '\0' && (r->v[AUDIT_COL_HOST] == NULL ||
	    strcasestr(r->v[AUDIT_COL_HOST], f->host) == NULL))
		return 0;
	if (f->decision != TOP_DEC_ALL && (d == NULL ||
	    strcmp(d, top_decision_names[f->decision]) != 0))
		return 0;
	return 1;
}

void
top_human(uint64_t n, char *buf, size_t len)
{
	static const char units[] = "kMGTPE";
	double d = (double)n;
	int u = -1;

	if (n < 10000) {
		snprintf(buf, len, "%" PRIu64, n);
		return;
	}
	while (d >= 1000 && u < 5) {
		d /= 1000;
		u++;
	}
	snprintf(buf, len, d < 100 ? "%.1f%c" : "%.0f%c", d, units[u]);
}

static const char *
field(const struct top_row *r, int col)
{
	return r->v[col] != NULL ? r->v[col] : "-";
}

void
top_feed_line(const struct top_row *r, char *buf, size_t len)
{
	const char *ts = field(r, AUDIT_COL_TS);
	char hostport[300];

	/* "2026-12-02T14:22:01.123Z": the time of day is enough here */
	if (strlen(ts) >= 19)
		ts += 11;
	if (r->v[AUDIT_COL_PORT] != NULL)
		snprintf(hostport, sizeof(hostport), "%s:%s",
		    field(r, AUDIT_COL_HOST), r->v[AUDIT_COL_PORT]);
	else
		snprintf(hostport, sizeof(hostport), "%s",
		    field(r, AUDIT_COL_HOST));
	snprintf(buf, len, "%-12.12s %-14.14s %-6.6s %-11.11s %-32.32s "
	    "%s %s  %s", ts, field(r, AUDIT_COL_SANDBOX),
	    field(r, AUDIT_COL_DECISION), field(r, AUDIT_COL_KIND), hostport,
	    field(r, AUDIT_COL_METHOD), field(r, AUDIT_COL_PATH),
	    field(r, AUDIT_COL_REASON));
}

static void
num_or_q(long long v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, "%lld", v);
}

void
top_header_line(const struct top *t, char *buf, size_t len)
{
	char conns[24], tun[24], workers[24], up[32];
	long long s = t->gw.uptime;

	if (s < 0)
		snprintf(up, sizeof(up), "?");
	else if (s >= 86400)
		snprintf(up, sizeof(up), "%lldd%02lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(up, sizeof(up), "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(up, sizeof(up), "%lldm%02llds", s / 60, s % 60);
	num_or_q(t->gw.connections, conns, sizeof(conns));
	num_or_q(t->gw.tunnels, tun, sizeof(tun));
	num_or_q(t->gw.workers, workers, sizeof(workers));
	snprintf(buf, len, "sandgate %s  up %s  workers %s  connections %s  "
	    "tunnels %s  keeper %s  rows read %" PRIu64 "%s%s",
	    t->gw.version[0] ? t->gw.version : "?", up, workers, conns, tun,
	    t->gw.keeper_up == 1 ? "up" : t->gw.keeper_up == 0 ? "DOWN" : "?",
	    t->rows_read, t->db_msg[0] ? "  audit: " : "", t->db_msg);
}

void
top_table_title(char *buf, size_t len)
{
	snprintf(buf, len, "%-24s %8s %8s %8s %8s %8s %8s %8s %6s", "SANDBOX",
	    "REQ/S", "DENY/S", "REQS", "DENIED", "ERRORS", "UP", "DOWN",
	    "OPEN");
}

void
top_table_line(const struct top_sandbox *s, char *buf, size_t len)
{
	char tot[16], den[16], err[16], up[16], down[16], open[24];

	top_human(s->total, tot, sizeof(tot));
	top_human(s->denied, den, sizeof(den));
	top_human(s->errors, err, sizeof(err));
	top_human(s->up, up, sizeof(up));
	top_human(s->down, down, sizeof(down));
	num_or_q(s->open, open, sizeof(open));
	snprintf(buf, len, "%-24.24s %8.1f %8.1f %8s %8s %8s %8s %8s %6s",
	    s->name, s->rate, s->deny_rate, tot, den, err, up, down, open);
}

void
top_print_snapshot(const struct top *t, const struct top_filter *f,
    FILE *out)
{
	char line[4096];
	size_t i, shown = 0;

	top_header_line(t, line, sizeof(line));
	fprintf(out, "%s\n", line);
	if (!t->gw.admin_ok)
		fprintf(out, "admin API: %s\n", t->gw.admin_msg);
	if (!t->gw.metrics_ok)
		fprintf(out, "metrics: %s\n", t->gw.metrics_msg);
	if (t->n_q_all > 0) {
		fprintf(out, "\npending questions (mode: ask): %zu\n",
		    t->n_q_all);
		for (i = 0; i < t->n_q; i++) {
			top_question_line(&t->q[i], line, sizeof(line));
			fprintf(out, "%s\n", line);
		}
	}
	top_table_title(line, sizeof(line));
	fprintf(out, "\n%s\n", line);
	for (i = 0; i < t->n_sb; i++) {
		top_table_line(&t->sb[i], line, sizeof(line));
		fprintf(out, "%s\n", line);
	}
	fprintf(out, "\nnewest decisions (filter: sandbox %s, decision %s, "
	    "host %s):\n", f->sandbox[0] ? f->sandbox : "*",
	    top_decision_names[f->decision], f->host[0] ? f->host : "*");
	for (i = t->n_feed; i > 0 && shown < 20; i--) {
		if (!top_row_matches(t->feed[i - 1], f))
			continue;
		top_feed_line(t->feed[i - 1], line, sizeof(line));
		fprintf(out, "%s\n", line);
		shown++;
	}
}
