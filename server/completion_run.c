/*
 * completion_run.c - an OpenAI completion on the compute pool
 * (completion.h): each token through /generate's loop, streamed as a
 * chunk whose text stops short of what may be a stop string's start or
 * half a character, or kept for the whole answer; then the end: the
 * finish reason, the whole sequence's attention when asked, the usage,
 * [DONE]; or a failure, as a last chunk or the answer's status.
 */
#include "completion.h"
#include "models.h"
#include "reply.h"
#include "response.h"
#include "token_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct completion *completion_of_job(struct job *job)
{
    return (struct completion *)(void *)((char *)job -
                                         offsetof(struct completion, job));
}

void completion_free(void *arg)
{
    struct completion *c = arg;
    xf_result_free(&c->result);
    openai_request_free(&c->o);
    buf_free(&c->decoding.text);
    buf_free(&c->lp_content);
    buf_free(&c->lp_tokens);
    buf_free(&c->lp_values);
    buf_free(&c->lp_tops);
    buf_free(&c->lp_offsets);
    budget_release(&c->hold, c->hold.held);
    free(c);
}

/* -------------------------------------------------------------- chunks */

static bool send_data(struct completion *c, const struct buf *b)
{
    return event_stream_write(c->events, "data: ", 6) &&
           event_stream_write(c->events, b->data, b->len) &&
           event_stream_write(c->events, "\n\n", 2);
}

/* A chunk of text (from sent up to end), with the newest token's
 * log-probabilities (lp: an entry, or NULL) and attention row; the
 * first chat chunk names the role. */
static bool send_chunk(struct completion *c, size_t end, const struct buf *lp,
                       const struct buf *row)
{
    const char *text = c->decoding.text.data;
    struct buf b;
    buf_init(&b, (size_t)64 << 20);
    bool ok = completion_head(&b, c,
                              completion_is_chat(c) ? "chat.completion.chunk"
                                                    : "text_completion") &&
              buf_append_str(&b, ",\"choices\":[{\"index\":0,");
    if (completion_is_chat(c)) {
        ok = ok && buf_append_str(&b, "\"delta\":{") &&
             (c->role_sent || buf_append_str(&b, "\"role\":\"assistant\",")) &&
             buf_append_str(&b, "\"content\":") &&
             completion_text(&b, text, c->sent, end) &&
             buf_append_str(&b, "},\"logprobs\":");
        ok = ok && (lp ? buf_append_str(&b, "{\"content\":[") &&
                             buf_append(&b, lp->data, lp->len) &&
                             buf_append_str(&b, "]}")
                       : buf_append_str(&b, "null"));
    } else {
        ok = ok && buf_append_str(&b, "\"text\":") &&
             completion_text(&b, text, c->sent, end) &&
             buf_append_str(&b, ",\"logprobs\":");
        ok = ok && (lp ? buf_append(&b, lp->data, lp->len)
                       : buf_append_str(&b, "null"));
    }
    ok = ok && buf_append_str(&b, ",\"finish_reason\":null}]");
    if (ok && row)
        ok = buf_append_str(&b, ",\"attention_row\":") &&
             buf_append(&b, row->data, row->len);
    ok = ok && buf_append_str(&b, "}") && send_data(c, &b);
    buf_free(&b);
    if (ok) {
        c->sent = end;
        c->role_sent = true;
    }
    return ok;
}

/* --------------------------------------------------------- the tokens */

/* A stream's failed write; a whole answer's suspended socket that reads
 * its end (as the line's look at a waiting client, reply_client_left()). */
bool completion_gone(void *arg)
{
    struct completion *c = arg;
    return c->events ? event_stream_gone(c->events) : reply_client_left(c->fd);
}

static bool is_eos(const struct model *m, uint32_t id)
{
    for (size_t i = 0; i < m->extra.n_eos; i++)
        if (m->extra.eos[i] == id)
            return true;
    return false;
}

bool completion_token(void *arg, const struct decode_step *step)
{
    struct completion *c = arg;
    const struct model *m = completion_model(c);
    struct openai_request *o = &c->o;
    // an EOS ends the text without being a part of it
    if (!is_eos(m, step->id))
        c->text_end = c->decoding.text.len;
    // a chat's sequence marks every special token, the template's and
    // the model's (the page shows them apart from the text)
    if (completion_is_chat(c))
        o->g.req.model.enc.added[c->decoding.prompt + step->index] =
            tok_token_special(&m->tokenizer, step->id);
    struct buf lp;
    buf_init(&lp, (size_t)1 << 20);
    bool ok = true;
    if (o->logprobs) {
        struct xf_candidate top[OPENAI_MAX_LOGPROBS];
        double chosen;
        const size_t n_top =
            xf_top_logprobs(step->logits, m->xf.vocab_size, o->top_logprobs,
                            top, step->id, &chosen);
        const size_t offset = (o->echo ? c->prompt_chars : 0) + c->chars;
        if (completion_is_chat(c)) {
            // a whole answer keeps every entry; a chunk has its own
            ok =
                completion_chat_logprob(&lp, m, step->id, chosen, top, n_top) &&
                (c->events || (buf_append_str(&c->lp_content,
                                              c->lp_content.len ? "," : "") &&
                               buf_append(&c->lp_content, lp.data, lp.len)));
        } else if (c->events) {
            // a chunk's legacy object is of its own token
            struct buf keep[4] = {c->lp_tokens, c->lp_values, c->lp_tops,
                                  c->lp_offsets};
            buf_init(&c->lp_tokens, (size_t)1 << 20);
            buf_init(&c->lp_values, (size_t)1 << 20);
            buf_init(&c->lp_tops, (size_t)1 << 20);
            buf_init(&c->lp_offsets, (size_t)1 << 20);
            ok = completion_legacy_logprob(c, step->id, true, chosen, top,
                                           n_top, offset) &&
                 completion_legacy_logprobs(&lp, c);
            buf_free(&c->lp_tokens);
            buf_free(&c->lp_values);
            buf_free(&c->lp_tops);
            buf_free(&c->lp_offsets);
            c->lp_tokens = keep[0];
            c->lp_values = keep[1];
            c->lp_tops = keep[2];
            c->lp_offsets = keep[3];
        } else {
            ok = completion_legacy_logprob(c, step->id, true, chosen, top,
                                           n_top, offset);
        }
    }
    c->chars += completion_characters(c->decoding.text.data + step->text_before,
                                      c->decoding.text.len - step->text_before);
    if (ok && c->events) {
        struct buf row;
        buf_init(&row, (size_t)256 << 20);
        ok = !step->row || completion_row(&row, c, step);
        const size_t end = completion_sendable(c);
        if (ok && (end > c->sent || o->logprobs || step->row ||
                   (completion_is_chat(c) && !c->role_sent)))
            ok = send_chunk(c, end, o->logprobs ? &lp : NULL,
                            step->row ? &row : NULL);
        buf_free(&row);
    }
    buf_free(&lp);
    // a failed write is a client gone; a buffer out of room ends it too
    return ok;
}

/* ------------------------------------------------------------- the end */

/* The attention of the whole sequence, as /attention gives it, when the
 * request asks: a stream over it (its last newline left out), or NULL
 * with *none true when nothing is asked. */
static bool attention_tail(struct completion *c, struct response_stream **tail,
                           struct problem *pb)
{
    *tail = NULL;
    struct request *req = &c->o.g.req;
    if (!c->o.attention)
        return true;
    req->model.run.ids = req->model.enc.ids;
    req->model.run.n = req->model.enc.count;
    req->model.run.threads = 1;
    // an ablation's means are the prompt's, as the tokens were made with
    req->model.run.mean_over = c->decoding.prompt;
    struct attn_error err;
    if (req->compute) {
        attn_status st = xf_plan(&completion_model(c)->xf, &req->model.run,
                                 req->model.plan, &err);
        if (st == ATTN_OK)
            st = xf_forward(req->model.plan, &c->srv->cancel, &c->result, &err);
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, "");
        metrics_add_flops(xf_plan_flops(req->model.plan));
    }
    *tail = response_stream_new_model(req, &c->result);
    if (!*tail)
        return problem_set(pb, 503, "", "out of memory writing the answer");
    response_stream_inline(*tail);
    return true;
}

/* A streamed failure: an error object as a chunk (the SDKs raise it),
 * then the end. */
static void send_error(struct completion *c, const struct problem *pb)
{
    size_t len = 0;
    char *body = problem_body_openai(pb, &len);
    if (body && len && body[len - 1] == '\n')
        body[--len] = 0;
    if (body) {
        event_stream_write(c->events, "data: ", 6);
        event_stream_write(c->events, body, len);
        event_stream_write(c->events, "\n\n", 2);
    }
    free(body);
    event_stream_finish(c->events, NULL, 0, "data: [DONE]\n\n", completion_free,
                        c);
}

/* The streamed end: what text is left, then the chunk with the finish
 * reason (and "attention"), the usage chunk when asked, [DONE]. */
static void finish_stream(struct completion *c)
{
    struct problem pb;
    const size_t end = completion_final_end(c);
    if (end > c->sent && !send_chunk(c, end, NULL, NULL)) {
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
        return;
    }
    struct response_stream *tail = NULL;
    if (!attention_tail(c, &tail, &pb)) {
        send_error(c, &pb);
        return;
    }
    struct buf b, suffix;
    buf_init(&b, (size_t)1 << 20);
    buf_init(&suffix, 1000);
    bool ok = buf_append_str(&b, "data: ") &&
              completion_head(&b, c,
                              completion_is_chat(c) ? "chat.completion.chunk"
                                                    : "text_completion") &&
              buf_append_str(&b, ",\"choices\":[{\"index\":0,") &&
              buf_append_str(&b, completion_is_chat(c) ? "\"delta\":{}"
                                                       : "\"text\":\"\"") &&
              buf_printf(&b, ",\"logprobs\":null,\"finish_reason\":\"%s\"}]",
                         completion_finish_reason(&c->decoding)) &&
              buf_append_str(&b, tail ? ",\"attention\":" : "");
    ok = ok && buf_append_str(&suffix, "}\n\n");
    if (ok && c->o.include_usage)
        ok = buf_append_str(&suffix, "data: ") &&
             completion_head(&suffix, c,
                             completion_is_chat(c) ? "chat.completion.chunk"
                                                   : "text_completion") &&
             buf_append_str(&suffix, ",\"choices\":[],") &&
             completion_usage(&suffix, c) && buf_append_str(&suffix, "}\n\n");
    ok = ok && buf_append_str(&suffix, "data: [DONE]\n\n");
    ok = ok && event_stream_write(c->events, b.data, b.len);
    buf_free(&b);
    if (!ok) {
        response_stream_free(tail);
        buf_free(&suffix);
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
        return;
    }
    event_stream_finish(c->events, tail, 0, suffix.data, completion_free, c);
    buf_free(&suffix);
}

/* The whole answer, queued once the connection is back: its head in a
 * stream of its own, then the attention's text as it is read. */
static void finish_whole(struct completion *c)
{
    struct exchange *ex = c->ex;
    struct problem pb;
    struct response_stream *tail = NULL;
    if (!attention_tail(c, &tail, &pb)) {
        reply_prepare_problem(ex, &pb);
        completion_free(c);
        return;
    }
    struct buf b;
    buf_init(&b, (size_t)512 << 20);
    bool ok = completion_head(&b, c,
                              completion_is_chat(c) ? "chat.completion"
                                                    : "text_completion") &&
              buf_append_str(&b, ",") && completion_choice(&b, c) &&
              completion_usage(&b, c) &&
              buf_append_str(&b, tail ? ",\"attention\":" : "");
    struct MHD_Response *r = NULL;
    struct event_stream *s =
        ok ? event_stream_new(c->conn, b.len + 64, (double)c->srv->opt.timeout,
                              &ex->bytes_out, &c->srv->cancel, &r)
           : NULL;
    if (!s) {
        buf_free(&b);
        response_stream_free(tail);
        problem_set(&pb, 503, "", "out of memory writing the answer");
        reply_prepare_problem(ex, &pb);
        completion_free(c);
        return;
    }
    event_stream_write(s, b.data, b.len);
    buf_free(&b);
    event_stream_finish(s, tail, 0, "}\n", completion_free, c);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    reply_prepare(ex, 200, r, 0);
}

static bool score_prompt(struct completion *c, struct problem *pb);

/* A streamed echo: the prompt's text first, in a chunk of its own with
 * its log-probabilities when asked. */
static void send_echo(struct completion *c)
{
    struct buf b;
    buf_init(&b, (size_t)64 << 20);
    bool ok = completion_head(&b, c, "text_completion") &&
              buf_append_str(&b, ",\"choices\":[{\"index\":0,\"text\":") &&
              completion_text(&b, c->o.prompt_text, 0, c->o.prompt_len) &&
              buf_append_str(&b, ",\"logprobs\":") &&
              (c->o.logprobs ? completion_legacy_logprobs(&b, c)
                             : buf_append_str(&b, "null")) &&
              buf_append_str(&b, ",\"finish_reason\":null}]}");
    if (ok)
        send_data(c, &b);
    buf_free(&b);
    // the tokens' own entries start afresh
    c->lp_tokens.len = c->lp_values.len = c->lp_tops.len = c->lp_offsets.len =
        0;
}

/* The end (decoding.h's ended, or straight after the prompt when no
 * token is asked for), on the compute pool: the answer, or the chunks'
 * end, or the failure. */
static void completion_ended(void *arg)
{
    struct completion *c = arg;
    struct decoding *d = &c->decoding;
    struct models_entry *entry = c->o.g.req.model.entry;
    const double flops = c->flops;
    struct MHD_Connection *conn = c->conn;
    const bool whole = c->events == NULL;
    struct problem pb = c->score_problem;
    if (!c->scored) {
        if (whole) {
            reply_prepare_problem(c->ex, &pb);
            completion_free(c);
        } else {
            send_error(c, &pb);
        }
    } else if (d->abandoned && whole) {
        // its socket read its end: the answer goes nowhere, the exchange
        // ends as a failed send
        metrics_generation_abandoned();
        problem_set(&pb, 503, "", "the client went away");
        pb.reason = "client_gone";
        reply_prepare_problem(c->ex, &pb);
        completion_free(c);
    } else if (d->abandoned) {
        metrics_generation_abandoned();
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
    } else if (d->st != ATTN_OK) {
        if (d->st == ATTN_E_CANCELLED)
            pb = c->srv->stopping;
        else
            problem_from_core(&pb, d->st, &d->err, "");
        if (whole) {
            reply_prepare_problem(c->ex, &pb);
            completion_free(c);
        } else {
            send_error(c, &pb);
        }
    } else if (whole) {
        finish_whole(c);
    } else {
        finish_stream(c);
    }
    metrics_computation_done();
    models_count(entry, flops);
    if (whole) /* nothing touches the exchange after this */
        MHD_resume_connection(conn);
}

size_t completion_chunk_bytes(const struct completion *c, size_t keys)
{
    const struct openai_request *o = &c->o;
    const struct xf_model *x = &completion_model(c)->xf;
    // the head and the text (a token's bytes and a stop string's start
    // held back, escaped), each alternative's entry, and the row: keys
    // numbers of at most 14 characters a head and layer
    double bytes = 4096.0 + 6.0 * (TOKEN_BYTES + GENERATE_MAX_STOP_BYTES);
    if (o->logprobs)
        bytes += 2.0 * (48 + 5 * TOKEN_BYTES) * (1.0 + (double)o->top_logprobs);
    if (c->decoding.row_want) {
        const size_t lw =
            o->g.req.model.run.layer == XF_ALL_LAYERS ? x->layers : 1;
        const size_t per =
            c->decoding.row_want == XF_WANT_WEIGHTS ? x->heads : 1;
        bytes += 14.0 * (double)lw * (double)per * (double)keys + 256.0;
    }
    return bytes < 1e18 ? (size_t)bytes : SIZE_MAX;
}

bool completion_ready(void *arg)
{
    const struct completion *c = arg;
    // the row of the next token is of every position its cache holds and
    // of those the step brings (the prompt's, before the first token)
    const struct decoding *d = &c->decoding;
    return !c->events ||
           event_stream_ready(c->events,
                              completion_chunk_bytes(
                                  c, d->run.cache.len + decoding_pending(d)));
}

void completion_run(struct job *job, double waited)
{
    struct completion *c = completion_of_job(job);
    metrics_queue_wait(waited);
    metrics_computation_started();
    struct decoding *d = &c->decoding;
    d->ended = completion_ended;
    d->ready = completion_ready;
    c->scored =
        !(c->o.echo && c->o.logprobs) || score_prompt(c, &c->score_problem);
    if (c->scored && c->events && c->o.echo)
        send_echo(c);
    if (c->scored && c->o.g.max_new) {
        decoding_start(d, c->srv->batcher, &c->srv->workers);
        return;
    }
    batcher_release(c->srv->batcher);
    d->why = DECODE_LENGTH;
    completion_ended(c);
}

/* The pool closed before its turn: the server is stopping. */
void completion_refuse(struct job *job)
{
    struct completion *c = completion_of_job(job);
    batcher_release(c->srv->batcher);
    if (c->events) {
        send_error(c, &c->srv->stopping);
        return;
    }
    struct MHD_Connection *conn = c->conn;
    reply_prepare_problem(c->ex, &c->srv->stopping);
    completion_free(c);
    MHD_resume_connection(conn);
}

/* --------------------------------------------------------- the prompt */

/* echo with logprobs: each prompt token's log-probability given those
 * before it, from one pass over the prompt (the first has none). */
static bool score_prompt(struct completion *c, struct problem *pb)
{
    const struct openai_request *o = &c->o;
    const struct model *m = completion_model(c);
    const struct tok_encoding *enc = &o->g.req.model.enc;
    const size_t n = c->decoding.prompt, vocab = m->xf.vocab_size;
    bool ok = completion_legacy_logprob(c, enc->ids[0], false, 0, NULL, 0, 0);
    if (n < 2 || !ok) {
        struct buf first;
        buf_init(&first, (size_t)1 << 20);
        if (ok && token_text_append(&first, m, enc->ids[0]))
            c->prompt_chars = completion_characters(first.data, first.len);
        buf_free(&first);
        return ok || problem_set(pb, 503, "", "out of memory");
    }
    const struct xf_run run = {.ids = enc->ids,
                               .n = n,
                               .want = XF_WANT_LOGITS | XF_WANT_ALL_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = 1};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err;
    attn_status st = xf_plan(&m->xf, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, &c->srv->cancel, &r, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "/echo");
    // each offset: the completion_characters of the tokens before it
    struct buf text;
    buf_init(&text, (size_t)64 << 20);
    ok = token_text_append(&text, m, enc->ids[0]);
    size_t chars = completion_characters(text.data, text.len);
    for (size_t i = 1; ok && i < n; i++) {
        struct xf_candidate top[OPENAI_MAX_LOGPROBS];
        double chosen;
        const size_t n_top =
            xf_top_logprobs(r.logits + (i - 1) * vocab, vocab, o->top_logprobs,
                            top, enc->ids[i], &chosen);
        ok = completion_legacy_logprob(c, enc->ids[i], true, chosen, top, n_top,
                                       chars);
        const size_t before = text.len;
        ok = ok && token_text_append(&text, m, enc->ids[i]);
        chars += completion_characters(text.data + before, text.len - before);
    }
    buf_free(&text);
    xf_result_free(&r);
    c->prompt_chars = chars;
    return ok || problem_set(pb, 503, "", "out of memory");
}
