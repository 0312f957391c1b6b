/*
 * mask.h - which keys a query may see, from every mask a config can
 * carry (causal, a sliding window, a boolean or additive mask, key
 * padding): one view of them, read by the forward pass when it masks
 * scores and by the head measures when they count what a row may see.
 * Internal to the core.
 */
#ifndef ATTN_MASK_H
#define ATTN_MASK_H

#include "attention.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which keys one sequence's queries may see, and what their scores get
 * added. Keys at or past n_ctx (bias_k's, the zero key) are never masked:
 * PyTorch pads every mask with an allowed column for them. */
struct mask_view {
    bool causal;
    size_t window;       /* 0, or keys j <= i - window are out of sight */
    const uint8_t *mask; /* [N][M] or NULL; nonzero = may attend */
    const float *bias;   /* [N][M] or NULL; added to the scores */
    const uint8_t *key_padding; /* [M] or NULL; nonzero = ignore */
    size_t n_ctx;               /* M, the stride of mask and bias */
    size_t head_stride;         /* N x M between the heads' masks; 0: shared */
};

/* Sequence b's view of c's masks (c resolved). */
struct mask_view mask_view_of(const struct attn_config *c, size_t b);

/* The view of head a's mask. */
struct mask_view mask_view_head(const struct mask_view *mv, size_t a);

/* Whether query i may see key j. */
bool mask_key_visible(const struct mask_view *mv, size_t i, size_t j);

/* How many of the n_query queries may see key j. */
size_t mask_queries_seeing(const struct mask_view *mv, size_t n_query,
                           size_t j);

/* Whether the view has per-pair arrays (a mask, a bias, key padding),
 * or only the causal and window rules, whose visible keys are ranges. */
bool mask_has_arrays(const struct mask_view *mv);

/* Mask the scores s[0 .. nj) of query i against keys j0 on: -INFINITY
 * where the pair is hidden, the additive mask added elsewhere. */
void mask_row(const struct mask_view *mv, size_t i, size_t j0, float *s,
              size_t nj);

#endif
