/*
 * pngw.c - PNG encoding into a growable memory buffer with libpng.
 *
 * libpng reports errors by longjmp. Everything that must be released after
 * such a jump lives in pngw_encode, which does not call setjmp; the
 * function that does (pngw_write) returns at once after a jump and reads
 * none of its locals, which the jump may have left indeterminate.
 */
#include "errbuf.h"
#include "pngw.h"

#include <png.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* zlib level 6: the usual balance; fixed so output is reproducible. */
#define PNGW_ZLIB_LEVEL 6
#define PNGW_MIN_CAPACITY 4096u

/* The encoder's state, shared with libpng's callbacks through io_ptr. */
struct pngw_state {
    unsigned char *data; /* owned; malloc'd */
    size_t len, cap, max_bytes;
    char message[160];  /* libpng's error text, for err */
    draw_status status; /* of a failure: DRAW_E_PNG unless set before */
};

static void pngw_on_error(png_structp png, png_const_charp msg)
{
    struct pngw_state *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg ? msg : "?");
    png_longjmp(png, 1);
}

static void pngw_on_warning(png_structp png, png_const_charp msg)
{
    /* Warnings concern nothing the caller can act on; stay quiet. */
    (void)png;
    (void)msg;
}

static void pngw_on_write(png_structp png, png_bytep bytes, size_t n)
{
    struct pngw_state *s = png_get_io_ptr(png);
    if (n > s->max_bytes - s->len) {
        s->status = DRAW_E_TOO_BIG;
        png_error(png, "encoded image exceeds its size cap");
    }
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : PNGW_MIN_CAPACITY;
        while (cap < s->len + n)
            cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        if (cap > s->max_bytes)
            cap = s->max_bytes;
        unsigned char *grown = realloc(s->data, cap);
        if (!grown) {
            s->status = DRAW_E_NOMEM;
            png_error(png, "out of memory");
        }
        s->data = grown;
        s->cap = cap;
    }
    memcpy(s->data + s->len, bytes, n);
    s->len += n;
}

static void pngw_on_flush(png_structp png)
{
    (void)png;
}

/* True if s (NUL-terminated) is strict UTF-8: no overlong forms, no
 * surrogates, nothing above U+10FFFF. */
static bool pngw_is_utf8(const unsigned char *s)
{
    while (*s) {
        const unsigned c = *s;
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            s++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        for (size_t i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
                return false;
            cp = cp << 6 | (s[i] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        s += n + 1;
    }
    return true;
}

/* Printable ASCII and newlines only: what tEXt can hold unambiguously. */
static bool pngw_is_plain(const unsigned char *s)
{
    for (; *s; s++) {
        if ((*s < 0x20 || *s > 0x7E) && *s != '\n')
            return false;
    }
    return true;
}

static bool pngw_key_ok(const char *key)
{
    const size_t len = key ? strnlen(key, 80) : 0;
    if (len < 1 || len > 79 || key[0] == ' ' || key[len - 1] == ' ')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (key[i] < 0x20 || key[i] > 0x7E)
            return false;
        if (key[i] == ' ' && key[i + 1] == ' ')
            return false;
    }
    return true;
}

draw_status pngw_check_texts(const struct pngw_text *texts, size_t n, char *err,
                             size_t err_len)
{
    if (n > 0 && !texts)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "png: %zu texts but no array", n);
    if (n > PNGW_MAX_TEXTS)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "png: %zu text chunks, at most %u allowed", n,
                           PNGW_MAX_TEXTS);
    for (size_t i = 0; i < n; i++) {
        if (!pngw_key_ok(texts[i].key))
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "png: text %zu: key must be 1-79 printable "
                               "ASCII characters without leading, trailing "
                               "or double spaces",
                               i);
        if (!texts[i].text)
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "png: text \"%s\": missing", texts[i].key);
        if (strnlen(texts[i].text, PNGW_MAX_TEXT_BYTES + 1) >
            PNGW_MAX_TEXT_BYTES)
            return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                               "png: text \"%s\": longer than %u bytes",
                               texts[i].key, PNGW_MAX_TEXT_BYTES);
        if (!pngw_is_utf8((const unsigned char *)texts[i].text))
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "png: text \"%s\" is not valid UTF-8",
                               texts[i].key);
    }
    return DRAW_OK;
}

/*
 * The libpng part. Returns false after a libpng error (message in
 * s->message). Texts were validated; png_set_text copies them.
 */
static bool pngw_write(png_structp png, png_infop info,
                       const unsigned char *pixels, png_uint_32 width,
                       png_uint_32 height, unsigned channels,
                       const struct pngw_text *texts, size_t n_texts,
                       struct pngw_state *s)
{
    if (setjmp(png_jmpbuf(png)))
        return false;
    png_set_write_fn(png, s, pngw_on_write, pngw_on_flush);
    png_set_compression_level(png, PNGW_ZLIB_LEVEL);
    png_set_IHDR(png, info, width, height, 8,
                 channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    for (size_t i = 0; i < n_texts; i++) {
        png_text t;
        memset(&t, 0, sizeof t);
        const bool plain = pngw_is_plain((const unsigned char *)texts[i].text);
        t.compression =
            plain ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
        t.key = (png_charp)(uintptr_t)texts[i].key; /* libpng copies */
        t.text = (png_charp)(uintptr_t)texts[i].text;
        png_set_text(png, info, &t, 1);
    }
    png_write_info(png, info);
    const size_t stride = (size_t)width * channels;
    for (png_uint_32 y = 0; y < height; y++)
        png_write_row(png, pixels + (size_t)y * stride);
    png_write_end(png, info);
    return true;
}

draw_status pngw_encode(const unsigned char *pixels, size_t width,
                        size_t height, unsigned channels,
                        const struct pngw_text *texts, size_t n_texts,
                        size_t max_bytes, unsigned char **out, size_t *out_len,
                        char *err, size_t err_len)
{
    *out = NULL;
    *out_len = 0;
    if (!pixels || width < 1 || height < 1 || (channels != 3 && channels != 4))
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "png: bad image %zu x %zu x %u (sides 1-%u, 3 or 4 "
                           "channels)",
                           width, height, channels, PNGW_MAX_SIDE);
    if (width > PNGW_MAX_SIDE || height > PNGW_MAX_SIDE)
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "png: image of %zu x %zu px, sides at most %u",
                           width, height, PNGW_MAX_SIDE);
    const draw_status checked = pngw_check_texts(texts, n_texts, err, err_len);
    if (checked != DRAW_OK)
        return checked;

    struct pngw_state s = {.max_bytes = max_bytes, .status = DRAW_E_PNG};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s,
                                              pngw_on_error, pngw_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        /* libpng returns NULL here only when its allocation fails */
        png_destroy_write_struct(&png, NULL);
        return errbuf_fail(err, err_len, DRAW_E_NOMEM, "png: out of memory");
    }
    const bool ok =
        pngw_write(png, info, pixels, (png_uint_32)width, (png_uint_32)height,
                   channels, texts, n_texts, &s);
    png_destroy_write_struct(&png, &info);
    if (!ok) {
        free(s.data);
        return errbuf_fail(err, err_len, s.status, "png: %s (image %zu x %zu)",
                           s.message, width, height);
    }
    *out = s.data;
    *out_len = s.len;
    return DRAW_OK;
}
