/*
 * libFuzzer target for the one decision (core/decide.c): hostile host
 * names, methods, paths, tunnel Host values, query types and ingress
 * tokens, on every listener, against a fixed policy. Oracles that abort:
 *
 * - the same question gives the same answer (no state, nothing kept);
 * - allowed means reason none, allow set, a rule named, a valid target;
 *   denied means a reason, allow clear, a rule named;
 * - the row's host is printable text without spaces or quotes, whatever
 *   came in (escaped when invalid);
 * - no identity, the audit store refusing rows, or a placeholder in the
 *   name is never allowed; DNS never allows an address written as a name,
 *   nor a class other than IN; a connection never port 0;
 * - a tunnel request is allowed only for the tunnel's own host and port,
 *   and then only where the same request decided by name is allowed;
 * - an intercepted CONNECT or SOCKS5 tunnel is never allowed while the
 *   keeper is away;
 * - an internal address among the given ones is never allowed (the policy
 *   has no allow_private).
 *
 * Input: byte 0 the listener, byte 1 flags, byte 2-3 the DNS type, then
 * NUL-separated fields: host, method, path, tunnel Host, token.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/decide.h"
#include "core/netaddr.h"
#include "core/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char policy_text[] =
    "sandboxes:\n"
    "  - id: box\n"
    "    policy: p\n"
    "    source: [127.0.0.1/32]\n"
    "  - id: web\n"
    "    policy: p\n"
    "    ingress: { address: 127.0.0.1, ports: [8000], token_sha256: "
    "\"65dcf16ea3dfa49069628089eb4a75483070f5584b2a21ee64912b5f621f12da\" }\n"
    "policies:\n"
    "  - name: p\n"
    "    credentials: [gh]\n"
    "    allow:\n"
    "      - host: \"*.example.com\"\n"
    "      - host: seen.example.org\n"
    "        tls: intercept\n"
    "      - host: paths.example.org\n"
    "        tls: intercept\n"
    "        methods: [GET, POST]\n"
    "        paths: [\"/v1/*\", \"/files/**\"]\n"
    "      - cidr: 0.0.0.0/0\n"
    "    deny:\n"
    "      - host: bad.example.com\n"
    "credentials:\n"
    "  - name: gh\n"
    "    secret: gh-token\n"
    "    hosts: [api.example.com]\n";

static struct policy *pol;

static void
fuzz_init(void)
{
	char path[64];
	char *paths[1];
	struct diag d;
	int fd;

	if (pol != NULL)
		return;
	if ((fd = memfd_create("fuzz_decide.yaml", MFD_CLOEXEC)) == -1 ||
	    write(fd, policy_text, sizeof(policy_text) - 1) !=
	    (ssize_t)(sizeof(policy_text) - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	paths[0] = path;
	diag_init(&d);
	if ((pol = policy_load_paths(paths, 1, &d)) == NULL) {
		diag_print(&d, stderr);
		abort();
	}
	diag_free(&d);
	close(fd);
}

static int
find_ph(void *arg, const char *host, char *cred, size_t len)
{
	(void)arg;
	if (strstr(host, "sgph") == NULL)
		return 0;
	snprintf(cred, len, "gh");
	return 1;
}

/* The next NUL-terminated field of data, or NULL when none is left. */
static const char *
field(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *nul;

	if (s >= end)
		return NULL;
	nul = memchr(s, '\0', (size_t)(end - s));
	*len = nul != NULL ? (size_t)(nul - s) : (size_t)(end - s);
	*p = s + *len + 1;
	return s;
}

static void
check_shape(const struct decision *d)
{
	const unsigned char *h = (const unsigned char *)d->target.host;
	size_t i;

	if (d->v.rule[0] == '\0' || memchr(d->v.rule, '\0',
	    sizeof(d->v.rule)) == NULL)
		abort();
	if (d->reason == REASON_NONE) {
		if (!d->v.allow || (d->verdict != VERDICT_ALLOW &&
		    d->verdict != VERDICT_REPORT) || !d->target_ok)
			abort();
	} else if (d->v.allow || d->verdict == VERDICT_ALLOW ||
	    d->verdict == VERDICT_NONE)
		abort();
	if (memchr(d->target.host, '\0', sizeof(d->target.host)) == NULL)
		abort();
	for (i = 0; h[i] != '\0'; i++)
		if (h[i] <= 0x20 || h[i] >= 0x7f || h[i] == '"')
			abort();
}

/*
 * The identity stage: what is presented decides, and names exactly the
 * sandbox it claims; a malformed presentation never identifies; without
 * one, 127.0.0.1 is box's source.
 */
static void
check_identify(const char *id, size_t idlen, const char *tok, size_t toklen,
    uint8_t flags)
{
	struct policy_identity out;
	struct decide_cred c;
	struct netaddr src;

	if (netaddr_parse("127.0.0.1", 9, &src) != 0)
		abort();
	memset(&c, 0, sizeof(c));
	if (id != NULL && (flags & 0x01) == 0) {
		c.id = id;
		c.idlen = idlen;
		c.token = tok != NULL ? tok : "";
		c.tokenlen = tok != NULL ? toklen : 0;
	}
	memset(&out, 0, sizeof(out));
	if (decide_identify(pol, &src, id != NULL ? &c : NULL, &out) ==
	    REASON_NONE) {
		if (id == NULL) {
			if (strcmp(out.sandbox, "box") != 0)
				abort();
		} else if (c.id == NULL || strlen(out.sandbox) != idlen ||
		    memcmp(out.sandbox, id, idlen) != 0)
			abort();
	}
}

/* A tunnel's ClientHello passes only when its SNI normalises to the tunnel's name. */
static void
check_sni(const char *host, size_t hlen, const char *sni, size_t slen)
{
	struct policy_target tun, t;

	if (sni == NULL || policy_target_init(&tun, host, hlen, 443) == -1)
		return;
	if (decide_sni(&tun, slen > 0, sni, slen) != REASON_NONE)
		return;
	if (tun.is_ip) {
		if (slen > 0)
			abort();
		return;
	}
	if (policy_target_init(&t, sni, slen, 443) == -1 || t.is_ip ||
	    strcmp(t.host, tun.host) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[4096];
	const char *p, *end, *host, *method, *path, *thost, *token;
	size_t hlen = 0, mlen = 0, plen = 0, tlen = 0, klen = 0;
	char m[32], pa[2048];
	struct decide_authority ta;
	struct policy_identity id;
	struct policy_target tun;
	struct decide_env env;
	struct decide_q q;
	struct decision d, again, byname;
	struct netaddr addrs[2];
	uint8_t flags;
	int internal;

	fuzz_init();
	if (size < 4 || size > sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	p = buf + 4;
	end = buf + size;
	flags = data[1];
	host = field(&p, end, &hlen);
	method = field(&p, end, &mlen);
	path = field(&p, end, &plen);
	thost = field(&p, end, &tlen);
	token = field(&p, end, &klen);
	if (host == NULL)
		return 0;

	memset(&env, 0, sizeof(env));
	env.pol = pol;
	env.audit_refuses = (flags & 0x01) != 0;
	env.keeper_up = (flags & 0x02) == 0;
	env.cred_in_name = find_ph;
	memset(&q, 0, sizeof(q));
	q.listener = (enum decide_listener)(data[0] % 8);
	if ((flags & 0x04) == 0) {
		if (policy_identity_by_id(pol, "box", &id) != 0)
			abort();
		q.id = &id;
	}
	q.host = host;
	q.hostlen = hlen;
	q.port = (flags & 0x08) ? 0 : (flags & 0x10) ? 8000 : 443;
	if (method != NULL && mlen > 0 && mlen < sizeof(m) && path != NULL &&
	    plen < sizeof(pa)) {
		memcpy(m, method, mlen);
		m[mlen] = '\0';
		memcpy(pa, path, plen);
		pa[plen] = '\0';
		q.method = m;
		q.path = pa;
	}
	q.qtype = (uint16_t)(data[2] << 8 | data[3]);
	q.qclass = (flags & 0x20) ? 3 : 1;
	internal = 0;
	if (flags & 0x40) {
		/* Addresses now: one public, one internal when flag 0x80. */
		if (netaddr_parse("151.101.0.223", 13, &addrs[0]) != 0 ||
		    netaddr_parse("169.254.169.254", 15, &addrs[1]) != 0)
			abort();
		q.addrs = addrs;
		q.n_addrs = (flags & 0x80) ? 2 : 1;
		internal = (flags & 0x80) != 0;
	}
	if (q.listener == DECIDE_INGRESS) {
		q.ingress_id = "web";
		q.token = token;
		q.token_len = klen;
	}
	if (q.listener == DECIDE_TUNNEL) {
		/* The tunnel's target is the host, once valid; Host is thost. */
		if (policy_target_init(&tun, host, hlen, q.port ? q.port :
		    443) == -1)
			return 0;
		q.host = NULL;
		q.target = &tun;
		q.tunnel_rule = "p:allow[0]";
		if (thost != NULL) {
			memset(&ta, 0, sizeof(ta));
			ta.host = tlen > 0 ? thost : NULL;
			ta.len = tlen;
			ta.port = (flags & 0x80) ? 443 : 0;
			q.tunnel_host = &ta;
		}
	}

	check_identify(method, mlen, path, plen, flags);
	check_sni(host, hlen, thost, tlen);
	(void)decide(&env, &q, &d);
	check_shape(&d);
	(void)decide(&env, &q, &again);
	if (memcmp(&d, &again, sizeof(d)) != 0)
		abort();
	if (d.reason != REASON_NONE)
		return 0;

	/* Allowed: none of what must deny was there. */
	if (env.audit_refuses)
		abort();
	if (q.listener == DECIDE_INGRESS) {
		/* The sandbox reached is the identity, and it needs its token. */
		if (!d.has_ident || token == NULL || klen != 5 ||
		    memcmp(token, "tok-1", 5) != 0)
			abort();
		return 0;
	}
	if (q.id == NULL)
		abort();
	if (strstr(d.target.host, "sgph") != NULL)
		abort();
	if (q.listener == DECIDE_DNS && (d.target.is_ip || q.qclass != 1))
		abort();
	if (q.listener != DECIDE_DNS && d.target.port == 0)
		abort();
	if (!env.keeper_up && d.intercept && (q.listener == DECIDE_CONNECT ||
	    q.listener == DECIDE_SOCKS5))
		abort();
	if (internal)
		abort();
	if (q.listener == DECIDE_TUNNEL) {
		struct policy_target named;

		if (q.tunnel_host == NULL || ta.host == NULL ||
		    policy_target_init(&named, ta.host, ta.len, ta.port ?
		    ta.port : tun.port) == -1 || named.port != tun.port ||
		    strcmp(named.host, tun.host) != 0)
			abort();
		/* The same request, decided by name on the explicit proxy. */
		q.listener = DECIDE_HTTP;
		q.target = NULL;
		q.host = tun.host;
		q.hostlen = strlen(tun.host);
		q.port = tun.port;
		q.tunnel_host = NULL;
		if (decide(&env, &q, &byname) != REASON_NONE)
			abort();
	}
	return 0;
}
