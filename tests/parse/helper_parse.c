/*
 * What the parse module's unit tests share (helper_parse.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "helper_parse.h"

size_t
load_seed(const char *name, uint8_t *buf, size_t cap)
{
	const char *dir = getenv("SANDGATE_TEST_DATA");
	char path[4096];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/fuzz/corpus/fuzz_tls_sni/%s",
	    dir != NULL ? dir : "..", name);
	if ((f = fopen(path, "rb")) == NULL) {
		perror(path);
		return 0;
	}
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}
