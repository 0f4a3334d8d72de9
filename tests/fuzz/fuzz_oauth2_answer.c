/*
 * libFuzzer target for oauth2_answer_parse (src/vault/oauth2_answer.c): a
 * token endpoint's answer, head, framing and JSON, as hostile input. The
 * input is copied (the parser decodes chunks in place); tokens it returns
 * must lie in its own memory and pass oauth2_token_ok.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/oauth2_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oauth2_answer a;
	char *buf;

	if (size > OAUTH2_ANSWER_MAX)
		return 0;
	if ((buf = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	if (oauth2_answer_parse(buf, size, &a) == 0) {
		if (a.access == NULL || !oauth2_token_ok(a.access, a.access_len) ||
		    (a.refresh != NULL && !oauth2_token_ok(a.refresh,
		    a.refresh_len)) || a.expires_in <= 0 ||
		    a.expires_in > OAUTH2_MAX_EXPIRES || a.status < 200 ||
		    a.status > 299)
			abort();
		oauth2_answer_free(&a);
	} else if (a.mem != NULL || memchr(a.why, '\0', sizeof(a.why)) == NULL)
		abort();
	free(buf);
	return 0;
}
