/*
 * Unit tests of the audit log's outbound formats: a row as an RFC 5424 or
 * JSON syslog message (audit_syslog_format: escaping of what sandboxes
 * sent, severity, absent columns) and as an OCSF event (audit_write_ocsf:
 * class, activity, type_uid, severity, status per docs/audit.md, invalid
 * UTF-8, no non-IP in an ip field, the DNS resolver and answers, the url
 * object), and policy suggest's document (core/policy_suggest.c) for rows
 * that try to smuggle YAML.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "audit/audit_query.h"
#include "audit/audit_syslog.h"
#include "core/policy_suggest.h"
#include "core/psl.h"

struct trow {
	int64_t		 id;
	const char	*kind, *client, *host, *ip, *method, *path, *decision;
	const char	*rule, *reason, *credential, *sandbox;
	int64_t		 port, status;
};

static void
text(struct audit_val *v, const char *s)
{
	memset(v, 0, sizeof(*v));
	if (s == NULL) {
		v->type = AUDIT_V_NULL;
		return;
	}
	v->type = AUDIT_V_TEXT;
	v->p = (const unsigned char *)s;
	v->len = strlen(s);
}

static void
num(struct audit_val *v, int64_t x)
{
	memset(v, 0, sizeof(*v));
	if (x < 0) {
		v->type = AUDIT_V_NULL;
		return;
	}
	v->type = AUDIT_V_INT;
	v->i = x;
}

static void
mkrow(struct audit_val *row, const struct trow *t)
{
	num(&row[AUDIT_COL_ID], t->id);
	text(&row[AUDIT_COL_TS], "2026-12-03T06:00:00.123Z");
	text(&row[AUDIT_COL_SANDBOX], t->sandbox);
	text(&row[AUDIT_COL_KIND], t->kind);
	text(&row[AUDIT_COL_CLIENT], t->client);
	text(&row[AUDIT_COL_HOST], t->host);
	text(&row[AUDIT_COL_IP], t->ip);
	num(&row[AUDIT_COL_PORT], t->port);
	text(&row[AUDIT_COL_COUNTRY], NULL);
	num(&row[AUDIT_COL_ASN], -1);
	text(&row[AUDIT_COL_METHOD], t->method);
	text(&row[AUDIT_COL_PATH], t->path);
	num(&row[AUDIT_COL_STATUS], t->status);
	text(&row[AUDIT_COL_DECISION], t->decision);
	text(&row[AUDIT_COL_RULE], t->rule);
	text(&row[AUDIT_COL_REASON], t->reason);
	text(&row[AUDIT_COL_CREDENTIAL], t->credential);
	num(&row[AUDIT_COL_BYTES_UP], 10);
	num(&row[AUDIT_COL_BYTES_DOWN], 20);
	num(&row[AUDIT_COL_DURATION_MS], 3);
	text(&row[AUDIT_COL_PREV_HASH], "00");
	text(&row[AUDIT_COL_HASH], "ab");
}

static void
test_syslog(void)
{
	struct audit_val row[AUDIT_NCOLS];
	struct trow t = { 7, "http", "127.0.0.1:5000", "a\"b]c\\d.test",
	    NULL, "GET", "/x\ny\"]", "deny", "p:deny[0]", "policy-deny",
	    NULL, "box", 80, 403 };
	char buf[4096], small[16];
	size_t n;

	mkrow(row, &t);
	n = audit_syslog_format(row, 0, "gw1", 42, buf, sizeof(buf));
	CHECK(n == strlen(buf));
	/* facility 13, severity 4 (deny) */
	CHECK(strncmp(buf, "<108>1 2026-12-03T06:00:00.123Z gw1 sandgate 42 "
	    "audit [sandgate@32473 id=\"7\" sandbox=\"box\"", 86) == 0);
	CHECK_MSG(strstr(buf, "host=\"a\\\"b\\]c\\\\d.test\"") != NULL, "%s", buf);
	CHECK_MSG(strstr(buf, "path=\"/x?y\\\"\\]\"") != NULL, "%s", buf);
	CHECK(strstr(buf, "ip=") == NULL);		/* absent: left out */
	CHECK(strstr(buf, "prev_hash") == NULL);
	CHECK(strstr(buf, "hash=\"ab\"") != NULL);
	CHECK(strchr(buf, '\n') == NULL);
	/* the message: DECISION KIND HOST REASON (docs/audit.md) */
	{
		const char *want = "] deny http a\\\"b\\]c\\\\d.test policy-deny";

		CHECK_MSG(n > strlen(want) && strcmp(buf + n - strlen(want),
		    want) == 0, "%s", buf);
	}
	/* cut to the buffer, NUL-terminated, the length it needs returned */
	CHECK(audit_syslog_format(row, 0, "gw1", 42, small, sizeof(small)) == n);
	CHECK(strlen(small) == sizeof(small) - 1);

	t.decision = "report";
	mkrow(row, &t);
	n = audit_syslog_format(row, 1, "gw1", 42, buf, sizeof(buf));
	CHECK(strncmp(buf, "<109>1 ", 7) == 0);
	CHECK(strchr(buf, '\n') == NULL);
	{
		const char *js = strstr(buf, " audit - ");
		json_error_t e;
		json_t *o;

		CHECK(js != NULL);
		o = js ? json_loads(js + 9, 0, &e) : NULL;
		CHECK(o != NULL);
		CHECK(json_integer_value(json_object_get(o, "id")) == 7);
		CHECK_STR(json_string_value(json_object_get(o, "path")),
		    "/x\ny\"]");
		json_decref(o);
	}
}

static json_t *
ocsf_of(const struct trow *t)
{
	struct audit_val row[AUDIT_NCOLS];
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_error_t e;
	json_t *o;

	mkrow(row, t);
	audit_write_ocsf(f, row);
	fclose(f);
	CHECK(len > 0 && buf[len - 1] == '\n' && strchr(buf, '\n') ==
	    buf + len - 1);
	o = json_loads(buf, 0, &e);
	CHECK_MSG(o != NULL, "%s: %s", e.text, buf);
	free(buf);
	return o;
}

static int64_t
jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

struct ocsf_case {
	struct trow	 t;
	int		 cls, act, sev, status, action;
};

static const struct ocsf_case ocsf_cases[] = {
	{ { 1, "http", "127.0.0.1:5000", "ok.test", "151.101.0.1", "GET", "/a",
	    "allow", "p:allow[0]", NULL, NULL, "box", 80, 200 },
	    4002, 3, 1, 1, 1 },
	{ { 2, "connect", "127.0.0.1:5001", "ok.test", "151.101.0.1",
	    "POST", "/b", "deny", "p:deny[1]", "policy-deny", NULL, "box", 443,
	    403 }, 4002, 6, 3, 2, 2 },
	{ { 3, "connect", "127.0.0.1:5002", "ok.test", "151.101.0.1",
	    "CONNECT", NULL, "allow", "p:allow[0]", NULL, NULL, "box", 443,
	    200 }, 4001, 6, 1, 1, 1 },
	{ { 4, "socks5", "[::1]:5003", "no.test", NULL, "CONNECT", NULL,
	    "deny", "default-deny", "policy-deny", NULL, "box", 443, 403 },
	    4001, 5, 3, 2, 2 },
	{ { 5, "transparent", "198.18.0.2:5004", "ok.test", "151.101.0.1",
	    "CONNECT", NULL, "error", "p:allow[0]", "upstream-connect", NULL,
	    "box", 443, 502 }, 4001, 4, 2, 2, 1 },
	{ { 6, "dns", "127.0.0.1:5005", "ok.test", "151.101.0.1", "A", NULL,
	    "report", "default-deny", "policy-deny", NULL, "box", -1, 0 },
	    4003, 2, 2, 1, 1 },
	{ { 7, "http", "127.0.0.1:5006", "api.test", NULL, "PATCH", "/c",
	    "deny", "p:allow[0]", "credential-misuse", "key", "box", 80, 403 },
	    4002, 99, 4, 2, 2 },	/* PATCH is no OCSF 1.1 activity */
	{ { 8, "http", "127.0.0.1:5007", "api.test", NULL, "PROPFIND", "/c",
	    "allow", "p:allow[0]", NULL, NULL, "box", 80, 207 },
	    4002, 99, 1, 1, 1 },
	{ { 9, "admin", NULL, NULL, NULL, "POST", "/events?through=8",
	    "allow", "checkpoint", "checkpoint", NULL, NULL, -1, -1 },
	    0, 99, 1, 1, 0 },
};

static void
test_ocsf(void)
{
	size_t i;
	json_t *o, *x;

	for (i = 0; i < sizeof(ocsf_cases) / sizeof(ocsf_cases[0]); i++) {
		const struct ocsf_case *c = &ocsf_cases[i];

		if ((o = ocsf_of(&c->t)) == NULL)
			continue;
		CHECK_MSG(jint(o, "class_uid") == c->cls &&
		    jint(o, "activity_id") == c->act &&
		    jint(o, "type_uid") == c->cls * 100 + c->act &&
		    jint(o, "severity_id") == c->sev &&
		    jint(o, "status_id") == c->status &&
		    jint(o, "category_uid") == (c->cls ? 4 : 0),
		    "case %zu: class %lld act %lld sev %lld status %lld", i,
		    (long long)jint(o, "class_uid"),
		    (long long)jint(o, "activity_id"),
		    (long long)jint(o, "severity_id"),
		    (long long)jint(o, "status_id"));
		CHECK_MSG(c->action == 0 ? json_object_get(o, "action_id") ==
		    NULL : jint(o, "action_id") == c->action, "case %zu", i);
		x = json_object_get(o, "metadata");
		CHECK(jint(o, "time") == 1796277600123LL);
		CHECK(json_integer_value(json_object_get(o, "time")) > 0);
		CHECK(atoll(json_string_value(json_object_get(x, "uid"))) ==
		    c->t.id);
		if (c->cls == 4003) {
			CHECK(jint(o, "rcode_id") == 0);
			CHECK_STR(json_string_value(json_object_get(o, "rcode")),
			    "NoError");
		}
		if (c->t.client != NULL && c->t.client[0] == '[') {
			x = json_object_get(o, "src_endpoint");
			CHECK_STR(json_string_value(json_object_get(x, "ip")),
			    "::1");
			CHECK(jint(x, "port") == 5003);
		}
		json_decref(o);
	}
}

static const char *
jstr(json_t *o, const char *path)
{
	char key[64];
	size_t n;

	while (o != NULL && (n = strcspn(path, ".")) < strlen(path)) {
		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		o = json_object_get(o, key);
		path += n + 1;
	}
	return json_string_value(json_object_get(o, path));
}

/* Every "ip" key anywhere holds an address; 0 when one does not. */
static int
ips_ok(json_t *o)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_array(o)) {
		json_array_foreach(o, i, v)
			if (!ips_ok(v))
				return 0;
		return 1;
	}
	json_object_foreach(o, k, v) {
		if (strcmp(k, "ip") == 0 && (!json_is_string(v) ||
		    (strchr(json_string_value(v), '.') == NULL &&
		    strchr(json_string_value(v), ':') == NULL) ||
		    strstr(json_string_value(v), ".sock") != NULL))
			return 0;
		if ((json_is_object(v) || json_is_array(v)) && !ips_ok(v))
			return 0;
	}
	return 1;
}

/*
 * p:allow[1] intercepts, p:allow[0] passes TLS through, others: unknown;
 * keys.test is a credential's host: intercepted under any rule.
 */
static int
fake_rule_tls(void *arg, const char *rule, const char *host)
{
	(void)arg;
	if (strcmp(host, "keys.test") == 0 &&
	    strncmp(rule, "p:allow[", 8) == 0)
		return 1;
	return strcmp(rule, "p:allow[1]") == 0 ? 1 :
	    strcmp(rule, "p:allow[0]") == 0 ? 0 : -1;
}

static void
test_ocsf_shape(void)
{
	struct audit_ocsf_env env = { "127.0.0.1", 5353, 0, NULL, NULL };
	struct trow adm = { 20, "admin", "admin.sock", NULL, NULL, "POST",
	    "/v1/sandboxes", "allow", NULL, NULL, NULL, "box", -1, 201 };
	struct trow dns = { 21, "dns", "127.0.0.1:4000", "ok.test",
	    "198.18.0.7", "A", NULL, "allow", "p:allow[0]", NULL, NULL, "box",
	    -1, 0 };
	struct trow nx = { 22, "dns", "127.0.0.1:4001", "no.test", NULL, "A",
	    NULL, "deny", "default-deny", "policy-deny", NULL, "box", -1, 3 };
	struct trow h = { 23, "http", "[::1]:4002", "ok.test", "host.test",
	    "GET", "/a/b?x=1&y=2", "allow", "p:allow[0]", NULL, NULL, "box",
	    8080, 200 };
	struct trow tun = { 24, "connect", "127.0.0.1:4003", "api.test", NULL,
	    "POST", "/v1", "allow", "p:allow[0]", NULL, NULL, "box", 443, 201 };
	struct trow unans = { 25, "http", "127.0.0.1:4004", "ok.test", NULL,
	    "GET", "/slow", "error", "p:allow[0]", "upstream-timeout", NULL,
	    "box", 80, -1 };
	json_t *o, *a;

	audit_ocsf_set_env(&env);
	/* admin rows: a Base Event, the socket nowhere as an ip */
	if ((o = ocsf_of(&adm)) != NULL) {
		CHECK(jint(o, "class_uid") == 0 && jint(o, "type_uid") == 99);
		CHECK(json_object_get(o, "src_endpoint") == NULL);
		CHECK(json_object_get(o, "dst_endpoint") == NULL);
		CHECK(json_object_get(o, "action_id") == NULL);
		CHECK(ips_ok(o));
		CHECK_STR(jstr(o, "unmapped.client"), "admin.sock");
		CHECK_STR(jstr(o, "message"), "admin POST /v1/sandboxes");
		json_decref(o);
	}
	/* dns: the resolver is the destination, the name the query */
	if ((o = ocsf_of(&dns)) != NULL) {
		CHECK_STR(jstr(o, "dst_endpoint.ip"), "127.0.0.1");
		CHECK(jint(json_object_get(o, "dst_endpoint"), "port") == 5353);
		CHECK(jstr(o, "dst_endpoint.hostname") == NULL);
		CHECK_STR(jstr(o, "query.hostname"), "ok.test");
		CHECK_STR(jstr(o, "query.type"), "A");
		a = json_object_get(o, "answers");
		CHECK(json_array_size(a) == 1);
		CHECK_STR(jstr(json_array_get(a, 0), "rdata"), "198.18.0.7");
		CHECK_STR(jstr(o, "src_endpoint.ip"), "127.0.0.1");
		CHECK(ips_ok(o));
		json_decref(o);
	}
	if ((o = ocsf_of(&nx)) != NULL) {
		CHECK(json_object_get(o, "answers") == NULL);
		CHECK_STR(jstr(o, "rcode"), "NXDomain");
		json_decref(o);
	}
	/* http: a whole url; "host.test" in the ip column is no address */
	if ((o = ocsf_of(&h)) != NULL) {
		CHECK_STR(jstr(o, "http_request.url.url_string"),
		    "http://ok.test:8080/a/b?x=1&y=2");
		CHECK_STR(jstr(o, "http_request.url.scheme"), "http");
		CHECK_STR(jstr(o, "http_request.url.path"), "/a/b");
		CHECK_STR(jstr(o, "http_request.url.query_string"), "x=1&y=2");
		CHECK_STR(jstr(o, "src_endpoint.ip"), "::1");
		CHECK(jstr(o, "dst_endpoint.ip") == NULL);
		CHECK(ips_ok(o));
		json_decref(o);
	}
	if ((o = ocsf_of(&tun)) != NULL) {
		CHECK_STR(jstr(o, "http_request.url.url_string"),
		    "https://api.test/v1");
		json_decref(o);
	}
	/* in a tunnel: the rule says whether the request was TLS */
	env.rule_tls = fake_rule_tls;
	audit_ocsf_set_env(&env);
	if ((o = ocsf_of(&tun)) != NULL) {
		CHECK_STR(jstr(o, "http_request.url.url_string"),
		    "http://api.test:443/v1");
		json_decref(o);
	}
	/* the same rule toward a credential's host: intercepted */
	tun.host = "keys.test";
	if ((o = ocsf_of(&tun)) != NULL) {
		CHECK_STR(jstr(o, "http_request.url.url_string"),
		    "https://keys.test/v1");
		json_decref(o);
	}
	tun.host = "api.test";
	tun.rule = "p:allow[1]";
	tun.port = 8443;
	if ((o = ocsf_of(&tun)) != NULL) {
		CHECK_STR(jstr(o, "http_request.url.url_string"),
		    "https://api.test:8443/v1");
		json_decref(o);
	}
	/* a request without a response: Network Activity with its url */
	if ((o = ocsf_of(&unans)) != NULL) {
		CHECK(jint(o, "class_uid") == 4001 && jint(o, "activity_id") ==
		    4);
		CHECK(json_object_get(o, "http_request") == NULL);
		CHECK_STR(jstr(o, "url.url_string"), "http://ok.test/slow");
		json_decref(o);
	}
	memset(&env, 0, sizeof(env));
	audit_ocsf_set_env(&env);
}

static void
test_ocsf_bad_utf8(void)
{
	struct trow t = { 10, "http", "127.0.0.1:1", "ok.test", NULL, "GET",
	    "/\xff\xfe/\xc3\xa9", "allow", "p:allow[0]", NULL, NULL, "box",
	    80, 200 };
	json_t *o = ocsf_of(&t), *req;

	CHECK(o != NULL);
	req = json_object_get(json_object_get(o, "http_request"), "url");
	CHECK_STR(json_string_value(json_object_get(req, "path")), "/?" "?/?" "?");
	json_decref(o);
}

static void
test_suggest_hostile(void)
{
	struct suggest *s = suggest_new(NULL);
	struct suggest_row r;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	memset(&r, 0, sizeof(r));
	r.kind = "http";
	r.decision = "report";
	r.reason = "policy-deny";
	r.ip = "";
	r.n = 2;
	r.port = 443;
	r.first = "2026-12-03T06:00:00.000Z";
	r.last = "2026-12-03T06:00:01.000Z\nallow_private: [0.0.0.0/0]";
	r.rule = "default-deny\n    allow_private: [0.0.0.0/0]";
	r.host = "evil.test\n    allow_private: [0.0.0.0/0]";
	CHECK(suggest_add(s, &r) == 0);		/* not a name: ignored */
	r.host = "EVIL.test";			/* not normalised: ignored */
	CHECK(suggest_add(s, &r) == 0);
	r.host = "ok.pkgs.test";
	CHECK(suggest_add(s, &r) == 0);
	r.host = "169.254.169.254";
	CHECK(suggest_add(s, &r) == 0);
	f = open_memstream(&buf, &len);
	suggest_write(s, f, "p", NULL, 0);
	fclose(f);
	CHECK(strstr(buf, "allow_private: [0.0.0.0/0]") == NULL);
	CHECK(strstr(buf, "evil") == NULL);
	CHECK(strstr(buf, "      - host: ok.pkgs.test    # 2 rows (report), "
	    "first 2026-12-03T06:00:00.000Z, last -\n") != NULL);
	CHECK(strstr(buf, "#   169.254.169.254 port 443: internal address") !=
	    NULL);
	CHECK(strstr(buf, "(default-deny)") == NULL);	/* the bad rule dropped */
	free(buf);
	suggest_free(s);
}

int
main(void)
{
	test_syslog();
	test_ocsf();
	test_ocsf_shape();
	test_ocsf_bad_utf8();
	test_suggest_hostile();
	return check_summary();
}
