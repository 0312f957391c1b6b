/*
 * family_gemma.c - Google's Gemma decoders, as transformers'
 * modeling_gemma.py, modeling_gemma2.py and modeling_gemma3.py compute
 * them: four rows of the family table over one file ("gemma", "gemma2",
 * "gemma3_text", and "gemma3", the language model inside a Gemma 3
 * checkpoint with a vision tower), what differs between them a row of the
 * table below.
 *
 * The block (transformer.h): RMSNorm scaling by (1 + w), which the loader
 * makes once in float32 (model_tensor.add); embeddings multiplied by
 * sqrt(hidden_size); a GeGLU feed-forward down(gelu_tanh(gate x) * up x);
 * rotary positions paired as rotate_half pairs them; causal attention
 * over grouped KV heads (one on Gemma-2B: multi-query), head_dim apart
 * from hidden / heads; a final norm; the output head tied to the
 * embeddings. Gemma 2 and 3 add norms on each sublayer's output
 * (XF_NORM_SANDWICH), scale the scores by query_pre_attn_scalar^-1/2, and
 * alternate sliding-window layers with global ones (layer_types, or the
 * modeling file's rule). Gemma 2 soft-caps the scores and the logits;
 * Gemma 3 norms each head of q and k by (1 + w) before the rotation, and
 * turns its sliding layers by rope_local_base_freq and its global ones by
 * rope_theta with rope_scaling (linear, or none).
 *
 * Tensors: model.embed_tokens, model.layers.N.{input_layernorm,
 * self_attn.{q,k,v,o}_proj, (Gemma 3: self_attn.{q,k}_norm),
 * post_attention_layernorm, (Gemma 2 and 3: pre_feedforward_layernorm,
 * post_feedforward_layernorm), mlp.{gate,up,down}_proj}, model.norm; a
 * Gemma 3 checkpoint's under language_model.model. (as the Hub's files
 * have them) or model.language_model., its vision tower's ignored.
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "gguf.h"
#include "shards.h"
#include "tokenizer_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What sets one row apart. */
struct variant {
    const char *model_type;
    bool sandwich;    /* Gemma 2, 3: norms on the sublayers' outputs, the
                         scale from query_pre_attn_scalar, sliding layers */
    bool softcaps;    /* Gemma 2: the score and logit caps by default */
    bool qk_norm;     /* Gemma 3: q_norm and k_norm */
    bool local_rope;  /* Gemma 3: rope_local_base_freq on sliding layers,
                         rope_scaling on global ones only */
    size_t pattern;   /* without layer_types, layer i slides unless
                         (i + 1) % pattern is 0 */
    bool nested;      /* Gemma 3 with a vision tower: text_config */
    double theta;     /* rope_theta when config.json has none */
    size_t positions; /* max_position_embeddings when it has none */
};

static const struct variant variants[] = {
    {"gemma", false, false, false, false, 0, false, 10000.0, 8192},
    {"gemma2", true, true, false, false, 2, false, 10000.0, 8192},
    {"gemma3_text", true, false, true, true, 6, false, 1000000.0, 131072},
    {"gemma3", true, false, true, true, 6, true, 1000000.0, 131072},
};

static const struct variant *variant_of(const cJSON *doc)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (cJSON_IsString(t) &&
            !strcmp(t->valuestring, variants[i].model_type))
            return &variants[i];
    return &variants[0];
}

/* The kinds of layer: global (kind 0) and, with a window, sliding. */
enum { KIND_GLOBAL = 0, KIND_SLIDING = 1 };

/* ------------------------------------------------------------- config */

/* hidden_activation, which Gemma's files give beside an older hidden_act
 * ("gelu") that the MLP did not read; else hidden_act; else the tanh
 * GELU, as the MLP falls back to. */
static bool read_activation(const cJSON *doc, xf_act *act, char *err,
                            size_t err_len)
{
    const char *name, *act_name;
    if (!config_string(doc, "hidden_act", "gelu_pytorch_tanh", &act_name, err,
                       err_len) ||
        !config_string(doc, "hidden_activation", act_name, &name, err, err_len))
        return false;
    static const struct {
        const char *name;
        xf_act act;
    } known[] = {{"gelu_pytorch_tanh", XF_ACT_GELU_TANH},
                 {"gelu_new", XF_ACT_GELU_TANH},
                 {"gelu", XF_ACT_GELU}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i].name)) {
            *act = known[i].act;
            return true;
        }
    return model_fail(err, err_len,
                      "hidden_activation '%.64s' is not supported (only "
                      "gelu_pytorch_tanh, gelu_new or gelu)",
                      name);
}

/* A softcap: a number above 0, or null (none); fallback when absent. */
static bool read_cap(const cJSON *doc, const char *key, double fallback,
                     float *out, char *err, size_t err_len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (v && cJSON_IsNull(v)) {
        *out = 0.0f;
        return true;
    }
    double cap;
    if (!config_positive(doc, key, fallback, &cap, err, err_len))
        return false;
    *out = (float)cap;
    return true;
}

/* Which layers slide: layer_types, else the modeling file's rule. */
static bool read_layer_types(const cJSON *doc, const struct variant *v,
                             struct model *m, char *err, size_t err_len)
{
    const size_t L = m->xf.layers;
    m->layer_kind = malloc(L);
    if (!m->layer_kind)
        return model_fail(err, err_len, "out of memory");
    m->xf.layer_kind = m->layer_kind;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(doc, "layer_types");
    if (types && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types) || (size_t)cJSON_GetArraySize(types) != L)
            return model_fail(err, err_len,
                              "layer_types is not a list of %zu layer types "
                              "(num_hidden_layers)",
                              L);
        for (size_t l = 0; l < L; l++) {
            const cJSON *t = cJSON_GetArrayItem(types, (int)l);
            const bool sliding = cJSON_IsString(t) &&
                                 !strcmp(t->valuestring, "sliding_attention");
            if (!sliding && !(cJSON_IsString(t) &&
                              !strcmp(t->valuestring, "full_attention")))
                return model_fail(err, err_len,
                                  "layer_types[%zu] is not "
                                  "'sliding_attention' or 'full_attention'",
                                  l);
            m->layer_kind[l] = sliding ? KIND_SLIDING : KIND_GLOBAL;
        }
        return true;
    }
    size_t pattern = v->pattern;
    // Gemma 3's configs name the period (transformers 4.50 to 4.52)
    if (v->local_rope &&
        !config_size(doc, "sliding_window_pattern", XF_MAX_LAYERS, false,
                     v->pattern, &pattern, err, err_len))
        return false;
    for (size_t l = 0; l < L; l++)
        m->layer_kind[l] = (l + 1) % pattern ? KIND_SLIDING : KIND_GLOBAL;
    return true;
}

/* rope_scaling: null, "default", or "linear" with its factor, into *factor
 * (1: none). */
static bool read_rope_scaling(const cJSON *doc, double *factor,
                              const char **name, char *err, size_t err_len)
{
    *factor = 1.0;
    *name = NULL;
    const cJSON *r;
    const char *type;
    if (!config_rope_scaling(doc, &r, &type, err, err_len))
        return false;
    if (!type)
        return true;
    if (strcmp(type, "linear"))
        return model_fail(err, err_len,
                          "rope_scaling's type '%.64s' is not supported (only "
                          "linear)",
                          type);
    if (!config_positive(r, "factor", 0.0, factor, err, err_len))
        return false;
    if (*factor == 0.0)
        return model_fail(err, err_len,
                          "rope_scaling of type linear needs its factor");
    *name = "linear";
    return true;
}

/* The rotary of each kind: the global one at rope_theta, divided by a
 * linear scaling's factor; the sliding one at rope_local_base_freq
 * (Gemma 3) or the same as the global one. */
static bool make_rotary(const cJSON *doc, const struct variant *v,
                        struct model *m, char *err, size_t err_len)
{
    struct xf_model *x = &m->xf;
    double theta, local, factor;
    const char *scaling;
    if (!config_positive(doc, "rope_theta", v->theta, &theta, err, err_len) ||
        !read_rope_scaling(doc, &factor, &scaling, err, err_len))
        return false;
    if (!v->local_rope && scaling)
        return model_fail(err, err_len,
                          "rope_scaling is not supported for model_type '%s'",
                          v->model_type);
    local = theta;
    if (v->local_rope && !config_positive(doc, "rope_local_base_freq", 10000.0,
                                          &local, err, err_len))
        return false;
    const size_t pairs = x->head_dim / 2;
    m->rope_freq = malloc(pairs * sizeof *m->rope_freq);
    if (!m->rope_freq)
        return model_fail(err, err_len, "out of memory");
    for (size_t i = 0; i < pairs; i++)
        m->rope_freq[i] =
            pow(theta, -(double)(2 * i) / (double)x->head_dim) / factor;
    x->kind[KIND_GLOBAL].rope = (struct attn_rotary){
        .base = theta, .pairing = ATTN_ROPE_HALF, .inv_freq = m->rope_freq};
    m->extra.rope_scaling[KIND_GLOBAL] = scaling;
    x->kind[KIND_SLIDING].rope =
        v->local_rope
            ? (struct attn_rotary){.base = local, .pairing = ATTN_ROPE_HALF}
            : x->kind[KIND_GLOBAL].rope;
    m->extra.rope_scaling[KIND_SLIDING] = v->local_rope ? NULL : scaling;
    return true;
}

/* The sizes, the activation and the epsilon every row reads. */
static bool read_sizes(const cJSON *doc, const struct variant *v,
                       struct xf_model *c, char *err, size_t err_len)
{
    // head_dim 256 when absent, as GemmaConfig's
    if (!config_decoder_sizes(doc, v->positions, 256, c, err, err_len) ||
        !config_eps(doc, "rms_norm_eps", 1e-6f, &c->norm_eps, err, err_len))
        return false;
    if (c->head_dim % 2)
        return model_fail(err, err_len,
                          "head_dim (%zu) is odd; rotary positions turn pairs",
                          c->head_dim);
    return true;
}

static bool read_config(const cJSON *top, struct model *m, char *err,
                        size_t err_len)
{
    const struct variant *v = variant_of(top);
    const cJSON *doc = top;
    if (v->nested) {
        doc = cJSON_GetObjectItemCaseSensitive(top, "text_config");
        if (!cJSON_IsObject(doc))
            return model_fail(err, err_len,
                              "text_config is missing or not an object");
    }
    struct xf_model *c = &m->xf;
    xf_act act = XF_ACT_GELU_TANH;
    bool attention_bias;
    if (!read_sizes(doc, v, c, err, err_len) ||
        !read_activation(doc, &act, err, err_len) ||
        !config_bool(doc, "attention_bias", false, &attention_bias, err,
                     err_len) ||
        !config_bool(top, "tie_word_embeddings", true, &m->extra.tied, err,
                     err_len))
        return false;
    if (!m->extra.tied)
        return model_fail(err, err_len,
                          "tie_word_embeddings is false; Gemma's output head "
                          "is its embeddings");
    c->arch = (struct xf_arch){.norm = XF_NORM_RMS,
                               .norm_place = v->sandwich ? XF_NORM_SANDWICH
                                                         : XF_NORM_BEFORE,
                               .ffn = XF_FFN_GATED,
                               .act = act,
                               .positions = XF_POS_ROTARY,
                               .final_norm = true,
                               .causal = true,
                               .qk_norm = v->qk_norm,
                               .qkv_bias = attention_bias,
                               .out_bias = attention_bias};
    // the normalizer, sqrt(hidden_size) as float32 holds it
    c->embed_scale = (float)sqrt((double)c->hidden);
    if (!make_rotary(doc, v, m, err, err_len))
        return false;
    if (!v->sandwich)
        return true;
    size_t scalar;
    if (!config_size(doc, "query_pre_attn_scalar", XF_MAX_DIM, false, 256,
                     &scalar, err, err_len) ||
        !config_size(doc, "sliding_window", XF_MAX_POSITIONS, false, 4096,
                     &c->kind[KIND_SLIDING].window, err, err_len) ||
        !read_cap(doc, "attn_logit_softcapping", v->softcaps ? 50.0 : 0.0,
                  &c->attn_softcap, err, err_len) ||
        !read_cap(doc, "final_logit_softcapping", v->softcaps ? 30.0 : 0.0,
                  &c->final_softcap, err, err_len) ||
        !read_layer_types(doc, v, m, err, err_len))
        return false;
    c->attn_scale = (float)(1.0 / sqrt((double)scalar));
    c->kinds = 2;
    return true;
}

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden;
    const size_t D = b->head_dim;
    const bool sandwich = b->arch.norm_place == XF_NORM_SANDWICH;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
    // every norm scales by 1 + w, made once in float32
#define NORM(slot, rows, what, ...)                                            \
    do {                                                                       \
        WANT(slot, rows, 0, what, __VA_ARGS__);                                \
        model_tensors_last(w)->add = 1.0f;                                     \
    } while (0)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embed_tokens.weight");
    NORM(&b->final_norm_w, H, "hidden_size", "norm.weight");
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
#define L(sub) "layers.%zu." sub, l
        NORM(&y->attn_norm_w, H, "hidden_size", L("input_layernorm.weight"));
        if (sandwich) {
            NORM(&y->attn_out_norm_w, H, "hidden_size",
                 L("post_attention_layernorm.weight"));
            NORM(&y->ffn_norm_w, H, "hidden_size",
                 L("pre_feedforward_layernorm.weight"));
            NORM(&y->ffn_out_norm_w, H, "hidden_size",
                 L("post_feedforward_layernorm.weight"));
        } else {
            NORM(&y->ffn_norm_w, H, "hidden_size",
                 L("post_attention_layernorm.weight"));
        }
        model_llama_projections(m, w, l);
        if (b->arch.qk_norm) {
            NORM(&y->q_norm_w, D, "head_dim", L("self_attn.q_norm.weight"));
            NORM(&y->k_norm_w, D, "head_dim", L("self_attn.k_norm.weight"));
        }
#undef L
    }
#undef NORM
#undef WANT
}

/* The language model's namespace: model. (or none, a base model saved
 * alone), and inside a Gemma 3 checkpoint with a vision tower
 * language_model.model. (the Hub's files) or model.language_model.
 * (transformers' newer layout). */
static const char *prefix(const struct shards *s)
{
    static const char *const prefixes[] = {"language_model.model.",
                                           "model.language_model.", "model."};
    size_t in;
    char name[64];
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", prefixes[i]);
        if (shards_find(s, name, &in))
            return prefixes[i];
    }
    return "";
}

/* ------------------------------------------------------------ in GGUF */

/* Gemma's keys beyond LLaMA's, as llama.cpp's converter writes them. */
static const struct gguf_key gguf_keys[] = {
    {"attn_logit_softcapping", "attn_logit_softcapping"},
    {"final_logit_softcapping", "final_logit_softcapping"},
    {"sliding_window", "attention.sliding_window"},
    {"rope_local_base_freq", "rope.freq_base_swa"},
    {NULL, NULL},
};

/* Gemma 2's and 3's four norms a layer. */
static const struct gguf_name gguf_names[] = {
    {"layers.%zu.post_attention_layernorm.weight",
     "blk.%zu.post_attention_norm.weight"},
    {"layers.%zu.pre_feedforward_layernorm.weight", "blk.%zu.ffn_norm.weight"},
    {"layers.%zu.post_feedforward_layernorm.weight",
     "blk.%zu.post_ffw_norm.weight"},
    {NULL, NULL},
};

/* What llama.cpp decides beside the keys: the scores' scale, head_dim^-1/2
 * but (hidden / heads)^-1/2 for the 27B models (46 layers of Gemma 2, 62
 * of Gemma 3), as query_pre_attn_scalar; Gemma 3's sliding layers, a
 * period (sliding_window_pattern) or each layer's flag, and none at all
 * without a window. */
static bool gguf_config(cJSON *config, const struct shards *s, const char *arch,
                        char *err, size_t err_len)
{
    const struct gguf_file *g = &s->shard[0].gguf;
    const cJSON *layers = cJSON_GetObjectItem(config, "num_hidden_layers");
    const cJSON *hidden = cJSON_GetObjectItem(config, "hidden_size");
    const cJSON *heads = cJSON_GetObjectItem(config, "num_attention_heads");
    const cJSON *head_dim = cJSON_GetObjectItem(config, "head_dim");
    if (!cJSON_IsNumber(layers) || !cJSON_IsNumber(hidden) ||
        !cJSON_IsNumber(heads) || !cJSON_IsNumber(head_dim) ||
        heads->valuedouble < 1)
        return true; /* the family's reading names what is missing */
    const bool big = (!strcmp(arch, "gemma2") && layers->valuedouble == 46) ||
                     (!strcmp(arch, "gemma3") && layers->valuedouble == 62);
    const double scalar = big ? floor(hidden->valuedouble / heads->valuedouble)
                              : head_dim->valuedouble;
    if (!cJSON_AddNumberToObject(config, "query_pre_attn_scalar", scalar))
        return model_fail(err, err_len, "out of memory");
    if (strcmp(arch, "gemma3"))
        return true;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
    if (!gguf_find(g, key))
        return cJSON_AddNumberToObject(config, "sliding_window_pattern", 1) ||
               model_fail(err, err_len, "out of memory");
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv)
        return true;
    uint32_t period;
    if (kv->type != GGUF_TYPE_ARRAY)
        return gguf_get_u32(g, key, &period, err, err_len) &&
               (cJSON_AddNumberToObject(config, "sliding_window_pattern",
                                        period) ||
                model_fail(err, err_len, "out of memory"));
    if (kv->elem_type != GGUF_TYPE_BOOL || kv->count != layers->valuedouble)
        return model_fail(err, err_len,
                          "key '%s' is %llu values of %s; %.0f BOOL (one a "
                          "layer) expected",
                          key, (unsigned long long)kv->count,
                          gguf_type_name(kv->elem_type), layers->valuedouble);
    cJSON *types = cJSON_AddArrayToObject(config, "layer_types");
    for (uint64_t i = 0; types && i < kv->count; i++)
        if (!cJSON_AddItemToArray(
                types, cJSON_CreateString(kv->value[i] ? "sliding_attention"
                                                       : "full_attention")))
            types = NULL;
    return types || model_fail(err, err_len, "out of memory");
}

#define GGUF_ROW(name, norms, hook)                                            \
    {                                                                          \
        .arch = name, .keys = gguf_llama_keys, .more_keys = gguf_keys,         \
        .overrides = norms, .names = gguf_llama_names, .norms_folded = true,   \
        .config = hook,                                                        \
    }
static const struct family_gguf gguf_gemma = GGUF_ROW("gemma", NULL, NULL);
static const struct family_gguf gguf_gemma2 =
    GGUF_ROW("gemma2", gguf_names, gguf_config);
static const struct family_gguf gguf_gemma3 =
    GGUF_ROW("gemma3", gguf_names, gguf_config);
#undef GGUF_ROW

#define ROW(type, name, in_gguf)                                               \
    {                                                                          \
        .model_type = type, .network = name, .decoder = true,                  \
        .read_config = read_config, .name_tensors = name_tensors,              \
        .after_tensors = model_tie_head, .prefix = prefix,                     \
        .in_network = model_llama_namespace,                                   \
        .open_tokenizer = tokenizer_json_open, .gguf = in_gguf,                \
    }

const struct family family_gemma = ROW("gemma", "Gemma decoder", &gguf_gemma);
const struct family family_gemma2 =
    ROW("gemma2", "Gemma 2 decoder", &gguf_gemma2);
const struct family family_gemma3_text =
    ROW("gemma3_text", "Gemma 3 decoder", &gguf_gemma3);
const struct family family_gemma3 =
    ROW("gemma3", "Gemma 3 language model", NULL);
