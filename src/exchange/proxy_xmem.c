/*
 * An exchange's own memory (exchange_alloc): pieces of chunks that only
 * the exchange's end frees, all at once. Below everything that allocates
 * for an exchange (the request's path, the placeholder body tail, the
 * addresses) and below the exchange itself.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"

/* A piece of an exchange's own memory; the newest first. */
struct xchunk {
	struct xchunk	*next;
	size_t		 cap;
	size_t		 used;
	_Alignas(max_align_t) unsigned char buf[];
};

/*
 * The first chunk is as large as its first piece (at least XCHUNK_MIN):
 * an idle connection's exchange holds no more than its path. Each later
 * one doubles, up to XCHUNK_MAX, or is as large as its piece.
 */
#define XCHUNK_MIN	64
#define XCHUNK_MAX	4096
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
		cap = c == NULL ? XCHUNK_MIN : c->cap * 2 > XCHUNK_MAX ?
		    XCHUNK_MAX : c->cap * 2;
		if (cap < n)
			cap = n;
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
	static char empty[1];
	char *p;

	/* An empty string costs nothing (a CONNECT's path): never written to. */
	if (n == 0)
		return empty;
	if (n == SIZE_MAX || (p = exchange_alloc(x, n + 1)) == NULL)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void
exchange_mem_free(struct exchange *x)
{
	struct xchunk *c;

	while ((c = x->mem) != NULL) {
		x->mem = c->next;
		free(c);
	}
}
