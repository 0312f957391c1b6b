/*
 * test_quant_product.c - products through block-quantized weights
 * (src/quant_product.h): every type against a float64 product over
 * quant_widen()'s values, on random blocks with edge scales (zero, signed
 * zero, 65504, subnormal, negative mins), for one row and for panels,
 * within the header's bound; the same bits for an output whether computed
 * alone or among many, and on every run; y not read at beta 0; and each
 * build (plain C, AVX2, AVX-512) to the same bits as the plain one, also
 * on infinite and NaN scales, and each build's decoding of blocks to
 * quant_widen()'s bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "quant_product.h"
#include "widen.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const quant_type types[] = {QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1,
                                   QUANT_Q5_0, QUANT_Q5_1, QUANT_Q4_K,
                                   QUANT_Q5_K, QUANT_Q6_K};
enum { N_TYPES = sizeof types / sizeof types[0] };

static uint64_t rng = 0x243F6A8885A308D3u;

static uint32_t rand_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* A float in [-1, 1). */
static float rand_unit(void)
{
    return (float)(int32_t)(rand_u32() % 65536 - 32768) / 32768.0f;
}

/* Where a block of type keeps its fp16 scale and min (-1: none). */
static void scale_offsets(quant_type type, int *d_off, int *m_off)
{
    *d_off = type == QUANT_Q6_K ? 208 : 0;
    *m_off = type == QUANT_Q4_1 || type == QUANT_Q5_1 || type == QUANT_Q4_K ||
                     type == QUANT_Q5_K
                 ? 2
                 : -1;
}

/* An fp16 scale: an edge one (zero, signed zero, the largest, the least
 * and largest subnormals, the least normal, one) or a random finite one
 * near 2^-7; with wild, also infinities and NaN. Mins are drawn the same
 * way, so they come negative as often as not. */
static uint16_t rand_scale(bool wild)
{
    static const uint16_t edges[] = {0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001,
                                     0x83ff, 0x0400, 0x3c00, 0xbc00};
    static const uint16_t nonfinite[] = {0x7c00, 0xfc00, 0x7e00};
    const uint32_t pick = rand_u32() % 16;
    if (wild && pick == 0)
        return nonfinite[rand_u32() % 3];
    if (pick < 4)
        return edges[rand_u32() % (sizeof edges / sizeof edges[0])];
    /* exponent 5 .. 12 (2^-10 .. 2^-3), either sign */
    return (uint16_t)((rand_u32() & 0x8000) | (5 + rand_u32() % 8) << 10 |
                      (rand_u32() & 0x3ff));
}

/* n blocks of type at b: random bytes, then the scales; one block in
 * eight all zero bytes and one in eight all 0xff but for its scales. */
static void fill_blocks(quant_type type, unsigned char *b, size_t n, bool wild)
{
    const size_t bytes = quant_block_bytes((int)type);
    int d_off, m_off;
    scale_offsets(type, &d_off, &m_off);
    for (size_t i = 0; i < n; i++, b += bytes) {
        const uint32_t kind = rand_u32() % 8;
        for (size_t j = 0; j < bytes; j++)
            b[j] = kind == 0 ? 0 : kind == 1 ? 0xff : (unsigned char)rand_u32();
        if (kind == 0)
            continue;
        const uint16_t d = rand_scale(wild), m = rand_scale(wild);
        b[d_off] = (unsigned char)d;
        b[d_off + 1] = (unsigned char)(d >> 8);
        if (m_off >= 0) {
            b[m_off] = (unsigned char)m;
            b[m_off + 1] = (unsigned char)(m >> 8);
        }
    }
}

/* A product's operands, with strides past their widths, W's rows an odd
 * number of bytes apart (so that blocks are not aligned). */
struct operands {
    quant_type type;
    size_t rows, in, out, ldx, ldy, row_bytes;
    float *x, *y;
    unsigned char *w;
};

static void operands_init(struct operands *o, quant_type type, size_t rows,
                          size_t blocks, size_t out, bool wild)
{
    o->type = type;
    o->rows = rows;
    o->in = blocks * quant_block_values((int)type);
    o->out = out;
    o->ldx = o->in + 3;
    o->ldy = out + 2;
    o->row_bytes = blocks * quant_block_bytes((int)type) + 3;
    o->x = malloc(rows * o->ldx * sizeof *o->x);
    o->y = malloc(rows * o->ldy * sizeof *o->y);
    o->w = malloc(out * o->row_bytes);
    assert_non_null(o->x);
    assert_non_null(o->y);
    assert_non_null(o->w);
    for (size_t i = 0; i < rows * o->ldx; i++)
        o->x[i] = rand_unit();
    for (size_t r = 0; r < out; r++) {
        fill_blocks(type, o->w + r * o->row_bytes, blocks, wild);
        memset(o->w + r * o->row_bytes + o->row_bytes - 3, 0x5a, 3);
    }
}

static void operands_free(struct operands *o)
{
    free(o->x);
    free(o->y);
    free(o->w);
}

/* y before the product: NaN at beta 0 (it must not be read), else a
 * number; the stride's pad is NaN too. */
static void fill_y(struct operands *o, float beta)
{
    for (size_t r = 0; r < o->rows; r++)
        for (size_t j = 0; j < o->ldy; j++)
            o->y[r * o->ldy + j] =
                beta == 0.0f || j >= o->out ? NAN : rand_unit();
}

static struct quant_product product_of(const struct operands *o)
{
    return (struct quant_product){.x = o->x,
                                  .ldx = o->ldx,
                                  .rows = o->rows,
                                  .in = o->in,
                                  .w = o->w,
                                  .type = o->type,
                                  .row_bytes = o->row_bytes,
                                  .out = o->out,
                                  .y = o->y,
                                  .ldy = o->ldy};
}

/*
 * The product against float64 sums over quant_widen()'s values: within
 * a little more than the header's bound, with size = sum |x_k w_k| +
 * |y before|: (in/16 + 8) 2^-24 size for one row (the header's
 * in/64 + 6, with room), (QUANT_CHUNK + in/QUANT_CHUNK + 2) 2^-24 size for
 * several. A weight off by a step, or a term dropped or doubled, is far
 * outside it.
 */
static void check_against_double(quant_type type, size_t rows, size_t blocks,
                                 size_t out, float beta, float *panel)
{
    struct operands o;
    operands_init(&o, type, rows, blocks, out, false);
    fill_y(&o, beta);
    float *before = malloc(rows * o.ldy * sizeof *before);
    float *w = malloc(out * o.in * sizeof *w);
    assert_non_null(before);
    assert_non_null(w);
    memcpy(before, o.y, rows * o.ldy * sizeof *before);
    for (size_t j = 0; j < out; j++)
        quant_widen(o.w + j * o.row_bytes, type, o.in, w + j * o.in);

    const struct quant_product p = product_of(&o);
    quant_product(&p, beta, panel);

    const double steps = rows == 1
                             ? (double)o.in / 16 + 8
                             : QUANT_CHUNK + (double)o.in / QUANT_CHUNK + 2;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < o.ldy; j++) {
            const float got = o.y[r * o.ldy + j];
            if (j >= out) {
                if (!isnan(got))
                    fail_msg("%s rows %zu out %zu: pad y[%zu][%zu] written",
                             quant_type_name((int)type), rows, out, r, j);
                continue;
            }
            const double y0 = beta == 0.0f ? 0.0 : before[r * o.ldy + j];
            double want = y0, size = fabs(y0);
            for (size_t k = 0; k < o.in; k++) {
                const double t = (double)o.x[r * o.ldx + k] * w[j * o.in + k];
                want += t;
                size += fabs(t);
            }
            const double bound = steps * 0x1p-24 * size;
            if (!(fabs(got - want) <= bound))
                fail_msg("%s rows %zu in %zu out %zu beta %g: y[%zu][%zu] = "
                         "%.9g, want %.9g (bound %.3g)",
                         quant_type_name((int)type), rows, o.in, out,
                         (double)beta, r, j, (double)got, want, bound);
        }
    free(before);
    free(w);
    operands_free(&o);
}

static const size_t row_counts[] = {1, 2, 3, 17, 64, 65, 130};
static const size_t block_counts[] = {1, 2, 9};
static const size_t out_counts[] = {1, 5, 6, 7, 13, 100};
#define COUNT(a) (sizeof(a) / sizeof(a)[0])

/* Outputs past one call of the kernels' (64), so that calls are cut. */
enum { DOTS_PAST = 67 };

static void check_type(quant_type type)
{
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    for (size_t a = 0; a < COUNT(row_counts); a++)
        for (size_t b = 0; b < COUNT(block_counts); b++)
            for (size_t c = 0; c < COUNT(out_counts); c++)
                for (int beta = 0; beta <= 1; beta++)
                    check_against_double(type, row_counts[a], block_counts[b],
                                         out_counts[c], (float)beta, panel);
    free(panel);
}

static void test_q8_0(void **state)
{
    (void)state;
    check_type(QUANT_Q8_0);
}

static void test_q4_0(void **state)
{
    (void)state;
    check_type(QUANT_Q4_0);
}

static void test_q4_1(void **state)
{
    (void)state;
    check_type(QUANT_Q4_1);
}

static void test_q5_0(void **state)
{
    (void)state;
    check_type(QUANT_Q5_0);
}

static void test_q5_1(void **state)
{
    (void)state;
    check_type(QUANT_Q5_1);
}

static void test_q4_k(void **state)
{
    (void)state;
    check_type(QUANT_Q4_K);
}

static void test_q5_k(void **state)
{
    (void)state;
    check_type(QUANT_Q5_K);
}

static void test_q6_k(void **state)
{
    (void)state;
    check_type(QUANT_Q6_K);
}

/* Columns past one panel (QUANT_COLS) and one chunk, which are summed in
 * parts: a long row of each K type against float64. */
static void test_long_rows(void **state)
{
    (void)state;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    const quant_type k_types[] = {QUANT_Q4_K, QUANT_Q6_K, QUANT_Q8_0};
    for (size_t t = 0; t < COUNT(k_types); t++) {
        const size_t blocks =
            2 * QUANT_COLS / quant_block_values((int)k_types[t]) + 3;
        check_against_double(k_types[t], 1, blocks, 9, 0.0f, panel);
        check_against_double(k_types[t], 5, blocks, 9, 1.0f, panel);
    }
    free(panel);
}

static bool same_bits(const float *a, const float *b)
{
    return memcmp(a, b, sizeof *a) == 0 || (isnan(*a) && isnan(*b));
}

/*
 * Every output computed once in one call of all of them, then again
 * alone and in calls of uneven runs of outputs: the same bits, as the
 * caller's threads cut a product by outputs. Twice: the same bits on
 * every run.
 */
static void test_split_same_bits(void **state)
{
    (void)state;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    static const size_t rows_of[] = {1, 3, 65};
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t a = 0; a < COUNT(rows_of); a++) {
            struct operands o;
            operands_init(&o, types[t], rows_of[a], 9, 100, false);
            const size_t n = o.rows * o.ldy;
            float *whole = malloc(n * sizeof *whole);
            float *cut = malloc(n * sizeof *cut);
            assert_non_null(whole);
            assert_non_null(cut);
            const struct quant_product p = product_of(&o);
            quant_product(&p, 0.0f, panel);
            memcpy(whole, o.y, n * sizeof *whole);
            for (int run = 0; run < 2; run++) {
                fill_y(&o, 0.0f);
                // alone, then runs of 2, 3, 4 ... outputs
                size_t o0 = 0, len = 1;
                while (o0 < o.out) {
                    struct quant_product q = p;
                    q.out = o.out - o0 < len ? o.out - o0 : len;
                    q.w = o.w + o0 * o.row_bytes;
                    q.y = o.y + o0;
                    quant_product(&q, 0.0f, panel);
                    o0 += q.out;
                    len = run ? len + 1 : 1;
                }
                memcpy(cut, o.y, n * sizeof *cut);
                for (size_t r = 0; r < o.rows; r++)
                    for (size_t j = 0; j < o.out; j++)
                        if (!same_bits(&cut[r * o.ldy + j],
                                       &whole[r * o.ldy + j]))
                            fail_msg("%s rows %zu: y[%zu][%zu] %.9g cut, "
                                     "%.9g whole",
                                     quant_type_name((int)types[t]), o.rows, r,
                                     j, (double)cut[r * o.ldy + j],
                                     (double)whole[r * o.ldy + j]);
            }
            free(whole);
            free(cut);
            operands_free(&o);
        }
    free(panel);
}

/* Each build this CPU runs against the plain one, bit for bit, on every
 * type and on blocks with infinite and NaN scales as well. */
static void test_builds_same_bits(void **state)
{
    (void)state;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    static const size_t rows_of[] = {1, 2, 17, 65};
    static const size_t outs_of[] = {1, 7, 13};
    for (int isa = VEC_ISA_AVX2; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa)) {
            printf("    (build %d not run by this CPU)\n", isa);
            continue;
        }
        for (size_t t = 0; t < N_TYPES; t++)
            for (size_t a = 0; a < COUNT(rows_of); a++)
                for (size_t b = 0; b < COUNT(block_counts); b++)
                    for (size_t c = 0; c < COUNT(outs_of); c++)
                        for (int beta = 0; beta <= 1; beta++) {
                            struct operands o;
                            operands_init(&o, types[t], rows_of[a],
                                          block_counts[b], outs_of[c], true);
                            fill_y(&o, (float)beta);
                            const size_t n = o.rows * o.ldy;
                            float *plain = malloc(n * sizeof *plain);
                            assert_non_null(plain);
                            memcpy(plain, o.y, n * sizeof *plain);
                            struct quant_product p = product_of(&o);
                            quant_product_isa((enum vec_isa)isa, &p,
                                              (float)beta, panel);
                            p.y = plain;
                            quant_product_isa(VEC_ISA_PLAIN, &p, (float)beta,
                                              panel);
                            for (size_t i = 0; i < n; i++)
                                if (!same_bits(&o.y[i], &plain[i]))
                                    fail_msg("%s build %d rows %zu in %zu out "
                                             "%zu beta %d: y[%zu] %.9g, plain "
                                             "%.9g",
                                             quant_type_name((int)types[t]),
                                             isa, o.rows, o.in, o.out, beta, i,
                                             (double)o.y[i], (double)plain[i]);
                            free(plain);
                            operands_free(&o);
                        }
    }
    free(panel);
}

/*
 * quant_product_by_rows(): every row of x, in a call of many rows, has
 * the bits of its product alone (rows 1), in every build, for every type,
 * at beta 0 and 1, for every row count from 2 to past QUANT_BY_ROWS (each
 * way a build takes a group of rows, and its tail), even and odd numbers
 * of blocks, and rows longer than QUANT_ROW_PIECE; y's pad is not
 * written. The short rows have infinite and NaN scales too (a NaN stays
 * a NaN); the longer ones have finite scales only, so that their outputs
 * are numbers whose every bit counts.
 */
static void test_by_rows_as_alone(void **state)
{
    (void)state;
    static const size_t rows_of[] = {
        2, 3, 4, 5, 7, QUANT_BY_ROWS, QUANT_BY_ROWS + 1, 2 * QUANT_BY_ROWS + 3};
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa))
            continue;
        for (size_t t = 0; t < N_TYPES; t++) {
            const size_t long_row =
                QUANT_ROW_PIECE / quant_block_values((int)types[t]) * 2 + 3;
            const size_t blocks_of[] = {1, 2, 4, 9, 10, long_row - 1, long_row};
            for (size_t a = 0; a < COUNT(rows_of); a++)
                for (size_t b = 0; b < COUNT(blocks_of); b++)
                    for (int beta = 0; beta <= 1; beta++) {
                        struct operands o;
                        operands_init(&o, types[t], rows_of[a], blocks_of[b],
                                      DOTS_PAST, blocks_of[b] <= 2);
                        fill_y(&o, (float)beta);
                        const size_t n = o.rows * o.ldy;
                        float *alone = malloc(n * sizeof *alone);
                        assert_non_null(alone);
                        memcpy(alone, o.y, n * sizeof *alone);
                        struct quant_product p = product_of(&o);
                        quant_product_by_rows((enum vec_isa)isa, &p,
                                              (float)beta);
                        for (size_t r = 0; r < o.rows; r++) {
                            struct quant_product q = p;
                            q.x = o.x + r * o.ldx;
                            q.rows = 1;
                            q.y = alone + r * o.ldy;
                            quant_product_isa((enum vec_isa)isa, &q,
                                              (float)beta, NULL);
                        }
                        for (size_t i = 0; i < n; i++)
                            if (!same_bits(&o.y[i], &alone[i]))
                                fail_msg("%s build %d rows %zu in %zu beta "
                                         "%d: y[%zu][%zu] %.9g, alone %.9g",
                                         quant_type_name((int)types[t]), isa,
                                         o.rows, o.in, beta, i / o.ldy,
                                         i % o.ldy, (double)o.y[i],
                                         (double)alone[i]);
                        free(alone);
                        operands_free(&o);
                    }
        }
    }
}

/* Each build's decoding of blocks (what the panels hold for two rows or
 * more) is quant_widen()'s, bit for bit, zeros' signs and all, on every
 * type, on runs of one to nine blocks, also with infinite and NaN
 * scales. */
static void test_decode_is_widen(void **state)
{
    (void)state;
    enum { MAX_BLOCKS = 9, MAX_VALUES = MAX_BLOCKS * 256 };
    static unsigned char blocks[MAX_BLOCKS * 256];
    static float want[MAX_VALUES], got[MAX_VALUES];
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa))
            continue;
        for (size_t t = 0; t < N_TYPES; t++)
            for (size_t n = 1; n <= MAX_BLOCKS; n++)
                for (int round = 0; round < 8; round++) {
                    const size_t count = n * quant_block_values((int)types[t]);
                    fill_blocks(types[t], blocks, n, round % 2);
                    quant_widen(blocks, types[t], count, want);
                    quant_decode((enum vec_isa)isa, types[t], blocks, count,
                                 got);
                    for (size_t i = 0; i < count; i++)
                        if (!same_bits(&got[i], &want[i]))
                            fail_msg("%s build %d, %zu blocks: value %zu "
                                     "%.9g, quant_widen() %.9g",
                                     quant_type_name((int)types[t]), isa, n, i,
                                     (double)got[i], (double)want[i]);
                }
    }
}

/* One row needs no panel (the header lets it be NULL): the same bits as
 * with one; and a product of no columns sets y to 0 at beta 0. */
static void test_one_row_no_panel(void **state)
{
    (void)state;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    for (size_t t = 0; t < N_TYPES; t++) {
        struct operands o;
        operands_init(&o, types[t], 1, 9, 13, false);
        struct quant_product p = product_of(&o);
        float with[13];
        quant_product(&p, 0.0f, panel);
        memcpy(with, o.y, sizeof with);
        fill_y(&o, 0.0f);
        quant_product(&p, 0.0f, NULL);
        assert_memory_equal(with, o.y, sizeof with);
        p.in = 0;
        quant_product(&p, 0.0f, NULL);
        for (size_t j = 0; j < 13; j++)
            assert_true(o.y[j] == 0.0f);
        operands_free(&o);
    }
    free(panel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),
        cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q5_0),
        cmocka_unit_test(test_q5_1),
        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q5_k),
        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_long_rows),
        cmocka_unit_test(test_split_same_bits),
        cmocka_unit_test(test_builds_same_bits),
        cmocka_unit_test(test_decode_is_widen),
        cmocka_unit_test(test_one_row_no_panel),
        cmocka_unit_test(test_by_rows_as_alone),
    };
    return cmocka_run_group_tests_name("quant_product", tests, NULL, NULL);
}
