/*
 * head_stats.h - per-head measures of one head's attention weights,
 * computed in double over the float32 weights: what finds the heads that
 * matter among hundreds (docs/math.md gives each formula and its source).
 * Internal to the core; transformer.h returns them.
 */
#ifndef ATTN_HEAD_STATS_H
#define ATTN_HEAD_STATS_H

#include "transformer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The measures of w [n][n] (a self-attention head's weights, row i the
 * query at position i) into out[XF_HEAD_STATS]. causal/window: which
 * keys each row may see, for the entropy's normalisation; ids [n]: the
 * tokens, for the duplicate-token and induction patterns.
 */
void head_stats(const float *w, size_t n, bool causal, size_t window,
                const uint32_t *ids, double out[XF_HEAD_STATS]);

/* The mean weight each key j receives from the queries that may see it
 * (Gu et al. 2024), into out [n]: a sink away from position 0 shows. */
void head_received(const float *w, size_t n, bool causal, size_t window,
                   double *out);

#endif
