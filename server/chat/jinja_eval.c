/*
 * jinja_eval.c - expressions: each node evaluated is a step, each level
 * of C recursion counted against JINJA_MAX_NEST. Attribute and item
 * lookup follow jinja2's sandbox: a dict's key is its attribute unless
 * Python has a method of that name; what is missing is undefined, which
 * renders as nothing but is an error to look into or call.
 */
#include "jinja_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- undefined */

/* How jinja2 names the owner of a missing attribute. */
static const char *owner_name(unsigned kind)
{
    switch (kind) {
    case JV_NONE: return "None";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    case JV_MACRO: return "jinja2.runtime.Macro object";
    case JV_BOOL: return "bool object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_STR: return "str object";
    case JV_LIST: return "list object";
    case JV_TUPLE: return "tuple object";
    case JV_DICT: return "dict object";
    default: return "object";
    }
}

jinja_status jinja_undef_error(struct jctx *c, const struct jnode *at,
                               const jv *u)
{
    const char *owner = owner_name(u->aux);
    const bool named = u->why == JU_NAME || u->why == JU_ATTR ||
                       u->why == JU_UNSAFE || u->why == JU_PARAM;
    const char *name = named && u->u.s ? u->u.s->s : "";
    switch (u->why) {
    case JU_NAME:
        return jinja_fail(c, at, JINJA_E_RUNTIME, "'%s' is undefined", name);
    case JU_ATTR:
        return jinja_fail(c, at, JINJA_E_RUNTIME, "'%s' has no attribute '%s'",
                          owner, name);
    case JU_INDEX:
        return jinja_fail(c, at, JINJA_E_RUNTIME, "%s has no element %" PRId64,
                          owner, u->u.i);
    case JU_UNSAFE:
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "access to attribute '%s' of '%s' object is "
                          "unsafe.",
                          name, jv_kind_name(u->aux));
    case JU_PARAM:
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "parameter '%s' was not provided", name);
    case JU_HINT: return jinja_fail(c, at, JINJA_E_RUNTIME, "%s", u->u.hint);
    default: return jinja_fail(c, at, JINJA_E_RUNTIME, "undefined value");
    }
}

static jv undef_named(int why, unsigned owner, const struct jstr *name)
{
    jv v = {.kind = JV_UNDEF, .why = (uint8_t)why, .aux = (uint16_t)owner};
    v.u.s = (struct jstr *)name;
    return jv_ref(&v);
}

static jv undef_index(unsigned owner, int64_t i)
{
    jv v = {.kind = JV_UNDEF, .why = JU_INDEX, .aux = (uint16_t)owner};
    v.u.i = i;
    return v;
}

/* ------------------------------------------------------------ lookups */

jinja_status jinja_lookup(struct jctx *c, const struct jnode *at,
                          const struct jstr *name, jv *out)
{
    (void)at;
    for (const struct jscope *s = c->scope; s; s = s->parent) {
        const jv *v = jdict_get_name(c, s->vars, name);
        if (v) {
            *out = jv_ref(v);
            return JINJA_OK;
        }
    }
    const int id = jinja_global_find(name->s, name->len);
    if (id > 0) {
        *out = (jv){.kind = JV_FUNC, .aux = (uint16_t)id};
        return JINJA_OK;
    }
    *out = undef_named(JU_NAME, 0, name);
    return JINJA_OK;
}

static jinja_status make_method(struct jctx *c, const jv *self, int id,
                                const struct jstr *name, jv *out)
{
    if (id == JM_UNSAFE) {
        *out = undef_named(JU_UNSAFE, self->kind, name);
        return JINJA_OK;
    }
    struct jmethod *m = jinja_alloc(c, sizeof *m);
    if (!m)
        return c->status;
    /* the name may be a value of the render's (map's attribute=) */
    jv n = jv_str((struct jstr *)name);
    n = jv_ref(&n);
    *m = (struct jmethod){.h = {.refs = 1, .depth = 1, .bytes = sizeof *m},
                          .self = jv_ref(self),
                          .id = (uint16_t)id,
                          .name = n.u.s};
    *out = (jv){.kind = JV_METHOD};
    out->u.meth = m;
    return JINJA_OK;
}

static jinja_status loop_attr(struct jctx *c, const jv *v,
                              const struct jstr *name, jv *out)
{
    const struct jloop *l = v->u.loop;
    const struct jlist *items = l->items.u.l;
    const size_t i = l->index0, n = items->n;
    const char *a = name->s;
    if (strcmp(a, "index") == 0)
        *out = jv_int((int64_t)i + 1);
    else if (strcmp(a, "index0") == 0)
        *out = jv_int((int64_t)i);
    else if (strcmp(a, "revindex") == 0)
        *out = jv_int((int64_t)(n - i));
    else if (strcmp(a, "revindex0") == 0)
        *out = jv_int((int64_t)(n - i - 1));
    else if (strcmp(a, "first") == 0)
        *out = jv_bool(i == 0);
    else if (strcmp(a, "last") == 0)
        *out = jv_bool(i + 1 == n);
    else if (strcmp(a, "length") == 0)
        *out = jv_int((int64_t)n);
    else if (strcmp(a, "depth") == 0)
        *out = jv_int(1);
    else if (strcmp(a, "depth0") == 0)
        *out = jv_int(0);
    else if (strcmp(a, "previtem") == 0)
        *out = i > 0 ? jv_ref(&items->items[i - 1])
                     : jv_undef_hint("there is no previous item");
    else if (strcmp(a, "nextitem") == 0)
        *out = i + 1 < n ? jv_ref(&items->items[i + 1])
                         : jv_undef_hint("there is no next item");
    else if (strcmp(a, "cycle") == 0)
        return make_method(c, v, JM_CYCLE, name, out);
    else if (strcmp(a, "changed") == 0)
        return make_method(c, v, JM_UNSUPPORTED, name, out);
    else
        *out = undef_named(JU_ATTR, JV_LOOP, name);
    return JINJA_OK;
}

jinja_status jinja_getattr(struct jctx *c, const struct jnode *at, const jv *v,
                           const struct jstr *name, jv *out)
{
    *out = jv_undef();
    switch (v->kind) {
    case JV_UNDEF: return jinja_undef_error(c, at, v);
    case JV_LOOP: return loop_attr(c, v, name, out);
    case JV_NS: {
        const jv *m = jdict_get_name(c, v->u.d, name);
        *out = m ? jv_ref(m) : undef_named(JU_ATTR, JV_NS, name);
        return JINJA_OK;
    }
    case JV_DICT: {
        /* Python's attribute first: d.items is the method */
        const int id = jinja_method_find(v, name->s, name->len);
        if (id != JM_NONE)
            return make_method(c, v, id, name, out);
        const jv *m = jdict_get_name(c, v->u.d, name);
        *out = m ? jv_ref(m) : undef_named(JU_ATTR, JV_DICT, name);
        return JINJA_OK;
    }
    default: {
        const int id = jinja_method_find(v, name->s, name->len);
        if (id != JM_NONE)
            return make_method(c, v, id, name, out);
        *out = undef_named(JU_ATTR, v->kind, name);
        return JINJA_OK;
    }
    }
}

jinja_status jinja_getitem(struct jctx *c, const struct jnode *at, const jv *v,
                           const jv *key, jv *out)
{
    *out = jv_undef();
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    const bool int_key = key->kind == JV_INT || key->kind == JV_BOOL;
    const int64_t k = key->kind == JV_BOOL ? key->u.b : key->u.i;
    switch (v->kind) {
    case JV_DICT: {
        const jv *m;
        const jinja_status st = jdict_lookup(c, v->u.d, key, &m);
        if (st != JINJA_OK)
            return st;
        if (m) {
            *out = jv_ref(m);
            return JINJA_OK;
        }
        break;
    }
    case JV_LIST:
    case JV_TUPLE:
        if (int_key && jv_is_sequence(v)) {
            const struct jlist *l = v->u.l;
            const int64_t n = (int64_t)l->n;
            const int64_t i = k < 0 ? k + n : k;
            *out = i >= 0 && i < n ? jv_ref(&l->items[i])
                                   : undef_index(v->kind, k);
            return JINJA_OK;
        }
        break;
    case JV_STR:
        if (int_key) {
            const struct jstr *s = v->u.s;
            const jinja_status st = jinja_step_bytes(c, s->len);
            if (st != JINJA_OK)
                return st;
            const int64_t n = (int64_t)jinja_utf8_count(s->s, s->len);
            const int64_t i = k < 0 ? k + n : k;
            if (i < 0 || i >= n) {
                *out = undef_index(JV_STR, k);
                return JINJA_OK;
            }
            const size_t off = jinja_utf8_offset(s->s, s->len, (size_t)i);
            size_t len;
            jinja_utf8_next(s->s, s->len, off, &len);
            return jv_str_make(c, s->s + off, len, out);
        }
        break;
    default: break;
    }
    /* jinja2 then tries the key as an attribute name */
    if (key->kind == JV_STR)
        return jinja_getattr(c, at, v, key->u.s, out);
    *out = int_key ? undef_index(v->kind, k) : jv_undef();
    return JINJA_OK;
}

/* ---------------------------------------------------------- arguments */

jinja_status jargs_eval(struct jctx *c, const struct jnode *first, size_t count,
                        struct jargs *a)
{
    a->n = a->npos = a->cap = 0;
    a->v = a->inline_v;
    a->kw = a->inline_kw;
    if (count > JARGS_INLINE) {
        a->v = jinja_alloc(c, count * sizeof *a->v);
        a->kw = a->v ? jinja_alloc(c, count * sizeof *a->kw) : NULL;
        if (!a->kw) {
            if (a->v)
                jinja_release(c, a->v, count * sizeof *a->v);
            a->v = a->inline_v;
            a->kw = a->inline_kw;
            return c->status;
        }
        a->cap = count;
    }
    for (const struct jnode *n = first; n; n = n->next) {
        const jinja_status st = jinja_eval(c, n, &a->v[a->n]);
        if (st != JINJA_OK)
            return st;
        a->kw[a->n] = n->kw;
        if (!n->kw)
            a->npos++;
        a->n++;
    }
    return JINJA_OK;
}

void jargs_free(struct jctx *c, struct jargs *a)
{
    for (size_t i = 0; i < a->n; i++)
        jv_drop(c, &a->v[i]);
    if (a->v != a->inline_v) {
        jinja_release(c, a->v, a->cap * sizeof *a->v);
        jinja_release(c, a->kw, a->cap * sizeof *a->kw);
    }
    a->n = a->npos = 0;
    a->v = a->inline_v;
    a->kw = a->inline_kw;
}

jinja_status jargs_bind(struct jctx *c, const struct jnode *at,
                        const char *what, const struct jargs *a, size_t skip,
                        const char *const *names, size_t nnames,
                        const jv **slots)
{
    for (size_t i = 0; i < nnames; i++)
        slots[i] = NULL;
    const size_t pos = a->npos > skip ? a->npos - skip : 0;
    if (pos > nnames)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "%s takes at most %zu argument%s (%zu given)", what,
                          nnames, nnames == 1 ? "" : "s", pos);
    for (size_t i = 0; i < pos; i++)
        slots[i] = &a->v[skip + i];
    for (size_t j = a->npos; j < a->n; j++) {
        size_t i;
        for (i = 0; i < nnames; i++)
            if (strcmp(names[i], a->kw[j]->s) == 0)
                break;
        if (i == nnames)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "%s got an unexpected keyword argument '%s'",
                              what, a->kw[j]->s);
        if (slots[i])
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "%s got multiple values for argument '%s'", what,
                              names[i]);
        slots[i] = &a->v[j];
    }
    return JINJA_OK;
}

jinja_status jinja_call_value(struct jctx *c, const struct jnode *at,
                              const jv *callee, struct jargs *a, jv *out)
{
    *out = jv_undef();
    switch (callee->kind) {
    case JV_UNDEF: return jinja_undef_error(c, at, callee);
    case JV_MACRO: return jinja_call_macro(c, at, callee->u.m, a, NULL, out);
    case JV_METHOD: {
        const struct jmethod *m = callee->u.meth;
        return jinja_method_call(c, at, &m->self, m->id, m->name, a, out);
    }
    case JV_FUNC: return jinja_global_call(c, at, callee->aux, a, out);
    default:
        return jinja_fail(c, at, JINJA_E_RUNTIME, "'%s' object is not callable",
                          jv_type_name(callee));
    }
}

/* -------------------------------------------------------- expressions */

static jinja_status eval_list(struct jctx *c, const struct jnode *n, jv *out)
{
    struct jlist *l = jlist_new(c, n->count);
    if (!l)
        return c->status;
    jv lv = jv_list(l, n->kind == JN_TUPLE);
    for (const struct jnode *e = n->a; e; e = e->next) {
        jv item;
        jinja_status st = jinja_eval(c, e, &item);
        c->at = n;
        if (st == JINJA_OK)
            st = jlist_push(c, l, &item);
        if (st != JINJA_OK) {
            jv_drop(c, &lv);
            return st;
        }
    }
    *out = lv;
    return JINJA_OK;
}

static jinja_status eval_dict(struct jctx *c, const struct jnode *n, jv *out)
{
    struct jdict *d = jdict_new(c, n->count);
    if (!d)
        return c->status;
    jv dv = jv_dict(d);
    for (const struct jnode *e = n->a; e; e = e->next->next) {
        jv k, v;
        jinja_status st = jinja_eval(c, e, &k);
        if (st != JINJA_OK) {
            jv_drop(c, &dv);
            return st;
        }
        st = jinja_eval(c, e->next, &v);
        if (st != JINJA_OK) {
            jv_drop(c, &k);
            jv_drop(c, &dv);
            return st;
        }
        c->at = e;
        st = jdict_set(c, d, &k, &v);
        if (st != JINJA_OK) {
            jv_drop(c, &dv);
            return st;
        }
    }
    *out = dv;
    return JINJA_OK;
}

static jinja_status eval_call(struct jctx *c, const struct jnode *n, jv *out)
{
    jv callee;
    jinja_status st = jinja_eval(c, n->a, &callee);
    if (st != JINJA_OK)
        return st;
    struct jargs a;
    st = jargs_eval(c, n->b, n->count, &a);
    c->at = n;
    if (st == JINJA_OK)
        st = jinja_call_value(c, n, &callee, &a, out);
    jargs_free(c, &a);
    jv_drop(c, &callee);
    return st;
}

static jinja_status eval_filter(struct jctx *c, const struct jnode *n, jv *out)
{
    jv v;
    jinja_status st = jinja_eval(c, n->a, &v);
    if (st != JINJA_OK)
        return st;
    struct jargs a;
    st = jargs_eval(c, n->b, n->count, &a);
    c->at = n;
    if (st == JINJA_OK)
        st = jinja_filter_apply(c, n, n->id, &v, &a, 0, out);
    jargs_free(c, &a);
    jv_drop(c, &v);
    return st;
}

static jinja_status eval_test(struct jctx *c, const struct jnode *n, jv *out)
{
    jv v;
    jinja_status st = jinja_eval(c, n->a, &v);
    if (st != JINJA_OK)
        return st;
    struct jargs a;
    bool r = false;
    st = jargs_eval(c, n->b, n->count, &a);
    c->at = n;
    if (st == JINJA_OK)
        st = jinja_test_apply(c, n, n->id, &v, &a, 0, &r);
    jargs_free(c, &a);
    jv_drop(c, &v);
    *out = jv_bool(r != n->negate);
    return st;
}

static jinja_status eval_concat(struct jctx *c, const struct jnode *n, jv *out)
{
    struct jbuf b = {0};
    for (const struct jnode *e = n->a; e; e = e->next) {
        jv v;
        jinja_status st = jinja_eval(c, e, &v);
        c->at = n;
        if (st == JINJA_OK) {
            st = jv_write_str(c, &b, &v);
            jv_drop(c, &v);
        }
        if (st != JINJA_OK) {
            jbuf_free(c, &b);
            return st;
        }
    }
    return jbuf_to_str(c, &b, out);
}

static jinja_status eval_compare(struct jctx *c, const struct jnode *n, jv *out)
{
    jv left;
    jinja_status st = jinja_eval(c, n->a, &left);
    if (st != JINJA_OK)
        return st;
    bool r = true;
    for (const struct jnode *e = n->b; e && r; e = e->next) {
        jv right;
        st = jinja_eval(c, e, &right);
        c->at = n;
        if (st == JINJA_OK)
            st = jinja_compare(c, n, e->cmp, &left, &right, &r);
        jv_drop(c, &left);
        if (st != JINJA_OK) {
            jv_drop(c, &right);
            return st;
        }
        left = right;
    }
    jv_drop(c, &left);
    *out = jv_bool(r);
    return JINJA_OK;
}

static jinja_status eval_binary(struct jctx *c, const struct jnode *n, jv *out)
{
    jv a, b;
    jinja_status st = jinja_eval(c, n->a, &a);
    if (st != JINJA_OK)
        return st;
    st = jinja_eval(c, n->b, &b);
    c->at = n;
    if (st == JINJA_OK) {
        st = jinja_binary(c, n, n->op, &a, &b, out);
        jv_drop(c, &b);
    }
    jv_drop(c, &a);
    return st;
}

static jinja_status eval_node(struct jctx *c, const struct jnode *n, jv *out)
{
    jinja_status st;
    jv v, w;
    switch (n->kind) {
    case JN_LIT: *out = n->lit; return JINJA_OK;
    case JN_NAME: return jinja_lookup(c, n, n->name, out);
    case JN_LIST:
    case JN_TUPLE: return eval_list(c, n, out);
    case JN_DICT: return eval_dict(c, n, out);
    case JN_GETATTR:
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        c->at = n;
        st = jinja_getattr(c, n, &v, n->name, out);
        jv_drop(c, &v);
        return st;
    case JN_GETITEM:
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        st = jinja_eval(c, n->b, &w);
        c->at = n;
        if (st == JINJA_OK) {
            st = jinja_getitem(c, n, &v, &w, out);
            jv_drop(c, &w);
        }
        jv_drop(c, &v);
        return st;
    case JN_SLICE: {
        jv parts[3] = {jv_none(), jv_none(), jv_none()};
        const struct jnode *pn[3] = {n->b, n->c, n->d};
        st = jinja_eval(c, n->a, &v);
        for (int i = 0; i < 3 && st == JINJA_OK; i++)
            if (pn[i])
                st = jinja_eval(c, pn[i], &parts[i]);
        c->at = n;
        if (st == JINJA_OK)
            st = jinja_slice(c, n, &v, &parts[0], &parts[1], &parts[2], out);
        for (int i = 0; i < 3; i++)
            jv_drop(c, &parts[i]);
        jv_drop(c, &v);
        return st;
    }
    case JN_CALL: return eval_call(c, n, out);
    case JN_FILTER: return eval_filter(c, n, out);
    case JN_TEST: return eval_test(c, n, out);
    case JN_NEG:
    case JN_POS:
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        st = jinja_negate(c, n, &v, n->kind == JN_NEG, out);
        jv_drop(c, &v);
        return st;
    case JN_NOT:
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        *out = jv_bool(!jv_truthy(&v));
        jv_drop(c, &v);
        return JINJA_OK;
    case JN_AND:
    case JN_OR:
        /* the operand that decides, as Python gives it */
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        if (jv_truthy(&v) == (n->kind == JN_OR)) {
            *out = v;
            return JINJA_OK;
        }
        jv_drop(c, &v);
        return jinja_eval(c, n->b, out);
    case JN_BINARY: return eval_binary(c, n, out);
    case JN_CONCAT: return eval_concat(c, n, out);
    case JN_COMPARE: return eval_compare(c, n, out);
    case JN_COND:
        st = jinja_eval(c, n->b, &v);
        if (st != JINJA_OK)
            return st;
        const bool yes = jv_truthy(&v);
        jv_drop(c, &v);
        if (yes)
            return jinja_eval(c, n->a, out);
        if (n->c)
            return jinja_eval(c, n->c, out);
        *out = jv_undef();
        return JINJA_OK;
    default: return jinja_fail(c, n, JINJA_E_RUNTIME, "not an expression");
    }
}

jinja_status jinja_eval(struct jctx *c, const struct jnode *n, jv *out)
{
    *out = jv_undef();
    if (c->nest >= JINJA_MAX_NEST)
        return jinja_fail(c, n, JINJA_E_LIMIT,
                          "expressions nested deeper than %d", JINJA_MAX_NEST);
    jinja_status st = jinja_step(c, 1);
    if (st != JINJA_OK)
        return st;
    c->nest++;
    c->at = n;
    st = eval_node(c, n, out);
    c->nest--;
    if (st != JINJA_OK)
        jv_drop(c, out);
    return st;
}
