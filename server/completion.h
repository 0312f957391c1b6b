/*
 * completion.h - one OpenAI completion or chat completion in flight, as
 * the OpenAI routes share it: the request, /generate's loop
 * (decoding.c) around it, and what is written of it (completion_json.c:
 * the answer, its chunks, the log-probabilities in both layouts) and how
 * it runs on the compute pool (completion_run.c). openai_route.c plans
 * it, reserves it and hands it over.
 */
#ifndef ATTND_COMPLETION_H
#define ATTND_COMPLETION_H

#include "buf.h"
#include "decoding.h"
#include "event_stream.h"
#include "exchange.h"
#include "models.h"
#include "openai_request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A token's bytes at most, as a logprob entry shows them. */
#define TOKEN_BYTES 256

struct completion {
    struct job job;
    struct http_server *srv;
    struct openai_request o;
    struct decoding decoding;
    /* whole, or waiting for its place in the batch: the exchange,
     * suspended, waiting for its answer */
    struct exchange *ex;
    struct MHD_Connection *conn;
    int fd; /* its socket, watched while it waits for its place */
    /* streamed: the chunks, and the reservation taken over from the
     * exchange (a stream outlives it when the client leaves) */
    struct event_stream *events;
    struct budget_hold hold;
    struct xf_result result; /* the whole sequence's, for "attention" */
    double flops;
    size_t ring; /* streamed: the bytes of chunks a client may leave
                    unread */
    bool scored;                 /* the prompt's scoring, when asked, did
                                    not fail ... */
    struct problem score_problem; /* ... or how it failed */
    struct batch_ticket ticket;   /* its place in the line for a slot */
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

static inline const struct model *completion_model(const struct completion *c)
{
    return c->o.g.req.model.entry->model;
}

static inline bool completion_is_chat(const struct completion *c)
{
    return c->o.route == OPENAI_CHAT;
}

/* Release c and all it holds (an event stream's done callback). */
void completion_free(void *arg);

/* ---------------------------------------------- completion_json.c */

/* Characters in UTF-8 bytes: the bytes that do not continue one. */
size_t completion_characters(const char *s, size_t len);

/* How much of the generated text may go out now: not a stop string nor
 * what follows it, not the start of one that the next token may
 * complete, not half a character; never less than sent. */
size_t completion_sendable(const struct completion *c);

/* The text's end once finished: before a stop string that ended it. */
size_t completion_final_end(const struct completion *c);
const char *completion_finish_reason(const struct decoding *d);

/* text[from, to) as a JSON string. */
bool completion_text(struct buf *b, const char *text, size_t from, size_t to);

/* An answer's or a chunk's head, {"id", "object", "created", "model",
 * (its object named); "usage": {...} of the tokens so far. */
bool completion_head(struct buf *b, const struct completion *c,
                     const char *object);
bool completion_usage(struct buf *b, const struct completion *c);

/* One token's log-probabilities in chat's layout: {token, logprob,
 * bytes, top_logprobs: [{token, logprob, bytes}]}. */
bool completion_chat_logprob(struct buf *b, const struct model *m, uint32_t id,
                             double logprob, const struct xf_candidate *top,
                             size_t n_top);

/* The legacy layout's entries of one token, each appended to its array
 * in c (tokens, token_logprobs, top_logprobs, text_offset); has false:
 * a first token, which has none. Then the "logprobs" object of them. */
bool completion_legacy_logprob(struct completion *c, uint32_t id, bool has,
                               double logprob, const struct xf_candidate *top,
                               size_t n_top, size_t offset);
bool completion_legacy_logprobs(struct buf *b, const struct completion *c);

/* A token's attention row as a chunk carries it. */
bool completion_row(struct buf *b, const struct completion *c,
                    const struct decode_step *step);

/* A whole answer's "choices": [...], its text after the echoed prompt. */
bool completion_choice(struct buf *b, const struct completion *c);

/* ----------------------------------------------- completion_run.c */

/* The most bytes a streamed chunk of one token can take, its attention
 * row of keys entries included: what a client must have room for before
 * the batch makes its next token (the ring holds two of the largest). */
size_t completion_chunk_bytes(const struct completion *c, size_t keys);

/* decoding's hooks: each new token, whether its client is gone, and
 * whether it can take the next chunk now. */
bool completion_token(void *arg, const struct decode_step *step);
bool completion_gone(void *arg);
bool completion_ready(void *arg);

/* The compute pool's turn (struct job's run), and its refusal when the
 * pool closed first: the generation, then its answer or its chunks'
 * end. A whole answer is prepared on its exchange and the connection
 * resumed. */
void completion_run(struct job *job, double waited);
void completion_refuse(struct job *job);

#endif
