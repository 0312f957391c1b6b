/*
 * heatmap_draw.h - a laid-out heatmap painted through a painter: cells,
 * then token labels, titles and the colorbar. One sequence of shapes at
 * the layout's positions, so that the PNG's raster painter and the SVG
 * writer's painter draw the same geometry. Internal to the drawing
 * library.
 */
#ifndef ATTND_HEATMAP_DRAW_H
#define ATTND_HEATMAP_DRAW_H

#include "font.h"
#include "heatmap.h"
#include "heatmap_layout.h"

/* What a painter draws; every position is in pixels of the image, the
 * y axis down. A painter clips to the image (the layout keeps everything
 * inside; a clip makes sure a slip there cannot write out of bounds). */
struct heatmap_painter {
    void *ctx;
    /* a solid rectangle */
    void (*fill)(void *ctx, int x, int y, int w, int h,
                 const unsigned char rgb[3]);
    /* not-allowed cells over the rectangle: light grey with darker
     * diagonals where (x - mx) + (y - my) is a multiple of 4, (mx, my)
     * being the panel's top-left */
    void (*hatch)(void *ctx, int mx, int my, int x, int y, int w, int h);
    /* text at f's current size, baseline from (x, y), cut to max_width as
     * font_draw() cuts it */
    void (*text)(void *ctx, struct font *f, int x, int y, const char *utf8,
                 int max_width, enum font_angle angle,
                 const unsigned char rgb[3]);
};

/* The light and dark grey of hatched cells. */
extern const unsigned char heatmap_hatch_light[3], heatmap_hatch_dark[3];

/*
 * Paint the whole image (l->width by l->height): a white background, the
 * cells of matrix i coloured by value / tops[i], or with
 * HEATMAP_SCALE_SYMMETRIC by 0.5 + 0.5 * value / tops[i] (tops: [n], each
 * > 0; all the same but with a scale per tile; consecutive cells of a row
 * with the same colour as one rectangle), and when f is not NULL (a
 * labelled layout)
 * the labels, titles and colorbar. With cells false the cells are left
 * out (mats' values are not read): what an SVG's size bound counts apart.
 */
void heatmap_draw_image(const struct heatmap_painter *p,
                        const struct heatmap_layout *l, struct font *f,
                        const struct heatmap_matrix *mats, size_t n,
                        const struct heatmap_options *opts, const float *tops,
                        bool cells);

/* The raster painter of c (3 or 4 channels). */
struct heatmap_painter heatmap_canvas_painter(struct font_canvas *c);

#endif
