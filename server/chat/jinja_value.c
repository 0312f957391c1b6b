/*
 * jinja_value.c - the values of a render: allocation charged to
 * max_bytes, reference counts, strings, lists, insertion-ordered dicts,
 * and Python's truthiness, equality, ordering, length and iteration.
 */
#include "jinja_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- allocation */

void *jinja_alloc(struct jctx *c, size_t n)
{
    if (n > c->max_bytes - c->bytes) {
        jinja_fail(c, NULL, JINJA_E_LIMIT,
                   "values past max_bytes (%zu bytes held at once)",
                   c->max_bytes);
        return NULL;
    }
    if (jinja_step_bytes(c, n) != JINJA_OK)
        return NULL;
    void *p = malloc(n ? n : 1);
    if (!p) {
        jinja_fail(c, NULL, JINJA_E_NOMEM, "out of memory (%zu bytes)", n);
        return NULL;
    }
    c->bytes += n;
    return p;
}

void *jinja_realloc(struct jctx *c, void *p, size_t old_n, size_t new_n)
{
    if (new_n > old_n) {
        const size_t more = new_n - old_n;
        if (more > c->max_bytes - c->bytes) {
            jinja_fail(c, NULL, JINJA_E_LIMIT,
                       "values past max_bytes (%zu bytes held at once)",
                       c->max_bytes);
            return NULL;
        }
        if (jinja_step_bytes(c, more) != JINJA_OK)
            return NULL;
    }
    void *q = realloc(p, new_n ? new_n : 1);
    if (!q) {
        jinja_fail(c, NULL, JINJA_E_NOMEM, "out of memory (%zu bytes)", new_n);
        return NULL;
    }
    c->bytes = c->bytes - old_n + new_n;
    return q;
}

void jinja_release(struct jctx *c, void *p, size_t n)
{
    if (!p)
        return;
    free(p);
    c->bytes -= n;
}

/* ------------------------------------------------------------ counts */

jv jv_ref(const jv *v)
{
    if (jv_is_heap(v) && !v->u.o->immortal)
        v->u.o->refs++;
    return *v;
}

static void obj_free(struct jctx *c, jv *v);

void jv_drop(struct jctx *c, jv *v)
{
    if (jv_is_heap(v) && !v->u.o->immortal && --v->u.o->refs == 0)
        obj_free(c, v);
    *v = jv_undef();
}

static void obj_free(struct jctx *c, jv *v)
{
    switch (v->kind) {
    case JV_UNDEF:
    case JV_STR: {
        struct jstr *s = v->u.s;
        jinja_release(c, s, s->h.bytes);
        break;
    }
    case JV_LIST:
    case JV_TUPLE: {
        struct jlist *l = v->u.l;
        for (size_t i = 0; i < l->n; i++)
            jv_drop(c, &l->items[i]);
        jinja_release(c, l->items, l->cap * sizeof(jv));
        jinja_release(c, l, sizeof *l);
        break;
    }
    case JV_DICT:
    case JV_NS: {
        struct jdict *d = v->u.d;
        for (size_t i = 0; i < d->n; i++) {
            jv_drop(c, &d->keys[i]);
            jv_drop(c, &d->vals[i]);
        }
        jinja_release(c, d->keys, d->cap * sizeof(jv));
        jinja_release(c, d->vals, d->cap * sizeof(jv));
        jinja_release(c, d->index, d->index_cap * sizeof(uint32_t));
        jinja_release(c, d, sizeof *d);
        break;
    }
    case JV_LOOP: {
        struct jloop *l = v->u.loop;
        jv_drop(c, &l->items);
        jinja_release(c, l, sizeof *l);
        break;
    }
    case JV_MACRO: {
        struct jmacro *m = v->u.m;
        jinja_release(c, m, sizeof *m);
        break;
    }
    case JV_METHOD: {
        struct jmethod *m = v->u.meth;
        jv name = jv_str((struct jstr *)m->name);
        jv_drop(c, &m->self);
        jv_drop(c, &name);
        jinja_release(c, m, sizeof *m);
        break;
    }
    default: break;
    }
}

jv jv_undef(void)
{
    jv v = {.kind = JV_UNDEF, .why = JU_PLAIN};
    v.u.o = NULL;
    return v;
}

jv jv_undef_hint(const char *hint)
{
    jv v = {.kind = JV_UNDEF, .why = JU_HINT};
    v.u.hint = hint;
    return v;
}

jv jv_none(void)
{
    return (jv){.kind = JV_NONE};
}

jv jv_bool(bool b)
{
    jv v = {.kind = JV_BOOL};
    v.u.b = b;
    return v;
}

jv jv_int(int64_t i)
{
    jv v = {.kind = JV_INT};
    v.u.i = i;
    return v;
}

jv jv_float(double f)
{
    jv v = {.kind = JV_FLOAT};
    v.u.f = f;
    return v;
}

/* ----------------------------------------------------------- strings */

struct jstr *jstr_new(struct jctx *c, size_t len)
{
    if (len > c->max_bytes) {
        jinja_fail(c, NULL, JINJA_E_LIMIT,
                   "values past max_bytes (%zu bytes held at once)",
                   c->max_bytes);
        return NULL;
    }
    const size_t bytes = sizeof(struct jstr) + len + 1;
    struct jstr *s = jinja_alloc(c, bytes);
    if (!s)
        return NULL;
    s->h = (struct jobj){.refs = 1, .depth = 1, .bytes = bytes};
    s->len = len;
    s->hashed = false;
    s->hash = 0;
    s->s[len] = '\0';
    return s;
}

jinja_status jv_str_make(struct jctx *c, const char *s, size_t len, jv *out)
{
    *out = jv_undef();
    struct jstr *r = jstr_new(c, len);
    if (!r)
        return c->status;
    if (len)
        memcpy(r->s, s, len);
    *out = jv_str(r);
    return JINJA_OK;
}

uint32_t jinja_hash_bytes(const char *s, size_t len)
{
    /* FNV-1a */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* ------------------------------------------------------ lists, tuples */

struct jlist *jlist_new(struct jctx *c, size_t cap)
{
    if (cap > (c->max_bytes - c->bytes) / sizeof(jv)) {
        jinja_fail(c, NULL, JINJA_E_LIMIT,
                   "values past max_bytes (%zu bytes held at once)",
                   c->max_bytes);
        return NULL;
    }
    struct jlist *l = jinja_alloc(c, sizeof *l);
    if (!l)
        return NULL;
    *l = (struct jlist){.h = {.refs = 1, .depth = 1, .bytes = sizeof *l}};
    if (cap) {
        l->items = jinja_alloc(c, cap * sizeof(jv));
        if (!l->items) {
            jinja_release(c, l, sizeof *l);
            return NULL;
        }
        l->cap = cap;
    }
    return l;
}

jinja_status jinja_check_depth(struct jctx *c, const jv *v, uint32_t *depth)
{
    uint32_t d = 1;
    if (v->kind >= JV_LIST && v->kind <= JV_NS)
        d = v->u.o->depth + 1;
    if (d > c->max_depth)
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "values nested deeper than max_depth (%zu)",
                          c->max_depth);
    if (d > *depth)
        *depth = d;
    return JINJA_OK;
}

jinja_status jlist_push(struct jctx *c, struct jlist *l, jv *v)
{
    jinja_status st = jinja_check_depth(c, v, &l->h.depth);
    if (st != JINJA_OK) {
        jv_drop(c, v);
        return st;
    }
    if (l->n == l->cap) {
        const size_t cap = l->cap ? l->cap * 2 : 4;
        if (cap > (c->max_bytes - c->bytes) / sizeof(jv) + l->cap) {
            jv_drop(c, v);
            return jinja_fail(c, NULL, JINJA_E_LIMIT,
                              "values past max_bytes (%zu bytes held at "
                              "once)",
                              c->max_bytes);
        }
        jv *items =
            jinja_realloc(c, l->items, l->cap * sizeof(jv), cap * sizeof(jv));
        if (!items) {
            jv_drop(c, v);
            return c->status;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = *v;
    *v = jv_undef();
    return JINJA_OK;
}

jv jv_list(struct jlist *l, bool tuple)
{
    jv v = {.kind = tuple ? JV_TUPLE : JV_LIST};
    v.u.l = l;
    return v;
}

/* -------------------------------------------------------------- dicts */

struct jdict *jdict_new(struct jctx *c, size_t cap)
{
    struct jdict *d = jinja_alloc(c, sizeof *d);
    if (!d)
        return NULL;
    *d = (struct jdict){.h = {.refs = 1, .depth = 1, .bytes = sizeof *d}};
    if (cap) {
        if (cap > (c->max_bytes - c->bytes) / (2 * sizeof(jv))) {
            jinja_release(c, d, sizeof *d);
            jinja_fail(c, NULL, JINJA_E_LIMIT,
                       "values past max_bytes (%zu bytes held at once)",
                       c->max_bytes);
            return NULL;
        }
        d->keys = jinja_alloc(c, cap * sizeof(jv));
        d->vals = d->keys ? jinja_alloc(c, cap * sizeof(jv)) : NULL;
        if (!d->vals) {
            jinja_release(c, d->keys, cap * sizeof(jv));
            jinja_release(c, d, sizeof *d);
            return NULL;
        }
        d->cap = cap;
    }
    return d;
}

jv jv_dict(struct jdict *d)
{
    jv v = {.kind = JV_DICT};
    v.u.d = d;
    return v;
}

static uint32_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Equal keys hash alike: True, 1 and 1.0 are one key, as in Python. */
static uint32_t key_hash(const jv *k)
{
    switch (k->kind) {
    case JV_STR: {
        struct jstr *s = k->u.s;
        if (s->hashed)
            return s->hash;
        const uint32_t h = jinja_hash_bytes(s->s, s->len);
        if (!s->h.immortal) {
            s->hash = h;
            s->hashed = true;
        }
        return h;
    }
    case JV_BOOL: return mix64((uint64_t)k->u.b);
    case JV_INT: return mix64((uint64_t)k->u.i);
    case JV_FLOAT: {
        const double f = k->u.f;
        if (f == trunc(f) && fabs(f) < 9.2e18)
            return mix64((uint64_t)(int64_t)f);
        uint64_t bits;
        memcpy(&bits, &f, sizeof bits);
        return mix64(bits);
    }
    case JV_NONE: return 0x9e3779b9u;
    case JV_TUPLE: {
        uint32_t h = 0x345678u;
        for (size_t i = 0; i < k->u.l->n; i++)
            h = (h ^ key_hash(&k->u.l->items[i])) * 1000003u;
        return h;
    }
    default: return 0;
    }
}

jinja_status jv_check_hashable(struct jctx *c, const jv *v)
{
    switch (v->kind) {
    case JV_STR:
    case JV_BOOL:
    case JV_INT:
    case JV_FLOAT:
    case JV_NONE: return JINJA_OK;
    case JV_TUPLE:
        for (size_t i = 0; i < v->u.l->n; i++) {
            const jinja_status st = jv_check_hashable(c, &v->u.l->items[i]);
            if (st != JINJA_OK)
                return st;
        }
        return JINJA_OK;
    case JV_UNDEF: return jinja_undef_error(c, NULL, v);
    default:
        return jinja_fail(c, NULL, JINJA_E_RUNTIME, "unhashable type: '%s'",
                          jv_type_name(v));
    }
}

static void index_insert(struct jdict *d, uint32_t h, size_t pos)
{
    size_t mask = d->index_cap - 1, i = h & mask;
    while (d->index[i])
        i = (i + 1) & mask;
    d->index[i] = (uint32_t)(pos + 1);
}

static jinja_status index_build(struct jctx *c, struct jdict *d, size_t cap)
{
    uint32_t *index = jinja_alloc(c, cap * sizeof(uint32_t));
    if (!index)
        return c->status;
    memset(index, 0, cap * sizeof(uint32_t));
    jinja_release(c, d->index, d->index_cap * sizeof(uint32_t));
    d->index = index;
    d->index_cap = cap;
    for (size_t i = 0; i < d->n; i++)
        index_insert(d, key_hash(&d->keys[i]), i);
    return JINJA_OK;
}

/* Keys compared without counting work: both are hashable values whose
 * hashes matched. */
static bool key_equal(const jv *a, const jv *b)
{
    if (a->kind == JV_STR && b->kind == JV_STR)
        return a->u.s->len == b->u.s->len &&
               memcmp(a->u.s->s, b->u.s->s, a->u.s->len) == 0;
    if (a->kind == JV_STR || b->kind == JV_STR)
        return false;
    if (a->kind == JV_TUPLE || b->kind == JV_TUPLE) {
        if (a->kind != b->kind || a->u.l->n != b->u.l->n)
            return false;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!key_equal(&a->u.l->items[i], &b->u.l->items[i]))
                return false;
        return true;
    }
    if (a->kind == JV_NONE || b->kind == JV_NONE)
        return a->kind == b->kind;
    const bool af = a->kind == JV_FLOAT, bf = b->kind == JV_FLOAT;
    const int64_t ai = a->kind == JV_BOOL ? a->u.b : a->u.i;
    const int64_t bi = b->kind == JV_BOOL ? b->u.b : b->u.i;
    if (af && bf)
        return a->u.f == b->u.f;
    if (af)
        return a->u.f == trunc(a->u.f) && fabs(a->u.f) < 9.2e18 &&
               (int64_t)a->u.f == bi;
    if (bf)
        return b->u.f == trunc(b->u.f) && fabs(b->u.f) < 9.2e18 &&
               (int64_t)b->u.f == ai;
    return ai == bi;
}

/* The position of k in d, or -1; *probes counts the keys looked at, so
 * that keys made to collide cost their callers steps. */
static long dict_find(const struct jdict *d, const jv *k, uint32_t h,
                      size_t *probes)
{
    if (!d->index) {
        for (size_t i = 0; i < d->n; i++)
            if (key_equal(&d->keys[i], k))
                return (long)i;
        return -1;
    }
    size_t mask = d->index_cap - 1, i = h & mask;
    while (d->index[i]) {
        const size_t pos = d->index[i] - 1;
        ++*probes;
        if (key_hash(&d->keys[pos]) == h && key_equal(&d->keys[pos], k))
            return (long)pos;
        i = (i + 1) & mask;
    }
    return -1;
}

jinja_status jdict_lookup(struct jctx *c, const struct jdict *d, const jv *k,
                          const jv **found)
{
    *found = NULL;
    if (k->kind == JV_STR) {
        const jinja_status st = jinja_step_bytes(c, k->u.s->len);
        if (st != JINJA_OK)
            return st;
    }
    switch (k->kind) {
    case JV_STR:
    case JV_BOOL:
    case JV_INT:
    case JV_FLOAT:
    case JV_NONE:
    case JV_TUPLE: break;
    default: return JINJA_OK; /* unhashable: in no dict */
    }
    size_t probes = 0;
    const long i = dict_find(d, k, key_hash(k), &probes);
    if (i >= 0)
        *found = &d->vals[i];
    return jinja_step(c, probes);
}

const jv *jdict_get_name(struct jctx *c, const struct jdict *d,
                         const struct jstr *name)
{
    const jv k = jv_str((struct jstr *)name);
    size_t probes = 0;
    const long i = dict_find(d, &k, key_hash(&k), &probes);
    jinja_spend(c, probes);
    return i < 0 ? NULL : &d->vals[i];
}

jinja_status jdict_set(struct jctx *c, struct jdict *d, jv *k, jv *v)
{
    jinja_status st = jv_check_hashable(c, k);
    if (st == JINJA_OK)
        st = jinja_check_depth(c, v, &d->h.depth);
    if (st == JINJA_OK)
        st = jinja_check_depth(c, k, &d->h.depth);
    if (st != JINJA_OK)
        goto fail;
    const uint32_t h = key_hash(k);
    size_t probes = 0;
    const long at = dict_find(d, k, h, &probes);
    jinja_spend(c, probes);
    if (at >= 0) {
        jv_drop(c, k);
        jv_drop(c, &d->vals[at]);
        d->vals[at] = *v;
        *v = jv_undef();
        return JINJA_OK;
    }
    if (d->n == d->cap) {
        const size_t cap = d->cap ? d->cap * 2 : 4;
        if (cap > (c->max_bytes - c->bytes) / (2 * sizeof(jv)) + d->cap) {
            st = jinja_fail(c, NULL, JINJA_E_LIMIT,
                            "values past max_bytes (%zu bytes held at once)",
                            c->max_bytes);
            goto fail;
        }
        jv *keys =
            jinja_realloc(c, d->keys, d->cap * sizeof(jv), cap * sizeof(jv));
        if (!keys)
            goto fail_alloc;
        d->keys = keys;
        jv *vals =
            jinja_realloc(c, d->vals, d->cap * sizeof(jv), cap * sizeof(jv));
        if (!vals) {
            /* keys grew alone: keep the books straight */
            d->keys = jinja_realloc(c, d->keys, cap * sizeof(jv),
                                    d->cap * sizeof(jv));
            goto fail_alloc;
        }
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = *k;
    d->vals[d->n] = *v;
    *k = jv_undef();
    *v = jv_undef();
    d->n++;
    if (d->index && d->n * 2 <= d->index_cap) {
        index_insert(d, h, d->n - 1);
    } else if (d->n > 8) {
        size_t cap = 16;
        while (cap < d->n * 4)
            cap *= 2;
        st = index_build(c, d, cap);
        if (st != JINJA_OK)
            return st;
    }
    return JINJA_OK;
fail_alloc:
    st = c->status;
fail:
    jv_drop(c, k);
    jv_drop(c, v);
    return st;
}

/* ---------------------------------------------------- Python's rules */

bool jv_truthy(const jv *v)
{
    switch (v->kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.s->len > 0;
    case JV_LIST:
    case JV_TUPLE: return jv_is_iterator(v) || v->u.l->n > 0;
    case JV_DICT: return v->u.d->n > 0;
    default: return true;
    }
}

bool jv_is_iterator(const jv *v)
{
    return (v->kind == JV_LIST || v->kind == JV_TUPLE) &&
           (v->u.l->flavor == JL_GENERATOR || v->u.l->flavor == JL_REVERSED);
}

bool jv_is_sequence(const jv *v)
{
    return (v->kind == JV_LIST || v->kind == JV_TUPLE) &&
           (v->u.l->flavor == JL_PLAIN || v->u.l->flavor == JL_RANGE);
}

const char *jv_kind_name(unsigned kind)
{
    static const char *const names[] = {[JV_UNDEF] = "Undefined",
                                        [JV_NONE] = "NoneType",
                                        [JV_BOOL] = "bool",
                                        [JV_INT] = "int",
                                        [JV_FLOAT] = "float",
                                        [JV_STR] = "str",
                                        [JV_LIST] = "list",
                                        [JV_TUPLE] = "tuple",
                                        [JV_DICT] = "dict",
                                        [JV_NS] = "Namespace",
                                        [JV_LOOP] = "LoopContext",
                                        [JV_MACRO] = "Macro",
                                        [JV_METHOD] =
                                            "builtin_function_or_method",
                                        [JV_FUNC] = "function"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "object";
}

const char *jv_type_name(const jv *v)
{
    if (v->kind == JV_LIST) {
        static const char *const flavors[] = {[JL_PLAIN] = "list",
                                              [JL_GENERATOR] = "generator",
                                              [JL_REVERSED] =
                                                  "list_reverseiterator",
                                              [JL_ITEMS] = "dict_items",
                                              [JL_KEYS] = "dict_keys",
                                              [JL_VALUES] = "dict_values",
                                              [JL_RANGE] = "range"};
        return flavors[v->u.l->flavor];
    }
    return jv_kind_name(v->kind);
}

static bool is_number(const jv *v)
{
    return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT;
}

static int64_t as_int(const jv *v)
{
    return v->kind == JV_BOOL ? (int64_t)v->u.b : v->u.i;
}

/* Python compares an int and a float exactly, not through a double. */
static int cmp_int_float(int64_t i, double f)
{
    if (isnan(f))
        return 2; /* unordered */
    if (f >= 9223372036854775808.0)
        return -1;
    if (f < -9223372036854775808.0)
        return 1;
    const double t = trunc(f);
    const int64_t ti = (int64_t)t;
    if (i != ti)
        return i < ti ? -1 : 1;
    return f > t ? -1 : f < t ? 1 : 0;
}

/* <0 = >0 for two numbers; 2 when either is NaN. */
static int cmp_numbers(const jv *a, const jv *b)
{
    if (a->kind == JV_FLOAT && b->kind == JV_FLOAT) {
        if (isnan(a->u.f) || isnan(b->u.f))
            return 2;
        return a->u.f < b->u.f ? -1 : a->u.f > b->u.f;
    }
    if (a->kind == JV_FLOAT) {
        const int r = cmp_int_float(as_int(b), a->u.f);
        return r == 2 ? 2 : -r;
    }
    if (b->kind == JV_FLOAT)
        return cmp_int_float(as_int(a), b->u.f);
    const int64_t x = as_int(a), y = as_int(b);
    return x < y ? -1 : x > y;
}

jinja_status jv_equal(struct jctx *c, const jv *a, const jv *b, bool *eq)
{
    *eq = false;
    if (is_number(a) && is_number(b)) {
        *eq = cmp_numbers(a, b) == 0;
        return JINJA_OK;
    }
    if (a->kind != b->kind)
        return JINJA_OK;
    switch (a->kind) {
    case JV_UNDEF:
    case JV_NONE: *eq = true; return JINJA_OK;
    case JV_STR: {
        const struct jstr *x = a->u.s, *y = b->u.s;
        if (x->len != y->len)
            return JINJA_OK;
        const jinja_status st = jinja_step_bytes(c, x->len);
        if (st != JINJA_OK)
            return st;
        *eq = memcmp(x->s, y->s, x->len) == 0;
        return JINJA_OK;
    }
    case JV_LIST:
    case JV_TUPLE: {
        const struct jlist *x = a->u.l, *y = b->u.l;
        if (x->flavor != y->flavor)
            return JINJA_OK;
        if (x->flavor != JL_PLAIN && x->flavor != JL_RANGE) {
            /* iterators and views: the same object (near enough) */
            *eq = x == y;
            return JINJA_OK;
        }
        if (x->n != y->n)
            return JINJA_OK;
        for (size_t i = 0; i < x->n; i++) {
            jinja_status st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jv_equal(c, &x->items[i], &y->items[i], eq);
            if (st != JINJA_OK || !*eq)
                return st;
        }
        *eq = true;
        return JINJA_OK;
    }
    case JV_DICT: {
        const struct jdict *x = a->u.d, *y = b->u.d;
        if (x->n != y->n)
            return JINJA_OK;
        for (size_t i = 0; i < x->n; i++) {
            const jv *other;
            jinja_status st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jdict_lookup(c, y, &x->keys[i], &other);
            if (st != JINJA_OK)
                return st;
            if (!other) {
                *eq = false;
                return JINJA_OK;
            }
            st = jv_equal(c, &x->vals[i], other, eq);
            if (st != JINJA_OK || !*eq)
                return st;
        }
        *eq = true;
        return JINJA_OK;
    }
    case JV_FUNC: *eq = a->aux == b->aux; return JINJA_OK;
    default: *eq = a->u.o == b->u.o; return JINJA_OK;
    }
}

static int cmp_str(const struct jstr *x, const struct jstr *y, bool lower)
{
    if (!lower) {
        const size_t n = x->len < y->len ? x->len : y->len;
        const int r = memcmp(x->s, y->s, n);
        if (r)
            return r < 0 ? -1 : 1;
        return x->len < y->len ? -1 : x->len > y->len;
    }
    size_t i = 0, j = 0;
    while (i < x->len && j < y->len) {
        size_t n, m;
        const uint32_t p = jinja_lower(jinja_utf8_next(x->s, x->len, i, &n));
        const uint32_t q = jinja_lower(jinja_utf8_next(y->s, y->len, j, &m));
        if (p != q)
            return p < q ? -1 : 1;
        i += n;
        j += m;
    }
    return i < x->len ? 1 : j < y->len ? -1 : 0;
}

jinja_status jv_order(struct jctx *c, const struct jnode *at, const jv *a,
                      const jv *b, const char *op, bool lower, int *cmp)
{
    if (a->kind == JV_UNDEF)
        return jinja_undef_error(c, at, a);
    if (b->kind == JV_UNDEF)
        return jinja_undef_error(c, at, b);
    if (is_number(a) && is_number(b)) {
        const int r = cmp_numbers(a, b);
        /* NaN: every ordering is false; report "greater" for < and <=,
         * and the callers of sorts take it as they come */
        *cmp = r == 2 ? 2 : r;
        return JINJA_OK;
    }
    if (a->kind == JV_STR && b->kind == JV_STR) {
        const size_t n = a->u.s->len < b->u.s->len ? a->u.s->len : b->u.s->len;
        const jinja_status st = jinja_step_bytes(c, n);
        if (st != JINJA_OK)
            return st;
        *cmp = cmp_str(a->u.s, b->u.s, lower);
        return JINJA_OK;
    }
    if (a->kind == b->kind && jv_is_sequence(a) && jv_is_sequence(b) &&
        a->u.l->flavor == JL_PLAIN && b->u.l->flavor == JL_PLAIN) {
        const struct jlist *x = a->u.l, *y = b->u.l;
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            bool eq;
            jinja_status st = jinja_step(c, 1);
            if (st == JINJA_OK && lower) {
                /* items compared lowercased: equal ones go on */
                st =
                    jv_order(c, at, &x->items[i], &y->items[i], op, lower, cmp);
                if (st != JINJA_OK || *cmp != 0)
                    return st;
                continue;
            }
            if (st == JINJA_OK)
                st = jv_equal(c, &x->items[i], &y->items[i], &eq);
            if (st != JINJA_OK)
                return st;
            if (!eq)
                return jv_order(c, at, &x->items[i], &y->items[i], op, lower,
                                cmp);
        }
        *cmp = x->n < y->n ? -1 : x->n > y->n;
        return JINJA_OK;
    }
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "'%s' not supported between instances of '%s' and '%s'",
                      op, jv_type_name(a), jv_type_name(b));
}

int64_t jv_length(const jv *v)
{
    switch (v->kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)jinja_utf8_count(v->u.s->s, v->u.s->len);
    case JV_LIST:
    case JV_TUPLE: return jv_is_iterator(v) ? -1 : (int64_t)v->u.l->n;
    case JV_DICT: return (int64_t)v->u.d->n;
    default: return -1;
    }
}

jinja_status jv_iterate(struct jctx *c, const struct jnode *at, const jv *v,
                        jv *out)
{
    *out = jv_undef();
    switch (v->kind) {
    case JV_LIST:
    case JV_TUPLE: {
        struct jlist *g = v->u.l;
        if (g->flavor != JL_GENERATOR) {
            *out = jv_ref(v);
            return JINJA_OK;
        }
        /* what is left of a generator, which is then used up */
        struct jlist *l = jlist_new(c, g->n - g->consumed);
        if (!l)
            return c->status;
        for (size_t i = g->consumed; i < g->n; i++)
            l->items[l->n++] = jv_ref(&g->items[i]);
        g->consumed = g->n;
        *out = jv_list(l, false);
        return JINJA_OK;
    }
    case JV_UNDEF: {
        struct jlist *l = jlist_new(c, 0);
        if (!l)
            return c->status;
        *out = jv_list(l, false);
        return JINJA_OK;
    }
    case JV_DICT: {
        const struct jdict *d = v->u.d;
        struct jlist *l = jlist_new(c, d->n);
        if (!l)
            return c->status;
        for (size_t i = 0; i < d->n; i++)
            l->items[l->n++] = jv_ref(&d->keys[i]);
        *out = jv_list(l, false);
        return JINJA_OK;
    }
    case JV_STR: {
        const struct jstr *s = v->u.s;
        const size_t n = jinja_utf8_count(s->s, s->len);
        struct jlist *l = jlist_new(c, n);
        if (!l)
            return c->status;
        jv lv = jv_list(l, false);
        for (size_t i = 0; i < s->len;) {
            size_t k;
            jinja_utf8_next(s->s, s->len, i, &k);
            jinja_status st = jv_str_make(c, s->s + i, k, &l->items[l->n]);
            if (st != JINJA_OK) {
                jv_drop(c, &lv);
                return st;
            }
            l->n++;
            i += k;
        }
        *out = lv;
        return JINJA_OK;
    }
    default:
        return jinja_fail(c, at, JINJA_E_RUNTIME, "'%s' object is not iterable",
                          jv_type_name(v));
    }
}
