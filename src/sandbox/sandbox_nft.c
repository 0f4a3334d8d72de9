/*
 * sandgate's own nftables table (`inet sandgate`), on the host side, keyed by
 * each sandbox's host veth: its TCP goes to the transparent listener, its DNS
 * to the DNS listener, nothing else. Rules are built only from names and
 * addresses the launcher generated itself, then run through libnftables.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <nftables/libnftables.h>

#include "sandbox/sandbox.h"

/*
 * The base chains dispatch on the input interface through verdict maps, so a
 * sandbox is added and removed as map elements plus its own chains, with no
 * rule handles to track.
 */
static const char nft_base[] =
    "add table inet sandgate\n"
    "add map inet sandgate pre_map { type ifname : verdict; }\n"
    "add map inet sandgate in_map { type ifname : verdict; }\n"
    "add set inet sandgate sandboxes { type ifname; }\n"
    "add chain inet sandgate prerouting { type nat hook prerouting "
    "priority dstnat; policy accept; }\n"
    "add chain inet sandgate input { type filter hook input "
    "priority filter; policy accept; }\n"
    "add chain inet sandgate forward { type filter hook forward "
    "priority filter; policy accept; }\n"
    "add rule inet sandgate prerouting iifname vmap @pre_map\n"
    "add rule inet sandgate input iifname vmap @in_map\n"
    /* a sandbox's veth: never forwarded anywhere, in either direction */
    "add rule inet sandgate forward iifname @sandboxes drop\n"
    "add rule inet sandgate forward oifname @sandboxes drop\n";

static int
valid_ifname(const char *s)
{
	size_t i, n = strlen(s);

	if (n < 3 || n >= SANDBOX_IFNAME_MAX || strncmp(s, "sg", 2) != 0)
		return 0;
	for (i = 2; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int
sandbox_nft_rules(const struct sandbox_net *n, uint16_t tport, uint16_t dport,
    uint16_t log_group, char *buf, size_t len)
{
	char host[INET_ADDRSTRLEN], logrule[160];
	const char *v = n->veth_host;
	int r;

	if (!valid_ifname(v) || tport == 0 || dport == 0 ||
	    inet_ntop(AF_INET, &n->host_addr, host, sizeof(host)) == NULL)
		return -1;
	/*
	 * Nat prerouting sees the first packet of each flow only: what is left
	 * here (UDP but DNS, ICMP, other protocols) is dropped by the filter
	 * chains; log it once per flow, rate-limited, so the gateway audits it.
	 */
	logrule[0] = '\0';
	if (log_group != 0)
		snprintf(logrule, sizeof(logrule), "add rule inet sandgate pre_%s "
		    "limit rate 20/second burst 40 packets log group %u\n", v,
		    log_group);
	r = snprintf(buf, len,
	    "add chain inet sandgate pre_%s\n"
	    "add rule inet sandgate pre_%s meta nfproto ipv6 drop\n"
	    "add rule inet sandgate pre_%s udp dport 53 redirect to :%u\n"
	    "add rule inet sandgate pre_%s tcp dport 53 redirect to :%u\n"
	    "add rule inet sandgate pre_%s meta l4proto tcp redirect to :%u\n"
	    "%s"
	    "add chain inet sandgate in_%s\n"
	    "add rule inet sandgate in_%s meta nfproto ipv6 drop\n"
	    "add rule inet sandgate in_%s ip daddr %s tcp dport { %u, %u } accept\n"
	    "add rule inet sandgate in_%s ip daddr %s udp dport %u accept\n"
	    "add rule inet sandgate in_%s ct direction reply accept\n"
	    "add rule inet sandgate in_%s drop\n"
	    "add element inet sandgate pre_map { \"%s\" : jump pre_%s }\n"
	    "add element inet sandgate in_map { \"%s\" : jump in_%s }\n"
	    "add element inet sandgate sandboxes { \"%s\" }\n",
	    v, v, v, dport, v, dport, v, tport, logrule,
	    v, v, v, host, tport, dport, v, host, dport, v, v,
	    v, v, v, v, v);
	if (r < 0 || (size_t)r >= len)
		return -1;
	return r;
}

static int
nft_run(const char *cmds)
{
	struct nft_ctx *nft;
	int r;

	if ((nft = nft_ctx_new(NFT_CTX_DEFAULT)) == NULL)
		return -1;
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	r = nft_run_cmd_from_buffer(nft, cmds);
	nft_ctx_free(nft);
	return r == 0 ? 0 : -1;
}

/* The table and its base chains, made once; the caller holds the lock. */
static int
nft_ensure_base(void)
{
	if (nft_run("list table inet sandgate\n") == 0)
		return 0;
	return nft_run(nft_base);
}

int
sandbox_nft_add(const struct sandbox_net *n, uint16_t tport, uint16_t dport,
    uint16_t log_group, const char **errstr)
{
	char buf[4096];

	if (sandbox_nft_rules(n, tport, dport, log_group, buf,
	    sizeof(buf)) == -1) {
		*errstr = "bad nftables parameters";
		return -1;
	}
	if (nft_ensure_base() == -1) {
		*errstr = "cannot create the nftables table inet sandgate";
		return -1;
	}
	/* leftovers of an earlier sandbox on the same veth name go first */
	sandbox_nft_del(n);
	if (nft_run(buf) == -1) {
		*errstr = "cannot add the sandbox's nftables rules";
		return -1;
	}
	return 0;
}

void
sandbox_nft_del(const struct sandbox_net *n)
{
	char buf[1024];
	const char *v = n->veth_host;

	if (!valid_ifname(v))
		return;
	/* one command per step: a missing piece must not keep the others */
	snprintf(buf, sizeof(buf), "delete element inet sandgate pre_map "
	    "{ \"%s\" }\n", v);
	(void)nft_run(buf);
	snprintf(buf, sizeof(buf), "delete element inet sandgate in_map "
	    "{ \"%s\" }\n", v);
	(void)nft_run(buf);
	snprintf(buf, sizeof(buf), "delete element inet sandgate sandboxes "
	    "{ \"%s\" }\n", v);
	(void)nft_run(buf);
	snprintf(buf, sizeof(buf), "flush chain inet sandgate pre_%s\n"
	    "delete chain inet sandgate pre_%s\n", v, v);
	(void)nft_run(buf);
	snprintf(buf, sizeof(buf), "flush chain inet sandgate in_%s\n"
	    "delete chain inet sandgate in_%s\n", v, v);
	(void)nft_run(buf);
}
