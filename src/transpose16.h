/*
 * transpose16.h - a 16 x 16 block of 32-bit values transposed in
 * AVX-512 registers, for the kernels that pack rows of x column by
 * column (stream_product.c, bf16_dots.c) or read W's rows across
 * (stream_product.c's few rows). Internal to the core.
 */
#ifndef ATTN_TRANSPOSE16_H
#define ATTN_TRANSPOSE16_H

#include "vecmath.h"

#if HAVE_AVX2_BUILD
#include <immintrin.h>

/* a[i][q] becomes a[q][i], in four rounds of shuffles. */
AVX512_TARGET ALWAYS_INLINE void transpose16(__m512 a[16])
{
    __m512 b[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        a[i] = _mm512_shuffle_ps(b[i], b[i + 2], 0x44);
        a[i + 1] = _mm512_shuffle_ps(b[i], b[i + 2], 0xEE);
        a[i + 2] = _mm512_shuffle_ps(b[i + 1], b[i + 3], 0x44);
        a[i + 3] = _mm512_shuffle_ps(b[i + 1], b[i + 3], 0xEE);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 16; i += 8)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            b[i + j] = _mm512_shuffle_f32x4(a[i + j], a[i + j + 4], 0x88);
            b[i + j + 4] = _mm512_shuffle_f32x4(a[i + j], a[i + j + 4], 0xDD);
        }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        a[j] = _mm512_shuffle_f32x4(b[j], b[j + 8], 0x88);
        a[j + 8] = _mm512_shuffle_f32x4(b[j], b[j + 8], 0xDD);
    }
}
#endif

#endif
