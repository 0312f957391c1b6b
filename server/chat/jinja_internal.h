/*
 * jinja_internal.h - what the interpreter's files share: the values of a
 * render (Python's semantics, refcounted), the syntax tree a compile
 * builds, the state of one render, and each file's entry points.
 *
 * Ownership: a function returning a jv through an out-parameter hands
 * the caller one reference (release it with jv_drop()); a const jv * is
 * borrowed. Objects a template owns (literals, names) are immortal: their
 * counts are never touched, so a compiled template is read-only and many
 * threads render it at once. Everything else belongs to one render.
 */
#ifndef ATTND_JINJA_INTERNAL_H
#define ATTND_JINJA_INTERNAL_H

#include "jinja.h"

#include <stdarg.h>
#include <stdint.h>

/* The longest source a compile accepts: its memory is linear in the
 * source, but at a hundred-odd bytes of tree per byte at worst (a+a+a),
 * and real chat templates are tens of kilobytes. */
#define JINJA_MAX_SOURCE ((size_t)1 << 20)
/* Nesting a compile accepts (brackets, operators, statements inside
 * statements): deeper templates are refused, so that neither the parser
 * nor a render recurses past it. */
#define JINJA_MAX_PARSE_DEPTH 200
/* Hard ceilings on the caller's limits, which C's stack must hold. */
#define JINJA_HARD_DEPTH 256
/* C recursion of one render (expressions within statements within macro
 * calls): a render past it stops with JINJA_E_LIMIT. A level takes some
 * 500 bytes of stack (-O2), so a render needs half a megabyte at most;
 * macros nested max_depth deep take a few levels each. */
#define JINJA_MAX_NEST 1000
/* range() longer than this is refused, as jinja2's sandbox does. */
#define JINJA_MAX_RANGE 100000
/* Work proportional to bytes (copies, searches, comparisons) costs one
 * step per this many bytes, so a loop over a large string is bounded by
 * max_steps too. */
#define JINJA_BYTES_PER_STEP 64

/* ------------------------------------------------------------ values */

enum jv_kind {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_TUPLE,
    JV_DICT,
    JV_NS,     /* namespace(): a dict whose members {% set %} may change */
    JV_LOOP,   /* the loop variable of a for */
    JV_MACRO,  /* a macro, or the caller() of a call block */
    JV_METHOD, /* a method bound to its value: "a b".split */
    JV_FUNC    /* a global function: range, namespace, ... */
};

/* A string the safe or escape filter made: markupsafe's Markup, which
 * escapes what is added to it (autoescape is off, so nothing else
 * does). */
#define JV_MARKUP 1

/* Why a value is undefined, for the message of an error it causes. */
enum jv_why {
    JU_PLAIN,  /* nothing to say */
    JU_NAME,   /* a variable nobody set: u.s is its name */
    JU_ATTR,   /* a missing attribute or key: u.s, owner kind in aux */
    JU_INDEX,  /* a missing element: u.i, owner kind in aux */
    JU_UNSAFE, /* a mutating method: u.s, owner kind in aux */
    JU_PARAM,  /* a macro parameter not given: u.s */
    JU_HINT    /* u.hint says why */
};

struct jobj {
    uint32_t refs;
    uint8_t immortal; /* owned by a template: refs never change */
    uint32_t depth;   /* of nested containers, 1 for a leaf */
    size_t bytes;     /* charged to the render's max_bytes */
};

struct jstr;
struct jlist;
struct jdict;
struct jloop;
struct jmacro;
struct jmethod;

typedef struct jv {
    uint8_t kind; /* enum jv_kind */
    uint8_t why;  /* undefined: enum jv_why */
    uint16_t aux; /* undefined: the owner's kind; function: its id;
                     str: JV_MARKUP when it is markupsafe's Markup */
    union {
        bool b;
        int64_t i;
        double f;
        struct jobj *o;
        struct jstr *s;
        struct jlist *l; /* list or tuple */
        struct jdict *d; /* dict or namespace */
        struct jloop *loop;
        struct jmacro *m;
        struct jmethod *meth;
        const char *hint;
    } u;
} jv;

/* A string: UTF-8 as given (bytes that are not well-formed count as one
 * code point each), NUL-terminated. */
struct jstr {
    struct jobj h;
    size_t len;
    uint32_t hash; /* valid when hashed */
    bool hashed;
    char s[];
};

/* What Python object a list stands for. jinja2's map, select and the
 * like give generators: always true, no length, no items by index,
 * consumed by what iterates them; dict.items() and its kind give views;
 * range() a range. Each keeps its items here all the same. */
enum jlist_flavor {
    JL_PLAIN,
    JL_GENERATOR,
    JL_REVERSED, /* reversed(list): an iterator as a generator is */
    JL_ITEMS,    /* dict_items */
    JL_KEYS,     /* dict_keys */
    JL_VALUES,   /* dict_values */
    JL_RANGE
};

/* A list or a tuple (jv.kind says which). */
struct jlist {
    struct jobj h;
    size_t n, cap;
    jv *items;
    uint8_t flavor;   /* enum jlist_flavor */
    size_t consumed;  /* a generator's items already taken */
    int64_t range[3]; /* JL_RANGE: start, stop, step */
};

/* Insertion-ordered, as Python's dict: keys[i] maps to vals[i]; index is
 * an open-addressed table of positions + 1 (0: empty), kept once n
 * passes a few keys. */
struct jdict {
    struct jobj h;
    size_t n, cap;
    jv *keys, *vals;
    uint32_t *index;
    size_t index_cap; /* a power of two, or 0 */
};

struct jloop {
    struct jobj h;
    jv items; /* the list iterated (after the loop's if) */
    size_t index0;
};

struct jscope;
struct jnode;

/* A macro closes over the scope it was defined in (kept alive by the
 * render until its end); a caller() over the call block's. */
struct jmacro {
    struct jobj h;
    const struct jnode *def; /* JN_MACRO or JN_CALL_BLOCK */
    struct jscope *scope;
};

struct jmethod {
    struct jobj h;
    jv self;
    uint16_t id;             /* enum jinja_method_id */
    const struct jstr *name; /* as written; a reference held */
};

/* --------------------------------------------------------- syntax tree */

enum jnode_kind {
    /* expressions */
    JN_LIT,     /* lit */
    JN_NAME,    /* name */
    JN_LIST,    /* a: first item, chained by next; count */
    JN_TUPLE,   /* likewise */
    JN_DICT,    /* a: key, value, key, value... chained; count pairs */
    JN_GETATTR, /* a.name; id: method id of name */
    JN_GETITEM, /* a[b] */
    JN_SLICE,   /* a[b:c:d], each of b c d may be NULL */
    JN_CALL,    /* a(b...); arguments with kw set are keywords */
    JN_FILTER,  /* a|name(b...); id: filter; id2: the filter or test a
                   map/select names, resolved here (-1: at render) */
    JN_TEST,    /* a is [not] name(b...); id: test; negate */
    JN_NEG,     /* -a */
    JN_POS,     /* +a */
    JN_NOT,     /* not a */
    JN_AND,     /* a and b */
    JN_OR,      /* a or b */
    JN_BINARY,  /* a op b: + - * / // % ** */
    JN_CONCAT,  /* a ~ ... chained; count */
    JN_COMPARE, /* a, then b chained, each with cmp against the previous */
    JN_COND,    /* a if b else c (c NULL: undefined) */
    /* statements, chained by next */
    JN_TEXT,         /* text, len */
    JN_OUTPUT,       /* {{ a }} */
    JN_IF,           /* if a: b else c */
    JN_FOR,          /* for a (names chained, count; unpack) in b if c:
                        d else e */
    JN_SET,          /* set a (names, or a JN_GETATTR for ns.x; count;
                        unpack) = b */
    JN_SET_BLOCK,    /* set a: body b */
    JN_MACRO,        /* macro name(a: params, each a JN_NAME whose a is
                        its default); body b; count params */
    JN_CALL_BLOCK,   /* call(b: params) a: body c */
    JN_FILTER_BLOCK, /* filter a (JN_FILTERs, value-less, chained by a): b */
    JN_BLOCK,        /* generation: body a */
    JN_BREAK,
    JN_CONTINUE
};

/* Binary operators and comparisons. */
enum jinja_op {
    JOP_ADD = 1,
    JOP_SUB,
    JOP_MUL,
    JOP_DIV,
    JOP_FLOORDIV,
    JOP_MOD,
    JOP_POW,
    JOP_EQ,
    JOP_NE,
    JOP_LT,
    JOP_LE,
    JOP_GT,
    JOP_GE,
    JOP_IN,
    JOP_NOTIN
};

struct jnode {
    uint8_t kind; /* enum jnode_kind */
    uint8_t op;   /* JN_BINARY: enum jinja_op */
    uint8_t cmp;  /* an operand after the first of a JN_COMPARE */
    bool negate;  /* JN_TEST: is not */
    bool unpack;  /* JN_FOR, JN_SET: the target is a tuple */
    bool varargs; /* JN_MACRO: the body reads varargs or kwargs */
    bool elif;    /* JN_IF: an elif, the else of the if before it */
    int16_t id, id2;
    unsigned line, col;
    size_t count;
    struct jnode *next;
    struct jnode *a, *b, *c, *d, *e;
    struct jstr *name; /* immortal */
    struct jstr *kw;   /* an argument given by keyword: its name */
    jv lit;            /* immortal */
    const char *text;  /* JN_TEXT: into the template's source */
    size_t len;
};

/* Names the interpreter itself binds. */
enum jinja_name {
    JNAME_LOOP,
    JNAME_CALLER,
    JNAME_VARARGS,
    JNAME_KWARGS,
    JNAME_COUNT
};

struct jchunk;
struct jinja_template {
    struct jchunk *arena; /* every node, name and literal */
    char *src;            /* the source, newlines normalized */
    size_t len;
    struct jnode *body;
    struct jstr *names[JNAME_COUNT];
};

/* ------------------------------------------------------------ a render */

/* A growable byte buffer: either the render's output (capped by
 * max_output) or a capture that becomes a value (charged to max_bytes). */
struct jbuf {
    char *data;
    size_t len, alloc;
    bool is_output;
};

/* Variables: a chain of scopes, the innermost first. A for's body gets
 * a new scope each iteration, a macro call one whose parent is the
 * macro's definition's; if does not make one. */
struct jscope {
    struct jscope *parent;
    struct jdict *vars; /* names (immortal strings) to values */
    bool captured;      /* a macro closes over it: kept to the end */
    struct jscope *next_kept;
};

enum jinja_ctl { JCTL_NONE, JCTL_BREAK, JCTL_CONTINUE };

struct jctx {
    const struct jinja_template *t;
    struct jinja_error *err;
    size_t max_output, max_steps, max_depth, max_bytes;
    size_t steps, bytes, calls, nest;
    time_t now;
    struct jscope *scope;
    struct jscope *kept; /* scopes closed over, freed at the end */
    struct jbuf *out;
    int ctl; /* enum jinja_ctl: a break or continue on its way out */
    jinja_status status;    /* of the last jinja_fail(), for allocators */
    const struct jnode *at; /* the node under evaluation, for messages */
};

/* ----------------------------------------------------- jinja_error.c */

/* Fill c->err with the formatted message, " at line L, column C" of at
 * (or of c->at when NULL), and return st. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
jinja_status
jinja_fail(struct jctx *c, const struct jnode *at, jinja_status st,
           const char *fmt, ...);
/* The same message for a compile (no render yet). */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 0)))
#endif
void jinja_error_set(struct jinja_error *err, unsigned line, unsigned col,
                     const char *fmt, va_list ap);
/* Make msg one line of valid UTF-8 within its buffer. */
void jinja_error_clean(char *msg);

/* Count n steps (or bytes of work) against max_steps. */
jinja_status jinja_step(struct jctx *c, size_t n);
/* Count n steps where no error can be returned: the next jinja_step()
 * fails if they went past max_steps. */
void jinja_spend(struct jctx *c, size_t n);
jinja_status jinja_step_bytes(struct jctx *c, size_t bytes);

/* ------------------------------------------------------ jinja_value.c */

void *jinja_alloc(struct jctx *c, size_t n);
void *jinja_realloc(struct jctx *c, void *p, size_t old_n, size_t new_n);
void jinja_release(struct jctx *c, void *p, size_t n);

static inline bool jv_is_heap(const jv *v)
{
    return (v->kind >= JV_STR && v->kind <= JV_METHOD) ||
           (v->kind == JV_UNDEF && v->u.s &&
            (v->why == JU_ATTR || v->why == JU_NAME || v->why == JU_UNSAFE ||
             v->why == JU_PARAM));
}
jv jv_ref(const jv *v);
void jv_drop(struct jctx *c, jv *v);

jv jv_undef(void);
jv jv_undef_hint(const char *hint);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
static inline bool jv_is_undef(const jv *v)
{
    return v->kind == JV_UNDEF;
}

/* A new string of len bytes, uninitialized (s[len] is 0). */
struct jstr *jstr_new(struct jctx *c, size_t len);
jinja_status jv_str_make(struct jctx *c, const char *s, size_t len, jv *out);
static inline jv jv_str(struct jstr *s)
{
    jv v = {.kind = JV_STR};
    v.u.s = s;
    return v;
}
static inline bool jv_is_markup(const jv *v)
{
    return v->kind == JV_STR && v->aux == JV_MARKUP;
}
/* HTML-escape s (& < > " ') into a new Markup string. */
jinja_status jinja_escape(struct jctx *c, const struct jstr *s, jv *out);
uint32_t jinja_hash_bytes(const char *s, size_t len);

/* Lists and tuples of room for cap items, n = 0. */
struct jlist *jlist_new(struct jctx *c, size_t cap);
/* Append (taking over *v's reference, even on failure). */
jinja_status jlist_push(struct jctx *c, struct jlist *l, jv *v);
jv jv_list(struct jlist *l, bool tuple);

struct jdict *jdict_new(struct jctx *c, size_t cap);
/* Set k to v, taking over both references (also on failure); a key
 * already there keeps its place, as in Python. Keys must be hashable. */
jinja_status jdict_set(struct jctx *c, struct jdict *d, jv *k, jv *v);
/* *found: the value of k, borrowed, or NULL (an unhashable k is in no
 * dict). */
jinja_status jdict_lookup(struct jctx *c, const struct jdict *d, const jv *k,
                          const jv **found);
/* The value of a string key, borrowed, or NULL; the keys it looked at
 * are spent (jinja_spend()). */
const jv *jdict_get_name(struct jctx *c, const struct jdict *d,
                         const struct jstr *name);
jv jv_dict(struct jdict *d);
/* Whether v may be a key; if not, c->err says so. */
jinja_status jv_check_hashable(struct jctx *c, const jv *v);

/* The depth of nesting a new container holding v has, checked against
 * max_depth. */
jinja_status jinja_check_depth(struct jctx *c, const jv *v, uint32_t *depth);

/* Python's rules. */
bool jv_truthy(const jv *v);
const char *jv_type_name(const jv *v); /* "str", "int", "generator" */
/* An iterator: a generator or a reversed(). */
bool jv_is_iterator(const jv *v);
/* A list or tuple that is one in Python too (not a view or an
 * iterator; a range is one for reading). */
bool jv_is_sequence(const jv *v);
const char *jv_kind_name(unsigned kind);
/* ==, with bytes of work counted. */
jinja_status jv_equal(struct jctx *c, const jv *a, const jv *b, bool *eq);
/* <0, 0, >0 for <, ==, >: numbers, strings, lists and tuples of them;
 * other pairs are an error naming op. lower: compare strings as if
 * lowercased (the sort filters' default). */
jinja_status jv_order(struct jctx *c, const struct jnode *at, const jv *a,
                      const jv *b, const char *op, bool lower, int *cmp);
/* Number of items (str: code points); -1 when v has no length (a
 * generator has none). */
int64_t jv_length(const jv *v);
/* The items for v in a for: list, tuple; str: its characters; dict:
 * its keys; undefined: none; a generator: what is left of it, which is
 * then consumed. On success *out is a list (maybe v itself). */
jinja_status jv_iterate(struct jctx *c, const struct jnode *at, const jv *v,
                        jv *out);

/* ------------------------------------------------------- jinja_text.c */

/* str(v) and repr(v) appended to b. */
jinja_status jv_write_str(struct jctx *c, struct jbuf *b, const jv *v);
jinja_status jv_write_repr(struct jctx *c, struct jbuf *b, const jv *v);
/* str(v) as a string value (v itself when it is one). */
jinja_status jv_to_str(struct jctx *c, const jv *v, jv *out);
/* Python's repr() of a float: the shortest text that reads back. */
size_t jinja_format_float(double f, char out[32]);

jinja_status jbuf_put(struct jctx *c, struct jbuf *b, const char *s, size_t n);
jinja_status jbuf_puts(struct jctx *c, struct jbuf *b, const char *s);
void jbuf_free(struct jctx *c, struct jbuf *b);
/* The buffer's bytes as a string value; the buffer is emptied. */
jinja_status jbuf_to_str(struct jctx *c, struct jbuf *b, jv *out);

/* ------------------------------------------------------- jinja_utf8.c */

/* The code point at s[i] and its length in bytes (a byte that starts no
 * well-formed sequence is one code point, its own value). */
uint32_t jinja_utf8_next(const char *s, size_t len, size_t i, size_t *n);
size_t jinja_utf8_put(uint32_t cp, char out[4]);
/* The start of the code point that ends at s[end] (end > 0). */
size_t jinja_utf8_prev(const char *s, size_t end);
size_t jinja_utf8_count(const char *s, size_t len);
/* Byte offset of code point k (k <= count). */
size_t jinja_utf8_offset(const char *s, size_t len, size_t k);
/* Python's str.isspace() for one code point. */
bool jinja_is_space(uint32_t cp);
/* Bytes of whitespace ending at s[len] / starting at s[0]. */
size_t jinja_space_before(const char *s, size_t len);
size_t jinja_space_after(const char *s, size_t len);
/* Case mapping (ASCII, Latin-1, Greek and Cyrillic). */
uint32_t jinja_upper(uint32_t cp);
uint32_t jinja_lower(uint32_t cp);
bool jinja_is_cased_upper(uint32_t cp);
bool jinja_is_cased_lower(uint32_t cp);
/* Python's str.isprintable() for one code point. */
bool jinja_is_printable(uint32_t cp);

/* ------------------------------------------------------- jinja_json.c */

/* A context's JSON as values. */
jinja_status jinja_from_json(struct jctx *c, const cJSON *j, jv *out);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) appended
 * to b; indent NULL: none. */
struct jinja_dumps {
    bool ensure_ascii, sort_keys;
    const char *indent; /* NULL: no newlines */
    size_t indent_len;
    const char *item_sep, *key_sep;
    size_t item_sep_len, key_sep_len;
};
jinja_status jinja_dumps(struct jctx *c, struct jbuf *b, const jv *v,
                         const struct jinja_dumps *o);

/* -------------------------------------------------------- jinja_lex.c */

enum jtok_kind {
    JT_EOF,
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP /* punctuation: text says which */
};

struct jtok {
    uint8_t kind;
    unsigned line, col;
    size_t off, len; /* in the normalized source */
};

struct jtokens {
    struct jtok *v;
    size_t n, cap;
};

/* Split the (normalized) source into tokens, with jinja2's whitespace
 * control, trim_blocks and lstrip_blocks applied to the texts, comments
 * dropped and raw blocks made text. On failure err says where. */
jinja_status jinja_lex(const char *src, size_t len, struct jtokens *out,
                       struct jinja_error *err);
/* The source with \r\n and \r as \n and one trailing newline dropped,
 * as jinja2 reads it; the caller owns the result (free()). */
char *jinja_normalize(const char *src, size_t len, size_t *out_len);

/* ------------------------------------------------------ jinja_parse.c */

void *jinja_arena_alloc(struct jchunk **arena, size_t n);
void jinja_arena_free(struct jchunk *arena);
/* An immortal string in the arena. */
struct jstr *jinja_arena_str(struct jchunk **arena, const char *s, size_t len);

/* The statements of tokens as a tree in t->arena (t->src holds what the
 * tokens point into). */
jinja_status jinja_parse(struct jinja_template *t, const struct jtokens *tk,
                         struct jinja_error *err);

/* ------------------------------------------------------- jinja_eval.c */

jinja_status jinja_eval(struct jctx *c, const struct jnode *n, jv *out);
/* Look a variable up through the scopes, then the globals; undefined
 * when none has it. */
jinja_status jinja_lookup(struct jctx *c, const struct jnode *at,
                          const struct jstr *name, jv *out);
/* v.name as jinja2's sandbox gives it: a method, a key, or undefined. */
jinja_status jinja_getattr(struct jctx *c, const struct jnode *at, const jv *v,
                           const struct jstr *name, jv *out);
jinja_status jinja_getitem(struct jctx *c, const struct jnode *at, const jv *v,
                           const jv *key, jv *out);
/* The error an undefined value raises when used. */
jinja_status jinja_undef_error(struct jctx *c, const struct jnode *at,
                               const jv *u);

/* Evaluated arguments of a call, a filter or a test. */
#define JARGS_INLINE 6
struct jargs {
    size_t n; /* positional, then keyword */
    size_t npos;
    size_t cap; /* of v and kw when not the inline arrays */
    jv *v;
    const struct jstr **kw; /* kw[i] for i >= npos */
    jv inline_v[JARGS_INLINE];
    const struct jstr *inline_kw[JARGS_INLINE];
};
jinja_status jargs_eval(struct jctx *c, const struct jnode *first, size_t count,
                        struct jargs *a);
void jargs_free(struct jctx *c, struct jargs *a);
/* Bind a's positional arguments after the first skip, then its keywords,
 * to names[0..nnames); slots[i] borrows the value or is NULL. Extra or
 * unknown arguments are an error naming what. */
jinja_status jargs_bind(struct jctx *c, const struct jnode *at,
                        const char *what, const struct jargs *a, size_t skip,
                        const char *const *names, size_t nnames,
                        const jv **slots);

/* Call a value (a macro, a method, a function) with arguments. */
jinja_status jinja_call_value(struct jctx *c, const struct jnode *at,
                              const jv *callee, struct jargs *a, jv *out);

/* ------------------------------------------------------- jinja_exec.c */

jinja_status jinja_exec(struct jctx *c, const struct jnode *body);
/* A new innermost scope whose parent is parent; pop frees it (or keeps
 * it, when a macro closed over it) and makes restore innermost. */
jinja_status jinja_scope_push(struct jctx *c, struct jscope *parent);
void jinja_scope_pop(struct jctx *c, struct jscope *restore);

jinja_status jinja_scope_set(struct jctx *c, struct jscope *s,
                             const struct jstr *name, jv *v);
/* Render body into a new string (a macro's, a block set's). */
jinja_status jinja_capture(struct jctx *c, const struct jnode *body, jv *out);
/* Call a macro or a caller() with evaluated arguments; caller (NULL:
 * none) is what caller() is in its body. */
jinja_status jinja_call_macro(struct jctx *c, const struct jnode *at,
                              const struct jmacro *m, struct jargs *a,
                              const jv *caller, jv *out);

/* -------------------------------------------------------- jinja_sort.c */

/* order[0..n): the positions of keys in sorted order (Python's sorted(),
 * stable; lower: strings compared lowercased). */
jinja_status jinja_sort(struct jctx *c, const struct jnode *at, const jv *keys,
                        size_t n, bool lower, bool reverse, size_t *order);

/* ---------------------------------------------------- jinja_filters.c */

typedef jinja_status (*jinja_filter_fn)(struct jctx *c, const struct jnode *at,
                                        int id, const jv *v, struct jargs *a,
                                        size_t skip, jv *out);
typedef jinja_status (*jinja_test_fn)(struct jctx *c, const struct jnode *at,
                                      const jv *v, struct jargs *a, size_t skip,
                                      bool *out);
/* Index by name, or -1. */
int jinja_filter_find(const char *name, size_t len);
int jinja_test_find(const char *name, size_t len);
/* Whether filter id takes a filter's (map) or a test's (select) name as
 * its first argument. */
bool jinja_filter_names_filter(int id);
bool jinja_filter_names_test(int id);
jinja_status jinja_filter_apply(struct jctx *c, const struct jnode *at, int id,
                                const jv *v, struct jargs *a, size_t skip,
                                jv *out);
jinja_status jinja_test_apply(struct jctx *c, const struct jnode *at, int id,
                              const jv *v, struct jargs *a, size_t skip,
                              bool *out);

/* ---------------------------------------------------- jinja_methods.c */

enum jinja_method_id {
    JM_NONE = 0,
    JM_UNSUPPORTED, /* a method of Python's outside the subset */
    JM_UNSAFE,      /* a method that would change its value */
    /* str */
    JM_STARTSWITH,
    JM_ENDSWITH,
    JM_SPLIT,
    JM_RSPLIT,
    JM_SPLITLINES,
    JM_STRIP,
    JM_LSTRIP,
    JM_RSTRIP,
    JM_UPPER,
    JM_LOWER,
    JM_REPLACE,
    JM_TITLE,
    JM_CAPITALIZE,
    JM_FIND,
    JM_RFIND,
    JM_COUNT,
    JM_JOIN,
    JM_REMOVEPREFIX,
    JM_REMOVESUFFIX,
    JM_ISDIGIT,
    JM_ISALPHA,
    JM_ISALNUM,
    JM_ISSPACE,
    JM_ISUPPER,
    JM_ISLOWER,
    /* list, tuple */
    JM_LIST_COUNT,
    JM_LIST_INDEX,
    /* dict */
    JM_ITEMS,
    JM_KEYS,
    JM_VALUES,
    JM_GET,
    /* loop */
    JM_CYCLE
};
/* The method v.name: JM_NONE when Python has none of that name. */
int jinja_method_find(const jv *v, const char *name, size_t len);
jinja_status jinja_method_call(struct jctx *c, const struct jnode *at,
                               const jv *self, int id, const struct jstr *name,
                               struct jargs *a, jv *out);

/* ----------------------------------------------------- jinja_globals.c */

enum jinja_func_id {
    JF_RANGE = 1,
    JF_NAMESPACE,
    JF_DICT,
    JF_RAISE,
    JF_STRFTIME
};
int jinja_global_find(const char *name, size_t len);
jinja_status jinja_global_call(struct jctx *c, const struct jnode *at, int id,
                               struct jargs *a, jv *out);
const char *jinja_global_name(int id);

/* -------------------------------------------------------- jinja_str.c */

/* Substring search: the offset of needle in hay at or after from, or -1.
 * The bytes scanned count as work. */
jinja_status jinja_find(struct jctx *c, const char *hay, size_t n,
                        const char *needle, size_t m, size_t from, int64_t *at);
/* Python's str.strip family: which: 1 left, 2 right, 3 both; chars NULL
 * for whitespace. */
jinja_status jinja_strip(struct jctx *c, const struct jstr *s,
                         const struct jstr *chars, int which, jv *out);
/* Python's str.split(sep, maxsplit) (sep NULL: on whitespace runs),
 * from the right when right. */
jinja_status jinja_split(struct jctx *c, const struct jnode *at,
                         const struct jstr *s, const struct jstr *sep,
                         int64_t maxsplit, bool right, jv *out);
/* Python's str.splitlines(keepends). */
jinja_status jinja_splitlines(struct jctx *c, const struct jstr *s,
                              bool keepends, jv *out);
jinja_status jinja_replace(struct jctx *c, const struct jstr *s,
                           const struct jstr *old, const struct jstr *new_,
                           int64_t count, jv *out);
/* Case: 0 lower, 1 upper, 2 str.title(), 3 capitalize, 4 the title
 * filter's words. */
jinja_status jinja_recase(struct jctx *c, const struct jstr *s, int how,
                          jv *out);
/* s[start:stop:step] of a list, tuple or string (Python's slices). */
jinja_status jinja_slice(struct jctx *c, const struct jnode *at, const jv *v,
                         const jv *start, const jv *stop, const jv *step,
                         jv *out);
/* Python's int(s, base) and float(s), for the int and float filters;
 * false when s does not parse. */
bool jinja_parse_int(const char *s, size_t len, int base, int64_t *out,
                     bool *overflow);
bool jinja_parse_float(const char *s, size_t len, double *out);

/* --------------------------------------------------------- jinja_ops.c */

jinja_status jinja_binary(struct jctx *c, const struct jnode *at, int op,
                          const jv *a, const jv *b, jv *out);
jinja_status jinja_compare(struct jctx *c, const struct jnode *at, int op,
                           const jv *a, const jv *b, bool *out);
jinja_status jinja_contains(struct jctx *c, const struct jnode *at,
                            const jv *item, const jv *seq, bool *out);
jinja_status jinja_negate(struct jctx *c, const struct jnode *at, const jv *a,
                          bool minus, jv *out);

#endif
