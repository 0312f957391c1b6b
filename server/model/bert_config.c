/*
 * bert_config.c - config.json and tokenizer_config.json (bert_config.h).
 */
#include "bert_config.h"
#include "fail.h"

#include <cJSON.h>
#include <math.h>
#include <string.h>

static const cJSON *key(const cJSON *doc, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(doc, name);
}

/* A required whole number from 1 to cap. */
static bool size_key(const cJSON *doc, const char *name, size_t cap,
                     bool required, size_t fallback, size_t *out, char *err,
                     size_t err_len)
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

/* A string key that, when present, must be one of the allowed values. */
static bool string_is(const cJSON *doc, const char *name, const char *allowed,
                      char *err, size_t err_len)
{
    const cJSON *v = key(doc, name);
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsString(v))
        return model_fail(err, err_len, "%s is not a string", name);
    if (strcmp(v->valuestring, allowed) != 0)
        return model_fail(err, err_len,
                          "%s '%.64s' is not supported (only '%s')", name,
                          v->valuestring, allowed);
    return true;
}

static bool flag_off(const cJSON *doc, const char *name, char *err,
                     size_t err_len)
{
    const cJSON *v = key(doc, name);
    if (v && !cJSON_IsBool(v))
        return model_fail(err, err_len, "%s is not true or false", name);
    if (cJSON_IsTrue(v))
        return model_fail(err, err_len,
                          "%s is true; only BERT encoders are supported", name);
    return true;
}

static bool parse_fields(const cJSON *doc, struct bert_config *c, char *err,
                         size_t err_len)
{
    if (!cJSON_IsObject(doc))
        return model_fail(err, err_len, "not a JSON object");
    if (!string_is(doc, "model_type", "bert", err, err_len) ||
        !string_is(doc, "position_embedding_type", "absolute", err, err_len) ||
        !flag_off(doc, "is_decoder", err, err_len) ||
        !flag_off(doc, "add_cross_attention", err, err_len))
        return false;
    if (!size_key(doc, "num_hidden_layers", BERT_MAX_LAYERS, true, 0,
                  &c->layers, err, err_len) ||
        !size_key(doc, "hidden_size", BERT_MAX_DIM, true, 0, &c->hidden, err,
                  err_len) ||
        !size_key(doc, "num_attention_heads", BERT_MAX_DIM, true, 0, &c->heads,
                  err, err_len) ||
        !size_key(doc, "intermediate_size", BERT_MAX_DIM, true, 0,
                  &c->intermediate, err, err_len) ||
        !size_key(doc, "vocab_size", BERT_MAX_VOCAB, true, 0, &c->vocab_size,
                  err, err_len) ||
        !size_key(doc, "max_position_embeddings", BERT_MAX_POSITIONS, true, 0,
                  &c->max_positions, err, err_len) ||
        !size_key(doc, "type_vocab_size", 256, false, 2, &c->type_vocab_size,
                  err, err_len))
        return false;
    if (c->hidden % c->heads)
        return model_fail(err, err_len,
                          "num_attention_heads (%zu) does not divide "
                          "hidden_size (%zu)",
                          c->heads, c->hidden);
    const cJSON *eps = key(doc, "layer_norm_eps");
    c->layer_norm_eps = 1e-12f;
    if (eps) {
        if (!cJSON_IsNumber(eps) || !isfinite(eps->valuedouble) ||
            !((float)eps->valuedouble > 0.0f) || eps->valuedouble > 1.0)
            return model_fail(err, err_len,
                              "layer_norm_eps must be a number above 0 (as "
                              "float32) and at most 1");
        c->layer_norm_eps = (float)eps->valuedouble;
    }
    const cJSON *act = key(doc, "hidden_act");
    c->act = BERT_ACT_GELU;
    if (act) {
        if (!cJSON_IsString(act))
            return model_fail(err, err_len, "hidden_act is not a string");
        if (strcmp(act->valuestring, "gelu_new") == 0)
            c->act = BERT_ACT_GELU_TANH;
        else if (strcmp(act->valuestring, "gelu") != 0)
            return model_fail(err, err_len,
                              "hidden_act '%.64s' is not supported (gelu or "
                              "gelu_new)",
                              act->valuestring);
    }
    return true;
}

bool bert_config_parse(const char *text, size_t len, struct bert_config *out,
                       char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc)
        return model_fail(err, err_len, "not valid JSON");
    const bool ok = parse_fields(doc, out, err, err_len);
    cJSON_Delete(doc);
    return ok;
}

bool bert_tokenizer_config_parse(const char *text, size_t len,
                                 bool *do_lower_case, char *err, size_t err_len)
{
    *do_lower_case = true;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc)
        return model_fail(err, err_len, "not valid JSON");
    bool ok = true;
    const cJSON *lower = key(doc, "do_lower_case");
    const cJSON *strip = key(doc, "strip_accents");
    const cJSON *chinese = key(doc, "tokenize_chinese_chars");
    const cJSON *basic = key(doc, "do_basic_tokenize");
    if (!cJSON_IsObject(doc))
        ok = model_fail(err, err_len, "not a JSON object");
    else if (lower && !cJSON_IsBool(lower))
        ok = model_fail(err, err_len, "do_lower_case is not true or false");
    else if (lower)
        *do_lower_case = cJSON_IsTrue(lower);
    // the basic tokenizer strips accents exactly when it lowercases
    if (ok && strip && !cJSON_IsNull(strip) &&
        (!cJSON_IsBool(strip) || cJSON_IsTrue(strip) != *do_lower_case))
        ok = model_fail(err, err_len,
                        "strip_accents must be null or equal to "
                        "do_lower_case (%s)",
                        *do_lower_case ? "true" : "false");
    if (ok && chinese && !cJSON_IsTrue(chinese))
        ok = model_fail(err, err_len,
                        "tokenize_chinese_chars must be true (or absent)");
    if (ok && basic && !cJSON_IsTrue(basic))
        ok = model_fail(err, err_len,
                        "do_basic_tokenize must be true (or absent)");
    cJSON_Delete(doc);
    return ok;
}
