/*
 * The pending-question table of mode: ask (see approval.h): questions keyed
 * by (sandbox, destination) with their waiters and deadline, and the answers
 * given --for a while with their scope. Linear arrays: a sandbox has at most
 * approval.max_pending questions, and answers are few.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/approval.h"

struct answer {
	char			 sandbox[APPROVAL_ID_MAX + 1];
	struct approval_scope	 scope;
	int			 approve;
	uint64_t		 until_ms;
};

struct approval_table {
	struct approval_info	*q;
	size_t			 nq, capq;
	struct answer		*a;
	size_t			 na, capa;
	uint64_t		 next_id;
};

struct approval_table *
approval_new(void)
{
	struct approval_table *t = calloc(1, sizeof(*t));

	if (t != NULL)
		t->next_id = 1;
	return t;
}

void
approval_free(struct approval_table *t)
{
	if (t == NULL)
		return;
	free(t->q);
	free(t->a);
	free(t);
}

static int
grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *nv;

	if (n < *cap)
		return 0;
	ncap = *cap == 0 ? 16 : *cap * 2;
	if ((nv = realloc(*v, ncap * size)) == NULL)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

static struct approval_info *
find(const struct approval_table *t, uint64_t id)
{
	size_t i;

	for (i = 0; i < t->nq; i++)
		if (t->q[i].id == id)
			return &t->q[i];
	return NULL;
}

static void
drop(struct approval_table *t, struct approval_info *q)
{
	size_t i = (size_t)(q - t->q);

	memmove(&t->q[i], &t->q[i + 1], (t->nq - i - 1) * sizeof(*t->q));
	t->nq--;
}

int
approval_scope_covers(const struct approval_scope *s, const char *host,
    uint16_t port)
{
	size_t hl, nl;

	switch (s->kind) {
	case APPROVAL_SCOPE_HOST:
		return strcmp(s->host, host) == 0;
	case APPROVAL_SCOPE_HOSTPORT:
		return s->port == port && strcmp(s->host, host) == 0;
	case APPROVAL_SCOPE_DOMAIN:
		hl = strlen(s->host);
		nl = strlen(host);
		if (nl == hl)
			return strcmp(s->host, host) == 0;
		return nl > hl + 1 && host[nl - hl - 1] == '.' &&
		    memcmp(host + nl - hl, s->host, hl) == 0;
	}
	return 0;
}

/* [a-z0-9._-] and ':' inside brackets: the characters a destination has. */
static int
host_ok(const char *h, size_t len)
{
	size_t i;

	if (len == 0 || len > APPROVAL_HOST_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= '0' &&
		    h[i] <= '9') || h[i] == '.' || h[i] == '-' || h[i] == '_' ||
		    h[i] == ':'))
			return 0;
	return 1;
}

int
approval_scope_parse(const char *s, struct approval_scope *out)
{
	const char *colon, *host = s, *end;
	unsigned long port = 0;
	char *e;
	size_t len;

	memset(out, 0, sizeof(*out));
	if (s == NULL || *s == '\0')
		return -1;
	if (strncmp(s, "*.", 2) == 0) {
		out->kind = APPROVAL_SCOPE_DOMAIN;
		len = strlen(s + 2);
		if (!host_ok(s + 2, len) || strchr(s + 2, ':') != NULL)
			return -1;
		memcpy(out->host, s + 2, len);
		return 0;
	}
	if (*s == '[') {
		if ((end = strchr(s, ']')) == NULL)
			return -1;
		host = s + 1;
		len = (size_t)(end - host);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] != '\0' && colon == NULL)
			return -1;
	} else {
		colon = strchr(s, ':');
		/* Two colons without brackets: an IPv6 address, any port. */
		if (colon != NULL && strchr(colon + 1, ':') != NULL)
			colon = NULL;
		len = colon != NULL ? (size_t)(colon - s) : strlen(s);
	}
	if (!host_ok(host, len))
		return -1;
	memcpy(out->host, host, len);
	if (colon == NULL) {
		out->kind = APPROVAL_SCOPE_HOST;
		return 0;
	}
	if (colon[1] < '0' || colon[1] > '9')
		return -1;
	port = strtoul(colon + 1, &e, 10);
	if (*e != '\0' || port == 0 || port > 65535)
		return -1;
	out->kind = APPROVAL_SCOPE_HOSTPORT;
	out->port = (uint16_t)port;
	return 0;
}

unsigned
approval_pending(const struct approval_table *t, const char *sandbox)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < t->nq; i++)
		if (t->q[i].state == APPROVAL_PENDING &&
		    strcmp(t->q[i].sandbox, sandbox) == 0)
			n++;
	return n;
}

enum approval_state
approval_ask(struct approval_table *t, const char *sandbox, const char *host,
    uint16_t port, uint64_t now, uint64_t timeout_ms, unsigned max_pending,
    uint64_t *id, int *created)
{
	struct approval_info *q;
	size_t i;

	*id = 0;
	*created = 0;
	if (strlen(sandbox) > APPROVAL_ID_MAX ||
	    strlen(host) > APPROVAL_HOST_MAX)
		return APPROVAL_DENIED;
	/* An answer --for a while decides by itself while it lasts. */
	for (i = t->na; i-- > 0;)
		if (t->a[i].until_ms > now &&
		    strcmp(t->a[i].sandbox, sandbox) == 0 &&
		    approval_scope_covers(&t->a[i].scope, host, port))
			return t->a[i].approve ? APPROVAL_APPROVED :
			    APPROVAL_DENIED;
	for (i = 0; i < t->nq; i++) {
		q = &t->q[i];
		if (q->state == APPROVAL_PENDING && q->deadline_ms > now &&
		    q->port == port && strcmp(q->sandbox, sandbox) == 0 &&
		    strcmp(q->host, host) == 0) {
			q->waiting++;
			q->requests++;
			*id = q->id;
			return APPROVAL_PENDING;
		}
	}
	if (max_pending > 0 && approval_pending(t, sandbox) >= max_pending)
		return APPROVAL_LIMIT;
	if (grow((void **)&t->q, &t->capq, t->nq, sizeof(*t->q)) == -1)
		return APPROVAL_LIMIT;
	q = &t->q[t->nq++];
	memset(q, 0, sizeof(*q));
	q->id = t->next_id++;
	snprintf(q->sandbox, sizeof(q->sandbox), "%s", sandbox);
	snprintf(q->host, sizeof(q->host), "%s", host);
	q->port = port;
	q->first_ms = now;
	q->deadline_ms = now + timeout_ms;
	q->waiting = 1;
	q->requests = 1;
	q->state = APPROVAL_PENDING;
	*id = q->id;
	*created = 1;
	return APPROVAL_PENDING;
}

enum approval_state
approval_collect(struct approval_table *t, uint64_t id, uint64_t now)
{
	struct approval_info *q;
	enum approval_state st;

	if ((q = find(t, id)) == NULL)
		return APPROVAL_GONE;
	if (q->state == APPROVAL_PENDING && now >= q->deadline_ms)
		q->state = APPROVAL_TIMEDOUT;
	if ((st = q->state) == APPROVAL_PENDING)
		return st;
	if (q->waiting > 0)
		q->waiting--;
	if (q->waiting == 0)
		drop(t, q);
	return st;
}

void
approval_leave(struct approval_table *t, uint64_t id)
{
	struct approval_info *q;

	if ((q = find(t, id)) == NULL)
		return;
	if (q->waiting > 0)
		q->waiting--;
	/* Pending with nobody left: still asked, it times out by itself. */
	if (q->waiting == 0 && q->state != APPROVAL_PENDING)
		drop(t, q);
}

int
approval_answer(struct approval_table *t, uint64_t id, int approve,
    uint64_t for_ms, const struct approval_scope *scope, uint64_t now,
    struct approval_info *out)
{
	struct approval_info *q;
	struct answer *a;

	if ((q = find(t, id)) == NULL || q->state != APPROVAL_PENDING)
		return -1;
	/* Past its deadline it timed out, whether or not a tick saw it. */
	if (now >= q->deadline_ms) {
		q->state = APPROVAL_TIMEDOUT;
		if (q->waiting == 0)
			drop(t, q);
		return -1;
	}
	if (scope != NULL && !approval_scope_covers(scope, q->host, q->port))
		return -1;
	if (for_ms > 0) {
		if (grow((void **)&t->a, &t->capa, t->na, sizeof(*t->a)) == -1)
			return -1;
		a = &t->a[t->na++];
		memset(a, 0, sizeof(*a));
		snprintf(a->sandbox, sizeof(a->sandbox), "%s", q->sandbox);
		if (scope != NULL)
			a->scope = *scope;
		else {
			a->scope.kind = APPROVAL_SCOPE_HOST;
			snprintf(a->scope.host, sizeof(a->scope.host), "%s",
			    q->host);
		}
		a->approve = approve;
		a->until_ms = now + for_ms;
	}
	q->state = approve ? APPROVAL_APPROVED : APPROVAL_DENIED;
	if (out != NULL)
		*out = *q;
	/* Nobody waits any more (they left): nothing to hand the answer to. */
	if (q->waiting == 0)
		drop(t, q);
	return 0;
}

void
approval_forget(struct approval_table *t, const char *sandbox)
{
	size_t i;

	for (i = 0; i < t->na;)
		if (strcmp(t->a[i].sandbox, sandbox) == 0) {
			memmove(&t->a[i], &t->a[i + 1],
			    (t->na - i - 1) * sizeof(*t->a));
			t->na--;
		} else
			i++;
	for (i = 0; i < t->nq;) {
		if (strcmp(t->q[i].sandbox, sandbox) != 0 ||
		    t->q[i].state != APPROVAL_PENDING) {
			i++;
			continue;
		}
		t->q[i].state = APPROVAL_GONE;
		if (t->q[i].waiting == 0)
			drop(t, &t->q[i]);
		else
			i++;
	}
}

size_t
approval_expire(struct approval_table *t, uint64_t now)
{
	size_t i, n = 0;

	for (i = 0; i < t->nq;) {
		if (t->q[i].state == APPROVAL_PENDING &&
		    now >= t->q[i].deadline_ms) {
			t->q[i].state = APPROVAL_TIMEDOUT;
			n++;
			if (t->q[i].waiting == 0) {
				drop(t, &t->q[i]);
				continue;
			}
		}
		i++;
	}
	for (i = 0; i < t->na;) {
		if (t->a[i].until_ms <= now) {
			memmove(&t->a[i], &t->a[i + 1],
			    (t->na - i - 1) * sizeof(*t->a));
			t->na--;
			n++;
			continue;
		}
		i++;
	}
	return n;
}

size_t
approval_list(const struct approval_table *t, struct approval_info *out,
    size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < t->nq; i++) {
		if (t->q[i].state != APPROVAL_PENDING)
			continue;
		if (n < max)
			out[n] = t->q[i];
		n++;
	}
	return n;
}

int
approval_get(const struct approval_table *t, uint64_t id,
    struct approval_info *out)
{
	const struct approval_info *q = find(t, id);

	if (q == NULL)
		return -1;
	*out = *q;
	return 0;
}

const char *
approval_state_word(enum approval_state s)
{
	switch (s) {
	case APPROVAL_PENDING:
		return "pending";
	case APPROVAL_APPROVED:
		return "approved";
	case APPROVAL_DENIED:
		return "denied";
	case APPROVAL_TIMEDOUT:
		return "timed-out";
	case APPROVAL_LIMIT:
		return "limit";
	case APPROVAL_GONE:
		break;
	}
	return "gone";
}
