/*
 * row_product.c - products of rows that are each a token of its own
 * (row_product.h).
 *
 * A kernel call takes four of W's rows (outputs) and up to four rows of
 * x: each weight vector is loaded (and a bfloat16 one widened) once for
 * all the rows, each row of x once for all the outputs, and every
 * (output, row) pair keeps its sum in a register: sixteen sums in
 * flight, so that none waits on the one before, and few enough loads for
 * each product that the core's load ports keep up with its adders. More
 * rows go four at a time over the same outputs, which are then in the
 * core's first cache. One or two rows, which wait on memory rather than
 * on adders, take one output a call, W front to back. Which rows and
 * outputs share a call changes no sum.
 */
#include "quant.h"
#include "quant_product.h"
#include "row_product.h"

#include <math.h>
#include <string.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

/* Rows of x to a kernel call at most, and outputs. One or two rows (a
 * token alone, or two sequences' step) go one output at a time instead,
 * so that W is read front to back, one row after another, as a plain
 * read loop reads memory: measured with two threads over 512 MB of
 * bfloat16 matrices, one row read 47 GB/s so and 38 four outputs at a
 * time; from three rows on, the four outputs' shared loads of x win. */
enum { ROW_XS = 4, ROW_OUTS = 4, ONE_OUTPUT_ROWS = 2 };

/* Outputs whose quantized rows are read for one group of rows of x after
 * another: a few tens of KiB, which stay in the core's second cache. */
enum { QUANT_OUT_TILE = 32 };

/* Value i of a row of W as a float. */
ALWAYS_INLINE float value_at(const void *w, bool bf16, size_t i)
{
    if (!bf16)
        return ((const float *)w)[i];
    const uint32_t bits = (uint32_t)((const uint16_t *)w)[i] << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* acc += x w lane by lane, each product and its sum rounded once (a
 * fused multiply-add: the AVX2 and AVX-512 builds' instruction, the plain
 * build's fmaf()), so that every build gives the same bits. Fused, eight
 * rows of x through a bfloat16 W keep both of a core's multiply-add
 * units busy, where a multiply and an add kept its multipliers and its
 * adders busy in turn: 41 -> 49 G multiply-adds a second a core
 * (docs/benchmarks.md). Each build's kernels take theirs as a constant
 * (kernel_body()). */
typedef void add_fn(v16f *acc, const v16f *x, const v16f *w);

ALWAYS_INLINE void add_products_plain(v16f *acc, const v16f *x, const v16f *w)
{
    for (int l = 0; l < 16; l++)
        (*acc)[l] = fmaf((*x)[l], (*w)[l], (*acc)[l]);
}

#if HAVE_AVX2_BUILD
AVX2_TARGET ALWAYS_INLINE void add_products_avx2(v16f *acc, const v16f *x,
                                                 const v16f *w)
{
    __m256 a[2], b[2], c[2];
    memcpy(a, x, sizeof a);
    memcpy(b, w, sizeof b);
    memcpy(c, acc, sizeof c);
    c[0] = _mm256_fmadd_ps(a[0], b[0], c[0]);
    c[1] = _mm256_fmadd_ps(a[1], b[1], c[1]);
    memcpy(acc, c, sizeof c);
}

AVX512_TARGET ALWAYS_INLINE void add_products_avx512(v16f *acc, const v16f *x,
                                                     const v16f *w)
{
    *acc = (v16f)_mm512_fmadd_ps((__m512)*x, (__m512)*w, (__m512)*acc);
}
#endif

/* The end of a dot: its sum's lanes added pairwise, lane i to lane
 * i + 8, then i + 4, i + 2 and i + 1 (a fixed tree, four vector adds),
 * then the products of values from to n one by one. */
ALWAYS_INLINE float finish(const v16f *acc, const float *x, const void *w,
                           bool bf16, size_t from, size_t n)
{
    typedef float v8 __attribute__((vector_size(32)));
    typedef float v4 __attribute__((vector_size(16)));
    typedef float v2 __attribute__((vector_size(8)));
    const v8 s8 =
        __builtin_shufflevector(*acc, *acc, 0, 1, 2, 3, 4, 5, 6, 7) +
        __builtin_shufflevector(*acc, *acc, 8, 9, 10, 11, 12, 13, 14, 15);
    const v4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) +
                  __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
    const v2 s2 = __builtin_shufflevector(s4, s4, 0, 1) +
                  __builtin_shufflevector(s4, s4, 2, 3);
    float sum = s2[0] + s2[1];
    for (size_t i = from; i < n; i++)
        sum = fmaf(x[i], value_at(w, bf16, i), sum);
    return sum;
}

/* Values i .. i + 31 of a row of x, split: its even ones (x[i + 2 l]
 * in lane l) and its odd ones. */
ALWAYS_INLINE void split32(const float *x, size_t i, v16f *even, v16f *odd)
{
    v16f a, b;
    memcpy(&a, x + i, sizeof a);
    memcpy(&b, x + i + 16, sizeof b);
    *even = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                    22, 24, 26, 28, 30);
    *odd = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                   23, 25, 27, 29, 31);
}

/* Thirty-two bfloat16s of a row of W from value i, as their pairs lie in
 * memory: the even ones (each word's low half, shifted up) and the odd
 * ones (its high half, kept): two integer operations for thirty-two
 * values. */
ALWAYS_INLINE void pairs32(const uint16_t *w, size_t i, v16f *even, v16f *odd)
{
    v16u words;
    memcpy(&words, w + i, sizeof words);
    *even = (v16f)(words << 16);
    *odd = (v16f)(words & 0xffff0000u);
}

/* Thirty-two values of a row of x from value i as the kernel meets them
 * with W's: for a bfloat16 W split into even and odd ones (already so in
 * xs when the caller split the rows, ldxs apart: split_x), else as they
 * lie. */
ALWAYS_INLINE void x32(const float *x, size_t ldx, const float *xs, size_t ldxs,
                       bool bf16, bool split_x, int r, size_t i, v16f *first,
                       v16f *second)
{
    if (bf16 && split_x) {
        memcpy(first, xs + (size_t)r * ldxs + i, sizeof *first);
        memcpy(second, xs + (size_t)r * ldxs + i + 16, sizeof *second);
    } else if (bf16) {
        split32(x + (size_t)r * ldx, i, first, second);
    } else {
        memcpy(first, x + (size_t)r * ldx + i, sizeof *first);
        memcpy(second, x + (size_t)r * ldx + i + 16, sizeof *second);
    }
}

/* Values i .. i + 31 of a row of W as the kernel multiplies them: for a
 * bfloat16 W its even ones and its odd ones (pairs32()), else as they
 * lie. */
ALWAYS_INLINE void w32(const void *w, bool bf16, size_t i, v16f *first,
                       v16f *second)
{
    if (bf16) {
        pairs32(w, i, first, second);
    } else {
        memcpy(first, (const float *)w + i, sizeof *first);
        memcpy(second, (const float *)w + i + 16, sizeof *second);
    }
}

/* Where a row of W lies against the core's 64-byte lines: a vector read
 * where it lies spans two of them when the row does not start on one,
 * as a checkpoint's tensors do (a safetensors file's data follows a
 * header padded to 8 bytes), and a load across two lines costs the
 * one-output kernel, which waits on nothing else, 5 to 15 % of a
 * decoding step (docs/benchmarks.md). A row off by whole 32-bit words
 * is read instead a line at a time, each line once, and its vectors put
 * together from two of them with one permute: the same values in the
 * same lanes. */
struct lines {
    const char *line0; /* the line the row starts in */
    v16u pick;         /* lane l: word off + l of two lines side by side */
    v16u held;         /* the line read last, the next vector's first */
};

/* The lines of row w, when it is off a line by whole words, ready for
 * its block 32 (the line that block starts in held); false when it is on
 * one (nothing to put together) or off by half a word. */
ALWAYS_INLINE bool lines_of(const void *w, bool bf16, struct lines *ln)
{
    const size_t off = (uintptr_t)w % 64;
    if (off == 0 || off % 4)
        return false;
    ln->line0 = (const char *)w - off;
    for (uint32_t l = 0; l < 16; l++)
        ln->pick[l] = (uint32_t)(off / 4) + l;
    memcpy(&ln->held, ln->line0 + (bf16 ? 2 : 4) * 32, sizeof ln->held);
    return true;
}

/* w32() for block i, which starts in the line held and ends before the
 * row's last block, so that every line read lies within the row. */
ALWAYS_INLINE void w32_by_lines(struct lines *ln, bool bf16, size_t i,
                                v16f *first, v16f *second)
{
    const size_t bytes = bf16 ? 2 * i : 4 * i; /* of block i's start */
    v16u next;
    memcpy(&next, ln->line0 + bytes + 64, sizeof next);
    const v16u a = __builtin_shuffle(ln->held, next, ln->pick);
    if (bf16) {
        ln->held = next;
        *first = (v16f)(a << 16);
        *second = (v16f)(a & 0xffff0000u);
        return;
    }
    v16u after;
    memcpy(&after, ln->line0 + bytes + 128, sizeof after);
    *first = (v16f)a;
    *second = (v16f)__builtin_shuffle(next, after, ln->pick);
    ln->held = after;
}

/* acc[j][r] += x[r] . w[j] over block i (32 values), for outs rows w[j]
 * of W and rows rows of x, each in one sum of sixteen lanes as
 * kernel_body() orders them, fetching ahead as it says.
 * ln: W's one row read by lines (from block 32 on), or NULL. */
ALWAYS_INLINE void block32(const float *x, size_t ldx, const float *xs,
                           size_t ldxs, bool split_x, int rows,
                           const void *const *w, int outs, bool bf16, size_t i,
                           size_t ahead, struct lines *ln, add_fn *add,
                           v16f acc[ROW_OUTS][ROW_XS])
{
    v16f xa[ROW_XS], xb[ROW_XS];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        x32(x, ldx, xs, ldxs, bf16, split_x, r, i, &xa[r], &xb[r]);
#pragma GCC unroll 4
    for (int j = 0; j < outs; j++) {
        const char *next = (const char *)w[j] + ahead;
        if (ahead) {
            __builtin_prefetch(next + (bf16 ? 2 : 4) * i, 0, WIDEN_FETCH_HINT);
            if (!bf16)
                __builtin_prefetch(next + 4 * i + 64, 0, WIDEN_FETCH_HINT);
        }
        v16f wa, wb;
        if (ln)
            w32_by_lines(ln, bf16, i, &wa, &wb);
        else
            w32(w[j], bf16, i, &wa, &wb);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            add(&acc[j][r], &xa[r], &wa);
            add(&acc[j][r], &xb[r], &wb);
        }
    }
}

/* dots[j * rows + r] = x[r] . w[j] over n values for the outs rows w[j]
 * of W and rows rows of x, ldx apart (constants where it is inlined),
 * each in one sum of sixteen lanes. Float32 W: the values by
 * sixteens in order, value k into lane k % 16. Bfloat16 W, whose words
 * hold pairs: in each block of thirty-two values the even ones (value k
 * into lane (k % 32) / 2) and then the odd ones. The rest are the tail.
 * ahead: how far past each value of W it reads the one it fetches
 * meanwhile: the same place in the rows a call after this one reads
 * (each row alone is too short for the prefetchers to find), or, one
 * output a call, widen_one_output_ahead() bytes on; either way into the
 * second cache (WIDEN_FETCH_HINT); 0: nothing to fetch. split_x: a
 * bfloat16 W's rows of x come split in xs (a constant, so that the
 * kernel holds no pointers for the other way).
 * by_lines: one output's row off its lines is read by them (struct
 * lines), its first and last blocks as they lie, so that no line outside
 * the row is read; the AVX-512 build's, whose permute does it in one
 * instruction. add: the build's add_products_*(). */
ALWAYS_INLINE void kernel_body(const float *x, size_t ldx, const float *xs,
                               size_t ldxs, bool split_x, int rows,
                               const void *const *w, int outs, bool bf16,
                               bool by_lines, add_fn *add, size_t n,
                               size_t ahead, float *dots)
{
    v16f acc[ROW_OUTS][ROW_XS];
#pragma GCC unroll 4
    for (int j = 0; j < outs; j++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            acc[j][r] = (v16f){0};
    size_t i = 0;
    struct lines ln;
    if (by_lines && outs == 1 && n >= 96 && lines_of(w[0], bf16, &ln)) {
        const size_t last = n / 32 * 32 - 32; /* the last whole block */
        block32(x, ldx, xs, ldxs, split_x, rows, w, 1, bf16, 0, ahead, NULL,
                add, acc);
        for (i = 32; i < last; i += 32)
            block32(x, ldx, xs, ldxs, split_x, rows, w, 1, bf16, i, ahead, &ln,
                    add, acc);
    }
    for (; i + 32 <= n; i += 32)
        block32(x, ldx, xs, ldxs, split_x, rows, w, outs, bf16, i, ahead, NULL,
                add, acc);
    if (!bf16 && i + 16 <= n) {
#pragma GCC unroll 4
        for (int j = 0; j < outs; j++) {
            v16f wa;
            memcpy(&wa, (const float *)w[j] + i, sizeof wa);
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                v16f xa;
                memcpy(&xa, x + (size_t)r * ldx + i, sizeof xa);
                add(&acc[j][r], &xa, &wa);
            }
        }
        i += 16;
    }
    for (int j = 0; j < outs; j++)
        for (int r = 0; r < rows; r++)
            dots[j * rows + r] =
                finish(&acc[j][r], x + (size_t)r * ldx, w[j], bf16, i, n);
}

/* The rows of x split for a bfloat16 W, once for all its outputs rather
 * than in every kernel call: in each block of thirty-two values, the
 * sixteen even ones and then the sixteen odd ones, ldxs (the whole
 * blocks) apart in xs. Values past the last whole block are read from
 * x. */
ALWAYS_INLINE void split_body(const float *x, size_t ldx, size_t rows,
                              size_t ldxs, float *xs)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < ldxs; i += 32) {
            v16f even, odd;
            split32(x + r * ldx, i, &even, &odd);
            memcpy(xs + r * ldxs + i, &even, sizeof even);
            memcpy(xs + r * ldxs + i + 16, &odd, sizeof odd);
        }
}

typedef void split_fn(const float *x, size_t ldx, size_t rows, size_t ldxs,
                      float *xs);

typedef void kernel_fn(const float *x, size_t ldx, const float *xs, size_t ldxs,
                       const void *const *w, size_t n, size_t ahead,
                       float *dots);

/* What a kernel takes: a float32 W, or a bfloat16 one with x's rows as
 * they lie or split once in xs. */
enum w_kind { W_F32, W_BF16, W_BF16_SPLIT_X, W_KINDS };

/* A build's kernels of one kind: one to four rows against ROW_OUTS
 * outputs, and one or two rows against one output. */
#define KERNEL(isa_attr, isa, kind, bf16, split_x, rows, outs)                 \
    isa_attr static void kernel_##kind##_##rows##x##outs##_##isa(              \
        const float *x, size_t ldx, const float *xs, size_t ldxs,              \
        const void *const *w, size_t n, size_t ahead, float *dots)             \
    {                                                                          \
        kernel_body(x, ldx, xs, ldxs, split_x, rows, w, outs, bf16,            \
                    BY_LINES_##isa, add_products_##isa, n, ahead, dots);       \
    }
#define KERNELS(isa_attr, isa, kind, bf16, split_x)                            \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 1, 4)                           \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 2, 4)                           \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 3, 4)                           \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 4, 4)                           \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 1, 1)                           \
    KERNEL(isa_attr, isa, kind, bf16, split_x, 2, 1)
#define KINDS(isa_attr, isa)                                                   \
    KERNELS(isa_attr, isa, f32, false, false)                                  \
    KERNELS(isa_attr, isa, bf16, true, false)                                  \
    KERNELS(isa_attr, isa, bf16s, true, true)
#define SPLIT(isa_attr, isa)                                                   \
    isa_attr static void split_##isa(const float *x, size_t ldx, size_t rows,  \
                                     size_t ldxs, float *xs)                   \
    {                                                                          \
        split_body(x, ldx, rows, ldxs, xs);                                    \
    }
#define TABLE(kind, isa)                                                       \
    {                                                                          \
        kernel_##kind##_1x4_##isa, kernel_##kind##_2x4_##isa,                  \
            kernel_##kind##_3x4_##isa, kernel_##kind##_4x4_##isa               \
    }
#define TABLE_ONE(kind, isa)                                                   \
    {                                                                          \
        kernel_##kind##_1x1_##isa, kernel_##kind##_2x1_##isa                   \
    }
#define TABLES(T, isa)                                                         \
    {                                                                          \
        [W_F32] = T(f32, isa), [W_BF16] = T(bf16, isa),                        \
        [W_BF16_SPLIT_X] = T(bf16s, isa)                                       \
    }

/* Which builds read a row off its lines by them (kernel_body()). */
#define BY_LINES_plain false
#define BY_LINES_avx2 false
#define BY_LINES_avx512 true

#define PLAIN_ATTR
KINDS(PLAIN_ATTR, plain)
SPLIT(PLAIN_ATTR, plain)
#if HAVE_AVX2_BUILD
KINDS(AVX2_TARGET, avx2)
KINDS(AVX512_TARGET, avx512)
SPLIT(AVX2_TARGET, avx2)
SPLIT(AVX512_TARGET, avx512)
#endif

/* kernels[isa][kind][rows - 1], against ROW_OUTS outputs */
static kernel_fn *const kernels[3][W_KINDS][ROW_XS] = {
    [VEC_ISA_PLAIN] = TABLES(TABLE, plain),
#if HAVE_AVX2_BUILD
    [VEC_ISA_AVX2] = TABLES(TABLE, avx2),
    [VEC_ISA_AVX512] = TABLES(TABLE, avx512),
#endif
};
/* one_output[isa][kind][rows - 1], against one output */
static kernel_fn *const one_output[3][W_KINDS][ONE_OUTPUT_ROWS] = {
    [VEC_ISA_PLAIN] = TABLES(TABLE_ONE, plain),
#if HAVE_AVX2_BUILD
    [VEC_ISA_AVX2] = TABLES(TABLE_ONE, avx2),
    [VEC_ISA_AVX512] = TABLES(TABLE_ONE, avx512),
#endif
};
static split_fn *const splits[3] = {
    [VEC_ISA_PLAIN] = split_plain,
#if HAVE_AVX2_BUILD
    [VEC_ISA_AVX2] = split_avx2,
    [VEC_ISA_AVX512] = split_avx512,
#endif
};
#undef SPLIT
#undef TABLES
#undef TABLE_ONE
#undef TABLE
#undef KINDS
#undef KERNELS
#undef KERNEL

/* y[r][o0 + j] for the kernel's outs outputs (those below out) from
 * dots [outs][rows]. */
static void put(const struct widen_product *p, size_t r0, size_t rows,
                size_t o0, size_t outs, const float *dots, float beta)
{
    for (size_t j = 0; j < outs && o0 + j < p->out; j++)
        for (size_t r = 0; r < rows; r++) {
            float *y = p->y + (r0 + r) * p->ldy + o0 + j;
            const float dot = dots[j * rows + r];
            *y = beta == 0.0f ? dot : beta * *y + dot;
        }
}

/* The rows of x four at a time through outs rows of W from o0 (ROW_OUTS,
 * the last one repeated past out: its sums are made again and not kept;
 * or one, with ONE_OUTPUT_ROWS rows at most). w: where each row's values
 * begin, float32 or bfloat16 as bf16 says; ahead: how far past each
 * value the kernel fetches (kernel_body(); 0: nothing to fetch). Every
 * four rows fetch the next outputs' rows again: fetched by the first four
 * alone, into the first cache as they were then, they left it before
 * their turn (eight sequences' decoding step: 80 -> 70 tokens a second);
 * not measured again since they go to the second. */
static void group_product(enum vec_isa isa, const struct widen_product *p,
                          const float *xs, size_t ldxs, size_t o0,
                          const void *const *w, size_t outs, bool bf16,
                          size_t ahead, float beta)
{
    const enum w_kind kind = !bf16 ? W_F32 : xs ? W_BF16_SPLIT_X : W_BF16;
    float dots[ROW_OUTS * ROW_XS];
    for (size_t r0 = 0; r0 < p->rows; r0 += ROW_XS) {
        const size_t rows = p->rows - r0 < ROW_XS ? p->rows - r0 : ROW_XS;
        kernel_fn *const kernel = outs == 1 ? one_output[isa][kind][rows - 1]
                                            : kernels[isa][kind][rows - 1];
        kernel(p->x + r0 * p->ldx, p->ldx, xs ? xs + r0 * ldxs : NULL, ldxs, w,
               p->in, ahead, dots);
        put(p, r0, rows, o0, outs, dots, beta);
    }
}

/* Row o of W from value v0 of it on, at its stored width. */
static const void *w_at(const struct widen_product *p, size_t o, size_t v0)
{
    return (const char *)p->w + attn_dtype_bytes(p->dtype, o * p->ldw + v0);
}

/* Whole blocks of a quantized W: every row of x the one-row way
 * (quant_product_by_rows()), a tile of outputs at a time. */
static void quant_rows(enum vec_isa isa, const struct widen_product *p,
                       float beta)
{
    const int type = widen_quant_type(p->dtype);
    for (size_t o0 = 0; o0 < p->out; o0 += QUANT_OUT_TILE) {
        const size_t outs =
            p->out - o0 < QUANT_OUT_TILE ? p->out - o0 : QUANT_OUT_TILE;
        const struct quant_product q = {.x = p->x,
                                        .ldx = p->ldx,
                                        .rows = p->rows,
                                        .in = p->in,
                                        .w = w_at(p, o0, p->col0),
                                        .type = (quant_type)type,
                                        .row_bytes =
                                            attn_dtype_bytes(p->dtype, p->ldw),
                                        .out = outs,
                                        .y = p->y + o0,
                                        .ldy = p->ldy};
        quant_product_by_rows(isa, &q, beta);
    }
}

void row_product_isa(enum vec_isa isa, const struct widen_product *p,
                     float beta, float *panel)
{
    if (p->rows == 0 || p->out == 0)
        return;
    const size_t blk = attn_dtype_block(p->dtype);
    if (blk > 1 && p->col0 % blk == 0 && p->in % blk == 0 &&
        (beta == 0.0f || beta == 1.0f)) {
        quant_rows(isa, p, beta);
        return;
    }
    if (p->dtype == ATTN_F32 || p->dtype == ATTN_BF16) {
        const bool bf16 = p->dtype == ATTN_BF16;
        const size_t ldxs = p->in / 32 * 32;
        const float *xs = NULL;
        if (bf16 && panel && ldxs && p->rows <= WIDEN_PANEL_FLOATS / ldxs) {
            splits[isa](p->x, p->ldx, p->rows, ldxs, panel);
            xs = panel;
        }
        const size_t outs = p->rows <= ONE_OUTPUT_ROWS ? 1 : ROW_OUTS;
        const size_t ahead =
            outs == 1
                ? widen_one_output_ahead(attn_dtype_bytes(p->dtype, 1),
                                         attn_dtype_bytes(p->dtype, p->ldw),
                                         p->in * sizeof *p->x)
                : attn_dtype_bytes(p->dtype, outs * p->ldw);
        for (size_t o0 = 0; o0 < p->out; o0 += outs) {
            const void *w[ROW_OUTS];
            for (size_t j = 0; j < outs; j++)
                w[j] = w_at(p, o0 + j < p->out ? o0 + j : p->out - 1, p->col0);
            group_product(isa, p, xs, ldxs, o0, w, outs, bf16, ahead, beta);
        }
        return;
    }
    // an IEEE half's rows, or a quantized slice: the blocks covering the
    // slice widened exactly, ROW_OUTS rows of W at a time, into the panel
    const size_t b0 = p->col0 / blk * blk;
    const size_t width = (p->col0 + p->in + blk - 1) / blk * blk - b0;
    for (size_t o0 = 0; o0 < p->out; o0 += ROW_OUTS) {
        const void *w[ROW_OUTS];
        for (size_t j = 0; j < ROW_OUTS; j++) {
            const size_t o = o0 + j < p->out ? o0 + j : p->out - 1;
            attn_widen(w_at(p, o, b0), p->dtype, width, panel + j * width);
            w[j] = panel + j * width + (p->col0 - b0);
        }
        group_product(isa, p, NULL, 0, o0, w, ROW_OUTS, false, 0, beta);
    }
}

void row_product(const struct widen_product *p, float beta, float *panel)
{
    row_product_isa(vec_isa_best(), p, beta, panel);
}
