/*
 * jinja_exec.c - statements and scopes, as jinja2 scopes them: a set in
 * a for's body stays in that iteration (namespace() is how a template
 * carries a value out of a loop), an if makes no scope, a macro's body
 * has its own whose parent is where the macro was defined, so it sees
 * the template's top-level variables as they are when it is called.
 */
#include "jinja_internal.h"

#include <string.h>

/* ------------------------------------------------------------- scopes */

jinja_status jinja_scope_push(struct jctx *c, struct jscope *parent)
{
    struct jscope *s = jinja_alloc(c, sizeof *s);
    if (!s)
        return c->status;
    *s = (struct jscope){.parent = parent};
    s->vars = jdict_new(c, 0);
    if (!s->vars) {
        jinja_release(c, s, sizeof *s);
        return c->status;
    }
    c->scope = s;
    return JINJA_OK;
}

static void scope_free(struct jctx *c, struct jscope *s)
{
    jv vars = jv_dict(s->vars);
    jv_drop(c, &vars);
    jinja_release(c, s, sizeof *s);
}

void jinja_scope_pop(struct jctx *c, struct jscope *restore)
{
    struct jscope *s = c->scope;
    c->scope = restore;
    if (!s)
        return;
    if (s->captured) {
        /* a macro defined in it may still be called: keep it */
        s->next_kept = c->kept;
        c->kept = s;
        return;
    }
    scope_free(c, s);
}

/* s and every scope around it outlive the render's statements. */
static void capture(struct jscope *s)
{
    for (; s && !s->captured; s = s->parent)
        s->captured = true;
}

jinja_status jinja_scope_set(struct jctx *c, struct jscope *s,
                             const struct jstr *name, jv *v)
{
    jv k = jv_str((struct jstr *)name);
    k = jv_ref(&k);
    return jdict_set(c, s->vars, &k, v);
}

/* ------------------------------------------------------------ helpers */

jinja_status jinja_capture(struct jctx *c, const struct jnode *body, jv *out)
{
    *out = jv_undef();
    struct jbuf b = {0};
    struct jbuf *saved = c->out;
    c->out = &b;
    const jinja_status st = jinja_exec(c, body);
    c->out = saved;
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

/* Bind targets (chained names) to v: one name, or v unpacked. */
static jinja_status assign(struct jctx *c, const struct jnode *stmt,
                           const jv *v)
{
    if (!stmt->unpack) {
        jv x = jv_ref(v);
        return jinja_scope_set(c, c->scope, stmt->a->name, &x);
    }
    jv items;
    jinja_status st = jv_iterate(c, stmt, v, &items);
    if (st != JINJA_OK)
        return st;
    const struct jlist *l = items.u.l;
    if (l->n != stmt->count) {
        st = jinja_fail(c, stmt, JINJA_E_RUNTIME,
                        l->n > stmt->count
                            ? "too many values to unpack (expected %zu)"
                            : "not enough values to unpack (expected %zu, "
                              "got %zu)",
                        stmt->count, l->n);
    } else {
        size_t i = 0;
        for (const struct jnode *t = stmt->a; t && st == JINJA_OK;
             t = t->next, i++) {
            jv x = jv_ref(&l->items[i]);
            st = jinja_scope_set(c, c->scope, t->name, &x);
        }
    }
    jv_drop(c, &items);
    return st;
}

/* A chain of filters (a filter block's, a block set's), innermost first:
 * each node's a is the filter before it. */
static jinja_status apply_filters(struct jctx *c, const struct jnode *f, jv *v)
{
    if (!f)
        return JINJA_OK;
    jinja_status st = apply_filters(c, f->a, v);
    if (st != JINJA_OK)
        return st;
    struct jargs a;
    jv r;
    st = jargs_eval(c, f->b, f->count, &a);
    if (st == JINJA_OK)
        st = jinja_filter_apply(c, f, f->id, v, &a, 0, &r);
    jargs_free(c, &a);
    if (st == JINJA_OK) {
        jv_drop(c, v);
        *v = r;
    }
    return st;
}

/* --------------------------------------------------------- statements */

/* Whether v holds a namespace anywhere in it. A namespace is the one
 * value a template can change after it is made; one inside another could
 * make a cycle (never freed by counting references, never ending when
 * printed) or grow deeper than the depth checked when it was stored. */
static jinja_status holds_namespace(struct jctx *c, const jv *v, bool *out)
{
    jinja_status st = JINJA_OK;
    switch (v->kind) {
    case JV_NS: *out = true; return JINJA_OK;
    case JV_LIST:
    case JV_TUPLE:
        for (size_t i = 0; i < v->u.l->n && !*out && st == JINJA_OK; i++) {
            st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = holds_namespace(c, &v->u.l->items[i], out);
        }
        return st;
    case JV_DICT:
        for (size_t i = 0; i < v->u.d->n && !*out && st == JINJA_OK; i++) {
            st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = holds_namespace(c, &v->u.d->vals[i], out);
            if (st == JINJA_OK && !*out)
                st = holds_namespace(c, &v->u.d->keys[i], out);
        }
        return st;
    case JV_LOOP: return holds_namespace(c, &v->u.loop->items, out);
    case JV_METHOD: return holds_namespace(c, &v->u.meth->self, out);
    default: return JINJA_OK;
    }
}

static jinja_status exec_set(struct jctx *c, const struct jnode *n)
{
    jv v = jv_undef();
    jinja_status st;
    if (n->kind == JN_SET_BLOCK) {
        st = jinja_capture(c, n->b, &v);
        if (st == JINJA_OK)
            st = apply_filters(c, n->c, &v);
    } else {
        st = jinja_eval(c, n->b, &v);
    }
    if (st != JINJA_OK) {
        jv_drop(c, &v);
        return st;
    }
    const struct jnode *t = n->a;
    if (t->kind == JN_GETATTR) {
        /* {% set ns.x = v %}: only a namespace takes it */
        jv ns;
        st = jinja_lookup(c, t, t->a->name, &ns);
        if (st == JINJA_OK && ns.kind != JV_NS)
            st = ns.kind == JV_UNDEF ? jinja_undef_error(c, t, &ns)
                                     : jinja_fail(c, t, JINJA_E_RUNTIME,
                                                  "cannot assign attribute "
                                                  "on non-namespace object");
        bool nested = false;
        if (st == JINJA_OK)
            st = holds_namespace(c, &v, &nested);
        if (st == JINJA_OK && nested)
            st = jinja_fail(c, t, JINJA_E_RUNTIME,
                            "a namespace cannot hold a namespace");
        if (st == JINJA_OK) {
            jv k = jv_str(t->name);
            st = jdict_set(c, ns.u.d, &k, &v);
        } else {
            jv_drop(c, &v);
        }
        jv_drop(c, &ns);
        return st;
    }
    st = assign(c, n, &v);
    jv_drop(c, &v);
    return st;
}

static jinja_status exec_for(struct jctx *c, const struct jnode *n)
{
    jv iter, items;
    jinja_status st = jinja_eval(c, n->b, &iter);
    if (st != JINJA_OK)
        return st;
    st = jv_iterate(c, n->b, &iter, &items);
    jv_drop(c, &iter);
    if (st != JINJA_OK)
        return st;
    struct jscope *outer = c->scope;
    if (n->c) {
        /* {% for x in xs if cond %}: loop.* counts what passes */
        struct jlist *kept = jlist_new(c, 0);
        jv kv = kept ? jv_list(kept, false) : jv_undef();
        st = kept ? jinja_scope_push(c, outer) : c->status;
        const struct jlist *l = items.u.l;
        for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
            jv cond;
            st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = assign(c, n, &l->items[i]);
            if (st == JINJA_OK)
                st = jinja_eval(c, n->c, &cond);
            if (st != JINJA_OK)
                break;
            if (jv_truthy(&cond)) {
                jv item = jv_ref(&l->items[i]);
                st = jlist_push(c, kept, &item);
            }
            jv_drop(c, &cond);
        }
        if (c->scope != outer)
            jinja_scope_pop(c, outer);
        jv_drop(c, &items);
        if (st != JINJA_OK) {
            jv_drop(c, &kv);
            return st;
        }
        items = kv;
    }
    const size_t count = items.u.l->n;
    if (count == 0) {
        jv_drop(c, &items);
        return n->e ? jinja_exec(c, n->e) : JINJA_OK;
    }
    struct jloop *loop = jinja_alloc(c, sizeof *loop);
    if (!loop) {
        jv_drop(c, &items);
        return c->status;
    }
    *loop = (struct jloop){.h = {.refs = 1, .depth = 1, .bytes = sizeof *loop},
                           .items = items};
    jv lv = {.kind = JV_LOOP};
    lv.u.loop = loop;
    const struct jstr *loop_name = c->t->names[JNAME_LOOP];
    for (size_t i = 0; i < count && st == JINJA_OK; i++) {
        /* each iteration its own scope */
        st = jinja_step(c, 1);
        if (st == JINJA_OK)
            st = jinja_scope_push(c, outer);
        if (st != JINJA_OK)
            break;
        loop->index0 = i;
        jv ref = jv_ref(&lv);
        st = jinja_scope_set(c, c->scope, loop_name, &ref);
        if (st == JINJA_OK)
            st = assign(c, n, &loop->items.u.l->items[i]);
        if (st == JINJA_OK)
            st = jinja_exec(c, n->d);
        jinja_scope_pop(c, outer);
        if (c->ctl == JCTL_BREAK) {
            c->ctl = JCTL_NONE;
            break;
        }
        c->ctl = JCTL_NONE;
    }
    jv_drop(c, &lv);
    return st;
}

static jinja_status exec_call_block(struct jctx *c, const struct jnode *n)
{
    const struct jnode *call = n->a;
    jv callee;
    jinja_status st = jinja_eval(c, call->a, &callee);
    if (st != JINJA_OK)
        return st;
    if (callee.kind != JV_MACRO) {
        st = callee.kind == JV_UNDEF
                 ? jinja_undef_error(c, call, &callee)
                 : jinja_fail(c, call, JINJA_E_RUNTIME,
                              "a call block calls a macro, not %s",
                              jv_type_name(&callee));
        jv_drop(c, &callee);
        return st;
    }
    struct jmacro *caller = jinja_alloc(c, sizeof *caller);
    if (!caller) {
        jv_drop(c, &callee);
        return c->status;
    }
    capture(c->scope);
    *caller =
        (struct jmacro){.h = {.refs = 1, .depth = 1, .bytes = sizeof *caller},
                        .def = n,
                        .scope = c->scope};
    jv cv = {.kind = JV_MACRO};
    cv.u.m = caller;
    struct jargs a;
    jv r = jv_undef();
    st = jargs_eval(c, call->b, call->count, &a);
    if (st == JINJA_OK)
        st = jinja_call_macro(c, call, callee.u.m, &a, &cv, &r);
    jargs_free(c, &a);
    if (st == JINJA_OK)
        st = jv_write_str(c, c->out, &r);
    jv_drop(c, &r);
    jv_drop(c, &cv);
    jv_drop(c, &callee);
    return st;
}

static jinja_status exec_one(struct jctx *c, const struct jnode *n)
{
    jinja_status st;
    jv v;
    c->at = n;
    switch (n->kind) {
    case JN_TEXT: return jbuf_put(c, c->out, n->text, n->len);
    case JN_OUTPUT:
        st = jinja_eval(c, n->a, &v);
        if (st != JINJA_OK)
            return st;
        st = jv_write_str(c, c->out, &v);
        jv_drop(c, &v);
        return st;
    case JN_IF:
        /* an elif chain in a loop, not in recursion */
        for (;;) {
            st = jinja_eval(c, n->a, &v);
            if (st != JINJA_OK)
                return st;
            const bool yes = jv_truthy(&v);
            jv_drop(c, &v);
            if (yes)
                return jinja_exec(c, n->b);
            if (n->c && n->c->kind == JN_IF && n->c->elif) {
                n = n->c;
                continue;
            }
            return jinja_exec(c, n->c);
        }
    case JN_FOR: return exec_for(c, n);
    case JN_SET:
    case JN_SET_BLOCK: return exec_set(c, n);
    case JN_MACRO: {
        struct jmacro *m = jinja_alloc(c, sizeof *m);
        if (!m)
            return c->status;
        capture(c->scope);
        *m = (struct jmacro){.h = {.refs = 1, .depth = 1, .bytes = sizeof *m},
                             .def = n,
                             .scope = c->scope};
        v = (jv){.kind = JV_MACRO};
        v.u.m = m;
        return jinja_scope_set(c, c->scope, n->name, &v);
    }
    case JN_CALL_BLOCK: return exec_call_block(c, n);
    case JN_FILTER_BLOCK:
        st = jinja_capture(c, n->b, &v);
        if (st == JINJA_OK)
            st = apply_filters(c, n->a, &v);
        if (st == JINJA_OK)
            st = jv_write_str(c, c->out, &v);
        jv_drop(c, &v);
        return st;
    case JN_BLOCK: return jinja_exec(c, n->a);
    case JN_BREAK: c->ctl = JCTL_BREAK; return JINJA_OK;
    case JN_CONTINUE: c->ctl = JCTL_CONTINUE; return JINJA_OK;
    default: return jinja_fail(c, n, JINJA_E_RUNTIME, "not a statement");
    }
}

jinja_status jinja_exec(struct jctx *c, const struct jnode *body)
{
    if (c->nest >= JINJA_MAX_NEST)
        return jinja_fail(c, body, JINJA_E_LIMIT,
                          "statements nested deeper than %d", JINJA_MAX_NEST);
    c->nest++;
    jinja_status st = JINJA_OK;
    for (const struct jnode *n = body; n && st == JINJA_OK; n = n->next) {
        st = exec_one(c, n);
        if (c->ctl != JCTL_NONE)
            break;
    }
    c->nest--;
    return st;
}

/* -------------------------------------------------------------- macros */

jinja_status jinja_call_macro(struct jctx *c, const struct jnode *at,
                              const struct jmacro *m, struct jargs *a,
                              const jv *caller, jv *out)
{
    *out = jv_undef();
    const struct jnode *def = m->def;
    const bool is_macro = def->kind == JN_MACRO;
    const struct jnode *params = is_macro ? def->a : def->b;
    const struct jnode *body = is_macro ? def->b : def->c;
    const char *name = is_macro ? def->name->s : "caller";
    const bool extra = is_macro && def->varargs;
    if (c->calls >= c->max_depth)
        return jinja_fail(c, at, JINJA_E_LIMIT,
                          "macro calls nested deeper than max_depth (%zu)",
                          c->max_depth);
    jinja_status st = jinja_step(c, 1);
    if (st != JINJA_OK)
        return st;
    size_t nparams = 0;
    for (const struct jnode *p = params; p; p = p->next)
        nparams++;
    if (a->npos > nparams && !extra)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "macro '%s' takes not more than %zu argument(s)",
                          name, nparams);
    struct jscope *saved = c->scope;
    st = jinja_scope_push(c, m->scope);
    if (st != JINJA_OK)
        return st;
    c->calls++;
    /* parameters: by position, by keyword, by default, or undefined */
    size_t i = 0;
    for (const struct jnode *p = params; p && st == JINJA_OK;
         p = p->next, i++) {
        const jv *given = i < a->npos ? &a->v[i] : NULL;
        for (size_t k = a->npos; k < a->n && !given; k++)
            if (a->kw[k]->len == p->name->len &&
                memcmp(a->kw[k]->s, p->name->s, p->name->len) == 0)
                given = &a->v[k];
        jv v;
        if (given) {
            v = jv_ref(given);
        } else if (p->a) {
            st = jinja_eval(c, p->a, &v);
        } else {
            v = (jv){.kind = JV_UNDEF, .why = JU_PARAM};
            v.u.s = p->name;
        }
        if (st == JINJA_OK)
            st = jinja_scope_set(c, c->scope, p->name, &v);
    }
    /* keywords that name no parameter */
    struct jdict *kwargs = NULL;
    for (size_t k = a->npos; k < a->n && st == JINJA_OK; k++) {
        bool known = false;
        for (const struct jnode *p = params; p && !known; p = p->next)
            known = a->kw[k]->len == p->name->len &&
                    memcmp(a->kw[k]->s, p->name->s, p->name->len) == 0;
        if (known)
            continue;
        if (!extra) {
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "macro '%s' takes no keyword argument '%s'", name,
                            a->kw[k]->s);
            break;
        }
        if (!kwargs && !(kwargs = jdict_new(c, 0))) {
            st = c->status;
            break;
        }
        jv key = jv_str((struct jstr *)a->kw[k]), v = jv_ref(&a->v[k]);
        st = jdict_set(c, kwargs, &key, &v);
    }
    if (extra && st == JINJA_OK) {
        /* varargs: the positional ones past the parameters */
        struct jlist *rest = jlist_new(c, 0);
        if (!rest)
            st = c->status;
        jv rv = rest ? jv_list(rest, true) : jv_undef();
        for (size_t k = nparams; rest && k < a->npos && st == JINJA_OK; k++) {
            jv item = jv_ref(&a->v[k]);
            st = jlist_push(c, rest, &item);
        }
        if (st == JINJA_OK)
            st = jinja_scope_set(c, c->scope, c->t->names[JNAME_VARARGS], &rv);
        else
            jv_drop(c, &rv);
        if (!kwargs && st == JINJA_OK && !(kwargs = jdict_new(c, 0)))
            st = c->status;
    }
    jv kv = kwargs ? jv_dict(kwargs) : jv_undef();
    if (kwargs && st == JINJA_OK)
        st = jinja_scope_set(c, c->scope, c->t->names[JNAME_KWARGS], &kv);
    else
        jv_drop(c, &kv);
    if (caller && st == JINJA_OK) {
        jv cv = jv_ref(caller);
        st = jinja_scope_set(c, c->scope, c->t->names[JNAME_CALLER], &cv);
    }
    if (st == JINJA_OK)
        st = jinja_capture(c, body, out);
    c->calls--;
    jinja_scope_pop(c, saved);
    return st;
}
