/*
 * What every layer of a worker may ask of the gateway it runs in: the
 * current policy, and giving freed memory back.
 */
#include <malloc.h>
#include <pthread.h>

#include "exchange/exchange.h"

struct policy *
proxy_policy_get(struct proxy *p)
{
	struct policy *pol;

	pthread_mutex_lock(&p->pol_mtx);
	pol = p->pol;
	policy_ref(pol);
	pthread_mutex_unlock(&p->pol_mtx);
	return pol;
}

/*
 * glibc keeps freed small blocks in its heap, resident: after idle origin
 * connections are released (upstream.keepalive_timeout), their pages are
 * given back, as HAProxy does when it purges its pools. At most once a
 * second per worker, and only after such a release.
 */
void
proxy_worker_trim_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)malloc_trim(0);
}

void
proxy_worker_trim(struct worker *w)
{
	static const struct timeval tv = { 1, 0 };

	if (w->trim_ev != NULL && !evtimer_pending(w->trim_ev, NULL))
		evtimer_add(w->trim_ev, &tv);
}

