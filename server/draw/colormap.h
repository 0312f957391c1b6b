/*
 * colormap.h - the heatmap colour scales as 256-entry RGB tables: viridis
 * and magma (matplotlib's published data, CC0), a plain gray ramp, and a
 * blue-white-red diverging map from ColorBrewer's RdBu anchors. Entry 0 is
 * the low end, entry 255 the high end; in the diverging map entries 127
 * and 128 are both its middle white.
 *
 * The tables are constant: every function here is thread-safe.
 */
#ifndef ATTND_COLORMAP_H
#define ATTND_COLORMAP_H

#include "heatmap.h" /* enum heatmap_colormap, heatmap_colormap_parse/name */

#define COLORMAP_SIZE 256

/* The table of map: [COLORMAP_SIZE][3] RGB; an unknown map gives gray. */
const unsigned char (*colormap_table(enum heatmap_colormap map))[3];

/*
 * The table index of t on a 0..1 scale: round(t * 255), with t below 0
 * clamped to entry 0 and t above 1 to entry 255.
 */
unsigned colormap_index(float t);

/* rgb = the colour of t on a 0..1 scale in map (clamped as above). */
void colormap_lookup(enum heatmap_colormap map, float t, unsigned char rgb[3]);

#endif
