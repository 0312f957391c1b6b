/*
 * openai_route.c - the OpenAI-compatible API: GET /v1/models, POST
 * /v1/completions and POST /v1/chat/completions, so that OpenAI's
 * clients (the official SDKs, LangChain, evaluation harnesses) work
 * against attnd unchanged, and attnd's "attention" extension gives them
 * the attention of the sequence they made.
 *
 * A completion is /generate's loop (decoding.c) with OpenAI's shapes
 * around it. Streamed (stream: true), each token goes out as a chunk as
 * it is made, Server-Sent Events ending "data: [DONE]"; the text a chunk
 * carries stops short of what may be the start of a stop string or of a
 * character whose bytes are not all there yet, so that no chunk holds
 * text the answer does not. Whole, the connection waits suspended and
 * the answer is queued once made, with the status its outcome has.
 *
 * Everything is reserved before the first token, as /generate reserves
 * it: the cache, the passes, each token's text and log-probabilities,
 * the attention answer. A streamed client that goes away stops the work
 * at the next token.
 */
#include "decoding.h"
#include "event_stream.h"
#include "exchange.h"
#include "models.h"
#include "openai_request.h"
#include "reply.h"
#include "response.h"
#include "token_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_BYTES ((size_t)1 << 20) /* unread chunks a client may leave */
/* A body is decoded (and a chat rendered) on the HTTP thread: 1 MiB of
 * messages is far more than any model's positions hold. */
#define OPENAI_BODY_BYTES ((size_t)1 << 20)
/* A token's bytes at most, as a logprob entry shows them. */
#define TOKEN_BYTES 256

struct completion {
    struct job job;
    struct http_server *srv;
    struct openai_request o;
    struct decoding decoding;
    /* whole: the exchange waiting, suspended, for its answer */
    struct exchange *ex;
    struct MHD_Connection *conn;
    /* streamed: the chunks, and the reservation taken over from the
     * exchange (a stream outlives it when the client leaves) */
    struct event_stream *events;
    struct budget_hold hold;
    struct xf_result result; /* the whole sequence's, for "attention" */
    double flops;
    char id[48];
    long long created;
    size_t text_end;     /* bytes of the text that are the completion's: not
                            an EOS token's, nor a stop string and after */
    size_t sent;         /* streamed: bytes of text sent */
    bool role_sent;      /* streamed chat: the first chunk named the role */
    size_t chars;        /* characters of the text before the newest token,
                            for text_offset */
    size_t prompt_chars; /* echo: the prompt tokens' characters, where the
                            completion's offsets start (as vLLM counts
                            them, over each token's text) */
    /* the log-probabilities, as JSON items joined by commas: chat's
     * content entries; the legacy layout's four arrays */
    struct buf lp_content, lp_tokens, lp_values, lp_tops, lp_offsets;
};

static struct completion *completion_of_job(struct job *job)
{
    return (struct completion *)(void *)((char *)job -
                                         offsetof(struct completion, job));
}

static void completion_free(void *arg)
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

static const struct model *model_of(const struct completion *c)
{
    return c->o.g.req.model.entry->model;
}

static bool is_chat(const struct completion *c)
{
    return c->o.route == OPENAI_CHAT;
}

/* ------------------------------------------------------------- text */

/* Characters in UTF-8 bytes: the bytes that do not continue one. */
static size_t characters(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Where text[0..end) may be cut without splitting a character whose
 * bytes are not all there yet. */
static size_t whole_characters(const char *text, size_t end)
{
    for (size_t back = 1; back <= 4 && back <= end; back++) {
        const unsigned char b = (unsigned char)text[end - back];
        if ((b & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        const size_t need = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        return need > back ? end - back : end;
    }
    return end;
}

/* How much of the text may go out now: not a stop string nor what
 * follows it, not the start of one that the next token may complete,
 * not half a character. */
static size_t sendable(const struct completion *c)
{
    const struct generate_request *g = &c->o.g;
    const char *text = c->decoding.text.data;
    size_t limit = c->text_end;
    // a whole stop string the newest token completed
    for (size_t i = 0; i < g->n_stop; i++) {
        const size_t len = strlen(g->stop[i]);
        for (size_t p = c->sent >= len ? c->sent - len + 1 : 0;
             p + len <= limit; p++)
            if (!memcmp(text + p, g->stop[i], len)) {
                limit = p;
                break;
            }
    }
    // the start of one it may complete
    for (size_t i = 0; i < g->n_stop; i++) {
        const size_t len = strlen(g->stop[i]);
        for (size_t k = len - 1; k > 0; k--)
            if (k <= limit && !memcmp(text + limit - k, g->stop[i], k)) {
                limit -= k;
                break;
            }
    }
    return whole_characters(text, limit);
}

/* ------------------------------------------------------------ writers */

static bool append_number(struct buf *b, double v)
{
    // a log-probability of a token the model gives none: vLLM's floor
    // at float32's precision, the alternatives' (struct xf_candidate)
    return isfinite(v) ? buf_printf(b, "%.9g", (double)(float)v)
                       : buf_append_str(b, "-9999.0");
}

/* A token's text as JSON (bytes that are not whole UTF-8 as U+FFFD), and
 * optionally its bytes as OpenAI's "bytes" array. */
static bool append_token(struct buf *b, const struct model *m, uint32_t id,
                         bool with_bytes)
{
    char bytes[TOKEN_BYTES + 1];
    size_t n = tok_token_bytes(&m->tokenizer, id, bytes, TOKEN_BYTES);
    n = n < TOKEN_BYTES ? n : TOKEN_BYTES;
    bytes[n] = 0;
    // a NUL byte (a byte token's) cannot be in the string: U+FFFD
    for (size_t i = 0; i < n; i++)
        if (!bytes[i])
            bytes[i] = '\x01';
    bool ok = buf_append_json_string(b, bytes);
    if (ok && with_bytes) {
        n = tok_token_bytes(&m->tokenizer, id, bytes, TOKEN_BYTES);
        n = n < TOKEN_BYTES ? n : TOKEN_BYTES;
        ok = buf_append_str(b, ",\"bytes\":[");
        for (size_t i = 0; ok && i < n; i++)
            ok = buf_printf(b, "%s%u", i ? "," : "", (unsigned char)bytes[i]);
        ok = ok && buf_append_str(b, "]");
    }
    return ok;
}

/* One token's log-probabilities in chat's layout: {token, logprob,
 * bytes, top_logprobs: [{token, logprob, bytes}]}. */
static bool chat_logprob(struct buf *b, const struct model *m, uint32_t id,
                         double logprob, const struct xf_candidate *top,
                         size_t n_top)
{
    bool ok = buf_append_str(b, "{\"token\":") &&
              append_token(b, m, id, true) &&
              buf_append_str(b, ",\"logprob\":") && append_number(b, logprob) &&
              buf_append_str(b, ",\"top_logprobs\":[");
    for (size_t i = 0; ok && i < n_top; i++)
        ok = buf_append_str(b, i ? ",{\"token\":" : "{\"token\":") &&
             append_token(b, m, top[i].id, true) &&
             buf_append_str(b, ",\"logprob\":") &&
             append_number(b, top[i].score) && buf_append_str(b, "}");
    return ok && buf_append_str(b, "]}");
}

/* The legacy layout's entries of one token, each appended to its array
 * (after a comma when it has any): tokens, token_logprobs, top_logprobs
 * (an object of token to log-probability; null for a first token that
 * has none) and text_offset. */
static bool legacy_logprob(struct completion *c, uint32_t id, bool has,
                           double logprob, const struct xf_candidate *top,
                           size_t n_top, size_t offset)
{
    const struct model *m = model_of(c);
    const bool first = c->lp_tokens.len == 0;
    const char *sep = first ? "" : ",";
    bool ok = buf_append_str(&c->lp_tokens, sep) &&
              append_token(&c->lp_tokens, m, id, false) &&
              buf_append_str(&c->lp_values, sep) &&
              (has ? append_number(&c->lp_values, logprob)
                   : buf_append_str(&c->lp_values, "null")) &&
              buf_append_str(&c->lp_tops, sep) &&
              buf_printf(&c->lp_offsets, "%s%zu", sep, offset);
    if (ok && !has)
        return buf_append_str(&c->lp_tops, "null");
    ok = ok && buf_append_str(&c->lp_tops, "{");
    for (size_t i = 0; ok && i < n_top; i++)
        ok = buf_append_str(&c->lp_tops, i ? "," : "") &&
             append_token(&c->lp_tops, m, top[i].id, false) &&
             buf_append_str(&c->lp_tops, ":") &&
             append_number(&c->lp_tops, top[i].score);
    return ok && buf_append_str(&c->lp_tops, "}");
}

/* The legacy "logprobs" object of what the buffers hold. */
static bool legacy_logprobs(struct buf *b, const struct completion *c)
{
    return buf_append_str(b, "{\"tokens\":[") &&
           buf_append(b, c->lp_tokens.data, c->lp_tokens.len) &&
           buf_append_str(b, "],\"token_logprobs\":[") &&
           buf_append(b, c->lp_values.data, c->lp_values.len) &&
           buf_append_str(b, "],\"top_logprobs\":[") &&
           buf_append(b, c->lp_tops.data, c->lp_tops.len) &&
           buf_append_str(b, "],\"text_offset\":[") &&
           buf_append(b, c->lp_offsets.data, c->lp_offsets.len) &&
           buf_append_str(b, "]}");
}

/* An answer's or a chunk's head: {"id", "object", "created", "model", */
static bool append_head(struct buf *b, const struct completion *c,
                        const char *object)
{
    return buf_printf(b,
                      "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,"
                      "\"model\":",
                      c->id, object, c->created) &&
           buf_append_json_string(b, model_of(c)->name);
}

static bool append_usage(struct buf *b, const struct completion *c)
{
    const size_t prompt = c->decoding.prompt;
    const size_t made = c->o.g.req.model.enc.count - prompt;
    return buf_printf(b,
                      "\"usage\":{\"prompt_tokens\":%zu,\"completion_tokens\":"
                      "%zu,\"total_tokens\":%zu}",
                      prompt, made, prompt + made);
}

/* text[from, to) as a JSON string. */
static bool append_text(struct buf *b, const char *text, size_t from, size_t to)
{
    struct buf piece;
    buf_init(&piece, to - from + 1);
    bool ok = buf_append(&piece, text + from, to - from) &&
              buf_append_json_string(b, piece.data ? piece.data : "");
    buf_free(&piece);
    return ok;
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
    bool ok =
        append_head(&b, c,
                    is_chat(c) ? "chat.completion.chunk" : "text_completion") &&
        buf_append_str(&b, ",\"choices\":[{\"index\":0,");
    if (is_chat(c)) {
        ok = ok && buf_append_str(&b, "\"delta\":{") &&
             (c->role_sent || buf_append_str(&b, "\"role\":\"assistant\",")) &&
             buf_append_str(&b, "\"content\":") &&
             append_text(&b, text, c->sent, end) &&
             buf_append_str(&b, "},\"logprobs\":");
        ok = ok && (lp ? buf_append_str(&b, "{\"content\":[") &&
                             buf_append(&b, lp->data, lp->len) &&
                             buf_append_str(&b, "]}")
                       : buf_append_str(&b, "null"));
    } else {
        ok = ok && buf_append_str(&b, "\"text\":") &&
             append_text(&b, text, c->sent, end) &&
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

/* A token's attention row as a chunk carries it: {"position", "token_id",
 * "weights" or "mean_weights": [layer][head][key] (one layer asked: no
 * layer dimension)}. */
static bool row_json(struct buf *b, const struct completion *c,
                     const struct decode_step *step)
{
    const struct xf_model *x = &model_of(c)->xf;
    const bool all = c->o.g.req.model.run.layer == XF_ALL_LAYERS;
    const size_t lw = all ? x->layers : 1;
    const bool heads = c->decoding.row_want == XF_WANT_WEIGHTS;
    const size_t per = heads ? x->heads : 1, keys = step->keys;
    // the row is the query at the position before the new token
    bool ok = buf_printf(b, "{\"position\":%zu,\"token_id\":%u,\"%s\":%s",
                         c->decoding.prompt + step->index - 1, step->id,
                         heads ? "weights" : "mean_weights", all ? "[" : "");
    for (size_t l = 0; ok && l < lw; l++) {
        ok = buf_append_str(b, l ? ",[" : "[");
        for (size_t h = 0; ok && h < per; h++) {
            ok = buf_append_str(b, h ? ",[" : "[");
            const float *r = step->row + (l * per + h) * keys;
            for (size_t k = 0; ok && k < keys; k++)
                ok = buf_printf(b, "%s%.6g", k ? "," : "", (double)r[k]);
            ok = ok && buf_append_str(b, "]");
        }
        ok = ok && buf_append_str(b, "]");
    }
    return ok && buf_append_str(b, all ? "]}" : "}");
}

/* --------------------------------------------------------- the tokens */

static bool completion_gone(void *arg)
{
    struct completion *c = arg;
    return c->events && event_stream_gone(c->events);
}

static bool is_eos(const struct model *m, uint32_t id)
{
    for (size_t i = 0; i < m->extra.n_eos; i++)
        if (m->extra.eos[i] == id)
            return true;
    return false;
}

static bool completion_token(void *arg, const struct decode_step *step)
{
    struct completion *c = arg;
    const struct model *m = model_of(c);
    struct openai_request *o = &c->o;
    // an EOS ends the text without being a part of it
    if (!is_eos(m, step->id))
        c->text_end = c->decoding.text.len;
    // a chat's sequence marks every special token, the template's and
    // the model's (the page shows them apart from the text)
    if (is_chat(c))
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
        if (is_chat(c)) {
            ok = chat_logprob(&lp, m, step->id, chosen, top, n_top) &&
                 buf_append_str(&c->lp_content, c->lp_content.len ? "," : "") &&
                 buf_append(&c->lp_content, lp.data, lp.len);
        } else if (c->events) {
            // a chunk's legacy object is of its own token
            struct buf keep[4] = {c->lp_tokens, c->lp_values, c->lp_tops,
                                  c->lp_offsets};
            buf_init(&c->lp_tokens, (size_t)1 << 20);
            buf_init(&c->lp_values, (size_t)1 << 20);
            buf_init(&c->lp_tops, (size_t)1 << 20);
            buf_init(&c->lp_offsets, (size_t)1 << 20);
            ok =
                legacy_logprob(c, step->id, true, chosen, top, n_top, offset) &&
                legacy_logprobs(&lp, c);
            buf_free(&c->lp_tokens);
            buf_free(&c->lp_values);
            buf_free(&c->lp_tops);
            buf_free(&c->lp_offsets);
            c->lp_tokens = keep[0];
            c->lp_values = keep[1];
            c->lp_tops = keep[2];
            c->lp_offsets = keep[3];
        } else {
            ok = legacy_logprob(c, step->id, true, chosen, top, n_top, offset);
        }
    }
    c->chars += characters(c->decoding.text.data + step->text_before,
                           c->decoding.text.len - step->text_before);
    if (ok && c->events) {
        struct buf row;
        buf_init(&row, (size_t)256 << 20);
        ok = !step->row || row_json(&row, c, step);
        const size_t end = sendable(c);
        if (ok && (end > c->sent || o->logprobs || step->row ||
                   (is_chat(c) && !c->role_sent)))
            ok = send_chunk(c, end, o->logprobs ? &lp : NULL,
                            step->row ? &row : NULL);
        buf_free(&row);
    }
    buf_free(&lp);
    // a failed write is a client gone; a buffer out of room ends it too
    return ok;
}

/* ------------------------------------------------------------- the end */

static const char *finish_reason(const struct decoding *d)
{
    return d->why == DECODE_LENGTH ? "length" : "stop";
}

/* The text's end once finished: before a stop string that ended it. */
static size_t final_end(const struct completion *c)
{
    return c->decoding.why == DECODE_STOP && c->decoding.stop_at < c->text_end
               ? c->decoding.stop_at
               : c->text_end;
}

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
        attn_status st =
            xf_plan(&model_of(c)->xf, &req->model.run, req->model.plan, &err);
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

/* The choice of a whole answer, its text (after the echoed prompt). */
static bool append_choice(struct buf *b, const struct completion *c)
{
    const char *text = c->decoding.text.data ? c->decoding.text.data : "";
    const size_t end = final_end(c);
    bool ok;
    if (is_chat(c)) {
        ok = buf_append_str(b, "\"choices\":[{\"index\":0,\"message\":{"
                               "\"role\":\"assistant\",\"content\":") &&
             append_text(b, text, 0, end) &&
             buf_append_str(b, "},\"logprobs\":") &&
             (c->o.logprobs
                  ? buf_append_str(b, "{\"content\":[") &&
                        buf_append(b, c->lp_content.data, c->lp_content.len) &&
                        buf_append_str(b, "]}")
                  : buf_append_str(b, "null"));
    } else {
        struct buf whole;
        buf_init(&whole, c->o.prompt_len + end + 1);
        ok =
            (!c->o.echo ||
             buf_append(&whole, c->o.prompt_text, c->o.prompt_len)) &&
            buf_append(&whole, text, end) &&
            buf_append_str(b, "\"choices\":[{\"index\":0,\"text\":") &&
            append_text(b, whole.data ? whole.data : "", 0, whole.len) &&
            buf_append_str(b, ",\"logprobs\":") &&
            (c->o.logprobs ? legacy_logprobs(b, c) : buf_append_str(b, "null"));
        buf_free(&whole);
    }
    return ok && buf_printf(b, ",\"finish_reason\":\"%s\"}],",
                            finish_reason(&c->decoding));
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
    const size_t end = final_end(c);
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
    bool ok =
        buf_append_str(&b, "data: ") &&
        append_head(&b, c,
                    is_chat(c) ? "chat.completion.chunk" : "text_completion") &&
        buf_append_str(&b, ",\"choices\":[{\"index\":0,") &&
        buf_append_str(&b, is_chat(c) ? "\"delta\":{}" : "\"text\":\"\"") &&
        buf_printf(&b, ",\"logprobs\":null,\"finish_reason\":\"%s\"}]",
                   finish_reason(&c->decoding)) &&
        buf_append_str(&b, tail ? ",\"attention\":" : "");
    ok = ok && buf_append_str(&suffix, "}\n\n");
    if (ok && c->o.include_usage)
        ok = buf_append_str(&suffix, "data: ") &&
             append_head(&suffix, c,
                         is_chat(c) ? "chat.completion.chunk"
                                    : "text_completion") &&
             buf_append_str(&suffix, ",\"choices\":[],") &&
             append_usage(&suffix, c) && buf_append_str(&suffix, "}\n\n");
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
    bool ok = append_head(&b, c,
                          is_chat(c) ? "chat.completion" : "text_completion") &&
              buf_append_str(&b, ",") && append_choice(&b, c) &&
              append_usage(&b, c) &&
              buf_append_str(&b, tail ? ",\"attention\":" : "");
    struct MHD_Response *r = NULL;
    struct event_stream *s =
        ok ? event_stream_new(c->conn, b.len + 64, (double)c->srv->opt.timeout,
                              &ex->bytes_out, &r)
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
    bool ok =
        append_head(&b, c, "text_completion") &&
        buf_append_str(&b, ",\"choices\":[{\"index\":0,\"text\":") &&
        append_text(&b, c->o.prompt_text, 0, c->o.prompt_len) &&
        buf_append_str(&b, ",\"logprobs\":") &&
        (c->o.logprobs ? legacy_logprobs(&b, c) : buf_append_str(&b, "null")) &&
        buf_append_str(&b, ",\"finish_reason\":null}]}");
    if (ok)
        send_data(c, &b);
    buf_free(&b);
    // the tokens' own entries start afresh
    c->lp_tokens.len = c->lp_values.len = c->lp_tops.len = c->lp_offsets.len =
        0;
}

static void run_completion(struct job *job, double waited)
{
    struct completion *c = completion_of_job(job);
    metrics_queue_wait(waited);
    metrics_computation_started();
    struct decoding *d = &c->decoding;
    struct models_entry *entry = c->o.g.req.model.entry;
    const double flops = c->flops;
    struct MHD_Connection *conn = c->conn;
    const bool whole = c->events == NULL;
    struct problem pb;
    const bool scored = !(c->o.echo && c->o.logprobs) || score_prompt(c, &pb);
    if (scored && c->events && c->o.echo)
        send_echo(c);
    if (scored && c->o.g.max_new)
        decoding_run(d);
    else
        d->why = DECODE_LENGTH;
    if (!scored) {
        if (whole) {
            reply_prepare_problem(c->ex, &pb);
            completion_free(c);
        } else {
            send_error(c, &pb);
        }
    } else if (d->abandoned) {
        metrics_generation_abandoned();
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
    } else if (d->st != ATTN_OK) {
        if (d->st == ATTN_E_CANCELLED)
            problem_set(&pb, 503, "", "the server is stopping");
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

/* The pool closed before its turn: the server is stopping. */
static void refuse_completion(struct job *job)
{
    struct completion *c = completion_of_job(job);
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
    const struct model *m = model_of(c);
    const struct tok_encoding *enc = &o->g.req.model.enc;
    const size_t n = c->decoding.prompt, vocab = m->xf.vocab_size;
    bool ok = legacy_logprob(c, enc->ids[0], false, 0, NULL, 0, 0);
    if (n < 2 || !ok) {
        struct buf first;
        buf_init(&first, (size_t)1 << 20);
        if (ok && token_text_append(&first, m, enc->ids[0]))
            c->prompt_chars = characters(first.data, first.len);
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
    // each offset: the characters of the tokens before it
    struct buf text;
    buf_init(&text, (size_t)64 << 20);
    ok = token_text_append(&text, m, enc->ids[0]);
    size_t chars = characters(text.data, text.len);
    for (size_t i = 1; ok && i < n; i++) {
        struct xf_candidate top[OPENAI_MAX_LOGPROBS];
        double chosen;
        const size_t n_top =
            xf_top_logprobs(r.logits + (i - 1) * vocab, vocab, o->top_logprobs,
                            top, enc->ids[i], &chosen);
        ok = legacy_logprob(c, enc->ids[i], true, chosen, top, n_top, chars);
        const size_t before = text.len;
        ok = ok && token_text_append(&text, m, enc->ids[i]);
        chars += characters(text.data + before, text.len - before);
    }
    buf_free(&text);
    xf_result_free(&r);
    c->prompt_chars = chars;
    return ok || problem_set(pb, 503, "", "out of memory");
}

/* --------------------------------------------------------- the routes */

/* The costs beyond decoding_plan()'s: a token's log-probabilities and
 * row, the prompt's when echoed, the answer's head and attention. */
static bool plan_completion(struct completion *c,
                            const struct request_limits *lim, size_t *bytes,
                            struct problem *pb)
{
    const struct openai_request *o = &c->o;
    const struct model *m = model_of(c);
    const struct xf_model *x = &m->xf;
    // a token's entry: its text and bytes, each alternative's too
    const size_t entry = 48 + 5 * TOKEN_BYTES;
    size_t per_token = o->logprobs ? 2 * entry * (1 + o->top_logprobs) : 0;
    // a row: keys numbers of at most 14 characters a head and layer
    const size_t lw = o->g.req.model.run.layer == XF_ALL_LAYERS ? x->layers : 1;
    if (o->row_want)
        per_token += 2 * 14 * lw *
                     (o->row_want == XF_WANT_WEIGHTS ? x->heads : 1) *
                     c->decoding.capacity;
    double extra = (double)sizeof *c + (double)EVENT_BYTES +
                   3.0 * (double)o->prompt_len + 65536.0;
    // the attention answer is of the whole sequence, at its longest
    struct request *req = &c->o.g.req;
    const size_t prompt_n = req->model.run.n;
    req->model.run.n = c->decoding.capacity;
    const size_t numbers =
        o->attention && req->compute ? request_model_output(req) : 0;
    if (o->attention)
        extra += (double)response_stream_bytes_model(req);
    req->model.run.n = prompt_n;
    if (numbers > lim->max_output)
        return problem_set(pb, 422, "/attention/return",
                           "the attention asked of the whole sequence (%zu "
                           "tokens at most) holds %zu numbers, more than %zu "
                           "(--max-output): one layer, fewer arrays or fewer "
                           "tokens",
                           c->decoding.capacity, numbers, lim->max_output);
    // echo with logprobs: every prompt position's logits in one pass
    if (o->echo && o->logprobs) {
        const double n = (double)c->decoding.prompt;
        extra += n * (double)entry * (1.0 + (double)o->top_logprobs) * 2.0;
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
    if (o->row_want &&
        (double)lw * (double)(o->row_want == XF_WANT_WEIGHTS ? x->heads : 1) *
                (double)c->decoding.capacity * (double)o->g.max_new >
            (double)lim->max_output)
        return problem_set(pb, 422, "/attention/stream_rows",
                           "each token's row over %zu tokens holds more than "
                           "%zu numbers in all (--max-output): one layer "
                           "(attention.layer), mean weights, or fewer tokens",
                           c->decoding.capacity, lim->max_output);
    double flops = 0;
    if (!decoding_plan(&c->decoding, lim, per_token, extra, &flops, bytes, pb))
        return false;
    c->flops += flops;
    if (lim->max_flops && c->flops > (double)lim->max_flops) {
        problem_set(pb, 422, "",
                    "the completion needs about %.3g GFLOP on the model \"%s\";"
                    " the limit is %.3g GFLOP (--max-flops)",
                    c->flops * 1e-9, m->name, (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    return true;
}

/* The plan, and a chat's default length (the rest of the model's
 * positions) shortened until the work fits --max-flops, as a client that
 * leaves max_tokens out asks for as much as the server gives; a length
 * the client chose is refused instead, naming it. */
static bool plan_within_budget(struct completion *c,
                               const struct request_limits *lim, size_t *bytes,
                               struct problem *pb)
{
    struct generate_request *g = &c->o.g;
    for (;;) {
        c->flops = 0;
        pb->reason = NULL;
        c->decoding.capacity = c->decoding.prompt + g->max_new;
        if (plan_completion(c, lim, bytes, pb))
            return true;
        if (c->o.max_given || g->max_new <= 1 || !pb->reason ||
            strcmp(pb->reason, "compute_budget"))
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

static enum MHD_Result handle_completion(struct exchange *ex,
                                         struct MHD_Connection *conn,
                                         enum openai_route route)
{
    struct http_server *s = ex->srv;
    struct problem pb;
    if (!reply_small_json(ex, conn, OPENAI_BODY_BYTES, "a completion's", &pb))
        return reply_problem(ex, conn, &pb);
    struct completion *c = calloc(1, sizeof *c);
    if (!c) {
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
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
        c->decoding = (struct decoding){.g = &o->g,
                                        .prompt = prompt,
                                        .capacity = prompt + o->g.max_new,
                                        .cancel = &s->cancel,
                                        .row_want = o->row_want,
                                        .skip_special = o->skip_special,
                                        .text = c->decoding.text,
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
    c->job.run = run_completion;
    c->job.refuse = refuse_completion;
    if (!c->o.stream) {
        // the exchange waits for its answer, its reservation with it
        c->ex = ex;
        ex->handed_over = true;
        MHD_suspend_connection(conn);
        if (workers_submit(&s->workers, &c->job))
            return MHD_YES;
        MHD_resume_connection(conn);
        ex->handed_over = false;
        completion_free(c);
        return reply_busy(ex, conn);
    }
    // a stream holds its reservation from now on, past the exchange if
    // the client leaves first
    c->hold = ex->hold;
    ex->hold.held = 0;
    ex->body_reserved = 0;
    c->o.g.req.hold = &c->hold;
    struct MHD_Response *r = NULL;
    c->events = event_stream_new(conn, EVENT_BYTES, (double)s->opt.timeout,
                                 &ex->bytes_out, &r);
    if (!c->events) {
        completion_free(c);
        problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    if (!workers_submit(&s->workers, &c->job)) {
        // never started: the response goes unqueued, the stream with it
        event_stream_finish(c->events, NULL, 0, "", completion_free, c);
        MHD_destroy_response(r);
        return reply_busy(ex, conn);
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
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
