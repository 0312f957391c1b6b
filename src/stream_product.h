/*
 * stream_product.h - a product through a weight matrix that reads the
 * matrix once, as it is stored, and never copies it: the rows of x are
 * packed instead (they are few, and each meets every weight), and each
 * weight is broadcast from where it lies into sixty-four rows' sums at
 * once. OpenBLAS packs the weights on every call, which at a hundred-odd
 * rows is a fifth of a decoder's pass. Two to eight rows go by outputs
 * instead, sixteen of W's rows transposed at a time, with the same bits.
 * AVX-512 only: the kernel keeps 24 sums of sixteen in registers.
 * Internal to the core; widen_product() chooses it.
 */
#ifndef ATTN_STREAM_PRODUCT_H
#define ATTN_STREAM_PRODUCT_H

#include "widen.h"

#include <stdbool.h>

/* Rows of x packed at a time (four vectors of sixteen), and W's columns
 * at a time. Every group of W's rows reads the whole packed block again,
 * so the block should stay in the core's second-level cache while W
 * streams past it: 2048 columns make 512 KiB, half of a 1 MiB cache.
 * A wider block (a 3072-wide down projection whole, 768 KiB) was pushed
 * out by W's lines: bert-base's pass at 512 wordpieces went 1.5-2 %
 * faster at 2048 than with the block as wide as the panel, and a block
 * of 1024 or 1536 was slower again, y's sums being added once a block. */
enum { STREAM_ROWS = 64, STREAM_COLS = 2048 };
_Static_assert(STREAM_ROWS * STREAM_COLS <= WIDEN_PANEL_FLOATS,
               "a packed block fits in a panel");

/* Outputs whose sums go into y together (stream_add_sums()), in the
 * streamed kernels of this file and of bf16_dots.c: three whole
 * transposes of sixteen, and a whole number of either kernel's groups of
 * six outputs (which each asserts), so that a short last group's
 * repeated row stays within the sums. */
enum { STREAM_FLUSH_OUTS = 48 };

/* Where row r0 (a multiple of STREAM_ROWS) and column k of packed rows
 * (widen.h's x_packed and y_packed) start, in floats from the first
 * block's start, blocks ld floats apart: that block's STREAM_ROWS rows
 * of column k lie side by side from there. */
static inline size_t stream_packed_at(size_t ld, size_t r0, size_t k)
{
    return r0 / STREAM_ROWS * ld + k * STREAM_ROWS;
}

/* Rows [r0, r0 + rows) of x (rows ldx apart), columns [k0, k0 + cols),
 * packed column by column into packed[k][r], width rows to a column, the
 * rows past x's zero; sixteen columns at a time, so that the writes stay
 * within a few cache lines. The quantized products pack x the same way
 * (quant_product.c). */
void stream_pack_rows(const float *x, size_t ldx, size_t r0, size_t rows,
                      size_t k0, size_t cols, size_t width, float *packed);

/* A group's sums (sums[j][r], stride to an output) into rows
 * [r0, r0 + rows) and outputs [o0, o0 + outs) of y (rows ldy apart): set
 * when set (to bias[j] + the sum when bias is not NULL), else added. */
void stream_add_sums(float *y, size_t ldy, size_t r0, size_t rows, size_t o0,
                     size_t outs, const float *sums, size_t stride,
                     const float *bias, bool set);

/* Can p go through stream_product() on this CPU? A float32 or bfloat16
 * matrix, two rows or more, and AVX-512. */
bool stream_product_can(const struct widen_product *p);

/*
 * y = beta y + x W^T, beta 0 (y is not read) or 1, with panel
 * (WIDEN_PANEL_FLOATS floats) for the packed rows. Each y sums its
 * products in the order of W's columns, by chunks of a few hundred
 * columns each summed apart and then added in: the same bits however
 * the caller cuts the product into rows or outputs. p->finish, when
 * set, is done to each block as it completes: 64 rows by 48 outputs, or
 * a few rows (eight at most) by all of them. A packed x (widen.h) is
 * read where it lies instead of packed into the panel, and a packed y
 * gets the sums as the kernel leaves them, with the same bits.
 */
void stream_product(const struct widen_product *p, float beta, float *panel);

#endif
