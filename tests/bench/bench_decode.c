/*
 * bench_decode.c - a decoder's tokens a second against the memory bound
 * (bench_decode.h).
 */
#include "bench_clock.h"
#include "bench_decode.h"
#include "bench_torch.h"
#include "sampling.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of a matrix of count values. */
static double matrix_bytes(struct xf_matrix w, size_t count)
{
    return w.data ? (double)attn_dtype_bytes(w.dtype, count) : 0.0;
}

/* What a token reads of the weights: every layer's matrices and the
 * output head at their stored width (its embedding row and the vectors
 * are noise beside them). */
static double token_bytes(const struct xf_model *m)
{
    const size_t H = m->hidden, J = m->intermediate;
    const size_t hd = m->heads * m->head_dim, gd = m->kv_heads * m->head_dim;
    double total = matrix_bytes(m->lm_head, m->vocab_size * H);
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &m->layer[l];
        total += matrix_bytes(y->q_w, hd * H) + matrix_bytes(y->k_w, gd * H) +
                 matrix_bytes(y->v_w, gd * H) + matrix_bytes(y->o_w, H * hd) +
                 matrix_bytes(y->up_w, J * H) + matrix_bytes(y->gate_w, J * H) +
                 matrix_bytes(y->down_w, H * J);
    }
    return total;
}

bool bench_bf16_dots;

/* One run through the cache; its seconds, and the greedy next token. */
static double cached_run(const struct xf_model *m, struct xf_cache *cache,
                         const uint32_t *ids, size_t n,
                         struct xf_candidate *scratch, uint32_t *next)
{
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = cores(),
                               .cache = cache,
                               .bf16_dots = bench_bf16_dots};
    const struct xf_sampling greedy = {.temperature = 0, .top_p = 1};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err;
    const double t0 = now_seconds();
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, NULL, &r, &err);
    if (st != ATTN_OK) {
        fprintf(stderr, "bench_decoder: a cached run: %s\n", err.message);
        return -1.0;
    }
    *next = xf_sample(r.logits, m->vocab_size, &greedy, 0, scratch);
    const double t = now_seconds() - t0;
    xf_result_free(&r);
    return t;
}

bool bench_decoding(const struct xf_model *m, size_t prompt, size_t tokens,
                    int rounds, struct bandwidth_probe *probe, FILE *report,
                    struct decoding *out)
{
    memset(out, 0, sizeof *out);
    out->prompt = prompt;
    out->tokens = tokens;
    out->bytes_per_token = token_bytes(m);
    uint32_t *ids = malloc((prompt + tokens) * sizeof *ids);
    struct xf_candidate *scratch = malloc(m->vocab_size * sizeof *scratch);
    double *first = malloc((size_t)rounds * sizeof *first);
    double *each = malloc((size_t)rounds * tokens * sizeof *each);
    double *bw = malloc((size_t)rounds * sizeof *bw);
    struct bandwidth *how = malloc((size_t)rounds * sizeof *how);
    struct xf_cache cache = {0};
    bool ok = ids && scratch && first && each && bw && how &&
              xf_cache_init(m, prompt + tokens, &cache, NULL) == ATTN_OK;
    if (ok)
        bench_ids(ids, prompt, m->vocab_size);
    for (int r = 0; ok && r < rounds; r++) {
        ok = bandwidth_measure(probe, BENCH_READ_TURNS, r ? NULL : report,
                               &how[r]);
        bw[r] = ok ? how[r].gbs : -1.0;
        cache.len = 0; /* a new sequence */
        first[r] = cached_run(m, &cache, ids, prompt, scratch, &ids[prompt]);
        ok = bw[r] > 0 && first[r] >= 0;
        for (size_t t = 0; ok && t < tokens; t++) {
            uint32_t next;
            each[r * tokens + t] =
                cached_run(m, &cache, &ids[prompt + t], 1, scratch, &next);
            ok = each[r * tokens + t] >= 0;
            if (t + 1 < tokens)
                ids[prompt + t + 1] = next;
        }
    }
    if (ok) {
        /* the loop of the round nearest the median */
        int near = 0;
        out->read_gbs = median(bw, (size_t)rounds);
        for (int r = 1; r < rounds; r++)
            if (fabs(how[r].gbs - out->read_gbs) <
                fabs(how[near].gbs - out->read_gbs))
                near = r;
        snprintf(out->read_how, sizeof out->read_how, "%s", how[near].strategy);
        out->first_token_ms = median(first, (size_t)rounds) * 1e3;
        out->token_ms = median(each, (size_t)rounds * tokens) * 1e3;
        out->tokens_s = 1e3 / out->token_ms;
        out->bound_tokens_s = out->read_gbs * 1e9 / out->bytes_per_token;
    }
    xf_cache_free(&cache);
    free(how);
    free(bw);
    free(each);
    free(first);
    free(scratch);
    free(ids);
    return ok;
}
