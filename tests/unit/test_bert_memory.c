/*
 * test_bert_memory.c - xf_plan_bytes() holds to what xf_forward()
 * allocates. The program is linked with the allocator wrapped
 * (-Wl,--wrap=malloc,...; see the Makefile), so every allocation the core
 * makes passes through here; while a call runs, the bytes it holds are
 * counted, and their peak must equal the estimate: never above it, and
 * not below either, since a budget reserved and never used is refused to
 * someone else. After the call exactly the result is left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transformer.h"
#include "wordpiece.h"
#include "alloc_count.h"
#include "support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A random model of the given sizes, every tensor in one block. */
static struct xf_model model_of(size_t layers, size_t heads, size_t H, size_t J,
                                float **block, struct xf_layer **ly)
{
    const size_t vocab = 50, positions = 600;
    const size_t per_layer = 4 * H * H + 8 * H + 2 * J * H + J + H;
    const size_t total = (vocab + positions + 2 + 2) * H + layers * per_layer;
    float *a = malloc(total * sizeof *a);
    assert_non_null(a);
    fill_normal(a, total, 3, 0.1f);
    *block = a;
    *ly = calloc(layers, sizeof **ly);
    struct xf_model m = {.layers = layers,
                         .heads = heads,
                         .hidden = H,
                         .intermediate = J,
                         .vocab_size = vocab,
                         .max_positions = positions,
                         .type_vocab_size = 2,
                         .kv_heads = heads,
                         .head_dim = H / heads,
                         .norm_eps = 1e-12f,
                         .arch = test_bert_arch(XF_ACT_GELU),
                         .layer = *ly};
#define NEXT(count) (a += (count), a - (count))
    m.word_emb = test_f32(NEXT(vocab * H));
    m.pos_emb = test_f32(NEXT(positions * H));
    m.type_emb = test_f32(NEXT(2 * H));
    m.embed_norm_w = NEXT(H);
    m.embed_norm_b = NEXT(H);
    for (size_t l = 0; l < layers; l++) {
        struct xf_layer *y = &(*ly)[l];
        y->q_w = test_f32(NEXT(H * H));
        y->k_w = test_f32(NEXT(H * H));
        y->v_w = test_f32(NEXT(H * H));
        y->o_w = test_f32(NEXT(H * H));
        y->q_b = NEXT(H);
        y->k_b = NEXT(H);
        y->v_b = NEXT(H);
        y->o_b = NEXT(H);
        y->attn_norm_w = NEXT(H);
        y->attn_norm_b = NEXT(H);
        y->ffn_norm_w = NEXT(H);
        y->ffn_norm_b = NEXT(H);
        y->up_w = test_f32(NEXT(J * H));
        y->down_w = test_f32(NEXT(H * J));
        y->up_b = NEXT(J);
        y->down_b = NEXT(H);
    }
#undef NEXT
    return m;
}

static size_t result_bytes(const struct xf_result *r)
{
    const size_t w = r->weight_layers * r->heads * r->n * r->n;
    const size_t per_layer = r->weight_layers * r->n * r->n;
    return sizeof(float) *
               ((r->weights ? w : 0) + (r->mean_weights ? per_layer : 0) +
                (r->hidden_states ? (r->layers + 1) * r->n * r->hidden : 0) +
                (r->rollout ? r->n * r->n : 0) +
                (r->measures.value_weighted ? w + per_layer : 0)) +
           (r->measures.head_stats
                ? r->layers * r->heads * (ATTN_HEAD_STATS + r->n) *
                      sizeof(double)
                : 0) +
           /* top keys and weights, 3 a row, and a count a row */
           (r->measures.top_keys
                ? r->weight_layers * r->heads * r->n * (3 * 8 + 4)
                : 0);
}

static void check_run(const struct xf_model *m, size_t n, unsigned want,
                      size_t layer, unsigned threads)
{
    uint32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)(i * 13 % m->vocab_size);
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = want,
                               .layer = layer,
                               .threads = threads,
                               .top_k = 3};
    const size_t estimate = test_xf_bytes(m, &run);
    struct xf_result r;
    struct attn_error err;
    alloc_count_start();
    const attn_status st = test_xf_forward(m, &run, NULL, &r, &err);
    const size_t held = alloc_live(), top = alloc_peak();
    alloc_count_stop();
    if (st)
        fail_msg("xf_forward: %s", err.message);
    assert_int_equal(alloc_overflowed(), 0);
    if (top > estimate)
        fail_msg("n %zu want %u threads %u: the call held %zu bytes, the "
                 "estimate was %zu",
                 n, want, threads, top, estimate);
    // and nothing is counted that the call does not hold at its peak
    if (estimate != top)
        fail_msg("n %zu want %u: the estimate (%zu) overstates the peak "
                 "(%zu) by %zu bytes",
                 n, want, estimate, top, estimate - top);
    assert_int_equal(held, result_bytes(&r));
    xf_result_free(&r);
    free(ids);
}

static void test_bytes_hold(void **state)
{
    (void)state;
    float *block;
    struct xf_layer *ly;
    const struct xf_model m = model_of(3, 4, 32, 48, &block, &ly);
    const unsigned all = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS |
                         XF_WANT_HIDDEN | XF_WANT_ROLLOUT;
    const size_t ns[] = {1, 9, 64, 130, 600};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check_run(&m, ns[i], all, XF_ALL_LAYERS, 1);
        check_run(&m, ns[i], all, XF_ALL_LAYERS, 3);
        check_run(&m, ns[i], XF_WANT_WEIGHTS, XF_ALL_LAYERS, 2);
        check_run(&m, ns[i], XF_WANT_HIDDEN, XF_ALL_LAYERS, 2);
        check_run(&m, ns[i], XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS, 1, 2);
        check_run(&m, ns[i], XF_WANT_ROLLOUT, XF_ALL_LAYERS, 1);
        check_run(&m, ns[i], XF_WANT_VALUE_WEIGHTED, XF_ALL_LAYERS, 2);
        check_run(&m, ns[i], XF_WANT_VALUE_WEIGHTED | XF_WANT_WEIGHTS, 1, 1);
        check_run(&m, ns[i], XF_WANT_HEAD_STATS, XF_ALL_LAYERS, 2);
        check_run(&m, ns[i], XF_WANT_TOP_K | XF_WANT_HEAD_STATS, 1, 2);
    }
    free(block);
    free(ly);
}

/* The same for a pre-norm, gated, rotary model with grouped KV heads and
 * a final norm (LLaMA's block), whose feed-forward holds more rows. The
 * tensors are the BERT-shaped model's, read with other roles. */
static void test_bytes_hold_prenorm_gated(void **state)
{
    (void)state;
    float *block;
    struct xf_layer *ly;
    struct xf_model m = model_of(3, 4, 32, 48, &block, &ly);
    m.arch = (struct xf_arch){.norm = XF_NORM_RMS,
                              .norm_place = XF_NORM_BEFORE,
                              .ffn = XF_FFN_GATED,
                              .act = XF_ACT_SILU,
                              .positions = XF_POS_ROTARY,
                              .final_norm = true,
                              .causal = true};
    m.kv_heads = 2;
    m.kind[0].rope.base = 10000.0;
    m.final_norm_w = m.embed_norm_w;
    m.pos_emb = m.type_emb = (struct xf_matrix){0};
    m.embed_norm_w = m.embed_norm_b = NULL;
    m.type_vocab_size = 0;
    for (size_t l = 0; l < m.layers; l++) {
        struct xf_layer *y = &ly[l];
        y->gate_w = y->up_w;
        y->q_b = y->k_b = y->v_b = y->o_b = NULL;
        y->up_b = y->down_b = y->attn_norm_b = y->ffn_norm_b = NULL;
    }
    const size_t ns[] = {1, 9, 130, 600};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check_run(&m, ns[i], XF_WANT_WEIGHTS | XF_WANT_HIDDEN, XF_ALL_LAYERS,
                  1);
        check_run(&m, ns[i], XF_WANT_HIDDEN, XF_ALL_LAYERS, 3);
        check_run(&m, ns[i], XF_WANT_WEIGHTS, 1, 2);
        check_run(&m, ns[i], XF_WANT_VALUE_WEIGHTED, XF_ALL_LAYERS, 1);
    }
    free(block);
    free(ly);
}

/* attn_forward_bytes() holds to what attn_forward() takes when it also
 * measures the heads or weighs the values, arrays computed only for them
 * included. */
static void test_attention_measures_bytes_hold(void **state)
{
    (void)state;
    enum { B = 2, N = 70, D = 24 };
    float *x = malloc(B * N * D * sizeof *x);
    for (size_t i = 0; i < B * N * D; i++)
        x[i] = (float)((int)(i * 7919 % 61) - 30) / 40.0f;
    const unsigned wants[] = {
        ATTN_WANT_HEAD_STATS, ATTN_WANT_HEAD_STATS | ATTN_WANT_WEIGHTS,
        ATTN_WANT_VALUE_WEIGHTED,
        ATTN_WANT_VALUE_WEIGHTED | ATTN_WANT_HEAD_STATS | ATTN_WANT_OUTPUT,
        ATTN_WANT_TOP_K | ATTN_WANT_HEAD_STATS};
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++)
        for (unsigned threads = 1; threads <= 2; threads++) {
            struct attn_config c = {.mode = ATTN_MODE_PROJECTED,
                                    .batch = B,
                                    .n_query = N,
                                    .d_model = D,
                                    .heads = 4,
                                    .kv_heads = 2,
                                    .causal = true,
                                    .dropout = i % 2 ? 0.1f : 0.0f,
                                    .threads = threads,
                                    .top_k = 4,
                                    .want = wants[i]};
            struct attn_error err;
            assert_int_equal(attn_config_resolve(&c, &err), ATTN_OK);
            const size_t estimate = attn_forward_bytes(&c);
            struct attn_result r;
            alloc_count_start();
            const attn_status st = attn_forward(&c, x, NULL, &r, &err);
            const size_t top = alloc_peak();
            alloc_count_stop();
            assert_int_equal(st, ATTN_OK);
            if (top > estimate)
                fail_msg("want 0x%x threads %u: the call held %zu bytes, the "
                         "estimate was %zu",
                         wants[i], threads, top, estimate);
            attn_result_free(&r);
        }
    free(x);
}

/* Weights written into the caller's array (attn_config.weights_into):
 * the same bits as in the pass's own, out->weights that array and left
 * to the caller by attn_result_free(), and the pass's bytes less by
 * attn_weights_bytes(). Weights read only for another array (the
 * value-weighted norms) stay the pass's own, and the array untouched. */
static void test_weights_into_callers_array(void **state)
{
    (void)state;
    enum { B = 2, N = 70, D = 24, H = 4 };
    const size_t count = (size_t)B * H * N * N;
    float *x = malloc(B * N * D * sizeof *x);
    float *into = malloc(count * sizeof *into);
    for (size_t i = 0; i < B * N * D; i++)
        x[i] = (float)((int)(i * 7919 % 61) - 30) / 40.0f;
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct attn_config c = {.mode = ATTN_MODE_PROJECTED,
                                .batch = B,
                                .n_query = N,
                                .d_model = D,
                                .heads = H,
                                .causal = true,
                                .threads = threads,
                                .want = ATTN_WANT_WEIGHTS | ATTN_WANT_OUTPUT};
        struct attn_error err;
        assert_int_equal(attn_config_resolve(&c, &err), ATTN_OK);
        struct attn_result own;
        assert_int_equal(attn_forward(&c, x, NULL, &own, &err), ATTN_OK);
        const size_t own_bytes = attn_forward_bytes(&c);
        const size_t weights_bytes = attn_weights_bytes(&c);
        assert_true(weights_bytes >= count * sizeof(float));
        c.weights_into = into;
        assert_int_equal(attn_weights_bytes(&c), 0);
        const size_t estimate = attn_forward_bytes(&c);
        assert_int_equal(estimate, own_bytes - weights_bytes);
        struct attn_result lent;
        alloc_count_start();
        assert_int_equal(attn_forward(&c, x, NULL, &lent, &err), ATTN_OK);
        const size_t top = alloc_peak();
        assert_true(top <= estimate);
        assert_ptr_equal(lent.weights, into);
        assert_memory_equal(into, own.weights, count * sizeof(float));
        assert_memory_equal(lent.output, own.output,
                            (size_t)B * N * D * sizeof(float));
        attn_result_free(&lent);
        assert_int_equal(alloc_live(), 0); /* all but the caller's freed */
        alloc_count_stop();
        into[count - 1] = 1.0f; /* still the caller's, and there */
        attn_result_free(&own);
    }
    /* weights asked for and read for the value-weighted norms too: lent,
     * and the norms the same bits as from the pass's own */
    {
        struct attn_config both = {.mode = ATTN_MODE_PROJECTED,
                                   .batch = B,
                                   .n_query = N,
                                   .d_model = D,
                                   .heads = H,
                                   .want = ATTN_WANT_WEIGHTS |
                                           ATTN_WANT_VALUE_WEIGHTED};
        struct attn_error e;
        assert_int_equal(attn_config_resolve(&both, &e), ATTN_OK);
        struct attn_result own, lent;
        assert_int_equal(attn_forward(&both, x, NULL, &own, &e), ATTN_OK);
        both.weights_into = into;
        assert_int_equal(attn_forward(&both, x, NULL, &lent, &e), ATTN_OK);
        assert_ptr_equal(lent.weights, into);
        assert_memory_equal(into, own.weights, count * sizeof(float));
        assert_memory_equal(lent.measures.value_weighted,
                            own.measures.value_weighted, count * sizeof(float));
        attn_result_free(&lent);
        attn_result_free(&own);
    }
    /* weights only read for the value-weighted norms: the pass's own */
    struct attn_config v = {.mode = ATTN_MODE_PROJECTED,
                            .batch = B,
                            .n_query = N,
                            .d_model = D,
                            .heads = H,
                            .want = ATTN_WANT_VALUE_WEIGHTED};
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&v, &err), ATTN_OK);
    v.weights_into = into;
    for (size_t i = 0; i < count; i++)
        into[i] = -1.0f;
    struct attn_result r;
    assert_int_equal(attn_forward(&v, x, NULL, &r, &err), ATTN_OK);
    assert_null(r.weights);
    for (size_t i = 0; i < count; i++)
        assert_true(into[i] == -1.0f);
    attn_result_free(&r);
    free(into);
    free(x);
}

/* wordpiece_encode_bytes() bounds what wordpiece_encode() holds at once. */
static void test_encode_bytes_bound(void **state)
{
    (void)state;
    const char *tokens[] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",
                            "##a",   "caf",   "##e",   ",",      "東"};
    struct wordpiece_vocab *v = NULL;
    struct attn_error err;
    assert_int_equal(wordpiece_vocab_new(tokens, 10, &v, &err), ATTN_OK);
    const char *texts[] = {"", "a", "aaaa a,a,a,,,, [MASK][MASK] caf\xC3\xA9",
                           "\xE6\x9D\xB1\xE6\x9D\xB1\xE6\x9D\xB1 x",
                           "A\xCC\x81\xCC\x81\xCC\x81 \xEF\xAC\x80"};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++) {
            const size_t la = strlen(texts[i]), lb = strlen(texts[j]);
            const struct wordpiece_options opts = {.do_lower_case = j % 2};
            struct tok_encoding enc;
            alloc_count_start();
            const attn_status st = wordpiece_encode(v, &opts, texts[i], la,
                                                    texts[j], lb, &enc, &err);
            const size_t top = alloc_peak();
            alloc_count_stop();
            assert_int_equal(st, ATTN_OK);
            assert_true(top <= wordpiece_encode_bytes(la, lb));
            tok_encoding_free(&enc);
        }
    wordpiece_vocab_free(v);
}

int main(void)
{
    attn_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_hold),
        cmocka_unit_test(test_bytes_hold_prenorm_gated),
        cmocka_unit_test(test_attention_measures_bytes_hold),
        cmocka_unit_test(test_weights_into_callers_array),
        cmocka_unit_test(test_encode_bytes_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
