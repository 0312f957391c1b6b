/*
 * transformer_step.h - a decoder's token after its KV cache: the cache
 * itself (transformer.h) and the attention sublayer of one token against
 * it, which xf_forward() runs in place of attn_forward() when the run
 * continues a cache. Internal to the core.
 */
#ifndef ATTN_TRANSFORMER_STEP_H
#define ATTN_TRANSFORMER_STEP_H

#include "pool.h"
#include "transformer.h"

/* Where the step writes, and what it reads besides the model. */
struct step_io {
    const struct xf_plan *plan;
    size_t layer;
    const float *x;      /* [H] the layer's attention input (normed) */
    float *scratch;      /* the plan's XF_WS_STEP part */
    float *panels;       /* a panel per member, or NULL (all float32) */
    float *weights;      /* NULL, or [heads][keys]: this layer's rows */
    float *mean_weights; /* NULL, or [keys] */
};

/*
 * The attention output [H] of the token at position cache->len of layer
 * io->layer: its q, k and v (the per-head norm and the rotation at its
 * position, as attn_forward() places them), its k and v appended to the
 * cache's layer (len itself grows after every layer has run), then each
 * query head against its KV head's keys 0..len (those the window
 * leaves), softmax, the values, and the output projection. The products
 * go by tiles on team. Returns the output, in io->scratch; NULL, with the
 * cache as it was, when q, k or v overflow float32.
 */
float *step_attention(const struct step_io *io, struct pool_team *team);

#endif
