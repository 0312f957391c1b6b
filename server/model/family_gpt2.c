/*
 * family_gpt2.c - GPT-2 checkpoints (model_type "gpt2": gpt2, distilgpt2
 * and their relatives), as transformers' modeling_gpt2.py computes
 * GPT2Model.
 *
 * The block (transformer.h): LayerNorm before each sublayer (ln_1, ln_2),
 * a plain feed-forward with gelu_new, learned positions (wpe) without
 * token types, causal attention scaled by 1/sqrt(head_dim), every
 * projection biased, a final norm (ln_f).
 *
 * GPT-2's projections are Conv1D: weights stored [in][out] (y = x W + b),
 * and q, k and v fused in c_attn [n_embd][3 n_embd], split in that order.
 * The loader turns each into the core's [out][in] once, at its width
 * (tensors.h). Names may carry a "transformer." prefix (GPT2LMHeadModel's
 * files); the buffers older files saved (h.N.attn.bias, h.N.attn.
 * masked_bias) are not weights and are ignored, as is a copy of the tied
 * lm_head.
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "tokenizer_json.h"

#include <stdio.h>
#include <string.h>

static bool read_config(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    static const char why[] = "attnd computes GPT2Model as released";
    size_t inner, positions_ctx;
    const char *act;
    if (!config_size(doc, "n_layer", XF_MAX_LAYERS, true, 0, &c->layers, err,
                     err_len) ||
        !config_size(doc, "n_embd", XF_MAX_DIM, true, 0, &c->hidden, err,
                     err_len) ||
        !config_size(doc, "n_head", XF_MAX_DIM, true, 0, &c->heads, err,
                     err_len) ||
        !config_size(doc, "vocab_size", XF_MAX_VOCAB, false, 50257,
                     &c->vocab_size, err, err_len) ||
        // older files give the position limit as n_ctx only
        !config_size(doc, "n_ctx", XF_MAX_POSITIONS, false, 1024,
                     &positions_ctx, err, err_len) ||
        !config_size(doc, "n_positions", XF_MAX_POSITIONS, false, positions_ctx,
                     &c->max_positions, err, err_len) ||
        !config_size(doc, "n_inner", XF_MAX_DIM, false, 0, &inner, err,
                     err_len) ||
        !config_string(doc, "activation_function", "gelu_new", &act, err,
                       err_len) ||
        !config_eps(doc, "layer_norm_epsilon", 1e-5f, &c->norm_eps, err,
                    err_len) ||
        !config_bool(doc, "tie_word_embeddings", true, &m->extra.tied, err,
                     err_len) ||
        !config_flag_off(doc, "scale_attn_by_inverse_layer_idx", why, err,
                         err_len) ||
        !config_flag_off(doc, "add_cross_attention", why, err, err_len))
        return false;
    bool scaled;
    if (!config_bool(doc, "scale_attn_weights", true, &scaled, err, err_len))
        return false;
    if (!scaled)
        return model_fail(err, err_len, "scale_attn_weights is false; %s", why);
    if (c->hidden % c->heads)
        return model_fail(err, err_len,
                          "n_head (%zu) does not divide n_embd (%zu)", c->heads,
                          c->hidden);
    // n_inner: null means 4 * n_embd
    c->intermediate = inner ? inner : 4 * c->hidden;
    if (c->intermediate > XF_MAX_DIM)
        return model_fail(err, err_len,
                          "4 x n_embd (%zu) is more than %d: give n_inner",
                          c->intermediate, XF_MAX_DIM);
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    c->arch = (struct xf_arch){.norm = XF_NORM_LAYER,
                               .norm_place = XF_NORM_BEFORE,
                               .ffn = XF_FFN_PLAIN,
                               .positions = XF_POS_LEARNED,
                               .final_norm = true,
                               .causal = true,
                               .qkv_bias = true,
                               .out_bias = true,
                               .ffn_bias = true};
    // gelu_new and PyTorch's tanh approximation are one formula
    if (!strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh"))
        c->arch.act = XF_ACT_GELU_TANH;
    else if (!strcmp(act, "gelu"))
        c->arch.act = XF_ACT_GELU;
    else
        return model_fail(err, err_len,
                          "activation_function '%.64s' is not supported "
                          "(gelu_new, gelu_pytorch_tanh or gelu)",
                          act);
    return true;
}

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden, IW = b->intermediate;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
/* the last named takes outputs [o0, o0 + count) of a Conv1D's */
#define CONV1D(o0, count)                                                      \
    model_tensor_slice(model_tensors_last(w), true, o0, count)
#define SLICE(o0, count)                                                       \
    model_tensor_slice(model_tensors_last(w), false, o0, count)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x n_embd", "wte.weight");
    WANT(&b->pos_emb, b->max_positions, H, "n_positions x n_embd",
         "wpe.weight");
    WANT(&b->final_norm_w, H, 0, "n_embd", "ln_f.weight");
    WANT(&b->final_norm_b, H, 0, "n_embd", "ln_f.bias");
    if (!m->extra.tied) {
        WANT(&b->lm_head, b->vocab_size, H, "vocab_size x n_embd",
             "lm_head.weight");
        model_tensors_last(w)->bare = true;
    }
    const char *fused = "n_embd x 3 n_embd";
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
#define L(sub) "h.%zu." sub, l
        WANT(&y->attn_norm_w, H, 0, "n_embd", L("ln_1.weight"));
        WANT(&y->attn_norm_b, H, 0, "n_embd", L("ln_1.bias"));
        struct xf_matrix *qkv[3] = {&y->q_w, &y->k_w, &y->v_w};
        const float **qkv_b[3] = {&y->q_b, &y->k_b, &y->v_b};
        for (size_t i = 0; i < 3; i++) {
            WANT(qkv[i], H, 3 * H, fused, L("attn.c_attn.weight"));
            CONV1D(i * H, H);
            WANT(qkv_b[i], 3 * H, 0, "3 n_embd", L("attn.c_attn.bias"));
            SLICE(i * H, H);
        }
        WANT(&y->o_w, H, H, "n_embd x n_embd", L("attn.c_proj.weight"));
        CONV1D(0, 0);
        WANT(&y->o_b, H, 0, "n_embd", L("attn.c_proj.bias"));
        WANT(&y->ffn_norm_w, H, 0, "n_embd", L("ln_2.weight"));
        WANT(&y->ffn_norm_b, H, 0, "n_embd", L("ln_2.bias"));
        WANT(&y->up_w, H, IW, "n_embd x n_inner", L("mlp.c_fc.weight"));
        CONV1D(0, 0);
        WANT(&y->up_b, IW, 0, "n_inner", L("mlp.c_fc.bias"));
        WANT(&y->down_w, IW, H, "n_inner x n_embd", L("mlp.c_proj.weight"));
        CONV1D(0, 0);
        WANT(&y->down_b, H, 0, "n_embd", L("mlp.c_proj.bias"));
#undef L
    }
#undef SLICE
#undef CONV1D
#undef WANT
}

static const char *prefix(const struct shards *s)
{
    size_t in;
    return shards_find(s, "transformer.wte.weight", &in) ? "transformer." : "";
}

/* GPT2Model's namespace, but for the attention's two buffers. */
static bool in_network(const char *rest)
{
    const char *attn = strstr(rest, ".attn.");
    if (!strncmp(rest, "h.", 2) && attn &&
        (!strcmp(attn, ".attn.bias") || !strcmp(attn, ".attn.masked_bias")))
        return false;
    return !strncmp(rest, "wte.", 4) || !strncmp(rest, "wpe.", 4) ||
           !strncmp(rest, "h.", 2) || !strncmp(rest, "ln_f.", 5);
}

/* How llama.cpp's GGUF files hold GPT-2: c_attn whole as attn_qkv, and
 * every Conv1D weight turned to [out][in] by its converter. */
static const struct gguf_key gguf_keys[] = {
    {"n_embd", "embedding_length"},
    {"n_layer", "block_count"},
    {"n_head", "attention.head_count"},
    {"n_inner", "feed_forward_length"},
    {"n_positions", "context_length"},
    {"layer_norm_epsilon", "attention.layer_norm_epsilon"},
    {NULL, NULL},
};

#define BLOCK(hf, gguf)                                                        \
    {                                                                          \
        "h.%zu." hf, "blk.%zu." gguf                                           \
    }
static const struct gguf_name gguf_names[] = {
    {"wte.weight", "token_embd.weight"},
    {"wpe.weight", "position_embd.weight"},
    {"ln_f.weight", "output_norm.weight"},
    {"ln_f.bias", "output_norm.bias"},
    {"lm_head.weight", "output.weight"},
    BLOCK("ln_1.weight", "attn_norm.weight"),
    BLOCK("ln_1.bias", "attn_norm.bias"),
    BLOCK("attn.c_attn.weight", "attn_qkv.weight"),
    BLOCK("attn.c_attn.bias", "attn_qkv.bias"),
    BLOCK("attn.c_proj.weight", "attn_output.weight"),
    BLOCK("attn.c_proj.bias", "attn_output.bias"),
    BLOCK("ln_2.weight", "ffn_norm.weight"),
    BLOCK("ln_2.bias", "ffn_norm.bias"),
    BLOCK("mlp.c_fc.weight", "ffn_up.weight"),
    BLOCK("mlp.c_fc.bias", "ffn_up.bias"),
    BLOCK("mlp.c_proj.weight", "ffn_down.weight"),
    BLOCK("mlp.c_proj.bias", "ffn_down.bias"),
    {NULL, NULL},
};
#undef BLOCK

static const struct family_gguf gguf = {
    .arch = "gpt2",
    .keys = gguf_keys,
    .names = gguf_names,
};

const struct family family_gpt2 = {
    .model_type = "gpt2",
    .decoder = true,
    .network = "GPT-2 decoder",
    .read_config = read_config,
    .name_tensors = name_tensors,
    .after_tensors = model_tie_head,
    .prefix = prefix,
    .in_network = in_network,
    .open_tokenizer = tokenizer_json_open,
    .gguf = &gguf,
};
