/*
 * widen.c - 16-bit weights: their exact float32 values (attention.h), and
 * products through them a panel at a time (widen.h).
 */
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
    if (dtype == ATTN_BF16) {
        // a bfloat16 is a float's upper half; eight at a time through a
        // block of bits, which the compiler turns into vector shifts
        size_t i = 0;
        for (; i + 8 <= count; i += 8) {
            uint32_t bits[8];
            for (size_t k = 0; k < 8; k++)
                bits[k] = (uint32_t)h[i + k] << 16;
            memcpy(&dst[i], bits, sizeof bits);
        }
        for (; i < count; i++) {
            const uint32_t bits = (uint32_t)h[i] << 16;
            memcpy(&dst[i], &bits, sizeof bits);
        }
        return;
    }
    for (size_t i = 0; i < count; i++)
        dst[i] = half_to_float(h[i]);
}

/* Panel columns (of W's in) are a multiple of this, for the kernels. */
enum { PANEL_ALIGN = 16 };

void widen_product(const struct widen_product *p, float beta, float *panel)
{
    if (p->dtype == ATTN_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->rows,
                    (int)p->out, (int)p->in, 1.0f, p->x, (int)p->ldx, p->w,
                    (int)p->ldw, beta, p->y, (int)p->ldy);
        return;
    }
    // blocks of W's rows (y's columns) as many as a panel holds at
    // PANEL_ALIGN of W's columns; columns as many as the panel then holds
    size_t rows_per = WIDEN_PANEL_FLOATS / PANEL_ALIGN;
    rows_per = p->out < rows_per ? p->out : rows_per;
    size_t cols_per = WIDEN_PANEL_FLOATS / rows_per;
    cols_per = cols_per / PANEL_ALIGN * PANEL_ALIGN;
    cols_per = p->in < cols_per ? p->in : cols_per;
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
