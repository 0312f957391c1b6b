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
    const float *x;            /* [rows][H] the layer's attention input
                                  (normed), a row per token */
    size_t rows;               /* every sequence's tokens */
    const struct xf_seq *seqs; /* [batch]: each sequence's tokens, cache,
                                  edits and rows of weights
                                  (transformer.h), its rows in turn */
    size_t batch;
    float *scratch;             /* the plan's XF_WS_STEP part */
    float *panels;              /* a panel per member, or NULL */
};

/*
 * The attention output [rows][H] of each sequence's tokens at positions
 * cache->len on of its cache, in layer io->layer: their q, k and v (the
 * per-head norm and the rotation at each one's position, as
 * attn_forward() places them), their k and v appended to its cache's
 * layer (len itself grows after every layer has run), then each query
 * head of the token at position pos against its KV head's keys 0..pos
 * (those the window leaves), softmax, the values, the sequence's edits,
 * and the output projection. The products go by tiles on team, each row
 * as it would go alone (row_product.h), and the heads by token and KV
 * head. Returns the output, in io->scratch; NULL, with the caches as
 * they were, when q, k or v of any row overflow float32.
 */
float *step_attention(const struct step_io *io, struct pool_team *team);

#endif
