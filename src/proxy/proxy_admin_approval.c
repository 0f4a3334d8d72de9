/*
 * The admin API's side of mode: ask (docs/approvals.md):
 *   GET /v1/approvals            the pending questions
 *   POST /v1/approvals/{id}      {"answer": "approve"|"deny", "for": "1h",
 *                                 "scope": "host|host:port|*.domain"}
 * The answering user is the admin socket's peer (SO_PEERCRED), in the row.
 */
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <jansson.h>

#include "audit/audit.h"
#include "core/approval.h"
#include "core/config.h"
#include "core/fairshare.h"
#include "core/log.h"
#include "proxy/front.h"

#define APPROVAL_LIST_MAX	4096

/* Who is on the other end of the admin socket: a user name, or "uid:N". */
static void
peer_user(struct evhttp_request *req, char *out, size_t len)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c != NULL ?
	    evhttp_connection_get_bufferevent(c) : NULL;
	struct ucred uc;
	socklen_t sl = sizeof(uc);
	struct passwd pw, *res = NULL;
	char buf[1024];

	snprintf(out, len, "unknown");
	if (bev == NULL || getsockopt(bufferevent_getfd(bev), SOL_SOCKET,
	    SO_PEERCRED, &uc, &sl) == -1)
		return;
	if (getpwuid_r(uc.uid, &pw, buf, sizeof(buf), &res) == 0 &&
	    res != NULL)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "uid:%u", (unsigned)uc.uid);
}

/* Monotonic ms of the table -> wall-clock ms. */
static int64_t
wall_ms(uint64_t mono, uint64_t now_mono)
{
	struct timespec ts;
	int64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	return now - (int64_t)(now_mono - mono);
}

static json_t *
info_json(const struct approval_info *q, uint64_t now)
{
	char dest[APPROVAL_HOST_MAX + 16];

	if (strchr(q->host, ':') != NULL)
		snprintf(dest, sizeof(dest), "[%s]:%u", q->host, q->port);
	else if (q->port != 0)
		snprintf(dest, sizeof(dest), "%s:%u", q->host, q->port);
	else
		snprintf(dest, sizeof(dest), "%s", q->host);
	return json_pack("{s:I,s:s,s:s,s:i,s:s,s:I,s:I,s:i,s:i,s:s}",
	    "id", (json_int_t)q->id, "sandbox", q->sandbox, "host", q->host,
	    "port", (int)q->port, "destination", dest,
	    "first_ms", (json_int_t)wall_ms(q->first_ms, now),
	    "expires_in_ms", (json_int_t)(q->deadline_ms > now ?
	    q->deadline_ms - now : 0), "waiting", (int)q->waiting,
	    "requests", (int)q->requests, "state",
	    approval_state_word(q->state));
}

static void
list(struct proxy *p, struct evhttp_request *req)
{
	struct approval_info *v;
	uint64_t now = fairshare_now_ms();
	size_t n, i;
	json_t *a = json_array();

	if ((v = calloc(APPROVAL_LIST_MAX, sizeof(*v))) == NULL || a == NULL) {
		free(v);
		json_decref(a);
		admin_reply_error(req, 500, "out of memory");
		return;
	}
	pthread_mutex_lock(&p->approval_mtx);
	(void)approval_expire(p->approvals, now);
	n = approval_list(p->approvals, v, APPROVAL_LIST_MAX);
	pthread_mutex_unlock(&p->approval_mtx);
	if (n > APPROVAL_LIST_MAX)
		n = APPROVAL_LIST_MAX;
	for (i = 0; i < n; i++)
		json_array_append_new(a, info_json(&v[i], now));
	free(v);
	admin_reply_json(req, 200, json_pack("{s:o}", "approvals", a));
}

/* The answer's row: who, when (the row's time), what, for how long, where. */
static void
audit_answer(struct proxy *p, const struct approval_info *q, int approve,
    uint64_t for_ms, const char *scope, const char *user)
{
	struct audit_event ev;
	char path[APPROVAL_HOST_MAX + 160], rule[48];

	snprintf(rule, sizeof(rule), "approval:%" PRIu64, q->id);
	snprintf(path, sizeof(path), "/v1/approvals/%" PRIu64 "?answer=%s"
	    "&for=%" PRIu64 "s&scope=%s&user=%s", q->id, approve ? "approve" :
	    "deny", for_ms / 1000, scope, user);
	memset(&ev, 0, sizeof(ev));
	ev.kind = "admin";
	ev.client = "admin.sock";
	ev.sandbox = q->sandbox;
	ev.host = q->host;
	ev.port = q->port != 0 ? q->port : -1;
	ev.asn = -1;
	ev.method = approve ? "APPROVE" : "DENY";
	ev.path = path;
	ev.status = 200;
	ev.decision = approve ? VERDICT_ALLOW : VERDICT_DENY;
	ev.rule = rule;
	ev.credential = NULL;
	ev.bytes_up = ev.bytes_down = ev.duration_ms = -1;
	audit_submit(p->audit, &ev);
}

static void
answer(struct proxy *p, struct evhttp_request *req, const char *idtext)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *ans = NULL, *forv = NULL, *scopev = NULL;
	struct approval_scope sc;
	struct approval_info q;
	uint64_t id, for_ms = 0, now = fairshare_now_ms();
	json_error_t jerr;
	json_t *body;
	char *end, user[64];
	int always = 0, approve, rc;

	id = strtoull(idtext, &end, 10);
	if (*idtext < '0' || *idtext > '9' || *end != '\0' || id == 0) {
		admin_reply_error(req, 404, "no such question");
		return;
	}
	body = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &jerr);
	if (body == NULL || json_unpack(body, "{s:s,s?s,s?b,s?s}", "answer",
	    &ans, "for", &forv, "always", &always, "scope", &scopev) == -1 ||
	    (strcmp(ans, "approve") != 0 && strcmp(ans, "deny") != 0)) {
		json_decref(body);
		admin_reply_error(req, 400, "want {\"answer\": \"approve\"|\"deny\", "
		    "\"for\", \"always\", \"scope\"}");
		return;
	}
	approve = strcmp(ans, "approve") == 0;
	if (forv != NULL && (config_parse_duration_ms(forv, &for_ms) == -1 ||
	    for_ms == 0)) {
		json_decref(body);
		admin_reply_error(req, 400, "for: a duration such as 30m or 1h");
		return;
	}
	if (always) {
		json_decref(body);
		admin_reply_error(req, 501, "always: not supported by this gateway yet");
		return;
	}
	if (scopev != NULL && approval_scope_parse(scopev, &sc) == -1) {
		json_decref(body);
		admin_reply_error(req, 400, "scope: host, host:port or *.domain");
		return;
	}
	pthread_mutex_lock(&p->approval_mtx);
	rc = approval_answer(p->approvals, id, approve, for_ms,
	    scopev != NULL ? &sc : NULL, now, &q);
	if (rc == -1 && approval_get(p->approvals, id, &q) == 0 &&
	    q.state == APPROVAL_PENDING)
		rc = -2;	/* the scope does not cover it */
	pthread_mutex_unlock(&p->approval_mtx);
	if (rc == -2) {
		json_decref(body);
		admin_reply_error(req, 400, "scope: does not cover the question's "
		    "destination");
		return;
	}
	if (rc == -1) {
		json_decref(body);
		admin_reply_error(req, 404, "no such pending question");
		return;
	}
	peer_user(req, user, sizeof(user));
	audit_answer(p, &q, approve, for_ms, scopev != NULL ? scopev : q.host,
	    user);
	log_info("approval %" PRIu64 ": %s by %s (sandbox %s, %s:%u%s%s)",
	    id, approve ? "approved" : "denied", user, q.sandbox, q.host,
	    q.port, forv != NULL ? ", for " : "", forv != NULL ? forv : "");
	approval_wake_all(p);
	admin_reply_json(req, 200, json_pack("{s:I,s:s,s:s,s:i}", "id", (json_int_t)id,
	    "answer", ans, "user", user, "waiting", (int)q.waiting));
	json_decref(body);
}

int
admin_approvals(struct proxy *p, struct evhttp_request *req, const char *uri,
    int cmd)
{
	const char *pfx = "/v1/approvals/";

	if (strcmp(uri, "/v1/approvals") == 0 && cmd == EVHTTP_REQ_GET) {
		list(p, req);
		return 1;
	}
	if (strncmp(uri, pfx, strlen(pfx)) == 0 && cmd == EVHTTP_REQ_POST) {
		answer(p, req, uri + strlen(pfx));
		return 1;
	}
	return 0;
}
