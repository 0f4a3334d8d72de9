/*
 * The exchange: one decision and what it carries, in memory of its own
 * (struct exchange in proxy_int.h). A session holds exactly one; a new
 * request gets a new one and the old one goes whole, so no field of a
 * request is reset by hand for the next, and none survives it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_int.h"
#include "vault/vault.h"

struct exchange *
exchange_new(void)
{
	return calloc(1, sizeof(struct exchange));
}

void
exchange_free(struct exchange *x)
{
	if (x == NULL)
		return;
	cred_plan_free(&x->fwd.plan);
	if (x->fwd.scrub != NULL)
		vault_scrubber_free(x->fwd.scrub);
	free(x->fwd.path);
	free(x);
}

int
exchange_next(struct session *s)
{
	struct exchange *x;

	if ((x = exchange_new()) == NULL)
		return -1;
	if (s->kind == KIND_INGRESS)
		snprintf(x->verdict.rule, sizeof(x->verdict.rule), "ingress");
	else if (s->tunnel_http && s->tun != NULL) {
		/* Refused before its own decision: the tunnel's rule. */
		memcpy(x->verdict.rule, s->tunnel_rule, sizeof(x->verdict.rule));
		x->target = s->tun->target;
		memcpy(x->addrs, s->tun->addrs, sizeof(x->addrs));
		x->n_addrs = s->tun->n_addrs;
	}
	exchange_free(s->x);
	s->x = x;
	return 0;
}
