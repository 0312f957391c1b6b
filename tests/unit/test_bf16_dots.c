/*
 * test_bf16_dots.c - products through bfloat16 weights with bfloat16
 * activations (bf16_dots.h, xf_run.bf16_dots), on a CPU that has the
 * instruction (skipped elsewhere).
 *
 * Rows that are each their own token (a step's) take their own kernel,
 * held to the same bound and to the same bits alone as beside others.
 * Bounds (docs/core.md): against
 * the float64 product of x rounded to
 * bfloat16, only float32's summation error, (256 + in / 256 + 2) 2^-24
 * sum |x w|; against the float64 product of x as given, 2^-8 sum |x w|
 * more (each x off by at most 2^-9 of itself). A decoder's logits with
 * bf16_dots stay within 1e-2 of the largest logit of the exact pass's
 * (measured: 1.2e-3 on this model), and differ from them: the path is
 * taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bf16_dots.h"
#include "random_model.h"
#include "support.h"
#include "transformer.h"
#include "widen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double bf16_value(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits = (bits + 0x7fffu + (bits >> 16 & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

static uint16_t bf16_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (uint16_t)((bits + 0x7fffu + (bits >> 16 & 1u)) >> 16);
}

/* Weights for a bfloat16 W: w[i] the bfloat16 nearest wf[i], and wf[i]
 * then the value it holds, so that wf is W widened. */
static void to_bf16_weights(float *wf, size_t count, uint16_t *w)
{
    for (size_t i = 0; i < count; i++) {
        w[i] = bf16_bits(wf[i]);
        wf[i] = (float)bf16_value(wf[i]);
    }
}

/* y = x W^T through the bfloat16 products for rows rows of x, in values
 * each, and W the in x in identity: by the kernel for rows each their
 * own token (alone) or by the prompts' kernel. */
static void through_identity(const float *x, size_t rows, const uint16_t *w,
                             size_t in, bool alone, float *y, float *panel)
{
    const struct widen_product p = {.x = x,
                                    .ldx = in,
                                    .rows = rows,
                                    .in = in,
                                    .w = w,
                                    .dtype = ATTN_BF16,
                                    .ldw = in,
                                    .out = in,
                                    .y = y,
                                    .ldy = in,
                                    .alone = alone,
                                    .bf16_dots = true};
    if (alone)
        bf16_dots_rows(&p, 0.0f, panel);
    else
        bf16_dots_product(&p, 0.0f, panel);
}

/* x is rounded to bfloat16 exactly as stated, in both kernels: W's row o
 * holds 1 at column o and 0 elsewhere, so y[r][o] is x[r][o] rounded.
 * Ties go to even, up and down; a carry into the exponent; the largest
 * finite rounding to infinity; subnormals, which round as any value and
 * then count as zero (the instruction reads a subnormal bfloat16 so);
 * signed zeros; a NaN stays one.
 * (An infinity or a NaN is alone in its row, since 0 times it is NaN.) */
static void test_rounding(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    static const uint32_t values[] = {
        0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0xbf808000u,
        0xbf818000u, 0x3fffffffu, 0x00000001u, 0x00008000u, 0x00018000u,
        0x80000000u, 0x00000000u, 0x007fffffu, 0x3f800000u, 0x4049fdb0u,
        0xc2f6e979u, 0x3e99999au, 0x12345678u, 0x3f7fffffu, 0x387fc000u,
        0x33800001u, 0x3f808000u, 0x40008000u, 0x40018000u, 0xc0008000u,
        0x3fc08000u, 0x3fc18000u, 0x3a800000u, 0x3f80c000u, 0x3f814000u};
    enum { IN = sizeof values / sizeof *values, ROWS = 3 };
    uint16_t w[IN * IN];
    for (size_t o = 0; o < IN; o++)
        for (size_t k = 0; k < IN; k++)
            w[o * IN + k] = o == k ? 0x3f80 : 0;
    float x[ROWS * IN], y[ROWS * IN],
        *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t k = 0; k < IN; k++) {
            // each row the values in another order
            const uint32_t bits = values[(k + 7 * r) % IN];
            memcpy(&x[r * IN + k], &bits, sizeof bits);
        }
    for (int alone = 0; alone < 2; alone++) {
        through_identity(x, ROWS, w, IN, alone, y, panel);
        for (size_t i = 0; i < ROWS * IN; i++) {
            // the instruction reads a subnormal bfloat16 as zero
            float want = (float)bf16_value(x[i]);
            if (fabsf(want) < 0x1p-126f)
                want = 0.0f;
            if (y[i] != want)
                fail_msg("%s: x %a gave %a, want %a",
                         alone ? "rows" : "product", (double)x[i], (double)y[i],
                         (double)want);
        }
    }
    // the largest finite floats round to infinities, which stay; a NaN,
    // quiet or signalling, stays a NaN
    static const uint32_t alone_in_row[] = {
        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x7fc00000u, 0x7f800001u, 0xff810000u};
    for (size_t n = 0; n < sizeof alone_in_row / sizeof *alone_in_row; n++) {
        float xn[IN], yn[IN];
        memset(xn, 0, sizeof xn);
        memcpy(&xn[5], &alone_in_row[n], sizeof alone_in_row[n]);
        for (int alone = 0; alone < 2; alone++) {
            through_identity(xn, 1, w, IN, alone, yn, panel);
            const float want = (float)bf16_value(xn[5]);
            assert_true(isnan(xn[5]) ? isnan(yn[5]) : yn[5] == want);
        }
    }
    free(panel);
}

/* Every row of x through W at several sizes (odd columns, more rows than
 * a block, more columns than a block): within both bounds; the same bits
 * however the rows and outputs are cut; beta 1 adds into y. */
static void test_product_bounds_and_bits(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    static const size_t ins[] = {2, 37, 256, 1000, 9000};
    static const size_t rows_of[] = {1, 5, 70};
    /* past one flush of 48 outputs (three whole blocks of sixteen), and
     * a few more */
    enum { OUT = 53 };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    for (size_t a = 0; a < sizeof ins / sizeof *ins; a++)
        for (size_t b = 0; b < sizeof rows_of / sizeof *rows_of; b++) {
            const size_t in = ins[a], rows = rows_of[b];
            float *wf = malloc(OUT * in * sizeof *wf);
            uint16_t *w = malloc(OUT * in * sizeof *w);
            float *x = malloc(rows * in * sizeof *x);
            float *y = malloc(rows * OUT * sizeof *y);
            float *cut = malloc(rows * OUT * sizeof *cut);
            fill_normal(wf, OUT * in, 3 + a, 1.0f);
            fill_normal(x, rows * in, 30 + b, 1.0f);
            to_bf16_weights(wf, OUT * in, w);
            const struct widen_product p = {.x = x,
                                            .ldx = in,
                                            .rows = rows,
                                            .in = in,
                                            .w = w,
                                            .dtype = ATTN_BF16,
                                            .ldw = in,
                                            .out = OUT,
                                            .y = y,
                                            .ldy = OUT,
                                            .bf16_dots = true};
            // through widen_product(), which keeps one row exact
            // (row_product.h); the kernel itself for one row
            if (rows > 1)
                widen_product(&p, 0.0f, panel);
            else
                bf16_dots_product(&p, 0.0f, panel);
            for (size_t r = 0; r < rows; r++)
                for (size_t o = 0; o < OUT; o++) {
                    double rounded = 0, exact = 0, mag = 0;
                    for (size_t k = 0; k < in; k++) {
                        const double wk = wf[o * in + k];
                        rounded += bf16_value(x[r * in + k]) * wk;
                        exact += (double)x[r * in + k] * wk;
                        mag += fabs((double)x[r * in + k] * wk);
                    }
                    const double sum_bound =
                        (256.0 + (double)in / 256 + 2) * ldexp(1.0, -24) * mag;
                    const double got = y[r * OUT + o];
                    if (fabs(got - rounded) > sum_bound ||
                        fabs(got - exact) > sum_bound + ldexp(mag, -8))
                        fail_msg("in %zu, row %zu, out %zu: %.9g; float64 "
                                 "%.9g (x rounded %.9g), sum |x w| %.3g",
                                 in, r, o, got, exact, rounded, mag);
                }
            // row by row and two outputs at a time: the same bits
            for (size_t r = 0; r < rows; r++)
                for (size_t o0 = 0; o0 < OUT; o0 += 2) {
                    struct widen_product one = p;
                    one.x = x + r * in;
                    one.rows = 1;
                    one.w = w + o0 * in;
                    one.out = OUT - o0 < 2 ? OUT - o0 : 2;
                    one.y = cut + r * OUT + o0;
                    // one row alone goes the exact way (row_product.h):
                    // call the kernel itself
                    bf16_dots_product(&one, 0.0f, panel);
                }
            assert_memory_equal(cut, y, rows * OUT * sizeof *y);
            // beta 1 adds
            for (size_t i = 0; i < rows * OUT; i++)
                cut[i] = 1.0f;
            struct widen_product add = p;
            add.y = cut;
            bf16_dots_product(&add, 1.0f, panel);
            for (size_t i = 0; i < rows * OUT; i++)
                assert_true(fabsf(cut[i] - (y[i] + 1.0f)) <=
                            1e-6f * (1.0f + fabsf(y[i])) + 1e-6f);
            free(wf);
            free(w);
            free(x);
            free(y);
            free(cut);
        }
    free(panel);
}

/* A decoder stored as bfloat16, its prompt's logits with bf16_dots: near
 * the exact pass's, not the same bits; a step after a cache takes them
 * too (near the exact step's, not the same bits), and three sequences'
 * steps taken together are each the bits of its step alone. */
static void test_decoder_logits(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    enum { L = 2, HEADS = 4, D = 16, H = 64, J = 160, V = 40, T = 12 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, D, H, J, 77);
    uint16_t *store;
    struct xf_layer *half;
    test_model_bf16(&o, &store, &half);
    uint32_t ids[T];
    for (size_t i = 0; i < T; i++)
        ids[i] = (uint32_t)((i * 7 + 3) % V);
    struct xf_run run = {.ids = ids,
                         .n = T,
                         .want = XF_WANT_LOGITS | XF_WANT_ALL_LOGITS,
                         .layer = XF_ALL_LAYERS};
    struct xf_result exact, fast;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &exact, NULL), ATTN_OK);
    run.bf16_dots = true;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &fast, NULL), ATTN_OK);
    double top = 0, diff = 0;
    for (size_t i = 0; i < T * V; i++) {
        top = fmax(top, fabs(exact.logits[i]));
        diff = fmax(diff, fabs(exact.logits[i] - fast.logits[i]));
    }
    if (diff > 1e-2 * top || diff == 0.0)
        fail_msg("bf16_dots logits %.3g off the exact pass's (largest %.3g)",
                 diff, top);
    xf_result_free(&exact);
    xf_result_free(&fast);
    // a step after a cache, exact and with bfloat16 products
    struct xf_cache c[2];
    float step_logits[2][V];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(xf_cache_init(&o.m, T + 1, &c[k], NULL), ATTN_OK);
        struct xf_run start = {
            .ids = ids, .n = T, .want = XF_WANT_LOGITS, .cache = &c[k]};
        struct xf_result r;
        assert_int_equal(test_xf_forward(&o.m, &start, NULL, &r, NULL),
                         ATTN_OK);
        xf_result_free(&r);
        // the same cache contents for both: the exact prompt
        struct xf_run step = {.ids = ids,
                              .n = 1,
                              .want = XF_WANT_LOGITS,
                              .cache = &c[k],
                              .bf16_dots = k == 1};
        assert_int_equal(test_xf_forward(&o.m, &step, NULL, &r, NULL), ATTN_OK);
        memcpy(step_logits[k], r.logits, sizeof step_logits[k]);
        xf_result_free(&r);
        xf_cache_free(&c[k]);
    }
    double step_top = 0, step_diff = 0;
    for (size_t v = 0; v < V; v++) {
        step_top = fmax(step_top, fabs(step_logits[0][v]));
        step_diff =
            fmax(step_diff, fabs(step_logits[0][v] - step_logits[1][v]));
    }
    if (step_diff > 1e-2 * step_top || step_diff == 0.0)
        fail_msg("a step's bf16_dots logits %.3g off the exact step's "
                 "(largest %.3g)",
                 step_diff, step_top);
    // three sequences of different lengths: together, each its bits alone
    enum { SEQS = 3 };
    struct xf_cache alone[SEQS], both[SEQS];
    float want[SEQS][V];
    uint32_t next[SEQS];
    struct xf_seq seqs[SEQS];
    for (size_t b = 0; b < SEQS; b++) {
        const size_t n = 3 + 4 * b;
        struct xf_cache *caches[2] = {&alone[b], &both[b]};
        for (int k = 0; k < 2; k++) {
            assert_int_equal(xf_cache_init(&o.m, T + 1, caches[k], NULL),
                             ATTN_OK);
            struct xf_run start = {.ids = ids,
                                   .n = n,
                                   .want = XF_WANT_LOGITS,
                                   .cache = caches[k],
                                   .bf16_dots = true};
            struct xf_result r;
            assert_int_equal(test_xf_forward(&o.m, &start, NULL, &r, NULL),
                             ATTN_OK);
            xf_result_free(&r);
        }
        next[b] = ids[n];
        struct xf_run step = {.ids = &next[b],
                              .n = 1,
                              .want = XF_WANT_LOGITS,
                              .cache = &alone[b],
                              .bf16_dots = true};
        struct xf_result r;
        assert_int_equal(test_xf_forward(&o.m, &step, NULL, &r, NULL), ATTN_OK);
        memcpy(want[b], r.logits, sizeof want[b]);
        xf_result_free(&r);
        seqs[b] = (struct xf_seq){.cache = &both[b], .layer = XF_ALL_LAYERS};
    }
    const struct xf_run batch = {.ids = next,
                                 .n = 1,
                                 .want = XF_WANT_LOGITS,
                                 .threads = 2,
                                 .batch = SEQS,
                                 .seqs = seqs,
                                 .bf16_dots = true};
    struct xf_result r;
    assert_int_equal(test_xf_forward(&o.m, &batch, NULL, &r, NULL), ATTN_OK);
    assert_memory_equal(r.logits, want, sizeof want);
    xf_result_free(&r);
    for (size_t b = 0; b < SEQS; b++) {
        xf_cache_free(&alone[b]);
        xf_cache_free(&both[b]);
    }
    free(half);
    free(store);
    test_model_free(&o);
}

/* Rows each their own token through a bfloat16 W with bfloat16 dot
 * products (bf16_dots_rows()): within the bounds of the rows way, and
 * each row the same bits alone as beside others, or beside one other. */
static void test_rows_alone(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    static const size_t ins[] = {1, 31, 32, 33, 100, 2048};
    enum { OUT = 9, ROWS = 7 };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    for (size_t a = 0; a < sizeof ins / sizeof *ins; a++) {
        const size_t in = ins[a];
        float *wf = malloc(OUT * in * sizeof *wf);
        uint16_t *w = malloc(OUT * in * sizeof *w);
        float *x = malloc(ROWS * in * sizeof *x);
        float together[ROWS * OUT], one[OUT];
        fill_normal(wf, OUT * in, 5 + a, 1.0f);
        fill_normal(x, ROWS * in, 50 + a, 1.0f);
        to_bf16_weights(wf, OUT * in, w);
        const struct widen_product all = {.x = x,
                                          .ldx = in,
                                          .rows = ROWS,
                                          .in = in,
                                          .w = w,
                                          .dtype = ATTN_BF16,
                                          .ldw = in,
                                          .out = OUT,
                                          .y = together,
                                          .ldy = OUT,
                                          .alone = true,
                                          .bf16_dots = true};
        widen_product(&all, 0.0f, panel);
        for (size_t r = 0; r < ROWS; r++) {
            struct widen_product p = all;
            p.x = x + r * in;
            p.rows = 1;
            p.alone = false;
            p.y = one;
            widen_product(&p, 0.0f, panel);
            assert_memory_equal(one, together + r * OUT, sizeof one);
            // and two rows at a time (two sequences' step)
            if (r + 2 <= ROWS && r % 2 == 0) {
                float two[2 * OUT];
                struct widen_product pair = all;
                pair.x = x + r * in;
                pair.rows = 2;
                pair.y = two;
                widen_product(&pair, 0.0f, panel);
                assert_memory_equal(two, together + r * OUT, sizeof two);
            }
            for (size_t o = 0; o < OUT; o++) {
                double rounded = 0, mag = 0;
                for (size_t k = 0; k < in; k++) {
                    rounded += bf16_value(x[r * in + k]) * wf[o * in + k];
                    mag += fabs((double)x[r * in + k] * wf[o * in + k]);
                }
                const double bound =
                    ((double)in / 16 + 16) * ldexp(1.0, -24) * mag;
                if (fabs(one[o] - rounded) > bound)
                    fail_msg("in %zu, row %zu, out %zu: %.9g, float64 of "
                             "the rounded rows %.9g",
                             in, r, o, one[o], rounded);
            }
        }
        free(wf);
        free(w);
        free(x);
    }
    free(panel);
}

/* W wherever it lies against the 64-byte lines, as a checkpoint's
 * tensors do (off by whole words or by half words): one row alone and
 * two together give the bits of W on a line. Each copy ends where its
 * allocation does, so that a sanitizer build sees any read past the
 * last row; rows of 100 and 1000 values are not a whole number of lines
 * long, so their rows start at other offsets. */
static void test_rows_any_alignment(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    static const size_t ins[] = {96, 100, 1000, 2080};
    enum { OUT = 5, ROWS = 2, MAX_IN = 2080 };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    static float x[ROWS * MAX_IN];
    fill_normal(x, ROWS * MAX_IN, 71, 1.0f);
    for (size_t a = 0; a < sizeof ins / sizeof *ins; a++) {
        const size_t in = ins[a], bytes = OUT * in * sizeof(uint16_t);
        float *wf = malloc(OUT * in * sizeof *wf);
        uint16_t *w = malloc(bytes);
        fill_normal(wf, OUT * in, 80 + a, 1.0f);
        to_bf16_weights(wf, OUT * in, w);
        float want[ROWS * OUT], got[ROWS * OUT];
        for (size_t off = 0; off < 64; off += sizeof *w) {
            void *block = NULL;
            assert_int_equal(posix_memalign(&block, 64, off + bytes), 0);
            memcpy((char *)block + off, w, bytes);
            struct widen_product p = {.x = x,
                                      .ldx = in,
                                      .rows = 1,
                                      .in = in,
                                      .w = (char *)block + off,
                                      .dtype = ATTN_BF16,
                                      .ldw = in,
                                      .out = OUT,
                                      .ldy = OUT,
                                      .alone = true,
                                      .bf16_dots = true};
            for (size_t r = 0; r < ROWS; r++) {
                p.x = x + r * in;
                p.y = got + r * OUT;
                bf16_dots_rows(&p, 0.0f, panel);
            }
            if (off == 0)
                memcpy(want, got, sizeof want);
            else if (memcmp(got, want, sizeof got))
                fail_msg("in %zu, W %zu bytes off a line: not the bits of "
                         "W on a line",
                         in, off);
            p.x = x;
            p.rows = ROWS;
            p.y = got;
            bf16_dots_rows(&p, 0.0f, panel);
            if (memcmp(got, want, sizeof got))
                fail_msg("in %zu, W %zu bytes off a line, two rows: not "
                         "the bits of W on a line",
                         in, off);
            free(block);
        }
        free(wf);
        free(w);
    }
    free(panel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_product_bounds_and_bits),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_decoder_logits),
        cmocka_unit_test(test_rows_alone),
        cmocka_unit_test(test_rows_any_alignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
