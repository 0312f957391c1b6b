/*
 * jinja_tests.c - the tests of "x is name": jinja2's, with its answers
 * for Python's values (a bool is a number but not an integer, a dict is
 * a sequence, an undefined value is iterable).
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <string.h>

#define TEST(name)                                                             \
    static jinja_status name(struct jctx *c, const struct jnode *at,           \
                             const jv *v, struct jargs *a, size_t skip,        \
                             bool *out)

/* The test's single argument (by position or as name), required. */
static jinja_status one_arg(struct jctx *c, const struct jnode *at,
                            const char *test, const char *param,
                            struct jargs *a, size_t skip, const jv **arg)
{
    const char *const names[] = {param};
    char what[64];
    snprintf(what, sizeof what, "test '%s'", test);
    jinja_status st = jargs_bind(c, at, what, a, skip, names, 1, arg);
    if (st == JINJA_OK && !*arg)
        st = jinja_fail(c, at, JINJA_E_RUNTIME, "test '%s' takes an argument",
                        test);
    return st;
}

static jinja_status no_args(struct jctx *c, const struct jnode *at,
                            const char *test, struct jargs *a, size_t skip)
{
    char what[64];
    snprintf(what, sizeof what, "test '%s'", test);
    return jargs_bind(c, at, what, a, skip, NULL, 0, NULL);
}

#define KIND_TEST(fn, name, expr)                                              \
    TEST(fn)                                                                   \
    {                                                                          \
        const jinja_status st = no_args(c, at, name, a, skip);                 \
        *out = (expr);                                                         \
        return st;                                                             \
    }

KIND_TEST(t_defined, "defined", v->kind != JV_UNDEF)
KIND_TEST(t_undefined, "undefined", v->kind == JV_UNDEF)
KIND_TEST(t_none, "none", v->kind == JV_NONE)
KIND_TEST(t_boolean, "boolean", v->kind == JV_BOOL)
KIND_TEST(t_true, "true", v->kind == JV_BOOL && v->u.b)
KIND_TEST(t_false, "false", v->kind == JV_BOOL && !v->u.b)
KIND_TEST(t_integer, "integer", v->kind == JV_INT)
KIND_TEST(t_float, "float", v->kind == JV_FLOAT)
KIND_TEST(t_number, "number",
          v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL)
KIND_TEST(t_string, "string", v->kind == JV_STR)
KIND_TEST(t_mapping, "mapping", v->kind == JV_DICT)
KIND_TEST(t_iterable, "iterable",
          v->kind == JV_UNDEF || v->kind == JV_STR || v->kind == JV_LIST ||
              v->kind == JV_TUPLE || v->kind == JV_DICT || v->kind == JV_LOOP)
KIND_TEST(t_sequence, "sequence",
          v->kind == JV_UNDEF || v->kind == JV_STR || v->kind == JV_DICT ||
              jv_is_sequence(v))
KIND_TEST(t_callable, "callable",
          v->kind == JV_UNDEF || v->kind == JV_MACRO || v->kind == JV_METHOD ||
              v->kind == JV_FUNC)

/* value % 2 etc., Python's modulo. */
static jinja_status modulo(struct jctx *c, const struct jnode *at, const jv *v,
                           const jv *by, bool *zero)
{
    jv r;
    const jinja_status st = jinja_binary(c, at, JOP_MOD, v, by, &r);
    if (st != JINJA_OK)
        return st;
    *zero =
        (r.kind == JV_INT && r.u.i == 0) || (r.kind == JV_FLOAT && r.u.f == 0);
    return JINJA_OK;
}

TEST(t_odd)
{
    jinja_status st = no_args(c, at, "odd", a, skip);
    const jv two = jv_int(2);
    bool zero = false;
    if (st == JINJA_OK)
        st = modulo(c, at, v, &two, &zero);
    /* value % 2 == 1: 1.5 is neither odd nor even */
    jv r;
    if (st == JINJA_OK && !zero) {
        st = jinja_binary(c, at, JOP_MOD, v, &two, &r);
        *out = st == JINJA_OK && ((r.kind == JV_INT && r.u.i == 1) ||
                                  (r.kind == JV_FLOAT && r.u.f == 1.0));
        return st;
    }
    *out = false;
    return st;
}

TEST(t_even)
{
    jinja_status st = no_args(c, at, "even", a, skip);
    const jv two = jv_int(2);
    bool zero = false;
    if (st == JINJA_OK)
        st = modulo(c, at, v, &two, &zero);
    *out = zero;
    return st;
}

TEST(t_divisibleby)
{
    const jv *by;
    jinja_status st = one_arg(c, at, "divisibleby", "num", a, skip, &by);
    bool zero = false;
    if (st == JINJA_OK)
        st = modulo(c, at, v, by, &zero);
    *out = zero;
    return st;
}

static jinja_status compare_test(struct jctx *c, const struct jnode *at,
                                 const char *name, int op, const jv *v,
                                 struct jargs *a, size_t skip, bool *out)
{
    const jv *other;
    jinja_status st = one_arg(c, at, name, "other", a, skip, &other);
    return st == JINJA_OK ? jinja_compare(c, at, op, v, other, out) : st;
}

#define COMPARE_TEST(fn, name, op)                                             \
    TEST(fn)                                                                   \
    {                                                                          \
        return compare_test(c, at, name, op, v, a, skip, out);                 \
    }

COMPARE_TEST(t_eq, "eq", JOP_EQ)
COMPARE_TEST(t_ne, "ne", JOP_NE)
COMPARE_TEST(t_lt, "lt", JOP_LT)
COMPARE_TEST(t_le, "le", JOP_LE)
COMPARE_TEST(t_gt, "gt", JOP_GT)
COMPARE_TEST(t_ge, "ge", JOP_GE)

TEST(t_in)
{
    const jv *seq;
    jinja_status st = one_arg(c, at, "in", "seq", a, skip, &seq);
    return st == JINJA_OK ? jinja_contains(c, at, v, seq, out) : st;
}

TEST(t_sameas)
{
    const jv *other;
    jinja_status st = one_arg(c, at, "sameas", "other", a, skip, &other);
    if (st != JINJA_OK)
        return st;
    /* Python's "is": the same object; small ints and None are shared */
    if (v->kind != other->kind)
        *out = false;
    else if (v->kind == JV_NONE || v->kind == JV_UNDEF)
        *out = v->kind == JV_NONE;
    else if (v->kind == JV_BOOL)
        *out = v->u.b == other->u.b;
    else if (v->kind == JV_INT)
        *out = v->u.i == other->u.i && v->u.i >= -5 && v->u.i <= 256;
    else if (v->kind == JV_FLOAT || v->kind == JV_FUNC)
        *out = false;
    else
        *out = v->u.o == other->u.o;
    return JINJA_OK;
}

/* str(value).islower() / isupper(): a cased character, none of the
 * other case. */
static jinja_status case_test(struct jctx *c, const struct jnode *at,
                              const char *name, bool upper, const jv *v,
                              struct jargs *a, size_t skip, bool *out)
{
    jinja_status st = no_args(c, at, name, a, skip);
    jv s;
    if (st == JINJA_OK)
        st = jv_to_str(c, v, &s);
    if (st != JINJA_OK)
        return st;
    bool cased = false, other = false;
    const struct jstr *str = s.u.s;
    st = jinja_step_bytes(c, str->len);
    if (st != JINJA_OK) {
        jv_drop(c, &s);
        return st;
    }
    for (size_t i = 0; i < str->len;) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(str->s, str->len, i, &n);
        i += n;
        const bool u = jinja_is_cased_upper(cp), l = jinja_is_cased_lower(cp);
        if (upper ? u : l)
            cased = true;
        else if (upper ? l : u)
            other = true;
    }
    *out = cased && !other;
    jv_drop(c, &s);
    return JINJA_OK;
}

TEST(t_lower)
{
    return case_test(c, at, "lower", false, v, a, skip, out);
}

TEST(t_upper)
{
    return case_test(c, at, "upper", true, v, a, skip, out);
}

static const struct test {
    const char *name;
    jinja_test_fn fn;
} tests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"even", t_even},
    {"false", t_false},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

#define N_TESTS (int)(sizeof tests / sizeof tests[0])

int jinja_test_find(const char *name, size_t len)
{
    for (int i = 0; i < N_TESTS; i++)
        if (strlen(tests[i].name) == len &&
            memcmp(tests[i].name, name, len) == 0)
            return i;
    return -1;
}

jinja_status jinja_test_apply(struct jctx *c, const struct jnode *at, int id,
                              const jv *v, struct jargs *a, size_t skip,
                              bool *out)
{
    *out = false;
    if (id < 0 || id >= N_TESTS)
        return jinja_fail(c, at, JINJA_E_RUNTIME, "unknown test");
    return tests[id].fn(c, at, v, a, skip, out);
}
