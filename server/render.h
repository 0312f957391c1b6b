/*
 * render.h - the PNG answer of /attention: the weights a request asked to
 * see, with the request's tokens as labels.
 */
#ifndef ATTND_RENDER_H
#define ATTND_RENDER_H

#include "problem.h"
#include "request.h"

#include <stddef.h>

/*
 * One head, the mean over heads, or a grid of all heads, of sequence
 * req->png.batch. PNG text chunks carry the tokens, the head and the
 * minimum and maximum weight shown. On success *png (malloc'd, free())
 * holds *len bytes.
 */
bool render_png(const struct request *req, const struct attn_result *res,
                size_t max_pixels, unsigned char **png, size_t *len,
                struct problem *pb);

/* At most the bytes render_png() holds for req under max_pixels: the
 * canvas, its PNG, labels and text chunks. */
size_t render_png_bytes(const struct request *req, size_t max_pixels);

/*
 * The image of a request on a loaded model (render_model.c), as
 * req->png.view says: one layer's heads, the model view (a row of tiles
 * per layer, one tile per head) or the rollout, its wordpieces as
 * labels. Text chunks: attnd:model, attnd:view, attnd:layer, attnd:head,
 * attnd:tokens, attnd:min, attnd:max. Ownership as render_png().
 */
bool render_model_png(const struct request *req, const struct bert_result *res,
                      size_t max_pixels, unsigned char **png, size_t *len,
                      struct problem *pb);

/* At most the bytes render_model_png() holds for req under max_pixels. */
size_t render_model_png_bytes(const struct request *req, size_t max_pixels);

#endif
