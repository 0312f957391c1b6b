/*
 * attention.h - attnd's attention core: tokenizer, deterministic embeddings
 * and parameters, and a BLAS-backed multi-head attention forward pass.
 *
 * The core knows nothing of HTTP, JSON or images. Everything is float32,
 * row-major. Shapes are written next to each array as [dim][dim]...
 *
 * Error convention: every fallible function returns an attn_status
 * (ATTN_OK == 0) and, on failure, fills the caller's struct attn_error with
 * the name of the offending field and a message naming the value.
 *
 * Threading: the core has no global mutable state; any number of threads
 * may call it at once. One call splits its work into units whose
 * boundaries follow from the config's sizes alone (rows of K/V, blocks of
 * queries) and runs them on cfg->threads threads, so its results are
 * bit-identical for every thread count. Those threads are a pool the
 * caller keeps (struct attn_pool, cfg->pool), or else ones the call starts
 * for itself and joins before it returns. OpenBLAS must then run one thread per
 * product (openblas_set_num_threads(1), see attn_blas_single_thread()): its own
 * threading changes rounding with its thread count, and two levels of
 * threads would oversubscribe the cores. A program running T calls at once
 * on C cores gives each call max(1, C / T) threads.
 */
#ifndef ATTN_ATTENTION_H
#define ATTN_ATTENTION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- errors */

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_E_INVALID,  /* a value is out of range or inconsistent with another */
    ATTN_E_INPUT,    /* data is malformed: invalid UTF-8, NaN or Inf */
    ATTN_E_TOO_BIG,  /* sizes whose product overflows or exceeds a cap */
    ATTN_E_NOMEM,    /* an allocation failed */
    ATTN_E_CANCELLED /* the caller's cancel flag was raised */
} attn_status;

struct attn_error {
    char field[48];  /* e.g. "heads", "mask", "x"; "" when no field applies */
    size_t index[3]; /* position inside field, when n_index > 0 */
    int n_index;
    char message[256]; /* human-readable, names the field and the value */
};

/* Short stable name of a status, e.g. "invalid". */
const char *attn_status_name(attn_status status);

/* ------------------------------------------------------------- tokenizer */

struct attn_tokenize_options {
    bool keep_case;      /* false: lowercase and strip accents (BERT uncased) */
    bool special_tokens; /* true: wrap in [CLS] ... [SEP] */
    /* Strings kept whole wherever they occur in the text, byte for byte
     * and never lowercased, as transformers keeps a model's special tokens
     * ("[MASK]"); each is nonempty ASCII. NULL when n_never_split is 0. */
    const char *const *never_split;
    size_t n_never_split;
    const char *field; /* the name errors give the text; NULL: "sentence" */
};

struct attn_tokens {
    size_t count;
    char **text; /* [count] NUL-terminated UTF-8 strings */
};

/*
 * Split UTF-8 text the way BERT's BasicTokenizer does: whitespace splits,
 * each punctuation character and each CJK ideograph is a token of its own,
 * control characters are dropped. text need not be NUL-terminated.
 * At most max_tokens tokens (0: no cap); more is ATTN_E_TOO_BIG.
 * On success the caller owns *out; release it with attn_tokens_free().
 */
attn_status attn_tokenize(const char *text, size_t len,
                          const struct attn_tokenize_options *opts,
                          size_t max_tokens, struct attn_tokens *out,
                          struct attn_error *err);
void attn_tokens_free(struct attn_tokens *tokens);

/* At most the bytes attn_tokenize() allocates for len bytes of text (its
 * result and its scratch), so a caller can reserve them first. */
size_t attn_tokenize_bytes(size_t len);

/* ------------------------------------------------------- random streams */

/*
 * Every random number in attnd comes from a SplitMix64 stream keyed by
 * (seed, label): state0 = seed XOR fnv1a64(label), and draw n (from 0) is
 * mix64(state0 + (n + 1) * 0x9E3779B97F4A7C15). docs/math.md gives the full
 * spec.
 */
uint64_t attn_fnv1a64(const void *bytes, size_t len);
uint64_t attn_stream_key(uint64_t seed, const char *label, size_t label_len);
uint64_t attn_stream_draw(uint64_t key, uint64_t n);

/*
 * The embedding of one token: dim standard-normal floats from the stream
 * labelled "token:" + text, by Box-Muller. Same text, same vector.
 * out: [dim]
 */
void attn_embed_token(const char *text, size_t len, uint64_t seed, size_t dim,
                      float *out);

/* ---------------------------------------------------------------- widths */

/* The widths a weight matrix may be held in. A 16-bit or block-quantized
 * one (a checkpoint's, used in place) is widened to float32 a panel at a
 * time inside the products that read it, never whole. */
typedef enum attn_dtype {
    ATTN_F32 = 0, /* float */
    ATTN_F16,     /* IEEE half, as uint16_t */
    ATTN_BF16,    /* bfloat16 (a float's upper half), as uint16_t */
    /* ggml's block-quantized types (quant.h), as GGUF files hold them:
     * runs of blocks of 32 or 256 values, so a matrix's rows are a whole
     * number of blocks */
    ATTN_Q8_0,
    ATTN_Q4_0,
    ATTN_Q4_1,
    ATTN_Q5_0,
    ATTN_Q5_1,
    ATTN_Q4_K,
    ATTN_Q5_K,
    ATTN_Q6_K,
    ATTN_DTYPES /* how many there are */
} attn_dtype;

/* Values of one block of dtype: 1 for F32, F16 and BF16, 32 or 256 for a
 * quantized type. A count of values of dtype is a multiple of it. */
size_t attn_dtype_block(attn_dtype dtype);

/* Bytes of count values of dtype (count a multiple of its block). */
size_t attn_dtype_bytes(attn_dtype dtype, size_t count);

/* The name of dtype: safetensors' "F32", "F16", "BF16", or ggml's "Q8_0",
 * "Q4_K", ...; NULL past them. */
const char *attn_dtype_name(int dtype);

/* dst[i] = src[i] widened to float32 (exactly; a quantized value as
 * ggml's reference dequantizer gives it) for i < count, a multiple of
 * dtype's block. */
void attn_widen(const void *src, attn_dtype dtype, size_t count, float *dst);

/* ------------------------------------------------------------ parameters */

/*
 * Projection parameters in PyTorch's nn.Linear layout: weight is
 * [out_features][in_features] and y = x * weight^T + bias.
 * Any bias may be NULL (no bias). wo is NULL when there is no output
 * projection. bias_k and bias_v are nn.MultiheadAttention's add_bias_kv
 * rows, used only when the config has bias_kv.
 */
struct attn_params {
    const float *wq, *bq; /* [heads * d_k][d_model],  [heads * d_k]    */
    const float *wk, *bk; /* [kv_heads * d_k][d_ctx], [kv_heads * d_k] */
    const float *wv, *bv; /* [kv_heads * d_v][d_value], [kv_heads * d_v] */
    const float *bias_k;  /* [kv_heads * d_k]: a key row appended to K */
    const float *bias_v;  /* [kv_heads * d_v]: a value row appended to V */
    const float *wo, *bo; /* [d_out][heads * d_v],    [d_out]          */
    /* [d_k] each with cfg->qk_norm; [heads * d_k] and [kv_heads * d_k]
     * with cfg->qk_norm_whole; else unused. Not in the state_dict layout
     * below, which is nn.MultiheadAttention's */
    const float *q_norm, *k_norm;
    /* Instead of any of wq, wk, wv and wo (then NULL): the same matrix
     * held at a 16-bit width (a checkpoint's, used in place), for a
     * config with stored_matrices and params_checked. */
    struct attn_stored {
        const void *data; /* NULL: the float32 one above is used */
        attn_dtype dtype;
    } stored_wq, stored_wk, stored_wv, stored_wo;
};

/* The tensors of struct attn_params, in state_dict order. */
enum attn_param_slot {
    ATTN_PARAM_WQ,
    ATTN_PARAM_BQ,
    ATTN_PARAM_WK,
    ATTN_PARAM_BK,
    ATTN_PARAM_WV,
    ATTN_PARAM_BV,
    ATTN_PARAM_BIAS_K,
    ATTN_PARAM_BIAS_V,
    ATTN_PARAM_WO,
    ATTN_PARAM_BO,
    ATTN_PARAM_COUNT
};

/* One parameter tensor of a resolved config: the one statement of the
 * layout, read by the core and by anything that names tensors. */
struct attn_param_tensor {
    const char *name;      /* state_dict name, e.g. "q_proj.weight" */
    const char *module;    /* its nn.Linear, e.g. "q_proj" */
    const char *rows_what; /* how rows follow from the config, "heads x d_k" */
    enum attn_param_slot slot;
    size_t rows; /* out_features */
    size_t cols; /* in_features; a bias is [rows], drawn with its
                    weight's fan-in (bias_k and bias_v: k_proj's, v_proj's) */
    bool is_weight;
    bool required; /* explicit parameters must have it: every weight, and
                      bias_k and bias_v when the config has bias_kv */
};

struct attn_config; /* below */

/* attn_params_layout() flags */
enum { ATTN_LAYOUT_ALL_BIASES = 1u << 0 };

/*
 * The tensors a resolved projected config uses, in state_dict order.
 * Biases are listed when the config draws them, or all of them with
 * ATTN_LAYOUT_ALL_BIASES (explicit parameters may carry any bias);
 * bias_k and bias_v whenever the config has bias_kv.
 * Returns how many were written to out.
 */
size_t attn_params_layout(const struct attn_config *cfg, unsigned flags,
                          struct attn_param_tensor out[ATTN_PARAM_COUNT]);

/* Number of floats in tensor t: rows x cols for a weight, rows for a bias. */
size_t attn_param_count(const struct attn_param_tensor *t);

/* The field of p that holds slot, to set it. */
const float **attn_params_slot(struct attn_params *p,
                               enum attn_param_slot slot);

/* The tensor of p in slot, NULL when absent. */
const float *attn_params_tensor(const struct attn_params *p,
                                enum attn_param_slot slot);

/* ------------------------------------------------------------------ pool */

/*
 * Threads kept for forward passes, so that a call does not start and join
 * its own: the calling thread plus threads - 1 helpers, which spin briefly
 * after each job and then sleep. The caller owns the pool: it creates it
 * once, gives it to any number of calls through cfg->pool, and frees it
 * with attn_pool_free() after the last of them has returned. One call uses
 * it at a time; a call that finds it in use by another starts threads of
 * its own instead, so sharing a pool is safe, only slower.
 * threads: 1 to 64. On success the caller owns *out.
 */
struct attn_pool;
attn_status attn_pool_create(unsigned threads, struct attn_pool **out,
                             struct attn_error *err);
void attn_pool_free(struct attn_pool *pool);

/* The threads of a pool, the calling one included: fewer than asked for
 * when the system refused to start some. */
unsigned attn_pool_threads(const struct attn_pool *pool);

/* ---------------------------------------------------------------- config */

typedef enum attn_mode {
    ATTN_MODE_PROJECTED = 0, /* Q, K, V projections, heads, optional W_o */
    ATTN_MODE_BASIC          /* softmax(X * X^T) * X, no parameters      */
} attn_mode;

/* Heads of a projected config that leaves heads 0. */
#define ATTN_DEFAULT_HEADS 8

typedef enum attn_positional {
    ATTN_POS_NONE = 0,
    ATTN_POS_SINUSOIDAL, /* added to x and context before anything else */
    ATTN_POS_ROPE        /* rotary, applied to each head of q and k     */
} attn_positional;

/* Which values of a head rotary positions turn together. */
typedef enum attn_rope_pairing {
    ATTN_ROPE_INTERLEAVED = 0, /* (2i, 2i + 1): Meta's original layout */
    ATTN_ROPE_HALF /* (i, i + d_k/2): transformers' rotate_half, which
                      Hugging Face checkpoints of LLaMA, Mistral and Qwen
                      are laid out for */
} attn_rope_pairing;

/*
 * How rotary positions turn a head: one description for the core's
 * configs, a model's layers and the positional code. A zeroed struct is
 * RoPE's defaults: base 10000, interleaved pairs, every value of the head
 * turned, cos and sin as they are.
 */
struct attn_rotary {
    double base; /* 0 means 10000: pair i turns base^(-2i / dims) radians
                    a position */
    attn_rope_pairing pairing;
    size_t dims; /* 0 means the whole head; else the head's first dims
                    values turn (even, at most d_k) and the rest pass
                    (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor) */
    const double *inv_freq; /* NULL, or [dims / 2]: pair i turns
                               inv_freq[i] radians a position instead (a
                               scaled rope: LLaMA 3's, a linear one); each
                               finite and above 0 */
    double factor; /* 0 means 1: cos and sin multiplied by it (longrope's
                      attention factor) */
};

typedef enum attn_residual {
    ATTN_RESIDUAL_NONE = 0,
    ATTN_RESIDUAL_VALUE, /* output += V heads concatenated (ViT style) */
    ATTN_RESIDUAL_INPUT  /* output += x (after positional encoding)   */
} attn_residual;

/* What the caller wants back; a bit set of these. */
enum attn_want {
    ATTN_WANT_WEIGHTS = 1u << 0,
    ATTN_WANT_SCORES = 1u << 1,
    ATTN_WANT_Q = 1u << 2,
    ATTN_WANT_K = 1u << 3,
    ATTN_WANT_V = 1u << 4,
    ATTN_WANT_HEADS = 1u << 5,
    ATTN_WANT_OUTPUT = 1u << 6,
    ATTN_WANT_MEAN_WEIGHTS = 1u << 7,
    ATTN_WANT_WEIGHTS_RAW = 1u << 8,     /* the weights before dropout */
    ATTN_WANT_HEAD_STATS = 1u << 9,      /* head_stats and key_received */
    ATTN_WANT_VALUE_WEIGHTED = 1u << 10, /* value_weighted and its sum */
    ATTN_WANT_INDUCTION = 1u << 11,      /* induction, on a repeated input */
    ATTN_WANT_TOP_K = 1u << 12,          /* each row's strongest keys */
    ATTN_WANT_POOLED = 1u << 13          /* the weights pooled in blocks */
};

/* A row or column that no block of ATTN_WANT_POOLED takes. */
#define ATTN_POOL_NONE UINT32_MAX

/* The most keys ATTN_WANT_TOP_K keeps of a row. */
#define ATTN_MAX_TOP_K 256

/* The per-head measures of attention weights, in the answer's order
 * (docs/math.md, "Head measures"). */
enum attn_head_stat {
    ATTN_STAT_ENTROPY,   /* mean normalised entropy of the rows */
    ATTN_STAT_SINK,      /* mean weight of rows i >= 1 on position 0 */
    ATTN_STAT_PREVIOUS,  /* (1/N) sum over i >= 1 of A[i][i-1] */
    ATTN_STAT_DUPLICATE, /* on earlier copies of the query's token */
    ATTN_STAT_INDUCTION, /* on the tokens after those copies */
    ATTN_STAT_SELF,      /* mean of the diagonal */
    ATTN_STAT_DISTANCE,  /* mean over rows of sum_j A[i][j] |i - j| */
    ATTN_HEAD_STATS
};

/* Their names as the answer gives them, "entropy" ...; NULL past them. */
const char *attn_head_stat_name(int stat);

/* An additive mask value at or below this means "never", as -INFINITY
 * does: the pair gets weight 0 whatever its score. */
#define ATTN_MASK_NEVER (-1e30f)

/*
 * A zeroed struct is a valid start: projected mode, defaults everywhere.
 * Sizes left 0 are resolved by attn_config_resolve().
 */
struct attn_config {
    attn_mode mode;

    /* shapes of the inputs */
    size_t batch;   /* B, >= 1 (0 means 1) */
    size_t n_query; /* N, tokens per sequence, >= 1 */
    size_t d_model; /* width of x, >= 1 */
    size_t n_ctx;   /* M, context tokens; 0 = self-attention (M = N) */
    size_t d_ctx;   /* width of the context; 0 = d_model */
    bool cross;     /* true when a separate context is passed */
    /* V's own input, when keys and values come from different rows
     * (nn.MultiheadAttention's key and value, kdim != vdim): value is
     * [B][M][d_value], one row per context row; NULL: the context gives V
     * as it gives K. Only with a context, in mode projected, without
     * sinusoidal positions (which would have to be added to one and not
     * the other). */
    const float *value;
    size_t d_value; /* resolved: the width V is projected from (d_ctx
                       without a value input) */

    /* heads */
    size_t heads;    /* h; 0 means 8 in projected mode, 1 in basic mode */
    size_t kv_heads; /* 0 means heads; must divide heads (1 = multi-query) */
    size_t d_k;      /* per-head query/key size; 0 means d_model / heads */
    size_t d_v;      /* per-head value size; 0 means d_model / heads */
    size_t d_out;    /* 0 means d_model (heads * d_v with residual value
                        or without an output projection) */

    bool qkv_bias;    /* drawn parameters: W_q, W_k, W_v get a bias */
    bool no_out_proj; /* skip W_o: output = heads concatenated */
    bool value_wo;    /* with no_out_proj, the value-weighted norms are
                         still of the heads through params' W_o (d_model
                         outputs): a caller that edits the heads and
                         applies W_o itself (a transformer's hooked
                         layer) */
    bool out_bias;    /* drawn parameters: W_o gets a bias */

    bool has_scale; /* false: 1/sqrt(d_k) (projected) or 1 (basic) */
    float scale;

    attn_residual residual;
    attn_positional positional;
    struct attn_rotary rope; /* with positional 'rope' */
    /* 0, or scores (scaled) become softcap * tanh(score / softcap) before
     * any mask (Gemma 2's attn_logit_softcapping) */
    float softcap;
    /* each head of q and of k RMS-normalised with params->q_norm and
     * k_norm (weights [d_k]) and this epsilon after its projection and
     * before the rotation (Qwen3's q_norm and k_norm); explicit params
     * only */
    bool qk_norm;
    /* q and k each RMS-normalised over its whole projection instead, all
     * heads at once, with params->q_norm [heads * d_k] and k_norm
     * [kv_heads * d_k], after the projection and before the rotation
     * (OLMo 2's q_norm and k_norm); explicit params only, not with
     * qk_norm. qk_norm_eps is its epsilon too. */
    bool qk_norm_whole;
    float qk_norm_eps;

    float dropout; /* 0 <= p < 1, inverted dropout on the weights */
    uint64_t seed; /* parameters and dropout are drawn from it */

    /* masks; any combination; a masked pair gets weight 0 */
    bool causal;                /* query i may see keys j <= i */
    size_t window;              /* 0, or, with causal, query i may see
                                   context keys j > i - window only:
                                   itself and the window - 1 keys before
                                   it (Mistral's sliding window) */
    const uint8_t *mask;        /* [N][M], [B][N][M] or [B][h][N][M];
                                   nonzero = may attend */
    const float *mask_bias;     /* same shapes: added to the scaled scores
                                   (ALiBi, relative positions, 0 / -inf); a
                                   value <= ATTN_MASK_NEVER or -INFINITY means
                                   never; NaN and +Inf are refused */
    bool mask_batched;          /* mask and mask_bias have the leading [B] */
    bool mask_per_head;         /* they are [B][h][N][M] (PyTorch's 3-D
                                   attn_mask [B * h][N][M]); implies batched */
    const uint8_t *key_padding; /* [M] or [B][M]; nonzero = ignore the key */
    bool key_padding_batched;

    /* keys appended after the M context keys, as nn.MultiheadAttention
     * does; neither mask nor key_padding ever hides them */
    bool bias_kv;   /* params->bias_k and bias_v as key and value M */
    bool zero_attn; /* then a key and value of zeros */
    size_t n_keys;  /* resolved: M + bias_kv + zero_attn, the keys every
                       query row has */

    /* explicit parameters (caller-owned); NULL: drawn from seed */
    const struct attn_params *params;

    unsigned want;          /* bit set of enum attn_want; 0 means OUTPUT */
    unsigned want_internal; /* resolved: arrays of want the core computes
                               for its own use and does not return (the
                               weights and values value_weighted reads) */
    /* The measures' inputs. earlier: NULL, or [B][N] each token's last
     * earlier copy (SIZE_MAX: none) for head_stats' patterns, when
     * tokens are ids rather than rows of x (NULL: two tokens are the
     * same when their rows of x are the same bits). repeat_start,
     * repeat_period: with ATTN_WANT_INDUCTION, the queries from
     * repeat_start on are repeat_period tokens and then the same again.
     * top_k: with ATTN_WANT_TOP_K, the keys kept of a row, 1 to
     * ATTN_MAX_TOP_K. */
    const size_t *earlier;
    bool earlier_given; /* earlier comes with each call of a config planned
                           before it exists: nothing is found from x */
    size_t repeat_start, repeat_period, top_k;
    /* With ATTN_WANT_POOLED: pool_row [N] and pool_col [K] the block each
     * query and key falls in (ATTN_POOL_NONE: none), pool_rows x
     * pool_cols blocks, each the largest weight of its cells, or with
     * pool_mean their mean over the cells the masks allow. */
    const uint32_t *pool_row, *pool_col;
    size_t pool_rows, pool_cols;
    bool pool_mean;
    size_t max_elements;    /* cap on floats in the result and, apart,
                               on K and V and on drawn weights, which a
                               projected pass holds; 0 = no cap */
    unsigned threads;       /* threads for this call; 0 means 1; at most
                               64 and at most one per unit of work are used */
    struct attn_pool *pool; /* NULL, or the caller's pool, whose threads
                               (at most threads of them) the call runs on
                               when no other call is using it */
    /* NULL, or where the pass writes the weights it returns
     * (ATTN_WANT_WEIGHTS asked for, not only read for another array),
     * [B][h][N][K]: the caller's array, which out->weights then is and
     * attn_result_free() leaves alone, so that a caller keeping them in a
     * larger array of its own (a layer of a transformer's) need not copy
     * them, nor the pass allocate them. */
    float *weights_into;

    /* NULL, or a flag another thread may raise to stop this call: it is
     * read between units of work, and once it is true the call frees what
     * it holds and returns ATTN_E_CANCELLED. */
    const atomic_bool *cancel;

    bool resolved;        /* set by attn_config_resolve(); attn_forward() then
                             takes the config as it is. After resolving, change
                             only params, params_checked, threads, pool,
                             weights_into, cancel, and want to fewer arrays
                             than it was resolved for. */
    bool params_checked;  /* params hold every tensor the pass reads (a
                             tensor no path of this config reads, such as
                             W_v and W_o when only the weights are wanted,
                             may be NULL) and only finite values: drawn
                             (attn_params_draw(), attn_params_draw_tensor())
                             or checked before (attn_params_check()), so
                             attn_forward() does not look at each value
                             again */
    bool full_path;       /* take the full path (docs/math.md, "Forward
                             pass": whole rows of scores) even when
                             nothing asked for needs it: each query block's
                             rows of weights, then P V. Its output has
                             the bits of a call that returns the weights,
                             which the streaming path's need not. */
    bool stored_matrices; /* params may hold their matrices at a 16-bit
                             width (attn_params.stored_wq and the others): each
                             thread of a call then has a panel to widen them in,
                             which attn_forward_bytes() counts, and its
                             projections of two rows or more stream their
                             float32 or bfloat16 matrices in place through it
                             where the CPU has AVX-512. Set before
                             resolving. */
    bool bf16_dots;       /* with stored_matrices: projections of two rows or
                             more through a bfloat16 matrix round their rows
                             to bfloat16 and take the CPU's bfloat16 dot
                             products where it has them (transformer.h's
                             xf_run.bf16_dots says what that costs) */
};

/*
 * Fill in defaults and check every size and combination, without touching
 * data. Afterwards every size field of *cfg is nonzero and final, and
 * cfg->resolved is set.
 */
attn_status attn_config_resolve(struct attn_config *cfg,
                                struct attn_error *err);

/* The defaults attn_config_resolve() gives a rotary left 0 in part, for
 * heads d_k wide: dims d_k, base 10000, factor 1. */
void attn_rotary_defaults(struct attn_rotary *r, size_t d_k);

/* The factor the scores are scaled by, for a resolved config: cfg->scale
 * when given, else 1/sqrt(d_k) (projected) or 1 (basic). */
float attn_config_scale(const struct attn_config *cfg);

/* The names of the enums' values ("projected", "value", "rope", ...), as
 * the core's messages use them; NULL for a value out of range, so that
 * counting up from 0 until NULL lists them all. */
const char *attn_mode_name(int mode);
const char *attn_residual_name(int residual);
const char *attn_positional_name(int positional);

/*
 * Draw parameters for a resolved config from cfg->seed, as nn.Linear's
 * default init does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), each tensor from
 * the stream labelled by its state_dict name ("q_proj.weight", ...).
 * On success the caller owns *out; release it with attn_params_free().
 */
attn_status attn_params_draw(const struct attn_config *cfg,
                             struct attn_params *out, struct attn_error *err);
/* Free every tensor of params, which its holder allocated with malloc()
 * (attn_params_draw()'s, or a caller's own), and zero it. Not for
 * tensors borrowed from elsewhere, such as a checkpoint's. */
void attn_params_free(struct attn_params *params);

/* One tensor of the above, into out (attn_param_count(t) floats). Its
 * values depend on seed, t->name and t->cols only, so a caller may keep
 * and share them for every config with the same tensor. */
void attn_params_draw_tensor(uint64_t seed, const struct attn_param_tensor *t,
                             float *out);

/* What attn_forward() checks of explicit parameters for a resolved
 * config: every tensor it needs is there, every value finite. */
attn_status attn_params_check(const struct attn_config *cfg,
                              const struct attn_params *params,
                              struct attn_error *err);

/* ---------------------------------------------------------------- result */

/*
 * Arrays not asked for are NULL. Shapes, with B, h, g (kv_heads), N, and
 * K = n_keys (M context keys, then bias_k's and the zero key if any):
 *   weights, scores: [B][h][N][K]  (scores are scaled, before any mask,
 *                                   additive ones included)
 *   weights_raw:     [B][h][N][K]  (weights before dropout)
 *   mean_weights:    [B][N][K]     (mean over heads, after dropout)
 *   q:               [B][N][h * d_k]   (after rotary encoding)
 *   k:               [B][K][g * d_k]   (after rotary encoding)
 *   v:               [B][K][g * d_v]
 *   heads_out:       [B][N][h * d_v]
 *   output:          [B][N][d_out]
 *   fully_masked:    [B][N], 1 where every key was masked for that query
 *                    (in at least one head, with a per-head mask); those
 *                    rows have zero weights and zero head outputs there.
 *   head_stats:      [B][h][ATTN_HEAD_STATS] the measures of each head's
 *                    weights before dropout (docs/math.md), taken a few
 *                    rows at a time as the pass forms them; tokens are
 *                    the same as cfg->earlier says, or when their rows of
 *                    x are the same bits. Under cross-attention the keys
 *                    have no positions of the queries': previous_token,
 *                    duplicate_token, induction, self and distance are NaN.
 *   key_received:    [B][h][K] the mean weight each key receives from the
 *                    queries that may see it (0 when none may)
 *   value_weighted:  [B][h][N][K] |alpha_ij f_h(x_j)| (Kobayashi et al.
 *                    2020): the weights (after dropout) times the norm of
 *                    what key j carries through head h, f_h(x_j) = v_j
 *                    (value bias in) times W_O's columns of head h
 *                    (output bias out; the identity without out_proj)
 *   value_weighted_sum: [B][N][K] |sum_h alpha^h_ij f_h(x_j)|
 *   induction:       [B][h] on a repeated input, the mean over the second
 *                    copy's queries i of A[i][i - period + 1] (before
 *                    dropout): the token after the query's earlier copy
 *   pooled:          [B][h][pool_rows][pool_cols] the weights (before
 *                    dropout) of each block of cells: their largest, or
 *                    their mean over the allowed ones (0 for a block with
 *                    none), taken a few rows at a time
 *   top_keys, top_weights: [B][h][N][top_k] each row's keys of the largest
 *                    weights (before dropout) above 0, the strongest
 *                    first (the earlier key among equals), then 0s;
 *                    top_count [B][h][N] how many of the top_k each row
 *                    has
 */
/* The measures of each head's weights: head_stats, key_received,
 * induction, value_weighted and its sum, top_keys, top_weights, top_count
 * and pooled, as above. A call's result and a transformer pass's
 * (transformer.h) hold the same struct; arrays not asked for are NULL. */
struct attn_measures {
    double *head_stats, *key_received, *induction;
    float *value_weighted, *value_weighted_sum;
    uint32_t *top_keys, *top_count;
    float *top_weights;
    float *pooled;
};

/* Free every array of m and empty it. */
void attn_measures_free(struct attn_measures *m);

/* The arrays of struct attn_measures in one order, for code that treats
 * them alike (a transformer pass keeps each layer's). */
enum attn_measure_array {
    ATTN_MEASURE_HEAD_STATS,
    ATTN_MEASURE_KEY_RECEIVED,
    ATTN_MEASURE_INDUCTION,
    ATTN_MEASURE_VALUE_WEIGHTED,
    ATTN_MEASURE_VALUE_WEIGHTED_SUM,
    ATTN_MEASURE_TOP_KEYS,
    ATTN_MEASURE_TOP_COUNT,
    ATTN_MEASURE_TOP_WEIGHTS,
    ATTN_MEASURE_POOLED,
    ATTN_MEASURE_ARRAYS
};

/* One of them: where it sits in a struct attn_measures, its element's
 * bytes, and its entries in a call of the config (0: the call does not
 * give it). */
struct attn_measure_part {
    void **slot;
    size_t elem, count;
};

/* Every array of m as a call of the resolved cfg gives it, in the order
 * of enum attn_measure_array. */
void attn_measure_parts(const struct attn_config *cfg, struct attn_measures *m,
                        struct attn_measure_part out[ATTN_MEASURE_ARRAYS]);

struct attn_result {
    size_t batch, n_query, n_ctx, n_keys, heads, kv_heads, d_k, d_v, d_out;
    float *weights, *weights_raw, *scores, *mean_weights;
    float *q, *k, *v, *heads_out, *output;
    bool weights_lent; /* weights is the config's weights_into */
    uint8_t *fully_masked;
    size_t n_fully_masked;
    struct attn_measures measures;
};

/*
 * Multi-head attention forward pass.
 *   x:       [B][N][d_model]
 *   context: [B][M][d_ctx], or NULL for self-attention
 * cfg is resolved first unless cfg->resolved. On success the caller owns *out;
 * release it with attn_result_free(). On failure *out is left empty.
 */
attn_status attn_forward(const struct attn_config *cfg, const float *x,
                         const float *context, struct attn_result *out,
                         struct attn_error *err);
void attn_result_free(struct attn_result *result);

/*
 * Ask OpenBLAS for one thread per product, as the threading policy above
 * requires. This is process-wide state of OpenBLAS, not of the core: call
 * it once at start-up, before any attn_forward().
 */
void attn_blas_single_thread(void);

/* The name of the kernels OpenBLAS chose for this CPU (or was told to use
 * by OPENBLAS_CORETYPE), e.g. "Haswell": speeds are comparable only under
 * the same one. */
const char *attn_blas_core(void);

/* Bytes attn_forward() holds besides its result for a resolved config
 * (its one workspace block: positions, K and V or one key block of them,
 * the queries and head outputs a pass needs whole, per-thread tiles);
 * SIZE_MAX when that overflows. attn_config_resolve() holds its floats to
 * max_elements. */
size_t attn_workspace_bytes(const struct attn_config *cfg);

/* Bytes attn_forward() allocates in all for a resolved config: its result,
 * its workspace, the parameters it draws when cfg->params is NULL, and a
 * pool of its own when its team has more than one thread (counted even
 * with cfg->pool, which another call may be using). Thread stacks are
 * not counted. */
size_t attn_forward_bytes(const struct attn_config *cfg);

/* Of those, the bytes of the weights array a resolved config returns
 * (0 when it returns none, or writes them into cfg->weights_into): what
 * a caller planning to give weights_into later saves. Weights the pass
 * only reads for another array are its own, and not counted here. */
size_t attn_weights_bytes(const struct attn_config *cfg);

/* Floating-point operations of a call for a resolved config (2 per
 * multiply-add), the measures it returns included: for budgets, metrics
 * and benchmarks. */
double attn_flops(const struct attn_config *cfg);

#endif
