/*
 * A small YAML document tree built from libyaml events, for the config and
 * policy loaders: every node knows its file:line:col (1-based), mappings keep
 * their key order, and hostile input is bounded (size, depth, node count).
 */
#ifndef SG_YAML_TREE_H
#define SG_YAML_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "core/diag.h"

#define YTREE_MAX_FILE		(16u * 1024 * 1024)	/* bytes */
#define YTREE_MAX_DEPTH		64
#define YTREE_MAX_NODES		(4u * 1024 * 1024)
#define YTREE_MAX_SCALAR	65536			/* bytes per scalar */

enum ynode_type {
	YNODE_SCALAR,
	YNODE_SEQ,
	YNODE_MAP
};

/*
 * Children of a sequence or mapping are linked through next, in document
 * order. In a mapping each child is a value and child->key its key (always a
 * scalar). Strings are NUL-terminated and never contain a NUL byte.
 */
struct ynode {
	struct ynode	*next;
	struct ynode	*key;
	struct ynode	*first;		/* sequence and mapping children */
	char		*str;		/* scalar text */
	uint32_t	 len;		/* bytes in str */
	uint32_t	 n;		/* number of children */
	int		 line, col;
	enum ynode_type	 type;
	int		 plain;		/* unquoted, not a block scalar */
};

struct ytree {
	char		*file;		/* as given, for diagnostics */
	struct ynode	*root;		/* NULL or a null scalar: empty document */
	int		 nerr;		/* errors reported while building */
	struct ytree_chunk *chunks;	/* arena owning every node and string */
};

/*
 * Read and parse a file. Syntax errors, a file that cannot be read or is
 * too large, and unsupported constructs (anchors, aliases, tags, several
 * documents, duplicate keys) are reported to d. Returns NULL only when no
 * tree could be built (then at least one error was reported); a tree with
 * nerr > 0 has had its faulty parts left out and may still be checked for
 * further errors.
 */
struct ytree	*ytree_load_file(const char *path, struct diag *d);
/* The same over a buffer; file names it in diagnostics. */
struct ytree	*ytree_load_buf(const char *file, const void *buf, size_t len,
		    struct diag *d);
void		 ytree_free(struct ytree *);

/* Scalar helpers: null is "~", "null", "Null", "NULL" or empty, unquoted. */
int		 ynode_is_null(const struct ynode *);
const char	*ynode_type_name(const struct ynode *);
/* The value for key in a mapping, or NULL. */
struct ynode	*ynode_map_get(const struct ynode *map, const char *key);

/*
 * Typed access for the loaders. Each check reports to c->d at the node's
 * position, counts the error in c->nerr and returns -1; what names the key
 * being checked (the message starts with it).
 */
struct ycheck {
	struct diag	*d;
	const char	*file;
	int		 nerr;
};

void	ycheck_err(struct ycheck *, const struct ynode *, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
/*
 * Sort d's entries from index from on by file (in order of first
 * appearance), line and column, so that a report reads top to bottom.
 */
void	ycheck_sort(struct diag *d, size_t from);
/* s made printable for a message (\xNN escapes), cut to fit len with "...". */
const char *ycheck_esc(const char *s, char *buf, size_t len);
/* "unknown key \"k\" in what" at the key's position. */
void	ycheck_unknown(struct ycheck *, const struct ynode *value,
	    const char *what);
/*
 * The same, with " (did you mean \"allow\"?)" when a word of known
 * ("name|allow|deny", the keys that place takes) is near (diag_nearest).
 */
void	ycheck_unknown_of(struct ycheck *, const struct ynode *value,
	    const char *what, const char *known);
int	ycheck_is(struct ycheck *, const struct ynode *, enum ynode_type,
	    const char *what);
/* A non-null, non-empty scalar of at most maxlen bytes, no control chars. */
int	ycheck_str(struct ycheck *, const struct ynode *, const char *what,
	    size_t maxlen, const char **out);
/* true/false (also True, TRUE, False, FALSE), unquoted. */
int	ycheck_bool(struct ycheck *, const struct ynode *, const char *what,
	    int *out);
/* An unquoted decimal integer in [min, max]. */
int	ycheck_uint(struct ycheck *, const struct ynode *, const char *what,
	    uint64_t min, uint64_t max, uint64_t *out);

#endif
