/*
 * transformer.h - a stack of transformer blocks in the core, returning
 * every layer's attention weights, the hidden states and the attention
 * rollout.
 *
 * What differs between model families is data: one struct xf_arch says
 * where the norms sit and which kind they are, what the feed-forward and
 * its activation are, how positions enter, whether attention is causal
 * and which projections carry biases. BERT is one value of it, GPT-2 and
 * LLaMA others; the block and its phases are written once.
 *
 * Like the rest of the core this knows no file format: the model is a
 * struct of pointers to float32 tensors, which the caller owns and keeps
 * alive (a loader may point them into a read-only mapping of a
 * checkpoint). Errors follow attention.h: an attn_status and a
 * caller-owned struct attn_error naming the field.
 */
#ifndef ATTN_TRANSFORMER_H
#define ATTN_TRANSFORMER_H

#include "attention.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* -------------------------------------------------------- architecture */

typedef enum xf_norm {
    XF_NORM_LAYER = 0, /* nn.LayerNorm: (x - mean) / sqrt(var + eps) * w + b */
    XF_NORM_RMS        /* RMSNorm: x / sqrt(mean(x^2) + eps) * w, no bias */
} xf_norm;

typedef enum xf_norm_place {
    XF_NORM_AFTER = 0, /* post-norm (BERT): h = norm(h + sublayer(h)) */
    XF_NORM_BEFORE,    /* pre-norm (GPT-2, LLaMA): h = h + sublayer(norm(h)) */
    XF_NORM_SANDWICH,  /* both sides (Gemma 2 and 3):
                          h = h + norm_out(sublayer(norm(h))) */
    XF_NORM_OUTPUT     /* on the sublayer's output (OLMo 2):
                          h = h + norm_out(sublayer(h)) */
} xf_norm_place;

typedef enum xf_ffn {
    XF_FFN_PLAIN = 0, /* down(act(up x)) */
    XF_FFN_GATED      /* down(act(gate x) * up x), SwiGLU with SiLU */
} xf_ffn;

typedef enum xf_act {
    XF_ACT_GELU = 0,  /* "gelu": x/2 * (1 + erf(x / sqrt 2)) */
    XF_ACT_GELU_TANH, /* "gelu_new": x/2 * (1 + tanh(sqrt(2/pi) *
                         (x + 0.044715 x^3))) */
    XF_ACT_SILU       /* "silu": x / (1 + exp(-x)) */
} xf_act;

typedef enum xf_positions {
    XF_POS_LEARNED = 0, /* a table of position embeddings added to the
                           token's (with token types when the arch has
                           them) */
    XF_POS_ROTARY       /* rotary positions on each head of q and k (the
                           core's ATTN_POS_ROPE), paired as rope_pairing
                           says, turned by rope_theta or rope_inv_freq */
} xf_positions;

/* What a family's block is. A zeroed struct is BERT's but for the
 * biases and norms below, which a family sets. */
struct xf_arch {
    xf_norm norm;
    xf_norm_place norm_place;
    xf_ffn ffn;
    xf_act act;
    xf_positions positions;
    bool token_types; /* learned positions plus token type embeddings */
    bool embed_norm;  /* a norm on the embeddings, before the first layer */
    bool final_norm;  /* a norm after the last layer */
    bool causal;      /* token i sees tokens j <= i only */
    bool qk_norm;     /* each head of q and k RMS-normed before the
                         rotation (Qwen3's q_norm and k_norm) */
    bool qkv_bias;    /* q, k and v projections carry biases */
    bool out_bias;    /* the attention's output projection does */
    bool ffn_bias;    /* the feed-forward's projections do */
    /* q and k each RMS-normed over its whole projection, every head at
     * once, before the rotation (OLMo 2's q_norm and k_norm); not with
     * qk_norm */
    bool qk_norm_whole;
    /* the attention and the feed-forward both read the layer's input,
     * h + attn(norm_a(h)) + ffn(norm_f(h)), rather than the feed-forward
     * the attention's sum (GPT-NeoX's use_parallel_residual, GPT-J's);
     * norms before each sublayer only */
    bool parallel;
};

/* Short stable names of the enums, e.g. "rms", "before", "gated", "silu",
 * "rotary"; NULL past them. */
const char *xf_norm_name(int norm);
const char *xf_norm_place_name(int place);
const char *xf_ffn_name(int ffn);
const char *xf_act_name(int act);
const char *xf_positions_name(int positions);

/* ---------------------------------------------------------------- model */

/*
 * A weight matrix as a checkpoint stores it, row-major, read in place (its
 * width: attention.h's attn_dtype): the products widen a 16-bit one to
 * float32 a panel at a time in per-thread scratch, so the model's weights
 * stay the width they are stored in and are never copied whole. The
 * shape is the model's (below). data NULL: absent.
 */
struct xf_matrix {
    const void *data;
    attn_dtype dtype;
};

/*
 * One block, in nn.Linear's layout (weight [out][in], y = x W^T + b).
 * H = hidden, I = intermediate, D = head_dim, h = heads, g = kv_heads.
 * A bias is NULL exactly when the arch says the projection has none; an
 * RMSNorm's bias is NULL; gate is NULL for a plain feed-forward. Vectors
 * (biases, norms) are float32; a loader widens them, they are small.
 */
struct xf_layer {
    struct xf_matrix q_w;               /* [h D][H] */
    struct xf_matrix k_w;               /* [g D][H] */
    struct xf_matrix v_w;               /* [g D][H] */
    struct xf_matrix o_w;               /* [H][h D] */
    const float *q_b, *k_b, *v_b, *o_b; /* [h D], [g D], [g D], [H] */
    /* the norm of the attention sublayer: on its input (before) or on
     * the residual sum (after); [H], [H] */
    const float *attn_norm_w, *attn_norm_b;
    const float *ffn_norm_w, *ffn_norm_b;  /* the feed-forward's, likewise */
    struct xf_matrix up_w, gate_w, down_w; /* [I][H], [I][H], [H][I] */
    const float *up_b, *gate_b, *down_b;   /* [I], [I], [H] */
    /* [D], [D] with arch.qk_norm; [h D], [g D] with arch.qk_norm_whole */
    const float *q_norm_w, *k_norm_w;
    /* the norms of the sublayers' outputs, before their residual sums
     * (XF_NORM_SANDWICH and XF_NORM_OUTPUT); [H] each, biases as above */
    const float *attn_out_norm_w, *attn_out_norm_b;
    const float *ffn_out_norm_w, *ffn_out_norm_b;
};

/* What may differ from one layer's attention to another's: Gemma 2 and 3
 * alternate sliding-window layers with global ones, each kind turning
 * its rotary positions its own way. */
struct xf_layer_kind {
    size_t window;           /* 0, or token i sees tokens j > i - window
                                only (a sliding window, Mistral's) */
    struct attn_rotary rope; /* with XF_POS_ROTARY (attention.h) */
    /* 0, or a run over more than long_after positions in all (those a
     * cache held and its own tokens) turns every position, the first
     * included, by long_rope instead of rope: Phi-3's longrope, short
     * factors up to original_max_position_embeddings and long ones past
     * it, chosen by the sequence's length as transformers chooses them.
     * A cache started short is then outgrown (xf_cache_outgrown()). */
    size_t long_after;
    struct attn_rotary long_rope;
};

/* The most kinds of layer a model has. */
#define XF_MAX_LAYER_KINDS 4

/* A model's blocks and embeddings; the caller owns every tensor. */
struct xf_model {
    struct xf_arch arch;
    size_t layers, heads, kv_heads, head_dim, hidden, intermediate;
    size_t vocab_size;
    size_t max_positions;   /* the longest input */
    size_t type_vocab_size; /* token types; with arch.token_types only */
    float norm_eps;         /* every norm's, q and k norms' included */
    /* the kinds of layer (0 means 1), and each layer's: NULL, every one
     * kind 0, or [layers] each below kinds */
    size_t kinds;
    struct xf_layer_kind kind[XF_MAX_LAYER_KINDS];
    const uint8_t *layer_kind;
    float attn_scale;          /* 0, or the scores' factor in place of
                                  head_dim^-1/2 (Gemma's query_pre_attn_scalar) */
    float attn_softcap;        /* 0, or each score capped before its mask
                                  (attention.h's softcap) */
    float final_softcap;       /* 0, or the logits become c tanh(logit / c) */
    float embed_scale;         /* 0, or the embeddings are multiplied by it
                                  (Gemma's sqrt(hidden)) */
    struct xf_matrix word_emb; /* [vocab_size][H] */
    struct xf_matrix pos_emb;  /* [max_positions][H]: learned */
    struct xf_matrix type_emb; /* [type_vocab_size][H] */
    const float *embed_norm_w, *embed_norm_b; /* [H], [H]: arch.embed_norm */
    const float *final_norm_w, *final_norm_b; /* [H], [H]: arch.final_norm */
    const struct xf_layer *layer;             /* [layers] */
    /* [vocab_size][H]: the output head (a causal LM's lm_head), or
     * word_emb's data again when the two are tied; absent (NULL data)
     * for a model without one */
    struct xf_matrix lm_head;
};

/* Caps on a model's sizes, so that every size product fits in size_t and
 * int (the BLAS dimension type). */
#define XF_MAX_DIM 65536 /* hidden, intermediate, heads x head_dim */
#define XF_MAX_LAYERS 256
#define XF_MAX_VOCAB 4000000
#define XF_MAX_POSITIONS 1048576 /* rotary models declare 131072 and more */

/*
 * Check a model's arch (every enum known), its sizes (each nonzero and
 * under its cap, kv_heads dividing heads), its epsilon (finite, > 0),
 * rope_theta (finite, > 0, when rotary) and that every tensor the arch
 * names is present and none it does not. Values are not scanned: a
 * loader checks them once, at load.
 */
attn_status xf_model_check(const struct xf_model *m, struct attn_error *err);

/* ------------------------------------------------------------------ run */

/* What a call returns; a bit set. */
enum xf_want {
    XF_WANT_WEIGHTS = 1u << 0,        /* weights */
    XF_WANT_MEAN_WEIGHTS = 1u << 1,   /* mean_weights */
    XF_WANT_HIDDEN = 1u << 2,         /* hidden_states */
    XF_WANT_ROLLOUT = 1u << 3,        /* rollout */
    XF_WANT_LOGITS = 1u << 4,         /* logits (a model with lm_head) */
    XF_WANT_LOGIT_LENS = 1u << 5,     /* lens (a model with lm_head) */
    XF_WANT_HEAD_STATS = 1u << 6,     /* head_stats */
    XF_WANT_VALUE_WEIGHTED = 1u << 7, /* value_weighted and its sum */
    XF_WANT_INDUCTION = 1u << 8,      /* induction, on a repeated input */
    XF_WANT_TOP_K = 1u << 9,          /* top_keys: each row's strongest */
    XF_WANT_FLOW = 1u << 10,          /* flow: attention flow */
    XF_WANT_POOLED = 1u << 11,        /* pooled: weights in blocks */
    XF_WANT_ACTIVATIONS = 1u << 12,   /* resid, z, attn_out, mlp_out */
    XF_WANT_LAST_ROWS = 1u << 13,     /* last_rows: each sequence's last */
    XF_WANT_ALL_LOGITS = 1u << 14     /* logits at every position (with
                                         XF_WANT_LOGITS, one sequence) */
};

/* The most tokens attention flow is computed for: it costs a maximum
 * flow for each pair of tokens through layers x n^2 edges. */
#define XF_MAX_FLOW_TOKENS 64

/* ---------------------------------------------------------- interventions */

/* Where an edit acts on a layer, named as TransformerLens names its hooks. */
typedef enum xf_site {
    XF_SITE_Z = 0,     /* hook_z: each head's attention-weighted values,
                          before the output projection, [n][heads D] */
    XF_SITE_RESID_PRE, /* hook_resid_pre: the residual stream entering
                          the layer, [n][H] */
    XF_SITE_ATTN_OUT,  /* hook_attn_out: the attention's output, after
                          the output projection and its bias, [n][H] */
    XF_SITE_MLP_OUT    /* hook_mlp_out: the feed-forward's output, [n][H] */
} xf_site;

typedef enum xf_edit_op {
    XF_EDIT_ZERO = 0, /* the head's values set to 0 (XF_SITE_Z) */
    XF_EDIT_MEAN,     /* set to the head's mean over the input's positions,
                         taken before any of the layer's edits; after a
                         cache, the mean over the positions that started
                         it (the prompt's) (XF_SITE_Z) */
    XF_EDIT_SET       /* the site's row copied from source (any site) */
} xf_edit_op;

/* Every head of a layer, or every position of the input. */
#define XF_ALL SIZE_MAX

/*
 * One intervention in a run: at layer `layer` of sequence `sequence` of
 * the run's batch, the site's values at `position` (XF_ALL: every
 * position of the input, and after a cache every new one) and, at
 * XF_SITE_Z, of query head `head` (XF_ALL: every head) are replaced as op
 * says. Heads are query heads, under grouped KV heads too. A run's edits
 * of one layer apply in their order.
 */
struct xf_edit {
    xf_site site;
    xf_edit_op op;
    size_t layer, head, position, sequence;
    /* XF_EDIT_SET: the site's rows [n][width] (width heads x head_dim at
     * XF_SITE_Z, else hidden) to copy from, the caller's */
    const float *source;
};

/* The most edits one run takes. */
#define XF_MAX_EDITS 65536

/* The most sequences one run takes (xf_run.batch). */
#define XF_MAX_BATCH 4096

/*
 * The keys and values of every layer of a causal model for up to capacity
 * positions, as rotated for their scores, so that a token after them
 * costs one row of work: a decoder's KV cache. len positions are held.
 * k, v: [layers][capacity][kv_heads * head_dim] each.
 */
struct xf_cache {
    size_t layers, capacity, row, len;
    float *k, *v;
    /* [layers][heads * head_dim]: each head's mean value (XF_SITE_Z)
     * over the positions that started the cache, which a MEAN edit of a
     * later token reads */
    float *z_mean;
};

/* Bytes of a cache of capacity positions for m, its means included;
 * SIZE_MAX on overflow. */
size_t xf_cache_bytes(const struct xf_model *m, size_t capacity);

/*
 * Whether n more tokens after what cache holds take the sequence past a
 * kind's long_after while the cache's keys were turned by its short
 * rotary (the cache holds 1 to long_after positions): the keys are then
 * of another rotary than the run's, and xf_plan() refuses the run
 * ("cache"). transformers' Phi-3 drops its cache there and runs the whole
 * sequence again, every position turned by the long rotary from then
 * on; a caller does the same: empty the cache (len = 0) and run every
 * token of the sequence into it.
 */
bool xf_cache_outgrown(const struct xf_model *m, const struct xf_cache *cache,
                       size_t n);

/* 0, or the longest sequence that a generation from `from` tokens to `to`
 * in all runs again whole after outgrowing its cache: long_after + 1 of
 * the kind whose long_after is the largest in [from, to). */
size_t xf_cache_rerun_length(const struct xf_model *m, size_t from, size_t to);

/* An empty cache of capacity positions (at most m->max_positions); release
 * it with xf_cache_free(). Fails naming "capacity". */
attn_status xf_cache_init(const struct xf_model *m, size_t capacity,
                          struct xf_cache *out, struct attn_error *err);
void xf_cache_free(struct xf_cache *cache);

/*
 * One sequence of a batched decoding step (xf_run.seqs). The step reads
 * every weight once for all its sequences, and each sequence's logits,
 * rows of weights and cache are the same bits as runs of its tokens
 * alone after its cache, one token a run, with its edits and its layer,
 * would give (row_product.h says how the products keep to that). A
 * sequence may bring several tokens, a prompt's, each a row of the step
 * at its own position: each row attends to the cache and to the rows
 * before it, as the same tokens one a step would.
 */
struct xf_seq {
    struct xf_cache *cache; /* its own (no two sequences share one),
                               with room for its tokens; its len grows
                               by them */
    /* its tokens this step, 0 meaning 1: run.ids holds each sequence's
     * in turn. More than one only without edits */
    size_t tokens;
    /* its edits: ZERO and MEAN at XF_SITE_Z, of sequence 0 (the means
     * are the cache's) */
    const struct xf_edit *edits;
    size_t n_edits;
    /* the layer whose row of weights is kept, or XF_ALL_LAYERS */
    size_t layer;
    /* NULL, or the caller's arrays for its last token's row of each kept
     * layer, keys = cache->len + tokens before the step:
     * [Lw][heads][keys] and [Lw][keys] (Lw as xf_result says) */
    float *weights, *mean_weights;
};

/* Tokens sequence q brings to a step (xf_seq.tokens, 0 meaning 1). */
static inline size_t xf_seq_tokens(const struct xf_seq *q)
{
    return q->tokens ? q->tokens : 1;
}

/*
 * The most tokens of a prompt that a step takes about as fast as the
 * prompt's own pass, on m's weights (the least over its layers'
 * matrices; the output head meets one row a sequence either way): a step
 * meets each row through the row kernels, which beat the streamed
 * product's vectors of sixteen rows on 16-bit weights up to about a
 * hundred rows (XF_STEP_TOKENS_HALF) and on float32 ones up to a few
 * dozen (XF_STEP_TOKENS_F32), while a block-quantized matrix's blocks
 * are unpacked again for every second row (AVX-512), where the pass
 * unpacks them once for 64, the pass faster from about thirty rows
 * (XF_STEP_TOKENS_QUANT). Measured on Llama-3.2-1B-sized weights
 * (docs/benchmarks.md).
 */
enum {
    XF_STEP_TOKENS_HALF = 128,
    XF_STEP_TOKENS_F32 = 48,
    XF_STEP_TOKENS_QUANT = 24
};
size_t xf_step_tokens(const struct xf_model *m);

/* A token and its score (a logit or a probability). */
struct xf_candidate {
    uint32_t id;
    float score;
};

/* The most tokens the logit lens gives for each layer and position. */
#define XF_MAX_LENS_K 20

/* Every layer's weights, for xf_run.layer. */
#define XF_ALL_LAYERS SIZE_MAX

struct xf_run {
    const uint32_t *ids;     /* [n] token ids, each < vocab_size */
    const uint8_t *type_ids; /* [n] each < type_vocab_size; NULL: all 0 */
    size_t n;                /* 1 <= n <= max_positions */
    unsigned want;           /* bit set of enum xf_want; 0 = weights */
    size_t layer;            /* the layer whose weights and mean weights are
                                returned, or XF_ALL_LAYERS; without hidden
                                states or rollout, the layers above it are
                                not computed */
    unsigned threads;        /* as attn_config.threads; 0 means 1 */
    size_t lens_k;           /* with XF_WANT_LOGIT_LENS: 1 to XF_MAX_LENS_K
                                tokens a layer and position */
    /* NULL, or a causal model's cache, which the run reads and extends:
     * empty, the n tokens start a sequence and their keys and values are
     * kept in it; holding len positions, one token (n = 1) at position
     * len attends to them and to itself, and its keys and values are
     * added. Either way every layer runs and len grows by n. A rollout
     * needs whole matrices: not with a cache holding anything. */
    struct xf_cache *cache;
    /* With XF_WANT_INDUCTION: the ids from repeat_start on are
     * repeat_period tokens, then the same again (tok_encode_repeated()) */
    size_t repeat_start, repeat_period;
    size_t top_k; /* with XF_WANT_TOP_K: keys kept a row (attention.h) */
    /* with XF_WANT_POOLED: each position's block as a query (pool_row
     * [n]) and as a key (pool_col [n]), and the blocks' count and
     * reduction (attention.h) */
    const uint32_t *pool_row, *pool_col;
    size_t pool_rows, pool_cols;
    bool pool_mean;
    /* Interventions: edits [n_edits] applied as the pass goes (NULL when
     * n_edits is 0). ZERO and MEAN at XF_SITE_Z only; after a cache
     * holding anything, only they. */
    const struct xf_edit *edits;
    size_t n_edits;
    /* MEAN edits average the first mean_over positions (0: all n): a
     * generated sequence's means are its prompt's, as after a cache */
    size_t mean_over;
    /* batch sequences (0 means 1) of the same n ids, each its own
     * sequence with its own edits (xf_edit.sequence); more than one only
     * with start, asking for XF_WANT_LAST_ROWS alone, or with seqs */
    size_t batch;
    /* NULL, or a batched decoding step: [batch] sequences, each taking
     * its tokens (struct xf_seq), one after another in ids, after its own
     * cache; n is 1, cache and edits are not given (each sequence has its
     * own), and want is XF_WANT_LOGITS alone: logits [batch][vocab_size],
     * each sequence's after its last token */
    const struct xf_seq *seqs;
    /* NULL, or [n][H] the residual stream entering layer first_layer,
     * where every sequence then starts: the embeddings and the layers
     * below are not run (a patched run resumes a cached one). first_layer
     * is 0 without it, and activations are asked for only with it 0. Not
     * with a cache. */
    const float *start;
    size_t first_layer;
    /* With XF_WANT_ACTIVATIONS (one sequence of a pre-norm model, no
     * cache holding anything): the rows kept, every position (XF_ALL) or
     * the one named */
    size_t capture_position;
    /* Products through bfloat16 weights (every projection: attention's,
     * the feed-forward's, the output head's) round their rows to bfloat16
     * and sum pairs of products in float32 through the CPU's bfloat16
     * dot products, as llama.cpp and PyTorch compute a bfloat16 model:
     * about twice as fast, about 2^-8 of sum |x w| off (docs/core.md).
     * A step's rows too, each still the bits it gets alone (a batched
     * step's sequences all take them, or none). Only where
     * xf_bf16_dots_available(); elsewhere the products stay exact. Not
     * the default. */
    bool bf16_dots;
};

/* Does this CPU have the bfloat16 dot products (AVX512_BF16) that
 * xf_run.bf16_dots asks for? */
bool xf_bf16_dots_available(void);

/* The result's float arrays, in plan.result_count, then the lens's
 * entries (two floats' bytes each). */
enum {
    XF_RESULT_WEIGHTS,
    XF_RESULT_MEAN_WEIGHTS,
    XF_RESULT_HIDDEN,
    XF_RESULT_ROLLOUT,
    XF_RESULT_LOGITS,
    XF_RESULT_VALUE_WEIGHTED,
    XF_RESULT_VALUE_WEIGHTED_SUM,
    XF_RESULT_FLOW,
    XF_RESULT_POOLED,
    XF_RESULT_RESID,
    XF_RESULT_Z,
    XF_RESULT_ATTN_OUT,
    XF_RESULT_MLP_OUT,
    XF_RESULT_LAST_ROWS,
    XF_RESULT_FLOAT_ARRAYS,
    XF_RESULT_LENS = XF_RESULT_FLOAT_ARRAYS,
    XF_RESULT_ARRAYS
};

/*
 * Arrays not asked for are NULL. With Lw = layers, or 1 when run.layer
 * names one layer:
 *   weights:       [Lw][heads][n][n]  softmax(q k^T / sqrt(head_dim)),
 *                                     causal when the arch is
 *   mean_weights:  [Lw][n][n]         the mean over heads
 *   hidden_states: [layers + 1][n][H] the embedding output, then each
 *                                     layer's (output_hidden_states order);
 *                                     with a final norm the last one is
 *                                     after it, as transformers returns it
 *   rollout:       [n][n]             R = Ahat_L ... Ahat_1, Ahat_l =
 *                  0.5 * mean_weights_l + 0.5 * I, each row divided by its
 *                  sum (Abnar and Zuidema, 2020): row i is how much the
 *                  last layer's token i draws on input token j
 *   logits:        [vocab_size]       the last token's next-token scores:
 *                                     lm_head times its last hidden state;
 *                                     [n][vocab_size] every position's with
 *                                     XF_WANT_ALL_LOGITS
 *   head_stats:    [layers][heads][ATTN_HEAD_STATS] the measures of each
 *                  head's weights (head_stats.h), and key_received
 *                  [layers][heads][n] the mean weight each key receives
 *                  from the queries that see it; not with a cache
 *                  holding anything
 *   value_weighted: [Lw][heads][n][n] and value_weighted_sum [Lw][n][n]:
 *                  the norms of Kobayashi et al. (2020) (attention.h),
 *                  on each layer's normed input; not with a cache
 *                  holding anything
 *   induction:     [layers][heads] on a repeated input, the mean over
 *                  the second copy's queries i of A[i][i - period + 1]:
 *                  the weight on the token after the query's earlier
 *                  copy (Olsson et al. 2022's induction stripe)
 *   flow:          [n][n] attention flow (Abnar and Zuidema 2020): the
 *                  value of a maximum flow from output token i to input
 *                  token j through the graph whose edges are the
 *                  rollout's matrices (attention_flow.h); n at most
 *                  XF_MAX_FLOW_TOKENS, not with a cache holding anything
 *   resid, z, attn_out, mlp_out: with XF_WANT_ACTIVATIONS, R = captured
 *                  rows (n, or 1 at run.capture_position), as the pass
 *                  had them, edits in: resid [layers + 1][R][H] the
 *                  residual stream entering each layer, then leaving the
 *                  last one (before the final norm); z [layers][R][heads
 *                  D] each head's values before the output projection;
 *                  attn_out [layers][R][H] after it and its bias; mlp_out
 *                  [layers][R][H] the feed-forward's output, taken as the
 *                  layer's output less its residual sum (so within a few
 *                  float32 roundings of it)
 *   last_rows:     [batch][H] each sequence's last position's final
 *                  hidden state (after the final norm), what lm_head reads
 *   pooled:        [Lw][heads][pool_rows][pool_cols] each head's weights
 *                  in blocks (attention.h), no head's N x N held
 *   top_keys, top_weights: [Lw][heads][n][top_k] and top_count
 *                  [Lw][heads][n]: each row's strongest keys (attention.h)
 *   lens:          [layers][n][lens_k] the logit lens (nostalgebraist,
 *                  2020): each layer's output through the final norm and
 *                  lm_head, its most probable tokens (the first among
 *                  equals) with their probabilities under the softmax
 *                  over the whole vocabulary; the last layer's is the
 *                  model's own next-token distribution
 * A row of weights or mean weights has keys entries: n, or with a cache
 * that held len positions, len + n (every position so far).
 */
struct xf_result {
    size_t layers, weight_layers, heads, n, keys, hidden, vocab, lens_k;
    size_t batch, captured; /* sequences; rows of each activation kept */
    float *weights, *mean_weights, *hidden_states, *rollout, *logits, *flow;
    float *resid, *z, *attn_out, *mlp_out, *last_rows;
    struct xf_candidate *lens;
    struct attn_measures measures; /* every layer's, or Lw's (above) */
    /* what xf_forward_again() keeps: each array's room, in its elements
     * (XF_RESULT_*), and the pass's scratch block */
    size_t room[XF_RESULT_ARRAYS];
    void *scratch;
    size_t scratch_bytes;
};

/* Where float array which (XF_RESULT_*, below XF_RESULT_FLOAT_ARRAYS) of
 * r lies. */
float **xf_result_array(struct xf_result *r, int which);

/* ----------------------------------------------------------------- plan */

/* The most attention configs one plan resolves: the kinds of call one
 * pass makes (transformer_units.h's XF_KIND_*: whether a layer's weights
 * are returned and whether its output is read, the rest the same for
 * every layer) for each kind of layer. */
enum { XF_PLAN_ATTN = 4 * XF_MAX_LAYER_KINDS };

/* The workspace block's parts. */
enum {
    XF_WS_HIDDEN,
    XF_WS_ROLL_A,
    XF_WS_ROLL_B,
    XF_WS_FFN,
    XF_WS_WIDEN,      /* a panel per member of the team (widen.h), for
                         16-bit matrices outside attn_forward() */
    XF_WS_STEP,       /* a token after a cache: its q, k, v, head outputs,
                         attention output and one row of scores */
    XF_WS_LENS,       /* the logit lens's rows, normed, and their logits */
    XF_WS_FLOW,       /* every layer's mean weights, for the flow */
    XF_WS_FLOW_GRAPH, /* the flow's graph (attention_flow_bytes()) */
    XF_WS_EARLIER,    /* with head measures: the tokens' earlier copies and
                         their sorting's scratch, [3][n] sizes */
    XF_WS_HOOK,       /* with interventions: the attention's output after
                         its projection [rows][H] (its head values are in
                         the core's result), and a sequence's head means
                         [heads D] */
    XF_WS_PARTS
};

/*
 * A pass planned once, for a model and a run: the layers it runs, its
 * team, its workspace and result sizes and its attention configs,
 * resolved once for every layer. Read it only through the functions
 * below; it borrows the model and the run's arrays, which must outlive
 * it.
 */
struct xf_plan {
    const struct xf_model *m;
    struct xf_run run;
    unsigned want;        /* run.want, 0 made XF_WANT_WEIGHTS */
    size_t layers_run;    /* all, or up to run.layer when nothing above it
                             is read */
    size_t weight_layers; /* Lw */
    unsigned team;
    size_t cache_len; /* the run's cache held this many; a pass
                         finding it holding another is refused */
    size_t batch;     /* sequences, 1 or more */
    size_t rows;      /* batch x n: the rows each phase goes over */
    bool hooked;      /* interventions or activations: every layer's
                         attention stops before its output projection,
                         which the pass applies after the edits */
    size_t keys;      /* a weights row's entries (xf_result) */
    bool step;        /* one token after a non-empty cache */
    bool ffn_packed;  /* the feed-forward's intermediate rows packed
                         between its products (xf_inter_floats()) */
    size_t result_count[XF_RESULT_ARRAYS]; /* by XF_RESULT_* */
    size_t stats_count;                    /* doubles of head_stats */
    size_t induction_count;                /* doubles of induction */
    size_t top_count; /* rows of top keys: Lw x heads x n */
    size_t ws_count[XF_WS_PARTS], ws_offset[XF_WS_PARTS], ws_bytes;
    size_t attn_bytes; /* the most one layer's attn_forward() holds */
    struct attn_config attn[XF_PLAN_ATTN]; /* resolved, attn_count of them */
    size_t attn_count;
    uint8_t attn_of[XF_MAX_LAYERS]; /* each layer's config */
};

/*
 * Check the model and the run and plan the pass. Fails naming "ids",
 * "type_ids" or "layer" for a run the model cannot take, and with
 * ATTN_E_TOO_BIG when the pass's sizes overflow.
 */
attn_status xf_plan(const struct xf_model *m, const struct xf_run *run,
                    struct xf_plan *out, struct attn_error *err);

/* Every byte xf_forward() allocates for the plan (its result, its
 * workspace, what each layer's attn_forward() holds at once, and a pool
 * for a team of more than one); SIZE_MAX when that overflows. */
size_t xf_plan_bytes(const struct xf_plan *plan);

/* Floating-point operations of the pass (2 per multiply-add). */
double xf_plan_flops(const struct xf_plan *plan);

/* ------------------------------------------------------------- forward */

/*
 * The forward pass (eval mode, no padding) of the planned run: the
 * embeddings, then per layer self-attention through attn_forward() and
 * the feed-forward, each with its norm where the arch puts it, then the
 * final norm. Every matrix product goes to cblas_sgemm (a cached token's
 * scores and values, one row, are plain loops). The bits are the same
 * for every thread count (attention.h, "Threading"). cancel: NULL, or a
 * flag another thread may raise to stop the pass (as attn_config.cancel).
 * On success the caller owns *out; release it with xf_result_free().
 */
attn_status xf_forward(const struct xf_plan *plan, const atomic_bool *cancel,
                       struct xf_result *out, struct attn_error *err);

/*
 * xf_forward() into the memory of the result of an earlier pass: *out
 * is that result, or zeroed for the first pass. Each of its arrays with
 * room for what the plan returns there, and the pass's scratch block,
 * which *out also keeps, is filled again in place; the others are freed
 * or allocated anew. A caller that runs passes of one size back to back
 * so reuses pages already in memory: fresh memory from the system comes
 * as pages the kernel zeroes on first touch, which at bert-base's 512
 * wordpieces with every layer's attention (151 MB of weights) is over a
 * tenth of a pass. *out holds the largest pass's memory until
 * xf_result_free(). No input of the run may lie in *out's memory (a
 * start taken from its resid, say): the pass frees or writes over it
 * before it reads it. On failure *out is freed, as xf_forward()'s.
 */
attn_status xf_forward_again(const struct xf_plan *plan,
                             const atomic_bool *cancel, struct xf_result *out,
                             struct attn_error *err);
void xf_result_free(struct xf_result *result);

/* ------------------------------------------------------------ the pieces */

/* y[r] = (x[r] - mean) / sqrt(var + eps) * w + b for r < rows, the
 * variance biased (divided by cols), as nn.LayerNorm; x and y may be the
 * same.  x, y: [rows][cols] */
void xf_layer_norm(const float *x, size_t rows, size_t cols, const float *w,
                   const float *b, float eps, float *y);

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for r < rows, the mean of
 * squares in double, as LLaMA's RMSNorm computes it in float32 or
 * better; x and y may be the same.  x, y: [rows][cols] */
void xf_rms_norm(const float *x, size_t rows, size_t cols, const float *w,
                 float eps, float *y);

/* x[i] = act(x[i]) for i < count, within 1e-5 of the exact value
 * relative to it, or 1e-20 absolutely far out on the negative side.
 * Every x86-64 build (vecmath.h) gives the same bits;
 * xf_activation_isa() runs the one named, for the tests that hold them
 * to it. */
void xf_activation(xf_act act, float *x, size_t count);
void xf_activation_isa(int isa, xf_act act, float *x, size_t count);

/* The same over rows [0, rows) of x, rows ld apart, cols to a row: the
 * bits xf_activation() gives each row, several rows' vectors at a time
 * when the rows are short (a product's blocks of outputs). */
void xf_activation_rows(xf_act act, float *x, size_t ld, size_t rows,
                        size_t cols);
void xf_activation_rows_isa(int isa, xf_act act, float *x, size_t ld,
                            size_t rows, size_t cols);

#endif
