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
 * keys each row may see, for the entropy's normalisation; earlier [n]:
 * the tokens' earlier copies (head_stats_earlier()), for the
 * duplicate-token and induction patterns.
 */
void head_stats(const float *w, size_t n, bool causal, size_t window,
                const size_t *earlier, double out[XF_HEAD_STATS]);

/* For each position i, the last k < i holding the same token as i, or
 * SIZE_MAX: once for a pass, whatever its heads. scratch: [n][2] sizes.
 * earlier: [n]. */
#define HEAD_NONE SIZE_MAX
void head_stats_earlier(const uint32_t *ids, size_t n, size_t *scratch,
                        size_t *earlier);

/* The mean weight each key j receives from the queries that may see it
 * (Gu et al. 2024), into out [n]: a sink away from position 0 shows. */
void head_received(const float *w, size_t n, bool causal, size_t window,
                   double *out);

#endif
