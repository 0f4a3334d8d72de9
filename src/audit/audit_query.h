/*
 * The read side of the audit log (docs/audit.md) and the row encoding it shares
 * with the writer: columns, the hash chain's canonical encoding, timestamps,
 * filters turned into SQL with bound parameters, output formats, the text
 * of the retention and checkpoint rows, verify.
 */
#ifndef SG_AUDIT_QUERY_H
#define SG_AUDIT_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <openssl/types.h>

struct sqlite3;
struct sqlite3_stmt;

#define AUDIT_SCHEMA_VERSION	2	/* PRAGMA user_version of a current file */
#define AUDIT_HASH_HEX		64	/* hex digits of a SHA-256 */
#define AUDIT_TS_LEN		24	/* "2026-12-02T14:22:01.123Z" */
#define AUDIT_KEYID_HEX		16	/* hex digits of a key id */

/* The columns of table events, in table order. */
enum audit_col {
	AUDIT_COL_ID, AUDIT_COL_TS, AUDIT_COL_SANDBOX, AUDIT_COL_KIND,
	AUDIT_COL_CLIENT, AUDIT_COL_HOST, AUDIT_COL_IP, AUDIT_COL_PORT,
	AUDIT_COL_COUNTRY, AUDIT_COL_ASN, AUDIT_COL_METHOD, AUDIT_COL_PATH,
	AUDIT_COL_STATUS, AUDIT_COL_DECISION, AUDIT_COL_RULE, AUDIT_COL_REASON,
	AUDIT_COL_CREDENTIAL, AUDIT_COL_BYTES_UP, AUDIT_COL_BYTES_DOWN,
	AUDIT_COL_DURATION_MS, AUDIT_COL_PREV_HASH, AUDIT_COL_HASH,
	AUDIT_NCOLS
};
/* The hash covers id .. duration_ms: every column but the two hashes. */
#define AUDIT_NHASHED	AUDIT_COL_PREV_HASH

extern const char *const audit_col_names[AUDIT_NCOLS];
extern const int audit_col_is_int[AUDIT_NCOLS];
/* "id, ts, sandbox, ..., hash": the select list of every reader. */
extern const char audit_col_list[];
extern const char audit_zero_hash[AUDIT_HASH_HEX + 1];

/* One stored value, as SQLite holds it (the type is part of the hash). */
enum audit_vtype {
	AUDIT_V_NULL, AUDIT_V_INT, AUDIT_V_TEXT, AUDIT_V_REAL, AUDIT_V_BLOB
};
struct audit_val {
	enum audit_vtype	 type;
	int64_t			 i;
	double			 r;
	const unsigned char	*p;	/* TEXT, BLOB */
	size_t			 len;
};

/*
 * Canonical encoding of v[0..AUDIT_NHASHED-1] into buf (cap bytes); returns
 * the length the encoding needs, which may exceed cap (then buf holds a
 * prefix). See docs/audit.md.
 */
size_t	audit_encode_row(const struct audit_val *v, unsigned char *buf,
	    size_t cap);
/*
 * hash = SHA-256(prev_hash as its 64 hex characters || encoding), written as
 * 64 lower-case hex digits plus NUL. 0, or -1 when OpenSSL fails.
 */
int	audit_chain_hash(const char *prev_hex, const struct audit_val *v,
	    char out[AUDIT_HASH_HEX + 1]);
/* Fill a value from column col of a stepped statement (valid until the next step). */
void	audit_val_from_stmt(struct sqlite3_stmt *, int col, struct audit_val *);

/* Timestamps: Unix ms <-> "YYYY-MM-DDTHH:MM:SS.mmmZ". */
int	audit_format_ts(int64_t ms, char *buf, size_t len);
/* RFC 3339 (date-time with Z or an offset, or a bare date) -> Unix ms. */
int	audit_parse_rfc3339(const char *s, int64_t *ms);
/* "15m" / "2h" / "7d" (before now_ms) or RFC 3339 -> Unix ms. */
int	audit_parse_time(const char *s, int64_t now_ms, int64_t *ms);
int64_t	audit_now_ms(void);

/* Vocabularies the CLI validates against. */
int	audit_valid_kind(const char *);
int	audit_valid_decision(const char *);
/* The kinds, in the order of their bits (audit_filter.kinds_in/out). */
extern const char *const audit_kinds[];
#define AUDIT_KIND_BIT(i)	(1u << (i))
/*
 * Pure: a --kind value, "KIND[,KIND...]" where a kind prefixed with "-" is
 * left out: "http,connect", "-admin,-vault". 0 with the two sets, or -1
 * with the word that is not a kind in bad (size badlen).
 */
int	audit_parse_kinds(const char *list, unsigned *in, unsigned *out,
	    char *bad, size_t badlen);

/* A query: NULL / 0 fields do not filter. */
struct audit_filter {
	const char	*sandbox;
	const char	*decision;
	const char	*kind;
	unsigned	 kinds_in;	/* AUDIT_KIND_BIT: kind is one of these */
	unsigned	 kinds_out;	/* kind is none of these */
	const char	*host_glob;	/* SQL GLOB, case-insensitive */
	const char	*credential;
	int		 has_since, has_until;
	int64_t		 since_ms;	/* ts >= since */
	int64_t		 until_ms;	/* ts <  until */
	int64_t		 after_id;	/* id > after_id, when > 0 */
	int64_t		 upto_id;	/* id <= upto_id, when > 0 */
	uint64_t	 limit;		/* 0: all */
	int		 asc;		/* oldest first */
	int		 by_id;		/* order by id instead of (ts, id) */
	/*
	 * The fleet store's dialect (PostgreSQL, $N parameters, table
	 * sandgate.events, a gateway column after hash); gateway filters.
	 */
	int		 store;
	const char	*gateway;
};
extern const char audit_store_cols[];

#define AUDIT_MAX_BINDS		12
#define AUDIT_SQL_MAX		1024
#define AUDIT_GLOB_MAX		512
struct audit_bind {
	int		 is_int;
	int64_t		 i;
	char		 s[AUDIT_GLOB_MAX];
};
struct audit_sql {
	char		 text[AUDIT_SQL_MAX];
	int		 n_binds;
	struct audit_bind binds[AUDIT_MAX_BINDS];
};

/*
 * Pure: the SELECT for a filter, every value a bound parameter. 0, or -1
 * (with *errstr) when a value is too long.
 */
int	audit_build_select(const struct audit_filter *, struct audit_sql *,
	    const char **errstr);
/* Bind the parameters of q to stmt; SQLite's return code. */
int	audit_bind_sql(struct sqlite3_stmt *, const struct audit_sql *);
/*
 * Pure: a glob as SQLite's GLOB reads it (*, ?, [a-z], [^a-z]) as an
 * anchored POSIX regular expression for PostgreSQL's ~. -1 when it does
 * not fit outlen.
 */
int	audit_glob_to_regex(const char *glob, char *out, size_t outlen);
/* Lower-case a host glob (ASCII); -1 when it does not fit. */
int	audit_glob_lower(const char *in, char *out, size_t outlen);

/* Output. */
enum audit_format { AUDIT_FMT_TABLE, AUDIT_FMT_JSON, AUDIT_FMT_CSV,
	AUDIT_FMT_OCSF };
/* "table" (or "text"), "json", "csv", "ocsf": 0, or -1 for another word. */
int	audit_format_parse(const char *, enum audit_format *);
void	audit_write_json(FILE *, const struct audit_val row[AUDIT_NCOLS]);
/*
 * One row as an OCSF 1.1 event on one line (audit_ocsf.c, jansson):
 * HTTP Activity (4002) for answered requests, Network Activity (4001) for
 * tunnels and unanswered requests, DNS Activity (4003) for dns rows, and
 * the gateway's own admin/vault rows as Base Event (0). The mapping is in
 * docs/audit.md; tests/e2e/data/ocsf/ has a JSON Schema per class.
 */
void	audit_write_ocsf(FILE *, const struct audit_val row[AUDIT_NCOLS]);
/*
 * What the exporter knows that a row does not, from its config: the DNS
 * listener (a dns row's resolver; dns_ip "" when unknown or a wildcard,
 * dns_port 0 when unknown), whether the ingress listener speaks TLS and
 * whether a rule intercepts (so a request in a tunnel was https).
 */
struct audit_ocsf_env {
	char		 dns_ip[64];
	int		 dns_port;
	int		 ingress_tls;
	/*
	 * Whether a request to host under the allow rule named rule
	 * ("P:allow[N]") came through intercepted TLS: 1 (the rule intercepts,
	 * or a credential is bound to host: always intercepted), the rule
	 * passes TLS through: 0, or not known: -1. NULL: never known.
	 */
	int		(*rule_tls)(void *arg, const char *rule, const char *host);
	void		*rule_arg;
};
void	audit_ocsf_set_env(const struct audit_ocsf_env *);
void	audit_write_csv_header(FILE *);
void	audit_write_csv(FILE *, const struct audit_val row[AUDIT_NCOLS]);

/* The database, read-only; NULL with a message in err (size errlen). */
struct sqlite3	*audit_db_open_ro(const char *path, char *err, size_t errlen);
/*
 * Print the rows of a filter in a format; returns the number printed (and
 * the id of the last one in *last_id when not NULL), or -1 with a message
 * in err.
 */
int64_t	 audit_query(struct sqlite3 *, const struct audit_filter *,
	    enum audit_format, FILE *, int64_t *last_id, char *err,
	    size_t errlen);
/* The highest id in the table (0 when empty), or -1 on error. */
int64_t	 audit_max_id(struct sqlite3 *, char *err, size_t errlen);

/*
 * Walk the chain in id order and check every checkpoint's signature with
 * pub (an Ed25519 public key; NULL: a checkpoint is an error, since it
 * cannot be checked). 0: intact; 1: bad_id is the first row that fails and
 * msg says why; -1: could not read (msg).
 */
struct audit_verify {
	uint64_t	 rows;
	uint64_t	 checkpoints;
	int64_t		 first_id, last_id;	/* 0 when the table is empty */
	int64_t		 last_ckpt_id;		/* 0: no checkpoint */
	int		 last_ckpt_shutdown;
	char		 last_ckpt_ts[AUDIT_TS_LEN + 1];
	char		 key_id[AUDIT_KEYID_HEX + 1];	/* of the last checkpoint */
	/* Rows after the last checkpoint (all rows when there is none). */
	uint64_t	 tail_rows;
	int64_t		 tail_first, tail_last;
	int64_t		 bad_id;
	char		 msg[320];
};
int	 audit_verify(struct sqlite3 *, EVP_PKEY *pub, struct audit_verify *);
/*
 * What verify found, for a person: the rows, the checkpoints, the unsigned
 * tail; each line starts with prefix.
 */
void	 audit_verify_report(FILE *, const char *prefix,
	    const struct audit_verify *);

/*
 * The retention row (kind admin, rule retention) records in its path
 * "/events?through=ID&rows=N&before=TS&anchor=HASH": rows up to ID were
 * deleted and the first surviving row's prev_hash is HASH.
 */
int	 audit_retention_format(char *buf, size_t len, int64_t through,
	    int64_t rows, const char *before_ts, const char *anchor);
int	 audit_retention_parse(const char *path, size_t len, int64_t *through,
	    char anchor[AUDIT_HASH_HEX + 1]);

/*
 * The checkpoint row (kind admin, rule and reason checkpoint) records in
 * its path "/events?through=ID&head=HASH&at=interval|shutdown&key=KEYID&
 * sig=SIG": rows up to ID, whose last hash is HASH, were signed at the
 * row's ts by the key KEYID (audit_key_id) with the Ed25519 signature SIG
 * (128 hex digits) over audit_checkpoint_message. The row follows row ID.
 */
#define AUDIT_CKPT_MSG_MAX	256
struct audit_checkpoint {
	int64_t		 through;
	char		 head[AUDIT_HASH_HEX + 1];
	int		 shutdown;	/* at=shutdown, else at=interval */
	char		 key_id[AUDIT_KEYID_HEX + 1];
	uint8_t		 sig[64];
};
int	 audit_checkpoint_format(char *buf, size_t len,
	    const struct audit_checkpoint *);
int	 audit_checkpoint_parse(const char *path, size_t len,
	    struct audit_checkpoint *);
/*
 * What is signed: "sandgate-audit-checkpoint-v1\nthrough=ID\nhead=HASH\n
 * at=AT\nts=TS\n" with ts the checkpoint row's own. Its length, or -1.
 */
int	 audit_checkpoint_message(int64_t through, const char *head,
	    int shutdown, const char *ts, char *buf, size_t len);
/* The first 16 hex digits of SHA-256 of the raw public key. */
int	 audit_key_id(const uint8_t pub[32], char out[AUDIT_KEYID_HEX + 1]);
/* An Ed25519 public key from a PEM file; NULL with a message in err. */
EVP_PKEY *audit_pubkey_read(const char *path, char *err, size_t errlen);
/* The key id of an Ed25519 public key; 0 or -1. */
int	 audit_pubkey_id(EVP_PKEY *, char out[AUDIT_KEYID_HEX + 1]);
/* 1: sig is pub's signature of msg; 0: it is not (or cannot be checked). */
int	 audit_sig_verify(EVP_PKEY *pub, const uint8_t *msg, size_t len,
	    const uint8_t sig[64]);

/*
 * The walk behind audit_verify, row by row in id order, for any store of
 * rows (audit.db, or one gateway's rows in the fleet store). A checkpoint
 * is checked with the key among pubs whose id it names (with one key: that
 * key, and a mismatch is reported as such). anchor finds
 * the chain's start when the first row is not id 1 (0 with the hash, 1
 * with bad_id and msg, -1 on error). audit_walk_row: 0 intact so far, 1 bad
 * (bad_id, msg), -1 error; audit_walk_end fills the summary.
 */
#define AUDIT_MAX_PUBKEYS	16
struct audit_walk {
	EVP_PKEY		*pubs[AUDIT_MAX_PUBKEYS];
	char			 pub_ids[AUDIT_MAX_PUBKEYS][AUDIT_KEYID_HEX + 1];
	int			 npubs;
	char			 expect[AUDIT_HASH_HEX + 1];
	int64_t			 prev_id, first_id;
	int			 have_prev;
	int			(*anchor)(void *, int64_t first, char *anchor,
				    struct audit_verify *);
	void			*anchor_ctx;
	struct audit_verify	*res;
};
void	 audit_walk_init(struct audit_walk *, EVP_PKEY *const *pubs, int npubs,
	    int (*anchor)(void *, int64_t, char *, struct audit_verify *),
	    void *anchor_ctx, struct audit_verify *res);
int	 audit_walk_row(struct audit_walk *, const struct audit_val *row);
void	 audit_walk_end(struct audit_walk *);
/*
 * For anchor callbacks, fed the retention rows in id order: 0 when row is
 * the intact retention row that explains a chain starting at first (anchor
 * set), 1 when it is that row but damaged (res), 2 when it is not (*best
 * tracks the nearest earlier one for audit_anchor_missing's message).
 */
int	 audit_anchor_candidate(const struct audit_val *row, int64_t first,
	    int64_t *best, char anchor[AUDIT_HASH_HEX + 1],
	    struct audit_verify *res);
void	 audit_anchor_missing(int64_t best, int64_t first,
	    struct audit_verify *res);
/*
 * The inverse of audit_encode_row: AUDIT_NHASHED values from their
 * canonical encoding (TEXT and BLOB point into buf). 0, or -1 when buf is
 * not exactly one encoded row.
 */
int	 audit_decode_row(const unsigned char *buf, size_t len,
	    struct audit_val *v);

#endif
