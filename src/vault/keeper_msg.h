/*
 * The protocol between the network process and the key keeper
 * (docs/architecture.md "Processes"): one unix SOCK_SEQPACKET socketpair,
 * every message exactly sizeof(struct keeper_msg) bytes, one request and
 * its answer at a time. keeper_msg_parse() is the only reader of a
 * received message on either side: pure, no I/O, fuzzed
 * (tests/fuzz/fuzz_keeper_msg.c).
 */
#ifndef SG_KEEPER_MSG_H
#define SG_KEEPER_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "vault/vault.h"

#define KEEPER_MAGIC		0x53474b31u	/* "SGK1" */
#define KEEPER_NAME_MAX		253		/* a leaf's DNS name or IP text */
#define KEEPER_PUBKEY_MAX	512		/* the leaf key, SubjectPublicKeyInfo DER */
#define KEEPER_CERT_MAX		8192		/* a certificate, DER */
#define KEEPER_SIGMSG_MAX	1024		/* what the audit key signs */
#define KEEPER_ERROR_MAX	511
#define KEEPER_AUDIT_PUB	32
#define KEEPER_AUDIT_SIG	64
#define KEEPER_BODY_MAX		(VAULT_VALUE_MAX + 256)

enum keeper_type {
	/* network -> keeper: the leaf public key; answer: audit pub, CA cert */
	KEEPER_HELLO = 1,
	/* is_ip (1 byte) + name; answer: not_after (8, big-endian) + leaf DER */
	KEEPER_SIGN_LEAF,
	/* a message; answer: its Ed25519 signature by the audit key */
	KEEPER_SIGN_AUDIT,
	/* a secret's name; answer: its value, when a loaded policy binds it */
	KEEPER_SECRET,
	/* empty; answer: 8 bytes that change whenever vault.db changes */
	KEEPER_VAULT_STAMP,
	/* empty: read the policies again; answer: the number of bound secrets (4) */
	KEEPER_POLICY,
	/* keeper -> network, unasked: why it cannot serve; then it exits */
	KEEPER_ERROR,
	/*
	 * name length (1) + name + a refresh token: store it as the
	 * refresh_token of that entry, only when a loaded policy's oauth2
	 * credential names it; answer: empty
	 */
	KEEPER_SECRET_PUT,
	KEEPER_TYPE_MAX
};

enum keeper_status {
	KEEPER_OK = 0,
	KEEPER_DENIED,		/* no loaded policy binds that secret; a bad name */
	KEEPER_MISSING,		/* the vault does not hold it */
	KEEPER_FAILED,		/* the keeper could not do it (logged there) */
	KEEPER_STATUS_MAX
};

struct keeper_msg {
	uint32_t	magic;
	uint16_t	type;
	uint16_t	status;
	uint32_t	seq;		/* an answer repeats its request's */
	uint32_t	len;		/* bytes of body in use */
	uint8_t		body[KEEPER_BODY_MAX];
};

/* What keeper_msg_parse() found; pointers are into the message's body. */
struct keeper_view {
	enum keeper_type	 type;
	enum keeper_status	 status;
	int			 answer;	/* 1: keeper -> network */
	uint32_t		 seq;
	const uint8_t		*data;		/* the type's payload */
	size_t			 len;
	int			 is_ip;		/* SIGN_LEAF request */
	char			 name[KEEPER_NAME_MAX + 1];	/* SIGN_LEAF, SECRET, SECRET_PUT */
	const uint8_t		*audit_pub;	/* HELLO answer */
	uint64_t		 u64;		/* SIGN_LEAF answer (not_after), VAULT_STAMP */
	uint32_t		 u32;		/* POLICY answer */
};

/*
 * Check buf[0..n) as a message going the stated way (answer: from the
 * keeper). Everything is checked: the exact size, magic, type, status, the
 * body length against the type's bounds, names (a DNS name or an IP text
 * for leaves, a vault entry name for secrets), 0/1 flags, printable error
 * text. 0 with *v filled, or -1 and *v says nothing.
 */
int	keeper_msg_parse(const void *buf, size_t n, int answer,
	    struct keeper_view *v);

/* Fill m (all of it: unused body bytes are zero) for sending. -1: too long. */
int	keeper_msg_make(struct keeper_msg *m, enum keeper_type, enum keeper_status,
	    uint32_t seq, const void *a, size_t alen, const void *b, size_t blen);

#endif
