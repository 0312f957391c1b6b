/*
 * request.h - an /attention request, decoded from a JSON body or from GET
 * query parameters, validated, and ready for the core.
 *
 * Every field a client can send is a row of the table in
 * request_fields.c: its name, kind, range, default, where it is accepted,
 * and how the config echo shows it. The steps that read the fields are in
 * request.c (order and resolution), request_input.c (sentence, tokens,
 * embeddings, context), request_mask.c, request_params.c and
 * request_query.c (GET parameters and the image options).
 */
#ifndef ATTND_REQUEST_H
#define ATTND_REQUEST_H

#include "attention.h"
#include "tokenizer.h"
#include "transformer.h"
#include "drawn_cache.h"
#include "budget.h"
#include "heatmap.h"
#include "image_format.h"
#include "problem.h"
#include "request_intervene.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct models;
struct models_entry;

/* What a request runs on, decided once as it is decoded: the random
 * weights of the seed, or a loaded checkpoint ("model"). Every stage
 * after decoding goes by it, through its kind's operations (answer.h). */
enum request_kind { REQUEST_RANDOM, REQUEST_MODEL, REQUEST_KINDS };

/* Limits from the server's flags; every request is held to them. */
struct request_limits {
    struct models *models; /* the loaded checkpoints; NULL: none */
    size_t max_tokens;     /* per sequence */
    size_t max_dim;        /* d_model, d_k, d_v, d_out, embedding width */
    size_t max_heads;
    size_t max_batch;
    size_t max_output; /* floats in one response */
    size_t max_flops;  /* estimated work of one request; 0: no cap */
};

/* One input sequence set: x [batch][n][d] and, for text, its tokens. */
struct request_input {
    bool present;
    bool from_text;            /* sentence or tokens (else embeddings) */
    bool batched;              /* the embeddings had a batch dimension */
    const char *pointer;       /* JSON pointer of the input, e.g. "/sentence" */
    struct attn_tokens tokens; /* owned; count == n for text input */
    float *x;                  /* owned, [batch][n][d] */
    size_t batch, n, d;
};

/* What a PNG answer shows. */
enum request_head_kind { HEAD_ONE, HEAD_MEAN, HEAD_ALL };

/* What a model's PNG shows: one layer's heads (as head says), every
 * layer x head as tiles, or the rollout. Without a model only
 * VIEW_HEADS. VIEW_AUTO: model view for "layer": "all", else heads. */
enum request_view { VIEW_AUTO, VIEW_HEADS, VIEW_MODEL, VIEW_ROLLOUT };

/* A model's image with or without the special tokens the tokenizer
 * added ([CLS], and each [SEP] that ends a sentence). */
enum request_special { SPECIAL_SHOW, SPECIAL_HIDE };

/* The colour scale of an image of several matrices (heatmap.h's
 * HEATMAP_SCALE_*). SCALE_AUTO: per tile in a model's view=model, shared
 * otherwise. */
enum request_color_scale { SCALE_AUTO, SCALE_SHARED, SCALE_TILE };

/* How an image shows a long input (heatmap.h's pooling): POOL_AUTO pools
 * by max a matrix over HEATMAP_POOL_AUTO_SIDE rows or columns, or in
 * blocks of pool_size when it is given; POOL_MAX and POOL_MEAN always
 * pool (blocks of pool_size, or automatic); POOL_NONE never. */
enum request_pool { POOL_AUTO, POOL_NONE, POOL_MAX, POOL_MEAN };

struct request_png {
    enum image_format format; /* IMAGE_JSON: no image, the JSON answer */
    enum request_head_kind head_kind;
    size_t head;  /* for HEAD_ONE */
    size_t batch; /* which sequence */
    enum heatmap_colormap colormap;
    unsigned cell; /* 0: automatic */
    bool labels;
    enum request_view view;
    enum request_special special;
    enum request_color_scale color_scale;
    enum request_pool pool;
    size_t pool_size; /* tokens a block side; 0: automatic */
    /* the most bytes the image's encoding can have, measured with the
     * size when its format bounds it (image_format.h); 0 otherwise */
    size_t bytes;
    /* the image's size in pixels, measured when the answer is planned
     * (answer.h), before anything is computed */
    int width, height;
};

/* A request on a loaded model (request_model.c), of kind REQUEST_MODEL. */
/* The block side (1: not pooled) and the reduction an image of an n x m
 * matrix takes: the one statement of when and how pooling happens, read
 * by the image (render_pool.c) and by a model's pass that pools as it
 * goes (request_model.c). */
void request_pool_block(const struct request_png *o, size_t n, size_t m,
                        size_t *k, enum heatmap_pool *kind);

struct request_model {
    struct models_entry *entry;      /* borrowed from the server */
    struct tok_encoding enc;         /* owned: the model's tokens */
    struct xf_run run;               /* its ids point into enc */
    struct xf_plan *plan;            /* owned: of run, made once it is whole;
                                        NULL until then, or when nothing is
                                        computed (kept apart so that a request
                                        on random weights does not carry it) */
    bool pair;                       /* sentence_b was given */
    uint32_t *pool_at;               /* owned: [2][enc.count] each position's
                                        block as a query and as a key, when a
                                        pooled image's blocks are taken by the
                                        pass (run.pool_row, run.pool_col) */
    struct request_interventions iv; /* owned: ablation and attribution */
    /* enc was made by the caller before decoding (a chat's rendered
     * prompt, a prompt of token ids): no sentence is read */
    bool encoded;
};

/* Extra arrays a client can ask for beyond the core's own. */
enum request_extra {
    REQUEST_WANT_EMBEDDINGS = 1u << 0,
    REQUEST_WANT_PARAMS = 1u << 1
};

/* What the numbers of an explicit mask are: "auto" reads booleans, and
 * numbers all 0 or 1, as boolean, other numbers as additive. */
enum request_mask_type { MASK_AUTO, MASK_BOOLEAN, MASK_ADDITIVE };

/* What true means in a boolean mask: may attend (SDPA's), or is masked
 * (nn.MultiheadAttention's attn_mask). */
enum request_mask_convention { MASK_ALLOW, MASK_BLOCK };

/* Where a request's parameters come from, as the config echo says it. */
enum request_params_source {
    PARAMS_NONE, /* mode basic: there are none */
    PARAMS_SEED, /* drawn from the seed */
    PARAMS_GIVEN /* the client's state_dict */
};

/* The logit lens's tokens a layer and position when logit_lens_k is not
 * given. */
#define REQUEST_LOGIT_LENS_K 5

/* The keys sparse_weights keeps of a row when top_k is not given. */
#define REQUEST_TOP_K 8

/* The induction probe's tokens before they repeat, when probe_length is
 * not given: TransformerLens' demos use 50. */
#define REQUEST_PROBE_LENGTH 50

/* A model's input that needs no text. */
enum request_probe { PROBE_NONE = 0, PROBE_INDUCTION };

/* How a model's products through bfloat16 weights are computed: exactly
 * in float32, or with the activations rounded to bfloat16 and the CPU's
 * bfloat16 dot products (xf_run.bf16_dots), where it has them. */
enum request_products { PRODUCTS_FLOAT32 = 0, PRODUCTS_BFLOAT16 };

struct request {
    enum request_kind kind;
    struct request_input input, context;
    struct request_input value; /* V's own input (kdim != vdim), or none */
    struct attn_config cfg;     /* resolved before the request is accepted */
    struct attn_params params;  /* owned when given; leased when drawn */
    enum request_params_source params_source;
    struct drawn_lease params_lease; /* the drawn ones, until freed */
    uint8_t *mask, *key_padding;     /* owned */
    float *mask_bias;                /* owned: an additive mask */
    const char *mask_name;           /* "none", "causal" or "explicit" */
    int mask_type;         /* enum request_mask_type: as asked, then as read */
    int mask_convention;   /* enum request_mask_convention */
    const char *mask_form; /* an explicit mask's shape, e.g. "[B][N][M]" */
    int mask_rank;         /* a mask of a matrix per head: its rank and */
    size_t mask_dims[4];   /* dimensions, checked against the heads */
    /* options read through the field table that the config holds only
     * in another form */
    bool lowercase, special_tokens, bias, out_proj, out_bias;
    bool add_special_tokens; /* a model's tokenizer adds its own tokens */
    size_t logit_lens_k;     /* tokens a layer and position of the logit
                                lens (a model's "logit_lens") */
    int probe;               /* enum request_probe */
    int products;            /* enum request_products */
    size_t probe_length;     /* the probe's tokens before they repeat */
    uint64_t probe_seed;     /* the stream its tokens are drawn from */
    size_t precision;        /* significant digits; 0: shortest round-trip */
    bool compute;   /* false: "return": [] asks for tokens and config */
    unsigned extra; /* bit set of enum request_extra */
    uint64_t given; /* bit i: the client sent request_fields[i] */
    uint64_t in_body; /* bit i: the body names request_fields[i] */
    struct drawn_cache *drawn; /* borrowed: where token embeddings are
                                  kept; NULL draws each */
    struct budget_hold *hold;  /* borrowed: what decoding reserves its
                                  memory on; NULL counts nothing */
    struct request_png png;
    struct request_model model;
};

void request_init(struct request *req);
void request_free(struct request *req);

/*
 * Decode and validate a JSON body of len bytes, with the image options the
 * URL gave (request_parse_image() first). On failure fills *pb (the problem
 * to answer with) and returns false; the request may hold partial state
 * and must still be freed.
 */
bool request_parse_json(struct request *req, const char *body, size_t len,
                        const struct request_limits *lim, struct problem *pb);

/*
 * The same from GET query parameters, given as (key, value) pairs; every
 * scalar option of the JSON form is accepted, plus "context" (a context
 * sentence) and "return" (comma-separated). PNG options are skipped here.
 */
struct request_param {
    const char *key, *value;
};
bool request_parse_query(struct request *req, const struct request_param *p,
                         size_t n, const struct request_limits *lim,
                         struct problem *pb);

/* The same with each value's length, value_len[i] the bytes of
 * p[i].value, NULs (%00) included: a text (sentence, sentence_b, context)
 * keeps them all, and request_query_values_ok() is checked first.
 * request_parse_query() reads each value to its first NUL. */
bool request_parse_query_n(struct request *req, const struct request_param *p,
                           const size_t *value_len, size_t n,
                           const struct request_limits *lim,
                           struct problem *pb);

/* Whether only texts (sentence, sentence_b, context) among the
 * parameters hold a NUL (%00): a 422 naming the first other one that does
 * (every other reader takes a value as a C string, which would end
 * there). For GET and POST alike, before request_parse_image(). */
bool request_query_values_ok(const struct request_param *p,
                             const size_t *value_len, size_t n,
                             struct problem *pb);

/* Whether key is one of the query parameters that shape a PNG answer:
 * format, head, view, batch, colormap, cell, labels, special,
 * color_scale. */
bool request_is_png_param(const char *key);

/*
 * Image options (format, head, view, batch, colormap, cell, labels,
 * special, color_scale, pool, pool_size) from query parameters; other
 * keys are ignored here. accepted: the format the Accept header asked for
 * (image_format_accepted()), which format= in the URL decides over.
 * Called before the body or the other parameters are decoded, so that the
 * config is resolved once, for what the answer shows; the head and batch
 * are checked against it then.
 */
bool request_parse_image(struct request *req, const struct request_param *p,
                         size_t n, enum image_format accepted,
                         struct problem *pb);

/* The numbers a model request's answer returns (request_model.c). */
size_t request_model_output(const struct request *req);

/* The JSON pointer of the request field that a core error's field names
 * ("heads" -> "/heads", "x" -> the input's pointer); "" when none
 * (request_fields.c, by the field table). */
const char *request_pointer_of(const struct request *req,
                               const char *core_field);

#endif
