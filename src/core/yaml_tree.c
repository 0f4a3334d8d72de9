/*
 * Turns libyaml's event stream into the position-carrying node tree of
 * yaml_tree.h. Owns the arena the nodes live in and the structural checks
 * every document gets: limits, one document, no anchors/aliases/tags, no
 * duplicate keys.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "core/yaml_tree.h"

#define YTREE_CHUNK_MIN	(64 * 1024)
#define YTREE_CHUNK_MAX	(4 * 1024 * 1024)

struct ytree_chunk {
	struct ytree_chunk *next;
	size_t		 used;
	size_t		 size;
	max_align_t	 data[];
};

struct ybuild_frame {
	struct ynode	*node;
	struct ynode	*last;		/* last child, for appending */
	struct ynode	*pending_key;	/* mapping: key waiting for its value */
	int		 drop_value;	/* the key was bad: drop the value */
};

struct ybuild {
	struct ytree	*t;
	struct diag	*d;
	const unsigned char *buf;
	size_t		 buflen;
	size_t		 nnodes;
	struct ybuild_frame stack[YTREE_MAX_DEPTH];
	int		 depth;
	int		 ndocs;
};

/* align: 1 for strings, pointer-size for nodes. */
static void *
ytree_alloc(struct ytree *t, size_t len, size_t align)
{
	struct ytree_chunk *c = t->chunks;
	size_t sz, off;

	off = c ? (c->used + align - 1) & ~(align - 1) : 0;
	if (c == NULL || off > c->size || c->size - off < len) {
		/* Chunks double, so small documents stay small. */
		sz = c ? c->size * 2 : YTREE_CHUNK_MIN;
		if (sz > YTREE_CHUNK_MAX)
			sz = YTREE_CHUNK_MAX;
		if (sz < len)
			sz = len;
		/*
		 * Pre-faulted mappings: first-touch page faults one at a
		 * time otherwise cost as much as parsing a big policy.
		 */
		c = mmap(NULL, sizeof(*c) + sz, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (c == MAP_FAILED)
			return NULL;
		c->used = 0;
		c->size = sz;
		c->next = t->chunks;
		t->chunks = c;
		off = 0;
	}
	c->used = off + len;
	return (char *)c->data + off;
}

static void	yb_err(struct ybuild *, int, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));

static void yb_err(struct ybuild *, int, int, const char *, ...)
    __attribute__((format(printf, 4, 5)));

static void
yb_err(struct ybuild *b, int line, int col, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	diag_add(b->d, b->t->file, line, col, "%s", msg);
	b->t->nerr++;
}

static struct ynode *
yb_node(struct ybuild *b, enum ynode_type type, const yaml_mark_t *m)
{
	struct ynode *n;

	if (b->nnodes >= YTREE_MAX_NODES) {
		yb_err(b, (int)m->line + 1, (int)m->column + 1,
		    "document too large (more than %u nodes)",
		    (unsigned)YTREE_MAX_NODES);
		return NULL;
	}
	if ((n = ytree_alloc(b->t, sizeof(*n), _Alignof(struct ynode))) ==
	    NULL) {
		yb_err(b, (int)m->line + 1, (int)m->column + 1,
		    "out of memory");
		return NULL;
	}
	memset(n, 0, sizeof(*n));
	n->type = type;
	n->line = (int)m->line + 1;
	n->col = (int)m->column + 1;
	b->nnodes++;
	return n;
}

static void
yb_append(struct ybuild_frame *f, struct ynode *n)
{
	if (f->last == NULL)
		f->node->first = n;
	else
		f->last->next = n;
	f->last = n;
	f->node->n++;
}

/* A finished node goes to its parent: item, key or value, or the root. */
static void
yb_attach(struct ybuild *b, struct ynode *n)
{
	struct ybuild_frame *f;

	if (b->depth == 0) {
		b->t->root = n;
		return;
	}
	f = &b->stack[b->depth - 1];
	if (f->node->type == YNODE_SEQ) {
		yb_append(f, n);
		return;
	}
	if (f->pending_key == NULL && !f->drop_value) {
		if (n->type != YNODE_SCALAR) {
			yb_err(b, n->line, n->col,
			    "mapping keys must be plain strings");
			f->drop_value = 1;
			return;
		}
		f->pending_key = n;
		return;
	}
	if (f->drop_value) {
		f->drop_value = 0;
		return;
	}
	n->key = f->pending_key;
	f->pending_key = NULL;
	yb_append(f, n);
}

static int
yb_keycmp(const void *a, const void *b)
{
	const struct ynode *x = *(struct ynode *const *)a;
	const struct ynode *y = *(struct ynode *const *)b;
	int c;

	if (x->key->len != y->key->len)
		return x->key->len < y->key->len ? -1 : 1;
	if ((c = memcmp(x->key->str, y->key->str, x->key->len)) != 0)
		return c;
	if (x->key->line != y->key->line)
		return x->key->line < y->key->line ? -1 : 1;
	return (x->key->col > y->key->col) - (x->key->col < y->key->col);
}

static int
yb_samekey(const struct ynode *x, const struct ynode *y)
{
	return x->key->len == y->key->len &&
	    memcmp(x->key->str, y->key->str, x->key->len) == 0;
}

/*
 * Report every key seen before in this mapping and drop its value, so that
 * the loaders see each key once. Sorting keeps a mapping of n keys at
 * O(n log n), whatever the input.
 */
static void
yb_check_dups(struct ybuild *b, struct ynode *map)
{
	struct ynode **v, *c, *prev;
	size_t i, j, n = map->n;
	int ndup = 0;

	if (n < 2)
		return;
	if (n <= 8) {
		struct ynode *small[8];

		for (i = 0, c = map->first; c != NULL; c = c->next)
			small[i++] = c;
		for (i = 1; i < n; i++)
			for (j = 0; j < i; j++)
				if (yb_samekey(small[i], small[j])) {
					small[i]->key->n = 1;	/* mark */
					ndup++;
					break;
				}
	} else {
		if ((v = malloc(n * sizeof(*v))) == NULL) {
			yb_err(b, map->line, map->col, "out of memory");
			return;
		}
		for (i = 0, c = map->first; c != NULL; c = c->next)
			v[i++] = c;
		qsort(v, n, sizeof(*v), yb_keycmp);
		for (i = 1; i < n; i++)
			if (yb_samekey(v[i], v[i - 1])) {
				v[i]->key->n = 1;
				ndup++;
			}
		free(v);
	}
	if (ndup == 0)
		return;
	/* Report in document order, and unlink the later copies. */
	prev = NULL;
	for (c = map->first; c != NULL; c = c->next) {
		if (c->key->n == 1) {
			yb_err(b, c->key->line, c->key->col,
			    "duplicate key \"%s\"", c->key->str);
			if (prev == NULL)
				map->first = c->next;
			else
				prev->next = c->next;
			map->n--;
			continue;
		}
		prev = c;
	}
}

static int
yb_scalar(struct ybuild *b, const yaml_event_t *ev)
{
	struct ynode *n;
	size_t len = ev->data.scalar.length;

	if (len > YTREE_MAX_SCALAR) {
		yb_err(b, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1,
		    "string too long (more than %u bytes)",
		    (unsigned)YTREE_MAX_SCALAR);
		return -1;
	}
	if (memchr(ev->data.scalar.value, '\0', len) != NULL) {
		yb_err(b, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1,
		    "NUL character in string");
		return -1;
	}
	if ((n = yb_node(b, YNODE_SCALAR, &ev->start_mark)) == NULL)
		return -1;
	if ((n->str = ytree_alloc(b->t, len + 1, 1)) == NULL) {
		yb_err(b, n->line, n->col, "out of memory");
		return -1;
	}
	memcpy(n->str, ev->data.scalar.value, len);
	n->str[len] = '\0';
	n->len = (uint32_t)len;
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	yb_attach(b, n);
	return 0;
}

static int
yb_open(struct ybuild *b, enum ynode_type type, const yaml_event_t *ev)
{
	struct ynode *n;

	if (b->depth >= YTREE_MAX_DEPTH) {
		yb_err(b, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1,
		    "nesting too deep (more than %d levels)", YTREE_MAX_DEPTH);
		return -1;
	}
	if ((n = yb_node(b, type, &ev->start_mark)) == NULL)
		return -1;
	b->stack[b->depth].node = n;
	b->stack[b->depth].last = NULL;
	b->stack[b->depth].pending_key = NULL;
	b->stack[b->depth].drop_value = 0;
	b->depth++;
	return 0;
}

static void
yb_close(struct ybuild *b)
{
	struct ynode *n = b->stack[b->depth - 1].node;

	if (n->type == YNODE_MAP)
		yb_check_dups(b, n);
	b->depth--;
	yb_attach(b, n);
}

/* Anchors and tags would make a node mean something else than it reads. */
static void
yb_check_props(struct ybuild *b, const yaml_event_t *ev,
    const yaml_char_t *anchor, const yaml_char_t *tag)
{
	int line = (int)ev->start_mark.line + 1;
	int col = (int)ev->start_mark.column + 1;

	if (anchor != NULL)
		yb_err(b, line, col,
		    "YAML anchors and aliases are not supported");
	if (tag != NULL)
		yb_err(b, line, col, "YAML tags are not supported");
}

/* Line and column of a byte offset, for reader errors that carry only that. */
static void
yb_offset_pos(const struct ybuild *b, size_t off, int *line, int *col)
{
	size_t i, ls = 0;
	int l = 1;

	if (off > b->buflen)
		off = b->buflen;
	for (i = 0; i < off; i++)
		if (b->buf[i] == '\n') {
			l++;
			ls = i + 1;
		}
	*line = l;
	*col = (int)(off - ls) + 1;
}

static void
yb_parse_error(struct ybuild *b, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "unknown error";
	int line, col;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		yb_err(b, 0, 0, "out of memory");
		break;
	case YAML_READER_ERROR:
		yb_offset_pos(b, p->problem_offset, &line, &col);
		yb_err(b, line, col, "invalid input: %s", problem);
		break;
	default:
		if (p->context != NULL)
			yb_err(b, (int)p->problem_mark.line + 1,
			    (int)p->problem_mark.column + 1,
			    "YAML syntax error: %s %s", p->context, problem);
		else
			yb_err(b, (int)p->problem_mark.line + 1,
			    (int)p->problem_mark.column + 1,
			    "YAML syntax error: %s", problem);
		break;
	}
}

/* One event; returns 1 at the end of the stream, 0 to go on, -1 to give up. */
static int
yb_event(struct ybuild *b, const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_STREAM_START_EVENT:
	case YAML_DOCUMENT_END_EVENT:
		return 0;
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++b->ndocs > 1) {
			yb_err(b, (int)ev->start_mark.line + 1,
			    (int)ev->start_mark.column + 1,
			    "only one YAML document per file");
			return -1;
		}
		return 0;
	case YAML_ALIAS_EVENT:
		yb_err(b, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1,
		    "YAML anchors and aliases are not supported");
		return -1;
	case YAML_SCALAR_EVENT:
		yb_check_props(b, ev, ev->data.scalar.anchor,
		    ev->data.scalar.tag);
		return yb_scalar(b, ev);
	case YAML_SEQUENCE_START_EVENT:
		yb_check_props(b, ev, ev->data.sequence_start.anchor,
		    ev->data.sequence_start.tag);
		return yb_open(b, YNODE_SEQ, ev);
	case YAML_MAPPING_START_EVENT:
		yb_check_props(b, ev, ev->data.mapping_start.anchor,
		    ev->data.mapping_start.tag);
		return yb_open(b, YNODE_MAP, ev);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth == 0)
			return -1;
		yb_close(b);
		return 0;
	default:
		return 0;
	}
}

struct ytree *
ytree_load_buf(const char *file, const void *buf, size_t len, struct diag *d)
{
	struct ybuild b;
	struct ytree *t;
	yaml_parser_t p;
	yaml_event_t ev;
	int rc = 0, fatal = 0;

	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->file = strdup(file ? file : "<input>")) == NULL) {
		free(t);
		diag_add(d, file, 0, 0, "out of memory");
		return NULL;
	}
	memset(&b, 0, sizeof(b));
	b.t = t;
	b.d = d;
	b.buf = buf;
	b.buflen = len;
	if (len > YTREE_MAX_FILE) {
		yb_err(&b, 0, 0, "file too large (more than %u bytes)",
		    (unsigned)YTREE_MAX_FILE);
		goto fail;
	}
	if (!yaml_parser_initialize(&p)) {
		yb_err(&b, 0, 0, "out of memory");
		goto fail;
	}
	yaml_parser_set_input_string(&p, buf, len);
	while (rc == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			yb_parse_error(&b, &p);
			fatal = 1;
			break;
		}
		rc = yb_event(&b, &ev);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (fatal || rc == -1)
		goto fail;
	return t;
fail:
	ytree_free(t);
	return NULL;
}

struct ytree *
ytree_load_file(const char *path, struct diag *d)
{
	struct ytree *t;
	struct stat st;
	char *buf = NULL;
	size_t off = 0;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		diag_add(d, path, 0, 0, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == -1) {
		diag_add(d, path, 0, 0, "cannot stat: %s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		diag_add(d, path, 0, 0, "not a regular file");
		goto fail;
	}
	if ((unsigned long long)st.st_size > YTREE_MAX_FILE) {
		diag_add(d, path, 0, 0, "file too large (more than %u bytes)",
		    (unsigned)YTREE_MAX_FILE);
		goto fail;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		diag_add(d, path, 0, 0, "out of memory");
		goto fail;
	}
	/* The file may grow under us: read no more than we sized for. */
	while (off < (size_t)st.st_size) {
		r = read(fd, buf + off, (size_t)st.st_size - off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			diag_add(d, path, 0, 0, "cannot read: %s",
			    strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	t = ytree_load_buf(path, buf, off, d);
	free(buf);
	return t;
fail:
	free(buf);
	close(fd);
	return NULL;
}

void
ytree_free(struct ytree *t)
{
	struct ytree_chunk *c, *next;

	if (t == NULL)
		return;
	for (c = t->chunks; c != NULL; c = next) {
		next = c->next;
		munmap(c, sizeof(*c) + c->size);
	}
	free(t->file);
	free(t);
}

int
ynode_is_null(const struct ynode *n)
{
	if (n == NULL || n->type != YNODE_SCALAR || !n->plain)
		return 0;
	return n->len == 0 || strcmp(n->str, "~") == 0 ||
	    strcmp(n->str, "null") == 0 || strcmp(n->str, "Null") == 0 ||
	    strcmp(n->str, "NULL") == 0;
}

const char *
ynode_type_name(const struct ynode *n)
{
	if (n == NULL)
		return "nothing";
	switch (n->type) {
	case YNODE_SEQ:
		return "a list";
	case YNODE_MAP:
		return "a mapping";
	default:
		return ynode_is_null(n) ? "null" : "a string";
	}
}

struct ynode *
ynode_map_get(const struct ynode *map, const char *key)
{
	struct ynode *c;

	if (map == NULL || map->type != YNODE_MAP)
		return NULL;
	for (c = map->first; c != NULL; c = c->next)
		if (strcmp(c->key->str, key) == 0)
			return c;
	return NULL;
}

void
ycheck_err(struct ycheck *c, const struct ynode *n, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	diag_add(c->d, c->file, n ? n->line : 0, n ? n->col : 0, "%s", msg);
	c->nerr++;
}

const char *
ycheck_esc(const char *s, char *buf, size_t len)
{
	size_t i, j;

	if (len == 0)
		return "";
	for (i = j = 0; s != NULL && s[i] != '\0'; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (j + 8 >= len) {
			memcpy(buf + j, "...", 3);
			j += 3;
			break;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
			j += (size_t)snprintf(buf + j, len - j, "\\x%02x", ch);
		else
			buf[j++] = (char)ch;
	}
	buf[j] = '\0';
	return buf;
}

void
ycheck_unknown(struct ycheck *c, const struct ynode *value, const char *what)
{
	const struct ynode *k = value->key ? value->key : value;
	char esc[80];

	ycheck_err(c, k, "unknown key \"%s\" in %s",
	    ycheck_esc(k->str, esc, sizeof(esc)), what);
}

void
ycheck_unknown_of(struct ycheck *c, const struct ynode *value,
    const char *what, const char *known)
{
	const struct ynode *k = value->key ? value->key : value;
	char esc[80], near[64];

	if (k->str == NULL || diag_nearest(k->str, known, near,
	    sizeof(near)) == NULL) {
		ycheck_unknown(c, value, what);
		return;
	}
	ycheck_err(c, k, "unknown key \"%s\" in %s (did you mean \"%s\"?)",
	    ycheck_esc(k->str, esc, sizeof(esc)), what, near);
}

int
ycheck_is(struct ycheck *c, const struct ynode *n, enum ynode_type type,
    const char *what)
{
	static const char *names[] = { "a string", "a list", "a mapping" };

	if (n != NULL && n->type == type)
		return 0;
	ycheck_err(c, n, "%s: expected %s, got %s", what, names[type],
	    ynode_type_name(n));
	return -1;
}

int
ycheck_str(struct ycheck *c, const struct ynode *n, const char *what,
    size_t maxlen, const char **out)
{
	size_t i;

	if (n == NULL || n->type != YNODE_SCALAR || ynode_is_null(n)) {
		ycheck_err(c, n, "%s: expected a string, got %s", what,
		    ynode_type_name(n));
		return -1;
	}
	if (n->len == 0) {
		ycheck_err(c, n, "%s: must not be empty", what);
		return -1;
	}
	if (n->len > maxlen) {
		ycheck_err(c, n, "%s: longer than %zu bytes", what, maxlen);
		return -1;
	}
	for (i = 0; i < n->len; i++) {
		unsigned char ch = (unsigned char)n->str[i];

		if (ch < 0x20 || ch == 0x7f) {
			ycheck_err(c, n, "%s: control characters are not "
			    "allowed", what);
			return -1;
		}
	}
	*out = n->str;
	return 0;
}

int
ycheck_bool(struct ycheck *c, const struct ynode *n, const char *what,
    int *out)
{
	static const char *t[] = { "true", "True", "TRUE" };
	static const char *f[] = { "false", "False", "FALSE" };
	size_t i;

	if (n != NULL && n->type == YNODE_SCALAR && n->plain) {
		for (i = 0; i < 3; i++) {
			if (strcmp(n->str, t[i]) == 0) {
				*out = 1;
				return 0;
			}
			if (strcmp(n->str, f[i]) == 0) {
				*out = 0;
				return 0;
			}
		}
	}
	ycheck_err(c, n, "%s: expected true or false", what);
	return -1;
}

int
ycheck_uint(struct ycheck *c, const struct ynode *n, const char *what,
    uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	char esc[48];

	if (n == NULL || n->type != YNODE_SCALAR || !n->plain || n->len == 0 ||
	    n->len > 20 || (n->len > 1 && n->str[0] == '0'))
		goto bad;
	for (i = 0; i < n->len; i++) {
		unsigned d = (unsigned char)n->str[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			goto bad;
		v = v * 10 + d;
	}
	if (v < min || v > max) {
		ycheck_err(c, n, "%s: %llu is out of range (%llu-%llu)", what,
		    (unsigned long long)v, (unsigned long long)min,
		    (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
bad:
	if (n != NULL && n->type == YNODE_SCALAR && !ynode_is_null(n))
		ycheck_err(c, n, "%s: expected an integer, got \"%s\"",
		    what, ycheck_esc(n->str, esc, sizeof(esc)));
	else
		ycheck_err(c, n, "%s: expected an integer, got %s", what,
		    ynode_type_name(n));
	return -1;
}

struct ysort_ent {
	size_t		 file;
	size_t		 orig;
	struct diag_entry e;
};

static int
ysort_cmp(const void *a, const void *b)
{
	const struct ysort_ent *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->e.line != y->e.line)
		return x->e.line < y->e.line ? -1 : 1;
	if (x->e.col != y->e.col)
		return x->e.col < y->e.col ? -1 : 1;
	return (x->orig > y->orig) - (x->orig < y->orig);
}

void
ycheck_sort(struct diag *d, size_t from)
{
	struct ysort_ent *v;
	const char **files = NULL, **nf;
	size_t n, i, j, nfiles = 0, last = 0;

	if (from >= d->n || d->n - from < 2)
		return;
	n = d->n - from;
	if ((v = malloc(n * sizeof(*v))) == NULL)
		return;
	for (i = 0; i < n; i++) {
		v[i].e = d->v[from + i];
		v[i].orig = i;
		/* Entries come in runs of one file: try the last one first. */
		if (nfiles > 0 && strcmp(files[last], v[i].e.file) == 0)
			j = last;
		else {
			for (j = 0; j < nfiles; j++)
				if (strcmp(files[j], v[i].e.file) == 0)
					break;
			if (j == nfiles) {
				if ((nf = realloc(files, (nfiles + 1) *
				    sizeof(*files))) == NULL)
					goto out;
				files = nf;
				files[nfiles++] = v[i].e.file;
			}
		}
		v[i].file = last = j;
	}
	qsort(v, n, sizeof(*v), ysort_cmp);
	for (i = 0; i < n; i++)
		d->v[from + i] = v[i].e;
out:
	free(files);
	free(v);
}
