/*
 * transformer_plan.c - checking a model and a run, and planning the pass
 * once (transformer.h): which layers run, what each asks of the attention
 * core, the team, the workspace and the result, and what it all costs.
 * transformer.c runs a plan and decides nothing of this again.
 */
#include "attention_flow.h"
#include "bf16_dots.h"
#include "checked.h"
#include "error.h"
#include "forward_plan.h"
#include "intervene.h"
#include "pool.h"
#include "stream_product.h"
#include "transformer.h"
#include "transformer_head.h"
#include "transformer_units.h"
#include "widen.h"
#include "workspace.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------- names */

#define NAME_OF(table, v)                                                      \
    ((v) >= 0 && (size_t)(v) < sizeof table / sizeof table[0] ? table[v] : NULL)

const char *xf_norm_name(int norm)
{
    static const char *const names[] = {"layer", "rms"};
    return NAME_OF(names, norm);
}

const char *xf_norm_place_name(int place)
{
    static const char *const names[] = {"after", "before", "sandwich",
                                        "output"};
    return NAME_OF(names, place);
}

const char *xf_ffn_name(int ffn)
{
    static const char *const names[] = {"plain", "gated"};
    return NAME_OF(names, ffn);
}

const char *xf_act_name(int act)
{
    static const char *const names[] = {"gelu", "gelu_new", "silu"};
    return NAME_OF(names, act);
}

const char *xf_positions_name(int positions)
{
    static const char *const names[] = {"learned", "rotary"};
    return NAME_OF(names, positions);
}

/* ------------------------------------------------------------ checking */

static attn_status check_size(size_t v, size_t cap, const char *field,
                              struct attn_error *err)
{
    if (v == 0 || v > cap)
        return attn_fail(err, ATTN_E_INVALID, field,
                         "%s (%zu) must be between 1 and %zu", field, v, cap);
    return ATTN_OK;
}

static attn_status check_arch(const struct xf_arch *a, struct attn_error *err)
{
    const struct {
        const char *field;
        const char *name;
        int value;
    } enums[] = {
        {"norm", xf_norm_name((int)a->norm), (int)a->norm},
        {"norm_place", xf_norm_place_name((int)a->norm_place),
         (int)a->norm_place},
        {"ffn", xf_ffn_name((int)a->ffn), (int)a->ffn},
        {"act", xf_act_name((int)a->act), (int)a->act},
        {"positions", xf_positions_name((int)a->positions), (int)a->positions},
    };
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
        if (!enums[i].name)
            return attn_fail(err, ATTN_E_INVALID, enums[i].field,
                             "%s (%d) is unknown", enums[i].field,
                             enums[i].value);
    if (a->token_types && a->positions != XF_POS_LEARNED)
        return attn_fail(err, ATTN_E_INVALID, "token_types",
                         "token types go with learned positions only");
    if (a->qk_norm && a->qk_norm_whole)
        return attn_fail(err, ATTN_E_INVALID, "qk_norm_whole",
                         "q and k are normed by head (qk_norm) or whole "
                         "(qk_norm_whole), not both");
    if (a->parallel && a->norm_place != XF_NORM_BEFORE)
        return attn_fail(err, ATTN_E_INVALID, "parallel",
                         "a parallel residual norms each sublayer's input "
                         "(norm_place before), not %s",
                         xf_norm_place_name((int)a->norm_place));
    return ATTN_OK;
}

/* Kind k's long rotary, when it has one, as the core would resolve it
 * (its short one is resolved for every run that uses it): a run that
 * grows past long_after must not be the first to find it wrong. */
static attn_status check_long_rope(const struct xf_model *m, size_t k,
                                   struct attn_error *err)
{
    const struct xf_layer_kind *lk = &m->kind[k];
    const struct attn_rotary *r = &lk->long_rope;
    if (!lk->long_after) {
        if (r->inv_freq || r->dims || r->base != 0.0 || r->factor != 0.0)
            return attn_fail_at(err, ATTN_E_INVALID, "long_rope", 1, &k,
                                "kind %zu has a long rotary but no "
                                "long_after",
                                k);
        return ATTN_OK;
    }
    struct attn_config probe = {.n_query = 1,
                                .d_model = m->hidden,
                                .heads = m->heads,
                                .kv_heads = m->kv_heads,
                                .d_k = m->head_dim,
                                .d_v = m->head_dim,
                                .positional = ATTN_POS_ROPE,
                                .rope = *r};
    return attn_config_resolve(&probe, err);
}

/* The kinds of layer, each layer's among them, and the model-wide
 * factors; each kind's rotary is checked as the core resolves it. */
static attn_status check_kinds(const struct xf_model *m, struct attn_error *err)
{
    const size_t kinds = m->kinds ? m->kinds : 1;
    if (kinds > XF_MAX_LAYER_KINDS)
        return attn_fail(err, ATTN_E_INVALID, "kinds",
                         "kinds (%zu) must be at most %d", kinds,
                         XF_MAX_LAYER_KINDS);
    for (size_t l = 0; m->layer_kind && l < m->layers; l++)
        if (m->layer_kind[l] >= kinds)
            return attn_fail_at(err, ATTN_E_INVALID, "layer_kind", 1, &l,
                                "layer_kind[%zu] (%u) is not below kinds "
                                "(%zu)",
                                l, (unsigned)m->layer_kind[l], kinds);
    for (size_t k = 0; k < kinds; k++) {
        const struct xf_layer_kind *lk = &m->kind[k];
        if (lk->window && !m->arch.causal)
            return attn_fail_at(err, ATTN_E_INVALID, "window", 1, &k,
                                "kind %zu's window needs a causal model", k);
        if (m->arch.positions != XF_POS_ROTARY &&
            (lk->rope.inv_freq || lk->rope.dims || lk->rope.base != 0.0 ||
             lk->long_after))
            return attn_fail_at(err, ATTN_E_INVALID, "rope", 1, &k,
                                "kind %zu has a rotary, which is for rotary "
                                "positions",
                                k);
        attn_status st = check_long_rope(m, k, err);
        if (st)
            return st;
    }
    const struct {
        float v;
        const char *name;
    } factors[] = {{m->attn_scale, "attn_scale"},
                   {m->attn_softcap, "attn_softcap"},
                   {m->final_softcap, "final_softcap"},
                   {m->embed_scale, "embed_scale"}};
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++)
        if (!(isfinite(factors[i].v) && factors[i].v >= 0.0f))
            return attn_fail(err, ATTN_E_INVALID, factors[i].name,
                             "%s (%g) must be finite and not below 0",
                             factors[i].name, (double)factors[i].v);
    return ATTN_OK;
}

static attn_status check_sizes(const struct xf_model *m, struct attn_error *err)
{
    attn_status st = check_size(m->layers, XF_MAX_LAYERS, "layers", err);
    if (!st)
        st = check_size(m->hidden, XF_MAX_DIM, "hidden", err);
    if (!st)
        st = check_size(m->heads, XF_MAX_DIM, "heads", err);
    if (!st)
        st = check_size(m->kv_heads, m->heads, "kv_heads", err);
    if (!st)
        st = check_size(m->head_dim, XF_MAX_DIM / m->heads, "head_dim", err);
    if (!st)
        st = check_size(m->intermediate, XF_MAX_DIM, "intermediate", err);
    if (!st)
        st = check_size(m->vocab_size, XF_MAX_VOCAB, "vocab_size", err);
    if (!st)
        st = check_size(m->max_positions, XF_MAX_POSITIONS, "max_positions",
                        err);
    if (!st && m->arch.token_types)
        st = check_size(m->type_vocab_size, 256, "type_vocab_size", err);
    if (st)
        return st;
    if (m->heads % m->kv_heads)
        return attn_fail(err, ATTN_E_INVALID, "heads",
                         "heads (%zu) must be a multiple of kv_heads (%zu)",
                         m->heads, m->kv_heads);
    if (!isfinite(m->norm_eps) || m->norm_eps <= 0.0f)
        return attn_fail(err, ATTN_E_INVALID, "norm_eps",
                         "norm_eps (%g) must be finite and above 0",
                         (double)m->norm_eps);
    return check_kinds(m, err);
}

/* A tensor is there exactly when the arch has it. */
static bool present_as(const void *t, bool wanted)
{
    return (t != NULL) == wanted;
}

/* A matrix is there exactly when the arch has it, at a known width, its
 * rows of cols values a whole number of the width's blocks. */
static bool matrix_as(struct xf_matrix w, bool wanted, size_t cols)
{
    return present_as(w.data, wanted) &&
           (!w.data || ((unsigned)w.dtype < ATTN_DTYPES &&
                        cols % attn_dtype_block(w.dtype) == 0));
}

static attn_status check_tensors(const struct xf_model *m,
                                 struct attn_error *err)
{
    const struct xf_arch *a = &m->arch;
    const bool layer_norm = a->norm == XF_NORM_LAYER;
    const bool learned = a->positions == XF_POS_LEARNED;
    const size_t H = m->hidden, hd = m->heads * m->head_dim,
                 I = m->intermediate;
    if (!matrix_as(m->word_emb, true, H) ||
        !matrix_as(m->pos_emb, learned, H) ||
        !matrix_as(m->type_emb, a->token_types, H) ||
        !present_as(m->embed_norm_w, a->embed_norm) ||
        !present_as(m->embed_norm_b, a->embed_norm && layer_norm))
        return attn_fail(err, ATTN_E_INVALID, "embeddings",
                         "an embedding tensor is missing or one the "
                         "architecture has no place for is given");
    if (!present_as(m->final_norm_w, a->final_norm) ||
        !present_as(m->final_norm_b, a->final_norm && layer_norm))
        return attn_fail(err, ATTN_E_INVALID, "final_norm",
                         "the final norm's tensors do not match the "
                         "architecture");
    if (m->lm_head.data && !matrix_as(m->lm_head, true, H))
        return attn_fail(err, ATTN_E_INVALID, "lm_head",
                         "lm_head's dtype (%d) is unknown, or not in whole "
                         "blocks of its rows",
                         (int)m->lm_head.dtype);
    if (!m->layer)
        return attn_fail(err, ATTN_E_INVALID, "layer",
                         "the layers are missing");
    const bool gated = a->ffn == XF_FFN_GATED;
    const bool in_norms = a->norm_place != XF_NORM_OUTPUT;
    const bool out_norms =
        a->norm_place == XF_NORM_SANDWICH || a->norm_place == XF_NORM_OUTPUT;
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &m->layer[l];
        const bool ok =
            matrix_as(y->q_w, true, H) && matrix_as(y->k_w, true, H) &&
            matrix_as(y->v_w, true, H) && matrix_as(y->o_w, true, hd) &&
            present_as(y->attn_norm_w, in_norms) &&
            present_as(y->ffn_norm_w, in_norms) &&
            matrix_as(y->up_w, true, H) && matrix_as(y->down_w, true, I) &&
            matrix_as(y->gate_w, gated, H) && present_as(y->q_b, a->qkv_bias) &&
            present_as(y->k_b, a->qkv_bias) &&
            present_as(y->v_b, a->qkv_bias) &&
            present_as(y->o_b, a->out_bias) &&
            present_as(y->attn_norm_b, in_norms && layer_norm) &&
            present_as(y->ffn_norm_b, in_norms && layer_norm) &&
            present_as(y->attn_out_norm_w, out_norms) &&
            present_as(y->ffn_out_norm_w, out_norms) &&
            present_as(y->attn_out_norm_b, out_norms && layer_norm) &&
            present_as(y->ffn_out_norm_b, out_norms && layer_norm) &&
            present_as(y->up_b, a->ffn_bias) &&
            present_as(y->gate_b, gated && a->ffn_bias) &&
            present_as(y->down_b, a->ffn_bias) &&
            present_as(y->q_norm_w, a->qk_norm || a->qk_norm_whole) &&
            present_as(y->k_norm_w, a->qk_norm || a->qk_norm_whole);
        if (!ok)
            return attn_fail_at(err, ATTN_E_INVALID, "layer", 1, &l,
                                "layer %zu is missing a tensor, has one "
                                "the architecture has no place for, or a "
                                "matrix not in whole blocks of its rows",
                                l);
    }
    return ATTN_OK;
}

attn_status xf_model_check(const struct xf_model *m, struct attn_error *err)
{
    attn_status st = check_arch(&m->arch, err);
    if (!st)
        st = check_sizes(m, err);
    if (!st)
        st = check_tensors(m, err);
    return st;
}

/* A run's batch, its start and its activations; then its edits. */
static attn_status check_resumed(const struct xf_model *m,
                                 const struct xf_run *run,
                                 struct attn_error *err)
{
    const size_t batch = run->batch ? run->batch : 1;
    const unsigned resumable =
        XF_WANT_LAST_ROWS | XF_WANT_LOGITS | XF_WANT_ACTIVATIONS;
    if (batch > XF_MAX_BATCH)
        return attn_fail(err, ATTN_E_TOO_BIG, "batch",
                         "batch (%zu) is more than the %d sequences a run "
                         "takes",
                         batch, XF_MAX_BATCH);
    if (batch > 1 && (!run->start || !(run->want & XF_WANT_LAST_ROWS) ||
                      (run->want & ~(XF_WANT_LAST_ROWS | XF_WANT_LOGITS))))
        return attn_fail(err, ATTN_E_INVALID, "batch",
                         "a batch of sequences resumes from a start and "
                         "returns their last rows, and their logits");
    if (!run->start && run->first_layer)
        return attn_fail(err, ATTN_E_INVALID, "first_layer",
                         "a run starts above layer 0 only from a start");
    if (run->start &&
        (run->cache || run->first_layer >= m->layers || !run->want ||
         (run->want & ~resumable) || run->layer != XF_ALL_LAYERS))
        return attn_fail(err, ATTN_E_INVALID, "start",
                         "a run from a start is not cached, starts below "
                         "the model's %zu layers and returns last rows, "
                         "logits or activations",
                         m->layers);
    if (run->want & XF_WANT_ACTIVATIONS) {
        // the layers below first_layer are not run: nothing to keep
        if (run->first_layer)
            return attn_fail(err, ATTN_E_INVALID, "want",
                             "activations are of every layer: a run from "
                             "layer %zu runs none below it",
                             run->first_layer);
        if (m->arch.norm_place == XF_NORM_AFTER)
            return attn_fail(err, ATTN_E_INVALID, "want",
                             "activations are of a residual stream that no "
                             "norm rewrites (a post-norm model has none)");
        if (run->cache && run->cache->len)
            return attn_fail(err, ATTN_E_INVALID, "want",
                             "activations are of a whole input, not a "
                             "token after a cache");
        if (run->capture_position != XF_ALL && run->capture_position >= run->n)
            return attn_fail(err, ATTN_E_INVALID, "capture_position",
                             "capture_position (%zu) is not below the "
                             "input's %zu tokens",
                             run->capture_position, run->n);
    }
    return intervene_check(m, run, batch, err);
}

/* Is c one of m's caches? */
static bool cache_fits(const struct xf_model *m, const struct xf_cache *c)
{
    return c->layers == m->layers && c->row == m->kv_heads * m->head_dim &&
           c->k && c->v && c->z_mean && c->capacity <= m->max_positions &&
           c->len <= c->capacity;
}

/* A batched step's sequences: each its tokens after its own cache, with
 * room for them, its layer and its edits as a run of one token alone
 * would be checked. Fails naming "seqs" with the sequence's index, or
 * "ids" with the token's. */
static attn_status check_seqs(const struct xf_model *m,
                              const struct xf_run *run, struct attn_error *err)
{
    const size_t batch = run->batch;
    if (batch == 0 || batch > XF_MAX_BATCH)
        return attn_fail(err, ATTN_E_INVALID, "batch",
                         "a batched step takes 1 to %d sequences, not %zu",
                         XF_MAX_BATCH, batch);
    if (run->n != 1 || run->cache || run->start || run->n_edits ||
        run->want != XF_WANT_LOGITS || !run->ids)
        return attn_fail(err, ATTN_E_INVALID, "seqs",
                         "a batched step takes the tokens of each sequence "
                         "after its own cache, with its own edits, and "
                         "returns the logits alone");
    if (!m->arch.causal || !m->lm_head.data)
        return attn_fail(err, ATTN_E_INVALID, "seqs",
                         "a batched step needs a causal model with an "
                         "output head");
    size_t row = 0; /* the sequence's first token in ids */
    for (size_t b = 0; b < batch; b++) {
        const struct xf_seq *q = &run->seqs[b];
        const struct xf_cache *c = q->cache;
        const size_t tokens = xf_seq_tokens(q);
        for (size_t e = 0; c && e < b; e++)
            if (run->seqs[e].cache == c)
                return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                    "seqs[%zu] has the cache of seqs[%zu]: "
                                    "each sequence has its own",
                                    b, e);
        if (!c || !cache_fits(m, c) || tokens > c->capacity - c->len)
            return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                "seqs[%zu]: the cache is not one of this "
                                "model's, or has no room for its %zu "
                                "tokens",
                                b, tokens);
        for (size_t t = 0; t < tokens; t++, row++)
            if (run->ids[row] >= m->vocab_size)
                return attn_fail_at(err, ATTN_E_INVALID, "ids", 1, &row,
                                    "ids[%zu] (%u) is not below vocab_size "
                                    "(%zu)",
                                    row, (unsigned)run->ids[row],
                                    m->vocab_size);
        if (xf_cache_outgrown(m, c, tokens))
            return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                "seqs[%zu]: the cache's keys were turned by "
                                "the short rotary, and the next position "
                                "turns by the long one: run the whole "
                                "sequence again",
                                b);
        if (q->layer != XF_ALL_LAYERS && q->layer >= m->layers)
            return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                "seqs[%zu]: layer (%zu) must be below the "
                                "model's %zu layers",
                                b, q->layer, m->layers);
        // a MEAN edit reads the means of the positions that started the
        // cache, which a prompt's rows in a step have not kept
        if (q->n_edits && (tokens > 1 || c->len == 0))
            return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                "seqs[%zu]: a sequence with edits takes one "
                                "token a step, after a cache that its "
                                "prompt started",
                                b);
        const struct xf_run alone = {.ids = &run->ids[row - 1],
                                     .n = 1,
                                     .want = XF_WANT_LOGITS,
                                     .cache = q->cache,
                                     .edits = q->edits,
                                     .n_edits = q->n_edits};
        attn_status st = intervene_check(m, &alone, 1, err);
        if (st)
            return st;
    }
    return ATTN_OK;
}

/* xf_step_tokens() of one matrix; SIZE_MAX for none. */
static size_t step_tokens_of(struct xf_matrix w)
{
    if (!w.data)
        return SIZE_MAX;
    if (attn_dtype_block(w.dtype) > 1)
        return XF_STEP_TOKENS_QUANT;
    return w.dtype == ATTN_F32 ? XF_STEP_TOKENS_F32 : XF_STEP_TOKENS_HALF;
}

size_t xf_step_tokens(const struct xf_model *m)
{
    // the output head meets one row a sequence either way
    size_t most = SIZE_MAX;
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &m->layer[l];
        const struct xf_matrix w[] = {y->q_w,  y->k_w,    y->v_w,   y->o_w,
                                      y->up_w, y->gate_w, y->down_w};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            const size_t t = step_tokens_of(w[i]);
            most = t < most ? t : most;
        }
    }
    return most < XF_STEP_TOKENS_HALF ? most : XF_STEP_TOKENS_HALF;
}

/* The rows of a batched step: every sequence's tokens. */
static size_t step_rows(const struct xf_run *run)
{
    size_t rows = 0;
    for (size_t b = 0; b < run->batch; b++)
        rows += xf_seq_tokens(&run->seqs[b]);
    return rows;
}

static attn_status check_run(const struct xf_model *m, const struct xf_run *run,
                             struct attn_error *err)
{
    if (run->n == 0)
        return attn_fail(err, ATTN_E_INVALID, "ids", "the input has no tokens");
    if (run->seqs)
        return check_seqs(m, run, err);
    const struct xf_cache *c = run->cache;
    if (c) {
        if (!m->arch.causal)
            return attn_fail(err, ATTN_E_INVALID, "cache",
                             "a cache needs a causal model");
        if (!cache_fits(m, c))
            return attn_fail(err, ATTN_E_INVALID, "cache",
                             "the cache is not one of this model's");
    }
    if (c && xf_cache_outgrown(m, c, run->n))
        return attn_fail(err, ATTN_E_INVALID, "cache",
                         "the cache's %zu positions were turned by the "
                         "short rotary, and %zu more tokens take the "
                         "sequence past the length after which every "
                         "position turns by the long one: empty the cache "
                         "and run the whole sequence again",
                         c->len, run->n);
    const size_t before = c ? c->len : 0;
    if (run->n > m->max_positions - before)
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the input has %zu tokens, more than the %zu the "
                         "model has positions for (max_position_embeddings)",
                         before + run->n, m->max_positions);
    if (c) {
        if (run->n > c->capacity - c->len)
            return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                             "%zu more tokens do not fit a cache of %zu "
                             "holding %zu",
                             run->n, c->capacity, c->len);
        if (c->len && run->n != 1)
            return attn_fail(err, ATTN_E_INVALID, "ids",
                             "after a cache holding %zu, one token at a "
                             "time, not %zu",
                             c->len, run->n);
        if (c->len &&
            (run->want & (XF_WANT_ROLLOUT | XF_WANT_HEAD_STATS |
                          XF_WANT_VALUE_WEIGHTED | XF_WANT_INDUCTION |
                          XF_WANT_TOP_K | XF_WANT_FLOW | XF_WANT_POOLED)))
            return attn_fail(err, ATTN_E_INVALID, "want",
                             "a rollout, head measures or value-weighted "
                             "attention need whole matrices, not a token "
                             "after a cache");
    }
    if (run->want & XF_WANT_POOLED) {
        bool ok =
            run->pool_row && run->pool_col && run->pool_rows && run->pool_cols;
        for (size_t i = 0; ok && i < run->n; i++)
            ok = (run->pool_row[i] == ATTN_POOL_NONE ||
                  run->pool_row[i] < run->pool_rows) &&
                 (run->pool_col[i] == ATTN_POOL_NONE ||
                  run->pool_col[i] < run->pool_cols);
        if (!ok)
            return attn_fail(err, ATTN_E_INVALID, "pool",
                             "pooled weights need each position's block, "
                             "below %zu x %zu blocks",
                             run->pool_rows, run->pool_cols);
    }
    if ((run->want & XF_WANT_FLOW) && run->n > XF_MAX_FLOW_TOKENS)
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "attention flow is computed for at most %d tokens "
                         "(a maximum flow for each pair); the input has %zu",
                         XF_MAX_FLOW_TOKENS, run->n);
    if ((run->want & XF_WANT_TOP_K) &&
        (run->top_k < 1 || run->top_k > ATTN_MAX_TOP_K))
        return attn_fail(err, ATTN_E_INVALID, "top_k",
                         "top_k (%zu) must be 1 to %d", run->top_k,
                         ATTN_MAX_TOP_K);
    if ((run->want & XF_WANT_INDUCTION) &&
        (!run->repeat_period || run->repeat_start > run->n ||
         run->repeat_period > (run->n - run->repeat_start) / 2))
        return attn_fail(err, ATTN_E_INVALID, "ids",
                         "induction needs two copies of repeat_period (%zu) "
                         "tokens from repeat_start (%zu) in %zu tokens",
                         run->repeat_period, run->repeat_start, run->n);
    if ((run->want & (XF_WANT_LOGITS | XF_WANT_LOGIT_LENS)) && !m->lm_head.data)
        return attn_fail(err, ATTN_E_INVALID, "want",
                         "logits need a model with an output head (lm_head)");
    if ((run->want & XF_WANT_ALL_LOGITS) &&
        (!(run->want & XF_WANT_LOGITS) || (run->batch && run->batch > 1)))
        return attn_fail(err, ATTN_E_INVALID, "want",
                         "every position's logits are of one sequence's "
                         "logits");
    const size_t most_k =
        m->vocab_size < XF_MAX_LENS_K ? m->vocab_size : XF_MAX_LENS_K;
    if ((run->want & XF_WANT_LOGIT_LENS) &&
        (run->lens_k < 1 || run->lens_k > most_k))
        return attn_fail(err, ATTN_E_INVALID, "lens_k",
                         "lens_k (%zu) must be 1 to %zu", run->lens_k, most_k);
    if (!run->ids)
        return attn_fail(err, ATTN_E_INVALID, "ids", "ids is missing");
    if (run->type_ids && !m->arch.token_types)
        return attn_fail(err, ATTN_E_INVALID, "type_ids",
                         "the model has no token types");
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
    if (run->layer != XF_ALL_LAYERS && run->layer >= m->layers)
        return attn_fail(err, ATTN_E_INVALID, "layer",
                         "layer (%zu) must be below the model's %zu layers",
                         run->layer, m->layers);
    return check_resumed(m, run, err);
}

/* ---------------------------------------------------------------- units */

/* How a product of n rows and cols columns is cut (transformer_units.h):
 * its whole blocks of rows over row_tiles (an input's last, partial block
 * with the last tile's), each tile's columns across, width to a tile. */
struct tiling {
    size_t n, blocks, row_tiles, across, width;
};

static struct tiling tiling_of(size_t n, size_t cols)
{
    /* fewer rows than a block: one block of them */
    const size_t whole = n / STREAM_ROWS;
    struct tiling t = {.n = n, .blocks = whole ? whole : n > 0};
    const size_t by_size = (n + XF_FFN_ROW_TILE - 1) / XF_FFN_ROW_TILE;
    t.row_tiles = t.blocks < XF_FFN_TILES  ? t.blocks
                  : by_size > XF_FFN_TILES ? by_size
                                           : XF_FFN_TILES;
    t.row_tiles = t.row_tiles < t.blocks ? t.row_tiles : t.blocks;
    const size_t across =
        t.row_tiles ? (XF_FFN_TILES + t.row_tiles - 1) / t.row_tiles : 1;
    const size_t w = (cols + across - 1) / across;
    t.width = (w + XF_COL_ALIGN - 1) / XF_COL_ALIGN * XF_COL_ALIGN;
    t.across = t.width ? (cols + t.width - 1) / t.width : 0;
    return t;
}

size_t xf_tile_count(size_t n, size_t cols)
{
    const struct tiling t = tiling_of(n, cols);
    return t.row_tiles * t.across;
}

struct xf_tile xf_tile_at(size_t n, size_t cols, size_t u)
{
    const struct tiling t = tiling_of(n, cols);
    const size_t i = u / t.across;
    const size_t b0 = i * t.blocks / t.row_tiles,
                 b1 = (i + 1) * t.blocks / t.row_tiles;
    const size_t end = i + 1 == t.row_tiles ? n : b1 * STREAM_ROWS;
    struct xf_tile tile = {.r0 = b0 * STREAM_ROWS,
                           .c0 = u % t.across * t.width};
    tile.rows = end - tile.r0;
    tile.width = cols - tile.c0 < t.width ? cols - tile.c0 : t.width;
    return tile;
}

size_t xf_row_units(size_t n)
{
    return (n + XF_ROW_UNIT - 1) / XF_ROW_UNIT;
}

size_t xf_widest_phase(const struct xf_plan *p)
{
    const size_t rows = xf_row_units(p->rows);
    const size_t tiles = xf_tile_count(p->rows, p->m->intermediate);
    return tiles > rows ? tiles : rows;
}

/* ----------------------------------------------------------------- plan */

bool xf_bf16_dots_available(void)
{
    return bf16_dots_available();
}

struct xf_products xf_plan_products(const struct xf_plan *p)
{
    return (struct xf_products){.alone = p->step,
                                .bf16_dots = p->run.bf16_dots};
}

bool xf_weights_into_result(const struct attn_config *cfg)
{
    return (cfg->want & ATTN_WANT_WEIGHTS) &&
           !(cfg->want_internal & ATTN_WANT_WEIGHTS) && cfg->batch == 1 &&
           cfg->n_keys == cfg->n_query;
}

bool xf_returns_layer(const struct xf_plan *p, size_t l)
{
    return p->run.layer == XF_ALL_LAYERS || p->run.layer == l;
}

bool xf_output_used(const struct xf_plan *p, size_t l)
{
    return l + 1 < p->layers_run ||
           (p->want & (XF_WANT_HIDDEN | XF_WANT_LOGITS | XF_WANT_LOGIT_LENS |
                       XF_WANT_ACTIVATIONS | XF_WANT_LAST_ROWS));
}

unsigned xf_attn_kind(const struct xf_plan *p, size_t l)
{
    unsigned kind = 0;
    if (xf_output_used(p, l))
        kind |= XF_KIND_OUTPUT;
    if ((p->want & XF_WANT_WEIGHTS) && xf_returns_layer(p, l))
        kind |= XF_KIND_WEIGHTS;
    // the measures are of every layer, returned or not
    if (p->want & (XF_WANT_HEAD_STATS | XF_WANT_INDUCTION))
        kind |= XF_KIND_MEASURES;
    if ((p->want & XF_WANT_TOP_K) && xf_returns_layer(p, l))
        kind |= XF_KIND_TOP_K;
    if ((p->want & XF_WANT_POOLED) && xf_returns_layer(p, l))
        kind |= XF_KIND_POOLED;
    if ((p->want & XF_WANT_VALUE_WEIGHTED) && xf_returns_layer(p, l))
        kind |= XF_KIND_VALUE;
    if (p->hooked)
        kind |= XF_KIND_HOOKED;
    return kind;
}

/* The attention of a layer of kind as the core's config; resolved.
 * Always on the core's full path, so that the weights have the same bits
 * whether or not the output is also asked for, and the output whether or
 * not the weights are. */
static attn_status attn_config_of(const struct xf_plan *p, unsigned kind,
                                  const struct xf_layer_kind *lk,
                                  struct attn_config *cfg,
                                  struct attn_error *err)
{
    const struct xf_model *m = p->m;
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = ATTN_MODE_PROJECTED;
    cfg->batch = p->batch;
    cfg->n_query = p->run.n;
    cfg->d_model = m->hidden;
    cfg->heads = m->heads;
    cfg->kv_heads = m->kv_heads;
    cfg->d_k = cfg->d_v = m->head_dim;
    cfg->d_out = m->hidden;
    cfg->qkv_bias = m->arch.qkv_bias;
    cfg->out_bias = m->arch.out_bias;
    // the heads' values are edited before the pass projects them
    if (kind & XF_KIND_HOOKED) {
        cfg->no_out_proj = true;
        cfg->out_bias = false;
        cfg->d_out = m->heads * m->head_dim;
        // the norms are of what each head writes: through W_O
        cfg->value_wo = true;
    }
    cfg->causal = m->arch.causal;
    if (m->arch.positions == XF_POS_ROTARY) {
        cfg->positional = ATTN_POS_ROPE;
        // the run's length in all decides a longrope kind's
        cfg->rope = *xf_kind_rope(lk, p->keys);
    }
    cfg->window = lk->window;
    cfg->softcap = m->attn_softcap;
    if (m->attn_scale > 0.0f) {
        cfg->has_scale = true;
        cfg->scale = m->attn_scale;
    }
    cfg->qk_norm = m->arch.qk_norm;
    cfg->qk_norm_whole = m->arch.qk_norm_whole;
    cfg->qk_norm_eps = m->norm_eps;
    // every call on the full path, and the mean weights only where they
    // are read
    cfg->full_path = true;
    const bool mean_read =
        p->want & (XF_WANT_MEAN_WEIGHTS | XF_WANT_ROLLOUT | XF_WANT_FLOW);
    cfg->want = mean_read ? ATTN_WANT_MEAN_WEIGHTS : 0;
    if (kind & XF_KIND_OUTPUT)
        cfg->want |= ATTN_WANT_OUTPUT;
    if (kind & XF_KIND_WEIGHTS)
        cfg->want |= ATTN_WANT_WEIGHTS;
    if (kind & XF_KIND_VALUE)
        cfg->want |= ATTN_WANT_VALUE_WEIGHTED;
    if ((kind & XF_KIND_MEASURES) && (p->want & XF_WANT_HEAD_STATS)) {
        cfg->want |= ATTN_WANT_HEAD_STATS;
        cfg->earlier_given = true; /* the ids' copies, at the call */
    }
    if ((kind & XF_KIND_MEASURES) && (p->want & XF_WANT_INDUCTION)) {
        cfg->want |= ATTN_WANT_INDUCTION;
        cfg->repeat_start = p->run.repeat_start;
        cfg->repeat_period = p->run.repeat_period;
    }
    if (kind & XF_KIND_TOP_K) {
        cfg->want |= ATTN_WANT_TOP_K;
        cfg->top_k = p->run.top_k;
    }
    if (kind & XF_KIND_POOLED) {
        cfg->want |= ATTN_WANT_POOLED;
        cfg->pool_row = p->run.pool_row;
        cfg->pool_col = p->run.pool_col;
        cfg->pool_rows = p->run.pool_rows;
        cfg->pool_cols = p->run.pool_cols;
        cfg->pool_mean = p->run.pool_mean;
    }
    cfg->threads = p->run.threads;
    // the layer's own projections, checked once by the model's loader
    static const struct attn_params explicit_params;
    cfg->params = &explicit_params;
    cfg->params_checked = true;
    // starting a cache: every layer's keys and values, to keep
    if (p->run.cache)
        cfg->want |= ATTN_WANT_K | ATTN_WANT_V;
    // a panel for each thread: 16-bit matrices are widened in it, and the
    // streamed product packs its rows there (stream_product.h)
    cfg->stored_matrices = true;
    return attn_config_resolve(cfg, err);
}

/* Does every product of the feed-forward stream (widen.h), in every
 * layer the pass runs, so that the intermediate rows may stay packed
 * between them? */
static bool ffn_streams(const struct xf_plan *p)
{
    const struct xf_model *m = p->m;
    const struct xf_products how = xf_plan_products(p);
    const bool gated = m->arch.ffn == XF_FFN_GATED;
    for (size_t l = 0; l < p->layers_run; l++) {
        const struct xf_layer *y = &m->layer[l];
        const struct xf_matrix w[] = {y->up_w, y->down_w, y->gate_w};
        for (size_t i = 0; i < (gated ? 3u : 2u); i++) {
            const struct widen_product pr = {.rows = p->rows,
                                             .dtype = w[i].dtype,
                                             .alone = how.alone,
                                             .bf16_dots = how.bf16_dots};
            if (!widen_product_streams(&pr, 0.0f, true))
                return false;
        }
    }
    return true;
}

/* The feed-forward's floats (transformer.c's struct pass): the residual
 * sum and the intermediate rows (xf_inter_floats()); with norms before,
 * the sublayer's normed input; gated, the gate's rows. */
static bool ffn_floats(const struct xf_plan *p, size_t *floats)
{
    const struct xf_model *m = p->m;
    size_t rows_h, inter = 0; // set by the call; gcc -O1 cannot tell
    if (!size_mul(p->rows, m->hidden, &rows_h) ||
        !xf_inter_floats(m, p->rows, p->ffn_packed, &inter))
        return false;
    const bool before = m->arch.norm_place == XF_NORM_BEFORE ||
                        m->arch.norm_place == XF_NORM_SANDWICH;
    const bool gated = m->arch.ffn == XF_FFN_GATED;
    *floats = rows_h;
    return size_add_to(floats, inter) &&
           (!before || size_add_to(floats, rows_h)) &&
           (!gated || size_add_to(floats, inter));
}

bool xf_plan_workspace(struct xf_plan *p)
{
    const size_t n = p->run.n, rows = p->rows;
    bool ok = true;
    memset(p->ws_count, 0, sizeof p->ws_count);
    if (!(p->want & XF_WANT_HIDDEN))
        ok = size_mul3(2, rows, p->m->hidden, &p->ws_count[XF_WS_HIDDEN]);
    if (p->want & XF_WANT_ROLLOUT) {
        ok = ok && size_mul(n, n, &p->ws_count[XF_WS_ROLL_A]);
        p->ws_count[XF_WS_ROLL_B] = p->ws_count[XF_WS_ROLL_A];
    }
    ok = ok && ffn_floats(p, &p->ws_count[XF_WS_FFN]);
    // before the first layer, two embedding rows are widened there
    if (p->ws_count[XF_WS_FFN] < 2 * p->m->hidden)
        p->ws_count[XF_WS_FFN] = 2 * p->m->hidden;
    // a panel per member of the team, for the products run here (the
    // feed-forward's, a token's attention after a cache, the logits): a
    // 16-bit matrix is widened in it, and the streamed product packs its
    // rows there (stream_product.h)
    const struct xf_model *m = p->m;
    p->ws_count[XF_WS_WIDEN] = (size_t)p->team * WIDEN_PANEL_FLOATS;
    if (p->want & XF_WANT_LOGIT_LENS)
        p->ws_count[XF_WS_LENS] = head_lens_floats(m, p->run.n);
    // the layers' means, and the graph, a part of its own so that its
    // doubles are aligned (n is small: XF_MAX_FLOW_TOKENS)
    if (p->want & XF_WANT_FLOW) {
        p->ws_count[XF_WS_FLOW] = m->layers * p->run.n * p->run.n;
        p->ws_count[XF_WS_FLOW_GRAPH] =
            (attention_flow_bytes(m->layers, p->run.n) + sizeof(float) - 1) /
            sizeof(float);
    }
    if (p->want & XF_WANT_HEAD_STATS)
        ok = ok && size_mul(p->run.n, 3 * sizeof(size_t) / sizeof(float),
                            &p->ws_count[XF_WS_EARLIER]);
    // the projected attention, then a sequence's head means
    if (p->hooked)
        ok = ok && size_mul(rows, m->hidden, &p->ws_count[XF_WS_HOOK]) &&
             size_add_to(&p->ws_count[XF_WS_HOOK],
                         p->batch * m->heads * m->head_dim);
    // a step's rows of q, k, v, head outputs and attention output, a
    // row of scores per member, where each row's units begin, its
    // sequence and position (transformer_step.c), and whether it is its
    // sequence's last
    if (p->step) {
        const size_t hd = m->heads * m->head_dim;
        const size_t gd = m->kv_heads * m->head_dim;
        size_t scores;
        ok = ok &&
             size_mul(rows, 2 * hd + 2 * gd + m->hidden,
                      &p->ws_count[XF_WS_STEP]) &&
             size_mul(p->team, p->keys, &scores) &&
             size_add_to(&p->ws_count[XF_WS_STEP], scores) &&
             size_add_to(&p->ws_count[XF_WS_STEP],
                         (3 * rows + 1) * (sizeof(size_t) / sizeof(float)) +
                             rows / sizeof(float) + 1);
    }
    struct ws_plan w = {0, false};
    for (int i = 0; i < XF_WS_PARTS && ok; i++)
        ws_take(&w, &p->ws_offset[i], p->ws_count[i], sizeof(float));
    p->ws_bytes = w.bytes;
    return ok && !w.overflow;
}

static bool plan_result(struct xf_plan *p)
{
    const size_t n = p->run.n, lw = p->weight_layers, keys = p->keys;
    const struct xf_model *m = p->m;
    size_t *counts = p->result_count;
    memset(counts, 0, sizeof p->result_count);
    bool ok = true;
    if (p->want & XF_WANT_WEIGHTS)
        ok = size_mul3(lw * m->heads, n, keys, &counts[XF_RESULT_WEIGHTS]);
    if (p->want & XF_WANT_MEAN_WEIGHTS)
        ok = ok && size_mul3(lw, n, keys, &counts[XF_RESULT_MEAN_WEIGHTS]);
    if (p->want & XF_WANT_HIDDEN)
        ok = ok &&
             size_mul3(m->layers + 1, n, m->hidden, &counts[XF_RESULT_HIDDEN]);
    if (p->want & XF_WANT_ROLLOUT)
        ok = ok && size_mul(n, n, &counts[XF_RESULT_ROLLOUT]);
    if (p->want & XF_WANT_FLOW)
        ok = ok && size_mul(n, n, &counts[XF_RESULT_FLOW]);
    if (p->want & XF_WANT_POOLED)
        ok = ok && size_mul3(lw * m->heads, p->run.pool_rows, p->run.pool_cols,
                             &counts[XF_RESULT_POOLED]);
    if (p->want & XF_WANT_LOGITS)
        ok = ok && size_mul(p->want & XF_WANT_ALL_LOGITS ? n : p->batch,
                            m->vocab_size, &counts[XF_RESULT_LOGITS]);
    if (p->want & XF_WANT_VALUE_WEIGHTED)
        ok = ok &&
             size_mul3(lw * m->heads, n, keys,
                       &counts[XF_RESULT_VALUE_WEIGHTED]) &&
             size_mul3(lw, n, keys, &counts[XF_RESULT_VALUE_WEIGHTED_SUM]);
    if (p->want & XF_WANT_LOGIT_LENS)
        ok = ok &&
             size_mul3(m->layers, n, p->run.lens_k, &counts[XF_RESULT_LENS]);
    if (p->want & XF_WANT_HEAD_STATS)
        p->stats_count = m->layers * m->heads * ATTN_HEAD_STATS;
    if (p->want & XF_WANT_INDUCTION)
        p->induction_count = m->layers * m->heads;
    if (p->want & XF_WANT_TOP_K)
        ok = ok && size_mul3(lw, m->heads, n, &p->top_count);
    if (p->want & XF_WANT_ACTIVATIONS) {
        const size_t r = p->run.capture_position == XF_ALL ? n : 1;
        ok = ok &&
             size_mul3(m->layers + 1, r, m->hidden, &counts[XF_RESULT_RESID]) &&
             size_mul3(m->layers, r, m->heads * m->head_dim,
                       &counts[XF_RESULT_Z]) &&
             size_mul3(m->layers, r, m->hidden, &counts[XF_RESULT_ATTN_OUT]);
        counts[XF_RESULT_MLP_OUT] = counts[XF_RESULT_ATTN_OUT];
    }
    if (p->want & XF_WANT_LAST_ROWS)
        ok = ok && size_mul(p->batch, m->hidden, &counts[XF_RESULT_LAST_ROWS]);
    return ok;
}

/* Each config the layers use, resolved once (a kind of call on a kind of
 * layer), and the most bytes one of its calls holds. */
static attn_status plan_attention(struct xf_plan *p, struct attn_error *err)
{
    unsigned kind_of[XF_PLAN_ATTN];
    size_t layer_kind_of[XF_PLAN_ATTN];
    p->attn_count = 0;
    p->attn_bytes = 0;
    for (size_t l = p->run.first_layer; l < p->layers_run; l++) {
        const unsigned kind = xf_attn_kind(p, l);
        const size_t lk = p->m->layer_kind ? p->m->layer_kind[l] : 0;
        size_t a = 0;
        while (a < p->attn_count &&
               (kind_of[a] != kind || layer_kind_of[a] != lk))
            a++;
        p->attn_of[l] = (uint8_t)a;
        if (a < p->attn_count)
            continue;
        // a pass's calls differ only in what is returned of one layer and
        // whether the last one's output is read: four kinds a layer kind
        if (a == XF_PLAN_ATTN)
            return attn_fail(err, ATTN_E_INVALID, "layer",
                             "the pass asks for more than %d kinds of "
                             "attention",
                             XF_PLAN_ATTN);
        attn_status st =
            attn_config_of(p, kind, &p->m->kind[lk], &p->attn[a], err);
        if (st)
            return st;
        kind_of[a] = kind;
        layer_kind_of[a] = lk;
        p->attn_count++;
        size_t bytes = attn_forward_bytes(&p->attn[a]);
        if (bytes == SIZE_MAX)
            return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                             "the attention of %zu tokens is too large",
                             p->run.n);
        // weights the pass writes straight into the result
        if (xf_weights_into_result(&p->attn[a]))
            bytes -= attn_weights_bytes(&p->attn[a]);
        // on the pass's own pool when it needs one, which is free whenever
        // a layer's attention runs
        if (attn_forward_needs_pool(&p->attn[a]))
            bytes -= pool_bytes();
        p->attn_bytes = bytes > p->attn_bytes ? bytes : p->attn_bytes;
    }
    return ATTN_OK;
}

attn_status xf_plan(const struct xf_model *m, const struct xf_run *run,
                    struct xf_plan *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    attn_status st = xf_model_check(m, err);
    if (!st)
        st = check_run(m, run, err);
    if (st)
        return st;
    out->m = m;
    out->run = *run;
    out->want = run->want ? run->want : XF_WANT_WEIGHTS;
    out->batch = run->batch ? run->batch : 1;
    // under XF_MAX_BATCH and max_positions, the rows fit in size_t
    out->rows = run->seqs ? step_rows(run) : out->batch * run->n;
    out->hooked = run->n_edits || run->start ||
                  (out->want & (XF_WANT_ACTIVATIONS | XF_WANT_LAST_ROWS));
    out->weight_layers = run->layer == XF_ALL_LAYERS ? m->layers : 1;
    // the layers above the one asked for cannot change its weights
    const bool needs_all =
        run->layer == XF_ALL_LAYERS ||
        (out->want &
         (XF_WANT_HIDDEN | XF_WANT_ROLLOUT | XF_WANT_FLOW | XF_WANT_LOGITS |
          XF_WANT_LOGIT_LENS | XF_WANT_HEAD_STATS | XF_WANT_INDUCTION |
          XF_WANT_ACTIVATIONS | XF_WANT_LAST_ROWS)) ||
        run->n_edits;
    // a cache keeps every layer's keys and values
    out->layers_run = needs_all || run->cache ? m->layers : run->layer + 1;
    out->cache_len = run->cache ? run->cache->len : 0;
    out->keys = run->n + out->cache_len;
    out->step = run->cache && run->cache->len > 0;
    if (run->seqs) {
        // the longest sequence's keys: a row of scores holds them
        out->step = true;
        out->keys = 0;
        for (size_t b = 0; b < out->batch; b++) {
            const struct xf_seq *q = &run->seqs[b];
            if (q->cache->len + xf_seq_tokens(q) > out->keys)
                out->keys = q->cache->len + xf_seq_tokens(q);
        }
    }
    out->team = pool_team_size(run->threads, xf_widest_phase(out));
    out->ffn_packed = !out->step && ffn_streams(out);
    if (!xf_plan_workspace(out))
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the scratch memory for %zu tokens is too large",
                         run->n);
    if (!plan_result(out))
        return attn_fail(err, ATTN_E_TOO_BIG, "ids",
                         "the result for %zu tokens is too large", run->n);
    st = plan_attention(out, err);
    if (out->step)
        out->attn_bytes = 0; /* the step's attention is its own (XF_WS_STEP) */
    return st;
}

size_t xf_plan_bytes(const struct xf_plan *p)
{
    size_t total = 0, lens;
    for (int i = 0; i < XF_RESULT_FLOAT_ARRAYS; i++)
        if (!size_add_to(&total, p->result_count[i]))
            return SIZE_MAX;
    if (!size_mul(total, sizeof(float), &total) ||
        !size_mul(p->result_count[XF_RESULT_LENS], sizeof(struct xf_candidate),
                  &lens) ||
        !size_add_to(&total, lens) ||
        !size_add_to(&total, p->stats_count * sizeof(double)) ||
        !size_add_to(&total, p->induction_count * sizeof(double)) ||
        !size_add_to(&total, p->top_count * (p->run.top_k * (sizeof(uint32_t) +
                                                             sizeof(float)) +
                                             sizeof(uint32_t))) ||
        !size_add_to(&total, (p->stats_count ? p->m->layers * p->m->heads *
                                                   p->run.n * sizeof(double)
                                             : 0)) ||
        !size_add_to(&total, p->ws_bytes) ||
        !size_add_to(&total, p->attn_bytes))
        return SIZE_MAX;
    if (p->team > 1 && !size_add_to(&total, pool_bytes()))
        return SIZE_MAX;
    return total;
}

double xf_plan_flops(const struct xf_plan *p)
{
    const struct xf_model *m = p->m;
    const double n = (double)p->rows, H = (double)m->hidden;
    const double hd = (double)(m->heads * m->head_dim);
    const double gd = (double)(m->kv_heads * m->head_dim);
    // every layer's attention costs the same, whatever it returns; a
    // token after a cache: its projections, and its scores and values
    // over every position
    double total = 0;
    if (p->step) {
        double keys = (double)p->keys;
        if (p->run.seqs) {
            keys = 0;
            // each row's keys: its position and those before it
            for (size_t b = 0; b < p->batch; b++) {
                const struct xf_seq *q = &p->run.seqs[b];
                const double len = (double)q->cache->len,
                             t = (double)xf_seq_tokens(q);
                keys += t * len + t * (t + 1) / 2;
            }
        }
        total = (2.0 * n * (2.0 * hd * H + 2.0 * gd * H) + 4.0 * keys * hd) *
                (double)p->layers_run;
    } else
        for (size_t l = p->run.first_layer; l < p->layers_run; l++)
            total += attn_flops(xf_layer_attn(p, l));
    // a hooked layer's output projection, which its attention leaves out
    if (p->hooked && !p->step)
        total +=
            2.0 * n * hd * H * (double)(p->layers_run - p->run.first_layer);
    // the feed-forward of every layer whose output is read: up (and gate)
    // and down
    size_t ffn_layers = 0;
    for (size_t l = p->run.first_layer; l < p->layers_run; l++)
        ffn_layers += xf_output_used(p, l);
    const double products = m->arch.ffn == XF_FFN_GATED ? 3.0 : 2.0;
    total +=
        2.0 * products * n * H * (double)m->intermediate * (double)ffn_layers;
    if (p->want & XF_WANT_ROLLOUT)
        total += 2.0 * n * n * n * (double)(m->layers - 1);
    // the flow: a maximum flow per pair, each a few passes over the
    // layers x n^2 edges
    if (p->want & XF_WANT_FLOW)
        total += 16.0 * n * n * (double)m->layers * n * n;
    if (p->want & XF_WANT_LOGITS)
        total += 2.0 * (double)m->vocab_size * H *
                 (p->want & XF_WANT_ALL_LOGITS ? n : (double)p->batch);
    // the lens: every layer's every row through the head, then a pass
    // over its logits for their largest and their sum
    if (p->want & XF_WANT_LOGIT_LENS)
        total +=
            (2.0 * H + 4.0) * (double)m->vocab_size * n * (double)m->layers;
    return total;
}
