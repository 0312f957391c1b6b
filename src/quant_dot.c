/*
 * quant_dot.c - one row of x through block-quantized weights, a dot
 * product per output that decodes each block in registers, and the
 * decoding of blocks into a panel for the product of several rows
 * (quant_product.h).
 *
 * Every dot product sums in one order, whatever the build: value k of
 * the row into sum (k / 16) % 4, lane k % 16, one fused multiply-add a
 * term; then the four sums lane by lane ((s0 + s1) + (s2 + s3)) and the
 * sixteen lanes halving (lane l plus lane l + 8, then l + 4, l + 2,
 * l + 1). An AVX2 vector of sixteen is two of eight, lanes 0-7 and 8-15.
 * The weights' values are quant_widen()'s (quant.h): each fast decoder
 * below does the float32 operations of ggml's reference, or ones whose
 * result is the same number (said where it is so).
 */
#include "quant_product.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
/* The fp16 scales are widened by F16C, which every CPU with AVX2 and FMA
 * has; exactly, as every fp16 is a float. */
#define DOT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DOT_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#endif

enum { SUMS = 4, LANES = 16, PIECE = 256 };

static float reduce_plain(float acc[SUMS][LANES])
{
    float s[LANES];
    for (int l = 0; l < LANES; l++)
        s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    for (int h = LANES / 2; h; h /= 2)
        for (int l = 0; l < h; l++)
            s[l] = s[l] + s[l + h];
    return s[0];
}

/* Any type, plain C: the row a PIECE of values at a time through
 * quant_widen(), then the terms in order. */
static float dot_plain(quant_type type, const float *x, const void *row,
                       size_t in)
{
    float acc[SUMS][LANES] = {{0}};
    float w[PIECE];
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    for (size_t k0 = 0; k0 < in; k0 += PIECE) {
        const size_t n = in - k0 < PIECE ? in - k0 : PIECE;
        quant_widen((const unsigned char *)row + k0 / values * bytes, type, n,
                    w);
        for (size_t k = 0; k < n; k++) // PIECE is a multiple of 64
            acc[k / LANES % SUMS][k % LANES] =
                fmaf(x[k0 + k], w[k], acc[k / LANES % SUMS][k % LANES]);
    }
    return reduce_plain(acc);
}

static void decode_plain(quant_type type, const void *src, size_t count,
                         float *dst)
{
    quant_widen(src, type, count, dst);
}

#if HAVE_AVX2_BUILD
/* ------------------------------------------------------------ AVX2 */

DOT_AVX2 ALWAYS_INLINE float half_avx2(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

DOT_AVX2 ALWAYS_INLINE float reduce_avx2(__m256 acc[SUMS][2])
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

/* Term vector v (values 16 v .. 16 v + 15) of x times w0 (the first
 * eight) and w1 (the next eight). */
#define TERM_AVX2(acc, x, v, w0, w1)                                           \
    do {                                                                       \
        (acc)[(v) % SUMS][0] = _mm256_fmadd_ps(                                \
            _mm256_loadu_ps((x) + 16 * (v)), (w0), (acc)[(v) % SUMS][0]);      \
        (acc)[(v) % SUMS][1] = _mm256_fmadd_ps(                                \
            _mm256_loadu_ps((x) + 16 * (v) + 8), (w1), (acc)[(v) % SUMS][1]);  \
    } while (0)

DOT_AVX2 static float dot_avx2(quant_type type, const float *x, const void *row,
                               size_t in)
{
    __m256 acc[SUMS][2];
    for (int s = 0; s < SUMS; s++)
        acc[s][0] = acc[s][1] = _mm256_setzero_ps();
    float w[PIECE] __attribute__((aligned(32)));
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    for (size_t k0 = 0; k0 < in; k0 += PIECE) {
        const size_t n = in - k0 < PIECE ? in - k0 : PIECE;
        quant_widen((const unsigned char *)row + k0 / values * bytes, type, n,
                    w);
        for (size_t v = 0; v < n / 16; v++)
            TERM_AVX2(acc, x + k0, v, _mm256_load_ps(w + 16 * v),
                      _mm256_load_ps(w + 16 * v + 8));
    }
    return reduce_avx2(acc);
}

static void decode_avx2(quant_type type, const void *src, size_t count,
                        float *dst)
{
    quant_widen(src, type, count, dst);
}

/* --------------------------------------------------------- AVX-512 */

DOT_AVX512 ALWAYS_INLINE float reduce_avx512(const __m512 acc[SUMS])
{
    const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                   _mm512_add_ps(acc[2], acc[3]));
    const __m256 s8 = _mm256_add_ps(
        _mm512_castps512_ps256(s),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    const __m128 s4 =
        _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

#define TERM_AVX512(acc, x, v, w)                                              \
    ((acc)[(v) % SUMS] = _mm512_fmadd_ps(_mm512_loadu_ps((x) + 16 * (v)), (w), \
                                         (acc)[(v) % SUMS]))

DOT_AVX512 static float dot_avx512(quant_type type, const float *x,
                                   const void *row, size_t in)
{
    __m512 acc[SUMS];
    for (int s = 0; s < SUMS; s++)
        acc[s] = _mm512_setzero_ps();
    float w[PIECE] __attribute__((aligned(64)));
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    for (size_t k0 = 0; k0 < in; k0 += PIECE) {
        const size_t n = in - k0 < PIECE ? in - k0 : PIECE;
        quant_widen((const unsigned char *)row + k0 / values * bytes, type, n,
                    w);
        for (size_t v = 0; v < n / 16; v++)
            TERM_AVX512(acc, x + k0, v, _mm512_load_ps(w + 16 * v));
    }
    return reduce_avx512(acc);
}

static void decode_avx512(quant_type type, const void *src, size_t count,
                          float *dst)
{
    quant_widen(src, type, count, dst);
}
#endif

/* --------------------------------------------------------- dispatch */

void quant_dot_outputs(enum vec_isa isa, const struct quant_product *p,
                       float beta)
{
    const unsigned char *w = p->w;
    for (size_t o = 0; o < p->out; o++) {
        const float dot =
            VEC_DISPATCH(isa, dot, p->type, p->x, w + o * p->row_bytes, p->in);
        p->y[o] = beta == 0.0f ? dot : p->y[o] + dot;
    }
}

void quant_decode(enum vec_isa isa, quant_type type, const void *src,
                  size_t count, float *dst)
{
    VEC_DISPATCH(isa, decode, type, src, count, dst);
}
