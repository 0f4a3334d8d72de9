/*
 * The sandbox launcher (SPEC §9): network namespace, veth and addresses
 * (sandbox_net.c), the host-side nftables table (sandbox_nft.c), the OCI
 * bundle (sandbox_oci.c) and the runtime and admin-socket driver (sandbox_run.c).
 */
#ifndef SG_SANDBOX_H
#define SG_SANDBOX_H

#include <signal.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/netaddr.h"

#define SANDBOX_ID_MAX		48	/* [a-z0-9-], no leading '-' */
#define SANDBOX_IFNAME_MAX	16	/* IFNAMSIZ */
#define SANDBOX_MAX_ENV		64
#define SANDBOX_MAX_ARGV	256
#define SANDBOX_NETNS_DIR	"/run/netns"

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
/* Build the nft commands for one sandbox (pure; for tests and for apply). */
int	 sandbox_nft_rules(const struct sandbox_net *, uint16_t tport,
	    uint16_t dport, char *buf, size_t len);
int	 sandbox_nft_add(const struct sandbox_net *, uint16_t tport,
	    uint16_t dport, const char **errstr);
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

/* sandbox_run.c */
struct sandbox_placeholder {
	char		*credential;
	char		*env;		/* NULL when the credential names none */
	char		*placeholder;
};
int	 sandbox_admin_register(const char *sock, const char *id,
	    const char *policy, const char *source,
	    struct sandbox_placeholder **phs, size_t *n, char *err, size_t errlen);
int	 sandbox_admin_unregister(const char *sock, const char *id);
int	 sandbox_admin_ping(const char *sock);
void	 sandbox_placeholders_free(struct sandbox_placeholder *, size_t);
/* 1 when /sys/fs/cgroup is tmpfs and /sys/fs/cgroup/unified a cgroup2 mount. */
int	 sandbox_cgroup_hybrid(void);
/*
 * Run the bundle with the runtime in the foreground and return the command's
 * exit status (128 + N when signal N ended it), or -1. SIGINT, SIGTERM and
 * SIGHUP received meanwhile are forwarded to the sandbox (KILL 10 s later);
 * the runtime's container state is deleted before returning. runsc is
 * started inside the network namespace at netns; crun joins it by the path
 * in config.json.
 */
int	 sandbox_runtime_run(enum sandbox_runtime, const char *state_root,
	    const char *bundle, const char *id, const char *netns,
	    const char **errstr);
/* rmdir /sys/fs/cgroup/{each hierarchy}/sandgate/ID where empty. */
void	 sandbox_cgroup_remove(const char *id);
/* `delete --force ID`: a container that is gone already is no error to us. */
int	 sandbox_runtime_delete(enum sandbox_runtime, const char *state,
	    const char *id);
/* The last SIGINT/SIGTERM/SIGHUP/SIGALRM the launcher got, 0 when none. */
extern volatile sig_atomic_t sandbox_signal;
void	 sandbox_signals_install(void);

#endif
