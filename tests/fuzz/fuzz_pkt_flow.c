/*
 * libFuzzer target for the dropped-packet parser (src/parse/pkt_flow.c):
 * memory safety and the invariants of what it returns.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pkt_flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pkt_flow f;

	if (pkt_flow_parse(data, size, &f) == -1)
		return 0;
	if (size < 20 || (data[0] >> 4) != 4 || f.proto_name == NULL ||
	    memcmp(f.src, data + 12, 4) != 0 || memcmp(f.dst, data + 16, 4) != 0)
		abort();
	if (f.port < -1 || f.port > 65535)
		abort();
	if (f.port != -1 && f.proto != 6 && f.proto != 17)
		abort();
	return 0;
}
