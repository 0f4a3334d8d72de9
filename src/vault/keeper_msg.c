/*
 * Reading and writing keeper messages (keeper_msg.h). Both processes treat
 * what the other sends as hostile: the keeper because the network process
 * parses every byte a sandbox sends, the network process because a bug is
 * a bug wherever it is.
 */
#include <string.h>

#include "vault/keeper_msg.h"
#include "vault/oauth2.h"
#include "vault/vault_int.h"

static uint64_t
get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* A leaf name: LDH and '_' labels with dots, or the text of an IP address. */
static int
leaf_name_ok(const uint8_t *p, size_t len, int is_ip)
{
	size_t i;

	if (len == 0 || len > KEEPER_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		uint8_t c = p[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_')
			continue;
		if (is_ip && c == ':')
			continue;
		return 0;
	}
	return 1;
}

static int
printable(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return 0;
	return 1;
}

static int
parse_request(const struct keeper_msg *m, struct keeper_view *v)
{
	const uint8_t *b = m->body;
	size_t len = m->len;

	if (m->status != KEEPER_OK)
		return -1;
	switch (v->type) {
	case KEEPER_HELLO:
		return len >= 16 && len <= KEEPER_PUBKEY_MAX ? 0 : -1;
	case KEEPER_SIGN_LEAF:
		if (len < 2 || b[0] > 1 || !leaf_name_ok(b + 1, len - 1, b[0]))
			return -1;
		v->is_ip = b[0];
		memcpy(v->name, b + 1, len - 1);
		v->name[len - 1] = '\0';
		v->data = b + 1;
		v->len = len - 1;
		return 0;
	case KEEPER_SIGN_AUDIT:
		return len >= 1 && len <= KEEPER_SIGMSG_MAX ? 0 : -1;
	case KEEPER_SECRET:
		if (len == 0 || len > VAULT_NAME_MAX || memchr(b, '\0', len))
			return -1;
		memcpy(v->name, b, len);
		v->name[len] = '\0';
		return vault_name_valid(v->name) ? 0 : -1;
	case KEEPER_VAULT_STAMP:
	case KEEPER_POLICY:
		return len == 0 ? 0 : -1;
	case KEEPER_SECRET_PUT:
		/* name length, name, then the token: 0x21-0x7e only */
		if (len < 3 || b[0] == 0 || b[0] > VAULT_NAME_MAX ||
		    (size_t)b[0] + 1 >= len || memchr(b + 1, '\0', b[0]))
			return -1;
		memcpy(v->name, b + 1, b[0]);
		v->name[b[0]] = '\0';
		v->data = b + 1 + b[0];
		v->len = len - 1 - b[0];
		return vault_name_valid(v->name) &&
		    oauth2_token_ok((const char *)v->data, v->len) ? 0 : -1;
	default:
		return -1;	/* KEEPER_ERROR only comes from the keeper */
	}
}

static int
parse_answer(const struct keeper_msg *m, struct keeper_view *v)
{
	const uint8_t *b = m->body;
	size_t len = m->len;

	if (v->type == KEEPER_ERROR)
		return m->status == KEEPER_FAILED && len >= 1 &&
		    len <= KEEPER_ERROR_MAX && printable(b, len) ? 0 : -1;
	if (m->status != KEEPER_OK)
		return len == 0 ? 0 : -1;
	switch (v->type) {
	case KEEPER_HELLO:
		if (len <= KEEPER_AUDIT_PUB ||
		    len > KEEPER_AUDIT_PUB + KEEPER_CERT_MAX)
			return -1;
		v->audit_pub = b;
		v->data = b + KEEPER_AUDIT_PUB;
		v->len = len - KEEPER_AUDIT_PUB;
		return 0;
	case KEEPER_SIGN_LEAF:
		if (len <= 8 || len > 8 + KEEPER_CERT_MAX)
			return -1;
		v->u64 = get_be64(b);
		v->data = b + 8;
		v->len = len - 8;
		return 0;
	case KEEPER_SIGN_AUDIT:
		return len == KEEPER_AUDIT_SIG ? 0 : -1;
	case KEEPER_SECRET:
		return len >= 1 && len <= VAULT_VALUE_MAX ? 0 : -1;
	case KEEPER_VAULT_STAMP:
		if (len != 8)
			return -1;
		v->u64 = get_be64(b);
		return 0;
	case KEEPER_POLICY:
		if (len != 4)
			return -1;
		v->u32 = get_be32(b);
		return 0;
	case KEEPER_SECRET_PUT:
		return len == 0 ? 0 : -1;
	default:
		return -1;
	}
}

int
keeper_msg_parse(const void *buf, size_t n, int answer, struct keeper_view *v)
{
	const struct keeper_msg *m = buf;
	int rc;

	memset(v, 0, sizeof(*v));
	if (buf == NULL || n != sizeof(*m) || m->magic != KEEPER_MAGIC ||
	    m->type == 0 || m->type >= KEEPER_TYPE_MAX ||
	    m->status >= KEEPER_STATUS_MAX || m->len > KEEPER_BODY_MAX)
		return -1;
	v->type = (enum keeper_type)m->type;
	v->status = (enum keeper_status)m->status;
	v->answer = answer != 0;
	v->seq = m->seq;
	v->data = m->body;
	v->len = m->len;
	rc = answer ? parse_answer(m, v) : parse_request(m, v);
	if (rc == -1)
		memset(v, 0, sizeof(*v));
	return rc;
}

int
keeper_msg_make(struct keeper_msg *m, enum keeper_type type,
    enum keeper_status status, uint32_t seq, const void *a, size_t alen,
    const void *b, size_t blen)
{
	if (alen > KEEPER_BODY_MAX || blen > KEEPER_BODY_MAX - alen)
		return -1;
	memset(m, 0, sizeof(*m));
	m->magic = KEEPER_MAGIC;
	m->type = (uint16_t)type;
	m->status = (uint16_t)status;
	m->seq = seq;
	m->len = (uint32_t)(alen + blen);
	if (alen > 0)
		memcpy(m->body, a, alen);
	if (blen > 0)
		memcpy(m->body + alen, b, blen);
	return 0;
}
