/*
 * bert.c - the BERT encoder's forward pass (bert.h).
 *
 * Each layer's self-attention is one attn_forward() call with the layer's
 * projections as explicit parameters (the output projection is BERT's
 * attention.output.dense). It always asks for the mean weights, so every
 * call takes the core's full path and the hidden states have the same bits
 * whatever the caller wants returned. The rest of the layer runs in four
 * phases on the same team: residual + LayerNorm by rows; the intermediate
 * product + GELU, then the output product + residual, by tiles of
 * columns (FFN_COL_TILES to a product, at most FFN_ROW_TILE rows each), so
 * that each tile's slice of the weights is packed by OpenBLAS once for
 * all of its rows; LayerNorm by rows. Units and tiles have boundaries
 * fixed by the sizes alone and write disjoint cells, so any team size
 * computes the same bits. The last layer's feed-forward half is skipped
 * when no hidden state is returned: nothing else reads it.
 *
 * Memory: the result, one workspace block (the hidden states when they are
 * not returned, the rollout's two matrices, the feed-forward's [n][H + I]),
 * and, one layer at a time, what attn_forward() holds. bert_forward_bytes()
 * adds up exactly these.
 */
#include "bert.h"
#include "checked.h"
#include "error.h"
#include "forward_plan.h"
#include "pool.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ROW_UNIT: rows per unit of the LayerNorm phases. FFN_COL_TILES: tiles
 * a product's columns are cut into, enough for a team of two or four to
 * share evenly; FFN_ROW_TILE rows at most to a tile (all of them, up to
 * bert-base's 512 positions). A tile's width is a multiple of COL_ALIGN. */
enum {
    ROW_UNIT = 64,
    FFN_COL_TILES = 4,
    FFN_ROW_TILE = 512,
    COL_ALIGN = 16,
    MAX_TEAM = POOL_MAX_MEMBERS,
    WS_ALIGN = 64
};

/* ------------------------------------------------------------ checking */

static attn_status check_size(size_t v, size_t cap, const char *field,
                              struct attn_error *err)
{
    if (v == 0 || v > cap)
        return attn_fail(err, ATTN_E_INVALID, field,
                         "%s (%zu) must be between 1 and %zu", field, v, cap);
    return ATTN_OK;
}

attn_status bert_model_check(const struct bert_model *m, struct attn_error *err)
{
    attn_status st = check_size(m->layers, BERT_MAX_LAYERS, "layers", err);
    if (!st)
        st = check_size(m->hidden, BERT_MAX_DIM, "hidden", err);
    if (!st)
        st = check_size(m->heads, m->hidden, "heads", err);
    if (!st)
        st = check_size(m->intermediate, BERT_MAX_DIM, "intermediate", err);
    if (!st)
        st = check_size(m->vocab_size, BERT_MAX_VOCAB, "vocab_size", err);
    if (!st)
        st = check_size(m->max_positions, BERT_MAX_POSITIONS, "max_positions",
                        err);
    if (!st)
        st = check_size(m->type_vocab_size, 256, "type_vocab_size", err);
    if (st)
        return st;
    if (m->hidden % m->heads)
        return attn_fail(err, ATTN_E_INVALID, "heads",
                         "heads (%zu) must divide hidden (%zu)", m->heads,
                         m->hidden);
    if (!isfinite(m->layer_norm_eps) || m->layer_norm_eps <= 0.0f)
        return attn_fail(err, ATTN_E_INVALID, "layer_norm_eps",
                         "layer_norm_eps (%g) must be finite and above 0",
                         (double)m->layer_norm_eps);
    if (m->act != BERT_ACT_GELU && m->act != BERT_ACT_GELU_TANH)
        return attn_fail(err, ATTN_E_INVALID, "act", "act (%d) is unknown",
                         (int)m->act);
    if (!m->word_emb || !m->pos_emb || !m->type_emb || !m->emb_ln_w ||
        !m->emb_ln_b || !m->layer)
        return attn_fail(err, ATTN_E_INVALID, "embeddings",
                         "an embedding tensor is missing");
    for (size_t l = 0; l < m->layers; l++) {
        const struct bert_layer *y = &m->layer[l];
        const float *all[] = {y->q_w,   y->q_b,   y->k_w,   y->k_b,
                              y->v_w,   y->v_b,   y->ao_w,  y->ao_b,
                              y->ln1_w, y->ln1_b, y->in_w,  y->in_b,
                              y->out_w, y->out_b, y->ln2_w, y->ln2_b};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (!all[i])
                return attn_fail_at(err, ATTN_E_INVALID, "layer", 1, &l,
                                    "layer %zu is missing a tensor", l);
    }
    return ATTN_OK;
}

static attn_status check_run(const struct bert_model *m,
                             const struct bert_run *run, struct attn_error *err)
{
    if (run->n == 0)
        return attn_fail(err, ATTN_E_INVALID, "ids", "the input has no tokens");
    if (run->n > m->max_positions)
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the input has %zu tokens, more than the %zu the "
                         "model has positions for (max_position_embeddings)",
                         run->n, m->max_positions);
    if (!run->ids)
        return attn_fail(err, ATTN_E_INVALID, "ids", "ids is missing");
    for (size_t i = 0; i < run->n; i++) {
        if (run->ids[i] >= m->vocab_size)
            return attn_fail_at(err, ATTN_E_INVALID, "ids", 1, &i,
                                "ids[%zu] (%u) is not below vocab_size (%zu)",
                                i, (unsigned)run->ids[i], m->vocab_size);
        if (run->type_ids && run->type_ids[i] >= m->type_vocab_size)
            return attn_fail_at(err, ATTN_E_INVALID, "type_ids", 1, &i,
                                "type_ids[%zu] (%u) is not below "
                                "type_vocab_size (%zu)",
                                i, (unsigned)run->type_ids[i],
                                m->type_vocab_size);
    }
    if (run->layer != BERT_ALL_LAYERS && run->layer >= m->layers)
        return attn_fail(err, ATTN_E_INVALID, "layer",
                         "layer (%zu) must be below the model's %zu layers",
                         run->layer, m->layers);
    return ATTN_OK;
}

/* ----------------------------------------------------------------- plan */

static unsigned want_of(const struct bert_run *run)
{
    return run->want ? run->want : BERT_WANT_WEIGHTS;
}

static size_t weight_layers(const struct bert_model *m,
                            const struct bert_run *run)
{
    return run->layer == BERT_ALL_LAYERS ? m->layers : 1;
}

/* The layers a run computes: all of them, unless it wants only one
 * layer's weights, which the layers above it cannot change. */
static size_t layers_run(const struct bert_model *m, const struct bert_run *run)
{
    const bool needs_all =
        run->layer == BERT_ALL_LAYERS ||
        (want_of(run) & (BERT_WANT_HIDDEN | BERT_WANT_ROLLOUT));
    return needs_all ? m->layers : run->layer + 1;
}

/* Does layer l hand its weights (or mean weights) to the result? */
static bool returns_layer(const struct bert_run *run, size_t l)
{
    return run->layer == BERT_ALL_LAYERS || run->layer == l;
}

/* The attention of one layer as the core's config; resolved. */
static attn_status layer_config(const struct bert_model *m,
                                const struct bert_run *run, unsigned want,
                                struct attn_config *cfg, struct attn_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = ATTN_MODE_PROJECTED;
    cfg->n_query = run->n;
    cfg->d_model = m->hidden;
    cfg->heads = m->heads;
    cfg->qkv_bias = true;
    cfg->out_bias = true;
    cfg->want = want;
    cfg->threads = run->threads;
    cfg->cancel = run->cancel;
    return attn_config_resolve(cfg, err);
}

/* Columns to a tile of a product with cols columns. */
static size_t tile_cols(size_t cols)
{
    const size_t w = (cols + FFN_COL_TILES - 1) / FFN_COL_TILES;
    return (w + COL_ALIGN - 1) / COL_ALIGN * COL_ALIGN;
}

/* Tiles of a product with cols columns over n rows. */
static size_t tile_count(size_t n, size_t cols)
{
    const size_t w = tile_cols(cols);
    return ((n + FFN_ROW_TILE - 1) / FFN_ROW_TILE) * ((cols + w - 1) / w);
}

/* The team: one thread for each of the widest phase's units or tiles at
 * most, as many as the caller allows. */
static unsigned team_size(const struct bert_model *m,
                          const struct bert_run *run)
{
    size_t units = (run->n + ROW_UNIT - 1) / ROW_UNIT;
    const size_t tiles = tile_count(run->n, m->intermediate);
    units = tiles > units ? tiles : units;
    unsigned t = run->threads ? run->threads : 1;
    if (t > MAX_TEAM)
        t = MAX_TEAM;
    if (t > units)
        t = (unsigned)units;
    return t;
}

/* The one workspace block's parts, in floats. */
enum { WS_HIDDEN, WS_ROLL_A, WS_ROLL_B, WS_FFN, WS_PARTS };

struct ws_plan {
    size_t count[WS_PARTS], offset[WS_PARTS], bytes;
    bool overflow;
};

static void ws_plan(const struct bert_model *m, const struct bert_run *run,
                    struct ws_plan *w)
{
    memset(w, 0, sizeof *w);
    const unsigned want = want_of(run);
    const size_t n = run->n;
    bool ok = true;
    if (!(want & BERT_WANT_HIDDEN))
        ok = size_mul3(2, n, m->hidden, &w->count[WS_HIDDEN]);
    if (want & BERT_WANT_ROLLOUT) {
        ok = ok && size_mul(n, n, &w->count[WS_ROLL_A]);
        w->count[WS_ROLL_B] = w->count[WS_ROLL_A];
    }
    // the residual rows after the attention, and the intermediate rows
    ok = ok && size_mul(n, m->intermediate + m->hidden, &w->count[WS_FFN]);
    for (int i = 0; i < WS_PARTS && ok; i++) {
        size_t bytes;
        w->offset[i] = w->bytes;
        ok = size_mul(w->count[i], sizeof(float), &bytes) &&
             size_add_to(&bytes, WS_ALIGN - 1) &&
             size_add_to(&w->bytes, bytes & ~(size_t)(WS_ALIGN - 1));
    }
    w->overflow = !ok;
}

/* The result's arrays, in floats. */
static bool result_counts(const struct bert_model *m,
                          const struct bert_run *run, size_t counts[4])
{
    const unsigned want = want_of(run);
    const size_t n = run->n, lw = weight_layers(m, run);
    memset(counts, 0, 4 * sizeof *counts);
    bool ok = true;
    if (want & BERT_WANT_WEIGHTS)
        ok = size_mul3(lw * m->heads, n, n, &counts[0]);
    if (want & BERT_WANT_MEAN_WEIGHTS)
        ok = ok && size_mul3(lw, n, n, &counts[1]);
    if (want & BERT_WANT_HIDDEN)
        ok = ok && size_mul3(m->layers + 1, n, m->hidden, &counts[2]);
    if (want & BERT_WANT_ROLLOUT)
        ok = ok && size_mul(n, n, &counts[3]);
    return ok;
}

/* The core's want for layer l. */
/* Does layer l's output feed anything: the next layer, or the hidden
 * states returned? */
static bool output_used(const struct bert_model *m, const struct bert_run *run,
                        size_t l)
{
    return l + 1 < layers_run(m, run) || (want_of(run) & BERT_WANT_HIDDEN);
}

/* What layer l asks of the core. Always the mean weights, so that every
 * call takes the core's full path, and the weights have the same bits
 * whether or not the output is also asked for. */
static unsigned layer_want(const struct bert_model *m,
                           const struct bert_run *run, size_t l)
{
    unsigned want = ATTN_WANT_MEAN_WEIGHTS;
    if (output_used(m, run, l))
        want |= ATTN_WANT_OUTPUT;
    if ((want_of(run) & BERT_WANT_WEIGHTS) && returns_layer(run, l))
        want |= ATTN_WANT_WEIGHTS;
    return want;
}

size_t bert_forward_bytes(const struct bert_model *m,
                          const struct bert_run *run)
{
    size_t counts[4], total = 0;
    if (!result_counts(m, run, counts))
        return SIZE_MAX;
    for (int i = 0; i < 4; i++)
        if (!size_add_to(&total, counts[i]))
            return SIZE_MAX;
    if (!size_mul(total, sizeof(float), &total))
        return SIZE_MAX;
    struct ws_plan w;
    ws_plan(m, run, &w);
    if (w.overflow || !size_add_to(&total, w.bytes))
        return SIZE_MAX;
    // the largest layer call, on bert_forward()'s pool when it needs one
    // (that pool is free whenever a layer's attention runs)
    size_t most = 0;
    unsigned seen[4], n_seen = 0; /* layer_want()'s values: four at most */
    for (size_t l = 0; l < layers_run(m, run); l++) {
        const unsigned want = layer_want(m, run, l);
        bool again = false;
        for (unsigned i = 0; i < n_seen; i++)
            again |= seen[i] == want;
        if (again)
            continue;
        if (n_seen < 4)
            seen[n_seen++] = want;
        struct attn_config cfg;
        if (layer_config(m, run, want, &cfg, NULL))
            return SIZE_MAX;
        // the layer's own projections, so the core draws none
        static const struct attn_params explicit_params;
        cfg.params = &explicit_params;
        size_t bytes = attn_forward_bytes(&cfg);
        if (bytes == SIZE_MAX)
            return SIZE_MAX;
        if (attn_forward_needs_pool(&cfg))
            bytes -= pool_bytes();
        most = bytes > most ? bytes : most;
    }
    if (!size_add_to(&total, most))
        return SIZE_MAX;
    if (team_size(m, run) > 1 && !size_add_to(&total, pool_bytes()))
        return SIZE_MAX;
    return total;
}

double bert_flops(const struct bert_model *m, const struct bert_run *run)
{
    struct attn_config cfg;
    if (layer_config(m, run, ATTN_WANT_OUTPUT | ATTN_WANT_MEAN_WEIGHTS, &cfg,
                     NULL))
        return 0.0;
    const double n = (double)run->n;
    const size_t layers = layers_run(m, run);
    // the last layer's feed-forward half only when its output is returned
    const size_t ffn_layers =
        want_of(run) & BERT_WANT_HIDDEN ? layers : layers - 1;
    double total = attn_flops(&cfg) * (double)layers +
                   4.0 * n * (double)m->hidden * (double)m->intermediate *
                       (double)ffn_layers;
    if (want_of(run) & BERT_WANT_ROLLOUT)
        total += 2.0 * n * n * n * (double)(m->layers - 1);
    return total;
}

/* ----------------------------------------------------------------- team */

/* One layer's feed-forward half: h_out = LayerNorm(x1 + W_out act(W_in x1
 * + b_in) + b_out), x1 = LayerNorm(attention + h_in). */
struct pass {
    const struct bert_model *m;
    const struct bert_run *run;
    const struct bert_layer *y;
    const float *attn_out; /* [n][H] the layer's attention output */
    const float *h_in;     /* [n][H] the layer's input */
    float *h_out;          /* [n][H] the layer's output */
    float *x1;             /* [n][H] */
    float *inter;          /* [n][I] */
    /* the phase in hand: its unit function and count */
    void (*unit)(struct pass *p, size_t unit);
    size_t n_units;
    atomic_size_t next_unit;
    atomic_bool overflowed;
};

/* Rows [*r0, *r0 + return) of unit u of a by-rows phase. */
static size_t unit_rows(const struct pass *p, size_t u, size_t *r0)
{
    *r0 = u * ROW_UNIT;
    const size_t n = p->run->n;
    return n - *r0 < ROW_UNIT ? n - *r0 : ROW_UNIT;
}

/* A tile of a product with cols columns: rows [r0, r0 + rows), columns
 * [c0, c0 + width). */
struct tile {
    size_t r0, rows, c0, width;
};

static struct tile tile_at(size_t n, size_t cols, size_t u)
{
    const size_t w = tile_cols(cols), across = (cols + w - 1) / w;
    struct tile t = {.r0 = u / across * FFN_ROW_TILE, .c0 = u % across * w};
    t.rows = n - t.r0 < FFN_ROW_TILE ? n - t.r0 : FFN_ROW_TILE;
    t.width = cols - t.c0 < w ? cols - t.c0 : w;
    return t;
}

/* x1 = LayerNorm(attention + input), by rows. */
static void residual_unit(struct pass *p, size_t u)
{
    const size_t H = p->m->hidden;
    size_t r0;
    const size_t rows = unit_rows(p, u, &r0);
    float *x1 = p->x1 + r0 * H;
    for (size_t e = 0; e < rows * H; e++)
        x1[e] = p->attn_out[r0 * H + e] + p->h_in[r0 * H + e];
    bert_layer_norm(x1, rows, H, p->y->ln1_w, p->y->ln1_b, p->m->layer_norm_eps,
                    x1);
}

/* inter = act(x1 W_in^T + b_in), a tile of it. (IW, not I: cblas.h
 * brings complex.h's I.) */
static void intermediate_tile(struct pass *p, size_t u)
{
    const size_t H = p->m->hidden, IW = p->m->intermediate;
    const struct tile t = tile_at(p->run->n, IW, u);
    float *inter = p->inter + t.r0 * IW + t.c0;
    for (size_t r = 0; r < t.rows; r++)
        memcpy(inter + r * IW, p->y->in_b + t.c0, t.width * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t.rows,
                (int)t.width, (int)H, 1.0f, p->x1 + t.r0 * H, (int)H,
                p->y->in_w + t.c0 * H, (int)H, 1.0f, inter, (int)IW);
    for (size_t r = 0; r < t.rows; r++)
        bert_activation(p->m->act, inter + r * IW, t.width);
}

/* h_out = inter W_out^T + b_out + x1, a tile of it. */
static void output_tile(struct pass *p, size_t u)
{
    const size_t H = p->m->hidden, IW = p->m->intermediate;
    const struct tile t = tile_at(p->run->n, H, u);
    float *out = p->h_out + t.r0 * H + t.c0;
    const float *x1 = p->x1 + t.r0 * H + t.c0;
    for (size_t r = 0; r < t.rows; r++)
        for (size_t c = 0; c < t.width; c++)
            out[r * H + c] = p->y->out_b[t.c0 + c] + x1[r * H + c];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t.rows,
                (int)t.width, (int)IW, 1.0f, p->inter + t.r0 * IW, (int)IW,
                p->y->out_w + t.c0 * IW, (int)IW, 1.0f, out, (int)H);
}

/* h_out = LayerNorm(h_out), by rows, and a look for overflow. */
static void norm_unit(struct pass *p, size_t u)
{
    const size_t H = p->m->hidden;
    size_t r0;
    const size_t rows = unit_rows(p, u, &r0);
    float *out = p->h_out + r0 * H;
    bert_layer_norm(out, rows, H, p->y->ln2_w, p->y->ln2_b,
                    p->m->layer_norm_eps, out);
    for (size_t e = 0; e < rows * H; e++)
        if (!isfinite(out[e]))
            atomic_store(&p->overflowed, true);
}

static void member_run(void *arg, unsigned member)
{
    (void)member;
    struct pass *p = arg;
    for (;;) {
        if (p->run->cancel &&
            atomic_load_explicit(p->run->cancel, memory_order_relaxed))
            return;
        const size_t u = atomic_fetch_add(&p->next_unit, 1);
        if (u >= p->n_units)
            return;
        p->unit(p, u);
    }
}

/* One phase: n_units calls of unit on the team (pool's threads, team of
 * them), or on the calling thread alone without a pool. */
static void run_phase(struct pass *p, struct attn_pool *pool, unsigned team,
                      void (*unit)(struct pass *, size_t), size_t n_units)
{
    p->unit = unit;
    p->n_units = n_units;
    atomic_store(&p->next_unit, 0);
    const unsigned members = team < n_units ? team : (unsigned)n_units;
    if (pool && members > 1)
        pool_run(pool, members, member_run, p);
    else
        member_run(p, 0);
}

/* The feed-forward half of a layer, on the team. */
static void feed_forward(struct pass *p, struct attn_pool *pool, unsigned team)
{
    const size_t n = p->run->n;
    const size_t rows = (n + ROW_UNIT - 1) / ROW_UNIT;
    run_phase(p, pool, team, residual_unit, rows);
    run_phase(p, pool, team, intermediate_tile,
              tile_count(n, p->m->intermediate));
    run_phase(p, pool, team, output_tile, tile_count(n, p->m->hidden));
    run_phase(p, pool, team, norm_unit, rows);
}

/* ---------------------------------------------------------------- pass */

static void embed(const struct bert_model *m, const struct bert_run *run,
                  float *h)
{
    const size_t H = m->hidden;
    for (size_t i = 0; i < run->n; i++) {
        const float *w = m->word_emb + (size_t)run->ids[i] * H;
        const float *p = m->pos_emb + i * H;
        const float *t =
            m->type_emb + (size_t)(run->type_ids ? run->type_ids[i] : 0) * H;
        // in BertEmbeddings' order: (word + token type) + position
        for (size_t c = 0; c < H; c++)
            h[i * H + c] = (w[c] + t[c]) + p[c];
    }
    bert_layer_norm(h, run->n, H, m->emb_ln_w, m->emb_ln_b, m->layer_norm_eps,
                    h);
}

/* r = Ahat r (r = Ahat for the first layer), Ahat = 0.5 mean + 0.5 I with
 * each row divided by its sum. ahat and prod: [n][n] scratch. */
static void rollout_step(const float *mean, size_t n, bool first, float *r,
                         float *ahat, float *prod)
{
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (size_t j = 0; j < n; j++) {
            ahat[i * n + j] = 0.5f * mean[i * n + j] + (i == j ? 0.5f : 0.0f);
            sum += ahat[i * n + j];
        }
        const float inv = (float)(1.0 / sum);
        for (size_t j = 0; j < n; j++)
            ahat[i * n + j] *= inv;
    }
    if (first) {
        memcpy(r, ahat, n * n * sizeof *r);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n,
                (int)n, 1.0f, ahat, (int)n, r, (int)n, 0.0f, prod, (int)n);
    memcpy(r, prod, n * n * sizeof *r);
}

static void result_free_arrays(struct bert_result *r)
{
    free(r->weights);
    free(r->mean_weights);
    free(r->hidden_states);
    free(r->rollout);
    memset(r, 0, sizeof *r);
}

void bert_result_free(struct bert_result *result)
{
    if (result)
        result_free_arrays(result);
}

static attn_status result_init(const struct bert_model *m,
                               const struct bert_run *run,
                               struct bert_result *r, struct attn_error *err)
{
    size_t counts[4];
    if (!result_counts(m, run, counts))
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the result for %zu tokens is too large", run->n);
    float **slots[4] = {&r->weights, &r->mean_weights, &r->hidden_states,
                        &r->rollout};
    for (int i = 0; i < 4; i++) {
        if (!counts[i])
            continue;
        *slots[i] = malloc(counts[i] * sizeof(float));
        if (!*slots[i]) {
            result_free_arrays(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the result of %zu tokens",
                             run->n);
        }
    }
    r->layers = m->layers;
    r->weight_layers = weight_layers(m, run);
    r->heads = m->heads;
    r->n = run->n;
    r->hidden = m->hidden;
    return ATTN_OK;
}

/* What every layer of one bert_forward() call shares. */
struct encoder {
    const struct bert_model *m;
    const struct bert_run *run;
    struct bert_result *out;
    float *ffn;             /* the feed-forward's [n][H + I] */
    struct attn_pool *pool; /* the call's own, NULL for a team of one */
    unsigned team;
    size_t layers; /* layers_run() */
};

/* Layer l: attention through the core, then the feed-forward half when
 * its output is used; h_in -> h_out, the weights and mean weights into
 * the result. */
static attn_status run_layer(struct encoder *e, size_t l, const float *h_in,
                             float *h_out, struct attn_result *attn,
                             struct attn_error *err)
{
    const struct bert_model *m = e->m;
    const struct bert_run *run = e->run;
    const struct bert_layer *y = &m->layer[l];
    const bool used = output_used(m, run, l);
    struct attn_config cfg;
    attn_status st = layer_config(m, run, layer_want(m, run, l), &cfg, err);
    if (st)
        return st;
    const struct attn_params params = {
        .wq = y->q_w,
        .bq = y->q_b,
        .wk = y->k_w,
        .bk = y->k_b,
        .wv = y->v_w,
        .bv = y->v_b,
        .wo = y->ao_w,
        .bo = y->ao_b,
    };
    cfg.params = &params;
    /* a model's values are checked once, by its loader (bert.h), not on
     * every layer of every call */
    cfg.params_checked = true;
    cfg.pool = e->pool;
    st = attn_forward(&cfg, h_in, NULL, attn, err);
    if (st) {
        if (st == ATTN_E_CANCELLED || !err)
            return st;
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return attn_fail_at(err, st, "layer", 1, &l, "layer %zu: %s", l, why);
    }
    const size_t n = run->n, nn = n * n;
    const size_t at = run->layer == BERT_ALL_LAYERS ? l : 0;
    if (e->out->weights && returns_layer(run, l))
        memcpy(e->out->weights + at * m->heads * nn, attn->weights,
               m->heads * nn * sizeof(float));
    if (e->out->mean_weights && returns_layer(run, l))
        memcpy(e->out->mean_weights + at * nn, attn->mean_weights,
               nn * sizeof(float));
    if (!used)
        return ATTN_OK;

    struct pass p = {.m = m,
                     .run = run,
                     .y = y,
                     .attn_out = attn->output,
                     .h_in = h_in,
                     .h_out = h_out,
                     .x1 = e->ffn,
                     .inter = e->ffn + n * m->hidden};
    atomic_store(&p.overflowed, false);
    // the pool is the call's own: attn_forward() has given it back
    if (e->pool)
        pool_acquire(e->pool);
    feed_forward(&p, e->pool, e->team);
    if (e->pool)
        pool_release(e->pool);
    if (run->cancel && atomic_load(run->cancel))
        return attn_fail(err, ATTN_E_CANCELLED, "",
                         "the computation was cancelled");
    if (atomic_load(&p.overflowed))
        return attn_fail_at(err, ATTN_E_INPUT, "layer", 1, &l,
                            "layer %zu: the activations overflow float32; "
                            "the model's weights are too large",
                            l);
    return ATTN_OK;
}

attn_status bert_forward(const struct bert_model *m, const struct bert_run *run,
                         struct bert_result *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    attn_status st = bert_model_check(m, err);
    if (!st)
        st = check_run(m, run, err);
    if (st)
        return st;
    struct encoder e = {.m = m,
                        .run = run,
                        .out = out,
                        .team = team_size(m, run),
                        .layers = layers_run(m, run)};
    struct ws_plan w;
    ws_plan(m, run, &w);
    if (w.overflow)
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the scratch memory for %zu tokens is too large",
                         run->n);
    st = result_init(m, run, out, err);
    if (st)
        return st;
    char *block = aligned_alloc(WS_ALIGN, w.bytes ? w.bytes : WS_ALIGN);
    if (!block) {
        bert_result_free(out);
        return attn_fail(err, ATTN_E_NOMEM, "ids",
                         "out of memory for %zu bytes of scratch", w.bytes);
    }
    struct attn_pool *own_pool = NULL;
    st = pool_take(NULL, e.team, &e.pool, &own_pool, err);
    if (st) {
        free(block);
        bert_result_free(out);
        return st;
    }
    float *ws[WS_PARTS];
    for (int i = 0; i < WS_PARTS; i++)
        ws[i] = (float *)(block + w.offset[i]);
    e.ffn = ws[WS_FFN];

    const size_t nh = run->n * m->hidden;
    // hidden state l lives in the result, or in one of two scratch rows
    float *hidden = out->hidden_states;
#define STATE(l) (hidden ? hidden + (l)*nh : ws[WS_HIDDEN] + ((l) % 2) * nh)
    embed(m, run, STATE(0));
    for (size_t l = 0; l < e.layers && !st; l++) {
        struct attn_result attn = {0};
        st = run_layer(&e, l, STATE(l), STATE(l + 1), &attn, err);
        if (!st && (want_of(run) & BERT_WANT_ROLLOUT))
            rollout_step(attn.mean_weights, run->n, l == 0, out->rollout,
                         ws[WS_ROLL_A], ws[WS_ROLL_B]);
        attn_result_free(&attn);
    }
#undef STATE
    pool_give_back(e.pool, own_pool);
    free(block);
    if (st)
        bert_result_free(out);
    return st;
}
