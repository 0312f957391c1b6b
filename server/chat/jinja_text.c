/*
 * jinja_text.c - values as text, as Python writes them: str() for
 * {{ }} and ~ (None, True, 1.0, 1e-05, ['a', 1], {'a': None}), repr()
 * inside containers, and the buffers both are written into: the
 * render's output, capped by max_output, and captures that become
 * values, charged to max_bytes.
 */
#include "jinja_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- buffers */

jinja_status jbuf_put(struct jctx *c, struct jbuf *b, const char *s, size_t n)
{
    if (n == 0)
        return JINJA_OK;
    if (b->is_output && n > c->max_output - b->len)
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "output past max_output (%zu bytes)", c->max_output);
    if (n >= b->alloc - b->len) {
        if (n > SIZE_MAX / 4 - b->len)
            return jinja_fail(c, NULL, JINJA_E_LIMIT, "text too long");
        size_t alloc = b->alloc ? b->alloc : 64;
        while (alloc <= b->len + n)
            alloc *= 2;
        char *data;
        if (b->is_output) {
            data = realloc(b->data, alloc);
            if (!data)
                return jinja_fail(c, NULL, JINJA_E_NOMEM,
                                  "out of memory (%zu bytes of output)", alloc);
        } else {
            data = jinja_realloc(c, b->data, b->alloc, alloc);
            if (!data)
                return c->status;
        }
        b->data = data;
        b->alloc = alloc;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return JINJA_OK;
}

jinja_status jbuf_puts(struct jctx *c, struct jbuf *b, const char *s)
{
    return jbuf_put(c, b, s, strlen(s));
}

void jbuf_free(struct jctx *c, struct jbuf *b)
{
    if (b->is_output)
        free(b->data);
    else
        jinja_release(c, b->data, b->alloc);
    b->data = NULL;
    b->len = b->alloc = 0;
}

jinja_status jbuf_to_str(struct jctx *c, struct jbuf *b, jv *out)
{
    const jinja_status st = jv_str_make(c, b->data ? b->data : "", b->len, out);
    jbuf_free(c, b);
    return st;
}

/* ------------------------------------------------------------ floats */

size_t jinja_format_float(double f, char out[32])
{
    if (isnan(f))
        return (size_t)snprintf(out, 32, "nan");
    if (isinf(f))
        return (size_t)snprintf(out, 32, f < 0 ? "-inf" : "inf");
    if (f == 0)
        return (size_t)snprintf(out, 32, signbit(f) ? "-0.0" : "0.0");
    /* the fewest significant digits that read back as f */
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e is [-]d[.ddd]e[+-]xx: split into digits and decimal exponent */
    const bool neg = e[0] == '-';
    const char *p = e + neg;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    const int exp10 = (int)strtol(p + 1, NULL, 10);
    /* value = 0.d1d2... * 10^decpt */
    const int decpt = exp10 + 1;
    size_t len = 0;
    if (neg)
        out[len++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[len++] = '0';
            out[len++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[len++] = '0';
            memcpy(out + len, digits, nd);
            len += nd;
        } else if ((size_t)decpt >= nd) {
            memcpy(out + len, digits, nd);
            len += nd;
            for (size_t i = nd; i < (size_t)decpt; i++)
                out[len++] = '0';
            out[len++] = '.';
            out[len++] = '0';
        } else {
            memcpy(out + len, digits, (size_t)decpt);
            len += (size_t)decpt;
            out[len++] = '.';
            memcpy(out + len, digits + decpt, nd - (size_t)decpt);
            len += nd - (size_t)decpt;
        }
    } else {
        out[len++] = digits[0];
        if (nd > 1) {
            out[len++] = '.';
            memcpy(out + len, digits + 1, nd - 1);
            len += nd - 1;
        }
        len += (size_t)snprintf(out + len, 32 - len, "e%c%02d",
                                exp10 < 0 ? '-' : '+', abs(exp10));
    }
    out[len] = '\0';
    return len;
}

/* -------------------------------------------------------- str, repr */

static jinja_status write_str_repr(struct jctx *c, struct jbuf *b,
                                   const struct jstr *s)
{
    const bool has_single = memchr(s->s, '\'', s->len) != NULL;
    const bool has_double = memchr(s->s, '"', s->len) != NULL;
    const char quote = has_single && !has_double ? '"' : '\'';
    jinja_status st = jbuf_put(c, b, &quote, 1);
    size_t run = 0; /* bytes copied as they are, pending */
    for (size_t i = 0; i < s->len && st == JINJA_OK;) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(s->s, s->len, i, &n);
        char esc[16];
        const char *e = NULL;
        if (cp == (uint32_t)quote || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            esc[2] = '\0';
            e = esc;
        } else if (cp == '\n') {
            e = "\\n";
        } else if (cp == '\r') {
            e = "\\r";
        } else if (cp == '\t') {
            e = "\\t";
        } else if (n == 1 && cp >= 0x80) {
            /* a byte that is not UTF-8 */
            snprintf(esc, sizeof esc, "\\x%02x", cp);
            e = esc;
        } else if (!jinja_is_printable(cp)) {
            if (cp <= 0xff)
                snprintf(esc, sizeof esc, "\\x%02x", cp);
            else if (cp <= 0xffff)
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            else
                snprintf(esc, sizeof esc, "\\U%08x", cp);
            e = esc;
        }
        if (e) {
            st = jbuf_put(c, b, s->s + i - run, run);
            if (st == JINJA_OK)
                st = jbuf_puts(c, b, e);
            run = 0;
        } else {
            run += n;
        }
        i += n;
    }
    if (st == JINJA_OK)
        st = jbuf_put(c, b, s->s + s->len - run, run);
    if (st == JINJA_OK)
        st = jbuf_put(c, b, &quote, 1);
    return st;
}

static jinja_status write_dict_repr(struct jctx *c, struct jbuf *b,
                                    const struct jdict *d)
{
    jinja_status st = jbuf_put(c, b, "{", 1);
    for (size_t i = 0; i < d->n && st == JINJA_OK; i++) {
        if (i)
            st = jbuf_put(c, b, ", ", 2);
        if (st == JINJA_OK)
            st = jinja_step(c, 1);
        if (st == JINJA_OK)
            st = jv_write_repr(c, b, &d->keys[i]);
        if (st == JINJA_OK)
            st = jbuf_put(c, b, ": ", 2);
        if (st == JINJA_OK)
            st = jv_write_repr(c, b, &d->vals[i]);
    }
    return st == JINJA_OK ? jbuf_put(c, b, "}", 1) : st;
}

/* A range, a dict view or an iterator as Python prints it (an
 * iterator's address is not Python's: none could be). */
static jinja_status write_flavored(struct jctx *c, struct jbuf *b, const jv *v)
{
    const struct jlist *l = v->u.l;
    char text[96];
    switch (l->flavor) {
    case JL_RANGE:
        if (l->range[2] == 1)
            snprintf(text, sizeof text, "range(%" PRId64 ", %" PRId64 ")",
                     l->range[0], l->range[1]);
        else
            snprintf(text, sizeof text,
                     "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")",
                     l->range[0], l->range[1], l->range[2]);
        return jbuf_puts(c, b, text);
    case JL_ITEMS:
    case JL_KEYS:
    case JL_VALUES: {
        jinja_status st = jbuf_puts(c, b, jv_type_name(v));
        if (st == JINJA_OK)
            st = jbuf_put(c, b, "([", 2);
        for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
            if (i)
                st = jbuf_put(c, b, ", ", 2);
            if (st == JINJA_OK)
                st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jv_write_repr(c, b, &l->items[i]);
        }
        return st == JINJA_OK ? jbuf_put(c, b, "])", 2) : st;
    }
    default:
        snprintf(text, sizeof text, "<%s object>", jv_type_name(v));
        return jbuf_puts(c, b, text);
    }
}

jinja_status jv_write_repr(struct jctx *c, struct jbuf *b, const jv *v)
{
    switch (v->kind) {
    case JV_UNDEF: return jbuf_puts(c, b, "Undefined");
    case JV_STR:
        if (jv_is_markup(v)) {
            jinja_status st = jbuf_puts(c, b, "Markup(");
            if (st == JINJA_OK)
                st = write_str_repr(c, b, v->u.s);
            return st == JINJA_OK ? jbuf_puts(c, b, ")") : st;
        }
        return write_str_repr(c, b, v->u.s);
    case JV_LIST:
    case JV_TUPLE: {
        const struct jlist *l = v->u.l;
        if (l->flavor != JL_PLAIN)
            return write_flavored(c, b, v);
        const bool tuple = v->kind == JV_TUPLE;
        jinja_status st = jbuf_put(c, b, tuple ? "(" : "[", 1);
        for (size_t i = 0; i < l->n && st == JINJA_OK; i++) {
            if (i)
                st = jbuf_put(c, b, ", ", 2);
            if (st == JINJA_OK)
                st = jinja_step(c, 1);
            if (st == JINJA_OK)
                st = jv_write_repr(c, b, &l->items[i]);
        }
        if (st == JINJA_OK && tuple && l->n == 1)
            st = jbuf_put(c, b, ",", 1);
        return st == JINJA_OK ? jbuf_put(c, b, tuple ? ")" : "]", 1) : st;
    }
    default: return jv_write_str(c, b, v);
    }
}

jinja_status jv_write_str(struct jctx *c, struct jbuf *b, const jv *v)
{
    char num[32];
    switch (v->kind) {
    case JV_UNDEF: return JINJA_OK;
    case JV_NONE: return jbuf_puts(c, b, "None");
    case JV_BOOL: return jbuf_puts(c, b, v->u.b ? "True" : "False");
    case JV_INT:
        snprintf(num, sizeof num, "%" PRId64, v->u.i);
        return jbuf_puts(c, b, num);
    case JV_FLOAT: return jbuf_put(c, b, num, jinja_format_float(v->u.f, num));
    case JV_STR: return jbuf_put(c, b, v->u.s->s, v->u.s->len);
    case JV_LIST:
    case JV_TUPLE: return jv_write_repr(c, b, v);
    case JV_DICT: return write_dict_repr(c, b, v->u.d);
    case JV_NS: {
        jinja_status st = jbuf_puts(c, b, "<Namespace ");
        if (st == JINJA_OK)
            st = write_dict_repr(c, b, v->u.d);
        return st == JINJA_OK ? jbuf_puts(c, b, ">") : st;
    }
    case JV_LOOP: {
        const struct jloop *l = v->u.loop;
        char text[64];
        snprintf(text, sizeof text, "<LoopContext %zu/%zu>", l->index0 + 1,
                 l->items.u.l->n);
        return jbuf_puts(c, b, text);
    }
    case JV_MACRO: {
        const struct jnode *def = v->u.m->def;
        jinja_status st = jbuf_puts(c, b, "<Macro '");
        if (st == JINJA_OK)
            st = def->kind == JN_MACRO
                     ? jbuf_put(c, b, def->name->s, def->name->len)
                     : jbuf_puts(c, b, "caller");
        return st == JINJA_OK ? jbuf_puts(c, b, "'>") : st;
    }
    case JV_METHOD: {
        const struct jmethod *m = v->u.meth;
        jinja_status st = jbuf_puts(c, b, "<built-in method ");
        if (st == JINJA_OK)
            st = jbuf_put(c, b, m->name->s, m->name->len);
        if (st == JINJA_OK)
            st = jbuf_puts(c, b, " of ");
        if (st == JINJA_OK)
            st = jbuf_puts(c, b, jv_type_name(&m->self));
        return st == JINJA_OK ? jbuf_puts(c, b, " object>") : st;
    }
    case JV_FUNC: {
        jinja_status st = jbuf_puts(c, b, "<function ");
        if (st == JINJA_OK)
            st = jbuf_puts(c, b, jinja_global_name(v->aux));
        return st == JINJA_OK ? jbuf_puts(c, b, ">") : st;
    }
    default: return JINJA_OK;
    }
}

jinja_status jinja_escape(struct jctx *c, const struct jstr *s, jv *out)
{
    *out = jv_undef();
    struct jbuf b = {0};
    jinja_status st = JINJA_OK;
    size_t run = 0;
    for (size_t i = 0; i < s->len && st == JINJA_OK; i++) {
        const char *e = NULL;
        switch (s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        default: run++; continue;
        }
        st = jbuf_put(c, &b, s->s + i - run, run);
        if (st == JINJA_OK)
            st = jbuf_puts(c, &b, e);
        run = 0;
    }
    if (st == JINJA_OK)
        st = jbuf_put(c, &b, s->s + s->len - run, run);
    if (st == JINJA_OK)
        st = jbuf_to_str(c, &b, out);
    else
        jbuf_free(c, &b);
    if (st == JINJA_OK)
        out->aux = JV_MARKUP;
    return st;
}

jinja_status jv_to_str(struct jctx *c, const jv *v, jv *out)
{
    *out = jv_undef();
    if (v->kind == JV_STR) {
        *out = jv_ref(v);
        return JINJA_OK;
    }
    struct jbuf b = {0};
    const jinja_status st = jv_write_str(c, &b, v);
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}
