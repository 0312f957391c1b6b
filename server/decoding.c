/*
 * decoding.c - a decoder's generation loop (decoding.h).
 */
#include "batcher.h"
#include "decoding.h"
#include "exchange.h"
#include "models.h"
#include "response.h"
#include "token_text.h"
#include "widen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const decode_finish_names[] = {"eos", "stop", "length"};

bool decoding_find_stop(const struct generate_request *g, const char *text,
                        size_t len, size_t before, size_t *at)
{
    bool found = false;
    for (size_t i = 0; i < g->n_stop; i++) {
        const char *stop = g->stop[i];
        const size_t stop_len = strlen(stop);
        for (size_t p = before >= stop_len ? before - stop_len + 1 : 0;
             p + stop_len <= len; p++)
            if (!memcmp(text + p, stop, stop_len)) {
                if (!found || p < *at)
                    *at = p;
                found = true;
                break;
            }
    }
    return found;
}

static bool is_eos(const struct model *m, uint32_t id)
{
    for (size_t i = 0; i < m->extra.n_eos; i++)
        if (m->extra.eos[i] == id)
            return true;
    return false;
}

/* The floats of a token's row: [Lw][heads][keys] or [Lw][keys]. */
static size_t row_floats(const struct decoding *d, size_t keys)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    const size_t lw =
        d->g->req.model.run.layer == XF_ALL_LAYERS ? x->layers : 1;
    return lw * (d->row_want == XF_WANT_WEIGHTS ? x->heads : 1) * keys;
}

size_t decoding_scratch_bytes(const struct decoding *d)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    size_t bytes =
        x->vocab_size * (sizeof(float) + sizeof(struct xf_candidate));
    if (d->row_want)
        bytes += row_floats(d, d->capacity) * sizeof(float);
    return bytes;
}

/* One run through the cache: the logits into out, and with row_want the
 * last position's row into row. An ablation's means are the prompt's,
 * also when the whole sequence runs again. */
static attn_status cached(const struct decoding *d, struct xf_cache *cache,
                          const uint32_t *ids, size_t n, unsigned threads,
                          float *out, float *row, size_t *keys,
                          struct attn_error *err)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    const struct xf_run *asked = &d->g->req.model.run;
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = XF_WANT_LOGITS | d->row_want,
                               .layer =
                                   d->row_want ? asked->layer : XF_ALL_LAYERS,
                               .threads = threads,
                               .cache = cache,
                               .edits = asked->edits,
                               .n_edits = asked->n_edits,
                               .mean_over = d->prompt,
                               .bf16_dots = asked->bf16_dots};
    struct xf_plan plan;
    struct xf_result r;
    attn_status st = xf_plan(x, &run, &plan, err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, d->cancel, &r, err);
    if (st != ATTN_OK)
        return st;
    memcpy(out, r.logits, x->vocab_size * sizeof *out);
    if (d->row_want) {
        // each matrix's last row: [Lw][heads][n][keys] -> [Lw][heads][keys]
        const float *w =
            d->row_want == XF_WANT_WEIGHTS ? r.weights : r.mean_weights;
        const size_t mats = row_floats(d, 1);
        for (size_t i = 0; i < mats; i++)
            memcpy(row + i * r.keys, w + (i * r.n + r.n - 1) * r.keys,
                   r.keys * sizeof *row);
        *keys = r.keys;
    }
    xf_result_free(&r);
    return ATTN_OK;
}

size_t decoding_pending(const struct decoding *d)
{
    return d->g->req.model.enc.count - d->run.cache.len;
}

bool decoding_in_prompt(const struct decoding *d)
{
    return d->run.cache.len < d->prompt;
}

size_t decoding_seq(struct decoding *d, struct xf_seq *seq, uint32_t *ids,
                    size_t most)
{
    const struct xf_run *asked = &d->g->req.model.run;
    const struct tok_encoding *enc = &d->g->req.model.enc;
    const size_t pending = decoding_pending(d);
    const size_t tokens = pending < most ? pending : most;
    // the row of weights is the last token's, which chooses the next
    float *row = tokens == pending ? d->run.row : NULL;
    *seq = (struct xf_seq){
        .cache = &d->run.cache,
        .tokens = tokens,
        .edits = asked->edits,
        .n_edits = asked->n_edits,
        .layer = d->row_want ? asked->layer : XF_ALL_LAYERS,
        .weights = d->row_want == XF_WANT_WEIGHTS ? row : NULL,
        .mean_weights = d->row_want == XF_WANT_MEAN_WEIGHTS ? row : NULL};
    memcpy(ids, enc->ids + d->run.cache.len, tokens * sizeof *ids);
    return tokens;
}

struct xf_run decoding_step_run(const struct xf_seq *seqs, size_t n,
                                const uint32_t *ids, unsigned threads,
                                bool bf16_dots)
{
    return (struct xf_run){.ids = ids,
                           .n = 1,
                           .want = XF_WANT_LOGITS,
                           .layer = XF_ALL_LAYERS,
                           .threads = threads,
                           .batch = n,
                           .seqs = seqs,
                           .bf16_dots = bf16_dots};
}

/* Whether d's prompt goes through steps (DECODE_STEP_PROMPT). */
static bool prompt_by_steps(const struct decoding *d)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    return d->prompt <= DECODE_STEP_PROMPT && d->prompt <= xf_step_tokens(x) &&
           d->g->req.model.run.n_edits == 0 &&
           xf_cache_rerun_length(x, 0, d->prompt) == 0;
}

/* What is left of d's prompt, or its next token, as a step of its own on
 * threads: the bits it gets in a batch. */
static attn_status stepped(struct decoding *d, unsigned threads)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    const size_t pending = decoding_pending(d);
    uint32_t *ids = malloc(pending * sizeof *ids);
    if (!ids) {
        d->err = (struct attn_error){.message = "out of memory for a step"};
        return ATTN_E_NOMEM;
    }
    struct xf_seq seq;
    decoding_seq(d, &seq, ids, pending);
    const struct xf_run run =
        decoding_step_run(&seq, 1, ids, threads, d->g->req.model.run.bf16_dots);
    struct xf_plan plan;
    struct xf_result r;
    attn_status st = xf_plan(x, &run, &plan, &d->err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, d->cancel, &r, &d->err);
    if (st == ATTN_OK) {
        memcpy(d->run.logits, r.logits, x->vocab_size * sizeof *d->run.logits);
        xf_result_free(&r);
    }
    free(ids);
    return st;
}

/* The token after logits: chosen, appended to the encoding and the
 * text, handed to the route's hook, and checked against the stops.
 * false when the generation has ended (its outcome set). */
bool decoding_take(struct decoding *d, const float *logits)
{
    struct generate_request *g = d->g;
    const struct model *m = g->req.model.entry->model;
    struct tok_encoding *enc = &g->req.model.enc;
    const size_t t = d->run.made;
    const uint32_t id =
        xf_sample(logits, m->xf.vocab_size, &g->sampling, t, d->run.sort);
    enc->ids[enc->count] = id;
    enc->type_ids[enc->count] = 0;
    enc->added[enc->count] = 0;
    enc->count++;
    d->run.made++;
    const size_t before = d->text.len;
    if (!(d->skip_special && tok_token_special(&m->tokenizer, id)) &&
        !token_text_append(&d->text, m, id)) {
        d->st = ATTN_E_NOMEM;
        return false;
    }
    metrics_generated_token(seconds_since(&d->run.last));
    clock_gettime(CLOCK_MONOTONIC, &d->run.last);
    const struct decode_step step = {.index = t,
                                     .id = id,
                                     .logits = logits,
                                     .row = d->run.row,
                                     .keys = d->run.cache.len,
                                     .text_before = before};
    if (!d->token(d->arg, &step)) {
        d->abandoned = true;
        return false;
    }
    if (is_eos(m, id)) {
        d->why = DECODE_EOS;
        return false;
    }
    if (decoding_find_stop(d->g, d->text.data, d->text.len, before,
                           &d->stop_at)) {
        d->why = DECODE_STOP;
        return false;
    }
    return d->run.made < g->max_new;
}

bool decoding_alone(struct decoding *d, unsigned threads)
{
    if (decoding_pending(d) > 1 || d->run.cache.len == 0) {
        d->st = stepped(d, threads);
        return d->st == ATTN_OK && decoding_take(d, d->run.logits);
    }
    struct tok_encoding *enc = &d->g->req.model.enc;
    const uint32_t *next = &enc->ids[enc->count - 1];
    size_t n = 1;
    // a longrope model turns every position by its long factors once
    // the sequence outgrows its original length: the cache's keys,
    // turned by the short ones, are dropped and the whole sequence
    // runs again, as transformers' Phi-3 drops its cache there
    if (decoding_outgrown(d)) {
        d->run.cache.len = 0;
        next = enc->ids;
        n = enc->count;
    }
    size_t keys = 0;
    d->st = cached(d, &d->run.cache, next, n, threads, d->run.logits,
                   d->run.row, &keys, &d->err);
    return d->st == ATTN_OK && decoding_take(d, d->run.logits);
}

bool decoding_outgrown(const struct decoding *d)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    return xf_cache_outgrown(x, &d->run.cache, 1);
}

enum decode_turn decoding_turn(struct decoding *d)
{
    if (d->cancel && atomic_load(d->cancel)) {
        d->st = ATTN_E_CANCELLED;
        d->err = (struct attn_error){.message = "the computation was "
                                                "cancelled"};
        return DECODE_ENDED;
    }
    if (d->gone(d->arg)) {
        d->abandoned = true;
        return DECODE_ENDED;
    }
    return d->ready && !d->ready(d->arg) ? DECODE_WAITS : DECODE_TAKES;
}

void decoding_fail(struct decoding *d, attn_status st,
                   const struct attn_error *err)
{
    d->st = st;
    if (err)
        d->err = *err;
}

static void run_ended(struct job *job, double waited)
{
    (void)waited;
    struct decoding *d =
        (struct decoding *)(void *)((char *)job -
                                    offsetof(struct decoding, run.end_job));
    d->ended(d->arg);
}

/* Its cache and scratch freed. */
static void release(struct decoding *d)
{
    xf_cache_free(&d->run.cache);
    free(d->run.row);
    free(d->run.sort);
    free(d->run.logits);
    d->run.row = NULL;
    d->run.sort = NULL;
    d->run.logits = NULL;
}

void decoding_end(struct decoding *d)
{
    release(d);
    d->run.end_job.run = run_ended;
    d->run.end_job.refuse = NULL;
    if (!d->run.workers ||
        !workers_submit_owed(d->run.workers, &d->run.end_job))
        d->ended(d->arg);
}

/* The scratch, the cache, and (for a prompt that does not go through
 * steps) the prompt's pass and the first token: false when the
 * generation has ended already (its outcome says how). */
static bool begin(struct decoding *d, unsigned threads)
{
    const struct xf_model *x = &d->g->req.model.entry->model->xf;
    const size_t vocab = x->vocab_size;
    struct tok_encoding *enc = &d->g->req.model.enc;
    d->run.workers = NULL;
    d->run.made = 0;
    d->run.logits = malloc(vocab * sizeof *d->run.logits);
    d->run.sort = malloc(vocab * sizeof *d->run.sort);
    d->run.row =
        d->row_want ? malloc(row_floats(d, d->capacity) * sizeof(float)) : NULL;
    d->st = d->run.logits && d->run.sort && (d->run.row || !d->row_want)
                ? xf_cache_init(x, d->capacity, &d->run.cache, &d->err)
                : ATTN_E_NOMEM;
    d->why = DECODE_LENGTH;
    d->abandoned = false;
    clock_gettime(CLOCK_MONOTONIC, &d->run.last);
    if (d->st != ATTN_OK || d->g->max_new == 0)
        return false;
    if (d->gone(d->arg)) {
        d->abandoned = true;
        return false;
    }
    if (prompt_by_steps(d))
        return true; /* the batch's steps run it */
    size_t keys = 0;
    d->st = cached(d, &d->run.cache, enc->ids, enc->count, threads,
                   d->run.logits, d->run.row, &keys, &d->err);
    return d->st == ATTN_OK && decoding_take(d, d->run.logits);
}

/* The threads of a prompt that runs as its own pass: its whole team when it is
 * the server's only computation (this job the pool's one running, this
 * generation the batch's one), else one. Asked once, as it starts: what comes
 * later shares the cores with it for one prompt's time at most. */
static unsigned prompt_threads(const struct decoding *d, struct batcher *b,
                               struct workers *workers)
{
    if (d->prompt_team <= 1)
        return 1;
    return workers_running(workers) <= 1 && workers_waiting(workers) == 0 &&
                   batcher_in_flight(b) <= 1 && batcher_waiting(b) == 0
               ? d->prompt_team
               : 1;
}

void decoding_start(struct decoding *d, struct batcher *b,
                    struct workers *workers)
{
    if (begin(d, prompt_threads(d, b, workers))) {
        d->run.workers = workers; /* ended() from the batch's thread */
        batcher_join(b, d);
        return;
    }
    batcher_release(b);
    decoding_end(d); /* here, on the pool */
}

void decoding_run(struct decoding *d)
{
    bool more = begin(d, 1);
    while (more) {
        const enum decode_turn turn = decoding_turn(d);
        if (turn == DECODE_ENDED)
            break;
        more = turn == DECODE_WAITS || decoding_alone(d, 1);
    }
    release(d);
}

/* ------------------------------------------------------------ the plan */

bool decoding_widen(struct decoding *d)
{
    struct tok_encoding *enc = &d->g->req.model.enc;
    const size_t capacity = d->capacity;
    uint32_t *block = malloc(capacity * (sizeof *block + 2));
    if (!block)
        return false;
    uint8_t *types = (uint8_t *)(block + capacity), *added = types + capacity;
    memcpy(block, enc->ids, enc->count * sizeof *block);
    memcpy(types, enc->type_ids, enc->count);
    memcpy(added, enc->added, enc->count);
    memset(block + enc->count, 0, (capacity - enc->count) * sizeof *block);
    memset(types + enc->count, 0, capacity - enc->count);
    memset(added + enc->count, 0, capacity - enc->count);
    const size_t count = enc->count;
    tok_encoding_free(enc);
    *enc = (struct tok_encoding){
        .count = count, .ids = block, .type_ids = types, .added = added};
    d->g->req.model.run.ids = block;
    return true;
}

bool decoding_answer_fits(const struct decoding *d,
                          const struct request_limits *lim, const char *under,
                          double *stream_bytes, struct problem *pb)
{
    // the request as the finished sequence's pass takes it: a copy
    // whose length is the sequence's longest
    struct request whole = d->g->req;
    whole.model.run.n = d->capacity;
    *stream_bytes = (double)response_stream_bytes_model(&whole);
    if (!whole.compute)
        return true;
    const size_t numbers = request_model_output(&whole);
    if (numbers > lim->max_output) {
        char pointer[sizeof pb->pointer];
        snprintf(pointer, sizeof pointer, "%s/return", under);
        return problem_set(pb, 422, pointer,
                           "the arrays asked of the whole sequence (%zu "
                           "tokens at most: the prompt's %zu and %zu new) "
                           "hold %zu numbers, more than %zu (--max-output): "
                           "fewer arrays (none: \"return\": []), one layer "
                           "or fewer new tokens",
                           d->capacity, d->prompt, d->capacity - d->prompt,
                           numbers, lim->max_output);
    }
    if (!response_measures_fit(&whole, pb)) {
        // the field the measures name, under the route's prefix
        if (*under && pb->pointer[0] == '/' &&
            strncmp(pb->pointer, under, strlen(under))) {
            char was[sizeof pb->pointer];
            snprintf(was, sizeof was, "%s", pb->pointer);
            snprintf(pb->pointer, sizeof pb->pointer, "%s%.100s", under, was);
        }
        return false;
    }
    return true;
}

bool decoding_plan(const struct decoding *d, const struct request_limits *lim,
                   size_t per_token_bytes, double extra_bytes, double *flops,
                   size_t *bytes, struct problem *pb)
{
    const struct request *req = &d->g->req;
    const struct model *m = req->model.entry->model;
    const struct xf_model *x = &m->xf;
    const size_t T = d->capacity, H = x->hidden, I = x->intermediate;
    const size_t max_new = d->g->max_new;
    const size_t hd = x->heads * x->head_dim, gd = x->kv_heads * x->head_dim;
    // the prompt's pass (with its rows when each token's row is asked),
    // and the whole sequence's (planned at its longest) when the request
    // asks for anything of it
    struct xf_run run = req->model.run;
    run.ids = req->model.enc.ids;
    run.n = d->prompt;
    run.want = XF_WANT_LOGITS | d->row_want;
    run.layer = d->row_want ? req->model.run.layer : XF_ALL_LAYERS;
    run.threads = d->prompt_team ? d->prompt_team : 1;
    // the flow of the finished sequence: its limit named where the length
    // comes from
    if ((req->model.run.want & XF_WANT_FLOW) && req->compute &&
        T > XF_MAX_FLOW_TOKENS)
        return problem_set(pb, 422, d->length_pointer ? d->length_pointer : "",
                           "attention flow (\"flow\" in return) is computed "
                           "for at most %d tokens; the prompt's %zu and "
                           "%zu new tokens make %zu",
                           XF_MAX_FLOW_TOKENS, d->prompt, max_new, T);
    struct xf_plan first, whole;
    struct attn_error err;
    attn_status st = xf_plan(x, &run, &first, &err);
    run.n = T;
    run.want = req->model.run.want;
    run.layer = req->model.run.layer;
    if (st == ATTN_OK && req->compute)
        st = xf_plan(x, &run, &whole, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "");
    double whole_flops = req->compute ? xf_plan_flops(&whole) : 0;
    double whole_bytes = req->compute ? (double)xf_plan_bytes(&whole) : 0;
    // a longrope model's sequence that outgrows its cache runs again
    // whole (decoding_run()): that pass, held beside the cache
    const size_t again = xf_cache_rerun_length(x, d->prompt, T);
    if (again) {
        struct xf_run rerun = run;
        rerun.n = again;
        rerun.want = XF_WANT_LOGITS | d->row_want;
        rerun.layer = d->row_want ? req->model.run.layer : XF_ALL_LAYERS;
        struct xf_plan p;
        if ((st = xf_plan(x, &rerun, &p, &err)) != ATTN_OK)
            return problem_from_core(pb, st, &err, "");
        whole_flops += xf_plan_flops(&p);
        whole_bytes += (double)xf_plan_bytes(&p);
    }
    // a token: every weight once, its scores over every position, the head
    double weights = 0;
    for (size_t l = 0; l < x->layers; l++)
        weights += (double)(2 * hd * H + 2 * gd * H + 3 * H * I);
    const double token = 2.0 * weights +
                         4.0 * (double)T * (double)hd * (double)x->layers +
                         2.0 * (double)x->vocab_size * (double)H;
    *flops = xf_plan_flops(&first) + whole_flops + (double)max_new * token;
    if (lim->max_flops && *flops > (double)lim->max_flops) {
        problem_set(pb, 422, "",
                    "the generation needs about %.3g GFLOP on the model "
                    "\"%s\" (%zu tokens of prompt, %zu more); the limit is "
                    "%.3g GFLOP (--max-flops): fewer tokens",
                    *flops * 1e-9, m->name, d->prompt, max_new,
                    (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    const double step = (double)decoding_scratch_bytes(d) +
                        4.0 * (double)(2 * hd + 2 * gd + 3 * H + 2 * I + T) +
                        4.0 * WIDEN_PANEL_FLOATS + 65536.0;
    // a step's rows when asked: [Lw][heads][1][keys] in its result
    const double rows = d->row_want ? (double)decoding_scratch_bytes(d) : 0;
    // the prompt's pass also hands each layer's keys and values over
    const double kv = 8.0 * (double)d->prompt * (double)gd;
    const double total =
        (double)xf_cache_bytes(x, T) + (double)xf_plan_bytes(&first) + kv +
        whole_bytes + step + rows +
        (double)max_new * (double)(per_token_bytes + 6 * m->longest_text + 32) +
        extra_bytes;
    *bytes = total < 1e18 ? (size_t)total : SIZE_MAX;
    return true;
}
