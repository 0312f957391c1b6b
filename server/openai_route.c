/*
 * openai_route.c - the OpenAI-compatible API: GET /v1/models, POST
 * /v1/completions and POST /v1/chat/completions, so that OpenAI's
 * clients (the official SDKs, LangChain, evaluation harnesses) work
 * against attnd unchanged, and attnd's "attention" extension gives them
 * the attention of the sequence they made.
 *
 * A completion (completion.h) is /generate's loop with OpenAI's shapes
 * around it. Here it is decoded, planned and reserved, then handed to
 * the compute pool (completion_run.c). Streamed (stream: true), each
 * token goes out as a chunk as it is made, Server-Sent Events ending
 * "data: [DONE]"; whole, the connection waits suspended and the answer is
 * queued once made, with the status its outcome has.
 *
 * Everything is reserved before the first token, as /generate reserves
 * it: the cache, the passes, each token's text and log-probabilities,
 * the attention answer. A streamed client that goes away stops the work
 * at the next token.
 */
#include "batcher.h"
#include "completion.h"
#include "models.h"
#include "reply.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_BYTES ((size_t)1 << 20) /* unread chunks a client may leave */

/* --------------------------------------------------------- the routes */

/* The costs beyond decoding_plan()'s: the log-probabilities (kept for a
 * whole answer; a stream's one token's at a time), a token's row, the
 * prompt's scoring when echoed, the answer's head and attention. A
 * refusal that a shorter generation would not meet sets *length_bound. */
static bool plan_completion(struct completion *c,
                            const struct request_limits *lim, size_t *bytes,
                            bool *length_bound, struct problem *pb)
{
    const struct openai_request *o = &c->o;
    const struct model *m = completion_model(c);
    const struct xf_model *x = &m->xf;
    *length_bound = false;
    // a token's entry: its text and bytes, each alternative's too
    const double entry =
        o->logprobs ? 2.0 * (48 + 5 * TOKEN_BYTES) * (1 + o->top_logprobs) : 0;
    const size_t per_token = o->stream ? 0 : (size_t)entry;
    // a row: keys numbers of at most 14 characters a head and layer
    const size_t lw = o->g.req.model.run.layer == XF_ALL_LAYERS ? x->layers : 1;
    const double row_numbers =
        o->row_want
            ? (double)lw *
                  (double)(o->row_want == XF_WANT_WEIGHTS ? x->heads : 1) *
                  (double)c->decoding.capacity
            : 0;
    // a stream's ring holds two of its largest chunks, a mebibyte at least
    const size_t largest = completion_chunk_bytes(c, c->decoding.capacity);
    c->ring = largest < EVENT_BYTES / 2 ? EVENT_BYTES
              : largest < SIZE_MAX / 2  ? 2 * largest
                                        : SIZE_MAX;
    double extra = (double)sizeof *c + (double)c->ring +
                   3.0 * (double)o->prompt_len + 65536.0 + 2.0 * entry +
                   2.0 * 14.0 * row_numbers;
    // the attention answer is of the whole sequence, at its longest
    double answer_bytes = 0;
    if (o->attention && !decoding_answer_fits(&c->decoding, lim, "/attention",
                                              &answer_bytes, pb)) {
        *length_bound = true;
        return false;
    }
    extra += answer_bytes;
    // echo with logprobs: every prompt position's logits in one pass
    if (o->echo && o->logprobs) {
        const double n = (double)c->decoding.prompt;
        extra += n * entry;
        const struct xf_run run = {.ids = o->g.req.model.enc.ids,
                                   .n = c->decoding.prompt,
                                   .want = XF_WANT_LOGITS | XF_WANT_ALL_LOGITS,
                                   .layer = XF_ALL_LAYERS,
                                   .threads = 1};
        struct xf_plan p;
        struct attn_error err;
        const attn_status st = xf_plan(x, &run, &p, &err);
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, "/echo");
        extra += (double)xf_plan_bytes(&p);
        c->flops += xf_plan_flops(&p);
    }
    // a row's numbers over the whole generation count as the answer's
    if (row_numbers * (double)o->g.max_new > (double)lim->max_output) {
        *length_bound = true;
        return problem_set(pb, 422, "/attention/stream_rows",
                           "each token's row over %zu tokens holds more than "
                           "%zu numbers in all (--max-output): one layer "
                           "(attention.layer), mean weights, or fewer tokens",
                           c->decoding.capacity, lim->max_output);
    }
    double flops = 0;
    if (!decoding_plan(&c->decoding, lim, per_token, extra, &flops, bytes,
                       pb)) {
        *length_bound = pb->reason && !strcmp(pb->reason, "compute_budget");
        return false;
    }
    c->flops += flops;
    if (lim->max_flops && c->flops > (double)lim->max_flops) {
        problem_set(pb, 422, c->decoding.length_pointer,
                    "the completion needs about %.3g GFLOP on the model \"%s\""
                    " (%zu tokens of prompt, %zu more); the limit is %.3g "
                    "GFLOP (--max-flops): fewer tokens",
                    c->flops * 1e-9, m->name, c->decoding.prompt, o->g.max_new,
                    (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        *length_bound = true;
        return false;
    }
    return true;
}

/* The plan, and a chat's default length (the rest of the model's
 * positions) shortened until the work and the answer fit --max-flops and
 * --max-output, as a client that leaves max_tokens out asks for as much
 * as the server gives; a length the client chose is refused instead,
 * naming it. */
static bool plan_within_budget(struct completion *c,
                               const struct request_limits *lim, size_t *bytes,
                               struct problem *pb)
{
    struct generate_request *g = &c->o.g;
    for (;;) {
        c->flops = 0;
        pb->reason = NULL;
        c->decoding.capacity = c->decoding.prompt + g->max_new;
        bool length_bound = false;
        if (plan_completion(c, lim, bytes, &length_bound, pb))
            return true;
        if (c->o.max_given || g->max_new <= 1 || !length_bound)
            return false;
        g->max_new /= 2;
    }
}

/* An id OpenAI's clients can tell apart: the route's prefix, the time and
 * a counter. */
static void make_id(struct completion *c, const char *prefix)
{
    static atomic_uint_fast64_t counter;
    const uint64_t n = atomic_fetch_add(&counter, 1);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    c->created = (long long)now.tv_sec;
    snprintf(c->id, sizeof c->id, "%s-%llx%06llx", prefix,
             (unsigned long long)now.tv_sec,
             (unsigned long long)(n & 0xFFFFFF));
}

/* A streamed completion's chunks to the client, and their response in
 * *r. */
static bool completion_stream(struct completion *c, struct exchange *ex,
                              struct MHD_Response **r)
{
    struct http_server *s = c->srv;
    c->events = event_stream_new(c->conn, c->ring, (double)s->opt.timeout,
                                 &ex->bytes_out, &s->cancel, r);
    if (!c->events)
        return false;
    MHD_add_response_header(*r, "Content-Type", "text/event-stream");
    MHD_add_response_header(*r, "Cache-Control", "no-store");
    MHD_add_response_header(*r, "X-Accel-Buffering", "no");
    return true;
}

static struct completion *completion_of_ticket(struct batch_ticket *t)
{
    return (struct completion *)(void *)((char *)t -
                                         offsetof(struct completion, ticket));
}

/* A place in the batch after waiting for one (on the batch's thread): a
 * stream's response prepared and its exchange back; the work handed to
 * the pool (a whole answer's exchange waits on for it). */
static void completion_granted(struct batch_ticket *t)
{
    struct completion *c = completion_of_ticket(t);
    struct exchange *ex = c->ex;
    struct MHD_Connection *conn = c->conn;
    if (c->o.stream) {
        struct MHD_Response *r = NULL;
        if (!completion_stream(c, ex, &r)) {
            struct problem pb;
            problem_set(&pb, 503, "", "out of memory");
            batcher_release(c->srv->batcher);
            reply_prepare_problem(ex, &pb);
            completion_free(c);
            MHD_resume_connection(conn);
            return;
        }
        reply_prepare(ex, 200, r, 0);
        c->ex = NULL;
    }
    // owed: the place was counted against the line it waited in
    const bool stream = c->o.stream;
    if (!workers_submit_owed(&c->srv->workers, &c->job))
        completion_refuse(&c->job); /* a whole answer's resumes it */
    if (stream)
        MHD_resume_connection(conn); /* nothing touches ex after this */
}

/* Has the client of a waiting completion gone away? */
static bool completion_left(struct batch_ticket *t)
{
    return reply_client_left(completion_of_ticket(t)->fd);
}

/* No place in time, the server stops, or the client left: the 503 it
 * waited for. */
static void completion_refused(struct batch_ticket *t, const struct problem *pb)
{
    struct completion *c = completion_of_ticket(t);
    struct MHD_Connection *conn = c->conn;
    reply_prepare_problem(c->ex, pb);
    completion_free(c);
    MHD_resume_connection(conn);
}

static enum MHD_Result handle_completion(struct exchange *ex,
                                         struct MHD_Connection *conn,
                                         enum openai_route route)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (!reply_small_json(ex, conn, &pb))
        return reply_problem(ex, conn, &pb);
    struct completion *c = calloc(1, sizeof *c);
    if (!c) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    c->fd = reply_socket(conn);
    c->srv = s;
    buf_init(&c->decoding.text, (size_t)64 << 20);
    const size_t lp_cap = (size_t)256 << 20;
    buf_init(&c->lp_content, lp_cap);
    buf_init(&c->lp_tokens, lp_cap);
    buf_init(&c->lp_values, lp_cap);
    buf_init(&c->lp_tops, lp_cap);
    buf_init(&c->lp_offsets, lp_cap);
    make_id(c, route == OPENAI_CHAT ? "chatcmpl" : "cmpl");
    size_t bytes = 0;
    bool ok = openai_parse(&c->o, route, ex->body.data ? ex->body.data : "",
                           ex->body.len, &s->limits, &ex->hold,
                           (time_t)c->created, &pb);
    if (ok) {
        struct openai_request *o = &c->o;
        const size_t prompt = o->g.req.model.enc.count;
        c->decoding = (struct decoding){
            .g = &o->g,
            .prompt = prompt,
            .capacity = prompt + o->g.max_new,
            .cancel = &s->cancel,
            .prompt_team = s->opt.threads,
            .row_want = o->row_want,
            .skip_special = o->skip_special,
            .text = c->decoding.text,
            .length_pointer = o->route == OPENAI_CHAT && o->max_completion
                                  ? "/max_completion_tokens"
                                  : "/max_tokens",
            .token = completion_token,
            .gone = completion_gone,
            .arg = c};
        ok = decoding_widen(&c->decoding) ||
             problem_set(&pb, 503, "", "out of memory");
    }
    ok = ok && plan_within_budget(c, &s->limits, &bytes, &pb) &&
         budget_reserve(&ex->hold, bytes, "the completion", false, &pb);
    if (!ok) {
        completion_free(c);
        return reply_problem(ex, conn, &pb);
    }
    c->o.g.req.hold = &ex->hold;
    c->conn = conn;
    c->job.run = completion_run;
    c->job.refuse = completion_refuse;
    c->ticket.granted = completion_granted;
    c->ticket.refused = completion_refused;
    c->ticket.left = completion_left;
    if (c->o.stream) {
        // a stream holds its reservation from now on, past the exchange
        // if the client leaves first
        c->hold = ex->hold;
        ex->hold.held = 0;
        ex->body_reserved = 0;
        c->o.g.req.hold = &c->hold;
    }
    // the exchange waits, suspended, for a place in the batch (granted
    // on the batch's thread, maybe at once) and, whole, for its answer
    c->ex = ex;
    ex->handed_over = true;
    MHD_suspend_connection(conn);
    switch (batcher_admit(s->batcher, &c->ticket, &pb)) {
    case BATCH_WAITING: return MHD_YES;
    case BATCH_FULL:
        MHD_resume_connection(conn);
        ex->handed_over = false;
        completion_free(c);
        return reply_problem(ex, conn, &pb);
    case BATCH_ADMITTED: break;
    }
    if (!c->o.stream) {
        if (workers_submit(&s->workers, &c->job))
            return MHD_YES;
        batcher_release(s->batcher);
        MHD_resume_connection(conn);
        ex->handed_over = false;
        completion_free(c);
        return reply_busy(ex, conn);
    }
    MHD_resume_connection(conn);
    ex->handed_over = false;
    c->ex = NULL;
    struct MHD_Response *r = NULL;
    if (!completion_stream(c, ex, &r)) {
        batcher_release(s->batcher);
        completion_free(c);
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    if (!workers_submit(&s->workers, &c->job)) {
        // never started: the response goes unqueued, the stream with it
        batcher_release(s->batcher);
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
        MHD_destroy_response(r);
        return reply_busy(ex, conn);
    }
    return reply_queue(ex, conn, 200, r, 0);
}

enum MHD_Result handle_v1_completions(struct exchange *ex,
                                      struct MHD_Connection *conn)
{
    return handle_completion(ex, conn, OPENAI_COMPLETIONS);
}

enum MHD_Result handle_v1_chat(struct exchange *ex, struct MHD_Connection *conn)
{
    return handle_completion(ex, conn, OPENAI_CHAT);
}

/* A model as OpenAI lists one. */
static bool model_object(struct buf *b, const struct models_entry *e,
                         size_t max_tokens)
{
    const size_t positions = e->model->xf.max_positions;
    return buf_append_str(b, "{\"id\":") &&
           buf_append_json_string(b, e->model->name) &&
           buf_printf(b,
                      ",\"object\":\"model\",\"created\":%lld,"
                      "\"owned_by\":\"attnd\",\"max_model_len\":%zu}",
                      (long long)e->loaded,
                      positions < max_tokens ? positions : max_tokens);
}

/* GET /v1/models: the loaded models that generate, as OpenAI lists
 * models; GET /v1/models/ID: one of them. */
enum MHD_Result handle_v1_models(struct exchange *ex,
                                 struct MHD_Connection *conn)
{
    struct models *set = ex->srv->models;
    const char *one =
        !strncmp(ex->path, "/v1/models/", 11) ? ex->path + 11 : NULL;
    struct buf b;
    buf_init(&b, (size_t)1 << 20);
    bool ok = true, found = false;
    if (!one)
        ok = buf_append_str(&b, "{\"object\":\"list\",\"data\":[");
    size_t listed = 0;
    for (size_t i = 0; ok && set && i < set->count; i++) {
        const struct models_entry *e = &set->entry[i];
        if (!e->model->xf.lm_head.data)
            continue; /* an encoder completes nothing */
        if (one && strcmp(one, e->model->name))
            continue;
        found = true;
        ok = buf_append_str(&b, listed++ ? "," : "") &&
             model_object(&b, e, ex->srv->limits.max_tokens);
    }
    if (!one)
        ok = ok && buf_append_str(&b, "]}");
    ok = ok && buf_append_str(&b, "\n");
    if (one && !found) {
        buf_free(&b);
        struct problem pb;
        char loaded[256];
        models_names(set, loaded, sizeof loaded);
        if (models_find(set, one, strlen(one)))
            problem_set(&pb, 404, "/model",
                        "the model \"%.64s\" is an encoder: it completes "
                        "nothing, and /v1/models lists the models that do",
                        one);
        else
            problem_set(&pb, 404, "/model",
                        "the model \"%.64s\" does not exist; loaded: %s", one,
                        loaded);
        return reply_problem(ex, conn, &pb);
    }
    if (!ok) {
        buf_free(&b);
        struct problem pb;
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    size_t len = 0;
    char *doc = buf_take(&b, &len);
    struct MHD_Response *r = reply_from_heap(doc, len, "application/json");
    if (r)
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    return reply_queue(ex, conn, 200, r, len);
}
