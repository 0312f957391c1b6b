/*
 * widen.c - 16-bit weights: their exact float32 values (attention.h), and
 * products through weights at their stored width (widen.h).
 */
#include "bf16_dots.h"
#include "quant.h"
#include "quant_product.h"
#include "row_product.h"
#include "stream_product.h"
#include "vecmath.h"
#include "widen.h"

#include <assert.h>
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

int widen_quant_type(attn_dtype dtype)
{
    return widths[dtype].quant;
}

const char *attn_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < ATTN_DTYPES ? widths[dtype].name : NULL;
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

/* ------------------------------------------------------- the products */

/* Panel columns (of W's in) are a multiple of PANEL_ALIGN, for the
 * kernels, and of a quantized type's block, and at least PANEL_MIN_COLS
 * unless W has fewer. */
enum { PANEL_ALIGN = 16, PANEL_MIN_COLS = 256 };

bool widen_product_streams(const struct widen_product *p, float beta,
                           bool panel)
{
    const bool dots =
        p->bf16_dots && p->dtype == ATTN_BF16 && bf16_dots_available();
    return panel && (beta == 0.0f || beta == 1.0f) && !p->col0 && !dots &&
           p->rows > 1 && !p->alone && stream_product_can(p);
}

/* y = beta y + x W^T by one of the ways widen_product() describes; true
 * when that way has done p->finish itself. */
static bool product(const struct widen_product *p, float beta, float *panel)
{
    if (p->col0 && attn_dtype_block(p->dtype) == 1) {
        struct widen_product at = *p;
        at.w = w_at(p, 0, p->col0);
        at.col0 = 0;
        widen_product(&at, beta, panel);
        return true;
    }
    if (widen_product_streams(p, beta, panel != NULL)) {
        stream_product(p, beta, panel);
        return true;
    }
    assert(!p->x_packed && !p->y_packed);
    if (p->bf16_dots && p->dtype == ATTN_BF16 && panel &&
        (beta == 0.0f || beta == 1.0f) && bf16_dots_available()) {
        if (p->rows == 1 || p->alone)
            bf16_dots_rows(p, beta, panel);
        else
            bf16_dots_product(p, beta, panel);
        return false;
    }
    if (p->rows == 1 || p->alone) {
        row_product(p, beta, panel);
        return false;
    }
    const size_t blk = attn_dtype_block(p->dtype);
    if (blk > 1 && p->col0 % blk == 0 && p->in % blk == 0 && panel &&
        (beta == 0.0f || beta == 1.0f)) {
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
        return false;
    }
    if (p->dtype == ATTN_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->rows,
                    (int)p->out, (int)p->in, 1.0f, p->x, (int)p->ldx, p->w,
                    (int)p->ldw, beta, p->y, (int)p->ldy);
        return false;
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
    return false;
}

void widen_product(const struct widen_product *p, float beta, float *panel)
{
    bool finished;
    if (p->bias && !widen_product_streams(p, beta, panel != NULL)) {
        // the bias in each row of y, and the product added to it
        assert(beta == 0.0f && !p->y_packed);
        for (size_t r = 0; r < p->rows; r++)
            memcpy(p->y + r * p->ldy, p->bias, p->out * sizeof *p->y);
        struct widen_product added = *p;
        added.bias = NULL;
        finished = product(&added, 1.0f, panel);
    } else {
        assert(!p->bias || beta == 0.0f);
        finished = product(p, beta, panel);
    }
    if (!finished && p->finish)
        p->finish(p->y, p->ldy, p->rows, p->out, p->finish_arg);
}
