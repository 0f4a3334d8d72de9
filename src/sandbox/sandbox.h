/*
 * The sandbox launcher (docs/sandbox.md): network namespace, veth and addresses
 * (sandbox_net.c), the host-side nftables table (sandbox_nft.c), the OCI
 * bundle (sandbox_oci.c), the runtime and admin-socket driver (sandbox_run.c)
 * and the command's output under runsc (sandbox_stdio.c).
 */
#ifndef SG_SANDBOX_H
#define SG_SANDBOX_H

#include <signal.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/netaddr.h"

#define SANDBOX_ID_MAX		40	/* POLICY_ID_MAX: [a-z0-9][a-z0-9-]{0,39} */
#define SANDBOX_IFNAME_MAX	16	/* IFNAMSIZ */
#define SANDBOX_MAX_ENV		64
#define SANDBOX_MAX_ARGV	256
#define SANDBOX_NETNS_DIR	"/run/netns"
/*
 * Bundles and runtime state live under /run, not state_dir: the sandbox's
 * own root (an unprivileged host uid) must be able to reach its /etc, and
 * state_dir is usually private to the gateway's user.
 */
#define SANDBOX_RUN_DIR		"/run/sandgate"
#define SANDBOX_MAX_PUBLISH	16
#define SANDBOX_TOKEN_HEX	40	/* ingress token: 160 random bits */

enum sandbox_runtime {
	SANDBOX_RUNSC,
	SANDBOX_CRUN,
};

/* The network of one sandbox: every name and address the launcher made. */
struct sandbox_net {
	char		 id[SANDBOX_ID_MAX + 1];
	char		 netns[SANDBOX_ID_MAX + 16];		/* sandgate-<id> */
	char		 netns_path[SANDBOX_ID_MAX + 32];	/* /run/netns/sandgate-<id> */
	char		 veth_host[SANDBOX_IFNAME_MAX];		/* sg<hash> */
	char		 veth_guest[SANDBOX_IFNAME_MAX];	/* eth0, inside */
	struct in_addr	 host_addr;	/* .1 of the /30: the gateway */
	struct in_addr	 guest_addr;	/* .2 of the /30: the sandbox */
	int		 route_localnet; /* set it on the host side (a loopback listener) */
};

/* What the OCI config is built from; every string is already validated. */
struct sandbox_spec {
	enum sandbox_runtime runtime;
	const char	*id;
	const char	*rootfs;	/* "host" or a directory */
	const char	*root_path;	/* root.path: the skeleton or that directory */
	const char	*etc_dir;	/* the generated /etc */
	const char	*ca_file;	/* path inside the sandbox of the CA bundle */
	const char	*workspace;	/* NULL: none */
	const char	*netns_path;
	const char	*env[SANDBOX_MAX_ENV];	/* K=V, user and placeholders */
	int		 n_env;
	char *const	*argv;
	int		 argc;
	uint64_t	 memory;	/* bytes, 0: no limit */
	uint64_t	 cpu_millis;	/* 1000 = one CPU, 0: no limit */
	int64_t		 pids;		/* 0: no limit */
	uid_t		 uid_base;	/* host uid that sandbox root maps to */
	uint32_t	 id_count;
};

/* sandbox_net.c */
int	 sandbox_valid_id(const char *id);
void	 sandbox_net_names(const char *id, struct sandbox_net *);
/* Pick the first /30 of subnet whose addresses no host link uses. */
int	 sandbox_net_alloc(const struct cidr *subnet, struct sandbox_net *,
	    const char **errstr);
/* Block index -> .1/.2 of that /30 of subnet; -1 when outside. */
int	 sandbox_net_block(const struct cidr *subnet, uint32_t idx,
	    struct in_addr *host, struct in_addr *guest);
int	 sandbox_net_create(struct sandbox_net *, const char **errstr);
/* Remove what exists of it; tolerates half-built networks. */
void	 sandbox_net_destroy(const struct sandbox_net *);
int	 sandbox_netns_exists(const char *name);

/* sandbox_nft.c */
/*
 * Where a sandbox's TCP (transparent) or DNS goes: a listener's IPv4
 * address and port; INADDR_ANY (a wildcard listener) = the host side of
 * the sandbox's veth.
 */
struct sandbox_dest {
	struct in_addr	 addr;
	uint16_t	 port;
};
/*
 * Build the nft commands for one sandbox (pure; for tests and for apply).
 * log_group != 0: the first packet of each flow the rules drop (not DNS,
 * not TCP) goes to that NFLOG group first, for the gateway's audit log.
 */
int	 sandbox_nft_rules(const struct sandbox_net *,
	    const struct sandbox_dest *tp, const struct sandbox_dest *dns,
	    uint16_t log_group, char *buf, size_t len);
int	 sandbox_nft_add(const struct sandbox_net *,
	    const struct sandbox_dest *tp, const struct sandbox_dest *dns,
	    uint16_t log_group, const char **errstr);
void	 sandbox_nft_del(const struct sandbox_net *);

/* sandbox_oci.c */
json_t	*sandbox_oci_config(const struct sandbox_spec *, const char **errstr);
/* Parse 512M / 1G / 1048576 and 0.5 / 2 (CPUs); -1 on a bad value. */
int	 sandbox_parse_size(const char *s, uint64_t *bytes);
int	 sandbox_parse_cpus(const char *s, uint64_t *millis);
/*
 * Write a sandbox's generated /etc into dir: passwd, group, hosts,
 * nsswitch.conf, resolv.conf naming the gateway address, and
 * ssl/certs/ca-certificates.crt = ca_bundle + sg_ca (either may be NULL).
 */
int	 sandbox_oci_write_etc(const char *dir, const struct sandbox_net *,
	    const char *ca_bundle, const char *sg_ca, const char **errstr);
/* The skeleton root: mount points and the host's top-level symlinks. */
int	 sandbox_oci_write_rootfs(const char *dir);
/*
 * A prepared root (--rootfs DIR) the launcher can bind its resolv.conf,
 * hosts and CA bundle over: 0, or -1 with why in err (one is a symlink,
 * which the runtime would follow inside the root).
 */
int	 sandbox_oci_check_rootfs(const char *dir, char *err, size_t len);

/* What `sandbox run` and `sandbox create` were asked for. */
struct sandbox_opts {
	const char	*policy;
	const char	*runtime;	/* "runsc" | "crun" */
	const char	*rootfs;	/* "host" | DIR */
	const char	*workspace;	/* NULL: none */
	const char	*env[SANDBOX_MAX_ENV];
	int		 n_env;
	uint64_t	 memory;
	uint64_t	 cpu_millis;
	int64_t		 pids;
	uint16_t	 publish[SANDBOX_MAX_PUBLISH];
	int		 n_publish;
	int		 is_public;
	uint64_t	 ttl_ms;	/* 0: none */
	char *const	*cmd;
	int		 n_cmd;
	int		 detach;	/* create: output to output.log */
};

struct config;
struct sandbox_state;

/* sandbox_life.c */
/* "sandgate: " + message on stderr. */
void	 sandbox_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Field 22 of /proc/PID/stat: with the pid, it names one process for good. */
uint64_t sandbox_proc_start(pid_t);
void	 sandbox_state_path(const struct config *, char *buf, size_t len);
/* The launchers' lock (/run/sandgate/sandbox.lock); an fd to close, or -1. */
int	 sandbox_lock(void);
/* Take down leftovers of dead launchers (call under the lock). */
void	 sandbox_reconcile(struct sandbox_state *);
int	 sandbox_new_token(char out[SANDBOX_TOKEN_HEX + 1]);
/* The ingress URL of port of sandbox id; -1 when ingress is off. */
int	 sandbox_ingress_url(const struct config *, const char *id,
	    uint16_t port, char *buf, size_t len);
/*
 * Bring sandbox id up, run its command to the end, take it all down; the
 * command's exit status (128 + N for signal N), or 1. With o->detach this
 * is the detached supervisor of `create`: it writes "sandgate-ready" to
 * stderr once the container runs and then lets stderr go.
 */
int	 sandbox_life(struct config *, const struct sandbox_opts *,
	    const char *id, const char *token);
/* Stop sandbox id and remove every trace; 1 when there is none. */
int	 sandbox_remove(struct config *, const char *id);

/* sandbox_state.c: state.db, one row per live sandbox */
struct sandbox_row {
	char		 id[SANDBOX_ID_MAX + 1];
	char		 policy[64];
	char		 runtime[8];		/* runsc | crun */
	char		 mode[8];		/* run | create */
	char		 state[16];		/* creating | running | exited */
	int64_t		 created;		/* unix seconds */
	int64_t		 expires;		/* unix seconds, 0: no --ttl */
	int64_t		 owner_pid;		/* the launcher that owns it */
	uint64_t	 owner_start;		/* and its start time (/proc) */
	char		 guest[INET_ADDRSTRLEN];
	uint16_t	 publish[SANDBOX_MAX_PUBLISH];
	int		 n_publish;
	int		 is_public;
	char		 token[SANDBOX_TOKEN_HEX + 1];	/* ingress token */
	char		 admin[256];		/* the gateway it registered with */
};
struct sandbox_state;
/* Creates the file mode 0600 (it holds ingress tokens). */
struct sandbox_state *sandbox_state_open(const char *path, const char **errstr);
void	 sandbox_state_close(struct sandbox_state *);
/* -1 with errno EEXIST when the id has a row. */
int	 sandbox_state_insert(struct sandbox_state *, const struct sandbox_row *);
/* guest may be NULL (kept). */
int	 sandbox_state_update(struct sandbox_state *, const char *id,
	    const char *state, const char *guest);
int	 sandbox_state_delete(struct sandbox_state *, const char *id);
/* 1 found, 0 none, -1 error. */
int	 sandbox_state_get(struct sandbox_state *, const char *id,
	    struct sandbox_row *);
int	 sandbox_state_list(struct sandbox_state *, struct sandbox_row **,
	    size_t *n);

/* sandbox_run.c */
struct sandbox_ingress {
	const char	*address;	/* the guest address */
	const uint16_t	*ports;
	int		 n_ports;
	const char	*token_sha256;	/* hex; NULL when public */
	int		 is_public;
};
struct sandbox_placeholder {
	char		*credential;
	char		*env;		/* NULL when the credential names none */
	char		*placeholder;
};
int	 sandbox_admin_register(const char *sock, const char *id,
	    const char *policy, const char *source,
	    const struct sandbox_ingress *ingress,
	    struct sandbox_placeholder **phs, size_t *n, char *err, size_t errlen);
/* Tell the gateway the sandbox's command ended (ingress answers 503). */
int	 sandbox_admin_set_running(const char *sock, const char *id, int running);
int	 sandbox_admin_unregister(const char *sock, const char *id);
/* 0 when the gateway answers GET /v1/status; *nflog_group (may be NULL)
 * gets the NFLOG group it audits drops from, 0 when none. */
int	 sandbox_admin_ping(const char *sock, int *nflog_group);
void	 sandbox_placeholders_free(struct sandbox_placeholder *, size_t);
/* 1 when /sys/fs/cgroup is tmpfs and /sys/fs/cgroup/unified a cgroup2 mount. */
int	 sandbox_cgroup_hybrid(void);
/*
 * A foreground command's stdout and stderr under runsc (sandbox_stdio.c):
 * gVisor writes a regular file it is handed at an offset of its own, from 0,
 * so such a stream goes through a pipe that a thread copies onward. new: *r
 * is NULL when nothing needs it (crun, a terminal, a pipe); -1 on error.
 * child: in the forked runtime, its fd 1 and 2; parent: after the fork;
 * end: once the runtime exited, copy what is left (at most grace_s seconds
 * more: a process left in the sandbox may hold the pipe) and free.
 */
struct sandbox_relay;
int	 sandbox_relay_new(enum sandbox_runtime, struct sandbox_relay **r);
void	 sandbox_relay_child(const struct sandbox_relay *);
void	 sandbox_relay_parent(struct sandbox_relay *);
void	 sandbox_relay_end(struct sandbox_relay *, int grace_s);
/*
 * Start `RUNTIME run --bundle B ID` and return its pid: the runtime lives as
 * long as the sandbox's command and exits with its status. out_fd >= 0 gets
 * the command's stdout and stderr (stdin is /dev/null); -1 inherits ours,
 * through relay when it is not NULL. runsc is started inside the network
 * namespace at netns; crun joins it by the path in config.json.
 */
pid_t	 sandbox_runtime_start(enum sandbox_runtime, const char *state_root,
	    const char *bundle, const char *id, const char *netns, int out_fd,
	    struct sandbox_relay *relay, const char **errstr);
/* The container's status ("created", "running", "stopped"), or -1. */
int	 sandbox_runtime_status(enum sandbox_runtime, const char *state_root,
	    const char *id, char *buf, size_t len);
/* `kill ID SIG` through the runtime (to the sandbox's init). */
void	 sandbox_runtime_kill(enum sandbox_runtime, const char *state_root,
	    const char *id, const char *sig);
/*
 * `exec --process FILE ID` in the foreground; returns its pid. runsc also
 * writes the command's pid inside the sandbox to pid_file: runsc exec does
 * not pass signals on, sandbox_runtime_kill_pid() does.
 */
pid_t	 sandbox_runtime_exec(enum sandbox_runtime, const char *state_root,
	    const char *id, const char *process_json, const char *pid_file,
	    struct sandbox_relay *relay, const char **errstr);
/* `kill --pid PID ID SIG` (runsc): signal one process of the sandbox. */
int	 sandbox_runtime_kill_pid(enum sandbox_runtime, const char *state_root,
	    const char *id, long pid, const char *sig);
/* 128 + N for a signal, the exit code otherwise. */
int	 sandbox_wait_status(int status);
/* rmdir /sys/fs/cgroup/{each hierarchy}/sandgate/ID where empty. */
void	 sandbox_cgroup_remove(const char *id);
/* `delete --force ID`: a container that is gone already is no error to us. */
int	 sandbox_runtime_delete(enum sandbox_runtime, const char *state,
	    const char *id);
/* The last SIGINT/SIGTERM/SIGHUP/SIGALRM the launcher got, 0 when none. */
extern volatile sig_atomic_t sandbox_signal;
void	 sandbox_signals_install(void);

#endif
