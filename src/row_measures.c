/*
 * row_measures.c - measures of a pass's weights taken a row at a time
 * (row_measures.h).
 */
#include "row_measures.h"
#include "checked.h"
#include "error.h"
#include "head_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A row's parts: the head measures', then the induction stripe's. */
enum { ROW_PARTS = ATTN_HEAD_STATS + 1, STRIPE = ATTN_HEAD_STATS };

/* What a key receives is summed as integers of 2^-40: a weight rounds by
 * at most 2^-41, and a million rows cannot pass 2^60. */
#define KEY_UNIT 0x1p40

static bool wants(const struct attn_config *c, unsigned bit)
{
    return (c->want & bit) != 0;
}

/* Each token's earlier copy is found here: self-attention measuring the
 * patterns, with no copies from the caller. */
static bool finds_earlier(const struct attn_config *c)
{
    return wants(c, ATTN_WANT_HEAD_STATS) && !c->cross && !c->earlier &&
           !c->earlier_given;
}

size_t row_measures_bytes(const struct attn_config *c, unsigned threads)
{
    const size_t bh = c->batch * c->heads, n = c->n_query, k = c->n_keys;
    size_t total = 0, part;
    if (c->want & (ATTN_WANT_HEAD_STATS | ATTN_WANT_INDUCTION)) {
        if (!size_mul3(bh, n, ROW_PARTS * sizeof(double), &part) ||
            !size_add_to(&total, part))
            return SIZE_MAX;
    }
    if (wants(c, ATTN_WANT_HEAD_STATS)) {
        // the sums per member, and the result's measures and key means
        if (!size_mul3(threads ? threads : 1, bh, k * sizeof(int64_t), &part) ||
            !size_add_to(&total, part) ||
            !size_mul3(bh, ATTN_HEAD_STATS + k, sizeof(double), &part) ||
            !size_add_to(&total, part))
            return SIZE_MAX;
    }
    if (finds_earlier(c) &&
        (!size_mul3(c->batch + 2, n, sizeof(size_t), &part) ||
         !size_add_to(&total, part)))
        return SIZE_MAX;
    if (wants(c, ATTN_WANT_INDUCTION) &&
        !size_add_to(&total, bh * sizeof(double)))
        return SIZE_MAX;
    if (wants(c, ATTN_WANT_TOP_K)) {
        if (!size_mul3(bh * n, c->top_k, sizeof(uint32_t) + sizeof(float),
                       &part) ||
            !size_add_to(&total, part) ||
            !size_add_to(&total, bh * n * sizeof(uint32_t)))
            return SIZE_MAX;
    }
    if (wants(c, ATTN_WANT_POOLED)) {
        // each member's blocks, the result's, and a mean's cell counts
        size_t blocks;
        const size_t member = c->pool_mean ? sizeof(int64_t) : sizeof(float);
        if (!size_mul3(bh, c->pool_rows, c->pool_cols, &blocks) ||
            !size_mul3(threads ? threads : 1, blocks, member, &part) ||
            !size_add_to(&total, part) ||
            !size_add_to(&total, blocks * sizeof(float)) ||
            (c->pool_mean && !size_add_to(&total, c->pool_rows * c->pool_cols *
                                                      sizeof(size_t))))
            return SIZE_MAX;
    }
    return total;
}

void row_measures_free(struct row_measures *rm)
{
    free(rm->block_max);
    free(rm->block_sum);
    free(rm->block_cells);
    free(rm->parts);
    free(rm->key_sums);
    free(rm->own);
    memset(rm, 0, sizeof *rm);
}

attn_status row_measures_init(struct row_measures *rm,
                              const struct attn_config *c, unsigned threads,
                              const float *x, struct attn_result *res,
                              struct attn_error *err)
{
    memset(rm, 0, sizeof *rm);
    rm->c = c;
    rm->threads = threads ? threads : 1;
    const size_t bh = c->batch * c->heads, n = c->n_query, k = c->n_keys;
    bool ok = true;
    if (c->want & (ATTN_WANT_HEAD_STATS | ATTN_WANT_INDUCTION))
        ok = (rm->parts = calloc(bh * n, ROW_PARTS * sizeof *rm->parts));
    if (ok && wants(c, ATTN_WANT_HEAD_STATS))
        ok = (rm->key_sums =
                  calloc(rm->threads * bh * k, sizeof *rm->key_sums)) &&
             (res->measures.head_stats = malloc(
                  bh * ATTN_HEAD_STATS * sizeof *res->measures.head_stats)) &&
             (res->measures.key_received =
                  malloc(bh * k * sizeof *res->measures.key_received));
    if (ok && wants(c, ATTN_WANT_INDUCTION))
        ok = (res->measures.induction =
                  malloc(bh * sizeof *res->measures.induction));
    if (ok && wants(c, ATTN_WANT_TOP_K))
        // zeroed: a row with fewer keys leaves the rest 0
        ok = (res->measures.top_keys =
                  calloc(bh * n * c->top_k, sizeof *res->measures.top_keys)) &&
             (res->measures.top_weights = calloc(
                  bh * n * c->top_k, sizeof *res->measures.top_weights)) &&
             (res->measures.top_count =
                  calloc(bh * n, sizeof *res->measures.top_count));
    if (ok && wants(c, ATTN_WANT_POOLED)) {
        const size_t blocks = bh * c->pool_rows * c->pool_cols;
        ok = (res->measures.pooled =
                  malloc(blocks * sizeof *res->measures.pooled)) &&
             (c->pool_mean
                  ? (rm->block_sum = calloc(rm->threads * blocks,
                                            sizeof *rm->block_sum)) != NULL &&
                        (rm->block_cells = malloc(c->pool_rows * c->pool_cols *
                                                  sizeof *rm->block_cells)) !=
                            NULL
                  : (rm->block_max = calloc(rm->threads * blocks,
                                            sizeof *rm->block_max)) != NULL);
    }
    if (ok && finds_earlier(c)) {
        // which earlier token each one repeats: the same bits of x
        ok = (rm->own = malloc((c->batch + 2) * n * sizeof *rm->own));
        for (size_t s = 0; ok && s < c->batch; s++)
            head_stats_earlier_rows(x + s * n * c->d_model, n, c->d_model,
                                    rm->own + c->batch * n, rm->own + s * n);
    }
    if (!ok) {
        row_measures_free(rm);
        return attn_fail(err, ATTN_E_NOMEM, "return",
                         "out of memory for the measures of the weights");
    }
    rm->earlier = c->earlier ? c->earlier : rm->own;
    return ATTN_OK;
}

/* Is (w, j) a weaker entry than (v, k): a smaller weight, or an equal one
 * at a later key? */
static bool weaker(float w, uint32_t j, float v, uint32_t k)
{
    return w < v || (w == v && j > k);
}

/* The row's top keys by weight (the earlier key first among equals), of
 * those it gives more than 0, strongest first: a min-heap of the best so
 * far, then sorted. Returns how many. */
static uint32_t top_keys(const float *row, size_t m, size_t k, uint32_t *keys,
                         float *weights)
{
    size_t count = 0;
    for (size_t j = 0; j < m; j++) {
        const float w = row[j];
        if (!(w > 0))
            continue;
        size_t at;
        if (count < k) {
            at = count++;
            // sift up
            while (at > 0) {
                const size_t up = (at - 1) / 2;
                if (!weaker(w, (uint32_t)j, weights[up], keys[up]))
                    break;
                keys[at] = keys[up];
                weights[at] = weights[up];
                at = up;
            }
        } else {
            if (!weaker(weights[0], keys[0], w, (uint32_t)j))
                continue; /* no better than the weakest kept */
            // replace the weakest, sift down
            at = 0;
            for (;;) {
                size_t down = 2 * at + 1;
                if (down >= count)
                    break;
                if (down + 1 < count &&
                    weaker(weights[down + 1], keys[down + 1], weights[down],
                           keys[down]))
                    down++;
                if (!weaker(weights[down], keys[down], w, (uint32_t)j))
                    break;
                keys[at] = keys[down];
                weights[at] = weights[down];
                at = down;
            }
        }
        keys[at] = (uint32_t)j;
        weights[at] = w;
    }
    // strongest first: an insertion sort of at most k entries
    for (size_t e = 1; e < count; e++) {
        const uint32_t kj = keys[e];
        const float wj = weights[e];
        size_t at = e;
        while (at > 0 && weaker(weights[at - 1], keys[at - 1], wj, kj)) {
            keys[at] = keys[at - 1];
            weights[at] = weights[at - 1];
            at--;
        }
        keys[at] = kj;
        weights[at] = wj;
    }
    return (uint32_t)count;
}

void row_measures_take(struct row_measures *rm, struct attn_result *res,
                       unsigned member, size_t b, size_t a, size_t i,
                       const float *row, const struct mask_view *mv)
{
    const struct attn_config *c = rm->c;
    const size_t n = c->n_query, m = c->n_keys;
    const size_t head = b * c->heads + a;
    if (rm->parts) {
        double *part = rm->parts + (head * n + i) * ROW_PARTS;
        if (wants(c, ATTN_WANT_HEAD_STATS)) {
            const struct head_view hv = {
                .n = n,
                .keys = m,
                .positions = c->cross ? 0 : c->n_ctx,
                .mask = mv,
                .earlier = c->cross ? NULL : rm->earlier + b * n};
            head_stats_row(row, &hv, i, part);
            int64_t *sums = rm->key_sums +
                            ((size_t)member * c->batch * c->heads + head) * m;
            for (size_t j = 0; j < m; j++)
                if (row[j] > 0)
                    sums[j] += (int64_t)llrint((double)row[j] * KEY_UNIT);
        }
        if (wants(c, ATTN_WANT_INDUCTION))
            part[STRIPE] =
                head_stripe_row(row, i, c->repeat_start, c->repeat_period);
    }
    const uint32_t block_row = c->pool_row ? c->pool_row[i] : ATTN_POOL_NONE;
    if (wants(c, ATTN_WANT_POOLED) && block_row != ATTN_POOL_NONE) {
        // the row's cells into its blocks: the largest, or the sum
        const size_t at =
            (((size_t)member * c->batch * c->heads + head) * c->pool_rows +
             block_row) *
            c->pool_cols;
        for (size_t j = 0; j < m; j++) {
            const uint32_t col = c->pool_col[j];
            if (col == ATTN_POOL_NONE || !(row[j] > 0))
                continue;
            if (rm->block_sum)
                rm->block_sum[at + col] +=
                    (int64_t)llrint((double)row[j] * KEY_UNIT);
            else if (row[j] > rm->block_max[at + col])
                rm->block_max[at + col] = row[j];
        }
    }
    if (wants(c, ATTN_WANT_TOP_K)) {
        const size_t at = head * n + i;
        res->measures.top_count[at] =
            top_keys(row, m, c->top_k, res->measures.top_keys + at * c->top_k,
                     res->measures.top_weights + at * c->top_k);
    }
}

/* How many cells of each block the masks of head mv allow: counts
 * [pool_rows][pool_cols], zeroed here. */
static void block_cells(const struct attn_config *c, const struct mask_view *mv,
                        size_t *counts)
{
    memset(counts, 0, c->pool_rows * c->pool_cols * sizeof *counts);
    for (size_t i = 0; i < c->n_query; i++) {
        const uint32_t r = c->pool_row[i];
        if (r == ATTN_POOL_NONE)
            continue;
        size_t *row = counts + (size_t)r * c->pool_cols;
        for (size_t j = 0; j < c->n_keys; j++)
            if (c->pool_col[j] != ATTN_POOL_NONE && mask_key_visible(mv, i, j))
                row[c->pool_col[j]]++;
    }
}

/* Every head's blocks: the members' largest, or their sums over the
 * allowed cells' counts. */
static void finish_pooled(struct row_measures *rm, struct attn_result *res)
{
    const struct attn_config *c = rm->c;
    const size_t bh = c->batch * c->heads;
    const size_t blocks = c->pool_rows * c->pool_cols;
    size_t *counts = rm->block_cells; /* a mean's, allocated with the rest */
    bool counted = false;
    for (size_t head = 0; head < bh; head++) {
        const struct mask_view seq = mask_view_of(c, head / c->heads);
        const struct mask_view mv = mask_view_head(&seq, head % c->heads);
        // the same for every head when no mask array tells them apart
        if (counts && (!counted || mask_has_arrays(&mv))) {
            block_cells(c, &mv, counts);
            counted = true;
        }
        float *out = res->measures.pooled + head * blocks;
        for (size_t e = 0; e < blocks; e++) {
            if (counts) {
                int64_t sum = 0;
                for (unsigned t = 0; t < rm->threads; t++)
                    sum += rm->block_sum[(t * bh + head) * blocks + e];
                out[e] =
                    counts[e]
                        ? (float)((double)sum / KEY_UNIT / (double)counts[e])
                        : 0.0f;
            } else {
                float top = 0;
                for (unsigned t = 0; t < rm->threads; t++) {
                    const float v = rm->block_max[(t * bh + head) * blocks + e];
                    top = v > top ? v : top;
                }
                out[e] = top;
            }
        }
    }
}

void row_measures_finish(struct row_measures *rm, struct attn_result *res)
{
    if (wants(rm->c, ATTN_WANT_POOLED))
        finish_pooled(rm, res);
    const struct attn_config *c = rm->c;
    const size_t n = c->n_query, m = c->n_keys, bh = c->batch * c->heads;
    for (size_t head = 0; head < bh && rm->parts; head++) {
        const double *parts = rm->parts + head * n * ROW_PARTS;
        if (wants(c, ATTN_WANT_HEAD_STATS)) {
            struct head_sums sums = {0};
            for (size_t i = 0; i < n; i++)
                head_sums_add(&sums, parts + i * ROW_PARTS);
            head_sums_finish(&sums, n, c->cross ? 0 : c->n_ctx,
                             res->measures.head_stats + head * ATTN_HEAD_STATS);
            const struct mask_view seq = mask_view_of(c, head / c->heads);
            const struct mask_view mv = mask_view_head(&seq, head % c->heads);
            for (size_t j = 0; j < m; j++) {
                int64_t sum = 0;
                for (unsigned t = 0; t < rm->threads; t++)
                    sum += rm->key_sums[(t * bh + head) * m + j];
                const size_t seen = mask_queries_seeing(&mv, c->n_query, j);
                res->measures.key_received[head * m + j] =
                    seen ? (double)sum / KEY_UNIT / (double)seen : 0;
            }
        }
        if (wants(c, ATTN_WANT_INDUCTION)) {
            double sum = 0;
            for (size_t i = c->repeat_start + c->repeat_period;
                 i < c->repeat_start + 2 * c->repeat_period; i++)
                sum += parts[i * ROW_PARTS + STRIPE];
            res->measures.induction[head] = sum / (double)c->repeat_period;
        }
    }
    row_measures_free(rm);
}
