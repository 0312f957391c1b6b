/*
 * font.h - text for the heatmap labels: one font file (DejaVu Sans) read
 * into memory once, and per render a FreeType library and face of its own
 * that measure and draw UTF-8 text into an RGB or RGBA canvas.
 *
 * Threads: heatmap_font_init() and heatmap_font_free() (declared in
 * heatmap.h) must not run while anything renders; between them the font
 * bytes are immutable and any number of threads may each use their own
 * struct font. A struct font itself belongs to one thread.
 *
 * Text is drawn one code point per glyph, without shaping: enough for
 * token labels. Invalid UTF-8 shows as U+FFFD, characters the font lacks
 * as its box glyph (.notdef).
 */
#ifndef ATTND_FONT_H
#define ATTND_FONT_H

#include "draw.h"

#include <stdbool.h>
#include <stddef.h>

/* An image to draw into: [height][width][channels] bytes, row-major,
 * channels 3 (RGB) or 4 (RGBA, not premultiplied). Owned by the caller. */
struct font_canvas {
    unsigned char *pixels;
    int width, height;
    unsigned channels;
};

enum font_angle {
    FONT_HORIZONTAL = 0,
    FONT_DIAGONAL /* turned 45 degrees, rising to the right */
};

/* Pixel sizes font_open() and font_set_size() accept. */
#define FONT_MIN_PX 6u
#define FONT_MAX_PX 96u

/* Text beyond this many code points (or bytes) is cut with an ellipsis. */
#define FONT_MAX_GLYPHS 256u
#define FONT_MAX_TEXT_BYTES 4096u

struct font;

/*
 * A face of the font loaded by heatmap_font_init(), at px pixels per em.
 * On success returns DRAW_OK and the caller owns *out, released with
 * font_close(). On failure *out is NULL, err holds a message, and the
 * status is DRAW_E_FONT when no font is loaded or FreeType fails,
 * DRAW_E_INVALID when px is outside FONT_MIN_PX .. FONT_MAX_PX, and
 * DRAW_E_NOMEM when memory runs out.
 */
draw_status font_open(unsigned px, struct font **out, char *err,
                      size_t err_len);
void font_close(struct font *f);

/* Change the size (FONT_MIN_PX .. FONT_MAX_PX); false if refused. */
bool font_set_size(struct font *f, unsigned px);

/* Metrics at the current size, in whole pixels. */
int font_ascent(const struct font *f);     /* line top above the baseline */
int font_descent(const struct font *f);    /* line bottom below it, >= 0 */
int font_cap_height(const struct font *f); /* height of "H" */

/*
 * Advance width in pixels of utf8 (NUL-terminated; NULL reads as "") set
 * at angle, measured along the baseline, after the truncation font_draw()
 * would apply for max_width.
 */
int font_text_width(struct font *f, const char *utf8, int max_width,
                    enum font_angle angle);

/*
 * What font_draw() shows of utf8 for max_width: its first return-value
 * bytes, then an ellipsis (U+2026) when *ellipsis is true. Lets a writer
 * of text that it does not rasterise (SVG) cut labels where the PNG does.
 */
size_t font_text_cut(struct font *f, const char *utf8, int max_width,
                     enum font_angle angle, bool *ellipsis);

/* The current size in pixels per em. */
unsigned font_px(const struct font *f);

/*
 * Draw utf8 with its baseline starting at pixel (x, y) and running at
 * angle, blending rgb over the canvas by the glyph coverage. When
 * max_width > 0 and the text is wider, it is cut after a whole character
 * and ends with an ellipsis so that it fits. Pixels off the canvas are
 * skipped, so any position is safe.
 */
void font_draw(struct font *f, struct font_canvas *c, int x, int y,
               const char *utf8, int max_width, enum font_angle angle,
               const unsigned char rgb[3]);

#endif
