/*
 * request_model.c - a request on a loaded checkpoint ("model"): which
 * fields it takes (the table's `models` column), its sentence or pair
 * encoded by the model's WordPiece vocabulary, the layer and arrays it
 * returns, what its image shows, and its budgets, all checked before
 * anything is computed. Every option of the random-weights mode is fixed
 * by the model: given with "model" it is refused, naming it.
 */
#include "jsonin.h"
#include "models.h"
#include "family.h"
#include "request_fields.h"
#include "request_intervene.h"
#include "request_steps.h"

#include "heatmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the client sent f, in the body or the URL. */
static bool sent(const struct request *req, const struct request_field *f)
{
    return ((req->given | req->in_body) >> request_field_index(f) & 1) != 0;
}

bool request_check_without_model(const struct request *req,
                                 struct problem *pb)
{
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        if (f->models == MODELS_REQUIRED && sent(req, f))
            return problem_set(pb, 422, f->pointer,
                               "%s is taken only with \"model\", a loaded "
                               "checkpoint (GET /models lists them)",
                               f->name);
    }
    return true;
}

/* Every field sent must be one a model takes. */
static bool check_fields(const struct request *req, const struct model *m,
                         struct problem *pb)
{
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        if (f->models == MODELS_REFUSED && sent(req, f))
            return problem_set(
                pb, 422, f->pointer,
                "%s conflicts with \"model\": the model \"%s\" fixes it "
                "(%zu layers of %zu heads, hidden size %zu, its own "
                "tokenizer and weights); remove %s, or \"model\" for the "
                "random-weights mode",
                f->name, m->name, m->xf.layers, m->xf.heads, m->xf.hidden,
                f->name);
    }
    return true;
}

/* One name of "return" with a model. */
static bool take_return(struct request *req, const struct request_return *r,
                        const struct jpath *at, struct problem *pb)
{
    if (!r->model_want)
        return problem_set(pb, 422, at->pointer,
                           "%s (\"%s\") is not returned for a model; a "
                           "model returns weights, mean_weights, "
                           "head_stats, value_weighted, sparse_weights, "
                           "hidden_states, rollout, flow, logit_lens and dla",
                           at->name, r->name);
    const struct model *m = req->model.entry->model;
    if ((r->model_want & XF_WANT_LOGIT_LENS) && !m->xf.lm_head.data)
        return problem_set(pb, 422, at->pointer,
                           "%s (\"%s\") reads each layer through the model's "
                           "output head; the model \"%s\" (%s) has none",
                           at->name, r->name, m->name, m->family->network);
    if ((r->model_want & XF_WANT_ACTIVATIONS) &&
        (!m->xf.lm_head.data || m->xf.arch.norm_place == XF_NORM_AFTER))
        return problem_set(pb, 422, at->pointer,
                           "%s (\"%s\") attributes a logit to what writes "
                           "into a residual stream that no norm rewrites; "
                           "the model \"%s\" (%s) has %s",
                           at->name, r->name, m->name, m->family->network,
                           m->xf.lm_head.data ? "its norms after each sublayer"
                                              : "no output head");
    req->model.run.want |= r->model_want;
    return true;
}

static bool read_return(struct request *req, const cJSON *v, struct problem *pb)
{
    struct request_model *rm = &req->model;
    rm->run.want = XF_WANT_WEIGHTS;
    if (!v)
        return true;
    rm->run.want = 0;
    if (!request_returns_read(v, "[\"weights\", \"rollout\"]", take_return, req,
                              pb))
        return false;
    /* "return": [] asks for the tokens and the config only */
    req->compute = rm->run.want != 0;
    return true;
}

static bool read_layer(struct request *req, const cJSON *v,
                       const struct model *m, struct problem *pb)
{
    struct request_model *rm = &req->model;
    rm->run.layer = XF_ALL_LAYERS;
    if (!v || (cJSON_IsString(v) && !strcmp(v->valuestring, "all")))
        return true;
    struct jpath at;
    jpath_root(&at, "layer");
    if (!cJSON_IsNumber(v))
        return problem_set(pb, 422, at.pointer,
                           "layer is %s; expected \"all\" or a layer number "
                           "from 0 to %zu (layers count from 0)",
                           jsonin_kind(v), m->xf.layers - 1);
    size_t layer;
    if (!jsonin_size(v, &at, 0, SIZE_MAX - 1, &layer, pb))
        return false;
    if (layer >= m->xf.layers)
        return problem_set(pb, 422, at.pointer,
                           "layer (%zu) is out of range: the model \"%s\" has "
                           "%zu layers, numbered from 0 to %zu",
                           layer, m->name, m->xf.layers, m->xf.layers - 1);
    rm->run.layer = layer;
    return true;
}

static bool read_text(const cJSON *v, const char *name, const char **text,
                      size_t *len, struct problem *pb)
{
    struct jpath at;
    jpath_root(&at, name);
    if (!cJSON_IsString(v))
        return problem_set(pb, 422, at.pointer, "%s is %s; expected a string",
                           name, jsonin_kind(v));
    *text = jsonin_text(v, len);
    return true;
}

/* What the model's tokens are called in a message, and what its
 * tokenizer adds to them: BERT's wordpieces with [CLS] and [SEP], a
 * decoder's tokens with its tokenizer's own (a BOS, or none). */
static const char *units_of(const struct model *m)
{
    return m->xf.arch.token_types ? "wordpieces" : "tokens";
}

static const char *added_of(const struct model *m)
{
    return m->xf.arch.token_types ? "[CLS] and [SEP]"
                                  : "the tokens its tokenizer adds";
}

/* The most tokens an input of the model may have. */
static size_t token_cap(const struct request_limits *lim, const struct model *m)
{
    return m->xf.max_positions < lim->max_tokens ? m->xf.max_positions
                                                 : lim->max_tokens;
}

/* The induction probe's input: probe_length random tokens, twice, inside
 * what the tokenizer adds to a text; every head's induction score on the
 * second copy is computed, and what "return" asks besides (nothing by
 * default). */
static bool encode_probe(struct request *req, const cJSON *root,
                         const struct request_limits *lim,
                         const struct model *m, struct problem *pb)
{
    if (cJSON_GetObjectItemCaseSensitive(root, "sentence") ||
        cJSON_GetObjectItemCaseSensitive(root, "sentence_b"))
        return problem_set(pb, 422,
                           cJSON_GetObjectItemCaseSensitive(root, "sentence")
                               ? "/sentence"
                               : "/sentence_b",
                           "probe builds its own input (random tokens, "
                           "repeated); leave the text out, or the probe");
    if (!request_reserve(
            req, tok_encode_repeated_bytes(&m->tokenizer, req->probe_length),
            "probe_length", pb))
        return false;
    const size_t cap = token_cap(lim, m);
    const struct tok_options opts = {.max_tokens = cap,
                                     .no_special = !req->add_special_tokens};
    struct attn_error err;
    const attn_status st =
        tok_encode_repeated(&m->tokenizer, m->xf.vocab_size, req->probe_seed,
                            req->probe_length, &opts, &req->model.enc, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, "/probe_length", "%s (%s)", err.message,
                           cap == m->xf.max_positions
                               ? "the model's max_position_embeddings"
                               : "--max-tokens");
    if (st == ATTN_E_NOMEM)
        return problem_set(pb, 503, "/probe_length", "out of memory");
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "/probe_length");
    struct xf_run *run = &req->model.run;
    const struct tok_encoding *enc = &req->model.enc;
    run->ids = enc->ids;
    run->type_ids = m->xf.arch.token_types ? enc->type_ids : NULL;
    run->n = enc->count;
    run->repeat_start = 0;
    while (run->repeat_start < enc->count && enc->added[run->repeat_start])
        run->repeat_start++;
    run->repeat_period = req->probe_length;
    if (!cJSON_GetObjectItemCaseSensitive(root, "return"))
        run->want = 0;
    run->want |= XF_WANT_INDUCTION;
    req->compute = true;
    return true;
}

/* The caller's encoding: the tokens are given, so no text may be. */
static bool take_encoding(struct request *req, const cJSON *root,
                          const struct model *m, struct problem *pb)
{
    static const char *const texts[] = {"sentence", "sentence_b",
                                        "add_special_tokens"};
    for (size_t i = 0; i < 3; i++)
        if (cJSON_GetObjectItemCaseSensitive(root, texts[i]))
            return problem_set(pb, 422, request_field_find(texts[i])->pointer,
                               "%s: the tokens are the request's prompt here",
                               texts[i]);
    struct xf_run *run = &req->model.run;
    run->ids = req->model.enc.ids;
    run->type_ids = m->xf.arch.token_types ? req->model.enc.type_ids : NULL;
    run->n = req->model.enc.count;
    return true;
}

/* The sentence, or the pair, into the model's tokens. */
static bool encode(struct request *req, const cJSON *root,
                   const struct request_limits *lim, const struct model *m,
                   struct problem *pb)
{
    if (req->probe != PROBE_NONE)
        return encode_probe(req, root, lim, m, pb);
    if (req->model.encoded)
        return take_encoding(req, root, m, pb);
    // a probe's settings without a probe would do nothing
    static const char *const probe_only[] = {"probe_length", "probe_seed"};
    for (size_t i = 0; i < 2; i++) {
        const struct request_field *f = request_field_find(probe_only[i]);
        if (request_field_given(req, f) ||
            cJSON_GetObjectItemCaseSensitive(root, f->name))
            return problem_set(pb, 422, f->pointer,
                               "%s is for the input a probe builds; give "
                               "\"probe\": \"induction\" too, or leave it out",
                               f->name);
    }
    const cJSON *va = cJSON_GetObjectItemCaseSensitive(root, "sentence");
    const cJSON *vb = cJSON_GetObjectItemCaseSensitive(root, "sentence_b");
    const char *a = NULL, *b = NULL;
    if (!va)
        return problem_set(pb, 422, "/sentence",
                           "a request on a model needs a sentence (and may "
                           "add sentence_b), or a probe");
    size_t a_len = 0, b_len = 0;
    if (!read_text(va, "sentence", &a, &a_len, pb) ||
        (vb && !read_text(vb, "sentence_b", &b, &b_len, pb)))
        return false;
    if (b && !m->xf.arch.token_types)
        return problem_set(pb, 422, "/sentence_b",
                           "the model \"%s\" is a %s: it reads one text, "
                           "and sentence_b is for an encoder with token types",
                           m->name, m->family->network);
    if (b && m->xf.type_vocab_size < 2)
        return problem_set(pb, 422, "/sentence_b",
                           "the model \"%s\" has one token type "
                           "(type_vocab_size 1): it takes no sentence_b",
                           m->name);
    req->model.pair = b != NULL;
    if (!request_reserve(req, tok_encode_bytes(&m->tokenizer, a_len, b_len),
                         "sentence", pb))
        return false;
    const size_t cap = token_cap(lim, m);
    struct attn_error err;
    const struct tok_options opts = {.max_tokens = cap,
                                     .no_special = !req->add_special_tokens};
    const attn_status st = tok_encode(&m->tokenizer, a, a_len, b, b_len, &opts,
                                      &req->model.enc, &err);
    const char *pointer = b ? "/sentence_b" : "/sentence";
    if (st == ATTN_E_TOO_BIG) {
        if (cap == m->xf.max_positions)
            return problem_set(pb, 422, pointer,
                               "the input is more than %zu %s with %s; the "
                               "model \"%s\" takes at most %zu "
                               "(max_position_embeddings)",
                               cap, units_of(m), added_of(m), m->name, cap);
        return problem_set(pb, 422, pointer,
                           "the input is more than %zu %s with %s "
                           "(--max-tokens)",
                           cap, units_of(m), added_of(m));
    }
    if (st == ATTN_E_NOMEM)
        return problem_set(pb, 503, pointer, "out of memory");
    if (st != ATTN_OK)
        return problem_from_core(
            pb, st, &err,
            !strcmp(err.field, "sentence_b") ? "/sentence_b" : "/sentence");
    if (!req->model.enc.count)
        return problem_set(
            pb, 422, pointer, "%s gives no tokens%s: at least one is needed",
            b ? "sentence_b" : "sentence",
            req->add_special_tokens ? "" : ", and add_special_tokens is false");
    struct xf_run *run = &req->model.run;
    run->ids = req->model.enc.ids;
    run->type_ids = m->xf.arch.token_types ? req->model.enc.type_ids : NULL;
    run->n = req->model.enc.count;
    return true;
}

/* A pooled image of heads takes its blocks from the pass, a few rows at a
 * time, so that no head's N x N weights are held however long the input:
 * each shown position's block (request_pool_block(), as the image lays
 * them out), the hidden ones in none. Nothing to do when the image is
 * not pooled. */
static bool pool_in_pass(struct request *req, struct problem *pb)
{
    const struct tok_encoding *enc = &req->model.enc;
    const bool hide = req->png.special == SPECIAL_HIDE;
    size_t shown = 0;
    for (size_t i = 0; i < enc->count; i++)
        shown += !hide || !enc->added[i];
    size_t k;
    enum heatmap_pool kind;
    request_pool_block(&req->png, shown, shown, &k, &kind);
    if (!shown || kind == HEATMAP_POOL_NONE)
        return true; /* nothing shown: the image refuses it, naming why */
    const size_t n = enc->count;
    if (!request_reserve(req, 2 * n * sizeof *req->model.pool_at, "pool", pb))
        return false;
    uint32_t *at = malloc(2 * n * sizeof *at);
    if (!at)
        return problem_set(pb, 503, "/pool", "out of memory");
    req->model.pool_at = at;
    for (size_t i = 0, s = 0; i < n; i++)
        at[i] = at[n + i] =
            hide && enc->added[i] ? ATTN_POOL_NONE : (uint32_t)(s++ / k);
    struct xf_run *run = &req->model.run;
    run->pool_row = at;
    run->pool_col = at + n;
    run->pool_rows = run->pool_cols = heatmap_pool_blocks(shown, k);
    run->pool_mean = kind == HEATMAP_POOL_MEAN;
    run->want = XF_WANT_POOLED;
    return true;
}

/* What the image shows decides what is computed. */
static bool resolve_png(struct request *req, const struct model *m,
                        struct problem *pb)
{
    struct request_png *png = &req->png;
    struct xf_run *run = &req->model.run;
    const struct request_field *head = request_field_find("head");
    const struct request_field *layer = request_field_find("layer");
    if (png->view == VIEW_AUTO)
        png->view = run->layer == XF_ALL_LAYERS ? VIEW_MODEL : VIEW_HEADS;
    req->compute = true;
    if (png->view != VIEW_HEADS && request_field_given(req, head))
        return problem_set(pb, 422, "/head",
                           "head is for the image of one layer's heads; "
                           "view=%s shows %s",
                           png->view == VIEW_MODEL ? "model" : "rollout",
                           png->view == VIEW_MODEL ? "every head of every layer"
                                                   : "the rollout");
    if (png->view == VIEW_ROLLOUT) {
        run->want = XF_WANT_ROLLOUT;
        return true;
    }
    if (png->view == VIEW_MODEL) {
        if (run->layer != XF_ALL_LAYERS)
            return problem_set(pb, 422, layer->pointer,
                               "view=model shows every layer; leave layer "
                               "out (or \"all\"), or ask view=heads");
        if (m->xf.heads > HEATMAP_MAX_ACROSS ||
            m->xf.layers * m->xf.heads > HEATMAP_MAX_TILES)
            return problem_set(pb, 422, "/view",
                               "view=model draws at most %d heads across and "
                               "%d tiles; the model \"%s\" has %zu layers of "
                               "%zu heads: ask view=heads with a layer",
                               HEATMAP_MAX_ACROSS, HEATMAP_MAX_TILES, m->name,
                               m->xf.layers, m->xf.heads);
        run->want = XF_WANT_WEIGHTS;
        return pool_in_pass(req, pb);
    }
    if (run->layer == XF_ALL_LAYERS)
        return problem_set(pb, 422, layer->pointer,
                           "view=heads shows one layer: give layer, from 0 "
                           "to %zu (or view=model for every layer)",
                           m->xf.layers - 1);
    if (png->head_kind == HEAD_ONE && png->head >= m->xf.heads)
        return problem_set(pb, 422, "/head",
                           "head (%zu) is out of range; the model \"%s\" has "
                           "%zu heads (0 to %zu)",
                           png->head, m->name, m->xf.heads, m->xf.heads - 1);
    if (png->head_kind == HEAD_MEAN) {
        run->want = XF_WANT_MEAN_WEIGHTS;
        return true;
    }
    run->want = XF_WANT_WEIGHTS;
    return pool_in_pass(req, pb);
}

size_t request_model_output(const struct request *req)
{
    const struct xf_model *b = &req->model.entry->model->xf;
    const struct xf_run *run = &req->model.run;
    const double n = (double)run->n;
    const double lw = run->layer == XF_ALL_LAYERS ? (double)b->layers : 1;
    double floats = 0;
    if (run->want & XF_WANT_WEIGHTS)
        floats += lw * (double)b->heads * n * n;
    if (run->want & XF_WANT_MEAN_WEIGHTS)
        floats += lw * n * n;
    if (run->want & XF_WANT_VALUE_WEIGHTED)
        floats += lw * ((double)b->heads + 1) * n * n;
    if (run->want & XF_WANT_HIDDEN)
        floats += (double)(b->layers + 1) * n * (double)b->hidden;
    if (run->want & XF_WANT_ROLLOUT)
        floats += n * n;
    if (run->want & XF_WANT_FLOW)
        floats += n * n;
    if (run->want & XF_WANT_POOLED)
        floats += lw * (double)b->heads * (double)run->pool_rows *
                  (double)run->pool_cols;
    if (run->want & XF_WANT_HEAD_STATS)
        floats += (double)b->layers * (double)b->heads * (ATTN_HEAD_STATS + n);
    if (run->want & XF_WANT_INDUCTION)
        floats += (double)b->layers * (double)b->heads;
    // a key and a weight for each of a row's top keys
    if (run->want & XF_WANT_TOP_K)
        floats += 2.0 * lw * (double)b->heads * n * (double)req->cfg.top_k;
    // the lens: a token id and a probability for each entry
    if (run->want & XF_WANT_LOGIT_LENS)
        floats += 2.0 * (double)b->layers * n * (double)req->logit_lens_k;
    // the attribution: a number a head, two a layer, and four more
    if (run->want & XF_WANT_ACTIVATIONS)
        floats += (double)b->layers * ((double)b->heads + 2) + 4;
    return floats < 1e18 ? (size_t)floats : SIZE_MAX;
}

/* The pass, planned once its run is whole: what it costs, and then what
 * it computes, come from this plan. Every request computes on one thread
 * (workers.h). */
static bool plan(struct request *req, const struct model *m, struct problem *pb)
{
    // bfloat16 products where the CPU has them; the config says which
    if (req->products == PRODUCTS_BFLOAT16 && !xf_bf16_dots_available())
        req->products = PRODUCTS_FLOAT32;
    req->model.run.bf16_dots = req->products == PRODUCTS_BFLOAT16;
    if (!req->compute)
        return true;
    req->model.run.threads = 1;
    req->model.run.lens_k = req->logit_lens_k;
    req->model.run.top_k = req->cfg.top_k;
    // the flow's limit, named where the length comes from
    if ((req->model.run.want & XF_WANT_FLOW) &&
        req->model.run.n > XF_MAX_FLOW_TOKENS)
        return problem_set(
            pb, 422, req->probe ? "/probe_length" : "/sentence",
            "attention flow (\"flow\" in return) is computed for at most %d "
            "tokens, a maximum flow for each pair of them; the input has %zu "
            "with %s: a shorter text, or the rollout",
            XF_MAX_FLOW_TOKENS, req->model.run.n, added_of(m));
    if (!request_reserve(req, sizeof *req->model.plan, "model", pb))
        return false;
    req->model.plan = malloc(sizeof *req->model.plan);
    if (!req->model.plan)
        return problem_set(pb, 503, "/model", "out of memory");
    struct attn_error err;
    const attn_status st =
        xf_plan(&m->xf, &req->model.run, req->model.plan, &err);
    return st == ATTN_OK || problem_from_core(pb, st, &err, "");
}

/* The budgets of one request: its work and the numbers it returns. */
static bool check_budgets(const struct request *req,
                          const struct request_limits *lim, struct problem *pb)
{
    if (!req->compute)
        return true;
    const struct model *m = req->model.entry->model;
    const double flops = xf_plan_flops(req->model.plan);
    if (lim->max_flops && flops > (double)lim->max_flops) {
        problem_set(pb, 422, "",
                    "the request needs about %.3g GFLOP on the model \"%s\" "
                    "(%zu %s); the limit is %.3g GFLOP (--max-flops): "
                    "a shorter input",
                    flops * 1e-9, m->name, req->model.run.n, units_of(m),
                    (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    if (req->png.format == IMAGE_JSON &&
        request_model_output(req) > lim->max_output)
        return problem_set(pb, 422, "/return",
                           "the requested arrays hold %zu numbers, more than "
                           "%zu (--max-output): one layer, fewer arrays or a "
                           "shorter input",
                           request_model_output(req), lim->max_output);
    return true;
}

bool request_decode_model(struct request *req, const cJSON *root,
                          const cJSON *name, const struct request_limits *lim,
                          struct problem *pb)
{
    if (!cJSON_IsString(name))
        return problem_set(pb, 422, "/model",
                           "model is %s; expected the name of a loaded model "
                           "(GET /models)",
                           jsonin_kind(name));
    struct models_entry *e =
        models_find(lim->models, name->valuestring, strlen(name->valuestring));
    if (!e) {
        char loaded[256];
        models_names(lim->models, loaded, sizeof loaded);
        return problem_set(pb, 422, "/model",
                           "model \"%.64s\" is not loaded; loaded: %s",
                           name->valuestring, loaded);
    }
    const struct model *m = e->model;
    req->model.entry = e;
    return check_fields(req, m, pb) &&
           request_fields_read(req, root, lim, pb) &&
           read_return(req, cJSON_GetObjectItemCaseSensitive(root, "return"),
                       pb) &&
           read_layer(req, cJSON_GetObjectItemCaseSensitive(root, "layer"), m,
                      pb) &&
           encode(req, root, lim, m, pb) &&
           request_read_interventions(req, root, m, pb) &&
           (req->png.format == IMAGE_JSON || resolve_png(req, m, pb)) &&
           plan(req, m, pb) && check_budgets(req, lim, pb);
}
