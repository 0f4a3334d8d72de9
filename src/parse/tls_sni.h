/*
 * Pure TLS ClientHello parser: tells whether a tunnel's first bytes are a
 * ClientHello and extracts the SNI host name and the ALPN offer.
 */
#ifndef SG_TLS_SNI_H
#define SG_TLS_SNI_H

#include <stddef.h>
#include <stdint.h>

#define TLS_CH_OK		1	/* complete ClientHello parsed */
#define TLS_CH_NEED_MORE	0
#define TLS_CH_NOT_TLS		(-1)	/* first bytes are not a TLS handshake record */
#define TLS_CH_BAD		(-2)	/* a TLS record, but not a well-formed ClientHello */

#define TLS_CH_MAX_LEN		(64 * 1024)	/* across records; larger is BAD */

struct tls_client_hello {
	int	has_sni;
	char	sni[256];		/* host_name, NUL-terminated; validated: no NUL, <= 255 bytes */
	size_t	sni_len;
	int	has_alpn;
	int	alpn_http11;		/* "http/1.1" offered */
	int	alpn_h2;		/* "h2" offered */
	size_t	consumed;		/* bytes of records that carried the ClientHello */
};

/*
 * Parse buf[0..len) as TLS records carrying a ClientHello, reassembling a
 * handshake message split over several records. Returns TLS_CH_OK,
 * TLS_CH_NEED_MORE, TLS_CH_NOT_TLS or TLS_CH_BAD. Never reads past len.
 */
int	tls_parse_client_hello(const uint8_t *buf, size_t len,
	    struct tls_client_hello *out);
/*
 * Whether buf[0..len) begins as TLS does, whatever the record: a record
 * header of any content type a TLS stack reads (change_cipher_spec,
 * alert, handshake, application_data, heartbeat: 0x14-0x18) with major
 * version 3, or an SSLv2-compatible ClientHello. A record other than a
 * handshake ahead of the ClientHello is skipped by some stacks (OpenSSL
 * skips an empty change_cipher_spec), so such bytes are TLS to a check
 * of the first bytes, never "neither TLS nor HTTP". 1 yes, 0 no, -1 too
 * few bytes to tell.
 */
int	tls_record_like(const uint8_t *buf, size_t len);

#endif
