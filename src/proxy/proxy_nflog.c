/*
 * What the kernel drops for a sandbox, in the audit log: the launcher's
 * nftables rules log the first packet of every flow that is neither DNS nor
 * TCP (UDP elsewhere, ICMP, other protocols) to an NFLOG group before they
 * drop it; this receiver, on the main loop, turns each into a deny row of
 * the sandbox that sent it. Each gateway binds a group of its own and says
 * which in GET /v1/status; a packet from an address no sandbox of this
 * gateway owns is ignored.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "audit/audit.h"
#include "core/log.h"
#include "core/reason.h"
#include "parse/pkt_flow.h"
#include "proxy/front.h"

#define NFLOG_GROUP_FIRST	4200	/* groups tried, one per gateway */
#define NFLOG_GROUPS		64
#define NFLOG_COPY		96	/* bytes of each packet: IP + L4 header */
#define NFLOG_FLOWS		512	/* flows remembered (a slot each, by hash) */
#define NFLOG_FLOW_IDLE_MS	30000	/* a flow's gap: UDP conntrack's timeout */

/* A flow the rules dropped lately: its later packets write no row. */
struct nflog_flow {
	uint8_t		 src[4], dst[4];
	uint8_t		 proto;
	int		 sport, dport;
	int64_t		 last_ms;	/* 0: empty */
};

struct nflog {
	struct mnl_socket	*nl;
	struct event		*ev;
	uint16_t		 group;
	unsigned int		 portid;
	unsigned int		 seq;
	struct nflog_flow	 flows[NFLOG_FLOWS];
};

/* One config command (or copy mode) to the group; 0 when the kernel acks. */
static int
nflog_config(struct nflog *n, uint16_t group, int cmd, int mode)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	struct nfulnl_msg_config_cmd c;
	struct nfulnl_msg_config_mode m;
	int r;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++n->seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	if (mode) {
		memset(&m, 0, sizeof(m));
		m.copy_range = htonl(NFLOG_COPY);
		m.copy_mode = NFULNL_COPY_PACKET;
		mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(m), &m);
		/*
		 * Each packet at once: the kernel's default holds up to 100
		 * for a second, and a sandbox that sent and exited within it
		 * was gone (no owner) when they came.
		 */
		mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
	} else {
		c.command = (uint8_t)cmd;
		mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(c), &c);
	}
	if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	if ((r = (int)mnl_socket_recvfrom(n->nl, buf, sizeof(buf))) < 0)
		return -1;
	return mnl_cb_run(buf, (size_t)r, n->seq, n->portid, NULL, NULL) < 0 ?
	    -1 : 0;
}

struct nflog_pkt {
	const unsigned char	*payload;
	size_t			 len;
};

static int
attr_cb(const struct nlattr *a, void *data)
{
	struct nflog_pkt *pk = data;

	if (mnl_attr_get_type(a) == NFULA_PAYLOAD) {
		pk->payload = mnl_attr_get_payload(a);
		pk->len = mnl_attr_get_payload_len(a);
	}
	return MNL_CB_OK;
}

/*
 * 1 when fl continues a flow dropped within NFLOG_FLOW_IDLE_MS (its time
 * renewed): the rules log every packet of a flow whose first they dropped
 * (conntrack never confirms it), and a flow is one row (docs/sandbox.md).
 */
static int
nflog_flow_seen(struct nflog *n, const struct pkt_flow *fl, int64_t now)
{
	struct nflog_flow *f;
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < 4; i++)
		h = (h ^ fl->src[i]) * 16777619u;
	for (i = 0; i < 4; i++)
		h = (h ^ fl->dst[i]) * 16777619u;
	h = (h ^ fl->proto) * 16777619u;
	h = (h ^ (uint32_t)fl->sport) * 16777619u;
	h = (h ^ (uint32_t)fl->port) * 16777619u;
	f = &n->flows[h % NFLOG_FLOWS];
	if (f->last_ms != 0 && now - f->last_ms < NFLOG_FLOW_IDLE_MS &&
	    memcmp(f->src, fl->src, 4) == 0 && memcmp(f->dst, fl->dst, 4) == 0 &&
	    f->proto == fl->proto && f->sport == fl->sport &&
	    f->dport == fl->port) {
		f->last_ms = now;
		return 1;
	}
	memcpy(f->src, fl->src, 4);
	memcpy(f->dst, fl->dst, 4);
	f->proto = fl->proto;
	f->sport = fl->sport;
	f->dport = fl->port;
	f->last_ms = now;
	return 0;
}

/* A dropped packet -> the audit row of the sandbox that sent it, if ours. */
static void
nflog_packet(struct proxy *p, const unsigned char *b, size_t len)
{
	struct policy_identity id;
	struct audit_event ev;
	struct pkt_flow fl;
	struct netaddr src;
	struct policy *pol;
	struct sockaddr_in sin;
	struct timespec ts;
	char sip[INET_ADDRSTRLEN], dip[INET_ADDRSTRLEN], client[32];
	int found;

	if (pkt_flow_parse(b, len, &fl) == -1)
		return;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	memcpy(&sin.sin_addr, fl.src, 4);
	netaddr_from_sockaddr((struct sockaddr *)&sin, &src, NULL);
	inet_ntop(AF_INET, fl.src, sip, sizeof(sip));
	inet_ntop(AF_INET, fl.dst, dip, sizeof(dip));
	found = policy_registry_lookup(&src, &id) == 0;
	if (!found) {
		pol = proxy_policy_get(p);
		found = policy_identify_source(pol, &src, &id) == 0;
		policy_unref(pol);
	}
	if (!found)
		return;		/* another gateway's sandbox, or nobody's */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (nflog_flow_seen(p->nflog, &fl, (int64_t)ts.tv_sec * 1000 +
	    ts.tv_nsec / 1000000 + 1))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(client, sizeof(client), "%s:0", sip);
	memset(&ev, 0, sizeof(ev));
	ev.ts_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	ev.sandbox = id.sandbox;
	ev.kind = "transparent";
	ev.client = client;
	ev.host = dip;
	ev.ip = dip;
	ev.port = fl.port;
	ev.asn = -1;
	ev.method = fl.proto_name;
	ev.status = -1;
	ev.decision = VERDICT_DENY;
	ev.rule = "sandbox-network";
	ev.reason = reason_word(REASON_PROTOCOL_BLOCKED);
	ev.bytes_up = -1;
	ev.bytes_down = -1;
	ev.duration_ms = -1;
	audit_submit(p->audit, &ev);
	log_info("%s: dropped %s to %s (%s)", id.sandbox, fl.proto_name, dip,
	    reason_word(REASON_PROTOCOL_BLOCKED));
}

static int
msg_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nflog_pkt pk = { NULL, 0 };

	if ((nlh->nlmsg_type & 0xff) != NFULNL_MSG_PACKET)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, &pk) < 0)
		return MNL_CB_OK;	/* a bad message is skipped, not fatal */
	if (pk.payload != NULL)
		nflog_packet(arg, pk.payload, pk.len);
	return MNL_CB_OK;
}

static void
nflog_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *p = arg;
	char buf[MNL_SOCKET_BUFFER_SIZE];
	ssize_t r;
	int i;

	/* a bounded batch per wakeup: the loop has other work */
	for (i = 0; i < 64; i++) {
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r <= 0) {
			if (r == -1 && errno == ENOBUFS)
				log_warnx("nflog: the kernel dropped log "
				    "messages (receive buffer full)");
			return;
		}
		(void)mnl_cb_run(buf, (size_t)r, 0, 0, msg_cb, p);
	}
}

int
proxy_nflog_start(struct proxy *p)
{
	struct nflog *n;
	int g;

	if ((n = calloc(1, sizeof(*n))) == NULL)
		return -1;
	if ((n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL ||
	    mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		log_info("nflog: no netlink socket (%s): no audit rows for "
		    "packets the sandbox rules drop", strerror(errno));
		goto fail;
	}
	n->portid = mnl_socket_get_portid(n->nl);
	/* older kernels want the family bound first; newer ones ignore it */
	(void)nflog_config(n, 0, NFULNL_CFG_CMD_PF_BIND, 0);
	for (g = NFLOG_GROUP_FIRST; g < NFLOG_GROUP_FIRST + NFLOG_GROUPS; g++)
		if (nflog_config(n, (uint16_t)g, NFULNL_CFG_CMD_BIND, 0) == 0)
			break;
	if (g == NFLOG_GROUP_FIRST + NFLOG_GROUPS ||
	    nflog_config(n, (uint16_t)g, 0, 1) == -1) {
		log_warnx("nflog: no free log group in %d-%d (no audit rows for "
		    "packets the sandbox rules drop)", NFLOG_GROUP_FIRST,
		    NFLOG_GROUP_FIRST + NFLOG_GROUPS - 1);
		goto fail;
	}
	n->group = (uint16_t)g;
	if ((n->ev = event_new(p->main_base, mnl_socket_get_fd(n->nl),
	    EV_READ | EV_PERSIST, nflog_read_cb, p)) == NULL ||
	    event_add(n->ev, NULL) == -1)
		goto fail;
	p->nflog = n;
	log_info("nflog: sandbox drops are audited through log group %d", g);
	return 0;
fail:
	if (n->ev != NULL)
		event_free(n->ev);
	if (n->nl != NULL)
		mnl_socket_close(n->nl);
	free(n);
	return -1;
}

int
proxy_nflog_group(const struct proxy *p)
{
	return p->nflog != NULL ? p->nflog->group : 0;
}

void
proxy_nflog_stop(struct proxy *p)
{
	struct nflog *n = p->nflog;

	if (n == NULL)
		return;
	(void)nflog_config(n, n->group, NFULNL_CFG_CMD_UNBIND, 0);
	event_free(n->ev);
	mnl_socket_close(n->nl);
	free(n);
	p->nflog = NULL;
}
