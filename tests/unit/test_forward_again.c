/*
 * test_forward_again.c - xf_forward_again(): a pass into the memory an
 * earlier result kept gives the same bits as a pass into fresh memory,
 * for every array a result can hold, though that memory is full of
 * another pass's values (poisoned here, so that a pass that leaves any
 * entry unwritten fails); it keeps the arrays and the scratch block that
 * have room, takes new ones where they are too small, and frees them all
 * when it fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "random_model.h"
#include "support.h"
#include "transformer.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 2, HEADS = 4, HIDDEN = 24, VOCAB = 40, TOP_K = 3 };

/* Where each float array of XF_RESULT_* sits in a result. */
static float **float_slot(struct xf_result *r, int i)
{
    switch (i) {
    case XF_RESULT_WEIGHTS: return &r->weights;
    case XF_RESULT_MEAN_WEIGHTS: return &r->mean_weights;
    case XF_RESULT_HIDDEN: return &r->hidden_states;
    case XF_RESULT_ROLLOUT: return &r->rollout;
    case XF_RESULT_LOGITS: return &r->logits;
    case XF_RESULT_VALUE_WEIGHTED: return &r->measures.value_weighted;
    case XF_RESULT_VALUE_WEIGHTED_SUM: return &r->measures.value_weighted_sum;
    case XF_RESULT_FLOW: return &r->flow;
    case XF_RESULT_POOLED: return &r->measures.pooled;
    case XF_RESULT_RESID: return &r->resid;
    case XF_RESULT_Z: return &r->z;
    case XF_RESULT_ATTN_OUT: return &r->attn_out;
    case XF_RESULT_MLP_OUT: return &r->mlp_out;
    default: return &r->last_rows;
    }
}

/* Every entry r keeps, floats as NaN and the rest as all ones, and its
 * scratch block too: what a pass reads before it writes shows. */
static void poison(struct xf_result *r)
{
    for (int i = 0; i < XF_RESULT_FLOAT_ARRAYS; i++) {
        float *a = *float_slot(r, i);
        for (size_t k = 0; a && k < r->room[i]; k++)
            a[k] = __builtin_nanf("");
    }
    if (r->lens)
        memset(r->lens, 0xff, r->room[XF_RESULT_LENS] * sizeof *r->lens);
    if (r->scratch)
        memset(r->scratch, 0xff, r->scratch_bytes);
}

/* The plan's arrays of a and b hold the same bits, and the same sizes. */
static void assert_same_result(const struct xf_plan *plan, struct xf_result *a,
                               struct xf_result *b)
{
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->weight_layers, b->weight_layers);
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->keys, b->keys);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->lens_k, b->lens_k);
    assert_int_equal(a->batch, b->batch);
    assert_int_equal(a->captured, b->captured);
    for (int i = 0; i < XF_RESULT_FLOAT_ARRAYS; i++) {
        const size_t count = plan->result_count[i];
        const float *x = *float_slot(a, i), *y = *float_slot(b, i);
        if (!count) {
            assert_null(x);
            assert_null(y);
            continue;
        }
        assert_non_null(x);
        assert_non_null(y);
        if (memcmp(x, y, count * sizeof *x))
            fail_msg("result array %d differs after a pass into kept memory",
                     i);
    }
    const size_t lens = plan->result_count[XF_RESULT_LENS];
    if (lens)
        assert_memory_equal(a->lens, b->lens, lens * sizeof *a->lens);
    const struct attn_measures *ma = &a->measures, *mb = &b->measures;
    if (plan->top_count) {
        const size_t k = plan->run.top_k;
        assert_memory_equal(ma->top_keys, mb->top_keys,
                            plan->top_count * k * sizeof *ma->top_keys);
        assert_memory_equal(ma->top_weights, mb->top_weights,
                            plan->top_count * k * sizeof *ma->top_weights);
        assert_memory_equal(ma->top_count, mb->top_count,
                            plan->top_count * sizeof *ma->top_count);
    }
    if (plan->stats_count) {
        assert_memory_equal(ma->head_stats, mb->head_stats,
                            plan->stats_count * sizeof *ma->head_stats);
        assert_memory_equal(ma->key_received, mb->key_received,
                            LAYERS * HEADS * plan->run.n *
                                sizeof *ma->key_received);
    }
    if (plan->induction_count)
        assert_memory_equal(ma->induction, mb->induction,
                            plan->induction_count * sizeof *ma->induction);
}

/* The runs below: ids of n tokens (a repeated stretch for induction). */
static const uint32_t IDS[] = {1,  7, 3, 9,  4, 12, 7, 3,  9,  4,  12, 5,
                               30, 2, 8, 33, 6, 19, 1, 27, 11, 14, 22, 35};
enum { MOST = sizeof IDS / sizeof IDS[0] };

static struct xf_run run_of(size_t n, unsigned want, unsigned threads)
{
    return (struct xf_run){.ids = IDS,
                           .n = n,
                           .want = want,
                           .layer = XF_ALL_LAYERS,
                           .threads = threads,
                           .lens_k = TOP_K,
                           .top_k = TOP_K,
                           .repeat_start = 1,
                           .repeat_period = 5};
}

/* Each run's pass into memory another pass kept, and poisoned, has the
 * bits of a pass into fresh memory: first after a larger pass (every
 * array has room and is kept), then after a smaller one (some are too
 * small and are taken anew). */
static void test_again_is_a_fresh_pass(void **state)
{
    (void)state;
    const unsigned every = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS |
                           XF_WANT_HIDDEN | XF_WANT_ROLLOUT | XF_WANT_LOGITS |
                           XF_WANT_LOGIT_LENS | XF_WANT_HEAD_STATS |
                           XF_WANT_INDUCTION | XF_WANT_TOP_K | XF_WANT_FLOW |
                           XF_WANT_ACTIVATIONS | XF_WANT_LAST_ROWS;
    const unsigned wants[] = {
        every,
        XF_WANT_HIDDEN,
        XF_WANT_WEIGHTS,
        XF_WANT_WEIGHTS | XF_WANT_VALUE_WEIGHTED,
        XF_WANT_LOGITS | XF_WANT_ALL_LOGITS | XF_WANT_MEAN_WEIGHTS,
    };
    const struct xf_arch arches[] = {random_llama_arch(), random_gpt2_arch()};
    for (size_t ai = 0; ai < sizeof arches / sizeof arches[0]; ai++) {
        struct test_model o;
        test_model_make(&o, &arches[ai], LAYERS, HEADS, ai ? HEADS : 2, 6,
                        HIDDEN, 40, 31 + ai);
        o.m.lm_head = o.m.word_emb;
        for (size_t wi = 0; wi < sizeof wants / sizeof wants[0]; wi++)
            for (unsigned threads = 1; threads <= 2; threads++) {
                const size_t n = 12;
                const struct xf_run run = run_of(n, wants[wi], threads);
                struct xf_plan plan;
                struct xf_result fresh, kept = {0};
                struct attn_error err;
                assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_OK);
                assert_int_equal(xf_forward(&plan, NULL, &fresh, &err),
                                 ATTN_OK);
                assert_null(fresh.scratch); /* xf_forward() keeps none */
                // after a larger pass of every array: each one kept
                struct xf_plan larger;
                const struct xf_run big = run_of(MOST, every, threads);
                assert_int_equal(xf_plan(&o.m, &big, &larger, &err), ATTN_OK);
                assert_int_equal(xf_forward_again(&larger, NULL, &kept, &err),
                                 ATTN_OK);
                poison(&kept);
                const void *weights = kept.weights, *scratch = kept.scratch;
                assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err),
                                 ATTN_OK);
                assert_same_result(&plan, &fresh, &kept);
                assert_ptr_equal(kept.scratch, scratch);
                if (plan.result_count[XF_RESULT_WEIGHTS])
                    assert_ptr_equal(kept.weights, weights);
                // the same plan again, over its own values
                poison(&kept);
                assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err),
                                 ATTN_OK);
                assert_same_result(&plan, &fresh, &kept);
                // after a smaller pass: the arrays too small are new
                struct xf_plan smaller;
                const struct xf_run small = run_of(11, every, threads);
                assert_int_equal(xf_plan(&o.m, &small, &smaller, &err),
                                 ATTN_OK);
                xf_result_free(&kept);
                assert_int_equal(xf_forward_again(&smaller, NULL, &kept, &err),
                                 ATTN_OK);
                poison(&kept);
                assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err),
                                 ATTN_OK);
                assert_same_result(&plan, &fresh, &kept);
                for (int i = 0; i < XF_RESULT_ARRAYS; i++)
                    assert_true(kept.room[i] >= plan.result_count[i]);
                xf_result_free(&kept);
                xf_result_free(&fresh);
            }
        test_model_free(&o);
    }
}

/* A failed pass frees everything the result kept; a freed result is all
 * zero, ready for the next pass. */
static void test_again_fails_freed(void **state)
{
    (void)state;
    struct test_model o;
    const struct xf_arch a = random_llama_arch();
    test_model_make(&o, &a, LAYERS, HEADS, 2, 6, HIDDEN, 40, 5);
    const struct xf_run run =
        run_of(10, XF_WANT_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_TOP_K, 2);
    struct xf_plan plan;
    struct xf_result kept = {0}, zero = {0};
    struct attn_error err;
    assert_int_equal(xf_plan(&o.m, &run, &plan, &err), ATTN_OK);
    assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err), ATTN_OK);
    assert_non_null(kept.scratch);
    atomic_bool cancel = true;
    assert_int_equal(xf_forward_again(&plan, &cancel, &kept, &err),
                     ATTN_E_CANCELLED);
    assert_memory_equal(&kept, &zero, sizeof kept);
    assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err), ATTN_OK);
    xf_result_free(&kept);
    assert_memory_equal(&kept, &zero, sizeof kept);
    test_model_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_again_is_a_fresh_pass),
        cmocka_unit_test(test_again_fails_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
