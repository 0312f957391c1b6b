/*
 * pngw.h - an RGB or RGBA image encoded as PNG in memory, with text chunks.
 *
 * The prefix is pngw_ ("PNG writer") because libpng owns png_*.
 * Output is deterministic: the same pixels and texts give the same bytes
 * (fixed zlib level and filters, no tIME chunk). Thread-safe: no shared
 * state.
 */
#ifndef ATTND_PNGW_H
#define ATTND_PNGW_H

#include "draw.h"

#include <stddef.h>

/* Caps on what pngw_encode accepts. */
#define PNGW_MAX_SIDE 65535u           /* width or height, pixels */
#define PNGW_MAX_TEXTS 32u             /* text chunks */
#define PNGW_MAX_TEXT_BYTES (1u << 20) /* one chunk's text */

/*
 * A text chunk. key: 1 to 79 printable ASCII characters without leading,
 * trailing or doubled spaces (the PNG keyword rules, narrowed to ASCII).
 * text: NUL-terminated UTF-8; written as tEXt when it is printable ASCII
 * (newlines allowed), otherwise as uncompressed iTXt.
 */
struct pngw_text {
    const char *key;
    const char *text;
};

/*
 * The checks pngw_encode() makes of its texts, on their own, so that a
 * caller can know before drawing whether the texts will be accepted:
 * DRAW_E_TOO_BIG for a text over PNGW_MAX_TEXT_BYTES, DRAW_E_INVALID for
 * the other refusals pngw_encode() lists for texts.
 */
draw_status pngw_check_texts(const struct pngw_text *texts, size_t n, char *err,
                             size_t err_len);

/*
 * Encode pixels: [height][width][channels] bytes, row-major, 8 bits per
 * sample, channels 3 (RGB) or 4 (RGBA, not premultiplied).
 *
 * max_bytes caps the encoded size; past it the encoder stops and fails.
 * On success returns DRAW_OK and the caller owns *out (*out_len bytes),
 * released with free(). On failure leaves *out NULL, writes a message to
 * err (err_len bytes, may be 0) and returns
 *   DRAW_E_TOO_BIG  a side over PNGW_MAX_SIDE, a text over
 *                   PNGW_MAX_TEXT_BYTES, or output past max_bytes;
 *   DRAW_E_INVALID  no pixels, a side of 0, channels not 3 or 4, more than
 *                   PNGW_MAX_TEXTS texts, a bad key, a NULL or non-UTF-8
 *                   text;
 *   DRAW_E_NOMEM    out of memory;
 *   DRAW_E_PNG      libpng failed otherwise.
 */
draw_status pngw_encode(const unsigned char *pixels, size_t width,
                        size_t height, unsigned channels,
                        const struct pngw_text *texts, size_t n_texts,
                        size_t max_bytes, unsigned char **out, size_t *out_len,
                        char *err, size_t err_len);

#endif
