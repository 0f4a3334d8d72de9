/*
 * The vault store (docs/credentials.md): the key in vault.key, the sealed rows
 * of vault.db (AES-256-GCM, a fresh nonce per write, the entry name as
 * associated data), wiped memory for secret bytes and the reference-counted
 * snapshots the gateway reads secret values from.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sqlite3.h>

#include "vault/vault.h"
#include "core/util.h"
#include "vault/vault_int.h"

#define VAULT_KEY_LEN		32
#define VAULT_NONCE_LEN		12
#define VAULT_TAG_LEN		16
/* Associated data of the key check; never a valid entry name. */
#define VAULT_KEYCHECK_AAD	"#key-check"

struct vault {
	sqlite3		*db;
	unsigned char	*key;		/* VAULT_KEY_LEN bytes, secmem */
};

/* A row of secrets as stored; ct is a copy (ciphertext is not secret). */
struct vault_row {
	unsigned char	 nonce[VAULT_NONCE_LEN];
	unsigned char	 tag[VAULT_TAG_LEN];
	unsigned char	*ct;
	size_t		 ctlen;
};

static const char vault_schema[] =
    "CREATE TABLE IF NOT EXISTS secrets ("
    " name TEXT PRIMARY KEY NOT NULL,"
    " nonce BLOB NOT NULL,"
    " ciphertext BLOB NOT NULL,"
    " tag BLOB NOT NULL,"
    " created INTEGER NOT NULL,"
    " rotated INTEGER NOT NULL DEFAULT 0,"
    " version INTEGER NOT NULL DEFAULT 1);"
    "CREATE TABLE IF NOT EXISTS meta ("
    " key TEXT PRIMARY KEY NOT NULL,"
    " value BLOB NOT NULL);";

static __thread char vault_errbuf[512];

static const char *
vault_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const char *
vault_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(vault_errbuf, sizeof(vault_errbuf), fmt, ap);
	va_end(ap);
	return vault_errbuf;
}

/* ------------------------------------------------------------ wiped memory */

struct vault_secmem_hdr {
	size_t		maplen;
	size_t		pad;		/* keeps the payload 16-byte aligned */
};

void *
vault_secmem_alloc(size_t len)
{
	struct vault_secmem_hdr *h;
	long pg = sysconf(_SC_PAGESIZE);
	size_t maplen;
	void *p;

	if (pg <= 0)
		pg = 4096;
	if (len > ((size_t)1 << 40))
		return NULL;
	maplen = (len + sizeof(*h) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	p = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* Each of these is best effort: an old kernel or a low limit. */
	(void)madvise(p, maplen, MADV_DONTDUMP);
#ifdef MADV_WIPEONFORK
	(void)madvise(p, maplen, MADV_WIPEONFORK);
#endif
	(void)mlock(p, maplen);
	h = p;
	h->maplen = maplen;
	return h + 1;
}

void
vault_secmem_free(void *ptr)
{
	struct vault_secmem_hdr *h;
	size_t maplen;

	if (ptr == NULL)
		return;
	h = (struct vault_secmem_hdr *)ptr - 1;
	maplen = h->maplen;
	OPENSSL_cleanse(h, maplen);
	(void)munlock(h, maplen);
	munmap(h, maplen);
}

int
vault_name_valid(const char *name)
{
	size_t i;

	if (name == NULL || name[0] == '\0')
		return 0;
	for (i = 0; name[i] != '\0'; i++) {
		unsigned char c = (unsigned char)name[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9');

		if (i >= VAULT_NAME_MAX)
			return 0;
		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return 0;
	}
	return 1;
}

int
vault_snap_name_valid(const char *name)
{
	char base[VAULT_NAME_MAX + 1];
	const char *h = name != NULL ? strchr(name, '#') : NULL;
	size_t i;

	if (h == NULL)
		return vault_name_valid(name);
	if ((size_t)(h - name) > VAULT_NAME_MAX || h[1] == '\0' ||
	    strlen(h + 1) > 8)
		return 0;
	for (i = 1; h[i] != '\0'; i++)
		if (h[i] < 'a' || h[i] > 'z')
			return 0;
	memcpy(base, name, (size_t)(h - name));
	base[h - name] = '\0';
	return vault_name_valid(base);
}

/* ------------------------------------------------------------ sealing */

static int
vault_seal(const unsigned char *key, const char *aad, const void *pt,
    size_t len, unsigned char *nonce, unsigned char *ct, unsigned char *tag)
{
	EVP_CIPHER_CTX *c;
	int n, ok = 0;

	if (len > VAULT_VALUE_MAX ||
	    RAND_bytes(nonce, VAULT_NONCE_LEN) != 1 ||
	    (c = EVP_CIPHER_CTX_new()) == NULL) {
		ERR_clear_error();
		return -1;
	}
	if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, VAULT_NONCE_LEN,
	    NULL) == 1 &&
	    EVP_EncryptInit_ex(c, NULL, NULL, key, nonce) == 1 &&
	    EVP_EncryptUpdate(c, NULL, &n, (const unsigned char *)aad,
	    (int)strlen(aad)) == 1 &&
	    (len == 0 || EVP_EncryptUpdate(c, ct, &n, pt, (int)len) == 1) &&
	    EVP_EncryptFinal_ex(c, ct + len, &n) == 1 &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, VAULT_TAG_LEN,
	    tag) == 1)
		ok = 1;
	EVP_CIPHER_CTX_free(c);
	ERR_clear_error();
	return ok ? 0 : -1;
}

/* Open into out (len bytes, wiped memory); out is cleansed on failure. */
static int
vault_unseal(const unsigned char *key, const char *aad,
    const struct vault_row *r, unsigned char *out)
{
	EVP_CIPHER_CTX *c;
	unsigned char tag[VAULT_TAG_LEN];
	int n, ok = 0;

	if (r->ctlen > VAULT_VALUE_MAX || (c = EVP_CIPHER_CTX_new()) == NULL)
		return -1;
	memcpy(tag, r->tag, sizeof(tag));
	if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, VAULT_NONCE_LEN,
	    NULL) == 1 &&
	    EVP_DecryptInit_ex(c, NULL, NULL, key, r->nonce) == 1 &&
	    EVP_DecryptUpdate(c, NULL, &n, (const unsigned char *)aad,
	    (int)strlen(aad)) == 1 &&
	    (r->ctlen == 0 || EVP_DecryptUpdate(c, out, &n, r->ct,
	    (int)r->ctlen) == 1) &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, VAULT_TAG_LEN,
	    tag) == 1 &&
	    EVP_DecryptFinal_ex(c, out + r->ctlen, &n) == 1)
		ok = 1;
	EVP_CIPHER_CTX_free(c);
	ERR_clear_error();
	if (!ok && r->ctlen > 0)
		OPENSSL_cleanse(out, r->ctlen);
	return ok ? 0 : -1;
}

/* ------------------------------------------------------------ files */

/*
 * Read the key: 32 raw bytes, or 64 hex digits and an optional newline
 * (`openssl rand -hex 32`). 0, -1 with *errstr, or -2 when it is missing.
 */
static int
vault_key_read(const char *path, unsigned char *key, const char **errstr)
{
	unsigned char buf[VAULT_KEY_LEN * 2 + 3];
	struct stat st;
	ssize_t r;
	size_t n = 0;
	int fd, rc = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return -2;
		*errstr = vault_err("cannot open vault key %s: %s", path,
		    strerror(errno));
		return -1;
	}
	/* fstat what we read from: no window to swap the file. */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		*errstr = vault_err("vault key %s is not a regular file", path);
		goto done;
	}
	if (st.st_mode & 077) {
		*errstr = vault_err("vault key %s is accessible by group or "
		    "others (mode %03o); chmod 600 %s", path,
		    (unsigned)(st.st_mode & 0777), path);
		goto done;
	}
	while (n < sizeof(buf)) {
		r = read(fd, buf + n, sizeof(buf) - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			*errstr = vault_err("cannot read vault key %s: %s",
			    path, strerror(errno));
			goto done;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n == VAULT_KEY_LEN) {
		memcpy(key, buf, VAULT_KEY_LEN);
		rc = 0;
	} else if (n == 2 * VAULT_KEY_LEN ||
	    (n == 2 * VAULT_KEY_LEN + 1 && buf[n - 1] == '\n')) {
		rc = util_hex_decode((const char *)buf, 2 * VAULT_KEY_LEN, key,
		    0);
	}
	if (rc == -1) {
		OPENSSL_cleanse(key, VAULT_KEY_LEN);
		*errstr = vault_err("vault key %s is not 32 bytes (or 64 hex "
		    "digits)", path);
	}
done:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* A new random key at path, mode 0600 from the first moment (O_EXCL). */
static int
vault_key_create(const char *path, const char **errstr)
{
	unsigned char key[VAULT_KEY_LEN];
	size_t off = 0;
	ssize_t w;
	int fd, saved;

	if (util_mkdir_parents(path) == -1) {
		*errstr = vault_err("cannot create the directory of %s: %s",
		    path, strerror(errno));
		return -1;
	}
	if (RAND_priv_bytes(key, sizeof(key)) != 1) {
		ERR_clear_error();
		*errstr = "cannot generate a vault key: no randomness";
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (fd == -1) {
		OPENSSL_cleanse(key, sizeof(key));
		if (errno == EEXIST)
			return 0;	/* someone else made it; read theirs */
		*errstr = vault_err("cannot create vault key %s: %s", path,
		    strerror(errno));
		return -1;
	}
	while (off < sizeof(key)) {
		w = write(fd, key + off, sizeof(key) - off);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	OPENSSL_cleanse(key, sizeof(key));
	if (off != sizeof(key) || fsync(fd) == -1) {
		saved = errno;
		close(fd);
		unlink(path);
		*errstr = vault_err("cannot write vault key %s: %s", path,
		    strerror(saved ? saved : EIO));
		return -1;
	}
	if (close(fd) == -1) {
		saved = errno;
		unlink(path);
		*errstr = vault_err("cannot write vault key %s: %s", path,
		    strerror(saved));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ database */

static const char *
vault_dberr(struct vault *v, const char *what)
{
	const char *fn = sqlite3_db_filename(v->db, "main");

	return vault_err("vault database %s: %s: %s", fn ? fn : "?", what,
	    sqlite3_errmsg(v->db));
}

static int
vault_exec(struct vault *v, const char *sql, const char *what,
    const char **errstr)
{
	if (sqlite3_exec(v->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		*errstr = vault_dberr(v, what);
		return -1;
	}
	return 0;
}

static int
vault_prepare(struct vault *v, const char *sql, sqlite3_stmt **st,
    const char **errstr)
{
	if (sqlite3_prepare_v2(v->db, sql, -1, st, NULL) != SQLITE_OK) {
		*errstr = vault_dberr(v, "prepare");
		*st = NULL;
		return -1;
	}
	return 0;
}

/* Copy a blob column of exactly len bytes (len 0: 1..VALUE_MAX, allocated). */
static int
vault_col_blob(sqlite3_stmt *st, int col, unsigned char *fixed, size_t len,
    unsigned char **dyn, size_t *dynlen)
{
	const void *p = sqlite3_column_blob(st, col);
	size_t n = (size_t)sqlite3_column_bytes(st, col);

	if (sqlite3_column_type(st, col) != SQLITE_BLOB || p == NULL)
		return -1;
	if (fixed != NULL) {
		if (n != len)
			return -1;
		memcpy(fixed, p, n);
		return 0;
	}
	if (n == 0 || n > VAULT_VALUE_MAX || (*dyn = malloc(n)) == NULL)
		return -1;
	memcpy(*dyn, p, n);
	*dynlen = n;
	return 0;
}

/* Fetch the sealed row of name: 1 found, 0 not found, -1 error. */
static int
vault_row_get(struct vault *v, const char *name, struct vault_row *r,
    const char **errstr)
{
	sqlite3_stmt *st;
	int rc;

	memset(r, 0, sizeof(*r));
	if (vault_prepare(v, "SELECT nonce, ciphertext, tag FROM secrets "
	    "WHERE name = ?", &st, errstr) == -1)
		return -1;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_finalize(st);
		return 0;
	}
	if (rc != SQLITE_ROW) {
		*errstr = vault_dberr(v, "read entry");
		sqlite3_finalize(st);
		return -1;
	}
	if (vault_col_blob(st, 0, r->nonce, VAULT_NONCE_LEN, NULL, NULL) ||
	    vault_col_blob(st, 1, NULL, 0, &r->ct, &r->ctlen) ||
	    vault_col_blob(st, 2, r->tag, VAULT_TAG_LEN, NULL, NULL)) {
		*errstr = vault_err("entry %s does not open: malformed row",
		    name);
		free(r->ct);
		r->ct = NULL;
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 1;
}

static void
vault_row_clear(struct vault_row *r)
{
	free(r->ct);
	r->ct = NULL;
}

/* Count of entries, and whether a key check is stored: 0 or -1. */
static int
vault_db_state(struct vault *v, int64_t *entries, struct vault_row *check,
    int *has_check, const char **errstr)
{
	sqlite3_stmt *st;
	const void *p;
	int rc, n;

	*has_check = 0;
	if (vault_prepare(v, "SELECT count(*) FROM secrets", &st, errstr) == -1)
		return -1;
	if (sqlite3_step(st) != SQLITE_ROW) {
		*errstr = vault_dberr(v, "count entries");
		sqlite3_finalize(st);
		return -1;
	}
	*entries = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);

	if (vault_prepare(v, "SELECT value FROM meta WHERE key = 'key_check'",
	    &st, errstr) == -1)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		p = sqlite3_column_blob(st, 0);
		n = sqlite3_column_bytes(st, 0);
		if (p == NULL || n != VAULT_NONCE_LEN + VAULT_TAG_LEN) {
			*errstr = "vault database: malformed key check";
			sqlite3_finalize(st);
			return -1;
		}
		memset(check, 0, sizeof(*check));
		memcpy(check->nonce, p, VAULT_NONCE_LEN);
		memcpy(check->tag, (const char *)p + VAULT_NONCE_LEN,
		    VAULT_TAG_LEN);
		*has_check = 1;
	} else if (rc != SQLITE_DONE) {
		*errstr = vault_dberr(v, "read key check");
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

/* Store a seal of nothing under the key, so a wrong key is caught at open. */
static int
vault_keycheck_write(struct vault *v, const char **errstr)
{
	unsigned char blob[VAULT_NONCE_LEN + VAULT_TAG_LEN], none[16];
	sqlite3_stmt *st;
	int rc;

	if (vault_seal(v->key, VAULT_KEYCHECK_AAD, "", 0, blob, none,
	    blob + VAULT_NONCE_LEN) == -1) {
		*errstr = "vault: cannot seal the key check";
		return -1;
	}
	if (vault_prepare(v, "INSERT OR IGNORE INTO meta (key, value) "
	    "VALUES ('key_check', ?)", &st, errstr) == -1)
		return -1;
	sqlite3_bind_blob(st, 1, blob, sizeof(blob), SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		*errstr = vault_dberr(v, "write key check");
		return -1;
	}
	return 0;
}

static int
vault_db_open(struct vault *v, const char *db_path, const char **errstr)
{
	struct stat st;
	int fd;

	if (util_mkdir_parents(db_path) == -1) {
		*errstr = vault_err("cannot create the directory of %s: %s",
		    db_path, strerror(errno));
		return -1;
	}
	/* Create it 0600 ourselves: SQLite would use 0644 & ~umask. */
	fd = open(db_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		*errstr = vault_err("cannot open vault database %s: %s",
		    db_path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		*errstr = vault_err("vault database %s is not a regular file",
		    db_path);
		return -1;
	}
	close(fd);
	if (sqlite3_open_v2(db_path, &v->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		*errstr = vault_err("cannot open vault database %s: %s",
		    db_path, v->db ? sqlite3_errmsg(v->db) : "out of memory");
		return -1;
	}
	if (sqlite3_busy_timeout(v->db, 5000) != SQLITE_OK) {
		*errstr = vault_dberr(v, "busy timeout");
		return -1;
	}
	/* Overwritten and deleted ciphertexts are zeroed in the file. */
	if (vault_exec(v, "PRAGMA secure_delete = ON", "secure_delete",
	    errstr) == -1 ||
	    vault_exec(v, vault_schema, "schema", errstr) == -1)
		return -1;
	return 0;
}

struct vault *
vault_open(const char *db_path, const char *key_file, int create_key,
    const char **errstr)
{
	struct vault *v;
	struct vault_row check;
	unsigned char empty[1];
	int64_t entries;
	int has_check, rc;

	if (db_path == NULL || key_file == NULL) {
		*errstr = "vault: no database or key file configured";
		return NULL;
	}
	if ((v = calloc(1, sizeof(*v))) == NULL ||
	    (v->key = vault_secmem_alloc(VAULT_KEY_LEN)) == NULL) {
		free(v);
		*errstr = "out of memory";
		return NULL;
	}
	if (vault_db_open(v, db_path, errstr) == -1 ||
	    vault_db_state(v, &entries, &check, &has_check, errstr) == -1)
		goto fail;
	rc = vault_key_read(key_file, v->key, errstr);
	/* A new key only where nothing is sealed under the old one. */
	if (rc == -2 && create_key && entries == 0) {
		if (vault_key_create(key_file, errstr) == -1)
			goto fail;
		if ((rc = vault_key_read(key_file, v->key, errstr)) == 0 &&
		    has_check) {
			if (vault_exec(v, "DELETE FROM meta WHERE key = "
			    "'key_check'", "reset key check", errstr) == -1)
				goto fail;
			has_check = 0;
		}
	}
	if (rc == -2) {
		if (entries > 0)
			*errstr = vault_err("vault key %s is missing, but %s "
			    "holds %lld secrets sealed under it: restore it",
			    key_file, db_path, (long long)entries);
		else
			*errstr = vault_err("vault key %s does not exist",
			    key_file);
		goto fail;
	}
	if (rc == -1)
		goto fail;
	if (has_check) {
		check.ct = empty;
		check.ctlen = 0;
		if (vault_unseal(v->key, VAULT_KEYCHECK_AAD, &check,
		    empty) == -1) {
			*errstr = vault_err("vault key %s does not open %s "
			    "(wrong key?)", key_file, db_path);
			goto fail;
		}
	} else if (entries == 0 && vault_keycheck_write(v, errstr) == -1)
		goto fail;
	return v;
fail:
	vault_close(v);
	return NULL;
}

void
vault_close(struct vault *v)
{
	if (v == NULL)
		return;
	if (v->db != NULL)
		sqlite3_close(v->db);
	vault_secmem_free(v->key);
	free(v);
}

/* ------------------------------------------------------------ entries */

static int
vault_check_name(const char *name, const char **errstr)
{
	/* An invalid name is not echoed: it may be a value typed by mistake. */
	if (!vault_name_valid(name)) {
		*errstr = "invalid entry name (letters, digits, '.', '_', '-'; "
		    "at most 64; starting with a letter or digit)";
		return -1;
	}
	return 0;
}

static int
vault_set_bind(sqlite3_stmt *st, const unsigned char *nonce,
    const unsigned char *ct, size_t len, const unsigned char *tag,
    int64_t now, const char *name)
{
	return sqlite3_bind_blob(st, 1, nonce, VAULT_NONCE_LEN,
	    SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 2, ct, (int)len,
	    SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 3, tag, VAULT_TAG_LEN,
	    SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, now) != SQLITE_OK ||
	    sqlite3_bind_text(st, 5, name, -1, SQLITE_STATIC) != SQLITE_OK ?
	    -1 : 0;
}

int
vault_set(struct vault *v, const char *name, const void *value, size_t len,
    int rotate, const char **errstr)
{
	static const char *const sql[] = {
		[VAULT_SET_NEW] = "INSERT INTO secrets (nonce, ciphertext, "
		    "tag, created, name) VALUES (?1, ?2, ?3, ?4, ?5)",
		[VAULT_SET_ROTATE] = "UPDATE secrets SET nonce = ?1, "
		    "ciphertext = ?2, tag = ?3, rotated = ?4, "
		    "version = version + 1 WHERE name = ?5",
		[VAULT_SET_REPLACE] = "INSERT INTO secrets (nonce, ciphertext, "
		    "tag, created, name) VALUES (?1, ?2, ?3, ?4, ?5) "
		    "ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce, "
		    "ciphertext = excluded.ciphertext, tag = excluded.tag, "
		    "version = version + 1",
	};
	unsigned char nonce[VAULT_NONCE_LEN], tag[VAULT_TAG_LEN], *ct = NULL;
	sqlite3_stmt *st = NULL;
	int rc = -1, src;

	if (vault_check_name(name, errstr) == -1)
		return -1;
	if (rotate < VAULT_SET_NEW || rotate > VAULT_SET_REPLACE) {
		*errstr = "vault_set: bad mode";
		return -1;
	}
	if (len == 0 || len > VAULT_VALUE_MAX) {
		*errstr = len == 0 ? "empty value" :
		    "value longer than 16384 bytes";
		return -1;
	}
	if ((ct = malloc(len)) == NULL) {
		*errstr = "out of memory";
		return -1;
	}
	if (vault_seal(v->key, name, value, len, nonce, ct, tag) == -1) {
		*errstr = vault_err("cannot seal entry %s", name);
		goto done;
	}
	if (vault_prepare(v, sql[rotate], &st, errstr) == -1)
		goto done;
	if (vault_set_bind(st, nonce, ct, len, tag, (int64_t)time(NULL),
	    name) == -1) {
		*errstr = vault_dberr(v, "bind");
		goto done;
	}
	src = sqlite3_step(st);
	if ((src & 0xff) == SQLITE_CONSTRAINT && rotate == VAULT_SET_NEW)
		*errstr = vault_err("entry %s already exists", name);
	else if (src != SQLITE_DONE)
		*errstr = vault_dberr(v, "store entry");
	else if (rotate == VAULT_SET_ROTATE && sqlite3_changes(v->db) == 0)
		*errstr = vault_err("no entry named %s", name);
	else
		rc = 0;
done:
	sqlite3_finalize(st);
	free(ct);
	return rc;
}

int
vault_rm(struct vault *v, const char *name, const char **errstr)
{
	sqlite3_stmt *st;
	int rc;

	if (vault_check_name(name, errstr) == -1 ||
	    vault_prepare(v, "DELETE FROM secrets WHERE name = ?", &st,
	    errstr) == -1)
		return -1;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		*errstr = vault_dberr(v, "remove entry");
		return -1;
	}
	if (sqlite3_changes(v->db) == 0) {
		*errstr = vault_err("no entry named %s", name);
		return -1;
	}
	return 0;
}

int
vault_list(struct vault *v, void (*cb)(const struct vault_entry_info *,
    void *), void *arg, const char **errstr)
{
	struct vault_entry_info info;
	sqlite3_stmt *st;
	const unsigned char *name;
	int rc;

	if (vault_prepare(v, "SELECT name, created, rotated, version "
	    "FROM secrets ORDER BY name", &st, errstr) == -1)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&info, 0, sizeof(info));
		name = sqlite3_column_text(st, 0);
		snprintf(info.name, sizeof(info.name), "%s",
		    name ? (const char *)name : "");
		info.created = sqlite3_column_int64(st, 1);
		info.rotated = sqlite3_column_int64(st, 2);
		info.version = sqlite3_column_int64(st, 3);
		cb(&info, arg);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		*errstr = vault_dberr(v, "list entries");
		return -1;
	}
	return 0;
}

static const char *
vault_err_noopen(const char *name)
{
	return vault_err("entry %s does not open: tampered or wrong key", name);
}

int
vault_check(struct vault *v, const char *name, const char **errstr)
{
	struct vault_row r;
	unsigned char *pt;
	int rc;

	if (vault_check_name(name, errstr) == -1)
		return -1;
	if ((rc = vault_row_get(v, name, &r, errstr)) <= 0) {
		if (rc == 0)
			*errstr = vault_err("no entry named %s", name);
		return -1;
	}
	if ((pt = vault_secmem_alloc(r.ctlen)) == NULL) {
		vault_row_clear(&r);
		*errstr = "out of memory";
		return -1;
	}
	rc = vault_unseal(v->key, name, &r, pt);
	vault_secmem_free(pt);
	vault_row_clear(&r);
	if (rc == -1)
		*errstr = vault_err_noopen(name);
	return rc;
}

/* ------------------------------------------------------------ snapshots */

const struct vault_secret *
vault_snapshot_find(const struct vault_snapshot *s, const char *name)
{
	size_t i;

	if (s == NULL || name == NULL)
		return NULL;
	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].name, name) == 0)
			return &s->e[i];
	return NULL;
}

const unsigned char *
vault_snapshot_value(const struct vault_snapshot *s, const char *name,
    size_t *len)
{
	const struct vault_secret *e = vault_snapshot_find(s, name);

	*len = e != NULL ? e->len : 0;
	return e != NULL ? e->val : NULL;
}

int
vault_snapshot_has(const struct vault_snapshot *s, const char *name)
{
	return vault_snapshot_find(s, name) != NULL;
}

static void
vault_snapshot_free(struct vault_snapshot *s)
{
	size_t i;

	/* The last reference: no scrubber reads the cache any more. */
	for (i = 0; i < s->n_cache; i++)
		s->cache_unref(s->cache[i]);
	s->n_cache = 0;
	pthread_mutex_destroy(&s->cache_mtx);
	vault_secmem_free(s->mem);
	free(s->e);
	free(s);
}

void
vault_snapshot_ref(struct vault_snapshot *s)
{
	atomic_fetch_add_explicit(&s->refcnt, 1, memory_order_relaxed);
}

void
vault_snapshot_unref(struct vault_snapshot *s)
{
	if (s != NULL &&
	    atomic_fetch_sub_explicit(&s->refcnt, 1, memory_order_acq_rel) == 1)
		vault_snapshot_free(s);
}

/* An empty snapshot for n names whose values total total bytes. */
static struct vault_snapshot *
vault_snapshot_alloc(size_t n, size_t total)
{
	struct vault_snapshot *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	atomic_init(&s->refcnt, 1);
	if ((n > 0 && (s->e = calloc(n, sizeof(*s->e))) == NULL) ||
	    (s->mem = vault_secmem_alloc(total ? total : 1)) == NULL ||
	    pthread_mutex_init(&s->cache_mtx, NULL) != 0) {
		vault_secmem_free(s->mem);
		free(s->e);
		free(s);
		return NULL;
	}
	return s;
}

static int
vault_seen(const char *const *names, size_t i)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (strcmp(names[j], names[i]) == 0)
			return 1;
	return 0;
}

struct vault_snapshot *
vault_snapshot_build(const char *const *names, const unsigned char *const *vals,
    const size_t *lens, size_t n)
{
	struct vault_snapshot *s;
	struct vault_secret *e;
	size_t i, total = 0, off = 0;

	for (i = 0; i < n; i++) {
		if (!vault_snap_name_valid(names[i]) || lens[i] == 0 ||
		    lens[i] > VAULT_VALUE_MAX)
			return NULL;
		total += lens[i];
	}
	if ((s = vault_snapshot_alloc(n, total)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (vault_seen(names, i))
			continue;
		e = &s->e[s->n++];

		snprintf(e->name, sizeof(e->name), "%s", names[i]);
		memcpy(s->mem + off, vals[i], lens[i]);
		e->val = s->mem + off;
		e->len = lens[i];
		off += lens[i];
	}
	return s;
}

/* The colon-separated fields of an aws_sigv4 value; 0 when it is not one. */
static size_t
vault_parts(const unsigned char *v, size_t len, size_t off[3], size_t plen[3])
{
	size_t i, k = 0, start = 0;

	for (i = 0; i <= len; i++) {
		if (i < len && v[i] != ':') {
			if (v[i] <= 0x20 || v[i] >= 0x7f)
				return 0;
			continue;
		}
		if (k == 3 || i == start)
			return 0;
		off[k] = start;
		plen[k++] = i - start;
		start = i + 1;
	}
	return k >= 2 ? k : 0;
}

struct vault_snapshot *
vault_snapshot_with_parts(const struct vault_snapshot *src,
    const char *const *names, size_t n, int *bad)
{
	static const char *const suffix[3] = { VAULT_PART_ID, VAULT_PART_KEY,
	    VAULT_PART_TOKEN };
	struct vault_snapshot *s;
	const struct vault_secret *e;
	size_t i, k, np, total = 0, extra = 0, off[3], plen[3];

	for (i = 0; i < src->n; i++)
		total += src->e[i].len;
	for (i = 0; i < n; i++) {
		bad[i] = 0;
		if ((e = vault_snapshot_find(src, names[i])) == NULL)
			continue;
		if ((np = vault_parts(e->val, e->len, off, plen)) == 0) {
			bad[i] = 1;
			continue;
		}
		extra += np;
		total += e->len;
	}
	if ((s = vault_snapshot_alloc(src->n + extra, total)) == NULL)
		return NULL;
	total = 0;
	for (i = 0; i < src->n; i++) {
		s->e[s->n] = src->e[i];
		memcpy(s->mem + total, src->e[i].val, src->e[i].len);
		s->e[s->n++].val = s->mem + total;
		total += src->e[i].len;
	}
	for (i = 0; i < n; i++) {
		if (bad[i] || (e = vault_snapshot_find(src, names[i])) == NULL ||
		    vault_snapshot_find(s, names[i]) == NULL)
			continue;
		np = vault_parts(e->val, e->len, off, plen);
		for (k = 0; k < np; k++) {
			char nm[sizeof(s->e[0].name)];

			if (snprintf(nm, sizeof(nm), "%s%s", names[i],
			    suffix[k]) >= (int)sizeof(nm) ||
			    vault_snapshot_find(s, nm) != NULL)
				continue;
			snprintf(s->e[s->n].name, sizeof(s->e[s->n].name), "%s",
			    nm);
			memcpy(s->mem + total, e->val + off[k], plen[k]);
			s->e[s->n].val = s->mem + total;
			s->e[s->n++].len = plen[k];
			total += plen[k];
		}
	}
	return s;
}

struct vault_snapshot *
vault_snapshot_load(struct vault *v, const char *const *names, size_t n,
    const char **errstr)
{
	struct vault_snapshot *s = NULL;
	struct vault_secret *e;
	struct vault_row *rows;
	size_t i, total = 0, off = 0;
	int rc, in_txn = 0;

	if ((rows = calloc(n ? n : 1, sizeof(*rows))) == NULL) {
		*errstr = "out of memory";
		return NULL;
	}
	/* One read transaction: a rotation lands wholly or not at all. */
	if (vault_exec(v, "BEGIN", "begin", errstr) == -1)
		goto fail;
	in_txn = 1;
	for (i = 0; i < n; i++) {
		if (vault_check_name(names[i], errstr) == -1)
			goto fail;
		if (vault_seen(names, i))
			continue;
		if ((rc = vault_row_get(v, names[i], &rows[i], errstr)) <= 0) {
			if (rc == 0)
				*errstr = vault_err("no entry named %s",
				    names[i]);
			goto fail;
		}
		total += rows[i].ctlen;
	}
	in_txn = 0;
	if (vault_exec(v, "COMMIT", "commit", errstr) == -1)
		goto fail;
	if ((s = vault_snapshot_alloc(n, total)) == NULL) {
		*errstr = "out of memory";
		goto fail;
	}
	for (i = 0; i < n; i++) {
		if (rows[i].ct == NULL)
			continue;	/* a duplicate name */
		e = &s->e[s->n];

		if (vault_unseal(v->key, names[i], &rows[i],
		    s->mem + off) == -1) {
			*errstr = vault_err_noopen(names[i]);
			goto fail;
		}
		snprintf(e->name, sizeof(e->name), "%s", names[i]);
		e->val = s->mem + off;
		e->len = rows[i].ctlen;
		off += rows[i].ctlen;
		s->n++;
	}
	for (i = 0; i < n; i++)
		vault_row_clear(&rows[i]);
	free(rows);
	return s;
fail:
	if (in_txn)
		sqlite3_exec(v->db, "ROLLBACK", NULL, NULL, NULL);
	for (i = 0; i < n; i++)
		vault_row_clear(&rows[i]);
	free(rows);
	if (s != NULL)
		vault_snapshot_free(s);
	return NULL;
}
