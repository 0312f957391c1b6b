/*
 * image_format.c - the table of answer formats and the writers of the
 * image ones (image_format.h), over the drawing library's PNG and SVG.
 */
#include "image_format.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ PNG */

static draw_status png_measure(const struct image_picture *p, size_t grow,
                               int *width, int *height, size_t *bytes,
                               char *err, size_t err_len)
{
    (void)grow; /* the size does not depend on the texts' values */
    *bytes = 0; /* known only once it is encoded */
    return heatmap_measure(p->mats, p->count, p->opts, p->texts, p->n_texts,
                           width, height, err, err_len);
}

static draw_status png_encode(const struct image_picture *p, size_t max_bytes,
                              unsigned char **out, size_t *len, char *err,
                              size_t err_len)
{
    (void)max_bytes;
    return heatmap_render_png(p->mats, p->count, p->opts, p->texts, p->n_texts,
                              out, len, err, err_len);
}

static size_t png_held(int width, int height, size_t bytes)
{
    (void)bytes;
    /* the canvas (RGB) and the encoder's room for the PNG (half again) */
    const size_t pixels = (size_t)width * (size_t)height;
    return pixels * 3 + pixels * 9 / 2;
}

/* ------------------------------------------------------------------ SVG */

static draw_status svg_measure(const struct image_picture *p, size_t grow,
                               int *width, int *height, size_t *bytes,
                               char *err, size_t err_len)
{
    const draw_status st =
        heatmap_measure_svg(p->mats, p->count, p->opts, p->texts, p->n_texts,
                            width, height, bytes, err, err_len);
    *bytes += grow;
    return st;
}

static draw_status svg_encode(const struct image_picture *p, size_t max_bytes,
                              unsigned char **out, size_t *len, char *err,
                              size_t err_len)
{
    char *text = NULL;
    const draw_status st =
        heatmap_render_svg(p->mats, p->count, p->opts, p->texts, p->n_texts,
                           max_bytes, &text, len, err, err_len);
    *out = (unsigned char *)text;
    return st;
}

static size_t svg_held(int width, int height, size_t bytes)
{
    (void)width;
    (void)height;
    /* the buffer doubles as it grows: the old and the new at once */
    return bytes + bytes / 2 + 4096;
}

/* ---------------------------------------------------------------- table */

const struct image_writer image_writers[IMAGE_FORMATS] = {
    [IMAGE_JSON] = {"json", "application/json", NULL, NULL, NULL},
    [IMAGE_PNG] = {"png", "image/png", png_measure, png_encode, png_held},
    [IMAGE_SVG] = {"svg", "image/svg+xml", svg_measure, svg_encode, svg_held},
};

const char *image_format_name(int format)
{
    return format >= 0 && format < IMAGE_FORMATS ? image_writers[format].name
                                                 : NULL;
}

bool image_format_parse(const char *value, const char *quote,
                        enum image_format *out, struct problem *pb)
{
    for (int f = 0; f < IMAGE_FORMATS; f++)
        if (!strcmp(value, image_writers[f].name)) {
            *out = (enum image_format)f;
            return true;
        }
    // every name, as "a", "b" or "c"
    char names[96];
    size_t at = 0;
    for (int f = 0; f < IMAGE_FORMATS && at < sizeof names; f++) {
        const char *sep = !f ? "" : f + 1 < IMAGE_FORMATS ? ", " : " or ";
        const int n = snprintf(names + at, sizeof names - at, "%s%s%s%s", sep,
                               quote, image_writers[f].name, quote);
        at += n > 0 ? (size_t)n : 0;
    }
    return problem_set(pb, 422, "/format", "format (\"%.40s\") must be %s",
                       value, names);
}

enum image_format image_format_accepted(const char *accept)
{
    for (int f = 0; accept && f < IMAGE_FORMATS; f++)
        if (strstr(accept, image_writers[f].content_type))
            return (enum image_format)f;
    return IMAGE_JSON;
}
