/*
 * draw.h - the drawing library's one error convention: every function that
 * can fail returns a draw_status and writes a message naming the value
 * into a buffer its caller owns (char *err, size_t err_len).
 *
 * The library (heatmaps, colormaps, the label font, the PNG writer) knows
 * nothing of HTTP, JSON or the attention core; a caller decides what a
 * status means to its own users.
 */
#ifndef ATTND_DRAW_H
#define ATTND_DRAW_H

typedef enum draw_status {
    DRAW_OK = 0,
    /* The image, or something that goes into it, would pass max_pixels or
     * one of the library's size caps: the caller asked for too much. */
    DRAW_E_TOO_BIG,
    /* Arguments outside the documented contract: a bug in the caller. */
    DRAW_E_INVALID,
    /* The font file is missing or unusable, none is loaded, or FreeType
     * failed. */
    DRAW_E_FONT,
    /* An allocation failed. */
    DRAW_E_NOMEM,
    /* libpng failed while encoding. */
    DRAW_E_PNG
} draw_status;

#endif
