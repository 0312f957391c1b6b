/*
 * params.c - projection parameters: drawn from the seed like nn.Linear's
 * default initialisation, or checked when the caller gives them.
 */
#include "attention.h"
#include "checked.h"
#include "error.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t attn_params_layout(const struct attn_config *cfg, unsigned flags,
                          struct attn_param_tensor out[ATTN_PARAM_COUNT])
{
    const size_t hk = cfg->heads * cfg->d_k, gk = cfg->kv_heads * cfg->d_k;
    const size_t gv = cfg->kv_heads * cfg->d_v, hv = cfg->heads * cfg->d_v;
    /* bias_k and bias_v are nn.MultiheadAttention's [1][1][E] rows, kept
     * here as [rows]: a bias in all but name, required when used */
    const bool kv = cfg->bias_kv;
    const struct attn_param_tensor all[ATTN_PARAM_COUNT] = {
        {"q_proj.weight", "q_proj", "heads x d_k", ATTN_PARAM_WQ, hk,
         cfg->d_model, true, true},
        {"q_proj.bias", "q_proj", "heads x d_k", ATTN_PARAM_BQ, hk,
         cfg->d_model, false, false},
        {"k_proj.weight", "k_proj", "kv_heads x d_k", ATTN_PARAM_WK, gk,
         cfg->d_ctx, true, true},
        {"k_proj.bias", "k_proj", "kv_heads x d_k", ATTN_PARAM_BK, gk,
         cfg->d_ctx, false, false},
        {"v_proj.weight", "v_proj", "kv_heads x d_v", ATTN_PARAM_WV, gv,
         cfg->d_value, true, true},
        {"v_proj.bias", "v_proj", "kv_heads x d_v", ATTN_PARAM_BV, gv,
         cfg->d_value, false, false},
        {"bias_k", "bias_k", "kv_heads x d_k", ATTN_PARAM_BIAS_K, gk,
         cfg->d_ctx, false, kv},
        {"bias_v", "bias_v", "kv_heads x d_v", ATTN_PARAM_BIAS_V, gv,
         cfg->d_value, false, kv},
        {"out_proj.weight", "out_proj", "d_out", ATTN_PARAM_WO, cfg->d_out, hv,
         true, true},
        {"out_proj.bias", "out_proj", "d_out", ATTN_PARAM_BO, cfg->d_out, hv,
         false, false},
    };
    const bool all_biases = flags & ATTN_LAYOUT_ALL_BIASES;
    size_t n = 0;
    for (size_t i = 0; i < ATTN_PARAM_COUNT; i++) {
        const enum attn_param_slot slot = all[i].slot;
        const bool is_out = slot >= ATTN_PARAM_WO;
        const bool is_kv =
            slot == ATTN_PARAM_BIAS_K || slot == ATTN_PARAM_BIAS_V;
        const bool bias = !all[i].is_weight && !is_kv;
        if (is_out && cfg->no_out_proj)
            continue;
        if (is_kv && !kv)
            continue;
        if (bias && !all_biases && !(is_out ? cfg->out_bias : cfg->qkv_bias))
            continue;
        out[n++] = all[i];
    }
    return n;
}

size_t attn_param_count(const struct attn_param_tensor *t)
{
    return t->is_weight ? t->rows * t->cols : t->rows;
}

const float **attn_params_slot(struct attn_params *p, enum attn_param_slot slot)
{
    const float **slots[ATTN_PARAM_COUNT] = {
        &p->wq, &p->bq,     &p->wk,     &p->bk, &p->wv,
        &p->bv, &p->bias_k, &p->bias_v, &p->wo, &p->bo};
    return slots[slot];
}

const float *attn_params_tensor(const struct attn_params *p,
                                enum attn_param_slot slot)
{
    const float *const tensors[ATTN_PARAM_COUNT] = {
        p->wq, p->bq,     p->wk,     p->bk, p->wv,
        p->bv, p->bias_k, p->bias_v, p->wo, p->bo};
    return tensors[slot];
}

attn_status attn_params_draw(const struct attn_config *cfg,
                             struct attn_params *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->mode != ATTN_MODE_PROJECTED || cfg->heads == 0)
        return attn_fail(err, ATTN_E_INVALID, "mode",
                         "parameters exist only for a resolved config in mode "
                         "projected");
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(cfg, 0, tensors);
    for (size_t t = 0; t < n; t++) {
        const size_t count = attn_param_count(&tensors[t]);
        float *values = malloc(count * sizeof *values);
        if (!values) {
            attn_params_free(out);
            return attn_fail(err, ATTN_E_NOMEM, "params",
                             "out of memory drawing %s (%zu numbers)",
                             tensors[t].name, count);
        }
        *attn_params_slot(out, tensors[t].slot) = values;
        attn_params_draw_tensor(cfg->seed, &tensors[t], values);
    }
    return ATTN_OK;
}

void attn_params_draw_tensor(uint64_t seed, const struct attn_param_tensor *t,
                             float *out)
{
    const size_t count = attn_param_count(t);
    const uint64_t key = attn_stream_key(seed, t->name, strlen(t->name));
    const double bound = 1.0 / sqrt((double)t->cols);
    // nn.Linear default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    rng_uniform_floats(key, 0, count, bound, out);
}

void attn_params_free(struct attn_params *params)
{
    if (!params)
        return;
    for (int s = 0; s < ATTN_PARAM_COUNT; s++)
        free((void *)*attn_params_slot(params, (enum attn_param_slot)s));
    memset(params, 0, sizeof *params);
}

attn_status attn_params_check(const struct attn_config *cfg,
                              const struct attn_params *p,
                              struct attn_error *err)
{
    /* List every bias: explicit parameters have one whenever present. */
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(cfg, ATTN_LAYOUT_ALL_BIASES, tensors);
    for (size_t t = 0; t < n; t++) {
        const float *values = attn_params_tensor(p, tensors[t].slot);
        if (!values) {
            if (!tensors[t].required)
                continue; /* an absent bias is no bias */
            return attn_fail(err, ATTN_E_INVALID, "params",
                             "params %s is missing", tensors[t].name);
        }
        const size_t count = attn_param_count(&tensors[t]);
        for (size_t i = 0; i < count; i++) {
            if (isfinite(values[i]))
                continue;
            const size_t at[2] = {i / tensors[t].cols, i % tensors[t].cols};
            const int dims = tensors[t].is_weight ? 2 : 1;
            const size_t *index = tensors[t].is_weight ? at : &i;
            return attn_fail_at(err, ATTN_E_INPUT, tensors[t].name, dims, index,
                                "params %s has %s at %zu", tensors[t].name,
                                isnan(values[i]) ? "NaN" : "Inf", i);
        }
    }
    // a norm of each head, or of the whole projection
    const bool whole = cfg->qk_norm_whole;
    const struct {
        const char *name;
        const float *values;
        size_t count;
    } norms[] = {
        {"q_norm", p->q_norm, whole ? cfg->heads * cfg->d_k : cfg->d_k},
        {"k_norm", p->k_norm, whole ? cfg->kv_heads * cfg->d_k : cfg->d_k}};
    for (size_t t = 0; (cfg->qk_norm || whole) && t < 2; t++)
        for (size_t i = 0; i < norms[t].count; i++)
            if (!isfinite(norms[t].values[i]))
                return attn_fail_at(err, ATTN_E_INPUT, norms[t].name, 1, &i,
                                    "params %s has %s at %zu", norms[t].name,
                                    isnan(norms[t].values[i]) ? "NaN" : "Inf",
                                    i);
    return ATTN_OK;
}
