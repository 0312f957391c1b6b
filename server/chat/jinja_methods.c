/*
 * jinja_methods.c - the methods of Python's values that templates call:
 * str's (split, strip, startswith, replace, ...), dict's (items, keys,
 * values, get) and the loop's cycle(). Python's other methods are known
 * by name, so that "x".zfill is a method as in jinja2, but calling one
 * is an error naming it; those that would change a value (list.append,
 * dict.update) are refused as jinja2's immutable sandbox refuses them.
 */
#include "jinja_internal.h"

#include <string.h>

struct method {
    const char *name;
    int id;
};

static const struct method str_methods[] = {{"startswith", JM_STARTSWITH},
                                            {"endswith", JM_ENDSWITH},
                                            {"split", JM_SPLIT},
                                            {"rsplit", JM_RSPLIT},
                                            {"splitlines", JM_SPLITLINES},
                                            {"strip", JM_STRIP},
                                            {"lstrip", JM_LSTRIP},
                                            {"rstrip", JM_RSTRIP},
                                            {"upper", JM_UPPER},
                                            {"lower", JM_LOWER},
                                            {"replace", JM_REPLACE},
                                            {"title", JM_TITLE},
                                            {"capitalize", JM_CAPITALIZE},
                                            {"find", JM_FIND},
                                            {"rfind", JM_RFIND},
                                            {"count", JM_COUNT},
                                            {"join", JM_JOIN},
                                            {"removeprefix", JM_REMOVEPREFIX},
                                            {"removesuffix", JM_REMOVESUFFIX},
                                            {"isdigit", JM_ISDIGIT},
                                            {"isalpha", JM_ISALPHA},
                                            {"isalnum", JM_ISALNUM},
                                            {"isspace", JM_ISSPACE},
                                            {"isupper", JM_ISUPPER},
                                            {"islower", JM_ISLOWER},
                                            {"casefold", JM_UNSUPPORTED},
                                            {"center", JM_UNSUPPORTED},
                                            {"encode", JM_UNSUPPORTED},
                                            {"expandtabs", JM_UNSUPPORTED},
                                            {"format", JM_UNSUPPORTED},
                                            {"format_map", JM_UNSUPPORTED},
                                            {"index", JM_UNSUPPORTED},
                                            {"isascii", JM_UNSUPPORTED},
                                            {"isdecimal", JM_UNSUPPORTED},
                                            {"isidentifier", JM_UNSUPPORTED},
                                            {"isnumeric", JM_UNSUPPORTED},
                                            {"isprintable", JM_UNSUPPORTED},
                                            {"istitle", JM_UNSUPPORTED},
                                            {"ljust", JM_UNSUPPORTED},
                                            {"maketrans", JM_UNSUPPORTED},
                                            {"partition", JM_UNSUPPORTED},
                                            {"rindex", JM_UNSUPPORTED},
                                            {"rjust", JM_UNSUPPORTED},
                                            {"rpartition", JM_UNSUPPORTED},
                                            {"swapcase", JM_UNSUPPORTED},
                                            {"translate", JM_UNSUPPORTED},
                                            {"zfill", JM_UNSUPPORTED},
                                            {NULL, 0}};

static const struct method dict_methods[] = {
    {"items", JM_ITEMS},          {"keys", JM_KEYS},
    {"values", JM_VALUES},        {"get", JM_GET},
    {"clear", JM_UNSAFE},         {"pop", JM_UNSAFE},
    {"popitem", JM_UNSAFE},       {"setdefault", JM_UNSAFE},
    {"update", JM_UNSAFE},        {"copy", JM_UNSUPPORTED},
    {"fromkeys", JM_UNSUPPORTED}, {NULL, 0}};

static const struct method list_methods[] = {
    {"append", JM_UNSAFE},    {"clear", JM_UNSAFE},
    {"extend", JM_UNSAFE},    {"insert", JM_UNSAFE},
    {"pop", JM_UNSAFE},       {"remove", JM_UNSAFE},
    {"reverse", JM_UNSAFE},   {"sort", JM_UNSAFE},
    {"copy", JM_UNSUPPORTED}, {"count", JM_LIST_COUNT},
    {"index", JM_LIST_INDEX}, {NULL, 0}};

static const struct method tuple_methods[] = {
    {"count", JM_LIST_COUNT}, {"index", JM_LIST_INDEX}, {NULL, 0}};

int jinja_method_find(const jv *v, const char *name, size_t len)
{
    const struct method *table = NULL;
    switch (v->kind) {
    case JV_STR: table = str_methods; break;
    case JV_DICT: table = dict_methods; break;
    case JV_LIST:
        table = v->u.l->flavor == JL_PLAIN ? list_methods : NULL;
        break;
    case JV_TUPLE: table = tuple_methods; break;
    default: break;
    }
    for (; table && table->name; table++)
        if (strlen(table->name) == len && memcmp(table->name, name, len) == 0)
            return table->id;
    return JM_NONE;
}

/* ------------------------------------------------------------ helpers */

static jinja_status want_str(struct jctx *c, const struct jnode *at,
                             const jv *v, const char *what,
                             const struct jstr **out)
{
    if (v->kind == JV_STR) {
        *out = v->u.s;
        return JINJA_OK;
    }
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    return jinja_fail(c, at, JINJA_E_RUNTIME, "%s must be str, not %s", what,
                      jv_type_name(v));
}

static jinja_status want_int(struct jctx *c, const struct jnode *at,
                             const jv *v, const char *what, int64_t *out)
{
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
        *out = v->kind == JV_BOOL ? v->u.b : v->u.i;
        return JINJA_OK;
    }
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "%s: '%s' object cannot be interpreted as an integer",
                      what, jv_type_name(v));
}

/* The byte range of s[start:end] (Python's str.find() bounds, by code
 * point) and the code point index it starts at; false when start is
 * past the end. */
static jinja_status bounds(struct jctx *c, const struct jnode *at,
                           const struct jstr *s, const jv *start, const jv *end,
                           size_t *from, size_t *to, int64_t *first, bool *ok)
{
    jinja_status st = jinja_step_bytes(c, s->len);
    if (st != JINJA_OK)
        return st;
    const int64_t n = (int64_t)jinja_utf8_count(s->s, s->len);
    int64_t a = 0, b = n;
    if (start && start->kind != JV_NONE)
        st = want_int(c, at, start, "slice index", &a);
    if (st == JINJA_OK && end && end->kind != JV_NONE)
        st = want_int(c, at, end, "slice index", &b);
    if (st != JINJA_OK)
        return st;
    if (a < 0 && (a += n) < 0)
        a = 0;
    if (b > n)
        b = n;
    else if (b < 0 && (b += n) < 0)
        b = 0;
    *ok = a <= n;
    if (b < a)
        b = a;
    *first = a;
    *from = jinja_utf8_offset(s->s, s->len, (size_t)a);
    *to = *from +
          jinja_utf8_offset(s->s + *from, s->len - *from, (size_t)(b - a));
    return JINJA_OK;
}

/* startswith / endswith: prefix a str or a tuple of them. */
static jinja_status affix(struct jctx *c, const struct jnode *at,
                          const struct jstr *s, const jv *const *slots,
                          bool end, jv *out)
{
    size_t from, to;
    int64_t first;
    bool ok;
    jinja_status st =
        bounds(c, at, s, slots[1], slots[2], &from, &to, &first, &ok);
    if (st != JINJA_OK)
        return st;
    const jv *p = slots[0];
    const jv *items = p;
    size_t n = 1;
    if (p->kind == JV_TUPLE) {
        items = p->u.l->items;
        n = p->u.l->n;
    } else if (p->kind != JV_STR) {
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "%s first arg must be str or a tuple of str, not %s",
                          end ? "endswith" : "startswith", jv_type_name(p));
    }
    bool hit = false;
    for (size_t i = 0; i < n && !hit && ok; i++) {
        const struct jstr *x;
        st = want_str(c, at, &items[i], "a tuple item", &x);
        if (st != JINJA_OK)
            return st;
        st = jinja_step_bytes(c, x->len);
        if (st != JINJA_OK)
            return st;
        if (x->len <= to - from)
            hit = memcmp(s->s + (end ? to - x->len : from), x->s, x->len) == 0;
    }
    *out = jv_bool(hit);
    return JINJA_OK;
}

/* find, rfind and count over s[start:end]. */
static jinja_status search(struct jctx *c, const struct jnode *at,
                           const struct jstr *s, const jv *const *slots, int id,
                           jv *out)
{
    const struct jstr *sub;
    jinja_status st = want_str(c, at, slots[0], "substring", &sub);
    size_t from, to;
    int64_t first;
    bool ok;
    if (st == JINJA_OK)
        st = bounds(c, at, s, slots[1], slots[2], &from, &to, &first, &ok);
    if (st != JINJA_OK)
        return st;
    if (!ok) {
        *out = jv_int(id == JM_COUNT ? 0 : -1);
        return JINJA_OK;
    }
    int64_t count = 0, last = -1, firsthit = -1;
    for (size_t p = from; st == JINJA_OK;) {
        int64_t hit;
        st = jinja_find(c, s->s, to, sub->s, sub->len, p, &hit);
        if (st != JINJA_OK || hit < 0)
            break;
        count++;
        if (firsthit < 0)
            firsthit = hit;
        last = hit;
        if (id == JM_FIND)
            break;
        if (sub->len) {
            p = (size_t)hit + sub->len;
        } else {
            if ((size_t)hit >= to)
                break;
            size_t n;
            jinja_utf8_next(s->s, to, (size_t)hit, &n);
            p = (size_t)hit + n;
        }
    }
    if (st != JINJA_OK)
        return st;
    if (id == JM_COUNT) {
        *out = jv_int(count);
        return JINJA_OK;
    }
    const int64_t hit = id == JM_FIND ? firsthit : last;
    *out = jv_int(hit < 0 ? -1 : (int64_t)jinja_utf8_count(s->s, (size_t)hit));
    return JINJA_OK;
}

static jinja_status join(struct jctx *c, const struct jnode *at,
                         const struct jstr *sep, const jv *iterable, jv *out)
{
    jv items;
    jinja_status st = jv_iterate(c, at, iterable, &items);
    if (st != JINJA_OK)
        return st;
    struct jbuf b = {0};
    const struct jlist *l = items.u.l;
    for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
        if (l->items[i].kind != JV_STR) {
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "sequence item %zu: expected str instance, %s "
                            "found",
                            i, jv_type_name(&l->items[i]));
            break;
        }
        if (i)
            st = jbuf_put(c, &b, sep->s, sep->len);
        if (st == JINJA_OK)
            st = jbuf_put(c, &b, l->items[i].u.s->s, l->items[i].u.s->len);
    }
    jv_drop(c, &items);
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

static bool all_cp(const struct jstr *s, int id)
{
    if (s->len == 0)
        return false;
    bool cased = false;
    for (size_t i = 0; i < s->len;) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(s->s, s->len, i, &n);
        i += n;
        const bool digit = cp >= '0' && cp <= '9';
        const bool alpha =
            (cp < 0x80 && ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')) ||
            (cp >= 0x80 &&
             (jinja_is_cased_upper(cp) || jinja_is_cased_lower(cp)));
        switch (id) {
        case JM_ISDIGIT:
            if (!digit)
                return false;
            break;
        case JM_ISALPHA:
            if (!alpha)
                return false;
            break;
        case JM_ISALNUM:
            if (!alpha && !digit)
                return false;
            break;
        case JM_ISSPACE:
            if (!jinja_is_space(cp))
                return false;
            break;
        case JM_ISUPPER:
            if (jinja_is_cased_lower(cp) && !jinja_is_cased_upper(cp))
                return false;
            cased = cased || jinja_is_cased_upper(cp);
            break;
        default: /* JM_ISLOWER */
            if (jinja_is_cased_upper(cp) && !jinja_is_cased_lower(cp))
                return false;
            cased = cased || jinja_is_cased_lower(cp);
        }
    }
    return id == JM_ISUPPER || id == JM_ISLOWER ? cased : true;
}

/* dict.items(), keys(), values(): views, as lists of their flavor. */
static jinja_status view(struct jctx *c, const struct jdict *d, int id, jv *out)
{
    struct jlist *l = jlist_new(c, d->n);
    if (!l)
        return c->status;
    jv lv = jv_list(l, false);
    l->flavor = id == JM_ITEMS ? JL_ITEMS : id == JM_KEYS ? JL_KEYS : JL_VALUES;
    l->h.depth = d->h.depth + (id == JM_ITEMS);
    for (size_t i = 0; i < d->n; i++) {
        if (id != JM_ITEMS) {
            l->items[l->n++] =
                jv_ref(id == JM_KEYS ? &d->keys[i] : &d->vals[i]);
            continue;
        }
        struct jlist *pair = jlist_new(c, 2);
        if (!pair) {
            jv_drop(c, &lv);
            return c->status;
        }
        pair->items[0] = jv_ref(&d->keys[i]);
        pair->items[1] = jv_ref(&d->vals[i]);
        pair->n = 2;
        pair->h.depth = d->h.depth;
        l->items[l->n++] = jv_list(pair, true);
    }
    *out = lv;
    return JINJA_OK;
}

/* ---------------------------------------------------------------- call */

static jinja_status call_str(struct jctx *c, const struct jnode *at,
                             const struct jstr *s, int id, const char *name,
                             struct jargs *a, jv *out)
{
    static const char *const affix_names[] = {"prefix", "start", "end"};
    static const char *const search_names[] = {"sub", "start", "end"};
    static const char *const split_names[] = {"sep", "maxsplit"};
    static const char *const strip_names[] = {"chars"};
    static const char *const replace_names[] = {"old", "new", "count"};
    static const char *const one_names[] = {"x"};
    static const char *const lines_names[] = {"keepends"};
    const jv *slots[3] = {NULL, NULL, NULL};
    jinja_status st = JINJA_OK;
    const struct jstr *x = NULL, *y = NULL;
    switch (id) {
    case JM_STARTSWITH:
    case JM_ENDSWITH:
        st = jargs_bind(c, at, name, a, 0, affix_names, 3, slots);
        if (st == JINJA_OK && !slots[0])
            st =
                jinja_fail(c, at, JINJA_E_RUNTIME, "%s() takes a prefix", name);
        return st == JINJA_OK ? affix(c, at, s, slots, id == JM_ENDSWITH, out)
                              : st;
    case JM_FIND:
    case JM_RFIND:
    case JM_COUNT:
        st = jargs_bind(c, at, name, a, 0, search_names, 3, slots);
        if (st == JINJA_OK && !slots[0])
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "%s() takes at least 1 argument (0 given)", name);
        return st == JINJA_OK ? search(c, at, s, slots, id, out) : st;
    case JM_SPLIT:
    case JM_RSPLIT: {
        int64_t maxsplit = -1;
        st = jargs_bind(c, at, name, a, 0, split_names, 2, slots);
        if (st == JINJA_OK && slots[0] && slots[0]->kind != JV_NONE)
            st = want_str(c, at, slots[0], "sep", &x);
        if (st == JINJA_OK && slots[1])
            st = want_int(c, at, slots[1], "maxsplit", &maxsplit);
        return st == JINJA_OK
                   ? jinja_split(c, at, s, x, maxsplit, id == JM_RSPLIT, out)
                   : st;
    }
    case JM_SPLITLINES:
        st = jargs_bind(c, at, name, a, 0, lines_names, 1, slots);
        return st == JINJA_OK ? jinja_splitlines(
                                    c, s, slots[0] && jv_truthy(slots[0]), out)
                              : st;
    case JM_STRIP:
    case JM_LSTRIP:
    case JM_RSTRIP:
        st = jargs_bind(c, at, name, a, 0, strip_names, 1, slots);
        if (st == JINJA_OK && slots[0] && slots[0]->kind != JV_NONE)
            st = want_str(c, at, slots[0], "chars", &x);
        return st == JINJA_OK ? jinja_strip(c, s, x,
                                            id == JM_STRIP    ? 3
                                            : id == JM_LSTRIP ? 1
                                                              : 2,
                                            out)
                              : st;
    case JM_UPPER:
    case JM_LOWER:
    case JM_TITLE:
    case JM_CAPITALIZE:
        st = jargs_bind(c, at, name, a, 0, NULL, 0, slots);
        return st == JINJA_OK ? jinja_recase(c, s,
                                             id == JM_LOWER   ? 0
                                             : id == JM_UPPER ? 1
                                             : id == JM_TITLE ? 2
                                                              : 3,
                                             out)
                              : st;
    case JM_REPLACE: {
        int64_t count = -1;
        st = jargs_bind(c, at, name, a, 0, replace_names, 3, slots);
        if (st == JINJA_OK && (!slots[0] || !slots[1]))
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "replace() takes at least 2 arguments");
        if (st == JINJA_OK)
            st = want_str(c, at, slots[0], "old", &x);
        if (st == JINJA_OK)
            st = want_str(c, at, slots[1], "new", &y);
        if (st == JINJA_OK && slots[2])
            st = want_int(c, at, slots[2], "count", &count);
        return st == JINJA_OK ? jinja_replace(c, s, x, y, count, out) : st;
    }
    case JM_JOIN:
        st = jargs_bind(c, at, name, a, 0, one_names, 1, slots);
        if (st == JINJA_OK && !slots[0])
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "join() takes exactly one argument (0 given)");
        return st == JINJA_OK ? join(c, at, s, slots[0], out) : st;
    case JM_REMOVEPREFIX:
    case JM_REMOVESUFFIX: {
        st = jargs_bind(c, at, name, a, 0, one_names, 1, slots);
        if (st == JINJA_OK && !slots[0])
            st = jinja_fail(c, at, JINJA_E_RUNTIME,
                            "%s() takes exactly one argument (0 given)", name);
        if (st == JINJA_OK)
            st = want_str(c, at, slots[0], name, &x);
        if (st != JINJA_OK)
            return st;
        st = jinja_step_bytes(c, x->len);
        if (st != JINJA_OK)
            return st;
        const bool pre = id == JM_REMOVEPREFIX;
        const bool hit =
            x->len <= s->len &&
            memcmp(s->s + (pre ? 0 : s->len - x->len), x->s, x->len) == 0;
        const size_t cut = hit ? x->len : 0;
        return jv_str_make(c, s->s + (pre ? cut : 0), s->len - cut, out);
    }
    default: /* the is... predicates */
        st = jargs_bind(c, at, name, a, 0, NULL, 0, slots);
        if (st == JINJA_OK)
            st = jinja_step_bytes(c, s->len);
        if (st == JINJA_OK)
            *out = jv_bool(all_cp(s, id));
        return st;
    }
}

jinja_status jinja_method_call(struct jctx *c, const struct jnode *at,
                               const jv *self, int id, const struct jstr *name,
                               struct jargs *a, jv *out)
{
    *out = jv_undef();
    if (id == JM_UNSUPPORTED)
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "unsupported method '%s' of %s", name->s,
                          jv_type_name(self));
    if (self->kind == JV_STR) {
        const jinja_status st = call_str(c, at, self->u.s, id, name->s, a, out);
        /* Markup's own methods give Markup */
        if (st == JINJA_OK && jv_is_markup(self) && out->kind == JV_STR &&
            (id == JM_UPPER || id == JM_LOWER || id == JM_STRIP ||
             id == JM_LSTRIP || id == JM_RSTRIP || id == JM_TITLE ||
             id == JM_CAPITALIZE || id == JM_REPLACE))
            out->aux = JV_MARKUP;
        if (st == JINJA_OK && jv_is_markup(self) && out->kind == JV_LIST &&
            (id == JM_SPLIT || id == JM_RSPLIT || id == JM_SPLITLINES))
            for (size_t i = 0; i < out->u.l->n; i++)
                out->u.l->items[i].aux = JV_MARKUP;
        return st;
    }
    if (self->kind == JV_LIST || self->kind == JV_TUPLE) {
        /* list.count(x), list.index(x): by Python's == */
        if (a->n != 1 || a->npos != 1)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "%s() takes exactly one argument", name->s);
        const struct jlist *l = self->u.l;
        int64_t count = 0, first = -1;
        for (size_t i = 0; i < l->n; i++) {
            bool eq;
            jinja_status st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jv_equal(c, &l->items[i], &a->v[0], &eq);
            if (st != JINJA_OK)
                return st;
            if (eq && first < 0)
                first = (int64_t)i;
            count += eq;
            if (eq && id == JM_LIST_INDEX)
                break;
        }
        if (id == JM_LIST_INDEX && first < 0)
            return jinja_fail(c, at, JINJA_E_RUNTIME, "value is not in %s",
                              jv_type_name(self));
        *out = jv_int(id == JM_LIST_COUNT ? count : first);
        return JINJA_OK;
    }
    if (self->kind == JV_LOOP) {
        /* loop.cycle(a, b, ...) */
        if (a->n == 0 || a->npos != a->n)
            return jinja_fail(c, at, JINJA_E_RUNTIME,
                              "loop.cycle() takes values, by position, and "
                              "no fewer than one");
        *out = jv_ref(&a->v[self->u.loop->index0 % a->n]);
        return JINJA_OK;
    }
    /* a dict's */
    const struct jdict *d = self->u.d;
    static const char *const get_names[] = {"key", "default"};
    const jv *slots[2];
    jinja_status st = jargs_bind(c, at, name->s, a, 0, get_names,
                                 id == JM_GET ? 2 : 0, slots);
    if (st != JINJA_OK)
        return st;
    if (id != JM_GET)
        return view(c, d, id, out);
    if (!slots[0])
        return jinja_fail(c, at, JINJA_E_RUNTIME,
                          "get expected at least 1 argument, got 0");
    st = jv_check_hashable(c, slots[0]);
    const jv *found = NULL;
    if (st == JINJA_OK)
        st = jdict_lookup(c, d, slots[0], &found);
    if (st != JINJA_OK)
        return st;
    *out = found ? jv_ref(found) : slots[1] ? jv_ref(slots[1]) : jv_none();
    return JINJA_OK;
}
