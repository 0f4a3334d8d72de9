/*
 * The record of system calls the seccomp filter refused: written by the
 * SIGSYS handler (async-signal-safe), read by the metrics, the session that
 * failed because of a refusal, and the tests. Owns the counters, the name
 * table and one "refused, not yet accounted for" slot per thread.
 */
#ifndef SG_REFUSAL_H
#define SG_REFUSAL_H

#define REFUSAL_MAX_NR	1024	/* system call numbers tracked by name */

/* Normal context, before the filter is loaded: the name of call nr. */
void	refusal_set_name(int nr, const char *name);
/* The name of nr, or NULL when none was set. */
const char *refusal_name(int nr);
/*
 * The filter refused call nr on this thread (async-signal-safe): count it,
 * remember it in this thread's slot, and the first time for this call
 * write one warning line naming it to stderr with write(2).
 */
void	refusal_note(int nr);
/* This thread's refused call not yet accounted for, cleared; -1: none. */
int	refusal_take(void);
/* 1 when this thread has a refused call not yet accounted for. */
int	refusal_pending(void);
/* Times call nr was refused (nr out of range: every such call together). */
unsigned long long refusal_count(int nr);
unsigned long long refusal_total(void);
/* cb for every call refused at least once, in number order. */
void	refusal_foreach(void (*cb)(int nr, const char *name,
	    unsigned long long n, void *arg), void *arg);

#endif
