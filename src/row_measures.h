/*
 * row_measures.h - what a pass measures of its weights a few rows at a
 * time, so that no N x K matrix need exist for them: the head measures
 * (head_stats.h), what each key receives, the induction stripe of a
 * repeated input, and each row's strongest keys. The forward pass hands
 * each row over as its softmax leaves it (before dropout), from whichever
 * thread formed it; every row is handed over once, and what is kept of it
 * does not depend on the thread or the order, so the bits are those of
 * one thread. Internal to the core.
 */
#ifndef ATTN_ROW_MEASURES_H
#define ATTN_ROW_MEASURES_H

#include "attention.h"
#include "mask.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The want bits measured row by row. */
#define ATTN_ROW_MEASURES                                                      \
    (ATTN_WANT_HEAD_STATS | ATTN_WANT_INDUCTION | ATTN_WANT_TOP_K |            \
     ATTN_WANT_POOLED)

struct row_measures {
    const struct attn_config *c;
    double *parts;     /* [B][h][N][ATTN_HEAD_STATS + 1]: each row's
                          part of every measure, then of the
                          induction stripe */
    int64_t *key_sums; /* [threads][B][h][K] what each key receives,
                          in units of 2^-40: integers, whose sum is the
                          same in any order */
    unsigned threads;
    /* [threads][B][h][pool_rows][pool_cols] each member's blocks: the
     * largest weight, or the sum in units of 2^-40 */
    float *block_max;
    int64_t *block_sum;
    size_t *block_cells;   /* [pool_rows][pool_cols] a mean's allowed cells */
    const size_t *earlier; /* [B][N] each token's earlier copy */
    size_t *own;           /* the earlier copies when found here */
};

/* Bytes row_measures_init() and row_measures_finish() allocate (the
 * result's arrays of them included) for resolved config c. */
size_t row_measures_bytes(const struct attn_config *c, unsigned threads);

/* Ready to take the rows of a pass of c on x [B][N][d_model]: the
 * result's arrays of the measures allocated in res. Fails with
 * ATTN_E_NOMEM naming "return". */
attn_status row_measures_init(struct row_measures *rm,
                              const struct attn_config *c, unsigned threads,
                              const float *x, struct attn_result *res,
                              struct attn_error *err);

/* Row i of head a of sequence b, its weights row [K] under the head's
 * mask mv, taken by member of the team. */
void row_measures_take(struct row_measures *rm, struct attn_result *res,
                       unsigned member, size_t b, size_t a, size_t i,
                       const float *row, const struct mask_view *mv);

/* The measures of every head from the rows taken, into res; frees what
 * rm holds. */
void row_measures_finish(struct row_measures *rm, struct attn_result *res);

/* Frees what rm holds (after a failed pass). */
void row_measures_free(struct row_measures *rm);

#endif
