/*
 * http_chunked_decode: the payload of a chunked body comes out whole and in
 * order at every split of the input, framing, extensions and trailers never
 * do, and the decoder agrees with http_chunked_feed on consumed bytes.
 */
#include <string.h>

#include "check.h"
#include "parse/http_parse.h"

struct sink {
	char	buf[256];
	size_t	len;
};

static void
collect(const char *p, size_t n, void *arg)
{
	struct sink *s = arg;

	if (s->len + n <= sizeof(s->buf)) {
		memcpy(s->buf + s->len, p, n);
		s->len += n;
	} else
		s->len = sizeof(s->buf) + 1;	/* overflow: the test fails */
}

struct dcase {
	const char	*body;
	const char	*payload;
};

static const struct dcase cases[] = {
	{ "5\r\nhello\r\n0\r\n\r\n", "hello" },
	{ "3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", "abcdefg" },
	{ "a\r\n0123456789\r\n0\r\nX-Trailer: 5\r\n\r\n", "0123456789" },
	{ "1\r\n\r\r\n1\r\n\n\r\n0\r\n\r\n", "\r\n" },
	{ "0\r\n\r\n", "" },
};

struct ecase {
	const char	*body;
	const char	*payload;
	const char	*ext;
};

static const struct ecase ecases[] = {
	{ "5\r\nhello\r\n0\r\n\r\n", "hello", "" },
	{ "3;ext=1\r\nabc\r\n4 ; q=\"x;y\"\r\ndefg\r\n0;last\r\n\r\n",
	    "abcdefg", "ext=1| q=\"x;y\"|last|" },
	{ "1;\r\nA\r\n0\r\nT: v;w\r\n\r\n", "A", "|" },
};

struct both {
	struct sink	*data, *ext;
};

static void
both_data(const char *p, size_t n, void *arg)
{
	collect(p, n, ((struct both *)arg)->data);
}

static void
both_ext(const char *p, size_t n, void *arg)
{
	if (p == NULL)
		collect("|", 1, ((struct both *)arg)->ext);	/* a line's end */
	else
		collect(p, n, ((struct both *)arg)->ext);
}

int
main(void)
{
	size_t i, split, tail;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *b = cases[i].body;
		size_t len = strlen(b);

		for (split = 0; split <= len; split++) {
			struct http_chunked c, f;
			struct sink s = { .len = 0 };
			ssize_t a, d;
			int done = 0, fdone = 0;

			http_chunked_init(&c);
			http_chunked_init(&f);
			a = http_chunked_decode(&c, b, split, &done, collect, &s);
			CHECK(a == (ssize_t)split);
			d = done ? 0 : http_chunked_decode(&c, b + split,
			    len - split, &done, collect, &s);
			CHECK_MSG(done, "case %zu split %zu not done", i, split);
			CHECK_INT(a + d, (ssize_t)len);
			CHECK_INT(s.len, strlen(cases[i].payload));
			CHECK(s.len <= sizeof(s.buf) &&
			    memcmp(s.buf, cases[i].payload, s.len) == 0);
			CHECK_INT(http_chunked_feed(&f, b, len, &fdone), (ssize_t)len);
			CHECK(fdone);
		}
		/* Bytes after the body are not consumed. */
		{
			char buf[128];
			struct http_chunked c;
			struct sink s = { .len = 0 };
			int done = 0;

			tail = (size_t)snprintf(buf, sizeof(buf), "%sGET /", b);
			http_chunked_init(&c);
			CHECK_INT(http_chunked_decode(&c, buf, tail, &done, collect,
			    &s), (ssize_t)len);
			CHECK(done);
		}
	}
	{
		struct http_chunked c;
		struct sink s = { .len = 0 };
		int done = 0;

		http_chunked_init(&c);
		CHECK_INT(http_chunked_decode(&c, "zz\r\n", 4, &done, collect, &s),
		    -1);
		CHECK_INT(s.len, 0);
	}
	/*
	 * http_chunked_decode_ext: the extensions' bytes (after ";", up to
	 * CR) come out whole and in order at every split, the payload apart.
	 */
	for (i = 0; i < sizeof(ecases) / sizeof(ecases[0]); i++) {
		const char *b = ecases[i].body;
		size_t len = strlen(b);

		for (split = 0; split <= len; split++) {
			struct http_chunked c;
			struct sink s = { .len = 0 }, e = { .len = 0 };
			struct both two = { &s, &e };
			ssize_t a, d;
			int done = 0;

			http_chunked_init(&c);
			a = http_chunked_decode_ext(&c, b, split, &done,
			    both_data, both_ext, &two);
			d = done ? 0 : http_chunked_decode_ext(&c, b + split,
			    len - split, &done, both_data, both_ext, &two);
			CHECK_MSG(done && a + d == (ssize_t)len,
			    "ext case %zu split %zu", i, split);
			CHECK(s.len == strlen(ecases[i].payload) &&
			    memcmp(s.buf, ecases[i].payload, s.len) == 0);
			CHECK_MSG(e.len == strlen(ecases[i].ext) &&
			    memcmp(e.buf, ecases[i].ext, e.len) == 0,
			    "ext case %zu split %zu: %.*s", i, split,
			    (int)(e.len < sizeof(e.buf) ? e.len : 0), e.buf);
		}
	}
	return check_summary();
}
