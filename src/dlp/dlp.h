/*
 * Outbound secret detection (docs/dlp.md): a rule set compiled once per
 * policy load into a Hyperscan streaming database, and a scanner per
 * exchange that is fed bytes as they pass and reports the first finding.
 * Pure: no libevent, no logging, no calls into the rest of src/ (the
 * lowest layer, below src/core). A finding never carries the secret: only
 * a redacted excerpt (its first 4 bytes, its length, a hash prefix).
 */
#ifndef SG_DLP_H
#define SG_DLP_H

#include <stddef.h>
#include <stdint.h>

#define DLP_ID_MAX		32	/* [a-z0-9][a-z0-9-]{0,31} */
#define DLP_EXCERPT_MAX		40	/* "ghp_/40/#a1b2c3" */
#define DLP_REGEX_MAX		1024
#define DLP_KEYWORD_MAX		64
#define DLP_HISTORY		4096	/* bytes kept per stream for validators */

enum dlp_severity {
	DLP_SEV_LOW = 1,
	DLP_SEV_MEDIUM,
	DLP_SEV_HIGH,
	DLP_SEV_CRITICAL
};

/* Which of the scanner's views found it. */
enum dlp_view {
	DLP_VIEW_RAW = 0,	/* the bytes as sent */
	DLP_VIEW_UNESCAPED,	/* percent (up to 3 layers) and JSON escapes undone */
	DLP_VIEW_BASE64,	/* base64 / base64url runs decoded from their start */
	DLP_VIEW_HEX,		/* hex runs decoded from their start */
	DLP_VIEW_BASE64_1,	/* the same runs decoded from their 2nd character, */
	DLP_VIEW_BASE64_2,	/*   3rd, */
	DLP_VIEW_BASE64_3,	/*   4th (every alignment: a run's start is no anchor) */
	DLP_VIEW_HEX_1,		/* hex runs from their 2nd digit */
	DLP_VIEW_MAX
};

/* A custom rule as the policy wrote it (strings are copied by dlp_set_new). */
struct dlp_rule_spec {
	const char	*id;
	const char	*regex;		/* Hyperscan (PCRE subset) syntax */
	enum dlp_severity severity;
	double		 entropy;	/* bits per byte over the match; 0: none */
	const char	*keyword;	/* within 128 bytes before the match end; NULL: none */
};

struct dlp_finding {
	char		 rule[DLP_ID_MAX + 1];
	enum dlp_severity severity;
	enum dlp_view	 view;
	uint64_t	 offset;	/* of the match end, in its view's stream */
	char		 excerpt[DLP_EXCERPT_MAX + 1];
};

struct dlp_set;
struct dlp_scan;

/*
 * 1 when Hyperscan runs on this CPU (it needs SSSE3); 0 otherwise, with
 * why (static text) in *why.
 */
int		 dlp_available(const char **why);
/*
 * The default rules (defaults != 0) and the n custom ones, compiled. NULL
 * on error, with a message in err and, when a custom rule is at fault, its
 * index in *bad (else *bad = -1).
 */
struct dlp_set	*dlp_set_new(const struct dlp_rule_spec *custom, size_t n,
		    int defaults, char *err, size_t errlen, int *bad);
void		 dlp_set_free(struct dlp_set *);
/* 1 when id names one of the set's rules (a default or a custom one). */
int		 dlp_set_has_rule(const struct dlp_set *, const char *id);
/* The default rules' ids and severities, for docs and `policy explain`. */
const char	*dlp_default_rule(size_t i, enum dlp_severity *sev);
const char	*dlp_severity_word(enum dlp_severity);
const char	*dlp_view_word(enum dlp_view);
/* 1 when s[0..n) is a valid rule id. */
int		 dlp_valid_id(const char *s, size_t n);

/*
 * A scanner: one stream per view, fed in order. Findings that an allow
 * list exempts are skipped through the filter (NULL: none): it returns 1
 * to skip a rule id.
 */
typedef int (*dlp_skip_fn)(const char *rule, void *arg);
struct dlp_scan	*dlp_scan_new(const struct dlp_set *, dlp_skip_fn, void *arg);
void		 dlp_scan_free(struct dlp_scan *);
/*
 * Feed p[0..n): 1 and *f filled at the first finding (later calls return
 * it again), 0 none so far, -1 on an internal error (treat as found: fail
 * closed).
 */
int		 dlp_scan_feed(struct dlp_scan *, const void *p, size_t n,
		    struct dlp_finding *f);
/* The stream ends (decoders flush): as dlp_scan_feed. */
int		 dlp_scan_end(struct dlp_scan *, struct dlp_finding *f);
/* Start a new, independent stream (a new header, a new message). */
int		 dlp_scan_reset(struct dlp_scan *);
/* One whole buffer as its own stream: reset, feed, end. */
int		 dlp_scan_buf(struct dlp_scan *, const void *p, size_t n,
		    struct dlp_finding *f);

/*
 * A second matcher beside the rules (the gateway's own secrets): fn is
 * given every view's bytes as they are scanned, each view a stream of its
 * own (p NULL, n 0: view starts over). When it returns 1 the scan has a
 * finding of rule (severity critical, excerpt "-": it shows no byte).
 */
typedef int (*dlp_tap_fn)(enum dlp_view, const unsigned char *p, size_t n,
		    void *arg);
void		 dlp_scan_tap(struct dlp_scan *, dlp_tap_fn, void *arg,
		    const char *rule);

/*
 * dlp_dns.c: 1 and *f filled (rule dns-encoded-label or dns-encoded-name)
 * when the labels of name[0..len), but its last two, carry an encoded
 * payload; 0 otherwise.
 */
int		 dlp_dns_name(const char *name, size_t len, struct dlp_finding *f);
/*
 * Many distinct names under one parent: a table (thread-safe) counting,
 * per (who, the name's last two labels), the distinct names with a label
 * of 12+ characters and 3.0+ bits within window_ms. dlp_burst_add: 1 and
 * *f (rule dns-encoded-burst) once who has sent limit of them; 0 otherwise.
 */
struct dlp_burst;
struct dlp_burst *dlp_burst_new(unsigned limit, int64_t window_ms);
void		 dlp_burst_free(struct dlp_burst *);
int		 dlp_burst_add(struct dlp_burst *, const char *who,
		    const char *name, size_t len, int64_t now_ms,
		    struct dlp_finding *f);

/* dlp_util.c, also for the tests */
double		 dlp_entropy(const unsigned char *p, size_t n);
uint32_t	 dlp_crc32(const unsigned char *p, size_t n);
/* "abcd/40/#1a2b3c": the first 4 bytes (non-printable as '.'), length, SHA-256 prefix. */
void		 dlp_redact(const unsigned char *p, size_t n, char *out, size_t len);

#endif
