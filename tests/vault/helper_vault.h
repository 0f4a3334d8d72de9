/*
 * What the vault unit tests share (helper_vault.c, linked into each of
 * them): the swap as the gateway does it, into a vault_wbuf that is then
 * handed to an evbuffer by reference.
 */
#ifndef SG_TEST_HELPER_VAULT_H
#define SG_TEST_HELPER_VAULT_H

#include <stddef.h>

struct evbuffer;
struct vault_snapshot;

/*
 * vault_swap() into a fresh vault_wbuf, handed on to out: out gets what
 * the swap wrote, nothing on a failure. vault_swap's result, or -2 when
 * the buffer could not be handed on.
 */
int	vaulttest_swap(const struct vault_snapshot *, const char *secret,
	    const char *placeholder, const char *value, size_t len, int query,
	    struct evbuffer *out);

#endif
