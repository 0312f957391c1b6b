/*
 * family_llama.c - LLaMA's block and its close relatives, as
 * transformers' modeling_llama.py, modeling_mistral.py, modeling_qwen2.py,
 * modeling_qwen3.py and modeling_olmo2.py compute them: five rows of the
 * family table (model_type "llama", "mistral", "qwen2", "qwen3", "olmo2")
 * over one file, what differs between them a row of the table below.
 *
 * The block (transformer.h): RMSNorm before each sublayer, a SwiGLU
 * feed-forward down(silu(gate x) * up x), rotary positions paired as
 * rotate_half pairs them (i with i + head_dim/2), causal attention over
 * grouped KV heads, a final norm. Qwen2's q, k and v carry biases; Qwen3
 * norms each head of q and k before the rotation; Mistral may slide a
 * window. OLMo 2 norms the sublayers' outputs instead of their inputs
 * (h + norm(attn(h)), then h + norm(mlp(h))) and q and k each over its
 * whole projection, every head at once, before the rotation.
 * rope_scaling of type llama3 scales the frequencies (LLaMA 3.1 and 3.2);
 * any other scaling is refused.
 *
 * Tensors: model.embed_tokens, model.layers.N.{input_layernorm,
 * self_attn.{q,k,v,o}_proj, post_attention_layernorm,
 * mlp.{gate,up,down}_proj}, model.norm, and lm_head unless the embeddings
 * are tied (a base model saved alone has no "model." prefix). OLMo 2's
 * layers have no input_layernorm; their post_attention_layernorm norms
 * the attention's output and post_feedforward_layernorm the MLP's.
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "tokenizer_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What sets one row apart. */
struct variant {
    const char *model_type;
    bool qkv_bias_always; /* Qwen2: q, k and v biased, o not */
    bool qk_norm;         /* Qwen3: q_norm and k_norm, each head */
    bool window;          /* Mistral: sliding_window */
    bool qwen_window;     /* Qwen2/3: a window only with use_sliding_window,
                             and then per layer, which attnd refuses */
    bool olmo2;           /* OLMo 2: norms on the sublayers' outputs, and
                             q_norm and k_norm over the whole projections */
    bool mlp_bias;        /* config.json's mlp_bias gives the MLP biases
                             (OLMo 2's MLP has none) */
    float eps;            /* rms_norm_eps when absent */
};

static const struct variant variants[] = {
    {"llama", false, false, false, false, false, true, 1e-6f},
    {"mistral", false, false, true, false, false, true, 1e-6f},
    {"qwen2", true, false, false, true, false, true, 1e-6f},
    {"qwen3", false, true, false, true, false, true, 1e-6f},
    {"olmo2", false, false, false, false, true, false, 1e-5f},
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

/* ------------------------------------------------------------- config */

/* LLaMA 3's rope_scaling: how the frequencies are scaled, read with the
 * rest of config.json and used once to make them. */
struct llama3_scaling {
    bool on;
    double theta, factor, low, high, original;
};

/* rope_scaling: null, "default", or "llama3" with its four numbers. */
static bool read_rope_scaling(const cJSON *doc, struct llama3_scaling *x,
                              char *err, size_t err_len)
{
    const cJSON *r;
    const char *type;
    if (!config_rope_scaling(doc, &r, &type, err, err_len))
        return false;
    if (!type)
        return true;
    if (strcmp(type, "llama3"))
        return model_fail(err, err_len,
                          "rope_scaling's type '%.64s' is not supported (only "
                          "llama3)",
                          type);
    double original;
    if (!config_positive(r, "factor", 0, &x->factor, err, err_len) ||
        !config_positive(r, "low_freq_factor", 0, &x->low, err, err_len) ||
        !config_positive(r, "high_freq_factor", 0, &x->high, err, err_len) ||
        !config_positive(r, "original_max_position_embeddings", 0, &original,
                         err, err_len))
        return false;
    if (x->factor == 0 || x->low == 0 || x->high == 0 || original == 0)
        return model_fail(err, err_len,
                          "rope_scaling of type llama3 needs factor, "
                          "low_freq_factor, high_freq_factor and "
                          "original_max_position_embeddings");
    if (!(x->high > x->low))
        return model_fail(err, err_len,
                          "rope_scaling's high_freq_factor (%g) must be above "
                          "its low_freq_factor (%g)",
                          x->high, x->low);
    x->original = original;
    x->on = true;
    return true;
}

static bool read_config(const cJSON *doc, struct model *m,
                        struct llama3_scaling *scaling, char *err,
                        size_t err_len)
{
    const struct variant *v = variant_of(doc);
    struct xf_model *c = &m->xf;
    const char *act;
    if (!config_decoder_sizes(doc, 2048, 0, c, err, err_len) ||
        !config_string(doc, "hidden_act", "silu", &act, err, err_len) ||
        !config_eps(doc, "rms_norm_eps", v->eps, &c->norm_eps, err, err_len) ||
        !config_bool(doc, "tie_word_embeddings", false, &m->extra.tied, err,
                     err_len) ||
        !read_rope_scaling(doc, scaling, err, err_len))
        return false;
    if (strcmp(act, "silu"))
        return model_fail(err, err_len,
                          "hidden_act '%.64s' is not supported (only silu)",
                          act);
    if (c->head_dim % 2)
        return model_fail(err, err_len,
                          "head_dim (%zu) is odd; rotary positions turn pairs",
                          c->head_dim);
    if (!config_positive(doc, "rope_theta", 10000.0, &scaling->theta, err,
                         err_len))
        return false;
    m->extra.rope_scaling[0] = scaling->on ? "llama3" : NULL;
    bool attention_bias, mlp_bias = false;
    if (!config_bool(doc, "attention_bias", false, &attention_bias, err,
                     err_len) ||
        (v->mlp_bias &&
         !config_bool(doc, "mlp_bias", false, &mlp_bias, err, err_len)))
        return false;
    if (v->window && !config_size(doc, "sliding_window", XF_MAX_POSITIONS,
                                  false, 0, &c->kind[0].window, err, err_len))
        return false;
    if (v->qwen_window &&
        !config_flag_off(doc, "use_sliding_window",
                         "windows on some layers only are not supported", err,
                         err_len))
        return false;
    c->arch = (struct xf_arch){.norm = XF_NORM_RMS,
                               .norm_place =
                                   v->olmo2 ? XF_NORM_OUTPUT : XF_NORM_BEFORE,
                               .ffn = XF_FFN_GATED,
                               .act = XF_ACT_SILU,
                               .positions = XF_POS_ROTARY,
                               .final_norm = true,
                               .causal = true,
                               .qk_norm = v->qk_norm,
                               .qk_norm_whole = v->olmo2,
                               .qkv_bias = attention_bias || v->qkv_bias_always,
                               .out_bias = attention_bias,
                               .ffn_bias = mlp_bias};
    return true;
}

/* The frequencies of the rotary pairs: theta^(-2i / head_dim), scaled as
 * rope_scaling says (LLaMA 3's _compute_llama3_parameters): a wavelength
 * shorter than original / high_freq_factor is kept, one longer than
 * original / low_freq_factor divided by factor, and one between blended. */
static bool make_frequencies(struct model *m, const struct llama3_scaling *x,
                             char *err, size_t err_len)
{
    const size_t pairs = m->xf.head_dim / 2;
    m->rope_freq = malloc(pairs * sizeof *m->rope_freq);
    if (!m->rope_freq)
        return model_fail(err, err_len, "out of memory");
    const double low_wavelen = x->original / x->low;
    const double high_wavelen = x->original / x->high;
    for (size_t i = 0; i < pairs; i++) {
        const double f =
            pow(x->theta, -(double)(2 * i) / (double)m->xf.head_dim);
        const double wavelen = 2.0 * 3.14159265358979323846 / f;
        double scaled = f;
        if (x->on && wavelen > low_wavelen) {
            scaled = f / x->factor;
        } else if (x->on && wavelen >= high_wavelen) {
            const double s =
                (x->original / wavelen - x->low) / (x->high - x->low);
            scaled = (1.0 - s) * f / x->factor + s * f;
        }
        m->rope_freq[i] = scaled;
    }
    m->xf.kind[0].rope = (struct attn_rotary){
        .base = x->theta, .pairing = ATTN_ROPE_HALF, .inv_freq = m->rope_freq};
    return true;
}

static bool read_all(const cJSON *doc, struct model *m, char *err,
                     size_t err_len)
{
    struct llama3_scaling scaling = {0};
    return read_config(doc, m, &scaling, err, err_len) &&
           make_frequencies(m, &scaling, err, err_len);
}

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden;
    const size_t hd = b->heads * b->head_dim, gd = b->kv_heads * b->head_dim;
    const size_t D = b->head_dim;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embed_tokens.weight");
    WANT(&b->final_norm_w, H, 0, "hidden_size", "norm.weight");
    if (!m->extra.tied) {
        WANT(&b->lm_head, b->vocab_size, H, "vocab_size x hidden_size",
             "lm_head.weight");
        model_tensors_last(w)->bare = true;
    }
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
#define L(sub) "layers.%zu." sub, l
        if (b->arch.norm_place == XF_NORM_OUTPUT) { /* OLMo 2 */
            WANT(&y->attn_out_norm_w, H, 0, "hidden_size",
                 L("post_attention_layernorm.weight"));
            WANT(&y->ffn_out_norm_w, H, 0, "hidden_size",
                 L("post_feedforward_layernorm.weight"));
        } else {
            WANT(&y->attn_norm_w, H, 0, "hidden_size",
                 L("input_layernorm.weight"));
            WANT(&y->ffn_norm_w, H, 0, "hidden_size",
                 L("post_attention_layernorm.weight"));
        }
        model_llama_projections(m, w, l);
        if (b->arch.qk_norm) {
            WANT(&y->q_norm_w, D, 0, "head_dim", L("self_attn.q_norm.weight"));
            WANT(&y->k_norm_w, D, 0, "head_dim", L("self_attn.k_norm.weight"));
        }
        if (b->arch.qk_norm_whole) {
            WANT(&y->q_norm_w, hd, 0, "heads x head_dim",
                 L("self_attn.q_norm.weight"));
            WANT(&y->k_norm_w, gd, 0, "kv_heads x head_dim",
                 L("self_attn.k_norm.weight"));
        }
#undef L
    }
#undef WANT
}

static const char *prefix(const struct shards *s)
{
    size_t in;
    return shards_find(s, "model.embed_tokens.weight", &in) ? "model." : "";
}

/* ------------------------------------------------------------ in GGUF */

/* llama.cpp's names of the keys and tensors of LLaMA-style blocks: the
 * llama, qwen2 and qwen3 architectures (Qwen's biases and Qwen3's q and k
 * norms among them). */
const struct gguf_key gguf_llama_keys[] = {
    {"hidden_size", "embedding_length"},
    {"num_hidden_layers", "block_count"},
    {"intermediate_size", "feed_forward_length"},
    {"num_attention_heads", "attention.head_count"},
    {"num_key_value_heads", "attention.head_count_kv"},
    {"head_dim", "attention.key_length"},
    {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
    {"rope_theta", "rope.freq_base"},
    {"max_position_embeddings", "context_length"},
    {NULL, NULL},
};

#define BLOCK(hf, gguf)                                                        \
    {                                                                          \
        "layers.%zu." hf, "blk.%zu." gguf                                      \
    }
const struct gguf_name gguf_llama_names[] = {
    {"embed_tokens.weight", "token_embd.weight"},
    {"norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    BLOCK("input_layernorm.weight", "attn_norm.weight"),
    BLOCK("post_attention_layernorm.weight", "ffn_norm.weight"),
    BLOCK("self_attn.q_proj.weight", "attn_q.weight"),
    BLOCK("self_attn.k_proj.weight", "attn_k.weight"),
    BLOCK("self_attn.v_proj.weight", "attn_v.weight"),
    BLOCK("self_attn.o_proj.weight", "attn_output.weight"),
    BLOCK("self_attn.q_proj.bias", "attn_q.bias"),
    BLOCK("self_attn.k_proj.bias", "attn_k.bias"),
    BLOCK("self_attn.v_proj.bias", "attn_v.bias"),
    BLOCK("self_attn.o_proj.bias", "attn_output.bias"),
    BLOCK("self_attn.q_norm.weight", "attn_q_norm.weight"),
    BLOCK("self_attn.k_norm.weight", "attn_k_norm.weight"),
    BLOCK("mlp.gate_proj.weight", "ffn_gate.weight"),
    BLOCK("mlp.up_proj.weight", "ffn_up.weight"),
    BLOCK("mlp.down_proj.weight", "ffn_down.weight"),
    BLOCK("mlp.gate_proj.bias", "ffn_gate.bias"),
    BLOCK("mlp.up_proj.bias", "ffn_up.bias"),
    BLOCK("mlp.down_proj.bias", "ffn_down.bias"),
    {NULL, NULL},
};
#undef BLOCK

/* OLMo 2's norms are on the sublayers' outputs. */
static const struct gguf_name olmo2_names[] = {
    {"layers.%zu.post_attention_layernorm.weight",
     "blk.%zu.post_attention_norm.weight"},
    {"layers.%zu.post_feedforward_layernorm.weight",
     "blk.%zu.post_ffw_norm.weight"},
    {NULL, NULL},
};

#define GGUF_ROW(name, interleaved)                                            \
    {                                                                          \
        .arch = name, .keys = gguf_llama_keys, .names = gguf_llama_names,      \
        .rope_interleaved = interleaved,                                       \
    }
static const struct family_gguf gguf_llama = {
    .arch = "llama",
    .keys = gguf_llama_keys,
    .names = gguf_llama_names,
    .rope_interleaved = true,
    .rope_freqs = true,
};
static const struct family_gguf gguf_qwen2 = GGUF_ROW("qwen2", false);
static const struct family_gguf gguf_qwen3 = GGUF_ROW("qwen3", false);
static const struct family_gguf gguf_olmo2 = {
    .arch = "olmo2",
    .keys = gguf_llama_keys,
    .overrides = olmo2_names,
    .names = gguf_llama_names,
};
#undef GGUF_ROW

#define ROW(type, name, in_gguf)                                               \
    {                                                                          \
        .model_type = type, .network = name, .decoder = true,                  \
        .read_config = read_all, .name_tensors = name_tensors,                 \
        .after_tensors = model_tie_head, .prefix = prefix,                     \
        .in_network = model_llama_namespace,                                   \
        .open_tokenizer = tokenizer_json_open, .gguf = in_gguf,                \
    }

const struct family family_llama = ROW("llama", "LLaMA decoder", &gguf_llama);
const struct family family_mistral = ROW("mistral", "Mistral decoder", NULL);
const struct family family_qwen2 = ROW("qwen2", "Qwen2 decoder", &gguf_qwen2);
const struct family family_qwen3 = ROW("qwen3", "Qwen3 decoder", &gguf_qwen3);
const struct family family_olmo2 = ROW("olmo2", "OLMo 2 decoder", &gguf_olmo2);
