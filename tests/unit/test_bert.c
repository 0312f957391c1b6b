/*
 * test_bert.c - BERT through the transformer block of transformer.h:
 * LayerNorm and both GELUs
 * against PyTorch's float64 values; the whole encoder against a plain-loop
 * float64 encoder written here, on a model built from arrays; against the
 * goldens of tests/models/ (float64, from tests/models/generate.py); the
 * same bits for every thread count; the layer selection, cancellation and
 * every refusal.
 *
 * Tolerances (float32 against float64): attention weights and rollout
 * within 2e-5 absolute; hidden states within 1e-4 + 1e-4 * |reference|
 * (values are O(1) after LayerNorm, and three layers of float32 products
 * of width <= 128 stay near 1e-5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "transformer.h"
#include "wordpiece.h"
#include "support.h"
#include "vecmath.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4

/* ------------------------------------------------ LayerNorm and GELU */

static void test_gelu_values(void **state)
{
    (void)state;
    const float x[] = {-10, -3, -1, -0.5f, 0, 0.5f, 1, 3, 10};
    // torch.nn.functional.gelu in float64, and with approximate="tanh"
    const double erf_form[] = {
        -0.0, -0.00404969409489031, -0.15865525393145702, -0.15426876936299344,
        0.0,  0.34573123063700656,  0.841344746068543,    2.99595030590511,
        10.0};
    const double tanh_form[] = {
        -0.0, -0.0036373920817729943, -0.1588080093917233, -0.15428599017485606,
        0.0,  0.34571400982514394,    0.8411919906082768,  2.996362607918227,
        10.0};
    enum { N = sizeof x / sizeof x[0] };
    float a[N], b[N];
    memcpy(a, x, sizeof x);
    memcpy(b, x, sizeof x);
    xf_activation(XF_ACT_GELU, a, N);
    xf_activation(XF_ACT_GELU_TANH, b, N);
    assert_true(max_tol_ratio(a, erf_form, N, 1e-7, 1e-6) <= 1.0);
    assert_true(max_tol_ratio(b, tanh_form, N, 1e-7, 1e-6) <= 1.0);
    // the two forms differ by more than the tolerance: neither stands in
    assert_true(fabs(a[1] - b[1]) > 1e-4);
}

/* Both forms on a dense grid of [-20, 20], with values near 0 and the
 * edges of float32, against double-precision formulas that do not cancel
 * on the negative side (erfc for the erf form; x / (1 + exp(-2u)) for
 * the tanh form); every build of the kernel gives the same bits. The
 * bound is bert.h's; the errors are about 1e-6 for x > -3, 2e-6 to -5,
 * and up to 8e-6 further out, where rounding x^2 / 2 in float32 moves
 * exp(-x^2 / 2) by that much (float32's 1 + erf(x / sqrt 2) would have no
 * correct digit there). */
static void test_gelu_dense(void **state)
{
    (void)state;
    enum { N = 2561 + 8 };
    static float x[N], got[N], other[N];
    for (int i = 0; i < 2561; i++)
        x[i] = -20.0f + (float)i / 64.0f;
    const float edges[] = {1e-30f, -1e-30f, 1e-7f,  -1e-7f,
                           3e38f,  -3e38f,  -40.0f, -1e4f};
    memcpy(x + 2561, edges, sizeof edges);
    for (int act = XF_ACT_GELU; act <= XF_ACT_GELU_TANH; act++) {
        memcpy(got, x, sizeof x);
        xf_activation((xf_act)act, got, N);
        double worst = 0.0;
        for (int i = 0; i < N; i++) {
            const double v = x[i];
            const double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
            const double want = act == XF_ACT_GELU
                                    ? 0.5 * v * erfc(-v / sqrt(2.0))
                                    : v / (1.0 + exp(-2.0 * u));
            const double err =
                fabs(got[i] - want) / (1e-5 * fabs(want) + 1e-20);
            worst = err > worst ? err : worst;
        }
        assert_true(worst <= 1.0);
        for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
            if (!vec_isa_available(isa))
                continue;
            memcpy(other, x, sizeof x);
            xf_activation_isa(isa, (xf_act)act, other, N);
            assert_memory_equal(other, got, sizeof got);
        }
    }
}

/* An activation over rows (xf_activation_rows(), a product's blocks of
 * outputs): each row the bits xf_activation() gives it alone, on every
 * build, whether the rows go several at a time (rows narrower than a
 * group of vectors) or each by itself, with the columns past a row's
 * end (ld > cols) untouched. */
static void test_activation_rows(void **state)
{
    (void)state;
    const struct {
        size_t rows, cols, ld;
    } shapes[] = {{7, 48, 53},  {64, 48, 3088}, {5, 17, 20},
                  {9, 3, 3},    {4, 64, 64},    {3, 100, 130},
                  {8, 40, 40},  {13, 33, 35},   {1, 2569, 2569},
                  {48, 64, 64}, {17, 200, 203}, {16, 127, 128}};
    enum { MOST = 64 * 3088 };
    float *x = malloc(MOST * sizeof *x), *got = malloc(MOST * sizeof *x),
          *want = malloc(MOST * sizeof *x);
    assert_non_null(x);
    assert_non_null(got);
    assert_non_null(want);
    for (size_t i = 0; i < MOST; i++)
        x[i] = -20.0f + (float)(i % 2561) / 64.0f;
    for (int act = XF_ACT_GELU; act <= XF_ACT_SILU; act++)
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            const size_t rows = shapes[k].rows, cols = shapes[k].cols,
                         ld = shapes[k].ld, count = rows * ld;
            memcpy(want, x, count * sizeof *x);
            for (size_t r = 0; r < rows; r++)
                xf_activation((xf_act)act, want + r * ld, cols);
            for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
                if (!vec_isa_available(isa))
                    continue;
                memcpy(got, x, count * sizeof *x);
                xf_activation_rows_isa(isa, (xf_act)act, got, ld, rows, cols);
                assert_memory_equal(got, want, count * sizeof *x);
            }
            memcpy(got, x, count * sizeof *x);
            xf_activation_rows((xf_act)act, got, ld, rows, cols);
            assert_memory_equal(got, want, count * sizeof *x);
        }
    free(x);
    free(got);
    free(want);
}

static void test_layer_norm_values(void **state)
{
    (void)state;
    const float x[] = {1, 2, 3, 4, 0.001f, 0.002f, 0, -0.001f};
    const float w[] = {1, 0.5f, 2, -1}, b[] = {0, 0.1f, -0.2f, 0.3f};
    // torch.nn.functional.layer_norm in float64, eps 1e-12 and 1e-5
    const double tiny_eps[] = {-1.341640786499337,  -0.12360679774988945,
                               0.6944271909995583,  -1.0416407864993371,
                               0.447213416614627,   0.7708201249219405,
                               -1.0944268332292542, 1.6416402498438811};
    const double eps_1e5[] = {-1.341635419968927,  -0.12360590332815455,
                              0.6944236133126178,  -1.0416354199689268,
                              0.14907119849998599, 0.32360679774997897,
                              -0.4981423969999719, 0.7472135954999579};
    float y[8];
    xf_layer_norm(x, 2, 4, w, b, 1e-12f, y);
    assert_true(max_tol_ratio(y, tiny_eps, 8, 1e-6, 1e-5) <= 1.0);
    xf_layer_norm(x, 2, 4, w, b, 1e-5f, y);
    assert_true(max_tol_ratio(y, eps_1e5, 8, 1e-6, 1e-5) <= 1.0);
    // in place, and a constant row gives the bias
    float z[4] = {7, 7, 7, 7};
    xf_layer_norm(z, 1, 4, w, b, 1e-12f, z);
    for (int c = 0; c < 4; c++)
        assert_true(fabsf(z[c] - b[c]) < 1e-6f);
}

/* ------------------------------------------- a model built from arrays */

struct owned_model {
    struct xf_model m;
    struct xf_layer *layers;
    float *block; /* every tensor */
};

static float *take(float **at, size_t count)
{
    float *p = *at;
    *at += count;
    return p;
}

/* A random model: weights ~ N(0, scale / sqrt(fan_in)), LayerNorm weights
 * near 1, biases small. */
static void model_random(struct owned_model *o, size_t layers, size_t heads,
                         size_t hidden, size_t inter, size_t vocab,
                         size_t positions, size_t types, xf_act act,
                         uint64_t seed)
{
    const size_t H = hidden, J = inter;
    const size_t per_layer = 4 * H * H + 4 * H + 4 * H + J * H + J + H * J + H;
    const size_t total =
        (vocab + positions + types + 2) * H + layers * per_layer;
    o->block = malloc(total * sizeof(float));
    o->layers = calloc(layers, sizeof *o->layers);
    assert_non_null(o->block);
    assert_non_null(o->layers);
    fill_normal(o->block, total, seed, 1.0f);
    float *at = o->block;
    struct xf_model *m = &o->m;
    *m = (struct xf_model){.layers = layers,
                           .heads = heads,
                           .hidden = H,
                           .intermediate = J,
                           .vocab_size = vocab,
                           .max_positions = positions,
                           .type_vocab_size = types,
                           .kv_heads = heads,
                           .head_dim = H / heads,
                           .norm_eps = 1e-12f,
                           .arch = test_bert_arch(act),
                           .layer = o->layers};
    m->word_emb = test_f32(take(&at, vocab * H));
    m->pos_emb = test_f32(take(&at, positions * H));
    m->type_emb = test_f32(take(&at, types * H));
    float *lw = take(&at, H), *lb = take(&at, H);
    for (size_t c = 0; c < H; c++) {
        lw[c] = 1.0f + 0.1f * lw[c];
        lb[c] *= 0.1f;
    }
    m->embed_norm_w = lw;
    m->embed_norm_b = lb;
    for (size_t l = 0; l < layers; l++) {
        struct xf_layer *y = &o->layers[l];
        float *w[] = {take(&at, H * H), take(&at, H * H), take(&at, H * H),
                      take(&at, H * H)};
        float *bq = take(&at, H), *bk = take(&at, H), *bv = take(&at, H),
              *bo = take(&at, H);
        const float sh = 1.0f / sqrtf((float)H);
        for (size_t e = 0; e < H * H; e++) {
            w[0][e] *= 1.5f * sh;
            w[1][e] *= 1.5f * sh;
            w[2][e] *= sh;
            w[3][e] *= sh;
        }
        for (size_t c = 0; c < H; c++) {
            bq[c] *= 0.2f;
            bk[c] *= 0.2f;
            bv[c] *= 0.1f;
            bo[c] *= 0.1f;
        }
        float *ln[4];
        for (int i = 0; i < 4; i++)
            ln[i] = take(&at, H);
        for (size_t c = 0; c < H; c++) {
            ln[0][c] = 1.0f + 0.1f * ln[0][c];
            ln[1][c] *= 0.1f;
            ln[2][c] = 1.0f + 0.1f * ln[2][c];
            ln[3][c] *= 0.1f;
        }
        float *in_w = take(&at, J * H), *in_b = take(&at, J);
        float *out_w = take(&at, H * J), *out_b = take(&at, H);
        for (size_t e = 0; e < J * H; e++) {
            in_w[e] *= sh;
            out_w[e] /= sqrtf((float)J);
        }
        for (size_t c = 0; c < J; c++)
            in_b[c] *= 0.1f;
        for (size_t c = 0; c < H; c++)
            out_b[c] *= 0.1f;
        *y = (struct xf_layer){.q_w = test_f32(w[0]),
                               .q_b = bq,
                               .k_w = test_f32(w[1]),
                               .k_b = bk,
                               .v_w = test_f32(w[2]),
                               .v_b = bv,
                               .o_w = test_f32(w[3]),
                               .o_b = bo,
                               .attn_norm_w = ln[0],
                               .attn_norm_b = ln[1],
                               .up_w = test_f32(in_w),
                               .up_b = in_b,
                               .down_w = test_f32(out_w),
                               .down_b = out_b,
                               .ffn_norm_w = ln[2],
                               .ffn_norm_b = ln[3]};
    }
    assert_true(at == o->block + total);
}

static void model_free(struct owned_model *o)
{
    free(o->block);
    free(o->layers);
}

/* ------------------------------------------- a plain float64 encoder */

static void ref_ln(double *x, size_t rows, size_t cols, const float *w,
                   const float *b, double eps)
{
    for (size_t r = 0; r < rows; r++) {
        double *v = x + r * cols, mean = 0, var = 0;
        for (size_t c = 0; c < cols; c++)
            mean += v[c];
        mean /= (double)cols;
        for (size_t c = 0; c < cols; c++)
            var += (v[c] - mean) * (v[c] - mean);
        var /= (double)cols;
        for (size_t c = 0; c < cols; c++)
            v[c] = (v[c] - mean) / sqrt(var + eps) * w[c] + b[c];
    }
}

static void ref_lin(const double *x, size_t rows, size_t in, const float *w,
                    const float *b, size_t out, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double acc = b[o];
            for (size_t i = 0; i < in; i++)
                acc += x[r * in + i] * (double)w[o * in + i];
            y[r * out + o] = acc;
        }
}

/* weights [L][h][n][n], hidden [L+1][n][H], rollout [n][n] */
static void ref_encoder(const struct xf_model *m, const uint32_t *ids,
                        const uint8_t *types, size_t n, double *weights,
                        double *hidden, double *roll)
{
    const size_t H = m->hidden, J = m->intermediate, h = m->heads, d = H / h;
    double *q = calloc(n * H, 8), *k = calloc(n * H, 8), *v = calloc(n * H, 8);
    double *ctx = calloc(n * H, 8), *x1 = calloc(n * H, 8),
           *in = calloc(n * J, 8), *ahat = calloc(n * n, 8),
           *tmp = calloc(n * n, 8);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < H; c++)
            hidden[i * H + c] =
                (double)test_values(m->word_emb)[ids[i] * H + c] +
                test_values(m->pos_emb)[i * H + c] +
                test_values(m->type_emb)[types[i] * H + c];
    ref_ln(hidden, n, H, m->embed_norm_w, m->embed_norm_b, m->norm_eps);
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &m->layer[l];
        const double *x = hidden + l * n * H;
        double *next = hidden + (l + 1) * n * H;
        ref_lin(x, n, H, test_values(y->q_w), y->q_b, H, q);
        ref_lin(x, n, H, test_values(y->k_w), y->k_b, H, k);
        ref_lin(x, n, H, test_values(y->v_w), y->v_b, H, v);
        for (size_t a = 0; a < h; a++)
            for (size_t i = 0; i < n; i++) {
                double *row = weights + ((l * h + a) * n + i) * n, mx = -1e300,
                       sum = 0;
                for (size_t j = 0; j < n; j++) {
                    double s = 0;
                    for (size_t c = 0; c < d; c++)
                        s += q[i * H + a * d + c] * k[j * H + a * d + c];
                    row[j] = s / sqrt((double)d);
                    mx = row[j] > mx ? row[j] : mx;
                }
                for (size_t j = 0; j < n; j++)
                    sum += row[j] = exp(row[j] - mx);
                for (size_t j = 0; j < n; j++)
                    row[j] /= sum;
                for (size_t c = 0; c < d; c++) {
                    double acc = 0;
                    for (size_t j = 0; j < n; j++)
                        acc += row[j] * v[j * H + a * d + c];
                    ctx[i * H + a * d + c] = acc;
                }
            }
        ref_lin(ctx, n, H, test_values(y->o_w), y->o_b, H, x1);
        for (size_t e = 0; e < n * H; e++)
            x1[e] += x[e];
        ref_ln(x1, n, H, y->attn_norm_w, y->attn_norm_b, m->norm_eps);
        ref_lin(x1, n, H, test_values(y->up_w), y->up_b, J, in);
        for (size_t e = 0; e < n * J; e++)
            in[e] = m->arch.act == XF_ACT_GELU
                        ? 0.5 * in[e] * (1 + erf(in[e] / sqrt(2.0)))
                        : 0.5 * in[e] *
                              (1 + tanh(0.7978845608028654 * /* sqrt(2/pi) */
                                        (in[e] + 0.044715 * pow(in[e], 3))));
        ref_lin(in, n, J, test_values(y->down_w), y->down_b, H, next);
        for (size_t e = 0; e < n * H; e++)
            next[e] += x1[e];
        ref_ln(next, n, H, y->ffn_norm_w, y->ffn_norm_b, m->norm_eps);
        // rollout: ahat = rows-normalised 0.5 mean + 0.5 I; roll = ahat roll
        for (size_t i = 0; i < n; i++) {
            double sum = 0;
            for (size_t j = 0; j < n; j++) {
                double mean = 0;
                for (size_t a = 0; a < h; a++)
                    mean += weights[((l * h + a) * n + i) * n + j];
                ahat[i * n + j] = 0.5 * mean / (double)h + (i == j ? 0.5 : 0);
                sum += ahat[i * n + j];
            }
            for (size_t j = 0; j < n; j++)
                ahat[i * n + j] /= sum;
        }
        if (l == 0) {
            memcpy(roll, ahat, n * n * 8);
        } else {
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                    double acc = 0;
                    for (size_t t = 0; t < n; t++)
                        acc += ahat[i * n + t] * roll[t * n + j];
                    tmp[i * n + j] = acc;
                }
            memcpy(roll, tmp, n * n * 8);
        }
    }
    free(q);
    free(k);
    free(v);
    free(ctx);
    free(x1);
    free(in);
    free(ahat);
    free(tmp);
}

static const unsigned WANT_ALL =
    XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_ROLLOUT;

static void run_ok(const struct xf_model *m, const struct xf_run *run,
                   struct xf_result *out)
{
    struct attn_error err = {0};
    const attn_status st = test_xf_forward(m, run, NULL, out, &err);
    if (st)
        fail_msg("xf_forward: %s: %s", attn_status_name(st), err.message);
}

static void check_against_ref(xf_act act, size_t n)
{
    struct owned_model o;
    model_random(&o, 3, 4, 24, 40, 50, 72, 2, act, 7 + n);
    uint32_t ids[72];
    uint8_t types[72];
    for (size_t i = 0; i < n; i++) {
        ids[i] = (uint32_t)((i * 17 + 3) % 50);
        types[i] = i >= n / 2;
    }
    const struct xf_model *m = &o.m;
    const size_t L = m->layers, h = m->heads, H = m->hidden;
    double *w = calloc(L * h * n * n, 8), *hs = calloc((L + 1) * n * H, 8),
           *roll = calloc(n * n, 8);
    ref_encoder(m, ids, types, n, w, hs, roll);
    struct xf_run run = {.ids = ids,
                         .type_ids = types,
                         .n = n,
                         .want = WANT_ALL,
                         .layer = XF_ALL_LAYERS};
    struct xf_result r;
    run_ok(m, &run, &r);
    assert_int_equal(r.layers, L);
    assert_int_equal(r.weight_layers, L);
    assert_true(max_abs_diff(r.weights, w, L * h * n * n) <= WEIGHT_TOL);
    assert_true(max_tol_ratio(r.hidden_states, hs, (L + 1) * n * H, HIDDEN_ATOL,
                              HIDDEN_RTOL) <= 1.0);
    assert_true(max_abs_diff(r.rollout, roll, n * n) <= WEIGHT_TOL);
    // mean weights are the mean over heads of the weights
    for (size_t l = 0; l < L; l++)
        for (size_t e = 0; e < n * n; e++) {
            double mean = 0;
            for (size_t a = 0; a < h; a++)
                mean += w[(l * h + a) * n * n + e];
            assert_true(fabs(r.mean_weights[l * n * n + e] - mean / h) <=
                        WEIGHT_TOL);
        }
    // the attention is far from uniform, so the check has teeth
    double most = 0;
    for (size_t e = 0; e < L * h * n * n; e++)
        most = w[e] > most ? w[e] : most;
    if (n >= 4)
        assert_true(most > 3.0 / (double)n);
    xf_result_free(&r);
    assert_null(r.weights);
    free(w);
    free(hs);
    free(roll);
    model_free(&o);
}

static void test_encoder_matches_reference_gelu(void **state)
{
    (void)state;
    check_against_ref(XF_ACT_GELU, 9);
    check_against_ref(XF_ACT_GELU, 70); /* several row blocks */
}

static void test_encoder_matches_reference_gelu_tanh(void **state)
{
    (void)state;
    check_against_ref(XF_ACT_GELU_TANH, 1);
    check_against_ref(XF_ACT_GELU_TANH, 33);
}

static void test_same_bits_every_thread_count(void **state)
{
    (void)state;
    struct owned_model o;
    model_random(&o, 2, 4, 32, 48, 40, 160, 2, XF_ACT_GELU, 99);
    enum { N = 150 };
    uint32_t ids[N];
    for (size_t i = 0; i < N; i++)
        ids[i] = (uint32_t)(i * 7 % 40);
    struct xf_run run = {.ids = ids,
                         .n = N,
                         .want = WANT_ALL,
                         .layer = XF_ALL_LAYERS,
                         .threads = 1};
    struct xf_result one;
    run_ok(&o.m, &run, &one);
    const unsigned counts[] = {2, 3, 8, 64};
    for (size_t t = 0; t < 4; t++) {
        run.threads = counts[t];
        struct xf_result r;
        run_ok(&o.m, &run, &r);
        const size_t L = 2, h = 4, H = 32;
        assert_memory_equal(r.weights, one.weights, L * h * N * N * 4);
        assert_memory_equal(r.mean_weights, one.mean_weights, L * N * N * 4);
        assert_memory_equal(r.hidden_states, one.hidden_states,
                            (L + 1) * N * H * 4);
        assert_memory_equal(r.rollout, one.rollout, N * N * 4);
        xf_result_free(&r);
    }
    // what is returned does not change the bits of the rest
    run.threads = 2;
    run.want = XF_WANT_HIDDEN;
    struct xf_result hidden_only;
    run_ok(&o.m, &run, &hidden_only);
    assert_null(hidden_only.weights);
    assert_null(hidden_only.rollout);
    assert_memory_equal(hidden_only.hidden_states, one.hidden_states,
                        3 * N * 32 * 4);
    xf_result_free(&hidden_only);
    xf_result_free(&one);
    model_free(&o);
}

static void test_one_layer(void **state)
{
    (void)state;
    struct owned_model o;
    model_random(&o, 3, 2, 16, 24, 30, 20, 2, XF_ACT_GELU, 5);
    const uint32_t ids[] = {1, 5, 9, 2, 7};
    struct xf_run run = {.ids = ids,
                         .n = 5,
                         .want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS,
                         .layer = XF_ALL_LAYERS};
    struct xf_result all, one;
    run_ok(&o.m, &run, &all);
    run.layer = 2;
    run_ok(&o.m, &run, &one);
    assert_int_equal(one.weight_layers, 1);
    assert_memory_equal(one.weights, all.weights + 2 * 2 * 25, 2 * 25 * 4);
    assert_memory_equal(one.mean_weights, all.mean_weights + 2 * 25, 25 * 4);
    // fewer bytes for one layer's weights than for all of them
    struct xf_run all_run = run;
    all_run.layer = XF_ALL_LAYERS;
    assert_true(test_xf_bytes(&o.m, &run) < test_xf_bytes(&o.m, &all_run));
    // layer 0 alone: the layers above it are not run
    run.layer = 0;
    assert_true(test_xf_flops(&o.m, &run) < test_xf_flops(&o.m, &all_run) / 2);
    struct xf_result first;
    run_ok(&o.m, &run, &first);
    assert_memory_equal(first.weights, all.weights, 2 * 25 * 4);
    xf_result_free(&first);
    // want 0 means the weights
    run.want = 0;
    struct xf_result dflt;
    run_ok(&o.m, &run, &dflt);
    assert_non_null(dflt.weights);
    assert_null(dflt.hidden_states);
    xf_result_free(&dflt);
    xf_result_free(&one);
    xf_result_free(&all);
    model_free(&o);
}

static void test_cancel(void **state)
{
    (void)state;
    struct owned_model o;
    model_random(&o, 2, 2, 16, 24, 30, 20, 2, XF_ACT_GELU, 6);
    const uint32_t ids[] = {1, 2, 3};
    atomic_bool flag = true;
    struct xf_run run = {
        .ids = ids, .n = 3, .want = WANT_ALL, .layer = XF_ALL_LAYERS};
    struct xf_result r;
    struct attn_error err;
    assert_int_equal(test_xf_forward(&o.m, &run, &flag, &r, &err),
                     ATTN_E_CANCELLED);
    assert_null(r.weights);
    assert_null(r.hidden_states);
    model_free(&o);
}

static void expect_refusal(const struct xf_model *m, const struct xf_run *run,
                           attn_status want, const char *field,
                           const char *fragment)
{
    struct xf_result r;
    struct attn_error err = {0};
    assert_int_equal(test_xf_forward(m, run, NULL, &r, &err), want);
    assert_string_equal(err.field, field);
    if (!strstr(err.message, fragment))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, fragment);
    assert_null(r.weights);
}

static void test_refusals(void **state)
{
    (void)state;
    struct owned_model o;
    model_random(&o, 2, 2, 16, 24, 30, 6, 2, XF_ACT_GELU, 8);
    uint32_t ids[] = {1, 2, 3, 4, 5, 6, 7};
    uint8_t types[] = {0, 0, 1, 2, 0, 0, 0};
    struct xf_run run = {.ids = ids, .n = 7, .layer = XF_ALL_LAYERS};
    expect_refusal(&o.m, &run, ATTN_E_TOO_BIG, "ids", "the 6 the model");
    run.n = 0;
    expect_refusal(&o.m, &run, ATTN_E_INVALID, "ids", "no tokens");
    run.n = 4;
    ids[1] = 30;
    expect_refusal(&o.m, &run, ATTN_E_INVALID, "ids", "ids[1] (30)");
    ids[1] = 2;
    run.type_ids = types;
    expect_refusal(&o.m, &run, ATTN_E_INVALID, "type_ids", "type_ids[3] (2)");
    run.type_ids = NULL;
    run.layer = 2;
    expect_refusal(&o.m, &run, ATTN_E_INVALID, "layer", "layer (2)");
    run.layer = XF_ALL_LAYERS;

    struct xf_model bad = o.m;
    bad.heads = 3;
    expect_refusal(&bad, &run, ATTN_E_INVALID, "heads", "heads (3)");
    bad = o.m;
    bad.norm_eps = 0.0f;
    expect_refusal(&bad, &run, ATTN_E_INVALID, "norm_eps", "above 0");
    bad = o.m;
    bad.layers = 0;
    expect_refusal(&bad, &run, ATTN_E_INVALID, "layers", "layers (0)");
    bad = o.m;
    bad.arch.act = (xf_act)7;
    expect_refusal(&bad, &run, ATTN_E_INVALID, "act", "act (7)");
    struct xf_layer holed[2] = {o.layers[0], o.layers[1]};
    holed[1].ffn_norm_b = NULL;
    bad = o.m;
    bad.layer = holed;
    expect_refusal(&bad, &run, ATTN_E_INVALID, "layer", "layer 1");

    // weights that overflow float32 are an error naming the layer
    struct xf_layer huge[2] = {o.layers[0], o.layers[1]};
    float *big = malloc(24 * 16 * sizeof(float));
    // near FLT_MAX on half of each row: some row's product overflows
    for (size_t e = 0; e < 24 * 16; e++)
        big[e] = e % 16 < 8 ? 3e38f : 0.0f;
    huge[0].up_w = test_f32(big);
    bad = o.m;
    bad.layer = huge;
    expect_refusal(&bad, &run, ATTN_E_INPUT, "layer", "layer 0");
    free(big);
    model_free(&o);
}

static void test_forward_bytes(void **state)
{
    (void)state;
    struct owned_model o;
    model_random(&o, 2, 2, 16, 24, 30, 600, 2, XF_ACT_GELU, 9);
    static uint32_t ids[600];
    struct xf_run run = {
        .ids = ids, .n = 10, .want = XF_WANT_WEIGHTS, .layer = XF_ALL_LAYERS};
    const size_t small = test_xf_bytes(&o.m, &run);
    // at least the result: 2 layers x 2 heads x 10 x 10 floats
    assert_true(small >= 2 * 2 * 100 * sizeof(float));
    run.want = WANT_ALL;
    const size_t all = test_xf_bytes(&o.m, &run);
    // mean weights, rollout and its two scratch matrices, and the hidden
    // states returned instead of two scratch rows
    assert_true(all >= small + (2 * 100 + 100 + 2 * 100 + 480 - 320) * 4);
    run.n = 600;
    const size_t big = test_xf_bytes(&o.m, &run);
    assert_true(big > 4 * 600 * 600 * sizeof(float));
    assert_true(big != SIZE_MAX);
    assert_true(test_xf_flops(&o.m, &run) > 2.0 * 600 * 16 * 24 * 2);
    model_free(&o);
}

/* ----------------------------------------- against tests/models/ goldens */

/* A committed F32 checkpoint read without the server's loader: its
 * safetensors header parsed here, each tensor copied out by name. */
struct f32_file {
    char *bytes;
    size_t len;
    cJSON *header;
    const char *prefix;
    bool legacy;
};

static float *tensor(struct f32_file *f, const char *name, size_t count)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", f->prefix, name);
    char *ln = strstr(full, "LayerNorm.");
    if (f->legacy && ln) {
        if (strcmp(ln, "LayerNorm.weight") == 0)
            snprintf(ln, sizeof full - (size_t)(ln - full), "LayerNorm.gamma");
        else
            snprintf(ln, sizeof full - (size_t)(ln - full), "LayerNorm.beta");
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(f->header, full);
    if (!t)
        fail_msg("the checkpoint has no tensor %s", full);
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    const size_t begin = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
    const size_t end = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    uint64_t n;
    memcpy(&n, f->bytes, 8);
    assert_int_equal(end - begin, count * 4);
    float *out = malloc(count * sizeof *out);
    memcpy(out, f->bytes + 8 + n + begin, count * 4);
    return out;
}

static void golden_variant(const char *variant, const char *prefix, bool legacy)
{
    char path[512];
    snprintf(path, sizeof path, "tests/models/%s/model.safetensors", variant);
    struct f32_file f = {.prefix = prefix, .legacy = legacy};
    f.bytes = test_read_file(path, &f.len);
    uint64_t n;
    memcpy(&n, f.bytes, 8);
    f.header = cJSON_ParseWithLength(f.bytes + 8, n);
    assert_non_null(f.header);
    size_t glen;
    snprintf(path, sizeof path, "tests/models/%s/config.json", variant);
    char *ctext = test_read_file(path, &glen);
    cJSON *cfg = cJSON_ParseWithLength(ctext, glen);
    free(ctext);
#define CFG(k) ((size_t)cJSON_GetObjectItemCaseSensitive(cfg, k)->valuedouble)
    struct xf_model m = {
        .layers = CFG("num_hidden_layers"),
        .heads = CFG("num_attention_heads"),
        .hidden = CFG("hidden_size"),
        .intermediate = CFG("intermediate_size"),
        .vocab_size = CFG("vocab_size"),
        .max_positions = CFG("max_position_embeddings"),
        .type_vocab_size = CFG("type_vocab_size"),
        .norm_eps =
            (float)cJSON_GetObjectItemCaseSensitive(cfg, "layer_norm_eps")
                ->valuedouble,
        .arch = test_bert_arch(
            strcmp(cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act")
                       ->valuestring,
                   "gelu") == 0
                ? XF_ACT_GELU
                : XF_ACT_GELU_TANH),
    };
#undef CFG
    cJSON_Delete(cfg);
    m.kv_heads = m.heads;
    m.head_dim = m.hidden / m.heads;
    const size_t H = m.hidden, J = m.intermediate;
    float *owned[512];
    size_t n_owned = 0;
#define T(name, count) (owned[n_owned++] = tensor(&f, name, count))
    m.word_emb =
        test_f32(T("embeddings.word_embeddings.weight", m.vocab_size * H));
    m.pos_emb = test_f32(
        T("embeddings.position_embeddings.weight", m.max_positions * H));
    m.type_emb = test_f32(
        T("embeddings.token_type_embeddings.weight", m.type_vocab_size * H));
    m.embed_norm_w = T("embeddings.LayerNorm.weight", H);
    m.embed_norm_b = T("embeddings.LayerNorm.bias", H);
    struct xf_layer *layers = calloc(m.layers, sizeof *layers);
    static const char *const names[16] = {"attention.self.query.weight",
                                          "attention.self.query.bias",
                                          "attention.self.key.weight",
                                          "attention.self.key.bias",
                                          "attention.self.value.weight",
                                          "attention.self.value.bias",
                                          "attention.output.dense.weight",
                                          "attention.output.dense.bias",
                                          "attention.output.LayerNorm.weight",
                                          "attention.output.LayerNorm.bias",
                                          "intermediate.dense.weight",
                                          "intermediate.dense.bias",
                                          "output.dense.weight",
                                          "output.dense.bias",
                                          "output.LayerNorm.weight",
                                          "output.LayerNorm.bias"};
    const size_t counts[16] = {H * H, H, H * H, H, H * H, H, H * H, H,
                               H,     H, J * H, J, H * J, H, H,     H};
    for (size_t l = 0; l < m.layers; l++) {
        const float *t[16];
        for (int i = 0; i < 16; i++) {
            char p[128];
            snprintf(p, sizeof p, "encoder.layer.%zu.%s", l, names[i]);
            t[i] = T(p, counts[i]);
        }
        layers[l] = (struct xf_layer){.q_w = test_f32(t[0]),
                                      .q_b = t[1],
                                      .k_w = test_f32(t[2]),
                                      .k_b = t[3],
                                      .v_w = test_f32(t[4]),
                                      .v_b = t[5],
                                      .o_w = test_f32(t[6]),
                                      .o_b = t[7],
                                      .attn_norm_w = t[8],
                                      .attn_norm_b = t[9],
                                      .up_w = test_f32(t[10]),
                                      .up_b = t[11],
                                      .down_w = test_f32(t[12]),
                                      .down_b = t[13],
                                      .ffn_norm_w = t[14],
                                      .ffn_norm_b = t[15]};
    }
#undef T
    m.layer = layers;

    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    char *gtext = test_read_file(path, &glen);
    cJSON *golden = cJSON_ParseWithLength(gtext, glen);
    free(gtext);
    const cJSON *c;
    size_t n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(golden, "cases"))
    {
        const cJSON *jids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        const cJSON *jtypes = cJSON_GetObjectItemCaseSensitive(c, "type_ids");
        const size_t nt = (size_t)cJSON_GetArraySize(jids);
        uint32_t *ids = malloc(nt * sizeof *ids);
        uint8_t *types = malloc(nt);
        for (size_t i = 0; i < nt; i++) {
            ids[i] = (uint32_t)cJSON_GetArrayItem(jids, (int)i)->valuedouble;
            types[i] = (uint8_t)cJSON_GetArrayItem(jtypes, (int)i)->valuedouble;
        }
        struct xf_run run = {.ids = ids,
                             .type_ids = types,
                             .n = nt,
                             .want = WANT_ALL,
                             .layer = XF_ALL_LAYERS,
                             .threads = 2};
        struct xf_result r;
        run_ok(&m, &run, &r);
        const char *keys[] = {"attentions", "hidden_states", "rollout"};
        const float *got[] = {r.weights, r.hidden_states, r.rollout};
        const size_t sizes[] = {m.layers * m.heads * nt * nt,
                                (m.layers + 1) * nt * H, nt * nt};
        for (int k = 0; k < 3; k++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, keys[k]);
            assert_int_equal((size_t)cJSON_GetArraySize(arr), sizes[k]);
            double *want = malloc(sizes[k] * sizeof *want);
            size_t i = 0;
            const cJSON *v;
            cJSON_ArrayForEach(v, arr) want[i++] = v->valuedouble;
            const double worst =
                k == 1 ? max_tol_ratio(got[k], want, sizes[k], HIDDEN_ATOL,
                                       HIDDEN_RTOL)
                       : max_abs_diff(got[k], want, sizes[k]) / WEIGHT_TOL;
            if (!(worst <= 1.0))
                fail_msg("%s case %zu %s: %.3g of the tolerance", variant,
                         n_cases, keys[k], worst);
            free(want);
        }
        xf_result_free(&r);
        free(ids);
        free(types);
        n_cases++;
    }
    assert_true(n_cases >= 3);
    cJSON_Delete(golden);
    cJSON_Delete(f.header);
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(layers);
    free(f.bytes);
}

static void test_goldens_f32(void **state)
{
    (void)state;
    golden_variant("f32", "", false);
}

static void test_goldens_f32_prefixed_legacy(void **state)
{
    (void)state;
    golden_variant("f32_prefixed_legacy", "bert.", true);
}

int main(void)
{
    attn_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_values),
        cmocka_unit_test(test_gelu_dense),
        cmocka_unit_test(test_activation_rows),
        cmocka_unit_test(test_layer_norm_values),
        cmocka_unit_test(test_encoder_matches_reference_gelu),
        cmocka_unit_test(test_encoder_matches_reference_gelu_tanh),
        cmocka_unit_test(test_same_bits_every_thread_count),
        cmocka_unit_test(test_one_layer),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_forward_bytes),
        cmocka_unit_test(test_goldens_f32),
        cmocka_unit_test(test_goldens_f32_prefixed_legacy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
