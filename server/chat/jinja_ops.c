/*
 * jinja_ops.c - the operators, with Python's rules: int and float mix
 * (bool counts as int), / is always a float, // and % take the sign of
 * the divisor, str and list concatenate and repeat, == across types is
 * False and ordering across them an error. Python's integers have no
 * bound; these are 64-bit, and an overflow is an error rather than a
 * wrong number.
 */
#include "jinja_internal.h"

#include <math.h>
#include <string.h>

static bool is_num(const jv *v)
{
    return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT;
}

static bool is_int(const jv *v)
{
    return v->kind == JV_BOOL || v->kind == JV_INT;
}

static int64_t ival(const jv *v)
{
    return v->kind == JV_BOOL ? (int64_t)v->u.b : v->u.i;
}

static double fval(const jv *v)
{
    return v->kind == JV_FLOAT ? v->u.f : (double)ival(v);
}

static const char *op_text(int op)
{
    static const char *const text[] = {
        [JOP_ADD] = "+",  [JOP_SUB] = "-",       [JOP_MUL] = "*",
        [JOP_DIV] = "/",  [JOP_FLOORDIV] = "//", [JOP_MOD] = "%",
        [JOP_POW] = "**", [JOP_EQ] = "==",       [JOP_NE] = "!=",
        [JOP_LT] = "<",   [JOP_LE] = "<=",       [JOP_GT] = ">",
        [JOP_GE] = ">=",  [JOP_IN] = "in",       [JOP_NOTIN] = "not in"};
    return op > 0 && op <= JOP_NOTIN ? text[op] : "?";
}

static jinja_status overflow(struct jctx *c, const struct jnode *at)
{
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "integer overflow (past 64 bits)");
}

static jinja_status unsupported(struct jctx *c, const struct jnode *at, int op,
                                const jv *a, const jv *b)
{
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "unsupported operand type(s) for %s: '%s' and '%s'",
                      op_text(op), jv_type_name(a), jv_type_name(b));
}

/* Python's float divmod, from which // and % on floats come. */
static void float_divmod(double x, double y, double *div, double *mod)
{
    double m = fmod(x, y);
    double d = (x - m) / y;
    if (m != 0) {
        if ((y < 0) != (m < 0)) {
            m += y;
            d -= 1.0;
        }
    } else {
        m = copysign(0.0, y);
    }
    if (d != 0) {
        const double f = floor(d);
        d = d - f > 0.5 ? f + 1.0 : f;
    } else {
        d = copysign(0.0, x / y);
    }
    *div = d;
    *mod = m;
}

static jinja_status numeric(struct jctx *c, const struct jnode *at, int op,
                            const jv *a, const jv *b, jv *out)
{
    if (is_int(a) && is_int(b)) {
        const int64_t x = ival(a), y = ival(b);
        int64_t r;
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(x, y, &r))
                return overflow(c, at);
            *out = jv_int(r);
            return JINJA_OK;
        case JOP_SUB:
            if (__builtin_sub_overflow(x, y, &r))
                return overflow(c, at);
            *out = jv_int(r);
            return JINJA_OK;
        case JOP_MUL:
            if (__builtin_mul_overflow(x, y, &r))
                return overflow(c, at);
            *out = jv_int(r);
            return JINJA_OK;
        case JOP_DIV:
            if (y == 0)
                return jinja_fail(c, at, JINJA_E_RUNTIME, "division by zero");
            *out = jv_float((double)x / (double)y);
            return JINJA_OK;
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (y == 0)
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  op == JOP_MOD ? "integer modulo by zero"
                                                : "integer division or "
                                                  "modulo by zero");
            if (x == INT64_MIN && y == -1) {
                if (op == JOP_MOD) {
                    *out = jv_int(0);
                    return JINJA_OK;
                }
                return overflow(c, at);
            }
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q -= 1;
                m += y;
            }
            *out = jv_int(op == JOP_MOD ? m : q);
            return JINJA_OK;
        }
        case JOP_POW: {
            if (y < 0) {
                if (x == 0)
                    return jinja_fail(c, at, JINJA_E_RUNTIME,
                                      "0.0 cannot be raised to a negative "
                                      "power");
                *out = jv_float(pow((double)x, (double)y));
                return JINJA_OK;
            }
            int64_t base = x, result = 1, e = y;
            while (e > 0) {
                if (e & 1 && __builtin_mul_overflow(result, base, &result))
                    return overflow(c, at);
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base))
                    return overflow(c, at);
            }
            *out = jv_int(result);
            return JINJA_OK;
        }
        default: break;
        }
    }
    const double x = fval(a), y = fval(b);
    switch (op) {
    case JOP_ADD: *out = jv_float(x + y); return JINJA_OK;
    case JOP_SUB: *out = jv_float(x - y); return JINJA_OK;
    case JOP_MUL: *out = jv_float(x * y); return JINJA_OK;
    case JOP_DIV:
        if (y == 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME, "float division by zero");
        *out = jv_float(x / y);
        return JINJA_OK;
    case JOP_FLOORDIV:
    case JOP_MOD: {
        if (y == 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              op == JOP_MOD ? "float modulo"
                                            : "float floor division by zero");
        double d, m;
        float_divmod(x, y, &d, &m);
        *out = jv_float(op == JOP_MOD ? m : d);
        return JINJA_OK;
    }
    case JOP_POW:
        if (x == 0 && y < 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y))
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "a negative number to a fractional power "
                              "(complex result)");
        *out = jv_float(pow(x, y));
        if (isinf(out->u.f) && !isinf(x) && !isinf(y))
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "numerical result out of range");
        return JINJA_OK;
    default: return unsupported(c, at, op, a, b);
    }
}

/* seq * n for a str, a list or a tuple; n < 0 is empty. */
static jinja_status repeat(struct jctx *c, const jv *seq, int64_t n, jv *out)
{
    /* nothing repeated is nothing, however many times: no loop of n */
    const bool empty =
        seq->kind == JV_STR ? seq->u.s->len == 0 : seq->u.l->n == 0;
    if (n < 0 || empty)
        n = 0;
    if (seq->kind == JV_STR) {
        const struct jstr *s = seq->u.s;
        if (s->len && (uint64_t)n > c->max_bytes / s->len)
            return jinja_fail(c, NULL, JINJA_E_LIMIT,
                              "values past max_bytes (%zu bytes held at "
                              "once)",
                              c->max_bytes);
        struct jstr *r = jstr_new(c, s->len * (size_t)n);
        if (!r)
            return c->status;
        for (int64_t i = 0; i < n; i++)
            memcpy(r->s + s->len * (size_t)i, s->s, s->len);
        *out = jv_str(r);
        return JINJA_OK;
    }
    const struct jlist *l = seq->u.l;
    if (l->n && (uint64_t)n > c->max_bytes / sizeof(jv) / l->n)
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "values past max_bytes (%zu bytes held at once)",
                          c->max_bytes);
    struct jlist *r = jlist_new(c, l->n * (size_t)n);
    if (!r)
        return c->status;
    r->h.depth = l->h.depth;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < l->n; k++)
            r->items[r->n++] = jv_ref(&l->items[k]);
    *out = jv_list(r, seq->kind == JV_TUPLE);
    return JINJA_OK;
}

static jinja_status concat(struct jctx *c, const jv *a, const jv *b, jv *out)
{
    if (a->kind == JV_STR) {
        const struct jstr *x = a->u.s, *y = b->u.s;
        if (y->len > c->max_bytes || x->len > c->max_bytes - y->len)
            return jinja_fail(c, NULL, JINJA_E_LIMIT,
                              "values past max_bytes (%zu bytes held at "
                              "once)",
                              c->max_bytes);
        struct jstr *r = jstr_new(c, x->len + y->len);
        if (!r)
            return c->status;
        memcpy(r->s, x->s, x->len);
        memcpy(r->s + x->len, y->s, y->len);
        *out = jv_str(r);
        return JINJA_OK;
    }
    const struct jlist *x = a->u.l, *y = b->u.l;
    struct jlist *r = jlist_new(c, x->n + y->n);
    if (!r)
        return c->status;
    r->h.depth = x->h.depth > y->h.depth ? x->h.depth : y->h.depth;
    for (size_t i = 0; i < x->n; i++)
        r->items[r->n++] = jv_ref(&x->items[i]);
    for (size_t i = 0; i < y->n; i++)
        r->items[r->n++] = jv_ref(&y->items[i]);
    *out = jv_list(r, a->kind == JV_TUPLE);
    return JINJA_OK;
}

/* Markup + str escapes the str, and so does str + Markup. */
static jinja_status markup_concat(struct jctx *c, const jv *a, const jv *b,
                                  jv *out)
{
    jv ea = jv_ref(a), eb = jv_ref(b);
    jinja_status st = JINJA_OK;
    if (!jv_is_markup(a)) {
        jv_drop(c, &ea);
        st = jinja_escape(c, a->u.s, &ea);
    }
    if (st == JINJA_OK && !jv_is_markup(b)) {
        jv_drop(c, &eb);
        st = jinja_escape(c, b->u.s, &eb);
    }
    if (st == JINJA_OK)
        st = concat(c, &ea, &eb, out);
    if (st == JINJA_OK)
        out->aux = JV_MARKUP;
    jv_drop(c, &ea);
    jv_drop(c, &eb);
    return st;
}

static bool plain_seq(const jv *v)
{
    return (v->kind == JV_LIST || v->kind == JV_TUPLE) &&
           v->u.l->flavor == JL_PLAIN;
}

jinja_status jinja_binary(struct jctx *c, const struct jnode *at, int op,
                          const jv *a, const jv *b, jv *out)
{
    *out = jv_undef();
    if (a->kind == JV_UNDEF)
        return jinja_undef_error(c, at, a);
    if (b->kind == JV_UNDEF)
        return jinja_undef_error(c, at, b);
    if (is_num(a) && is_num(b))
        return numeric(c, at, op, a, b, out);
    if (op == JOP_ADD && (jv_is_markup(a) || jv_is_markup(b)) &&
        a->kind == JV_STR && b->kind == JV_STR)
        return markup_concat(c, a, b, out);
    if (op == JOP_ADD) {
        if (a->kind == JV_STR || plain_seq(a)) {
            if (b->kind == a->kind && (a->kind == JV_STR || plain_seq(b)))
                return concat(c, a, b, out);
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "can only concatenate %s (not \"%s\") to %s",
                              jv_type_name(a), jv_type_name(b),
                              jv_type_name(a));
        }
    }
    if (op == JOP_MUL) {
        const jv *seq = (a->kind == JV_STR || plain_seq(a)) && is_int(b) ? a
                        : (b->kind == JV_STR || plain_seq(b)) && is_int(a)
                            ? b
                            : NULL;
        if (seq) {
            const jinja_status st = repeat(c, seq, ival(seq == a ? b : a), out);
            if (st == JINJA_OK && jv_is_markup(seq))
                out->aux = JV_MARKUP;
            return st;
        }
        if (a->kind == JV_STR || plain_seq(a) || b->kind == JV_STR ||
            plain_seq(b))
            return jinja_fail(
                c, at, JINJA_E_RUNTIME,
                "can't multiply sequence by non-int of type "
                "'%s'",
                jv_type_name(a->kind == JV_STR || plain_seq(a) ? b : a));
    }
    if (op == JOP_MOD && a->kind == JV_STR)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "string formatting with %% is not supported");
    return unsupported(c, at, op, a, b);
}

jinja_status jinja_contains(struct jctx *c, const struct jnode *at,
                            const jv *item, const jv *seq, bool *out)
{
    *out = false;
    switch (seq->kind) {
    case JV_UNDEF: return JINJA_OK;
    case JV_STR: {
        if (item->kind != JV_STR)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "'in <string>' requires string as left "
                              "operand, not %s",
                              jv_type_name(item));
        int64_t pos;
        const jinja_status st =
            jinja_find(c, seq->u.s->s, seq->u.s->len, item->u.s->s,
                       item->u.s->len, 0, &pos);
        *out = pos >= 0;
        return st;
    }
    case JV_LIST:
    case JV_TUPLE: {
        jv items;
        jinja_status st = jv_iterate(c, at, seq, &items);
        if (st != JINJA_OK)
            return st;
        const struct jlist *l = items.u.l;
        for (size_t i = 0; i < l->n && !*out && st == JINJA_OK; i++) {
            st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jv_equal(c, item, &l->items[i], out);
        }
        jv_drop(c, &items);
        return st;
    }
    case JV_DICT: {
        if (item->kind == JV_UNDEF)
            return JINJA_OK; /* hashable in jinja2, and in no dict */
        jinja_status st = jv_check_hashable(c, item);
        const jv *found = NULL;
        if (st == JINJA_OK)
            st = jdict_lookup(c, seq->u.d, item, &found);
        *out = found != NULL;
        return st;
    }
    default:
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "argument of type '%s' is not iterable",
                          jv_type_name(seq));
    }
}

jinja_status jinja_compare(struct jctx *c, const struct jnode *at, int op,
                           const jv *a, const jv *b, bool *out)
{
    jinja_status st;
    int cmp;
    switch (op) {
    case JOP_EQ:
    case JOP_NE:
        st = jv_equal(c, a, b, out);
        if (op == JOP_NE)
            *out = !*out;
        return st;
    case JOP_IN:
    case JOP_NOTIN:
        st = jinja_contains(c, at, a, b, out);
        if (op == JOP_NOTIN)
            *out = !*out;
        return st;
    default:
        st = jv_order(c, at, a, b, op_text(op), false, &cmp);
        if (st != JINJA_OK)
            return st;
        if (cmp == 2) { /* NaN */
            *out = false;
            return JINJA_OK;
        }
        *out = op == JOP_LT   ? cmp < 0
               : op == JOP_LE ? cmp <= 0
               : op == JOP_GT ? cmp > 0
                              : cmp >= 0;
        return JINJA_OK;
    }
}

jinja_status jinja_negate(struct jctx *c, const struct jnode *at, const jv *a,
                          bool minus, jv *out)
{
    *out = jv_undef();
    if (a->kind == JV_UNDEF)
        return jinja_undef_error(c, at, a);
    if (a->kind == JV_FLOAT) {
        *out = jv_float(minus ? -a->u.f : a->u.f);
        return JINJA_OK;
    }
    if (is_int(a)) {
        const int64_t x = ival(a);
        if (minus && x == INT64_MIN)
            return overflow(c, at);
        *out = jv_int(minus ? -x : x);
        return JINJA_OK;
    }
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "bad operand type for unary %c: '%s'", minus ? '-' : '+',
                      jv_type_name(a));
}
