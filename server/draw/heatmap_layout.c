/*
 * heatmap_layout.c - the geometry of a heatmap image: automatic cell size,
 * grid shape, which labels fit and how they turn, titles, colorbar ticks,
 * and the size checks, all before a pixel is drawn.
 */
#include "heatmap_layout.h"

#include "errbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * ten) that gives at most max_n ticks from 0 to top; that leaves at least
 * 3 for max_n >= 4, since the steps grow at most 2x.
 *
 * Texts, so that the layout can keep room for any of them before the top
 * is known: with percent, whole percentages of top ("0%", "25%", ...,
 * "100%": the step is at least a quarter); else 0, then the values with as
 * many decimals as the step needs (0.25, 0.5, 1) while that is 0 to 4
 * decimals and the values stay under 100000, and past that one or two
 * digits times a power of ten ("7.5e-5", "2e6"). The forms are then
 * D.DDDD, DDDDD, D.De-DD and D.DeDD at the widest (heatmap_tick_room).
 */
void heatmap_ticks_make(double top, size_t max_n, bool percent,
                        struct heatmap_ticks *t)
{
    static const double mant[] = {1.0, 2.0, 2.5, 5.0};
    const int e0 = (int)floor(log10(top)) - 2;
    double step = top;
    int decimals = 0;
    for (int e = e0; e <= e0 + 4; e++) {
        const double p = pow(10.0, e);
        for (size_t k = 0; k < 4; k++) {
            const double s = mant[k] * p;
            if (floor(top / s * (1.0 + 1e-9)) + 1.0 <= (double)max_n) {
                step = s;
                decimals = -e + (k == 2 ? 1 : 0);
                goto found;
            }
        }
    }
found:
    t->n = (size_t)floor(top / step * (1.0 + 1e-9)) + 1;
    if (t->n > max_n)
        t->n = max_n;
    for (size_t i = 0; i < t->n; i++) {
        t->value[i] = step * (double)i;
        char *s = t->text[i];
        const size_t len = sizeof t->text[i];
        if (i == 0) {
            snprintf(s, len, percent ? "0%%" : "0");
        } else if (percent) {
            snprintf(s, len, "%.0f%%", t->value[i] / top * 100.0);
        } else if (decimals >= -2 && decimals <= 4) {
            snprintf(s, len, "%.*f", decimals < 0 ? 0 : decimals, t->value[i]);
            /* 0.50 -> 0.5, 1.00 -> 1 */
            if (decimals > 0 && strchr(s, '.')) {
                size_t end = strlen(s);
                while (end > 0 && s[end - 1] == '0')
                    s[--end] = '\0';
                if (end > 0 && s[end - 1] == '.')
                    s[--end] = '\0';
            }
        } else {
            /* "7.5e-05" -> "7.5e-5", "2.0e+06" -> "2e6": the mantissa has
             * at most two digits, the exponent at most two (float32) */
            char sci[32];
            snprintf(sci, sizeof sci, "%.1e", t->value[i]);
            char *e = strchr(sci, 'e');
            if (!e) { /* not a finite number: as printf wrote it */
                snprintf(s, len, "%s", sci);
                continue;
            }
            const long exp = strtol(e + 1, NULL, 10);
            size_t mlen = (size_t)(e - sci);
            if (mlen >= 3 && sci[mlen - 1] == '0' && sci[mlen - 2] == '.')
                mlen -= 2; /* "2.0" -> "2" */
            snprintf(s, len, "%.*se%ld", (int)mlen, sci, exp);
        }
    }
}

void heatmap_ticks_symmetric(double top, size_t max_n, struct heatmap_ticks *t)
{
    struct heatmap_ticks half;
    heatmap_ticks_make(top, (max_n + 1) / 2, false, &half);
    /* half.n >= 1 and 2 * half.n - 1 <= max_n <= HEATMAP_MAX_TICKS */
    const size_t k = half.n, len = sizeof t->text[0];
    t->n = 2 * k - 1;
    for (size_t i = 0; i < k; i++) {
        t->value[k - 1 + i] = half.value[i];
        memcpy(t->text[k - 1 + i], half.text[i], len);
        if (i == 0)
            continue;
        /* below 0: "-" and the positive tick's text, which is far
         * shorter than the buffer */
        t->value[k - 1 - i] = -half.value[i];
        char *s = t->text[k - 1 - i];
        const size_t n = strnlen(half.text[i], len - 2);
        s[0] = '-';
        memcpy(s + 1, half.text[i], n);
        s[n + 1] = '\0';
    }
}

const char *heatmap_label(const char *const *labels, size_t i, char *buf,
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

/*
 * The room a tick's text gets, at the font's current size: for
 * percentages the widest of the texts themselves (they do not depend on
 * the values); for values the widest of the forms heatmap_ticks_make()
 * writes, with its widest digit in every place, after a '-' on a
 * symmetric scale. So the image's width does not depend on the values;
 * the drawing still cuts a text at this width.
 */
static int heatmap_tick_room(struct font *f, enum heatmap_scale scale,
                             size_t fit)
{
    if (scale == HEATMAP_SCALE_TILE) {
        struct heatmap_ticks t;
        heatmap_ticks_make(1.0, fit, true, &t);
        int w = 0;
        for (size_t i = 0; i < t.n; i++)
            w = heatmap_max(w,
                            font_text_width(f, t.text[i], 0, FONT_HORIZONTAL));
        return w;
    }
    char digit = '0';
    int widest = -1;
    for (char d = '0'; d <= '9'; d++) {
        const char one[2] = {d, '\0'};
        const int w = font_text_width(f, one, 0, FONT_HORIZONTAL);
        if (w > widest) {
            widest = w;
            digit = d;
        }
    }
    static const char *const forms[] = {"0.0000", "00000", "0.0e-00", "0.0e00"};
    const bool minus = scale == HEATMAP_SCALE_SYMMETRIC;
    int room = 0;
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        char text[16];
        size_t i = 0;
        if (minus)
            text[i++] = '-';
        for (const char *c = forms[k]; *c && i + 1 < sizeof text; c++)
            text[i++] = *c == '0' ? digit : *c;
        text[i] = '\0';
        room = heatmap_max(room, font_text_width(f, text, 0, FONT_HORIZONTAL));
    }
    return room;
}

/* The labelled layout: labels, titles and colorbar around the grid. */
static void heatmap_layout_labelled(struct heatmap_layout *l, struct font *f,
                                    const struct heatmap_matrix *mats, size_t n,
                                    const struct heatmap_options *opts)
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
        title_h = font_ascent(f) + font_descent(f);
        l->title_w =
            font_text_width(f, l->title, HEATMAP_TITLE_MAX_W, FONT_HORIZONTAL);
    }
    l->note = opts->note && opts->note[0] ? opts->note : NULL;
    if (l->note) {
        font_set_size(f, l->px);
        title_h += font_ascent(f) + font_descent(f);
        l->title_w = heatmap_max(
            l->title_w,
            font_text_width(f, l->note, HEATMAP_TITLE_MAX_W, FONT_HORIZONTAL));
    }
    if (title_h)
        title_h += HEATMAP_TITLE_GAP;

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
    l->tick_fit = fit < HEATMAP_MAX_TICKS ? fit : HEATMAP_MAX_TICKS;
    l->tick_w = heatmap_tick_room(f, opts->scale, l->tick_fit);

    int right = l->bar_x + HEATMAP_BAR_W + HEATMAP_TICK_LEN + HEATMAP_TICK_GAP +
                l->tick_w;
    right = heatmap_max(right, grid_right + key_right);
    l->width =
        heatmap_max(right + HEATMAP_MARGIN, l->title_w + 2 * HEATMAP_MARGIN);
    const int bottom =
        heatmap_max(grid_bottom, l->bar_y + l->bar_h + (cap + 1) / 2 + 2);
    l->height = bottom + HEATMAP_MARGIN;
}

draw_status heatmap_layout_cells(struct heatmap_layout *l,
                                 const struct heatmap_matrix *mats, size_t n,
                                 const struct heatmap_options *opts, char *err,
                                 size_t err_len)
{
    memset(l, 0, sizeof *l);
    l->rows = mats[0].rows;
    l->cols = mats[0].cols;
    if (opts->grid_cols > HEATMAP_MAX_ACROSS)
        return errbuf_fail(err, err_len, DRAW_E_INVALID,
                           "heatmap: %zu panels across is more than %u",
                           opts->grid_cols, HEATMAP_MAX_ACROSS);
    if (opts->grid_cols) {
        l->grid_cols = opts->grid_cols < n ? opts->grid_cols : n;
        l->grid_rows = (n + l->grid_cols - 1) / l->grid_cols;
    } else {
        heatmap_grid_shape(n, &l->grid_cols, &l->grid_rows);
    }
    const unsigned cell =
        opts->cell ? opts->cell : heatmap_auto_cell(l->rows, l->cols);
    size_t mat_w, mat_h;
    if (__builtin_mul_overflow(l->cols, cell, &mat_w) ||
        __builtin_mul_overflow(l->rows, cell, &mat_h) ||
        mat_w > HEATMAP_MAX_SIDE || mat_h > HEATMAP_MAX_SIDE)
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "heatmap: a %zu x %zu matrix at %u px per cell is "
                           "over %u px on a side",
                           l->rows, l->cols, cell, HEATMAP_MAX_SIDE);
    /* From here on every length fits an int: at most 32 panels across of
     * at most 32768 px, plus labels of a few hundred. */
    l->cell = (int)cell;
    l->mat_w = (int)mat_w;
    l->mat_h = (int)mat_h;
    heatmap_layout_bare(l);
    return DRAW_OK;
}

draw_status heatmap_check_size(const struct heatmap_layout *l,
                               const struct heatmap_options *opts, char *err,
                               size_t err_len)
{
    size_t area = 0;
    const bool fits =
        l->width <= (int)HEATMAP_MAX_SIDE &&
        l->height <= (int)HEATMAP_MAX_SIDE &&
        !__builtin_mul_overflow((size_t)l->width, (size_t)l->height, &area);
    if (!fits || area > HEATMAP_MAX_AREA)
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "heatmap: image of %d x %d px is over the limit of "
                           "%u px a side and %zu px in all",
                           l->width, l->height, HEATMAP_MAX_SIDE,
                           HEATMAP_MAX_AREA);
    if (opts->max_pixels && area > opts->max_pixels)
        return errbuf_fail(err, err_len, DRAW_E_TOO_BIG,
                           "heatmap: image of %d x %d = %zu px exceeds "
                           "max_pixels %zu",
                           l->width, l->height, area, opts->max_pixels);
    return DRAW_OK;
}

/* Font size for labels: a little larger with larger cells, 11 to 14 px. */
static unsigned heatmap_label_px(int cell)
{
    const int px = 10 + cell / 8;
    return (unsigned)(px < 11 ? 11 : px > 14 ? 14 : px);
}

draw_status heatmap_layout_labels(struct heatmap_layout *l,
                                  const struct heatmap_matrix *mats, size_t n,
                                  const struct heatmap_options *opts,
                                  struct font **f, char *err, size_t err_len)
{
    l->px = heatmap_label_px(l->cell);
    l->panel_px = l->px + 1;
    l->title_px = l->px + 3;
    const draw_status st = font_open(l->px, f, err, err_len);
    if (st != DRAW_OK)
        return st;
    heatmap_layout_labelled(l, *f, mats, n, opts);
    return heatmap_check_size(l, opts, err, err_len);
}
