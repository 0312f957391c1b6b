/*
 * quant_product.h - products through a matrix of ggml's block-quantized
 * weights (quant.h: a GGUF file's Q8_0, Q4_K, Q6_K ...), decoding the
 * weights inside the product, a block at a time in registers or a panel
 * at a time in the caller's scratch, never a widened copy of the whole
 * matrix. Internal to the core; widen_product() (widen.h) sends
 * quantized matrices here, a share of W's rows per thread.
 *
 * Numerics (the contract):
 *
 *  - Each weight is exactly quant_widen()'s float32 value for it, that
 *    is ggml's reference dequantizer's. x is used as it is: it is never
 *    quantized (as llama.cpp's integer dot products quantize it).
 *
 *  - Each y is a sum of float32 products, each product fused with the
 *    sum it enters (one rounding per multiply-add), in an order that
 *    follows from rows, in and the type alone: an output has the same
 *    bits whether it is computed alone or in a call of a thousand, in
 *    any thread, on every run, and in each build (plain C, AVX2,
 *    AVX-512), which all take the same order.
 *
 *  - One row of x (rows == 1: a token after a KV cache) is a dot product
 *    per output: value k of W's row goes into sum (k / 16) % 4, lane
 *    k % 16, and the 64 lanes are added at the end in a fixed tree
 *    (quant_dot.c). Two rows or more go through panels of QUANT_COLS
 *    columns: each y sums a panel's products in the order of k, by
 *    chunks of QUANT_CHUNK columns each summed from zero and added to
 *    the panel's sum in turn, and the panels' sums are added into y one
 *    after another (the first one set into y when beta is 0). The two
 *    ways may differ in the last places. quant_product_by_rows() takes
 *    every row the one-row way, however many there are.
 *
 *  - The plain C build keeps the same order with fmaf(), which is slow
 *    on a CPU without fused multiply-adds; x86-64 CPUs with AVX2 take the
 *    AVX2 or AVX-512 build.
 *
 * Against the exact product the error is within about
 * (in / 64 + 6) * 2^-24 * sum_k |x_k w_k| for one row, and
 * (QUANT_CHUNK + in / QUANT_CHUNK) * 2^-24 * sum_k |x_k w_k| for several
 * (plus 2^-24 |y| at beta 1); the tests hold them to a little more.
 */
#ifndef ATTN_QUANT_PRODUCT_H
#define ATTN_QUANT_PRODUCT_H

#include "quant.h"
#include "vecmath.h"

#include <stddef.h>

/* Columns of W summed apart, and columns per panel (both multiples of
 * every type's block). */
enum { QUANT_CHUNK = 256, QUANT_COLS = 1024 };

/*
 * Operands: x [rows][in] (rows ldx floats apart), W [out][in] of ggml type
 * `type` (each row in / quant_block_values(type) blocks, rows row_bytes
 * apart), y [rows][out] (rows ldy apart). in is a multiple of the type's
 * block values (asserted: the caller has checked it).
 */
struct quant_product {
    const float *x;
    size_t ldx, rows, in;
    const void *w;
    quant_type type;
    size_t row_bytes, out;
    float *y;
    size_t ldy;
};

/*
 * y = beta*y + x W^T, beta 0 (y is not read) or 1; panel is per-thread
 * scratch of WIDEN_PANEL_FLOATS floats (widen.h), needed when rows >= 2
 * (it may be NULL for one row). Single-threaded; allocates nothing.
 */
void quant_product(const struct quant_product *p, float beta, float *panel);

/* The same in the build isa (which the CPU must run), for tests that
 * hold the builds to the same bits; quant_product() takes the widest. */
void quant_product_isa(enum vec_isa isa, const struct quant_product *p,
                       float beta, float *panel);

/*
 * The same, every row of x in the one-row order whatever rows is: each
 * output of each row has the bits of that row's product alone (a NaN
 * stays a NaN, its sign and payload as the multiply-adds' operands
 * happen to give it). For a batched step, whose rows belong to sequences
 * that must each get what they would alone. The AVX-512 build decodes
 * each piece of W in registers once for two rows of x; the AVX2 build,
 * from four rows on, into a buffer on the stack once for up to
 * QUANT_BY_ROWS rows, then sums it row by row; the plain build, and AVX2
 * below four rows, take each row alone. The panels' way does more per
 * weight but sums in another order. Needs no panel.
 */
void quant_product_by_rows(enum vec_isa isa, const struct quant_product *p,
                           float beta);

/* Between quant_product.c and the kernels' files (quant_dot*.c). */

/* y[r][o] = beta y[r][o] + x[r] . W[o] for every row r and output o,
 * each in the one-row order (quant_product_by_rows()). */
void quant_dot_outputs(enum vec_isa isa, const struct quant_product *p,
                       float beta);

/* dst[0 .. count) = quant_widen()'s values of the blocks at src (count a
 * whole number of blocks), in the build isa. */
void quant_decode(enum vec_isa isa, quant_type type, const void *src,
                  size_t count, float *dst);

/* The dot products of one row's kernels: sums[(k / 16) % 4][k % 16], then
 * reduced as quant_dot.c says. */
enum { QUANT_SUMS = 4, QUANT_LANES = 16 };

/* Rows of x that share each decoded piece of W at most, and the values
 * of W's row decoded at a time for them (a whole number of every type's
 * blocks and of 64, one round of the four sums). */
enum { QUANT_BY_ROWS = 8, QUANT_ROW_PIECE = 1024 };

/* Each build's: dots[j] = x . W[j] for n rows of W (row_bytes apart, in
 * values each); the same for xrows <= QUANT_BY_ROWS rows of x (ldx
 * apart) into dots[r * lddots + j]; and the decoding of count values. */
#if HAVE_AVX2_BUILD
void quant_dots_avx2(quant_type type, const float *x, const void *w,
                     size_t row_bytes, size_t in, size_t n, float *dots);
void quant_rows_dots_avx2(quant_type type, const float *x, size_t ldx,
                          size_t xrows, const void *w, size_t row_bytes,
                          size_t in, size_t n, float *dots, size_t lddots);
void quant_rows_dots_avx512(quant_type type, const float *x, size_t ldx,
                            size_t xrows, const void *w, size_t row_bytes,
                            size_t in, size_t n, float *dots, size_t lddots);
void quant_decode_avx2(quant_type type, const void *src, size_t count,
                       float *dst);
void quant_dots_avx512(quant_type type, const float *x, const void *w,
                       size_t row_bytes, size_t in, size_t n, float *dots);
void quant_decode_avx512(quant_type type, const void *src, size_t count,
                         float *dst);
#endif

#endif
