/*
 * The SOCKS5 listener's connections (RFC 1928/1929): method negotiation,
 * username/password identity, the CONNECT request decided by the same
 * policy as the HTTP proxy, then the same first-bytes checks and relay as a
 * CONNECT tunnel.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/decide.h"
#include "core/log.h"
#include "core/reason.h"
#include "proxy/front.h"
#include "parse/socks5.h"

static void
socks_send(struct exchange *s, uint8_t rep)
{
	uint8_t r[10];

	socks5_reply(rep, r);
	bufferevent_write(s->c->cbev, r, sizeof(r));
}

/* The SOCKS answer to a refusal (already logged), then close. */
void
socks_deny(struct exchange *s, enum sg_reason reason)
{
	if (s->state == S_SOCKS_REQUEST || s->state == S_RESOLVING ||
	    s->state == S_CONNECTING)
		socks_send(s, reason_info(reason)->socks_rep);
	exchange_finish(s, reason_close(reason));
}

static void
socks_resolved(struct exchange *s)
{
	socks_send(s, SOCKS5_REP_OK);
	s->c->tunnel_open = 1;
	tunnel_start(s);
}

/*
 * A SOCKS5 refusal before a destination is decided (the reply is written
 * already): its row as any request's (docs/audit.md) -- the sandbox the
 * source address identifies, unless the client tried to log in (ident 0),
 * the HTTP status of the same refusal, the rule no rule made it under --
 * and the close.
 */
static void
socks_refuse(struct exchange *s, int status, enum sg_reason reason, int ident)
{
	struct policy_identity id;

	if (ident && !s->has_ident && !s->c->socks_auth_ok &&
	    decide_identify(s->pol, &s->c->client_addr, NULL, &id) ==
	    REASON_NONE) {
		s->ident = id;
		s->has_ident = 1;
	}
	if (!ident)
		s->has_ident = 0;
	if (s->verdict.rule[0] == '\0')
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "%s",
		    s->has_ident ? "default-deny" : "no-identity");
	exchange_log(s, VERDICT_DENY, status, reason);
	exchange_finish(s, CLOSE_REFUSED);
}

static int
socks_greeting(struct exchange *s, const uint8_t *p, size_t len)
{
	struct socks5_greeting g;
	uint8_t reply[2] = { 5, SOCKS5_METHOD_REJECT };
	int n;

	if ((n = socks5_parse_greeting(p, len, &g)) <= 0) {
		if (n < 0) {
			/* Not SOCKS5 (or no methods): "no acceptable methods", close. */
			bufferevent_write(s->c->cbev, reply, sizeof(reply));
			socks_refuse(s, 400, REASON_BAD_REQUEST, 1);
		}
		return n < 0 ? -1 : 0;
	}
	/*
	 * Credentials offered win: a present identity decides (docs/policy.md).
	 */
	if (g.userpass) {
		reply[1] = SOCKS5_METHOD_USERPASS;
		s->state = S_SOCKS_AUTH;
	} else if (g.no_auth) {
		reply[1] = SOCKS5_METHOD_NONE;
		s->state = S_SOCKS_REQUEST;
	}
	bufferevent_write(s->c->cbev, reply, sizeof(reply));
	if (reply[1] == SOCKS5_METHOD_REJECT) {
		/* No method it takes: a login that cannot be made, HTTP's 407. */
		socks_refuse(s, 407, REASON_AUTH_FAILED, 0);
		return -1;
	}
	return n;
}

static int
socks_auth(struct exchange *s, const uint8_t *p, size_t len)
{
	struct socks5_auth a;
	struct decide_cred c;
	uint8_t reply[2] = { 1, 0 };
	int n;

	/* An empty username (RFC 1929 wants 1-255): a failed login all the same. */
	if (len >= 3 && p[0] == 1 && p[1] == 0 && len >= 3 + (size_t)p[2]) {
		reply[1] = 1;
		bufferevent_write(s->c->cbev, reply, sizeof(reply));
		s->has_ident = 0;
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "no-identity");
		exchange_log(s, VERDICT_DENY, 407, REASON_AUTH_FAILED);
		exchange_finish(s, CLOSE_REFUSED);
		return -1;
	}
	if ((n = socks5_parse_auth(p, len, &a)) <= 0) {
		if (n < 0) {
			/* Not RFC 1929 (its version is 1): a failed login. */
			reply[1] = 1;
			bufferevent_write(s->c->cbev, reply, sizeof(reply));
			socks_refuse(s, 407, REASON_AUTH_FAILED, 0);
		}
		return n < 0 ? -1 : n;
	}
	c.id = a.user;
	c.idlen = a.ulen;
	c.token = a.pass;
	c.tokenlen = a.plen;
	if (decide_identify(s->pol, &s->c->client_addr, &c, &s->ident) !=
	    REASON_NONE) {
		OPENSSL_cleanse(&a, sizeof(a));
		reply[1] = 1;
		bufferevent_write(s->c->cbev, reply, sizeof(reply));
		s->has_ident = 0;
		/* The row of HTTP's 407 for the same failure (docs/audit.md). */
		snprintf(s->verdict.rule, sizeof(s->verdict.rule), "no-identity");
		exchange_log(s, VERDICT_DENY, 407, REASON_AUTH_FAILED);
		exchange_finish(s, CLOSE_REFUSED);
		return -1;
	}
	OPENSSL_cleanse(&a, sizeof(a));
	s->has_ident = 1;
	s->c->socks_auth_ok = 1;
	bufferevent_write(s->c->cbev, reply, sizeof(reply));
	s->state = S_SOCKS_REQUEST;
	return n;
}

static int
socks_request(struct exchange *s, const uint8_t *p, size_t len)
{
	struct socks5_request r;
	struct decide_in in = { 0 };
	enum sg_reason why;
	char detail[512], ip[NETADDR_STRLEN];
	int n;

	n = socks5_parse_request(p, len, &r);
	if (n == SOCKS5_NEED_MORE)
		return 0;
	if (n == SOCKS5_ERR_ATYP) {
		socks_send(s, SOCKS5_REP_ATYP);
		socks_refuse(s, 400, REASON_BAD_REQUEST, 1);
		return -1;
	}
	if (n < 0 && len >= 7 && p[0] == 5 && p[2] == 0 &&
	    p[3] == SOCKS5_ATYP_DOMAIN && p[4] == 0) {
		/* An empty name: an invalid destination, 0x02 with its row. */
		conn_head_done(s);
		exchange_note_target(s, "", 0, (uint16_t)(p[5] << 8 | p[6]));
		socks_send(s, SOCKS5_REP_NOT_ALLOWED);
		socks_refuse(s, 403, REASON_INVALID_HOST, 1);
		return -1;
	}
	if (n < 0) {
		/* Not a request (version, reserved byte): general failure. */
		socks_send(s, SOCKS5_REP_FAIL);
		socks_refuse(s, 400, REASON_BAD_REQUEST, 1);
		return -1;
	}
	conn_head_done(s);
	if (r.cmd != SOCKS5_CMD_CONNECT) {
		socks_send(s, SOCKS5_REP_CMD);
		s->row_method = r.cmd == SOCKS5_CMD_BIND ? "BIND" :
		    r.cmd == SOCKS5_CMD_UDP ? "UDP-ASSOCIATE" : NULL;
		socks_refuse(s, 405, REASON_METHOD_NOT_SUPPORTED, 1);
		return -1;
	}
	if (!s->c->socks_auth_ok) {
		if (decide_identify(s->pol, &s->c->client_addr, NULL,
		    &s->ident) != REASON_NONE) {
			exchange_deny(s, 407, REASON_NO_IDENTITY, NULL);
			return -1;
		}
		s->has_ident = 1;
	}
	if (conn_fair_admit(s) == -1)
		return -1;
	if (r.atyp == SOCKS5_ATYP_DOMAIN) {
		in.host = r.host;
		in.hostlen = r.hostlen;
	} else {
		in.host = netaddr_ntop(&r.addr, ip, sizeof(ip));
		in.hostlen = strlen(ip);
	}
	in.port = r.port;
	if ((why = proxy_decide(s, &in)) != REASON_NONE) {
		/* Asked: the request stays in the input, read again once answered. */
		if (s->approval_held) {
			/* Held: a reset of its client gives the share back. */
			client_watch(s);
			return -1;
		}
		snprintf(detail, sizeof(detail), "%s:%u", s->target.host,
		    s->target.port);
		exchange_deny(s, 0, why, detail);
		return -1;
	}
	evbuffer_drain(bufferevent_get_input(s->c->cbev), (size_t)n);
	upstream_resolve(s, socks_resolved);
	return -1;	/* the exchange moved on: stop parsing here */
}

void
socks_read(struct exchange *s)
{
	struct evbuffer *in = bufferevent_get_input(s->c->cbev);
	const uint8_t *p;
	size_t len;
	int n;

	for (;;) {
		if ((len = evbuffer_get_length(in)) == 0)
			return;
		/* A greeting, auth or request is at most 3 + 255 + 255 bytes. */
		if (len > 600)
			len = 600;
		if ((p = evbuffer_pullup(in, (ev_ssize_t)len)) == NULL) {
			exchange_close(s, CLOSE_NO_MEMORY);
			return;
		}
		switch (s->state) {
		case S_SOCKS_GREETING:
			n = socks_greeting(s, p, len);
			break;
		case S_SOCKS_AUTH:
			n = socks_auth(s, p, len);
			break;
		case S_SOCKS_REQUEST:
			socks_request(s, p, len);
			return;
		default:
			return;
		}
		if (n <= 0)
			return;
		evbuffer_drain(in, (size_t)n);
	}
}
