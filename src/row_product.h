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
 * in a fixed order that follows from in and W's width alone, in one sum
 * of sixteen lanes. Float32 W: the values by sixteens in order, value k
 * into lane k % 16. Bfloat16 W (whose words hold pairs): in each block
 * of thirty-two values the even ones, value k into lane (k % 32) / 2,
 * and then the odd ones. Each product is fused with its addition into
 * one rounding (a fused multiply-add; the plain build's fmaf()); the
 * sum's lanes are added pairwise (lane i and i + 8, then i + 4, i + 2,
 * i + 1), and the values left over after the whole blocks one by one,
 * each fused the same way. Every build (plain, AVX2, AVX-512)
 * gives the same bits. A 16-bit or sliced quantized row is widened
 * exactly first; a block-quantized W of whole blocks goes to
 * quant_product_by_rows() (quant_product.h), every row in its one-row
 * order.
 */
#ifndef ATTN_ROW_PRODUCT_H
#define ATTN_ROW_PRODUCT_H

#include "vecmath.h"
#include "widen.h"

/* y = beta y + x W^T as above; panel: per-thread scratch of
 * WIDEN_PANEL_FLOATS floats, which a 16-bit or sliced quantized W needs
 * widened in, and in which a bfloat16 W's rows of x are split once for
 * all its outputs (NULL: a float32 W only, or each call splits them). */
void row_product(const struct widen_product *p, float beta, float *panel);

/* The same in the build isa (which the CPU must run), for the tests that
 * hold the builds to the same bits. */
void row_product_isa(enum vec_isa isa, const struct widen_product *p,
                     float beta, float *panel);

#endif
