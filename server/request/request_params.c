/*
 * request_params.c - "params": projection parameters as PyTorch names them
 * in a state_dict, flat ("q_proj.weight") or nested ({"q_proj": {"weight":
 * ...}}), with nn.MultiheadAttention's names besides: the fused
 * in_proj_weight and in_proj_bias, q_proj_weight, k_proj_weight and
 * v_proj_weight (kdim = vdim = the context's width), and add_bias_kv's
 * bias_k and bias_v ([1][1][E] as PyTorch keeps them, or [E]). Shapes come
 * from the core's layout of the resolved config.
 */
#include "jsonin.h"
#include "request_steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nn.MultiheadAttention's names of the separate projections. */
static const struct {
    const char *alias, *name;
} aliases[] = {
    {"q_proj_weight", "q_proj.weight"},
    {"k_proj_weight", "k_proj.weight"},
    {"v_proj_weight", "v_proj.weight"},
};

/* Check one given tensor against the shape the config needs. */
static bool expect_shape(const struct jpath *at, const size_t dims[4], int rank,
                         bool weight, size_t rows, size_t cols,
                         const char *rows_what, const char *cols_what,
                         struct problem *pb)
{
    if (weight && rank != 2)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %d dimension%s; a weight is "
                           "[out_features][in_features]",
                           at->name, rank, rank == 1 ? "" : "s");
    if (!weight && rank != 1)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %d dimensions; a bias is "
                           "[out_features]",
                           at->name, rank);
    /* both shapes in full, as PyTorch's load_state_dict names them */
    if (weight && (dims[0] != rows || dims[1] != cols))
        return problem_set(pb, 422, at->pointer,
                           "%s is [%zu][%zu]; this configuration needs "
                           "[%zu][%zu] ([%s][%s])",
                           at->name, dims[0], dims[1], rows, cols, rows_what,
                           cols_what);
    if (!weight && dims[0] != rows)
        return problem_set(pb, 422, at->pointer,
                           "%s is [%zu]; this configuration needs [%zu] "
                           "([%s])",
                           at->name, dims[0], rows, rows_what);
    return true;
}

/* What a weight's columns are, for messages. */
static const char *in_what(const struct attn_param_tensor *t)
{
    switch (t->slot) {
    case ATTN_PARAM_WQ: return "d_model";
    case ATTN_PARAM_WK:
    case ATTN_PARAM_WV: return "d_ctx, the context's width (kdim, vdim)";
    case ATTN_PARAM_WO: return "heads x d_v";
    default: return "";
    }
}

static bool copy_rows(const float **dst, const float *src, size_t rows,
                      size_t cols)
{
    free((void *)*dst); /* the request's own, replaced */
    float *copy = malloc(rows * cols * sizeof *copy);
    *dst = copy;
    if (!copy)
        return false;
    memcpy(copy, src, rows * cols * sizeof *copy);
    return true;
}

/* in_proj_weight or in_proj_bias: q, k and v stacked by rows. */
static bool store_fused(struct request *req, bool weight, const float *values,
                        const size_t dims[4], int rank, const struct jpath *at,
                        struct problem *pb)
{
    const struct attn_config *c = &req->cfg;
    struct attn_params *p = &req->params;
    const size_t hk = c->heads * c->d_k, gk = c->kv_heads * c->d_k,
                 gv = c->kv_heads * c->d_v;
    /* in_proj_bias is 3 x embed_dim whatever kdim and vdim are; only the
     * fused weight needs the context as wide as the input */
    if (weight && (c->d_ctx != c->d_model || c->d_value != c->d_model))
        return problem_set(
            pb, 422, at->pointer,
            "params %s needs the context%s as wide as the "
            "input (%zu%s vs %zu); give q_proj_weight, "
            "k_proj_weight and v_proj_weight instead",
            at->name, c->value ? " and the value" : "", c->d_ctx,
            c->value && c->d_value != c->d_ctx ? " and more" : "", c->d_model);
    if (!expect_shape(at, dims, rank, weight, hk + gk + gv, c->d_model,
                      "(heads + 2 x kv_heads) x d_head", "d_model", pb))
        return false;
    const size_t cols = weight ? c->d_model : 1;
    if (!request_reserve(req, (hk + gk + gv) * cols * sizeof(float), at->name,
                         pb))
        return false;
    const float **q = weight ? &p->wq : &p->bq, **k = weight ? &p->wk : &p->bk,
                **v = weight ? &p->wv : &p->bv;
    if (!copy_rows(q, values, hk, cols) ||
        !copy_rows(k, values + hk * cols, gk, cols) ||
        !copy_rows(v, values + (hk + gk) * cols, gv, cols))
        return problem_set(pb, 503, at->pointer, "out of memory");
    return true;
}

static bool store_param(struct request *req, const char *key, const cJSON *v,
                        const struct jpath *at, struct problem *pb)
{
    /* Every tensor is known, out_proj's too when out_proj is false: that
     * is refused below, by name. */
    struct attn_config all = req->cfg;
    all.no_out_proj = false;
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(&all, ATTN_LAYOUT_ALL_BIASES, tensors);
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(key, aliases[i].alias))
            key = aliases[i].name;
    const struct attn_param_tensor *t = NULL;
    for (size_t i = 0; i < n && !t; i++)
        if (!strcmp(key, tensors[i].name))
            t = &tensors[i];
    const bool fused =
        !strcmp(key, "in_proj_weight") || !strcmp(key, "in_proj_bias");
    if (!t && !fused)
        return problem_set(pb, 422, at->pointer,
                           "unknown parameter \"%.60s\"; expected q_proj, "
                           "k_proj, v_proj and out_proj (weight and bias), "
                           "in_proj_weight and in_proj_bias, bias_k and bias_v",
                           key);
    size_t dims[4];
    int rank;
    float *values = NULL;
    /* rank as the client nested it; expect_shape() says what it should be */
    int nested = 1;
    for (const cJSON *e = v;
         cJSON_IsArray(e) && cJSON_IsArray(e->child) && nested < 4;
         e = e->child)
        nested++;
    if (!jsonin_tensor(v, at, nested, SIZE_MAX / 8, req->hold, &values, dims,
                       &rank, pb))
        return false;
    /* bias_k and bias_v: PyTorch's [1][1][E] is the row [E] */
    if (t && (t->slot == ATTN_PARAM_BIAS_K || t->slot == ATTN_PARAM_BIAS_V) &&
        rank == 3 && dims[0] == 1 && dims[1] == 1) {
        dims[0] = dims[2];
        rank = 1;
    }
    if (fused) {
        const bool ok =
            store_fused(req, key[8] == 'w', values, dims, rank, at, pb);
        free(values);
        return ok;
    }
    if (!expect_shape(at, dims, rank, t->is_weight, t->rows, t->cols,
                      t->rows_what, in_what(t), pb)) {
        free(values);
        return false;
    }
    const float **slot = attn_params_slot(&req->params, t->slot);
    free((void *)*slot); /* the request's own, replaced */
    *slot = values;
    return true;
}

bool request_read_params(struct request *req, const cJSON *v,
                         struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    struct jpath at;
    jpath_root(&at, "params");
    if (!cJSON_IsObject(v))
        return problem_set(pb, 422, at.pointer,
                           "params is %s; expected an object of tensors in "
                           "PyTorch's state_dict layout",
                           jsonin_kind(v));
    if (c->mode == ATTN_MODE_BASIC)
        return problem_set(pb, 422, at.pointer,
                           "params are not used in mode \"basic\"");
    req->params_source = PARAMS_GIVEN;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_key(&sub, &at, item->string);
        if (!cJSON_IsObject(item)) {
            if (!store_param(req, item->string, item, &sub, pb))
                return false;
            continue;
        }
        /* nested form: {"q_proj": {"weight": ..., "bias": ...}} */
        const cJSON *t;
        cJSON_ArrayForEach(t, item)
        {
            char key[96];
            struct jpath leaf;
            jpath_key(&leaf, &sub, t->string);
            snprintf(key, sizeof key, "%s.%s", item->string, t->string);
            if (!store_param(req, key, t, &leaf, pb))
                return false;
        }
    }
    /* every weight the config uses must be there, and bias_k with
     * bias_v */
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(c, 0, tensors);
    for (size_t i = 0; i < n; i++)
        if (tensors[i].required &&
            !attn_params_tensor(&req->params, tensors[i].slot))
            return problem_set(pb, 422, at.pointer, "params lacks %s%s",
                               tensors[i].name,
                               c->bias_kv && !tensors[i].is_weight
                                   ? " (add_bias_kv gives bias_k and bias_v)"
                                   : "");
    if (c->no_out_proj && (req->params.wo || req->params.bo))
        return problem_set(pb, 422, "/out_proj",
                           "params has out_proj tensors but out_proj is "
                           "false");
    c->qkv_bias = req->params.bq || req->params.bk || req->params.bv;
    c->out_bias = req->params.bo != NULL;
    c->params = &req->params;
    return true;
}

bool request_params_bias_kv(const cJSON *params)
{
    return cJSON_IsObject(params) &&
           (cJSON_GetObjectItemCaseSensitive(params, "bias_k") ||
            cJSON_GetObjectItemCaseSensitive(params, "bias_v"));
}
