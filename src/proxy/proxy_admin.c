/*
 * The admin API: HTTP + JSON on a unix socket (mode 0600) served by the
 * main thread's event loop. Sandboxes are registered and removed here by the
 * launcher; reload and status are here for operators.
 *   GET /v1/status  GET|POST /v1/sandboxes  GET|DELETE /v1/sandboxes/{id}
 *   POST /v1/sandboxes/{id}/state  POST /v1/reload
 *   GET /v1/approvals  POST /v1/approvals/{id} (proxy_admin_approval.c)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/http.h>
#include <jansson.h>

#include "audit/audit.h"
#include "core/approval.h"
#include "core/log.h"
#include "core/rate.h"
#include "core/stats.h"
#include "core/reason.h"
#include "proxy/front.h"
#include "vault/sigv4.h"
#include "vault/keeper.h"

#define ADMIN_MAX_BODY	65536

static void
admin_audit(struct proxy *p, const char *method, const char *path, int status,
    enum sg_verdict decision, const char *sandbox, const char *reason)
{
	struct audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = "admin";
	ev.client = "admin.sock";
	ev.sandbox = sandbox;
	ev.method = method;
	ev.path = path;
	ev.port = -1;
	ev.asn = -1;
	ev.status = status;
	ev.decision = decision;
	ev.reason = reason;
	ev.bytes_up = ev.bytes_down = ev.duration_ms = -1;
	audit_submit(p->audit, &ev);
}

/* The placeholders of a sandbox: [{credential, env, placeholder}]. */
static json_t *
placeholders_json(struct proxy *p, const struct policy *pol,
    const char *sandbox, const char *policy_name)
{
	const struct policy_credential *const *cv;
	json_t *a = json_array();
	char ph[CRED_PH_MAX + 1];
	size_t i, n;

	cv = policy_credentials(pol, policy_name, &n);
	for (i = 0; a != NULL && i < n; i++) {
		if (cred_placeholder(p, sandbox, cv[i]->name, ph, sizeof(ph)) == -1)
			continue;
		json_array_append_new(a, json_pack("{s:s,s:s?,s:s}",
		    "credential", cv[i]->name, "env", cv[i]->env,
		    "placeholder", ph));
		/* aws_sigv4: the secret key's placeholder too, part "secret". */
		if (cv[i]->kind == POLICY_CRED_AWS_SIGV4) {
			char sph[SIGV4_SPH_LEN + 1];

			sigv4_secret_placeholder(ph, strlen(ph), sph);
			json_array_append_new(a, json_pack("{s:s,s:s?,s:s,s:s}",
			    "credential", cv[i]->name, "env", cv[i]->secret_env,
			    "placeholder", sph, "part", "secret"));
		}
	}
	return a;
}

/* {"address", "ports", "public"}: never the token's hash. */
static json_t *
ingress_json(const struct policy_ingress *ing)
{
	json_t *ports = json_array();
	char ip[NETADDR_STRLEN];
	size_t i;

	for (i = 0; ports != NULL && i < ing->n_ports; i++)
		json_array_append_new(ports, json_integer(ing->ports[i]));
	netaddr_ntop(&ing->address, ip, sizeof(ip));
	return json_pack("{s:s,s:o,s:b}", "address", ip, "ports", ports,
	    "public", ing->is_public);
}

/* Adds "ingress" and "running" to a sandbox's object when it publishes ports. */
static void
add_ingress(json_t *o, const struct policy *pol, const char *id)
{
	struct policy_ingress ing;

	if (o == NULL || policy_ingress_find(pol, id, &ing, NULL) == -1)
		return;
	json_object_set_new(o, "ingress", ingress_json(&ing));
	json_object_set_new(o, "running", json_boolean(ing.running));
}

/*
 * The optional "ingress" object of POST /v1/sandboxes: the same rules as
 * the policy file's ingress: key. NULL, or a static message.
 */
static const char *
ingress_parse(json_t *j, struct policy_ingress *ing)
{
	const char *key, *s;
	json_t *v, *it;
	size_t i, k;

	memset(ing, 0, sizeof(*ing));
	if (!json_is_object(j))
		return "ingress: want an object";
	json_object_foreach(j, key, v) {
		if (strcmp(key, "address") == 0) {
			if ((s = json_string_value(v)) == NULL ||
			    netaddr_parse(s, strlen(s), &ing->address) == -1)
				return "ingress.address: want an IP address";
		} else if (strcmp(key, "ports") == 0) {
			if (!json_is_array(v) || json_array_size(v) == 0 ||
			    json_array_size(v) > POLICY_INGRESS_MAX_PORTS)
				return "ingress.ports: want 1 to 32 ports";
			json_array_foreach(v, i, it) {
				json_int_t port = json_integer_value(it);
				if (!json_is_integer(it) || port < 1 || port > 65535)
					return "ingress.ports: each is 1-65535";
				for (k = 0; k < ing->n_ports; k++)
					if (ing->ports[k] == port)
						break;
				if (k == ing->n_ports)
					ing->ports[ing->n_ports++] = (uint16_t)port;
			}
		} else if (strcmp(key, "token_sha256") == 0) {
			if (json_is_null(v))
				continue;
			if ((s = json_string_value(v)) == NULL ||
			    policy_sha256_hex_parse(s, ing->token_sha256) == -1)
				return "ingress.token_sha256: want 64 hex digits";
			ing->has_token = 1;
		} else if (strcmp(key, "public") == 0) {
			if (!json_is_boolean(v))
				return "ingress.public: want true or false";
			ing->is_public = json_is_true(v);
		} else
			return "ingress: unknown key (address, ports, "
			    "token_sha256, public)";
	}
	if (ing->address.family == 0)
		return "ingress.address is required";
	if (ing->n_ports == 0)
		return "ingress.ports is required";
	if (!ing->is_public && !ing->has_token)
		return "ingress.token_sha256 is required unless public is true";
	return NULL;
}

struct list_ctx {
	struct proxy	*p;
	struct policy	*pol;
	json_t		*arr;
};

static void
static_cb(const char *id, const char *policy_name, void *arg)
{
	struct list_ctx *lc = arg;
	json_t *o;

	o = json_pack("{s:s,s:s,s:b,s:o}", "id", id,
	    "policy", policy_name, "static", 1, "placeholders",
	    placeholders_json(lc->p, lc->pol, id, policy_name));
	add_ingress(o, lc->pol, id);
	json_array_append_new(lc->arr, o);
}

static void
dynamic_cb(const struct policy_identity *id, const struct netaddr *src,
    int64_t created, void *arg)
{
	struct list_ctx *lc = arg;
	char ip[NETADDR_STRLEN];

	json_t *o;

	netaddr_ntop(src, ip, sizeof(ip));
	o = json_pack("{s:s,s:s,s:b,s:s,s:I,s:o}",
	    "id", id->sandbox, "policy", id->policy, "static", 0, "source", ip,
	    "created", (json_int_t)created, "placeholders",
	    placeholders_json(lc->p, lc->pol, id->sandbox, id->policy));
	add_ingress(o, lc->pol, id->sandbox);
	json_array_append_new(lc->arr, o);
}

static void
list_sandboxes(struct proxy *p, struct evhttp_request *req, const char *only)
{
	struct list_ctx lc = { p, proxy_policy_get(p), json_array() };
	size_t i;

	policy_foreach_sandbox(lc.pol, static_cb, &lc);
	policy_registry_foreach(dynamic_cb, &lc);
	policy_unref(lc.pol);
	if (only == NULL) {
		admin_reply_json(req, 200, json_pack("{s:o}", "sandboxes", lc.arr));
		return;
	}
	for (i = 0; i < json_array_size(lc.arr); i++) {
		json_t *e = json_array_get(lc.arr, i);
		if (strcmp(json_string_value(json_object_get(e, "id")), only) == 0) {
			json_incref(e);
			json_decref(lc.arr);
			admin_reply_json(req, 200, e);
			return;
		}
	}
	json_decref(lc.arr);
	admin_reply_error(req, 404, "no such sandbox");
}

/* POST /v1/sandboxes {"id": "...", "policy": "...", "source": "198.18.0.2"} */
static void
register_sandbox(struct proxy *p, struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *id, *pname, *src, *ierr;
	struct policy_ingress ing;
	struct netaddr addr;
	struct policy *pol;
	json_error_t jerr;
	json_t *body, *ij;

	if (len > ADMIN_MAX_BODY) {
		admin_reply_error(req, 413, "body too large");
		return;
	}
	body = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &jerr);
	if (body == NULL || json_unpack(body, "{s:s,s:s,s:s}", "id", &id,
	    "policy", &pname, "source", &src) == -1) {
		json_decref(body);
		admin_reply_error(req, 400, "want {\"id\", \"policy\", \"source\"}");
		return;
	}
	if (!policy_valid_id(id, strlen(id)) ||
	    netaddr_parse(src, strlen(src), &addr) == -1) {
		json_decref(body);
		admin_reply_error(req, 400, "bad id or source address");
		return;
	}
	if ((ij = json_object_get(body, "ingress")) != NULL && !json_is_null(ij) &&
	    (ierr = ingress_parse(ij, &ing)) != NULL) {
		json_decref(body);
		admin_reply_error(req, 400, ierr);
		return;
	}
	pol = proxy_policy_get(p);
	{
		struct policy_identity st;
		if (policy_identity_by_id(pol, id, &st) == 0) {
			policy_unref(pol);
			json_decref(body);
			admin_reply_error(req, 409, "a static sandbox has this id");
			return;
		}
		/*
		 * A registered address is looked up before the static
		 * sandboxes: one inside a static sandbox's sources would take
		 * its traffic over (a source belongs to one sandbox only).
		 */
		if (policy_static_source(pol, &addr, &st) == 0) {
			char why[128];

			policy_unref(pol);
			json_decref(body);
			snprintf(why, sizeof(why), "the source is static sandbox "
			    "%s's", st.sandbox);
			admin_reply_error(req, 409, why);
			return;
		}
	}
	if (!policy_has(pol, pname)) {
		policy_unref(pol);
		json_decref(body);
		admin_reply_error(req, 400, "no such policy");
		return;
	}
	if (policy_registry_add_ingress(id, pname, &addr, (int64_t)time(NULL),
	    ij != NULL && !json_is_null(ij) ? &ing : NULL) == -1) {
		policy_unref(pol);
		json_decref(body);
		admin_reply_error(req, 409, "a sandbox with this id or source exists");
		return;
	}
	cred_issue(p, pol, id, pname);
	admin_audit(p, "POST", "/v1/sandboxes", 201, VERDICT_ALLOW, id, NULL);
	log_info("admin: sandbox %s registered (policy %s, source %s)", id,
	    pname, src);
	{
		json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "id", id, "policy",
		    pname, "source", src, "placeholders",
		    placeholders_json(p, pol, id, pname));
		add_ingress(o, pol, id);
		admin_reply_json(req, 201, o);
	}
	policy_unref(pol);
	json_decref(body);
}

/* POST /v1/sandboxes/{id}/state {"running": false}: ingress answers 503. */
static void
set_state(struct proxy *p, struct evhttp_request *req, const char *id)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_error_t jerr;
	json_t *body;
	int running;

	body = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &jerr);
	if (body == NULL || json_unpack(body, "{s:b}", "running", &running) == -1) {
		json_decref(body);
		admin_reply_error(req, 400, "want {\"running\": true|false}");
		return;
	}
	json_decref(body);
	if (policy_registry_set_running(id, running) == -1) {
		admin_reply_error(req, 404, "no such dynamic sandbox");
		return;
	}
	admin_audit(p, "POST", "/v1/sandboxes/state", 200, VERDICT_ALLOW, id,
	    running ? "running" : "not-running");
	log_info("admin: sandbox %s %s", id, running ? "running" : "not running");
	admin_reply_json(req, 200, json_pack("{s:s,s:b}", "id", id, "running", running));
}

/* Exchanges ended, and those denied, every listener: the rates' totals. */
static void
totals_cb(enum stats_listener lk, enum sg_verdict v, enum sg_reason r,
    unsigned long long n, void *arg)
{
	uint64_t *tot = arg;

	(void)lk;
	(void)r;
	tot[0] += n;
	if (v == VERDICT_DENY)
		tot[1] += n;
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
proxy_admin_tick(struct proxy *p)
{
	uint64_t tot[RATE_SERIES] = { 0, 0 };

	stats_foreach_decision(p->stats, totals_cb, tot);
	rate_sample(&p->rate, mono_ms(), tot);
}

static json_t *
rfc3339(time_t t)
{
	struct tm tm;
	char buf[32];

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return json_null();
	return json_string(buf);
}

static json_t *
listen_json(const struct config_listen *l)
{
	return l->enabled ? json_string(l->text) : json_null();
}

static void
count_dynamic(const struct policy_identity *id, const struct netaddr *src,
    int64_t created, void *arg)
{
	(void)id;
	(void)src;
	(void)created;
	(*(size_t *)arg)++;
}

static json_t *
last_reload_json(const struct proxy_reload_last *l)
{
	if (l->at == 0)
		return json_null();
	return json_pack("{s:o,s:b,s:s,s:i,s:i,s:o}", "at", rfc3339(l->at),
	    "ok", l->ok, "source", l->source, "errors", (int)l->n_errors,
	    "needs_restart", (int)l->n_restart, "first_error",
	    l->first_error[0] != '\0' ? json_string(l->first_error) :
	    json_null());
}

/*
 * GET /v1/status: what `sandgate status` prints (docs/admin-api.md). The
 * rates are over the last minute (less since start-up), from the totals
 * proxy_admin_tick samples each second and the totals now.
 */
static void
status(struct proxy *p, struct evhttp_request *req)
{
	const struct config *c = p->cfg;
	struct policy *pol = proxy_policy_get(p);
	struct policy_counts pc;
	struct audit_stats as;
	uint64_t tot[RATE_SERIES] = { 0, 0 };
	double rates[RATE_SERIES], span;
	size_t dynamic = 0;
	char sum[256];
	time_t now = time(NULL);
	json_t *lis, *pols, *rate, *audit, *j;

	policy_summary(pol, sum, sizeof(sum));
	policy_counts(pol, &pc);
	policy_unref(pol);
	policy_registry_foreach(count_dynamic, &dynamic);
	audit_get_stats(p->audit, &as);
	stats_foreach_decision(p->stats, totals_cb, tot);
	(void)rate_read(&p->rate, mono_ms(), tot, rates, &span);
	lis = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:s?}",
	    "http", listen_json(&c->listen_http),
	    "socks5", listen_json(&c->listen_socks5),
	    "dns", listen_json(&c->listen_dns),
	    "transparent", listen_json(&c->listen_transparent),
	    "ingress", listen_json(&c->listen_ingress),
	    "metrics", listen_json(&c->listen_metrics),
	    "admin", c->admin_socket);
	pols = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "files", (json_int_t)pc.files, "sandboxes", (json_int_t)pc.sandboxes,
	    "dynamic_sandboxes", (json_int_t)dynamic,
	    "policies", (json_int_t)pc.policies, "rules", (json_int_t)pc.rules,
	    "credentials", (json_int_t)pc.credentials,
	    "report", (json_int_t)pc.report);
	rate = json_pack("{s:f,s:f,s:f,s:I,s:I}", "window_s", span,
	    "requests_per_s", rates[0], "denials_per_s", rates[1],
	    "requests_total", (json_int_t)tot[0],
	    "denials_total", (json_int_t)tot[1]);
	audit = json_pack("{s:b,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "healthy", !as.unavailable && as.checkpoint_failures == 0,
	    "unavailable", as.unavailable,
	    "rows_written", (json_int_t)as.rows_written,
	    "rows_waiting", (json_int_t)as.rows_waiting,
	    "rows_dropped", (json_int_t)as.rows_dropped,
	    "write_failures", (json_int_t)as.write_failures,
	    "unavailable_episodes", (json_int_t)as.unavailable_episodes,
	    "checkpoint_failures", (json_int_t)as.checkpoint_failures,
	    "stalls", (json_int_t)as.stalls);
	j = json_pack("{s:s,s:o,s:I,s:i,s:I,s:I,s:I,s:o,s:s,s:o,s:o,s:o,s:i,"
	    "s:{s:b,s:i,s:I},s:o}",
	    "version", SANDGATE_VERSION, "started", rfc3339(p->started),
	    "uptime_s", (json_int_t)(now > p->started ? now - p->started : 0),
	    "workers", p->n_workers,
	    "connections", (json_int_t)atomic_load(&p->n_conns),
	    "max_connections", (json_int_t)c->max_connections,
	    "refused", (json_int_t)atomic_load(&p->n_refused),
	    "listeners", lis, "policy", sum, "policies", pols,
	    "rates", rate, "audit", audit,
	    "nflog_group", proxy_nflog_group(p),
	    "keeper", "up", keeper_client_up(p->kc), "pid",
	    atomic_load(&p->keeper_pid), "restarts",
	    (json_int_t)atomic_load(&p->n_keeper_restarts),
	    "last_reload", last_reload_json(&p->last_reload));
	if (j == NULL) {
		admin_reply_error(req, 500, "out of memory");
		return;
	}
	admin_reply_json(req, 200, j);
}

/* A JSON string of s; bytes that are not UTF-8 become '?', never lost. */
static json_t *
json_text(const char *s)
{
	json_t *j;
	char *c;
	size_t i;

	if ((j = json_string(s)) != NULL || (c = strdup(s)) == NULL)
		return j;
	for (i = 0; c[i] != '\0'; i++)
		if ((unsigned char)c[i] >= 0x80)
			c[i] = '?';
	j = json_string(c);
	free(c);
	return j;
}

/*
 * The answer of a reload that applied the policies: what it did not apply,
 * each restart-only key that changed, by name, and a message saying so.
 */
static json_t *
reload_ok_json(const struct proxy_reload_info *ri)
{
	char msg[1024] = "new policy in force";
	size_t i, off;
	json_t *keys;
	int n;

	if ((keys = json_array()) == NULL)
		return NULL;
	if (ri->n_restart > 0) {
		off = (size_t)snprintf(msg, sizeof(msg), "needs a restart: ");
		for (i = 0; i < ri->n_restart; i++) {
			json_array_append_new(keys, json_string(ri->restart[i]));
			n = snprintf(msg + off, sizeof(msg) - off, "%s%s",
			    i > 0 ? ", " : "", ri->restart[i]);
			if (n > 0 && (size_t)n < sizeof(msg) - off)
				off += (size_t)n;
		}
	}
	return json_pack("{s:b,s:s,s:o}", "ok", 1, "message", msg,
	    "needs_restart", keys);
}

/*
 * POST /v1/reload: 200 {"ok": true, "message", "needs_restart": [KEY...]},
 * or 400 with every error, each as its parts and as the FILE:LINE:COL line
 * `policy check` would print; the old policy stays in force.
 */
static void
reload(struct proxy *p, struct evhttp_request *req)
{
	struct proxy_reload_info ri;
	struct diag d;
	char line[2048];
	json_t *errs, *o;
	size_t i;

	diag_init(&d);
	if (proxy_reload(p, "admin", &d, &ri) == 0) {
		admin_reply_json(req, 200, reload_ok_json(&ri));
		diag_free(&d);
		return;
	}
	errs = json_array();
	for (i = 0; errs != NULL && i < d.n; i++) {
		(void)diag_format(&d.v[i], line, sizeof(line));
		o = json_pack("{s:o*,s:i,s:i,s:o*,s:o*}", "file",
		    json_text(d.v[i].file), "line", d.v[i].line, "col",
		    d.v[i].col, "message", json_text(d.v[i].msg), "text",
		    json_text(line));
		if (o != NULL)
			json_array_append_new(errs, o);
	}
	snprintf(line, sizeof(line), "the new policy has %zu error%s; the old "
	    "one stays in force", d.n, d.n == 1 ? "" : "s");
	admin_reply_json(req, 400, json_pack("{s:b,s:s,s:o*}", "ok", 0, "error",
	    line, "errors", errs));
	diag_free(&d);
}

static void
admin_cb(struct evhttp_request *req, void *arg)
{
	struct proxy *p = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *uri = evhttp_request_get_uri(req);
	const char *pfx = "/v1/sandboxes/";

	size_t ulen = strlen(uri), plen = strlen(pfx), slen = strlen("/state");

	if (admin_approvals(p, req, uri, (int)cmd))
		return;
	if (strcmp(uri, "/v1/status") == 0 && cmd == EVHTTP_REQ_GET)
		status(p, req);
	else if (ulen > plen + slen && strncmp(uri, pfx, plen) == 0 &&
	    strcmp(uri + ulen - slen, "/state") == 0 && cmd == EVHTTP_REQ_POST) {
		char id[POLICY_ID_MAX + 1];
		size_t idlen = ulen - plen - slen;

		if (idlen > POLICY_ID_MAX) {
			admin_reply_error(req, 404, "no such dynamic sandbox");
			return;
		}
		memcpy(id, uri + plen, idlen);
		id[idlen] = '\0';
		set_state(p, req, id);
	}
	else if (strcmp(uri, "/v1/sandboxes") == 0 && cmd == EVHTTP_REQ_GET)
		list_sandboxes(p, req, NULL);
	else if (strcmp(uri, "/v1/sandboxes") == 0 && cmd == EVHTTP_REQ_POST)
		register_sandbox(p, req);
	else if (strncmp(uri, pfx, strlen(pfx)) == 0 && cmd == EVHTTP_REQ_GET)
		list_sandboxes(p, req, uri + strlen(pfx));
	else if (strncmp(uri, pfx, strlen(pfx)) == 0 &&
	    cmd == EVHTTP_REQ_DELETE) {
		const char *id = uri + strlen(pfx);
		if (policy_registry_remove(id) == -1) {
			admin_reply_error(req, 404, "no such dynamic sandbox");
			return;
		}
		cred_forget(p, id);
		/* Its questions and answers are no later sandbox's. */
		pthread_mutex_lock(&p->approval_mtx);
		approval_forget(p->approvals, id);
		pthread_mutex_unlock(&p->approval_mtx);
		admin_audit(p, "DELETE", "/v1/sandboxes", 200, VERDICT_ALLOW,
		    id, NULL);
		log_info("admin: sandbox %s removed", id);
		admin_reply_json(req, 200, json_pack("{s:s}", "removed", id));
	} else if (strcmp(uri, "/v1/reload") == 0 && cmd == EVHTTP_REQ_POST) {
		reload(p, req);
	} else
		admin_reply_error(req, 404, "no such endpoint");
}

int
proxy_admin_start(struct proxy *p)
{
	struct sockaddr_un sun;
	char tmp[sizeof(sun.sun_path)];
	mode_t old;
	int fd, n;

	if (p->cfg->admin_socket == NULL)
		return 0;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	/*
	 * Bound under a name of its own, listening, and only then renamed
	 * into place: the path never names a socket that refuses
	 * connections (bind() makes the file, listen() the queue), so a
	 * script that waits for the file can connect at once.
	 */
	if (strlen(p->cfg->admin_socket) >= sizeof(sun.sun_path)) {
		log_warnx("admin socket path too long: %s",
		    p->cfg->admin_socket);
		return -1;
	}
	n = snprintf(tmp, sizeof(tmp), "%s.%ld", p->cfg->admin_socket,
	    (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))	/* no room: bound in place */
		n = snprintf(tmp, sizeof(tmp), "%s", p->cfg->admin_socket);
	memcpy(sun.sun_path, tmp, (size_t)n + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	(void)unlink(tmp);
	old = umask(077);	/* born 0600: never a moment others could connect */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    listen(fd, 64) == -1) {
		umask(old);
		log_warn("admin socket %s", tmp);
		(void)unlink(tmp);
		close(fd);
		return -1;
	}
	umask(old);
	(void)chmod(tmp, 0600);
	if (strcmp(tmp, p->cfg->admin_socket) != 0 &&
	    rename(tmp, p->cfg->admin_socket) == -1) {
		log_warn("admin socket %s", p->cfg->admin_socket);
		(void)unlink(tmp);
		close(fd);
		return -1;
	}
	if ((p->admin = evhttp_new(p->main_base)) == NULL ||
	    evhttp_accept_socket(p->admin, fd) == -1) {
		close(fd);
		return -1;
	}
	evhttp_set_allowed_methods(p->admin, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_DELETE);
	evhttp_set_max_body_size(p->admin, ADMIN_MAX_BODY);
	evhttp_set_gencb(p->admin, admin_cb, p);
	log_info("admin API on %s", p->cfg->admin_socket);
	return 0;
}

void
proxy_admin_stop(struct proxy *p)
{
	if (p->admin != NULL) {
		evhttp_free(p->admin);
		p->admin = NULL;
		(void)unlink(p->cfg->admin_socket);
	}
}
