/*
 * buf.h - a growable byte buffer with a cap fixed at init. Appends past
 * the cap or past memory fail and leave the buffer as it was.
 */
#ifndef ATTND_BUF_H
#define ATTND_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
    char *data; /* owned; NUL-terminated after every append */
    size_t len, cap_bytes, alloc;
};

void buf_init(struct buf *b, size_t cap_bytes);
void buf_free(struct buf *b);
bool buf_append(struct buf *b, const void *bytes, size_t len);
bool buf_append_str(struct buf *b, const char *s);
/* v in decimal. */
bool buf_append_uint(struct buf *b, uint64_t v);

/* ,"name": — the start of a member after the first, for the echo and
 * other hot writers that printf would slow down. */
bool buf_append_member(struct buf *b, const char *name);

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
bool buf_printf(struct buf *b, const char *fmt, ...);
/* Append s as a JSON string literal, quotes included. Bytes that are not
 * well-formed UTF-8 go out as U+FFFD, so the text stays valid JSON. */
bool buf_append_json_string(struct buf *b, const char *s);

/* The same for the len bytes at s, which may hold NULs (as \u0000). */
bool buf_append_json_bytes(struct buf *b, const char *s, size_t len);

/* Bytes of the well-formed UTF-8 at the start of the NUL-terminated s:
 * strlen(s) when all of it is. */
size_t buf_utf8_prefix(const char *s);

/* Append items[0 .. n) as a JSON array of strings, each as
 * buf_append_json_string() writes it. */
bool buf_append_json_strings(struct buf *b, const char *const *items, size_t n);

/* The same array as a new NUL-terminated string of at most cap bytes,
 * which the caller owns (free()); NULL past cap or memory. */
char *buf_json_strings(const char *const *items, size_t n, size_t cap);

/* Hand the bytes over: the caller owns the returned pointer (free()),
 * the buffer is left empty. */
char *buf_take(struct buf *b, size_t *len);

#endif
