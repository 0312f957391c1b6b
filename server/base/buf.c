/*
 * buf.c - growable, capped byte buffer.
 */
#include "buf.h"
#include "jsonnum.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t cap_bytes)
{
    memset(b, 0, sizeof *b);
    b->cap_bytes = cap_bytes;
}

void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}

/* Make room for extra more bytes plus the terminating NUL. */
static bool buf_reserve(struct buf *b, size_t extra)
{
    if (extra > b->cap_bytes || b->len > b->cap_bytes - extra)
        return false;
    const size_t need = b->len + extra + 1;
    if (need <= b->alloc)
        return true;
    size_t grown = b->alloc ? b->alloc : 256;
    while (grown < need)
        grown = grown > SIZE_MAX / 2 ? need : grown * 2;
    char *p = realloc(b->data, grown);
    if (!p)
        return false;
    b->data = p;
    b->alloc = grown;
    return true;
}

bool buf_append(struct buf *b, const void *bytes, size_t len)
{
    if (!buf_reserve(b, len))
        return false;
    if (len)
        memcpy(b->data + b->len, bytes, len);
    b->len += len;
    b->data[b->len] = '\0';
    return true;
}

bool buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

bool buf_append_uint(struct buf *b, uint64_t v)
{
    char digits[20];
    return buf_append(b, digits, jsonnum_uint(v, digits));
}

bool buf_append_member(struct buf *b, const char *name)
{
    const size_t len = strlen(name);
    if (!buf_reserve(b, len + 4))
        return false;
    char *at = b->data + b->len;
    at[0] = ',';
    at[1] = '"';
    memcpy(at + 2, name, len);
    at[len + 2] = '"';
    at[len + 3] = ':';
    b->len += len + 4;
    b->data[b->len] = '\0';
    return true;
}

bool buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

/* Length of the well-formed UTF-8 sequence at s, of which avail bytes
 * may be read (RFC 3629: no overlong forms, surrogates or values above
 * U+10FFFF), or 0 when none starts there. A NUL is never a continuation
 * byte, so a NUL-terminated string may pass 4. */
static size_t utf8_sequence(const unsigned char *s, size_t avail)
{
    const unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

size_t buf_utf8_prefix(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t at = 0;
    while (p[at]) {
        const size_t n = p[at] < 0x80 ? 1 : utf8_sequence(p + at, 4);
        if (!n)
            return at;
        at += n;
    }
    return at;
}

bool buf_append_json_bytes(struct buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (!buf_append(b, "\"", 1))
        return false;
    const unsigned char *const end = (const unsigned char *)s + len;
    for (const unsigned char *p = (const unsigned char *)s; p < end; p++) {
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (*p) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            if (*p >= 0x80) {
                /* JSON text must be UTF-8 (RFC 8259): a byte that starts
                 * no well-formed sequence, such as a stray byte a client
                 * sent or a character cut short by "%.40s", goes out as
                 * U+FFFD */
                const size_t seq = utf8_sequence(p, (size_t)(end - p));
                const bool ok = seq ? buf_append(b, p, seq)
                                    : buf_append(b, "\xEF\xBF\xBD", 3);
                if (!ok)
                    return false;
                if (seq)
                    p += seq - 1;
                continue;
            }
            if (*p >= 0x20) {
                if (!buf_append(b, p, 1))
                    return false;
                continue;
            }
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            n = 6;
        }
        if (!buf_append(b, esc, n))
            return false;
    }
    return buf_append(b, "\"", 1);
}

bool buf_append_json_string(struct buf *b, const char *s)
{
    return buf_append_json_bytes(b, s, strlen(s));
}

bool buf_append_json_strings(struct buf *b, const char *const *items, size_t n)
{
    bool ok = buf_append_str(b, "[");
    for (size_t i = 0; ok && i < n; i++)
        ok = (!i || buf_append_str(b, ",")) &&
             buf_append_json_string(b, items[i]);
    return ok && buf_append_str(b, "]");
}

char *buf_json_strings(const char *const *items, size_t n, size_t cap)
{
    struct buf b;
    buf_init(&b, cap);
    if (!buf_append_json_strings(&b, items, n)) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, NULL);
}

char *buf_take(struct buf *b, size_t *len)
{
    char *data = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return data;
}
