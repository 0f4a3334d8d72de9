/*
 * The metrics listener (listen.metrics): Prometheus text exposition format
 * 0.0.4 at GET /metrics, served by evhttp on the main thread's event loop.
 * Owns its TCP socket (bound at start-up with the other listeners) and
 * reads only counters other modules keep; it changes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/http.h>

#include "audit/audit.h"
#include "audit/audit_store.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "core/reason.h"
#include "core/refusal.h"
#include "core/stats.h"
#include "vault/ca.h"
#include "proxy/front.h"
#include "vault/keeper.h"

#define METRICS_MAX_HEADERS	8192
#define METRICS_TIMEOUT_SECS	10
#define METRICS_MAX_BODY	4096	/* a POST still gets its 405 */

/* One metric family: its # HELP and # TYPE lines. */
static void
family(struct evbuffer *out, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(out, "# HELP sandgate_%s %s\n# TYPE sandgate_%s %s\n",
	    name, help, name, type);
}

/* A label value with \, " and newline escaped as the format asks. */
static void
label_value(struct evbuffer *out, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\')
			evbuffer_add(out, "\\\\", 2);
		else if (*v == '"')
			evbuffer_add(out, "\\\"", 2);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
}

/* name{label="value"} n, or name n when label is NULL. */
static void
sample(struct evbuffer *out, const char *name, const char *label,
    const char *value, unsigned long long n)
{
	evbuffer_add_printf(out, "sandgate_%s", name);
	if (label != NULL) {
		evbuffer_add_printf(out, "{%s=\"", label);
		label_value(out, value);
		evbuffer_add(out, "\"}", 2);
	}
	evbuffer_add_printf(out, " %llu\n", n);
}

/* name{k1="v1",k2="v2",...} n: labels is NULL-terminated pairs. */
static void
sample_labels(struct evbuffer *out, const char *name,
    const char *const *labels, const char *n)
{
	int i;

	evbuffer_add_printf(out, "sandgate_%s{", name);
	for (i = 0; labels[i] != NULL; i += 2) {
		evbuffer_add_printf(out, "%s%s=\"", i > 0 ? "," : "",
		    labels[i]);
		label_value(out, labels[i + 1]);
		evbuffer_add(out, "\"", 1);
	}
	evbuffer_add_printf(out, "} %s\n", n);
}

static void
sample_ull(struct evbuffer *out, const char *name,
    const char *const *labels, unsigned long long n)
{
	char num[24];

	snprintf(num, sizeof(num), "%llu", n);
	sample_labels(out, name, labels, num);
}

static const char *
verdict_label(enum sg_verdict v)
{
	return v == VERDICT_NONE ? "none" : verdict_word(v);
}

static void
decision_cb(enum stats_listener lk, enum sg_verdict v, enum sg_reason r,
    unsigned long long n, void *arg)
{
	const char *l[] = { "listener", stats_listener_word(lk), "decision",
	    verdict_label(v), "reason", r == REASON_NONE ? "none" :
	    reason_word(r), NULL };

	sample_ull(arg, "requests_total", l, n);
}

static void
sandbox_cb(const char *sb, enum sg_verdict v, unsigned long long n, void *arg)
{
	const char *l[] = { "sandbox", sb, "decision", verdict_label(v), NULL };

	sample_ull(arg, "sandbox_requests_total", l, n);
}

static void
sandbox_bytes_cb(const char *sb, unsigned long long up,
    unsigned long long down, void *arg)
{
	const char *u[] = { "sandbox", sb, "direction", "up", NULL };
	const char *d[] = { "sandbox", sb, "direction", "down", NULL };

	sample_ull(arg, "sandbox_bytes_total", u, up);
	sample_ull(arg, "sandbox_bytes_total", d, down);
}

static void
sandbox_open_cb(const char *sb, unsigned long long open, void *arg)
{
	const char *l[] = { "sandbox", sb, NULL };

	sample_ull(arg, "sandbox_connections_open", l, open);
}

static void
credential_cb(const char *cred, enum stats_cred_outcome o,
    unsigned long long n, void *arg)
{
	const char *l[] = { "credential", cred, "outcome",
	    stats_cred_outcome_word(o), NULL };

	sample_ull(arg, "credential_requests_total", l, n);
}

/* One histogram's samples; lw: its listener label, or NULL for none. */
static void
hist_samples(struct evbuffer *out, const char *name, const char *lw,
    struct sg_hist *h)
{
	const double *b = stats_bounds();
	unsigned long long cum[STATS_BUCKETS], count;
	char le[32], fname[64], sum[40];
	const char *l[] = { "listener", lw, "le", le, NULL };
	const char *m[] = { "listener", lw, NULL };
	const char *const *bl = lw != NULL ? l : l + 2;
	const char *const *ml = lw != NULL ? m : m + 2;
	double s;
	int i;

	(void)sg_hist_read(h, cum, &count, &s);
	snprintf(fname, sizeof(fname), "%s_bucket", name);
	for (i = 0; i < STATS_BUCKETS; i++) {
		snprintf(le, sizeof(le), "%g", b[i]);
		sample_ull(out, fname, bl, cum[i]);
	}
	snprintf(le, sizeof(le), "+Inf");
	sample_ull(out, fname, bl, count);
	snprintf(fname, sizeof(fname), "%s_sum", name);
	snprintf(sum, sizeof(sum), "%.6f", s);
	sample_labels(out, fname, ml, sum);
	snprintf(fname, sizeof(fname), "%s_count", name);
	sample_ull(out, fname, ml, count);
}

/* A family of one histogram without labels; none when h is NULL. */
static void
lone_histogram(struct evbuffer *out, const char *name, const char *help,
    struct sg_hist *h)
{
	if (h == NULL)
		return;
	family(out, name, "histogram", help);
	hist_samples(out, name, NULL, h);
}

/* By listener: only the listeners that observed something. */
static void
histogram(struct evbuffer *out, struct stats *st, enum stats_hist which,
    const char *name)
{
	unsigned long long cum[STATS_BUCKETS], count;
	double s;
	int lk;

	for (lk = 0; lk < STATS_LK_N; lk++)
		if (stats_hist(st, which, lk, cum, &count, &s))
			hist_samples(out, name, stats_listener_word(lk),
			    stats_hist_of(st, which, lk));
}

/* The exchanges' histograms, by listener, in enum stats_hist's order. */
static const struct {
	const char	*name, *help;
} hists[STATS_H_N] = {
	[STATS_H_DECISION] = { "decision_seconds", "From an exchange's start "
	    "(its request head, CONNECT, SOCKS5 request or DNS query read) to "
	    "its verdict, by listener." },
	[STATS_H_EXCHANGE] = { "exchange_seconds", "From an exchange's start "
	    "to its end (its audit row), by listener." },
	[STATS_H_CONNECT] = { "upstream_connect_seconds", "An exchange's TCP "
	    "connect to its origin, from the first try to connected (a kept "
	    "connection taken from the pool: not counted)." },
	[STATS_H_TLS] = { "origin_tls_seconds", "The TLS handshake with an "
	    "intercepted exchange's origin, after its TCP connect." },
	[STATS_H_FIRST_BYTE] = { "first_byte_seconds", "From an exchange's "
	    "request sent to the origin to its response head read (HTTP "
	    "requests, intercepted or not)." },
};

/* What exchanges decided and moved (core/stats.h). */
static void
metrics_traffic(struct proxy *p, struct evbuffer *out)
{
	unsigned long long up, down;
	int lk, k;

	if (p->stats == NULL)
		return;
	family(out, "requests_total", "counter", "Exchanges ended -- HTTP "
	    "requests, tunnels, SOCKS5 connects, DNS queries, HTTP/2 streams "
	    "-- by listener, decision (allow, deny, error, report) and "
	    "reason (none when allowed); one per audit row.");
	stats_foreach_decision(p->stats, decision_cb, out);
	family(out, "sandbox_requests_total", "counter", "The same by "
	    "sandbox and decision; the first 100 sandboxes by name, the "
	    "rest as sandbox=\"other\".");
	stats_foreach_sandbox(p->stats, sandbox_cb, out);
	family(out, "bytes_total", "counter", "Bytes relayed by exchanges "
	    "that ended, by listener and direction (up: toward the origin).");
	for (lk = 0; lk < STATS_LK_N; lk++) {
		const char *u[] = { "listener", stats_listener_word(lk),
		    "direction", "up", NULL };
		const char *d[] = { "listener", stats_listener_word(lk),
		    "direction", "down", NULL };

		stats_bytes(p->stats, lk, &up, &down);
		if (up == 0 && down == 0)
			continue;
		sample_ull(out, "bytes_total", u, up);
		sample_ull(out, "bytes_total", d, down);
	}
	family(out, "sandbox_bytes_total", "counter", "The same by sandbox "
	    "(capped as sandbox_requests_total).");
	stats_foreach_sandbox_bytes(p->stats, sandbox_bytes_cb, out);
	family(out, "sandbox_connections_open", "gauge", "Client connections "
	    "open now by the sandbox that first identified itself on them "
	    "(capped as sandbox_requests_total; ingress not counted).");
	stats_foreach_sandbox_conns(p->stats, sandbox_open_cb, out);
	family(out, "limit_refusals_total", "counter", "Refusals by the limit "
	    "that made them: max_connections (at accept, no row), per_sandbox "
	    "(limits.per_sandbox connections or rate, DNS included), "
	    "head_timeout, max_header_bytes (a head or URI too large), "
	    "idle_timeout (a connection closed idle with its exchange "
	    "unanswered).");
	{
		struct fair_stats fs;
		const char *l[] = { "limit", NULL, NULL };

		memset(&fs, 0, sizeof(fs));
		if (p->fair != NULL)
			fairshare_stats(p->fair, &fs);
		l[1] = "max_connections";
		sample_ull(out, "limit_refusals_total", l,
		    atomic_load(&p->n_refused));
		l[1] = "per_sandbox";
		sample_ull(out, "limit_refusals_total", l, fs.refused);
		l[1] = "head_timeout";
		sample_ull(out, "limit_refusals_total", l,
		    stats_reason_total(p->stats, REASON_HEAD_TIMEOUT));
		l[1] = "max_header_bytes";
		sample_ull(out, "limit_refusals_total", l,
		    stats_reason_total(p->stats, REASON_HEAD_TOO_LARGE) +
		    stats_reason_total(p->stats, REASON_URI_TOO_LONG));
		l[1] = "idle_timeout";
		sample_ull(out, "limit_refusals_total", l,
		    stats_reason_total(p->stats, REASON_IDLE_TIMEOUT));
	}
	family(out, "tunnels_open", "gauge", "Client connections open now "
	    "that became tunnels, by listener and kind: intercepted (TLS "
	    "terminated, requests read inside), relayed (bytes not read: TLS "
	    "passed through, opaque, an upgrade), websocket (frames read).");
	for (lk = 0; lk < STATS_LK_N; lk++) {
		if (lk == STATS_LK_DNS || lk == STATS_LK_OTHER)
			continue;
		for (k = 0; k < STATS_TUN_N; k++) {
			const char *l[] = { "listener", stats_listener_word(lk),
			    "kind", stats_tunnel_word(k), NULL };

			sample_ull(out, "tunnels_open", l,
			    stats_tunnels_open(p->stats, lk, k));
		}
	}
	family(out, "credential_requests_total", "counter", "Exchanges whose "
	    "row names a credential, by credential and outcome: swapped (the "
	    "secret went in), misuse (its placeholder toward a host it is not "
	    "bound to), foreign (a key of the sandbox's own toward its host), "
	    "unavailable, refused; the first 100 names, the rest as "
	    "credential=\"other\".");
	stats_foreach_credential(p->stats, credential_cb, out);
	for (k = 0; k < STATS_H_N; k++) {
		family(out, hists[k].name, "histogram", hists[k].help);
		histogram(out, p->stats, k, hists[k].name);
	}
}

static void
count_static_cb(const char *id, const char *policy, void *arg)
{
	(*(unsigned long long *)arg)++;
}

static void
count_registered_cb(const struct policy_identity *id,
    const struct netaddr *src, int64_t created, void *arg)
{
	(*(unsigned long long *)arg)++;
}

static void
refused_cb(int nr, const char *name, unsigned long long n, void *arg)
{
	struct evbuffer *out = arg;
	char num[32];

	if (name == NULL) {
		snprintf(num, sizeof(num), "%d", nr);
		name = nr < 0 ? "unknown" : num;
	}
	sample(out, "seccomp_refused_total", "syscall", name, n);
}

/* audit.ship's families, only when it is set. */
static void
metrics_ship(struct proxy *p, struct evbuffer *out)
{
	struct audit_ship_stats ss;

	if (p->ship == NULL)
		return;
	audit_ship_get_stats(p->ship, &ss);
	family(out, "audit_ship_up", "gauge", "1 while the fleet store "
	    "(audit.ship) is connected; 0 while rows wait in audit.db.");
	sample(out, "audit_ship_up", NULL, NULL, (unsigned long long)
	    ss.connected);
	family(out, "audit_ship_halted", "gauge", "1 when shipping stopped "
	    "because the store holds another chain under this gateway name.");
	sample(out, "audit_ship_halted", NULL, NULL, (unsigned long long)
	    ss.halted);
	family(out, "audit_ship_rows_total", "counter", "Rows copied to the "
	    "fleet store.");
	sample(out, "audit_ship_rows_total", NULL, NULL, ss.rows_shipped);
	family(out, "audit_ship_failures_total", "counter", "Connections to "
	    "the fleet store or batches that failed (each is retried).");
	sample(out, "audit_ship_failures_total", NULL, NULL, ss.failures);
	if (!ss.cursor_known)
		return;		/* not connected since start: no cursor yet */
	family(out, "audit_ship_backlog_rows", "gauge", "Rows of audit.db not "
	    "in the fleet store yet.");
	sample(out, "audit_ship_backlog_rows", NULL, NULL, ss.backlog_rows);
	family(out, "audit_ship_backlog_seconds", "gauge", "Age of the oldest "
	    "row not in the fleet store yet (0 when none waits).");
	evbuffer_add_printf(out, "sandgate_audit_ship_backlog_seconds %.3f\n",
	    ss.backlog_seconds);
}

/* Every family in a fixed order, so two scrapes differ only in values. */
static void
metrics_render(struct proxy *p, struct evbuffer *out)
{
	unsigned long long n_static = 0, n_registered = 0;
	struct audit_stats as;
	struct ca_stats cs;
	struct fair_stats fs;
	struct policy *pol;

	pol = proxy_policy_get(p);
	policy_foreach_sandbox(pol, count_static_cb, &n_static);
	policy_unref(pol);
	policy_registry_foreach(count_registered_cb, &n_registered);
	audit_get_stats(p->audit, &as);
	memset(&fs, 0, sizeof(fs));
	if (p->fair != NULL)
		fairshare_stats(p->fair, &fs);
	memset(&cs, 0, sizeof(cs));
	if (p->ca != NULL)
		ca_get_stats(p->ca, &cs);

	family(out, "build_info", "gauge", "Always 1; the version of sandgate "
	    "as a label.");
	sample(out, "build_info", "version", SANDGATE_VERSION, 1);
	family(out, "workers", "gauge", "Worker threads (event loops).");
	sample(out, "workers", NULL, NULL, (unsigned long long)p->n_workers);
	family(out, "connections", "gauge", "Client connections open now.");
	sample(out, "connections", NULL, NULL, atomic_load(&p->n_conns));
	family(out, "connections_limit", "gauge", "limits.max_connections: "
	    "client connections beyond it are refused.");
	sample(out, "connections_limit", NULL, NULL,
	    (unsigned long long)p->cfg->max_connections);
	family(out, "connections_refused_total", "counter", "Client connections "
	    "refused because max_connections was reached.");
	sample(out, "connections_refused_total", NULL, NULL,
	    atomic_load(&p->n_refused));
	family(out, "connections_evicted_total", "counter", "Connections whose "
	    "sandbox was not known yet, closed to make room for another "
	    "source's when max_connections was reached.");
	sample(out, "connections_evicted_total", NULL, NULL,
	    atomic_load(&p->n_evicted));
	family(out, "rate_limited_total", "counter", "Connections and DNS "
	    "queries refused over a limits.per_sandbox limit (reason "
	    "rate-limited).");
	sample(out, "rate_limited_total", NULL, NULL, fs.refused);
	family(out, "rate_limited_unaudited_total", "counter", "Of those, the "
	    "refusals without an audit row (one row per sandbox per second).");
	sample(out, "rate_limited_unaudited_total", NULL, NULL, fs.suppressed);
	family(out, "audit_rows_written_total", "counter", "Rows written to the "
	    "audit database.");
	sample(out, "audit_rows_written_total", NULL, NULL, as.rows_written);
	family(out, "audit_producer_stalls_total", "counter", "Times a "
	    "connection had to wait for room in the audit queue.");
	sample(out, "audit_producer_stalls_total", NULL, NULL, as.stalls);
	family(out, "audit_checkpoints_total", "counter", "Signed checkpoint "
	    "rows written to the audit database.");
	sample(out, "audit_checkpoints_total", NULL, NULL, as.checkpoints);
	family(out, "audit_checkpoint_failures_total", "counter", "Checkpoints "
	    "that failed (signer or database); retried at the next interval.");
	sample(out, "audit_checkpoint_failures_total", NULL, NULL,
	    as.checkpoint_failures);
	family(out, "audit_unavailable", "gauge", "1 while audit.db cannot "
	    "take rows (a write failed, none succeeded since); with "
	    "audit.on_failure deny new requests are refused meanwhile.");
	sample(out, "audit_unavailable", NULL, NULL,
	    (unsigned long long)as.unavailable);
	family(out, "audit_write_failures_total", "counter", "Audit "
	    "transactions of rows that failed; each is retried.");
	sample(out, "audit_write_failures_total", NULL, NULL,
	    as.write_failures);
	family(out, "audit_rows_waiting", "gauge", "Audit rows queued or "
	    "being written now.");
	sample(out, "audit_rows_waiting", NULL, NULL,
	    (unsigned long long)as.rows_waiting);
	lone_histogram(out, "audit_write_seconds", "The audit writer's "
	    "transactions of rows, from the first try to committed.",
	    audit_write_hist(p->audit));
	family(out, "audit_rows_dropped_total", "counter", "Audit rows "
	    "dropped because the queue was full while audit.db could not "
	    "be written.");
	sample(out, "audit_rows_dropped_total", NULL, NULL, as.rows_dropped);
	metrics_ship(p, out);
	metrics_traffic(p, out);
	family(out, "sandboxes", "gauge", "Sandboxes known: static (policy "
	    "files) and registered (admin API).");
	sample(out, "sandboxes", "kind", "static", n_static);
	sample(out, "sandboxes", "kind", "registered", n_registered);
	family(out, "tunnels_spliced_total", "counter", "Tunnels the gateway "
	    "does not read that moved to splice(2) after their first MiB.");
	sample(out, "tunnels_spliced_total", NULL, NULL,
	    atomic_load(&p->n_spliced));
	family(out, "splice_fallbacks_total", "counter", "Spliced tunnels "
	    "that went back to copying through memory because splice(2) "
	    "failed (no byte lost), and tunnels that could not splice at all.");
	sample(out, "splice_fallbacks_total", NULL, NULL,
	    atomic_load(&p->n_splice_fallback));
	family(out, "seccomp_refused_total", "counter", "System calls the "
	    "seccomp filter refused (EPERM), by name; any is a missing "
	    "allow-list entry or an attack.");
	refusal_foreach(refused_cb, out);
	family(out, "keeper_up", "gauge", "1 while the key keeper answers; 0: "
	    "interceptions and credential swaps are refused.");
	sample(out, "keeper_up", NULL, NULL, (unsigned long long)
	    keeper_client_up(p->kc));
	lone_histogram(out, "keeper_rtt_seconds", "The key keeper's answered "
	    "requests (leaf signatures, secrets, checkpoint signatures), from "
	    "sent to answered.", keeper_client_rtt(p->kc));
	family(out, "keeper_restarts_total", "counter", "Key keepers adopted "
	    "after the one before was lost.");
	sample(out, "keeper_restarts_total", NULL, NULL,
	    atomic_load(&p->n_keeper_restarts));
	family(out, "tls_leaf_cache_hits_total", "counter", "Interception leaf "
	    "certificates served from the cache.");
	sample(out, "tls_leaf_cache_hits_total", NULL, NULL, cs.hits);
	family(out, "tls_leaf_cache_misses_total", "counter", "Interception "
	    "leaf certificates minted (not cached, or due for renewal).");
	sample(out, "tls_leaf_cache_misses_total", NULL, NULL, cs.minted);
	family(out, "tls_leaf_cache_entries", "gauge", "Interception leaf "
	    "certificates in the cache now.");
	sample(out, "tls_leaf_cache_entries", NULL, NULL, cs.entries);
	family(out, "policy_reloads_total", "counter", "Policy reloads (SIGHUP "
	    "or POST /v1/reload) by result.");
	sample(out, "policy_reloads_total", "result", "ok",
	    atomic_load(&p->n_reload_ok));
	sample(out, "policy_reloads_total", "result", "error",
	    atomic_load(&p->n_reload_err));
}

static void
metrics_error(struct evhttp_request *req, int code, const char *reason)
{
	struct evbuffer *out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (out == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_printf(out, "%d %s\n", code, reason);
	evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
	if (code == 405)
		evhttp_add_header(h, "Allow", "GET");
	evhttp_send_reply(req, code, reason, out);
	evbuffer_free(out);
}

static void
metrics_cb(struct evhttp_request *req, void *arg)
{
	struct proxy *p = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u != NULL ? evhttp_uri_get_path(u) : NULL;
	struct evbuffer *out;

	if (path == NULL || strcmp(path, "/metrics") != 0) {
		metrics_error(req, 404, "Not Found");
		return;
	}
	if (cmd != EVHTTP_REQ_GET) {
		metrics_error(req, 405, "Method Not Allowed");
		return;
	}
	if ((out = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	metrics_render(p, out);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/*
 * Bound with the other listeners so a busy port stops start-up. One socket
 * without SO_REUSEPORT: a second gateway on the same port is an error.
 */
int
proxy_metrics_bind(struct proxy *p)
{
	const struct config_listen *l = &p->cfg->listen_metrics;
	int fd, one = 1, saved;

	if (!l->enabled)
		return 0;
	fd = socket(l->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		goto fail;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		goto fail;
	if (l->ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&l->ss, l->sslen) == -1 ||
	    listen(fd, 64) == -1)
		goto fail;
	p->metrics_fd = fd;
	log_info("listening: metrics on %s", l->text);
	return 0;
fail:
	saved = errno;
	if (fd != -1)
		close(fd);
	errno = saved;
	log_warn("listen metrics on %s", l->text);
	return -1;
}

int
proxy_metrics_start(struct proxy *p)
{
	if (p->metrics_fd == -1)
		return 0;
	if ((p->metrics = evhttp_new(p->main_base)) == NULL ||
	    evhttp_accept_socket(p->metrics, p->metrics_fd) == -1) {
		log_warnx("metrics listener on %s: cannot start",
		    p->cfg->listen_metrics.text);
		return -1;
	}
	p->metrics_fd = -1;	/* owned by evhttp now */
	/* Scrapes are GETs; other methods reach metrics_cb for their 405. */
	evhttp_set_allowed_methods(p->metrics, EVHTTP_REQ_GET |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(p->metrics, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(p->metrics, METRICS_MAX_BODY);
	evhttp_set_timeout(p->metrics, METRICS_TIMEOUT_SECS);
	evhttp_set_gencb(p->metrics, metrics_cb, p);
	return 0;
}

void
proxy_metrics_stop(struct proxy *p)
{
	if (p->metrics != NULL) {
		evhttp_free(p->metrics);
		p->metrics = NULL;
	}
	if (p->metrics_fd != -1) {
		close(p->metrics_fd);
		p->metrics_fd = -1;
	}
}
