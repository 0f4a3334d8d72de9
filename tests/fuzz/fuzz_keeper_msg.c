/*
 * libFuzzer target for the keeper protocol's readers: keeper_msg_parse()
 * on both sides and keeper_ctl_parse(). The first byte picks the reading;
 * the rest is the message, also padded out to the fixed size (so that the
 * checks past the size test are reached). What a parse accepts must stay
 * inside the message, and survive keeper_msg_make() and a parse again
 * unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keeper_proc.h"
#include "vault/keeper_msg.h"

static struct keeper_msg m, m2;

static void
check(const struct keeper_msg *msg, const struct keeper_view *v, int answer)
{
	const uint8_t *lo = msg->body, *hi = msg->body + sizeof(msg->body);
	struct keeper_view v2;

	if (v->len > KEEPER_BODY_MAX || v->data < lo || v->data + v->len > hi)
		abort();
	if (strlen(v->name) > KEEPER_NAME_MAX)
		abort();
	if (v->audit_pub != NULL && (v->audit_pub < lo ||
	    v->audit_pub + KEEPER_AUDIT_PUB > hi))
		abort();
	/* The same payload, written again, reads the same. */
	if (keeper_msg_make(&m2, (enum keeper_type)msg->type,
	    (enum keeper_status)msg->status, msg->seq, msg->body, msg->len,
	    NULL, 0) == -1)
		abort();
	if (keeper_msg_parse(&m2, sizeof(m2), answer, &v2) == -1 ||
	    v2.type != v->type || v2.len != v->len || v2.u64 != v->u64 ||
	    v2.u32 != v->u32 || v2.is_ip != v->is_ip ||
	    strcmp(v2.name, v->name) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct keeper_view v;
	struct keeper_ctl c;
	int answer;

	if (size < 1)
		return 0;
	answer = data[0] & 1;
	data++;
	size--;
	if ((data[-1] & 6) == 6) {
		(void)keeper_ctl_parse(data, size, (data[-1] >> 3) & 3, &c);
		return 0;
	}
	/* As it came: almost always the wrong size. */
	if (size <= sizeof(m)) {
		memset(&m, 0, sizeof(m));
		memcpy(&m, data, size);
		if (keeper_msg_parse(&m, size, answer, &v) == 0 &&
		    size != sizeof(m))
			abort();
	}
	/* Padded to the fixed size, with a right magic when asked. */
	memset(&m, 0, sizeof(m));
	memcpy(&m, data, size < sizeof(m) ? size : sizeof(m));
	if (data[-1] & 2)
		m.magic = KEEPER_MAGIC;
	if (m.len > sizeof(m.body))
		m.len %= sizeof(m.body) + 1;
	if (keeper_msg_parse(&m, sizeof(m), answer, &v) == 0)
		check(&m, &v, answer);
	return 0;
}
