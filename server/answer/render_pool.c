/*
 * render_pool.c - an image's pooling, decided and prepared from the
 * request alone, so that it is measured with the image before anything
 * is computed.
 */
#include "render_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The automatic cell of unpooled images (heatmap.h): at least 300 px a
 * side, at most 48 px a cell. */
#define POOL_AUTO_SIDE_PX 300u
#define POOL_AUTO_MAX_CELL 48u

void render_pool_plan(struct render_pool *rp, const struct request_png *o,
                      size_t n, size_t m)
{
    memset(rp, 0, sizeof *rp);
    rp->n = n;
    rp->m = m;
    request_pool_block(o, n, m, &rp->k, &rp->kind);
    rp->rows = heatmap_pool_blocks(n, rp->k);
    rp->cols = heatmap_pool_blocks(m, rp->k);
    snprintf(rp->kind_text, sizeof rp->kind_text, "%s",
             rp->kind == HEATMAP_POOL_MAX    ? "max"
             : rp->kind == HEATMAP_POOL_MEAN ? "mean"
                                             : "none");
    snprintf(rp->size_text, sizeof rp->size_text, "%zu", rp->k);
    if (rp->kind != HEATMAP_POOL_NONE)
        snprintf(rp->note, sizeof rp->note,
                 "pooled: each cell the %s of a block of %zu x %zu weights "
                 "(%zu x %zu tokens)",
                 rp->kind_text, rp->k, rp->k, n, m);
}

bool render_pool_make(struct render_pool *rp, const char *const *row_labels,
                      const char *const *col_labels,
                      const unsigned char *not_allowed)
{
    if (rp->kind == HEATMAP_POOL_NONE)
        return true;
    char err[128];
    if (heatmap_pool_labels(row_labels, rp->n, rp->k, &rp->row_labels, err,
                            sizeof err) != DRAW_OK ||
        heatmap_pool_labels(col_labels, rp->m, rp->k, &rp->col_labels, err,
                            sizeof err) != DRAW_OK)
        return false;
    if (not_allowed) {
        rp->mask = malloc(rp->rows * rp->cols);
        if (!rp->mask)
            return false;
        heatmap_pool_mask(not_allowed, rp->n, rp->m, rp->k, rp->mask);
    }
    return true;
}

bool render_pool_alloc(struct render_pool *rp, size_t panels)
{
    if (rp->kind == HEATMAP_POOL_NONE)
        return true;
    rp->values = malloc(panels * rp->rows * rp->cols * sizeof *rp->values);
    return rp->values != NULL;
}

unsigned render_pool_cell(const struct render_pool *rp)
{
    const size_t side = rp->rows > rp->cols ? rp->rows : rp->cols;
    size_t cell = (POOL_AUTO_SIDE_PX + side - 1) / side;
    if (cell > POOL_AUTO_MAX_CELL)
        cell = POOL_AUTO_MAX_CELL;
    return cell < HEATMAP_POOL_CELL ? HEATMAP_POOL_CELL : (unsigned)cell;
}

size_t render_pool_bytes(const struct render_pool *rp, size_t panels)
{
    if (rp->kind == HEATMAP_POOL_NONE)
        return 0;
    return heatmap_pool_labels_bytes(rp->n, rp->k) +
           heatmap_pool_labels_bytes(rp->m, rp->k) + rp->rows * rp->cols +
           panels * rp->rows * rp->cols * sizeof(float);
}

void render_pool_free(struct render_pool *rp)
{
    heatmap_pool_labels_free(rp->row_labels, rp->rows);
    heatmap_pool_labels_free(rp->col_labels, rp->cols);
    free(rp->mask);
    free(rp->values);
    memset(rp, 0, sizeof *rp);
}
