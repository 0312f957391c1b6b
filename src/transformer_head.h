/*
 * transformer_head.h - a decoder's output head: the logits of rows of
 * final hidden states through lm_head, and the logit lens (every layer's
 * output read through the final norm and lm_head), which xf_forward()
 * gives as XF_WANT_LOGITS and XF_WANT_LOGIT_LENS ask. Internal to the
 * core.
 */
#ifndef ATTN_TRANSFORMER_HEAD_H
#define ATTN_TRANSFORMER_HEAD_H

#include "pool.h"
#include "transformer.h"
#include "transformer_units.h"

/* Rows of hidden states the lens reads through the head at once: its
 * scratch holds their logits. */
enum { HEAD_LENS_ROWS = 16 };

/* y [rows][vocab] = x [rows][H] lm_head^T, by tiles of the vocabulary on
 * team (the team's pool held by the caller), each soft-capped when the
 * model caps its logits (final_softcap); panels: one per member, or NULL
 * when lm_head is float32; how: the pass's way with its rows
 * (transformer_units.h). */
void head_logits(struct pool_team *team, const struct xf_model *m,
                 const float *x, size_t rows, float *y, float *panels,
                 struct xf_products how);

/* A logit as the model gives it: c tanh(logit / c) with its final_softcap
 * c, or as it is without one. */
double head_capped(const struct xf_model *m, double logit);

/* Floats of the lens's scratch for n tokens. */
size_t head_lens_floats(const struct xf_model *m, size_t n);

/*
 * The lens of one layer: h [n][H] its output (final: already through the
 * final norm, as the last layer's is), each row through the final norm
 * (unless final) and lm_head, its k most probable tokens with their
 * probabilities into out [n][k]. scratch: head_lens_floats().
 */
void head_lens(struct pool_team *team, const struct xf_model *m, const float *h,
               size_t n, bool final, size_t k, struct xf_candidate *out,
               float *scratch, float *panels);

#endif
