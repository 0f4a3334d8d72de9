/*
 * Small helpers every module needs and none owns: hex digits and creating
 * directories (mode 0700) for state, keys and certificates.
 */
#ifndef SG_UTIL_H
#define SG_UTIL_H

#include <stddef.h>

/* The value of a hex digit (either case), or -1. */
int	util_hexval(int c);
/* n bytes as 2n lower-case hex digits and a NUL: out holds 2n + 1. */
void	util_hex_encode(const void *in, size_t n, char *out);
/*
 * 2n hex digits (len == 2n) as n bytes. lower_only refuses A-F, for text
 * that has one spelling (hashes, signatures). 0, or -1 (out is then partly
 * written: wipe it if it holds a key).
 */
int	util_hex_decode(const char *in, size_t len, void *out, int lower_only);
/* mkdir -p of dir; directories it creates get mode 0700. 0 or -1 (errno). */
int	util_mkdir_p(const char *dir);
/* The same for every parent directory of the file path. */
int	util_mkdir_parents(const char *path);

#endif
