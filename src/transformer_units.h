/*
 * transformer_units.h - how a planned transformer pass is cut into units
 * of work and which attention each layer asks for; shared by the plan
 * (transformer_plan.c) and the pass that runs it (transformer.c).
 * Internal to the core.
 *
 * Norms and residual sums go by rows, XF_ROW_UNIT to a unit. A product of
 * the feed-forward goes by tiles, XF_FFN_TILES of them or more where the
 * columns allow (enough for a team of two or four; a tile's columns are
 * a multiple of XF_COL_ALIGN, so a narrow product may get three). Its
 * rows go in whole blocks of STREAM_ROWS, the rows the streamed product
 * packs at a time, shared out as evenly as whole blocks go over
 * XF_FFN_TILES row tiles, or over more of at most about XF_FFN_ROW_TILE
 * rows each, an input's last partial block with the last tile (so no
 * tile is a few rows, which would take another way through the product,
 * widen.h): a block's rows are packed once for the whole product, not
 * once for each slice of its columns (at 512 rows through a 3072-wide
 * down projection, four times 6 MiB a layer). With fewer whole blocks
 * than XF_FFN_TILES (short inputs) the columns are cut too. Boundaries
 * follow from the sizes alone and units write disjoint cells, so any
 * team computes the same bits.
 */
#ifndef ATTN_TRANSFORMER_UNITS_H
#define ATTN_TRANSFORMER_UNITS_H

#include "checked.h"
#include "stream_product.h"
#include "transformer.h"

#include <stdbool.h>
#include <stddef.h>

enum {
    XF_ROW_UNIT = 64,
    XF_FFN_TILES = 4,
    XF_FFN_ROW_TILE = 256,
    XF_COL_ALIGN = 16
};

/* How a pass's products take their rows (widen.h's struct
 * widen_product): each row a token of its own (a step after caches), and
 * whether bfloat16 weights may meet bfloat16 activations (the run's
 * bf16_dots, on a CPU that has them). */
struct xf_products {
    bool alone, bf16_dots;
};

/* The plan's. */
struct xf_products xf_plan_products(const struct xf_plan *p);

/* Does a layer's attention of cfg (one of the plan's) write its weights
 * straight into the result's (attn_config.weights_into)? When it
 * returns them (only a returned layer's call asks for them) over one
 * sequence, whose keys are its queries: the layout of a layer of the
 * result's weights. */
bool xf_weights_into_result(const struct attn_config *cfg);

/* Floats from one intermediate row of the pass's scratch to the next:
 * the width in whole cache lines, and one line more when that is an even
 * number of them. A product writes the sums of 64 rows at once
 * (stream_add_sums()) and the activation reads them back; rows an even
 * number of lines apart (a 3072-wide row is 192) fall into a fraction of
 * the first-level cache's 64 sets, all of them into one set when the
 * rows are a multiple of 4 KiB, and evict one another. An odd number
 * spreads 64 rows over all 64 sets. (bert-base at 512 wordpieces: the
 * pass 4-10 % faster.) */
static inline size_t xf_inter_ld(const struct xf_model *m)
{
    const size_t lines = (m->intermediate + 15) / 16;
    return 16 * (lines % 2 ? lines : lines + 1);
}

/* Floats of a pass's intermediate rows (or the gate's), rows of them:
 * xf_inter_ld() apart, or packed (widen.h's x_packed) when every product
 * of the feed-forward streams. Then the first product writes its sums as
 * the kernel makes them, with no transpose to rows, and the second reads
 * them as it would have packed them: at 512 rows through bert-base, the
 * two transposes were 3 % of the pass. A packed block holds STREAM_ROWS
 * rows of every column, the last one whole. Fails (false) when the size
 * overflows. */
static inline bool xf_inter_floats(const struct xf_model *m, size_t rows,
                                   bool packed, size_t *floats)
{
    if (!packed)
        return size_mul(rows, xf_inter_ld(m), floats);
    const size_t blocks = rows / STREAM_ROWS + (rows % STREAM_ROWS != 0);
    return size_mul3(blocks, STREAM_ROWS, m->intermediate, floats);
}

/* Lay out the plan's workspace from its fields (the rows, the team, what
 * it wants, ffn_packed): xf_plan() does; a caller that changes one of
 * them does it again. False when a size overflows. */
bool xf_plan_workspace(struct xf_plan *p);

/* A tile of a product: rows [r0, r0 + rows), columns [c0, c0 + width). */
struct xf_tile {
    size_t r0, rows, c0, width;
};

/* Tiles of a product with cols columns over n rows, and tile u of them. */
size_t xf_tile_count(size_t n, size_t cols);
struct xf_tile xf_tile_at(size_t n, size_t cols, size_t u);

/* Rows [r0, ...) of matrix w, cols wide, at its stored width. */
static inline const void *xf_matrix_rows(struct xf_matrix w, size_t r0,
                                         size_t cols)
{
    return (const char *)w.data + attn_dtype_bytes(w.dtype, r0 * cols);
}

/* y = norm(x) over rows of the model's width, by the arch's kind of norm;
 * x and y may be the same. */
void xf_norm_rows(const struct xf_model *m, const float *x, size_t rows,
                  const float *w, const float *b, float *y);

/* Units of a by-rows phase over n rows; unit u starts at u * XF_ROW_UNIT. */
size_t xf_row_units(size_t n);

/* Units of the plan's widest phase, which bounds its team. */
size_t xf_widest_phase(const struct xf_plan *p);

/* The kind of a layer's attention call: whether its output feeds
 * anything, whether its weights are returned, and what else it gives. */
enum {
    XF_KIND_OUTPUT = 1u << 0,
    XF_KIND_WEIGHTS = 1u << 1,
    XF_KIND_VALUE = 1u << 2,    /* the value-weighted norms */
    XF_KIND_MEASURES = 1u << 3, /* head_stats, induction */
    XF_KIND_TOP_K = 1u << 4,    /* each row's strongest keys */
    XF_KIND_POOLED = 1u << 5,   /* the weights in blocks */
    XF_KIND_HOOKED = 1u << 6    /* stops before the output projection,
                                   which the pass applies after its edits */
};
unsigned xf_attn_kind(const struct xf_plan *p, size_t l);

/* Layer l's attention config, as the plan resolved it. */
static inline const struct attn_config *xf_layer_attn(const struct xf_plan *p,
                                                      size_t l)
{
    return &p->attn[p->attn_of[l]];
}

/* The kind of layer l (transformer.h's xf_layer_kind). */
static inline const struct xf_layer_kind *xf_kind_of(const struct xf_model *m,
                                                     size_t l)
{
    return &m->kind[m->layer_kind ? m->layer_kind[l] : 0];
}

/* The rotary of kind lk for a run over length positions in all (a
 * cache's and its own): its long one past long_after. */
static inline const struct attn_rotary *
xf_kind_rope(const struct xf_layer_kind *lk, size_t length)
{
    return lk->long_after && length > lk->long_after ? &lk->long_rope
                                                     : &lk->rope;
}

/* Does layer l hand its weights (or mean weights) to the result? */
bool xf_returns_layer(const struct xf_plan *p, size_t l);

/* Does layer l's output feed anything: the next layer, or the hidden
 * states returned? */
bool xf_output_used(const struct xf_plan *p, size_t l);

#endif
