/*
 * The gateway's configuration (sandgate.yaml, docs/config.md): a plain value
 * built once by config_load() and never changed afterwards; a reload builds a
 * new one. Paths in it are already resolved against the config file's
 * directory.
 */
#ifndef SG_CONFIG_H
#define SG_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/diag.h"
#include "core/netaddr.h"

#define CONFIG_MAX_RESOLVERS	8
#define CONFIG_MAX_POLICY_PATHS	32

/* A TCP/UDP listen address; enabled is 0 when the key was set to null. */
struct config_listen {
	int			 enabled;
	char			 text[128];	/* as written, for logs */
	struct sockaddr_storage	 ss;
	socklen_t		 sslen;
};

#define CONFIG_MAX_NOTIFY_ARGS	16

struct config {
	char		*file;		/* the file loaded, NULL for built-in defaults */
	char		*state_dir;
	struct config_listen listen_http;
	struct config_listen listen_socks5;
	struct config_listen listen_dns;
	struct config_listen listen_transparent;
	struct config_listen listen_ingress;
	struct config_listen listen_metrics;
	char		*admin_socket;	/* NULL: disabled */
	char		*ingress_domain;	/* lower-case, no trailing dot */
	char		*ingress_tls_cert;	/* NULL: the ingress listener is plain HTTP */
	char		*ingress_tls_key;
	uint32_t	 ingress_upgrade_idle_ms;	/* relayed WebSockets / Upgrades */
	char		*policy_paths[CONFIG_MAX_POLICY_PATHS];
	int		 n_policy_paths;
	char		*ca_cert;
	char		*ca_key;
	char		*vault_db;
	char		*vault_key_file;
	/* upstream */
	int		 resolvers_system;	/* 1: read /etc/resolv.conf */
	struct sockaddr_storage resolvers[CONFIG_MAX_RESOLVERS];
	int		 n_resolvers;
	char		*ca_bundle;		/* NULL: the system store */
	uint32_t	 connect_timeout_ms;
	uint32_t	 idle_timeout_ms;
	uint32_t	 keepalive_timeout_ms;	/* an idle kept-alive origin connection; 0: none kept */
	/* audit */
	char		*audit_db;
	uint64_t	 audit_retention_s;
	uint64_t	 audit_checkpoint_ms;	/* 0: a checkpoint only at shutdown */
	char		*audit_signing_key;	/* Ed25519, beside ca.key by default */
	char		*audit_public_key;
	char		*audit_read_group;	/* may read audit.db (0640); NULL: none */
	int		 audit_on_failure_allow;	/* on_failure: 0 deny, 1 allow */
	/* audit.syslog: every row forwarded (audit/audit_syslog.c) */
	int		 audit_syslog;		/* 0: null (off) */
	char		*audit_syslog_address;	/* as written, for log lines */
	struct sockaddr_storage audit_syslog_ss;
	socklen_t	 audit_syslog_sslen;
	int		 audit_syslog_json;	/* format: 0 rfc5424, 1 json */
	int		 audit_syslog_udp;	/* transport: 0 tcp (RFC 6587 octet counting), 1 udp */
	char		*audit_ship_url;	/* audit.ship; NULL: no fleet store */
	char		*audit_ship_gateway;
	/* geoip: NULL when unset */
	char		*geoip_country_db;
	char		*geoip_asn_db;
	/* sandbox launcher */
	char		*sandbox_runtime;	/* "runsc" or "crun" */
	struct cidr	 sandbox_subnet;
	char		*sandbox_rootfs;	/* "host" or a directory */
	/* limits */
	uint32_t	 max_connections;
	uint32_t	 max_header_bytes;
	uint32_t	 head_timeout_ms;	/* 0: no limit */
	/* limits.http2 */
	int		 h2_enabled;		/* offer h2 in ALPN to intercepted clients */
	uint32_t	 h2_max_streams;	/* SETTINGS_MAX_CONCURRENT_STREAMS */
	uint32_t	 h2_max_header_list;	/* a request's header list, RFC 9113 count */
	uint32_t	 h2_max_continuations;	/* CONTINUATION frames per header block */
	uint32_t	 h2_max_resets;		/* RST_STREAM per second (rapid reset) */
	uint32_t	 h2_max_control;	/* SETTINGS + PING per second */
	/* limits.per_sandbox; 0: no limit */
	uint32_t	 sandbox_max_connections;
	uint32_t	 sandbox_conn_rate;	/* new connections per second */
	uint32_t	 sandbox_dns_rate;	/* DNS queries per second */
	int		 workers;		/* resolved: see config_auto_workers */
	char		*user;		/* serve drops to this user; NULL: stays as started */
	int		 policies_watch;	/* reload on policy file changes (inotify) */
	int		 log_level;	/* enum log_level; -1: not set (info) */
	int		 log_format;	/* enum log_format; -1: not set (text) */
	/* approval (mode: ask, docs/approvals.md) */
	uint32_t	 approval_timeout_ms;	/* a question's wait; default 60 s */
	uint32_t	 approval_max_pending;	/* questions per sandbox; 0: no limit */
	char		*approval_notify_url;	/* http(s):// webhook; NULL: none */
	char		*approval_notify_argv[CONFIG_MAX_NOTIFY_ARGS + 1];	/* NULL-ended; [0] NULL: none */
};

/*
 * Load a config file, or the built-in defaults when path is NULL. Every
 * problem is added to d; returns NULL when there was any.
 */
struct config	*config_load(const char *path, struct diag *d);
/*
 * The -c FILE search order of sandgate(8): ./sandgate.yaml,
 * /etc/sandgate/sandgate.yaml, else NULL.
 */
const char	*config_find(const char *explicit_path);
void		 config_free(struct config *);

/* Shared value parsers, also used by the policy loader and the CLI. */
int	config_parse_duration_ms(const char *s, uint64_t *ms);	/* 10s 5m 2h 7d 250ms */
int	config_parse_hostport(const char *s, struct sockaddr_storage *,
	    socklen_t *, uint16_t default_port);

/*
 * The keys only a restart applies whose value differs between the running
 * config and next (config_diff.c; docs/config.md): their full dotted names
 * (static strings), at most max of them into keys, in the order of the
 * docs' table. Returns how many differ, which may be more than max.
 */
size_t	config_restart_keys(const struct config *running,
	    const struct config *next, const char **keys, size_t max);

/* What workers: auto means on a machine with ncpu online CPUs. */
int	config_auto_workers(long ncpu);

/*
 * Checks of values that need a library of a higher layer (libpq for a
 * PostgreSQL URL): the program hands them down once, before it loads a
 * config, so that core/ calls nothing above it. Without them config_load
 * checks what it can itself (the URL's scheme).
 */
struct config_checks {
	/* audit.ship.url: 0, or -1 with the reason in err */
	int	(*store_url)(const char *url, char *err, size_t errlen);
};
void	config_set_checks(const struct config_checks *);

#define CONFIG_GATEWAY_MAX	63	/* bytes of a gateway name */
/* A gateway name: 1-63 of [A-Za-z0-9._-], starting with a letter or digit. */
int	config_gateway_name_ok(const char *name);

#endif
