/*
 * render_model.c - the PNG answer of a request on a loaded model: one
 * layer's heads (one, their mean, or all as a grid), the model view
 * (every layer x head as small tiles, a row per layer, as BertViz's model
 * view), or the attention rollout; the wordpieces label the axes.
 */
#include "buf.h"
#include "heatmap.h"
#include "jsonnum.h"
#include "models.h"
#include "render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tiles of the model view: the matrix about this many pixels on a side
 * when the client gives no cell, in cells of 1 to MODEL_VIEW_MAX_CELL. */
#define MODEL_VIEW_SIDE 96
#define MODEL_VIEW_MAX_CELL 12

static unsigned model_view_cell(const struct request *req)
{
    if (req->png.cell)
        return req->png.cell;
    const size_t n = req->model.run.n ? req->model.run.n : 1;
    const size_t cell = (MODEL_VIEW_SIDE + n - 1) / n;
    return cell > MODEL_VIEW_MAX_CELL ? MODEL_VIEW_MAX_CELL : (unsigned)cell;
}

/* The panels of the image, their count. */
static size_t panel_count(const struct request *req)
{
    const struct bert_model *b = &req->model.entry->model->bert;
    switch (req->png.view) {
    case VIEW_MODEL: return b->layers * b->heads;
    case VIEW_ROLLOUT: return 1;
    default: return req->png.head_kind == HEAD_ALL ? b->heads : 1;
    }
}

static char *json_tokens(const struct model *m, const struct bert_encoding *e)
{
    struct buf b;
    buf_init(&b, (size_t)16 << 20);
    bool ok = buf_append_str(&b, "[");
    for (size_t i = 0; ok && i < e->count; i++)
        ok = (!i || buf_append_str(&b, ",")) &&
             buf_append_json_string(&b, bert_vocab_token(m->vocab, e->ids[i]));
    ok = ok && buf_append_str(&b, "]");
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, NULL);
}

bool render_model_png(const struct request *req, const struct bert_result *res,
                      size_t max_pixels, unsigned char **png, size_t *len,
                      struct problem *pb)
{
    const struct request_png *o = &req->png;
    const struct model *m = req->model.entry->model;
    const struct bert_encoding *enc = &req->model.enc;
    const size_t n = res->n, h = res->heads, count = panel_count(req);
    struct heatmap_matrix *mats = calloc(count, sizeof *mats);
    char(*titles)[48] = calloc(count, sizeof *titles);
    const char **labels = calloc(n, sizeof *labels);
    char *tokens_json = json_tokens(m, enc);
    bool ok = mats && titles && labels && tokens_json;
    for (size_t i = 0; ok && i < n; i++)
        labels[i] = bert_vocab_token(m->vocab, enc->ids[i]);
    char title[160], head_text[24] = "all", layer_text[24] = "all";
    const char *view = o->view == VIEW_MODEL     ? "model"
                       : o->view == VIEW_ROLLOUT ? "rollout"
                                                 : "heads";
    if (req->model.run.layer != BERT_ALL_LAYERS)
        snprintf(layer_text, sizeof layer_text, "%zu", req->model.run.layer);
    for (size_t k = 0; ok && k < count; k++) {
        mats[k].rows = mats[k].cols = n;
        mats[k].title = titles[k];
        if (o->view == VIEW_ROLLOUT) {
            mats[k].values = res->rollout;
            snprintf(titles[k], sizeof titles[k], "rollout");
        } else if (o->view == VIEW_MODEL) {
            mats[k].values = res->weights + k * n * n;
            snprintf(titles[k], sizeof titles[k], "L%zu H%zu", k / h, k % h);
        } else if (o->head_kind == HEAD_MEAN) {
            mats[k].values = res->mean_weights;
            snprintf(titles[k], sizeof titles[k], "mean of %zu heads", h);
            snprintf(head_text, sizeof head_text, "mean");
        } else {
            const size_t head = o->head_kind == HEAD_ONE ? o->head : k;
            mats[k].values = res->weights + head * n * n;
            snprintf(titles[k], sizeof titles[k], "head %zu of %zu", head, h);
            if (o->head_kind == HEAD_ONE)
                snprintf(head_text, sizeof head_text, "%zu", head);
        }
    }
    if (o->view == VIEW_MODEL)
        snprintf(title, sizeof title,
                 "%s: attention of %zu layers (rows) x %zu heads", m->name,
                 res->layers, h);
    else if (o->view == VIEW_ROLLOUT)
        snprintf(title, sizeof title, "%s: attention rollout over %zu layers",
                 m->name, res->layers);
    else
        snprintf(title, sizeof title, "%s: layer %zu, %s", m->name,
                 req->model.run.layer, count > 1 ? "every head" : titles[0]);
    float lo = 0.0f, hi = 0.0f;
    for (size_t k = 0; ok && k < count; k++)
        for (size_t e = 0; e < n * n; e++) {
            const float v = mats[k].values[e];
            if ((k == 0 && e == 0) || v < lo)
                lo = v;
            if ((k == 0 && e == 0) || v > hi)
                hi = v;
        }
    char lo_text[JSONNUM_MAX], hi_text[JSONNUM_MAX];
    jsonnum_format(lo, 0, lo_text);
    jsonnum_format(hi, 0, hi_text);
    if (ok) {
        const struct heatmap_options opts = {
            .colormap = o->colormap,
            .cell = o->view == VIEW_MODEL ? model_view_cell(req) : o->cell,
            .labels = o->labels,
            .title = count > 1 ? title : NULL,
            .row_labels = labels,
            .col_labels = labels,
            .max_pixels = max_pixels,
            .grid_cols = o->view == VIEW_MODEL ? h : 0,
        };
        const struct heatmap_text texts[] = {
            {"Title", title},
            {"Software", "attnd"},
            {"attnd:model", m->name},
            {"attnd:view", view},
            {"attnd:layer", layer_text},
            {"attnd:head", head_text},
            {"attnd:tokens", tokens_json},
            {"attnd:min", lo_text},
            {"attnd:max", hi_text},
        };
        char err[256] = "";
        const draw_status st = heatmap_render_png(
            mats, count, &opts, texts, sizeof texts / sizeof texts[0], png, len,
            err, sizeof err);
        if (st != DRAW_OK)
            ok = problem_from_draw(pb, st, err);
    } else {
        problem_from_draw(pb, DRAW_E_NOMEM,
                          "out of memory for titles, labels and text chunks");
    }
    free(tokens_json);
    free(labels);
    free(titles);
    free(mats);
    return ok;
}

size_t render_model_png_bytes(const struct request *req, size_t max_pixels)
{
    const size_t panels = panel_count(req);
    const size_t n = req->model.run.n ? req->model.run.n : 1;
    size_t cell =
        req->png.view == VIEW_MODEL ? model_view_cell(req) : req->png.cell;
    if (!cell) /* heatmap.h's automatic cell: 300 px on a side, 1 to 48 */
        cell = (300 + n - 1) / n > 48 ? 48 : (300 + n - 1) / n;
    const double pixels =
        (double)panels * (double)(n * cell + 400) * (double)(n * cell + 400);
    const size_t canvas =
        pixels < (double)max_pixels ? (size_t)pixels : max_pixels;
    /* RGB canvas and a PNG no larger than it; labels, titles and the
     * tokens' text chunk */
    const struct model *m = req->model.entry->model;
    size_t tokens = 0;
    for (size_t i = 0; i < req->model.enc.count; i++)
        tokens +=
            8 * strlen(bert_vocab_token(m->vocab, req->model.enc.ids[i])) + 64;
    return canvas * 6 + panels * 96 + tokens + ((size_t)1 << 20);
}
