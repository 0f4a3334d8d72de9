/*
 * A sandbox's network: a named network namespace (bound under /run/netns as
 * `ip netns add` does), a veth pair, a /30 from sandbox.subnet and a default
 * route to the gateway address, all made with rtnetlink through libmnl.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "core/hash.h"
#include "core/policy.h"
#include "sandbox/sandbox.h"

#define NET_MAX_BLOCKS	(1u << 20)

int
sandbox_valid_id(const char *id)
{
	return policy_valid_id(id, strlen(id));
}

void
sandbox_net_names(const char *id, struct sandbox_net *n)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->netns, sizeof(n->netns), "sandgate-%s", id);
	snprintf(n->netns_path, sizeof(n->netns_path), "%s/%s",
	    SANDBOX_NETNS_DIR, n->netns);
	/*
	 * Unkeyed FNV-1a: the name must be the same after a restart, when
	 * the network of a sandbox that outlived it is looked for again.
	 */
	snprintf(n->veth_host, sizeof(n->veth_host), "sg%08x",
	    hash_fnv1a32(id, strlen(id)));
	snprintf(n->veth_guest, sizeof(n->veth_guest), "eth0");
}

int
sandbox_net_block(const struct cidr *subnet, uint32_t idx,
    struct in_addr *host, struct in_addr *guest)
{
	uint32_t base, nblocks;

	if (subnet->addr.family != AF_INET || subnet->bits > 30)
		return -1;
	nblocks = 1u << (30 - subnet->bits);
	if (idx >= nblocks || idx >= NET_MAX_BLOCKS)
		return -1;
	memcpy(&base, subnet->addr.a, 4);
	base = ntohl(base) + idx * 4;
	host->s_addr = htonl(base + 1);
	guest->s_addr = htonl(base + 2);
	return 0;
}

/* ---------------------------------------------------------------- netlink */

static struct mnl_socket *
nl_open(void)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);

	if (nl == NULL)
		return NULL;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* Send one request and wait for its ACK (or error, returned as -1/errno). */
static int
nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	unsigned int portid = mnl_socket_get_portid(nl);
	unsigned int seq = nlh->nlmsg_seq;
	ssize_t r;
	int ret;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	for (;;) {
		r = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (r < 0)
			return -1;
		ret = mnl_cb_run(buf, r, seq, portid, cb, arg);
		if (ret <= MNL_CB_STOP)
			return ret == MNL_CB_ERROR ? -1 : 0;
	}
}

static struct nlmsghdr *
nl_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	static unsigned int seq;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nlh->nlmsg_seq = (unsigned int)time(NULL) + ++seq;
	return nlh;
}

static int
nl_link_up(struct mnl_socket *nl, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifm;

	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = IFF_UP;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_talk(nl, nlh, NULL, NULL);
}

/*
 * route_localnet on this one link: packets that came in on it may be
 * routed to 127.0.0.0/8 (the launcher's DNAT to a loopback listener) and
 * replies from there may leave through it. Never set globally; the
 * sandbox's nftables rules admit only the listeners' ports.
 */
static int
nl_route_localnet(struct mnl_socket *nl, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_NEWLINK, 0);
	struct nlattr *spec, *inet, *conf;
	struct ifinfomsg *ifm;

	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	inet = mnl_attr_nest_start(nlh, AF_INET);
	conf = mnl_attr_nest_start(nlh, IFLA_INET_CONF);
	mnl_attr_put_u32(nlh, IPV4_DEVCONF_ROUTE_LOCALNET, 1);
	mnl_attr_nest_end(nlh, conf);
	mnl_attr_nest_end(nlh, inet);
	mnl_attr_nest_end(nlh, spec);
	return nl_talk(nl, nlh, NULL, NULL);
}

static int
nl_add_addr(struct mnl_socket *nl, const char *ifname, struct in_addr a,
    int prefix)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	unsigned int idx;
	struct in_addr brd;

	/* if_nametoindex works only in the caller's namespace: pass it in. */
	if ((idx = if_nametoindex(ifname)) == 0)
		return -1;
	nlh = nl_msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = idx;
	brd.s_addr = a.s_addr | htonl((1u << (32 - prefix)) - 1);
	mnl_attr_put_u32(nlh, IFA_LOCAL, a.s_addr);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a.s_addr);
	mnl_attr_put_u32(nlh, IFA_BROADCAST, brd.s_addr);
	return nl_talk(nl, nlh, NULL, NULL);
}

static int
nl_default_route(struct mnl_socket *nl, struct in_addr gw, const char *ifname)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;
	unsigned int idx;

	if ((idx = if_nametoindex(ifname)) == 0)
		return -1;
	nlh = nl_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, gw.s_addr);
	mnl_attr_put_u32(nlh, RTA_OIF, idx);
	return nl_talk(nl, nlh, NULL, NULL);
}

/* The host side, with the peer created directly inside the namespace. */
static int
nl_add_veth(struct mnl_socket *nl, const struct sandbox_net *n, int nsfd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_NEWLINK,
	    NLM_F_CREATE | NLM_F_EXCL);
	struct ifinfomsg *ifm, *peer;
	struct nlattr *linkinfo, *data, *peerinfo;

	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, n->veth_host);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	peerinfo = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	peer = mnl_nlmsg_put_extra_header(nlh, sizeof(*peer));
	memset(peer, 0, sizeof(*peer));
	peer->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, n->veth_guest);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)nsfd);
	mnl_attr_nest_end(nlh, peerinfo);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return nl_talk(nl, nlh, NULL, NULL);
}

static int
nl_del_link(struct mnl_socket *nl, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_DELLINK, 0);
	struct ifinfomsg *ifm;

	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_talk(nl, nlh, NULL, NULL);
}

/* ---------------------------------------------------------------- allocation */

struct used_ctx {
	const struct cidr *subnet;
	uint8_t		*used;		/* one byte per /30 */
	uint32_t	 nblocks;
};

static int
addr_attr_cb(const struct nlattr *attr, void *arg)
{
	const struct nlattr **tb = arg;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, IFA_MAX) < 0)
		return MNL_CB_OK;
	if ((type == IFA_LOCAL || type == IFA_ADDRESS) &&
	    mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static void
mark_used(struct used_ctx *u, uint32_t a_net, uint8_t prefix)
{
	uint32_t base, a = ntohl(a_net), first, last, mask, i;

	memcpy(&base, u->subnet->addr.a, 4);
	base = ntohl(base);
	/* every /30 the address's own prefix overlaps is taken */
	mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
	first = a & mask;
	last = first | ~mask;
	if (last < base || first > base + u->nblocks * 4 - 1)
		return;
	if (first < base)
		first = base;
	if (last > base + u->nblocks * 4 - 1)
		last = base + u->nblocks * 4 - 1;
	for (i = (first - base) / 4; i <= (last - base) / 4; i++)
		u->used[i] = 1;
}

static int
addr_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct used_ctx *u = arg;
	const struct nlattr *tb[IFA_MAX + 1] = { 0 };
	struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);

	if (ifa->ifa_family != AF_INET)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
	if (tb[IFA_LOCAL] != NULL)
		mark_used(u, mnl_attr_get_u32(tb[IFA_LOCAL]), ifa->ifa_prefixlen);
	if (tb[IFA_ADDRESS] != NULL)
		mark_used(u, mnl_attr_get_u32(tb[IFA_ADDRESS]),
		    ifa->ifa_prefixlen);
	return MNL_CB_OK;
}

int
sandbox_net_alloc(const struct cidr *subnet, struct sandbox_net *n,
    const char **errstr)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl = NULL;
	struct nlmsghdr *nlh;
	struct rtgenmsg *rt;
	struct used_ctx u;
	uint32_t i;
	int r;

	if (subnet->addr.family != AF_INET || subnet->bits > 30 ||
	    subnet->bits < 12) {
		*errstr = "sandbox.subnet must be an IPv4 prefix from /12 to /30";
		return -1;
	}
	u.subnet = subnet;
	u.nblocks = 1u << (30 - subnet->bits);
	if ((u.used = calloc(u.nblocks, 1)) == NULL) {
		*errstr = "out of memory";
		return -1;
	}
	if ((nl = nl_open()) == NULL) {
		*errstr = "netlink socket";
		goto fail;
	}
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = (unsigned int)time(NULL);
	rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
	rt->rtgen_family = AF_INET;
	if ((r = nl_talk(nl, nlh, addr_cb, &u)) == -1) {
		*errstr = "netlink address dump";
		goto fail;
	}
	mnl_socket_close(nl);
	for (i = 0; i < u.nblocks; i++)
		if (!u.used[i]) {
			free(u.used);
			return sandbox_net_block(subnet, i, &n->host_addr,
			    &n->guest_addr);
		}
	free(u.used);
	*errstr = "no free /30 left in sandbox.subnet";
	return -1;
fail:
	if (nl != NULL)
		mnl_socket_close(nl);
	free(u.used);
	return -1;
}

/* ---------------------------------------------------------------- namespaces */

int
sandbox_netns_exists(const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", SANDBOX_NETNS_DIR, name);
	return stat(path, &st) == 0;
}

/* /run/netns as a shared mount point, so namespaces bound there show everywhere. */
static int
netns_dir(void)
{
	if (mkdir(SANDBOX_NETNS_DIR, 0755) == -1 && errno != EEXIST)
		return -1;
	if (mount("", SANDBOX_NETNS_DIR, "none", MS_SHARED | MS_REC,
	    NULL) == 0)
		return 0;
	if (errno != EINVAL)
		return -1;
	if (mount(SANDBOX_NETNS_DIR, SANDBOX_NETNS_DIR, "none",
	    MS_BIND | MS_REC, NULL) == -1)
		return -1;
	return mount("", SANDBOX_NETNS_DIR, "none", MS_SHARED | MS_REC, NULL);
}

/* A child unshares its network namespace and binds it to path. */
static int
netns_add(const char *path)
{
	pid_t pid;
	int fd, st;

	if ((fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0444)) == -1)
		return -1;
	close(fd);
	if ((pid = fork()) == -1)
		goto fail;
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) == -1 ||
		    mount("/proc/self/ns/net", path, "none", MS_BIND,
		    NULL) == -1)
			_exit(1);
		_exit(0);
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			goto fail;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		errno = EPERM;
		goto fail;
	}
	return 0;
fail:
	(void)unlink(path);
	return -1;
}

/* Inside the namespace: lo up, the guest side addressed, the default route. */
static int
net_inside(const struct sandbox_net *n, int nsfd)
{
	struct mnl_socket *nl = NULL;
	int self, ret = -1, saved;

	if ((self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (setns(nsfd, CLONE_NEWNET) == -1)
		goto out;
	if ((nl = nl_open()) != NULL &&
	    nl_link_up(nl, "lo") == 0 &&
	    nl_add_addr(nl, n->veth_guest, n->guest_addr, 30) == 0 &&
	    nl_link_up(nl, n->veth_guest) == 0 &&
	    nl_default_route(nl, n->host_addr, n->veth_guest) == 0)
		ret = 0;
	saved = errno;
	if (setns(self, CLONE_NEWNET) == -1)
		abort();	/* never run on in the wrong namespace */
	errno = saved;
out:
	if (nl != NULL)
		mnl_socket_close(nl);
	close(self);
	return ret;
}

int
sandbox_net_create(struct sandbox_net *n, const char **errstr)
{
	struct mnl_socket *nl = NULL;
	int nsfd = -1;

	if (netns_dir() == -1) {
		*errstr = "cannot prepare " SANDBOX_NETNS_DIR;
		return -1;
	}
	if (netns_add(n->netns_path) == -1) {
		*errstr = errno == EEXIST ? "network namespace exists" :
		    "cannot create the network namespace";
		return -1;
	}
	if ((nsfd = open(n->netns_path, O_RDONLY | O_CLOEXEC)) == -1) {
		*errstr = "cannot open the network namespace";
		goto fail;
	}
	if ((nl = nl_open()) == NULL) {
		*errstr = "netlink socket";
		goto fail;
	}
	if (nl_add_veth(nl, n, nsfd) == -1) {
		*errstr = errno == EEXIST ? "veth exists" : "cannot create veth";
		goto fail;
	}
	if (n->route_localnet && nl_route_localnet(nl, n->veth_host) == -1) {
		*errstr = "cannot set route_localnet on the host side of the veth";
		goto fail;
	}
	if (nl_add_addr(nl, n->veth_host, n->host_addr, 30) == -1 ||
	    nl_link_up(nl, n->veth_host) == -1) {
		*errstr = "cannot address the host side of the veth";
		goto fail;
	}
	if (net_inside(n, nsfd) == -1) {
		*errstr = "cannot configure the sandbox side of the veth";
		goto fail;
	}
	mnl_socket_close(nl);
	close(nsfd);
	return 0;
fail:
	if (nl != NULL)
		mnl_socket_close(nl);
	if (nsfd != -1)
		close(nsfd);
	sandbox_net_destroy(n);
	return -1;
}

void
sandbox_net_destroy(const struct sandbox_net *n)
{
	struct mnl_socket *nl;

	/* the peer and the address go with the host side */
	if ((nl = nl_open()) != NULL) {
		(void)nl_del_link(nl, n->veth_host);
		mnl_socket_close(nl);
	}
	(void)umount2(n->netns_path, MNT_DETACH);
	(void)unlink(n->netns_path);
}
