/*
 * model.h - a Hugging Face BERT checkpoint loaded for the core's encoder
 * (bert.h): config.json, vocab.txt, the optional tokenizer_config.json and
 * model.safetensors from one folder, as the Hub serves them.
 *
 * F32 tensors are used in place from a read-only mapping of the file; F16
 * and BF16 ones (and F32 ones not aligned to 4 bytes) are converted to
 * float32 once, into one block. One loaded model serves every request; it
 * is never written after model_load() returns.
 */
#ifndef ATTND_MODEL_H
#define ATTND_MODEL_H

#include "bert.h"

#include <stdbool.h>
#include <stddef.h>

#define MODEL_NAME_MAX 63

struct model {
    char name[MODEL_NAME_MAX + 1];
    struct bert_model bert;    /* its tensors point into map or converted */
    struct bert_layer *layers; /* [bert.layers], bert.layer */
    struct bert_vocab *vocab;
    bool do_lower_case; /* from tokenizer_config.json; true when
                           absent, as BertTokenizer */
    const void *map;    /* model.safetensors, mapped read-only */
    size_t map_bytes;
    float *converted; /* the tensors converted at load */
    size_t converted_bytes;
    size_t weight_bytes; /* the encoder's tensors as float32 */
};

/*
 * Load the checkpoint in dir under name (1 to MODEL_NAME_MAX characters
 * of [A-Za-z0-9._-]). On failure returns false, with one line in err
 * naming the model, the file, the tensor when one is at fault, and what is
 * wrong; nothing is left allocated or mapped. On success the caller owns
 * *out; release it with model_free().
 */
bool model_load(const char *name, const char *dir, struct model **out,
                char *err, size_t err_len);
void model_free(struct model *m);

#endif
