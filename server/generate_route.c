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
#include "batcher.h"
#include "decoding.h"
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

enum event_format { EVENTS_SSE, EVENTS_NDJSON };

struct generation {
    struct job job;
    struct batch_ticket ticket; /* its place in the line for a slot */
    struct exchange *ex;        /* while it waits there: the exchange,
                                   suspended */
    struct MHD_Connection *conn;
    int fd; /* its socket, watched while it waits for a slot (suspended) */
    struct http_server *srv;
    struct generate_request g;
    struct budget_hold hold; /* taken over from the exchange */
    struct event_stream *events;
    enum event_format format;
    size_t prompt, capacity; /* tokens: the prompt's, at most in all */
    double flops;
    struct xf_result result;  /* the finished sequence's, which the done
                                 event reads */
    struct decoding decoding; /* the loop, and the generated text */
};

static struct generation *generation_of_job(struct job *job)
{
    return (struct generation *)(void *)((char *)job -
                                         offsetof(struct generation, job));
}

static struct generation *generation_of_ticket(struct batch_ticket *t)
{
    return (struct generation *)(void *)((char *)t -
                                         offsetof(struct generation, ticket));
}

static void generation_free(void *arg)
{
    struct generation *gen = arg;
    xf_result_free(&gen->result);
    generate_request_free(&gen->g);
    buf_free(&gen->decoding.text);
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

/* The done event: what ended it, then the finished sequence's answer as
 * /attention gives it (its opening brace left out: the two are one
 * object). */
static void send_done(struct generation *gen, enum decode_finish why)
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
    const struct buf *text = &gen->decoding.text;
    buf_init(&head, 4096 + text->len * 6);
    bool ok = tail != NULL;
    ok = ok && (gen->format == EVENTS_SSE
                    ? buf_append_str(&head, "event: done\ndata: {")
                    : buf_append_str(&head, "{\"event\":\"done\","));
    ok = ok &&
         buf_printf(&head,
                    "\"prompt_tokens\":%zu,\"finish_reason\":\"%s\","
                    "\"text\":",
                    gen->prompt, decode_finish_names[why]) &&
         buf_append_json_string(&head, text->data ? text->data : "") &&
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

static bool generation_gone(void *arg)
{
    struct generation *gen = arg;
    return event_stream_gone(gen->events);
}

static bool generation_token(void *arg, const struct decode_step *step)
{
    struct generation *gen = arg;
    struct xf_candidate top[GENERATE_MAX_TOP];
    const struct xf_model *x = &gen->g.req.model.entry->model->xf;
    const size_t n_top =
        xf_top_tokens(step->logits, x->vocab_size, gen->g.top_candidates, top);
    return send_token(gen, step->index, step->id, top, n_top);
}

/* Can the client take the next token's event now? (Its most: its own
 * text and the top candidates' at their longest, escaped.) */
static bool generation_ready(void *arg)
{
    struct generation *gen = arg;
    const struct model *m = gen->g.req.model.entry->model;
    return event_stream_ready(gen->events,
                              256 + (gen->g.top_candidates + 1) *
                                        (96 + 6 * m->longest_text));
}

/* The end of the generation (decoding.h's ended), on the compute pool. */
static void generation_ended(void *arg)
{
    struct generation *gen = arg;
    struct decoding *d = &gen->decoding;
    // what outlives gen, which the last event may free
    struct models_entry *entry = gen->g.req.model.entry;
    const double flops = gen->flops;
    if (d->abandoned) {
        metrics_generation_abandoned();
        event_stream_finish(gen->events, NULL, 0, "", generation_free, gen);
    } else if (d->st != ATTN_OK) {
        struct problem pb;
        problem_from_core(&pb, d->st, &d->err, "");
        send_error(gen, d->st == ATTN_E_CANCELLED ? 503 : pb.status,
                   d->st == ATTN_E_CANCELLED ? "the server is stopping"
                                             : pb.detail);
    } else {
        send_done(gen, d->why);
    }
    metrics_computation_done();
    models_count(entry, flops);
}

/* Its start on the compute pool (decoding_start(): a prompt that does
 * not go through the steps, and its first token, there too); its steps
 * then go on in the batch. */
static void run_generation(struct job *job, double waited)
{
    struct generation *gen = generation_of_job(job);
    metrics_queue_wait(waited);
    metrics_computation_started();
    decoding_start(&gen->decoding, gen->srv->batcher, &gen->srv->workers);
}

/* The pool closed before its turn: the server is stopping. */
static void refuse_generation(struct job *job)
{
    struct generation *gen = generation_of_job(job);
    batcher_release(gen->srv->batcher);
    send_error(gen, 503, "the server is stopping");
}

/* ------------------------------------------------------------ the plan */

/* The costs of the whole generation (decoding_plan()), and what the
 * events take: each token's, the finished sequence's answer (its arrays
 * within --max-output: decoding_answer_fits()), and what a client may
 * leave unread. */
static bool plan_generation(struct generation *gen,
                            const struct request_limits *lim, size_t *bytes,
                            struct problem *pb)
{
    const struct model *m = gen->g.req.model.entry->model;
    const size_t per_token = 32 + 6 * m->longest_text;
    double answer_bytes;
    if (!decoding_answer_fits(&gen->decoding, lim, "", &answer_bytes, pb))
        return false;
    const double extra =
        answer_bytes + (double)EVENT_BYTES + (double)sizeof *gen;
    return decoding_plan(&gen->decoding, lim, per_token, extra, &gen->flops,
                         bytes, pb);
}

/* The event stream to the client, and its response in *r. */
static bool generation_stream(struct generation *gen, struct exchange *ex,
                              struct MHD_Response **r)
{
    struct http_server *s = gen->srv;
    gen->events =
        event_stream_new(gen->conn, EVENT_BYTES, (double)s->opt.timeout,
                         &ex->bytes_out, &s->cancel, r);
    if (!gen->events)
        return false;
    MHD_add_response_header(*r, "Content-Type",
                            gen->format == EVENTS_SSE ? "text/event-stream"
                                                      : "application/x-ndjson");
    MHD_add_response_header(*r, "Cache-Control", "no-store");
    MHD_add_response_header(*r, "X-Accel-Buffering", "no");
    return true;
}

/* A slot after waiting for one (on the batch's thread): the stream's
 * response prepared, its start handed to the pool, the exchange back. */
static void generation_granted(struct batch_ticket *t)
{
    struct generation *gen = generation_of_ticket(t);
    struct exchange *ex = gen->ex;
    struct MHD_Connection *conn = gen->conn;
    struct MHD_Response *r = NULL;
    if (!generation_stream(gen, ex, &r)) {
        struct problem pb;
        problem_set(&pb, 503, "", "out of memory");
        batcher_release(gen->srv->batcher);
        reply_prepare_problem(ex, &pb);
        generation_free(gen);
        MHD_resume_connection(conn);
        return;
    }
    reply_prepare(ex, 200, r, 0);
    gen->ex = NULL;
    // owed: the slot was counted against the line it waited in
    if (!workers_submit_owed(&gen->srv->workers, &gen->job))
        refuse_generation(&gen->job);
    MHD_resume_connection(conn); /* nothing touches ex after this */
}

/* Has the client of a waiting generation gone away? */
static bool generation_left(struct batch_ticket *t)
{
    return reply_client_left(generation_of_ticket(t)->fd);
}

/* No slot in time, the server stops, or the client left: the 503 it
 * waited for. */
static void generation_refused(struct batch_ticket *t, const struct problem *pb)
{
    struct generation *gen = generation_of_ticket(t);
    struct MHD_Connection *conn = gen->conn;
    reply_prepare_problem(gen->ex, pb);
    generation_free(gen);
    MHD_resume_connection(conn);
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
    if (!reply_small_json(ex, conn, &pb))
        return reply_problem(ex, conn, &pb);
    struct generation *gen = calloc(1, sizeof *gen);
    if (!gen) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    gen->fd = reply_socket(conn);
    gen->srv = s;
    gen->format = format_of(conn);
    buf_init(&gen->decoding.text, (size_t)64 << 20);
    size_t bytes = 0;
    bool ok = generate_parse(&gen->g, ex->body.data ? ex->body.data : "",
                             ex->body.len, &s->limits, &ex->hold, &pb);
    if (ok) {
        gen->prompt = gen->g.req.model.enc.count;
        gen->capacity = gen->prompt + gen->g.max_new;
        gen->decoding = (struct decoding){.g = &gen->g,
                                          .prompt = gen->prompt,
                                          .capacity = gen->capacity,
                                          .cancel = &s->cancel,
                                          .prompt_team = s->opt.threads,
                                          .text = gen->decoding.text,
                                          .length_pointer = "/max_new_tokens",
                                          .token = generation_token,
                                          .gone = generation_gone,
                                          .ready = generation_ready,
                                          .ended = generation_ended,
                                          .arg = gen};
        ok = decoding_widen(&gen->decoding) ||
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
    gen->conn = conn;
    gen->job.run = run_generation;
    gen->job.refuse = refuse_generation;
    gen->ticket.granted = generation_granted;
    gen->ticket.refused = generation_refused;
    gen->ticket.left = generation_left;
    // suspended first: a slot may be granted on the batch's thread at once
    gen->ex = ex;
    ex->handed_over = true;
    MHD_suspend_connection(conn);
    switch (batcher_admit(s->batcher, &gen->ticket, &pb)) {
    case BATCH_WAITING: return MHD_YES;
    case BATCH_FULL:
        MHD_resume_connection(conn);
        ex->handed_over = false;
        generation_free(gen);
        return reply_problem(ex, conn, &pb);
    case BATCH_ADMITTED: break;
    }
    MHD_resume_connection(conn);
    ex->handed_over = false;
    gen->ex = NULL;
    struct MHD_Response *r = NULL;
    if (!generation_stream(gen, ex, &r)) {
        batcher_release(s->batcher);
        generation_free(gen);
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    if (!workers_submit(&s->workers, &gen->job)) {
        // never started: the response goes unqueued, the stream with it
        batcher_release(s->batcher);
        event_stream_finish(gen->events, NULL, 0, "", generation_free, gen);
        MHD_destroy_response(r);
        return reply_busy(ex, conn);
    }
    return reply_queue(ex, conn, 200, r, 0);
}
