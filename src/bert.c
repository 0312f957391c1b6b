/*
 * bert.c - the BERT encoder's forward pass (bert.h).
 *
 * Each layer's self-attention is one attn_forward() call with the layer's
 * projections as explicit parameters (the output projection is BERT's
 * attention.output.dense). It always asks for the mean weights, so every
 * call takes the core's full path and the hidden states have the same bits
 * whatever the caller wants returned. The rest of the layer runs in units
 * of ROW_BLOCK rows: residual + LayerNorm, the feed-forward products
 * through cblas_sgemm, residual + LayerNorm. Units have fixed boundaries
 * and write disjoint rows, so any team size computes the same bits.
 *
 * Memory: the result, one workspace block (the hidden states when they are
 * not returned, the rollout's two matrices, per-thread feed-forward rows),
 * and, one layer at a time, what attn_forward() holds. bert_forward_bytes()
 * adds up exactly these.
 */
#include "bert.h"
#include "checked.h"
#include "error.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ROW_BLOCK: rows per feed-forward unit; large enough for sgemm to run
 * near its peak, small enough that 128 tokens still make two units. */
enum { ROW_BLOCK = 64, MAX_TEAM = 64, WS_ALIGN = 64 };

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

static unsigned team_size(const struct bert_run *run)
{
    const size_t units = (run->n + ROW_BLOCK - 1) / ROW_BLOCK;
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
                    unsigned team, struct ws_plan *w)
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
    // per thread: a block's intermediate rows and its residual rows
    ok = ok && size_mul3(team, ROW_BLOCK, m->intermediate + m->hidden,
                         &w->count[WS_FFN]);
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
static unsigned layer_want(const struct bert_run *run, size_t l)
{
    unsigned want = ATTN_WANT_OUTPUT | ATTN_WANT_MEAN_WEIGHTS;
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
    ws_plan(m, run, team_size(run), &w);
    if (w.overflow || !size_add_to(&total, w.bytes))
        return SIZE_MAX;
    // the largest layer call: some layers may return their weights and
    // others not (whose scratch then holds a tile instead)
    bool with_weights = false, without = false;
    for (size_t l = 0; l < layers_run(m, run); l++) {
        const bool has = layer_want(run, l) & ATTN_WANT_WEIGHTS;
        with_weights |= has;
        without |= !has;
    }
    size_t most = 0;
    for (int i = 0; i < 2; i++) {
        if (!(i ? with_weights : without))
            continue;
        struct attn_config cfg;
        if (layer_config(m, run,
                         ATTN_WANT_OUTPUT | ATTN_WANT_MEAN_WEIGHTS |
                             (i ? ATTN_WANT_WEIGHTS : 0u),
                         &cfg, NULL))
            return SIZE_MAX;
        // the layer's own projections, so the core draws none
        static const struct attn_params explicit_params;
        cfg.params = &explicit_params;
        const size_t bytes = attn_forward_bytes(&cfg);
        if (bytes == SIZE_MAX)
            return SIZE_MAX;
        most = bytes > most ? bytes : most;
    }
    if (!size_add_to(&total, most))
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
    double per_layer = attn_flops(&cfg) +
                       4.0 * n * (double)m->hidden * (double)m->intermediate;
    double total = per_layer * (double)layers_run(m, run);
    if (want_of(run) & BERT_WANT_ROLLOUT)
        total += 2.0 * n * n * n * (double)(m->layers - 1);
    return total;
}

/* ----------------------------------------------------------------- team */

struct pass {
    const struct bert_model *m;
    const struct bert_run *run;
    const struct bert_layer *y;
    const float *attn_out; /* [n][H] the layer's attention output */
    const float *h_in;     /* [n][H] the layer's input */
    float *h_out;          /* [n][H] the layer's output */
    float *ffn;            /* per thread: [ROW_BLOCK][I + H] */
    size_t n_units;
    atomic_size_t next_unit;
    atomic_bool overflowed;
};

/* Unit: rows [r0, r0 + rows) of a layer after its attention. */
static void ffn_unit(struct pass *p, size_t unit, float *scratch)
{
    const struct bert_model *m = p->m;
    const struct bert_layer *y = p->y;
    const size_t H = m->hidden, inter_w = m->intermediate;
    const size_t r0 = unit * ROW_BLOCK;
    const size_t rows = p->run->n - r0 < ROW_BLOCK ? p->run->n - r0 : ROW_BLOCK;
    float *inter = scratch, *x1 = scratch + (size_t)ROW_BLOCK * inter_w;
    float *out = p->h_out + r0 * H;

    // x1 = LayerNorm(attention + input)
    for (size_t e = 0; e < rows * H; e++)
        x1[e] = p->attn_out[r0 * H + e] + p->h_in[r0 * H + e];
    bert_layer_norm(x1, rows, H, y->ln1_w, y->ln1_b, m->layer_norm_eps, x1);
    // inter = act(x1 W_in^T + b_in)
    for (size_t r = 0; r < rows; r++)
        memcpy(inter + r * inter_w, y->in_b, inter_w * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows,
                (int)inter_w, (int)H, 1.0f, x1, (int)H, y->in_w, (int)H, 1.0f,
                inter, (int)inter_w);
    bert_activation(m->act, inter, rows * inter_w);
    // out = LayerNorm(inter W_out^T + b_out + x1)
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < H; c++)
            out[r * H + c] = y->out_b[c] + x1[r * H + c];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)H,
                (int)inter_w, 1.0f, inter, (int)inter_w, y->out_w, (int)inter_w,
                1.0f, out, (int)H);
    bert_layer_norm(out, rows, H, y->ln2_w, y->ln2_b, m->layer_norm_eps, out);
    for (size_t e = 0; e < rows * H; e++)
        if (!isfinite(out[e]))
            atomic_store(&p->overflowed, true);
}

struct member {
    struct pass *p;
    float *scratch;
};

static void *member_run(void *arg)
{
    struct member *mb = arg;
    struct pass *p = mb->p;
    for (;;) {
        if (p->run->cancel &&
            atomic_load_explicit(p->run->cancel, memory_order_relaxed))
            return NULL;
        const size_t u = atomic_fetch_add(&p->next_unit, 1);
        if (u >= p->n_units)
            return NULL;
        ffn_unit(p, u, mb->scratch);
    }
}

/* Every unit of the pass, on a team of `team` threads. */
static void run_units(struct pass *p, unsigned team)
{
    const size_t stride =
        (size_t)ROW_BLOCK * (p->m->intermediate + p->m->hidden);
    atomic_store(&p->next_unit, 0);
    pthread_t tid[MAX_TEAM];
    struct member members[MAX_TEAM];
    unsigned started = 0;
    for (unsigned t = 1; t < team; t++) {
        members[t] = (struct member){p, p->ffn + t * stride};
        if (pthread_create(&tid[t], NULL, member_run, &members[t]) != 0)
            break; /* fewer helpers only means less parallelism */
        started = t;
    }
    members[0] = (struct member){p, p->ffn};
    member_run(&members[0]);
    for (unsigned t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
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

/* Layer l: attention through the core, then the feed-forward units;
 * h_in -> h_out, the weights and mean weights into the result. */
static attn_status run_layer(const struct bert_model *m,
                             const struct bert_run *run, size_t l,
                             const float *h_in, float *h_out, float *ffn,
                             unsigned team, struct bert_result *out,
                             struct attn_result *attn, struct attn_error *err)
{
    const struct bert_layer *y = &m->layer[l];
    struct attn_config cfg;
    attn_status st = layer_config(m, run, layer_want(run, l), &cfg, err);
    if (st)
        return st;
    // the core never writes through its params; bert.h's tensors are const
    const struct attn_params params = {
        .wq = (float *)y->q_w,
        .bq = (float *)y->q_b,
        .wk = (float *)y->k_w,
        .bk = (float *)y->k_b,
        .wv = (float *)y->v_w,
        .bv = (float *)y->v_b,
        .wo = (float *)y->ao_w,
        .bo = (float *)y->ao_b,
    };
    cfg.params = &params;
    /* a model's values are checked once, by its loader (bert.h), not on
     * every layer of every call */
    cfg.params_checked = true;
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
    if (out->weights && returns_layer(run, l))
        memcpy(out->weights + at * m->heads * nn, attn->weights,
               m->heads * nn * sizeof(float));
    if (out->mean_weights && returns_layer(run, l))
        memcpy(out->mean_weights + at * nn, attn->mean_weights,
               nn * sizeof(float));

    struct pass p = {.m = m,
                     .run = run,
                     .y = y,
                     .attn_out = attn->output,
                     .h_in = h_in,
                     .h_out = h_out,
                     .ffn = ffn,
                     .n_units = (n + ROW_BLOCK - 1) / ROW_BLOCK};
    atomic_store(&p.overflowed, false);
    run_units(&p, team);
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
    const unsigned want = want_of(run), team = team_size(run);
    struct ws_plan w;
    ws_plan(m, run, team, &w);
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
    float *ws[WS_PARTS];
    for (int i = 0; i < WS_PARTS; i++)
        ws[i] = (float *)(block + w.offset[i]);

    const size_t nh = run->n * m->hidden;
    // hidden state l lives in the result, or in one of two scratch rows
    float *hidden = out->hidden_states;
#define STATE(l) (hidden ? hidden + (l)*nh : ws[WS_HIDDEN] + ((l) % 2) * nh)
    embed(m, run, STATE(0));
    const size_t layers = layers_run(m, run);
    for (size_t l = 0; l < layers && !st; l++) {
        struct attn_result attn = {0};
        st = run_layer(m, run, l, STATE(l), STATE(l + 1), ws[WS_FFN], team, out,
                       &attn, err);
        if (!st && (want & BERT_WANT_ROLLOUT))
            rollout_step(attn.mean_weights, run->n, l == 0, out->rollout,
                         ws[WS_ROLL_A], ws[WS_ROLL_B]);
        attn_result_free(&attn);
    }
#undef STATE
    free(block);
    if (st)
        bert_result_free(out);
    return st;
}
