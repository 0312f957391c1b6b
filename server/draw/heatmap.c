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
    if ((unsigned)opts->colormap > HEATMAP_GRAY)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: unknown colormap %u",
                           (unsigned)opts->colormap);
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
        if (!mats[i].values)
            return errbuf_fail(err, err_len, DRAW_E_INVALID,
                               "heatmap: matrix %zu has no values", i);
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
    return DRAW_OK;
}

/*
 * The largest value over all matrices, the top of the colour scale: 1 when
 * all are 0. Negative or non-finite values are refused: the scale starts
 * at 0 and has no colour for them.
 */
static draw_status heatmap_scan_max(const struct heatmap_matrix *mats, size_t n,
                                    float *vmax, char *err, size_t err_len)
{
    const size_t rows = mats[0].rows, cols = mats[0].cols;
    float top = 0.0f;
    for (size_t m = 0; m < n; m++) {
        const float *v = mats[m].values;
        for (size_t i = 0; i < rows * cols; i++) {
            if (!(v[i] >= 0.0f) || !isfinite(v[i]))
                return errbuf_fail(err, err_len, DRAW_E_INVALID,
                                   "heatmap: matrix %zu [%zu][%zu] is %g; "
                                   "weights must be finite and >= 0",
                                   m, i / cols, i % cols, (double)v[i]);
            if (v[i] > top)
                top = v[i];
        }
    }
    *vmax = top > 0.0f ? top : 1.0f;
    return DRAW_OK;
}

/* ----------------------------------------------------------------- API */

draw_status heatmap_render_png(const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const struct heatmap_text *texts, size_t n_texts,
                               unsigned char **png, size_t *png_len, char *err,
                               size_t err_len)
{
    *png = NULL;
    *png_len = 0;
    if (err && err_len)
        err[0] = '\0';
    draw_status st =
        heatmap_check_inputs(mats, n, opts, texts, n_texts, err, err_len);
    if (st != DRAW_OK)
        return st;
    /* The bare image has a pixel or more per value: once it passes the
     * caps, so does reading the values. */
    struct heatmap_layout l;
    st = heatmap_layout_cells(&l, mats, n, opts, err, err_len);
    if (st == DRAW_OK)
        st = heatmap_check_size(&l, opts, err, err_len);
    float vmax = 1.0f;
    if (st == DRAW_OK)
        st = heatmap_scan_max(mats, n, &vmax, err, err_len);
    struct font *f = NULL;
    if (st == DRAW_OK && opts->labels)
        st = heatmap_layout_labels(&l, mats, n, opts, vmax, &f, err, err_len);
    if (st != DRAW_OK) {
        font_close(f);
        return st;
    }
    const size_t bytes = (size_t)l.width * (size_t)l.height * 3;
    struct font_canvas canvas = {malloc(bytes), l.width, l.height, 3};
    if (!canvas.pixels) {
        font_close(f);
        return errbuf_fail(err, err_len, DRAW_E_NOMEM,
                           "heatmap: out of memory for %d x %d px", l.width,
                           l.height);
    }
    heatmap_draw_image(&canvas, &l, f, mats, n, opts, vmax);
    font_close(f);

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
