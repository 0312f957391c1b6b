/*
 * quant_dot_avx2.c - the AVX2 build of the quantized kernels
 * (quant_product.h): rows' dot products, each in quant_dot.c's order of
 * sums, and the decoding of blocks into a panel.
 *
 * As quant_dot_avx512.c's, a piece of 64 values at a time, each vector
 * of sixteen as two of eight; a row of W at a time, as the sums take
 * half of the sixteen registers. Quants are converted and scaled (AVX2
 * has no look-up across a vector of sixteen), to quant_widen()'s values.
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

/* 16 floats as two vectors: lanes 0-7 and 8-15. */
typedef struct {
    __m256 lo, hi;
} v16;

INLINE float half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* Eight bytes at p, zero- or sign-extended to eight lanes. */
INLINE __m256i bytes_u32(const unsigned char *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

INLINE __m256i bytes_i32(const unsigned char *p)
{
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* See quant_dot_avx512.c: the scales stay in memory, each broadcast from
 * there. */
#define FROM_MEMORY() __asm__ volatile("" ::: "memory")

/* ------------------------------------------------------------- Q8_0 */

/* Two Q8_0 blocks (64 values) are one piece. y = q d, as ggml. */
struct q8_0_state {
    char unused;
};

INLINE void q8_0_prep(const unsigned char *b, struct q8_0_state *st)
{
    (void)b, (void)st;
}

INLINE void q8_0_block(const unsigned char *b, v16 w[2])
{
    const __m256 d = _mm256_set1_ps(half_at(b));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        w[h].lo =
            _mm256_mul_ps(_mm256_cvtepi32_ps(bytes_i32(b + 2 + 16 * h)), d);
        w[h].hi =
            _mm256_mul_ps(_mm256_cvtepi32_ps(bytes_i32(b + 10 + 16 * h)), d);
    }
}

INLINE void q8_0_piece(const unsigned char *b, const struct q8_0_state *st,
                       int p, v16 w[4])
{
    (void)st, (void)p;
    q8_0_block(b, w);
    q8_0_block(b + 34, w + 2);
}

INLINE int q8_0_vec(int p, int t)
{
    (void)p;
    return t;
}

/* ------------------------------------------------------ Q4_K, Q5_K */

/* s[j] = d sc_j, s[8 + j] = -(dmin m_j), as in quant_dot_avx512.c. */
struct k4_state {
    float s[16];
};

INLINE void k4_prep(const unsigned char *b, struct k4_state *st)
{
    uint32_t u[3];
    memcpy(u, b + 4, sizeof u);
    const uint32_t sc_lo = u[0] & 0x3f3f3f3fu, m_lo = u[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (u[0] >> 6 & 0x03030303u)
                                                      << 4;
    const uint32_t m_hi = (u[2] >> 4 & 0x0f0f0f0fu) | (u[1] >> 6 & 0x03030303u)
                                                          << 4;
    const __m128i sc = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0);
    const __m128i m = _mm_setr_epi32((int)m_lo, (int)m_hi, 0, 0);
    _mm256_storeu_ps(st->s,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)),
                                   _mm256_set1_ps(half_at(b))));
    _mm256_storeu_ps(st->s + 8,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)),
                                   _mm256_set1_ps(-half_at(b + 2))));
    FROM_MEMORY();
}

/* s q + nm, fused: as in quant_dot_avx512.c, s q is exact, so the one
 * rounding is ggml's. */
INLINE __m256 scaled(__m256 s, __m256i q, __m256 nm)
{
    return _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(q), nm);
}

/* Piece c of a Q4_K block: values 64 c .. 64 c + 31 the low nibbles of
 * qs[32 c ..], the next 32 their high nibbles. */
INLINE void q4_k_piece(const unsigned char *b, const struct k4_state *st, int c,
                       v16 w[4])
{
    const __m256 s0 = _mm256_set1_ps(st->s[2 * c]);
    const __m256 n0 = _mm256_set1_ps(st->s[8 + 2 * c]);
    const __m256 s1 = _mm256_set1_ps(st->s[2 * c + 1]);
    const __m256 n1 = _mm256_set1_ps(st->s[9 + 2 * c]);
    const __m256i m15 = _mm256_set1_epi32(15);
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++) { /* eight bytes: lanes 8 (e % 2) of 16 */
        const __m256i q = bytes_u32(b + 16 + 32 * c + 8 * e);
        const __m256 lo = scaled(s0, _mm256_and_si256(q, m15), n0);
        const __m256 hi = scaled(s1, _mm256_srli_epi32(q, 4), n1);
        if (e % 2) {
            w[e / 2].hi = lo;
            w[2 + e / 2].hi = hi;
        } else {
            w[e / 2].lo = lo;
            w[2 + e / 2].lo = hi;
        }
    }
}

INLINE int k4_vec(int c, int t)
{
    return 4 * c + t;
}

/* Bit `bit` of each lane of h at bit 4, alone. */
INLINE __m256i bit_at_4(__m256i h, int bit)
{
    const __m256i moved = bit <= 4
                              ? _mm256_sll_epi32(h, _mm_cvtsi32_si128(4 - bit))
                              : _mm256_srl_epi32(h, _mm_cvtsi32_si128(bit - 4));
    return _mm256_and_si256(moved, _mm256_set1_epi32(16));
}

/* Piece c of a Q5_K block: Q4_K's with the fifth bit of each quant, bit
 * 2 c of qh[l] for value 64 c + l, bit 2 c + 1 for 64 c + 32 + l. */
INLINE void q5_k_piece(const unsigned char *b, const struct k4_state *st, int c,
                       v16 w[4])
{
    const __m256 s0 = _mm256_set1_ps(st->s[2 * c]);
    const __m256 n0 = _mm256_set1_ps(st->s[8 + 2 * c]);
    const __m256 s1 = _mm256_set1_ps(st->s[2 * c + 1]);
    const __m256 n1 = _mm256_set1_ps(st->s[9 + 2 * c]);
    const __m256i m15 = _mm256_set1_epi32(15);
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++) {
        const __m256i qh = bytes_u32(b + 16 + 8 * e);
        const __m256i q = bytes_u32(b + 48 + 32 * c + 8 * e);
        const __m256i q0 =
            _mm256_or_si256(_mm256_and_si256(q, m15), bit_at_4(qh, 2 * c));
        const __m256i q1 =
            _mm256_or_si256(_mm256_srli_epi32(q, 4), bit_at_4(qh, 2 * c + 1));
        const __m256 lo = scaled(s0, q0, n0), hi = scaled(s1, q1, n1);
        if (e % 2) {
            w[e / 2].hi = lo;
            w[2 + e / 2].hi = hi;
        } else {
            w[e / 2].lo = lo;
            w[2 + e / 2].lo = hi;
        }
    }
}

/* ------------------------------------------------------------- Q6_K */

/* ds[v] = d sc[v], as ggml's d * sc. */
struct q6_k_state {
    float ds[16];
};

INLINE void q6_k_prep(const unsigned char *b, struct q6_k_state *st)
{
    const __m256 d = _mm256_set1_ps(half_at(b + 208));
    _mm256_storeu_ps(st->ds,
                     _mm256_mul_ps(d, _mm256_cvtepi32_ps(bytes_i32(b + 192))));
    _mm256_storeu_ps(st->ds + 8,
                     _mm256_mul_ps(d, _mm256_cvtepi32_ps(bytes_i32(b + 200))));
    FROM_MEMORY();
}

/* Piece p = 2 n + g of a Q6_K block, as in quant_dot_avx512.c: value
 * 32 t + l of half n, l = 16 g .. 16 g + 15. y = (d sc) (q - 32). */
INLINE void q6_k_piece(const unsigned char *b, const struct q6_k_state *st,
                       int p, v16 w[4])
{
    const int n = p / 2, g = p % 2;
    const unsigned char *ql = b + 64 * n + 16 * g;
    const unsigned char *qh = b + 128 + 32 * n + 16 * g;
    const __m256i m15 = _mm256_set1_epi32(15), m48 = _mm256_set1_epi32(48);
    const __m256i m32 = _mm256_set1_epi32(32);
#pragma GCC unroll 2
    for (int e = 0; e < 2; e++) {
        const __m256i l0 = bytes_u32(ql + 8 * e),
                      l1 = bytes_u32(ql + 32 + 8 * e);
        const __m256i h = bytes_u32(qh + 8 * e);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m15),
                               _mm256_and_si256(_mm256_slli_epi32(h, 4), m48));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
                               _mm256_and_si256(_mm256_slli_epi32(h, 2), m48));
        q[2] =
            _mm256_or_si256(_mm256_srli_epi32(l0, 4), _mm256_and_si256(h, m48));
        q[3] = _mm256_or_si256(_mm256_srli_epi32(l1, 4),
                               _mm256_and_si256(_mm256_srli_epi32(h, 2), m48));
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const __m256 v =
                _mm256_mul_ps(_mm256_set1_ps(st->ds[8 * n + 2 * t + g]),
                              _mm256_cvtepi32_ps(_mm256_sub_epi32(q[t], m32)));
            if (e)
                w[t].hi = v;
            else
                w[t].lo = v;
        }
    }
}

INLINE int q6_k_vec(int p, int t)
{
    return 8 * (p / 2) + 2 * t + p % 2;
}

/* ---------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

/* Two blocks of 32 are one piece, as for Q8_0. Value j < 16 of a block
 * is the low nibble of qs[j], 16 + j its high nibble, with (Q5_*) bit j
 * of qh above; Q4_0 (q - 8) d and Q5_0 (q - 16) d as ggml, Q4_1 and
 * Q5_1 q d + m fused (q d is exact, as in quant_dot_avx512.c). */
INLINE int pair_vec(int p, int t)
{
    (void)p;
    return t;
}

struct pair_state {
    char unused;
};

INLINE void pair_prep(const unsigned char *b, struct pair_state *st)
{
    (void)b, (void)st;
}

/* One block's two vectors: bits 5 (0 or 5) bits to a quant, m_off the
 * min's place (< 0: none, the quant offset by 8 or 16 instead). */
INLINE void small_block(const unsigned char *b, int bits, int m_off, v16 w[2])
{
    const __m256 d = _mm256_set1_ps(half_at(b));
    const __m256 m = _mm256_set1_ps(m_off < 0 ? 0.0f : half_at(b + m_off));
    const unsigned char *qs = b + (m_off < 0 ? 2 : 4) + (bits == 5 ? 4 : 0);
    uint32_t qh = 0;
    if (bits == 5)
        memcpy(&qh, b + (m_off < 0 ? 2 : 4), sizeof qh);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m15 = _mm256_set1_epi32(15), m16 = _mm256_set1_epi32(16);
    const __m256i offset = _mm256_set1_epi32(bits == 5 ? 16 : 8);
#pragma GCC unroll 2
    for (int e = 0; e < 2; e++) { /* lanes 0-7, 8-15 of both vectors */
        const __m256i q = bytes_u32(qs + 8 * e);
        __m256i lo = _mm256_and_si256(q, m15), hi = _mm256_srli_epi32(q, 4);
        if (bits == 5) {
            const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * e));
            const __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32((int)qh), at);
            lo = _mm256_or_si256(
                lo, _mm256_and_si256(_mm256_slli_epi32(h, 4), m16));
            hi = _mm256_or_si256(
                hi, _mm256_and_si256(_mm256_srli_epi32(h, 12), m16));
        }
        __m256 v[2];
        if (m_off < 0) {
            v[0] = _mm256_mul_ps(
                _mm256_cvtepi32_ps(_mm256_sub_epi32(lo, offset)), d);
            v[1] = _mm256_mul_ps(
                _mm256_cvtepi32_ps(_mm256_sub_epi32(hi, offset)), d);
        } else {
            v[0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lo), m);
            v[1] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(hi), m);
        }
        for (int h = 0; h < 2; h++) {
            if (e)
                w[h].hi = v[h];
            else
                w[h].lo = v[h];
        }
    }
}

#define PAIR_PIECE(name, bits, bytes, m_off)                                   \
    INLINE void name##_piece(const unsigned char *b,                           \
                             const struct pair_state *st, int p, v16 w[4])     \
    {                                                                          \
        (void)st, (void)p;                                                     \
        small_block(b, bits, m_off, w);                                        \
        small_block(b + (bytes), bits, m_off, w + 2);                          \
    }
PAIR_PIECE(q4_0, 4, 18, -1)
PAIR_PIECE(q4_1, 4, 20, 2)
PAIR_PIECE(q5_0, 5, 22, -1)
PAIR_PIECE(q5_1, 5, 24, 2)
#undef PAIR_PIECE

/* ---------------------------------------------------------- kernels */

/* While a row is read, the same block of the next row is fetched into
 * the second-level cache: a row's length ahead, whatever it is (see
 * quant_dot_avx512.c). */
#define PREFETCH(b, row_bytes, at)                                             \
    _mm_prefetch((const char *)((uintptr_t)(b) + (row_bytes) + (at)),          \
                 _MM_HINT_T1)

/* As quant_dot_avx512.c's, a row at a time (the sums take half of the
 * sixteen registers). */
#define KERNELS(name, state, prep, vec, values, bytes, pieces)                 \
    TARGET static void name##_dots(const float *x0, const unsigned char *w,    \
                                   size_t row_bytes, size_t blocks, size_t n,  \
                                   float *dots)                                \
    {                                                                          \
        for (size_t j = 0; j < n; j++) {                                       \
            const unsigned char *b = w + j * row_bytes;                        \
            const float *x = x0;                                               \
            __m256 acc[QUANT_SUMS][2];                                         \
            for (int s = 0; s < QUANT_SUMS; s++)                               \
                acc[s][0] = acc[s][1] = _mm256_setzero_ps();                   \
            for (size_t i = 0; i < blocks; i++, b += (bytes), x += (values)) { \
                struct state st;                                               \
                for (int at = 0; at < (bytes); at += 64)                       \
                    PREFETCH(b, row_bytes, at);                                \
                prep(b, &st);                                                  \
                _Pragma("GCC unroll 4") for (int p = 0; p < (pieces); p++)     \
                {                                                              \
                    v16 wv[4];                                                 \
                    name##_piece(b, &st, p, wv);                               \
                    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)        \
                    {                                                          \
                        const int v = vec(p, t), s = v % QUANT_SUMS;           \
                        acc[s][0] = _mm256_fmadd_ps(                           \
                            _mm256_loadu_ps(x + 16 * v), wv[t].lo, acc[s][0]); \
                        acc[s][1] =                                            \
                            _mm256_fmadd_ps(_mm256_loadu_ps(x + 16 * v + 8),   \
                                            wv[t].hi, acc[s][1]);              \
                    }                                                          \
                }                                                              \
            }                                                                  \
            dots[j] = reduce(acc);                                             \
        }                                                                      \
    }                                                                          \
    TARGET static void name##_decode(const unsigned char *b, size_t blocks,    \
                                     float *dst)                               \
    {                                                                          \
        for (size_t i = 0; i < blocks; i++, b += (bytes), dst += (values)) {   \
            struct state st;                                                   \
            prep(b, &st);                                                      \
            _Pragma("GCC unroll 4") for (int p = 0; p < (pieces); p++)         \
            {                                                                  \
                v16 wv[4];                                                     \
                name##_piece(b, &st, p, wv);                                   \
                _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)            \
                {                                                              \
                    _mm256_storeu_ps(dst + 16 * vec(p, t), wv[t].lo);          \
                    _mm256_storeu_ps(dst + 16 * vec(p, t) + 8, wv[t].hi);      \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }

KERNELS(q8_0, q8_0_state, q8_0_prep, q8_0_vec, 64, 68, 1)
KERNELS(q4_k, k4_state, k4_prep, k4_vec, 256, 144, 4)
KERNELS(q5_k, k4_state, k4_prep, k4_vec, 256, 176, 4)
KERNELS(q6_k, q6_k_state, q6_k_prep, q6_k_vec, 256, 210, 4)
KERNELS(q4_0, pair_state, pair_prep, pair_vec, 64, 36, 1)
KERNELS(q4_1, pair_state, pair_prep, pair_vec, 64, 40, 1)
KERNELS(q5_0, pair_state, pair_prep, pair_vec, 64, 44, 1)
KERNELS(q5_1, pair_state, pair_prep, pair_vec, 64, 48, 1)
#undef KERNELS

/* Rows of an odd number of 32-value blocks (which the kernels take in
 * pairs): decoded a few blocks at a time into memory, then summed in
 * order. */
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
            quant_decode_avx2(type, row + k0 / values * bytes, len, piece);
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
    const size_t blocks = in / quant_block_values((int)type);
    if (quant_block_values((int)type) == 32 && blocks % 2) {
        widened_dots(type, x, w, row_bytes, in, n, dots); /* no pairs */
        return;
    }
    switch (type) {
    case QUANT_Q8_0: q8_0_dots(x, w, row_bytes, blocks / 2, n, dots); return;
    case QUANT_Q4_0: q4_0_dots(x, w, row_bytes, blocks / 2, n, dots); return;
    case QUANT_Q4_1: q4_1_dots(x, w, row_bytes, blocks / 2, n, dots); return;
    case QUANT_Q5_0: q5_0_dots(x, w, row_bytes, blocks / 2, n, dots); return;
    case QUANT_Q5_1: q5_1_dots(x, w, row_bytes, blocks / 2, n, dots); return;
    case QUANT_Q4_K: q4_k_dots(x, w, row_bytes, blocks, n, dots); return;
    case QUANT_Q5_K: q5_k_dots(x, w, row_bytes, blocks, n, dots); return;
    case QUANT_Q6_K: q6_k_dots(x, w, row_bytes, blocks, n, dots); return;
    }
    widened_dots(type, x, w, row_bytes, in, n, dots);
}

/* Rows of x through each row of W, a piece of QUANT_ROW_PIECE values
 * decoded once into memory and summed into every row's sums in turn, in
 * the one-row order (the piece starts at a multiple of 64, so its vector
 * v goes into sum v % 4 as value k's into (k / 16) % 4), each vector of
 * sixteen two of eight. The sums of a pair of rows would take all
 * sixteen registers, so they stay in memory between pieces, and the
 * piece is loaded again for every row: from four rows on that costs less
 * than decoding each row's blocks again (Q4_K, 2048 x 2048, a core:
 * eight rows 1.18-1.21x, two 0.86x), so fewer rows go one at a time. */
TARGET void quant_rows_dots_avx2(quant_type type, const float *x, size_t ldx,
                                 size_t xrows, const void *w, size_t row_bytes,
                                 size_t in, size_t n, float *dots,
                                 size_t lddots)
{
    if (xrows < 4) {
        for (size_t r = 0; r < xrows; r++)
            quant_dots_avx2(type, x + r * ldx, w, row_bytes, in, n,
                            dots + r * lddots);
        return;
    }
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    float piece[QUANT_ROW_PIECE] __attribute__((aligned(32)));
    __m256 acc[QUANT_BY_ROWS][QUANT_SUMS][2];
    for (size_t j = 0; j < n; j++) {
        const unsigned char *row = (const unsigned char *)w + j * row_bytes;
        for (size_t r = 0; r < xrows; r++)
            for (int s = 0; s < QUANT_SUMS; s++)
                acc[r][s][0] = acc[r][s][1] = _mm256_setzero_ps();
        for (size_t k0 = 0; k0 < in; k0 += QUANT_ROW_PIECE) {
            const size_t len =
                in - k0 < QUANT_ROW_PIECE ? in - k0 : QUANT_ROW_PIECE;
            const unsigned char *b = row + k0 / values * bytes;
            for (size_t at = 0; at < len / values * bytes; at += 64)
                PREFETCH(b, row_bytes, at);
            quant_decode_avx2(type, b, len, piece);
            for (size_t r = 0; r < xrows; r++) {
                const float *xr = x + r * ldx + k0;
                __m256 a[QUANT_SUMS][2];
                for (int s = 0; s < QUANT_SUMS; s++)
                    a[s][0] = acc[r][s][0], a[s][1] = acc[r][s][1];
                size_t v = 0;
                for (; v + QUANT_SUMS <= len / 16; v += QUANT_SUMS)
#pragma GCC unroll 4
                    for (int s = 0; s < QUANT_SUMS; s++)
#pragma GCC unroll 2
                        for (int h = 0; h < 2; h++)
                            a[s][h] = _mm256_fmadd_ps(
                                _mm256_loadu_ps(xr + 16 * (v + s) + 8 * h),
                                _mm256_load_ps(piece + 16 * (v + s) + 8 * h),
                                a[s][h]);
                for (; v < len / 16; v++) /* a piece of 32 values: two */
                    for (int h = 0; h < 2; h++)
                        a[v % QUANT_SUMS][h] = _mm256_fmadd_ps(
                            _mm256_loadu_ps(xr + 16 * v + 8 * h),
                            _mm256_load_ps(piece + 16 * v + 8 * h),
                            a[v % QUANT_SUMS][h]);
                for (int s = 0; s < QUANT_SUMS; s++)
                    acc[r][s][0] = a[s][0], acc[r][s][1] = a[s][1];
            }
        }
        for (size_t r = 0; r < xrows; r++)
            dots[r * lddots + j] = reduce(acc[r]);
    }
}

TARGET void quant_decode_avx2(quant_type type, const void *src, size_t count,
                              float *dst)
{
    const unsigned char *b = src;
    const size_t blocks = count / quant_block_values((int)type);
    const size_t pairs = blocks / 2, bytes = quant_block_bytes((int)type);
    switch (type) {
    case QUANT_Q8_0: q8_0_decode(b, pairs, dst); break;
    case QUANT_Q4_0: q4_0_decode(b, pairs, dst); break;
    case QUANT_Q4_1: q4_1_decode(b, pairs, dst); break;
    case QUANT_Q5_0: q5_0_decode(b, pairs, dst); break;
    case QUANT_Q5_1: q5_1_decode(b, pairs, dst); break;
    case QUANT_Q4_K: q4_k_decode(b, blocks, dst); return;
    case QUANT_Q5_K: q5_k_decode(b, blocks, dst); return;
    case QUANT_Q6_K: q6_k_decode(b, blocks, dst); return;
    default: quant_widen(src, type, count, dst); return;
    }
    if (blocks % 2 == 0)
        return;
    /* the last block of an odd number */
    const unsigned char *last = b + 2 * pairs * bytes;
    v16 v[2];
    switch (type) {
    case QUANT_Q4_0: small_block(last, 4, -1, v); break;
    case QUANT_Q4_1: small_block(last, 4, 2, v); break;
    case QUANT_Q5_0: small_block(last, 5, -1, v); break;
    case QUANT_Q5_1: small_block(last, 5, 2, v); break;
    default: q8_0_block(last, v); break;
    }
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_ps(dst + 64 * pairs + 16 * h, v[h].lo);
        _mm256_storeu_ps(dst + 64 * pairs + 16 * h + 8, v[h].hi);
    }
}
#endif
