/*
 * heatmap_svg.c - the SVG painter: rectangles, hatch patterns and text
 * elements at the positions heatmap_draw.c gives, into an svgw.
 */
#include "heatmap_svg.h"

#include <string.h>

struct svg_paint {
    struct svgw *w;
    int width, height;
};

/* Clip a rectangle to the image; false when nothing is left. */
static bool svg_clip(const struct svg_paint *s, int *x, int *y, int *w, int *h)
{
    const int x1 = *x + *w > s->width ? s->width : *x + *w;
    const int y1 = *y + *h > s->height ? s->height : *y + *h;
    *x = *x < 0 ? 0 : *x;
    *y = *y < 0 ? 0 : *y;
    *w = x1 - *x;
    *h = y1 - *y;
    return *w > 0 && *h > 0;
}

static void svg_fill(void *ctx, int x, int y, int w, int h,
                     const unsigned char rgb[3])
{
    struct svg_paint *s = ctx;
    if (svg_clip(s, &x, &y, &w, &h))
        svgw_printf(s->w,
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"#%02x%02x%02x\"/>\n",
                    x, y, w, h, rgb[0], rgb[1], rgb[2]);
}

/* The pattern na<s> has its dark pixels where x + y = s (mod 4) in the
 * image's coordinates: the PNG's stripes of a panel at (mx, my). */
static void svg_hatch(void *ctx, int mx, int my, int x, int y, int w, int h)
{
    struct svg_paint *s = ctx;
    if (svg_clip(s, &x, &y, &w, &h))
        svgw_printf(s->w,
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"url(#na%d)\"/>\n",
                    x, y, w, h, ((mx + my) % 4 + 4) % 4);
}

static void svg_text(void *ctx, struct font *f, int x, int y, const char *utf8,
                     int max_width, enum font_angle angle,
                     const unsigned char rgb[3])
{
    struct svg_paint *s = ctx;
    bool ellipsis = false;
    const char *t = utf8 ? utf8 : "";
    const size_t keep = font_text_cut(f, t, max_width, angle, &ellipsis);
    if (keep == 0 && !ellipsis)
        return;
    svgw_printf(s->w,
                "<text x=\"%d\" y=\"%d\" font-size=\"%u\" "
                "fill=\"#%02x%02x%02x\"",
                x, y, font_px(f), rgb[0], rgb[1], rgb[2]);
    if (angle == FONT_DIAGONAL)
        svgw_printf(s->w, " transform=\"rotate(-45 %d %d)\"", x, y);
    svgw_str(s->w, ">");
    svgw_escaped(s->w, t, keep);
    if (ellipsis)
        svgw_str(s->w, "\xE2\x80\xA6"); /* U+2026, as the PNG draws */
    svgw_str(s->w, "</text>\n");
}

/* Four patterns, one per phase of the stripes: a light tile with the dark
 * pixels (a, b) where a + b = phase (mod 4). */
static void svg_patterns(struct svgw *w)
{
    const unsigned char *lt = heatmap_hatch_light, *dk = heatmap_hatch_dark;
    svgw_str(w, "<defs>\n");
    for (int phase = 0; phase < 4; phase++) {
        svgw_printf(w,
                    "<pattern id=\"na%d\" width=\"4\" height=\"4\" "
                    "patternUnits=\"userSpaceOnUse\">"
                    "<rect width=\"4\" height=\"4\" fill=\"#%02x%02x%02x\"/>",
                    phase, lt[0], lt[1], lt[2]);
        for (int a = 0; a < 4; a++)
            svgw_printf(w,
                        "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" "
                        "fill=\"#%02x%02x%02x\"/>",
                        a, (phase - a + 8) % 4, dk[0], dk[1], dk[2]);
        svgw_str(w, "</pattern>\n");
    }
    svgw_str(w, "</defs>\n");
}

void heatmap_svg_write(struct svgw *w, const struct heatmap_layout *l,
                       struct font *f, const struct heatmap_matrix *mats,
                       size_t n, const struct heatmap_options *opts,
                       const struct heatmap_text *texts, size_t n_texts,
                       const float *tops, bool cells)
{
    /* crispEdges: cells on whole pixels, drawn without blending at their
     * edges, as the PNG's; white-space pre keeps a token's spaces */
    svgw_printf(w,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
                "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" ",
                l->width, l->height, l->width, l->height);
    svgw_str(w, "shape-rendering=\"crispEdges\" font-family=\"DejaVu Sans\" "
                "xml:space=\"preserve\" style=\"white-space:pre\">\n");
    for (size_t i = 0; i < n_texts; i++)
        if (texts[i].key && !strcmp(texts[i].key, "Title") && texts[i].text) {
            svgw_str(w, "<title>");
            svgw_escaped(w, texts[i].text, strlen(texts[i].text));
            svgw_str(w, "</title>\n");
        }
    svgw_str(w, "<metadata><attnd xmlns=\"urn:attnd:heatmap\">\n");
    for (size_t i = 0; i < n_texts; i++) {
        const char *key = texts[i].key ? texts[i].key : "";
        const char *text = texts[i].text ? texts[i].text : "";
        svgw_str(w, "<chunk key=\"");
        svgw_escaped(w, key, strlen(key));
        svgw_str(w, "\">");
        svgw_escaped(w, text, strlen(text));
        svgw_str(w, "</chunk>\n");
    }
    svgw_str(w, "</attnd></metadata>\n");
    svg_patterns(w);
    struct svg_paint s = {w, l->width, l->height};
    const struct heatmap_painter p = {&s, svg_fill, svg_hatch, svg_text};
    heatmap_draw_image(&p, l, f, mats, n, opts, tops, cells);
    svgw_str(w, "</svg>\n");
}
