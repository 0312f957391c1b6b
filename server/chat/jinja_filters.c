/*
 * jinja_filters.c - the filters of the subset, by name, and those that
 * work on one value (text, numbers, tojson). Each takes its arguments
 * as jinja2's does (by position or keyword) and gives what jinja2's
 * gives, with transformers' tojson. Sequences are jinja_filters_seq.c's.
 */
#include "jinja_filters.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* str() of a value, as jinja2's soft_str (undefined: ""). */
static jinja_status soft_str(struct jctx *c, const jv *v, jv *out)
{
    return jv_to_str(c, v, out);
}

/* ---------------------------------------------------------- text ones */

static FILTER(f_string)
{
    const jinja_status st = NO_ARGS();
    return st == JINJA_OK ? soft_str(c, v, out) : st;
}

/* Markup stays Markup through the filters that work on its text. */
static jinja_status recase(struct jctx *c, const jv *v, int how, jv *out)
{
    jv s;
    jinja_status st = soft_str(c, v, &s);
    if (st != JINJA_OK)
        return st;
    st = jinja_recase(c, s.u.s, how, out);
    if (st == JINJA_OK)
        out->aux = s.aux;
    jv_drop(c, &s);
    return st;
}

static FILTER(f_lower)
{
    const jinja_status st = NO_ARGS();
    return st == JINJA_OK ? recase(c, v, 0, out) : st;
}

static FILTER(f_upper)
{
    const jinja_status st = NO_ARGS();
    return st == JINJA_OK ? recase(c, v, 1, out) : st;
}

static FILTER(f_capitalize)
{
    const jinja_status st = NO_ARGS();
    return st == JINJA_OK ? recase(c, v, 3, out) : st;
}

static FILTER(f_title)
{
    const jinja_status st = NO_ARGS();
    return st == JINJA_OK ? recase(c, v, 4, out) : st;
}

static FILTER(f_trim)
{
    static const char *const names[] = {"chars"};
    const jv *slots[1];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    const struct jstr *chars = NULL;
    if (slots[0] && slots[0]->kind != JV_NONE) {
        if (slots[0]->kind != JV_STR)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "strip arg must be None or str");
        chars = slots[0]->u.s;
    }
    jv s;
    st = soft_str(c, v, &s);
    if (st != JINJA_OK)
        return st;
    st = jinja_strip(c, s.u.s, chars, 3, out);
    if (st == JINJA_OK)
        out->aux = s.aux;
    jv_drop(c, &s);
    return st;
}

static FILTER(f_replace)
{
    static const char *const names[] = {"old", "new", "count"};
    const jv *slots[3];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    if (!slots[0] || !slots[1])
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "filter 'replace' takes the text to replace and "
                          "its replacement");
    int64_t count = -1;
    if (slots[2] && slots[2]->kind != JV_NONE) {
        if (slots[2]->kind != JV_INT && slots[2]->kind != JV_BOOL)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "'%s' object cannot be interpreted as an "
                              "integer",
                              jv_type_name(slots[2]));
        count = slots[2]->kind == JV_BOOL ? slots[2]->u.b : slots[2]->u.i;
    }
    jv s = jv_undef(), old = jv_undef(), new_ = jv_undef();
    st = soft_str(c, v, &s);
    if (st == JINJA_OK)
        st = soft_str(c, slots[0], &old);
    if (st == JINJA_OK)
        st = soft_str(c, slots[1], &new_);
    if (st == JINJA_OK)
        st = jinja_replace(c, s.u.s, old.u.s, new_.u.s, count, out);
    jv_drop(c, &s);
    jv_drop(c, &old);
    jv_drop(c, &new_);
    return st;
}

static FILTER(f_escape)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (jv_is_markup(v)) { /* escaped once only */
        *out = jv_ref(v);
        return JINJA_OK;
    }
    jv s;
    st = soft_str(c, v, &s);
    if (st == JINJA_OK)
        st = jinja_escape(c, s.u.s, out);
    jv_drop(c, &s);
    return st;
}

/* safe: Markup(value), str(value) that + will not escape. */
static FILTER(f_safe)
{
    jinja_status st = NO_ARGS();
    if (st == JINJA_OK)
        st = soft_str(c, v, out);
    if (st == JINJA_OK)
        out->aux = JV_MARKUP;
    return st;
}

static FILTER(f_indent)
{
    static const char *const names[] = {"width", "first", "blank"};
    const jv *slots[3];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    if (v->kind != JV_STR)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "unsupported operand type(s) for +=: '%s' and "
                          "'str'",
                          jv_type_name(v));
    /* the indentation: a string, or that many spaces */
    jv ind = jv_undef();
    if (slots[0] && slots[0]->kind == JV_STR) {
        ind = jv_ref(slots[0]);
    } else {
        int64_t w = 4;
        if (slots[0]) {
            if (slots[0]->kind != JV_INT && slots[0]->kind != JV_BOOL)
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  "can't multiply sequence by non-int of type "
                                  "'%s'",
                                  jv_type_name(slots[0]));
            w = slots[0]->kind == JV_BOOL ? slots[0]->u.b : slots[0]->u.i;
        }
        if (w < 0)
            w = 0;
        if ((uint64_t)w > c->max_bytes)
            return jinja_fail(c, at, JINJA_E_LIMIT,
                              "values past max_bytes (%zu bytes held at "
                              "once)",
                              c->max_bytes);
        struct jstr *sp = jstr_new(c, (size_t)w);
        if (!sp)
            return c->status;
        memset(sp->s, ' ', (size_t)w);
        ind = jv_str(sp);
    }
    const bool first = slots[1] && jv_truthy(slots[1]);
    const bool blank = slots[2] && jv_truthy(slots[2]);
    const struct jstr *pad = ind.u.s;
    /* s + "\n", split into lines (Python's line breaks) */
    jv lines = jv_undef();
    struct jbuf b = {0};
    st = jbuf_put(c, &b, v->u.s->s, v->u.s->len);
    if (st == JINJA_OK)
        st = jbuf_put(c, &b, "\n", 1);
    jv text = jv_undef();
    if (st == JINJA_OK)
        st = jbuf_to_str(c, &b, &text);
    else
        jbuf_free(c, &b);
    if (st == JINJA_OK)
        st = jinja_splitlines(c, text.u.s, false, &lines);
    jv_drop(c, &text);
    if (st == JINJA_OK && first)
        st = jbuf_put(c, &b, pad->s, pad->len);
    const struct jlist *l = st == JINJA_OK ? lines.u.l : NULL;
    for (size_t i = 0; l && i < l->n && st == JINJA_OK; i++) {
        const struct jstr *line = l->items[i].u.s;
        if (i) {
            st = jbuf_put(c, &b, "\n", 1);
            if (st == JINJA_OK && (blank || line->len))
                st = jbuf_put(c, &b, pad->s, pad->len);
        }
        if (st == JINJA_OK)
            st = jbuf_put(c, &b, line->s, line->len);
    }
    jv_drop(c, &lines);
    jv_drop(c, &ind);
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

/* -------------------------------------------------------- number ones */

static FILTER(f_abs)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    switch (v->kind) {
    case JV_BOOL: *out = jv_int(v->u.b); return JINJA_OK;
    case JV_INT:
        if (v->u.i == INT64_MIN)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "integer overflow (past 64 bits)");
        *out = jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
        return JINJA_OK;
    case JV_FLOAT: *out = jv_float(fabs(v->u.f)); return JINJA_OK;
    default:
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "bad operand type for abs(): '%s'", jv_type_name(v));
    }
}

static FILTER(f_float)
{
    static const char *const names[] = {"default"};
    const jv *slots[1];
    const jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    double f;
    if (v->kind == JV_STR && jinja_step_bytes(c, v->u.s->len) != JINJA_OK)
        return c->status;
    switch (v->kind) {
    case JV_UNDEF: return jinja_undef_error(c, at, v);
    case JV_BOOL: *out = jv_float(v->u.b); return JINJA_OK;
    case JV_INT: *out = jv_float((double)v->u.i); return JINJA_OK;
    case JV_FLOAT: *out = *v; return JINJA_OK;
    case JV_STR:
        if (jinja_parse_float(v->u.s->s, v->u.s->len, &f)) {
            *out = jv_float(f);
            return JINJA_OK;
        }
        break;
    default: break;
    }
    *out = slots[0] ? jv_ref(slots[0]) : jv_float(0.0);
    return JINJA_OK;
}

static jinja_status float_to_int(struct jctx *c, const struct jnode *at,
                                 double f, jv *out, bool *ok)
{
    *ok = !isnan(f);
    if (!*ok)
        return JINJA_OK;
    if (isinf(f))
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "cannot convert float infinity to integer");
    if (f >= 9223372036854775808.0 || f < -9223372036854775808.0)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "integer overflow (past 64 bits)");
    *out = jv_int((int64_t)f);
    return JINJA_OK;
}

static FILTER(f_int)
{
    static const char *const names[] = {"default", "base"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    bool ok = false;
    if (v->kind == JV_STR && jinja_step_bytes(c, v->u.s->len) != JINJA_OK)
        return c->status;
    switch (v->kind) {
    case JV_UNDEF: return jinja_undef_error(c, at, v);
    case JV_BOOL: *out = jv_int(v->u.b); return JINJA_OK;
    case JV_INT: *out = *v; return JINJA_OK;
    case JV_FLOAT: st = float_to_int(c, at, v->u.f, out, &ok); break;
    case JV_STR: {
        int64_t base = 10;
        if (slots[1]) {
            if (slots[1]->kind != JV_INT && slots[1]->kind != JV_BOOL)
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  "'%s' object cannot be interpreted as an "
                                  "integer",
                                  jv_type_name(slots[1]));
            base = slots[1]->kind == JV_BOOL ? slots[1]->u.b : slots[1]->u.i;
            if (base != 0 && (base < 2 || base > 36))
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  "int() base must be >= 2 and <= 36, or 0");
        }
        int64_t i;
        bool overflow;
        if (jinja_parse_int(v->u.s->s, v->u.s->len, (int)base, &i, &overflow)) {
            *out = jv_int(i);
            return JINJA_OK;
        }
        if (overflow)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "integer overflow (past 64 bits)");
        /* "42.23"|int is 42, as jinja2 reads it through float() */
        double f;
        if (jinja_parse_float(v->u.s->s, v->u.s->len, &f))
            st = float_to_int(c, at, f, out, &ok);
        break;
    }
    default: break;
    }
    if (st != JINJA_OK || ok)
        return st;
    *out = slots[0] ? jv_ref(slots[0]) : jv_int(0);
    return JINJA_OK;
}

/* Python's round(x, n) of a float: correctly rounded, ties to even, as
 * printf rounds the exact binary value. */
static double round_float(double x, int64_t n)
{
    if (!isfinite(x) || n > 330)
        return x;
    if (n >= 0) {
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)n, x);
        return strtod(buf, NULL);
    }
    if (n < -330)
        return copysign(0.0, x);
    const double p = pow(10.0, (double)-n);
    return nearbyint(x / p) * p;
}

static FILTER(f_round)
{
    static const char *const names[] = {"precision", "method"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    int method = 0; /* common, ceil, floor */
    if (slots[1]) {
        const char *m = slots[1]->kind == JV_STR ? slots[1]->u.s->s : "";
        method = strcmp(m, "common") == 0  ? 0
                 : strcmp(m, "ceil") == 0  ? 1
                 : strcmp(m, "floor") == 0 ? 2
                                           : -1;
        if (method < 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "method must be common, ceil or floor");
    }
    int64_t n = 0;
    if (slots[0]) {
        if (slots[0]->kind != JV_INT && slots[0]->kind != JV_BOOL)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "'%s' object cannot be interpreted as an "
                              "integer",
                              jv_type_name(slots[0]));
        n = slots[0]->kind == JV_BOOL ? slots[0]->u.b : slots[0]->u.i;
    }
    if (v->kind != JV_INT && v->kind != JV_BOOL && v->kind != JV_FLOAT)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "type %s doesn't define __round__ method",
                          jv_type_name(v));
    const bool is_int = v->kind != JV_FLOAT;
    const double x =
        is_int ? (double)(v->kind == JV_BOOL ? v->u.b : v->u.i) : v->u.f;
    if (method == 0) {
        if (is_int && n >= 0) {
            *out = jv_int(v->kind == JV_BOOL ? v->u.b : v->u.i);
            return JINJA_OK;
        }
        if (is_int) {
            *out = jv_int((int64_t)round_float(x, n));
            return JINJA_OK;
        }
        *out = jv_float(round_float(x, n));
        return JINJA_OK;
    }
    /* math.ceil / floor of x * 10**n, over 10**n */
    const double p = pow(10.0, (double)n);
    const double y = method == 1 ? ceil(x * p) : floor(x * p);
    *out = jv_float(y / p);
    return JINJA_OK;
}

/* ------------------------------------------------------- the rest */

static FILTER(f_length)
{
    const jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_STR && jinja_step_bytes(c, v->u.s->len) != JINJA_OK)
        return c->status;
    const int64_t n = jv_length(v);
    if (n < 0)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "object of type '%s' has no len()", jv_type_name(v));
    *out = jv_int(n);
    return JINJA_OK;
}

static FILTER(f_default)
{
    static const char *const names[] = {"default_value", "boolean"};
    const jv *slots[2];
    const jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    const bool boolean = slots[1] && jv_truthy(slots[1]);
    if (v->kind == JV_UNDEF || (boolean && !jv_truthy(v))) {
        if (slots[0])
            *out = jv_ref(slots[0]);
        else
            return jv_str_make(c, "", 0, out);
        return JINJA_OK;
    }
    *out = jv_ref(v);
    return JINJA_OK;
}

static FILTER(f_tojson)
{
    static const char *const names[] = {"ensure_ascii", "indent", "separators",
                                        "sort_keys"};
    const jv *slots[4];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    struct jinja_dumps o = {.ensure_ascii = slots[0] && jv_truthy(slots[0]),
                            .sort_keys = slots[3] && jv_truthy(slots[3]),
                            .key_sep = ": ",
                            .key_sep_len = 2};
    char spaces[256];
    const jv *ind = slots[1];
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind == JV_STR) {
            o.indent = ind->u.s->s;
            o.indent_len = ind->u.s->len;
        } else if (ind->kind == JV_INT || ind->kind == JV_BOOL) {
            int64_t w = ind->kind == JV_BOOL ? ind->u.b : ind->u.i;
            if (w < 0)
                w = 0;
            if ((size_t)w > sizeof spaces)
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  "tojson's indent of %lld is past %zu",
                                  (long long)w, sizeof spaces);
            memset(spaces, ' ', (size_t)w);
            o.indent = spaces;
            o.indent_len = (size_t)w;
        } else {
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "can't multiply sequence by non-int of type "
                              "'%s'",
                              jv_type_name(ind));
        }
    }
    o.item_sep = o.indent ? "," : ", ";
    o.item_sep_len = o.indent ? 1 : 2;
    const jv *sep = slots[2];
    if (sep && sep->kind != JV_NONE) {
        if ((sep->kind != JV_TUPLE && sep->kind != JV_LIST) ||
            sep->u.l->n != 2 || sep->u.l->items[0].kind != JV_STR ||
            sep->u.l->items[1].kind != JV_STR)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "tojson's separators must be two strings");
        o.item_sep = sep->u.l->items[0].u.s->s;
        o.item_sep_len = sep->u.l->items[0].u.s->len;
        o.key_sep = sep->u.l->items[1].u.s->s;
        o.key_sep_len = sep->u.l->items[1].u.s->len;
    }
    struct jbuf b = {0};
    st = jinja_dumps(c, &b, v, &o);
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

/* ------------------------------------------------------------ registry */

enum { BY_NONE, BY_FILTER, BY_TEST };

static const struct filter {
    const char *name;
    jinja_filter_fn fn;
    int by; /* map names a filter; select a test */
} filters[] = {
    {"abs", f_abs, BY_NONE},
    {"capitalize", f_capitalize, BY_NONE},
    {"count", f_length, BY_NONE},
    {"d", f_default, BY_NONE},
    {"default", f_default, BY_NONE},
    {"dictsort", jinja_f_dictsort, BY_NONE},
    {"e", f_escape, BY_NONE},
    {"escape", f_escape, BY_NONE},
    {"first", jinja_f_first, BY_NONE},
    {"float", f_float, BY_NONE},
    {"indent", f_indent, BY_NONE},
    {"int", f_int, BY_NONE},
    {"items", jinja_f_items, BY_NONE},
    {"join", jinja_f_join, BY_NONE},
    {"last", jinja_f_last, BY_NONE},
    {"length", f_length, BY_NONE},
    {"list", jinja_f_list, BY_NONE},
    {"lower", f_lower, BY_NONE},
    {"map", jinja_f_map, BY_FILTER},
    {"max", jinja_f_max, BY_NONE},
    {"min", jinja_f_min, BY_NONE},
    {"reject", jinja_f_reject, BY_TEST},
    {"rejectattr", jinja_f_rejectattr, BY_TEST},
    {"replace", f_replace, BY_NONE},
    {"reverse", jinja_f_reverse, BY_NONE},
    {"round", f_round, BY_NONE},
    {"safe", f_safe, BY_NONE},
    {"select", jinja_f_select, BY_TEST},
    {"selectattr", jinja_f_selectattr, BY_TEST},
    {"sort", jinja_f_sort, BY_NONE},
    {"string", f_string, BY_NONE},
    {"sum", jinja_f_sum, BY_NONE},
    {"title", f_title, BY_NONE},
    {"tojson", f_tojson, BY_NONE},
    {"trim", f_trim, BY_NONE},
    {"unique", jinja_f_unique, BY_NONE},
    {"upper", f_upper, BY_NONE},
};

#define N_FILTERS (int)(sizeof filters / sizeof filters[0])

int jinja_filter_find(const char *name, size_t len)
{
    for (int i = 0; i < N_FILTERS; i++)
        if (strlen(filters[i].name) == len &&
            memcmp(filters[i].name, name, len) == 0)
            return i;
    return -1;
}

jinja_status jinja_filter_bind(struct jctx *c, const struct jnode *at, int id,
                               const struct jargs *a, size_t skip,
                               const char *const *names, size_t n,
                               const jv **slots)
{
    char what[64];
    snprintf(what, sizeof what, "filter '%s'",
             id >= 0 && id < N_FILTERS ? filters[id].name : "?");
    return jargs_bind(c, at, what, a, skip, names, n, slots);
}

bool jinja_filter_names_filter(int id)
{
    return id >= 0 && id < N_FILTERS && filters[id].by == BY_FILTER;
}

bool jinja_filter_names_test(int id)
{
    return id >= 0 && id < N_FILTERS && filters[id].by == BY_TEST;
}

jinja_status jinja_filter_apply(struct jctx *c, const struct jnode *at, int id,
                                const jv *v, struct jargs *a, size_t skip,
                                jv *out)
{
    *out = jv_undef();
    if (id < 0 || id >= N_FILTERS)
        return jinja_fail(c, at, JINJA_E_RUNTIME, "unknown filter");
    return filters[id].fn(c, at, id, v, a, skip, out);
}
