/*
 * Minimal table-driven test helpers for sandgate's unit tests.
 * Each CHECK counts; check_summary() prints "N passed, N failed" and returns
 * the exit status (0 only when nothing failed).
 */
#ifndef SG_TEST_CHECK_H
#define SG_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond) do {						\
	if (cond) {							\
		check_passed++;						\
	} else {							\
		check_failed++;						\
		fprintf(stderr, "%s:%d: CHECK failed: %s\n",		\
		    __FILE__, __LINE__, #cond);				\
	}								\
} while (0)

#define CHECK_MSG(cond, ...) do {					\
	if (cond) {							\
		check_passed++;						\
	} else {							\
		check_failed++;						\
		fprintf(stderr, "%s:%d: CHECK failed: %s: ",		\
		    __FILE__, __LINE__, #cond);				\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
	}								\
} while (0)

#define CHECK_INT(a, b) do {						\
	long long check_a_ = (long long)(a), check_b_ = (long long)(b);	\
	CHECK_MSG(check_a_ == check_b_, "%lld != %lld", check_a_, check_b_); \
} while (0)

#define CHECK_STR(a, b) do {						\
	const char *check_a_ = (a), *check_b_ = (b);			\
	CHECK_MSG(check_a_ != NULL && check_b_ != NULL &&		\
	    strcmp(check_a_, check_b_) == 0, "\"%s\" != \"%s\"",	\
	    check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)"); \
} while (0)

static inline int
check_summary(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed == 0 ? 0 : 1;
}

#endif
