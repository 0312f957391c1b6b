/*
 * transformer_step.c - a decoder's KV cache and the attention of one
 * token against it (transformer_step.h).
 */
#include "checked.h"
#include "error.h"
#include "forward_plan.h"
#include "intervene.h"
#include "softmax.h"
#include "transformer_step.h"
#include "transformer_units.h"
#include "vecmath.h"
#include "widen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- cache */

size_t xf_cache_bytes(const struct xf_model *m, size_t capacity)
{
    size_t floats;
    if (!size_mul3(m->layers, capacity, m->kv_heads * m->head_dim, &floats) ||
        !size_mul(floats, 2, &floats) ||
        !size_add_to(&floats, m->layers * m->heads * m->head_dim) ||
        !size_mul(floats, sizeof(float), &floats))
        return SIZE_MAX;
    return floats;
}

attn_status xf_cache_init(const struct xf_model *m, size_t capacity,
                          struct xf_cache *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    if (capacity == 0 || capacity > m->max_positions)
        return attn_fail(err, ATTN_E_INVALID, "capacity",
                         "capacity (%zu) must be 1 to the model's %zu "
                         "positions",
                         capacity, m->max_positions);
    const size_t bytes = xf_cache_bytes(m, capacity);
    if (bytes == SIZE_MAX)
        return attn_fail(err, ATTN_E_TOO_BIG, "capacity",
                         "a cache of %zu positions is too large", capacity);
    const size_t kv = m->layers * capacity * m->kv_heads * m->head_dim;
    out->k = malloc(kv * sizeof(float));
    out->v = malloc(kv * sizeof(float));
    out->z_mean = calloc(m->layers * m->heads * m->head_dim, sizeof(float));
    if (!out->k || !out->v || !out->z_mean) {
        xf_cache_free(out);
        return attn_fail(err, ATTN_E_NOMEM, "capacity",
                         "out of memory for a cache of %zu positions",
                         capacity);
    }
    out->layers = m->layers;
    out->capacity = capacity;
    out->row = m->kv_heads * m->head_dim;
    return ATTN_OK;
}

bool xf_cache_outgrown(const struct xf_model *m, const struct xf_cache *cache,
                       size_t n)
{
    const size_t kinds = m->kinds ? m->kinds : 1;
    for (size_t k = 0; k < kinds && k < XF_MAX_LAYER_KINDS; k++) {
        const size_t after = m->kind[k].long_after;
        if (after && cache->len && cache->len <= after &&
            n > after - cache->len)
            return true;
    }
    return false;
}

size_t xf_cache_rerun_length(const struct xf_model *m, size_t from, size_t to)
{
    const size_t kinds = m->kinds ? m->kinds : 1;
    size_t longest = 0;
    for (size_t k = 0; k < kinds && k < XF_MAX_LAYER_KINDS; k++) {
        const size_t after = m->kind[k].long_after;
        if (after && from <= after && after < to && after + 1 > longest)
            longest = after + 1;
    }
    return longest;
}

void xf_cache_free(struct xf_cache *cache)
{
    if (!cache)
        return;
    free(cache->k);
    free(cache->v);
    free(cache->z_mean);
    memset(cache, 0, sizeof *cache);
}

/* ------------------------------------------------------------ the token */

/* What the units of one step share. */
struct step {
    const struct xf_model *m;
    const struct xf_layer *y;
    size_t rows;
    const float *x;     /* [rows][H] */
    float *q, *k, *v;   /* [rows][h D], [rows][g D], [rows][g D] */
    const float *heads; /* [rows][h D] the heads' outputs */
    float *out;         /* [rows][H] */
    float *panels;
};

/* y[r][c0 .. c0 + width) = x[r] W[c0 ..]^T + b[c0 ..] for a tile of a
 * product with in inputs, each row as it would go alone, through the
 * member's panel. */
static void step_tile(const struct step *s, const float *x, size_t in,
                      struct xf_matrix w, const float *b, size_t cols, size_t u,
                      float *y, unsigned member)
{
    const struct xf_tile t = xf_tile_at(s->rows, cols, u);
    const struct widen_product pr = {.x = x + t.r0 * in,
                                     .ldx = in,
                                     .rows = t.rows,
                                     .in = in,
                                     .w = xf_matrix_rows(w, t.c0, in),
                                     .dtype = w.dtype,
                                     .ldw = in,
                                     .out = t.width,
                                     .y = y + t.r0 * cols + t.c0,
                                     .ldy = cols,
                                     .alone = true,
                                     .bias = b ? b + t.c0 : NULL};
    widen_product(&pr, 0.0f, widen_panel(s->panels, member));
}

/* Tile u of q, then of k, then of v. */
static void qkv_unit(void *arg, size_t u, unsigned member)
{
    const struct step *s = arg;
    const struct xf_model *m = s->m;
    const size_t H = m->hidden, hd = m->heads * m->head_dim,
                 gd = m->kv_heads * m->head_dim;
    const size_t tq = xf_tile_count(s->rows, hd),
                 tk = xf_tile_count(s->rows, gd);
    if (u < tq)
        step_tile(s, s->x, H, s->y->q_w, s->y->q_b, hd, u, s->q, member);
    else if (u < tq + tk)
        step_tile(s, s->x, H, s->y->k_w, s->y->k_b, gd, u - tq, s->k, member);
    else
        step_tile(s, s->x, H, s->y->v_w, s->y->v_b, gd, u - tq - tk, s->v,
                  member);
}

/* Tile u of the output projection. */
static void out_unit(void *arg, size_t u, unsigned member)
{
    const struct step *s = arg;
    const struct xf_model *m = s->m;
    step_tile(s, s->heads, m->heads * m->head_dim, s->y->o_w, s->y->o_b,
              m->hidden, u, s->out, member);
}

/* Four floats, the vector every x86-64 has. */
typedef float v4f __attribute__((vector_size(16)));

/* Rows r[0 .. 3] as columns: r[i][e] goes to lane i of r[e]. */
static inline void transpose4(v4f r[4])
{
    const v4f t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5);
    const v4f t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);
    const v4f t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
    const v4f t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
    r[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
    r[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    r[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    r[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

/* dot[i] = q . k[i row ..] for eight keys, each sum from zero in the
 * order of e, as one key alone would take it: the keys are lanes of two
 * vectors, four values of each at a time turned into columns. */
static void dots8(const float *q, const float *k, size_t row, size_t D,
                  float *dot)
{
    v4f acc[2] = {{0}};
    size_t e = 0;
    for (; e + 4 <= D; e += 4)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            v4f r[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                memcpy(&r[i], k + (4 * (size_t)h + (size_t)i) * row + e,
                       sizeof r[i]);
            transpose4(r);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                acc[h] += q[e + (size_t)t] * r[t];
        }
    for (; e < D; e++)
        for (int h = 0; h < 2; h++) {
            const float *at = k + 4 * (size_t)h * row + e;
            const v4f col = {at[0], at[row], at[2 * row], at[3 * row]};
            acc[h] += q[e] * col;
        }
    memcpy(dot, acc, sizeof acc);
}

/* out[0 .. 4 n) = the sum of w[j] v[j * row + e] over j = lo .. pos, in
 * that order, from zero, for n of at most 8 vectors of four. */
ALWAYS_INLINE void weigh(const float *w, const float *v, size_t row, size_t lo,
                         size_t pos, int n, float *out)
{
    v4f o[8] = {{0}};
    for (size_t j = lo; j <= pos; j++) {
        const v4f wj = {w[j], w[j], w[j], w[j]};
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) {
            v4f x;
            memcpy(&x, v + j * row + 4 * (size_t)i, sizeof x);
            o[i] += wj * x;
        }
    }
    memcpy(out, o, (size_t)n * sizeof o[0]);
}

/* Head a of the token at position pos against keys lo..pos of its KV
 * head: softmax(q k^T * scale), soft-capped, into w[0 .. pos] (0 before
 * lo), and the
 * weighted values into out [D]. */

static void step_head(const struct xf_cache *c, size_t l, size_t g,
                      const float *q, size_t D, size_t lo, size_t pos,
                      float scale, float softcap, float *w, float *out)
{
    const float *k = c->k + l * c->capacity * c->row + g * D;
    const float *v = c->v + l * c->capacity * c->row + g * D;
    const size_t row = c->row;
    float top = -INFINITY;
    // each key's q . k in the order of e; eight keys side by side, so
    // that their sums do not wait on one another (the same bits)
    size_t j0 = lo;
    for (; j0 + 8 <= pos + 1; j0 += 8) {
        float dot[8];
        dots8(q, k + j0 * row, row, D, dot);
        for (size_t i = 0; i < 8; i++)
            w[j0 + i] = dot[i] * scale;
    }
    for (; j0 <= pos; j0++) {
        float dot = 0.0f;
        for (size_t e = 0; e < D; e++)
            dot += q[e] * k[j0 * row + e];
        w[j0] = dot * scale;
    }
    if (softcap > 0.0f)
        softmax_softcap(w + lo, pos + 1 - lo, softcap);
    for (size_t j = lo; j <= pos; j++)
        top = w[j] > top ? w[j] : top;
    double sum = 0.0;
    for (size_t j = lo; j <= pos; j++) {
        w[j] = expf(w[j] - top);
        sum += w[j];
    }
    const float inv = (float)(1.0 / sum);
    memset(w, 0, lo * sizeof *w);
    for (size_t j = lo; j <= pos; j++)
        w[j] *= inv;
    // out[e] = sum of w[j] v[j][e] in the order of j, from zero; 32 of
    // out's values at a time, held while the keys go by
    size_t e0 = 0;
    for (; e0 + 32 <= D; e0 += 32)
        weigh(w, v + e0, row, lo, pos, 8, out + e0);
    for (; e0 + 4 <= D; e0 += 4)
        weigh(w, v + e0, row, lo, pos, 1, out + e0);
    for (; e0 < D; e0++) {
        float o = 0.0f;
        for (size_t j = lo; j <= pos; j++)
            o += w[j] * v[j * row + e0];
        out[e0] = o;
    }
}

/* The heads of one step, which the team shares out. A sequence whose
 * rows of weights are kept has a unit per KV head, each head's scores
 * going into its row of them; one whose mean weights alone are kept has
 * one unit for all its heads, which adds each head's scores (in a row of
 * the member's) to the mean in the order of heads, as the mean of kept
 * rows is added; one that keeps nothing has a unit per KV head too. */
struct heads {
    const struct xf_model *m;
    const struct xf_seq *seqs;
    const size_t *first;  /* [rows + 1]: each row's first unit */
    const size_t *seq_of; /* [rows]: each row's sequence */
    const size_t *pos_of; /* [rows]: each row's position */
    const bool *last;     /* [rows]: is it its sequence's last? */
    size_t l, at_all, group, D;
    const struct attn_config *cfg;
    const float *q;
    float *scores; /* [team][keys] */
    size_t keys;   /* a row of scores */
    float *out;    /* [rows][h D] */
};

/* Where layer l's row of weights (per head: heads rows) of sequence q
 * goes, or NULL when the sequence keeps none of l. */
static float *kept_row(const struct xf_seq *q, float *base, size_t l,
                       size_t per_layer)
{
    if (!base || (q->layer != XF_ALL_LAYERS && q->layer != l))
        return NULL;
    return base + (q->layer == XF_ALL_LAYERS ? l : 0) * per_layer;
}

/* Head a of row b: its scores into w, its output into out. */
static void one_head(const struct heads *hs, size_t b, size_t a, float *w)
{
    const struct xf_seq *q = &hs->seqs[hs->seq_of[b]];
    const size_t pos = hs->pos_of[b], keys = pos + 1;
    const size_t window = hs->cfg->window;
    const size_t lo = window && keys > window ? keys - window : 0;
    const size_t hd = hs->m->heads * hs->D;
    step_head(q->cache, hs->l, a / hs->group, hs->q + b * hd + a * hs->D, hs->D,
              lo, pos, attn_config_scale(hs->cfg), hs->cfg->softcap, w,
              hs->out + b * hd + a * hs->D);
}

static void head_unit(void *arg, size_t u, unsigned member)
{
    const struct heads *hs = arg;
    size_t b = 0;
    while (hs->first[b + 1] <= u)
        b++;
    const struct xf_seq *q = &hs->seqs[hs->seq_of[b]];
    const size_t h = hs->m->heads, keys = hs->pos_of[b] + 1;
    // a sequence's rows of weights are its last token's
    float *weights =
        hs->last[b] ? kept_row(q, q->weights, hs->l, h * keys) : NULL;
    float *mean =
        hs->last[b] ? kept_row(q, q->mean_weights, hs->l, keys) : NULL;
    float *own = hs->scores + member * hs->keys;
    if (weights || !mean) {
        const size_t g = u - hs->first[b];
        for (size_t a = g * hs->group; a < (g + 1) * hs->group; a++)
            one_head(hs, b, a, weights ? weights + a * keys : own);
        return;
    }
    memset(mean, 0, keys * sizeof *mean);
    for (size_t a = 0; a < h; a++) {
        one_head(hs, b, a, own);
        for (size_t j = 0; j < keys; j++)
            mean[j] += own[j];
    }
    for (size_t j = 0; j < keys; j++)
        mean[j] /= (float)h;
}

static bool all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

float *step_attention(const struct step_io *io, struct pool_team *team)
{
    const struct xf_plan *plan = io->plan;
    const struct xf_model *m = plan->m;
    const size_t l = io->layer, D = m->head_dim, h = m->heads;
    const size_t rows = io->rows, hd = h * D, gd = m->kv_heads * D;
    // the scratch: where each row's units begin, each row's sequence
    // and position, then q, k, v, the heads' outputs, the output, a row
    // of scores per member, and which rows are their sequence's last
    size_t *first = (size_t *)(void *)io->scratch;
    size_t *seq_of = first + rows + 1, *pos_of = seq_of + rows;
    float *q = (float *)(void *)(pos_of + rows);
    float *k = q + rows * hd, *v = k + rows * gd, *heads = v + rows * gd,
          *out = heads + rows * hd, *scores = out + rows * m->hidden;
    bool *last = (bool *)(void *)(scores + plan->team * plan->keys);
    for (size_t b = 0, r = 0; b < io->batch; b++) {
        const size_t tokens = xf_seq_tokens(&io->seqs[b]);
        for (size_t t = 0; t < tokens; t++, r++) {
            seq_of[r] = b;
            pos_of[r] = io->seqs[b].cache->len + t;
            last[r] = t + 1 == tokens;
        }
    }
    struct step s = {.m = m,
                     .y = &m->layer[l],
                     .rows = rows,
                     .x = io->x,
                     .q = q,
                     .k = k,
                     .v = v,
                     .heads = heads,
                     .out = out,
                     .panels = io->panels};
    pool_phase(team, qkv_unit, &s,
               xf_tile_count(rows, hd) + 2 * xf_tile_count(rows, gd));
    // as attn_forward() places q and k: the same config, one row each at
    // its position, turned by the rotary of its own sequence's length
    // (a longrope kind's long one past long_after), as alone
    const struct attn_config *cfg = xf_layer_attn(plan, l);
    const struct xf_layer_kind *lk = xf_kind_of(m, l);
    for (size_t b = 0; b < rows; b++) {
        const struct xf_seq *sq = &io->seqs[seq_of[b]];
        struct attn_config own = *cfg; /* the plan's: the longest's */
        if (m->arch.positions == XF_POS_ROTARY && lk->long_after) {
            own.rope = *xf_kind_rope(lk, sq->cache->len + xf_seq_tokens(sq));
            attn_rotary_defaults(&own.rope, cfg->d_k);
        }
        attn_place_heads(&own, q + b * hd, 1, h, s.y->q_norm_w, pos_of[b]);
        attn_place_heads(&own, k + b * gd, 1, m->kv_heads, s.y->k_norm_w,
                         pos_of[b]);
    }
    // nothing that float32 cannot hold goes into a cache
    if (!all_finite(q, rows * hd) || !all_finite(k, rows * gd) ||
        !all_finite(v, rows * gd))
        return NULL;
    for (size_t b = 0; b < rows; b++) {
        struct xf_cache *c = io->seqs[seq_of[b]].cache;
        memcpy(c->k + (l * c->capacity + pos_of[b]) * c->row, k + b * gd,
               gd * sizeof *k);
        memcpy(c->v + (l * c->capacity + pos_of[b]) * c->row, v + b * gd,
               gd * sizeof *v);
    }
    first[0] = 0;
    for (size_t b = 0; b < rows; b++) {
        const struct xf_seq *sq = &io->seqs[seq_of[b]];
        const bool mean_alone = last[b] &&
                                kept_row(sq, sq->mean_weights, l, 1) &&
                                !kept_row(sq, sq->weights, l, 1);
        first[b + 1] = first[b] + (mean_alone ? 1 : m->kv_heads);
    }
    const struct heads hs = {.m = m,
                             .seqs = io->seqs,
                             .first = first,
                             .seq_of = seq_of,
                             .pos_of = pos_of,
                             .last = last,
                             .l = l,
                             .group = h / m->kv_heads,
                             .D = D,
                             .cfg = cfg,
                             .q = q,
                             .scores = scores,
                             .keys = plan->keys,
                             .out = heads};
    pool_phase(team, head_unit, (void *)&hs, first[rows]);
    // a sequence's kept rows: their mean, added in the order of heads
    for (size_t b = 0; b < rows; b++) {
        const struct xf_seq *sq = &io->seqs[seq_of[b]];
        const size_t keys = pos_of[b] + 1;
        const float *w = kept_row(sq, sq->weights, l, h * keys);
        float *mean = kept_row(sq, sq->mean_weights, l, keys);
        if (!last[b] || !w || !mean)
            continue;
        memset(mean, 0, keys * sizeof *mean);
        for (size_t a = 0; a < h; a++)
            for (size_t j = 0; j < keys; j++)
                mean[j] += w[a * keys + j];
        for (size_t j = 0; j < keys; j++)
            mean[j] /= (float)h;
    }
    // each sequence's ablations of its position, the means its prompt's
    // (a sequence with edits brings one token)
    for (size_t b = 0; b < rows; b++) {
        const struct xf_seq *sq = &io->seqs[seq_of[b]];
        const struct xf_run edits = {.edits = sq->edits,
                                     .n_edits = sq->n_edits};
        intervene_apply(&edits, l, XF_SITE_Z, heads + b * hd, NULL, 1, hd, D,
                        pos_of[b], sq->cache->z_mean + l * hd);
    }
    pool_phase(team, out_unit, &s, xf_tile_count(rows, m->hidden));
    return out;
}
