/*
 * heatmap.h - attention weights drawn as PNG heatmaps: one matrix, or a
 * titled grid of matrices, with token labels, titles and a colorbar.
 *
 * Knows nothing of HTTP or JSON; the server hands it float matrices and
 * label strings and gets PNG bytes back.
 */
#ifndef ATTND_HEATMAP_H
#define ATTND_HEATMAP_H

#include "draw.h"

#include <stdbool.h>
#include <stddef.h>

enum heatmap_colormap { HEATMAP_VIRIDIS = 0, HEATMAP_MAGMA, HEATMAP_GRAY };

/* Parse "viridis", "magma" or "gray"; false if unknown. */
bool heatmap_colormap_parse(const char *name, enum heatmap_colormap *out);
const char *heatmap_colormap_name(enum heatmap_colormap map);

/* What a colour means in an image of several matrices. */
enum heatmap_scale {
    /* one scale for every matrix, from 0 to the largest value of any; the
     * colorbar's ticks are values */
    HEATMAP_SCALE_SHARED = 0,
    /* each matrix from 0 to its own largest value (1 when all are 0), as
     * BertViz's model view: a matrix of small values still spans the
     * colour map; the colorbar's ticks are percentages of that largest
     * value */
    HEATMAP_SCALE_TILE
};

/* One matrix of weights. values: [rows][cols], row-major. */
struct heatmap_matrix {
    const float *values;
    size_t rows, cols;
    const char *title; /* drawn above the matrix when labels are on */
};

struct heatmap_options {
    enum heatmap_colormap colormap;
    unsigned cell;                 /* pixels per weight; 0 = automatic */
    bool labels;                   /* false: the bare matrix, nothing else */
    const char *title;             /* title over a grid (n > 1); may be NULL */
    const char *const *row_labels; /* [rows] query tokens, UTF-8 */
    const char *const *col_labels; /* [cols] key tokens, UTF-8 */
    size_t max_pixels;             /* cap on width * height; 0 = no cap */
    size_t grid_cols; /* panels across a grid; 0: about square; at most
                         HEATMAP_MAX_ACROSS */
    enum heatmap_scale scale;
    /* NULL, or [rows][cols] shared by every matrix: nonzero where a query
     * may not see the key (a causal model's future, keys outside a
     * sliding window). Such a cell is drawn hatched in grey, apart from
     * every colour of the map, so that "not allowed" never reads as a
     * weight of 0; its value must still be a finite weight >= 0. */
    const unsigned char *not_allowed;
};

#define HEATMAP_MAX_ACROSS 64
#define HEATMAP_MAX_TILES 1024 /* matrices in one image */

/* A PNG text chunk; written as iTXt when the text is not ASCII. */
struct heatmap_text {
    const char *key;
    const char *text;
};

/*
 * Render n matrices of the same shape as one PNG image: n == 1 gives a
 * single heatmap, n > 1 a grid (about square, row-major in the given order)
 * with one colorbar. The colour scale runs from 0 to the largest value
 * over all matrices (1 when all are 0), or with HEATMAP_SCALE_TILE each
 * matrix's from 0 to its own largest value.
 *
 * The image's size follows from the arguments alone, never from the
 * values: heatmap_measure() gives it before there are any. (The colorbar's
 * tick values are the one thing drawn that depends on them; they get the
 * room of the widest text a tick can have.)
 *
 * Layout with labels: the title on top, query tokens down the left, key
 * tokens along the top (turned 45 degrees when longer than a cell), a
 * colorbar with tick values on the right. Without labels the image is
 * exactly cols * cell by rows * cell pixels per matrix (grids add a 1-cell
 * gutter between matrices).
 *
 * Automatic cell size: large enough that the matrix area is at least 300
 * pixels on its longer side, at most 48 pixels, at least 1.
 *
 * On success returns DRAW_OK and *png (malloc'd; the caller frees it with
 * free()) holds *png_len bytes. On failure *png is NULL, err holds a
 * message naming the value, and the status says whose it is:
 *   DRAW_E_TOO_BIG  the image would pass max_pixels or a cap: a cell over
 *                   256 px, a side over 32768 px, more than 64 Mi px, more
 *                   than 1024 matrices, a text over 1 MiB;
 *   DRAW_E_INVALID  no options or matrices, an empty matrix or one of
 *                   another shape, no values, values negative or not
 *                   finite, an unknown colormap or scale, bad texts;
 *   DRAW_E_FONT     labels asked for but no font loaded, or FreeType failed;
 *   DRAW_E_NOMEM    out of memory;
 *   DRAW_E_PNG      libpng failed.
 */
draw_status heatmap_render_png(const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const struct heatmap_text *texts, size_t n_texts,
                               unsigned char **png, size_t *png_len, char *err,
                               size_t err_len);

/*
 * The size of the image heatmap_render_png() draws from the same
 * arguments, and the same refusals, without reading a value: mats[i].values
 * may be NULL, and the texts' content is checked as the encoder will check
 * it. So a caller can refuse an image that cannot be drawn before it
 * computes what the image would show. DRAW_OK with *width and *height in
 * pixels, or heatmap_render_png()'s statuses and messages (DRAW_E_FONT
 * when labels are asked for and no font is loaded).
 */
draw_status heatmap_measure(const struct heatmap_matrix *mats, size_t n,
                            const struct heatmap_options *opts,
                            const struct heatmap_text *texts, size_t n_texts,
                            int *width, int *height, char *err, size_t err_len);

/* The font used for labels (DejaVu Sans); overridable for tests. Reads the
 * file once; safe to call before any thread starts. On failure returns
 * DRAW_E_FONT (missing or unusable file) or DRAW_E_NOMEM with a message in
 * err, and a font loaded before stays in use. */
draw_status heatmap_font_init(const char *path, char *err, size_t err_len);
void heatmap_font_free(void);

#endif
