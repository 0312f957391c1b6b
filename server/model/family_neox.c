/*
 * family_neox.c - GPT-NeoX checkpoints (model_type "gpt_neox": Pythia,
 * GPT-NeoX-20B and their relatives), as transformers' modeling_gpt_neox.py
 * computes GPTNeoXForCausalLM.
 *
 * The block (transformer.h): LayerNorm with its bias before each sublayer
 * (input_layernorm, post_attention_layernorm), a plain feed-forward with
 * exact GELU, causal attention scaled by 1/sqrt(head_dim), every
 * projection biased (attention_bias, true by default, for the attention's
 * two), a final norm (final_layer_norm) and an output head of its own
 * (embed_out, untied by default). With use_parallel_residual (true by
 * default) both sublayers read the layer's input: h + attn(ln1(h)) +
 * mlp(ln2(h)); without it they follow each other. Rotary positions turn
 * only the first rotary_pct x head_dim values of each head, paired as
 * rotate_half pairs them within those, at rotary_emb_base.
 *
 * The fused query_key_value [3 hidden][hidden] holds, in its output rows,
 * each head's q, then its k, then its v ([heads][3][head_dim]): q is
 * blocks of head_dim rows every 3 head_dim rows from row 0, k from
 * head_dim, v from 2 head_dim. The loader copies each once, at its width
 * (model_tensor_strided()); its bias likewise.
 *
 * Tensors: gpt_neox.embed_in, gpt_neox.layers.N.{input_layernorm,
 * post_attention_layernorm, attention.query_key_value, attention.dense,
 * mlp.dense_h_to_4h, mlp.dense_4h_to_h}, gpt_neox.final_layer_norm, and
 * embed_out (a base model saved alone has no "gpt_neox." prefix). The
 * buffers Pythia's files carry (attention.bias, attention.masked_bias,
 * attention.rotary_emb.inv_freq) are not weights and are ignored.
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "tokenizer_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- config */

/* hidden_act: exact GELU, or the tanh approximation under either name. */
static bool read_activation(const cJSON *doc, xf_act *act, char *err,
                            size_t err_len)
{
    const char *name;
    if (!config_string(doc, "hidden_act", "gelu", &name, err, err_len))
        return false;
    if (!strcmp(name, "gelu")) {
        *act = XF_ACT_GELU;
        return true;
    }
    if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh")) {
        *act = XF_ACT_GELU_TANH;
        return true;
    }
    return model_fail(err, err_len,
                      "hidden_act '%.64s' is not supported (gelu, gelu_new "
                      "or gelu_pytorch_tanh)",
                      name);
}

/* rope_scaling: null or "default" only. */
static bool read_rope_scaling(const cJSON *doc, char *err, size_t err_len)
{
    const cJSON *r;
    const char *type;
    if (!config_rope_scaling(doc, &r, &type, err, err_len))
        return false;
    if (type)
        return model_fail(err, err_len,
                          "rope_scaling's type '%.64s' is not supported (only "
                          "default)",
                          type);
    return true;
}

/* A key a newer GPTNeoXConfig writes beside the older one it copies
 * (rope_theta beside rotary_emb_base, partial_rotary_factor beside
 * rotary_pct): absent, null or the same value. */
static bool same_as(const cJSON *doc, const char *name, const char *older,
                    double value, char *err, size_t err_len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, name);
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != value)
        return model_fail(
            err, err_len, "%s (%g) is not %s (%g), which GPT-NeoX reads", name,
            cJSON_IsNumber(v) ? v->valuedouble : NAN, older, value);
    return true;
}

/* The rotary: the first rotary_pct x head_dim values of each head, at
 * rotary_emb_base, its frequencies made once. */
static bool read_rotary(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    double pct, base;
    if (!config_positive(doc, "rotary_pct", 0.25, &pct, err, err_len) ||
        !config_positive(doc, "rotary_emb_base", 10000.0, &base, err,
                         err_len) ||
        !same_as(doc, "partial_rotary_factor", "rotary_pct", pct, err,
                 err_len) ||
        !same_as(doc, "rope_theta", "rotary_emb_base", base, err, err_len) ||
        !read_rope_scaling(doc, err, err_len))
        return false;
    if (pct > 1.0)
        return model_fail(err, err_len,
                          "rotary_pct (%g) is more than 1: more than a head "
                          "to turn",
                          pct);
    // int(head_dim * rotary_pct), as the rotary embedding sizes itself
    const size_t dims = (size_t)((double)c->head_dim * pct);
    if (dims == 0 || dims % 2)
        return model_fail(err, err_len,
                          "rotary_pct (%g) turns %zu of head_dim's %zu values; "
                          "rotary positions turn pairs",
                          pct, dims, c->head_dim);
    if (!(base > 1.0))
        return model_fail(err, err_len, "rotary_emb_base (%g) must be above 1",
                          base);
    m->rope_freq = malloc(dims / 2 * sizeof *m->rope_freq);
    if (!m->rope_freq)
        return model_fail(err, err_len, "out of memory");
    // 1 / base^(2i / dims), as _compute_default_rope_parameters
    for (size_t i = 0; i < dims / 2; i++)
        m->rope_freq[i] = 1.0 / pow(base, (double)(2 * i) / (double)dims);
    c->kind[0].rope = (struct attn_rotary){.base = base,
                                           .pairing = ATTN_ROPE_HALF,
                                           .dims = dims,
                                           .inv_freq = m->rope_freq};
    return true;
}

static bool read_config(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    xf_act act = XF_ACT_GELU;
    bool parallel, attention_bias;
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
        !config_size(doc, "max_position_embeddings", XF_MAX_POSITIONS, false,
                     2048, &c->max_positions, err, err_len) ||
        !config_eps(doc, "layer_norm_eps", 1e-5f, &c->norm_eps, err, err_len) ||
        !read_activation(doc, &act, err, err_len) ||
        !config_bool(doc, "use_parallel_residual", true, &parallel, err,
                     err_len) ||
        !config_bool(doc, "attention_bias", true, &attention_bias, err,
                     err_len) ||
        !config_bool(doc, "tie_word_embeddings", false, &m->extra.tied, err,
                     err_len))
        return false;
    if (c->hidden % c->heads)
        return model_fail(err, err_len,
                          "num_attention_heads (%zu) does not divide "
                          "hidden_size (%zu)",
                          c->heads, c->hidden);
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    c->arch = (struct xf_arch){.norm = XF_NORM_LAYER,
                               .norm_place = XF_NORM_BEFORE,
                               .ffn = XF_FFN_PLAIN,
                               .act = act,
                               .positions = XF_POS_ROTARY,
                               .final_norm = true,
                               .causal = true,
                               .qkv_bias = attention_bias,
                               .out_bias = attention_bias,
                               .ffn_bias = true,
                               .parallel = parallel};
    return read_rotary(doc, m, err, err_len);
}

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden, IW = b->intermediate, D = b->head_dim;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embed_in.weight");
    WANT(&b->final_norm_w, H, 0, "hidden_size", "final_layer_norm.weight");
    WANT(&b->final_norm_b, H, 0, "hidden_size", "final_layer_norm.bias");
    if (!m->extra.tied) {
        WANT(&b->lm_head, b->vocab_size, H, "vocab_size x hidden_size",
             "embed_out.weight");
        model_tensors_last(w)->bare = true;
    }
    const char *fused = "3 hidden_size x hidden_size";
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
#define L(sub) "layers.%zu." sub, l
        WANT(&y->attn_norm_w, H, 0, "hidden_size", L("input_layernorm.weight"));
        WANT(&y->attn_norm_b, H, 0, "hidden_size", L("input_layernorm.bias"));
        WANT(&y->ffn_norm_w, H, 0, "hidden_size",
             L("post_attention_layernorm.weight"));
        WANT(&y->ffn_norm_b, H, 0, "hidden_size",
             L("post_attention_layernorm.bias"));
        // each head's q, k and v in turn: blocks of D rows, 3 D apart
        struct xf_matrix *qkv[3] = {&y->q_w, &y->k_w, &y->v_w};
        const float **qkv_b[3] = {&y->q_b, &y->k_b, &y->v_b};
        for (size_t i = 0; i < 3; i++) {
            WANT(qkv[i], 3 * H, H, fused,
                 L("attention.query_key_value.weight"));
            model_tensor_strided(model_tensors_last(w), i * D, D, 3 * D, H);
            if (b->arch.qkv_bias) {
                WANT(qkv_b[i], 3 * H, 0, "3 hidden_size",
                     L("attention.query_key_value.bias"));
                model_tensor_strided(model_tensors_last(w), i * D, D, 3 * D, H);
            }
        }
        WANT(&y->o_w, H, H, "hidden_size x hidden_size",
             L("attention.dense.weight"));
        if (b->arch.out_bias)
            WANT(&y->o_b, H, 0, "hidden_size", L("attention.dense.bias"));
        WANT(&y->up_w, IW, H, "intermediate_size x hidden_size",
             L("mlp.dense_h_to_4h.weight"));
        WANT(&y->up_b, IW, 0, "intermediate_size", L("mlp.dense_h_to_4h.bias"));
        WANT(&y->down_w, H, IW, "hidden_size x intermediate_size",
             L("mlp.dense_4h_to_h.weight"));
        WANT(&y->down_b, H, 0, "hidden_size", L("mlp.dense_4h_to_h.bias"));
#undef L
    }
#undef WANT
}

static const char *prefix(const struct shards *s)
{
    size_t in;
    return shards_find(s, "gpt_neox.embed_in.weight", &in) ? "gpt_neox." : "";
}

/* GPTNeoXModel's namespace, but for the attention's buffers older files
 * saved (the causal mask, masked_bias, the rotary frequencies). */
static bool in_network(const char *rest)
{
    static const char *const buffers[] = {".attention.bias",
                                          ".attention.masked_bias",
                                          ".attention.rotary_emb.inv_freq"};
    const char *attn = strstr(rest, ".attention.");
    for (size_t i = 0; attn && i < sizeof buffers / sizeof buffers[0]; i++)
        if (!strncmp(rest, "layers.", 7) && !strcmp(attn, buffers[i]))
            return false;
    return !strncmp(rest, "embed_in.", 9) || !strncmp(rest, "layers.", 7) ||
           !strncmp(rest, "final_layer_norm.", 17);
}

const struct family family_gpt_neox = {
    .model_type = "gpt_neox",
    .network = "GPT-NeoX decoder",
    .decoder = true,
    .read_config = read_config,
    .name_tensors = name_tensors,
    .after_tensors = model_tie_head,
    .prefix = prefix,
    .in_network = in_network,
    .open_tokenizer = tokenizer_json_open,
};
