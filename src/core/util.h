/*
 * Small helpers every module needs and none owns: hex digits and creating
 * directories (mode 0700) for state, keys and certificates.
 */
#ifndef SG_UTIL_H
#define SG_UTIL_H

/* The value of a hex digit (either case), or -1. */
int	util_hexval(int c);
/* mkdir -p of dir; directories it creates get mode 0700. 0 or -1 (errno). */
int	util_mkdir_p(const char *dir);
/* The same for every parent directory of the file path. */
int	util_mkdir_parents(const char *path);

#endif
