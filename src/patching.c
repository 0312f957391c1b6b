/*
 * patching.c - activation patching (patching.h).
 */
#include "checked.h"
#include "error.h"
#include "patching.h"
#include "softmax.h"
#include "transformer_head.h"
#include "transformer_units.h"
#include "widen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *xf_patch_over_name(int over)
{
    static const char *const names[] = {"heads", "heads_positions", "residual",
                                        "layers"};
    return over >= 0 && over < 4 ? names[over] : NULL;
}

/* ---------------------------------------------------------------- metric */

/* Row id of lm_head widened into out [H]. */
static void head_row(const struct xf_model *m, uint32_t id, float *out)
{
    const size_t H = m->hidden;
    attn_widen(xf_matrix_rows(m->lm_head, id, H), m->lm_head.dtype, H, out);
}

/* row . lm_head[id], in double; scratch: [H]. */
static double logit_of(const struct xf_model *m, const float *row, uint32_t id,
                       float *scratch)
{
    head_row(m, id, scratch);
    double sum = 0.0;
    for (size_t c = 0; c < m->hidden; c++)
        sum += (double)row[c] * scratch[c];
    return sum;
}

/* log softmax(logits)[id], the sum in double. */
static double logprob_of(const float *logits, size_t V, uint32_t id)
{
    float top = logits[0];
    for (size_t v = 1; v < V; v++)
        top = logits[v] > top ? logits[v] : top;
    double sum = 0.0;
    for (size_t v = 0; v < V; v++)
        sum += exp((double)logits[v] - top);
    return (double)logits[id] - top - log(sum);
}

/* What measuring a run's last rows takes: a row of lm_head widened for a
 * logit difference; for a log-probability every row's logits, made from
 * two rows or more (a pad row beside a single one), so that each run's
 * go the same way through the product (widen.h) and an unchanged run
 * measures the same as its base. */
struct measure {
    float *row;    /* [H] */
    float *pad;    /* [2][H] */
    float *logits; /* [max(batch, 2)][vocab] */
    float *panel;  /* WIDEN_PANEL_FLOATS */
};

static void measure_free(struct measure *ms)
{
    free(ms->row);
    free(ms->pad);
    free(ms->logits);
    free(ms->panel);
}

/* The floats a measure holds for batches of batch rows. */
static size_t measure_floats(const struct xf_model *m, const struct xf_patch *p,
                             size_t batch)
{
    size_t floats = 3 * m->hidden;
    if (p->metric.kind == XF_METRIC_LOGPROB)
        floats += (batch < 2 ? 2 : batch) * m->vocab_size + WIDEN_PANEL_FLOATS;
    return floats;
}

static bool measure_init(struct measure *ms, const struct xf_model *m,
                         const struct xf_patch *p, size_t batch)
{
    memset(ms, 0, sizeof *ms);
    ms->row = malloc(m->hidden * sizeof *ms->row);
    ms->pad = malloc(2 * m->hidden * sizeof *ms->pad);
    if (p->metric.kind == XF_METRIC_LOGPROB) {
        ms->logits = malloc((batch < 2 ? 2 : batch) * m->vocab_size *
                            sizeof *ms->logits);
        ms->panel = malloc(WIDEN_PANEL_FLOATS * sizeof *ms->panel);
    }
    return ms->row && ms->pad &&
           (p->metric.kind != XF_METRIC_LOGPROB || (ms->logits && ms->panel));
}

/* The metric of each of count rows [count][H] into out [count]. */
static void measure_rows(struct measure *ms, const struct xf_model *m,
                         const struct xf_metric *mt, const float *rows,
                         size_t count, double *out)
{
    const size_t H = m->hidden;
    if (mt->kind == XF_METRIC_LOGPROB) {
        const float *x = rows;
        if (count < 2) {
            memcpy(ms->pad, rows, H * sizeof *ms->pad);
            memcpy(ms->pad + H, rows, H * sizeof *ms->pad);
            x = ms->pad;
        }
        const struct widen_product pr = {.x = x,
                                         .ldx = H,
                                         .rows = count < 2 ? 2 : count,
                                         .in = H,
                                         .w = m->lm_head.data,
                                         .dtype = m->lm_head.dtype,
                                         .ldw = H,
                                         .out = m->vocab_size,
                                         .y = ms->logits,
                                         .ldy = m->vocab_size};
        widen_product(&pr, 0.0f, ms->panel);
        if (m->final_softcap > 0.0f)
            for (size_t b = 0; b < count; b++)
                softmax_softcap(ms->logits + b * m->vocab_size, m->vocab_size,
                                m->final_softcap);
    }
    // the logits as the model gives them: capped, when it caps them
    for (size_t b = 0; b < count; b++)
        out[b] = mt->kind == XF_METRIC_LOGPROB
                     ? logprob_of(ms->logits + b * m->vocab_size, m->vocab_size,
                                  mt->correct)
                     : head_capped(
                           m, logit_of(m, rows + b * H, mt->correct, ms->row)) -
                           head_capped(m, logit_of(m, rows + b * H,
                                                   mt->incorrect, ms->row));
}

/* ------------------------------------------------------------------ runs */

size_t xf_patch_layer_runs(const struct xf_model *m, const struct xf_patch *p)
{
    switch (p->over) {
    case XF_PATCH_HEADS: return m->heads;
    case XF_PATCH_HEADS_POSITIONS: return m->heads * p->n;
    case XF_PATCH_RESIDUAL: return p->n;
    case XF_PATCH_LAYERS: return 2 * p->n;
    }
    return 0;
}

size_t xf_patch_runs(const struct xf_model *m, const struct xf_patch *p)
{
    return m->layers * xf_patch_layer_runs(m, p);
}

size_t xf_patch_batch(const struct xf_patch *p)
{
    size_t b = p->n ? p->batch_rows / p->n : 1;
    if (b < 1)
        b = 1;
    return b > XF_MAX_BATCH ? XF_MAX_BATCH : b;
}

/* Where run j of layer l lands in the result (patching.h's layouts). */
static size_t run_index(const struct xf_model *m, const struct xf_patch *p,
                        size_t l, size_t j)
{
    if (p->over == XF_PATCH_LAYERS)
        return (j / p->n) * m->layers * p->n + l * p->n + j % p->n;
    return l * xf_patch_layer_runs(m, p) + j;
}

/* The activations a patch reads of a run. */
struct kept {
    struct xf_result r;
    double metric;
};

/* The edit of run j of layer l, as sequence b, from the source run's
 * activations. */
static struct xf_edit edit_of(const struct xf_model *m,
                              const struct xf_patch *p, const struct kept *src,
                              size_t l, size_t j, size_t b)
{
    const size_t n = p->n, H = m->hidden, hd = m->heads * m->head_dim;
    struct xf_edit e = {.op = XF_EDIT_SET,
                        .layer = l,
                        .head = XF_ALL,
                        .position = XF_ALL,
                        .sequence = b};
    switch (p->over) {
    case XF_PATCH_HEADS:
        e.site = XF_SITE_Z;
        e.head = j;
        e.source = src->r.z + l * n * hd;
        break;
    case XF_PATCH_HEADS_POSITIONS:
        e.site = XF_SITE_Z;
        e.head = j / n;
        e.position = j % n;
        e.source = src->r.z + l * n * hd;
        break;
    case XF_PATCH_RESIDUAL:
        e.site = XF_SITE_RESID_PRE;
        e.position = j;
        e.source = src->r.resid + l * n * H;
        break;
    case XF_PATCH_LAYERS:
        e.site = j < n ? XF_SITE_ATTN_OUT : XF_SITE_MLP_OUT;
        e.position = j % n;
        e.source = (j < n ? src->r.attn_out : src->r.mlp_out) + l * n * H;
        break;
    }
    return e;
}

/* The unpatched run of ids, its activations kept. */
static struct xf_run whole_run(const struct xf_patch *p, const uint32_t *ids)
{
    return (struct xf_run){.ids = ids,
                           .n = p->n,
                           .want = XF_WANT_ACTIVATIONS | XF_WANT_LAST_ROWS,
                           .layer = XF_ALL_LAYERS,
                           .threads = p->threads,
                           .capture_position = XF_ALL};
}

/* A batch of `batch` patched runs of layer l from the base run. */
static struct xf_run batch_run(const struct xf_model *m,
                               const struct xf_patch *p, const uint32_t *ids,
                               const struct kept *base, size_t l, size_t batch,
                               const struct xf_edit *edits)
{
    return (struct xf_run){.ids = ids,
                           .n = p->n,
                           .want = XF_WANT_LAST_ROWS,
                           .layer = XF_ALL_LAYERS,
                           .threads = p->threads,
                           .edits = edits,
                           .n_edits = batch,
                           .batch = batch,
                           .start = base ? base->r.resid + l * p->n * m->hidden
                                         : NULL,
                           .first_layer = l,
                           .capture_position = XF_ALL};
}

/* ----------------------------------------------------------------- cost */

static attn_status check_patch(const struct xf_model *m,
                               const struct xf_patch *p, struct attn_error *err)
{
    if (!m->lm_head.data)
        return attn_fail(err, ATTN_E_INVALID, "model",
                         "patching measures next-token scores: the model "
                         "has no output head");
    if (m->arch.norm_place == XF_NORM_AFTER)
        return attn_fail(err, ATTN_E_INVALID, "model",
                         "patching needs a residual stream that no norm "
                         "rewrites (a post-norm model has none)");
    if (!xf_patch_over_name((int)p->over))
        return attn_fail(err, ATTN_E_INVALID, "over", "over (%d) is unknown",
                         (int)p->over);
    if (p->metric.kind != XF_METRIC_LOGIT_DIFF &&
        p->metric.kind != XF_METRIC_LOGPROB)
        return attn_fail(err, ATTN_E_INVALID, "metric",
                         "the metric's kind (%d) is unknown",
                         (int)p->metric.kind);
    if (p->metric.correct >= m->vocab_size ||
        (p->metric.kind == XF_METRIC_LOGIT_DIFF &&
         p->metric.incorrect >= m->vocab_size))
        return attn_fail(err, ATTN_E_INVALID, "metric",
                         "the metric's tokens must be below vocab_size (%zu)",
                         m->vocab_size);
    if (!p->clean || !p->corrupted || !p->n)
        return attn_fail(err, ATTN_E_INVALID, "clean",
                         "clean and corrupted need tokens");
    return ATTN_OK;
}

attn_status xf_patch_cost(const struct xf_model *m, const struct xf_patch *p,
                          size_t *bytes, double *flops, struct attn_error *err)
{
    attn_status st = check_patch(m, p, err);
    if (st)
        return st;
    struct xf_plan plan;
    const struct xf_run whole = whole_run(p, p->clean);
    if ((st = xf_plan(m, &whole, &plan, err)))
        return st;
    // both runs' activations are held through every batch
    size_t total = xf_plan_bytes(&plan);
    if (total == SIZE_MAX || !size_mul(total, 2, &total))
        return attn_fail(err, ATTN_E_TOO_BIG, "clean",
                         "the activations of %zu tokens are too large", p->n);
    double work = 2.0 * xf_plan_flops(&plan);
    // the largest batch of each layer, and every run's work: a plan reads
    // no value of its start and is the same for any edits of one site
    static const float unread[1];
    const size_t per_layer = xf_patch_layer_runs(m, p);
    const size_t batch = xf_patch_batch(p);
    const size_t most = per_layer < batch ? per_layer : batch;
    size_t batch_bytes = 0;
    for (size_t l = 0; l < m->layers; l++) {
        struct xf_run run = batch_run(m, p, p->corrupted, NULL, l, most, NULL);
        run.n_edits = 0;
        run.start = unread;
        if ((st = xf_plan(m, &run, &plan, err)))
            return st;
        const size_t b = xf_plan_bytes(&plan);
        if (b == SIZE_MAX)
            return attn_fail(err, ATTN_E_TOO_BIG, "over",
                             "a batch of %zu patched runs is too large", most);
        batch_bytes = b > batch_bytes ? b : batch_bytes;
        work += xf_plan_flops(&plan) * (double)per_layer / (double)most;
    }
    if (!size_add_to(&total, batch_bytes) ||
        !size_add_to(&total, most * sizeof(struct xf_edit)) ||
        !size_add_to(&total, measure_floats(m, p, most) * sizeof(float)) ||
        !size_add_to(&total, xf_patch_runs(m, p) * sizeof(double)))
        return attn_fail(err, ATTN_E_TOO_BIG, "over",
                         "the patch's memory is too large");
    *bytes = total;
    *flops = work;
    return ATTN_OK;
}

/* ------------------------------------------------------------------ run */

static attn_status keep_run(const struct xf_model *m, const struct xf_patch *p,
                            const uint32_t *ids, const atomic_bool *cancel,
                            struct kept *out, struct measure *ms,
                            struct attn_error *err)
{
    struct xf_plan plan;
    const struct xf_run run = whole_run(p, ids);
    attn_status st = xf_plan(m, &run, &plan, err);
    if (!st)
        st = xf_forward(&plan, cancel, &out->r, err);
    if (!st)
        measure_rows(ms, m, &p->metric, out->r.last_rows, 1, &out->metric);
    return st;
}

void xf_patch_result_free(struct xf_patch_result *r)
{
    if (!r)
        return;
    free(r->patched);
    memset(r, 0, sizeof *r);
}

/* The batches of layer l: every patched run of it, batch at a time. */
static attn_status patch_layer(const struct xf_model *m,
                               const struct xf_patch *p,
                               const struct kept *base, const struct kept *src,
                               size_t l, const atomic_bool *cancel,
                               struct xf_edit *edits, struct measure *ms,
                               double *metrics, struct xf_patch_result *out,
                               size_t *done, struct attn_error *err)
{
    const size_t per_layer = xf_patch_layer_runs(m, p);
    const size_t batch = xf_patch_batch(p);
    const uint32_t *ids = p->noise ? p->clean : p->corrupted;
    for (size_t j0 = 0; j0 < per_layer; j0 += batch) {
        const size_t b_count = per_layer - j0 < batch ? per_layer - j0 : batch;
        for (size_t b = 0; b < b_count; b++)
            edits[b] = edit_of(m, p, src, l, j0 + b, b);
        struct xf_plan plan;
        struct xf_result r;
        const struct xf_run run = batch_run(m, p, ids, base, l, b_count, edits);
        attn_status st = xf_plan(m, &run, &plan, err);
        if (!st)
            st = xf_forward(&plan, cancel, &r, err);
        if (st)
            return st;
        measure_rows(ms, m, &p->metric, r.last_rows, b_count, metrics);
        for (size_t b = 0; b < b_count; b++)
            out->patched[run_index(m, p, l, j0 + b)] = metrics[b];
        xf_result_free(&r);
        *done += b_count;
        if (p->progress)
            p->progress(p->progress_ctx, *done, out->runs);
    }
    return ATTN_OK;
}

attn_status xf_patch_run(const struct xf_model *m, const struct xf_patch *p,
                         const atomic_bool *cancel, struct xf_patch_result *out,
                         struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    attn_status st = check_patch(m, p, err);
    if (st)
        return st;
    out->runs = xf_patch_runs(m, p);
    const size_t batch = xf_patch_batch(p);
    out->patched = malloc(out->runs * sizeof *out->patched);
    struct xf_edit *edits = malloc(batch * sizeof *edits);
    double *metrics = malloc(batch * sizeof *metrics);
    struct measure ms;
    const bool measuring = measure_init(&ms, m, p, batch);
    struct kept clean = {0}, corrupted = {0};
    if (!out->patched || !edits || !metrics || !measuring)
        st = attn_fail(err, ATTN_E_NOMEM, "over",
                       "out of memory for %zu patched runs", out->runs);
    if (!st)
        st = keep_run(m, p, p->clean, cancel, &clean, &ms, err);
    if (!st)
        st = keep_run(m, p, p->corrupted, cancel, &corrupted, &ms, err);
    const struct kept *base = p->noise ? &clean : &corrupted;
    const struct kept *src = p->noise ? &corrupted : &clean;
    size_t done = 0;
    // the same ids: every activation is the base run's own, and so is
    // every patched run
    const bool same = !memcmp(p->clean, p->corrupted, p->n * sizeof *p->clean);
    if (!st && same) {
        for (size_t i = 0; i < out->runs; i++)
            out->patched[i] = base->metric;
        if (p->progress)
            p->progress(p->progress_ctx, out->runs, out->runs);
    }
    for (size_t l = 0; l < m->layers && !st && !same; l++)
        st = patch_layer(m, p, base, src, l, cancel, edits, &ms, metrics, out,
                         &done, err);
    out->clean = clean.metric;
    out->corrupted = corrupted.metric;
    xf_result_free(&clean.r);
    xf_result_free(&corrupted.r);
    free(edits);
    free(metrics);
    measure_free(&ms);
    if (st)
        xf_patch_result_free(out);
    return st;
}

bool xf_patch_effect(const struct xf_patch_result *r, size_t i, double *effect)
{
    const double span = r->clean - r->corrupted;
    if (span == 0.0 || !isfinite(span) || !isfinite(r->patched[i]))
        return false;
    *effect = (r->patched[i] - r->corrupted) / span;
    return true;
}
