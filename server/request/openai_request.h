/*
 * openai_request.h - a POST /v1/completions or /v1/chat/completions
 * body, decoded and checked: the prompt (a text, token ids, or a
 * conversation rendered through the model's chat template) on the model
 * as /generate takes it, OpenAI's sampling and output fields, vLLM's
 * extensions (top_k, min_p, chat_template_kwargs, add_generation_prompt,
 * continue_final_message, add_special_tokens), and attnd's "attention":
 * /attention's fields that choose what the answer carries of the whole
 * sequence.
 *
 * Fields OpenAI defines that attnd does not implement are taken at their
 * no-op values (a frequency_penalty of 0, n of 1) and refused otherwise,
 * naming them; a field OpenAI does not define is refused, as OpenAI
 * refuses it.
 */
#ifndef ATTND_OPENAI_REQUEST_H
#define ATTND_OPENAI_REQUEST_H

#include "generate_request.h"

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum openai_route { OPENAI_COMPLETIONS, OPENAI_CHAT };

#define OPENAI_MAX_LOGPROBS 20

struct openai_request {
    enum openai_route route;
    struct generate_request g; /* the prompt on the model (its encoding,
                                  and what "attention" asks of the whole
                                  sequence), sampling, stops, max_new */
    bool stream;
    bool include_usage;  /* stream_options.include_usage */
    bool echo;           /* completions: the prompt before the text */
    bool skip_special;   /* special tokens left out of the text (vLLM's
                            skip_special_tokens, default true) */
    bool max_completion; /* the length came as max_completion_tokens */
    bool max_given;      /* max_tokens (or max_completion_tokens) sent: else a
                            chat's default may shrink to what --max-flops
                            affords */
    bool logprobs;       /* asked for */
    size_t top_logprobs; /* 0 to OPENAI_MAX_LOGPROBS alternatives */
    bool attention;      /* "attention" given: the answer carries it */
    unsigned row_want;   /* attention.stream_rows: XF_WANT_WEIGHTS or
                            XF_WANT_MEAN_WEIGHTS for each token's row */
    /* the prompt's text: a chat's render, a text prompt, or the text
     * of the ids given (what echo repeats); owned */
    char *prompt_text;
    size_t prompt_len;
};

/*
 * Decode a JSON body of len bytes for route. now is the request's time
 * (a chat template's strftime_now). The prompt is encoded against what
 * lim allows; what the request holds is reserved in hold. On failure
 * fills pb (a JSON pointer naming the field; 404 for a model not
 * loaded) and returns false; openai_request_free() releases it either
 * way.
 */
bool openai_parse(struct openai_request *o, enum openai_route route,
                  const char *body, size_t len,
                  const struct request_limits *lim, struct budget_hold *hold,
                  time_t now, struct problem *pb);
void openai_request_free(struct openai_request *o);

#endif
