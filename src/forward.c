/*
 * forward.c - the multi-head attention forward pass.
 *
 * One call walks the batch; for each sequence it projects K and V once,
 * then walks the queries in blocks of QUERY_BLOCK rows: project Q, run every
 * head, project the output. Products go to cblas_sgemm with leading
 * dimensions, so a head is addressed inside the [rows][heads * d] matrices
 * rather than copied out.
 *
 * Each head takes one of two paths:
 *  - full: when weights, scores or their mean are wanted, the [rows][M]
 *    tile is formed, masked and normalised (straight into the result when
 *    the caller asked for weights);
 *  - streaming: otherwise keys are taken KEY_BLOCK at a time with an online
 *    softmax, so nothing of size N x M ever exists.
 *
 * All scratch memory is sized up front and allocated once per call.
 */
#include "attention.h"
#include "checked.h"
#include "error.h"
#include "params.h"
#include "posenc.h"
#include "rng.h"
#include "softmax.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { QUERY_BLOCK = 256, KEY_BLOCK = 512, WS_ALIGN = 64 };

/* Which keys one sequence's queries may see. */
struct mask_view {
    bool causal;
    const uint8_t *mask;        /* [N][M] or NULL; nonzero = may attend */
    const uint8_t *key_padding; /* [M] or NULL; nonzero = ignore */
    size_t n_ctx;
};

/* Scratch for one call; pointers not needed by the config stay NULL. */
struct workspace {
    void *block;
    float *x_pe, *c_pe;  /* [N][d_model], [M][d_ctx]: inputs + positions */
    float *k, *v;        /* [M][g*d_k], [M][g*d_v] when not returned      */
    float *q;            /* [QUERY_BLOCK][h*d_k] when not returned         */
    float *heads;        /* [QUERY_BLOCK][h*d_v] when not returned         */
    float *tile;         /* [QUERY_BLOCK][tile_ld]                         */
    struct softmax_online *online; /* [QUERY_BLOCK]                        */
    size_t tile_ld;
};

/* State shared by every block of one call. */
struct forward {
    const struct attn_config *cfg;
    const struct attn_params *p;
    struct attn_result *res;
    struct workspace ws;
    bool full_path, need_pv;
    float scale;
    uint64_t dropout_key;
};

/* --------------------------------------------------------------- helpers */

/* y[r] = x[r] * w^T + bias for r < rows.  x: [rows][in] (ld in),
 * w: [out][in], y: [rows][ldy]. */
static void linear(const float *x, size_t rows, size_t in, const float *w,
                   const float *bias, size_t out, float *y, size_t ldy)
{
    if (bias)
        for (size_t r = 0; r < rows; r++)
            memcpy(y + r * ldy, bias, out * sizeof *y);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out,
                (int)in, 1.0f, x, (int)in, w, (int)in, bias ? 1.0f : 0.0f, y,
                (int)ldy);
}

static void mask_row(const struct mask_view *mv, size_t i, size_t j0,
                     float *s, size_t nj)
{
    if (mv->causal && j0 + nj > i + 1) {
        const size_t from = i + 1 > j0 ? i + 1 - j0 : 0;
        for (size_t j = from; j < nj; j++)
            s[j] = -INFINITY;
    }
    if (mv->mask) {
        const uint8_t *allowed = mv->mask + i * mv->n_ctx + j0;
        for (size_t j = 0; j < nj; j++)
            if (!allowed[j])
                s[j] = -INFINITY;
    }
    if (mv->key_padding) {
        const uint8_t *ignore = mv->key_padding + j0;
        for (size_t j = 0; j < nj; j++)
            if (ignore[j])
                s[j] = -INFINITY;
    }
}

/* Inverted dropout on p[j], the pair (b, head, i, j0 + j): README "Dropout". */
static void dropout_row(const struct forward *f, size_t b, size_t head,
                        size_t i, size_t j0, float *p, size_t nj)
{
    const struct attn_config *cfg = f->cfg;
    const float rate = cfg->dropout, keep_scale = 1.0f / (1.0f - rate);
    const uint64_t base =
        ((b * cfg->heads + head) * cfg->n_query + i) * cfg->n_ctx + j0;
    for (size_t j = 0; j < nj; j++)
        p[j] = rng_unit(f->dropout_key, base + j) >= rate ? p[j] * keep_scale
                                                          : 0.0f;
}

static const char *nonfinite_name(float v)
{
    return isnan(v) ? "NaN" : "Inf";
}

static attn_status check_finite(const float *a, size_t rows, size_t cols,
                                size_t batch, const char *field,
                                struct attn_error *err)
{
    for (size_t b = 0; b < batch; b++)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                const float v = a[(b * rows + r) * cols + c];
                if (isfinite(v))
                    continue;
                const size_t at[3] = {b, r, c};
                return attn_fail_at(err, ATTN_E_INPUT, field, 3, at,
                                    "%s[%zu][%zu][%zu] is %s", field, b, r, c,
                                    nonfinite_name(v));
            }
    return ATTN_OK;
}

/* --------------------------------------------------------- memory plans */

struct plan {
    size_t bytes;
    bool overflow;
};

/* Reserve count elements of elem bytes, recording the offset in *offset. */
static void plan_take(struct plan *pl, size_t *offset, size_t count,
                      size_t elem)
{
    size_t bytes;
    if (!size_mul(count, elem, &bytes) || !size_add_to(&bytes, WS_ALIGN - 1)) {
        pl->overflow = true;
        return;
    }
    *offset = pl->bytes;
    if (!size_add_to(&pl->bytes, bytes & ~(size_t)(WS_ALIGN - 1)))
        pl->overflow = true;
}

static attn_status workspace_init(struct forward *f, struct attn_error *err)
{
    const struct attn_config *c = f->cfg;
    const unsigned want = c->want;
    const bool projected = c->mode == ATTN_MODE_PROJECTED;
    const size_t qb = c->n_query < QUERY_BLOCK ? c->n_query : QUERY_BLOCK;
    struct workspace *ws = &f->ws;
    ws->tile_ld = f->full_path ? c->n_ctx
                               : (c->n_ctx < KEY_BLOCK ? c->n_ctx : KEY_BLOCK);

    enum { X_PE, C_PE, K, V, Q, HEADS, TILE, ONLINE, N_PARTS };
    size_t count[N_PARTS] = {0}, elem[N_PARTS], offset[N_PARTS] = {0};
    for (int i = 0; i < N_PARTS; i++)
        elem[i] = sizeof(float);
    elem[ONLINE] = sizeof(struct softmax_online);
    if (c->positional == ATTN_POS_SINUSOIDAL) {
        count[X_PE] = c->n_query * c->d_model;
        if (c->cross)
            count[C_PE] = c->n_ctx * c->d_ctx;
    }
    if (projected && !(want & ATTN_WANT_K))
        count[K] = c->n_ctx * c->kv_heads * c->d_k;
    if (projected && !(want & ATTN_WANT_V))
        count[V] = c->n_ctx * c->kv_heads * c->d_v;
    if (projected && !(want & ATTN_WANT_Q))
        count[Q] = qb * c->heads * c->d_k;
    if (f->need_pv && !(want & ATTN_WANT_HEADS))
        count[HEADS] = qb * c->heads * c->d_v;
    if (!f->full_path || (want & ATTN_WANT_WEIGHTS) == 0)
        if (!size_mul(qb, ws->tile_ld, &count[TILE]))
            count[TILE] = SIZE_MAX;
    if (!f->full_path)
        count[ONLINE] = qb;

    struct plan pl = {0, false};
    for (int i = 0; i < N_PARTS; i++)
        if (count[i])
            plan_take(&pl, &offset[i], count[i], elem[i]);
    if (pl.overflow)
        return attn_fail(err, ATTN_E_TOO_BIG, "n_query",
                         "the scratch memory for this input is too large");
    if (pl.bytes == 0)
        return ATTN_OK;
    ws->block = aligned_alloc(WS_ALIGN, pl.bytes);
    if (!ws->block)
        return attn_fail(err, ATTN_E_NOMEM, "n_query",
                         "out of memory for %zu bytes of scratch", pl.bytes);
    char *base = ws->block;
    float **slots[] = {&ws->x_pe, &ws->c_pe, &ws->k, &ws->v,
                       &ws->q,    &ws->heads, &ws->tile};
    for (int i = 0; i < ONLINE; i++)
        if (count[i])
            *slots[i] = (float *)(void *)(base + offset[i]);
    if (count[ONLINE])
        ws->online = (struct softmax_online *)(void *)(base + offset[ONLINE]);
    return ATTN_OK;
}

/* Allocate the arrays the caller asked for. */
static attn_status result_init(const struct attn_config *c,
                               struct attn_result *res, struct attn_error *err)
{
    memset(res, 0, sizeof *res);
    res->batch = c->batch;
    res->n_query = c->n_query;
    res->n_ctx = c->n_ctx;
    res->heads = c->heads;
    res->kv_heads = c->kv_heads;
    res->d_k = c->d_k;
    res->d_v = c->d_v;
    res->d_out = c->d_out;
    const size_t b = c->batch, n = c->n_query, m = c->n_ctx;
    const size_t h = c->heads, g = c->kv_heads;
    const struct {
        unsigned bit;
        float **slot;
        size_t count;
        bool zeroed;
    } arrays[] = {
        {ATTN_WANT_WEIGHTS, &res->weights, b * h * n * m, false},
        {ATTN_WANT_SCORES, &res->scores, b * h * n * m, false},
        {ATTN_WANT_MEAN_WEIGHTS, &res->mean_weights, b * n * m, true},
        {ATTN_WANT_Q, &res->q, b * n * h * c->d_k, false},
        {ATTN_WANT_K, &res->k, b * m * g * c->d_k, false},
        {ATTN_WANT_V, &res->v, b * m * g * c->d_v, false},
        {ATTN_WANT_HEADS, &res->heads_out, b * n * h * c->d_v, false},
        {ATTN_WANT_OUTPUT, &res->output, b * n * c->d_out, false},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        if (!(c->want & arrays[i].bit))
            continue;
        *arrays[i].slot = arrays[i].zeroed
                              ? calloc(arrays[i].count, sizeof(float))
                              : malloc(arrays[i].count * sizeof(float));
        if (!*arrays[i].slot)
            goto nomem;
    }
    res->fully_masked = calloc(b * n, 1);
    if (!res->fully_masked)
        goto nomem;
    return ATTN_OK;
nomem:
    attn_result_free(res);
    return attn_fail(err, ATTN_E_NOMEM, "return",
                     "out of memory for the requested arrays");
}

void attn_result_free(struct attn_result *result)
{
    if (!result)
        return;
    free(result->weights);
    free(result->scores);
    free(result->mean_weights);
    free(result->q);
    free(result->k);
    free(result->v);
    free(result->heads_out);
    free(result->output);
    free(result->fully_masked);
    memset(result, 0, sizeof *result);
}

/* ------------------------------------------------------------ one head */

/* Views of one query block of one sequence. */
struct block {
    size_t b, r0, rows;
    struct mask_view mv;
    const float *q, *k, *v; /* q: [rows][ldq]; k, v: [M][ldk], [M][ldv] */
    size_t ldq, ldk, ldv;
    float *heads;           /* [rows][h * d_v] */
};

/* Full path: form the [rows][M] tile, mask, softmax, dropout, then P * V. */
static void head_full(struct forward *f, const struct block *bk, size_t a,
                      size_t g)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx, h = c->heads, dk = c->d_k, dv = c->d_v;
    const size_t at = ((bk->b * h + a) * c->n_query + bk->r0) * m;
    float *w = (c->want & ATTN_WANT_WEIGHTS) ? f->res->weights + at
                                             : f->ws.tile;
    float *s = (c->want & ATTN_WANT_SCORES) ? f->res->scores + at : w;

    // S = scale * Q_a * K_g^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bk->rows,
                (int)m, (int)dk, f->scale, bk->q + a * dk, (int)bk->ldq,
                bk->k + g * dk, (int)bk->ldk, 0.0f, s, (int)m);
    if (s != w)
        memcpy(w, s, bk->rows * m * sizeof *w);
    for (size_t r = 0; r < bk->rows; r++) {
        float *row = w + r * m;
        const size_t i = bk->r0 + r;
        mask_row(&bk->mv, i, 0, row, m);
        if (!softmax_row(row, m))
            f->res->fully_masked[bk->b * c->n_query + i] = 1;
        else if (c->dropout > 0.0f)
            dropout_row(f, bk->b, a, i, 0, row, m);
    }
    if (c->want & ATTN_WANT_MEAN_WEIGHTS) {
        float *mean = f->res->mean_weights + (bk->b * c->n_query + bk->r0) * m;
        for (size_t e = 0; e < bk->rows * m; e++)
            mean[e] += w[e];
    }
    if (f->need_pv)
        // head_a = P * V_g
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk->rows,
                    (int)dv, (int)m, 1.0f, w, (int)m, bk->v + g * dv,
                    (int)bk->ldv, 0.0f, bk->heads + a * dv, (int)(h * dv));
}

/* Streaming path: keys in blocks, online softmax, nothing [N][M] held. */
static void head_streaming(struct forward *f, const struct block *bk,
                           size_t a, size_t g)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx, h = c->heads, dk = c->d_k, dv = c->d_v;
    const size_t ldh = h * dv, ldt = f->ws.tile_ld;
    float *out = bk->heads + a * dv;
    float *tile = f->ws.tile;
    struct softmax_online *online = f->ws.online;

    for (size_t r = 0; r < bk->rows; r++) {
        memset(out + r * ldh, 0, dv * sizeof *out);
        softmax_online_init(&online[r]);
    }
    const size_t last_row = bk->r0 + bk->rows - 1;
    for (size_t j0 = 0; j0 < m; j0 += ldt) {
        if (c->causal && j0 > last_row)
            break; /* every later key is in every row's future */
        const size_t nj = m - j0 < ldt ? m - j0 : ldt;
        // S = scale * Q_a * K_g[j0 : j0 + nj]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bk->rows,
                    (int)nj, (int)dk, f->scale, bk->q + a * dk, (int)bk->ldq,
                    bk->k + j0 * bk->ldk + g * dk, (int)bk->ldk, 0.0f, tile,
                    (int)ldt);
        for (size_t r = 0; r < bk->rows; r++) {
            float *row = tile + r * ldt;
            const size_t i = bk->r0 + r;
            mask_row(&bk->mv, i, j0, row, nj);
            const float rescale = softmax_online_block(&online[r], row, nj);
            if (rescale != 1.0f)
                cblas_sscal((int)dv, rescale, out + r * ldh, 1);
            if (c->dropout > 0.0f)
                dropout_row(f, bk->b, a, i, j0, row, nj);
        }
        // head_a += exp(S - max) * V_g[j0 : j0 + nj]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk->rows,
                    (int)dv, (int)nj, 1.0f, tile, (int)ldt,
                    bk->v + j0 * bk->ldv + g * dv, (int)bk->ldv, 1.0f, out,
                    (int)ldh);
    }
    for (size_t r = 0; r < bk->rows; r++) {
        if (online[r].sum == 0.0) {
            f->res->fully_masked[bk->b * c->n_query + bk->r0 + r] = 1;
            continue; /* its head output stayed all zero */
        }
        cblas_sscal((int)dv, (float)(1.0 / online[r].sum), out + r * ldh, 1);
    }
}

/* ------------------------------------------------------ one query block */

static void block_output(struct forward *f, const struct block *bk,
                         const float *x_pe)
{
    const struct attn_config *c = f->cfg;
    const size_t d_out = c->d_out, hv = c->heads * c->d_v;
    float *o = f->res->output + (bk->b * c->n_query + bk->r0) * d_out;
    if (c->mode == ATTN_MODE_PROJECTED && !c->no_out_proj)
        linear(bk->heads, bk->rows, hv, f->p->wo, f->p->bo, d_out, o, d_out);
    else
        memcpy(o, bk->heads, bk->rows * d_out * sizeof *o);

    if (c->residual == ATTN_RESIDUAL_VALUE) {
        const size_t group = c->heads / c->kv_heads, dv = c->d_v;
        for (size_t r = 0; r < bk->rows; r++)
            for (size_t a = 0; a < c->heads; a++) {
                const float *v = bk->v + (bk->r0 + r) * bk->ldv + (a / group) * dv;
                float *dst = o + r * d_out + a * dv;
                for (size_t e = 0; e < dv; e++)
                    dst[e] += v[e];
            }
    } else if (c->residual == ATTN_RESIDUAL_INPUT) {
        const float *x = x_pe + bk->r0 * c->d_model;
        for (size_t e = 0; e < bk->rows * d_out; e++)
            o[e] += x[e];
    }
}

static void run_block(struct forward *f, struct block *bk, const float *x_pe)
{
    const struct attn_config *c = f->cfg;
    const size_t hk = c->heads * c->d_k, hv = c->heads * c->d_v;
    const size_t row0 = bk->b * c->n_query + bk->r0;

    if (c->mode == ATTN_MODE_PROJECTED) {
        float *q = (c->want & ATTN_WANT_Q) ? f->res->q + row0 * hk : f->ws.q;
        linear(x_pe + bk->r0 * c->d_model, bk->rows, c->d_model, f->p->wq,
               f->p->bq, hk, q, hk);
        if (c->positional == ATTN_POS_ROPE)
            posenc_apply_rope(q, bk->rows, hk, c->heads, c->d_k, bk->r0,
                              c->rope_base);
        bk->q = q;
        bk->ldq = hk;
    } else {
        bk->q = x_pe + bk->r0 * c->d_model;
        bk->ldq = c->d_model;
        if (c->want & ATTN_WANT_Q)
            memcpy(f->res->q + row0 * hk, bk->q, bk->rows * hk * sizeof(float));
    }
    bk->heads = (c->want & ATTN_WANT_HEADS) ? f->res->heads_out + row0 * hv
                                            : f->ws.heads;

    const size_t group = c->heads / c->kv_heads;
    for (size_t a = 0; a < c->heads; a++) {
        if (f->full_path)
            head_full(f, bk, a, a / group);
        else
            head_streaming(f, bk, a, a / group);
    }
    if (c->want & ATTN_WANT_MEAN_WEIGHTS) {
        float *mean = f->res->mean_weights + row0 * c->n_ctx;
        for (size_t e = 0; e < bk->rows * c->n_ctx; e++)
            mean[e] /= (float)c->heads;
    }
    if (c->want & ATTN_WANT_OUTPUT)
        block_output(f, bk, x_pe);
}

/* --------------------------------------------------------- one sequence */

/* x_b plus sinusoidal positions when asked, else x_b itself. */
static const float *with_positions(const struct attn_config *c,
                                   const float *x_b, float *scratch, size_t n,
                                   size_t d)
{
    if (c->positional != ATTN_POS_SINUSOIDAL)
        return x_b;
    memcpy(scratch, x_b, n * d * sizeof *scratch);
    posenc_add_sinusoidal(scratch, n, d, 0);
    return scratch;
}

/* K and V for sequence b: projected (and rotated) into the result or the
 * workspace, or, in basic mode, the context itself. */
static void project_kv(struct forward *f, size_t b, const float *c_pe,
                       struct block *bk)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx, gk = c->kv_heads * c->d_k,
                 gv = c->kv_heads * c->d_v;
    if (c->mode == ATTN_MODE_BASIC) {
        bk->k = bk->v = c_pe;
        bk->ldk = bk->ldv = c->d_ctx;
        if (c->want & ATTN_WANT_K)
            memcpy(f->res->k + b * m * gk, c_pe, m * gk * sizeof(float));
        if (c->want & ATTN_WANT_V)
            memcpy(f->res->v + b * m * gv, c_pe, m * gv * sizeof(float));
        return;
    }
    float *k = (c->want & ATTN_WANT_K) ? f->res->k + b * m * gk : f->ws.k;
    float *v = (c->want & ATTN_WANT_V) ? f->res->v + b * m * gv : f->ws.v;
    linear(c_pe, m, c->d_ctx, f->p->wk, f->p->bk, gk, k, gk);
    linear(c_pe, m, c->d_ctx, f->p->wv, f->p->bv, gv, v, gv);
    if (c->positional == ATTN_POS_ROPE)
        posenc_apply_rope(k, m, gk, c->kv_heads, c->d_k, 0, c->rope_base);
    bk->k = k;
    bk->v = v;
    bk->ldk = gk;
    bk->ldv = gv;
}

static void run_sequence(struct forward *f, size_t b, const float *x,
                         const float *context)
{
    const struct attn_config *c = f->cfg;
    const size_t n = c->n_query, m = c->n_ctx;
    const float *x_pe = with_positions(c, x + b * n * c->d_model, f->ws.x_pe,
                                       n, c->d_model);
    const float *c_pe =
        context ? with_positions(c, context + b * m * c->d_ctx, f->ws.c_pe, m,
                                 c->d_ctx)
                : x_pe;
    struct block bk = {.b = b};
    bk.mv = (struct mask_view){
        .causal = c->causal,
        .mask = c->mask ? c->mask + (c->mask_batched ? b * n * m : 0) : NULL,
        .key_padding = c->key_padding
                           ? c->key_padding + (c->key_padding_batched ? b * m : 0)
                           : NULL,
        .n_ctx = m,
    };
    project_kv(f, b, c_pe, &bk);
    for (size_t r0 = 0; r0 < n; r0 += QUERY_BLOCK) {
        bk.r0 = r0;
        bk.rows = n - r0 < QUERY_BLOCK ? n - r0 : QUERY_BLOCK;
        run_block(f, &bk, x_pe);
    }
}

/* ---------------------------------------------------------------- entry */

attn_status attn_forward(const struct attn_config *cfg_in, const float *x,
                         const float *context, struct attn_result *out,
                         struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    struct attn_config cfg = *cfg_in;
    attn_status st = attn_config_resolve(&cfg, err);
    if (st)
        return st;
    if (!x)
        return attn_fail(err, ATTN_E_INVALID, "x", "x is missing");
    if (cfg.cross != (context != NULL))
        return attn_fail(err, ATTN_E_INVALID, "context",
                         cfg.cross ? "the config expects a context but none "
                                     "was given"
                                   : "a context was given but the config is "
                                     "self-attention");
    st = check_finite(x, cfg.n_query, cfg.d_model, cfg.batch, "x", err);
    if (!st && context)
        st = check_finite(context, cfg.n_ctx, cfg.d_ctx, cfg.batch, "context",
                          err);
    if (st)
        return st;

    struct attn_params drawn = {0};
    struct forward f = {.cfg = &cfg, .res = out};
    if (cfg.mode == ATTN_MODE_PROJECTED) {
        if (cfg.params) {
            st = params_check(&cfg, cfg.params, err);
            f.p = cfg.params;
        } else {
            st = attn_params_draw(&cfg, &drawn, err);
            f.p = &drawn;
        }
        if (st)
            return st;
    }
    f.full_path = cfg.want & (ATTN_WANT_WEIGHTS | ATTN_WANT_SCORES |
                              ATTN_WANT_MEAN_WEIGHTS);
    f.need_pv = cfg.want & (ATTN_WANT_HEADS | ATTN_WANT_OUTPUT);
    f.scale = cfg.has_scale ? cfg.scale
              : cfg.mode == ATTN_MODE_BASIC
                  ? 1.0f
                  : (float)(1.0 / sqrt((double)cfg.d_k));
    f.dropout_key = attn_stream_key(cfg.seed, "dropout", strlen("dropout"));

    st = workspace_init(&f, err);
    if (!st)
        st = result_init(&cfg, out, err);
    if (!st) {
        for (size_t b = 0; b < cfg.batch; b++)
            run_sequence(&f, b, x, context);
        for (size_t i = 0; i < cfg.batch * cfg.n_query; i++)
            out->n_fully_masked += out->fully_masked[i];
    }
    free(f.ws.block);
    attn_params_free(&drawn);
    return st;
}
