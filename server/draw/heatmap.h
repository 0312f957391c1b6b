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

/*
 * The colour maps. viridis, magma and gray are sequential: dark for low,
 * light for high. diverging runs from dark blue through near white
 * (#f7f7f7, its two middle entries) to dark red, as ColorBrewer's RdBu
 * reversed: meant for HEATMAP_SCALE_SYMMETRIC, where the white is 0,
 * negative values are blue and positive ones red.
 */
enum heatmap_colormap {
    HEATMAP_VIRIDIS = 0,
    HEATMAP_MAGMA,
    HEATMAP_GRAY,
    HEATMAP_DIVERGING
};

/* Parse "viridis", "magma", "gray" or "diverging"; false if unknown. */
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
    HEATMAP_SCALE_TILE,
    /* signed values, as effects of a patching: one scale for every
     * matrix, from -M to M, M the largest |value| of any (1 when all are
     * 0), so that 0 is always the middle of the colour map (the white of
     * HEATMAP_DIVERGING); the colorbar's ticks are values from -M to M,
     * 0 among them. The other scales refuse negative values. */
    HEATMAP_SCALE_SYMMETRIC
};

/* One matrix of weights (of values with HEATMAP_SCALE_SYMMETRIC).
 * values: [rows][cols], row-major. */
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
     * weight of 0; its value must still be finite, and >= 0 but with
     * HEATMAP_SCALE_SYMMETRIC. */
    const unsigned char *not_allowed;
    /* NULL, or [n] one per matrix, in place of not_allowed: matrix i's
     * own [rows][cols] cells no query may attend (NULL: none), for a
     * grid whose matrices are of layers that see differently (a sliding
     * window on some, none on others) */
    const unsigned char *const *not_allowed_each;
    /* NULL, or a line drawn under the title (with labels): what the image
     * is beyond its title, e.g. that its cells are pooled blocks */
    const char *note;
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
 * matrix's from 0 to its own largest value, or with
 * HEATMAP_SCALE_SYMMETRIC from -M to M (M the largest |value| over all
 * matrices, 1 when all are 0): a value v takes the entry
 * round(127.5 + 127.5 * v / M) of the 256 of its colour map.
 *
 * The image's size follows from the arguments alone, never from the
 * values: heatmap_measure() gives it before there are any. (The colorbar's
 * tick values are the one thing drawn that depends on them; they get the
 * room of the widest text a tick can have, with its minus sign under
 * HEATMAP_SCALE_SYMMETRIC.)
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
 *                   another shape, no values, values not finite (NaN
 *                   included) under any scale, negative values but under
 *                   HEATMAP_SCALE_SYMMETRIC, an unknown colormap or
 *                   scale, bad texts;
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

/*
 * The same image as SVG 1.1 text: cells as rectangles (a run of equal
 * cells in a row as one) at the PNG's pixel positions and in its colours
 * (the same colour tables), hatched cells filled with a pattern of the
 * PNG's stripes, labels, titles and ticks as <text> in DejaVu Sans at the
 * PNG's baselines, cut where the PNG cuts them (token text XML-escaped;
 * bytes that are not UTF-8 and control characters as U+FFFD), the
 * colorbar as the PNG's rows; texts[] as <title> (key "Title") and as
 * elements of <metadata>.
 *
 * At most max_bytes (heatmap_measure_svg()'s bound for the same
 * arguments, or less); DRAW_E_TOO_BIG past it. On success *svg
 * (malloc'd, NUL-terminated, free()) holds *svg_len bytes; statuses as
 * heatmap_render_png().
 */
draw_status heatmap_render_svg(const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const struct heatmap_text *texts, size_t n_texts,
                               size_t max_bytes, char **svg, size_t *svg_len,
                               char *err, size_t err_len);

/* The most bytes an SVG may have: 64 MiB. */
#define HEATMAP_SVG_MAX_BYTES ((size_t)64 << 20)

/*
 * heatmap_measure() for an SVG, and in *bytes a bound on its length,
 * without reading a value: every cell as its own rectangle, every text as
 * given (a caller whose texts grow once the values are known adds that
 * growth), ticks at their longest. DRAW_E_TOO_BIG naming the bound and
 * the cap when it is over HEATMAP_SVG_MAX_BYTES.
 */
draw_status heatmap_measure_svg(const struct heatmap_matrix *mats, size_t n,
                                const struct heatmap_options *opts,
                                const struct heatmap_text *texts,
                                size_t n_texts, int *width, int *height,
                                size_t *bytes, char *err, size_t err_len);

/*
 * Pooling: a long input's matrix drawn as blocks of k x k weights, each
 * reduced to its largest (max) or its mean, so that the image stays
 * readable and its size bounded. The caller pools (heatmap_pool_values)
 * and draws the pooled matrices as any other.
 */
enum heatmap_pool {
    HEATMAP_POOL_NONE = 0,
    HEATMAP_POOL_MAX,
    HEATMAP_POOL_MEAN
};

/* Automatic pooling takes a matrix of more than this many rows or
 * columns, into blocks that leave at most HEATMAP_POOL_BLOCKS a side. */
#define HEATMAP_POOL_AUTO_SIDE 256u
#define HEATMAP_POOL_BLOCKS 128u
/* A pooled image's automatic cell: its blocks keep room for labels. */
#define HEATMAP_POOL_CELL 4u

/* The block side that leaves at most HEATMAP_POOL_BLOCKS blocks on the
 * longer side of a rows x cols matrix: ceil(max / 128), at least 1. */
size_t heatmap_pool_size(size_t rows, size_t cols);

/* Blocks of k along a side of n: ceil(n / k). */
size_t heatmap_pool_blocks(size_t n, size_t k);

/*
 * Pool a rows x cols matrix into out: [ceil(rows/k)][ceil(cols/k)]. Cell
 * (i, j) of the matrix is src[row_at[i] * ld + col_at[j]] (row_at or
 * col_at NULL: i, j themselves), so that a caller's chosen rows and
 * columns are pooled without a copy. Cells where not_allowed
 * ([rows][cols], may be NULL) is nonzero take no part: a block's max or
 * mean is over its allowed cells only (a mean over them all would count
 * weights the model never had to give), and a block with none is 0 (its
 * mask cell is set by heatmap_pool_mask). The last block of a side holds
 * what is left (fewer than k).
 */
void heatmap_pool_values(const float *src, size_t ld, const size_t *row_at,
                         const size_t *col_at, size_t rows, size_t cols,
                         const unsigned char *not_allowed, size_t k,
                         enum heatmap_pool kind, float *out);

/* A block is not allowed when every cell of it is not: out
 * [ceil(rows/k)][ceil(cols/k)]. */
void heatmap_pool_mask(const unsigned char *not_allowed, size_t rows,
                       size_t cols, size_t k, unsigned char *out);

/*
 * Labels of blocks of k of n labels (labels NULL: positions only): the
 * first and last position of a block and its first label, "8-15 quick"
 * ("300 end" for a block of one). On success the caller owns *out
 * ([ceil(n/k)] strings), released with heatmap_pool_labels_free().
 */
draw_status heatmap_pool_labels(const char *const *labels, size_t n, size_t k,
                                char ***out, char *err, size_t err_len);
void heatmap_pool_labels_free(char **labels, size_t n_blocks);

/* The bytes heatmap_pool_labels() allocates for n labels in blocks of k,
 * at most. */
size_t heatmap_pool_labels_bytes(size_t n, size_t k);

/* The font used for labels (DejaVu Sans); overridable for tests. Reads the
 * file once; safe to call before any thread starts. On failure returns
 * DRAW_E_FONT (missing or unusable file) or DRAW_E_NOMEM with a message in
 * err, and a font loaded before stays in use. */
draw_status heatmap_font_init(const char *path, char *err, size_t err_len);
void heatmap_font_free(void);

#endif
