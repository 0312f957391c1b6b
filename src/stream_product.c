/*
 * stream_product.c - products that stream the weights in place
 * (stream_product.h).
 *
 * A call goes by blocks of STREAM_ROWS rows of x and, within them, of
 * STREAM_COLS of W's columns. Each block of x is packed column by column
 * into the panel (packed[k][r]: the block's rows side by side), and then
 * every GROUP of W's rows (outputs) meets the whole block in one kernel
 * call: for each column k, four vectors of packed rows and GROUP weights
 * broadcast from W's rows, 24 multiply-adds into 24 vector sums held in
 * registers. Eight groups' sums (48 outputs) are added into y together,
 * sixteen outputs by sixteen rows at a time, and once a block's last
 * columns are in, the caller's finish (widen.h) is done to it. The
 * packed block stays in the core's own caches across the groups, and
 * W's rows are read front to back, a few at a time, each fetched a few
 * lines ahead.
 */
#include "stream_product.h"
#include "transpose16.h"
#include "vecmath.h"

#include <stdint.h>
#include <string.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

/* W's rows (outputs) to a kernel call: with four vectors of rows, the
 * sums take 24 of the 32 vector registers, and the rows and a broadcast
 * weight five more. */
enum { GROUP = 6, VECTORS = STREAM_ROWS / 16 };

/* Columns a kernel sums apart before adding them to what it has. */
enum { CHUNK = 256 };

/* How far ahead of its columns the kernel fetches each of W's rows: eight
 * lines (measured against four and sixteen: 64 x 3072 -> 6144 on one
 * core, W from memory, 112-115 G multiply-adds a second without, 117-124
 * with; no change where W is in cache). */
enum { PREFETCH_BYTES = 512 };

bool stream_product_can(const struct widen_product *p)
{
    return p->rows >= 2 && (p->dtype == ATTN_F32 || p->dtype == ATTN_BF16) &&
           vec_isa_best() == VEC_ISA_AVX512;
}

#if HAVE_AVX2_BUILD
/* packed[k][r] = x[r0 + r][k0 + k] for a block of 16 rows (rb..rb + 16,
 * rows past `rows` as 0) and 16 columns (kb..kb + take): sixteen rows
 * loaded, transposed in registers, sixteen columns stored. */
AVX512_TARGET static void pack_block16(const float *x, size_t ldx, size_t r0,
                                       size_t rows, size_t rb, size_t k0,
                                       size_t kb, size_t take, size_t width,
                                       float *packed)
{
    const __mmask16 cols = (__mmask16)((1u << take) - 1u);
    __m512 a[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        a[i] = rb + (size_t)i < rows
                   ? _mm512_maskz_loadu_ps(
                         cols, x + (r0 + rb + (size_t)i) * ldx + k0 + kb)
                   : _mm512_setzero_ps();
    transpose16(a);
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++) {
        const size_t c = (size_t)q;
        if (c < take)
            _mm512_storeu_ps(packed + (kb + c) * width + rb, a[q]);
    }
}
#endif

void stream_pack_rows(const float *x, size_t ldx, size_t r0, size_t rows,
                      size_t k0, size_t cols, size_t width, float *packed)
{
#if HAVE_AVX2_BUILD
    if (vec_isa_best() == VEC_ISA_AVX512) {
        for (size_t kb = 0; kb < cols; kb += 16)
            for (size_t rb = 0; rb < width; rb += 16)
                pack_block16(x, ldx, r0, rows, rb, k0, kb,
                             cols - kb < 16 ? cols - kb : 16, width, packed);
        return;
    }
#endif
    for (size_t kb = 0; kb < cols; kb += 16) {
        const size_t ke = cols - kb < 16 ? cols : kb + 16;
        for (size_t r = 0; r < width; r++) {
            if (r >= rows) {
                for (size_t k = kb; k < ke; k++)
                    packed[k * width + r] = 0.0f;
                continue;
            }
            const float *src = x + (r0 + r) * ldx + k0;
            for (size_t k = kb; k < ke; k++)
                packed[k * width + r] = src[k];
        }
    }
}

/* y's outputs [o0, o0 + outs) of rows [r0, r0 + rows) from the sums,
 * one at a time. */
static void add_sums_plain(float *y, size_t ldy, size_t r0, size_t rows,
                           size_t o0, size_t outs, const float *sums,
                           size_t stride, const float *bias, bool set)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = y + (r0 + r) * ldy + o0;
        for (size_t j = 0; j < outs; j++) {
            const float s = sums[j * stride + r];
            row[j] = !set ? row[j] + s : bias ? bias[j] + s : s;
        }
    }
}

#if HAVE_AVX2_BUILD
/* The same for sixteen outputs, sixteen rows at a time: their sums
 * loaded, transposed in registers, and each row's sixteen added into y
 * with one load and one store. (Fewer outputs than sixteen go one at a
 * time: the transpose of a few costs more than it saves.) */
AVX512_TARGET static void add_sums16(float *y, size_t ldy, size_t r0,
                                     size_t rows, size_t o0, const float *sums,
                                     size_t stride, const float *bias, bool set)
{
    const __m512 b = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    for (size_t rb = 0; rb < rows; rb += 16) {
        const size_t nr = rows - rb < 16 ? rows - rb : 16;
        const __mmask16 some = (__mmask16)((1u << nr) - 1u);
        __m512 a[16];
#pragma GCC unroll 16
        for (size_t q = 0; q < 16; q++)
            a[q] = _mm512_maskz_loadu_ps(some, sums + q * stride + rb);
        transpose16(a);
#pragma GCC unroll 16
        for (size_t r = 0; r < 16; r++) {
            if (r >= nr)
                break;
            float *at = y + (r0 + rb + r) * ldy + o0;
            const __m512 v = !set   ? _mm512_add_ps(_mm512_loadu_ps(at), a[r])
                             : bias ? _mm512_add_ps(b, a[r])
                                    : a[r];
            _mm512_storeu_ps(at, v);
        }
    }
}
#endif

void stream_add_sums(float *y, size_t ldy, size_t r0, size_t rows, size_t o0,
                     size_t outs, const float *sums, size_t stride,
                     const float *bias, bool set)
{
    size_t j = 0;
#if HAVE_AVX2_BUILD
    if (vec_isa_best() == VEC_ISA_AVX512)
        for (; j + 16 <= outs; j += 16)
            add_sums16(y, ldy, r0, rows, o0 + j, sums + j * stride, stride,
                       bias ? bias + j : NULL, set);
#endif
    add_sums_plain(y, ldy, r0, rows, o0 + j, outs - j, sums + j * stride,
                   stride, bias ? bias + j : NULL, set);
}

#if HAVE_AVX2_BUILD
/* Weight k of a row as a float broadcast to sixteen lanes. A bfloat16
 * with the word after it in the row (paired) is read as the 32-bit word
 * the two make, broadcast from memory and shifted: cheaper than taking
 * the word alone through a general register. */
AVX512_TARGET ALWAYS_INLINE __m512 weight(const float *wf, const uint16_t *wh,
                                          bool bf16, bool paired, size_t k)
{
    if (!bf16)
        return _mm512_set1_ps(wf[k]);
    uint32_t word = wh[k];
    if (paired)
        memcpy(&word, wh + k, sizeof word);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_set1_epi32((int)word), 16));
}

/* Column k of a chunk: each of the GROUP weights meets nv vectors of
 * packed rows, one fused multiply-add into each sum. */
AVX512_TARGET ALWAYS_INLINE void column(const float *packed, size_t width,
                                        const float *const *wf,
                                        const uint16_t *const *wh, bool bf16,
                                        bool paired, int nv, size_t k,
                                        __m512 acc[GROUP][VECTORS])
{
    __m512 x[VECTORS];
#pragma GCC unroll 8
    for (int i = 0; i < nv; i++)
        x[i] = _mm512_loadu_ps(packed + k * width + 16 * i);
#pragma GCC unroll 8
    for (int j = 0; j < GROUP; j++) {
        const __m512 wk = weight(wf[j], wh[j], bf16, paired, k);
#pragma GCC unroll 8
        for (int i = 0; i < nv; i++)
            acc[j][i] = _mm512_fmadd_ps(x[i], wk, acc[j][i]);
    }
}

/* sums[j][r] = sum over k < cols of packed[k][r] w[j][k], for the GROUP
 * rows w[j] of W and the first 16 nv rows r (packed's columns width
 * floats apart); bf16 says whether w holds
 * bfloat16s (a float's upper half) or floats. Each sum goes in the order
 * of k, by chunks of CHUNK columns summed apart and then added to the
 * whole in sums: a long row's rounding error grows with the chunk and
 * the number of chunks, not with the row. Every loop but the one over k
 * is unrolled whole, so that the sums stay in registers. */
AVX512_TARGET ALWAYS_INLINE void kernel_body(const float *packed, size_t width,
                                             const void *const *w, bool bf16,
                                             int nv, size_t cols, float *sums)
{
    const float *wf[GROUP];
    const uint16_t *wh[GROUP];
#pragma GCC unroll 8
    for (int j = 0; j < GROUP; j++) {
        wf[j] = w[j];
        wh[j] = w[j];
    }
    for (size_t k0 = 0; k0 < cols; k0 += CHUNK) {
        const size_t k1 = cols - k0 < CHUNK ? cols : k0 + CHUNK;
        __m512 acc[GROUP][VECTORS];
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++)
                acc[j][i] = _mm512_setzero_ps();
        // the last column of the block reads its weights alone: the
        // word after it may lie past the matrix
        const size_t paired = k1 < cols ? k1 : k1 - 1;
        size_t k = k0;
        // sixteen columns at a time, each of W's rows fetched a few lines
        // ahead: the prefetchers keep up with one stream, not six
        for (; k + 16 <= paired; k += 16) {
#pragma GCC unroll 8
            for (int j = 0; j < GROUP; j++)
                // an address, not a pointer: past a matrix's last row
                // it points at nothing, and a prefetch never faults
                _mm_prefetch((const char *)((bf16 ? (uintptr_t)(wh[j] + k)
                                                  : (uintptr_t)(wf[j] + k)) +
                                            PREFETCH_BYTES),
                             _MM_HINT_T0);
#pragma GCC unroll 2
            for (size_t c = k; c < k + 16; c++)
                column(packed, width, wf, wh, bf16, true, nv, c, acc);
        }
#pragma GCC unroll 2
        for (; k < paired; k++)
            column(packed, width, wf, wh, bf16, true, nv, k, acc);
        if (paired < k1)
            column(packed, width, wf, wh, bf16, false, nv, paired, acc);
#pragma GCC unroll 8
        for (int j = 0; j < GROUP; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nv; i++) {
                float *at = sums + j * STREAM_ROWS + 16 * i;
                if (k0)
                    acc[j][i] = _mm512_add_ps(_mm512_load_ps(at), acc[j][i]);
                _mm512_store_ps(at, acc[j][i]);
            }
    }
}

typedef void kernel_fn(const float *packed, const void *const *w, size_t cols,
                       float *sums);

/* A kernel for nv vectors of rows, their columns width floats apart: a
 * constant, so that each column's loads take fixed offsets. */
#define KERNEL(name, bf16, nv, width)                                          \
    AVX512_TARGET static void name(const float *packed, const void *const *w,  \
                                   size_t cols, float *sums)                   \
    {                                                                          \
        kernel_body(packed, width, w, bf16, nv, cols, sums);                   \
    }
KERNEL(kernel_f32_1, false, 1, 16)
KERNEL(kernel_f32_2, false, 2, 32)
KERNEL(kernel_f32_3, false, 3, 48)
KERNEL(kernel_f32_4, false, 4, 64)
KERNEL(kernel_bf16_1, true, 1, 16)
KERNEL(kernel_bf16_2, true, 2, 32)
KERNEL(kernel_bf16_3, true, 3, 48)
KERNEL(kernel_bf16_4, true, 4, 64)
/* the same over a packed x's block, STREAM_ROWS wide however many of its
 * rows there are */
KERNEL(kernel_f32_1_of_4, false, 1, 64)
KERNEL(kernel_f32_2_of_4, false, 2, 64)
KERNEL(kernel_f32_3_of_4, false, 3, 64)
KERNEL(kernel_bf16_1_of_4, true, 1, 64)
KERNEL(kernel_bf16_2_of_4, true, 2, 64)
KERNEL(kernel_bf16_3_of_4, true, 3, 64)
#undef KERNEL
_Static_assert(STREAM_ROWS == 64, "the kernels' widths");

/* The kernel for nv vectors of rows (1 to VECTORS) of dtype's weights,
 * their columns 16 nv floats apart, or STREAM_ROWS when packed. */
static kernel_fn *kernel_for(attn_dtype dtype, size_t nv, bool packed)
{
    static kernel_fn *const kernels[2][2][VECTORS] = {
        {{kernel_f32_1, kernel_f32_2, kernel_f32_3, kernel_f32_4},
         {kernel_bf16_1, kernel_bf16_2, kernel_bf16_3, kernel_bf16_4}},
        {{kernel_f32_1_of_4, kernel_f32_2_of_4, kernel_f32_3_of_4,
          kernel_f32_4},
         {kernel_bf16_1_of_4, kernel_bf16_2_of_4, kernel_bf16_3_of_4,
          kernel_bf16_4}}};
    return kernels[packed][dtype == ATTN_BF16][nv - 1];
}

/* Rows of x at most that go by outputs (by_outputs_body()): the
 * broadcast kernel's vectors of sixteen rows would be mostly empty, while
 * there each vector holds sixteen outputs whatever the rows; but each
 * weight is moved by a transpose, which above eight rows costs more than
 * the empty lanes (measured on a 2048 x 8192 matrix). */
enum { BY_OUTPUTS_ROWS = 8 };

/* Sixteen values of row w of W from column k (take of them, the rest
 * 0), as floats. */
AVX512_TARGET ALWAYS_INLINE __m512 w16(const void *w, bool bf16, size_t k,
                                       size_t take)
{
    if (!bf16)
        return take == 16
                   ? _mm512_loadu_ps((const float *)w + k)
                   : _mm512_maskz_loadu_ps((__mmask16)((1u << take) - 1u),
                                           (const float *)w + k);
    __m256i h;
    if (take == 16) {
        h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
    } else {
        uint16_t part[16] = {0};
        for (size_t i = 0; i < take; i++)
            part[i] = ((const uint16_t *)w)[k + i];
        h = _mm256_loadu_si256((const __m256i *)part);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* sums[j * 16 + r] = sum over k < cols of x[r][k] w[j][k] for sixteen
 * rows w[j] of W (outputs) and R rows x[r] of x, in the order and with
 * the fused multiply-adds of kernel_body(): k in order, by chunks of
 * CHUNK columns summed apart and then added to the whole. So the bits
 * are the broadcast kernel's. W's sixteen rows are read sixteen columns
 * at a time (a bfloat16 W's thirty-two, as pairs) and transposed in
 * registers, each vector then a column of sixteen outputs, which meets a
 * value of each row of x broadcast. */
AVX512_TARGET ALWAYS_INLINE void by_outputs_body(const float *const *x,
                                                 const void *const *w,
                                                 bool bf16, int R, size_t cols,
                                                 float *sums)
{
    float whole[BY_OUTPUTS_ROWS][16] __attribute__((aligned(64)));
    for (size_t c0 = 0; c0 < cols; c0 += CHUNK) {
        const size_t c1 = cols - c0 < CHUNK ? cols : c0 + CHUNK;
        __m512 acc[BY_OUTPUTS_ROWS];
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_setzero_ps();
        size_t kb = c0;
        // a bfloat16 W thirty-two columns at a time: each row's 64 bytes
        // are sixteen 32-bit words, each a pair of columns, transposed as
        // words, so that vector q holds the sixteen outputs' pairs of
        // columns kb + 2q and kb + 2q + 1: half the loads and transposes
        // of a column at a time, and no widening of each value alone.
        // The seven bfloat16 matrices of two Llama-3.2-1B-shaped layers
        // on one core: 8 rows 29 -> 32 G multiply-adds a second, 4 rows
        // 17 -> 22, 2 rows 9 -> 12. The columns go in the same order,
        // each its own fused multiply-add: the same bits.
        for (; bf16 && c1 - kb >= 32; kb += 32) {
            __m512 a[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                a[j] = _mm512_loadu_ps((const uint16_t *)w[j] + kb);
            transpose16(a);
            const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) {
                const __m512i pair = _mm512_castps_si512(a[q]);
                const __m512 even =
                    _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
                const __m512 odd =
                    _mm512_castsi512_ps(_mm512_and_si512(pair, high));
                const size_t k = kb + 2 * (size_t)q;
#pragma GCC unroll 16
                for (int r = 0; r < R; r++)
                    acc[r] =
                        _mm512_fmadd_ps(_mm512_set1_ps(x[r][k]), even, acc[r]);
#pragma GCC unroll 16
                for (int r = 0; r < R; r++)
                    acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r][k + 1]), odd,
                                             acc[r]);
            }
        }
        for (; kb < c1; kb += 16) {
            const size_t take = c1 - kb < 16 ? c1 - kb : 16;
            __m512 a[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                a[j] = w16(w[j], bf16, kb, take);
            transpose16(a);
            if (take == 16) {
#pragma GCC unroll 16
                for (int c = 0; c < 16; c++)
#pragma GCC unroll 16
                    for (int r = 0; r < R; r++)
                        acc[r] = _mm512_fmadd_ps(
                            _mm512_set1_ps(x[r][kb + (size_t)c]), a[c], acc[r]);
            } else {
                for (size_t c = 0; c < take; c++)
#pragma GCC unroll 16
                    for (int r = 0; r < R; r++)
                        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r][kb + c]),
                                                 a[c], acc[r]);
            }
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            if (c0)
                acc[r] = _mm512_add_ps(_mm512_load_ps(whole[r]), acc[r]);
            _mm512_store_ps(whole[r], acc[r]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 16; j++)
            sums[j * 16 + r] = whole[r][j];
}

typedef void by_outputs_fn(const float *const *x, const void *const *w,
                           size_t cols, float *sums);

#define BY_OUTPUTS(R)                                                          \
    AVX512_TARGET static void by_outputs_f32_##R(                              \
        const float *const *x, const void *const *w, size_t cols, float *sums) \
    {                                                                          \
        by_outputs_body(x, w, false, R, cols, sums);                           \
    }                                                                          \
    AVX512_TARGET static void by_outputs_bf16_##R(                             \
        const float *const *x, const void *const *w, size_t cols, float *sums) \
    {                                                                          \
        by_outputs_body(x, w, true, R, cols, sums);                            \
    }
BY_OUTPUTS(2)
BY_OUTPUTS(4)
BY_OUTPUTS(6)
BY_OUTPUTS(8)
#undef BY_OUTPUTS

/* The by-outputs kernel for rows rows (2 to BY_OUTPUTS_ROWS): the one built for
 * that many or the next count up, *R. */
static by_outputs_fn *by_outputs_for(attn_dtype dtype, size_t rows, int *R)
{
    static const struct {
        int rows;
        by_outputs_fn *f32, *bf16;
    } built[] = {{2, by_outputs_f32_2, by_outputs_bf16_2},
                 {4, by_outputs_f32_4, by_outputs_bf16_4},
                 {6, by_outputs_f32_6, by_outputs_bf16_6},
                 {8, by_outputs_f32_8, by_outputs_bf16_8}};
    size_t i = 0;
    while ((size_t)built[i].rows < rows)
        i++;
    *R = built[i].rows;
    return dtype == ATTN_BF16 ? built[i].bf16 : built[i].f32;
}

/* Sums into a packed y (widen.h): out[j][r] for outputs j < outs and
 * lanes r < lanes of a block (rows STREAM_ROWS apart), from sums[j][r]
 * (stride to an output); set when set, with bias[j] added when bias is
 * not NULL, else added. */
AVX512_TARGET static void put_sums_packed(float *out, const float *sums,
                                          size_t stride, size_t outs,
                                          size_t lanes, const float *bias,
                                          bool set)
{
    for (size_t j = 0; j < outs; j++) {
        const float *s = sums + j * stride;
        float *o = out + j * STREAM_ROWS;
        const __m512 b = _mm512_set1_ps(bias ? bias[j] : 0.0f);
        for (size_t r = 0; r < lanes; r += 16) {
            const __mmask16 some = lanes - r < 16
                                       ? (__mmask16)((1u << (lanes - r)) - 1u)
                                       : (__mmask16)0xffff;
            __m512 v = _mm512_maskz_loadu_ps(some, s + r);
            if (!set)
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(some, o + r), v);
            else if (bias)
                v = _mm512_add_ps(b, v);
            _mm512_mask_storeu_ps(o + r, some, v);
        }
    }
}

/* Outputs [o0, o0 + outs) of the block of rows r0 (rows of them, lanes
 * of its sums kept) from a group's sums: into y as the product lays it
 * out, set (to the bias and the sum, with a bias) when set. */
static void put_sums(const struct widen_product *p, size_t r0, size_t rows,
                     size_t lanes, size_t o0, size_t outs, const float *sums,
                     size_t stride, bool set)
{
    const float *bias = set && p->bias ? p->bias + o0 : NULL;
    if (!p->y_packed) {
        stream_add_sums(p->y, p->ldy, r0, rows, o0, outs, sums, stride, bias,
                        set);
        return;
    }
    float *block = p->y + stream_packed_at(p->ldy, r0, o0);
    put_sums_packed(block, sums, stride, outs, lanes, bias, set);
}

/* p->finish over outputs [o0, o0 + outs) of the rows rows from r0, as
 * widen.h says for a packed y. */
static void finish_block(const struct widen_product *p, size_t r0, size_t rows,
                         size_t o0, size_t outs)
{
    if (p->y_packed)
        p->finish(p->y + stream_packed_at(p->ldy, r0, o0), STREAM_ROWS, outs,
                  rows, p->finish_arg);
    else
        p->finish(p->y + r0 * p->ldy + o0, p->ldy, rows, outs, p->finish_arg);
}

/* Rows [r0, r0 + rows) of the product, BY_OUTPUTS_ROWS at most, by
 * outputs sixteen at a time: the same bits as the broadcast kernel. A
 * packed x's rows are laid out as rows first, in panel. */
static void by_outputs(const struct widen_product *p, size_t r0, size_t rows,
                       float beta, float *panel)
{
    int R;
    by_outputs_fn *const kernel = by_outputs_for(p->dtype, rows, &R);
    float sums[16 * 16];
    for (size_t k0 = 0; k0 < p->in; k0 += STREAM_COLS) {
        const size_t cols = p->in - k0 < STREAM_COLS ? p->in - k0 : STREAM_COLS;
        const float *x0 = p->x + r0 * p->ldx + k0;
        size_t ldx = p->ldx;
        if (p->x_packed) {
            const float *block = p->x + stream_packed_at(p->ldx, r0, k0);
            for (size_t r = 0; r < rows; r++)
                for (size_t k = 0; k < cols; k++)
                    panel[r * cols + k] = block[k * STREAM_ROWS + r];
            x0 = panel;
            ldx = cols;
        }
        // rows past the last repeat it: their sums are made and not kept
        const float *x[BY_OUTPUTS_ROWS];
        for (int r = 0; r < R; r++)
            x[r] = x0 + ((size_t)r < rows ? (size_t)r : rows - 1) * ldx;
        for (size_t o0 = 0; o0 < p->out; o0 += 16) {
            const size_t outs = p->out - o0 < 16 ? p->out - o0 : 16;
            const void *w[16];
            for (size_t j = 0; j < 16; j++) {
                const size_t o = o0 + (j < outs ? j : outs - 1);
                w[j] = (const char *)p->w +
                       attn_dtype_bytes(p->dtype, o * p->ldw + k0);
            }
            kernel(x, w, cols, sums);
            put_sums(p, r0, rows, rows, o0, outs, sums, 16,
                     k0 == 0 && beta == 0.0f);
        }
    }
}

/* Outputs whose sums are added into y together (stream_product.h). */
enum { FLUSH_OUTS = STREAM_FLUSH_OUTS };
_Static_assert(FLUSH_OUTS % GROUP == 0, "whole groups to a flush");
_Static_assert(BY_OUTPUTS_ROWS *STREAM_COLS <= WIDEN_PANEL_FLOATS,
               "a packed x's few rows fit in the panel");

void stream_product(const struct widen_product *p, float beta, float *panel)
{
    float sums[FLUSH_OUTS * STREAM_ROWS] __attribute__((aligned(64)));
    for (size_t r0 = 0; r0 < p->rows; r0 += STREAM_ROWS) {
        const size_t rows =
            p->rows - r0 < STREAM_ROWS ? p->rows - r0 : STREAM_ROWS;
        if (rows <= BY_OUTPUTS_ROWS) {
            by_outputs(p, r0, rows, beta, panel);
            if (p->finish)
                finish_block(p, r0, rows, 0, p->out);
            continue;
        }
        const size_t nv = (rows + 15) / 16;
        kernel_fn *const kernel = kernel_for(p->dtype, nv, p->x_packed);
        const size_t row_bytes = attn_dtype_bytes(p->dtype, p->ldw);
        for (size_t k0 = 0; k0 < p->in; k0 += STREAM_COLS) {
            const char *w0 =
                (const char *)p->w + attn_dtype_bytes(p->dtype, k0);
            const size_t cols =
                p->in - k0 < STREAM_COLS ? p->in - k0 : STREAM_COLS;
            // a packed x is read where it lies, its block STREAM_ROWS wide
            const float *packed = panel;
            if (p->x_packed)
                packed = p->x + stream_packed_at(p->ldx, r0, k0);
            else
                stream_pack_rows(p->x, p->ldx, r0, rows, k0, cols, 16 * nv,
                                 panel);
            for (size_t o0 = 0; o0 < p->out; o0 += FLUSH_OUTS) {
                const size_t span =
                    p->out - o0 < FLUSH_OUTS ? p->out - o0 : FLUSH_OUTS;
                for (size_t g0 = 0; g0 < span; g0 += GROUP) {
                    const size_t outs = span - g0 < GROUP ? span - g0 : GROUP;
                    // a last group short of GROUP repeats its last row,
                    // whose sums are computed again and not used
                    const void *w[GROUP];
                    for (size_t j = 0; j < GROUP; j++) {
                        const size_t o = o0 + g0 + (j < outs ? j : outs - 1);
                        w[j] = w0 + o * row_bytes;
                    }
                    kernel(packed, w, cols, sums + g0 * STREAM_ROWS);
                }
                // a packed y keeps every lane the kernel made, so that
                // the next product reads no lane unwritten
                put_sums(p, r0, rows, 16 * nv, o0, span, sums, STREAM_ROWS,
                         k0 == 0 && beta == 0.0f);
                // the block's outputs are whole after W's last columns
                if (p->finish && k0 + cols == p->in)
                    finish_block(p, r0, rows, o0, span);
            }
        }
    }
}
#else
void stream_product(const struct widen_product *p, float beta, float *panel)
{
    (void)p, (void)beta, (void)panel; /* stream_product_can() is false */
}
#endif
