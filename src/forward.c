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
 * something to share (unit_rows()). Products go to cblas_sgemm with
 * leading dimensions, so a head is addressed inside the [rows][heads * d]
 * matrices rather than copied out.
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
/* madvise() and MADV_HUGEPAGE, where the system has them */
#define _DEFAULT_SOURCE

#include "attention.h"
#include "checked.h"
#include "error.h"
#include "pool.h"
#include "posenc.h"
#include "rng.h"
#include "softmax.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    QUERY_BLOCK = 256, /* most query rows in one unit */
    SHORT_ROW = 32,    /* rows of fewer keys: softmax_rows() */
    KV_CHUNK = 256,    /* most context rows in one unit of the key phase */
    MIN_UNIT_ROWS = 64,
    KEY_BLOCK = 512,
    WS_ALIGN = 64,
    MAX_TEAM = POOL_MAX_MEMBERS
};

/* Result arrays of HUGE_ARRAY bytes or more are laid on huge pages. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_ARRAY ((size_t)8 << 20)

/* A pass of fewer floating-point operations runs as one unit per phase:
 * about 0.15 ms on one core, where a second thread would not pay for
 * itself. */
#define SPLIT_FLOPS 16e6

/* Which keys one sequence's queries may see, and what their scores get
 * added. Keys at or past n_ctx (bias_k's, the zero key) are never masked:
 * PyTorch pads every mask with an allowed column for them. */
struct mask_view {
    bool causal;
    const uint8_t *mask;        /* [N][M] or NULL; nonzero = may attend */
    const float *bias;          /* [N][M] or NULL; added to the scores */
    const uint8_t *key_padding; /* [M] or NULL; nonzero = ignore */
    size_t n_ctx;               /* M, the stride of mask and bias */
    size_t head_stride;         /* N x M between the heads' masks; 0: shared */
};

/* Scratch of one thread; pointers its config does not need stay NULL. */
struct scratch {
    float *q;     /* [query_rows][h*d_k] when q is not returned */
    float *heads; /* [query_rows][h*d_v] when heads are not returned */
    float *tile;  /* [query_rows][tile_ld] */
    struct softmax_online *online; /* [query_rows] */
    float *out; /* [query_rows][d_out] when head outputs are projected
                   in place (key-outer) */
};

/* Which way a pass goes and how it is cut, from the config alone. */
struct paths {
    size_t query_rows;    /* rows of a query unit */
    size_t kv_rows;       /* context rows of a key unit */
    bool full_path;       /* weights or scores held whole */
    bool need_pv;         /* weights times V: head outputs or the output */
    bool key_outer;       /* keys outside queries, one key block held */
    bool heads_in_output; /* key-outer head outputs summed in place */
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
    /* the team: at most team threads of pool (NULL: the caller alone) */
    struct attn_pool *pool;
    unsigned team;
    /* the phase being run by the team */
    void (*unit)(struct forward *f, size_t unit, struct scratch *s);
    size_t n_units;
    atomic_size_t next_unit;
    /* the first unit whose products overflowed float32, if any */
    atomic_flag overflowed;
    size_t overflow_b, overflow_row;
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

/* The view of head a's mask. */
static struct mask_view mask_of_head(const struct mask_view *mv, size_t a)
{
    struct mask_view hv = *mv;
    const size_t at = a * mv->head_stride;
    if (hv.mask)
        hv.mask += at;
    if (hv.bias)
        hv.bias += at;
    return hv;
}

/* Mask the scores s[0 .. nj) of query i against keys j0 on: -INFINITY
 * where the pair is hidden, the additive mask added elsewhere. */
static void mask_row(const struct mask_view *mv, size_t i, size_t j0, float *s,
                     size_t nj)
{
    const size_t m = mv->n_ctx;
    if (j0 >= m)
        return;
    nj = j0 + nj > m ? m - j0 : nj; /* the context keys among them */
    if (mv->causal && j0 + nj > i + 1) {
        const size_t from = i + 1 > j0 ? i + 1 - j0 : 0;
        for (size_t j = from; j < nj; j++)
            s[j] = -INFINITY;
    }
    if (mv->mask) {
        const uint8_t *allowed = mv->mask + i * m + j0;
        for (size_t j = 0; j < nj; j++)
            if (!allowed[j])
                s[j] = -INFINITY;
    }
    if (mv->bias) {
        // s += bias, and "never" where the bias says so
        const float *add = mv->bias + i * m + j0;
        for (size_t j = 0; j < nj; j++)
            s[j] = add[j] <= ATTN_MASK_NEVER ? -INFINITY : s[j] + add[j];
    }
    if (mv->key_padding) {
        const uint8_t *ignore = mv->key_padding + j0;
        for (size_t j = 0; j < nj; j++)
            if (ignore[j])
                s[j] = -INFINITY;
    }
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

/* Whether a[0 .. count) holds no NaN and no infinity: four floats at a
 * time (a width every x86-64 has), with no branch per value, since the
 * answer is almost always yes. x - x is 0 for a finite x and NaN for the
 * others. */
static bool rows_finite(const float *a, size_t count)
{
    typedef float v4f __attribute__((vector_size(16)));
    typedef int32_t v4i __attribute__((vector_size(16)));
    v4f v;
    v4i bad = {0};
    size_t e = 0;
    for (; e + 4 <= count; e += 4) {
        memcpy(&v, a + e, sizeof v);
        v -= v;
        bad |= v != v;
    }
    int32_t any = bad[0] | bad[1] | bad[2] | bad[3];
    for (; e < count; e++)
        any |= !isfinite(a[e]);
    return any == 0;
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

/* ------------------------------------------------------------ the plan */

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

static struct paths paths_of(const struct attn_config *c)
{
    struct paths p;
    const double flops = attn_flops(c);
    p.query_rows = unit_rows(c->n_query, flops, QUERY_BLOCK);
    p.kv_rows = unit_rows(c->n_ctx, flops, KV_CHUNK);
    p.full_path = c->want & (ATTN_WANT_WEIGHTS | ATTN_WANT_WEIGHTS_RAW |
                             ATTN_WANT_SCORES | ATTN_WANT_MEAN_WEIGHTS);
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

/* The team of a call: cfg->threads, but never more than MAX_TEAM or the
 * units of its largest phase, which a larger team would only idle over. */
static unsigned team_size(const struct attn_config *c, const struct paths *p)
{
    const size_t kv_units =
        c->batch * ((c->n_ctx + p->kv_rows - 1) / p->kv_rows);
    const size_t q_units =
        c->batch * ((c->n_query + p->query_rows - 1) / p->query_rows);
    const size_t most_units = kv_units > q_units ? kv_units : q_units;
    unsigned threads = c->threads == 0 ? 1 : c->threads;
    if (threads > MAX_TEAM)
        threads = MAX_TEAM;
    if (threads > most_units)
        threads = (unsigned)most_units;
    return threads;
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

/* The parts of a call's one workspace block: shared ones, then one set of
 * per-thread ones. */
enum {
    X_PE,
    C_PE,
    K,
    V,
    Q_SEQ,
    HEADS_SEQ,
    ONLINE_SEQ,
    SCRATCH,
    Q,
    HEADS,
    TILE,
    ONLINE,
    OUT,
    N_PARTS
};

struct workspace_plan {
    size_t count[N_PARTS], elem[N_PARTS], offset[N_PARTS];
    size_t tile_ld;
    size_t bytes;
    bool overflow;
};

/* What a call of resolved config c with its paths and team holds besides
 * its result: every part's size and place in one block. */
static void workspace_plan(const struct attn_config *c, const struct paths *p,
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

    struct plan pl = {0, false};
    for (int i = 0; i < N_PARTS; i++) {
        const bool per_thread = i > SCRATCH;
        for (unsigned t = 0; t < (per_thread ? threads : 1); t++) {
            size_t at = 0;
            if (count[i])
                plan_take(&pl, &at, count[i], elem[i]);
            if (t == 0)
                w->offset[i] = at;
        }
    }
    w->bytes = pl.bytes;
    w->overflow = pl.overflow;
}

size_t attn_workspace_bytes(const struct attn_config *cfg)
{
    const struct paths p = paths_of(cfg);
    struct workspace_plan w;
    workspace_plan(cfg, &p, team_size(cfg, &p), &w);
    return w.overflow ? SIZE_MAX : w.bytes;
}

static attn_status workspace_init(struct forward *f, unsigned threads,
                                  struct attn_error *err)
{
    struct workspace_plan w;
    workspace_plan(f->cfg, &f->paths, threads, &w);
    const size_t *count = w.count, *elem = w.elem;
    size_t *offset = w.offset;
    f->tile_ld = w.tile_ld;
    if (w.overflow)
        return attn_fail(err, ATTN_E_TOO_BIG, "n_query",
                         "the scratch memory for this input is too large");
    f->block = aligned_alloc(WS_ALIGN, w.bytes);
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
        for (int i = Q; i < N_PARTS; i++)
            if (count[i]) {
                size_t bytes = count[i] * elem[i] + WS_ALIGN - 1;
                offset[i] += bytes & ~(size_t)(WS_ALIGN - 1);
            }
    }
#undef PART
    return ATTN_OK;
}

/* The arrays a result may hold, with their sizes; slots point into res. */
struct result_part {
    unsigned bit;
    float **slot;
    size_t count;
    bool zeroed;
};
enum { N_RESULT_PARTS = 9 };

static void result_parts(const struct attn_config *c, struct attn_result *res,
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
static void *result_alloc(size_t bytes)
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

/* The bytes result_alloc() takes beyond bytes (none for a zeroed array,
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
    result_parts(c, res, arrays);
    for (size_t i = 0; i < N_RESULT_PARTS; i++) {
        if (!(c->want & arrays[i].bit))
            continue;
        *arrays[i].slot = arrays[i].zeroed
                              ? calloc(arrays[i].count, sizeof(float))
                              : result_alloc(arrays[i].count * sizeof(float));
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

bool attn_forward_needs_pool(const struct attn_config *cfg)
{
    const struct paths p = paths_of(cfg);
    return team_size(cfg, &p) > 1;
}

size_t attn_forward_bytes(const struct attn_config *cfg)
{
    struct attn_result res;
    struct result_part arrays[N_RESULT_PARTS];
    result_parts(cfg, &res, arrays);
    /* every term is under SIZE_MAX / 32 once the config is resolved */
    size_t floats = 0, rounding = 0;
    for (size_t i = 0; i < N_RESULT_PARTS; i++)
        if (cfg->want & arrays[i].bit) {
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
    size_t bytes;
    if (!size_mul(floats, sizeof(float), &bytes) ||
        !size_add_to(&bytes, cfg->batch * cfg->n_query) ||
        !size_add_to(&bytes, workspace) || !size_add_to(&bytes, pool) ||
        !size_add_to(&bytes, rounding))
        return SIZE_MAX;
    return bytes;
}

void attn_result_free(struct attn_result *result)
{
    if (!result)
        return;
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
    memset(result, 0, sizeof *result);
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
    const struct mask_view mv = mask_of_head(&bk->mv, a);
    float *raw =
        (c->want & ATTN_WANT_WEIGHTS_RAW) ? f->res->weights_raw + at : NULL;
    float *w = (c->want & ATTN_WANT_WEIGHTS) ? f->res->weights + at : sc->tile;
    float *s = (c->want & ATTN_WANT_SCORES) ? f->res->scores + at : w;

    // S = scale * Q_a * K_g^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bk->rows, (int)m,
                (int)dk, f->scale, bk->q + a * dk, (int)bk->ldq, bk->k + g * dk,
                (int)bk->ldk, 0.0f, s, (int)m);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk->rows,
                    (int)dv, (int)m, 1.0f, w, (int)m, bk->v + g * dv,
                    (int)bk->ldv, 0.0f, bk->heads + a * dv, (int)(h * dv));
}

/* Streaming path, one block of keys for head a: fold keys [j0, j0 + nj)
 * into the running softmax of each row and into its head output.
 * k, v: the rows of key j0 in K and V (ld bk->ldk, bk->ldv); out: the
 * block's head a output (ld h * d_v); online: [rows]. */
static void stream_keys(struct forward *f, const struct block *bk, float *tile,
                        struct softmax_online *online, float *out, size_t a,
                        size_t g, size_t j0, size_t nj, const float *k,
                        const float *v)
{
    const struct attn_config *c = f->cfg;
    const size_t dk = c->d_k, dv = c->d_v, ldh = c->heads * dv;
    const size_t ldt = f->tile_ld;
    const struct mask_view mv = mask_of_head(&bk->mv, a);
    // S = scale * Q_a * K_g[j0 : j0 + nj]^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bk->rows, (int)nj,
                (int)dk, f->scale, bk->q + a * dk, (int)bk->ldq, k + g * dk,
                (int)bk->ldk, 0.0f, tile, (int)ldt);
    for (size_t r = 0; r < bk->rows; r++) {
        float *row = tile + r * ldt;
        const size_t i = bk->r0 + r;
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk->rows,
                (int)dv, (int)nj, 1.0f, tile, (int)ldt, v + g * dv,
                (int)bk->ldv, 1.0f, out, (int)ldh);
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
        stream_keys(f, bk, sc->tile, sc->online, out, a, g, j0, nj,
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
        linear(bk->heads, bk->rows, hv, f->p->wo, f->p->bo, d_out, dst, d_out);
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

static bool key_visible(const struct mask_view *mv, size_t i, size_t j)
{
    if (j >= mv->n_ctx)
        return true; /* an appended key */
    return !(mv->causal && j > i) &&
           !(mv->mask && !mv->mask[i * mv->n_ctx + j]) &&
           !(mv->bias && mv->bias[i * mv->n_ctx + j] <= ATTN_MASK_NEVER) &&
           !(mv->key_padding && mv->key_padding[j]);
}

/* Without any head computed, still report the rows with no visible key
 * (in any head, when the mask is per head), as the heads would. */
static void flag_fully_masked(struct forward *f, const struct block *bk)
{
    const size_t m = f->cfg->n_keys;
    const size_t heads = bk->mv.head_stride ? f->cfg->heads : 1;
    for (size_t a = 0; a < heads; a++) {
        const struct mask_view mv = mask_of_head(&bk->mv, a);
        for (size_t r = 0; r < bk->rows; r++) {
            const size_t i = bk->r0 + r;
            size_t j = 0;
            while (j < m && !key_visible(&mv, i, j))
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
    const size_t n = c->n_query, m = c->n_ctx;
    /* sequence b's mask: [N][M], or one of [B][N][M] or [B][h][N][M] */
    const size_t mask_at = c->mask_per_head  ? b * c->heads * n * m
                           : c->mask_batched ? b * n * m
                                             : 0;
    return (struct block){
        .b = b,
        .r0 = r0,
        .rows = n - r0 < f->paths.query_rows ? n - r0 : f->paths.query_rows,
        .mv = {.causal = c->causal,
               .mask = c->mask ? c->mask + mask_at : NULL,
               .bias = c->mask_bias ? c->mask_bias + mask_at : NULL,
               .key_padding =
                   c->key_padding
                       ? c->key_padding + (c->key_padding_batched ? b * m : 0)
                       : NULL,
               .n_ctx = m,
               .head_stride = c->mask_per_head ? n * m : 0},
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
        linear(bk.x_pe, bk.rows, c->d_model, f->p->wq, f->p->bq, hk, q, hk);
        if (c->positional == ATTN_POS_ROPE)
            posenc_apply_rope(q, bk.rows, hk, c->heads, c->d_k, bk.r0,
                              c->rope_base);
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
                       const float *ctx, float *k, float *v)
{
    const struct attn_config *c = f->cfg;
    const size_t gk = c->kv_heads * c->d_k, gv = c->kv_heads * c->d_v;
    /* V from its own input's rows when there is one */
    const float *vin =
        c->value ? c->value + (b * c->n_ctx + r0) * c->d_value : ctx;
    /* V only when something reads it: the weights alone need none */
    const bool want_v = f->paths.need_pv || (c->want & ATTN_WANT_V);
    linear(ctx, rows, c->d_ctx, f->p->wk, f->p->bk, gk, k, gk);
    if (want_v)
        linear(vin, rows, c->d_value, f->p->wv, f->p->bv, gv, v, gv);
    if (c->positional == ATTN_POS_ROPE)
        posenc_apply_rope(k, rows, gk, c->kv_heads, c->d_k, r0, c->rope_base);
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
    project_kv(f, b, r0, rows, ctx, k, v);
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
    const size_t hk = c->heads * c->d_k, dv = c->d_v;
    const float *x = rows_with_positions(f->x, f->x_pe, c->n_query, c->d_model,
                                         bk.b, bk.r0, bk.rows);
    float *q = key_outer_q(f, bk.r0);
    linear(x, bk.rows, c->d_model, f->p->wq, f->p->bq, hk, q, hk);
    if (c->positional == ATTN_POS_ROPE)
        posenc_apply_rope(q, bk.rows, hk, c->heads, c->d_k, bk.r0,
                          c->rope_base);
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
    project_kv(f, b, r0, rows, ctx, k, v);
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
        stream_keys(f, &bk, sc->tile, f->online_seq + a * c->n_query + bk.r0,
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

/* Take units until none is left. Which thread runs a unit never changes
 * what the unit computes, so results do not depend on the team's size. */
static void member_run(void *arg, unsigned member)
{
    struct forward *f = arg;
    struct scratch *sc = &f->scratch[member];
    const atomic_bool *cancel = f->cfg->cancel;
    for (;;) {
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed))
            return; /* the units left are skipped; the caller sees it */
        const size_t u = atomic_fetch_add(&f->next_unit, 1);
        if (u >= f->n_units)
            return;
        f->unit(f, u, sc);
    }
}

/* One phase: n_units units on the team (the pool's threads, at most
 * f->team of them), or on the calling thread alone without a pool. */
static void run_phase(struct forward *f,
                      void (*unit)(struct forward *, size_t, struct scratch *),
                      size_t n_units)
{
    f->unit = unit;
    f->n_units = n_units;
    atomic_store(&f->next_unit, 0);
    const unsigned members = f->team < n_units ? f->team : (unsigned)n_units;
    if (f->pool && members > 1)
        pool_run(f->pool, members, member_run, f);
    else
        member_run(f, 0);
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
    f.paths = paths_of(&cfg);
    f.scale = attn_config_scale(&cfg);
    f.dropout_key = attn_stream_key(cfg.seed, "dropout", strlen("dropout"));

    const size_t kr = f.paths.kv_rows, qr = f.paths.query_rows;
    const size_t kv_units = cfg.batch * ((cfg.n_ctx + kr - 1) / kr);
    const size_t q_units = cfg.batch * ((cfg.n_query + qr - 1) / qr);
    const unsigned threads = team_size(&cfg, &f.paths);
    struct attn_pool *own_pool = NULL;
    atomic_flag_clear(&f.overflowed);
    st = result_init(&cfg, out, err);
    if (!st)
        st = workspace_init(&f, threads, err);
    if (!st)
        st = pool_take(cfg.pool, threads, &f.pool, &own_pool, err);
    if (!st) {
        f.team = threads;
        if (f.paths.key_outer) {
            run_key_outer(&f);
        } else {
            run_phase(&f, key_unit, kv_units);
            run_phase(&f, query_unit, q_units);
        }
        pool_give_back(f.pool, own_pool);
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
        }
    } else {
        attn_result_free(out);
    }
    free(f.block);
    attn_params_free(&drawn);
    return st;
}
