/*
 * model.h - a Hugging Face checkpoint loaded for the core's transformer
 * (transformer.h) and its tokenizer (tokenizer.h): config.json, the
 * tokenizer's files and model.safetensors from one folder, as the Hub
 * serves them. Which family it is comes from config.json's model_type,
 * looked up in the family table (family.h).
 *
 * Weight matrices are used in place from a read-only mapping of the file,
 * at the width they are stored in (F32, F16 or BF16; the products widen
 * them a panel at a time, src/widen.h); vectors (biases, norms) that are not
 * F32, and any tensor not aligned to its width, are converted to float32 once,
 * into one block. One loaded model serves every request; it is never written
 * after model_load() returns.
 */
#ifndef ATTND_MODEL_H
#define ATTND_MODEL_H

#include "chat_template.h"
#include "shards.h"
#include "tokenizer.h"
#include "transformer.h"

#include <stdbool.h>
#include <stddef.h>

#define MODEL_NAME_MAX 63

struct family;

/* The most end-of-sequence ids a model may list. */
#define MODEL_MAX_EOS 16

/* What config.json says beside the core's model, for GET /models and
 * generation. */
struct model_extra {
    bool tied; /* the output head is the embeddings */
    /* the ids that end a generation: generation_config.json's
     * eos_token_id when it has one, else config.json's (one, or a list) */
    unsigned eos[MODEL_MAX_EOS];
    size_t n_eos;
    /* each kind of layer's rope scaling as config.json names it
     * ("llama3", "linear", ...), or NULL: none */
    const char *rope_scaling[XF_MAX_LAYER_KINDS];
};

/* Where a model came from, for GET /models. */
struct model_source {
    char container[16]; /* "safetensors" or "gguf" */
    char file_type[16]; /* a GGUF file's general.file_type by llama.cpp's
                           name ("Q4_K_M"), or "" */
};

struct model {
    char name[MODEL_NAME_MAX + 1];
    const struct family *family; /* from config.json's model_type */
    struct xf_model xf;          /* its tensors point into map or converted */
    struct xf_layer *layers;     /* [xf.layers], xf.layer */
    struct model_extra extra;
    double *rope_freq;   /* NULL, or the rotary frequencies the kinds of
                            layer point at (xf.kind[k].rope.inv_freq) */
    uint8_t *layer_kind; /* NULL, or [layers]: xf.layer_kind */
    struct tokenizer tokenizer;
    struct chat_templates chat; /* none for a model without any */
    bool do_lower_case;         /* the tokenizer lowercases (BERT's
                                   tokenizer_config.json; true when absent, as
                                   BertTokenizer) */
    struct shards shards;       /* the weight files, mapped read-only */
    struct model_source source;
    void *converted; /* the tensors copied or converted at load */
    size_t converted_bytes;
    size_t weight_bytes; /* the model's tensors as held: matrices at the
                            width they are stored in, vectors (and what
                            had to be realigned) as float32 */
    size_t longest_text; /* bytes of its longest token's readable text:
                            what an answer naming tokens it chose (the
                            logit lens) is sized by */
};

/* The sliding window of layer (0: none), or with XF_ALL_LAYERS the one
 * every layer shares (0 when they differ or have none). */
size_t model_window(const struct model *m, size_t layer);

/* The widest window any layer has (config.json's sliding_window), or 0. */
size_t model_widest_window(const struct model *m);

/*
 * Load the checkpoint in dir under name (1 to MODEL_NAME_MAX characters
 * of [A-Za-z0-9._-]). On failure returns false, with one line in err
 * naming the model, the file, the tensor when one is at fault, and what is
 * wrong; nothing is left allocated or mapped. On success the caller owns
 * *out; release it with model_free().
 */
bool model_load(const char *name, const char *dir, struct model **out,
                char *err, size_t err_len);

/* The same, the family found in families rather than attnd's table. */
struct family_table;
bool model_load_in(const struct family_table *families, const char *name,
                   const char *dir, struct model **out, char *err,
                   size_t err_len);
void model_free(struct model *m);

#endif
