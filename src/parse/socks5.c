/*
 * SOCKS5 wire formats (RFC 1928, RFC 1929) parsed from bytes: the greeting,
 * the username/password sub-negotiation and the request.
 */
#include <string.h>
#include <sys/socket.h>

#include "parse/socks5.h"

int
socks5_parse_greeting(const uint8_t *buf, size_t len,
    struct socks5_greeting *out)
{
	size_t i, n;

	memset(out, 0, sizeof(*out));
	if (len < 1)
		return SOCKS5_NEED_MORE;
	if (buf[0] != 5)
		return SOCKS5_ERR;
	if (len < 2)
		return SOCKS5_NEED_MORE;
	n = buf[1];
	if (n == 0)
		return SOCKS5_ERR;
	if (len < 2 + n)
		return SOCKS5_NEED_MORE;
	for (i = 0; i < n; i++) {
		if (buf[2 + i] == SOCKS5_METHOD_NONE)
			out->no_auth = 1;
		else if (buf[2 + i] == SOCKS5_METHOD_USERPASS)
			out->userpass = 1;
	}
	return (int)(2 + n);
}

int
socks5_parse_auth(const uint8_t *buf, size_t len, struct socks5_auth *out)
{
	size_t ulen, plen;

	memset(out, 0, sizeof(*out));
	if (len < 1)
		return SOCKS5_NEED_MORE;
	if (buf[0] != 1)
		return SOCKS5_ERR;
	if (len < 2)
		return SOCKS5_NEED_MORE;
	ulen = buf[1];
	if (ulen == 0)
		return SOCKS5_ERR;
	if (len < 2 + ulen + 1)
		return SOCKS5_NEED_MORE;
	plen = buf[2 + ulen];
	if (len < 3 + ulen + plen)
		return SOCKS5_NEED_MORE;
	memcpy(out->user, buf + 2, ulen);
	out->user[ulen] = '\0';
	out->ulen = ulen;
	memcpy(out->pass, buf + 3 + ulen, plen);
	out->pass[plen] = '\0';
	out->plen = plen;
	return (int)(3 + ulen + plen);
}

int
socks5_parse_request(const uint8_t *buf, size_t len, struct socks5_request *out)
{
	size_t need, alen;

	memset(out, 0, sizeof(*out));
	if (len < 1)
		return SOCKS5_NEED_MORE;
	if (buf[0] != 5)
		return SOCKS5_ERR;
	if (len < 4)
		return SOCKS5_NEED_MORE;
	if (buf[2] != 0)
		return SOCKS5_ERR;
	out->cmd = buf[1];
	out->atyp = buf[3];
	switch (buf[3]) {
	case SOCKS5_ATYP_IPV4:
		alen = 4;
		need = 4 + 4 + 2;
		break;
	case SOCKS5_ATYP_IPV6:
		alen = 16;
		need = 4 + 16 + 2;
		break;
	case SOCKS5_ATYP_DOMAIN:
		if (len < 5)
			return SOCKS5_NEED_MORE;
		alen = buf[4];
		if (alen == 0)
			return SOCKS5_ERR;
		need = 5 + alen + 2;
		break;
	default:
		return SOCKS5_ERR_ATYP;
	}
	if (len < need)
		return SOCKS5_NEED_MORE;
	if (buf[3] == SOCKS5_ATYP_DOMAIN) {
		memcpy(out->host, buf + 5, alen);
		out->host[alen] = '\0';
		out->hostlen = alen;
	} else {
		const uint8_t *a = buf + 4;
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0,
		    0, 0xff, 0xff };

		memset(&out->addr, 0, sizeof(out->addr));
		if (alen == 4) {
			out->addr.family = AF_INET;
			memcpy(out->addr.a, a, 4);
		} else if (memcmp(a, mapped, 12) == 0) {
			/* IPv4-mapped IPv6 is the IPv4 address everywhere. */
			out->addr.family = AF_INET;
			memcpy(out->addr.a, a + 12, 4);
		} else {
			out->addr.family = AF_INET6;
			memcpy(out->addr.a, a, 16);
		}
	}
	out->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
	return (int)need;
}

void
socks5_reply(uint8_t rep, uint8_t out[10])
{
	memset(out, 0, 10);
	out[0] = 5;
	out[1] = rep;
	out[3] = SOCKS5_ATYP_IPV4;
}
