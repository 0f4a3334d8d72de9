/*
 * sandgate's own nftables table (`inet sandgate`), on the host side, keyed by
 * each sandbox's host veth: its TCP goes to the transparent listener, its DNS
 * to the DNS listener (redirected to the veth's address for a wildcard
 * listener, DNATed to the listener's own address otherwise), nothing else. Rules are built only from names and
 * addresses the launcher generated itself, then run through libnftables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <nftables/libnftables.h>

#include "sandbox/sandbox.h"

/*
 * The base chains dispatch on the input interface through verdict maps, so a
 * sandbox is added and removed as map elements plus its own chains, with no
 * rule handles to track. The raw chain runs before conntrack: a packet whose
 * source is not the sandbox's own address never touches the host's
 * connection tracking (route_localnet on the veth would otherwise let a
 * packet "from 127.0.0.1" pass as the reply of a host loopback connection).
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

/* Added to a table made by a version without it, too. */
static const char nft_base_raw[] =
    "add map inet sandgate raw_map { type ifname : verdict; }\n"
    "add chain inet sandgate raw { type filter hook prerouting "
    "priority raw; policy accept; }\n"
    "add rule inet sandgate raw iifname vmap @raw_map\n";

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

struct nft_buf {
	char	*p;
	size_t	 len, off;
	int	 err;
};

static void __attribute__((format(printf, 2, 3)))
nb_add(struct nft_buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (b->err)
		return;
	va_start(ap, fmt);
	r = vsnprintf(b->p + b->off, b->len - b->off, fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= b->len - b->off)
		b->err = 1;
	else
		b->off += (size_t)r;
}

/* "redirect to :P" for a wildcard listener, "dnat ip to A:P" otherwise. */
static void
nat_to(const struct sandbox_dest *d, char *buf, size_t len)
{
	char a[INET_ADDRSTRLEN];

	if (d->addr.s_addr == htonl(INADDR_ANY) ||
	    inet_ntop(AF_INET, &d->addr, a, sizeof(a)) == NULL)
		snprintf(buf, len, "redirect to :%u", d->port);
	else
		snprintf(buf, len, "dnat ip to %s:%u", a, d->port);
}

/* The address the NATed packets arrive at: the listener's, or the veth's. */
static int
dest_addr(const struct sandbox_net *n, const struct sandbox_dest *d,
    char *buf, size_t len)
{
	const struct in_addr *a = d->addr.s_addr == htonl(INADDR_ANY) ?
	    &n->host_addr : &d->addr;

	return inet_ntop(AF_INET, a, buf, len) == NULL ? -1 : 0;
}

/* Before conntrack: only the sandbox's own address, only IPv4. */
static void
rules_raw(struct nft_buf *b, const char *v, const char *guest)
{
	nb_add(b, "add chain inet sandgate raw_%s\n", v);
	nb_add(b, "add rule inet sandgate raw_%s meta nfproto ipv6 drop\n", v);
	nb_add(b, "add rule inet sandgate raw_%s ip saddr != %s counter drop\n",
	    v, guest);
}

static void
rules_pre(struct nft_buf *b, const char *v, const char *tnat,
    const char *dnat, const char *da, uint16_t dport, uint16_t log_group)
{
	nb_add(b, "add chain inet sandgate pre_%s\n", v);
	nb_add(b, "add rule inet sandgate pre_%s meta nfproto ipv6 drop\n", v);
	nb_add(b, "add rule inet sandgate pre_%s udp dport 53 %s\n", v, dnat);
	nb_add(b, "add rule inet sandgate pre_%s tcp dport 53 %s\n", v, dnat);
	nb_add(b, "add rule inet sandgate pre_%s meta l4proto tcp %s\n", v,
	    tnat);
	/* The DNS listener's own address and port: let in (rules_in), no row. */
	nb_add(b, "add rule inet sandgate pre_%s ip daddr %s udp dport %u "
	    "return\n", v, da, dport);
	/*
	 * Nat prerouting sees the first packet of each flow only: what is left
	 * here (UDP but DNS, ICMP, other protocols) is dropped by the filter
	 * chains; log it once per flow, rate-limited, so the gateway audits it.
	 */
	if (log_group != 0)
		nb_add(b, "add rule inet sandgate pre_%s limit rate 20/second "
		    "burst 40 packets log group %u\n", v, log_group);
}

/*
 * Into the host: the two listeners' exact address and ports (with a
 * loopback listener, 127.0.0.1 reached through route_localnet: every other
 * port of the host's loopback stays out), and replies to what the host
 * opened to the sandbox (ingress). Nothing else.
 */
static void
rules_in(struct nft_buf *b, const char *v, const char *guest,
    const char *ta, uint16_t tport, const char *da, uint16_t dport)
{
	nb_add(b, "add chain inet sandgate in_%s\n", v);
	nb_add(b, "add rule inet sandgate in_%s meta nfproto ipv6 drop\n", v);
	nb_add(b, "add rule inet sandgate in_%s ip saddr != %s drop\n", v,
	    guest);
	nb_add(b, "add rule inet sandgate in_%s ip daddr %s tcp dport %u "
	    "accept\n", v, ta, tport);
	nb_add(b, "add rule inet sandgate in_%s ip daddr %s tcp dport %u "
	    "accept\n", v, da, dport);
	nb_add(b, "add rule inet sandgate in_%s ip daddr %s udp dport %u "
	    "accept\n", v, da, dport);
	/*
	 * An ICMP error is RELATED, in the reply direction, to whatever flow
	 * its inner header names: only flows to this sandbox may have one
	 * from here, never the host's other conversations (loopback ones).
	 */
	nb_add(b, "add rule inet sandgate in_%s ct direction reply "
	    "ct original ip daddr %s accept\n", v, guest);
	nb_add(b, "add rule inet sandgate in_%s drop\n", v);
}

int
sandbox_nft_rules(const struct sandbox_net *n, const struct sandbox_dest *tp,
    const struct sandbox_dest *dns, uint16_t log_group, char *buf, size_t len)
{
	char guest[INET_ADDRSTRLEN], ta[INET_ADDRSTRLEN], da[INET_ADDRSTRLEN];
	char tnat[64], dnat[64];
	const char *v = n->veth_host;
	struct nft_buf b = { buf, len, 0, 0 };

	if (!valid_ifname(v) || tp->port == 0 || dns->port == 0 ||
	    inet_ntop(AF_INET, &n->guest_addr, guest, sizeof(guest)) == NULL ||
	    dest_addr(n, tp, ta, sizeof(ta)) == -1 ||
	    dest_addr(n, dns, da, sizeof(da)) == -1)
		return -1;
	nat_to(tp, tnat, sizeof(tnat));
	nat_to(dns, dnat, sizeof(dnat));
	rules_raw(&b, v, guest);
	rules_pre(&b, v, tnat, dnat, da, dns->port, log_group);
	rules_in(&b, v, guest, ta, tp->port, da, dns->port);
	nb_add(&b, "add element inet sandgate raw_map { \"%s\" : jump raw_%s }\n",
	    v, v);
	nb_add(&b, "add element inet sandgate pre_map { \"%s\" : jump pre_%s }\n",
	    v, v);
	nb_add(&b, "add element inet sandgate in_map { \"%s\" : jump in_%s }\n",
	    v, v);
	nb_add(&b, "add element inet sandgate sandboxes { \"%s\" }\n", v);
	return b.err ? -1 : (int)b.off;
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
	if (nft_run("list table inet sandgate\n") == -1 &&
	    nft_run(nft_base) == -1)
		return -1;
	if (nft_run("list map inet sandgate raw_map\n") == -1 &&
	    nft_run(nft_base_raw) == -1)
		return -1;
	return 0;
}

int
sandbox_nft_add(const struct sandbox_net *n, const struct sandbox_dest *tp,
    const struct sandbox_dest *dns, uint16_t log_group, const char **errstr)
{
	char buf[4096];

	if (sandbox_nft_rules(n, tp, dns, log_group, buf,
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
	snprintf(buf, sizeof(buf), "delete element inet sandgate raw_map "
	    "{ \"%s\" }\n", v);
	(void)nft_run(buf);
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
	snprintf(buf, sizeof(buf), "flush chain inet sandgate raw_%s\n"
	    "delete chain inet sandgate raw_%s\n", v, v);
	(void)nft_run(buf);
}
