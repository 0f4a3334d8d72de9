/*
 * The default rule set (docs/dlp.md, "Rules") and the checks a match must
 * pass before it counts: a token's own checksum where its format has one,
 * a JWT header that decodes, an assignment's value entropy, documentation
 * examples left alone.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "dlp/dlp_int.h"

#define SOM	HS_FLAG_SOM_LEFTMOST
#define CL	HS_FLAG_CASELESS

/* The generic assignment's keys: one list for the regex and the docs. */
#define ASSIGN_KEYS "(?:password|passwd|pwd|secret|api_?key|apikey|" \
	"access_?token|auth_?token|client_?secret|private_?token|secret_?key)"
/* Blanks around the sign, or one '+' (a form-encoded space: a+%3D+b). */
#define ASSIGN_SEP "[\"']?(?:[ \\t]{0,4}|\\+)[:=](?:[ \\t]{0,4}|\\+)[\"']?"

static const struct dlp_rule defaults[] = {
	{ "aws-access-key-id", "(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}",
	    SOM, DLP_SEV_HIGH, 0, NULL, DLP_CHK_NONE, 20 },
	{ "aws-secret-access-key", "aws_?secret_?access_?key" ASSIGN_SEP
	    "[A-Za-z0-9/+]{40}", SOM | CL, DLP_SEV_CRITICAL, 3.8, NULL,
	    DLP_CHK_ASSIGN, 40 },
	{ "github-token", "gh[pousr]_[A-Za-z0-9]{36}", SOM, DLP_SEV_HIGH, 0,
	    NULL, DLP_CHK_GITHUB, 40 },
	{ "github-fine-grained-token", "github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
	    SOM, DLP_SEV_HIGH, 3.0, NULL, DLP_CHK_NONE, 93 },
	{ "gitlab-token", "gl(?:pat|dt|rt|ptt|ft|oas)-[A-Za-z0-9_-]{20}",
	    SOM, DLP_SEV_HIGH, 3.0, NULL, DLP_CHK_NONE, 25 },
	{ "slack-token", "xox[abposr]-[0-9]{6,15}-[0-9A-Za-z-]{10,}", SOM,
	    DLP_SEV_HIGH, 0, NULL, DLP_CHK_NONE, 20 },
	{ "slack-webhook", "hooks\\.slack\\.com/services/T[A-Z0-9]{6,12}/"
	    "B[A-Z0-9]{6,12}/[A-Za-z0-9]{20,32}", SOM, DLP_SEV_HIGH, 0, NULL,
	    DLP_CHK_NONE, 50 },
	{ "stripe-secret-key", "(?:sk|rk)_live_[0-9A-Za-z]{24,99}", SOM,
	    DLP_SEV_CRITICAL, 3.0, NULL, DLP_CHK_NONE, 32 },
	{ "jwt", "eyJ[A-Za-z0-9_-]{10,}\\.eyJ[A-Za-z0-9_-]{10,}\\."
	    "[A-Za-z0-9_-]{20}", SOM, DLP_SEV_MEDIUM, 0, NULL, DLP_CHK_JWT, 50 },
	{ "private-key", "-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?"
	    "PRIVATE KEY(?: BLOCK)?-----", SOM, DLP_SEV_CRITICAL, 0, NULL,
	    DLP_CHK_NONE, 27 },
	{ "gcp-service-account", "\"type\"[ \\t\\r\\n]*:[ \\t\\r\\n]*"
	    "\"service_account\"", 0, DLP_SEV_CRITICAL, 0, NULL,
	    DLP_CHK_GCP_TYPE, 0 },
	{ "gcp-service-account", "\"private_key\"[ \\t\\r\\n]*:[ \\t\\r\\n]*\"-",
	    0, DLP_SEV_CRITICAL, 0, NULL, DLP_CHK_GCP_KEY, 0 },
	{ "generic-secret", ASSIGN_KEYS ASSIGN_SEP
	    "[A-Za-z0-9/+=_.~!@#$%^&*-]{16,64}", SOM | CL, DLP_SEV_MEDIUM, 3.5,
	    NULL, DLP_CHK_ASSIGN, 16 },
};

size_t
dlp_default_count(void)
{
	return sizeof(defaults) / sizeof(defaults[0]);
}

void
dlp_default_get(size_t i, struct dlp_rule *r)
{
	*r = defaults[i];
}

const char *
dlp_default_rule(size_t i, enum dlp_severity *sev)
{
	/* The GCP pair is one rule. */
	if (i >= dlp_default_count() - 1)
		return NULL;
	if (i >= 11)
		i++;
	if (sev != NULL)
		*sev = defaults[i].severity;
	return defaults[i].id;
}

int
dlp_is_example(const unsigned char *m, size_t n)
{
	static const char *const words[] = { "example", "xxxxxxxx", "********",
	    "placeholder", "changeme", "change-me", "change_me", "replace-me",
	    "replace_me", "replace-with", "replace_with", "your_", "your-",
	    "dummy", "00000000" };
	size_t i, j, wl;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		wl = strlen(words[i]);
		for (j = 0; j + wl <= n; j++)
			if (strncasecmp((const char *)m + j, words[i], wl) == 0)
				return 1;
	}
	return 0;
}

static const char b62[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* ghp_ + 30 random base62 + 6 base62 digits of CRC32(random). */
static int
check_github(const unsigned char *m, size_t n)
{
	uint64_t want = 0;
	const char *d;
	size_t i;

	if (n != 40)
		return 0;
	for (i = 34; i < 40; i++) {
		if ((d = strchr(b62, m[i])) == NULL || m[i] == '\0')
			return 0;
		want = want * 62 + (uint64_t)(d - b62);
	}
	return want == dlp_crc32(m + 4, 30);
}

static int
b64url_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-' || c == '+')
		return 62;
	if (c == '_' || c == '/')
		return 63;
	return -1;
}

/* The header (up to the first '.') decodes to {"...alg"...}. */
static int
check_jwt(const unsigned char *m, size_t n)
{
	unsigned char out[192];
	size_t i, o = 0;
	uint32_t acc = 0;
	int bits = 0, v;

	for (i = 0; i < n && m[i] != '.' && o < sizeof(out); i++) {
		if ((v = b64url_val(m[i])) < 0)
			return 0;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (o < 8 || out[0] != '{')
		return 0;
	for (i = 0; i + 5 <= o; i++)
		if (memcmp(out + i, "\"alg\"", 5) == 0)
			return 1;
	return 0;
}

/* key, quote, blanks, [:=], blanks, quote: where the value starts. */
static size_t
assign_value(const unsigned char *m, size_t n)
{
	size_t i = 0;

	while (i < n && (isalnum(m[i]) || m[i] == '_'))
		i++;
	while (i < n && (m[i] == '"' || m[i] == '\'' || m[i] == ' ' ||
	    m[i] == '\t' || m[i] == '+'))
		i++;
	if (i < n && (m[i] == ':' || m[i] == '='))
		i++;
	if (i < n && m[i] == '+')
		i++;
	while (i < n && (m[i] == '"' || m[i] == '\'' || m[i] == ' ' ||
	    m[i] == '\t'))
		i++;
	return i;
}

/*
 * An assignment's value that is not a secret whatever its entropy: a file
 * path (PWD=/home/runner/work/app, OLDPWD=...) or a chain of identifiers
 * (minified {password:this.state.passwordConfirmation}). Hyperscan reports
 * each end of a match, so a chain cut after its dot counts too.
 */
static int
assign_harmless(const unsigned char *v, size_t n)
{
	size_t i, dots = 0;
	int seg = 0;		/* characters in the current segment */

	if (n > 0 && (v[0] == '/' || (n > 1 && v[0] == '~' && v[1] == '/'))) {
		for (i = 0; i < n; i++)
			if (!isalnum(v[i]) && strchr("._/~-", v[i]) == NULL)
				break;
		if (i == n)
			return 1;
	}
	for (i = 0; i < n; i++) {
		if (v[i] == '.') {
			if (seg == 0)
				return 0;
			dots++;
			seg = 0;
		} else if (isalpha(v[i]) || v[i] == '_' || v[i] == '$' ||
		    (seg > 0 && isdigit(v[i])))
			seg++;
		else
			return 0;
	}
	return dots >= 2;
}

int
dlp_rule_check(const struct dlp_rule *r, const unsigned char *m, size_t n,
    size_t *tok, size_t *toklen)
{
	size_t v = 0;

	*tok = 0;
	*toklen = n;
	if (r->check == DLP_CHK_ASSIGN) {
		v = assign_value(m, n);
		*tok = v;
		*toklen = n - v;
	}
	if (*toklen < r->min_token)
		return 0;
	if (dlp_is_example(m + *tok, *toklen))
		return 0;
	/* generic-secret only: an AWS secret key may well start with '/'. */
	if (r->check == DLP_CHK_ASSIGN && strcmp(r->id, "generic-secret") == 0 &&
	    assign_harmless(m + *tok, *toklen))
		return 0;
	if (r->entropy > 0 && dlp_entropy(m + *tok, *toklen) < r->entropy)
		return 0;
	switch (r->check) {
	case DLP_CHK_GITHUB:
		return check_github(m, n);
	case DLP_CHK_JWT:
		return check_jwt(m, n);
	default:
		return 1;
	}
}
