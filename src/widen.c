/*
 * widen.c - 16-bit weights: their exact float32 values (attention.h), and
 * products through weights at their stored width (widen.h).
 */
#include "quant.h"
#include "quant_product.h"
#include "stream_product.h"
#include "vecmath.h"
#include "widen.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Each width's ggml type (quant.h) and name; a 0 type: not quantized. */
static const struct {
    int quant;
    const char *name;
} widths[ATTN_DTYPES] = {
    [ATTN_F32] = {0, "F32"},
    [ATTN_F16] = {0, "F16"},
    [ATTN_BF16] = {0, "BF16"},
    [ATTN_Q8_0] = {QUANT_Q8_0, "Q8_0"},
    [ATTN_Q4_0] = {QUANT_Q4_0, "Q4_0"},
    [ATTN_Q4_1] = {QUANT_Q4_1, "Q4_1"},
    [ATTN_Q5_0] = {QUANT_Q5_0, "Q5_0"},
    [ATTN_Q5_1] = {QUANT_Q5_1, "Q5_1"},
    [ATTN_Q4_K] = {QUANT_Q4_K, "Q4_K"},
    [ATTN_Q5_K] = {QUANT_Q5_K, "Q5_K"},
    [ATTN_Q6_K] = {QUANT_Q6_K, "Q6_K"},
};

size_t attn_dtype_block(attn_dtype dtype)
{
    const int q = widths[dtype].quant;
    return q ? quant_block_values(q) : 1;
}

size_t attn_dtype_bytes(attn_dtype dtype, size_t count)
{
    const int q = widths[dtype].quant;
    if (q)
        return count / quant_block_values(q) * quant_block_bytes(q);
    return count * (dtype == ATTN_F32 ? 4 : 2);
}

const char *attn_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < ATTN_DTYPES ? widths[dtype].name : NULL;
}

typedef uint16_t v16h __attribute__((vector_size(32)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* 16 bfloat16s of h as floats: each a float's upper half, widened and
 * shifted in registers (a vector cast keeps the bits; going through
 * memory instead would stall on every load). */
ALWAYS_INLINE void bf16x16(const uint16_t *h, v16f *out)
{
    v16h half;
    memcpy(&half, h, sizeof half);
    const v16u bits = __builtin_convertvector(half, v16u) << 16;
    *out = (v16f)bits;
}

/* dst[0 .. count) from bfloat16 src: sixteen at a time in registers, the
 * rest one by one; every build gives the same bits (there is no
 * arithmetic). */
ALWAYS_INLINE void widen_bf16_body(const uint16_t *h, size_t count, float *dst)
{
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        v16f v;
        bf16x16(h + i, &v);
        memcpy(dst + i, &v, sizeof v);
    }
    for (; i < count; i++) {
        const uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}

static void widen_bf16_plain(const uint16_t *h, size_t count, float *dst)
{
    widen_bf16_body(h, count, dst);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static void widen_bf16_avx2(const uint16_t *h, size_t count,
                                        float *dst)
{
    widen_bf16_body(h, count, dst);
}
AVX512_TARGET static void widen_bf16_avx512(const uint16_t *h, size_t count,
                                            float *dst)
{
    widen_bf16_body(h, count, dst);
}
#endif

/* An IEEE half's value, exactly (every half is a float). */
static float half_to_float(uint16_t h)
{
    const unsigned exp = h >> 10 & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)mant, -24); /* zero or subnormal */
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 0x400), (int)exp - 25);
    return h >> 15 ? -v : v;
}

void attn_widen(const void *src, attn_dtype dtype, size_t count, float *dst)
{
    if (dtype == ATTN_F32) {
        memcpy(dst, src, count * sizeof *dst);
        return;
    }
    if (widths[dtype].quant) {
        quant_widen(src, (quant_type)widths[dtype].quant, count, dst);
        return;
    }
    const uint16_t *h = src;
    if (dtype == ATTN_BF16) { /* a float's upper half */
        VEC_DISPATCH(vec_isa_best(), widen_bf16, h, count, dst);
        return;
    }
    for (size_t i = 0; i < count; i++)
        dst[i] = half_to_float(h[i]);
}

/* ------------------------------------------------- a row of bfloat16s */

/* x . w over n values, w bfloat16: thirty-two products at a time in two
 * sixteen-wide sums, then the tail, then the lanes in a fixed order, so
 * every build gives the same bits. */
ALWAYS_INLINE float dot_bf16_body(const float *x, const uint16_t *w, size_t n)
{
    v16f a0 = {0}, a1 = {0};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v16f x0, x1, w0, w1;
        memcpy(&x0, x + i, sizeof x0);
        memcpy(&x1, x + i + 16, sizeof x1);
        bf16x16(w + i, &w0);
        bf16x16(w + i + 16, &w1);
        a0 += x0 * w0;
        a1 += x1 * w1;
    }
    a0 += a1;
    float sum = 0.0f;
    for (int k = 0; k < 16; k++)
        sum += a0[k];
    for (; i < n; i++) {
        const uint32_t bits = (uint32_t)w[i] << 16;
        float v;
        memcpy(&v, &bits, sizeof v);
        sum += x[i] * v;
    }
    return sum;
}

static float dot_bf16_plain(const float *x, const uint16_t *w, size_t n)
{
    return dot_bf16_body(x, w, n);
}
#if HAVE_AVX2_BUILD
AVX2_TARGET static float dot_bf16_avx2(const float *x, const uint16_t *w,
                                       size_t n)
{
    return dot_bf16_body(x, w, n);
}
AVX512_TARGET static float dot_bf16_avx512(const float *x, const uint16_t *w,
                                           size_t n)
{
    return dot_bf16_body(x, w, n);
}
#endif

/* The blocks of a row of W that hold columns [c0, c0 + n): they start
 * at *b0 and span *width values. */
static void covering(const struct widen_product *p, size_t c0, size_t n,
                     size_t *b0, size_t *width)
{
    const size_t blk = attn_dtype_block(p->dtype);
    *b0 = c0 / blk * blk;
    *width = (c0 + n + blk - 1) / blk * blk - *b0;
}

/* Row o of W from value v0 of it on, at its stored width. */
static const void *w_at(const struct widen_product *p, size_t o, size_t v0)
{
    return (const char *)p->w + attn_dtype_bytes(p->dtype, o * p->ldw + v0);
}

/* One row of x: a product that only streams W, which a panel would write
 * and read again for nothing. float32 goes to cblas_sgemv; bfloat16 is
 * widened in registers; an IEEE half or a quantized row a row at a time
 * into the panel. */
static void product_row(const struct widen_product *p, float beta, float *panel)
{
    if (p->dtype == ATTN_F32) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)p->out, (int)p->in, 1.0f,
                    p->w, (int)p->ldw, p->x, 1, beta, p->y, 1);
        return;
    }
    const enum vec_isa isa = vec_isa_best();
    size_t b0, width;
    covering(p, p->col0, p->in, &b0, &width);
    for (size_t o = 0; o < p->out; o++) {
        float dot;
        if (p->dtype == ATTN_BF16) {
            dot = VEC_DISPATCH(isa, dot_bf16, p->x, w_at(p, o, 0), p->in);
        } else {
            attn_widen(w_at(p, o, b0), p->dtype, width, panel);
            dot = cblas_sdot((int)p->in, p->x, 1, panel + (p->col0 - b0), 1);
        }
        p->y[o] = beta == 0.0f ? dot : beta * p->y[o] + dot;
    }
}

/* ------------------------------------------------------- the products */

/* Panel columns (of W's in) are a multiple of PANEL_ALIGN, for the
 * kernels, and of a quantized type's block, and at least PANEL_MIN_COLS
 * unless W has fewer. */
enum { PANEL_ALIGN = 16, PANEL_MIN_COLS = 256 };

void widen_product(const struct widen_product *p, float beta, float *panel)
{
    if (p->col0 && attn_dtype_block(p->dtype) == 1) {
        struct widen_product at = *p;
        at.w = w_at(p, 0, p->col0);
        at.col0 = 0;
        widen_product(&at, beta, panel);
        return;
    }
    const size_t blk = attn_dtype_block(p->dtype);
    if (blk > 1 && p->col0 % blk == 0 && p->in % blk == 0 &&
        (panel || p->rows == 1) && (beta == 0.0f || beta == 1.0f)) {
        const struct quant_product q = {
            .x = p->x,
            .ldx = p->ldx,
            .rows = p->rows,
            .in = p->in,
            .w = w_at(p, 0, p->col0),
            .type = (quant_type)widths[p->dtype].quant,
            .row_bytes = attn_dtype_bytes(p->dtype, p->ldw),
            .out = p->out,
            .y = p->y,
            .ldy = p->ldy};
        quant_product(&q, beta, panel);
        return;
    }
    if (p->rows == 1) {
        product_row(p, beta, panel);
        return;
    }
    if (panel && (beta == 0.0f || beta == 1.0f) && stream_product_can(p)) {
        stream_product(p, beta, panel);
        return;
    }
    if (p->dtype == ATTN_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->rows,
                    (int)p->out, (int)p->in, 1.0f, p->x, (int)p->ldx, p->w,
                    (int)p->ldw, beta, p->y, (int)p->ldy);
        return;
    }
    // blocks of W's columns at least PANEL_MIN_COLS wide (or all of them
    // when the panel holds every row at that), so that y is not read
    // again for every few columns; rows as many as the panel then holds,
    // with room for the part-blocks a quantized slice starts and ends in
    const size_t align = blk > PANEL_ALIGN ? blk : PANEL_ALIGN;
    size_t cols_per = WIDEN_PANEL_FLOATS / p->out;
    cols_per = cols_per < PANEL_MIN_COLS ? PANEL_MIN_COLS : cols_per;
    cols_per = cols_per < align ? align : cols_per / align * align;
    cols_per = p->in < cols_per ? p->in : cols_per;
    size_t rows_per = WIDEN_PANEL_FLOATS / (cols_per + 2 * (blk - 1));
    rows_per = p->out < rows_per ? p->out : rows_per;
    for (size_t o0 = 0; o0 < p->out; o0 += rows_per) {
        const size_t nr = p->out - o0 < rows_per ? p->out - o0 : rows_per;
        for (size_t k0 = 0; k0 < p->in; k0 += cols_per) {
            const size_t nc = p->in - k0 < cols_per ? p->in - k0 : cols_per;
            size_t b0, width;
            covering(p, p->col0 + k0, nc, &b0, &width);
            for (size_t r = 0; r < nr; r++)
                attn_widen(w_at(p, o0 + r, b0), p->dtype, width,
                           panel + r * width);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->rows,
                        (int)nr, (int)nc, 1.0f, p->x + k0, (int)p->ldx,
                        panel + (p->col0 + k0 - b0), (int)width,
                        k0 ? 1.0f : beta, p->y + o0, (int)p->ldy);
        }
    }
}
