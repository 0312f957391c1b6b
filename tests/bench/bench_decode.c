/*
 * bench_decode.c - a decoder's tokens a second against the memory bound
 * (bench_decode.h).
 */
#include "bench_clock.h"
#include "bench_decode.h"
#include "bench_torch.h"
#include "sampling.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The read: 1 GiB, larger than any cache, summed on every core. */
#define READ_BYTES ((size_t)1 << 30)

struct reader {
    const uint64_t *from;
    size_t count;
    uint64_t sum; /* kept, so that the reads are not optimised away */
};

static void *read_part(void *arg)
{
    struct reader *r = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= r->count; i += 4) {
        s0 += r->from[i];
        s1 += r->from[i + 1];
        s2 += r->from[i + 2];
        s3 += r->from[i + 3];
    }
    r->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* GB/s of one read of block on every core, each its share. */
static double read_bandwidth(const uint64_t *block, size_t count)
{
    enum { MAX_READERS = 64 };
    unsigned n = cores();
    n = n > MAX_READERS ? MAX_READERS : n;
    struct reader r[MAX_READERS];
    pthread_t id[MAX_READERS];
    const size_t share = count / n;
    const double t0 = now_seconds();
    for (unsigned i = 0; i < n; i++) {
        r[i] = (struct reader){block + i * share, share, 0};
        if (pthread_create(&id[i], NULL, read_part, &r[i]))
            return -1.0;
    }
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(id[i], NULL);
        sum += r[i].sum;
    }
    const double t = now_seconds() - t0;
    return sum == 1 ? -1.0 : (double)(share * n * sizeof *block) / t / 1e9;
}

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
                               .cache = cache};
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
                    int rounds, struct decoding *out)
{
    memset(out, 0, sizeof *out);
    out->prompt = prompt;
    out->tokens = tokens;
    out->bytes_per_token = token_bytes(m);
    uint64_t *block = malloc(READ_BYTES);
    uint32_t *ids = malloc((prompt + tokens) * sizeof *ids);
    struct xf_candidate *scratch = malloc(m->vocab_size * sizeof *scratch);
    double *first = malloc((size_t)rounds * sizeof *first);
    double *each = malloc((size_t)rounds * tokens * sizeof *each);
    double *bw = malloc((size_t)rounds * sizeof *bw);
    struct xf_cache cache = {0};
    bool ok = block && ids && scratch && first && each && bw &&
              xf_cache_init(m, prompt + tokens, &cache, NULL) == ATTN_OK;
    if (ok) {
        for (size_t i = 0; i < READ_BYTES / sizeof *block; i++)
            block[i] = i * 2654435761u;
        bench_ids(ids, prompt, m->vocab_size);
    }
    for (int r = 0; ok && r < rounds; r++) {
        bw[r] = read_bandwidth(block, READ_BYTES / sizeof *block);
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
        out->read_gbs = median(bw, (size_t)rounds);
        out->first_token_ms = median(first, (size_t)rounds) * 1e3;
        out->token_ms = median(each, (size_t)rounds * tokens) * 1e3;
        out->tokens_s = 1e3 / out->token_ms;
        out->bound_tokens_s = out->read_gbs * 1e9 / out->bytes_per_token;
    }
    xf_cache_free(&cache);
    free(bw);
    free(each);
    free(first);
    free(scratch);
    free(ids);
    free(block);
    return ok;
}
