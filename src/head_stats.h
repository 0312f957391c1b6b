/*
 * head_stats.h - per-head measures of one head's attention weights,
 * computed in double over the float32 weights: what finds the heads that
 * matter among hundreds (docs/math.md gives each formula and its source).
 * Internal to the core; attention.h and transformer.h return them.
 */
#ifndef ATTN_HEAD_STATS_H
#define ATTN_HEAD_STATS_H

#include "attention.h"
#include "mask.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One head's weights as the measures read them: w [n][keys], row i the
 * query at position i. The first `positions` keys are at positions 0, 1,
 * ... of the same sequence (self-attention; keys after them, bias_k's or
 * the zero key, have none); 0 for cross-attention, whose keys share no
 * positions with the queries, so the positional measures are NaN.
 * mask: which keys each row may see, for the entropy's normalisation and
 * what each key receives. earlier [n]: each token's earlier copy
 * (head_stats_earlier()), for the duplicate-token and induction patterns;
 * unread without positions.
 */
struct head_view {
    size_t n, keys, positions;
    const struct mask_view *mask;
    const size_t *earlier;
};

/* The measures of w into out[ATTN_HEAD_STATS]: each row's part
 * (head_stats_row()), summed in row order (head_sums_add()) and averaged
 * (head_sums_finish()), which a pass that sees a few rows at a time does
 * in the same order. */
void head_stats(const float *w, const struct head_view *v,
                double out[ATTN_HEAD_STATS]);

/* Row i's part of each measure: its normalised entropy (NaN for a row
 * that sees fewer than two keys), and its terms of the others. */
void head_stats_row(const float *row, const struct head_view *v, size_t i,
                    double part[ATTN_HEAD_STATS]);

/* Rows' parts summed, then the measures of n rows. */
struct head_sums {
    double sum[ATTN_HEAD_STATS];
    size_t entropy_rows;
};
void head_sums_add(struct head_sums *s, const double part[ATTN_HEAD_STATS]);
void head_sums_finish(const struct head_sums *s, size_t n, size_t positions,
                      double out[ATTN_HEAD_STATS]);

/* The mean weight each key j receives from the queries that may see it
 * (Gu et al. 2024), into out [keys]: a sink away from position 0 shows.
 * 0 for a key no query may see. */
void head_received(const float *w, const struct head_view *v, double *out);

/* Row i's part of the induction stripe of a repeated input (its tokens
 * from start on are period tokens, then the same again): in the second
 * copy, its weight on the token after its earlier copy, row[i - period +
 * 1]; elsewhere 0. The stripe is the sum of the parts over period. */
double head_stripe_row(const float *row, size_t i, size_t start, size_t period);

/* For each position i, the last k < i holding the same token as i, or
 * HEAD_NONE: once for a pass, whatever its heads. scratch: [n][2] sizes.
 * earlier: [n]. */
#define HEAD_NONE SIZE_MAX
void head_stats_earlier(const uint32_t *ids, size_t n, size_t *scratch,
                        size_t *earlier);

/* The same when a token is a row of rows [n][width]: two positions hold
 * the same token when their rows are the same bits. scratch: [n][2]
 * sizes. */
void head_stats_earlier_rows(const float *rows, size_t n, size_t width,
                             size_t *scratch, size_t *earlier);

#endif
