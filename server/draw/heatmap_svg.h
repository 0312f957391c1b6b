/*
 * heatmap_svg.h - a laid-out heatmap written as SVG through the painter of
 * heatmap_draw.h, so that it has the PNG's geometry. Internal to the
 * drawing library; heatmap.c's heatmap_render_svg() and
 * heatmap_measure_svg() are its API.
 */
#ifndef ATTND_HEATMAP_SVG_H
#define ATTND_HEATMAP_SVG_H

#include "heatmap_draw.h"
#include "svgw.h"

/* The longest rectangle element written, with its newline. */
#define HEATMAP_SVG_RECT_MAX                                                   \
    (sizeof "<rect x=\"32768\" y=\"32768\" width=\"32768\" "                   \
            "height=\"32768\" fill=\"url(#na0)\"/>\n" -                        \
     1)

/*
 * The document into w: the head (size, <title> from the text keyed
 * "Title", <metadata> of every text, the hatch patterns), the image
 * painted by heatmap_draw_image() with cells as given, and the end.
 */
void heatmap_svg_write(struct svgw *w, const struct heatmap_layout *l,
                       struct font *f, const struct heatmap_matrix *mats,
                       size_t n, const struct heatmap_options *opts,
                       const struct heatmap_text *texts, size_t n_texts,
                       const float *tops, bool cells);

#endif
