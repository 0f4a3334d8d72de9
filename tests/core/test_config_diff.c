/*
 * Unit tests for config_diff.c: which changed keys a reload reports as
 * needing a restart. Every restart-only key changed at once is named, each
 * once, with its full dotted name; what a reload applies (policies) and what
 * serve does not read (sandbox.*) is never named; the same address written
 * another way is no change; audit.syslog switched off is one key.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/config.h"
#include "helper_core.h"

static char data_dir[PATH_MAX];
static char tmp_dir[] = "/tmp/sg-test-config-diff-XXXXXX";

#define MAXK	128

static const char base_yaml[] =
    "state_dir: state\n"
    "listen:\n"
    "  http: 127.0.0.1:13128\n"
    "  socks5: \"[::1]:11080\"\n"
    "  dns: 127.0.0.1:15353\n"
    "  transparent: 0.0.0.0:13129\n"
    "  ingress: 127.0.0.1:18080\n"
    "  metrics: 127.0.0.1:19090\n"
    "  admin: run/admin.sock\n"
    "ingress_domain: sb.example.com\n"
    "ingress_tls: { cert: tls/in.crt, key: tls/in.key }\n"
    "ingress_upgrade_idle_timeout: 60s\n"
    "policies: [./pol]\n"
    "ca: { cert: certs/ca.crt, key: certs/ca.key }\n"
    "vault: { db: vault/v.db, key_file: vault/v.key }\n"
    "upstream:\n"
    "  resolvers: [127.0.0.1:15353]\n"
    "  ca_bundle: system\n"
    "  connect_timeout: 10s\n"
    "  idle_timeout: 5m\n"
    "  keepalive_timeout: 5s\n"
    "audit:\n"
    "  db: a/audit.db\n"
    "  retention: 7d\n"
    "  checkpoint_interval: 30s\n"
    "  signing_key: keys/audit.key\n"
    "  public_key: keys/audit.pub\n"
    "  on_failure: deny\n"
    "  syslog: { address: 127.0.0.1:514, format: rfc5424, transport: tcp }\n"
    "  ship: { url: \"postgresql://db.example.com/audit\", gateway: gw1 }\n"
    "geoip: { country_db: geo/c.mmdb, asn_db: geo/a.mmdb }\n"
    "sandbox: { runtime: runsc, subnet: 198.18.0.0/16, rootfs: host }\n"
    "limits:\n"
    "  max_connections: 500\n"
    "  max_header_bytes: 8192\n"
    "  head_timeout: 10s\n"
    "  per_sandbox: { max_connections: 20, connections_per_second: 5,\n"
    "    dns_queries_per_second: 7 }\n"
    "  http2: { enabled: true, max_concurrent_streams: 100,\n"
    "    max_header_list_bytes: 65536, max_continuations: 8,\n"
    "    max_resets_per_second: 100, max_control_per_second: 100 }\n"
    "workers: 2\n"
    "user: sandgate\n"
    "policies_watch: false\n"
    "log_level: info\n"
    "log_format: text\n"
    "approval: { timeout: 60s, max_pending: 20,\n"
    "  notify: \"http://127.0.0.1:9/hook\" }\n";

/* Every restart-only key changed (and policies, sandbox.* too). */
static const char changed_yaml[] =
    "state_dir: state2\n"
    "listen:\n"
    "  http: 127.0.0.1:23128\n"
    "  socks5: \"[::1]:21080\"\n"
    "  dns: 127.0.0.1:25353\n"
    "  transparent: 0.0.0.0:23129\n"
    "  ingress: 127.0.0.1:28080\n"
    "  metrics: null\n"
    "  admin: run/admin2.sock\n"
    "ingress_domain: sb2.example.com\n"
    "ingress_tls: { cert: tls/in2.crt, key: tls/in2.key }\n"
    "ingress_upgrade_idle_timeout: 61s\n"
    "policies: [./pol2]\n"
    "ca: { cert: certs/ca2.crt, key: certs/ca2.key }\n"
    "vault: { db: vault/v2.db, key_file: vault/v2.key }\n"
    "upstream:\n"
    "  resolvers: system\n"
    "  ca_bundle: /etc/ssl/certs/ca-certificates.crt\n"
    "  connect_timeout: 11s\n"
    "  idle_timeout: 6m\n"
    "  keepalive_timeout: 0s\n"
    "audit:\n"
    "  db: a/audit2.db\n"
    "  retention: 8d\n"
    "  checkpoint_interval: 31s\n"
    "  signing_key: keys/audit2.key\n"
    "  public_key: keys/audit2.pub\n"
    "  on_failure: allow\n"
    "  syslog: { address: 127.0.0.1:515, format: json, transport: udp }\n"
    "  ship: { url: \"postgresql://db.example.com/audit2\", gateway: gw2 }\n"
    "geoip: { country_db: geo/c2.mmdb, asn_db: null }\n"
    "sandbox: { runtime: crun, subnet: 198.19.0.0/16, rootfs: ./rootfs }\n"
    "limits:\n"
    "  max_connections: 501\n"
    "  max_header_bytes: 8193\n"
    "  head_timeout: 11s\n"
    "  per_sandbox: { max_connections: 21, connections_per_second: 6,\n"
    "    dns_queries_per_second: 8 }\n"
    "  http2: { enabled: false, max_concurrent_streams: 101,\n"
    "    max_header_list_bytes: 65537, max_continuations: 9,\n"
    "    max_resets_per_second: 101, max_control_per_second: 101 }\n"
    "workers: 3\n"
    "user: nobody\n"
    "policies_watch: true\n"
    "log_level: debug\n"
    "log_format: json\n"
    "approval: { timeout: 61s, max_pending: 21,\n"
    "  notify: \"http://127.0.0.1:9/hook2\" }\n";

static const char *const every_key[] = {
	"state_dir", "listen.http", "listen.socks5", "listen.dns",
	"listen.transparent", "listen.ingress", "listen.metrics",
	"listen.admin", "ingress_domain", "ingress_tls.cert",
	"ingress_tls.key", "ingress_upgrade_idle_timeout", "ca.cert", "ca.key",
	"vault.db", "vault.key_file", "upstream.resolvers",
	"upstream.ca_bundle", "upstream.connect_timeout",
	"upstream.idle_timeout", "upstream.keepalive_timeout", "audit.db", "audit.retention",
	"audit.checkpoint_interval", "audit.signing_key", "audit.public_key",
	"audit.on_failure", "audit.syslog.address", "audit.syslog.format",
	"audit.syslog.transport", "audit.ship.url", "audit.ship.gateway",
	"geoip.country_db", "geoip.asn_db", "limits.max_connections",
	"limits.max_header_bytes", "limits.head_timeout",
	"limits.per_sandbox.max_connections",
	"limits.per_sandbox.connections_per_second",
	"limits.per_sandbox.dns_queries_per_second", "limits.http2.enabled",
	"limits.http2.max_concurrent_streams",
	"limits.http2.max_header_list_bytes",
	"limits.http2.max_continuations",
	"limits.http2.max_resets_per_second",
	"limits.http2.max_control_per_second", "workers", "user",
	"policies_watch", "log_level", "log_format", "approval.timeout",
	"approval.max_pending", "approval.notify",
};

static struct config *
load(const char *name, const char *text)
{
	struct config *cfg;
	struct diag d;
	char line[512];
	size_t i;

	diag_init(&d);
	cfg = config_load(coretest_tmpfile(name, text), &d);
	for (i = 0; i < d.n; i++) {
		(void)diag_format(&d.v[i], line, sizeof(line));
		fprintf(stderr, "%s\n", line);
	}
	diag_free(&d);
	CHECK_MSG(cfg != NULL, "%s does not load", name);
	return cfg;
}

/* The keys named for a -> b, as one space-separated string. */
static const char *
diff(const struct config *a, const struct config *b)
{
	static char out[4096];
	const char *keys[MAXK];
	size_t n, i;

	out[0] = '\0';
	if (a == NULL || b == NULL)
		return "(no config)";
	n = config_restart_keys(a, b, keys, MAXK);
	CHECK(n <= MAXK);
	for (i = 0; i < n && i < MAXK; i++) {
		if (i > 0)
			strcat(out, " ");
		strcat(out, keys[i]);
	}
	return out;
}

static void
test_every_key(void)
{
	struct config *a = load("base.yaml", base_yaml);
	struct config *b = load("changed.yaml", changed_yaml);
	const char *keys[MAXK];
	char want[4096] = "";
	size_t i, n;

	for (i = 0; i < sizeof(every_key) / sizeof(every_key[0]); i++) {
		if (i > 0)
			strcat(want, " ");
		strcat(want, every_key[i]);
	}
	CHECK_STR(diff(a, b), want);
	/* both ways round, and nothing against itself */
	n = a != NULL && b != NULL ? config_restart_keys(b, a, keys, MAXK) : 0;
	CHECK_INT(n, sizeof(every_key) / sizeof(every_key[0]));
	CHECK_STR(diff(a, a), "");
	/* max bounds what is written, not the count */
	n = a != NULL && b != NULL ? config_restart_keys(a, b, keys, 2) : 0;
	CHECK_INT(n, sizeof(every_key) / sizeof(every_key[0]));
	CHECK_STR(keys[0], "state_dir");
	CHECK_STR(keys[1], "listen.http");
	config_free(a);
	config_free(b);
}

/*
 * Two configs, and the keys a reload from the first to the second names;
 * back, when not NULL, what the way back names.
 */
static const struct pair_case {
	const char	*what;
	const char	*a_name, *a_yaml;
	const char	*b_name, *b_yaml;
	const char	*want, *back;
} pair_cases[] = {
	/* What a reload applies, or serve does not read, is never named. */
	{ "applied keys",
	  "pa.yaml",
	  "policies: [./pol]\n"
	  "sandbox: { runtime: runsc, subnet: 198.18.0.0/16 }\n",
	  "pb.yaml",
	  "policies: [./pol, ./more]\n"
	  "sandbox: { runtime: crun, subnet: 198.19.0.0/24, rootfs: ./r }\n",
	  "", NULL },
	/*
	 * The same address written otherwise, or a default written out, is no
	 * change.
	 */
	{ "same value, other text",
	  "sa.yaml",
	  "listen: { metrics: \"[::1]:9090\", http: 127.0.0.1:3128 }\n"
	  "upstream: { connect_timeout: 10s }\n",
	  "sb.yaml",
	  "listen: { metrics: \"[0:0:0:0:0:0:0:1]:9090\" }\n"
	  "upstream: { connect_timeout: 10000ms }\n",
	  "", NULL },
	/*
	 * Turned on or off: the section itself; its fields only when on both
	 * times.
	 */
	{ "syslog switched",
	  "on.yaml",
	  "audit: { syslog: { address: 127.0.0.1:514, format: json } }\n",
	  "off.yaml",
	  "audit: { syslog: null }\n",
	  "audit.syslog", "audit.syslog" },
};

static void
test_pairs(void)
{
	const struct pair_case *c;
	struct config *a, *b;
	const char *got;
	size_t i;

	for (i = 0; i < sizeof(pair_cases) / sizeof(pair_cases[0]); i++) {
		c = &pair_cases[i];
		a = load(c->a_name, c->a_yaml);
		b = load(c->b_name, c->b_yaml);
		got = diff(a, b);
		CHECK_MSG(strcmp(got, c->want) == 0, "%s: \"%s\" != \"%s\"",
		    c->what, got, c->want);
		if (c->back != NULL) {
			got = diff(b, a);
			CHECK_MSG(strcmp(got, c->back) == 0,
			    "%s, the way back: \"%s\" != \"%s\"", c->what, got,
			    c->back);
		}
		config_free(a);
		config_free(b);
	}
}

int
main(void)
{
	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	test_every_key();
	test_pairs();
	return check_summary();
}
