/*
 * sampling.c - the next token from a decoder's logits (sampling.h).
 */
#include "error.h"
#include "logit_norm.h"
#include "rng.h"
#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_status xf_sampling_check(const struct xf_sampling *s,
                              struct attn_error *err)
{
    if (!(s->temperature == 0.0 || (s->temperature >= XF_MIN_TEMPERATURE &&
                                    s->temperature <= XF_MAX_TEMPERATURE)))
        return attn_fail(err, ATTN_E_INVALID, "temperature",
                         "temperature (%g) must be 0 (greedy) or %g to %g",
                         s->temperature, XF_MIN_TEMPERATURE,
                         XF_MAX_TEMPERATURE);
    if (!(s->top_p > 0.0 && s->top_p <= 1.0))
        return attn_fail(err, ATTN_E_INVALID, "top_p",
                         "top_p (%g) must be above 0 and at most 1", s->top_p);
    if (!(s->min_p >= 0.0 && s->min_p <= 1.0))
        return attn_fail(err, ATTN_E_INVALID, "min_p",
                         "min_p (%g) must be from 0 to 1", s->min_p);
    return ATTN_OK;
}

/* Most probable first; the lowest id among equals. */
static int by_score(const void *a, const void *b)
{
    const struct xf_candidate *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The largest finite logit's id (the lowest among equals); 0 when none
 * is finite. */
static uint32_t greedy(const float *logits, size_t vocab)
{
    uint32_t best = 0;
    bool found = false;
    for (size_t i = 0; i < vocab; i++)
        if (isfinite(logits[i]) && (!found || logits[i] > logits[best])) {
            best = (uint32_t)i;
            found = true;
        }
    return best;
}

uint32_t xf_sample(const float *logits, size_t vocab,
                   const struct xf_sampling *s, uint64_t step,
                   struct xf_candidate *scratch)
{
    if (s->temperature == 0.0)
        return greedy(logits, vocab);
    // the scores as TemperatureLogitsWarper leaves them, in float32
    size_t count = 0;
    const float t = (float)s->temperature;
    for (size_t i = 0; i < vocab; i++) {
        const float score = logits[i] / t;
        if (isfinite(score))
            scratch[count++] = (struct xf_candidate){(uint32_t)i, score};
    }
    if (count == 0)
        return 0;
    qsort(scratch, count, sizeof *scratch, by_score);
    // TopKLogitsWarper: below the k-th score is out, equals to it stay
    if (s->top_k && s->top_k < count) {
        const float kth = scratch[s->top_k - 1].score;
        size_t keep = s->top_k;
        while (keep < count && scratch[keep].score >= kth)
            keep++;
        count = keep;
    }
    // softmax over what is left, in double
    const double top = scratch[0].score;
    double total = 0.0;
    for (size_t i = 0; i < count; i++)
        total += exp(scratch[i].score - top);
    // TopPLogitsWarper: a token goes when the mass of those at most as
    // probable is at most 1 - top_p, that is when the mass of the more
    // probable ones reaches top_p; the most probable always stays
    if (s->top_p < 1.0) {
        double above = 0.0;
        size_t keep = 0;
        while (keep < count && (keep == 0 || above < s->top_p)) {
            above += exp(scratch[keep].score - top) / total;
            keep++;
        }
        count = keep;
        total = 0.0;
        for (size_t i = 0; i < count; i++)
            total += exp(scratch[i].score - top);
    }
    // MinPLogitsWarper: a token less probable than min_p times the most
    // probable goes (p_i / p_top is exp(score_i - top) whatever is left)
    if (s->min_p > 0.0) {
        size_t keep = 1;
        while (keep < count && exp(scratch[keep].score - top) >= s->min_p)
            keep++;
        count = keep;
        total = 0.0;
        for (size_t i = 0; i < count; i++)
            total += exp(scratch[i].score - top);
    }
    // the draw: the first token whose running mass passes u
    const uint64_t key = attn_stream_key(s->seed, "sample", strlen("sample"));
    const double u = rng_unit(key, step) * total;
    double acc = 0.0;
    for (size_t i = 0; i < count; i++) {
        acc += exp(scratch[i].score - top);
        if (u < acc)
            return scratch[i].id;
    }
    return scratch[count - 1].id;
}

/* The n largest finite logits into top, most probable first (by_score),
 * their logits as scores; returns how many there are. */
static size_t largest(const float *logits, size_t vocab, size_t n,
                      struct xf_candidate *top)
{
    n = n < vocab ? n : vocab;
    size_t have = 0;
    // by insertion: n is small (at most a few dozen)
    for (size_t i = 0; i < vocab && n; i++) {
        const struct xf_candidate c = {(uint32_t)i, logits[i]};
        if (!isfinite(c.score))
            continue;
        size_t at = have;
        while (at > 0 && by_score(&c, &top[at - 1]) < 0)
            at--;
        if (at >= n)
            continue;
        const size_t moved = (have < n ? have : n - 1) - at;
        memmove(&top[at + 1], &top[at], moved * sizeof *top);
        top[at] = c;
        have += have < n;
    }
    return have;
}

size_t xf_top_tokens(const float *logits, size_t vocab, size_t n,
                     struct xf_candidate *top)
{
    if (!n)
        return 0; /* no candidates asked: no normalizer to sum */
    double most, total;
    logit_norm(logits, vocab, &most, &total); /* softmax's normalizer */
    const size_t have = largest(logits, vocab, n, top);
    for (size_t i = 0; i < have; i++)
        top[i].score = (float)(exp(top[i].score - most) / total);
    return have;
}

size_t xf_top_logprobs(const float *logits, size_t vocab, size_t n,
                       struct xf_candidate *top, uint32_t id,
                       double *id_logprob)
{
    double most, total;
    logit_norm(logits, vocab, &most, &total); /* softmax's normalizer */
    // log softmax: logit - max - log(sum exp(logit - max))
    const double norm = most + log(total);
    if (id_logprob)
        *id_logprob = id < vocab && isfinite(logits[id])
                          ? (double)logits[id] - norm
                          : -INFINITY;
    const size_t have = largest(logits, vocab, n, top);
    for (size_t i = 0; i < have; i++)
        top[i].score = (float)((double)top[i].score - norm);
    return have;
}
