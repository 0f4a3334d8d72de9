/*
 * Loads sandgate.yaml (docs/config.md) into a struct config: built-in defaults,
 * every key type-checked, relative paths resolved against the file's
 * directory, every error reported as FILE:LINE:COL. Also the value parsers
 * (durations, host:port) that the policy loader and the CLI share.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/policy_int.h"
#include "core/yaml_tree.h"

#define CF_MAX_PATH		4096
#define CF_MAX_SUN_PATH		107	/* sizeof(sun_path) - 1 */
#define CF_MAX_WORKERS		64
#define CF_MAX_PER_SANDBOX	1000000

struct cload {
	struct ycheck	 c;
	struct config	*cfg;
	char		*dir;		/* the file's directory; NULL: cwd */
	int		 set_admin;
	int		 set_audit_db;
	int		 set_audit_signing_key;
	int		 set_audit_public_key;
	int		 set_vault_db;
};

static const struct {
	const char	*name;
	size_t		 off;
	const char	*def;
} cf_listeners[] = {
	{ "http", offsetof(struct config, listen_http), "127.0.0.1:3128" },
	{ "socks5", offsetof(struct config, listen_socks5), "127.0.0.1:1080" },
	{ "dns", offsetof(struct config, listen_dns), "127.0.0.1:5353" },
	{ "transparent", offsetof(struct config, listen_transparent),
	    "127.0.0.1:3129" },
	{ "ingress", offsetof(struct config, listen_ingress),
	    "127.0.0.1:8080" },
	{ "metrics", offsetof(struct config, listen_metrics),
	    "127.0.0.1:9090" },
};

static int
cf_port(const char *s, uint16_t *port)
{
	unsigned v = 0;
	size_t i, len = strlen(s);

	if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static int
cf_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sslen,
    uint16_t default_port, const char **errstr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	char host[64];
	const char *end, *colon, *portstr = NULL;
	size_t hlen;
	uint16_t port = default_port;
	int v6;

	*errstr = "want IP:PORT or [IPv6]:PORT";
	if (s == NULL || *s == '\0')
		return -1;
	if (s[0] == '[') {
		if ((end = strchr(s, ']')) == NULL)
			return -1;
		hlen = (size_t)(end - s - 1);
		s++;
		if (end[1] == ':')
			portstr = end + 2;
		else if (end[1] != '\0')
			return -1;
		v6 = 1;
	} else if ((colon = strchr(s, ':')) != NULL &&
	    strchr(colon + 1, ':') != NULL) {
		hlen = strlen(s);	/* bare IPv6, no port */
		v6 = 1;
	} else {
		hlen = colon ? (size_t)(colon - s) : strlen(s);
		portstr = colon ? colon + 1 : NULL;
		v6 = 0;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -1;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (portstr != NULL) {
		if (cf_port(portstr, &port) == -1) {
			*errstr = "bad port (1-65535)";
			return -1;
		}
	} else if (default_port == 0) {
		*errstr = "a port is required";
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) {
			*errstr = "bad IPv6 address";
			return -1;
		}
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*sslen = sizeof(*sin6);
	} else {
		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
			*errstr = "not an IP address (want IP:PORT or "
			    "[IPv6]:PORT)";
			return -1;
		}
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*sslen = sizeof(*sin);
	}
	return 0;
}

int
config_parse_hostport(const char *s, struct sockaddr_storage *ss,
    socklen_t *sslen, uint16_t default_port)
{
	const char *errstr;

	return cf_hostport(s, ss, sslen, default_port, &errstr);
}

int
config_parse_duration_ms(const char *s, uint64_t *ms)
{
	static const struct {
		const char	*unit;
		uint64_t	 ms;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 },
	};
	uint64_t v = 0;
	size_t i;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s, units[i].unit) != 0)
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return -1;
		*ms = v * units[i].ms;
		return 0;
	}
	return -1;	/* a bare number, or an unknown unit */
}

const char *
config_find(const char *explicit_path)
{
	static const char *const candidates[] = {
		"./sandgate.yaml", "/etc/sandgate/sandgate.yaml",
	};
	size_t i;

	if (explicit_path != NULL)
		return explicit_path;
	for (i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
		if (access(candidates[i], F_OK) == 0)
			return candidates[i];
	return NULL;
}

/* rel against dir ("./x" loses its "./"); absolute paths stay as they are. */
static char *
cf_join(const char *dir, const char *rel)
{
	char *r;

	if (rel[0] == '/' || dir == NULL)
		return strdup(rel);
	while (rel[0] == '.' && rel[1] == '/') {
		rel += 2;
		while (*rel == '/')
			rel++;
	}
	if (rel[0] == '\0' || strcmp(rel, ".") == 0)
		return strdup(dir);
	if (asprintf(&r, "%s/%s", dir, rel) == -1)
		return NULL;
	return r;
}

static void
cf_setpath(struct cload *l, char **field, const char *rel,
    const struct ynode *at)
{
	char *p;

	if ((p = cf_join(l->dir, rel)) == NULL) {
		ycheck_err(&l->c, at, "out of memory");
		return;
	}
	if (strlen(p) > CF_MAX_PATH) {
		ycheck_err(&l->c, at, "path too long");
		free(p);
		return;
	}
	free(*field);
	*field = p;
}

/* A path value: a non-empty string, resolved against the file's directory. */
static int
cf_path(struct cload *l, const struct ynode *n, const char *what, char **field)
{
	const char *s;

	if (ycheck_str(&l->c, n, what, CF_MAX_PATH, &s) == -1)
		return -1;
	cf_setpath(l, field, s, n);
	return 0;
}

/* null, or a path. */
static void
cf_opt_path(struct cload *l, const struct ynode *n, const char *what,
    char **field)
{
	if (ynode_is_null(n)) {
		free(*field);
		*field = NULL;
		return;
	}
	cf_path(l, n, what, field);
}

static int
cf_listen_set(struct config_listen *cl, const char *text, const char **errstr)
{
	if (strlen(text) >= sizeof(cl->text)) {
		*errstr = "address too long";
		return -1;
	}
	if (cf_hostport(text, &cl->ss, &cl->sslen, 0, errstr) == -1)
		return -1;
	cl->enabled = 1;
	snprintf(cl->text, sizeof(cl->text), "%s", text);
	return 0;
}

static void
cf_listen(struct cload *l, const struct ynode *n)
{
	struct config_listen *cl;
	const struct ynode *c;
	const char *s, *errstr;
	char esc[80];
	size_t i;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "listen") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "admin") == 0) {
			l->set_admin = 1;
			cf_opt_path(l, c, "admin", &l->cfg->admin_socket);
			if (l->cfg->admin_socket != NULL &&
			    strlen(l->cfg->admin_socket) > CF_MAX_SUN_PATH)
				ycheck_err(&l->c, c, "admin: socket path "
				    "longer than %d bytes", CF_MAX_SUN_PATH);
			continue;
		}
		for (i = 0; i < sizeof(cf_listeners) / sizeof(cf_listeners[0]);
		    i++)
			if (strcmp(c->key->str, cf_listeners[i].name) == 0)
				break;
		if (i == sizeof(cf_listeners) / sizeof(cf_listeners[0])) {
			ycheck_unknown_of(&l->c, c, "listen",
			    "http|socks5|dns|transparent|ingress|metrics|admin");
			continue;
		}
		cl = (struct config_listen *)((char *)l->cfg +
		    cf_listeners[i].off);
		if (ynode_is_null(c)) {
			memset(cl, 0, sizeof(*cl));
			continue;
		}
		if (ycheck_str(&l->c, c, c->key->str, 128, &s) == -1)
			continue;
		if (cf_listen_set(cl, s, &errstr) == -1)
			ycheck_err(&l->c, c, "%s: bad address \"%s\": %s",
			    c->key->str, ycheck_esc(s, esc, sizeof(esc)),
			    errstr);
	}
}

static void
cf_ingress_domain(struct cload *l, const struct ynode *n)
{
	char norm[POLICY_HOST_MAX + 2], esc[80], *p;
	struct netaddr a;
	const char *s;

	if (ycheck_str(&l->c, n, "ingress_domain", POLICY_HOST_MAX + 1,
	    &s) == -1)
		return;
	if (netaddr_parse(s, strlen(s), &a) == 0 ||
	    policy_name_normalize(s, strlen(s), norm, sizeof(norm)) < 0) {
		ycheck_err(&l->c, n, "ingress_domain: \"%s\" is not a domain "
		    "name", ycheck_esc(s, esc, sizeof(esc)));
		return;
	}
	if ((p = strdup(norm)) == NULL) {
		ycheck_err(&l->c, n, "out of memory");
		return;
	}
	free(l->cfg->ingress_domain);
	l->cfg->ingress_domain = p;
}

/* ingress_tls: { cert: PATH, key: PATH } or null (plain HTTP). */
static void
cf_ingress_tls(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;

	free(l->cfg->ingress_tls_cert);
	free(l->cfg->ingress_tls_key);
	l->cfg->ingress_tls_cert = l->cfg->ingress_tls_key = NULL;
	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "ingress_tls") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "cert") == 0)
			cf_path(l, c, "cert", &l->cfg->ingress_tls_cert);
		else if (strcmp(c->key->str, "key") == 0)
			cf_path(l, c, "key", &l->cfg->ingress_tls_key);
		else
			ycheck_unknown_of(&l->c, c, "ingress_tls",
			    "cert|key");
	}
	if (ynode_map_get(n, "cert") == NULL || ynode_map_get(n, "key") == NULL)
		ycheck_err(&l->c, n, "ingress_tls: both cert and key are required");
}

static void
cf_policies(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *it;
	int i;

	for (i = 0; i < cfg->n_policy_paths; i++) {
		free(cfg->policy_paths[i]);
		cfg->policy_paths[i] = NULL;
	}
	cfg->n_policy_paths = 0;
	if (n->type == YNODE_SCALAR && !ynode_is_null(n)) {
		if (cf_path(l, n, "policies", &cfg->policy_paths[0]) == 0)
			cfg->n_policy_paths = 1;
		return;
	}
	if (ycheck_is(&l->c, n, YNODE_SEQ, "policies") == -1)
		return;
	for (it = n->first; it != NULL; it = it->next) {
		if (cfg->n_policy_paths == CONFIG_MAX_POLICY_PATHS) {
			ycheck_err(&l->c, it, "policies: more than %d paths",
			    CONFIG_MAX_POLICY_PATHS);
			return;
		}
		if (cf_path(l, it, "policies",
		    &cfg->policy_paths[cfg->n_policy_paths]) == 0)
			cfg->n_policy_paths++;
	}
}

static void
cf_ca(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "ca") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "cert") == 0)
			cf_path(l, c, "cert", &l->cfg->ca_cert);
		else if (strcmp(c->key->str, "key") == 0)
			cf_path(l, c, "key", &l->cfg->ca_key);
		else
			ycheck_unknown_of(&l->c, c, "ca",
			    "cert|key");
	}
}

static void
cf_vault(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "vault") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "db") == 0) {
			if (cf_path(l, c, "db", &l->cfg->vault_db) == 0)
				l->set_vault_db = 1;
		} else if (strcmp(c->key->str, "key_file") == 0)
			cf_path(l, c, "key_file", &l->cfg->vault_key_file);
		else
			ycheck_unknown_of(&l->c, c, "vault",
			    "db|key_file");
	}
}

/* A duration of at least min_ms and at most max_ms. */
static int
cf_duration(struct cload *l, const struct ynode *n, const char *what,
    uint64_t min_ms, uint64_t max_ms, uint64_t *ms)
{
	const char *s;
	char esc[80];
	uint64_t v;

	if (ycheck_str(&l->c, n, what, 32, &s) == -1)
		return -1;
	if (config_parse_duration_ms(s, &v) == -1) {
		ycheck_err(&l->c, n, "%s: bad duration \"%s\" (a number and "
		    "a unit: 250ms, 10s, 5m, 2h, 7d)", what,
		    ycheck_esc(s, esc, sizeof(esc)));
		return -1;
	}
	if (v < min_ms || v > max_ms) {
		ycheck_err(&l->c, n, "%s: %s is out of range", what, s);
		return -1;
	}
	*ms = v;
	return 0;
}

static void
cf_ingress_upgrade(struct cload *l, const struct ynode *n)
{
	uint64_t ms;

	if (cf_duration(l, n, "ingress_upgrade_idle_timeout", 1000,
	    7 * 86400 * 1000ULL, &ms) == 0)
		l->cfg->ingress_upgrade_idle_ms = (uint32_t)ms;
}

static void
cf_resolvers(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *it;
	const char *s, *errstr;
	char esc[80];
	socklen_t sl;

	if (n->type == YNODE_SCALAR && strcmp(n->str, "system") == 0) {
		cfg->resolvers_system = 1;
		cfg->n_resolvers = 0;
		return;
	}
	if (n->type != YNODE_SEQ) {
		ycheck_err(&l->c, n, "resolvers: expected system or a list of "
		    "IP[:PORT]");
		return;
	}
	if (n->n == 0) {
		ycheck_err(&l->c, n, "resolvers: must not be empty (write "
		    "system for /etc/resolv.conf)");
		return;
	}
	cfg->resolvers_system = 0;
	cfg->n_resolvers = 0;
	for (it = n->first; it != NULL; it = it->next) {
		if (cfg->n_resolvers == CONFIG_MAX_RESOLVERS) {
			ycheck_err(&l->c, it, "resolvers: more than %d",
			    CONFIG_MAX_RESOLVERS);
			return;
		}
		if (ycheck_str(&l->c, it, "resolvers", 64, &s) == -1)
			continue;
		if (cf_hostport(s, &cfg->resolvers[cfg->n_resolvers], &sl, 53,
		    &errstr) == -1) {
			ycheck_err(&l->c, it, "resolvers: bad address \"%s\": "
			    "%s", ycheck_esc(s, esc, sizeof(esc)), errstr);
			continue;
		}
		cfg->n_resolvers++;
	}
}

static void
cf_upstream(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *c;
	uint64_t ms;

	if (ynode_is_null(n) ||
	    ycheck_is(&l->c, n, YNODE_MAP, "upstream") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "resolvers") == 0)
			cf_resolvers(l, c);
		else if (strcmp(c->key->str, "ca_bundle") == 0) {
			if (c->type == YNODE_SCALAR &&
			    strcmp(c->str, "system") == 0) {
				free(cfg->ca_bundle);
				cfg->ca_bundle = NULL;
			} else
				cf_path(l, c, "ca_bundle", &cfg->ca_bundle);
		} else if (strcmp(c->key->str, "connect_timeout") == 0) {
			if (cf_duration(l, c, "connect_timeout", 1,
			    UINT32_MAX, &ms) == 0)
				cfg->connect_timeout_ms = (uint32_t)ms;
		} else if (strcmp(c->key->str, "idle_timeout") == 0) {
			if (cf_duration(l, c, "idle_timeout", 1, UINT32_MAX,
			    &ms) == 0)
				cfg->idle_timeout_ms = (uint32_t)ms;
		} else if (strcmp(c->key->str, "keepalive_timeout") == 0) {
			if (cf_duration(l, c, "keepalive_timeout", 0,
			    UINT32_MAX, &ms) == 0)
				cfg->keepalive_timeout_ms = (uint32_t)ms;
		} else
			ycheck_unknown_of(&l->c, c, "upstream",
			    "resolvers|ca_bundle|connect_timeout|idle_timeout|"
			    "keepalive_timeout");
	}
}

/* 0 (or 0s) turns the periodic checkpoints off; else 100ms to 1d. */
static void
cf_checkpoint_interval(struct cload *l, const struct ynode *n)
{
	const char *s;
	uint64_t ms;

	if (ycheck_str(&l->c, n, "checkpoint_interval", 32, &s) == -1)
		return;
	if (strcmp(s, "0") == 0 || (config_parse_duration_ms(s, &ms) == 0 &&
	    ms == 0)) {
		l->cfg->audit_checkpoint_ms = 0;
		return;
	}
	if (cf_duration(l, n, "checkpoint_interval", 100, 86400 * 1000,
	    &ms) == 0)
		l->cfg->audit_checkpoint_ms = ms;
}

/* audit.db cannot be written: deny new requests (503), or allow them. */
static void
cf_on_failure(struct cload *l, const struct ynode *n)
{
	const char *s;

	if (ycheck_str(&l->c, n, "on_failure", 16, &s) == -1)
		return;
	if (strcmp(s, "deny") == 0)
		l->cfg->audit_on_failure_allow = 0;
	else if (strcmp(s, "allow") == 0)
		l->cfg->audit_on_failure_allow = 1;
	else
		ycheck_err(&l->c, n, "on_failure: expected deny or allow");
}

/* audit.syslog: null, or { address: IP:PORT, format, transport }. */
static void
cf_syslog(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *c, *addr = NULL;
	const char *s, *errstr;

	cfg->audit_syslog = 0;
	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "syslog") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "address") == 0) {
			addr = c;
			if (ycheck_str(&l->c, c, "address", 64, &s) == -1)
				continue;
			if (cf_hostport(s, &cfg->audit_syslog_ss,
			    &cfg->audit_syslog_sslen, 514, &errstr) == -1) {
				ycheck_err(&l->c, c, "address: %s", errstr);
				continue;
			}
			free(cfg->audit_syslog_address);
			if ((cfg->audit_syslog_address = strdup(s)) == NULL)
				ycheck_err(&l->c, c, "out of memory");
		} else if (strcmp(c->key->str, "format") == 0) {
			if (ycheck_str(&l->c, c, "format", 16, &s) == -1)
				continue;
			if (strcmp(s, "rfc5424") == 0)
				cfg->audit_syslog_json = 0;
			else if (strcmp(s, "json") == 0)
				cfg->audit_syslog_json = 1;
			else
				ycheck_err(&l->c, c, "format: expected rfc5424 "
				    "or json");
		} else if (strcmp(c->key->str, "transport") == 0) {
			if (ycheck_str(&l->c, c, "transport", 16, &s) == -1)
				continue;
			if (strcmp(s, "tcp") == 0)
				cfg->audit_syslog_udp = 0;
			else if (strcmp(s, "udp") == 0)
				cfg->audit_syslog_udp = 1;
			else
				ycheck_err(&l->c, c, "transport: expected tcp "
				    "or udp");
		} else
			ycheck_unknown_of(&l->c, c, "syslog",
			    "address|format|transport");
	}
	if (addr == NULL)
		ycheck_err(&l->c, n, "syslog: address is required");
	else
		cfg->audit_syslog = cfg->audit_syslog_address != NULL;
}

static const struct config_checks *checks;

void
config_set_checks(const struct config_checks *c)
{
	checks = c;
}

int
config_gateway_name_ok(const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || s[0] == '.' || s[0] == '-' ||
	    s[0] == '_')
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (i >= CONFIG_GATEWAY_MAX || !((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '.' || s[i] == '-' || s[i] == '_'))
			return 0;
	return 1;
}

/* The scheme here, the rest by the check handed down (libpq's parse). */
static int
store_url_ok(const char *url, char *err, size_t errlen)
{
	if (strncmp(url, "postgresql://", 13) != 0 &&
	    strncmp(url, "postgres://", 11) != 0) {
		snprintf(err, errlen, "expected a postgresql:// URL");
		return -1;
	}
	if (checks != NULL && checks->store_url != NULL)
		return checks->store_url(url, err, errlen);
	return 0;
}

/*
 * audit.ship: { url: "postgresql://...", gateway: NAME } copies the rows to
 * a fleet store (docs/fleet.md); the gateway defaults to the host name.
 */
static void
cf_ship(struct cload *l, const struct ynode *n)
{
	const struct ynode *c, *url = NULL;
	char err[256], esc[160], host[256];
	const char *s;
	struct config *cfg = l->cfg;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "ship") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "url") == 0) {
			url = c;
			if (ycheck_str(&l->c, c, "url", 4096, &s) == -1)
				continue;
			if (store_url_ok(s, err, sizeof(err)) == -1)
				ycheck_err(&l->c, c, "ship.url: %s", err);
			else if ((cfg->audit_ship_url = strdup(s)) == NULL)
				ycheck_err(&l->c, c, "out of memory");
		} else if (strcmp(c->key->str, "gateway") == 0) {
			if (ycheck_str(&l->c, c, "gateway", 256, &s) == -1)
				continue;
			if (!config_gateway_name_ok(s))
				ycheck_err(&l->c, c, "ship.gateway: \"%s\" is not "
				    "a gateway name (1-63 of A-Z a-z 0-9 . - _, "
				    "starting with a letter or digit)",
				    ycheck_esc(s, esc, sizeof(esc)));
			else if ((cfg->audit_ship_gateway = strdup(s)) == NULL)
				ycheck_err(&l->c, c, "out of memory");
		} else
			ycheck_unknown_of(&l->c, c, "ship",
			    "url|gateway");
	}
	if (url == NULL)
		ycheck_err(&l->c, n, "ship: url is required (postgresql://...)");
	if (cfg->audit_ship_gateway != NULL || url == NULL)
		return;
	if (gethostname(host, sizeof(host)) == -1 ||
	    (host[sizeof(host) - 1] = '\0', !config_gateway_name_ok(host)))
		ycheck_err(&l->c, n, "ship: the host name is not a gateway "
		    "name: set ship.gateway");
	else if ((cfg->audit_ship_gateway = strdup(host)) == NULL)
		ycheck_err(&l->c, n, "out of memory");
}

static void	cf_account(struct cload *, const struct ynode *, const char *,
		    char **);

static void
cf_audit(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;
	uint64_t ms;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "audit") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "db") == 0) {
			if (cf_path(l, c, "db", &l->cfg->audit_db) == 0)
				l->set_audit_db = 1;
		} else if (strcmp(c->key->str, "retention") == 0) {
			if (cf_duration(l, c, "retention", 1000, UINT64_MAX,
			    &ms) == 0)
				l->cfg->audit_retention_s = ms / 1000;
		} else if (strcmp(c->key->str, "checkpoint_interval") == 0)
			cf_checkpoint_interval(l, c);
		else if (strcmp(c->key->str, "syslog") == 0)
			cf_syslog(l, c);
		else if (strcmp(c->key->str, "on_failure") == 0)
			cf_on_failure(l, c);
		else if (strcmp(c->key->str, "signing_key") == 0) {
			if (cf_path(l, c, "signing_key",
			    &l->cfg->audit_signing_key) == 0)
				l->set_audit_signing_key = 1;
		} else if (strcmp(c->key->str, "public_key") == 0) {
			if (cf_path(l, c, "public_key",
			    &l->cfg->audit_public_key) == 0)
				l->set_audit_public_key = 1;
		} else if (strcmp(c->key->str, "ship") == 0)
			cf_ship(l, c);
		else if (strcmp(c->key->str, "read_group") == 0)
			cf_account(l, c, "read_group", &l->cfg->audit_read_group);
		else
			ycheck_unknown_of(&l->c, c, "audit",
			    "db|retention|checkpoint_interval|syslog|"
			    "on_failure|signing_key|public_key|ship|read_group");
	}
}

/* approval.notify: a URL to POST the question to, or an argv to exec. */
static void
cf_approval_notify(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *it;
	const char *s;
	int i = 0;

	free(cfg->approval_notify_url);
	cfg->approval_notify_url = NULL;
	for (i = 0; cfg->approval_notify_argv[i] != NULL; i++) {
		free(cfg->approval_notify_argv[i]);
		cfg->approval_notify_argv[i] = NULL;
	}
	if (ynode_is_null(n))
		return;
	if (n->type == YNODE_SCALAR) {
		if (ycheck_str(&l->c, n, "approval.notify", CF_MAX_PATH,
		    &s) == -1)
			return;
		if (!((strncmp(s, "http://", 7) == 0 && s[7] != '\0' &&
		    s[7] != '/') || (strncmp(s, "https://", 8) == 0 &&
		    s[8] != '\0' && s[8] != '/'))) {
			ycheck_err(&l->c, n, "approval.notify: expected an "
			    "http:// or https:// URL, or a command as a list "
			    "[PROGRAM, ARG...]");
			return;
		}
		if ((cfg->approval_notify_url = strdup(s)) == NULL)
			ycheck_err(&l->c, n, "out of memory");
		return;
	}
	if (ycheck_is(&l->c, n, YNODE_SEQ, "approval.notify") == -1)
		return;
	i = 0;
	for (it = n->first; it != NULL; it = it->next) {
		if (i == CONFIG_MAX_NOTIFY_ARGS) {
			ycheck_err(&l->c, it, "approval.notify: more than %d "
			    "arguments", CONFIG_MAX_NOTIFY_ARGS);
			return;
		}
		if (ycheck_str(&l->c, it, "approval.notify", CF_MAX_PATH,
		    &s) == -1)
			return;
		if (i == 0 && s[0] != '/') {
			ycheck_err(&l->c, it, "approval.notify: the program "
			    "is an absolute path (no shell, no PATH search)");
			return;
		}
		if ((cfg->approval_notify_argv[i++] = strdup(s)) == NULL) {
			ycheck_err(&l->c, it, "out of memory");
			return;
		}
	}
	if (i == 0)
		ycheck_err(&l->c, n, "approval.notify: an empty command");
}

/* approval: how long a question of mode: ask waits, how many, who is told. */
static void
cf_approval(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;
	uint64_t v;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP,
	    "approval") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "timeout") == 0) {
			if (cf_duration(l, c, "approval.timeout", 1000,
			    24 * 3600 * 1000, &v) == 0)
				l->cfg->approval_timeout_ms = (uint32_t)v;
		} else if (strcmp(c->key->str, "max_pending") == 0) {
			if (ycheck_uint(&l->c, c, "approval.max_pending", 0,
			    100000, &v) == 0)
				l->cfg->approval_max_pending = (uint32_t)v;
		} else if (strcmp(c->key->str, "notify") == 0)
			cf_approval_notify(l, c);
		else
			ycheck_unknown_of(&l->c, c, "approval",
			    "timeout|max_pending|notify");
	}
}

static void
cf_geoip(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "geoip") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "country_db") == 0)
			cf_opt_path(l, c, "country_db",
			    &l->cfg->geoip_country_db);
		else if (strcmp(c->key->str, "asn_db") == 0)
			cf_opt_path(l, c, "asn_db", &l->cfg->geoip_asn_db);
		else
			ycheck_unknown_of(&l->c, c, "geoip",
			    "country_db|asn_db");
	}
}

static void
cf_subnet(struct cload *l, const struct ynode *n)
{
	const char *s, *errstr = NULL;
	char esc[80], net[64];
	struct cidr c;

	if (ycheck_str(&l->c, n, "subnet", 64, &s) == -1)
		return;
	ycheck_esc(s, esc, sizeof(esc));
	if (cidr_parse(s, &c, &errstr) == -1) {
		if (cidr_network_of(s, net, sizeof(net)) != NULL)
			ycheck_err(&l->c, n, "subnet: \"%s\" has host bits "
			    "set; did you mean %s?", esc, net);
		else
			ycheck_err(&l->c, n, "subnet: bad CIDR \"%s\"%s%s",
			    esc, errstr ? ": " : "", errstr ? errstr : "");
		return;
	}
	if (c.addr.family != AF_INET || c.bits > 30) {
		ycheck_err(&l->c, n, "subnet: \"%s\" must be an IPv4 prefix "
		    "of /30 or wider (one /30 per sandbox)", esc);
		return;
	}
	l->cfg->sandbox_subnet = c;
}

static void
cf_sandbox(struct cload *l, const struct ynode *n)
{
	struct config *cfg = l->cfg;
	const struct ynode *c;
	const char *s;
	char *p;

	if (ynode_is_null(n) ||
	    ycheck_is(&l->c, n, YNODE_MAP, "sandbox") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "runtime") == 0) {
			if (ycheck_str(&l->c, c, "runtime", 16, &s) == -1)
				continue;
			if (strcmp(s, "runsc") != 0 && strcmp(s, "crun") != 0) {
				ycheck_err(&l->c, c, "runtime: expected runsc "
				    "or crun");
				continue;
			}
			if ((p = strdup(s)) == NULL) {
				ycheck_err(&l->c, c, "out of memory");
				continue;
			}
			free(cfg->sandbox_runtime);
			cfg->sandbox_runtime = p;
		} else if (strcmp(c->key->str, "subnet") == 0)
			cf_subnet(l, c);
		else if (strcmp(c->key->str, "rootfs") == 0) {
			if (ycheck_str(&l->c, c, "rootfs", CF_MAX_PATH,
			    &s) == -1)
				continue;
			if (strcmp(s, "host") == 0) {
				if ((p = strdup(s)) == NULL) {
					ycheck_err(&l->c, c, "out of memory");
					continue;
				}
				free(cfg->sandbox_rootfs);
				cfg->sandbox_rootfs = p;
			} else
				cf_setpath(l, &cfg->sandbox_rootfs, s, c);
		} else
			ycheck_unknown_of(&l->c, c, "sandbox",
			    "runtime|subnet|rootfs");
	}
}

/* limits.per_sandbox: each value 0 (no limit) up to CF_MAX_PER_SANDBOX. */
static void
cf_per_sandbox(struct cload *l, const struct ynode *n)
{
	static const struct {
		const char	*key;
		size_t		 off;
	} keys[] = {
		{ "max_connections",
		    offsetof(struct config, sandbox_max_connections) },
		{ "connections_per_second",
		    offsetof(struct config, sandbox_conn_rate) },
		{ "dns_queries_per_second",
		    offsetof(struct config, sandbox_dns_rate) },
	};
	const struct ynode *c;
	uint64_t v;
	size_t i;

	if (ynode_is_null(n) ||
	    ycheck_is(&l->c, n, YNODE_MAP, "per_sandbox") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(c->key->str, keys[i].key) == 0)
				break;
		if (i == sizeof(keys) / sizeof(keys[0])) {
			ycheck_unknown_of(&l->c, c, "limits.per_sandbox",
			    "max_connections|"
			    "connections_per_second|dns_queries_per_second");
			continue;
		}
		if (ycheck_uint(&l->c, c, keys[i].key, 0, CF_MAX_PER_SANDBOX,
		    &v) == 0)
			*(uint32_t *)((char *)l->cfg + keys[i].off) =
			    (uint32_t)v;
	}
}

/* limits.http2: HTTP/2 toward intercepted clients (docs/protocols.md). */
static void
cf_http2(struct cload *l, const struct ynode *n)
{
	static const struct {
		const char	*key;
		size_t		 off;
		uint64_t	 min, max;
	} keys[] = {
		{ "max_concurrent_streams",
		    offsetof(struct config, h2_max_streams), 1, 1000 },
		{ "max_header_list_bytes",
		    offsetof(struct config, h2_max_header_list), 1024, 1048576 },
		{ "max_continuations",
		    offsetof(struct config, h2_max_continuations), 0, 1024 },
		{ "max_resets_per_second",
		    offsetof(struct config, h2_max_resets), 1, 100000 },
		{ "max_control_per_second",
		    offsetof(struct config, h2_max_control), 1, 100000 },
	};
	const struct ynode *c;
	uint64_t v;
	size_t i;
	int b;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "http2") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "enabled") == 0) {
			if (ycheck_bool(&l->c, c, "enabled", &b) == 0)
				l->cfg->h2_enabled = b;
			continue;
		}
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(c->key->str, keys[i].key) == 0)
				break;
		if (i == sizeof(keys) / sizeof(keys[0])) {
			ycheck_unknown_of(&l->c, c, "limits.http2",
			    "enabled|max_concurrent_streams|"
			    "max_header_list_bytes|max_continuations|"
			    "max_resets_per_second|max_control_per_second");
			continue;
		}
		if (ycheck_uint(&l->c, c, keys[i].key, keys[i].min, keys[i].max,
		    &v) == 0)
			*(uint32_t *)((char *)l->cfg + keys[i].off) =
			    (uint32_t)v;
	}
}

/* 0s turns it off; otherwise 100ms to 1h. */
static void
cf_head_timeout(struct cload *l, const struct ynode *n)
{
	uint64_t ms;

	if (cf_duration(l, n, "head_timeout", 0, 3600 * 1000, &ms) == -1)
		return;
	if (ms != 0 && ms < 100) {
		ycheck_err(&l->c, n, "head_timeout: %s is out of range (0s "
		    "to turn it off, or 100ms to 1h)", n->str);
		return;
	}
	l->cfg->head_timeout_ms = (uint32_t)ms;
}

static void
cf_limits(struct cload *l, const struct ynode *n)
{
	const struct ynode *c;
	uint64_t v;

	if (ynode_is_null(n) || ycheck_is(&l->c, n, YNODE_MAP, "limits") == -1)
		return;
	for (c = n->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "max_connections") == 0) {
			if (ycheck_uint(&l->c, c, "max_connections", 1, 1000000,
			    &v) == 0)
				l->cfg->max_connections = (uint32_t)v;
		} else if (strcmp(c->key->str, "max_header_bytes") == 0) {
			if (ycheck_uint(&l->c, c, "max_header_bytes", 1024,
			    1048576, &v) == 0)
				l->cfg->max_header_bytes = (uint32_t)v;
		} else if (strcmp(c->key->str, "head_timeout") == 0)
			cf_head_timeout(l, c);
		else if (strcmp(c->key->str, "per_sandbox") == 0)
			cf_per_sandbox(l, c);
		else if (strcmp(c->key->str, "http2") == 0)
			cf_http2(l, c);
		else
			ycheck_unknown_of(&l->c, c, "limits",
			    "max_connections|max_header_bytes|"
			    "head_timeout|per_sandbox|http2");
	}
}

/*
 * workers: auto is one loop per online CPU (docs/config.md). Measured on two
 * cores (docs/benchmarks.md, "one event loop or two"): on a quiet machine two
 * loops serve 23-37 % more requests per second than one in the request
 * scenarios and as much in the relay ones; on a machine busy with other work
 * the two were level.
 */
int
config_auto_workers(long ncpu)
{
	if (ncpu < 1)
		return 1;
	return ncpu > CF_MAX_WORKERS ? CF_MAX_WORKERS : (int)ncpu;
}

static int
cf_cores(void)
{
	return config_auto_workers(sysconf(_SC_NPROCESSORS_ONLN));
}

static void
cf_workers(struct cload *l, const struct ynode *n)
{
	uint64_t v;

	if (n->type == YNODE_SCALAR && strcmp(n->str, "auto") == 0) {
		l->cfg->workers = cf_cores();
		return;
	}
	if (n->type == YNODE_SCALAR && !n->plain) {
		ycheck_err(&l->c, n, "workers: expected auto or an integer");
		return;
	}
	if (ycheck_uint(&l->c, n, "workers", 1, CF_MAX_WORKERS, &v) == 0)
		l->cfg->workers = (int)v;
}

/* log_level, log_format: serve's --log-level and --log-format win. */
static void
cf_log_level(struct cload *l, const struct ynode *n)
{
	enum log_level v;
	const char *s;
	char esc[80];

	if (ycheck_str(&l->c, n, "log_level", 16, &s) == -1)
		return;
	if (log_level_parse(s, &v) == -1)
		ycheck_err(&l->c, n, "log_level: expected debug, info, warn or "
		    "error, got \"%s\"", ycheck_esc(s, esc, sizeof(esc)));
	else
		l->cfg->log_level = (int)v;
}

static void
cf_log_format(struct cload *l, const struct ynode *n)
{
	enum log_format v;
	const char *s;
	char esc[80];

	if (ycheck_str(&l->c, n, "log_format", 16, &s) == -1)
		return;
	if (log_format_parse(s, &v) == -1)
		ycheck_err(&l->c, n, "log_format: expected text or json, got "
		    "\"%s\"", ycheck_esc(s, esc, sizeof(esc)));
	else
		l->cfg->log_format = (int)v;
}

/* policies_watch: reload when a policy file or directory changes. */
static void
cf_policies_watch(struct cload *l, const struct ynode *n)
{
	(void)ycheck_bool(&l->c, n, "policies_watch", &l->cfg->policies_watch);
}

/*
 * An account's name as useradd and groupadd take it, or null / "" for none:
 * user (the account `serve` switches to once its sockets are bound) and
 * audit.read_group (the group that may read audit.db).
 */
static void
cf_account(struct cload *l, const struct ynode *n, const char *what,
    char **field)
{
	char esc[80], *p;
	const char *s;
	size_t i;

	if (ynode_is_null(n) || (n->type == YNODE_SCALAR && n->len == 0)) {
		free(*field);
		*field = NULL;
		return;
	}
	if (ycheck_str(&l->c, n, what, 32, &s) == -1)
		return;
	for (i = 0; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) && (i == 0 ||
		    strchr("._-", s[i]) == NULL))
			break;
	if (s[i] != '\0') {
		ycheck_err(&l->c, n, "%s: \"%s\" is not a%s name", what,
		    ycheck_esc(s, esc, sizeof(esc)),
		    strcmp(what, "user") == 0 ? " user" : " group");
		return;
	}
	if ((p = strdup(s)) == NULL) {
		ycheck_err(&l->c, n, "out of memory");
		return;
	}
	free(*field);
	*field = p;
}

static void
cf_user(struct cload *l, const struct ynode *n)
{
	cf_account(l, n, "user", &l->cfg->user);
}

static void
cf_top(struct cload *l, const struct ynode *root)
{
	static const struct {
		const char	*key;
		void		(*fn)(struct cload *, const struct ynode *);
	} keys[] = {
		{ "listen", cf_listen },
		{ "ingress_domain", cf_ingress_domain },
		{ "ingress_tls", cf_ingress_tls },
		{ "ingress_upgrade_idle_timeout", cf_ingress_upgrade },
		{ "policies", cf_policies }, { "ca", cf_ca },
		{ "vault", cf_vault }, { "upstream", cf_upstream },
		{ "audit", cf_audit }, { "geoip", cf_geoip },
		{ "approval", cf_approval },
		{ "sandbox", cf_sandbox }, { "limits", cf_limits },
		{ "workers", cf_workers }, { "user", cf_user },
		{ "policies_watch", cf_policies_watch },
		{ "log_level", cf_log_level }, { "log_format", cf_log_format },
	};
	const struct ynode *c;
	char known[512] = "state_dir";
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known),
		    "|%s", keys[i].key);
	if (root->type != YNODE_MAP) {
		ycheck_err(&l->c, root, "the config file is a mapping of keys "
		    "(see docs/config.md), got %s", ynode_type_name(root));
		return;
	}
	for (c = root->first; c != NULL; c = c->next) {
		if (strcmp(c->key->str, "state_dir") == 0) {
			cf_path(l, c, "state_dir", &l->cfg->state_dir);
			continue;
		}
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strcmp(c->key->str, keys[i].key) == 0)
				break;
		if (i == sizeof(keys) / sizeof(keys[0]))
			ycheck_unknown_of(&l->c, c, "the config file", known);
		else
			keys[i].fn(l, c);
	}
}

/* docs/config.md's defaults; paths as written, resolved by the caller. */
static int
cf_defaults(struct cload *l)
{
	struct config *cfg = l->cfg;
	const char *errstr;
	const char *dirless[] = { "./var", "./policies", "./certs/ca.crt",
	    "./certs/ca.key", "./certs/vault.key" };
	char **fields[] = { &cfg->state_dir, &cfg->policy_paths[0],
	    &cfg->ca_cert, &cfg->ca_key, &cfg->vault_key_file };
	size_t i;

	for (i = 0; i < sizeof(cf_listeners) / sizeof(cf_listeners[0]); i++)
		if (cf_listen_set((struct config_listen *)((char *)cfg +
		    cf_listeners[i].off), cf_listeners[i].def, &errstr) == -1)
			return -1;
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if ((*fields[i] = cf_join(l->dir, dirless[i])) == NULL)
			return -1;
	cfg->n_policy_paths = 1;
	if ((cfg->ingress_domain = strdup("sandbox.localhost")) == NULL ||
	    (cfg->sandbox_runtime = strdup("runsc")) == NULL ||
	    (cfg->sandbox_rootfs = strdup("host")) == NULL ||
	    (cfg->user = strdup("sandgate")) == NULL)
		return -1;
	if (cidr_parse("198.18.0.0/16", &cfg->sandbox_subnet, &errstr) == -1)
		return -1;
	cfg->resolvers_system = 1;
	cfg->ca_bundle = NULL;
	cfg->connect_timeout_ms = 10 * 1000;
	cfg->idle_timeout_ms = 300 * 1000;
	cfg->keepalive_timeout_ms = 5 * 1000;
	cfg->ingress_upgrade_idle_ms = 3600 * 1000;
	cfg->audit_retention_s = 30 * 86400;
	cfg->audit_checkpoint_ms = 10 * 1000;
	cfg->audit_on_failure_allow = 0;	/* deny */
	cfg->max_connections = 20000;
	cfg->max_header_bytes = 65536;
	cfg->head_timeout_ms = 10 * 1000;
	cfg->approval_timeout_ms = 60 * 1000;
	cfg->approval_max_pending = 20;
	cfg->h2_enabled = 1;
	cfg->h2_max_streams = 100;
	cfg->h2_max_header_list = 65536;
	cfg->h2_max_continuations = 8;
	cfg->h2_max_resets = 100;
	cfg->h2_max_control = 100;
	cfg->sandbox_max_connections = 1024;
	cfg->sandbox_conn_rate = 200;
	cfg->sandbox_dns_rate = 500;
	cfg->workers = cf_cores();
	cfg->log_level = -1;
	cfg->log_format = -1;
	return 0;
}

static char *cf_dirname(const char *path);

/* The audit signing key pair lives beside the CA key unless the file says. */
static int
cf_audit_keys(struct cload *l)
{
	struct config *cfg = l->cfg;
	char *dir;
	int rc = 0;

	if (l->set_audit_signing_key && l->set_audit_public_key)
		return 0;
	if ((dir = cf_dirname(cfg->ca_key)) == NULL)
		return -1;
	if (!l->set_audit_signing_key && (cfg->audit_signing_key =
	    cf_join(dir, "audit.key")) == NULL)
		rc = -1;
	if (!l->set_audit_public_key && (cfg->audit_public_key =
	    cf_join(dir, "audit.pub")) == NULL)
		rc = -1;
	free(dir);
	return rc;
}

/* Files that live in state_dir unless the file put them elsewhere. */
static int
cf_state_files(struct cload *l)
{
	struct config *cfg = l->cfg;

	if (!l->set_admin && (cfg->admin_socket = cf_join(cfg->state_dir,
	    "admin.sock")) == NULL)
		return -1;
	if (!l->set_audit_db && (cfg->audit_db = cf_join(cfg->state_dir,
	    "audit.db")) == NULL)
		return -1;
	if (!l->set_vault_db && (cfg->vault_db = cf_join(cfg->state_dir,
	    "vault.db")) == NULL)
		return -1;
	if (cf_audit_keys(l) == -1)
		return -1;
	if (!l->set_admin && strlen(cfg->admin_socket) > CF_MAX_SUN_PATH) {
		diag_add(l->c.d, cfg->file, 0, 0, "state_dir: the admin "
		    "socket path %s is longer than %d bytes; set listen.admin",
		    cfg->admin_socket, CF_MAX_SUN_PATH);
		l->c.nerr++;
	}
	return 0;
}

static char *
cf_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

struct config *
config_load(const char *path, struct diag *d)
{
	struct cload l;
	struct config *cfg;
	struct ytree *t = NULL;
	size_t d0 = d->n;

	memset(&l, 0, sizeof(l));
	l.c.d = d;
	l.c.file = path;
	if ((cfg = calloc(1, sizeof(*cfg))) == NULL)
		goto oom;
	l.cfg = cfg;
	if (path != NULL && ((cfg->file = strdup(path)) == NULL ||
	    (l.dir = cf_dirname(path)) == NULL))
		goto oom;
	if (cf_defaults(&l) == -1)
		goto oom;
	if (path != NULL) {
		if ((t = ytree_load_file(path, d)) == NULL)
			goto fail;
		l.c.nerr += t->nerr;
		if (t->root != NULL && !ynode_is_null(t->root))
			cf_top(&l, t->root);
		ytree_free(t);
	}
	if (cf_state_files(&l) == -1)
		goto oom;
	if (l.c.nerr > 0 || d->n > d0) {
		ycheck_sort(d, d0);
		goto fail;
	}
	free(l.dir);
	return cfg;
oom:
	diag_add(d, path, 0, 0, "out of memory");
fail:
	free(l.dir);
	config_free(cfg);
	return NULL;
}

void
config_free(struct config *cfg)
{
	int i;

	if (cfg == NULL)
		return;
	free(cfg->file);
	free(cfg->state_dir);
	free(cfg->admin_socket);
	free(cfg->ingress_domain);
	free(cfg->ingress_tls_cert);
	free(cfg->ingress_tls_key);
	for (i = 0; i < CONFIG_MAX_POLICY_PATHS; i++)
		free(cfg->policy_paths[i]);
	free(cfg->ca_cert);
	free(cfg->ca_key);
	free(cfg->vault_db);
	free(cfg->vault_key_file);
	free(cfg->ca_bundle);
	free(cfg->audit_db);
	free(cfg->audit_signing_key);
	free(cfg->audit_public_key);
	free(cfg->approval_notify_url);
	for (i = 0; cfg->approval_notify_argv[i] != NULL; i++)
		free(cfg->approval_notify_argv[i]);
	free(cfg->audit_syslog_address);
	free(cfg->audit_ship_url);
	free(cfg->audit_ship_gateway);
	free(cfg->geoip_country_db);
	free(cfg->geoip_asn_db);
	free(cfg->sandbox_runtime);
	free(cfg->sandbox_rootfs);
	free(cfg->user);
	free(cfg->audit_read_group);
	free(cfg);
}
