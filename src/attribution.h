/*
 * attribution.h - direct logit attribution, in the core: how much each
 * component writing into the residual stream adds to one logit, or to
 * the difference of two, at one position.
 *
 * The final residual r at the position is the sum of the embedding, each
 * head's values through its slice of W_O, each layer's output bias and
 * each feed-forward's output. Each of them is read through the final norm
 * with the norm's scale frozen at r, as TransformerLens's
 * apply_ln_to_stack does (and its docs/math.md entry): for RMSNorm c /
 * rms(r) * w, for LayerNorm (c - mean c) / std(r) * w, then dotted with
 * u = lm_head[correct] - lm_head[incorrect] (or lm_head[target]). The
 * norm's bias goes apart, into `bias`. Since the norm is linear once its
 * scale is frozen, the parts add up to the model's logit (difference).
 *
 * Where a model norms its attention's output before the residual sum
 * (Gemma 2 and 3, OLMo 2: RMSNorms), that norm's scale is frozen too, at
 * the layer's output, so each head's share still adds up to what the
 * layer wrote. The logits are taken before any final soft-cap (Gemma 2's
 * final_logit_softcapping), where the parts add up; the cap is not
 * linear.
 *
 * The model must have an output head and a residual stream that no norm
 * rewrites (not post-norm); the activations are a pass's with
 * XF_WANT_ACTIVATIONS at the position (transformer.h). All sums in
 * double. Errors follow attention.h.
 */
#ifndef ATTN_ATTRIBUTION_H
#define ATTN_ATTRIBUTION_H

#include "transformer.h"

/* What each component adds to the logit (difference). */
struct xf_dla {
    size_t layers, heads;
    double *heads_part; /* [layers][heads] each head's values through its
                           slice of W_O */
    double *mlp;        /* [layers] each feed-forward's output */
    double *attn_bias;  /* [layers] each output projection's bias; NULL
                           for a model without them */
    double embed;       /* the token's embedding (and learned position) */
    double bias;        /* the final norm's bias (LayerNorm) */
    double total;       /* the sum of all of the above */
    double logit;       /* the model's own: r through the final norm and
                           u, in double */
};

/*
 * The attribution to target[0] - target[1] (n_target 2) or to target[0]
 * (n_target 1), from acts, a pass's result with XF_WANT_ACTIVATIONS at
 * one position (its captured == 1). Fails naming "model" for a model
 * without an output head or a post-norm one, "target" for an id not below
 * vocab_size. On success the caller owns *out; release it with
 * xf_dla_free().
 */
attn_status xf_dla(const struct xf_model *m, const struct xf_result *acts,
                   const uint32_t *target, size_t n_target, struct xf_dla *out,
                   struct attn_error *err);
void xf_dla_free(struct xf_dla *dla);

#endif
