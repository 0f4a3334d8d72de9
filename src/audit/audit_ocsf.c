/*
 * Audit rows as OCSF 1.1 events (audit_write_ocsf), one JSON object per
 * line, built with jansson: HTTP Activity (4002), Network Activity (4001)
 * and DNS Activity (4003) in category Network Activity (4); the gateway's
 * own rows (admin, vault) as Base Event (0). docs/audit.md has the table;
 * tests/e2e/data/ocsf/ holds the JSON Schemas every event must meet.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "audit/audit_query.h"
#include "core/reason.h"

#define OCSF_VERSION	"1.1.0"

/* What the exporter knows that a row does not (audit_ocsf_set_env). */
static struct audit_ocsf_env ocsf_env;

void
audit_ocsf_set_env(const struct audit_ocsf_env *env)
{
	ocsf_env = *env;
}

/*
 * Bytes as a JSON string; when they are not UTF-8, or hold a NUL, every
 * byte outside printable ASCII becomes '?'.
 */
static json_t *
jbytes(const unsigned char *p, size_t len)
{
	char *buf;
	json_t *j;
	size_t i;

	if (len == 0)
		return json_string("");
	/* NUL is valid JSON (\u0000), but many readers refuse it. */
	if (memchr(p, '\0', len) == NULL &&
	    (j = json_stringn((const char *)p, len)) != NULL)
		return j;
	if ((buf = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0; i < len; i++)
		buf[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	j = json_stringn(buf, len);
	free(buf);
	return j;
}

/* A TEXT value as a JSON string. */
static json_t *
jtext(const struct audit_val *v)
{
	return v->type == AUDIT_V_TEXT ? jbytes(v->p, v->len) : NULL;
}

/* The value's text (NUL-terminated copy into buf), or NULL. */
static const char *
ctext(const struct audit_val *v, char *buf, size_t len)
{
	size_t n;

	if (v->type != AUDIT_V_TEXT || len == 0)
		return NULL;
	n = v->len < len - 1 ? v->len : len - 1;
	memcpy(buf, v->p, n);
	buf[n] = '\0';
	return buf;
}

static void
set(json_t *o, const char *key, json_t *v)
{
	if (v != NULL)
		json_object_set_new(o, key, v);
}

static void
set_int(json_t *o, const char *key, const struct audit_val *v)
{
	if (v->type == AUDIT_V_INT)
		json_object_set_new(o, key, json_integer(v->i));
}

/* An OCSF ip_t holds an address and nothing else. */
static int
is_ip(const char *s)
{
	unsigned char a[16];

	return s != NULL && (inet_pton(AF_INET, s, a) == 1 ||
	    inet_pton(AF_INET6, s, a) == 1);
}

/* A TEXT column that holds an IP address, as a JSON string, or NULL. */
static json_t *
jip(const struct audit_val *v)
{
	char buf[64];

	if (v->type != AUDIT_V_TEXT || v->len >= sizeof(buf) ||
	    !is_ip(ctext(v, buf, sizeof(buf))))
		return NULL;
	return json_string(buf);
}

static int
is_port(const struct audit_val *v)
{
	return v->type == AUDIT_V_INT && v->i >= 0 && v->i <= 65535;
}

/* HTTP Activity's activity_id in OCSF 1.1 is the method (PATCH is not one). */
static const char *const http_acts[] = {
	NULL, "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT",
	"TRACE"
};
static const char *const http_act_names[] = {
	"Unknown", "Connect", "Delete", "Get", "Head", "Options", "Post", "Put",
	"Trace"
};

static int
http_activity(const char *method, const char **name)
{
	size_t i;

	for (i = 1; method != NULL && i < sizeof(http_acts) /
	    sizeof(http_acts[0]); i++)
		if (strcmp(method, http_acts[i]) == 0) {
			*name = http_act_names[i];
			return (int)i;
		}
	*name = "Other";
	return 99;
}

static const char *const rcode_names[] = {
	"NoError", "FormError", "ServError", "NXDomain", "NotImp", "Refused",
	"YXDomain", "YXRRSet", "NXRRSet", "NotAuth", "NotZone", "DSOTYPENI"
};

/*
 * "addr:port" or "[v6]:port" into a src_endpoint; the ip only when it is
 * one (never "admin.sock"). An object, maybe empty: the classes that have
 * a src_endpoint require it.
 */
static json_t *
endpoint_of_client(const struct audit_val *v)
{
	char buf[128], *colon, *host = buf;
	json_t *o = json_object();

	if (ctext(v, buf, sizeof(buf)) == NULL)
		return o;
	if ((colon = strrchr(buf, ':')) != NULL && colon[1] != '\0' &&
	    strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
	    strlen(colon + 1) <= 5 && atoi(colon + 1) <= 65535 &&
	    (buf[0] == '[' || strchr(buf, ':') == colon)) {
		*colon = '\0';
		json_object_set_new(o, "port", json_integer(atoi(colon + 1)));
	}
	if (host[0] == '[') {
		host++;
		host[strcspn(host, "]")] = '\0';
	}
	if (is_ip(host))
		json_object_set_new(o, "ip", json_string(host));
	else
		json_object_del(o, "port");
	return o;
}

static int
severity_of(enum sg_verdict v, const char *reason, const char **name)
{
	if (v == VERDICT_DENY && reason != NULL && (strcmp(reason,
	    reason_word(REASON_CRED_MISUSE)) == 0 || strcmp(reason,
	    reason_word(REASON_FOREIGN_CRED)) == 0 || strcmp(reason,
	    reason_word(REASON_IP_PROHIBITED)) == 0)) {
		*name = "High";
		return 4;
	}
	if (v == VERDICT_DENY) {
		*name = "Medium";
		return 3;
	}
	if (v == VERDICT_REPORT || v == VERDICT_ERROR) {
		*name = "Low";
		return 2;
	}
	*name = "Informational";
	return 1;
}

/* What a row is, in OCSF's words. */
struct ocsf_kind {
	char		 kind[16], decision[16], method[32], reason[64];
	enum sg_verdict	 verdict;	/* decision, parsed once */
	int		 is_request;	/* an HTTP request, answered or not */
	int		 is_http, is_dns, is_own, allowed;
	int		 cls, act;
	const char	*cls_name, *act_name;
};

static void
ocsf_classify(const struct audit_val *row, struct ocsf_kind *k)
{
	memset(k, 0, sizeof(*k));
	ctext(&row[AUDIT_COL_KIND], k->kind, sizeof(k->kind));
	ctext(&row[AUDIT_COL_DECISION], k->decision, sizeof(k->decision));
	ctext(&row[AUDIT_COL_METHOD], k->method, sizeof(k->method));
	ctext(&row[AUDIT_COL_REASON], k->reason, sizeof(k->reason));
	k->verdict = verdict_parse(k->decision);
	k->is_dns = strcmp(k->kind, "dns") == 0;
	k->is_own = strcmp(k->kind, "admin") == 0 ||
	    strcmp(k->kind, "vault") == 0;
	/* A tunnel's row says CONNECT (or nothing); a request says its method. */
	k->is_request = !k->is_dns && !k->is_own && k->method[0] != '\0' &&
	    strcmp(k->method, "CONNECT") != 0;
	/* HTTP Activity requires a response: one without stays a connection. */
	k->is_http = k->is_request && row[AUDIT_COL_STATUS].type == AUDIT_V_INT;
	k->allowed = k->verdict != VERDICT_DENY;
	if (k->is_own) {
		k->cls = 0, k->cls_name = "Base Event";
		k->act = 99, k->act_name = "Other";
	} else if (k->is_dns) {
		k->cls = 4003, k->cls_name = "DNS Activity";
		k->act = 2, k->act_name = "Response";
	} else if (k->is_http) {
		k->cls = 4002, k->cls_name = "HTTP Activity";
		k->act = http_activity(k->method, &k->act_name);
	} else {
		k->cls = 4001, k->cls_name = "Network Activity";
		k->act = k->verdict == VERDICT_DENY ? 5 :
		    k->verdict == VERDICT_ERROR ? 4 : 6;
		k->act_name = k->act == 5 ? "Refuse" : k->act == 4 ? "Fail" :
		    "Traffic";
	}
}

static json_t *
ocsf_metadata(const struct audit_val *row, const struct ocsf_kind *k)
{
	json_t *meta = json_object(), *prod = json_object();
	char uid[24];

	json_object_set_new(meta, "version", json_string(OCSF_VERSION));
	json_object_set_new(prod, "name", json_string("sandgate"));
	json_object_set_new(prod, "vendor_name", json_string("sandgate"));
	json_object_set_new(prod, "version", json_string(SANDGATE_VERSION));
	json_object_set_new(meta, "product", prod);
	/* action_id comes from the security_control profile. */
	if (!k->is_own)
		json_object_set_new(meta, "profiles",
		    json_pack("[s]", "security_control"));
	snprintf(uid, sizeof(uid), "%lld", (long long)row[AUDIT_COL_ID].i);
	json_object_set_new(meta, "uid", json_string(uid));
	json_object_set_new(meta, "log_name", json_string("audit.events"));
	set(meta, "original_time", jtext(&row[AUDIT_COL_TS]));
	return meta;
}

/* Classification, time, severity, status, action, metadata. */
static void
ocsf_base(json_t *ev, const struct audit_val *row, const struct ocsf_kind *k)
{
	char ts[AUDIT_TS_LEN + 8], tname[96], code[24];
	const char *sev_name;
	int64_t ms;
	int sev,
	    ok = k->verdict == VERDICT_ALLOW || k->verdict == VERDICT_REPORT;

	json_object_set_new(ev, "category_uid", json_integer(k->cls ? 4 : 0));
	json_object_set_new(ev, "category_name", json_string(k->cls ?
	    "Network Activity" : "Uncategorized"));
	json_object_set_new(ev, "class_uid", json_integer(k->cls));
	json_object_set_new(ev, "class_name", json_string(k->cls_name));
	json_object_set_new(ev, "activity_id", json_integer(k->act));
	json_object_set_new(ev, "activity_name", json_string(k->act_name));
	json_object_set_new(ev, "type_uid", json_integer((json_int_t)k->cls *
	    100 + k->act));
	snprintf(tname, sizeof(tname), "%s: %s", k->cls_name, k->act_name);
	json_object_set_new(ev, "type_name", json_string(tname));
	if (ctext(&row[AUDIT_COL_TS], ts, sizeof(ts)) != NULL &&
	    audit_parse_rfc3339(ts, &ms) == 0)
		json_object_set_new(ev, "time", json_integer(ms));
	sev = severity_of(k->verdict, k->reason[0] ? k->reason : NULL,
	    &sev_name);
	json_object_set_new(ev, "severity_id", json_integer(sev));
	json_object_set_new(ev, "severity", json_string(sev_name));
	json_object_set_new(ev, "status_id", json_integer(ok ? 1 : 2));
	json_object_set_new(ev, "status", json_string(ok ? "Success" :
	    "Failure"));
	if (row[AUDIT_COL_STATUS].type == AUDIT_V_INT) {
		snprintf(code, sizeof(code), "%lld",
		    (long long)row[AUDIT_COL_STATUS].i);
		json_object_set_new(ev, "status_code", json_string(code));
	}
	set(ev, "status_detail", jtext(&row[AUDIT_COL_REASON]));
	if (!k->is_own) {
		json_object_set_new(ev, "action_id", json_integer(k->allowed ?
		    1 : 2));
		json_object_set_new(ev, "action", json_string(k->allowed ?
		    "Allowed" : "Denied"));
	}
	set_int(ev, "duration", &row[AUDIT_COL_DURATION_MS]);
	json_object_set_new(ev, "metadata", ocsf_metadata(row, k));
}

/* The resolver of a DNS row: the gateway's own DNS listener. */
static json_t *
dns_resolver(void)
{
	json_t *o = json_object();

	if (is_ip(ocsf_env.dns_ip))
		json_object_set_new(o, "ip", json_string(ocsf_env.dns_ip));
	if (ocsf_env.dns_port > 0 && ocsf_env.dns_port <= 65535)
		json_object_set_new(o, "port",
		    json_integer(ocsf_env.dns_port));
	json_object_set_new(o, "name", json_string("sandgate"));
	json_object_set_new(o, "svc_name", json_string("dns"));
	return o;
}

/* The destination asked for: its name (not an address), ip, port, country. */
static json_t *
dst_of_row(const struct audit_val *row)
{
	json_t *dst = json_object(), *o;
	char host[256] = "";

	if (ctext(&row[AUDIT_COL_HOST], host, sizeof(host)) != NULL &&
	    !is_ip(host))
		set(dst, "hostname", jtext(&row[AUDIT_COL_HOST]));
	if ((o = jip(&row[AUDIT_COL_IP])) == NULL && is_ip(host))
		o = json_string(host);
	set(dst, "ip", o);
	if (is_port(&row[AUDIT_COL_PORT]))
		set_int(dst, "port", &row[AUDIT_COL_PORT]);
	if (row[AUDIT_COL_COUNTRY].type == AUDIT_V_TEXT) {
		o = json_object();
		set(o, "country", jtext(&row[AUDIT_COL_COUNTRY]));
		json_object_set_new(dst, "location", o);
	}
	return dst;
}

/* src_endpoint, dst_endpoint, connection_info, traffic. */
static void
ocsf_network(json_t *ev, const struct audit_val *row,
    const struct ocsf_kind *k)
{
	const struct audit_val *up = &row[AUDIT_COL_BYTES_UP];
	const struct audit_val *down = &row[AUDIT_COL_BYTES_DOWN];
	int inbound = strcmp(k->kind, "ingress") == 0;
	int64_t a, b, sum;
	json_t *o;

	o = endpoint_of_client(&row[AUDIT_COL_CLIENT]);
	set(o, "name", jtext(&row[AUDIT_COL_SANDBOX]));
	json_object_set_new(ev, "src_endpoint", o);
	json_object_set_new(ev, "dst_endpoint", k->is_dns ? dns_resolver() :
	    dst_of_row(row));
	o = json_object();
	if (!k->is_dns) {
		json_object_set_new(o, "protocol_name", json_string("tcp"));
		json_object_set_new(o, "protocol_num", json_integer(6));
	}
	json_object_set_new(o, "direction_id", json_integer(inbound ? 1 : 2));
	json_object_set_new(o, "direction", json_string(inbound ? "Inbound" :
	    "Outbound"));
	json_object_set_new(ev, "connection_info", o);
	if (up->type != AUDIT_V_INT && down->type != AUDIT_V_INT)
		return;
	a = up->type == AUDIT_V_INT ? up->i : 0;
	b = down->type == AUDIT_V_INT ? down->i : 0;
	o = json_object();
	set_int(o, "bytes_out", up);
	set_int(o, "bytes_in", down);
	/* A damaged row's counts must not overflow the sum. */
	if (!__builtin_add_overflow(a, b, &sum))
		json_object_set_new(o, "bytes", json_integer(sum));
	json_object_set_new(ev, "traffic", o);
}

/*
 * The row does not record whether a request came over TLS: an http row is
 * absolute-form plain HTTP, ingress is TLS when the exporter's config says
 * so. A request seen inside a tunnel was intercepted TLS when its allow
 * rule intercepts or a credential is bound to its host (always
 * intercepted), plain HTTP when the rule passes TLS through (nothing else
 * can be read); without such a rule, https unless it went to port 80.
 */
static const char *
url_scheme(const struct audit_val *row, const struct ocsf_kind *k)
{
	char rule[128], host[256];
	int tls = -1;

	if (strcmp(k->kind, "http") == 0)
		return "http";
	if (strcmp(k->kind, "ingress") == 0)
		return ocsf_env.ingress_tls ? "https" : "http";
	if (ocsf_env.rule_tls != NULL && row[AUDIT_COL_RULE].len <
	    sizeof(rule) && ctext(&row[AUDIT_COL_RULE], rule,
	    sizeof(rule)) != NULL && row[AUDIT_COL_HOST].len < sizeof(host) &&
	    ctext(&row[AUDIT_COL_HOST], host, sizeof(host)) != NULL)
		tls = ocsf_env.rule_tls(ocsf_env.rule_arg, rule, host);
	if (tls != -1)
		return tls ? "https" : "http";
	return row[AUDIT_COL_PORT].type == AUDIT_V_INT &&
	    row[AUDIT_COL_PORT].i == 80 ? "http" : "https";
}

/* The url object: scheme, hostname, port, path, query_string, url_string. */
static json_t *
ocsf_url(const struct audit_val *row, const struct ocsf_kind *k)
{
	const struct audit_val *path = &row[AUDIT_COL_PATH];
	const struct audit_val *host = &row[AUDIT_COL_HOST];
	const char *scheme = url_scheme(row, k), *q = NULL;
	json_t *url = json_object();
	char pbuf[16] = "";
	size_t plen = 0, hlen = 0, n;
	int bracket;
	char *s;

	json_object_set_new(url, "scheme", json_string(scheme));
	set(url, "hostname", jtext(host));
	if (is_port(&row[AUDIT_COL_PORT])) {
		set_int(url, "port", &row[AUDIT_COL_PORT]);
		if (row[AUDIT_COL_PORT].i != (strcmp(scheme, "http") == 0 ?
		    80 : 443))
			snprintf(pbuf, sizeof(pbuf), ":%lld",
			    (long long)row[AUDIT_COL_PORT].i);
	}
	if (path->type == AUDIT_V_TEXT && path->len > 0) {
		q = memchr(path->p, '?', path->len);
		plen = q ? (size_t)(q - (const char *)path->p) : path->len;
		if (plen > 0)
			set(url, "path", jbytes(path->p, plen));
		if (q != NULL && path->len - plen > 1)
			set(url, "query_string", jbytes((const unsigned char *)
			    q + 1, path->len - plen - 1));
	}
	if (host->type != AUDIT_V_TEXT)
		return url;
	hlen = host->len;
	bracket = hlen > 0 && memchr(host->p, ':', hlen) != NULL;
	n = strlen(scheme) + 3 + hlen + 2 + strlen(pbuf) +
	    (path->type == AUDIT_V_TEXT ? path->len : 0) + 2;
	if ((s = malloc(n)) == NULL)
		return url;
	n = (size_t)snprintf(s, n, "%s://%s%.*s%s%s", scheme, bracket ? "[" :
	    "", (int)hlen, (const char *)host->p, bracket ? "]" : "", pbuf);
	if (path->type == AUDIT_V_TEXT && path->len > 0 && path->p[0] != '/')
		s[n++] = '/';
	if (path->type == AUDIT_V_TEXT && path->len > 0) {
		memcpy(s + n, path->p, path->len);
		n += path->len;
	} else
		s[n++] = '/';
	set(url, "url_string", jbytes((unsigned char *)s, n));
	free(s);
	return url;
}

static void
ocsf_http(json_t *ev, const struct audit_val *row, const struct ocsf_kind *k,
    json_t *un)
{
	json_t *req = json_object(), *o;
	const char *name;

	if (http_activity(k->method, &name) != 99)
		json_object_set_new(req, "http_method",
		    json_string(k->method));
	else
		set(un, "http_method", jtext(&row[AUDIT_COL_METHOD]));
	json_object_set_new(req, "url", ocsf_url(row, k));
	json_object_set_new(ev, "http_request", req);
	o = json_object();
	set_int(o, "code", &row[AUDIT_COL_STATUS]);
	json_object_set_new(ev, "http_response", o);
}

static void
ocsf_dns(json_t *ev, const struct audit_val *row)
{
	json_t *o, *ans;
	int64_t rc;

	if (row[AUDIT_COL_HOST].type == AUDIT_V_TEXT) {
		o = json_object();
		set(o, "hostname", jtext(&row[AUDIT_COL_HOST]));
		set(o, "type", jtext(&row[AUDIT_COL_METHOD]));
		json_object_set_new(o, "class", json_string("IN"));
		json_object_set_new(ev, "query", o);
	}
	if (row[AUDIT_COL_STATUS].type == AUDIT_V_INT) {
		rc = row[AUDIT_COL_STATUS].i;
		json_object_set_new(ev, "rcode_id", json_integer(
		    rc >= 0 && rc <= 11 ? rc : 99));
		json_object_set_new(ev, "rcode", json_string(
		    rc >= 0 && rc <= 11 ? rcode_names[rc] : "Other"));
	}
	/* The row keeps the address the gateway answered with. */
	if ((o = jip(&row[AUDIT_COL_IP])) != NULL) {
		ans = json_array();
		json_array_append_new(ans, json_pack("{s:o}", "rdata", o));
		o = json_array_get(ans, 0);
		set(o, "type", jtext(&row[AUDIT_COL_METHOD]));
		json_object_set_new(o, "class", json_string("IN"));
		json_object_set_new(ev, "answers", ans);
	}
}

/* Base Event: what happened, in words; the rest is unmapped. */
static void
ocsf_own(json_t *ev, const struct audit_val *row, json_t *un)
{
	const struct audit_val *v[] = { &row[AUDIT_COL_KIND],
	    &row[AUDIT_COL_METHOD], &row[AUDIT_COL_PATH] };
	size_t i, n = 0, len = 0;
	unsigned char *buf;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		len += v[i]->type == AUDIT_V_TEXT ? v[i]->len + 1 : 0;
	if (len > 0 && (buf = malloc(len)) != NULL) {
		for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			if (v[i]->type != AUDIT_V_TEXT)
				continue;
			if (n > 0)
				buf[n++] = ' ';
			memcpy(buf + n, v[i]->p, v[i]->len);
			n += v[i]->len;
		}
		set(ev, "message", jbytes(buf, n));
		free(buf);
	}
	set(un, "client", jtext(&row[AUDIT_COL_CLIENT]));
	set(un, "method", jtext(&row[AUDIT_COL_METHOD]));
	set(un, "path", jtext(&row[AUDIT_COL_PATH]));
}

void
audit_write_ocsf(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	struct ocsf_kind k;
	json_t *ev = json_object(), *un = json_object();

	ocsf_classify(row, &k);
	ocsf_base(ev, row, &k);
	if (!k.is_own)
		ocsf_network(ev, row, &k);
	if (k.is_http)
		ocsf_http(ev, row, &k, un);
	else if (k.is_request)
		json_object_set_new(ev, "url", ocsf_url(row, &k));
	if (k.is_dns)
		ocsf_dns(ev, row);
	if (k.is_own)
		ocsf_own(ev, row, un);
	/* What OCSF has no field for: the policy's own words, the chain. */
	set(un, "sandbox", jtext(&row[AUDIT_COL_SANDBOX]));
	set(un, "kind", jtext(&row[AUDIT_COL_KIND]));
	set(un, "decision", jtext(&row[AUDIT_COL_DECISION]));
	set(un, "rule", jtext(&row[AUDIT_COL_RULE]));
	set(un, "reason", jtext(&row[AUDIT_COL_REASON]));
	set(un, "credential", jtext(&row[AUDIT_COL_CREDENTIAL]));
	set_int(un, "asn", &row[AUDIT_COL_ASN]);
	set(un, "hash", jtext(&row[AUDIT_COL_HASH]));
	json_object_set_new(ev, "unmapped", un);
	if (json_dumpf(ev, f, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0)
		fputc('\n', f);
	json_decref(ev);
}
