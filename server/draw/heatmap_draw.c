/*
 * heatmap_draw.c - painting a laid-out heatmap: solid cells in the
 * colormap, token labels beside and above each matrix, panel and image
 * titles, the colorbar and its ticks. Positions all come from the layout.
 */
#include "heatmap_draw.h"

#include "colormap.h"

#include <math.h>
#include <string.h>

static const unsigned char heatmap_white[3] = {255, 255, 255};
static const unsigned char heatmap_ink[3] = {34, 34, 34};
static const unsigned char heatmap_axis[3] = {110, 110, 110};
const unsigned char heatmap_hatch_light[3] = {232, 232, 232};
const unsigned char heatmap_hatch_dark[3] = {170, 170, 170};

/* ------------------------------------------------------ raster painter */

static void canvas_fill(void *ctx, int x, int y, int w, int h,
                        const unsigned char rgb[3])
{
    struct font_canvas *c = ctx;
    const unsigned ch = c->channels;
    const int x1 = x + w > c->width ? c->width : x + w;
    const int y1 = y + h > c->height ? c->height : y + h;
    x = x < 0 ? 0 : x;
    y = y < 0 ? 0 : y;
    for (int yy = y; yy < y1; yy++) {
        unsigned char *px =
            c->pixels + ((size_t)yy * (size_t)c->width + (size_t)x) * ch;
        for (int xx = x; xx < x1; xx++, px += ch) {
            px[0] = rgb[0];
            px[1] = rgb[1];
            px[2] = rgb[2];
            if (ch == 4)
                px[3] = 255;
        }
    }
}

/* The diagonals run through the panel, not each cell, so that cells of
 * one pixel still show stripes rather than one flat grey a colour map
 * could have, and the page draws the same pixels. */
static void canvas_hatch(void *ctx, int mx, int my, int x, int y, int w, int h)
{
    canvas_fill(ctx, x, y, w, h, heatmap_hatch_light);
    for (int d = 0; d < h; d++) {
        const int first = (4 - (x - mx + y + d - my) % 4) % 4;
        for (int k = first; k < w; k += 4)
            canvas_fill(ctx, x + k, y + d, 1, 1, heatmap_hatch_dark);
    }
}

static void canvas_text(void *ctx, struct font *f, int x, int y,
                        const char *utf8, int max_width, enum font_angle angle,
                        const unsigned char rgb[3])
{
    font_draw(f, ctx, x, y, utf8, max_width, angle, rgb);
}

struct heatmap_painter heatmap_canvas_painter(struct font_canvas *c)
{
    return (struct heatmap_painter){c, canvas_fill, canvas_hatch, canvas_text};
}

/* ------------------------------------------------------------- drawing */

/* Top-left of matrix i's panel. */
static void heatmap_panel_origin(const struct heatmap_layout *l, size_t i,
                                 int *mx, int *my)
{
    *mx = l->x0 + (int)(i % l->grid_cols) * l->pitch_x;
    *my = l->y0 + (int)(i / l->grid_cols) * l->pitch_y;
}

/* Where value v falls on a scale of 0 .. 1: v / top, or with a
 * symmetric scale (-top .. top) 0.5 + 0.5 * v / top, which keeps 0 at
 * exactly 0.5 and cannot overflow as (v + top) / (2 * top) could. */
static float heatmap_scale_t(float v, float top, bool symmetric)
{
    return symmetric ? 0.5f + 0.5f * (v / top) : v / top;
}

/* The colour-table entry of cell e of matrix v, or -1 where a query may
 * not attend. */
static int heatmap_cell_entry(const float *v, const unsigned char *not_allowed,
                              size_t e, float vmax, bool symmetric)
{
    if (not_allowed && not_allowed[e])
        return -1;
    return (int)colormap_index(heatmap_scale_t(v[e], vmax, symmetric));
}

/* Cells as solid squares, coloured by their place on their matrix's
 * scale, hatched where a query may not attend; a run of equal cells in a
 * row is one rectangle (the same pixels, fewer shapes in an SVG). */
static void heatmap_draw_cells(const struct heatmap_painter *p,
                               const struct heatmap_layout *l,
                               const struct heatmap_matrix *mats, size_t n,
                               const struct heatmap_options *opts,
                               const float *tops)
{
    const enum heatmap_colormap map = opts->colormap;
    const bool symmetric = opts->scale == HEATMAP_SCALE_SYMMETRIC;
    const size_t rows = l->rows, cols = l->cols;
    const int cell = l->cell;
    const unsigned char(*table)[3] = colormap_table(map);
    for (size_t i = 0; i < n; i++) {
        int mx, my;
        heatmap_panel_origin(l, i, &mx, &my);
        const float *v = mats[i].values;
        const float vmax = tops[i];
        const unsigned char *not_allowed = opts->not_allowed_each
                                               ? opts->not_allowed_each[i]
                                               : opts->not_allowed;
        for (size_t r = 0; r < rows; r++) {
            const int y = my + (int)r * cell;
            size_t k = 0;
            while (k < cols) {
                const int entry = heatmap_cell_entry(
                    v, not_allowed, r * cols + k, vmax, symmetric);
                size_t end = k + 1;
                while (end < cols &&
                       heatmap_cell_entry(v, not_allowed, r * cols + end, vmax,
                                          symmetric) == entry)
                    end++;
                const int x = mx + (int)k * cell, w = (int)(end - k) * cell;
                if (entry < 0)
                    p->hatch(p->ctx, mx, my, x, y, w, cell);
                else
                    p->fill(p->ctx, x, y, w, cell, table[entry]);
                k = end;
            }
        }
    }
}

/* Query tokens right-aligned left of the matrix, key tokens above it. */
static void heatmap_draw_token_labels(const struct heatmap_painter *p,
                                      const struct heatmap_layout *l,
                                      struct font *f,
                                      const struct heatmap_options *opts,
                                      int mx, int my)
{
    char buf[32];
    font_set_size(f, l->px);
    const int cap = font_cap_height(f), mid = cap / 2;
    for (size_t r = 0; l->row_step && r < l->rows; r += l->row_step) {
        const char *s = heatmap_label(opts->row_labels, r, buf, sizeof buf);
        const int w = font_text_width(f, s, l->label_max_w, FONT_HORIZONTAL);
        const int y = my + (int)r * l->cell + (l->cell + cap) / 2;
        p->text(p->ctx, f, mx - HEATMAP_LABEL_GAP - w, y, s, l->label_max_w,
                FONT_HORIZONTAL, heatmap_ink);
        if (l->row_step > 1) /* a mark shows which of the rows is meant */
            p->fill(p->ctx, mx - HEATMAP_LABEL_GAP + 2,
                    my + (int)r * l->cell + l->cell / 2, HEATMAP_LABEL_GAP - 3,
                    1, heatmap_axis);
    }
    for (size_t k = 0; l->col_step && k < l->cols; k += l->col_step) {
        const char *s = heatmap_label(opts->col_labels, k, buf, sizeof buf);
        const int xc = mx + (int)k * l->cell + l->cell / 2;
        if (l->col_step > 1)
            p->fill(p->ctx, xc, my - HEATMAP_LABEL_GAP + 2, 1,
                    HEATMAP_LABEL_GAP - 3, heatmap_axis);
        if (l->key_angle == FONT_HORIZONTAL) {
            const int w =
                font_text_width(f, s, l->label_max_w, FONT_HORIZONTAL);
            p->text(p->ctx, f, xc - w / 2, my - l->key_base, s, l->label_max_w,
                    FONT_HORIZONTAL, heatmap_ink);
        } else {
            /* move the baseline start so the text's middle passes through
             * the anchor (xc, my - key_base) */
            const int d = heatmap_diag(mid);
            p->text(p->ctx, f, xc + d, my - l->key_base + d, s, l->label_max_w,
                    FONT_DIAGONAL, heatmap_ink);
        }
    }
}

/* Text centred over [left, left + span), kept inside [lo, hi). */
static void heatmap_draw_centred(const struct heatmap_painter *p,
                                 struct font *f, const char *s, int left,
                                 int span, int lo, int hi, int baseline)
{
    const int max_w = hi - lo;
    if (max_w <= 0)
        return;
    const int w = font_text_width(f, s, max_w, FONT_HORIZONTAL);
    int x = left + (span - w) / 2;
    if (x + w > hi)
        x = hi - w;
    if (x < lo)
        x = lo;
    p->text(p->ctx, f, x, baseline, s, max_w, FONT_HORIZONTAL, heatmap_ink);
}

/* The colorbar, and its ticks: values up to vmax, or from -vmax to vmax
 * on a symmetric scale, or percentages of each matrix's own top. */
static void heatmap_draw_colorbar(const struct heatmap_painter *p,
                                  const struct heatmap_layout *l,
                                  struct font *f,
                                  const struct heatmap_options *opts,
                                  float vmax)
{
    const enum heatmap_colormap map = opts->colormap;
    const bool percent = opts->scale == HEATMAP_SCALE_TILE;
    const bool symmetric = opts->scale == HEATMAP_SCALE_SYMMETRIC;
    const double top = percent ? 1.0 : (double)vmax;
    struct heatmap_ticks ticks;
    if (symmetric)
        heatmap_ticks_symmetric(top, l->tick_fit, &ticks);
    else
        heatmap_ticks_make(top, l->tick_fit, percent, &ticks);
    const int x = l->bar_x, y = l->bar_y, h = l->bar_h;
    /* top row is the top of the scale, bottom row its bottom (0, or -vmax
     * on a symmetric scale); rows of one table entry together */
    const unsigned char(*table)[3] = colormap_table(map);
    for (int yy = 0; yy < h;) {
        const unsigned entry =
            colormap_index((float)(h - 1 - yy) / (float)(h - 1));
        int end = yy + 1;
        while (end < h &&
               colormap_index((float)(h - 1 - end) / (float)(h - 1)) == entry)
            end++;
        p->fill(p->ctx, x, y + yy, HEATMAP_BAR_W, end - yy, table[entry]);
        yy = end;
    }
    p->fill(p->ctx, x - 1, y - 1, HEATMAP_BAR_W + 2, 1, heatmap_axis);
    p->fill(p->ctx, x - 1, y + h, HEATMAP_BAR_W + 2, 1, heatmap_axis);
    p->fill(p->ctx, x - 1, y, 1, h, heatmap_axis);
    p->fill(p->ctx, x + HEATMAP_BAR_W, y, 1, h, heatmap_axis);

    font_set_size(f, l->px);
    const int cap = font_cap_height(f);
    for (size_t i = 0; i < ticks.n; i++) {
        double t = symmetric ? 0.5 + 0.5 * (ticks.value[i] / top)
                             : ticks.value[i] / top;
        t = t > 1.0 ? 1.0 : t < 0.0 ? 0.0 : t;
        const int ty = y + h - 1 - (int)lround(t * (double)(h - 1));
        p->fill(p->ctx, x + HEATMAP_BAR_W + 1, ty, HEATMAP_TICK_LEN, 1,
                heatmap_axis);
        p->text(p->ctx, f,
                x + HEATMAP_BAR_W + 1 + HEATMAP_TICK_LEN + HEATMAP_TICK_GAP,
                ty + (cap + 1) / 2, ticks.text[i], l->tick_w, FONT_HORIZONTAL,
                heatmap_ink);
    }
}

static void heatmap_draw_labels(const struct heatmap_painter *p,
                                const struct heatmap_layout *l, struct font *f,
                                const struct heatmap_matrix *mats, size_t n,
                                const struct heatmap_options *opts, float vmax)
{
    for (size_t i = 0; i < n; i++) {
        int mx, my;
        heatmap_panel_origin(l, i, &mx, &my);
        heatmap_draw_token_labels(p, l, f, opts, mx, my);
        if (l->panel_title_h && mats[i].title) {
            font_set_size(f, l->panel_px);
            const int base =
                my - l->key_h - HEATMAP_PANEL_GAP - font_descent(f);
            /* within this panel's share of the row */
            const int lo = mx - l->left_ext;
            heatmap_draw_centred(
                p, f, mats[i].title, mx, l->mat_w, lo,
                heatmap_max(lo + l->pitch_x - HEATMAP_GRID_GAP_X / 2,
                            mx + l->mat_w),
                base);
        }
    }
    const int right = l->x0 + ((int)l->grid_cols - 1) * l->pitch_x + l->mat_w;
    int top = HEATMAP_MARGIN;
    if (l->title) {
        font_set_size(f, l->title_px);
        heatmap_draw_centred(p, f, l->title, l->x0, right - l->x0,
                             HEATMAP_MARGIN, l->width - HEATMAP_MARGIN,
                             top + font_ascent(f));
        top += font_ascent(f) + font_descent(f);
    }
    if (l->note) { /* under the title, in the labels' size */
        font_set_size(f, l->px);
        heatmap_draw_centred(p, f, l->note, l->x0, right - l->x0,
                             HEATMAP_MARGIN, l->width - HEATMAP_MARGIN,
                             top + font_ascent(f));
    }
    heatmap_draw_colorbar(p, l, f, opts, vmax);
}

void heatmap_draw_image(const struct heatmap_painter *p,
                        const struct heatmap_layout *l, struct font *f,
                        const struct heatmap_matrix *mats, size_t n,
                        const struct heatmap_options *opts, const float *tops,
                        bool cells)
{
    p->fill(p->ctx, 0, 0, l->width, l->height, heatmap_white);
    if (cells)
        heatmap_draw_cells(p, l, mats, n, opts, tops);
    if (f)
        heatmap_draw_labels(p, l, f, mats, n, opts, tops[0]);
}
