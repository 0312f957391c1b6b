/*
 * render_model.c - the image answer of a request on a loaded model: one
 * layer's heads (one, their mean, or all as a grid), the model view
 * (every layer x head as small tiles, a row per layer, as BertViz's model
 * view), or the attention rollout; the wordpieces label the axes, with or
 * without the [CLS] and [SEP] the tokenizer added.
 *
 * The picture (panels, titles, labels, options, text chunks) is made from
 * the request alone, so that it is measured when the answer is planned
 * and drawn, the same, once the encoder has run; render.c measures and
 * encodes it in the request's format.
 */
#include "buf.h"
#include "heatmap.h"
#include "jsonnum.h"
#include "models.h"
#include "render.h"
#include "render_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tiles of the model view: the matrix about this many pixels on a side
 * when the client gives no cell, in cells of 1 to MODEL_VIEW_MAX_CELL. */
#define MODEL_VIEW_SIDE 96
#define MODEL_VIEW_MAX_CELL 12

/* The text chunks of a model's image. */
enum {
    TEXT_TITLE,
    TEXT_SOFTWARE,
    TEXT_MODEL,
    TEXT_VIEW,
    TEXT_LAYER,
    TEXT_HEAD,
    TEXT_SPECIAL,
    TEXT_TOKENS,
    TEXT_SCALE,
    TEXT_MIN,
    TEXT_MAX,
    TEXT_POOL,
    TEXT_POOL_SIZE,
    TEXT_TILE_MAX, /* with a scale per tile only */
    TEXT_COUNT
};

/* What the image shows, all of it known before the encoder runs but the
 * values. Owns every pointer; picture_free() releases them. */
struct picture {
    size_t count; /* panels */
    size_t n;     /* wordpieces shown, of enc->count */
    size_t *at;   /* [n] the shown wordpieces' positions in the encoding */
    struct heatmap_matrix *mats; /* [count]; values NULL until filled */
    char (*titles)[48];          /* [count] */
    const char **labels;         /* [n], the tokens' texts */
    char *tokens_json;           /* the shown wordpieces as a JSON array */
    float *cut;          /* [count][n][n]: the shown rows and columns, when the
                            special tokens are hidden; else NULL */
    char *tile_max_json; /* each panel's largest weight, with a scale per
                            tile */
    /* A causal model's cells no query may attend: [n_masks][n][n], one
     * mask, or in the model view of layers whose windows differ one per
     * window; else NULL. mask_of [layers]: layer l's mask, then. */
    unsigned char *not_allowed;
    size_t n_masks, *mask_of, heads;
    unsigned char *pooled_masks;       /* [n_masks][blocks] when pooled */
    const unsigned char **panel_masks; /* [count] each panel's layer's
                                          mask, when they differ */
    char title[160], layer_text[24], head_text[24];
    char lo_text[JSONNUM_MAX], hi_text[JSONNUM_MAX];
    struct heatmap_options opts;
    struct heatmap_text texts[TEXT_COUNT];
    size_t n_texts;
    struct render_pool pool; /* blocks, when the input is pooled */
};

static void picture_free(struct picture *p)
{
    render_pool_free(&p->pool);
    free(p->at);
    free(p->mats);
    free(p->titles);
    free(p->labels);
    free(p->tokens_json);
    free(p->cut);
    free(p->tile_max_json);
    free(p->not_allowed);
    free(p->mask_of);
    free(p->pooled_masks);
    free(p->panel_masks);
    memset(p, 0, sizeof *p);
}

static unsigned model_view_cell(const struct request *req, size_t n)
{
    if (req->png.cell)
        return req->png.cell;
    n = n ? n : 1;
    const size_t cell = (MODEL_VIEW_SIDE + n - 1) / n;
    return cell > MODEL_VIEW_MAX_CELL ? MODEL_VIEW_MAX_CELL : (unsigned)cell;
}

/* The panels of the image, their count. */
static size_t panel_count(const struct request *req)
{
    const struct xf_model *b = &req->model.entry->model->xf;
    switch (req->png.view) {
    case VIEW_MODEL: return b->layers * b->heads;
    case VIEW_ROLLOUT: return 1;
    default: return req->png.head_kind == HEAD_ALL ? b->heads : 1;
    }
}

/* The shown wordpieces: every one, or with special=hide all but those the
 * tokenizer added; a 422 when that leaves none. */
static bool picture_positions(struct picture *p, const struct request *req,
                              struct problem *pb)
{
    const struct tok_encoding *enc = &req->model.enc;
    const bool hide = req->png.special == SPECIAL_HIDE;
    p->at = malloc((enc->count ? enc->count : 1) * sizeof *p->at);
    if (!p->at)
        return problem_from_draw(pb, DRAW_E_NOMEM,
                                 "out of memory for the wordpieces");
    p->n = 0;
    for (size_t i = 0; i < enc->count; i++)
        if (!hide || !enc->added[i])
            p->at[p->n++] = i;
    if (!p->n)
        return problem_set(pb, 422, "/special",
                           "special=hide leaves nothing to draw: the input "
                           "is only the %zu token%s the tokenizer added "
                           "(%s); give a sentence, or special=show",
                           enc->count, enc->count == 1 ? "" : "s",
                           req->model.entry->model->xf.arch.token_types
                               ? "[CLS] and [SEP]"
                               : "its BOS");
    return true;
}

/* The first layer with layer l's window: the model view draws one mask
 * per window, made at the first layer that has it. */
static size_t first_of_window(const struct model *m, size_t l)
{
    const size_t window = model_window(m, l);
    size_t at = 0;
    while (model_window(m, at) != window)
        at++;
    return at;
}

/* The masks of a causal model's picture: one, but in the model view of
 * layers whose windows differ (Gemma 2's and 3's sliding and global
 * layers), one per window, each tile hatched with its own layer's. */
static size_t picture_mask_count(const struct request *req,
                                 const struct model *m)
{
    if (!m->xf.arch.causal)
        return 0;
    if (req->png.view != VIEW_MODEL || model_window(m, XF_ALL_LAYERS) ||
        !model_widest_window(m))
        return 1;
    size_t count = 0;
    for (size_t l = 0; l < m->xf.layers; l++)
        count += first_of_window(m, l) == l;
    return count;
}

/* The cells no query may attend under window (0: none), between the shown
 * tokens' positions: a key after the query, and one the window leaves
 * out. out: [n][n]. */
static void mask_fill(const struct picture *p, size_t window,
                      unsigned char *out)
{
    const size_t n = p->n;
    for (size_t r = 0; r < n; r++)
        for (size_t k = 0; k < n; k++) {
            const size_t i = p->at[r], j = p->at[k];
            out[r * n + k] = j > i || (window && j + window <= i);
        }
}

/* A causal model's cells no query may attend: in the rollout (whose paths
 * reach past any window) the later keys alone; in one layer's heads, those
 * and the keys the layer's window leaves out; in the model view the same
 * for each layer, one mask shared when the layers' windows are. */
static bool picture_not_allowed(struct picture *p, const struct request *req,
                                const struct model *m)
{
    p->n_masks = picture_mask_count(req, m);
    if (!p->n_masks)
        return true;
    const size_t nn = p->n * p->n;
    p->not_allowed = malloc(nn ? p->n_masks * nn : 1);
    if (!p->not_allowed)
        return false;
    if (p->n_masks == 1) {
        mask_fill(p,
                  req->png.view == VIEW_ROLLOUT
                      ? 0
                      : model_window(m, req->model.run.layer),
                  p->not_allowed);
        return true;
    }
    p->mask_of = malloc(m->xf.layers * sizeof *p->mask_of);
    if (!p->mask_of)
        return false;
    size_t made = 0;
    for (size_t l = 0; l < m->xf.layers; l++) {
        const size_t first = first_of_window(m, l);
        if (first < l) {
            p->mask_of[l] = p->mask_of[first];
            continue;
        }
        p->mask_of[l] = made;
        mask_fill(p, model_window(m, l), p->not_allowed + made++ * nn);
    }
    return true;
}

/* Panel k's mask over the shown tokens: its layer's in a model view of
 * several masks, else the one. */
static const unsigned char *panel_mask(const struct picture *p, size_t k)
{
    if (p->n_masks < 2)
        return p->not_allowed;
    return p->not_allowed + p->mask_of[k / p->heads] * p->n * p->n;
}

/* With masks that differ, each panel's as it is drawn: its layer's, in
 * blocks when the picture is pooled. */
static bool picture_panel_masks(struct picture *p)
{
    if (p->n_masks < 2)
        return true;
    const size_t nn = p->n * p->n;
    const unsigned char *masks = p->not_allowed;
    size_t side = nn;
    if (p->pool.kind != HEATMAP_POOL_NONE) {
        side = p->pool.rows * p->pool.cols;
        p->pooled_masks = malloc(p->n_masks * side);
        if (!p->pooled_masks)
            return false;
        for (size_t e = 0; e < p->n_masks; e++)
            heatmap_pool_mask(p->not_allowed + e * nn, p->n, p->n, p->pool.k,
                              p->pooled_masks + e * side);
        masks = p->pooled_masks;
    }
    p->panel_masks = malloc(p->count * sizeof *p->panel_masks);
    if (!p->panel_masks)
        return false;
    for (size_t k = 0; k < p->count; k++)
        p->panel_masks[k] = masks + p->mask_of[k / p->heads] * side;
    return true;
}

/* Everything but the values, from the request alone. */
static bool picture_make(struct picture *p, const struct request *req,
                         size_t max_pixels, struct problem *pb)
{
    memset(p, 0, sizeof *p);
    const struct request_png *o = &req->png;
    const struct model *m = req->model.entry->model;
    const size_t h = m->xf.heads;
    if (!picture_positions(p, req, pb))
        return false;
    const size_t n = p->n;
    p->count = panel_count(req);
    p->heads = h;
    p->mats = calloc(p->count, sizeof *p->mats);
    p->titles = calloc(p->count, sizeof *p->titles);
    p->labels = calloc(n, sizeof *p->labels);
    for (size_t i = 0; p->labels && i < n; i++)
        p->labels[i] =
            tok_token_text(&m->tokenizer, req->model.enc.ids[p->at[i]]);
    /* the shown wordpieces as a text chunk, at most 16 MiB */
    p->tokens_json =
        p->labels ? buf_json_strings(p->labels, n, (size_t)16 << 20) : NULL;
    if (!p->mats || !p->titles || !p->labels || !p->tokens_json)
        return problem_from_draw(
            pb, DRAW_E_NOMEM,
            "out of memory for titles, labels and text chunks");
    if (!picture_not_allowed(p, req, m))
        return problem_from_draw(pb, DRAW_E_NOMEM,
                                 "out of memory for the causal mask");
    render_pool_plan(&p->pool, o, n, n);
    const bool pooled = p->pool.kind != HEATMAP_POOL_NONE;
    if (!render_pool_make(&p->pool, p->labels, p->labels,
                          p->n_masks < 2 ? p->not_allowed : NULL) ||
        !picture_panel_masks(p))
        return problem_from_draw(pb, DRAW_E_NOMEM,
                                 "out of memory for the pooled blocks");
    snprintf(p->head_text, sizeof p->head_text, "all");
    snprintf(p->layer_text, sizeof p->layer_text, "all");
    if (req->model.run.layer != XF_ALL_LAYERS)
        snprintf(p->layer_text, sizeof p->layer_text, "%zu",
                 req->model.run.layer);
    for (size_t k = 0; k < p->count; k++) {
        p->mats[k].rows = p->pool.rows;
        p->mats[k].cols = p->pool.cols;
        p->mats[k].title = p->titles[k];
        if (o->view == VIEW_ROLLOUT) {
            snprintf(p->titles[k], sizeof p->titles[k], "rollout");
        } else if (o->view == VIEW_MODEL) {
            snprintf(p->titles[k], sizeof p->titles[k], "L%zu H%zu", k / h,
                     k % h);
        } else if (o->head_kind == HEAD_MEAN) {
            snprintf(p->titles[k], sizeof p->titles[k], "mean of %zu heads", h);
            snprintf(p->head_text, sizeof p->head_text, "mean");
        } else {
            const size_t head = o->head_kind == HEAD_ONE ? o->head : k;
            snprintf(p->titles[k], sizeof p->titles[k], "head %zu of %zu", head,
                     h);
            if (o->head_kind == HEAD_ONE)
                snprintf(p->head_text, sizeof p->head_text, "%zu", head);
        }
    }
    const bool tile = o->color_scale == SCALE_TILE ||
                      (o->color_scale == SCALE_AUTO && o->view == VIEW_MODEL);
    /* the title says what the colours mean when each tile has its own */
    const char *scaled = tile && p->count > 1
                             ? "; each tile coloured to its own largest weight"
                             : "";
    if (o->view == VIEW_MODEL)
        snprintf(p->title, sizeof p->title,
                 "%s: attention of %zu layers (rows) x %zu heads%s", m->name,
                 m->xf.layers, h, scaled);
    else if (o->view == VIEW_ROLLOUT)
        snprintf(p->title, sizeof p->title,
                 "%s: attention rollout over %zu layers", m->name,
                 m->xf.layers);
    else
        snprintf(p->title, sizeof p->title, "%s: layer %zu, %s%s", m->name,
                 req->model.run.layer,
                 p->count > 1 ? "every head" : p->titles[0], scaled);
    p->opts = (struct heatmap_options){
        .colormap = o->colormap,
        .cell = o->view == VIEW_MODEL ? model_view_cell(req, p->pool.rows)
                : o->cell || !pooled  ? o->cell
                                      : render_pool_cell(&p->pool),
        .labels = o->labels,
        .title = p->count > 1 ? p->title : NULL,
        .row_labels =
            pooled ? (const char *const *)p->pool.row_labels : p->labels,
        .col_labels =
            pooled ? (const char *const *)p->pool.col_labels : p->labels,
        .max_pixels = max_pixels,
        .grid_cols = o->view == VIEW_MODEL ? h : 0,
        .scale = tile ? HEATMAP_SCALE_TILE : HEATMAP_SCALE_SHARED,
        .not_allowed = p->panel_masks ? NULL
                       : pooled       ? p->pool.mask
                                      : p->not_allowed,
        .not_allowed_each = p->panel_masks,
        .note = pooled ? p->pool.note : NULL,
    };
    /* the values' texts are numbers, empty until they are known: they
     * cannot change whether the texts are accepted */
    const struct heatmap_text texts[TEXT_COUNT] = {
        [TEXT_TITLE] = {"Title", p->title},
        [TEXT_SOFTWARE] = {"Software", "attnd"},
        [TEXT_MODEL] = {"attnd:model", m->name},
        [TEXT_VIEW] = {"attnd:view", o->view == VIEW_MODEL     ? "model"
                                     : o->view == VIEW_ROLLOUT ? "rollout"
                                                               : "heads"},
        [TEXT_LAYER] = {"attnd:layer", p->layer_text},
        [TEXT_HEAD] = {"attnd:head", p->head_text},
        [TEXT_SPECIAL] = {"attnd:special",
                          o->special == SPECIAL_HIDE ? "hide" : "show"},
        [TEXT_TOKENS] = {"attnd:tokens", p->tokens_json},
        [TEXT_SCALE] = {"attnd:color_scale", tile ? "tile" : "shared"},
        [TEXT_MIN] = {"attnd:min", p->lo_text},
        [TEXT_MAX] = {"attnd:max", p->hi_text},
        [TEXT_POOL] = {"attnd:pool", p->pool.kind_text},
        [TEXT_POOL_SIZE] = {"attnd:pool_size", p->pool.size_text},
        [TEXT_TILE_MAX] = {"attnd:tile_max", ""},
    };
    memcpy(p->texts, texts, sizeof texts);
    p->n_texts = tile ? TEXT_COUNT : TEXT_TILE_MAX;
    return true;
}

/* Panel k's full matrix in the encoder's result: [N][N] of enc->count. */
static const float *panel_source(const struct request *req,
                                 const struct xf_result *res, size_t k)
{
    const size_t n = res->n;
    if (req->png.view == VIEW_ROLLOUT)
        return res->rollout;
    if (req->png.view == VIEW_MODEL)
        return res->weights + k * n * n;
    if (req->png.head_kind == HEAD_MEAN)
        return res->mean_weights;
    const size_t head = req->png.head_kind == HEAD_ONE ? req->png.head : k;
    return res->weights + head * n * n;
}

/* Panel k's blocks in a pass that pooled the heads: [Lw][heads] of them. */
static size_t pooled_panel(const struct request *req, size_t k)
{
    return req->png.view == VIEW_HEADS && req->png.head_kind == HEAD_ONE
               ? req->png.head
               : k;
}

/* Each panel's values (the shown rows and columns only, not renormalised),
 * and the texts that tell them: the smallest and largest weight shown,
 * and each tile's largest with a scale per tile. */
static bool picture_fill(struct picture *p, const struct request *req,
                         const struct xf_result *res)
{
    const size_t n = p->n, full = res->n;
    const bool pooled = p->pool.kind != HEATMAP_POOL_NONE;
    const size_t shown = p->pool.rows * p->pool.cols;
    if (pooled) { /* the blocks straight from the shown rows and columns */
        if (!render_pool_alloc(&p->pool, p->count))
            return false;
    } else if (n < full) {
        p->cut = malloc(p->count * n * n * sizeof *p->cut);
        if (!p->cut)
            return false;
    }
    struct buf tiles;
    buf_init(&tiles, (size_t)1 << 20);
    bool ok = buf_append_str(&tiles, "[");
    float lo = 0.0f, hi = 0.0f;
    for (size_t k = 0; k < p->count; k++) {
        const float *src =
            res->measures.pooled ? NULL : panel_source(req, res, k);
        const float *values = src;
        if (pooled) {
            float *dst = p->pool.values + k * shown;
            if (res->measures
                    .pooled) /* taken by the pass, in the same blocks */
                memcpy(dst, res->measures.pooled + pooled_panel(req, k) * shown,
                       shown * sizeof *dst);
            else
                heatmap_pool_values(src, full, p->at, p->at, n, n,
                                    panel_mask(p, k), p->pool.k, p->pool.kind,
                                    dst);
            values = dst;
        } else if (p->cut) {
            float *dst = p->cut + k * n * n;
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    dst[i * n + j] = src[p->at[i] * full + p->at[j]];
            values = dst;
        }
        float top = 0.0f;
        for (size_t e = 0; e < shown; e++) {
            const float v = values[e];
            if ((k == 0 && e == 0) || v < lo)
                lo = v;
            if ((k == 0 && e == 0) || v > hi)
                hi = v;
            if (v > top)
                top = v;
        }
        p->mats[k].values = values;
        char num[JSONNUM_MAX];
        jsonnum_format(top, 0, num);
        ok = ok && (!k || buf_append_str(&tiles, ",")) &&
             buf_append_str(&tiles, num);
    }
    ok = ok && buf_append_str(&tiles, "]");
    p->tile_max_json = ok ? buf_take(&tiles, NULL) : NULL;
    if (!ok)
        buf_free(&tiles);
    jsonnum_format(lo, 0, p->lo_text);
    jsonnum_format(hi, 0, p->hi_text);
    p->texts[TEXT_TILE_MAX].text = p->tile_max_json;
    return ok;
}

/* The picture as the image writers take it. */
static struct image_picture picture_image(const struct picture *p)
{
    return (struct image_picture){p->mats, p->count, &p->opts, p->texts,
                                  p->n_texts};
}

bool render_model_png_measure(struct request *req, struct problem *pb)
{
    struct picture p;
    bool ok = picture_make(&p, req, RENDER_MAX_PIXELS, pb);
    if (ok) {
        const struct image_picture image = picture_image(&p);
        /* attnd:min, attnd:max and attnd:tile_max, empty until the values
         * are known */
        ok = render_image_measure(req, &image,
                                  (2 + p.count) * (JSONNUM_MAX + 1) + 2, pb);
    }
    picture_free(&p);
    return ok;
}

bool render_model_png(const struct request *req, const struct xf_result *res,
                      size_t max_pixels, unsigned char **png, size_t *len,
                      struct problem *pb)
{
    struct picture p;
    bool ok = picture_make(&p, req, max_pixels, pb);
    if (ok && !picture_fill(&p, req, res))
        ok = problem_from_draw(pb, DRAW_E_NOMEM,
                               "out of memory for the shown weights");
    if (ok) {
        const struct image_picture image = picture_image(&p);
        ok = render_image_encode(req, &image, png, len, pb);
    }
    picture_free(&p);
    return ok;
}

size_t render_model_png_bytes(const struct request *req)
{
    const size_t panels = panel_count(req);
    const size_t n = req->model.enc.count;
    /* the image as its format holds it; the shown weights when some are
     * left out (or their blocks when pooled), labels, titles and the text
     * chunks */
    struct render_pool pool;
    render_pool_plan(&pool, &req->png, n, n);
    const size_t cut =
        req->png.special == SPECIAL_HIDE ? panels * n * n * sizeof(float) : 0;
    // a causal model's cells no query may attend: a mask per window drawn,
    // in blocks too when pooled, and each panel's and layer's when several
    const struct model *m = req->model.entry->model;
    const size_t masks = picture_mask_count(req, m);
    const size_t mask =
        masks * n * n +
        (masks > 1 ? masks * pool.rows * pool.cols + panels * sizeof(void *) +
                         m->xf.layers * sizeof(size_t)
                   : 0);
    size_t tokens = 0;
    for (size_t i = 0; i < n; i++)
        tokens +=
            8 * strlen(tok_token_text(&m->tokenizer, req->model.enc.ids[i])) +
            64;
    return render_image_held(req) + cut + render_pool_bytes(&pool, panels) +
           mask + panels * 128 + tokens + ((size_t)1 << 20);
}
