/*
 * sampling.h - choosing a decoder's next token from its logits, as
 * transformers' generate() does: greedy, or temperature, then top-k,
 * then top-p, then a draw, here from a keyed stream (attention.h) so that
 * the same seed gives the same tokens on any machine and thread count.
 */
#ifndef ATTN_SAMPLING_H
#define ATTN_SAMPLING_H

#include "attention.h"
#include "transformer.h"

#include <stddef.h>
#include <stdint.h>

struct xf_sampling {
    double temperature; /* 0: greedy; else > 0, the logits divided by it */
    size_t top_k;       /* 0: every token; else the k most probable (with
                           any equal to the k-th) */
    double top_p;       /* 1: every token; else in (0, 1): the most
                           probable tokens whose mass reaches top_p */
    double min_p;       /* 0: every token; else in (0, 1]: only tokens at
                           least min_p times as probable as the most
                           probable (vLLM's extension, transformers'
                           MinPLogitsWarper) */
    uint64_t seed;      /* the draws' stream */
};

#define XF_MIN_TEMPERATURE 1e-6 /* below it (but 0), scores overflow */
#define XF_MAX_TEMPERATURE 100.0

/* The limits of a request's sampling, checked: temperature 0 or within
 * the two above, top_p in (0, 1], min_p in [0, 1]; fails naming
 * "temperature", "top_p" or "min_p". */
attn_status xf_sampling_check(const struct xf_sampling *s,
                              struct attn_error *err);

/*
 * The token after logits [vocab] at generation step step (0 for the
 * first new token): with temperature 0 the largest logit (the lowest id
 * among equals, as torch.argmax); else the draw step of the seed's stream
 * from softmax(logits / temperature) cut to top_k, top_p and min_p as
 * transformers' TopK-, TopP- and MinPLogitsWarper cut it, in that order.
 * scratch: [vocab]. A logit that is not finite is never chosen unless all are.
 */
uint32_t xf_sample(const float *logits, size_t vocab,
                   const struct xf_sampling *s, uint64_t step,
                   struct xf_candidate *scratch);

/*
 * The n most probable tokens of softmax(logits) (the model's own
 * distribution, whatever the sampling), most probable first, the lowest
 * id among equals, into top [n] with their probabilities; returns how
 * many (n, or vocab when that is fewer).
 */
size_t xf_top_tokens(const float *logits, size_t vocab, size_t n,
                     struct xf_candidate *top);

/*
 * Log-probabilities under softmax(logits), the model's own distribution,
 * computed in double: the n most probable tokens (most probable first,
 * the lowest id among equals) into top [n] with their log-probabilities
 * as scores; returns how many (n, or the finite logits when fewer). When
 * id_logprob is not NULL, the log-probability of token id goes there
 * (-INFINITY for a logit that is not finite).
 */
size_t xf_top_logprobs(const float *logits, size_t vocab, size_t n,
                       struct xf_candidate *top, uint32_t id,
                       double *id_logprob);

#endif
