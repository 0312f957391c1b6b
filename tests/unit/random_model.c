/*
 * random_model.c - random decoders and encoders of any arch for the unit
 * tests (random_model.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "random_model.h"
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *take(struct test_model *o, size_t count, float scale,
                   float offset)
{
    assert_true(o->used + count <= o->size);
    float *p = o->block + o->used;
    for (size_t i = 0; i < count; i++)
        p[i] = offset + scale * p[i];
    o->used += count;
    return p;
}

void test_model_make(struct test_model *o, const struct xf_arch *a,
                     size_t layers, size_t heads, size_t kv_heads,
                     size_t head_dim, size_t hidden, size_t inter,
                     uint64_t seed)
{
    const size_t H = hidden, J = inter, D = head_dim;
    const size_t vocab = 40, positions = 80, types = 2;
    memset(o, 0, sizeof *o);
    o->size = (vocab + positions + types + 4) * H +
              layers * (2 * heads * D * H + 2 * kv_heads * D * H +
                        2 * heads * D + 2 * kv_heads * D + 6 * H + 3 * J * H +
                        2 * J + H + (heads + kv_heads) * D);
    o->block = malloc(o->size * sizeof(float));
    o->layers = calloc(layers, sizeof *o->layers);
    fill_normal(o->block, o->size, seed, 1.0f);
    const bool ln = a->norm == XF_NORM_LAYER;
    struct xf_model *m = &o->m;
    *m = (struct xf_model){.arch = *a,
                           .layers = layers,
                           .heads = heads,
                           .kv_heads = kv_heads,
                           .head_dim = D,
                           .hidden = H,
                           .intermediate = J,
                           .vocab_size = vocab,
                           .max_positions = positions,
                           .type_vocab_size = a->token_types ? types : 0,
                           .norm_eps = 1e-6f,
                           .layer = o->layers};
    if (a->positions == XF_POS_ROTARY)
        m->kind[0].rope =
            (struct attn_rotary){.base = 500.0, .pairing = ATTN_ROPE_HALF};
    m->word_emb = test_f32(take(o, vocab * H, 1.0f, 0.0f));
    if (a->positions == XF_POS_LEARNED)
        m->pos_emb = test_f32(take(o, positions * H, 0.5f, 0.0f));
    if (a->token_types)
        m->type_emb = test_f32(take(o, types * H, 0.5f, 0.0f));
    if (a->embed_norm) {
        m->embed_norm_w = take(o, H, 0.1f, 1.0f);
        m->embed_norm_b = ln ? take(o, H, 0.1f, 0.0f) : NULL;
    }
    if (a->final_norm) {
        m->final_norm_w = take(o, H, 0.1f, 1.0f);
        m->final_norm_b = ln ? take(o, H, 0.1f, 0.0f) : NULL;
    }
    const float sh = 1.0f / sqrtf((float)H),
                sd = 1.0f / sqrtf((float)(heads * D));
    for (size_t l = 0; l < layers; l++) {
        struct xf_layer *y = &o->layers[l];
        y->q_w = test_f32(take(o, heads * D * H, 1.5f * sh, 0.0f));
        y->k_w = test_f32(take(o, kv_heads * D * H, 1.5f * sh, 0.0f));
        y->v_w = test_f32(take(o, kv_heads * D * H, sh, 0.0f));
        y->o_w = test_f32(take(o, H * heads * D, sd, 0.0f));
        if (a->qkv_bias) {
            y->q_b = take(o, heads * D, 0.2f, 0.0f);
            y->k_b = take(o, kv_heads * D, 0.2f, 0.0f);
            y->v_b = take(o, kv_heads * D, 0.1f, 0.0f);
        }
        if (a->out_bias)
            y->o_b = take(o, H, 0.1f, 0.0f);
        const bool in_norms = a->norm_place != XF_NORM_OUTPUT;
        const bool out_norms = a->norm_place == XF_NORM_SANDWICH ||
                               a->norm_place == XF_NORM_OUTPUT;
        if (in_norms) {
            y->attn_norm_w = take(o, H, 0.1f, 1.0f);
            y->ffn_norm_w = take(o, H, 0.1f, 1.0f);
        }
        if (out_norms) {
            y->attn_out_norm_w = take(o, H, 0.3f, 1.0f);
            y->ffn_out_norm_w = take(o, H, 0.3f, 1.0f);
        }
        if (a->qk_norm) {
            y->q_norm_w = take(o, D, 0.3f, 1.0f);
            y->k_norm_w = take(o, D, 0.3f, 1.0f);
        }
        if (a->qk_norm_whole) {
            y->q_norm_w = take(o, heads * D, 0.3f, 1.0f);
            y->k_norm_w = take(o, kv_heads * D, 0.3f, 1.0f);
        }
        if (ln && in_norms) {
            y->attn_norm_b = take(o, H, 0.1f, 0.0f);
            y->ffn_norm_b = take(o, H, 0.1f, 0.0f);
        }
        if (ln && out_norms) {
            y->attn_out_norm_b = take(o, H, 0.1f, 0.0f);
            y->ffn_out_norm_b = take(o, H, 0.1f, 0.0f);
        }
        y->up_w = test_f32(take(o, J * H, sh, 0.0f));
        y->down_w = test_f32(take(o, H * J, 1.0f / sqrtf((float)J), 0.0f));
        if (a->ffn == XF_FFN_GATED)
            y->gate_w = test_f32(take(o, J * H, sh, 0.0f));
        if (a->ffn_bias) {
            y->up_b = take(o, J, 0.1f, 0.0f);
            y->down_b = take(o, H, 0.1f, 0.0f);
            if (a->ffn == XF_FFN_GATED)
                y->gate_b = take(o, J, 0.1f, 0.0f);
        }
    }
}

void test_model_free(struct test_model *o)
{
    free(o->block);
    free(o->layers);
}

struct xf_arch random_gpt2_arch(void)
{
    return (struct xf_arch){.norm = XF_NORM_LAYER,
                            .norm_place = XF_NORM_BEFORE,
                            .ffn = XF_FFN_PLAIN,
                            .act = XF_ACT_GELU_TANH,
                            .positions = XF_POS_LEARNED,
                            .final_norm = true,
                            .causal = true,
                            .qkv_bias = true,
                            .out_bias = true,
                            .ffn_bias = true};
}

struct xf_arch random_llama_arch(void)
{
    return (struct xf_arch){.norm = XF_NORM_RMS,
                            .norm_place = XF_NORM_BEFORE,
                            .ffn = XF_FFN_GATED,
                            .act = XF_ACT_SILU,
                            .positions = XF_POS_ROTARY,
                            .final_norm = true,
                            .causal = true};
}

static uint16_t to_bf16(float *x)
{
    uint32_t bits;
    memcpy(&bits, x, sizeof bits);
    bits += 0x7fff + (bits >> 16 & 1);
    const uint16_t h = (uint16_t)(bits >> 16);
    bits = (uint32_t)h << 16;
    memcpy(x, &bits, sizeof bits);
    return h;
}

struct xf_matrix test_as_bf16(struct xf_matrix w, size_t count,
                              uint16_t **store)
{
    if (!w.data)
        return w;
    float *values = (float *)w.data; /* the test's own block */
    uint16_t *h = *store;
    for (size_t i = 0; i < count; i++)
        h[i] = to_bf16(&values[i]);
    *store += count;
    return (struct xf_matrix){.data = h, .dtype = ATTN_BF16};
}

void test_model_bf16(struct test_model *o, uint16_t **store,
                     struct xf_layer **layers)
{
    const struct xf_model *m = &o->m;
    const size_t H = m->hidden, J = m->intermediate;
    const size_t hd = m->heads * m->head_dim, gd = m->kv_heads * m->head_dim;
    *store = malloc(o->size * sizeof **store);
    *layers = calloc(m->layers, sizeof **layers);
    if (!*store || !*layers)
        abort();
    uint16_t *at = *store;
    for (size_t l = 0; l < m->layers; l++) {
        const struct xf_layer *y = &o->layers[l];
        struct xf_layer *half = &(*layers)[l];
        *half = *y;
        half->q_w = test_as_bf16(y->q_w, hd * H, &at);
        half->k_w = test_as_bf16(y->k_w, gd * H, &at);
        half->v_w = test_as_bf16(y->v_w, gd * H, &at);
        half->o_w = test_as_bf16(y->o_w, H * hd, &at);
        half->up_w = test_as_bf16(y->up_w, J * H, &at);
        half->gate_w = test_as_bf16(y->gate_w, J * H, &at);
        half->down_w = test_as_bf16(y->down_w, H * J, &at);
    }
    o->m.layer = *layers;
    o->m.lm_head = o->m.word_emb =
        test_as_bf16(o->m.word_emb, m->vocab_size * H, &at);
}
