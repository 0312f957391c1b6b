/*
 * heatmap.c - layout and drawing of attention heatmaps; colours come from
 * colormap.c, text from font.c, PNG bytes from png.c.
 *
 * A render validates its inputs, computes the layout in whole pixels (every
 * size checked against the caps before anything is allocated), draws into
 * one RGB canvas that it owns, and encodes it. Nothing is shared between
 * renders but the read-only font bytes, so renders may run in parallel.
 *
 * Geometry of the labelled image, per panel (one matrix):
 *
 *             panel title
 *           k e y s (turned 45 degrees when wider than a cell)
 *   query  +-----------+
 *   tokens |  matrix   |         colorbar with ticks on the right of the
 *          +-----------+         whole grid, from the first matrix top
 *
 * The image title sits above everything.
 */
#include "errbuf.h"
#include "heatmap.h"

#include "colormap.h"
#include "font.h"
#include "pngw.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caps on what comes from outside. */
#define HEATMAP_MAX_MATRICES 1024u
#define HEATMAP_MAX_CELL 256u   /* an explicit cell size */
#define HEATMAP_MAX_SIDE 32768u /* image width or height */
/* Pixels of one image even when max_pixels is 0: 192 MiB of RGB. */
#define HEATMAP_MAX_AREA ((size_t)64 << 20)

/* Automatic cell: the matrix gets at least this many pixels on its longer
 * side, with cells of at most HEATMAP_AUTO_MAX_CELL pixels. */
#define HEATMAP_AUTO_SIDE 300u
#define HEATMAP_AUTO_MAX_CELL 48u

/* Layout, in pixels. */
#define HEATMAP_MARGIN 12     /* around everything */
#define HEATMAP_LABEL_GAP 6   /* between labels and their matrix */
#define HEATMAP_TITLE_GAP 10  /* below the image title */
#define HEATMAP_PANEL_GAP 6   /* below a panel title */
#define HEATMAP_GRID_GAP_X 28 /* between panels, besides their labels */
#define HEATMAP_GRID_GAP_Y 22
#define HEATMAP_BAR_GAP 18 /* matrices to colorbar */
#define HEATMAP_BAR_W 16
#define HEATMAP_BAR_MIN_H 80
#define HEATMAP_TICK_LEN 4
#define HEATMAP_TICK_GAP 4 /* tick mark to its value */
#define HEATMAP_MAX_TICKS 5
/* Cells smaller than this get no labels at all: a label could not be told
 * apart from its neighbours' rows. */
#define HEATMAP_MIN_LABEL_CELL 4
#define HEATMAP_TITLE_MAX_W 900 /* a title may widen the image this far */

/* cos 45 degrees as n / 256, for the geometry of turned labels */
#define HEATMAP_COS45_256 181

static const unsigned char heatmap_white[3] = {255, 255, 255};
static const unsigned char heatmap_ink[3] = {34, 34, 34};
static const unsigned char heatmap_axis[3] = {110, 110, 110};

/* The values written next to the colorbar. */
struct heatmap_ticks {
    size_t n;
    double value[HEATMAP_MAX_TICKS];
    char text[HEATMAP_MAX_TICKS][32];
    int max_w; /* widest text, pixels */
};

/* Where everything goes; all in pixels of the final image. */
struct heatmap_layout {
    size_t rows, cols;           /* of each matrix */
    size_t grid_cols, grid_rows; /* panels across and down */
    int cell, mat_w, mat_h;
    int pitch_x, pitch_y; /* from one matrix's top-left to the next's */
    int x0, y0;           /* top-left of the first matrix */
    int width, height;

    /* labels only */
    unsigned px, panel_px, title_px; /* font sizes */
    size_t row_step, col_step;       /* label every k-th; 0 = none */
    enum font_angle key_angle;
    int label_max_w;   /* labels longer than this get an ellipsis */
    int left_ext;      /* panel room left of the matrix */
    int key_h;         /* key labels above the matrix */
    int key_base;      /* key baseline (or turned anchor) above it */
    int panel_title_h; /* 0 when no panel has a title */
    const char *title; /* over the image; NULL for none */
    int title_w;
    int bar_x, bar_y, bar_h;
    struct heatmap_ticks ticks;
};

static int heatmap_max(int a, int b)
{
    return a > b ? a : b;
}

/* v * cos 45 degrees, rounded up, for v >= 0 */
static int heatmap_diag(int v)
{
    return (v * HEATMAP_COS45_256 + 255) / 256;
}

/* ------------------------------------------------------------ validation */

static bool heatmap_check_inputs(const struct heatmap_matrix *mats, size_t n,
                                 const struct heatmap_options *opts,
                                 const struct heatmap_text *texts,
                                 size_t n_texts, char *err, size_t err_len)
{
    if (!opts) {
        errbuf_set(err, err_len, "heatmap: no options");
        return false;
    }
    if (!mats || n < 1 || n > HEATMAP_MAX_MATRICES) {
        errbuf_set(err, err_len, "heatmap: %zu matrices, expected 1 to %u",
                   mats ? n : 0, HEATMAP_MAX_MATRICES);
        return false;
    }
    if ((unsigned)opts->colormap > HEATMAP_GRAY) {
        errbuf_set(err, err_len, "heatmap: unknown colormap %u",
                   (unsigned)opts->colormap);
        return false;
    }
    if (opts->cell > HEATMAP_MAX_CELL) {
        errbuf_set(err, err_len, "heatmap: cell %u px, at most %u", opts->cell,
                   HEATMAP_MAX_CELL);
        return false;
    }
    const size_t rows = mats[0].rows, cols = mats[0].cols;
    if (rows < 1 || cols < 1 || rows > HEATMAP_MAX_SIDE ||
        cols > HEATMAP_MAX_SIDE) {
        errbuf_set(err, err_len, "heatmap: matrix of %zu x %zu, sides 1 to %u",
                   rows, cols, HEATMAP_MAX_SIDE);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!mats[i].values) {
            errbuf_set(err, err_len, "heatmap: matrix %zu has no values", i);
            return false;
        }
        if (mats[i].rows != rows || mats[i].cols != cols) {
            errbuf_set(err, err_len,
                       "heatmap: matrix %zu is %zu x %zu, matrix 0 is "
                       "%zu x %zu",
                       i, mats[i].rows, mats[i].cols, rows, cols);
            return false;
        }
    }
    if (n_texts > PNGW_MAX_TEXTS) {
        errbuf_set(err, err_len, "heatmap: %zu texts, at most %u", n_texts,
                   PNGW_MAX_TEXTS);
        return false;
    }
    if (n_texts > 0 && !texts) {
        errbuf_set(err, err_len, "heatmap: %zu texts but no array", n_texts);
        return false;
    }
    return true;
}

/*
 * The largest value over all matrices, the top of the colour scale: 1 when
 * all are 0. Negative or non-finite values are refused: the scale starts
 * at 0 and has no colour for them.
 */
static bool heatmap_scan_max(const struct heatmap_matrix *mats, size_t n,
                             float *vmax, char *err, size_t err_len)
{
    const size_t rows = mats[0].rows, cols = mats[0].cols;
    float top = 0.0f;
    for (size_t m = 0; m < n; m++) {
        const float *v = mats[m].values;
        for (size_t i = 0; i < rows * cols; i++) {
            if (!(v[i] >= 0.0f) || !isfinite(v[i])) {
                errbuf_set(err, err_len,
                           "heatmap: matrix %zu [%zu][%zu] is %g; weights "
                           "must be finite and >= 0",
                           m, i / cols, i % cols, (double)v[i]);
                return false;
            }
            if (v[i] > top)
                top = v[i];
        }
    }
    *vmax = top > 0.0f ? top : 1.0f;
    return true;
}

/* --------------------------------------------------------------- layout */

/* Automatic cell: ceil(300 / longer side), within 1 .. 48. */
static unsigned heatmap_auto_cell(size_t rows, size_t cols)
{
    const size_t side = rows > cols ? rows : cols;
    const size_t cell = (HEATMAP_AUTO_SIDE + side - 1) / side;
    if (cell > HEATMAP_AUTO_MAX_CELL)
        return HEATMAP_AUTO_MAX_CELL;
    return cell < 1 ? 1 : (unsigned)cell;
}

/* About square: ceil(sqrt(n)) panels across, as many rows as needed. */
static void heatmap_grid_shape(size_t n, size_t *across, size_t *down)
{
    size_t c = 1;
    while (c * c < n)
        c++;
    *across = c;
    *down = (n + c - 1) / c;
}

/*
 * Tick values: the smallest "nice" step (1, 2, 2.5 or 5 times a power of
 * ten) that gives at most max_n ticks from 0 to vmax; that leaves at least
 * 3 for max_n >= 4, since the steps grow at most 2x. Texts are the values
 * with as many decimals as the step needs: 0, 0.25, 0.5, 0.75, 1.
 */
static void heatmap_ticks_make(double vmax, size_t max_n,
                               struct heatmap_ticks *t)
{
    static const double mant[] = {1.0, 2.0, 2.5, 5.0};
    const int e0 = (int)floor(log10(vmax)) - 2;
    double step = vmax;
    int decimals = 0;
    for (int e = e0; e <= e0 + 4; e++) {
        const double p = pow(10.0, e);
        for (size_t k = 0; k < 4; k++) {
            const double s = mant[k] * p;
            if (floor(vmax / s * (1.0 + 1e-9)) + 1.0 <= (double)max_n) {
                step = s;
                decimals = -e + (k == 2 ? 1 : 0);
                goto found;
            }
        }
    }
found:
    t->n = (size_t)floor(vmax / step * (1.0 + 1e-9)) + 1;
    if (t->n > max_n)
        t->n = max_n;
    for (size_t i = 0; i < t->n; i++) {
        t->value[i] = step * (double)i;
        char *s = t->text[i];
        const size_t len = sizeof t->text[i];
        if (decimals > 6)
            snprintf(s, len, "%.3g", t->value[i]);
        else
            snprintf(s, len, "%.*f", decimals < 0 ? 0 : decimals, t->value[i]);
        /* 0.50 -> 0.5, 1.00 -> 1 */
        if (decimals > 0 && decimals <= 6 && strchr(s, '.')) {
            size_t end = strlen(s);
            while (end > 0 && s[end - 1] == '0')
                s[--end] = '\0';
            if (end > 0 && s[end - 1] == '.')
                s[--end] = '\0';
        }
    }
}

/* The text of label i: labels[i] ("" for a NULL entry), or the index when
 * there are no labels at all. */
static const char *heatmap_label(const char *const *labels, size_t i, char *buf,
                                 size_t len)
{
    if (!labels) {
        snprintf(buf, len, "%zu", i);
        return buf;
    }
    return labels[i] ? labels[i] : "";
}

/* Draw every step-th label, where step fits a label height `need` into
 * cells of `room` 256ths of a pixel each; 0 when cells are too small. */
static size_t heatmap_label_step(int cell, int room_256, int need)
{
    if (cell < HEATMAP_MIN_LABEL_CELL)
        return 0;
    return (size_t)((need * 256 + room_256 - 1) / room_256);
}

/* The bare matrix, or grid of matrices with a 1-cell gutter. */
static void heatmap_layout_bare(struct heatmap_layout *l)
{
    l->pitch_x = l->mat_w + l->cell;
    l->pitch_y = l->mat_h + l->cell;
    l->x0 = 0;
    l->y0 = 0;
    l->width = (int)l->grid_cols * l->pitch_x - l->cell;
    l->height = (int)l->grid_rows * l->pitch_y - l->cell;
}

/* Row labels: the step, and the width of the widest drawn one. */
static int heatmap_layout_rows(struct heatmap_layout *l, struct font *f,
                               const struct heatmap_options *opts)
{
    const int need = (int)l->px + 3; /* a line of text */
    l->row_step = heatmap_label_step(l->cell, l->cell * 256, need);
    int w = 0;
    for (size_t r = 0; l->row_step && r < l->rows; r += l->row_step) {
        char buf[32];
        const char *s = heatmap_label(opts->row_labels, r, buf, sizeof buf);
        w = heatmap_max(w,
                        font_text_width(f, s, l->label_max_w, FONT_HORIZONTAL));
    }
    return w;
}

/*
 * Key labels: level and centred over their columns when every one fits in
 * a cell, else turned 45 degrees, rising to the right from the column
 * centre. Sets key_angle, col_step, key_h and key_base; returns how far
 * turned labels reach past the matrix on the right, and in *left_over how
 * far the first one reaches past it on the left.
 */
static int heatmap_layout_keys(struct heatmap_layout *l, struct font *f,
                               const struct heatmap_options *opts,
                               int *left_over)
{
    const int asc = font_ascent(f), desc = font_descent(f);
    const int mid = font_cap_height(f) / 2;
    char buf[32];
    *left_over = 0;

    bool level = l->cell >= HEATMAP_MIN_LABEL_CELL;
    for (size_t c = 0; level && c < l->cols; c++) {
        const char *s = heatmap_label(opts->col_labels, c, buf, sizeof buf);
        level = font_text_width(f, s, l->label_max_w, FONT_HORIZONTAL) <=
                l->cell - 4;
    }
    if (level) {
        l->key_angle = FONT_HORIZONTAL;
        l->col_step = 1;
        l->key_base = HEATMAP_LABEL_GAP + desc;
        l->key_h = l->key_base + asc;
        return 0;
    }

    /* Turned labels lie cell * cos 45 apart, measured across them. */
    l->key_angle = FONT_DIAGONAL;
    l->col_step = heatmap_label_step(l->cell, l->cell * HEATMAP_COS45_256,
                                     (int)l->px + 1);
    if (l->col_step == 0) {
        l->key_h = 0;
        return 0;
    }
    /* The anchor point sits mid-height of the text at the start of its
     * baseline; its lowest corner (start, below the baseline) stays
     * HEATMAP_LABEL_GAP above the matrix. */
    l->key_base = HEATMAP_LABEL_GAP + heatmap_diag(mid + desc);
    int top = 0, right = 0;
    for (size_t c = 0; c < l->cols; c += l->col_step) {
        const char *s = heatmap_label(opts->col_labels, c, buf, sizeof buf);
        const int w = font_text_width(f, s, l->label_max_w, FONT_DIAGONAL);
        const int xc = (int)c * l->cell + l->cell / 2;
        top = heatmap_max(top, l->key_base - heatmap_diag(mid) +
                                   heatmap_diag(w + asc));
        right = heatmap_max(right, xc + heatmap_diag(mid) +
                                       heatmap_diag(w + desc) - l->mat_w);
    }
    *left_over =
        heatmap_max(0, heatmap_diag(asc) - heatmap_diag(mid) - l->cell / 2);
    l->key_h = top + 2;
    return right;
}

/* The labelled layout: labels, titles and colorbar around the grid. */
static void heatmap_layout_labelled(struct heatmap_layout *l, struct font *f,
                                    const struct heatmap_matrix *mats, size_t n,
                                    const struct heatmap_options *opts,
                                    float vmax)
{
    font_set_size(f, l->px);
    l->label_max_w = 10 * (int)l->px;
    const int row_w = heatmap_layout_rows(l, f, opts);
    int key_left = 0;
    const int key_right = heatmap_layout_keys(l, f, opts, &key_left);
    l->left_ext =
        heatmap_max(row_w > 0 ? row_w + HEATMAP_LABEL_GAP : 0, key_left);

    const int cap = font_cap_height(f);

    /* panel titles, in a grid only */
    l->panel_title_h = 0;
    for (size_t i = 0; n > 1 && i < n; i++) {
        if (mats[i].title && mats[i].title[0]) {
            font_set_size(f, l->panel_px);
            l->panel_title_h =
                font_ascent(f) + font_descent(f) + HEATMAP_PANEL_GAP;
            break;
        }
    }

    /* the image title: the matrix's own for one matrix, else the grid's */
    l->title = n == 1 && mats[0].title && mats[0].title[0] ? mats[0].title
                                                           : opts->title;
    if (l->title && !l->title[0])
        l->title = NULL;
    int title_h = 0;
    l->title_w = 0;
    if (l->title) {
        font_set_size(f, l->title_px);
        title_h = font_ascent(f) + font_descent(f) + HEATMAP_TITLE_GAP;
        l->title_w =
            font_text_width(f, l->title, HEATMAP_TITLE_MAX_W, FONT_HORIZONTAL);
    }

    /* panels: the gap between matrices holds the next panel's row labels
     * and this panel's turned labels overhanging on the right */
    const int gap_x =
        heatmap_max(l->left_ext + HEATMAP_GRID_GAP_X, key_right + 8 + key_left);
    l->pitch_x = l->mat_w + gap_x;
    l->pitch_y = l->mat_h + HEATMAP_GRID_GAP_Y + l->panel_title_h + l->key_h;
    l->x0 = HEATMAP_MARGIN + l->left_ext;
    l->y0 = HEATMAP_MARGIN + title_h + l->panel_title_h + l->key_h;
    const int grid_right =
        l->x0 + ((int)l->grid_cols - 1) * l->pitch_x + l->mat_w;
    const int grid_bottom =
        l->y0 + ((int)l->grid_rows - 1) * l->pitch_y + l->mat_h;

    /* colorbar from the first matrix top to the last matrix bottom, clear
     * of the turned labels of lower panel rows */
    l->bar_x = grid_right + HEATMAP_BAR_GAP;
    if (l->grid_rows > 1)
        l->bar_x = heatmap_max(l->bar_x, grid_right + key_right + 8);
    l->bar_y = l->y0;
    l->bar_h = heatmap_max(grid_bottom - l->y0, HEATMAP_BAR_MIN_H);
    font_set_size(f, l->px);
    const int line = (int)l->px + 6;
    const size_t fit = (size_t)(l->bar_h / line) + 1;
    heatmap_ticks_make(vmax, fit < HEATMAP_MAX_TICKS ? fit : HEATMAP_MAX_TICKS,
                       &l->ticks);
    l->ticks.max_w = 0;
    for (size_t i = 0; i < l->ticks.n; i++)
        l->ticks.max_w =
            heatmap_max(l->ticks.max_w, font_text_width(f, l->ticks.text[i], 0,
                                                        FONT_HORIZONTAL));

    int right = l->bar_x + HEATMAP_BAR_W + HEATMAP_TICK_LEN + HEATMAP_TICK_GAP +
                l->ticks.max_w;
    right = heatmap_max(right, grid_right + key_right);
    l->width =
        heatmap_max(right + HEATMAP_MARGIN, l->title_w + 2 * HEATMAP_MARGIN);
    const int bottom =
        heatmap_max(grid_bottom, l->bar_y + l->bar_h + (cap + 1) / 2 + 2);
    l->height = bottom + HEATMAP_MARGIN;
}

/*
 * Cell and matrix sizes and the bare layout: enough to bound the image, and
 * the values to be read, before any value is read.
 */
static bool heatmap_layout_cells(struct heatmap_layout *l,
                                 const struct heatmap_matrix *mats, size_t n,
                                 const struct heatmap_options *opts, char *err,
                                 size_t err_len)
{
    memset(l, 0, sizeof *l);
    l->rows = mats[0].rows;
    l->cols = mats[0].cols;
    heatmap_grid_shape(n, &l->grid_cols, &l->grid_rows);
    const unsigned cell =
        opts->cell ? opts->cell : heatmap_auto_cell(l->rows, l->cols);
    size_t mat_w, mat_h;
    if (__builtin_mul_overflow(l->cols, cell, &mat_w) ||
        __builtin_mul_overflow(l->rows, cell, &mat_h) ||
        mat_w > HEATMAP_MAX_SIDE || mat_h > HEATMAP_MAX_SIDE) {
        errbuf_set(err, err_len,
                   "heatmap: a %zu x %zu matrix at %u px per cell is over "
                   "%u px on a side",
                   l->rows, l->cols, cell, HEATMAP_MAX_SIDE);
        return false;
    }
    /* From here on every length fits an int: at most 32 panels across of
     * at most 32768 px, plus labels of a few hundred. */
    l->cell = (int)cell;
    l->mat_w = (int)mat_w;
    l->mat_h = (int)mat_h;
    heatmap_layout_bare(l);
    return true;
}

/* Whether the image fits HEATMAP_MAX_SIDE, HEATMAP_MAX_AREA and
 * max_pixels. */
static bool heatmap_check_size(const struct heatmap_layout *l,
                               const struct heatmap_options *opts, char *err,
                               size_t err_len)
{
    size_t area = 0;
    const bool fits = l->width <= (int)HEATMAP_MAX_SIDE &&
                      l->height <= (int)HEATMAP_MAX_SIDE &&
                      !__builtin_mul_overflow((size_t)l->width,
                                              (size_t)l->height, &area);
    if (!fits || area > HEATMAP_MAX_AREA) {
        errbuf_set(err, err_len,
                   "heatmap: image of %d x %d px is over the limit of %u "
                   "px a side and %zu px in all",
                   l->width, l->height, HEATMAP_MAX_SIDE, HEATMAP_MAX_AREA);
        return false;
    }
    if (opts->max_pixels && area > opts->max_pixels) {
        errbuf_set(err, err_len,
                   "heatmap: image of %d x %d = %zu px exceeds max_pixels "
                   "%zu",
                   l->width, l->height, area, opts->max_pixels);
        return false;
    }
    return true;
}

/* Font size for labels: a little larger with larger cells, 11 to 14 px. */
static unsigned heatmap_label_px(int cell)
{
    const int px = 10 + cell / 8;
    return (unsigned)(px < 11 ? 11 : px > 14 ? 14 : px);
}

/*
 * Replace the bare layout by the labelled one. *f is opened here and owned
 * by the caller afterwards, also on failure (font_close).
 */
static bool heatmap_layout_labels(struct heatmap_layout *l,
                                  const struct heatmap_matrix *mats, size_t n,
                                  const struct heatmap_options *opts,
                                  float vmax, struct font **f, char *err,
                                  size_t err_len)
{
    l->px = heatmap_label_px(l->cell);
    l->panel_px = l->px + 1;
    l->title_px = l->px + 3;
    *f = font_open(l->px, err, err_len);
    if (!*f)
        return false;
    heatmap_layout_labelled(l, *f, mats, n, opts, vmax);
    return heatmap_check_size(l, opts, err, err_len);
}

/* -------------------------------------------------------------- drawing */

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

/* Cells as solid squares, coloured by value / vmax. */
static void heatmap_draw_cells(struct font_canvas *c,
                               const struct heatmap_layout *l,
                               const struct heatmap_matrix *mats, size_t n,
                               enum heatmap_colormap map, float vmax)
{
    const size_t rows = l->rows, cols = l->cols;
    const int cell = l->cell;
    for (size_t i = 0; i < n; i++) {
        int mx, my;
        heatmap_panel_origin(l, i, &mx, &my);
        const float *v = mats[i].values;
        for (size_t r = 0; r < rows; r++) {
            for (size_t k = 0; k < cols; k++) {
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

static void heatmap_draw_colorbar(struct font_canvas *c,
                                  const struct heatmap_layout *l,
                                  struct font *f, enum heatmap_colormap map,
                                  float vmax)
{
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
    for (size_t i = 0; i < l->ticks.n; i++) {
        double t = l->ticks.value[i] / (double)vmax;
        if (t > 1.0)
            t = 1.0;
        const int ty = y + h - 1 - (int)lround(t * (double)(h - 1));
        heatmap_fill(c, x + HEATMAP_BAR_W + 1, ty, HEATMAP_TICK_LEN, 1,
                     heatmap_axis);
        font_draw(f, c,
                  x + HEATMAP_BAR_W + 1 + HEATMAP_TICK_LEN + HEATMAP_TICK_GAP,
                  ty + (cap + 1) / 2, l->ticks.text[i], 0, FONT_HORIZONTAL,
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
    heatmap_draw_colorbar(c, l, f, opts->colormap, vmax);
}

/* ----------------------------------------------------------------- API */

bool heatmap_render_png(const struct heatmap_matrix *mats, size_t n,
                        const struct heatmap_options *opts,
                        const struct heatmap_text *texts, size_t n_texts,
                        unsigned char **png, size_t *png_len, char *err,
                        size_t err_len)
{
    *png = NULL;
    *png_len = 0;
    if (err && err_len)
        err[0] = '\0';
    if (!heatmap_check_inputs(mats, n, opts, texts, n_texts, err, err_len))
        return false;
    /* The bare image has a pixel or more per value: once it passes the
     * caps, so does reading the values. */
    struct heatmap_layout l;
    if (!heatmap_layout_cells(&l, mats, n, opts, err, err_len) ||
        !heatmap_check_size(&l, opts, err, err_len))
        return false;
    float vmax;
    if (!heatmap_scan_max(mats, n, &vmax, err, err_len))
        return false;
    struct font *f = NULL;
    if (opts->labels &&
        !heatmap_layout_labels(&l, mats, n, opts, vmax, &f, err, err_len)) {
        font_close(f);
        return false;
    }
    const size_t bytes = (size_t)l.width * (size_t)l.height * 3;
    struct font_canvas canvas = {malloc(bytes), l.width, l.height, 3};
    if (!canvas.pixels) {
        errbuf_set(err, err_len, "heatmap: out of memory for %d x %d px",
                   l.width, l.height);
        font_close(f);
        return false;
    }
    memset(canvas.pixels, heatmap_white[0], bytes);
    heatmap_draw_cells(&canvas, &l, mats, n, opts->colormap, vmax);
    if (f)
        heatmap_draw_labels(&canvas, &l, f, mats, n, opts, vmax);
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
    const bool ok =
        pngw_encode(canvas.pixels, (size_t)l.width, (size_t)l.height, 3, pt,
                    n_texts, cap, png, png_len, err, err_len);
    free(canvas.pixels);
    return ok;
}
