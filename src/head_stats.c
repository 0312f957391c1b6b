/*
 * head_stats.c - per-head measures of attention weights (head_stats.h).
 */
#include "head_stats.h"
#include "error.h"

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
    const struct mask_view *mv = v->mask;
    const size_t n = v->n, keys = v->keys;
    const bool ranges = !mask_has_arrays(mv);
    for (size_t j = 0; j < keys; j++) {
        double sum = 0;
        size_t seen = 0;
        if (ranges && j < mv->n_ctx) {
            // the queries that see key j: all, or j and after (and, under
            // a window, before j + window)
            size_t lo = 0, hi = n;
            if (mv->causal) {
                lo = j < n ? j : n;
                if (mv->window && j + mv->window < hi)
                    hi = j + mv->window;
            }
            for (size_t i = lo; i < hi; i++)
                sum += w[i * keys + j];
            seen = hi - lo;
        } else {
            for (size_t i = 0; i < n; i++)
                if (mask_key_visible(mv, i, j)) {
                    sum += w[i * keys + j];
                    seen++;
                }
        }
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

void head_stats(const float *w, const struct head_view *v,
                double out[ATTN_HEAD_STATS])
{
    const size_t n = v->n, keys = v->keys, pos = v->positions;
    double entropy = 0, sink = 0, previous = 0, duplicate = 0, induction = 0,
           self = 0, distance = 0;
    size_t entropy_rows = 0;
    for (size_t i = 0; i < n; i++) {
        const float *row = w + i * keys;
        const double h = row_entropy(row, v, i);
        if (!isnan(h)) {
            entropy += h;
            entropy_rows++;
        }
        if (i >= 1)
            sink += row[0];
        if (!pos)
            continue;
        // how far back the row looks, over the keys with a position
        double d = 0;
        for (size_t j = 0; j < pos; j++)
            d += row[j] * fabs((double)i - (double)j);
        distance += d;
        self += row[i];
        if (i >= 1)
            previous += row[i - 1];
        // TransformerLens' patterns: earlier copies of the query's token,
        // and the token after each copy (one column right)
        for (size_t k = v->earlier[i]; k != HEAD_NONE; k = v->earlier[k]) {
            duplicate += row[k];
            induction += row[k + 1];
        }
    }
    const double rows = n ? (double)n : 1.0;
    const double none = pos ? 0.0 : NAN;
    out[ATTN_STAT_ENTROPY] = entropy_rows ? entropy / (double)entropy_rows : 0;
    out[ATTN_STAT_SINK] = n > 1 ? sink / (double)(n - 1) : 0;
    out[ATTN_STAT_PREVIOUS] = none + previous / rows;
    out[ATTN_STAT_DUPLICATE] = none + duplicate / rows;
    out[ATTN_STAT_INDUCTION] = none + induction / rows;
    out[ATTN_STAT_SELF] = none + self / rows;
    out[ATTN_STAT_DISTANCE] = none + distance / rows;
}

attn_status head_stats_of_result(const struct attn_config *c, const float *x,
                                 struct attn_result *r, struct attn_error *err)
{
    const size_t b = c->batch, h = c->heads, n = c->n_query, k = c->n_keys;
    const float *weights = r->weights_raw ? r->weights_raw : r->weights;
    r->head_stats = malloc(b * h * ATTN_HEAD_STATS * sizeof *r->head_stats);
    r->key_received = malloc(b * h * k * sizeof *r->key_received);
    size_t *sizes = c->cross ? NULL : malloc(3 * n * sizeof *sizes);
    if (!r->head_stats || !r->key_received || (!c->cross && !sizes)) {
        free(sizes);
        attn_result_free(r);
        return attn_fail(err, ATTN_E_NOMEM, "return",
                         "out of memory for the head measures");
    }
    for (size_t s = 0; s < b; s++) {
        // the tokens each position repeats: once for the sequence
        size_t *earlier = sizes ? sizes + 2 * n : NULL;
        if (earlier)
            head_stats_earlier_rows(x + s * n * c->d_model, n, c->d_model,
                                    sizes, earlier);
        const struct mask_view seq = mask_view_of(c, s);
        for (size_t a = 0; a < h; a++) {
            const struct mask_view mv = mask_view_head(&seq, a);
            const struct head_view hv = {.n = n,
                                         .keys = k,
                                         .positions = c->cross ? 0 : c->n_ctx,
                                         .mask = &mv,
                                         .earlier = earlier};
            const size_t head = s * h + a;
            head_stats(weights + head * n * k, &hv,
                       r->head_stats + head * ATTN_HEAD_STATS);
            head_received(weights + head * n * k, &hv,
                          r->key_received + head * k);
        }
    }
    free(sizes);
    if (c->want_internal & ATTN_WANT_WEIGHTS_RAW) {
        free(r->weights_raw);
        r->weights_raw = NULL;
    }
    return ATTN_OK;
}

double head_induction_stripe(const float *w, size_t n, size_t start,
                             size_t period)
{
    double sum = 0;
    for (size_t i = start + period; i < start + 2 * period; i++)
        sum += w[i * n + i - period + 1];
    return sum / (double)period;
}
