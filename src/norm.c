/*
 * norm.c - normalisation of rows (norm.h).
 *
 * One body for each norm, compiled for each build (plain, AVX2, AVX-512)
 * from the same C: the sums' order is the lanes' (norm.h), and every
 * value's own arithmetic is the same IEEE operations in every build, so
 * the builds differ in speed only.
 */
#include "norm.h"

#include <math.h>
#include <string.h>

typedef double v8d __attribute__((vector_size(64)));

/* out[i] = (float)((x[i] - centre) * scale) for i < 16, each value's
 * own double arithmetic, rounded once. (Vectors go by pointer: a
 * function of the plain build may not return them.) */
ALWAYS_INLINE void scaled16(const float *x, double centre, double scale,
                            v16f *out)
{
    v8f a, b;
    memcpy(&a, x, sizeof a);
    memcpy(&b, x + 8, sizeof b);
    const v8d lo = (__builtin_convertvector(a, v8d) - centre) * scale,
              hi = (__builtin_convertvector(b, v8d) - centre) * scale;
    a = __builtin_convertvector(lo, v8f);
    b = __builtin_convertvector(hi, v8f);
    *out = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                   12, 13, 14, 15);
}

/* The partial sums added as a tree: lane l and l + 8, then l + 4, l + 2
 * and l + 1. */
ALWAYS_INLINE double lanes_total(double s[NORM_LANES])
{
#pragma GCC unroll 4
    for (int w = NORM_LANES / 2; w > 0; w /= 2)
#pragma GCC unroll 8
        for (int l = 0; l < w; l++)
            s[l] += s[l + w];
    return s[0];
}

/* The sum of x[c] - centre, squared when squares, over c < n. */
ALWAYS_INLINE double row_sum(const float *x, size_t n, double centre,
                             bool squares)
{
    double s[NORM_LANES] = {0};
    size_t c = 0;
    for (; c + NORM_LANES <= n; c += NORM_LANES)
#pragma GCC unroll 16
        for (int l = 0; l < NORM_LANES; l++) {
            const double d = (double)x[c + (size_t)l] - centre;
            s[l] += squares ? d * d : d;
        }
    for (int l = 0; c < n; c++, l++) {
        const double d = (double)x[c] - centre;
        s[l] += squares ? d * d : d;
    }
    return lanes_total(s);
}

ALWAYS_INLINE void rms_body(const float *x, size_t rows, size_t cols,
                            const float *w, float eps, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        const double sq = row_sum(xr, cols, 0.0, true);
        const double rstd = 1.0 / sqrt(sq / (double)cols + (double)eps);
        size_t c = 0;
        for (; c + 16 <= cols; c += 16) {
            v16f wv, v;
            memcpy(&wv, w + c, sizeof wv);
            scaled16(xr + c, 0.0, rstd, &v);
            v = wv * v;
            memcpy(yr + c, &v, sizeof v);
        }
        for (; c < cols; c++)
            yr[c] = w[c] * (float)(xr[c] * rstd);
    }
}

ALWAYS_INLINE void layer_body(const float *x, size_t rows, size_t cols,
                              const float *w, const float *b, float eps,
                              float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        const double mean = row_sum(xr, cols, 0.0, false) / (double)cols;
        const double sq = row_sum(xr, cols, mean, true);
        const double rstd = 1.0 / sqrt(sq / (double)cols + (double)eps);
        size_t c = 0;
        for (; c + 16 <= cols; c += 16) {
            v16f wv, bv, v;
            memcpy(&wv, w + c, sizeof wv);
            memcpy(&bv, b + c, sizeof bv);
            scaled16(xr + c, mean, rstd, &v);
            v = v * wv + bv;
            memcpy(yr + c, &v, sizeof v);
        }
        for (; c < cols; c++)
            yr[c] = (float)((xr[c] - mean) * rstd) * w[c] + b[c];
    }
}

#define BUILD(isa_attr, isa)                                                   \
    isa_attr static void rms_##isa(const float *x, size_t rows, size_t cols,   \
                                   const float *w, float eps, float *y)        \
    {                                                                          \
        rms_body(x, rows, cols, w, eps, y);                                    \
    }                                                                          \
    isa_attr static void layer_##isa(const float *x, size_t rows, size_t cols, \
                                     const float *w, const float *b,           \
                                     float eps, float *y)                      \
    {                                                                          \
        layer_body(x, rows, cols, w, b, eps, y);                               \
    }
#define PLAIN_ATTR
BUILD(PLAIN_ATTR, plain)
#if HAVE_AVX2_BUILD
BUILD(AVX2_TARGET, avx2)
BUILD(AVX512_TARGET, avx512)
#endif
#undef BUILD

void norm_rms_isa(enum vec_isa isa, const float *x, size_t rows, size_t cols,
                  const float *w, float eps, float *y)
{
#if HAVE_AVX2_BUILD
    if (isa == VEC_ISA_AVX512) {
        rms_avx512(x, rows, cols, w, eps, y);
        return;
    }
    if (isa == VEC_ISA_AVX2) {
        rms_avx2(x, rows, cols, w, eps, y);
        return;
    }
#endif
    (void)isa;
    rms_plain(x, rows, cols, w, eps, y);
}

void norm_layer_isa(enum vec_isa isa, const float *x, size_t rows, size_t cols,
                    const float *w, const float *b, float eps, float *y)
{
#if HAVE_AVX2_BUILD
    if (isa == VEC_ISA_AVX512) {
        layer_avx512(x, rows, cols, w, b, eps, y);
        return;
    }
    if (isa == VEC_ISA_AVX2) {
        layer_avx2(x, rows, cols, w, b, eps, y);
        return;
    }
#endif
    (void)isa;
    layer_plain(x, rows, cols, w, b, eps, y);
}

void norm_rms(const float *x, size_t rows, size_t cols, const float *w,
              float eps, float *y)
{
    norm_rms_isa(vec_isa_best(), x, rows, cols, w, eps, y);
}

void norm_layer(const float *x, size_t rows, size_t cols, const float *w,
                const float *b, float eps, float *y)
{
    norm_layer_isa(vec_isa_best(), x, rows, cols, w, b, eps, y);
}
