/*
 * test_stream_product.c - the streamed product (src/stream_product.h):
 * every term in its place, against exact sums; the same bits however a
 * product is cut, and with its rows packed between two products; y not
 * read at beta 0; and which products take it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bf16_dots.h"
#include "stream_product.h"
#include "vecmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does this CPU run the kernel? Without AVX-512 the tests of its results
 * have nothing to test, and say so. */
static bool kernel_here(void)
{
    if (vec_isa_available(VEC_ISA_AVX512))
        return true;
    printf("    (no AVX-512 here: the streamed product is not used)\n");
    return false;
}

/* A bfloat16 whose value is v, which must be one. */
static uint16_t bf16_of(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    assert_int_equal(bits & 0xffff, 0);
    return (uint16_t)(bits >> 16);
}

/* One shape, with its strides: ld* = the width plus pad. */
struct shape {
    size_t rows, in, out, pad;
};

/*
 * Small integers over 8 for x and small integers for W: every product and
 * every partial sum is a float32 exactly, so the product must equal the
 * double sum exactly, whatever its order. A term added twice, dropped or
 * taken from a neighbour's row or column cannot hide.
 */
static void check_exact(struct shape s, attn_dtype dtype, float beta,
                        float *panel)
{
    const size_t ldx = s.in + s.pad, ldw = s.in + 2 * s.pad,
                 ldy = s.out + 3 * s.pad;
    float *x = malloc(s.rows * ldx * sizeof *x);
    float *wf = malloc(s.out * ldw * sizeof *wf);
    uint16_t *wh = malloc(s.out * ldw * sizeof *wh);
    float *y = malloc(s.rows * ldy * sizeof *y);
    assert_non_null(x);
    assert_non_null(wf);
    assert_non_null(wh);
    assert_non_null(y);
    for (size_t i = 0; i < s.rows * ldx; i++)
        x[i] = (float)((int)(i * 7919 % 17) - 8) / 8.0f;
    for (size_t i = 0; i < s.out * ldw; i++) {
        wf[i] = (float)((int)(i * 104729 % 15) - 7);
        wh[i] = bf16_of(wf[i]);
    }
    for (size_t i = 0; i < s.rows * ldy; i++)
        y[i] = beta == 0.0f ? NAN : (float)(i % 5);
    const struct widen_product p = {.x = x,
                                    .ldx = ldx,
                                    .rows = s.rows,
                                    .in = s.in,
                                    .w = dtype == ATTN_BF16 ? (void *)wh : wf,
                                    .dtype = dtype,
                                    .ldw = ldw,
                                    .out = s.out,
                                    .y = y,
                                    .ldy = ldy};
    assert_true(stream_product_can(&p));
    stream_product(&p, beta, panel);
    for (size_t r = 0; r < s.rows; r++) {
        for (size_t o = 0; o < ldy; o++) {
            const size_t at = r * ldy + o;
            double want = beta == 0.0f ? 0.0 : (double)(at % 5);
            if (o >= s.out) { /* the stride's pad is left alone */
                if (beta == 0.0f ? !isnan(y[at]) : y[at] != (float)want)
                    fail_msg("rows %zu in %zu out %zu: pad y[%zu][%zu] "
                             "written",
                             s.rows, s.in, s.out, r, o);
                continue;
            }
            for (size_t k = 0; k < s.in; k++)
                want += (double)x[r * ldx + k] * wf[o * ldw + k];
            if (y[at] != want)
                fail_msg("%s rows %zu in %zu out %zu beta %g: y[%zu][%zu] = "
                         "%.9g, want %.9g",
                         attn_dtype_name(dtype), s.rows, s.in, s.out,
                         (double)beta, r, o, (double)y[at], want);
        }
    }
    free(x);
    free(wf);
    free(wh);
    free(y);
}

/* Rows short of, at and past one vector, a block and two; outputs short
 * of a group and past it; one column, a few, and past a block of columns,
 * which is summed in two parts. */
static void test_exact_sums(void **state)
{
    (void)state;
    if (!kernel_here())
        return;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    static const struct shape shapes[] = {
        {2, 1, 1, 0},
        {2, 7, 5, 1},
        {15, 33, 6, 0},
        {16, 64, 7, 2},
        {17, 300, 13, 1},
        {63, 129, 12, 0},
        {64, 200, 11, 3},
        {65, 31, 19, 1},
        {130, 96, 25, 2},
        /* past a flush of 48 outputs: whole blocks of sixteen and a few */
        {33, 100, 50, 1},
        {20, 64, 97, 2},
        {130, 40, 64, 0},
        {3, STREAM_COLS + 37, 8, 1},
        {40, STREAM_COLS + 3, 49, 1},
        {70, STREAM_COLS + 5, 7, 0},
    };
    static const attn_dtype dtypes[] = {ATTN_F32, ATTN_BF16};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t d = 0; d < 2; d++) {
            check_exact(shapes[i], dtypes[d], 0.0f, panel);
            check_exact(shapes[i], dtypes[d], 1.0f, panel);
        }
    free(panel);
}

/* y over rows [r0, r0 + rows) and outputs [o0, o0 + outs) of the whole
 * product p, as a product of its own. */
static void part(const struct widen_product *p, size_t r0, size_t rows,
                 size_t o0, size_t outs, float *panel)
{
    struct widen_product q = *p;
    q.x = p->x + r0 * p->ldx;
    q.rows = rows;
    q.w = (const float *)p->w + o0 * p->ldw;
    q.out = outs;
    q.y = p->y + r0 * p->ldy + o0;
    stream_product(&q, 0.0f, panel);
}

/* Values with no exact sums: a product cut by rows (as the attention
 * core's units cut it) and by outputs (as the feed-forward's tiles do)
 * gives the bits of the whole, and the whole is within float32's
 * rounding of the double sum. */
static void test_same_bits_however_cut(void **state)
{
    (void)state;
    if (!kernel_here())
        return;
    const size_t rows = 150, in = STREAM_COLS + 300, out = 40;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    float *x = malloc(rows * in * sizeof *x);
    float *w = malloc(out * in * sizeof *w);
    float *whole = malloc(rows * out * sizeof *whole);
    float *cut = malloc(rows * out * sizeof *cut);
    assert_non_null(panel);
    assert_non_null(x);
    assert_non_null(w);
    assert_non_null(whole);
    assert_non_null(cut);
    uint32_t seed = 12345;
    for (size_t i = 0; i < rows * in; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    for (size_t i = 0; i < out * in; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
    }
    struct widen_product p = {.x = x,
                              .ldx = in,
                              .rows = rows,
                              .in = in,
                              .w = w,
                              .dtype = ATTN_F32,
                              .ldw = in,
                              .out = out,
                              .y = whole,
                              .ldy = out};
    stream_product(&p, 0.0f, panel);
    p.y = cut;
    static const size_t row_cuts[] = {0, 2, 17, 64, 100, 150};
    static const size_t out_cuts[] = {0, 5, 6, 23, 40};
    for (size_t a = 0; a + 1 < 6; a++)
        for (size_t b = 0; b + 1 < 5; b++) {
            const size_t r0 = row_cuts[a], o0 = out_cuts[b];
            const size_t nr = row_cuts[a + 1] - r0, no = out_cuts[b + 1] - o0;
            part(&p, r0, nr, o0, no, panel);
        }
    assert_memory_equal(whole, cut, rows * out * sizeof *whole);
    for (size_t r = 0; r < rows; r += 7)
        for (size_t o = 0; o < out; o++) {
            double want = 0.0, size = 0.0;
            for (size_t k = 0; k < in; k++) {
                want += (double)x[r * in + k] * w[o * in + k];
                size += fabs((double)x[r * in + k] * w[o * in + k]);
            }
            // a sum of in terms in float32: each addition rounds by at
            // most half an ulp of the running sum, which stays within size
            if (fabs(whole[r * out + o] - want) > in * 0x1p-24 * size)
                fail_msg("y[%zu][%zu] = %.9g, want %.9g", r, o,
                         (double)whole[r * out + o], want);
        }
    free(panel);
    free(x);
    free(w);
    free(whole);
    free(cut);
}

/* What a finish sees: each output once, and only when its sum is whole. */
struct finished {
    const float *whole; /* the product's bits, without the finish */
    float *y;
    size_t ldy;
    unsigned *times; /* [rows][ldy] */
};

static void count_finish(float *block, size_t ldy, size_t rows, size_t cols,
                         const void *arg)
{
    const struct finished *f = arg;
    assert_int_equal(ldy, f->ldy);
    const size_t at = (size_t)(block - f->y);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const size_t i = at + r * ldy + c;
            assert_true(block[r * ldy + c] == f->whole[i]); /* whole */
            f->times[i]++;
            block[r * ldy + c] = 2.0f * block[r * ldy + c] + 1.0f;
        }
}

/* widen_product()'s finish is done to every output once, after its sum
 * is whole, whichever way the product goes: streamed (two to eight rows
 * by outputs, more by the kernel, W's columns past one block of
 * STREAM_COLS), one row, or a half-precision W widened a panel at a
 * time; beta 1 included. */
static void test_finish_once_when_whole(void **state)
{
    (void)state;
    const struct {
        size_t rows, in, out;
        attn_dtype dtype;
    } cases[] = {
        {70, STREAM_COLS + 40, 53, ATTN_F32},
        {5, 300, 50, ATTN_F32},
        {130, 96, 97, ATTN_BF16},
        {1, 200, 30, ATTN_F32},
        {20, 64, 33, ATTN_F16},
    };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const size_t rows = cases[i].rows, in = cases[i].in, out = cases[i].out,
                     ldy = out + 3;
        float *x = malloc(rows * in * sizeof *x);
        uint16_t *w = malloc(out * in * sizeof(float));
        float *wf = (float *)(void *)w;
        float *whole = malloc(rows * ldy * sizeof *whole);
        float *y = malloc(rows * ldy * sizeof *y);
        unsigned *times = calloc(rows * ldy, sizeof *times);
        for (size_t k = 0; k < rows * in; k++)
            x[k] = (float)((int)(k * 7919 % 61) - 30) / 16.0f;
        for (size_t k = 0; k < out * in; k++) {
            if (cases[i].dtype == ATTN_F32)
                wf[k] = (float)((int)(k * 104729 % 23) - 11) / 8.0f;
            else /* 1/8 steps: the same in bfloat16 and in half */
                w[k] = cases[i].dtype == ATTN_BF16
                           ? (uint16_t)(0x3E00u + k % 7 * 0x80u)
                           : (uint16_t)(0x3000u + k % 7 * 0x400u);
        }
        for (int beta = 0; beta < 2; beta++) {
            for (size_t k = 0; k < rows * ldy; k++)
                whole[k] = y[k] = (float)(k % 5);
            struct widen_product p = {.x = x,
                                      .ldx = in,
                                      .rows = rows,
                                      .in = in,
                                      .w = w,
                                      .dtype = cases[i].dtype,
                                      .ldw = in,
                                      .out = out,
                                      .y = whole,
                                      .ldy = ldy};
            widen_product(&p, (float)beta, panel);
            struct finished f = {whole, y, ldy, times};
            memset(times, 0, rows * ldy * sizeof *times);
            p.y = y;
            p.finish = count_finish;
            p.finish_arg = &f;
            widen_product(&p, (float)beta, panel);
            for (size_t r = 0; r < rows; r++)
                for (size_t o = 0; o < ldy; o++) {
                    const size_t k = r * ldy + o;
                    if (o < out) {
                        assert_int_equal(times[k], 1);
                        assert_true(y[k] == 2.0f * whole[k] + 1.0f);
                    } else { /* the stride's pad: left alone */
                        assert_int_equal(times[k], 0);
                        assert_true(y[k] == (float)(k % 5));
                    }
                }
        }
        free(x), free(w), free(whole), free(y), free(times);
    }
    free(panel);
}

/* A product of two to eight rows goes by outputs, sixteen of W's rows
 * transposed at a time, rather than through the broadcast kernel: its
 * rows are the bits the broadcast kernel gives them among more rows, for
 * float32 and bfloat16 W, with outputs short of and past sixteen and
 * columns past a chunk and a block of STREAM_COLS, ending mid-vector. */
static void test_few_rows_same_bits(void **state)
{
    (void)state;
    if (!kernel_here())
        return;
    enum { ROWS = 20 };
    static const size_t ins[] = {37, 300, STREAM_COLS + 44};
    static const size_t outs[] = {5, 16, 37};
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 3; b++) {
                const size_t in = ins[a], out = outs[b];
                float *x = malloc(ROWS * in * sizeof *x);
                uint16_t *wh = malloc(out * in * sizeof *wh);
                float *wf = malloc(out * in * sizeof *wf);
                float *many = malloc(ROWS * out * sizeof *many);
                float *few = malloc(ROWS * out * sizeof *few);
                assert_non_null(x);
                assert_non_null(wh);
                assert_non_null(wf);
                assert_non_null(many);
                assert_non_null(few);
                uint32_t seed = 777 + (uint32_t)(a * 3 + b);
                for (size_t i = 0; i < ROWS * in; i++) {
                    seed = seed * 1664525u + 1013904223u;
                    x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
                }
                for (size_t i = 0; i < out * in; i++) {
                    seed = seed * 1664525u + 1013904223u;
                    // a bfloat16's value, so that both widths hold it
                    wh[i] = (uint16_t)(0x3e00 | (seed >> 24));
                    const uint32_t bits = (uint32_t)wh[i] << 16;
                    memcpy(&wf[i], &bits, sizeof wf[i]);
                }
                struct widen_product p = {.x = x,
                                          .ldx = in,
                                          .rows = ROWS,
                                          .in = in,
                                          .w = d ? (const void *)wh : wf,
                                          .dtype = d ? ATTN_BF16 : ATTN_F32,
                                          .ldw = in,
                                          .out = out,
                                          .y = many,
                                          .ldy = out};
                stream_product(&p, 0.0f, panel);
                for (size_t rows = 2; rows <= 8; rows++) {
                    p.rows = rows;
                    p.x = x + (ROWS - rows) * in;
                    p.y = few;
                    stream_product(&p, 0.0f, panel);
                    assert_memory_equal(few, many + (ROWS - rows) * out,
                                        rows * out * sizeof *few);
                    // and beta 1 adds a block of columns's sums to what
                    // is there
                    if (in > STREAM_COLS)
                        continue;
                    for (size_t i = 0; i < rows * out; i++)
                        few[i] = 1.0f;
                    stream_product(&p, 1.0f, panel);
                    for (size_t i = 0; i < rows * out; i++)
                        assert_true(few[i] ==
                                    1.0f + many[(ROWS - rows) * out + i]);
                }
                free(x);
                free(wh);
                free(wf);
                free(many);
                free(few);
            }
    free(panel);
}

/* Which products go through it: two rows or more, float32 or bfloat16,
 * on AVX-512; and widen_product() with a panel gives its bits. */
static void test_which_products(void **state)
{
    (void)state;
    const bool here = vec_isa_available(VEC_ISA_AVX512);
    float x[4 * 8] = {0}, w[3 * 8] = {0}, y[4 * 3], z[4 * 3];
    for (size_t i = 0; i < 32; i++)
        x[i] = (float)i / 16.0f - 1.0f;
    for (size_t i = 0; i < 24; i++)
        w[i] = 1.0f / (float)(i + 3);
    struct widen_product p = {.x = x,
                              .ldx = 8,
                              .rows = 4,
                              .in = 8,
                              .w = w,
                              .dtype = ATTN_F32,
                              .ldw = 8,
                              .out = 3,
                              .y = y,
                              .ldy = 3};
    assert_int_equal(stream_product_can(&p), here);
    p.dtype = ATTN_BF16;
    assert_int_equal(stream_product_can(&p), here);
    p.dtype = ATTN_F16;
    assert_false(stream_product_can(&p));
    p.dtype = ATTN_F32;
    p.rows = 1;
    assert_false(stream_product_can(&p));
    p.rows = 4;
    // what widen_product() streams, and so may take packed rows: with a
    // panel, beta 0 or 1, a whole row of W, the rows not each alone, and
    // a bfloat16 W not meeting the CPU's bfloat16 products
    assert_int_equal(widen_product_streams(&p, 0.0f, true), here);
    assert_int_equal(widen_product_streams(&p, 1.0f, true), here);
    assert_false(widen_product_streams(&p, 0.5f, true));
    assert_false(widen_product_streams(&p, 0.0f, false));
    p.alone = true;
    assert_false(widen_product_streams(&p, 0.0f, true));
    p.alone = false;
    p.col0 = 4;
    assert_false(widen_product_streams(&p, 0.0f, true));
    p.col0 = 0;
    p.dtype = ATTN_BF16;
    p.bf16_dots = true;
    assert_int_equal(widen_product_streams(&p, 0.0f, true),
                     here && !bf16_dots_available());
    p.bf16_dots = false;
    p.dtype = ATTN_F32;
    if (!here)
        return;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    widen_product(&p, 0.0f, panel);
    p.y = z;
    stream_product(&p, 0.0f, panel);
    assert_memory_equal(y, z, sizeof y);
    free(panel);
}

/* A finish that is the same whatever way round its block comes. */
static void halve_and_add_one(float *block, size_t ld, size_t rows, size_t cols,
                              const void *arg)
{
    (void)arg;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            block[r * ld + c] = 0.5f * block[r * ld + c] + 1.0f;
}

/* The value of row r, output o of a packed y (blocks block floats
 * apart). */
static float packed_at(const float *y, size_t block, size_t r, size_t o)
{
    return y[r / STREAM_ROWS * block + o * STREAM_ROWS + r % STREAM_ROWS];
}

/* y1 = finish(x W1^T + b1), then y2 += y1 W2^T, once with y1 in rows and
 * once packed (widen.h's y_packed, then x_packed), the first product in
 * the parts the feed-forward's tiles cut it into (whole blocks of rows,
 * columns from a multiple of sixteen): the same bits either way. */
static void check_packed(size_t rows, size_t in, size_t mid, size_t out,
                         attn_dtype dtype, float *panel)
{
    assert_true(rows >= 2 && rows != STREAM_ROWS + 1); /* parts that stream */
    const size_t blocks = (rows + STREAM_ROWS - 1) / STREAM_ROWS,
                 block = STREAM_ROWS * mid;
    float *x = malloc(rows * in * sizeof *x);
    float *w1 = malloc(mid * in * sizeof *w1);
    float *w2 = malloc(out * mid * sizeof *w2);
    uint16_t *h1 = malloc(mid * in * sizeof *h1);
    uint16_t *h2 = malloc(out * mid * sizeof *h2);
    float *b1 = malloc(mid * sizeof *b1);
    float *y1 = malloc(rows * mid * sizeof *y1);
    float *y1p = malloc(blocks * block * sizeof *y1p);
    float *y2 = malloc(rows * out * sizeof *y2);
    float *y2p = malloc(rows * out * sizeof *y2p);
    assert_true(x && w1 && w2 && h1 && h2 && b1 && y1 && y1p && y2 && y2p);
    uint32_t seed = (uint32_t)(rows * 131 + in * 7 + mid * 3 + out);
    for (size_t i = 0; i < rows * in; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    for (size_t i = 0; i < mid * in + out * mid + mid; i++) {
        seed = seed * 1664525u + 1013904223u;
        // bfloat16 values, so that either dtype holds them exactly
        const float v = (float)(int)(seed >> 25) / 64.0f - 1.0f;
        if (i < mid * in)
            h1[i] = bf16_of(w1[i] = v);
        else if (i < mid * in + out * mid)
            h2[i - mid * in] = bf16_of(w2[i - mid * in] = v);
        else
            b1[i - mid * in - out * mid] = v / 4.0f;
    }
    const bool bf16 = dtype == ATTN_BF16;
    for (size_t r = 0; r < rows; r++)
        memcpy(y1 + r * mid, b1, mid * sizeof *b1);
    memset(y1p, 0xff, blocks * block * sizeof *y1p); /* NaN */
    for (size_t i = 0; i < rows * out; i++)
        y2[i] = y2p[i] = (float)(i % 7) - 3.0f;

    // in rows
    struct widen_product p1 = {.x = x,
                               .ldx = in,
                               .rows = rows,
                               .in = in,
                               .w = bf16 ? (const void *)h1 : w1,
                               .dtype = dtype,
                               .ldw = in,
                               .out = mid,
                               .y = y1,
                               .ldy = mid,
                               .finish = halve_and_add_one};
    widen_product(&p1, 1.0f, panel);
    struct widen_product p2 = {.x = y1,
                               .ldx = mid,
                               .rows = rows,
                               .in = mid,
                               .w = bf16 ? (const void *)h2 : w2,
                               .dtype = dtype,
                               .ldw = mid,
                               .out = out,
                               .y = y2,
                               .ldy = out};
    widen_product(&p2, 1.0f, panel);

    // packed, the first product in parts
    const size_t row_cut = rows > STREAM_ROWS ? STREAM_ROWS : rows;
    const size_t col_cut = mid > 16 ? 16 : mid;
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 2; b++) {
            const size_t r0 = a ? row_cut : 0, r1 = a ? rows : row_cut;
            const size_t c0 = b ? col_cut : 0, c1 = b ? mid : col_cut;
            if (r0 == r1 || c0 == c1)
                continue;
            struct widen_product q = p1;
            q.x = x + r0 * in;
            q.rows = r1 - r0;
            q.w = bf16 ? (const void *)(h1 + c0 * in) : w1 + c0 * in;
            q.out = c1 - c0;
            q.y = y1p + r0 / STREAM_ROWS * block + c0 * STREAM_ROWS;
            q.ldy = block;
            q.y_packed = true;
            q.bias = b1 + c0;
            assert_true(widen_product_streams(&q, 0.0f, true));
            widen_product(&q, 0.0f, panel);
        }
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < mid; o++)
            if (memcmp(&y1[r * mid + o], &(float){packed_at(y1p, block, r, o)},
                       sizeof(float)))
                fail_msg("%s rows %zu in %zu mid %zu: packed y1[%zu][%zu] = "
                         "%.9g, in rows %.9g",
                         attn_dtype_name(dtype), rows, in, mid, r, o,
                         (double)packed_at(y1p, block, r, o),
                         (double)y1[r * mid + o]);
    struct widen_product q2 = p2;
    q2.x = y1p;
    q2.ldx = block;
    q2.x_packed = true;
    q2.y = y2p;
    assert_true(widen_product_streams(&q2, 1.0f, true));
    widen_product(&q2, 1.0f, panel);
    for (size_t i = 0; i < rows * out; i++)
        if (memcmp(&y2[i], &y2p[i], sizeof(float)))
            fail_msg("%s rows %zu in %zu mid %zu out %zu: from packed rows "
                     "y2[%zu][%zu] = %.9g, from rows %.9g",
                     attn_dtype_name(dtype), rows, in, mid, out, i / out,
                     i % out, (double)y2p[i], (double)y2[i]);
    free(x);
    free(w1);
    free(w2);
    free(h1);
    free(h2);
    free(b1);
    free(y1);
    free(y1p);
    free(y2);
    free(y2p);
}

/* Packed rows between two products (widen.h's x_packed and y_packed)
 * give the bits of rows laid out one after another: rows in whole
 * blocks, a partial last block the kernel takes (9 rows or more), one
 * of a few rows that goes by outputs (8 or fewer), fewer rows than a
 * block; outputs short of a group, past a flush, cut at sixteen; each
 * product's columns within and past one block of STREAM_COLS. */
static void test_packed_same_bits(void **state)
{
    (void)state;
    if (!kernel_here())
        return;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    static const size_t row_counts[] = {2, 5, 9, 40, 64, 66, 72, 73, 130};
    static const struct {
        size_t in, mid, out;
    } sizes[] = {{33, 7, 5},
                 {300, 50, 48},
                 {24, 97, 13},
                 {STREAM_COLS + 5, 20, 3},
                 {16, STREAM_COLS + 9, 6}};
    static const attn_dtype dtypes[] = {ATTN_F32, ATTN_BF16};
    for (size_t i = 0; i < sizeof row_counts / sizeof *row_counts; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
            for (size_t d = 0; d < 2; d++)
                check_packed(row_counts[i], sizes[j].in, sizes[j].mid,
                             sizes[j].out, dtypes[d], panel);
    free(panel);
}

/* One product with a bias against the same product added to rows that
 * hold the bias (beta 1): the same bits, on every way widen_product()
 * may take, and the bias-given y never read first. */
static void check_bias(size_t rows, size_t in, size_t out, attn_dtype dtype,
                       bool alone, bool dots, float *panel)
{
    const size_t ldy = out + 3;
    float *x = malloc(rows * in * sizeof *x);
    float *wf = malloc(out * in * sizeof *wf);
    uint16_t *wh = malloc(out * in * sizeof *wh);
    float *bias = malloc(out * sizeof *bias);
    float *got = malloc(rows * ldy * sizeof *got);
    float *want = malloc(rows * ldy * sizeof *want);
    assert_true(x && wf && wh && bias && got && want);
    for (size_t i = 0; i < rows * in; i++)
        x[i] = sinf((float)i * 0.37f);
    for (size_t i = 0; i < out * in; i++) {
        wf[i] = cosf((float)i * 0.11f) / 3.0f;
        uint32_t bits;
        memcpy(&bits, &wf[i], sizeof bits);
        // a bfloat16 is a float's upper half; a float16 of sign, an
        // exponent for 2^-5 to 2^2 and any mantissa
        wh[i] = dtype == ATTN_F16
                    ? (uint16_t)((i & 1) << 15 | (10 + i % 8) << 10 |
                                 (i * 37 % 1024))
                    : (uint16_t)(bits >> 16);
    }
    for (size_t o = 0; o < out; o++)
        bias[o] = (float)o * 0.7f - 3.1f;
    for (size_t i = 0; i < rows * ldy; i++)
        got[i] = want[i] = NAN;
    struct widen_product p = {.x = x,
                              .ldx = in,
                              .rows = rows,
                              .in = in,
                              .w = dtype == ATTN_F32 ? (void *)wf : wh,
                              .dtype = dtype,
                              .ldw = in,
                              .out = out,
                              .y = want,
                              .ldy = ldy,
                              .alone = alone,
                              .bf16_dots = dots};
    for (size_t r = 0; r < rows; r++)
        memcpy(want + r * ldy, bias, out * sizeof *bias);
    widen_product(&p, 1.0f, panel);
    p.y = got;
    p.bias = bias;
    widen_product(&p, 0.0f, panel);
    if (memcmp(got, want, rows * ldy * sizeof *got) != 0)
        fail_msg("%s rows %zu in %zu out %zu alone %d dots %d panel %d: the "
                 "bias given is not the bias added to",
                 attn_dtype_name(dtype), rows, in, out, alone, dots,
                 panel != NULL);
    free(x);
    free(wf);
    free(wh);
    free(bias);
    free(got);
    free(want);
}

/* widen.h's bias with beta 0: streamed (its sums set to the bias and the
 * sum, in rows and in the few rows that go by outputs, a row's columns in
 * one block of STREAM_COLS and past it), each row alone, one row, the
 * CPU's bfloat16 products, a float32 W through cblas_sgemm (no panel) and
 * a float16 one widened a panel at a time. */
static void test_bias_same_bits(void **state)
{
    (void)state;
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    static const size_t row_counts[] = {1, 3, 9, 70};
    static const struct {
        size_t in, out;
    } sizes[] = {{40, 37}, {300, 50}, {STREAM_COLS + 5, 19}};
    for (size_t i = 0; i < sizeof row_counts / sizeof *row_counts; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
            const size_t rows = row_counts[i], in = sizes[j].in,
                         out = sizes[j].out;
            check_bias(rows, in, out, ATTN_F32, false, false, panel);
            check_bias(rows, in, out, ATTN_F32, false, false, NULL);
            check_bias(rows, in, out, ATTN_F32, true, false, panel);
            check_bias(rows, in, out, ATTN_BF16, false, false, panel);
            check_bias(rows, in, out, ATTN_BF16, true, false, panel);
            check_bias(rows, in, out, ATTN_BF16, false, true, panel);
            check_bias(rows, in, out, ATTN_F16, false, false, panel);
        }
    free(panel);
}

/* The rows of x packed column by column, every row and column count
 * around the blocks of sixteen (the AVX-512 build transposes sixteen by
 * sixteen in registers): each value where a plain copy puts it, the rows
 * past x's zero. */
static void test_packing(void **state)
{
    (void)state;
    enum { LDX = 70 };
    static float x[40 * LDX], packed[64 * 64], want[64 * 64];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = (float)i + 0.5f;
    for (size_t rows = 1; rows <= 33; rows += 4)
        for (size_t cols = 1; cols <= 40; cols += 3) {
            const size_t width = (rows + 15) / 16 * 16, r0 = 3, k0 = 5;
            memset(packed, 0xff, sizeof packed);
            stream_pack_rows(x, LDX, r0, rows, k0, cols, width, packed);
            for (size_t k = 0; k < cols; k++)
                for (size_t r = 0; r < width; r++)
                    want[k * width + r] =
                        r < rows ? x[(r0 + r) * LDX + k0 + k] : 0.0f;
            assert_memory_equal(packed, want, cols * width * sizeof *want);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_sums),
        cmocka_unit_test(test_same_bits_however_cut),
        cmocka_unit_test(test_few_rows_same_bits),
        cmocka_unit_test(test_finish_once_when_whole),
        cmocka_unit_test(test_which_products),
        cmocka_unit_test(test_packing),
        cmocka_unit_test(test_packed_same_bits),
        cmocka_unit_test(test_bias_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
