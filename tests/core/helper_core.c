/*
 * What the core unit tests share: where their data lives, and a temp dir
 * per test that helper_core.c removes, with everything in it, at exit.
 */
#include <sys/stat.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helper_core.h"
#include "core/policy.h"

static const char *tmp;

static int
rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void
rm_tmp(void)
{
	if (tmp != NULL)
		nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

void
coretest_setup_dirs(char *data_dir, size_t len, char *tmp_dir)
{
	const char *env = getenv("SANDGATE_TEST_DATA");

	if (env != NULL)
		snprintf(data_dir, len, "%s/core/data", env);
	else
		snprintf(data_dir, len, "data");
	if (mkdtemp(tmp_dir) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	tmp = tmp_dir;
	atexit(rm_tmp);
}

const char *
coretest_tmpfile(const char *name, const char *text)
{
	static char buf[2 * PATH_MAX];
	FILE *f;

	snprintf(buf, sizeof(buf), "%s/%s", tmp, name);
	if ((f = fopen(buf, "w")) == NULL) {
		perror(buf);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
	return buf;
}

struct policy *
coretest_load(const char *path)
{
	struct diag d;
	struct policy *p;
	char *paths[1];

	paths[0] = (char *)path;
	diag_init(&d);
	if ((p = policy_load_paths(paths, 1, &d)) == NULL)
		diag_print(&d, stderr);
	diag_free(&d);
	return p;
}

void
coretest_load_fails(const char *path, const char *file,
    const struct coretest_diag *want, size_t n)
{
	struct diag d;
	struct policy *p;
	char *paths[1];

	paths[0] = (char *)path;
	diag_init(&d);
	p = policy_load_paths(paths, 1, &d);
	CHECK(p == NULL);
	if (p != NULL)
		policy_unref(p);
	coretest_check_diags(&d, file != NULL ? file : path, want, n);
	diag_free(&d);
}
