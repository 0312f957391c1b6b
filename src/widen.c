/*
 * widen.c - 16-bit weights: their exact float32 values (attention.h), and
 * products through weights at their stored width (widen.h).
 */
#include "stream_product.h"
#include "vecmath.h"
#include "widen.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

size_t attn_dtype_size(attn_dtype dtype)
{
    return dtype == ATTN_F32 ? 4 : 2;
}

const char *attn_dtype_name(int dtype)
{
    static const char *const names[] = {"F32", "F16", "BF16"};
    return dtype >= 0 && dtype < 3 ? names[dtype] : NULL;
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

/* One row of x: a product that only streams W, which a panel would write
 * and read again for nothing. float32 goes to cblas_sgemv; bfloat16 is
 * widened in registers; an IEEE half a row at a time into the panel. */
static void product_row(const struct widen_product *p, float beta, float *panel)
{
    if (p->dtype == ATTN_F32) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)p->out, (int)p->in, 1.0f,
                    p->w, (int)p->ldw, p->x, 1, beta, p->y, 1);
        return;
    }
    const enum vec_isa isa = vec_isa_best();
    const uint16_t *w = p->w;
    for (size_t o = 0; o < p->out; o++) {
        const uint16_t *row = w + o * p->ldw;
        float dot;
        if (p->dtype == ATTN_BF16) {
            dot = VEC_DISPATCH(isa, dot_bf16, p->x, row, p->in);
        } else {
            attn_widen(row, p->dtype, p->in, panel);
            dot = cblas_sdot((int)p->in, p->x, 1, panel, 1);
        }
        p->y[o] = beta == 0.0f ? dot : beta * p->y[o] + dot;
    }
}

/* ------------------------------------------------------- the products */

/* Panel columns (of W's in) are a multiple of PANEL_ALIGN, for the
 * kernels, and at least PANEL_MIN_COLS unless W has fewer. */
enum { PANEL_ALIGN = 16, PANEL_MIN_COLS = 256 };

void widen_product(const struct widen_product *p, float beta, float *panel)
{
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
    // again for every few columns; rows as many as the panel then holds
    size_t cols_per = WIDEN_PANEL_FLOATS / p->out;
    cols_per = cols_per < PANEL_MIN_COLS ? PANEL_MIN_COLS : cols_per;
    cols_per = cols_per / PANEL_ALIGN * PANEL_ALIGN;
    cols_per = p->in < cols_per ? p->in : cols_per;
    size_t rows_per = WIDEN_PANEL_FLOATS / cols_per;
    rows_per = p->out < rows_per ? p->out : rows_per;
    const size_t width = attn_dtype_size(p->dtype);
    for (size_t o0 = 0; o0 < p->out; o0 += rows_per) {
        const size_t nr = p->out - o0 < rows_per ? p->out - o0 : rows_per;
        for (size_t k0 = 0; k0 < p->in; k0 += cols_per) {
            const size_t nc = p->in - k0 < cols_per ? p->in - k0 : cols_per;
            const char *w = (const char *)p->w + (o0 * p->ldw + k0) * width;
            for (size_t r = 0; r < nr; r++)
                attn_widen(w + r * p->ldw * width, p->dtype, nc,
                           panel + r * nc);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->rows,
                        (int)nr, (int)nc, 1.0f, p->x + k0, (int)p->ldx, panel,
                        (int)nc, k0 ? 1.0f : beta, p->y + o0, (int)p->ldy);
        }
    }
}
