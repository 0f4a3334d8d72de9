/*
 * core/log: the JSON escaping of bytes a peer sent, the level names, and
 * the lines log_* write (stderr caught in a file): levels filter, a JSON
 * line carries ts, level and msg, and a key=value message its fields.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/log.h"

static const char *
esc(const char *s, size_t len)
{
	static char out[256];

	return log_json_escape(s, len, out, sizeof(out));
}

static void
test_json_escape(void)
{
	char small[8];

	CHECK_STR(esc("plain /path", 11), "plain /path");
	CHECK_STR(esc("a\"b\\c", 5), "a\\\"b\\\\c");
	CHECK_STR(esc("\n\t\r", 3), "\\n\\t\\r");
	CHECK_STR(esc("\x01\x1f\x7f", 3), "\\u0001\\u001f\\u007f");
	CHECK_STR(esc("nul\0x", 5), "nul\\u0000x");
	/* UTF-8 stays; what is not UTF-8 becomes U+FFFD, byte by byte */
	CHECK_STR(esc("caf\xc3\xa9", 5), "caf\xc3\xa9");
	CHECK_STR(esc("\xe2\x82\xac\xf0\x9f\x98\x80", 7),
	    "\xe2\x82\xac\xf0\x9f\x98\x80");
	CHECK_STR(esc("\xff", 1), "\\ufffd");
	CHECK_STR(esc("\xc3", 1), "\\ufffd");		/* cut sequence */
	CHECK_STR(esc("\xc0\xaf", 2), "\\ufffd\\ufffd");	/* overlong */
	CHECK_STR(esc("\xed\xa0\x80", 3), "\\ufffd\\ufffd\\ufffd"); /* surrogate */
	CHECK_STR(esc("\xf4\x90\x80\x80", 4),
	    "\\ufffd\\ufffd\\ufffd\\ufffd");		/* above U+10FFFF */
	/* never cut inside an escape */
	CHECK_STR(log_json_escape("ab\"cd", 5, small, 4), "ab");
	CHECK_STR(log_json_escape("\x01", 1, small, 6), "");
	CHECK_STR(log_json_escape("\x01", 1, small, 7), "\\u0001");
}

static void
test_parse(void)
{
	enum log_level l;
	enum log_format f;

	CHECK_INT(log_level_parse("debug", &l), 0);
	CHECK_INT(l, LOG_LVL_DEBUG);
	CHECK_INT(log_level_parse("warn", &l), 0);
	CHECK_INT(l, LOG_LVL_WARN);
	CHECK_INT(log_level_parse("error", &l), 0);
	CHECK_INT(l, LOG_LVL_ERROR);
	CHECK_INT(log_level_parse("Info", &l), -1);
	CHECK_INT(log_format_parse("json", &f), 0);
	CHECK_INT(f, LOG_FMT_JSON);
	CHECK_INT(log_format_parse("xml", &f), -1);
}

/* What the log calls in between wrote to stderr. */
static char *
caught(FILE *tmp, int saved)
{
	static char buf[8192];
	size_t n;

	fflush(stderr);
	dup2(saved, 2);
	rewind(tmp);
	n = fread(buf, 1, sizeof(buf) - 1, tmp);
	buf[n] = '\0';
	return buf;
}

static FILE *
catch_stderr(int *saved)
{
	FILE *tmp = tmpfile();

	fflush(stderr);
	*saved = dup(2);
	dup2(fileno(tmp), 2);
	return tmp;
}

static void
test_lines(void)
{
	FILE *tmp;
	char *out;
	int saved;

	log_init(LOG_LVL_INFO, "sandgate");
	log_set_format(LOG_FMT_TEXT);
	tmp = catch_stderr(&saved);
	log_debug("debug-line");
	log_info("info-line");
	log_warnx("warn-line");
	out = caught(tmp, saved);
	fclose(tmp);
	CHECK(strstr(out, "debug-line") == NULL);
	CHECK(strstr(out, " sandgate info: info-line\n") != NULL);
	CHECK(strstr(out, " sandgate warn: warn-line\n") != NULL);

	log_set_level(LOG_LVL_WARN);
	tmp = catch_stderr(&saved);
	log_info("info-line");
	log_warnx("warn-line");
	out = caught(tmp, saved);
	fclose(tmp);
	CHECK(strstr(out, "info-line") == NULL);
	CHECK(strstr(out, "warn-line") != NULL);

	log_set_level(LOG_LVL_ERROR);
	tmp = catch_stderr(&saved);
	log_warnx("warn-line");
	out = caught(tmp, saved);
	fclose(tmp);
	CHECK_STR(out, "");

	log_set_level(LOG_LVL_DEBUG);
	log_set_format(LOG_FMT_JSON);
	tmp = catch_stderr(&saved);
	log_debug("a \"quoted\" \x01 line");
	log_info("deny http sandbox=dev host=x.test path=/a\"b status=403 "
	    "ts=forged");
	out = caught(tmp, saved);
	fclose(tmp);
	CHECK_MSG(strncmp(out, "{\"ts\":\"", 7) == 0, "%s", out);
	CHECK_MSG(strstr(out, "\"level\":\"debug\",\"prog\":\"sandgate\","
	    "\"msg\":\"a \\\"quoted\\\" \\u0001 line\"}\n") != NULL, "%s", out);
	CHECK_MSG(strstr(out, "\"level\":\"info\"") != NULL, "%s", out);
	CHECK_MSG(strstr(out, ",\"decision\":\"deny\",\"kind\":\"http\","
	    "\"sandbox\":\"dev\",\"host\":\"x.test\",\"path\":\"/a\\\"b\","
	    "\"status\":\"403\"}\n") != NULL, "%s", out);
	/* a key=value cannot overwrite the line's own keys */
	CHECK_MSG(strstr(out, "\"ts\":\"forged\"") == NULL, "%s", out);
	log_set_format(LOG_FMT_TEXT);
	log_set_level(LOG_LVL_INFO);
}

int
main(void)
{
	test_json_escape();
	test_parse();
	test_lines();
	return check_summary();
}
