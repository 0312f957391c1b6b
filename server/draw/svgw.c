/*
 * svgw.c - the SVG writer's buffer and XML escaping.
 */
#include "svgw.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void svgw_init(struct svgw *w, size_t cap, bool counting)
{
    memset(w, 0, sizeof *w);
    w->cap = cap;
    w->counting = counting;
}

/* Room for n more bytes and a NUL, doubling up to the cap. */
static bool svgw_reserve(struct svgw *w, size_t n)
{
    if (w->failed)
        return false;
    if (w->counting)
        return true;
    if (n > w->cap || w->len > w->cap - n) {
        w->failed = true;
        return false;
    }
    const size_t need = w->len + n + 1;
    if (need <= w->room)
        return true;
    size_t room = w->room ? w->room : 4096;
    while (room < need)
        room = room > SIZE_MAX / 2 ? need : room * 2;
    if (room > w->cap + 1)
        room = w->cap + 1;
    char *d = realloc(w->data, room);
    if (!d) {
        w->failed = w->nomem = true;
        return false;
    }
    w->data = d;
    w->room = room;
    return true;
}

void svgw_put(struct svgw *w, const char *s, size_t n)
{
    if (!svgw_reserve(w, n))
        return;
    if (!w->counting) {
        memcpy(w->data + w->len, s, n);
        w->data[w->len + n] = '\0';
    }
    w->len += n;
}

void svgw_str(struct svgw *w, const char *s)
{
    svgw_put(w, s, strlen(s));
}

void svgw_printf(struct svgw *w, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) {
        w->failed = true; /* markup is short: a longer one is a bug */
        return;
    }
    svgw_put(w, line, (size_t)n);
}

/* The length of a well-formed UTF-8 sequence at s (at most end - s bytes)
 * of a character XML allows, or 0. */
static size_t svgw_utf8_ok(const unsigned char *s, const unsigned char *end)
{
    const unsigned c = s[0];
    size_t n;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0)
        n = 2, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, v = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if ((size_t)(end - s) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ||
        v == 0xFFFE || v == 0xFFFF)
        return 0;
    return n;
}

void svgw_escaped(struct svgw *w, const char *s, size_t n)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end && !w->failed) {
        /* a run of bytes that go as they are */
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '&' && *p != '<' &&
               *p != '>' && *p != '"' && *p != '\'')
            p++;
        if (p > run)
            svgw_put(w, (const char *)run, (size_t)(p - run));
        if (p == end)
            break;
        const unsigned char c = *p;
        if (c >= 0x80) {
            const size_t len = svgw_utf8_ok(p, end);
            if (len) {
                svgw_put(w, (const char *)p, len);
                p += len;
            } else {
                svgw_put(w, replacement, 3);
                p++;
            }
            continue;
        }
        switch (c) {
        case '&': svgw_put(w, "&amp;", 5); break;
        case '<': svgw_put(w, "&lt;", 4); break;
        case '>': svgw_put(w, "&gt;", 4); break;
        case '"': svgw_put(w, "&quot;", 6); break;
        case '\'': svgw_put(w, "&#39;", 5); break;
        default: svgw_put(w, replacement, 3); break; /* a control */
        }
        p++;
    }
}

char *svgw_take(struct svgw *w, size_t *len)
{
    if (w->failed || w->counting) {
        svgw_free(w);
        *len = 0;
        return NULL;
    }
    if (!w->data && !svgw_reserve(w, 0)) {
        svgw_free(w);
        *len = 0;
        return NULL;
    }
    if (w->len == 0)
        w->data[0] = '\0';
    char *d = w->data;
    *len = w->len;
    w->data = NULL;
    svgw_free(w);
    return d;
}

void svgw_free(struct svgw *w)
{
    free(w->data);
    w->data = NULL;
    w->len = w->room = 0;
}
