/*
 * Unit tests for config.c: built-in defaults, every key of a full file,
 * relative path resolution, each kind of error at its FILE:LINE:COL, and
 * the shared duration and host:port parsers.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit_store.h"
#include "check.h"
#include "core/config.h"
#include "helper_core.h"

static char data_dir[PATH_MAX];
static char tmp_dir[] = "/tmp/sg-test-config-XXXXXX";

/* dir/name into a static buffer (two of them, so two can be used at once). */
static const char *
join(const char *dir, const char *name)
{
	static char buf[2][2 * PATH_MAX];
	static int i;

	i = !i;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static int
listen_port(const struct config_listen *l)
{
	if (l->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&l->ss)->sin_port);
	if (l->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&l->ss)->sin6_port);
	return -1;
}

static const char *
ss_addr(const struct sockaddr_storage *ss)
{
	static char buf[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET)
		return inet_ntop(AF_INET,
		    &((const struct sockaddr_in *)ss)->sin_addr, buf,
		    sizeof(buf));
	return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr,
	    buf, sizeof(buf));
}

/* workers: auto on this machine: one loop per online CPU, at most 64. */
static int
cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

static void
test_defaults(void)
{
	struct config *cfg;
	struct diag d;
	char buf[64];

	diag_init(&d);
	cfg = config_load(NULL, &d);
	CHECK(cfg != NULL);
	CHECK_INT(d.n, 0);
	if (cfg == NULL)
		goto out;
	CHECK(cfg->file == NULL);
	CHECK_STR(cfg->state_dir, "./var");
	CHECK_INT(cfg->listen_http.enabled, 1);
	CHECK_STR(cfg->listen_http.text, "127.0.0.1:3128");
	CHECK_INT(cfg->listen_http.ss.ss_family, AF_INET);
	CHECK_INT(cfg->listen_http.sslen, sizeof(struct sockaddr_in));
	CHECK_STR(ss_addr(&cfg->listen_http.ss), "127.0.0.1");
	CHECK_INT(listen_port(&cfg->listen_http), 3128);
	CHECK_INT(listen_port(&cfg->listen_socks5), 1080);
	CHECK_INT(listen_port(&cfg->listen_dns), 5353);
	CHECK_INT(listen_port(&cfg->listen_transparent), 3129);
	CHECK_INT(listen_port(&cfg->listen_ingress), 8080);
	CHECK_INT(listen_port(&cfg->listen_metrics), 9090);
	CHECK_INT(cfg->listen_metrics.enabled, 1);
	CHECK_STR(cfg->admin_socket, "./var/admin.sock");
	CHECK_STR(cfg->ingress_domain, "sandbox.localhost");
	CHECK_INT(cfg->n_policy_paths, 1);
	CHECK_STR(cfg->policy_paths[0], "./policies");
	CHECK_STR(cfg->ca_cert, "./certs/ca.crt");
	CHECK_STR(cfg->ca_key, "./certs/ca.key");
	CHECK_STR(cfg->vault_db, "./var/vault.db");
	CHECK_STR(cfg->vault_key_file, "./certs/vault.key");
	CHECK_INT(cfg->resolvers_system, 1);
	CHECK_INT(cfg->n_resolvers, 0);
	CHECK(cfg->ca_bundle == NULL);
	CHECK_INT(cfg->connect_timeout_ms, 10000);
	CHECK_INT(cfg->idle_timeout_ms, 300000);
	CHECK_INT(cfg->keepalive_timeout_ms, 5000);
	CHECK_STR(cfg->audit_db, "./var/audit.db");
	CHECK_INT(cfg->audit_retention_s, 30 * 86400);
	CHECK_INT(cfg->audit_checkpoint_ms, 10000);
	CHECK_STR(cfg->audit_signing_key, "./certs/audit.key");
	CHECK_STR(cfg->audit_public_key, "./certs/audit.pub");
	CHECK_INT(cfg->audit_on_failure_allow, 0);
	CHECK_INT(cfg->audit_syslog, 0);
	CHECK(cfg->geoip_country_db == NULL);
	CHECK(cfg->geoip_asn_db == NULL);
	CHECK_STR(cfg->sandbox_runtime, "runsc");
	CHECK_STR(cidr_ntop(&cfg->sandbox_subnet, buf, sizeof(buf)),
	    "198.18.0.0/16");
	CHECK_STR(cfg->sandbox_rootfs, "host");
	CHECK_INT(cfg->max_connections, 20000);
	CHECK_INT(cfg->max_header_bytes, 65536);
	CHECK_INT(cfg->head_timeout_ms, 10000);
	CHECK_INT(cfg->sandbox_max_connections, 1024);
	CHECK_INT(cfg->sandbox_conn_rate, 200);
	CHECK_INT(cfg->sandbox_dns_rate, 500);
	CHECK_INT(cfg->h2_enabled, 1);
	CHECK_INT(cfg->h2_max_streams, 100);
	CHECK_INT(cfg->h2_max_header_list, 65536);
	CHECK_INT(cfg->h2_max_continuations, 8);
	CHECK_INT(cfg->h2_max_resets, 100);
	CHECK_INT(cfg->h2_max_control, 100);
	CHECK_INT(cfg->workers, cores());
	CHECK_STR(cfg->user, "sandgate");
	config_free(cfg);
out:
	diag_free(&d);
}

static void
test_full(void)
{
	struct config *cfg;
	struct diag d;
	const char *path = join(data_dir, "cfg_full.yaml");
	char file[2 * PATH_MAX], buf[64];

	snprintf(file, sizeof(file), "%s", path);
	diag_init(&d);
	cfg = config_load(file, &d);
	diag_print(&d, stderr);
	CHECK(cfg != NULL);
	if (cfg == NULL)
		goto out;
	CHECK_STR(cfg->file, file);
	CHECK_STR(cfg->state_dir, join(data_dir, "state"));
	CHECK_INT(cfg->listen_http.enabled, 1);
	CHECK_INT(listen_port(&cfg->listen_http), 13128);
	CHECK_INT(cfg->listen_socks5.enabled, 1);
	CHECK_INT(cfg->listen_socks5.ss.ss_family, AF_INET6);
	CHECK_INT(cfg->listen_socks5.sslen, sizeof(struct sockaddr_in6));
	CHECK_STR(ss_addr(&cfg->listen_socks5.ss), "::1");
	CHECK_INT(listen_port(&cfg->listen_socks5), 11080);
	CHECK_STR(cfg->listen_socks5.text, "[::1]:11080");
	CHECK_INT(cfg->listen_dns.enabled, 0);		/* null */
	CHECK_STR(ss_addr(&cfg->listen_transparent.ss), "0.0.0.0");
	CHECK_INT(listen_port(&cfg->listen_transparent), 13129);
	CHECK_INT(listen_port(&cfg->listen_ingress), 18080);
	CHECK_INT(cfg->listen_metrics.enabled, 0);	/* ~ */
	CHECK_STR(cfg->admin_socket, join(data_dir, "run/admin.sock"));
	CHECK_STR(cfg->ingress_domain, "sandboxes.example.com");
	CHECK_INT(cfg->n_policy_paths, 2);
	CHECK_STR(cfg->policy_paths[0], join(data_dir, "pol"));
	CHECK_STR(cfg->policy_paths[1], "/etc/sandgate/extra.yaml");
	CHECK_STR(cfg->ca_cert, join(data_dir, "certs/my.crt"));
	CHECK_STR(cfg->ca_key, "/abs/ca.key");
	CHECK_STR(cfg->vault_db, join(data_dir, "vault/v.db"));
	CHECK_STR(cfg->vault_key_file, join(data_dir, "vault/v.key"));
	CHECK_INT(cfg->resolvers_system, 0);
	CHECK_INT(cfg->n_resolvers, 3);
	CHECK_STR(ss_addr(&cfg->resolvers[0]), "127.0.0.1");
	CHECK_INT(ntohs(((struct sockaddr_in *)&cfg->resolvers[0])->sin_port),
	    15353);
	CHECK_STR(ss_addr(&cfg->resolvers[1]), "::1");
	CHECK_INT(ntohs(((struct sockaddr_in6 *)&cfg->resolvers[1])->sin6_port),
	    53);
	CHECK_STR(ss_addr(&cfg->resolvers[2]), "127.0.0.53");
	CHECK_INT(ntohs(((struct sockaddr_in *)&cfg->resolvers[2])->sin_port),
	    53);
	CHECK_STR(cfg->ca_bundle, "/etc/ssl/certs/ca-certificates.crt");
	CHECK_INT(cfg->connect_timeout_ms, 250);
	CHECK_INT(cfg->idle_timeout_ms, 300000);
	CHECK_INT(cfg->keepalive_timeout_ms, 0);	/* 0s: no origin kept */
	CHECK_STR(cfg->audit_db, "/var/lib/sg/audit.db");
	CHECK_INT(cfg->audit_retention_s, 7 * 86400);
	CHECK_INT(cfg->audit_checkpoint_ms, 30000);
	CHECK_STR(cfg->audit_signing_key, "/abs/audit.key");	/* beside ca.key */
	CHECK_STR(cfg->audit_public_key, join(data_dir, "keys/audit.pub"));
	CHECK_INT(cfg->audit_on_failure_allow, 1);
	CHECK_INT(cfg->audit_syslog, 1);
	CHECK_STR(cfg->audit_syslog_address, "[::1]:6514");
	CHECK_INT(cfg->audit_syslog_ss.ss_family, AF_INET6);
	CHECK_INT(cfg->audit_syslog_json, 1);
	CHECK_INT(cfg->audit_syslog_udp, 0);
	CHECK_STR(cfg->geoip_country_db, join(data_dir, "geo/country.mmdb"));
	CHECK(cfg->geoip_asn_db == NULL);
	CHECK_STR(cfg->sandbox_runtime, "crun");
	CHECK_STR(cidr_ntop(&cfg->sandbox_subnet, buf, sizeof(buf)),
	    "198.19.0.0/20");
	CHECK_STR(cfg->sandbox_rootfs, join(data_dir, "rootfs"));
	CHECK_INT(cfg->max_connections, 500);
	CHECK_INT(cfg->max_header_bytes, 8192);
	CHECK_INT(cfg->head_timeout_ms, 2500);
	CHECK_INT(cfg->sandbox_max_connections, 20);
	CHECK_INT(cfg->sandbox_conn_rate, 0);
	CHECK_INT(cfg->sandbox_dns_rate, 7);
	CHECK_INT(cfg->workers, 3);
	config_free(cfg);
out:
	diag_free(&d);
}

/* state_dir alone moves audit.db, vault.db and admin.sock with it. */
static void
test_state_dir(void)
{
	struct config *cfg;
	struct diag d;
	char file[2 * PATH_MAX];

	snprintf(file, sizeof(file), "%s", join(data_dir, "cfg_state.yaml"));
	diag_init(&d);
	cfg = config_load(file, &d);
	diag_print(&d, stderr);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK_STR(cfg->state_dir, "/srv/sandgate");
		CHECK_STR(cfg->audit_db, "/srv/sandgate/audit.db");
		CHECK_STR(cfg->vault_db, "/srv/sandgate/vault.db");
		CHECK(cfg->admin_socket == NULL);	/* admin: null */
		CHECK_STR(cfg->ca_cert, join(data_dir, "certs/ca.crt"));
		CHECK_STR(cfg->vault_key_file, join(data_dir, "certs/vault.key"));
		CHECK_STR(cfg->policy_paths[0], join(data_dir, "policies"));
		config_free(cfg);
	}
	diag_free(&d);

	diag_init(&d);
	cfg = config_load(coretest_tmpfile("state.yaml", "state_dir: /x\n"),
	    &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK_STR(cfg->admin_socket, "/x/admin.sock");
		config_free(cfg);
	}
	diag_free(&d);
}

/* Relative paths are relative to the file's directory, as the path was given. */
static void
test_relative(void)
{
	static const struct {
		const char	*file;		/* relative to tmp_dir */
		const char	*yaml;
		const char	*state_dir;
		const char	*policy0;
		const char	*ca_cert;
		const char	*admin;
	} cases[] = {
		{ "sub/c.yaml", "state_dir: var\npolicies: [../pol]\n",
		    "sub/var", "sub/../pol", "sub/certs/ca.crt",
		    "sub/var/admin.sock" },
		{ "sub/c.yaml", "state_dir: ./var\npolicies: .//pol\n",
		    "sub/var", "sub/pol", "sub/certs/ca.crt",
		    "sub/var/admin.sock" },
		{ "sub/c.yaml", "state_dir: .\n", "sub", "sub/policies",
		    "sub/certs/ca.crt", "sub/admin.sock" },
		{ "c.yaml", "state_dir: var\n", "./var", "./policies",
		    "./certs/ca.crt", "./var/admin.sock" },
		{ "sub/c.yaml", "state_dir: /abs\nlisten: {admin: a.sock}\n",
		    "/abs", "sub/policies", "sub/certs/ca.crt", "sub/a.sock" },
	};
	struct config *cfg;
	struct diag d;
	char cwd[PATH_MAX];
	size_t i;

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(tmp_dir) == 0);
	mkdir("sub", 0700);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f = fopen(cases[i].file, "w");

		CHECK(f != NULL);
		if (f == NULL)
			continue;
		fputs(cases[i].yaml, f);
		fclose(f);
		diag_init(&d);
		cfg = config_load(cases[i].file, &d);
		diag_print(&d, stderr);
		CHECK_MSG(cfg != NULL, "case %zu", i);
		if (cfg != NULL) {
			CHECK_STR(cfg->state_dir, cases[i].state_dir);
			CHECK_STR(cfg->policy_paths[0], cases[i].policy0);
			CHECK_STR(cfg->ca_cert, cases[i].ca_cert);
			CHECK_STR(cfg->admin_socket, cases[i].admin);
			config_free(cfg);
		}
		diag_free(&d);
	}
	CHECK(chdir(cwd) == 0);
}

struct err_case {
	const char	*name;
	const char	*yaml;
	int		 line, col;
	const char	*msg;
};

static const struct err_case err_cases[] = {
	{ "port 0", "listen:\n  http: 127.0.0.1:0\n", 2, 9, "bad port" },
	{ "port big", "listen:\n  http: 127.0.0.1:65536\n", 2, 9, "bad port" },
	{ "no port", "listen:\n  http: 127.0.0.1\n", 2, 9,
	    "a port is required" },
	{ "name", "listen:\n  http: localhost:3128\n", 2, 9,
	    "not an IP address" },
	{ "bracket", "listen:\n  socks5: \"[::1:1080\"\n", 2, 11,
	    "bad address" },
	{ "listen int", "listen:\n  dns: 53\n", 2, 8, "bad address" },
	{ "listen list", "listen:\n  dns: [a]\n", 2, 8, "expected a string" },
	{ "listen unknown", "listen:\n  gopher: 127.0.0.1:70\n", 2, 3,
	    "unknown key \"gopher\" in listen" },
	{ "listen scalar", "listen: 127.0.0.1:3128\n", 1, 9,
	    "listen: expected a mapping" },
	{ "admin long", "listen:\n  admin: /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaa.sock\n", 2, 10, "longer than 107" },
	{ "state_dir null", "state_dir: null\n", 1, 12,
	    "expected a string, got null" },
	{ "state_dir list", "state_dir: [a]\n", 1, 12,
	    "expected a string, got a list" },
	{ "state_dir empty", "state_dir: \"\"\n", 1, 12, "must not be empty" },
	{ "ingress ip", "ingress_domain: 198.18.0.1\n", 1, 17,
	    "not a domain name" },
	{ "ingress bad", "ingress_domain: \"a..b\"\n", 1, 17,
	    "not a domain name" },
	{ "policies map", "policies: {a: 1}\n", 1, 11, "expected a list" },
	{ "policies null item", "policies: [a, ~]\n", 1, 15,
	    "expected a string, got null" },
	{ "ca unknown", "ca: {cert: a, crt: b}\n", 1, 15,
	    "unknown key \"crt\" in ca" },
	{ "vault list", "vault: []\n", 1, 8,
	    "vault: expected a mapping, got a list" },
	{ "resolvers scalar", "upstream:\n  resolvers: 127.0.0.1\n", 2, 14,
	    "expected system or a list" },
	{ "resolvers empty", "upstream:\n  resolvers: []\n", 2, 14,
	    "must not be empty" },
	{ "resolver port", "upstream:\n  resolvers: [1.2.3.4:0]\n", 2, 15,
	    "bad port" },
	{ "resolver name", "upstream:\n  resolvers: [dns.google]\n", 2, 15,
	    "not an IP address" },
	{ "resolvers many", "upstream:\n  resolvers: [1.1.1.1, 1.1.1.2, "
	    "1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, 1.1.1.8, 1.1.1.9]\n",
	    2, 87, "more than 8" },
	{ "bare number", "upstream:\n  connect_timeout: 10\n", 2, 20,
	    "bad duration" },
	{ "bad unit", "upstream:\n  connect_timeout: 10sec\n", 2, 20,
	    "bad duration" },
	{ "zero timeout", "upstream:\n  connect_timeout: 0s\n", 2, 20,
	    "out of range" },
	{ "timeout too big", "upstream:\n  idle_timeout: 60d\n", 2, 17,
	    "out of range" },
	{ "keepalive bare", "upstream:\n  keepalive_timeout: 5\n", 2, 22,
	    "bad duration" },
	{ "keepalive too big", "upstream:\n  keepalive_timeout: 50d\n", 2, 22,
	    "out of range" },
	{ "ca_bundle null", "upstream:\n  ca_bundle: null\n", 2, 14,
	    "expected a string, got null" },
	{ "upstream unknown", "upstream:\n  dns: x\n", 2, 3,
	    "unknown key \"dns\" in upstream" },
	{ "retention ms", "audit:\n  retention: 500ms\n", 2, 14,
	    "out of range" },
	{ "retention neg", "audit:\n  retention: -1d\n", 2, 14,
	    "bad duration" },
	{ "checkpoint short", "audit:\n  checkpoint_interval: 50ms\n", 2, 24,
	    "out of range" },
	{ "checkpoint long", "audit:\n  checkpoint_interval: 2d\n", 2, 24,
	    "out of range" },
	{ "checkpoint bare", "audit:\n  checkpoint_interval: 10\n", 2, 24,
	    "bad duration" },
	{ "checkpoint null", "audit:\n  checkpoint_interval: null\n", 2, 24,
	    "expected a string, got null" },
	{ "signing_key empty", "audit:\n  signing_key: \"\"\n", 2, 16,
	    "must not be empty" },
	{ "on_failure word", "audit:\n  on_failure: warn\n", 2, 15,
	    "on_failure: expected deny or allow" },
	{ "on_failure case", "audit:\n  on_failure: Deny\n", 2, 15,
	    "on_failure: expected deny or allow" },
	{ "on_failure list", "audit:\n  on_failure: [deny]\n", 2, 15,
	    "expected a string, got a list" },
	{ "ship scheme", "audit:\n  ship:\n    url: mysql://db/x\n"
	    "    gateway: g\n", 3, 10, "ship.url: expected a postgresql:// URL" },
	{ "ship param", "audit:\n  ship:\n    url: postgresql://db/x?nosuch=1\n"
	    "    gateway: g\n", 3, 10, "ship.url: invalid URI query parameter" },
	{ "ship no url", "audit:\n  ship:\n    gateway: g\n", 3, 5,
	    "ship: url is required" },
	{ "ship gateway", "audit:\n  ship:\n    url: postgresql://db/x\n"
	    "    gateway: \"gw 1\"\n", 4, 14, "is not a gateway name" },
	{ "ship unknown", "audit:\n  ship:\n    url: postgresql://db/x\n"
	    "    table: t\n", 4, 5, "unknown key \"table\" in ship" },
	{ "ship list", "audit:\n  ship: [postgresql://db/x]\n", 2, 9,
	    "expected a mapping" },
	{ "policies_watch word", "policies_watch: yes\n", 1, 17,
	    "policies_watch" },
	{ "audit unknown", "audit:\n  signing: x\n", 2, 3,
	    "unknown key \"signing\" in audit" },
	{ "geoip list", "geoip:\n  country_db: [a]\n", 2, 15,
	    "expected a string, got a list" },
	{ "geoip unknown", "geoip:\n  city_db: x\n", 2, 3,
	    "unknown key \"city_db\" in geoip" },
	{ "runtime", "sandbox:\n  runtime: docker\n", 2, 12,
	    "expected runsc or crun" },
	{ "subnet /31", "sandbox:\n  subnet: 198.18.0.0/31\n", 2, 11,
	    "/30 or wider" },
	{ "subnet v6", "sandbox:\n  subnet: fd00::/64\n", 2, 11,
	    "IPv4 prefix" },
	{ "subnet host bits", "sandbox:\n  subnet: 198.18.0.1/16\n", 2, 11,
	    "has host bits set; did you mean 198.18.0.0/16?" },
	{ "rootfs empty", "sandbox:\n  rootfs: \"\"\n", 2, 11,
	    "must not be empty" },
	{ "max_connections 0", "limits:\n  max_connections: 0\n", 2, 20,
	    "out of range" },
	{ "max_header k", "limits:\n  max_header_bytes: 64k\n", 2, 21,
	    "expected an integer" },
	{ "limits unknown", "limits:\n  max_body: 1\n", 2, 3,
	    "unknown key \"max_body\" in limits" },
	{ "head_timeout bare", "limits:\n  head_timeout: 10\n", 2, 17,
	    "bad duration" },
	{ "head_timeout 50ms", "limits:\n  head_timeout: 50ms\n", 2, 17,
	    "out of range" },
	{ "head_timeout 2h", "limits:\n  head_timeout: 2h\n", 2, 17,
	    "out of range" },
	{ "per_sandbox list", "limits:\n  per_sandbox: [1]\n", 2, 16,
	    "per_sandbox" },
	{ "per_sandbox negative", "limits:\n  per_sandbox:\n"
	    "    max_connections: -1\n", 3, 22, "expected an integer" },
	{ "per_sandbox too big", "limits:\n  per_sandbox:\n"
	    "    dns_queries_per_second: 1000001\n", 3, 29, "out of range" },
	{ "per_sandbox unknown", "limits:\n  per_sandbox:\n"
	    "    max_conns: 1\n", 3, 5,
	    "unknown key \"max_conns\" in limits.per_sandbox" },
	{ "http2 streams 0", "limits:\n  http2:\n    max_concurrent_streams: 0\n",
	    3, 29, "out of range" },
	{ "http2 list 512", "limits:\n  http2:\n    max_header_list_bytes: 512\n",
	    3, 28, "out of range" },
	{ "http2 enabled word", "limits:\n  http2:\n    enabled: maybe\n", 3, 14,
	    "" },
	{ "http2 unknown", "limits:\n  http2:\n    max_streams: 1\n", 3, 5,
	    "unknown key \"max_streams\" in limits.http2" },
	{ "workers 0", "workers: 0\n", 1, 10, "out of range" },
	{ "workers 65", "workers: 65\n", 1, 10, "out of range" },
	{ "workers quoted", "workers: \"4\"\n", 1, 10,
	    "expected auto or an integer" },
	{ "workers word", "workers: many\n", 1, 10, "expected an integer" },
	{ "user list", "user: [a]\n", 1, 7, "user: expected a string" },
	{ "user dash", "user: \"-x\"\n", 1, 7, "is not a user name" },
	{ "user slash", "user: a/b\n", 1, 7, "is not a user name" },
	{ "user long", "user: abcdefghijklmnopqrstuvwxyz0123456\n", 1, 7,
	    "longer than 32 bytes" },
	{ "unknown top", "wokers: 2\n", 1, 1,
	    "unknown key \"wokers\" in the config file" },
	{ "top list", "- a\n", 1, 1, "mapping of keys" },
	{ "duplicate", "workers: 1\nworkers: 2\n", 2, 1,
	    "duplicate key \"workers\"" },
	{ "syntax", "listen: {http: \n", 2, 1, "YAML syntax error" },
};

static void
test_errors(void)
{
	const struct err_case *tc;
	struct config *cfg;
	struct diag d;
	const char *path;
	size_t i;

	for (i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		tc = &err_cases[i];
		diag_init(&d);
		path = coretest_tmpfile("case.yaml", tc->yaml);
		cfg = config_load(path, &d);
		CHECK_MSG(cfg == NULL, "%s: loaded", tc->name);
		config_free(cfg);
		coretest_check_first(&d, tc->name, path, 1, tc->line, tc->col,
		    tc->msg);
		diag_free(&d);
	}

	/* A file that is not there. */
	diag_init(&d);
	path = join(tmp_dir, "nonexistent.yaml");
	CHECK(config_load(path, &d) == NULL);
	CHECK(d.n == 1 && d.v[0].line == 0 && d.v[0].col == 0 &&
	    strstr(d.v[0].msg, "cannot open") != NULL);
	diag_free(&d);

	/* Odd but valid: empty files, empty sections, "auto" quoted. */
	{
		static const char *ok[] = {
			"", "# nothing\n", "listen:\nupstream:\n",
			"workers: \"auto\"\n", "policies: []\n",
			"policies: one.yaml\n",
		};

		for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			diag_init(&d);
			cfg = config_load(coretest_tmpfile("ok.yaml", ok[i]),
			    &d);
			CHECK_MSG(cfg != NULL, "ok case %zu", i);
			diag_print(&d, stderr);
			config_free(cfg);
			diag_free(&d);
		}
	}

	/* checkpoint_interval: 0 (or 0s) keeps only the one at shutdown. */
	{
		static const char *zero[] = {
			"audit:\n  checkpoint_interval: 0\n",
			"audit:\n  checkpoint_interval: 0s\n",
		};

		for (i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
			diag_init(&d);
			cfg = config_load(coretest_tmpfile("ok.yaml", zero[i]),
			    &d);
			CHECK_MSG(cfg != NULL && cfg->audit_checkpoint_ms == 0,
			    "zero case %zu", i);
			config_free(cfg);
			diag_free(&d);
		}
	}
}

/* One file with many errors: every one is reported, in file order. */
static void
test_many_errors(void)
{
	static const struct coretest_diag want[] = {
		{ 4, 9, "bad port" },
		{ 5, 11, "not an IP address" },
		{ 6, 3, "unknown key \"gopher\"" },
		{ 8, 20, "bad duration" },
		{ 9, 14, "must not be empty" },
		{ 11, 12, "expected runsc or crun" },
		{ 12, 11, "/30 or wider" },
		{ 13, 10, "out of range" },
	};
	struct config *cfg;
	struct diag d;
	char file[2 * PATH_MAX];

	snprintf(file, sizeof(file), "%s", join(data_dir, "cfg_errors.yaml"));
	diag_init(&d);
	cfg = config_load(file, &d);
	CHECK(cfg == NULL);
	coretest_check_diags(&d, file, want, sizeof(want) / sizeof(want[0]));
	diag_free(&d);
}

static void
test_durations(void)
{
	static const struct {
		const char	*s;
		int		 ok;
		uint64_t	 ms;
	} cases[] = {
		{ "250ms", 1, 250 },
		{ "10s", 1, 10000 },
		{ "5m", 1, 300000 },
		{ "2h", 1, 7200000 },
		{ "7d", 1, 604800000 },
		{ "30d", 1, 2592000000ULL },
		{ "0s", 1, 0 },
		{ "1ms", 1, 1 },
		{ "300s", 1, 300000 },
		{ "18446744073709551615ms", 1, UINT64_MAX },
		{ "18446744073709551616ms", 0, 0 },
		{ "213503982334602d", 0, 0 },
		{ "", 0, 0 },
		{ "10", 0, 0 },
		{ "s", 0, 0 },
		{ "ms", 0, 0 },
		{ "10x", 0, 0 },
		{ "1.5s", 0, 0 },
		{ "-1s", 0, 0 },
		{ "+1s", 0, 0 },
		{ " 10s", 0, 0 },
		{ "10s ", 0, 0 },
		{ "10 s", 0, 0 },
		{ "10S", 0, 0 },
		{ "1h30m", 0, 0 },
		{ "0x10s", 0, 0 },
		{ "10sm", 0, 0 },
		{ "5w", 0, 0 },
	};
	uint64_t ms;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ms = 12345;
		rc = config_parse_duration_ms(cases[i].s, &ms);
		CHECK_MSG((rc == 0) == cases[i].ok, "\"%s\"", cases[i].s);
		if (cases[i].ok && rc == 0)
			CHECK_MSG(ms == cases[i].ms, "\"%s\": %llu", cases[i].s,
			    (unsigned long long)ms);
	}
	CHECK(config_parse_duration_ms(NULL, &ms) == -1);
}

static void
test_hostport(void)
{
	static const struct {
		const char	*s;
		uint16_t	 def;
		int		 ok;
		int		 family;
		const char	*addr;
		int		 port;
	} cases[] = {
		{ "127.0.0.1:80", 0, 1, AF_INET, "127.0.0.1", 80 },
		{ "0.0.0.0:65535", 0, 1, AF_INET, "0.0.0.0", 65535 },
		{ "[::1]:53", 0, 1, AF_INET6, "::1", 53 },
		{ "[2001:db8::1]:8443", 0, 1, AF_INET6, "2001:db8::1", 8443 },
		{ "127.0.0.1", 53, 1, AF_INET, "127.0.0.1", 53 },
		{ "::1", 53, 1, AF_INET6, "::1", 53 },
		{ "[::1]", 53, 1, AF_INET6, "::1", 53 },
		{ "2001:db8::1", 53, 1, AF_INET6, "2001:db8::1", 53 },
		{ "127.0.0.1", 0, 0, 0, NULL, 0 },
		{ "[::1]", 0, 0, 0, NULL, 0 },
		{ "", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:0", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:65536", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:080", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:8o", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:-1", 53, 0, 0, NULL, 0 },
		{ "host:80", 53, 0, 0, NULL, 0 },
		{ "localhost", 53, 0, 0, NULL, 0 },
		{ "[::1]80", 53, 0, 0, NULL, 0 },
		{ "[::1", 53, 0, 0, NULL, 0 },
		{ "[1.2.3.4]:80", 53, 0, 0, NULL, 0 },
		{ "1.2.3.4:80:90", 53, 0, 0, NULL, 0 },
		{ "1.2.3:80", 53, 0, 0, NULL, 0 },
		{ "2130706433:80", 53, 0, 0, NULL, 0 },
		{ "[]:80", 53, 0, 0, NULL, 0 },
	};
	struct sockaddr_storage ss;
	socklen_t sl;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = config_parse_hostport(cases[i].s, &ss, &sl, cases[i].def);
		CHECK_MSG((rc == 0) == cases[i].ok, "\"%s\"", cases[i].s);
		if (rc != 0 || !cases[i].ok)
			continue;
		CHECK_INT(ss.ss_family, cases[i].family);
		CHECK_STR(ss_addr(&ss), cases[i].addr);
		if (cases[i].family == AF_INET) {
			CHECK_INT(sl, sizeof(struct sockaddr_in));
			CHECK_INT(ntohs(((struct sockaddr_in *)&ss)->sin_port),
			    cases[i].port);
		} else {
			CHECK_INT(sl, sizeof(struct sockaddr_in6));
			CHECK_INT(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port),
			    cases[i].port);
		}
	}
}

/* user: a name, or null / "" for no drop. */
static void
test_user(void)
{
	const char *docs[] = { "user: nobody\n", "user: null\n", "user: \"\"\n",
	    "user: ~\n" };
	struct config *cfg;
	struct diag d;
	size_t i;

	for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		diag_init(&d);
		cfg = config_load(coretest_tmpfile("user.yaml", docs[i]), &d);
		diag_print(&d, stderr);
		CHECK(cfg != NULL);
		if (cfg != NULL && i == 0)
			CHECK_STR(cfg->user, "nobody");
		else if (cfg != NULL)
			CHECK(cfg->user == NULL);
		config_free(cfg);
		diag_free(&d);
	}
}

/* audit.ship and policies_watch. */
static void
test_fleet_keys(void)
{
	struct config *cfg;
	struct diag d;

	diag_init(&d);
	cfg = config_load(coretest_tmpfile("fleet.yaml", "audit:\n  ship:\n"
	    "    url: \"postgresql://sg@db.example.com/fleet?sslmode=require\"\n"
	    "    gateway: gw-eu.1\npolicies_watch: true\n"), &d);
	diag_print(&d, stderr);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK_STR(cfg->audit_ship_url,
		    "postgresql://sg@db.example.com/fleet?sslmode=require");
		CHECK_STR(cfg->audit_ship_gateway, "gw-eu.1");
		CHECK_INT(cfg->policies_watch, 1);
	}
	config_free(cfg);
	diag_free(&d);
	/* Off by default; ship: null is off too. */
	diag_init(&d);
	cfg = config_load(coretest_tmpfile("fleet.yaml", "audit:\n  ship: null\n"),
	    &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK(cfg->audit_ship_url == NULL);
		CHECK_INT(cfg->policies_watch, 0);
	}
	config_free(cfg);
	diag_free(&d);
}

static void
test_find(void)
{
	char cwd[PATH_MAX];
	const char *want;

	CHECK_STR(config_find("x.yaml"), "x.yaml");
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(tmp_dir) == 0);
	unlink("sandgate.yaml");
	want = access("/etc/sandgate/sandgate.yaml", F_OK) == 0 ?
	    "/etc/sandgate/sandgate.yaml" : NULL;
	if (want == NULL)
		CHECK(config_find(NULL) == NULL);
	else
		CHECK_STR(config_find(NULL), want);
	coretest_tmpfile("sandgate.yaml", "workers: 1\n");
	CHECK_STR(config_find(NULL), "./sandgate.yaml");
	unlink("sandgate.yaml");
	CHECK(chdir(cwd) == 0);
}

/* workers: auto is one loop per online CPU, 1 to 64. */
static void
test_auto_workers(void)
{
	struct config *cfg;
	struct diag d;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CHECK(config_auto_workers(-1) == 1);
	CHECK(config_auto_workers(0) == 1);
	CHECK(config_auto_workers(1) == 1);
	CHECK(config_auto_workers(2) == 2);
	CHECK(config_auto_workers(3) == 3);
	CHECK(config_auto_workers(16) == 16);
	CHECK(config_auto_workers(64) == 64);
	CHECK(config_auto_workers(65) == 64);
	CHECK(config_auto_workers(1024) == 64);
	diag_init(&d);
	cfg = config_load(coretest_tmpfile("auto.yaml", "workers: auto\n"), &d);
	CHECK(cfg != NULL && cfg->workers == config_auto_workers(n));
	config_free(cfg);
	diag_free(&d);
	/* Absent: the same. */
	diag_init(&d);
	cfg = config_load(coretest_tmpfile("auto.yaml", "# nothing\n"), &d);
	CHECK(cfg != NULL && cfg->workers == config_auto_workers(n));
	config_free(cfg);
	diag_free(&d);
}

int
main(void)
{
	static const struct config_checks checks = { audit_store_url_ok };

	/* libpq's parse of audit.ship.url, handed down as main() does */
	config_set_checks(&checks);
	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	test_defaults();
	test_full();
	test_state_dir();
	test_relative();
	test_errors();
	test_fleet_keys();
	test_many_errors();
	test_durations();
	test_hostport();
	test_user();
	test_find();
	test_auto_workers();
	return check_summary();
}
