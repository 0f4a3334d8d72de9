/*
 * policy suggest (policy_suggest.h): rows are folded into one entry per
 * destination name (ports, counts, first/last seen, what the traffic
 * needed) and into notes for what is never suggested; the writer groups
 * names by registrable domain. Every string printed was validated first
 * (a normalised name, an address, a rule name, a timestamp): audit rows
 * carry what sandboxes sent, and a comment must not become YAML.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netaddr.h"
#include "core/policy.h"
#include "core/policy_suggest.h"
#include "core/psl.h"
#include "core/reason.h"

#define SG_MAX_PORTS	16
#define SG_TS_MAX	32
#define SG_NOTE_MAX	512
#define SG_MAX_PRIV	16

struct sg_host {
	char	 name[POLICY_HOST_MAX + 1];
	char	 domain[POLICY_HOST_MAX + 1];
	uint16_t ports[SG_MAX_PORTS];
	size_t	 n_ports;
	int	 many_ports;
	int64_t	 n, n_deny, n_report, n_opaque, n_intercept, n_conn;
	char	 first[SG_TS_MAX], last[SG_TS_MAX];
};

struct sg_note {
	char	 what[POLICY_HOST_MAX + 1];	/* name or address */
	int	 port;
	int	 cat;
	char	 rule[POLICY_NAME_MAX + 24];
	int64_t	 n, n_report;
	char	 first[SG_TS_MAX], last[SG_TS_MAX];
};

enum { NOTE_INTERNAL, NOTE_IP, NOTE_DENY_RULE, NOTE_GEO };

struct suggest {
	const struct psl *psl;
	struct sg_host	*h;
	size_t		 nh, caph;
	struct sg_note	*nt;
	size_t		 nn, capn;
	char		 priv[SG_MAX_PRIV][NETADDR_STRLEN];
	size_t		 n_priv;
};

struct suggest *
suggest_new(const struct psl *psl)
{
	struct suggest *s = calloc(1, sizeof(*s));

	if (s != NULL)
		s->psl = psl;
	return s;
}

void
suggest_free(struct suggest *s)
{
	if (s == NULL)
		return;
	free(s->h);
	free(s->nt);
	free(s);
}

/* "2026-12-03T06:00:00.000Z": digits and -:.TZ+ only. */
static int
ts_ok(const char *t)
{
	size_t n = strlen(t);

	return n > 0 && n < SG_TS_MAX && strspn(t, "0123456789-:.TZ+") == n;
}

/* "P:allow[3]", "default-deny": a policy name and the rule's brackets. */
static int
rule_ok(const char *r)
{
	size_t n = strlen(r);

	return n > 0 && n < POLICY_NAME_MAX + 24 && strspn(r,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	    "._-:[]") == n;
}

static void
seen(char *first, char *last, const struct suggest_row *r)
{
	if (ts_ok(r->first) && (first[0] == '\0' || strcmp(r->first, first) < 0))
		snprintf(first, SG_TS_MAX, "%s", r->first);
	if (ts_ok(r->last) && strcmp(r->last, last) > 0)
		snprintf(last, SG_TS_MAX, "%s", r->last);
}

static int
grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 32;
	if ((nv = realloc(*v, c * size)) == NULL)
		return -1;
	*v = nv;
	*cap = c;
	return 0;
}

static int
add_note(struct suggest *s, const char *what, int port, int cat,
    const char *rule, const struct suggest_row *r)
{
	struct sg_note *x;
	size_t i;

	for (i = 0; i < s->nn; i++) {
		x = &s->nt[i];
		if (x->cat == cat && x->port == port &&
		    strcmp(x->what, what) == 0 && strcmp(x->rule, rule) == 0)
			goto found;
	}
	if (grow((void **)&s->nt, &s->capn, s->nn, sizeof(*s->nt)) == -1)
		return -1;
	x = &s->nt[s->nn++];
	memset(x, 0, sizeof(*x));
	snprintf(x->what, sizeof(x->what), "%s", what);
	snprintf(x->rule, sizeof(x->rule), "%s", rule);
	x->port = port;
	x->cat = cat;
found:
	x->n += r->n;
	if (verdict_parse(r->decision) == VERDICT_REPORT)
		x->n_report += r->n;
	seen(x->first, x->last, r);
	return 0;
}

static struct sg_host *
find_host(struct suggest *s, const char *name)
{
	struct sg_host *h;
	size_t i;

	for (i = 0; i < s->nh; i++)
		if (strcmp(s->h[i].name, name) == 0)
			return &s->h[i];
	if (grow((void **)&s->h, &s->caph, s->nh, sizeof(*s->h)) == -1)
		return NULL;
	h = &s->h[s->nh++];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	if (psl_registrable(s->psl, name, h->domain, sizeof(h->domain)) == -1)
		snprintf(h->domain, sizeof(h->domain), "%s", name);
	return h;
}

static void
add_port(struct sg_host *h, int port)
{
	size_t i;

	if (port <= 0 || port > 65535)
		return;
	for (i = 0; i < h->n_ports; i++)
		if (h->ports[i] == port)
			return;
	if (h->n_ports == SG_MAX_PORTS) {
		h->many_ports = 1;
		return;
	}
	h->ports[h->n_ports++] = (uint16_t)port;
}

/* An internal address a reported or allowed row reached: allow_private covered it. */
static void
note_private(struct suggest *s, const char *ip)
{
	struct netaddr a;
	char buf[NETADDR_STRLEN];
	size_t i;

	if (ip == NULL || netaddr_parse(ip, strlen(ip), &a) == -1 ||
	    !netaddr_is_internal(&a) || netaddr_ntop(&a, buf, sizeof(buf)) ==
	    NULL)
		return;
	for (i = 0; i < s->n_priv; i++)
		if (strcmp(s->priv[i], buf) == 0)
			return;
	if (s->n_priv < SG_MAX_PRIV)
		snprintf(s->priv[s->n_priv++], NETADDR_STRLEN, "%s", buf);
}

/* The row's reason is r's word (rows hold words; the enum decides). */
static int
is_reason(const char *word, enum sg_reason r)
{
	return strcmp(word, reason_word(r)) == 0;
}

/* A denial report mode relaxes, and an allow rule could lift. */
static int
relaxable(const char *reason)
{
	return is_reason(reason, REASON_POLICY_DENY) ||
	    is_reason(reason, REASON_NEEDS_INTERCEPT) ||
	    is_reason(reason, REASON_PROTOCOL_DENY) ||
	    is_reason(reason, REASON_SNI_MISSING);
}

int
suggest_add(struct suggest *s, const struct suggest_row *r)
{
	struct policy_target t;
	struct sg_host *h;
	const char *rule = rule_ok(r->rule) ? r->rule : "";
	int report = verdict_parse(r->decision) == VERDICT_REPORT;

	if (r->n <= 0 || r->host == NULL ||
	    policy_target_init(&t, r->host, strlen(r->host), 0) == -1 ||
	    strcmp(t.host, r->host) != 0)
		return 0;
	if (is_reason(r->reason, REASON_IP_PROHIBITED))
		return add_note(s, t.host, r->port, NOTE_INTERNAL, rule, r);
	if (report)
		note_private(s, r->ip);
	if (is_reason(r->reason, REASON_COUNTRY_DENY) ||
	    is_reason(r->reason, REASON_ASN_DENY))
		return add_note(s, t.host, r->port, NOTE_GEO, r->reason, r);
	if (!relaxable(r->reason))
		return 0;
	if (strstr(rule, ":deny[") != NULL)
		return add_note(s, t.host, r->port, NOTE_DENY_RULE, rule, r);
	if (t.is_ip)
		return add_note(s, t.host, r->port, netaddr_is_internal(&t.ip) ?
		    NOTE_INTERNAL : NOTE_IP, rule, r);
	if ((h = find_host(s, t.host)) == NULL)
		return -1;
	h->n += r->n;
	if (report)
		h->n_report += r->n;
	else
		h->n_deny += r->n;
	if (strcmp(r->kind, "dns") != 0) {
		h->n_conn += r->n;
		add_port(h, r->port);
	}
	if (is_reason(r->reason, REASON_PROTOCOL_DENY))
		h->n_opaque += r->n;
	if (is_reason(r->reason, REASON_NEEDS_INTERCEPT))
		h->n_intercept += r->n;
	seen(h->first, h->last, r);
	return 0;
}

static int
host_cmp(const void *a, const void *b)
{
	const struct sg_host *x = a, *y = b;
	int c = strcmp(x->domain, y->domain);

	return c != 0 ? c : strcmp(x->name, y->name);
}

static int
port_cmp(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static void
write_counts(FILE *f, int64_t n, int64_t n_deny, int64_t n_report,
    const char *first, const char *last)
{
	fprintf(f, "%lld row%s", (long long)n, n == 1 ? "" : "s");
	if (n_deny > 0 && n_report > 0)
		fprintf(f, " (deny %lld, report %lld)", (long long)n_deny,
		    (long long)n_report);
	else
		fprintf(f, " (%s)", n_report > 0 ? "report" : "deny");
	fprintf(f, ", first %s, last %s", first[0] ? first : "-",
	    last[0] ? last : "-");
}

static void
write_host(FILE *f, struct sg_host *h)
{
	size_t i;

	fprintf(f, "      - host: %s    # ", h->name);
	write_counts(f, h->n, h->n_deny, h->n_report, h->first, h->last);
	fputc('\n', f);
	if (h->n_conn == 0)
		fprintf(f, "        # only looked up (DNS): ports: defaults to "
		    "[80, 443]\n");
	else if (h->many_ports)
		fprintf(f, "        # more than %d ports seen: list the ones "
		    "meant\n        ports: [", SG_MAX_PORTS);
	else
		fprintf(f, "        ports: [");
	if (h->n_conn > 0) {
		qsort(h->ports, h->n_ports, sizeof(h->ports[0]), port_cmp);
		for (i = 0; i < h->n_ports; i++)
			fprintf(f, "%s%u", i ? ", " : "", h->ports[i]);
		fprintf(f, "]\n");
	}
	if (h->n_opaque > 0)
		fprintf(f, "        opaque: true    # %lld row%s neither TLS "
		    "nor HTTP (protocol-not-allowed)\n", (long long)h->n_opaque,
		    h->n_opaque == 1 ? " was" : "s were");
	if (h->n_intercept > 0)
		fprintf(f, "        # %lld row%s needs-intercept: a rule with "
		    "methods or paths for this host needs tls: intercept\n",
		    (long long)h->n_intercept, h->n_intercept == 1 ? "" : "s");
}

static const char *const note_text[] = {
	[NOTE_INTERNAL] = "internal address: not suggested; only allow_private "
	    "opens it",
	[NOTE_IP] = "IP literal: not suggested (a name is what a rule should "
	    "allow); if meant, a cidr rule",
	[NOTE_DENY_RULE] = "denied by a deny rule, which wins over any allow "
	    "rule: not suggested",
	[NOTE_GEO] = "denied by the countries/asns rules: not suggested",
};

static void
write_notes(FILE *f, const struct suggest *s)
{
	const struct sg_note *x;
	size_t i;

	if (s->nn == 0)
		return;
	fprintf(f, "    # Not suggested (decide yourself):\n");
	for (i = 0; i < s->nn; i++) {
		x = &s->nt[i];
		fprintf(f, "    #   %s", x->what);
		if (x->port > 0)
			fprintf(f, " port %d", x->port);
		fprintf(f, ": %s", note_text[x->cat]);
		if (x->cat == NOTE_IP)
			fprintf(f, " \"- cidr: %s/%d\"", x->what,
			    strchr(x->what, ':') ? 128 : 32);
		if (x->rule[0] != '\0')
			fprintf(f, " (%s)", x->rule);
		fprintf(f, "; ");
		write_counts(f, x->n, x->n - x->n_report, x->n_report,
		    x->first, x->last);
		fputc('\n', f);
	}
}

void
suggest_write(struct suggest *s, FILE *f, const char *policy_name,
    const char *const *header, size_t n_header)
{
	size_t i, j, k;
	int64_t n;

	for (i = 0; i < n_header; i++)
		fprintf(f, "# %s\n", header[i]);
	if (s->nh > 0)
		qsort(s->h, s->nh, sizeof(*s->h), host_cmp);
	fprintf(f, "policies:\n  - name: %s\n    mode: enforce\n",
	    policy_name);
	if (s->nh == 0)
		fprintf(f, "    allow: []    # nothing was denied or reported "
		    "that a rule could allow\n");
	else
		fprintf(f, "    allow:\n");
	for (i = 0; i < s->nh; i = j) {
		/* One registrable domain: its names, sorted. */
		for (n = 0, j = i; j < s->nh &&
		    strcmp(s->h[j].domain, s->h[i].domain) == 0; j++)
			n += s->h[j].n;
		fprintf(f, "      # %s: %zu name%s, %lld row%s\n", s->h[i].domain,
		    j - i, j - i == 1 ? "" : "s", (long long)n,
		    n == 1 ? "" : "s");
		if (j - i >= 3)
			fprintf(f, "      # - host: \"*.%s\"    # would allow "
			    "these %zu names and any other below %s\n",
			    s->h[i].domain, j - i, s->h[i].domain);
		for (k = i; k < j; k++)
			write_host(f, &s->h[k]);
	}
	if (s->n_priv > 0) {
		fprintf(f, "    # Reported rows reached internal addresses that "
		    "this policy's allow_private let through;\n    # keep its "
		    "allow_private entries, e.g.:\n    # allow_private: [");
		for (i = 0; i < s->n_priv; i++)
			fprintf(f, "%s%s", i ? ", " : "", s->priv[i]);
		fprintf(f, "]\n");
	}
	write_notes(f, s);
}
