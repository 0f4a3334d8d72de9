/*
 * The vault tests' shared helpers (helper_vault.h).
 */
#include <stdlib.h>

#include "vault/helper_vault.h"
#include "vault/vault.h"

int
vaulttest_swap(const struct vault_snapshot *snap, const char *secret,
    const char *placeholder, const char *value, size_t len, int query,
    struct evbuffer *out)
{
	struct vault_wbuf *wb;
	int rc;

	if ((wb = vault_wbuf_new()) == NULL)
		abort();
	rc = vault_swap(snap, secret, placeholder, value, len, query, wb);
	if (vault_wbuf_hand(wb, out) == -1) {
		vault_wbuf_free(wb);
		return -2;
	}
	return rc;
}
