/*
 * test_bf16_dots.c - products through bfloat16 weights with bfloat16
 * activations (bf16_dots.h, xf_run.bf16_dots), on a CPU that has the
 * instruction (skipped elsewhere).
 *
 * One row through widen_product() stays exact (a step's row: the
 * kernel is tested on one row directly). Bounds (docs/core.md): against
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
    enum { OUT = 13 };
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
            for (size_t i = 0; i < OUT * in; i++) {
                w[i] = bf16_bits(wf[i]);
                wf[i] = (float)bf16_value(wf[i]);
            }
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
 * the exact pass's, not the same bits; a step after a cache stays exact. */
static void test_decoder_logits(void **state)
{
    (void)state;
    if (!bf16_dots_available())
        skip();
    enum { L = 2, HEADS = 4, D = 16, H = 64, J = 160, V = 40, T = 12 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, D, H, J, 77);
    uint16_t *store = malloc(o.size * sizeof *store), *at = store;
    struct xf_layer half[L];
    for (size_t l = 0; l < L; l++) {
        half[l] = o.layers[l];
        half[l].q_w = test_as_bf16(o.layers[l].q_w, HEADS * D * H, &at);
        half[l].k_w = test_as_bf16(o.layers[l].k_w, 2 * D * H, &at);
        half[l].v_w = test_as_bf16(o.layers[l].v_w, 2 * D * H, &at);
        half[l].o_w = test_as_bf16(o.layers[l].o_w, H * HEADS * D, &at);
        half[l].up_w = test_as_bf16(o.layers[l].up_w, J * H, &at);
        half[l].gate_w = test_as_bf16(o.layers[l].gate_w, J * H, &at);
        half[l].down_w = test_as_bf16(o.layers[l].down_w, H * J, &at);
    }
    o.m.layer = half;
    o.m.lm_head = o.m.word_emb = test_as_bf16(o.m.word_emb, V * H, &at);
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
    // a step after a cache: its one row goes the exact way either way
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
    assert_memory_equal(step_logits[0], step_logits[1], sizeof step_logits[0]);
    free(store);
    test_model_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_product_bounds_and_bits),
        cmocka_unit_test(test_decoder_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
