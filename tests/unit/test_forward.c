/*
 * test_forward.c - the forward pass against the plain-loop float64
 * reference of support.c, over configurations that cover every feature,
 * both kernel paths, blocking edges, errors and determinism.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attention.h"
#include "support.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALL_ARRAYS                                                             \
    (ATTN_WANT_WEIGHTS | ATTN_WANT_SCORES | ATTN_WANT_Q | ATTN_WANT_K |        \
     ATTN_WANT_V | ATTN_WANT_HEADS | ATTN_WANT_OUTPUT |                        \
     ATTN_WANT_MEAN_WEIGHTS | ATTN_WANT_WEIGHTS_RAW)

/* The explicit mask a fixture gets: none, booleans or additive numbers,
 * one matrix per sequence or per sequence and head. */
enum mask_kind {
    NO_MASK,
    MASK_BOOL, /* 1, so that a case's `true` is a boolean mask */
    MASK_BIAS,
    MASK_BOOL_HEADS,
    MASK_BIAS_HEADS
};

/* Inputs of one test case, owned by the case. */
struct fixture {
    struct attn_config cfg; /* resolved */
    struct attn_params params;
    float *qk_norms; /* [2][d_k] with qk_norm; [(heads + kv_heads) d_k]
                        with qk_norm_whole */
    float *x, *context, *mask_bias;
    uint8_t *mask, *key_padding;
};

/* An additive mask: small biases (ALiBi-like), some -inf, some below
 * ATTN_MASK_NEVER, which mean the same. */
static void fill_bias(float *bias, size_t count, uint64_t seed)
{
    fill_normal(bias, count, seed, 2.0f);
    for (size_t i = 0; i < count; i++) {
        const uint64_t r = attn_stream_draw(seed, i) % 8;
        if (r == 0)
            bias[i] = -INFINITY;
        else if (r == 1)
            bias[i] = -3e30f;
    }
}

static void fixture_init(struct fixture *f, const struct attn_config *cfg,
                         uint64_t data_seed, int with_mask, bool with_padding)
{
    struct attn_error err;
    memset(f, 0, sizeof *f);
    f->cfg = *cfg;
    f->cfg.want = ALL_ARRAYS;
    assert_int_equal(attn_config_resolve(&f->cfg, &err), ATTN_OK);
    const struct attn_config *c = &f->cfg;
    const size_t nx = c->batch * c->n_query * c->d_model;
    f->x = malloc(nx * sizeof *f->x);
    fill_normal(f->x, nx, data_seed, 1.0f);
    if (c->cross) {
        const size_t nc = c->batch * c->n_ctx * c->d_ctx;
        f->context = malloc(nc * sizeof *f->context);
        fill_normal(f->context, nc, data_seed + 1, 1.0f);
    }
    if (with_mask != NO_MASK) {
        const bool per_head =
            with_mask == MASK_BOOL_HEADS || with_mask == MASK_BIAS_HEADS;
        const size_t nm =
            c->batch * c->n_query * c->n_ctx * (per_head ? c->heads : 1);
        if (with_mask == MASK_BIAS || with_mask == MASK_BIAS_HEADS) {
            f->mask_bias = malloc(nm * sizeof *f->mask_bias);
            fill_bias(f->mask_bias, nm, data_seed + 3);
            f->cfg.mask_bias = f->mask_bias;
        } else {
            f->mask = malloc(nm);
            for (size_t i = 0; i < nm; i++)
                f->mask[i] = attn_stream_draw(data_seed, i) % 4 != 0;
            f->cfg.mask = f->mask;
        }
        f->cfg.mask_batched = true;
        f->cfg.mask_per_head = per_head;
    }
    if (with_padding) {
        const size_t np = c->batch * c->n_ctx;
        f->key_padding = calloc(np, 1);
        for (size_t i = 0; i < np; i++)
            f->key_padding[i] = attn_stream_draw(data_seed + 7, i) % 5 == 0;
        f->cfg.key_padding = f->key_padding;
        f->cfg.key_padding_batched = true;
    }
    if (c->mode == ATTN_MODE_PROJECTED) {
        assert_int_equal(attn_params_draw(c, &f->params, &err), ATTN_OK);
        f->cfg.params = &f->params;
    }
    if (c->qk_norm || c->qk_norm_whole) {
        // weights near 1, as trained norms have them
        const size_t nq = c->qk_norm_whole ? c->heads * c->d_k : c->d_k;
        const size_t nk = c->qk_norm_whole ? c->kv_heads * c->d_k : c->d_k;
        f->qk_norms = malloc((nq + nk) * sizeof *f->qk_norms);
        fill_normal(f->qk_norms, nq + nk, data_seed + 9, 0.3f);
        for (size_t i = 0; i < nq + nk; i++)
            f->qk_norms[i] += 1.0f;
        f->params.q_norm = f->qk_norms;
        f->params.k_norm = f->qk_norms + nq;
    }
}

static void fixture_free(struct fixture *f)
{
    attn_params_free(&f->params);
    free(f->qk_norms);
    free(f->x);
    free(f->context);
    free(f->mask);
    free(f->mask_bias);
    free(f->key_padding);
}

static void expect_close(const char *what, const char *array, const float *got,
                         const double *want, size_t n, double atol, double rtol)
{
    const double ratio = max_tol_ratio(got, want, n, atol, rtol);
    if (!(ratio <= 1.0))
        fail_msg("%s: %s differs from the float64 reference (%.3g x tolerance)",
                 what, array, ratio);
}

/* Run f's config with want, compare every returned array to ref. */
static void check_against(const char *what, const struct fixture *f,
                          unsigned want, const struct ref_out *ref)
{
    struct attn_config cfg = f->cfg;
    cfg.want = want;
    struct attn_result res;
    struct attn_error err;
    attn_status st = attn_forward(&cfg, f->x, f->context, &res, &err);
    if (st != ATTN_OK)
        fail_msg("%s: %s", what, err.message);
    const struct attn_config *c = &f->cfg;
    /* m: keys, the context's and the appended ones */
    const size_t b = c->batch, n = c->n_query, m = c->n_keys, h = c->heads,
                 g = c->kv_heads;
    const double atol = 2e-5, rtol = 2e-4;
    if (want & ATTN_WANT_WEIGHTS) {
        const double d = max_abs_diff(res.weights, ref->weights, b * h * n * m);
        if (!(d <= 1e-5 * (c->dropout > 0 ? 1.0 / (1.0 - c->dropout) : 1.0)))
            fail_msg("%s: weights off by %g", what, d);
    }
    if (want & ATTN_WANT_WEIGHTS_RAW) {
        const double d =
            max_abs_diff(res.weights_raw, ref->weights_raw, b * h * n * m);
        if (!(d <= 1e-5))
            fail_msg("%s: weights before dropout off by %g", what, d);
    }
    if (want & ATTN_WANT_SCORES)
        expect_close(what, "scores", res.scores, ref->scores, b * h * n * m,
                     atol, rtol);
    if (want & ATTN_WANT_Q)
        expect_close(what, "q", res.q, ref->q, b * n * h * c->d_k, atol, rtol);
    if (want & ATTN_WANT_K)
        expect_close(what, "k", res.k, ref->k, b * m * g * c->d_k, atol, rtol);
    if (want & ATTN_WANT_V)
        expect_close(what, "v", res.v, ref->v, b * m * g * c->d_v, atol, rtol);
    if (want & ATTN_WANT_HEADS)
        expect_close(what, "heads_out", res.heads_out, ref->heads_out,
                     b * n * h * c->d_v, atol, rtol);
    if (want & ATTN_WANT_OUTPUT)
        expect_close(what, "output", res.output, ref->output, b * n * c->d_out,
                     atol, rtol);
    if (want & ATTN_WANT_MEAN_WEIGHTS) {
        for (size_t bi = 0; bi < b; bi++)
            for (size_t e = 0; e < n * m; e++) {
                double mean = 0.0;
                for (size_t a = 0; a < h; a++)
                    mean += ref->weights[((bi * h + a) * n) * m + e];
                mean /= (double)h;
                if (fabs(res.mean_weights[bi * n * m + e] - mean) > 1e-5 * 2)
                    fail_msg("%s: mean_weights[%zu][%zu] is %g, expected %g",
                             what, bi, e,
                             (double)res.mean_weights[bi * n * m + e], mean);
            }
    }
    size_t masked = 0;
    for (size_t i = 0; i < b * n; i++) {
        if (res.fully_masked[i] != ref->fully_masked[i])
            fail_msg("%s: fully_masked[%zu] is %d", what, i,
                     res.fully_masked[i]);
        masked += ref->fully_masked[i];
    }
    assert_int_equal(res.n_fully_masked, masked);
    attn_result_free(&res);
}

/* Compare the full path (everything asked for) and the streaming path
 * (only heads and output) with the reference. */
static void check_case(const char *what, const struct attn_config *cfg,
                       int with_mask, bool with_padding)
{
    struct fixture f;
    fixture_init(&f, cfg, 1234, with_mask, with_padding);
    struct ref_out ref = {0};
    ref_out_alloc(&f.cfg, &ref);
    ref_forward(&f.cfg, f.cfg.params, f.x, f.context, &ref);
    check_against(what, &f, ALL_ARRAYS, &ref);
    check_against(what, &f, ATTN_WANT_HEADS | ATTN_WANT_OUTPUT, &ref);
    check_against(what, &f, ATTN_WANT_OUTPUT, &ref);
    check_against(what, &f, ATTN_WANT_SCORES | ATTN_WANT_OUTPUT, &ref);
    check_against(what, &f, ATTN_WANT_WEIGHTS, &ref);
    ref_out_free(&ref);
    fixture_free(&f);
}

/* A configuration, which random mask it gets (enum mask_kind) and
 * whether key padding. */
struct feature_case {
    const char *name;
    struct attn_config cfg;
    int mask;
    bool padding;
};

static void test_feature_matrix(void **state)
{
    (void)state;
    const struct feature_case cases[] = {
        {"defaults", {.n_query = 9, .d_model = 64}, false, false},
        {"tutorial multihead",
         {.n_query = 12,
          .d_model = 14,
          .heads = 8,
          .d_k = 10,
          .d_v = 10,
          .out_bias = true},
         false,
         false},
        {"basic",
         {.mode = ATTN_MODE_BASIC, .n_query = 12, .d_model = 14},
         false,
         false},
        {"basic cross scaled",
         {.mode = ATTN_MODE_BASIC,
          .n_query = 5,
          .d_model = 6,
          .cross = true,
          .n_ctx = 8,
          .has_scale = true,
          .scale = 0.5f},
         true,
         true},
        {"vit value residual",
         {.batch = 2,
          .n_query = 10,
          .d_model = 49,
          .heads = 4,
          .d_k = 16,
          .d_v = 16,
          .qkv_bias = true,
          .out_bias = true,
          .has_scale = true,
          .scale = 0.2f,
          .residual = ATTN_RESIDUAL_VALUE},
         false,
         false},
        {"cross",
         {.batch = 2,
          .n_query = 5,
          .d_model = 16,
          .cross = true,
          .n_ctx = 7,
          .d_ctx = 12,
          .heads = 4,
          .qkv_bias = true,
          .out_bias = true},
         false,
         false},
        {"gqa",
         {.n_query = 9, .d_model = 32, .heads = 8, .kv_heads = 2},
         false,
         false},
        {"mqa causal",
         {.n_query = 9,
          .d_model = 32,
          .heads = 4,
          .kv_heads = 1,
          .causal = true},
         false,
         false},
        {"causal padding batch",
         {.batch = 3, .n_query = 11, .d_model = 24, .heads = 3, .causal = true},
         false,
         true},
        {"mask padding",
         {.batch = 2, .n_query = 7, .d_model = 8, .heads = 2},
         true,
         true},
        {"sinusoidal",
         {.n_query = 13,
          .d_model = 20,
          .heads = 4,
          .positional = ATTN_POS_SINUSOIDAL},
         false,
         false},
        {"sinusoidal cross",
         {.n_query = 4,
          .d_model = 10,
          .heads = 2,
          .cross = true,
          .n_ctx = 6,
          .d_ctx = 7,
          .positional = ATTN_POS_SINUSOIDAL},
         false,
         false},
        {"rope",
         {.n_query = 13,
          .d_model = 32,
          .heads = 4,
          .positional = ATTN_POS_ROPE},
         false,
         false},
        {"rope cross gqa",
         {.n_query = 5,
          .d_model = 16,
          .heads = 4,
          .kv_heads = 2,
          .cross = true,
          .n_ctx = 9,
          .positional = ATTN_POS_ROPE},
         false,
         false},
        {"dropout",
         {.batch = 2,
          .n_query = 6,
          .d_model = 12,
          .heads = 3,
          .dropout = 0.3f,
          .seed = 7},
         false,
         false},
        {"residual input no out_proj",
         {.n_query = 6,
          .d_model = 12,
          .heads = 3,
          .no_out_proj = true,
          .residual = ATTN_RESIDUAL_INPUT},
         false,
         false},
        {"d_k d_v independent",
         {.n_query = 6,
          .d_model = 20,
          .heads = 3,
          .d_k = 6,
          .d_v = 5,
          .d_out = 11},
         false,
         false},
        {"one token", {.n_query = 1, .d_model = 4, .heads = 2}, false, false},
        {"blocks causal",
         {.n_query = 300,
          .d_model = 16,
          .heads = 2,
          .cross = true,
          .n_ctx = 1100,
          .causal = true},
         false,
         false},
        {"blocks padded",
         {.batch = 2,
          .n_query = 257,
          .d_model = 8,
          .heads = 1,
          .cross = true,
          .n_ctx = 513},
         true,
         true},
        {"blocks rope dropout gqa",
         {.n_query = 600,
          .d_model = 16,
          .heads = 4,
          .kv_heads = 2,
          .dropout = 0.1f,
          .seed = 5,
          .positional = ATTN_POS_ROPE,
          .residual = ATTN_RESIDUAL_INPUT},
         false,
         true},
        /* nn.MultiheadAttention's appended keys, PyTorch's mask forms */
        {"bias_kv cross padding",
         {.batch = 2,
          .n_query = 5,
          .d_model = 8,
          .heads = 2,
          .cross = true,
          .n_ctx = 6,
          .d_ctx = 4,
          .qkv_bias = true,
          .bias_kv = true},
         MASK_BOOL,
         true},
        {"zero_attn causal",
         {.n_query = 7,
          .d_model = 12,
          .heads = 3,
          .causal = true,
          .zero_attn = true},
         NO_MASK,
         true},
        {"bias_kv zero_attn gqa dropout",
         {.batch = 2,
          .n_query = 6,
          .d_model = 16,
          .heads = 4,
          .kv_heads = 2,
          .bias_kv = true,
          .zero_attn = true,
          .dropout = 0.25f,
          .seed = 3},
         MASK_BIAS,
         true},
        {"additive causal",
         {.n_query = 9, .d_model = 8, .heads = 2, .causal = true},
         MASK_BIAS,
         false},
        {"per-head boolean",
         {.batch = 2, .n_query = 6, .d_model = 12, .heads = 3},
         MASK_BOOL_HEADS,
         true},
        {"per-head additive rope",
         {.n_query = 7, .d_model = 16, .heads = 4, .positional = ATTN_POS_ROPE},
         MASK_BIAS_HEADS,
         false},
        {"blocks per-head bias_kv",
         {.n_query = 300,
          .d_model = 8,
          .heads = 2,
          .cross = true,
          .n_ctx = 700,
          .bias_kv = true,
          .zero_attn = true,
          .causal = true},
         MASK_BIAS_HEADS,
         true},
        {"blocks per-head key-outer",
         {.batch = 2,
          .n_query = 40,
          .d_model = 8,
          .heads = 2,
          .cross = true,
          .n_ctx = 600,
          .causal = true},
         MASK_BOOL_HEADS,
         true},
        {"blocks additive",
         {.n_query = 260,
          .d_model = 8,
          .heads = 2,
          .cross = true,
          .n_ctx = 1030},
         MASK_BIAS,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i].name, &cases[i].cfg, cases[i].mask,
                   cases[i].padding);
}

/* The options decoders need: rotary positions paired as rotate_half
 * pairs them or by a table of frequencies, a sliding window (on the full,
 * streaming and key-outer paths), and a per-head norm of q and k before
 * the rotation, with grouped KV heads and a head size of its own. */
static void test_decoder_options(void **state)
{
    (void)state;
    static const double inv_freq[4] = {1.0, 0.3, 0.02, 0.0005};
    const struct feature_case cases[] = {
        {"rope rotate_half",
         {.n_query = 40,
          .d_model = 16,
          .heads = 2,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF},
          .causal = true},
         NO_MASK,
         false},
        {"rope frequencies",
         {.n_query = 33,
          .d_model = 16,
          .heads = 2,
          .d_k = 8,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF, .inv_freq = inv_freq}},
         NO_MASK,
         false},
        {"window",
         {.n_query = 30, .d_model = 8, .heads = 2, .causal = true, .window = 5},
         NO_MASK,
         false},
        {"window with a mask and padding",
         {.n_query = 30, .d_model = 8, .heads = 2, .causal = true, .window = 7},
         MASK_BOOL,
         true},
        {"window key-outer",
         {.n_query = 600,
          .d_model = 8,
          .heads = 2,
          .causal = true,
          .window = 100,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF}},
         NO_MASK,
         false},
        {"softcap before the mask",
         {.n_query = 24,
          .d_model = 16,
          .heads = 2,
          .has_scale = true,
          .scale = 3.0f,
          .softcap = 1.5f,
          .causal = true,
          .window = 9},
         NO_MASK,
         false},
        {"softcap, key-outer",
         {.n_query = 600,
          .d_model = 8,
          .heads = 2,
          .causal = true,
          .softcap = 0.7f},
         NO_MASK,
         false},
        {"partial rotary with a factor",
         {.n_query = 21,
          .d_model = 16,
          .heads = 2,
          .d_k = 12,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF,
                   .dims = 4,
                   .base = 50.0,
                   .factor = 1.25},
          .causal = true},
         NO_MASK,
         false},
        {"partial rotary, interleaved",
         {.n_query = 21,
          .d_model = 16,
          .heads = 2,
          .positional = ATTN_POS_ROPE,
          .rope = {.dims = 6, .base = 50.0}},
         NO_MASK,
         false},
        {"qk norm, grouped heads",
         {.n_query = 20,
          .d_model = 16,
          .heads = 4,
          .kv_heads = 2,
          .d_k = 6,
          .d_v = 6,
          .qkv_bias = true,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF},
          .qk_norm = true,
          .qk_norm_eps = 1e-6f,
          .causal = true},
         NO_MASK,
         false},
        {"qk norm over the whole projection, grouped heads",
         {.n_query = 20,
          .d_model = 16,
          .heads = 4,
          .kv_heads = 2,
          .d_k = 6,
          .d_v = 6,
          .positional = ATTN_POS_ROPE,
          .rope = {.pairing = ATTN_ROPE_HALF},
          .qk_norm_whole = true,
          .qk_norm_eps = 1e-6f,
          .causal = true},
         NO_MASK,
         false},
        {"qk norm over the whole projection, key-outer",
         {.n_query = 600,
          .d_model = 8,
          .heads = 2,
          .qk_norm_whole = true,
          .qk_norm_eps = 1e-5f,
          .causal = true},
         NO_MASK,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i].name, &cases[i].cfg, cases[i].mask,
                   cases[i].padding);

    // the window's edge: query i sees i - window + 1 .. i, nothing before
    struct fixture f;
    fixture_init(&f, &cases[2].cfg, 77, NO_MASK, false);
    struct attn_config cfg = f.cfg;
    cfg.want = ATTN_WANT_WEIGHTS;
    struct attn_result res;
    struct attn_error err;
    assert_int_equal(attn_forward(&cfg, f.x, NULL, &res, &err), ATTN_OK);
    for (size_t a = 0; a < 2; a++)
        for (size_t i = 0; i < 30; i++)
            for (size_t j = 0; j < 30; j++) {
                const float w = res.weights[(a * 30 + i) * 30 + j];
                const bool seen = j <= i && j + 5 > i;
                assert_true(seen ? w > 0.0f : w == 0.0f);
            }
    attn_result_free(&res);
    // the two pairings differ once positions are past 0
    cfg.positional = ATTN_POS_ROPE;
    cfg.rope.pairing = ATTN_ROPE_INTERLEAVED;
    cfg.resolved = false;
    struct attn_result inter, half;
    assert_int_equal(attn_forward(&cfg, f.x, NULL, &inter, &err), ATTN_OK);
    cfg.rope.pairing = ATTN_ROPE_HALF;
    assert_int_equal(attn_forward(&cfg, f.x, NULL, &half, &err), ATTN_OK);
    double most = 0;
    for (size_t e = 0; e < 2 * 30 * 30; e++)
        most = fmax(most, fabs(inter.weights[e] - half.weights[e]));
    assert_true(most > 1e-3);
    attn_result_free(&inter);
    attn_result_free(&half);
    fixture_free(&f);
}

/* The description of the measure arrays names each array of a call's
 * result, with the entries the call gave it: present exactly when
 * counted, and as long as counted. */
static void test_measure_parts(void **state)
{
    (void)state;
    static const uint32_t rows[6] = {0, 0, 1, 1, 2, 2};
    struct attn_config cfg = {
        .n_query = 6,
        .d_model = 8,
        .heads = 2,
        .causal = true,
        .want = ATTN_WANT_HEAD_STATS | ATTN_WANT_TOP_K | ATTN_WANT_POOLED |
                ATTN_WANT_VALUE_WEIGHTED | ATTN_WANT_OUTPUT,
        .top_k = 3,
        .pool_row = rows,
        .pool_col = rows,
        .pool_rows = 3,
        .pool_cols = 3};
    float x[48];
    for (int i = 0; i < 48; i++)
        x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    struct attn_result r;
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    assert_int_equal(attn_forward(&cfg, x, NULL, &r, &err), ATTN_OK);
    struct attn_measure_part parts[ATTN_MEASURE_ARRAYS];
    attn_measure_parts(&cfg, &r.measures, parts);
    const size_t want[ATTN_MEASURE_ARRAYS] = {
        [ATTN_MEASURE_HEAD_STATS] = 2 * ATTN_HEAD_STATS,
        [ATTN_MEASURE_KEY_RECEIVED] = 2 * 6,
        [ATTN_MEASURE_VALUE_WEIGHTED] = 2 * 6 * 6,
        [ATTN_MEASURE_VALUE_WEIGHTED_SUM] = 6 * 6,
        [ATTN_MEASURE_TOP_KEYS] = 2 * 6 * 3,
        [ATTN_MEASURE_TOP_COUNT] = 2 * 6,
        [ATTN_MEASURE_TOP_WEIGHTS] = 2 * 6 * 3,
        [ATTN_MEASURE_POOLED] = 2 * 3 * 3};
    for (int i = 0; i < ATTN_MEASURE_ARRAYS; i++) {
        assert_int_equal(parts[i].count, want[i]);
        assert_int_equal(*parts[i].slot != NULL, want[i] != 0);
    }
    assert_ptr_equal(*parts[ATTN_MEASURE_POOLED].slot, r.measures.pooled);
    attn_result_free(&r);
    assert_null(r.measures.head_stats);
}

static void test_decoder_option_errors(void **state)
{
    (void)state;
    struct attn_error err;
    struct attn_config cfg = {.n_query = 4, .d_model = 8, .heads = 2};
    cfg.rope.pairing = (attn_rope_pairing)3;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_pairing");
    static const double freq[2] = {1.0, -0.5};
    cfg = (struct attn_config){
        .n_query = 4, .d_model = 8, .heads = 2, .rope = {.inv_freq = freq}};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_inv_freq"); /* without rope */
    cfg.positional = ATTN_POS_ROPE;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_inv_freq");
    assert_non_null(strstr(err.message, "rope_inv_freq[1] (-0.5)"));
    // a rotary's dims are even and within the head; its factor above 0
    cfg = (struct attn_config){.n_query = 4,
                               .d_model = 8,
                               .heads = 2,
                               .positional = ATTN_POS_ROPE,
                               .rope = {.dims = 6}};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_dims");
    cfg.rope = (struct attn_rotary){.dims = 2, .factor = -1.0};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_factor");
    cfg.rope = (struct attn_rotary){0};
    cfg.softcap = NAN;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "softcap");
    cfg = (struct attn_config){
        .n_query = 4, .d_model = 8, .heads = 2, .qk_norm = true};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "qk_norm_eps");
    // drawn parameters have no norms
    cfg.qk_norm_eps = 1e-6f;
    float x[32] = {0};
    struct attn_result res;
    assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "q_norm"));
    // a norm of each head or of the whole projection, not both
    cfg.qk_norm_whole = true;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "qk_norm_whole");
    cfg = (struct attn_config){
        .n_query = 4, .d_model = 8, .heads = 2, .qk_norm_whole = true};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "qk_norm_eps");
    cfg.qk_norm_eps = 1e-6f;
    assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "qk_norm_whole needs"));
    // a sliding window narrows causal attention; no family has it alone
    cfg = (struct attn_config){
        .n_query = 4, .d_model = 8, .heads = 2, .window = 2};
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "window");
    cfg.causal = true;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    // 16-bit matrices only for a config planned with their panels, and
    // params checked before (the core does not read them as float32)
    static const uint16_t half[64];
    struct attn_params p = {.stored_wq = {half, ATTN_BF16}};
    cfg = (struct attn_config){
        .n_query = 4, .d_model = 8, .heads = 2, .params = &p};
    assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "params");
    assert_non_null(strstr(err.message, "stored_matrices"));
}

/* docs/math.md: weights within 1e-5 of float64 for N <= 512, d <= 1024. */
static void test_precision_at_scale(void **state)
{
    (void)state;
    const struct attn_config cfg = {.n_query = 512,
                                    .d_model = 1024,
                                    .heads = 8,
                                    .qkv_bias = true,
                                    .out_bias = true};
    struct fixture f;
    fixture_init(&f, &cfg, 99, false, false);
    struct ref_out ref = {0};
    ref_out_alloc(&f.cfg, &ref);
    ref_forward(&f.cfg, f.cfg.params, f.x, NULL, &ref);
    check_against("n 512 d 1024", &f, ATTN_WANT_WEIGHTS | ATTN_WANT_OUTPUT,
                  &ref);
    check_against("n 512 d 1024 streaming", &f, ATTN_WANT_OUTPUT, &ref);
    ref_out_free(&ref);
    fixture_free(&f);
}

static void test_fully_masked_rows(void **state)
{
    (void)state;
    const size_t n = 4, m = 5;
    uint8_t mask[4 * 5];
    memset(mask, 1, sizeof mask);
    memset(mask + 2 * m, 0, m); /* query 2 may see nothing */
    uint8_t padding[2 * 5] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}; /* batch 1: all */
    struct attn_config cfg = {.batch = 2,
                              .n_query = n,
                              .d_model = 8,
                              .heads = 2,
                              .cross = true,
                              .n_ctx = m,
                              .mask = mask,
                              .key_padding = padding,
                              .key_padding_batched = true};
    struct fixture f;
    fixture_init(&f, &cfg, 5, false, false);
    for (unsigned want = ATTN_WANT_OUTPUT; want;
         want = want == ATTN_WANT_OUTPUT ? ALL_ARRAYS : 0) {
        struct attn_config c = f.cfg;
        c.want = want;
        struct attn_result res;
        struct attn_error err;
        assert_int_equal(attn_forward(&c, f.x, f.context, &res, &err), ATTN_OK);
        assert_int_equal(res.n_fully_masked, 1 + n);
        assert_int_equal(res.fully_masked[2], 1);
        assert_int_equal(res.fully_masked[1], 0);
        for (size_t i = 0; i < 2 * n * c.d_out; i++)
            assert_true(isfinite(res.output[i]));
        if (res.weights) {
            for (size_t a = 0; a < 2; a++)
                for (size_t j = 0; j < m; j++)
                    assert_true(res.weights[(a * n + 2) * m + j] == 0.0f);
            for (size_t e = n * m * 2; e < 2 * 2 * n * m; e++)
                assert_true(res.weights[e] == 0.0f);
            for (size_t e = 0; e < 2 * n * c.heads * c.d_v; e++)
                if (e >= n * c.heads * c.d_v || (e / (c.heads * c.d_v)) == 2)
                    assert_true(res.heads_out[e] == 0.0f);
        }
        attn_result_free(&res);
    }
    fixture_free(&f);
}

static void test_huge_logits_are_stable(void **state)
{
    (void)state;
    /* basic mode: scores = x x^T reach about 1e4 */
    float x[3 * 2] = {100, 0, 99, 1, -100, 0};
    struct attn_config cfg = {.mode = ATTN_MODE_BASIC,
                              .n_query = 3,
                              .d_model = 2,
                              .want = ATTN_WANT_WEIGHTS | ATTN_WANT_OUTPUT};
    struct attn_result res;
    struct attn_error err;
    assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_OK);
    for (size_t i = 0; i < 3; i++) {
        double sum = 0;
        for (size_t j = 0; j < 3; j++) {
            assert_true(isfinite(res.weights[i * 3 + j]));
            sum += res.weights[i * 3 + j];
        }
        assert_true(fabs(sum - 1.0) < 1e-6);
    }
    /* row 0: scores 1e4, 9900, -1e4: all weight on key 0 */
    assert_true(res.weights[0] == 1.0f);
    assert_true(res.weights[2] == 0.0f);
    attn_result_free(&res);

    cfg.want = ATTN_WANT_OUTPUT; /* the streaming path too */
    assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_OK);
    /* key 1 keeps exp(-100) of the weight: a denormal, not zero */
    assert_true(res.output[0] == 100.0f && fabsf(res.output[1]) < 1e-30f);
    attn_result_free(&res);
}

static void expect_error(struct attn_config cfg, attn_status status,
                         const char *field, const char *message)
{
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), status);
    assert_string_equal(err.field, field);
    if (message)
        assert_string_equal(err.message, message);
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_error((struct attn_config){.n_query = 3, .d_model = 64, .heads = 6},
                 ATTN_E_INVALID, "heads",
                 "heads (6) must divide d_model (64) when d_k is not given");
    expect_error(
        (struct attn_config){
            .n_query = 3, .d_model = 64, .heads = 8, .kv_heads = 3},
        ATTN_E_INVALID, "kv_heads", "kv_heads (3) must divide heads (8)");
    expect_error((struct attn_config){.n_query = 3,
                                      .d_model = 12,
                                      .heads = 4,
                                      .positional = ATTN_POS_ROPE},
                 ATTN_E_INVALID, "d_k",
                 "positional 'rope' rotates pairs, so d_k (3) must be even");
    expect_error(
        (struct attn_config){.n_query = 3, .d_model = 8, .dropout = 1.0f},
        ATTN_E_INVALID, "dropout",
        "dropout (1) must be at least 0 and below 1");
    expect_error((struct attn_config){.n_query = 3,
                                      .d_model = 8,
                                      .heads = 2,
                                      .d_out = 5,
                                      .residual = ATTN_RESIDUAL_VALUE},
                 ATTN_E_INVALID, "d_out", NULL);
    expect_error((struct attn_config){.n_query = 3,
                                      .d_model = 8,
                                      .heads = 2,
                                      .cross = true,
                                      .n_ctx = 4,
                                      .residual = ATTN_RESIDUAL_INPUT},
                 ATTN_E_INVALID, "residual", NULL);
    expect_error(
        (struct attn_config){
            .mode = ATTN_MODE_BASIC, .n_query = 3, .d_model = 8, .heads = 2},
        ATTN_E_INVALID, "heads", "heads (2) must be 1 in mode basic");
    expect_error((struct attn_config){.n_query = 0, .d_model = 8},
                 ATTN_E_INVALID, "n_query", NULL);
    expect_error(
        (struct attn_config){
            .n_query = 3, .d_model = 8, .has_scale = true, .scale = NAN},
        ATTN_E_INVALID, "scale", NULL);
    expect_error((struct attn_config){.mode = 7, .n_query = 3, .d_model = 8},
                 ATTN_E_INVALID, "mode", NULL);
    /* sizes whose products overflow are refused before any allocation */
    expect_error(
        (struct attn_config){.n_query = SIZE_MAX / 2, .d_model = 8, .heads = 2},
        ATTN_E_TOO_BIG, "n_query", NULL);
    expect_error((struct attn_config){.n_query = (size_t)1 << 28,
                                      .d_model = 64,
                                      .heads = 64,
                                      .want = ATTN_WANT_WEIGHTS},
                 ATTN_E_TOO_BIG, "heads", NULL);
    /* parameter tensors whose sizes overflow are refused too */
    expect_error((struct attn_config){.n_query = 1,
                                      .d_model = 1,
                                      .heads = 1u << 15,
                                      .kv_heads = 1,
                                      .d_k = 1,
                                      .d_v = 1u << 15,
                                      .d_out = (size_t)1 << 32,
                                      .want = ATTN_WANT_Q},
                 ATTN_E_TOO_BIG, "d_out", NULL);
    expect_error((struct attn_config){.n_query = 1,
                                      .d_model = 1,
                                      .heads = 1,
                                      .d_k = (size_t)1 << 33,
                                      .d_v = 1},
                 ATTN_E_TOO_BIG, "d_k", NULL);
    expect_error(
        (struct attn_config){.n_query = 2, .d_model = 8, .want = 1u << 14},
        ATTN_E_INVALID, "want", "want (0x4000) has unknown bits");
    expect_error((struct attn_config){.n_query = 100,
                                      .d_model = 8,
                                      .heads = 2,
                                      .want = ATTN_WANT_WEIGHTS,
                                      .max_elements = 1000},
                 ATTN_E_TOO_BIG, "return",
                 "the requested arrays hold 20000 numbers; the limit is 1000");
    /* K and V, held though not returned, meet the same cap: 2 sequences
     * of 300 context tokens, 2 kv heads of d_k + d_v = 4 + 4 */
    expect_error((struct attn_config){.batch = 2,
                                      .n_query = 1,
                                      .cross = true,
                                      .n_ctx = 300,
                                      .d_model = 8,
                                      .d_ctx = 8,
                                      .heads = 2,
                                      .max_elements = 4000},
                 ATTN_E_TOO_BIG, "kv_heads",
                 "keys and values of 2 x 300 context tokens with kv_heads (2) "
                 "x (d_k + d_v) (8) hold 9600 numbers; the limit is 4000");
    /* so do drawn weights: 4 tensors of 64 x 64 */
    expect_error(
        (struct attn_config){
            .n_query = 1, .d_model = 64, .heads = 1, .max_elements = 10000},
        ATTN_E_TOO_BIG, "d_model",
        "the drawn projection weights hold 16384 numbers; the limit "
        "is 10000");
}

/* Finite inputs whose products overflow float32 are refused on both
 * kernel paths, never answered with NaN or a false "fully masked". */
static void test_overflowing_products_rejected(void **state)
{
    (void)state;
    float x[2 * 2] = {1e20f, -1e20f, 2e20f, 1e20f};
    struct attn_config cfg = {
        .mode = ATTN_MODE_BASIC, .n_query = 2, .d_model = 2};
    for (int pass = 0; pass < 2; pass++) {
        cfg.want =
            pass ? ATTN_WANT_OUTPUT : ATTN_WANT_WEIGHTS | ATTN_WANT_OUTPUT;
        struct attn_result res;
        struct attn_error err;
        assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_E_INPUT);
        assert_string_equal(err.field, "x");
        assert_null(res.output);
        assert_null(res.weights);
    }
    struct fixture f;
    fixture_init(&f,
                 &(struct attn_config){.n_query = 3,
                                       .d_model = 4,
                                       .heads = 1,
                                       .has_scale = true,
                                       .scale = 3e38f},
                 8, false, false);
    struct attn_result res;
    struct attn_error err;
    f.cfg.want = ATTN_WANT_OUTPUT;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_E_INPUT);
    fixture_free(&f);
}

/* Rows with no visible key are reported even when no head is computed. */
static void test_fully_masked_reported_without_heads(void **state)
{
    (void)state;
    uint8_t padding[4] = {1, 1, 1, 1};
    struct fixture f;
    fixture_init(
        &f,
        &(struct attn_config){
            .n_query = 4, .d_model = 4, .heads = 2, .key_padding = padding},
        2, false, false);
    f.cfg.want = ATTN_WANT_Q;
    struct attn_result res;
    struct attn_error err;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_OK);
    assert_int_equal(res.n_fully_masked, 4);
    attn_result_free(&res);
    fixture_free(&f);
}

static void test_nonfinite_inputs_rejected(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f,
                 &(struct attn_config){
                     .batch = 2, .n_query = 3, .d_model = 4, .heads = 2},
                 3, false, false);
    struct attn_result res;
    struct attn_error err;
    f.x[1 * 12 + 2 * 4 + 1] = NAN;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_E_INPUT);
    assert_string_equal(err.field, "x");
    assert_string_equal(err.message, "x[1][2][1] is NaN");
    assert_int_equal(err.n_index, 3);
    assert_null(res.output);
    f.x[1 * 12 + 2 * 4 + 1] = 0.5f;
    float *wk = (float *)f.params.wk; /* the fixture's own, drawn */
    wk[3] = INFINITY;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_E_INPUT);
    assert_string_equal(err.field, "k_proj.weight");
    wk[3] = 0.0f;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_OK);
    attn_result_free(&res);
    fixture_free(&f);
}

static void test_params_follow_spec(void **state)
{
    (void)state;
    struct attn_config cfg = {
        .n_query = 2, .d_model = 6, .heads = 2, .qkv_bias = true, .seed = 42};
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    struct attn_params p;
    assert_int_equal(attn_params_draw(&cfg, &p, &err), ATTN_OK);
    const uint64_t key = attn_stream_key(42, "k_proj.bias", 11);
    for (size_t i = 0; i < 6; i++) {
        const double u = (double)(attn_stream_draw(key, i) >> 11) * 0x1.0p-53;
        assert_true(p.bk[i] == (float)((2 * u - 1) / sqrt(6.0)));
    }
    assert_null(p.bo);
    assert_non_null(p.wo);
    for (size_t i = 0; i < 36; i++)
        assert_true(fabsf(p.wq[i]) <= 1 / sqrtf(6.0f));
    attn_params_free(&p);
    assert_null(p.wq);
}

/* ------------------------------------------------------------ determinism */

struct det_job {
    const struct fixture *f;
    unsigned threads;
    float *output;
    float *weights;
    struct attn_pool *pool;
};

static void *det_run(void *arg)
{
    struct det_job *job = arg;
    struct attn_config cfg = job->f->cfg;
    cfg.want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS;
    cfg.threads = job->threads;
    cfg.pool = job->pool;
    struct attn_result res;
    struct attn_error err;
    if (attn_forward(&cfg, job->f->x, NULL, &res, &err) != ATTN_OK)
        return NULL;
    const size_t no = cfg.batch * cfg.n_query * job->f->cfg.d_out;
    const size_t nw = cfg.batch * cfg.heads * cfg.n_query * cfg.n_query;
    job->output = malloc(no * sizeof(float));
    job->weights = malloc(nw * sizeof(float));
    memcpy(job->output, res.output, no * sizeof(float));
    memcpy(job->weights, res.weights, nw * sizeof(float));
    attn_result_free(&res);
    return job;
}

/* The same inputs give the same bits whatever the team size, and from
 * callers on many threads at once (docs/math.md "Threads"). */
static void test_bit_identical_across_runs_and_threads(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f,
                 &(struct attn_config){.batch = 2,
                                       .n_query = 600,
                                       .d_model = 96,
                                       .heads = 6,
                                       .dropout = 0.1f,
                                       .positional = ATTN_POS_ROPE},
                 11, false, false);
    const size_t no = 2 * 600 * 96, nw = 2 * 6 * 600 * 600;
    attn_blas_single_thread();
    struct det_job base = {&f, 1, NULL, NULL, NULL};
    assert_non_null(det_run(&base));
    for (unsigned threads = 2; threads <= 5; threads++) {
        struct det_job again = {&f, threads, NULL, NULL, NULL};
        assert_non_null(det_run(&again));
        assert_memory_equal(base.output, again.output, no * sizeof(float));
        assert_memory_equal(base.weights, again.weights, nw * sizeof(float));
        free(again.output);
        free(again.weights);
    }

    enum { CALLERS = 4 };
    pthread_t tid[CALLERS];
    struct det_job jobs[CALLERS];
    for (int t = 0; t < CALLERS; t++) {
        jobs[t] = (struct det_job){&f, (unsigned)t % 2 + 1, NULL, NULL, NULL};
        assert_int_equal(pthread_create(&tid[t], NULL, det_run, &jobs[t]), 0);
    }
    for (int t = 0; t < CALLERS; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
        assert_non_null(jobs[t].output);
        assert_memory_equal(base.output, jobs[t].output, no * sizeof(float));
        assert_memory_equal(base.weights, jobs[t].weights, nw * sizeof(float));
        free(jobs[t].output);
        free(jobs[t].weights);
    }
    free(base.output);
    free(base.weights);
    fixture_free(&f);
}

/* A small input is cut into several units, which a team shares: the same
 * bits on 1 to 4 threads, with the caller's pool or without, and from
 * callers that share one pool at once (all but one of them then start
 * threads of their own). Then a large input in the key-outer order, whose
 * phases run on the pool many times in one call. */
static void test_pool_bit_identical(void **state)
{
    (void)state;
    struct attn_pool *pool;
    struct attn_error err;
    assert_int_equal(attn_pool_create(3, &pool, &err), ATTN_OK);
    assert_int_equal(attn_pool_threads(pool), 3);
    attn_blas_single_thread();
    const struct attn_config shapes[2] = {
        {.batch = 2,
         .n_query = 128,
         .d_model = 256,
         .heads = 8,
         .causal = true},
        {.batch = 1,
         .n_query = 1100,
         .d_model = 64,
         .heads = 4,
         .dropout = 0.1f},
    };
    for (int s = 0; s < 2; s++) {
        struct fixture f;
        fixture_init(&f, &shapes[s], 5, NO_MASK, false);
        const struct attn_config *c = &f.cfg;
        const size_t no = c->batch * c->n_query * c->d_out;
        const size_t nw = c->batch * c->heads * c->n_query * c->n_query;
        struct det_job base = {&f, 1, NULL, NULL, NULL};
        assert_non_null(det_run(&base));
        for (unsigned threads = 1; threads <= 4; threads++)
            for (int with_pool = 0; with_pool < 2; with_pool++) {
                struct det_job again = {&f, threads, NULL, NULL,
                                        with_pool ? pool : NULL};
                assert_non_null(det_run(&again));
                assert_memory_equal(base.output, again.output,
                                    no * sizeof(float));
                assert_memory_equal(base.weights, again.weights,
                                    nw * sizeof(float));
                free(again.output);
                free(again.weights);
            }
        /* without weights: the streaming (and key-outer) paths */
        struct attn_config plain = f.cfg;
        plain.want = ATTN_WANT_OUTPUT;
        struct attn_result one, team;
        assert_int_equal(attn_forward(&plain, f.x, NULL, &one, &err), ATTN_OK);
        plain.threads = 3;
        plain.pool = pool;
        assert_int_equal(attn_forward(&plain, f.x, NULL, &team, &err), ATTN_OK);
        assert_memory_equal(one.output, team.output, no * sizeof(float));
        attn_result_free(&one);
        attn_result_free(&team);

        enum { CALLERS = 3 };
        pthread_t tid[CALLERS];
        struct det_job jobs[CALLERS];
        for (int t = 0; t < CALLERS; t++) {
            jobs[t] = (struct det_job){&f, 3, NULL, NULL, pool};
            assert_int_equal(pthread_create(&tid[t], NULL, det_run, &jobs[t]),
                             0);
        }
        for (int t = 0; t < CALLERS; t++) {
            assert_int_equal(pthread_join(tid[t], NULL), 0);
            assert_non_null(jobs[t].output);
            assert_memory_equal(base.output, jobs[t].output,
                                no * sizeof(float));
            assert_memory_equal(base.weights, jobs[t].weights,
                                nw * sizeof(float));
            free(jobs[t].output);
            free(jobs[t].weights);
        }
        free(base.output);
        free(base.weights);
        fixture_free(&f);
    }
    attn_pool_free(pool);
}

static void test_pool_rejects_sizes(void **state)
{
    (void)state;
    const unsigned bad[2] = {0, 65};
    for (int i = 0; i < 2; i++) {
        struct attn_pool *pool = (struct attn_pool *)&pool;
        struct attn_error err;
        assert_int_equal(attn_pool_create(bad[i], &pool, &err), ATTN_E_INVALID);
        assert_null(pool);
        assert_string_equal(err.field, "threads");
        char value[16];
        snprintf(value, sizeof value, "not %u", bad[i]);
        assert_non_null(strstr(err.message, value));
    }
    attn_pool_free(NULL);
}

/* Appended keys, a per-head additive mask and dropout: the same bits at
 * every team size, weights before and after dropout alike. */
static void test_parity_options_bit_identical(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f,
                 &(struct attn_config){.batch = 2,
                                       .n_query = 520,
                                       .d_model = 32,
                                       .heads = 4,
                                       .bias_kv = true,
                                       .zero_attn = true,
                                       .causal = true,
                                       .dropout = 0.2f,
                                       .seed = 9},
                 21, MASK_BIAS_HEADS, true);
    attn_blas_single_thread();
    const size_t nw = 2 * 4 * 520 * (size_t)522, no = 2 * 520 * 32;
    float *base[3] = {NULL, NULL, NULL};
    for (unsigned threads = 1; threads <= 4; threads++) {
        struct attn_config cfg = f.cfg;
        cfg.want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS | ATTN_WANT_WEIGHTS_RAW;
        cfg.threads = threads;
        struct attn_result res;
        struct attn_error err;
        assert_int_equal(attn_forward(&cfg, f.x, NULL, &res, &err), ATTN_OK);
        assert_int_equal(res.n_keys, 522);
        const float *arrays[3] = {res.output, res.weights, res.weights_raw};
        const size_t counts[3] = {no, nw, nw};
        for (int k = 0; k < 3; k++) {
            if (threads == 1) {
                base[k] = malloc(counts[k] * sizeof(float));
                memcpy(base[k], arrays[k], counts[k] * sizeof(float));
            } else {
                assert_memory_equal(base[k], arrays[k],
                                    counts[k] * sizeof(float));
            }
        }
        /* dropout zeroes some weights the raw ones keep */
        size_t dropped = 0;
        for (size_t e = 0; e < nw; e++)
            dropped += res.weights[e] == 0.0f && res.weights_raw[e] > 0.0f;
        assert_true(dropped > 0);
        attn_result_free(&res);
    }
    for (int k = 0; k < 3; k++)
        free(base[k]);
    fixture_free(&f);
}

/* What the new options refuse, and what they cost. */
static void test_parity_options_checked(void **state)
{
    (void)state;
    struct attn_error err;
    struct attn_config basic = {
        .mode = ATTN_MODE_BASIC, .n_query = 3, .d_model = 4, .zero_attn = true};
    assert_int_equal(attn_config_resolve(&basic, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "add_zero_attn");
    basic.zero_attn = false;
    basic.bias_kv = true;
    assert_int_equal(attn_config_resolve(&basic, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "bias_kv");
    struct attn_config lone = {
        .n_query = 3, .d_model = 4, .heads = 2, .mask_per_head = true};
    assert_int_equal(attn_config_resolve(&lone, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "mask");

    /* explicit parameters must bring bias_k and bias_v */
    struct fixture f;
    fixture_init(&f,
                 &(struct attn_config){
                     .n_query = 3, .d_model = 4, .heads = 2, .bias_kv = true},
                 4, MASK_BIAS, false);
    struct attn_result res;
    const float *bias_v = f.params.bias_v;
    f.params.bias_v = NULL;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err),
                     ATTN_E_INVALID);
    assert_non_null(strstr(err.message, "bias_v"));
    f.params.bias_v = bias_v;
    /* an additive mask takes -inf, not NaN or +inf */
    f.mask_bias[4] = NAN;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_E_INPUT);
    assert_string_equal(err.field, "mask");
    assert_non_null(strstr(err.message, "mask[0][1][1]"));
    f.mask_bias[4] = INFINITY;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_E_INPUT);
    f.mask_bias[4] = -INFINITY;
    assert_int_equal(attn_forward(&f.cfg, f.x, NULL, &res, &err), ATTN_OK);
    attn_result_free(&res);

    /* two more keys: more weights, more K and V, more memory */
    struct attn_config plain = f.cfg, more = f.cfg;
    plain.bias_kv = false;
    plain.resolved = more.resolved = false;
    more.zero_attn = true;
    plain.want = more.want = ATTN_WANT_WEIGHTS | ATTN_WANT_K;
    assert_int_equal(attn_config_resolve(&plain, &err), ATTN_OK);
    assert_int_equal(attn_config_resolve(&more, &err), ATTN_OK);
    assert_int_equal(more.n_keys, plain.n_keys + 2);
    /* weights [1][2][3][K] and k [1][K][4] hold 10 floats per key more,
     * and bias_k and bias_v are drawn without explicit params */
    more.params = plain.params = NULL;
    assert_true(attn_forward_bytes(&more) >= attn_forward_bytes(&plain) +
                                                 2 * 10 * sizeof(float) +
                                                 8 * sizeof(float));
    assert_true(attn_flops(&more) > attn_flops(&plain));
    fixture_free(&f);
}

/* Forward with want and threads; the chosen array copied out (NULL on
 * failure). */
static float *run_copy(const struct fixture *f, unsigned want, unsigned threads,
                       bool heads)
{
    struct attn_config cfg = f->cfg;
    cfg.want = want;
    cfg.threads = threads;
    struct attn_result res;
    struct attn_error err;
    if (attn_forward(&cfg, f->x, f->context, &res, &err) != ATTN_OK) {
        print_error("%s\n", err.message);
        return NULL;
    }
    const size_t count =
        cfg.batch * cfg.n_query * (heads ? cfg.heads * cfg.d_v : f->cfg.d_out);
    float *copy = malloc(count * sizeof *copy);
    memcpy(copy, heads ? res.heads_out : res.output, count * sizeof *copy);
    attn_result_free(&res);
    return copy;
}

/* A context of several key blocks whose K and V are not returned goes
 * key-outer (only one block of K and V held at a time); asking for K too
 * keeps every key at hand. Both orders fold the same key blocks in the
 * same order into each query block, so they agree to the bit, at any team
 * size. */
static void test_key_outer_matches_key_inner(void **state)
{
    (void)state;
    const struct feature_case cases[] = {
        {"self rope dropout gqa",
         {.batch = 2,
          .n_query = 700,
          .d_model = 32,
          .heads = 4,
          .kv_heads = 2,
          .dropout = 0.2f,
          .seed = 3,
          .positional = ATTN_POS_ROPE,
          .qkv_bias = true,
          .out_bias = true},
         false,
         true},
        {"self sinusoidal causal",
         {.n_query = 1100,
          .d_model = 24,
          .heads = 3,
          .causal = true,
          .positional = ATTN_POS_SINUSOIDAL},
         false,
         false},
        {"cross mask sinusoidal",
         {.batch = 2,
          .n_query = 300,
          .d_model = 16,
          .cross = true,
          .n_ctx = 1030,
          .d_ctx = 12,
          .heads = 2,
          .positional = ATTN_POS_SINUSOIDAL},
         true,
         true},
        {"causal context longer",
         {.n_query = 520,
          .d_model = 16,
          .cross = true,
          .n_ctx = 1600,
          .heads = 2,
          .causal = true},
         false,
         false},
        {"d_out differs",
         {.n_query = 600,
          .d_model = 20,
          .heads = 2,
          .d_k = 6,
          .d_v = 5,
          .d_out = 7},
         false,
         false},
        {"residual input no out_proj",
         {.n_query = 530,
          .d_model = 12,
          .heads = 3,
          .no_out_proj = true,
          .residual = ATTN_RESIDUAL_INPUT},
         false,
         false},
    };
    attn_blas_single_thread();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fixture f;
        fixture_init(&f, &cases[i].cfg, 77 + i, cases[i].mask,
                     cases[i].padding);
        const struct attn_config *c = &f.cfg;
        const size_t n_out = c->batch * c->n_query * c->d_out;
        const size_t n_heads = c->batch * c->n_query * c->heads * c->d_v;
        float *inner = run_copy(&f, ATTN_WANT_OUTPUT | ATTN_WANT_K, 1, false);
        float *inner_heads = run_copy(
            &f, ATTN_WANT_HEADS | ATTN_WANT_OUTPUT | ATTN_WANT_V, 2, true);
        assert_non_null(inner);
        assert_non_null(inner_heads);
        for (unsigned threads = 1; threads <= 3; threads++) {
            float *outer = run_copy(&f, ATTN_WANT_OUTPUT, threads, false);
            float *outer_heads =
                run_copy(&f, ATTN_WANT_HEADS | ATTN_WANT_OUTPUT, threads, true);
            assert_non_null(outer);
            assert_non_null(outer_heads);
            if (memcmp(inner, outer, n_out * sizeof *inner))
                fail_msg("%s: output differs key-outer, %u threads",
                         cases[i].name, threads);
            if (memcmp(inner_heads, outer_heads, n_heads * sizeof *inner))
                fail_msg("%s: heads_out differs key-outer, %u threads",
                         cases[i].name, threads);
            free(outer);
            free(outer_heads);
        }
        free(inner);
        free(inner_heads);
        fixture_free(&f);
    }
}

/* V from a value input of its own (kdim != vdim): the context's rows with
 * a zero column added, and v_proj.weight with a zero column, give the
 * output of V from the context itself; on the short path and on the
 * key-outer one. A value input is refused where it cannot mean that. */
static void test_value_input(void **state)
{
    (void)state;
    const struct attn_config shapes[] = {{.n_query = 5,
                                          .d_model = 8,
                                          .cross = true,
                                          .n_ctx = 7,
                                          .d_ctx = 6,
                                          .heads = 2,
                                          .qkv_bias = true,
                                          .want = ATTN_WANT_OUTPUT},
                                         {.batch = 2,
                                          .n_query = 300,
                                          .d_model = 16,
                                          .cross = true,
                                          .n_ctx = 1030,
                                          .d_ctx = 12,
                                          .heads = 2,
                                          .causal = true,
                                          .positional = ATTN_POS_ROPE,
                                          .want = ATTN_WANT_OUTPUT}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct attn_config cfg = shapes[s];
        struct attn_error err;
        assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
        const size_t b = cfg.batch, n = cfg.n_query, m = cfg.n_ctx;
        const size_t d = cfg.d_ctx, gv = cfg.kv_heads * cfg.d_v;
        float *x = malloc(b * n * cfg.d_model * sizeof *x);
        float *ctx = malloc(b * m * d * sizeof *ctx);
        float *val = calloc(b * m * (d + 1), sizeof *val);
        fill_normal(x, b * n * cfg.d_model, 1, 1.0f);
        fill_normal(ctx, b * m * d, 2, 1.0f);
        for (size_t r = 0; r < b * m; r++)
            memcpy(val + r * (d + 1), ctx + r * d, d * sizeof *val);
        struct attn_params p;
        assert_int_equal(attn_params_draw(&cfg, &p, &err), ATTN_OK);
        struct attn_result plain, split;
        cfg.params = &p;
        assert_int_equal(attn_forward(&cfg, x, ctx, &plain, &err), ATTN_OK);
        float *wide = calloc(gv * (d + 1), sizeof *wide);
        for (size_t r = 0; r < gv; r++)
            memcpy(wide + r * (d + 1), p.wv + r * d, d * sizeof *wide);
        struct attn_params with_value = p;
        with_value.wv = wide;
        struct attn_config vc = shapes[s];
        vc.value = val;
        vc.d_value = d + 1;
        assert_int_equal(attn_config_resolve(&vc, &err), ATTN_OK);
        vc.params = &with_value;
        assert_int_equal(attn_forward(&vc, x, ctx, &split, &err), ATTN_OK);
        const size_t outs = b * n * cfg.d_out;
        for (size_t i = 0; i < outs; i++)
            if (fabsf(plain.output[i] - split.output[i]) > 1e-5f)
                fail_msg("shape %zu, output %zu: %g from the context, %g from "
                         "the value input",
                         s, i, plain.output[i], split.output[i]);
        attn_result_free(&plain);
        attn_result_free(&split);
        attn_params_free(&p);
        free(wide);
        free(x);
        free(ctx);
        free(val);
    }
    /* refusals, each naming the value */
    const float one = 1;
    struct {
        struct attn_config cfg;
        const char *field;
    } bad[] = {
        {{.n_query = 2, .d_model = 4, .value = &one, .d_value = 1}, "value"},
        {{.n_query = 2, .d_model = 4, .cross = true, .n_ctx = 1, .value = &one},
         "d_value"},
        {{.mode = ATTN_MODE_BASIC,
          .n_query = 2,
          .d_model = 4,
          .cross = true,
          .n_ctx = 1,
          .value = &one,
          .d_value = 1},
         "value"},
        {{.n_query = 2,
          .d_model = 4,
          .cross = true,
          .n_ctx = 1,
          .positional = ATTN_POS_SINUSOIDAL,
          .value = &one,
          .d_value = 1},
         "value"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct attn_error err;
        assert_int_equal(attn_config_resolve(&bad[i].cfg, &err),
                         ATTN_E_INVALID);
        assert_string_equal(err.field, bad[i].field);
    }
}

static void test_flops(void **state)
{
    (void)state;
    struct attn_config cfg = {.n_query = 10, .d_model = 64, .heads = 8};
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    /* q, k, v, o projections 4 * 10*64*64, scores and PV 2 * 8*10*10*8 */
    assert_true(attn_flops(&cfg) ==
                2.0 * (4 * 10 * 64 * 64 + 2 * 8 * 10 * 10 * 8));
}

/* full_path: an output alone has the bits of the output of a call that
 * also returns the weights, on an input long enough that it would
 * otherwise go key-outer (and so with other bits, which is checked too,
 * so that the test shows the flag doing something). */
static void test_full_path_output_bits(void **state)
{
    (void)state;
    enum { N = 700, D = 48 };
    float *x = malloc(N * D * sizeof *x);
    for (size_t i = 0; i < N * D; i++)
        x[i] = (float)((int)(i * 7919 % 101) - 50) / 60.0f;
    struct attn_result with_weights, full, streamed;
    struct attn_error err;
    const struct attn_config base = {.mode = ATTN_MODE_PROJECTED,
                                     .n_query = N,
                                     .d_model = D,
                                     .heads = 4,
                                     .seed = 5,
                                     .threads = 2};
    struct attn_config a = base, b = base, c = base;
    a.want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS;
    b.want = ATTN_WANT_OUTPUT;
    b.full_path = true;
    c.want = ATTN_WANT_OUTPUT;
    assert_int_equal(attn_forward(&a, x, NULL, &with_weights, &err), ATTN_OK);
    assert_int_equal(attn_forward(&b, x, NULL, &full, &err), ATTN_OK);
    assert_int_equal(attn_forward(&c, x, NULL, &streamed, &err), ATTN_OK);
    assert_null(full.weights);
    assert_memory_equal(full.output, with_weights.output,
                        N * D * sizeof(float));
    assert_true(memcmp(streamed.output, with_weights.output,
                       N * D * sizeof(float)) != 0);
    /* and it holds less than the call with the weights */
    assert_int_equal(attn_config_resolve(&a, &err), ATTN_OK);
    assert_int_equal(attn_config_resolve(&b, &err), ATTN_OK);
    assert_true(attn_forward_bytes(&b) < attn_forward_bytes(&a));
    attn_result_free(&with_weights);
    attn_result_free(&full);
    attn_result_free(&streamed);
    free(x);
}

/* ------------------------------------------------------------ cancelling */

struct canceller {
    atomic_bool *flag;
    long after_ms;
};

static void *raise_later(void *arg)
{
    const struct canceller *c = arg;
    nanosleep(&(struct timespec){.tv_sec = c->after_ms / 1000,
                                 .tv_nsec = (c->after_ms % 1000) * 1000000L},
              NULL);
    atomic_store(c->flag, true);
    return NULL;
}

/* A raised flag stops a call between units of work, both key orders, and
 * leaves nothing behind; a flag left down changes nothing. */
static void test_cancel_stops_between_units(void **state)
{
    (void)state;
    const size_t n = 2048, d = 64;
    float *x = malloc(n * d * sizeof *x);
    fill_normal(x, n * d, 5, 1.0f);
    const unsigned wants[] = {ATTN_WANT_WEIGHTS, ATTN_WANT_OUTPUT};
    for (size_t w = 0; w < 2; w++) {
        atomic_bool flag = true;
        struct attn_config cfg = {.n_query = n,
                                  .d_model = d,
                                  .heads = 4,
                                  .want = wants[w],
                                  .threads = 2,
                                  .cancel = &flag};
        struct attn_result res;
        struct attn_error err;
        assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err),
                         ATTN_E_CANCELLED);
        assert_null(res.weights);
        assert_null(res.output);
        /* raised while it runs: it stops early */
        atomic_store(&flag, false);
        cfg.n_query = n;
        struct canceller c = {&flag, 5};
        pthread_t tid;
        pthread_create(&tid, NULL, raise_later, &c);
        for (int i = 0; i < 50 && !atomic_load(&flag); i++) {
            const attn_status st = attn_forward(&cfg, x, NULL, &res, &err);
            if (st == ATTN_OK)
                attn_result_free(&res);
            else
                assert_int_equal(st, ATTN_E_CANCELLED);
        }
        pthread_join(tid, NULL);
        assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err),
                         ATTN_E_CANCELLED);
        atomic_store(&flag, false);
        assert_int_equal(attn_forward(&cfg, x, NULL, &res, &err), ATTN_OK);
        attn_result_free(&res);
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_feature_matrix),
        cmocka_unit_test(test_decoder_options),
        cmocka_unit_test(test_decoder_option_errors),
        cmocka_unit_test(test_measure_parts),
        cmocka_unit_test(test_precision_at_scale),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_huge_logits_are_stable),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_nonfinite_inputs_rejected),
        cmocka_unit_test(test_overflowing_products_rejected),
        cmocka_unit_test(test_fully_masked_reported_without_heads),
        cmocka_unit_test(test_params_follow_spec),
        cmocka_unit_test(test_bit_identical_across_runs_and_threads),
        cmocka_unit_test(test_parity_options_bit_identical),
        cmocka_unit_test(test_pool_bit_identical),
        cmocka_unit_test(test_pool_rejects_sizes),
        cmocka_unit_test(test_parity_options_checked),
        cmocka_unit_test(test_key_outer_matches_key_inner),
        cmocka_unit_test(test_value_input),
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_full_path_output_bits),
        cmocka_unit_test(test_cancel_stops_between_units),
    };
    return cmocka_run_group_tests_name("forward", tests, NULL, NULL);
}
