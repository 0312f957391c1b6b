/*
 * random_model.h - random models of any arch for the unit tests: small
 * sizes, weights drawn from a seed, every tensor the arch has and no
 * other, all in one block the test owns.
 */
#ifndef ATTN_TEST_RANDOM_MODEL_H
#define ATTN_TEST_RANDOM_MODEL_H

#include "transformer.h"

#include <stddef.h>
#include <stdint.h>

/* A model and the memory behind it. Its vocabulary is 40 tokens, its
 * positions 80. */
struct test_model {
    struct xf_model m;
    struct xf_layer *layers;
    float *block;
    size_t used, size;
};

/* A random model of arch a: weights ~ N(0, 1/sqrt(fan_in)), norm weights
 * near 1, biases small; tensors only where the arch has them; float32,
 * and no output head (set m.lm_head for one). */
void test_model_make(struct test_model *o, const struct xf_arch *a,
                     size_t layers, size_t heads, size_t kv_heads,
                     size_t head_dim, size_t hidden, size_t inter,
                     uint64_t seed);
void test_model_free(struct test_model *o);

/* GPT-2's block and LLaMA's. */
struct xf_arch random_gpt2_arch(void);
struct xf_arch random_llama_arch(void);

/* A matrix of count values rounded to bfloat16 in place, and a copy of
 * it stored as bfloat16 (from store, which advances); w as it is when it
 * has no data. */
struct xf_matrix test_as_bf16(struct xf_matrix w, size_t count,
                              uint16_t **store);

/* o's model with every layer's matrices and the word embedding, which
 * then serves as lm_head too, rounded to bfloat16 in place and read as
 * bfloat16 (test_as_bf16()): the stored copies in *store and the layers
 * in *layers, which the caller frees after o. */
void test_model_bf16(struct test_model *o, uint16_t **store,
                     struct xf_layer **layers);

#endif
