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

/* A solid rectangle, clipped to the canvas (the layout keeps everything
 * inside; the clip makes sure a slip there cannot write out of bounds). */
static void heatmap_fill(struct font_canvas *c, int x, int y, int w, int h,
                         const unsigned char rgb[3])
{
    const int x1 = x + w > c->width ? c->width : x + w;
    const int y1 = y + h > c->height ? c->height : y + h;
    x = x < 0 ? 0 : x;
    y = y < 0 ? 0 : y;
    for (int yy = y; yy < y1; yy++) {
        unsigned char *p =
            c->pixels + ((size_t)yy * (size_t)c->width + (size_t)x) * 3;
        for (int xx = x; xx < x1; xx++, p += 3) {
            p[0] = rgb[0];
            p[1] = rgb[1];
            p[2] = rgb[2];
        }
    }
}

/* Top-left of matrix i's panel. */
static void heatmap_panel_origin(const struct heatmap_layout *l, size_t i,
                                 int *mx, int *my)
{
    *mx = l->x0 + (int)(i % l->grid_cols) * l->pitch_x;
    *my = l->y0 + (int)(i / l->grid_cols) * l->pitch_y;
}

/* A cell no query may attend: light grey crossed by darker diagonals.
 * The diagonals run through the panel, not each cell (a pixel (x, y) of
 * the panel is dark where x + y is a multiple of 4), so that cells of
 * one pixel still show stripes rather than one flat grey a colour map
 * could have, and the page draws the same pixels. */
static void heatmap_fill_not_allowed(struct font_canvas *c, int mx, int my,
                                     int x, int y, int cell)
{
    static const unsigned char light[3] = {232, 232, 232};
    static const unsigned char dark[3] = {170, 170, 170};
    heatmap_fill(c, x, y, cell, cell, light);
    for (int d = 0; d < cell; d++) {
        const int first = (4 - (x - mx + y + d - my) % 4) % 4;
        for (int k = first; k < cell; k += 4)
            heatmap_fill(c, x + k, y + d, 1, 1, dark);
    }
}

/* Cells as solid squares, coloured by value / the top of its matrix's
 * scale; hatched where a query may not attend. */
static void heatmap_draw_cells(struct font_canvas *c,
                               const struct heatmap_layout *l,
                               const struct heatmap_matrix *mats, size_t n,
                               enum heatmap_colormap map,
                               const unsigned char *not_allowed,
                               const float *tops)
{
    const size_t rows = l->rows, cols = l->cols;
    const int cell = l->cell;
    for (size_t i = 0; i < n; i++) {
        int mx, my;
        heatmap_panel_origin(l, i, &mx, &my);
        const float *v = mats[i].values;
        const float vmax = tops[i];
        for (size_t r = 0; r < rows; r++) {
            for (size_t k = 0; k < cols; k++) {
                if (not_allowed && not_allowed[r * cols + k]) {
                    heatmap_fill_not_allowed(c, mx, my, mx + (int)k * cell,
                                             my + (int)r * cell, cell);
                    continue;
                }
                unsigned char rgb[3];
                colormap_lookup(map, v[r * cols + k] / vmax, rgb);
                heatmap_fill(c, mx + (int)k * cell, my + (int)r * cell, cell,
                             cell, rgb);
            }
        }
    }
}

/* Query tokens right-aligned left of the matrix, key tokens above it. */
static void heatmap_draw_token_labels(struct font_canvas *c,
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
        font_draw(f, c, mx - HEATMAP_LABEL_GAP - w, y, s, l->label_max_w,
                  FONT_HORIZONTAL, heatmap_ink);
        if (l->row_step > 1) /* a mark shows which of the rows is meant */
            heatmap_fill(c, mx - HEATMAP_LABEL_GAP + 2,
                         my + (int)r * l->cell + l->cell / 2,
                         HEATMAP_LABEL_GAP - 3, 1, heatmap_axis);
    }
    for (size_t k = 0; l->col_step && k < l->cols; k += l->col_step) {
        const char *s = heatmap_label(opts->col_labels, k, buf, sizeof buf);
        const int xc = mx + (int)k * l->cell + l->cell / 2;
        if (l->col_step > 1)
            heatmap_fill(c, xc, my - HEATMAP_LABEL_GAP + 2, 1,
                         HEATMAP_LABEL_GAP - 3, heatmap_axis);
        if (l->key_angle == FONT_HORIZONTAL) {
            const int w =
                font_text_width(f, s, l->label_max_w, FONT_HORIZONTAL);
            font_draw(f, c, xc - w / 2, my - l->key_base, s, l->label_max_w,
                      FONT_HORIZONTAL, heatmap_ink);
        } else {
            /* move the baseline start so the text's middle passes through
             * the anchor (xc, my - key_base) */
            const int d = heatmap_diag(mid);
            font_draw(f, c, xc + d, my - l->key_base + d, s, l->label_max_w,
                      FONT_DIAGONAL, heatmap_ink);
        }
    }
}

/* Text centred over [left, left + span), kept inside [lo, hi). */
static void heatmap_draw_centred(struct font_canvas *c, struct font *f,
                                 const char *s, int left, int span, int lo,
                                 int hi, int baseline)
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
    font_draw(f, c, x, baseline, s, max_w, FONT_HORIZONTAL, heatmap_ink);
}

/* The colorbar, and its ticks: values up to vmax, or percentages of each
 * matrix's own top. */
static void heatmap_draw_colorbar(struct font_canvas *c,
                                  const struct heatmap_layout *l,
                                  struct font *f,
                                  const struct heatmap_options *opts,
                                  float vmax)
{
    const enum heatmap_colormap map = opts->colormap;
    const bool percent = opts->scale == HEATMAP_SCALE_TILE;
    const double top = percent ? 1.0 : (double)vmax;
    struct heatmap_ticks ticks;
    heatmap_ticks_make(top, l->tick_fit, percent, &ticks);
    const int x = l->bar_x, y = l->bar_y, h = l->bar_h;
    /* top row is vmax, bottom row 0 */
    for (int yy = 0; yy < h; yy++) {
        unsigned char rgb[3];
        colormap_lookup(map, (float)(h - 1 - yy) / (float)(h - 1), rgb);
        heatmap_fill(c, x, y + yy, HEATMAP_BAR_W, 1, rgb);
    }
    heatmap_fill(c, x - 1, y - 1, HEATMAP_BAR_W + 2, 1, heatmap_axis);
    heatmap_fill(c, x - 1, y + h, HEATMAP_BAR_W + 2, 1, heatmap_axis);
    heatmap_fill(c, x - 1, y, 1, h, heatmap_axis);
    heatmap_fill(c, x + HEATMAP_BAR_W, y, 1, h, heatmap_axis);

    font_set_size(f, l->px);
    const int cap = font_cap_height(f);
    for (size_t i = 0; i < ticks.n; i++) {
        double t = ticks.value[i] / top;
        if (t > 1.0)
            t = 1.0;
        const int ty = y + h - 1 - (int)lround(t * (double)(h - 1));
        heatmap_fill(c, x + HEATMAP_BAR_W + 1, ty, HEATMAP_TICK_LEN, 1,
                     heatmap_axis);
        font_draw(f, c,
                  x + HEATMAP_BAR_W + 1 + HEATMAP_TICK_LEN + HEATMAP_TICK_GAP,
                  ty + (cap + 1) / 2, ticks.text[i], l->tick_w, FONT_HORIZONTAL,
                  heatmap_ink);
    }
}

static void heatmap_draw_labels(struct font_canvas *c,
                                const struct heatmap_layout *l, struct font *f,
                                const struct heatmap_matrix *mats, size_t n,
                                const struct heatmap_options *opts, float vmax)
{
    for (size_t i = 0; i < n; i++) {
        int mx, my;
        heatmap_panel_origin(l, i, &mx, &my);
        heatmap_draw_token_labels(c, l, f, opts, mx, my);
        if (l->panel_title_h && mats[i].title) {
            font_set_size(f, l->panel_px);
            const int base =
                my - l->key_h - HEATMAP_PANEL_GAP - font_descent(f);
            /* within this panel's share of the row */
            const int lo = mx - l->left_ext;
            heatmap_draw_centred(
                c, f, mats[i].title, mx, l->mat_w, lo,
                heatmap_max(lo + l->pitch_x - HEATMAP_GRID_GAP_X / 2,
                            mx + l->mat_w),
                base);
        }
    }
    if (l->title) {
        font_set_size(f, l->title_px);
        const int right =
            l->x0 + ((int)l->grid_cols - 1) * l->pitch_x + l->mat_w;
        heatmap_draw_centred(c, f, l->title, l->x0, right - l->x0,
                             HEATMAP_MARGIN, l->width - HEATMAP_MARGIN,
                             HEATMAP_MARGIN + font_ascent(f));
    }
    heatmap_draw_colorbar(c, l, f, opts, vmax);
}

void heatmap_draw_image(struct font_canvas *c, const struct heatmap_layout *l,
                        struct font *f, const struct heatmap_matrix *mats,
                        size_t n, const struct heatmap_options *opts,
                        const float *tops)
{
    memset(c->pixels, heatmap_white[0],
           (size_t)c->width * (size_t)c->height * c->channels);
    heatmap_draw_cells(c, l, mats, n, opts->colormap, opts->not_allowed, tops);
    if (f)
        heatmap_draw_labels(c, l, f, mats, n, opts, tops[0]);
}
