/*
 * quant_product.c - products through block-quantized weights
 * (quant_product.h): the way for two rows of x or more, and the choice
 * of way. One row goes to quant_dot.c.
 *
 * Two rows or more go by blocks of ROWS rows of x and, within them, of
 * QUANT_COLS of W's columns. Each block of x is packed column by column
 * into the panel (packed[k][r]: the block's rows side by side); then for
 * every GROUP of W's rows (outputs) the group's columns are decoded into
 * the panel after it (a few KiB, which stay in the core's first cache)
 * and meet the whole block in one kernel call: for each column k, the
 * packed rows times GROUP weights broadcast, into GROUP x ROWS sums held
 * in registers. Decoding is paid once per ROWS rows of x.
 */
#include "quant_product.h"
#include "stream_product.h"
#include "widen.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

/* Rows of x to a block (four vectors of sixteen), and W's rows to a
 * kernel call: with four vectors of rows the AVX-512 kernel's sums take
 * 24 of the 32 vector registers, the rows and a broadcast weight five
 * more. */
enum { ROWS = 64, GROUP = 6 };

/* The panel holds the packed rows and then a group's decoded columns. */
_Static_assert((ROWS + GROUP) * QUANT_COLS <= WIDEN_PANEL_FLOATS,
               "a block of rows and a group's columns fit a panel");
_Static_assert(QUANT_COLS % QUANT_CHUNK == 0 && QUANT_CHUNK % 256 == 0,
               "chunks and panels hold whole blocks of every type");

/*
 * The kernels: sums[j][r] = sum over k < cols of packed[k][r] w[j][k],
 * for the GROUP decoded rows w[j] and the width rows r of the block
 * (width a multiple of 16). Each sum goes in the order of k, one fused
 * multiply-add a term, by chunks of QUANT_CHUNK columns summed from zero
 * and then added to the whole: every build does exactly this for every
 * sum, whatever its place in a vector.
 */
static void kernel_plain(const float *packed, size_t width,
                         const float *const *w, size_t cols, float *sums)
{
    for (size_t j = 0; j < GROUP; j++)
        for (size_t r = 0; r < width; r++) {
            float s = 0.0f;
            for (size_t k0 = 0; k0 < cols; k0 += QUANT_CHUNK) {
                const size_t k1 =
                    cols - k0 < QUANT_CHUNK ? cols : k0 + QUANT_CHUNK;
                float c = 0.0f;
                for (size_t k = k0; k < k1; k++)
                    c = fmaf(packed[k * width + r], w[j][k], c);
                s = k0 ? s + c : c;
            }
            sums[j * ROWS + r] = s;
        }
}

#if HAVE_AVX2_BUILD
/* Sixteen rows at a time, in two vectors of eight: twelve sums, two of
 * rows and a broadcast weight take fifteen of the sixteen registers. */
AVX2_TARGET static void kernel_avx2(const float *packed, size_t width,
                                    const float *const *w, size_t cols,
                                    float *sums)
{
    for (size_t r0 = 0; r0 < width; r0 += 16) {
        for (size_t k0 = 0; k0 < cols; k0 += QUANT_CHUNK) {
            const size_t k1 = cols - k0 < QUANT_CHUNK ? cols : k0 + QUANT_CHUNK;
            __m256 acc[GROUP][2];
#pragma GCC unroll 8
            for (int j = 0; j < GROUP; j++)
                acc[j][0] = acc[j][1] = _mm256_setzero_ps();
            for (size_t k = k0; k < k1; k++) {
                const float *at = packed + k * width + r0;
                const __m256 x0 = _mm256_loadu_ps(at);
                const __m256 x1 = _mm256_loadu_ps(at + 8);
#pragma GCC unroll 8
                for (int j = 0; j < GROUP; j++) {
                    const __m256 wk = _mm256_broadcast_ss(w[j] + k);
                    acc[j][0] = _mm256_fmadd_ps(x0, wk, acc[j][0]);
                    acc[j][1] = _mm256_fmadd_ps(x1, wk, acc[j][1]);
                }
            }
#pragma GCC unroll 8
            for (int j = 0; j < GROUP; j++)
                for (int i = 0; i < 2; i++) {
                    float *at = sums + j * ROWS + r0 + 8 * (size_t)i;
                    if (k0)
                        acc[j][i] =
                            _mm256_add_ps(_mm256_loadu_ps(at), acc[j][i]);
                    _mm256_storeu_ps(at, acc[j][i]);
                }
        }
    }
}

/* nv vectors of sixteen rows at once (width = 16 nv), every loop but the
 * one over k unrolled whole, so that the sums stay in registers. */
AVX512_TARGET ALWAYS_INLINE void kernel_avx512_body(const float *packed, int nv,
                                                    const float *const *w,
                                                    size_t cols, float *sums)
{
    for (size_t k0 = 0; k0 < cols; k0 += QUANT_CHUNK) {
        const size_t k1 = cols - k0 < QUANT_CHUNK ? cols : k0 + QUANT_CHUNK;
        __m512 acc[GROUP][ROWS / 16];
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++)
                acc[j][i] = _mm512_setzero_ps();
#pragma GCC unroll 2
        for (size_t k = k0; k < k1; k++) {
            __m512 x[ROWS / 16];
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++)
                x[i] = _mm512_loadu_ps(packed + k * 16 * (size_t)nv + 16 * i);
#pragma GCC unroll 8
            for (int j = 0; j < GROUP; j++) {
                const __m512 wk = _mm512_set1_ps(w[j][k]);
#pragma GCC unroll 8
                for (int i = 0; i < nv; i++)
                    acc[j][i] = _mm512_fmadd_ps(x[i], wk, acc[j][i]);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++) {
                float *at = sums + j * ROWS + 16 * i;
                if (k0)
                    acc[j][i] = _mm512_add_ps(_mm512_load_ps(at), acc[j][i]);
                _mm512_store_ps(at, acc[j][i]);
            }
    }
}

#define KERNEL(nv)                                                             \
    AVX512_TARGET static void kernel_avx512_##nv(                              \
        const float *packed, const float *const *w, size_t cols, float *sums)  \
    {                                                                          \
        kernel_avx512_body(packed, nv, w, cols, sums);                         \
    }
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
#undef KERNEL

static void kernel_avx512(const float *packed, size_t width,
                          const float *const *w, size_t cols, float *sums)
{
    switch (width / 16) {
    case 1: kernel_avx512_1(packed, w, cols, sums); break;
    case 2: kernel_avx512_2(packed, w, cols, sums); break;
    case 3: kernel_avx512_3(packed, w, cols, sums); break;
    default: kernel_avx512_4(packed, w, cols, sums); break;
    }
}
#endif

static void kernel(enum vec_isa isa, const float *packed, size_t width,
                   const float *const *w, size_t cols, float *sums)
{
    VEC_DISPATCH(isa, kernel, packed, width, w, cols, sums);
}

/* Two rows of x or more: by blocks of rows, of columns, of outputs. */
static void product_panels(enum vec_isa isa, const struct quant_product *p,
                           float beta, float *panel)
{
    float sums[GROUP * ROWS] __attribute__((aligned(64)));
    float *const packed = panel, *const decoded = panel + ROWS * QUANT_COLS;
    const size_t values = quant_block_values((int)p->type);
    const size_t bytes = quant_block_bytes((int)p->type);
    const unsigned char *const w = p->w;
    for (size_t r0 = 0; r0 < p->rows; r0 += ROWS) {
        const size_t rows = p->rows - r0 < ROWS ? p->rows - r0 : ROWS;
        const size_t width = (rows + 15) / 16 * 16;
        for (size_t k0 = 0; k0 < p->in; k0 += QUANT_COLS) {
            const size_t cols =
                p->in - k0 < QUANT_COLS ? p->in - k0 : QUANT_COLS;
            const size_t at = k0 / values * bytes;
            stream_pack_rows(p->x, p->ldx, r0, rows, k0, cols, width, packed);
            for (size_t o0 = 0; o0 < p->out; o0 += GROUP) {
                const size_t outs = p->out - o0 < GROUP ? p->out - o0 : GROUP;
                // a last group short of GROUP repeats its last row, whose
                // sums are computed again and not used
                const float *rows_of[GROUP];
                for (size_t j = 0; j < GROUP; j++) {
                    rows_of[j] =
                        decoded + (j < outs ? j : outs - 1) * QUANT_COLS;
                    if (j < outs)
                        quant_decode(isa, p->type,
                                     w + (o0 + j) * p->row_bytes + at, cols,
                                     decoded + j * QUANT_COLS);
                }
                kernel(isa, packed, width, rows_of, cols, sums);
                stream_add_sums(p->y, p->ldy, r0, rows, o0, outs, sums, ROWS,
                                NULL, k0 == 0 && beta == 0.0f);
            }
        }
    }
}

void quant_product_isa(enum vec_isa isa, const struct quant_product *p,
                       float beta, float *panel)
{
    assert(beta == 0.0f || beta == 1.0f);
    assert(quant_block_values((int)p->type) &&
           p->in % quant_block_values((int)p->type) == 0);
    if (p->rows == 0 || p->out == 0)
        return;
    if (p->in == 0) { /* no terms: y = beta y */
        for (size_t r = 0; r < p->rows; r++)
            for (size_t o = 0; o < p->out; o++)
                if (beta == 0.0f)
                    p->y[r * p->ldy + o] = 0.0f;
        return;
    }
    if (p->rows == 1) {
        quant_dot_outputs(isa, p, beta);
        return;
    }
    assert(panel);
    product_panels(isa, p, beta, panel);
}

void quant_product_by_rows(enum vec_isa isa, const struct quant_product *p,
                           float beta)
{
    assert(beta == 0.0f || beta == 1.0f);
    if (p->rows == 1 || p->in == 0) {
        quant_product_isa(isa, p, beta, NULL);
        return;
    }
    assert(quant_block_values((int)p->type) &&
           p->in % quant_block_values((int)p->type) == 0);
    quant_dot_outputs(isa, p, beta);
}

void quant_product(const struct quant_product *p, float beta, float *panel)
{
    quant_product_isa(vec_isa_best(), p, beta, panel);
}
