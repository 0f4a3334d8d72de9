/*
 * Unit tests of the sandbox launcher's pure parts: config.json content for
 * given options (both runtimes), the size and CPU parsers, names, /30
 * arithmetic and the nftables commands built for a sandbox.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "check.h"
#include "sandbox/sandbox.h"

/* The mount whose destination is dst, or NULL. */
static json_t *
find_mount(json_t *cfg, const char *dst)
{
	json_t *m = json_object_get(cfg, "mounts"), *e;
	size_t i;

	json_array_foreach(m, i, e)
		if (strcmp(json_string_value(json_object_get(e, "destination")),
		    dst) == 0)
			return e;
	return NULL;
}

static int
has_option(json_t *mount, const char *opt)
{
	json_t *o = json_object_get(mount, "options"), *e;
	size_t i;

	json_array_foreach(o, i, e)
		if (strcmp(json_string_value(e), opt) == 0)
			return 1;
	return 0;
}

static int
has_string(json_t *arr, const char *s)
{
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e)
		if (json_is_string(e) && strcmp(json_string_value(e), s) == 0)
			return 1;
	return 0;
}

/* The namespace entry of the given type, or NULL. */
static json_t *
find_ns(json_t *cfg, const char *type)
{
	json_t *ns = json_object_get(json_object_get(cfg, "linux"),
	    "namespaces"), *e;
	size_t i;

	json_array_foreach(ns, i, e)
		if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0)
			return e;
	return NULL;
}

static json_int_t
path_int(json_t *cfg, const char *a, const char *b, const char *c)
{
	json_t *j = json_object_get(json_object_get(json_object_get(cfg, "linux"),
	    a), b);

	if (c != NULL)
		j = json_object_get(j, c);
	return json_is_integer(j) ? json_integer_value(j) : -1;
}

static void
test_config(void)
{
	static const struct {
		enum sandbox_runtime rt;
		const char	*rootfs;
		const char	*workspace;
		uint64_t	 memory, cpu_millis;
		int64_t		 pids;
	} cases[] = {
		{ SANDBOX_CRUN, "host", NULL, 512ull << 20, 1000, 256 },
		{ SANDBOX_RUNSC, "host", "/srv/ws", 1ull << 30, 500, 64 },
		{ SANDBOX_CRUN, "/srv/image", "/srv/ws", 0, 0, 0 },
		{ SANDBOX_RUNSC, "/srv/image", NULL, 256ull << 20, 2500, 10 },
	};
	char *argv[] = { "curl", "-s", "http://allowed.test/", NULL };
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sandbox_spec sp;
		const char *err = NULL;
		json_t *cfg, *proc, *env, *m, *caps, *ns;
		int host = strcmp(cases[i].rootfs, "host") == 0;

		memset(&sp, 0, sizeof(sp));
		sp.runtime = cases[i].rt;
		sp.id = "agent-1";
		sp.rootfs = cases[i].rootfs;
		sp.root_path = host ? "/run/sandgate/bundles/agent-1/rootfs" :
		    cases[i].rootfs;
		sp.etc_dir = "/run/sandgate/bundles/agent-1/etc";
		sp.ca_file = "/etc/ssl/certs/ca-certificates.crt";
		sp.workspace = cases[i].workspace;
		sp.netns_path = "/run/netns/sandgate-agent-1";
		sp.env[sp.n_env++] = "GH_TOKEN=sg-ph-abc";
		sp.env[sp.n_env++] = "FOO=bar baz";
		sp.argv = argv;
		sp.argc = 3;
		sp.memory = cases[i].memory;
		sp.cpu_millis = cases[i].cpu_millis;
		sp.pids = cases[i].pids;
		sp.uid_base = 100000;
		sp.id_count = 65536;
		cfg = sandbox_oci_config(&sp, &err);
		CHECK_MSG(cfg != NULL, "case %zu: %s", i, err);
		if (cfg == NULL)
			continue;
		CHECK_STR(json_string_value(json_object_get(cfg, "ociVersion")),
		    "1.0.2");
		CHECK(json_is_true(json_object_get(json_object_get(cfg, "root"),
		    "readonly")));
		CHECK_STR(json_string_value(json_object_get(json_object_get(cfg,
		    "root"), "path")), sp.root_path);
		proc = json_object_get(cfg, "process");
		CHECK(json_is_true(json_object_get(proc, "noNewPrivileges")));
		CHECK_INT(json_array_size(json_object_get(proc, "args")), 3);
		CHECK_STR(json_string_value(json_array_get(json_object_get(proc,
		    "args"), 2)), "http://allowed.test/");
		caps = json_object_get(proc, "capabilities");
		CHECK(json_is_object(caps));
		CHECK_INT(json_array_size(json_object_get(caps, "bounding")), 0);
		CHECK_INT(json_array_size(json_object_get(caps, "effective")), 0);
		CHECK_INT(json_array_size(json_object_get(caps, "permitted")), 0);
		CHECK_INT(json_array_size(json_object_get(caps, "ambient")), 0);
		env = json_object_get(proc, "env");
		CHECK(has_string(env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"));
		CHECK(has_string(env, "REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt"));
		CHECK(has_string(env, "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"));
		CHECK(has_string(env, "AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt"));
		CHECK(has_string(env, "GH_TOKEN=sg-ph-abc"));
		CHECK(has_string(env, "FOO=bar baz"));
		CHECK(has_string(env, "SANDGATE_SANDBOX=agent-1"));

		/* mounts */
		m = find_mount(cfg, "/tmp");
		CHECK(m != NULL && strcmp(json_string_value(json_object_get(m,
		    "type")), "tmpfs") == 0);
		CHECK(find_mount(cfg, "/proc") != NULL);
		m = find_mount(cfg, "/usr");
		if (host) {
			CHECK(m != NULL && has_option(m, "ro") &&
			    has_option(m, "rbind"));
			m = find_mount(cfg, "/etc");
			CHECK(m != NULL && has_option(m, "ro"));
			CHECK_STR(json_string_value(json_object_get(m, "source")),
			    sp.etc_dir);
			CHECK(find_mount(cfg, "/etc/resolv.conf") == NULL);
		} else {
			CHECK(m == NULL);
			CHECK(find_mount(cfg, "/etc") == NULL);
			m = find_mount(cfg, "/etc/resolv.conf");
			CHECK(m != NULL && has_option(m, "ro"));
			CHECK(find_mount(cfg,
			    "/etc/ssl/certs/ca-certificates.crt") != NULL);
		}
		m = find_mount(cfg, "/workspace");
		if (cases[i].workspace != NULL) {
			CHECK(m != NULL && has_option(m, "rw"));
			CHECK_STR(json_string_value(json_object_get(proc, "cwd")),
			    "/workspace");
		} else
			CHECK(m == NULL);

		/* namespaces: crun joins the netns by path in a new userns */
		CHECK(find_ns(cfg, "pid") != NULL);
		CHECK(find_ns(cfg, "mount") != NULL);
		CHECK(find_ns(cfg, "ipc") != NULL);
		CHECK(find_ns(cfg, "uts") != NULL);
		ns = find_ns(cfg, "network");
		if (cases[i].rt == SANDBOX_CRUN) {
			CHECK(find_ns(cfg, "user") != NULL);
			CHECK(ns != NULL);
			CHECK_STR(json_string_value(json_object_get(ns, "path")),
			    "/run/netns/sandgate-agent-1");
			CHECK_INT(json_integer_value(json_object_get(json_array_get(
			    json_object_get(json_object_get(cfg, "linux"),
			    "uidMappings"), 0), "hostID")), 100000);
		} else {
			/* runsc is started inside the netns instead */
			CHECK(ns == NULL);
			CHECK(find_ns(cfg, "user") == NULL);
		}

		/* limits */
		CHECK_INT(path_int(cfg, "resources", "memory", "limit"),
		    cases[i].memory != 0 ? (long long)cases[i].memory : -1);
		CHECK_INT(path_int(cfg, "resources", "cpu", "quota"),
		    cases[i].cpu_millis != 0 ?
		    (long long)cases[i].cpu_millis * 100 : -1);
		CHECK_INT(path_int(cfg, "resources", "pids", "limit"),
		    cases[i].pids != 0 ? cases[i].pids : -1);
		json_decref(cfg);
	}
}

static void
test_config_incomplete(void)
{
	struct sandbox_spec sp;
	const char *err = NULL;
	char *argv[] = { "true", NULL };

	memset(&sp, 0, sizeof(sp));
	sp.id = "x";
	sp.rootfs = "host";
	sp.root_path = "/r";
	sp.netns_path = "/run/netns/sandgate-x";
	sp.argv = argv;
	sp.argc = 1;
	sp.id_count = 1;
	/* no generated /etc */
	CHECK(sandbox_oci_config(&sp, &err) == NULL);
	CHECK(err != NULL);
	sp.etc_dir = "/e";
	sp.argc = 0;
	CHECK(sandbox_oci_config(&sp, &err) == NULL);
}

static void
test_sizes(void)
{
	static const struct {
		const char	*in;
		int		 ok;
		uint64_t	 out;
	} sz[] = {
		{ "512M", 1, 512ull << 20 }, { "1G", 1, 1ull << 30 },
		{ "64k", 1, 64ull << 10 }, { "1048576", 1, 1048576 },
		{ "0", 0, 0 }, { "", 0, 0 }, { "M", 0, 0 }, { "-1M", 0, 0 },
		{ "1T", 0, 0 }, { "1MB", 0, 0 }, { "99999999999999999999", 0, 0 },
		{ "17179869184G", 0, 0 },
	};
	static const struct {
		const char	*in;
		int		 ok;
		uint64_t	 out;
	} cpu[] = {
		{ "1", 1, 1000 }, { "0.5", 1, 500 }, { "2.25", 1, 2250 },
		{ "0.001", 1, 1 }, { "0", 0, 0 }, { "0.0001", 0, 0 },
		{ ".5", 0, 0 }, { "1.", 0, 0 }, { "1x", 0, 0 }, { "", 0, 0 },
		{ "4096", 0, 0 },
	};
	size_t i;
	uint64_t v;

	for (i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		v = 0;
		CHECK_MSG((sandbox_parse_size(sz[i].in, &v) == 0) == sz[i].ok,
		    "size %s", sz[i].in);
		if (sz[i].ok)
			CHECK_INT(v, sz[i].out);
	}
	for (i = 0; i < sizeof(cpu) / sizeof(cpu[0]); i++) {
		v = 0;
		CHECK_MSG((sandbox_parse_cpus(cpu[i].in, &v) == 0) == cpu[i].ok,
		    "cpus %s", cpu[i].in);
		if (cpu[i].ok)
			CHECK_INT(v, cpu[i].out);
	}
}

static void
test_names(void)
{
	static const struct {
		const char	*id;
		int		 ok;
	} ids[] = {
		{ "agent-1", 1 }, { "a", 1 }, { "-a", 0 }, { "A", 0 },
		{ "a_b", 0 }, { "", 0 }, { "a/b", 0 }, { "a b", 0 },
		/* the policy's id rule: at most 40 */
		{ "abcdefghijabcdefghijabcdefghijabcdefghij", 1 },
		{ "abcdefghijabcdefghijabcdefghijabcdefghijk", 0 },
	};
	struct sandbox_net a, b;
	size_t i;

	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		CHECK_MSG(sandbox_valid_id(ids[i].id) == ids[i].ok, "id %s",
		    ids[i].id);
	sandbox_net_names("agent-1", &a);
	sandbox_net_names("agent-2", &b);
	CHECK_STR(a.netns, "sandgate-agent-1");
	CHECK_STR(a.netns_path, "/run/netns/sandgate-agent-1");
	CHECK_INT(strlen(a.veth_host), 10);
	CHECK(strncmp(a.veth_host, "sg", 2) == 0);
	CHECK(strcmp(a.veth_host, b.veth_host) != 0);
	sandbox_net_names("agent-1", &b);
	CHECK_STR(a.veth_host, b.veth_host);
}

static void
test_blocks(void)
{
	static const struct {
		const char	*subnet;
		uint32_t	 idx;
		int		 ok;
		const char	*host, *guest;
	} cases[] = {
		{ "198.18.0.0/16", 0, 1, "198.18.0.1", "198.18.0.2" },
		{ "198.18.0.0/16", 1, 1, "198.18.0.5", "198.18.0.6" },
		{ "198.18.0.0/16", 64, 1, "198.18.1.1", "198.18.1.2" },
		{ "198.18.0.0/16", 16383, 1, "198.18.255.253", "198.18.255.254" },
		{ "198.18.0.0/16", 16384, 0, NULL, NULL },
		{ "198.19.8.4/30", 0, 1, "198.19.8.5", "198.19.8.6" },
		{ "198.19.8.4/30", 1, 0, NULL, NULL },
		{ "198.19.8.0/31", 0, 0, NULL, NULL },
		{ "fd00::/64", 0, 0, NULL, NULL },
	};
	char h[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	struct in_addr ha, ga;
	struct cidr c;
	const char *err;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(cidr_parse(cases[i].subnet, &c, &err) == 0);
		CHECK_MSG((sandbox_net_block(&c, cases[i].idx, &ha, &ga) == 0) ==
		    cases[i].ok, "%s #%u", cases[i].subnet, cases[i].idx);
		if (!cases[i].ok)
			continue;
		inet_ntop(AF_INET, &ha, h, sizeof(h));
		inet_ntop(AF_INET, &ga, g, sizeof(g));
		CHECK_STR(h, cases[i].host);
		CHECK_STR(g, cases[i].guest);
	}
}

static int
has_all(const char *buf, const char *const *want, size_t n)
{
	size_t i;
	int ok = 1;

	for (i = 0; i < n; i++)
		if (strstr(buf, want[i]) == NULL) {
			CHECK_MSG(0, "missing: %s", want[i]);
			ok = 0;
		}
	return ok;
}

#define HAS_ALL(buf, v)	has_all(buf, v, sizeof(v) / sizeof(v[0]))

static void
test_nft(void)
{
	/* the common part, whatever the listeners' addresses */
	static const char *const want[] = {
		"add chain inet sandgate raw_sg0000abcd\n",
		"add rule inet sandgate raw_sg0000abcd meta nfproto ipv6 drop\n",
		"add rule inet sandgate raw_sg0000abcd ip saddr != 198.18.0.6 counter drop\n",
		"add chain inet sandgate pre_sg0000abcd\n",
		"add rule inet sandgate pre_sg0000abcd meta nfproto ipv6 drop\n",
		"add rule inet sandgate in_sg0000abcd ip saddr != 198.18.0.6 drop\n",
		"add rule inet sandgate in_sg0000abcd ct direction reply ct original ip daddr 198.18.0.6 accept\n",
		"add rule inet sandgate in_sg0000abcd drop\n",
		"add element inet sandgate raw_map { \"sg0000abcd\" : jump raw_sg0000abcd }\n",
		"add element inet sandgate pre_map { \"sg0000abcd\" : jump pre_sg0000abcd }\n",
		"add element inet sandgate in_map { \"sg0000abcd\" : jump in_sg0000abcd }\n",
		"add element inet sandgate sandboxes { \"sg0000abcd\" }\n",
	};
	/* wildcard listeners: redirect to the veth's own address */
	static const char *const want_any[] = {
		"add rule inet sandgate pre_sg0000abcd udp dport 53 redirect to :5353\n",
		"add rule inet sandgate pre_sg0000abcd tcp dport 53 redirect to :5353\n",
		"add rule inet sandgate pre_sg0000abcd meta l4proto tcp redirect to :3129\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 198.18.0.5 tcp dport 3129 accept\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 198.18.0.5 tcp dport 5353 accept\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 198.18.0.5 udp dport 5353 accept\n",
	};
	/* loopback listeners (the built-in defaults): DNAT to them, and only
	 * their ports of 127.0.0.1 are let in */
	static const char *const want_lo[] = {
		"add rule inet sandgate pre_sg0000abcd udp dport 53 dnat ip to 127.0.0.1:5353\n",
		"add rule inet sandgate pre_sg0000abcd tcp dport 53 dnat ip to 127.0.0.1:5353\n",
		"add rule inet sandgate pre_sg0000abcd meta l4proto tcp dnat ip to 127.0.0.1:3129\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 127.0.0.1 tcp dport 3129 accept\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 127.0.0.1 tcp dport 5353 accept\n",
		"add rule inet sandgate in_sg0000abcd ip daddr 127.0.0.1 udp dport 5353 accept\n",
	};
	static const char *const bad_names[] = {
		"eth0", "sg", "sg0000abcd\"", "sg00; flush", "sgABCD", "xg0000abcd",
	};
	struct sandbox_net n;
	struct sandbox_dest tp, dns, none;
	char buf[4096];
	size_t i;

	memset(&n, 0, sizeof(n));
	memset(&tp, 0, sizeof(tp));
	memset(&dns, 0, sizeof(dns));
	memset(&none, 0, sizeof(none));
	snprintf(n.veth_host, sizeof(n.veth_host), "sg0000abcd");
	inet_pton(AF_INET, "198.18.0.5", &n.host_addr);
	inet_pton(AF_INET, "198.18.0.6", &n.guest_addr);
	tp.port = 3129;
	dns.port = 5353;
	CHECK(sandbox_nft_rules(&n, &tp, &dns, 0, buf, sizeof(buf)) > 0);
	HAS_ALL(buf, want);
	HAS_ALL(buf, want_any);
	CHECK(strstr(buf, "dnat") == NULL && strstr(buf, "127.0.0.1") == NULL);
	/* IPv6 is dropped before anything is redirected or accepted */
	CHECK(strstr(buf, "pre_sg0000abcd meta nfproto ipv6 drop") <
	    strstr(buf, "redirect"));
	/* a forged source is dropped before anything is accepted */
	CHECK(strstr(buf, "in_sg0000abcd ip saddr != 198.18.0.6 drop") <
	    strstr(buf, "in_sg0000abcd ip daddr"));
	/* only replies to what the host opened (ingress) come back in */
	CHECK(strstr(buf, "in_sg0000abcd meta nfproto ipv6 drop") <
	    strstr(buf, "ct direction reply"));
	/* no group, no log rule; a group: one rate-limited log rule after the
	 * redirects, so DNS and TCP are never logged */
	CHECK(strstr(buf, " log ") == NULL);
	CHECK(sandbox_nft_rules(&n, &tp, &dns, 4201, buf, sizeof(buf)) > 0);
	CHECK(strstr(buf, "add rule inet sandgate pre_sg0000abcd limit rate "
	    "20/second burst 40 packets log group 4201\n") != NULL);
	CHECK(strstr(buf, "log group") > strstr(buf, "l4proto tcp redirect"));

	inet_pton(AF_INET, "127.0.0.1", &tp.addr);
	inet_pton(AF_INET, "127.0.0.1", &dns.addr);
	CHECK(sandbox_nft_rules(&n, &tp, &dns, 0, buf, sizeof(buf)) > 0);
	HAS_ALL(buf, want);
	HAS_ALL(buf, want_lo);
	CHECK(strstr(buf, "redirect") == NULL);
	CHECK(strstr(buf, "198.18.0.5") == NULL);
	/* two listeners on two addresses: each gets its own */
	inet_pton(AF_INET, "127.0.0.2", &dns.addr);
	CHECK(sandbox_nft_rules(&n, &tp, &dns, 0, buf, sizeof(buf)) > 0);
	CHECK(strstr(buf, "udp dport 53 dnat ip to 127.0.0.2:5353\n") != NULL);
	CHECK(strstr(buf, "l4proto tcp dnat ip to 127.0.0.1:3129\n") != NULL);
	CHECK(strstr(buf, "ip daddr 127.0.0.2 udp dport 5353 accept\n") != NULL);

	none.port = 0;
	CHECK(sandbox_nft_rules(&n, &none, &dns, 0, buf, sizeof(buf)) == -1);
	CHECK(sandbox_nft_rules(&n, &tp, &none, 0, buf, sizeof(buf)) == -1);
	CHECK(sandbox_nft_rules(&n, &tp, &dns, 0, buf, 64) == -1);
	for (i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		memset(n.veth_host, 0, sizeof(n.veth_host));
		memcpy(n.veth_host, bad_names[i], strlen(bad_names[i]) <
		    sizeof(n.veth_host) ? strlen(bad_names[i]) :
		    sizeof(n.veth_host) - 1);
		CHECK_MSG(sandbox_nft_rules(&n, &tp, &dns, 0, buf,
		    sizeof(buf)) == -1, "accepted %s", bad_names[i]);
	}
}

int
main(void)
{
	test_config();
	test_config_incomplete();
	test_sizes();
	test_names();
	test_blocks();
	test_nft();
	return check_summary();
}
