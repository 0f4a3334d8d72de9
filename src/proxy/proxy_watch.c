/*
 * policies_watch (docs/config.md): inotify on the policy paths, on the main
 * thread's event loop, and a reload (the same as SIGHUP: a policy with an
 * error is never applied) once changes have been quiet for a moment. It
 * owns the inotify descriptor and its two events.
 *
 * A directory in `policies` is watched itself; a file, through its
 * directory (editors and Kubernetes replace files rather than write them).
 * Kubernetes updates a mounted ConfigMap by writing a new timestamped
 * directory and renaming the symlink "..data" over the old one: that rename
 * is an IN_MOVED_TO of "..data" in the watched directory.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "core/config.h"
#include "core/log.h"
#include "proxy/proxy.h"
#include "proxy/front.h"

#define WATCH_QUIET_MS	300	/* changes come in bursts: reload after this */
#define WATCH_MASK	(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | \
			 IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
			 IN_DELETE_SELF | IN_MOVE_SELF)

/* One watch: a directory, and the one file of it that matters (or any *.yaml). */
struct watch_ent {
	int	 wd;
	char	*only;		/* NULL: every policy file of the directory */
};

struct proxy_watch {
	struct proxy		*p;
	int			 fd;
	struct event		*read_ev;
	struct event		*quiet_ev;
	struct watch_ent	 w[CONFIG_MAX_POLICY_PATHS];
	int			 n;
};

static int
watch_name_matters(const struct watch_ent *e, const char *name)
{
	size_t n = strlen(name);

	/* The ConfigMap's swap, and the timestamped directories behind it. */
	if (strncmp(name, "..", 2) == 0)
		return strcmp(name, "..data") == 0;
	if (e->only != NULL)
		return strcmp(name, e->only) == 0;
	return name[0] != '.' && ((n > 5 && strcmp(name + n - 5,
	    ".yaml") == 0) || (n > 4 && strcmp(name + n - 4, ".yml") == 0));
}

static void
watch_quiet_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct proxy_watch *w = arg;

	log_info("policies_watch: policy files changed: reloading");
	(void)proxy_reload(w->p, "watch", NULL, NULL);
}

static void
watch_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct proxy_watch *w = arg;
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ie;
	struct timeval tv = { 0, WATCH_QUIET_MS * 1000 };
	ssize_t n;
	char *p;
	int i, hit = 0;

	while ((n = read(w->fd, buf, sizeof(buf))) > 0) {
		for (p = buf; p < buf + n; p += sizeof(*ie) + ie->len) {
			ie = (const struct inotify_event *)p;
			if (ie->mask & IN_Q_OVERFLOW) {
				hit = 1;
				continue;
			}
			for (i = 0; i < w->n; i++)
				if (w->w[i].wd == ie->wd)
					break;
			if (i == w->n)
				continue;
			if (ie->mask & (IN_DELETE_SELF | IN_MOVE_SELF |
			    IN_IGNORED)) {
				log_warnx("policies_watch: a watched policy "
				    "directory went away; changes in its "
				    "replacement need SIGHUP or a restart");
				w->w[i].wd = -1;
				hit = 1;
				continue;
			}
			if (ie->len > 0 && watch_name_matters(&w->w[i],
			    ie->name))
				hit = 1;
		}
	}
	/* Every change re-arms the timer: one reload per burst. */
	if (hit)
		evtimer_add(w->quiet_ev, &tv);
}

/* Watch one policy path: itself when a directory, else its directory. */
static int
watch_add(struct proxy_watch *w, const char *path)
{
	struct watch_ent *e = &w->w[w->n];
	char buf[PATH_MAX], base[PATH_MAX];
	const char *dir = path;
	struct stat st;

	e->only = NULL;
	if (stat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
		/* dirname and basename may write into their argument. */
		snprintf(buf, sizeof(buf), "%s", path);
		snprintf(base, sizeof(base), "%s", path);
		dir = dirname(buf);
		if ((e->only = strdup(basename(base))) == NULL)
			return -1;
	}
	if ((e->wd = inotify_add_watch(w->fd, dir, WATCH_MASK)) == -1) {
		log_warn("policies_watch: cannot watch %s", dir);
		free(e->only);
		e->only = NULL;
		return -1;
	}
	w->n++;
	return 0;
}

void
proxy_watch_stop(struct proxy *p)
{
	struct proxy_watch *w = p->watch;
	int i;

	if (w == NULL)
		return;
	if (w->read_ev != NULL)
		event_free(w->read_ev);
	if (w->quiet_ev != NULL)
		event_free(w->quiet_ev);
	for (i = 0; i < w->n; i++)
		free(w->w[i].only);
	if (w->fd != -1)
		close(w->fd);
	free(w);
	p->watch = NULL;
}

int
proxy_watch_start(struct proxy *p)
{
	const struct config *cfg = proxy_config(p);
	struct proxy_watch *w;
	int i;

	if (!cfg->policies_watch)
		return 0;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	p->watch = w;
	w->p = p;
	if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		log_warn("policies_watch: inotify");
		goto fail;
	}
	for (i = 0; i < cfg->n_policy_paths; i++)
		if (watch_add(w, cfg->policy_paths[i]) == -1)
			goto fail;
	if ((w->read_ev = event_new(p->main_base, w->fd, EV_READ | EV_PERSIST,
	    watch_read_cb, w)) == NULL || (w->quiet_ev = evtimer_new(
	    p->main_base, watch_quiet_cb, w)) == NULL ||
	    event_add(w->read_ev, NULL) == -1)
		goto fail;
	log_info("policies_watch: watching %d policy path%s for changes",
	    cfg->n_policy_paths, cfg->n_policy_paths == 1 ? "" : "s");
	return 0;
fail:
	proxy_watch_stop(p);
	return -1;
}
