/*
 * family_bert.c - BERT checkpoints (model_type "bert"), as transformers'
 * modeling_bert.py computes BertModel: config.json's keys with
 * BertConfig's defaults, the tensors under their modeling_bert.py names
 * (with or without the "bert." prefix a task model saves, LayerNorm
 * parameters also as the legacy gamma/beta), and the WordPiece tokenizer
 * from vocab.txt and tokenizer_config.json.
 *
 * The block (transformer.h): LayerNorm after each sublayer, a plain
 * feed-forward with "gelu" or "gelu_new", learned positions with token
 * types, a LayerNorm on the embeddings, every projection biased, no final
 * norm.
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "vocab.h"
#include "wordpiece.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_BYTES ((size_t)1 << 20)
#define MAX_VOCAB_BYTES ((size_t)64 << 20)

static const cJSON *key(const cJSON *doc, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(doc, name);
}

static bool read_config(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    static const char only[] = "only BERT encoders are supported";
    if (!config_string_is(doc, "position_embedding_type", "absolute", err,
                          err_len) ||
        !config_flag_off(doc, "is_decoder", only, err, err_len) ||
        !config_flag_off(doc, "add_cross_attention", only, err, err_len))
        return false;
    if (!config_size(doc, "num_hidden_layers", XF_MAX_LAYERS, true, 0,
                     &c->layers, err, err_len) ||
        !config_size(doc, "hidden_size", XF_MAX_DIM, true, 0, &c->hidden, err,
                     err_len) ||
        !config_size(doc, "num_attention_heads", XF_MAX_DIM, true, 0, &c->heads,
                     err, err_len) ||
        !config_size(doc, "intermediate_size", XF_MAX_DIM, true, 0,
                     &c->intermediate, err, err_len) ||
        !config_size(doc, "vocab_size", XF_MAX_VOCAB, true, 0, &c->vocab_size,
                     err, err_len) ||
        !config_size(doc, "max_position_embeddings", XF_MAX_POSITIONS, true, 0,
                     &c->max_positions, err, err_len) ||
        !config_size(doc, "type_vocab_size", 256, false, 2, &c->type_vocab_size,
                     err, err_len))
        return false;
    if (c->hidden % c->heads)
        return model_fail(err, err_len,
                          "num_attention_heads (%zu) does not divide "
                          "hidden_size (%zu)",
                          c->heads, c->hidden);
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    if (!config_eps(doc, "layer_norm_eps", 1e-12f, &c->norm_eps, err, err_len))
        return false;
    c->arch = (struct xf_arch){.norm = XF_NORM_LAYER,
                               .norm_place = XF_NORM_AFTER,
                               .ffn = XF_FFN_PLAIN,
                               .act = XF_ACT_GELU,
                               .positions = XF_POS_LEARNED,
                               .token_types = true,
                               .embed_norm = true,
                               .qkv_bias = true,
                               .out_bias = true,
                               .ffn_bias = true};
    const cJSON *act = key(doc, "hidden_act");
    if (act) {
        if (!cJSON_IsString(act))
            return model_fail(err, err_len, "hidden_act is not a string");
        if (strcmp(act->valuestring, "gelu_new") == 0)
            c->arch.act = XF_ACT_GELU_TANH;
        else if (strcmp(act->valuestring, "gelu") != 0)
            return model_fail(err, err_len,
                              "hidden_act '%.64s' is not supported (gelu or "
                              "gelu_new)",
                              act->valuestring);
    }
    return true;
}

/* tokenizer_config.json's text[0..len) into *do_lower_case (true,
 * BertTokenizer's default, when the key is absent). Settings the core's
 * tokenizer cannot follow are refused: strip_accents set apart from
 * lowercasing, tokenize_chinese_chars or do_basic_tokenize false. */
static bool read_tokenizer_config(const char *text, size_t len,
                                  bool *do_lower_case, char *err,
                                  size_t err_len)
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

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden, J = b->intermediate;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embeddings.word_embeddings.weight");
    WANT(&b->pos_emb, b->max_positions, H,
         "max_position_embeddings x hidden_size",
         "embeddings.position_embeddings.weight");
    WANT(&b->type_emb, b->type_vocab_size, H, "type_vocab_size x hidden_size",
         "embeddings.token_type_embeddings.weight");
    WANT(&b->embed_norm_w, H, 0, "hidden_size", "embeddings.LayerNorm.weight");
    WANT(&b->embed_norm_b, H, 0, "hidden_size", "embeddings.LayerNorm.bias");
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
        const char *sq = "hidden_size x hidden_size";
#define L(sub) "encoder.layer.%zu." sub, l
        WANT(&y->q_w, H, H, sq, L("attention.self.query.weight"));
        WANT(&y->q_b, H, 0, "hidden_size", L("attention.self.query.bias"));
        WANT(&y->k_w, H, H, sq, L("attention.self.key.weight"));
        WANT(&y->k_b, H, 0, "hidden_size", L("attention.self.key.bias"));
        WANT(&y->v_w, H, H, sq, L("attention.self.value.weight"));
        WANT(&y->v_b, H, 0, "hidden_size", L("attention.self.value.bias"));
        WANT(&y->o_w, H, H, sq, L("attention.output.dense.weight"));
        WANT(&y->o_b, H, 0, "hidden_size", L("attention.output.dense.bias"));
        WANT(&y->attn_norm_w, H, 0, "hidden_size",
             L("attention.output.LayerNorm.weight"));
        WANT(&y->attn_norm_b, H, 0, "hidden_size",
             L("attention.output.LayerNorm.bias"));
        WANT(&y->up_w, J, H, "intermediate_size x hidden_size",
             L("intermediate.dense.weight"));
        WANT(&y->up_b, J, 0, "intermediate_size", L("intermediate.dense.bias"));
        WANT(&y->down_w, H, J, "hidden_size x intermediate_size",
             L("output.dense.weight"));
        WANT(&y->down_b, H, 0, "hidden_size", L("output.dense.bias"));
        WANT(&y->ffn_norm_w, H, 0, "hidden_size", L("output.LayerNorm.weight"));
        WANT(&y->ffn_norm_b, H, 0, "hidden_size", L("output.LayerNorm.bias"));
#undef L
    }
#undef WANT
}

static const char *prefix(const struct shards *s)
{
    size_t in;
    return shards_find(s, "bert.embeddings.word_embeddings.weight", &in)
               ? "bert."
               : "";
}

/* The encoder's namespace, but for its two buffers. */
static bool in_network(const char *rest)
{
    if (strcmp(rest, "embeddings.position_ids") == 0 ||
        strcmp(rest, "embeddings.token_type_ids") == 0)
        return false;
    return strncmp(rest, "embeddings.", 11) == 0 ||
           strncmp(rest, "encoder.", 8) == 0;
}

/* name with LayerNorm.weight/bias renamed to gamma/beta, or false when it
 * has no LayerNorm parameter. */
static bool legacy_name(const char *name, char *out, size_t out_len)
{
    const char *ln = strstr(name, "LayerNorm.");
    if (!ln)
        return false;
    const char *tail = ln + strlen("LayerNorm.");
    const char *old = strcmp(tail, "weight") == 0 ? "gamma"
                      : strcmp(tail, "bias") == 0 ? "beta"
                                                  : NULL;
    if (!old)
        return false;
    snprintf(out, out_len, "%.*s%s", (int)(tail - name), name, old);
    return true;
}

/* -------------------------------------------------------- the tokenizer */

static bool open_tokenizer(struct model *m, const struct model_files *files)
{
    char why[400];
    char *text;
    size_t len;
    if (!model_files_read(files, "tokenizer_config.json", MAX_JSON_BYTES, true,
                          &text, &len))
        return false;
    m->do_lower_case = true;
    if (text) {
        const bool ok = read_tokenizer_config(text, len, &m->do_lower_case, why,
                                              sizeof why);
        free(text);
        if (!ok)
            return model_files_fail(files, "tokenizer_config.json", "%s", why);
    }
    if (!model_files_read(files, "vocab.txt", MAX_VOCAB_BYTES, false, &text,
                          &len))
        return false;
    struct wordpiece_vocab *vocab;
    const bool ok =
        vocab_parse(text, len, m->xf.vocab_size, &vocab, why, sizeof why);
    free(text);
    if (!ok)
        return model_files_fail(files, "vocab.txt", "%s", why);
    struct attn_error aerr = {0};
    if (wordpiece_tokenizer_new(vocab, m->do_lower_case, &m->tokenizer, &aerr))
        return model_files_fail(files, "vocab.txt", "%s", aerr.message);
    return true;
}

const struct family family_bert = {
    .model_type = "bert",
    .network = "BERT encoder",
    .read_config = read_config,
    .name_tensors = name_tensors,
    .prefix = prefix,
    .in_network = in_network,
    .legacy_name = legacy_name,
    .open_tokenizer = open_tokenizer,
};
