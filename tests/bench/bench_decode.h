/*
 * bench_decode.h - a decoder's token-by-token speed against the memory
 * bound, for bench_decoder: the time to the first token of a prompt
 * (the prompt through a KV cache, its logits, the greedy choice), the
 * time of each token after it, the machine's read bandwidth measured in
 * the same run (bandwidth.h: the best of several read loops), and the
 * bound it sets: every weight is read once a token, so tokens a second can
 * be at most the bandwidth over the weights' bytes.
 */
#ifndef ATTND_BENCH_DECODE_H
#define ATTND_BENCH_DECODE_H

#include "bandwidth.h"
#include "transformer.h"

#include <stdbool.h>
#include <stddef.h>

struct decoding {
    size_t prompt, tokens;  /* the prompt's tokens, the tokens timed */
    double first_token_ms;  /* median over the rounds */
    double token_ms;        /* median over every token of every round */
    double read_gbs;        /* median of the rounds' bandwidths */
    char read_how[128];     /* the loop that reached it in that round */
    double bytes_per_token; /* the matrices at their stored width */
    double bound_tokens_s;  /* read_gbs / bytes_per_token */
    double tokens_s;        /* 1000 / token_ms */
};

/* How many times each read loop runs in a round's measure; the best. */
#define BENCH_READ_TURNS 3

/* Whether attnd's runs take the CPU's bfloat16 dot products
 * (xf_run.bf16_dots, the API's "products": "bfloat16"); false: exact. */
extern bool bench_bf16_dots;

/* rounds rounds of: the bandwidth (bandwidth_measure() on probe, its
 * loops' table printed to report in the first round when report is not
 * NULL), then prompt tokens and tokens more greedy ones on a team of one
 * thread per core. false on a failure. */
bool bench_decoding(const struct xf_model *m, size_t prompt, size_t tokens,
                    int rounds, struct bandwidth_probe *probe, FILE *report,
                    struct decoding *out);

#endif
