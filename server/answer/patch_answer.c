/*
 * patch_answer.c - POST /patch's answer, as JSON or as a heatmap
 * (patch_answer.h).
 */
#include "patch_answer.h"
#include "buf.h"
#include "heatmap.h"
#include "jsonnum.h"
#include "models.h"
#include "render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the JSON */

static const char *direction_name(const struct patch_request *p)
{
    return p->patch.noise ? "noise" : "denoise";
}

static bool add_number(struct buf *t, double x, int precision)
{
    char v[JSONNUM_MAX];
    x += 0.0; /* -0, an effect of nothing, as 0 */
    const size_t len = jsonnum_format((float)x, precision, v);
    return buf_append(t, v, len);
}

static bool add_token(struct buf *t, const struct model *m, uint32_t id)
{
    const char *text = tok_token_text(&m->tokenizer, id);
    return text ? buf_append_json_string(t, text) : buf_append_str(t, "null");
}

/* {"tokens": [...], "token_ids": [...]} */
static bool add_input(struct buf *t, const struct model *m,
                      const struct tok_encoding *enc)
{
    bool ok = buf_append_str(t, "{\"tokens\":[");
    for (size_t i = 0; ok && i < enc->count; i++)
        ok = (!i || buf_append_str(t, ",")) && add_token(t, m, enc->ids[i]);
    ok = ok && buf_append_str(t, "],\"token_ids\":[");
    for (size_t i = 0; ok && i < enc->count; i++)
        ok = buf_printf(t, "%s%u", i ? "," : "", (unsigned)enc->ids[i]);
    return ok && buf_append_str(t, "]}");
}

static bool add_metric(struct buf *t, const struct patch_request *p,
                       const struct xf_patch_result *r, int precision)
{
    const struct model *m = p->entry->model;
    const struct xf_metric *mt = &p->patch.metric;
    bool ok;
    if (mt->kind == XF_METRIC_LOGPROB)
        ok = buf_printf(t,
                        "{\"kind\":\"logprob\",\"target\":%u,"
                        "\"target_text\":",
                        (unsigned)mt->correct) &&
             add_token(t, m, mt->correct);
    else
        ok = buf_printf(t,
                        "{\"kind\":\"logit_diff\",\"correct\":%u,"
                        "\"correct_text\":",
                        (unsigned)mt->correct) &&
             add_token(t, m, mt->correct) &&
             buf_printf(t, ",\"incorrect\":%u,\"incorrect_text\":",
                        (unsigned)mt->incorrect) &&
             add_token(t, m, mt->incorrect);
    return ok && buf_append_str(t, ",\"clean\":") &&
           add_number(t, r->clean, precision) &&
           buf_append_str(t, ",\"corrupted\":") &&
           add_number(t, r->corrupted, precision) && buf_append_str(t, "}");
}

/* The effects of runs i0 on as nested arrays of the given dimensions;
 * null where an effect cannot be measured. */
static bool add_effects(struct buf *t, const struct xf_patch_result *r,
                        size_t i0, const size_t *dims, int ndim, int precision)
{
    size_t count = 1;
    for (int k = 0; k < ndim; k++)
        count *= dims[k];
    bool ok = true;
    for (size_t i = 0; ok && i < count; i++) {
        // open a bracket for each dimension that starts here
        size_t span = count;
        for (int k = 0; ok && k < ndim; k++) {
            if (i % span == 0)
                ok = buf_append_str(t, "[");
            span /= dims[k];
        }
        double e;
        ok = ok && (xf_patch_effect(r, i0 + i, &e) ? add_number(t, e, precision)
                                                   : buf_append_str(t, "null"));
        // close one for each that ends here, or a comma
        span = 1;
        for (int k = ndim - 1; ok && k >= 0; k--) {
            span *= dims[k];
            if ((i + 1) % span)
                break;
            ok = buf_append_str(t, "]");
        }
        if (ok && i + 1 < count)
            ok = buf_append_str(t, ",");
    }
    return ok;
}

/* Whether any effect can be measured: the two runs' metrics differ. */
static bool measurable(const struct xf_patch_result *r)
{
    const double span = r->clean - r->corrupted;
    return span != 0.0 && isfinite(span);
}

char *patch_answer_json(const struct patch_request *p,
                        const struct xf_patch_result *r, size_t *len)
{
    const struct model *m = p->entry->model;
    const int precision = (int)p->precision;
    const size_t L = m->xf.layers, h = m->xf.heads, n = p->patch.n;
    struct buf t;
    buf_init(&t, patch_answer_bytes(p));
    bool ok =
        buf_append_str(&t, "{\"model\":") &&
        buf_append_json_string(&t, m->name) &&
        buf_printf(&t,
                   ",\"over\":\"%s\",\"direction\":\"%s\",\"runs\":%zu,"
                   "\"metric\":",
                   xf_patch_over_name((int)p->patch.over), direction_name(p),
                   r->runs) &&
        add_metric(&t, p, r, precision) && buf_append_str(&t, ",\"clean\":") &&
        add_input(&t, m, &p->clean) && buf_append_str(&t, ",\"corrupted\":") &&
        add_input(&t, m, &p->corrupted) && buf_append_str(&t, ",\"effects\":");
    const bool some = measurable(r);
    if (ok && !some) {
        ok = buf_append_str(&t, "null");
    } else if (ok) {
        switch (p->patch.over) {
        case XF_PATCH_HEADS:
            ok = add_effects(&t, r, 0, (size_t[]){L, h}, 2, precision);
            break;
        case XF_PATCH_HEADS_POSITIONS:
            ok = add_effects(&t, r, 0, (size_t[]){L, h, n}, 3, precision);
            break;
        case XF_PATCH_RESIDUAL:
            ok = add_effects(&t, r, 0, (size_t[]){L, n}, 2, precision);
            break;
        case XF_PATCH_LAYERS:
            ok = buf_append_str(&t, "{\"attn\":") &&
                 add_effects(&t, r, 0, (size_t[]){L, n}, 2, precision) &&
                 buf_append_str(&t, ",\"mlp\":") &&
                 add_effects(&t, r, L * n, (size_t[]){L, n}, 2, precision) &&
                 buf_append_str(&t, "}");
            break;
        }
    }
    ok = ok && buf_append_str(&t, ",\"warnings\":[");
    if (ok && !some)
        ok = buf_append_str(
            &t, "{\"code\":\"no_effect\",\"detail\":\"clean and corrupted give "
                "the same metric, so no effect can be normalised by their "
                "difference: effects are null. Choose tokens whose scores the "
                "corruption moves.\"}");
    ok = ok && buf_append_str(&t, "]}\n");
    if (!ok) {
        buf_free(&t);
        return NULL;
    }
    return buf_take(&t, len);
}

size_t patch_answer_bytes(const struct patch_request *p)
{
    const struct model *m = p->entry->model;
    // an effect is a number and a comma; each token's text escaped and
    // its id; the rest a few hundred bytes
    const size_t per_token = 6 * m->longest_text + 16;
    return p->runs * (JSONNUM_MAX + 4) + 2 * p->patch.n * per_token +
           3 * per_token + 4096;
}

/* ------------------------------------------------------------ the image */

/* What the image shows: its matrices, their labels and options. */
struct patch_picture {
    struct heatmap_matrix mats[2];
    size_t count;
    struct heatmap_options opts;
    char **rows, **cols; /* owned labels */
    size_t n_rows, n_cols;
    float *values; /* owned: the effects, 0 where undefined */
    char title[160], note[200];
};

static void picture_free(struct patch_picture *pic)
{
    for (size_t i = 0; pic->rows && i < pic->n_rows; i++)
        free(pic->rows[i]);
    for (size_t i = 0; pic->cols && i < pic->n_cols; i++)
        free(pic->cols[i]);
    free(pic->rows);
    free(pic->cols);
    free(pic->values);
    memset(pic, 0, sizeof *pic);
}

/* Position i's label: its clean token, and the corrupted one after it
 * where the two differ. */
static char *position_label(const struct patch_request *p, size_t i)
{
    const struct model *m = p->entry->model;
    const char *a = tok_token_text(&m->tokenizer, p->clean.ids[i]);
    const char *b = tok_token_text(&m->tokenizer, p->corrupted.ids[i]);
    a = a ? a : "?";
    b = b ? b : "?";
    char text[160];
    if (p->clean.ids[i] == p->corrupted.ids[i])
        snprintf(text, sizeof text, "%.60s", a);
    else
        snprintf(text, sizeof text, "%.60s / %.60s", a, b);
    return strdup(text);
}

static bool picture_labels(struct patch_picture *pic,
                           const struct patch_request *p)
{
    const struct model *m = p->entry->model;
    const size_t L = m->xf.layers, h = m->xf.heads, n = p->patch.n;
    const bool by_head = p->patch.over == XF_PATCH_HEADS_POSITIONS;
    pic->n_rows = by_head ? L * h : L;
    pic->n_cols = p->patch.over == XF_PATCH_HEADS ? h : n;
    pic->rows = calloc(pic->n_rows, sizeof *pic->rows);
    pic->cols = calloc(pic->n_cols, sizeof *pic->cols);
    if (!pic->rows || !pic->cols)
        return false;
    char text[64];
    for (size_t i = 0; i < pic->n_rows; i++) {
        if (by_head)
            snprintf(text, sizeof text, "L%zu H%zu", i / h, i % h);
        else
            snprintf(text, sizeof text, "layer %zu", i);
        if (!(pic->rows[i] = strdup(text)))
            return false;
    }
    for (size_t j = 0; j < pic->n_cols; j++) {
        if (p->patch.over == XF_PATCH_HEADS) {
            snprintf(text, sizeof text, "%zu", j);
            pic->cols[j] = strdup(text);
        } else {
            pic->cols[j] = position_label(p, j);
        }
        if (!pic->cols[j])
            return false;
    }
    return true;
}

/* The picture of p, its values from r (NULL: measured only). */
static bool picture_make(struct patch_picture *pic,
                         const struct patch_request *p,
                         const struct xf_patch_result *r)
{
    memset(pic, 0, sizeof *pic);
    const struct model *m = p->entry->model;
    if (!picture_labels(pic, p))
        return false;
    const bool layers = p->patch.over == XF_PATCH_LAYERS;
    pic->count = layers ? 2 : 1;
    const size_t per = pic->n_rows * pic->n_cols;
    if (r) {
        pic->values = malloc(per * pic->count * sizeof *pic->values);
        if (!pic->values)
            return false;
        for (size_t i = 0; i < per * pic->count; i++) {
            double e;
            pic->values[i] = xf_patch_effect(r, i, &e) ? (float)e : 0.0f;
        }
    }
    static const char *const parts[2] = {"attention output", "MLP output"};
    for (size_t k = 0; k < pic->count; k++)
        pic->mats[k] = (struct heatmap_matrix){
            .values = pic->values ? pic->values + k * per : NULL,
            .rows = pic->n_rows,
            .cols = pic->n_cols,
            .title = layers ? parts[k] : NULL};
    snprintf(pic->title, sizeof pic->title,
             "%s: patching %s (%s), effect on %s", m->name,
             xf_patch_over_name((int)p->patch.over), direction_name(p),
             p->patch.metric.kind == XF_METRIC_LOGPROB ? "log-probability"
                                                       : "logit difference");
    if (r && !measurable(r))
        snprintf(pic->note, sizeof pic->note,
                 "clean and corrupted give the same metric: no effect can be "
                 "measured");
    pic->opts =
        (struct heatmap_options){.colormap = HEATMAP_DIVERGING,
                                 .scale = HEATMAP_SCALE_SYMMETRIC,
                                 .cell = p->cell,
                                 .labels = p->labels,
                                 .title = pic->title,
                                 .row_labels = (const char *const *)pic->rows,
                                 .col_labels = (const char *const *)pic->cols,
                                 .max_pixels = RENDER_MAX_PIXELS,
                                 .grid_cols = pic->count,
                                 .note = pic->note[0] ? pic->note : NULL};
    // a single matrix's title is the image's
    if (pic->count == 1)
        pic->mats[0].title = pic->title;
    return true;
}

draw_status patch_answer_measure(const struct patch_request *p, size_t *bytes,
                                 char *err, size_t err_len)
{
    struct patch_picture pic;
    if (!picture_make(&pic, p, NULL)) {
        picture_free(&pic);
        snprintf(err, err_len, "out of memory for the image's labels");
        return DRAW_E_NOMEM;
    }
    int width = 0, height = 0;
    size_t bound = 0;
    // the note a result may add: room for it, whatever it says
    pic.opts.note = "clean and corrupted give the same metric: no effect can "
                    "be measured";
    const struct image_writer *w = &image_writers[p->format];
    const struct image_picture image = {pic.mats, pic.count, &pic.opts, NULL,
                                        0};
    const draw_status st =
        w->measure(&image, 0, &width, &height, &bound, err, err_len);
    *bytes = w->held(width, height, bound) + (pic.n_rows + pic.n_cols) * 200 +
             ((size_t)1 << 20);
    picture_free(&pic);
    return st;
}

draw_status patch_answer_image(const struct patch_request *p,
                               const struct xf_patch_result *r,
                               unsigned char **out, size_t *len, char *err,
                               size_t err_len)
{
    struct patch_picture pic;
    *out = NULL;
    if (!picture_make(&pic, p, r)) {
        picture_free(&pic);
        snprintf(err, err_len, "out of memory for the image");
        return DRAW_E_NOMEM;
    }
    // measured again with the note this result has, for the bound
    const struct image_writer *w = &image_writers[p->format];
    const struct image_picture image = {pic.mats, pic.count, &pic.opts, NULL,
                                        0};
    int width, height;
    size_t bound = 0;
    draw_status st =
        w->measure(&image, 0, &width, &height, &bound, err, err_len);
    if (st == DRAW_OK)
        st = w->encode(&image, bound, out, len, err, err_len);
    picture_free(&pic);
    return st;
}
