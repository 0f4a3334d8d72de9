/*
 * What a reload cannot apply: every key of sandgate.yaml, classified once
 * (docs/config.md, "What a reload applies"), and the comparison of the
 * running config with a newly loaded one that names the restart-only keys
 * whose value changed. Owns that table and nothing else.
 */
#include <stddef.h>
#include <string.h>
#include <netinet/in.h>

#include "core/config.h"

enum cd_kind {
	CD_STR,		/* char *, NULL for null */
	CD_LISTEN,	/* struct config_listen */
	CD_U32,
	CD_U64,
	CD_INT,
	CD_RESOLVERS,	/* upstream.resolvers: system or the list */
	CD_SYSLOG_ON,	/* audit.syslog: null or a mapping */
	CD_SYSLOG_SUB,	/* a field of audit.syslog, when it is on both times */
	CD_SYSLOG_SS,	/* audit.syslog.address */
};

/*
 * The restart-only keys, in the order docs/config.md lists them. Applied on
 * reload (so not here): `policies` and everything in the policy files. Read
 * by each `sandgate sandbox` command rather than by serve (so not here
 * either): sandbox.runtime, sandbox.subnet, sandbox.rootfs.
 */
static const struct {
	const char	*key;
	enum cd_kind	 kind;
	size_t		 off;
} cd_keys[] = {
#define K(name, kind, field) { name, kind, offsetof(struct config, field) }
	K("state_dir", CD_STR, state_dir),
	K("listen.http", CD_LISTEN, listen_http),
	K("listen.socks5", CD_LISTEN, listen_socks5),
	K("listen.dns", CD_LISTEN, listen_dns),
	K("listen.transparent", CD_LISTEN, listen_transparent),
	K("listen.ingress", CD_LISTEN, listen_ingress),
	K("listen.metrics", CD_LISTEN, listen_metrics),
	K("listen.admin", CD_STR, admin_socket),
	K("ingress_domain", CD_STR, ingress_domain),
	K("ingress_tls.cert", CD_STR, ingress_tls_cert),
	K("ingress_tls.key", CD_STR, ingress_tls_key),
	K("ingress_upgrade_idle_timeout", CD_U32, ingress_upgrade_idle_ms),
	K("ca.cert", CD_STR, ca_cert),
	K("ca.key", CD_STR, ca_key),
	K("vault.db", CD_STR, vault_db),
	K("vault.key_file", CD_STR, vault_key_file),
	K("upstream.resolvers", CD_RESOLVERS, resolvers),
	K("upstream.ca_bundle", CD_STR, ca_bundle),
	K("upstream.connect_timeout", CD_U32, connect_timeout_ms),
	K("upstream.idle_timeout", CD_U32, idle_timeout_ms),
	K("upstream.keepalive_timeout", CD_U32, keepalive_timeout_ms),
	K("audit.db", CD_STR, audit_db),
	K("audit.retention", CD_U64, audit_retention_s),
	K("audit.checkpoint_interval", CD_U64, audit_checkpoint_ms),
	K("audit.signing_key", CD_STR, audit_signing_key),
	K("audit.public_key", CD_STR, audit_public_key),
	K("audit.read_group", CD_STR, audit_read_group),
	K("audit.on_failure", CD_INT, audit_on_failure_allow),
	K("audit.syslog", CD_SYSLOG_ON, audit_syslog),
	K("audit.syslog.address", CD_SYSLOG_SS, audit_syslog_ss),
	K("audit.syslog.format", CD_SYSLOG_SUB, audit_syslog_json),
	K("audit.syslog.transport", CD_SYSLOG_SUB, audit_syslog_udp),
	K("audit.ship.url", CD_STR, audit_ship_url),
	K("audit.ship.gateway", CD_STR, audit_ship_gateway),
	K("geoip.country_db", CD_STR, geoip_country_db),
	K("geoip.asn_db", CD_STR, geoip_asn_db),
	K("limits.max_connections", CD_U32, max_connections),
	K("limits.max_header_bytes", CD_U32, max_header_bytes),
	K("limits.head_timeout", CD_U32, head_timeout_ms),
	K("limits.per_sandbox.max_connections", CD_U32,
	    sandbox_max_connections),
	K("limits.per_sandbox.connections_per_second", CD_U32,
	    sandbox_conn_rate),
	K("limits.per_sandbox.dns_queries_per_second", CD_U32,
	    sandbox_dns_rate),
	K("limits.http2.enabled", CD_INT, h2_enabled),
	K("limits.http2.max_concurrent_streams", CD_U32, h2_max_streams),
	K("limits.http2.max_header_list_bytes", CD_U32, h2_max_header_list),
	K("limits.http2.max_continuations", CD_U32, h2_max_continuations),
	K("limits.http2.max_resets_per_second", CD_U32, h2_max_resets),
	K("limits.http2.max_control_per_second", CD_U32, h2_max_control),
	K("workers", CD_INT, workers),
	K("user", CD_STR, user),
	K("policies_watch", CD_INT, policies_watch),
	K("log_level", CD_INT, log_level),
	K("log_format", CD_INT, log_format),
	K("approval.timeout", CD_U32, approval_timeout_ms),
	K("approval.max_pending", CD_U32, approval_max_pending),
	K("approval.notify", CD_STR, approval_notify_url),
#undef K
};

/* Same family, address and port (the text as written may differ). */
static int
cd_ss_equal(const struct sockaddr_storage *a, socklen_t alen,
    const struct sockaddr_storage *b, socklen_t blen)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (alen != blen || a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		    a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return a6->sin6_port == b6->sin6_port &&
		    memcmp(&a6->sin6_addr, &b6->sin6_addr,
		    sizeof(a6->sin6_addr)) == 0 &&
		    a6->sin6_scope_id == b6->sin6_scope_id;
	return alen == 0;
}

static int
cd_str_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static int
cd_resolvers_equal(const struct config *a, const struct config *b)
{
	int i;

	if (a->resolvers_system != b->resolvers_system ||
	    a->n_resolvers != b->n_resolvers)
		return 0;
	for (i = 0; i < a->n_resolvers; i++)
		if (!cd_ss_equal(&a->resolvers[i], sizeof(a->resolvers[i]),
		    &b->resolvers[i], sizeof(b->resolvers[i])))
			return 0;
	return 1;
}

static int
cd_equal(const struct config *a, const struct config *b, enum cd_kind kind,
    size_t off)
{
	const void *pa = (const char *)a + off, *pb = (const char *)b + off;
	const struct config_listen *la = pa, *lb = pb;

	/* a field of audit.syslog counts only when syslog is on both times */
	if ((kind == CD_SYSLOG_SUB || kind == CD_SYSLOG_SS) &&
	    (!a->audit_syslog || !b->audit_syslog))
		return 1;
	switch (kind) {
	case CD_STR:
		return cd_str_equal(*(char *const *)pa, *(char *const *)pb);
	case CD_LISTEN:
		if (la->enabled != lb->enabled)
			return 0;
		return !la->enabled || cd_ss_equal(&la->ss, la->sslen,
		    &lb->ss, lb->sslen);
	case CD_U32:
		return *(const uint32_t *)pa == *(const uint32_t *)pb;
	case CD_U64:
		return *(const uint64_t *)pa == *(const uint64_t *)pb;
	case CD_INT:
	case CD_SYSLOG_ON:
	case CD_SYSLOG_SUB:
		return *(const int *)pa == *(const int *)pb;
	case CD_RESOLVERS:
		return cd_resolvers_equal(a, b);
	case CD_SYSLOG_SS:
		return cd_ss_equal(&a->audit_syslog_ss, a->audit_syslog_sslen,
		    &b->audit_syslog_ss, b->audit_syslog_sslen);
	}
	return 0;
}

size_t
config_restart_keys(const struct config *running, const struct config *next,
    const char **keys, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < sizeof(cd_keys) / sizeof(cd_keys[0]); i++) {
		if (cd_equal(running, next, cd_keys[i].kind, cd_keys[i].off))
			continue;
		if (n < max)
			keys[n] = cd_keys[i].key;
		n++;
	}
	return n;
}
