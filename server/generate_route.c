/*
 * generate_route.c - POST /generate: a decoder continues a prompt, and
 * every token goes out as it is made, as Server-Sent Events or NDJSON
 * (Accept), with its top candidates; the last event is the finished
 * sequence's answer as /attention gives it.
 *
 * The prompt starts a KV cache and each token after it costs one row
 * (src/transformer_step.c). The done event's weights come from one pass
 * over the finished sequence rather than from the rows kept while
 * decoding: the rows of a causal model are the same either way (a core
 * test holds them together), and the pass gives whatever "return" asks
 * (mean weights, hidden states, the rollout, the logit lens) through
 * /attention's own code, the same numbers /attention gives for the same
 * tokens. It costs one more pass, counted in the budget beforehand.
 *
 * Everything is reserved before the first token: the cache for prompt +
 * max_new_tokens, the passes, the answer. The generation runs on the
 * compute pool; the connection is suspended while it has nothing new to
 * send (event_stream.c). A client that goes away stops the work at the
 * next token; a drain's cancel too, with an error event.
 */
#include "event_stream.h"
#include "exchange.h"
#include "family.h"
#include "generate_request.h"
#include "jsonnum.h"
#include "models.h"
#include "reply.h"
#include "response.h"
#include "widen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_BYTES ((size_t)1 << 20) /* unread events a client may leave */
/* A generation's body is decoded on the HTTP thread, where a long one
 * would hold up its other connections: a prompt of 1 MiB is far more
 * than any model's positions hold. */
#define GENERATE_BODY_BYTES ((size_t)1 << 20)

enum event_format { EVENTS_SSE, EVENTS_NDJSON };

struct generation {
    struct job job;
    struct http_server *srv;
    struct generate_request g;
    struct budget_hold hold; /* taken over from the exchange */
    struct event_stream *events;
    enum event_format format;
    size_t prompt, capacity; /* tokens: the prompt's, at most in all */
    double flops;
    struct xf_result result; /* the finished sequence's, which the done
                                event reads */
    struct buf text;         /* the generated tokens' text, for stop */
};

static struct generation *generation_of_job(struct job *job)
{
    return (struct generation *)(void *)((char *)job -
                                         offsetof(struct generation, job));
}

static void generation_free(void *arg)
{
    struct generation *gen = arg;
    xf_result_free(&gen->result);
    generate_request_free(&gen->g);
    buf_free(&gen->text);
    budget_release(&gen->hold, gen->hold.held);
    free(gen);
}

/* ------------------------------------------------------------- events */

/* An event of kind whose data is the JSON object body ("{...}"): SSE's
 * "event:" and "data:" lines, or one NDJSON line with "event" first. */
static bool send_event(struct generation *gen, const char *kind,
                       const struct buf *body)
{
    struct buf e;
    buf_init(&e, body->len + 64);
    bool ok;
    if (gen->format == EVENTS_SSE)
        ok = buf_printf(&e, "event: %s\ndata: ", kind) &&
             buf_append(&e, body->data, body->len) &&
             buf_append_str(&e, "\n\n");
    else
        ok = buf_printf(&e, "{\"event\":\"%s\",", kind) &&
             buf_append(&e, body->data + 1, body->len - 1) &&
             buf_append_str(&e, "\n");
    ok = ok && event_stream_write(gen->events, e.data, e.len);
    buf_free(&e);
    return ok;
}

/* A token's readable text as JSON, null for an id no text has. */
static bool append_token_text(struct buf *b, const struct model *m, uint32_t id)
{
    const char *text = tok_token_text(&m->tokenizer, id);
    return text ? buf_append_json_string(b, text) : buf_append_str(b, "null");
}

static bool send_token(struct generation *gen, size_t index, uint32_t id,
                       const struct xf_candidate *top, size_t n_top)
{
    const struct model *m = gen->g.req.model.entry->model;
    const int precision = (int)gen->g.req.precision;
    struct buf b;
    buf_init(&b, 4096 + n_top * (96 + 6 * m->longest_text));
    bool ok = buf_printf(&b, "{\"index\":%zu,\"token_id\":%u,\"text\":", index,
                         (unsigned)id) &&
              append_token_text(&b, m, id) && buf_append_str(&b, ",\"top\":[");
    for (size_t i = 0; ok && i < n_top; i++) {
        char p[JSONNUM_MAX];
        const size_t plen = jsonnum_format(top[i].score, precision, p);
        ok = buf_printf(&b, "%s{\"token_id\":%u,\"text\":", i ? "," : "",
                        (unsigned)top[i].id) &&
             append_token_text(&b, m, top[i].id) &&
             buf_append_str(&b, ",\"p\":") && buf_append(&b, p, plen) &&
             buf_append_str(&b, "}");
    }
    ok = ok && buf_append_str(&b, "]}") && send_event(gen, "token", &b);
    buf_free(&b);
    return ok;
}

/* A failure once the stream has started: an error event, then the end. */
static void send_error(struct generation *gen, int status, const char *detail)
{
    struct buf b;
    buf_init(&b, 1024);
    if (buf_printf(&b, "{\"status\":%d,\"detail\":", status) &&
        buf_append_json_string(&b, detail) && buf_append_str(&b, "}"))
        send_event(gen, "error", &b);
    buf_free(&b);
    event_stream_finish(gen->events, NULL, 0, "", generation_free, gen);
}

/* ---------------------------------------------------------- the work */

/* The bytes id adds to the generated text, as the tokenizer decodes it
 * (a byte token's byte, SentencePiece's U+2581 a space); a NUL, which
 * the text cannot hold, as U+FFFD. */
static bool append_bytes(struct buf *text, const struct model *m, uint32_t id)
{
    char bytes[256];
    const size_t n = tok_token_bytes(&m->tokenizer, id, bytes, sizeof bytes);
    char *big = n > sizeof bytes ? malloc(n) : NULL;
    if (big)
        tok_token_bytes(&m->tokenizer, id, big, n);
    const char *from = big ? big : bytes;
    bool ok = n <= sizeof bytes || big;
    for (size_t i = 0; ok && i < n; i++)
        ok = from[i] ? buf_append(text, &from[i], 1)
                     : buf_append_str(text, "\xEF\xBF\xBD");
    free(big);
    return ok;
}

/* Does the generated text end with (or now contain) a stop string? Only
 * the part a new token can have completed is searched. */
static bool stopped(const struct generation *gen, size_t before)
{
    for (size_t i = 0; i < gen->g.n_stop; i++) {
        const char *stop = gen->g.stop[i];
        const size_t len = strlen(stop);
        for (size_t at = before >= len ? before - len + 1 : 0;
             at + len <= gen->text.len; at++)
            if (!memcmp(gen->text.data + at, stop, len))
                return true;
    }
    return false;
}

static bool is_eos(const struct model *m, uint32_t id)
{
    for (size_t i = 0; i < m->extra.n_eos; i++)
        if (m->extra.eos[i] == id)
            return true;
    return false;
}

/* One run through the cache; the logits into out. An ablation's means
 * are the prompt's, also when the whole sequence runs again. */
static attn_status cached(const struct generation *gen, struct xf_cache *cache,
                          const uint32_t *ids, size_t n, float *out,
                          struct attn_error *err)
{
    const struct xf_model *x = &gen->g.req.model.entry->model->xf;
    const struct xf_run *asked = &gen->g.req.model.run;
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = 1,
                               .cache = cache,
                               .edits = asked->edits,
                               .n_edits = asked->n_edits,
                               .mean_over = gen->prompt};
    struct xf_plan plan;
    struct xf_result r;
    attn_status st = xf_plan(x, &run, &plan, err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, &gen->srv->cancel, &r, err);
    if (st == ATTN_OK) {
        memcpy(out, r.logits, x->vocab_size * sizeof *out);
        xf_result_free(&r);
    }
    return st;
}

static const char *const finish_names[] = {"eos", "stop", "length"};
enum finish { FINISH_EOS, FINISH_STOP, FINISH_LENGTH };

/* The done event: what ended it, then the finished sequence's answer as
 * /attention gives it (its opening brace left out: the two are one
 * object). */
static void send_done(struct generation *gen, enum finish why)
{
    struct request *req = &gen->g.req;
    struct problem pb;
    req->model.run.ids = req->model.enc.ids;
    req->model.run.n = req->model.enc.count;
    req->model.run.threads = 1;
    // an ablation's means are the prompt's, as the tokens were made with
    req->model.run.mean_over = gen->prompt;
    struct attn_error err;
    if (req->compute) {
        attn_status st = xf_plan(&req->model.entry->model->xf, &req->model.run,
                                 req->model.plan, &err);
        if (st == ATTN_OK)
            st = xf_forward(req->model.plan, &gen->srv->cancel, &gen->result,
                            &err);
        if (st != ATTN_OK) {
            problem_from_core(&pb, st, &err, "");
            send_error(gen, pb.status, pb.detail);
            return;
        }
        metrics_add_flops(xf_plan_flops(req->model.plan));
    }
    struct response_stream *tail = response_stream_new_model(req, &gen->result);
    struct buf head;
    buf_init(&head, 4096 + gen->text.len * 6);
    bool ok = tail != NULL;
    ok = ok && (gen->format == EVENTS_SSE
                    ? buf_append_str(&head, "event: done\ndata: {")
                    : buf_append_str(&head, "{\"event\":\"done\","));
    ok = ok &&
         buf_printf(&head,
                    "\"prompt_tokens\":%zu,\"finish_reason\":\"%s\","
                    "\"text\":",
                    gen->prompt, finish_names[why]) &&
         buf_append_json_string(&head, gen->text.data ? gen->text.data : "") &&
         buf_append_str(&head, ",");
    ok = ok && event_stream_write(gen->events, head.data, head.len);
    buf_free(&head);
    if (!ok) {
        response_stream_free(tail);
        send_error(gen, 503, "out of memory writing the answer");
        return;
    }
    // the answer's text ends "}\n"; an SSE event ends with a blank line
    event_stream_finish(gen->events, tail, 1,
                        gen->format == EVENTS_SSE ? "\n" : "", generation_free,
                        gen);
}

static void run_generation(struct job *job, double waited)
{
    struct generation *gen = generation_of_job(job);
    metrics_queue_wait(waited);
    metrics_computation_started();
    struct request *req = &gen->g.req;
    const struct model *m = req->model.entry->model;
    const struct xf_model *x = &m->xf;
    const size_t vocab = x->vocab_size;
    struct tok_encoding *enc = &req->model.enc;
    float *logits = malloc(vocab * sizeof *logits);
    struct xf_candidate *scratch = malloc(vocab * sizeof *scratch);
    struct xf_candidate top[GENERATE_MAX_TOP];
    struct xf_cache cache = {0};
    struct attn_error err = {0};
    attn_status st = logits && scratch
                         ? xf_cache_init(x, gen->capacity, &cache, &err)
                         : ATTN_E_NOMEM;
    enum finish why = FINISH_LENGTH;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const uint32_t *next = enc->ids;
    size_t n = enc->count;
    bool gone = false;
    for (size_t t = 0; st == ATTN_OK && t < gen->g.max_new; t++) {
        if (event_stream_gone(gen->events)) {
            gone = true;
            break;
        }
        // a longrope model turns every position by its long factors once
        // the sequence outgrows its original length: the cache's keys,
        // turned by the short ones, are dropped and the whole sequence
        // runs again, as transformers' Phi-3 drops its cache there
        if (xf_cache_outgrown(x, &cache, n)) {
            cache.len = 0;
            next = enc->ids;
            n = enc->count;
        }
        st = cached(gen, &cache, next, n, logits, &err);
        if (st != ATTN_OK)
            break;
        const uint32_t id =
            xf_sample(logits, vocab, &gen->g.sampling, t, scratch);
        const size_t n_top =
            xf_top_tokens(logits, vocab, gen->g.top_candidates, top);
        enc->ids[enc->count] = id;
        enc->type_ids[enc->count] = 0;
        enc->added[enc->count] = 0;
        enc->count++;
        const size_t before = gen->text.len;
        if (!append_bytes(&gen->text, m, id))
            st = ATTN_E_NOMEM;
        metrics_generated_token(seconds_since(&t0));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (st != ATTN_OK || !send_token(gen, t, id, top, n_top)) {
            gone = st == ATTN_OK;
            break;
        }
        if (is_eos(m, id)) {
            why = FINISH_EOS;
            break;
        }
        if (stopped(gen, before)) {
            why = FINISH_STOP;
            break;
        }
        next = &enc->ids[enc->count - 1];
        n = 1;
    }
    xf_cache_free(&cache);
    free(scratch);
    free(logits);
    // what outlives gen, which the last event may free
    struct models_entry *entry = req->model.entry;
    const double flops = gen->flops;
    if (gone) {
        metrics_generation_abandoned();
        event_stream_finish(gen->events, NULL, 0, "", generation_free, gen);
    } else if (st != ATTN_OK) {
        struct problem pb;
        problem_from_core(&pb, st, &err, "");
        send_error(gen, st == ATTN_E_CANCELLED ? 503 : pb.status,
                   st == ATTN_E_CANCELLED ? "the server is stopping"
                                          : pb.detail);
    } else {
        send_done(gen, why);
    }
    metrics_computation_done();
    models_count(entry, flops);
}

/* The pool closed before its turn: the server is stopping. */
static void refuse_generation(struct job *job)
{
    struct generation *gen = generation_of_job(job);
    send_error(gen, 503, "the server is stopping");
}

/* ------------------------------------------------------------ the plan */

/* The costs of the whole generation, from the request alone, before
 * anything is computed: the cache for every position, the prompt's pass,
 * a token's, the one over the finished sequence (at its longest) when
 * "return" asks for anything, and their answer. */
static bool plan_generation(struct generation *gen,
                            const struct request_limits *lim, size_t *bytes,
                            struct problem *pb)
{
    struct request *req = &gen->g.req;
    const struct model *m = req->model.entry->model;
    const struct xf_model *x = &m->xf;
    const size_t T = gen->capacity, H = x->hidden, I = x->intermediate;
    const size_t hd = x->heads * x->head_dim, gd = x->kv_heads * x->head_dim;
    // the prompt's pass, and the whole sequence's (planned at its
    // longest) when "return" asks for anything
    struct xf_run run = req->model.run;
    run.ids = req->model.enc.ids;
    run.n = gen->prompt;
    run.want = XF_WANT_LOGITS;
    run.threads = 1;
    // the flow of the finished sequence: its limit named where the length
    // comes from
    if ((req->model.run.want & XF_WANT_FLOW) && T > XF_MAX_FLOW_TOKENS)
        return problem_set(pb, 422, "/max_new_tokens",
                           "attention flow (\"flow\" in return) is computed "
                           "for at most %d tokens; the prompt's %zu and "
                           "max_new_tokens (%zu) make %zu",
                           XF_MAX_FLOW_TOKENS, gen->prompt, gen->g.max_new, T);
    struct xf_plan first, whole;
    struct attn_error err;
    attn_status st = xf_plan(x, &run, &first, &err);
    run.n = T;
    run.want = req->model.run.want;
    if (st == ATTN_OK && req->compute)
        st = xf_plan(x, &run, &whole, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "");
    double whole_flops = req->compute ? xf_plan_flops(&whole) : 0;
    double whole_bytes = req->compute ? (double)xf_plan_bytes(&whole) : 0;
    // a longrope model's sequence that outgrows its cache runs again
    // whole (run_generation()): that pass, held beside the cache
    const size_t again = xf_cache_rerun_length(x, gen->prompt, T);
    if (again) {
        struct xf_run rerun = run;
        rerun.n = again;
        rerun.want = XF_WANT_LOGITS;
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
    gen->flops =
        xf_plan_flops(&first) + whole_flops + (double)gen->g.max_new * token;
    if (lim->max_flops && gen->flops > (double)lim->max_flops) {
        problem_set(pb, 422, "/max_new_tokens",
                    "the generation needs about %.3g GFLOP on the model "
                    "\"%s\" (%zu tokens of prompt, %zu more); the limit is "
                    "%.3g GFLOP (--max-flops): fewer tokens",
                    gen->flops * 1e-9, m->name, gen->prompt, gen->g.max_new,
                    (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    const size_t per_token_text = 32 + 6 * m->longest_text;
    const double step = (double)x->vocab_size * 12.0 +
                        4.0 * (double)(2 * hd + 2 * gd + 3 * H + 2 * I + T) +
                        4.0 * WIDEN_PANEL_FLOATS + 65536.0;
    // the prompt's pass also hands each layer's keys and values over
    const double kv = 8.0 * (double)gen->prompt * (double)gd;
    const double total = (double)xf_cache_bytes(x, T) +
                         (double)xf_plan_bytes(&first) + kv + whole_bytes +
                         step + (double)response_stream_bytes_model(req) +
                         (double)gen->g.max_new * (double)(2 * per_token_text) +
                         (double)EVENT_BYTES + (double)sizeof *gen;
    *bytes = total < 1e18 ? (size_t)total : SIZE_MAX;
    return true;
}

/* A copy of the prompt's encoding with room for every token to come. */
static bool widen_encoding(struct tok_encoding *enc, size_t capacity)
{
    uint32_t *block = malloc(capacity * (sizeof *block + 2));
    if (!block)
        return false;
    uint8_t *types = (uint8_t *)(block + capacity), *added = types + capacity;
    memcpy(block, enc->ids, enc->count * sizeof *block);
    memcpy(types, enc->type_ids, enc->count);
    memcpy(added, enc->added, enc->count);
    memset(block + enc->count, 0, (capacity - enc->count) * sizeof *block);
    const size_t count = enc->count;
    tok_encoding_free(enc);
    *enc = (struct tok_encoding){
        .count = count, .ids = block, .type_ids = types, .added = added};
    return true;
}

static enum event_format format_of(struct MHD_Connection *conn)
{
    const char *accept = reply_header(conn, "Accept");
    return accept && strstr(accept, "application/x-ndjson") &&
                   !strstr(accept, "text/event-stream")
               ? EVENTS_NDJSON
               : EVENTS_SSE;
}

enum MHD_Result handle_generate_post(struct exchange *ex,
                                     struct MHD_Connection *conn)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (!reply_small_json(ex, conn, GENERATE_BODY_BYTES, "a generation's", &pb))
        return reply_problem(ex, conn, &pb);
    struct generation *gen = calloc(1, sizeof *gen);
    if (!gen) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    gen->srv = s;
    gen->format = format_of(conn);
    buf_init(&gen->text, (size_t)64 << 20);
    size_t bytes = 0;
    bool ok = generate_parse(&gen->g, ex->body.data ? ex->body.data : "",
                             ex->body.len, &s->limits, &ex->hold, &pb);
    if (ok) {
        gen->prompt = gen->g.req.model.enc.count;
        gen->capacity = gen->prompt + gen->g.max_new;
        ok = widen_encoding(&gen->g.req.model.enc, gen->capacity) ||
             problem_set(&pb, 503, "", "out of memory");
    }
    ok = ok && plan_generation(gen, &s->limits, &bytes, &pb) &&
         budget_reserve(&ex->hold, bytes, "the generation", false, &pb);
    if (!ok) {
        generation_free(gen);
        return reply_problem(ex, conn, &pb);
    }
    // the generation holds its reservation from now on, past the
    // exchange if the client leaves first
    gen->hold = ex->hold;
    ex->hold.held = 0;
    ex->body_reserved = 0;
    gen->g.req.hold = &gen->hold;
    struct MHD_Response *r = NULL;
    gen->events = event_stream_new(conn, EVENT_BYTES, (double)s->opt.timeout,
                                   &ex->bytes_out, &r);
    if (!gen->events) {
        generation_free(gen);
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    gen->job.run = run_generation;
    gen->job.refuse = refuse_generation;
    if (!workers_submit(&s->workers, &gen->job)) {
        // never started: the response goes unqueued, the stream with it
        event_stream_finish(gen->events, NULL, 0, "", generation_free, gen);
        MHD_destroy_response(r);
        return reply_busy(ex, conn);
    }
    MHD_add_response_header(r, "Content-Type",
                            gen->format == EVENTS_SSE ? "text/event-stream"
                                                      : "application/x-ndjson");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return reply_queue(ex, conn, 200, r, 0);
}
