/*
 * bf16_dots.c - products with bfloat16 activations through the CPU's
 * bfloat16 dot products (bf16_dots.h).
 *
 * As stream_product.c, a call goes by blocks of ROWS rows of x and of
 * COLS of W's columns. Each block of x is rounded to bfloat16 and packed
 * pair by pair into the panel: packed[k / 2][r] holds x[r][k] in its low
 * half and x[r][k + 1] in its high half, the rows side by side. Then
 * every GROUP of W's rows meets the whole block: for each pair of
 * columns, four vectors of packed rows and GROUP pairs of weights
 * broadcast from where W holds them (a pair of bfloat16s is one 32-bit
 * word), into GROUP x 4 vector sums held in registers, one vdpbf16ps each.
 */
#include "bf16_dots.h"
#include "stream_product.h"
#include "transpose16.h"
#include "vecmath.h"

#include <stdint.h>
#include <string.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

/* Rows of x to a block (four vectors of sixteen), W's rows to a kernel
 * call, columns to a block (the packed pairs fill half a panel), and
 * pairs of columns summed apart. */
enum { ROWS = 64, GROUP = 6, VECTORS = ROWS / 16 };
enum { COLS = WIDEN_PANEL_FLOATS / ROWS, CHUNK_PAIRS = 128 };

/* Asked afresh each time, as vecmath.c asks: the feature bits are a load
 * from memory, and a cached answer written by whichever request came
 * first would be a race between the threads that plan requests. */
bool bf16_dots_available(void)
{
#if HAVE_AVX2_BUILD
    return vec_isa_best() == VEC_ISA_AVX512 &&
           __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("avx512bw");
#else
    return false;
#endif
}

#if HAVE_AVX2_BUILD
#define BF16_TARGET                                                            \
    __attribute__((                                                            \
        target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,avx2,fma")))

/* Sixteen floats each rounded to the nearest bfloat16, ties to even (a
 * NaN stays one, made quiet), in the low half of its lane. */
BF16_TARGET ALWAYS_INLINE __m512i round16(__m512 v)
{
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i odd =
        _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)),
                         odd),
        16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
        _mm512_set1_epi32(0x7f800000));
    const __m512i quiet =
        _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

/* Thirty-two values of a row from src (take of them, the rest 0) rounded
 * to bfloat16s, in order: sixteen pairs, each a 32-bit word with the
 * even column in its low half. */
BF16_TARGET ALWAYS_INLINE __m512i pairs16(const float *src, size_t take)
{
    const __mmask16 low =
        take >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << take) - 1u);
    const __mmask16 high = take >= 32   ? (__mmask16)0xffff
                           : take <= 16 ? (__mmask16)0
                                        : (__mmask16)((1u << (take - 16)) - 1u);
    const __m256i a =
        _mm512_cvtepi32_epi16(round16(_mm512_maskz_loadu_ps(low, src)));
    const __m256i b =
        _mm512_cvtepi32_epi16(round16(_mm512_maskz_loadu_ps(high, src + 16)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* Rows [r0, r0 + rows) of x, columns [k0, k0 + cols), as pairs of
 * bfloat16s: packed[k / 2][r], width rows to a pair, the rows past x's
 * and a last odd column's partner zero. Sixteen rows of sixteen pairs
 * at a time, rounded and transposed in registers. */
BF16_TARGET static void pack_pairs(const float *x, size_t ldx, size_t r0,
                                   size_t rows, size_t k0, size_t cols,
                                   size_t width, uint32_t *packed)
{
    const size_t pairs = (cols + 1) / 2;
    for (size_t qb = 0; qb < pairs; qb += 16) {
        const size_t take = cols - 2 * qb < 32 ? cols - 2 * qb : 32;
        const size_t npairs = pairs - qb < 16 ? pairs - qb : 16;
        for (size_t rb = 0; rb < width; rb += 16) {
            __m512 a[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                a[i] = rb + (size_t)i < rows
                           ? _mm512_castsi512_ps(pairs16(
                                 x + (r0 + rb + (size_t)i) * ldx + k0 + 2 * qb,
                                 take))
                           : _mm512_setzero_ps();
            transpose16(a);
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++)
                if ((size_t)q < npairs)
                    _mm512_storeu_ps(
                        (float *)(packed + (qb + (size_t)q) * width + rb),
                        a[q]);
        }
    }
}

/* The pair of W's row w from column 2 q, broadcast: one 32-bit word
 * read from memory (paired), or the last odd column alone. */
BF16_TARGET ALWAYS_INLINE __m512i weight_pair(const uint16_t *w, size_t q,
                                              bool paired)
{
    uint32_t pair = w[2 * q];
    if (paired)
        memcpy(&pair, w + 2 * q, sizeof pair);
    return _mm512_set1_epi32((int)pair);
}

/* Pair q of a chunk: each of the GROUP pairs of weights meets nv vectors
 * of packed pairs of rows, one vdpbf16ps into each sum. */
BF16_TARGET ALWAYS_INLINE void pair_column(const uint32_t *packed,
                                           const uint16_t *const *w,
                                           bool paired, int nv, size_t q,
                                           __m512 acc[GROUP][VECTORS])
{
    __m512i x[VECTORS];
#pragma GCC unroll 8
    for (int i = 0; i < nv; i++)
        x[i] =
            _mm512_loadu_si512(packed + q * 16 * (size_t)nv + 16 * (size_t)i);
#pragma GCC unroll 8
    for (int j = 0; j < GROUP; j++) {
        const __m512i wq = weight_pair(w[j], q, paired);
#pragma GCC unroll 8
        for (int i = 0; i < nv; i++)
            acc[j][i] =
                _mm512_dpbf16_ps(acc[j][i], (__m512bh)x[i], (__m512bh)wq);
    }
}

/* sums[j][r] = sum over the cols columns of packed[.][r] w[j][.], for
 * the GROUP rows w[j] of W and the first 16 nv rows r, by chunks of
 * CHUNK_PAIRS pairs summed apart and added to the whole in sums. */
BF16_TARGET ALWAYS_INLINE void kernel_body(const uint32_t *packed,
                                           const uint16_t *const *w, int nv,
                                           size_t cols, float *sums)
{
    const size_t pairs = (cols + 1) / 2;
    for (size_t q0 = 0; q0 < pairs; q0 += CHUNK_PAIRS) {
        const size_t q1 = pairs - q0 < CHUNK_PAIRS ? pairs : q0 + CHUNK_PAIRS;
        __m512 acc[GROUP][VECTORS];
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++)
                acc[j][i] = _mm512_setzero_ps();
        // an odd last column is a pair alone: the word after it may lie
        // past the matrix
        const size_t whole = cols % 2 && q1 == pairs ? q1 - 1 : q1;
#pragma GCC unroll 2
        for (size_t q = q0; q < whole; q++)
            pair_column(packed, w, true, nv, q, acc);
        if (whole < q1)
            pair_column(packed, w, false, nv, whole, acc);
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++) {
                float *at = sums + j * ROWS + 16 * i;
                if (q0)
                    acc[j][i] = _mm512_add_ps(_mm512_load_ps(at), acc[j][i]);
                _mm512_store_ps(at, acc[j][i]);
            }
    }
}

typedef void kernel_fn(const uint32_t *packed, const uint16_t *const *w,
                       size_t cols, float *sums);

#define KERNEL(nv)                                                             \
    BF16_TARGET static void kernel_##nv(const uint32_t *packed,                \
                                        const uint16_t *const *w, size_t cols, \
                                        float *sums)                           \
    {                                                                          \
        kernel_body(packed, w, nv, cols, sums);                                \
    }
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
#undef KERNEL

static kernel_fn *const kernels[VECTORS] = {kernel_1, kernel_2, kernel_3,
                                            kernel_4};

/* Outputs whose sums are added into y together (stream_product.h). */
enum { FLUSH_OUTS = STREAM_FLUSH_OUTS };
_Static_assert(FLUSH_OUTS % GROUP == 0, "whole groups to a flush");

void bf16_dots_product(const struct widen_product *p, float beta, float *panel)
{
    float sums[FLUSH_OUTS * ROWS] __attribute__((aligned(64)));
    uint32_t *packed = (uint32_t *)(void *)panel;
    const uint16_t *w = (const uint16_t *)p->w + p->col0;
    for (size_t r0 = 0; r0 < p->rows; r0 += ROWS) {
        const size_t rows = p->rows - r0 < ROWS ? p->rows - r0 : ROWS;
        const size_t nv = (rows + 15) / 16;
        kernel_fn *const kernel = kernels[nv - 1];
        for (size_t k0 = 0; k0 < p->in; k0 += COLS) {
            const size_t cols = p->in - k0 < COLS ? p->in - k0 : COLS;
            pack_pairs(p->x, p->ldx, r0, rows, k0, cols, 16 * nv, packed);
            for (size_t o0 = 0; o0 < p->out; o0 += FLUSH_OUTS) {
                const size_t span =
                    p->out - o0 < FLUSH_OUTS ? p->out - o0 : FLUSH_OUTS;
                for (size_t g0 = 0; g0 < span; g0 += GROUP) {
                    const size_t outs = span - g0 < GROUP ? span - g0 : GROUP;
                    // a last group short of GROUP repeats its last row,
                    // whose sums are computed again and not used
                    const uint16_t *rows_of[GROUP];
                    for (size_t j = 0; j < GROUP; j++)
                        rows_of[j] =
                            w + (o0 + g0 + (j < outs ? j : outs - 1)) * p->ldw +
                            k0;
                    kernel(packed, rows_of, cols, sums + g0 * ROWS);
                }
                stream_add_sums(p->y, p->ldy, r0, rows, o0, span, sums, ROWS,
                                NULL, k0 == 0 && beta == 0.0f);
            }
        }
    }
}

/* ------------------------------------------- rows each their own token */

/* Rows of x to a rows kernel call, and W's rows (outputs). One or two
 * rows go one output at a time, so that W is read front to back, as
 * row_product.c's kernels read it for as many rows. */
enum { TOKEN_ROWS = 4, TOKEN_OUTS = 4, ONE_OUTPUT_ROWS = 2 };

/* dots[j * rows + r] = xb[r] . w[j] over n values, xb rows of bfloat16s
 * (ldb apart, zero past n to a multiple of 32), w outs rows of W: each
 * dot one sum of sixteen lanes of pairs, thirty-two values a block (the
 * last block's weights past n read as zero), its lanes then added by the
 * instruction set's reduction. A row's dots follow from its own values
 * alone. */
BF16_TARGET ALWAYS_INLINE void tokens_body(const uint16_t *xb, size_t ldb,
                                           int rows, const uint16_t *const *w,
                                           int outs, size_t n, size_t ahead,
                                           float *dots)
{
    __m512 acc[TOKEN_OUTS][TOKEN_ROWS];
#pragma GCC unroll 4
    for (int j = 0; j < outs; j++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            acc[j][r] = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 32) {
        const __mmask32 in_row = n - i >= 32
                                     ? (__mmask32)0xffffffffu
                                     : (__mmask32)((1u << (n - i)) - 1u);
        __m512i x[TOKEN_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            x[r] = _mm512_loadu_si512(xb + (size_t)r * ldb + i);
#pragma GCC unroll 4
        for (int j = 0; j < outs; j++) {
            // ahead values on: the row the next call reads in its place
            // (each row alone is too short for the prefetchers to find),
            // or one output a call, W front to back (widen.h)
            __builtin_prefetch(w[j] + i + ahead, 0, WIDEN_FETCH_HINT);
            const __m512i wv = _mm512_maskz_loadu_epi16(in_row, w[j] + i);
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++)
                acc[j][r] =
                    _mm512_dpbf16_ps(acc[j][r], (__m512bh)x[r], (__m512bh)wv);
        }
    }
    // unrolled whole, so that the sums stay in registers in the loop
#pragma GCC unroll 4
    for (int j = 0; j < outs; j++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            dots[j * rows + r] = _mm512_reduce_add_ps(acc[j][r]);
}

/* rows rows of x (ldx apart, n values each) rounded to bfloat16 into xb,
 * ldb apart, zero from n to ldb (a multiple of 32). */
BF16_TARGET static void round_rows(const float *x, size_t ldx, size_t rows,
                                   size_t n, size_t ldb, uint16_t *xb)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < ldb; k += 32)
            _mm512_storeu_si512(
                xb + r * ldb + k,
                pairs16(x + r * ldx + k, n - k < 32 ? n - k : 32));
}

typedef void tokens_fn(const uint16_t *xb, size_t ldb, const uint16_t *const *w,
                       size_t n, size_t ahead, float *dots);

#define TOKENS(rows, outs)                                                     \
    BF16_TARGET static void tokens_##rows##x##outs(                            \
        const uint16_t *xb, size_t ldb, const uint16_t *const *w, size_t n,    \
        size_t ahead, float *dots)                                             \
    {                                                                          \
        tokens_body(xb, ldb, rows, w, outs, n, ahead, dots);                   \
    }
TOKENS(1, 4)
TOKENS(2, 4)
TOKENS(3, 4)
TOKENS(4, 4)
TOKENS(1, 1)
TOKENS(2, 1)
#undef TOKENS

/* token_kernels[rows - 1] against TOKEN_OUTS outputs, one_output[rows -
 * 1] against one */
static tokens_fn *const token_kernels[TOKEN_ROWS] = {tokens_1x4, tokens_2x4,
                                                     tokens_3x4, tokens_4x4};
static tokens_fn *const one_output[ONE_OUTPUT_ROWS] = {tokens_1x1, tokens_2x1};

void bf16_dots_rows(const struct widen_product *p, float beta, float *panel)
{
    const uint16_t *w = (const uint16_t *)p->w + p->col0;
    const size_t ldb = (p->in + 31) / 32 * 32;
    uint16_t *xb = (uint16_t *)(void *)panel;
    // as many rows rounded to bfloat16 as the panel holds, one at least
    // (a row is at most XF_MAX_DIM values: far less than a panel)
    const size_t fit = WIDEN_PANEL_FLOATS * 2 / ldb;
    const size_t chunk = fit < 1 ? 1 : fit;
    float dots[TOKEN_OUTS * TOKEN_ROWS];
    for (size_t c0 = 0; c0 < p->rows; c0 += chunk) {
        const size_t rows_in = p->rows - c0 < chunk ? p->rows - c0 : chunk;
        round_rows(p->x + c0 * p->ldx, p->ldx, rows_in, p->in, ldb, xb);
        const size_t outs = p->rows <= ONE_OUTPUT_ROWS ? 1 : TOKEN_OUTS;
        const size_t ahead = /* values */
            outs == 1 ? widen_one_output_ahead(sizeof *w, p->ldw * sizeof *w,
                                               p->in * sizeof *w) /
                            sizeof *w
                      : outs * p->ldw;
        for (size_t o0 = 0; o0 < p->out; o0 += outs) {
            const uint16_t *rows_of[TOKEN_OUTS];
            for (size_t j = 0; j < outs; j++)
                rows_of[j] =
                    w + (o0 + j < p->out ? o0 + j : p->out - 1) * p->ldw;
            for (size_t r0 = 0; r0 < rows_in; r0 += TOKEN_ROWS) {
                const size_t rows =
                    rows_in - r0 < TOKEN_ROWS ? rows_in - r0 : TOKEN_ROWS;
                tokens_fn *const kernel =
                    outs == 1 ? one_output[rows - 1] : token_kernels[rows - 1];
                kernel(xb + r0 * ldb, ldb, rows_of, p->in, ahead, dots);
                for (size_t j = 0; j < outs && o0 + j < p->out; j++)
                    for (size_t r = 0; r < rows; r++) {
                        float *y = p->y + (c0 + r0 + r) * p->ldy + o0 + j;
                        const float dot = dots[j * rows + r];
                        *y = beta == 0.0f ? dot : *y + dot;
                    }
            }
        }
    }
}
#else
void bf16_dots_product(const struct widen_product *p, float beta, float *panel)
{
    (void)p, (void)beta, (void)panel; /* bf16_dots_available() is false */
}

void bf16_dots_rows(const struct widen_product *p, float beta, float *panel)
{
    (void)p, (void)beta, (void)panel; /* bf16_dots_available() is false */
}
#endif
