/*
 * The exchange: one decision and what it carries, in memory of its own
 * (struct exchange in exchange.h). A session holds exactly one; a new
 * request gets a new one and the old one goes whole, so no field of a
 * request is reset by hand for the next, and none survives it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exchange/exchange.h"
#include "vault/vault.h"

/* A piece of an exchange's own memory; the newest first. */
struct xchunk {
	struct xchunk	*next;
	size_t		 cap;
	size_t		 used;
	_Alignas(max_align_t) unsigned char buf[];
};

#define XCHUNK_MIN	512	/* a path and a body tail fit in the first */
#define XALIGN		_Alignof(max_align_t)

void *
exchange_alloc(struct exchange *x, size_t n)
{
	struct xchunk *c = x->mem;
	size_t cap;
	void *p;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + XALIGN - 1) & ~(XALIGN - 1);
	if (c == NULL || c->cap - c->used < n) {
		cap = n > XCHUNK_MIN ? n : XCHUNK_MIN;
		if ((c = malloc(sizeof(*c) + cap)) == NULL)
			return NULL;
		c->next = x->mem;
		c->cap = cap;
		c->used = 0;
		x->mem = c;
	}
	p = c->buf + c->used;
	c->used += n;
	return memset(p, 0, n);
}

char *
exchange_strndup(struct exchange *x, const char *s, size_t n)
{
	char *p;

	if (n == SIZE_MAX || (p = exchange_alloc(x, n + 1)) == NULL)
		return NULL;
	if (n > 0)
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

struct exchange *
exchange_new(void)
{
	struct exchange *x;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return NULL;
	x->addrs = x->addr_inline;
	clock_gettime(CLOCK_MONOTONIC, &x->started);
	return x;
}

int
exchange_set_addrs(struct exchange *x, const struct netaddr *a, size_t n)
{
	struct netaddr *to = x->addr_inline;

	if (n > PROXY_MAX_ADDRS)
		n = PROXY_MAX_ADDRS;
	if (n > EXCHANGE_INLINE_ADDRS) {
		if (x->addr_more == NULL && (x->addr_more = exchange_alloc(x,
		    PROXY_MAX_ADDRS * sizeof(*to))) == NULL)
			return -1;
		to = x->addr_more;
	}
	if (n > 0)
		memmove(to, a, n * sizeof(*to));
	x->addrs = to;
	x->n_addrs = n;
	x->addr_next = 0;
	return 0;
}

void
exchange_free(struct exchange *x)
{
	struct xchunk *c;

	if (x == NULL)
		return;
	cred_plan_free(&x->fwd.plan);
	if (x->fwd.scrub != NULL)
		vault_scrubber_free(x->fwd.scrub);
	while ((c = x->mem) != NULL) {	/* path, body tail, addresses */
		x->mem = c->next;
		free(c);
	}
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
		memcpy(x->verdict.rule, s->tun->rule, sizeof(x->verdict.rule));
		x->target = s->tun->target;
		if (exchange_set_addrs(x, s->tun->addrs, s->tun->n_addrs) ==
		    -1) {
			exchange_free(x);
			return -1;
		}
	}
	exchange_free(s->x);
	s->x = x;
	return 0;
}
