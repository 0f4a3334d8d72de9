/*
 * `sandgate audit`: query the audit log (filters, table/json/csv), verify
 * its hash chain and the signatures of its checkpoints, and export rows as
 * JSON lines, following new ones with a cursor file so that a restarted
 * exporter never prints a row twice.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "audit/audit_query.h"
#include "audit/audit_store.h"
#include "core/config.h"
#include "core/diag.h"
#include "core/policy.h"
#include "sandgate.h"

#define AUDIT_QUERY_USAGE \
    "usage: sandgate audit [-c FILE] [--db PATH] [--sandbox ID] [--since T]\n" \
    "                      [--until T] [--decision allow|deny|report|error]\n" \
    "                      [--kind KINDS] [--host GLOB] [--credential NAME]\n" \
    "                      [--limit N] [--asc]\n" \
    "                      [--format table|json|csv|ocsf]\n" \
    "  Rows are newest first (--asc: oldest first); --limit defaults to 100\n" \
    "  (0 = all). T is a duration before now (15m, 2h, 7d) or an RFC 3339\n" \
    "  time. KINDS: kinds separated by commas (http,connect); -KIND leaves\n" \
    "  one out (--kind=-admin,-vault: no Base Events in ocsf). ocsf: as\n" \
    "  audit export --format ocsf prints them.\n"
#define AUDIT_VERIFY_USAGE \
    "usage: sandgate audit verify [-c FILE] [--db PATH | --store URL\n" \
    "                      [--gateway NAME]] [--pubkey FILE]...\n" \
    "  Check the hash chain and every checkpoint's signature with --pubkey\n" \
    "  FILE (default: the config's audit.public_key); report the rows after\n" \
    "  the last checkpoint as the unsigned tail. Exit 1 naming the first bad\n" \
    "  row. With --store: each gateway's chain in the fleet store, each\n" \
    "  checkpoint with the --pubkey whose key id it names (one per key).\n"
#define AUDIT_EXPORT_USAGE \
    "usage: sandgate audit export [-c FILE] [--db PATH] [--follow]\n" \
    "                      [--since T] [--cursor FILE] [--format json|ocsf]\n" \
    "                      [filters]\n" \
    "  Print rows as JSON lines in id order; --follow keeps printing rows as\n" \
    "  they are committed, starting after the newest unless --since or\n" \
    "  --cursor says otherwise; --cursor FILE keeps the last id printed.\n" \
    "  --format ocsf prints OCSF 1.1 HTTP, Network and DNS Activity events,\n" \
    "  and admin and vault rows as Base Events (--kind=-admin,-vault leaves\n" \
    "  them out; docs/audit.md).\n"
#define AUDIT_STATS_USAGE \
    "usage: sandgate audit stats [-c FILE] [--db PATH] [--sandbox ID]\n" \
    "                      [--since T] [--until T] [--pubkey FILE]\n" \
    "                      [--format text|json]\n" \
    "  Top destinations, denials by reason and by sandbox, what report mode\n" \
    "  let pass, credential uses and misuses, and the chain status (the\n" \
    "  chain is verified whole, with --pubkey or audit.public_key).\n"
#define AUDIT_COMMON_USAGE \
    "  -c FILE   config file whose audit.db is read (default: ./sandgate.yaml,\n" \
    "            /etc/sandgate/sandgate.yaml, else built-in defaults)\n" \
    "  --db PATH the audit database itself, instead of the config's\n"

#define AUDIT_STORE_USAGE \
    "usage: sandgate audit --store URL [--gateway NAME] [filters]\n" \
    "                      [--format table|json|csv]\n" \
    "  --store postgresql://... reads the fleet store (audit.ship) instead\n" \
    "  of audit.db: every gateway's rows, with a gateway column; --gateway\n" \
    "  keeps one gateway's. audit verify --store checks each one's chain.\n"
#define AUDIT_SHIP_USAGE \
    "usage: sandgate audit ship --init [-c FILE] [--store URL]\n" \
    "  Create or migrate the fleet store's schema (URL: --store, else\n" \
    "  audit.ship.url). The gateway ships rows by itself (audit.ship).\n"
#define AUDIT_SHIP_OPTS_USAGE \
    "  -c FILE   config file whose audit.ship.url is used (default:\n" \
    "            ./sandgate.yaml, /etc/sandgate/sandgate.yaml)\n"

static const char audit_usage[] = AUDIT_QUERY_USAGE AUDIT_VERIFY_USAGE
    AUDIT_EXPORT_USAGE AUDIT_STATS_USAGE AUDIT_STORE_USAGE AUDIT_SHIP_USAGE
    AUDIT_COMMON_USAGE;
static const char audit_verify_usage[] = AUDIT_VERIFY_USAGE AUDIT_COMMON_USAGE;
static const char audit_export_usage[] = AUDIT_EXPORT_USAGE AUDIT_COMMON_USAGE;
static const char audit_stats_usage[] = AUDIT_STATS_USAGE AUDIT_COMMON_USAGE;
static const char audit_ship_usage[] = AUDIT_SHIP_USAGE AUDIT_SHIP_OPTS_USAGE;

#define EXPORT_BATCH	1000
#define FOLLOW_POLL_MS	200

struct audit_opts {
	const char		*cfg_path;
	const char		*db_path;
	const char		*cursor;
	const char		*pubkey;
	const char		*pubkeys[AUDIT_MAX_PUBKEYS];
	int			 n_pubkeys;
	const char		*store;
	const char		*gateway;
	int			 init;
	const char		*since, *until;
	struct audit_filter	 f;
	enum audit_format	 fmt;
	int			 have_format, have_limit, follow;
	const char		*format;	/* as written */
};

static volatile sig_atomic_t audit_stop;

static void
audit_stop_cb(int sig)
{
	audit_stop = 1;
}

static int
parse_limit(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/* Option parsing; returns -1 after printing a usage error (exit 2). */
static int
audit_parse(int argc, char *argv[], struct cmd_args *a, struct audit_opts *o,
    int *help)
{
	const char *opt, *val;
	int64_t now = audit_now_ms();

	memset(o, 0, sizeof(*o));
	o->f.limit = 100;
	cmd_args_init(a, argc, argv);
	while ((opt = cmd_args_next(a, "c|config|db|sandbox|since|until|"
	    "decision|kind|host|credential|limit|format|cursor|pubkey|store|gateway",
	    &val)) !=
	    NULL) {
		if (strcmp(opt, "c") == 0 || strcmp(opt, "config") == 0)
			o->cfg_path = val;
		else if (strcmp(opt, "db") == 0)
			o->db_path = val;
		else if (strcmp(opt, "sandbox") == 0)
			o->f.sandbox = val;
		else if (strcmp(opt, "since") == 0) {
			o->since = val;
			if (audit_parse_time(val, now, &o->f.since_ms) == -1)
				goto bad_time;
			o->f.has_since = 1;
		} else if (strcmp(opt, "until") == 0) {
			o->until = val;
			if (audit_parse_time(val, now, &o->f.until_ms) == -1)
				goto bad_time;
			o->f.has_until = 1;
		} else if (strcmp(opt, "decision") == 0) {
			if (!audit_valid_decision(val)) {
				cmd_bad_value(a, "allow|deny|report|error", val);
				return -1;
			}
			o->f.decision = val;
		} else if (strcmp(opt, "kind") == 0) {
			char bad[32];

			if (audit_parse_kinds(val, &o->f.kinds_in,
			    &o->f.kinds_out, bad, sizeof(bad)) == -1) {
				cmd_opt_error(a, "unknown kind \"%s\" (http, "
				    "connect, socks5, dns, transparent, ingress, "
				    "admin, vault; -KIND leaves one out)", bad);
				return -1;
			}
		} else if (strcmp(opt, "host") == 0)
			o->f.host_glob = val;
		else if (strcmp(opt, "credential") == 0)
			o->f.credential = val;
		else if (strcmp(opt, "limit") == 0) {
			if (parse_limit(val, &o->f.limit) == -1) {
				cmd_opt_error(a, "expected a number, got %s", val);
				return -1;
			}
			o->have_limit = 1;
		} else if (strcmp(opt, "format") == 0) {
			if (audit_format_parse(val, &o->fmt) == -1) {
				cmd_bad_value(a, a->n_ops > 0 &&
				    strcmp(a->ops[0], "stats") == 0 ? "text|json" :
				    a->n_ops > 0 && strcmp(a->ops[0], "export") == 0 ?
				    "json|ocsf" : "table|json|csv|ocsf", val);
				return -1;
			}
			o->have_format = 1;
			o->format = val;
		} else if (strcmp(opt, "cursor") == 0)
			o->cursor = val;
		else if (strcmp(opt, "pubkey") == 0) {
			if (o->n_pubkeys == AUDIT_MAX_PUBKEYS) {
				cmd_opt_error(a, "at most %d", AUDIT_MAX_PUBKEYS);
				return -1;
			}
			o->pubkey = val;
			o->pubkeys[o->n_pubkeys++] = val;
		} else if (strcmp(opt, "store") == 0) {
			if (strncmp(val, "postgresql://", 13) != 0 &&
			    strncmp(val, "postgres://", 11) != 0) {
				cmd_opt_error(a, "expected a postgresql:// URL");
				return -1;
			}
			o->store = val;
		} else if (strcmp(opt, "gateway") == 0) {
			if (!config_gateway_name_ok(val)) {
				cmd_opt_error(a, "not a gateway name: %s", val);
				return -1;
			}
			o->gateway = val;
		} else if (strcmp(opt, "init") == 0)
			o->init = 1;
		else if (strcmp(opt, "asc") == 0)
			o->f.asc = 1;
		else if (strcmp(opt, "follow") == 0 || strcmp(opt, "f") == 0)
			o->follow = 1;
		else if (strcmp(opt, "h") == 0 || strcmp(opt, "help") == 0)
			*help = 1;
		else {
			cmd_bad_option(a, opt);
			return -1;
		}
	}
	return 0;
bad_time:
	cmd_opt_error(a, "bad time %s (want 15m, 2h, 7d or RFC 3339 like "
	    "2026-12-02T14:22:01Z)", val);
	return -1;
}

/*
 * The database path: --db, else audit.db of the config (order of sandgate(8));
 * with pubkey, the same for --pubkey and audit.public_key.
 */
static int
audit_paths(const struct audit_opts *o, char **path, char **pubkey)
{
	struct config *cfg = NULL;

	*path = NULL;
	if (pubkey != NULL)
		*pubkey = NULL;
	if ((o->db_path == NULL || (pubkey != NULL && o->pubkey == NULL)) &&
	    cmd_load(o->cfg_path, &cfg, NULL) == -1)
		return 1;
	*path = strdup(o->db_path ? o->db_path : cfg->audit_db ?
	    cfg->audit_db : "");
	if (pubkey != NULL)
		*pubkey = strdup(o->pubkey ? o->pubkey : cfg->audit_public_key ?
		    cfg->audit_public_key : "");
	config_free(cfg);
	if (*path == NULL || (pubkey != NULL && *pubkey == NULL)) {
		free(*path);
		if (pubkey != NULL)
			free(*pubkey);
		return cmd_error("audit: out of memory");
	}
	return 0;
}

/* The policies --format ocsf asks whether a rule intercepts TLS. */
static struct policy *ocsf_policy;

static int
ocsf_rule_tls(void *arg, const char *rule, const char *host)
{
	const struct policy_credential *cv;
	struct policy_rule_scope sc;
	size_t i, n;

	if (policy_rule_scope(arg, rule, &sc) == -1)
		return -1;
	/* A host a credential is bound to is intercepted whatever the rule. */
	cv = policy_all_credentials(arg, &n);
	for (i = 0; i < n; i++)
		if (policy_credential_bound(&cv[i], host))
			return 1;
	return sc.tls == POLICY_TLS_INTERCEPT;
}

/*
 * For --format ocsf, what the rows do not say, from the config that is read
 * (-c, or the default one when there is no --db): the DNS listener that
 * answered the dns rows, whether ingress speaks TLS, and the policies'
 * rules (when they load: the export does not depend on them).
 */
static int
audit_ocsf_env(const struct audit_opts *o)
{
	struct audit_ocsf_env env;
	struct config *cfg = NULL;
	struct diag d;
	const struct sockaddr_storage *ss;
	const void *addr = NULL;

	memset(&env, 0, sizeof(env));
	if (o->fmt != AUDIT_FMT_OCSF || (o->db_path != NULL &&
	    o->cfg_path == NULL))
		goto done;
	if (cmd_load(o->cfg_path, &cfg, NULL) == -1)
		return 1;
	ss = &cfg->listen_dns.ss;
	if (cfg->listen_dns.enabled && ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		env.dns_port = ntohs(sin->sin_port);
		if (sin->sin_addr.s_addr != htonl(INADDR_ANY))
			addr = &sin->sin_addr;
	} else if (cfg->listen_dns.enabled && ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		env.dns_port = ntohs(sin6->sin6_port);
		if (!IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr))
			addr = &sin6->sin6_addr;
	}
	if (addr != NULL && inet_ntop(ss->ss_family, addr, env.dns_ip,
	    sizeof(env.dns_ip)) == NULL)
		env.dns_ip[0] = '\0';
	env.ingress_tls = cfg->ingress_tls_cert != NULL;
	diag_init(&d);
	if ((ocsf_policy = policy_load(cfg, &d)) != NULL) {
		env.rule_tls = ocsf_rule_tls;
		env.rule_arg = ocsf_policy;
	}
	diag_free(&d);
	config_free(cfg);
done:
	audit_ocsf_set_env(&env);
	return 0;
}

static void
audit_ocsf_env_free(void)
{
	struct audit_ocsf_env env;

	memset(&env, 0, sizeof(env));
	audit_ocsf_set_env(&env);
	if (ocsf_policy != NULL)
		policy_unref(ocsf_policy);
	ocsf_policy = NULL;
}

static int
audit_open_db(const struct audit_opts *o, const char *what, sqlite3 **db)
{
	char *path = NULL, err[512];
	int rc;

	if ((rc = audit_paths(o, &path, NULL)) != 0)
		return rc;
	*db = audit_db_open_ro(path, err, sizeof(err));
	free(path);
	if (*db == NULL)
		return cmd_error("%s: %s", what, err);
	return 0;
}

static int
audit_cmd_query(struct audit_opts *o)
{
	sqlite3 *db;
	char err[512];
	int64_t n;
	int rc;

	if (o->cursor != NULL || o->follow)
		return cmd_usage_error(audit_usage, "audit: --cursor and "
		    "--follow belong to audit export");
	if (o->pubkey != NULL)
		return cmd_usage_error(audit_usage, "audit: --pubkey belongs to "
		    "audit verify");
	if (o->store != NULL && o->fmt == AUDIT_FMT_OCSF)
		return cmd_usage_error(audit_usage, "audit: --store prints "
		    "--format table, json or csv");
	if (o->store != NULL)
		n = audit_store_query(o->store, o->gateway, &o->f, o->fmt,
		    stdout, err, sizeof(err));
	else {
		if ((rc = audit_ocsf_env(o)) != 0)
			return rc;
		if ((rc = audit_open_db(o, "audit", &db)) != 0) {
			audit_ocsf_env_free();
			return rc;
		}
		n = audit_query(db, &o->f, o->fmt, stdout, NULL, err,
		    sizeof(err));
		sqlite3_close(db);
		audit_ocsf_env_free();
	}
	if (n == -1)
		return cmd_error("audit: %s", err);
	if (fflush(stdout) == EOF || ferror(stdout))
		return cmd_error("audit: write error: %s", strerror(errno));
	return 0;
}

/*
 * verify --store: each gateway's chain in the fleet store, each checkpoint
 * with the --pubkey it names (default: this host's audit.public_key).
 */
static int
audit_cmd_verify_store(struct audit_opts *o)
{
	EVP_PKEY *pubs[AUDIT_MAX_PUBKEYS];
	char err[512], *dbp = NULL, *def = NULL;
	int i, n = 0, rc;

	/* No --pubkey: this host's key, when there is one. */
	if (o->n_pubkeys == 0) {
		if ((rc = audit_paths(o, &dbp, &def)) != 0)
			return rc;
		free(dbp);
		if (access(def, F_OK) == 0)
			o->pubkeys[o->n_pubkeys++] = def;
	}
	for (i = 0; i < o->n_pubkeys; i++)
		if ((pubs[n++] = audit_pubkey_read(o->pubkeys[i], err,
		    sizeof(err))) == NULL) {
			n--;
			rc = cmd_error("audit verify: %s", err);
			goto done;
		}
	rc = audit_store_verify(o->store, o->gateway, pubs, n, stdout, stderr,
	    err, sizeof(err));
	if (rc == -1)
		rc = cmd_error("audit verify: %s", err);
	else if (fflush(stdout) == EOF)
		rc = 1;
done:
	for (i = 0; i < n; i++)
		EVP_PKEY_free(pubs[i]);
	free(def);
	return rc;
}

static int
audit_cmd_verify(struct audit_opts *o)
{
	struct audit_verify res;
	EVP_PKEY *pub = NULL;
	char *path = NULL, *pubpath = NULL, err[512];
	sqlite3 *db;
	int rc;

	if (o->f.sandbox || o->f.has_since || o->f.has_until || o->f.decision ||
	    o->f.kinds_in || o->f.kinds_out || o->f.host_glob ||
	    o->f.credential || o->have_limit || o->f.asc || o->have_format ||
	    o->cursor || o->follow)
		return cmd_usage_error(audit_usage, "audit verify: takes no "
		    "filters; it checks every row");
	if (o->store != NULL)
		return audit_cmd_verify_store(o);
	if ((rc = audit_paths(o, &path, &pubpath)) != 0)
		return rc;
	/*
	 * The default key may be absent (a copied file, a host without the
	 * CA): then the first checkpoint fails for want of it. A --pubkey
	 * that cannot be read is an error at once.
	 */
	if ((o->pubkey != NULL || access(pubpath, F_OK) == 0) &&
	    (pub = audit_pubkey_read(pubpath, err, sizeof(err))) == NULL) {
		free(path);
		free(pubpath);
		return cmd_error("audit verify: %s", err);
	}
	free(pubpath);
	db = audit_db_open_ro(path, err, sizeof(err));
	free(path);
	if (db == NULL) {
		EVP_PKEY_free(pub);
		return cmd_error("audit verify: %s", err);
	}
	rc = audit_verify(db, pub, &res);
	sqlite3_close(db);
	if (rc == 0)
		audit_verify_report(stdout, "", &res);
	EVP_PKEY_free(pub);
	if (rc == -1)
		return cmd_error("audit verify: %s", res.msg);
	if (rc == 1)
		return cmd_error("audit verify: row %" PRId64 ": %s",
		    res.bad_id, res.msg);
	return fflush(stdout) == EOF ? 1 : 0;
}

/* ------------------------------------------------------------- export */

/* 0 with *id (0 when the file is absent or empty), or 1 after an error. */
static int
cursor_read(const char *path, int64_t *id)
{
	char buf[64];
	ssize_t n;
	size_t i;
	int fd;

	*id = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 0;
		return cmd_error("audit export: cursor %s: %s", path,
		    strerror(errno));
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return cmd_error("audit export: cursor %s: %s", path,
		    strerror(errno));
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' ||
	    buf[n - 1] == '\r' || buf[n - 1] == '\t'))
		n--;
	for (i = 0; i < (size_t)n; i++) {
		if (buf[i] < '0' || buf[i] > '9' || *id > (INT64_MAX - 9) / 10)
			return cmd_error("audit export: cursor %s does not "
			    "hold a row id", path);
		*id = *id * 10 + (buf[i] - '0');
	}
	return 0;
}

/* Replace the cursor file atomically (write, fsync, rename, fsync dir). */
static int
cursor_write(const char *path, int64_t id)
{
	char tmp[4096], dirbuf[4096], line[32];
	int fd, len;

	len = snprintf(line, sizeof(line), "%" PRId64 "\n", id);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
	    snprintf(dirbuf, sizeof(dirbuf), "%s", path) >= (int)sizeof(dirbuf))
		return cmd_error("audit export: cursor path too long");
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1)
		return cmd_error("audit export: %s: %s", tmp, strerror(errno));
	if (write(fd, line, (size_t)len) != len || fsync(fd) == -1) {
		int e = errno;

		close(fd);
		unlink(tmp);
		return cmd_error("audit export: %s: %s", tmp, strerror(e));
	}
	close(fd);
	if (rename(tmp, path) == -1) {
		int e = errno;

		unlink(tmp);
		return cmd_error("audit export: %s: %s", path, strerror(e));
	}
	if ((fd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) != -1) {
		(void)fsync(fd);
		close(fd);
	}
	return 0;
}

/*
 * One step: up to EXPORT_BATCH rows after *after, read in one snapshot.
 * The cursor moves before the rows are written, so a restart never repeats
 * a row; it moves back when writing fails. 0, or 1 after an error.
 */
static int
export_step(sqlite3 *db, struct audit_opts *o, int64_t *after, int *more)
{
	char err[512], *buf = NULL;
	size_t len = 0;
	FILE *mem;
	int64_t max, last = 0, n, next;

	*more = 0;
	if ((mem = open_memstream(&buf, &len)) == NULL)
		return cmd_error("audit export: %s", strerror(errno));
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, sizeof(err), "%s", sqlite3_errmsg(db));
		goto dberr;
	}
	max = audit_max_id(db, err, sizeof(err));
	n = 0;
	if (max > *after) {
		o->f.after_id = *after;
		o->f.upto_id = max;
		n = audit_query(db, &o->f, o->have_format ? o->fmt :
		    AUDIT_FMT_JSON, mem, &last, err, sizeof(err));
	}
	(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (max == -1 || n == -1)
		goto dberr;
	fclose(mem);
	mem = NULL;
	/* Rows that did not match the filters are passed over as well. */
	next = n == EXPORT_BATCH ? last : max > *after ? max : *after;
	*more = n == EXPORT_BATCH;
	if (next != *after && o->cursor != NULL &&
	    cursor_write(o->cursor, next) != 0)
		goto fail;
	if (len > 0 && (fwrite(buf, 1, len, stdout) != len ||
	    fflush(stdout) == EOF)) {
		int e = errno;

		if (o->cursor != NULL && next != *after)
			(void)cursor_write(o->cursor, *after);
		cmd_error("audit export: write error: %s", strerror(e));
		goto fail;
	}
	*after = next;
	free(buf);
	return 0;
dberr:
	cmd_error("audit export: %s", err);
fail:
	if (mem != NULL)
		fclose(mem);
	free(buf);
	return 1;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	(void)nanosleep(&ts, NULL);	/* a signal ends it early: fine */
}

static int
audit_cmd_export(struct audit_opts *o)
{
	struct sigaction sa;
	sqlite3 *db;
	int64_t after = 0;
	char err[512];
	int rc, more;

	if (o->have_format && o->fmt != AUDIT_FMT_JSON &&
	    o->fmt != AUDIT_FMT_OCSF)
		return cmd_usage_error(audit_usage, "--format: expected "
		    "json|ocsf, got %s", o->format);
	if (o->have_limit || o->f.asc)
		return cmd_usage_error(audit_usage, "audit export: --limit and "
		    "--asc belong to audit queries");
	if (o->pubkey != NULL)
		return cmd_usage_error(audit_usage, "audit export: --pubkey "
		    "belongs to audit verify");
	if (o->cursor != NULL && (rc = cursor_read(o->cursor, &after)) != 0)
		return rc;
	if ((rc = audit_ocsf_env(o)) != 0)
		return rc;
	if ((rc = audit_open_db(o, "audit export", &db)) != 0) {
		audit_ocsf_env_free();
		return rc;
	}
	o->f.limit = EXPORT_BATCH;
	o->f.by_id = 1;
	o->f.asc = 1;
	/* Without a cursor or --since, following starts after the newest row. */
	if (after == 0 && o->follow && !o->f.has_since &&
	    (after = audit_max_id(db, err, sizeof(err))) == -1) {
		sqlite3_close(db);
		audit_ocsf_env_free();
		return cmd_error("audit export: %s", err);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = audit_stop_cb;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	rc = 0;
	while (!audit_stop) {
		if ((rc = export_step(db, o, &after, &more)) != 0)
			break;
		if (more)
			continue;
		if (!o->follow)
			break;
		sleep_ms(FOLLOW_POLL_MS);
	}
	sqlite3_close(db);
	audit_ocsf_env_free();
	return rc;
}

/* audit [SUBCOMMAND] --help: that subcommand's page; an unknown one is 2. */
static int
audit_help(const struct cmd_args *a)
{
	const char *page = audit_usage;

	if (a->n_ops > 0 && strcmp(a->ops[0], "verify") == 0)
		page = audit_verify_usage;
	else if (a->n_ops > 0 && strcmp(a->ops[0], "export") == 0)
		page = audit_export_usage;
	else if (a->n_ops > 0 && strcmp(a->ops[0], "stats") == 0)
		page = audit_stats_usage;
	else if (a->n_ops > 0 && strcmp(a->ops[0], "ship") == 0)
		page = audit_ship_usage;
	else if (a->n_ops > 0)
		return cmd_usage_error(NULL, "audit: unknown subcommand: %s "
		    "(sandgate help audit)", a->ops[0]);
	fputs(page, stdout);
	return 0;
}

/* ------------------------------------------------------------- stats */

static int
audit_cmd_stats(struct audit_opts *o)
{
	char *path = NULL, *pubpath = NULL;
	int rc;

	if (o->f.decision || o->f.kinds_in || o->f.kinds_out ||
	    o->f.host_glob || o->f.credential || o->have_limit || o->f.asc ||
	    o->cursor || o->follow)
		return cmd_usage_error(audit_usage, "audit stats: takes "
		    "--sandbox, --since and --until only");
	if (o->have_format && o->fmt != AUDIT_FMT_TABLE &&
	    o->fmt != AUDIT_FMT_JSON)
		return cmd_usage_error(audit_usage, "--format: expected "
		    "text|json, got %s", o->format);
	if ((rc = audit_paths(o, &path, &pubpath)) != 0)
		return rc;
	rc = cmd_audit_stats(path, pubpath, o->pubkey != NULL, &o->f, o->since,
	    o->have_format && o->fmt == AUDIT_FMT_JSON);
	free(path);
	free(pubpath);
	return rc;
}

/* `audit ship --init`: create or migrate the fleet store's schema. */
static int
audit_cmd_ship(struct audit_opts *o)
{
	struct config *cfg = NULL;
	char msg[512];
	int rc;

	if (!o->init)
		return cmd_usage_error(audit_usage, "audit ship: the gateway "
		    "ships by itself (audit.ship); the command is ship --init");
	if (o->db_path != NULL)
		return cmd_usage_error(audit_ship_usage, "audit ship: --init "
		    "writes the fleet store (--store or audit.ship.url), not "
		    "--db");
	if (o->store == NULL) {
		if (cmd_load(o->cfg_path, &cfg, NULL) == -1)
			return 1;
		if (cfg->audit_ship_url == NULL) {
			config_free(cfg);
			return cmd_error("audit ship --init: no --store URL and "
			    "no audit.ship.url in the config");
		}
	}
	rc = audit_store_init(o->store ? o->store : cfg->audit_ship_url, msg,
	    sizeof(msg));
	config_free(cfg);
	if (rc == -1)
		return cmd_error("audit ship --init: %s", msg);
	printf("%s\n", msg);
	return fflush(stdout) == EOF ? 1 : 0;
}

int
cmd_audit(int argc, char *argv[])
{
	struct cmd_args a;
	struct audit_opts o;
	int help = 0;

	if (audit_parse(argc, argv, &a, &o, &help) == -1)
		return EXIT_USAGE;
	if (help)
		return audit_help(&a);
	if (o.gateway != NULL && o.store == NULL)
		return cmd_usage_error(audit_usage, "audit: --gateway needs "
		    "--store");
	if (o.store != NULL && o.db_path != NULL)
		return cmd_usage_error(audit_usage, "audit: --store and --db "
		    "are two places; give one");
	if (a.n_ops == 0) {
		if (o.init)
			return cmd_usage_error(audit_usage, "audit: --init "
			    "belongs to audit ship");
		if (o.since != NULL && o.until != NULL &&
		    o.f.until_ms <= o.f.since_ms)
			return cmd_usage_error(audit_usage, "audit: --until is "
			    "not after --since");
		return audit_cmd_query(&o);
	}
	if (a.n_ops > 1)
		return cmd_usage_error(audit_usage, "audit: unexpected "
		    "argument: %s", a.ops[1]);
	if (o.init && strcmp(a.ops[0], "ship") != 0)
		return cmd_usage_error(audit_usage, "audit: --init belongs to "
		    "audit ship");
	if (strcmp(a.ops[0], "verify") == 0)
		return audit_cmd_verify(&o);
	if (strcmp(a.ops[0], "ship") == 0)
		return audit_cmd_ship(&o);
	if (strcmp(a.ops[0], "export") == 0 && o.store != NULL)
		return cmd_usage_error(audit_usage, "audit export: reads "
		    "audit.db only (--store is for queries and verify)");
	if (strcmp(a.ops[0], "export") == 0)
		return audit_cmd_export(&o);
	if (strcmp(a.ops[0], "stats") == 0)
		return audit_cmd_stats(&o);
	return cmd_usage_error(audit_usage, "audit: unknown subcommand: %s "
	    "(sandgate help audit)", a.ops[0]);
}
