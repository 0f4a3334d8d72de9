/*
 * Audit rows as OCSF 1.1 events (audit_write_ocsf), one JSON object per
 * line, built with jansson: HTTP Activity (4002), Network Activity (4001)
 * and DNS Activity (4003) in category Network Activity (4); the gateway's
 * own rows (admin, vault) as Base Event (0). docs/audit.md has the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "audit/audit_query.h"
#include "core/reason.h"

#define OCSF_VERSION	"1.1.0"

/* A TEXT value as a JSON string; bytes that are not UTF-8 become '?'. */
static json_t *
jtext(const struct audit_val *v)
{
	char *buf;
	json_t *j;
	size_t i;

	if (v->type != AUDIT_V_TEXT)
		return NULL;
	if ((j = json_stringn((const char *)v->p, v->len)) != NULL)
		return j;
	if ((buf = malloc(v->len + 1)) == NULL)
		return NULL;
	for (i = 0; i < v->len; i++)
		buf[i] = v->p[i] >= 0x20 && v->p[i] < 0x7f ? (char)v->p[i] : '?';
	j = json_stringn(buf, v->len);
	free(buf);
	return j;
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

struct ocsf_class {
	int		 uid;
	const char	*name;
};

static const char *const http_acts[] = {
	NULL, "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT",
	"TRACE", "PATCH"
};
static const char *const http_act_names[] = {
	"Unknown", "Connect", "Delete", "Get", "Head", "Options", "Post", "Put",
	"Trace", "Patch"
};

static int
http_activity(const char *method, const char **name)
{
	size_t i;

	for (i = 1; method != NULL && i < sizeof(http_acts) /
	    sizeof(http_acts[0]); i++)
		if (strcasecmp(method, http_acts[i]) == 0) {
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

/* "addr:port" or "[v6]:port" into a src_endpoint. */
static json_t *
endpoint_of_client(const struct audit_val *v)
{
	char buf[128], *colon, *host = buf;
	json_t *o;

	if (ctext(v, buf, sizeof(buf)) == NULL)
		return NULL;
	o = json_object();
	if ((colon = strrchr(buf, ':')) != NULL && colon[1] != '\0' &&
	    strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
	    (buf[0] == '[' || strchr(buf, ':') == colon)) {
		*colon = '\0';
		json_object_set_new(o, "port", json_integer(atoi(colon + 1)));
	}
	if (host[0] == '[') {
		host++;
		host[strcspn(host, "]")] = '\0';
	}
	set(o, "ip", json_string(host));
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
	k->is_http = !k->is_dns && !k->is_own && k->method[0] != '\0' &&
	    strcmp(k->method, "CONNECT") != 0;
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

/* Classification, time, severity, status, action, metadata. */
static void
ocsf_base(json_t *ev, const struct audit_val *row, const struct ocsf_kind *k)
{
	char ts[AUDIT_TS_LEN + 8], tname[96], uid[24];
	const char *sev_name;
	json_t *meta, *prod;
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
		snprintf(uid, sizeof(uid), "%lld",
		    (long long)row[AUDIT_COL_STATUS].i);
		json_object_set_new(ev, "status_code", json_string(uid));
	}
	set(ev, "status_detail", jtext(&row[AUDIT_COL_REASON]));
	if (!k->is_own) {
		json_object_set_new(ev, "action_id", json_integer(k->allowed ?
		    1 : 2));
		json_object_set_new(ev, "action", json_string(k->allowed ?
		    "Allowed" : "Denied"));
	}
	set_int(ev, "duration", &row[AUDIT_COL_DURATION_MS]);
	meta = json_object();
	json_object_set_new(meta, "version", json_string(OCSF_VERSION));
	prod = json_object();
	json_object_set_new(prod, "name", json_string("sandgate"));
	json_object_set_new(prod, "vendor_name", json_string("sandgate"));
	json_object_set_new(prod, "version", json_string(SANDGATE_VERSION));
	json_object_set_new(meta, "product", prod);
	snprintf(uid, sizeof(uid), "%lld", (long long)row[AUDIT_COL_ID].i);
	json_object_set_new(meta, "uid", json_string(uid));
	json_object_set_new(meta, "log_name", json_string("audit.events"));
	set(meta, "original_time", jtext(&row[AUDIT_COL_TS]));
	json_object_set_new(ev, "metadata", meta);
}

/* src_endpoint, dst_endpoint, connection_info, traffic. */
static void
ocsf_network(json_t *ev, const struct audit_val *row,
    const struct ocsf_kind *k)
{
	const struct audit_val *up = &row[AUDIT_COL_BYTES_UP];
	const struct audit_val *down = &row[AUDIT_COL_BYTES_DOWN];
	int inbound = strcmp(k->kind, "ingress") == 0;
	json_t *o, *dst;

	if ((o = endpoint_of_client(&row[AUDIT_COL_CLIENT])) != NULL) {
		set(o, "name", jtext(&row[AUDIT_COL_SANDBOX]));
		json_object_set_new(ev, "src_endpoint", o);
	}
	if (k->is_own)
		return;
	dst = json_object();
	set(dst, "hostname", jtext(&row[AUDIT_COL_HOST]));
	set(dst, "ip", jtext(&row[AUDIT_COL_IP]));
	set_int(dst, "port", &row[AUDIT_COL_PORT]);
	if (row[AUDIT_COL_COUNTRY].type == AUDIT_V_TEXT) {
		o = json_object();
		set(o, "country", jtext(&row[AUDIT_COL_COUNTRY]));
		json_object_set_new(dst, "location", o);
	}
	if (row[AUDIT_COL_ASN].type == AUDIT_V_INT) {
		o = json_object();
		set_int(o, "number", &row[AUDIT_COL_ASN]);
		json_object_set_new(dst, "autonomous_system", o);
	}
	if (json_object_size(dst) > 0)
		json_object_set_new(ev, "dst_endpoint", dst);
	else
		json_decref(dst);
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
	o = json_object();
	set_int(o, "bytes_out", up);
	set_int(o, "bytes_in", down);
	json_object_set_new(o, "bytes", json_integer(
	    (up->type == AUDIT_V_INT ? up->i : 0) +
	    (down->type == AUDIT_V_INT ? down->i : 0)));
	json_object_set_new(ev, "traffic", o);
}

static void
ocsf_http(json_t *ev, const struct audit_val *row)
{
	json_t *req = json_object(), *url = json_object(), *o;

	set(req, "http_method", jtext(&row[AUDIT_COL_METHOD]));
	set(url, "hostname", jtext(&row[AUDIT_COL_HOST]));
	set(url, "path", jtext(&row[AUDIT_COL_PATH]));
	set_int(url, "port", &row[AUDIT_COL_PORT]);
	json_object_set_new(req, "url", url);
	json_object_set_new(ev, "http_request", req);
	if (row[AUDIT_COL_STATUS].type == AUDIT_V_INT) {
		o = json_object();
		set_int(o, "code", &row[AUDIT_COL_STATUS]);
		json_object_set_new(ev, "http_response", o);
	}
}

static void
ocsf_dns(json_t *ev, const struct audit_val *row)
{
	json_t *o = json_object(), *ans;
	int64_t rc;

	set(o, "hostname", jtext(&row[AUDIT_COL_HOST]));
	set(o, "type", jtext(&row[AUDIT_COL_METHOD]));
	json_object_set_new(o, "class", json_string("IN"));
	json_object_set_new(ev, "query", o);
	if (row[AUDIT_COL_STATUS].type == AUDIT_V_INT) {
		rc = row[AUDIT_COL_STATUS].i;
		json_object_set_new(ev, "rcode_id", json_integer(
		    rc >= 0 && rc <= 11 ? rc : 99));
		json_object_set_new(ev, "rcode", json_string(
		    rc >= 0 && rc <= 11 ? rcode_names[rc] : "Other"));
	}
	if (row[AUDIT_COL_IP].type == AUDIT_V_TEXT) {
		ans = json_array();
		o = json_object();
		set(o, "rdata", jtext(&row[AUDIT_COL_IP]));
		set(o, "type", jtext(&row[AUDIT_COL_METHOD]));
		json_array_append_new(ans, o);
		json_object_set_new(ev, "answers", ans);
	}
}

void
audit_write_ocsf(FILE *f, const struct audit_val row[AUDIT_NCOLS])
{
	struct ocsf_kind k;
	json_t *ev = json_object(), *un;

	ocsf_classify(row, &k);
	ocsf_base(ev, row, &k);
	ocsf_network(ev, row, &k);
	if (k.is_http)
		ocsf_http(ev, row);
	if (k.is_dns)
		ocsf_dns(ev, row);
	/* What OCSF has no field for: the policy's own words, the chain. */
	un = json_object();
	set(un, "sandbox", jtext(&row[AUDIT_COL_SANDBOX]));
	set(un, "kind", jtext(&row[AUDIT_COL_KIND]));
	set(un, "decision", jtext(&row[AUDIT_COL_DECISION]));
	set(un, "rule", jtext(&row[AUDIT_COL_RULE]));
	set(un, "reason", jtext(&row[AUDIT_COL_REASON]));
	set(un, "credential", jtext(&row[AUDIT_COL_CREDENTIAL]));
	if (k.is_own)
		set(un, "path", jtext(&row[AUDIT_COL_PATH]));
	set(un, "hash", jtext(&row[AUDIT_COL_HASH]));
	json_object_set_new(ev, "unmapped", un);
	if (json_dumpf(ev, f, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0)
		fputc('\n', f);
	json_decref(ev);
}
