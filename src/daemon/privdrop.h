/*
 * Least privilege for `sandgate serve`, the process that parses every byte a
 * sandbox sends: once everything that needs root is open, it becomes the
 * configured user, keeps no capability, sets no_new_privs and confines every
 * thread to an allow-list of system calls. docs/architecture.md, "Privileges".
 */
#ifndef SG_PRIVDROP_H
#define SG_PRIVDROP_H

struct config;
struct privdrop;

/*
 * Before anything opens or starts a thread: resolve cfg->user and drop the
 * capability bounding set, which every thread started later inherits. *out
 * is NULL when there is nothing to drop (user: null, or not started as
 * root; logged). -1 with a one-line *errstr, e.g. for a user that does not
 * exist.
 */
int	privdrop_prepare(const struct config *cfg, struct privdrop **out,
	    const char **errstr);
/*
 * After every socket is bound and every file that needs root is open, before
 * the worker threads start: give state_dir to the user's group, switch user,
 * clear the capabilities, set no_new_privs, check that the key files cannot
 * be opened, and load the seccomp filter on all threads. Does nothing for a
 * NULL pd. -1 with *errstr: the caller must exit.
 */
int	privdrop_audit_share(const struct privdrop *pd,
	    const struct config *cfg, const char **errstr);
int	privdrop_apply(struct privdrop *pd, const struct config *cfg,
	    const char **errstr);
void	privdrop_free(struct privdrop *pd);
/*
 * The key keeper, after it opened its files: no capabilities (it stays
 * uid 0 when started as root, so that root's 0600 key files stay its
 * own), no_new_privs, not dumpable, and a seccomp allow-list without
 * sockets of its own. -1 with *errstr: the keeper must not serve.
 */
int	privdrop_confine_keeper(const char **errstr);

#endif
