/*
 * forward_plan.c - the plan of an attention pass (forward_plan.h): its
 * paths, team, workspace and result sizes, and what it costs in bytes and
 * floating-point operations.
 */
/* madvise() and MADV_HUGEPAGE, where the system has them */
#define _DEFAULT_SOURCE

#include "forward_plan.h"
#include "head_product.h"
#include "row_measures.h"
#include "value_weighted.h"
#include "widen.h"
#include "stream_product.h"
#include "checked.h"
#include "pool.h"
#include "workspace.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Result arrays of HUGE_ARRAY bytes or more are laid on huge pages. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_ARRAY ((size_t)8 << 20)

/* A pass of fewer floating-point operations runs as one unit per phase:
 * about 0.15 ms on one core, where a second thread would not pay for
 * itself. */
#define SPLIT_FLOPS 16e6

/* Rows per unit, out of rows, at most most: the smallest power of two
 * from MIN_UNIT_ROWS on that cuts rows into four units at most, so that a
 * pass worth splitting (SPLIT_FLOPS) gives a team two to four units a
 * phase however few its rows (65 to 1024); the cut depends on the sizes
 * only, never on the team. */
static size_t unit_rows(size_t rows, double flops, size_t most)
{
    if (flops < SPLIT_FLOPS)
        return most;
    size_t r = MIN_UNIT_ROWS;
    while (r < most && r * 4 < rows)
        r *= 2;
    return r;
}

struct paths forward_paths(const struct attn_config *c)
{
    struct paths p;
    const double flops = forward_pass_flops(c);
    p.query_rows = unit_rows(c->n_query, flops, QUERY_BLOCK);
    p.kv_rows = unit_rows(c->n_ctx, flops, KV_CHUNK);
    p.full_path =
        c->full_path || (c->want & (ATTN_WANT_WEIGHTS | ATTN_WANT_WEIGHTS_RAW |
                                    ATTN_WANT_SCORES | ATTN_WANT_MEAN_WEIGHTS |
                                    ATTN_ROW_MEASURES));
    p.need_pv = c->want & (ATTN_WANT_HEADS | ATTN_WANT_OUTPUT);
    /* key-outer pays off when K and V would outgrow one key block, and
     * only when nothing needs them whole afterwards; appended keys
     * (bias_kv, zero_attn) are rows of a whole K and V */
    p.key_outer = !p.full_path && p.need_pv && c->mode == ATTN_MODE_PROJECTED &&
                  c->n_ctx > KEY_BLOCK && c->n_keys == c->n_ctx &&
                  !(c->want & (ATTN_WANT_K | ATTN_WANT_V)) &&
                  c->residual != ATTN_RESIDUAL_VALUE;
    p.heads_in_output = p.key_outer && !(c->want & ATTN_WANT_HEADS) &&
                        c->heads * c->d_v == c->d_out;
    return p;
}

unsigned forward_team(const struct attn_config *c, const struct paths *p)
{
    const size_t kv_units =
        c->batch * ((c->n_ctx + p->kv_rows - 1) / p->kv_rows);
    const size_t q_units =
        c->batch * ((c->n_query + p->query_rows - 1) / p->query_rows);
    return pool_team_size(c->threads, kv_units > q_units ? kv_units : q_units);
}

/* The widest input of c's projections: x, the context, the values and
 * the heads' outputs. */
static size_t widest_input(const struct attn_config *c)
{
    size_t w = c->d_model;
    w = c->d_ctx > w ? c->d_ctx : w;
    w = c->d_value > w ? c->d_value : w;
    w = c->heads * c->d_v > w ? c->heads * c->d_v : w;
    return w;
}

/* A thread's panel: a whole one when the params may hold 16-bit
 * matrices, which widen_product() widens there. Float32 matrices stream
 * in place where the CPU allows (stream_product.h, about twice
 * OpenBLAS's speed through 256 x 768 weights at 128 rows; a small
 * pass, (9, 64, 8) for its weights, 6.2 -> 4.3 us), which packs STREAM_ROWS
 * rows of x by at most STREAM_COLS of their columns into the panel: as
 * many floats as that takes for the widest input. Else none
 * (cblas_sgemm). */
size_t forward_panel_floats(const struct attn_config *c)
{
    if (c->stored_matrices)
        return WIDEN_PANEL_FLOATS;
    const struct widen_product f32 = {.rows = 2, .dtype = ATTN_F32};
    if (!stream_product_can(&f32))
        return 0;
    const size_t cols = widest_input(c);
    return STREAM_ROWS * (cols < STREAM_COLS ? cols : STREAM_COLS);
}

/* What a call of resolved config c with its paths and team holds besides
 * its result: every part's size and place in one block. */
void forward_workspace(const struct attn_config *c, const struct paths *p,
                       unsigned threads, struct workspace_plan *w)
{
    memset(w, 0, sizeof *w);
    size_t *count = w->count, *elem = w->elem;
    const unsigned want = c->want;
    const bool projected = c->mode == ATTN_MODE_PROJECTED;
    const size_t qb = c->n_query < p->query_rows ? c->n_query : p->query_rows;
    /* m: keys, which K and V hold; the context has n_ctx rows */
    const size_t b = c->batch, n = c->n_query, m = c->n_keys;
    w->tile_ld = p->full_path ? m : (m < KEY_BLOCK ? m : KEY_BLOCK);
    for (int i = 0; i < N_PARTS; i++)
        elem[i] = sizeof(float);
    elem[ONLINE] = elem[ONLINE_SEQ] = sizeof(struct softmax_online);
    elem[SCRATCH] = sizeof(struct scratch);
    if (c->positional == ATTN_POS_SINUSOIDAL) {
        count[X_PE] = b * n * c->d_model;
        if (c->cross)
            count[C_PE] = b * c->n_ctx * c->d_ctx;
    }
    const size_t hk = c->heads * c->d_k, hv = c->heads * c->d_v;
    count[SCRATCH] = threads;
    if (p->key_outer) {
        count[K] = KEY_BLOCK * c->kv_heads * c->d_k;
        count[V] = KEY_BLOCK * c->kv_heads * c->d_v;
        if (!(want & ATTN_WANT_Q))
            count[Q_SEQ] = n * hk;
        if (!(want & ATTN_WANT_HEADS) && !p->heads_in_output)
            count[HEADS_SEQ] = n * hv;
        count[ONLINE_SEQ] = c->heads * n;
        if (p->heads_in_output && !c->no_out_proj)
            count[OUT] = qb * c->d_out;
    } else {
        if (projected && !(want & ATTN_WANT_K))
            count[K] = b * m * c->kv_heads * c->d_k;
        if (projected && !(want & ATTN_WANT_V))
            count[V] = b * m * c->kv_heads * c->d_v;
        if (projected && !(want & ATTN_WANT_Q))
            count[Q] = qb * hk;
        if (p->need_pv && !(want & ATTN_WANT_HEADS))
            count[HEADS] = qb * hv;
        if (!p->full_path)
            count[ONLINE] = qb;
    }
    if (!p->full_path || !(want & ATTN_WANT_WEIGHTS))
        if (!size_mul(qb, w->tile_ld, &count[TILE]))
            count[TILE] = SIZE_MAX;
    if (projected)
        count[PANEL] = forward_panel_floats(c);
    if (p->full_path || p->need_pv)
        count[KT] = head_scores_scratch(c->d_k);

    struct ws_plan pl = {0, false};
    for (int i = 0; i < N_PARTS; i++) {
        const bool per_thread = i > SCRATCH;
        for (unsigned t = 0; t < (per_thread ? threads : 1); t++) {
            size_t at = 0;
            if (count[i])
                ws_take(&pl, &at, count[i], elem[i]);
            if (t == 0)
                w->offset[i] = at;
        }
    }
    w->bytes = pl.bytes;
    w->overflow = pl.overflow;
}

size_t attn_workspace_bytes(const struct attn_config *cfg)
{
    const struct paths p = forward_paths(cfg);
    struct workspace_plan w;
    forward_workspace(cfg, &p, forward_team(cfg, &p), &w);
    return w.overflow ? SIZE_MAX : w.bytes;
}

void forward_result_parts(const struct attn_config *c, struct attn_result *res,
                          struct result_part parts[N_RESULT_PARTS])
{
    const size_t b = c->batch, n = c->n_query, m = c->n_keys;
    const size_t h = c->heads, g = c->kv_heads;
    const struct result_part all[N_RESULT_PARTS] = {
        {ATTN_WANT_WEIGHTS, &res->weights, b * h * n * m, false},
        {ATTN_WANT_WEIGHTS_RAW, &res->weights_raw, b * h * n * m, false},
        {ATTN_WANT_SCORES, &res->scores, b * h * n * m, false},
        {ATTN_WANT_MEAN_WEIGHTS, &res->mean_weights, b * n * m, true},
        {ATTN_WANT_Q, &res->q, b * n * h * c->d_k, false},
        {ATTN_WANT_K, &res->k, b * m * g * c->d_k, false},
        {ATTN_WANT_V, &res->v, b * m * g * c->d_v, false},
        {ATTN_WANT_HEADS, &res->heads_out, b * n * h * c->d_v, false},
        {ATTN_WANT_OUTPUT, &res->output, b * n * c->d_out, false},
    };
    memcpy(parts, all, sizeof all);
}

/* An array of a result that the pass writes whole (and the caller frees
 * with free()). Large ones start on a huge-page boundary, and the kernel
 * is asked for huge pages there: the first write to tens of megabytes of
 * weights would otherwise fault once per 4 KiB page, which costs more than
 * the softmax over them. */
void *forward_result_alloc(size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_ARRAY) {
        const size_t whole = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        void *a = aligned_alloc(HUGE_PAGE, whole);
        if (a)
            madvise(a, whole, MADV_HUGEPAGE); /* only advice */
        return a;
    }
#endif
    return malloc(bytes);
}

/* The bytes forward_result_alloc() takes beyond bytes (none for a zeroed array,
 * which calloc() allocates). */
static size_t result_alloc_extra(size_t bytes, bool zeroed)
{
#ifdef MADV_HUGEPAGE
    if (!zeroed && bytes >= HUGE_ARRAY)
        return (HUGE_PAGE - bytes % HUGE_PAGE) % HUGE_PAGE;
#endif
    (void)bytes;
    (void)zeroed;
    return 0;
}

bool forward_weights_lent(const struct attn_config *cfg)
{
    return cfg->weights_into && (cfg->want & ATTN_WANT_WEIGHTS) &&
           !(cfg->want_internal & ATTN_WANT_WEIGHTS);
}

size_t attn_weights_bytes(const struct attn_config *cfg)
{
    if (!(cfg->want & ATTN_WANT_WEIGHTS) ||
        (cfg->want_internal & ATTN_WANT_WEIGHTS) || forward_weights_lent(cfg))
        return 0;
    const size_t bytes =
        cfg->batch * cfg->heads * cfg->n_query * cfg->n_keys * sizeof(float);
    return bytes + result_alloc_extra(bytes, false);
}

bool attn_forward_needs_pool(const struct attn_config *cfg)
{
    const struct paths p = forward_paths(cfg);
    return forward_team(cfg, &p) > 1;
}

size_t attn_forward_bytes(const struct attn_config *cfg)
{
    struct attn_result res;
    struct result_part arrays[N_RESULT_PARTS];
    forward_result_parts(cfg, &res, arrays);
    /* every term is under SIZE_MAX / 32 once the config is resolved */
    size_t floats = 0, rounding = 0;
    for (size_t i = 0; i < N_RESULT_PARTS; i++) {
        /* weights written where the caller said are not allocated */
        const bool lent =
            arrays[i].bit == ATTN_WANT_WEIGHTS && forward_weights_lent(cfg);
        if (!(cfg->want & arrays[i].bit) || lent)
            continue;
        floats += arrays[i].count;
        rounding += result_alloc_extra(arrays[i].count * sizeof(float),
                                       arrays[i].zeroed);
    }
    if (cfg->mode == ATTN_MODE_PROJECTED && !cfg->params) {
        struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
        const size_t n = attn_params_layout(cfg, 0, tensors);
        for (size_t i = 0; i < n; i++)
            floats += attn_param_count(&tensors[i]);
    }
    const size_t workspace = attn_workspace_bytes(cfg);
    /* a team of more than one runs on a pool, the call's own when the
     * caller gave none or its pool is busy */
    const size_t pool = attn_forward_needs_pool(cfg) ? pool_bytes() : 0;
    /* what is measured of the weights a row at a time */
    const struct paths paths = forward_paths(cfg);
    const size_t stats =
        (cfg->want & ATTN_ROW_MEASURES)
            ? row_measures_bytes(cfg, forward_team(cfg, &paths))
            : 0;
    const size_t valued =
        (cfg->want & ATTN_WANT_VALUE_WEIGHTED) ? value_weighted_bytes(cfg) : 0;
    size_t bytes;
    if (!size_mul(floats, sizeof(float), &bytes) ||
        !size_add_to(&bytes, stats) || !size_add_to(&bytes, valued) ||
        !size_add_to(&bytes, cfg->batch * cfg->n_query) ||
        !size_add_to(&bytes, workspace) || !size_add_to(&bytes, pool) ||
        !size_add_to(&bytes, rounding))
        return SIZE_MAX;
    return bytes;
}

double forward_pass_flops(const struct attn_config *cfg)
{
    const double b = (double)cfg->batch, n = (double)cfg->n_query,
                 m = (double)cfg->n_keys, h = (double)cfg->heads,
                 g = (double)cfg->kv_heads, dk = (double)cfg->d_k,
                 dv = (double)cfg->d_v;
    double per_seq = h * n * m * (dk + dv); /* QK^T and PV */
    if (cfg->mode == ATTN_MODE_PROJECTED) {
        per_seq += n * (double)cfg->d_model * h * dk;
        per_seq += (double)cfg->n_ctx * g *
                   ((double)cfg->d_ctx * dk + (double)cfg->d_value * dv);
        if (!cfg->no_out_proj)
            per_seq += n * h * dv * (double)cfg->d_out;
    }
    return 2.0 * b * per_seq;
}

double attn_flops(const struct attn_config *cfg)
{
    const double b = (double)cfg->batch, n = (double)cfg->n_query,
                 k = (double)cfg->n_keys, h = (double)cfg->heads;
    double total = forward_pass_flops(cfg);
    // the measures: a few passes over every head's weights
    if (cfg->want & ATTN_WANT_HEAD_STATS)
        total += 12.0 * b * h * n * k;
    if (cfg->want & ATTN_WANT_VALUE_WEIGHTED)
        total += value_weighted_flops(cfg);
    // a row's strongest keys: a pass over it, and a heap's few steps
    if (cfg->want & ATTN_WANT_TOP_K)
        total += 4.0 * b * h * n * k;
    return total;
}
