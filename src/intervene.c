/*
 * intervene.c - checking and applying a run's edits (intervene.h).
 */
#include "error.h"
#include "intervene.h"

#include <string.h>

static bool known_site(xf_site site)
{
    return site == XF_SITE_Z || site == XF_SITE_RESID_PRE ||
           site == XF_SITE_ATTN_OUT || site == XF_SITE_MLP_OUT;
}

attn_status intervene_check(const struct xf_model *m, const struct xf_run *run,
                            size_t batch, struct attn_error *err)
{
    if (run->n_edits && !run->edits)
        return attn_fail(err, ATTN_E_INVALID, "edits", "edits is missing");
    if (run->n_edits > XF_MAX_EDITS)
        return attn_fail(err, ATTN_E_TOO_BIG, "edits",
                         "%zu edits are more than the %d a run takes",
                         run->n_edits, XF_MAX_EDITS);
    const bool step = run->cache && run->cache->len > 0;
    for (size_t k = 0; k < run->n_edits; k++) {
        const struct xf_edit *e = &run->edits[k];
        const char *why = NULL;
        if (!known_site(e->site))
            why = "its site is unknown";
        else if (e->op != XF_EDIT_ZERO && e->op != XF_EDIT_MEAN &&
                 e->op != XF_EDIT_SET)
            why = "its op is unknown";
        else if (e->op != XF_EDIT_SET && e->site != XF_SITE_Z)
            why = "zero and mean act on heads' values only";
        else if (e->op == XF_EDIT_SET && !e->source)
            why = "it sets values but has no source";
        else if (step && e->op == XF_EDIT_SET)
            why = "after a cache, heads are zeroed or averaged only";
        else if (e->site != XF_SITE_Z && e->head != XF_ALL)
            why = "only heads' values have heads";
        else if (e->sequence >= batch)
            why = "its sequence is not one of the run's";
        if (why)
            return attn_fail_at(err, ATTN_E_INVALID, "edits", 1, &k,
                                "edits[%zu]: %s", k, why);
        if (e->layer >= m->layers)
            return attn_fail_at(err, ATTN_E_INVALID, "edits", 1, &k,
                                "edits[%zu]: layer %zu is not below the "
                                "model's %zu layers",
                                k, e->layer, m->layers);
        if (e->head != XF_ALL && e->head >= m->heads)
            return attn_fail_at(err, ATTN_E_INVALID, "edits", 1, &k,
                                "edits[%zu]: head %zu is not below the "
                                "model's %zu heads",
                                k, e->head, m->heads);
        // a position of the input; after a cache, any the run can reach
        if (e->position != XF_ALL && !step && e->position >= run->n)
            return attn_fail_at(err, ATTN_E_INVALID, "edits", 1, &k,
                                "edits[%zu]: position %zu is not below the "
                                "input's %zu tokens",
                                k, e->position, run->n);
        if (e->site == XF_SITE_RESID_PRE && run->start &&
            e->layer < run->first_layer)
            return attn_fail_at(err, ATTN_E_INVALID, "edits", 1, &k,
                                "edits[%zu]: layer %zu is below the run's "
                                "first layer (%zu)",
                                k, e->layer, run->first_layer);
    }
    return ATTN_OK;
}

bool intervene_any(const struct xf_run *run, size_t l, xf_site site)
{
    for (size_t k = 0; k < run->n_edits; k++)
        if (run->edits[k].layer == l && run->edits[k].site == site)
            return true;
    return false;
}

void intervene_means(const float *z, size_t n, size_t hd, float *means)
{
    for (size_t c = 0; c < hd; c++) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += z[i * hd + c];
        means[c] = (float)(sum / (double)n);
    }
}

/* Columns [c0, c0 + cols) of row, at position pos, set by e; base: NULL,
 * or the row the values were added to. */
static void edit_row(const struct xf_edit *e, float *row, const float *base,
                     size_t pos, size_t width, size_t c0, size_t cols,
                     const float *mean)
{
    switch (e->op) {
    case XF_EDIT_ZERO: memset(row + c0, 0, cols * sizeof *row); break;
    case XF_EDIT_MEAN: memcpy(row + c0, mean + c0, cols * sizeof *row); break;
    case XF_EDIT_SET: {
        const float *src = e->source + pos * width;
        if (!base) {
            memcpy(row + c0, src + c0, cols * sizeof *row);
            break;
        }
        for (size_t c = c0; c < c0 + cols; c++)
            row[c] = base[c] + src[c];
        break;
    }
    }
}

void intervene_apply(const struct xf_run *run, size_t l, xf_site site,
                     float *rows, const float *base, size_t n, size_t width,
                     size_t head_dim, size_t pos0, const float *means)
{
    for (size_t k = 0; k < run->n_edits; k++) {
        const struct xf_edit *e = &run->edits[k];
        if (e->layer != l || e->site != site)
            continue;
        const bool every_head = site != XF_SITE_Z || e->head == XF_ALL;
        const size_t c0 = every_head ? 0 : e->head * head_dim;
        const size_t cols = every_head ? width : head_dim;
        const size_t at = e->sequence * n * width;
        const float *mean = means ? means + e->sequence * width : NULL;
        for (size_t i = 0; i < n; i++) {
            const size_t pos = pos0 + i;
            if (e->position != XF_ALL && e->position != pos)
                continue;
            // a source holds the input's positions: a step reads none
            edit_row(e, rows + at + i * width,
                     base ? base + at + i * width : NULL, pos, width, c0, cols,
                     mean);
        }
    }
}
