/*
 * mask.c - which keys a query may see (mask.h).
 */
#include "mask.h"

#include <math.h>

struct mask_view mask_view_of(const struct attn_config *c, size_t b)
{
    const size_t n = c->n_query, m = c->n_ctx;
    /* sequence b's mask: [N][M], or one of [B][N][M] or [B][h][N][M] */
    const size_t mask_at = c->mask_per_head  ? b * c->heads * n * m
                           : c->mask_batched ? b * n * m
                                             : 0;
    return (struct mask_view){
        .causal = c->causal,
        .window = c->window,
        .mask = c->mask ? c->mask + mask_at : NULL,
        .bias = c->mask_bias ? c->mask_bias + mask_at : NULL,
        .key_padding = c->key_padding ? c->key_padding +
                                            (c->key_padding_batched ? b * m : 0)
                                      : NULL,
        .n_ctx = m,
        .head_stride = c->mask_per_head ? n * m : 0};
}

struct mask_view mask_view_head(const struct mask_view *mv, size_t a)
{
    struct mask_view hv = *mv;
    const size_t at = a * mv->head_stride;
    if (hv.mask)
        hv.mask += at;
    if (hv.bias)
        hv.bias += at;
    return hv;
}

bool mask_key_visible(const struct mask_view *mv, size_t i, size_t j)
{
    if (j >= mv->n_ctx)
        return true; /* an appended key */
    return !(mv->causal && (j > i || (mv->window && j + mv->window <= i))) &&
           !(mv->mask && !mv->mask[i * mv->n_ctx + j]) &&
           !(mv->bias && mv->bias[i * mv->n_ctx + j] <= ATTN_MASK_NEVER) &&
           !(mv->key_padding && mv->key_padding[j]);
}

size_t mask_queries_seeing(const struct mask_view *mv, size_t n_query, size_t j)
{
    if (!mask_has_arrays(mv) && j < mv->n_ctx) {
        // all, or j and after (and, under a window, before j + window)
        size_t lo = 0, hi = n_query;
        if (mv->causal) {
            lo = j < n_query ? j : n_query;
            if (mv->window && j + mv->window < hi)
                hi = j + mv->window;
        }
        return hi > lo ? hi - lo : 0;
    }
    size_t seen = 0;
    for (size_t i = 0; i < n_query; i++)
        seen += mask_key_visible(mv, i, j);
    return seen;
}

bool mask_has_arrays(const struct mask_view *mv)
{
    return mv->mask || mv->bias || mv->key_padding;
}

void mask_row(const struct mask_view *mv, size_t i, size_t j0, float *s,
              size_t nj)
{
    const size_t m = mv->n_ctx;
    if (j0 >= m)
        return;
    nj = j0 + nj > m ? m - j0 : nj; /* the context keys among them */
    if (mv->causal) {
        if (j0 + nj > i + 1) {
            const size_t from = i + 1 > j0 ? i + 1 - j0 : 0;
            for (size_t j = from; j < nj; j++)
                s[j] = -INFINITY;
        }
        // the sliding window (only with causal): keys j <= i - window
        // are out of sight
        if (mv->window && i >= mv->window && j0 <= i - mv->window) {
            const size_t last = i - mv->window - j0; /* of the block's */
            for (size_t j = 0; j <= last && j < nj; j++)
                s[j] = -INFINITY;
        }
    }
    if (mv->mask) {
        const uint8_t *allowed = mv->mask + i * m + j0;
        for (size_t j = 0; j < nj; j++)
            if (!allowed[j])
                s[j] = -INFINITY;
    }
    if (mv->bias) {
        // s += bias, and "never" where the bias says so
        const float *add = mv->bias + i * m + j0;
        for (size_t j = 0; j < nj; j++)
            s[j] = add[j] <= ATTN_MASK_NEVER ? -INFINITY : s[j] + add[j];
    }
    if (mv->key_padding) {
        const uint8_t *ignore = mv->key_padding + j0;
        for (size_t j = 0; j < nj; j++)
            if (ignore[j])
                s[j] = -INFINITY;
    }
}
