/*
 * heatmap_draw.h - a laid-out heatmap painted into an RGB canvas: cells,
 * then token labels, titles and the colorbar. Internal to the drawing
 * library.
 */
#ifndef ATTND_HEATMAP_DRAW_H
#define ATTND_HEATMAP_DRAW_H

#include "font.h"
#include "heatmap.h"
#include "heatmap_layout.h"

/*
 * Paint the whole image into c (3 channels, l->width by l->height): a white
 * background, the cells of matrix i coloured by value / tops[i] (tops: [n],
 * each > 0; all the same with a shared scale), and when f is not NULL (a
 * labelled layout) the labels, titles and colorbar. Everything is clipped
 * to the canvas.
 */
void heatmap_draw_image(struct font_canvas *c, const struct heatmap_layout *l,
                        struct font *f, const struct heatmap_matrix *mats,
                        size_t n, const struct heatmap_options *opts,
                        const float *tops);

#endif
