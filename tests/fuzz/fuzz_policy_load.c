/*
 * libFuzzer target for the YAML loaders: each input is put in an in-memory
 * file and loaded both as a policy document (policy_load_paths) and as
 * sandgate.yaml (config_load). Checks the loaders' contract on the way.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/policy.h"

static char	fuzz_path[64];
static int	fuzz_fd = -1;

static void
fuzz_init(void)
{
	if (fuzz_fd != -1)
		return;
	fuzz_fd = memfd_create("fuzz_policy_load.yaml", MFD_CLOEXEC);
	if (fuzz_fd == -1) {
		perror("memfd_create");
		abort();
	}
	snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
}

/* A NULL result needs an error to explain it, and every error a message. */
static void
fuzz_check(const void *result, const struct diag *d)
{
	size_t i;

	if (result == NULL && d->n == 0)
		abort();
	if (result != NULL && d->n != 0)
		abort();
	for (i = 0; i < d->n; i++)
		if (d->v[i].msg == NULL || d->v[i].file == NULL ||
		    d->v[i].line < 0 || d->v[i].col < 0)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *cfg;
	struct policy *p;
	struct diag d;
	char *paths[1], sum[256];

	fuzz_init();
	if (ftruncate(fuzz_fd, 0) == -1 ||
	    (size > 0 && pwrite(fuzz_fd, data, size, 0) != (ssize_t)size))
		abort();

	diag_init(&d);
	paths[0] = fuzz_path;
	p = policy_load_paths(paths, 1, &d);
	fuzz_check(p, &d);
	if (p != NULL) {
		policy_summary(p, sum, sizeof(sum));
		policy_unref(p);
	}
	diag_free(&d);

	diag_init(&d);
	cfg = config_load(fuzz_path, &d);
	fuzz_check(cfg, &d);
	config_free(cfg);
	diag_free(&d);
	return 0;
}
