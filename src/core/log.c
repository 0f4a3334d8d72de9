/*
 * Logging to stderr with a level, as text or JSON lines, plus routing of
 * libevent's and OpenSSL's diagnostics into the same stream.
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
static enum log_format log_format = LOG_FMT_TEXT;
static const char *log_prog = "sandgate";
static pthread_mutex_t log_mtx = PTHREAD_MUTEX_INITIALIZER;
/*
 * While holding (start-up), the newest warning waits: printed when another
 * comes or start-up succeeds, or turned into the one error line when
 * start-up fails, so that the reason is said once.
 */
static int log_holding;
static char log_held[6000];	/* the formatted line */
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

void
log_set_format(enum log_format fmt)
{
	log_format = fmt;
}

int
log_enabled(enum log_level lvl)
{
	return lvl <= log_level;
}

int
log_level_parse(const char *s, enum log_level *out)
{
	if (strcmp(s, "debug") == 0)
		*out = LOG_LVL_DEBUG;
	else if (strcmp(s, "info") == 0)
		*out = LOG_LVL_INFO;
	else if (strcmp(s, "warn") == 0 || strcmp(s, "warning") == 0)
		*out = LOG_LVL_WARN;
	else if (strcmp(s, "error") == 0)
		*out = LOG_LVL_ERROR;
	else
		return -1;
	return 0;
}

int
log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FMT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FMT_JSON;
	else
		return -1;
	return 0;
}

/* Append s to buf at *o (size len), cut at the end; keeps buf terminated. */
static void
put(char *buf, size_t len, size_t *o, const char *s)
{
	size_t n = strlen(s);

	if (*o + 1 >= len)
		return;
	if (n > len - 1 - *o)
		n = len - 1 - *o;
	memcpy(buf + *o, s, n);
	*o += n;
	buf[*o] = '\0';
}

/* Append "key":"value" (value JSON-escaped) with a leading comma. */
static void
put_field(char *buf, size_t len, size_t *o, const char *key, size_t klen,
    const char *val, size_t vlen)
{
	char esc[1024];

	/* room for the whole field, else none of it: the line stays JSON */
	log_json_escape(val, vlen, esc, sizeof(esc));
	if (*o + klen + strlen(esc) + 8 >= len)
		return;
	put(buf, len, o, ",\"");
	memcpy(buf + *o, key, klen);
	*o += klen;
	buf[*o] = '\0';
	put(buf, len, o, "\":\"");
	put(buf, len, o, esc);
	put(buf, len, o, "\"");
}

static int
is_word(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || p[i] == '_'))
			return 0;
	return n > 0;
}

/*
 * The fields of a key=value message: "deny http sandbox=dev host=x ..."
 * gives "decision":"deny","kind":"http","sandbox":"dev","host":"x". Tokens
 * split at spaces; a value cannot hold one (log_escape_word), others stay
 * in msg only.
 */
static void
put_kv(char *buf, size_t len, size_t *o, const char *msg)
{
	static const char *const verdicts[] = { "allow", "deny", "report",
	    "error", NULL };
	const char *p = msg, *tok[2] = { NULL, NULL };
	size_t toklen[2] = { 0, 0 }, n, i;
	int lead = 0, kv = 0;

	while (*p != '\0') {
		const char *sp = strchr(p, ' '), *eq;

		n = sp ? (size_t)(sp - p) : strlen(p);
		eq = memchr(p, '=', n);
		if (eq != NULL && is_word(p, (size_t)(eq - p)) &&
		    strncmp(p, "ts=", 3) != 0 && strncmp(p, "level=", 6) != 0 &&
		    strncmp(p, "msg=", 4) != 0 && strncmp(p, "prog=", 5) != 0 &&
		    strncmp(p, "decision=", 9) != 0 &&
		    strncmp(p, "kind=", 5) != 0) {
			if (kv == 0 && lead == 2)
				for (i = 0; verdicts[i] != NULL; i++)
					if (toklen[0] == strlen(verdicts[i]) &&
					    strncmp(tok[0], verdicts[i],
					    toklen[0]) == 0) {
						put_field(buf, len, o,
						    "decision", 8, tok[0],
						    toklen[0]);
						put_field(buf, len, o, "kind", 4,
						    tok[1], toklen[1]);
					}
			put_field(buf, len, o, p, (size_t)(eq - p), eq + 1,
			    n - (size_t)(eq - p) - 1);
			kv++;
		} else if (kv == 0) {
			if (lead < 2) {
				tok[lead] = p;
				toklen[lead] = n;
			}
			lead++;
		}
		p += n;
		while (*p == ' ')
			p++;
	}
}

static void log_vwrite(const char *, const char *, va_list, const char *)
    __attribute__((format(printf, 2, 0)));

static void
log_vwrite(const char *lvl, const char *fmt, va_list ap, const char *suffix)
{
	char msg[2048], full[2200], line[6000], esc[4400], ts_s[80];
	struct timespec ts;
	struct tm tm;
	size_t o = 0;
	int warn = strcmp(lvl, "warn") == 0;
	int shown = !warn || log_level >= LOG_LVL_WARN;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	snprintf(full, sizeof(full), "%s%s%s", msg, suffix ? ": " : "",
	    suffix ? suffix : "");
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(ts_s, sizeof(ts_s), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	line[0] = '\0';
	if (!shown)
		;	/* below the level: only a held warning's text is kept */
	else if (log_format == LOG_FMT_JSON) {
		put(line, sizeof(line), &o, "{\"ts\":\"");
		put(line, sizeof(line), &o, ts_s);
		put(line, sizeof(line), &o, "\",\"level\":\"");
		put(line, sizeof(line), &o, lvl);
		put(line, sizeof(line), &o, "\",\"prog\":\"");
		put(line, sizeof(line), &o, log_json_escape(log_prog,
		    strlen(log_prog), esc, 64));
		put(line, sizeof(line), &o, "\",\"msg\":\"");
		put(line, sizeof(line), &o, log_json_escape(full, strlen(full),
		    esc, sizeof(esc)));
		put(line, sizeof(line), &o, "\"");
		if (suffix == NULL)
			put_kv(line, sizeof(line) - 3, &o, msg);
		put(line, sizeof(line), &o, "}\n");
	} else
		snprintf(line, sizeof(line), "%s %s %s: %s\n", ts_s, log_prog,
		    lvl, full);
	pthread_mutex_lock(&log_mtx);
	if (log_holding && warn) {
		fputs(log_held, stderr);
		snprintf(log_held, sizeof(log_held), "%s", line);
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
	/* serve's failure with --log-format json: a JSON line, level error */
	if (log_format == LOG_FMT_JSON) {
		log_vwrite("error", fmt, ap, NULL);
		return;
	}
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

/* The length of the UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need, i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		need = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		need = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;
		else if (p[0] == 0xed)
			hi = 0x9f;	/* no UTF-16 surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		need = 4;
		if (p[0] == 0xf0)
			lo = 0x90;
		else if (p[0] == 0xf4)
			hi = 0x8f;	/* at most U+10FFFF */
	} else
		return 0;
	if (n < need || p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < need; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return need;
}

const char *
log_json_escape(const void *data, size_t len, char *out, size_t outlen)
{
	const unsigned char *p = data;
	size_t i = 0, o = 0, n;
	char e[8];

	if (outlen == 0)
		return out;
	while (i < len) {
		const char *rep = NULL;

		n = 1;
		if (p[i] == '"')
			rep = "\\\"";
		else if (p[i] == '\\')
			rep = "\\\\";
		else if (p[i] == '\n')
			rep = "\\n";
		else if (p[i] == '\t')
			rep = "\\t";
		else if (p[i] == '\r')
			rep = "\\r";
		else if (p[i] < 0x20 || p[i] == 0x7f) {
			snprintf(e, sizeof(e), "\\u%04x", p[i]);
			rep = e;
		} else if (p[i] >= 0x80 && (n = utf8_len(p + i, len - i)) == 0) {
			rep = "\\ufffd";
			n = 1;
		}
		if (rep != NULL) {
			if (o + strlen(rep) >= outlen)
				break;
			memcpy(out + o, rep, strlen(rep));
			o += strlen(rep);
		} else {
			if (o + n >= outlen)
				break;
			memcpy(out + o, p + i, n);
			o += n;
		}
		i += n;
	}
	out[o] = '\0';
	return out;
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
