/*
 * patch_answer.h - the answer of POST /patch: the effects as JSON, or
 * drawn as a heatmap (PNG or SVG) in a diverging colour map centred on 0.
 */
#ifndef ATTND_PATCH_ANSWER_H
#define ATTND_PATCH_ANSWER_H

#include "draw.h"
#include "patch_request.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * The JSON answer: {"model", "over", "direction", "runs", "metric":
 * {"kind", its tokens, "clean", "corrupted"}, "clean": {"tokens",
 * "token_ids"}, "corrupted": {...}, "effects", "warnings"}, effects in
 * over's layout (patching.h), null where none can be measured. The
 * caller frees it; NULL when memory runs out.
 */
char *patch_answer_json(const struct patch_request *p,
                        const struct xf_patch_result *r, size_t *len);

/* The most bytes patch_answer_json() writes for p. */
size_t patch_answer_bytes(const struct patch_request *p);

/*
 * The effects drawn (p->format PNG or SVG): layers down the side, heads
 * or positions along the top, each cell's colour its effect on a scale
 * symmetric about 0. On success *out (free()) holds *len bytes; else a
 * draw status with err naming why.
 */
draw_status patch_answer_image(const struct patch_request *p,
                               const struct xf_patch_result *r,
                               unsigned char **out, size_t *len, char *err,
                               size_t err_len);

/* The image's size and its bytes at most, before anything is computed;
 * a refusal as patch_answer_image()'s. */
draw_status patch_answer_measure(const struct patch_request *p, size_t *bytes,
                                 char *err, size_t err_len);

#endif
