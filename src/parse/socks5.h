/*
 * Pure SOCKS5 parsers (RFC 1928 greeting and request, RFC 1929
 * username/password): functions over bytes, no I/O, no heap.
 */
#ifndef SG_SOCKS5_H
#define SG_SOCKS5_H

#include <stddef.h>
#include <stdint.h>

#include "core/netaddr.h"

#define SOCKS5_NEED_MORE	0
#define SOCKS5_ERR		(-1)	/* not SOCKS5, or malformed */
#define SOCKS5_ERR_ATYP		(-2)	/* unknown address type: reply 0x08 */

#define SOCKS5_CMD_CONNECT	1
#define SOCKS5_CMD_BIND		2
#define SOCKS5_CMD_UDP		3

#define SOCKS5_ATYP_IPV4	1
#define SOCKS5_ATYP_DOMAIN	3
#define SOCKS5_ATYP_IPV6	4

/* Reply codes. */
#define SOCKS5_REP_OK		0x00
#define SOCKS5_REP_FAIL		0x01
#define SOCKS5_REP_NOT_ALLOWED	0x02
#define SOCKS5_REP_NET_UNREACH	0x03
#define SOCKS5_REP_HOST_UNREACH	0x04
#define SOCKS5_REP_REFUSED	0x05
#define SOCKS5_REP_TTL		0x06
#define SOCKS5_REP_CMD		0x07
#define SOCKS5_REP_ATYP		0x08

#define SOCKS5_METHOD_NONE	0x00
#define SOCKS5_METHOD_USERPASS	0x02
#define SOCKS5_METHOD_REJECT	0xff

struct socks5_greeting {
	int	no_auth;	/* method 0x00 offered */
	int	userpass;	/* method 0x02 offered */
};

struct socks5_auth {
	char	user[256];	/* NUL-terminated; ulen bytes */
	size_t	ulen;
	char	pass[256];
	size_t	plen;
};

struct socks5_request {
	uint8_t		cmd;
	uint8_t		atyp;
	char		host[256];	/* domain as sent (ATYP 3), NUL-terminated */
	size_t		hostlen;
	struct netaddr	addr;		/* ATYP 1 and 4 */
	uint16_t	port;
};

/* Each returns bytes consumed (> 0), SOCKS5_NEED_MORE, or an error. */
int	socks5_parse_greeting(const uint8_t *buf, size_t len,
	    struct socks5_greeting *out);
int	socks5_parse_auth(const uint8_t *buf, size_t len, struct socks5_auth *out);
int	socks5_parse_request(const uint8_t *buf, size_t len,
	    struct socks5_request *out);
/* A 10-byte reply with BND.ADDR 0.0.0.0:0. */
void	socks5_reply(uint8_t rep, uint8_t out[10]);

#endif
