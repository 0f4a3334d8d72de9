/*
 * Unit tests of the watch over a passed-through TLS handshake
 * (parse/tls_watch.c): a further ClientHello is checked before any byte of
 * it may go on, whatever records come before it and however the bytes are
 * cut; the server's ServerHello ends the watch, its HelloRetryRequest only
 * once the second ClientHello passed. Real ClientHellos from the
 * ClientHello parser's fuzz seeds (openssl s_client, Python).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helper_parse.h"
#include "parse/tls_watch.h"

#define CAP	(200 * 1024)

static uint8_t	hello_x[4096], hello_py[4096];
static size_t	hello_x_len, hello_py_len;

/* The check: accepts the name x.test only; counts its calls. */
static int	checks;
static size_t	check_at;	/* bytes passed when it was called */
static size_t	passed;

static int
only_x(const struct tls_client_hello *ch, void *arg)
{
	(void)arg;
	checks++;
	check_at = passed;
	return ch->has_sni && strcmp(ch->sni, "x.test") == 0 ? 0 : -1;
}

/*
 * The relay's way: s[0..n) arrives step bytes at a time; what may go on is
 * taken out of the buffer, the rest waits. The bytes passed, or -1 when
 * refused (passed still counts what went on before).
 */
static long
feed(struct tls_watch *w, const uint8_t *s, size_t n, size_t step)
{
	static uint8_t buf[CAP];
	size_t have = 0, at = 0, k, pass;

	passed = 0;
	while (at < n) {
		k = n - at < step ? n - at : step;
		memcpy(buf + have, s + at, k);
		have += k;
		at += k;
		if (tls_watch_client(w, buf, have, &pass, only_x, NULL) == -1)
			return -1;
		if (pass > have)
			return -2;
		memmove(buf, buf + pass, have - pass);
		have -= pass;
		passed += pass;
	}
	return (long)passed;
}

static size_t
cat(uint8_t *out, size_t at, const uint8_t *p, size_t n)
{
	memcpy(out + at, p, n);
	return at + n;
}

static const uint8_t ccs[] = { 0x14, 0x03, 0x03, 0x00, 0x01, 0x01 };
static const uint8_t appdata[] = { 0x17, 0x03, 0x03, 0x00, 0x03, 1, 2, 3 };
/* A handshake record that is no ClientHello (TLS 1.2 ClientKeyExchange). */
static const uint8_t cke[] = { 0x16, 0x03, 0x03, 0x00, 0x06, 0x10, 0x00,
    0x00, 0x02, 0x01, 0x02 };

/* A server's first record: a ServerHello with random r (HRR or not). */
static size_t
server_hello(uint8_t *b, int hrr)
{
	static const uint8_t hrr_random[32] = {
		0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
		0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
		0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
		0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c
	};
	size_t i;

	memset(b, 0, 80);
	b[0] = 0x16; b[1] = 3; b[2] = 3; b[3] = 0; b[4] = 70;
	b[5] = 2; b[6] = 0; b[7] = 0; b[8] = 66;
	b[9] = 3; b[10] = 3;
	for (i = 0; i < 32; i++)
		b[11 + i] = hrr ? hrr_random[i] : (uint8_t)(i * 7 + 1);
	return 75;
}

static void
test_further_hello_refused(size_t step)
{
	static uint8_t s[CAP];
	struct tls_watch w;
	size_t n = 0, before;

	/* first hello (x.test), a CCS, early data, a hello naming py.x.test */
	n = cat(s, n, hello_x, hello_x_len);
	n = cat(s, n, ccs, sizeof(ccs));
	n = cat(s, n, appdata, sizeof(appdata));
	before = n;
	n = cat(s, n, hello_py, hello_py_len);
	n = cat(s, n, ccs, sizeof(ccs));
	tls_watch_start(&w, hello_x_len);
	checks = 0;
	CHECK_INT(feed(&w, s, n, step), -1);
	CHECK_INT(checks, 1);
	/* nothing of the refused hello went on */
	CHECK_MSG(passed <= before && check_at <= before, "step %zu: %zu",
	    step, passed);
}

static void
test_same_name_goes_on(void)
{
	static uint8_t s[CAP], sh[128];
	struct tls_watch w;
	size_t n = 0, shn;

	n = cat(s, n, hello_x, hello_x_len);
	tls_watch_start(&w, hello_x_len);
	CHECK_INT(feed(&w, s, n, 7), (long)n);
	/* the server asks again */
	shn = server_hello(sh, 1);
	CHECK_INT(tls_watch_server(&w, sh, 10), 1);	/* too few: held */
	CHECK_INT(tls_watch_server(&w, sh, shn), 0);
	CHECK(w.hrr && w.on && !tls_watch_done(&w));
	/* the second hello, the same name: checked, goes on, the watch ends */
	n = 0;
	n = cat(s, n, ccs, sizeof(ccs));
	n = cat(s, n, hello_x, hello_x_len);
	checks = 0;
	CHECK_INT(feed(&w, s, n, 3), (long)n);
	CHECK_INT(checks, 1);
	CHECK(tls_watch_done(&w));
	/* anything after it is not read */
	CHECK_INT(feed(&w, cke, sizeof(cke), 1), (long)sizeof(cke));
}

static void
test_pipelined_then_retry(void)
{
	static uint8_t s[CAP], sh[128];
	struct tls_watch w;
	size_t n = 0;

	/* both hellos before the server said anything */
	n = cat(s, n, hello_x, hello_x_len);
	n = cat(s, n, hello_x, hello_x_len);
	tls_watch_start(&w, hello_x_len);
	checks = 0;
	CHECK_INT(feed(&w, s, n, 1000), (long)n);
	CHECK_INT(checks, 1);
	CHECK(w.on);			/* a third would be checked too */
	CHECK_INT(feed(&w, hello_py, hello_py_len, 1000), -1);
	tls_watch_start(&w, hello_x_len);
	CHECK_INT(feed(&w, s, n, 1000), (long)n);
	(void)server_hello(sh, 1);
	CHECK_INT(tls_watch_server(&w, sh, 75), 0);
	CHECK(tls_watch_done(&w));	/* one retry request at most */
}

static void
test_server_hello_ends_it(void)
{
	static uint8_t sh[128];
	struct tls_watch w;

	tls_watch_start(&w, hello_x_len);
	CHECK_INT(feed(&w, hello_x, hello_x_len, 100), (long)hello_x_len);
	/* before the server answers, another handshake message is refused */
	CHECK_INT(feed(&w, cke, sizeof(cke), 100), -1);
	tls_watch_start(&w, hello_x_len);
	CHECK_INT(feed(&w, hello_x, hello_x_len, 100), (long)hello_x_len);
	(void)server_hello(sh, 0);
	CHECK_INT(tls_watch_server(&w, sh, 75), 0);
	CHECK(!w.hrr && tls_watch_done(&w));
	/* TLS 1.2's next flight: not a ClientHello, not looked at */
	CHECK_INT(feed(&w, cke, sizeof(cke), 100), (long)sizeof(cke));
	CHECK_INT(feed(&w, hello_py, hello_py_len, 100), (long)hello_py_len);
}

static void
test_unreadable_server_keeps_watch(void)
{
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02,
	    0x28 };
	static const uint8_t tiny[] = { 0x16, 0x03, 0x03, 0x00, 0x04, 0x02,
	    0x00, 0x00, 0x46 };
	uint8_t sh[128];
	struct tls_watch w;

	tls_watch_start(&w, 0);
	CHECK_INT(tls_watch_server(&w, alert, sizeof(alert)), 0);
	CHECK(w.server_done && w.on && !tls_watch_done(&w));
	CHECK_INT(feed(&w, hello_py, hello_py_len, 50), -1);
	/* a ServerHello cut into records too small to read: still watched */
	tls_watch_start(&w, 0);
	memcpy(sh, tiny, sizeof(tiny));
	memset(sh + sizeof(tiny), 0x16, 60);
	CHECK_INT(tls_watch_server(&w, sh, 9), 1);
	CHECK_INT(tls_watch_server(&w, sh, 60), 0);
	CHECK(w.on && !w.hrr);
	CHECK_INT(feed(&w, hello_py, hello_py_len, 50), -1);
}

static void
test_not_tls_refused(void)
{
	static const uint8_t junk[] = { 0x47, 0x45, 0x54, 0x20, 0x2f, 0x20 };
	static const uint8_t v2[] = { 0x17, 0x02, 0x00, 0x00, 0x01, 0x00 };
	struct tls_watch w;

	tls_watch_start(&w, 0);
	CHECK_INT(feed(&w, junk, sizeof(junk), 6), -1);
	tls_watch_start(&w, 0);
	CHECK_INT(feed(&w, v2, sizeof(v2), 6), -1);
	/* a record header still coming: nothing decided, nothing passed */
	tls_watch_start(&w, 0);
	CHECK_INT(feed(&w, ccs, 4, 1), 0);
}

int
main(void)
{
	size_t steps[] = { 1, 2, 5, 64, 517, 100000 }, i;

	hello_x_len = load_seed("openssl_sni.bin", hello_x, sizeof(hello_x));
	hello_py_len = load_seed("python_sni.bin", hello_py, sizeof(hello_py));
	if (hello_x_len == 0 || hello_py_len == 0) {
		fprintf(stderr, "test_tls_watch: the seed hellos are missing\n");
		return 1;
	}
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		test_further_hello_refused(steps[i]);
	test_same_name_goes_on();
	test_pipelined_then_retry();
	test_server_hello_ends_it();
	test_unreadable_server_keeps_watch();
	test_not_tls_refused();
	return check_summary();
}
