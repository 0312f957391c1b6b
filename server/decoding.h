/*
 * decoding.h - a decoder's generation, token by token through a KV
 * cache: the loop /generate and the OpenAI routes share. The prompt
 * starts the cache and each token after it costs one row; a token is
 * chosen by the request's sampling, and the generation ends at an EOS
 * id, at a stop string, or at max_new tokens. What each route makes of a
 * token (an event, a chunk, an entry of its answer) is its hook's.
 */
#ifndef ATTND_DECODING_H
#define ATTND_DECODING_H

#include "buf.h"
#include "generate_request.h"
#include "workers.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* One new token, as the hook sees it. */
struct decode_step {
    size_t index; /* 0 for the first new token */
    uint32_t id;
    const float *logits; /* [vocab]: the scores it was chosen from */
    /* with decoding.row_want: the attention of the position that chose
     * it (the one before it) over every position up to it,
     * [Lw][heads][keys] (weights) or [Lw][keys] (mean weights), Lw the
     * request's layers; NULL otherwise */
    const float *row;
    size_t keys;
    size_t text_before; /* bytes of the generated text before it */
};

enum decode_finish { DECODE_EOS, DECODE_STOP, DECODE_LENGTH };

/* Does text[0, len) hold one of g's stop strings that text[before, len)
 * (what came after before) helped complete? *at: where the earliest
 * such one begins, the end of the text the generation leaves. */
bool decoding_find_stop(const struct generate_request *g, const char *text,
                        size_t len, size_t before, size_t *at);
extern const char *const decode_finish_names[]; /* "eos", "stop", "length" */

struct batcher;
struct workers;

struct decoding {
    struct generate_request *g; /* borrowed: the prompt (its encoding,
                                   widened to capacity, takes each new
                                   token), sampling, stops, max_new */
    size_t prompt;              /* the prompt's tokens */
    size_t capacity;            /* prompt + max_new */
    const atomic_bool *cancel;  /* the server's: stop computing */
    /* threads a prompt that runs as its own pass (one that does not go
     * through the steps: DECODE_STEP_PROMPT) takes when nothing else
     * computes (no other job on the pool, no other generation in
     * flight), its memory reserved for as many; one otherwise, and 0
     * means one: a lone client's first token comes sooner, and under
     * load each prompt keeps to its core */
    unsigned prompt_team;
    /* XF_WANT_WEIGHTS or XF_WANT_MEAN_WEIGHTS for each token's row (of
     * g->req.model.run.layer's layers), or 0 */
    unsigned row_want;
    /* special tokens (an EOS, a template's markers) are left out of the
     * text, and of what a stop string is looked for in, as vLLM's
     * skip_special_tokens leaves them out */
    bool skip_special;
    /* the generated text, as the tokenizer decodes each token; a stop
     * string is searched for in it */
    struct buf text;
    /* a new token: false stops the generation (the client is gone) */
    bool (*token)(void *arg, const struct decode_step *step);
    /* is the client gone? asked before each token's work */
    bool (*gone)(void *arg);
    /* NULL, or: can the client take the next token's writing now? While
     * it cannot, the generation sits out the batch's steps */
    bool (*ready)(void *arg);
    /* the end, whatever the outcome, on the compute pool: the route's
     * answer; the generation's memory but the text is freed by then */
    void (*ended)(void *arg);
    void *arg;
    /* the field of how many tokens to make, which a refusal of the
     * length names ("/max_new_tokens", "/max_tokens") */
    const char *length_pointer;
    /* the outcome */
    enum decode_finish why;
    bool abandoned; /* the client went away */
    size_t stop_at; /* DECODE_STOP: where in text the stop string
                       begins */
    attn_status st; /* of the computation */
    struct attn_error err;
    /* between its steps (decoding.c's, and batcher.c's list) */
    struct {
        struct xf_cache cache;
        float *logits;             /* [vocab] */
        struct xf_candidate *sort; /* [vocab] the sampler's */
        float *row;                /* the token's rows, with row_want */
        size_t made;               /* new tokens so far */
        struct timespec last;      /* when the last one was made */
        struct workers *workers;   /* where ended() runs */
        struct job end_job;
        struct decoding *next; /* the batcher's list of joiners */
    } run;
};

/* Bytes of the step's scratch beyond the cache: the logits, the
 * sampler's, and the rows when asked; for the budget. */
size_t decoding_scratch_bytes(const struct decoding *d);

/* Give the prompt's encoding (d->g's) room for every token to come:
 * d->capacity. False when memory runs out. */
bool decoding_widen(struct decoding *d);

/*
 * The answer of d's finished sequence, at its longest (d->capacity
 * tokens), when the request asks for arrays of it: their numbers within
 * --max-output and its measures' text within an answer's, else a 422 in
 * pb naming the field under prefix under ("" or "/attention"). Into
 * *stream_bytes what streaming that answer holds.
 */
bool decoding_answer_fits(const struct decoding *d,
                          const struct request_limits *lim, const char *under,
                          double *stream_bytes, struct problem *pb);

/*
 * The costs of d's whole generation, from the request alone, before
 * anything is computed: its work into *flops (refused past
 * --max-flops), and into *bytes the cache for every position, the
 * prompt's pass, a token's, the one over the finished sequence (at its
 * longest) when the request asks for anything of it, what the route
 * writes of each token (per_token_bytes) and the rest of its answer
 * (extra_bytes). False with pb naming what is too much.
 */
bool decoding_plan(const struct decoding *d, const struct request_limits *lim,
                   size_t per_token_bytes, double extra_bytes, double *flops,
                   size_t *bytes, struct problem *pb);

/*
 * Start the generation d describes, on a worker of workers, holding a
 * slot of b (batcher_admit()): its scratch and cache, and for a prompt
 * that does not go through the steps (DECODE_STEP_PROMPT) its pass,
 * which starts the cache and chooses the first token; then the
 * generation joins b's steps, or, ended already, gives its slot back.
 * Either way d->ended() follows once, with the outcome in d. The text is
 * d's to free (buf_free()).
 */
void decoding_start(struct decoding *d, struct batcher *b,
                    struct workers *workers);

/* The same generation alone on this thread, each token after its cache
 * (the bits it gets in a batch), the hooks called but ended(): for the
 * tests and tools that want a generation without a server. */
void decoding_run(struct decoding *d);

/* ----------------------------------- a generation's part in a step
 * (batcher.c) */

enum decode_turn {
    DECODE_TAKES, /* its next token is to be made */
    DECODE_WAITS, /* its client is behind: not this step */
    DECODE_ENDED  /* it has ended (cancelled, or its client gone) */
};

/* Before a step: what d does in it. */
enum decode_turn decoding_turn(struct decoding *d);

/* Whether d's next token runs its whole sequence again rather than
 * after its cache (a longrope model past its original length). */
bool decoding_outgrown(const struct decoding *d);

/*
 * Prompts of at most this many tokens (and at most the core's
 * xf_step_tokens() for the model: fewer on float32 and block-quantized
 * weights) go
 * through the batch's steps, a row for each token (xf_seq.tokens),
 * beside the other sequences' rows: one pass over the weights serves
 * every prompt that arrived together and every generation decoding. A
 * step takes at most this many rows of prompts; a prompt that finds them
 * taken brings the rest of its tokens to the next step. Its bits are
 * those of its tokens one a step, so they are the same alone, beside
 * others, or cut between steps. A prompt with edits, one longer, or one
 * reaching a longrope model's long rotary runs as its own pass on the
 * compute pool.
 */
enum { DECODE_STEP_PROMPT = 128 };

/* Tokens of d's sequence that its cache does not hold yet: its prompt's
 * (or what is left of it) before its first token, then 1. */
size_t decoding_pending(const struct decoding *d);

/* Is d's cache still short of its prompt (its next tokens the prompt's)? */
bool decoding_in_prompt(const struct decoding *d);

/* The run of a step over the n sequences seqs (decoding_seq()'s), their
 * tokens in ids, on threads: their logits alone, bfloat16 products or
 * not (all of them the same way). */
struct xf_run decoding_step_run(const struct xf_seq *seqs, size_t n,
                                const uint32_t *ids, unsigned threads,
                                bool bf16_dots);

/* d's sequence in a step: its cache, edits and rows, and its tokens
 * (at most most, 1 or more) into ids. Returns how many it brings. */
size_t decoding_seq(struct decoding *d, struct xf_seq *seq, uint32_t *ids,
                    size_t most);

/* d's token from its logits [vocab] after a step: chosen, written, and
 * checked against the stops. false when d has ended. */
bool decoding_take(struct decoding *d, const float *logits);

/* d's next token run alone on threads (a sequence run again whole, or a
 * step that failed, run again one by one to find whose it was), after
 * what is left of its prompt, then taken. false when d has ended (the
 * outcome says how). */
bool decoding_alone(struct decoding *d, unsigned threads);

/* d fails as st and err say (a step that failed). */
void decoding_fail(struct decoding *d, attn_status st,
                   const struct attn_error *err);

/* d has ended: its cache and scratch freed, and d->ended() handed to the
 * compute pool (run here when the pool is closed). */
void decoding_end(struct decoding *d);

#endif
