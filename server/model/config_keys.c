/*
 * config_keys.c - config.json's keys (config_keys.h).
 */
#include "config_keys.h"
#include "fail.h"

#include <math.h>
#include <string.h>

static const cJSON *key(const cJSON *doc, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, name);
    return cJSON_IsNull(v) ? NULL : v;
}

bool config_size(const cJSON *doc, const char *name, size_t cap, bool required,
                 size_t fallback, size_t *out, char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    if (!v) {
        if (required)
            return model_fail(err, err_len, "%s is missing", name);
        *out = fallback;
        return true;
    }
    if (!cJSON_IsNumber(v))
        return model_fail(err, err_len, "%s is not a number", name);
    const double d = v->valuedouble;
    if (!(d >= 1.0 && d <= (double)cap) || floor(d) != d)
        return model_fail(err, err_len,
                          "%s (%g) must be a whole number from 1 to %zu", name,
                          d, cap);
    *out = (size_t)d;
    return true;
}

bool config_string(const cJSON *doc, const char *name, const char *fallback,
                   const char **out, char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    *out = fallback;
    if (!v)
        return true;
    if (!cJSON_IsString(v))
        return model_fail(err, err_len, "%s is not a string", name);
    *out = v->valuestring;
    return true;
}

bool config_string_is(const cJSON *doc, const char *name, const char *allowed,
                      char *err, size_t err_len)
{
    const char *v;
    if (!config_string(doc, name, NULL, &v, err, err_len))
        return false;
    if (v && strcmp(v, allowed) != 0)
        return model_fail(err, err_len,
                          "%s '%.64s' is not supported (only '%s')", name, v,
                          allowed);
    return true;
}

bool config_bool(const cJSON *doc, const char *name, bool fallback, bool *out,
                 char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    *out = fallback;
    if (!v)
        return true;
    if (!cJSON_IsBool(v))
        return model_fail(err, err_len, "%s is not true or false", name);
    *out = cJSON_IsTrue(v);
    return true;
}

bool config_flag_off(const cJSON *doc, const char *name, const char *why,
                     char *err, size_t err_len)
{
    bool on;
    if (!config_bool(doc, name, false, &on, err, err_len))
        return false;
    if (on)
        return model_fail(err, err_len, "%s is true; %s", name, why);
    return true;
}

bool config_eps(const cJSON *doc, const char *name, float fallback, float *out,
                char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    *out = fallback;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v))
        return model_fail(err, err_len, "%s is not a number", name);
    if (!isfinite(v->valuedouble) || !((float)v->valuedouble > 0.0f) ||
        v->valuedouble > 1.0)
        return model_fail(err, err_len,
                          "%s (%g) must be a number above 0 (as float32) and "
                          "at most 1",
                          name, v->valuedouble);
    *out = (float)v->valuedouble;
    return true;
}

bool config_positive(const cJSON *doc, const char *name, double fallback,
                     double *out, char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    *out = fallback;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v))
        return model_fail(err, err_len, "%s is not a number", name);
    if (!isfinite(v->valuedouble) || !(v->valuedouble > 0.0))
        return model_fail(err, err_len,
                          "%s (%g) must be a finite number above 0", name,
                          v->valuedouble);
    *out = v->valuedouble;
    return true;
}

/* One id of config_ids(). */
static bool one_id(const cJSON *v, const char *name, size_t below,
                   unsigned *out, char *err, size_t err_len)
{
    if (!cJSON_IsNumber(v))
        return model_fail(err, err_len, "%s holds %s, not a token id", name,
                          cJSON_IsString(v) ? "a string" : "a non-number");
    const double d = v->valuedouble;
    if (!(d >= 0.0 && d < (double)below) || floor(d) != d)
        return model_fail(err, err_len,
                          "%s (%g) is not a token id below vocab_size (%zu)",
                          name, d, below);
    *out = (unsigned)d;
    return true;
}

bool config_ids(const cJSON *doc, const char *name, size_t below, size_t max,
                unsigned *ids, size_t *count, char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    *count = 0;
    if (!v)
        return true;
    if (!cJSON_IsArray(v)) {
        *count = 1;
        return one_id(v, name, below, &ids[0], err, err_len);
    }
    const size_t n = (size_t)cJSON_GetArraySize(v);
    if (n > max)
        return model_fail(err, err_len, "%s lists %zu ids, more than %zu", name,
                          n, max);
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (!one_id(e, name, below, &ids[*count], err, err_len))
            return false;
        (*count)++;
    }
    return true;
}

bool config_rope_scaling(const cJSON *doc, const cJSON **scaling,
                         const char **type, char *err, size_t err_len)
{
    *scaling = NULL;
    *type = NULL;
    const cJSON *r = key(doc, "rope_scaling");
    if (!r)
        return true;
    if (!cJSON_IsObject(r))
        return model_fail(err, err_len, "rope_scaling is not an object");
    const char *t;
    if (!config_string(r, "rope_type", NULL, &t, err, err_len) ||
        (!t && !config_string(r, "type", NULL, &t, err, err_len)))
        return false;
    if (t && strcmp(t, "default")) {
        *scaling = r;
        *type = t;
    }
    return true;
}

bool config_decoder_sizes(const cJSON *doc, size_t max_positions,
                          size_t head_dim, struct xf_model *c, char *err,
                          size_t err_len)
{
    if (!config_size(doc, "num_hidden_layers", XF_MAX_LAYERS, true, 0,
                     &c->layers, err, err_len) ||
        !config_size(doc, "hidden_size", XF_MAX_DIM, true, 0, &c->hidden, err,
                     err_len) ||
        !config_size(doc, "num_attention_heads", XF_MAX_DIM, true, 0, &c->heads,
                     err, err_len) ||
        !config_size(doc, "num_key_value_heads", XF_MAX_DIM, false, c->heads,
                     &c->kv_heads, err, err_len) ||
        !config_size(doc, "intermediate_size", XF_MAX_DIM, true, 0,
                     &c->intermediate, err, err_len) ||
        !config_size(doc, "vocab_size", XF_MAX_VOCAB, true, 0, &c->vocab_size,
                     err, err_len) ||
        !config_size(doc, "max_position_embeddings", XF_MAX_POSITIONS, false,
                     max_positions, &c->max_positions, err, err_len))
        return false;
    if (c->heads % c->kv_heads)
        return model_fail(err, err_len,
                          "num_key_value_heads (%zu) does not divide "
                          "num_attention_heads (%zu)",
                          c->kv_heads, c->heads);
    if (!head_dim && !key(doc, "head_dim") && c->hidden % c->heads)
        return model_fail(err, err_len,
                          "num_attention_heads (%zu) does not divide "
                          "hidden_size (%zu) and there is no head_dim",
                          c->heads, c->hidden);
    return config_size(doc, "head_dim", XF_MAX_DIM / c->heads, false,
                       head_dim ? head_dim : c->hidden / c->heads, &c->head_dim,
                       err, err_len);
}
