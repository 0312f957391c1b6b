/*
 * row_product.c - products of rows that are each a token of its own
 * (row_product.h).
 *
 * A kernel call takes two of W's rows and up to ROW_XS rows of x: each
 * weight vector is loaded (and a bfloat16 one widened) once for all the
 * rows, and the 2 x rows sums stay in registers. Rows past ROW_XS go in
 * further calls over the same two rows of W, which are then in the core's
 * first cache. Which rows and outputs share a call changes no sum.
 */
#include "quant.h"
#include "quant_product.h"
#include "row_product.h"

#include <string.h>

/* Rows of x to a kernel call: 2 x ROW_XS sums, ROW_XS rows and two
 * weight vectors take 26 of AVX-512's 32 vector registers. */
enum { ROW_XS = 8 };

/* Outputs whose quantized rows are read for one row of x after another:
 * a few tens of KiB, which stay in the core's second cache. */
enum { QUANT_OUT_TILE = 32 };

/* Sixteen values of a row of W from value i: floats, or bfloat16s
 * widened. */
ALWAYS_INLINE void load16(const void *w, bool bf16, size_t i, v16f *out)
{
    if (bf16)
        bf16x16((const uint16_t *)w + i, out);
    else
        memcpy(out, (const float *)w + i, sizeof *out);
}

/* Value i of a row of W as a float. */
ALWAYS_INLINE float value_at(const void *w, bool bf16, size_t i)
{
    if (!bf16)
        return ((const float *)w)[i];
    const uint32_t bits = (uint32_t)((const uint16_t *)w)[i] << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The end of a dot: the lanes of acc added pairwise, lane i to lane
 * i + 8, then i + 4, i + 2 and i + 1 (a fixed tree, four vector adds),
 * then the products of values from to n one by one. */
ALWAYS_INLINE float finish(const v16f *acc, const float *x, const void *w,
                           bool bf16, size_t from, size_t n)
{
    typedef float v8 __attribute__((vector_size(32)));
    typedef float v4 __attribute__((vector_size(16)));
    typedef float v2 __attribute__((vector_size(8)));
    const v8 s8 = __builtin_shufflevector(*acc, *acc, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(*acc, *acc, 8, 9, 10, 11, 12, 13, 14,
                                          15);
    const v4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) +
                  __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
    const v2 s2 = __builtin_shufflevector(s4, s4, 0, 1) +
                  __builtin_shufflevector(s4, s4, 2, 3);
    float sum = s2[0] + s2[1];
    for (size_t i = from; i < n; i++)
        sum += x[i] * value_at(w, bf16, i);
    return sum;
}

/* dots[j * rows + r] = x[r] . w[j] over n values for the two rows w[0],
 * w[1] of W and rows (1 to ROW_XS, a constant where it is inlined) rows
 * of x, ldx apart. */
ALWAYS_INLINE void kernel_body(const float *x, size_t ldx, int rows,
                               const void *const *w, bool bf16, size_t n,
                               float *dots)
{
    v16f acc0[ROW_XS], acc1[ROW_XS];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
        acc0[r] = acc1[r] = (v16f){0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f a, b;
        load16(w[0], bf16, i, &a);
        load16(w[1], bf16, i, &b);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            v16f xv;
            memcpy(&xv, x + (size_t)r * ldx + i, sizeof xv);
            acc0[r] += xv * a;
            acc1[r] += xv * b;
        }
    }
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ldx;
        dots[r] = finish(&acc0[r], xr, w[0], bf16, i, n);
        dots[rows + r] = finish(&acc1[r], xr, w[1], bf16, i, n);
    }
}

typedef void kernel_fn(const float *x, size_t ldx, const void *const *w,
                       size_t n, float *dots);

/* A build's kernels, for 1 to ROW_XS rows of float32 or bfloat16 W. */
#define KERNEL(isa_attr, isa, kind, bf16, rows)                                \
    isa_attr static void kernel_##kind##_##rows##_##isa(                       \
        const float *x, size_t ldx, const void *const *w, size_t n,            \
        float *dots)                                                           \
    {                                                                          \
        kernel_body(x, ldx, rows, w, bf16, n, dots);                           \
    }
#define KERNELS(isa_attr, isa, kind, bf16)                                     \
    KERNEL(isa_attr, isa, kind, bf16, 1)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 2)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 3)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 4)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 5)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 6)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 7)                                       \
    KERNEL(isa_attr, isa, kind, bf16, 8)
#define TABLE(kind, isa)                                                       \
    {                                                                          \
        kernel_##kind##_1_##isa, kernel_##kind##_2_##isa,                      \
            kernel_##kind##_3_##isa, kernel_##kind##_4_##isa,                  \
            kernel_##kind##_5_##isa, kernel_##kind##_6_##isa,                  \
            kernel_##kind##_7_##isa, kernel_##kind##_8_##isa                   \
    }

#define PLAIN_ATTR
KERNELS(PLAIN_ATTR, plain, f32, false)
KERNELS(PLAIN_ATTR, plain, bf16, true)
#if HAVE_AVX2_BUILD
KERNELS(AVX2_TARGET, avx2, f32, false)
KERNELS(AVX2_TARGET, avx2, bf16, true)
KERNELS(AVX512_TARGET, avx512, f32, false)
KERNELS(AVX512_TARGET, avx512, bf16, true)
#endif

/* kernels[isa][bf16][rows - 1] */
static kernel_fn *const kernels[3][2][ROW_XS] = {
    [VEC_ISA_PLAIN] = {TABLE(f32, plain), TABLE(bf16, plain)},
#if HAVE_AVX2_BUILD
    [VEC_ISA_AVX2] = {TABLE(f32, avx2), TABLE(bf16, avx2)},
    [VEC_ISA_AVX512] = {TABLE(f32, avx512), TABLE(bf16, avx512)},
#endif
};
#undef TABLE
#undef KERNELS
#undef KERNEL

/* y[r][o] and y[r][o + 1] (when below out) from dots [2][rows]. */
static void put(const struct widen_product *p, size_t r0, size_t rows, size_t o,
                const float *dots, float beta)
{
    for (size_t j = 0; j < 2 && o + j < p->out; j++)
        for (size_t r = 0; r < rows; r++) {
            float *y = p->y + (r0 + r) * p->ldy + o + j;
            const float dot = dots[j * rows + r];
            *y = beta == 0.0f ? dot : beta * *y + dot;
        }
}

/* Rows o and o + 1 of W (the last one twice when o + 1 is out: its sums
 * are made again and not kept) against every row of x. w: where each
 * row's values begin, as kind (float32 or bfloat16) says. */
static void pair_product(enum vec_isa isa, const struct widen_product *p,
                         size_t o, const void *const *w, bool bf16, float beta)
{
    float dots[2 * ROW_XS];
    for (size_t r0 = 0; r0 < p->rows; r0 += ROW_XS) {
        const size_t rows = p->rows - r0 < ROW_XS ? p->rows - r0 : ROW_XS;
        kernels[isa][bf16][rows - 1](p->x + r0 * p->ldx, p->ldx, w, p->in,
                                     dots);
        put(p, r0, rows, o, dots, beta);
    }
}

/* Row o of W from value v0 of it on, at its stored width. */
static const void *w_at(const struct widen_product *p, size_t o, size_t v0)
{
    return (const char *)p->w + attn_dtype_bytes(p->dtype, o * p->ldw + v0);
}

/* Whole blocks of a quantized W: every row of x through quant_product()'s
 * one-row way, a tile of outputs at a time. */
static void quant_rows(enum vec_isa isa, const struct widen_product *p,
                       float beta)
{
    const int type = widen_quant_type(p->dtype);
    for (size_t o0 = 0; o0 < p->out; o0 += QUANT_OUT_TILE) {
        const size_t outs =
            p->out - o0 < QUANT_OUT_TILE ? p->out - o0 : QUANT_OUT_TILE;
        for (size_t r = 0; r < p->rows; r++) {
            const struct quant_product q = {
                .x = p->x + r * p->ldx,
                .ldx = p->ldx,
                .rows = 1,
                .in = p->in,
                .w = w_at(p, o0, p->col0),
                .type = (quant_type)type,
                .row_bytes = attn_dtype_bytes(p->dtype, p->ldw),
                .out = outs,
                .y = p->y + r * p->ldy + o0,
                .ldy = p->ldy};
            quant_product_isa(isa, &q, beta, NULL);
        }
    }
}

void row_product_isa(enum vec_isa isa, const struct widen_product *p,
                     float beta, float *panel)
{
    if (p->rows == 0 || p->out == 0)
        return;
    const size_t blk = attn_dtype_block(p->dtype);
    if (blk > 1 && p->col0 % blk == 0 && p->in % blk == 0 &&
        (beta == 0.0f || beta == 1.0f)) {
        quant_rows(isa, p, beta);
        return;
    }
    if (p->dtype == ATTN_F32 || p->dtype == ATTN_BF16) {
        for (size_t o = 0; o < p->out; o += 2) {
            const size_t o1 = o + 1 < p->out ? o + 1 : o;
            const void *w[2] = {w_at(p, o, p->col0), w_at(p, o1, p->col0)};
            pair_product(isa, p, o, w, p->dtype == ATTN_BF16, beta);
        }
        return;
    }
    // an IEEE half's rows, or a quantized slice: the blocks covering the
    // slice widened exactly, two rows of W at a time, into the panel
    const size_t b0 = p->col0 / blk * blk;
    const size_t width = (p->col0 + p->in + blk - 1) / blk * blk - b0;
    for (size_t o = 0; o < p->out; o += 2) {
        const size_t o1 = o + 1 < p->out ? o + 1 : o;
        attn_widen(w_at(p, o, b0), p->dtype, width, panel);
        attn_widen(w_at(p, o1, b0), p->dtype, width, panel + width);
        const void *w[2] = {panel + (p->col0 - b0),
                            panel + width + (p->col0 - b0)};
        pair_product(isa, p, o, w, false, beta);
    }
}

void row_product(const struct widen_product *p, float beta, float *panel)
{
    row_product_isa(vec_isa_best(), p, beta, panel);
}
