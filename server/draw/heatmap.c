/*
 * heatmap.c - heatmap_render_png: check the inputs, lay the image out
 * (heatmap_layout.c), draw it (heatmap_draw.c) and encode it (pngw.c).
 *
 * A render validates its inputs, computes the layout in whole pixels (every
 * size checked against the caps before anything is allocated), draws into
 * one RGB canvas that it owns, and encodes it. Nothing is shared between
 * renders but the read-only font bytes, so renders may run in parallel.
 */
#include "heatmap.h"

#include "errbuf.h"
#include "font.h"
#include "heatmap_draw.h"
#include "heatmap_layout.h"
#include "heatmap_svg.h"
#include "pngw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ validation */

/* Which arguments are a caller's bug (DRAW_E_INVALID) and which ask for
 * more than the caps allow (DRAW_E_TOO_BIG). */
static draw_status heatmap_check_inputs(const struct heatmap_matrix *mats,
                                        size_t n,
                                        const struct heatmap_options *opts,
                                        const struct heatmap_text *texts,
                                        size_t n_texts, char *err,
                                        size_t err_len)
{
    if (!opts)
        return errbuf_fail(err, err_len, DRAW_E_INVALID, "heatmap: no options");
    if (!mats || n < 1 || n > HEATMAP_MAX_MATRICES)
        return errbuf_fail(err, err_len,
                           mats && n > HEATMAP_MAX_MATRICES ? DRAW_E_TOO_BIG
                                                            : DRAW_E_INVALID,
                           "heatmap: %zu matrices, expected 1 to %u",
                           mats ? n : 0, HEATMAP_MAX_MATRICES);
    if ((unsigned)opts->colormap > HEATMAP_DIVERGING)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: unknown colormap %u",
                           (unsigned)opts->colormap);
    if ((unsigned)opts->scale > HEATMAP_SCALE_SYMMETRIC)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: unknown scale %u", (unsigned)opts->scale);
    if (opts->cell > HEATMAP_MAX_CELL)
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "heatmap: cell %u px, at most %u", opts->cell,
                           HEATMAP_MAX_CELL);
    const size_t rows = mats[0].rows, cols = mats[0].cols;
    if (rows < 1 || cols < 1 || rows > HEATMAP_MAX_SIDE ||
        cols > HEATMAP_MAX_SIDE)
        return errbuf_fail(err, err_len,
                           rows && cols ? DRAW_E_TOO_BIG : DRAW_E_INVALID,
                           "heatmap: matrix of %zu x %zu, sides 1 to %u", rows,
                           cols, HEATMAP_MAX_SIDE);
    for (size_t i = 0; i < n; i++) {
        if (mats[i].rows != rows || mats[i].cols != cols)
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "heatmap: matrix %zu is %zu x %zu, matrix 0 is "
                               "%zu x %zu",
                               i, mats[i].rows, mats[i].cols, rows, cols);
    }
    if (n_texts > PNGW_MAX_TEXTS)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: %zu texts, at most %u", n_texts,
                           PNGW_MAX_TEXTS);
    if (n_texts > 0 && !texts)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: %zu texts but no array", n_texts);
    struct pngw_text pt[PNGW_MAX_TEXTS];
    for (size_t i = 0; i < n_texts; i++)
        pt[i] = (struct pngw_text){texts[i].key, texts[i].text};
    return pngw_check_texts(pt, n_texts, err, err_len);
}

/*
 * The top of each matrix's colour scale, into tops[n]: its own largest
 * value with HEATMAP_SCALE_TILE, else the largest over all matrices (of
 * |value| with HEATMAP_SCALE_SYMMETRIC, whose scale runs from -top to
 * top); 1 where that is 0. Missing or non-finite values are refused, and
 * negative ones but with HEATMAP_SCALE_SYMMETRIC: the other scales start
 * at 0 and have no colour for them.
 */
static draw_status heatmap_scan_tops(const struct heatmap_matrix *mats,
                                     size_t n, enum heatmap_scale scale,
                                     float *tops, char *err, size_t err_len)
{
    const size_t rows = mats[0].rows, cols = mats[0].cols;
    const bool signed_values = scale == HEATMAP_SCALE_SYMMETRIC;
    float all = 0.0f;
    for (size_t m = 0; m < n; m++) {
        const float *v = mats[m].values;
        if (!v)
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "heatmap: matrix %zu has no values", m);
        float top = 0.0f;
        for (size_t i = 0; i < rows * cols; i++) {
            if (signed_values && !isfinite(v[i]))
                return errbuf_fail(err, err_len, DRAW_E_INVALID,
                                   "heatmap: matrix %zu [%zu][%zu] is %g; "
                                   "values must be finite",
                                   m, i / cols, i % cols, (double)v[i]);
            if (!signed_values && (!(v[i] >= 0.0f) || !isfinite(v[i])))
                return errbuf_fail(err, err_len, DRAW_E_INVALID,
                                   "heatmap: matrix %zu [%zu][%zu] is %g; "
                                   "weights must be finite and >= 0",
                                   m, i / cols, i % cols, (double)v[i]);
            const float mag = fabsf(v[i]);
            if (mag > top)
                top = mag;
        }
        tops[m] = top > 0.0f ? top : 1.0f;
        if (top > all)
            all = top;
    }
    for (size_t m = 0; scale != HEATMAP_SCALE_TILE && m < n; m++)
        tops[m] = all > 0.0f ? all : 1.0f;
    return DRAW_OK;
}

/*
 * Everything about the image that the arguments decide, values aside: the
 * checks, the layout and its size. On DRAW_OK *f is the labels' font (NULL
 * without labels), the caller's to close; on failure it is closed.
 */
static draw_status heatmap_plan(const struct heatmap_matrix *mats, size_t n,
                                const struct heatmap_options *opts,
                                const struct heatmap_text *texts,
                                size_t n_texts, struct heatmap_layout *l,
                                struct font **f, char *err, size_t err_len)
{
    *f = NULL;
    draw_status st =
        heatmap_check_inputs(mats, n, opts, texts, n_texts, err, err_len);
    /* The bare image has a pixel or more per value: once it passes the
     * caps, so does reading the values. */
    if (st == DRAW_OK)
        st = heatmap_layout_cells(l, mats, n, opts, err, err_len);
    if (st == DRAW_OK)
        st = heatmap_check_size(l, opts, err, err_len);
    if (st == DRAW_OK && opts->labels)
        st = heatmap_layout_labels(l, mats, n, opts, f, err, err_len);
    if (st != DRAW_OK) {
        font_close(*f);
        *f = NULL;
    }
    return st;
}

/* ----------------------------------------------------------------- API */

draw_status heatmap_measure(const struct heatmap_matrix *mats, size_t n,
                            const struct heatmap_options *opts,
                            const struct heatmap_text *texts, size_t n_texts,
                            int *width, int *height, char *err, size_t err_len)
{
    *width = *height = 0;
    if (err && err_len)
        err[0] = '\0';
    struct heatmap_layout l;
    struct font *f;
    const draw_status st =
        heatmap_plan(mats, n, opts, texts, n_texts, &l, &f, err, err_len);
    font_close(f);
    if (st == DRAW_OK) {
        *width = l.width;
        *height = l.height;
    }
    return st;
}

/* What either writer starts from: the layout, its font (NULL without
 * labels) and each matrix's top of the colour scale. On DRAW_OK the
 * caller closes *f with font_close() and frees *tops; on failure nothing
 * is held. */
static draw_status prepare(const struct heatmap_matrix *mats, size_t n,
                           const struct heatmap_options *opts,
                           const struct heatmap_text *texts, size_t n_texts,
                           struct heatmap_layout *l, struct font **f,
                           float **tops, char *err, size_t err_len)
{
    *tops = NULL;
    *f = NULL;
    if (err && err_len)
        err[0] = '\0';
    draw_status st =
        heatmap_plan(mats, n, opts, texts, n_texts, l, f, err, err_len);
    if (st != DRAW_OK)
        return st;
    *tops = malloc(n * sizeof **tops);
    st = *tops ? heatmap_scan_tops(mats, n, opts->scale, *tops, err, err_len)
               : errbuf_fail(err, err_len, DRAW_E_NOMEM,
                             "heatmap: out of memory for %zu scales", n);
    if (st != DRAW_OK) {
        font_close(*f);
        free(*tops);
        *f = NULL;
        *tops = NULL;
    }
    return st;
}

draw_status heatmap_render_png(const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const struct heatmap_text *texts, size_t n_texts,
                               unsigned char **png, size_t *png_len, char *err,
                               size_t err_len)
{
    *png = NULL;
    *png_len = 0;
    struct heatmap_layout l;
    struct font *f;
    float *tops;
    draw_status st =
        prepare(mats, n, opts, texts, n_texts, &l, &f, &tops, err, err_len);
    if (st != DRAW_OK)
        return st;
    const size_t bytes = (size_t)l.width * (size_t)l.height * 3;
    struct font_canvas canvas = {NULL, l.width, l.height, 3};
    if (!(canvas.pixels = malloc(bytes)))
        st = errbuf_fail(err, err_len, DRAW_E_NOMEM,
                         "heatmap: out of memory for %d x %d px", l.width,
                         l.height);
    if (st == DRAW_OK) {
        const struct heatmap_painter p = heatmap_canvas_painter(&canvas);
        heatmap_draw_image(&p, &l, f, mats, n, opts, tops, true);
    }
    font_close(f);
    free(tops);
    if (st != DRAW_OK) {
        free(canvas.pixels);
        return st;
    }

    /* raw rows plus half again for zlib's worst case and the chunks, and
     * the texts (each under PNGW_MAX_TEXT_BYTES, or pngw_encode refuses) */
    struct pngw_text pt[PNGW_MAX_TEXTS];
    size_t cap = bytes + bytes / 2 + ((size_t)1 << 20);
    for (size_t i = 0; i < n_texts; i++) {
        pt[i].key = texts[i].key;
        pt[i].text = texts[i].text;
        if (texts[i].text)
            cap += strnlen(texts[i].text, PNGW_MAX_TEXT_BYTES + 1) + 128;
    }
    st = pngw_encode(canvas.pixels, (size_t)l.width, (size_t)l.height, 3, pt,
                     n_texts, cap, png, png_len, err, err_len);
    free(canvas.pixels);
    return st;
}

/* ------------------------------------------------------------------ SVG */

draw_status heatmap_measure_svg(const struct heatmap_matrix *mats, size_t n,
                                const struct heatmap_options *opts,
                                const struct heatmap_text *texts,
                                size_t n_texts, int *width, int *height,
                                size_t *bytes, char *err, size_t err_len)
{
    *bytes = 0;
    *width = *height = 0;
    if (err && err_len)
        err[0] = '\0';
    struct heatmap_layout l;
    struct font *f;
    const draw_status st =
        heatmap_plan(mats, n, opts, texts, n_texts, &l, &f, err, err_len);
    if (st != DRAW_OK)
        return st;
    /* everything but the cells, counted as written; the ticks' texts at
     * their longest; every cell a rectangle of its own */
    struct svgw w;
    svgw_init(&w, 0, true);
    const float one = 1.0f;
    heatmap_svg_write(&w, &l, f, mats, n, opts, texts, n_texts, &one, false);
    font_close(f);
    const size_t ticks =
        HEATMAP_MAX_TICKS * sizeof(((struct heatmap_ticks *)0)->text[0]);
    const size_t cells = n * l.rows * l.cols; /* under 2^40: the caps */
    *bytes = w.len + ticks + cells * HEATMAP_SVG_RECT_MAX;
    if (*bytes > HEATMAP_SVG_MAX_BYTES) {
        const size_t mib = (*bytes >> 20) + 1;
        *bytes = 0;
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "heatmap: the SVG of %zu cells could take up to "
                           "%zu MiB, over the cap of %zu MiB",
                           cells, mib, HEATMAP_SVG_MAX_BYTES >> 20);
    }
    *width = l.width;
    *height = l.height;
    return DRAW_OK;
}

draw_status heatmap_render_svg(const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const struct heatmap_text *texts, size_t n_texts,
                               size_t max_bytes, char **svg, size_t *svg_len,
                               char *err, size_t err_len)
{
    *svg = NULL;
    *svg_len = 0;
    struct heatmap_layout l;
    struct font *f;
    float *tops;
    draw_status st =
        prepare(mats, n, opts, texts, n_texts, &l, &f, &tops, err, err_len);
    if (st != DRAW_OK)
        return st;
    struct svgw w;
    svgw_init(&w, max_bytes, false);
    heatmap_svg_write(&w, &l, f, mats, n, opts, texts, n_texts, tops, true);
    const bool nomem = w.nomem;
    *svg = svgw_take(&w, svg_len);
    if (!*svg)
        st = nomem
                 ? errbuf_fail(err, err_len, DRAW_E_NOMEM,
                               "heatmap: out of memory for the SVG")
                 : errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                               "heatmap: the SVG is over %zu bytes", max_bytes);
    font_close(f);
    free(tops);
    return st;
}
