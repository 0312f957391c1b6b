/*
 * row_product.h - products whose rows of x are each a token of its own:
 * one token after a KV cache, or one token of each of the sequences a
 * decoding step serves at once. Every output of a row is the same bits
 * whether the row is alone or beside others, so that decoding many
 * sequences together gives each what it would get alone; and each weight
 * is read from memory once for all the rows, which is the point of
 * serving them together. Internal to the core; widen_product() sends
 * here a product of one row, or one marked alone.
 *
 * Numerics (the contract): y[r][o] = beta y[r][o] + x[r] . W[o], the dot
 * in a fixed order that follows from in and W's width alone, in two
 * sums of sixteen lanes. Float32 W: while thirty-two values remain,
 * value k goes into lane k % 16 of the first sum when k / 16 is even,
 * of the second when it is odd; then sixteen more into the first if
 * sixteen remain. Bfloat16 W (whose words hold pairs): in each block of
 * thirty-two values the even ones go into lane (k % 32) / 2 of the first
 * sum and the odd ones into the second. Each product is rounded and then
 * added (nothing fused, as vecmath.h's kernels); the two sums are added,
 * their lanes added pairwise (lane i and i + 8, then i + 4, i + 2,
 * i + 1), and the values left over after them one by one. Every build
 * (plain, AVX2, AVX-512) gives the same bits. A 16-bit or sliced quantized row
 * is widened exactly first; a block-quantized W of whole blocks goes a row at a
 * time to quant_product() (quant_product.h), its one-row order.
 */
#ifndef ATTN_ROW_PRODUCT_H
#define ATTN_ROW_PRODUCT_H

#include "vecmath.h"
#include "widen.h"

/* y = beta y + x W^T as above; panel: per-thread scratch of
 * WIDEN_PANEL_FLOATS floats, which a 16-bit or sliced quantized W needs
 * (NULL otherwise). */
void row_product(const struct widen_product *p, float beta, float *panel);

/* The same in the build isa (which the CPU must run), for the tests that
 * hold the builds to the same bits. */
void row_product_isa(enum vec_isa isa, const struct widen_product *p,
                     float beta, float *panel);

#endif
