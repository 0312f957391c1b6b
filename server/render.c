/*
 * render.c - from an attention result to heatmap matrices, titles, labels
 * and text chunks; the drawing library (draw/heatmap.h) does the drawing,
 * and problem_from_draw() says what its failures mean to the client.
 */
#include "render.h"
#include "buf.h"
#include "heatmap.h"
#include "jsonnum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Labels for a sequence: its tokens, or "0", "1", ... for embeddings;
 * past its own tokens, the appended keys: "bias_k" when cfg has bias_kv,
 * then "zero". */
static char **make_labels(const struct request_input *in, size_t n,
                          const struct attn_config *cfg)
{
    char **labels = calloc(n ? n : 1, sizeof *labels);
    if (!labels)
        return NULL;
    const size_t own = n < in->n ? n : in->n;
    for (size_t i = 0; i < n; i++) {
        if (i >= own) {
            labels[i] = strdup(i == own && cfg->bias_kv ? "bias_k" : "zero");
        } else if (in->from_text) {
            labels[i] = strdup(in->tokens.text[i]);
        } else {
            labels[i] = malloc(24);
            if (labels[i])
                snprintf(labels[i], 24, "%zu", i);
        }
        if (!labels[i]) {
            for (size_t k = 0; k < i; k++)
                free(labels[k]);
            free(labels);
            return NULL;
        }
    }
    return labels;
}

static void free_labels(char **labels, size_t n)
{
    if (!labels)
        return;
    for (size_t i = 0; i < n; i++)
        free(labels[i]);
    free(labels);
}

static char *json_strings(char *const *items, size_t n)
{
    struct buf b;
    buf_init(&b, (size_t)16 << 20);
    bool ok = buf_append_str(&b, "[");
    for (size_t i = 0; ok && i < n; i++)
        ok = (!i || buf_append_str(&b, ",")) &&
             buf_append_json_string(&b, items[i]);
    ok = ok && buf_append_str(&b, "]");
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, NULL);
}

bool render_png(const struct request *req, const struct attn_result *res,
                size_t max_pixels, unsigned char **png, size_t *len,
                struct problem *pb)
{
    const struct request_png *o = &req->png;
    const size_t h = res->heads, n = res->n_query, m = res->n_keys;
    const size_t b = o->batch;
    const size_t n_mats = o->head_kind == HEAD_ALL ? h : 1;
    struct heatmap_matrix *mats = calloc(n_mats, sizeof *mats);
    char(*titles)[48] = calloc(n_mats, sizeof *titles);
    char **rows = make_labels(&req->input, n, &req->cfg);
    char **cols =
        make_labels(req->cfg.cross ? &req->context : &req->input, m, &req->cfg);
    bool ok = mats && titles && rows && cols;
    char head_text[24] = "";
    char grid_title[64] = "";
    for (size_t k = 0; ok && k < n_mats; k++) {
        const size_t head = o->head_kind == HEAD_ONE ? o->head : k;
        if (o->head_kind == HEAD_MEAN) {
            mats[k].values = res->mean_weights + b * n * m;
            snprintf(titles[k], sizeof titles[k], "mean of %zu head%s", h,
                     h == 1 ? "" : "s");
            snprintf(head_text, sizeof head_text, "mean");
        } else {
            mats[k].values = res->weights + (b * h + head) * n * m;
            snprintf(titles[k], sizeof titles[k], "head %zu of %zu", head, h);
            snprintf(head_text, sizeof head_text, "%s",
                     o->head_kind == HEAD_ALL ? "all" : "");
            if (o->head_kind == HEAD_ONE)
                snprintf(head_text, sizeof head_text, "%zu", head);
        }
        mats[k].rows = n;
        mats[k].cols = m;
        mats[k].title = titles[k];
    }
    float lo = 0.0f, hi = 0.0f;
    for (size_t k = 0; ok && k < n_mats; k++)
        for (size_t e = 0; e < n * m; e++) {
            const float v = mats[k].values[e];
            if ((k == 0 && e == 0) || v < lo)
                lo = v;
            if ((k == 0 && e == 0) || v > hi)
                hi = v;
        }
    if (o->head_kind == HEAD_ALL)
        snprintf(grid_title, sizeof grid_title, "attention weights, %zu head%s",
                 h, h == 1 ? "" : "s");
    char lo_text[JSONNUM_MAX], hi_text[JSONNUM_MAX], batch_text[24];
    jsonnum_format(lo, 0, lo_text);
    jsonnum_format(hi, 0, hi_text);
    snprintf(batch_text, sizeof batch_text, "%zu", b);
    char *row_json = ok ? json_strings(rows, n) : NULL;
    char *col_json = ok ? json_strings(cols, m) : NULL;
    ok = ok && row_json && col_json;
    if (ok) {
        const struct heatmap_options opts = {
            .colormap = o->colormap,
            .cell = o->cell,
            .labels = o->labels,
            .title = o->head_kind == HEAD_ALL ? grid_title : NULL,
            .row_labels = (const char *const *)rows,
            .col_labels = (const char *const *)cols,
            .max_pixels = max_pixels,
        };
        const struct heatmap_text texts[] = {
            {"Title", o->head_kind == HEAD_ALL ? grid_title : titles[0]},
            {"Software", "attnd"},
            {"attnd:tokens", row_json},
            {"attnd:context_tokens", col_json},
            {"attnd:head", head_text},
            {"attnd:batch", batch_text},
            {"attnd:min", lo_text},
            {"attnd:max", hi_text},
        };
        char err[256] = "";
        const draw_status st = heatmap_render_png(
            mats, n_mats, &opts, texts, sizeof texts / sizeof texts[0], png,
            len, err, sizeof err);
        if (st != DRAW_OK)
            ok = problem_from_draw(pb, st, err);
    } else {
        problem_from_draw(pb, DRAW_E_NOMEM,
                          "out of memory for titles, labels and text chunks");
    }
    free(row_json);
    free(col_json);
    free_labels(rows, n);
    free_labels(cols, m);
    free(titles);
    free(mats);
    return ok;
}

size_t render_png_bytes(const struct request *req, size_t max_pixels)
{
    const struct attn_config *c = &req->cfg;
    const size_t matrices = req->png.head_kind == HEAD_ALL ? c->heads : 1;
    const size_t n = c->n_query, m = c->n_keys, longer = n > m ? n : m;
    /* the cell heatmap.h describes: given, or large enough for 300 px on
     * the longer side, 1 to 48 */
    size_t cell = req->png.cell;
    if (!cell)
        cell = 300 / longer > 48 ? 48 : 300 / longer ? 300 / longer : 1;
    /* each matrix with room for titles, labels and the colorbar */
    const double pixels =
        (double)matrices * (double)(m * cell + 400) * (double)(n * cell + 400);
    const size_t canvas =
        pixels < (double)max_pixels ? (size_t)pixels : max_pixels;
    /* RGB canvas and a PNG no larger than it; labels and text chunks are
     * copies of the tokens */
    size_t tokens = 0;
    const struct request_input *ins[2] = {&req->input, &req->context};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < ins[k]->tokens.count; i++)
            tokens += 8 * strlen(ins[k]->tokens.text[i]) + 64;
    return canvas * 6 + matrices * 64 + tokens + ((size_t)1 << 20);
}
