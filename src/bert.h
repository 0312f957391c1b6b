/*
 * bert.h - a BERT encoder in the core: the WordPiece tokenizer of
 * transformers' BertTokenizer, and the forward pass of its BertModel,
 * returning every layer's attention weights, the hidden states and the
 * attention rollout.
 *
 * Like the rest of the core this knows no file format: the vocabulary is a
 * list of strings and the model a struct of pointers to float32 tensors,
 * which the caller owns and keeps alive (a loader may point them into a
 * read-only mapping of a checkpoint). Errors follow attention.h: an
 * attn_status and a caller-owned struct attn_error naming the field.
 */
#ifndef ATTN_BERT_H
#define ATTN_BERT_H

#include "attention.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------- WordPiece */

/* Words longer than this many code points become one [UNK], as in
 * transformers (Google's original code allows 200). */
#define BERT_MAX_WORD_CHARS 100

struct bert_vocab; /* opaque: the tokens and a hash table over them */

/*
 * A vocabulary from its tokens, id = index in tokens[count] (the line
 * number in vocab.txt). The strings are copied. A token listed twice keeps
 * the last id, as transformers' load_vocab does; id -> token still gives
 * each line's own string. [UNK], [CLS] and [SEP] must be present.
 * On success the caller owns *out; release it with bert_vocab_free().
 */
attn_status bert_vocab_new(const char *const *tokens, size_t count,
                           struct bert_vocab **out, struct attn_error *err);
void bert_vocab_free(struct bert_vocab *vocab);

size_t bert_vocab_size(const struct bert_vocab *vocab);

/* The token of id (< bert_vocab_size()), NUL-terminated. */
const char *bert_vocab_token(const struct bert_vocab *vocab, uint32_t id);

/* The id of the token text[0..len), or -1 when it is not in the vocabulary. */
int64_t bert_vocab_id(const struct bert_vocab *vocab, const char *text,
                      size_t len);

/* NULL options mean BertTokenizer's defaults: lowercase, no cap. */
struct bert_encode_options {
    bool do_lower_case; /* lowercase and strip accents (uncased models) */
    size_t max_tokens;  /* cap on the encoding, [CLS] and [SEP]s included:
                           the model's max_position_embeddings; 0 = none */
};

/* Token ids [count] and token type ids [count] of one input. */
struct bert_encoding {
    size_t count;
    uint32_t *ids;     /* the text of ids[i] is bert_vocab_token(v, ids[i]) */
    uint8_t *type_ids; /* 0 for [CLS] A [SEP], 1 for B [SEP] */
};

/*
 * Encode a sentence, or a pair when b is not NULL, as BertTokenizer does:
 * the special tokens typed in the text ([CLS], [SEP], [PAD], [MASK],
 * [UNK], exactly so) are kept whole; the rest goes through the basic
 * tokenizer (attn_tokenize) and WordPiece, greedy longest match first with
 * ## continuations, a word with an unmatched part or of more than
 * BERT_MAX_WORD_CHARS code points becoming one [UNK]. The result is
 * [CLS] A [SEP] or [CLS] A [SEP] B [SEP]. Invalid UTF-8 fails naming
 * "sentence" or "sentence_b"; more than opts->max_tokens is ATTN_E_TOO_BIG.
 * On success the caller owns *out; release it with bert_encoding_free().
 */
attn_status bert_encode(const struct bert_vocab *vocab,
                        const struct bert_encode_options *opts, const char *a,
                        size_t a_len, const char *b, size_t b_len,
                        struct bert_encoding *out, struct attn_error *err);
void bert_encoding_free(struct bert_encoding *enc);

/* At most the bytes bert_encode() allocates for texts of these lengths. */
size_t bert_encode_bytes(size_t a_len, size_t b_len);

/* --------------------------------------------------------------- encoder */

typedef enum bert_act {
    BERT_ACT_GELU = 0, /* "gelu": x/2 * (1 + erf(x / sqrt 2)) */
    BERT_ACT_GELU_TANH /* "gelu_new": x/2 * (1 + tanh(sqrt(2/pi) *
                          (x + 0.044715 x^3))) */
} bert_act;

/*
 * One encoder layer, in nn.Linear's layout (weight [out][in], y = x W^T +
 * b). H = hidden size, I = intermediate size. Every pointer is required.
 */
struct bert_layer {
    const float *q_w, *q_b;     /* attention.self.query  [H][H], [H] */
    const float *k_w, *k_b;     /* attention.self.key    [H][H], [H] */
    const float *v_w, *v_b;     /* attention.self.value  [H][H], [H] */
    const float *ao_w, *ao_b;   /* attention.output.dense [H][H], [H] */
    const float *ln1_w, *ln1_b; /* attention.output.LayerNorm [H], [H] */
    const float *in_w, *in_b;   /* intermediate.dense [I][H], [I] */
    const float *out_w, *out_b; /* output.dense [H][I], [H] */
    const float *ln2_w, *ln2_b; /* output.LayerNorm [H], [H] */
};

/* A BertModel's encoder; the caller owns every tensor. */
struct bert_model {
    size_t layers, heads, hidden, intermediate;
    size_t vocab_size, max_positions, type_vocab_size;
    float layer_norm_eps;
    bert_act act;
    const float *word_emb;            /* [vocab_size][H] */
    const float *pos_emb;             /* [max_positions][H] */
    const float *type_emb;            /* [type_vocab_size][H] */
    const float *emb_ln_w, *emb_ln_b; /* embeddings.LayerNorm [H], [H] */
    const struct bert_layer *layer;   /* [layers] */
};

/* Caps on a model's sizes, so that every size product fits in size_t and
 * int (the BLAS dimension type). */
#define BERT_MAX_DIM 65536 /* hidden, intermediate */
#define BERT_MAX_LAYERS 256
#define BERT_MAX_VOCAB 4000000
#define BERT_MAX_POSITIONS 65536

/*
 * Check a model's sizes (each nonzero and under its cap, heads dividing
 * hidden), its epsilon (finite, > 0) and that every tensor is present.
 * Values are not scanned: a loader checks them once, at load.
 */
attn_status bert_model_check(const struct bert_model *m,
                             struct attn_error *err);

/* What a call returns; a bit set. */
enum bert_want {
    BERT_WANT_WEIGHTS = 1u << 0,      /* weights */
    BERT_WANT_MEAN_WEIGHTS = 1u << 1, /* mean_weights */
    BERT_WANT_HIDDEN = 1u << 2,       /* hidden_states */
    BERT_WANT_ROLLOUT = 1u << 3       /* rollout */
};

/* Every layer's weights, for bert_run.layer. */
#define BERT_ALL_LAYERS SIZE_MAX

struct bert_run {
    const uint32_t *ids;       /* [n] token ids, each < vocab_size */
    const uint8_t *type_ids;   /* [n] each < type_vocab_size; NULL: all 0 */
    size_t n;                  /* 1 <= n <= max_positions */
    unsigned want;             /* bit set of enum bert_want; 0 = weights */
    size_t layer;              /* the layer whose weights and mean weights are
                                  returned, or BERT_ALL_LAYERS; without
                                  hidden states or rollout, the layers above
                                  it are not computed */
    unsigned threads;          /* as attn_config.threads; 0 means 1 */
    const atomic_bool *cancel; /* as attn_config.cancel */
};

/*
 * Arrays not asked for are NULL. With Lw = layers, or 1 when run.layer
 * names one layer:
 *   weights:       [Lw][heads][n][n]  softmax(q k^T / sqrt(H / heads))
 *   mean_weights:  [Lw][n][n]         the mean over heads
 *   hidden_states: [layers + 1][n][H] the embedding output, then each
 *                                     layer's (output_hidden_states order)
 *   rollout:       [n][n]             R = Ahat_L ... Ahat_1, Ahat_l =
 *                  0.5 * mean_weights_l + 0.5 * I, each row divided by its
 *                  sum (Abnar and Zuidema, 2020): row i is how much the
 *                  last layer's token i draws on input token j
 */
struct bert_result {
    size_t layers, weight_layers, heads, n, hidden;
    float *weights, *mean_weights, *hidden_states, *rollout;
};

/*
 * The forward pass of BertModel (eval mode, no padding) over one input:
 * embeddings (word + position + token type, LayerNorm), then per layer
 * self-attention through attn_forward() with its biases and heads, output
 * dense + residual + LayerNorm, intermediate dense + activation, output
 * dense + residual + LayerNorm. Every product goes to cblas_sgemm. The
 * bits are the same for every thread count (attention.h, "Threading").
 * On success the caller owns *out; release it with bert_result_free().
 */
attn_status bert_forward(const struct bert_model *m, const struct bert_run *run,
                         struct bert_result *out, struct attn_error *err);
void bert_result_free(struct bert_result *result);

/* Every byte bert_forward() allocates for this model and run (its result,
 * its workspace and what each layer's attn_forward() holds at once);
 * SIZE_MAX when that overflows. */
size_t bert_forward_bytes(const struct bert_model *m,
                          const struct bert_run *run);

/* Floating-point operations of bert_forward() (2 per multiply-add). */
double bert_flops(const struct bert_model *m, const struct bert_run *run);

/* ------------------------------------------------------------ the pieces */

/* y[r] = (x[r] - mean) / sqrt(var + eps) * w + b for r < rows, the
 * variance biased (divided by cols), as nn.LayerNorm; x and y may be the
 * same.  x, y: [rows][cols] */
void bert_layer_norm(const float *x, size_t rows, size_t cols, const float *w,
                     const float *b, float eps, float *y);

/* x[i] = act(x[i]) for i < count, within 1e-5 of the exact value
 * relative to it, or 1e-20 absolutely far out on the negative side.
 * Every x86-64 build (vecmath.h) gives the same bits;
 * bert_activation_isa() runs the one named, for the tests that hold them
 * to it. */
void bert_activation(bert_act act, float *x, size_t count);
void bert_activation_isa(int isa, bert_act act, float *x, size_t count);

#endif
