/*
 * Unit tests of kind oauth2's vault side: the entry's lines (oauth2_entry.c),
 * the token endpoint's answer as hostile input (oauth2_answer.c), snapshot
 * names for obtained tokens, and KEEPER_SECRET_PUT: the keeper writes a
 * rotated refresh token into an oauth2 credential's entry and refuses
 * every other name.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/config.h"
#include "core/diag.h"
#include "core/policy.h"
#include "vault/keeper.h"
#include "vault/keeper_msg.h"
#include "vault/oauth2_int.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

static char tmpdir[256];

static int
rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void
write_file(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	if ((f = fopen(path, "w")) == NULL) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void
test_entry(void)
{
	struct oauth2_entry e;
	const char *why = NULL;
	const char *ok = "client_id=abc\r\n\nclient_secret=s3cr=t\nrefresh_token=rt-1";
	unsigned char out[256];
	long n;

	CHECK(oauth2_entry_parse((const unsigned char *)ok, strlen(ok), &e,
	    &why) == 0);
	CHECK(e.client_id_len == 3 && memcmp(e.client_id, "abc", 3) == 0);
	CHECK(e.client_secret_len == 6 && memcmp(e.client_secret, "s3cr=t",
	    6) == 0);
	CHECK(e.refresh_token_len == 4 && memcmp(e.refresh_token, "rt-1",
	    4) == 0);
	CHECK(oauth2_entry_parse((const unsigned char *)"client_id=a\nfoo=b",
	    17, &e, &why) == -1);
	CHECK(oauth2_entry_parse((const unsigned char *)"client_id=a\n"
	    "client_id=b", 23, &e, &why) == -1);
	CHECK(oauth2_entry_parse((const unsigned char *)"client_id=a b", 13,
	    &e, &why) == -1);
	CHECK(oauth2_entry_parse((const unsigned char *)"client_id=", 10, &e,
	    &why) == -1);
	CHECK(oauth2_entry_parse((const unsigned char *)"just a secret", 13,
	    &e, &why) == -1);
	n = oauth2_entry_set_refresh((const unsigned char *)ok, strlen(ok),
	    "rt-2", 4, out, sizeof(out));
	CHECK(n > 0 && (size_t)n == strlen("client_id=abc\nclient_secret="
	    "s3cr=t\nrefresh_token=rt-2\n") && memcmp(out, "client_id=abc\n"
	    "client_secret=s3cr=t\nrefresh_token=rt-2\n", (size_t)n) == 0);
	CHECK(oauth2_entry_set_refresh((const unsigned char *)ok, strlen(ok),
	    "rt 2", 4, out, sizeof(out)) == -1);
	CHECK(oauth2_entry_set_refresh((const unsigned char *)ok, strlen(ok),
	    "rt-2", 4, out, 10) == -1);
}

static int
answer(const char *text, struct oauth2_answer *a)
{
	char buf[4096];
	size_t n = strlen(text);

	memcpy(buf, text, n);
	return oauth2_answer_parse(buf, n, a);
}

#define HEAD200 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

static void
test_answer(void)
{
	struct oauth2_answer a;

	CHECK(answer(HEAD200 "Content-Length: 84\r\n\r\n{\"access_token\":"
	    "\"at-1\",\"token_type\":\"bearer\",\"expires_in\":30,\"refresh_token"
	    "\":\"rt-9\"}", &a) == 0);
	CHECK(a.access_len == 4 && memcmp(a.access, "at-1", 4) == 0);
	CHECK(a.refresh_len == 4 && memcmp(a.refresh, "rt-9", 4) == 0);
	CHECK(a.expires_in == 30);
	oauth2_answer_free(&a);
	/* chunked, no expires_in, no refresh token */
	CHECK(answer(HEAD200 "Transfer-Encoding: chunked\r\n\r\n"
	    "10\r\n{\"access_token\":\r\n1d;x=y\r\n\"at-2\",\"token_type\":"
	    "\"Bearer\"}\r\n0\r\n\r\n", &a) == 0);
	CHECK(a.access_len == 4 && memcmp(a.access, "at-2", 4) == 0);
	CHECK(a.refresh == NULL && a.expires_in == OAUTH2_DEFAULT_EXPIRES);
	oauth2_answer_free(&a);
	/* hostile or wrong */
	CHECK(answer(HEAD200 "\r\n{\"access_token\":12,\"token_type\":"
	    "\"Bearer\"}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a b\",\"token_type\":"
	    "\"Bearer\"}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a\",\"token_type\":"
	    "\"mac\"}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a\",\"token_type\":"
	    "\"Bearer\",\"expires_in\":\"60\"}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a\",\"token_type\":"
	    "\"Bearer\",\"expires_in\":-1}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a\",\"token_type\":"
	    "\"Bearer\",\"refresh_token\":[]}", &a) == -1);
	CHECK(answer(HEAD200 "\r\n{\"access_token\":\"a\",\"access_token\":"
	    "\"b\",\"token_type\":\"Bearer\"}", &a) == -1);
	CHECK(answer(HEAD200 "Content-Length: 500\r\n\r\n{}", &a) == -1);
	CHECK(answer(HEAD200 "Transfer-Encoding: chunked\r\n\r\nzz\r\n", &a) ==
	    -1);
	CHECK(answer(HEAD200 "{\"access_token\":\"a\"}", &a) == -1);
	CHECK(answer("HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n{\"access_"
	    "token\":\"a\",\"token_type\":\"Bearer\"}", &a) == -1);
	CHECK(strstr(a.why, "redirect") != NULL);
	CHECK(answer("HTTP/1.1 400 Bad\r\n\r\n{\"error\":\"invalid_grant\"}",
	    &a) == -1);
	CHECK(strstr(a.why, "400 invalid_grant") != NULL);
	/* Any other "error" text is the endpoint's, maybe an echo of the
	 * refresh token: never copied into the message. */
	CHECK(answer("HTTP/1.1 400 Bad\r\n\r\n{\"error\":\"rt_refresh_token"
	    "value\"}", &a) == -1);
	CHECK(strstr(a.why, "rt_") == NULL && strstr(a.why, "refresh") == NULL);
	CHECK(strstr(a.why, "400 unlisted error code") != NULL);
	CHECK(answer("HTTP/1.1 400 Bad\r\n\r\n{\"error\":\"invalid_grant:"
	    "rt_x\"}", &a) == -1);
	CHECK(strstr(a.why, "rt") == NULL);
	CHECK(answer("HTTP/1.1 401 No\r\n\r\n{\"error\":7}", &a) == -1);
	CHECK(strstr(a.why, "401 unlisted error code") != NULL);
	CHECK(answer("SSH-2.0-x\r\n\r\n", &a) == -1);
}

static void
test_snap_names(void)
{
	const char *names[] = { "crm#access", "crm" };
	const unsigned char *vals[] = { (const unsigned char *)"tok",
	    (const unsigned char *)"entry" };
	const size_t lens[] = { 3, 5 };
	const char *n2[] = { "crm#access" };
	const unsigned char *v2[] = { (const unsigned char *)"tok2" };
	const size_t l2[] = { 4 };
	struct vault_snapshot *s, *x;
	const unsigned char *v;
	size_t len = 0;

	CHECK(vault_snap_name_valid("crm#access"));
	CHECK(!vault_snap_name_valid("crm#"));
	CHECK(!vault_snap_name_valid("crm#ACCESS"));
	CHECK(!vault_snap_name_valid("#access"));
	CHECK(!vault_snap_name_valid("crm#access#x"));
	CHECK(!vault_snap_name_valid("crm#toolongname"));
	s = vault_snapshot_build(names, vals, lens, 2);
	CHECK(s != NULL);
	x = oauth2_snap_extend(s, n2, v2, l2, 1);
	CHECK(x != NULL);
	v = oauth2_snap_value(x, "crm#access", &len);
	CHECK(v != NULL && len == 4 && memcmp(v, "tok2", 4) == 0);
	v = oauth2_snap_value(x, "crm", &len);
	CHECK(v != NULL && len == 5);
	vault_snapshot_unref(s);
	vault_snapshot_unref(x);
}

/* An oauth2 entry's client secret and refresh token as parts (for dlp). */
/* RFC 6749 2.3.1: the id and secret form-encoded, then base64. */
static void
test_basic(void)
{
	struct oauth2_entry e = { "s6BhdRkqt3", 10, "7Fjfp0ZBr1KtDRbnfVdmIw",
	    22, NULL, 0 };
	struct oauth2_entry odd = { "a b", 3, "p:w/+", 5, NULL, 0 };
	struct oauth2_entry pub = { "only", 4, NULL, 0, NULL, 0 };
	size_t len = 0;
	char *b;

	b = oauth2_entry_basic(&e, &len);
	CHECK(b != NULL && len == 44 && memcmp(b,
	    "czZCaGRSa3F0Mzo3RmpmcDBaQnIxS3REUmJuZlZkbUl3", 44) == 0);
	vault_secmem_free(b);
	/* "a%20b:p%3Aw%2F%2B" */
	b = oauth2_entry_basic(&odd, &len);
	CHECK(b != NULL && len == 24 &&
	    memcmp(b, "YSUyMGI6cCUzQXclMkYlMkI=", 24) == 0);
	vault_secmem_free(b);
	CHECK(oauth2_entry_basic(&pub, &len) == NULL);
}

static void
test_snap_parts(void)
{
	static const char entry[] = "client_id=app\nclient_secret=cs-9f8e7d\n"
	    "refresh_token=rt-1a2b3c\n";
	const char *names[] = { "crm", "bad", "plain" };
	const unsigned char *vals[] = { (const unsigned char *)entry,
	    (const unsigned char *)"client_id=x\nnope=1\n",
	    (const unsigned char *)"client_id=only\n" };
	const size_t lens[] = { sizeof(entry) - 1, 19, 15 };
	const char *which[] = { "crm", "bad", "plain", "absent" };
	struct vault_snapshot *s, *x, *y;
	const unsigned char *v;
	size_t len = 0;

	s = vault_snapshot_build(names, vals, lens, 3);
	CHECK(s != NULL);
	if (s == NULL)
		return;
	x = oauth2_snap_parts(s, which, 4);
	CHECK(x != NULL && x != s);
	v = oauth2_snap_value(x, "crm" OAUTH2_PART_CLIENT, &len);
	CHECK(v != NULL && len == 9 && memcmp(v, "cs-9f8e7d", 9) == 0);
	v = oauth2_snap_value(x, "crm#refresh", &len);
	CHECK(v != NULL && len == 9 && memcmp(v, "rt-1a2b3c", 9) == 0);
	CHECK(oauth2_snap_value(x, "crm", &len) != NULL && len == lens[0]);
	/* base64("app:cs-9f8e7d"), as a token request's Basic sends it. */
	v = oauth2_snap_value(x, "crm" OAUTH2_PART_BASIC, &len);
	CHECK(v != NULL && len == 20 &&
	    memcmp(v, "YXBwOmNzLTlmOGU3ZA==", 20) == 0);
	CHECK(!vault_snapshot_has(x, "plain" OAUTH2_PART_BASIC));
	CHECK(!vault_snapshot_has(x, "bad" OAUTH2_PART_CLIENT));
	CHECK(!vault_snapshot_has(x, "plain" OAUTH2_PART_CLIENT));
	CHECK(!vault_snapshot_has(x, "plain#refresh"));
	/* Nothing to add: the same snapshot, referenced. */
	y = oauth2_snap_parts(s, which + 1, 3);
	CHECK(y == s);
	vault_snapshot_unref(y);
	vault_snapshot_unref(x);
	vault_snapshot_unref(s);
}

struct kthread {
	pthread_t	 t;
	struct keeper	*k;
	int		 fd;
	int		 rc;
};

static void *
kthread_main(void *arg)
{
	struct kthread *kt = arg;

	kt->rc = keeper_serve(kt->k, kt->fd);
	return NULL;
}

/* The entry's value as the vault holds it now. */
static int
vault_value_is(const struct config *cfg, const char *name, const char *want)
{
	const char *names[1] = { name }, *err = NULL;
	struct vault_snapshot *s;
	struct vault *v;
	const unsigned char *val;
	size_t len = 0;
	int ok;

	if ((v = vault_open(cfg->vault_db, cfg->vault_key_file, 0, &err)) ==
	    NULL)
		return 0;
	s = vault_snapshot_load(v, names, 1, &err);
	val = s != NULL ? oauth2_snap_value(s, name, &len) : NULL;
	ok = val != NULL && len == strlen(want) && memcmp(val, want, len) == 0;
	vault_snapshot_unref(s);
	vault_close(v);
	return ok;
}

#define ENTRY	"client_id=id\nclient_secret=sec\nrefresh_token=rt-0\n"

static void
test_keeper_put(void)
{
	struct config *cfg;
	struct policy *pol;
	struct keeper_client *kc;
	struct keeper_msg *m;
	struct keeper_view view;
	struct kthread kt;
	struct vault *v;
	struct diag d;
	const char *err = NULL;
	char path[512], cfgtext[2048];
	int sv[2];

	snprintf(path, sizeof(path), "%s/policies", tmpdir);
	mkdir(path, 0700);
	write_file("policies/p.yaml",
	    "policies:\n"
	    "  - name: p\n"
	    "    allow: [ { host: api.example.com, tls: intercept } ]\n"
	    "    credentials: [oa, cc, st]\n"
	    "credentials:\n"
	    "  - name: oa\n    kind: oauth2\n    secret: oa-entry\n"
	    "    hosts: [api.example.com]\n"
	    "    oauth2: { token_url: \"https://auth.example.com/token\" }\n"
	    "  - name: cc\n    kind: oauth2\n    secret: cc-entry\n"
	    "    hosts: [api.example.com]\n"
	    "    oauth2: { token_url: \"https://auth.example.com/token\","
	    " grant: client_credentials }\n"
	    "  - name: st\n    secret: static-entry\n"
	    "    hosts: [api.example.com]\n");
	snprintf(cfgtext, sizeof(cfgtext),
	    "state_dir: %1$s/var\n"
	    "policies: [%1$s/policies]\n"
	    "ca: { cert: %1$s/ca.crt, key: %1$s/ca.key }\n"
	    "vault: { db: %1$s/vault.db, key_file: %1$s/vault.key }\n"
	    "audit: { db: %1$s/audit.db }\n", tmpdir);
	write_file("sandgate.yaml", cfgtext);
	snprintf(path, sizeof(path), "%s/sandgate.yaml", tmpdir);
	diag_init(&d);
	cfg = config_load(path, &d);
	pol = cfg != NULL ? policy_load(cfg, &d) : NULL;
	if (pol == NULL) {
		diag_print(&d, stderr);
		CHECK(0);
		return;
	}
	diag_free(&d);
	v = vault_open(cfg->vault_db, cfg->vault_key_file, 1, &err);
	CHECK(v != NULL &&
	    vault_set(v, "oa-entry", ENTRY, strlen(ENTRY), VAULT_SET_NEW,
	    &err) == 0 &&
	    vault_set(v, "cc-entry", ENTRY, strlen(ENTRY), VAULT_SET_NEW,
	    &err) == 0 &&
	    vault_set(v, "static-entry", ENTRY, strlen(ENTRY), VAULT_SET_NEW,
	    &err) == 0 &&
	    vault_set(v, "unbound", ENTRY, strlen(ENTRY), VAULT_SET_NEW,
	    &err) == 0);
	if (v != NULL)
		vault_close(v);

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1 ||
	    (kt.k = keeper_open(cfg, pol, &err)) == NULL) {
		CHECK(0);
		return;
	}
	kt.fd = sv[1];
	CHECK(pthread_create(&kt.t, NULL, kthread_main, &kt) == 0);
	kc = keeper_client_new(sv[0], &err);
	CHECK(kc != NULL);
	if (kc != NULL) {
		CHECK_INT(keeper_client_put_refresh(kc, "oa-entry", "rt-1", 4),
		    KEEPER_OK);
		/* Only an oauth2 refresh_token entry is written. */
		CHECK_INT(keeper_client_put_refresh(kc, "cc-entry", "rt-x", 4),
		    KEEPER_DENIED);
		CHECK_INT(keeper_client_put_refresh(kc, "static-entry", "rt-x",
		    4), KEEPER_DENIED);
		CHECK_INT(keeper_client_put_refresh(kc, "unbound", "rt-x", 4),
		    KEEPER_DENIED);
		CHECK(keeper_client_up(kc));
		keeper_client_free(kc);
	}
	pthread_join(kt.t, NULL);
	close(kt.fd);
	keeper_free(kt.k);
	CHECK(vault_value_is(cfg, "oa-entry", "client_id=id\nclient_secret="
	    "sec\nrefresh_token=rt-1\n"));
	CHECK(vault_value_is(cfg, "cc-entry", ENTRY));
	CHECK(vault_value_is(cfg, "static-entry", ENTRY));
	CHECK(vault_value_is(cfg, "unbound", ENTRY));

	/* A token with a space, or no name: not a request at all. */
	if ((m = calloc(1, sizeof(*m))) != NULL) {
		keeper_msg_make(m, KEEPER_SECRET_PUT, KEEPER_OK, 1,
		    "\x08oa-entry", 9, "rt 1", 4);
		CHECK(keeper_msg_parse(m, sizeof(*m), 0, &view) == -1);
		keeper_msg_make(m, KEEPER_SECRET_PUT, KEEPER_OK, 1,
		    "\x08oa-entry", 9, "rt-1", 4);
		CHECK(keeper_msg_parse(m, sizeof(*m), 0, &view) == 0 &&
		    strcmp(view.name, "oa-entry") == 0 && view.len == 4);
		keeper_msg_make(m, KEEPER_SECRET_PUT, KEEPER_OK, 1,
		    "\x09oa-entry", 9, NULL, 0);
		CHECK(keeper_msg_parse(m, sizeof(*m), 0, &view) == -1);
		free(m);
	}
	policy_unref(pol);
	config_free(cfg);
}

int
main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_oauth2.XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	test_entry();
	test_answer();
	test_snap_names();
	test_basic();
	test_snap_parts();
	test_keeper_put();
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary();
}
