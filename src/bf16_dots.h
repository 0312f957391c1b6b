/*
 * bf16_dots.h - products through bfloat16 weights that round the
 * activations to bfloat16 too, and sum pairs of products in float32 with
 * the CPU's bfloat16 dot-product instruction (AVX512_BF16's vdpbf16ps):
 * how llama.cpp and PyTorch compute a bfloat16 model on such a CPU, at
 * twice the rate of attnd's exact products. An option of a run
 * (xf_run.bf16_dots), never the default. Internal to the core;
 * widen_product() sends a product here when its operands ask and the CPU
 * can.
 *
 * Numerics: each x is rounded to the nearest bfloat16 (ties to even,
 * 8 bits of precision: a relative error of at most 2^-9), each weight is
 * exact, and each y is the instruction's sum of pairs of products into
 * float32, by chunks of 256 columns summed apart and then added in. So
 * |y - exact| <= (2^-8 + 2^-19) sum_k |x_k w_k| roughly, plus float32's
 * summation error: docs/core.md states the bound the tests hold. The
 * bits depend on the CPU's instruction (it flushes denormal inputs and
 * outputs to zero), not on the thread or on how a caller cuts rows and
 * outputs.
 */
#ifndef ATTN_BF16_DOTS_H
#define ATTN_BF16_DOTS_H

#include "widen.h"

#include <stdbool.h>

/* Does this CPU have AVX512_BF16 (and AVX-512)? */
bool bf16_dots_available(void);

/* y = beta y + x W^T for a bfloat16 W, beta 0 or 1, rows >= 1, on a CPU
 * that has the instruction; panel: WIDEN_PANEL_FLOATS floats of
 * per-thread scratch for the packed rows of x. */
void bf16_dots_product(const struct widen_product *p, float beta, float *panel);

/* The same for rows that are each a token of their own (one token after
 * a KV cache, or one of each of the sequences a decoding step serves):
 * each row's bfloat16 values meet W's along the row, thirty-two at a
 * time, so that a row's outputs are the same bits whatever rows are
 * beside it (as row_product.h's exact way keeps them), and one row is
 * as quick as the matrix can be read. beta 0 or 1; panel: scratch for
 * the rows rounded to bfloat16. */
void bf16_dots_rows(const struct widen_product *p, float beta, float *panel);

#endif
