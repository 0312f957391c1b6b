/*
 * family.h - what differs between checkpoint families, as one row of a
 * table keyed by config.json's model_type (families.c). A row points at
 * its family's file (family_bert.c, ...), which reads that family's
 * config.json, names its tensors and opens its tokenizer. Everything
 * every checkpoint shares stays in model_load.c: the files, the
 * read-only mapping, safetensors, dtypes and the error lines.
 */
#ifndef ATTND_FAMILY_H
#define ATTND_FAMILY_H

#include "model.h"
#include "model_files.h"
#include "safetensors.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* One tensor a family names: its name in the checkpoint (without the
 * prefix a family may allow), the shape config.json gives it, and the
 * slot of the model it fills: a weight matrix, kept at the width it is
 * stored in, or a vector (a bias, a norm), widened to float32 at load.
 * A slot may take a slice of the tensor's outputs (q, k and v of GPT-2's
 * fused c_attn), or blocks of them at a stride (GPT-NeoX's
 * query_key_value, each head's q, k and v in turn), and a matrix may be
 * stored [in][out] (GPT-2's Conv1D), which the loader turns into the
 * core's [out][in] once, at its width. */
struct model_tensor {
    char name[96];
    size_t rows, cols;        /* as stored; cols 0: a vector of rows */
    const char *what;         /* the shape in config.json's words */
    struct xf_matrix *matrix; /* or NULL, and then */
    const float **vector;
    bool in_out;       /* stored [in][out]: outputs are its columns */
    size_t out0, outs; /* the outputs the slot takes; outs 0: all */
    /* 0, or those outputs come in blocks of block, one block every
     * stride outputs from out0 (model_tensor_strided()) */
    size_t block, stride;
    bool bare; /* its name carries no prefix (a causal LM's
                  lm_head, beside the base model's names) */
    float add; /* a vector's values are held as float32 plus this
                  (Gemma's norms scale by 1 + w) */
};

/* An after_tensors for a causal LM: a tied output head (m->extra.tied)
 * is the token embeddings. */
void model_tie_head(struct model *m);

/* An in_network for the base model of a LLaMA-style causal LM
 * (embed_tokens., layers., norm.), but for the rotary buffers older files
 * saved (layers.N.self_attn.rotary_emb.*), which are not the network's. */
bool model_llama_namespace(const char *rest);

/* Take outputs [out0, out0 + outs) of t, stored [in][out] when in_out. */
void model_tensor_slice(struct model_tensor *t, bool in_out, size_t out0,
                        size_t outs);

/* Take outs outputs of t, stored [out][in] (a matrix's rows, a vector's
 * values), in blocks of block outputs, one block every stride outputs
 * from out0: GPT-NeoX's fused query_key_value holds each head's q, k and
 * v in turn, so q is blocks of head_dim every 3 head_dim from 0, k from
 * head_dim, v from 2 head_dim. outs is a multiple of block, and the last
 * block ends within the tensor. The slot is copied once, at load: a
 * matrix at the width it is stored in, a vector as float32. */
void model_tensor_strided(struct model_tensor *t, size_t out0, size_t block,
                          size_t stride, size_t outs);

/*
 * The tensors a family names, in the order it names them. The loader
 * asks twice: first with `at` NULL, which only counts them, then with
 * room for that count; so how many there are is said in one place, the
 * naming itself, and a list never takes more than its room.
 */
struct model_tensors {
    struct model_tensor *at; /* NULL: counting */
    size_t count, room;
    struct model_tensor spare; /* where a counted tensor is written */
};

/* The next tensor of list: the one fmt names, of rows x cols (cols 0: a
 * vector) in config.json's words what, and the slot it fills. */
#if defined(__GNUC__)
__attribute__((format(printf, 7, 8)))
#endif
void model_tensors_put(struct model_tensors *list, struct xf_matrix *matrix,
                       const float **vector, size_t rows, size_t cols,
                       const char *what, const char *fmt, ...);

/* The tensor put last, to slice or mark. */
struct model_tensor *model_tensors_last(struct model_tensors *list);

/* The next tensor of list, the slot a struct xf_matrix * or a const
 * float **. */
#define MODEL_TENSOR(list, slot, rows, cols, what, ...)                        \
    model_tensors_put(                                                         \
        (list), _Generic((slot), struct xf_matrix *: (slot), default: NULL),  \
        _Generic((slot), const float **: (slot), default: NULL), rows, cols,   \
        what, __VA_ARGS__)

/* Layer l's projections as LLaMA-style checkpoints name them
 * (layers.L.self_attn.{q,k,v,o}_proj, layers.L.mlp.{gate,up,down}_proj),
 * with the biases m's arch says they carry, put into list; the norms are
 * the family's. */
void model_llama_projections(struct model *m, struct model_tensors *list,
                             size_t l);

/* One tensor's name in a GGUF file: hf as the family's name_tensors()
 * names it (without a prefix), gguf as llama.cpp's converter writes it;
 * "%zu" in both stands for the layer's number. */
struct gguf_name {
    const char *hf, *gguf;
};

/* One config.json key that a GGUF key gives: gguf is the key after
 * "{arch}." (e.g. "attention.head_count_kv" for num_key_value_heads). */
struct gguf_key {
    const char *config, *gguf;
};

struct shards;

/* How llama.cpp's GGUF files hold a family: what the loader
 * (gguf_model.c) needs to read one as the family's own config.json and
 * tensors, so that the family's code serves both containers. Each list
 * ends with an entry of NULLs. */
struct family_gguf {
    const char *arch; /* general.architecture, e.g. "qwen2" */
    const struct gguf_key *keys;
    const struct gguf_key *more_keys; /* NULL, or these too (a family's
                                         own beside LLaMA's) */
    /* the names, overrides first (a name found there is not looked up in
     * names): families that share most of LLaMA's names */
    const struct gguf_name *overrides;
    const struct gguf_name *names;
    /* llama.cpp's converter permuted q's and k's rows so that its
     * rotation pairs values (2i, 2i + 1) (the llama architecture's); the
     * weights are read as stored, with that pairing */
    bool rope_interleaved;
    /* the converter stored Gemma's norms as applied, 1 + w: the family's
     * add is not made again */
    bool norms_folded;
    /* the tensors beside the family's own that a file may hold, which the
     * loader or the config hook reads: rope_freqs.weight (LLaMA 3's
     * scaled frequencies), Phi-3's rope_factors_{short,long}.weight;
     * every other tensor must be one the family names */
    bool rope_freqs, longrope_factors;
    /* NULL, or what follows from the file in ways a key-for-key list
     * cannot say (Gemma's attention scale, Phi-3's longrope factors),
     * into config as config.json would say it. False with one line in
     * err. */
    bool (*config)(cJSON *config, const struct shards *s, const char *arch,
                   char *err, size_t err_len);
};

/* The keys and tensor names of LLaMA-style blocks in llama.cpp's files
 * (family_llama.c), which other families' rows share. */
extern const struct gguf_key gguf_llama_keys[];
extern const struct gguf_name gguf_llama_names[];

struct family {
    const char *model_type; /* config.json's, e.g. "bert" */
    const char *network;    /* what messages call it, "BERT encoder" */
    bool decoder;           /* a causal LM: GET /models and the answer's
                               config describe it as one */
    /* config.json's keys into m->xf: the arch and the sizes (the tensors
     * come later). False with one line in err naming the key and its
     * value. */
    bool (*read_config)(const cJSON *config, struct model *m, char *err,
                        size_t err_len);
    /* Every tensor the model needs, put into list (MODEL_TENSOR); the
     * slots point into m->xf and m->layers. The same config names the
     * same tensors every time. */
    void (*name_tensors)(struct model *m, struct model_tensors *list);
    /* NULL, or what follows from the tensors once they are in (a tied
     * output head is the embeddings). */
    void (*after_tensors)(struct model *m);
    /* The prefix the checkpoint's names carry, from its files: "" or one
     * the family allows (BertModel saved inside a task model has
     * "bert."). */
    const char *(*prefix)(const struct shards *s);
    /* Whether a name (after the prefix) that no tensor took belongs to
     * the network itself, which makes the checkpoint one config.json
     * does not describe; names outside it (task heads, buffers) are
     * ignored. */
    bool (*in_network)(const char *rest);
    /* An older spelling of a tensor's name (BERT's LayerNorm gamma and
     * beta) into old, or false when it has none; NULL: none ever. */
    bool (*legacy_name)(const char *name, char *old, size_t old_len);
    /* The tokenizer, from the folder's files, into m->tokenizer (and
     * m->do_lower_case). Fails through model_files_fail(). */
    bool (*open_tokenizer)(struct model *m, const struct model_files *files);
    /* NULL, or how GGUF files hold the family */
    const struct family_gguf *gguf;
};

/* A table of families: attnd's (families.c), or one a test makes with a
 * family of its own. */
struct family_table {
    const struct family *const *row;
    size_t count;
};
extern const struct family_table family_table;

/* The row of model_type[0..len) in t, or NULL. */
const struct family *family_find(const struct family_table *t,
                                 const char *model_type, size_t len);

/* The row whose GGUF architecture is arch[0..len) in t, or NULL. */
const struct family *family_find_gguf(const struct family_table *t,
                                      const char *arch, size_t len);

/* The model_types of t, quoted and comma-separated, for a message. */
void family_names(const struct family_table *t, char *out, size_t out_len);

#endif
