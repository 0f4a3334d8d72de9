/*
 * Logging to stderr with a level, plus routing of libevent's and OpenSSL's
 * diagnostics into the same stream.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/err.h>

#include "core/log.h"

static enum log_level log_level = LOG_LVL_INFO;
static const char *log_prog = "sandgate";
static pthread_mutex_t log_mtx = PTHREAD_MUTEX_INITIALIZER;
/*
 * While holding (start-up), the newest warning waits: printed when another
 * comes or start-up succeeds, or turned into the one error line when
 * start-up fails, so that the reason is said once.
 */
static int log_holding;
static char log_held[2600];	/* the formatted line */
static char log_held_msg[512];	/* the message alone */

static void
log_event_cb(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

void
log_init(enum log_level lvl, const char *progname)
{
	log_level = lvl;
	if (progname != NULL)
		log_prog = progname;
	event_set_log_callback(log_event_cb);
}

void
log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

int
log_enabled(enum log_level lvl)
{
	return lvl <= log_level;
}

static void log_vwrite(const char *, const char *, va_list, const char *)
    __attribute__((format(printf, 2, 0)));

static void
log_vwrite(const char *lvl, const char *fmt, va_list ap, const char *suffix)
{
	char msg[2048], line[2600];
	struct timespec ts;
	struct tm tm;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(line, sizeof(line),
	    "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s%s%s\n",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_prog, lvl, msg,
	    suffix ? ": " : "", suffix ? suffix : "");
	pthread_mutex_lock(&log_mtx);
	if (log_holding && strcmp(lvl, "warn") == 0) {
		fputs(log_held, stderr);
		memcpy(log_held, line, sizeof(log_held));
		snprintf(log_held_msg, sizeof(log_held_msg), "%.380s%s%.120s",
		    msg, suffix ? ": " : "", suffix ? suffix : "");
	} else
		fputs(line, stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_mtx);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;
	char ebuf[128];
	const char *e;

	e = strerror_r(saved, ebuf, sizeof(ebuf));
	va_start(ap, fmt);
	log_vwrite("warn", fmt, ap, e);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite("warn", fmt, ap, NULL);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_level < LOG_LVL_INFO)
		return;
	va_start(ap, fmt);
	log_vwrite("info", fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_level < LOG_LVL_DEBUG)
		return;
	va_start(ap, fmt);
	log_vwrite("debug", fmt, ap, NULL);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	char ebuf[128];
	const char *e;

	e = strerror_r(errno, ebuf, sizeof(ebuf));
	va_start(ap, fmt);
	log_vwrite("fatal", fmt, ap, e);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite("fatal", fmt, ap, NULL);
	va_end(ap);
	exit(1);
}

void
vsay_err(const char *fmt, va_list ap)
{
	fputs("sandgate: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
say_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay_err(fmt, ap);
	va_end(ap);
}

void
log_openssl(const char *what)
{
	unsigned long e;
	char buf[256];
	int any = 0;

	while ((e = ERR_get_error()) != 0) {
		ERR_error_string_n(e, buf, sizeof(buf));
		log_warnx("%s: %s", what, buf);
		any = 1;
	}
	if (!any)
		log_warnx("%s: (no OpenSSL error queued)", what);
}

static const char *
escape(const void *data, size_t len, char *out, size_t outlen, int word)
{
	const unsigned char *p = data;
	size_t i, o = 0;

	if (outlen == 0)
		return out;
	for (i = 0; i < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' &&
		    (!word || (p[i] != ' ' && p[i] != '"'))) {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)p[i];
		} else {
			if (o + 4 >= outlen)
				break;
			snprintf(out + o, 5, "\\x%02x", p[i]);
			o += 4;
		}
	}
	out[o] = '\0';
	return out;
}

const char *
log_escape(const void *data, size_t len, char *out, size_t outlen)
{
	return escape(data, len, out, outlen, 0);
}

const char *
log_escape_word(const void *data, size_t len, char *out, size_t outlen)
{
	return escape(data, len, out, outlen, 1);
}

void
log_hold(int on)
{
	pthread_mutex_lock(&log_mtx);
	log_holding = on;
	log_held[0] = log_held_msg[0] = '\0';
	pthread_mutex_unlock(&log_mtx);
}

void
log_release(void)
{
	pthread_mutex_lock(&log_mtx);
	fputs(log_held, stderr);
	fflush(stderr);
	log_holding = 0;
	log_held[0] = log_held_msg[0] = '\0';
	pthread_mutex_unlock(&log_mtx);
}

void
log_take_held(char *buf, size_t len)
{
	pthread_mutex_lock(&log_mtx);
	snprintf(buf, len, "%s", log_held_msg[0] != '\0' ? log_held_msg :
	    "see the log above");
	log_holding = 0;
	log_held[0] = log_held_msg[0] = '\0';
	pthread_mutex_unlock(&log_mtx);
}
