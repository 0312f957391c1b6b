/*
 * quant_dot_avx2.c - the AVX2 build of the quantized kernels
 * (quant_product.h): one row's dot products, in quant_dot.c's order of
 * sums, and the decoding of blocks into a panel.
 */
#include "quant_product.h"

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))
#define INLINE TARGET ALWAYS_INLINE

/* The four sums of sixteen lanes (each two vectors: lanes 0-7, 8-15),
 * then the lanes, in quant_dot.c's order. */
INLINE float reduce(__m256 acc[QUANT_SUMS][2])
{
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0][0], acc[1][0]),
                                    _mm256_add_ps(acc[2][0], acc[3][0]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[0][1], acc[1][1]),
                                    _mm256_add_ps(acc[2][1], acc[3][1]));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 =
        _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* Any type: widened by quant_widen() a few blocks at a time, then summed
 * in order. */
TARGET static void widened_dots(quant_type type, const float *x,
                                const unsigned char *w, size_t row_bytes,
                                size_t in, size_t n, float *dots)
{
    enum { PIECE = 256 };
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    float piece[PIECE] __attribute__((aligned(32)));
    for (size_t j = 0; j < n; j++) {
        const unsigned char *row = w + j * row_bytes;
        __m256 acc[QUANT_SUMS][2];
        for (int s = 0; s < QUANT_SUMS; s++)
            acc[s][0] = acc[s][1] = _mm256_setzero_ps();
        for (size_t k0 = 0; k0 < in; k0 += PIECE) {
            const size_t len = in - k0 < PIECE ? in - k0 : PIECE;
            quant_widen(row + k0 / values * bytes, type, len, piece);
            for (size_t v = 0; v < len / 16; v++)
                for (int h = 0; h < 2; h++)
                    acc[v % QUANT_SUMS][h] = _mm256_fmadd_ps(
                        _mm256_loadu_ps(x + k0 + 16 * v + 8 * h),
                        _mm256_load_ps(piece + 16 * v + 8 * h),
                        acc[v % QUANT_SUMS][h]);
        }
        dots[j] = reduce(acc);
    }
}

TARGET void quant_dots_avx2(quant_type type, const float *x, const void *w,
                            size_t row_bytes, size_t in, size_t n, float *dots)
{
    widened_dots(type, x, w, row_bytes, in, n, dots);
}

TARGET void quant_decode_avx2(quant_type type, const void *src, size_t count,
                              float *dst)
{
    quant_widen(src, type, count, dst);
}
#endif
