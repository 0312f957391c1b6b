/*
 * test_transformer.c - the transformer block of transformer.h for every
 * choice its struct xf_arch offers, against a plain-loop float64 stack
 * written here from the description alone: norms after (BERT) or before
 * (GPT-2, LLaMA) each sublayer, LayerNorm or RMSNorm, a plain or gated
 * feed-forward with each activation, learned positions with or without
 * token types or rotary ones, causal or not, grouped KV heads with a
 * head size apart from hidden / heads, biases or none, an embedding norm,
 * a final norm. Also RMSNorm and SiLU on their own, and the plan's
 * refusals of a model that does not match its arch. (test_bert_memory
 * holds the plan's byte count to what a pass allocates, for a pre-norm
 * gated model too.)
 *
 * Tolerances (float32 against float64), as test_bert.c: weights and
 * rollout within 2e-5 absolute; hidden states within 1e-4 + 1e-4 *
 * |reference|.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "head_stats.h"
#include "sampling.h"
#include "random_model.h"
#include "support.h"
#include "transformer.h"
#include "transformer_units.h"
#include "vecmath.h"
#include "widen.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4

/* ------------------------------------------------------- the pieces */

static void test_rms_norm_values(void **state)
{
    (void)state;
    const float x[] = {1, -2, 3, 0.5f, 4, 4, 4, 4};
    const float w[] = {1, 0.5f, 2, -1};
    float y[8];
    xf_rms_norm(x, 2, 4, w, 1e-6f, y);
    // row 0: mean of squares (1 + 4 + 9 + 0.25) / 4 = 3.5625
    const double r0 = 1.0 / sqrt(3.5625 + 1e-6), r1 = 1.0 / sqrt(16 + 1e-6);
    const double want[] = {1 * r0, -2 * r0 * 0.5, 3 * r0 * 2,   -0.5 * r0,
                           4 * r1, 4 * r1 * 0.5,  4 * r1 * 2.0, -4 * r1};
    assert_true(max_tol_ratio(y, want, 8, 1e-7, 1e-6) <= 1.0);
    // in place gives the same
    float z[8];
    memcpy(z, x, sizeof z);
    xf_rms_norm(z, 2, 4, w, 1e-6f, z);
    assert_memory_equal(z, y, sizeof y);
}

static void test_silu_values(void **state)
{
    (void)state;
    const float x[] = {-100, -20, -3, -1, -0.5f, 0, 0.5f, 1, 3, 20, 100};
    enum { N = sizeof x / sizeof x[0] };
    double want[N];
    for (int i = 0; i < N; i++)
        want[i] = x[i] / (1.0 + exp(-(double)x[i]));
    float got[N];
    memcpy(got, x, sizeof x);
    xf_activation(XF_ACT_SILU, got, N);
    assert_true(max_tol_ratio(got, want, N, 1e-20, 1e-5) <= 1.0);
    // every build gives the same bits, on a long run with a tail
    static float x8[1003], got8[1003], other[1003];
    fill_normal(x8, 1003, 11, 8.0f);
    memcpy(got8, x8, sizeof x8);
    xf_activation(XF_ACT_SILU, got8, 1003);
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available(isa))
            continue;
        memcpy(other, x8, sizeof x8);
        xf_activation_isa(isa, XF_ACT_SILU, other, 1003);
        assert_memory_equal(other, got8, sizeof got8);
    }
}

/* ---------------------------------------- a plain float64 stack */

static void ref_norm(const struct xf_model *m, double *x, size_t rows,
                     const float *w, const float *b)
{
    const size_t H = m->hidden;
    for (size_t r = 0; r < rows; r++) {
        double *v = x + r * H, mean = 0, var = 0;
        if (m->arch.norm == XF_NORM_LAYER) {
            for (size_t c = 0; c < H; c++)
                mean += v[c];
            mean /= (double)H;
        }
        for (size_t c = 0; c < H; c++)
            var += (v[c] - mean) * (v[c] - mean);
        var /= (double)H;
        for (size_t c = 0; c < H; c++)
            v[c] = (v[c] - mean) / sqrt(var + m->norm_eps) * w[c] +
                   (b ? b[c] : 0.0);
    }
}

static void ref_lin(const double *x, size_t rows, size_t in, const float *w,
                    const float *b, size_t out, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++)
                acc += x[r * in + i] * (double)w[o * in + i];
            y[r * out + o] = acc;
        }
}

static double ref_act(xf_act act, double x)
{
    switch (act) {
    case XF_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case XF_ACT_GELU_TANH:
        return 0.5 * x *
               (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) *
                           (x + 0.044715 * x * x * x)));
    default: return x / (1.0 + exp(-x));
    }
}

/* Rotary positions as rope says: pairs (2i, 2i + 1) of each head's
 * first dims values, or (i, i + dims/2) as rotate_half pairs them, turned
 * by pos * base^(-2i / dims) or by the given frequencies, cos and sin
 * times the factor. x: [n][heads * D] */
static void ref_rope(const struct xf_model *m, const struct attn_rotary *rope,
                     double *x, size_t n, size_t heads)
{
    const size_t D = m->head_dim, dims = rope->dims ? rope->dims : D;
    const bool half = rope->pairing == ATTN_ROPE_HALF;
    const double base = rope->base ? rope->base : 10000.0;
    const double f = rope->factor ? rope->factor : 1.0;
    for (size_t r = 0; r < n; r++)
        for (size_t a = 0; a < heads; a++)
            for (size_t i = 0; i < dims / 2; i++) {
                const double freq =
                    rope->inv_freq ? rope->inv_freq[i]
                                   : pow(base, -(double)(2 * i) / (double)dims);
                const double angle = (double)r * freq;
                double *h = x + r * heads * D + a * D;
                double *p0 = half ? h + i : h + 2 * i;
                double *p1 = half ? h + i + dims / 2 : h + 2 * i + 1;
                const double a0 = *p0, a1 = *p1;
                *p0 = f * (a0 * cos(angle) - a1 * sin(angle));
                *p1 = f * (a0 * sin(angle) + a1 * cos(angle));
            }
}

/* Each head of x RMS-normed with w, or with whole each row of x, every
 * head at once. x: [n][heads * D] */
static void ref_head_norm(const struct xf_model *m, double *x, size_t n,
                          size_t heads, const float *w, bool whole)
{
    const size_t D = whole ? heads * m->head_dim : m->head_dim;
    if (whole)
        heads = 1;
    for (size_t r = 0; r < n * heads; r++) {
        double *h = x + r * D, sq = 0;
        for (size_t c = 0; c < D; c++)
            sq += h[c] * h[c];
        const double rms = sqrt(sq / (double)D + m->norm_eps);
        for (size_t c = 0; c < D; c++)
            h[c] = h[c] / rms * w[c];
    }
}

/* attention of layer l on in: weights [h][n][n] into w, output [n][H] */
static void ref_attention(const struct xf_model *m, size_t l, const double *in,
                          size_t n, double *w, double *out)
{
    const struct xf_layer *y = &m->layer[l];
    const struct xf_layer_kind *lk =
        &m->kind[m->layer_kind ? m->layer_kind[l] : 0];
    const size_t window = lk->window;
    const size_t H = m->hidden, h = m->heads, g = m->kv_heads, D = m->head_dim;
    double *q = calloc(n * h * D, 8), *k = calloc(n * g * D, 8),
           *v = calloc(n * g * D, 8), *ctx = calloc(n * h * D, 8);
    ref_lin(in, n, H, test_values(y->q_w), y->q_b, h * D, q);
    ref_lin(in, n, H, test_values(y->k_w), y->k_b, g * D, k);
    ref_lin(in, n, H, test_values(y->v_w), y->v_b, g * D, v);
    if (m->arch.qk_norm || m->arch.qk_norm_whole) {
        ref_head_norm(m, q, n, h, y->q_norm_w, m->arch.qk_norm_whole);
        ref_head_norm(m, k, n, g, y->k_norm_w, m->arch.qk_norm_whole);
    }
    if (m->arch.positions == XF_POS_ROTARY) {
        // past long_after, the long rotary turns every position
        const struct attn_rotary *rope =
            lk->long_after && n > lk->long_after ? &lk->long_rope : &lk->rope;
        ref_rope(m, rope, q, n, h);
        ref_rope(m, rope, k, n, g);
    }
    for (size_t a = 0; a < h; a++) {
        const size_t kv = a / (h / g); /* the group of head a */
        for (size_t i = 0; i < n; i++) {
            double *row = w + (a * n + i) * n, most = -1e300, sum = 0;
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t c = 0; c < D; c++)
                    s += q[i * h * D + a * D + c] * k[j * g * D + kv * D + c];
                row[j] =
                    m->attn_scale ? s * m->attn_scale : s / sqrt((double)D);
                // soft-capped before the mask
                if (m->attn_softcap)
                    row[j] = m->attn_softcap * tanh(row[j] / m->attn_softcap);
                if ((m->arch.causal && j > i) || (window && j + window <= i))
                    row[j] = -INFINITY;
                most = row[j] > most ? row[j] : most;
            }
            for (size_t j = 0; j < n; j++)
                sum += row[j] = exp(row[j] - most);
            for (size_t j = 0; j < n; j++) {
                row[j] /= sum;
                for (size_t c = 0; c < D; c++)
                    ctx[i * h * D + a * D + c] +=
                        row[j] * v[j * g * D + kv * D + c];
            }
        }
    }
    ref_lin(ctx, n, h * D, test_values(y->o_w), y->o_b, H, out);
    free(q);
    free(k);
    free(v);
    free(ctx);
}

/* NULL, or where ref_stack() keeps what each layer's attention and
 * feed-forward add to the stream, [L][n][H] each */
static double *ref_attn_out, *ref_mlp_out;

/* weights [L][h][n][n], hidden [L+1][n][H] in transformers' order (with a
 * final norm, the last entry is after it) */
static void ref_stack(const struct xf_model *m, const uint32_t *ids,
                      const uint8_t *types, size_t n, double *weights,
                      double *hidden)
{
    const size_t H = m->hidden, J = m->intermediate;
    const xf_norm_place place = m->arch.norm_place;
    const bool before = place == XF_NORM_BEFORE || place == XF_NORM_SANDWICH;
    const bool outs = place == XF_NORM_SANDWICH || place == XF_NORM_OUTPUT;
    double *normed = calloc(n * H, 8), *a = calloc(n * H, 8),
           *x1 = calloc(n * H, 8), *up = calloc(n * J, 8),
           *gate = calloc(n * J, 8);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < H; c++) {
            double e = test_values(m->word_emb)[ids[i] * H + c];
            if (m->pos_emb.data)
                e += test_values(m->pos_emb)[i * H + c];
            if (m->type_emb.data)
                e += test_values(m->type_emb)[(types ? types[i] : 0) * H + c];
            hidden[i * H + c] = m->embed_scale ? e * m->embed_scale : e;
        }
    if (m->arch.embed_norm)
        ref_norm(m, hidden, n, m->embed_norm_w, m->embed_norm_b);
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &m->layer[l];
        const double *h_in = hidden + l * n * H;
        double *h_out = hidden + (l + 1) * n * H;
        memcpy(normed, h_in, n * H * 8);
        if (before)
            ref_norm(m, normed, n, y->attn_norm_w, y->attn_norm_b);
        ref_attention(m, l, normed, n, weights + l * m->heads * n * n, a);
        if (outs)
            ref_norm(m, a, n, y->attn_out_norm_w, y->attn_out_norm_b);
        if (ref_attn_out)
            memcpy(ref_attn_out + l * n * H, a, n * H * 8);
        for (size_t e = 0; e < n * H; e++)
            x1[e] = a[e] + h_in[e];
        if (place == XF_NORM_AFTER)
            ref_norm(m, x1, n, y->attn_norm_w, y->attn_norm_b);
        // a parallel residual's feed-forward reads the layer's input
        memcpy(normed, m->arch.parallel ? h_in : x1, n * H * 8);
        if (before)
            ref_norm(m, normed, n, y->ffn_norm_w, y->ffn_norm_b);
        ref_lin(normed, n, H, test_values(y->up_w), y->up_b, J, up);
        if (m->arch.ffn == XF_FFN_GATED) {
            ref_lin(normed, n, H, test_values(y->gate_w), y->gate_b, J, gate);
            for (size_t e = 0; e < n * J; e++)
                up[e] *= ref_act(m->arch.act, gate[e]);
        } else {
            for (size_t e = 0; e < n * J; e++)
                up[e] = ref_act(m->arch.act, up[e]);
        }
        ref_lin(up, n, J, test_values(y->down_w), y->down_b, H, h_out);
        if (outs)
            ref_norm(m, h_out, n, y->ffn_out_norm_w, y->ffn_out_norm_b);
        if (ref_mlp_out)
            memcpy(ref_mlp_out + l * n * H, h_out, n * H * 8);
        for (size_t e = 0; e < n * H; e++)
            h_out[e] += x1[e];
        if (place == XF_NORM_AFTER)
            ref_norm(m, h_out, n, y->ffn_norm_w, y->ffn_norm_b);
    }
    if (m->arch.final_norm)
        ref_norm(m, hidden + m->layers * n * H, n, m->final_norm_w,
                 m->final_norm_b);
    free(normed);
    free(a);
    free(x1);
    free(up);
    free(gate);
}

/* --------------------------------------------------------- the archs */

/* What check_arch() gives the model besides its arch: kind 0's rotary
 * pairing, frequencies and window, and with alternate, a second kind of
 * layer (every odd one) with its own window and rotary base; with
 * long_after, kind 0's long rotary (long_freq, long_factor). */
static bool interleaved, alternate;
static const double *inv_freq, *long_freq;
static size_t window, rope_dims, long_after;
static double rope_factor, long_factor;
static float attn_scale, attn_softcap, embed_scale;

/* The stack against the reference, every array, on n tokens. */
static void check_arch(const struct xf_arch *a, size_t heads, size_t kv_heads,
                       size_t head_dim, size_t n, unsigned threads)
{
    struct test_model o;
    test_model_make(&o, a, 3, heads, kv_heads, head_dim, 24, 40, 17 + n);
    static const uint8_t odd_layers[3] = {0, 1, 0};
    if (a->positions == XF_POS_ROTARY)
        o.m.kind[0].rope = (struct attn_rotary){
            .base = 500.0,
            .pairing = interleaved ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALF,
            .dims = rope_dims,
            .inv_freq = inv_freq,
            .factor = rope_factor};
    o.m.kind[0].window = window;
    if (long_after) {
        o.m.kind[0].long_after = long_after;
        o.m.kind[0].long_rope = o.m.kind[0].rope;
        o.m.kind[0].long_rope.inv_freq = long_freq;
        o.m.kind[0].long_rope.factor = long_factor;
    }
    if (alternate) {
        o.m.kinds = 2;
        o.m.kind[1] = o.m.kind[0];
        o.m.kind[1].window = 0;
        o.m.kind[1].rope.base = 20.0;
        o.m.kind[1].rope.inv_freq = NULL;
        o.m.layer_kind = odd_layers;
    }
    o.m.attn_scale = attn_scale;
    o.m.attn_softcap = attn_softcap;
    o.m.embed_scale = embed_scale;
    const struct xf_model *m = &o.m;
    uint32_t ids[80];
    uint8_t types[80];
    for (size_t i = 0; i < n; i++) {
        ids[i] = (uint32_t)((i * 13 + 5) % 40);
        types[i] = i >= n / 2;
    }
    const size_t L = m->layers, h = m->heads, H = m->hidden;
    double *w = calloc(L * h * n * n, 8), *hs = calloc((L + 1) * n * H, 8);
    ref_stack(m, ids, a->token_types ? types : NULL, n, w, hs);
    const struct xf_run run = {.ids = ids,
                               .type_ids = a->token_types ? types : NULL,
                               .n = n,
                               .want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS |
                                       XF_WANT_HIDDEN,
                               .layer = XF_ALL_LAYERS,
                               .threads = threads};
    struct xf_result r;
    struct attn_error err = {0};
    if (test_xf_forward(m, &run, NULL, &r, &err))
        fail_msg("xf_forward: %s", err.message);
    if (!(max_abs_diff(r.weights, w, L * h * n * n) <= WEIGHT_TOL))
        fail_msg("weights differ by %g",
                 max_abs_diff(r.weights, w, L * h * n * n));
    const double worst = max_tol_ratio(r.hidden_states, hs, (L + 1) * n * H,
                                       HIDDEN_ATOL, HIDDEN_RTOL);
    if (!(worst <= 1.0))
        fail_msg("hidden states at %.3g of the tolerance", worst);
    // causal: nothing above the diagonal; nothing outside the window
    for (size_t e = 0; e < L * h * n * n; e++) {
        const size_t i = e / n % n, j = e % n;
        const size_t l = e / (h * n * n);
        const size_t w_l = m->kind[m->layer_kind ? m->layer_kind[l] : 0].window;
        if ((a->causal && j > i) || (w_l && j + w_l <= i))
            assert_true(r.weights[e] == 0.0f);
    }
    xf_result_free(&r);
    free(w);
    free(hs);
    test_model_free(&o);
}

static void test_bert_block(void **state)
{
    (void)state;
    const struct xf_arch a = test_bert_arch(XF_ACT_GELU);
    check_arch(&a, 4, 4, 6, 9, 1);
    check_arch(&a, 4, 4, 6, 70, 2);
}

static void test_gpt2_arch(void **state)
{
    (void)state;
    const struct xf_arch a = random_gpt2_arch();
    check_arch(&a, 4, 4, 6, 11, 1);
    check_arch(&a, 4, 4, 6, 66, 2);
}

static void test_llama_arch(void **state)
{
    (void)state;
    // grouped KV heads, a head size apart from hidden / heads
    const struct xf_arch a = random_llama_arch();
    check_arch(&a, 4, 2, 8, 12, 1);
    check_arch(&a, 6, 1, 4, 67, 2);
    // the interleaved pairing is a choice too
    interleaved = true;
    check_arch(&a, 4, 2, 8, 12, 1);
    interleaved = false;
    // scaled frequencies, as LLaMA 3's rope_scaling makes them
    static const double freq[4] = {1.0, 0.25, 0.01, 0.0001};
    inv_freq = freq;
    check_arch(&a, 4, 2, 8, 20, 1);
    inv_freq = NULL;
}

/* Mistral's sliding window, shorter than the input. */
static void test_window(void **state)
{
    (void)state;
    const struct xf_arch a = random_llama_arch();
    window = 4;
    check_arch(&a, 4, 2, 8, 13, 1);
    check_arch(&a, 4, 2, 8, 70, 2);
    window = 0;
}

/* Qwen3's q and k norms before the rotation, a head size of 16 where
 * hidden / heads is 6. */
static void test_qk_norm(void **state)
{
    (void)state;
    struct xf_arch a = random_llama_arch();
    a.qk_norm = true;
    check_arch(&a, 4, 2, 16, 15, 1);
    a.qkv_bias = true; /* Qwen2's biases, which come before the norm */
    check_arch(&a, 4, 2, 16, 15, 2);
}

/* OLMo 2's q and k norms, each over the whole projection (every head at
 * once), before the rotation, under its norms on the sublayers' outputs
 * alone; then beside biases. */
static void test_qk_norm_whole(void **state)
{
    (void)state;
    struct xf_arch a = random_llama_arch();
    a.qk_norm_whole = true;
    a.norm_place = XF_NORM_OUTPUT;
    check_arch(&a, 4, 2, 8, 15, 1);
    check_arch(&a, 4, 2, 8, 70, 2);
    a.qkv_bias = true;
    a.norm_place = XF_NORM_BEFORE;
    check_arch(&a, 6, 3, 4, 17, 2);
}

/* Gemma 2's block: norms on both sides of each sublayer, scores scaled
 * by a factor of their own and soft-capped, embeddings scaled, and layers
 * of two kinds (a sliding window and one rotary base, then global with
 * another), GeGLU; then OLMo 2's norms on the outputs alone, and a
 * partial rotary with a factor (GPT-NeoX's, longrope's). */
static void test_layer_kinds_and_sandwich(void **state)
{
    (void)state;
    struct xf_arch a = random_llama_arch();
    a.norm_place = XF_NORM_SANDWICH;
    a.act = XF_ACT_GELU_TANH;
    alternate = true;
    window = 4;
    attn_scale = 0.4f;
    attn_softcap = 1.2f;
    embed_scale = 4.9f;
    check_arch(&a, 4, 1, 8, 13, 1);
    check_arch(&a, 4, 2, 8, 70, 2);
    alternate = false;
    window = 0;
    attn_scale = attn_softcap = embed_scale = 0.0f;
    a.norm_place = XF_NORM_OUTPUT;
    check_arch(&a, 4, 2, 8, 14, 1);
    a.norm_place = XF_NORM_BEFORE;
    rope_dims = 4;
    rope_factor = 1.3;
    check_arch(&a, 4, 2, 8, 15, 2);
    interleaved = true;
    check_arch(&a, 4, 2, 8, 15, 1);
    interleaved = false;
    rope_dims = 0;
    rope_factor = 0.0;
}

static struct xf_arch neox_arch(void)
{
    return (struct xf_arch){.norm = XF_NORM_LAYER,
                            .norm_place = XF_NORM_BEFORE,
                            .ffn = XF_FFN_PLAIN,
                            .act = XF_ACT_GELU,
                            .positions = XF_POS_ROTARY,
                            .final_norm = true,
                            .causal = true,
                            .qkv_bias = true,
                            .out_bias = true,
                            .ffn_bias = true,
                            .parallel = true};
}

/* GPT-NeoX's block: LayerNorm, exact GELU, a partial rotary, every bias,
 * and the parallel residual h + attn(ln1(h)) + mlp(ln2(h)); then the same
 * sequential, and a gated RMSNorm block in parallel. */
static void test_parallel_residual(void **state)
{
    (void)state;
    struct xf_arch a = neox_arch();
    rope_dims = 2;
    check_arch(&a, 4, 4, 6, 13, 1);
    check_arch(&a, 3, 3, 8, 66, 2);
    a.parallel = false;
    check_arch(&a, 3, 3, 8, 14, 2);
    rope_dims = 0;
    a = random_llama_arch();
    a.parallel = true;
    check_arch(&a, 4, 2, 8, 12, 1);
}

/* A parallel residual's activations: the stream entering each layer, what
 * the attention adds and what the feed-forward adds, each the float64
 * stack's, and the three summing to the next layer's stream; an ablation
 * of layer 0's heads leaves its feed-forward's output as it was (it reads
 * the layer's input, not the attention's sum), where a sequential block's
 * moves. */
static void test_parallel_activations(void **state)
{
    (void)state;
    enum { L = 3, N = 9, H = 24 };
    for (int parallel = 1; parallel >= 0; parallel--) {
        struct xf_arch a = neox_arch();
        a.parallel = parallel;
        struct test_model o;
        test_model_make(&o, &a, L, 4, 4, 6, H, 40, 61);
        o.m.kind[0].rope = (struct attn_rotary){
            .base = 500.0, .pairing = ATTN_ROPE_HALF, .dims = 2};
        const uint32_t ids[N] = {3, 1, 4, 1, 5, 9, 2, 6, 5};
        double *w = calloc(L * 4 * N * N, 8), *hs = calloc((L + 1) * N * H, 8);
        ref_attn_out = calloc(L * N * H, 8);
        ref_mlp_out = calloc(L * N * H, 8);
        ref_stack(&o.m, ids, NULL, N, w, hs);
        struct xf_run run = {.ids = ids,
                             .n = N,
                             .want = XF_WANT_ACTIVATIONS | XF_WANT_HIDDEN,
                             .layer = XF_ALL_LAYERS,
                             .threads = 2,
                             .capture_position = XF_ALL};
        struct xf_result r;
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
        // the stream entering each layer is the hidden state before it
        assert_true(max_tol_ratio(r.resid, hs, L * N * H, HIDDEN_ATOL,
                                  HIDDEN_RTOL) <= 1.0);
        assert_true(max_tol_ratio(r.attn_out, ref_attn_out, L * N * H,
                                  HIDDEN_ATOL, HIDDEN_RTOL) <= 1.0);
        assert_true(max_tol_ratio(r.mlp_out, ref_mlp_out, L * N * H,
                                  HIDDEN_ATOL, HIDDEN_RTOL) <= 1.0);
        for (size_t l = 0; l < L; l++)
            for (size_t e = 0; e < N * H; e++) {
                const float sum = r.resid[l * N * H + e] +
                                  r.attn_out[l * N * H + e] +
                                  r.mlp_out[l * N * H + e];
                assert_true(fabsf(sum - r.resid[(l + 1) * N * H + e]) <
                            1e-4f * (1.0f + fabsf(sum)));
            }
        // layer 0's heads ablated
        const struct xf_edit zero = {.site = XF_SITE_Z,
                                     .op = XF_EDIT_ZERO,
                                     .layer = 0,
                                     .head = XF_ALL,
                                     .position = XF_ALL};
        run.edits = &zero;
        run.n_edits = 1;
        struct xf_result e;
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &e, NULL), ATTN_OK);
        double moved = 0.0, attn_moved = 0.0;
        for (size_t i = 0; i < N * H; i++) {
            moved = fmax(moved, fabs(e.mlp_out[i] - r.mlp_out[i]));
            attn_moved = fmax(attn_moved, fabs(e.attn_out[i] - r.attn_out[i]));
        }
        // (out - x1 rounds as float32 does: the same to 1e-5, not bits)
        assert_true(attn_moved > 0.1);
        if (parallel)
            assert_true(moved < 1e-5);
        else
            assert_true(moved > 0.01);
        xf_result_free(&e);
        xf_result_free(&r);
        free(ref_attn_out);
        free(ref_mlp_out);
        ref_attn_out = ref_mlp_out = NULL;
        free(w);
        free(hs);
        test_model_free(&o);
    }
}

/* The value-weighted norms of a hooked pass (one with an edit) are of
 * each head through W_O, as a plain pass's: below the edited layer they
 * are the plain pass's. */
static void test_value_weighted_hooked(void **state)
{
    (void)state;
    enum { L = 3, N = 7 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, 4, 2, 8, 24, 40, 29);
    const uint32_t ids[N] = {3, 1, 4, 1, 5, 9, 2};
    struct xf_run run = {.ids = ids,
                         .n = N,
                         .want = XF_WANT_VALUE_WEIGHTED,
                         .layer = XF_ALL_LAYERS,
                         .threads = 2};
    struct xf_result plain, hooked;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &plain, NULL), ATTN_OK);
    const struct xf_edit last = {.site = XF_SITE_Z,
                                 .op = XF_EDIT_ZERO,
                                 .layer = L - 1,
                                 .head = 1,
                                 .position = XF_ALL};
    run.edits = &last;
    run.n_edits = 1;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &hooked, NULL), ATTN_OK);
    const size_t per_layer = 4 * N * N;
    double far = 0.0;
    for (size_t e = 0; e < (L - 1) * per_layer; e++)
        far = fmax(far, fabs(hooked.measures.value_weighted[e] -
                             plain.measures.value_weighted[e]) /
                            (1.0 + fabs(plain.measures.value_weighted[e])));
    assert_true(far < 1e-5);
    xf_result_free(&plain);
    xf_result_free(&hooked);
    test_model_free(&o);
}

/* Phi-3's longrope: a partial rotary whose frequencies and factor are
 * the short ones up to long_after positions and the long ones past it,
 * every position of a longer run turned by the long ones; with grouped
 * heads and a window, as Phi-3.5 has. The two rotaries give other
 * numbers, so the reference would catch the wrong one. */
static const double short_freq[2] = {1.0, 0.05}, long_freqs[2] = {0.6, 0.01};

static void test_longrope(void **state)
{
    (void)state;
    const struct xf_arch a = random_llama_arch();
    rope_dims = 4;
    inv_freq = short_freq;
    rope_factor = 1.2;
    long_freq = long_freqs;
    long_factor = 1.2;
    long_after = 9;
    window = 7;
    check_arch(&a, 4, 2, 8, 9, 1);  /* short, at the boundary */
    check_arch(&a, 4, 2, 8, 10, 2); /* long, one past it */
    check_arch(&a, 4, 2, 8, 66, 2);
    window = 0;
    // the same model and input under its two rotaries
    struct test_model o;
    test_model_make(&o, &a, 2, 4, 2, 8, 24, 40, 8);
    o.m.kind[0].rope = (struct attn_rotary){.base = 500.0,
                                            .pairing = ATTN_ROPE_HALF,
                                            .dims = 4,
                                            .inv_freq = short_freq,
                                            .factor = 1.2};
    o.m.kind[0].long_rope = o.m.kind[0].rope;
    o.m.kind[0].long_rope.inv_freq = long_freqs;
    const uint32_t ids[10] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    const struct xf_run run = {.ids = ids,
                               .n = 10,
                               .want = XF_WANT_WEIGHTS,
                               .layer = XF_ALL_LAYERS,
                               .threads = 1};
    struct xf_result s, l;
    o.m.kind[0].long_after = 10; /* ten positions are short */
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &s, NULL), ATTN_OK);
    o.m.kind[0].long_after = 9; /* ten are long */
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &l, NULL), ATTN_OK);
    double most = 0.0;
    for (size_t e = 0; e < 2 * 4 * 10 * 10; e++)
        most = fmax(most, fabs(s.weights[e] - l.weights[e]));
    assert_true(most > 1e-3);
    xf_result_free(&s);
    xf_result_free(&l);
    // a long rotary the core cannot resolve is refused with the model,
    // not by the first run that grows past long_after
    struct xf_plan plan;
    struct attn_error err;
    o.m.kind[0].long_rope.dims = 3;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_dims");
    o.m.kind[0].long_rope.dims = 4;
    o.m.kind[0].long_after = 0; /* a long rotary without its length */
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "long_rope");
    test_model_free(&o);
    rope_dims = 0;
    inv_freq = long_freq = NULL;
    rope_factor = long_factor = 0.0;
    long_after = 0;
}

/* Each choice apart from the others, on a BERT-like base. */
static void test_each_choice(void **state)
{
    (void)state;
    struct xf_arch a = test_bert_arch(XF_ACT_GELU);
    a.norm = XF_NORM_RMS;
    check_arch(&a, 4, 4, 6, 10, 1);
    a = test_bert_arch(XF_ACT_SILU);
    a.ffn = XF_FFN_GATED;
    check_arch(&a, 4, 4, 6, 10, 1);
    a = test_bert_arch(XF_ACT_GELU);
    a.causal = true;
    a.final_norm = true;
    check_arch(&a, 4, 4, 6, 10, 1);
    a = test_bert_arch(XF_ACT_GELU);
    a.token_types = false;
    a.embed_norm = false;
    a.qkv_bias = a.ffn_bias = false;
    check_arch(&a, 4, 4, 6, 10, 1);
}

/* Where the norms sit and what the last hidden state is matter: the
 * same tensors read as post-norm, or without the final norm, give other
 * numbers, so the reference above would catch either mistake. */
static void test_conventions_have_teeth(void **state)
{
    (void)state;
    struct xf_arch a = random_gpt2_arch();
    struct test_model o;
    test_model_make(&o, &a, 2, 4, 4, 6, 24, 40, 3);
    const uint32_t ids[] = {1, 2, 3, 4, 5, 6};
    const struct xf_run run = {
        .ids = ids, .n = 6, .want = XF_WANT_HIDDEN, .layer = XF_ALL_LAYERS};
    struct xf_result pre, post, no_final;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &pre, NULL), ATTN_OK);
    o.m.arch.norm_place = XF_NORM_AFTER;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &post, NULL), ATTN_OK);
    o.m.arch.norm_place = XF_NORM_BEFORE;
    o.m.arch.final_norm = false;
    const float *w = o.m.final_norm_w, *b = o.m.final_norm_b;
    o.m.final_norm_w = o.m.final_norm_b = NULL;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &no_final, NULL),
                     ATTN_OK);
    o.m.final_norm_w = w;
    o.m.final_norm_b = b;
    const size_t nh = 6 * 24, last = 2 * nh;
    double far_post = 0, far_final = 0, same_inner = 0;
    for (size_t e = 0; e < nh; e++) {
        far_post = fmax(far_post, fabs(pre.hidden_states[last + e] -
                                       post.hidden_states[last + e]));
        far_final = fmax(far_final, fabs(pre.hidden_states[last + e] -
                                         no_final.hidden_states[last + e]));
        // the final norm touches the last state only
        same_inner = fmax(same_inner, fabs(pre.hidden_states[nh + e] -
                                           no_final.hidden_states[nh + e]));
    }
    assert_true(far_post > 0.1);
    assert_true(far_final > 0.1);
    assert_true(same_inner == 0.0);
    xf_result_free(&pre);
    xf_result_free(&post);
    xf_result_free(&no_final);
    test_model_free(&o);
}

/* A tensor the arch has no place for, or lacks, is refused. */
static void test_arch_refusals(void **state)
{
    (void)state;
    struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, 2, 4, 2, 8, 24, 40, 5);
    const uint32_t ids[] = {1, 2, 3};
    const struct xf_run run = {.ids = ids, .n = 3, .layer = XF_ALL_LAYERS};
    struct xf_plan plan;
    struct attn_error err;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_OK);
    struct xf_model bad = o.m;
    bad.pos_emb = o.m.word_emb; /* rotary: no position table */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "embeddings");
    bad = o.m;
    bad.arch.ffn = XF_FFN_PLAIN; /* the gate is left over */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "layer");
    bad = o.m;
    bad.arch.final_norm = false; /* its tensor is left over */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "final_norm");
    bad = o.m;
    bad.arch.qk_norm = true; /* without q_norm and k_norm */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "layer");
    bad.arch.qk_norm = false;
    bad.arch.qk_norm_whole = true; /* likewise */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "layer");
    bad.arch.qk_norm = true; /* by head and whole */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "qk_norm_whole");
    bad = o.m;
    bad.kv_heads = 3;
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "heads");
    bad = o.m;
    bad.kind[0].rope.base = 0.5;
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_base");
    bad = o.m;
    bad.kind[0].rope.dims = 3; /* odd */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "rope_dims");
    static const uint8_t beyond[2] = {0, 1};
    bad = o.m;
    bad.layer_kind = beyond; /* kind 1 of 1 */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "layer_kind");
    bad = o.m;
    bad.arch.parallel = true;
    bad.arch.norm_place = XF_NORM_OUTPUT; /* in parallel: norms before */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "parallel");
    bad = o.m;
    bad.attn_softcap = -1.0f;
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "attn_softcap");
    bad = o.m;
    bad.arch.norm_place = XF_NORM_SANDWICH; /* without the out norms */
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "layer");
    bad = o.m;
    bad.arch.positions = (xf_positions)5;
    assert_int_equal(xf_plan(&bad, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "positions");
    const uint8_t types[] = {0, 0, 0};
    struct xf_run typed = run;
    typed.type_ids = types; /* no token types in this arch */
    assert_int_equal(xf_plan(&o.m, &typed, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "type_ids");
    test_model_free(&o);
}

/* 16-bit values widen exactly. */
static void test_widen(void **state)
{
    (void)state;
    const uint16_t half[] = {0x3C00, 0xC000, 0x7BFF, 0x0001,
                             0x8000, 0x7C00, 0x3555};
    const float half_want[] = {1.0f,  -2.0f,    65504.0f,   0x1p-24f,
                               -0.0f, INFINITY, 0x1.554p-2f};
    float got[7];
    attn_widen(half, ATTN_F16, 7, got);
    assert_memory_equal(got, half_want, sizeof got);
    const uint16_t bf[] = {0x3F80, 0xC2F7, 0x0001, 0x7F80};
    const float bf_want[] = {1.0f, -123.5f, 0x1p-133f, INFINITY};
    attn_widen(bf, ATTN_BF16, 4, got);
    assert_memory_equal(got, bf_want, 4 * sizeof(float));
    // two blocks of sixteen and a tail of three, every bit pattern kind
    uint16_t many[35];
    float wide[35];
    for (size_t i = 0; i < 35; i++)
        many[i] = (uint16_t)(0x8001u * i + 0x3F00u * (i & 3));
    attn_widen(many, ATTN_BF16, 35, wide);
    for (size_t i = 0; i < 35; i++) {
        uint32_t bits;
        memcpy(&bits, &wide[i], sizeof bits);
        assert_int_equal(bits, (uint32_t)many[i] << 16);
    }
    assert_int_equal(attn_dtype_bytes(ATTN_F32, 3), 12);
    assert_int_equal(attn_dtype_bytes(ATTN_BF16, 3), 6);
    assert_int_equal(attn_dtype_bytes(ATTN_Q8_0, 64), 68);
    assert_int_equal(attn_dtype_bytes(ATTN_Q4_K, 512), 288);
    assert_int_equal(attn_dtype_block(ATTN_Q6_K), 256);
    assert_int_equal(attn_dtype_block(ATTN_F16), 1);
    assert_string_equal(attn_dtype_name(ATTN_Q5_K), "Q5_K");
    assert_null(attn_dtype_name(ATTN_DTYPES));
}

/* A product through 16-bit weights by panels: more of W's rows than a
 * panel holds beside 256 of its columns, and more columns than that,
 * each block with a tail, gives x W^T to float32's accuracy, the bias
 * already in y added once; float32 weights give cblas_sgemm's bits. */
static void test_widen_product(void **state)
{
    (void)state;
    const size_t rows = 3, in = 300, out = WIDEN_PANEL_FLOATS / 256 + 37;
    uint16_t *w = malloc(out * in * sizeof *w);
    float *wide = malloc(out * in * sizeof *wide);
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    float *y = malloc(rows * out * sizeof *y);
    float x[3 * 300];
    assert_non_null(w);
    assert_non_null(wide);
    assert_non_null(panel);
    assert_non_null(y);
    for (size_t i = 0; i < rows * in; i++)
        x[i] = (float)((int)(i * 7 % 23) - 11) / 8.0f;
    static const attn_dtype kinds[] = {ATTN_BF16, ATTN_F16};
    for (size_t k = 0; k < 2; k++) {
        // normal values of either sign between 1/4 and 4, by their bits
        for (size_t i = 0; i < out * in; i++) {
            const uint32_t h = (uint32_t)(i * 2654435761u) >> 9;
            w[i] = kinds[k] == ATTN_BF16
                       ? (uint16_t)((h & 0x807f) | (125 + i % 4) << 7)
                       : (uint16_t)((h & 0x83ff) | (13 + i % 4) << 10);
        }
        attn_widen(w, kinds[k], out * in, wide);
        for (size_t i = 0; i < rows * out; i++)
            y[i] = 0.5f;
        const struct widen_product pr = {.x = x,
                                         .ldx = in,
                                         .rows = rows,
                                         .in = in,
                                         .w = w,
                                         .dtype = kinds[k],
                                         .ldw = in,
                                         .out = out,
                                         .y = y,
                                         .ldy = out};
        widen_product(&pr, 1.0f, panel);
        for (size_t r = 0; r < rows; r++)
            for (size_t o = 0; o < out; o += (o % 4096 < 40 ? 1 : 97)) {
                double want = 0.5;
                for (size_t c = 0; c < in; c++)
                    want += (double)x[r * in + c] * wide[o * in + c];
                if (fabs(y[r * out + o] - want) > 1e-5 * (1 + fabs(want)))
                    fail_msg("dtype %d: y[%zu][%zu] = %.9g, want %.9g",
                             (int)kinds[k], r, o, y[r * out + o], want);
            }
    }
    // float32 weights: one sgemm, beta 0
    float *z = malloc(rows * out * sizeof *z);
    assert_non_null(z);
    const struct widen_product pf = {.x = x,
                                     .ldx = in,
                                     .rows = rows,
                                     .in = in,
                                     .w = wide,
                                     .dtype = ATTN_F32,
                                     .ldw = in,
                                     .out = out,
                                     .y = z,
                                     .ldy = out};
    widen_product(&pf, 0.0f, NULL);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out,
                (int)in, 1.0f, x, (int)in, wide, (int)in, 0.0f, y, (int)out);
    assert_memory_equal(y, z, rows * out * sizeof *y);
    free(z);
    free(y);
    free(panel);
    free(wide);
    free(w);
}

/* x rounded to the nearest bfloat16 (ties to even), and its bits. */
/* Weights stored as bfloat16, widened inside the pass, give the bits of
 * the same values stored as float32: the widening is exact and, at these
 * sizes, a panel holds a whole matrix, so the products are the same
 * calls (larger ones go by panels: test_widen_product). */
static void test_stored_width_same_bits(void **state)
{
    (void)state;
    const struct xf_arch archs[] = {random_llama_arch(), random_gpt2_arch(),
                                    test_bert_arch(XF_ACT_GELU)};
    for (size_t k = 0; k < 3; k++) {
        struct test_model o;
        test_model_make(&o, &archs[k], 2, 4, k == 0 ? 2 : 4, 6, 24, 40, 9 + k);
        struct xf_model half = o.m;
        struct xf_layer *hl = calloc(2, sizeof *hl);
        uint16_t *store = malloc(o.size * sizeof *store), *at = store;
        const size_t H = 24, J = 40, hd = 24, gd = (k == 0 ? 2 : 4) * 6;
        half.word_emb = test_as_bf16(o.m.word_emb, 40 * H, &at);
        half.pos_emb = test_as_bf16(o.m.pos_emb, 80 * H, &at);
        half.type_emb = test_as_bf16(o.m.type_emb, 2 * H, &at);
        for (size_t l = 0; l < 2; l++) {
            const struct xf_layer *y = &o.layers[l];
            hl[l] = *y;
            hl[l].q_w = test_as_bf16(y->q_w, hd * H, &at);
            hl[l].k_w = test_as_bf16(y->k_w, gd * H, &at);
            hl[l].v_w = test_as_bf16(y->v_w, gd * H, &at);
            hl[l].o_w = test_as_bf16(y->o_w, H * hd, &at);
            hl[l].up_w = test_as_bf16(y->up_w, J * H, &at);
            hl[l].gate_w = test_as_bf16(y->gate_w, J * H, &at);
            hl[l].down_w = test_as_bf16(y->down_w, H * J, &at);
        }
        half.layer = hl;
        const uint32_t ids[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
        const struct xf_run run = {.ids = ids,
                                   .n = 11,
                                   .want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN,
                                   .layer = XF_ALL_LAYERS,
                                   .threads = 2};
        struct xf_result a, b;
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &a, NULL), ATTN_OK);
        assert_int_equal(test_xf_forward(&half, &run, NULL, &b, NULL), ATTN_OK);
        assert_memory_equal(a.weights, b.weights,
                            2 * 4 * 11 * 11 * sizeof(float));
        assert_memory_equal(a.hidden_states, b.hidden_states,
                            3 * 11 * H * sizeof(float));
        // and either pass holds a panel per member, to widen the 16-bit
        // matrices in or to pack the rows a streamed product reads
        struct xf_plan pa, pb;
        assert_int_equal(xf_plan(&o.m, &run, &pa, NULL), ATTN_OK);
        assert_int_equal(xf_plan(&half, &run, &pb, NULL), ATTN_OK);
        assert_int_equal(pa.ws_count[XF_WS_WIDEN],
                         pa.team * WIDEN_PANEL_FLOATS);
        assert_int_equal(pb.ws_count[XF_WS_WIDEN],
                         pa.team * WIDEN_PANEL_FLOATS);
        assert_int_equal(xf_plan_bytes(&pb), xf_plan_bytes(&pa));
        xf_result_free(&a);
        xf_result_free(&b);
        free(store);
        free(hl);
        test_model_free(&o);
    }
}

/* A pass whose feed-forward products all stream keeps its intermediate
 * rows packed between them (xf_inter_floats()); laid out as rows
 * instead, the same pass gives the same bits, for each block of the
 * feed-forward (plain, gated), with the rows in whole blocks, a partial
 * last block the kernel takes, one of a few rows that goes by outputs,
 * and fewer rows than a block (the columns cut into tiles). Without
 * AVX-512 nothing streams, and the plan says so. */
static void test_packed_feed_forward_same_bits(void **state)
{
    (void)state;
    const struct xf_arch archs[] = {random_llama_arch(), random_gpt2_arch(),
                                    test_bert_arch(XF_ACT_GELU)};
    static const size_t lengths[] = {2, 9, 40, 64, 70, 72, 73, 80};
    const bool streams = vec_isa_available(VEC_ISA_AVX512);
    for (size_t k = 0; k < 3; k++) {
        struct test_model o;
        test_model_make(&o, &archs[k], 2, 4, k == 0 ? 2 : 4, 6, 24, 40, 31 + k);
        const size_t H = 24;
        for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
            const size_t n = lengths[i];
            uint32_t ids[80];
            for (size_t t = 0; t < n; t++)
                ids[t] = (uint32_t)(t * 7 + k) % 40;
            const struct xf_run run = {.ids = ids,
                                       .n = n,
                                       .want = XF_WANT_HIDDEN,
                                       .layer = XF_ALL_LAYERS,
                                       .threads = 2};
            struct xf_plan packed, plain;
            assert_int_equal(xf_plan(&o.m, &run, &packed, NULL), ATTN_OK);
            assert_int_equal(packed.ffn_packed, streams);
            if (!streams)
                continue;
            plain = packed;
            plain.ffn_packed = false;
            assert_true(xf_plan_workspace(&plain));
            struct xf_result a, b;
            assert_int_equal(xf_forward(&packed, NULL, &a, NULL), ATTN_OK);
            assert_int_equal(xf_forward(&plain, NULL, &b, NULL), ATTN_OK);
            assert_memory_equal(a.hidden_states, b.hidden_states,
                                3 * n * H * sizeof(float));
            xf_result_free(&a);
            xf_result_free(&b);
        }
        test_model_free(&o);
    }
}

/* The largest difference between a and b, n values. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double most = 0.0;
    for (size_t i = 0; i < n; i++)
        most = fmax(most, fabs((double)a[i] - b[i]));
    return most;
}

/* A decoder's tokens one at a time after a cache give what one pass over
 * the whole sequence gives: each token's rows of weights (every layer
 * and head, over every position so far, a window's zeros included), its
 * hidden states and its logits. LLaMA with grouped KV heads, with a
 * window and q/k norms, stored as bfloat16; GPT-2's learned positions;
 * OLMo 2's q/k norms over the whole projections and norms on the
 * sublayers' outputs. */
static void test_cache_continues_a_pass(void **state)
{
    (void)state;
    enum { T = 9, P = 5, L = 2, HEADS = 4, D = 6, H = 24 };
    for (int k = 0; k < 5; k++) {
        struct xf_arch a = k == 3 ? random_gpt2_arch() : random_llama_arch();
        a.qk_norm = k == 1;
        a.qk_norm_whole = k == 4;
        if (k == 4)
            a.norm_place = XF_NORM_OUTPUT;
        struct test_model o;
        test_model_make(&o, &a, L, HEADS, k == 0 || k == 4 ? 2 : 4, D, H, 40,
                        31 + k);
        o.m.kind[0].window = k == 1 ? 3 : 0;
        o.m.lm_head = o.m.word_emb;
        uint16_t *store = NULL;
        struct xf_layer *half = NULL;
        if (k == 2) // every matrix at 16 bits, through the panels
            test_model_bf16(&o, &store, &half);
        const uint32_t ids[T] = {3, 1, 4, 1, 5, 9, 2, 6, 5};
        struct xf_result whole;
        const struct xf_run all = {.ids = ids,
                                   .n = T,
                                   .want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN,
                                   .layer = XF_ALL_LAYERS,
                                   .threads = 2};
        assert_int_equal(test_xf_forward(&o.m, &all, NULL, &whole, NULL),
                         ATTN_OK);
        struct xf_cache cache;
        assert_int_equal(xf_cache_init(&o.m, T, &cache, NULL), ATTN_OK);
        struct xf_run run = {.ids = ids,
                             .n = P,
                             .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                             .layer = XF_ALL_LAYERS,
                             .threads = 2,
                             .cache = &cache};
        struct xf_result r;
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
        assert_int_equal(cache.len, P);
        for (size_t lh = 0; lh < L * HEADS; lh++)
            for (size_t i = 0; i < P; i++)
                assert_true(max_diff(r.weights + (lh * P + i) * P,
                                     whole.weights + (lh * T + i) * T,
                                     P) < 1e-6);
        xf_result_free(&r);
        for (size_t t = P; t < T; t++) {
            run.ids = ids + t;
            run.n = 1;
            run.want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_LOGITS;
            run.threads = 1 + t % 2;
            assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL),
                             ATTN_OK);
            assert_int_equal(r.keys, t + 1);
            assert_int_equal(cache.len, t + 1);
            for (size_t lh = 0; lh < L * HEADS; lh++) {
                const float *row = r.weights + lh * (t + 1);
                const float *want = whole.weights + (lh * T + t) * T;
                if (max_diff(row, want, t + 1) > 1e-5)
                    fail_msg("case %d, token %zu, layer x head %zu: %.3g", k, t,
                             lh, max_diff(row, want, t + 1));
                for (size_t j = 0; j < t + 1; j++)
                    if (o.m.kind[0].window && j + o.m.kind[0].window <= t)
                        assert_true(row[j] == 0.0f);
            }
            // the last hidden state (after the final norm), and the logits
            const float *last = r.hidden_states + L * H;
            const float *want = whole.hidden_states + (L * T + t) * H;
            assert_true(max_diff(last, want, H) < 1e-4);
            float emb[40 * H];
            attn_widen(o.m.lm_head.data, o.m.lm_head.dtype, 40 * H, emb);
            for (size_t v = 0; v < 40; v++) {
                double dot = 0.0;
                for (size_t c = 0; c < H; c++)
                    dot += (double)emb[v * H + c] * last[c];
                assert_true(fabs(r.logits[v] - dot) < 1e-4 * (1 + fabs(dot)));
            }
            xf_result_free(&r);
        }
        // full: the next token does not fit
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL),
                         ATTN_E_TOO_BIG);
        xf_cache_free(&cache);
        xf_result_free(&whole);
        free(half);
        free(store);
        test_model_free(&o);
    }
}

/* Every position's logits: lm_head times each final hidden state (after
 * the final norm), the last row within float32 rounding of the last-only
 * logits (a product of many rows sums in another order than one row's);
 * refused without XF_WANT_LOGITS. */
static void test_all_logits(void **state)
{
    (void)state;
    enum { T = 7, L = 2, HEADS = 4, D = 6, H = 24, V = 40 };
    struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, D, H, V, 77);
    o.m.lm_head = o.m.word_emb;
    const uint32_t ids[T] = {3, 1, 4, 1, 5, 9, 2};
    struct xf_run run = {.ids = ids,
                         .n = T,
                         .want = XF_WANT_LOGITS | XF_WANT_ALL_LOGITS |
                                 XF_WANT_HIDDEN,
                         .layer = XF_ALL_LAYERS,
                         .threads = 2};
    struct xf_result all, last;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &all, NULL), ATTN_OK);
    run.want = XF_WANT_LOGITS;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &last, NULL), ATTN_OK);
    for (size_t v = 0; v < V; v++)
        assert_true(fabs(all.logits[(T - 1) * V + v] - last.logits[v]) <
                    1e-5 * (1 + fabs(last.logits[v])));
    const float *emb = o.m.word_emb.data;
    for (size_t t = 0; t < T; t++) {
        const float *h = all.hidden_states + (L * T + t) * H;
        for (size_t v = 0; v < V; v++) {
            double dot = 0.0;
            for (size_t c = 0; c < H; c++)
                dot += (double)emb[v * H + c] * h[c];
            assert_true(fabs(all.logits[t * V + v] - dot) <
                        1e-5 * (1 + fabs(dot)));
        }
    }
    xf_result_free(&all);
    xf_result_free(&last);
    struct xf_plan plan;
    struct attn_error err;
    run.want = XF_WANT_ALL_LOGITS;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
    test_model_free(&o);
}

/* The logit lens: each layer's output through the final norm and the
 * output head, its top tokens with their probabilities over the whole
 * vocabulary; the last layer's is the model's own next-token
 * distribution, and the others go through the final norm first (a lens
 * that skipped it would fail here). */
static void test_logit_lens(void **state)
{
    (void)state;
    enum { L = 3, H = 24, V = 40, N = 7, K = 4 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, 4, 2, 6, H, 40, 77);
    o.m.lm_head = o.m.word_emb;
    const uint32_t ids[N] = {2, 7, 1, 8, 2, 8, 1};
    const struct xf_run run = {.ids = ids,
                               .n = N,
                               .want = XF_WANT_LOGIT_LENS | XF_WANT_HIDDEN |
                                       XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = 2,
                               .lens_k = K};
    struct xf_result r;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    assert_int_equal(r.lens_k, K);
    const float *emb = o.m.word_emb.data;
    for (size_t l = 0; l < L; l++)
        for (size_t i = 0; i < N; i++) {
            float h[H];
            const float *out = r.hidden_states + ((l + 1) * N + i) * H;
            if (l + 1 < L)
                xf_rms_norm(out, 1, H, o.m.final_norm_w, o.m.norm_eps, h);
            else
                memcpy(h, out, sizeof h); /* the final norm is in it */
            double logit[V], most = -INFINITY, total = 0.0;
            for (size_t v = 0; v < V; v++) {
                logit[v] = 0.0;
                for (size_t c = 0; c < H; c++)
                    logit[v] += (double)emb[v * H + c] * h[c];
                most = fmax(most, logit[v]);
            }
            for (size_t v = 0; v < V; v++)
                total += exp(logit[v] - most);
            const struct xf_candidate *top = r.lens + (l * N + i) * K;
            for (size_t t = 0; t < K; t++) {
                // the t-th largest: nothing above it but those before
                size_t above = 0;
                for (size_t v = 0; v < V; v++)
                    above += logit[v] > logit[top[t].id];
                assert_int_equal(above, t);
                const double p = exp(logit[top[t].id] - most) / total;
                if (fabs(top[t].score - p) > 1e-5)
                    fail_msg("layer %zu, row %zu, top %zu: p %g, want %g", l, i,
                             t, (double)top[t].score, p);
            }
        }
    // the last layer's last row is the model's next-token distribution
    struct xf_candidate want[K];
    xf_top_tokens(r.logits, V, K, want);
    const struct xf_candidate *last = r.lens + ((L - 1) * N + N - 1) * K;
    for (size_t t = 0; t < K; t++) {
        assert_int_equal(last[t].id, want[t].id);
        assert_true(fabs(last[t].score - want[t].score) < 1e-6);
    }
    xf_result_free(&r);
    // what it refuses
    struct attn_error err;
    struct xf_plan plan;
    struct xf_run bad = run;
    bad.lens_k = 0;
    assert_int_equal(xf_plan(&o.m, &bad, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "lens_k");
    bad.lens_k = XF_MAX_LENS_K + 1;
    assert_int_equal(xf_plan(&o.m, &bad, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "lens_k");
    o.m.lm_head = (struct xf_matrix){0};
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
    test_model_free(&o);
}

/* A token after the cache has the same bits on one thread as on two, so
 * a seeded sampling chooses the same tokens whatever the thread count. */
static void test_cache_same_bits_any_team(void **state)
{
    (void)state;
    enum { P = 5, STEPS = 4, V = 40 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, 2, 4, 2, 6, 24, 40, 91);
    o.m.lm_head = o.m.word_emb;
    float logits[2][STEPS + 1][V];
    for (unsigned team = 1; team <= 2; team++) {
        struct xf_cache cache;
        assert_int_equal(xf_cache_init(&o.m, P + STEPS, &cache, NULL), ATTN_OK);
        uint32_t ids[P + STEPS] = {3, 1, 4, 1, 5};
        struct xf_run run = {.ids = ids,
                             .n = P,
                             .want = XF_WANT_LOGITS,
                             .layer = XF_ALL_LAYERS,
                             .threads = team,
                             .cache = &cache};
        for (size_t t = 0; t <= STEPS; t++) {
            struct xf_result r;
            assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL),
                             ATTN_OK);
            memcpy(logits[team - 1][t], r.logits, sizeof logits[0][0]);
            xf_result_free(&r);
            if (t == STEPS)
                break;
            const struct xf_sampling s = {
                .temperature = 1.0, .top_p = 1.0, .seed = 5};
            struct xf_candidate scratch[V];
            ids[P + t] = xf_sample(logits[team - 1][t], V, &s, t, scratch);
            run.ids = &ids[P + t];
            run.n = 1;
        }
        xf_cache_free(&cache);
    }
    assert_memory_equal(logits[0], logits[1], sizeof logits[0]);
    test_model_free(&o);
}

/* The head measures of a pass are those of the weights it returns, for
 * every layer and head, also when one layer's weights are asked for. */
static void test_head_stats_of_a_pass(void **state)
{
    (void)state;
    enum { L = 2, HEADS = 4, N = 9 };
    struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, 6, 24, 40, 17);
    o.m.kind[0].window = 4;
    const uint32_t ids[N] = {3, 1, 4, 1, 5, 9, 2, 6, 1};
    struct xf_run run = {.ids = ids,
                         .n = N,
                         .want = XF_WANT_WEIGHTS | XF_WANT_HEAD_STATS,
                         .layer = XF_ALL_LAYERS,
                         .threads = 2};
    struct xf_result r;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    size_t scratch[2 * N], earlier[N];
    head_stats_earlier(ids, N, scratch, earlier);
    const struct mask_view mv = {.causal = true, .window = 4, .n_ctx = N};
    const struct head_view hv = {
        .n = N, .keys = N, .positions = N, .mask = &mv, .earlier = earlier};
    for (size_t lh = 0; lh < L * HEADS; lh++) {
        double want[ATTN_HEAD_STATS];
        head_stats(r.weights + lh * N * N, &hv, want);
        assert_memory_equal(r.measures.head_stats + lh * ATTN_HEAD_STATS, want,
                            sizeof want);
    }
    double all[L * HEADS * ATTN_HEAD_STATS];
    memcpy(all, r.measures.head_stats, sizeof all);
    xf_result_free(&r);
    // one layer's weights: the measures are still every layer's
    run.layer = 0;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    assert_memory_equal(r.measures.head_stats, all, sizeof all);
    xf_result_free(&r);
    test_model_free(&o);
}

/* The induction probe's scores of a pass are the stripes of the weights
 * it returns; a run whose input cannot hold two copies is refused. */
static void test_induction_of_a_pass(void **state)
{
    (void)state;
    enum { L = 2, HEADS = 4, N = 11, START = 1, PERIOD = 5 };
    struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, 6, 24, 40, 23);
    const uint32_t ids[N] = {1, 7, 3, 9, 4, 12, 7, 3, 9, 4, 12};
    struct xf_run run = {.ids = ids,
                         .n = N,
                         .want = XF_WANT_WEIGHTS | XF_WANT_INDUCTION,
                         .layer = XF_ALL_LAYERS,
                         .threads = 1,
                         .repeat_start = START,
                         .repeat_period = PERIOD};
    struct xf_result r;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    for (size_t lh = 0; lh < L * HEADS; lh++) {
        double want = 0;
        for (size_t i = START + PERIOD; i < START + 2 * PERIOD; i++)
            want += r.weights[lh * N * N + i * N + i - PERIOD + 1];
        assert_true(fabs(r.measures.induction[lh] - want / PERIOD) < 1e-12);
    }
    xf_result_free(&r);
    struct attn_error err;
    run.repeat_period = 6;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, &err),
                     ATTN_E_INVALID);
    assert_string_equal(err.field, "ids");
    test_model_free(&o);
}

/* What a run with a cache refuses. */
static void test_cache_refusals(void **state)
{
    (void)state;
    struct test_model o;
    const struct xf_arch a = random_llama_arch();
    test_model_make(&o, &a, 2, 4, 2, 6, 24, 40, 5);
    struct xf_cache cache;
    struct attn_error err;
    assert_int_equal(xf_cache_init(&o.m, 0, &cache, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "capacity");
    assert_int_equal(xf_cache_init(&o.m, 81, &cache, &err), ATTN_E_INVALID);
    assert_int_equal(xf_cache_init(&o.m, 8, &cache, NULL), ATTN_OK);
    const uint32_t ids[3] = {1, 2, 3};
    struct xf_run run = {.ids = ids,
                         .n = 2,
                         .threads = 1,
                         .cache = &cache,
                         .layer = XF_ALL_LAYERS};
    struct xf_result r;
    struct xf_plan plan;
    // logits need an output head
    run.want = XF_WANT_LOGITS;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
    run.want = 0;
    assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
    xf_result_free(&r);
    // after it: one token at a time, and no rollout
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "ids");
    run.n = 1;
    run.want = XF_WANT_ROLLOUT;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
    // a plan is for the cache as it was: not after another token
    run.want = XF_WANT_WEIGHTS;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_OK);
    assert_int_equal(xf_forward(&plan, NULL, &r, &err), ATTN_OK);
    xf_result_free(&r);
    assert_int_equal(xf_forward(&plan, NULL, &r, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "cache");
    assert_null(r.weights);
    // another model's cache
    struct test_model other;
    test_model_make(&other, &a, 3, 4, 2, 6, 24, 40, 6);
    run.want = 0;
    assert_int_equal(xf_plan(&other.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "cache");
    test_model_free(&other);
    // an encoder has none
    const struct xf_arch bert = test_bert_arch(XF_ACT_GELU);
    test_model_make(&other, &bert, 2, 4, 4, 6, 24, 40, 7);
    assert_int_equal(xf_plan(&other.m, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "cache");
    test_model_free(&other);
    xf_cache_free(&cache);
    test_model_free(&o);
}

/* A longrope model's generation through a cache: a prompt of up to
 * long_after tokens starts it with the short rotary, and tokens follow
 * one at a time up to long_after; the next one outgrows it (the run is
 * refused, naming the cache), and, as transformers' Phi-3 does, the
 * emptied cache takes the whole sequence again with the long rotary,
 * after which tokens follow one at a time. Each token's weights and
 * logits are those of one pass over the sequence so far. */
static void test_longrope_cache(void **state)
{
    (void)state;
    enum { T = 11, P = 4, AFTER = 6, L = 2, HEADS = 4, H = 24 };
    const struct xf_arch a = random_llama_arch();
    struct test_model o;
    test_model_make(&o, &a, L, HEADS, 2, 8, H, 40, 12);
    o.m.lm_head = o.m.word_emb;
    o.m.kind[0].rope = (struct attn_rotary){.base = 500.0,
                                            .pairing = ATTN_ROPE_HALF,
                                            .dims = 4,
                                            .inv_freq = short_freq,
                                            .factor = 1.3};
    o.m.kind[0].long_rope = o.m.kind[0].rope;
    o.m.kind[0].long_rope.inv_freq = long_freqs;
    o.m.kind[0].long_after = AFTER;
    assert_int_equal(xf_cache_rerun_length(&o.m, P, T), AFTER + 1);
    assert_int_equal(xf_cache_rerun_length(&o.m, AFTER + 1, T), 0);
    assert_int_equal(xf_cache_rerun_length(&o.m, P, AFTER), 0);
    const uint32_t ids[T] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
    struct xf_cache cache;
    assert_int_equal(xf_cache_init(&o.m, T, &cache, NULL), ATTN_OK);
    struct xf_run run = {.ids = ids,
                         .n = P,
                         .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                         .layer = XF_ALL_LAYERS,
                         .threads = 2,
                         .cache = &cache};
    size_t reruns = 0;
    for (size_t t = P; t <= T; t++) {
        // the sequence so far in one pass, without a cache
        const struct xf_run whole = {.ids = ids,
                                     .n = t,
                                     .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                                     .layer = XF_ALL_LAYERS,
                                     .threads = 1};
        struct xf_result w, r;
        assert_int_equal(test_xf_forward(&o.m, &whole, NULL, &w, NULL),
                         ATTN_OK);
        struct xf_plan plan;
        struct attn_error err;
        if (xf_cache_outgrown(&o.m, &cache, run.n)) {
            assert_int_equal(t, AFTER + 1);
            assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_E_INVALID);
            assert_string_equal(err.field, "cache");
            cache.len = 0;
            run.ids = ids;
            run.n = t;
            reruns++;
        }
        assert_int_equal(test_xf_forward(&o.m, &run, NULL, &r, NULL), ATTN_OK);
        assert_int_equal(cache.len, t);
        // the last row of each layer and head, over every position
        const size_t rows = r.n;
        for (size_t lh = 0; lh < L * HEADS; lh++) {
            const float *got = r.weights + (lh * rows + rows - 1) * t;
            const float *want = w.weights + (lh * t + t - 1) * t;
            if (max_diff(got, want, t) > 1e-5)
                fail_msg("token %zu, layer x head %zu: %.3g", t, lh,
                         max_diff(got, want, t));
        }
        assert_true(max_diff(r.logits, w.logits, 40) < 1e-4);
        xf_result_free(&r);
        xf_result_free(&w);
        if (t == T)
            break;
        run.ids = ids + t;
        run.n = 1;
    }
    assert_int_equal(reruns, 1);
    xf_cache_free(&cache);
    test_model_free(&o);
}

/* The enums' names, as /models and the config echo print them. */
static void test_names(void **state)
{
    (void)state;
    assert_string_equal(xf_act_name(XF_ACT_GELU), "gelu");
    assert_string_equal(xf_act_name(XF_ACT_GELU_TANH), "gelu_new");
    assert_string_equal(xf_act_name(XF_ACT_SILU), "silu");
    assert_null(xf_act_name(3));
    assert_string_equal(xf_norm_name(XF_NORM_RMS), "rms");
    assert_string_equal(xf_norm_place_name(XF_NORM_BEFORE), "before");
    assert_string_equal(xf_ffn_name(XF_FFN_GATED), "gated");
    assert_string_equal(xf_positions_name(XF_POS_ROTARY), "rotary");
    assert_null(xf_positions_name(-1));
    assert_string_equal(attn_dtype_name(ATTN_F32), "F32");
    assert_string_equal(attn_dtype_name(ATTN_BF16), "BF16");
    assert_string_equal(attn_dtype_name(ATTN_Q8_0), "Q8_0");
    assert_null(attn_dtype_name(ATTN_DTYPES));
    assert_null(attn_dtype_name(-1));
}

int main(void)
{
    attn_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rms_norm_values),
        cmocka_unit_test(test_silu_values),
        cmocka_unit_test(test_bert_block),
        cmocka_unit_test(test_gpt2_arch),
        cmocka_unit_test(test_llama_arch),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_qk_norm_whole),
        cmocka_unit_test(test_parallel_residual),
        cmocka_unit_test(test_parallel_activations),
        cmocka_unit_test(test_longrope),
        cmocka_unit_test(test_longrope_cache),
        cmocka_unit_test(test_each_choice),
        cmocka_unit_test(test_packed_feed_forward_same_bits),
        cmocka_unit_test(test_layer_kinds_and_sandwich),
        cmocka_unit_test(test_value_weighted_hooked),
        cmocka_unit_test(test_conventions_have_teeth),
        cmocka_unit_test(test_arch_refusals),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_widen),
        cmocka_unit_test(test_widen_product),
        cmocka_unit_test(test_cache_continues_a_pass),
        cmocka_unit_test(test_cache_refusals),
        cmocka_unit_test(test_cache_same_bits_any_team),
        cmocka_unit_test(test_logit_lens),
        cmocka_unit_test(test_all_logits),
        cmocka_unit_test(test_head_stats_of_a_pass),
        cmocka_unit_test(test_induction_of_a_pass),
        cmocka_unit_test(test_stored_width_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
