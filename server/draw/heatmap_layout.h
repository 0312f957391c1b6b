/*
 * heatmap_layout.h - where everything of a heatmap image goes: cell size,
 * panels of the grid, labels, titles and colorbar, in whole pixels, with
 * the caps every size is checked against. Internal to the drawing library.
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
#ifndef ATTND_HEATMAP_LAYOUT_H
#define ATTND_HEATMAP_LAYOUT_H

#include "font.h"
#include "heatmap.h"

#include <stdbool.h>
#include <stddef.h>

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

/* The values written next to the colorbar. */
struct heatmap_ticks {
    size_t n;
    double value[HEATMAP_MAX_TICKS]; /* ascending, in the top's units */
    char text[HEATMAP_MAX_TICKS][32];
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
    const char *note; /* a line under the title; NULL for none */
    int bar_x, bar_y, bar_h;
    size_t tick_fit; /* at most this many ticks fit beside the bar */
    int tick_w;      /* room for a tick's text, whatever the values */
};

static inline int heatmap_max(int a, int b)
{
    return a > b ? a : b;
}

/* v * cos 45 degrees, rounded up, for v >= 0 */
static inline int heatmap_diag(int v)
{
    return (v * HEATMAP_COS45_256 + 255) / 256;
}

/* The text of label i: labels[i] ("" for a NULL entry), or the index,
 * written into buf, when there are no labels at all. */
const char *heatmap_label(const char *const *labels, size_t i, char *buf,
                          size_t len);

/*
 * Cell and matrix sizes and the bare layout: enough to bound the image, and
 * the values to be read, before any value is read. mats and opts passed
 * heatmap.c's input checks. DRAW_E_TOO_BIG with a message in err when a
 * matrix at that cell size is over HEATMAP_MAX_SIDE.
 */
draw_status heatmap_layout_cells(struct heatmap_layout *l,
                                 const struct heatmap_matrix *mats, size_t n,
                                 const struct heatmap_options *opts, char *err,
                                 size_t err_len);

/* Whether the image fits HEATMAP_MAX_SIDE, HEATMAP_MAX_AREA and
 * max_pixels; DRAW_E_TOO_BIG with a message in err if not. */
draw_status heatmap_check_size(const struct heatmap_layout *l,
                               const struct heatmap_options *opts, char *err,
                               size_t err_len);

/*
 * Replace the bare layout by the labelled one and check its size; the
 * values play no part. *f is opened here (font_open's statuses) and owned
 * by the caller afterwards, also on failure (font_close).
 */
draw_status heatmap_layout_labels(struct heatmap_layout *l,
                                  const struct heatmap_matrix *mats, size_t n,
                                  const struct heatmap_options *opts,
                                  struct font **f, char *err, size_t err_len);

/*
 * The ticks of a colour scale from 0 to top, at most max_n of them: values
 * written as numbers, or with percent as percentages of top. Every text
 * has one of the forms whose room heatmap_layout_labels() keeps.
 */
void heatmap_ticks_make(double top, size_t max_n, bool percent,
                        struct heatmap_ticks *t);

/*
 * The ticks of a symmetric scale from -top to top, at most max_n (>= 1):
 * heatmap_ticks_make()'s ticks from 0 to top, at most (max_n + 1) / 2 of
 * them, and their negatives below 0, written with a leading '-'. So 0 is
 * always a tick, the middle one, and every text is one of
 * heatmap_ticks_make()'s forms or that form after a '-'.
 */
void heatmap_ticks_symmetric(double top, size_t max_n, struct heatmap_ticks *t);

#endif
