/*
 * family_phi3.c - Phi-3 checkpoints (model_type "phi3": Phi-3 and 3.5
 * mini and medium, Phi-4-mini), as transformers' modeling_phi3.py and
 * modeling_rope_utils.py compute Phi3ForCausalLM.
 *
 * The block (transformer.h) is LLaMA's: RMSNorm before each sublayer, a
 * gated feed-forward up * silu(gate), rotary positions paired as
 * rotate_half pairs them, causal attention over grouped KV heads, a final
 * norm, no biases. Three things are Phi's own:
 *
 * - q, k and v are one projection, qkv_proj, whose output rows are q's
 *   (heads x head_dim), then k's, then v's (kv_heads x head_dim each);
 *   gate and up are one too, gate_up_proj, gate's rows first. Each slot
 *   reads its rows in place (model_tensor_slice()).
 * - partial_rotary_factor turns the first int(head_dim x factor) values
 *   of each head only (Phi-4-mini's 0.75); the rest pass through.
 * - rope_scaling of type longrope (Phi-3.5, Phi-4-mini, the 128k models;
 *   "su" and "yarn" are its older names) divides frequency i by
 *   short_factor[i] or long_factor[i] and multiplies cos and sin by an
 *   attention factor, attention_factor when rope_scaling gives one, else
 *   sqrt(1 + ln(s) / ln(original_max_position_embeddings)) with s =
 *   max_position_embeddings / original_max_position_embeddings (1 when s
 *   <= 1). Which factors turn a run is decided by its length N, as
 *   transformers' longrope_frequency_update decides it: the long ones
 *   when N > original_max_position_embeddings, every position of the run
 *   included, else the short ones. The core holds the two as one kind of
 *   layer's rotary and long rotary, switched past long_after
 *   (transformer.h); a generation whose cache the switch outgrows runs
 *   the whole sequence again, as Phi3ForCausalLM's
 *   prepare_inputs_for_generation drops its cache there.
 *
 * sliding_window (null: none) slides over every layer: token i sees
 * tokens j with i - window < j <= i.
 *
 * Tensors: model.embed_tokens, model.layers.N.{input_layernorm,
 * self_attn.qkv_proj, self_attn.o_proj, post_attention_layernorm,
 * mlp.gate_up_proj, mlp.down_proj}, model.norm, and lm_head unless the
 * embeddings are tied (a base model saved alone has no "model." prefix).
 */
#include "config_keys.h"
#include "family.h"
#include "fail.h"
#include "tokenizer_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- config */

static bool read_sizes(const cJSON *doc, struct xf_model *c, char *err,
                       size_t err_len)
{
    const char *act;
    if (!config_decoder_sizes(doc, 4096, 0, c, err, err_len) ||
        !config_size(doc, "sliding_window", XF_MAX_POSITIONS, false, 0,
                     &c->kind[0].window, err, err_len) ||
        !config_string(doc, "hidden_act", "silu", &act, err, err_len) ||
        !config_eps(doc, "rms_norm_eps", 1e-5f, &c->norm_eps, err, err_len))
        return false;
    if (strcmp(act, "silu"))
        return model_fail(err, err_len,
                          "hidden_act '%.64s' is not supported (only silu)",
                          act);
    return true;
}

/* rope_scaling's longrope, as read: each factor list has pairs entries. */
struct longrope {
    bool on;
    double original;         /* original_max_position_embeddings */
    double attention_factor; /* 0: from the lengths */
    const cJSON *short_factor, *long_factor;
};

/* One of longrope's factor lists: pairs numbers, each finite and above
 * 0. */
static bool read_factors(const cJSON *scaling, const char *key, size_t pairs,
                         const cJSON **out, char *err, size_t err_len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(scaling, key);
    if (!cJSON_IsArray(v) || (size_t)cJSON_GetArraySize(v) != pairs)
        return model_fail(err, err_len,
                          "rope_scaling's %s is not a list of %zu numbers "
                          "(half the %zu rotary dims of a head)",
                          key, pairs, 2 * pairs);
    size_t i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, v)
    {
        if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) ||
            !(f->valuedouble > 0.0))
            return model_fail(err, err_len,
                              "rope_scaling's %s[%zu] (%g) must be a finite "
                              "number above 0",
                              key, i, cJSON_IsNumber(f) ? f->valuedouble : NAN);
        i++;
    }
    *out = v;
    return true;
}

/* rope_scaling: none, or longrope (su and yarn are its older names,
 * which Phi3Config renames) with its two lists of pairs factors. */
static bool read_rope_scaling(const cJSON *doc, size_t pairs,
                              struct longrope *lr, char *err, size_t err_len)
{
    const cJSON *r;
    const char *type;
    if (!config_rope_scaling(doc, &r, &type, err, err_len))
        return false;
    if (!type)
        return true;
    if (strcmp(type, "longrope") && strcmp(type, "su") && strcmp(type, "yarn"))
        return model_fail(err, err_len,
                          "rope_scaling's type '%.64s' is not supported (only "
                          "longrope)",
                          type);
    size_t original;
    if (!read_factors(r, "short_factor", pairs, &lr->short_factor, err,
                      err_len) ||
        !read_factors(r, "long_factor", pairs, &lr->long_factor, err,
                      err_len) ||
        !config_positive(r, "attention_factor", 0.0, &lr->attention_factor, err,
                         err_len) ||
        !config_size(doc, "original_max_position_embeddings", XF_MAX_POSITIONS,
                     false, 4096, &original, err, err_len))
        return false;
    lr->original = (double)original;
    lr->on = true;
    return true;
}

/* The rotary (and with longrope its long twin) of the one kind of layer:
 * frequencies 1 / (ext_i theta^(2i / dims)), ext the short or long
 * factors (1 without longrope), cos and sin times the attention factor;
 * made once, into m->rope_freq. */
static bool make_rotary(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    double theta, partial;
    if (!config_positive(doc, "rope_theta", 10000.0, &theta, err, err_len) ||
        !config_positive(doc, "partial_rotary_factor", 1.0, &partial, err,
                         err_len))
        return false;
    if (partial > 1.0)
        return model_fail(err, err_len,
                          "partial_rotary_factor (%g) is more than 1: more "
                          "than a head to turn",
                          partial);
    if (!(theta > 1.0))
        return model_fail(err, err_len, "rope_theta (%g) must be above 1",
                          theta);
    // int(head_dim * partial_rotary_factor), as the rotary sizes itself
    const size_t dims = (size_t)((double)c->head_dim * partial);
    if (dims == 0 || dims % 2)
        return model_fail(err, err_len,
                          "partial_rotary_factor (%g) turns %zu of "
                          "head_dim's %zu values; rotary positions turn pairs",
                          partial, dims, c->head_dim);
    const size_t pairs = dims / 2;
    struct longrope lr = {0};
    if (!read_rope_scaling(doc, pairs, &lr, err, err_len))
        return false;
    m->rope_freq = malloc(2 * pairs * sizeof *m->rope_freq);
    if (!m->rope_freq)
        return model_fail(err, err_len, "out of memory");
    double *short_freq = m->rope_freq, *long_freq = m->rope_freq + pairs;
    for (size_t i = 0; i < pairs; i++) {
        const double f = 1.0 / pow(theta, (double)(2 * i) / (double)dims);
        short_freq[i] =
            lr.on ? f / cJSON_GetArrayItem(lr.short_factor, (int)i)->valuedouble
                  : f;
        long_freq[i] =
            lr.on ? f / cJSON_GetArrayItem(lr.long_factor, (int)i)->valuedouble
                  : f;
    }
    struct xf_layer_kind *k = &c->kind[0];
    k->rope = (struct attn_rotary){.base = theta,
                                   .pairing = ATTN_ROPE_HALF,
                                   .dims = dims,
                                   .inv_freq = short_freq};
    if (!lr.on)
        return true;
    // the attention factor: rope_scaling's, else from the lengths
    const double scale = (double)c->max_positions / lr.original;
    double att = lr.attention_factor;
    if (att == 0.0 && scale > 1.0 && lr.original < 2.0)
        return model_fail(err, err_len,
                          "original_max_position_embeddings (%g) leaves "
                          "longrope's attention factor undefined (a log of "
                          "1 to divide by)",
                          lr.original);
    if (att == 0.0)
        att = scale <= 1.0 ? 1.0 : sqrt(1.0 + log(scale) / log(lr.original));
    k->rope.factor = att;
    k->long_rope = k->rope;
    k->long_rope.inv_freq = long_freq;
    k->long_after = (size_t)lr.original;
    m->extra.rope_scaling[0] = "longrope";
    return true;
}

static bool read_config(const cJSON *doc, struct model *m, char *err,
                        size_t err_len)
{
    struct xf_model *c = &m->xf;
    if (!read_sizes(doc, c, err, err_len) ||
        !config_bool(doc, "tie_word_embeddings", false, &m->extra.tied, err,
                     err_len))
        return false;
    c->arch = (struct xf_arch){.norm = XF_NORM_RMS,
                               .norm_place = XF_NORM_BEFORE,
                               .ffn = XF_FFN_GATED,
                               .act = XF_ACT_SILU,
                               .positions = XF_POS_ROTARY,
                               .final_norm = true,
                               .causal = true};
    return make_rotary(doc, m, err, err_len);
}

/* ---------------------------------------------------------- the tensors */

static void name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden, IW = b->intermediate;
    const size_t hd = b->heads * b->head_dim, gd = b->kv_heads * b->head_dim;
#define WANT(slot, rows, cols, what, ...)                                      \
    MODEL_TENSOR(w, slot, rows, cols, what, __VA_ARGS__)
/* the last named takes rows [r0, r0 + count) of its tensor, in place */
#define ROWS(r0, count)                                                        \
    model_tensor_slice(model_tensors_last(w), false, r0, count)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embed_tokens.weight");
    WANT(&b->final_norm_w, H, 0, "hidden_size", "norm.weight");
    if (!m->extra.tied) {
        WANT(&b->lm_head, b->vocab_size, H, "vocab_size x hidden_size",
             "lm_head.weight");
        model_tensors_last(w)->bare = true;
    }
    const char *qkv = "(heads + 2 kv_heads) x head_dim x hidden_size";
    const char *gate_up = "2 intermediate_size x hidden_size";
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
#define L(sub) "layers.%zu." sub, l
        WANT(&y->attn_norm_w, H, 0, "hidden_size", L("input_layernorm.weight"));
        WANT(&y->ffn_norm_w, H, 0, "hidden_size",
             L("post_attention_layernorm.weight"));
        // [q; k; v] rows
        WANT(&y->q_w, hd + 2 * gd, H, qkv, L("self_attn.qkv_proj.weight"));
        ROWS(0, hd);
        WANT(&y->k_w, hd + 2 * gd, H, qkv, L("self_attn.qkv_proj.weight"));
        ROWS(hd, gd);
        WANT(&y->v_w, hd + 2 * gd, H, qkv, L("self_attn.qkv_proj.weight"));
        ROWS(hd + gd, gd);
        WANT(&y->o_w, H, hd, "hidden_size x heads x head_dim",
             L("self_attn.o_proj.weight"));
        // [gate; up] rows
        WANT(&y->gate_w, 2 * IW, H, gate_up, L("mlp.gate_up_proj.weight"));
        ROWS(0, IW);
        WANT(&y->up_w, 2 * IW, H, gate_up, L("mlp.gate_up_proj.weight"));
        ROWS(IW, IW);
        WANT(&y->down_w, H, IW, "hidden_size x intermediate_size",
             L("mlp.down_proj.weight"));
#undef L
    }
#undef ROWS
#undef WANT
}

static const char *prefix(const struct shards *s)
{
    size_t in;
    return shards_find(s, "model.embed_tokens.weight", &in) ? "model." : "";
}

/* ------------------------------------------------------------ in GGUF */

/* Phi-3's fused projections, as llama.cpp's converter keeps them. */
static const struct gguf_name gguf_names[] = {
    {"layers.%zu.self_attn.qkv_proj.weight", "blk.%zu.attn_qkv.weight"},
    {"layers.%zu.mlp.gate_up_proj.weight", "blk.%zu.ffn_up.weight"},
    {NULL, NULL},
};

/* The F32 tensor name of pairs values as a JSON list into *list (NULL
 * when the file has no such tensor); false with one line in err when it
 * has one of another type or size. */
static bool factors_list(const struct shards *s, const char *name, size_t pairs,
                         cJSON **list, char *err, size_t err_len)
{
    *list = NULL;
    size_t in;
    const struct shard_tensor *t = shards_find(s, name, &in);
    if (!t)
        return true;
    if (t->dtype != ATTN_F32 || t->ndim != 1 || t->shape[0] != pairs)
        return model_fail(err, err_len,
                          "tensor '%s' is %s of %llu values; F32 of %zu (the "
                          "rotary pairs) expected",
                          name, t->type, (unsigned long long)t->shape[0],
                          pairs);
    const unsigned char *at =
        (const unsigned char *)s->shard[in].map + t->offset;
    *list = cJSON_CreateArray();
    for (size_t i = 0; *list && i < pairs; i++) {
        float v;
        memcpy(&v, at + 4 * i, sizeof v); /* any alignment */
        if (!cJSON_AddItemToArray(*list, cJSON_CreateNumber(v))) {
            cJSON_Delete(*list);
            *list = NULL;
        }
    }
    return *list || model_fail(err, err_len, "out of memory");
}

/* What llama.cpp reads beside the keys: the rotary's share of each head
 * (rope.dimension_count, as partial_rotary_factor), and longrope from
 * the factor tensors its converter writes (rope_factors_short and
 * _long) with rope.scaling.original_context_length and attn_factor. The
 * sliding window is not read: llama.cpp computes Phi-3 without one. */
static bool gguf_config(cJSON *config, const struct shards *s, const char *arch,
                        char *err, size_t err_len)
{
    const struct gguf_file *g = &s->shard[0].gguf;
    char key[96];
    const cJSON *hidden = cJSON_GetObjectItem(config, "hidden_size");
    const cJSON *heads = cJSON_GetObjectItem(config, "num_attention_heads");
    if (!cJSON_IsNumber(hidden) || !cJSON_IsNumber(heads) ||
        !(heads->valuedouble >= 1 && heads->valuedouble <= XF_MAX_DIM) ||
        !(hidden->valuedouble >= 1 && hidden->valuedouble <= XF_MAX_DIM))
        return true; /* the family's reading names what is wrong */
    const size_t head_dim =
        (size_t)hidden->valuedouble / (size_t)heads->valuedouble;
    size_t dims = head_dim;
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
    if (gguf_find(g, key)) {
        uint32_t n;
        if (!gguf_get_u32(g, key, &n, err, err_len))
            return false;
        if (n == 0 || n > head_dim || n % 2)
            return model_fail(err, err_len,
                              "key '%s' is %u; an even count of a head's %zu "
                              "values expected",
                              key, n, head_dim);
        dims = n;
        if (!cJSON_AddNumberToObject(config, "partial_rotary_factor",
                                     (double)n / (double)head_dim))
            return model_fail(err, err_len, "out of memory");
    }
    cJSON *short_f, *long_f;
    if (!factors_list(s, "rope_factors_short.weight", dims / 2, &short_f, err,
                      err_len))
        return false;
    if (!factors_list(s, "rope_factors_long.weight", dims / 2, &long_f, err,
                      err_len)) {
        cJSON_Delete(short_f);
        return false;
    }
    if (!short_f && !long_f)
        return true;
    if (!short_f || !long_f) {
        cJSON_Delete(short_f);
        cJSON_Delete(long_f);
        return model_fail(err, err_len,
                          "rope_factors_short and rope_factors_long come "
                          "together, or neither");
    }
    // the factors are longrope's, whatever rope.scaling.type said
    cJSON_DeleteItemFromObjectCaseSensitive(config, "rope_scaling");
    cJSON *r = cJSON_AddObjectToObject(config, "rope_scaling");
    if (!r || !cJSON_AddStringToObject(r, "rope_type", "longrope") ||
        !cJSON_AddItemToObject(r, "short_factor", short_f)) {
        cJSON_Delete(short_f);
        cJSON_Delete(long_f);
        return model_fail(err, err_len, "out of memory");
    }
    if (!cJSON_AddItemToObject(r, "long_factor", long_f)) {
        cJSON_Delete(long_f);
        return model_fail(err, err_len, "out of memory");
    }
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch);
    float factor;
    if (gguf_find(g, key) &&
        (!gguf_get_f32(g, key, &factor, err, err_len) ||
         !cJSON_AddNumberToObject(r, "attention_factor", factor)))
        return err[0] ? false : model_fail(err, err_len, "out of memory");
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
    uint32_t original;
    if (gguf_find(g, key) &&
        (!gguf_get_u32(g, key, &original, err, err_len) ||
         !cJSON_AddNumberToObject(config, "original_max_position_embeddings",
                                  original)))
        return err[0] ? false : model_fail(err, err_len, "out of memory");
    return true;
}

static const struct family_gguf gguf = {
    .arch = "phi3",
    .keys = gguf_llama_keys,
    .overrides = gguf_names,
    .names = gguf_llama_names,
    .longrope_factors = true,
    .config = gguf_config,
};

const struct family family_phi3 = {
    .model_type = "phi3",
    .network = "Phi-3 decoder",
    .decoder = true,
    .read_config = read_config,
    .name_tensors = name_tensors,
    .after_tensors = model_tie_head,
    .prefix = prefix,
    .in_network = model_llama_namespace,
    .open_tokenizer = tokenizer_json_open,
    .gguf = &gguf,
};
