/*
 * jinja_globals.c - the functions a template finds by name: jinja2's
 * range() (with its sandbox's cap), namespace() and dict(), and what
 * transformers adds, raise_exception() and strftime_now().
 */
#include "jinja_internal.h"

#include <string.h>
#include <time.h>

static const char *const names[] = {[JF_RANGE] = "range",
                                    [JF_NAMESPACE] = "namespace",
                                    [JF_DICT] = "dict",
                                    [JF_RAISE] = "raise_exception",
                                    [JF_STRFTIME] = "strftime_now"};

int jinja_global_find(const char *name, size_t len)
{
    for (int id = JF_RANGE; id <= JF_STRFTIME; id++)
        if (strlen(names[id]) == len && memcmp(names[id], name, len) == 0)
            return id;
    return 0;
}

const char *jinja_global_name(int id)
{
    return id >= JF_RANGE && id <= JF_STRFTIME ? names[id] : "function";
}

static jinja_status range(struct jctx *c, const struct jnode *at,
                          struct jargs *a, jv *out)
{
    if (a->npos != a->n)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "range expected 1 to 3 arguments, got %zu", a->n);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n; i++) {
        const jv *x = &a->v[i];
        if (x->kind == JV_UNDEF)
            return jinja_undef_error(c, at, x);
        if (x->kind != JV_INT && x->kind != JV_BOOL)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "'%s' object cannot be interpreted as an "
                              "integer",
                              jv_type_name(x));
        v[i] = x->kind == JV_BOOL ? x->u.b : x->u.i;
    }
    int64_t start = 0, stop = v[0], step = 1;
    if (a->n >= 2) {
        start = v[0];
        stop = v[1];
        step = v[2];
    }
    if (step == 0)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "range() arg 3 must not be zero");
    /* how many, in unsigned arithmetic: the bounds may be far apart */
    uint64_t n = 0;
    if (step > 0 && start < stop)
        n = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    else if (step < 0 && start > stop)
        n = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
    /* counted before anything is built: range(10**9) stops here */
    jinja_status st = jinja_step(c, n > SIZE_MAX ? SIZE_MAX : (size_t)n);
    if (st != JINJA_OK)
        return st;
    if (n > JINJA_MAX_RANGE)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "Range too big. The sandbox blocks ranges larger "
                          "than MAX_RANGE (%d).",
                          JINJA_MAX_RANGE);
    struct jlist *l = jlist_new(c, (size_t)n);
    if (!l)
        return c->status;
    l->flavor = JL_RANGE;
    l->range[0] = start;
    l->range[1] = stop;
    l->range[2] = step;
    for (uint64_t i = 0; i < n; i++)
        l->items[l->n++] =
            jv_int((int64_t)((uint64_t)start + i * (uint64_t)step));
    *out = jv_list(l, false);
    return JINJA_OK;
}

/* dict(mapping, **kw) and namespace(mapping, **kw). */
static jinja_status make_dict(struct jctx *c, const struct jnode *at,
                              struct jargs *a, bool ns, jv *out)
{
    if (a->npos > 1)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "%s expected at most 1 argument, got %zu",
                          ns ? "namespace" : "dict", a->npos);
    struct jdict *d = jdict_new(c, a->n);
    if (!d)
        return c->status;
    jv dv = jv_dict(d);
    jinja_status st = JINJA_OK;
    if (a->npos == 1) {
        const jv *m = &a->v[0];
        if (m->kind != JV_DICT) {
            jv_drop(c, &dv);
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "%s() takes a mapping, not %s",
                              ns ? "namespace" : "dict", jv_type_name(m));
        }
        for (size_t i = 0; i < m->u.d->n && st == JINJA_OK; i++) {
            jv k = jv_ref(&m->u.d->keys[i]), v = jv_ref(&m->u.d->vals[i]);
            st = jdict_set(c, d, &k, &v);
        }
    }
    for (size_t i = a->npos; i < a->n && st == JINJA_OK; i++) {
        jv k = jv_str((struct jstr *)a->kw[i]), v = jv_ref(&a->v[i]);
        st = jdict_set(c, d, &k, &v);
    }
    if (st != JINJA_OK) {
        jv_drop(c, &dv);
        return st;
    }
    if (ns)
        dv.kind = JV_NS;
    *out = dv;
    return JINJA_OK;
}

static jinja_status raise(struct jctx *c, const struct jnode *at,
                          struct jargs *a)
{
    static const char *const params[] = {"message"};
    const jv *slots[1];
    jinja_status st =
        jargs_bind(c, at, "raise_exception", a, 0, params, 1, slots);
    if (st != JINJA_OK)
        return st;
    jv msg = jv_none();
    if (slots[0]) {
        st = jv_to_str(c, slots[0], &msg);
        if (st != JINJA_OK)
            return st;
    }
    /* the template's message as it gave it, with where it was raised in
     * line and column only */
    struct jinja_error *err = c->err;
    const char *text = msg.kind == JV_STR ? msg.u.s->s : "None";
    const size_t len = msg.kind == JV_STR ? msg.u.s->len : 4;
    const size_t n =
        len < sizeof err->message - 1 ? len : sizeof err->message - 1;
    memcpy(err->message, text, n);
    err->message[n] = '\0';
    jinja_error_clean(err->message);
    err->line = at->line;
    err->column = at->col;
    jv_drop(c, &msg);
    c->status = JINJA_E_RAISED;
    return JINJA_E_RAISED;
}

static jinja_status strftime_now(struct jctx *c, const struct jnode *at,
                                 struct jargs *a, jv *out)
{
    static const char *const params[] = {"format"};
    const jv *slots[1];
    jinja_status st = jargs_bind(c, at, "strftime_now", a, 0, params, 1, slots);
    if (st != JINJA_OK)
        return st;
    if (!slots[0] || slots[0]->kind != JV_STR)
        return slots[0] && slots[0]->kind == JV_UNDEF
                   ? jinja_undef_error(c, at, slots[0])
                   : jinja_fail(c, at, JINJA_E_RUNTIME,
                                "strftime_now() takes a format string");
    const struct jstr *fmt = slots[0]->u.s;
    if (fmt->len == 0)
        return jv_str_make(c, "", 0, out);
    struct tm tm;
    if (!localtime_r(&c->now, &tm))
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "strftime_now(): the time is out of range");
    /* no directive writes more than a few dozen bytes */
    const size_t cap = fmt->len * 64 + 64;
    if (cap > c->max_bytes)
        return jinja_fail(c, at, JINJA_E_LIMIT,
                          "values past max_bytes (%zu bytes held at once)",
                          c->max_bytes);
    char *buf = jinja_alloc(c, cap);
    if (!buf)
        return c->status;
        /* the format is the template's: strftime_now() exists to take it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    const size_t n = strftime(buf, cap, fmt->s, &tm);
#pragma GCC diagnostic pop
    st = jv_str_make(c, buf, n, out);
    jinja_release(c, buf, cap);
    return st;
}

jinja_status jinja_global_call(struct jctx *c, const struct jnode *at, int id,
                               struct jargs *a, jv *out)
{
    *out = jv_undef();
    switch (id) {
    case JF_RANGE: return range(c, at, a, out);
    case JF_NAMESPACE: return make_dict(c, at, a, true, out);
    case JF_DICT: return make_dict(c, at, a, false, out);
    case JF_RAISE: return raise(c, at, a);
    default: return strftime_now(c, at, a, out);
    }
}
