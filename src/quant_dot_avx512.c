/*
 * quant_dot_avx512.c - the AVX-512 build of the quantized kernels
 * (quant_product.h): rows' dot products, each in quant_dot.c's order of
 * sums, and the decoding of blocks into a panel.
 *
 * Every type is decoded in registers, a piece of 64 values (four
 * vectors) at a time, and four rows of W go together, so that each
 * vector of x is loaded once for four rows and sixteen sums are in
 * flight. Each value is quant_widen()'s: the float32 operations of
 * ggml's reference, or ones whose one rounding gives the same number,
 * said where it is so. 4- and 5-bit quants are looked up in a table of
 * their block's (or sub-block's) 16 or 32 values, 6- and 8-bit ones
 * converted and scaled. The kernels are bound by the vector pipes (about
 * four operations a cycle), not by memory, for the K types: Q4_K and
 * Q6_K decode at about 28 GB/s a core from cache, Q8_0 at 45 (Zen 5).
 * Whatever a block needs beyond its quants (scales, Q6_K's quants put
 * together) is prepared a block ahead, in a few vector operations.
 */
#include "quant_product.h"

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The fp16 scales are widened by F16C, exactly (every fp16 is a float). */
#define TARGET __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define INLINE TARGET ALWAYS_INLINE

/* Rows of W a kernel call takes together. */
enum { TOGETHER = 4 };

/* While a group of rows is read, the same block of the group after it
 * is fetched into the second-level cache: the groups' rows are read side
 * by side, a pattern the hardware's prefetchers follow poorly, and this
 * is as far ahead as a row's length, whatever it is. Past the matrix it
 * fetches what it may: a prefetch never faults (the address is reckoned
 * as an integer, not a pointer past W). */
#define PREFETCH(b, j, row_bytes, at)                                          \
    _mm_prefetch((const char *)((uintptr_t)(b) +                               \
                                ((j) + TOGETHER) * (row_bytes) + (at)),        \
                 _MM_HINT_T1)

/* The scales a block's prep leaves in memory are each broadcast from
 * there into a product, a load like any other; left to itself the
 * compiler would keep them in a register and broadcast them with a
 * shuffle, of which the look-ups already take the most. */
#define FROM_MEMORY() __asm__ volatile("" ::: "memory")

INLINE float half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

INLINE __m512i bytes_u32(const unsigned char *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The four sums, then the sixteen lanes, in quant_dot.c's order. */
INLINE float reduce(const __m512 acc[QUANT_SUMS])
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

/* Bits 0-3 of a, the rest of b: (a & 15) | (b & ~15). */
#define NIBBLE_OVER(a, b)                                                      \
    _mm512_ternarylogic_epi32((a), (b), _mm512_set1_epi32(15), 0xe4)

/* ------------------------------------------------------------- Q8_0 */

/* Two Q8_0 blocks (64 values) are one piece. y = q d, as ggml. */
struct q8_0_state {
    char unused;
};

INLINE void q8_0_prep(const unsigned char *b, struct q8_0_state *st)
{
    (void)b, (void)st;
}

INLINE void q8_0_block(const unsigned char *b, __m512 w[2])
{
    const __m512 d = _mm512_set1_ps(half_at(b));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + 16 * h));
        w[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
    }
}

INLINE void q8_0_piece(const unsigned char *b, const struct q8_0_state *st,
                       int p, __m512 w[4])
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

/* A block's sub-block scales, s[j] = d sc_j, and negated mins,
 * s[8 + j] = -(dmin m_j), for j < 8, as ggml's d * sc and dmin * m. The
 * 6-bit fields come out of the 12 bytes four at a time: bytes 0-3 hold
 * scales 0-3 and bytes 4-7 mins 0-3 in their low six bits; bytes 8-11
 * the low nibbles of scales 4-7 and, above them, of mins 4-7, whose top
 * two bits are the top two of bytes 0-3 and 4-7. */
struct k4_state {
    float s[16];
};

INLINE void k4_prep(const unsigned char *b, struct k4_state *st)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)b);
    // bytes 0-3 and 8-11 the low six bits of scales 0-3 and mins 0-3;
    // bytes 4-7 the low nibbles of scales 4-7, 12-15 the high ones (mins
    // 4-7), shifted down; and the top two bits of bytes 0-3 (4-7) of the
    // 12 under 4-7 (12-15), as bits 4-5
    const __m128i a = _mm_srlv_epi32(
        _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10,
                                          11, 12, 13, 14, 15)),
        _mm_setr_epi32(0, 0, 0, 4));
    const __m128i top =
        _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1,
                                          -1, -1, 8, 9, 10, 11));
    const __m128i fields = _mm_ternarylogic_epi32(
        a, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f),
        _mm_and_si128(_mm_srli_epi32(top, 2), _mm_set1_epi8(0x30)), 0xea);
    // d for the scales, -dmin for the mins
    const __m512 dd = _mm512_castps128_ps512(_mm_cvtph_ps(v));
    const __m512 by = _mm512_castsi512_ps(_mm512_xor_si512(
        _mm512_castps_si512(_mm512_permutexvar_ps(
            _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
            dd)),
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, INT32_MIN, INT32_MIN,
                          INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                          INT32_MIN)));
    _mm512_storeu_ps(
        st->s,
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(fields)), by));
    FROM_MEMORY();
}

/* Sixteen values of a quant q (from + 0 .. 15) under scale s and negated
 * min nm: t[q] = s q + nm, fused. ggml rounds s q first and then
 * subtracts the min, but s q is exact (an 11-bit d times a 6-bit scale
 * times a 5-bit quant), so the one rounding is the same. */
INLINE __m512 table(float s, float nm, float from)
{
    const __m512 iota =
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_fmadd_ps(_mm512_set1_ps(s),
                           _mm512_add_ps(iota, _mm512_set1_ps(from)),
                           _mm512_set1_ps(nm));
}

/* Piece c of a Q4_K block: values 64 c .. 64 c + 31 are the low nibbles
 * of qs[32 c ..], the next 32 their high nibbles; each is looked up in
 * its sub-block's table (vpermps reads an index's low four bits, so a
 * low nibble needs no mask). */
INLINE void q4_k_piece(const unsigned char *b, const struct k4_state *st, int c,
                       __m512 w[4])
{
    const __m512 t0 = table(st->s[2 * c], st->s[8 + 2 * c], 0.0f);
    const __m512 t1 = table(st->s[2 * c + 1], st->s[9 + 2 * c], 0.0f);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i q = bytes_u32(b + 16 + 32 * c + 16 * h);
        w[h] = _mm512_permutexvar_ps(q, t0);
        w[2 + h] = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t1);
    }
}

INLINE int k4_vec(int c, int t)
{
    return 4 * c + t;
}

/* Bit `bit` of each lane of h moved to bit 4. */
INLINE __m512i bit_to_4(__m512i h, int bit)
{
    return bit <= 4 ? _mm512_sll_epi32(h, _mm_cvtsi32_si128(4 - bit))
                    : _mm512_srl_epi32(h, _mm_cvtsi32_si128(bit - 4));
}

/* Piece c of a Q5_K block: as Q4_K's, with each quant's fifth bit (bit
 * 2 c of qh[l] for value 64 c + l, bit 2 c + 1 for 64 c + 32 + l)
 * choosing between two tables of sixteen (vpermt2ps reads five bits). */
INLINE void q5_k_piece(const unsigned char *b, const struct k4_state *st, int c,
                       __m512 w[4])
{
    const float s0 = st->s[2 * c], m0 = st->s[8 + 2 * c];
    const float s1 = st->s[2 * c + 1], m1 = st->s[9 + 2 * c];
    const __m512 t0 = table(s0, m0, 0.0f), t0h = table(s0, m0, 16.0f);
    const __m512 t1 = table(s1, m1, 0.0f), t1h = table(s1, m1, 16.0f);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i qh = bytes_u32(b + 16 + 16 * h);
        const __m512i q = bytes_u32(b + 48 + 32 * c + 16 * h);
        const __m512i i0 = NIBBLE_OVER(q, bit_to_4(qh, 2 * c));
        const __m512i i1 =
            NIBBLE_OVER(_mm512_srli_epi32(q, 4), bit_to_4(qh, 2 * c + 1));
        w[h] = _mm512_permutex2var_ps(t0, i0, t0h);
        w[2 + h] = _mm512_permutex2var_ps(t1, i1, t1h);
    }
}

/* ------------------------------------------------------------- Q6_K */

/* A block's scales and quants: ds[v] = d sc[v] / 4, a quarter of the
 * scale of values 16 v .. 16 v + 15 (ggml's d * sc, exact, and a quarter
 * of it exact too: it is at least 2^-26), and q[k] = 4 (q - 32) for the
 * quant q (0 .. 63) of value k, a signed byte each: q - 32 is the six
 * bits of q with bit 5 flipped, read as a signed number, and in a byte's
 * top six bits it is four times that. They are put together 64 at a time
 * in the prep, so that a piece only widens them. */
struct q6_k_state {
    float ds[16];
    int8_t q[256];
};

/* In half n (128 values: ql[64 n ..], qh[32 n ..]) value 32 t + l
 * (l < 32) has the low nibble of ql[l] (t = 0), of ql[l + 32] (t = 1),
 * their high nibbles (t = 2, 3), and bits 2 t, 2 t + 1 of qh[l] above:
 * the 64 bytes of ql give values 0-63 from their low nibbles and 64-127
 * from their high ones, and qh, once in each half of a vector and the
 * upper half shifted down by two, gives their bits 4-5 from its bits
 * 0-1 and 4-5. Each goes to bits 2-7 of its byte. A 32-bit shift stands
 * for a byte's (the bits it brings in from the next byte are masked
 * off). */
INLINE void q6_k_prep(const unsigned char *b, struct q6_k_state *st)
{
    const __m512i sc =
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)));
    _mm512_storeu_ps(st->ds,
                     _mm512_mul_ps(_mm512_set1_ps(half_at(b + 208) * 0.25f),
                                   _mm512_cvtepi32_ps(sc)));
    const __m512i nibble = _mm512_set1_epi32(0x3c3c3c3c);
    const __m512i six = _mm512_set1_epi32((int)0xfcfcfcfcu);
    const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
    const __m512i by =
        _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(2), 1);
#pragma GCC unroll 2
    for (int n = 0; n < 2; n++) {
        const __m512i l = _mm512_loadu_si512(b + 64 * n);
        const __m512i h =
            _mm512_srlv_epi32(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  (const __m256i *)(b + 128 + 32 * n))),
                              by);
        // the nibble into bits 2-5, qh's two bits into 6-7 (the nibble
        // where the mask is set, the rest of the other), then bits 0-1
        // cleared and bit 7 flipped: (t & six) ^ flip
        const __m512i q0 = _mm512_ternarylogic_epi32(
            _mm512_slli_epi32(l, 2), _mm512_slli_epi32(h, 6), nibble, 0xe4);
        const __m512i q1 = _mm512_ternarylogic_epi32(
            _mm512_srli_epi32(l, 2), _mm512_slli_epi32(h, 2), nibble, 0xe4);
        _mm512_storeu_si512(st->q + 128 * n,
                            _mm512_ternarylogic_epi32(q0, six, flip, 0x6a));
        _mm512_storeu_si512(st->q + 128 * n + 64,
                            _mm512_ternarylogic_epi32(q1, six, flip, 0x6a));
    }
    FROM_MEMORY();
}

/* Piece p = 2 n + g of a Q6_K block: lanes 16 g .. 16 g + 15 of half
 * n's four runs of 32, vector 8 n + 2 t + g for run t. y = (d sc)
 * (q - 32), as ggml, taken as (d sc / 4) (4 (q - 32)): the same exact
 * product, rounded once. */
INLINE void q6_k_piece(const unsigned char *b, const struct q6_k_state *st,
                       int p, __m512 w[4])
{
    (void)b;
    const int n = p / 2, g = p % 2;
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        const int v = 8 * n + 2 * t + g;
        const __m512i q = _mm512_cvtepi8_epi32(
            _mm_loadu_si128((const __m128i *)(st->q + 16 * v)));
        w[t] = _mm512_mul_ps(_mm512_set1_ps(st->ds[v]), _mm512_cvtepi32_ps(q));
    }
}

INLINE int q6_k_vec(int p, int t)
{
    return 8 * (p / 2) + 2 * t + p % 2;
}

/* ---------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

/* Two blocks of 32 (64 values) are one piece, as for Q8_0. In a block,
 * value j < 16 is the low nibble of qs[j], value 16 + j its high nibble,
 * with (Q5_*) bit j of the little-endian qh above it; each is looked up
 * in the block's table of its 16 (32) values, whose products are exact
 * (an 11-bit d times a 5-bit quant): Q4_0 (q - 8) d, Q5_0 (q - 16) d, as
 * ggml; Q4_1 and Q5_1 q d + m fused, whose one rounding is ggml's
 * rounding of the exact q d plus m. */
INLINE int pair_vec(int p, int t)
{
    (void)p;
    return t;
}

/* One block's two vectors of type q4_0 (m_off < 0) or q4_1. */
INLINE void q4_block(const unsigned char *b, int m_off, __m512 w[2])
{
    const __m512 iota =
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = _mm512_set1_ps(half_at(b));
    const __m512 t =
        m_off < 0
            ? _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(8.0f)), d)
            : _mm512_fmadd_ps(d, iota, _mm512_set1_ps(half_at(b + m_off)));
    const __m512i q = bytes_u32(b + (m_off < 0 ? 2 : 4));
    w[0] = _mm512_permutexvar_ps(q, t);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t);
}

/* One block's two vectors of type q5_0 (m_off < 0) or q5_1. */
INLINE void q5_block(const unsigned char *b, int m_off, __m512 w[2])
{
    const __m512 iota =
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = _mm512_set1_ps(half_at(b));
    const __m512 i16 = _mm512_add_ps(iota, _mm512_set1_ps(16.0f));
    __m512 t, th;
    if (m_off < 0) {
        t = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(16.0f)), d);
        th = _mm512_mul_ps(iota, d);
    } else {
        const __m512 m = _mm512_set1_ps(half_at(b + m_off));
        t = _mm512_fmadd_ps(d, iota, m);
        th = _mm512_fmadd_ps(d, i16, m);
    }
    const unsigned char *qh = b + (m_off < 0 ? 2 : 4);
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    const __m512i lane =
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // bit j (lanes' j), then bit 16 + j, of qh moved to bit 4
    const __m512i h = _mm512_set1_epi32((int)bits);
    const __m512i h0 = _mm512_slli_epi32(_mm512_srlv_epi32(h, lane), 4);
    const __m512i h1 = _mm512_srli_epi32(_mm512_srlv_epi32(h, lane), 12);
    const __m512i q = bytes_u32(qh + 4);
    w[0] = _mm512_permutex2var_ps(t, NIBBLE_OVER(q, h0), th);
    w[1] =
        _mm512_permutex2var_ps(t, NIBBLE_OVER(_mm512_srli_epi32(q, 4), h1), th);
}

struct pair_state {
    char unused;
};

INLINE void pair_prep(const unsigned char *b, struct pair_state *st)
{
    (void)b, (void)st;
}

#define PAIR_PIECE(name, block, bytes, m_off)                                  \
    INLINE void name##_piece(const unsigned char *b,                           \
                             const struct pair_state *st, int p, __m512 w[4])  \
    {                                                                          \
        (void)st, (void)p;                                                     \
        block(b, m_off, w);                                                    \
        block(b + (bytes), m_off, w + 2);                                      \
    }
PAIR_PIECE(q4_0, q4_block, 18, -1)
PAIR_PIECE(q4_1, q4_block, 20, 2)
PAIR_PIECE(q5_0, q5_block, 22, -1)
PAIR_PIECE(q5_1, q5_block, 24, 2)
#undef PAIR_PIECE

/* ---------------------------------------------------------- kernels */

/*
 * For each type: dots[j] = x . W[j] for `together` rows (a constant
 * after inlining), blocks blocks of values values and bytes bytes each
 * (for Q8_0 a pair of ggml's), pieces pieces of four vectors a block;
 * and the decoding of blocks into dst.
 *
 * The dot products prepare each block's state a block ahead: the pieces
 * read their scales (and Q6_K its quants) back from memory a vector
 * element at a time, which from a store just made waits for the store
 * to reach the cache (the store cannot be forwarded to a narrower load),
 * and from one a block old does not (Q4_K from 22.5 to 26 GB/s a core
 * from cache). The last block fetches nothing ahead (the loop runs
 * faster with one branch than with two).
 */
#define KERNELS(name, state, prep, vec, values, bytes, pieces)                 \
    INLINE void name##_dots_body(const float *x, const unsigned char *b,       \
                                 size_t row_bytes, size_t blocks,              \
                                 int together, float *dots)                    \
    {                                                                          \
        __m512 acc[TOGETHER][QUANT_SUMS];                                      \
        _Pragma("GCC unroll 4") for (int j = 0; j < together; j++)             \
            _Pragma("GCC unroll 4") for (int s = 0; s < QUANT_SUMS; s++)       \
                acc[j][s] = _mm512_setzero_ps();                               \
        struct state ahead[2][TOGETHER];                                       \
        _Pragma("GCC unroll 4") for (int j = 0; j < together; j++)             \
            prep(b + j * row_bytes, &ahead[0][j]);                             \
        for (size_t i = 0; i < blocks; i++, b += (bytes), x += (values)) {     \
            const struct state *st = ahead[i % 2];                             \
            if (i + 1 < blocks)                                                \
                _Pragma("GCC unroll 4") for (int j = 0; j < together; j++)     \
                {                                                              \
                    for (int at = 0; at < (bytes); at += 64)                   \
                        PREFETCH(b, j, row_bytes, at);                         \
                    prep(b + (bytes) + j * row_bytes, &ahead[(i + 1) % 2][j]); \
                }                                                              \
            _Pragma("GCC unroll 4") for (int p = 0; p < (pieces); p++)         \
            {                                                                  \
                __m512 xv[4];                                                  \
                _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) xv[t] =    \
                    _mm512_loadu_ps(x + 16 * vec(p, t));                       \
                _Pragma("GCC unroll 4") for (int j = 0; j < together; j++)     \
                {                                                              \
                    __m512 w[4];                                               \
                    name##_piece(b + j * row_bytes, &st[j], p, w);             \
                    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)        \
                    {                                                          \
                        const int s = vec(p, t) % QUANT_SUMS;                  \
                        acc[j][s] = _mm512_fmadd_ps(xv[t], w[t], acc[j][s]);   \
                    }                                                          \
                }                                                              \
            }                                                                  \
        }                                                                      \
        _Pragma("GCC unroll 4") for (int j = 0; j < together; j++) dots[j] =   \
            reduce(acc[j]);                                                    \
    }                                                                          \
    TARGET static void name##_dots(const float *x, const unsigned char *b,     \
                                   size_t row_bytes, size_t blocks, size_t n,  \
                                   float *dots)                                \
    {                                                                          \
        size_t j = 0;                                                          \
        for (; j + TOGETHER <= n; j += TOGETHER)                               \
            name##_dots_body(x, b + j * row_bytes, row_bytes, blocks,          \
                             TOGETHER, dots + j);                              \
        for (; j < n; j++)                                                     \
            name##_dots_body(x, b + j * row_bytes, row_bytes, blocks, 1,       \
                             dots + j);                                        \
    }                                                                          \
    INLINE void name##_rows_body(                                              \
        const float *x, size_t ldx, const unsigned char *b, size_t row_bytes,  \
        size_t blocks, int ws, int xs, float *dots, size_t lddots)             \
    {                                                                          \
        __m512 acc[2][2][QUANT_SUMS];                                          \
        _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)                   \
            _Pragma("GCC unroll 2") for (int r = 0; r < xs; r++)               \
                _Pragma("GCC unroll 4") for (int s = 0; s < QUANT_SUMS; s++)   \
                    acc[j][r][s] = _mm512_setzero_ps();                        \
        struct state ahead[2][2];                                              \
        _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)                   \
            prep(b + j * row_bytes, &ahead[0][j]);                             \
        for (size_t i = 0; i < blocks; i++, b += (bytes), x += (values)) {     \
            const struct state *st = ahead[i % 2];                             \
            if (i + 1 < blocks)                                                \
                _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)           \
                {                                                              \
                    for (int at = 0; at < (bytes); at += 64)                   \
                        _mm_prefetch((const char *)((uintptr_t)b +             \
                                                    (j + ws) * row_bytes +     \
                                                    at),                       \
                                     _MM_HINT_T1);                             \
                    prep(b + (bytes) + j * row_bytes, &ahead[(i + 1) % 2][j]); \
                }                                                              \
            _Pragma("GCC unroll 4") for (int p = 0; p < (pieces); p++)         \
            {                                                                  \
                __m512 w[2][4];                                                \
                _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)           \
                    name##_piece(b + j * row_bytes, &st[j], p, w[j]);          \
                _Pragma("GCC unroll 2") for (int r = 0; r < xs; r++)           \
                    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)        \
                {                                                              \
                    const int s = vec(p, t) % QUANT_SUMS;                      \
                    const __m512 xv =                                          \
                        _mm512_loadu_ps(x + r * ldx + 16 * vec(p, t));         \
                    _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)       \
                        acc[j][r][s] =                                         \
                            _mm512_fmadd_ps(xv, w[j][t], acc[j][r][s]);        \
                }                                                              \
            }                                                                  \
        }                                                                      \
        _Pragma("GCC unroll 2") for (int j = 0; j < ws; j++)                   \
            _Pragma("GCC unroll 2") for (int r = 0; r < xs; r++)               \
                dots[r * lddots + j] = reduce(acc[j][r]);                      \
    }                                                                          \
    TARGET static void name##_rows(                                            \
        const float *x, size_t ldx, size_t xrows, const unsigned char *w,      \
        size_t row_bytes, size_t blocks, size_t n, float *dots, size_t lddots) \
    {                                                                          \
        size_t r = 0;                                                          \
        for (; r + 2 <= xrows; r += 2) {                                       \
            size_t j = 0;                                                      \
            for (; j + 2 <= n; j += 2)                                         \
                name##_rows_body(x + r * ldx, ldx, w + j * row_bytes,          \
                                 row_bytes, blocks, 2, 2,                      \
                                 dots + r * lddots + j, lddots);               \
            if (j < n)                                                         \
                name##_rows_body(x + r * ldx, ldx, w + j * row_bytes,          \
                                 row_bytes, blocks, 1, 2,                      \
                                 dots + r * lddots + j, lddots);               \
        }                                                                      \
        if (r < xrows)                                                         \
            name##_dots(x + r * ldx, w, row_bytes, blocks, n,                  \
                        dots + r * lddots);                                    \
    }                                                                          \
    TARGET static void name##_decode(const unsigned char *b, size_t blocks,    \
                                     float *dst)                               \
    {                                                                          \
        for (size_t i = 0; i < blocks; i++, b += (bytes), dst += (values)) {   \
            struct state st;                                                   \
            prep(b, &st);                                                      \
            _Pragma("GCC unroll 4") for (int p = 0; p < (pieces); p++)         \
            {                                                                  \
                __m512 w[4];                                                   \
                name##_piece(b, &st, p, w);                                    \
                _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)            \
                    _mm512_storeu_ps(dst + 16 * vec(p, t), w[t]);              \
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
    float piece[PIECE] __attribute__((aligned(64)));
    for (size_t j = 0; j < n; j++) {
        const unsigned char *row = w + j * row_bytes;
        __m512 acc[QUANT_SUMS];
        for (int s = 0; s < QUANT_SUMS; s++)
            acc[s] = _mm512_setzero_ps();
        for (size_t k0 = 0; k0 < in; k0 += PIECE) {
            const size_t len = in - k0 < PIECE ? in - k0 : PIECE;
            quant_decode_avx512(type, row + k0 / values * bytes, len, piece);
            for (size_t v = 0; v < len / 16; v++)
                acc[v % QUANT_SUMS] = _mm512_fmadd_ps(
                    _mm512_loadu_ps(x + k0 + 16 * v),
                    _mm512_load_ps(piece + 16 * v), acc[v % QUANT_SUMS]);
        }
        dots[j] = reduce(acc);
    }
}

TARGET void quant_dots_avx512(quant_type type, const float *x, const void *w,
                              size_t row_bytes, size_t in, size_t n,
                              float *dots)
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

/* Rows of an odd number of 32-value blocks: a piece of QUANT_ROW_PIECE
 * values of each row of W decoded once into memory and summed into every
 * row of x's four sums in turn, in the one-row order (the piece starts at
 * a multiple of 64, so its vector v goes into sum v % 4 as value k's into
 * (k / 16) % 4). The next row's piece is fetched meanwhile, as the
 * one-row kernels fetch. */
TARGET static void widened_rows_dots(quant_type type, const float *x,
                                     size_t ldx, size_t xrows, const void *w,
                                     size_t row_bytes, size_t in, size_t n,
                                     float *dots, size_t lddots)
{
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    float piece[QUANT_ROW_PIECE] __attribute__((aligned(64)));
    __m512 acc[QUANT_BY_ROWS][QUANT_SUMS];
    for (size_t j = 0; j < n; j++) {
        const unsigned char *row = (const unsigned char *)w + j * row_bytes;
        for (size_t r = 0; r < xrows; r++)
            for (int s = 0; s < QUANT_SUMS; s++)
                acc[r][s] = _mm512_setzero_ps();
        for (size_t k0 = 0; k0 < in; k0 += QUANT_ROW_PIECE) {
            const size_t len =
                in - k0 < QUANT_ROW_PIECE ? in - k0 : QUANT_ROW_PIECE;
            const unsigned char *b = row + k0 / values * bytes;
            for (size_t at = 0; at < len / values * bytes; at += 64)
                _mm_prefetch((const char *)((uintptr_t)b + row_bytes + at),
                             _MM_HINT_T1);
            quant_decode_avx512(type, b, len, piece);
            for (size_t r = 0; r < xrows; r++) {
                const float *xr = x + r * ldx + k0;
                __m512 a[QUANT_SUMS];
                for (int s = 0; s < QUANT_SUMS; s++)
                    a[s] = acc[r][s];
                size_t v = 0;
                for (; v + QUANT_SUMS <= len / 16; v += QUANT_SUMS)
#pragma GCC unroll 4
                    for (int s = 0; s < QUANT_SUMS; s++)
                        a[s] = _mm512_fmadd_ps(
                            _mm512_loadu_ps(xr + 16 * (v + s)),
                            _mm512_load_ps(piece + 16 * (v + s)), a[s]);
                for (; v < len / 16; v++) /* a piece of 32 values: two */
                    a[v % QUANT_SUMS] = _mm512_fmadd_ps(
                        _mm512_loadu_ps(xr + 16 * v),
                        _mm512_load_ps(piece + 16 * v), a[v % QUANT_SUMS]);
                for (int s = 0; s < QUANT_SUMS; s++)
                    acc[r][s] = a[s];
            }
        }
        for (size_t r = 0; r < xrows; r++)
            dots[r * lddots + j] = reduce(acc[r]);
    }
}

/* Two rows of W and two of x at a time (sixteen sums, eight decoded
 * vectors): each piece is decoded in registers once for two rows of x,
 * and each vector of x loaded once for two rows of W, each sum in the
 * one-row kernel's order. Against each row of x alone (Q4_K, Q6_K, Q8_0;
 * 2048 x 2048, a core, W from the second cache, Zen 4): two rows 1.36-1.40x,
 * eight 1.47-1.60x. Four rows of x to one of W (each vector of x loaded
 * for one row of W, four rows of x too many for the first cache) made
 * 1.17-1.26x on Q4_K. A last odd row goes the one-row way. */
TARGET void quant_rows_dots_avx512(quant_type type, const float *x, size_t ldx,
                                   size_t xrows, const void *w,
                                   size_t row_bytes, size_t in, size_t n,
                                   float *dots, size_t lddots)
{
    const size_t blocks = in / quant_block_values((int)type);
    const size_t pairs = blocks / 2;
    if (quant_block_values((int)type) == 32 && blocks % 2) {
        widened_rows_dots(type, x, ldx, xrows, w, row_bytes, in, n, dots,
                          lddots);
        return;
    }
#define ROWS(name, count)                                                      \
    name##_rows(x, ldx, xrows, w, row_bytes, count, n, dots, lddots);          \
    return
    switch (type) {
    case QUANT_Q8_0: ROWS(q8_0, pairs);
    case QUANT_Q4_0: ROWS(q4_0, pairs);
    case QUANT_Q4_1: ROWS(q4_1, pairs);
    case QUANT_Q5_0: ROWS(q5_0, pairs);
    case QUANT_Q5_1: ROWS(q5_1, pairs);
    case QUANT_Q4_K: ROWS(q4_k, blocks);
    case QUANT_Q5_K: ROWS(q5_k, blocks);
    case QUANT_Q6_K: ROWS(q6_k, blocks);
    }
#undef ROWS
    widened_rows_dots(type, x, ldx, xrows, w, row_bytes, in, n, dots, lddots);
}

/* The last block of a run of an odd number of 32-value blocks. */
INLINE void odd_block(quant_type type, const unsigned char *b, float *dst)
{
    __m512 v[2];
    switch (type) {
    case QUANT_Q4_0: q4_block(b, -1, v); break;
    case QUANT_Q4_1: q4_block(b, 2, v); break;
    case QUANT_Q5_0: q5_block(b, -1, v); break;
    case QUANT_Q5_1: q5_block(b, 2, v); break;
    default: q8_0_block(b, v); break;
    }
    _mm512_storeu_ps(dst, v[0]);
    _mm512_storeu_ps(dst + 16, v[1]);
}

TARGET void quant_decode_avx512(quant_type type, const void *src, size_t count,
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
    if (blocks % 2)
        odd_block(type, b + 2 * pairs * bytes, dst + 64 * pairs);
}
#endif
