/*
 * Test helper: run a program under an extra seccomp filter that makes some
 * system calls fail with EPERM, as a stricter host (a container runtime's
 * profile, an older kernel) would. Filters stack: the program's own filter
 * allows these calls, and the kernel answers with the strictest result, so
 * this one's errno wins. Not part of the product; tests/e2e uses it.
 *
 *   sg_fault_exec [--splice | --splice-unless-len N] [--read-len N] -- PROG ARG...
 *
 * --splice              every splice(2) fails
 * --splice-unless-len N splice(2) fails unless its length argument is N
 *                       (so socket -> pipe moves data, pipe -> socket fails)
 * --read-len N          read(2) of exactly N bytes fails
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>

#include <seccomp.h>

static void
usage(void)
{
	fprintf(stderr, "usage: sg_fault_exec [--splice | --splice-unless-len "
	    "N] [--read-len N] -- PROG [ARG...]\n");
	exit(2);
}

static scmp_datum_t
number(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*s == '\0' || *end != '\0')
		usage();
	return (scmp_datum_t)v;
}

int
main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int i, rc = 0;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return 1;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--splice") == 0)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
			    SCMP_SYS(splice), 0);
		else if (strcmp(argv[i], "--splice-unless-len") == 0 &&
		    i + 1 < argc)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
			    SCMP_SYS(splice), 1, SCMP_A4(SCMP_CMP_NE,
			    number(argv[++i]), 0));
		else if (strcmp(argv[i], "--read-len") == 0 && i + 1 < argc)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
			    SCMP_SYS(read), 1, SCMP_A2(SCMP_CMP_EQ,
			    number(argv[++i]), 0));
		else
			usage();
	}
	if (i + 1 >= argc)
		usage();
	if (rc != 0) {
		fprintf(stderr, "sg_fault_exec: cannot build the filter\n");
		return 1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    seccomp_load(ctx) != 0) {
		fprintf(stderr, "sg_fault_exec: cannot load the filter\n");
		return 1;
	}
	seccomp_release(ctx);
	execv(argv[i + 1], argv + i + 1);
	fprintf(stderr, "sg_fault_exec: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
