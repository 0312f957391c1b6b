/*
 * transformer.c - the forward pass of a planned transformer
 * (transformer.h).
 *
 * Each layer's self-attention is one attn_forward() call with the layer's
 * projections as explicit parameters, under the config the plan resolved
 * for its kind; a token after a KV cache has its own, one row against the
 * cache (transformer_step.c). The rest of the layer runs in phases on the
 * same team (transformer_units.h says how they are cut):
 *
 *   norm after (BERT)                 norm before (GPT-2, LLaMA)
 *                                     normed = norm_a(h)        rows
 *   a = attention(h)                  a = attention(normed)
 *   x1 = norm_a(a + h)        rows    x1 = a + h, normed = norm_f(x1)
 *   inter = act(up x1)        tiles   inter = act(up normed)
 *   out = down inter + x1     tiles   out = down inter + x1
 *   out = norm_f(out)         rows    (a look for overflow)     rows
 *
 * A gated feed-forward makes inter = act(gate x) * up x in the same tiles.
 * A parallel residual (GPT-NeoX) norms the layer's input for the
 * feed-forward too, normed = norm_f(h), so that out = h + a + ffn(h):
 * x1 is still what the attention leaves in the stream, and out - x1 what
 * the feed-forward adds. Norms on the sublayers' outputs (sandwich,
 * output) norm a and the feed-forward's output before their sums.
 * The last layer's feed-forward is skipped when no hidden state is
 * returned: nothing else reads it. With a final norm, the last hidden
 * state is the normed one, as transformers returns it.
 *
 * Memory: the result, the plan's one workspace block (the hidden states
 * when they are not returned, the rollout's two matrices, the
 * feed-forward's rows, a panel per member for 16-bit matrices, a cached
 * token's scratch), and, one layer at a time, what attn_forward() holds.
 * xf_plan_bytes() adds up exactly these.
 */
#include "error.h"
#include "attention_flow.h"
#include "head_stats.h"
#include "intervene.h"
#include "pool.h"
#include "transformer.h"
#include "transformer_head.h"
#include "transformer_step.h"
#include "transformer_units.h"
#include "widen.h"
#include "workspace.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- norms */

void xf_norm_rows(const struct xf_model *m, const float *x, size_t rows,
                  const float *w, const float *b, float *y)
{
    if (m->arch.norm == XF_NORM_RMS)
        xf_rms_norm(x, rows, m->hidden, w, m->norm_eps, y);
    else
        xf_layer_norm(x, rows, m->hidden, w, b, m->norm_eps, y);
}

/* ------------------------------------------------------------ one layer */

/* One layer's work besides its attention, shared by the team's units. */
struct pass {
    const struct xf_model *m;
    const struct xf_layer *y;
    size_t n;             /* rows: each sequence's positions, one sequence after
                             another */
    float *attn_out;      /* [n][H] the layer's attention output */
    bool attn_out_normed; /* its out norm taken already (a hooked layer's) */
    const float *h_in;    /* [n][H] the layer's input */
    float *h_out;         /* [n][H] the layer's output */
    float *x1;            /* [n][H] the residual sum after the attention */
    float *inter;         /* [n][I], rows ldi apart or packed */
    float *normed;        /* [n][H] a sublayer's normed input (norm before) */
    float *gate;          /* [n][I] (gated), laid out as inter */
    size_t ldi;           /* xf_inter_ld() */
    bool packed;          /* inter and gate packed (xf_inter_floats()):
                             STREAM_ROWS rows of each column side by side,
                             STREAM_ROWS x I floats a block */
    const float *final_w, *final_b; /* the final norm, for final_rows */
    /* the by-rows phase in hand: rows [r0, r0 + rows) of it */
    void (*rows_fn)(struct pass *p, size_t r0, size_t rows);
    /* the feed-forward product in hand: its weights as the checkpoint
     * holds them, and its bias */
    struct xf_matrix w;
    const float *b;
    float *panels;     /* a panel per member, for 16-bit weights (widen.h) */
    struct xf_products how; /* how the products take their rows */
    const float *z;    /* [n][heads D] a hooked layer's head values */
    float *hooked_out; /* [n][H] a hooked layer's projected attention */
    atomic_bool overflowed;
};

/* Unit u of a by-rows phase: XF_ROW_UNIT rows, fewer at the end. */
static void rows_unit(void *arg, size_t u, unsigned member)
{
    (void)member;
    struct pass *p = arg;
    const size_t r0 = u * XF_ROW_UNIT;
    p->rows_fn(p, r0, p->n - r0 < XF_ROW_UNIT ? p->n - r0 : XF_ROW_UNIT);
}

/* normed = norm_a(h_in) (norm before). */
static void input_norm_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    xf_norm_rows(p->m, p->h_in + r0 * H, rows, p->y->attn_norm_w,
                 p->y->attn_norm_b, p->normed + r0 * H);
}

/* Whether the arch norms each sublayer's output (sandwich, output). */
static bool out_norms(const struct xf_model *m)
{
    return m->arch.norm_place == XF_NORM_SANDWICH ||
           m->arch.norm_place == XF_NORM_OUTPUT;
}

/* Whether it norms each sublayer's input (before, sandwich). */
static bool in_norms(const struct xf_model *m)
{
    return m->arch.norm_place == XF_NORM_BEFORE ||
           m->arch.norm_place == XF_NORM_SANDWICH;
}

/* x1 = attention (normed, with out norms) + input, then norm_a(x1) (norm
 * after) or normed = norm_f(x1) (norms on the inputs; norm_f(input) with
 * a parallel residual). */
static void residual_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    float *x1 = p->x1 + r0 * H, *a = p->attn_out + r0 * H;
    if (out_norms(p->m) && !p->attn_out_normed)
        xf_norm_rows(p->m, a, rows, p->y->attn_out_norm_w,
                     p->y->attn_out_norm_b, a);
    for (size_t e = 0; e < rows * H; e++)
        x1[e] = a[e] + p->h_in[r0 * H + e];
    if (p->m->arch.norm_place == XF_NORM_AFTER) {
        xf_norm_rows(p->m, x1, rows, p->y->attn_norm_w, p->y->attn_norm_b, x1);
        return;
    }
    // a parallel residual's feed-forward reads the layer's input, as its
    // attention did
    const float *ffn_in = p->m->arch.parallel ? p->h_in + r0 * H : x1;
    if (in_norms(p->m))
        xf_norm_rows(p->m, ffn_in, rows, p->y->ffn_norm_w, p->y->ffn_norm_b,
                     p->normed + r0 * H);
}

/* The feed-forward's input rows: normed with norms on the inputs, else
 * x1. */
static const float *ffn_input(const struct pass *p)
{
    return in_norms(p->m) ? p->normed : p->x1;
}

/* The model's activation over a block of a product's outputs, as each
 * completes (widen_product's finish): arg is the xf_act. */
static void activate_block(float *block, size_t ld, size_t rows, size_t cols,
                           const void *arg)
{
    xf_activation_rows(*(const xf_act *)arg, block, ld, rows, cols);
}

/* Floats from one packed block of the intermediate rows to the next. */
static size_t inter_block(const struct pass *p)
{
    return STREAM_ROWS * p->m->intermediate;
}

/* The product in hand (p->w, p->b) over tile t, from x (in wide, rows
 * ldx apart, the tile's first row at x): W's rows of the tile's columns,
 * how the products take their rows, and the bias; y is the caller's. */
static struct widen_product tile_operands(const struct pass *p,
                                          const struct xf_tile *t,
                                          const float *x, size_t ldx, size_t in)
{
    return (struct widen_product){.x = x,
                                  .ldx = ldx,
                                  .rows = t->rows,
                                  .in = in,
                                  .w = xf_matrix_rows(p->w, t->c0, in),
                                  .dtype = p->w.dtype,
                                  .ldw = in,
                                  .out = t->width,
                                  .alone = p->how.alone,
                                  .bf16_dots = p->how.bf16_dots,
                                  .bias = p->b ? p->b + t->c0 : NULL};
}

/* out = in W^T + b over a tile, out laid out as p->inter, with the
 * product in hand (p->w, p->b), then act over it when act is not NULL. */
static void tile_product(const struct pass *p, const struct xf_tile *t,
                         float *out, const xf_act *act, unsigned member)
{
    const size_t H = p->m->hidden;
    struct widen_product pr =
        tile_operands(p, t, ffn_input(p) + t->r0 * H, H, H);
    pr.finish = act ? activate_block : NULL;
    pr.finish_arg = act;
    if (p->packed) {
        pr.y = out + stream_packed_at(inter_block(p), t->r0, t->c0);
        pr.ldy = inter_block(p);
        pr.y_packed = true;
        assert(t->r0 % STREAM_ROWS == 0 &&
               widen_product_streams(&pr, 0.0f, true));
    } else {
        pr.y = out + t->r0 * p->ldi + t->c0;
        pr.ldy = p->ldi;
    }
    widen_product(&pr, 0.0f, widen_panel(p->panels, member));
}

/* inter = act(up x) (plain) or gate = act(gate x) (gated), a tile of
 * it, with the product in hand (p->w, p->b). */
static void activated_tile(void *arg, size_t u, unsigned member)
{
    struct pass *p = arg;
    const struct xf_model *m = p->m;
    const size_t IW = m->intermediate;
    const struct xf_tile t = xf_tile_at(p->n, IW, u);
    float *out = m->arch.ffn == XF_FFN_GATED ? p->gate : p->inter;
    // the activation done to each block of the product as it completes
    tile_product(p, &t, out, &m->arch.act, member);
}

/* inter = (up x) * gate, a tile of it (gated). */
static void gated_tile(void *arg, size_t u, unsigned member)
{
    struct pass *p = arg;
    const size_t ldi = p->ldi;
    const struct xf_tile t = xf_tile_at(p->n, p->m->intermediate, u);
    tile_product(p, &t, p->inter, NULL, member);
    if (p->packed) {
        // each block's columns are one run of floats, its rows a lane
        for (size_t r0 = t.r0; r0 < t.r0 + t.rows; r0 += STREAM_ROWS) {
            const size_t at = stream_packed_at(inter_block(p), r0, t.c0);
            const size_t lanes = t.r0 + t.rows - r0 < STREAM_ROWS
                                     ? t.r0 + t.rows - r0
                                     : STREAM_ROWS;
            for (size_t c = 0; c < t.width; c++)
                for (size_t r = 0; r < lanes; r++)
                    p->inter[at + c * STREAM_ROWS + r] *=
                        p->gate[at + c * STREAM_ROWS + r];
        }
        return;
    }
    float *inter = p->inter + t.r0 * ldi + t.c0;
    const float *gate = p->gate + t.r0 * ldi + t.c0;
    for (size_t r = 0; r < t.rows; r++)
        for (size_t c = 0; c < t.width; c++)
            inter[r * ldi + c] *= gate[r * ldi + c];
}

/* h_out = inter W_down^T + b_down + x1, a tile of it; with out norms,
 * x1 is added after the norm (ffn_out_rows). */
static void output_tile(void *arg, size_t u, unsigned member)
{
    struct pass *p = arg;
    const size_t H = p->m->hidden, IW = p->m->intermediate;
    const struct xf_tile t = xf_tile_at(p->n, H, u);
    const float *b = p->b;
    float *out = p->h_out + t.r0 * H + t.c0;
    const float *x1 = p->x1 + t.r0 * H + t.c0;
    const bool later = out_norms(p->m);
    for (size_t r = 0; r < t.rows; r++) {
        if (b && later)
            memcpy(out + r * H, b + t.c0, t.width * sizeof *out);
        else if (b)
            for (size_t c = 0; c < t.width; c++)
                out[r * H + c] = b[t.c0 + c] + x1[r * H + c];
        else if (later)
            memset(out + r * H, 0, t.width * sizeof *out);
        else
            memcpy(out + r * H, x1 + r * H, t.width * sizeof *out);
    }
    const bool packed = p->packed;
    struct widen_product pr = tile_operands(
        p, &t,
        packed ? p->inter + stream_packed_at(inter_block(p), t.r0, 0)
               : p->inter + t.r0 * p->ldi,
        packed ? inter_block(p) : p->ldi, IW);
    // the bias and x1 are in out already (above)
    pr.bias = NULL;
    pr.y = out;
    pr.ldy = H;
    pr.x_packed = packed;
    assert(!packed ||
           (t.r0 % STREAM_ROWS == 0 && widen_product_streams(&pr, 1.0f, true)));
    widen_product(&pr, 1.0f, widen_panel(p->panels, member));
}

/* attn_out = z W_O^T + b_O, a tile of it, with the product in hand
 * (p->w, p->b): the output projection of a hooked layer, as the core
 * makes it (the bias in with the product's sums: widen.h). */
static void projection_tile(void *arg, size_t u, unsigned member)
{
    struct pass *p = arg;
    const size_t H = p->m->hidden, hd = p->m->heads * p->m->head_dim;
    const struct xf_tile t = xf_tile_at(p->n, H, u);
    struct widen_product pr = tile_operands(p, &t, p->z + t.r0 * hd, hd, hd);
    pr.y = p->hooked_out + t.r0 * H + t.c0;
    pr.ldy = H;
    widen_product(&pr, 0.0f, widen_panel(p->panels, member));
}

/* attn_out = norm_ao(attn_out) (out norms). */
static void attn_out_norm_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    float *a = p->attn_out + r0 * H;
    xf_norm_rows(p->m, a, rows, p->y->attn_out_norm_w, p->y->attn_out_norm_b,
                 a);
}

/* h_out = norm_fo(h_out) + x1: the feed-forward's output normed, then
 * its residual sum (out norms). */
static void ffn_out_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    float *out = p->h_out + r0 * H;
    const float *x1 = p->x1 + r0 * H;
    xf_norm_rows(p->m, out, rows, p->y->ffn_out_norm_w, p->y->ffn_out_norm_b,
                 out);
    for (size_t e = 0; e < rows * H; e++)
        out[e] += x1[e];
}

/* A look for values float32 could not hold. */
static void note_nonfinite(struct pass *p, const float *a, size_t count)
{
    for (size_t e = 0; e < count; e++)
        if (!isfinite(a[e]))
            atomic_store(&p->overflowed, true);
}

/* h_out = norm_f(h_out) (norm after), and a look for overflow. */
static void finish_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    float *out = p->h_out + r0 * H;
    if (p->m->arch.norm_place == XF_NORM_AFTER)
        xf_norm_rows(p->m, out, rows, p->y->ffn_norm_w, p->y->ffn_norm_b, out);
    note_nonfinite(p, out, rows * H);
}

/* h_out = final_norm(h_out). */
static void final_rows(struct pass *p, size_t r0, size_t rows)
{
    const size_t H = p->m->hidden;
    float *out = p->h_out + r0 * H;
    xf_norm_rows(p->m, out, rows, p->final_w, p->final_b, out);
}

/* ------------------------------------------------------------- the pass */

/* Row r of an embedding table w, widened into out[H]. */
static void embedding_row(struct xf_matrix w, size_t r, size_t H, float *out)
{
    attn_widen((const char *)w.data + attn_dtype_bytes(w.dtype, r * H), w.dtype,
               H, out);
}

/* Position of row i of a batched step: its sequence's cache's length
 * and the tokens before it of its sequence. */
static size_t step_position(const struct xf_run *run, size_t i)
{
    for (size_t b = 0;; b++) {
        const size_t tokens = xf_seq_tokens(&run->seqs[b]);
        if (i < tokens)
            return run->seqs[b].cache->len + i;
        i -= tokens;
    }
}

/* The embeddings of the run's tokens into h, count of them, at positions
 * pos0 on, or each at its position in its sequence in a batched step;
 * rows: [2][H] scratch. */
static void embed(const struct xf_model *m, const struct xf_run *run,
                  size_t count, size_t pos0, float *h, float *rows)
{
    const size_t H = m->hidden;
    float *p = rows, *t = rows + H;
    for (size_t i = 0; i < count; i++) {
        float *hi = h + i * H;
        embedding_row(m->word_emb, run->ids[i], H, hi);
        if (m->embed_scale > 0.0f)
            for (size_t c = 0; c < H; c++)
                hi[c] *= m->embed_scale;
        if (m->arch.positions == XF_POS_ROTARY)
            continue; /* positions enter at q and k */
        const size_t pos = run->seqs ? step_position(run, i) : pos0 + i;
        embedding_row(m->pos_emb, pos, H, p);
        if (!m->arch.token_types) {
            for (size_t c = 0; c < H; c++)
                hi[c] = hi[c] + p[c];
            continue;
        }
        embedding_row(m->type_emb, run->type_ids ? run->type_ids[i] : 0, H, t);
        // in BertEmbeddings' order: (word + token type) + position
        for (size_t c = 0; c < H; c++)
            hi[c] = (hi[c] + t[c]) + p[c];
    }
    if (m->arch.embed_norm)
        xf_norm_rows(m, h, count, m->embed_norm_w, m->embed_norm_b, h);
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

void xf_result_free(struct xf_result *result)
{
    if (!result)
        return;
    free(result->weights);
    free(result->mean_weights);
    free(result->hidden_states);
    free(result->rollout);
    free(result->flow);
    free(result->logits);
    free(result->lens);
    attn_measures_free(&result->measures);
    free(result->resid);
    free(result->z);
    free(result->attn_out);
    free(result->mlp_out);
    free(result->last_rows);
    free(result->scratch);
    memset(result, 0, sizeof *result);
}

float **xf_result_array(struct xf_result *r, int which)
{
    switch (which) {
    case XF_RESULT_WEIGHTS: return &r->weights;
    case XF_RESULT_MEAN_WEIGHTS: return &r->mean_weights;
    case XF_RESULT_HIDDEN: return &r->hidden_states;
    case XF_RESULT_ROLLOUT: return &r->rollout;
    case XF_RESULT_LOGITS: return &r->logits;
    case XF_RESULT_VALUE_WEIGHTED: return &r->measures.value_weighted;
    case XF_RESULT_VALUE_WEIGHTED_SUM: return &r->measures.value_weighted_sum;
    case XF_RESULT_FLOW: return &r->flow;
    case XF_RESULT_POOLED: return &r->measures.pooled;
    case XF_RESULT_RESID: return &r->resid;
    case XF_RESULT_Z: return &r->z;
    case XF_RESULT_ATTN_OUT: return &r->attn_out;
    case XF_RESULT_MLP_OUT: return &r->mlp_out;
    default: return &r->last_rows;
    }
}

/* *slot with room for count elements of elem bytes: the array it holds
 * when *room (its elements) suffices, else a new one; NULL for none
 * (count 0, or memory out). */
static void *refill(void *slot, size_t *room, size_t count, size_t elem)
{
    if (slot && count && *room >= count)
        return slot;
    free(slot);
    *room = 0;
    void *fresh = count ? malloc(count * elem) : NULL;
    if (fresh)
        *room = count;
    return fresh;
}

/* Free the arrays of r that are not kept between passes (the measures'
 * outside XF_RESULT_*, small beside the rest) and its sizes. */
static void result_release_unkept(struct xf_result *r)
{
    struct attn_measures *ms = &r->measures;
    free(ms->top_keys);
    free(ms->top_weights);
    free(ms->top_count);
    free(ms->induction);
    free(ms->head_stats);
    free(ms->key_received);
    ms->top_keys = ms->top_count = NULL;
    ms->top_weights = NULL;
    ms->induction = ms->head_stats = ms->key_received = NULL;
    r->layers = r->weight_layers = r->heads = r->n = r->keys = 0;
    r->hidden = r->vocab = r->lens_k = r->batch = r->captured = 0;
}

/* The result of the plan in r, refilling the arrays r holds where they
 * have room (xf_forward_again()). */
static attn_status result_init(const struct xf_plan *plan, struct xf_result *r,
                               struct attn_error *err)
{
    result_release_unkept(r);
    for (int i = 0; i < XF_RESULT_FLOAT_ARRAYS; i++) {
        float **slot = xf_result_array(r, i);
        *slot = refill(*slot, &r->room[i], plan->result_count[i],
                       sizeof(float));
        if (plan->result_count[i] && !*slot) {
            xf_result_free(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the result of %zu tokens",
                             plan->run.n);
        }
    }
    if (plan->top_count) {
        const size_t k = plan->run.top_k;
        r->measures.top_keys =
            malloc(plan->top_count * k * sizeof *r->measures.top_keys);
        r->measures.top_weights =
            malloc(plan->top_count * k * sizeof *r->measures.top_weights);
        r->measures.top_count =
            malloc(plan->top_count * sizeof *r->measures.top_count);
        if (!r->measures.top_keys || !r->measures.top_weights ||
            !r->measures.top_count) {
            xf_result_free(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the rows' top keys");
        }
    }
    if (plan->induction_count) {
        r->measures.induction =
            malloc(plan->induction_count * sizeof *r->measures.induction);
        if (!r->measures.induction) {
            xf_result_free(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the induction scores");
        }
    }
    if (plan->stats_count) {
        r->measures.head_stats =
            malloc(plan->stats_count * sizeof *r->measures.head_stats);
        r->measures.key_received =
            malloc(plan->m->layers * plan->m->heads * plan->run.n *
                   sizeof *r->measures.key_received);
        if (!r->measures.head_stats || !r->measures.key_received) {
            xf_result_free(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the head measures");
        }
    }
    const size_t lens = plan->result_count[XF_RESULT_LENS];
    r->lens = refill(r->lens, &r->room[XF_RESULT_LENS], lens, sizeof *r->lens);
    if (lens) {
        if (!r->lens) {
            xf_result_free(r);
            return attn_fail(err, ATTN_E_NOMEM, "ids",
                             "out of memory for the logit lens of %zu tokens",
                             plan->run.n);
        }
        r->lens_k = plan->run.lens_k;
    }
    r->layers = plan->m->layers;
    r->weight_layers = plan->weight_layers;
    r->heads = plan->m->heads;
    r->n = plan->run.n;
    r->keys = plan->keys;
    r->hidden = plan->m->hidden;
    r->vocab = r->logits ? plan->m->vocab_size : 0;
    r->batch = plan->batch;
    if (r->resid)
        r->captured = plan->run.capture_position == XF_ALL ? plan->run.n : 1;
    return ATTN_OK;
}

/* What every layer of one xf_forward() call shares. */
struct stack {
    const struct xf_plan *plan;
    const atomic_bool *cancel;
    struct xf_result *out;
    float *ffn;            /* the workspace's feed-forward rows */
    float *panels;         /* the workspace's panels, one per member */
    float *step;           /* the workspace's scratch of a token after a
                              cache */
    size_t *earlier;       /* with head measures: each token's earlier
                              copy (head_stats_earlier()) */
    float *hook;           /* hooked: the workspace's projected attention
                              [rows][H], then the sequences' head means
                              [batch][heads D] */
    struct pool_team team; /* on the call's own pool, NULL for one */
};

/* Run one phase on the team, which the call holds between the layers'
 * attention calls. */
static void run_phase(struct stack *s, pool_unit unit, struct pass *p,
                      size_t n_units)
{
    pool_phase(&s->team, unit, p, n_units);
}

/* The same for a by-rows phase. */
static void run_rows(struct stack *s, struct pass *p,
                     void (*fn)(struct pass *, size_t, size_t))
{
    p->rows_fn = fn;
    pool_phase(&s->team, rows_unit, p, xf_row_units(p->n));
}

/* The feed-forward (its output used): the product through w by tiles. */
static void ffn_product(struct stack *s, struct pass *p, pool_unit tile,
                        struct xf_matrix w, const float *b, size_t out)
{
    p->w = w;
    p->b = b;
    run_phase(s, tile, p, xf_tile_count(p->n, out));
}

/* A float32 matrix for the core's params, NULL for a 16-bit one ... */
static const float *float_matrix(struct xf_matrix w)
{
    return w.dtype == ATTN_F32 ? w.data : NULL;
}

/* ... which goes as it is stored instead. */
static struct attn_stored stored_matrix(struct xf_matrix w)
{
    if (w.dtype == ATTN_F32)
        return (struct attn_stored){NULL, ATTN_F32};
    return (struct attn_stored){w.data, w.dtype};
}

/* Layer l's measures, as its call gave them, into the pass's result: one
 * layer's block of each array, at l for those taken of every layer (the
 * head measures), at at for those of the returned layers only. */
static void keep_measures(struct xf_result *out, const struct attn_config *cfg,
                          struct attn_measures *call, size_t l, size_t at)
{
    static const bool of_every_layer[ATTN_MEASURE_ARRAYS] = {
        [ATTN_MEASURE_HEAD_STATS] = true,
        [ATTN_MEASURE_KEY_RECEIVED] = true,
        [ATTN_MEASURE_INDUCTION] = true};
    struct attn_measure_part from[ATTN_MEASURE_ARRAYS], to[ATTN_MEASURE_ARRAYS];
    attn_measure_parts(cfg, call, from);
    attn_measure_parts(cfg, &out->measures, to);
    for (int i = 0; i < ATTN_MEASURE_ARRAYS; i++) {
        char *dst = *to[i].slot;
        const size_t bytes = from[i].count * from[i].elem;
        if (!dst || !bytes)
            continue;
        memcpy(dst + (of_every_layer[i] ? l : at) * bytes, *from[i].slot,
               bytes);
    }
}

/* Layer l's attention through attn_forward() on x: the weights and mean
 * weights into the result, the keys and values into a cache being
 * started; its output in attn. */
static attn_status core_attention(struct stack *s, size_t l, const float *x,
                                  struct attn_result *attn,
                                  struct attn_error *err)
{
    const struct xf_plan *plan = s->plan;
    const struct xf_model *m = plan->m;
    const struct xf_layer *y = &m->layer[l];
    const size_t n = plan->run.n;
    // the attention's matrices as the checkpoint holds them
    const struct attn_params params = {
        .wq = float_matrix(y->q_w),
        .bq = y->q_b,
        .wk = float_matrix(y->k_w),
        .bk = y->k_b,
        .wv = float_matrix(y->v_w),
        .bv = y->v_b,
        .wo = float_matrix(y->o_w),
        .bo = y->o_b,
        .q_norm = y->q_norm_w,
        .k_norm = y->k_norm_w,
        .stored_wq = stored_matrix(y->q_w),
        .stored_wk = stored_matrix(y->k_w),
        .stored_wv = stored_matrix(y->v_w),
        .stored_wo = stored_matrix(y->o_w),
    };
    struct attn_config cfg = *xf_layer_attn(plan, l);
    cfg.params = &params;
    cfg.earlier = s->earlier;
    cfg.pool = s->team.pool;
    cfg.cancel = s->cancel;
    cfg.bf16_dots = plan->run.bf16_dots;
    const size_t nn = n * n;
    const size_t at = plan->run.layer == XF_ALL_LAYERS ? l : 0;
    /* the layer's weights straight into the result, where they are
     * returned: a copy of [heads][n][n] a layer saved */
    if (s->out->weights && xf_weights_into_result(&cfg))
        cfg.weights_into = s->out->weights + at * m->heads * nn;
    attn_status st = attn_forward(&cfg, x, NULL, attn, err);
    if (st) {
        if (st == ATTN_E_CANCELLED || !err)
            return st;
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return attn_fail_at(err, st, "layer", 1, &l, "layer %zu: %s", l, why);
    }
    if (s->out->weights && xf_returns_layer(plan, l) && !attn->weights_lent)
        memcpy(s->out->weights + at * m->heads * nn, attn->weights,
               m->heads * nn * sizeof(float));
    if (s->out->mean_weights && xf_returns_layer(plan, l))
        memcpy(s->out->mean_weights + at * nn, attn->mean_weights,
               nn * sizeof(float));
    keep_measures(s->out, &cfg, &attn->measures, l, at);
    struct xf_cache *c = plan->run.cache;
    if (c) {
        const size_t at_row = l * c->capacity * c->row;
        memcpy(c->k + at_row, attn->k, n * c->row * sizeof(float));
        memcpy(c->v + at_row, attn->v, n * c->row * sizeof(float));
    }
    return ATTN_OK;
}

/* Layer l's attention of each sequence's token after its cache, on x:
 * the rows of weights and mean weights kept; its output returned. A run
 * of one token after run.cache is a step of one sequence, whose rows go
 * into the result. */
static float *cached_attention(struct stack *s, size_t l, const float *x)
{
    const struct xf_plan *plan = s->plan;
    const struct xf_run *run = &plan->run;
    const struct xf_seq one = {.cache = run->cache,
                               .edits = run->edits,
                               .n_edits = run->n_edits,
                               .layer = run->layer,
                               .weights = s->out->weights,
                               .mean_weights = s->out->mean_weights};
    const struct step_io io = {.plan = plan,
                               .layer = l,
                               .x = x,
                               .rows = plan->rows,
                               .seqs = run->seqs ? run->seqs : &one,
                               .batch = run->seqs ? plan->batch : 1,
                               .scratch = s->step,
                               .panels = s->panels};
    if (s->team.pool)
        pool_acquire(s->team.pool);
    float *out = step_attention(&io, &s->team);
    if (s->team.pool)
        pool_release(s->team.pool);
    return out;
}

/* Layer l's rows of an activation into dst (NULL: not kept): every
 * position, or the one the run captures. rows: [n][width] */
static void keep_rows(const struct stack *s, float *dst, size_t l,
                      const float *rows, size_t width)
{
    if (!dst)
        return;
    const struct xf_run *run = &s->plan->run;
    if (run->capture_position == XF_ALL)
        memcpy(dst + l * run->n * width, rows, run->n * width * sizeof *dst);
    else
        memcpy(dst + l * width, rows + run->capture_position * width,
               width * sizeof *dst);
}

/* The same for the feed-forward's output, out - x1. */
static void keep_difference(const struct stack *s, float *dst, size_t l,
                            const float *out, const float *x1, size_t width)
{
    if (!dst)
        return;
    const struct xf_run *run = &s->plan->run;
    const bool all = run->capture_position == XF_ALL;
    const size_t r0 = all ? 0 : run->capture_position, rows = all ? run->n : 1;
    float *d = dst + l * rows * width;
    for (size_t e = 0; e < rows * width; e++)
        d[e] = out[r0 * width + e] - x1[r0 * width + e];
}

/* A hooked layer l's attention after the core: its head values z
 * [rows][heads D] edited (the means taken first, and kept in a cache
 * being started), then projected through W_O and its bias (and normed,
 * with out norms), and that edited in turn. Returns the projected rows,
 * in the workspace. */
static float *hooked_attention(struct stack *s, struct pass *p, size_t l,
                               float *z)
{
    const struct xf_plan *plan = s->plan;
    const struct xf_run *run = &plan->run;
    const struct xf_model *m = plan->m;
    const size_t n = run->n, H = m->hidden, D = m->head_dim, hd = m->heads * D;
    float *means = s->hook + plan->rows * H;
    struct xf_cache *c = run->cache;
    const bool edited = intervene_any(run, l, XF_SITE_Z);
    const size_t over =
        run->mean_over && run->mean_over < n ? run->mean_over : n;
    if (edited || c)
        for (size_t b = 0; b < plan->batch; b++)
            intervene_means(z + b * n * hd, over, hd, means + b * hd);
    if (c)
        memcpy(c->z_mean + l * hd, means, hd * sizeof *means);
    if (edited)
        intervene_apply(run, l, XF_SITE_Z, z, NULL, n, hd, D, 0, means);
    keep_rows(s, s->out->z, l, z, hd);
    p->z = z;
    p->hooked_out = s->hook;
    if (s->team.pool)
        pool_acquire(s->team.pool);
    ffn_product(s, p, projection_tile, m->layer[l].o_w, m->layer[l].o_b, H);
    if (out_norms(m)) {
        // what the layer adds to the stream is the normed output
        p->attn_out = s->hook;
        run_rows(s, p, attn_out_norm_rows);
        p->attn_out_normed = true;
    }
    if (s->team.pool)
        pool_release(s->team.pool);
    intervene_apply(run, l, XF_SITE_ATTN_OUT, s->hook, NULL, n, H, D, 0, NULL);
    keep_rows(s, s->out->attn_out, l, s->hook, H);
    return s->hook;
}

/* Layer l: its attention (through the core, or after the cache), with
 * the feed-forward when its output is used; h_in -> h_out. */
static attn_status run_layer(struct stack *s, size_t l, float *h_in,
                             float *h_out, struct attn_result *attn,
                             struct attn_error *err)
{
    const struct xf_plan *plan = s->plan;
    const struct xf_run *run = &plan->run;
    const struct xf_model *m = plan->m;
    const struct xf_layer *y = &m->layer[l];
    const size_t n = plan->rows, H = m->hidden;
    size_t inter = 0;
    // the plan has sized the scratch with the same call
    (void)xf_inter_floats(m, n, plan->ffn_packed, &inter);
    if (plan->hooked && !plan->step) {
        intervene_apply(run, l, XF_SITE_RESID_PRE, h_in, NULL, run->n, H,
                        m->head_dim, 0, NULL);
        keep_rows(s, s->out->resid, l, h_in, H);
    }
    const bool before = in_norms(m);
    const bool gated = m->arch.ffn == XF_FFN_GATED;
    struct pass p = {.m = m,
                     .y = y,
                     .n = n,
                     .h_in = h_in,
                     .h_out = h_out,
                     .x1 = s->ffn,
                     .inter = s->ffn + n * H,
                     .normed = before ? s->ffn + n * H + inter : NULL,
                     .gate =
                         gated ? s->ffn + n * (H + before * H) + inter : NULL,
                     .ldi = xf_inter_ld(m),
                     .packed = plan->ffn_packed,
                     .final_w = m->final_norm_w,
                     .final_b = m->final_norm_b,
                     .panels = s->panels,
                     .how = xf_plan_products(plan)};
    atomic_init(&p.overflowed, false);
    if (before) {
        if (s->team.pool)
            pool_acquire(s->team.pool);
        run_rows(s, &p, input_norm_rows);
        if (s->team.pool)
            pool_release(s->team.pool);
    }
    const float *x = before ? p.normed : h_in;
    if (plan->step) {
        p.attn_out = cached_attention(s, l, x);
        if (!p.attn_out)
            return attn_fail_at(err, ATTN_E_INPUT, "layer", 1, &l,
                                "layer %zu: a token's projections overflow "
                                "float32; the model's weights are too large",
                                l);
    } else {
        attn_status st = core_attention(s, l, x, attn, err);
        if (st)
            return st;
        // a layer whose output nothing reads has none to edit
        p.attn_out = plan->hooked && attn->output
                         ? hooked_attention(s, &p, l, attn->output)
                         : attn->output;
    }
    if (!(xf_attn_kind(plan, l) & XF_KIND_OUTPUT))
        return ATTN_OK;

    // the pool is the call's own: attn_forward() has given it back
    if (s->team.pool)
        pool_acquire(s->team.pool);
    run_rows(s, &p, residual_rows);
    if (gated) {
        ffn_product(s, &p, activated_tile, y->gate_w, y->gate_b,
                    m->intermediate);
        ffn_product(s, &p, gated_tile, y->up_w, y->up_b, m->intermediate);
    } else {
        ffn_product(s, &p, activated_tile, y->up_w, y->up_b, m->intermediate);
    }
    ffn_product(s, &p, output_tile, y->down_w, y->down_b, H);
    if (out_norms(m))
        run_rows(s, &p, ffn_out_rows);
    if (plan->hooked && !plan->step) {
        // the feed-forward's output is what it adds to x1
        intervene_apply(run, l, XF_SITE_MLP_OUT, h_out, p.x1, run->n, H,
                        m->head_dim, 0, NULL);
        keep_difference(s, s->out->mlp_out, l, h_out, p.x1, H);
        if (l + 1 == m->layers)
            keep_rows(s, s->out->resid, m->layers, h_out, H);
    }
    run_rows(s, &p, finish_rows);
    const bool last = l + 1 == m->layers;
    if (last && m->arch.final_norm)
        run_rows(s, &p, final_rows);
    if (s->team.pool)
        pool_release(s->team.pool);
    if (s->cancel && atomic_load(s->cancel))
        return attn_fail(err, ATTN_E_CANCELLED, "",
                         "the computation was cancelled");
    if (atomic_load(&p.overflowed))
        return attn_fail_at(err, ATTN_E_INPUT, "layer", 1, &l,
                            "layer %zu: the activations overflow float32; "
                            "the model's weights are too large",
                            l);
    return ATTN_OK;
}

/* The plan's scratch block, in the one out keeps where it is large
 * enough; NULL when memory runs out. */
static char *scratch_block(const struct xf_plan *plan, struct xf_result *out)
{
    const struct ws_plan w = {.bytes = plan->ws_bytes};
    if (out->scratch && out->scratch_bytes >= w.bytes)
        return out->scratch;
    free(out->scratch);
    out->scratch = ws_alloc(&w);
    out->scratch_bytes = out->scratch ? w.bytes : 0;
    return out->scratch;
}

/* A batched step's last row of each sequence moved to row b of h
 * [rows][H], in order: row b comes from row b or one after it, which no
 * earlier move has written. */
static void gather_last_rows(const struct xf_run *run, size_t H, float *h)
{
    size_t row = 0;
    for (size_t b = 0; b < run->batch; b++) {
        row += xf_seq_tokens(&run->seqs[b]);
        if (row - 1 != b)
            memcpy(h + b * H, h + (row - 1) * H, H * sizeof *h);
    }
}

/* xf_forward_again() but for freeing *out on failure. */
static attn_status forward_into(const struct xf_plan *plan,
                                const atomic_bool *cancel,
                                struct xf_result *out, struct attn_error *err)
{
    const struct xf_model *m = plan->m;
    const struct xf_run *run = &plan->run;
    // the sizes were planned for the caches as they were then
    if (run->cache && run->cache->len != plan->cache_len)
        return attn_fail(err, ATTN_E_INVALID, "cache",
                         "the cache holds %zu positions, not the %zu it was "
                         "planned with: plan the run again",
                         run->cache->len, plan->cache_len);
    size_t rows = 0; /* a step's: every sequence's tokens */
    for (size_t b = 0; run->seqs && b < plan->batch; b++) {
        const struct xf_cache *c = run->seqs[b].cache;
        const size_t tokens = xf_seq_tokens(&run->seqs[b]);
        if (c->len + tokens > plan->keys || tokens > c->capacity - c->len)
            return attn_fail_at(err, ATTN_E_INVALID, "seqs", 1, &b,
                                "seqs[%zu]: the cache holds %zu positions, "
                                "more than it was planned with: plan the "
                                "step again",
                                b, c->len);
        rows += tokens;
    }
    if (run->seqs && rows != plan->rows)
        return attn_fail(err, ATTN_E_INVALID, "seqs",
                         "the sequences bring %zu tokens, not the %zu the "
                         "step was planned with: plan the step again",
                         rows, plan->rows);
    struct stack s = {.plan = plan,
                      .cancel = cancel,
                      .out = out,
                      .team = {.size = plan->team, .cancel = cancel}};
    attn_status st = result_init(plan, out, err);
    if (st)
        return st;
    char *block = scratch_block(plan, out);
    if (!block)
        return attn_fail(err, ATTN_E_NOMEM, "ids",
                         "out of memory for %zu bytes of scratch",
                         plan->ws_bytes);
    struct attn_pool *own_pool = NULL;
    st = pool_take(NULL, plan->team, &s.team.pool, &own_pool, err);
    if (st)
        return st;
    float *ws[XF_WS_PARTS];
    for (int i = 0; i < XF_WS_PARTS; i++)
        ws[i] = (float *)(block + plan->ws_offset[i]);
    s.ffn = ws[XF_WS_FFN];
    s.panels = plan->ws_count[XF_WS_WIDEN] ? ws[XF_WS_WIDEN] : NULL;
    s.step = ws[XF_WS_STEP];
    s.hook = ws[XF_WS_HOOK];
    if (out->measures.head_stats) {
        // which earlier tokens repeat each one: the same for every head
        size_t *sizes = (size_t *)(void *)ws[XF_WS_EARLIER];
        s.earlier = sizes + 2 * run->n;
        head_stats_earlier(run->ids, run->n, sizes, s.earlier);
    }

    const size_t nh = plan->rows * m->hidden;
    // hidden state l lives in the result, or in one of two scratch rows
    float *hidden = out->hidden_states;
#define STATE(l) (hidden ? hidden + (l)*nh : ws[XF_WS_HIDDEN] + ((l) % 2) * nh)
    if (run->start) {
        // every sequence resumes from the same residual stream
        for (size_t b = 0; b < plan->batch; b++)
            memcpy(STATE(run->first_layer) + b * run->n * m->hidden, run->start,
                   run->n * m->hidden * sizeof(float));
    } else {
        // the feed-forward rows are free yet
        embed(m, run, plan->rows, run->cache ? run->cache->len : 0, STATE(0),
              s.ffn);
    }
    for (size_t l = run->first_layer; l < plan->layers_run && !st; l++) {
        struct attn_result attn = {0};
        st = run_layer(&s, l, STATE(l), STATE(l + 1), &attn, err);
        if (!st && out->lens) {
            if (s.team.pool)
                pool_acquire(s.team.pool);
            head_lens(&s.team, m, STATE(l + 1), run->n, l + 1 == m->layers,
                      run->lens_k, out->lens + l * run->n * run->lens_k,
                      ws[XF_WS_LENS], s.panels);
            if (s.team.pool)
                pool_release(s.team.pool);
        }
        if (!st && out->flow)
            memcpy(ws[XF_WS_FLOW] + l * run->n * run->n, attn.mean_weights,
                   run->n * run->n * sizeof(float));
        if (!st && (plan->want & XF_WANT_ROLLOUT))
            rollout_step(attn.mean_weights, run->n, l == 0, out->rollout,
                         ws[XF_WS_ROLL_A], ws[XF_WS_ROLL_B]);
        attn_result_free(&attn);
    }
    if (!st && out->flow)
        attention_flow(ws[XF_WS_FLOW], m->layers, run->n, ws[XF_WS_FLOW_GRAPH],
                       out->flow);
    if (!st && out->last_rows)
        for (size_t b = 0; b < plan->batch; b++)
            memcpy(out->last_rows + b * m->hidden,
                   STATE(m->layers) + ((b + 1) * run->n - 1) * m->hidden,
                   m->hidden * sizeof(float));
    if (!st && out->logits) {
        // one sequence's last row where it lies (or all of its rows), a
        // batch's together
        // (a batched step's rows are its sequences' last ones)
        const bool every = plan->want & XF_WANT_ALL_LOGITS;
        if (run->seqs)
            gather_last_rows(run, m->hidden, STATE(m->layers));
        const float *last =
            run->seqs           ? STATE(m->layers)
            : plan->batch > 1   ? out->last_rows
            : every             ? STATE(m->layers)
                                : STATE(m->layers) + (run->n - 1) * m->hidden;
        if (s.team.pool)
            pool_acquire(s.team.pool);
        head_logits(&s.team, m, last, every ? run->n : plan->batch, out->logits,
                    s.panels, xf_plan_products(plan));
        if (s.team.pool)
            pool_release(s.team.pool);
    }
    if (!st && run->cache)
        run->cache->len += run->n;
    for (size_t b = 0; !st && run->seqs && b < plan->batch; b++)
        run->seqs[b].cache->len += xf_seq_tokens(&run->seqs[b]);
#undef STATE
    pool_give_back(s.team.pool, own_pool);
    return st;
}

attn_status xf_forward_again(const struct xf_plan *plan,
                             const atomic_bool *cancel, struct xf_result *out,
                             struct attn_error *err)
{
    attn_status st = forward_into(plan, cancel, out, err);
    if (st)
        xf_result_free(out);
    return st;
}

attn_status xf_forward(const struct xf_plan *plan, const atomic_bool *cancel,
                       struct xf_result *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    const attn_status st = xf_forward_again(plan, cancel, out, err);
    // the scratch is kept only for a next pass
    free(out->scratch);
    out->scratch = NULL;
    out->scratch_bytes = 0;
    return st;
}
