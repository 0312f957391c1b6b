/*
 * jinja_json.c - JSON in and out: a render's context (cJSON) as values,
 * and tojson as transformers defines it, json.dumps() with its exact
 * layout: ", " and ": " by default, "," and newlines with an indent,
 * floats as Python's repr(), NaN and Infinity as Python writes them,
 * non-ASCII raw or as \uXXXX (surrogate pairs beyond the BMP).
 */
#include "jinja_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- in */

static jinja_status from_json(struct jctx *c, const cJSON *j, size_t depth,
                              jv *out)
{
    if (depth > c->max_depth)
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "context nested deeper than max_depth (%zu)",
                          c->max_depth);
    if (cJSON_IsNull(j)) {
        *out = jv_none();
    } else if (cJSON_IsBool(j)) {
        *out = jv_bool(cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        /* JSON does not say int or float; Python's json would have read
         * "1" as an int, and cJSON keeps no text: an integral value that
         * a double holds exactly is taken for an int */
        const double f = j->valuedouble;
        if (f == trunc(f) && fabs(f) <= 9007199254740992.0)
            *out = jv_int((int64_t)f);
        else
            *out = jv_float(f);
    } else if (cJSON_IsString(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        return jv_str_make(c, s, strlen(s), out);
    } else if (cJSON_IsArray(j)) {
        size_t n = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            n++;
        struct jlist *l = jlist_new(c, n);
        if (!l)
            return c->status;
        jv lv = jv_list(l, false);
        for (const cJSON *e = j->child; e; e = e->next) {
            jv item;
            jinja_status st = from_json(c, e, depth + 1, &item);
            if (st == JINJA_OK)
                st = jlist_push(c, l, &item);
            if (st != JINJA_OK) {
                jv_drop(c, &lv);
                return st;
            }
        }
        *out = lv;
    } else if (cJSON_IsObject(j)) {
        size_t n = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            n++;
        struct jdict *d = jdict_new(c, n);
        if (!d)
            return c->status;
        jv dv = jv_dict(d);
        for (const cJSON *e = j->child; e; e = e->next) {
            jv k, v;
            const char *name = e->string ? e->string : "";
            jinja_status st = jv_str_make(c, name, strlen(name), &k);
            if (st != JINJA_OK) {
                jv_drop(c, &dv);
                return st;
            }
            st = from_json(c, e, depth + 1, &v);
            if (st != JINJA_OK) {
                jv_drop(c, &k);
                jv_drop(c, &dv);
                return st;
            }
            st = jdict_set(c, d, &k, &v);
            if (st != JINJA_OK) {
                jv_drop(c, &dv);
                return st;
            }
        }
        *out = dv;
    } else {
        return jinja_fail(c, NULL, JINJA_E_RUNTIME,
                          "the context holds a value that is not JSON");
    }
    return JINJA_OK;
}

jinja_status jinja_from_json(struct jctx *c, const cJSON *j, jv *out)
{
    *out = jv_undef();
    return from_json(c, j, 1, out);
}

/* --------------------------------------------------------------- out */

static jinja_status dump_string(struct jctx *c, struct jbuf *b, const char *s,
                                size_t len, bool ascii)
{
    jinja_status st = jbuf_put(c, b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < len && st == JINJA_OK;) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(s, len, i, &n);
        char esc[16];
        const char *e = NULL;
        switch (cp) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (cp < 0x20 || (ascii && cp == 0x7f)) {
                snprintf(esc, sizeof esc, "\\u%04" PRIx32, cp);
                e = esc;
            } else if (ascii && cp >= 0x80) {
                /* a byte that is not UTF-8 has no code point: U+FFFD */
                const uint32_t u = n == 1 ? 0xfffd : cp;
                if (u >= 0x10000) {
                    const uint32_t v = u - 0x10000;
                    snprintf(esc, sizeof esc, "\\u%04" PRIx32 "\\u%04" PRIx32,
                             0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                } else {
                    snprintf(esc, sizeof esc, "\\u%04" PRIx32, u);
                }
                e = esc;
            }
        }
        if (e) {
            st = jbuf_put(c, b, s + i - run, run);
            if (st == JINJA_OK)
                st = jbuf_puts(c, b, e);
            run = 0;
        } else {
            run += n;
        }
        i += n;
    }
    if (st == JINJA_OK)
        st = jbuf_put(c, b, s + len - run, run);
    return st == JINJA_OK ? jbuf_put(c, b, "\"", 1) : st;
}

static jinja_status dump_float(struct jctx *c, struct jbuf *b, double f)
{
    if (isnan(f))
        return jbuf_puts(c, b, "NaN");
    if (isinf(f))
        return jbuf_puts(c, b, f < 0 ? "-Infinity" : "Infinity");
    char num[32];
    return jbuf_put(c, b, num, jinja_format_float(f, num));
}

static jinja_status newline(struct jctx *c, struct jbuf *b,
                            const struct jinja_dumps *o, size_t level)
{
    jinja_status st = jbuf_put(c, b, "\n", 1);
    for (size_t i = 0; i < level && st == JINJA_OK; i++)
        st = jbuf_put(c, b, o->indent, o->indent_len);
    return st;
}

/* A key as json.dumps turns it into a string. */
static jinja_status dump_key(struct jctx *c, struct jbuf *b, const jv *k,
                             const struct jinja_dumps *o)
{
    char num[32];
    switch (k->kind) {
    case JV_STR:
        return dump_string(c, b, k->u.s->s, k->u.s->len, o->ensure_ascii);
    case JV_INT:
        snprintf(num, sizeof num, "\"%" PRId64 "\"", k->u.i);
        return jbuf_puts(c, b, num);
    case JV_BOOL: return jbuf_puts(c, b, k->u.b ? "\"true\"" : "\"false\"");
    case JV_NONE: return jbuf_puts(c, b, "\"null\"");
    case JV_FLOAT: {
        jinja_status st = jbuf_put(c, b, "\"", 1);
        if (st == JINJA_OK)
            st = dump_float(c, b, k->u.f);
        return st == JINJA_OK ? jbuf_put(c, b, "\"", 1) : st;
    }
    default:
        return jinja_fail(c, NULL, JINJA_E_RUNTIME,
                          "keys must be str, int, float, bool or None, not "
                          "%s",
                          jv_type_name(k));
    }
}

static jinja_status dump(struct jctx *c, struct jbuf *b, const jv *v,
                         const struct jinja_dumps *o, size_t level);

static jinja_status dump_dict(struct jctx *c, struct jbuf *b,
                              const struct jdict *d,
                              const struct jinja_dumps *o, size_t level)
{
    if (d->n == 0)
        return jbuf_put(c, b, "{}", 2);
    size_t *order = NULL;
    jinja_status st = JINJA_OK;
    if (o->sort_keys) {
        order = jinja_alloc(c, d->n * sizeof *order);
        if (!order)
            return c->status;
        st = jinja_sort(c, NULL, d->keys, d->n, false, false, order);
    }
    if (st == JINJA_OK)
        st = jbuf_put(c, b, "{", 1);
    if (st == JINJA_OK && o->indent)
        st = newline(c, b, o, level + 1);
    for (size_t i = 0; i < d->n && st == JINJA_OK; i++) {
        const size_t at = order ? order[i] : i;
        if (i) {
            st = jbuf_put(c, b, o->item_sep, o->item_sep_len);
            if (st == JINJA_OK && o->indent)
                st = newline(c, b, o, level + 1);
        }
        if (st == JINJA_OK)
            st = dump_key(c, b, &d->keys[at], o);
        if (st == JINJA_OK)
            st = jbuf_put(c, b, o->key_sep, o->key_sep_len);
        if (st == JINJA_OK)
            st = dump(c, b, &d->vals[at], o, level + 1);
    }
    jinja_release(c, order, order ? d->n * sizeof *order : 0);
    if (st == JINJA_OK && o->indent)
        st = newline(c, b, o, level);
    return st == JINJA_OK ? jbuf_put(c, b, "}", 1) : st;
}

static jinja_status dump(struct jctx *c, struct jbuf *b, const jv *v,
                         const struct jinja_dumps *o, size_t level)
{
    char num[32];
    jinja_status st = jinja_step(c, 1);
    if (st != JINJA_OK)
        return st;
    switch (v->kind) {
    case JV_NONE: return jbuf_puts(c, b, "null");
    case JV_BOOL: return jbuf_puts(c, b, v->u.b ? "true" : "false");
    case JV_INT:
        snprintf(num, sizeof num, "%" PRId64, v->u.i);
        return jbuf_puts(c, b, num);
    case JV_FLOAT: return dump_float(c, b, v->u.f);
    case JV_STR:
        return dump_string(c, b, v->u.s->s, v->u.s->len, o->ensure_ascii);
    case JV_LIST:
    case JV_TUPLE: {
        const struct jlist *l = v->u.l;
        if (l->flavor != JL_PLAIN) /* a generator, a view, a range */
            return jinja_fail(c, NULL, JINJA_E_RUNTIME,
                              "Object of type %s is not JSON serializable",
                              jv_type_name(v));
        if (l->n == 0)
            return jbuf_put(c, b, "[]", 2);
        st = jbuf_put(c, b, "[", 1);
        if (st == JINJA_OK && o->indent)
            st = newline(c, b, o, level + 1);
        for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
            if (i) {
                st = jbuf_put(c, b, o->item_sep, o->item_sep_len);
                if (st == JINJA_OK && o->indent)
                    st = newline(c, b, o, level + 1);
            }
            if (st == JINJA_OK)
                st = dump(c, b, &l->items[i], o, level + 1);
        }
        if (st == JINJA_OK && o->indent)
            st = newline(c, b, o, level);
        return st == JINJA_OK ? jbuf_put(c, b, "]", 1) : st;
    }
    case JV_DICT: return dump_dict(c, b, v->u.d, o, level);
    default:
        return jinja_fail(c, NULL, JINJA_E_RUNTIME,
                          "Object of type %s is not JSON serializable",
                          jv_type_name(v));
    }
}

jinja_status jinja_dumps(struct jctx *c, struct jbuf *b, const jv *v,
                         const struct jinja_dumps *o)
{
    return dump(c, b, v, o, 0);
}
