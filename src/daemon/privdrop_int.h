/*
 * What the files of the privilege drop share: the seccomp allow-list lives
 * in privdrop_seccomp.c, the identity and capability changes in privdrop.c.
 */
#ifndef SG_PRIVDROP_INT_H
#define SG_PRIVDROP_INT_H

/*
 * Load the gateway's seccomp filter on every thread of the process
 * (TSYNC). Needs no_new_privs. Returns the number of rules, or -1 with
 * *errstr.
 */
int	privdrop_seccomp_load(const char **errstr);
/* The same with the keeper's narrower list (no new sockets, no threads). */
#define PD_PROFILE_NETWORK	0
#define PD_PROFILE_KEEPER	1
int	privdrop_seccomp_load_profile(int profile, const char **errstr);

#endif
