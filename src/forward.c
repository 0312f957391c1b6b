/*
 * forward.c - the multi-head attention forward pass.
 *
 * One call runs in two phases of independent units: the key phase gives
 * each chunk of context rows its positions and its K and V projections;
 * the query phase takes each block of queries of a sequence through its Q
 * projection, every head and the output projection. Units have fixed
 * boundaries and write disjoint rows, so a team of any size computes the
 * same bits. Large inputs go QUERY_BLOCK and KV_CHUNK rows at a time; a
 * smaller one is cut into two to four units a phase, so that a team has
 * something to share (unit_rows()). Products go to the core's own
 * kernels on a CPU with AVX-512 (the projections streamed,
 * stream_product.h; a head's scores and values, head_product.h), else to
 * cblas_sgemm, with leading dimensions, so a head is addressed inside the
 * [rows][heads * d] matrices rather than copied out.
 *
 * The team is the calling thread and the helpers of a pool (pool.c): the
 * caller's, or one the call starts for itself, once, whatever the number
 * of phases.
 *
 * Each head takes one of two paths:
 *  - full: when weights, scores or their mean are wanted, the [rows][M]
 *    tile is formed, masked and normalised (straight into the result when
 *    the caller asked for weights);
 *  - streaming: otherwise keys are taken KEY_BLOCK at a time with an online
 *    softmax, so nothing of size N x M ever exists.
 *
 * When the streaming path needs neither K nor V afterwards and the context
 * spans several key blocks, the loops turn inside out (key-outer): for
 * each sequence, all its queries are projected first, then each block of
 * keys is projected and folded into every query's running softmax, then
 * the rows are finished. Only one block of K and V exists at a time, so
 * memory holds Q and the head outputs (N rows) rather than K and V (M rows,
 * twice); each query block sees the same key blocks in the same order, so
 * the bits are those of the other order.
 *
 * All scratch memory is sized up front and allocated once per call, with
 * one set of per-thread parts for each member of the team.
 */
#include "attention.h"
#include "checked.h"
#include "error.h"
#include "forward_plan.h"
#include "head_product.h"
#include "row_measures.h"
#include "value_weighted.h"
#include "mask.h"
#include "norm.h"
#include "pool.h"
#include "posenc.h"
#include "rng.h"
#include "softmax.h"
#include "vecmath.h"
#include "widen.h"
#include "workspace.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
    SHORT_ROW = 32 /* rows of fewer keys: softmax_rows() */
};

/* State shared by every unit of one call. Units write disjoint rows. */
struct forward {
    const struct attn_config *cfg;
    const struct attn_params *p;
    struct attn_result *res;
    const float *x, *context;
    float *x_pe, *c_pe;      /* [B][N][d_model], [B][M][d_ctx] with positions */
    float *k, *v;            /* [B][M][g*d_k], [B][M][g*d_v]; key-outer: the
                                block in hand, [KEY_BLOCK][g*d_k], [..][g*d_v] */
    struct scratch *scratch; /* [threads] */
    struct paths paths;
    /* key-outer only: the sequence and key block in hand, and its state */
    size_t seq, j0, nj;
    float *q_seq;     /* [N][h*d_k] when q is not returned */
    float *heads_seq; /* [N][h*d_v] when held neither in heads_out nor
                         in output */
    struct softmax_online *online_seq; /* [h][N] */
    void *block; /* the one allocation behind all scratch */
    size_t tile_ld;
    float scale;
    uint64_t dropout_key;
    struct pool_team team;
    /* the phase being run by the team */
    void (*unit)(struct forward *f, size_t unit, struct scratch *s);
    /* what is measured of the weights a row at a time; c NULL: nothing */
    struct row_measures measures;
    /* the first unit whose products overflowed float32, if any */
    atomic_flag overflowed;
    size_t overflow_b, overflow_row;
};

/* --------------------------------------------------------------- helpers */

/* A projection's weight matrix as the params hold it: float32, or at its
 * stored 16-bit width (attn_params.stored_wq and the others). */
struct held {
    const void *w;
    attn_dtype dtype;
    bool bf16_dots; /* the config's bf16_dots */
};

static struct held held(const struct attn_config *c, const float *w32,
                        struct attn_stored w16)
{
    if (w16.data)
        return (struct held){w16.data, w16.dtype, c->bf16_dots};
    return (struct held){w32, ATTN_F32, false};
}

/* Does p hold any matrix at a 16-bit width? */
static bool holds_stored(const struct attn_params *p)
{
    return p->stored_wq.data || p->stored_wk.data || p->stored_wv.data ||
           p->stored_wo.data;
}

/* y[r] = x[r] * w^T + bias for r < rows.  x: [rows][in] (ld in),
 * w: [out][in], y: [rows][ldy]; panel: the thread's (forward_panel_floats()),
 * or NULL. */
static void linear(const float *x, size_t rows, size_t in, struct held w,
                   const float *bias, size_t out, float *y, size_t ldy,
                   float *panel)
{
    const struct widen_product pr = {.x = x,
                                     .ldx = in,
                                     .rows = rows,
                                     .in = in,
                                     .w = w.w,
                                     .dtype = w.dtype,
                                     .ldw = in,
                                     .out = out,
                                     .y = y,
                                     .ldy = ldy,
                                     .bf16_dots = w.bf16_dots,
                                     .bias = bias};
    widen_product(&pr, 0.0f, panel);
}

/* What a projected q or k of heads heads gets before its scores: the
 * norm of each head (qk_norm) or of the whole row (qk_norm_whole), then
 * the rotation (rope), at positions r0 on. x: [rows][heads * d_k] */
void attn_place_heads(const struct attn_config *c, float *x, size_t rows,
                      size_t heads, const float *norm, size_t r0)
{
    if (c->qk_norm)
        norm_rms(x, rows * heads, c->d_k, norm, c->qk_norm_eps, x);
    else if (c->qk_norm_whole)
        norm_rms(x, rows, heads * c->d_k, norm, c->qk_norm_eps, x);
    if (c->positional == ATTN_POS_ROPE)
        posenc_apply_rope(x, rows, heads * c->d_k, heads, c->d_k, &c->rope, r0);
}

/* Q of rows [r0, r0 + rows) of a sequence, from x (those rows, positions
 * added). q: [rows][heads * d_k] */
static void project_q(const struct forward *f, const float *x, size_t rows,
                      size_t r0, float *q, float *panel)
{
    const struct attn_config *c = f->cfg;
    const size_t hk = c->heads * c->d_k;
    linear(x, rows, c->d_model, held(c, f->p->wq, f->p->stored_wq), f->p->bq,
           hk, q, hk, panel);
    attn_place_heads(c, q, rows, c->heads, f->p->q_norm, r0);
}

/* Inverted dropout on p[j], the pair (b, head, i, j0 + j): docs/math.md,
 * "Dropout". */
static void dropout_row(const struct forward *f, size_t b, size_t head,
                        size_t i, size_t j0, float *p, size_t nj)
{
    const struct attn_config *cfg = f->cfg;
    const float rate = cfg->dropout, keep_scale = 1.0f / (1.0f - rate);
    const uint64_t base =
        ((b * cfg->heads + head) * cfg->n_query + i) * cfg->n_keys + j0;
    for (size_t j = 0; j < nj; j++)
        p[j] = rng_unit(f->dropout_key, base + j) >= rate ? p[j] * keep_scale
                                                          : 0.0f;
}

/* a[e] *= factor for e < n: a head's row, too short for a BLAS call to
 * pay for itself (the same products as cblas_sscal's). */
static void scale_floats(float *restrict a, size_t n, float factor)
{
    for (size_t e = 0; e < n; e++)
        a[e] *= factor;
}

/* Remember the first place where finite inputs gave non-finite products. */
static void note_overflow(struct forward *f, size_t b, size_t row)
{
    if (!atomic_flag_test_and_set(&f->overflowed)) {
        f->overflow_b = b;
        f->overflow_row = row;
    }
}

/* Whether a[0 .. count) holds no NaN and no infinity: a vector of VF at
 * a time, with no branch per value, since the answer is almost always
 * yes. x - x is 0 for a finite x and NaN for the others. */
#define ROWS_FINITE_BODY(VF, VI, LANES)                                        \
    VF v;                                                                      \
    VI bad = {0};                                                              \
    size_t e = 0;                                                              \
    for (; e + (LANES) <= count; e += (LANES)) {                               \
        memcpy(&v, a + e, sizeof v);                                           \
        v -= v;                                                                \
        bad |= v != v;                                                         \
    }                                                                          \
    int32_t any = 0;                                                           \
    for (int l = 0; l < (LANES); l++)                                          \
        any |= bad[l];                                                         \
    for (; e < count; e++)                                                     \
        any |= !isfinite(a[e]);                                                \
    return any == 0

/* four floats at a time: a width every x86-64 has */
static bool rows_finite_plain(const float *a, size_t count)
{
    typedef float v4f __attribute__((vector_size(16)));
    typedef int32_t v4i __attribute__((vector_size(16)));
    ROWS_FINITE_BODY(v4f, v4i, 4);
}

#if HAVE_AVX2_BUILD
AVX512_TARGET static bool rows_finite_avx512(const float *a, size_t count)
{
    ROWS_FINITE_BODY(v16f, v16i, 16);
}
#endif
#undef ROWS_FINITE_BODY

static bool rows_finite(const float *a, size_t count)
{
#if HAVE_AVX2_BUILD
    if (vec_isa_best() == VEC_ISA_AVX512)
        return rows_finite_avx512(a, count);
#endif
    return rows_finite_plain(a, count);
}

static const char *nonfinite_name(float v)
{
    return isnan(v) ? "NaN" : "Inf";
}

static attn_status check_finite(const float *a, size_t rows, size_t cols,
                                size_t batch, const char *field,
                                struct attn_error *err)
{
    if (rows_finite(a, batch * rows * cols))
        return ATTN_OK;
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

/* An additive mask may say "never" (-INFINITY), but NaN or +Inf mean
 * nothing. */
static attn_status check_mask_bias(const struct attn_config *c,
                                   struct attn_error *err)
{
    if (!c->mask_bias)
        return ATTN_OK;
    const size_t per_seq = c->n_query * c->n_ctx;
    const size_t count = per_seq * (c->mask_per_head  ? c->batch * c->heads
                                    : c->mask_batched ? c->batch
                                                      : 1);
    for (size_t e = 0; e < count; e++) {
        const float v = c->mask_bias[e];
        if (!isnan(v) && v != INFINITY)
            continue;
        const size_t at[3] = {e / per_seq, e % per_seq / c->n_ctx,
                              e % c->n_ctx};
        return attn_fail_at(err, ATTN_E_INPUT, "mask", 3, at,
                            "mask[%zu][%zu][%zu] (counting sequences and "
                            "heads first) is %s; an additive mask takes "
                            "finite numbers and -inf",
                            at[0], at[1], at[2], nonfinite_name(v));
    }
    return ATTN_OK;
}

static attn_status workspace_init(struct forward *f, unsigned threads,
                                  struct attn_error *err)
{
    struct workspace_plan w;
    forward_workspace(f->cfg, &f->paths, threads, &w);
    const size_t *count = w.count, *elem = w.elem;
    size_t *offset = w.offset;
    f->tile_ld = w.tile_ld;
    if (w.overflow)
        return attn_fail(err, ATTN_E_TOO_BIG, "n_query",
                         "the scratch memory for this input is too large");
    const struct ws_plan block = {.bytes = w.bytes};
    f->block = ws_alloc(&block);
    if (!f->block)
        return attn_fail(err, ATTN_E_NOMEM, "n_query",
                         "out of memory for %zu bytes of scratch", w.bytes);
    const unsigned want = f->cfg->want;
    char *base = f->block;
#define PART(i) (count[i] ? (void *)(base + offset[i]) : NULL)
    f->x_pe = PART(X_PE);
    f->c_pe = PART(C_PE);
    f->k = (want & ATTN_WANT_K) ? f->res->k : PART(K);
    f->v = (want & ATTN_WANT_V) ? f->res->v : PART(V);
    f->q_seq = PART(Q_SEQ);
    f->heads_seq = PART(HEADS_SEQ);
    f->online_seq = PART(ONLINE_SEQ);
    f->scratch = PART(SCRATCH);
    /* each per-thread part is laid out once per thread, back to back */
    for (unsigned t = 0; t < threads; t++) {
        struct scratch *s = &f->scratch[t];
        s->q = PART(Q);
        s->heads = PART(HEADS);
        s->tile = PART(TILE);
        s->online = PART(ONLINE);
        s->out = PART(OUT);
        s->panel = PART(PANEL);
        s->kt = PART(KT);
        for (int i = Q; i < N_PARTS; i++)
            if (count[i]) {
                size_t bytes = count[i] * elem[i] + WS_ALIGN - 1;
                offset[i] += bytes & ~(size_t)(WS_ALIGN - 1);
            }
    }
#undef PART
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
    res->n_keys = c->n_keys;
    res->heads = c->heads;
    res->kv_heads = c->kv_heads;
    res->d_k = c->d_k;
    res->d_v = c->d_v;
    res->d_out = c->d_out;
    struct result_part arrays[N_RESULT_PARTS];
    forward_result_parts(c, res, arrays);
    for (size_t i = 0; i < N_RESULT_PARTS; i++) {
        if (!(c->want & arrays[i].bit))
            continue;
        if (arrays[i].bit == ATTN_WANT_WEIGHTS && forward_weights_lent(c)) {
            res->weights = c->weights_into;
            res->weights_lent = true;
            continue;
        }
        *arrays[i].slot =
            arrays[i].zeroed
                ? calloc(arrays[i].count, sizeof(float))
                : forward_result_alloc(arrays[i].count * sizeof(float));
        if (!*arrays[i].slot)
            goto nomem;
    }
    res->fully_masked = calloc(c->batch * c->n_query, 1);
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
    if (!result->weights_lent)
        free(result->weights);
    free(result->weights_raw);
    free(result->scores);
    free(result->mean_weights);
    free(result->q);
    free(result->k);
    free(result->v);
    free(result->heads_out);
    free(result->output);
    free(result->fully_masked);
    attn_measures_free(&result->measures);
    memset(result, 0, sizeof *result);
}

void attn_measure_parts(const struct attn_config *c, struct attn_measures *m,
                        struct attn_measure_part out[ATTN_MEASURE_ARRAYS])
{
    const size_t bh = c->batch * c->heads, n = c->n_query, keys = c->n_keys;
    const unsigned want = c->want;
    const bool stats = want & ATTN_WANT_HEAD_STATS;
    const bool value = want & ATTN_WANT_VALUE_WEIGHTED;
    const bool top = want & ATTN_WANT_TOP_K;
    const size_t k = top ? c->top_k : 0;
    const struct attn_measure_part all[ATTN_MEASURE_ARRAYS] = {
        [ATTN_MEASURE_HEAD_STATS] = {(void **)&m->head_stats, sizeof(double),
                                     stats ? bh * ATTN_HEAD_STATS : 0},
        [ATTN_MEASURE_KEY_RECEIVED] = {(void **)&m->key_received,
                                       sizeof(double), stats ? bh * keys : 0},
        [ATTN_MEASURE_INDUCTION] = {(void **)&m->induction, sizeof(double),
                                    want & ATTN_WANT_INDUCTION ? bh : 0},
        [ATTN_MEASURE_VALUE_WEIGHTED] = {(void **)&m->value_weighted,
                                         sizeof(float),
                                         value ? bh * n * keys : 0},
        [ATTN_MEASURE_VALUE_WEIGHTED_SUM] = {(void **)&m->value_weighted_sum,
                                             sizeof(float),
                                             value ? c->batch * n * keys : 0},
        [ATTN_MEASURE_TOP_KEYS] = {(void **)&m->top_keys, sizeof(uint32_t),
                                   bh * n * k},
        [ATTN_MEASURE_TOP_COUNT] = {(void **)&m->top_count, sizeof(uint32_t),
                                    top ? bh * n : 0},
        [ATTN_MEASURE_TOP_WEIGHTS] = {(void **)&m->top_weights, sizeof(float),
                                      bh * n * k},
        [ATTN_MEASURE_POOLED] = {(void **)&m->pooled, sizeof(float),
                                 want & ATTN_WANT_POOLED
                                     ? bh * c->pool_rows * c->pool_cols
                                     : 0},
    };
    memcpy(out, all, sizeof all);
}

void attn_measures_free(struct attn_measures *m)
{
    free(m->head_stats);
    free(m->key_received);
    free(m->induction);
    free(m->top_keys);
    free(m->top_weights);
    free(m->top_count);
    free(m->pooled);
    free(m->value_weighted);
    free(m->value_weighted_sum);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ one head */

/* Views of one query block of one sequence. */
struct block {
    size_t b, r0, rows;
    struct mask_view mv;
    const float *x_pe;      /* [rows][d_model] */
    const float *q, *k, *v; /* q: [rows][ldq]; k, v: [M][ldk], [M][ldv] */
    size_t ldq, ldk, ldv;
    float *heads; /* [rows][h * d_v] */
};

/* Full path: form the [rows][M] tile, mask, softmax, dropout, then P * V. */
static void head_full(struct forward *f, const struct block *bk,
                      struct scratch *sc, size_t a, size_t g)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_keys, h = c->heads, dk = c->d_k, dv = c->d_v;
    const size_t at = ((bk->b * h + a) * c->n_query + bk->r0) * m;
    const struct mask_view mv = mask_view_head(&bk->mv, a);
    float *raw =
        (c->want & ATTN_WANT_WEIGHTS_RAW) ? f->res->weights_raw + at : NULL;
    float *w = (c->want & ATTN_WANT_WEIGHTS) ? f->res->weights + at : sc->tile;
    float *s = (c->want & ATTN_WANT_SCORES) ? f->res->scores + at : w;

    // S = scale * Q_a * K_g^T
    head_scores(bk->q + a * dk, bk->ldq, bk->k + g * dk, bk->ldk, bk->rows, m,
                dk, f->scale, s, m, sc->kt);
    if (c->softcap > 0.0f)
        for (size_t r = 0; r < bk->rows; r++)
            softmax_softcap(s + r * m, m, c->softcap);
    if (s != w)
        memcpy(w, s, bk->rows * m * sizeof *w);
    // short rows go through the softmax together (softmax_rows())
    enum softmax_status short_st[QUERY_BLOCK];
    const bool short_rows = m < SHORT_ROW && bk->rows <= QUERY_BLOCK;
    if (short_rows) {
        for (size_t r = 0; r < bk->rows; r++)
            mask_row(&mv, bk->r0 + r, 0, w + r * m, m);
        softmax_rows(w, bk->rows, m, short_st);
    }
    for (size_t r = 0; r < bk->rows; r++) {
        float *row = w + r * m;
        const size_t i = bk->r0 + r;
        if (!short_rows)
            mask_row(&mv, i, 0, row, m);
        const enum softmax_status st =
            short_rows ? short_st[r] : softmax_row(row, m);
        if (st == SOFTMAX_ALL_MASKED) {
            f->res->fully_masked[bk->b * c->n_query + i] = 1;
        } else if (st == SOFTMAX_OVERFLOW) {
            note_overflow(f, bk->b, i);
            memset(row, 0, m * sizeof *row);
        }
        if (raw)
            memcpy(raw + r * m, row, m * sizeof *row);
        if (f->measures.c)
            row_measures_take(&f->measures, f->res, (unsigned)(sc - f->scratch),
                              bk->b, a, i, row, &mv);
        if (st == SOFTMAX_OK && c->dropout > 0.0f)
            dropout_row(f, bk->b, a, i, 0, row, m);
    }
    if (c->want & ATTN_WANT_MEAN_WEIGHTS) {
        float *mean = f->res->mean_weights + (bk->b * c->n_query + bk->r0) * m;
        for (size_t e = 0; e < bk->rows * m; e++)
            mean[e] += w[e];
    }
    if (f->paths.need_pv)
        // head_a = P * V_g
        head_values(w, m, bk->v + g * dv, bk->ldv, bk->rows, m, dv, 0.0f,
                    bk->heads + a * dv, h * dv, true);
}

/* Streaming path, one block of keys for head a: fold keys [j0, j0 + nj)
 * into the running softmax of each row and into its head output.
 * k, v: the rows of key j0 in K and V (ld bk->ldk, bk->ldv); out: the
 * block's head a output (ld h * d_v); online: [rows]. */
static void stream_keys(struct forward *f, const struct block *bk,
                        struct scratch *sc, struct softmax_online *online,
                        float *out, size_t a, size_t g, size_t j0, size_t nj,
                        const float *k, const float *v)
{
    const struct attn_config *c = f->cfg;
    const size_t dk = c->d_k, dv = c->d_v, ldh = c->heads * dv;
    const size_t ldt = f->tile_ld;
    float *tile = sc->tile;
    const struct mask_view mv = mask_view_head(&bk->mv, a);
    // S = scale * Q_a * K_g[j0 : j0 + nj]^T
    head_scores(bk->q + a * dk, bk->ldq, k + g * dk, bk->ldk, bk->rows, nj, dk,
                f->scale, tile, ldt, sc->kt);
    for (size_t r = 0; r < bk->rows; r++) {
        float *row = tile + r * ldt;
        const size_t i = bk->r0 + r;
        if (c->softcap > 0.0f)
            softmax_softcap(row, nj, c->softcap);
        mask_row(&mv, i, j0, row, nj);
        float rescale;
        if (softmax_online_block(&online[r], row, nj, &rescale) ==
            SOFTMAX_OVERFLOW) {
            note_overflow(f, bk->b, i);
            memset(row, 0, nj * sizeof *row);
        }
        /* rescale 0: nothing was accumulated, the row is still zero */
        if (rescale != 1.0f && rescale != 0.0f)
            scale_floats(out + r * ldh, dv, rescale);
        if (c->dropout > 0.0f)
            dropout_row(f, bk->b, a, i, j0, row, nj);
    }
    // head_a += exp(S - max) * V_g[j0 : j0 + nj]
    head_values(tile, ldt, v + g * dv, bk->ldv, bk->rows, nj, dv, 1.0f, out,
                ldh, true);
}

/* Whether a causal block has no key at or after j0 that any row sees;
 * never so with appended keys, which every row sees. */
static bool keys_all_in_future(const struct forward *f, const struct block *bk,
                               size_t j0)
{
    return f->cfg->causal && f->cfg->n_keys == f->cfg->n_ctx &&
           j0 > bk->r0 + bk->rows - 1;
}

static void stream_start(const struct block *bk, size_t dv, size_t ldh,
                         struct softmax_online *online, float *out)
{
    for (size_t r = 0; r < bk->rows; r++) {
        memset(out + r * ldh, 0, dv * sizeof *out);
        softmax_online_init(&online[r]);
    }
}

/* Divide each row's head output by its softmax sum, or flag the row. */
static void stream_finish(struct forward *f, const struct block *bk,
                          const struct softmax_online *online, float *out)
{
    const struct attn_config *c = f->cfg;
    const size_t dv = c->d_v, ldh = c->heads * dv;
    for (size_t r = 0; r < bk->rows; r++) {
        if (online[r].sum == 0.0) {
            f->res->fully_masked[bk->b * c->n_query + bk->r0 + r] = 1;
            continue; /* its head output stayed all zero */
        }
        scale_floats(out + r * ldh, dv, (float)(1.0 / online[r].sum));
    }
}

/* Streaming path with every key at hand: keys in blocks, online softmax,
 * nothing [N][M] held. */
static void head_streaming(struct forward *f, const struct block *bk,
                           struct scratch *sc, size_t a, size_t g)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_keys, dv = c->d_v, ldt = f->tile_ld;
    float *out = bk->heads + a * dv;
    stream_start(bk, dv, c->heads * dv, sc->online, out);
    for (size_t j0 = 0; j0 < m && !keys_all_in_future(f, bk, j0); j0 += ldt) {
        const size_t nj = m - j0 < ldt ? m - j0 : ldt;
        stream_keys(f, bk, sc, sc->online, out, a, g, j0, nj,
                    bk->k + j0 * bk->ldk, bk->v + j0 * bk->ldv);
    }
    stream_finish(f, bk, sc->online, out);
}

/* ------------------------------------------------------ one query block */

/* The block's output rows from its head outputs, which may already sit in
 * those rows (key-outer): then the projection goes through sc->out. */
static void block_output(struct forward *f, const struct block *bk,
                         struct scratch *sc)
{
    const struct attn_config *c = f->cfg;
    const size_t d_out = c->d_out, hv = c->heads * c->d_v;
    float *o = f->res->output + (bk->b * c->n_query + bk->r0) * d_out;
    if (c->mode == ATTN_MODE_PROJECTED && !c->no_out_proj) {
        float *dst = o == bk->heads ? sc->out : o;
        linear(bk->heads, bk->rows, hv, held(c, f->p->wo, f->p->stored_wo),
               f->p->bo, d_out, dst, d_out, sc->panel);
        if (dst != o)
            memcpy(o, dst, bk->rows * d_out * sizeof *o);
    } else if (o != bk->heads) {
        memcpy(o, bk->heads, bk->rows * d_out * sizeof *o);
    }

    if (c->residual == ATTN_RESIDUAL_VALUE) {
        const size_t group = c->heads / c->kv_heads, dv = c->d_v;
        for (size_t r = 0; r < bk->rows; r++)
            for (size_t a = 0; a < c->heads; a++) {
                const float *v =
                    bk->v + (bk->r0 + r) * bk->ldv + (a / group) * dv;
                float *dst = o + r * d_out + a * dv;
                for (size_t e = 0; e < dv; e++)
                    dst[e] += v[e];
            }
    } else if (c->residual == ATTN_RESIDUAL_INPUT) {
        for (size_t e = 0; e < bk->rows * d_out; e++)
            o[e] += bk->x_pe[e];
    }
}

/* Rows [r0, r0 + n) of sequence b of a [B][n_rows][d] input, with
 * sinusoidal positions added into pe when there is one. */
static const float *rows_with_positions(const float *in, float *pe,
                                        size_t n_rows, size_t d, size_t b,
                                        size_t r0, size_t n)
{
    const size_t at = (b * n_rows + r0) * d;
    if (!pe)
        return in + at;
    memcpy(pe + at, in + at, n * d * sizeof *pe);
    posenc_add_sinusoidal(pe + at, n, d, r0);
    return pe + at;
}

/* K and V of sequence b as projected (and rotated) into f->k and f->v, or,
 * in basic mode, the context itself. */
static void kv_views(const struct forward *f, size_t b, struct block *bk)
{
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx;
    if (c->mode == ATTN_MODE_BASIC) {
        /* the context with its positions, as the key phase left it */
        const float *ctx = c->cross ? (f->c_pe ? f->c_pe : f->context)
                                    : (f->x_pe ? f->x_pe : f->x);
        bk->k = bk->v = ctx + b * m * c->d_ctx;
        bk->ldk = bk->ldv = c->d_ctx;
        return;
    }
    bk->ldk = c->kv_heads * c->d_k;
    bk->ldv = c->kv_heads * c->d_v;
    bk->k = f->k + b * c->n_keys * bk->ldk;
    bk->v = f->v + b * c->n_keys * bk->ldv;
}

/* Without any head computed, still report the rows with no visible key
 * (in any head, when the mask is per head), as the heads would. */
static void flag_fully_masked(struct forward *f, const struct block *bk)
{
    const size_t m = f->cfg->n_keys;
    const size_t heads = bk->mv.head_stride ? f->cfg->heads : 1;
    for (size_t a = 0; a < heads; a++) {
        const struct mask_view mv = mask_view_head(&bk->mv, a);
        for (size_t r = 0; r < bk->rows; r++) {
            const size_t i = bk->r0 + r;
            size_t j = 0;
            while (j < m && !mask_key_visible(&mv, i, j))
                j++;
            if (j == m)
                f->res->fully_masked[bk->b * f->cfg->n_query + i] = 1;
        }
    }
}

/* The query block of sequence b starting at row r0, with its mask. */
static struct block block_at(const struct forward *f, size_t b, size_t r0)
{
    const struct attn_config *c = f->cfg;
    const size_t n = c->n_query;
    return (struct block){
        .b = b,
        .r0 = r0,
        .rows = n - r0 < f->paths.query_rows ? n - r0 : f->paths.query_rows,
        .mv = mask_view_of(c, b),
    };
}

/* What a block hands back once its head outputs are complete: the output
 * rows, and the checks that nothing overflowed on the way. */
static void block_finish(struct forward *f, const struct block *bk,
                         struct scratch *sc)
{
    const struct attn_config *c = f->cfg;
    const size_t row0 = bk->b * c->n_query + bk->r0;
    if (c->want & ATTN_WANT_OUTPUT) {
        block_output(f, bk, sc);
        if (!rows_finite(f->res->output + row0 * c->d_out, bk->rows * c->d_out))
            note_overflow(f, bk->b, bk->r0);
    }
    if ((c->want & ATTN_WANT_HEADS) &&
        !rows_finite(bk->heads, bk->rows * c->heads * c->d_v))
        note_overflow(f, bk->b, bk->r0);
}

/* Unit of the query phase: one block of queries of one sequence. */
static void query_unit(struct forward *f, size_t unit, struct scratch *sc)
{
    const struct attn_config *c = f->cfg;
    const size_t qr = f->paths.query_rows;
    const size_t blocks = (c->n_query + qr - 1) / qr;
    const size_t hk = c->heads * c->d_k, hv = c->heads * c->d_v;
    struct block bk = block_at(f, unit / blocks, unit % blocks * qr);
    const size_t n = c->n_query, m = c->n_keys, b = bk.b;
    const size_t row0 = b * n + bk.r0;
    /* In self-attention the key phase already wrote these rows. */
    bk.x_pe = f->x_pe && !c->cross
                  ? f->x_pe + row0 * c->d_model
                  : rows_with_positions(f->x, f->x_pe, n, c->d_model, b, bk.r0,
                                        bk.rows);
    kv_views(f, b, &bk);

    if (c->mode == ATTN_MODE_PROJECTED) {
        float *q = (c->want & ATTN_WANT_Q) ? f->res->q + row0 * hk : sc->q;
        project_q(f, bk.x_pe, bk.rows, bk.r0, q, sc->panel);
        bk.q = q;
        bk.ldq = hk;
    } else {
        bk.q = bk.x_pe;
        bk.ldq = c->d_model;
        if (c->want & ATTN_WANT_Q)
            memcpy(f->res->q + row0 * hk, bk.q, bk.rows * hk * sizeof(float));
    }
    bk.heads =
        (c->want & ATTN_WANT_HEADS) ? f->res->heads_out + row0 * hv : sc->heads;

    const size_t group = c->heads / c->kv_heads;
    for (size_t a = 0; a < c->heads; a++) {
        if (f->paths.full_path)
            head_full(f, &bk, sc, a, a / group);
        else if (f->paths.need_pv)
            head_streaming(f, &bk, sc, a, a / group);
    }
    if (!f->paths.full_path && !f->paths.need_pv)
        flag_fully_masked(f, &bk);
    if (c->want & ATTN_WANT_MEAN_WEIGHTS) {
        float *mean = f->res->mean_weights + row0 * m;
        for (size_t e = 0; e < bk.rows * m; e++)
            mean[e] /= (float)c->heads;
    }
    block_finish(f, &bk, sc);
}

/* K and V of context rows [r0, r0 + rows) of sequence b, from ctx (those
 * rows, positions added), rotated when positional is rope. */
static void project_kv(struct forward *f, size_t b, size_t r0, size_t rows,
                       const float *ctx, float *k, float *v, float *panel)
{
    const struct attn_config *c = f->cfg;
    const size_t gk = c->kv_heads * c->d_k, gv = c->kv_heads * c->d_v;
    /* V from its own input's rows when there is one */
    const float *vin =
        c->value ? c->value + (b * c->n_ctx + r0) * c->d_value : ctx;
    /* V only when something reads it: the weights alone need none */
    const bool want_v = f->paths.need_pv || (c->want & ATTN_WANT_V);
    linear(ctx, rows, c->d_ctx, held(c, f->p->wk, f->p->stored_wk), f->p->bk,
           gk, k, gk, panel);
    if (want_v)
        linear(vin, rows, c->d_value, held(c, f->p->wv, f->p->stored_wv),
               f->p->bv, gv, v, gv, panel);
    attn_place_heads(c, k, rows, c->kv_heads, f->p->k_norm, r0);
    if (!rows_finite(k, rows * gk) || (want_v && !rows_finite(v, rows * gv)))
        note_overflow(f, b, r0);
}

/* The keys after the context's, as F.multi_head_attention_forward appends
 * them: bias_k and bias_v as they are (no projection, no bias, no
 * rotation), then a key and value of zeros. k, v: the row after the
 * sequence's last context key. */
static void append_keys(struct forward *f, float *k, float *v)
{
    const struct attn_config *c = f->cfg;
    const size_t gk = c->kv_heads * c->d_k, gv = c->kv_heads * c->d_v;
    if (c->bias_kv) {
        memcpy(k, f->p->bias_k, gk * sizeof *k);
        memcpy(v, f->p->bias_v, gv * sizeof *v);
        k += gk;
        v += gv;
    }
    if (c->zero_attn) {
        memset(k, 0, gk * sizeof *k);
        memset(v, 0, gv * sizeof *v);
    }
}

/* Unit of the key phase: kv_rows context rows of one sequence get their
 * positions, projections and rotations; the last chunk also the
 * appended keys. */
static void key_unit(struct forward *f, size_t unit, struct scratch *sc)
{
    (void)sc;
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx;
    const size_t kr = f->paths.kv_rows;
    const size_t chunks = (m + kr - 1) / kr;
    const size_t b = unit / chunks, r0 = unit % chunks * kr;
    const size_t rows = m - r0 < kr ? m - r0 : kr;
    const size_t gk = c->kv_heads * c->d_k, gv = c->kv_heads * c->d_v;
    const float *ctx =
        c->cross
            ? rows_with_positions(f->context, f->c_pe, m, c->d_ctx, b, r0, rows)
            : rows_with_positions(f->x, f->x_pe, m, c->d_ctx, b, r0, rows);
    /* rows of K and V: the n_keys of each sequence, context keys first */
    const size_t row0 = b * c->n_keys + r0;
    if (c->mode == ATTN_MODE_BASIC) {
        if (c->want & ATTN_WANT_K)
            memcpy(f->res->k + row0 * gk, ctx, rows * gk * sizeof(float));
        if (c->want & ATTN_WANT_V)
            memcpy(f->res->v + row0 * gv, ctx, rows * gv * sizeof(float));
        return;
    }
    float *k = f->k + row0 * gk, *v = f->v + row0 * gv;
    project_kv(f, b, r0, rows, ctx, k, v, sc->panel);
    if (r0 + rows == m)
        append_keys(f, k + rows * gk, v + rows * gv);
}

/* ------------------------------------------------------------ key-outer */

/* Where the head outputs of sequence f->seq, row r0 on, are accumulated:
 * the returned heads, the output rows themselves (same width), or scratch. */
static float *key_outer_heads(const struct forward *f, size_t r0)
{
    const struct attn_config *c = f->cfg;
    const size_t row0 = f->seq * c->n_query + r0;
    if (c->want & ATTN_WANT_HEADS)
        return f->res->heads_out + row0 * c->heads * c->d_v;
    if (f->paths.heads_in_output)
        return f->res->output + row0 * c->d_out;
    return f->heads_seq + r0 * c->heads * c->d_v;
}

/* Where the queries of sequence f->seq, row r0 on, are kept. */
static float *key_outer_q(const struct forward *f, size_t r0)
{
    const struct attn_config *c = f->cfg;
    const size_t hk = c->heads * c->d_k;
    return (c->want & ATTN_WANT_Q) ? f->res->q + (f->seq * c->n_query + r0) * hk
                                   : f->q_seq + r0 * hk;
}

/* The views of a query block of the sequence in hand. */
static struct block key_outer_block(const struct forward *f, size_t unit)
{
    const struct attn_config *c = f->cfg;
    struct block bk = block_at(f, f->seq, unit * f->paths.query_rows);
    const size_t row0 = bk.b * c->n_query + bk.r0;
    bk.q = key_outer_q(f, bk.r0);
    bk.ldq = c->heads * c->d_k;
    bk.ldk = c->kv_heads * c->d_k;
    bk.ldv = c->kv_heads * c->d_v;
    bk.heads = key_outer_heads(f, bk.r0);
    bk.x_pe = (f->x_pe ? f->x_pe : f->x) + row0 * c->d_model;
    return bk;
}

/* Unit: a query block's positions and Q, and its running softmax reset. */
static void key_outer_queries(struct forward *f, size_t unit,
                              struct scratch *sc)
{
    (void)sc;
    const struct attn_config *c = f->cfg;
    const struct block bk = key_outer_block(f, unit);
    const size_t dv = c->d_v;
    const float *x = rows_with_positions(f->x, f->x_pe, c->n_query, c->d_model,
                                         bk.b, bk.r0, bk.rows);
    float *q = key_outer_q(f, bk.r0);
    project_q(f, x, bk.rows, bk.r0, q, sc->panel);
    for (size_t a = 0; a < c->heads; a++)
        stream_start(&bk, dv, c->heads * dv,
                     f->online_seq + a * c->n_query + bk.r0, bk.heads + a * dv);
}

/* Unit: kv_rows rows of the key block in hand get their K and V. */
static void key_outer_keys(struct forward *f, size_t unit, struct scratch *sc)
{
    (void)sc;
    const struct attn_config *c = f->cfg;
    const size_t m = c->n_ctx, b = f->seq;
    const size_t kr = f->paths.kv_rows;
    const size_t r0 = f->j0 + unit * kr, end = f->j0 + f->nj;
    const size_t rows = end - r0 < kr ? end - r0 : kr;
    const size_t gk = c->kv_heads * c->d_k, gv = c->kv_heads * c->d_v;
    /* in self-attention the query units already added the positions */
    const float *ctx =
        c->cross
            ? rows_with_positions(f->context, f->c_pe, m, c->d_ctx, b, r0, rows)
            : (f->x_pe ? f->x_pe : f->x) + (b * m + r0) * c->d_ctx;
    float *k = f->k + (r0 - f->j0) * gk, *v = f->v + (r0 - f->j0) * gv;
    project_kv(f, b, r0, rows, ctx, k, v, sc->panel);
}

/* Unit: a query block folds the key block in hand into every head. */
static void key_outer_attend(struct forward *f, size_t unit, struct scratch *sc)
{
    const struct attn_config *c = f->cfg;
    const struct block bk = key_outer_block(f, unit);
    if (keys_all_in_future(f, &bk, f->j0))
        return;
    const size_t group = c->heads / c->kv_heads;
    for (size_t a = 0; a < c->heads; a++)
        stream_keys(f, &bk, sc, f->online_seq + a * c->n_query + bk.r0,
                    bk.heads + a * c->d_v, a, a / group, f->j0, f->nj, f->k,
                    f->v);
}

/* Unit: a query block's head outputs normalised, then its output rows. */
static void key_outer_finish(struct forward *f, size_t unit, struct scratch *sc)
{
    const struct attn_config *c = f->cfg;
    const struct block bk = key_outer_block(f, unit);
    for (size_t a = 0; a < c->heads; a++)
        stream_finish(f, &bk, f->online_seq + a * c->n_query + bk.r0,
                      bk.heads + a * c->d_v);
    block_finish(f, &bk, sc);
}

/* ----------------------------------------------------------------- team */

/* Unit u of the phase in hand, with its member's scratch. */
static void forward_unit(void *arg, size_t u, unsigned member)
{
    struct forward *f = arg;
    f->unit(f, u, &f->scratch[member]);
}

/* One phase: n_units units on the team (pool.h). */
static void run_phase(struct forward *f,
                      void (*unit)(struct forward *, size_t, struct scratch *),
                      size_t n_units)
{
    f->unit = unit;
    pool_phase(&f->team, forward_unit, f, n_units);
}

/* Every sequence in turn: its queries, then each key block, then its rows. */
static void run_key_outer(struct forward *f)
{
    const struct attn_config *c = f->cfg;
    const size_t n = c->n_query, m = c->n_ctx;
    const size_t qr = f->paths.query_rows, kr = f->paths.kv_rows;
    const size_t q_units = (n + qr - 1) / qr;
    /* key units of a block are those of the other order's key phase */
    assert(KEY_BLOCK % kr == 0);
    for (f->seq = 0; f->seq < c->batch; f->seq++) {
        run_phase(f, key_outer_queries, q_units);
        for (f->j0 = 0; f->j0 < m; f->j0 += KEY_BLOCK) {
            if (c->causal && f->j0 >= n)
                break; /* no query sees these keys */
            f->nj = m - f->j0 < KEY_BLOCK ? m - f->j0 : KEY_BLOCK;
            run_phase(f, key_outer_keys, (f->nj + kr - 1) / kr);
            run_phase(f, key_outer_attend, q_units);
        }
        run_phase(f, key_outer_finish, q_units);
    }
}

/* ---------------------------------------------------------------- entry */

void attn_blas_single_thread(void)
{
    openblas_set_num_threads(1);
}

const char *attn_blas_core(void)
{
    return openblas_get_corename();
}

attn_status attn_forward(const struct attn_config *cfg_in, const float *x,
                         const float *context, struct attn_result *out,
                         struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    struct attn_config cfg = *cfg_in;
    attn_status st = cfg.resolved ? ATTN_OK : attn_config_resolve(&cfg, err);
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
    if (!st && cfg.value)
        st = check_finite(cfg.value, cfg.n_ctx, cfg.d_value, cfg.batch, "value",
                          err);
    if (!st)
        st = check_mask_bias(&cfg, err);
    if (st)
        return st;

    struct attn_params drawn = {0};
    struct forward f = {.cfg = &cfg, .res = out, .x = x, .context = context};
    if ((cfg.qk_norm || cfg.qk_norm_whole) &&
        !(cfg.params && cfg.params->q_norm && cfg.params->k_norm))
        return attn_fail(err, ATTN_E_INVALID, "params",
                         "%s needs explicit params with q_norm and k_norm",
                         cfg.qk_norm ? "qk_norm" : "qk_norm_whole");
    if (cfg.params && holds_stored(cfg.params) &&
        !(cfg.stored_matrices && cfg.params_checked))
        return attn_fail(err, ATTN_E_INVALID, "params",
                         "16-bit matrices need a config resolved with "
                         "stored_matrices, and checked params");
    if (cfg.mode == ATTN_MODE_PROJECTED) {
        if (cfg.params) {
            st = cfg.params_checked ? ATTN_OK
                                    : attn_params_check(&cfg, cfg.params, err);
            f.p = cfg.params;
        } else {
            st = attn_params_draw(&cfg, &drawn, err);
            f.p = &drawn;
        }
        if (st)
            return st;
    }
    f.paths = forward_paths(&cfg);
    f.scale = attn_config_scale(&cfg);
    f.dropout_key = attn_stream_key(cfg.seed, "dropout", strlen("dropout"));

    const size_t kr = f.paths.kv_rows, qr = f.paths.query_rows;
    const size_t kv_units = cfg.batch * ((cfg.n_ctx + kr - 1) / kr);
    const size_t q_units = cfg.batch * ((cfg.n_query + qr - 1) / qr);
    const unsigned threads = forward_team(&cfg, &f.paths);
    struct attn_pool *own_pool = NULL;
    atomic_flag_clear(&f.overflowed);
    st = result_init(&cfg, out, err);
    if (!st && (cfg.want & ATTN_ROW_MEASURES))
        st = row_measures_init(&f.measures, &cfg, threads, x, out, err);
    if (!st)
        st = workspace_init(&f, threads, err);
    if (!st)
        st = pool_take(cfg.pool, threads, &f.team.pool, &own_pool, err);
    if (!st) {
        f.team.size = threads;
        f.team.cancel = cfg.cancel;
        if (f.paths.key_outer) {
            run_key_outer(&f);
        } else {
            run_phase(&f, key_unit, kv_units);
            run_phase(&f, query_unit, q_units);
        }
        pool_give_back(f.team.pool, own_pool);
        for (size_t i = 0; i < cfg.batch * cfg.n_query; i++)
            out->n_fully_masked += out->fully_masked[i];
        if (cfg.cancel && atomic_load(cfg.cancel)) {
            st = attn_fail(err, ATTN_E_CANCELLED, "",
                           "the computation was cancelled");
            attn_result_free(out);
        } else if (atomic_flag_test_and_set(&f.overflowed)) {
            const size_t at[2] = {f.overflow_b, f.overflow_row};
            st = attn_fail_at(err, ATTN_E_INPUT, "x", 2, at,
                              "the products overflow float32 (sequence %zu, "
                              "row %zu): the inputs, parameters or scale are "
                              "too large",
                              f.overflow_b, f.overflow_row);
            attn_result_free(out);
        } else {
            if (f.measures.c)
                row_measures_finish(&f.measures, out);
            if (cfg.want & ATTN_WANT_VALUE_WEIGHTED)
                st = value_weighted_of_result(&cfg, f.p, out, err);
        }
    } else {
        attn_result_free(out);
    }
    row_measures_free(&f.measures); /* a pass that failed: no-op otherwise */
    free(f.block);
    attn_params_free(&drawn);
    return st;
}
