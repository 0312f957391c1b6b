/*
 * render.h - the image answer of /attention (PNG or SVG, as the request's
 * format says): the weights a request asked to see, with the request's
 * tokens as labels.
 */
#ifndef ATTND_RENDER_H
#define ATTND_RENDER_H

#include "problem.h"
#include "request.h"

#include <stddef.h>

/* The most pixels an answer's image may have: what the drawing library
 * allows at most (64 Mi px). */
#define RENDER_MAX_PIXELS ((size_t)64 << 20)

/*
 * Measure the image the decoded req asks for, when its answer is planned
 * (answer.h), before anything is computed: the drawing library's own size
 * of it under RENDER_MAX_PIXELS into req->png.width and height. An image
 * the drawing would refuse is refused here with the same problem (422 at
 * "/cell" naming the size and the cap), so that nothing is computed for
 * it; with special=hide and nothing left to draw, a 422 at "/special".
 * The model's image is measured by render_model_png_measure().
 */
bool render_png_measure(struct request *req, struct problem *pb);
bool render_model_png_measure(struct request *req, struct problem *pb);

/*
 * One head, the mean over heads, or a grid of all heads, of sequence
 * req->png.batch, measured first (render_png_measure). PNG text chunks
 * carry the tokens, the head, the colour scale and the minimum and
 * maximum weight shown. On success *png (malloc'd, free())
 * holds *len bytes.
 */
bool render_png(const struct request *req, const struct attn_result *res,
                size_t max_pixels, unsigned char **png, size_t *len,
                struct problem *pb);

/* At most the bytes render_png() holds for the measured req: the canvas,
 * its PNG, labels and text chunks. */
size_t render_png_bytes(const struct request *req);

/*
 * The image of a request on a loaded model (render_model.c), as
 * req->png.view says: one layer's heads, the model view (a row of tiles
 * per layer, one tile per head) or the rollout, its wordpieces as labels;
 * with special=hide without the rows and columns of the [CLS] and [SEP]
 * the tokenizer added (the weights left as they are, not renormalised).
 * Text chunks: attnd:model, attnd:view, attnd:layer, attnd:head,
 * attnd:special, attnd:tokens (the wordpieces shown), attnd:color_scale,
 * attnd:min and attnd:max (of the weights shown), and with a scale per
 * tile attnd:tile_max (each tile's largest weight, in tile order).
 * Ownership as render_png().
 */
bool render_model_png(const struct request *req, const struct xf_result *res,
                      size_t max_pixels, unsigned char **png, size_t *len,
                      struct problem *pb);

/* At most the bytes render_model_png() holds for the measured req. */
size_t render_model_png_bytes(const struct request *req);

/*
 * The one place a request's picture meets its format (req->png.format,
 * through image_format.h's table), for render.c and render_model.c alike.
 * render_image_measure() measures p into req->png (width, height, and
 * bytes, counting grow bytes the texts may gain once the values are
 * known), a refusal as the client's problem: problem_from_draw()'s, but
 * an SVG over its size cap at "/format". render_image_encode() encodes
 * the filled p within that measure; ownership as render_png().
 * render_image_held() is at most the memory the encoding holds.
 */
bool render_image_measure(struct request *req, const struct image_picture *p,
                          size_t grow, struct problem *pb);
bool render_image_encode(const struct request *req,
                         const struct image_picture *p, unsigned char **out,
                         size_t *len, struct problem *pb);
size_t render_image_held(const struct request *req);

#endif
