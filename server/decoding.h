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
extern const char *const decode_finish_names[]; /* "eos", "stop", "length" */

struct decoding {
    struct generate_request *g; /* borrowed: the prompt (its encoding,
                                   widened to capacity, takes each new
                                   token), sampling, stops, max_new */
    size_t prompt;              /* the prompt's tokens */
    size_t capacity;            /* prompt + max_new */
    const atomic_bool *cancel;  /* the server's: stop computing */
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
};

/* Bytes of the step's scratch beyond the cache: the logits, the
 * sampler's, and the rows when asked; for the budget. */
size_t decoding_scratch_bytes(const struct decoding *d);

/* Give the prompt's encoding (d->g's) room for every token to come:
 * d->capacity. False when memory runs out. */
bool decoding_widen(struct decoding *d);

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

/* Run the generation d describes, calling its hooks, and fill its
 * outcome. The text is d's to free (buf_free()). */
void decoding_run(struct decoding *d);

#endif
