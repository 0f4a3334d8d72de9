/*
 * The record of refused system calls (core/refusal.h). Everything the
 * SIGSYS handler touches is a lock-free atomic, a thread-local int or the
 * name table filled before the filter was loaded, so refusal_note() may run
 * in a signal handler on any thread.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/refusal.h"

#define NAME_MAX_LEN	32

static char refusal_names[REFUSAL_MAX_NR][NAME_MAX_LEN];
/* [REFUSAL_MAX_NR]: every number out of range together. */
static atomic_ullong refusal_counts[REFUSAL_MAX_NR + 1];
static atomic_uchar refusal_said[REFUSAL_MAX_NR + 1];
static atomic_ullong refusal_all;
static _Thread_local int refusal_thread_nr = -1;

static int
slot(int nr)
{
	return nr >= 0 && nr < REFUSAL_MAX_NR ? nr : REFUSAL_MAX_NR;
}

void
refusal_set_name(int nr, const char *name)
{
	if (nr < 0 || nr >= REFUSAL_MAX_NR || name == NULL)
		return;
	snprintf(refusal_names[nr], sizeof(refusal_names[nr]), "%s", name);
}

const char *
refusal_name(int nr)
{
	if (nr < 0 || nr >= REFUSAL_MAX_NR || refusal_names[nr][0] == '\0')
		return NULL;
	return refusal_names[nr];
}

/* Append s at *off in buf (size len); async-signal-safe. */
static void
put_str(char *buf, size_t len, size_t *off, const char *s)
{
	while (*s != '\0' && *off + 1 < len)
		buf[(*off)++] = *s++;
}

/* Append v in decimal, at least width digits; async-signal-safe. */
static void
put_num(char *buf, size_t len, size_t *off, long long v, int width)
{
	char d[24];
	int n = 0;
	unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;

	do {
		d[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0 && n < (int)sizeof(d));
	while (n < width && n < (int)sizeof(d))
		d[n++] = '0';
	if (v < 0 && *off + 1 < len)
		buf[(*off)++] = '-';
	while (n > 0 && *off + 1 < len)
		buf[(*off)++] = d[--n];
}

/* The log's UTC time stamp without gmtime_r (days to civil date, integer only). */
static void
put_time(char *buf, size_t len, size_t *off)
{
	struct timespec ts;
	long long days, secs, y, era, doe, yoe, doy, mp, d, m;

	if (clock_gettime(CLOCK_REALTIME, &ts) == -1)
		return;
	days = (long long)ts.tv_sec / 86400;
	secs = (long long)ts.tv_sec % 86400;
	days += 719468;
	era = days / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = yoe + era * 400 + (m <= 2);
	put_num(buf, len, off, y, 4);
	put_str(buf, len, off, "-");
	put_num(buf, len, off, m, 2);
	put_str(buf, len, off, "-");
	put_num(buf, len, off, d, 2);
	put_str(buf, len, off, "T");
	put_num(buf, len, off, secs / 3600, 2);
	put_str(buf, len, off, ":");
	put_num(buf, len, off, secs / 60 % 60, 2);
	put_str(buf, len, off, ":");
	put_num(buf, len, off, secs % 60, 2);
	put_str(buf, len, off, ".");
	put_num(buf, len, off, ts.tv_nsec / 1000000, 3);
	put_str(buf, len, off, "Z ");
}

void
refusal_note(int nr)
{
	int i = slot(nr);
	const char *name = i < REFUSAL_MAX_NR && refusal_names[i][0] != '\0' ?
	    refusal_names[i] : "unknown";
	char line[160];
	size_t off = 0;

	atomic_fetch_add_explicit(&refusal_counts[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&refusal_all, 1, memory_order_relaxed);
	refusal_thread_nr = nr;
	if (atomic_exchange(&refusal_said[i], 1) != 0)
		return;
	/* The shape of a log_warnx line, so that log readers see it alike. */
	put_time(line, sizeof(line), &off);
	put_str(line, sizeof(line), &off, "sandgate warn: seccomp: refused "
	    "system call ");
	put_str(line, sizeof(line), &off, name);
	put_str(line, sizeof(line), &off, " (");
	put_num(line, sizeof(line), &off, nr, 1);
	put_str(line, sizeof(line), &off, ")\n");
	(void)!write(STDERR_FILENO, line, off);
}

int
refusal_take(void)
{
	int nr = refusal_thread_nr;

	refusal_thread_nr = -1;
	return nr;
}

int
refusal_pending(void)
{
	return refusal_thread_nr != -1;
}

unsigned long long
refusal_count(int nr)
{
	return atomic_load(&refusal_counts[slot(nr)]);
}

unsigned long long
refusal_total(void)
{
	return atomic_load(&refusal_all);
}

void
refusal_foreach(void (*cb)(int, const char *, unsigned long long, void *),
    void *arg)
{
	unsigned long long n;
	int i;

	for (i = 0; i <= REFUSAL_MAX_NR; i++)
		if ((n = atomic_load(&refusal_counts[i])) != 0)
			cb(i < REFUSAL_MAX_NR ? i : -1, i < REFUSAL_MAX_NR ?
			    refusal_name(i) : NULL, n, arg);
}
