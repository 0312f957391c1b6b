/*
 * norm.h - RMS normalisation of rows, shared by the attention core (each
 * head of q and k, Qwen3's q_norm and k_norm) and the transformer block
 * (RMSNorm). Internal to the core.
 */
#ifndef ATTN_NORM_H
#define ATTN_NORM_H

#include <stddef.h>

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for r < rows, the mean of
 * squares in double, the normed value rounded to float32 before the
 * weight, as LlamaRMSNorm; x and y may be the same. x, y: [rows][cols] */
void norm_rms(const float *x, size_t rows, size_t cols, const float *w,
              float eps, float *y);

#endif
