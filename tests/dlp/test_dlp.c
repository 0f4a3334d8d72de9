/*
 * Secret detection (src/dlp/): every default rule fires on a fake secret
 * of its shape (made here, with valid checksums), raw, split byte by byte,
 * and through each encoding; checks refuse near misses; the benign corpus
 * (tests/dlp/benign) gives no finding; custom rules and the allow filter.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dlp/dlp.h"

static uint64_t seed = 0x5eed;

static int
rnd(int n)
{
	seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (int)((seed >> 33) % (uint64_t)n);
}

static void
rand_from(char *out, size_t n, const char *alphabet)
{
	size_t i, k = strlen(alphabet);

	for (i = 0; i < n; i++)
		out[i] = alphabet[rnd((int)k)];
	out[n] = '\0';
}

#define B62 "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define B64 B62 "+/"

static void
github_token(char *out, const char *prefix)
{
	uint32_t crc;
	int i;

	strcpy(out, prefix);
	rand_from(out + 4, 30, B62);
	crc = dlp_crc32((unsigned char *)out + 4, 30);
	for (i = 5; i >= 0; i--) {
		out[34 + i] = B62[crc % 62];
		crc /= 62;
	}
	out[40] = '\0';
}

static void
b64enc(const unsigned char *in, size_t n, char *out, int url)
{
	const char *a = url ? B62 "-_" : B64;
	size_t i, o = 0;
	uint32_t v;

	/* B62 is 0-9A-Za-z; base64's order is A-Za-z0-9. */
	static char std[65];
	const char *t;

	(void)a;
	strcpy(std, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
	strcat(std, url ? "-_" : "+/");
	t = std;
	for (i = 0; i + 2 < n; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		out[o++] = t[v >> 6 & 63];
		out[o++] = t[v & 63];
	}
	if (n - i == 1) {
		v = (uint32_t)in[i] << 16;
		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		if (!url) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (n - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = t[v >> 18 & 63];
		out[o++] = t[v >> 12 & 63];
		out[o++] = t[v >> 6 & 63];
		if (!url)
			out[o++] = '=';
	}
	out[o] = '\0';
}

struct sample {
	const char	*rule;
	char		 text[1024];
};

static struct sample samples[24];
static size_t n_samples;

static struct sample *
add(const char *rule)
{
	struct sample *s = &samples[n_samples++];

	s->rule = rule;
	return s;
}

static void
make_samples(void)
{
	char a[128], b[128], c[128];
	struct sample *s;

	s = add("aws-access-key-id");
	rand_from(a, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
	snprintf(s->text, sizeof(s->text), "key=AKIA%s&x=1", a);
	s = add("aws-secret-access-key");
	rand_from(a, 40, B64);
	snprintf(s->text, sizeof(s->text), "aws_secret_access_key = %s\n", a);
	s = add("github-token");
	github_token(a, "ghp_");
	snprintf(s->text, sizeof(s->text), "token %s", a);
	s = add("github-token");
	github_token(a, "ghs_");
	snprintf(s->text, sizeof(s->text), "{\"t\":\"%s\"}", a);
	s = add("github-fine-grained-token");
	rand_from(a, 22, B62);
	rand_from(b, 59, B62);
	snprintf(s->text, sizeof(s->text), "github_pat_%s_%s", a, b);
	s = add("gitlab-token");
	rand_from(a, 20, B62 "_-");
	snprintf(s->text, sizeof(s->text), "PRIVATE-TOKEN: glpat-%s", a);
	s = add("slack-token");
	rand_from(a, 24, B62);
	snprintf(s->text, sizeof(s->text), "xoxb-123456789012-1234567890123-%s", a);
	s = add("slack-webhook");
	rand_from(a, 24, B62);
	snprintf(s->text, sizeof(s->text), "https://hooks.slack.com/services/"
	    "T0AB12CD3/B0CD34EF5/%s", a);
	s = add("stripe-secret-key");
	rand_from(a, 28, B62);
	snprintf(s->text, sizeof(s->text), "sk_live_%s", a);
	s = add("jwt");
	b64enc((const unsigned char *)"{\"alg\":\"HS256\",\"typ\":\"JWT\"}", 27,
	    a, 1);
	b64enc((const unsigned char *)"{\"sub\":\"1234567890\",\"name\":\"A\"}",
	    31, b, 1);
	rand_from(c, 43, B62 "-_");
	snprintf(s->text, sizeof(s->text), "Bearer %s.%s.%s", a, b, c);
	s = add("private-key");
	rand_from(a, 64, B64);
	snprintf(s->text, sizeof(s->text), "-----BEGIN RSA PRIVATE KEY-----\n%s\n",
	    a);
	s = add("gcp-service-account");
	snprintf(s->text, sizeof(s->text), "{\"type\": \"service_account\", "
	    "\"project_id\": \"p\", \"private_key\": \"-----BEGIN PRIVATE "
	    "KEY-----\\nMIIEv\\n\"}");
	s = add("generic-secret");
	rand_from(a, 24, B62 "!#");
	snprintf(s->text, sizeof(s->text), "{\"password\": \"%s\"}", a);
	s = add("generic-secret");
	rand_from(a, 32, B62);
	snprintf(s->text, sizeof(s->text), "api_key=%s", a);
	/* form-encoded: "password = v" is password+%3D+v, decoded a+=+v */
	s = add("generic-secret");
	rand_from(a, 24, B62);
	snprintf(s->text, sizeof(s->text), "note=password+=+%s&x=1", a);
	/* a secret key may start with '/' (not taken for a path) */
	s = add("aws-secret-access-key");
	rand_from(a, 39, B62);
	snprintf(s->text, sizeof(s->text), "aws_secret_access_key=/%s\n", a);
}

static int
scan_all(struct dlp_scan *sc, const char *p, size_t n, struct dlp_finding *f)
{
	return dlp_scan_buf(sc, p, n, f);
}

static int
scan_bytewise(struct dlp_scan *sc, const char *p, size_t n,
    struct dlp_finding *f)
{
	size_t i;

	dlp_scan_reset(sc);
	for (i = 0; i < n; i++)
		if (dlp_scan_feed(sc, p + i, 1, f) != 0)
			return 1;
	return dlp_scan_end(sc, f);
}

static void
pct(const char *in, char *out, size_t layers)
{
	char tmp[8192], cur[8192];
	size_t i, l, o;

	snprintf(cur, sizeof(cur), "%s", in);
	for (l = 0; l < layers; l++) {
		o = 0;
		for (i = 0; cur[i] != '\0' && o + 4 < sizeof(tmp); i++)
			o += (size_t)snprintf(tmp + o, sizeof(tmp) - o, "%%%02X",
			    (unsigned char)cur[i]);
		tmp[o] = '\0';
		memcpy(cur, tmp, o + 1);
	}
	strcpy(out, cur);
}

static void
hexenc(const char *in, char *out)
{
	size_t i;

	for (i = 0; in[i] != '\0'; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)in[i]);
	out[2 * i] = '\0';
}

static void
jsonu(const char *in, char *out)
{
	size_t i, o = 0;

	for (i = 0; in[i] != '\0'; i++)
		o += (size_t)sprintf(out + o, "\\u%04x", (unsigned char)in[i]);
	out[o] = '\0';
}

static void
test_samples(struct dlp_scan *sc)
{
	struct dlp_finding f;
	char enc[8192], wrapped[8300];
	size_t i;
	int k;

	for (i = 0; i < n_samples; i++) {
		const char *t = samples[i].text;

		memset(&f, 0, sizeof(f));
		CHECK_MSG(scan_all(sc, t, strlen(t), &f) == 1 &&
		    strcmp(f.rule, samples[i].rule) == 0, "raw %s: got %s",
		    samples[i].rule, f.rule);
		/* The excerpt never holds the secret. */
		CHECK(strlen(f.excerpt) < 24 && strstr(t, f.excerpt) == NULL);
		memset(&f, 0, sizeof(f));
		CHECK_MSG(scan_bytewise(sc, t, strlen(t), &f) == 1 &&
		    strcmp(f.rule, samples[i].rule) == 0, "split %s: got %s",
		    samples[i].rule, f.rule);
		for (k = 1; k <= 3; k++) {
			pct(t, enc, (size_t)k);
			snprintf(wrapped, sizeof(wrapped), "q=%s&z", enc);
			memset(&f, 0, sizeof(f));
			CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
			    strcmp(f.rule, samples[i].rule) == 0,
			    "percent x%d %s: got %s", k, samples[i].rule, f.rule);
			CHECK_MSG(scan_bytewise(sc, wrapped, strlen(wrapped),
			    &f) == 1, "percent x%d split %s", k, samples[i].rule);
		}
		for (k = 0; k < 2; k++) {
			b64enc((const unsigned char *)t, strlen(t), enc, k);
			snprintf(wrapped, sizeof(wrapped), "{\"d\":\"%s\"}", enc);
			memset(&f, 0, sizeof(f));
			CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
			    strcmp(f.rule, samples[i].rule) == 0,
			    "base64%s %s: got %s", k ? "url" : "",
			    samples[i].rule, f.rule);
			CHECK_MSG(scan_bytewise(sc, wrapped, strlen(wrapped),
			    &f) == 1, "base64 split %s", samples[i].rule);
		}
		/*
		 * A run that starts before the encoded text: a path's "/"
		 * and segments, junk put in front on purpose. Every
		 * alignment of the run is decoded.
		 */
		for (k = 0; k < 8; k++) {
			static const char *pre[] = { "/", "x", "xy", "xyz",
			    "/v1/upload/", "a-b_", "++", "A" };

			b64enc((const unsigned char *)t, strlen(t), enc, k & 1);
			snprintf(wrapped, sizeof(wrapped), "%s%s end", pre[k],
			    enc);
			memset(&f, 0, sizeof(f));
			CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
			    strcmp(f.rule, samples[i].rule) == 0 &&
			    f.view != DLP_VIEW_RAW, "base64 after %s %s: got %s",
			    pre[k], samples[i].rule, f.rule);
			CHECK_MSG(scan_bytewise(sc, wrapped, strlen(wrapped),
			    &f) == 1, "base64 after %s split %s", pre[k],
			    samples[i].rule);
		}
		hexenc(t, enc);
		snprintf(wrapped, sizeof(wrapped), "data=f%s;", enc);
		memset(&f, 0, sizeof(f));
		CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
		    strcmp(f.rule, samples[i].rule) == 0, "hex after f %s: got %s",
		    samples[i].rule, f.rule);
		CHECK_MSG(scan_bytewise(sc, wrapped, strlen(wrapped), &f) == 1,
		    "hex after f split %s", samples[i].rule);
		snprintf(wrapped, sizeof(wrapped), "data=%s;", enc);
		memset(&f, 0, sizeof(f));
		CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
		    strcmp(f.rule, samples[i].rule) == 0, "hex %s: got %s",
		    samples[i].rule, f.rule);
		jsonu(t, enc);
		snprintf(wrapped, sizeof(wrapped), "{\"v\":\"%s\"}", enc);
		memset(&f, 0, sizeof(f));
		CHECK_MSG(scan_all(sc, wrapped, strlen(wrapped), &f) == 1 &&
		    strcmp(f.rule, samples[i].rule) == 0, "json %s: got %s",
		    samples[i].rule, f.rule);
		CHECK_MSG(scan_bytewise(sc, wrapped, strlen(wrapped), &f) == 1,
		    "json split %s", samples[i].rule);
	}
}

static int
found_in(struct dlp_scan *sc, const char *t)
{
	struct dlp_finding f;

	return scan_all(sc, t, strlen(t), &f);
}

static void
test_near_misses(struct dlp_scan *sc)
{
	char tok[64], t[128];

	/* A GitHub token with a wrong checksum digit. */
	github_token(tok, "ghp_");
	tok[39] = tok[39] == 'a' ? 'b' : 'a';
	CHECK(!found_in(sc, tok));
	/* A JWT-looking string whose header is not JSON with "alg". */
	CHECK(!found_in(sc, "eyJhbGxvd2VkIjoxMjN9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
	    "abcdefghijklmnopqrstuvwxyz0123"));
	/* Low entropy password values. */
	CHECK(!found_in(sc, "password=aaaaaaaaaaaaaaaaaaaaaaaa"));
	CHECK(!found_in(sc, "password=hunter2"));
	/* Documentation examples. */
	CHECK(!found_in(sc, "AKIAIOSFODNN7EXAMPLE"));
	CHECK(!found_in(sc, "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/"
	    "bPxRfiCYEXAMPLEKEY"));
	/* Half a GCP service account is none. */
	CHECK(!found_in(sc, "{\"type\": \"service_account\", \"project\": 1}"));
	snprintf(t, sizeof(t), "sk_test_%s", "4eC39HqLyjWDarjtT1zdp7dc");
	CHECK(!found_in(sc, t));
}

static void
test_benign(struct dlp_scan *sc)
{
	char path[4096], *buf;
	const char *dir = getenv("SANDGATE_TEST_DATA");
	struct dirent *de;
	struct dlp_finding f;
	DIR *d;
	FILE *fp;
	long len;
	int files = 0;

	snprintf(path, sizeof(path), "%s/dlp/benign", dir ? dir : "..");
	if ((d = opendir(path)) == NULL) {
		snprintf(path, sizeof(path), "benign");
		d = opendir(path);
	}
	CHECK(d != NULL);
	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char file[8192];

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		if ((fp = fopen(file, "rb")) == NULL)
			continue;
		fseek(fp, 0, SEEK_END);
		len = ftell(fp);
		fseek(fp, 0, SEEK_SET);
		buf = malloc((size_t)len + 1);
		if (buf != NULL && fread(buf, 1, (size_t)len, fp) == (size_t)len) {
			memset(&f, 0, sizeof(f));
			CHECK_MSG(scan_all(sc, buf, (size_t)len, &f) == 0,
			    "benign %s: %s %s (%s)", de->d_name, f.rule,
			    f.excerpt, dlp_view_word(f.view));
			CHECK_MSG(scan_bytewise(sc, buf, (size_t)len, &f) == 0,
			    "benign split %s: %s", de->d_name, f.rule);
			files++;
		}
		free(buf);
		fclose(fp);
	}
	closedir(d);
	CHECK(files >= 5);
}

static int
skip_github(const char *rule, void *arg)
{
	(void)arg;
	return strcmp(rule, "github-token") == 0;
}

static void
test_custom(void)
{
	struct dlp_rule_spec r[2] = {
		{ "acme-key", "acme_[a-z0-9]{20}", DLP_SEV_HIGH, 3.0, NULL },
		{ "internal-id", "INT-[0-9]{8}", DLP_SEV_LOW, 0, "project" },
	};
	struct dlp_rule_spec bad = { "broken", "a(b", DLP_SEV_LOW, 0, NULL };
	struct dlp_set *set;
	struct dlp_scan *sc;
	struct dlp_finding f;
	char err[256], tok[64];
	int badi;

	set = dlp_set_new(r, 2, 0, err, sizeof(err), &badi);
	CHECK(set != NULL);
	if (set == NULL)
		return;
	CHECK(dlp_set_has_rule(set, "acme-key"));
	sc = dlp_scan_new(set, NULL, NULL);
	CHECK(sc != NULL);
	CHECK(scan_all(sc, "x acme_k3j4h5g6f7d8s9a0q1w2 y", 29, &f) == 1 &&
	    strcmp(f.rule, "acme-key") == 0 && f.severity == DLP_SEV_HIGH);
	CHECK(found_in(sc, "x acme_aaaaaaaaaaaaaaaaaaaa y") == 0);	/* entropy */
	CHECK(found_in(sc, "INT-12345678") == 0);			/* keyword */
	CHECK(found_in(sc, "project: INT-12345678") == 1);
	/* Defaults off: a GitHub token is not looked for. */
	github_token(tok, "ghp_");
	CHECK(found_in(sc, tok) == 0);
	dlp_scan_free(sc);
	dlp_set_free(set);
	CHECK(dlp_set_new(&bad, 1, 1, err, sizeof(err), &badi) == NULL &&
	    badi == 0 && err[0] != '\0');
	/* The allow filter skips a rule. */
	set = dlp_set_new(NULL, 0, 1, err, sizeof(err), &badi);
	sc = dlp_scan_new(set, skip_github, NULL);
	CHECK(found_in(sc, tok) == 0);
	dlp_scan_free(sc);
	dlp_set_free(set);
}

static void
test_burst(void)
{
	struct dlp_burst *b = dlp_burst_new(5, 60000);
	struct dlp_finding f;
	char name[128], lab[32];
	int i, hits = 0;

	CHECK(b != NULL);
	if (b == NULL)
		return;
	/* the same name again and again: one distinct name */
	for (i = 0; i < 10; i++)
		hits += dlp_burst_add(b, "box", "k3j4h5g6f7d8.x.example", 22,
		    1000 + i, &f);
	CHECK(hits == 0);
	/* ordinary names under a parent: not counted */
	for (i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "www%d.example.com", i);
		hits += dlp_burst_add(b, "box", name, strlen(name), 1000, &f);
	}
	CHECK(hits == 0);
	/* distinct encoded-looking labels: the fifth is a finding */
	for (i = 0; i < 4; i++) {
		rand_from(lab, 16, "abcdefghijklmnopqrstuvwxyz234567");
		snprintf(name, sizeof(name), "%s.t.example.org", lab);
		CHECK(dlp_burst_add(b, "box", name, strlen(name), 2000 + i,
		    &f) == 0);
		/* another sandbox has its own count */
		CHECK(dlp_burst_add(b, "other", name, strlen(name), 2000 + i,
		    &f) == 0);
	}
	rand_from(lab, 16, "abcdefghijklmnopqrstuvwxyz234567");
	snprintf(name, sizeof(name), "%s.t.example.org", lab);
	CHECK(dlp_burst_add(b, "box", name, strlen(name), 2100, &f) == 1 &&
	    strcmp(f.rule, "dns-encoded-burst") == 0);
	/* a window later it starts over */
	rand_from(lab, 16, "abcdefghijklmnopqrstuvwxyz234567");
	snprintf(name, sizeof(name), "%s.t.example.org", lab);
	CHECK(dlp_burst_add(b, "box", name, strlen(name), 70000, &f) == 0);
	/*
	 * The window slides: names at 100000, 159000 (three), 160500 and
	 * 161000. A window counted from the first ends at 160000 and started
	 * over (two names in it then); the last five are within 60 s.
	 */
	for (i = 0; i < 6; i++) {
		static const int64_t at[] = { 100000, 159000, 159000, 159000,
		    160500, 161000 };

		rand_from(lab, 16, "abcdefghijklmnopqrstuvwxyz234567");
		snprintf(name, sizeof(name), "%s.w.example.org", lab);
		hits = dlp_burst_add(b, "box", name, strlen(name), at[i], &f);
		CHECK_MSG(hits == (i == 5), "name %d: %d", i, hits);
	}
	/* short labels, many of them: counted by what they hold together */
	for (i = 0; i < 5; i++) {
		char l2[16], l3[16], l4[16];

		rand_from(lab, 11, "abcdefghijklmnopqrstuvwxyz234567");
		rand_from(l2, 11, "abcdefghijklmnopqrstuvwxyz234567");
		rand_from(l3, 11, "abcdefghijklmnopqrstuvwxyz234567");
		rand_from(l4, 11, "abcdefghijklmnopqrstuvwxyz234567");
		snprintf(name, sizeof(name), "%s.%s.%s.%s.s.example.org", lab,
		    l2, l3, l4);
		hits = dlp_burst_add(b, "box", name, strlen(name), 300000 + i,
		    &f);
		CHECK_MSG(hits == (i == 4), "short %d: %d", i, hits);
	}
	dlp_burst_free(b);
}

static void
test_dns(void)
{
	static const char *benign[] = { "www.example.com",
	    "d1a2b3c4d5e6f7.cloudfront.net",
	    "e3b0c44298fc1c14.cdn.example.net",
	    "ec2-203-0-113-25.compute-1.amazonaws.com",
	    "my-company-backups-production.s3.amazonaws.com",
	    "_acme-challenge.www.example.org",
	    "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c.example.net",
	    "a.b.c.d.e.f.g.h.example.com",
	    "0123456789abcdef0123456789abcdef.example.com" };
	struct dlp_finding f;
	char name[300], lab[64];
	size_t i;

	for (i = 0; i < sizeof(benign) / sizeof(benign[0]); i++)
		CHECK_MSG(!dlp_dns_name(benign[i], strlen(benign[i]), &f),
		    "benign name %s: %s", benign[i], f.rule);
	/* base32 of 25 bytes in one label */
	rand_from(lab, 40, "abcdefghijklmnopqrstuvwxyz234567");
	snprintf(name, sizeof(name), "%s.x.allowed.example", lab);
	CHECK(dlp_dns_name(name, strlen(name), &f) == 1 &&
	    strcmp(f.rule, "dns-encoded-label") == 0);
	/* hex of a secret in one label */
	rand_from(lab, 48, "0123456789abcdef");
	snprintf(name, sizeof(name), "%s.allowed.example", lab);
	CHECK(dlp_dns_name(name, strlen(name), &f) == 1);
	/* short labels that together are a payload */
	rand_from(lab, 60, "abcdefghijklmnopqrstuvwxyz234567");
	snprintf(name, sizeof(name), "%.20s.%.20s.%.20s.x.allowed.example", lab,
	    lab + 20, lab + 40);
	CHECK(dlp_dns_name(name, strlen(name), &f) == 1 &&
	    strcmp(f.rule, "dns-encoded-name") == 0);
	CHECK(strstr(name, f.excerpt) == NULL);
	/* hex cut into labels under 40: hex's entropy is at most 4 bits */
	rand_from(lab, 60, "0123456789abcdef");
	snprintf(name, sizeof(name), "%.30s.%.30s.x.allowed.example", lab,
	    lab + 30);
	CHECK(dlp_dns_name(name, strlen(name), &f) == 1 &&
	    strcmp(f.rule, "dns-encoded-name") == 0);
	test_burst();
}

/* The tap: what it is given per view, a stream each, looked at whole. */
struct tapped {
	char	seen[DLP_VIEW_MAX][512];
	size_t	n[DLP_VIEW_MAX];
	int	resets;
};

static int
tap_cb(enum dlp_view v, const unsigned char *p, size_t n, void *arg)
{
	struct tapped *t = arg;

	if (p == NULL) {
		t->n[v] = 0;
		t->resets++;
		return 0;
	}
	if (t->n[v] + n < sizeof(t->seen[v])) {
		memcpy(t->seen[v] + t->n[v], p, n);
		t->n[v] += n;
		t->seen[v][t->n[v]] = '\0';
	}
	return strstr(t->seen[v], "NEEDLE-in-the-vault") != NULL;
}

/*
 * A tap gets every view's bytes (decoded ones too) and its finding is the
 * scan's, with the tap's rule; also on a set with no rules at all.
 */
static void
test_tap(int defaults)
{
	static const struct {
		const char	*in;
		enum dlp_view	 view;
	} cases[] = {
		{ "a NEEDLE-in-the-vault b", DLP_VIEW_RAW },
		{ "q=NEEDLE%252Din%252Dthe%252Dvault", DLP_VIEW_UNESCAPED },
		{ "{\"v\":\"\\u004eEEDLE-in-the-vault\"}", DLP_VIEW_UNESCAPED },
		/* a JSON escape that writes '%': percent after JSON too */
		{ "{\"v\":\"\\u00254eEEDLE\\u00252Din-the-vault\"}",
		    DLP_VIEW_UNESCAPED },
		{ "{\"v\":\"\\u0025%34eEEDLE-in-the-vault\"}",
		    DLP_VIEW_UNESCAPED },
		{ "d=eHhORUVETEUtaW4tdGhlLXZhdWx0eXg=", DLP_VIEW_BASE64 },
		{ "h=4e4545444c452d696e2d7468652d7661756c74", DLP_VIEW_HEX },
	};
	struct dlp_finding f;
	struct tapped t;
	struct dlp_set *set;
	struct dlp_scan *sc;
	char err[256];
	size_t i, cut, len;
	int bad, rc;

	set = dlp_set_new(NULL, 0, defaults, err, sizeof(err), &bad);
	CHECK_MSG(set != NULL, "%s", err);
	if (set == NULL || (sc = dlp_scan_new(set, NULL, NULL)) == NULL) {
		dlp_set_free(set);
		return;
	}
	memset(&t, 0, sizeof(t));
	dlp_scan_tap(sc, tap_cb, &t, "tapped");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		len = strlen(cases[i].in);
		for (cut = 0; cut <= len; cut += 3) {
			(void)dlp_scan_reset(sc);
			memset(&f, 0, sizeof(f));
			rc = dlp_scan_feed(sc, cases[i].in, cut, &f);
			if (rc == 0)
				rc = dlp_scan_feed(sc, cases[i].in + cut,
				    len - cut, &f);
			if (rc == 0)
				rc = dlp_scan_end(sc, &f);
			CHECK_MSG(rc == 1 && strcmp(f.rule, "tapped") == 0 &&
			    f.view == cases[i].view && strcmp(f.excerpt, "-") == 0,
			    "%s (cut %zu): rc %d rule %s view %d", cases[i].in, cut,
			    rc, f.rule, (int)f.view);
		}
	}
	CHECK(t.resets > 0);
	(void)dlp_scan_reset(sc);
	CHECK(dlp_scan_buf(sc, "a NEEDLE-in-the-vaul", 20, &f) == 0);
	dlp_scan_free(sc);
	dlp_set_free(set);
}

/*
 * The run decoders find runs by skipping ahead (dlp_scan.c runs_seg): the
 * same answer whole, byte by byte and in random pieces, over inputs made
 * of runs of every length around the limits (base64 16, hex 32) with a
 * secret's base64 or hex inside some of them, at every alignment of the
 * run's start.
 */
static void
test_runs_split(struct dlp_scan *sc)
{
	static const char *const parts[] = { "ab", "0f", "Zz+/", "-_", " ",
	    "\n", ",", "%", "0123456789abcdef", "QUJD", "=", ":" };
	char in[2048], enc[256], tok[64];
	struct dlp_finding f;
	size_t len, off, n, i;
	int it, whole, bytes, pieces, planted, found = 0;

	for (it = 0; it < 4000; it++) {
		len = 0;
		planted = rnd(3) == 0;
		while (len < 280) {
			const char *pt = parts[rnd((int)(sizeof(parts) /
			    sizeof(parts[0])))];
			int reps = 1 + rnd(12);

			while (reps-- > 0 && len + strlen(pt) < 300) {
				memcpy(in + len, pt, strlen(pt));
				len += strlen(pt);
			}
			if (planted && len > 100 && len < 200) {
				planted = 0;
				github_token(tok, "ghp_");
				if (rnd(2)) {
					/* base64 of 3k filler bytes + the token */
					char raw[128];
					int k = rnd(4) * 3;

					memset(raw, 'q', (size_t)k);
					memcpy(raw + k, tok, 41);
					b64enc((unsigned char *)raw, (size_t)k + 40,
					    enc, rnd(2));
				} else {
					for (i = 0; i < 40; i++)
						snprintf(enc + 2 * i, 3, "%02x",
						    (unsigned char)tok[i]);
				}
				in[len++] = ' ';
				memcpy(in + len, enc, strlen(enc));
				len += strlen(enc);
				in[len++] = ' ';
			}
		}
		whole = dlp_scan_buf(sc, in, len, &f);
		(void)dlp_scan_reset(sc);
		for (off = 0, bytes = 0; off < len && bytes == 0; off++)
			bytes = dlp_scan_feed(sc, in + off, 1, &f);
		if (bytes == 0)
			bytes = dlp_scan_end(sc, &f);
		(void)dlp_scan_reset(sc);
		for (off = 0, pieces = 0; off < len && pieces == 0; off += n) {
			n = 1 + (size_t)rnd(40);
			if (n > len - off)
				n = len - off;
			pieces = dlp_scan_feed(sc, in + off, n, &f);
		}
		if (pieces == 0)
			pieces = dlp_scan_end(sc, &f);
		CHECK_MSG(whole == bytes && whole == pieces,
		    "input %d: whole %d, byte by byte %d, pieces %d: %.*s", it,
		    whole, bytes, pieces, (int)len, in);
		found += whole == 1;
	}
	/* The planted tokens are found (a third of the inputs carry one). */
	CHECK_MSG(found > 1000, "%d findings", found);
}

/*
 * Wrapped encodings: base64 as MIME, PEM and GNU base64 write it (76 or 64
 * columns, LF or CRLF) and hex as xxd -p does (60): the token is found
 * wherever the line breaks fall in it, whole and fed byte by byte.
 */
static void
test_wrapped(struct dlp_scan *sc)
{
	char tok[64], env[256], enc[512], wrapped[1024], hex[512];
	struct dlp_finding f;
	size_t pad, i, o, col, len;
	int width, crlf, rc, bytes;

	github_token(tok, "ghp_");
	for (pad = 0; pad < 60; pad += 1) {
		memset(env, 'A', pad);
		snprintf(env + pad, sizeof(env) - pad, "\nGITHUB_TOKEN=%s\n", tok);
		for (width = 64; width <= 76; width += 12) {
			for (crlf = 0; crlf < 2; crlf++) {
				b64enc((unsigned char *)env, strlen(env), enc, 0);
				for (i = 0, o = 0, col = 0; enc[i] != '\0'; i++) {
					wrapped[o++] = enc[i];
					if (++col == (size_t)width) {
						if (crlf)
							wrapped[o++] = '\r';
						wrapped[o++] = '\n';
						col = 0;
					}
				}
				len = o;
				(void)dlp_scan_reset(sc);
				rc = dlp_scan_buf(sc, wrapped, len, &f);
				(void)dlp_scan_reset(sc);
				for (i = 0, bytes = 0; i < len && bytes == 0; i++)
					bytes = dlp_scan_feed(sc, wrapped + i, 1, &f);
				if (bytes == 0)
					bytes = dlp_scan_end(sc, &f);
				CHECK_MSG(rc == 1 && bytes == 1 &&
				    strcmp(f.rule, "github-token") == 0,
				    "pad %zu width %d crlf %d: %d %d %s", pad,
				    width, crlf, rc, bytes, f.rule);
			}
		}
		/* xxd -p: 60 hex digits a line */
		for (i = 0, o = 0; env[i] != '\0'; i++) {
			o += (size_t)snprintf(hex + o, sizeof(hex) - o, "%02x",
			    (unsigned char)env[i]);
			if (o % 61 == 60)
				hex[o++] = '\n';
		}
		rc = dlp_scan_buf(sc, hex, o, &f);
		CHECK_MSG(rc == 1 && strcmp(f.rule, "github-token") == 0,
		    "hex, pad %zu: %d %s", pad, rc, f.rule);
	}
}

int
main(void)
{
	struct dlp_set *set;
	struct dlp_scan *sc;
	char err[256];
	const char *why;
	int bad;

	if (!dlp_available(&why)) {
		printf("skipped: %s\n", why);
		return 77;
	}
	CHECK(dlp_valid_id("github-token", 12));
	CHECK(!dlp_valid_id("Github", 6));
	CHECK(dlp_crc32((const unsigned char *)"123456789", 9) == 0xcbf43926u);
	set = dlp_set_new(NULL, 0, 1, err, sizeof(err), &bad);
	CHECK_MSG(set != NULL, "%s", err);
	if (set == NULL)
		return check_summary();
	sc = dlp_scan_new(set, NULL, NULL);
	CHECK(sc != NULL);
	make_samples();
	test_samples(sc);
	test_near_misses(sc);
	test_benign(sc);
	test_runs_split(sc);
	test_wrapped(sc);
	dlp_scan_free(sc);
	dlp_set_free(set);
	test_custom();
	test_dns();
	test_tap(1);
	test_tap(0);
	return check_summary();
}
