/*
 * norm.h - normalisation of rows: RMS, shared by the attention core (each
 * head of q and k, Qwen3's q_norm and k_norm) and the transformer block
 * (RMSNorm), and the transformer block's LayerNorm. Internal to the core.
 *
 * A row's sums (of its values, of their squares or of their squares about
 * the mean) go in double, in one order in every build: value c into
 * partial sum c % NORM_LANES, the partial sums then added as a tree (lane
 * l and l + 8, then l + 4, l + 2, l + 1). So many sums in flight that the
 * adders do not wait on each other, and the same bits on every CPU.
 */
#ifndef ATTN_NORM_H
#define ATTN_NORM_H

#include "vecmath.h"

#include <stddef.h>

enum { NORM_LANES = 16 };

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for r < rows, the mean of
 * squares in double, the normed value rounded to float32 before the
 * weight, as LlamaRMSNorm; x and y may be the same. x, y: [rows][cols] */
void norm_rms(const float *x, size_t rows, size_t cols, const float *w,
              float eps, float *y);

/* y[r] = (x[r] - mean) / sqrt(var + eps) * w + b for r < rows, the mean
 * and the biased variance in double (two passes: no cancellation), the
 * normed value rounded to float32 before the weight and bias, as
 * nn.LayerNorm; x and y may be the same. */
void norm_layer(const float *x, size_t rows, size_t cols, const float *w,
                const float *b, float eps, float *y);

/* The same through one build's code (tests: every build, the same bits). */
void norm_rms_isa(enum vec_isa isa, const float *x, size_t rows, size_t cols,
                  const float *w, float eps, float *y);
void norm_layer_isa(enum vec_isa isa, const float *x, size_t rows, size_t cols,
                    const float *w, const float *b, float eps, float *y);

#endif
