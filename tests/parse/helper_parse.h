/*
 * What the parse module's unit tests share: the ClientHellos captured
 * for the ClientHello parser's fuzz seeds, read from the source tree.
 */
#ifndef SG_TEST_HELPER_PARSE_H
#define SG_TEST_HELPER_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* tests/fuzz/corpus/fuzz_tls_sni/NAME into buf: its length, 0 if missing. */
size_t	load_seed(const char *name, uint8_t *buf, size_t cap);

#endif
