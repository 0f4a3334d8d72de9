/*
 * Unit tests of the ingress parsers: PORT-ID.<domain> hosts (accepted,
 * foreign and malformed), the sg_token query parameter and cookie cut out
 * of a request, and the token's syntax.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "parse/ingress_host.h"

#define OK	INGRESS_HOST_OK
#define BAD	INGRESS_HOST_BAD
#define FOREIGN	INGRESS_HOST_FOREIGN

static const struct host_case {
	const char	*host;
	int		 rc;
	unsigned	 port;
	const char	*id;
} host_cases[] = {
	{ "8000-abc.sandbox.localhost", OK, 8000, "abc" },
	{ "8000-abc.sandbox.localhost:8080", OK, 8000, "abc" },
	{ "8000-abc.sandbox.localhost.", OK, 8000, "abc" },
	{ "8000-abc.sandbox.localhost.:8080", OK, 8000, "abc" },
	{ "8000-ABC.Sandbox.LocalHost", OK, 8000, "abc" },
	{ "1-a.sandbox.localhost", OK, 1, "a" },
	{ "65535-z9.sandbox.localhost", OK, 65535, "z9" },
	{ "3000-my-box-1.sandbox.localhost", OK, 3000, "my-box-1" },
	{ "3000-0123456789012345678901234567890123456789.sandbox.localhost",
	    OK, 3000, "0123456789012345678901234567890123456789" },
	/* a host, but not one of ours: 404 */
	{ "3000-01234567890123456789012345678901234567890.sandbox.localhost",
	    FOREIGN, 0, NULL },
	{ "65536-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "0-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "08000-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "123456-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "8000abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "8000-.sandbox.localhost", FOREIGN, 0, NULL },
	{ "8000--abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "8000-a_b.sandbox.localhost", FOREIGN, 0, NULL },
	{ "abc-8000.sandbox.localhost", FOREIGN, 0, NULL },
	{ "x.8000-abc.sandbox.localhost", FOREIGN, 0, NULL },
	{ "8000-abc.sandbox.localhost.evil.test", FOREIGN, 0, NULL },
	{ "8000-abc.xsandbox.localhost", FOREIGN, 0, NULL },
	{ "8000-abc.localhost", FOREIGN, 0, NULL },
	{ "sandbox.localhost", FOREIGN, 0, NULL },
	{ "localhost", FOREIGN, 0, NULL },
	{ "127.0.0.1", FOREIGN, 0, NULL },
	{ "[::1]:8080", FOREIGN, 0, NULL },
	/* not a host at all: 400 */
	{ "", BAD, 0, NULL },
	{ ":8080", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost:", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost:0", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost:65536", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost:80:80", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost:http", BAD, 0, NULL },
	{ "8000-abc..sandbox.localhost", BAD, 0, NULL },
	{ ".8000-abc.sandbox.localhost", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost..", BAD, 0, NULL },
	{ "8000-abc.sandbox.local host", BAD, 0, NULL },
	{ "8000-abc.sandbox.localhost/x", BAD, 0, NULL },
	{ "8000-abc@sandbox.localhost", BAD, 0, NULL },
	{ "[::1", BAD, 0, NULL },
};

static void
test_hosts(void)
{
	struct ingress_host ih;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(host_cases) / sizeof(host_cases[0]); i++) {
		const struct host_case *c = &host_cases[i];

		rc = ingress_host_parse(c->host, strlen(c->host),
		    "sandbox.localhost", &ih);
		CHECK_MSG(rc == c->rc, "%s: rc %d, want %d", c->host, rc, c->rc);
		if (rc != OK || c->rc != OK)
			continue;
		CHECK_INT(ih.port, c->port);
		CHECK_STR(ih.id, c->id);
	}
	/* The name as the row shows it: lower-case, no dot or port. */
	CHECK_INT(ingress_host_parse("8000-AbC.SANDBOX.localhost.:1", 29,
	    "sandbox.localhost", &ih), OK);
	CHECK_STR(ih.name, "8000-abc.sandbox.localhost");
	/* Only len bytes count: a longer buffer is not read past it. */
	CHECK_INT(ingress_host_parse("8000-abc.sandbox.localhostXYZ", 26,
	    "sandbox.localhost", &ih), OK);
	/* Another domain, with more labels. */
	CHECK_INT(ingress_host_parse("443-box.a.b.example.test", 24,
	    "a.b.example.test", &ih), OK);
	CHECK_INT(ingress_host_parse("443-box.b.example.test", 22,
	    "a.b.example.test", &ih), FOREIGN);
}

static const struct query_case {
	const char	*in;
	const char	*out;
	const char	*tok;		/* NULL: none found */
} query_cases[] = {
	{ "/", "/", NULL },
	{ "/a?b=1", "/a?b=1", NULL },
	{ "/a?sg_token=abc", "/a", "abc" },
	{ "/a?sg_token=abc&b=1", "/a?b=1", "abc" },
	{ "/a?b=1&sg_token=abc", "/a?b=1", "abc" },
	{ "/a?b=1&sg_token=abc&c=2", "/a?b=1&c=2", "abc" },
	{ "/a?sg_token=one&sg_token=two", "/a", "one" },
	{ "/a?sg_token", "/a", "" },
	{ "/a?sg_token=", "/a", "" },
	{ "/a?sg%5Ftoken=abc&x=1", "/a?x=1", "abc" },
	{ "/a?sg%5ftoken=abc", "/a", "abc" },
	{ "/a?xsg_token=abc", "/a?xsg_token=abc", NULL },
	{ "/a?sg_tokenx=abc", "/a?sg_tokenx=abc", NULL },
	{ "/a?SG_TOKEN=abc", "/a?SG_TOKEN=abc", NULL },
	{ "/a?b=1&&c=2", "/a?b=1&c=2", NULL },
	{ "/a?&sg_token=x", "/a", "x" },
	{ "/a?", "/a", NULL },
	{ "/sg_token=abc", "/sg_token=abc", NULL },
	{ "/a?b=sg_token=abc", "/a?b=sg_token=abc", NULL },
};

static void
test_query(void)
{
	char out[256];
	const char *tok;
	size_t i, toklen;
	int n;

	for (i = 0; i < sizeof(query_cases) / sizeof(query_cases[0]); i++) {
		const struct query_case *c = &query_cases[i];

		n = ingress_strip_query(c->in, strlen(c->in), out, sizeof(out),
		    &tok, &toklen);
		CHECK_MSG(n == (int)strlen(c->out) && strcmp(out, c->out) == 0,
		    "%s: got %s (%d), want %s", c->in, out, n, c->out);
		if (c->tok == NULL)
			CHECK_MSG(tok == NULL, "%s: a token was found", c->in);
		else
			CHECK_MSG(tok != NULL && toklen == strlen(c->tok) &&
			    memcmp(tok, c->tok, toklen) == 0, "%s: token", c->in);
	}
	/* Too small an output is an error, never a cut target. */
	CHECK_INT(ingress_strip_query("/abcdef?x=1", 11, out, 5, &tok, &toklen),
	    -1);
	CHECK_INT(ingress_strip_query("/a?sg_token=x", 13, out, 3, &tok,
	    &toklen), 2);
	CHECK_STR(out, "/a");
}

static const struct cookie_case {
	const char	*in;
	const char	*out;
	const char	*tok;
} cookie_cases[] = {
	{ "a=1", "a=1", NULL },
	{ "sg_token=abc", "", "abc" },
	{ "a=1; sg_token=abc", "a=1", "abc" },
	{ "sg_token=abc; a=1", "a=1", "abc" },
	{ "a=1; sg_token=abc; b=2", "a=1; b=2", "abc" },
	{ "a=1;sg_token=abc;b=2", "a=1; b=2", "abc" },
	{ "  a=1 ;  sg_token=abc  ; b=2  ", "a=1; b=2", "abc" },
	{ "sg_token=one; sg_token=two", "", "one" },
	{ "xsg_token=abc", "xsg_token=abc", NULL },
	{ "sg_tokens=abc", "sg_tokens=abc", NULL },
	{ "a=sg_token=abc", "a=sg_token=abc", NULL },
	{ ";;a=1;;", "a=1", NULL },
	{ "", "", NULL },
};

static void
test_cookie(void)
{
	char out[256];
	const char *tok;
	size_t i, toklen;
	int n;

	for (i = 0; i < sizeof(cookie_cases) / sizeof(cookie_cases[0]); i++) {
		const struct cookie_case *c = &cookie_cases[i];

		n = ingress_strip_cookie(c->in, strlen(c->in), out, sizeof(out),
		    &tok, &toklen);
		CHECK_MSG(n == (int)strlen(c->out) && strcmp(out, c->out) == 0,
		    "[%s]: got [%s] (%d), want [%s]", c->in, out, n, c->out);
		if (c->tok == NULL)
			CHECK_MSG(tok == NULL, "[%s]: a token was found", c->in);
		else
			CHECK_MSG(tok != NULL && toklen == strlen(c->tok) &&
			    memcmp(tok, c->tok, toklen) == 0, "[%s]: token", c->in);
	}
	CHECK_INT(ingress_strip_cookie("a=1; b=2", 8, out, 4, &tok, &toklen), -1);
}

static void
test_token_syntax(void)
{
	char big[INGRESS_TOKEN_MAX + 2];

	CHECK(ingress_token_syntax_ok("abc", 3));
	CHECK(ingress_token_syntax_ok("A-z_0.9~", 8));
	CHECK(!ingress_token_syntax_ok("", 0));
	CHECK(!ingress_token_syntax_ok("a b", 3));
	CHECK(!ingress_token_syntax_ok("a;b", 3));
	CHECK(!ingress_token_syntax_ok("a%20", 4));
	CHECK(!ingress_token_syntax_ok("a\r\nb", 4));
	memset(big, 'a', sizeof(big));
	CHECK(ingress_token_syntax_ok(big, INGRESS_TOKEN_MAX));
	CHECK(!ingress_token_syntax_ok(big, INGRESS_TOKEN_MAX + 1));
}

/* A guest's Set-Cookie that would set the token cookie. */
static void
test_set_cookie(void)
{
	static const struct {
		const char	*v;
		int		 is;
	} tc[] = {
		{ "sg_token=x; Domain=sandbox.localhost; Path=/", 1 },
		{ "  sg_token =x", 1 },
		{ "sg%5Ftoken=x", 1 },
		{ "sg_token=", 1 },
		{ "sg_tokens=x", 0 },
		{ "xsg_token=x", 0 },
		{ "SG_TOKEN=x", 0 },
		{ "sg_token", 0 },
		{ "app=1; sg_token=x", 0 },
		{ "", 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++)
		CHECK_MSG(ingress_set_cookie_is_token(tc[i].v, strlen(tc[i].v)) ==
		    tc[i].is, "Set-Cookie: %s", tc[i].v);
}

int
main(void)
{
	test_hosts();
	test_set_cookie();
	test_query();
	test_cookie();
	test_token_syntax();
	return check_summary();
}
