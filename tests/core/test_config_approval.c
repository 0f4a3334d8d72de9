/*
 * Unit test of the approval: keys (docs/config.md, mode: ask): defaults,
 * values read, and each mistake an error at its line: a duration out of
 * range, a notify URL that is not http:// or https://, a program that is not an
 * absolute path, an unknown key.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "helper_core.h"
#include "core/config.h"

static char data_dir[1024];
static char tmp_dir[] = "/tmp/sg-cfgask-XXXXXX";

static struct config *
load(const char *name, const char *text, struct diag *d)
{
	diag_init(d);
	return config_load(coretest_tmpfile(name, text), d);
}

int
main(void)
{
	static const struct coretest_diag want[] = {
		{ 2, 12, "approval.timeout" },
		{ 3, 16, "approval.max_pending" },
		{ 4, 11, "http:// or https:// URL" },
		{ 5, 3, "approval" },
	};
	static const struct coretest_diag want_argv[] = {
		{ 2, 12, "absolute path" },
	};
	struct config *cfg;
	struct diag d;

	coretest_setup_dirs(data_dir, sizeof(data_dir), tmp_dir);
	cfg = config_load(NULL, &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK_INT(cfg->approval_timeout_ms, 60000);
		CHECK_INT(cfg->approval_max_pending, 20);
		CHECK(cfg->approval_notify_url == NULL);
		CHECK(cfg->approval_notify_argv[0] == NULL);
		config_free(cfg);
	}
	cfg = load("a.yaml", "approval:\n"
	    "  timeout: 2m\n"
	    "  max_pending: 0\n"
	    "  notify: [/usr/local/bin/ask-bot, --channel, ops]\n", &d);
	if (cfg == NULL)
		diag_print(&d, stderr);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK_INT(cfg->approval_timeout_ms, 120000);
		CHECK_INT(cfg->approval_max_pending, 0);
		CHECK(strcmp(cfg->approval_notify_argv[0],
		    "/usr/local/bin/ask-bot") == 0);
		CHECK(strcmp(cfg->approval_notify_argv[2], "ops") == 0);
		CHECK(cfg->approval_notify_argv[3] == NULL);
		config_free(cfg);
	}
	diag_free(&d);
	cfg = load("b.yaml", "approval:\n"
	    "  notify: \"http://127.0.0.1:8099/hook\"\n", &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK(strcmp(cfg->approval_notify_url,
		    "http://127.0.0.1:8099/hook") == 0);
		config_free(cfg);
	}
	diag_free(&d);
	cfg = load("b2.yaml", "approval:\n"
	    "  notify: \"https://hooks.example.com/x\"\n", &d);
	CHECK(cfg != NULL);
	if (cfg != NULL) {
		CHECK(strcmp(cfg->approval_notify_url,
		    "https://hooks.example.com/x") == 0);
		config_free(cfg);
	}
	diag_free(&d);
	cfg = load("c.yaml", "approval:\n"
	    "  timeout: 0s\n"
	    "  max_pending: -1\n"
	    "  notify: \"ftp://hooks.example.com/x\"\n"
	    "  ask: true\n", &d);
	CHECK(cfg == NULL);
	coretest_check_diags(&d, coretest_tmpfile("c.yaml", ""), want,
	    sizeof(want) / sizeof(want[0]));
	diag_free(&d);
	cfg = load("d.yaml", "approval:\n"
	    "  notify: [ask-bot]\n", &d);
	CHECK(cfg == NULL);
	coretest_check_diags(&d, coretest_tmpfile("d.yaml", ""), want_argv,
	    sizeof(want_argv) / sizeof(want_argv[0]));
	diag_free(&d);
	return check_summary();
}
