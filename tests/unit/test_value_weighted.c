/*
 * test_value_weighted.c - value-weighted attention (src/value_weighted.h)
 * through attn_forward(), against the definition in double: each key's
 * vector f_h(x_j) formed from the pass's own values and W_O, the sum over
 * heads as a vector rather than by the Gram matrices the core uses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, N = 6, D = 12, H = 4, G = 2, DV = 3 };

/* |got - want| within 1e-5 + 1e-4 |want|: float32 sums of D terms. */
static void near(float got, double want, const char *what, size_t at)
{
    if (!(fabs(got - want) <= 1e-5 + 1e-4 * fabs(want)))
        fail_msg("%s %zu: %.9g, want %.9g", what, at, (double)got, want);
}

/* The definition over r's weights and values: f_h(x_j) = v_j^{g(h)} W_O^h,
 * W_O^h = wo's columns of head h (the identity block without wo). */
static void check(const struct attn_config *c, const struct attn_result *r,
                  const struct attn_result *vw, const float *wo)
{
    const size_t k = r->n_keys, n = r->n_query, h = c->heads;
    const size_t g = c->kv_heads, dv = c->d_v, out = wo ? c->d_out : h * dv;
    double *f = malloc(h * k * out * sizeof *f);
    for (size_t b = 0; b < c->batch; b++) {
        const float *v = r->v + b * k * g * dv;
        for (size_t a = 0; a < h; a++)
            for (size_t j = 0; j < k; j++)
                for (size_t o = 0; o < out; o++) {
                    const float *x = v + j * g * dv + (a / (h / g)) * dv;
                    double sum = 0;
                    for (size_t e = 0; e < dv; e++)
                        sum += (double)x[e] * (wo ? wo[o * h * dv + a * dv + e]
                                                  : (o == a * dv + e));
                    f[(a * k + j) * out + o] = sum;
                }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < k; j++) {
                double total2 = 0;
                for (size_t o = 0; o < out; o++) {
                    double s = 0;
                    for (size_t a = 0; a < h; a++)
                        s += r->weights[((b * h + a) * n + i) * k + j] *
                             f[(a * k + j) * out + o];
                    total2 += s * s;
                }
                near(vw->measures.value_weighted_sum[(b * n + i) * k + j],
                     sqrt(total2), "sum", (b * n + i) * k + j);
                for (size_t a = 0; a < h; a++) {
                    double norm2 = 0;
                    for (size_t o = 0; o < out; o++)
                        norm2 +=
                            f[(a * k + j) * out + o] * f[(a * k + j) * out + o];
                    const size_t at = ((b * h + a) * n + i) * k + j;
                    near(vw->measures.value_weighted[at],
                         r->weights[at] * sqrt(norm2), "per head", at);
                }
            }
    }
    free(f);
}

static void fill(float *a, size_t count, unsigned seed)
{
    for (size_t i = 0; i < count; i++)
        a[i] = (float)((int)((i * 2654435761u + seed) % 97) - 48) / 60.0f;
}

/* Grouped KV heads, biases, appended keys and dropout; then without an
 * output projection. */
static void test_against_definition(void **state)
{
    (void)state;
    static float x[B * N * D], wq[H * DV * D], wk[G * DV * D], wv[G * DV * D],
        wo[D * H * DV], bq[H * DV], bk[G * DV], bv[G * DV], bo[D],
        bias_k[G * DV], bias_v[G * DV];
    fill(x, sizeof x / sizeof *x, 1);
    fill(wq, sizeof wq / sizeof *wq, 2);
    fill(wk, sizeof wk / sizeof *wk, 3);
    fill(wv, sizeof wv / sizeof *wv, 4);
    fill(wo, sizeof wo / sizeof *wo, 5);
    fill(bq, sizeof bq / sizeof *bq, 6);
    fill(bk, sizeof bk / sizeof *bk, 7);
    fill(bv, sizeof bv / sizeof *bv, 8);
    fill(bo, sizeof bo / sizeof *bo, 9);
    fill(bias_k, sizeof bias_k / sizeof *bias_k, 10);
    fill(bias_v, sizeof bias_v / sizeof *bias_v, 11);
    const struct attn_params p = {.wq = wq,
                                  .bq = bq,
                                  .wk = wk,
                                  .bk = bk,
                                  .wv = wv,
                                  .bv = bv,
                                  .wo = wo,
                                  .bo = bo,
                                  .bias_k = bias_k,
                                  .bias_v = bias_v};
    struct attn_config c = {.mode = ATTN_MODE_PROJECTED,
                            .batch = B,
                            .n_query = N,
                            .d_model = D,
                            .heads = H,
                            .kv_heads = G,
                            .d_k = DV,
                            .d_v = DV,
                            .d_out = D,
                            .causal = true,
                            .bias_kv = true,
                            .zero_attn = true,
                            .dropout = 0.2f,
                            .seed = 4,
                            .params = &p,
                            .want = ATTN_WANT_VALUE_WEIGHTED};
    struct attn_result vw, r;
    struct attn_error err;
    assert_int_equal(attn_forward(&c, x, NULL, &vw, &err), ATTN_OK);
    // the weights and values it needed are not returned
    assert_null(vw.weights);
    assert_null(vw.v);
    assert_non_null(vw.measures.value_weighted);
    c.want = ATTN_WANT_WEIGHTS | ATTN_WANT_V;
    assert_int_equal(attn_forward(&c, x, NULL, &r, &err), ATTN_OK);
    assert_int_equal(r.n_keys, N + 2);
    check(&c, &r, &vw, wo);
    // a later key's weight is 0 under the causal mask, and so is its norm
    assert_true(vw.measures.value_weighted[0 * (N + 2) + 1] == 0.0f);
    attn_result_free(&vw);
    attn_result_free(&r);

    // no output projection: each head's value in its own block
    c.no_out_proj = true;
    c.d_out = 0;
    c.want = ATTN_WANT_VALUE_WEIGHTED | ATTN_WANT_WEIGHTS | ATTN_WANT_V;
    c.resolved = false;
    const struct attn_params no_o = {.wq = wq,
                                     .bq = bq,
                                     .wk = wk,
                                     .bk = bk,
                                     .wv = wv,
                                     .bv = bv,
                                     .bias_k = bias_k,
                                     .bias_v = bias_v};
    c.params = &no_o;
    assert_int_equal(attn_forward(&c, x, NULL, &vw, &err), ATTN_OK);
    assert_non_null(vw.weights);
    check(&c, &vw, &vw, NULL);
    attn_result_free(&vw);
}

/* Mode basic has no projections to weigh the values by: refused, naming
 * what the caller asked for. */
static void test_basic_refused(void **state)
{
    (void)state;
    struct attn_config c = {.mode = ATTN_MODE_BASIC,
                            .n_query = 2,
                            .d_model = 4,
                            .want = ATTN_WANT_VALUE_WEIGHTED};
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&c, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_definition),
        cmocka_unit_test(test_basic_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
