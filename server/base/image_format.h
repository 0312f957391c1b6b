/*
 * image_format.h - what an answer is written as: JSON, or a drawn picture
 * as PNG or SVG. One row per format says its name (format=), its content
 * type (the answer's Content-Type, and what an Accept header names) and,
 * for an image, how a picture of the drawing library is measured and
 * encoded in it. /attention (its request, /config, the Accept header
 * and its images) and /patch (the same) go by this one table.
 */
#ifndef ATTND_IMAGE_FORMAT_H
#define ATTND_IMAGE_FORMAT_H

#include "draw.h"
#include "heatmap.h"
#include "problem.h"

#include <stdbool.h>
#include <stddef.h>

/* In the order an Accept header is read (image_format_accepted()). */
enum image_format { IMAGE_JSON = 0, IMAGE_PNG, IMAGE_SVG, IMAGE_FORMATS };

/* A picture as the drawing library draws it (heatmap.h): count matrices
 * of one shape, the options, and the texts (PNG text chunks, SVG
 * <title> and <metadata>; may be NULL when n_texts is 0). Borrowed. */
struct image_picture {
    const struct heatmap_matrix *mats;
    size_t count;
    const struct heatmap_options *opts;
    const struct heatmap_text *texts;
    size_t n_texts;
};

struct image_writer {
    const char *name;         /* format=: "json", "png", "svg" */
    const char *content_type; /* "application/json", "image/png", ... */
    /*
     * The picture's size in pixels and in *bytes the most bytes its
     * encoding can have, when the format bounds it ahead (0 when not),
     * without reading a value (mats' values may be NULL); grow: bytes the
     * texts may still gain once the values are known. The drawing
     * library's statuses and messages (heatmap.h). NULL for JSON.
     */
    draw_status (*measure)(const struct image_picture *p, size_t grow,
                           int *width, int *height, size_t *bytes, char *err,
                           size_t err_len);
    /*
     * The picture encoded, in at most max_bytes (measure()'s bound, which
     * a format that has none ignores). On success *out (malloc'd, free())
     * holds *len bytes; statuses as heatmap_render_png(). NULL for JSON.
     */
    draw_status (*encode)(const struct image_picture *p, size_t max_bytes,
                          unsigned char **out, size_t *len, char *err,
                          size_t err_len);
    /* At most the memory encode() holds for a picture that measure()
     * gave width x height pixels and bytes. NULL for JSON. */
    size_t (*held)(int width, int height, size_t bytes);
};

/* Indexed by enum image_format. */
extern const struct image_writer image_writers[IMAGE_FORMATS];

/* The name of format (an int, as the field table's enum rows take it),
 * NULL past the last. */
const char *image_format_name(int format);

/*
 * The format named value, for the field "format": false with pb a 422 at
 * "/format" naming the value and every name when none is. quote is what
 * each name is set in by the message: "\"" (/attention's, as JSON
 * strings) or "" (/patch's, bare).
 */
bool image_format_parse(const char *value, const char *quote,
                        enum image_format *out, struct problem *pb);

/* What an Accept header (NULL: none) asks for: the first format of the
 * table whose content type it names, so that application/json decides
 * over any image and image/png over image/svg+xml; JSON when it names
 * none. */
enum image_format image_format_accepted(const char *accept);

#endif
