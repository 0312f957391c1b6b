/*
 * render.c - from an attention result to heatmap matrices, titles, labels
 * and text chunks; the drawing library (draw/heatmap.h) does the drawing,
 * in the request's format through the writers of base/image_format.h
 * (render_image_*(), which render_model.c shares), and
 * problem_from_draw() says what its failures mean to the client.
 */
#include "render.h"
#include "buf.h"
#include "heatmap.h"
#include "jsonnum.h"
#include "render_pool.h"

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

/* The texts of the image, in the order of the picture's texts[]. */
enum {
    TEXT_TITLE,
    TEXT_SOFTWARE,
    TEXT_TOKENS,
    TEXT_CONTEXT,
    TEXT_HEAD,
    TEXT_BATCH,
    TEXT_MIN,
    TEXT_MAX,
    TEXT_SCALE,
    TEXT_POOL,
    TEXT_POOL_SIZE,
    TEXT_COUNT
};

/* What the image shows, all of it known before anything is computed but
 * the values. Owns every pointer; picture_free() releases them. */
struct picture {
    size_t count, n, m;          /* matrices; queries and keys */
    struct heatmap_matrix *mats; /* [count]; values NULL until filled */
    char (*titles)[48];          /* [count] */
    char **rows, **cols;         /* [n], [m] labels */
    char *row_json, *col_json;
    char head_text[24], grid_title[96], batch_text[24];
    char lo_text[JSONNUM_MAX], hi_text[JSONNUM_MAX];
    struct heatmap_options opts;
    struct heatmap_text texts[TEXT_COUNT];
    struct render_pool pool; /* blocks, when the input is pooled */
};

static void picture_free(struct picture *p)
{
    render_pool_free(&p->pool);
    free(p->row_json);
    free(p->col_json);
    free_labels(p->rows, p->n);
    free_labels(p->cols, p->m);
    free(p->titles);
    free(p->mats);
    memset(p, 0, sizeof *p);
}

static bool picture_make(struct picture *p, const struct request *req,
                         size_t max_pixels, struct problem *pb)
{
    memset(p, 0, sizeof *p);
    const struct request_png *o = &req->png;
    const struct attn_config *c = &req->cfg;
    const size_t h = c->heads;
    p->n = c->n_query;
    p->m = c->n_keys;
    p->count = o->head_kind == HEAD_ALL ? h : 1;
    p->mats = calloc(p->count, sizeof *p->mats);
    p->titles = calloc(p->count, sizeof *p->titles);
    p->rows = make_labels(&req->input, p->n, c);
    p->cols = make_labels(c->cross ? &req->context : &req->input, p->m, c);
    /* the labels as text chunks, at most 16 MiB each */
    p->row_json = p->rows ? buf_json_strings((const char *const *)p->rows, p->n,
                                             (size_t)16 << 20)
                          : NULL;
    p->col_json = p->cols ? buf_json_strings((const char *const *)p->cols, p->m,
                                             (size_t)16 << 20)
                          : NULL;
    render_pool_plan(&p->pool, o, p->n, p->m);
    const bool pooled = p->pool.kind != HEATMAP_POOL_NONE;
    if (!p->mats || !p->titles || !p->row_json || !p->col_json ||
        !render_pool_make(&p->pool, (const char *const *)p->rows,
                          (const char *const *)p->cols, NULL))
        return problem_from_draw(
            pb, DRAW_E_NOMEM,
            "out of memory for titles, labels and text chunks");
    for (size_t k = 0; k < p->count; k++) {
        const size_t head = o->head_kind == HEAD_ONE ? o->head : k;
        if (o->head_kind == HEAD_MEAN) {
            snprintf(p->titles[k], sizeof p->titles[k], "mean of %zu head%s", h,
                     h == 1 ? "" : "s");
            snprintf(p->head_text, sizeof p->head_text, "mean");
        } else {
            snprintf(p->titles[k], sizeof p->titles[k], "head %zu of %zu", head,
                     h);
            snprintf(p->head_text, sizeof p->head_text, "%s",
                     o->head_kind == HEAD_ALL ? "all" : "");
            if (o->head_kind == HEAD_ONE)
                snprintf(p->head_text, sizeof p->head_text, "%zu", head);
        }
        p->mats[k].rows = p->pool.rows;
        p->mats[k].cols = p->pool.cols;
        p->mats[k].title = p->titles[k];
    }
    const bool tile = o->color_scale == SCALE_TILE;
    if (o->head_kind == HEAD_ALL)
        snprintf(p->grid_title, sizeof p->grid_title,
                 "attention weights, %zu head%s%s", h, h == 1 ? "" : "s",
                 tile && h > 1 ? "; each coloured to its own largest weight"
                               : "");
    snprintf(p->batch_text, sizeof p->batch_text, "%zu", o->batch);
    p->opts = (struct heatmap_options){
        .colormap = o->colormap,
        .cell = o->cell || !pooled ? o->cell : render_pool_cell(&p->pool),
        .labels = o->labels,
        .title = o->head_kind == HEAD_ALL ? p->grid_title : NULL,
        .row_labels =
            (const char *const *)(pooled ? p->pool.row_labels : p->rows),
        .col_labels =
            (const char *const *)(pooled ? p->pool.col_labels : p->cols),
        .max_pixels = max_pixels,
        .scale = tile ? HEATMAP_SCALE_TILE : HEATMAP_SCALE_SHARED,
        .note = pooled ? p->pool.note : NULL,
    };
    /* the values' texts are numbers, empty until they are known: they
     * cannot change whether the texts are accepted */
    const struct heatmap_text texts[TEXT_COUNT] = {
        [TEXT_TITLE] = {"Title", o->head_kind == HEAD_ALL ? p->grid_title
                                                          : p->titles[0]},
        [TEXT_SOFTWARE] = {"Software", "attnd"},
        [TEXT_TOKENS] = {"attnd:tokens", p->row_json},
        [TEXT_CONTEXT] = {"attnd:context_tokens", p->col_json},
        [TEXT_HEAD] = {"attnd:head", p->head_text},
        [TEXT_BATCH] = {"attnd:batch", p->batch_text},
        [TEXT_MIN] = {"attnd:min", p->lo_text},
        [TEXT_MAX] = {"attnd:max", p->hi_text},
        [TEXT_SCALE] = {"attnd:color_scale", tile ? "tile" : "shared"},
        [TEXT_POOL] = {"attnd:pool", p->pool.kind_text},
        [TEXT_POOL_SIZE] = {"attnd:pool_size", p->pool.size_text},
    };
    memcpy(p->texts, texts, sizeof texts);
    return true;
}

/* The values of sequence png.batch (pooled into blocks when the picture
 * is), and the smallest and largest shown. False when out of memory. */
static bool picture_fill(struct picture *p, const struct request *req,
                         const struct attn_result *res)
{
    const struct request_png *o = &req->png;
    const size_t h = res->heads, n = p->n, m = p->m, b = o->batch;
    const size_t shown = p->pool.rows * p->pool.cols;
    if (!render_pool_alloc(&p->pool, p->count))
        return false;
    float lo = 0.0f, hi = 0.0f;
    for (size_t k = 0; k < p->count; k++) {
        const size_t head = o->head_kind == HEAD_ONE ? o->head : k;
        const float *src = o->head_kind == HEAD_MEAN
                               ? res->mean_weights + b * n * m
                               : res->weights + (b * h + head) * n * m;
        if (p->pool.values) {
            float *dst = p->pool.values + k * shown;
            heatmap_pool_values(src, m, NULL, NULL, n, m, NULL, p->pool.k,
                                p->pool.kind, dst);
            src = dst;
        }
        p->mats[k].values = src;
        for (size_t e = 0; e < shown; e++) {
            const float v = src[e];
            if ((k == 0 && e == 0) || v < lo)
                lo = v;
            if ((k == 0 && e == 0) || v > hi)
                hi = v;
        }
    }
    jsonnum_format(lo, 0, p->lo_text);
    jsonnum_format(hi, 0, p->hi_text);
    return true;
}

/* The picture as the image writers take it. */
static struct image_picture picture_image(const struct picture *p)
{
    return (struct image_picture){p->mats, p->count, &p->opts, p->texts,
                                  TEXT_COUNT};
}

bool render_png_measure(struct request *req, struct problem *pb)
{
    struct picture p;
    bool ok = picture_make(&p, req, RENDER_MAX_PIXELS, pb);
    if (ok) {
        const struct image_picture image = picture_image(&p);
        /* attnd:min and attnd:max, empty until the values are known */
        ok = render_image_measure(req, &image, 2 * JSONNUM_MAX, pb);
    }
    picture_free(&p);
    return ok;
}

bool render_png(const struct request *req, const struct attn_result *res,
                size_t max_pixels, unsigned char **png, size_t *len,
                struct problem *pb)
{
    struct picture p;
    bool ok = picture_make(&p, req, max_pixels, pb);
    if (ok && !picture_fill(&p, req, res))
        ok = problem_from_draw(pb, DRAW_E_NOMEM,
                               "out of memory for the pooled weights");
    if (ok) {
        const struct image_picture image = picture_image(&p);
        ok = render_image_encode(req, &image, png, len, pb);
    }
    picture_free(&p);
    return ok;
}

size_t render_png_bytes(const struct request *req)
{
    const size_t matrices = req->png.head_kind == HEAD_ALL ? req->cfg.heads : 1;
    /* the image as its format holds it; labels and text chunks are copies
     * of the tokens; the pooled blocks and their labels */
    size_t tokens = 0;
    const struct request_input *ins[2] = {&req->input, &req->context};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < ins[k]->tokens.count; i++)
            tokens += 8 * strlen(ins[k]->tokens.text[i]) + 64;
    struct render_pool pool;
    render_pool_plan(&pool, &req->png, req->cfg.n_query, req->cfg.n_keys);
    return render_image_held(req) + render_pool_bytes(&pool, matrices) +
           matrices * 64 + tokens + ((size_t)1 << 20);
}

/* ------------------------------------------------------- the format */

bool render_image_measure(struct request *req, const struct image_picture *p,
                          size_t grow, struct problem *pb)
{
    const struct image_writer *w = &image_writers[req->png.format];
    char err[256] = "";
    const draw_status st =
        w->measure(p, grow, &req->png.width, &req->png.height, &req->png.bytes,
                   err, sizeof err);
    if (st == DRAW_OK)
        return true;
    /* an SVG's bytes are what the format costs: point at it */
    if (req->png.format == IMAGE_SVG && st == DRAW_E_TOO_BIG &&
        strstr(err, "SVG"))
        return problem_set(pb, 422, "/format",
                           "%s: ask a larger pool_size, pool=max, or "
                           "format=png",
                           err);
    return problem_from_draw(pb, st, err);
}

bool render_image_encode(const struct request *req,
                         const struct image_picture *p, unsigned char **out,
                         size_t *len, struct problem *pb)
{
    char err[256] = "";
    const draw_status st = image_writers[req->png.format].encode(
        p, req->png.bytes, out, len, err, sizeof err);
    return st == DRAW_OK || problem_from_draw(pb, st, err);
}

size_t render_image_held(const struct request *req)
{
    return image_writers[req->png.format].held(req->png.width, req->png.height,
                                               req->png.bytes);
}
