/*
 * head_stats.c - per-head measures of attention weights (head_stats.h).
 */
#include "head_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *attn_head_stat_name(int stat)
{
    static const char *const names[ATTN_HEAD_STATS] = {
        "entropy",   "sink", "previous_token", "duplicate_token",
        "induction", "self", "distance"};
    return stat >= 0 && stat < ATTN_HEAD_STATS ? names[stat] : NULL;
}

/* The context keys row i may see when the mask is only causal and a
 * window: [*lo, *hi). */
static void row_range(const struct mask_view *mv, size_t i, size_t *lo,
                      size_t *hi)
{
    *lo = 0;
    *hi = mv->n_ctx;
    if (mv->causal) {
        *hi = i + 1 < mv->n_ctx ? i + 1 : mv->n_ctx;
        if (mv->window && i + 1 > mv->window)
            *lo = i + 1 - mv->window;
    }
}

void head_received(const float *w, const struct head_view *v, double *out)
{
    // a key's column, whose pairs no query may see are exactly 0
    for (size_t j = 0; j < v->keys; j++) {
        double sum = 0;
        for (size_t i = 0; i < v->n; i++)
            sum += w[i * v->keys + j];
        const size_t seen = mask_queries_seeing(v->mask, v->n, j);
        out[j] = seen ? sum / (double)seen : 0;
    }
}

/* By token, then by position. */
static int by_token(const void *a, const void *b)
{
    const size_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

void head_stats_earlier(const uint32_t *ids, size_t n, size_t *scratch,
                        size_t *earlier)
{
    for (size_t i = 0; i < n; i++) {
        scratch[2 * i] = ids[i];
        scratch[2 * i + 1] = i;
    }
    qsort(scratch, n, 2 * sizeof *scratch, by_token);
    for (size_t r = 0; r < n; r++) {
        const size_t *at = scratch + 2 * r;
        earlier[at[1]] = r && at[-2] == at[0] ? at[-1] : HEAD_NONE;
    }
}

/* FNV-1a over a row's bytes. */
static size_t row_hash(const float *row, size_t width)
{
    const unsigned char *p = (const unsigned char *)row;
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < width * sizeof *row; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return (size_t)h;
}

void head_stats_earlier_rows(const float *rows, size_t n, size_t width,
                             size_t *scratch, size_t *earlier)
{
    for (size_t i = 0; i < n; i++) {
        scratch[2 * i] = row_hash(rows + i * width, width);
        scratch[2 * i + 1] = i;
    }
    qsort(scratch, n, 2 * sizeof *scratch, by_token);
    // within a hash, the nearest earlier row of the same bits (a hash
    // shared by different rows must not make them one token)
    for (size_t r = 0; r < n; r++) {
        const size_t i = scratch[2 * r + 1];
        earlier[i] = HEAD_NONE;
        for (size_t q = r; q-- > 0 && scratch[2 * q] == scratch[2 * r];) {
            const size_t k = scratch[2 * q + 1];
            if (!memcmp(rows + i * width, rows + k * width,
                        width * sizeof *rows)) {
                earlier[i] = k;
                break;
            }
        }
    }
}

/* Row i's entropy over the keys it may see, divided by the log of their
 * count; NaN for a row that sees fewer than two. */
static double row_entropy(const float *row, const struct head_view *v, size_t i)
{
    const struct mask_view *mv = v->mask;
    double h = 0;
    size_t seen = 0;
    if (!mask_has_arrays(mv)) {
        size_t lo, hi;
        row_range(mv, i, &lo, &hi);
        for (size_t j = lo; j < hi; j++)
            if (row[j] > 0)
                h -= row[j] * log(row[j]);
        seen = hi - lo;
        for (size_t j = mv->n_ctx; j < v->keys; j++) /* appended keys */
            if (row[j] > 0)
                h -= row[j] * log(row[j]);
        seen += v->keys - mv->n_ctx;
    } else {
        for (size_t j = 0; j < v->keys; j++)
            if (mask_key_visible(mv, i, j)) {
                seen++;
                if (row[j] > 0)
                    h -= row[j] * log(row[j]);
            }
    }
    return seen >= 2 ? h / log((double)seen) : NAN;
}

void head_stats_row(const float *row, const struct head_view *v, size_t i,
                    double part[ATTN_HEAD_STATS])
{
    const size_t pos = v->positions;
    part[ATTN_STAT_ENTROPY] = row_entropy(row, v, i);
    // the first key: of the rows after it, or under cross-attention (the
    // keys at no query's position) of every row
    part[ATTN_STAT_SINK] = i >= 1 || !pos ? row[0] : 0;
    double previous = 0, duplicate = 0, induction = 0, self = 0, distance = 0;
    if (pos) {
        // how far back the row looks, over the keys with a position
        for (size_t j = 0; j < pos; j++)
            distance += row[j] * fabs((double)i - (double)j);
        self = row[i];
        if (i >= 1)
            previous = row[i - 1];
        // TransformerLens' patterns: earlier copies of the query's token,
        // and the token after each copy (one column right)
        for (size_t k = v->earlier[i]; k != HEAD_NONE; k = v->earlier[k]) {
            duplicate += row[k];
            induction += row[k + 1];
        }
    }
    part[ATTN_STAT_PREVIOUS] = previous;
    part[ATTN_STAT_DUPLICATE] = duplicate;
    part[ATTN_STAT_INDUCTION] = induction;
    part[ATTN_STAT_SELF] = self;
    part[ATTN_STAT_DISTANCE] = distance;
}

void head_sums_add(struct head_sums *s, const double part[ATTN_HEAD_STATS])
{
    if (!isnan(part[ATTN_STAT_ENTROPY])) {
        s->sum[ATTN_STAT_ENTROPY] += part[ATTN_STAT_ENTROPY];
        s->entropy_rows++;
    }
    for (int k = ATTN_STAT_ENTROPY + 1; k < ATTN_HEAD_STATS; k++)
        s->sum[k] += part[k];
}

void head_sums_finish(const struct head_sums *s, size_t n, size_t positions,
                      double out[ATTN_HEAD_STATS])
{
    const double rows = n ? (double)n : 1.0;
    const double none = positions ? 0.0 : NAN;
    // no row sees two keys (one token, or a mask of one): no entropy
    out[ATTN_STAT_ENTROPY] =
        s->entropy_rows ? s->sum[ATTN_STAT_ENTROPY] / (double)s->entropy_rows
                        : NAN;
    const size_t sink_rows = positions ? (n > 1 ? n - 1 : 0) : n;
    out[ATTN_STAT_SINK] =
        sink_rows ? s->sum[ATTN_STAT_SINK] / (double)sink_rows : NAN;
    for (int k = ATTN_STAT_PREVIOUS; k < ATTN_HEAD_STATS; k++)
        out[k] = none + s->sum[k] / rows;
}

void head_stats(const float *w, const struct head_view *v,
                double out[ATTN_HEAD_STATS])
{
    struct head_sums sums = {0};
    for (size_t i = 0; i < v->n; i++) {
        double part[ATTN_HEAD_STATS];
        head_stats_row(w + i * v->keys, v, i, part);
        head_sums_add(&sums, part);
    }
    head_sums_finish(&sums, v->n, v->positions, out);
}

double head_stripe_row(const float *row, size_t i, size_t start, size_t period)
{
    return i >= start + period && i < start + 2 * period ? row[i - period + 1]
                                                         : 0.0;
}
