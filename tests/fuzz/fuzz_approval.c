/*
 * libFuzzer target for mode: ask's scopes (core/approval.h): a scope the
 * admin API or the CLI is given either does not parse or parses into a
 * host of the allowed characters that covers itself (and, host:port, only
 * its own port); and the question table, driven by the input as a script
 * of asks, answers, collects, leaves and expiries, keeps its counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/approval.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_scope(const uint8_t *data, size_t len)
{
	struct approval_scope sc;
	char s[300];
	size_t n = len < sizeof(s) - 1 ? len : sizeof(s) - 1, i;

	memcpy(s, data, n);
	s[n] = '\0';
	if (approval_scope_parse(s, &sc) == -1)
		return;
	if (sc.host[0] == '\0' || strlen(sc.host) > APPROVAL_HOST_MAX)
		abort();
	for (i = 0; sc.host[i] != '\0'; i++)
		if (!((sc.host[i] >= 'a' && sc.host[i] <= 'z') ||
		    (sc.host[i] >= '0' && sc.host[i] <= '9') ||
		    strchr(".-_:", sc.host[i]) != NULL))
			abort();
	if (!approval_scope_covers(&sc, sc.host, sc.port != 0 ? sc.port : 1))
		abort();
	if (sc.kind == APPROVAL_SCOPE_HOSTPORT &&
	    approval_scope_covers(&sc, sc.host, (uint16_t)(sc.port + 1)))
		abort();
}

static void
script(const uint8_t *data, size_t len)
{
	struct approval_table *t = approval_new();
	struct approval_info list[8];
	uint64_t ids[16] = { 0 }, id, now = 1;
	char host[8];
	size_t i, k = 0, n;
	int created;

	if (t == NULL)
		return;
	for (i = 0; i + 1 < len; i += 2) {
		now += data[i + 1] & 0x0f;
		snprintf(host, sizeof(host), "h%u", data[i + 1] >> 6);
		switch (data[i] & 7) {
		case 0:
		case 1:
			if (approval_ask(t, (data[i] & 8) ? "a" : "b", host,
			    443, now, 20, 3, &id, &created) ==
			    APPROVAL_PENDING)
				ids[k++ % 16] = id;
			break;
		case 2:
			(void)approval_answer(t, ids[data[i + 1] % 16],
			    data[i] & 8, (data[i] & 16) ? 30 : 0, NULL, now,
			    NULL);
			break;
		case 3:
			(void)approval_collect(t, ids[data[i + 1] % 16], now);
			break;
		case 4:
			approval_leave(t, ids[data[i + 1] % 16]);
			break;
		default:
			(void)approval_expire(t, now);
			break;
		}
		n = approval_list(t, list, 8);
		if (approval_pending(t, "a") > 3 || approval_pending(t, "b") > 3 ||
		    n != approval_pending(t, "a") + approval_pending(t, "b"))
			abort();
	}
	approval_free(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	check_scope(data, len);
	script(data, len);
	return 0;
}
