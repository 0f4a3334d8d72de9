/*
 * Audit timestamps: Unix milliseconds to and from the stored text form
 * "YYYY-MM-DDTHH:MM:SS.mmmZ", RFC 3339 and relative ("15m") times as the
 * CLI takes them, and the wall clock rows are stamped with.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "audit/audit_query.h"
#include "audit/audit_int.h"
#include "core/config.h"


/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void
civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}


int
audit_format_ts(int64_t ms, char *buf, size_t len)
{
	int64_t days, rem, y;
	int mo, d, n;

	if (ms < AUDIT_TS_MIN_MS || ms > AUDIT_TS_MAX_MS ||
	    len < AUDIT_TS_LEN + 1)
		return -1;
	days = ms / 86400000;
	rem = ms % 86400000;
	if (rem < 0) {
		rem += 86400000;
		days--;
	}
	civil_from_days(days, &y, &mo, &d);
	n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y,
	    mo, d, (int)(rem / 3600000), (int)(rem / 60000 % 60),
	    (int)(rem / 1000 % 60), (int)(rem % 1000));
	return n == AUDIT_TS_LEN ? 0 : -1;
}

static int
parse_digits(const char **sp, int n, int *out)
{
	const char *s = *sp;
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*sp = s + n;
	*out = v;
	return 0;
}

static int
days_in_month(int y, int m)
{
	static const int dm[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return dm[m - 1];
}

int
audit_parse_rfc3339(const char *s, int64_t *ms)
{
	int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, oh = 0, om = 0, k;
	int64_t off = 0, v;

	if (s == NULL || parse_digits(&s, 4, &y) == -1 || *s++ != '-' ||
	    parse_digits(&s, 2, &mo) == -1 || *s++ != '-' ||
	    parse_digits(&s, 2, &d) == -1)
		return -1;
	if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	if (*s != '\0') {
		if (*s != 'T' && *s != 't' && *s != ' ')
			return -1;
		s++;
		if (parse_digits(&s, 2, &h) == -1 || *s++ != ':' ||
		    parse_digits(&s, 2, &mi) == -1 || *s++ != ':' ||
		    parse_digits(&s, 2, &sec) == -1)
			return -1;
		if (h > 23 || mi > 59 || sec > 60)
			return -1;
		if (*s == '.') {
			s++;
			if (*s < '0' || *s > '9')
				return -1;
			/* milliseconds; further digits are truncated */
			for (k = 0; *s >= '0' && *s <= '9'; s++, k++)
				if (k < 3)
					frac = frac * 10 + (*s - '0');
			for (; k < 3; k++)
				frac *= 10;
		}
		if (*s == 'Z' || *s == 'z')
			s++;
		else if (*s == '+' || *s == '-') {
			int sign = *s++ == '-' ? -1 : 1;
			if (parse_digits(&s, 2, &oh) == -1 || *s++ != ':' ||
			    parse_digits(&s, 2, &om) == -1 || oh > 23 || om > 59)
				return -1;
			off = sign * ((int64_t)oh * 3600 + om * 60);
		} else
			return -1;
		if (*s != '\0')
			return -1;
	}
	v = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + mi * 60 +
	    sec - off;
	*ms = v * 1000 + frac;
	return 0;
}

int
audit_parse_time(const char *s, int64_t now_ms, int64_t *ms)
{
	uint64_t d;

	if (s == NULL || *s == '\0')
		return -1;
	if (config_parse_duration_ms(s, &d) == 0) {
		if (d > (uint64_t)INT64_MAX / 2)
			return -1;
		*ms = now_ms - (int64_t)d;
		return 0;
	}
	return audit_parse_rfc3339(s, ms);
}

int64_t
audit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
