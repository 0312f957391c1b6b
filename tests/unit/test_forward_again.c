/*
 * test_forward_again.c - xf_forward_again(): a pass into the memory an
 * earlier result kept gives the same bits as a pass into fresh memory,
 * for every array a result can hold and every way through the pass (one
 * layer returned, one position captured, edits, a start, a batch, a
 * cache started and stepped, batched steps; LLaMA with a window, GPT-2,
 * BERT, sandwich norms, bfloat16 weights), though that memory is full of
 * another pass's values (poisoned here, so that a pass that leaves any
 * entry unwritten fails), and its caches end the same; it keeps the
 * arrays and the scratch block that have room, takes new ones where
 * they are too small, and frees them all when it fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "random_model.h"
#include "support.h"
#include "transformer.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 2, HEADS = 4, HIDDEN = 24, VOCAB = 40, TOP_K = 3 };

/* Every entry r keeps, floats as NaN and the rest as all ones, and its
 * scratch block too: what a pass reads before it writes shows. */
static void poison(struct xf_result *r)
{
    for (int i = 0; i < XF_RESULT_FLOAT_ARRAYS; i++) {
        float *a = *xf_result_array(r, i);
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
        const float *x = *xf_result_array(a, i), *y = *xf_result_array(b, i);
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

/* A cache's contents, to start two passes from the same state and to
 * hold their ends to each other. */
struct cache_copy {
    struct xf_cache *c;
    size_t len, kv, z;
    float *k, *v, *z_mean;
};

static void cache_copy(struct cache_copy *s, const struct xf_model *m,
                       struct xf_cache *c)
{
    s->c = c;
    s->len = c->len;
    s->kv = m->layers * c->capacity * c->row;
    s->z = m->layers * m->heads * m->head_dim;
    s->k = malloc(s->kv * sizeof *s->k);
    s->v = malloc(s->kv * sizeof *s->v);
    s->z_mean = malloc(s->z * sizeof *s->z_mean);
    assert_non_null(s->k);
    assert_non_null(s->v);
    assert_non_null(s->z_mean);
    memcpy(s->k, c->k, s->kv * sizeof *s->k);
    memcpy(s->v, c->v, s->kv * sizeof *s->v);
    memcpy(s->z_mean, c->z_mean, s->z * sizeof *s->z_mean);
}

static void cache_restore(const struct cache_copy *s)
{
    s->c->len = s->len;
    memcpy(s->c->k, s->k, s->kv * sizeof *s->k);
    memcpy(s->c->v, s->v, s->kv * sizeof *s->v);
    memcpy(s->c->z_mean, s->z_mean, s->z * sizeof *s->z_mean);
}

static void cache_copy_free(struct cache_copy *s)
{
    free(s->k);
    free(s->v);
    free(s->z_mean);
}

enum { MOST_CACHES = 2 };

/* The run's pass into fresh memory, then into the memory of a pass of
 * prime, poisoned: the same bits, and the same caches after. */
static void assert_again_same(const struct xf_model *m,
                              const struct xf_run *run,
                              const struct xf_run *prime,
                              struct xf_cache *const *caches, size_t n_caches)
{
    struct cache_copy before[MOST_CACHES], after[MOST_CACHES];
    for (size_t i = 0; i < n_caches; i++)
        cache_copy(&before[i], m, caches[i]);
    struct xf_plan plan, primed;
    struct xf_result fresh, kept = {0};
    struct attn_error err;
    assert_int_equal(xf_plan(m, run, &plan, &err), ATTN_OK);
    assert_int_equal(xf_forward(&plan, NULL, &fresh, &err), ATTN_OK);
    for (size_t i = 0; i < n_caches; i++) {
        cache_copy(&after[i], m, caches[i]);
        cache_restore(&before[i]);
    }
    assert_int_equal(xf_plan(m, prime, &primed, &err), ATTN_OK);
    assert_int_equal(xf_forward_again(&primed, NULL, &kept, &err), ATTN_OK);
    poison(&kept);
    assert_int_equal(xf_forward_again(&plan, NULL, &kept, &err), ATTN_OK);
    assert_same_result(&plan, &fresh, &kept);
    for (size_t i = 0; i < n_caches; i++) {
        assert_int_equal(caches[i]->len, after[i].len);
        assert_memory_equal(caches[i]->k, after[i].k,
                            after[i].kv * sizeof *after[i].k);
        assert_memory_equal(caches[i]->v, after[i].v,
                            after[i].kv * sizeof *after[i].v);
        cache_restore(&before[i]);
        cache_copy_free(&before[i]);
        cache_copy_free(&after[i]);
    }
    xf_result_free(&kept);
    xf_result_free(&fresh);
}

/* One sequence's passes: one layer returned with each per-layer array,
 * blocks of weights, rollout and flow and the lens; on a pre-norm model
 * one position captured, edits, a start and a batch from it. */
static void again_whole_runs(const struct xf_model *m,
                             const struct xf_run *base,
                             const struct xf_run *big, bool pre_norm)
{
    const unsigned per_layer[] = {XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS |
                                      XF_WANT_VALUE_WEIGHTED | XF_WANT_POOLED |
                                      XF_WANT_TOP_K,
                                  XF_WANT_WEIGHTS, XF_WANT_MEAN_WEIGHTS};
    struct xf_run r;
    for (size_t l = 0; l < LAYERS; l++)
        for (size_t w = 0; w < sizeof per_layer / sizeof per_layer[0]; w++) {
            r = *base;
            r.layer = l;
            r.want = per_layer[w];
            assert_again_same(m, &r, big, NULL, 0);
        }
    r = *base;
    r.want = XF_WANT_POOLED | XF_WANT_VALUE_WEIGHTED | XF_WANT_HIDDEN;
    assert_again_same(m, &r, big, NULL, 0);
    r.want = XF_WANT_ROLLOUT | XF_WANT_FLOW | XF_WANT_LOGIT_LENS;
    assert_again_same(m, &r, big, NULL, 0);
    if (!pre_norm)
        return;
    r = *base;
    r.want = XF_WANT_ACTIVATIONS | XF_WANT_LOGITS;
    r.capture_position = 5;
    assert_again_same(m, &r, big, NULL, 0);
    const struct xf_edit edits[] = {{.site = XF_SITE_Z,
                                     .op = XF_EDIT_MEAN,
                                     .layer = 1,
                                     .head = 2,
                                     .position = XF_ALL},
                                    {.site = XF_SITE_Z,
                                     .op = XF_EDIT_ZERO,
                                     .layer = 0,
                                     .head = XF_ALL,
                                     .position = 3}};
    r = *base;
    r.want = XF_WANT_ACTIVATIONS | XF_WANT_HIDDEN | XF_WANT_WEIGHTS |
             XF_WANT_LAST_ROWS;
    r.edits = edits;
    r.n_edits = 2;
    assert_again_same(m, &r, big, NULL, 0);
    // from a start: at layer 0 with the activations, above it without
    float start[12 * HIDDEN];
    for (size_t i = 0; i < sizeof start / sizeof start[0]; i++)
        start[i] = sinf((float)i);
    r = *base;
    r.n = 12;
    r.start = start;
    r.want = XF_WANT_ACTIVATIONS | XF_WANT_LOGITS | XF_WANT_LAST_ROWS;
    assert_again_same(m, &r, big, NULL, 0);
    r.first_layer = 1;
    struct xf_plan plan;
    struct attn_error err;
    // the layers below a start are not run: none of their activations
    assert_int_equal(xf_plan(m, &r, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "want");
    r.want = XF_WANT_LAST_ROWS | XF_WANT_LOGITS;
    assert_again_same(m, &r, big, NULL, 0);
    struct xf_edit each[3];
    for (size_t b = 0; b < 3; b++)
        each[b] = (struct xf_edit){.site = XF_SITE_RESID_PRE,
                                   .op = XF_EDIT_SET,
                                   .layer = 1,
                                   .head = XF_ALL,
                                   .position = b,
                                   .sequence = b,
                                   .source = start};
    r.batch = 3;
    r.edits = each;
    r.n_edits = 3;
    assert_again_same(m, &r, big, NULL, 0);
}

/* A decoder's passes through caches: one starting a cache, steps after
 * it (every array, mean weights alone, one layer, an edit) and two
 * sequences' batched step. */
static void again_cached_runs(const struct xf_model *m,
                              const struct xf_run *base,
                              const struct xf_run *big)
{
    struct xf_cache c, c2;
    assert_int_equal(xf_cache_init(m, MOST, &c, NULL), ATTN_OK);
    assert_int_equal(xf_cache_init(m, MOST, &c2, NULL), ATTN_OK);
    struct xf_cache *one[1] = {&c};
    struct xf_run r = *base;
    r.n = 8;
    r.cache = &c;
    r.want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS | XF_WANT_HIDDEN |
             XF_WANT_LOGITS;
    assert_again_same(m, &r, big, one, 1);
    struct xf_result filled;
    assert_int_equal(test_xf_forward(m, &r, NULL, &filled, NULL), ATTN_OK);
    xf_result_free(&filled);
    r = *base;
    r.n = 1;
    r.ids = IDS + 8;
    r.cache = &c;
    r.want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS | XF_WANT_HIDDEN |
             XF_WANT_LOGITS;
    assert_again_same(m, &r, big, one, 1);
    r.want = XF_WANT_MEAN_WEIGHTS | XF_WANT_LOGITS;
    assert_again_same(m, &r, big, one, 1);
    r.want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS;
    r.layer = 1;
    assert_again_same(m, &r, big, one, 1);
    const struct xf_edit mean = {.site = XF_SITE_Z,
                                 .op = XF_EDIT_MEAN,
                                 .layer = 1,
                                 .head = 0,
                                 .position = XF_ALL};
    r.layer = XF_ALL_LAYERS;
    r.edits = &mean;
    r.n_edits = 1;
    r.want = XF_WANT_LOGITS | XF_WANT_HIDDEN;
    assert_again_same(m, &r, big, one, 1);
    // a second sequence, and both a step together
    struct xf_run second = *base;
    second.n = 5;
    second.cache = &c2;
    second.want = XF_WANT_LOGITS;
    assert_int_equal(test_xf_forward(m, &second, NULL, &filled, NULL), ATTN_OK);
    xf_result_free(&filled);
    float weights[LAYERS * HEADS * MOST], means[LAYERS * MOST];
    const struct xf_seq seqs[2] = {{.cache = &c,
                                    .layer = XF_ALL_LAYERS,
                                    .weights = weights,
                                    .mean_weights = means},
                                   {.cache = &c2, .layer = XF_ALL_LAYERS}};
    const uint32_t next[2] = {3, 4};
    struct xf_cache *both[2] = {&c, &c2};
    r = *base;
    r.n = 1;
    r.ids = next;
    r.seqs = seqs;
    r.batch = 2;
    r.want = XF_WANT_LOGITS;
    assert_again_same(m, &r, big, both, 2);
    xf_cache_free(&c2);
    xf_cache_free(&c);
}

/* Every way through the pass, on each kind of model. */
static void test_again_every_path(void **state)
{
    (void)state;
    enum { KINDS = 5 };
    for (int kind = 0; kind < KINDS; kind++) {
        struct xf_arch a = kind == 1   ? random_gpt2_arch()
                           : kind == 2 ? test_bert_arch(XF_ACT_GELU)
                                       : random_llama_arch();
        if (kind == 3)
            a.norm_place = XF_NORM_SANDWICH;
        struct test_model o;
        test_model_make(&o, &a, LAYERS, HEADS, 2, 6, HIDDEN, 40, 11 + kind);
        o.m.lm_head = o.m.word_emb;
        if (kind == 0)
            o.m.kind[0].window = 4;
        uint16_t *store = NULL;
        struct xf_layer *half = NULL;
        if (kind == 4) // every matrix at 16 bits, through the panels
            test_model_bf16(&o, &store, &half);
        uint32_t rows[MOST], cols[MOST];
        for (size_t i = 0; i < MOST; i++) {
            rows[i] = (uint32_t)(i * 3 / MOST);
            cols[i] = (uint32_t)(i * 4 / MOST);
        }
        struct xf_run base = run_of(12, 0, 2);
        base.pool_row = rows;
        base.pool_col = cols;
        base.pool_rows = 3;
        base.pool_cols = 4;
        const bool pre_norm = a.norm_place != XF_NORM_AFTER;
        // a larger pass with every array first, whose memory each reuses
        struct xf_run big = base;
        big.n = MOST;
        big.want = XF_WANT_WEIGHTS | XF_WANT_MEAN_WEIGHTS | XF_WANT_HIDDEN |
                   XF_WANT_LOGITS | XF_WANT_ALL_LOGITS |
                   XF_WANT_VALUE_WEIGHTED | XF_WANT_POOLED |
                   XF_WANT_LOGIT_LENS | XF_WANT_ROLLOUT | XF_WANT_LAST_ROWS |
                   (pre_norm ? XF_WANT_ACTIVATIONS : 0);
        again_whole_runs(&o.m, &base, &big, pre_norm);
        if (a.causal)
            again_cached_runs(&o.m, &base, &big);
        test_model_free(&o);
        free(half);
        free(store);
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
        cmocka_unit_test(test_again_every_path),
        cmocka_unit_test(test_again_fails_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
