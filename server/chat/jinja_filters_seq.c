/*
 * jinja_filters_seq.c - the filters over sequences, as jinja2 3.1 has
 * them: map, select, reject, selectattr, rejectattr, unique and items
 * give generators (true even when empty, no length, used up once
 * iterated), reverse a reversed iterator; sort, dictsort, min and max
 * compare strings lowercased unless case_sensitive; attribute= paths
 * may be dotted ("a.b", "items.0").
 */
#include "jinja_filters.h"

#include <string.h>

static jinja_status fail_status(struct jctx *c)
{
    return c->status;
}

/* A new list for a filter's result; generator: what map and the like
 * give. */
static struct jlist *result_list(struct jctx *c, size_t cap, bool generator)
{
    struct jlist *l = jlist_new(c, cap);
    if (l && generator)
        l->flavor = JL_GENERATOR;
    return l;
}

/* --------------------------------------------------------- attributes */

/* attribute= as the lookups it stands for: "a.b.0" is a, b, then item
 * 0; an int is one item; absent, none. */
static jinja_status attr_parts(struct jctx *c, const jv *attr, jv *out)
{
    struct jlist *l = jlist_new(c, 0);
    if (!l)
        return fail_status(c);
    jv lv = jv_list(l, false);
    jinja_status st = JINJA_OK;
    if (attr && attr->kind == JV_STR) {
        const struct jstr *s = attr->u.s;
        size_t from = 0;
        for (size_t i = 0; i <= s->len && st == JINJA_OK; i++) {
            if (i < s->len && s->s[i] != '.')
                continue;
            bool digits = i > from;
            for (size_t k = from; k < i; k++)
                digits = digits && s->s[k] >= '0' && s->s[k] <= '9';
            jv part;
            int64_t n;
            bool overflow;
            if (digits &&
                jinja_parse_int(s->s + from, i - from, 10, &n, &overflow))
                part = jv_int(n);
            else
                st = jv_str_make(c, s->s + from, i - from, &part);
            if (st == JINJA_OK)
                st = jlist_push(c, l, &part);
            from = i + 1;
        }
    } else if (attr && attr->kind != JV_NONE) {
        jv part = jv_ref(attr);
        st = jlist_push(c, l, &part);
    }
    if (st != JINJA_OK) {
        jv_drop(c, &lv);
        return st;
    }
    *out = lv;
    return JINJA_OK;
}

/* item looked up along parts, as jinja2's make_attrgetter: dflt (not
 * NULL) stands in for an undefined result. */
static jinja_status attr_get(struct jctx *c, const struct jnode *at,
                             const jv *item, const jv *parts, const jv *dflt,
                             jv *out)
{
    *out = jv_undef();
    jv cur = jv_ref(item);
    const struct jlist *p = parts->u.l;
    for (size_t i = 0; i < p->n; i++) {
        jv next;
        const jinja_status st = jinja_getitem(c, at, &cur, &p->items[i], &next);
        jv_drop(c, &cur);
        if (st != JINJA_OK)
            return st;
        cur = next;
        if (dflt && dflt->kind != JV_NONE && cur.kind == JV_UNDEF) {
            jv_drop(c, &cur);
            cur = jv_ref(dflt);
        }
    }
    *out = cur;
    return JINJA_OK;
}

/* jinja2's ignore_case: a string lowercased, anything else as it is. */
static jinja_status ignore_case(struct jctx *c, jv *v)
{
    if (v->kind != JV_STR)
        return JINJA_OK;
    jv lower;
    const jinja_status st = jinja_recase(c, v->u.s, 0, &lower);
    if (st != JINJA_OK)
        return st;
    jv_drop(c, v);
    *v = lower;
    return JINJA_OK;
}

/* ------------------------------------------------------ first, last... */

FILTER(jinja_f_first)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_STR && v->u.s->len) {
        size_t n;
        jinja_utf8_next(v->u.s->s, v->u.s->len, 0, &n);
        return jv_str_make(c, v->u.s->s, n, out);
    }
    if ((v->kind == JV_LIST || v->kind == JV_TUPLE) &&
        v->u.l->flavor == JL_GENERATOR) {
        struct jlist *g = v->u.l;
        *out = g->consumed < g->n ? jv_ref(&g->items[g->consumed++])
                                  : jv_undef_hint("No first item, sequence "
                                                  "was empty.");
        return JINJA_OK;
    }
    jv items;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    *out = items.u.l->n ? jv_ref(&items.u.l->items[0])
                        : jv_undef_hint("No first item, sequence was empty.");
    jv_drop(c, &items);
    return JINJA_OK;
}

FILTER(jinja_f_last)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_STR) {
        const struct jstr *s = v->u.s;
        if (!s->len) {
            *out = jv_undef_hint("No last item, sequence was empty.");
            return JINJA_OK;
        }
        const size_t at_ = jinja_utf8_prev(s->s, s->len);
        return jv_str_make(c, s->s + at_, s->len - at_, out);
    }
    if (jv_is_iterator(v) || (v->kind != JV_LIST && v->kind != JV_TUPLE &&
                              v->kind != JV_DICT && v->kind != JV_UNDEF))
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "'%s' object is not reversible", jv_type_name(v));
    jv items;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    const struct jlist *l = items.u.l;
    *out = l->n ? jv_ref(&l->items[l->n - 1])
                : jv_undef_hint("No last item, sequence was empty.");
    jv_drop(c, &items);
    return JINJA_OK;
}

FILTER(jinja_f_list)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    jv items;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    if (items.kind == JV_LIST && items.u.l->flavor == JL_PLAIN) {
        *out = items;
        return JINJA_OK;
    }
    const struct jlist *l = items.u.l;
    struct jlist *r = jlist_new(c, l->n);
    if (!r) {
        jv_drop(c, &items);
        return fail_status(c);
    }
    r->h.depth = l->h.depth;
    for (size_t i = 0; i < l->n; i++)
        r->items[r->n++] = jv_ref(&l->items[i]);
    jv_drop(c, &items);
    *out = jv_list(r, false);
    return JINJA_OK;
}

FILTER(jinja_f_join)
{
    static const char *const names[] = {"d", "attribute"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    jv items, parts = jv_undef(), sep = jv_undef();
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    if (slots[0])
        st = jv_to_str(c, slots[0], &sep);
    if (st == JINJA_OK && slots[1] && slots[1]->kind != JV_NONE)
        st = attr_parts(c, slots[1], &parts);
    struct jbuf b = {0};
    const struct jlist *l = items.u.l;
    for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
        if (i && sep.kind == JV_STR)
            st = jbuf_put(c, &b, sep.u.s->s, sep.u.s->len);
        jv item = jv_undef();
        if (st == JINJA_OK)
            st = parts.kind == JV_LIST
                     ? attr_get(c, at, &l->items[i], &parts, NULL, &item)
                     : (item = jv_ref(&l->items[i]), JINJA_OK);
        if (st == JINJA_OK)
            st = jv_write_str(c, &b, &item);
        jv_drop(c, &item);
    }
    jv_drop(c, &items);
    jv_drop(c, &parts);
    jv_drop(c, &sep);
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

/* --------------------------------------------------------------- map */

FILTER(jinja_f_map)
{
    const size_t own = a->npos > skip ? a->npos - skip : 0;
    const jv *attr = NULL, *dflt = NULL;
    for (size_t i = a->npos; i < a->n; i++) {
        if (strcmp(a->kw[i]->s, "attribute") == 0)
            attr = &a->v[i];
        else if (strcmp(a->kw[i]->s, "default") == 0)
            dflt = &a->v[i];
    }
    int fid = -1;
    if (own == 0 && attr) {
        for (size_t i = a->npos; i < a->n; i++)
            if (&a->v[i] != attr && &a->v[i] != dflt)
                return jinja_fail(c, at, JINJA_E_RUNTIME,
                                  "Unexpected keyword argument '%s'",
                                  a->kw[i]->s);
    } else {
        attr = NULL;
        if (own == 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "map requires a filter argument");
        const jv *name = &a->v[skip];
        if (skip == 0 && at->id == id && at->id2 >= 0)
            fid = at->id2;
        else if (name->kind == JV_STR)
            fid = jinja_filter_find(name->u.s->s, name->u.s->len);
        if (fid < 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME, "no filter named '%s'",
                              name->kind == JV_STR ? name->u.s->s : "?");
    }
    struct jlist *r = result_list(c, 0, true);
    if (!r)
        return fail_status(c);
    jv rv = jv_list(r, false);
    if (!jv_truthy(v)) { /* jinja2 maps nothing over a false value */
        *out = rv;
        return JINJA_OK;
    }
    jv items, parts = jv_undef();
    jinja_status st = attr ? attr_parts(c, attr, &parts) : JINJA_OK;
    if (st == JINJA_OK)
        st = jv_iterate(c, at, v, &items);
    const struct jlist *l = st == JINJA_OK ? items.u.l : NULL;
    for (size_t i = 0; l && i < l->n && st == JINJA_OK; i++) {
        jv item;
        st = jinja_step(c, 1);
        if (st == JINJA_OK)
            st = attr ? attr_get(c, at, &l->items[i], &parts, dflt, &item)
                      : jinja_filter_apply(c, at, fid, &l->items[i], a,
                                           skip + 1, &item);
        if (st == JINJA_OK)
            st = jlist_push(c, r, &item);
    }
    if (l)
        jv_drop(c, &items);
    jv_drop(c, &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &rv);
        return st;
    }
    *out = rv;
    return JINJA_OK;
}

/* ---------------------------------------------------- select, reject */

/* select / reject / selectattr / rejectattr: by_attr takes an attribute
 * first; then a test's name (none: truthiness) and its arguments. */
static jinja_status select_common(struct jctx *c, const struct jnode *at,
                                  int id, const jv *v, struct jargs *a,
                                  size_t skip, bool by_attr, bool keep, jv *out)
{
    size_t next = skip;
    jv parts = jv_undef();
    jinja_status st = JINJA_OK;
    if (by_attr) {
        if (a->npos <= next)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "Missing parameter for attribute name");
        st = attr_parts(c, &a->v[next++], &parts);
        if (st != JINJA_OK)
            return st;
    }
    int test = -1;
    if (a->npos > next) {
        const jv *name = &a->v[next++];
        if (skip == 0 && at->id == id && at->id2 >= 0)
            test = at->id2;
        else if (name->kind == JV_STR)
            test = jinja_test_find(name->u.s->s, name->u.s->len);
        if (test < 0) {
            jv_drop(c, &parts);
            return jinja_fail(c, at, JINJA_E_RUNTIME, "no test named '%s'",
                              name->kind == JV_STR ? name->u.s->s : "?");
        }
    }
    struct jlist *r = result_list(c, 0, true);
    if (!r) {
        jv_drop(c, &parts);
        return fail_status(c);
    }
    jv rv = jv_list(r, false), items;
    if (!jv_truthy(v)) { /* jinja2 selects nothing from a false value */
        jv_drop(c, &parts);
        *out = rv;
        return JINJA_OK;
    }
    st = jv_iterate(c, at, v, &items);
    const struct jlist *l = st == JINJA_OK ? items.u.l : NULL;
    for (size_t i = 0; l && i < l->n && st == JINJA_OK; i++) {
        jv subject = jv_undef();
        bool pass = false;
        st = jinja_step(c, 1);
        if (st == JINJA_OK)
            st = by_attr ? attr_get(c, at, &l->items[i], &parts, NULL, &subject)
                         : (subject = jv_ref(&l->items[i]), JINJA_OK);
        if (st == JINJA_OK) {
            if (test >= 0)
                st = jinja_test_apply(c, at, test, &subject, a, next, &pass);
            else
                pass = jv_truthy(&subject);
        }
        jv_drop(c, &subject);
        if (st == JINJA_OK && pass == keep) {
            jv item = jv_ref(&l->items[i]);
            st = jlist_push(c, r, &item);
        }
    }
    if (l)
        jv_drop(c, &items);
    jv_drop(c, &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &rv);
        return st;
    }
    *out = rv;
    return JINJA_OK;
}

FILTER(jinja_f_select)
{
    return select_common(c, at, id, v, a, skip, false, true, out);
}

FILTER(jinja_f_reject)
{
    return select_common(c, at, id, v, a, skip, false, false, out);
}

FILTER(jinja_f_selectattr)
{
    return select_common(c, at, id, v, a, skip, true, true, out);
}

FILTER(jinja_f_rejectattr)
{
    return select_common(c, at, id, v, a, skip, true, false, out);
}

/* ------------------------------------------------------------- unique */

FILTER(jinja_f_unique)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    const bool sensitive = slots[0] && jv_truthy(slots[0]);
    jv items, parts;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    st = attr_parts(c, slots[1], &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &items);
        return st;
    }
    struct jlist *r = result_list(c, 0, true);
    struct jdict *seen = r ? jdict_new(c, 0) : NULL;
    jv rv = r ? jv_list(r, false) : jv_undef();
    jv sv = seen ? jv_dict(seen) : jv_undef();
    if (!seen)
        st = fail_status(c);
    const struct jlist *l = items.u.l;
    for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
        jv key;
        const jv *found = NULL;
        st = attr_get(c, at, &l->items[i], &parts, NULL, &key);
        if (st != JINJA_OK)
            break;
        if (!sensitive)
            st = ignore_case(c, &key);
        if (st == JINJA_OK)
            st = jv_check_hashable(c, &key);
        if (st == JINJA_OK)
            st = jdict_lookup(c, seen, &key, &found);
        if (st != JINJA_OK || found) {
            jv_drop(c, &key);
            continue;
        }
        jv none = jv_none(), item = jv_ref(&l->items[i]);
        st = jdict_set(c, seen, &key, &none);
        if (st == JINJA_OK)
            st = jlist_push(c, r, &item);
        else
            jv_drop(c, &item);
    }
    jv_drop(c, &sv);
    jv_drop(c, &items);
    jv_drop(c, &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &rv);
        return st;
    }
    *out = rv;
    return JINJA_OK;
}

/* ---------------------------------------------------- sort and kin */

/* Sort keys for items: attribute= ("a,b" several: a tuple of them),
 * lowercased unless sensitive. keys has room for l->n. */
static jinja_status sort_keys(struct jctx *c, const struct jnode *at,
                              const struct jlist *l, const jv *attr,
                              bool sensitive, jv *keys)
{
    /* attribute="age,name" is two lookups, each dotted */
    jv paths[8];
    size_t npaths = 0;
    jinja_status st = JINJA_OK;
    if (attr && attr->kind == JV_STR &&
        memchr(attr->u.s->s, ',', attr->u.s->len)) {
        const struct jstr *s = attr->u.s;
        size_t from = 0;
        for (size_t i = 0; i <= s->len && st == JINJA_OK; i++) {
            if (i < s->len && s->s[i] != ',')
                continue;
            if (npaths == 8) {
                st = jinja_fail(c, at, JINJA_E_RUNTIME,
                                "more than 8 sort attributes");
                break;
            }
            jv one;
            st = jv_str_make(c, s->s + from, i - from, &one);
            if (st == JINJA_OK)
                st = attr_parts(c, &one, &paths[npaths]);
            if (st == JINJA_OK)
                npaths++;
            jv_drop(c, &one);
            from = i + 1;
        }
    } else {
        st = attr_parts(c, attr, &paths[0]);
        if (st == JINJA_OK)
            npaths = 1;
    }
    /* keys[0..done) are set, a failed one included (as undefined) */
    size_t done = 0;
    for (; done < l->n && st == JINJA_OK; done++) {
        keys[done] = jv_undef();
        if (npaths == 1) {
            st = attr_get(c, at, &l->items[done], &paths[0], NULL, &keys[done]);
            if (st == JINJA_OK && !sensitive)
                st = ignore_case(c, &keys[done]);
            continue;
        }
        struct jlist *t = jlist_new(c, npaths);
        if (!t) {
            st = fail_status(c);
            continue;
        }
        keys[done] = jv_list(t, true);
        for (size_t k = 0; k < npaths && st == JINJA_OK; k++) {
            jv part;
            st = attr_get(c, at, &l->items[done], &paths[k], NULL, &part);
            if (st == JINJA_OK && !sensitive)
                st = ignore_case(c, &part);
            if (st == JINJA_OK)
                st = jlist_push(c, t, &part);
            else
                jv_drop(c, &part);
        }
    }
    for (size_t k = 0; k < npaths; k++)
        jv_drop(c, &paths[k]);
    if (st != JINJA_OK)
        for (size_t i = 0; i < done && i < l->n; i++)
            jv_drop(c, &keys[i]);
    return st;
}

/* items in the order of keys, as a new list; keys are dropped. */
static jinja_status sorted(struct jctx *c, const struct jnode *at,
                           const struct jlist *l, jv *keys, bool lower,
                           bool reverse, jv *out)
{
    size_t *order = jinja_alloc(c, (l->n ? l->n : 1) * sizeof *order);
    jinja_status st = order ? JINJA_OK : fail_status(c);
    if (st == JINJA_OK)
        st = jinja_sort(c, at, keys, l->n, lower, reverse, order);
    struct jlist *r = st == JINJA_OK ? jlist_new(c, l->n) : NULL;
    if (st == JINJA_OK && !r)
        st = fail_status(c);
    if (r) {
        r->h.depth = l->h.depth;
        for (size_t i = 0; i < l->n; i++)
            r->items[r->n++] = jv_ref(&l->items[order[i]]);
        *out = jv_list(r, false);
    }
    if (order)
        jinja_release(c, order, (l->n ? l->n : 1) * sizeof *order);
    for (size_t i = 0; i < l->n; i++)
        jv_drop(c, &keys[i]);
    return st;
}

static jinja_status sort_items(struct jctx *c, const struct jnode *at,
                               const jv *items, const jv *attr, bool sensitive,
                               bool reverse, jv *out)
{
    const struct jlist *l = items->u.l;
    jv *keys = jinja_alloc(c, (l->n ? l->n : 1) * sizeof *keys);
    if (!keys)
        return fail_status(c);
    jinja_status st = sort_keys(c, at, l, attr, sensitive, keys);
    if (st == JINJA_OK)
        st = sorted(c, at, l, keys, false, reverse, out);
    jinja_release(c, keys, (l->n ? l->n : 1) * sizeof *keys);
    return st;
}

FILTER(jinja_f_sort)
{
    static const char *const names[] = {"reverse", "case_sensitive",
                                        "attribute"};
    const jv *slots[3];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    jv items;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    st = sort_items(c, at, &items, slots[2], slots[1] && jv_truthy(slots[1]),
                    slots[0] && jv_truthy(slots[0]), out);
    jv_drop(c, &items);
    return st;
}

FILTER(jinja_f_dictsort)
{
    static const char *const names[] = {"case_sensitive", "by", "reverse"};
    const jv *slots[3];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    int pos = 0;
    if (slots[1]) {
        const char *by = slots[1]->kind == JV_STR ? slots[1]->u.s->s : "";
        pos = strcmp(by, "key") == 0 ? 0 : strcmp(by, "value") == 0 ? 1 : -1;
        if (pos < 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "You can only sort by either \"key\" or "
                              "\"value\"");
    }
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    if (v->kind != JV_DICT)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "'%s' object has no attribute 'items'",
                          jv_type_name(v));
    const struct jdict *d = v->u.d;
    struct jlist *pairs = jlist_new(c, d->n);
    if (!pairs)
        return fail_status(c);
    jv pv = jv_list(pairs, false);
    pairs->h.depth = d->h.depth + 1;
    for (size_t i = 0; i < d->n && st == JINJA_OK; i++) {
        struct jlist *t = jlist_new(c, 2);
        if (!t) {
            st = fail_status(c);
            break;
        }
        t->items[0] = jv_ref(&d->keys[i]);
        t->items[1] = jv_ref(&d->vals[i]);
        t->n = 2;
        t->h.depth = d->h.depth;
        pairs->items[pairs->n++] = jv_list(t, true);
    }
    jv by = jv_int(pos);
    if (st == JINJA_OK)
        st = sort_items(c, at, &pv, &by, slots[0] && jv_truthy(slots[0]),
                        slots[2] && jv_truthy(slots[2]), out);
    jv_drop(c, &pv);
    return st;
}

FILTER(jinja_f_sum)
{
    static const char *const names[] = {"attribute", "start"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    jv items, parts;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    st = attr_parts(c, slots[0], &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &items);
        return st;
    }
    jv total = slots[1] ? jv_ref(slots[1]) : jv_int(0);
    const struct jlist *l = items.u.l;
    for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
        jv item, next;
        st = attr_get(c, at, &l->items[i], &parts, NULL, &item);
        if (st != JINJA_OK)
            break;
        st = jinja_binary(c, at, JOP_ADD, &total, &item, &next);
        jv_drop(c, &item);
        if (st == JINJA_OK) {
            jv_drop(c, &total);
            total = next;
        }
    }
    jv_drop(c, &items);
    jv_drop(c, &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &total);
        return st;
    }
    *out = total;
    return JINJA_OK;
}

static jinja_status min_max(struct jctx *c, const struct jnode *at, int id,
                            const jv *v, struct jargs *a, size_t skip, bool max,
                            jv *out)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    const jv *slots[2];
    jinja_status st = BIND(names, slots);
    if (st != JINJA_OK)
        return st;
    jv items, parts;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    const struct jlist *l = items.u.l;
    if (l->n == 0) {
        jv_drop(c, &items);
        *out = jv_undef_hint("No aggregated item, sequence was empty.");
        return JINJA_OK;
    }
    st = attr_parts(c, slots[1], &parts);
    if (st != JINJA_OK) {
        jv_drop(c, &items);
        return st;
    }
    const bool sensitive = slots[0] && jv_truthy(slots[0]);
    size_t best = 0;
    jv best_key = jv_undef();
    for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
        jv key;
        st = attr_get(c, at, &l->items[i], &parts, NULL, &key);
        if (st == JINJA_OK && !sensitive)
            st = ignore_case(c, &key);
        if (st != JINJA_OK)
            break;
        int cmp = 0;
        if (i)
            st = jv_order(c, at, &key, &best_key, "<", false, &cmp);
        if (st == JINJA_OK && (i == 0 || (max ? cmp == 1 : cmp == -1))) {
            jv_drop(c, &best_key);
            best_key = key;
            best = i;
        } else {
            jv_drop(c, &key);
        }
    }
    jv_drop(c, &best_key);
    if (st == JINJA_OK)
        *out = jv_ref(&l->items[best]);
    jv_drop(c, &items);
    jv_drop(c, &parts);
    return st;
}

FILTER(jinja_f_min)
{
    return min_max(c, at, id, v, a, skip, false, out);
}

FILTER(jinja_f_max)
{
    return min_max(c, at, id, v, a, skip, true, out);
}

/* ----------------------------------------------------- items, reverse */

FILTER(jinja_f_items)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_UNDEF) {
        struct jlist *r = result_list(c, 0, true);
        if (!r)
            return fail_status(c);
        *out = jv_list(r, false);
        return JINJA_OK;
    }
    if (v->kind != JV_DICT)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "Can only get item pairs from a mapping.");
    const struct jdict *d = v->u.d;
    struct jlist *r = result_list(c, d->n, true);
    if (!r)
        return fail_status(c);
    jv rv = jv_list(r, false);
    r->h.depth = d->h.depth + 1;
    for (size_t i = 0; i < d->n; i++) {
        struct jlist *t = jlist_new(c, 2);
        if (!t) {
            jv_drop(c, &rv);
            return fail_status(c);
        }
        t->items[0] = jv_ref(&d->keys[i]);
        t->items[1] = jv_ref(&d->vals[i]);
        t->n = 2;
        t->h.depth = d->h.depth;
        r->items[r->n++] = jv_list(t, true);
    }
    *out = rv;
    return JINJA_OK;
}

FILTER(jinja_f_reverse)
{
    jinja_status st = NO_ARGS();
    if (st != JINJA_OK)
        return st;
    if (v->kind == JV_STR) {
        jv none = jv_none(), step = jv_int(-1);
        return jinja_slice(c, at, v, &none, &none, &step, out);
    }
    if (v->kind != JV_LIST && v->kind != JV_TUPLE && v->kind != JV_DICT &&
        v->kind != JV_UNDEF)
        return jinja_fail(c, at, JINJA_E_RUNTIME, "argument must be iterable");
    /* reversed() where Python has it; a generator becomes a list */
    const bool iterator = v->kind == JV_LIST && v->u.l->flavor == JL_GENERATOR;
    jv items;
    st = jv_iterate(c, at, v, &items);
    if (st != JINJA_OK)
        return st;
    const struct jlist *l = items.u.l;
    struct jlist *r = result_list(c, l->n, false);
    if (!r) {
        jv_drop(c, &items);
        return fail_status(c);
    }
    r->flavor = iterator ? JL_PLAIN : JL_REVERSED;
    r->h.depth = l->h.depth;
    for (size_t i = l->n; i-- > 0;)
        r->items[r->n++] = jv_ref(&l->items[i]);
    jv_drop(c, &items);
    *out = jv_list(r, false);
    return JINJA_OK;
}
