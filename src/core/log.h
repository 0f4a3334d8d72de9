/*
 * Process-wide logging: one line per message to stderr (journald picks it up
 * under systemd). Owns the log level; bytes a peer sent are escaped with
 * log_escape() before they reach a format string argument.
 */
#ifndef SG_LOG_H
#define SG_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
/*
 * text: "2026-12-05T02:04:30.123Z sandgate info: MESSAGE"; json: one object
 * per line, {"ts","level","prog","msg"} and, for a key=value message (the
 * per-request decision line), each key as a field of its own.
 */
enum log_format { LOG_FMT_TEXT, LOG_FMT_JSON };

void	log_init(enum log_level, const char *progname);
void	log_set_level(enum log_level);
void	log_set_format(enum log_format);
int	log_enabled(enum log_level);
/* "debug", "info", "warn" (or "warning"), "error"; "text", "json". -1: none. */
int	log_level_parse(const char *, enum log_level *);
int	log_format_parse(const char *, enum log_format *);
void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
/* Drain OpenSSL's error queue into the log, prefixed by what was being done. */
void	log_openssl(const char *what);
/*
 * A command's one line for its user on stderr, "sandgate: MESSAGE\n", not
 * through the log (the CLI's errors and the launcher's); once serve set
 * the JSON format, a JSON line of level "error" instead.
 */
void	say_err(const char *, ...) __attribute__((format(printf, 1, 2)));
void	vsay_err(const char *, va_list) __attribute__((format(printf, 1, 0)));
/*
 * Start-up: log_hold(1) keeps the newest warning back; log_release()
 * prints it (start-up went on), log_take_held() hands its text over
 * instead (start-up failed: it becomes the one error line).
 */
void	log_hold(int on);
void	log_release(void);
void	log_take_held(char *buf, size_t len);
/*
 * Copy at most len bytes of peer data into out (size outlen, always
 * terminated), escaping anything but printable ASCII as \xNN.
 */
const char *log_escape(const void *data, size_t len, char *out, size_t outlen);
/*
 * The same for a value that stands as one word of a key=value line (a
 * destination as written): spaces and double quotes are escaped too, so
 * a peer cannot write fields of its own into the line.
 */
const char *log_escape_word(const void *data, size_t len, char *out,
	    size_t outlen);
/*
 * data as the inside of a JSON string into out (size outlen, always
 * terminated, never cut inside an escape): quote, backslash and control
 * bytes escaped, bytes that are not UTF-8 as U+FFFD. Returns out.
 */
const char *log_json_escape(const void *data, size_t len, char *out,
	    size_t outlen);

#endif
