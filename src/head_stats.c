/*
 * head_stats.c - per-head measures of attention weights (head_stats.h).
 */
#include "head_stats.h"

#include <math.h>
#include <stdlib.h>

const char *xf_head_stat_name(int stat)
{
    static const char *const names[XF_HEAD_STATS] = {
        "entropy",   "sink", "previous_token", "duplicate_token",
        "induction", "self", "distance"};
    return stat >= 0 && stat < XF_HEAD_STATS ? names[stat] : NULL;
}

void head_received(const float *w, size_t n, bool causal, size_t window,
                   double *out)
{
    for (size_t j = 0; j < n; j++) {
        // the queries that see key j: all, or j and after (and, under a
        // window, before j + window)
        size_t lo = 0, hi = n;
        if (causal) {
            lo = j;
            if (window && j + window < hi)
                hi = j + window;
        }
        double sum = 0;
        for (size_t i = lo; i < hi; i++)
            sum += w[i * n + j];
        out[j] = sum / (double)(hi - lo);
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

void head_stats(const float *w, size_t n, bool causal, size_t window,
                const size_t *earlier, double out[XF_HEAD_STATS])
{
    double entropy = 0, sink = 0, previous = 0, duplicate = 0, induction = 0,
           self = 0, distance = 0;
    size_t entropy_rows = 0;
    for (size_t i = 0; i < n; i++) {
        const float *row = w + i * n;
        // the keys row i may see: the entropy's most is the log of their
        // count
        size_t lo = 0, hi = n;
        if (causal) {
            hi = i + 1;
            if (window && hi > window)
                lo = hi - window;
        }
        double h = 0, d = 0;
        for (size_t j = lo; j < hi; j++) {
            const double a = row[j];
            if (a > 0)
                h -= a * log(a);
            d += a * fabs((double)i - (double)j);
        }
        if (hi - lo >= 2) {
            entropy += h / log((double)(hi - lo));
            entropy_rows++;
        }
        distance += d;
        self += row[i];
        if (i >= 1) {
            sink += row[0];
            previous += row[i - 1];
        }
        // TransformerLens' patterns: earlier copies of the query's token,
        // and the token after each copy (one column right)
        for (size_t k = earlier[i]; k != HEAD_NONE; k = earlier[k]) {
            duplicate += row[k];
            induction += row[k + 1];
        }
    }
    const double rows = n ? (double)n : 1.0;
    out[XF_STAT_ENTROPY] = entropy_rows ? entropy / (double)entropy_rows : 0;
    out[XF_STAT_SINK] = n > 1 ? sink / (double)(n - 1) : 0;
    out[XF_STAT_PREVIOUS] = previous / rows;
    out[XF_STAT_DUPLICATE] = duplicate / rows;
    out[XF_STAT_INDUCTION] = induction / rows;
    out[XF_STAT_SELF] = self / rows;
    out[XF_STAT_DISTANCE] = distance / rows;
}
