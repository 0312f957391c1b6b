/*
 * goldens.c - replaying the decoder goldens (goldens.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "goldens.h"
#include "sampling.h"

#include <stdlib.h>

double *golden_doubles(const cJSON *list, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(list);
    double *out = malloc(*n * sizeof *out + 1);
    assert_non_null(out);
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, list) out[i++] = v->valuedouble;
    return out;
}

void golden_greedy(const struct model *m, const char *name, const cJSON *greedy,
                   double near_tie)
{
    const struct xf_model *x = &m->xf;
    size_t np, nn, nm = 0;
    double *prompt = golden_doubles(cJSON_GetObjectItem(greedy, "prompt"), &np);
    double *want = golden_doubles(cJSON_GetObjectItem(greedy, "new"), &nn);
    double *margins =
        near_tie > 0
            ? golden_doubles(cJSON_GetObjectItem(greedy, "margins"), &nm)
            : NULL;
    if (margins)
        assert_int_equal(nm, nn);
    uint32_t *ids = malloc((np + nn) * sizeof *ids);
    struct xf_candidate *scratch = malloc(x->vocab_size * sizeof *scratch);
    assert_non_null(ids);
    assert_non_null(scratch);
    for (size_t i = 0; i < np; i++)
        ids[i] = (uint32_t)prompt[i];
    struct xf_cache cache;
    assert_int_equal(xf_cache_init(x, np + nn, &cache, NULL), ATTN_OK);
    const struct xf_sampling g = {.temperature = 0, .top_p = 1};
    struct xf_run run = {.ids = ids,
                         .n = np,
                         .want = XF_WANT_LOGITS,
                         .layer = XF_ALL_LAYERS,
                         .cache = &cache};
    size_t t = 0;
    for (; t < nn && (!margins || margins[t] >= near_tie); t++) {
        run.threads = 1 + t % 2;
        struct xf_plan plan;
        struct xf_result r;
        struct attn_error err = {0};
        if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
            fail_msg("%s: greedy step %zu: %s", name, t, err.message);
        ids[np + t] = xf_sample(r.logits, x->vocab_size, &g, t, scratch);
        if (ids[np + t] != (uint32_t)want[t])
            fail_msg("%s: greedy token %zu is %u, want %.0f", name, t,
                     (unsigned)ids[np + t], want[t]);
        xf_result_free(&r);
        run.ids = ids + np + t;
        run.n = 1;
    }
    if (t == nn && nn)
        assert_int_equal(cache.len, np + nn - 1);
    xf_cache_free(&cache);
    free(scratch);
    free(ids);
    free(want);
    free(prompt);
    free(margins);
}
