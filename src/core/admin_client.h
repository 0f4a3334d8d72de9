/*
 * A client of the gateway's admin API on its unix socket (admin_client.c).
 */
#ifndef SG_ADMIN_CLIENT_H
#define SG_ADMIN_CLIENT_H

/*
 * One request (body: JSON or NULL) with Connection: close; returns the
 * HTTP status and the reply's body (NUL-terminated, caller frees), or -1
 * with errno set when the socket could not be reached or the reply read
 * (a reply over 1 MiB is an error).
 */
int	admin_call(const char *sock, const char *method, const char *path,
	    const char *body, char **out);

#endif
