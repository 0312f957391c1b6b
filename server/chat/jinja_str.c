/*
 * jinja_str.c - Python's string operations on UTF-8 text, by code point
 * where Python counts code points (slices, find): search, strip, split,
 * splitlines, replace, case, slices, and int() and float() of a string.
 */
#define _GNU_SOURCE /* memmem(): a linear-time substring search */
#include "jinja_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

jinja_status jinja_find(struct jctx *c, const char *hay, size_t n,
                        const char *needle, size_t m, size_t from, int64_t *at)
{
    *at = -1;
    if (from > n)
        return JINJA_OK;
    const jinja_status st = jinja_step_bytes(c, n - from + m);
    if (st != JINJA_OK)
        return st;
    if (m == 0) {
        *at = (int64_t)from;
        return JINJA_OK;
    }
    const char *p = memmem(hay + from, n - from, needle, m);
    if (p)
        *at = (int64_t)(p - hay);
    return JINJA_OK;
}

/* ------------------------------------------------------------- strip */

static bool in_chars(const struct jstr *chars, uint32_t cp)
{
    if (!chars)
        return jinja_is_space(cp);
    for (size_t i = 0; i < chars->len;) {
        size_t n;
        if (jinja_utf8_next(chars->s, chars->len, i, &n) == cp)
            return true;
        i += n;
    }
    return false;
}

jinja_status jinja_strip(struct jctx *c, const struct jstr *s,
                         const struct jstr *chars, int which, jv *out)
{
    *out = jv_undef();
    jinja_status st = jinja_step_bytes(c, s->len * (chars ? chars->len : 1));
    if (st != JINJA_OK)
        return st;
    size_t from = 0, to = s->len;
    if (which & 1)
        while (from < to) {
            size_t n;
            if (!in_chars(chars, jinja_utf8_next(s->s, to, from, &n)))
                break;
            from += n;
        }
    if (which & 2)
        while (to > from) {
            const size_t at = jinja_utf8_prev(s->s, to);
            size_t n;
            if (at < from ||
                !in_chars(chars, jinja_utf8_next(s->s, to, at, &n)))
                break;
            to = at;
        }
    return jv_str_make(c, s->s + from, to - from, out);
}

/* ------------------------------------------------------------- split */

static jinja_status push_piece(struct jctx *c, struct jlist *l, const char *s,
                               size_t len)
{
    jv piece;
    jinja_status st = jv_str_make(c, s, len, &piece);
    return st == JINJA_OK ? jlist_push(c, l, &piece) : st;
}

/* Reverse a list's items in place (rsplit builds from the right). */
static void reverse_items(struct jlist *l)
{
    for (size_t i = 0, j = l->n; i + 1 < j; i++, j--) {
        const jv t = l->items[i];
        l->items[i] = l->items[j - 1];
        l->items[j - 1] = t;
    }
}

static jinja_status split_space(struct jctx *c, const struct jstr *s,
                                int64_t maxsplit, bool right, struct jlist *l)
{
    const char *p = s->s;
    size_t from = 0, to = s->len;
    int64_t splits = 0;
    if (!right) {
        for (;;) {
            from += jinja_space_after(p + from, to - from);
            if (from >= to)
                return JINJA_OK;
            if (maxsplit >= 0 && splits == maxsplit) {
                /* the rest, trailing whitespace included */
                return push_piece(c, l, p + from, to - from);
            }
            size_t end = from;
            while (end < to) {
                size_t n;
                if (jinja_is_space(jinja_utf8_next(p, to, end, &n)))
                    break;
                end += n;
            }
            const jinja_status st = push_piece(c, l, p + from, end - from);
            if (st != JINJA_OK)
                return st;
            splits++;
            from = end;
        }
    }
    for (;;) {
        to -= jinja_space_before(p + from, to - from);
        if (to <= from)
            break;
        if (maxsplit >= 0 && splits == maxsplit) {
            const jinja_status st = push_piece(c, l, p + from, to - from);
            if (st != JINJA_OK)
                return st;
            break;
        }
        size_t start = to;
        while (start > from) {
            const size_t at = jinja_utf8_prev(p, start);
            size_t n;
            if (at < from || jinja_is_space(jinja_utf8_next(p, start, at, &n)))
                break;
            start = at;
        }
        const jinja_status st = push_piece(c, l, p + start, to - start);
        if (st != JINJA_OK)
            return st;
        splits++;
        to = start;
    }
    reverse_items(l);
    return JINJA_OK;
}

jinja_status jinja_split(struct jctx *c, const struct jnode *at,
                         const struct jstr *s, const struct jstr *sep,
                         int64_t maxsplit, bool right, jv *out)
{
    *out = jv_undef();
    struct jlist *l = jlist_new(c, 0);
    if (!l)
        return c->status;
    jv lv = jv_list(l, false);
    /* the scan is work even when nothing is split off */
    jinja_status st = jinja_step_bytes(c, s->len);
    if (st != JINJA_OK) {
        jv_drop(c, &lv);
        return st;
    }
    if (!sep) {
        st = split_space(c, s, maxsplit, right, l);
    } else if (sep->len == 0) {
        st = jinja_fail(c, at, JINJA_E_RUNTIME, "empty separator");
    } else if (!right) {
        size_t from = 0;
        int64_t splits = 0;
        while (st == JINJA_OK) {
            int64_t hit = -1;
            if (maxsplit < 0 || splits < maxsplit)
                st = jinja_find(c, s->s, s->len, sep->s, sep->len, from, &hit);
            if (st != JINJA_OK)
                break;
            if (hit < 0) {
                st = push_piece(c, l, s->s + from, s->len - from);
                break;
            }
            st = push_piece(c, l, s->s + from, (size_t)hit - from);
            from = (size_t)hit + sep->len;
            splits++;
        }
    } else {
        /* from the right: the last separator at or before to */
        size_t to = s->len;
        int64_t splits = 0;
        while (st == JINJA_OK) {
            size_t hit = SIZE_MAX;
            if ((maxsplit < 0 || splits < maxsplit) && to >= sep->len)
                for (size_t i = to - sep->len + 1; i-- > 0 && st == JINJA_OK;) {
                    if (s->s[i] != sep->s[0])
                        continue;
                    /* each comparison is work: a hostile separator
                     * cannot make this quadratic for free */
                    st = jinja_step(c, 1 + sep->len / JINJA_BYTES_PER_STEP);
                    if (st == JINJA_OK &&
                        memcmp(s->s + i, sep->s, sep->len) == 0) {
                        hit = i;
                        break;
                    }
                }
            if (st != JINJA_OK)
                break;
            if (hit == SIZE_MAX) {
                st = push_piece(c, l, s->s, to);
                break;
            }
            st = push_piece(c, l, s->s + hit + sep->len, to - hit - sep->len);
            to = hit;
            splits++;
        }
        reverse_items(l);
    }
    if (st != JINJA_OK) {
        jv_drop(c, &lv);
        return st;
    }
    *out = lv;
    return JINJA_OK;
}

/* The length of the line break at s[i], or 0: Python's splitlines()
 * breaks at \n \r \r\n \v \f \x1c-\x1e, U+0085, U+2028 and U+2029. */
static size_t line_break(const char *s, size_t len, size_t i)
{
    size_t n;
    const uint32_t cp = jinja_utf8_next(s, len, i, &n);
    if (cp == '\r')
        return i + 1 < len && s[i + 1] == '\n' ? 2 : 1;
    if (cp == '\n' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
        cp == 0x85 || cp == 0x2028 || cp == 0x2029)
        return n;
    return 0;
}

jinja_status jinja_splitlines(struct jctx *c, const struct jstr *s,
                              bool keepends, jv *out)
{
    *out = jv_undef();
    struct jlist *l = jlist_new(c, 0);
    if (!l)
        return c->status;
    jv lv = jv_list(l, false);
    jinja_status st = jinja_step_bytes(c, s->len);
    size_t start = 0;
    for (size_t i = 0; i < s->len && st == JINJA_OK;) {
        const size_t br = line_break(s->s, s->len, i);
        if (!br) {
            size_t n;
            jinja_utf8_next(s->s, s->len, i, &n);
            i += n;
            continue;
        }
        st = push_piece(c, l, s->s + start, i - start + (keepends ? br : 0));
        i += br;
        start = i;
    }
    if (st == JINJA_OK && start < s->len)
        st = push_piece(c, l, s->s + start, s->len - start);
    if (st != JINJA_OK) {
        jv_drop(c, &lv);
        return st;
    }
    *out = lv;
    return JINJA_OK;
}

/* ----------------------------------------------------------- replace */

jinja_status jinja_replace(struct jctx *c, const struct jstr *s,
                           const struct jstr *old, const struct jstr *new_,
                           int64_t count, jv *out)
{
    *out = jv_undef();
    /* how many, to size the result before building it */
    size_t k = 0;
    jinja_status st = JINJA_OK;
    if (old->len == 0) {
        st = jinja_step_bytes(c, s->len);
        k = jinja_utf8_count(s->s, s->len) + 1;
    } else {
        for (size_t from = 0; st == JINJA_OK;) {
            int64_t hit;
            st = jinja_find(c, s->s, s->len, old->s, old->len, from, &hit);
            if (hit < 0)
                break;
            k++;
            from = (size_t)hit + old->len;
        }
    }
    if (st != JINJA_OK)
        return st;
    if (count >= 0 && (uint64_t)count < k)
        k = (size_t)count;
    if (k && new_->len > (c->max_bytes + old->len * k) / k)
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "values past max_bytes (%zu bytes held at once)",
                          c->max_bytes);
    const size_t len = s->len - old->len * k + new_->len * k;
    struct jstr *r = jstr_new(c, len);
    if (!r)
        return c->status;
    size_t from = 0, o = 0;
    for (size_t done = 0; done < k; done++) {
        size_t hit;
        if (old->len == 0) {
            hit = from;
        } else {
            const char *p =
                memmem(s->s + from, s->len - from, old->s, old->len);
            hit = (size_t)(p - s->s);
        }
        memcpy(r->s + o, s->s + from, hit - from);
        o += hit - from;
        memcpy(r->s + o, new_->s, new_->len);
        o += new_->len;
        if (old->len == 0) {
            /* after the inserted text, one code point of the original */
            if (hit < s->len) {
                size_t n;
                jinja_utf8_next(s->s, s->len, hit, &n);
                memcpy(r->s + o, s->s + hit, n);
                o += n;
                from = hit + n;
            } else {
                from = hit;
            }
        } else {
            from = hit + old->len;
        }
    }
    memcpy(r->s + o, s->s + from, s->len - from);
    *out = jv_str(r);
    return JINJA_OK;
}

/* -------------------------------------------------------------- case */

static jinja_status put_cp(struct jctx *c, struct jbuf *b, uint32_t cp,
                           bool upper)
{
    char enc[4];
    if (upper && cp == 0xdf) /* ß */
        return jbuf_put(c, b, "SS", 2);
    const uint32_t m = upper ? jinja_upper(cp) : jinja_lower(cp);
    return jbuf_put(c, b, enc, jinja_utf8_put(m, enc));
}

static bool is_cased(uint32_t cp)
{
    return jinja_is_cased_upper(cp) || jinja_is_cased_lower(cp);
}

jinja_status jinja_recase(struct jctx *c, const struct jstr *s, int how,
                          jv *out)
{
    *out = jv_undef();
    struct jbuf b = {0};
    jinja_status st = JINJA_OK;
    bool prev_cased = false, word_start = true, first = true;
    for (size_t i = 0; i < s->len && st == JINJA_OK;) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(s->s, s->len, i, &n);
        if (n == 1 && cp >= 0x80) { /* not UTF-8: as it is */
            st = jbuf_put(c, &b, s->s + i, 1);
            i++;
            prev_cased = false;
            first = false;
            continue;
        }
        bool upper;
        switch (how) {
        case 0: upper = false; break;
        case 1: upper = true; break;
        case 2: /* str.title(): upper after anything uncased */
            upper = !prev_cased;
            prev_cased = is_cased(cp);
            break;
        case 3: upper = first; break;
        default: { /* the title filter: words split at [-\s({[<] */
            const bool sep = jinja_is_space(cp) || cp == '-' || cp == '(' ||
                             cp == '{' || cp == '[' || cp == '<';
            upper = word_start;
            word_start = sep;
            break;
        }
        }
        first = false;
        st = put_cp(c, &b, cp, upper);
        i += n;
    }
    if (st != JINJA_OK) {
        jbuf_free(c, &b);
        return st;
    }
    return jbuf_to_str(c, &b, out);
}

/* ------------------------------------------------------------ slices */

static jinja_status slice_index(struct jctx *c, const struct jnode *at,
                                const jv *v, bool *given, int64_t *out)
{
    *given = v->kind != JV_NONE;
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
        *out = v->kind == JV_BOOL ? v->u.b : v->u.i;
        return JINJA_OK;
    }
    if (v->kind == JV_NONE)
        return JINJA_OK;
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "slice indices must be integers or None");
}

/* Python's PySlice_AdjustIndices: start, step and how many. */
static void adjust(int64_t n, bool has_start, int64_t start, bool has_stop,
                   int64_t stop, int64_t step, int64_t *first, int64_t *count)
{
    if (!has_start) {
        start = step < 0 ? n - 1 : 0;
    } else {
        if (start < 0)
            start += n;
        if (start < 0)
            start = step < 0 ? -1 : 0;
        else if (start >= n)
            start = step < 0 ? n - 1 : n;
    }
    if (!has_stop) {
        stop = step < 0 ? -1 : n;
    } else {
        if (stop < 0)
            stop += n;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
        else if (stop >= n)
            stop = step < 0 ? n - 1 : n;
    }
    if (step < 0)
        *count = stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    else
        *count = start < stop ? (stop - start - 1) / step + 1 : 0;
    *first = start;
}

jinja_status jinja_slice(struct jctx *c, const struct jnode *at, const jv *v,
                         const jv *start, const jv *stop, const jv *step,
                         jv *out)
{
    *out = jv_undef();
    bool has_start, has_stop, has_step;
    int64_t a = 0, b = 0, s = 1;
    jinja_status st = slice_index(c, at, start, &has_start, &a);
    if (st == JINJA_OK)
        st = slice_index(c, at, stop, &has_stop, &b);
    if (st == JINJA_OK)
        st = slice_index(c, at, step, &has_step, &s);
    if (st != JINJA_OK)
        return st;
    if (!has_step)
        s = 1;
    if (s == 0)
        return jinja_fail(c, at, JINJA_E_RUNTIME, "slice step cannot be zero");
    if (s == INT64_MIN)
        s = -INT64_MAX;
    if (v->kind == JV_UNDEF)
        return jinja_undef_error(c, at, v);
    if (v->kind == JV_STR) {
        const struct jstr *str = v->u.s;
        st = jinja_step_bytes(c, str->len);
        if (st != JINJA_OK)
            return st;
        const int64_t n = (int64_t)jinja_utf8_count(str->s, str->len);
        int64_t first, count;
        adjust(n, has_start, a, has_stop, b, s, &first, &count);
        if (s == 1 || n == (int64_t)str->len) {
            /* contiguous, or ASCII: bytes are code points */
            if (n == (int64_t)str->len && s != 1) {
                struct jstr *r = jstr_new(c, (size_t)count);
                if (!r)
                    return c->status;
                for (int64_t k = 0; k < count; k++)
                    r->s[k] = str->s[first + k * s];
                *out = jv_str(r);
                return JINJA_OK;
            }
            const size_t from =
                jinja_utf8_offset(str->s, str->len, (size_t)first);
            const size_t to =
                jinja_utf8_offset(str->s, str->len, (size_t)(first + count));
            return jv_str_make(c, str->s + from, to - from, out);
        }
        /* code points by step: their offsets first */
        size_t *off = jinja_alloc(c, ((size_t)n + 1) * sizeof *off);
        if (!off)
            return c->status;
        size_t k = 0;
        for (size_t i = 0; i < str->len; k++) {
            size_t len;
            off[k] = i;
            jinja_utf8_next(str->s, str->len, i, &len);
            i += len;
        }
        off[k] = str->len;
        struct jbuf buf = {0};
        for (int64_t j = 0; j < count && st == JINJA_OK; j++) {
            const int64_t i = first + j * s;
            st = jbuf_put(c, &buf, str->s + off[i], off[i + 1] - off[i]);
        }
        jinja_release(c, off, ((size_t)n + 1) * sizeof *off);
        if (st != JINJA_OK) {
            jbuf_free(c, &buf);
            return st;
        }
        return jbuf_to_str(c, &buf, out);
    }
    if ((v->kind == JV_LIST || v->kind == JV_TUPLE) && jv_is_sequence(v)) {
        const struct jlist *l = v->u.l;
        int64_t first, count;
        adjust((int64_t)l->n, has_start, a, has_stop, b, s, &first, &count);
        struct jlist *r = jlist_new(c, (size_t)count);
        if (!r)
            return c->status;
        r->h.depth = l->h.depth;
        for (int64_t k = 0; k < count; k++)
            r->items[r->n++] = jv_ref(&l->items[first + k * s]);
        if (l->flavor == JL_RANGE) {
            r->flavor = JL_RANGE;
            const int64_t r0 = l->range[0], rs = l->range[2];
            r->range[0] = r0 + first * rs;
            r->range[2] = rs * s;
            r->range[1] = r->range[0] + count * r->range[2];
        }
        *out = jv_list(r, v->kind == JV_TUPLE);
        return JINJA_OK;
    }
    /* jinja2 compiles a slice to Python's own: anything else refuses */
    if (v->kind == JV_DICT)
        return jinja_fail(c, at, JINJA_E_RUNTIME, "unhashable type: 'slice'");
    return jinja_fail(c, at, JINJA_E_RUNTIME,
                      "'%s' object is not subscriptable", jv_type_name(v));
}

/* ------------------------------------------------------------ numbers */

/* s without Python's surrounding whitespace, and without the
 * underscores Python allows between digits, into buf; false when an
 * underscore is misplaced. */
static bool clean_number(const char *s, size_t len, char *buf, size_t size,
                         size_t *out_len)
{
    const size_t lead = jinja_space_after(s, len);
    s += lead;
    len -= lead;
    len -= jinja_space_before(s, len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '_') {
            const bool ok =
                i > 0 && i + 1 < len &&
                ((s[i - 1] >= '0' && s[i - 1] <= '9') ||
                 ((s[i - 1] | 0x20) >= 'a' && (s[i - 1] | 0x20) <= 'f') ||
                 (s[i - 1] | 0x20) == 'x' || (s[i - 1] | 0x20) == 'o' ||
                 (s[i - 1] | 0x20) == 'b') &&
                s[i + 1] != '_';
            if (!ok)
                return false;
            continue;
        }
        if (n + 1 >= size)
            return false;
        buf[n++] = s[i];
    }
    buf[n] = '\0';
    *out_len = n;
    return n > 0;
}

bool jinja_parse_int(const char *s, size_t len, int base, int64_t *out,
                     bool *overflow)
{
    char buf[128];
    size_t n;
    *overflow = false;
    if (!clean_number(s, len, buf, sizeof buf, &n))
        return false;
    const char *p = buf;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (p[0] == '0' && p[1]) {
        const char x = (char)(p[1] | 0x20);
        const int prefixed = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
        if (prefixed && (base == prefixed || base == 0)) {
            base = prefixed;
            p += 2;
        }
    }
    if (base == 0)
        base = 10;
    if (!*p)
        return false;
    uint64_t v = 0;
    for (; *p; p++) {
        int d;
        const char ch = (char)(*p | 0x20);
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (ch >= 'a' && ch <= 'z')
            d = ch - 'a' + 10;
        else
            return false;
        if (d >= base)
            return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) {
            *overflow = true;
            return false;
        }
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v > (uint64_t)INT64_MAX + neg) {
        *overflow = true;
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

bool jinja_parse_float(const char *s, size_t len, double *out)
{
    char buf[400];
    size_t n;
    if (!clean_number(s, len, buf, sizeof buf, &n))
        return false;
    /* Python's grammar: [sign] (digits [. digits] | . digits) [e [sign]
     * digits], or inf, infinity, nan */
    const char *p = buf;
    if (*p == '+' || *p == '-')
        p++;
    const char *word = p;
    char lower[16];
    size_t k = 0;
    for (; word[k] && k + 1 < sizeof lower; k++)
        lower[k] = (char)(word[k] | 0x20);
    lower[k] = '\0';
    if (!word[k] &&
        (strcmp(lower, "inf") == 0 || strcmp(lower, "infinity") == 0 ||
         strcmp(lower, "nan") == 0)) {
        *out = strtod(buf, NULL);
        return true;
    }
    size_t digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
    }
    if (!digits)
        return false;
    if ((*p | 0x20) == 'e') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p)
        return false;
    errno = 0;
    *out = strtod(buf, NULL);
    return true;
}
