/*
 * test_interventions.c - ablation, activation patching and direct logit
 * attribution on every committed checkpoint of tests/models/, through the
 * loader and the core, against the float64 reference of
 * tests/models/generate_interventions.py (golden/interventions/).
 *
 * Tolerances: as test_model.c for weights (2e-5 absolute), hidden states
 * and logits (1e-4 + 1e-4 * |reference|); patching effects and DLA parts
 * within 1e-4 absolute (in logits for DLA). Where a patch's two runs
 * differ by less than 0.1 in their metric, an effect divides float32's
 * rounding by that gap: there each patched run's metric is held to 1e-5
 * instead (the golden's own, "patched", where the gap is below 1e-4).
 * Greedy tokens must be the reference's, whose every step is at least
 * 1e-3 from a tie (generate_decoders.py's rule); a longrope model's
 * steps also have their logits held, as hidden states are.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "attribution.h"
#include "files.h"
#include "model/model.h"
#include "patching.h"
#include "sampling.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4
#define EFFECT_TOL 1e-4
#define NARROW_GAP 0.1
#define METRIC_TOL 1e-5
#define DLA_TOL 1e-4
#define RESTORE_TOL 1e-5

static struct model *load_ok(const char *variant)
{
    char dir[256], err[600] = "";
    snprintf(dir, sizeof dir, "tests/models/%s", variant);
    struct model *m = NULL;
    if (!model_load(variant, dir, &m, err, sizeof err))
        fail_msg("model_load %s: %s", dir, err);
    return m;
}

static cJSON *golden_of(const char *variant)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/golden/interventions/%s.json",
             variant);
    size_t len;
    char *text = test_read_file(path, &len);
    cJSON *g = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(g);
    return g;
}

static double *doubles(const cJSON *arr, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(arr);
    double *out = malloc(*n * sizeof *out + 1);
    assert_non_null(out);
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) out[i++] = v->valuedouble;
    return out;
}

static uint32_t *ids_of(const cJSON *arr, size_t *n, size_t extra)
{
    *n = (size_t)cJSON_GetArraySize(arr);
    uint32_t *ids = malloc((*n + extra) * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < *n; i++)
        ids[i] = (uint32_t)cJSON_GetArrayItem(arr, (int)i)->valuedouble;
    return ids;
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* An ablate list as edits: one per position named, or one for all. */
static struct xf_edit *edits_of(const cJSON *ablate, size_t *count)
{
    struct xf_edit *edits = malloc(256 * sizeof *edits);
    assert_non_null(edits);
    *count = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, ablate)
    {
        const cJSON *head = cJSON_GetObjectItem(a, "head");
        const cJSON *positions = cJSON_GetObjectItem(a, "positions");
        const char *mode = cJSON_GetObjectItem(a, "mode")->valuestring;
        struct xf_edit e = {.site = XF_SITE_Z,
                            .op = strcmp(mode, "mean") ? XF_EDIT_ZERO
                                                       : XF_EDIT_MEAN,
                            .layer = (size_t)number(a, "layer"),
                            .head = head ? (size_t)head->valuedouble : XF_ALL,
                            .position = XF_ALL};
        if (!positions) {
            edits[(*count)++] = e;
            continue;
        }
        const cJSON *p;
        cJSON_ArrayForEach(p, positions)
        {
            e.position = (size_t)p->valuedouble;
            edits[(*count)++] = e;
        }
    }
    return edits;
}

static void expect_close(const char *what, const float *got, const double *want,
                         size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= atol + rtol * fabs(want[i])))
            fail_msg("%s: [%zu] is %.9g, want %.9g", what, i, (double)got[i],
                     want[i]);
}

/* Each ablation case: the last layer's weights, every hidden state and
 * (a decoder's) logits, with the ablation in place. */
static void check_ablation(const struct model *m, const char *variant,
                           const cJSON *golden)
{
    const struct xf_model *x = &m->xf;
    size_t n;
    uint32_t *ids = ids_of(cJSON_GetObjectItem(golden, "ids"), &n, 0);
    const cJSON *types = cJSON_GetObjectItem(golden, "type_ids");
    uint8_t type_ids[64] = {0};
    assert_true(n <= 64);
    for (int i = 0; types && i < cJSON_GetArraySize(types); i++)
        type_ids[i] = (uint8_t)cJSON_GetArrayItem(types, i)->valuedouble;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "ablation"))
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        size_t n_edits;
        struct xf_edit *edits =
            edits_of(cJSON_GetObjectItem(c, "ablate"), &n_edits);
        const bool decoder = x->lm_head.data != NULL;
        const struct xf_run run = {.ids = ids,
                                   .type_ids = types ? type_ids : NULL,
                                   .n = n,
                                   .want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN |
                                           (decoder ? XF_WANT_LOGITS : 0),
                                   .layer = x->layers - 1,
                                   .threads = 2,
                                   .edits = edits,
                                   .n_edits = n_edits};
        struct xf_plan plan;
        struct xf_result r;
        struct attn_error err = {0};
        if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
            fail_msg("%s %s: %s", variant, name, err.message);
        char what[128];
        size_t k;
        double *w = doubles(cJSON_GetObjectItem(c, "attentions_last"), &k);
        assert_int_equal(k, x->heads * n * n);
        snprintf(what, sizeof what, "%s %s: last layer's weights", variant,
                 name);
        expect_close(what, r.weights, w, k, WEIGHT_TOL, 0);
        free(w);
        double *hs = doubles(cJSON_GetObjectItem(c, "hidden_states"), &k);
        assert_int_equal(k, (x->layers + 1) * n * x->hidden);
        snprintf(what, sizeof what, "%s %s: hidden states", variant, name);
        expect_close(what, r.hidden_states, hs, k, HIDDEN_ATOL, HIDDEN_RTOL);
        free(hs);
        if (decoder) {
            double *lg = doubles(cJSON_GetObjectItem(c, "logits"), &k);
            assert_int_equal(k, x->vocab_size);
            snprintf(what, sizeof what, "%s %s: logits", variant, name);
            expect_close(what, r.logits, lg, k, HIDDEN_ATOL, HIDDEN_RTOL);
            free(lg);
        }
        // the weights alone: the last layer's output, which nothing then
        // reads, is not computed, edits or not
        struct xf_run alone = run;
        alone.want = XF_WANT_WEIGHTS;
        alone.layer = XF_ALL_LAYERS;
        struct xf_result only;
        if (xf_plan(x, &alone, &plan, &err) ||
            xf_forward(&plan, NULL, &only, &err))
            fail_msg("%s %s, weights alone: %s", variant, name, err.message);
        const size_t per_layer = x->heads * n * n;
        assert_memory_equal(only.weights + (x->layers - 1) * per_layer,
                            r.weights, per_layer * sizeof(float));
        xf_result_free(&only);
        xf_result_free(&r);
        free(edits);
    }
    free(ids);
}

/* Greedy generation with heads ablated, through the KV cache one token at
 * a time: a mean after the cache is the prompt's. A longrope model's
 * cache is outgrown where the sequence passes its original length: there
 * the whole sequence runs again, as /generate runs it (the means the
 * prompt's, now turned by the long factors), and each step's logits are
 * held to the reference's. */
static void check_greedy_ablated(const struct model *m, const char *variant,
                                 const cJSON *greedy)
{
    const struct xf_model *x = &m->xf;
    size_t np, nn, n_edits;
    uint32_t *ids = ids_of(cJSON_GetObjectItem(greedy, "prompt"), &np, 16);
    uint32_t *want = ids_of(cJSON_GetObjectItem(greedy, "new"), &nn, 0);
    struct xf_edit *edits =
        edits_of(cJSON_GetObjectItem(greedy, "ablate"), &n_edits);
    assert_true(nn >= 4 && nn <= 16);
    const cJSON *factors = cJSON_GetObjectItem(greedy, "longrope");
    size_t k = 0;
    double *step_logits =
        factors ? doubles(cJSON_GetObjectItem(greedy, "logits"), &k) : NULL;
    assert_true(!factors || k == nn * x->vocab_size);
    size_t reruns = 0, crossings = 0;
    struct xf_candidate *scratch = malloc(x->vocab_size * sizeof *scratch);
    assert_non_null(scratch);
    struct xf_cache cache;
    assert_int_equal(xf_cache_init(x, np + nn, &cache, NULL), ATTN_OK);
    const struct xf_sampling g = {.temperature = 0, .top_p = 1};
    struct xf_run run = {.ids = ids,
                         .n = np,
                         .want = XF_WANT_LOGITS,
                         .layer = XF_ALL_LAYERS,
                         .cache = &cache,
                         .edits = edits,
                         .n_edits = n_edits,
                         .mean_over = np};
    for (size_t t = 0; t < nn; t++) {
        run.threads = 1 + t % 2;
        if (factors && t > 0 &&
            strcmp(cJSON_GetArrayItem(factors, (int)t - 1)->valuestring,
                   cJSON_GetArrayItem(factors, (int)t)->valuestring))
            crossings++;
        if (xf_cache_outgrown(x, &cache, run.n)) {
            // as /generate: the cache dropped, every token so far again
            cache.len = 0;
            run.ids = ids;
            run.n = np + t;
            reruns++;
        }
        struct xf_plan plan;
        struct xf_result r;
        struct attn_error err = {0};
        if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
            fail_msg("%s: ablated greedy step %zu: %s", variant, t,
                     err.message);
        if (step_logits) {
            char what[128];
            snprintf(what, sizeof what,
                     "%s: ablated greedy step %zu logits (%s)", variant, t,
                     cJSON_GetArrayItem(factors, (int)t)->valuestring);
            expect_close(what, r.logits, step_logits + t * x->vocab_size,
                         x->vocab_size, HIDDEN_ATOL, HIDDEN_RTOL);
        }
        ids[np + t] = xf_sample(r.logits, x->vocab_size, &g, t, scratch);
        if (ids[np + t] != want[t])
            fail_msg("%s: ablated greedy token %zu is %u, want %u", variant, t,
                     (unsigned)ids[np + t], (unsigned)want[t]);
        xf_result_free(&r);
        run.ids = ids + np + t;
        run.n = 1;
    }
    // the sequence ran again exactly where the reference's factors turn
    assert_int_equal(reruns, crossings);
    xf_cache_free(&cache);
    free(step_logits);
    free(scratch);
    free(edits);
    free(want);
    free(ids);
}

static xf_patch_over over_of(const char *name)
{
    for (int o = 0; xf_patch_over_name(o); o++)
        if (!strcmp(xf_patch_over_name(o), name))
            return (xf_patch_over)o;
    fail_msg("unknown over %s", name);
    return XF_PATCH_HEADS;
}

/* A case's numbers in the answer's run order: "layers" has its attn runs,
 * then its mlp runs. */
static double *runs_of(xf_patch_over over, const cJSON *v, size_t *k)
{
    if (over != XF_PATCH_LAYERS)
        return doubles(v, k);
    size_t ka, km;
    double *attn = doubles(cJSON_GetObjectItem(v, "attn"), &ka);
    double *mlp = doubles(cJSON_GetObjectItem(v, "mlp"), &km);
    *k = ka + km;
    double *out = malloc(*k * sizeof *out + 1);
    assert_non_null(out);
    memcpy(out, attn, ka * sizeof *out);
    memcpy(out + ka, mlp, km * sizeof *out);
    free(attn);
    free(mlp);
    return out;
}

/* Every patching case: the two runs' metrics, then each patched run's
 * effect, in the answer's layout. */
static void check_patching(const struct model *m, const char *variant,
                           const cJSON *patching)
{
    const struct xf_model *x = &m->xf;
    size_t n, n2;
    uint32_t *clean = ids_of(cJSON_GetObjectItem(patching, "clean_ids"), &n, 0);
    uint32_t *corrupted =
        ids_of(cJSON_GetObjectItem(patching, "corrupted_ids"), &n2, 0);
    assert_int_equal(n, n2);
    const cJSON *c;
    size_t n_case = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(patching, "cases"))
    {
        const cJSON *metric = cJSON_GetObjectItem(c, "metric");
        const bool logprob = !strcmp(
            cJSON_GetObjectItem(metric, "kind")->valuestring, "logprob");
        struct xf_patch p = {
            .clean = clean,
            .corrupted = corrupted,
            .n = n,
            .over = over_of(cJSON_GetObjectItem(c, "over")->valuestring),
            .noise = !strcmp(cJSON_GetObjectItem(c, "direction")->valuestring,
                             "noise"),
            .metric = {.kind =
                           logprob ? XF_METRIC_LOGPROB : XF_METRIC_LOGIT_DIFF,
                       .correct = (uint32_t)number(
                           metric, logprob ? "target" : "correct")},
            .threads = 1 + n_case % 2,
            // small batches, so that a layer's runs take several
            .batch_rows = n * (2 + n_case % 3)};
        if (!logprob)
            p.metric.incorrect = (uint32_t)number(metric, "incorrect");
        struct xf_patch_result r;
        struct attn_error err = {0};
        if (xf_patch_run(x, &p, NULL, &r, &err))
            fail_msg("%s patch case %zu: %s", variant, n_case, err.message);
        const double clean_m = number(c, "clean"),
                     corr_m = number(c, "corrupted");
        if (!(fabs(r.clean - clean_m) <= METRIC_TOL + 1e-5 * fabs(clean_m)) ||
            !(fabs(r.corrupted - corr_m) <= METRIC_TOL + 1e-5 * fabs(corr_m)))
            fail_msg("%s patch case %zu: metrics %.9g, %.9g; want %.9g, %.9g",
                     variant, n_case, r.clean, r.corrupted, clean_m, corr_m);
        size_t k, kp = 0;
        double *want = runs_of(p.over, cJSON_GetObjectItem(c, "effects"), &k);
        assert_int_equal(k, r.runs);
        // where the gap is too narrow for the rounded metrics to give the
        // patched ones back, the golden has them
        const cJSON *pm = cJSON_GetObjectItem(c, "patched");
        double *patched = pm ? runs_of(p.over, pm, &kp) : NULL;
        assert_true(!pm || kp == k);
        const double gap = clean_m - corr_m;
        for (size_t i = 0; i < k; i++) {
            double got;
            assert_true(xf_patch_effect(&r, i, &got));
            const bool narrow = fabs(gap) < NARROW_GAP;
            const double metric_want =
                patched ? patched[i] : corr_m + want[i] * gap;
            if (narrow ? !(fabs(r.patched[i] - metric_want) <= METRIC_TOL)
                       : !(fabs(got - want[i]) <= EFFECT_TOL))
                fail_msg("%s patch case %zu (%s): effect %zu is %.9g, want "
                         "%.9g",
                         variant, n_case, xf_patch_over_name((int)p.over), i,
                         got, want[i]);
        }
        free(want);
        free(patched);
        xf_patch_result_free(&r);
        n_case++;
    }
    assert_int_equal(n_case, 9);
    free(clean);
    free(corrupted);
}

/* Residual patching at layer 0 where the inputs differ restores the clean
 * run: an effect of 1 there, 0 at every other position (the tokens are
 * the same). Denoising, the patched run at that position is the clean
 * run itself, computed as a batch: the same bits where the products do
 * not depend on their row count (float32 and bfloat16 weights streamed
 * on AVX-512), else within float32's rounding, RESTORE_TOL. */
static void check_residual_restores(const struct model *m, const char *variant,
                                    const cJSON *patching)
{
    const struct xf_model *x = &m->xf;
    size_t n, n2;
    uint32_t *clean = ids_of(cJSON_GetObjectItem(patching, "clean_ids"), &n, 0);
    uint32_t *corrupted =
        ids_of(cJSON_GetObjectItem(patching, "corrupted_ids"), &n2, 0);
    const size_t at = (size_t)number(patching, "position");
    const struct xf_patch p = {
        .clean = clean,
        .corrupted = corrupted,
        .n = n,
        .over = XF_PATCH_RESIDUAL,
        .metric = {.kind = XF_METRIC_LOGIT_DIFF,
                   .correct = (uint32_t)number(patching, "correct"),
                   .incorrect = (uint32_t)number(patching, "incorrect")},
        .threads = 2,
        .batch_rows = 4 * n};
    struct xf_patch_result r;
    assert_int_equal(xf_patch_run(x, &p, NULL, &r, NULL), ATTN_OK);
    for (size_t i = 0; i < n; i++) {
        double e;
        assert_true(xf_patch_effect(&r, i, &e));
        if (!(fabs(e - (i == at ? 1.0 : 0.0)) <= RESTORE_TOL))
            fail_msg("%s layer 0, position %zu: effect %.9g", variant, i, e);
    }
    xf_patch_result_free(&r);
    free(clean);
    free(corrupted);
}

/* Each DLA case: every part, and their sum against the model's logit. */
static void check_dla(const struct model *m, const char *variant,
                      const cJSON *golden)
{
    const struct xf_model *x = &m->xf;
    size_t n;
    uint32_t *ids = ids_of(cJSON_GetObjectItem(golden, "ids"), &n, 0);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "dla"))
    {
        size_t nt;
        uint32_t *target = ids_of(cJSON_GetObjectItem(c, "target"), &nt, 0);
        const struct xf_run run = {.ids = ids,
                                   .n = n,
                                   .want = XF_WANT_ACTIVATIONS,
                                   .layer = XF_ALL_LAYERS,
                                   .threads = 2,
                                   .capture_position =
                                       (size_t)number(c, "position")};
        struct xf_plan plan;
        struct xf_result r;
        struct xf_dla d;
        struct attn_error err = {0};
        if (xf_plan(x, &run, &plan, &err) ||
            xf_forward(&plan, NULL, &r, &err) ||
            xf_dla(x, &r, target, nt, &d, &err))
            fail_msg("%s dla: %s", variant, err.message);
        size_t k;
        double *heads = doubles(cJSON_GetObjectItem(c, "heads"), &k);
        assert_int_equal(k, x->layers * x->heads);
        for (size_t i = 0; i < k; i++)
            if (!(fabs(d.heads_part[i] - heads[i]) <= DLA_TOL))
                fail_msg("%s dla: head %zu is %.9g, want %.9g", variant, i,
                         d.heads_part[i], heads[i]);
        free(heads);
        double *mlp = doubles(cJSON_GetObjectItem(c, "mlp"), &k);
        for (size_t l = 0; l < x->layers; l++)
            assert_true(fabs(d.mlp[l] - mlp[l]) <= DLA_TOL);
        free(mlp);
        const cJSON *ab = cJSON_GetObjectItem(c, "attn_bias");
        assert_int_equal(cJSON_IsArray(ab), d.attn_bias != NULL);
        for (size_t l = 0; d.attn_bias && l < x->layers; l++)
            assert_true(fabs(d.attn_bias[l] -
                             cJSON_GetArrayItem(ab, (int)l)->valuedouble) <=
                        DLA_TOL);
        assert_true(fabs(d.embed - number(c, "embed")) <= DLA_TOL);
        assert_true(fabs(d.bias - number(c, "bias")) <= DLA_TOL);
        assert_true(fabs(d.total - number(c, "total")) <= DLA_TOL);
        const double logit = number(c, "logit");
        assert_true(fabs(d.logit - logit) <= DLA_TOL);
        // the parts add up to the model's own logit (difference)
        if (!(fabs(d.total - d.logit) <= 1e-4 * fmax(1.0, fabs(d.logit))))
            fail_msg("%s dla: the parts sum to %.9g, the logit is %.9g",
                     variant, d.total, d.logit);
        xf_dla_free(&d);
        xf_result_free(&r);
        free(target);
    }
    free(ids);
}

static const char *const decoders[] = {
    "gpt2",  "gpt2_prefixed", "llama2", "llama3",        "mistral",
    "qwen2", "qwen3",         "gemma",  "gemma2",        "gemma3",
    "neox",  "neox_seq",      "phi3",   "phi3_longrope", "olmo2"};

static void test_ablation_matches(void **state)
{
    (void)state;
    for (size_t v = 0; v < sizeof decoders / sizeof *decoders; v++) {
        struct model *m = load_ok(decoders[v]);
        cJSON *g = golden_of(decoders[v]);
        check_ablation(m, decoders[v], g);
        check_greedy_ablated(m, decoders[v],
                             cJSON_GetObjectItem(g, "greedy_ablated"));
        cJSON_Delete(g);
        model_free(m);
    }
    // an encoder: BERT's post-norm layers, the output bias after the heads
    struct model *m = load_ok("f32");
    cJSON *g = golden_of("f32");
    check_ablation(m, "f32", g);
    cJSON_Delete(g);
    model_free(m);
}

static void test_patching_matches(void **state)
{
    (void)state;
    for (size_t v = 0; v < sizeof decoders / sizeof *decoders; v++) {
        struct model *m = load_ok(decoders[v]);
        cJSON *g = golden_of(decoders[v]);
        check_patching(m, decoders[v], cJSON_GetObjectItem(g, "patching"));
        check_residual_restores(m, decoders[v],
                                cJSON_GetObjectItem(g, "patching"));
        cJSON_Delete(g);
        model_free(m);
    }
}

static void test_dla_matches(void **state)
{
    (void)state;
    for (size_t v = 0; v < sizeof decoders / sizeof *decoders; v++) {
        struct model *m = load_ok(decoders[v]);
        cJSON *g = golden_of(decoders[v]);
        check_dla(m, decoders[v], g);
        cJSON_Delete(g);
        model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ablation_matches),
        cmocka_unit_test(test_patching_matches),
        cmocka_unit_test(test_dla_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
